"""Scan schedules (cumsum, logcumsumexp, cummax, associative_scan): rows in parallel, each row's update in order."""
from __future__ import annotations

from typing import Any

import halide as hl

from ..meta import ScheduleSpec
from . import pointwise
from .common import GUARD, Plan, Recorder, fuse_all, update_pure_vars


def default_params(gpu: bool, vector_width: int) -> dict[str, int]:
    """The pointwise tunables (the outputs that read the scan are pointwise loops), and ``scan_wg``: rows per
    work-group on GPUs (each work-item one row; a row's scan is serial, its loads strided by the row length)."""
    return {**pointwise.default_params(gpu, vector_width), **({"scan_wg": 64} if gpu else {})}


def _rows(rec: Recorder, plan: Plan, stage: Any, label: str, name: str, rows: list[hl.Var], spec: ScheduleSpec) -> None:
    """``stage`` parallel over ``rows`` (its pure Vars, innermost first); its RDom, if any, stays serial inside."""
    if not rows:
        if plan.caps.gpu:  # one row: nothing to spread (Inductor gives a long single row to a split scan instead)
            rec(stage, label, "gpu_single_thread")
        return
    x = fuse_all(rec, stage, rows, label, prefix=name) if len(rows) > 1 else rows[0]
    if plan.caps.gpu:
        rec(stage, label, "gpu_tile", x, hl.Var(f"{name}_wg"), hl.Var(f"{name}_wi"), spec.get("scan_wg", 64), GUARD)
    else:
        rec(stage, label, "parallel", x)


def scan_rows(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """Each scan (and any reduction beside it) computed first: its initial values over every point, then its update
    per row in parallel; the outputs afterwards as pointwise loops."""
    for f in plan.reductions():
        rec(f, f.name(), "compute_root")
        if plan.caps.gpu and f.has_update_definition():
            rows = {v.name() for v in update_pure_vars(f, 0)}
            order = [v for v in f.args() if v.name() in rows] + [v for v in f.args() if v.name() not in rows]
            if rows and len(rows) < len(order):
                # rows innermost in memory: the work-items (one row each) step through the scan side by side
                rec(f, f.name(), "reorder_storage", *order)
        _rows(rec, plan, f, f.name(), f"{f.name()}_p", list(f.args()), spec)
        for i in range(f.num_update_definitions()):
            rows = update_pure_vars(f, i)
            _rows(rec, plan, f.update(i), f"{f.name()}.update({i})", f"{f.name()}_u{i}", rows, spec)
    for out in plan.outputs():
        pointwise.schedule_output(rec, plan, out, spec)

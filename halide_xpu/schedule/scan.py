"""Scan schedules (cumsum, logcumsumexp, cummax, associative_scan): rows in parallel, each row's update in order;
a chunked scan (halide_xpu/scan.py ``_chunked``) in one kernel, a work-group per row."""
from __future__ import annotations

import re
from typing import Any

import halide as hl

from ..meta import ScheduleSpec
from . import pointwise
from .common import GUARD, NotApplicable, Plan, Recorder, fuse_all, update_pure_vars


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


CHUNKS_LOCAL_MAX = 32768  # bytes of a row's chunk scans held in a work-group's local memory (scan_chunks)


def _chunks_on_second_dim(rec: Recorder, stage: Any, label: str, c: hl.Var) -> None:
    """``stage`` a work-item per chunk ``c`` on the work-group's second dim, as the stages that also spread a chunk's
    points (on the first dim, the work-group took chunks x max(chunks, lanes) work-items: 63 x 63 for rows of 2000,
    past CUDA's 1024)."""
    one = hl.Var(f"{c.name()}_one")
    rec(stage, label, "split", c, c, one, 1, GUARD)
    rec(stage, label, "gpu_threads", one, c)


def scan_chunks(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """GPU, a chunked scan (pairs ``X_loc`` / ``X_pre`` of halide_xpu/scan.py): one kernel, a work-group per row (one
    for a single row: it had one work-item scan all of it, 7.0 us against Triton's 0.9 on the H200) and a work-item
    per chunk. Each work-item scans its chunk into local memory (its loads unrolled: in flight
    together), the chunk totals combine in log2(chunks) steps, a work-item per chunk (was one work-item's serial
    loop, with a barrier between its steps: 15 for 16 chunks), then the work-group stores the outputs, adjacent
    work-items adjacent points. Was five kernels (each Func's pure and update stage on its own); the rows of
    few-row scans (HF Llama's position_ids, 8 rows of 512) went to Triton before the chunked form."""
    names = list(plan.meta.reductions)
    pres = [n[:-4] + "_pre" for n in names if n.endswith("_loc")]
    pairs = [(plan.funcs.get(p[:-4] + "_loc"), plan.funcs.get(p)) for p in pres]
    # each pair's doubling steps of the chunk totals (X_pre_s0 .. X_pre_s<k>, then X_pre), looked up by the
    # algorithm's names (Halide suffixes Func names made twice in a process: ``X_pre$1``); sources harvested before
    # the steps hold X_pre alone, with a serial update
    steps = [[plan.funcs[n] for n in names
              if re.fullmatch(re.escape(p) + r"_s\d+", n) and isinstance(plan.funcs.get(n), hl.Func)] for p in pres]
    if (not plan.caps.gpu or not pairs or len(names) != 2 * len(pairs) + sum(map(len, steps))
            or any(b is None for _, b in pairs)):
        raise NotApplicable("not a chunked scan")
    widths = {t.bytes() for loc, pre in pairs for f in (loc, pre) for t in f.types()}
    if len(widths) > 1:  # mixed widths go to per-launch global scratch (separate_local_widths), which corrupted
        # the OpenCL CPU device's heap here (cummax of uint8: uint8 values beside int64 indices)
        raise NotApplicable(f"chunk scans of mixed element widths {sorted(widths)}")
    outs = plan.outputs()
    shape = [v.name() for v in outs[0].args()]
    if any([v.name() for v in o.args()] != shape for o in outs):
        raise NotApplicable("outputs of different dims")
    scanned = {v.name for v in plan.meta.loop_vars if v.reduction}  # the scanned dim (the outputs may broadcast
    # the scan over dims it lacks: HF Llama's packed-sequence check scans 512 position ids for each of 8 rows)
    axis = [v for v in outs[0].args() if v.name() in scanned]
    length = plan.var_extent(outs[0], axis[0]) if len(axis) == 1 else None
    chunk = plan.funcs.get(f"{names[0]}_len")  # an int the algorithm defines beside the chunk's Funcs
    width = sum(t.bytes() for loc, _ in pairs for t in loc.types())
    budget = min(CHUNKS_LOCAL_MAX, plan.caps.local_mem // 2) if plan.caps.local_mem else CHUNKS_LOCAL_MAX
    if length is None or chunk is None or length * width > budget:
        raise NotApplicable("a row's chunks do not fit local memory")
    anchor = outs[0]
    block, oj = hl.Var("scan_row"), hl.Var("scan_oj")
    count = -(-length // chunk)  # chunks per row
    if count > plan.caps.max_work_group:  # a work-item per chunk in one work-group
        raise NotApplicable(f"{count} chunks per row, past the work-group's {plan.caps.max_work_group} work-items")
    lanes = chunk  # the chunk's points across work-items too (adjacent work-items store adjacent points): at most
    while lanes > 1 and lanes * count > plan.caps.max_work_group:  # the work-group's limit, the rest of the chunk
        lanes //= 2  # a serial loop inside each work-item
    for o in outs:  # work-item c stores its chunk's points (serially); work-groups over the rows
        o_rows = [v for v in o.args() if v.name() != axis[0].name()]
        oc = hl.Var("scan_oc")
        rec(o, o.name(), "split", axis[0], oc, oj, chunk, GUARD)
        if o_rows:
            row = fuse_all(rec, o, o_rows, o.name(), prefix="scan_row") if len(o_rows) > 1 else o_rows[0]
        else:  # one row (HF Llama's packed-sequence check: 1 x 512): one work-group, its block loop of extent 1
            row, c = hl.Var("scan_row"), hl.Var("scan_c")
            rec(o, o.name(), "split", oc, row, c, count, GUARD)
            oc = c
        inner = oj
        if lanes < chunk:
            inner = hl.Var("scan_ol")
            rec(o, o.name(), "split", oj, oj, inner, lanes, GUARD)
            rec(o, o.name(), "reorder", oj, inner, oc, row)
        else:
            rec(o, o.name(), "reorder", oj, oc, row)
        rec(o, o.name(), "gpu_blocks", row)
        rec(o, o.name(), "gpu_threads", inner, oc)
        if o is not anchor:
            rec(o, o.name(), "compute_with", anchor, oj)
        block = row
    for (loc, pre), own in zip(pairs, steps):
        j, c = loc.args()[:2]
        rec(loc, loc.name(), "compute_at", anchor, block)
        # chunks innermost in local memory: each of a chunk's serial steps has the work-items (one chunk each) touch
        # adjacent words (chunk-length strides put them all in one bank)
        rec(loc, loc.name(), "reorder_storage", c, j, *loc.args()[2:])
        # the chunk's points loaded by the whole work-group (adjacent work-items adjacent points, as the outputs
        # store them): one work-item per chunk loading its points in a loop had each load wait for the one before
        if lanes < chunk:
            jo, ji = hl.Var(f"{loc.name()}_jo"), hl.Var(f"{loc.name()}_ji")
            rec(loc, loc.name(), "split", j, jo, ji, lanes, GUARD)
            rec(loc, loc.name(), "reorder", jo, ji, c, *loc.args()[2:])
            rec(loc, loc.name(), "unroll", jo)
            j = ji
        rec(loc, loc.name(), "gpu_threads", j, c)
        j, c = loc.args()[:2]
        _chunks_on_second_dim(rec, loc.update(0), f"{loc.name()}.update(0)", c)
        rec(loc.update(0), f"{loc.name()}.update(0)", "unroll", loc.rvars(0)[0])  # the chunk's loads in flight
        for step in own + [pre]:
            rec(step, step.name(), "compute_at", anchor, block)  # each step a loop over the chunks, a barrier after
            _chunks_on_second_dim(rec, step, step.name(), step.args()[0])
        if pre.has_update_definition():  # older sources: a serial walk over the chunk totals, on one work-item
            rec(pre.update(0), f"{pre.name()}.update(0)", "unscheduled")

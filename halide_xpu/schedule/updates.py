"""Indirect and accumulating stores (Halide updates over a store's domain): atomic, racing or column-parallel."""
from __future__ import annotations

import re
from typing import Any, Optional

import halide as hl

from ..meta import ScheduleSpec
from .common import GUARD, Plan, Recorder, fuse_all, pow2_floor, total

# the host splits an update's parallel loop into tasks of at least this many points
HOST_MIN_TASK = 4096


def schedule_updates(rec: Recorder, plan: Plan, out: hl.Func, label: str, spec: ScheduleSpec) -> None:
    """Schedule every update of ``out`` (upstream: one per indirect or accumulating store, over all its RVars):
    - an accumulation (the update reads its own element: ``+=``, bf16's add-and-round) of a 32/64-bit type runs
      atomically over every RVar, as Triton does (Halide has no 8/16-bit atomics: "requires a mutex lock");
    - a plain indirect store races over every RVar, as in Triton and eager CUDA;
    - narrow accumulations, and stores that write an element several times on purpose (the last write wins:
      ``KernelMeta.ordered_stores``), run the RVars that index the output directly in parallel (one work-item
      per output column) and the others serially inside, in loop order: deterministic, no atomics;
    - with no such RVar, or ``parallel_updates=0`` (the last-resort schedule), serially (one GPU work-item)."""
    for i in range(out.num_update_definitions()):
        stage, lbl = out.update(i), f"{label}.update({i})"
        domain = list(out.rvars(i))
        mode, rvars = update_mode(rec, plan, out, i, spec)
        if mode == "serial":  # one GPU work-item; on the host Halide's serial loop, said explicitly
            rec(stage, lbl, "gpu_single_thread" if plan.caps.gpu else "unscheduled")
            continue
        if mode == "ordered":
            direct = {r.name() for r in rvars}
            inner = [r for r in domain if r.name() not in direct]  # (RVar == RVar is an Expr, not a bool)
            rec(stage, lbl, "reorder", *inner, *rvars)  # serial loops innermost, in their order
            rec(stage, lbl, "allow_race_conditions")  # distinct direct coordinates: distinct elements
        else:
            race_or_atomic(rec, stage, lbl, mode)
        extents = dict(zip([r.name() for r in domain], _dom_extents(plan, len(domain))))
        n = total([extents.get(r.name()) for r in rvars])
        fused = fuse_all(rec, stage, rvars, lbl, f"{label}_u{i}")
        outer, inner_ = hl.RVar(f"{label}_u{i}_wg"), hl.RVar(f"{label}_u{i}_wi")
        if plan.caps.gpu:
            wg = spec.get("wg", 256) if n is None else max(plan.min_wg, min(spec.get("wg", 256), pow2_floor(n)))
            rec(stage, lbl, "gpu_tile", fused, outer, inner_, wg, GUARD)
        elif n is None or n >= 2 * HOST_MIN_TASK:
            per_task = HOST_MIN_TASK if n is None else max(HOST_MIN_TASK, -(-n // (4 * plan.caps.parallelism)))
            rec(stage, lbl, "split", fused, outer, inner_, per_task, GUARD)
            rec(stage, lbl, "parallel", outer)


def update_mode(rec: Recorder, plan: Plan, out: hl.Func, i: int, spec: ScheduleSpec) -> tuple[str, list[Any]]:
    """How update ``i`` of ``out`` runs (see ``schedule_updates``): ``atomic``, ``race``, ``ordered`` or ``serial``,
    and the RVars that run in parallel (``ordered``: those indexing the output directly)."""
    rvars = list(out.rvars(i))
    names = {_expr_text(a) for a in out.update_args(i)}
    direct = [r for r in rvars if r.name() in names]
    accumulates = bool(re.search(rf"\b{re.escape(out.name())}\(", _expr_text(out.update_value(i))))
    ordered = plan.is_named(out, plan.meta.ordered_stores) or (accumulates and out.type().bits() < 32)
    if not spec.get("parallel_updates", 1) or not rvars or bool(names & {v.name() for v in out.args()}):
        return "serial", []
    if ordered and not direct:
        rec.note(f"{out.name()}.update({i}): no RVar indexes the output directly: serial")
        return "serial", []
    if ordered:
        return "ordered", direct
    return ("atomic" if accumulates else "race"), rvars


def race_or_atomic(rec: Recorder, stage: Any, lbl: str, mode: str) -> None:
    if mode == "atomic":
        rec(stage, lbl, "atomic", True)  # a read-modify-write of one element: no associativity proof needed
    else:
        rec(stage, lbl, "allow_race_conditions")


def _expr_text(e: Any) -> str:
    """An Expr as Halide prints it (``str`` wraps it in ``<halide.Expr of type ...: ...>``)."""
    return re.sub(r"^<halide\.Expr of type [^:]*: (.*)>$", r"\1", str(e), flags=re.S)


def _dom_extents(plan: Plan, count: int) -> list[Optional[int]]:
    """Static extents of the RVars of a store's domain (upstream's ``odom``: the loop vars outside the reduction;
    ``idom``: all of them, in order); None where unknown."""
    outer = [v.static_extent for v in plan.meta.loop_vars if not v.reduction]
    every = [v.static_extent for v in plan.meta.loop_vars]
    return outer if len(outer) == count else every if len(every) == count else [None] * count


def schedule_error_word(err: hl.Func, checks: list[hl.Func], gpu: bool) -> list[str]:
    """The check pipeline's ``hx_error`` (kernel.device_check): each check Func computed over its domain first (in
    the RDom's ``where`` it would be inlined, and Halide's bounds solver takes minutes on a deep index such as max
    pooling's argmax offset); the error word's 0 in one work-item, each update over its check's domain fused and
    tiled into work-groups, an atomic max that only failing points run."""
    rec = Recorder()
    for check in checks:
        args = list(check.args())
        rec(check, check.name(), "compute_root")
        if not args:
            if gpu:
                rec(check, check.name(), "gpu_single_thread")
            continue
        x = fuse_all(rec, check, args, check.name(), f"{check.name()}_c") if len(args) > 1 else args[0]
        outer, inner = hl.Var(f"{check.name()}_wg"), hl.Var(f"{check.name()}_wi")
        if gpu:
            rec(check, check.name(), "gpu_tile", x, outer, inner, 256, GUARD)
        else:
            rec(check, check.name(), "split", x, outer, inner, HOST_MIN_TASK, GUARD)
            rec(check, check.name(), "parallel", outer)
    rec(err, "hx_error", "compute_root")
    if gpu:
        rec(err, "hx_error", "gpu_single_thread")
    for i in range(err.num_update_definitions()):
        stage, lbl = err.update(i), f"hx_error.update({i})"
        rvars = list(err.rvars(i))
        if not rvars:
            rec(stage, lbl, "gpu_single_thread" if gpu else "unscheduled")
            continue
        rec(stage, lbl, "atomic", True)
        fused = fuse_all(rec, stage, rvars, lbl, f"hx_error_u{i}")
        outer, inner = hl.RVar(f"hx_error_u{i}_wg"), hl.RVar(f"hx_error_u{i}_wi")
        if gpu:
            rec(stage, lbl, "gpu_tile", fused, outer, inner, 256, GUARD)
        else:
            rec(stage, lbl, "split", fused, outer, inner, HOST_MIN_TASK, GUARD)
            rec(stage, lbl, "parallel", outer)
    return rec.lines

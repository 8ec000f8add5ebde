"""GPU work-group reduction primitives shared by the row and column forms: partials across a work-group's
work-items (``rfactor``), register accumulators, placement on threads, the in-group fold."""
from __future__ import annotations

from typing import Optional

import halide as hl

from ..meta import ScheduleSpec
from .common import GUARD, Recorder, fuse_all


def work_group_per_result(rec: Recorder, f: hl.Func, args: list[hl.Var], wg: int, spec: ScheduleSpec,
                           accumulators: int = 1, unroll_share: bool = False) -> None:
    """``f``'s update with one work-group per result (``args`` fused): each of ``wg`` work-items reduces a strided
    share (with ``accumulators`` register partials, or its share's loop unrolled), then the partials fold in local
    memory. Rows (``gpu_row_reduce``), a long row's chunks and the sums of chunks all take this form."""
    # rfactor first: the partials must not inherit the update's block loops
    split = rfactor_across(rec, f, wg) if wg >= 2 else None
    serial = [split[1]] if split is not None else []
    if split is not None and accumulators > 1:
        serial = register_accumulators(rec, split[0], split[1], split[2], accumulators)
    elif split is not None and unroll_share:
        rec(split[0].update(), f"{split[0].name()}.update()", "unroll", split[1])
    fold = rfactor_fold(rec, f, wg, spec.get("fold", 16)) if split is not None else None
    upd = f.update()
    urow = fuse_all(rec, upd, args, f"{f.name()}_u") if len(args) > 1 else args[0]
    rec(upd, f"{f.name()}.update()", "gpu_blocks", urow)
    if split is not None:
        place_on_threads(rec, split[0], serial, split[2], (f, urow))
    if fold is not None:
        place_on_threads(rec, fold[0], [fold[1]], fold[2], (f, urow))


def rfactor_across(rec: Recorder, f: hl.Func, wg: int, lanes: int = 1,
                   r: Optional[hl.RVar] = None) -> tuple[hl.Func, hl.RVar, hl.Var, hl.RVar]:
    """Split the reduction by ``wg`` (times ``lanes`` adjacent elements each) and rfactor: one partial per
    work-item, each striding over the row. Returns (partials, stride RVar, work-item Var, lane RVar). Unrolled
    lanes (``rec.unroll_lanes``: CUDA, narrow types) are ``wg`` elements apart instead, so each load instruction
    of a warp reads contiguous memory (see ``pointwise._gpu_strided``). ``r``: the RVar split (default the first)."""
    name, lbl = f.name(), f"{f.name()}.update()"
    ro, ri, rw, rl = (hl.RVar(f"{name}_{n}") for n in ("ro", "ri", "rw", "rl"))
    u = hl.Var(f"{name}_wi")
    rec(f.update(), lbl, "split", r if r is not None else f.rvars(0)[0], ro, ri, wg * lanes, GUARD)
    if lanes > 1 and rec.unroll_lanes:
        rec(f.update(), lbl, "split", ri, rl, rw, wg, GUARD)
        ri = rw
    elif lanes > 1:
        rec(f.update(), lbl, "split", ri, rw, rl, lanes, GUARD)
        ri = rw
    return rec(f.update(), lbl, "rfactor", ri, u), ro, u, rl


def register_accumulators(rec: Recorder, part: hl.Func, ro: hl.RVar, u: hl.Var, unroll: int,
                           lanes: Optional[tuple[hl.RVar, int]] = None) -> list[hl.RVar]:
    """Give work-item ``u`` of ``part`` ``unroll`` running partials (times a vector of ``lanes``) in registers —
    its loads in flight together, vector loads, no local-memory store per element — added at the end. The
    caller checks that ``unroll`` divides ``ro``'s extent. Returns the RVars ``part``'s update still loops over."""
    name, lbl = part.name(), f"{part.name()}.update()"
    pairs: list[tuple[hl.RVar, hl.Var]] = []
    outer = ro
    serial = [ro]
    if unroll > 1:
        roo, roi, k = hl.RVar(f"{name}_roo"), hl.RVar(f"{name}_roi"), hl.Var(f"{name}_k")
        rec(part.update(), lbl, "split", ro, roo, roi, unroll, GUARD)
        pairs.append((roi, k))
        outer, serial = roo, [roi]
    if lanes is not None:
        lane = hl.Var(f"{name}_lane")
        pairs.append((lanes[0], lane))
        serial = [lanes[0]] + (serial if unroll > 1 else [])
    if not pairs:
        return serial
    acc = rec(part.update(), lbl, "rfactor", pairs)  # acc[u, k, lane]: over ``outer``
    al, albl = acc.name(), f"{acc.name()}.update()"
    rec(acc, al, "compute_at", part, u)
    for (_, v), method in zip(pairs, ("unroll" if unroll > 1 else "vectorize", "vectorize")):
        rec(acc, al, method, v)
        rec(acc.update(), albl, method, v)
    rec(acc.update(), albl, "reorder", *[v for _, v in reversed(pairs)], outer)
    for rv in serial:  # adding up the partials: unrolled, or they are spilled to local memory to be indexed
        rec(part.update(), lbl, "unroll", rv)
    return serial


def place_on_threads(rec: Recorder, part: hl.Func, serial: list[hl.RVar], u: hl.Var, at: tuple[hl.Func, hl.Var]) -> None:
    """Compute the partials inside the work-group at ``at``, one work-item ``u`` per partial (local memory), each
    looping over ``serial``."""
    pl = part.name()
    rec(part, pl, "compute_at", at[0], at[1])
    rec(part, pl, "gpu_threads", u)
    rec(part.update(), f"{pl}.update()", "reorder", *serial, u)
    rec(part.update(), f"{pl}.update()", "gpu_threads", u)


def rfactor_fold(rec: Recorder, f: hl.Func, wg: int, width: int = 32) -> Optional[tuple[hl.Func, hl.RVar, hl.Var]]:
    """After ``rfactor_across``: fold the ``wg`` partials to ``width`` in parallel (each of ``width`` work-items
    adds ``wg / width``), so the last, single-work-item combine is ``width`` steps instead of ``wg``."""
    if wg <= width or not f.has_update_definition() or len(f.rvars(0)) != 1:
        return None
    name, lbl = f.name(), f"{f.name()}.update()"
    uo, ui, v = hl.RVar(f"{name}_fo"), hl.RVar(f"{name}_fi"), hl.Var(f"{name}_fold")
    rec(f.update(), lbl, "split", f.rvars(0)[0], uo, ui, width, GUARD)
    part = rec(f.update(), lbl, "rfactor", ui, v)
    # each fold work-item's sum unrolled: straight-line adds, not a local-memory store per step (the last,
    # single-work-item sum stays a loop: Halide puts a barrier after every statement at the work-group level)
    if wg // width <= 32:
        rec(part.update(), f"{part.name()}.update()", "unroll", uo)
    return part, uo, v

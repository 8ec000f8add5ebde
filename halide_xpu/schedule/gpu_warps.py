"""CUDA row reductions with one warp per row (tunable ``warp_rows`` rows per work-group): each lane keeps partials
and its share of staged rows in registers, lanes combine through warp shuffles (Halide's ``gpu_lanes``); no local
memory, no barriers. Halide's OpenCL backend has no ``gpu_lanes``: CUDA only."""
from __future__ import annotations

from typing import Any, Optional

import halide as hl

from ..meta import KernelMeta, ScheduleSpec
from .common import (GRID_YZ_MAX, GUARD, NotApplicable, Plan, Recorder, inner_reduction, primary_output,
                     reduction_extent, reduction_size, source_name)

WARP = 32
STAGED_PER_LANE = 64  # values of staged rows one lane holds in registers (a 768-wide fp32 row: 24)
MAX_ROW = WARP * STAGED_PER_LANE  # longer rows keep a work-group each: one warp streams too few loads at once
UNROLLED_STEPS = 64  # a lane's strided partial sum unrolled up to this many steps (loads in flight together)


def applicable(meta: KernelMeta) -> bool:
    """A CUDA reduction kernel whose schedule asks for warps (``warp_rows`` > 0)."""
    return "cuda" in meta.halide_target.split("-") and meta.schedule.get("warp_rows", 0) > 0


def gpu_fused_warps(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """One warp per row, ``warp_rows`` rows of the innermost row dim per work-group (other row dims: grid dims).
    Outputs spanning the row: lane ``l`` computes elements ``l, l + 32, ...`` (coalesced); per-row outputs and
    reductions' last steps run on lane 0 of the row's warp (a lane loop of extent 1) and reach the other lanes by
    shuffles. Static shapes and one stride-1 reduced dim; anything else is not applicable (the work-group form
    is next)."""
    o = primary_output(plan)
    args = list(o.args())
    in_row = [v for v in args if plan.is_reduction_var(v)]
    rows = [v for v in args if not plan.is_reduction_var(v)]
    ext = reduction_extent(plan, o)
    if not rows or len(rows) > 3 or len(in_row) > 1 or not inner_reduction(plan):
        raise NotApplicable("warp rows: 1-3 row dims (a grid) and one stride-1 reduced dim")
    if any((plan.var_extent(o, v) or GRID_YZ_MAX + 1) > GRID_YZ_MAX for v in rows[1:]):
        raise NotApplicable(f"warp rows: a row dim beyond {GRID_YZ_MAX} on grid y or z")
    if ext is None or reduction_size(plan) != ext or (in_row and not plan.is_contiguous(in_row[0])):
        raise NotApplicable("warp rows: one static stride-1 reduction")
    if ext > MAX_ROW:
        raise NotApplicable(f"warp rows: a row of {ext} > {MAX_ROW} elements")
    nrows = plan.var_extent(o, rows[0])
    if nrows is None:
        raise NotApplicable("warp rows: a symbolic row count")
    per_group = min(spec.get("warp_rows", 4), max(1, (plan.caps.max_work_group or 1024) // WARP))
    while nrows % per_group:  # no partial work-group: compute_with and the lane loops stay unguarded across rows
        per_group //= 2
    names = [v.name() for v in args]
    row_names = [v.name() for v in rows]
    twins = [t for t in plan.outputs() if t is not o and [v.name() for v in t.args()] == names]
    per_row = [t for t in plan.outputs() if t is not o and all(t is not w for w in twins)
               and [v.name() for v in t.args()] == row_names]
    if len(twins) + len(per_row) + 1 != len(plan.outputs()) or any(f.has_update_definition() for f in plan.outputs()):
        raise NotApplicable("warp rows: outputs of other shapes, or with updates")
    label = o.name()
    rb, ri = hl.Var(f"{label}_rb"), hl.Var(f"{label}_ri")
    pair = bool(plan.meta.pairs) and ext % 2 == 0  # bf16 inputs as words (pairs._row_inputs): lanes take pairs
    for f in [o, *twins, *per_row]:
        # an output stored as words (pairs._row_outputs): lane l takes words l, l + 32, ..., its pairs' elements
        words = pair and source_name(f) in plan.meta.pairs
        _row_lanes(rec, plan, f, rb, ri, per_group, label, pair and not words)
        if f is not o:
            rec(f, f.name(), "compute_with", o, ri)
    staged = _staged(plan, spec, ext) if in_row else []
    for f in staged:
        rec(f, f.name(), "compute_at", o, ri)
        x = next(v for v in f.args() if plan.is_reduction_var(v))
        _lanes_along(rec, f, f.name(), x, f"{f.name()}_x", [v for v in f.args() if not plan.is_reduction_var(v)], ext,
                     pair)
        if pair and ext % (2 * WARP):
            # a whole number of 64-element pieces in each lane's registers: Halide's warp-shuffle lowering gave a
            # staged row of 70 bf16 three registers a lane and dropped the tail piece (elements 64-69) with every
            # load, compute and store of it (H200: softmax of 33 x 70 bf16, 200 of 2310 results garbage)
            rec(f, f.name(), "align_storage", x, 2 * WARP)
    # folds only: 0-d constants (a row's length) and pure per-row results (Welford's mean: shift + sum / n) are
    # inlined where read (given a lane-0 branch, their shuffles of a fold stored in the branch before stayed in it)
    reductions = [f for f in plan.reductions() if f.args() and f.has_update_definition()]
    source = {fn.name(): n for n, fn in plan.funcs.items() if isinstance(fn, hl.Func)}  # "tmp2$4" -> "tmp2"
    materialized = {source[f.name()] for f in [*plan.outputs(), *staged, *reductions]}
    one = hl.Var(f"{label}_one")
    for f in reductions:
        if [v.name() for v in f.args()] != row_names:
            raise NotApplicable(f"warp rows: {f.name()} is not per-row")
        if f.type().bits() > 32:
            raise NotApplicable(f"warp rows: {f.name()} is {f.type()}: Halide shuffles 32-bit values at most")
        # A row's value, folded by lane 0 in its private registers (its own loads and stores are no shuffles:
        # Halide leaves a shuffle of a value stored in the same branch inside that branch, where only lane 0
        # runs it, and its result is undefined). Read by one per-row output only: folded inside that output's
        # lane-0 loop. Otherwise every reader takes it from a wrapper stored by lane 0, through shuffles
        # outside any branch.
        readers = plan.readers(source[f.name()], materialized)
        sole = next((p for p in ([] if in_row else [o]) + per_row if readers == {source[p.name()]}), None)
        if sole is not None:
            rec(f, f.name(), "compute_at", sole, one)
        else:
            w = rec(f, f.name(), "in_")
            lane0 = _lane_zero(rec, w, w.name(), w.args()[0], f.name())
            rec(w, w.name(), "compute_at", o, ri)
            rec(f, f.name(), "compute_at", w, lane0)
        _warp_sum(rec, plan, f, o, ri, ext, pair)
    rec.note(f"fused_warps: {per_group} rows per work-group, rows staged in registers: "
             f"{', '.join(f.name() for f in staged) or 'none'}")


def _row_lanes(rec: Recorder, plan: Plan, f: hl.Func, rb: hl.Var, ri: hl.Var, per_group: int, label: str,
               pair: bool = False) -> None:
    """``f``'s rows in work-groups of ``per_group`` warps (loops named after ``label``, so outputs fuse with
    compute_with): its elements along the row over the warp's lanes, or a per-row value on lane 0. Every output
    splits its row the same way (rows of ``per_group``, then of 1), so the loops from ``ri`` out have one name."""
    row, *grid = [v for v in f.args() if not plan.is_reduction_var(v)]
    rt, one = hl.Var(f"{label}_rt"), hl.Var(f"{label}_one")
    rec(f, f.name(), "split", row, rb, rt, per_group, GUARD)
    rec(f, f.name(), "split", rt, ri, one, 1)
    in_row = [v for v in f.args() if plan.is_reduction_var(v)]
    if in_row:
        _lanes_along(rec, f, f.name(), in_row[0], f"{label}_x", [one, ri, rb, *grid], plan.var_extent(f, in_row[0]),
                     pair)
    else:
        rec(f, f.name(), "reorder", one, ri, rb, *grid)
        rec(f, f.name(), "gpu_lanes", one)
    rec(f, f.name(), "gpu_blocks", rb, *grid)
    rec(f, f.name(), "gpu_threads", ri)


def _lanes_along(rec: Recorder, f: hl.Func, label: str, x: hl.Var, prefix: str, outer: list,
                 ext: Optional[int], pair: bool = False) -> None:
    """Lane ``l`` takes elements ``l, l + 32, ...`` of ``x`` (unrolled: a staged row stays in registers); with
    ``pair`` (bf16 inputs read as words, ``pairs._row_inputs``) the pairs ``2l, 2l + 1`` of each 64."""
    xs, xl = hl.Var(f"{prefix}_s"), hl.Var(f"{prefix}_l")
    if pair:
        xr, xp = hl.Var(f"{prefix}_r"), hl.Var(f"{prefix}_p")
        rec(f, label, "split", x, xs, xr, 2 * WARP, GUARD)
        rec(f, label, "split", xr, xl, xp, 2)
        rec(f, label, "reorder", xp, xl, xs, *outer)
        rec(f, label, "unroll", xp)
    else:
        rec(f, label, "split", x, xs, xl, WARP, GUARD)
        rec(f, label, "reorder", xl, xs, *outer)
    rec(f, label, "gpu_lanes", xl)
    if ext is not None and -(-ext // WARP) <= STAGED_PER_LANE:
        rec(f, label, "unroll", xs)


def _lane_zero(rec: Recorder, f: hl.Func, label: str, v: hl.Var, name: str) -> hl.Var:
    """A per-row value computed by lane 0 (a lane loop of extent 1, returned): stored once, read by the other
    lanes through shuffles (a store outside a lane loop would be one by every lane)."""
    lane0 = hl.Var(f"{name}_lane0")
    rec(f, label, "split", v, v, lane0, 1)
    rec(f, label, "gpu_lanes", lane0)
    return lane0


def _warp_sum(rec: Recorder, plan: Plan, f: hl.Func, o: hl.Func, ri: hl.Var, ext: int, pair: bool = False) -> None:
    """``f``'s update as 32 lane partials (lane ``l`` strides over elements ``l, l + 32, ...``; with ``pair`` over
    the pairs ``2l, 2l + 1`` of each 64, as ``_lanes_along``) added by lane 0 through 32 shuffles, unrolled."""
    name, lbl = f.name(), f"{f.name()}.update()"
    if len(f.rvars(0)) != 1:
        raise NotApplicable(f"warp rows: {name} reduces over several RVars")
    ro, rw, u = hl.RVar(f"{name}_ro"), hl.RVar(f"{name}_rw"), hl.Var(f"{name}_lane")
    if pair:
        rr, rp = hl.RVar(f"{name}_rr"), hl.RVar(f"{name}_rp")
        rec(f.update(), lbl, "split", f.rvars(0)[0], ro, rr, 2 * WARP, GUARD)
        rec(f.update(), lbl, "split", rr, rw, rp, 2)
    else:
        rec(f.update(), lbl, "split", f.rvars(0)[0], ro, rw, WARP, GUARD)
    part = rec(f.update(), lbl, "rfactor", rw, u)
    pl = part.name()
    rec(part, pl, "compute_at", o, ri)
    rec(part, pl, "gpu_lanes", u)
    rec(part.update(), f"{pl}.update()", "reorder", *([rp] if pair else []), ro, u)
    rec(part.update(), f"{pl}.update()", "gpu_lanes", u)
    if pair:
        rec(part.update(), f"{pl}.update()", "unroll", rp)
    if -(-ext // WARP) <= UNROLLED_STEPS:
        rec(part.update(), f"{pl}.update()", "unroll", ro)
    rec(f.update(), lbl, "unroll", rw)


def _staged(plan: Plan, spec: ScheduleSpec, ext: int) -> list[hl.Func]:
    """Rows several passes read (``Plan.row_resident``), as many as fit ``STAGED_PER_LANE`` values per lane."""
    if not spec.get("stage", 1):
        return []

    def row_bytes(f: hl.Func) -> Optional[int]:  # registers hold 32-bit values whatever the type
        return ext * 4 if any(plan.is_reduction_var(v) for v in f.args()) else None

    return plan.row_resident(STAGED_PER_LANE * WARP * 4, row_bytes, spec.get("exp_cost", 6),
                             spec.get("fast_exp_cost", 2))


def branch_shuffles(stmt: str) -> list[str]:
    """Warp shuffles left inside a branch of a device loop nest in a lowered statement (Halide's conceptual
    Stmt): Halide hoists every shuffle out of branches unless its value is stored in the same branch, and a
    shuffle that only some lanes run returns an undefined value."""
    bad: list[str] = []
    stack: list[str] = []  # one entry per open brace: "gpu", "if" or ""
    for line in stmt.splitlines():
        s = line.strip()
        if "shfl.sync" in s and "if" in stack[next((i for i, k in enumerate(stack) if k == "gpu"), len(stack)):]:
            bad.append(s)
        if s.startswith("}"):
            if stack:
                stack.pop()
            s = s[1:].strip()
        if s.endswith("{"):
            kind = "gpu" if s.startswith(("gpu_block", "gpu_thread", "gpu_lane")) else ""
            stack.append("if" if s.startswith(("if (", "else")) else kind)
    return bad


def check_lowered(pipeline: Any, arguments: list, target: Any) -> None:
    """Lower ``pipeline`` once more (a conceptual Stmt) and refuse the form when a shuffle stayed in a branch."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="hx_warps_") as tmp:
        path = Path(tmp) / "kernel.stmt"
        pipeline.compile_to({hl.OutputFileType.conceptual_stmt: str(path)}, arguments, "warp_check", target)
        refuse_branch_shuffles(path.read_text(errors="replace"))


def refuse_branch_shuffles(stmt: str) -> None:
    """NotApplicable when the lowered ``stmt`` keeps a shuffle in a branch only some lanes run."""
    bad = branch_shuffles(stmt)
    if bad:
        raise NotApplicable(f"warp rows: {len(bad)} shuffles in a branch only some lanes run: {bad[0][:200]}")

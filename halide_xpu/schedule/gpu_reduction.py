"""GPU reduction schedules: a work-group per row with rows staged in local memory and in-group trees, chunked
outer reductions, streaming full reductions."""
from __future__ import annotations

import re
from typing import Optional

import halide as hl

from ..meta import ScheduleSpec
from . import pointwise
from .gpu_columns import column_beside_wide, gpu_outer
from .gpu_groups import (place_on_threads, register_accumulators, rfactor_across, rfactor_fold,
                         work_group_per_result)
from .common import (GRID_YZ_MAX, GUARD, LOCAL_SLACK, NotApplicable, Plan, Recorder, fuse_all, fused_rvar,
                     inner_reduction, pow2_floor, primary_output, reduction_extent, reduction_size, source_name,
                     total)


def gpu_fused(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """One work-group per row (group): work-items stride over the row keeping partials (registers for per-row
    results), an in-group tree in local memory combines them; rows several passes read are staged in local
    memory first. Full and outer reductions branch off to their own forms."""
    o = primary_output(plan)
    if o.has_update_definition():  # its pure Vars are not the kernel's loops (T5's relative position bias gradient:
        # a batch sum scattered into the bias table; the column form looked for a loop Var the sum lacks)
        raise NotApplicable("the widest output is stored by an update (a scatter): staged forms")
    label = o.name()
    args = list(o.args())
    in_row = [v for v in args if plan.is_reduction_var(v)]
    rows = [v for v in args if not plan.is_reduction_var(v)]
    # a reduction over several loops (a channels-last batch-norm backward beside a pooled mean's: 49 x 32 per
    # channel) is one domain for the work-items: the first loop alone gave 32 work-items per row, each walking the
    # other loop serially (512 work-groups of 32: 18.8 us on the H200, Triton 8.1)
    several = sum(v.reduction for v in plan.meta.loop_vars) > 1 and reduction_size(plan) is not None
    ext = reduction_size(plan) if several else reduction_extent(plan, o)
    if not rows or (not in_row and _unit(plan, o)):  # a loss's (1,)-shaped mean is a scalar too
        together = _gpu_full(rec, plan, o, spec)
        _schedule_others(rec, plan, o, spec, skip=together)
        return
    if not in_row and not inner_reduction(plan):
        _schedule_others(rec, plan, o, spec, skip=gpu_outer(rec, plan, o, rows, spec))
        return
    kept = column_beside_wide(plan, o, rows, in_row)
    if kept is not None:  # the column form, the wide output computed by the same work-items
        _schedule_others(rec, plan, kept, spec, skip=gpu_outer(rec, plan, kept, rows, spec, wide=o) + [o])
        return
    if few_long_rows(plan, o, rows):
        raise NotApplicable("fewer rows than compute units, each long: split across work-groups (staged)")
    staged, row_vec, wg = row_work_group(plan, spec, ext, bool(in_row))
    names = [v.name() for v in o.args()]
    twins = [t for t in plan.outputs() if t is not o and [v.name() for v in t.args()] == names]
    row_names = [v.name() for v in rows]
    # per-row results (a norm's saved mean and rstd) written by one work-item of o's work-group, where the
    # work-items run along a stride-1 row (a BERT bias gradient's kernel, rows strided by 768, took 3.5 ms so)
    along = any(plan.is_contiguous(v) for v in in_row)
    per_row = [t for t in plan.outputs() if along and t is not o and all(t is not w for w in twins)
               and [v.name() for v in t.args()] == row_names]
    # outputs computed with o over several row dims keep them as a grid of work-groups: over a fused row Var,
    # Halide bounded every stage of the group over the whole of each row dim (GPT-2's embedding + LayerNorm at
    # 4 x 128 rows: 925 KB of local memory per work-group, CL_OUT_OF_RESOURCES)
    grid = bool(twins or per_row) and len(rows) > 1
    if grid and len(rows) > 3:
        raise NotApplicable("outputs computed together over more than 3 row dims (a GPU grid has 3)")
    if grid and any((plan.var_extent(o, v) or 0) > GRID_YZ_MAX for v in rows[1:]):
        raise NotApplicable(f"a row dim beyond {GRID_YZ_MAX} on grid y or z")
    row = _row_loops(rec, o, rows, in_row, wg, row_vec if in_row else 1, grid=grid)
    stage_rows(rec, plan, o, row, wg, row_vec, staged)
    for twin in twins:  # same-shaped outputs (var_mean's mean and var, a residual sum beside its norm): the
        # primary's loops, named as its (compute_with matches loops by name)
        twin_row = _row_loops(rec, twin, [v for v in twin.args() if not plan.is_reduction_var(v)],
                              [v for v in twin.args() if plan.is_reduction_var(v)], wg, row_vec if in_row else 1,
                              label, grid)
        rec(twin, twin.name(), "compute_with", o, twin_row)
    for r in per_row:  # its row dims: one, or o's grid
        rec(r, r.name(), "gpu_blocks", *r.args())
        rec(r, r.name(), "compute_with", o, row)
    reduce_in_rows(rec, plan, (o, row), wg, ext, row_vec, bool(in_row), spec, fuse_rvars=several)
    _schedule_others(rec, plan, o, spec, skip=twins + per_row)


def row_work_group(plan: Plan, spec: ScheduleSpec, ext: Optional[int], spans_row: bool
                   ) -> tuple[list[hl.Func], int, int]:
    """(Funcs staged per row, lanes per work-item along the row, work-group size) of a work-group per row. Rows
    whose output also spans the row (``spans_row``: softmax, norms) prefer wider work-groups (H100 sweep: 256 vs 128
    gave layer_norm 1.90x vs 2.91x Triton), wider still when every pass reads rows staged from the inputs (norms:
    512); per-row results (sums, var_mean) take ``wg``."""
    staged = resident_rows(plan, spec, max(spec.get(k, 0) for k in ("wg", "wg_row", "wg_row_staged")))
    inputs_only = bool(staged) and not any(plan.reads_reduction(f.name()) for f in staged)
    row_vec = row_vector(plan, spec, ext)
    wg = spec.get("wg", 256)
    if spans_row:
        wg = spec.get("wg_row_staged", 512) if inputs_only else spec.get("wg_row", 256)
    if ext is not None:  # no idle work-items: a row of 1024 takes 256 work-items of 4 lanes, not 512
        wg = max(plan.min_wg, min(wg, pow2_floor(ext // (row_vec if spans_row or staged else 1))))
    return staged, row_vec, wg


def reduce_in_rows(rec: Recorder, plan: Plan, at: tuple[hl.Func, hl.Var], wg: int, ext: Optional[int], row_vec: int,
                   spans_row: bool, spec: ScheduleSpec, fuse_rvars: bool = False) -> None:
    """Every reduction computed per row at ``at`` by the ``wg`` work-items of its work-group: register partials
    striding over the row, then an in-group tree. ``spans_row``: the output spans the row (softmax, norms).
    ``fuse_rvars``: a reduction's RVars are fused first (``ext`` is then the whole domain's size)."""
    for f in plan.reductions():
        rec(f, f.name(), "compute_at", *at)
        if not f.has_update_definition() or wg < 2:
            continue
        lanes = row_vec if spec.get("vector_partials", 0) and inner_reduction(plan) else 1
        # H100 sweep 7: 2 register partials per work-item took argmax 1.23x -> 1.02x Triton and var_mean 1.33x ->
        # 1.11x, but fp16 softmax 1.26x -> 1.42x: on for per-row results, off for rows the output spans
        unroll = 1 if lanes > 1 else spec.get("unroll_span", 0) if spans_row else spec.get("unroll_row", 2)
        steps = -(-ext // (wg * lanes)) if ext is not None else 0
        r = fused_rvar(rec, f) if fuse_rvars and len(f.rvars(0)) > 1 else None
        part, ro, u, rl = rfactor_across(rec, f, wg, lanes, r)
        serial = register_accumulators(rec, part, ro, u, unroll if steps >= unroll > 1 and steps % unroll == 0 else 1,
                                        (rl, lanes) if lanes > 1 else None)
        place_on_threads(rec, part, serial, u, at)
        fold = rfactor_fold(rec, f, wg, spec.get("fold", 16))
        if fold is not None:
            place_on_threads(rec, fold[0], [fold[1]], fold[2], at)


def _row_loops(rec: Recorder, o: hl.Func, rows: list[hl.Var], in_row: list[hl.Var], wg: int, vec: int = 1,
               names: Optional[str] = None, grid: bool = False) -> hl.Var:
    """One work-group per row of ``o`` (rows fused, or with ``grid`` a grid over up to 3 row dims), work-items
    striding along the row when ``o`` spans it, each taking ``vec`` adjacent elements (one vector load/store); new
    loops named after ``names`` (default ``o``). Returns the innermost work-group Var."""
    label = o.name()
    prefix = names or label
    blocks = list(rows) if grid else [fuse_all(rec, o, rows, label, f"{prefix}_row") if len(rows) > 1 else rows[0]]
    if in_row:
        x = fuse_all(rec, o, in_row, label, f"{prefix}_col") if len(in_row) > 1 else in_row[0]
        row_threads(rec, o, label, x, blocks, wg, vec, prefix)
    rec(o, label, "gpu_blocks", *blocks)
    return blocks[0]


def row_threads(rec: Recorder, f: hl.Func, label: str, x: hl.Var, outer: list[hl.Var], wg: int, vec: int,
                 prefix: Optional[str] = None) -> hl.Var:
    """Split ``x`` into ``vec``-wide vectors dealt round-robin to ``wg`` work-items; returns the serial step Var.
    New loops are named ``<prefix>_...`` (default ``label``). Unrolled lanes (``rec.unroll_lanes``) are ``wg``
    elements apart instead (coalesced scalar loads and stores, see ``pointwise._gpu_strided``)."""
    prefix = prefix or label
    kind = hl.RVar if isinstance(x, hl.RVar) else hl.Var  # an update's loops split into RVars
    lanes = None
    if vec > 1 and rec.unroll_lanes:
        xs, xo, xi, lanes = (kind(f"{prefix}_{n}") for n in ("s", "step", "wi", "lanes"))
        rec(f, label, "split", x, xs, xi, wg, GUARD)
        rec(f, label, "split", xs, xo, lanes, vec, GUARD)
        rec(f, label, "reorder", lanes, xo, xi, *outer)
        rec(f, label, "gpu_threads", xi)
        rec(f, label, "unroll", lanes)
        return xo
    if vec > 1:
        xv, lanes = kind(f"{prefix}_v"), kind(f"{prefix}_lanes")
        rec(f, label, "split", x, xv, lanes, vec, GUARD)
        x = xv
    xo, xi = kind(f"{prefix}_step"), kind(f"{prefix}_wi")
    rec(f, label, "split", x, xo, xi, wg, GUARD)
    rec(f, label, "reorder", *([lanes] if lanes is not None else []), xo, xi, *outer)
    rec(f, label, "gpu_threads", xi)
    if lanes is not None:
        rec(f, label, "vectorize", lanes)
    return xo


def row_vector(plan: Plan, spec: ScheduleSpec, ext: Optional[int]) -> int:
    """Lanes per work-item along a row: ``vector``, halved until the row splits into whole vectors."""
    vec = spec.get("vector", 4) if plan.gpu_vectors and ext is not None else 1
    while vec > 1 and ext % vec:
        vec //= 2
    return vec


def resident_rows(plan: Plan, spec: ScheduleSpec, wg: int) -> list[hl.Func]:
    """``Plan.row_resident`` within the device's local memory, less the partials of ``wg`` work-items."""
    if not spec.get("stage", 1) or not plan.caps.local_mem:
        return []
    budget = plan.caps.local_mem - 8 * wg * max(1, len(plan.reductions())) - LOCAL_SLACK - 64  # 64: launch rounding
    return plan.row_resident(budget, lambda f: _row_bytes(plan, f), spec.get("exp_cost", 6), spec.get("fast_exp_cost", 2))


def _row_bytes(plan: Plan, f: hl.Func) -> Optional[int]:
    in_row = [v for v in f.args() if plan.is_reduction_var(v)]
    ext = plan.var_extent(f, in_row[0]) if len(in_row) == 1 else None
    return ext * f.type().bytes() if ext is not None else None


def stage_rows(rec: Recorder, plan: Plan, o: hl.Func, row: hl.Var, wg: int, vec: int, staged: list[hl.Func]) -> None:
    """Row-resident Funcs computed once per work-group into local memory, vectorized, so the passes over a row
    (max, sum, output) read local memory instead of global memory or recomputing."""
    for f in staged:
        name, args = f.name(), list(f.args())
        x = next(v for v in args if plan.is_reduction_var(v))
        rec(f, name, "compute_at", o, row)
        step = row_threads(rec, f, name, x, [v for v in args if v.name() != x.name()], wg, vec)
        steps = -(-(plan.var_extent(f, x) or 0) // (wg * vec))
        if steps <= 8:  # all of a work-item's loads in flight at once
            rec(f, name, "unroll", step)
        elif steps % 8 == 0:  # eight at a time
            so, si = hl.Var(f"{name}_so"), hl.Var(f"{name}_si")
            rec(f, name, "split", step, so, si, 8, GUARD)
            rec(f, name, "unroll", si)


def _schedule_others(rec: Recorder, plan: Plan, primary: hl.Func, spec: ScheduleSpec, skip: list[hl.Func] = ()) -> None:
    for other in plan.outputs():
        if other is not primary and all(other is not s for s in skip):
            pointwise.schedule_output(rec, plan, other, spec)


def _gpu_full(rec: Recorder, plan: Plan, o: hl.Func, spec: ScheduleSpec) -> list[hl.Func]:
    """Reduction to a scalar on GPU, in two kernels (each extra launch cost ~3 µs on H100). Kernel 1: ``blocks``
    work-groups of ``wg`` work-items stream the input coalesced (element ``(i * blocks + b) * wg + t`` goes to
    work-item ``t`` of group ``b``, loads unrolled into register partials), then each group folds its ``wg``
    partials in local memory to one value, stored once. Kernel 2 (one work-group): ``fold`` work-items each add
    ``blocks / fold`` group results, one work-item adds those and writes the output. Other single-point outputs
    (a loss's mean beside its count) are computed with the anchor (``o`` or, where ``o`` has several points, a
    single-point output) in that work-group, and so are short outputs over the reduced dim (a loss's per-row
    ignore mask: was a kernel per reduction, 11 launches, 6.6x Triton); returns the outputs it scheduled."""
    units = [t for t in plan.outputs() if not t.has_update_definition() and _unit(plan, t)]
    wider = [t for t in plan.outputs() if all(t is not u for u in units)]
    short = all(not t.has_update_definition() and 0 < (_points(plan, t) or 0) <= BESIDE_MAX for t in wider)
    # another anchor than o only where every wider output fits in its work-group (one that runs as a kernel of its
    # own could not read the sums computed inside the anchor's)
    anchor = o if _unit(plan, o) else (units[0] if units and short else None)
    blk = hl.Var(f"{anchor.name() if anchor is not None else o.name()}_blk")
    together = [t for t in units if t is not anchor]
    beside = wider if anchor is not None and short else []
    # every reduction a short sum that only the single-point outputs read: those outputs and the sums inside a
    # loop of one work-item, so the sums are registers and an unrolled sum's loads are in flight together (at the
    # work-group level each unrolled step was a one-work-item region between two barriers, a dependent global
    # round trip each: a loss's four 32-element sums took 20 us on the H200, Triton's kernel 4.2)
    spread = {source_name(t) for t in beside}
    one = hl.Var(f"{anchor.name()}_one") if anchor is not None and plan.reductions() and all(
        _short_sum(plan, spec, f) and not plan.readers(source_name(f), spread) for f in plan.reductions()) else None
    if anchor is not None:  # one work-group for the final combine: the outputs and every reduction's last stage
        for f in [anchor, *together, *beside]:  # beside: one work-item per point
            on_one = one is not None and all(f is not b for b in beside)
            if on_one:  # the work-item loop inside the block loop
                rec(f, f.name(), "split", hl.Var.outermost(), hl.Var.outermost(), one, 1)
            rec(f, f.name(), "split", hl.Var.outermost(), hl.Var.outermost(), blk, 1)
            rec(f, f.name(), "gpu_blocks", blk)
            if on_one:
                rec(f, f.name(), "gpu_threads", one)
            elif any(f is b for b in beside):
                rec(f, f.name(), "gpu_threads", fuse_all(rec, f, list(f.args()), f.name()) if len(f.args()) > 1
                    else f.args()[0])
            if f is not anchor:
                rec(f, f.name(), "compute_with", anchor, one if on_one else blk)
    if one is not None:
        _spread_summands(rec, plan, anchor, blk, ext=reduction_size(plan))
    at = None if anchor is None else (anchor, one if one is not None else blk)
    shorts = [f for f in plan.reductions() if gpu_full_reduce(rec, plan, f, spec, at)]
    if one is None:
        _short_sums_in_registers(rec, plan, shorts, beside)
    done = [anchor, *together, *beside] if anchor is not None else []
    if all(o is not d for d in done):
        pointwise.schedule_output(rec, plan, o, spec)
    return done


SPREAD_MIN_FUNCS = 4  # a short sum's summand reaching this many Funcs is computed a work-item per point first


def _spread_summands(rec: Recorder, plan: Plan, anchor: hl.Func, blk: hl.Var, ext: Optional[int]) -> list[str]:
    """The costly 32-bit summands of the short sums on the anchor's one work-item computed first, a work-item per
    point, into local memory (the work-item then adds loaded values): on one work-item every point's instructions
    ran in one thread, and each gathered target's index check was a branch its load waited behind (ResNet-18's
    label-smoothed bf16 loss: 1,697 instructions on one work-item, 32 checks, 4.5 us a launch vs Triton's 1.4).
    Summands of other widths stay inline (mixed widths in local memory go to global scratch:
    ``separate_local_widths``); returns the names of the summands spread."""
    if ext is None or ext > min(BESIDE_MAX, plan.caps.max_work_group or 1024):
        return []
    spread: list[str] = []
    for name in plan.meta.reductions:  # a summand: tmpN[hrK], the reduction's RDom var (a 1-D Func over h_i)
        for ref in re.findall(r"\b(tmp\d+)\[\s*hr\d+\s*,?\s*\]", plan.defs.get(name, ([], ""))[1]):
            g, args = plan.funcs.get(ref), plan.defs.get(ref, ([], ""))[0]
            if (ref in spread or not isinstance(g, hl.Func) or len(args) != 1 or args[0] not in
                    plan.reduction_var_names or plan.extents.get(args[0]) != ext
                    or {t.bytes() for t in g.types()} != {4} or plan.reads_reduction(ref)
                    or len(plan.reached(ref)) < SPREAD_MIN_FUNCS):
                continue
            rec(g, g.name(), "compute_at", anchor, blk)
            rec(g, g.name(), "gpu_threads", g.args()[0])
            spread.append(ref)
    if spread:
        rec.note(f"full: summands a work-item per point: {', '.join(spread)}")
    return spread


def _short_sums_in_registers(rec: Recorder, plan: Plan, shorts: list[hl.Func], beside: list[hl.Func]) -> None:
    """The short sums on the anchor's one work-item kept in registers, where only that work-item reads them (no
    output beside it, no reduction spread over work-items): stored per work-group, each step was a round trip to
    local memory, or to global scratch for an int64 count beside float sums (``separate_local_widths``): a loss's
    four 32-element sums took 20 us on the H200 (Triton's kernel 4.2)."""
    spread = {source_name(f) for f in [*beside, *plan.reductions()] if all(f is not s for s in shorts)}
    for f in shorts:
        if not plan.readers(source_name(f), spread):
            rec(f, f.name(), "store_in", hl.MemoryType.Register)


def _short_sum(plan: Plan, spec: ScheduleSpec, f: hl.Func) -> bool:
    """Whether ``gpu_full_reduce`` sums ``f`` (inside a scalar output's work-group) on one work-item, unrolled."""
    ext = reduction_size(plan)
    return f.has_update_definition() and ext is not None and ext < 4 * _full_wg(plan, spec, ext)


def _full_wg(plan: Plan, spec: ScheduleSpec, ext: Optional[int]) -> int:
    """Work-items of ``gpu_full_reduce``'s work-groups: ``wg_full``, fewer for a short reduction (down to a
    sub-group: a single work-item's serial loop over a local accumulator crashed Intel's OpenCL CPU compiler, its
    vectorizer, on the sum of a 400-element loss)."""
    wg_full = spec.get("wg_full", 512)
    return wg_full if ext is None else max(plan.min_wg, min(wg_full, pow2_floor(max(ext // 4, 1))))


SHORT_UNROLL = 64  # a scalar reduction this short on one work-item is unrolled whole (longer: 8 steps at a time)
BESIDE_MAX = 1024  # points of a short output computed in a scalar reduction's work-group (one work-item each)


def _points(plan: Plan, f: hl.Func) -> Optional[int]:
    """``f``'s static number of points (None when a dim is dynamic)."""
    return total([plan.var_extent(f, v) for v in f.args()])


def _unit(plan: Plan, f: hl.Func) -> bool:
    """Whether ``f`` has one point: 0-d, or every dim of static extent 1."""
    return all(plan.var_extent(f, v) == 1 for v in f.args())


def gpu_full_reduce(rec: Recorder, plan: Plan, f: hl.Func, spec: ScheduleSpec,
                    at: Optional[tuple[hl.Func, hl.Var]] = None) -> bool:
    """One reduction to a scalar (``_gpu_full``'s kernels): its last stage inside ``at`` (the scalar output's
    work-group), else in kernels of its own (the staged form: was one work-item over the whole domain, BERT's
    masked-LM loss sum over 4096 gathered rows took 2.1 ms on the H100). A domain of several RVars is fused.
    Returns whether it is a short sum on ``at``'s one work-item."""
    width = spec.get("fold_full", 32)
    scalar = at is not None
    ext = reduction_size(plan)
    wg = _full_wg(plan, spec, ext)
    unroll = spec.get("unroll_full", 4)
    vec = spec.get("vector_full", 4) if plan.gpu_vectors else 1
    # a short reduction to a scalar is one work-group in the output's kernel: a second launch costs more than
    # one group streaming a few thousand elements (a 256-element sum was 2 kernels of 132 groups on the H100)
    single = scalar and ext is not None and ext <= spec.get("single_group_max", 16384)
    target = 1 if single else plan.caps.parallelism * spec.get("blocks_per_cu", 1)
    blocks = 1 if single else _exact_blocks(target, ext, wg * unroll * vec)
    if vec > 1 and (ext is None or ext % (blocks * wg * unroll * vec)):  # vector loads only when all are whole
        vec = 1
        blocks = 1 if single else _exact_blocks(target, ext, wg * unroll)
    name, lbl = f.name(), f"{f.name()}.update()"
    if scalar:
        rec(f, name, "compute_at", *at)
    else:
        rec(f, name, "compute_root")
    if f.has_update_definition() and (ext is None or ext >= 4 * wg):
        ro, rin, rb, rt, rtl, rl = (hl.RVar(f"{name}_{n}") for n in ("ro", "rin", "rb", "rt", "rtl", "rl"))
        # work-item t of group b reads elements [t * vec, t * vec + vec) of each block-sized step
        b, t = hl.Var(f"{name}_b"), hl.Var(f"{name}_t")
        rec(f.update(), lbl, "split", fused_rvar(rec, f), ro, rin, blocks * wg * vec, GUARD)
        if vec > 1:
            rec(f.update(), lbl, "split", rin, rb, rtl, wg * vec, GUARD)
            rec(f.update(), lbl, "split", rtl, rt, rl, vec, GUARD)
        else:
            rec(f.update(), lbl, "split", rin, rb, rt, wg, GUARD)
        group = rec(f.update(), lbl, "rfactor", rb, b)  # group[b]: everything work-group b reads
        gl = f"{name}_group"
        glbl = f"{gl}.update()"
        # rfactors before the group's block loop, so the partials do not inherit it
        threads = rec(group.update(), glbl, "rfactor", rt, t)  # threads[b, t]: a strided serial sum
        gfold = rfactor_fold(rec, group, wg, width)
        if single:  # group[0] inside the scalar output's work-group: no kernel of its own
            home = at
        else:  # group[b] is computed inside a wrapper's work-group: initialised and reduced in one kernel
            gw = rec(group, gl, "in_")
            home = (gw, gw.args()[0])
            rec(gw, f"{gl}_out", "compute_root")
            rec(gw, f"{gl}_out", "gpu_blocks", home[1])
        rec(group, gl, "compute_at", *home)
        tl = f"{name}_threads"
        steps = -(-ext // (blocks * wg * vec)) if ext is not None else None  # ro's extent
        unroll = unroll if ext is None or ext >= blocks * wg * unroll * vec else 1
        if single and steps % unroll:  # register_accumulators: unroll must divide ro's extent
            unroll = 1
        serial = register_accumulators(rec, threads, ro, t, unroll, (rl, vec) if vec > 1 else None)
        rec(threads, tl, "compute_at", *home)
        rec(threads, tl, "gpu_threads", t)
        rec(threads.update(), f"{tl}.update()", "reorder", *serial, t)
        rec(threads.update(), f"{tl}.update()", "gpu_threads", t)
        if gfold is not None:
            place_on_threads(rec, gfold[0], [gfold[1]], gfold[2], home)
        if blocks > width:
            rbo, rbi, v = hl.RVar(f"{name}_rbo"), hl.RVar(f"{name}_rbi"), hl.Var(f"{name}_v")
            rec(f.update(), lbl, "split", rb, rbo, rbi, width, GUARD)
            last = rec(f.update(), lbl, "rfactor", rbi, v)  # last[v]: every width-th group result
            ll = f"{name}_last"
            if scalar:
                place_on_threads(rec, last, [rbo], v, at)
                if -(-blocks // width) <= 8:  # each work-item's few group results: loads all in flight
                    rec(last.update(), f"{ll}.update()", "unroll", rbo)
            else:
                bx, tx = hl.Var(f"{ll}_wg"), hl.Var(f"{ll}_wi")
                rec(last, ll, "compute_root")
                rec(last, ll, "gpu_tile", v, bx, tx, width, GUARD)
                rec(last.update(), f"{ll}.update()", "gpu_tile", v, bx, tx, width, GUARD)
    elif f.has_update_definition() and scalar and ext is not None:  # a short sum on the anchor's one work-item:
        # unrolled, its loads in flight together (a loss's sums over 32 targets: a dependent global round trip
        # each, 20 us for a kernel Triton runs in 4.4)
        r = fused_rvar(rec, f)
        if ext > SHORT_UNROLL:
            ro, ri = hl.RVar(f"{name}_so"), hl.RVar(f"{name}_si")
            rec(f.update(), lbl, "split", r, ro, ri, 8, GUARD)
            r = ri
        rec(f.update(), lbl, "unroll", r)
        return True
    if not scalar:
        rec(f, name, "gpu_single_thread")
        if f.has_update_definition():
            rec(f.update(), lbl, "gpu_single_thread")




def _exact_blocks(target: int, ext: Optional[int], per_block: int) -> int:
    """A work-group count near ``target`` that splits ``ext`` exactly (no per-element guards, so unrolled
    loads can all be in flight); ``target`` when none fits."""
    target = max(1, target)
    if ext is not None:
        for blocks in sorted(range(max(1, target // 4), 2 * target + 1), key=lambda b: abs(b - target)):
            if ext % (blocks * per_block) == 0:
                return blocks
    return target


SPLIT_ROW_MIN = 16384  # a row at least this long, in fewer rows than compute units, is split across work-groups


def few_long_rows(plan: Plan, f: hl.Func, rows: list[hl.Var]) -> bool:
    """Fewer rows than compute units, each long: one work-group per row leaves most of the device idle (ResNet's
    NCHW batch norm: 64 channels of 100k elements, 64 work-groups on 132 SMs, 300 us a kernel)."""
    count = total([plan.var_extent(f, v) for v in rows]) if rows else 1
    ext = reduction_size(plan)
    return count is not None and ext is not None and count < plan.caps.parallelism and ext >= SPLIT_ROW_MIN


def gpu_row_reduce_split(rec: Recorder, plan: Plan, f: hl.Func, spec: ScheduleSpec) -> bool:
    """Few long rows (``few_long_rows``): each row's reduction split in chunks, one work-group per (row, chunk)
    with register accumulators (loads in flight), then one work-group per row adds its chunks. False where the
    row is too short to split."""
    args = list(f.args())
    rows = total([plan.var_extent(f, v) for v in args]) or 1
    ext = reduction_size(plan)
    wg = spec.get("wg", 256)
    unroll = spec.get("unroll_full", 4)
    if ext is None or ext < 2 * wg * unroll:
        return False
    chunks = max(2, min(1024, -(-plan.caps.parallelism * 4 // rows)))
    step = wg * unroll
    length = -(-(-(-ext // chunks)) // step) * step  # whole unrolled steps per chunk
    chunks = -(-ext // length)
    if chunks < 2:
        return False
    name, lbl = f.name(), f"{f.name()}.update()"
    ro, ri, c = hl.RVar(f"{name}_ro"), hl.RVar(f"{name}_ri"), hl.Var(f"{name}_chunk")
    rec(f.update(), lbl, "split", fused_rvar(rec, f), ro, ri, length, GUARD)
    part = rec(f.update(), lbl, "rfactor", ro, c)  # part[row, c]: chunk c of the row
    pl = part.name()
    rec(part, pl, "compute_root")
    pargs = list(part.args())
    prow = fuse_all(rec, part, pargs, pl) if len(pargs) > 1 else pargs[0]
    rec(part, pl, "gpu_blocks", prow)
    work_group_per_result(rec, part, pargs, wg, spec, accumulators=unroll)
    gpu_row_reduce(rec, plan, f, spec)  # the chunks of a row: its own work-group
    return True


def gpu_row_reduce(rec: Recorder, plan: Plan, f: hl.Func, spec: ScheduleSpec) -> None:
    """A reduction in its own kernel, one work-group per row, threads reduce into local memory."""
    args = list(f.args())
    row = fuse_all(rec, f, args, f.name()) if len(args) > 1 else args[0]
    rec(f, f.name(), "gpu_blocks", row)
    ext = reduction_extent(plan, f)
    wg = max(plan.min_wg, min(spec.get("wg", 128), pow2_floor(ext))) if ext else spec.get("wg", 128)
    work_group_per_result(rec, f, args, wg, spec)

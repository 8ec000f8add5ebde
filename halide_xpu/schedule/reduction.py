"""Reduction schedules: rows fused per task / work-group with in-row rfactor, or staged (compute_root) forms."""
from __future__ import annotations

from typing import Callable, Optional

import halide as hl

from ..meta import ScheduleSpec
from . import pointwise
from .common import GUARD, SHIFT, Plan, Recorder, fuse_all, pow2_floor, total


def default_params(gpu: bool, vector_width: int) -> dict[str, int]:
    """Tunables: ``vector`` lanes; GPU work-group sizes ``wg`` (per-row results, outer reductions), ``wg_row`` /
    ``wg_row_staged`` (outputs spanning the row; rows staged from inputs only), ``wg_full``; ``stage`` (rows in
    local memory) and ``exp_cost`` (what staging weighs a transcendental at); ``tasks_per_core`` (host), ``split``."""
    if gpu:
        # H100 sweeps (benchmarks/results/<gpu>/sweep_*.md): wg 256 + fold 16 for per-row results (argmax
        # 1.39x -> 1.24x Triton, var_mean 1.35x -> 1.27x); 512 for rows staged from inputs (norms ~1.0x)
        return {"vector": 4, "wg": 256, "fold": 16, "wg_row": 256, "wg_row_staged": 512, "wg_full": 512,
                "fold_full": 32, "blocks_per_cu": 1, "unroll_full": 4, "split": 64, "stage": 1, "exp_cost": 6,
                "vector_partials": 0}
    return {"vector": vector_width, "tasks_per_core": 4, "split": 0, "min_chunk": 4096}


def _primary(plan: Plan) -> hl.Func:
    outs = plan.outputs()
    return max(outs, key=lambda f: (len(f.args()), -outs.index(f)))


def _reduction_extent(plan: Plan, f: hl.Func) -> Optional[int]:
    names = [v.name for v in plan.meta.loop_vars if v.reduction]
    exts = [plan.extents[n] for n in names]
    return exts[0] if exts else None


def _inner_reduction(plan: Plan) -> bool:
    """A reduction over a contiguous (stride-1) input dimension: vectorize by rfactor, not across rows."""
    return any(v.reduction and v.contiguous for v in plan.meta.loop_vars)


def _host_vectorize_reduction(rec: Recorder, plan: Plan, f: hl.Func, at: tuple[hl.Func, hl.Var], vec: int) -> None:
    """Inner reduction: rfactor ``vec`` partial accumulators and vectorize across them."""
    label = f"{f.name()}.update()"
    rvars = f.rvars(0)
    ext = _reduction_extent(plan, f)
    if not rvars or ext is None or ext < 2 * vec:
        return
    ro, ri = hl.RVar(f"{f.name()}_ro"), hl.RVar(f"{f.name()}_ri")
    u = hl.Var(f"{f.name()}_lane")
    rec(f.update(), label, "split", rvars[0], ro, ri, vec, GUARD)
    intm = rec(f.update(), label, "rfactor", ri, u)
    il = f"{f.name()}_partial"
    rec(intm, il, "compute_at", at[0], at[1])
    rec(intm, il, "vectorize", u)
    rec(intm.update(), f"{il}.update()", "reorder", u, ro)
    rec(intm.update(), f"{il}.update()", "vectorize", u)


def _host_fused(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    o = _primary(plan)
    label, vec = o.name(), spec.get("vector", 8)
    args = list(o.args())
    in_row = [v for v in args if plan.is_reduction_var(v)]
    rows = [v for v in args if not plan.is_reduction_var(v)]
    inner = _inner_reduction(plan)
    at: Optional[hl.Var] = None
    per_vector = False  # outer reduction computed per output vector (else per row of outer dims)
    shareable = False
    cores = plan.caps.parallelism * spec.get("tasks_per_core", 4)
    x0_ext = plan.var_extent(o, rows[0]) if rows else None
    if rows and not inner and not in_row and x0_ext is not None and x0_ext >= vec:
        # outer reduction: vectorize across the contiguous kept dim; not fused with the others, so that the
        # region of the reduction computed per vector stays exact
        xo, lanes = hl.Var(f"{label}_xo"), hl.Var(f"{label}_lanes")
        rec(o, label, "split", rows[0], xo, lanes, vec, SHIFT)
        rec(o, label, "vectorize", lanes)
        task_row = _host_parallel(rec, o, label, xo, x0_ext // vec, rows[1:], cores)
        at = xo if rows[1:] else task_row  # one output vector: the reduction's extent along x is exactly ``vec``
        per_vector = True
    elif rows:
        nrows = total([plan.var_extent(o, v) for v in rows])
        row = fuse_all(rec, o, rows, f"{label}_row") if len(rows) > 1 else rows[0]
        at = _host_parallel(rec, o, label, row, nrows, [], cores)
        shareable = nrows is not None and not in_row  # exact row splits: safe to share with compute_with
    if in_row:
        ext = plan.var_extent(o, in_row[0])
        if ext is not None and ext >= vec:
            rec(o, label, "vectorize", in_row[0], vec, SHIFT)
    if at is not None:
        # e.g. softmax's exp(x - max): computed once per row, read by the sum and by the output
        for f in plan.shared_transcendentals():
            lane = next((v for v in f.args() if plan.is_reduction_var(v)), None)
            if lane is None:
                continue
            rec(f, f.name(), "compute_at", o, at)
            rec(f, f.name(), "vectorize", lane, vec, GUARD)
    for f in plan.reductions():
        if at is None:
            rec(f, f.name(), "compute_root")
            _host_full_reduction(rec, plan, f, spec)
            continue
        rec(f, f.name(), "compute_at", o, at)
        if not f.has_update_definition():
            continue
        if inner:
            _host_vectorize_reduction(rec, plan, f, (o, at), vec)
        elif f.args():
            # per output vector its extent along x is exactly ``vec``; per outer row, sweep whole input rows
            x = next((v for v in f.args() if plan.is_contiguous(v)), f.args()[0])
            factor = () if per_vector else (vec, GUARD)
            rec(f, f.name(), "vectorize", x, *factor)
            rec(f.update(), f"{f.name()}.update()", "reorder", x, *f.rvars(0))
            rec(f.update(), f"{f.name()}.update()", "vectorize", x, *factor)
    names = [v.name() for v in o.args()]
    for other in plan.outputs():
        if other is o:
            continue
        if shareable and [v.name() for v in other.args()] == names and not other.has_update_definition():
            # same loop nest as the primary output (e.g. var and mean): share it and the reductions in it
            for method, margs in rec.history.get(o.name(), []):
                rec(other, other.name(), method, *margs)
            rec(other, other.name(), "compute_with", o, at)
        else:
            pointwise.schedule_output(rec, plan, other, spec)


def _host_parallel(rec: Recorder, o: hl.Func, label: str, x: hl.Var, n: Optional[int], outer: list[hl.Var], cores: int) -> hl.Var:
    """Parallelize over ``outer`` (fused) if given, else over chunks of ``x``; returns the Var of one task's row."""
    if outer:
        prow = fuse_all(rec, o, outer, f"{label}_row") if len(outer) > 1 else outer[0]
        rec(o, label, "parallel", prow)
        return prow
    per_task = 1 if n is None else -(-n // cores)
    while n is not None and per_task > 1 and n % per_task:  # prefer an exact split: no tail loop
        per_task -= 1
    if per_task > 1:
        rp, rr = hl.Var(f"{label}_task"), hl.Var(f"{label}_r")
        rec(o, label, "split", x, rp, rr, per_task, GUARD)
        rec(o, label, "parallel", rp)
        return rr
    rec(o, label, "parallel", x)
    return x


def _host_full_reduction(rec: Recorder, plan: Plan, f: hl.Func, spec: ScheduleSpec) -> None:
    """Reduction to a scalar: rfactor across parallel tasks, each vectorized."""
    rvars = f.rvars(0) if f.has_update_definition() else []
    ext = _reduction_extent(plan, f)
    vec = spec.get("vector", 8)
    if not rvars or ext is None or ext < 4 * vec * plan.caps.parallelism:
        return
    label = f"{f.name()}.update()"
    chunk = spec.get("split", 0) or -(-ext // (plan.caps.parallelism * 4))
    chunk = max(vec, -(-chunk // vec) * vec)
    ro, rm = hl.RVar(f"{f.name()}_rtask"), hl.RVar(f"{f.name()}_rm")
    rmo, ri = hl.RVar(f"{f.name()}_rmo"), hl.RVar(f"{f.name()}_ri")
    task, lane = hl.Var(f"{f.name()}_task"), hl.Var(f"{f.name()}_lane")
    rec(f.update(), label, "split", rvars[0], ro, rm, chunk, GUARD)
    rec(f.update(), label, "split", rm, rmo, ri, vec, GUARD)
    intm = rec(f.update(), label, "rfactor", [(ro, task), (ri, lane)])
    il = f"{f.name()}_partial"
    rec(intm, il, "compute_root")
    rec(intm, il, "vectorize", lane)
    rec(intm.update(), f"{il}.update()", "reorder", lane, rmo, task)
    rec(intm.update(), f"{il}.update()", "parallel", task)
    rec(intm.update(), f"{il}.update()", "vectorize", lane)


def _gpu_fused(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """One work-group per row (group): threads stride over the row, rfactor'd partials in local memory."""
    o = _primary(plan)
    label = o.name()
    args = list(o.args())
    in_row = [v for v in args if plan.is_reduction_var(v)]
    rows = [v for v in args if not plan.is_reduction_var(v)]
    ext = _reduction_extent(plan, o)
    # rows whose output also spans the row (softmax, norms) prefer wider work-groups (H100 sweep: 256 vs 128
    # gave layer_norm 1.90x vs 2.91x Triton), wider still when every pass reads rows staged from the inputs
    # (norms: 512); per-row results (sums, var_mean) take ``wg``
    staged = _resident_rows(plan, spec, max(spec.get(k, 0) for k in ("wg", "wg_row", "wg_row_staged")))
    inputs_only = bool(staged) and not any(plan.reads_reduction(f.name()) for f in staged)
    wg = spec.get("wg", 256)
    if in_row:
        wg = spec.get("wg_row_staged", 512) if inputs_only else spec.get("wg_row", 256)
    if ext is not None:  # no idle work-items: a row of 1024 takes 256 work-items of 4 lanes, not 512
        wg = max(1, min(wg, pow2_floor(ext // (_row_vector(plan, spec, ext) if in_row or staged else 1))))
    if not rows:
        _gpu_full(rec, plan, o, spec)
        _schedule_others(rec, plan, o, spec)
        return
    if not in_row and not _inner_reduction(plan):
        _gpu_outer(rec, plan, o, rows, spec)
        _schedule_others(rec, plan, o, spec)
        return
    vec = _row_vector(plan, spec, ext) if in_row else 1
    row = _row_loops(rec, o, rows, in_row, wg, vec)
    _stage_rows(rec, plan, o, row, wg, _row_vector(plan, spec, ext), staged)
    names = [v.name() for v in o.args()]
    twins = [t for t in plan.outputs() if t is not o and [v.name() for v in t.args()] == names]
    for twin in twins:  # same-shaped outputs (var_mean's mean and var): the same loops, fused with the primary's
        rec(twin, twin.name(), "compute_with", o, _row_loops(rec, twin, [v for v in twin.args() if not plan.is_reduction_var(v)],
                                                             [v for v in twin.args() if plan.is_reduction_var(v)], wg))
    for f in plan.reductions():
        rec(f, f.name(), "compute_at", o, row)
        if not f.has_update_definition() or wg < 2:
            continue
        lanes = _row_vector(plan, spec, ext) if spec.get("vector_partials", 0) else 1
        if lanes > 1 and _inner_reduction(plan):
            _rfactor_lanes(rec, f, wg, lanes, (o, row))
        else:
            _place_on_threads(rec, _rfactor_across(rec, f, wg), (o, row))
        fold = _rfactor_fold(rec, f, wg, spec.get("fold", 16))
        if fold is not None:
            _place_on_threads(rec, fold, (o, row))
    _schedule_others(rec, plan, o, spec, skip=twins)


def _row_loops(rec: Recorder, o: hl.Func, rows: list[hl.Var], in_row: list[hl.Var], wg: int, vec: int = 1) -> hl.Var:
    """One work-group per row of ``o`` (rows fused), work-items striding along the row when ``o`` spans it,
    each taking ``vec`` adjacent elements (one vector load/store)."""
    label = o.name()
    row = fuse_all(rec, o, rows, f"{label}_row") if len(rows) > 1 else rows[0]
    if in_row:
        x = fuse_all(rec, o, in_row, f"{label}_col") if len(in_row) > 1 else in_row[0]
        _row_threads(rec, o, label, x, [row], wg, vec)
        rec(o, label, "gpu_blocks", row)
    else:
        rec(o, label, "gpu_blocks", row)
    return row


def _row_threads(rec: Recorder, f: hl.Func, label: str, x: hl.Var, outer: list[hl.Var], wg: int, vec: int) -> hl.Var:
    """Split ``x`` into ``vec``-wide vectors dealt round-robin to ``wg`` work-items; returns the serial step Var."""
    lanes = None
    if vec > 1:
        xv, lanes = hl.Var(f"{label}_v"), hl.Var(f"{label}_lanes")
        rec(f, label, "split", x, xv, lanes, vec, GUARD)
        x = xv
    xo, xi = hl.Var(f"{label}_step"), hl.Var(f"{label}_wi")
    rec(f, label, "split", x, xo, xi, wg, GUARD)
    rec(f, label, "reorder", *([lanes] if lanes is not None else []), xo, xi, *outer)
    rec(f, label, "gpu_threads", xi)
    if lanes is not None:
        rec(f, label, "vectorize", lanes)
    return xo


def _row_vector(plan: Plan, spec: ScheduleSpec, ext: Optional[int]) -> int:
    """Lanes per work-item along a row: ``vector``, halved until the row splits into whole vectors."""
    vec = spec.get("vector", 4) if plan.gpu_vectors and ext is not None else 1
    while vec > 1 and ext % vec:
        vec //= 2
    return vec


def _resident_rows(plan: Plan, spec: ScheduleSpec, wg: int) -> list[hl.Func]:
    """``Plan.row_resident`` within the device's local memory, less the partials of ``wg`` work-items."""
    if not spec.get("stage", 1) or not plan.caps.local_mem:
        return []
    budget = plan.caps.local_mem - 8 * wg * max(1, len(plan.reductions()))
    return plan.row_resident(budget, lambda f: _row_bytes(plan, f), spec.get("exp_cost", 6))


def _row_bytes(plan: Plan, f: hl.Func) -> Optional[int]:
    in_row = [v for v in f.args() if plan.is_reduction_var(v)]
    ext = plan.var_extent(f, in_row[0]) if len(in_row) == 1 else None
    return ext * f.type().bytes() if ext is not None else None


def _stage_rows(rec: Recorder, plan: Plan, o: hl.Func, row: hl.Var, wg: int, vec: int, staged: list[hl.Func]) -> None:
    """Row-resident Funcs computed once per work-group into local memory, vectorized, so the passes over a row
    (max, sum, output) read local memory instead of global memory or recomputing."""
    for f in staged:
        name, args = f.name(), list(f.args())
        x = next(v for v in args if plan.is_reduction_var(v))
        rec(f, name, "compute_at", o, row)
        step = _row_threads(rec, f, name, x, [v for v in args if v.name() != x.name()], wg, vec)
        steps = -(-((_row_bytes(plan, f) or 0) // f.type().bytes()) // (wg * vec))
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


def _gpu_full(rec: Recorder, plan: Plan, o: hl.Func, spec: ScheduleSpec) -> None:
    """Reduction to a scalar on GPU. Kernel 1: ``blocks`` work-groups of ``wg`` work-items stream the input
    coalesced (element ``(i * blocks + b) * wg + t`` goes to work-item ``t`` of group ``b``, loads unrolled),
    then each group folds its ``wg`` partials in local memory to one value. Kernel 2: ``fold`` work-items each
    add ``blocks / fold`` group results. Kernel 3: one work-item adds the last ``fold``. No serial chain is
    longer than ``blocks / fold`` (a chain of ``blocks`` dependent loads cost 2x Triton on H100)."""
    wg = spec.get("wg_full", 512)
    width = spec.get("fold_full", 32)
    unroll = spec.get("unroll_full", 4)
    for f in plan.reductions():
        rec(f, f.name(), "compute_root")
        ext = _reduction_extent(plan, f)
        blocks = _exact_blocks(plan.caps.parallelism * spec.get("blocks_per_cu", 1), ext, wg * unroll)
        name, lbl = f.name(), f"{f.name()}.update()"
        if f.has_update_definition() and len(f.rvars(0)) == 1 and (ext is None or ext >= 4 * wg):
            ro, rin, rb, rt = (hl.RVar(f"{name}_{n}") for n in ("ro", "rin", "rb", "rt"))
            b, t = hl.Var(f"{name}_b"), hl.Var(f"{name}_t")
            rec(f.update(), lbl, "split", f.rvars(0)[0], ro, rin, blocks * wg, GUARD)
            rec(f.update(), lbl, "split", rin, rb, rt, wg, GUARD)
            group = rec(f.update(), lbl, "rfactor", rb, b)  # group[b]: everything work-group b reads
            gl = f"{name}_group"
            glbl = f"{gl}.update()"
            # rfactors before the group's block loop, so the partials do not inherit it
            threads = rec(group.update(), glbl, "rfactor", rt, t)  # threads[b, t]: a strided serial sum
            gfold = _rfactor_fold(rec, group, wg, width)
            rec(group, gl, "compute_root")
            rec(group, gl, "gpu_blocks", b)
            rec(group.update(), glbl, "gpu_blocks", b)
            tl = f"{name}_threads"
            rec(threads, tl, "compute_at", group, b)
            rec(threads, tl, "gpu_threads", t)
            rec(threads.update(), f"{tl}.update()", "reorder", ro, t)
            rec(threads.update(), f"{tl}.update()", "gpu_threads", t)
            if unroll > 1 and (ext is None or ext >= blocks * wg * unroll):  # several loads in flight per work-item
                roo, roi = hl.RVar(f"{name}_roo"), hl.RVar(f"{name}_roi")
                rec(threads.update(), f"{tl}.update()", "split", ro, roo, roi, unroll, GUARD)
                rec(threads.update(), f"{tl}.update()", "unroll", roi)
            if gfold is not None:
                _place_on_threads(rec, gfold, (group, b))
            if blocks > width:
                rbo, rbi, v = hl.RVar(f"{name}_rbo"), hl.RVar(f"{name}_rbi"), hl.Var(f"{name}_v")
                rec(f.update(), lbl, "split", rb, rbo, rbi, width, GUARD)
                last = rec(f.update(), lbl, "rfactor", rbi, v)  # last[v]: every width-th group result
                ll = f"{name}_last"
                bx, tx = hl.Var(f"{ll}_wg"), hl.Var(f"{ll}_wi")
                rec(last, ll, "compute_root")
                rec(last, ll, "gpu_tile", v, bx, tx, width, GUARD)
                rec(last.update(), f"{ll}.update()", "gpu_tile", v, bx, tx, width, GUARD)
        rec(f, name, "gpu_single_thread")
        if f.has_update_definition():
            rec(f.update(), lbl, "gpu_single_thread")
    if not o.args():
        rec(o, o.name(), "gpu_single_thread")
    else:
        pointwise.schedule_output(rec, plan, o, spec)


def _exact_blocks(target: int, ext: Optional[int], per_block: int) -> int:
    """A work-group count near ``target`` that splits ``ext`` exactly (no per-element guards, so unrolled
    loads can all be in flight); ``target`` when none fits."""
    target = max(1, target)
    if ext is not None:
        for blocks in sorted(range(max(1, target // 4), 2 * target + 1), key=lambda b: abs(b - target)):
            if ext % (blocks * per_block) == 0:
                return blocks
    return target


def _gpu_outer(rec: Recorder, plan: Plan, o: hl.Func, rows: list[hl.Var], spec: ScheduleSpec) -> None:
    """Outer reduction: work-items across the contiguous kept dim (coalesced); long reductions split in chunks."""
    label, wg = o.name(), spec.get("wg", 256)
    x = next((v for v in rows if plan.is_contiguous(v)), rows[0])
    others = [v for v in rows if v.name() != x.name()]
    bx, tx = hl.Var(f"{label}_wg"), hl.Var(f"{label}_wi")
    rec(o, label, "gpu_tile", x, bx, tx, wg, GUARD)
    if others:
        y = fuse_all(rec, o, others, f"{label}_row") if len(others) > 1 else others[0]
        rec(o, label, "gpu_blocks", y)
    ext = _reduction_extent(plan, o)
    ncols = plan.var_extent(o, x)
    for f in plan.reductions():
        rec(f, f.name(), "compute_at", o, tx)
        if not f.has_update_definition() or others or ext is None or ncols is None or ext < 256:
            continue
        chunks = max(2, min(pow2_floor(plan.caps.parallelism * 2048 // max(ncols, 1)), ext // 64))
        if chunks < 4:
            continue
        fx = next((v for v in f.args() if plan.is_contiguous(v)), f.args()[0])
        ro, ri, c = hl.RVar(f"{f.name()}_ro"), hl.RVar(f"{f.name()}_ri"), hl.Var(f"{f.name()}_chunk")
        lbl = f"{f.name()}.update()"
        rec(f.update(), lbl, "split", f.rvars(0)[0], ro, ri, -(-ext // chunks), GUARD)
        part = rec(f.update(), lbl, "rfactor", ro, c)  # part[x, c] = sum of chunk c of column x
        pl = f"{f.name()}_partial"
        pbx, pby, ptx, pty = (hl.Var(f"{pl}_{n}") for n in ("bx", "by", "tx", "ty"))
        rec(part, pl, "compute_root")
        rec(part, pl, "gpu_tile", fx, c, pbx, pby, ptx, pty, wg, 1, GUARD)
        rec(part.update(), f"{pl}.update()", "gpu_tile", fx, c, pbx, pby, ptx, pty, wg, 1, GUARD)


def _gpu_row_reduce(rec: Recorder, plan: Plan, f: hl.Func, spec: ScheduleSpec) -> None:
    """A reduction in its own kernel, one work-group per row, threads reduce into local memory."""
    args = list(f.args())
    row = fuse_all(rec, f, args, f.name()) if len(args) > 1 else args[0]
    rec(f, f.name(), "gpu_blocks", row)
    upd = f.update()
    ext = _reduction_extent(plan, f)
    wg = max(1, min(spec.get("wg", 128), pow2_floor(ext))) if ext else spec.get("wg", 128)
    # rfactor first: the partials must not inherit the update's block loops
    split = _rfactor_across(rec, f, wg) if wg >= 2 else None
    fold = _rfactor_fold(rec, f, wg, spec.get("fold", 16)) if split is not None else None
    urow = fuse_all(rec, upd, args, f"{f.name()}_u") if len(args) > 1 else args[0]
    rec(upd, f"{f.name()}.update()", "gpu_blocks", urow)
    for part in (split, fold):
        if part is not None:
            _place_on_threads(rec, part, (f, urow))


def _rfactor_across(rec: Recorder, f: hl.Func, wg: int) -> tuple[hl.Func, hl.RVar, hl.Var]:
    """Split the reduction by ``wg`` and rfactor: one partial per work-item, each striding over the row."""
    ro, ri, u = hl.RVar(f"{f.name()}_ro"), hl.RVar(f"{f.name()}_ri"), hl.Var(f"{f.name()}_wi")
    rec(f.update(), f"{f.name()}.update()", "split", f.rvars(0)[0], ro, ri, wg, GUARD)
    part = rec(f.update(), f"{f.name()}.update()", "rfactor", ri, u)
    return part, ro, u


def _rfactor_lanes(rec: Recorder, f: hl.Func, wg: int, vec: int, at: tuple[hl.Func, hl.Var]) -> None:
    """``_rfactor_across`` + ``_place_on_threads`` where each work-item reads ``vec`` adjacent elements per step
    (one vector load) into a vector accumulator in registers, then adds its lanes: a quarter of the loop
    iterations and no local-memory store per element."""
    name, lbl = f.name(), f"{f.name()}.update()"
    ro, ri, rw, rl = (hl.RVar(f"{name}_{n}") for n in ("ro", "ri", "rw", "rl"))
    u, lane = hl.Var(f"{name}_wi"), hl.Var(f"{name}_lane")
    rec(f.update(), lbl, "split", f.rvars(0)[0], ro, ri, wg * vec, GUARD)
    rec(f.update(), lbl, "split", ri, rw, rl, vec, GUARD)
    part = rec(f.update(), lbl, "rfactor", rw, u)  # part[u]: work-item u's elements (over ro and rl)
    pl, plbl = part.name(), f"{part.name()}.update()"
    acc = rec(part.update(), plbl, "rfactor", rl, lane)  # acc[u, lane]: over ro, one vector per work-item
    al = acc.name()
    rec(part, pl, "compute_at", at[0], at[1])
    rec(part, pl, "gpu_threads", u)
    rec(part.update(), plbl, "reorder", rl, u)
    rec(part.update(), plbl, "gpu_threads", u)
    rec(acc, al, "compute_at", part, u)
    rec(acc, al, "vectorize", lane)
    rec(acc.update(), f"{al}.update()", "reorder", lane, ro)
    rec(acc.update(), f"{al}.update()", "vectorize", lane)


def _place_on_threads(rec: Recorder, split: tuple[hl.Func, hl.RVar, hl.Var], at: tuple[hl.Func, hl.Var]) -> None:
    """Compute the partials inside the work-group at ``at``, one work-item per partial (local memory)."""
    part, ro, u = split
    pl = part.name()
    rec(part, pl, "compute_at", at[0], at[1])
    rec(part, pl, "gpu_threads", u)
    rec(part.update(), f"{pl}.update()", "reorder", ro, u)
    rec(part.update(), f"{pl}.update()", "gpu_threads", u)


def _rfactor_fold(rec: Recorder, f: hl.Func, wg: int, width: int = 32) -> Optional[tuple[hl.Func, hl.RVar, hl.Var]]:
    """After ``_rfactor_across``: fold the ``wg`` partials to ``width`` in parallel (each of ``width`` work-items
    adds ``wg / width``), so the last, single-work-item combine is ``width`` steps instead of ``wg``."""
    if wg <= width or not f.has_update_definition() or len(f.rvars(0)) != 1:
        return None
    name, lbl = f.name(), f"{f.name()}.update()"
    uo, ui, v = hl.RVar(f"{name}_fo"), hl.RVar(f"{name}_fi"), hl.Var(f"{name}_fold")
    rec(f.update(), lbl, "split", f.rvars(0)[0], uo, ui, width, GUARD)
    return rec(f.update(), lbl, "rfactor", ui, v), uo, v


def _staged(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """Every reduction in its own loop nest (compute_root), outputs pointwise: valid for any consumer graph."""
    for f in plan.reductions():
        rec(f, f.name(), "compute_root")
        args = list(f.args())
        if not args:
            if plan.caps.gpu:
                rec(f, f.name(), "gpu_single_thread")
                if f.has_update_definition():
                    rec(f.update(), f"{f.name()}.update()", "gpu_single_thread")
            continue
        if plan.caps.gpu and f.has_update_definition() and _inner_reduction(plan):
            _gpu_row_reduce(rec, plan, f, spec)
        elif plan.caps.gpu:
            wg = spec.get("wg", 128)
            x = fuse_all(rec, f, args, f.name()) if len(args) > 1 else args[0]
            bx, tx = hl.Var(f"{f.name()}_wg"), hl.Var(f"{f.name()}_wi")
            rec(f, f.name(), "gpu_tile", x, bx, tx, wg, GUARD)
            if f.has_update_definition():
                upd = f.update()
                y = fuse_all(rec, upd, args, f"{f.name()}_u") if len(args) > 1 else args[0]
                rec(upd, f"{f.name()}.update()", "gpu_tile", y, bx, tx, wg, GUARD)
        else:
            rec(f, f.name(), "parallel", args[-1])
            if f.has_update_definition():
                rec(f.update(), f"{f.name()}.update()", "parallel", args[-1])
                if _inner_reduction(plan):
                    _host_vectorize_reduction(rec, plan, f, (f, args[-1]), spec.get("vector", 8))
    for o in plan.outputs():
        pointwise.schedule_output(rec, plan, o, spec)


def _outputs_only(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    for f in plan.reductions():
        rec(f, f.name(), "compute_root")
    for o in plan.outputs():
        pointwise.schedule_output(rec, plan, o, spec)


def variants(gpu: bool) -> list[tuple[str, Callable[[Recorder, Plan, ScheduleSpec], None]]]:
    """Schedules to try in order; Halide rejects illegal ones at compile time and the next is tried."""
    if not gpu:
        return [("fused", _host_fused), ("staged", _staged), ("outputs_only", _outputs_only)]
    unstaged = lambda rec, plan, spec: _gpu_fused(rec, plan, spec.with_params(stage=0))  # noqa: E731
    return [("fused", _gpu_fused), ("fused_global", unstaged), ("staged", _staged), ("outputs_only", _outputs_only)]

"""Reduction schedules: tunables, the host forms (rows fused per task, in-row rfactor), staged (compute_root) forms
and the variants tried in order; the GPU forms are in ``gpu_reduction`` and ``gpu_columns``."""
from __future__ import annotations

from typing import Callable, Optional

import halide as hl

from ..meta import ScheduleSpec
from . import pointwise
from .common import GUARD, Plan, Recorder, fuse_all, inner_reduction, primary_output, reduction_extent, total
from .gpu_columns import gpu_column_reduce
from .gpu_reduction import few_long_rows, gpu_full_reduce, gpu_fused, gpu_row_reduce, gpu_row_reduce_split


def default_params(gpu: bool, vector_width: int) -> dict[str, int]:
    """Tunables: ``vector`` lanes; GPU work-group sizes ``wg`` (per-row results, outer reductions), ``wg_row`` /
    ``wg_row_staged`` (outputs spanning the row; rows staged from inputs only), ``wg_full``; ``stage`` (rows in
    local memory) and ``exp_cost`` / ``fast_exp_cost`` (what staging weighs a transcendental at: Halide's,
    CUDA's hardware exp); ``unroll_row`` / ``unroll_span``
    (register partials per work-item), ``unroll_outer`` / ``unroll_full`` (loads in flight), ``vector_outer``,
    ``vector_partials``; ``col_split`` (work-items per column of a short column reduction, 0: automatic,
    ``gpu_columns._column_split``); ``col_unroll`` (rows of a work-item's share unrolled together at most,
    ``gpu_columns.share_unroll``); ``fuse_sums`` (independent sums of a split column form read each row in
    one pass, 0: a pass each); ``warp_rows`` (CUDA: rows per work-group of one warp each, 0: off,
    ``gpu_warps``); ``pair_rows`` (with warps: bf16 inputs as words of two elements, ``pairs._row_inputs``),
    ``pair_row_outputs`` (with it, the bf16 outputs spanning the row too, ``pairs._row_outputs``);
    ``single_group_max`` (a reduction to a scalar this short is one work-group of the
    output's kernel); ``tasks_per_core`` (host), ``split``."""
    if gpu:
        # H100 sweeps (benchmarks/results/<gpu>/sweep_*.md): wg 256 + fold 16 for per-row results (argmax
        # 1.39x -> 1.24x Triton, var_mean 1.35x -> 1.27x); 512 for rows staged from inputs (norms ~1.0x)
        return {"vector": 4, "wg": 256, "fold": 16, "wg_row": 256, "wg_row_staged": 512, "wg_full": 512,
                "fold_full": 32, "single_group_max": 16384, "blocks_per_cu": 1, "unroll_full": 4, "split": 64,
                "stage": 1, "exp_cost": 6, "fast_exp_cost": 2, "vector_partials": 0, "unroll_outer": 4,
                "vector_outer": 1, "vector_full": 4, "unroll_row": 2, "unroll_span": 0, "col_split": 0, "col_unroll": 16,
                "fuse_sums": 1,
                # H200 bf16 training steps (2026-11-28): every CUDA row kernel that takes warps beats its
                # work-group form, e.g. GPT-2's LayerNorm 2.99x -> 1.89x Triton, Llama's RMSNorm 2.04x -> 1.28x
                "warp_rows": 4,
                # with warps: bf16 inputs read as 32-bit words, each lane a pair of adjacent elements (pairs.py)
                "pair_rows": 1,
                # with pair_rows: the bf16 outputs spanning the row stored as words too (pairs._row_outputs)
                "pair_row_outputs": 1}
    return {"vector": vector_width, "tasks_per_core": 4, "split": 0, "min_chunk": 4096}


def _host_vectorize_reduction(rec: Recorder, plan: Plan, f: hl.Func, at: tuple[hl.Func, hl.Var], vec: int) -> None:
    """Inner reduction: rfactor ``vec`` partial accumulators and vectorize across them."""
    label = f"{f.name()}.update()"
    rvars = f.rvars(0)
    ext = reduction_extent(plan, f)
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
    o = primary_output(plan)
    label, vec = o.name(), spec.get("vector", 8)
    args = list(o.args())
    in_row = [v for v in args if plan.is_reduction_var(v)]
    rows = [v for v in args if not plan.is_reduction_var(v)]
    inner = inner_reduction(plan)
    at: Optional[hl.Var] = None
    per_vector = False  # outer reduction computed per output vector (else per row of outer dims)
    shareable = False
    cores = plan.caps.parallelism * spec.get("tasks_per_core", 4)
    x0_ext = plan.var_extent(o, rows[0]) if rows else None
    if rows and not inner and not in_row and x0_ext is not None and x0_ext >= vec:
        # outer reduction: vectorize across the contiguous kept dim; not fused with the others, so that the
        # region of the reduction computed per vector stays exact
        xo, lanes = hl.Var(f"{label}_xo"), hl.Var(f"{label}_lanes")
        rec(o, label, "split", rows[0], xo, lanes, vec, plan.tail)
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
            rec(o, label, "vectorize", in_row[0], vec, plan.tail)
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
            x = plan.most_contiguous(list(f.args()))
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
    ext = reduction_extent(plan, f)
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


def _staged(rec: Recorder, plan: Plan, spec: ScheduleSpec, share_chunks: bool = False) -> None:
    """Every reduction in its own loop nest (compute_root), outputs pointwise: valid for any consumer graph.
    ``share_chunks``: GPU column sums of one shape computed in one kernel (illegal where one needs another)."""
    shared: Optional[dict] = {} if share_chunks else None
    for f in plan.reductions():
        args = list(f.args())
        if not args and plan.caps.gpu:
            gpu_full_reduce(rec, plan, f, spec)
            continue
        rec(f, f.name(), "compute_root")
        if not args:
            continue
        if plan.caps.gpu and f.has_update_definition() and inner_reduction(plan):
            if not (few_long_rows(plan, f, args) and gpu_row_reduce_split(rec, plan, f, spec)):
                gpu_row_reduce(rec, plan, f, spec)
        elif plan.caps.gpu:
            gpu_column_reduce(rec, plan, f, spec, shared)
        else:
            rec(f, f.name(), "parallel", args[-1])
            if f.has_update_definition():
                rec(f.update(), f"{f.name()}.update()", "parallel", args[-1])
                if inner_reduction(plan):
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
    unstaged = lambda rec, plan, spec: gpu_fused(rec, plan, spec.with_params(stage=0))  # noqa: E731
    shared = lambda rec, plan, spec: _staged(rec, plan, spec, share_chunks=True)  # noqa: E731
    return [("fused", gpu_fused), ("fused_global", unstaged), ("staged_shared", shared), ("staged", _staged),
            ("outputs_only", _outputs_only)]

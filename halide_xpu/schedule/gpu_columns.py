"""GPU column reductions (inputs stride-1 along a kept dim): work-items across the columns, short columns shared
by several work-items per column (sums of one pass fused), long ones split in chunks summed in parallel."""
from __future__ import annotations

from typing import Optional

import halide as hl

from ..meta import DTYPES, ScheduleSpec
from .gpu_groups import work_group_per_result
from .common import (GUARD, SHIFT, NotApplicable, Plan, Recorder, fuse_all, fused_rvar, inner_reduction, pow2_floor,
                     reduction_size, source_name, total)


MAX_CHUNKS = 1024  # chunks of one column reduction (_column_chunks) summed by one work-item
MAX_CHUNKS_STAGED = 4096  # ... summed by a work-group per column (_final_over_chunks)
FINAL_UNROLL = 16  # loads in flight in the final sum over more than 64 chunks
FEW_PER_UNIT = 32  # results per compute unit at most for a column reduction of "few results" (_few_results)
FEW_EXT_MAX = 1024  # rows of such a column at most: one kernel, FEW_SPLIT work-items per column
FEW_SPLIT = 32  # work-items per column of few results (else at most 8)
FEW_GROUP = 256  # work-items of such a work-group (columns x work-items per column)
COLUMN_SECTOR = 8  # columns of a work-group at least (32 bytes of fp32 a row)
SPLIT_ITEMS_PER_UNIT = 4096  # work-items per compute unit a short column reduction's split aims at

def column_beside_wide(plan: Plan, o: hl.Func, rows: list[hl.Var], in_row: list[hl.Var]) -> Optional[hl.Func]:
    """The output of a column reduction (inputs stride-1 along a kept dim) where the widest output ``o`` also spans
    the reduced dims, ahead of the kept ones (ResNet's pooled mean beside its relu mask, NCHW mask from channels-last
    inputs: the row form failed and the staged form ran at 3.2x Triton); None for other kernels."""
    if inner_reduction(plan) or len(plan.meta.reductions) != 1:
        return None
    names = [v.name() for v in rows]
    args = [v.name() for v in o.args()]
    if args[:len(in_row)] != [v.name() for v in in_row]:
        return None
    return next((t for t in plan.outputs() if t is not o and not t.has_update_definition()
                 and [v.name() for v in t.args()] == names), None)


def gpu_outer(rec: Recorder, plan: Plan, o: hl.Func, rows: list[hl.Var], spec: ScheduleSpec,
               wide: Optional[hl.Func] = None) -> list[hl.Func]:
    """Outer reduction: work-items across the contiguous kept dim (coalesced); long reductions split in chunks.
    Same-shaped outputs (a norm's weight and bias gradients) are computed with ``o`` by the same work-items;
    returns them. ``wide``: an output over the reduced dims (first) and ``o``'s, computed by the same work-items,
    each looping over its reduced dims."""
    label, wg = o.name(), spec.get("wg", 256)
    x = plan.most_contiguous(rows)
    others = [v for v in rows if v.name() != x.name()]
    bx, tx = hl.Var(f"{label}_wg"), hl.Var(f"{label}_wi")
    names = [v.name() for v in o.args()]
    twins = [t for t in plan.outputs()
             if t is not o and not t.has_update_definition() and [v.name() for v in t.args()] == names]
    # fused outputs with a partial last work-group: Halide 21 infers the producers computed at the shared work-item
    # loop over the rounded-up extent under GuardWithIf (max/min + argmax of 1028 bool columns read column 1279);
    # ShiftInwards keeps every work-item inside, with a work-group no wider than the columns. Where an output
    # overwrites an input (Plan.tail: no point may be computed twice), work-groups tile the columns exactly
    # instead (a training BatchNorm1d(100) updating its running stats read column 127 of 100: CpuTests'
    # test_buffer_batch_norm on opencl and sycl)
    ncols = plan.var_extent(o, x)
    results = total([plan.var_extent(o, v) for v in rows])
    ext = reduction_size(plan)
    # no chunks for the columns (with other row dims, a short or symbolic column, few results): the work-items are
    # all there is
    few = _few_results(plan, results, ext)
    unchunked = bool(others) or ext is None or ncols is None or ext < 256 or few
    fused = bool(twins) or wide is not None
    wg, split, tail = _outer_group(plan, spec, wg, results if unchunked else None, ext, ncols, few, fused)
    # the wide output's reduced dim on the work-items that share each column (the pooled mean's relu mask: 49
    # stores a column on one work-item of 8), else inside its column's work-item
    spread = wide is not None and split > 1 and sum(plan.is_reduction_var(v) for v in wide.args()) == 1
    across = spread and _stride_one_along_reduced(plan, wide) and wg % split == 0 and wg > split
    for f in [o, *twins, *([wide] if wide is not None else [])]:  # the loops of o, named as o's (compute_with
        # matches them by name)
        if f is wide and across:
            _wide_across(rec, plan, f, x, bx, tx, wg, split, tail, label)
        else:
            rec(f, f.name(), "gpu_tile", x, bx, tx, wg, tail)
        y = None
        if others:
            y = fuse_all(rec, f, others, f.name(), f"{label}_row") if len(others) > 1 else others[0]
            rec(f, f.name(), "gpu_blocks", y)
        if f is wide and across:
            rec(f, f.name(), "compute_with", o, bx)
        elif f is wide and spread:
            r = next(v for v in wide.args() if plan.is_reduction_var(v))
            ro, ri = hl.Var(f"{label}_wro"), hl.Var(f"{label}_wri")
            rec(f, f.name(), "split", r, ro, ri, split, GUARD)
            rec(f, f.name(), "reorder", ro, tx, ri, bx, *([y] if y is not None else []))
            rec(f, f.name(), "gpu_threads", ri)
            rec(f, f.name(), "compute_with", o, bx)
        elif f is not o:
            rec(f, f.name(), "compute_with", o, tx)
    passes: list[tuple[hl.Func, hl.Func, str]] = []  # (sum, its partials, the loop its pass is fused at)
    for f in plan.reductions():
        if split > 1 and f.has_update_definition():
            one_pass = (spec.get("fuse_sums", 1) and any(v.name() == x.name() for v in f.args())
                        and _independent(plan, f, [p[0] for p in passes]))
            part, level = _split_column(rec, o, f, x, bx, split, -(-(ext or 0) // split),
                                        f"{label}_sums" if one_pass else "", spec.get("col_unroll", 16))
            if one_pass and passes:  # the same walk down the columns: each row read once for every such sum
                rec(part.update(), f"{part.name()}.update()", "compute_with", passes[0][1].update(), hl.RVar(level))
            if one_pass:
                passes.append((f, part, level))
            continue
        if split > 1 and _feeds_reduction(plan, f):
            # a per-column value between split reductions (a Welford combine's mean, which the second sum reads
            # per row): computed per work-group like them, one work-item per column (at ``tx`` it was out of reach
            # of the next sum's partials, so the whole fused form failed: ResNet's batch norm took the staged
            # form, 8-15x Triton)
            fx = next((v for v in f.args() if v.name() == x.name()), None)
            rec(f, f.name(), "compute_at", o, bx)
            if fx is not None:  # else one value per work-group's rows (the count a mean divides by)
                rec(f, f.name(), "gpu_threads", fx)
            continue
        rec(f, f.name(), "compute_at", o, tx)
        if not f.has_update_definition():
            continue
        if unchunked:
            _unroll_column(rec, f, ext, spec.get("unroll_outer", 4))
            continue
        vec = spec.get("vector_outer", 1) if plan.gpu_vectors else 1  # H100: 4 lanes 1.46x Triton, 1 lane 1.16x
        vec = vec if vec > 1 and ncols % vec == 0 and ncols >= vec * wg else 1
        chunks = _column_chunks(rec, plan, f, ext, ncols, vec, wg, spec)
        if chunks:
            _final_unrolled(rec, f, chunks)
    return twins


def _independent(plan: Plan, f: hl.Func, others: list[hl.Func]) -> bool:
    """Whether no sum in ``others`` reads ``f`` and ``f`` reads none of them (through inlined Funcs): sums that may
    share one pass over their rows (a batch-norm backward's sum(dy) and sum(dy * (x - mean)): two passes over 300 MB
    of ResNet-18's first layer, 1.8x Triton's one)."""
    if not others:
        return True
    name = plan.name_of(f, plan.meta.reductions)
    names = [plan.name_of(g, plan.meta.reductions) for g in others]
    if name is None or None in names:
        return False
    return all(n not in _downstream(plan, name) and name not in _downstream(plan, n) for n in names)


def _downstream(plan: Plan, name: str) -> set[str]:
    """The kernel's materialized Funcs (sums and per-row values) that read ``name``, directly or through others."""
    materialized, found, todo = set(plan.meta.reductions), set(), [name]
    while todo:
        for r in plan.readers(todo.pop(), materialized) - found:
            found.add(r)
            todo.append(r)
    return found


def _feeds_reduction(plan: Plan, f: hl.Func) -> bool:
    """Whether a reduction's update reads ``f``, directly, through inlined Funcs or through per-row values (by
    their names in the source: a re-created Func is named ``tmp13$1``)."""
    def feeds(name: str) -> bool:
        readers = plan.readers(name, set(plan.meta.reductions))
        return any(plan.funcs[r].has_update_definition() or feeds(r) for r in readers
                   if isinstance(plan.funcs.get(r), hl.Func))
    name = plan.name_of(f, plan.meta.reductions)
    return name is not None and feeds(name)


def _few_results(plan: Plan, results: Optional[int], ext: Optional[int]) -> bool:
    """A column reduction with few results (at most FEW_PER_UNIT per compute unit) of short columns (FEW_EXT_MAX
    rows): one kernel of many work-items per column (the second stage of a split sum, 64 x 784: two kernels, a
    chunk pass with 64 of 256 work-items busy then the chunks' sum, 3x Triton's one)."""
    return (results is not None and ext is not None and results <= FEW_PER_UNIT * max(plan.caps.parallelism, 1)
            and 32 <= ext <= FEW_EXT_MAX)


def _stride_one_along_reduced(plan: Plan, wide: hl.Func) -> bool:
    """Whether ``wide``'s buffer is stride-1 along its reduced dim (an NCHW relu mask beside a channels-last
    pooled mean)."""
    spec = plan.out_specs.get(source_name(wide))
    args = list(wide.args())
    reduced = [i for i, v in enumerate(args) if plan.is_reduction_var(v)]
    return spec is not None and len(reduced) == 1 and len(spec.stride) == len(args) and spec.stride[reduced[0]] == "1"


def _wide_across(rec: Recorder, plan: Plan, f: hl.Func, x: hl.Var, bx: hl.Var, tx: hl.Var, wg: int, split: int,
                 tail: hl.TailStrategy, label: str) -> None:
    """The wide output's loops where its buffer is stride-1 along the reduced dim: the same work-group shape as
    the column sums (``wg`` x ``split``), but each sub-group's work-items take ``split`` consecutive points of the
    reduced dim for ``wg / split`` columns, so a store instruction covers a few runs of consecutive bytes, not one
    byte per column (ResNet-18's pooled mean beside its NCHW relu mask: 13.2 us on the H200, Triton 4.9)."""
    r = next(v for v in f.args() if plan.is_reduction_var(v))
    ro, ri = hl.Var(f"{label}_wro"), hl.Var(f"{label}_wri")
    txo, txi, t = hl.Var(f"{label}_wxo"), hl.Var(f"{label}_wxi"), hl.Var(f"{label}_wt")
    name = f.name()
    rec(f, name, "split", x, bx, tx, wg, tail)
    rec(f, name, "split", tx, txo, txi, wg // split, GUARD)
    rec(f, name, "split", r, ro, ri, split, GUARD)
    rec(f, name, "reorder", ro, ri, txi, txo, bx)
    rec(f, name, "fuse", ri, txi, t)
    rec(f, name, "gpu_blocks", bx)
    rec(f, name, "gpu_threads", t, txo)


def _outer_group(plan: Plan, spec: ScheduleSpec, wg: int, results: Optional[int], ext: Optional[int],
                 ncols: Optional[int], few: bool, fused: bool) -> tuple[int, int, hl.TailStrategy]:
    """``gpu_outer``'s work-group: (work-items across the columns, work-items sharing each column, the columns'
    tail strategy). ``results``: the results of an unchunked reduction, else None; ``fused``: outputs computed with
    ``o`` (twins or a wide output)."""
    split = 1
    if results is not None:  # few results (a split column sum's partials, 32 x 768): every compute unit gets a
        # work-group (256 wide, 96 of the H200's 132 units worked, 6-7x Triton)
        wg = max(min(plan.min_wg * 2, wg), min(wg, pow2_floor(results // max(plan.caps.parallelism, 1))))
        if ncols is not None and ncols < wg:  # no idle work-items past the last column (64 of a 256-wide group)
            wg = max(plan.min_wg, 1 << (ncols - 1).bit_length())
        split = _column_split(plan, spec, results, ext, wg, few)
        if few and wg * split > FEW_GROUP:  # narrower work-groups, more of them (64 columns x 784 rows: one
            # work-group of 8 x 64 work-items was 3x Triton's 1.8 us)
            wg = max(COLUMN_SECTOR, pow2_floor(FEW_GROUP // split))
    tail = GUARD
    if fused and ncols is not None and ncols % wg:
        if plan.tail == SHIFT and ncols >= plan.min_wg:
            tail, wg = SHIFT, min(wg, pow2_floor(ncols))
        else:  # an output overwrites an input, or fewer columns than a sub-group: no partial work-group
            exact = _dividing_work_group(ncols, wg, min(plan.min_wg, ncols, wg))
            if exact is None:
                raise NotApplicable(f"outputs computed together over {ncols} columns, no work-group of "
                                    f"{plan.min_wg}..{wg} divides them, and an output overwrites an input")
            wg = exact
    while split > 1 and wg * split > min(1024, plan.caps.max_work_group or 1024):  # the tail's work-group may be
        split //= 2  # another width than the one the split was chosen for
    return wg, split, tail


def _column_split(plan: Plan, spec: ScheduleSpec, results: Optional[int], ext: Optional[int], wg: int,
                  few: bool = False) -> int:
    """Work-items sharing each column of a short column reduction (a split sum's partials, 32 x 768 results of 128
    rows each): enough for ``parallelism x 1024`` work-items, times 512 / rows for columns shorter than 512 rows (at
    most 8, or FEW_SPLIT for ``few`` results; shares of 4+ rows, a work-group of at most 1024); 1 where one
    work-item per column is enough.
    ``col_split`` forces it. A share need not divide the column: the last rows are guarded (Inductor splits 4000
    rows into 32 partials of 125: one work-item per column was 8x Triton on the H200, 52 vs 6.5 us, where 4096 rows
    ran at 0.8x). H200, ResNet-18's batch-norm chunks (us at 2 / 4 / 8 work-items per column): 64 columns x 784
    chunks of 128 rows 59.8 / 45.8 / 28.4, 128 x 196 of 128 rows 32.7 / 19.1 / 14.3; 64 x 1024 of 392 rows
    61.3 / 88.0 / 88.1 with 4 rows unrolled (guarded at 98 and 49 rows), and with ``share_unroll``'s steps
    (``col_unroll_sweep_*.md``): the bf16 mean and variance 35.2 / 22.3 / 27.5, fp32 52.0 / 51.9 / 46.8, their
    backward's two sums bf16 50.1 / 51.9 / 48.7, fp32 73.2 / 74.9 / 73.5: the aim went from 1024 work-items per
    unit (2 here) to SPLIT_ITEMS_PER_UNIT (8) for 4-byte inputs, half that where every input is 16-bit (4)."""
    if results is None or ext is None:
        return 1
    short = pow2_floor(max(1, 512 // max(ext, 1)))
    most = FEW_SPLIT if few else 8
    items = SPLIT_ITEMS_PER_UNIT * _widest_input_bytes(plan) // 4  # bf16 chunks: half (2 bytes a load)
    want = spec.get("col_split", 0) or min(most, pow2_floor(max(1, plan.caps.parallelism * items * short
                                                                  // max(results, 1))))
    while want > 1 and (ext // want < 4 or (not few and wg * want > min(1024, plan.caps.max_work_group or 1024))):
        want //= 2
    return want


def _widest_input_bytes(plan: Plan) -> int:
    """The element size of the kernel's widest tensor input (4 where it has none)."""
    return max((DTYPES[a.dtype][3] for a in plan.meta.args if a.kind == "in" and a.dtype in DTYPES), default=4)


def share_unroll(share: int, most: int) -> int:
    """Rows of a work-item's share unrolled together: the largest divisor of ``share`` in [4, ``most``], else 4
    (the last step guarded). A guarded step issues its loads one by one: ResNet-18's 392-row batch-norm chunks at 4
    and 8 work-items per column (shares of 98 and 49 rows) were 1.4x slower than at 2 (196 rows: 4 divides), where
    128-row chunks got faster with every work-item added (H200, ``col_split_sweep_e1d7d51.md``). With ``most`` =
    16 (``col_unroll``) the bf16 chunk pass at 2 work-items per column took 35.2 us, 48.3 with 4 rows a step
    (``col_unroll_sweep_*.md``)."""
    return next((d for d in range(most, 3, -1) if share % d == 0), 4)


def _split_column(rec: Recorder, o: hl.Func, f: hl.Func, x: hl.Var, bx: hl.Var, split: int, share: int,
                  prefix: str = "", unroll: int = 4) -> tuple[hl.Func, str]:
    """``f`` (a column reduction read by ``o``'s work-items) computed per work-group: ``split`` work-items per
    column each sum every ``split``-th row into a partial in local memory, then one work-item per column adds the
    partials (Triton's XBLOCK x RBLOCK tile of a "red" kernel)."""
    n, lbl = prefix or f.name(), f"{f.name()}.update()"
    ro, ri, u = hl.RVar(f"{n}_cro"), hl.RVar(f"{n}_cri"), hl.Var(f"{n}_cu")
    rec(f.update(), lbl, "split", fused_rvar(rec, f), ro, ri, split, GUARD)
    part = rec(f.update(), lbl, "rfactor", ri, u)  # part[cols.., u]: rows u, u + split, ...
    pn = part.name()
    # ``f`` may lack the column dim: a split Welford's per-chunk count, the same for every column (ResNet's batch
    # norm; it raised StopIteration here and the kernel took the staged form): its shares on ``u`` alone
    px = [v for v in part.args() if v.name() == x.name()]
    rec(part, pn, "compute_at", o, bx)
    rec(part, pn, "gpu_threads", *px, u)
    rec(part.update(), f"{pn}.update()", "reorder", ro, *px, u)
    rec(part.update(), f"{pn}.update()", "gpu_threads", *px, u)
    level = ro.name()  # the serial walk down the column (where sums of one pass fuse)
    if share <= 16:
        rec(part.update(), f"{pn}.update()", "unroll", ro)
    else:  # rows' loads in flight together
        roo, roi = hl.RVar(f"{n}_croo"), hl.RVar(f"{n}_croi")
        rec(part.update(), f"{pn}.update()", "split", ro, roo, roi, share_unroll(share, unroll), GUARD)
        rec(part.update(), f"{pn}.update()", "unroll", roi)
        level = roo.name()
    fx = [v for v in f.args() if v.name() == x.name()]
    fn = f.name()
    rec(f, fn, "compute_at", o, bx)
    if fx:
        rec(f, fn, "gpu_threads", *fx)
        rec(f.update(), lbl, "reorder", ri, *fx)
        rec(f.update(), lbl, "gpu_threads", *fx)
    rec(f.update(), lbl, "unroll", ri)
    return part, level


def _unroll_column(rec: Recorder, f: hl.Func, ext: Optional[int], unroll: int) -> None:
    """A work-item's serial walk down its column, ``unroll`` steps at a time (a column of up to 32 whole, the second
    stage of a split sum): their loads in flight together."""
    unroll = ext if ext is not None and ext <= 32 else unroll
    if ext is None or unroll < 2 or ext % unroll or (ext < 2 * unroll and unroll != ext) or len(f.rvars(0)) != 1:
        return
    ro, ri = hl.RVar(f"{f.name()}_co"), hl.RVar(f"{f.name()}_ci")
    rec(f.update(), f"{f.name()}.update()", "split", f.rvars(0)[0], ro, ri, unroll, GUARD)
    rec(f.update(), f"{f.name()}.update()", "unroll", ri)


def _dividing_work_group(n: int, largest: int, smallest: int) -> Optional[int]:
    """The widest work-group in [smallest, largest] that divides ``n`` (None if none does)."""
    return next((d for d in range(min(n, largest), smallest - 1, -1) if n % d == 0), None)


def gpu_column_reduce(rec: Recorder, plan: Plan, f: hl.Func, spec: ScheduleSpec, shared: Optional[dict] = None) -> None:
    """A reduction over a non-contiguous dim in its own kernels (the staged form: column sums of a backward's
    bias and norm-weight gradients): one work-item per column, coalesced along it; a long column of a 1-D result
    split in chunks whose sums run in parallel (``_column_chunks``), then added. Was one work-item per column over
    the whole column: 768 work-items for GPT-2's bias gradients, 4.5 ms a kernel on the H100."""
    args, label, wg = list(f.args()), f.name(), spec.get("wg", 256)
    x = fuse_all(rec, f, args, label) if len(args) > 1 else args[0]
    ncols = total([plan.var_extent(f, v) for v in args])
    if ncols is not None:
        wg = max(plan.min_wg, min(wg, pow2_floor(ncols)))
    bx, tx = hl.Var(f"{label}_wg"), hl.Var(f"{label}_wi")
    rec(f, label, "gpu_tile", x, bx, tx, wg, GUARD)
    if not f.has_update_definition():
        return
    ext = reduction_size(plan)
    chunks = 0
    if ext is not None and ncols is not None and ext >= 256:
        chunks = _column_chunks(rec, plan, f, ext, ncols, 1, wg, spec, MAX_CHUNKS_STAGED, shared)
    if chunks > 64:
        _final_over_chunks(rec, plan, f, args, chunks, spec)
        return
    if chunks:
        _final_unrolled(rec, f, chunks)
    upd = f.update()
    y = fuse_all(rec, upd, args, f"{label}_u") if len(args) > 1 else args[0]
    rec(upd, f"{label}.update()", "gpu_tile", y, bx, tx, wg, GUARD)


def _column_chunks(rec: Recorder, plan: Plan, f: hl.Func, ext: int, ncols: int, vec: int, wg: int,
                   spec: ScheduleSpec, max_chunks: int = MAX_CHUNKS, shared: Optional[dict] = None) -> int:
    """Split ``f``'s (column) reduction in chunks summed in parallel: ``part[x, c]`` in each work-item's registers,
    stored once per chunk; ``f``'s update then adds the chunks (scheduled by the caller: ``_final_over_chunks``
    when ``f`` is a kernel of its own). ``ext`` counts every point of the reduction domain (several RVars are
    fused into one first). ``shared``: chunk kernels of the same shape share one kernel (``compute_with``), so a
    backward's several column sums over one gradient read it once from memory (then from cache). Returns the
    chunk count, 0 where the column is too short to gain."""
    # enough work-items to fill the device: 2048 per compute unit, each summing ``vec`` columns of a chunk
    chunks = max(2, min(pow2_floor(plan.caps.parallelism * 2048 * vec // max(ncols, 1)), ext // 64, max_chunks))
    if chunks < 4:
        return 0
    unroll = spec.get("unroll_outer", 4)
    rows = -(-ext // chunks)
    if unroll > 1 and rows >= 4 * unroll:  # whole unrolled steps: every work-item's loads in flight together
        rows = -(-rows // unroll) * unroll
        chunks = -(-ext // rows)
    fx = plan.most_contiguous(list(f.args()))
    ro, ri, c = hl.RVar(f"{f.name()}_ro"), hl.RVar(f"{f.name()}_ri"), hl.Var(f"{f.name()}_chunk")
    lbl = f"{f.name()}.update()"
    rec(f.update(), lbl, "split", fused_rvar(rec, f), ro, ri, rows, GUARD)
    part = rec(f.update(), lbl, "rfactor", ro, c)  # part[x, c] = sum of chunk c of column x
    pl = f"{f.name()}_partial"
    pbx, pby, ptx, pty = (hl.Var(f"{pl}_{n}") for n in ("bx", "by", "tx", "ty"))
    # the chunk sums accumulate in each work-item's registers (part computed per work-item inside a wrapper
    # kernel that stores each sum once), not in global memory row by row
    wrap = rec(part, pl, "in_")
    wl = f"{pl}_out"
    rec(wrap, wl, "compute_root")
    wc = next(v for v in wrap.args() if v.name() == c.name())
    cols = [v for v in wrap.args() if v.name() != c.name()]  # a result of several dims: its columns fused
    wx = fuse_all(rec, wrap, cols, wl) if len(cols) > 1 and vec == 1 else next(v for v in cols if v.name() == fx.name())
    if vec > 1:  # each work-item sums ``vec`` adjacent columns: one vector load per row
        px, lanes = hl.Var(f"{pl}_x"), hl.Var(f"{pl}_lanes")
        rec(wrap, wl, "split", wx, px, lanes, vec, GUARD)
        rec(wrap, wl, "vectorize", lanes)
        wx = px
    rec(wrap, wl, "gpu_tile", wx, wc, pbx, pby, ptx, pty, wg, 1, GUARD)
    if shared is not None:
        key = (ncols, chunks, rows, vec, wg, len(cols))
        if key in shared:
            rec(wrap, wl, "compute_with", *shared[key])
        else:
            shared[key] = (wrap, pby)
    rec(part, pl, "compute_at", wrap, ptx)
    if vec > 1:
        rec(part, pl, "vectorize", fx)
        rec(part.update(), f"{pl}.update()", "vectorize", fx)
    if unroll > 1 and rows % unroll == 0:  # several rows' loads in flight per work-item
        rio, rii = hl.RVar(f"{f.name()}_rio"), hl.RVar(f"{f.name()}_rii")
        rec(part.update(), f"{pl}.update()", "split", ri, rio, rii, unroll, GUARD)
        rec(part.update(), f"{pl}.update()", "unroll", rii)
    return chunks


def _final_unrolled(rec: Recorder, f: hl.Func, chunks: int) -> None:
    """The sum over chunks by the one work-item of its column: unrolled, every chunk's load in flight (at most
    FINAL_UNROLL at a time), not one L2 round trip each."""
    lbl = f"{f.name()}.update()"
    ro = f.rvars(0)[0]
    if chunks <= 64:
        rec(f.update(), lbl, "unroll", ro)
        return
    roo, roi = hl.RVar(f"{f.name()}_roo"), hl.RVar(f"{f.name()}_roi")
    rec(f.update(), lbl, "split", ro, roo, roi, FINAL_UNROLL, GUARD)
    rec(f.update(), lbl, "unroll", roi)


def _final_over_chunks(rec: Recorder, plan: Plan, f: hl.Func, args: list[hl.Var], chunks: int, spec: ScheduleSpec) -> None:
    """The sum over chunks in a kernel of its own: one work-group per column, its work-items each adding a strided
    share of the chunks (unrolled: loads in flight), then a tree in local memory. Was one work-item per column
    over all chunks: 64 work-items each waiting on 1024 loads after ResNet's batch-norm column sums."""
    wg = max(plan.min_wg, min(spec.get("wg", 256), pow2_floor(chunks)))
    work_group_per_result(rec, f, args, wg, spec, unroll_share=-(-chunks // wg) <= 32)

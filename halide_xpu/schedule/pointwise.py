"""Pointwise schedule: fuse an output's dims, vectorize, then parallel chunks (host) or work-groups (GPU)."""
from __future__ import annotations

import re
from typing import Any, Optional

import halide as hl

from ..meta import ScheduleSpec
from . import updates
from .common import GUARD, SHIFT, Plan, Recorder, fuse_all, pow2_floor, source_name, total


_TRANSCENDENTAL = re.compile(r"\b(?:hl|hx)\.(?:tanh|exp|expm1|erf|erfc|log|log1p|pow|sin|cos|tan|atan|sigmoid|cuda_exp|cuda_erf)\(")
MIN_WAVES = 2  # strided lanes: at least this many work-groups per compute unit (_gpu)
TILE_MIN = 8  # a transpose narrower than this along either tile dim runs flat (_tiny_tile)


def default_params(gpu: bool, vector_width: int) -> dict[str, int]:
    """Tunables: ``vector`` lanes, ``wg`` work-group size, ``unroll`` (vectors per work-item), ``tile`` and
    ``unroll_tile`` (transposes), ``strided`` (unrolled lanes a work-group apart, ``strided_lanes`` of them),
    ``stage_lanes`` (``staged_lanes`` of them, inputs staged in local memory), ``scalar_hoist`` (common.hoist_scalars)
    on GPUs, ``pairs`` (bf16 buffers as 32-bit words of two elements, pairs.py: 1 on CUDA, 2 on every GPU target),
    ``tasks_per_core`` (host parallel split), ``trig_vector`` (the lanes of a rows form whose broadcasts compute
    a transcendental, ``rows_shape``), ``fused_strided`` (outputs sharing a loop nest with strided lanes, ``gpu_fused``)."""
    if gpu:  # tile: transposes in 64x64 local-memory tiles (H100: 1.15x Triton vs 1.22x with 32x32)
        # strided_lanes: H100 sweep (benchmarks/results/NVIDIA_H100_80GB_HBM3/sweep_bf16.md), 16 vs 4 lanes: bf16 gelu
        # 0.78 -> 0.49x Triton, a pad of bf16 logits 1.77 -> 1.64x, a bf16 scale 0.95 -> 0.96x; 0: by the inputs
        # (strided_lanes_for)
        return {"vector": 4, "wg": 256, "tile": 64, "unroll_tile": 1, "unroll": 1, "strided": 1, "strided_lanes": 0,
                "stage_lanes": 1, "staged_lanes": 8, "scalar_hoist": 1, "pairs": 1, "hoist_rows": 4, "trig_vector": 1, "fused_strided": 0}
    return {"vector": vector_width, "tasks_per_core": 4, "min_chunk": 4096}


def schedule_output(rec: Recorder, plan: Plan, out: hl.Func, spec: ScheduleSpec) -> Optional[hl.Var]:
    """Schedule one pure output Func as a flat pointwise loop; returns its outermost Var (or None)."""
    label = out.name()
    args = list(out.args())
    if out.has_update_definition():  # indirect stores (updates.py); upstream's pure definition is undef
        updates.schedule_updates(rec, plan, out, label, spec)
        if "undef" in str(out.value()):
            if plan.caps.gpu:
                rec(out, label, "gpu_single_thread")  # nothing to compute, but nothing may run on the host
            return None
    if plan.caps.gpu and not args:  # a scalar output: one work-item (device memory may have no host copy)
        rec(out, label, "gpu_single_thread")
        return None
    if not args:
        return None
    n = total([plan.var_extent(out, v) for v in args])
    transposed = [v for v in args[1:] if plan.is_contiguous(v)]
    if transposed and not plan.caps.gpu:
        return _host_tiled(rec, out, label, args[0], transposed[0], spec)
    shape = rows_shape(plan, out, spec)
    if shape is not None and _hoisted_broadcasts(plan, out, shape[3]):
        # transcendentals of a broadcast (HF Llama's rotary cos/sin of a position x frequency table, transposed to
        # the output) computed once per work-item beat staging that small, much-reread table in tiles
        return _gpu_rows(rec, plan, out, label, args, spec, shape)
    # a staged input is a global wrapper computed per tile of this output: only when nothing else reads the input
    # (a second output or a reduction would read the wrapper outside this output's loops: matrix_exp backward)
    alone = len(plan.meta.outputs) == 1 and not plan.meta.reductions
    tileable = transposed and spec.get("tile", 32) and alone and not _tiny_tile(plan, out, args[0], transposed[0])
    staged = plan.transposed_inputs(args[0], transposed[0]) if tileable else []
    if staged:
        return _gpu_tiled(rec, out, label, args, transposed[0], staged, spec)
    # memory-bound kernels only (H100, sweep_stage_lanes.md, 8 lanes: a bf16 logits cast 1.27 -> 1.00x Triton, a
    # scale 1.06 -> 0.74x, an add 1.02 -> 0.75x; a tanh gelu 0.96 -> 1.12x)
    light = not _TRANSCENDENTAL.search(plan.source)
    if plan.caps.gpu and rec.unroll_lanes and spec.get("stage_lanes", 1) and light and alone and len(args) == 1 and n:
        inputs = plan.lane_inputs(args[0])
        if inputs and _gpu_staged(rec, out, label, args[0], n, inputs, spec, plan.caps.local_mem):
            return hl.Var(f"{label}_wg")
    shape = rows_shape(plan, out, spec)
    if shape is not None:
        return _gpu_rows(rec, plan, out, label, args, spec, shape)
    fused = fuse_all(rec, out, args, label) if len(args) > 1 else args[0]
    if plan.caps.gpu:
        return _gpu(rec, out, label, fused, n, spec if plan.gpu_vectors else spec.with_params(vector=1),
                    units=plan.caps.parallelism, inputs=input_buffers(plan))
    return _host(rec, out, label, fused, n, spec, plan.caps.parallelism, plan.tail)


def broadcasts(plan: Plan, out: hl.Func, within: Optional[set[str]] = None) -> list[hl.Func]:
    """Pure Funcs over a proper subset of ``out``'s Vars (over Vars of ``within`` alone, where given) that a Func
    of other Vars reads: what every point of ``out`` that differs only in the other Vars computes alike (a batch
    norm's per-channel ``rsqrt(var / n + eps) * w`` in a channels-last apply, a LayerNorm's weight and bias)."""
    names = {v.name() for v in out.args()}
    reached = plan.reached(source_name(out))
    found = []
    for name, (args, _) in plan.defs.items():
        func = plan.funcs.get(name)
        if not args or args == ["()"] or not set(args) < names or (within is not None and not set(args) <= within) \
                or name not in reached or not isinstance(func, hl.Func) or func.has_update_definition() \
                or name in plan.meta.reductions:
            continue
        readers = (rhs for other, (a, rhs) in plan.defs.items() if other != name and set(a) != set(args))
        if any(re.search(rf"\b{name}\[", rhs) for rhs in readers):
            found.append(func)
    return found


def rows_shape(plan: Plan, out: hl.Func, spec: ScheduleSpec,
               outs: Optional[list[hl.Func]] = None) -> Optional[tuple[int, int, int, tuple[str, ...]]]:
    """(lanes, channel groups, rows per work-item, the row Vars) of the rows form for ``out`` (GPU, several dims,
    costly broadcast values), or None where it does not apply (fewer than 2 rows, extents not static). The row Vars
    are the outer Vars that the costly broadcasts of ``out`` (and of every Func of ``outs``, which share its loops)
    do not depend on, and the rows divide their extent, so that every row of a work-item reads the same broadcast
    values. Three kinds of broadcast decide in turn, the first that leaves rows (``_BROADCAST_KINDS``): those
    computing a transcendental (Llama's rotary embedding computed ``sin``/``cos`` of a position and frequency at
    every head and batch index), every costly one, those over the innermost Var alone (a LayerNorm's weight beside
    its per-row statistics). Lanes a CUDA kernel unrolls (``Recorder.unroll_lanes``: an 8-bit mask beside bf16
    words) stay adjacent here, as in ``gpu_fused``: the broadcast work saved outweighs the strided lanes'
    coalescing."""
    args = list(out.args())
    if not (plan.caps.gpu and len(args) > 1 and plan.gpu_vectors and spec.get("hoist_rows", 4) > 1):
        return None
    c, n = plan.var_extent(out, args[0]), total([plan.var_extent(out, v) for v in args[1:]])
    if not c or not n:
        return None
    for kind in _BROADCAST_KINDS:
        # an output without broadcasts of this kind puts no bound on the rows
        found = [f for f in (_free_vars(plan, o, kind) for o in (outs or [out])) if f is not None]
        if not found:
            continue
        # transcendental broadcasts (computed per work-item, ``_compute_broadcasts``): narrow work-items, many of
        # them. H200 sweep of Llama's four rotary kernels (bf16 words, 65k work-items of 8 words at vector 4):
        # vector 2 / 1 took 0.58-0.68x / 0.47-0.68x the time of 4 (``rotary_vector_sweep_52f2a17.md``)
        vec = spec.get("vector", 4)
        if kind == "transcendental":
            vec = min(vec, spec.get("trig_vector", 1))
        while vec > 1 and c % vec:
            vec //= 2
        groups = c // vec
        free = [v for v in args[1:] if all(v.name() in f for f in found)]
        m = total([plan.var_extent(out, v) for v in free]) if free else None
        if not m:
            continue
        rows = spec.get("hoist_rows", 4)
        while rows > 1 and (m % rows or groups * (n // rows) < max(1, plan.caps.parallelism) * 256):
            rows //= 2
        if rows >= 2:
            return vec, groups, rows, tuple(v.name() for v in free)
    return None


_BROADCAST_KINDS = ("transcendental", "costly", "inner")


def _free_vars(plan: Plan, out: hl.Func, kind: str) -> Optional[set[str]]:
    """The names of the outer Vars of ``out`` that no costly broadcast of ``kind`` (``_BROADCAST_KINDS``) depends
    on; None where ``out`` has none of that kind."""
    inner = out.args()[0].name()
    if kind == "transcendental":  # the Funcs calling one (not the broadcasts reading them, which may span more)
        names = {v.name() for v in out.args()}
        found = [plan.defs[n][0] for n in plan.reached(source_name(out))
                 if n in plan.defs and plan.defs[n][0] not in ([], ["()"]) and set(plan.defs[n][0]) < names
                 and _TRANSCENDENTAL.search(plan.defs[n][1]) and n not in plan.meta.reductions]
    else:
        found = [plan.defs[source_name(f)][0] for f in broadcasts(plan, out, {inner} if kind == "inner" else None)
                 if _worth_hoisting(plan, f)]
    if not found:
        return None
    used = {inner}.union(*(set(a) for a in found))
    return {v.name() for v in out.args()[1:] if v.name() not in used}


def _computes(plan: Plan, func: hl.Func, pattern: re.Pattern) -> bool:
    """Whether a definition of ``func`` or of a Func it reads (directly or through others) matches ``pattern``."""
    name = source_name(func)
    return any(pattern.search(plan.defs.get(n, ([], ""))[1]) for n in {name} | plan.reached(name))


def _transcendental(plan: Plan, func: hl.Func) -> bool:
    """Whether ``func`` computes a transcendental, directly or through the Funcs it reads."""
    return _computes(plan, func, _TRANSCENDENTAL)


_COSTLY = re.compile(r"\bin_ptr\d+|sqrt\(| / |\b(?:hl|hx)\.(?:sin|cos|tan|exp|log|pow|erf|tanh|atan)")
# a broadcast parameter load, a root, a division or a transcendental


def _worth_hoisting(plan: Plan, func: hl.Func) -> bool:
    """Whether the broadcast Func ``func`` (``broadcasts``) loads a parameter or computes a root, a division or a
    transcendental, directly or through the Funcs it reads: what the rows form saves. Index predicates alone are not
    (GPT-2's bf16 q/k/v gradient concatenation, selects on the channel index, took the rows form from the strided
    lanes: 33.0 -> 39.5 us on the H200, Triton 17.4)."""
    return _computes(plan, func, _COSTLY)


def _gpu_rows(rec: Recorder, plan: Plan, out: hl.Func, label: str, args: list[hl.Var], spec: ScheduleSpec,
              shape: tuple[int, int, int, tuple[str, ...]], prefix: Optional[str] = None) -> hl.Var:
    """GPU, the rows form: each work-item takes ``vector`` adjacent points of the innermost dim (channels) in
    ``hoist_rows`` rows of the row Vars (``shape``), unrolled, so what a point computes without them (the Funcs of
    ``broadcasts``, inlined) is the same expression in every row and is computed once per work-item (LLVM merges
    the unrolled copies, ``test_rows_form_computes_channel_values_once``; transcendentals: ``_compute_broadcasts``). The flat form computed it at every
    point: bf16 ResNet-18's batch-norm apply spent two IEEE square roots, reciprocals and divisions and 8 parameter
    loads per element, instruction-bound at 1.9x Triton. A warp's work-items take adjacent channel groups of one
    row, so every load stays coalesced. Rows divide the outer extent (no guard around an unrolled row, which would
    keep the copies apart) and are fewer where the work-items would not give ``caps.parallelism`` compute units 256
    each (``shape``, from ``rows_shape``). ``prefix`` names the loop Vars (outputs fused with ``compute_with`` share
    them, ``gpu_fused``)."""
    vec, groups, rows, free = shape
    name = prefix or label
    inner = args[0]
    rest, used = [v for v in args[1:] if v.name() in free], [v for v in args[1:] if v.name() not in free]
    n = total([plan.var_extent(out, v) for v in args[1:]])
    o = fuse_all(rec, out, rest, label, f"{name}_r") if len(rest) > 1 else rest[0]
    cv, lanes, ro, ri = (hl.Var(f"{name}_{s}") for s in ("cv", "lanes", "ro", "ri"))
    f, bx, tx = hl.Var(f"{name}_rf"), hl.Var(f"{name}_wg"), hl.Var(f"{name}_wi")
    if vec > 1:
        rec(out, label, "split", inner, cv, lanes, vec, GUARD)
    else:
        cv = inner
    rec(out, label, "split", o, ro, ri, rows, GUARD)
    rec(out, label, "reorder", *([lanes] if vec > 1 else []), ri, cv, ro)
    rec(out, label, "fuse", cv, ro, f)
    if used:  # the broadcasts' Vars: outside the rows, so no row's index of them depends on the unrolled Var
        u = fuse_all(rec, out, used, label, f"{name}_u") if len(used) > 1 else used[0]
        rec(out, label, "fuse", f, u, hl.Var(f"{name}_ru"))
        f = hl.Var(f"{name}_ru")
    rec(out, label, "gpu_tile", f, bx, tx, max(1, min(spec.get("wg", 256), pow2_floor(groups * (n // rows)))), GUARD)
    rec(out, label, "unroll", ri)
    if vec > 1:
        rec(out, label, "vectorize", lanes)
    if not prefix:
        _compute_broadcasts(rec, plan, out, tx, inner.name(), vec, free)
    return bx


def _hoisted_broadcasts(plan: Plan, out: hl.Func, free: tuple[str, ...]) -> list[hl.Func]:
    """The outermost broadcasts of ``out`` computing a transcendental that no row Var (``free``) reaches: computed
    once per work-item (``_compute_broadcasts``)."""
    chosen = [f for f in broadcasts(plan, out) if not set(plan.defs[source_name(f)][0]) & set(free)
              and _transcendental(plan, f)]
    inside = set().union(*(plan.reached(source_name(f)) for f in chosen)) if chosen else set()
    return [f for f in chosen if source_name(f) not in inside]


def _compute_broadcasts(rec: Recorder, plan: Plan, out: hl.Func, at: hl.Var, inner: str, vec: int,
                        free: tuple[str, ...]) -> None:
    """The broadcasts of ``_hoisted_broadcasts``, once per work-item at ``at`` (the rows read them): LLVM does not
    merge the unrolled rows' copies of an inlined ``sin``, whose slow path writes a local array (Llama's rotary
    embedding computed each once per point). A broadcast that another output's loop nest computes already
    (``rec.hoisted``) is cloned for this output's readers (``clone_in``), or left inline where a reader serves
    both."""
    mine = plan.reached(source_name(out)) | {source_name(out)}
    for f in _hoisted_broadcasts(plan, out, free):
        name = source_name(f)
        if name in rec.hoisted:
            owner = source_name(rec.hoisted[name])
            theirs = plan.reached(owner) | {owner}
            readers = [r for r, (_, rhs) in plan.defs.items() if r in mine and re.search(rf"\b{name}\[", rhs)]
            if not readers or any(r in theirs or r not in plan.funcs for r in readers):
                continue
            f = rec(f, f.name(), "clone_in", [plan.funcs[r] for r in readers])
        else:
            rec.hoisted[name] = out
        rec(f, f.name(), "compute_at", out, at)
        rec(f, f.name(), "store_in", hl.MemoryType.Register)  # every index a constant once unrolled
        for v in f.args():  # a work-item's points (the lanes may be bf16 pairs: 2 x vec elements)
            if v.name() == inner and vec > 1:
                rec(f, f.name(), "vectorize", v, vec, GUARD)
            rec(f, f.name(), "unroll", v)


def _host(rec: Recorder, out: hl.Func, label: str, x: hl.Var, n: Optional[int], spec: ScheduleSpec, cores: int,
          tail: hl.TailStrategy = SHIFT) -> hl.Var:
    vec = spec.get("vector", 8)
    xo, xi = hl.Var(f"{label}_par"), hl.Var(f"{label}_vec")
    if n is None:
        rec(out, label, "split", x, xo, xi, spec.get("min_chunk", 4096), GUARD)
        rec(out, label, "parallel", xo)
        rec(out, label, "vectorize", xi, vec, GUARD)
        return xo
    if n < vec:
        return x
    per_task = -(-n // (cores * spec.get("tasks_per_core", 4)))
    chunk = max(spec.get("min_chunk", 4096), -(-per_task // vec) * vec)
    if n >= 2 * chunk:
        rec(out, label, "split", x, xo, xi, chunk, tail)
        rec(out, label, "parallel", xo)
        rec(out, label, "vectorize", xi, vec, tail)
        return xo
    rec(out, label, "vectorize", x, vec, tail)
    return x


def _host_tiled(rec: Recorder, out: hl.Func, label: str, x: hl.Var, y: hl.Var, spec: ScheduleSpec) -> hl.Var:
    """An input is contiguous along ``y`` while the output is along ``x`` (a transpose): work in square tiles."""
    vec, tile = spec.get("vector", 8), spec.get("tile", 32)
    xo, yo, xi, yi = (hl.Var(f"{label}_{n}") for n in ("xo", "yo", "xi", "yi"))
    rec(out, label, "tile", x, y, xo, yo, xi, yi, tile, tile, GUARD)
    rec(out, label, "vectorize", xi, vec, GUARD)
    rec(out, label, "parallel", yo)
    return yo


def _tiny_tile(plan: Plan, out: hl.Func, x: hl.Var, y: hl.Var) -> bool:
    """A transpose of fewer than ``TILE_MIN`` points along ``x`` or ``y`` (GPUTests large_grid: (n, 2, 4) ->
    (n, 4, 2)): a flat loop reads it within a few memory sectors per row, where a tile would leave all but 8 of its
    512 work-items idle."""
    return any(e is not None and e < TILE_MIN for e in (plan.var_extent(out, x), plan.var_extent(out, y)))


def _gpu_tiled(rec: Recorder, out: hl.Func, label: str, args: list[hl.Var], y: hl.Var, inputs: list[Any],
               spec: ScheduleSpec) -> hl.Var:
    """A transpose on GPU: ``tile``-square tiles of (``x`` = ``args[0]``, ``y``) per work-group of ``tile`` x 8
    work-items, the other dims fused into a third block dim; each transposed input's tile is read coalesced (along
    its own stride-1 dim) into local memory, then written coalesced along ``x``. The per-work-item row loops are
    unrolled so all of a work-item's loads are in flight at once."""
    tile, rows = spec.get("tile", 32), 8
    x = args[0]
    others = [v for v in args[1:] if v.name() != y.name()]
    xo, yo, xi, yi, yt, yl = (hl.Var(f"{label}_{n}") for n in ("xo", "yo", "xi", "yi", "yt", "yl"))
    rec(out, label, "tile", x, y, xo, yo, xi, yi, tile, tile, GUARD)
    rec(out, label, "split", yi, yt, yl, tile // rows, GUARD)
    rec(out, label, "reorder", yl, xi, yt, xo, yo, *others)
    # the tiles and the other dims ((batch, heads) of an attention transpose) fused into one block dim: CUDA's grid
    # y and z stop at 65,535 (GPUTests large_grid: 16.7M batch rows on grid z, cuLaunchKernel INVALID_VALUE), x at
    # 2**31 - 1
    block = fuse_all(rec, out, [xo, yo, *others], label, f"{label}_blk")
    rec(out, label, "gpu_blocks", block)
    rec(out, label, "gpu_threads", xi, yt)
    if spec.get("unroll_tile", 1):
        rec(out, label, "unroll", yl)
    for param in inputs:
        name = f"{param.name()}_tile"
        wrapper = rec(param, param.name(), "in_")
        d0, d1 = wrapper.args()[0], wrapper.args()[1]
        d1o, d1i = hl.Var(f"{name}_o"), hl.Var(f"{name}_i")
        rec(wrapper, name, "compute_at", out, block)
        rec(wrapper, name, "bound_storage", d0, tile + 1)  # rows of 33: column reads hit distinct banks
        rec(wrapper, name, "split", d1, d1o, d1i, rows, GUARD)
        rec(wrapper, name, "reorder", d1o, d0, d1i)
        rec(wrapper, name, "gpu_threads", d0, d1i)
        if spec.get("unroll_tile", 1):
            rec(wrapper, name, "unroll", d1o)
    return block


def strided_lanes_for(inputs: int) -> int:
    """Default strided lanes of a kernel reading ``inputs`` buffers: 16, or 4 from three buffers on (each lane's
    loads in registers until its store; H200 tuning of GPT-2's backward cat of q/k/v gradients, three bf16
    inputs: 16.3 us at 16 lanes, 12.5 at 4; kernels of one or two inputs kept 16)."""
    return 4 if inputs >= 3 else 16


def _gpu(rec: Recorder, out: hl.Func, label: str, x: hl.Var, n: Optional[int], spec: ScheduleSpec,
         prefix: Optional[str] = None, units: int = 0, inputs: int = 1) -> hl.Var:
    """``prefix`` names the loop Vars (default ``label``): outputs fused with ``compute_with`` share the names.
    Where lanes are unrolled instead of vectorized (``Recorder.unroll_lanes``: CUDA with narrow types), a
    work-item's ``strided_lanes`` lanes are ``wg`` points apart, not adjacent: each load and store instruction of a
    warp then covers contiguous memory (H100, 4 lanes: a bf16 scale 1.33x -> 0.95x Triton, a pad of bf16 logits
    2.04x -> 1.77x, adjacent -> strided). Strided lanes are fewer where ``units`` compute units would get fewer
    than ``MIN_WAVES`` work-groups each: a work-item's unrolled loads wait on each other's issue slots, so 16 lanes
    over 75 work-groups (GPT-2's position embeddings, 400 x 768 bf16) left the H200 half idle (8.5 us, Triton 1.9)."""
    vec, wg = spec.get("vector", 4), spec.get("wg", 256)
    name = prefix or label
    strided = rec.unroll_lanes and spec.get("strided", 1) and vec > 1
    if strided:
        vec = spec.get("strided_lanes", 0) or strided_lanes_for(inputs)
        while n is not None and vec > 1 and n < vec * wg * max(1, MIN_WAVES * units):  # a guarded tail: any n
            vec //= 2
        if vec > 1:
            return _gpu_strided(rec, out, label, x, n, vec * spec.get("unroll", 1), wg, name)
    while n is not None and vec > 1 and (n % vec or n < vec * wg):
        vec //= 2
    if vec > 1:
        xv, lanes = hl.Var(f"{name}_v"), hl.Var(f"{name}_lanes")
        rec(out, label, "split", x, xv, lanes, vec, GUARD)
        rec(out, label, "vectorize", lanes)
        x = xv
    if n is not None:
        wg = max(1, min(wg, pow2_floor(n // vec)))
    bx, tx = hl.Var(f"{name}_wg"), hl.Var(f"{name}_wi")
    unroll = spec.get("unroll", 1)
    if unroll > 1 and n is not None and n % (vec * wg * unroll) == 0:
        # each work-item takes ``unroll`` vectors ``wg`` vectors apart: every load instruction stays coalesced
        xo, xu = hl.Var(f"{name}_o"), hl.Var(f"{name}_u")
        rec(out, label, "split", x, xo, tx, wg, GUARD)
        rec(out, label, "split", xo, bx, xu, unroll, GUARD)
        rec(out, label, "reorder", *([lanes] if vec > 1 else []), xu, tx, bx)
        rec(out, label, "gpu_blocks", bx)
        rec(out, label, "gpu_threads", tx)
        rec(out, label, "unroll", xu)
        return bx
    rec(out, label, "gpu_tile", x, bx, tx, wg, GUARD)
    return bx


def _gpu_strided(rec: Recorder, out: hl.Func, label: str, x: hl.Var, n: Optional[int], lanes: int, wg: int,
                 name: str) -> hl.Var:
    """Each work-item of a ``wg`` work-group takes ``lanes`` points ``wg`` apart (unrolled); the work-item Var is
    ``<name>_wi`` as in ``_gpu``."""
    if n is not None:
        wg = max(1, min(wg, pow2_floor(max(1, n // lanes))))
    xo, xu, bx, tx = (hl.Var(f"{name}_{s}") for s in ("o", "u", "wg", "wi"))
    rec(out, label, "split", x, xo, tx, wg, GUARD)
    rec(out, label, "split", xo, bx, xu, lanes, GUARD)
    rec(out, label, "reorder", xu, tx, bx)
    rec(out, label, "gpu_blocks", bx)
    rec(out, label, "gpu_threads", tx)
    rec(out, label, "unroll", xu)
    return bx


def _gpu_staged(rec: Recorder, out: hl.Func, label: str, x: hl.Var, n: int, inputs: list[Any],
                spec: ScheduleSpec, local_mem: int) -> bool:
    """``stage_lanes``: strided lanes (``_gpu_strided``) whose inputs a work-group first copies into local memory,
    each work-item its lanes' points: all of its loads are issued before any global store (unrolled lanes load and
    store in turn otherwise, and ptxas does not move a load above an earlier store: one load in flight per
    work-item, ``sass_load_order.md``). Only where the points tile exactly (the copy is not guarded) and the copies
    fit in half of ``local_mem``; False, nothing scheduled, where they do not."""
    lanes, wg = spec.get("staged_lanes", 8), spec.get("wg", 256)
    row = sum(p.type().bytes() for p in inputs) * wg  # local memory per lane
    while lanes > 1 and (n % (lanes * wg) or lanes * row > local_mem // 2):
        lanes //= 2
    if lanes < 2:
        return False
    block = _gpu_strided(rec, out, label, x, n, lanes, wg, label)
    for param in inputs:
        copy = rec(param, param.name(), "in_")
        cx, cu, ct = copy.args()[0], hl.Var(f"{copy.name()}_u"), hl.Var(f"{copy.name()}_wi")
        rec(copy, copy.name(), "compute_at", out, block)
        rec(copy, copy.name(), "split", cx, cu, ct, wg)
        rec(copy, copy.name(), "gpu_threads", ct)
        rec(copy, copy.name(), "unroll", cu)
    return True


def input_buffers(plan: Plan) -> int:
    """The buffers a kernel reads (not its 0-d inputs)."""
    return sum(1 for a in plan.meta.args if a.kind == "in" and a.shape)


def fusable_outputs(plan: Plan) -> bool:
    """Whether every output is pure and spans the same static domain: they can share one GPU loop nest."""
    outs = plan.outputs()
    if len(outs) < 2 or any(o.has_update_definition() or not o.args() for o in outs):
        return False
    shape = [plan.var_extent(outs[0], v) for v in outs[0].args()]
    return None not in shape and all([plan.var_extent(o, v) for v in o.args()] == shape for o in outs[1:])


def gpu_fused(rec: Recorder, plan: Plan, funcs: list[hl.Func], n: int, spec: ScheduleSpec) -> None:
    """``funcs`` (pure, one domain of ``n`` points) in one kernel: each scheduled like a lone output with the same
    loop Var names, each ``compute_with`` the one before at the work-item loop, so a work-item computes all of
    them at its points (one launch and one pass over shared inputs instead of a kernel per Func)."""
    gspec = spec if plan.gpu_vectors else spec.with_params(vector=1)
    # one loop structure (the work-item Var is ``<prefix>_wi``); adjacent lanes: with each output's lanes a loop
    # of its own under the shared work-item, strided ones ran a bf16 3-output update at 0.84x Triton, adjacent at
    # 0.54x (H100, sweep_bf16_da40170.md)
    # ``fused_strided`` 1 (not the default): strided lanes all the same, a sweep's alternative for outputs of wide
    # rows (GPT-2's padded logits gradient, two bf16 outputs of 4096 x 50264)
    gspec = gspec.with_params(unroll=1, strided=spec.get("fused_strided", 0))
    prefix = funcs[0].name()
    shape = rows_shape(plan, funcs[0], gspec, funcs)
    if shape is not None and all([v.name() for v in f.args()] == [v.name() for v in funcs[0].args()] for f in funcs):
        if any(_hoisted_broadcasts(plan, f, shape[3]) for f in funcs):
            # a loop nest each (one launch more), the transcendentals once per work-item: computed at a work-item of
            # loops fused by compute_with they took Halide's bounds of the whole group (4x the points, or shared
            # memory over every row and minutes of compile time)
            for f in funcs:
                _gpu_rows(rec, plan, f, f.name(), list(f.args()), gspec, shape)
            return
        for f in funcs:  # one domain (``fusable_outputs``): the first output's shape is every output's
            _gpu_rows(rec, plan, f, f.name(), list(f.args()), gspec, shape, prefix)
        for before, f in zip(funcs, funcs[1:]):
            rec(f, f.name(), "compute_with", before, hl.Var(f"{prefix}_wi"))
        return
    for f in funcs:
        args = list(f.args())
        x = fuse_all(rec, f, args, f.name(), prefix) if len(args) > 1 else args[0]
        _gpu(rec, f, f.name(), x, n, gspec, prefix=prefix, inputs=input_buffers(plan))
    for before, f in zip(funcs, funcs[1:]):
        rec(f, f.name(), "compute_with", before, hl.Var(f"{prefix}_wi"))

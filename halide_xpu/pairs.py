"""bfloat16 buffers of a pointwise kernel as 32-bit words of two elements each (schedule parameter ``pairs``).

Halide 21's PTX backend emits vector loads and stores only for 4 x 32-bit lanes: a bf16 kernel's lanes were
scalar 16-bit accesses, one element each (AdamW's update over GPT-2's embedding: 190 us on the H200, 2.8 TB/s,
where Triton's 128-bit accesses move the same bytes faster). Here the kernel computes one 32-bit word of two
elements per point along its innermost Var: each paired bf16 input is read as words and split
(``halide_helpers.pair_halves``, any index stays an element index), each output packs two results
(``halide_helpers.pair_words``), and four words are one 128-bit access. The rewrite is of the kernel's source and
metadata, before scheduling: the glue passes those buffers as uint32 with half the innermost extent and half the
outer strides, the Var's extent is halved, and every schedule works on words unchanged."""
from __future__ import annotations

import dataclasses
import functools
import re

from .meta import STORAGE_SUFFIX, ArgSpec, KernelMeta
from .schedule.common import accesses

_LAYOUT = "# buffer layouts"


def applicable(meta: KernelMeta) -> bool:
    """``pairs`` 1: CUDA kernels (measured there); 2: every device target that keeps bf16 as bits (tests). Row
    reductions: ``pair_rows`` with warps (``warp_rows``), CUDA only (``_row_inputs``)."""
    want = meta.schedule.get("pairs", 0)
    if meta.reductions:
        want = meta.schedule.get("pair_rows", 0) if meta.schedule.get("warp_rows", 0) else 0
    cuda = "cuda" in meta.halide_target.split("-")
    return bool(want and meta.bf16_as_bits and not meta.scalar_lanes and not meta.pairs and (cuda or want >= 2))


def _even_strides(stride: tuple[str, ...]) -> bool:
    """A buffer's layout as words: stride 1 innermost, every outer stride a static even number of elements."""
    return bool(stride) and stride[0] == "1" and all(s.isdigit() and int(s) % 2 == 0 for s in stride[1:])


_WORD_TYPES = ("float32", "int32")


def _inputs_only(meta: KernelMeta) -> bool:
    """Every output is a 32-bit type: only the bf16 inputs go to words, the kernel computing elements as before."""
    return all(a.dtype in _WORD_TYPES for a in meta.args if a.kind == "out")


@functools.lru_cache(maxsize=256)  # build() and compile_scheduled() both ask for the same kernel
def eligible(meta: KernelMeta, source: str, inputs_only: bool = True) -> tuple[str, ...]:
    """The bf16 buffers to pass as words, or () where the kernel does not qualify: a pointwise kernel whose outputs
    are all bf16 (or, ``inputs_only``, all 32-bit: then only inputs go to words), each defined once over the loop
    Vars with the first (its stride-1 dim, of even static extent) first, every outer stride even. A bf16 input is
    passed as words where its stride-1 dim is read at that Var exactly in every access, the Var in no other index,
    with even extent and strides (a row gather ``wpe[h0, ids[h1]]``, a bias ``b[h0]``); other inputs keep their
    elements (a strided or transposed read)."""
    if meta.reductions and inputs_only:
        return _row_inputs(meta, source)
    if meta.reductions or any(v.reduction for v in meta.loop_vars) or not meta.outputs:
        return ()
    outs = [a for a in meta.args if a.kind == "out"]
    words = all(a.dtype == "bfloat16" for a in outs)
    if not (words or (inputs_only and _inputs_only(meta))) or any(a.alias_of or a.partial for a in outs) \
            or STORAGE_SUFFIX not in source:
        return ()
    defs = [accesses(source, a.name) for a in outs]
    if any(len(d) != 1 for d in defs):
        return ()
    var = defs[0][0][0] if defs[0][0] else ""
    extents = {v.name: v.static_extent for v in meta.loop_vars}
    n = extents.get(var)
    if n is None or n < 2 or n % 2:
        return ()
    if not all(_word_output(a, index, var, n, source, extents) for a, (index,) in zip(outs, defs)):
        return ()
    names = ([a.name for a in outs] if words else []) + _word_inputs(meta, source, var)
    return tuple(n for n in (a.name for a in meta.args) if n in names)


def _word_output(a: ArgSpec, index: list[str], var: str, extent: int, source: str, extents: dict) -> bool:
    """Whether output ``a``, defined once at ``index``, can be stored as words: at exactly the loop Vars (``extents``),
    ``var`` first, its first dim of ``extent`` elements at stride 1, every outer stride even."""
    pure = index and index[0] == var and all(i in extents for i in index) and len(set(index)) == len(index)
    return bool(pure and a.shape and a.shape[0] == str(extent) and _even_strides(a.stride)
                and re.search(rf"^\s*{a.name}\[{var},[^\n]*\]\s*=", source, re.M))


def _word_inputs(meta: KernelMeta, source: str, var: str, extent: int | None = None) -> list[str]:
    """The bf16 inputs whose first dim (static, even; ``extent`` elements where given) is read at ``var`` exactly
    in every access, ``var`` in no other index, every outer stride even."""
    names = []
    for a in meta.args:
        if a.kind != "in" or not a.is_buffer or a.dtype != "bfloat16" or a.alias_of:
            continue
        first = a.shape[0] if a.shape else ""
        if not (first.isdigit() and int(first) % 2 == 0 and (extent is None or first == str(extent))
                and _even_strides(a.stride)):
            continue
        index = accesses(source, a.name)
        if index and all(i and i[0] == var and not any(re.search(rf"\b{var}\b", j) for j in i[1:]) for i in index):
            names.append(a.name)
    return names


def _row_outputs(meta: KernelMeta, source: str, var: str, extent: int) -> list[str]:
    """A row reduction's bf16 outputs spanning the row (``pair_row_outputs``): each defined once, at ``var`` first
    and the other Vars after it, its first dim of ``extent`` elements at stride 1 and even outer strides. Stored as
    words of two adjacent results, the pairs each lane of the warp form holds (``gpu_warps._row_lanes``): one 32-bit
    store per pair, not two 16-bit ones half a sector apart (GPT-2's residual LayerNorm stored 48 per lane)."""
    if not meta.schedule.get("pair_row_outputs", 0):
        return []
    if any(len(accesses(source, o)) != 1 for o in meta.outputs):
        return []  # a scattered output (an embedding gradient): gpu_scatter's rewrite stores the rows as elements
    extents = {v.name: v.static_extent for v in meta.loop_vars}
    return [a.name for a in meta.args if a.kind == "out" and a.dtype == "bfloat16" and not (a.alias_of or a.partial)
            and _word_output(a, accesses(source, a.name)[0], var, extent, source, extents)]


def _row_inputs(meta: KernelMeta, source: str) -> tuple[str, ...]:
    """A row reduction's bf16 inputs to read as words: the reduced dim is the first loop Var (stride 1, static even
    extent) and each such input is read at it exactly in every access (never in another index). The outputs keep
    their elements; the warp form gives each lane adjacent pairs (``gpu_warps._lanes_along``), so a pair's two
    halves are one 32-bit load (Llama's RMSNorm kernels read three bf16 rows per output row)."""
    if not meta.loop_vars or not meta.loop_vars[0].reduction or STORAGE_SUFFIX not in source:
        return ()
    var, n = meta.loop_vars[0].name, meta.loop_vars[0].static_extent
    if n is None or n < 2 or n % 2:
        return ()
    inputs = _word_inputs(meta, source, var, n)
    if not inputs:  # the warp form's lanes take pairs only where an input is read as words
        return ()
    names = set(inputs) | set(_row_outputs(meta, source, var, n))
    return tuple(a.name for a in meta.args if a.name in names)


def apply(meta: KernelMeta, source: str, inputs_only: bool = True) -> tuple[KernelMeta, str]:
    """(meta, source) rewritten to words where ``applicable`` and ``eligible``; unchanged otherwise. Where the
    outputs are 32-bit (``inputs_only``), only the bf16 inputs become words, read as halves at element indices:
    the kernel's buffers are then all 32-bit and its lanes vectorize (16-bit loads unrolled them, one 16-bit load
    per element: bf16 ResNet-18's relu backward into an fp32 sum, 1.6x Triton)."""
    if not applicable(meta):
        return meta, source
    names = eligible(meta, source, inputs_only)
    if not names:
        return meta, source
    args = {a.name: a for a in meta.args}
    # inputs only: no output is among ``names``, and the points stay elements (the loop Var keeps its extent)
    outs = {a.name: accesses(source, a.name)[0] for a in meta.args if a.kind == "out" and a.name in names}
    lines, dims_done = [], 0
    for line in source.splitlines():
        for name in names:
            storage, ndim = f"{name}{STORAGE_SUFFIX}", len(args[name].shape)
            if name in outs and line.strip() == f"{name} = hl.Func(hl.UInt(16), {ndim}, {name!r})":
                line = line.replace(f"{name!r})", f"'{name}_halves')")
            elif line.strip() == f"{storage} = hl.ImageParam(hl.UInt(16), {ndim}, {name!r})":
                line = line.replace("hl.UInt(16)", "hl.UInt(32)")
            elif line.strip() == f"{name} = hx.bf16_input({storage})":
                line = line.replace(f"({storage})", f"(hx.pair_halves({storage}))")
            else:
                m = re.match(rf"^(\s*(?:{re.escape(storage)}|{name}\.output_buffer\(\))\.dim\((\d+)\)\.set_bounds\(0, )"
                             rf"(\d+)(\)\.set_stride\()(\d+)(\).*)$", line)
                if m:
                    head, dim, extent, mid, stride, tail = m.groups()
                    extent, stride = (int(extent) // 2, stride) if dim == "0" else (extent, int(stride) // 2)
                    line, dims_done = f"{head}{extent}{mid}{stride}{tail}", dims_done + 1
        if line.strip().startswith(_LAYOUT):
            indent = line[: len(line) - len(line.lstrip())]
            lines += [f"{indent}{o} = hx.pair_words({o}, {outs[o]!r}, {o!r})" for o in outs]
        lines.append(line)
    rewritten = "\n".join(lines) + ("\n" if source.endswith("\n") else "")
    if rewritten.count("hx.pair_") != len(names) or dims_done != sum(len(args[n].shape) for n in names):
        return meta, source  # a line of another form than codegen_kernel writes: left as it was
    if not outs or meta.reductions:  # a row reduction's word outputs: the reduced Var keeps its element extent
        return dataclasses.replace(meta, pairs=names), rewritten
    var = next(iter(outs.values()))[0]
    loop_vars = tuple(dataclasses.replace(v, extent=str(v.static_extent // 2)) if v.name == var else v
                      for v in meta.loop_vars)
    return dataclasses.replace(meta, pairs=names, loop_vars=loop_vars), rewritten


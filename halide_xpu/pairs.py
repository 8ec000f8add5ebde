"""bfloat16 buffers of a flat pointwise kernel as 32-bit words of two elements each (schedule parameter ``pairs``).

Halide 21's PTX backend emits vector loads and stores only for 4 x 32-bit lanes: a bf16 kernel's lanes were
scalar 16-bit accesses, one element each (AdamW's update over GPT-2's embedding: 190 us on the H200, 2.8 TB/s,
where Triton's 128-bit accesses move the same bytes faster). Here the kernel computes one 32-bit word of two
elements per point: each bf16 input is read as words and split (``halide_helpers.pair_halves``), each output packs
two results (``halide_helpers.pair_words``), and four words are one 128-bit access. The rewrite is of the kernel's
source and metadata, before scheduling: the glue passes those buffers as uint32 of half the extent, the loop Var's
extent is halved, and every schedule works on words unchanged."""
from __future__ import annotations

import dataclasses
import re

from .meta import STORAGE_SUFFIX, KernelMeta
from .schedule.common import reads

_LAYOUT = "# buffer layouts"


def applicable(meta: KernelMeta) -> bool:
    """``pairs`` 1: CUDA kernels (measured there); 2: every device target that keeps bf16 as bits (tests)."""
    want = meta.schedule.get("pairs", 0)
    cuda = "cuda" in meta.halide_target.split("-")
    return bool(want and meta.bf16_as_bits and not meta.scalar_lanes and not meta.pairs and (cuda or want >= 2))


def eligible(meta: KernelMeta, source: str) -> tuple[str, ...]:
    """The bf16 buffers to pass as words, or () where the kernel does not qualify: a pointwise kernel over one flat
    loop Var of even static extent; every output bf16, stride 1, over that extent, defined once at the Var; every
    bf16 input read only at the Var, with the outputs' layout. Other inputs (fp32 scalars, broadcasts of other
    dtypes) are read at the Var's points as before."""
    if meta.reductions or len(meta.loop_vars) != 1 or meta.loop_vars[0].reduction or not meta.outputs:
        return ()
    var, n = meta.loop_vars[0].name, meta.loop_vars[0].static_extent
    if n is None or n < 2 or n % 2 or STORAGE_SUFFIX not in source:
        return ()
    flat = ((str(n),), ("1",))
    bf16 = [a for a in meta.args if a.is_buffer and a.dtype == "bfloat16"]
    outs = [a for a in meta.args if a.kind == "out"]
    if any(a.dtype != "bfloat16" or a.alias_of or a.partial for a in outs):
        return ()
    for a in bf16:
        if (a.shape, a.stride) != flat or a.alias_of:
            return ()
        if a.kind == "in" and not reads(source, a.name) <= {var}:
            return ()
        if a.kind == "out" and len(re.findall(rf"^\s*{a.name}\[", source, re.M)) != 1:
            return ()
        if a.kind == "out" and not re.search(rf"^\s*{a.name}\[{var},?\]\s*=", source, re.M):
            return ()
    return tuple(a.name for a in bf16)


def apply(meta: KernelMeta, source: str) -> tuple[KernelMeta, str]:
    """(meta, source) rewritten to words where ``applicable`` and ``eligible``; unchanged otherwise."""
    if not applicable(meta):
        return meta, source
    names = eligible(meta, source)
    if not names:
        return meta, source
    n = meta.loop_vars[0].static_extent
    lines, outs = [], [a.name for a in meta.args if a.kind == "out" and a.name in names]
    for line in source.splitlines():
        for name in names:
            storage = f"{name}{STORAGE_SUFFIX}"
            if name in outs and line.strip() == f"{name} = hl.Func(hl.UInt(16), 1, {name!r})":
                line = line.replace(f"{name!r})", f"'{name}_halves')")
            elif line.strip() == f"{storage} = hl.ImageParam(hl.UInt(16), 1, {name!r})":
                line = line.replace("hl.UInt(16)", "hl.UInt(32)")
            elif line.strip() == f"{name} = hx.bf16_input({storage})":
                line = line.replace(f"({storage})", f"(hx.pair_halves({storage}))")
            elif re.match(rf"^\s*({re.escape(storage)}|{name}\.output_buffer\(\))\.dim\(0\)\.set_bounds\(0, {n}\)", line):
                line = line.replace(f"set_bounds(0, {n})", f"set_bounds(0, {n // 2})")
        if line.strip().startswith(_LAYOUT):
            indent = line[: len(line) - len(line.lstrip())]
            lines += [f"{indent}{o} = hx.pair_words({o}, {meta.loop_vars[0].name!r}, {o!r})" for o in outs]
        lines.append(line)
    rewritten = "\n".join(lines) + ("\n" if source.endswith("\n") else "")
    if rewritten.count("hx.pair_") != len(names) or rewritten.count(f"set_bounds(0, {n // 2})") != len(names):
        return meta, source  # a line of another form than codegen_kernel writes: left as it was
    var = dataclasses.replace(meta.loop_vars[0], extent=str(n // 2))
    return dataclasses.replace(meta, pairs=names, loop_vars=(var,)), rewritten

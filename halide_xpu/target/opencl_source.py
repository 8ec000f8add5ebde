"""Checks of the OpenCL C that Halide embeds in a kernel object, for code it prints wrong (the variant is refused)."""
from __future__ import annotations

import re

_SHARED_SIZE = re.compile(rb"\b_(\w+)_shared_size_var\b")
_PRIVATE = re.compile(rb"#define __address_space__(\w+) __private\b")


def private_arrays_indexed_as_shared(source: bytes) -> list[str]:
    """Names of allocations that Halide's OpenCL C declares as a work-item's private array while it indexes them
    by a ``_<name>_shared_size_var`` stride, as one buffer for the work-group (a Func with an update computed inside
    a work-item loop over fused dims: a masked load's guarded Func, graph_fuzz seed 7520). Each work-item wrote far
    past its array: the OpenCL CPU runtime segfaulted. Halide's CUDA form of the same allocation is a global
    buffer."""
    shared = {m.group(1) for m in _SHARED_SIZE.finditer(source)}
    return sorted(n.decode() for n in {m.group(1) for m in _PRIVATE.finditer(source)} & shared)

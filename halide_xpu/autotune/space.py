"""Search space per schedule family: the tunables a kernel's schedule reads and their legal, pruned values."""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

from ..meta import KernelMeta
from ..schedule import gpu_warps
from ..target.targets import DeviceCaps, device_caps

POW2_VECTORS = (1, 2, 4, 8, 16)  # vector lanes: powers of two up to 16 (Halide's widest useful OpenCL/CUDA vector)
WORK_GROUPS = (32, 64, 128, 256, 512, 1024)  # bounded by the device's max work-group size


@dataclasses.dataclass(frozen=True)
class Tunable:
    """One dimension of the search: a tunable's name and the values tried (the default is always among them)."""

    name: str
    values: tuple[int, ...]


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def _product(extents: list[Optional[int]]) -> Optional[int]:
    if any(e is None for e in extents):
        return None
    return math.prod(e for e in extents if e is not None)


def kind(meta: KernelMeta) -> str:
    """``pointwise``, or the reduction's form: ``full`` (to a scalar), ``inner`` (along a stride-1 dim), ``outer``."""
    if meta.schedule.family != "reduction":
        return "pointwise"
    red = [v for v in meta.loop_vars if v.reduction]
    if len(red) == len(meta.loop_vars):
        return "full"
    return "inner" if any(v.contiguous for v in red) else "outer"


def _host_space(meta: KernelMeta, caps: DeviceCaps, form: str) -> list[Tunable]:
    n = _product([v.static_extent for v in meta.loop_vars])
    out = [Tunable("vector", tuple(v for v in (4, 8, 16) if v >= 4)),  # narrower than SSE is never better on x86
           Tunable("tasks_per_core", (1, 2, 4, 8))]
    if form == "pointwise":
        out.append(Tunable("min_chunk", (1024, 4096, 16384)))
    if form == "full":
        out.append(Tunable("split", tuple(s for s in (0, 1024, 8192, 65536) if n is None or s < n)))
    return out


def _gpu_space(meta: KernelMeta, caps: DeviceCaps, form: str) -> list[Tunable]:
    kept = [v.static_extent for v in meta.loop_vars if not v.reduction]
    red = [v.static_extent for v in meta.loop_vars if v.reduction]

    def groups(extent: Optional[int]) -> tuple[int, ...]:
        # no work-group wider than the device allows, nor (much) wider than the work it spreads over
        cap = min(caps.max_work_group, _pow2_ceil(extent) if extent else caps.max_work_group)
        return tuple(w for w in WORK_GROUPS if w <= max(cap, WORK_GROUPS[0]))

    if form == "pointwise":
        n = _product([v.static_extent for v in meta.loop_vars])
        out = [Tunable("wg", groups(n)), Tunable("vector", POW2_VECTORS), Tunable("unroll", (1, 2, 4))]
        if "cuda" in meta.halide_target.split("-"):  # unrolled 16-bit lanes: adjacent or a work-group apart
            out += [Tunable("strided", (0, 1)), Tunable("strided_lanes", (4, 8, 16)), Tunable("stage_lanes", (0, 1)),
                    Tunable("staged_lanes", (4, 8, 16))]
            if any(a.dtype == "bfloat16" for a in meta.args if a.is_buffer):  # bf16 as 32-bit words (pairs.py)
                out.insert(0, Tunable("pairs", (1, 0)))
        if any(v.contiguous for v in meta.loop_vars[1:]) and len(meta.loop_vars) == 2:  # a transpose: tiles
            out.append(Tunable("tile", tuple(t for t in (16, 32, 64) if not caps.local_mem or 4 * t * (t + 1) <= caps.local_mem)))
        return out
    if form == "full":
        return [Tunable("wg_full", groups(_product(red))), Tunable("vector_full", (1, 2, 4, 8)),
                Tunable("unroll_full", (1, 2, 4, 8)), Tunable("single_group_max", (0, 4096, 16384, 65536))]
    if form == "outer":
        return [Tunable("wg", groups(_product(kept))), Tunable("split", (16, 32, 64, 128, 256)),
                Tunable("unroll_outer", (1, 2, 4, 8)), Tunable("vector_outer", (1, 2, 4)),
                Tunable("col_split", (0, 1, 2, 4, 8))]  # 0: automatic (half the device's work-items)
    row = groups(_product(red))
    out = [Tunable("wg", row), Tunable("wg_row", row), Tunable("wg_row_staged", row), Tunable("vector", (1, 2, 4, 8)),
           Tunable("stage", (0, 1)), Tunable("unroll_row", (1, 2, 4)), Tunable("fold", (8, 16, 32))]
    n = _product(red)
    if "cuda" in meta.halide_target.split("-") and n is not None and n <= gpu_warps.MAX_ROW:
        out.insert(0, Tunable("warp_rows", (0, 1, 2, 4, 8)))  # a warp per row (0: a work-group per row)
    return out


def search_space(meta: KernelMeta, caps: DeviceCaps) -> list[Tunable]:
    """The tunables to search for ``meta`` on a device with ``caps``, most influential first; each tunable's
    default (``meta.schedule``) is added to its values, names the family does not have are dropped."""
    if meta.schedule.family.startswith("autoschedule:"):
        return []
    form = kind(meta)
    dims = (_gpu_space if caps.gpu else _host_space)(meta, caps, form)
    if caps.grf:  # Intel GPUs: default vs large register file (indices into config.GRF_MODES)
        dims.append(Tunable("grf", (0, 2)))
    defaults = dict(meta.schedule.params)
    out = []
    for t in dims:
        if t.name not in defaults:
            continue
        values = tuple(sorted(set(t.values) | {defaults[t.name]}))
        if len(values) > 1:
            out.append(Tunable(t.name, values))
    return out


def autoschedulers(meta: KernelMeta, caps: DeviceCaps) -> tuple[str, ...]:
    """Halide autoschedulers tried after the search as whole-schedule candidates (a plugin that does not load, or a
    schedule Halide rejects, is a failed candidate): the GPU ones on GPU-style targets, the CPU ones on the host.
    Static shapes only (they need size estimates)."""
    if any(v.static_extent is None for v in meta.loop_vars):
        return ()
    return ("Anderson2021", "Li2018") if caps.gpu else ("Adams2019", "Li2018")


def size(space: list[Tunable]) -> int:
    """Points in the full grid (coordinate descent visits about the sum of the value counts per pass)."""
    return math.prod(len(t.values) for t in space) if space else 1


def missing_tunables(meta: KernelMeta, params: dict[str, int], scheduler: str = "") -> list[str]:
    """Tunables the search space now has for ``meta`` that a record's ``params`` lack: it was tuned before they
    existed, so its values were measured under other schedules (an H200 record's work-group of 32, tuned for
    Llama's bf16 silu * up in 16-bit lanes, took it from 26.9 to 29.1 us once the kernel ran in 32-bit words, 2.05x
    Triton). An autoscheduler's record (``scheduler``) has no tunables."""
    if scheduler:
        return []
    caps = device_caps(meta.target, meta.device_type, meta.device_index)
    return sorted({t.name for t in search_space(meta, caps)} - set(params))

"""var/mean (Inductor's welford reductions) as shifted sums: exact for constant rows, parallel on GPUs."""
from __future__ import annotations

from typing import Any

import sympy
import torch
from torch._inductor.codegen.halide import HalideCSEVariable, halide_type
from torch._inductor.virtualized import OpsWrapper, ops


def _first(kernel: Any, value: Any, dtype: torch.dtype) -> Any:
    """``value`` at the first point of the reduction (the shift), 0 where that is not finite (an inf or NaN shift
    would turn every other term into NaN)."""
    if not isinstance(value, HalideCSEVariable) or value.used_dims is None:
        return ops.constant(0.0, dtype)
    rvars = set(kernel.reduction_renames)
    first = value.subs_str({v: sympy.S.Zero for v in rvars})
    dims = [d for d in value.used_dims if d not in rvars]
    t = halide_type(dtype)
    line = f"hl.select(hl.abs({first}) < hl.cast({t}, float('inf')), {first}, hl.cast({t}, 0))"
    return kernel.genfunc(line, dims, shape=value.shape)


def reduce(kernel: Any, dtype: torch.dtype, value: Any) -> tuple[Any, Any, Any]:
    """``welford_reduce``: mean = c + sum(x - c) / n and m2 = sum((x - mean)^2), c the row's first element.
    Upstream's fallback (mean = sum(x) / n) is off by rounding where every x is equal, and a LayerNorm of such a row
    multiplies that by rsqrt(eps): 0.002 instead of 0 (GPUTests ``tmp_not_defined_issue3``: rows of one gathered
    column, 60% of 25.7M elements wrong on CUDA; eager's and Triton's Welford give exactly 0)."""
    kernel.inside_reduction = False
    shift = _first(kernel, value, dtype)
    kernel.inside_reduction = True
    total = ops.reduction(dtype, dtype, "sum", ops.sub(value, shift))
    kernel.inside_reduction = False
    rnumel = ops.index_expr(kernel.features.reduction_numel, dtype)
    mean = ops.add(shift, ops.truediv(total, rnumel))
    kernel.inside_reduction = True
    dx = ops.sub(value, mean)
    m2 = ops.reduction(dtype, dtype, "sum", ops.mul(dx, dx))
    return OpsWrapper._unwrap((mean, m2, rnumel))


def combine(kernel: Any, mean: Any, m2: Any, weight: Any) -> tuple[Any, Any, Any]:
    """``welford_combine`` (a split var/mean's stages, masked Welford) as sums, the parallel-axis form, shifted by
    the first stage's mean c: W = sum(w), mean = c + sum(w * (mean_i - c)) / W, m2 = sum(m2_i) +
    sum(w * (mean_i - mean)^2), 0 where W = 0. Upstream's Tuple update is wrong under Halide 21's strict_float:
    the first element is stored before the others are computed from it, so m2 used the new mean (a split fp32
    ``var`` of 14923 elements came out 0.2% low; GPUTests' ``multilayer_var_lowp`` on the H100). Sums also
    parallelise where the update cannot."""
    dtype = getattr(mean, "dtype", None) or torch.float32
    kernel.inside_reduction = False
    shift = _first(kernel, mean, dtype)
    kernel.inside_reduction = True
    w_sum = ops.reduction(dtype, dtype, "sum", weight)
    weighted = ops.reduction(dtype, dtype, "sum", ops.mul(weight, ops.sub(mean, shift)))
    m2_sum = ops.reduction(dtype, dtype, "sum", m2)
    kernel.inside_reduction = False
    zero = ops.constant(0.0, dtype)
    combined = ops.where(ops.eq(w_sum, zero), zero, ops.add(shift, ops.truediv(weighted, w_sum)))
    kernel.inside_reduction = True
    delta = ops.sub(mean, combined)
    spread = ops.reduction(dtype, dtype, "sum", ops.mul(weight, ops.mul(delta, delta)))
    kernel.inside_reduction = False
    total_m2 = ops.add(m2_sum, spread)
    kernel.inside_reduction = True
    return OpsWrapper._unwrap((combined, total_m2, w_sum))

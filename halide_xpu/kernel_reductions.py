"""Reductions the upstream Halide kernel lowers in forms GPU schedules cannot split (argmax/argmin, bool any/min/
max) or gets wrong (Welford), lowered as plain reductions (a mixin of ``kernel.HalideXpuKernel``)."""
from __future__ import annotations

import re
from typing import Any

import sympy
import torch
from torch._inductor.codegen.halide import HalideCSEVariable

from . import welford


_OPERAND = r"(?:tmp\d+|in_ptr\d+)\[[^\[\]]*\]"
_COMPARISON = re.compile(rf"{_OPERAND} (?:==|!=|<|<=|>|>=) {_OPERAND}")  # a bool CSE value's definition


class ReductionLowering:
    """``reduction`` and the Welford hooks; every reduction Func recorded in ``self.reduction_funcs``."""

    def reduction(self, dtype, src_dtype, reduction_type, value):  # type: ignore[override]
        if reduction_type in ("argmax", "argmin") and self.reduction_renames and not isinstance(value, tuple):
            result = self._arg_reduction(src_dtype, reduction_type, value)
        elif dtype == torch.bool and reduction_type in ("any", "max", "min") and not isinstance(value, tuple):
            return self._bool_reduction(reduction_type, value)  # its int32 accumulator is the reduction Func
        elif reduction_type == "sum" and dtype == torch.int64 and (flag := self._counted_flag(value)) is not None:
            return self._count(value, flag)  # its int32 accumulator is the reduction Func
        else:
            result = super().reduction(dtype, src_dtype, reduction_type, value)
        for var in result if isinstance(result, tuple) else (result,):
            if isinstance(var, HalideCSEVariable) and var.name not in self.reduction_funcs:
                self.reduction_funcs.append(var.name)
        return result

    def welford_reduce_fallback(self, dtype: torch.dtype, value: Any) -> tuple[Any, Any, Any]:
        return welford.reduce(self, dtype, value)

    def welford_combine_impl(self, mean: Any, m2: Any, weight: Any) -> tuple[Any, Any, Any]:
        return welford.combine(self, mean, m2, weight)

    def _bool_reduction(self, reduction_type: str, value: Any) -> Any:
        """any / max / min of bools as an int32 max / min of 0 and 1, tested ``> 0`` (an empty any is False, an
        empty min True): a 1-byte accumulator beside 4-byte ones sent every work-group's partials to global
        scratch (``separate_local_widths``; BERT's masked softmax: the ``any`` of ``_safe_softmax``)."""
        return self._int32_reduction((torch.bool, reduction_type, value), value, f"hl.cast(hl.Int(32), {value})",
                                     "min" if reduction_type == "min" else "max", "{} > 0")

    def _int32_reduction(self, cache_key: tuple, value: Any, wide: str, reduction_type: str, result: str) -> Any:
        """``reduction_type`` of ``wide`` (an int32 expression of ``value``) in an int32 accumulator, read back
        through ``result`` (a format of the accumulator), cached under ``cache_key``."""
        if cache_key in self.cse.reduction_cache:
            return self.cse.reduction_cache[cache_key]
        summand = self.genfunc(wide, value.used_dims, shape=value.shape)
        acc = super().reduction(torch.int32, torch.int32, reduction_type, summand)
        if acc.name not in self.reduction_funcs:
            self.reduction_funcs.append(acc.name)
        out = self.genfunc(result.format(acc), acc.used_dims, shape=acc.shape)
        self.cse.reduction_cache[cache_key] = out
        return out

    def _counted_flag(self, value: Any) -> str | None:
        """The bool ``value`` casts to int64 (``hx.to_int(flag, hl.Int(64))``, a loss's count of targets not ignored),
        where the reduction's length is static and below 2**31 (an int32 count cannot overflow); else None."""
        if isinstance(value, tuple) or not isinstance(value, HalideCSEVariable):
            return None
        numel = sympy.S.One
        for tree in self.range_trees:
            if getattr(tree, "is_reduction", False):
                numel = numel * tree.numel
        if not (numel.is_Integer and int(numel) < 2**31):
            return None
        defs: dict = {}  # a CSE value's name -> its first definition
        for k, v in self.cse._cache.items():
            if isinstance(k, str):
                defs.setdefault(getattr(v, "name", None), k)
        m = re.fullmatch(r"hx\.to_int\(((tmp\d+)\[[^\[\]]*\]), hl\.Int\(64\)\)", defs.get(value.name, ""))
        # the cast value must be a comparison (a bool); an int32 sum (``x.sum()`` of int32 is an int64 sum of its
        # casts) keeps its int64 accumulator
        return m.group(1) if m and _COMPARISON.fullmatch(defs.get(m.group(2), "")) else None

    def _count(self, value: Any, flag: str) -> Any:
        """A sum of int64 0/1 values (``_counted_flag``) accumulated in int32 and cast back: an int64 count beside
        float32 sums sent every work-group's partials to global scratch (``separate_local_widths``) and kept the
        kernel off the warp form (Halide shuffles 32-bit values at most); Llama's and ResNet-18's loss kernels.
        ``hx.indicator`` refuses a summand that is not a bool when the algorithm is built."""
        return self._int32_reduction((torch.int64, "sum", value), value, f"hx.indicator({flag})", "sum",
                                     "hl.cast(hl.Int(64), {})")

    def _arg_reduction(self, src_dtype: torch.dtype, reduction_type: str, value: Any) -> Any:
        """argmax/argmin as two reductions that GPU schedules can split across work-items (upstream's inline
        ``hl.argmax`` cannot be rfactor'd): the row's max/min (NaN wins, as in torch), then the first index holding
        it (a min over indices; NaN rows match their first NaN). Same results as torch, ties included."""
        cache_key = (src_dtype, reduction_type, value)
        if cache_key in self.cse.reduction_cache:
            return self.cse.reduction_cache[cache_key]
        best = super().reduction(src_dtype, src_dtype, "max" if reduction_type == "argmax" else "min", value)
        if best.name not in self.reduction_funcs:
            self.reduction_funcs.append(best.name)
        # over several reduction dims (upstream's inline hl.argmax left the result unwritten on GPU targets) the
        # index is the flattened one, the first dim fastest, as in upstream and torch
        reduction_vars = set(self.reduction_renames)
        result = self.newfunc([v for v in value.used_dims if v not in reduction_vars])
        if reduction_vars - set(value.used_dims):
            value = self.genfunc(f"{value}", self.sort_used_dims({*value.used_dims, *reduction_vars}), shape=value.shape)
        v = value.subs_str(self.reduction_renames)
        terms, scale = [], sympy.S.One
        for sym, rvar in self.reduction_renames.items():
            terms.append(f"hl.cast(hl.Int(32), {rvar}) * {self.kexpr(self.rename_indexing(scale))}")
            scale = scale * self.halide_vars[sym]
        rvar = " + ".join(terms)
        extent = self.kexpr(self.rename_indexing(scale))
        match = f"({v} == {best})"
        if src_dtype.is_floating_point:
            match = f"({match} | (hl.is_nan({v}) & hl.is_nan({best})))"
        self.body.writeline(f"{result} = hl.cast(hl.Int(32), {extent})")
        self.body.writeline(f"{result} = hl.min({result}, hl.select({match}, hl.cast(hl.Int(32), {rvar}), hl.cast(hl.Int(32), {extent})))")
        self.cse.reduction_cache[cache_key] = result
        return result

"""Index and divisor checks of generated kernels: a device-side assert on CUDA, an error word computed by a check
pipeline before the kernel on every other target (a mixin of ``kernel.HalideXpuKernel``)."""
from __future__ import annotations

from typing import Any

import torch
from torch._inductor.utils import IndentedBuffer
from torch._inductor.virtualized import V
from torch.utils._ordered_set import OrderedSet
from torch.utils._sympy.symbol import SymT, free_symbol_is_type

from . import config
from .meta import DEVICE_CHECK_INDEX


def under_mask(ok: str, dims: Any, mask: Any) -> tuple[str, tuple]:
    """A check ``ok`` over ``dims`` that holds only where the load ``mask`` (None: none) holds, and its dims: Halide
    evaluates a masked load's index at every point, also where the mask is off."""
    if mask is None:
        return ok, (*(dims or ()),)
    return f"hl.select({mask}, {ok}, hl.cast(hl.Bool(), 1))", (*(dims or ()), *(getattr(mask, "used_dims", None) or ()))


class DeviceChecks:
    """Bounds checks of computed indices and the error word of device kernels; needs a ``HalideKernel``."""

    def check_bounds(self, expr: Any, size: Any, lower: bool, upper: bool) -> None:  # type: ignore[override]
        """An index Inductor computed from loop variables (index propagation: ``embedding(arange(3) - 1)``) that it
        could not prove in range: the kernel records ``0 <= index < size`` as a check (``device_check``; on CUDA
        a device-side assert), so an out-of-range index raises as in eager and Inductor's C++ instead of reading
        outside the buffer. Indirect indices (loaded values) are checked by ``halide_clamp``."""
        if not (lower or upper) or free_symbol_is_type(expr, SymT.TMP):
            return
        if not (self.device_checks_enabled() or self.cuda_checks_enabled()):
            return
        from torch._inductor.virtualized import ops

        value = ops.index_expr(expr, torch.int64)
        value = getattr(value, "value", value)  # the CSE variable inside an OpsValue
        # inside a masked load (ops.masked: padding, reflection backward) the index only has to be valid where the
        # mask holds: Halide evaluates both sides of the select that applies the mask
        self._pending_checks.append((value, self.kexpr(self.rename_indexing(size)), self._load_mask))

    def _attach_checks(self, value: Any) -> Any:
        """``value``, with every pending bounds check (see ``check_bounds``) recorded: behind ``hx.index_checked``
        on CUDA, else as a device check over the index's (and mask's) dims only, not the value's."""
        checks, self._pending_checks = self._pending_checks, []
        for index, size, mask in checks:
            ok, check_dims = under_mask(f"({index} >= 0) & ({index} < hl.cast({index.name}.type(), {size}))",
                                        index.used_dims, mask)
            if not self.cuda_checks_enabled():
                self.device_check(ok, check_dims, DEVICE_CHECK_INDEX)
                continue
            dims = self.sort_used_dims(OrderedSet((*(getattr(value, "used_dims", None) or ()), *check_dims)))
            result = self.newfunc(dims)  # a device-side assert where the check fails
            self.body.writeline(f"{result} = hx.index_checked({value}, {ok})")
            value = result
        return value

    def device_checks_enabled(self) -> bool:
        """Whether this kernel's check pipeline checks its indices and integer divisors (``config.device_checks``): on
        CPU tensors (the host, opencl and sycl targets) and XPU tensors, where eager raises. CUDA is left out: eager
        CUDA asserts asynchronously, and the error word's read-back would break CUDA graph capture. (The host once
        used ``hl.require``; Halide's lowering of a vectorised require that inlining had copied lifted its failure
        call into an unconditional ``let``: a false error, seed 7159.)"""
        if not config.device_checks:
            return False
        return V.graph.get_current_device_or_throw().type in ("cpu", "xpu")

    def cuda_checks_enabled(self) -> bool:
        """Whether this CUDA kernel asserts on the device where an index it checks is out of range
        (``config.device_checks``; ``hx.index_checked``): eager CUDA and Triton raise there too."""
        return self.target_name() == "cuda" and config.device_checks

    def device_check(self, ok: str, dims: Any, code: int) -> None:
        """Device kernels cannot raise: a Func ``select(ok, 0, code)`` over ``dims`` that the kernel's check pipeline
        (``hx_error`` in the source, built and launched before the kernel by compiler.py) reduces into an error
        word; the glue reads it back and fails the call with ``code``'s message (meta.DEVICE_CHECK_MESSAGES)."""
        check = self.newfunc(self.sort_used_dims(OrderedSet(dims or ())))
        self.body.writeline(f"{check} = hx.device_check({ok}, {code})")
        self.device_checks.append(check)

    def _codegen_error_word(self, code: IndentedBuffer) -> None:
        """``hx_error``: 0, then the largest code of every device check over its domain (only where one fails: the
        RDom's ``where``), the one output of the kernel's check pipeline (compiler.build)."""
        if not self.device_checks:
            return
        code.writeline("# device checks: the error word the glue reads back (HalideXpuKernel.device_check)")
        code.writeline("hx_error = hl.Func(hl.Int(32), 1, 'hx_error')")
        code.writeline("hx_error[hl.Var('hx_e')] = hl.cast(hl.Int(32), 0)")
        code.writeline(f"hx_error_checks = [{', '.join(c.name for c in self.device_checks)}]")
        for i, check in enumerate(self.device_checks):
            dims = list(check.used_dims or ())
            if not dims:
                code.writeline(f"hx_error[0] = hl.max(hx_error[0], {check.name}[()])")
                continue
            extents = [self.kexpr(self.rename_indexing(self.halide_vars[d])) for d in dims]
            ranges = ", ".join(f"hl.Range(0, {e})" for e in extents)
            # clamped: Halide 21's bounds inference of a GuardWithIf-split RVar takes the whole last tile (see load)
            point = f"{check.name}[{', '.join(f'hl.clamp(hx_check{i}[{j}], 0, ({e}) - 1)' for j, e in enumerate(extents))}]"
            code.writeline(f"hx_check{i} = hl.RDom([{ranges}])")
            code.writeline(f"hx_check{i}.where({point} != 0)")
            code.writeline(f"hx_error[0] = hl.max(hx_error[0], {point})")

"""Inductor op → Halide expression overrides: upstream ``HalideOverrides`` with exact (not fast) math."""
from __future__ import annotations

from torch._inductor.codegen.halide import HalideOverrides


class HalideXpuOverrides(HalideOverrides):
    """Upstream lowers ``exp`` to ``hl.fast_exp`` (garbage outside its range, ~5 ulp inside); we keep ``hl.exp``, or
    on CUDA with fast math the hardware exp2 (``halide_helpers.cuda_exp``)."""

    @staticmethod
    def exp(x):  # type: ignore[override]
        from torch._inductor.virtualized import V

        if getattr(V.kernel, "fast_math", lambda: False)():
            return f"hx.cuda_exp({x})"  # marked for the PTX rewrite (target/ptx.py)
        return f"hl.exp({x})"

    @staticmethod
    def erf(x):  # type: ignore[override]
        from torch._inductor.virtualized import V

        if getattr(V.kernel, "target_name", lambda: "")() == "cuda":
            return f"hx.cuda_erf({x})"
        return f"hl.erf({x})"

    @staticmethod
    def tanh(x):  # type: ignore[override]
        """On CPU, Halide calls scalar libm ``tanhf`` (10x slower than vector code): use exp, exact near 0."""
        from torch._inductor.virtualized import V

        if getattr(V.kernel, "target_name", lambda: "")() != "host":
            return f"hl.tanh({x})"
        return f"hx.tanh_vec({x})"

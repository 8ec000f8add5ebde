"""Inductor op → Halide expression overrides: upstream ``HalideOverrides`` with exact math and torch's integer rules."""
from __future__ import annotations

import math
import re
from typing import Any

import torch
from torch._inductor.codegen.halide import HalideOverrides, Unsupported, halide_type

from .kernel_checks import under_mask
from .meta import DEVICE_CHECK_DIVISOR, DEVICE_CHECK_INDEX


def _float_operand(*xs: Any) -> bool:
    """Whether some operand is known to be floating point (then Halide's operators mean what torch's do)."""
    return any(getattr(getattr(x, "dtype", None), "is_floating_point", False) for x in xs)


_ZERO = re.compile(r"^(hl\.cast\(hl\.\w+\(\d+\), )?((?:hl|hx)\.f64\()?-?0(\.0)?\)?\)?$|^hx\.negative_zero\(")


def _expression_texts(x: Any) -> list[str]:
    """The texts a CSE variable (or literal) stands for: itself and its expressions in the kernel's CSE cache."""
    from torch._inductor.virtualized import V

    cache = getattr(getattr(V.kernel, "cse", None), "_cache", {})
    return [str(x)] + [key if isinstance(key, str) else str(key[0]) for key, var in cache.items() if var is x]


def _is_constant_zero(x: Any) -> bool:
    """Whether the CSE variable ``x`` holds a constant ±0."""
    return any(_ZERO.match(text) for text in _expression_texts(x))


def _constant_value(x: Any) -> Any:
    """The number a CSE variable (or literal) holds when it is a constant, else None."""
    for text in _expression_texts(x):
        m = re.match(r"^(?:hl\.cast\(hl\.\w+\(\d+\), )?(?:(?:hl|hx)\.(?:f64|i64|i32)\()?(-?\d+(?:\.0*)?)\)?\)?$", text.strip())
        if m:
            return int(float(m.group(1)))
    return None


_FLOAT_CONSTANT = re.compile(r"^hl\.cast\(hl\.Float\(32\), (?:hl|hx)\.f64\(([-+0-9.e]+)\)\)$|^hl\.f32\(([-+0-9.e]+)\)$")


def _fp32_constant(x: Any) -> Any:
    """The fp32 value a CSE variable holds when it is a finite float constant of the kernel's fp32 math, else None."""
    for text in _expression_texts(x):
        m = _FLOAT_CONSTANT.match(text.strip())
        if m:
            value = float(m.group(1) or m.group(2))
            rounded = float(torch.tensor(value, dtype=torch.float32))
            return rounded if math.isfinite(rounded) else None
    return None


def _int_semantics(name: str, plain: str) -> Any:
    """An op that keeps Halide's operator for floats and calls ``hx.<name>`` otherwise (dispatching on the
    operand types when the algorithm is built): wrapping signed overflow, C/Python division and remainder."""

    def op(*xs: Any) -> str:
        if _float_operand(*xs):
            return plain.format(*xs)
        return f"hx.{name}({', '.join(map(str, xs))})"

    return staticmethod(op)


def _checks_divisor(op: Any) -> Any:
    """``op(a, b)`` (a division or remainder) that records the check ``b != 0`` for integer operands (eager raises
    ZeroDivisionError), computed by the kernel's check pipeline before it runs (``device_checks_enabled``)."""
    fn = op.__func__ if isinstance(op, staticmethod) else op

    def checked(a: Any, b: Any) -> str:
        from torch._inductor.virtualized import V

        kernel = V.kernel
        constant = _constant_value(b)  # a nonzero constant divisor (i // 3) needs no check
        if (not _float_operand(a, b) and constant in (None, 0)
                and getattr(kernel, "device_checks_enabled", lambda: False)()):
            dims = [*(getattr(a, "used_dims", None) or ()), *(getattr(b, "used_dims", None) or ())]
            kernel.device_check(f"hx.nonzero_divisor({b}, {a})", dims, DEVICE_CHECK_DIVISOR)
        return fn(a, b)

    return staticmethod(checked)


def _require_fp64(what: str) -> None:
    """Special functions compute in float64: a device without it falls back (logged by the scheduling)."""
    from torch._inductor.virtualized import V

    from .target import targets

    target = V.kernel.target_name()
    if not targets.has_fp64(target, V.graph.get_current_device_or_throw()):
        raise Unsupported(f"{what} (computed in float64, which this {target} device lacks)")


def _special(name: str, call: str) -> Any:
    """An op computed by ``hx.<call>`` in float64 where the device has it."""

    def op(*xs: Any) -> str:
        _require_fp64(name)
        return "hx." + call.format(*xs)

    return staticmethod(op)


class HalideXpuOverrides(HalideOverrides):
    """Upstream lowers ``exp`` to ``hl.fast_exp`` (garbage outside its range, ~5 ulp inside); we use ``hx.exp`` (Halide's
    exp, argument clamped), or on CUDA with fast math the hardware exp2 (``halide_helpers.cuda_exp``)."""

    add = _int_semantics("add", "{} + {}")
    sub = _int_semantics("sub", "{} - {}")
    mul = _int_semantics("mul", "{} * {}")
    bitwise_left_shift = staticmethod(lambda a, b: f"hx.shift_left({a}, {b})")  # wraps; see halide_helpers
    bitwise_right_shift = staticmethod(lambda a, b: f"hx.shift_right({a}, {b})")
    abs = staticmethod(lambda x: f"hx.abs_value({x})")  # of the operand's type (Halide's is unsigned for ints)
    neg = staticmethod(lambda x: f"hx.neg({x})")  # floats by the sign bit (Halide's -x gives +0.0 for +0.0)
    floordiv = _checks_divisor(staticmethod(lambda a, b: f"hx.floordiv({a}, {b})"))  # torch's float rounding too
    truncdiv = _checks_divisor(_int_semantics("truncdiv", "hl.trunc({} / {})"))
    mod = _checks_divisor(_int_semantics("mod", "hx.mod({}, {})"))  # C's remainder (Halide's % is Euclidean)

    @classmethod
    def constant(cls, value: Any, dtype: torch.dtype) -> str:
        """16-bit float kernels compute in fp32 (loads are upcast): their constants too, unrounded, as in eager's
        opmath and Inductor's other backends (softshrink's lambd=9.99 on bf16 must not become 10.0)."""
        if dtype in (torch.float16, torch.bfloat16):
            dtype = torch.float32
        if isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0 and dtype.is_floating_point:
            # by its bits: Halide's CSE takes FloatImm -0.0 and 0.0 for one value (x / 0.0 and x / -0.0 in one
            # kernel both came out x / 0.0 on GPU-style targets)
            return f"hx.negative_zero({halide_type(dtype)})"
        if dtype == torch.float64 and isinstance(value, float):  # Halide's OpenCL printer rounds hl.f64 to float32
            return f"hx.f64({value!r})"
        return super().constant(value, dtype)

    @staticmethod
    def truediv(a: Any, b: Any) -> str:
        """Halide refuses to compile a division by a constant zero; IEEE gives ±inf/nan: ``a * ±inf``."""
        if _is_constant_zero(b):
            return f"hx.div_by_zero({a}, {b})"
        return f"{a} / {b}"


    @classmethod
    def halide_clamp(cls, value: Any, size: Any, check: bool) -> str:
        """Indirect indices are clamped into the buffer (upstream); an index Inductor asks to check (``check=True``:
        embedding, gather) is also recorded as a check of the kernel's check pipeline (``device_check``), so an
        out-of-range one raises as eager and Inductor's C++ do; CUDA kernels assert on the device
        (``hx.index_checked``). Inside a masked load (a pad of a gather) the index only has to be valid where the
        mask holds: the check pipeline evaluates it at every point (a gathered garbage index under the pad raised,
        graph_fuzz seed 8979)."""
        from torch._inductor.virtualized import V

        clamped = super().halide_clamp(value, size, check)
        end = V.kernel.kexpr(V.kernel.rename_indexing(size) - 1)
        end = f"hl.cast({value.name}.type(), {end})"
        V.kernel.indirect_indices = True  # see HalideXpuKernel.halide_target
        ok, dims = under_mask(f"({value} >= 0) & ({value} <= {end})", getattr(value, "used_dims", None),
                              getattr(V.kernel, "_load_mask", None))
        if check and V.kernel.cuda_checks_enabled():
            return f"hx.index_checked({clamped}, {ok})"
        if check and V.kernel.device_checks_enabled():
            V.kernel.device_check(ok, dims, DEVICE_CHECK_INDEX)
        return clamped

    @staticmethod
    def to_dtype(x: Any, dtype: torch.dtype, src_dtype: Any = None, use_compute_types: bool = True) -> str:  # type: ignore[override]
        """A cast to a 16-bit float rounds to it and computes on in fp32, as loads do (Triton's compute type): upstream
        left the value 16-bit, so the host target's ``hx.exp`` of a bfloat16 cast met two types in one select and
        the kernel did not build (``exp(-x.to(bfloat16).abs())``, found by ``graph_fuzz``). A float becomes an
        integer through ``hx.float_to_int`` (Halide's simplifier folds a plain cast into later integer casts), a bool
        through ``hx.bool_to_int`` (Halide's OpenCL C miscompiles sums of bool vectors)."""
        src = src_dtype or getattr(x, "dtype", None)
        if dtype != torch.bool and not dtype.is_floating_point:
            # float, bool or unknown sources: halide_helpers.to_int; a literal's cast stays a constant (divisor checks)
            unknown = src is None and _constant_value(x) is None
            if unknown or src is not None and (src.is_floating_point or src == torch.bool):
                return f"hx.to_int({x}, {halide_type(dtype)})"
        line = HalideOverrides.to_dtype(x, dtype, src_dtype, use_compute_types)
        if use_compute_types and dtype in (torch.float16, torch.bfloat16):
            return f"hl.cast(hl.Float(32), {line})"
        return line

    @staticmethod
    def to_dtype_bitcast(x: Any, dtype: torch.dtype, src_dtype: torch.dtype) -> str:
        """Upstream casts to the 16-bit type and reinterprets; device targets hold bfloat16 as bits (fp32 values)."""
        return f"hx.bitcast({x}, {halide_type(dtype)}, {halide_type(src_dtype)})"

    @staticmethod
    def pow(a: Any, b: Any) -> str:  # type: ignore[override]
        """Halide's pow is wrong at special values on the host and on CUDA (pow(0, -1), pow(0, nan): 64 of 676
        special-value pairs on the H100), see ``ieee_math.pow``; OpenCL's native pow is right (and the IEEE form
        computes fp32 through float64, which many Intel GPUs lack)."""
        from torch._inductor.virtualized import V

        if getattr(V.kernel, "target_name", lambda: "")() in ("host", "cuda"):
            base = _fp32_constant(a)
            if base is not None and base > 0 and base != 1:
                # a constant base (AdamW's beta ** step): its log taken here, not in every work-item
                return f"hx.pow_constant_base({a}, {b}, {base!r}, {math.log(base)!r})"
            return f"hx.pow({a}, {b})"
        return f"hl.pow({a}, {b})"

    fmod = _checks_divisor(staticmethod(lambda a, b: f"hx.mod({a}, {b})"))

    @staticmethod
    def bitwise_not(x: Any) -> str:  # type: ignore[override]
        """``~`` of a bool is a logical not: Halide's OpenCL C prints ``~b`` on a bool, which C promotes to int
        (``~1 == -2``, true), so ``~isinf(x)`` held everywhere (logcumsumexp's combine on the opencl target)."""
        return f"hx.bitwise_not({x})"

    @staticmethod
    def hypot(x: Any, y: Any) -> str:  # type: ignore[override]
        return f"hx.hypot({x}, {y})"

    @staticmethod
    def relu(x: Any) -> str:  # type: ignore[override]
        return f"hx.relu({x})"

    @staticmethod
    def fma(x: Any, y: Any, z: Any) -> str:  # type: ignore[override]
        return f"hx.fma({x}, {y}, {z})"  # Inductor's addcmul / add(alpha) on cuda and xpu: eager's rounding

    @staticmethod
    def exp(x):  # type: ignore[override]
        from torch._inductor.virtualized import V

        if getattr(V.kernel, "fast_math", lambda: False)():
            return f"hx.cuda_exp({x})"  # marked for the PTX rewrite (target/ptx.py)
        return f"hx.exp({x})"

    @staticmethod
    def erf(x):  # type: ignore[override]
        from torch._inductor.virtualized import V

        if getattr(x, "dtype", None) == torch.float64:
            _require_fp64("erf of float64")
            return f"hx.erf({x})"  # a series in float64 (special_functions.erf64)
        if getattr(V.kernel, "target_name", lambda: "")() == "cuda":
            return f"hx.cuda_erf({x})"
        return f"hx.erf({x})"  # Halide's erf gives NaN for ±inf

    # Halide's host log has no special values (log(inf) = 88.7, log(NaN) = 89.1, no subnormals), log1p/expm1 lose
    # x's digits near 0 as log(1 + x)/exp(x) - 1; torch's special functions Halide lacks (special_math.py)
    log = staticmethod(lambda x: f"hx.log({x})")
    log1p = staticmethod(lambda x: f"hx.log1p({x})")
    expm1 = staticmethod(lambda x: f"hx.expm1({x})")
    log2 = staticmethod(lambda x: f"hx.log2({x})")
    log10 = staticmethod(lambda x: f"hx.log10({x})")  # the constant in x's type (Inductor's is fp32)
    exp2 = staticmethod(lambda x: f"hx.exp2({x})")  # exp(x * ln 2) loses digits at large |x|
    lgamma = staticmethod(lambda x: f"hx.lgamma({x})")
    digamma = staticmethod(lambda x: f"hx.digamma({x})")
    copysign = staticmethod(lambda a, b: f"hx.copysign({a}, {b})")

    @staticmethod
    def polygamma(n: Any, x: Any) -> str:
        """Orders 0 (digamma) and 1 (trigamma) in the argument's type; higher constant orders through the Hurwitz
        zeta in float64; an order that is not a constant falls back."""
        order = _constant_value(n)
        if order is None or order < 0:
            raise Unsupported(f"polygamma of order {order if order is not None else n} (a constant order >= 0 only)")
        if order < 2:
            return f"hx.{'digamma' if order == 0 else 'trigamma'}({x})"
        _require_fp64(f"polygamma of order {order}")
        return f"hx.polygamma({order}, {x})"

    # torch.special's Bessel, Airy, error-function-inverse, zeta, incomplete gamma and orthogonal polynomials:
    # computed in float64 (special_functions.py, special_polynomials.py)
    i0 = _special("i0", "bessel_i({}, 0, False)")
    modified_bessel_i0 = _special("modified_bessel_i0", "bessel_i({}, 0, False)")
    i0e = _special("i0e", "bessel_i({}, 0, True)")
    i1 = _special("i1", "bessel_i({}, 1, False)")
    modified_bessel_i1 = _special("modified_bessel_i1", "bessel_i({}, 1, False)")
    i1e = _special("i1e", "bessel_i({}, 1, True)")
    modified_bessel_k0 = _special("modified_bessel_k0", "bessel_k({}, 0, False)")
    modified_bessel_k1 = _special("modified_bessel_k1", "bessel_k({}, 1, False)")
    scaled_modified_bessel_k0 = _special("scaled_modified_bessel_k0", "bessel_k({}, 0, True)")
    scaled_modified_bessel_k1 = _special("scaled_modified_bessel_k1", "bessel_k({}, 1, True)")
    bessel_j0 = _special("bessel_j0", "bessel_j({}, 0)")
    bessel_j1 = _special("bessel_j1", "bessel_j({}, 1)")
    bessel_y0 = _special("bessel_y0", "bessel_y({}, 0)")
    bessel_y1 = _special("bessel_y1", "bessel_y({}, 1)")
    spherical_bessel_j0 = _special("spherical_bessel_j0", "spherical_bessel_j0({})")
    airy_ai = _special("airy_ai", "airy_ai({})")
    erfinv = _special("erfinv", "erfinv({})")
    ndtri = _special("ndtri", "ndtri({})")
    erfcx = _special("erfcx", "erfcx({})")
    erfc = _special("erfc", "erfc_wide({})")
    log_ndtr = _special("log_ndtr", "log_ndtr({})")
    zeta = _special("zeta", "zeta({}, {})")
    @staticmethod
    def igamma(a: Any, x: Any, upper: bool = False) -> str:
        """P(a, x) (Q with ``upper``): a series and a continued fraction unrolled (special_functions.IGAMMA_STEPS
        steps each; NaN where they have not converged). LLVM's NVPTX backend takes minutes on that much float64 code:
        CUDA unrolls 64 (converged for a up to ~60 near x = a; Triton has no igamma to fall back to). Single elements
        (0-d pipelines) are lowered too: the arguments pass a bounds barrier (special_functions._bounds_opaque), without
        which Halide's bounds inference expanded the continued fraction's guarded steps into an exponential tree."""
        from torch._inductor.virtualized import V

        name = "igammac" if upper else "igamma"
        _require_fp64(name)
        steps = ", 64" if V.kernel.target_name() == "cuda" else ""
        return f"hx.igamma({a}, {x}, {upper}{steps})"

    @staticmethod
    def igammac(a: Any, x: Any) -> str:
        return HalideXpuOverrides.igamma(a, x, upper=True)
    chebyshev_polynomial_t = _special("chebyshev_polynomial_t", "chebyshev('t', {}, {})")
    chebyshev_polynomial_u = _special("chebyshev_polynomial_u", "chebyshev('u', {}, {})")
    chebyshev_polynomial_v = _special("chebyshev_polynomial_v", "chebyshev('v', {}, {})")
    chebyshev_polynomial_w = _special("chebyshev_polynomial_w", "chebyshev('w', {}, {})")
    shifted_chebyshev_polynomial_t = _special("shifted_chebyshev_polynomial_t", "chebyshev('t', {}, {}, True)")
    shifted_chebyshev_polynomial_u = _special("shifted_chebyshev_polynomial_u", "chebyshev('u', {}, {}, True)")
    shifted_chebyshev_polynomial_v = _special("shifted_chebyshev_polynomial_v", "chebyshev('v', {}, {}, True)")
    shifted_chebyshev_polynomial_w = _special("shifted_chebyshev_polynomial_w", "chebyshev('w', {}, {}, True)")
    hermite_polynomial_h = _special("hermite_polynomial_h", "hermite_h({}, {})")
    hermite_polynomial_he = _special("hermite_polynomial_he", "hermite_he({}, {})")
    laguerre_polynomial_l = _special("laguerre_polynomial_l", "laguerre_l({}, {})")
    legendre_polynomial_p = _special("legendre_polynomial_p", "legendre_p({}, {})")

    @staticmethod
    def frexp(x: Any) -> tuple[Any, Any]:
        """(mantissa, int32 exponent) as two values of the kernel, from the float's bits."""
        from torch._inductor.virtualized import V

        mantissa = V.kernel.cse.generate(V.kernel.compute, f"hx.frexp_mantissa({x})", dtype=x.dtype)
        exponent = V.kernel.cse.generate(V.kernel.compute, f"hx.frexp_exponent({x})", dtype=torch.int32)
        return mantissa, exponent

    @staticmethod
    def nextafter(a: Any, b: Any) -> str:
        """One step in the type's own bits: 16-bit floats are computed in fp32 here, where a step is smaller."""
        if any(getattr(v, "dtype", None) in (torch.float16, torch.bfloat16) for v in (a, b)):
            raise Unsupported("nextafter of 16-bit floats (computed in fp32)")
        return f"hx.nextafter({a}, {b})"

    @staticmethod
    def tanh(x):  # type: ignore[override]
        """On CPU, Halide calls scalar libm ``tanhf`` (10x slower than vector code): use exp, exact near 0; on CUDA
        with fast math ``halide_helpers.cuda_tanh``."""
        from torch._inductor.virtualized import V

        if getattr(V.kernel, "fast_math", lambda: False)():
            return f"hx.cuda_tanh({x})"  # branch-free, its exp marked for the PTX rewrite (halide_helpers.tanh_poly)
        if getattr(V.kernel, "target_name", lambda: "")() != "host":
            return f"hl.tanh({x})"
        return f"hx.tanh_vec({x})"

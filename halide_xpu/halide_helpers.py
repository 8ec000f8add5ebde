"""Halide helpers imported by generated kernels: bfloat16 as raw bits for device backends that misprint it."""
from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Iterator

import halide as hl

from .special_math import (_expr, _unify, copysign, is_nan_bits, digamma, erf32, exp, exp2, expm1, f64, lgamma, log, log1p,  # noqa: F401
                           log2, log10, frexp_exponent, frexp_mantissa, nextafter, trigamma)
from .special_functions import erf64
from .special_functions import erfc as erfc_wide  # noqa: F401
from .special_functions import (airy_ai, bessel_i, bessel_j, bessel_k, bessel_y, erfcx, erfinv, igamma,  # noqa: F401
                                log_ndtr, ndtri, polygamma, spherical_bessel_j0, zeta)
from .special_polynomials import chebyshev, hermite_h, hermite_he, laguerre_l, legendre_p  # noqa: F401
from .ieee_math import floordiv as _float_floordiv
from .ieee_math import fmod, hypot, negate, pow, pow_constant_base, relu  # noqa: F401, A004

_building = threading.local()


@contextlib.contextmanager
def building_for(target: str) -> Iterator[None]:
    """Kernels' ``algorithm()`` runs inside this: the CUDA-only helpers below mark their spots for the PTX rewrite
    (target/ptx.py) only when ``target`` is ``"cuda"``, and compute plainly anywhere else, so a kernel source is
    right on every target."""
    previous, previous_checks = getattr(_building, "target", None), getattr(_building, "checks", 0)
    _building.target, _building.checks = target, 0
    try:
        yield
    finally:
        _building.target, _building.checks = previous, previous_checks


def minimum(a: object, b: object) -> hl.Expr:
    """``torch.minimum``: NaN when either is NaN (Halide's ``min`` returns the other operand)."""
    a, b = _unify(a, b)
    return hl.select((a < b) | hl.is_nan(a), a, b) if a.type().is_float() else hl.min(a, b)


def maximum(a: object, b: object) -> hl.Expr:
    """``torch.maximum``: NaN when either is NaN."""
    a, b = _unify(a, b)
    return hl.select((a > b) | hl.is_nan(a), a, b) if a.type().is_float() else hl.max(a, b)


def bitwise_not(a: object) -> hl.Expr:
    """``~a``; for a bool the logical not (Halide's OpenCL C writes ``~`` for both: wrong for a C bool)."""
    a = _expr(a)
    return a.logical_not() if a.type().is_bool() else ~a


def _on_cuda() -> bool:
    return getattr(_building, "target", None) == "cuda"


def fma(x: object, y: object, z: object) -> hl.Expr:
    """``x * y + z`` rounded once, as eager CUDA's addcmul and ``add(alpha=)`` (Inductor asks for it on GPUs; Halide
    21 has no fused multiply-add). fp32 on CUDA: the product is exact in float64 and the sum is rounded to float64
    and then to float32; the two roundings differ from one only when the float64 sum lands on a float32 tie
    (about 2**-29 of random inputs). Elsewhere (no float64 assumed on Intel GPUs) and for other types: x * y + z."""
    x, y, z = _expr(x), _expr(y), _expr(z)
    if _on_cuda() and x.type() == hl.Float(32) and y.type() == hl.Float(32) and z.type() == hl.Float(32):
        wide = hl.Float(64)
        return hl.cast(hl.Float(32), hl.cast(wide, x) * hl.cast(wide, y) + hl.cast(wide, z))
    return x * y + z


# Helpers that leave a PTX marker when building for CUDA (target/ptx.py checks this Halide still emits them)
MARKING = ("cuda_exp", "bf16_round", "bf16_bits", "index_checked")

# Halide's OpenCL C printer emits bfloat16 as ``half`` (wrong numbers), so device kernels keep bf16 tensors as
# uint16 bits and convert explicitly, rounding to nearest even like torch.


def bf16_to_f32(bits: hl.Expr) -> hl.Expr:
    return hl.reinterpret(hl.Float(32), hl.cast(hl.UInt(32), bits) << 16)


def bf16_bits(value: hl.Expr) -> hl.Expr:
    """Float value → bfloat16 bit pattern (round to nearest even, quiet NaN kept); on CUDA the hardware
    conversion (see ``bf16_round``)."""
    if _on_cuda():
        return hl.cast(hl.UInt(16), hl.reinterpret(hl.UInt(32), bf16_round(value)) >> 16)
    u = hl.reinterpret(hl.UInt(32), hl.cast(hl.Float(32), value))
    rounded = (u + (((u >> 16) & 1) + 0x7FFF)) >> 16
    return hl.cast(hl.UInt(16), hl.select(hl.is_nan(hl.cast(hl.Float(32), value)), 0x7FC0, rounded))


def bf16_round(value: hl.Expr) -> hl.Expr:
    """Round a float to bfloat16 precision, kept as Float(32). On CUDA fp32 ``fast_inverse`` marks it and
    target/ptx.py turns the mark into the hardware conversion (``cvt.rn.bf16.f32``, round to nearest even) and back
    (Halide's LLVM cannot emit bf16 conversions for CUDA)."""
    if _on_cuda():
        return hl.fast_inverse(hl.fast_inverse(hl.cast(hl.Float(32), value)))  # a chain: see target/ptx.py
    return bf16_to_f32(bf16_bits(value))


def index_checked(value: hl.Expr, ok: hl.Expr) -> hl.Expr:
    """``value`` (an index clamped into its buffer); on CUDA also a device-side assert where ``ok`` fails, as
    eager CUDA and Triton raise. The mark is fp32 ``fast_inverse_sqrt`` of ``fast_inverse`` of a 0/1 flag (1 where
    ``ok`` fails), which target/ptx.py turns into an ``__assertfail`` call where the flag is set and the flag
    itself; unrewritten, the chain maps 0 to 0 and 1 to ~1, so the value is the same either way."""
    if not _on_cuda():
        return value
    value = value if isinstance(value, hl.Expr) else hl.Expr(value)  # a FuncRef (a loaded index) has no type()
    flag = hl.select(ok, hl.f32(0), hl.f32(1))
    mark = hl.fast_inverse_sqrt(hl.fast_inverse(flag))  # a chain: see target/ptx.py
    return hl.select(mark == hl.f32(0), value, hl.cast(value.type(), 0))


def indicator(flag: object) -> hl.Expr:
    """A bool as an int32 0 or 1: the summand of a count accumulated in int32 (kernel_reductions ``_count``). Only a
    bool may be narrowed so; anything else is an error here, never a silently wrapped sum."""
    flag = flag if isinstance(flag, hl.Expr) else hl.Expr(flag)
    if not flag.type().is_bool():
        raise TypeError(f"a count's summand must be a bool, not {flag.type()}")
    return bool_to_int(flag, hl.Int(32))


def row_index(var: hl.Expr) -> hl.Expr:
    """``var`` through a Func that returns its argument (inlined away when lowered). An update storing at it keeps
    that RVar impure, as a scatter's row RVars are, so the two updates' loops may be fused (``compute_with`` needs
    matching kinds; ``schedule.gpu_scatter``)."""
    f, v = hl.Func("hx_row_index"), hl.Var("v")
    f[v] = v
    return f[var]


def bf16_input(param: hl.ImageParam) -> hl.Func:
    """A Float(32) view of a uint16 ImageParam holding bfloat16 bits."""
    f = hl.Func(f"{param.name()}_f32")
    vs = [hl.Var(f"d{i}") for i in range(param.dimensions())]
    if vs:
        f[vs] = bf16_to_f32(param[vs])
    else:
        f[()] = bf16_to_f32(param[()])
    return f


def pair_halves(words: hl.ImageParam) -> hl.Func:
    """The uint16 elements of a uint32 ImageParam holding two each along its first dim, low half first
    (pairs.py)."""
    f = hl.Func(f"{words.name()}_halves")
    h, rest = hl.Var("d0"), [hl.Var(f"d{i}") for i in range(1, words.dimensions())]
    f[[h, *rest]] = hl.cast(hl.UInt(16), words[[h // 2, *rest]] >> hl.cast(hl.UInt(32), (h % 2) * 16))
    return f


def pair_words(halves: hl.Func, args: list[str], name: str) -> hl.Func:
    """The uint32 Func over Vars ``args`` packing two uint16 results of ``halves`` per point along the first
    (pairs.py)."""
    f, (k, *rest) = hl.Func(hl.UInt(32), len(args), name), [hl.Var(a) for a in args]
    f[[k, *rest]] = hl.cast(hl.UInt(32), halves[[2 * k, *rest]]) | (hl.cast(hl.UInt(32), halves[[2 * k + 1, *rest]]) << 16)
    return f


def cuda_exp(x: hl.Expr) -> hl.Expr:
    """exp; on CUDA (fast math) fp32 ``fast_inverse_sqrt`` marks it and target/ptx.py expands the mark in the PTX
    into an exp on the exp2 unit (float64 keeps Halide's exp; half types round-trip via fp32)."""
    x = _expr(x)
    if x.type() == hl.Float(64) or not _on_cuda():
        return exp(x)
    marked = hl.fast_inverse_sqrt(hl.fast_inverse_sqrt(hl.cast(hl.Float(32), x)))  # a chain: see target/ptx.py
    return hl.cast(x.type(), marked) if x.type().is_float() and x.type().bits() < 32 else marked


# scripts/fit_erf.py: erf(t) = t * P(t^2) below 1 (max 4e-8 relative), 1 - Q(t)^-16 above (2e-8 absolute)
_ERF_SMALL = (1.1283791065216064, -0.37612324953079224, 0.11280179768800735, -0.02671131119132042,
              0.004917550832033157, -0.0005631419480778277)
_ERF_LARGE = (1.000231146812439, 0.06938988715410233, 0.044575825333595276, 0.006822873372584581,
              0.0015985268400982022, -0.00017023753025569022, 9.915466216625646e-05)


def _horner(coeffs: tuple[float, ...], x: hl.Expr) -> hl.Expr:
    r = hl.f32(coeffs[-1])
    for c in coeffs[-2::-1]:
        r = r * x + hl.f32(c)
    return r


def erf_poly(x: hl.Expr) -> hl.Expr:
    """fp32 erf with |x| and the sign as bit operations (Halide's erf spends selects on both): max 5 ulp
    (Halide's 6), NaN, ±inf and -0.0 kept."""
    x = hl.cast(hl.Float(32), _expr(x))
    bits = hl.reinterpret(hl.UInt(32), x)
    t = hl.reinterpret(hl.Float(32), bits & 0x7FFFFFFF)
    small = t * _horner(_ERF_SMALL, t * t)
    q = _horner(_ERF_LARGE, t)
    q = q * q
    q = q * q
    q = q * q
    large = 1 - 1 / (q * q)
    mag = hl.select(t < 1, small, large)
    return hl.reinterpret(hl.Float(32), hl.reinterpret(hl.UInt(32), mag) | (bits & hl.cast(hl.UInt(32), 0x80000000)))


def cuda_erf(x: hl.Expr) -> hl.Expr:
    """erf; on CUDA ``erf_poly`` (fewer instructions: gelu on bf16 is compute-bound there), Halide's elsewhere."""
    x = _expr(x)
    if x.type() == hl.Float(64):  # the CSE value's dtype was not known when the line was written: the float64 series
        return erf(x)
    if not _on_cuda():
        return hl.erf(x)
    return erf_poly(x)


# scripts/fit_tanh.py: tanh(t) = t + t^3 * P(t^2) below 0.6
_TANH_SMALL = (-0.33332598209381104, 0.13313116133213043, -0.052211809903383255, 0.015612637624144554)


def tanh_poly(x: hl.Expr, exp_fn: Any = None) -> hl.Expr:
    """fp32 tanh without branches: ``t + t^3 P(t^2)`` below |x| < 0.6, ``1 - 2 / (exp(2|x|) + 1)`` above (``exp_fn``,
    default ``cuda_exp``: the exp2 unit on CUDA), the sign put back as a bit (NaN, ±inf and -0.0 kept). Halide's
    CUDA tanh is libdevice's branch per element with a range-reduced exp: a bf16 tanh GELU ran 456 SASS
    instructions per 8 elements to Triton's 280, 1.57x its time."""
    x = hl.cast(hl.Float(32), _expr(x))
    bits = hl.reinterpret(hl.UInt(32), x)
    t = hl.reinterpret(hl.Float(32), bits & 0x7FFFFFFF)
    t2 = t * t
    small = t + t * t2 * _horner(_TANH_SMALL, t2)
    large = 1 - 2 / ((exp_fn or cuda_exp)(2 * t) + 1)
    mag = hl.select(t < hl.f32(0.6), small, large)
    return hl.reinterpret(hl.Float(32), hl.reinterpret(hl.UInt(32), mag) | (bits & hl.cast(hl.UInt(32), 0x80000000)))


def cuda_tanh(x: hl.Expr) -> hl.Expr:
    """tanh; on CUDA (fast math) ``tanh_poly`` for fp32 and narrower (computed in fp32), Halide's elsewhere."""
    x = _expr(x)
    if not _on_cuda() or x.type() == hl.Float(64):
        return hl.tanh(x)
    out = tanh_poly(x)
    return hl.cast(x.type(), out) if x.type().is_float() and x.type().bits() < 32 else out


def tanh_vec(x: hl.Expr) -> hl.Expr:
    """tanh from exp (vectorizes on CPU): Taylor series below |x| < 0.1, 1 - 2/(exp(2|x|) + 1) above."""
    x = _expr(x)
    x = hl.cast(hl.Float(32), x) if x.type().bits() < 32 else x
    ax = hl.abs(x)
    x2 = x * x
    c3, c5, c7 = hl.f32(-1.0 / 3), hl.f32(2.0 / 15), hl.f32(-17.0 / 315)
    small = x * (1 + x2 * (c3 + x2 * (c5 + x2 * c7)))
    big = 1 - 2 / (hl.exp(2 * hl.min(ax, hl.f32(20))) + 1)  # tanh(20) rounds to 1; keeps exp finite
    signed = hl.select(x < 0, -big, big)
    return hl.select(hl.is_nan(x), x, hl.select(ax < hl.f32(0.1), small, signed))


# Integer semantics of torch (and C) that Halide's operators do not have: Halide's integer ``/`` and ``%`` are
# Euclidean, and it treats signed 32/64-bit overflow as impossible (its simplifier and LLVM's nsw flags may rely on
# that), while torch wraps. The helpers dispatch on the operand types when the algorithm is built.


def _is_int(e: hl.Expr) -> bool:
    return e.type().is_int() or e.type().is_uint()


def erf(x: object) -> hl.Expr:
    """erf of any float: Halide's erf (clamped) for float32, a float64 series otherwise (``hl.erf`` is float32-only)."""
    x = _expr(x)
    return erf64(x) if x.type() == hl.Float(64) else erf32(x)


def f16_cast(x: object) -> hl.Expr:
    """``cast(Float(16), x)`` with NaN kept: Halide's host conversion from bfloat16 (what the simplifier makes of a
    bfloat16 value widened to fp32 and narrowed to fp16) gives ±inf for NaN."""
    x = _expr(x)
    if not x.type().is_float() or x.type().bits() == 16 and not x.type().is_bfloat():
        return hl.cast(hl.Float(16), x)
    wide = hl.cast(hl.Float(32), x) if x.type().bits() == 16 else x
    nan16 = hl.reinterpret(hl.Float(16), hl.u16(0x7E00))
    return hl.select(is_nan_bits(wide), nan16, hl.cast(hl.Float(16), wide))


def shift_left(a: object, b: object) -> hl.Expr:
    """torch's ``a << b``: wraps (in unsigned bits: Halide assumes a signed 32/64-bit shift does not overflow, and
    ``(x << 3) % (|x << 3| + 1)`` of int32 came out -1 for 1, found by ``graph_fuzz``), 0 for a count outside
    [0, bits)."""
    a, b = _unify(a, b)
    t = a.type()
    if not _is_int(a):
        return a << b
    u, bits = hl.UInt(t.bits()), t.bits()
    count = hl.clamp(b, hl.cast(b.type(), 0), hl.cast(b.type(), bits - 1))
    shifted = hl.reinterpret(t, hl.reinterpret(u, a) << hl.cast(u, count))
    return hl.select((b < hl.cast(b.type(), 0)) | (b >= hl.cast(b.type(), bits)), hl.cast(t, 0), shifted)


def shift_right(a: object, b: object) -> hl.Expr:
    """torch's ``a >> b``: arithmetic for signed types; a count outside [0, bits) fills with the sign (0 for
    unsigned types)."""
    a, b = _unify(a, b)
    t = a.type()
    if not _is_int(a):
        return a >> b
    bits = t.bits()
    outside = (b < hl.cast(b.type(), 0)) | (b >= hl.cast(b.type(), bits))
    shifted = a >> hl.select(outside, hl.cast(b.type(), bits - 1), b)
    return hl.select(outside, hl.cast(t, 0), shifted) if t.is_uint() else shifted


def abs_value(x: object) -> hl.Expr:
    """torch's ``abs``: of the operand's type. Halide's ``abs`` of a signed integer is unsigned, so a later
    ``hl.cast(tmp.type(), -1)`` (a clamp's bound) became 2**32 - 1: ``x.abs().clamp(-1, 1)`` of int32 gave 1 for 0
    (found by ``graph_fuzz``). ``abs(INT_MIN)`` wraps to INT_MIN, as in torch: a wrapping negation, not a cast of
    Halide's unsigned ``abs`` (the simplifier takes that cast as nonnegative and dropped the clamp's lower bound).
    INT_MIN is its own select arm, so no negation overflows: LLVM may turn a negation under ``x < 0`` into its
    ``abs`` with INT_MIN poison and then take the result as nonnegative. On CUDA (H100, 2026-12-07) the signed
    form gave abs(-32768) = +32768 in int16, and the negation in the unsigned type gave clamp(abs(INT_MIN), -1, 1)
    = 1 for int16/32/64 (torch: -1)."""
    x = _expr(x)
    t = x.type()
    if not t.is_int():
        return hl.abs(x)
    return hl.select(x == t.min(), x, hl.select(x < hl.cast(t, 0), hl.cast(t, 0) - x, x))


def float_to_int(x: object, t: hl.Type) -> hl.Expr:
    """``cast(t, x)`` of a float, truncating toward zero, in a form Halide's simplifier cannot merge with a later
    integer cast: it rewrites ``cast(uint64, cast(int64, f))`` as ``cast(uint64, f)`` (its cast-of-cast rule checks
    the types of the casts, not of ``f``), so the wrapping arithmetic below, which computes in unsigned integers, saw
    ``-2.0`` as 0 or ``UINT64_MAX``: ``x.long() * 3`` gave -3 for -2.0 on the host and 3 for -1.5 on OpenCL
    (found by ``graph_fuzz``). A negative ``x`` converts its magnitude and negates it in ``t`` (which also gives
    torch's wrap for a negative float to an unsigned type, as Triton's int16 step does)."""
    x = _expr(x)
    if not x.type().is_float():
        return hl.cast(t, x)
    zero = hl.cast(x.type(), 0)
    return hl.select(x < zero, hl.cast(t, 0) - hl.cast(t, zero - x), hl.cast(t, x))


def bool_to_int(x: object, t: hl.Type) -> hl.Expr:
    """``cast(t, b)`` of a bool as a select: Halide's intrinsic matching turns ``cast(i64, b0) + cast(i64, b1)`` into
    ``widening_add`` of two ``uint1`` vectors, which its OpenCL C lowers from the -1 masks it holds bool vectors in
    (``convert_short4(mask)`` is -1 for true) and prints as ``uchar4 v = short4_value`` (the build fails; a compiler
    that converted implicitly would count -2 for two trues). A bool mask's count in a vectorised OpenCL kernel
    (amax's backward over 3 columns, found by ``graph_fuzz`` on the sycl target) did not build."""
    x = _expr(x)
    if not x.type().is_bool():
        return hl.cast(t, x)
    return hl.select(x, hl.cast(t, 1), hl.cast(t, 0))


def to_int(x: object, t: hl.Type) -> hl.Expr:
    """``cast(t, x)`` to an integer type by the Halide type of ``x`` (Inductor's CSE values do not always carry a
    dtype: ``sign``'s ``(0 < x).to(int8)``): see :func:`float_to_int` and :func:`bool_to_int`."""
    x = _expr(x)
    return float_to_int(x, t) if x.type().is_float() else bool_to_int(x, t)


def _wrapping(op: str, a: object, b: object) -> hl.Expr:
    a, b = _unify(a, b)
    t = a.type()
    if not (t.is_int() and t.bits() >= 32):
        return {"add": a + b, "sub": a - b, "mul": a * b}[op]
    u = hl.UInt(t.bits())
    ua, ub = hl.reinterpret(u, a), hl.reinterpret(u, b)
    return hl.reinterpret(t, {"add": ua + ub, "sub": ua - ub, "mul": ua * ub}[op])


def add(a: object, b: object) -> hl.Expr:
    """``a + b``; signed 32/64-bit integers wrap as in torch."""
    return _wrapping("add", a, b)


def sub(a: object, b: object) -> hl.Expr:
    return _wrapping("sub", a, b)


def mul(a: object, b: object) -> hl.Expr:
    return _wrapping("mul", a, b)


def neg(a: object) -> hl.Expr:
    a = _expr(a)
    if a.type().is_float():
        return negate(a)  # Halide's -a is 0 - a: +0.0 for +0.0
    return _wrapping("sub", hl.cast(a.type(), 0), a) if _is_int(a) else -a


def _divide(a: object, b: object, rounding: str) -> hl.Expr:
    """Division rounding like Python's ``//`` (``floor``) or C's ``/`` (``trunc``). Integers exactly, from Halide's
    Euclidean quotient and its remainder (>= 0); integer division by zero gives 0, as Halide defines it (the
    kernel's check pipeline raises for it first: overrides._checks_divisor)."""
    a, b = _unify(a, b)
    if not _is_int(a):
        return _float_floordiv(a, b) if rounding == "floor" else hl.trunc(a / b)
    q = a / b
    if a.type().is_uint():
        return q
    r = _wrapping("sub", a, _wrapping("mul", q, b))
    if rounding == "floor":  # one less where a negative divisor leaves a remainder
        return hl.select((b < 0) & (r != 0), q - 1, q)
    # toward zero: one step back toward zero where a negative dividend leaves a remainder
    return hl.select((a < 0) & (r != 0), q + hl.select(b < 0, hl.cast(q.type(), -1), hl.cast(q.type(), 1)), q)


def nonzero_divisor(b: object, a: object) -> object:
    """A device check's condition (overrides._checks_divisor): ``b != 0`` where ``a / b`` is an integer division;
    Python's True for a float division (the kernel source cannot tell: Halide CSE variables carry no dtype)."""
    a, b = _unify(a, b)
    return b != hl.cast(b.type(), 0) if _is_int(a) else True


def device_check(ok: object, code: int) -> hl.Expr:
    """A device check's Func value (kernel.device_check): ``code`` where ``ok`` fails, else 0. Each real check is
    counted in the build's ``checks`` (compiler._build_checks builds no check pipeline when there is none)."""
    if ok is True:
        return hl.cast(hl.Int(32), 0)
    _building.checks = getattr(_building, "checks", 0) + 1
    return hl.select(ok, hl.cast(hl.Int(32), 0), hl.cast(hl.Int(32), code))


def checks_built() -> int:
    """How many real device checks the algorithm run inside the current ``building_for`` made."""
    return getattr(_building, "checks", 0)


def floordiv(a: object, b: object) -> hl.Expr:
    """Python/torch floor division (floats: torch's rounding, ``ieee_math.floordiv``)."""
    return _divide(a, b, "floor")


def truncdiv(a: object, b: object) -> hl.Expr:
    """C division, rounding toward zero (floats: ``trunc(a / b)``)."""
    return _divide(a, b, "trunc")


def mod(a: object, b: object) -> hl.Expr:
    """C remainder (sign of ``a``), what Inductor's ``ops.mod`` means; floats as ``fmod``."""
    a, b = _unify(a, b)
    if not _is_int(a):
        return fmod(a, b)
    return _wrapping("sub", a, _wrapping("mul", truncdiv(a, b), b))


def bitcast(x: object, dst: hl.Type, src: hl.Type) -> hl.Expr:
    """``x.view(dst)`` of a value computed as ``src`` (16-bit floats are computed in fp32, and device targets hold
    bfloat16 as bits): the bits of ``src``, reinterpreted; a 16-bit float result comes back as fp32."""
    x = _expr(x)
    if src.is_bfloat():
        bits = bf16_bits(x)
    elif src.is_float() and src.bits() == 16:
        bits = hl.reinterpret(hl.UInt(16), hl.cast(src, x))
    else:
        bits = hl.cast(src, x)
    if dst.is_bfloat():
        return bf16_to_f32(hl.reinterpret(hl.UInt(16), bits))
    if dst.is_float() and dst.bits() == 16:
        return hl.cast(hl.Float(32), hl.reinterpret(dst, bits))
    return hl.reinterpret(dst, bits)


def negative_zero(t: hl.Type) -> hl.Expr:
    """-0.0 of float type ``t``, as a reinterpreted bit pattern (a FloatImm -0.0 is merged with 0.0 by Halide's CSE)."""
    bits = {16: hl.u16, 32: hl.u32, 64: hl.u64}[t.bits()](1 << (t.bits() - 1))
    return hl.reinterpret(t, bits)


def div_by_zero(a: object, zero: object) -> hl.Expr:
    """``a / zero`` for a divisor known to be ±0, as IEEE defines it (Halide refuses a constant zero divisor)."""
    a, zero = _expr(a), _expr(zero)
    t = a.type() if a.type().is_float() else hl.Float(32)
    zero = hl.cast(t, zero)
    inf = hl.select(hl.reinterpret(hl.UInt(t.bits()), zero) != 0, hl.cast(t, -math.inf), hl.cast(t, math.inf))
    return hl.cast(t, a) * inf


def combo_output(value: hl.Func, r: hl.RDom, index: hl.Expr, name: str, extent: int, zero_d: bool) -> hl.Func:
    """A combo kernel's output ``name`` (combo.py): undefined, then ``value`` stored over ``r`` at ``index`` (through
    ``row_index``, so every part's block RVar is of one kind); ``zero_d``: ``value`` is 0-d, stored at 0 of a
    1-element buffer."""
    f, v = hl.Func(value.type(), 1, name), hl.Var("hxv")
    f[v] = hl.undef(value.type())
    f[row_index(index)] = value[()] if zero_d else value[index]
    f.output_buffer().dim(0).set_bounds(0, extent).set_stride(1)
    return f

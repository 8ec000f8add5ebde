"""IEEE/C99 special values for ops whose Halide form gets them wrong: pow (host), fmod, hypot, relu."""
from __future__ import annotations

import math

import halide as hl

from .special_math import _c, _expr, _unify, copysign, exp, is_nan_bits
from .special_math import log as special_log


def _is_inf(x: hl.Expr) -> hl.Expr:
    return hl.abs(x) == _c(x.type(), math.inf)


def _negative(x: hl.Expr) -> hl.Expr:
    """The sign bit (true for -0.0 too)."""
    u = hl.UInt(x.type().bits())
    return (hl.reinterpret(u, x) >> (x.type().bits() - 1)) != hl.cast(u, 0)


def negate(x: hl.Expr) -> hl.Expr:
    """-x by the sign bit: Halide's ``-x`` is ``0 - x``, which gives +0.0 for x = +0.0 (torch.neg: -0.0, so
    ``1 / -x`` at 0 gave +inf)."""
    u = hl.UInt(x.type().bits())
    return hl.reinterpret(x.type(), hl.reinterpret(u, x) ^ (hl.cast(u, 1) << (x.type().bits() - 1)))


def _is_odd_integer(y: hl.Expr) -> hl.Expr:
    """Whether a (finite) float is an odd integer: integral, and half of it is not."""
    return (hl.floor(y) == y) & (hl.floor(y * _c(y.type(), 0.5)) != y * _c(y.type(), 0.5)) & ~_is_inf(y)


def pow(x: object, y: object) -> hl.Expr:  # noqa: A001 - the op's name
    """``pow`` with C99's special values. Halide's host ``pow`` gives pow(nan, y) = 0, pow(0, -1) = 0,
    pow(inf, 0.5) = 1.8e19, pow(2, 1e30) = 0 and pow(1, nan) = 0; here those cases are selected explicitly and
    Halide's pow only sees a finite positive base with a result in range. Integers keep ``hl.pow``."""
    x, y = _unify(x, y)
    t = x.type()
    if not t.is_float():
        return hl.pow(x, y)
    zero, one, inf, nan = _c(t, 0.0), _c(t, 1.0), _c(t, math.inf), _c(t, math.nan)
    ax = hl.abs(x)
    odd = _is_odd_integer(y)
    integral = (hl.floor(y) == y) | _is_inf(y)
    # the magnitude for a finite nonzero base: fp32 through float64 exp/log (exact to fp32 rounding, subnormal
    # bases included); float64 through Halide's pow, with the result's exponent checked before it is asked
    safe_base = hl.select((ax == zero) | _is_inf(ax) | is_nan_bits(ax), one, ax)
    if t.bits() < 64:
        wide = special_log(hl.cast(hl.Float(64), safe_base)) * hl.cast(hl.Float(64), y)
        magnitude = hl.cast(t, exp(wide))
    else:
        log2_result = y * special_log(safe_base) * _c(t, 1 / math.log(2))
        magnitude = hl.select(log2_result > _c(t, 1025.0), inf, log2_result < _c(t, -1076.0), zero,
                              hl.pow(safe_base, y))
    signed = hl.select((x < zero) & odd, negate(magnitude), magnitude)  # -0.0 where it underflows
    # y = ±inf: 1 at |x| = 1, else inf or 0 depending on whether |x| < 1 and the sign of y
    inf_y = hl.select(ax == one, one, (ax < one) == (y < zero), inf, zero)
    # x = ±0: ±inf / inf for y < 0, ±0 / 0 for y > 0 (the sign kept for odd integers)
    zero_x = hl.select(y < zero, hl.select(odd, inf * hl.select(_negative(x), -one, one), inf),
                       hl.select(odd, x, zero))
    # x = ±inf: like x = ±0 with the sign of y flipped
    negative_odd = odd & (x < zero)
    inf_x = hl.select(y < zero, hl.select(negative_odd, _c(t, -0.0), zero), hl.select(negative_odd, -inf, inf))
    general = hl.select((x < zero) & ~integral, nan, signed)
    r = hl.select(_is_inf(y), inf_y, ax == zero, zero_x, _is_inf(ax), inf_x, general)
    r = hl.select(is_nan_bits(x) | is_nan_bits(y), nan, r)
    return hl.select((y == zero) | (x == one), one, r)


def pow_constant_base(x: object, y: object, base: float, log_base: float) -> hl.Expr:
    """``pow(x, y)`` where ``x`` is the constant ``base`` (finite, > 0, != 1, already rounded to fp32) and
    ``log_base`` its natural log, taken when the kernel is written: in fp32 only the float64 exp is left on the device
    (AdamW's ``pow(beta, step)``: the general form's float64 log of a constant ran in every work-item). C99's special
    values of y: NaN -> NaN, ±0 -> 1, ±inf -> 0 or inf by whether base < 1. float64 math keeps ``pow``."""
    x, y = _unify(x, y)
    t = x.type()
    if not t.is_float() or t.bits() == 64:
        return pow(x, y)
    zero, one, inf, nan = _c(t, 0.0), _c(t, 1.0), _c(t, math.inf), _c(t, math.nan)
    magnitude = hl.cast(t, exp(hl.cast(hl.Float(64), y) * hl.f64(log_base)))
    inf_y = hl.select((y < zero) == (base < 1.0), inf, zero)
    r = hl.select(_is_inf(y), inf_y, magnitude)
    return hl.select(is_nan_bits(y), nan, y == zero, one, r)


def _exponent64(x: hl.Expr) -> hl.Expr:
    """The biased exponent field of a float64, as int32."""
    return hl.cast(hl.Int(32), (hl.reinterpret(hl.UInt(64), x) >> 52) & hl.cast(hl.UInt(64), 0x7FF))


def _exact_fmod32(a: hl.Expr, b: hl.Expr) -> hl.Expr:
    """|a| mod |b| for values that fit in fp32, exact, in float64: the exponent gap (at most 277 bits) is closed 28
    bits a step, each step's quotient below 2^29 so that ``q * b`` (29 + 24 bits) and the difference are exact."""
    f64 = hl.Float(64)
    r, d = hl.abs(hl.cast(f64, a)), hl.abs(hl.cast(f64, b))
    for _ in range(11):
        k = hl.clamp(_exponent64(r) - _exponent64(d) - 28, 0, 300)
        scaled = d * hl.reinterpret(f64, hl.cast(hl.UInt(64), k + 1023) << 52)
        r = r - hl.trunc(r / scaled) * scaled
        r = hl.select(r < hl.f64(0.0), r + scaled, r >= scaled, r - scaled, r)
    return r


_FMOD64_STEPS = 84  # ceil((1023 + 1074 - 25) / 25) + 1: the widest exponent gap of two float64 (2^1023, 2^-1074)


def _pow2_64(k: hl.Expr) -> hl.Expr:
    """2^k as float64, 0 <= k <= 1023, from its bits."""
    return hl.reinterpret(hl.Float(64), hl.cast(hl.UInt(64), k + 1023) << 52)


def _true_exponent64(x: hl.Expr) -> hl.Expr:
    """floor(log2(x)) + 1023 for a float64 x > 0, subnormals too (their exponent field reads 0: scaled by 2^54)."""
    field = _exponent64(x)
    return hl.select(field == 0, _exponent64(x * hl.f64(2.0 ** 54)) - 54, field)


def _exact_fmod64(a: hl.Expr, b: hl.Expr) -> hl.Expr:
    """|a| mod |b| in float64, exact for every finite pair. Each step takes ``q = trunc(r / s)`` for ``s = |b| 2^k``
    with the exponent gap cut to 25 bits, so q has at most 26 bits (and is the true quotient or one more); ``s`` is
    split on its bits into a high part of 26 significant bits and a low part of 27, so that ``q * high``,
    ``q * low``, ``r - q * high`` and ``r - q * s`` are all exact (no fma needed; a contracted one is exact too).
    A step lowers r's exponent by 25: 84 steps close the widest gap. Subnormals get their true exponent (a
    remainder stuck at the field's 0 stopped shrinking)."""
    f64, u64 = hl.Float(64), hl.UInt(64)
    r, d = hl.abs(a), hl.abs(b)
    d_exp = _true_exponent64(d)
    low_bits = hl.cast(u64, (1 << 27) - 1)
    for _ in range(_FMOD64_STEPS):
        k = hl.clamp(_true_exponent64(r) - d_exp - 25, 0, 2046)
        k1 = hl.min(k, 1023)
        scaled = d * _pow2_64(k1) * _pow2_64(k - k1)  # exact: below r / 2^24, never overflows
        high = hl.reinterpret(f64, hl.reinterpret(u64, scaled) & ~low_bits)
        low = scaled - high
        q = hl.trunc(r / scaled)
        r = (r - q * high) - q * low
        r = hl.select(r < hl.f64(0.0), r + scaled, r >= scaled, r - scaled, r)
    return r


def fmod(a: object, b: object) -> hl.Expr:
    """C's ``fmod`` for floats (sign of ``a``): NaN for b = 0, a = ±inf or a NaN operand, ``a`` for b = ±inf,
    a zero result keeps the sign of ``a``. ``a - trunc(a / b) * b`` is wrong by up to ``ulp(a)`` once the quotient
    passes 2^24 (fmod(1e30, 100) gave -7.6e22): fp32 and narrower are reduced exactly in float64, float64 exactly
    in 26-bit quotient steps (that formula gave fmod(1e20, 7) = 0, not 2, and fmod(-1e17, 3) = -0, not -1)."""
    a, b = _unify(a, b)
    t = a.type()
    magnitude = hl.cast(t, _exact_fmod32(a, b)) if t.bits() < 64 else _exact_fmod64(a, b)
    r = copysign(magnitude, a)  # a zero result keeps a's sign (``-0.0`` in Halide is +0.0)
    nan = _c(t, math.nan)
    r = hl.select(_is_inf(b) & ~_is_inf(a), a, r)
    return hl.select(is_nan_bits(a) | is_nan_bits(b) | _is_inf(a) | (b == _c(t, 0.0)), nan, r)


def floordiv(a: object, b: object) -> hl.Expr:
    """torch's float floor division (c10's ``div_floor_floating``): ``(a - fmod(a, b)) / b`` rounded to the nearest
    integer and stepped down where the remainder's sign differs from ``b``'s; ``floor(a / b)`` instead gave -0 for
    1 // -inf (torch: -1) and missed by one where ``a / b`` rounds up to an integer."""
    a, b = _unify(a, b)
    t = a.type()
    zero, one, half = _c(t, 0.0), _c(t, 1.0), _c(t, 0.5)
    safe_b = hl.select(b == zero, one, b)
    m = fmod(a, safe_b)
    div = (a - m) / safe_b
    div = hl.select((m != zero) & ((b < zero) != (m < zero)), div - one, div)
    rounded = hl.floor(div)
    rounded = hl.select(div - rounded > half, rounded + one, rounded)
    signed_zero = hl.select(_negative(a) != _negative(b), _c(t, -0.0), zero)
    result = hl.select(div != zero, rounded, signed_zero)
    # a / ±0: a * ±inf (0 / 0 and NaN / 0 give NaN), without a division Halide could see as by a constant zero
    by_zero = a * hl.select(_negative(b), -_c(t, math.inf), _c(t, math.inf))
    result = hl.select(b == zero, by_zero, result)
    return hl.select(is_nan_bits(a) | is_nan_bits(b), _c(t, math.nan), result)


def hypot(x: object, y: object) -> hl.Expr:
    """``sqrt(x² + y²)`` without overflow or underflow in between (Halide's squares overflow above 1.8e19 in
    fp32): ``big * sqrt(1 + (small / big)²)``; inf if either is ±inf (even with a NaN), else NaN with a NaN."""
    x, y = _unify(x, y)
    t = x.type()
    if not t.is_float():
        return hl.hypot(x, y)
    ax, ay = hl.abs(x), hl.abs(y)
    big, small = hl.max(ax, ay), hl.min(ax, ay)
    q = small / hl.select(big == _c(t, 0.0), _c(t, 1.0), big)
    r = big * hl.sqrt(_c(t, 1.0) + q * q)
    r = hl.select(is_nan_bits(x) | is_nan_bits(y), _c(t, math.nan), r)
    return hl.select(_is_inf(x) | _is_inf(y), _c(t, math.inf), r)


def relu(x: object) -> hl.Expr:
    """``max(x, 0)`` that keeps NaN (``hl.max`` drops it, as upstream's ``relu`` did)."""
    x = _expr(x)
    if not x.type().is_float():
        return hl.max(x, hl.cast(x.type(), 0))
    return hl.select((x > _c(x.type(), 0.0)) | is_nan_bits(x), x, _c(x.type(), 0.0))

"""Halide expressions for math Halide lacks or gets wrong at special values: log (inf, NaN, subnormals on the host),
log1p/expm1 (near 0), erf (±inf), log2, log10, exp2, copysign, nextafter, frexp, lgamma, digamma, trigamma."""
from __future__ import annotations

import math
import struct

import halide as hl


def _expr(x: object) -> hl.Expr:
    return x if isinstance(x, hl.Expr) else hl.Expr(x)


def _unify(a: object, b: object) -> tuple[hl.Expr, hl.Expr]:
    a, b = _expr(a), _expr(b)
    if a.type() != b.type():  # Halide's own coercion (float wins, then the wider int): the type of ``a + b``
        t = (a + b).type()
        a, b = hl.cast(t, a), hl.cast(t, b)
    return a, b


_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_SHIFT = 8  # lgamma/digamma recur up to here, then use the asymptotic series (error < 1e-11 beyond 8)


def _float(x: object) -> hl.Expr:
    x = _expr(x)
    return x if x.type().is_float() else hl.cast(hl.Float(32), x)


def f64(v: float) -> hl.Expr:
    """The float64 constant ``v``, exactly on every target. Halide 21's C-style printers (OpenCL C: the opencl and
    sycl targets) write a 64-bit FloatImm through its float32 bits (``(double) float_from_bits(...)``): 0.1 became
    0.100000001, 2**-1022 became 0, ``x * 0.1`` and ``sin(x * pi)`` in float64 were wrong in the 8th digit. A value
    float32 cannot hold is a reinterpreted uint64 instead, which every printer writes exactly."""
    v = float(v)
    if not math.isfinite(v) or (abs(v) <= 3.4e38 and struct.unpack("<f", struct.pack("<f", v))[0] == v):
        return hl.f64(v)
    return hl.reinterpret(hl.Float(64), hl.u64(struct.unpack("<Q", struct.pack("<d", v))[0]))


def _c(t: hl.Type, v: float) -> hl.Expr:
    """Constant ``v`` of type ``t`` (float64: exact on every target, see ``f64``)."""
    if t.is_float() and t.bits() == 64:
        return f64(v)
    return hl.cast(t, hl.f64(v))


def is_nan_bits(x: hl.Expr) -> hl.Expr:
    """NaN test on the bits (Halide 21's OpenCL backend cannot vectorize ``is_nan``)."""
    t = x.type()
    u = hl.UInt(t.bits())
    exponent = {16: 0x7C00, 32: 0x7F800000, 64: 0x7FF0000000000000}[t.bits()]
    magnitude = (1 << (t.bits() - 1)) - 1
    return (hl.reinterpret(u, x) & hl.cast(u, hl.i64(magnitude))) > hl.cast(u, hl.i64(exponent))


def exp(x: object) -> hl.Expr:
    """``hl.exp`` with its argument clamped where the result is already ±0/inf: Halide's range reduction overflows
    its int32 exponent for |x| > ~1.5e9 (exp(1.5e9) gave 0, silu(-1.5e9) gave -1.5e9), and its host polynomial
    gives exp(inf) = exp(NaN) = 0. NaN passes through."""
    x = _expr(x)
    t = x.type()
    hi, lo = (710.0, -746.0) if t == hl.Float(64) else (89.0, -104.0)
    clamped = hl.select(x > _c(t, hi), _c(t, hi), x < _c(t, lo), _c(t, lo), x)
    return hl.select(is_nan_bits(x), x, hl.exp(clamped)) if t.is_float() else hl.exp(clamped)


def log(x: object) -> hl.Expr:
    """Natural log; Halide's host polynomial gives log(inf) = 88.7, log(NaN) = 89.1 and log(1e-45) = -88 (no
    subnormal inputs): those are passed through, subnormals scaled into the normal range first."""
    x = _float(x)
    t = x.type()
    k = 54 if t.bits() == 64 else 24
    tiny = 2.0 ** (-1022 if t.bits() == 64 else -126)
    # one log of the scaled or plain argument (two logs under a select cost both: fp32 pow, through float64, spent
    # half its time in the second)
    small = x < _c(t, tiny)
    value = hl.log(hl.select(small, x * _c(t, 2.0 ** k), x)) - hl.select(small, _c(t, k * math.log(2)), _c(t, 0.0))
    return hl.select(is_nan_bits(x) | (x == _c(t, math.inf)), x, value)


def log1p(x: object) -> hl.Expr:
    """log(1 + x) without losing x's digits near 0: log(u) * x / (u - 1), u = 1 + x (exact correction)."""
    x = _float(x)
    t = x.type()
    u = x + _c(t, 1)
    near = hl.select(u == _c(t, 1), x, log(u) * (x / (u - _c(t, 1))))
    return hl.select(hl.abs(x) < _c(t, 0.5), near, log(u))


def expm1(x: object) -> hl.Expr:
    """exp(x) - 1 without cancellation near 0: (u - 1) * x / log(u), u = exp(x)."""
    x = _float(x)
    t = x.type()
    u = exp(x)
    near = hl.select(u == _c(t, 1), x, (u - _c(t, 1)) * (x / log(u)))
    return hl.select(hl.abs(x) < _c(t, 0.5), near, u - _c(t, 1))


def erf32(x: object) -> hl.Expr:
    """Halide's erf with its argument clamped to ±10 (where erf is ±1 in every float type): ``hl.erf`` gives NaN
    for ±inf and for |x| > ~1e19. NaN passes through. Float32 only: ``halide_helpers.erf`` sends float64 to
    ``special_functions.erf64``."""
    x = _float(x)
    t = x.type()
    return hl.erf(hl.select(x > _c(t, 10), _c(t, 10), x < _c(t, -10), _c(t, -10), x))


def log2(x: object) -> hl.Expr:
    x = _float(x)
    return log(x) * _c(x.type(), 1 / math.log(2))


def log10(x: object) -> hl.Expr:
    """log(x) / log(10) with the constant in x's type: Inductor's decomposition takes an fp32 constant, which left
    float64 log10 wrong from the 8th digit (log10(127.42): 2.1052407 vs 2.10524066)."""
    x = _float(x)
    return log(x) * _c(x.type(), 1 / math.log(10))


def exp2(x: object) -> hl.Expr:
    """2^x by its integer and fractional parts: 2^k built from bits (two factors, so that subnormal results are
    rounded once), 2^f = exp(f ln 2) for |f| <= 1/2. Inductor's decomposition exp(x * ln 2) loses the product's
    rounding times |x| (fp32 exp2(124.25): 36 ulp) and takes ln 2 as an fp32 constant for float64 too (exp2(-160):
    relative error 3e-7). exp2(±inf) = inf / 0, NaN passes through."""
    x = _float(x)
    t = x.type()
    wide = t.bits() == 64
    lo, hi, mantissa, bias = (-1080, 1030, 52, 1023) if wide else (-152, 130, 23, 127)
    ints = hl.Int(64) if wide else hl.Int(32)
    clamped = hl.clamp(x, _c(t, lo), _c(t, hi))
    k = hl.round(clamped)
    frac = clamped - k  # exact: |clamped| < 2^11
    k1 = hl.cast(ints, k) >> 1
    k2 = hl.cast(ints, k) - k1

    def pow2(e: hl.Expr) -> hl.Expr:
        return hl.reinterpret(t, (e + hl.cast(ints, bias)) << mantissa)

    value = (hl.exp(frac * _c(t, math.log(2))) * pow2(k1)) * pow2(k2)
    return hl.select(is_nan_bits(x), x, value)


def copysign(a: object, b: object) -> hl.Expr:
    """|a| with b's sign bit (NaN and -0.0 included), as bit operations."""
    a, b = _unify(_float(a), _float(b))
    t = a.type()
    u = hl.UInt(t.bits())
    sign = hl.cast(u, 1) << (t.bits() - 1)
    return hl.reinterpret(t, (hl.reinterpret(u, a) & ~sign) | (hl.reinterpret(u, b) & sign))


def nextafter(a: object, b: object) -> hl.Expr:
    """The float after ``a`` toward ``b`` (C's nextafter): one step of the magnitude's bits."""
    a, b = _unify(_float(a), _float(b))
    t = a.type()
    i, u = hl.Int(t.bits()), hl.UInt(t.bits())
    bits = hl.reinterpret(i, a)
    outward = (a < b) == (a > _c(t, 0))  # the magnitude grows: a > 0 going up, a < 0 going down
    stepped = hl.reinterpret(t, hl.select(outward, bits + 1, bits - 1))
    smallest = hl.reinterpret(t, (hl.reinterpret(u, b) & (hl.cast(u, 1) << (t.bits() - 1))) | hl.cast(u, 1))
    return hl.select(is_nan_bits(a) | is_nan_bits(b), a + b, a == b, b, a == _c(t, 0), smallest, stepped)


def _shifted(x: hl.Expr) -> tuple[hl.Expr, hl.Expr, hl.Expr, hl.Expr]:
    """(z, product, sum of 1/(x + k), sum of 1/(x + k)^2) over k < n, z = x + n >= _SHIFT (x > 0)."""
    t = x.type()
    z, prod, recip, recip2 = x, _c(t, 1), _c(t, 0), _c(t, 0)
    for _ in range(_SHIFT):
        low = z < _c(t, _SHIFT)
        prod = hl.select(low, prod * z, prod)
        recip = hl.select(low, recip + _c(t, 1) / z, recip)
        recip2 = hl.select(low, recip2 + _c(t, 1) / (z * z), recip2)
        z = hl.select(low, z + _c(t, 1), z)
    return z, prod, recip, recip2


def _sinpi(x: hl.Expr) -> hl.Expr:
    """sin(pi x) with the argument reduced exactly first (x - round(x) is exact in floating point)."""
    return hl.sin(_c(x.type(), math.pi) * (x - hl.round(x)))


def _pole(x: hl.Expr) -> hl.Expr:
    """x is 0 or a negative integer."""
    return (x <= _c(x.type(), 0)) & (x == hl.floor(x))


def _lgamma_positive(x: hl.Expr) -> hl.Expr:
    t = x.type()
    z, prod, _, _ = _shifted(x)
    w = _c(t, 1) / (z * z)
    series = (_c(t, 1 / 12) + w * (_c(t, -1 / 360) + w * (_c(t, 1 / 1260) + w * _c(t, -1 / 1680)))) / z
    return (z - _c(t, 0.5)) * log(z) - z + _c(t, _HALF_LOG_2PI) + series - log(prod)


def lgamma(x: object) -> hl.Expr:
    """log|Gamma(x)|: recurrence up to 8, Stirling's series; reflection below 0.5; +inf at the poles (0, -1, ...)."""
    x = _float(x)
    t = x.type()
    reflected = log(_c(t, math.pi) / hl.abs(_sinpi(x))) - _lgamma_positive(_c(t, 1) - x)
    inf = _c(t, math.inf)
    value = hl.select(x < _c(t, 0.5), reflected, _lgamma_positive(hl.max(x, _c(t, 0.5))))
    tiny = hl.abs(x) < _c(t, 1e-30)  # Gamma(x) ~ 1/x (the recurrence's product would flush to 0)
    return hl.select(is_nan_bits(x), x, hl.abs(x) == inf, inf, _pole(x), inf, tiny, -log(hl.abs(x)), value)


def _digamma_positive(x: hl.Expr) -> hl.Expr:
    t = x.type()
    z, _, recip, _ = _shifted(x)
    w = _c(t, 1) / (z * z)
    series = w * (_c(t, 1 / 12) - w * (_c(t, 1 / 120) - w * (_c(t, 1 / 252) - w * _c(t, 1 / 240))))
    return log(z) - _c(t, 0.5) / z - series - recip


def digamma(x: object) -> hl.Expr:
    """psi(x): recurrence up to 8 and the asymptotic series; reflection below 0 (psi(1 - x) - pi / tan(pi x));
    NaN at negative integers, -inf at +0 and +inf at -0 (torch's choice)."""
    x = _float(x)
    t = x.type()
    r = x - hl.round(x)
    reflected = _digamma_positive(_c(t, 1) - x) - _c(t, math.pi) / hl.tan(_c(t, math.pi) * r)
    value = hl.select(x < _c(t, 0), reflected, _digamma_positive(hl.max(x, _c(t, 1e-30))))
    zero = hl.select(hl.reinterpret(hl.UInt(t.bits()), x) == hl.cast(hl.UInt(t.bits()), 0), _c(t, -math.inf),
                     _c(t, math.inf))
    tiny = hl.abs(x) < _c(t, 1e-30)  # psi(x) ~ -1/x - Euler's gamma
    return hl.select(is_nan_bits(x), x, x == _c(t, math.inf), x, x == _c(t, 0), zero,
                     (x < _c(t, 0)) & (x == hl.floor(x)), _c(t, math.nan),
                     tiny, _c(t, -1) / x - _c(t, 0.5772156649015329), value)


def _trigamma_positive(x: hl.Expr) -> hl.Expr:
    t = x.type()
    z, _, _, recip2 = _shifted(x)
    w = _c(t, 1) / (z * z)
    # psi1(z) ~ 1/z + 1/(2 z^2) + 1/(6 z^3) - 1/(30 z^5) + 1/(42 z^7) - 1/(30 z^9)
    series = (_c(t, 1) + w * (_c(t, 1 / 6) - w * (_c(t, 1 / 30) - w * (_c(t, 1 / 42) - w * _c(t, 1 / 30))))) / z
    return series + _c(t, 0.5) * w + recip2


def trigamma(x: object) -> hl.Expr:
    """psi'(x) (polygamma(1, x)): recurrence and asymptotic series; reflection below 0 (pi^2 / sin^2(pi x) -
    psi'(1 - x)). At the poles as torch computes them: +inf at 0, and at -1, -2, ... the reflection with the
    rounded ``sin(pi * x)`` of the argument's type (eager's ``calc_trigamma``: 2.0e13 at -8 in float32, not inf)."""
    x = _float(x)
    t = x.type()
    rest = _trigamma_positive(_c(t, 1) - x)
    s = _sinpi(x)
    reflected = _c(t, math.pi ** 2) / (s * s) - rest
    naive = hl.sin(_c(t, math.pi) * x)  # c10::pi<T> * x, rounded to T, then sin: not 0 at negative integers
    at_pole = _c(t, math.pi) * _c(t, math.pi) / (naive * naive) - rest
    value = hl.select(x < _c(t, 0.5), reflected, _trigamma_positive(hl.max(x, _c(t, 0.5))))
    tiny = hl.abs(x) < _c(t, 1e-30)
    return hl.select(is_nan_bits(x), x, x == _c(t, math.inf), _c(t, 0), x == _c(t, 0), _c(t, math.inf),
                     _pole(x), at_pole, tiny, _c(t, 1) / (x * x), value)


def _frexp_bits(x: hl.Expr) -> tuple[hl.Expr, hl.Expr, hl.Expr]:
    """(x in float64 scaled into the normal range, its biased exponent, the scale's exponent)."""
    y = hl.cast(hl.Float(64), x)
    sub = hl.abs(y) < f64(2.0 ** -1022)
    y = hl.select(sub, y * hl.f64(2.0 ** 54), y)
    biased = hl.cast(hl.Int(32), (hl.reinterpret(hl.UInt(64), y) >> 52) & hl.u64(0x7FF))
    return y, biased, hl.select(sub, 54, 0)


def frexp_mantissa(x: object) -> hl.Expr:
    """C's frexp mantissa (0.5 <= |m| < 1, sign kept); ±0, ±inf and NaN are returned as they are."""
    x = _float(x)
    y, biased, _ = _frexp_bits(x)
    mask = hl.u64(~(0x7FF << 52) & 0xFFFFFFFFFFFFFFFF)
    m = hl.reinterpret(hl.Float(64), (hl.reinterpret(hl.UInt(64), y) & mask) | hl.u64(1022 << 52))
    special = (x == _c(x.type(), 0)) | (biased == 0x7FF)
    return hl.select(special, x, hl.cast(x.type(), m))


def frexp_exponent(x: object) -> hl.Expr:
    """C's frexp exponent as int32; 0 for ±0, ±inf and NaN (torch's values)."""
    x = _float(x)
    _, biased, scale = _frexp_bits(x)
    return hl.select((x == _c(x.type(), 0)) | (biased == 0x7FF), 0, biased - 1022 - scale)

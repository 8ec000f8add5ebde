"""torch.special's Bessel, Airy, error-function-inverse and zeta functions as Halide expressions, evaluated in float64
(series, asymptotic expansions, trapezoidal integrals, Halley steps) and rounded to the argument's float type."""
from __future__ import annotations

import math
from typing import Callable

import halide as hl

from .special_math import _float, _unify, f64, is_nan_bits, log, log1p

F64 = hl.Float(64)
_EULER = 0.5772156649015329
_SQRT_PI = math.sqrt(math.pi)
_INF, _NAN = math.inf, math.nan


def _d(v: float) -> hl.Expr:
    return f64(v)  # exact on every target


def _wide(x: object) -> tuple[hl.Expr, hl.Type]:
    """(x as float64, the float type to round the result to)."""
    x = _float(x)
    return hl.cast(F64, x), x.type()


def _bounds_opaque(x: hl.Expr) -> hl.Expr:
    """Float64 ``x`` times 1.0 written as reinterpreted bits: the same value (NaN and -0.0 included), but Halide's
    interval analysis gives a ``Reinterpret`` node the bounds of its type (none, for a float) and its simplifier
    never folds a uint64 constant reinterpreted as a float (it does fold a reinterpret round trip of ``x``), so every
    bound computed from ``x`` stays unbounded through all of lowering. Needed on the arguments of long unrolled
    recurrences that read each step twice (a guard ``select(|d| < tiny, tiny, d)``): in a 0-d pipeline the
    arguments are zero-argument Image calls, which bounds analysis takes as exact single points; bounds inference
    (``boxes_required`` on the CSE'd definition: ``BoxesTouched::visit_let``) then bounds every let by its exact
    value, substitutes it (no Variable in it) and simplifies it, a tree that doubles with every step. In an N-d
    pipeline the index is a loop variable, so the inputs and everything after them are unbounded anyway."""
    return x * hl.reinterpret(F64, hl.u64(0x3FF0000000000000))


def _pick(*cases: hl.Expr) -> hl.Expr:
    return hl.select(*cases) if len(cases) > 1 else cases[0]


def _series(first: hl.Expr, ratio: Callable[[int], hl.Expr], terms: int) -> hl.Expr:
    """first * (1 + r1 + r1 r2 + ...): a power series by its term ratios."""
    term, total = first, first
    for k in range(1, terms):
        term = term * ratio(k)
        total = total + term
    return total


# ------------------------------------------------------------------ modified Bessel functions I and K (orders 0, 1)
_I_SERIES_MAX = 20.0  # |x| <= 20: the power series (positive terms, 40 are enough); beyond: the asymptotic expansion


def _bessel_i_scaled(x: hl.Expr, nu: int) -> hl.Expr:
    """exp(-|x|) I_nu(|x|) for float64 x (nu = 0, 1)."""
    a = hl.abs(x)
    s = hl.min(a, _d(_I_SERIES_MAX))
    y = s * s * 0.25
    series = _series(_d(1.0) if nu == 0 else s * 0.5, lambda k: y / _d(k * (k + nu)), 40) * hl.exp(-s)
    b = hl.max(a, _d(_I_SERIES_MAX))
    asym = _series(_d(1.0), lambda k: _d((2 * k - 1) ** 2 - 4 * nu * nu) / (b * _d(8.0 * k)), 20)
    asym = asym / hl.sqrt(_d(2 * math.pi) * b)
    return hl.select(a <= _d(_I_SERIES_MAX), series, asym)


def _odd(x: hl.Expr, value: hl.Expr, nu: int) -> hl.Expr:
    """value(|x|) extended to negative x: even for nu = 0, odd for nu = 1 (keeping -0.0)."""
    return value if nu == 0 else hl.select(x < _d(0), -value, hl.select(x == _d(0), x, value))


def bessel_i(x: object, nu: int, scaled: bool) -> hl.Expr:
    """I_nu(x) or exp(-|x|) I_nu(x), nu in (0, 1)."""
    x, t = _wide(x)
    e = _bessel_i_scaled(x, nu)
    a = hl.abs(x)
    inf = a == _d(_INF)
    if scaled:
        value = hl.select(inf, _d(0), e)
    else:  # exp(|x|) overflows float64 beyond 709: past float32's range anyway
        value = hl.select(inf | (a > _d(700)), _d(_INF), e * hl.exp(hl.min(a, _d(700))))
    if not scaled:  # torch: i0(±inf) = nan, i0e(±inf) = 0
        value = hl.select(inf, _d(_NAN), value)
    return hl.cast(t, hl.select(is_nan_bits(x), x, _odd(x, value, nu)))


def _digamma_int(k: int) -> float:
    return -_EULER + sum(1.0 / j for j in range(1, k))


_K_SERIES_MAX = 2.0  # x <= 2: the logarithmic series; beyond: the trapezoidal integral


def _bessel_k_series(x: hl.Expr, nu: int) -> hl.Expr:
    """K_nu(x), 0 < x <= 2 (DLMF 10.31.1)."""
    y = x * x * 0.25
    log_half = log(x * 0.5)
    i = _series(_d(1.0) if nu == 0 else x * 0.5, lambda k: y / _d(k * (k + nu)), 30)
    term, total = (_d(1.0) if nu == 0 else _d(1.0)), _d(0)
    for k in range(30):
        if k:
            term = term * y / _d(k * (k + nu))
        total = total + term * _d(_digamma_int(k + 1) + _digamma_int(k + nu + 1))
    if nu == 0:
        return -log_half * i + total * 0.5
    return _d(1) / x + log_half * i - x * 0.25 * total


def _bessel_k_scaled_integral(x: hl.Expr, nu: float) -> hl.Expr:
    """exp(x) K_nu(x), x >= 2: the integral of exp(-x (cosh t - 1)) cosh(nu t) over t > 0, with sinh(t/2) =
    w / sqrt(2x): sqrt(2/x) times the integral of exp(-w^2) cosh(nu t) / sqrt(1 + v^2) over w > 0, by the
    trapezoidal rule (error ~ exp(-2 pi sqrt(2x) / h) for this analytic integrand)."""
    h, nodes = 0.35, 21
    root = hl.sqrt(x * 2.0)
    total = _d(0)
    for j in range(nodes):
        w = h * j
        v = _d(w) / root
        g = _d(1) / hl.sqrt(v * v + 1.0)
        if nu == 1:
            g = g * (v * v * 2.0 + 1.0)
        elif nu:
            g = g * hl.cosh(hl.log(v + hl.sqrt(v * v + 1.0)) * _d(2.0 * nu))  # cosh(nu t), t = 2 asinh(v)
        total = total + g * _d(math.exp(-w * w) * (0.5 if j == 0 else 1.0))
    return total * _d(h) * hl.sqrt(_d(2.0) / x)


def bessel_k(x: object, nu: int, scaled: bool) -> hl.Expr:
    """K_nu(x) or exp(x) K_nu(x), nu in (0, 1); NaN below 0, inf at 0, 0 at +inf (torch's values)."""
    x, t = _wide(x)
    small = hl.min(hl.max(x, _d(1e-300)), _d(_K_SERIES_MAX))
    large = hl.max(x, _d(_K_SERIES_MAX))
    series = _bessel_k_series(small, nu)
    integral = _bessel_k_scaled_integral(large, nu)
    if scaled:
        value = hl.select(x <= _d(_K_SERIES_MAX), series * hl.exp(small), integral)
    else:
        value = hl.select(x <= _d(_K_SERIES_MAX), series, integral * hl.exp(-hl.min(large, _d(800))))
    return hl.cast(t, _pick(is_nan_bits(x) | (x < _d(0)), _d(_NAN), x == _d(0), _d(_INF), x == _d(_INF), _d(0),
                            value))


# ------------------------------------------------------------------ Bessel functions J and Y (orders 0, 1)
_J_SERIES_MAX = 12.0  # |x| <= 12: power series (float64 loses < 4 digits); beyond: Hankel's expansion


def _hankel(x: hl.Expr, nu: int) -> tuple[hl.Expr, hl.Expr]:
    """(J_nu(x), Y_nu(x)) for x >= 12: sqrt(2/(pi x)) (P cos chi - Q sin chi, P sin chi + Q cos chi)."""
    p, q, term = _d(1), _d(0), _d(1)
    for k in range(1, 26):
        term = term * _d((4 * nu * nu - (2 * k - 1) ** 2) / (8.0 * k)) / x
        sign = 1.0 if (k // 2) % 2 == 0 else -1.0
        if k % 2:
            q = q + term * _d(sign)
        else:
            p = p + term * _d(sign)
    chi = x - _d((0.5 * nu + 0.25) * math.pi)
    c, s = hl.cos(chi), hl.sin(chi)
    scale = hl.sqrt(_d(2 / math.pi) / x)
    return scale * (p * c - q * s), scale * (p * s + q * c)


def _bessel_jy_series(x: hl.Expr, nu: int) -> tuple[hl.Expr, hl.Expr]:
    """(J_nu(x), Y_nu(x)) for 0 < x <= 12 (DLMF 10.2.2, 10.8.1)."""
    y = -x * x * 0.25
    j = _series(_d(1.0) if nu == 0 else x * 0.5, lambda k: y / _d(k * (k + nu)), 40)
    term, total = _d(1.0), _d(0)
    for k in range(40):
        if k:
            term = term * y / _d(k * (k + nu))
        total = total + term * _d(_digamma_int(k + 1) + _digamma_int(k + nu + 1))
    yv = _d(2 / math.pi) * log(x * 0.5) * j
    if nu == 0:
        yv = yv - total * _d(1 / math.pi)
    else:
        yv = yv - _d(2 / math.pi) / x - x * total * _d(0.5 / math.pi)
    return j, yv


def _bessel_jy(x: hl.Expr, nu: int) -> tuple[hl.Expr, hl.Expr]:
    a = hl.abs(x)
    js, ys = _bessel_jy_series(hl.min(hl.max(a, _d(1e-300)), _d(_J_SERIES_MAX)), nu)
    ja, ya = _hankel(hl.max(a, _d(_J_SERIES_MAX)), nu)
    near = a <= _d(_J_SERIES_MAX)
    return hl.select(near, js, ja), hl.select(near, ys, ya)


def bessel_j(x: object, nu: int) -> hl.Expr:
    """J_nu(x), nu in (0, 1): even / odd in x; NaN at ±inf (torch's value)."""
    x, t = _wide(x)
    j, _ = _bessel_jy(x, nu)
    zero = _d(1.0) if nu == 0 else x
    value = _pick(x == _d(0), zero, hl.abs(x) == _d(_INF), _d(_NAN), _odd(x, j, nu))
    return hl.cast(t, hl.select(is_nan_bits(x), x, value))


def bessel_y(x: object, nu: int) -> hl.Expr:
    """Y_nu(x), nu in (0, 1): -inf at 0, NaN below 0 and at +inf (torch's values)."""
    x, t = _wide(x)
    _, y = _bessel_jy(x, nu)
    return hl.cast(t, _pick(is_nan_bits(x) | (x < _d(0)) | (x == _d(_INF)), _d(_NAN), x == _d(0), _d(-_INF), y))


def spherical_bessel_j0(x: object) -> hl.Expr:
    """sin(x) / x; 1 at 0, 0 at ±inf."""
    x, t = _wide(x)
    a = hl.abs(x)
    safe = hl.select((a == _d(0)) | (a == _d(_INF)), _d(1), x)
    return hl.cast(t, _pick(is_nan_bits(x), x, a == _d(0), _d(1), a == _d(_INF), _d(0), hl.sin(safe) / safe))


def airy_ai(x: object) -> hl.Expr:
    """Ai(x): Maclaurin series on [-7, 2.1], (1/pi) sqrt(x/3) K_{1/3}(zeta) above, the oscillating asymptotic
    expansion (DLMF 9.7.9) below; NaN at ±inf (torch's value)."""
    x, t = _wide(x)
    m = hl.clamp(x, _d(-7), _d(2.1))
    cube = m * m * m
    f = _series(_d(1), lambda k: cube / _d((3 * k - 1) * 3 * k), 60)
    g = _series(m, lambda k: cube / _d(3 * k * (3 * k + 1)), 60)
    maclaurin = f * _d(0.355028053887817239) - g * _d(0.258819403792806798)
    p = hl.max(x, _d(2.1))
    zeta = p * hl.sqrt(p) * _d(2.0 / 3.0)
    above = _bessel_k_scaled_integral(zeta, 1.0 / 3.0) * hl.exp(-hl.min(zeta, _d(800))) * hl.sqrt(p / 3.0) / _d(math.pi)
    z = hl.max(-x, _d(7))
    zeta_n = z * hl.sqrt(z) * _d(2.0 / 3.0)
    even, odd, u = _d(1), _d(0), _d(1)
    for k in range(1, 16):
        u = u * _d((6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216 * k)) / zeta_n
        sign = 1.0 if (k // 2) % 2 == 0 else -1.0
        if k % 2:
            odd = odd + u * _d(sign)
        else:
            even = even + u * _d(sign)
    chi = zeta_n - _d(math.pi / 4)
    below = (hl.cos(chi) * even + hl.sin(chi) * odd) / (hl.sqrt(hl.sqrt(z)) * _d(_SQRT_PI))
    value = _pick(x > _d(2.1), above, x < _d(-7), below, maclaurin)
    return hl.cast(t, _pick(is_nan_bits(x) | (hl.abs(x) == _d(_INF)), _d(_NAN), value))


# ------------------------------------------------------------------ the error function family in float64
def _erfcx_positive(x: hl.Expr) -> hl.Expr:
    """exp(x^2) erfc(x) for x >= 0: exp(x^2) - (2/sqrt(pi)) x sum (2x^2)^n / (2n+1)!! below 2, Laplace's
    continued fraction above."""
    s = hl.min(x, _d(2))
    series = hl.exp(s * s) - _series(s * _d(2 / _SQRT_PI), lambda n: s * s * _d(2.0 / (2 * n + 1)), 50)
    c = hl.max(x, _d(2))
    frac = c
    for k in range(60, 0, -1):
        frac = c + _d(k * 0.5) / frac
    return hl.select(x < _d(2), series, _d(1 / _SQRT_PI) / frac)


def erf64(x: hl.Expr) -> hl.Expr:
    """erf of a float64 (Halide's ``hl.erf`` takes float32 only: a float64 gelu did not build, found by
    ``graph_fuzz``): exp(-x^2) times erfcx's series below 2 (no cancellation near 0), 1 - erfc above."""
    a = hl.abs(x)
    s = hl.min(a, _d(2))
    small = hl.exp(-s * s) * _series(s * _d(2 / _SQRT_PI), lambda n: s * s * _d(2.0 / (2 * n + 1)), 60)
    c = hl.max(a, _d(2))
    big = _d(1) - hl.exp(-c * c) * _erfcx_positive(c)
    value = hl.select(a < _d(2), small, big)
    return _pick(is_nan_bits(x), x, x < _d(0), -value, value)


def _erfc(x: hl.Expr) -> hl.Expr:
    a = hl.abs(x)
    tail = hl.exp(-a * a) * _erfcx_positive(a)
    return hl.select(x < _d(0), _d(2) - tail, tail)


def erfc(x: object) -> hl.Expr:
    """erfc in float64, rounded to x's type. Halide has none and the ops handler's default is ``1 - erf(x)``, which
    cancels: erfc(3) of fp32 was off by 1e-3 relative and erfc(6) gave 0 for 2.2e-17 (found beside graph_fuzz's
    float64 erf); Inductor's C++ calls erfc."""
    x, t = _wide(x)
    x = _bounds_opaque(x)
    return hl.cast(t, _pick(is_nan_bits(x), x, _erfc(x)))


def erfcx(x: object) -> hl.Expr:
    """exp(x^2) erfc(x): inf at -inf, 0 at +inf. The argument passes the bounds barrier (_bounds_opaque): of a
    narrow integer Halide knew the bounds, and its bounds of the series' terms grew until the compile never finished."""
    x, t = _wide(x)
    x = _bounds_opaque(x)
    pos = _erfcx_positive(hl.abs(x))
    neg = hl.exp(hl.min(x * x, _d(800))) * 2.0 - pos
    return hl.cast(t, _pick(is_nan_bits(x), x, x == _d(_INF), _d(0), x < _d(0), neg, pos))


def log_ndtr(x: object) -> hl.Expr:
    """log of the standard normal CDF: log(erfcx(-x/sqrt2)/2) - x^2/2 below -1, log1p(-erfc(x/sqrt2)/2) above."""
    x, t = _wide(x)
    z = x * _d(1 / math.sqrt(2))
    low = log(_erfcx_positive(hl.max(-z, _d(0))) * 0.5) - z * z
    high = log1p(_erfc(hl.min(z, _d(40))) * -0.5)
    return hl.cast(t, _pick(is_nan_bits(x), x, x < _d(-1), low, high))


def _inverse_erfc_abs(a: hl.Expr, c: hl.Expr) -> hl.Expr:
    """z >= 0 with erf(z) = a, given a and c = 1 - a (each exact where it is used): an initial guess (relative error
    ~2e-3), then Halley steps on erf(z) - a (a < 0.5) or c - erfc(z) (the tails, as exp(z^2) c - erfcx(z))."""
    w = log(c * (_d(2) - c))  # log(1 - a^2)
    k = 0.147
    b = w * 0.5 + _d(2 / (math.pi * k))
    z = hl.sqrt(hl.max(hl.sqrt(b * b - w / _d(k)) - b, _d(0)))
    for _ in range(3):
        e2 = hl.exp(z * z)
        u_tail = (e2 * c - _erfcx_positive(z)) * _d(_SQRT_PI / 2)
        u_body = (_d(1) - hl.exp(-z * z) * _erfcx_positive(z) - a) * e2 * _d(_SQRT_PI / 2)
        u = hl.select(a < _d(0.5), u_body, u_tail)
        z = hl.max(z - u / (u * z + 1.0), _d(0))
    return z


def erfinv(x: object) -> hl.Expr:
    """Inverse error function: ±inf at ±1, NaN outside [-1, 1]."""
    x, t = _wide(x)
    a = hl.abs(x)
    z = _inverse_erfc_abs(hl.min(a, _d(1)), _d(1) - hl.min(a, _d(1)))
    value = _pick(a > _d(1), _d(_NAN), a == _d(1), _d(_INF), a == _d(0), _d(0), z)
    sign = hl.select(x < _d(0), _d(-1), _d(1))
    return hl.cast(t, hl.select(is_nan_bits(x), x, hl.select(x == _d(0), x, value * sign)))


def ndtri(x: object) -> hl.Expr:
    """Inverse of the standard normal CDF: -sqrt2 erfcinv(2p); ±inf at 1 / 0, NaN outside [0, 1]."""
    x, t = _wide(x)
    p = hl.clamp(x, _d(0), _d(1))
    lower = p < _d(0.5)
    c = hl.select(lower, p * 2.0, (_d(1) - p) * 2.0)
    a = _d(1) - c
    z = _inverse_erfc_abs(a, c) * _d(math.sqrt(2))
    value = _pick((x < _d(0)) | (x > _d(1)), _d(_NAN), x == _d(0), _d(-_INF), x == _d(1), _d(_INF),
                  hl.select(lower, -z, z))
    return hl.cast(t, hl.select(is_nan_bits(x), x, value))


# ------------------------------------------------------------------ Hurwitz zeta and polygamma
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330,
              854513 / 138, -236364091 / 2730)  # B_2, B_4, ..., B_24


def _zeta_positive(s: hl.Expr, q: hl.Expr) -> hl.Expr:
    """Hurwitz zeta for s > 1, q > 0: nine terms summed, then Euler-Maclaurin with 12 Bernoulli corrections."""
    total = _d(0)
    for k in range(9):
        total = total + hl.pow(q + _d(k), -s)
    a = q + 9.0
    tail = hl.pow(a, -s)
    total = total + tail * a / (s - 1.0) + tail * 0.5
    rising, power = _d(1), tail / a  # s (s+1) ... (s+2j-2), a^(-s-2j+1)
    for j, b in enumerate(_BERNOULLI, start=1):
        rising = rising * s if j == 1 else rising * (s + _d(2 * j - 3)) * (s + _d(2 * j - 2))
        total = total + rising * power * _d(b / math.factorial(2 * j))
        power = power / (a * a)
    return total


def zeta(x: object, q: object) -> hl.Expr:
    """Hurwitz zeta(x, q): inf at x = 1 and at q = 0, -1, ...; NaN for x < 1, and for q < 0 with x not an integer
    (torch's values)."""
    s, q = _unify(_float(x), _float(q))
    return hl.cast(s.type(), _zeta64(hl.cast(F64, s), hl.cast(F64, q)))


def _zeta64(s: hl.Expr, q: hl.Expr) -> hl.Expr:
    """zeta(s, q) in float64; negative q summed exactly: zeta(s, q) = (-1)^s (zeta(s, r) - zeta(s, r + m)) +
    zeta(s, p), m = ceil(-q), p = q + m, r = 1 - p."""
    ss = hl.select(s > _d(1), s, _d(2))  # the value where s <= 1 is chosen below
    qq = hl.max(q, _d(1e-300))
    positive = _zeta_positive(ss, qq)
    m = hl.ceil(-hl.max(q, _d(-1e15)))
    p = hl.clamp(q + m, _d(1e-300), _d(1))  # q + m and 1 - p = -(q + m - 1): exact near the poles
    r = hl.clamp(-(q + (m - _d(1))), _d(1e-300), _d(1))
    odd = hl.select(hl.floor(ss * 0.5) * 2.0 == ss, _d(1), _d(-1))
    negative = odd * (_zeta_positive(ss, r) - _zeta_positive(ss, r + m)) + _zeta_positive(ss, p)
    integer_q = q == hl.floor(q)
    # torch's (Cephes') order of the tests: s = 1 before any NaN, then the poles of q (zeta(nan, 0) = inf)
    value = _pick(s == _d(1), _d(_INF), s < _d(1), _d(_NAN), (q <= _d(0)) & integer_q, _d(_INF),
                  (q < _d(0)) & ((s != hl.floor(s)) | is_nan_bits(s)), _d(_NAN), is_nan_bits(s) | is_nan_bits(q), _d(_NAN),
                  q == _d(_INF), _d(_NAN), s == _d(_INF), hl.select(q < _d(1), _d(_INF), q == _d(1), _d(1), _d(_NAN)),
                  s > _d(1e10), hl.select(q == _d(1), _d(1),  # only the first term q^-s is left
                                          hl.exp(hl.clamp(-s * hl.log(hl.max(q, _d(1e-300))), _d(-800), _d(800)))),
                  q < _d(0), negative, positive)
    return value


def polygamma(n: int, x: object) -> hl.Expr:
    """psi^(n)(x) = (-1)^(n+1) n! zeta(n + 1, x) for a constant order n >= 2."""
    x, t = _wide(x)
    return hl.cast(t, _zeta64(_d(n + 1), x) * _d((-1.0) ** (n + 1) * math.factorial(n)))


# ------------------------------------------------------------------ regularized incomplete gamma functions
IGAMMA_STEPS = 128  # series terms and continued-fraction steps: converged for a up to ~200 near x = a


def _igamma_parts(a: hl.Expr, x: hl.Expr, steps: int, tol: float) -> tuple[hl.Expr, hl.Expr, hl.Expr]:
    """(P(a, x), Q(a, x), converged) for a, x > 0 in float64: the power series of P below x = a + 1, the continued
    fraction of Q (modified Lentz) above. Not converged (a large, x near a; the last step still changing the value
    by more than ``tol``, relative) gives NaN, never a truncated value."""
    from .special_math import lgamma

    xs = hl.min(x, a + 1.0)  # the series' argument, the fraction's below
    term, total = _d(1), _d(1)
    for k in range(1, steps):
        term = term * xs / (a + _d(k))
        total = total + term
    series_ok = term <= total * _d(tol)
    p_series = hl.exp(a * log(xs) - xs - lgamma(a + 1.0)) * total
    xc = hl.max(x, a + 1.0)
    tiny = _d(1e-300)
    b = xc + 1.0 - a
    c, d = _d(1) / tiny, _d(1) / b
    h, delta = d, _d(0)
    for i in range(1, steps):
        an = -_d(i) * (_d(i) - a)
        b = b + 2.0
        d = an * d + b
        d = _d(1) / hl.select(hl.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = hl.select(hl.abs(c) < tiny, tiny, c)
        delta = d * c
        h = h * delta
    fraction_ok = hl.abs(delta - 1.0) <= _d(tol)
    q_fraction = hl.exp(a * log(xc) - xc - lgamma(a)) * h
    below = x < a + 1.0
    p = hl.select(below, p_series, _d(1) - q_fraction)
    q = hl.select(below, _d(1) - p_series, q_fraction)
    return p, q, hl.select(below, series_ok, fraction_ok)


def igamma(a: object, x: object, upper: bool, steps: int = IGAMMA_STEPS) -> hl.Expr:
    """Regularized lower (P) or upper (Q) incomplete gamma, torch's values at the edges: NaN for a < 0 or x < 0,
    a = 0 counts as P = 1 for x > 0, x = 0 as P = 0, x = inf as P = 1, a = inf as P = 0 (NaN with x = inf)."""
    a, x = _unify(_float(a), _float(x))
    t = a.type()
    # bounds-opaque (_bounds_opaque): without it a 0-d pipeline's bounds inference expands the continued fraction's
    # guarded steps into a tree (2x per step: 128 never finish). Since the float64 constants became reinterpreted bits
    # (bf45a5b) ``tiny`` = f64(1e-300) happened to stop that; a float32-exact tiny (2**-100) brought it back
    a, x = _bounds_opaque(hl.cast(F64, a)), _bounds_opaque(hl.cast(F64, x))
    inf = _d(_INF)
    finite = (a > _d(0)) & (x > _d(0)) & (a < inf) & (x < inf)
    # converged: the last step changes the value by less than the result's type can hold. float64's rounding
    # leaves the continued fraction's steps ~3e-16 from 1, so a bound of 1e-15 failed near x = a + 1 for small a
    # (CUDA's 64 steps at a = 0.145, x = 1.33: 1.1e-15, NaN for 0.978; GPUTests' pointwise_gammainc)
    tol = 1e-10 if t.bits() < 64 else 4e-15
    p, q, ok = _igamma_parts(hl.select(finite, a, _d(1)), hl.select(finite, x, _d(1)), steps, tol)
    value = q if upper else p
    one, zero = (_d(0), _d(1)) if upper else (_d(1), _d(0))  # "P = 1", "P = 0" as this function's value
    return hl.cast(t, _pick(is_nan_bits(a) | is_nan_bits(x) | (a < _d(0)) | (x < _d(0)), _d(_NAN),
                            a == _d(0), hl.select(x > _d(0), one, _d(_NAN)),
                            (a == inf) & (x == inf), _d(_NAN), a == inf, zero, x == inf, one, x == _d(0), zero,
                            ok, value, _d(_NAN)))

"""torch.special's orthogonal polynomials of a per-element degree n, in float64: Chebyshev (closed forms, any n) and
Hermite, Laguerre, Legendre (their three-term recurrences, unrolled to ``MAX_DEGREE`` steps)."""
from __future__ import annotations

import math
from typing import Callable

import halide as hl

from .special_math import _float, _unify, f64, is_nan_bits

F64 = hl.Float(64)
# Recurrences are unrolled this far (a Halide expression cannot loop a per-element count); a higher degree gives
# NaN, never a truncated value. torch's own kernels loop n times.
MAX_DEGREE = 128


def _d(v: float) -> hl.Expr:
    return f64(v)  # exact on every target


def _args(x: object, n: object) -> tuple[hl.Expr, hl.Expr, hl.Expr, hl.Type]:
    """(x, n truncated to an integer, whether n is a usable degree, result type), x and n in float64. torch casts n to
    int64: NaN, ±inf and |n| >= 2^63 become INT64_MIN, a negative degree (value 0)."""
    x, n = _unify(_float(x), _float(n))
    t = x.type()
    x, n = hl.cast(F64, x), hl.cast(F64, n)
    valid = ~is_nan_bits(n) & (hl.abs(n) < _d(2.0 ** 63))
    k = hl.select(valid, hl.trunc(n), _d(-1))
    return x, k, valid, t


def _even(k: hl.Expr) -> hl.Expr:
    return hl.floor(k * 0.5) * 2.0 == k


def _parity(k: hl.Expr) -> hl.Expr:
    return hl.select(_even(k), _d(1), _d(-1))


def _chebyshev(kind: str, x: hl.Expr, k: hl.Expr) -> hl.Expr:
    """T, U, V, W of degree k >= 0 at x: cos/sin of multiples of acos x on [-1, 1], cosh/sinh of acosh |x| outside
    (with the parity relations for x < -1: T, U -> (-1)^k, V <-> W with (-1)^k)."""
    inside = hl.abs(x) <= _d(1)
    theta = hl.acos(hl.clamp(x, _d(-1), _d(1)))
    a = hl.max(hl.abs(x), _d(1))
    tt = hl.log(a + hl.sqrt(a * a - 1.0))  # acosh |x|
    h = k + 0.5
    if kind == "t":
        cin, cout = hl.cos(k * theta), hl.cosh(k * tt)
        ends = (_d(1), _parity(k))  # the values at x = 1 and x = -1
    elif kind == "u":
        cin = hl.sin((k + 1.0) * theta) / hl.sin(theta)
        cout = hl.sinh((k + 1.0) * tt) / hl.sinh(tt)
        ends = (k + 1.0, _parity(k) * (k + 1.0))
    else:
        v_in = hl.cos(h * theta) / hl.cos(theta * 0.5)
        w_in = hl.sin(h * theta) / hl.sin(theta * 0.5)
        v_out, w_out = hl.cosh(h * tt) / hl.cosh(tt * 0.5), hl.sinh(h * tt) / hl.sinh(tt * 0.5)
        cin = v_in if kind == "v" else w_in
        same, swapped = (v_out, w_out) if kind == "v" else (w_out, v_out)
        cout = hl.select(x < _d(0), _parity(k) * swapped, same)
        ends = (_d(1), _parity(k) * (k * 2.0 + 1.0)) if kind == "v" else (k * 2.0 + 1.0, _parity(k))
        return hl.select(x == _d(1), ends[0], x == _d(-1), ends[1], inside, cin, cout)
    cout = hl.select(x < _d(0), _parity(k) * cout, cout)
    return hl.select(x == _d(1), ends[0], x == _d(-1), ends[1], inside, cin, cout)


def _at_infinity(kind: str, x: hl.Expr, k: hl.Expr) -> hl.Expr:
    """torch's recurrence at x = ±inf: degree 1 is ±inf, degree 2 is +inf, then inf - inf = NaN."""
    first = x
    return hl.select(k == _d(1), first, k == _d(2), _d(math.inf), _d(math.nan))


def chebyshev(kind: str, x: object, n: object, shifted: bool = False) -> hl.Expr:
    """torch.special.(shifted_)chebyshev_polynomial_{t,u,v,w}(x, n): 0 for n < 0; NaN x gives NaN (1 at n = 0)."""
    x, k, valid, t = _args(x, n)
    if shifted:
        x = x * 2.0 - 1.0
    value = _chebyshev(kind, x, hl.max(k, _d(0)))
    value = hl.select(k < _d(0), _d(0), k == _d(0), _d(1), is_nan_bits(x), x,
                      hl.abs(x) == _d(math.inf), _at_infinity(kind, x, k), value)
    return hl.cast(t, value)


def _recurrence(first: Callable[[hl.Expr], hl.Expr],
                step: Callable[[hl.Expr, hl.Expr, hl.Expr, float], hl.Expr]) -> Callable[[object, object], hl.Expr]:
    """p_0 = 1, p_1 = first(x), p_{j+1} = step(x, p_j, p_{j-1}, j), stopped at degree n (<= MAX_DEGREE)."""

    def poly(x: object, n: object) -> hl.Expr:
        x, k, valid, t = _args(x, n)
        prev, cur = _d(1), first(x)
        for j in range(1, MAX_DEGREE):
            nxt = step(x, cur, prev, float(j))
            go = _d(j) < k
            prev, cur = hl.select(go, cur, prev), hl.select(go, nxt, cur)
        value = hl.select(k < _d(0), _d(0), k == _d(0), _d(1), k > _d(MAX_DEGREE), _d(math.nan), cur)
        return hl.cast(t, value)

    return poly


hermite_h = _recurrence(lambda x: x * 2.0, lambda x, p, q, j: (x * p - q * _d(j)) * 2.0)
hermite_he = _recurrence(lambda x: x, lambda x, p, q, j: x * p - q * _d(j))
laguerre_l = _recurrence(lambda x: _d(1) - x, lambda x, p, q, j: ((_d(2 * j + 1) - x) * p - q * _d(j)) / _d(j + 1))
legendre_p = _recurrence(lambda x: x, lambda x, p, q, j: (x * p * _d(2 * j + 1) - q * _d(j)) / _d(j + 1))

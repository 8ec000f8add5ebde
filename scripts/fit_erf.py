"""Fit the polynomials of ``halide_helpers.cuda_erf`` and report its float32 error against math.erf.

erf(t) = t * P(t^2) for t < 1 (P minimax in relative error), 1 - Q(t)^-16 above (Q fitted for absolute error in
erf on [0.9, 4]; erf rounds to 1 past 3.92). Iteratively reweighted least squares on Chebyshev nodes."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

erf, erfc = np.vectorize(math.erf), np.vectorize(math.erfc)


def _cheb(a: float, b: float, n: int = 4000) -> np.ndarray:
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (np.arange(n) + 0.5) / n)


def _irls(basis: np.ndarray, target: np.ndarray, iters: int = 40) -> tuple[np.ndarray, float]:
    w = np.ones(len(target))
    for _ in range(iters):
        c, *_ = np.linalg.lstsq(basis * w[:, None], target * w, rcond=None)
        err = np.abs(basis @ c - target)
        w = w * (1 + 4 * err / err.max())
    return c, float(err.max())


def fit() -> tuple[list[float], list[float]]:
    u = _cheb(0.0, 1.0)
    t = np.sqrt(u)
    ratio = erf(t) / t
    small, _ = _irls(np.vander(u, 6, increasing=True) / ratio[:, None], np.ones_like(u))
    t = _cheb(0.9, 4.0)
    q = erfc(t) ** (-1 / 16)
    gain = 16 * erfc(t)  # d erf = gain * dQ / Q
    large, _ = _irls(np.vander(t, 7, increasing=True) / q[:, None] * gain[:, None], gain)
    return [float(np.float32(c)) for c in small], [float(np.float32(c)) for c in large]


def report(span: float, exact: Any, candidates: dict[str, Any]) -> None:
    """Each candidate's float32 error (max ulp and absolute) against ``exact`` (float64), computed by Halide on the
    host over [-span, span] and tiny magnitudes."""
    import halide as hl

    xs = np.concatenate([np.linspace(-span, span, 1_000_001, dtype=np.float32),
                         np.logspace(-30, 0, 10_000, dtype=np.float32)])
    ref = exact(xs.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    x = hl.Var("x")
    buf = hl.Buffer(xs)
    for name, fn in candidates.items():
        f = hl.Func(name.replace(" ", "_"))
        f[x] = fn(buf[x])
        got = np.asarray(f.realize([xs.size], hl.Target("host-strict_float")))
        print(f"{name}: max {np.max(np.abs(got - ref) / ulp):.2f} ulp, max abs {np.max(np.abs(got - ref)):.2e}")


def main() -> None:
    small, large = fit()
    print("SMALL =", small)
    print("LARGE =", large)
    import halide as hl

    from halide_xpu import halide_helpers as hx

    report(6.0, erf, {"halide_xpu cuda_erf": hx.erf_poly, "Halide erf": hl.erf})


if __name__ == "__main__":
    main()

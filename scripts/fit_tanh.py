"""Fit the polynomial of ``halide_helpers.tanh_poly`` and report its float32 error against math.tanh.

tanh(t) = t + t^3 P(t^2) for t < 0.6 (P fitted for relative error in tanh), 1 - 2 / (exp(2t) + 1) above.
Iteratively reweighted least squares on Chebyshev nodes (``fit_erf.py``'s)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from fit_erf import _cheb, _irls, report  # noqa: E402

tanh = np.vectorize(math.tanh)
SMALL_BELOW = 0.6


def fit() -> list[float]:
    t = _cheb(1e-4, SMALL_BELOW)
    u, th = t * t, tanh(t)
    weight = t ** 3 / th  # relative error in tanh per unit error in P
    coeffs, _ = _irls(np.vander(u, 4, increasing=True) * weight[:, None], (th - t) / th)
    return [float(np.float32(c)) for c in coeffs]


def main() -> None:
    coeffs = fit()
    print("TANH_SMALL =", tuple(coeffs))
    import halide as hl

    from halide_xpu import halide_helpers as hx

    report(12.0, tanh, {"halide_xpu tanh_poly": lambda v: hx.tanh_poly(v, hl.exp), "Halide tanh": hl.tanh})


if __name__ == "__main__":
    main()

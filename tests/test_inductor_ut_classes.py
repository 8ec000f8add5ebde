"""Regressions for failure classes found by running PyTorch's own Inductor tests on halide-xpu (issue 17)."""
from __future__ import annotations

import pytest
import torch

from conftest import compile_and_check

aten = torch.ops.aten
PADDINGS = [[0, 0, 0, 0], [1, 1, 1, 1], [1, 2, 3, 4], [0, -1, 2, 2], [-1, 0, 2, 2], [2, 2, 0, -1], [2, 2, -1, 0]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_reflection_pad2d_backward_masked_index_checks(target: str, dtype: torch.dtype) -> None:
    """Inductor's bounds check of an index computed inside a masked load holds only where the mask does (test_torchinductor's
    test_reflection_pad2d_backward: the host target raised 'index 15 is not in [0, 10)' for masked-off points)."""
    for padding in PADDINGS:  # no reset between: recompiles as in the UT, where the failing kernel came from
        x = torch.randint(0, 999, size=(1, 1, 8, 8)).to(dtype)
        grad = torch.randn_like(aten.reflection_pad2d(x, padding))
        tol = {"atol": 1e-2, "rtol": 1e-2} if dtype == torch.float16 else {}
        compile_and_check(lambda g, x: aten.reflection_pad2d_backward(g, x, padding), grad, x, **tol)


def test_division_by_signed_zero_in_one_kernel(target: str) -> None:
    """x / 0.0 and x / -0.0 in one kernel (test_torchinductor's test_div_by_zero): Halide's CSE merged the FloatImm
    constants -0.0 and 0.0, so on GPU-style targets both came out x / 0.0 (opposite infinities)."""

    def fn(x, runtime_zero, runtime_neg_zero):
        zero = torch.zeros_like(x)
        return (x / 0.0, x / -0.0, zero / 0.0, x / zero, x / -zero, zero / zero, x / runtime_zero,
                x / runtime_neg_zero, runtime_zero / runtime_neg_zero, torch.where(x > 0, 0.0, -0.0))

    zero = torch.zeros(10)
    compile_and_check(fn, torch.randn(10), zero, -zero)

"""Scans (cumsum, cumprod, logcumsumexp, cummax/cummin) as our kernels on every target, against eager."""
from __future__ import annotations

import pytest
import torch

import halide_xpu
from conftest import compile_and_check, eager_in_float64


@pytest.fixture(autouse=True)
def _scans_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(halide_xpu.config, "scan_kernels", "all")  # CPU devices too (default: GPU devices only)


def _check(fn, *args, **kwargs) -> str:
    code = compile_and_check(fn, *args, **kwargs)
    assert "ScheduleSpec(family='scan'" in code, "no scan kernel of ours"
    return code


def test_cumsum_rows_and_columns(target: str) -> None:
    x = torch.randn(37, 33)
    _check(lambda x: torch.cumsum(x, 1) * 2 + 1, x, rtol=1e-5, atol=1e-5)
    _check(lambda x: torch.cumsum(x, 0), x, rtol=1e-5, atol=1e-5)  # the scanned dim is the outer one


def test_low_precision_scans_accumulate_in_fp32(target: str) -> None:
    """fp16/bf16 scans run in fp32 and round once per element, as Triton's do (GPUTests' ``split_cumsum_low_prec``
    and ``logcumsumexp`` compare with a float reference; ATen's fp16 scan drifted 1.3e-3 from it)."""
    x = torch.rand(6, 700) + 0.5
    for dtype in (torch.float16, torch.bfloat16):
        h = (x / 1.7).to(dtype)
        _check(torch.cumprod, h, -1, reference=eager_in_float64(lambda t, d: torch.cumprod(t, d)))
        _check(lambda t: torch.cumsum(t, 1), h, reference=eager_in_float64(lambda t: torch.cumsum(t, 1)))
        _check(lambda t: t.logcumsumexp(1), h, reference=eager_in_float64(lambda t: t.logcumsumexp(1)))


def test_logcumsumexp_special_values(target: str) -> None:
    """-inf entries (the combine's mask path), +inf and NaN propagate as in eager."""
    x = torch.rand(20, 30)
    x[3, :5] = float("-inf")
    x[4, 7] = float("inf")
    x[5, 9] = float("nan")
    _check(lambda x: (x.logcumsumexp(0), x.logcumsumexp(1)), x, rtol=1e-5, atol=1e-5)


def test_cummax_cummin_ties(target: str) -> None:
    """A tuple scan (value, index): ties pick the index eager picks."""
    x = torch.randint(0, 4, (6, 40)).float()
    _check(lambda x: (*torch.cummax(x, 1), *torch.cummin(x, 1)), x)


def test_integer_and_bool_cumsum(target: str) -> None:
    """int32 and bool scans produce int64, as eager does."""
    x = torch.randint(-2**30, 2**30, (5, 17), dtype=torch.int32)
    _check(lambda x: (torch.cumsum(x, 1), torch.cumsum(x > 0, 1)), x)


def test_cumsum_dynamic_length(target: str) -> None:
    for n in (19, 41):
        _check(lambda x: torch.cumsum(x, 1), torch.randn(4, n), dynamic=True, rtol=1e-5, atol=1e-5)


def test_single_long_row(target: str) -> None:
    """A scan of one row: on GPUs Inductor splits it across programs, which we give to Triton (logged)."""
    x = torch.rand(10, 3, 35)
    if target == "cuda":
        compile_and_check(lambda x: torch.cumsum(x.view(-1), 0), x, rtol=1e-4, atol=1e-4, allow_fallback=True)
    else:
        _check(lambda x: torch.cumsum(x.view(-1), 0), x, rtol=1e-4, atol=1e-4)

"""Scans (cumsum, cumprod, logcumsumexp, cummax/cummin) as our kernels on every target, against eager."""
from __future__ import annotations

import pytest
import torch

import halide_xpu
from conftest import compile_and_check, eager_in_float64


@pytest.fixture(autouse=True)
def _scans_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(halide_xpu.config, "scan_kernels", "all")  # CPU devices too (default: GPU devices only)


def _rows(target: str, n: int) -> int:
    """Rows for a test of our scan kernel: GPUs give scans of fewer rows to Triton (scan.GPU_MIN_ROWS)."""
    from halide_xpu.scan import GPU_MIN_ROWS

    return GPU_MIN_ROWS if target == "cuda" else n


def _check(fn, *args, **kwargs) -> str:
    code = compile_and_check(fn, *args, **kwargs)
    assert "ScheduleSpec(family='scan'" in code, "no scan kernel of ours"
    return code


def test_cumsum_rows_and_columns(target: str) -> None:
    x = torch.randn(_rows(target, 37), 33)
    _check(lambda x: torch.cumsum(x, 1) * 2 + 1, x, rtol=1e-5, atol=1e-5)
    _check(lambda x: torch.cumsum(x.t(), 0), x, rtol=1e-5, atol=1e-5)  # the scanned dim is the outer one


def test_low_precision_scans_accumulate_in_fp32(target: str) -> None:
    """fp16/bf16 scans run in fp32 and round once per element, as Triton's do (GPUTests' ``split_cumsum_low_prec``
    and ``logcumsumexp`` compare with a float reference; ATen's fp16 scan drifted 1.3e-3 from it)."""
    x = torch.rand(_rows(target, 6), 700) + 0.5
    for dtype in (torch.float16, torch.bfloat16):
        h = (x / 1.7).to(dtype)
        _check(torch.cumprod, h, -1, reference=eager_in_float64(lambda t, d: torch.cumprod(t, d)))
        _check(lambda t: torch.cumsum(t, 1), h, reference=eager_in_float64(lambda t: torch.cumsum(t, 1)))
        _check(lambda t: t.logcumsumexp(1), h, reference=eager_in_float64(lambda t: t.logcumsumexp(1)))


def test_logcumsumexp_special_values(target: str) -> None:
    """-inf entries (the combine's mask path), +inf and NaN propagate as in eager."""
    x = torch.rand(_rows(target, 20), 30)
    x[3, :5] = float("-inf")
    x[4, 7] = float("inf")
    x[5, 9] = float("nan")
    _check(lambda x: (x.t().logcumsumexp(0), x.logcumsumexp(1)), x, rtol=1e-5, atol=1e-5)


def test_cummax_cummin_ties(target: str) -> None:
    """A tuple scan (value, index): ties pick the index eager picks."""
    x = torch.randint(0, 4, (_rows(target, 6), 40)).float()
    _check(lambda x: (*torch.cummax(x, 1), *torch.cummin(x, 1)), x)


def test_integer_and_bool_cumsum(target: str) -> None:
    """int32 and bool scans produce int64, as eager does."""
    x = torch.randint(-2**30, 2**30, (_rows(target, 5), 17), dtype=torch.int32)
    _check(lambda x: (torch.cumsum(x, 1), torch.cumsum(x > 0, 1)), x)


def test_cumsum_dynamic_length(target: str) -> None:
    for n in (19, 41):
        _check(lambda x: torch.cumsum(x, 1), torch.randn(_rows(target, 4), n), dynamic=True, rtol=1e-5, atol=1e-5)


def test_few_rows(target: str) -> None:
    """One row (on GPUs Inductor splits it across programs) and 8 rows of 512 (HF Llama's position_ids): GPUs give
    them to Triton (logged), whose scans are parallel within a row; CPU devices run ours."""
    for x in (torch.rand(10, 3, 35).view(-1), torch.rand(8, 512)):
        if target == "cuda":  # the graph's one kernel is Triton's: checked here, not by compile_and_check
            halide_xpu.stats.reset()
            x = x.cuda()
            torch.testing.assert_close(torch.compile(lambda x: torch.cumsum(x, -1))(x), torch.cumsum(x, -1),
                                       rtol=1e-4, atol=1e-4)
            assert halide_xpu.stats.fallbacks, "a few-row scan ran as our kernel on the GPU"
            torch._dynamo.reset()
        else:
            _check(lambda x: torch.cumsum(x, -1), x, rtol=1e-4, atol=1e-4)


def test_masked_cumsum_backward(target: str) -> None:
    """The scan's result leaves the kernel's scan in the op's own type (float64 running values on CPU tensors met a
    float32 reduction: Halide refused the kernel; OpInfo ``masked.cumsum`` backward)."""
    if target == "cuda":
        pytest.skip("one row: CUDA gives it to Triton")
    x = torch.randn(37)  # one row: the scan and the sum over it are one kernel
    mask = torch.rand(x.shape) > 0.3
    _check(lambda x, m, g: (torch.cumsum(torch.where(m, x, 0), 0) * g).sum(), x, mask, torch.randn(x.shape),
           rtol=1e-4, atol=1e-4)


def test_logcumsumexp_backward_at_large_values(target: str) -> None:
    """On CPU tensors eager scans float32 in float64 (``at::acc_type``); a float32 running value at inputs of 1e4 put
    logcumsumexp's gradient 3.4e-4 off eager (OpInfo sample on opencl). GPUs scan float32 in float32, as eager does."""
    from conftest import on_target

    if target == "cuda":
        pytest.skip("CUDA scans float32 in float32, as eager CUDA does (and gives 25 rows to Triton)")
    x = on_target(torch.full((5, 5, 5), 1e4) + torch.randn(5, 5, 5))
    grads = []
    for fn in (lambda t: t.logcumsumexp(0), torch.compile(lambda t: t.logcumsumexp(0), fullgraph=True)):
        leaf = x.detach().clone().requires_grad_(True)
        (fn(leaf) * torch.linspace(-1, 1, 125, device=x.device).view(5, 5, 5)).sum().backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1], grads[0])
    assert halide_xpu.stats.counters["kernels_generated"] > 0

"""Row reductions at the widths models and OpInfo give (1, odd, one past a warp or a 64-element word piece, longer
than a warp's registers, vocabulary-wide), forward and backward, against float64 eager: every schedule form
(warp rows, work-group rows, bf16 words) has a tail of its own. On CUDA the whole sweep runs; on the CPU targets a
few widths (the GPU schedules through the OpenCL CPU device)."""
from __future__ import annotations

import os
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import halide_xpu
from conftest import KERNEL_CALL, compile_and_check, on_target

CUDA_WIDTHS = [1, 2, 3, 17, 31, 32, 33, 34, 63, 64, 65, 70, 96, 100, 127, 129, 130, 255, 257, 384, 500, 768, 1000, 1023,
               1025, 2047, 2048, 2049, 3000, 5000]
CPU_WIDTHS = [33, 70]
# HALIDE_XPU_TEST_ALL_WIDTHS=1: the whole sweep on the CPU targets too (minutes; CI runs CPU_WIDTHS)
ALL_WIDTHS = os.environ.get("HALIDE_XPU_TEST_ALL_WIDTHS") == "1"
# the CUDA-only widths are listed (and skipped on the CPU targets) only where a CUDA device exists
WIDTHS = sorted(set(CUDA_WIDTHS) | set(CPU_WIDTHS)) if torch.cuda.is_available() or ALL_WIDTHS else CPU_WIDTHS
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# garbage (a dropped piece, a wrong lane) is off by O(1); rounding and summation order stay well inside
TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.bfloat16: (3e-2, 3e-2), torch.float16: (4e-3, 4e-3)}


def _widths(target: str) -> list[int]:
    return CUDA_WIDTHS if target == "cuda" or ALL_WIDTHS else CPU_WIDTHS


def _rows_forward(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The row reductions of a transformer's forward graph, each its own output."""
    xf = x.float()
    rms = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w
    var, mean = torch.var_mean(xf, -1)
    return (torch.softmax(x, -1), torch.log_softmax(x, -1), F.layer_norm(x, x.shape[-1:], w), rms,
            x.sum(-1), x.amax(-1), x.argmax(-1), var, mean)


def _reference(fn: Any, *args: torch.Tensor) -> Any:
    """``fn`` in float64, each output cast to the dtype eager gives it."""
    dtypes = [o.dtype for o in fn(*args)]
    out = fn(*[a.double() if a.is_floating_point() else a for a in args])
    return tuple(o.to(d) for o, d in zip(out, dtypes))


def _inputs(rows: int, n: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(n)
    # low precision gives ties at a row's max: argmax must return the first, as eager does
    x = (torch.randn(rows, n) * 3).to(dtype)
    return x, (1 + torch.randn(n) / 4).to(dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("width", WIDTHS)
def test_row_reductions_forward(target: str, width: int, dtype: str) -> None:
    if width not in _widths(target):
        pytest.skip("this width runs on CUDA only (CPU targets: CPU_WIDTHS)")
    dt = DTYPES[dtype]
    x, w = _inputs(33, width, dt)
    atol, rtol = TOLERANCE[dt]
    compile_and_check(_rows_forward, x, w, atol=atol, rtol=rtol,
                      reference=lambda *a: _reference(_rows_forward, *a))


class _Head(torch.nn.Module):
    """LayerNorm, then a softmax over the row and a label-smoothed cross entropy over it as logits: the backward
    graph's row reductions (LayerNorm's two row sums, softmax's and the loss's) at the same width."""

    def __init__(self, n: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(n, dtype=dtype)
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, n, dtype=dtype))

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        h = self.norm(x) * self.scale
        p = torch.softmax(h * 0.5, -1)
        loss = F.cross_entropy(h.float(), target, label_smoothing=0.1)
        return loss + (p.float() * p.float()).sum()


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("width", WIDTHS)
def test_row_reductions_backward(target: str, width: int, dtype: str) -> None:
    if width not in _widths(target):
        pytest.skip("this width runs on CUDA only (CPU targets: CPU_WIDTHS)")
    dt = DTYPES[dtype]
    x, _ = _inputs(24, width, dt)
    labels = torch.randint(0, width, (24,))
    torch.manual_seed(1)
    ref = _Head(width, torch.float64)
    ours, eager = _Head(width, dt), _Head(width, dt)
    for m in (ours, eager):
        m.load_state_dict({k: v.to(dt) for k, v in ref.state_dict().items()})
    for m in (ref, ours, eager):
        for t in m.parameters():
            t.data = on_target(t.data)
    x, labels = on_target((x, labels))
    xr, xe = x.double().requires_grad_(), x.clone().requires_grad_()
    ref_loss = ref(xr, labels)
    ref_loss.backward()
    eager(xe, labels).backward()
    xo = x.clone().requires_grad_()
    halide_xpu.stats.reset()
    torch._dynamo.reset()
    from torch._inductor.utils import run_and_get_code

    loss, codes = run_and_get_code(lambda: torch.compile(ours)(xo, labels))
    (_, bw_codes) = run_and_get_code(lambda: loss.backward())
    assert any(KERNEL_CALL.search(c) for c in codes + bw_codes), "halide_xpu generated no kernel"
    assert not halide_xpu.stats.fallbacks, halide_xpu.stats.fallbacks
    atol, rtol = TOLERANCE[dt]
    scale = max(1.0, float(ref_loss.abs()))
    torch.testing.assert_close(loss.double(), ref_loss.detach().double(), atol=atol * scale, rtol=rtol)
    named = [("x", xo, xe, xr)] + [(n, p, dict(eager.named_parameters())[n], dict(ref.named_parameters())[n])
                                   for n, p in ours.named_parameters()]
    for name, got, low, want in named:
        assert got.grad is not None and torch.isfinite(got.grad).all(), name
        # relative to the gradient's own scale; in low precision no worse than eager in the same dtype is (LayerNorm
        # over 2 elements: a row of two near-equal bf16 values has a gradient off by O(1) in eager bf16 too)
        err = float((got.grad.double() - want.grad).abs().max()) / max(1e-3, float(want.grad.abs().max()))
        eager_err = float((low.grad.double() - want.grad).abs().max()) / max(1e-3, float(want.grad.abs().max()))
        assert err <= atol or (dt != torch.float32 and err <= 2 * eager_err + atol), (name, err, eager_err)


def _columns(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Reductions over the rows (a bias or norm weight's gradient, batch statistics): the kept dim is contiguous."""
    xf = x.float()
    var, mean = torch.var_mean(xf, 0)
    return x.sum(0), x.amax(0), x.argmin(0), var, mean, (xf * xf).sum(0).to(x.dtype)


def _scans(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Prefix scans along the row (position ids, cumulative log-probabilities)."""
    values, indices = torch.cummax(x, -1)
    return torch.cumsum(x.float(), -1), torch.logcumsumexp(x.float() / 4, -1), values, indices


# (rows, width) of the column sweep: fewer rows than a warp, odd, more rows than a work-group
COLUMN_ROWS = [1, 3, 33, 257, 4097]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("rows", COLUMN_ROWS)
@pytest.mark.parametrize("width", WIDTHS)
def test_column_reductions(target: str, width: int, rows: int, dtype: str) -> None:
    if width not in _widths(target) or (target != "cuda" and not ALL_WIDTHS and rows not in (3, 257)):
        pytest.skip("this shape runs on CUDA only (CPU targets: CPU_WIDTHS, 3 and 257 rows)")
    dt = DTYPES[dtype]
    x, _ = _inputs(rows, width, dt)
    atol, rtol = TOLERANCE[dt]
    compile_and_check(_columns, x, atol=atol * max(1.0, rows ** 0.5), rtol=rtol,
                      reference=lambda *a: _reference(_columns, *a))


@pytest.mark.parametrize("width", WIDTHS)
def test_row_scans(target: str, width: int) -> None:
    if width not in _widths(target):
        pytest.skip("this width runs on CUDA only (CPU targets: CPU_WIDTHS)")
    x, _ = _inputs(7, width, torch.float32)
    compile_and_check(_scans, x, atol=1e-4 * max(1.0, width ** 0.5), rtol=1e-4,
                      reference=lambda *a: _reference(_scans, *a))

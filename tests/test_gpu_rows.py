"""The rows form of GPU pointwise kernels (pointwise._gpu_rows: a work-item takes adjacent channels in several rows,
so what it computes from its channels alone is computed once): numbers against eager on the OpenCL device over
shapes and dtypes, the forms it must leave alone, and the CUDA twin's PTX (one square root per channel)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

import conftest
import halide_xpu
from conftest import compile_and_check
from test_gpu_schedules import _cuda_twins


@pytest.fixture
def opencl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """opencl: the GPU schedules on the OpenCL CPU device (2 compute units: rows of 4 for a few thousand points)."""
    conftest.use_opencl_device(monkeypatch, tmp_path)
    return tmp_path


def _rows_used(cache: Path) -> int:
    """The rows per work-item of the rows-form kernels built into ``cache`` (0: none took it)."""
    found = [int(m.group(1)) for p in cache.rglob("schedule.txt")
             for m in re.finditer(r"_ro, \w+_ri, (\d+), hl\.TailStrategy", p.read_text())]
    return max(found, default=0)


def _bn_apply(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
              skip: torch.Tensor) -> torch.Tensor:
    """A training batch norm's apply over channels-last rows, a residual and a relu (ResNet's block end)."""
    y = (x.float() - mean) * torch.rsqrt(var / x.shape[0] + 1e-5) * w.float() + b.float()
    return torch.relu(y.to(x.dtype) + skip)


def _inputs(rows: int, channels: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(rows * 131 + channels)
    x = (torch.randn(rows, channels, generator=g) * 3 + 1).to(dtype)
    mean, var = torch.randn(channels, generator=g), torch.rand(channels, generator=g) * rows + 0.5
    w, b = torch.randn(channels, generator=g).to(dtype), torch.randn(channels, generator=g).to(dtype)
    return x, mean, var, w, b, torch.randn(rows, channels, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows,channels,expect", [(1024, 64, 4), (1000, 24, 4), (258, 64, 2), (1022, 12, 2),
                                                  (999, 64, 0), (513, 13, 0)])
def test_batch_norm_apply_rows(opencl: Path, dtype: torch.dtype, rows: int, channels: int, expect: int) -> None:
    """Rows per work-item divide the row count (4, else 2, else the flat form); channels that no vector divides
    take one lane (13); the rows form's numbers are eager's in every dtype."""
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}[dtype]
    compile_and_check(_bn_apply, *_inputs(rows, channels, dtype), rtol=tol, atol=tol)
    assert _rows_used(opencl) == expect


def test_batch_norm_apply_rows_in_words(opencl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bf16 as 32-bit words of two channels (``pairs`` forced on the OpenCL device) in the rows form."""
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"pairs": 2})
    compile_and_check(_bn_apply, *_inputs(1024, 64, torch.bfloat16), rtol=2e-2, atol=2e-2)
    assert _rows_used(opencl) == 4
    assert any("pairs=(" in p.read_text() and "pairs=()" not in p.read_text() for p in opencl.rglob("meta.repr"))


def _bn_backward(x: torch.Tensor, g: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, w: torch.Tensor,
                 s1: torch.Tensor, s2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two outputs of one domain, each from per-channel factors (a batch-norm backward's input gradient)."""
    rstd = torch.rsqrt(var + 1e-5)
    n = x.shape[0]
    dx = (g - s1 / n - (x - mean) * rstd * rstd * s2 / n) * rstd * w
    return dx, torch.where(x > 0, dx, torch.zeros_like(dx)) * 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_two_outputs_share_the_rows_form(opencl: Path, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(3)
    rows, channels = 512, 48
    x, g = (torch.randn(rows, channels, generator=gen).to(dtype) for _ in range(2))
    per_channel = [torch.randn(channels, generator=gen) for _ in range(4)]
    per_channel[1] = per_channel[1].abs() + 0.1
    tol = 1e-5 if dtype == torch.float32 else 3e-2
    compile_and_check(_bn_backward, x, g, *per_channel[:2], per_channel[2], *[p * rows for p in per_channel[2:]],
                      rtol=tol, atol=tol)
    assert _rows_used(opencl) == 4


def test_rows_need_a_per_channel_value(opencl: Path) -> None:
    """A residual add or a relu mask reads nothing per channel: the flat form stays."""
    x, y = torch.randn(1024, 64), torch.randn(1024, 64)
    compile_and_check(lambda a, b: torch.relu(a + b), x, y)
    assert _rows_used(opencl) == 0


def test_rows_form_computes_channel_values_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """CUDA twin (H100 caps) of a bf16 batch-norm apply over ResNet-18's 256 x 6272 channels-last rows: each
    work-item stores 4 rows but computes its channels' square roots once (LLVM merges the unrolled rows' copies of
    the per-channel expressions; were one per element), and with fast math each is one ``rsqrt.approx.f32``."""
    import halide_xpu.kernel as kernel_mod
    from halide_xpu.target import ptx as ptx_mod

    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(kernel_mod.HalideXpuKernel, "fast_math", lambda self: True)
    found: list[str] = []

    def lower(p: Any, a: list, t: Any) -> None:
        import halide as hl

        p.compile_to({hl.OutputFileType.object: str(tmp_path / "twin.o")}, a, "k", t)
        found.append(ptx_mod.extract((tmp_path / "twin.o").read_bytes()))

    twins = _cuda_twins(_bn_apply, _inputs(6272, 256, torch.bfloat16), monkeypatch, tmp_path, lower=lower)
    assert len(twins) == 1 and any("_ri, 4," in line for line in twins[0][2]), twins[0][2]
    module = found[0]
    stores, roots = len(re.findall(r"\bst\.global", module)), len(re.findall(r"\bsqrt\.rn\.f32", module))
    assert stores == 4 and 0 < roots <= 8, (stores, roots)  # 4 rows; 4 lanes of words (8 channels) at most
    assert ptx_mod.rewrite(module)[1]["rsqrt"] == roots  # each root and its reciprocal: one rsqrt.approx.f32


def _rotary(q: torch.Tensor, k: torch.Tensor, inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """HF Llama's rotary embedding: ``cos``/``sin`` of position x frequency, broadcast over batch and heads."""
    pos = torch.arange(q.shape[2], device=q.device, dtype=torch.float32)
    freqs = pos[:, None] * inv_freq[None, :].float()
    emb = torch.cat([freqs, freqs], -1)
    cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, -1)
        return torch.cat([-x2, x1], -1)

    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def _hoisted(cache: Path) -> int:
    """How many Funcs the kernels built into ``cache`` compute once per work-item in registers."""
    return sum(len(re.findall(r"\.store_in\(hl\.MemoryType\.Register\)", p.read_text()))
               for p in cache.rglob("schedule.txt"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_transcendentals_once_per_work_item(opencl: Path, dtype: torch.dtype) -> None:
    """The rotary embedding's ``cos``/``sin`` depend on (position, frequency) alone: the rows step through batch and
    heads, the values computed once per work-item (each output a loop nest of its own); numbers against eager."""
    gen = torch.Generator().manual_seed(7)
    q, k = (torch.randn(2, 4, 64, 32, generator=gen).to(dtype) for _ in range(2))
    inv_freq = 1.0 / (10000 ** (torch.arange(0, 32, 2, dtype=torch.float32) / 32))
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    compile_and_check(_rotary, q, k, inv_freq, rtol=tol, atol=tol)
    assert _rows_used(opencl) >= 2
    assert _hoisted(opencl) >= 2
    # one point of the innermost dim per row of a work-item (``trig_vector``: on the H200, Llama's rotary kernels
    # took 0.47-0.68x the time of 4-word work-items)
    hoisting = [t for t in (p.read_text() for p in opencl.rglob("schedule.txt")) if "MemoryType.Register" in t]
    assert hoisting and not [t for t in hoisting if re.search(r"\.split\(h0, \w+_cv, \w+_lanes,", t)], hoisting


def test_rotary_backward_transcendentals_once(opencl: Path) -> None:
    """The backward of the rotary embedding (the rotate-half concatenation's masked selects around ``sin``): the
    gradients against eager's, the ``sin`` values hoisted."""
    gen = torch.Generator().manual_seed(8)
    q0, k0, g1, g2 = (torch.randn(2, 4, 64, 32, generator=gen) for _ in range(4))
    inv_freq = 1.0 / (10000 ** (torch.arange(0, 32, 2, dtype=torch.float32) / 32))
    grads = []
    for fn in (_rotary, torch.compile(_rotary, fullgraph=True)):
        q, k = q0.clone().requires_grad_(True), k0.clone().requires_grad_(True)
        a, b = fn(q, k, inv_freq)
        ((a * g1).sum() + (b * g2).sum()).backward()
        grads.append((q.grad, k.grad))
    for want, got in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert _hoisted(opencl) >= 1

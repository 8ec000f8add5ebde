"""bf16 pointwise kernels over 32-bit words of two elements (schedule parameter ``pairs``, halide_xpu/pairs.py):
numbers against eager on every device target with the rewrite forced (``pairs=2``), the kernels that must stay
elementwise, and the CUDA twin's PTX (128-bit accesses with it, 16-bit ones without); row reductions' bf16 inputs
as words (``pair_rows``)."""
from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

import halide_xpu
from halide_xpu import compiler

from conftest import compile_and_check
from test_gpu_schedules import _cuda_twins
from test_gpu_warps import _assembly, _residual_norm_bf16, _rms_norm


def _bf16(*shapes: tuple[int, ...]) -> Callable[[], tuple[torch.Tensor, ...]]:
    return lambda: tuple(torch.randn(*s).bfloat16() for s in shapes)


def _inplace_scale(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x.mul_(0.5).add_(y)
    return x


# case -> (fn, inputs, whether the kernel takes words)
CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple], bool]] = {
    "gelu": (lambda x: F.gelu(x, approximate="tanh"), _bf16((64, 3072)), True),
    "silu_mul": (lambda x, y: F.silu(x) * y, _bf16((16, 1376), (16, 1376)), True),
    "two_outputs": (lambda x, y: (x * y, x - y), _bf16((1000,), (1000,)), True),
    "inplace": (_inplace_scale, _bf16((8, 250), (8, 250)), True),
    "odd": (lambda x: x * 2, _bf16((999,)), False),  # an odd extent: elements
    "bias": (lambda x, b: x + b, _bf16((16, 96), (96,)), True),  # a broadcast bf16 input: b[h0]
    "gather": (lambda w, i: F.embedding(i, w) * 2, lambda: (torch.randn(128, 256).bfloat16(), torch.randint(0, 128, (4, 64))), True),
    "strided_out": (lambda x: torch.cat([x * 2, x], dim=1), _bf16((40, 96)), True),  # outputs a row apart
    "transpose": (lambda x: x.t() * 2, _bf16((48, 80)), True),  # the input keeps its elements, the output words
    "odd_rows": (lambda x: x * 2 + 1, lambda: (torch.randn(64, 37).bfloat16()[:, :36],), True),  # input rows 37 apart: its elements
    "to_float": (lambda x: x.float() * 2, _bf16((512,)), False),  # a float32 output
}


def _words(target: str) -> list[bool]:
    """Per bf16 kernel built on ``target`` since the last clear: whether it takes words (the build for pointers off
    the vector alignment, ``KernelMeta.scalar_lanes``, never does: a slice of a row at 192 bytes on sycl)."""
    return ["hx.pair_words(" in (Path(lau.library).parent / "kernel.py").read_text()
            for lau in compiler._memory.values() if lau.meta.target == target and not lau.meta.scalar_lanes]


def _force_pairs(target: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The rewrite forced on a device target (the host computes bf16 natively: skipped), kernels built afresh."""
    if target == "host":
        pytest.skip("the host target computes bf16 natively (no bits to pair)")
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"pairs": 2})
    compiler._memory.clear()


@pytest.mark.parametrize("case", list(CASES))
def test_pairs_match_eager(target, case, monkeypatch, tmp_path):
    """Forced on every device target: eager's numbers (bit-exact where the math is exact in fp32; tanh may differ
    in its last bit), and the rewrite taken exactly by the kernels that qualify."""
    _force_pairs(target, monkeypatch, tmp_path)
    fn, make, words = CASES[case]
    tol = None if case == "gelu" else 0  # None: torch.testing's bf16 tolerances
    compile_and_check(fn, *make(), atol=tol, rtol=tol)
    assert _words(target) and all(w == words for w in _words(target)), _words(target)


def test_adamw_step_in_words(target, monkeypatch, tmp_path):
    """AdamW's foreach update of bf16 parameters (the kernel overwrites the parameter and both moments it reads):
    two steps match eager's, with the update kernels (a combo kernel's parts on GPU targets) on words."""
    _force_pairs(target, monkeypatch, tmp_path)
    device = "cuda" if target == "cuda" else "cpu"
    shapes = [(96, 64), (64,), (1000,)]

    def run(compiled: bool) -> list[torch.Tensor]:
        torch.manual_seed(0)
        ps = [torch.nn.Parameter(torch.randn(s, device=device).bfloat16()) for s in shapes]
        opt = torch.optim.AdamW(ps, lr=1e-2, eps=1e-3, foreach=True)
        step = torch.compile(opt.step) if compiled else opt.step
        for _ in range(2):
            for p in ps:
                p.grad = torch.randn(p.shape, device=device).bfloat16()
            step()
        return [p.detach() for p in ps]

    torch._dynamo.reset()
    with torch.no_grad():
        for a, e in zip(run(True), run(False)):
            torch.testing.assert_close(a, e, atol=0.02, rtol=0.02)
    # each parameter's three outputs (it and both moments) as words: three kernels, or one combo kernel of three parts
    stored = sum((Path(lau.library).parent / "kernel.py").read_text().count("hx.pair_words(")
                 for lau in compiler._memory.values() if lau.meta.target == target and not lau.meta.scalar_lanes)
    assert stored == 3 * len(shapes), stored


def _accesses(tmp: Path) -> tuple[Callable[[Any, list, Any], None], list[collections.Counter]]:
    found: list[collections.Counter] = []
    assemble = _assembly(tmp)

    def lower(p: Any, a: list, t: Any) -> None:
        assemble(p, a, t)
        ptx = (tmp / "twin.s").read_text(errors="replace").replace("\\t", " ")  # the PTX as an escaped string
        found.append(collections.Counter(re.findall(r"\b(?:ld\.global\.nc|st\.global)(?:\.v\d)?\.b\d+", ptx)))
    return lower, found


@pytest.mark.parametrize("pairs", [0, 1])
def test_cuda_twin_accesses(pairs, monkeypatch, tmp_path):
    """CUDA (``pairs`` 1, the default): a bf16 GELU loads and stores 4 words (8 elements) per instruction; without
    it, one 16-bit element per instruction (Halide 21's PTX vectors are 4 x 32-bit only)."""
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"pairs": pairs})
    lower, found = _accesses(tmp_path)
    twins = _cuda_twins(CASES["gelu"][0], CASES["gelu"][1](), monkeypatch, tmp_path, lower=lower)
    assert len(twins) == 1 and len(found) == 1
    kinds = set(found[0])
    if pairs:
        assert kinds == {"ld.global.nc.v4.b32", "st.global.v4.b32"}, found[0]
    else:
        assert kinds == {"ld.global.nc.b16", "st.global.b16"}, found[0]


def test_cuda_twin_gather_rows_in_words(monkeypatch, tmp_path):
    """An embedding gather of bf16 rows (GPT-2's position embeddings): 128-bit row loads and stores, the row id
    loaded once per vector (its int64 buffer no longer unrolls the lanes, ``Plan.unroll_lanes``)."""
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"pairs": 1})
    lower, found = _accesses(tmp_path)
    twins = _cuda_twins(CASES["gather"][0], CASES["gather"][1](), monkeypatch, tmp_path, lower=lower)
    assert len(twins) == 1 and len(found) == 1
    assert found[0]["ld.global.nc.v4.b32"] == 1 and found[0]["st.global.v4.b32"] == 1, found[0]
    assert not any(".b16" in k for k in found[0]), found[0]


def test_cuda_twin_tanh_without_branches(monkeypatch, tmp_path):
    """With CUDA fast math, tanh is ``halide_helpers.tanh_poly``: no libdevice ``__nv_tanhf`` branch per element,
    its exp marked for the PTX rewrite (the bf16 tanh GELU: 456 SASS instructions per 8 elements with libdevice's,
    352 with this, Triton's 280). Its values on the GPU: test_ops' tanh extremes and test_special_values (cuda)."""
    import halide_xpu.kernel as kernel_mod

    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(kernel_mod.HalideXpuKernel, "fast_math", lambda self: True)  # the twin's source as on CUDA
    ptx: list[str] = []
    assemble = _assembly(tmp_path)

    def lower(p: Any, a: list, t: Any) -> None:
        assemble(p, a, t)
        ptx.append((tmp_path / "twin.s").read_text(errors="replace"))

    _cuda_twins(CASES["gelu"][0], CASES["gelu"][1](), monkeypatch, tmp_path, lower=lower)
    assert len(ptx) == 1 and "__nv_tanhf" not in ptx[0] and "tanh" not in ptx[0].split(".version")[-1], "libdevice tanh"
    assert "rsqrt.approx.ftz.f32" in ptx[0]  # the exp marker


def test_one_index_parser():
    """``pairs`` and ``Plan.unroll_lanes`` read a kernel's accesses with one parser, nested brackets kept whole: an
    access whose first index is itself an access still shows the innermost Var after it."""
    from halide_xpu.schedule.common import accesses, reads

    source = "out[h0, h1] = x[tmp3[h1], h0] + x[h0, ] + y[h1]"
    assert accesses(source, "x") == [["tmp3[h1]", "h0"], ["h0"]]
    assert reads(source, "x") == {"tmp3[h1],h0", "h0"} and reads(source, "y") == {"h1"}


def _relu_backward(g: torch.Tensor, a: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """ResNet's bf16 relu backward summed into an fp32 gradient: bf16 inputs, an fp32 output."""
    return torch.where(a <= 0, 0.0, torch.where(b <= 0, 0.0, g.float() + r.float()) + g.float()).float()


# case -> (fn, inputs, inputs read as words)
INPUT_CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple], bool]] = {
    "to_float": (lambda x: x.float() * 2, _bf16((512,)), True),
    "relu_backward": (_relu_backward, _bf16((64, 50), (64, 50), (64, 50), (64, 50)), True),
    "odd": (lambda x: x.float() + 1, _bf16((999,)), False),  # an odd extent: elements
    "int_out": (lambda x, y: (x > y).int() + 1, _bf16((128,), (128,)), True),
    "half_out": (lambda x: x.half() * 2, _bf16((256,)), False),  # a 16-bit output: neither words nor inputs only
}


@pytest.mark.parametrize("case", list(INPUT_CASES))
def test_bf16_inputs_in_words_beside_32bit_outputs(target, case, monkeypatch, tmp_path):
    """A kernel whose outputs are all 32-bit reads its bf16 inputs as words (``hx.pair_halves``) and keeps one
    point per element: eager's numbers exactly (the halves are the same bits)."""
    _force_pairs(target, monkeypatch, tmp_path)
    fn, make, halves = INPUT_CASES[case]
    compile_and_check(fn, *make(), atol=0, rtol=0)
    built = [(Path(lau.library).parent / "kernel.py").read_text() for lau in compiler._memory.values()
             if lau.meta.target == target and not lau.meta.scalar_lanes]
    assert built and all(("hx.pair_halves(" in k) == halves and "hx.pair_words(" not in k for k in built), built


def test_cuda_twin_bf16_inputs_vectorize(monkeypatch, tmp_path):
    """CUDA twin (``pairs`` 1, the default): the relu backward of bf16 inputs into fp32 loads 32-bit words and stores
    one 128-bit vector of 4 results per work-item (its lanes were unrolled 16-bit loads: one per element)."""
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"pairs": 1})
    lower, found = _accesses(tmp_path)
    twins = _cuda_twins(_relu_backward, _bf16((256, 1024), (256, 1024), (256, 1024), (256, 1024))(), monkeypatch,
                        tmp_path, lower=lower)
    assert len(twins) == 1 and len(found) == 1
    assert not any(".b16" in k for k in found[0]) and found[0]["st.global.v4.b32"] == 1, found[0]


def _residual_rms(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama's residual sum and RMSNorm in bf16 (the sum an output too)."""
    h = x + r
    return h, _rms_norm(h, w)


ROW_CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple]]] = {
    "residual_rms_512": (_residual_rms, _bf16((64, 512), (64, 512), (512,))),
    "rms_768": (_rms_norm, _bf16((40, 768), (768,))),
    "rms_100": (_rms_norm, _bf16((33, 100), (100,))),  # rows no multiple of 64 pairs: the last lanes idle
    "layer_norm": (_residual_norm_bf16, _bf16((2, 48, 256), (2, 48, 256), (256,))),
    "softmax": (lambda x: torch.softmax(x.float(), -1).to(x.dtype), _bf16((24, 1000))),
}


@pytest.mark.parametrize("case", list(ROW_CASES))
def test_row_reductions_read_bf16_words(target, case, monkeypatch, tmp_path):
    """A row reduction's bf16 inputs read as words (``pair_rows`` forced to 2 on every device target; CUDA's warp
    form takes it at 1): eager's numbers, and the kernel reads its rows through ``hx.pair_halves``."""
    if target == "host":
        pytest.skip("the host target computes bf16 natively (no bits to pair)")
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"pair_rows": 2})
    compiler._memory.clear()
    fn, make = ROW_CASES[case]
    # bf16 tolerances, and an absolute one of ~1 ulp at 1: a normalized value near 0 moves with the fp32 mean's
    # rounding (pair_rows 0 gives the same numbers)
    compile_and_check(fn, *make(), atol=1e-2, rtol=1.6e-2)
    built = [(Path(lau.library).parent / "kernel.py").read_text() for lau in compiler._memory.values()
             if lau.meta.target == target and lau.meta.reductions and not lau.meta.scalar_lanes]
    assert built and all("hx.pair_halves(" in k for k in built), built


@pytest.mark.parametrize("row_outputs", [1, 0])
def test_cuda_twin_warp_rows_load_words(row_outputs, monkeypatch, tmp_path):
    """CUDA twin (``pair_rows`` 1, the default): Llama's residual RMSNorm takes the warp form with each lane on
    adjacent pairs, so every bf16 row is read as 32-bit words (was one 16-bit load per element: 48 per lane of a
    512-wide row's three inputs, now 24 of words); with ``pair_row_outputs`` (default 1) its two bf16 rows (the
    residual sum, the normalized row) are stored as words too: 16 32-bit stores per lane, not 32 16-bit ones."""
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"pair_row_outputs": row_outputs})
    lower, found = _accesses(tmp_path)
    twins = _cuda_twins(ROW_CASES["residual_rms_512"][0], ROW_CASES["residual_rms_512"][1](), monkeypatch, tmp_path,
                        lower=lower)
    assert [t[3] for t in twins] == ["fused_warps"], [t[3] for t in twins]
    assert found[0]["ld.global.nc.b16"] == 0 and found[0]["ld.global.nc.b32"] == 2 * 8 + 8, found[0]
    stores = {"st.global.b32": 16} if row_outputs else {"st.global.b16": 32}
    assert {k: v for k, v in found[0].items() if k.startswith("st.")} == stores, found[0]


def test_cuda_twin_padded_rows_load_words(monkeypatch, tmp_path):
    """A padded bf16 embedding (GPT-2's 50257 -> 50264 and BERT's 30522 -> 30528 vocabulary rows: 2.2x Triton on
    the H200): only its rows are masked, so its columns keep the plain Var (``kernel._unmasked_dims``) and are read
    as 128-bit vectors of words, not one 16-bit load per element; eager's numbers on the OpenCL device."""
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    lower, found = _accesses(tmp_path)
    w = torch.randn(1001, 768).bfloat16()
    pad = lambda w: F.pad(w, (0, 0, 0, 7))  # noqa: E731
    twins = _cuda_twins(pad, (w,), monkeypatch, tmp_path, lower=lower)
    assert len(twins) == 1 and "in_ptr0[h0, hl.select(" in twins[0][1], twins[0][1]
    assert found[0]["ld.global.nc.b16"] == 0 and found[0]["ld.global.nc.v4.b32"] > 0, found[0]
    assert torch.equal(torch.compile(pad)(w), pad(w))

"""CUDA rows of one warp each (``warp_rows``): compiled as CUDA twins (no GPU needed) they combine lanes through
shuffles without local memory or barriers; the numbers are checked against eager where a CUDA device exists; off
by default and never on OpenCL (Halide's OpenCL backend has no ``gpu_lanes``)."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

import halide_xpu
from halide_xpu import compiler
from halide_xpu.autotune import space
from halide_xpu.schedule import gpu_warps

from conftest import compile_and_check
from test_gpu_schedules import CUDA_TARGET, H100, _cuda_twins, _residual_norm
from replay_kernel import cuda_twin_meta  # noqa: E402  (scripts/, on the path test_gpu_schedules sets)


def _rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w).to(x.dtype)


def _norm_backward(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """A LayerNorm's input gradient as its backward graph computes it: two row sums feeding a full-row output."""
    mean, rstd = x.mean(-1, keepdim=True), torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    xhat, gw = (x - mean) * rstd, g * w
    return rstd * (gw - gw.mean(-1, keepdim=True) - xhat * (gw * xhat).mean(-1, keepdim=True))


def _residual_norm_bf16(x: torch.Tensor, e: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """GPT-2's block input: a bf16 residual sum, normalized in fp32 (upstream casts the fp32 sum to fp32 again)."""
    h = x + e
    return h, torch.nn.functional.layer_norm(h.float(), h.shape[-1:], w.float()).to(torch.bfloat16)


CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple]]] = {
    # GPT-2's residual sum + LayerNorm with its saved mean and rstd: 4 outputs of two shapes, rows on a grid
    "residual_norm": (_residual_norm, lambda: (torch.randn(4, 128, 256), torch.randn(128, 256), torch.randn(256))),
    "residual_norm_bf16": (_residual_norm_bf16,
                           lambda: tuple(torch.randn(*s).bfloat16() for s in ((2, 64, 768), (2, 64, 768), (768,)))),
    # Llama's RMSNorm in bf16 (rows of 768: 24 per lane)
    "rms_norm_bf16": (_rms_norm, lambda: (torch.randn(64, 768).bfloat16(), torch.randn(768).bfloat16())),
    # a row no multiple of the warp (the last lanes idle) and shorter than it
    "softmax_100": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(96, 100),)),
    "log_softmax_20": (lambda x: torch.log_softmax(x * 2, -1), lambda: (torch.randn(50, 20),)),
    "norm_backward": (_norm_backward, lambda: (torch.randn(32, 384), torch.randn(384), torch.randn(32, 384))),
    "argmax_rows": (lambda x: x.argmax(-1), lambda: (torch.randn(40, 300),)),
    # bf16 rows read as words whose length 64 does not divide (the staged rows' tails: see
    # test_staged_word_rows_keep_every_piece)
    "softmax_70_bf16": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(33, 70).bfloat16(),)),
    "layer_norm_32_bf16": (lambda x, w: torch.nn.functional.layer_norm(x, (32,), w),
                           lambda: (torch.randn(48, 32).bfloat16(), torch.randn(32).bfloat16())),
}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test builds its kernels (a CUDA twin is made when a kernel is built, not when the cache has it)."""
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path / "cache"))


def _assembly(tmp: Path) -> Callable[[Any, list, Any], None]:
    import halide as hl

    return lambda p, a, t: p.compile_to({hl.OutputFileType.assembly: str(tmp / "twin.s")}, a, "k", t)


@pytest.mark.parametrize("case", list(CASES))
def test_warp_rows_build_shuffles_not_barriers(case, monkeypatch, tmp_path):
    """With ``warp_rows`` every row reduction of <= ``MAX_ROW`` elements takes the warp form: the PTX exchanges
    lanes' values with ``shfl.sync`` and has no barrier and no shared memory."""
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"warp_rows": 4})
    asm: list[str] = []
    lower = _assembly(tmp_path)

    def keep(p, a, t):
        lower(p, a, t)
        asm.append((tmp_path / "twin.s").read_text(errors="replace"))

    fn, make = CASES[case]
    twins = _cuda_twins(fn, make(), monkeypatch, tmp_path, keep)
    reductions = [(meta, lines, variant, code) for (meta, _, lines, variant), code in zip(twins, asm)
                  if meta.schedule.family == "reduction"]
    assert reductions, [t[3] for t in twins]
    for meta, lines, variant, code in reductions:
        assert variant == "fused_warps", (case, variant)
        assert "shfl.sync" in code and "bar.sync" not in code and ".shared" not in code, case
        if case.startswith("residual_norm"):  # the sum x + e, read by every pass, in registers (rows on a grid)
            assert any("rows staged in registers: tmp" in line for line in lines), lines


@pytest.mark.parametrize("warp_rows", [0, 4])
def test_identity_casts_not_staged(warp_rows, monkeypatch, tmp_path):
    """A same-type cast of a staged row (``tmp3 = hl.cast(hl.Float(32), tmp2)``, tmp2 fp32) is read through its
    source's stage, never staged itself: both forms staged GPT-2's residual sum twice."""
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"warp_rows": warp_rows})
    fn, make = CASES["residual_norm_bf16"]
    twins = _cuda_twins(fn, make(), monkeypatch, tmp_path)
    (meta, source, lines, variant), = [t for t in twins if t[0].schedule.family == "reduction"]
    casts = re.findall(r"^\s*(tmp\d+)\[h0, h1\] = hl\.cast\(hl\.Float\(32\), tmp\d+\[h0, h1\]\)$", source, re.M)
    assert casts, source
    staged = {line.split(".")[0] for line in lines if re.match(r"tmp\d+\.compute_at\(", line)}
    assert staged and not staged & set(casts), (variant, staged, casts)


def test_warp_rows_default_on_cuda_never_on_opencl(monkeypatch, tmp_path):
    """CUDA rows take warps by default (``warp_rows`` 4); the same kernel on OpenCL keeps a work-group per row, and
    ``warp_rows=0`` gives CUDA the work-group form too."""
    twins = _cuda_twins(*(lambda f, m: (f, m()))(*CASES["softmax_100"]), monkeypatch, tmp_path)
    assert twins and all(v == "fused_warps" for *_, v in twins)
    meta = twins[0][0]  # the opencl kernel's
    assert meta.schedule.get("warp_rows", -1) == 4
    assert not gpu_warps.applicable(meta) and "opencl" in meta.halide_target
    assert gpu_warps.applicable(cuda_twin_meta(meta))
    off = dataclasses.replace(meta, schedule=meta.schedule.with_params(warp_rows=0))
    assert not gpu_warps.applicable(cuda_twin_meta(off))


def test_long_rows_keep_a_work_group(monkeypatch, tmp_path):
    """A row longer than ``MAX_ROW`` (a vocabulary's logits) streams through a work-group: one warp would keep too
    few loads in flight."""
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"warp_rows": 4})
    twins = _cuda_twins(lambda x: torch.logsumexp(x, -1), (torch.randn(8, 5000),), monkeypatch, tmp_path)
    assert [v for *_, v in twins] == ["fused"]


def test_warp_rows_searched_on_cuda_rows_that_fit():
    """The tuner searches ``warp_rows`` for CUDA inner reductions of <= ``MAX_ROW`` elements only."""
    from halide_xpu.meta import KernelMeta, LoopVar
    from halide_xpu.schedule import default_spec

    def meta(halide_target: str, row: int) -> KernelMeta:
        loops = (LoopVar("h0", str(row), True, True, row * 2), LoopVar("h1", "512", False, False, 0))
        return KernelMeta(args=(), target="cuda", halide_target=halide_target, loop_vars=loops,
                          schedule=default_spec(loops, "reduction", H100))

    names = lambda m: {t.name: t.values for t in space.search_space(m, H100)}  # noqa: E731
    assert names(meta(CUDA_TARGET, 768))["warp_rows"] == (0, 1, 2, 4, 8)
    assert "warp_rows" not in names(meta(CUDA_TARGET, 50257))
    assert "warp_rows" not in names(meta("x86-64-linux-opencl", 768))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("case", list(CASES))
def test_warp_rows_correct_on_cuda(case, target, monkeypatch):
    """Warp rows compute what eager computes (on a CUDA device; elsewhere the twin tests above check the form)."""
    if target != "cuda":
        pytest.skip("warp rows are a CUDA form")
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"warp_rows": 4})
    monkeypatch.setattr(compiler, "_memory", {})
    fn, make = CASES[case]
    torch.manual_seed(0)
    bf16 = case.endswith("_bf16")  # 16-bit outputs: a unit in the last place is 2**-8 relative
    compile_and_check(fn, *make(), atol=2e-2 if bf16 else 1e-4, rtol=1e-2 if bf16 else 1e-4)
    variants = {k.variant for k in compiler._memory.values() if k.meta.schedule.family == "reduction"}
    assert variants == {"fused_warps"}, variants


def test_branch_shuffles_found():
    """The lowered-IR check flags a shuffle left inside a branch of a device loop nest, and nothing else: not a
    hoisted shuffle, not a branch of host code around the kernel."""
    kernel = """if (!bounds_query) {
 gpu_block<CUDA> (b, 0, 10) {
  gpu_lane<CUDA> (.thread_id_x, 0, 32) {
   let t1 = (float32)llvm.nvvm.shfl.sync.idx.f32(-1, w[0], 0, 31)
   if (.thread_id_x < 1) {
    w[0] = t1
    out[b] = (float32)llvm.nvvm.shfl.sync.idx.f32(-1, w[0], 0, 31)
   }
  }
 }
}"""
    assert gpu_warps.branch_shuffles(kernel) == ["out[b] = (float32)llvm.nvvm.shfl.sync.idx.f32(-1, w[0], 0, 31)"]
    assert gpu_warps.branch_shuffles("\n".join(line for line in kernel.splitlines() if "out[b]" not in line)) == []


HARVESTED_H200 = Path(__file__).parents[1] / "benchmarks" / "results" / "NVIDIA_H200" / "tune_kernels_8x512.jsonl.xz"


@pytest.mark.parametrize("nodes", ["44e3b83b0bb8 inputs_embeds,hidden_states,hidden_states_2", "95364160fdbc inputs_embeds"])
def test_harvested_kernels_take_warps_twice(nodes, monkeypatch, tmp_path):
    """Kernels of the H200 bf16 training steps (CUDA sources) take the warp form, also when built a second time in
    the process (Halide names the Funcs ``tmp2$4``): GPT-2's embedding + LayerNorm (Welford's shifted mean, a pure
    per-row result) and Llama's RMSNorm. On the H200 both had left a lane-0 value's shuffles in a branch, and the
    check refused the form."""
    import json
    import lzma

    import halide as hl

    from halide_xpu.autotune.measure import parse_meta
    from replay_kernel import compile_cuda_twin

    record = next(json.loads(line) for line in lzma.open(HARVESTED_H200, "rt") if nodes in line)
    meta = parse_meta(record["meta"])
    meta = dataclasses.replace(meta, schedule=meta.schedule.with_params(warp_rows=4))
    for _ in range(2):
        _, lines, variant = compile_cuda_twin(meta, record["source"], lambda p, a, t: p.compile_to(
            {hl.OutputFileType.conceptual_stmt: str(tmp_path / "k.stmt")}, a, "k", t))
        assert variant == "fused_warps", lines
        assert not gpu_warps.branch_shuffles((tmp_path / "k.stmt").read_text(errors="replace"))


def test_warp_form_lowered_once_in_a_build(monkeypatch, tmp_path):
    """A build of the warp form lowers it once: the shuffle check reads the conceptual Stmt written by the same
    ``compile_to`` as the object (it lowered the pipeline a second time, about 8% of such a kernel's build)."""
    fn, make = CASES["rms_norm_bf16"]
    build = compiler.build  # _cuda_twins replaces it with its capture
    twins = _cuda_twins(fn, make(), monkeypatch, tmp_path)
    (meta, source, _, variant), = twins
    assert variant == "fused_warps"
    calls: list[list[str]] = []
    real = compiler._CompileTo.__call__

    def counted(self, p, args, target, also=None):
        calls.append(sorted(str(k) for k in {**self.outputs, **(also or {})}))
        return real(self, p, args, target, also)

    monkeypatch.setattr(compiler._CompileTo, "__call__", counted)
    monkeypatch.setattr(gpu_warps, "check_lowered", lambda *a: pytest.fail("lowered a second time for the check"))
    workdir = tmp_path / "build"
    workdir.mkdir()
    try:
        _, built = build(cuda_twin_meta(meta), source, workdir, H100)
    except (RuntimeError, OSError) as e:  # the glue needs CUDA's headers: the kernel's object is built before it
        if not (workdir / "kernel.o").exists():
            raise
        built = "fused_warps"
    assert built == "fused_warps" and len(calls) == 1 and any("conceptual_stmt" in c for c in calls[0]), calls


@pytest.mark.parametrize("n", [32, 70, 100, 128])
def test_staged_word_rows_keep_every_piece(n, monkeypatch, tmp_path):
    """A bf16 row staged in registers as words (lane l holds elements 2l, 2l + 1 of each 64) keeps two registers a
    lane for every piece of 64, also for rows 64 does not divide: Halide's warp-shuffle lowering sized the staged
    row by its length alone (70 elements: three registers a lane for four values) and dropped what did not fit,
    so the H200 gave garbage for elements 64-69 of a softmax over rows of 70 and for the odd elements of a
    LayerNorm over 32 (the tiny GPT's bf16 training step: loss 4.16 for 18.56)."""
    import halide as hl

    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"warp_rows": 4})
    stmts: list[str] = []

    def keep(p, a, t):
        p.compile_to({hl.OutputFileType.conceptual_stmt: str(tmp_path / "k.stmt")}, a, "k", t)
        stmts.append((tmp_path / "k.stmt").read_text(errors="replace"))

    twins = _cuda_twins(lambda x: torch.softmax(x, -1), (torch.randn(33, n).bfloat16(),), monkeypatch, tmp_path, keep)
    (meta, _, lines, variant), stmt = next((t, c) for t, c in zip(twins, stmts) if t[0].schedule.family == "reduction")
    assert variant == "fused_warps", lines
    # Func names take a `$k` suffix when the process has built others
    staged = {m.group(1) for line in lines if (m := re.match(r"(tmp\d+)\.unroll\(\1_x_p\)", line))}
    sizes = {name: int(k) for name, k in re.findall(r"allocate (tmp\d+)(?:\$\d+)?\.\d+\[float32 \* (\d+)\]", stmt)}
    assert staged and staged <= set(sizes), (staged, sizes)
    assert all(sizes[name] == 2 * -(-n // 64) for name in staged), (n, sizes)

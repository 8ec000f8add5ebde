"""GPU schedules of shapes found in real training graphs: correct on every target, and (compiled as CUDA twins with
H100 capabilities, no GPU needed) no device stage that runs a large reduction on one work-item."""
from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F

from torch._inductor.utils import run_and_get_code

from halide_xpu import compiler
from halide_xpu.schedule import pointwise

from conftest import KERNEL_CALL, compile_and_check, on_target, opencl_available

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from replay_kernel import CUDA_TARGET, H100, compile_cuda_twin, load_meta  # noqa: E402  (the CUDA twin: H100 caps, no GPU needed)


def _bn_backward_like(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per-channel sums over N, H, W of a channels-last view whose N and H cannot be merged (ResNet-18's batch-norm
    backward behind a max-pool: Inductor keeps several reduction dims), consumed by a full-size output."""
    s1, s2 = x.sum((0, 2, 3)), (x * w.view(1, -1, 1, 1)).sum((0, 2, 3))
    return x * s1.view(1, -1, 1, 1) - s2.view(1, -1, 1, 1), s1


def _channels_last_slice() -> torch.Tensor:
    return torch.randn(4, 64, 60, 30).to(memory_format=torch.channels_last)[:, :, :50, :]


@pytest.mark.parametrize("shape", [(4, 512, 768), (2, 3, 128, 64)])
def test_batched_transpose_tiled(shape, monkeypatch, tmp_path):
    """A transpose with batch dims (BERT's key for q @ k^T: 3.4x Triton read strided on the H100) is tiled through
    local memory like a 2-D one, the batch dims as a block dim."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    twins = _cuda_twins(lambda x: (x.transpose(-1, -2) * 0.5).contiguous(), (torch.randn(*shape),), monkeypatch, tmp_path)
    assert len(twins) == 1 and any("_tile.compute_at" in line for line in twins[0][2]), twins[0][2]


_CUDA_RUN = re.compile(r'halide_cuda_run\(cuda\[\d+\], "[^"]*", ([^,]+), ([^,]+), ([^,]+),')


@pytest.mark.parametrize("inner", [(2, 4), (8, 8)])
def test_transpose_grid_within_cuda_limits(inner, monkeypatch, tmp_path):
    """GPUTests large_grid: (n, a, b) -> (n, b, a) with 70,000 rows (16.7M in the test). The tiled transpose put the
    rows on grid z (limit 65,535: cuLaunchKernel INVALID_VALUE on the H100); every block dim is now on grid x, and
    a transpose narrower than TILE_MIN runs flat. Correct on every CPU target too (test_transpose_large_batch)."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    a, b = inner
    fn = lambda p: p.reshape(-1, a, b).permute(0, 2, 1).clone(memory_format=torch.contiguous_format)  # noqa: E731
    twins = _cuda_twins(fn, (torch.randn(70000, a * b),), monkeypatch, tmp_path)
    assert len(twins) == 1
    tiled = any("_tile.compute_at" in line for line in twins[0][2])
    assert tiled == (min(inner) >= 8), twins[0][2]
    grids = [tuple(int(d) for d in m.groups()) for m in _CUDA_RUN.finditer((tmp_path / "twin.stmt").read_text())]
    assert grids and all(y <= 65535 and z <= 65535 for _, y, z in grids), grids
    assert sum(x * y * z for x, y, z in grids) >= 70000 // (64 if tiled else 1) // 256, grids


_INT64_TWIN = """
import sys, pytest, torch
sys.path[:0] = [{tests!r}]
import halide_xpu, test_gpu_schedules as g
def nested(x, repeats):  # GPUTests graph_partition_unbacked_symint_as_output
    index = torch.arange(repeats.numel(), device=x.device).repeat_interleave(repeats, dim=0)
    return torch.index_select(x, index=index, dim=0)
mp = pytest.MonkeyPatch()
mp.setattr(halide_xpu.config, "cache_dir", {tmp!r})
r = torch.tensor([5, 10, 15])
torch._dynamo.mark_dynamic(r, 0)
twins = g._cuda_twins(nested, (torch.randn(32, 64), r), mp, __import__("pathlib").Path({tmp!r}))
print("TWINS", [(m.schedule.family, any(".vectorize(" in l for l in lines)) for m, _, lines, _ in twins
                if any(a.dtype == "int64" and a.kind == "out" for a in m.args)])
"""


def test_int64_pointwise_output_with_a_tail_compiles_for_cuda(tmp_path):
    """``arange`` to a dynamic size stores int64 lanes with a guarded tail: Halide 21's PTX codegen aborted the
    process on the predicated 64-bit vector store (LLVM "Val should be a vector"; GPUTests
    graph_partition_unbacked_symint_as_output on the H200). A pointwise kernel's 64-bit output unrolls its lanes
    on CUDA. Compiled in a child process: the failure is an abort."""
    import subprocess

    code = _INT64_TWIN.format(tests=str(Path(__file__).parent), tmp=str(tmp_path))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    line = next(x for x in res.stdout.splitlines() if x.startswith("TWINS"))
    assert "True" not in line and "pointwise" in line, line  # an int64 output kernel, its lanes unrolled


@pytest.mark.parametrize("inner", [(2, 4), (8, 8)])
def test_transpose_large_batch(target, inner):
    a, b = inner
    compile_and_check(lambda p: p.reshape(-1, a, b).permute(0, 2, 1).clone(memory_format=torch.contiguous_format),
                      torch.randn(70000, a * b))


def _lm_loss(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """GPT-2's loss: next-token targets, ignored positions (its mean and count are (1,)-shaped outputs)."""
    return F.cross_entropy(x[:, :-1].reshape(-1, x.shape[-1]), t[:, 1:].reshape(-1), ignore_index=-100)


def test_lm_loss_forward_backward(target):
    """The loss's sum and count end in one work-group with both single-point outputs (were 12 launches on CUDA:
    a (1,)-shaped output was not taken for a scalar), forward and backward equal to eager."""
    torch.manual_seed(0)
    t = torch.randint(0, 50, (4, 129))
    t[0, 5:40] = -100
    x, t = on_target((torch.randn(4, 129, 50), t))
    ref_x = x.detach().clone().requires_grad_()
    x.requires_grad_()
    ref = _lm_loss(ref_x, t)
    ref.backward()
    compiled = torch.compile(_lm_loss)
    got, codes = run_and_get_code(lambda: _backward(compiled(x, t)))
    torch.testing.assert_close(got, ref.detach())
    torch.testing.assert_close(x.grad, ref_x.grad)
    assert KERNEL_CALL.search("\n".join(codes)), codes


def test_lm_loss_backward_twins_compile(monkeypatch, tmp_path):
    """The loss's backward kernels build for CUDA (here: the CUDA twins, in this process). Its int64 targets are
    read per row, through masked loads: with their lanes vectorized, LLVM aborted the process in a predicated
    64-bit store (``Plan.unroll_lanes``), on the H200 and here alike."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    torch.manual_seed(0)
    t = torch.randint(0, 50, (4, 129))
    t[0, 5:40] = -100
    x = torch.randn(4, 129, 50, requires_grad=True)
    twins = _cuda_twins(lambda x, t: torch.autograd.grad(_lm_loss(x, t), x)[0], (x, t), monkeypatch, tmp_path)
    assert len(twins) >= 3 and "pointwise" in {t[3] for t in twins}, [t[3] for t in twins]


def _backward(loss: torch.Tensor) -> torch.Tensor:
    loss.backward()
    return loss.detach()


def test_lm_loss_one_kernel(monkeypatch, tmp_path):
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    t = torch.randint(0, 50, (4, 129))
    t[0, 5:40] = -100
    # a training forward: the count is saved for the backward
    found = _twin_launches(_lm_loss, (torch.randn(4, 129, 50, requires_grad=True), t), monkeypatch, tmp_path)
    assert found and all(n == 1 for _, n in found), found


def _smoothed_loss(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """ResNet-18's training loss: 32 rows, label smoothing, some ignored targets (its short sums: the count, the
    picked log-probabilities, the smoothing term)."""
    return F.cross_entropy(x, t, ignore_index=-100, label_smoothing=0.1)


def _smoothed_loss_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    t = torch.randint(0, 1000, (32,))
    t[::7] = -100
    return torch.randn(32, 1000), t


def test_smoothed_loss_correct(target):
    """The loss and its gradient equal eager's, with its short sums on one work-item (below)."""
    x, t = on_target(_smoothed_loss_inputs())
    ref_x = x.detach().clone().requires_grad_()
    x.requires_grad_()
    ref = _smoothed_loss(ref_x, t)
    ref.backward()
    got, codes = run_and_get_code(lambda: _backward(torch.compile(_smoothed_loss)(x, t)))
    torch.testing.assert_close(got, ref.detach())
    torch.testing.assert_close(x.grad, ref_x.grad)
    assert KERNEL_CALL.search("\n".join(codes)), codes


def test_short_sums_on_one_work_item(monkeypatch, tmp_path):
    """The loss's short sums (32 targets) beside its single-point outputs: computed inside a loop of one work-item,
    as registers with their loads in flight together. At the work-group level every unrolled step was a
    one-work-item region between two barriers, and the int64 count went to global scratch: 20 us on the H200 for
    a kernel Triton runs in 4.2."""
    found: list[str] = []  # each twin's accepted lowering (a refused variant lowers too: not one per twin)
    twins = _cuda_twins(_smoothed_loss, _smoothed_loss_inputs(), monkeypatch, tmp_path, stmts=found)
    sums = [(lines, stmt) for (_, _, lines, _), stmt in zip(twins, found) if any("_one)" in l for l in lines)]
    assert sums, [t[2] for t in twins]
    for lines, stmt in sums:
        assert stmt.count("halide_cuda_run(") == 1
        assert stmt.count("bar.sync") <= 2 and "st.shared" not in stmt, stmt.count("bar.sync")
        assert not any("store_in" in l for l in lines), lines


def _sum_count_and_share(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Two short sums beside a short output that reads only one of them (the sum: it stays where every work-item
    sees it); the int64 count, read by the single-point outputs only, is a register of their work-item."""
    s = x.sum()
    return s, (x > 0).sum(), x / s


def test_short_sum_read_beside_correct(target):
    torch.manual_seed(0)
    compile_and_check(_sum_count_and_share, torch.rand(32) - 0.25)  # a sum far from 0: x / s keeps its precision


def test_short_count_in_a_register_beside_a_shared_sum(monkeypatch, tmp_path):
    # 48 points, not the 32 above: a module Inductor already loaded in this process would skip the build
    twins = _cuda_twins(_sum_count_and_share, (torch.randn(48),), monkeypatch, tmp_path)
    lines = [l for _, _, ls, _ in twins for l in ls]
    stored = [l for l in lines if ".store_in(" in l]
    assert len(stored) == 1 and "Register" in stored[0], (stored, [t[3] for t in twins])
    assert not any("_one" in l for l in lines), lines


def _two_loop_sum(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """A per-channel sum over two loops Inductor cannot merge (N and H*W of an NCHW tensor), read back by every
    point: ResNet-18's last batch-norm backward beside its pooled mean's gradient."""
    return x * 3 - torch.where(m, 0.0, x).sum(dim=(0, 2), keepdim=True)


def test_two_loop_row_sum_correct(target):
    torch.manual_seed(0)
    x = torch.randn(32, 64, 49)
    compile_and_check(_two_loop_sum, x, x > 1)


def test_two_loop_row_sum_spreads_both_loops(monkeypatch, tmp_path):
    """The row form takes both reduction loops as one domain for its work-items (fused RVars): with the first loop
    alone (49 points) it used 32 work-items per row, each walking the other loop serially (512 work-groups of 32:
    18.8 us on the H200, Triton 8.1)."""
    x = torch.randn(32, 512, 49)
    twins = _cuda_twins(_two_loop_sum, (x, x > 1), monkeypatch, tmp_path)
    rows = [lines for _, _, lines, variant in twins if variant.startswith("fused")]
    assert rows, [t[3] for t in twins]
    lines = rows[0]
    assert any(".update().fuse(" in l for l in lines), lines
    assert any(re.search(r"\.split\(\w+, \w+, \w+, 256,", l) for l in lines), lines


def _pooled_mean_and_mask(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ResNet-18's last relu: its pooled mean over a channels-last input and its mask saved as an NCHW tensor."""
    y = x.relu()
    return y.mean((2, 3)), (y <= 0).contiguous()


@pytest.mark.parametrize("shape", [(4, 64, 7, 7), (3, 40, 5, 3)])
def test_pooled_mean_and_nchw_mask_correct(target, shape):
    torch.manual_seed(0)
    compile_and_check(_pooled_mean_and_mask, torch.randn(shape).to(memory_format=torch.channels_last))


def test_nchw_mask_beside_a_column_sum_stores_runs(monkeypatch, tmp_path):
    """The mask (stride-1 along the pooled dim) is stored by work-items that take consecutive points of that dim
    for a few channels each, in the column sums' work-group shape: one work-item per channel stored one byte per
    channel 49 bytes apart (13.2 us on the H200, Triton 4.9)."""
    x = torch.randn(32, 512, 7, 7).to(memory_format=torch.channels_last)
    twins = _cuda_twins(_pooled_mean_and_mask, (x,), monkeypatch, tmp_path)
    lines = [l for _, _, ls, _ in twins for l in ls]
    assert any(re.search(r"\.fuse\(\w+_wri, \w+_wxi, \w+_wt\)", l) for l in lines), lines


def _masked_softmax(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SDPA's math path: a softmax whose fully masked rows give 0 (``_safe_softmax``: an ``any`` over each row)."""
    return torch.ops.aten._safe_softmax(x + mask, -1)


def _residual_norm(x: torch.Tensor, e: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    h = x + e
    mean = h.mean(-1, keepdim=True)
    rstd = torch.rsqrt(((h - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
    return h, (h - mean) * rstd * w, mean, rstd


def _split_chunks_with_mask(x: torch.Tensor, m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf, mf = (t.permute(0, 2, 3, 1).reshape(14, 112, 512) for t in (x, m))
    return (xf * mf).sum(1), (xf * xf * mf).sum(1)


def _split_chunks_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(32, 512, 7, 7).to(memory_format=torch.channels_last), torch.rand(32, 512, 7, 7) > 0.5


CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple]]] = {
    "bn_backward_multi_rdim": (_bn_backward_like, lambda: (_channels_last_slice(), torch.randn(64))),
    # attention q/k/v bias gradients: sums over batch and sequence keeping (heads, head_dim)
    "bias_grad_two_kept_dims": (lambda g: (g.sum((0, 2)), g * 2), lambda: (torch.randn(8, 6, 100, 16),)),
    # masked-LM loss: mean over non-ignored rows of gathered log-probabilities (a scalar reduction)
    "masked_nll_loss": (lambda x, t: F.cross_entropy(x, t, ignore_index=-100),
                        lambda: (torch.randn(2048, 50),
                                 torch.where(torch.rand(2048) < 0.2, -100, torch.randint(0, 50, (2048,))))),
    "scalar_over_two_rdims": (lambda x: (x[:, :30].sum(), x[:, :30].abs().amax()), lambda: (torch.randn(300, 40),)),
    # several pure outputs of one domain (a tail: 4099 is no multiple of any work-group)
    "multi_output_pointwise": (lambda a, b: (a * 2 + b, torch.sigmoid(a) * b, (a - b).abs()),
                               lambda: (torch.randn(4099), torch.randn(4099))),
    "masked_softmax": (_masked_softmax, lambda: (torch.randn(2, 3, 40, 40),
                                                 torch.where(torch.rand(2, 1, 40, 40) < 0.5, float("-inf"), 0.0))),
    # a norm's weight and bias gradients: two column sums of one kernel, computed by the same work-items
    "weight_bias_grads": (lambda g, x, y: (((g + y) * x).sum(0), (g + y).sum(0)),
                          lambda: (torch.randn(600, 130), torch.randn(600, 130), torch.randn(600, 130))),
    # attention's key transposed for q @ k^T (batch, tokens, features) -> (batch, features, tokens), scaled; and
    # one with two batch dims (both fused into one block dim of the tiled transpose)
    "transpose_3d": (lambda x: (x.transpose(1, 2) * 0.35).contiguous(), lambda: (torch.randn(4, 50, 72),)),
    "transpose_4d": (lambda x: (x.transpose(-1, -2) + 1).contiguous(), lambda: (torch.randn(2, 3, 70, 33),)),
    # a residual sum and its training LayerNorm (saved mean and rstd), all outputs over (batch, tokens): computed
    # together, the rows a grid of work-groups (over one fused row Var each group staged all 4 x 128 rows: the
    # Intel OpenCL CPU device refused the launch)
    "residual_norm_twins": (_residual_norm, lambda: (torch.randn(4, 128, 256), torch.randn(128, 256), torch.randn(256))),
    # a split batch-norm backward's chunk sums as Inductor makes them on GPUs: channels-last rows in chunks of 112
    # (not a multiple of 49), beside an NCHW relu mask read at 25088 * (i // 49 % 32) + i % 49
    "split_chunks_nchw_mask": (_split_chunks_with_mask, _split_chunks_inputs),
}


# fp32 sums of 6000 terms of magnitude ~1 (then scaled by x ~3): rounding of either order is ~1e-3 absolute
ATOL = {"bn_backward_multi_rdim": 5e-3}


@pytest.mark.parametrize("case", list(CASES))
def test_training_shapes_correct(target, case):
    fn, make = CASES[case]
    torch.manual_seed(0)
    compile_and_check(fn, *make(), atol=ATOL.get(case, 1e-4), rtol=1e-4)


def _lower(tmp: Path) -> Callable[[Any, list, Any], None]:
    """A compile_fn that lowers the pipeline (Halide checks a schedule only when it lowers it)."""
    import halide as hl

    return lambda p, a, t: p.compile_to_lowered_stmt(str(tmp / "twin.stmt"), a, hl.StmtOutputFormat.Text, t)


def _cuda_twins(fn: Callable[..., Any], args: tuple, monkeypatch: pytest.MonkeyPatch, tmp: Path,
                lower: Callable[[Any, list, Any], None] | None = None,
                stmts: list[str] | None = None) -> list[tuple[Any, str, list[str], str]]:
    """Compile ``fn`` on the opencl target and each of its kernels again for CUDA with H100 caps (through ``lower``,
    default ``_lower``): [(meta, source, schedule lines, variant)]; ``stmts`` gets each twin's accepted lowering
    (``_lower``'s twin.stmt after the twin's last variant)."""
    twins, build = [], compiler.build

    def capture(meta, source, workdir, caps=None):
        _, lines, variant = compile_cuda_twin(meta, source, lower or _lower(tmp))
        twins.append((meta, source, lines, variant))
        if stmts is not None:
            stmts.append((tmp / "twin.stmt").read_text(errors="replace"))
        return build(meta, source, workdir, caps)

    monkeypatch.setattr(compiler, "build", capture)
    monkeypatch.setattr(compiler, "_memory", {})  # kernels loaded by earlier tests would skip build
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    import halide_xpu

    # a device target's source, as CUDA gets it (bf16 as bits, indirect indices clamped: the host target's
    # hl.require has no place in a CUDA kernel), without the error word CUDA kernels lack
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "opencl")
    monkeypatch.setattr(halide_xpu.config, "device_checks", False)
    torch._dynamo.reset()
    torch.compile(fn)(*args)
    return twins


@pytest.mark.parametrize("case", list(CASES))
def test_no_serial_device_reduction(case, monkeypatch, tmp_path):
    """A reduction over many points on one GPU work-item is a defect (ResNet-18's batch-norm backward: 211 ms of a
    240 ms step on the H100; BERT's loss: 2.1 ms); several pure outputs of one domain share one kernel."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    fn, make = CASES[case]
    twins = _cuda_twins(fn, make(), monkeypatch, tmp_path)
    assert twins
    for meta, source, lines, variant in twins:
        assert variant != "gpu_safe", (case, lines)
        _assert_split(meta, source, lines)
        if case in ("weight_bias_grads", "residual_norm_twins", "masked_softmax"):  # were staged: 8-12 launches
            assert variant in ("fused", "fused_warps"), (case, variant)  # one kernel (CUDA rows: a warp each)
        if case == "multi_output_pointwise":
            assert variant == "pointwise_fused" and sum("compute_with" in l for l in lines) == len(meta.outputs) - 1


def _assert_split(meta: Any, source: str, lines: list[str]) -> None:
    """Every reduction (a Func with an update) over >= 4096 points is split across work-items (``rfactor``); the
    only single-work-item stages left are final combines of a few partials."""
    points = 1
    for v in meta.loop_vars:
        if v.reduction:
            points *= v.static_extent or 1 << 20
    updated = [r for r in meta.reductions if len(re.findall(rf"^\s*{re.escape(r)}\[", source, re.MULTILINE)) > 1]
    if points >= 4096:
        for r in updated:
            assert any(re.match(rf"{re.escape(r)}(_\w+)?\.update\(\d*\)\.rfactor", l) for l in lines), (r, lines)


HARVESTED = sorted((Path(__file__).parent / "data" / "harvested").glob("*/meta.repr"))


@pytest.mark.parametrize("entry", [p.parent for p in HARVESTED], ids=[p.parent.name for p in HARVESTED])
def test_harvested_kernels_split_their_reductions(entry, tmp_path):
    """Real kernels from H100 training steps (tests/data/harvested): each reduction over >= 4096 points is split
    across work-items (``rfactor``), never summed by one work-item; no variant falls back to ``gpu_safe``."""
    meta = dataclasses.replace(load_meta(entry), halide_target=CUDA_TARGET)
    _, lines, variant = compiler.compile_scheduled(meta, (entry / "kernel.py").read_text(), _lower(tmp_path), H100)
    if "8b1eef8b9e44" in entry.name:  # AdamW (768 points): one kernel, the overwritten inputs read into registers
        assert variant == "pointwise_fused", variant
        assert sum("compute_with" in line for line in lines) == 2, lines
        assert sum(".compute_at(out_ptr0, out_ptr0_wi)" in line for line in lines) == 3, lines
        assert (tmp_path / "twin.stmt").read_text(errors="replace").count("halide_cuda_run(") == 1  # launches
    assert variant != "gpu_safe", lines
    _assert_split(meta, (entry / "kernel.py").read_text(), lines)


@pytest.mark.parametrize("entry", [p.parent for p in HARVESTED], ids=[p.parent.name for p in HARVESTED])
def test_harvested_kernels_read_no_input_on_the_host(entry, tmp_path):
    """No stage is computed only when "used" under a condition Halide evaluates in host code: with CUDA tensors
    used in place that code loads device memory through a null host pointer (the scalar cross-entropy's hoisted
    ``exp`` under a select segfaulted on the H200)."""
    meta = dataclasses.replace(load_meta(entry), halide_target=CUDA_TARGET)
    compiler.compile_scheduled(meta, (entry / "kernel.py").read_text(), _lower(tmp_path), H100)
    host = (tmp_path / "twin.stmt").read_text(errors="replace")
    assert ".used" not in host, re.findall(r".*\.used.*", host)[:3]


@pytest.mark.parametrize("n,launches", [(256, 1), (16384, 1), (1 << 18, 2)])
def test_short_scalar_reduction_is_one_kernel(n, launches, monkeypatch, tmp_path):
    """A reduction to a scalar of at most ``single_group_max`` points is one work-group in the output's kernel (a
    256-element sum was 2 launches of 132 work-groups on the H100); longer ones stream over many work-groups."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    twins = _cuda_twins(lambda x: (x * x).sum(), (torch.randn(n),), monkeypatch, tmp_path)
    assert len(twins) == 1 and twins[0][3] != "gpu_safe"
    _assert_split(*twins[0][:3])
    assert (tmp_path / "twin.stmt").read_text(errors="replace").count("halide_cuda_run(") == launches


def _twin_launches(fn: Callable[..., Any], args: tuple, monkeypatch: pytest.MonkeyPatch, tmp: Path) -> list[tuple[str, int]]:
    """(variant, device kernels) of each of ``fn``'s kernels compiled as a CUDA twin."""
    counts, lower = [], _lower(tmp)

    def count(p, a, t):
        lower(p, a, t)
        counts.append((tmp / "twin.stmt").read_text(errors="replace").count("halide_cuda_run("))

    twins = _cuda_twins(fn, args, monkeypatch, tmp, count)
    return [(variant, n) for (_, _, _, variant), n in zip(twins, counts)]


FORMS = [(0, "fused"), (4, "fused_warps")]  # warp_rows: a work-group per row (OpenCL, Intel GPUs), CUDA's warps


@pytest.mark.parametrize("warp_rows,form", FORMS)
def test_norm_forward_saved_stats_one_kernel(warp_rows, form, monkeypatch, tmp_path):
    """A training LayerNorm's forward writes the normalised rows and each row's mean and rstd: one kernel, the row
    results written by one work-item of the row's work-group (was 8 launches: the reductions staged at root)."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(__import__("halide_xpu").config, "schedule_overrides", {"warp_rows": warp_rows})

    def fwd(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        mean = x.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
        return (x - mean) * rstd * w, mean, rstd

    found = _twin_launches(fwd, (torch.randn(512, 768), torch.randn(768)), monkeypatch, tmp_path)
    assert found == [(form, 1)], found


@pytest.mark.parametrize("warp_rows,form", FORMS)
def test_residual_norm_twin_outputs_one_kernel(warp_rows, form, monkeypatch, tmp_path):
    """GPT-2's first block: the residual sum and its LayerNorm are both outputs over (batch, tokens, features); the
    sum is computed with the norm's row loops (was rejected by Halide, loops named after the sum: 6 launches, 6.1x
    Triton on the H100)."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(__import__("halide_xpu").config, "schedule_overrides", {"warp_rows": warp_rows})

    def block(x: torch.Tensor, e: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = x + e
        return h, torch.nn.functional.layer_norm(h, (h.shape[-1],), w)

    for fn in (block, _residual_norm):
        found = _twin_launches(fn, (torch.randn(4, 128, 768), torch.randn(128, 768), torch.randn(768)),
                               monkeypatch, tmp_path)
        assert found == [(form, 1)], found
        # each work-group stages its own row, not every row of a fused row dim (925 KB)
        launch = re.search(r"halide_cuda_run\([^,]+, \"[^\"]+\", (?:[^,]+, ){6}([^,]+),",
                           (tmp_path / "twin.stmt").read_text(errors="replace"))
        assert launch and eval(launch.group(1)) <= 48 * 1024, launch and launch.group(1)  # noqa: S307 (Halide's)


def test_masked_softmax_partials_in_local_memory(monkeypatch, tmp_path):
    """The boolean ``any`` of a masked softmax accumulates in 32 bits beside the float max and sum, so every
    partial stays in local memory (a 1-byte accumulator sent them all to global scratch: BERT's attention
    softmax 1.85x Triton on the H100). The work-group form (CUDA's warps keep partials in lanes' registers)."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(__import__("halide_xpu").config, "schedule_overrides", {"warp_rows": 0})
    mask = torch.where(torch.rand(4, 1, 1, 128) < 0.3, float("-inf"), 0.0)
    twins = _cuda_twins(_masked_softmax, (torch.randn(4, 3, 128, 128), mask), monkeypatch, tmp_path)
    assert [t[3] for t in twins] == ["fused"], [t[3] for t in twins]
    assert not [line for line in twins[0][2] if "Heap" in line], twins[0][2]


def _update_inputs(n: Any) -> tuple[torch.Tensor, ...]:
    """Three inputs of ``n`` points, or rows of a wider buffer for ``n = (rows, width, used)`` (a 2-D layout
    Inductor cannot flatten: strided rows)."""
    if isinstance(n, int):
        return tuple(torch.randn(n) for _ in range(3))
    rows, width, used = n
    return tuple(torch.randn(rows, width)[:, :used] for _ in range(3))


UPDATE_SHAPES = [(768 * 4, 1), (1001, 2), ((64, 320, 256), 1), ((64, 96, 64), 1), ((64, 40, 24), 2)]


@pytest.mark.parametrize("n,launches", UPDATE_SHAPES)
def test_in_place_update_reads_registers(n, launches, monkeypatch, tmp_path):
    """An optimizer-style in-place update of several buffers: each work-item loads the points it overwrites into
    registers before storing (one kernel) when the points tile exactly; otherwise the inputs are copied by a kernel
    first (a tail work-item's copy would read past the end). A 2-D layout: a row of vectors per work-group, which
    needs at least 32 of them (rows of 64 points: 32 pairs; of 24: the copies)."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    found = _twin_launches(_update, _update_inputs(n), monkeypatch, tmp_path)
    assert found == [("pointwise_fused", launches)], found


def _update(p: torch.Tensor, m: torch.Tensor, g: torch.Tensor) -> None:
    m.mul_(0.9).add_(g)
    p.sub_(0.1 * m / (p.abs() + 1))


@pytest.mark.parametrize("n", [n for n, _ in UPDATE_SHAPES])
def test_in_place_update_correct(target, n):
    """The in-place update above gives eager's values on every target, with and without register copies."""
    import halide_xpu

    torch.manual_seed(0)
    base = _update_inputs(n)
    ref = [t.clone() for t in base]
    _update(*ref)
    got = on_target(tuple(t.clone() for t in base))
    halide_xpu.stats.reset()
    torch._dynamo.reset()
    torch.compile(_update, fullgraph=True)(*got)
    assert halide_xpu.stats.counters["kernels_generated"] >= 1 and not halide_xpu.stats.fallbacks
    for a, b in zip(got, ref):
        torch.testing.assert_close(a.cpu(), b)


def _bf16_step(p: torch.Tensor, m: torch.Tensor, g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    _update(p, m, g)
    return F.pad(x, (0, 3)).to(torch.bfloat16) * 2


def _bf16_outputs(p: torch.Tensor, g: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    m = p * 0.9 + g
    return p - 0.1 * m / (p.abs() + 1), m, F.pad(x, (0, 3)).to(torch.bfloat16) * 2


@pytest.mark.parametrize("n", [768 * 4, 1001])
def test_narrow_lanes_are_strided(n, monkeypatch, tmp_path):
    """CUDA pointwise kernels with 16-bit buffers unroll their lanes (Plan.unroll_lanes) a work-group apart
    (``strided``), so each load and store instruction of a warp is contiguous. Kernels of several outputs keep
    adjacent lanes (H100: in-place AdamW with register copies 898 -> 981 µs strided, a 3-output bf16 update
    0.54x -> 0.84x Triton)."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))  # every kernel built here
    monkeypatch.setattr(__import__("halide_xpu").config, "schedule_overrides", {"pairs": 0})  # 16-bit elements
    monkeypatch.setattr(pointwise, "MIN_WAVES", 0)  # small kernels: lanes kept (see test_strided_lanes_fill_the_device)
    args = tuple(torch.randn(n, dtype=torch.bfloat16) for _ in range(2)) + (torch.randn(37, 29),)
    twins = _cuda_twins(_bf16_outputs, args, monkeypatch, tmp_path)
    assert sorted(t[3] for t in twins) == ["pointwise", "pointwise_fused"], [t[3] for t in twins]
    for meta, _, lines, variant in twins:
        strided = [line for line in lines if re.search(r"reorder\(\w+_u, \w+_wi, \w+_wg\)", line)]
        if variant == "pointwise":  # the padded cast
            assert strided and not [line for line in lines if "_lanes" in line], lines
        else:
            assert not strided, lines


@pytest.mark.parametrize("n", [768 * 4, 1001])
def test_strided_lanes_correct(n, monkeypatch, tmp_path):
    """The strided-lane schedules (CUDA's, above) give the same bits as the adjacent-lane ones, run on the OpenCL
    device here (against Inductor's values: eager differs in bf16, Inductor keeping fp32 intermediates)."""
    import halide_xpu
    from halide_xpu.schedule import common

    if not opencl_available():
        pytest.skip("no OpenCL device")
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "opencl")
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"pairs": 0})  # 16-bit elements
    monkeypatch.setattr(pointwise, "MIN_WAVES", 0)
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    torch.manual_seed(0)
    base = tuple(torch.randn(n, dtype=torch.bfloat16) for _ in range(3)) + (torch.randn(37, 29),)
    results = []
    for strided in (False, True):
        if strided:
            monkeypatch.setattr(common.Plan, "unroll_lanes", property(lambda self: True))
        monkeypatch.setattr(compiler, "_memory", {})
        monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path / str(strided)))  # no kernel reused
        torch._dynamo.reset()
        halide_xpu.stats.reset()
        got = [t.clone() for t in base]
        out = torch.compile(_bf16_step, fullgraph=True)(*got)
        assert halide_xpu.stats.counters["kernels_generated"] >= 2 and not halide_xpu.stats.fallbacks
        results.append([out, *got])
    schedules = "".join(p.read_text() for p in (tmp_path / "True").rglob("schedule.txt"))
    assert "_u, " in schedules, schedules  # the strided form ran (the padded cast has lanes at either n)
    for a, b in zip(*results):
        assert torch.equal(a, b)


def _bf16_rows(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = F.layer_norm(x, (x.shape[-1],), w, b)
    return y, torch.softmax(x.float() * 0.5, -1).to(x.dtype), (x.float() ** 2).mean(-1)


@pytest.mark.parametrize("width", [768, 1000])
def test_strided_row_lanes_correct(width, monkeypatch, tmp_path):
    """Row reductions of bf16 with strided unrolled lanes (CUDA's form, run on the OpenCL device here): eager's
    values within bf16 tolerance, and the strided form is what ran."""
    import halide_xpu
    from halide_xpu.schedule import common

    if not opencl_available():
        pytest.skip("no OpenCL device")
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "opencl")
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(common.Plan, "unroll_lanes", property(lambda self: True))
    monkeypatch.setattr(common.Plan, "gpu_vectors", property(lambda self: True))  # lanes unrolled, as on CUDA
    monkeypatch.setattr(compiler, "_memory", {})
    torch._dynamo.reset()
    torch.manual_seed(0)
    args = (torch.randn(6, width, dtype=torch.bfloat16), torch.randn(width, dtype=torch.bfloat16),
            torch.randn(width, dtype=torch.bfloat16))
    halide_xpu.stats.reset()
    got = torch.compile(_bf16_rows, fullgraph=True)(*args)
    assert halide_xpu.stats.counters["kernels_generated"] and not halide_xpu.stats.fallbacks
    torch.testing.assert_close(got, _bf16_rows(*args), atol=2e-2, rtol=2e-2)
    schedules = "".join(p.read_text() for p in tmp_path.rglob("schedule.txt"))
    assert re.search(r"reorder\(\w+_lanes, \w+_step, \w+_wi", schedules), schedules


def _cast_scale(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x.float() * 2 + y).to(torch.bfloat16)


@pytest.mark.parametrize("n", [2 * 256 * 3, 1001])
def test_staged_lanes(n, monkeypatch, tmp_path):
    """``stage_lanes`` (CUDA, 16-bit buffers, on by default for kernels without transcendentals): a work-group
    copies its points of every input to local memory before it stores any (ptxas keeps each unrolled lane's load
    behind the previous lane's store); only where the points tile exactly.
    The same bits as the default schedule, run on the OpenCL device with CUDA's unrolled lanes."""
    import halide_xpu
    from halide_xpu.schedule import common

    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path / "twins"))
    # the elementwise form (16-bit lanes) that kernels with unpaired bf16 buffers take (test_pairs.py: the rest)
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"pairs": 0})
    args = (torch.randn(n, dtype=torch.bfloat16), torch.randn(n))
    twins = _cuda_twins(_cast_scale, args, monkeypatch, tmp_path)
    lines = "\n".join(twins[0][2])
    assert ("compute_at(out_ptr0, out_ptr0_wg)" in lines) == (n % 8 == 0), lines
    if not opencl_available():
        return
    monkeypatch.setattr(common.Plan, "unroll_lanes", property(lambda self: True))
    monkeypatch.setattr(common.Plan, "gpu_vectors", property(lambda self: True))
    results = []
    for overrides in ("stage_lanes=1,pairs=0", "stage_lanes=0,pairs=0"):
        monkeypatch.setattr(halide_xpu.config, "schedule_overrides", overrides)
        monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path / f"run{overrides}"))
        monkeypatch.setattr(compiler, "_memory", {})
        torch._dynamo.reset()
        halide_xpu.stats.reset()
        results.append(torch.compile(_cast_scale, fullgraph=True)(*args))
        assert halide_xpu.stats.counters["kernels_generated"] and not halide_xpu.stats.fallbacks
    assert torch.equal(results[0], results[1]) and torch.equal(results[0], _cast_scale(*args))


def test_transcendental_kernels_are_not_staged(monkeypatch, tmp_path):
    """A bf16 tanh gelu (compute-bound) keeps plain strided lanes: staging made it 0.96 -> 1.12x Triton (the
    elementwise form, ``pairs`` 0; with pairs it loads words, test_pairs.py)."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(__import__("halide_xpu").config, "schedule_overrides", {"pairs": 0})
    monkeypatch.setattr(pointwise, "MIN_WAVES", 0)
    twins = _cuda_twins(lambda x: F.gelu(x, approximate="tanh"), (torch.randn(2 * 256 * 8, dtype=torch.bfloat16),),
                        monkeypatch, tmp_path)
    lines = "\n".join(twins[0][2])
    assert "_u, " in lines and "in_()" not in lines, lines


@pytest.mark.parametrize("cols, lanes", [(767, 4), (4095, 16)])
def test_strided_lanes_fill_the_device(cols, lanes, monkeypatch, tmp_path):
    """Strided lanes stop halving once the H100 twin's 132 compute units get ``MIN_WAVES`` work-groups each: 400
    rows of 767 bf16 take 4 lanes (16 gave 75 work-groups: GPT-2's position embeddings at 4.5x Triton's time on
    the H200), 400 rows of 4095 keep 16."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(__import__("halide_xpu").config, "schedule_overrides", {"pairs": 0})
    twins = _cuda_twins(lambda x: x * 2, (torch.randn(400, cols, dtype=torch.bfloat16),), monkeypatch, tmp_path)
    lines = "\n".join(twins[0][2])
    assert re.search(rf"out_ptr0_u, {lanes}, ", lines), lines


def test_staged_lanes_fit_local_memory(monkeypatch, tmp_path):
    """Twelve fp32 inputs of a bf16 output: the staged copies (12 x 4 bytes x 256 work-items per lane) must fit in
    half of the 48 KB of local memory, so fewer lanes are staged (8 lanes would need 96 KB: a launch that fails)."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    n = 8 * 256 * 2
    twins = _cuda_twins(lambda *xs: sum(xs).to(torch.bfloat16), tuple(torch.randn(n) for _ in range(12)),
                        monkeypatch, tmp_path)
    lines = "\n".join(twins[0][2])
    assert "in_()" in lines and re.search(r"out_ptr0_u, 2, ", lines), lines


def _norm_grads(g: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (g * x).sum(0), g.sum(0)


@pytest.mark.parametrize("rows", [125, 13, 128])
def test_column_split_with_a_tail(rows, monkeypatch, tmp_path):
    """Work-items share a short column although their shares do not divide it (the last rows guarded): Inductor
    splits 4000 rows into 32 partials of 125, where one work-item per column was 8x Triton on the H200. Same
    results as eager on the OpenCL device with the split forced, and the CUDA twin splits 125 rows 8 ways."""
    import halide_xpu

    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path / "twins"))
    args = (torch.randn(rows, 130), torch.randn(rows, 130))
    twins = _cuda_twins(_norm_grads, args, monkeypatch, tmp_path)
    lines = "\n".join(twins[0][2])
    assert re.search(r"rfactor\(\w+_cri, \w+_cu\)", lines) or rows < 16, lines
    if not opencl_available():
        return
    for overrides in ("col_split=8", "col_split=2", ""):
        monkeypatch.setattr(halide_xpu.config, "schedule_overrides", overrides)
        monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path / f"run{overrides}"))
        monkeypatch.setattr(compiler, "_memory", {})
        torch._dynamo.reset()
        halide_xpu.stats.reset()
        got = torch.compile(_norm_grads, fullgraph=True)(*args)
        assert halide_xpu.stats.counters["kernels_generated"] and not halide_xpu.stats.fallbacks
        torch.testing.assert_close(got, _norm_grads(*args), atol=1e-4, rtol=1e-4)
        schedules = "".join(p.read_text() for p in (tmp_path / f"run{overrides}").rglob("schedule.txt"))
        assert not overrides or re.search(r"rfactor\(\w+_cri, \w+_cu\)", schedules), schedules


def test_modular_index_weighs_its_buffer_not_its_range(monkeypatch, tmp_path):
    """An input read at a modular index (the NCHW relu mask beside channels-last rows) counts its own bytes, not the
    range its index dims span (777,777 x 512 "elements" of a 0.8 MB tensor on ResNet-18's H200 step): the column sum
    keeps the channels (stride 1 in 13 MB of rows) on the work-items, coalesced; it was a work-group per result
    reading down strided rows."""
    monkeypatch.setattr(__import__("halide_xpu").config, "cache_dir", str(tmp_path))
    (meta, _, lines, variant), = _cuda_twins(_split_chunks_with_mask, _split_chunks_inputs(), monkeypatch, tmp_path)
    weights = {v.name: v.contiguous_bytes for v in meta.loop_vars}
    channels = next(v.name for v in meta.loop_vars if v.static_extent == 512)
    assert max(weights.values()) == weights[channels] <= 32 * 512 * 49 * 4, weights
    assert variant == "fused" and any(f"gpu_tile({channels}," in line for line in lines), lines


def test_costly_scalars_include_the_math_helpers() -> None:
    """0-d values computed by ``hx.pow_constant_base``, ``hx.exp2`` or ``hx.log10`` count as costly (hoisted like
    ``hx.pow``): the pattern once matched only the names before them, so AdamW's bias corrections lost their hoist
    when they moved to ``pow_constant_base``."""
    from halide_xpu.schedule.common import costly_scalar_names

    defs = {"tmp1": (["()"], "hx.pow_constant_base(tmp0[()], tmp2[()], 0.999, -0.0010005)"),
            "tmp3": (["()"], "hx.exp2(tmp2[()])"), "tmp4": (["()"], "hx.log10(tmp2[()])"),
            "tmp5": (["()"], "tmp2[()] + tmp3[()]")}
    assert costly_scalar_names(defs) == ["tmp1", "tmp3", "tmp4"]



def test_no_vectors_in_local_memory():
    """Halide 21 packs a work-group's local allocations at offsets aligned to their element type but keeps each
    vector store's alignment from before: a 2-lane float32 row staged after a 1-element partial was stored 4 bytes
    off its 8 (CUDA misaligned address, test_row_reductions_backward[cuda-130-bf16] on the H100, compute-sanitizer:
    ``Invalid __shared__ write of size 8``). A stage stored per work-group unrolls its lanes; a variant that
    vectorized it before placing it there is refused (``Recorder``)."""
    import halide as hl

    from halide_xpu.schedule.common import GUARD, NotApplicable, Recorder

    x, y, v, lanes = hl.Var("x"), hl.Var("y"), hl.Var("v"), hl.Var("lanes")
    for order in ("placed first", "vectorized first"):
        g, f = hl.Func("g"), hl.Func("f")
        g[x, y] = x + y
        f[x, y] = g[x, y] * 2
        rec = Recorder()
        rec(f, "f", "gpu_blocks", y)
        if order == "placed first":
            rec(g, "g", "compute_at", f, y)
        rec(g, "g", "split", x, v, lanes, 2, GUARD)
        rec(g, "g", "vectorize", lanes)
        rec(f, "f", "vectorize", x, 4)  # an output's vectors stay
        if order == "placed first":
            assert "g.unroll(lanes)" in rec.lines and "f.vectorize(x, 4)" in rec.lines, rec.lines
            rec.check_local_vectors()
        else:
            rec(g, "g", "compute_at", f, y)
            with pytest.raises(NotApplicable, match="g stores vectors in local memory"):
                rec.check_local_vectors()

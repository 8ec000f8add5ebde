"""ResNet-18 training-step kernels that ran 1.4-6.6x Triton on the H200 (7a0102b): each becomes one kernel of the
fused form as a CUDA twin, and computes on the OpenCL device what the host build computes."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from conftest import opencl_available
from harvested import lower_to, opencl_equals_host, record
from halide_xpu.autotune.measure import parse_meta
from halide_xpu.schedule import gpu_columns

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from replay_kernel import compile_cuda_twin  # noqa: E402  (H100 caps, no GPU needed)

# key: (what it is, work-items sharing each column in the twin's schedule, or None)
KERNELS = {
    # a kernel per reduction, one work-item each: 11 launches, 29 us vs Triton's 4.4 us
    "882941ba4878": ("label-smoothed loss: 4 sums over 32 targets, 2 scalar outputs, a 32-row ignore mask", None),
    # the row form failed (the mean is not over the mask's dims); staged_shared ran at 3.2x Triton
    "80391df31a7e": ("pooled mean of 512 channels-last columns beside its NCHW relu mask", 8),
    # 2 work-items per column (4 with a 256-wide group): 1.4-2.1x; the H200 tuner picked 8 for every such kernel
    "79cca7e8e776": ("batch-norm backward column sums, 128 columns x 196 chunks of 128 rows", 8),
    "5dc527bd6f1c": ("batch-norm backward column sums, 64 columns x 784 chunks of 128 rows", 8),
    # few results: was two kernels (12 chunks with 64 of 256 work-items busy, then the chunks' sum), 3x Triton
    "f43a6f6853f2": ("second stage of a split column sum: 64 columns of 784 partials", 32),
    "4c49a309217d": ("second stage of a split column sum: 128 columns of 196 partials", 32),
}
FEW = {"f43a6f6853f2": 8, "4c49a309217d": 16}  # work-groups of 8 columns (32 bytes a row), 32 work-items each
# twin only (25.7M elements): 8 work-items per column ran at 88 us, 2 at 61 us with 4 rows a step (guarded at 49
# rows); in steps of 7 rows, 8 at 46.8 us (H200, col_unroll_sweep_*.md)
TWIN_ONLY = {"4a501c05eefc": ("batch-norm statistics chunk pass, 64 columns x 1024 chunks of 392 rows", 8),
             # two independent sums read 300 MB in two passes: 124 us vs Triton's one pass, 75 us
             "4bb2ad8c1362": ("batch-norm backward column sums, 64 columns x 1024 chunks of 392 rows", 8)}
# sums of one kernel that read each row once (one pass), or not (the variance needs the mean first)
ONE_PASS = {"79cca7e8e776": True, "5dc527bd6f1c": True, "4bb2ad8c1362": True, "4a501c05eefc": False}


@pytest.mark.parametrize("key", [*KERNELS, *TWIN_ONLY], ids=[*KERNELS, *TWIN_ONLY])
def test_one_fused_kernel_as_cuda_twin(key, tmp_path):
    rec = record(key)
    stmt = tmp_path / "k.stmt"
    _, lines, variant = compile_cuda_twin(parse_meta(rec["meta"]), rec["source"], lower_to(stmt))
    assert variant == "fused", (variant, lines)
    assert not [line for line in lines if "gpu_single_thread" in line], lines
    text = stmt.read_text(errors="replace")
    assert text.count("halide_cuda_run(") == 1, "one launch"
    share = {**KERNELS, **TWIN_ONLY}[key][1]
    if share is not None:  # halide_cuda_run(state, name, blocks x, y, z, threads x, y, z, ...)
        launch = re.search(r'halide_cuda_run\([^,]+, "[^"]+", \d+, \d+, \d+, \d+, (\d+), \d+', text)
        assert launch and int(launch.group(1)) == share, "work-items per column"
    if key in FEW:
        assert re.search(rf'halide_cuda_run\([^,]+, "[^"]+", {FEW[key]}, 1, 1, 8, 32, 1', text), "8 columns a group"
    if key == "80391df31a7e":  # the mask's 49 rows dealt to the 8 work-items of each column, not one walking all
        assert any(re.search(r"\.split\(h0, [\w$]+_wro, [\w$]+_wri, 8,", line) for line in lines), lines
    if key == "882941ba4878":  # the gathered summands a work-item per target, not 32 on the sums' one work-item
        assert any("summands a work-item per point: " in line for line in lines), lines
        assert sum(bool(re.match(r"tmp[\w$]*\.gpu_threads\(h0\)", line)) for line in lines) == 2, lines
    if key in TWIN_ONLY:  # shares of 49 rows in unguarded steps of 7 (gpu_columns.share_unroll)
        assert any(re.search(r"_croi, 7, hl.TailStrategy", line) for line in lines), lines
    if key in ONE_PASS:  # (Func names carry Halide's $N suffix when a process has built others)
        one = r"tmp[\w$]*_intm\S*\.update\(\)\.compute_with\(tmp[\w$]*_intm"
        fused = [line for line in lines if re.match(one, line)]
        assert bool(fused) == ONE_PASS[key], lines


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("key", list(KERNELS), ids=list(KERNELS))
def test_correct_on_opencl(key, monkeypatch, tmp_path):
    """The CUDA kernel's source built for the OpenCL device with its GPU schedules equals the host build."""
    if key in FEW:  # the few-results form on any OpenCL device (its compute units decide what is few)
        monkeypatch.setattr(gpu_columns, "FEW_PER_UNIT", 1 << 20)
    assert opencl_equals_host(record(key), monkeypatch, tmp_path) == "fused"

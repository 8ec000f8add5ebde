"""Batch-norm statistics as Inductor splits them on GPUs (a Welford pass per chunk, then a combine), harvested from
ResNet-18's H200 fp32 training step: they take the fused column form (one work-group per block of columns), not
the staged form of one kernel per reduction, and compute the same numbers as the host schedule."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from conftest import opencl_available
from harvested import opencl_equals_host, record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from replay_kernel import compile_cuda_twin  # noqa: E402  (H100 caps, no GPU needed)
from halide_xpu.autotune.measure import parse_meta  # noqa: E402

# 134abe3 on the H200: each took the staged form (a kernel per reduction, one work-group of them), 8-15x Triton
KERNELS = {
    "d8bccc995628": "combine of 98 chunk statistics per channel, 2 x 128 columns",
    "296571f8bfba": "combine of 49 chunk statistics, 256 channels",
    "cf5d9c873348": "chunk pass: 128 rows of 256 channels x 49 chunks (var_mean's shifted two-pass form)",
    "e861137da4d3": "chunk pass with a per-chunk count that lacks the channel dim (was StopIteration)",
}


def _lower(tmp_path: Path):
    import halide as hl

    return lambda p, a, t: p.compile_to({hl.OutputFileType.conceptual_stmt: str(tmp_path / "k.stmt")}, a, "k", t)


@pytest.mark.parametrize("key", list(KERNELS), ids=list(KERNELS))
def test_split_statistics_take_the_fused_column_form(key, tmp_path):
    rec = record(key)
    _, lines, variant = compile_cuda_twin(parse_meta(rec["meta"]), rec["source"], _lower(tmp_path))
    assert variant == "fused", (variant, lines)
    assert not [line for line in lines if "gpu_single_thread" in line], lines
    stmt = (tmp_path / "k.stmt").read_text(errors="replace")
    assert stmt.count("gpu_block<CUDA>") <= 2, "one kernel (its blocks over at most two dims)"


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("col_split", [8, 2])
@pytest.mark.parametrize("key", list(KERNELS), ids=list(KERNELS))
def test_split_statistics_correct_on_opencl(key, col_split, monkeypatch, tmp_path):
    """The CUDA kernel's source built for the OpenCL device with its GPU schedules (columns shared by ``col_split``
    work-items) equals the host build of the same source."""
    variant = opencl_equals_host(record(key), monkeypatch, tmp_path, col_split=col_split)
    assert variant == "fused"
    schedule = "".join(p.read_text() for p in tmp_path.rglob("schedule.txt"))
    assert re.search(r"rfactor\(\w+_cri, \w+_cu\)", schedule), schedule  # work-items share each column

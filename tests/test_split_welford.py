"""Batch-norm statistics as Inductor splits them on GPUs (a Welford pass per chunk, then a combine), harvested from
ResNet-18's H200 fp32 training step: they take the fused column form (one work-group per block of columns), not
the staged form of one kernel per reduction, and compute the same numbers as the host schedule."""
from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest
import torch

import halide_xpu
from halide_xpu import compiler
from halide_xpu.autotune.measure import _storage_elements, outputs_match, parse_meta
from halide_xpu.target import targets

from conftest import opencl_available

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from replay_kernel import compile_cuda_twin  # noqa: E402  (H100 caps, no GPU needed)

RECORDS = Path(__file__).parents[1] / "benchmarks" / "results" / "NVIDIA_H200" / "tune_kernels_resnet18_fp32_train.jsonl"
# 134abe3 on the H200: each took the staged form (a kernel per reduction, one work-group of them), 8-15x Triton
KERNELS = {
    "d8bccc995628": "combine of 98 chunk statistics per channel, 2 x 128 columns",
    "296571f8bfba": "combine of 49 chunk statistics, 256 channels",
    "cf5d9c873348": "chunk pass: 128 rows of 256 channels x 49 chunks (var_mean's shifted two-pass form)",
    "e861137da4d3": "chunk pass with a per-chunk count that lacks the channel dim (was StopIteration)",
}


def _record(key: str) -> dict:
    return next(r for r in map(json.loads, RECORDS.open()) if key in r["name"])


def _lower(tmp_path: Path):
    import halide as hl

    return lambda p, a, t: p.compile_to({hl.OutputFileType.conceptual_stmt: str(tmp_path / "k.stmt")}, a, "k", t)


@pytest.mark.parametrize("key", list(KERNELS), ids=list(KERNELS))
def test_split_statistics_take_the_fused_column_form(key, tmp_path):
    rec = _record(key)
    _, lines, variant = compile_cuda_twin(parse_meta(rec["meta"]), rec["source"], _lower(tmp_path))
    assert variant == "fused", (variant, lines)
    assert not [line for line in lines if "gpu_single_thread" in line], lines
    stmt = (tmp_path / "k.stmt").read_text(errors="replace")
    assert stmt.count("gpu_block<CUDA>") <= 2, "one kernel (its blocks over at most two dims)"


def _inputs(meta) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    args = []
    for a in meta.call_args:
        size = _storage_elements(a, meta)
        t = torch.rand(size, generator=gen) + 0.5 if a.kind == "in" else torch.zeros(size)
        args.append(t.to(getattr(torch, a.dtype)))
    return args


def _run(meta, source: str) -> tuple[list[torch.Tensor], str]:
    args = _inputs(meta)
    launcher = compiler.load(meta, source)
    launcher(*args)
    return [t for t, a in zip(args, meta.call_args) if a.kind == "out"], launcher.variant


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
@pytest.mark.parametrize("col_split", [8, 2])
@pytest.mark.parametrize("key", list(KERNELS), ids=list(KERNELS))
def test_split_statistics_correct_on_opencl(key, col_split, monkeypatch, tmp_path):
    """The CUDA kernel's source built for the OpenCL device with its GPU schedules (columns shared by ``col_split``
    work-items) equals the host build of the same source."""
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    rec = _record(key)
    meta = parse_meta(rec["meta"])
    gpu = dataclasses.replace(meta, target="opencl", device_type="cpu", halide_target=targets.halide_target("opencl"),
                              schedule=meta.schedule.with_params(col_split=col_split))
    got, variant = _run(gpu, rec["source"])
    assert variant == "fused"
    schedule = "".join(p.read_text() for p in tmp_path.rglob("schedule.txt"))
    assert re.search(r"rfactor\(\w+_cri, \w+_cu\)", schedule), schedule  # work-items share each column
    host = dataclasses.replace(meta, target="host", device_type="cpu", halide_target=targets.halide_target("host"),
                               schedule=meta.schedule.with_params(vector=8))
    want, _ = _run(host, rec["source"])
    for w, g in zip(want, got):
        assert outputs_match(w, g), (w[:8], g[:8])

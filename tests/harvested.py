"""Kernels harvested from ResNet-18's H200 fp32 training step (sources + metas, tune_kernels_*.jsonl): built as CUDA
twins (H100 caps, no GPU) and run on the OpenCL device against the host build of the same source."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

import halide_xpu
from halide_xpu import compiler
from halide_xpu.autotune.measure import _storage_elements, outputs_match, parse_meta
from halide_xpu.target import targets

RECORDS = Path(__file__).parents[1] / "benchmarks" / "results" / "NVIDIA_H200" / "tune_kernels_resnet18_fp32_train.jsonl"


def record(key: str) -> dict:
    """The harvested kernel whose name holds ``key`` (its source hash)."""
    return next(r for r in map(json.loads, RECORDS.open()) if key in r["name"])


def lower_to(path: Path) -> Any:
    """A ``compile_fn`` for ``compile_cuda_twin`` that writes the lowered statement (with its launches) to ``path``."""
    import halide as hl

    return lambda p, a, t: p.compile_to_lowered_stmt(str(path), a, hl.StmtOutputFormat.Text, t)


def inputs(meta: Any) -> list[torch.Tensor]:
    """Seeded inputs (floats in [0.5, 1.5); integer class indices 0 or 1, every fifth the ignore index -100) and
    zeroed outputs, sized by each argument's storage."""
    gen = torch.Generator().manual_seed(0)
    args = []
    for a in meta.call_args:
        size = _storage_elements(a, meta)
        t = torch.rand(size, generator=gen) + 0.5 if a.kind == "in" else torch.zeros(size)
        t = t.to(getattr(torch, a.dtype))
        if a.kind == "in" and a.dtype == "int64":
            t[::5] = -100
        args.append(t)
    return args


def run(meta: Any, source: str) -> tuple[list[torch.Tensor], str]:
    """Outputs of one launch of ``source`` built for ``meta``'s target, and the schedule variant it took."""
    args = inputs(meta)
    launcher = compiler.load(meta, source)
    launcher(*args)
    return [t for t, a in zip(args, meta.call_args) if a.kind == "out"], launcher.variant


def opencl_equals_host(rec: dict, monkeypatch: Any, tmp_path: Path, **params: int) -> str:
    """Build the CUDA kernel's source for the OpenCL device (its GPU schedules, ``params`` forced) and for the
    host; assert equal outputs; returns the OpenCL build's variant."""
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    meta = parse_meta(rec["meta"])
    gpu = dataclasses.replace(meta, target="opencl", device_type="cpu", halide_target=targets.halide_target("opencl"),
                              schedule=meta.schedule.with_params(**params) if params else meta.schedule)
    got, variant = run(gpu, rec["source"])
    host = dataclasses.replace(meta, target="host", device_type="cpu", halide_target=targets.halide_target("host"),
                               schedule=meta.schedule.with_params(vector=8))
    want, _ = run(host, rec["source"])
    for w, g in zip(want, got):
        assert outputs_match(w, g), (w[:8], g[:8])
    return variant

"""One generated kernel under Halide's OpenCL target with device-resident buffers vs the same kernel on CUDA."""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional

import numpy as np
import torch

from halide_xpu import compiler, runtime
from halide_xpu.runtime import HalideKernelError
from halide_xpu.meta import ArgSpec, KernelMeta
from halide_xpu.target import opencl_devices, targets

_NUMPY = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16, "float64": np.float64, "int64": np.int64,
          "int32": np.int32, "int8": np.int8, "uint8": np.uint8, "bool": np.uint8}


def _layout(a: ArgSpec) -> tuple[list[int], list[int], int]:
    shape, stride = [int(e) for e in a.shape], [int(s) for s in a.stride]
    span = 1 + sum((e - 1) * s for e, s in zip(shape, stride)) if shape else 1
    return shape, stride, span + int(a.offset)


def _host_arrays(meta: KernelMeta, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A base array per buffer argument (inputs random, outputs zero), sized for its layout."""
    out = {}
    for a in meta.call_args:
        if not a.is_buffer:
            raise ValueError("static shapes only")
        _, _, span = _layout(a)
        dt = _NUMPY[a.dtype]
        if a.kind == "in" and a.dtype in ("float32", "float16", "float64"):
            out[a.name] = rng.standard_normal(span).astype(dt)
        elif a.kind == "in" and a.dtype == "bfloat16":
            out[a.name] = (rng.standard_normal(span).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        elif a.kind == "in":
            out[a.name] = rng.integers(0, 2 if a.dtype == "bool" else 100, span).astype(dt)
        else:
            out[a.name] = np.zeros(span, dtype=dt)
    return out


def _view(base: np.ndarray, a: ArgSpec) -> np.ndarray:
    shape, stride, _ = _layout(a)
    item = base.itemsize
    if not shape:
        return base[int(a.offset):int(a.offset) + 1].reshape(())
    return np.lib.stride_tricks.as_strided(base[int(a.offset):], shape=shape[::-1], strides=[s * item for s in stride[::-1]])


def measure(launcher: Any, reps: int = 20) -> dict[str, Any]:
    """Time ``launcher``'s kernel on CUDA (tensors in place; skipped without CUDA) and under halide-xpu's OpenCL
    target on the selected OpenCL device, buffers resident there (the pipeline runs n times on the same
    buffers: one upload and one download, subtracted out); compare their outputs."""
    meta = launcher.meta
    dev = opencl_devices.require_device()
    if not dev.fp16 and any(a.dtype == "float16" for a in meta.args):
        raise ValueError(f"{dev.name}'s OpenCL has no cl_khr_fp16 (float16 kernels cannot run there)")
    ocl_meta = dataclasses.replace(meta, target="opencl", halide_target=targets.halide_target("opencl"), device_type="cpu")
    source = (launcher.library.parent / "kernel.py").read_text()
    t0 = time.perf_counter()
    ocl = compiler.load(ocl_meta, source)
    compile_s = time.perf_counter() - t0
    bases = _host_arrays(meta, np.random.default_rng(0))
    cuda = torch.cuda.is_available() and meta.target == "cuda"
    cuda_us, cuda_bases = (_time_cuda(launcher, bases, reps) if cuda else (None, {}))
    opencl_us = _time_opencl(ocl, bases, reps, cuda_us)
    errors = []
    for a in (a for a in meta.args if a.kind == "out" and cuda):
        got = _view(bases[a.name], a).astype(np.float64)
        ref = cuda_bases[a.name].float().cpu().numpy() if a.dtype != "bfloat16" else None
        if ref is not None:
            errors.append(float(np.nanmax(np.abs(got - _view(ref, a)))) if got.size else 0.0)
    return {"cuda_us": cuda_us, "opencl_us": opencl_us, "opencl_compile_s": compile_s, "opencl_variant": ocl.variant,
            "opencl_device": dev.name, "max_abs_diff_vs_cuda": max(errors) if errors else None}


def _time_cuda(launcher: Any, bases: dict[str, np.ndarray], reps: int) -> tuple[float, dict[str, torch.Tensor]]:
    meta = launcher.meta
    cuda_bases = {}
    for a in meta.call_args:
        t = torch.from_numpy(bases[a.name].view(np.int16) if a.dtype == "bfloat16" else bases[a.name]).cuda()
        cuda_bases[a.name] = t.view(torch.bfloat16) if a.dtype == "bfloat16" else (t.bool() if a.dtype == "bool" else t)
    args = [cuda_bases[a.name] for a in meta.call_args]
    stream = torch.cuda.current_stream().cuda_stream
    launcher(*args, stream)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        launcher(*args, stream)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / reps, cuda_bases


def _time_opencl(ocl: Any, bases: dict[str, np.ndarray], reps: int, estimate_us: Optional[float] = None) -> float:
    """Per-run µs of the OpenCL pipeline with buffers on the device: (T(1 + reps) - T(1)) / reps, best of 3."""
    import ctypes

    meta = ocl.meta
    fn = ocl._lib.hx_launch_n
    fn.restype = ctypes.c_int
    fn.argtypes = list(ocl._fn.argtypes) + [ctypes.c_int32]
    ptrs = [bases[a.name].ctypes.data for a in meta.call_args]

    def run(n: int) -> float:
        t0 = time.perf_counter()
        if fn(*ptrs, n):
            raise HalideKernelError(f"OpenCL kernel failed: {getattr(runtime._errors, 'last', '')}")
        return time.perf_counter() - t0

    first = run(1)
    # the repeated kernels must outweigh the noise of the one upload and download: aim at ~0.3 s of kernels
    estimate = (estimate_us * 1e-6) if estimate_us else first / 50
    reps = max(reps, min(2000, int(0.3 / max(estimate, 1e-6))))
    single = min(run(1) for _ in range(3))
    many = min(run(1 + reps) for _ in range(3))
    return max(many - single, 0.0) / reps * 1e6

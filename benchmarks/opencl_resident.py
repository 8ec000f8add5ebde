"""One generated kernel under Halide's OpenCL target with device-resident buffers vs the same kernel on CUDA."""
from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import torch

from halide_xpu import compiler
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
    """Time ``launcher``'s kernel on CUDA (tensors in place; skipped without CUDA) and under Halide's OpenCL
    target (JIT, buffers kept on the OpenCL device), same inputs; compare their outputs."""
    import halide as hl

    meta = launcher.meta
    dev = opencl_devices.require_device()
    ocl_target = targets.halide_target("opencl").replace("-no_runtime", "")
    ocl_meta = dataclasses.replace(meta, target="opencl", halide_target=ocl_target, device_type="cpu")
    source = (launcher.library.parent / "kernel.py").read_text()
    t0 = time.perf_counter()
    fn, _, variant = compiler.compile_scheduled(ocl_meta, source, lambda p, args, t: p.compile_to_callable(args, t),
                                                caps=targets.device_caps("opencl"))
    compile_s = time.perf_counter() - t0
    bases = _host_arrays(meta, np.random.default_rng(0))
    cuda = torch.cuda.is_available() and meta.target == "cuda"
    cuda_us, cuda_bases = (_time_cuda(launcher, bases, reps) if cuda else (None, {}))
    result = _time_opencl(fn, meta, bases, ocl_target, reps)
    errors = []
    for a in (a for a in meta.args if a.kind == "out" and cuda):
        got = _view(bases[a.name], a).astype(np.float64)
        ref = cuda_bases[a.name].float().cpu().numpy() if a.dtype != "bfloat16" else None
        if ref is not None:
            want = _view(ref, a)
            errors.append(float(np.nanmax(np.abs(got - want))) if got.size else 0.0)
    return {"cuda_us": cuda_us, "opencl_us": result, "opencl_compile_s": compile_s, "opencl_variant": variant,
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


def _time_opencl(fn: Any, meta: KernelMeta, bases: dict[str, np.ndarray], target: str, reps: int) -> float:
    """Per-call µs with every buffer resident on the OpenCL device (copied there once); results left in ``bases``."""
    import halide as hl

    buffers = {a.name: hl.Buffer(_view(bases[a.name], a)) for a in meta.call_args}
    for b in buffers.values():
        b.set_host_dirty(True)
        b.copy_to_device(hl.DeviceAPI.OpenCL, hl.Target(target))
    ins = [buffers[a.alias_of or a.name] for a in meta.args if a.kind == "in"]
    outs = [buffers[a.alias_of or a.name] for a in meta.args if a.kind == "out"]
    fn(*ins, *outs)
    for o in outs:
        o.device_sync()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn(*ins, *outs)
        for o in outs:
            o.device_sync()
        best = min(best, (time.perf_counter() - t0) / reps * 1e6)
    for o in outs:
        o.copy_to_host()
    return best

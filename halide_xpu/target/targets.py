"""Halide target strings and device capabilities per halide-xpu target (host, opencl, sycl, cuda)."""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Optional

from .. import config
from . import opencl_devices, sycl_devices


@dataclasses.dataclass(frozen=True)
class DeviceCaps:
    """What a schedule needs to know about the device it runs on."""

    gpu: bool  # GPU-style schedule (work-groups) vs CPU-style (parallel + vectorize)
    parallelism: int  # cores (host) or compute units (GPU)
    vector_width: int  # fp32 lanes per vector (host) / per work-item vector loads (GPU)
    max_work_group: int = 1
    sub_group: int = 0  # preferred sub-group size, 0 when unknown
    local_mem: int = 0  # bytes of local (shared) memory one work-group may use; 0: schedules use none by choice
    grf: bool = False  # an Intel GPU of the sycl target: kernels carry a GRF mode (schedule parameter `grf`)


@functools.lru_cache(maxsize=None)
def _host_vector_width() -> int:
    import halide as hl

    return max(4, hl.get_host_target().natural_vector_size(hl.Float(32)))


def host_target_of(halide_target: str) -> str:
    """``halide_target`` without its OpenCL features: the same kernel built for the host CPU."""
    feats = [f for f in halide_target.split("-") if f != "opencl" and not f.startswith("cl_")]
    return "-".join(feats)


def device_caps(target: str, device_type: str = "cpu", index: int = 0) -> DeviceCaps:
    if target == "host":
        return DeviceCaps(False, os.cpu_count() or 1, _host_vector_width())
    if target == "opencl":
        dev = opencl_devices.require_device()
        subs = [s for s in dev.sub_group_sizes if 8 <= s <= 32]
        return DeviceCaps(
            True,
            dev.compute_units,
            4,
            max_work_group=min(dev.max_work_group_size, 1024),
            sub_group=subs[-1] if subs else 0,
            local_mem=dev.local_mem_bytes,
        )
    if target == "cuda":
        return _cuda_caps()
    if target == "sycl":
        info = sycl_devices.device_info(device_type, index)
        return DeviceCaps(
            True,
            info.compute_units,
            4,
            max_work_group=min(info.max_work_group_size, 1024),
            sub_group=info.sub_group,
            local_mem=info.local_mem_bytes,
            grf=device_type == "xpu",
        )
    raise ValueError(f"unknown halide_xpu target {target!r}")


CUDA_SHARED_BYTES = 48 * 1024


@functools.lru_cache(maxsize=None)
def _cuda_caps() -> DeviceCaps:
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    # 48 KiB: a block's shared memory without the opt-in attribute Halide's CUDA runtime does not set
    shared = min(getattr(props, "shared_memory_per_block", CUDA_SHARED_BYTES), CUDA_SHARED_BYTES)
    return DeviceCaps(True, props.multi_processor_count, 4, max_work_group=1024, sub_group=32, local_mem=shared)


def has_fp64(target: str, device: Optional[Any] = None) -> bool:
    """Whether kernels of ``target`` may compute in float64 (the special functions do)."""
    if target in ("host", "cuda"):
        return True
    if target == "opencl":
        return opencl_devices.require_device().fp64
    if target == "sycl":
        return sycl_devices.device_info(getattr(device, "type", None) or "cpu", getattr(device, "index", None) or 0).fp64
    return False


def without_host_asserts(halide_target: str, target: str) -> str:
    """``halide_target`` without Halide's runtime asserts where its buffers hold device pointers (cuda, sycl): the
    asserts that evaluate a gathered index, or check the host pointer of an output an update stores, would read
    device memory through a null host pointer. Other targets: unchanged."""
    if target in ("cuda", "sycl") and "no_asserts" not in halide_target.split("-"):
        return halide_target + "-no_asserts"
    return halide_target


def _common_features() -> list[str]:
    feats = ["strict_float", "no_runtime"]
    if not config.asserts:
        feats.append("no_asserts")
    return feats


def halide_target(target: str, device: Optional[Any] = None) -> str:
    """The full Halide target string for kernels of ``target``."""
    if target == "host":
        return "-".join(["host", *_common_features()])
    if target == "opencl":
        dev = opencl_devices.require_device()
        feats = ["opencl"]
        if dev.fp16:
            feats.append("cl_half")
        if dev.fp64:
            feats.append("cl_doubles")
        return "-".join(["host", *feats, *_common_features()])
    if target == "sycl":  # OpenCL C kernels run by the USM runtime; the queue is the user_context
        dev_type = getattr(device, "type", device) or "cpu"
        info = sycl_devices.device_info(dev_type, getattr(device, "index", None) or 0)
        feats = ["opencl"] + (["cl_half"] if info.fp16 else []) + (["cl_doubles"] if info.fp64 else [])
        return "-".join(["host", *feats, "user_context", *_common_features()])
    if target == "cuda":
        import torch

        major, minor = torch.cuda.get_device_capability(device)
        cap = min((major * 10 + minor), 86)
        cap = max(c for c in (50, 61, 70, 75, 80, 86) if c <= cap)
        return "-".join(["host", "cuda", f"cuda_capability_{cap}", "user_context", *_common_features()])
    raise ValueError(f"unknown halide_xpu target {target!r}")


def runtime_target() -> str:
    """One shared Halide runtime serves every kernel in the process: host plus the device APIs present."""
    feats = ["host"]
    if opencl_devices.load_opencl() is not None:
        feats.append("opencl")
    try:
        import torch

        if torch.cuda.is_available():
            feats.append("cuda")
    except Exception:  # pragma: no cover - torch always importable here
        pass
    return "-".join(feats)

"""SYCL devices through dpctl: the emulation device (an OpenCL CPU runtime) and capabilities of real XPU devices."""
from __future__ import annotations

import dataclasses
import functools
import logging
import os
from typing import Any, Optional

from .. import config
from . import opencl_devices

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "the sycl target needs dpctl and a SYCL device: pip install dpctl intel-opencl-rt "
    "(Intel's OpenCL CPU runtime; or the halide-xpu[sycl] extra)"
)


class SyclUnavailable(RuntimeError):
    """No usable SYCL runtime or device."""


@dataclasses.dataclass(frozen=True)
class SyclDeviceInfo:
    """What schedules and target strings need to know about a SYCL device."""

    name: str
    backend: str  # opencl | level_zero | nominal
    compute_units: int
    max_work_group_size: int
    sub_group_sizes: tuple[int, ...]
    fp16: bool
    fp64: bool
    local_mem_bytes: int = 64 * 1024  # shared local memory per work-group (64 KiB on Intel Xe GPUs)

    @property
    def sub_group(self) -> int:
        """Sub-group size every kernel is compiled for: 16 where offered (Intel GPUs' SIMD16), else the
        largest of at most 32; 0 leaves it to the compiler."""
        if 16 in self.sub_group_sizes:
            return 16
        fitting = [s for s in self.sub_group_sizes if s <= 32]
        return max(fitting) if fitting else 0


# Codegen for an `xpu` device with no hardware present (fake tensors) assumes a typical Intel GPU.
NOMINAL_XPU = SyclDeviceInfo("nominal Intel GPU (no device present)", "nominal", 64, 1024, (16, 32), True, False)


@functools.lru_cache(maxsize=None)
def dpctl() -> Any:
    """dpctl, imported after the OpenCL ICD setup so the SYCL runtime sees Intel's OpenCL CPU runtime."""
    opencl_devices.load_opencl()
    try:
        import dpctl as module
    except ImportError as e:
        raise SyclUnavailable(f"{INSTALL_HINT} ({e})") from None
    return module


def dpctl_library() -> str:
    path = os.path.join(os.path.dirname(dpctl().__file__), "libDPCTLSyclInterface.so")
    if not os.path.exists(path):
        raise SyclUnavailable(f"dpctl's C library is missing at {path}; {INSTALL_HINT}")
    return path


def _describe(dev: Any) -> SyclDeviceInfo:
    return SyclDeviceInfo(
        name=dev.name,
        backend=dev.backend.name,
        compute_units=dev.max_compute_units,
        max_work_group_size=dev.max_work_group_size,
        sub_group_sizes=tuple(dev.sub_group_sizes),
        fp16=bool(dev.has_aspect_fp16),
        fp64=bool(dev.has_aspect_fp64),
        local_mem_bytes=int(dev.local_mem_size),
    )


@functools.lru_cache(maxsize=None)
def emulation_device() -> Any:
    """The SYCL device the emulation runs on: ``config.sycl_device`` (a dpctl filter) or Intel's OpenCL CPU."""
    mod = dpctl()
    if config.sycl_device:
        try:
            return mod.SyclDevice(config.sycl_device)
        except Exception as e:
            raise SyclUnavailable(f"no SYCL device matches sycl_device={config.sycl_device!r}: {e}") from None
    try:
        devices = mod.get_devices(backend="opencl", device_type="cpu")
    except Exception:  # dpctl raises when the backend has no devices
        devices = []
    if not devices:
        raise SyclUnavailable(f"no SYCL OpenCL CPU device found; {INSTALL_HINT}")
    devices.sort(key=lambda d: "Intel" not in d.sycl_platform.vendor)  # Intel's runtime before PoCL
    dev = devices[0]
    log.info("halide_xpu: sycl emulation device: %s (%s)", dev.name, dev.sycl_platform.name)
    return dev


def emulation_info() -> SyclDeviceInfo:
    return _describe(emulation_device())


def xpu_info(index: int = 0) -> SyclDeviceInfo:
    """A real XPU device's capabilities from torch, or nominal ones for codegen without hardware."""
    import torch

    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        log.debug("no XPU device present; generating code for %s", NOMINAL_XPU.name)
        return NOMINAL_XPU
    p = torch.xpu.get_device_properties(index)
    return SyclDeviceInfo(
        name=p.name,
        backend="level_zero",
        compute_units=getattr(p, "gpu_subslice_count", 0) or p.max_compute_units,
        max_work_group_size=p.max_work_group_size,
        sub_group_sizes=tuple(p.sub_group_sizes),
        fp16=bool(p.has_fp16),
        fp64=bool(p.has_fp64),
        local_mem_bytes=int(getattr(p, "local_mem_size", 64 * 1024)),
    )


def device_info(device_type: str, index: int = 0) -> SyclDeviceInfo:
    return xpu_info(index) if device_type == "xpu" else emulation_info()


def available() -> Optional[str]:
    """None when the emulation can run here, else why not."""
    try:
        emulation_device()
        dpctl_library()
    except SyclUnavailable as e:
        return str(e)
    return None

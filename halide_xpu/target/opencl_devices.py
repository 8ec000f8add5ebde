"""OpenCL platform/device discovery through ctypes (Intel CPU runtime, PoCL, NVIDIA, Intel GPU)."""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import logging
import os
import sys
from typing import Optional

log = logging.getLogger(__name__)

CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
_TYPE_NAMES = {2: "cpu", 4: "gpu", 8: "accelerator"}
_HALIDE_TYPE = {"cpu": "cpu", "gpu": "gpu", "accelerator": "acc"}
# cl_device_info / cl_platform_info codes
_PLATFORM_NAME, _PLATFORM_VENDOR = 0x0902, 0x0903
_DEV_TYPE, _DEV_COMPUTE_UNITS, _DEV_MAX_WG = 0x1000, 0x1002, 0x1004
_DEV_LOCAL_MEM, _DEV_NAME, _DRIVER_VERSION, _DEV_VERSION, _DEV_EXTENSIONS = 0x1023, 0x102B, 0x102D, 0x102F, 0x1030
_DEV_SUB_GROUP_SIZES_INTEL = 0x4108
# Intel's pip OpenCL runtime needs these from its own lib dir (its RPATH does not point there).
INTEL_DEPS = ("libintlc.so.5", "libsvml.so", "libirng.so", "libimf.so")


@dataclasses.dataclass(frozen=True)
class OpenCLDevice:
    """Capabilities of one OpenCL device that schedules and target strings depend on."""

    platform: str
    vendor: str
    name: str
    device_type: str  # cpu | gpu | accelerator
    version: str
    compute_units: int
    max_work_group_size: int
    local_mem_bytes: int
    fp16: bool
    fp64: bool
    sub_group_sizes: tuple[int, ...]
    driver_version: str = ""  # CL_DRIVER_VERSION: part of the schedule database's device key

    @property
    def halide_device_type(self) -> str:
        return _HALIDE_TYPE.get(self.device_type, "gpu")

    def describe(self) -> str:
        return (
            f"{self.name} [{self.device_type}] on '{self.platform}' ({self.version}; "
            f"{self.compute_units} CUs, max work-group {self.max_work_group_size}, "
            f"sub-groups {list(self.sub_group_sizes) or 'n/a'}, fp16={self.fp16}, fp64={self.fp64})"
        )


def intel_cpu_runtime_dir() -> Optional[str]:
    lib = os.path.join(sys.prefix, "lib")
    return lib if os.path.exists(os.path.join(lib, "libintelocl.so")) else None


@functools.lru_cache(maxsize=None)
def load_opencl() -> Optional[ctypes.CDLL]:
    """Load an OpenCL ICD loader globally (Halide's runtime resolves cl* symbols from the process)."""
    intel_dir = intel_cpu_runtime_dir()
    if intel_dir:
        # intel-opencl-rt's vendors/*.icd files name a build path that does not exist; point the loader
        # at the real library unless the user chose ICDs themselves.
        if "OCL_ICD_FILENAMES" not in os.environ and "OCL_ICD_VENDORS" not in os.environ:
            os.environ["OCL_ICD_FILENAMES"] = os.path.join(intel_dir, "libintelocl.so")
            log.debug("OCL_ICD_FILENAMES=%s", os.environ["OCL_ICD_FILENAMES"])
        for dep in INTEL_DEPS:
            path = os.path.join(intel_dir, dep)
            if os.path.exists(path):
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    candidates = [os.path.join(intel_dir, "libOpenCL.so.1")] if intel_dir else []
    candidates += ["libOpenCL.so.1", "libOpenCL.so"]
    for cand in candidates:
        try:
            lib = ctypes.CDLL(cand, mode=ctypes.RTLD_GLOBAL)
            log.debug("loaded OpenCL ICD loader %s", cand)
            return lib
        except OSError:
            continue
    log.debug("no OpenCL ICD loader found")
    return None


def _info_str(fn, handle, param) -> str:
    size = ctypes.c_size_t()
    if fn(handle, param, 0, None, ctypes.byref(size)) != 0:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    fn(handle, param, size, buf, None)
    return buf.value.decode(errors="replace")


def _info_int(fn, handle, param, ctype) -> int:
    val = ctype()
    if fn(handle, param, ctypes.sizeof(val), ctypes.byref(val), None) != 0:
        return 0
    return int(val.value)


def _info_sizes(fn, handle, param) -> tuple[int, ...]:
    size = ctypes.c_size_t()
    if fn(handle, param, 0, None, ctypes.byref(size)) != 0 or size.value == 0:
        return ()
    n = size.value // ctypes.sizeof(ctypes.c_size_t)
    arr = (ctypes.c_size_t * n)()
    fn(handle, param, size, arr, None)
    return tuple(int(x) for x in arr)


@functools.lru_cache(maxsize=None)
def list_devices() -> tuple[OpenCLDevice, ...]:
    """All OpenCL devices the ICD loader exposes (empty when none or no loader)."""
    lib = load_opencl()
    if lib is None:
        return ()
    n = ctypes.c_uint()
    if lib.clGetPlatformIDs(0, None, ctypes.byref(n)) != 0 or n.value == 0:
        return ()
    platforms = (ctypes.c_void_p * n.value)()
    lib.clGetPlatformIDs(n.value, platforms, None)
    found = []
    for plat in platforms:
        pname = _info_str(lib.clGetPlatformInfo, ctypes.c_void_p(plat), _PLATFORM_NAME)
        pvendor = _info_str(lib.clGetPlatformInfo, ctypes.c_void_p(plat), _PLATFORM_VENDOR)
        nd = ctypes.c_uint()
        if lib.clGetDeviceIDs(ctypes.c_void_p(plat), ctypes.c_uint64(CL_DEVICE_TYPE_ALL), 0, None, ctypes.byref(nd)) != 0:
            continue
        devs = (ctypes.c_void_p * nd.value)()
        lib.clGetDeviceIDs(ctypes.c_void_p(plat), ctypes.c_uint64(CL_DEVICE_TYPE_ALL), nd.value, devs, None)
        for dev in devs:
            h = ctypes.c_void_p(dev)
            get = lib.clGetDeviceInfo
            ext = _info_str(get, h, _DEV_EXTENSIONS).split()
            dtype = _info_int(get, h, _DEV_TYPE, ctypes.c_uint64)
            found.append(
                OpenCLDevice(
                    platform=pname,
                    vendor=pvendor,
                    name=_info_str(get, h, _DEV_NAME).strip(),
                    device_type=next((v for k, v in _TYPE_NAMES.items() if dtype & k), "gpu"),
                    version=_info_str(get, h, _DEV_VERSION),
                    compute_units=_info_int(get, h, _DEV_COMPUTE_UNITS, ctypes.c_uint32),
                    max_work_group_size=_info_int(get, h, _DEV_MAX_WG, ctypes.c_size_t),
                    local_mem_bytes=_info_int(get, h, _DEV_LOCAL_MEM, ctypes.c_uint64),
                    fp16="cl_khr_fp16" in ext,
                    fp64="cl_khr_fp64" in ext,
                    sub_group_sizes=_info_sizes(get, h, _DEV_SUB_GROUP_SIZES_INTEL),
                    driver_version=_info_str(get, h, _DRIVER_VERSION).strip(),
                )
            )
    return tuple(found)


def _rank(dev: OpenCLDevice) -> tuple[int, int]:
    kind = {"gpu": 0, "cpu": 1}.get(dev.device_type, 2)
    intel = 0 if "intel" in (dev.vendor + dev.platform).lower() else 1
    return (kind, intel)


@functools.lru_cache(maxsize=None)
def select_device() -> Optional[OpenCLDevice]:
    """The device chosen by ``config.opencl_platform`` / ``opencl_device_type`` (GPUs, then Intel, first)."""
    from .. import config

    devices = list(list_devices())
    if config.opencl_platform:
        want = config.opencl_platform.lower()
        devices = [d for d in devices if want in d.platform.lower() or want in d.name.lower()]
    if config.opencl_device_type:
        devices = [d for d in devices if d.device_type == config.opencl_device_type]
    if not devices:
        return None
    dev = sorted(devices, key=_rank)[0]
    # Halide's OpenCL runtime picks its device from these variables when it creates its context.
    os.environ["HL_OCL_PLATFORM_NAME"] = dev.platform
    os.environ["HL_OCL_DEVICE_TYPE"] = dev.halide_device_type
    log.info("halide_xpu OpenCL device: %s", dev.describe())
    return dev


def require_device() -> OpenCLDevice:
    dev = select_device()
    if dev is None:
        from .. import config

        have = ", ".join(f"{d.platform}/{d.name}" for d in list_devices()) or "none"
        raise RuntimeError(
            "halide_xpu: no OpenCL device matches "
            f"opencl_platform={config.opencl_platform!r} opencl_device_type={config.opencl_device_type!r} "
            f"(available: {have}). Install intel-opencl-rt (pip) or pocl-opencl-icd (apt), or change the selection."
        )
    return dev

"""Build a kernel's OpenCL C for the selected device in a child process: a crashing OpenCL compiler kills the child.

Halide's OpenCL runtime compiles a kernel's source at its first launch, in the user's process; Intel's OpenCL CPU
compiler has died there with SIGSEGV ("PLEASE submit a bug report", test_torchinductor's Longformer repro). The
compiler builds each new kernel's source here first; a crash or a build error rejects that schedule variant.
Run as ``python -m halide_xpu.target.opencl_build SOURCE_FILE`` (device from HL_OCL_PLATFORM_NAME /
HL_OCL_DEVICE_TYPE, as Halide's runtime picks it): exit 0 built, 3 build error (log on stderr), 4 no device.
"""
from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)

_TYPES = {"cpu": 2, "gpu": 4, "acc": 8}
_PROGRAM_BUILD_LOG = 0x1183
BUILD_ERROR, NO_DEVICE = 3, 4


def _device(lib: ctypes.CDLL) -> Optional[ctypes.c_void_p]:
    from .opencl_devices import _PLATFORM_NAME, _info_str

    n = ctypes.c_uint()
    if lib.clGetPlatformIDs(0, None, ctypes.byref(n)) != 0 or not n.value:
        return None
    platforms = (ctypes.c_void_p * n.value)()
    lib.clGetPlatformIDs(n.value, platforms, None)
    want_platform = os.environ.get("HL_OCL_PLATFORM_NAME", "")
    kind = _TYPES.get(os.environ.get("HL_OCL_DEVICE_TYPE", ""), 0xFFFFFFFF)
    for plat in platforms:
        if want_platform and want_platform not in _info_str(lib.clGetPlatformInfo, ctypes.c_void_p(plat), _PLATFORM_NAME):
            continue
        dev = ctypes.c_void_p()
        if lib.clGetDeviceIDs(ctypes.c_void_p(plat), ctypes.c_uint64(kind), 1, ctypes.byref(dev), None) == 0:
            return dev
    return None


def build(source: bytes) -> int:
    """Build ``source`` for the device Halide's runtime would pick; the exit code of the child."""
    from .opencl_devices import load_opencl

    lib = load_opencl()
    dev = _device(lib) if lib is not None else None
    if dev is None:
        return NO_DEVICE
    lib.clCreateContext.restype = ctypes.c_void_p
    lib.clCreateProgramWithSource.restype = ctypes.c_void_p
    err = ctypes.c_int()
    ctx = lib.clCreateContext(None, 1, ctypes.byref(dev), None, None, ctypes.byref(err))
    if err.value:
        return NO_DEVICE
    src = ctypes.c_char_p(source)
    length = ctypes.c_size_t(len(source))
    prog = lib.clCreateProgramWithSource(ctypes.c_void_p(ctx), 1, ctypes.byref(src), ctypes.byref(length), ctypes.byref(err))
    if err.value:
        return BUILD_ERROR
    if lib.clBuildProgram(ctypes.c_void_p(prog), 1, ctypes.byref(dev), b"", None, None) != 0:
        size = ctypes.c_size_t()
        lib.clGetProgramBuildInfo(ctypes.c_void_p(prog), dev, _PROGRAM_BUILD_LOG, 0, None, ctypes.byref(size))
        text = ctypes.create_string_buffer(size.value + 1)
        lib.clGetProgramBuildInfo(ctypes.c_void_p(prog), dev, _PROGRAM_BUILD_LOG, size, text, None)
        sys.stderr.write(text.value.decode(errors="replace")[-4000:])
        return BUILD_ERROR
    n = ctypes.c_uint()  # some compilers finish code generation per kernel, when it is created
    if lib.clCreateKernelsInProgram(ctypes.c_void_p(prog), 0, None, ctypes.byref(n)) == 0 and n.value:
        kernels = (ctypes.c_void_p * n.value)()
        if lib.clCreateKernelsInProgram(ctypes.c_void_p(prog), n.value, kernels, None) != 0:
            return BUILD_ERROR
    return 0


def check_in_child(source_file: Path, timeout_s: float = 300.0) -> Optional[str]:
    """Why the OpenCL C in ``source_file`` does not build on the selected device (None when it builds, or when
    there is no device to ask)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "halide_xpu.target.opencl_build", str(source_file)],
                              capture_output=True, text=True, timeout=timeout_s, env=os.environ.copy())
    except subprocess.TimeoutExpired:
        return f"the OpenCL compiler took over {timeout_s:.0f} s"
    if proc.returncode in (0, NO_DEVICE):
        return None
    if proc.returncode == BUILD_ERROR:
        return "the OpenCL compiler rejected it: " + proc.stderr.strip()[-500:]
    return f"the OpenCL compiler crashed (exit {proc.returncode}): " + proc.stderr.strip()[-300:]


if __name__ == "__main__":
    sys.exit(build(Path(sys.argv[1]).read_bytes()))

"""Loads the shared Halide runtime (one per process) and calls compiled kernel libraries through ctypes."""
from __future__ import annotations

import atexit
import ctypes
import logging
import threading
from pathlib import Path
from typing import Any, Callable, Optional

from . import native_sources
from .meta import MISALIGNED, KernelMeta
from .target import opencl_devices, targets

log = logging.getLogger(__name__)

_ERROR_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)
_lock = threading.Lock()
_runtime: Optional[ctypes.CDLL] = None
_runtime_path: Optional[Path] = None
_errors = threading.local()
_used_device_apis: set[str] = set()
_CTYPES = {"int64_t": ctypes.c_int64, "int32_t": ctypes.c_int32, "void*": ctypes.c_void_p}  # ArgSpec.c_type


class HalideKernelError(RuntimeError):
    """A compiled Halide pipeline returned an error code."""


def _on_error(_ctx: Any, msg: bytes) -> None:
    text = msg.decode(errors="replace").strip()
    _errors.last = text
    log.error("Halide runtime: %s", text)


_error_callback = _ERROR_HANDLER(_on_error)


USM_SOURCES = ("usm_device.cpp", "usm_memory.cpp", "usm_programs.cpp", "usm_launch.cpp")


def _build_runtime(target: str) -> Path:
    import halide as hl

    def standalone_runtime(work: Path) -> list[str]:
        hl.compile_standalone_runtime(str(work / "runtime.o"), hl.Target(target))
        return [str(work / "runtime.o")]

    names = ["errors.cpp", *USM_SOURCES, *(["cuda_hooks.cpp"] if "cuda" in target.split("-") else [])]
    return native_sources.build_shared(f"runtime-{target}", names, [f"-I{native_sources.halide_include_dir()}",
                                       "-ldl", "-lpthread"], extra_inputs=standalone_runtime,
                                       library="libhalide_xpu_runtime.so")


def halide_runtime() -> ctypes.CDLL:
    """The process-wide Halide runtime, loaded RTLD_GLOBAL so every kernel library binds to it."""
    global _runtime, _runtime_path
    with _lock:
        if _runtime is None:
            target = targets.runtime_target()
            if "opencl" in target:
                opencl_devices.load_opencl()
                opencl_devices.select_device()  # exports HL_OCL_* for the runtime's device choice
            _runtime_path = _build_runtime(target)
            lib = ctypes.CDLL(str(_runtime_path), mode=ctypes.RTLD_GLOBAL)
            lib.hx_set_error_handler(_error_callback)  # errors.cpp: counted per thread for the kernels' glue
            lib.halide_reuse_device_allocations(None, ctypes.c_bool(True))
            atexit.register(_release_devices, lib)
            _runtime = lib
            log.debug("loaded Halide runtime for %s", target)
        return _runtime


def runtime_library() -> Path:
    """The file of the process's Halide runtime (loaded now if it was not)."""
    halide_runtime()
    assert _runtime_path is not None
    return _runtime_path


def _release_devices(lib: ctypes.CDLL) -> None:
    """Release device contexts while the drivers are still alive (Halide's own exit hook runs too late)."""
    for api in sorted(_used_device_apis):
        getter = getattr(lib, f"halide_{api}_device_interface")
        getter.restype = ctypes.c_void_p
        lib.halide_device_release(None, ctypes.c_void_p(getter()))


class KernelLauncher:
    """Callable for one compiled kernel: takes tensors (anything with ``data_ptr()``) and ints in meta order."""

    def __init__(self, library: Path, meta: KernelMeta, schedule: list[str], variant: str,
                 queue: Optional[Callable[[], int]] = None) -> None:
        halide_runtime()
        if meta.target == "opencl":
            _used_device_apis.add("opencl")
        self._queue = queue  # supplies the sycl queue when the caller passes none (the CPU emulation)
        self.meta = meta
        self.library = library
        self.schedule = schedule
        self.variant = variant
        self.device_binary = "source" if meta.target in ("opencl", "sycl") else "none"  # set by device_binary.attach
        self._lib = ctypes.CDLL(str(library))
        fn = self._lib.hx_launch
        fn.restype = ctypes.c_int
        fn.argtypes = [_CTYPES[a.c_type] for a in meta.call_args] + ([ctypes.c_void_p] if meta.glue_takes_stream else [])
        self._fn = fn
        self.scalar_variant: Optional[Callable[[], "KernelLauncher"]] = None  # compiler.load: the MISALIGNED build
        self._scalar: Optional["KernelLauncher"] = None
        self._is_buffer = [a.is_buffer for a in meta.call_args] + ([False] if meta.takes_stream else [])
        # opencl: Halide copies an input's whole declared region to the device; a view's region can reach past
        # its storage (a masked load at offset -256: the copy read 1 KiB before a fresh mmap, SIGSEGV)
        self._regions = {i: r for i, a in enumerate(meta.call_args)
                         if meta.target == "opencl" and a.kind == "in" and (r := _region(a)) is not None}

    def __getattr__(self, name: str) -> Any:
        # Inductor's wrapper calls non-Triton GPU kernels as ``name.name(args..., c_void_p(stream))``.
        if name.startswith("halide_xpu_kernel_"):
            return self
        raise AttributeError(name)

    def __call__(self, *args: Any) -> None:
        if len(args) < len(self._is_buffer):
            raise TypeError(f"kernel expects {len(self._is_buffer)} arguments, got {len(args)}")
        try:
            ptrs = [a.data_ptr() if buf else a for a, buf in zip(args, self._is_buffer)]
        except AttributeError:  # a Python number where the kernel reads a tensor: see _scalars_as_tensors
            args = self._scalars_as_tensors(args)
            ptrs = [a.data_ptr() if buf else a for a, buf in zip(args, self._is_buffer)]
        keep = [_within_storage(args[i], ptrs, i, *r) for i, r in self._regions.items()]  # noqa: F841 (alive)
        if self._queue is not None:
            ptrs.append(self._queue())
        err = self._fn(*ptrs)
        if err == MISALIGNED and self.scalar_variant is not None:  # a view's pointer off the vector alignment
            if self._scalar is None:
                log.info("halide_xpu: kernel %s got a pointer off %d-byte alignment: its build with unrolled lanes "
                         "runs such calls", self.library.parent.name[:12], self.meta.pointer_alignment)
                self._scalar = self.scalar_variant()
            return self._scalar(*args)
        if err:
            msg = getattr(_errors, "last", "")
            raise HalideKernelError(f"Halide kernel {self.library.parent.name[:12]} failed (error {err}): {msg}")


    def _scalars_as_tensors(self, args: tuple[Any, ...]) -> list[Any]:
        """A 0-d CPU tensor input of a GPU graph reaches GPU kernels as a Python number (Inductor's wrapper unwraps
        it with ``.item()``, as Triton takes it by value): our kernels read a buffer, so each such number becomes a
        0-d tensor on the kernel's device (a fill kernel on the current stream, no host sync)."""
        import torch

        device = torch.device(self.meta.device_type, self.meta.device_index)
        out = list(args)
        for i, (a, spec) in enumerate(zip(args, self.meta.call_args)):
            if spec.is_buffer and isinstance(a, (bool, int, float)):
                out[i] = torch.full((), a, dtype=getattr(torch, spec.dtype), device=device)
        return out


def _region(arg: Any) -> Optional[tuple[int, int, int]]:
    """(first, past-the-last element offset from the data pointer, element size) of a buffer argument's declared
    region, None when its layout is symbolic."""
    from .meta import DTYPES

    try:
        shape, stride, offset = [int(e) for e in arg.shape], [int(s) for s in arg.stride], int(arg.offset)
    except ValueError:
        return None
    if 0 in shape:
        return None
    lo = offset + sum(min(0, s * (e - 1)) for e, s in zip(shape, stride))
    hi = offset + sum(max(0, s * (e - 1)) for e, s in zip(shape, stride)) + 1
    return lo, hi, DTYPES[arg.dtype][3]


def _within_storage(t: Any, ptrs: list[Any], i: int, lo: int, hi: int, size: int) -> Any:
    """Point ``ptrs[i]`` at a zero-padded copy of ``t``'s region when that region reaches outside its storage;
    returns the copy (keep it alive for the call) or None."""
    import torch

    storage = t.untyped_storage()
    s0, base = storage.data_ptr(), ptrs[i]
    a, b = base + lo * size, base + hi * size
    if a >= s0 and b <= s0 + storage.nbytes():
        return None
    bounce = torch.zeros((hi - lo) * size, dtype=torch.uint8)
    va, vb = max(a, s0), min(b, s0 + storage.nbytes())
    if vb > va:
        src = torch.empty(0, dtype=torch.uint8).set_(storage, va - s0, (vb - va,))
        bounce[va - a:vb - a].copy_(src)
    ptrs[i] = bounce.data_ptr() - lo * size
    return bounce



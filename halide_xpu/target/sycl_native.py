"""Native device binaries of the sycl target: the SYCL interop library, the child process that builds binaries, ocloc."""
from __future__ import annotations

import atexit
import ctypes
import functools
import importlib.metadata
import logging
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from .spirv import DeviceCompileError, Tool

log = logging.getLogger(__name__)

INTEROP_SOURCE = "sycl_interop.cpp"
BUILD_TIMEOUT_S = 300
_ERROR_SIZE = 1024
_worker_lock = threading.Lock()
_workers: list["_Worker"] = []


class InteropUnavailable(RuntimeError):
    """The SYCL interop library cannot be built or loaded here."""


@functools.cache
def sycl_paths() -> tuple[str, str]:
    """(include dir with sycl/sycl.hpp, dir of libsycl.so) of the installed intel-sycl-rt (dpctl's SYCL runtime)."""
    try:
        files = importlib.metadata.distribution("intel-sycl-rt").files or []
    except importlib.metadata.PackageNotFoundError:
        raise InteropUnavailable("intel-sycl-rt is not installed (pip install dpctl brings it)") from None
    header = next((f for f in files if str(f).replace("\\", "/").endswith("include/sycl/sycl.hpp")), None)
    library = next((f for f in files if Path(str(f)).name == "libsycl.so"), None)
    if header is None or library is None:
        raise InteropUnavailable("intel-sycl-rt ships no sycl/sycl.hpp or libsycl.so here")
    include = Path(str(header.locate())).resolve().parents[1]
    return str(include), str(Path(str(library.locate())).resolve().parent)


def _flags() -> list[str]:
    include, libdir = sycl_paths()
    return ["-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING", "-DCL_TARGET_OPENCL_VERSION=300", f"-I{include}",
            f"-L{libdir}", "-lsycl", f"-Wl,-rpath,{libdir}", "-ldl"]


@functools.cache
def library_path() -> Path:
    """The interop library (built once per source and intel-sycl-rt version); raises InteropUnavailable."""
    from .. import native_sources

    try:
        version = importlib.metadata.version("intel-sycl-rt")
        return native_sources.build_shared("sycl-interop", [INTEROP_SOURCE], _flags(), key_parts=[version])
    except native_sources.NativeBuildError as e:
        raise InteropUnavailable(f"the SYCL interop library did not build: {e}") from None


@functools.cache
def unavailable() -> Optional[str]:
    """None when native binaries can be extracted and loaded in this process, else why not."""
    try:
        load(str(library_path()))
    except (InteropUnavailable, OSError) as e:
        return f"native: {e}"
    return None


@functools.cache
def load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    lib.hx_native_binary.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                     ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p, ctypes.c_size_t]
    lib.hx_native_bundle.restype = ctypes.c_void_p
    lib.hx_device_id.argtypes = [ctypes.c_void_p]
    lib.hx_device_id.restype = ctypes.c_uint
    return lib


def loader_address() -> int:
    """Address of ``hx_native_bundle`` (the USM runtime's native loader)."""
    return ctypes.cast(load(str(library_path())).hx_native_bundle, ctypes.c_void_p).value or 0


def device_id(device_ref: int) -> int:
    """Intel's PCI device id of a ``sycl::device*`` (0 when the runtime reports none)."""
    return int(load(str(library_path())).hx_device_id(ctypes.c_void_p(device_ref)))


def binary_of(bundle_ref: int, lib_path: str) -> bytes:
    """The device binary of a built kernel bundle (``sycl::kernel_bundle<executable>*``)."""
    lib = load(lib_path)
    size, error = ctypes.c_size_t(0), ctypes.create_string_buffer(_ERROR_SIZE)
    rc = lib.hx_native_binary(ctypes.c_void_p(bundle_ref), None, 0, ctypes.byref(size), error, _ERROR_SIZE)
    if rc == 0:
        out = ctypes.create_string_buffer(size.value)
        rc = lib.hx_native_binary(ctypes.c_void_p(bundle_ref), out, size.value, ctypes.byref(size), error, _ERROR_SIZE)
    if rc:
        raise DeviceCompileError(f"no native binary from the device: {error.value.decode(errors='replace')}")
    return out.raw[: size.value]


# ------------------------------------------------------------------ building in a child process
def worker_command() -> list[str]:
    return [sys.executable, "-m", "halide_xpu.target.native_worker"]


class _Worker:
    """``python -m halide_xpu.target.native_worker``, kept for the next kernel: one request at a time over its
    stdin/stdout (a JSON line, then the bytes). A plain child process, so the user's main module is never
    re-imported (multiprocessing's spawn would run an unguarded script again)."""

    def __init__(self) -> None:
        package_root = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(worker_command(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env={**os.environ, "PYTHONPATH": path})

    def _read(self, size: int, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        out = bytearray()
        fd = self.proc.stdout.fileno()
        while len(out) < size:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, size - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return bytes(out)

    def _read_line(self, deadline: float) -> bytes:
        line = b""
        while not line.endswith(b"\n"):
            line += self._read(1, deadline)
        return line

    def request(self, header: dict, payload: bytes, timeout_s: float) -> tuple[dict, bytes]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({**header, "size": len(payload)}).encode() + b"\n" + payload)
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout_s
        reply = json.loads(self._read_line(deadline))
        return reply, self._read(reply.get("size", 0), deadline)

    def death(self) -> str:
        """Why the worker is gone: its exit status and the end of its stderr."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.stderr.seek(0)
        tail = self.stderr.read()[-1500:].decode(errors="replace").strip()
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
        return f"{how}{': ' + tail if tail else ''}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def build_in_child(device_filter: str, spirv: bytes, options: str) -> bytes:
    """The native binary of ``spirv`` for the device ``device_filter`` (a dpctl filter string), built by the
    device's own compiler in a worker process: a crash or hang there raises DeviceCompileError and never reaches
    this process. The worker is kept for the next kernel."""
    lib_path = str(library_path())
    with _worker_lock:
        if not _workers or _workers[0].proc.poll() is not None:
            _workers[:] = [_Worker()]
        worker = _workers[0]
        try:
            reply, data = worker.request({"selector": device_filter, "options": options, "library": lib_path},
                                         spirv, BUILD_TIMEOUT_S)
        except (EOFError, BrokenPipeError, TimeoutError, ValueError) as e:
            _workers.clear()
            why = f"took over {BUILD_TIMEOUT_S} s" if isinstance(e, TimeoutError) else f"died ({worker.death()})"
            worker.close()
            raise DeviceCompileError(f"the native build worker {why}") from None
    if not reply.get("ok"):
        raise DeviceCompileError(f"the device did not build the SPIR-V module: {reply.get('error')}")
    return data


@atexit.register
def _stop_workers() -> None:
    for worker in _workers:
        worker.close()


# ------------------------------------------------------------------ ocloc (Intel GPUs)
def ocloc_build(tool: Tool, spirv: bytes, device: str, options: str) -> bytes:
    """``ocloc compile`` of ``spirv`` for ``device`` (the id the runtime reports), in a child process."""
    with tempfile.TemporaryDirectory(prefix="hx-ocloc-") as work:
        src, out = Path(work) / "kernel.spv", Path(work) / "kernel"
        src.write_bytes(spirv)
        cmd = [tool.path, "compile", "-spirv_input", "-file", str(src), "-device", device, "-output", str(out),
               "-output_no_suffix", *(["-options", options] if options else [])]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=work)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise DeviceCompileError(f"ocloc ({tool.path}) did not run: {e}") from None
        if proc.returncode:
            raise DeviceCompileError(f"ocloc failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-1500:]}")
        found = [p for p in (out, out.with_suffix(".bin")) if p.exists()]
        if not found:
            raise DeviceCompileError(f"ocloc wrote no binary ({' '.join(cmd)})")
        return found[0].read_bytes()



"""Device-code toolchains of the sycl target: OpenCL C -> SPIR-V (clang + llvm-spirv + spirv-val), ocloc, Level Zero."""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import logging
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)

INSTALL_HINT = "apt-get install clang-15 llvm-spirv-15 spirv-tools (scripts/setup.sh does)"
# Intel's OpenCL CPU runtime accepts SPIR-V 1.0-1.4; Level Zero drivers accept at least that.
SPIRV_MAX_VERSION = "1.4"
# Typed pointers: llvm-spirv 15 aborts on clang 15's default opaque pointers (an atomic_cmpxchg loop of Halide's
# float atomics: "Attempting to get element type of opaque pointer"). Unoptimized IR: from -O1 up, llvm-spirv 15
# emitted invalid modules for a softmax (spirv-val: "ID '%frombool79' has not been defined"); the device's compiler
# optimizes the SPIR-V when it builds it (no optnone, which -O0 adds). gnu89 inline: Halide's helpers are plain
# `inline`, which in C99 emits no definition, so unoptimized modules failed to link on the device.
CLANG_FLAGS = ("-cc1", "-triple", "spir64-unknown-unknown", "-cl-std=CL2.0", "-finclude-default-header",
               "-no-opaque-pointers", "-O0", "-disable-O0-optnone", "-fgnu89-inline", "-emit-llvm-bc")
LLVM_SPIRV_FLAGS = (f"--spirv-max-version={SPIRV_MAX_VERSION}",)
TIMEOUT_S = 300
# Tool name candidates, newest first: the Debian packages install versioned names.
CANDIDATES = {
    "clang": ("clang-15", "clang"),
    "llvm-spirv": ("llvm-spirv-15", "llvm-spirv"),
    "spirv-val": ("spirv-val",),
    "ocloc": ("ocloc",),
}


class DeviceCompileError(RuntimeError):
    """A device-code tool failed, crashed or is missing; the caller falls back to the next format."""


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str
    path: str

    @property
    def identity(self) -> str:
        """Path, size and mtime: names the installed build without running it (part of binary cache keys)."""
        st = os.stat(self.path)
        return f"{os.path.realpath(self.path)}:{st.st_size}:{st.st_mtime_ns}"


@functools.cache
def find_tool(name: str) -> Optional[Tool]:
    """The first of ``CANDIDATES[name]`` on PATH (cached), or None."""
    for candidate in CANDIDATES[name]:
        path = shutil.which(candidate)
        if path:
            return Tool(name, path)
    return None


@functools.cache
def version(name: str) -> str:
    """First line of the tool's ``--version`` (for ``python -m halide_xpu info``), or why there is none."""
    tool = find_tool(name)
    if tool is None:
        return "not found"
    try:
        proc = subprocess.run([tool.path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{tool.path}: {e}"
    lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    return f"{lines[0] if lines else '?'} ({tool.path})"


def spirv_unavailable() -> Optional[str]:
    """None when OpenCL C -> SPIR-V can be built here, else why not."""
    missing = [n for n in ("clang", "llvm-spirv", "spirv-val") if find_tool(n) is None]
    if missing:
        return f"spirv: {', '.join(CANDIDATES[n][0] for n in missing)} not found ({INSTALL_HINT})"
    return None


def toolchain_identity() -> str:
    """Identity of the SPIR-V toolchain (cache keys)."""
    tools = [find_tool(n) for n in ("clang", "llvm-spirv", "spirv-val")]
    return "|".join(t.identity for t in tools if t is not None)


def options() -> str:
    """Build options of the SPIR-V path (cache keys)."""
    return " ".join((*CLANG_FLAGS, "|", *LLVM_SPIRV_FLAGS))


def _excerpt(text: str, limit: int = 1500) -> str:
    """Head and tail of a tool's output (a crash puts the cause first and a backtrace after)."""
    text = text.strip()
    return text if len(text) <= 2 * limit else f"{text[:limit]}\n...\n{text[-limit:]}"


def _run(tool: Tool, args: list[str]) -> None:
    """Run a tool in a child process; a non-zero exit, a signal or a timeout raises DeviceCompileError."""
    try:
        proc = subprocess.run([tool.path, *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DeviceCompileError(f"{tool.name} ({tool.path}) did not run: {e}") from None
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        raise DeviceCompileError(f"{tool.name} ({tool.path}) crashed ({sig}): {_excerpt(proc.stderr)}")
    if proc.returncode:
        raise DeviceCompileError(f"{tool.name} ({tool.path}) failed (exit {proc.returncode}): "
                                 f"{_excerpt(proc.stderr or proc.stdout)}")


def compile_spirv(source: str, workdir: Path) -> bytes:
    """OpenCL C ``source`` -> validated SPIR-V, each step a child process working in ``workdir``."""
    why = spirv_unavailable()
    if why:
        raise DeviceCompileError(why)
    clang, translator = find_tool("clang"), find_tool("llvm-spirv")
    assert clang is not None and translator is not None
    cl, bc, spv = workdir / "kernel.cl", workdir / "kernel.bc", workdir / "kernel.spv"
    cl.write_text(source)
    _run(clang, [*CLANG_FLAGS, str(cl), "-o", str(bc)])
    _run(translator, [*LLVM_SPIRV_FLAGS, str(bc), "-o", str(spv)])
    validate(spv)
    return spv.read_bytes()


def validate(path: Path) -> None:
    """spirv-val on a SPIR-V module (raises DeviceCompileError when it is not valid)."""
    tool = find_tool("spirv-val")
    if tool is None:
        raise DeviceCompileError(f"spirv-val not found ({INSTALL_HINT})")
    _run(tool, [str(path)])


@functools.cache
def level_zero_status() -> str:
    """Whether a Level Zero driver is present, in words (the loader's zeInit result)."""
    for name in ("libze_loader.so.1", "libze_loader.so"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return "no Level Zero loader (libze_loader.so.1 not found; apt-get install libze1)"
    try:
        result = lib.zeInit(ctypes.c_uint32(0))
    except (AttributeError, OSError) as e:
        return f"Level Zero loader found but zeInit is unusable ({e})"
    if result == 0:
        count = ctypes.c_uint32(0)
        lib.zeDriverGet(ctypes.byref(count), None)
        return f"Level Zero driver present ({count.value} driver(s))"
    code = result & 0xFFFFFFFF
    what = {0x78000001: " ZE_RESULT_ERROR_UNINITIALIZED", 0x78000004: " ZE_RESULT_ERROR_UNSUPPORTED_VERSION"}
    return f"Level Zero loader found, no driver (zeInit returned 0x{code:x}{what.get(code, '')})"

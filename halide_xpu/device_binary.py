"""Device binaries of the sycl target: pick a format, build SPIR-V and native binaries ahead of launch (child
processes), cache them on disk, hand them to the USM runtime."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Optional

from . import cache, config, stats, usm
from .meta import KernelMeta
from .target import spirv, sycl_devices, sycl_native

log = logging.getLogger(__name__)

SOURCE_FILE = "device.cl"  # Halide's OpenCL C of a sycl kernel, beside its kernel.so in the kernel cache
ORDER = ("native", "spirv", "source")  # auto steps down this list
# Build options per GRF mode: (OpenCL, Level Zero), as Intel's compilers spell them. Not run on an Intel GPU here.
GRF_OPTIONS = {
    "default": ("", ""),
    "small": ("-cl-intel-128-GRF-per-thread", "-ze-intel-128-GRF-per-thread"),
    "large": ("-cl-intel-256-GRF-per-thread", "-ze-opt-large-register-file"),
    "auto": ("-cl-intel-enable-auto-large-GRF-mode", "-ze-intel-enable-auto-large-GRF-mode"),
}
MAGIC = b"HXBIN1\n"  # entry = MAGIC + sha256 hex of the payload + b"\n" + payload
SPIRV_MAGIC = b"\x03\x02\x23\x07"  # a SPIR-V module's first word, little-endian
_logged: set[tuple[str, ...]] = set()
_log_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Device:
    """What a device binary depends on, besides its source and toolchain."""

    name: str
    driver: str
    backend: str
    sub_group: int
    selector: str = ""  # dpctl filter string: how a child process opens the device (not part of cache keys)
    intel_gpu: bool = False  # takes Intel GPU build options (GRF mode)


def device_of(meta: KernelMeta) -> Device:
    info = sycl_devices.device_info(meta.device_type, meta.device_index)
    driver, selector = "nominal", ""
    if meta.device_type == "cpu":
        dev = sycl_devices.emulation_device()
        driver, selector = str(dev.driver_version), dev.filter_string
    elif info.backend != "nominal":
        import torch

        driver = str(getattr(torch.xpu.get_device_properties(meta.device_index), "driver_version", "unknown"))
        selector = f"level_zero:gpu:{meta.device_index}"
    return Device(info.name, driver, info.backend, info.sub_group, selector, meta.device_type == "xpu")


def grf_mode(meta: KernelMeta) -> str:
    """The kernel's GRF mode: its schedule parameter ``grf`` (an index into ``config.GRF_MODES``; a tuned record)
    or ``config.grf_mode``."""
    code = dict(meta.schedule.params).get("grf")
    return config.GRF_MODES[code] if code is not None and 0 <= code < len(config.GRF_MODES) else config.grf_mode


def build_options(device: Device, mode: str) -> str:
    """Device-compiler options for GRF ``mode`` on ``device`` (none on devices that are not Intel GPUs)."""
    if mode == "default":
        return ""
    if not device.intel_gpu:
        _log_once(("grf", mode, device.name), logging.INFO,
                  f"halide_xpu: grf_mode={mode!r} applies to Intel GPUs; no build option on {device.name}")
        return ""
    return GRF_OPTIONS[mode][1 if device.backend == "level_zero" else 0]


def reset_warnings() -> None:
    _logged.clear()


def _log_once(key: tuple[str, ...], level: int, message: str) -> None:
    with _log_lock:
        if key in _logged:
            return
        _logged.add(key)
    log.log(level, "%s", message)


def _step_down(requested: str, reason: str) -> None:
    """Log a step down to the next format once per (requested format, reason)."""
    _log_once((requested, reason), logging.INFO if requested == "auto" else logging.WARNING,
              f"halide_xpu: device_binary={requested!r}: {reason}; trying the next format")


def unavailable(fmt: str, backend: str) -> Optional[str]:
    """None when ``fmt`` can be built and loaded here for a device of ``backend``, else why not."""
    if fmt == "native":
        if backend not in ("opencl", "level_zero"):
            return f"native: no device binaries for the {backend} backend (no device present)"
        why = spirv.spirv_unavailable()
        if why:
            return f"native: built from SPIR-V, which is unavailable ({why.removeprefix('spirv: ')})"
        if _ocloc_for(backend) is not None:
            return None
        return sycl_native.unavailable()
    if fmt == "spirv":
        return spirv.spirv_unavailable()
    if backend == "level_zero" and _ocloc_for(backend) is None:
        return "source: OpenCL C on a Level Zero queue needs ocloc at run time (not found)"
    return None


def choose_format(backend: str, requested: Optional[str] = None) -> str:
    """The first format of ``ORDER`` from ``requested`` (default ``config.device_binary``; auto = all) that is
    available; each step down is logged once with its reason."""
    requested = requested or config.device_binary
    start = 0 if requested == "auto" else ORDER.index(requested)
    for fmt in ORDER[start:]:
        why = unavailable(fmt, backend)
        if why is None:
            return fmt
        _step_down(requested, why)
    return "source"


def save_source(obj: Path, dest: Path) -> bool:
    """Write the OpenCL C that Halide embedded in the kernel object ``obj`` to ``dest``; False if not found."""
    raw = dest.with_suffix(".rodata")
    proc = subprocess.run(["objcopy", "-O", "binary", "--only-section=.rodata", str(obj), str(raw)],
                          capture_output=True, text=True)
    if proc.returncode:
        log.warning("halide_xpu: objcopy could not read %s (%s); the kernel builds from source", obj, proc.stderr)
        return False
    data = raw.read_bytes()
    raw.unlink()
    mark = data.find(b"_at_least_one_kernel")  # Halide's OpenCL C always declares this kernel
    if mark < 0:
        return False
    begin, end = data.rfind(b"\0", 0, mark) + 1, data.find(b"\0", mark)
    dest.write_bytes(data[begin:end if end >= 0 else len(data)])
    return True


def entry_path(key: str) -> Path:
    return cache.cache_root() / "device-binaries" / key[:2] / f"{key}.bin"


def read_entry(path: Path, kind: str = "spirv") -> Optional[bytes]:
    """A cached binary of ``kind`` (spirv | native), or None when absent; a corrupt one is removed with a warning
    (so it is rebuilt)."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    head, _, payload = blob[len(MAGIC):].partition(b"\n")
    ok = blob.startswith(MAGIC) and head.decode(errors="replace") == hashlib.sha256(payload).hexdigest()
    if ok and (kind != "spirv" or payload.startswith(SPIRV_MAGIC)):
        return payload
    log.warning("halide_xpu: corrupt device binary %s (%s); rebuilding", path,
                "checksum mismatch" if not ok else "not a SPIR-V module")
    path.unlink(missing_ok=True)
    return None


def write_entry(path: Path, payload: bytes) -> None:
    """Atomically (temporary file + os.replace): concurrent writers of one key leave one whole entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def spirv_module(source: str, device: Device) -> bytes:
    """Validated SPIR-V of the prepared OpenCL C ``source``: from the disk cache, else built in child processes
    (``stats.counters['device_compiles']`` counts builds); raises spirv.DeviceCompileError."""
    key = cache.cache_key("spirv", source, spirv.options(), device.name, device.driver, device.backend,
                          spirv.toolchain_identity())
    path = entry_path(key)
    found = read_entry(path)
    if found is not None:
        return found
    work = cache.new_workdir()
    try:
        stats.counters["device_compiles"] += 1
        data = spirv.compile_spirv(source, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_entry(path, data)
    return data


def _ocloc_for(backend: str) -> Optional[spirv.Tool]:
    """ocloc where it builds native binaries for devices of ``backend`` (Level Zero), else None."""
    return spirv.find_tool("ocloc") if backend == "level_zero" else None


def _native_toolchain(tool: Optional[spirv.Tool]) -> str:
    """What builds native binaries (cache keys): ocloc, else the device's own compiler behind the SYCL runtime
    (its driver is in the key already) reached through the interop library."""
    return f"ocloc:{tool.identity}" if tool else f"interop:{sycl_native.library_path().parent.name}"


def _ocloc_device(device: Device) -> str:
    """``-device`` for ocloc: the PCI device id the runtime reports for this device, never a fixed GPU."""
    dev = sycl_devices.dpctl().SyclDevice(device.selector)
    found = sycl_native.device_id(dev.addressof_ref())
    if not found:
        raise spirv.DeviceCompileError(f"the runtime reports no device id for {device.name}; ocloc needs one")
    return f"0x{found:x}"


def native_binary(source: str, module: bytes, device: Device, options: str) -> bytes:
    """The native binary of the SPIR-V ``module`` (built from ``source``) for ``device``: from the disk cache, else
    built by ocloc or by the device's compiler in a child process; raises spirv.DeviceCompileError."""
    tool = _ocloc_for(device.backend)
    key = cache.cache_key("native", source, spirv.options(), options, device.name, device.driver, device.backend,
                          spirv.toolchain_identity(), _native_toolchain(tool))
    path = entry_path(key)
    found = read_entry(path, "native")
    if found is not None:
        return found
    stats.counters["device_compiles"] += 1
    if tool is not None:
        data = sycl_native.ocloc_build(tool, module, _ocloc_device(device), options)
    else:
        data = sycl_native.build_in_child(device.selector, module, options)
    write_entry(path, data)
    return data


@functools.cache
def _register_native_loader() -> None:
    usm.set_native_loader(sycl_native.loader_address())


def _forget(entry: Path, device: Device) -> None:
    """A kernel attached with a binary earlier in this process builds its source from now on."""
    src_path = entry / SOURCE_FILE
    if src_path.exists():
        source = usm.prepare_source(src_path.read_text(), device.sub_group)
        usm.set_binary("spirv", source, b"")
        usm.set_binary("native", source, b"")


def attach(meta: KernelMeta, entry: Path) -> str:
    """Give the USM runtime the device binaries of the sycl kernel in cache entry ``entry`` (building them if
    needed); returns the format its kernels will load: 'native', 'spirv' or 'source'. Failures step down."""
    device = device_of(meta)
    fmt = choose_format(device.backend)
    if fmt == "source":
        _forget(entry, device)
        return fmt
    src_path = entry / SOURCE_FILE
    if not src_path.exists() and not save_source(entry / "kernel.o", src_path):
        log.warning("halide_xpu: no OpenCL C found in %s; its kernels build from source at first launch", entry)
        return "source"
    source = usm.prepare_source(src_path.read_text(), device.sub_group)
    options = build_options(device, grf_mode(meta))
    try:
        data = spirv_module(source, device)
    except spirv.DeviceCompileError as e:
        log.warning("halide_xpu: SPIR-V build of kernel %s failed, using its OpenCL C source: %s", entry.name[:12], e)
        stats.counters["device_compile_failures"] += 1
        _forget(entry, device)
        return "source"
    usm.set_binary("spirv", source, data, options)
    if fmt == "spirv":
        usm.set_binary("native", source, b"")
        return fmt
    try:
        native = native_binary(source, data, device, options)
    except spirv.DeviceCompileError as e:
        log.warning("halide_xpu: native build of kernel %s failed, using its SPIR-V: %s", entry.name[:12], e)
        stats.counters["device_compile_failures"] += 1
        usm.set_binary("native", source, b"")
        return "spirv"
    _register_native_loader()
    usm.set_binary("native", source, native, options)
    return "native"

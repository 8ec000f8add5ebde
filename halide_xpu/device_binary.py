"""Device binaries of the sycl target: pick a format, build SPIR-V ahead of launch, cache it on disk, hand it to usm."""
from __future__ import annotations

import dataclasses
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
from .target import spirv, sycl_devices

log = logging.getLogger(__name__)

SOURCE_FILE = "device.cl"  # Halide's OpenCL C of a sycl kernel, beside its kernel.so in the kernel cache
ORDER = ("native", "spirv", "source")  # auto steps down this list
MAGIC = b"HXBIN1\n"  # entry = MAGIC + sha256 hex of the payload + b"\n" + payload
_logged: set[tuple[str, str]] = set()
_log_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Device:
    """What a device binary depends on, besides its source and toolchain."""

    name: str
    driver: str
    backend: str
    sub_group: int


def device_of(meta: KernelMeta) -> Device:
    info = sycl_devices.device_info(meta.device_type, meta.device_index)
    driver = "nominal"
    if meta.device_type == "cpu":
        driver = str(sycl_devices.emulation_device().driver_version)
    elif info.backend != "nominal":
        import torch

        driver = str(getattr(torch.xpu.get_device_properties(meta.device_index), "driver_version", "unknown"))
    return Device(info.name, driver, info.backend, info.sub_group)


def reset_warnings() -> None:
    _logged.clear()


def _step_down(requested: str, reason: str) -> None:
    """Log a step down to the next format once per (requested format, reason)."""
    with _log_lock:
        if (requested, reason) in _logged:
            return
        _logged.add((requested, reason))
    level = logging.INFO if requested == "auto" else logging.WARNING
    log.log(level, "halide_xpu: device_binary=%r: %s; trying the next format", requested, reason)


def unavailable(fmt: str, backend: str) -> Optional[str]:
    """None when ``fmt`` can be built and loaded here for a device of ``backend``, else why not."""
    if fmt == "native":
        return spirv.native_unavailable(backend)
    if fmt == "spirv":
        return spirv.spirv_unavailable()
    if backend == "level_zero" and spirv.find_tool("ocloc") is None:
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


def read_entry(path: Path) -> Optional[bytes]:
    """A cached binary, or None when absent; a corrupt one is removed with a warning (so it is rebuilt)."""
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    head, _, payload = blob[len(MAGIC):].partition(b"\n")
    ok = blob.startswith(MAGIC) and head.decode(errors="replace") == hashlib.sha256(payload).hexdigest()
    if ok and payload[:4] == b"\x03\x02\x23\x07":  # SPIR-V magic, little-endian
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


def _forget(entry: Path, device: Device) -> None:
    """A kernel attached with SPIR-V earlier in this process builds its source from now on."""
    src_path = entry / SOURCE_FILE
    if src_path.exists():
        usm.set_spirv(usm.prepare_source(src_path.read_text(), device.sub_group), b"")


def attach(meta: KernelMeta, entry: Path) -> str:
    """Give the USM runtime the device binary of the sycl kernel in cache entry ``entry`` (building it if
    needed); returns the format its kernels will load: 'spirv' or 'source'. Failures step down to source."""
    device = device_of(meta)
    fmt = choose_format(device.backend)
    if fmt == "source":
        _forget(entry, device)
        return fmt
    if fmt == "native":  # not reachable yet: spirv.native_unavailable explains
        fmt = "spirv"
    src_path = entry / SOURCE_FILE
    if not src_path.exists() and not save_source(entry / "kernel.o", src_path):
        log.warning("halide_xpu: no OpenCL C found in %s; its kernels build from source at first launch", entry)
        return "source"
    source = usm.prepare_source(src_path.read_text(), device.sub_group)
    try:
        data = spirv_module(source, device)
    except spirv.DeviceCompileError as e:
        log.warning("halide_xpu: SPIR-V build of kernel %s failed, using its OpenCL C source: %s", entry.name[:12], e)
        stats.counters["device_compile_failures"] += 1
        return "source"
    usm.set_spirv(source, data)
    return "spirv"

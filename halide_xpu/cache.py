"""On-disk cache of compiled kernel libraries, keyed by a hash of source + metadata + toolchain versions."""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Optional

from . import config

log = logging.getLogger(__name__)

LIBRARY = "kernel.so"
DONE = "done.json"
FORMAT_VERSION = "1"  # bump when the glue or the layout of an entry changes


@functools.lru_cache(maxsize=None)
def halide_version() -> str:
    """The installed Halide's version: its package metadata, else its runtime header's HALIDE_VERSION_* macros (a
    halide unpacked onto PYTHONPATH without metadata, as on the GPU machines), else "unknown"."""
    try:
        return metadata.version("halide")
    except metadata.PackageNotFoundError:
        pass
    import importlib.util
    import re

    spec = importlib.util.find_spec("halide")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        header = Path(folder) / "include" / "HalideRuntime.h"
        if header.is_file():
            found = dict(re.findall(r"#define HALIDE_VERSION_(MAJOR|MINOR|PATCH) (\d+)", header.read_text(errors="replace")))
            if len(found) == 3:
                return f"{found['MAJOR']}.{found['MINOR']}.{found['PATCH']}"
    return "unknown"


def cache_root() -> Path:
    root = Path(config.cache_dir) / f"halide-{halide_version()}"
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in (FORMAT_VERSION, halide_version(), *parts):
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def entry_dir(key: str) -> Path:
    return cache_root() / key[:2] / key


def lookup(key: str) -> Optional[tuple[Path, dict]]:
    """The library and its record, or None; a damaged entry is reported and removed so it gets rebuilt."""
    d = entry_dir(key)
    done = d / DONE
    if not done.exists():
        return None
    try:
        record = json.loads(done.read_text())
        lib = d / LIBRARY
        if record.get("sha256") != _sha(lib):
            raise ValueError("checksum mismatch")
        return lib, record
    except (OSError, ValueError, KeyError) as e:
        log.warning("halide_xpu: corrupt cache entry %s (%s); recompiling", d, e)
        shutil.rmtree(d, ignore_errors=True)
        return None


def invalidate(key: str, reason: str) -> None:
    d = entry_dir(key)
    log.warning("halide_xpu: cache entry %s unusable (%s); recompiling", d, reason)
    shutil.rmtree(d, ignore_errors=True)


def new_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="build-", dir=cache_root()))


def publish(key: str, workdir: Path, record: dict) -> Path:
    """Atomically move a finished build into place; returns the library path."""
    record = {**record, "sha256": _sha(workdir / LIBRARY)}
    (workdir / DONE).write_text(json.dumps(record, indent=1))
    final = entry_dir(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(workdir, final)
    except OSError:  # another process published first, or a stale entry is in the way
        if lookup(key) is None:
            shutil.rmtree(final, ignore_errors=True)
            os.rename(workdir, final)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return final / LIBRARY

"""The C++ sources in ``halide_xpu/native`` and the shared libraries built from them, cached by source hash."""
from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Optional, Sequence

from . import cache

NATIVE_DIR = Path(__file__).parent / "native"


class NativeBuildError(RuntimeError):
    """The C++ compiler failed on one of our native sources."""


@functools.lru_cache(maxsize=None)
def halide_include_dir() -> str:
    spec = importlib.util.find_spec("halide")
    assert spec is not None and spec.submodule_search_locations, "halide is not installed"
    return os.path.join(spec.submodule_search_locations[0], "include")


@functools.lru_cache(maxsize=None)
def native_source(name: str) -> str:
    """Text of a C++ file in ``halide_xpu/native``."""
    return (NATIVE_DIR / name).read_text()


def _headers() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(NATIVE_DIR.glob("*.h"))}


def build_shared(tag: str, names: Sequence[str], flags: Sequence[str], key_parts: Sequence[str] = (),
                 extra_inputs: Optional[Callable[[Path], list[str]]] = None, library: Optional[str] = None) -> Path:
    """``lib<tag>.so`` from the native sources ``names`` (with every header of the directory), compiled once per
    content of the sources, ``flags`` and ``key_parts`` into the cache; ``extra_inputs(workdir)`` adds files to
    the link (objects made there). Safe when two processes build it at once."""
    sources = {n: native_source(n) for n in names}
    headers = _headers()
    digest = cache.cache_key(tag, *sources.values(), *headers.values(), *flags, *key_parts)[:16]
    d = cache.cache_root() / f"{tag}-{cache.FORMAT_VERSION}-{digest}"
    lib = d / (library or f"lib{tag}.so")
    if lib.exists():
        return lib
    work = cache.new_workdir()
    try:
        for name, text in {**sources, **headers}.items():
            (work / name).write_text(text)
        inputs = [str(work / n) for n in names] + (extra_inputs(work) if extra_inputs else [])
        cmd = ["c++", "-O2", "-std=c++17", "-shared", "-fPIC", f"-I{work}", *inputs, "-o", str(work / lib.name), *flags]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise NativeBuildError(f"halide_xpu: building {lib.name} failed:\n{' '.join(cmd)}\n{proc.stderr[-4000:]}")
        try:
            os.rename(work, d)
        except OSError:  # built concurrently by another process
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return lib

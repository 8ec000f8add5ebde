"""CUDA launch limits checked on a lowered Halide Stmt: a launch the driver refuses is a schedule not to build."""
from __future__ import annotations

import re

# halide_cuda_run(state, name, blocks x, y, z, threads x, y, z, shared bytes, ...)
_LAUNCH = re.compile(r'halide_cuda_run\([^,]+, "[^"]+", (\d+), (\d+), (\d+), (\d+), (\d+), (\d+), ([^,]+),')
MAX_THREADS = 1024  # work-items of a work-group: every CUDA device since compute capability 2.0
MAX_THREADS_Z = 64
MAX_GRID_YZ = 65535
MAX_STATIC_SHARED = 48 * 1024  # local memory a launch gets without opting in per kernel


def refused_launches(stmt: str) -> list[str]:
    """The launches of ``stmt`` that ``cuLaunchKernel`` refuses (CUDA_ERROR_INVALID_VALUE): over 1024 work-items,
    a work-group's z over 64, a grid's y or z over 65535, local memory over 48 KiB (where its size is a constant
    expression)."""
    bad = []
    for m in _LAUNCH.finditer(stmt):
        bx, by, bz, tx, ty, tz = map(int, m.groups()[:6])
        shared = m.group(7).strip()
        nbytes = eval(shared, {"__builtins__": {}}) if re.fullmatch(r"[\d\s()+*]+", shared) else 0  # noqa: S307
        if (tx * ty * tz > MAX_THREADS or tz > MAX_THREADS_Z or by > MAX_GRID_YZ or bz > MAX_GRID_YZ
                or nbytes > MAX_STATIC_SHARED):
            bad.append(f"grid {bx}x{by}x{bz}, work-group {tx}x{ty}x{tz}, local memory {shared} bytes")
    return bad

"""Entry point used by generated wrapper code: compile/load a kernel, in Inductor's async compile pool if enabled."""
from __future__ import annotations

from typing import Any

from .meta import KernelMeta


def load_kernel(async_compile: Any, meta: KernelMeta, source: str) -> Any:
    from torch._inductor.codecache import LambdaFuture
    from torch._inductor.async_compile import get_compile_threads

    from . import compiler

    if get_compile_threads() <= 1:
        return compiler.load(meta, source)
    future = async_compile.submit(lambda: compiler.load(meta, source))
    return LambdaFuture(future.result)

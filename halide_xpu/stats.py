"""Process-wide counters: kernels generated, Halide compilations, cache hits, fallbacks."""
from __future__ import annotations

import collections
import dataclasses

counters: collections.Counter = collections.Counter()


@dataclasses.dataclass(frozen=True)
class Fallback:
    """One group of nodes that our backend could not lower and handed to the fallback scheduling."""

    nodes: tuple[str, ...]
    reason: str
    fallback: str


fallbacks: list[Fallback] = []
generated_kernels: list[str] = []
compile_seconds: list[float] = []  # Halide build + link time of each kernel compiled in this process


def record_kernel(name: str) -> None:
    counters["kernels_generated"] += 1
    generated_kernels.append(name)


def reset() -> None:
    counters.clear()
    fallbacks.clear()
    generated_kernels.clear()
    compile_seconds.clear()

"""Size hints of Inductor's symbolic sizes on torch 2.11 (``size_hint``) and 2.13 (``optimization_hint``)."""
from __future__ import annotations

from typing import Any

from torch._inductor.virtualized import V


def hint(expr: Any, fallback: int) -> int:
    """An integer for ``expr`` (the graph's hint for each symbol), ``fallback`` where there is none. torch 2.11's
    ``optimization_hint`` serves unbacked symbols only (it asserts on others); 2.13 removed ``size_hint``."""
    sizevars = V.graph.sizevars
    fn = getattr(sizevars, "size_hint", None) or sizevars.optimization_hint
    try:
        return int(fn(expr, fallback=fallback))
    except Exception:  # noqa: BLE001 - an expression sympy cannot evaluate: no hint
        return fallback

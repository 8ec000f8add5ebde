"""Inductor's symbolic sizes: hints on torch 2.11 (``size_hint``) and 2.13 (``optimization_hint``), precomputed symbols."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import sympy
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


@contextlib.contextmanager
def kernel_sizes_resolved(kernel_sizes: dict[Any, str]) -> Iterator[None]:
    """Inside, the graph's ``statically_known_*`` and ``evaluate_max`` see a kernel's size arguments (``ks0``: the
    names ``kernel_sizes`` gives the graph's size expressions, which have no value range) as the sizes they stand
    for. Upstream's Halide indexing renames an index's sizes to them before it asks: under dynamic shapes a flip's
    offset ``ks0 - 1`` was not known positive, so it was neither folded into the dimensions nor applied
    (``x.flip(0)[idx]`` read at -129), and ``evaluate_max`` of two extents raised ``vr must not be None for symbol
    ks0`` (a cat's backward); both found by ``graph_fuzz``."""
    sizevars = V.graph.sizevars

    def real(e: Any) -> Any:
        if not isinstance(e, sympy.Basic):
            return e
        # read at each call: the kernel names a size the first time an index uses it (inside upstream's call)
        by_name = {name: expr for expr, name in kernel_sizes.items()}
        by_name.update({str(k): v for k, v in getattr(sizevars, "inv_precomputed_replacements", {}).items()})
        known = {s: by_name[s.name] for s in e.free_symbols if s.name in by_name}
        return e.xreplace(known) if known else e

    names = ("statically_known_gt", "statically_known_geq", "statically_known_equals", "evaluate_max")
    saved = {n: getattr(sizevars, n) for n in names}
    for n in names[:3]:
        setattr(sizevars, n, lambda a, b, _f=saved[n]: _f(real(a), real(b)))

    def evaluate_max(a: Any, b: Any) -> Any:
        if _unguardable(real(a)) or _unguardable(real(b)):  # a guard Dynamo could not evaluate: no guard
            return sympy.Max(a, b)
        return a if saved["evaluate_max"](real(a), real(b)) == real(a) else b

    sizevars.evaluate_max = evaluate_max
    try:
        yield
    finally:
        for n in names:
            vars(sizevars).pop(n, None)


def _unguardable(e: Any) -> bool:
    """Whether ``e`` holds a function Dynamo's guard code cannot evaluate (``Where``: a roll's index under dynamic
    shapes). Upstream's ``evaluate_max`` of such extents added a guard that failed on its own frame ("name 'Where'
    is not defined", graph_fuzz seed 8616); the extent becomes a symbolic ``Max`` instead."""
    return isinstance(e, sympy.Basic) and any(type(f).__name__ == "Where" for f in e.atoms(sympy.Function))


def modular_upper_bound(expr: Any, extents: dict[Any, Any]) -> Any:
    """An upper bound of an index holding modular terms (``ks0*ks3*((h2 + 57) % ks2)``: a roll under dynamic
    shapes), or None. Each ``PythonMod``/``ModularIndexing`` term lies in [0, modulus - 1] whatever its argument and
    each loop symbol in [0, extent - 1] (``extents``); where the index is a sum of products of such terms and
    sizes with positive coefficients it grows with each, so those maxima bound it (symbolic sizes are positive)."""
    mods = [a for a in expr.atoms(sympy.Function) if type(a).__name__ in ("PythonMod", "ModularIndexing")]
    if not mods:
        return None
    stand_ins = {m: sympy.Dummy(f"m{i}", nonnegative=True, integer=True) for i, m in enumerate(mods)}
    poly = sympy.expand(expr.xreplace(stand_ins))
    if poly.atoms(sympy.Function) or any(t.as_coeff_Mul()[0] < 0 for t in sympy.Add.make_args(poly)):
        return None  # a floor division, min or subtraction outside the modular terms: not monotone
    peaks = {stand_ins[m]: m.args[-1] - 1 for m in mods}
    peaks.update({s: extents[s] - 1 for s in poly.free_symbols if s in extents})
    return poly.xreplace(peaks)

"""Shared schedule helpers: a recorder that applies and logs directives, extents, var lookup."""
from __future__ import annotations

import math
import re
from typing import Any, Optional

import halide as hl

from ..meta import STORAGE_SUFFIX, KernelMeta
from ..target.targets import DeviceCaps

_UNIQUE_SUFFIX = re.compile(r"\$\d+")  # Halide's suffix for re-created Func names, noise in a printed schedule
_DEF = re.compile(r"^\s*(tmp\d+)\[[^\]]*\] = (.*)$", re.M)
_TRANSCENDENTAL = re.compile(r"\b(hl\.(exp|log|erf|pow|sin|cos|tan|atan|atan2)|hx\.tanh_vec)\(")
_NO_OPENCL_VECTORS = re.compile(r"\bhl\.(is_nan|is_inf|is_finite|erf)\(")
_LOAD = re.compile(r"\b(in_ptr\d+)\[([^,\]]+)[,\]]")
GUARD = hl.TailStrategy.GuardWithIf
SHIFT = hl.TailStrategy.ShiftInwards


def _fmt(x: Any) -> str:
    if isinstance(x, (hl.Var, hl.RVar)):
        return x.name()
    if isinstance(x, hl.TailStrategy):
        return f"hl.TailStrategy.{x.name}"
    if isinstance(x, hl.Func):
        return x.name()
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    return repr(x)


class Recorder:
    """Applies schedule directives and keeps them as readable Python lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.history: dict[str, list[tuple[str, tuple]]] = {}  # directives applied to each Func's pure stage

    def __call__(self, stage: Any, label: str, method: str, *args: Any) -> Any:
        result = getattr(stage, method)(*args)
        if isinstance(stage, hl.Func):
            self.history.setdefault(stage.name(), []).append((method, args))
        line = f"{label}.{method}({', '.join(_fmt(a) for a in args)})"
        self.lines.append(_UNIQUE_SUFFIX.sub("", line))
        return result

    def note(self, text: str) -> None:
        self.lines.append(f"# {text}")


class Plan:
    """The Funcs of one built algorithm plus what the kernel metadata says about them."""

    def __init__(self, meta: KernelMeta, funcs: dict[str, Any], caps: DeviceCaps, source: str = "") -> None:
        self.meta = meta
        self.funcs = funcs
        self.caps = caps
        self.source = source
        self.extents = {v.name: v.static_extent for v in meta.loop_vars}
        self.reduction_var_names = {v.name for v in meta.loop_vars if v.reduction}
        self.contiguous_var_names = {v.name for v in meta.loop_vars if v.contiguous}
        self.out_specs = {a.name: a for a in meta.args if a.kind == "out"}

    def shared_transcendentals(self) -> list[hl.Func]:
        """Pure Funcs computing exp/log/… that several other Funcs read: worth storing once per row, not recomputing."""
        defs: dict[str, str] = {}
        for m in _DEF.finditer(self.source):
            defs[m.group(1)] = defs.get(m.group(1), "") + "\n" + m.group(2)
        found = []
        for name, rhs in defs.items():
            if not _TRANSCENDENTAL.search(rhs) or name in self.meta.reductions or "\n" in rhs.strip():
                continue
            users = sum(1 for other, r in defs.items() if other != name and re.search(rf"\b{name}\[", r))
            users += sum(1 for line in self.source.splitlines() if re.match(rf"\s*out_ptr\d+\[.*\b{name}\[", line))
            func = self.funcs.get(name)
            if users >= 2 and isinstance(func, hl.Func) and not func.has_update_definition():
                found.append(func)
        return found

    @property
    def gpu_vectors(self) -> bool:
        """Whether GPU work-items may use vectors. Halide 21's OpenCL backend fails (an empty "Error:") on
        vectorized is_nan/is_inf (which erf, clamp and max/min NaN checks use), so such OpenCL kernels stay scalar."""
        return not ("opencl" in self.meta.halide_target and _NO_OPENCL_VECTORS.search(self.source))

    def outputs(self) -> list[hl.Func]:
        return [self.funcs[n] for n in self.meta.outputs]

    def transposed_inputs(self, x: hl.Var, y: hl.Var) -> list[Any]:
        """2-D inputs read along ``y`` at their stride-1 dim while the output runs along ``x`` (a transpose)."""
        found = []
        for m in _LOAD.finditer(self.source):
            name, first = m.group(1), m.group(2)
            param = self.funcs.get(name + STORAGE_SUFFIX, self.funcs.get(name))
            stride1 = re.search(rf"^\s*{name}(?:{STORAGE_SUFFIX})?\.dim\(0\)\.set_bounds\([^)]*\)\.set_stride\(1\)", self.source, re.M)
            if (isinstance(param, hl.ImageParam) and param.dimensions() == 2 and stride1
                    and re.search(rf"\b{y.name()}\b", first) and not re.search(rf"\b{x.name()}\b", first)
                    and all(p is not param for p in found)):
                found.append(param)
        return found

    def reductions(self) -> list[hl.Func]:
        return [self.funcs[n] for n in self.meta.reductions if isinstance(self.funcs.get(n), hl.Func)]

    def output_extents(self, name: str) -> list[Optional[int]]:
        """Static extent of each output dimension (innermost first), None when symbolic."""
        out = []
        for e in self.out_specs[name].shape:
            try:
                out.append(int(e))
            except ValueError:
                out.append(None)
        return out

    def var_extent(self, func: hl.Func, var: hl.Var) -> Optional[int]:
        if var.name() in self.extents:
            return self.extents[var.name()]
        if func.name() in self.out_specs:
            names = [v.name() for v in func.args()]
            return self.output_extents(func.name())[names.index(var.name())]
        return None

    def is_contiguous(self, var: hl.Var) -> bool:
        """Whether ``var`` indexes a stride-1 dimension of some input."""
        return var.name() in self.contiguous_var_names

    def is_reduction_var(self, var: hl.Var) -> bool:
        return var.name() in self.reduction_var_names


def total(extents: list[Optional[int]]) -> Optional[int]:
    if any(e is None for e in extents):
        return None
    return math.prod(e for e in extents if e is not None)


def pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def fuse_all(rec: Recorder, func: hl.Func, vars_: list[hl.Var], label: str) -> hl.Var:
    """Fuse ``vars_`` (innermost first) into one Var."""
    fused = vars_[0]
    for i, v in enumerate(vars_[1:]):
        new = hl.Var(f"{label}_f{i}")
        rec(func, label, "fuse", fused, v, new)
        fused = new
    return fused

"""GPU rows that a kernel both stores and scatters (an embedding gradient beside its LayerNorm backward): every
output's store and the scatter in one work-group per row, after the row's reductions.

Halide fuses two stages' loops (``compute_with``) only where each fused loop is of the same kind, and a scatter's
row loops are RVars whose stores may collide, where a plain store's are pure Vars. So for this variant the
kernel's source is rewritten (``rewrite``): each plain output becomes an undefined pure definition plus one update
over the kernel's domain that stores at ``hx.row_index(...)`` of the row RVars, which hides from Halide that those
stores are distinct (they are; the update runs with ``allow_race_conditions``)."""
from __future__ import annotations

import re
from typing import Optional

import halide as hl

from ..meta import KernelMeta, ScheduleSpec
from .common import GRID_YZ_MAX, NotApplicable, Plan, Recorder, inner_reduction, reduction_extent
from .gpu_reduction import reduce_in_rows, row_threads, row_work_group, stage_rows
from .updates import race_or_atomic, update_mode

_DOM_VAR = re.compile(r"^\s*(hi\d+) = idom\[(\d+)\]\s*$", re.M)
_ROW_INDEX = "hx.row_index("


def _plain_line(name: str, loop: list[str]) -> re.Pattern:
    return re.compile(rf"^(\s*){name}\[{', '.join(loop)}\] = (.*)$", re.M)


def rewrite(meta: KernelMeta, source: str) -> Optional[str]:
    """``source`` with its plain outputs stored by updates over ``idom`` (see the module's docstring), or None
    where the kernel does not qualify: a reduction over one loop Var whose outputs are each either stored once over
    all loop Vars in order, or stored by one update over ``idom`` (a scatter; at least one: Llama's embedding
    gradient scatters its RMSNorm backward's rows and stores nothing else)."""
    loop = [v.name for v in meta.loop_vars]
    if meta.schedule.family != "reduction" or sum(v.reduction for v in meta.loop_vars) != 1 or len(loop) > 4:
        return None
    dom = sorted((int(i), name) for name, i in _DOM_VAR.findall(source))
    if [name for _, name in dom] != [f"hi{v[1:]}" for v in loop] or any(not v[1:].isdigit() for v in loop):
        return None
    plain, scatters = [], []
    for name in meta.outputs:
        stores = re.findall(rf"^\s*{name}\[(.*)\] \+?= ", source, re.M)
        if len(stores) == 1 and _plain_line(name, loop).search(source):
            plain.append(name)
        elif len(stores) == 2 and stores[0].startswith("hl.Var()") and re.search(r"\bhi\d+\b", stores[1]):
            scatters.append(name)
        else:
            return None
    if not scatters:
        return None
    rows = {v.name for v in meta.loop_vars if not v.reduction}
    index = ", ".join(f"{_ROW_INDEX}hi{v[1:]})" if v in rows else f"hi{v[1:]}" for v in loop)
    for name in plain:
        def store(m: re.Match, name: str = name) -> str:
            value = re.sub(r"\bh(\d+)\b", r"hi\1", m.group(2))
            return (f"{m.group(1)}{name}[{', '.join(loop)}] = hl.undef({name}.type())\n"
                    f"{m.group(1)}{name}[{index}] = {value}")
        source = _plain_line(name, loop).sub(store, source, count=1)
    return source


def fused_scatter(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """One work-group per row for every output's update (``rewrite``): the plain outputs' stores first, then the
    scatters', each fused with the first at the row (``compute_with``); the row's reductions and staged values
    are computed there once, for all of them."""
    loop = plan.meta.loop_vars
    outs = plan.outputs()
    if any(o.num_update_definitions() != 1 or len(o.rvars(0)) != len(loop) for o in outs):
        raise NotApplicable("an output not stored by one update over the kernel's domain (gpu_scatter.rewrite)")
    if not inner_reduction(plan):
        raise NotApplicable("scattered rows: the reduction is not along the stride-1 dim")
    # row dims stay a grid: over one fused row RVar Halide bounded a row's staged values over every row of the inner
    # dim (GPT-2's: 1.6 MB of shared memory per work-group, CUDA_ERROR_INVALID_VALUE at launch)
    extents = [v.static_extent for v in loop if not v.reduction]
    if len(extents) > 3 or any((e or GRID_YZ_MAX + 1) > GRID_YZ_MAX for e in extents[1:]):
        raise NotApplicable("scattered rows: more than 3 row dims, or one beyond a grid's y or z")
    plain = [o for o in outs if _stores_at_row_index(o)]
    o = (plain or outs)[0]
    ext = reduction_extent(plan, o)
    staged, row_vec, wg = row_work_group(plan, spec, ext, True)
    row = None
    for f in [o, *[t for t in outs if t is not o]]:
        stage, lbl = f.update(0), f"{f.name()}.update(0)"
        mode = "race" if any(f is p for p in plain) else update_mode(rec, plan, f, 0, spec)[0]
        if mode not in ("race", "atomic"):
            raise NotApplicable(f"{lbl} runs {mode}")
        race_or_atomic(rec, stage, lbl, mode)
        dom = list(f.rvars(0))
        rows = [r for r, v in zip(dom, loop) if not v.reduction]
        x = next(r for r, v in zip(dom, loop) if v.reduction)
        # the same RDom's RVars in every update: the loops compute_with matches by name
        row_threads(rec, stage, lbl, x, rows, wg, row_vec if any(f is p for p in plain) else 1, f"{f.name()}_x")
        rec(stage, lbl, "gpu_blocks", *rows)
        if row is None:
            row = rows[0]
        else:
            rec(stage, lbl, "compute_with", o.update(0), rows[0])
    stage_rows(rec, plan, o, row, wg, row_vec, staged)
    reduce_in_rows(rec, plan, (o, row), wg, ext, row_vec, True, spec)


def _stores_at_row_index(f: hl.Func) -> bool:
    return any("hx_row_index" in str(a) for a in f.update_args(0)) if f.has_update_definition() else False

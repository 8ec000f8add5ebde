"""Schedule of a combo kernel (``halide_xpu.combo``): every output's update in one launch, blocks end to end."""
from __future__ import annotations

import dataclasses
import re

from ..meta import ScheduleSpec
from .common import NotApplicable, Plan, Recorder

_PART = re.compile(r"^def part(\d+)\(\):\n", re.M)


def part_sources(source: str) -> dict[int, str]:
    """Part index -> its algorithm's source, cut from a combo kernel's source at each ``def partN():``."""
    found = list(_PART.finditer(source))
    ends = [m.start() for m in found[1:]] + [source.find("\ndef algorithm():")]
    return {int(m.group(1)): source[m.end():end] for m, end in zip(found, ends)}


def schedule_combo(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """Each output's update: blocks over ``hxc.z``, work-items over ``hxc.y``, lanes over ``hxc.x`` (vectorized).
    Within a part each update is fused with the part's previous one at the work-item (``compute_with``: stored in
    the part's order); each part's first with the first part's (a star, not a chain: Halide's bounds of a chain of
    fused loops grew with its length). A part's costly 0-d Funcs (AdamW's ``pow(beta, step)``) are computed once
    per work-group of the part (tunable ``scalar_hoist``, as for pointwise kernels), not in every work-item."""
    if not plan.caps.gpu:
        raise NotApplicable("combo kernels are GPU kernels")
    outs = dict(zip(plan.meta.outputs, plan.outputs()))  # Func names may carry Halide's $n suffix
    groups = plan.funcs.get("hx_combo_parts") or [[name] for name in outs]
    part_funcs = plan.funcs.get("hx_combo_funcs") or []
    sources = part_sources(plan.source) if part_funcs and spec.get("scalar_hoist", 1) else {}
    root, root_out = None, outs[groups[0][0]]
    for i, group in enumerate(groups):
        previous = root
        for name in group:
            out = outs[name]
            stage, label = out.update(0), f"{out.name()}.update(0)"
            lanes, items, blocks = out.rvars(0)
            rec(stage, label, "allow_race_conditions")  # distinct points: hx.row_index hides that from Halide
            rec(stage, label, "gpu_blocks", blocks)
            rec(stage, label, "gpu_threads", items)
            # a part of one lane: a loop of extent 1, which Halide drops; ``vector`` 0: lanes unrolled (Halide
            # fails to vectorize some GPU math with an empty "Error:", as for pointwise kernels)
            rec(stage, label, "vectorize" if spec.get("vector", 1) else "unroll", lanes)
            if previous is not None:
                rec(stage, label, "compute_with", previous, items)
            previous = stage
            root = root or stage
        if i in sources:
            part = Plan(dataclasses.replace(plan.meta, reductions=()), part_funcs[i], plan.caps, sources[i])
            for f in part.costly_scalars():
                rec(f, f.name(), "compute_at", root_out, root_out.rvars(0)[2])

"""Schedule of a combo kernel (``halide_xpu.combo``): every output's update in one launch, blocks end to end."""
from __future__ import annotations

from ..meta import ScheduleSpec
from .common import NotApplicable, Plan, Recorder


def schedule_combo(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """Each output's update: blocks over ``hxc.w``, work-items over ``hxc.z``, each work-item's vectors over
    ``hxc.y`` (unrolled, inside the work-item loop), lanes over ``hxc.x`` (vectorized). Within a part each update is
    fused with the part's previous one at the work-item (``compute_with``: stored in the part's order); each part's
    first with the first part's (a star, not a chain: Halide's bounds of a chain of fused loops grew with its
    length). A part's 0-d values stay in its work-items: computed per work-group they cost every work-group of the
    launch a barrier per value (ResNet-18's AdamW step, 24 parts: 202 us on the H200 against 161 inline)."""
    if not plan.caps.gpu:
        raise NotApplicable("combo kernels are GPU kernels")
    outs = dict(zip(plan.meta.outputs, plan.outputs()))  # Func names may carry Halide's $n suffix
    groups = plan.funcs.get("hx_combo_parts") or [[name] for name in outs]
    scalars = plan.funcs.get("hx_combo_scalars") or [[] for _ in groups]
    root = None
    for group, costly in zip(groups, scalars):
        previous = root
        for name in group:
            out = outs[name]
            stage, label = out.update(0), f"{out.name()}.update(0)"
            lanes, vectors, items, blocks = out.rvars(0)
            rec(stage, label, "allow_race_conditions")  # distinct points: hx.row_index hides that from Halide
            rec(stage, label, "gpu_blocks", blocks)
            rec(stage, label, "gpu_threads", items)
            rec(stage, label, "unroll", vectors)
            # a part of one lane: a loop of extent 1, which Halide drops; ``vector`` 0: lanes unrolled (Halide
            # fails to vectorize some GPU math with an empty "Error:", as for pointwise kernels)
            rec(stage, label, "vectorize" if spec.get("vector", 1) else "unroll", lanes)
            if previous is not None:
                rec(stage, label, "compute_with", previous, items)
            previous = stage
            root = root or stage
        # several vectors per work-item (``per_item``): the part's costly 0-d values computed once per work-item,
        # before its vectors, not once per vector (inlined, each unrolled vector repeats AdamW's float64 pow)
        if spec.get("per_item", 1) > 1 and spec.get("scalar_hoist", 1):
            first = outs[group[0]]
            for f in costly:
                rec(f, f.name(), "compute_at", first, first.rvars(0)[2])

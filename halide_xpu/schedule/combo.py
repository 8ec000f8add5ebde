"""Schedule of a combo kernel (``halide_xpu.combo``): every output's update in one launch, blocks end to end."""
from __future__ import annotations

from ..meta import ScheduleSpec
from .common import NotApplicable, Plan, Recorder


def schedule_combo(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """Each output's update: blocks over ``hxc.z``, work-items over ``hxc.y``, lanes over ``hxc.x`` (vectorized),
    fused with the previous output's at the work-item (``compute_with``: Halide guards each by its own bounds), so
    the outputs are stored in ``meta.outputs`` order within a work-item."""
    if not plan.caps.gpu:
        raise NotApplicable("combo kernels are GPU kernels")
    previous = None
    for out in plan.outputs():
        stage, label = out.update(0), f"{out.name()}.update(0)"
        lanes, items, blocks = out.rvars(0)
        rec(stage, label, "allow_race_conditions")  # distinct points: hx.row_index hides that from Halide
        rec(stage, label, "gpu_blocks", blocks)
        rec(stage, label, "gpu_threads", items)
        # a part of one lane: a loop of extent 1, which Halide drops; ``vector`` 0: lanes unrolled (Halide fails to
        # vectorize some GPU math with an empty "Error:", as for pointwise kernels)
        rec(stage, label, "vectorize" if spec.get("vector", 1) else "unroll", lanes)
        if previous is not None:
            rec(stage, label, "compute_with", previous, items)
        previous = stage

"""Explicit, parametric Halide schedules per kernel family (pointwise, reduction), for CPU and GPU targets."""
from __future__ import annotations

import logging
from typing import Any, Callable

from .. import config
from ..meta import KernelMeta, LoopVar, ScheduleSpec
from ..target.targets import DeviceCaps
from . import pointwise, reduction
from .common import Plan, Recorder

log = logging.getLogger(__name__)

Variant = Callable[[Recorder, Plan, ScheduleSpec], None]


def default_spec(loop_vars: tuple[LoopVar, ...], has_reduction: bool, caps: DeviceCaps) -> ScheduleSpec:
    """The schedule family for a kernel and its default tunables (the autotuner overrides them)."""
    if config.scheduler != "explicit":
        return ScheduleSpec(f"autoschedule:{config.scheduler}", (("parallelism", caps.parallelism),))
    family = reduction if has_reduction else pointwise
    params = family.default_params(caps.gpu, caps.vector_width)
    params.update(config.schedule_overrides)
    if caps.gpu:
        for key in ("wg", "wg_row"):
            if key in params:
                params[key] = min(params[key], caps.max_work_group)
    return ScheduleSpec("reduction" if has_reduction else "pointwise", tuple(sorted(params.items())))


def _pointwise_all(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    for out in plan.outputs():
        pointwise.schedule_output(rec, plan, out, spec)


def _none(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    rec.note("Halide default schedule (everything inlined or computed where used)")


def variants(meta: KernelMeta, caps: DeviceCaps) -> list[tuple[str, Variant]]:
    """Candidate schedules for ``meta``, best first; the last one is always legal."""
    if meta.schedule.family == "reduction":
        found = reduction.variants(caps.gpu)
    else:
        found = [("pointwise", _pointwise_all)]
    return [*found, ("none", _none)]


def apply(variant: Variant, meta: KernelMeta, funcs: dict[str, Any], caps: DeviceCaps, source: str = "") -> list[str]:
    rec = Recorder()
    variant(rec, Plan(meta, funcs, caps, source), meta.schedule)
    return rec.lines

"""Schedule fingerprints: candidates whose tunables build the same schedule in every variant are measured once."""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from typing import Any, Optional

from .. import pairs, schedule
from .. import halide_helpers as hx
from ..meta import KernelMeta, ScheduleSpec
from ..target.targets import DeviceCaps

log = logging.getLogger(__name__)

FAMILIES = ("pointwise", "reduction")  # built by compiler.compile_scheduled alone (combos and scans: other paths)
COMPILE_PARAMS = ("grf",)  # tunables read outside the schedule (device_binary: Intel's register-file mode)
# names that count what one process has built, not what the schedule is: Halide's suffix of a re-created Func
# (tmp2$4) and an rfactor intermediate's (tmp5_2_intm where a tmp5_intm exists: dropped), its RDoms' implicit
# names (r22$x: renumbered in order of first use)
_UNIQUE = re.compile(r"\$\d+|_\d+(?=_intm\b)")
_COUNTED = (re.compile(r"\b(r)(\d+)(?=\$)"),)


def with_params(meta: KernelMeta, params: dict[str, int]) -> KernelMeta:
    """``meta`` scheduled with ``params`` (as the measuring worker builds a candidate)."""
    return dataclasses.replace(meta, schedule=ScheduleSpec(meta.schedule.family, tuple(sorted(params.items()))))


def fingerprint(meta: KernelMeta, source: str, caps: DeviceCaps) -> Optional[str]:
    """A hash of what a build of ``meta`` (its tunables set) depends on: the source after the tunables' rewrites
    (``pairs``), and the schedule lines every variant records (or why it does not apply), in order. Two candidates
    with one fingerprint compile to the same kernel whichever variant Halide then accepts: a tunable the kernel's
    form never reads (GPT-2's padded logits gradient takes the fused pointwise form, which fixes ``strided`` and
    ``unroll``: 10 of its 25 candidates on the H200 were the defaults again). None where it cannot be computed
    (another family, or the algorithm itself failed): the candidate is then measured."""
    if meta.schedule.family not in FAMILIES:
        return None
    import halide as hl

    try:
        meta, source = pairs.apply(meta, source)
        parts = [repr(meta.pairs), repr(meta.loop_vars), source,
                 repr([(p, meta.schedule.get(p, None)) for p in COMPILE_PARAMS])]
        for name, variant in schedule.variants(meta, caps):
            vsource = schedule.variant_source(name, meta, source)
            parts.append(f"## {name}")
            if vsource is None:
                parts.append("not applicable")
                continue
            if vsource is not source:
                parts.append(vsource)
            ns: dict[str, Any] = {}
            exec(compile(vsource, "<halide_xpu kernel>", "exec"), ns)  # noqa: S102 - our own generated source
            with hx.building_for(meta.target):
                funcs = ns["algorithm"]()
            try:
                parts += schedule.apply(variant, meta, funcs, caps, vsource)
            except (hl.HalideError, schedule.UnscheduledUpdate, schedule.NotApplicable) as e:
                parts.append(f"rejected: {e}")
    except Exception as e:  # noqa: BLE001 - a fingerprint only saves time: without one the candidate is measured
        log.debug("halide_xpu tune: no schedule fingerprint (%s: %s)", type(e).__name__, e)
        return None
    text = _UNIQUE.sub("", "\n".join(parts))
    for pattern in _COUNTED:
        order: dict[str, str] = {}
        text = pattern.sub(lambda m: m.group(1) + order.setdefault(m.group(2), str(len(order))), text)
    return hashlib.sha256(text.encode()).hexdigest()

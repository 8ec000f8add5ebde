"""Explicit, parametric Halide schedules per kernel family (pointwise, reduction, scan), for CPU and GPU targets."""
from __future__ import annotations

import logging
import re
from typing import Any, Callable, Optional

from .. import config
from ..meta import STORAGE_SUFFIX, KernelMeta, LoopVar, ScheduleSpec
from ..target.targets import DeviceCaps
from . import combo, gpu_scatter, gpu_warps, pointwise, reduction, scan
from .updates import schedule_error_word  # noqa: F401  (compiler.py: the check pipeline)
import halide as hl

from .common import (GUARD, NotApplicable, Plan, Recorder, fuse_all, hoist_scalars, index_texts, reads,
                     separate_local_widths, total, update_pure_vars)

log = logging.getLogger(__name__)

Variant = Callable[[Recorder, Plan, ScheduleSpec], None]


FAMILIES = {"pointwise": pointwise, "reduction": reduction, "scan": scan}


def default_spec(loop_vars: tuple[LoopVar, ...], family_name: str, caps: DeviceCaps,
                 tuned: Optional[dict[str, int]] = None) -> ScheduleSpec:
    """The default tunables of schedule family ``family_name`` (pointwise, reduction, scan) for a kernel;
    ``tuned`` (a schedule database record, autotune/apply.py) replaces those it names, ``config.schedule_overrides``
    win over both."""
    if config.scheduler != "explicit":
        return ScheduleSpec(f"autoschedule:{config.scheduler}", (("parallelism", caps.parallelism),))
    family = FAMILIES[family_name]
    params = family.default_params(caps.gpu, caps.vector_width)
    if caps.grf:  # Intel GPUs: the register-file mode their device binaries are built with (device_binary.py)
        params["grf"] = config.GRF_MODES.index(config.grf_mode)
    params.update({k: v for k, v in (tuned or {}).items() if k in params})
    params.update(config.schedule_overrides)
    if caps.gpu:
        for key in ("wg", "wg_row", "wg_row_staged", "wg_full"):
            if key in params:
                params[key] = min(params[key], caps.max_work_group)
    return ScheduleSpec(family_name, tuple(sorted(params.items())))


def _pointwise_all(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    for out in plan.outputs():
        pointwise.schedule_output(rec, plan, out, spec)
    if plan.caps.gpu and len(plan.outputs()) == 1:
        hoist_scalars(rec, plan, plan.outputs()[0], f"{plan.outputs()[0].name()}_wg")


def _none(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    rec.note("Halide default schedule (everything inlined or computed where used)")


def _gpu_safe(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """Last resort on GPUs: each reduction in its own kernel, one work-item per result (serial over the
    reduction), outputs one scalar work-item per element. Slow but on the device: Halide's default schedule
    would compute on the host, where device pointers cannot be read."""
    rec.note("gpu_safe: the better GPU schedules were rejected by Halide")
    scalar = spec.with_params(vector=1, parallel_updates=0)
    for f in plan.reductions():
        args = list(f.args())
        if not args and not f.has_update_definition():
            continue  # a constant: inlined
        rec(f, f.name(), "compute_root")
        stages = [(f, f.name())] + [(f.update(i), f"{f.name()}.update({i})") for i in range(f.num_update_definitions())]
        for i, (stage, label) in enumerate(stages):
            pure = args if i == 0 else update_pure_vars(f, i - 1)
            if not pure:  # a scan's update leaves out the scanned dim: serial over it
                rec(stage, label, "gpu_single_thread")
                continue
            x = fuse_all(rec, stage, pure, f"{f.name()}_{len(rec.lines)}") if len(pure) > 1 else pure[0]
            rec(stage, label, "gpu_tile", x, hl.Var(f"{f.name()}_wg"), hl.Var(f"{f.name()}_wi"), 64, GUARD)
    for out in plan.outputs():
        pointwise.schedule_output(rec, plan, out, scalar)


def _pointwise_fused(rec: Recorder, plan: Plan, spec: ScheduleSpec) -> None:
    """GPU: every output in one kernel (pointwise.gpu_fused). Safe with in-place outputs (an optimizer's update)
    because every input an output overwrites is read through its snapshot, copied by an earlier kernel: no output
    reads memory another output writes (Halide declares kernel buffers ``noalias`` and reads inputs through the
    non-coherent cache, so one kernel could not order such a load before the store)."""
    if not pointwise.fusable_outputs(plan):
        raise NotApplicable("outputs differ in domain or have updates: no shared loop nest")
    outs = plan.outputs()
    pointwise.gpu_fused(rec, plan, outs, total([plan.var_extent(outs[0], v) for v in outs[0].args()]), spec)
    hoist_scalars(rec, plan, outs[0], f"{outs[0].name()}_wg")


def variants(meta: KernelMeta, caps: DeviceCaps) -> list[tuple[str, Variant]]:
    """Candidate schedules for ``meta``, best first. On GPUs every candidate runs on the device (the last is
    always legal there); on the host the last is Halide's default schedule."""
    if meta.schedule.family == "reduction":
        found = reduction.variants(caps.gpu)
        if caps.gpu and gpu_warps.applicable(meta):  # CUDA, asked for by the schedule (a tuned record, an override)
            found.insert(0, ("fused_warps", gpu_warps.gpu_fused_warps))
        if caps.gpu:  # rows stored and scattered by one kernel; its source rewritten (``variant_source``)
            found.insert(0, ("fused_scatter", gpu_scatter.fused_scatter))
    elif meta.schedule.family == "combo":  # halide_xpu.combo: no other variant stores its outputs
        return [("combo", combo.schedule_combo),
                ("combo_scalar", lambda rec, plan, spec: combo.schedule_combo(rec, plan, spec.with_params(vector=0)))]
    elif meta.schedule.family == "scan":
        found = [("scan_rows", scan.scan_rows)]
        if caps.gpu:  # a chunked scan (few rows) in one kernel
            found.insert(0, ("scan_chunks", scan.scan_chunks))
        if caps.gpu:  # the empty "Error:" of vectorized GPU math, as for pointwise kernels
            found.append(("scan_rows_scalar", lambda rec, plan, spec: scan.scan_rows(rec, plan, spec.with_params(vector=1))))
    else:
        found = [("pointwise", _pointwise_all)]
        if caps.gpu and len(meta.outputs) >= 2:
            found.insert(0, ("pointwise_fused", _pointwise_fused))
        if caps.gpu:  # Halide fails to vectorize some math for GPUs (empty "Error:"): scalar work-items next
            found.append(("pointwise_scalar", lambda rec, plan, spec: _pointwise_all(rec, plan, spec.with_params(vector=1))))
    return [*found, ("gpu_safe", _gpu_safe) if caps.gpu else ("none", _none)]


_SOURCE_REWRITES = {"fused_scatter": gpu_scatter.rewrite}


def variant_source(name: str, meta: KernelMeta, source: str) -> Optional[str]:
    """The kernel source that variant ``name`` schedules: ``source``, or rewritten for that variant; None where the
    variant does not apply to the kernel."""
    rewrite = _SOURCE_REWRITES.get(name)
    return rewrite(meta, source) if rewrite else source


def _param(plan: Plan, name: str) -> Any:
    """The ImageParam of input ``name`` (its storage-typed one where the kernel has both), or None."""
    param = plan.funcs.get(name + STORAGE_SUFFIX, plan.funcs.get(name))
    return param if isinstance(param, hl.ImageParam) else None


_OUT_INDEX = re.compile(r"^\s*out_ptr\d+\[([^\]]*)\]\s*=", re.M)


def private_points(plan: Plan, meta: KernelMeta) -> bool:
    """Whether a work-item reads the inputs its outputs overwrite only at its own points: one layout for every
    output and every such input, and the source reads those inputs only at the outputs' index (an optimizer's
    update; Llama's 2-D ``down_proj`` weight too). Such copies can live in the work-item's registers, loaded
    before any output is stored."""
    outs = [a for a in meta.args if a.kind == "out"]
    layouts = {(a.shape, a.stride, a.offset) for a in meta.args if a.kind == "out" or a.name in meta.snapshots}
    if not meta.snapshots or len(layouts) != 1 or not outs[0].shape:
        return False
    lhs = index_texts(_OUT_INDEX, plan.source)
    return len(lhs) == 1 and all(reads(plan.source, n) == lhs for n in meta.snapshots)


def _snapshot_inputs(rec: Recorder, plan: Plan, meta: KernelMeta, in_registers: bool) -> list[hl.Func]:
    """Inputs an output overwrites (``KernelMeta.snapshots``) are read through a copy made before any output; on
    GPUs copies of one static shape share one kernel (AdamW's three state tensors: one launch, not three).
    ``in_registers``: the copies are only made here, each work-item's part of them later (``_fused_in_registers``)."""
    copies, shapes, names = [], [], []
    for name in meta.snapshots:
        param = _param(plan, name)
        if param is None:
            continue
        copies.append(rec(param, name, "in_"))
        shapes.append(next((a.shape for a in meta.args if a.name == name), None))
        names.append(name)
    if in_registers:
        return copies
    for name, copy in zip(names, copies):
        rec(copy, f"{name}_snapshot", "compute_root")
    spec = meta.schedule.with_params(vector=1) if plan.caps.gpu else meta.schedule
    static = [[int(e) for e in shape] if shape and all(str(e).isdigit() for e in shape) else None for shape in shapes]
    if plan.caps.gpu and len(copies) > 1 and static[0] and all(s == static[0] for s in static):
        pointwise.gpu_fused(rec, plan, copies, total(static[0]), spec)
        return copies
    for copy in copies:
        pointwise.schedule_output(rec, plan, copy, spec)
    return copies


def _register_tiling(plan: Plan, meta: KernelMeta, spec: ScheduleSpec) -> Optional[tuple[int, int]]:
    """(work-group size, lanes) for ``_fused_in_registers``: the kernel qualifies (``private_points``) and its
    points tile exactly, so no work-item lies past the end (a work-item's register copy is loaded outside the
    tail guard Halide puts around stores: a tail would read past the inputs). An N-D layout takes one row of
    vectors per work-group (32 to 1024 work-items). None: the copy kernel instead."""
    if not (pointwise.fusable_outputs(plan) and private_points(plan, meta)):
        return None
    out = plan.outputs()[0]
    dims = [plan.var_extent(out, v) for v in out.args()]
    vec = spec.get("vector", 4) if plan.gpu_vectors else 1
    while dims[0] and vec >= 1:
        if dims[0] % vec == 0:
            n = dims[0] // vec
            if len(dims) > 1:
                wg = n if 32 <= n <= plan.caps.max_work_group else None
            else:
                wg = next((w for w in range(256, 31, -32) if n % w == 0), None)
            if wg is not None:
                return wg, vec
        vec //= 2
    return None


def _fused_in_registers(rec: Recorder, plan: Plan, copies: list[hl.Func], wg: int, vec: int,
                        spec: ScheduleSpec) -> None:
    """Every output in one kernel, each work-item ``vec`` points of each; it loads its points of the inputs the
    outputs overwrite into registers first, then computes and stores every output: no copy kernel and no second
    pass (AdamW's update: 2 launches and 13 array passes became 1 and 7). An N-D layout: a row per work-group, its
    outer dims the blocks (tiles of dims fused together took Halide's bounds of the copies over whole rows: the
    fused stages' bounds lose ``f % rows``)."""
    outs = plan.outputs()
    prefix = outs[0].name()
    wi, block = hl.Var(f"{prefix}_wi"), f"{prefix}_wg"
    for f in outs:
        x = f.args()[0]
        if vec > 1:
            xv, lanes = hl.Var(f"{prefix}_v"), hl.Var(f"{prefix}_lanes")
            rec(f, f.name(), "split", x, xv, lanes, vec, GUARD)
            rec(f, f.name(), "vectorize", lanes)
            x = xv
        if len(f.args()) > 1:
            rec(f, f.name(), "rename", x, wi)
            rows = fuse_all(rec, f, list(f.args()[1:]), f.name(), prefix)
            rec(f, f.name(), "rename", rows, hl.Var(block))
            rec(f, f.name(), "gpu_blocks", hl.Var(block))
            rec(f, f.name(), "gpu_threads", wi)
        else:
            rec(f, f.name(), "gpu_tile", x, hl.Var(block), wi, wg, GUARD)
    for before, f in zip(outs, outs[1:]):
        rec(f, f.name(), "compute_with", before, wi)
    hoist_scalars(rec, plan, outs[0], block)
    # ``vector_copies``: each work-item's points of an input in one vector load (always for bf16 pairs: 4 words are
    # one 128-bit load; narrower lanes would be scalar loads and shuffles, see Plan.unroll_lanes)
    vector = spec.get("vector_copies", 0) or bool(plan.meta.pairs)
    for copy in copies:
        rec(copy, copy.name(), "compute_at", outs[0], wi)
        rec(copy, copy.name(), "vectorize" if vector else "unroll", copy.args()[0])


class UnscheduledUpdate(RuntimeError):
    """A schedule variant left an output's update definition without directives: the variant is rejected."""


def _check_updates(rec: Recorder, plan: Plan) -> None:
    """Every update of every output has a schedule. Halide only warns about a missed one, and runs it serially; in
    a GPU kernel it runs on the host, through device buffers' host pointers (Llama's fp32 training step on CUDA
    came out wrong that way)."""
    for out in plan.outputs():
        for i in range(out.num_update_definitions()):
            if not {f"{out.name()}.update({i})", f"{out.name()}.update()" if i == 0 else ""} & rec.labels:
                raise UnscheduledUpdate(f"{out.name()}.update({i}) has no schedule")


def apply(variant: Variant, meta: KernelMeta, funcs: dict[str, Any], caps: DeviceCaps, source: str = "") -> list[str]:
    plan = Plan(meta, funcs, caps, source)
    rec = Recorder(unroll_lanes=plan.unroll_lanes)
    tiling = _register_tiling(plan, meta, meta.schedule) if variant is _pointwise_fused and caps.gpu else None
    copies = _snapshot_inputs(rec, plan, meta, in_registers=tiling is not None)
    if tiling is not None:
        _fused_in_registers(rec, plan, copies, *tiling, meta.schedule)
    else:
        variant(rec, plan, meta.schedule)
    if variant is not _none:
        _check_updates(rec, plan)
    if caps.gpu:
        separate_local_widths(rec)
        rec.check_local_vectors()
    return rec.lines

"""Plugs halide-xpu into Inductor's per-device backend registry, lazily, when Inductor's codegen loads."""
from __future__ import annotations

import dataclasses
import functools
import importlib.abc
import importlib.machinery
import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)

COMMON = "torch._inductor.codegen.common"
SCHEDULER = "torch._inductor.scheduler"
DEVICES = ("cpu", "xpu", "cuda")


def register_backends() -> None:
    """Wrap the cpu/xpu/cuda schedulings so the backend knobs can pick halide-xpu (idempotent)."""
    from torch._inductor.codegen import common

    for device in DEVICES:
        entry = common.device_codegens.get(device)
        if entry is None or getattr(entry.scheduling, "halide_xpu_dispatch", False):
            continue
        common.device_codegens[device] = dataclasses.replace(
            entry, scheduling=scheduling_factory(device, entry.scheduling)
        )
        common.custom_backend_passes[device] = _cache_key_pass(common.custom_backend_passes.get(device), device)
    log.debug("halide_xpu backends registered for %s", DEVICES)


def _cache_key_pass(existing: Any, device: str) -> Any:
    """A pass that puts halide-xpu's state into Inductor's FX graph cache key (without it a graph compiled for one
    ``cpu_target``/device/knob setting would be reused for another) and, where ``device`` uses halide-xpu, marks
    comparisons of 16-bit float tensors (``mark_low_precision_comparisons``)."""
    from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files

    class HalideXpuCacheKey(CustomGraphModulePass):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __call__(self, gm: Any) -> None:
            if self.inner is not None:
                self.inner(gm)
            if uses_halide_xpu(device):
                mark_low_precision_comparisons(gm, device)

        def uuid(self) -> Any:
            from . import config

            inner = self.inner.uuid() if self.inner is not None else None
            state = repr(sorted(config.knobs().items())) + repr(_backend_state())
            return (inner, get_hash_for_files(_package_files(), extra=state))

    return HalideXpuCacheKey(existing)


def mark_low_precision_comparisons(gm: Any, device: str) -> int:
    """Mark each comparison of an fp16/bf16 tensor on ``device`` as Inductor's ``low_precision_pointwise_barrier``:
    its lowering rounds those inputs to their dtype first, as eager compares the stored values. Fused kernels keep a
    16-bit value in fp32, and a value recomputed in the backward (amin's input, compared with the saved minimum)
    then equals no rounded one: every count of minima was 0 and the gradient 0/0 = NaN (graph_fuzz seed 7547).
    On the ``cpu`` device every op with a 16-bit float result is marked too, so each rounds its inputs and result as
    eager does, which is what Inductor's own C++ kernels do there (``legalize_lowp_fp_dtype``): CPU decompositions
    round statistics to the input's dtype (layer_norm's saved mean), and a recomputed fp32 value minus that rounded
    mean was not 0 for a row of one element, a gradient of 1.25e6 for eager's 0 (graph_fuzz seed 8856). GPU
    devices keep Triton's numerics (16-bit values stay fp32 inside a kernel). Returns how many were marked."""
    import torch

    aten = torch.ops.aten
    compares = {aten.eq, aten.ne, aten.lt, aten.le, aten.gt, aten.ge}
    low = (torch.float16, torch.bfloat16)

    def low_on_device(v: Any) -> bool:
        return isinstance(v, torch.Tensor) and v.dtype in low and v.device.type == device

    marked = 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        if getattr(node.target, "overloadpacket", None) in compares:
            mark = any(low_on_device(a.meta.get("val")) for a in node.all_input_nodes)
        else:
            mark = device == "cpu" and low_on_device(node.meta.get("val"))
        if mark:
            node.meta["low_precision_pointwise_barrier"] = True
            marked += 1
    return marked


@functools.lru_cache(maxsize=None)
def _package_files() -> tuple[str, ...]:
    import pathlib

    return tuple(str(p) for p in sorted(pathlib.Path(__file__).parent.rglob("*.py")))


def _backend_state() -> tuple[Any, ...]:
    import torch._inductor.config as cfg

    from . import config

    state: tuple[Any, ...] = (cfg.cpu_backend, getattr(cfg, "xpu_backend", None), cfg.cuda_backend)
    if uses_halide_xpu("cpu"):
        state += (config.resolved_cpu_target,)
    return state


def _patch_common(module: Any) -> None:
    original = module.init_backend_registration
    if getattr(original, "halide_xpu_wrapped", False):
        return

    @functools.wraps(original)
    def init_backend_registration() -> None:
        original()
        register_backends()

    init_backend_registration.halide_xpu_wrapped = True  # type: ignore[attr-defined]
    module.init_backend_registration = init_backend_registration


def _patch_scheduler(module: Any) -> None:
    """Upstream keys two Halide-specific scheduler decisions on ``cpu_backend == "halide"``; extend them to ours."""
    cls = module.Scheduler
    if getattr(cls, "halide_xpu_patched", False):
        return
    merge_loops = cls.merge_loops
    expand_dim = cls.get_expand_dim_for_pointwise_nodes

    def patched_merge_loops(self: Any) -> None:
        import torch

        if uses_halide_xpu("cpu"):
            with torch._inductor.config.patch(cpu_backend="halide"):
                return merge_loops(self)
        return merge_loops(self)

    def patched_expand_dim(self: Any, node1: Any, node2: Any) -> Any:
        device = node1.get_device()
        if device is not None and uses_halide_xpu(device.type):
            return None  # Halide kernels do not index with modulus
        return expand_dim(self, node1, node2)

    create_backend = cls.create_backend

    def patched_create_backend(self: Any, device: Any) -> Any:
        # the device registry may have been replaced since import (a test restoring upstream's entries, torch 2.11
        # GPUTests: "KeyError: 'halide_xpu'" from upstream's cuda lookup): wrap it again before dispatching
        if uses_halide_xpu(device.type):
            register_backends()
        return create_backend(self, device)

    cls.merge_loops = patched_merge_loops
    cls.get_expand_dim_for_pointwise_nodes = patched_expand_dim
    cls.create_backend = patched_create_backend
    cls.halide_xpu_patched = True


def uses_halide_xpu(device_type: str) -> bool:
    """Whether the Inductor backend knob of ``device_type`` selects halide-xpu."""
    import torch._inductor.config as cfg

    if device_type == "cpu":
        return cfg.cpu_backend == "halide_xpu"
    if device_type == "xpu":
        return getattr(cfg, "xpu_backend", "triton") in ("halide", "halide_xpu")
    if device_type == "cuda":
        return cfg.cuda_backend == "halide_xpu"
    return False


def scheduling_factory(device_type: str, upstream: Any) -> Any:
    """Scheduling constructor for the device registry: ours when the device's knob picks it, else upstream's."""

    def make(scheduler: Any) -> Any:
        if uses_halide_xpu(device_type):
            from .scheduling import HalideXpuScheduling

            return HalideXpuScheduling(scheduler)
        return upstream(scheduler)

    make.halide_xpu_dispatch = True  # type: ignore[attr-defined]
    return make


def _usm_everywhere(_module: Any) -> None:
    """``HALIDE_XPU_USM_TENSORS=1``: every CPU tensor in USM from the first Dynamo import on (the sycl emulation for
    code that allocates its own tensors, e.g. PyTorch's test suites); not during ``import torch``, where building
    the allocator deadlocked."""
    if os.environ.get("HALIDE_XPU_USM_TENSORS") == "1":
        from . import usm

        usm.usm_tensors_process_wide()


_PATCHES = {COMMON: _patch_common, SCHEDULER: _patch_scheduler, "torch._dynamo": _usm_everywhere}


class _PostImportHook(importlib.abc.MetaPathFinder):
    """Runs a patch right after one of ``_PATCHES`` modules executes (keeps ``import torch`` cheap)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = getattr(finder, "find_spec", lambda *a: None)(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module: Any) -> None:
            original_exec(module)
            _PATCHES[fullname](module)

        loader.exec_module = exec_module
        return spec


_hook = _PostImportHook()


def install() -> None:
    """Called from the ``torch.backends`` entry point (and on ``import halide_xpu``)."""
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if COMMON in sys.modules and sys.modules[COMMON].get_scheduling_for_device("cpu") is not None:
        register_backends()
    if _hook not in sys.meta_path:
        sys.meta_path.insert(0, _hook)

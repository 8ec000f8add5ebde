"""Inductor ``BaseScheduling`` for halide-xpu: SIMD fusion, Halide kernels, logged per-kernel fallbacks."""
from __future__ import annotations

import logging
from typing import Any, Optional

import torch
from torch._inductor.codegen.common import BackendFeature
from torch._inductor.codegen.halide import HalideScheduling, Unsupported
from torch._inductor.codegen.simd import SIMDScheduling
from torch._inductor.utils import IndentedBuffer, get_kernel_metadata
from torch._inductor.virtualized import V

from . import combo, config, sizes, stats
from .autotune import apply as autotune_apply
from .kernel import COMBO_PART, HalideXpuKernel, emit_call
from .meta import KernelMeta
from .target import targets

log = logging.getLogger(__name__)

META_IMPORT = "from halide_xpu.meta import KernelMeta, ArgSpec, LoopVar, ScheduleSpec"
LOADER_IMPORT = "from halide_xpu.asyncload import load_kernel as halide_xpu_load"


# While a fallback scheduling generates code, Inductor must see its own backend name for the device.
_FALLBACK_KNOBS = {"cpu": {"cpu_backend": "cpp"}, "xpu": {"xpu_backend": "triton"}, "cuda": {"cuda_backend": "triton"}}


def _fallback_scheduling(device_type: str, scheduler: Any) -> Any:
    if device_type == "cpu":
        from torch._inductor.codegen.cpp import CppScheduling

        return CppScheduling(scheduler)
    from torch._inductor.codegen.triton import TritonScheduling

    return TritonScheduling(scheduler)


INT32_LIMIT = 2**31  # Halide's extents, strides and (without the large_buffers feature) buffer sizes are int32


def _too_large(node: Any) -> Optional[str]:
    """Why a node is beyond Halide's 32-bit sizes: an iteration space or a buffer (in bytes) of 2**31 or more;
    None when it fits (symbolic sizes are judged by their hints)."""
    try:
        numel, rnumel = node.group[1]
        points = sizes.hint(numel * rnumel, 1)
    except (TypeError, ValueError):
        points = 1
    if points >= INT32_LIMIT:
        return f"{points} points in its loop nest (Halide's extents are int32)"
    for dep in node.read_writes.reads | node.read_writes.writes:
        try:
            buf = V.graph.get_buffer(dep.name)
            size = sizes.hint(buf.get_layout().storage_size(), 1) * buf.get_dtype().itemsize
        except Exception:  # noqa: BLE001 - not a buffer with a layout (a symbol, a mutation marker): no limit
            continue
        if size >= INT32_LIMIT:
            return f"buffer {dep.name} of {size} bytes (Halide's buffer sizes are int32)"
    return None


def without_single_element_reduction(features: Any) -> Any:
    """Backend features less ``REDUCE_TO_SINGLE_ELEMENT``: Inductor then splits large full reductions."""
    return type(features)(f for f in features if f != BackendFeature.REDUCE_TO_SINGLE_ELEMENT)


class HalideXpuScheduling(HalideScheduling):
    """Upstream ``HalideScheduling`` fusion rules; kernels are Halide pipelines with explicit schedules."""

    kernel_type = HalideXpuKernel  # type: ignore[assignment]

    def __init__(self, scheduler: Any) -> None:
        super().__init__(scheduler)
        self._fallbacks: dict[str, Any] = {}
        self._combo_depth = 0  # inside codegen_combo_kernel: buffers are freed after the whole combo node
        self._parts: Optional[list[tuple[combo.Part, Any, HalideXpuKernel, str]]] = None  # its kernels, when combined

    @classmethod
    def get_backend_features(cls, device: Any) -> Any:
        """Upstream's features, less ``REDUCE_TO_SINGLE_ELEMENT`` on GPUs: Inductor splits a large full reduction
        into two kernels there, as it does for Triton. Unsplit, a reduction of 2**31+ elements (beyond Halide's
        int32 extents) fell back to a single-program Triton loop that returned 0 on the H100 (GPUTests'
        ``split_reduction_with_int64_size``: ``mean`` of 3e9 elements); split, each kernel is one Triton splits
        the same way (ours below 2**31 points)."""
        features = super().get_backend_features(device)
        kind = torch.device(device).type
        if config.scan_kernels == "all" or (config.scan_kernels == "gpu" and kind != "cpu"):
            features.add(BackendFeature.SCAN)
        else:
            features.discard(BackendFeature.SCAN)
        # foreach lowerings (an optimizer step) group their kernels into one node: a combo kernel on GPU targets
        gpu = kind != "cpu" or config.resolved_cpu_target in ("opencl", "sycl")
        if config.combo_kernels and gpu:
            features.add(BackendFeature.FOREACH)
        if kind == "cpu":
            return features
        return without_single_element_reduction(features)

    def _fallback(self, device_type: str) -> Any:
        if device_type not in self._fallbacks:
            self._fallbacks[device_type] = _fallback_scheduling(device_type, self.scheduler)
        return self._fallbacks[device_type]

    def codegen_node(self, node: Any) -> Any:
        try:
            try:
                why_large = _too_large(node)
                if why_large:
                    raise Unsupported(why_large)
                if node.is_split_scan() and node.get_device().type != "cpu":
                    raise Unsupported("a split scan (one long row across programs)")
                if V.graph.cpp_wrapper:
                    from .cpp_wrapper import unsupported

                    device = node.get_device()
                    target = config.resolved_cpu_target if device.type == "cpu" else device.type
                    why = unsupported(device.type, "sycl" if target == "xpu" else target, bool(V.graph.aot_mode))
                    if why:
                        raise Unsupported(why)
                return super().codegen_node(node)
            except KeyError as e:  # a dtype Halide has no type for (complex64): upstream's table raises KeyError
                if e.args and isinstance(e.args[0], torch.dtype):
                    raise Unsupported(f"dtype {e.args[0]}") from e
                raise
        except (Unsupported, NotImplementedError) as e:
            names = tuple(n.get_name() for n in node.get_nodes())
            device = node.get_device()
            if not config.fallback:
                raise RuntimeError(f"halide_xpu cannot lower {names}: {type(e).__name__}: {e}") from e
            fallback = _fallback_scheduling_name(device.type)
            log.warning(
                "halide_xpu: cannot lower %s (%s: %s); using Inductor's %s kernel for it",
                ", ".join(names), type(e).__name__, e, fallback,
            )
            stats.fallbacks.append(stats.Fallback(names, f"{type(e).__name__}: {e}", fallback))
            stats.counters["fallbacks"] += 1
            with torch._inductor.config.patch(_FALLBACK_KNOBS[device.type]):
                self._codegen_fallback(node, device)
            return None

    def codegen_combo_kernel(self, combo_kernel_node: Any) -> None:
        """A foreach node (an optimizer step) or ``config.combo_kernels`` group: independent kernels. On GPU targets
        those that qualify (``combo.part_of``) run as one combo kernel (``config.combo_kernels``), the rest each as
        a kernel of its own. The scheduler's buffers last used by the combo node are freed after its last
        sub-kernel, not after the first (the H100 run of GPUTests: ``del arg0_1`` before a later sub-kernel used it)."""
        self._combo_depth += 1
        self._parts = [] if config.combo_kernels else None
        try:
            for sub in combo_kernel_node.get_subkernel_nodes():
                self.codegen_node(sub)
            parts, self._parts = self._parts or [], None
            self._launch_combos(parts)
        finally:
            self._parts = None
            self._combo_depth -= 1
        self.free_buffers_in_scheduler()

    def _launch_combos(self, captured: list[tuple[combo.Part, Any, HalideXpuKernel, str]]) -> None:
        """Defines and calls the kernels of ``captured`` parts: a combo kernel per group (``combo.groups``), a part
        alone as the kernel it was."""
        by_part = {id(part): (schedule, kernel, src) for part, schedule, kernel, src in captured}
        for group in combo.groups([part for part, _, _, _ in captured]):
            if len(group) == 1:
                schedule, kernel, src = by_part[id(group[0])]
                kernel.call_kernel(self._define(src, kernel.xpu_meta(), schedule))
                continue
            first = group[0].meta
            caps = targets.device_caps(first.target, first.device_type, first.device_index)
            meta, src_code, call_args = combo.merge(group, min(config.combo_wg, caps.max_work_group),
                                                    per_item=config.combo_per_item)
            node_schedule = [n for part in group for n in by_part[id(part)][0]]
            name = self._define(src_code, meta, node_schedule)
            self.codegen_comment(node_schedule, name)
            emit_call(name, list(call_args), lambda meta=meta: meta)
            stats.counters["combo_kernels"] += 1
            stats.counters["combo_parts"] += len(group)

    def codegen_comment(self, node_schedule: Any, kernel_name: Optional[str] = None) -> None:
        """Each call site names the FX nodes its kernel computes, as Triton's do: a kernel that several node groups
        share (GPT-2's identical residual LayerNorms, one definition) shows every group where it is called, so
        per-kernel tables pair each call with the other backend's (``benchmarks/kernel_table.py``)."""
        if kernel_name and not kernel_name.startswith(COMBO_PART):
            origins, _ = get_kernel_metadata(node_schedule, V.graph.wrapper_code)
            if origins:
                V.graph.wrapper_code.make_comment(origins)
        super().codegen_comment(node_schedule, kernel_name)

    def free_buffers_in_scheduler(self) -> None:
        if not self._combo_depth:
            super().free_buffers_in_scheduler()

    def _codegen_fallback(self, node: Any, device: torch.device) -> None:
        sched = self._fallback(device.type)
        if device.type != "cpu":
            sched.codegen_node(node)  # Triton uses the same SIMD grouping
            sched.flush()
            return
        for sub in node.get_nodes():  # C++ groups differ: one C++ kernel per node, regrouped its way
            saved = sub.group
            sub.group = (saved[0], sched.group_fn(sub._sizes))
            try:
                sched.codegen_node(sub)
                sched.flush()
            finally:
                sub.group = saved

    def flush(self) -> None:
        for sched in self._fallbacks.values():
            sched.flush()
        super().flush()

    def define_kernel(self, src_code: str, node_schedule: Any, kernel: HalideXpuKernel) -> str:
        meta = kernel.xpu_meta()
        if self._parts is not None:  # inside a combo node: kept for _launch_combos where it qualifies
            buffers = {arg: buf for table in (kernel.args.input_buffers, kernel.args.output_buffers)
                       for buf, arg in table.items() if isinstance(arg, str)}
            part = combo.part_of(meta, src_code, kernel.xpu_call_args(), buffers)
            if part is not None:
                self._parts.append((part, list(node_schedule), kernel, src_code))
                return f"{COMBO_PART}{len(self._parts)}"
        return self._define(src_code, meta, node_schedule)

    def _define(self, src_code: str, meta: KernelMeta, node_schedule: Any) -> str:
        wrapper = V.graph.wrapper_code
        # a schedule database record for this kernel replaces the default tunables and is named in the source
        meta, src_code = autotune_apply.apply(meta, src_code)
        # the metadata is part of the kernel: two kernels of one source can differ in an argument's offset or
        # layout (unbind's x[0] and x[1] are the same 0-d load at offsets 0 and 1)
        key = f"{src_code}\n# {meta!r}"
        if key in wrapper.src_to_kernel:
            return wrapper.src_to_kernel[key]
        kernel_name = f"halide_xpu_kernel_{wrapper.next_kernel_suffix()}"
        wrapper.src_to_kernel[key] = kernel_name
        origins, detailed = get_kernel_metadata(node_schedule, wrapper)
        if V.graph.cpp_wrapper:  # built now; the C++ wrapper calls the library's C entry point
            from . import compiler, cpp_wrapper

            launcher = compiler.load(meta, src_code)
            library = str(launcher.library)
            # no Python at launch: the build for pointers off the vector alignment is made now (cuda, sycl)
            scalar = str(launcher.scalar_variant().library) if launcher.scalar_variant is not None else None
            aot_files = wrapper.additional_files if V.graph.aot_mode else None
            definition = cpp_wrapper.kernel_definition(kernel_name, meta, library, aot_files, scalar)
            wrapper.define_kernel(kernel_name, definition, f"{origins}\n{detailed}", gpu=False)
            return kernel_name
        wrapper.add_import_once(META_IMPORT)
        wrapper.add_import_once(LOADER_IMPORT)
        body = IndentedBuffer()
        body.writeline(f"halide_xpu_load(async_compile, {meta!r}, '''")
        body.splice(src_code, strip=True)
        body.writeline("''')")
        wrapper.define_kernel(kernel_name, body.getvalue(), f"{origins}\n{detailed}")
        return kernel_name


def _fallback_scheduling_name(device_type: str) -> str:
    return "C++" if device_type == "cpu" else "Triton"


__all__ = ["HalideXpuScheduling", "SIMDScheduling"]

"""Inductor codegen for the real ``xpu`` device without one: fake XPU tensors in, wrapper + kernel source out."""
from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Iterator, Sequence
from unittest import mock

import torch

from .target.sycl_devices import NOMINAL_XPU

XPU = torch.device("xpu", 0)


@contextlib.contextmanager
def no_xpu_hardware() -> Iterator[None]:
    """Stand-ins for what Inductor asks an XPU build at codegen time: device properties (reduction splits),
    Triton's presence (Inductor requires it for any GPU even when the backend does not use it), the raw
    stream getter the wrapper imports. Nothing here runs a kernel."""
    from torch._dynamo.device_interface import XpuInterface

    props = types.SimpleNamespace(
        name=NOMINAL_XPU.name,
        gpu_subslice_count=NOMINAL_XPU.compute_units,
        max_compute_units=NOMINAL_XPU.compute_units,
        max_work_group_size=NOMINAL_XPU.max_work_group_size,
        sub_group_sizes=list(NOMINAL_XPU.sub_group_sizes),
        has_fp16=NOMINAL_XPU.fp16,
        has_fp64=NOMINAL_XPU.fp64,
    )
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(XpuInterface, "get_device_properties", staticmethod(lambda device=None: props)))
        stack.enter_context(mock.patch.object(XpuInterface, "get_compute_capability", staticmethod(lambda device=None: "nominal")))
        stack.enter_context(mock.patch("torch._inductor.scheduler.has_triton", lambda: True))
        import torch._subclasses.fake_tensor as fake_tensor

        if hasattr(fake_tensor, "init_gpu_context"):  # torch <= 2.11 touches the device for every fake GPU tensor
            stack.enter_context(mock.patch.object(fake_tensor, "init_gpu_context", lambda device: None))
        if not hasattr(torch._C, "_xpu_getCurrentRawStream"):
            stack.enter_context(mock.patch.object(torch._C, "_xpu_getCurrentRawStream", lambda index: 0, create=True))
        yield


@contextlib.contextmanager
def _cpp_wrapper_for_xpu(enabled: bool) -> Iterator[None]:
    """Inductor's GPU C++ wrapper as on an XPU machine, in one pass: the GPU type is xpu (torch asks the hardware),
    and the Triton autotuning block, which has no kernel to tune here, is not run."""
    if not enabled:
        yield
        return
    from torch._inductor.codegen import cpp_wrapper_gpu
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    with contextlib.ExitStack() as stack:
        stack.enter_context(torch._inductor.config.patch({"cpp_wrapper": True, "triton.autotune_at_compile_time": True}))
        stack.enter_context(mock.patch.object(cpp_wrapper_gpu, "get_gpu_type", lambda: "xpu"))
        stack.enter_context(mock.patch.object(PythonWrapperCodegen, "generate_and_run_autotune_block", lambda self: None))
        yield


def _retarget(gm: torch.fx.GraphModule, to_xpu: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Move a graph traced on CPU fake tensors to the XPU device (metadata and device kwargs)."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            node.meta["val"] = to_xpu(val)
        elif isinstance(val, (tuple, list)):
            node.meta["val"] = type(val)(to_xpu(v) if isinstance(v, torch.Tensor) else v for v in val)
        if isinstance(node.kwargs.get("device"), torch.device):
            node.kwargs = {**node.kwargs, "device": XPU}
    gm.recompile()


def generate_xpu_code(fn: Callable[..., Any], example_inputs: Sequence[torch.Tensor], cpp_wrapper: bool = False) -> str:
    """The Python module Inductor generates for ``fn`` on ``xpu`` with the current ``xpu_backend``.

    ``fn`` is traced with Inductor's decompositions on CPU fake tensors of the inputs' shapes/strides, moved to
    XPU fake tensors, lowered and scheduled; nothing executes and no XPU hardware is needed. ``cpp_wrapper``: the C++
    wrapper's source instead (Inductor's GPU C++ wrapper with XPU's device overrides; the kernels are built now).
    """
    from torch._inductor.debug import DebugContext
    from torch._inductor.decomposition import select_decomp_table
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    with no_xpu_hardware(), _cpp_wrapper_for_xpu(cpp_wrapper), FakeTensorMode() as mode:
        def fake(t: torch.Tensor, device: Any) -> torch.Tensor:
            return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device)

        cpu_inputs = [fake(t, "cpu") for t in example_inputs]
        gm = make_fx(fn, decomposition_table=select_decomp_table())(*cpu_inputs)
        _retarget(gm, lambda t: fake(t, XPU))
        inputs = [fake(t, XPU) for t in example_inputs]
        graph = GraphLowering(gm, example_inputs=inputs, cpp_wrapper=cpp_wrapper)
        with V.set_graph_handler(graph), V.set_debug_handler(DebugContext()):
            graph.run(*inputs)
            code = graph.codegen()[0]
        del mode
    return code.value if hasattr(code, "value") else str(code)


def load_xpu_module(code: str) -> types.ModuleType:
    """Import generated XPU code: compiles its Halide kernels for the sycl target (nothing is launched)."""
    from torch._inductor.codecache import PyCodeCache

    with no_xpu_hardware():
        return PyCodeCache.load(code)

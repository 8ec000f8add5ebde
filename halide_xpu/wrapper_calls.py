"""The wrapper's call line of a generated kernel: Python or C++ wrapper, cuda/xpu streams, torch-version quirks."""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch._inductor.virtualized import V

from . import stats
from .meta import KernelMeta


def emit_call(name: str, call_args: list[str], meta: Callable[[], KernelMeta]) -> None:
    """Writes the wrapper's call of kernel ``name`` (``meta``: its metadata, asked for only where needed)."""
    wrapper = V.graph.wrapper_code
    device = V.graph.get_current_device_or_throw()
    # for cuda/xpu the wrapper itself appends torch's current raw stream as the last argument
    if V.graph.cpp_wrapper and device.type != "cpu":
        # the call line written here: Inductor's GPU C++ wrapper writes non-Triton calls as members of its
        # kernel table in some torch versions (2.11: ``kernels.name(...)``, which our functions are not)
        from .cpp_wrapper import call_line

        stream = "stream" if V.graph.aot_mode else _raw_stream(wrapper, device)
        host = frozenset(i for i, n in enumerate(call_args) if _on_host(n))
        wrapper.writeline(call_line(name, call_args, meta(), stream, host))
    elif device.type == "xpu" and not _wrapper_calls_xpu_kernels():
        # torch <= 2.11 writes non-Triton GPU kernel calls for cuda only ("device xpu nyi"): same line by hand
        wrapper.writeline(f"{name}.{name}({', '.join(call_args)}, c_void_p({_raw_stream(wrapper, device)}))")
    elif V.graph.cpp_wrapper:
        from .cpp_wrapper import arg_types

        wrapper.generate_kernel_call(name, call_args, device=device, triton=False, arg_types=arg_types(meta()))
    else:
        wrapper.generate_kernel_call(name, call_args, device=device, triton=False)
    stats.record_kernel(name)


def _on_host(name: str) -> bool:
    """Whether buffer or graph input ``name`` is a CPU tensor (one a GPU kernel reads: a 0-d CPU tensor)."""
    buf = V.graph.try_get_buffer(name)
    device = buf.get_device() if buf is not None else None
    return device is not None and device.type == "cpu"


def _raw_stream(wrapper: Any, device: torch.device) -> str:
    """The wrapper's variable holding torch's current raw stream of ``device`` (written once per graph)."""
    try:
        return wrapper.write_get_raw_stream(device.index, V.graph.name)
    except TypeError:  # torch <= 2.11 takes the graph
        return wrapper.write_get_raw_stream(device.index, V.graph)


@functools.lru_cache(maxsize=None)
def _wrapper_calls_xpu_kernels() -> bool:
    """Whether this torch's wrapper codegen emits non-Triton kernel calls (with the raw stream) for xpu."""
    import inspect

    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    try:
        source = inspect.getsource(PythonWrapperCodegen._generate_kernel_call_helper)
    except (OSError, TypeError, AttributeError):
        return False
    return '"xpu"' in source

"""Shared fixtures: run graphs through torch.compile with halide-xpu on each CPU target and compare to eager."""
from __future__ import annotations

import os
import re
from typing import Any, Callable

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import halide_xpu
from halide_xpu.target import opencl_devices

CPU_TARGETS = ["host", "opencl"]
TARGETS = CPU_TARGETS + (["cuda"] if torch.cuda.is_available() else [])
_current: dict[str, str] = {}


def opencl_available() -> bool:
    return opencl_devices.select_device() is not None


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # One kernel cache per test session (fast), never the user's; Inductor's FX cache off so every test codegens.
    root = tmp_path_factory.getbasetemp() / "halide_xpu_cache"
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(root))
    monkeypatch.setattr(torch._inductor.config, "fx_graph_cache", False)
    halide_xpu.stats.reset()


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "opencl" and not opencl_available():
        pytest.skip("no OpenCL device")
    if request.param == "cuda":
        monkeypatch.setattr(torch._inductor.config, "cuda_backend", "halide_xpu")
    else:
        monkeypatch.setattr(halide_xpu.config, "cpu_target", request.param)
        monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    torch._dynamo.reset()
    _current["target"] = request.param
    return request.param


def on_target(x: Any) -> Any:
    """Move tensors to the device of the current target (CUDA tests reuse the CPU graphs)."""
    if _current.get("target") != "cuda":
        return x
    return torch.utils._pytree.tree_map(lambda t: t.cuda() if isinstance(t, torch.Tensor) else t, x)


def fallback_kernel_marker() -> str:
    return "triton_" if _current.get("target") == "cuda" else "cpp_fused"


KERNEL_CALL = re.compile(r"halide_xpu_kernel_\d+ = halide_xpu_load\(async_compile, KernelMeta\(")


def compile_and_check(
    fn: Callable[..., Any],
    *args: Any,
    atol: float | None = None,
    rtol: float | None = None,
    dynamic: bool = False,
    allow_fallback: bool = False,
) -> str:
    """Compile ``fn``, compare every output with eager, assert halide-xpu generated the kernels; returns the wrapper."""
    halide_xpu.stats.reset()
    args = on_target(args)
    expected = fn(*args)
    compiled = torch.compile(fn, dynamic=dynamic, fullgraph=True)
    actual, codes = run_and_get_code(compiled, *args)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    code = "\n".join(codes)
    target = _current.get("target", halide_xpu.config.cpu_target)
    assert KERNEL_CALL.search(code), "halide_xpu generated no kernel:\n" + code
    assert f"target='{target}'" in code, f"kernels not built for target {target}"
    if not allow_fallback:
        assert fallback_kernel_marker() not in code and not halide_xpu.stats.fallbacks, halide_xpu.stats.fallbacks
    return code

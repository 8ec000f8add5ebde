"""Shared fixtures: run graphs through torch.compile with halide-xpu on each CPU target and compare to eager."""
from __future__ import annotations

import os
import re
from typing import Any, Callable

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import halide_xpu
from halide_xpu.target import opencl_devices, sycl_devices

CPU_TARGETS = ["host", "opencl", "sycl"]
TARGETS = CPU_TARGETS + (["cuda"] if torch.cuda.is_available() else [])
_current: dict[str, str] = {}


def opencl_available() -> bool:
    return opencl_devices.select_device() is not None


def sycl_unavailable() -> str | None:
    """Why the sycl emulation cannot run here (None when it can)."""
    return sycl_devices.available()


# A CUDA fault (misaligned address, illegal access) poisons the context: every later test of the process would fail.
# Under xdist the worker exits so that xdist reports the test as crashed and starts a fresh worker for the rest.
_STICKY_CUDA = re.compile(r"CUDA_ERROR_(MISALIGNED_ADDRESS|ILLEGAL_ADDRESS|ILLEGAL_INSTRUCTION|LAUNCH_FAILED)|"
                          r"misaligned address|illegal memory access")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    report = outcome.get_result()
    if report.failed and os.environ.get("PYTEST_XDIST_WORKER") and _STICKY_CUDA.search(str(report.longrepr)):
        import sys

        sys.stderr.write(f"\n{item.nodeid}: sticky CUDA error, this worker exits:\n{report.longrepr}\n")
        sys.stderr.flush()
        os._exit(70)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # One kernel cache per test session (fast), never the user's; Inductor's FX cache off so every test codegens.
    root = tmp_path_factory.getbasetemp() / "halide_xpu_cache"
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(root))
    # no schedule database records (the committed ones, the user's) unless a test writes its own
    monkeypatch.setattr(halide_xpu.config, "schedule_db", str(root / "schedules-of-tests"))
    monkeypatch.setattr(torch._inductor.config, "fx_graph_cache", False)
    halide_xpu.stats.reset()


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "opencl" and not opencl_available():
        pytest.skip("no OpenCL device")
    if request.param == "sycl":
        why = sycl_unavailable()
        if why:
            pytest.skip(why)
        from halide_xpu import usm

        scope = usm.usm_tensors()  # the emulation's XPU tensors: every CPU tensor of the test lives in USM
        scope.__enter__()
        request.addfinalizer(lambda: scope.__exit__(None, None, None))
    if request.param == "cuda":
        monkeypatch.setattr(torch._inductor.config, "cuda_backend", "halide_xpu")
    else:
        monkeypatch.setattr(halide_xpu.config, "cpu_target", request.param)
        monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    torch._dynamo.reset()
    monkeypatch.setitem(_current, "target", request.param)  # restored after the test: never stale for the next
    return request.param


def use_opencl_device(monkeypatch: pytest.MonkeyPatch, cache: Any) -> None:
    """Compile CPU tensors' kernels for ``opencl`` (the GPU schedules on the OpenCL CPU device) into ``cache``, and
    make it ``compile_and_check``'s target (a sycl test earlier in the worker may have left another); skips the test
    where no OpenCL device exists."""
    if not opencl_available():
        pytest.skip("no OpenCL device")
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "opencl")
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(cache))
    monkeypatch.setitem(_current, "target", "opencl")
    torch._dynamo.reset()


def on_target(x: Any) -> Any:
    """Move tensors to the device of the current target (CUDA tests reuse the CPU graphs; the sycl emulation
    needs them in USM, views kept)."""
    target = _current.get("target")
    if target == "cuda":
        move = lambda t: t.cuda()  # noqa: E731
    elif target == "sycl":
        from halide_xpu import usm

        move = usm.to_usm
    else:
        return x
    return torch.utils._pytree.tree_map(lambda t: move(t) if isinstance(t, torch.Tensor) else t, x)


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
    reference: Callable[..., Any] | None = None,
) -> str:
    """Compile ``fn``, compare every output with eager (``reference`` when given: see ``eager_in_float64``), assert
    halide-xpu generated the kernels; returns the wrapper."""
    halide_xpu.stats.reset()
    args = on_target(args)
    target = _current.get("target", halide_xpu.config.cpu_target)
    before = _usm_counters(target)
    expected = (reference or fn)(*args)
    compiled = torch.compile(fn, dynamic=dynamic, fullgraph=True)
    actual, codes = run_and_get_code(compiled, *args)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    code = "\n".join(codes)
    if target == "sycl":  # the USM runtime ran our kernels and never copied between host and device
        after = _usm_counters(target)
        assert after["launches"] > before["launches"], "no kernel ran through the USM runtime"
        words = code.count("error_word=True")  # a checked kernel may read its error word back (device checks)
        assert before["copies_to_host"] <= after["copies_to_host"] <= before["copies_to_host"] + words, (before, after)
        assert after["copies_to_device"] == before["copies_to_device"], (before, after)
    assert KERNEL_CALL.search(code), "halide_xpu generated no kernel:\n" + code
    # a schedule variant that raised (a bug in its code) is passed over for the next one: never in a test
    assert not halide_xpu.stats.counters["schedule_errors"], "a schedule variant raised: see the warning logged"
    from halide_xpu import compiler

    on_host = [l.library for l in compiler._memory.values() if l.meta.target != "host" and l.variant == "none"]
    assert not on_host, f"device kernels scheduled on the host: {on_host}"
    assert f"target='{target}'" in code, f"kernels not built for target {target}"
    if not allow_fallback:
        assert fallback_kernel_marker() not in code and not halide_xpu.stats.fallbacks, halide_xpu.stats.fallbacks
    return code


def eager_in_float64(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Eager ``fn`` on float64 copies of floating inputs, its outputs cast back to each input's dtype: the reference
    for ops whose vectorized fp32 eager kernel is wrong at a special value (torch 2.13's vectorized fp32 gelu gives
    gelu(+inf) = NaN; its scalar path, its float64 kernel and Inductor's C++ give inf, the limit)."""

    def run(*xs: Any) -> Any:
        dtypes = [x.dtype for x in xs if isinstance(x, torch.Tensor) and x.is_floating_point()]
        wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
        out = fn(*wide)
        back = lambda t: t.to(dtypes[0]) if isinstance(t, torch.Tensor) and t.is_floating_point() else t  # noqa: E731
        return torch.utils._pytree.tree_map(back, out)

    return run


def _usm_counters(target: str) -> dict[str, int]:
    if target != "sycl":
        return {}
    from halide_xpu import usm

    return usm.counters()

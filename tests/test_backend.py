"""Registration, config contract, fallbacks and dynamic shapes."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import halide_xpu
from halide_xpu import config, stats
from halide_xpu.target import opencl_devices

from conftest import compile_and_check, fallback_kernel_marker, on_target


def test_import_torch_loads_plugin() -> None:
    code = "import sys, torch; print('halide_xpu' in sys.modules, 'torch._inductor.codegen.common' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"], "entry point must load halide_xpu without importing Inductor's codegen"


def test_backend_knobs_route_schedulings() -> None:
    from torch._inductor.codegen import common

    from halide_xpu.registration import uses_halide_xpu

    common.init_backend_registration()
    for device in ("cpu", "xpu", "cuda"):
        assert getattr(common.device_codegens[device].scheduling, "halide_xpu_dispatch", False), device
    with torch._inductor.config.patch(xpu_backend="halide"):
        assert uses_halide_xpu("xpu")
    assert not uses_halide_xpu("xpu")  # triton stays the default
    with torch._inductor.config.patch(cpu_backend="halide_xpu"):
        assert uses_halide_xpu("cpu")
    with torch._inductor.config.patch(cpu_backend="halide"):
        assert not uses_halide_xpu("cpu")  # upstream's halide keeps its meaning


def test_registry_replaced_after_import_still_dispatches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A device registry entry replaced by upstream's after import (a test restoring saved entries: torch 2.11's
    GPUTests raised "KeyError: 'halide_xpu'" from upstream's cuda lookup) is wrapped again when a backend is made."""
    import dataclasses

    from torch._inductor.codegen import common
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.utils import run_and_get_code

    common.init_backend_registration()
    monkeypatch.setitem(common.device_codegens, "cpu", dataclasses.replace(common.device_codegens["cpu"],
                                                                           scheduling=CppScheduling))
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    torch._dynamo.reset()
    _, codes = run_and_get_code(torch.compile(lambda x: x.sin() + 1), torch.randn(8))
    assert "halide_xpu_kernel" in codes[0] and "cpp_fused" not in codes[0]


def test_triton_default_for_xpu_dispatches_upstream() -> None:
    from torch._inductor.codegen import common
    from torch._inductor.codegen.xpu.xpu_combined_scheduling import XPUCombinedScheduling

    common.init_backend_registration()
    sched = common.device_codegens["xpu"].scheduling(None)
    assert isinstance(sched, XPUCombinedScheduling)


@pytest.mark.parametrize(
    "knob,value", [("cpu_target", "cuda"), ("scheduler", "magic"), ("opencl_device_type", "tpu"), ("fallback", "maybe")]
)
def test_bad_config_values(knob: str, value: str) -> None:
    with pytest.raises(ValueError, match=knob if knob != "fallback" else "boolean"):
        setattr(config, knob, value)


def test_schedule_overrides(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "schedule_overrides", "vector=4,wg=64")
    assert config.schedule_overrides == {"vector": 4, "wg": 64}
    code = compile_and_check(lambda x: torch.softmax(x, -1) * 2, torch.randn(17, 50))
    assert "('vector', 4)" in code and "('wg', 64)" in code
    with pytest.raises(ValueError, match="schedule_overrides"):
        config.schedule_overrides = "wg=big"


def test_env_knobs_and_bad_env() -> None:
    env = {**os.environ, "HALIDE_XPU_CPU_TARGET": "host", "HALIDE_XPU_ASSERTS": "0"}
    code = "import halide_xpu.config as c; print(c.cpu_target, c.asserts)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["host", "False"]
    env["HALIDE_XPU_CPU_TARGET"] = "gpu"
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert res.returncode != 0 and "HALIDE_XPU_CPU_TARGET" in res.stderr and "'opencl'" in res.stderr


def test_missing_opencl_device_falls_back_to_host(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(config, "cpu_target", None)
    monkeypatch.setattr(config, "opencl_platform", "no-such-platform")
    config.reset_warnings()
    with caplog.at_level(logging.WARNING, logger="halide_xpu.config"):
        assert config.resolved_cpu_target == "host"
        assert config.resolved_cpu_target == "host"
    warnings = [r for r in caplog.records if "no OpenCL device" in r.message]
    assert len(warnings) == 1 and "intel-opencl-rt" in warnings[0].message
    with pytest.raises(RuntimeError, match="no OpenCL device matches"):
        opencl_devices.require_device()
    monkeypatch.setattr(config, "opencl_platform", None)
    opencl_devices.select_device.cache_clear()


def test_opencl_device_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    devices = opencl_devices.list_devices()
    if not devices:
        pytest.skip("no OpenCL device")
    first = devices[0]
    monkeypatch.setattr(config, "opencl_platform", first.platform.split()[0])
    monkeypatch.setattr(config, "opencl_device_type", first.device_type)
    dev = opencl_devices.require_device()
    assert first.platform.split()[0].lower() in dev.platform.lower() and dev.device_type == first.device_type
    assert os.environ["HL_OCL_PLATFORM_NAME"] == dev.platform


def _erfinv_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every op has a lowering now: make one unsupported to exercise the fallback."""
    from torch._inductor.codegen.halide import Unsupported

    from halide_xpu.overrides import HalideXpuOverrides

    def refuse(x: object) -> str:
        raise Unsupported("erfinv (refused by the test)")

    monkeypatch.setattr(HalideXpuOverrides, "erfinv", staticmethod(refuse))


def test_unsupported_op_falls_back_and_is_logged(target: str, caplog: pytest.LogCaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _erfinv_unsupported(monkeypatch)
    x, y = torch.randn(16, 16), torch.rand(7) * 1.8 - 0.9
    with caplog.at_level(logging.WARNING, logger="halide_xpu.scheduling"):
        code = compile_and_check(lambda x, y: (torch.softmax(x, -1), torch.special.erfinv(y) * 2), x, y, allow_fallback=True)
    expected = "Triton" if target == "cuda" else "C++"
    assert stats.fallbacks and "erfinv" in stats.fallbacks[0].reason and stats.fallbacks[0].fallback == expected
    assert any("erfinv" in r.message and expected in r.message for r in caplog.records)
    assert fallback_kernel_marker() in code  # the fallback kernel, next to our Halide kernel


def test_fallback_disabled_raises(target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "fallback", False)
    _erfinv_unsupported(monkeypatch)
    with pytest.raises(Exception, match="erfinv"):
        torch.compile(lambda x: torch.special.erfinv(x))(on_target(torch.rand(8) * 0.5))


def test_dynamic_shapes(target: str) -> None:
    fn = lambda x, w: torch.softmax(x, -1) * w + x.sum(0)  # noqa: E731
    compiled = torch.compile(fn, dynamic=True)
    for n in (5, 9, 33):
        x, w = on_target((torch.randn(n, 12), torch.randn(12)))
        torch.testing.assert_close(compiled(x, w), fn(x, w))
    assert stats.counters["kernels_generated"] >= 1 and not stats.fallbacks
    code = compile_and_check(fn, torch.randn(7, 12), torch.randn(12), dynamic=True)
    assert "ks0" in code  # a symbolic size reached the Halide kernel


def test_asserts_catch_bad_buffers(target: str) -> None:
    """Halide's bounds checks stay on: a launcher misuse is an error, never a silent wrong result."""
    compiled = torch.compile(lambda x: x * 2)
    compiled(on_target(torch.randn(64)))
    from halide_xpu import compiler

    launcher = next(iter(compiler._memory.values()))
    with pytest.raises(TypeError, match="expects"):
        launcher()


@pytest.mark.parametrize("case", ["softmax", "residual_layer_norm", "row_sum"])
def test_rows_staged_in_local_memory(target: str, case: str) -> None:
    """Device schedules keep a row that several passes read in local memory, or in lanes' registers in CUDA's warp
    form (softmax's exp(x - max), a residual norm's x + y), and stage nothing when one pass reads the row (a plain
    sum); results still match eager."""
    if target == "host":
        pytest.skip("GPU-style schedules only")
    from halide_xpu import compiler

    fns = {
        "softmax": (lambda x, y: torch.softmax(x, -1), "exp("),  # hl.exp, or hx.cuda_exp (CUDA fast math)
        "residual_layer_norm": (lambda x, y: F.layer_norm(x + y, (256,)), "add("),  # hx.add: torch's integer rules
        "row_sum": (lambda x, y: x.sum(-1), None),
    }
    fn, staged_op = fns[case]
    compiler._memory.clear()
    compile_and_check(fn, torch.randn(16, 256), torch.randn(16, 256), atol=1e-5, rtol=1e-5)
    (launcher,) = [lau for lau in compiler._memory.values() if lau.meta.schedule.family == "reduction"]
    staged = [line.split(".")[0] for line in launcher.schedule if ".compute_at(out_ptr" in line
              and not any(k in line for k in ("_intm", "_wrapper")) and line.split(".")[0] not in launcher.meta.reductions]
    if staged_op is None:
        assert not staged, launcher.schedule
        return
    assert len(staged) >= 1, launcher.schedule
    source = (Path(launcher.library).parent / "kernel.py").read_text()
    defs = [line for line in source.splitlines() if any(line.strip().startswith(f"{s}[") for s in staged)]
    assert any(staged_op in d for d in defs), (staged, defs)
    # spread over the work-group's threads (or vector lanes), or over a warp's lanes in CUDA's warp form (registers)
    assert any(f"{staged[0]}.{how}(" in line for line in launcher.schedule
               for how in ("vectorize", "gpu_threads", "gpu_lanes")), launcher.schedule


def test_opencl_build_error_is_reported_by_the_child(tmp_path: Path) -> None:
    """The OpenCL C of a new kernel is built in a child process first: an error (or a compiler crash) there is a
    reason string, never a dead parent (target/opencl_build.py)."""
    if not opencl_devices.select_device():
        pytest.skip("no OpenCL device")
    from halide_xpu.target import opencl_build

    good, bad = tmp_path / "good.cl", tmp_path / "bad.cl"
    good.write_text("__kernel void k(__global float *x) { x[get_global_id(0)] *= 2.0f; }\n")
    bad.write_text("__kernel void k(__global float *x) { x[get_global_id(0)] = undefined_thing; }\n")
    assert opencl_build.check_in_child(good) is None
    why = opencl_build.check_in_child(bad)
    assert why is not None and "rejected" in why and "undefined_thing" in why, why


def test_opencl_kernel_the_device_compiler_refuses_runs_on_the_host(monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Every schedule variant refused by the OpenCL compiler: the kernel is built for the host CPU (logged,
    counted) and computes the right numbers."""
    if not opencl_devices.select_device():
        pytest.skip("no OpenCL device")
    from halide_xpu.target import opencl_build

    monkeypatch.setattr(config, "cpu_target", "opencl")
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(opencl_build, "check_in_child", lambda path, timeout_s=300.0: "the OpenCL compiler crashed (test)")
    torch._dynamo.reset()
    stats.reset()
    x = torch.randn(37, 5)
    with caplog.at_level(logging.WARNING, logger="halide_xpu.compiler"):
        out = torch.compile(lambda t: (t.sin() * 3).sum(1) + 0.123)(x)
    torch.testing.assert_close(out, (x.sin() * 3).sum(1) + 0.123)
    assert stats.counters["opencl_host_fallbacks"] >= 1 and "built for the host instead" in caplog.text


def test_call_sites_name_their_node_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call of a kernel is preceded by the node group it computes, also where one definition serves several
    groups (identical code, deduplicated): what per-kernel tables pair with Triton's calls."""
    monkeypatch.setattr(config, "cpu_target", "host")
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    torch._dynamo.reset()

    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.relu(x) + 1
        b = torch.mm(a, y)  # an extern kernel between two identical pointwise kernels
        return a, torch.relu(b) + 1

    code = compile_and_check(f, torch.randn(16, 16), torch.randn(16, 16))
    import re

    calls = re.findall(r"# Topologically Sorted Source Nodes: \[([^\]]*)\].*\n\s*(halide_xpu_kernel_\d+)\(", code)
    assert len(calls) == 2 and calls[0][1] == calls[1][1] and calls[0][0] != calls[1][0], calls

"""SPIR-V and native device binaries on the sycl target: built ahead of launch in child processes, cached, loaded
by the USM runtime."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import torch

import conftest
import halide_xpu
from conftest import compile_and_check, sycl_unavailable
from halide_xpu import cache, compiler, config, device_binary, usm
from halide_xpu.target import spirv, sycl_native

ROOT = Path(__file__).resolve().parents[1]
_why = sycl_unavailable() or spirv.spirv_unavailable()
needs_spirv = pytest.mark.skipif(bool(_why), reason=str(_why))
_why_native = _why or sycl_native.unavailable()
needs_native = pytest.mark.skipif(bool(_why_native), reason=str(_why_native))
# The counter that rises when kernels of a format load, and the one that rises when the device refuses them.
LOADS = {"spirv": ("binary_loads", "binary_rejects"), "native": ("native_loads", "native_rejects")}

# One process: compile a softmax and a sum, check them against eager, print the USM runtime's counters as JSON.
SCRIPT = """
import json, torch, halide_xpu
from halide_xpu import usm
halide_xpu.config.cpu_target = "sycl"
torch._inductor.config.cpu_backend = "halide_xpu"
torch._inductor.config.fx_graph_cache = False
with usm.usm_tensors():
    x = torch.randn(48, 130)
    fn = lambda x: (torch.softmax(x, -1), (x * x).sum(1))
    a, b = torch.compile(fn, fullgraph=True)(x)
    torch.testing.assert_close(a, torch.softmax(x, -1))
    torch.testing.assert_close(b, (x * x).sum(1), rtol=1e-5, atol=1e-4)
print("COUNTERS", json.dumps(usm.counters()))
"""


@pytest.fixture
def spirv_sycl(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The sycl emulation target with tensors in USM and ``device_binary='spirv'``."""
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "sycl")
    monkeypatch.setattr(halide_xpu.config, "device_binary", "spirv")
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setitem(conftest._current, "target", "sycl")
    device_binary.reset_warnings()
    torch._dynamo.reset()
    with usm.usm_tensors():
        yield


def _formats_since(before: set[str]) -> set[str]:
    return {l.device_binary for k, l in compiler._memory.items() if k not in before and l.meta.target == "sycl"}


def _index_add(x: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    return x.index_add(0, idx, src) * 2


def _embedding_backward(grad: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.ops.aten.embedding_dense_backward(grad, idx, 50, -1, False)


OPS = {
    "pointwise": (lambda x: torch.sin(x) * 2 + torch.sigmoid(x), lambda: (torch.randn(33, 70),)),
    "reduction": (lambda x: x.sum(1) + x.amax(1), lambda: (torch.randn(64, 257),)),
    "softmax": (lambda x: torch.log_softmax(x * 1.5, -1), lambda: (torch.randn(40, 300),)),
    "index_add": (_index_add, lambda: (torch.randn(20, 8), torch.randint(0, 20, (37,)), torch.randn(37, 8))),
    "embedding_backward": (_embedding_backward, lambda: (torch.randn(4, 9, 16), torch.randint(0, 50, (4, 9)))),
}


@needs_spirv
@pytest.mark.parametrize("fmt", ["spirv", pytest.param("native", marks=needs_native)])
@pytest.mark.parametrize("op", sorted(OPS))
def test_op_suite_through_device_binaries(spirv_sycl: None, monkeypatch: pytest.MonkeyPatch, op: str, fmt: str) -> None:
    monkeypatch.setattr(halide_xpu.config, "device_binary", fmt)
    fn, make = OPS[op]
    torch.manual_seed(0)
    known, before = set(compiler._memory), usm.counters()
    scale = {"spirv": 1.0, "native": 1.5}[fmt]  # kernels of their own: a kernel loaded once keeps its program
    compile_and_check(lambda *a: fn(*a) * scale, *make(), rtol=1e-5, atol=1e-4)
    after = usm.counters()
    loads, rejects = LOADS[fmt]
    assert _formats_since(known) == {fmt}
    assert after[loads] > before[loads], (before, after)
    assert after[rejects] == before[rejects]
    if fmt == "native":  # no SPIR-V was compiled by the device in this process, no source built
        assert after["binary_loads"] == before["binary_loads"], (before, after)


@needs_native
def test_auto_picks_native_on_the_emulation_device() -> None:
    assert device_binary.choose_format(sycl_native_backend(), "auto") == "native"


def sycl_native_backend() -> str:
    from halide_xpu.target import sycl_devices

    return sycl_devices.emulation_info().backend


@needs_spirv
def test_every_cached_module_passes_spirv_val(spirv_sycl: None, tmp_path: Path) -> None:
    compile_and_check(lambda x: torch.tanh(x) - x.mean(), torch.randn(17, 31), rtol=1e-5, atol=1e-5)
    entries = [e for e in sorted((cache.cache_root() / "device-binaries").glob("*/*.bin"))
               if e.read_bytes().partition(b"\n")[2].partition(b"\n")[2].startswith(device_binary.SPIRV_MAGIC)]
    assert entries
    for i, entry in enumerate(entries):
        data = device_binary.read_entry(entry)
        assert data is not None, entry
        (tmp_path / f"{i}.spv").write_bytes(data)
        spirv.validate(tmp_path / f"{i}.spv")


def _run_script(cache_dir: Path, fmt: str = "spirv") -> subprocess.Popen:
    env = {**os.environ, "HALIDE_XPU_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(ROOT),
           "HALIDE_XPU_DEVICE_BINARY": fmt}
    return subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _counters(proc: subprocess.Popen) -> tuple[dict[str, int], str]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-4000:]
    line = next(l for l in out.splitlines() if l.startswith("COUNTERS "))
    return json.loads(line.split(" ", 1)[1]), err


@needs_spirv
def test_warm_start_invokes_no_compiler_and_corrupt_entry_is_rebuilt(tmp_path: Path) -> None:
    cold, _ = _counters(_run_script(tmp_path))
    assert cold["device_compiles"] >= 1 and cold["binary_loads"] >= 1, cold
    warm, _ = _counters(_run_script(tmp_path))
    assert warm["device_compiles"] == 0, warm
    assert warm["binary_loads"] == cold["binary_loads"] and warm["binary_rejects"] == 0, (cold, warm)
    entries = sorted(tmp_path.rglob("device-binaries/*/*.bin"))
    assert entries
    for entry in entries:  # flip bytes in the middle of every module
        data = bytearray(entry.read_bytes())
        data[len(data) // 2: len(data) // 2 + 8] = b"\xde\xad\xbe\xef" * 2
        entry.write_bytes(bytes(data))
    rebuilt, err = _counters(_run_script(tmp_path))
    assert "corrupt device binary" in err and "rebuilding" in err, err[-3000:]
    assert rebuilt["device_compiles"] == len(entries) and rebuilt["binary_loads"] == cold["binary_loads"], rebuilt
    assert all(device_binary.read_entry(e) is not None for e in entries)


@needs_spirv
@pytest.mark.parametrize("fmt", ["spirv", pytest.param("native", marks=needs_native)])
def test_two_processes_compile_the_same_kernels(tmp_path: Path, fmt: str) -> None:
    procs = [_run_script(tmp_path, fmt), _run_script(tmp_path, fmt)]
    loads, rejects = LOADS[fmt]
    for proc in procs:
        counters, _ = _counters(proc)  # each checked its results against eager
        assert counters[loads] >= 1 and counters[rejects] == 0, counters
    assert not list(tmp_path.rglob("device-binaries/*/.tmp-*")), "temporary files left behind"


def test_bad_device_binary_value_names_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"device_binary='ptx'.*\['auto', 'source', 'spirv', 'native'\]"):
        config.device_binary = "ptx"
    code = "import halide_xpu.config"
    env = {**os.environ, "HALIDE_XPU_DEVICE_BINARY": "bogus", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode and "HALIDE_XPU_DEVICE_BINARY" in proc.stderr and "'native'" in proc.stderr


def test_auto_steps_down_with_reasons(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Also the format chosen for an ``xpu`` (Level Zero) device: native where the interop library builds, else
    SPIR-V where clang is found; no device binaries for a device that is not there (nominal)."""
    device_binary.reset_warnings()
    monkeypatch.setattr(spirv, "find_tool", lambda name: None)
    with caplog.at_level(logging.INFO, logger="halide_xpu.device_binary"):
        assert device_binary.choose_format("opencl", "auto") == "source"
        assert device_binary.choose_format("opencl", "auto") == "source"
    text = caplog.text
    assert "native: built from SPIR-V, which is unavailable (clang-15, llvm-spirv-15, spirv-val not found" in text
    assert "spirv: clang-15, llvm-spirv-15, spirv-val not found" in text
    assert text.count("native: built from SPIR-V") == 1, "each step down is logged once"
    assert "needs ocloc" in device_binary.unavailable("source", "level_zero")
    monkeypatch.undo()
    assert "no device present" in device_binary.unavailable("native", "nominal")
    if spirv.spirv_unavailable() is None:
        expected = "native" if sycl_native.unavailable() is None else "spirv"
        assert device_binary.choose_format("level_zero", "auto") == expected


@needs_spirv
def test_missing_toolchain_is_a_clear_message_and_source_runs(
    spirv_sycl: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = spirv.find_tool
    monkeypatch.setattr(spirv, "find_tool", lambda name: None if name == "clang" else real(name))
    monkeypatch.setattr(halide_xpu.config, "device_binary", "spirv")
    known, before = set(compiler._memory), usm.counters()
    with caplog.at_level(logging.WARNING, logger="halide_xpu.device_binary"):
        compile_and_check(lambda x: x * 3.0625 - 0.5, torch.randn(23, 5))
    assert "device_binary='spirv': spirv: clang-15 not found" in caplog.text and "apt-get install" in caplog.text
    assert _formats_since(known) == {"source"}
    assert usm.counters()["binary_loads"] == before["binary_loads"]


@needs_spirv
def test_device_compiler_crash_falls_back(
    spirv_sycl: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    crash = tmp_path / "clang-crash"
    crash.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crash.chmod(0o755)
    real = spirv.find_tool
    monkeypatch.setattr(spirv, "find_tool", lambda name: spirv.Tool(name, str(crash)) if name == "clang" else real(name))
    known, before = set(compiler._memory), usm.counters()
    with caplog.at_level(logging.WARNING, logger="halide_xpu.device_binary"):
        compile_and_check(lambda x: torch.cos(x) * 0.8125 + 3, torch.randn(29, 6), rtol=1e-5, atol=1e-5)
    assert "crashed (SIGSEGV)" in caplog.text and "using its OpenCL C source" in caplog.text, caplog.text
    assert _formats_since(known) == {"source"}
    after = usm.counters()
    assert after["binary_loads"] == before["binary_loads"] and after["launches"] > before["launches"]


@needs_native
def test_native_warm_start_invokes_no_compiler_and_corrupt_entry_is_rebuilt(tmp_path: Path) -> None:
    cold, _ = _counters(_run_script(tmp_path, "native"))
    assert cold["device_compiles"] >= 2 and cold["native_loads"] >= 1, cold  # SPIR-V, then native, per kernel
    warm, _ = _counters(_run_script(tmp_path, "native"))
    # nothing compiled ahead of launch, no SPIR-V module handed to the device compiler, no source built
    assert warm["device_compiles"] == 0 and warm["binary_loads"] == 0, warm
    assert warm["native_loads"] == cold["native_loads"] == warm["program_builds"] and warm["native_rejects"] == 0
    native = [e for e in tmp_path.rglob("device-binaries/*/*.bin") if device_binary.read_entry(e, "native")
              and not device_binary.read_entry(e, "native").startswith(device_binary.SPIRV_MAGIC)]
    assert native
    for entry in native:
        data = bytearray(entry.read_bytes())
        data[-8:] = b"\xde\xad\xbe\xef" * 2
        entry.write_bytes(bytes(data))
    rebuilt, err = _counters(_run_script(tmp_path, "native"))
    assert "corrupt device binary" in err and "rebuilding" in err, err[-3000:]
    assert rebuilt["device_compiles"] == len(native) and rebuilt["native_loads"] == cold["native_loads"], rebuilt


@needs_native
def test_native_binary_the_device_refuses_loads_spirv(tmp_path: Path) -> None:
    cold, _ = _counters(_run_script(tmp_path, "native"))
    for entry in tmp_path.rglob("device-binaries/*/*.bin"):
        payload = device_binary.read_entry(entry, "native")
        if payload is not None and not payload.startswith(device_binary.SPIRV_MAGIC):  # a valid entry of garbage
            device_binary.write_entry(entry, b"not a device binary " * 8)
    refused, err = _counters(_run_script(tmp_path, "native"))  # results still checked against eager
    assert "refused a native binary" in err, err[-3000:]
    assert refused["native_rejects"] == cold["native_loads"] and refused["binary_loads"] == cold["native_loads"]


@needs_native
def test_native_build_worker_crash_falls_back_to_spirv(
    spirv_sycl: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(halide_xpu.config, "device_binary", "native")
    monkeypatch.setattr(sycl_native, "worker_command", lambda: ["sh", "-c", "echo 'device compiler: boom' >&2; kill -SEGV $$"])
    sycl_native._stop_workers()
    sycl_native._workers.clear()
    known, before = set(compiler._memory), usm.counters()
    with caplog.at_level(logging.WARNING, logger="halide_xpu.device_binary"):
        compile_and_check(lambda x: torch.sinh(x) * 0.6875 - 2, torch.randn(19, 7), rtol=1e-5, atol=1e-5)
    assert "native build" in caplog.text and "killed by SIGSEGV" in caplog.text and "boom" in caplog.text, caplog.text
    assert _formats_since(known) == {"spirv"}
    after = usm.counters()
    assert after["binary_loads"] > before["binary_loads"] and after["native_loads"] == before["native_loads"]
    monkeypatch.undo()
    sycl_native._workers.clear()


def test_grf_mode_build_options(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """GRF modes become Intel GPU build options (per backend); a kernel's `grf` schedule parameter wins over
    config.grf_mode; on other devices no option, logged once."""
    gpu = device_binary.Device("Intel(R) Data Center GPU Max 1550", "1.3", "level_zero", 16, "level_zero:gpu:0", True)
    ocl_gpu = device_binary.Device("Intel(R) Arc(TM) A770", "24.1", "opencl", 16, "opencl:gpu:0", True)
    cpu = device_binary.Device("Intel(R) Xeon(R)", "2024", "opencl", 16, "opencl:cpu:0", False)
    assert device_binary.build_options(gpu, "large") == "-ze-opt-large-register-file"
    assert device_binary.build_options(ocl_gpu, "large") == "-cl-intel-256-GRF-per-thread"
    assert device_binary.build_options(gpu, "default") == ""
    device_binary.reset_warnings()
    with caplog.at_level(logging.INFO, logger="halide_xpu.device_binary"):
        assert device_binary.build_options(cpu, "large") == device_binary.build_options(cpu, "large") == ""
    assert caplog.text.count("applies to Intel GPUs") == 1
    from halide_xpu.meta import KernelMeta, ScheduleSpec

    meta = KernelMeta.__new__(KernelMeta)
    object.__setattr__(meta, "schedule", ScheduleSpec("pointwise", (("grf", 2),)))
    monkeypatch.setattr(halide_xpu.config, "grf_mode", "small")
    assert device_binary.grf_mode(meta) == "large"
    object.__setattr__(meta, "schedule", ScheduleSpec("pointwise", ()))
    assert device_binary.grf_mode(meta) == "small"
    with pytest.raises(ValueError, match="grf_mode"):
        halide_xpu.config.grf_mode = "huge"


def test_ocloc_builds_for_the_device_the_runtime_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in ocloc (none exists here): auto picks native for a Level Zero device when ocloc is found, and the
    command names the device id passed in, the SPIR-V input and the build options."""
    fake = tmp_path / "ocloc"
    fake.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args.txt"\nwhile [ $# -gt 0 ]; do\n'
                    '  [ "$1" = -output ] && printf NATIVE > "$2"\n  shift\ndone\n')
    fake.chmod(0o755)
    tool = spirv.Tool("ocloc", str(fake))
    real = spirv.find_tool
    monkeypatch.setattr(spirv, "find_tool", lambda name: tool if name == "ocloc" else real(name))
    if spirv.spirv_unavailable() is None:
        assert device_binary.unavailable("native", "level_zero") is None
    data = sycl_native.ocloc_build(tool, b"\x03\x02\x23\x07spirv", "0x56a0", "-ze-opt-large-register-file")
    assert data == b"NATIVE"
    args = (tmp_path / "args.txt").read_text().split()
    assert args[0] == "compile" and "-spirv_input" in args
    assert args[args.index("-device") + 1] == "0x56a0" and "-ze-opt-large-register-file" in args
    broken = tmp_path / "broken-ocloc"
    broken.write_text("#!/bin/sh\necho 'unknown device' >&2\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(spirv.DeviceCompileError, match="ocloc failed .exit 3.: unknown device"):
        sycl_native.ocloc_build(spirv.Tool("ocloc", str(broken)), b"x", "0x56a0", "")

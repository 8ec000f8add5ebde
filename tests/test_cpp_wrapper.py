"""Inductor's C++ wrapper calling our kernels (cpp_wrapper=True) on every target; AOTInductor's logged fallback."""
from __future__ import annotations

import re
import os
import subprocess
from pathlib import Path
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

import halide_xpu
from halide_xpu.target import opencl_devices, sycl_devices

from conftest import on_target


@pytest.fixture
def cpu_target(target: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(torch._inductor.config, "cpp_wrapper", True)
    return target


def _model(x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
    h = F.silu(x * w + 1.0)
    return h.sum(-1), h.amax(0), x[idx] * 2.0, torch.softmax(h, -1)


def _run(fn, *args, dynamic: bool = False) -> str:
    halide_xpu.stats.reset()
    args = on_target(args)
    expected = fn(*args)
    actual, codes = run_and_get_code(torch.compile(fn, dynamic=dynamic, fullgraph=True), *args)
    torch.testing.assert_close(actual, expected, equal_nan=True)
    code = "\n".join(codes)
    assert re.search(r"static void halide_xpu_kernel_\d+\(", code), "no halide-xpu kernel in the C++ wrapper:\n" + code
    assert "hx_launch" in code and "cpp_fused" not in code and not halide_xpu.stats.fallbacks, halide_xpu.stats.fallbacks
    return code


def test_cpp_wrapper_runs_our_kernels(cpu_target: str) -> None:
    x, w = torch.randn(6, 33), torch.randn(33)
    code = _run(_model, x, w, torch.tensor([5, 0, 2, 2]))
    assert "extern \"C\"" in code or "inductor_entry" in code  # the C++ wrapper, not Python's


def test_cpp_wrapper_dynamic_batch(cpu_target: str) -> None:
    torch._dynamo.reset()
    for rows in (5, 9):
        _run(_model, torch.randn(rows, 17), torch.randn(17), torch.tensor([rows - 1, 0]), dynamic=True)


def test_cpp_wrapper_kernel_error_raises(monkeypatch: pytest.MonkeyPatch, cpu_target: str) -> None:
    """An index out of range raises through the C++ wrapper with the message of the kernel's error word (its check
    pipeline: host, opencl and sycl)."""
    if cpu_target == "cuda":
        pytest.skip("CUDA kernels assert on the device, which leaves the CUDA context unusable: "
                    "tests/test_ops.py::test_out_of_range_index_asserts_on_cuda checks it in a child process")
    torch._dynamo.reset()
    fn = torch.compile(lambda x, i: x[i] + 1, dynamic=False)
    x = on_target(torch.randn(8))
    torch.testing.assert_close(fn(x, on_target(torch.tensor([1, 2]))), x[[1, 2]] + 1)
    with pytest.raises(RuntimeError, match="index out of bounds: a kernel's indirect"):
        fn(x, on_target(torch.tensor([1, 100])))


class _Exported(torch.nn.Module):
    def forward(self, x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = F.silu(x * 2.0 + 1.0)
        return h.sum(1), x[i] * 2, torch.softmax(h, -1)


def _aoti_package(tmp_path, x: torch.Tensor, i: torch.Tensor) -> str:
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(_Exported(), (x, i), dynamic_shapes={"x": {0: batch}, "i": None})
    return torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "m.pt2"))


def _run_in_fresh_process(tmp_path, path: str, inputs: list) -> tuple[list, bool, str]:
    """Load the package and run it in a new Python process without the OpenCL set-up of this one's environment;
    also reports whether halide_xpu's runtime was imported, and the process's mapped files."""
    torch.save(inputs, tmp_path / "in.pt")
    script = textwrap.dedent(f"""
        import sys, torch
        m = torch._inductor.aoti_load_package({path!r})
        def run(args):
            try:
                return m(*args)
            except RuntimeError as e:  # a failing kernel raises; the process lives on
                return str(e)
        outs = [run(args) for args in torch.load({str(tmp_path / 'in.pt')!r})]
        maps = open("/proc/self/maps").read()
        torch.save((outs, "halide_xpu.runtime" in sys.modules, maps), {str(tmp_path / 'out.pt')!r})
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("OCL_ICD_FILENAMES", "HL_OCL_PLATFORM_NAME", "HL_OCL_DEVICE_TYPE")}
    if any(getattr(t, "is_cuda", False) for args in inputs for t in args):
        env["LD_PRELOAD"] = _system_libstdcxx()
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300, env=env)
    return torch.load(tmp_path / "out.pt")


def _system_libstdcxx() -> str:
    """The compiler's libstdc++: on the GPU machine (torch 2.11) every AOTInductor CUDA package, Triton's too, dies
    in a fresh process in its device-string regex (std::locale) unless this is loaded first."""
    out = subprocess.run(["g++", "-print-file-name=libstdc++.so.6"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


@pytest.mark.parametrize("aot_target", ["host", "opencl", "sycl", "cuda"])
def test_aoti_packages_our_kernels(tmp_path, monkeypatch: pytest.MonkeyPatch, aot_target: str) -> None:
    """AOTInductor with halide-xpu kernels: the .pt2 carries the kernel libraries and the Halide runtime; a fresh
    process runs it (dynamic batch) with no halide-xpu Python on the launch path (opencl: the OpenCL loader set-up
    recorded in the package, the environment of the fresh process left as it is)."""
    import zipfile

    if aot_target == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("no CUDA device")
        monkeypatch.setattr(torch._inductor.config, "cuda_backend", "halide_xpu")
        dev = "cuda"
    else:
        if aot_target == "opencl" and not opencl_devices.select_device():
            pytest.skip("no OpenCL device")
        if aot_target == "sycl" and sycl_devices.available() is not None:
            pytest.skip(sycl_devices.available())
        monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
        monkeypatch.setattr(halide_xpu.config, "cpu_target", aot_target)
        dev = "cpu"
    halide_xpu.stats.reset()
    x, i = torch.randn(8, 16, device=dev), torch.tensor([3, 1, 7], device=dev)
    path = _aoti_package(tmp_path, x, i)
    assert halide_xpu.stats.counters["kernels_generated"] >= 2 and not halide_xpu.stats.fallbacks
    names = zipfile.ZipFile(path).namelist()
    assert any("hx_runtime_" in n for n in names) and sum("hx_kernel_" in n for n in names) >= 2, names
    inputs = [(x, i), (torch.randn(5, 16, device=dev), torch.tensor([4, 0, 2], device=dev))]  # i: a static shape
    bad = [(x, torch.tensor([1, 9, 2], device=dev))] if dev == "cpu" else []  # device targets cannot raise (#11)
    outs, imported_runtime, maps = _run_in_fresh_process(tmp_path, path, inputs + bad)
    for out, args in zip(outs, inputs):
        assert not isinstance(out, str), out  # the kernel's error
        torch.testing.assert_close(out, _Exported()(*args))
    if bad:  # the check pipeline's error word
        assert "halide_xpu kernel" in outs[-1] and "index out of bounds" in outs[-1], outs[-1]
    assert not imported_runtime
    if aot_target == "opencl":  # the kernels ran on the OpenCL device the package recorded
        assert "libintelocl" in maps or "pocl" in maps, "no OpenCL device runtime was loaded"
    if aot_target == "sycl":  # through dpctl's C library on the recorded SYCL device, the tensors staged via USM
        assert "libDPCTLSyclInterface" in maps and ("libintelocl" in maps or "pocl" in maps), "no SYCL device"
    # loaded where halide_xpu's runtime is (this process): the package uses it, no second copy of the runtime
    # (two copies mean two device-allocation pools and module caches, and both copies' exit hooks)
    loaded = torch._inductor.aoti_load_package(path)
    for args in inputs:
        torch.testing.assert_close(loaded(*args), _Exported()(*args))
    assert "hx_runtime_" not in Path("/proc/self/maps").read_text()


def test_aoti_refuses_other_devices_with_a_reason() -> None:
    """Where our kernels cannot be called from the C++ wrapper, Inductor gets a reason (logged, its own kernels)."""
    from halide_xpu import cpp_wrapper

    assert "not on mps" in cpp_wrapper.unsupported("mps", "host", aot_mode=True)
    assert all(cpp_wrapper.unsupported("cpu", t, aot_mode=True) is None for t in ("host", "opencl", "sycl"))


def test_aoti_sycl_kernel_text() -> None:
    """A sycl kernel of an AOTInductor package sets the USM runtime up itself (dpctl's C library, the sub-group size,
    the emulation's queue made from the recorded filter; an xpu kernel takes torch's queue instead)."""
    from halide_xpu import cpp_wrapper
    from halide_xpu.meta import ArgSpec, KernelMeta
    from halide_xpu.runtime import runtime_library

    if sycl_devices.available() is not None:
        pytest.skip(sycl_devices.available())
    args = (ArgSpec("in_ptr0", "in", "float32", ("4",), ("1",)), ArgSpec("out_ptr0", "out", "float32", ("4",), ("1",)))
    for device_type in ("cpu", "xpu"):
        meta = KernelMeta(args=args, target="sycl", halide_target="host-opencl", device_type=device_type)
        text = cpp_wrapper.kernel_definition("k", meta, str(runtime_library()), aot_files=[])
        assert "static void *hx_queue = hx_prepare_sycl(" in text and "libDPCTLSyclInterface.so" in text
        if device_type == "cpu":
            assert "fn(in_ptr0, out_ptr0, hx_queue)" in text and "opencl:cpu" in text, text
        else:
            assert "fn(in_ptr0, out_ptr0, stream)" in text and ", nullptr, " in text, text


def test_gpu_call_copies_cpu_tensor_arguments() -> None:
    """A GPU kernel reading a CPU tensor (GPUTests ``cpu_scalar_with_gpu_tensor_cpp``: ``a + b[0]`` with ``b`` on the
    CPU): the C++ wrapper passed the host pointer to the CUDA kernel (illegal memory access on the H200). Such an
    argument is copied to the kernel's device for the call."""
    from halide_xpu import cpp_wrapper
    from halide_xpu.meta import ArgSpec, KernelMeta

    meta = KernelMeta(args=(ArgSpec("in_ptr0", "in", "float32", ("20",), ("1",)),
                            ArgSpec("in_ptr1", "in", "float32", ("4",), ("1",)),
                            ArgSpec("out_ptr0", "out", "float32", ("20",), ("1",)),
                            ArgSpec("ks0", "scalar", "int64", (), ())),
                      target="cuda", halide_target="host-cuda", device_type="cuda", device_index=1)
    line = cpp_wrapper.call_line("k", ["arg0_1", "arg1_1", "buf0", "s0"], meta, "stream", frozenset({1}))
    assert line == ("{ RAIIAtenTensorHandle hx_device1(hx_device_copy(arg1_1, aoti_torch_device_type_cuda(), 1)); "
                    "k((void*)(arg0_1.data_ptr()), (void*)(hx_device1.data_ptr()), (void*)(buf0.data_ptr()), "
                    "(int64_t)(s0), stream); }"), line
    assert cpp_wrapper.call_line("k", ["arg0_1", "arg1_1", "buf0", "s0"], meta, "stream").startswith("k(")


def test_device_copy_helper_copies(tmp_path) -> None:
    """``hx_device_copy`` (the wrapper header's C++) built against torch's C shim and run on CPU tensors: a fresh
    tensor of the same sizes, strides and values."""
    import ctypes

    from torch.utils import cpp_extension

    from halide_xpu import cpp_wrapper

    src = tmp_path / "copy.cpp"
    src.write_text("#include <stdexcept>\n#include <torch/csrc/inductor/aoti_runtime/utils.h>\n"
                   + cpp_wrapper._DEVICE_COPY
                   + 'extern "C" void *copy(void *t) { return hx_device_copy((AtenTensorHandle)t, '
                     "aoti_torch_device_type_cpu(), 0); }\n")
    lib = tmp_path / "copy.so"
    flags = [f"-I{p}" for p in cpp_extension.include_paths()] + [
        f"-L{p}" for p in cpp_extension.library_paths()] + ["-ltorch_cpu", "-lc10"]
    subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", "-O1", "-o", str(lib), str(src), *flags], check=True,
                   timeout=300)
    fn = ctypes.CDLL(str(lib)).copy
    fn.restype, fn.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    api = ctypes.PyDLL(None)  # our own handles on the C API's capsule functions (pythonapi's are shared)
    get, new = api.PyCapsule_GetPointer, api.PyCapsule_New
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    x = torch.randn(4, 6)[:, 1:5]  # a strided view
    handle = torch._C._aoti.unsafe_alloc_void_ptr_from_tensor(x)  # an AtenTensorHandle in a capsule
    copy = torch._C._aoti.alloc_tensor_by_stealing_from_void_ptr(new(fn(get(handle, None)), None, None))
    assert copy.data_ptr() != x.data_ptr() and copy.stride() == x.stride() and torch.equal(copy, x)

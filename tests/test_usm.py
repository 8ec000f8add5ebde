"""The XPU runtime (USM pointers, SYCL queues) on the sycl emulation target, and codegen for the real xpu device."""
from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch

import halide_xpu
from conftest import KERNEL_CALL, sycl_unavailable
from halide_xpu import usm, xpu_codegen
from halide_xpu.runtime import HalideKernelError
from halide_xpu.target import spirv, sycl_devices

needs_sycl = pytest.mark.skipif(bool(sycl_unavailable()), reason=str(sycl_unavailable()))


@pytest.fixture
def sycl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "sycl")
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    torch._dynamo.reset()


def _compiled(fn, *args, **kw):
    compiled = torch.compile(fn, fullgraph=True, **kw)
    return compiled, compiled(*args)


@needs_sycl
def test_outputs_in_usm_and_no_copies(sycl: None) -> None:
    with usm.usm_tensors():
        x = torch.randn(64, 300)
        before = usm.counters()
        _, (a, b) = _compiled(lambda x: (torch.softmax(x, -1), (x * 2).sum(1)), x)
    after = usm.counters()
    torch.testing.assert_close(a, torch.softmax(x, -1))
    torch.testing.assert_close(b, (x * 2).sum(1), rtol=1e-5, atol=1e-4)  # summation order differs
    assert usm.pointer_kind(a.data_ptr()) == "shared" and usm.pointer_kind(x.data_ptr()) == "shared"
    assert after["launches"] > before["launches"]
    assert after["copies_to_host"] == before["copies_to_host"] and after["copies_to_device"] == before["copies_to_device"]
    assert halide_xpu.stats.generated_kernels, "halide_xpu generated no kernel"


@needs_sycl
def test_multi_kernel_pipeline_reuses_pooled_intermediates(sycl: None) -> None:
    with usm.usm_tensors():
        x = torch.randn(1 << 20)
        compiled, out = _compiled(lambda x: (x * x).sum(), x)
        torch.testing.assert_close(out, (x * x).sum(), rtol=1e-4, atol=1e-2)
        first = usm.counters()
        for _ in range(3):
            out = compiled(x)
        again = usm.counters()
    torch.testing.assert_close(out, (x * x).sum(), rtol=1e-4, atol=1e-2)
    assert again["launches"] - first["launches"] >= 6, "a full reduction is a pipeline of at least two kernels"
    assert again["usm_allocations"] == first["usm_allocations"], "intermediates should come from the queue's pool"
    assert again["copies_to_host"] == first["copies_to_host"]


@needs_sycl
def test_views_offsets_and_zero_size(sycl: None) -> None:
    with usm.usm_tensors():
        base = torch.randn(40, 70)
        views = [base[3:, 5:], base.t(), base[::2, 1::3], base[7]]
        fn = lambda v: torch.relu(v) * 2 + v.sum(-1, keepdim=True)  # noqa: E731
        for v in views:
            assert v.storage_offset() or not v.is_contiguous() or v.dim() == 1
            torch._dynamo.reset()
            _, out = _compiled(fn, v)
            torch.testing.assert_close(out, fn(v), rtol=1e-5, atol=1e-4)
        torch._dynamo.reset()
        compiled, out = _compiled(lambda x: x * 3 + 1, torch.randn(5, 8), dynamic=True)
        empty = torch.randn(0, 8)
        assert compiled(empty).shape == (0, 8)
        torch.testing.assert_close(compiled(torch.randn(2, 8)).shape, torch.Size([2, 8]))


@needs_sycl
def test_deepcopied_module_stays_in_usm(sycl: None) -> None:
    """``copy.deepcopy`` of a module inside the emulation's scope gives USM buffers, as an XPU module's copy has XPU
    buffers (CpuTests' test_buffer_copied_in_graph and test_buffer_batch_norm: torch's storage clone took c10's
    default CPU allocator, and the runtime refused the host memory); outside the scope torch's clone is back."""
    import copy

    with usm.usm_tensors():
        bn = torch.nn.BatchNorm1d(7)
        twin = copy.deepcopy(bn)
        assert usm.pointer_kind(twin.running_mean.data_ptr()) == "shared"
        x = torch.randn(5, 7)
        compiled, got = _compiled(twin, x)
        expected = copy.deepcopy(bn)(x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(twin.running_var, bn.running_var * 0.9 + x.var(0) * 0.1)
    assert usm.pointer_kind(copy.deepcopy(torch.randn(3)).data_ptr()) != "shared"


@needs_sycl
def test_two_queues_alternately(sycl: None) -> None:
    dpctl = sycl_devices.dpctl()
    q1 = usm.default_queue()
    q2 = dpctl.SyclQueue(q1.sycl_context, q1.sycl_device, property="in_order")
    with usm.usm_tensors():
        x = torch.randn(256, 257)
        compiled, _ = _compiled(lambda x: torch.log_softmax(x, -1) + x.mean(), x)
        for i in range(6):
            with usm.queue(q1 if i % 2 else q2):
                before = usm.counters()["launches"]
                out = compiled(x)
                assert usm.counters()["launches"] > before
            torch.testing.assert_close(out, torch.log_softmax(x, -1) + x.mean(), rtol=1e-5, atol=1e-5)


@needs_sycl
def test_pointer_of_another_context_is_a_clear_error(sycl: None) -> None:
    dpctl = sycl_devices.dpctl()
    dev = usm.default_queue().sycl_device
    other = dpctl.SyclQueue(dpctl.SyclContext(dev), dev, property="in_order")
    with usm.usm_tensors():
        compiled, _ = _compiled(lambda x: x + 1, torch.randn(16))
    with usm.usm_tensors(other):
        foreign = torch.randn(16)
    with pytest.raises(HalideKernelError, match="not USM memory of the queue's SYCL context"):
        compiled(foreign)
    with pytest.raises(HalideKernelError, match="in_ptr0.*not USM memory"):
        compiled(torch.randn(16).clone())  # plain malloc'd CPU memory outside any usm_tensors scope


@needs_sycl
def test_out_of_order_queue_is_refused() -> None:
    q = sycl_devices.dpctl().SyclQueue(usm.default_queue().sycl_device)
    with pytest.raises(ValueError, match="in-order"):
        with usm.queue(q):
            pass


def test_no_sycl_device_names_what_to_install() -> None:
    code = (
        "import sys; sys.modules['dpctl'] = None\n"
        "from halide_xpu.target import sycl_devices\n"
        "try:\n    sycl_devices.emulation_device()\nexcept sycl_devices.SyclUnavailable as e:\n    print('ERR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert "ERR" in out and "pip install dpctl intel-opencl-rt" in out, out


@needs_sycl
def test_unknown_sycl_device_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(halide_xpu.config, "sycl_device", "level_zero:gpu")
    with pytest.raises(sycl_devices.SyclUnavailable, match="no SYCL device matches sycl_device='level_zero:gpu'"):
        sycl_devices.emulation_device()


def test_fake_xpu_codegen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real xpu device path, without hardware: our Halide kernels, torch's XPU stream, no Triton, no syncs."""
    monkeypatch.setattr(torch._inductor.config, "xpu_backend", "halide")

    def model(x, w, b):
        h = torch.nn.functional.layer_norm(x @ w, (64,)) + b
        return torch.nn.functional.gelu(h), torch.softmax(h[:, 1:], -1), (x * x).sum()

    inputs = [torch.empty(32, 64), torch.empty(64, 64), torch.empty(64)]
    code = xpu_codegen.generate_xpu_code(model, inputs)
    assert KERNEL_CALL.search(code) and "target='sycl'" in code and "device_type='xpu'" in code
    assert "from torch._C import _xpu_getCurrentRawStream as get_raw_stream" in code
    assert "empty_strided_xpu(" in code
    calls = [line.strip() for line in code.splitlines() if ".halide_xpu_kernel_" in line]
    streams = {m.group(1) for c in calls if (m := re.search(r"c_void_p\((\w+)\)\)$", c))}
    assert len(calls) >= 3 and len(streams) == 1, calls  # every call gets torch's current XPU stream last
    assert re.search(rf"{streams.pop()} = get_raw_stream\(0\)", code), code
    assert "triton" not in code.lower() and "synchronize" not in code
    if sycl_unavailable():
        return  # loading compiles the kernels and needs the USM runtime's dpctl
    module = xpu_codegen.load_xpu_module(code)
    for name in sorted(n for n in vars(module) if n.startswith("halide_xpu_kernel_")):
        launcher = getattr(module, name)
        assert launcher.meta.target == "sycl" and launcher.meta.takes_stream
        assert "opencl" in launcher.meta.halide_target and "user_context" in launcher.meta.halide_target
        symbols = subprocess.run(["nm", "-u", str(launcher.library)], capture_output=True, text=True).stdout
        assert "hx_usm_run" in symbols and "halide_opencl_run" not in symbols
        assert "halide_copy_to_host" not in symbols  # tensors are used in place
        # device binaries for the xpu device: SPIR-V (native needs the device itself present), and every kernel
        # carries an Intel GPU register-file mode (config.grf_mode: default)
        assert launcher.device_binary == ("source" if spirv.spirv_unavailable() else "spirv"), launcher.device_binary
        assert dict(launcher.meta.schedule.params).get("grf") == 0, launcher.meta.schedule


@needs_sycl
@pytest.mark.parametrize("torch_writes_xpu_calls", [True, False])
def test_fake_xpu_cpp_wrapper_codegen(monkeypatch: pytest.MonkeyPatch, torch_writes_xpu_calls: bool) -> None:
    """Inductor's XPU C++ wrapper calls our kernels' C entry points with torch's current SYCL queue (issue 15), also
    where torch (<= 2.11) writes no non-Triton xpu calls and the Python wrapper's call line is written by hand."""
    monkeypatch.setattr(torch._inductor.config, "xpu_backend", "halide")
    from halide_xpu import wrapper_calls

    wrapper_calls._wrapper_calls_xpu_kernels.cache_clear()
    monkeypatch.setattr(wrapper_calls, "_wrapper_calls_xpu_kernels", lambda: torch_writes_xpu_calls)

    def model(x, b):
        return torch.softmax(x + b, -1), (x * x).sum()

    code = xpu_codegen.generate_xpu_code(model, [torch.empty(8, 32), torch.empty(32)], cpp_wrapper=True)
    assert "sycl::queue* stream0;" in code and "aoti_torch_get_current_xpu_stream(0" in code
    calls = re.findall(r"^\s*(halide_xpu_kernel_\d+)\((.*)\);$", code, re.M)
    assert len(calls) >= 2 and all(args.endswith(", stream0") for _, args in calls), calls
    for name, _ in calls:  # defined in the header: the built library's hx_launch, the queue as user_context
        assert re.search(rf"static void {name}\(.*void\* stream\) {{", code), name
    assert "triton" not in code.lower() and "cpp_fused" not in code


@needs_sycl
def test_usm_tensors_process_wide() -> None:
    """``HALIDE_XPU_USM_TENSORS=1``: code that allocates its own CPU tensors (PyTorch's test suites) gets USM memory
    from the first Dynamo import on, and runs on the sycl target without a scope."""
    code = """
import torch, torch._dynamo
x = torch.randn(100)
import halide_xpu
from halide_xpu import usm
torch._inductor.config.cpu_backend = "halide_xpu"
halide_xpu.config.cpu_target = "sycl"
y = torch.compile(lambda x: x.sin() + 1)(x)
assert usm.pointer_kind(x.data_ptr()) == "shared" and usm.pointer_kind(y.data_ptr()) == "shared"
torch.testing.assert_close(y, x.sin() + 1)
assert usm.counters()["launches"] >= 1
print("ok")
"""
    env = dict(__import__("os").environ, HALIDE_XPU_USM_TENSORS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]
    assert "Exception ignored" not in out.stderr, out.stderr[-2000:]  # the scope was left at shutdown: torn-down globals

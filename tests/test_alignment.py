"""Pointers off the vector alignment (views at a storage offset): cuda and sycl kernels get tensors' pointers in
place, and Halide's device code takes each base as vector-aligned. The glue refuses such a call (``MISALIGNED``) and
the build with unrolled lanes runs it (GPUTests graph_partition_misaligned_input: a view at 20 bytes faulted on
CUDA's 16-byte vector accesses)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import halide as hl
import pytest
import torch
from torch._inductor.utils import run_and_get_code

import halide_xpu
from halide_xpu import compiler
from halide_xpu.meta import MISALIGNED
from halide_xpu.target import ptx

from conftest import compile_and_check, on_target

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from replay_kernel import compile_cuda_twin  # noqa: E402  (the CUDA twin: H100 caps, no GPU needed)


def _cos_sin(x: torch.Tensor) -> torch.Tensor:
    return x.cos() * x.sin()


def _views(offset: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An aligned tensor and a view of the same data ``offset`` elements into its storage."""
    base = on_target(torch.randn(4096 + 8))
    return torch.as_strided(base, (4096,), (1,), 0), torch.as_strided(base, (4096,), (1,), offset)


@pytest.mark.parametrize("offset", [5, 3])
def test_misaligned_view_runs_the_scalar_build(target, offset):
    aligned, view = _views(offset)
    compile_and_check(_cos_sin, aligned)
    # compiled anew for the view: a CUDA graph compiled for aligned inputs copies a misaligned one (Inductor's
    # copy_misaligned_inputs), one compiled for a misaligned input passes it as is (GPUTests' case)
    torch._dynamo.reset()
    compile_and_check(_cos_sin, view)
    # this target's launchers: the process-wide cache also holds other targets' (an earlier sycl test in the same
    # pytest-xdist worker left launchers with a pointer alignment, which the host branch below refused)
    launchers = [l for l in compiler._memory.values() if l.meta.target == target]
    if target in ("sycl", "cuda"):  # pointers in place: the view's call went to the unrolled build
        assert view.data_ptr() % max(l.meta.pointer_alignment for l in launchers)
        assert any(l.meta.scalar_lanes for l in launchers), [l.meta for l in launchers]
        assert any(l._scalar is not None for l in launchers)
    else:  # host: Halide checks alignment itself; opencl: Halide copies to fresh device buffers
        assert not any(l.meta.scalar_lanes or l.meta.pointer_alignment for l in launchers)


def test_misaligned_view_through_the_cpp_wrapper(target, monkeypatch):
    """The C++ wrapper has no Python at launch: the unrolled build is made with the kernel, called on MISALIGNED."""
    if target == "cuda":
        pytest.skip("the CUDA C++ wrapper case runs in test_misaligned_view_runs_the_scalar_build's CUDA twin")
    monkeypatch.setattr(torch._inductor.config, "cpp_wrapper", True)
    _, view = _views(5)
    got, codes = run_and_get_code(torch.compile(_cos_sin), view)
    torch.testing.assert_close(got, _cos_sin(view))
    code = "\n".join(codes)
    assert re.search(r"static void halide_xpu_kernel_\d+\(", code), code
    assert (f"err == {MISALIGNED}" in code) == (target == "sycl"), code


def _global_accesses(obj: Path) -> set[str]:
    return set(re.findall(r"\b(?:ld|st)\.global[.\w]*", ptx.extract(obj.read_bytes())))


def test_cuda_scalar_build_has_no_vector_access(monkeypatch, tmp_path):
    """The CUDA twin of a pointwise kernel stores 4 x fp32 per instruction (``st.global.v4.b32``, 16-byte aligned);
    its scalar_lanes build accesses global memory one element at a time, and its glue checks no alignment."""
    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path / "cache"))  # built here, not found on disk
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "opencl")
    monkeypatch.setattr(halide_xpu.config, "device_checks", False)
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    built = []
    build = compiler.build
    monkeypatch.setattr(compiler, "build", lambda meta, source, workdir, caps=None:
                        built.append((meta, source)) or build(meta, source, workdir, caps))
    monkeypatch.setattr(compiler, "_memory", {})
    torch._dynamo.reset()
    torch.compile(_cos_sin)(torch.randn(4096))
    (meta, source), = built
    found = {}
    for scalar in (False, True):
        obj = tmp_path / f"k{int(scalar)}.o"
        twin = compiler.scalar_variant(meta) if scalar else meta
        compile_cuda_twin(twin, source, lambda p, a, t: p.compile_to({hl.OutputFileType.object: str(obj)}, a,
                                                                      "k", t))
        found[scalar] = _global_accesses(obj)
    assert any(".v4." in op or ".v2." in op for op in found[False]), found
    assert not any(".v4." in op or ".v2." in op for op in found[True]), found
    cuda = compile_cuda_twin.__globals__["cuda_twin_meta"](meta)
    assert cuda.pointer_alignment == 16 and f"return {MISALIGNED};" in compiler.glue_source(cuda)
    assert f"return {MISALIGNED};" not in compiler.glue_source(compiler.scalar_variant(cuda))

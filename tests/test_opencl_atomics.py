"""Halide's OpenCL C compare-and-swap loops read the swapped element once (``target/opencl_atomics.py``)."""
from __future__ import annotations

import re
from pathlib import Path

import halide as hl
import pytest
import torch

from conftest import compile_and_check
from halide_xpu import device_binary
from halide_xpu.target import opencl_atomics


def _scatter_object(tmp_path: Path, dtype: hl.Type, features: str = "") -> Path:
    """``f[r.x, clamp(idx[r.y])] += v[r.x, r.y]`` under ``atomic()``, tiled over the fused RVars, for OpenCL."""
    idx, v = hl.ImageParam(hl.Int(32), 1, "idx"), hl.ImageParam(dtype, 2, "v")
    f, x, y = hl.Func("out_ptr0"), hl.Var("x"), hl.Var("y")  # as kernels name outputs
    r = hl.RDom([hl.Range(0, 33), hl.Range(0, 17)])
    f[x, y] = hl.cast(dtype, 0)
    f[r.x, hl.clamp(idx[r.y], 0, 4)] += v[r.x, r.y]
    fused, wg, wi = hl.RVar("fused"), hl.RVar("wg"), hl.RVar("wi")
    f.update(0).atomic(True).fuse(r.x, r.y, fused).gpu_tile(fused, wg, wi, 256, hl.TailStrategy.GuardWithIf)
    f.gpu_single_thread()
    obj = tmp_path / "kernel.o"
    f.compile_to_object(str(obj), [idx, v], "kernel", hl.Target("host-opencl" + features))
    return obj


@pytest.mark.parametrize("dtype,features", [(hl.Float(32), ""), (hl.Float(64), "-cl_doubles-cl_atomics64")])
def test_compare_and_swap_reads_once(tmp_path: Path, dtype: hl.Type, features: str) -> None:
    obj = _scatter_object(tmp_path, dtype, features)
    size = obj.stat().st_size
    before = tmp_path / "before.cl"
    assert device_binary.save_source(obj, before)
    assert opencl_atomics.patch_object(obj) == before.read_text().count("atomic_cmpxchg") >= 1
    assert obj.stat().st_size == size  # patched in place
    after = tmp_path / "after.cl"
    assert device_binary.save_source(obj, after)
    loops = after.read_text().split("do {")[1:]
    for loop in loops:
        body = loop.split("} while(atomic_cmpxchg")[0]
        assert len(re.findall(r"= _out_ptr0\w*\[", body)) == 1, body  # old_val's read only
        assert "= old_val.f;" in body, body
    assert opencl_atomics.patch_object(obj) == 0  # nothing left to rewrite


def test_a_read_too_short_to_rewrite_raises() -> None:
    loop = b"do {\n  old_val.f = _f[_2];\n  float _3 = _f[_2];\n} while(atomic_cmpxchg((volatile float*)&_f[_2], a, b)"
    with pytest.raises(ValueError):
        opencl_atomics.rewrite_cas_loops(loop)


def test_integer_atomics_are_left_alone(tmp_path: Path) -> None:
    obj = _scatter_object(tmp_path, hl.Int(32))
    data = obj.read_bytes()
    assert b"atomic_add(" in data and opencl_atomics.patch_object(obj) == 0 and obj.read_bytes() == data


def test_index_add_into_few_bins_on_opencl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """graph_fuzz seed 7090's scatter: 17 source rows into 5 bins (many collisions per element), float32, whose
    kernel now reads each element once per swap; eager-exact over repeated calls."""
    from conftest import use_opencl_device

    use_opencl_device(monkeypatch, tmp_path)
    g = torch.Generator().manual_seed(7090)
    x = torch.randn(100, 2, 17, 33, generator=g)
    idx = torch.randint(0, 5, (17,), generator=g)
    fn = lambda x, i: torch.zeros(100, 2, 5, 33).index_add(2, i, x)  # noqa: E731
    for _ in range(3):
        compile_and_check(fn, x, idx, atol=1e-4, rtol=1e-5)
    swaps = [o.read_bytes() for o in tmp_path.rglob("kernel.o") if b"atomic_cmpxchg" in o.read_bytes()]
    assert swaps and all(b"= old_val.f;" in o for o in swaps)

"""Inductor's C++ wrapper calling our kernels (cpp_wrapper=True) on every target; AOTInductor's logged fallback."""
from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

import halide_xpu

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
    if cpu_target != "host":
        pytest.skip("device targets cannot raise for a computed index out of range (issue 11)")
    torch._dynamo.reset()
    fn = torch.compile(lambda x, i: x[i] + 1, dynamic=False)
    x = torch.randn(8)
    fn(x, torch.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="index out of bounds: index 100 is not in"):
        fn(x, torch.tensor([1, 100]))


def test_aoti_falls_back_with_a_logged_reason(tmp_path, caplog: pytest.LogCaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """AOTInductor with our backend selected: Inductor's C++ kernels, one logged reason, a package that loads and
    runs in a fresh process (packaging our kernels is issue 15's remaining work)."""
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "host")

    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return (x.sin() + 1).sum(1), x[i] * 2

    x, i = torch.randn(8, 16), torch.tensor([3, 1])
    halide_xpu.stats.reset()
    with caplog.at_level(logging.WARNING, logger="halide_xpu.scheduling"):
        path = torch._inductor.aoti_compile_and_package(torch.export.export(M(), (x, i)),
                                                        package_path=str(tmp_path / "m.pt2"))
    assert "AOTInductor does not package halide-xpu kernels yet" in caplog.text
    torch.save((x, i), tmp_path / "in.pt")
    script = textwrap.dedent(f"""
        import torch
        m = torch._inductor.aoti_load_package({path!r})
        x, i = torch.load({str(tmp_path / 'in.pt')!r})
        torch.save(m(x, i), {str(tmp_path / 'out.pt')!r})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    torch.testing.assert_close(torch.load(tmp_path / "out.pt"), M()(x, i))

"""``python -m halide_xpu demo``: compile a small transformer-style block, show a pipeline, check and time it."""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

from . import compiler, config, stats
from .target import opencl_devices


class Block(torch.nn.Module):
    """MLP block with layer norm, GELU, a softmax gate and a residual."""

    def __init__(self, dim: int = 256, hidden: int = 1024) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, hidden)
        self.down = torch.nn.Linear(hidden, dim)
        self.gate = torch.nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.down(F.gelu(self.up(self.norm(x))))
        return x + h * torch.softmax(h * self.gate, dim=-1)


def bench(fn: Callable[[], Any], reps: int = 30) -> float:
    """Median wall time in ms."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def compile_with(model: torch.nn.Module, backend: str) -> Callable[..., Any]:
    torch._dynamo.reset()
    with torch._inductor.config.patch(cpu_backend=backend):
        return torch.compile(model)


def main() -> int:
    torch.manual_seed(0)
    dev = opencl_devices.select_device()
    target = config.resolved_cpu_target
    print(f"halide-xpu demo: cpu_target={target}" + (f", OpenCL device {dev.describe()}" if dev and target == "opencl" else ""))
    model = Block().eval()
    x = torch.randn(64, 256)
    with torch.no_grad():
        expected = model(x)
        torch._inductor.config.cpu_backend = "halide_xpu"
        torch._dynamo.reset()
        t0 = time.perf_counter()
        ours = torch.compile(model)
        actual = ours(x)
        compile_s = time.perf_counter() - t0
        torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
        print(f"compiled in {compile_s:.2f} s: {stats.counters['kernels_generated']} Halide kernel(s), "
              f"{stats.counters['halide_compiles']} Halide compilation(s), {len(stats.fallbacks)} fallback(s); "
              f"max |error| vs eager = {(actual - expected).abs().max().item():.2e}")
        launcher = max(compiler._memory.values(), key=lambda k: len(k.meta.reductions))
        print("\n=== one generated Halide pipeline (algorithm) ===")
        print((launcher.library.parent / "kernel.py").read_text())
        print(f"=== its explicit schedule: {launcher.meta.schedule.family} {dict(launcher.meta.schedule.params)}, "
              f"variant '{launcher.variant}', target {launcher.meta.halide_target} ===")
        print("\n".join(launcher.schedule))
        t_eager = bench(lambda: model(x))
        t_ours = bench(lambda: ours(x))
        torch._inductor.config.cpu_backend = "cpp"
        default = compile_with(model, "cpp")
        default(x)
        t_cpp = bench(lambda: default(x))
    print("\n=== timings (median, ms) ===")
    print(f"eager                  {t_eager:8.3f}")
    print(f"inductor default (C++) {t_cpp:8.3f}")
    print(f"halide-xpu ({target:6s})    {t_ours:8.3f}   ({t_ours / t_cpp:.2f}x C++, {t_ours / t_eager:.2f}x eager)")
    return 0

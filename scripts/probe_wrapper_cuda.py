"""Where a CUDA step's time goes per wrapper: benchmarks/bench_aoti.py's Block under Triton and halide-xpu, each
through the Python wrapper, the C++ wrapper and AOTInductor, profiled with torch.profiler (host API calls and GPU
kernels per step). Run on the GPU machine:  python3 scripts/probe_wrapper_cuda.py OUT_DIR"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_aoti import Block, _aoti, _compiled  # noqa: E402

STEPS = 20


def profile(fn: Callable[[], Any]) -> dict[str, Any]:
    """Per-step host and device time, and the events that make them (self times, µs per step)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    step_us = (time.perf_counter() - t0) / 50 * 1e6
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(STEPS):
            fn()
        torch.cuda.synchronize()
    events = prof.key_averages()
    host = sorted(events, key=lambda e: -e.self_cpu_time_total)[:18]
    device = sorted((e for e in events if e.self_device_time_total > 0), key=lambda e: -e.self_device_time_total)
    return {
        "step_us": step_us,
        "gpu_us_per_step": sum(e.self_device_time_total for e in device) / STEPS,
        "host": [(e.key[:70], e.count // STEPS, round(e.self_cpu_time_total / STEPS, 1)) for e in host],
        "device": [(e.key[:70], e.count // STEPS, round(e.self_device_time_total / STEPS, 1)) for e in device[:12]],
    }


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/probe_wrapper")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = Block().eval().cuda()
    tokens = torch.randint(0, 512, (8, 64), device="cuda")
    results: dict[str, Any] = {}
    with torch.no_grad(), tempfile.TemporaryDirectory() as tmp:
        expected = model(tokens)
        for backend in ("triton", "halide_xpu"):
            makers = {"python": lambda b=backend: _compiled(model, "cuda", b, False, tokens),
                      "cpp_wrapper": lambda b=backend: _compiled(model, "cuda", b, True, tokens),
                      "aoti": lambda b=backend: _aoti(model, "cuda", b, tokens, Path(tmp))}
            for mode, make in makers.items():
                name = f"{backend}/{mode}"
                try:
                    fn = make()
                    torch.testing.assert_close(fn(tokens), expected, rtol=1e-4, atol=1e-5)
                    results[name] = profile(lambda fn=fn: fn(tokens))
                except Exception as e:  # one variant failing must not lose the others
                    results[name] = {"error": f"{type(e).__name__}: {e}"[:400]}
                print(name, json.dumps(results[name], indent=None)[:3000], flush=True)
    (out / "probe_wrapper_cuda.json").write_text(json.dumps(results, indent=1))
    print("probe done; exiting normally", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

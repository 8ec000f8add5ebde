"""Cold and warm kernel load per device-binary format (source, SPIR-V, native) on the sycl emulation device, and
launch cost.

Each measurement is a fresh process: ``cold`` with an empty cache directory, ``warm`` on the cache the cold run
left. Reported per kernel set: device-code build ahead of launch (``device_binary.attach``: SPIR-V / native build or
cache read), first launch (program build from OpenCL C, SPIR-V load, or native binary load), their sum, and the
steady per-call time; ratios are against the ``source`` format of the same kernels and cache state, same run.
Usage: ``python benchmarks/bench_device_binary.py [--out benchmarks/results/cpu/device_binary]`` (.json + .md).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, statistics, sys, time, torch, halide_xpu
from halide_xpu import compiler, device_binary, runtime, usm
halide_xpu.config.cpu_target = "sycl"
torch._inductor.config.cpu_backend = "halide_xpu"
torch._inductor.config.fx_graph_cache = False
timing = {"attach": 0.0, "first_launch": 0.0}
real_attach = device_binary.attach
def attach(*a):
    t = time.perf_counter(); r = real_attach(*a); timing["attach"] += time.perf_counter() - t; return r
device_binary.attach = attach
real_call, seen = runtime.KernelLauncher.__call__, set()
def call(self, *a):
    if id(self) in seen:
        return real_call(self, *a)
    seen.add(id(self)); t = time.perf_counter(); real_call(self, *a)
    timing["first_launch"] += time.perf_counter() - t
runtime.KernelLauncher.__call__ = call
fns = {
    "softmax_1024": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(1024, 1024),)),
    "layernorm_gelu_512": (lambda x: torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (512,))),
                           lambda: (torch.randn(512, 512),)),
    "embedding_backward": (lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 1000, -1, False),
                           lambda: (torch.randn(64, 32, 128), torch.randint(0, 1000, (64, 32)))),
}
name = sys.argv[1]
fn, make = fns[name]
with usm.usm_tensors():
    args = make()
    compiled = torch.compile(fn, fullgraph=True)
    compiled(*args)
    times = []
    for _ in range(30):
        t = time.perf_counter(); compiled(*args); times.append(time.perf_counter() - t)
formats = sorted({l.device_binary for l in compiler._memory.values()})
print("RESULT", json.dumps({**timing, "steady_us": statistics.median(times) * 1e6, "formats": formats,
                            "counters": usm.counters()}))
"""


def run(name: str, fmt: str, cache: str) -> dict:
    env = {**os.environ, "HALIDE_XPU_CACHE_DIR": cache, "HALIDE_XPU_DEVICE_BINARY": fmt, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", WORKER, name], env=env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line.split(" ", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, help="path stem: writes <stem>.json and <stem>.md")
    args = parser.parse_args()
    rows, lines = [], []
    head = ("| kernels | format | cache | build ahead (ms) | first launch (ms) | load total (ms) | load vs source | "
            "steady call (µs) | call vs source | device compiles |")
    for line in (head, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"):
        lines.append(line)
        print(line)
    for name in ("softmax_1024", "layernorm_gelu_512", "embedding_backward"):
        anchor: dict[str, dict] = {}
        for fmt in ("source", "spirv", "native"):
            with tempfile.TemporaryDirectory() as cache:
                for state in ("cold", "warm"):
                    r = run(name, fmt, cache)
                    load = r["attach"] + r["first_launch"]
                    base = anchor.setdefault(state, {"load": load, "steady_us": r["steady_us"]})
                    rows.append({"kernels": name, "format": fmt, "cache": state, "load_s": load, **r})
                    line = (f"| {name} | {'/'.join(r['formats'])} | {state} | {r['attach'] * 1e3:.0f} | "
                            f"{r['first_launch'] * 1e3:.0f} | {load * 1e3:.0f} | {load / base['load']:.2f}x | "
                            f"{r['steady_us']:.0f} | {r['steady_us'] / base['steady_us']:.2f}x | "
                            f"{r['counters']['device_compiles']} |")
                    lines.append(line)
                    print(line, flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
        args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Per-launch overhead of the USM/SYCL runtime vs Halide's own OpenCL runtime, same device, same tiny kernels."""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

import halide_xpu
from halide_xpu import compiler, usm
from halide_xpu.target import opencl_devices, sycl_devices

sys.path.insert(0, str(Path(__file__).parent))
from bench_cpu import per_call_us  # noqa: E402

# tiny kernels: launch cost dominates; a two-kernel pipeline (full reduction) shows per-pipeline costs
KERNELS: dict[str, tuple[Callable[..., Any], Callable[[], tuple]]] = {
    "add_1k": (lambda x: x + 1, lambda: (torch.randn(1024),)),
    "row_sum_64x64": (lambda x: x.sum(1), lambda: (torch.randn(64, 64),)),
    "full_sum_64k": (lambda x: x.sum(), lambda: (torch.randn(1 << 16),)),
}


def launcher_for(target: str, fn: Callable[..., Any], inputs: tuple) -> Any:
    """Compile ``fn`` for ``target`` through torch.compile and return its (single) Halide kernel launcher."""
    halide_xpu.config.cpu_target = target
    torch._inductor.config.cpu_backend = "halide_xpu"
    torch._dynamo.reset()
    seen = set(compiler._memory)
    torch.compile(fn, fullgraph=True)(*inputs)
    new = [lau for key, lau in compiler._memory.items() if key not in seen and lau.meta.target == target]
    if len(new) != 1:
        raise RuntimeError(f"expected one {target} kernel, got {len(new)}")
    return new[0]


def call_args(launcher: Any, inputs: tuple) -> list[Any]:
    """Inputs and freshly allocated outputs in the launcher's argument order (static shapes only)."""
    it = iter(inputs)
    args = []
    for a in launcher.meta.call_args:
        if a.kind == "in":
            args.append(next(it))
        elif a.kind == "out":
            numel = 1
            for e in a.shape:
                numel *= int(e)
            args.append(torch.empty(numel, dtype=getattr(torch, a.dtype)))
        else:
            raise RuntimeError("benchmark kernels have static shapes")
    return args


def measure(name: str, min_time: float) -> dict[str, Any]:
    fn, make = KERNELS[name]
    row: dict[str, Any] = {"kernel": name}
    with usm.usm_tensors():
        inputs = make()
        sync = launcher_for("sycl", fn, inputs)
        args = call_args(sync, inputs)
        row["usm_sync_us"] = per_call_us(lambda: sync(*args), min_time)
        before = usm.counters()["launches"]
        sync(*args)
        row["kernels_per_call"] = usm.counters()["launches"] - before
        # the xpu path: same kernel, the wrapper passes the queue and nothing waits (enqueue cost per launch)
        xpu_meta = dataclasses.replace(sync.meta, device_type="xpu")
        source = (sync.library.parent / "kernel.py").read_text()
        xpu = compiler.load(xpu_meta, source)
        queue = usm.current_queue_ref()
        reps = 2000
        for _ in range(50):
            xpu(*args, queue)
        usm.current_queue().wait()
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(reps):
                xpu(*args, queue)
            usm.current_queue().wait()
            runs.append((time.perf_counter() - t0) / reps * 1e6)
        row["usm_async_us"] = min(runs)
    plain = make()
    ocl = launcher_for("opencl", fn, plain)
    ocl_args = call_args(ocl, plain)
    row["halide_opencl_us"] = per_call_us(lambda: ocl(*ocl_args), min_time)
    host = launcher_for("host", fn, plain)
    host_args = call_args(host, plain)
    row["host_us"] = per_call_us(lambda: host(*host_args), min_time)
    row["usm_vs_halide_opencl"] = row["usm_sync_us"] / row["halide_opencl_us"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per timing (default 0.5)")
    parser.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated subset")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "cpu"), help="results directory")
    ns = parser.parse_args()
    why = sycl_devices.available()
    if why or opencl_devices.select_device() is None:
        print(f"launch benchmark needs the sycl emulation and an OpenCL device: {why or 'no OpenCL device'}")
        return 1
    rows = []
    for name in ns.kernels.split(","):
        row = measure(name, ns.min_time)
        rows.append(row)
        print(
            f"{name:16s} ({row['kernels_per_call']} kernel(s)) usm sync {row['usm_sync_us']:7.1f} us  usm async {row['usm_async_us']:7.1f} us  "
            f"halide opencl {row['halide_opencl_us']:7.1f} us  host {row['host_us']:6.1f} us  "
            f"(usm/halide-opencl {row['usm_vs_halide_opencl']:.2f}x)"
        )
    device = sycl_devices.emulation_info()
    meta = {
        "date": datetime.date.today().isoformat(),
        "device": device.name,
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "notes": "usm_sync: emulation path (enqueue + queue wait per launch); usm_async: xpu path (enqueue only, "
        "one wait per 2000 launches); halide_opencl: Halide's own OpenCL runtime with host pointers (copies in "
        "and out per call); host: Halide CPU code. Target: usm_sync <= 20 us per launch.",
    }
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "launch_overhead.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [
        f"Per-launch time, µs (best of 5), {device.name}, {meta['date']}",
        "",
        "| kernel | device kernels per call | USM runtime, sync | USM runtime, async (xpu path) | Halide OpenCL runtime | host | USM / Halide OpenCL |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['kernels_per_call']} | {r['usm_sync_us']:.1f} | {r['usm_async_us']:.1f} | {r['halide_opencl_us']:.1f} | "
            f"{r['host_us']:.1f} | {r['usm_vs_halide_opencl']:.2f}× |"
        )
    lines.append(f"\nmedian USM sync launch: {statistics.median(r['usm_sync_us'] for r in rows):.1f} µs (target ≤ 20 µs)")
    (out / "launch_overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GPU kernel suite: halide-xpu (CUDA target) vs Inductor+Triton on the same GPU, with copy-bandwidth fractions."""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

_TMP = tempfile.mkdtemp(prefix="hx-gpu-bench-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_TMP, "inductor"))

import torch  # noqa: E402

try:
    from tqdm import tqdm
except ImportError:  # the GPU machines may lack it; progress then goes line by line
    def tqdm(items: Any, **_: Any) -> Any:  # type: ignore[no-redef]
        items = list(items)
        for i, item in enumerate(items):
            print(f"[{i + 1}/{len(items)}] {item[0]}", file=sys.stderr, flush=True)
            yield item

import halide_xpu  # noqa: E402
from halide_xpu import compiler, stats  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_cpu import geomean, plot, summarize, tolerance, warm_load_ms  # noqa: E402
from kernels import suite  # noqa: E402

BACKENDS = {
    "eager": {},
    "triton": {"cuda_backend": "triton"},
    "hx_cuda": {"cuda_backend": "halide_xpu"},
    "upstream_halide": {"cuda_backend": "halide"},
}


def gpu_us(fn: Callable[[], Any], reps: int = 50) -> float:
    """Median GPU time per call from CUDA events over batches of calls."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times) * 1e3


def copy_bandwidth_gbs(nbytes: int = 1 << 30) -> float:
    src = torch.empty(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    us = gpu_us(lambda: dst.copy_(src), reps=20)
    return 2 * nbytes / (us * 1e-6) / 1e9


def moved_bytes(inputs: tuple, out: Any) -> int:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return sum(t.numel() * t.element_size() for t in (*inputs, *outs) if isinstance(t, torch.Tensor))


def run_case(name: str, fn: Callable[..., Any], inputs: tuple, backend: str) -> dict[str, Any]:
    cfg = BACKENDS[backend]
    torch._dynamo.reset()
    stats.reset()
    compiler._memory.clear()
    halide_xpu.config.cache_dir = os.path.join(_TMP, "hx", backend, name)
    row: dict[str, Any] = {}
    expected = fn(*inputs)
    with torch.no_grad(), torch._inductor.config.patch(fx_graph_cache=False, **cfg):
        try:
            if backend == "eager":
                call = lambda: fn(*inputs)  # noqa: E731
            else:
                compiled = torch.compile(fn, fullgraph=True)
                t0 = time.perf_counter()
                out = compiled(*inputs)
                torch.cuda.synchronize()
                row["compile_cold_s"] = time.perf_counter() - t0
                call = lambda: compiled(*inputs)  # noqa: E731
                first = out[0] if isinstance(out, tuple) else out
                torch.testing.assert_close(out, expected, equal_nan=True, **tolerance(first.dtype))
                row["correct"] = True
                if backend == "hx_cuda":
                    row["kernels"] = stats.counters["kernels_generated"]
                    row["fallbacks"] = len(stats.fallbacks)
                    row["halide_build_s"] = max(stats.compile_seconds, default=0.0)
                    row["warm_load_ms"] = warm_load_ms()
                    row["schedule_variants"] = sorted({k.variant for k in compiler._memory.values()})
            row["us"] = gpu_us(call)
            row["bytes"] = moved_bytes(inputs, expected)
        except AssertionError as e:
            row.update(correct=False, error=str(e).splitlines()[0][:200])
        except Exception as e:
            row.update(failed=True, error=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    return row


def opencl_rows(launchers: list[Any]) -> dict[str, Any]:
    """The case's kernels under the OpenCL target (device-resident buffers) vs the same kernels on CUDA."""
    from opencl_resident import measure

    try:
        kernels = [measure(lau) for lau in launchers]
    except Exception as e:  # recorded, the suite goes on
        return {"failed": True, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
    cuda_us = sum(k["cuda_us"] for k in kernels)
    opencl_us = sum(k["opencl_us"] for k in kernels)
    if opencl_us <= 0:
        return {"failed": True, "error": "OpenCL timing below the copy noise", "kernels": kernels}
    diffs = [k["max_abs_diff_vs_cuda"] for k in kernels if k["max_abs_diff_vs_cuda"] is not None]
    return {"kernels": kernels, "cuda_us": cuda_us, "opencl_us": opencl_us, "opencl_vs_cuda": opencl_us / cuda_us,
            "max_abs_diff_vs_cuda": max(diffs, default=None)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=8192, help="matrix side of every kernel's inputs")
    ap.add_argument("--kernels", default="")
    ap.add_argument("--backends", default="eager,triton,hx_cuda,upstream_halide")
    ap.add_argument("--upstream-kernels", type=int, default=3, help="run upstream halide on the first N kernels only")
    ap.add_argument("--out", default="")
    ap.add_argument("--opencl", action=argparse.BooleanOptionalAction, default=True,
                    help="also run each hx_cuda kernel under Halide's OpenCL target, buffers resident on the OpenCL device")
    ap.add_argument("--models", action=argparse.BooleanOptionalAction, default=True, help="also run the model suite")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    backends = [b for b in args.backends.split(",") if b]
    if "triton" not in backends:
        backends.insert(0, "triton")
    dev_name = torch.cuda.get_device_name()
    out_dir = Path(args.out or Path(__file__).parent / "results" / re.sub(r"[^A-Za-z0-9]+", "_", dev_name).strip("_"))
    copy_gbs = copy_bandwidth_gbs()
    cases = [c for c in suite() if not args.kernels or c[0] in args.kernels.split(",")]
    torch.manual_seed(0)
    rows = []
    for i, (name, family, fn, make) in enumerate(tqdm(cases, desc="kernels", unit="kernel")):
        inputs = tuple(t.cuda() for t in make(args.size))
        row = {"name": name, "family": family, "size": args.size, "results": {}}
        for b in backends:
            if b == "upstream_halide" and i >= args.upstream_kernels:
                continue
            res = run_case(name, fn, inputs, b)
            if "us" in res:
                res["gbs"] = res["bytes"] / (res["us"] * 1e-6) / 1e9
                res["copy_fraction"] = res["gbs"] / copy_gbs
            row["results"][b] = res
            if b == "hx_cuda" and args.opencl and res.get("correct"):
                row["opencl_resident"] = opencl_rows(list(compiler._memory.values()))
        rows.append(row)
        del inputs
        torch.cuda.empty_cache()

    def extra(r: dict[str, Any]) -> list[str]:
        t, h = r["results"].get("triton", {}), r["results"].get("hx_cuda", {})
        return [f"{t.get('copy_fraction', float('nan')):.2f}", f"{h.get('copy_fraction', float('nan')):.2f}"]

    table, summary = summarize(rows, backends, anchor="triton", hx="hx_cuda", extra=extra,
                               extra_head=" triton frac. of copy BW | hx_cuda frac. of copy BW |")
    for b in backends:
        fr = [r["results"][b]["copy_fraction"] for r in rows if "copy_fraction" in r["results"].get(b, {})]
        summary[f"{b}_copy_fraction_geomean"] = geomean(fr)
    table += "".join(f"- **{b}_copy_fraction_geomean**: {summary[f'{b}_copy_fraction_geomean']:.3f}\n" for b in backends)
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": dev_name, "torch": torch.__version__,
            "copy_bandwidth_gbs": copy_gbs, "size": args.size, "anchor": "triton (Inductor default, same run)"}
    (out_dir / "kernels.json").write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
    header = (f"# GPU kernel suite on {dev_name} ({meta['date']}, torch {meta['torch']}, size {args.size})\n\n"
              f"Device copy bandwidth (read+write) measured in this run: {copy_gbs:.0f} GB/s. Ratios are time / "
              "Inductor+Triton in the same run (lower is better); upstream halide ran on the first "
              f"{args.upstream_kernels} kernels only.\n\n")
    ocl = [r["opencl_resident"] for r in rows if "opencl_vs_cuda" in r.get("opencl_resident", {})]
    if ocl:
        summary["opencl_vs_cuda_geomean"] = geomean([o["opencl_vs_cuda"] for o in ocl])
        table += ("\n## OpenCL target on this GPU (Halide's OpenCL runtime, buffers resident on the device)\n\n"
                  "| kernel | CUDA target µs (kernels only) | OpenCL target µs | OpenCL / CUDA | max abs diff vs CUDA |\n"
                  "|---|---:|---:|---:|---:|\n")
        for r in rows:
            o = r.get("opencl_resident", {})
            if "opencl_vs_cuda" in o:
                diff = o["max_abs_diff_vs_cuda"]
                table += (f"| {r['name']} | {o['cuda_us']:.1f} | {o['opencl_us']:.1f} | {o['opencl_vs_cuda']:.2f} | "
                          f"{'-' if diff is None else f'{diff:.2g}'} |\n")
            elif o:
                table += f"| {r['name']} | | fail: {o.get('error')} | | |\n"
        table += f"\n- **opencl_vs_cuda_geomean**: {summary['opencl_vs_cuda_geomean']:.3f}\n"
        (out_dir / "kernels.json").write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
    (out_dir / "kernels.md").write_text(header + table)
    try:
        plot(rows, backends, out_dir / "kernels.png", anchor="triton", anchor_label="Inductor + Triton")
    except ImportError:
        print("matplotlib missing: no PNG (python benchmarks/plot_results.py makes it from kernels.json)", file=sys.stderr)
    print(header + table)
    if args.models:
        import bench_models

        bench_models.run(1, bench_models.GPU_BACKENDS, "triton", True, out_dir, 0.3)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GPU scans (cumsum, cummax, logcumsumexp at few-row shapes: HF Llama's position ids and the like): halide-xpu's
chunked scans at several chunk lengths vs Inductor's Triton scans, device time per call from the profiler."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

_TMP = tempfile.mkdtemp(prefix="hx-scan-bench-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_TMP, "inductor"))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import halide_xpu  # noqa: E402
from halide_xpu import stats  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_cpu import geomean  # noqa: E402
from bench_gpu import gpu_us  # noqa: E402


def cases(device: str) -> dict[str, tuple[Callable[..., Any], tuple]]:
    """Scan kernels at the few-row shapes that take the chunked form (fewer rows than scan.GPU_MIN_ROWS)."""
    g = torch.Generator(device="cpu").manual_seed(0)

    def on(t: torch.Tensor) -> torch.Tensor:
        return t.to(device)

    mask = on(torch.ones(8, 512, dtype=torch.int64))
    return {
        "llama_position_ids_8x512": (lambda m: (m.cumsum(-1) - 1).masked_fill(m == 0, 1), (mask,)),
        "cumsum_f32_8x512": (lambda x: x.cumsum(1), (on(torch.randn(8, 512, generator=g)),)),
        "cumsum_f32_64x2000": (lambda x: x.cumsum(1), (on(torch.randn(64, 2000, generator=g)),)),
        "cumsum_bf16_32x1024": (lambda x: x.cumsum(1),
                                (on(torch.randn(32, 1024, generator=g).to(torch.bfloat16)),)),
        "cummax_f32_16x700": (lambda x: torch.cummax(x, 1), (on(torch.randn(16, 700, generator=g)),)),
        "logcumsumexp_f32_16x1000": (lambda x: x.logcumsumexp(1), (on(torch.randn(16, 1000, generator=g)),)),
    }


def device_us(fn: Callable[[], Any], reps: int) -> tuple[float, list[str]]:
    """Device time of one call (all its kernels, from the profiler over ``reps`` calls) and its kernels' names."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and e.self_device_time_total > 0]
    return sum(e.self_device_time_total for e in events) / reps, sorted(e.key[:60] for e in events)


def reference(fn: Callable[..., Any], inputs: tuple) -> Any:
    """Eager ``fn`` with 16-bit float inputs computed in float64 (eager's bfloat16 scan rounds every step)."""
    wide = tuple(t.double() if t.dtype in (torch.bfloat16, torch.float16) else t for t in inputs)
    return fn(*wide)


def run(name: str, fn: Callable[..., Any], inputs: tuple, backend: str, chunk: int, reps: int) -> dict[str, Any]:
    torch._dynamo.reset()
    stats.reset()
    halide_xpu.config.scan_chunk = chunk
    halide_xpu.config.cache_dir = os.path.join(_TMP, "hx", f"{backend}{chunk}", name)
    torch._inductor.config.cuda_backend = "triton" if backend == "triton" else "halide_xpu"
    row: dict[str, Any] = {}
    try:
        compiled = torch.compile(fn)
        got, want = compiled(*inputs), reference(fn, inputs)
        for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            low = a.dtype in (torch.bfloat16, torch.float16)  # one rounding of a float32 running sum per element
            atol = 1e-2 * float(b.abs().max()) if low else 1e-3
            torch.testing.assert_close(a, b.to(a.dtype), rtol=2e-2 if low else 1e-4, atol=atol)
        row["us"], row["kernels"] = device_us(lambda: compiled(*inputs), reps)
        row["call_us"] = gpu_us(lambda: compiled(*inputs))
        row["ours"] = stats.counters["kernels_generated"] if backend != "triton" else None
    except Exception as e:  # a failing case is reported, the run goes on
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--chunks", default="16,32", help="halide-xpu chunk lengths (config.scan_chunk) to compare")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--out", default=None, help="directory for scan.json / scan.md (default benchmarks/results/<GPU>)")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name().replace(" ", "_")
    out = Path(args.out or Path(__file__).parent / "results" / gpu)
    out.mkdir(parents=True, exist_ok=True)
    chunks = [int(c) for c in args.chunks.split(",")]
    results: dict[str, dict[str, Any]] = {}
    for name, (fn, inputs) in cases("cuda").items():
        results[name] = {"triton": run(name, fn, inputs, "triton", 32, args.reps)}
        for c in chunks:
            results[name][f"ours{c}"] = run(name, fn, inputs, "ours", c, args.reps)
        print(name, {k: v.get("us", v.get("error")) for k, v in results[name].items()}, flush=True)
    cols = ["triton"] + [f"ours{c}" for c in chunks]
    lines = [f"# Chunked scans vs Triton ({torch.cuda.get_device_name()}, commit "
             f"{os.environ.get('HALIDE_XPU_COMMIT', '?')})", "",
             "Device µs per call (profiler, all kernels of the call); ratio = ours / Triton.", "",
             "| case | " + " | ".join(cols) + " | " + " | ".join(f"{c} / triton" for c in cols[1:]) + " |",
             "|---|" + "---:|" * (2 * len(cols) - 1)]
    ratios: dict[str, list[float]] = {c: [] for c in cols[1:]}
    for name, row in results.items():
        base = row["triton"].get("us")
        cells = [f"{row[c]['us']:.2f}" if "us" in row[c] else "error" for c in cols]
        rs = []
        for c in cols[1:]:
            if base and "us" in row[c]:
                ratios[c].append(row[c]["us"] / base)
                rs.append(f"{row[c]['us'] / base:.2f}×")
            else:
                rs.append("")
        lines.append(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(rs) + " |")
    lines += ["", "geomean: " + ", ".join(f"{c} {geomean(v):.2f}×" for c, v in ratios.items() if v)]
    stem = f"scan{args.tag}"
    (out / f"{stem}.json").write_text(json.dumps({"commit": os.environ.get("HALIDE_XPU_COMMIT"),
                                                  "device": torch.cuda.get_device_name(), "cases": results}, indent=1))
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

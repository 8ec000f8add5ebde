"""Model suite: eager vs Inductor (Triton on GPU, C++ on CPU) vs halide-xpu vs upstream halide, same run."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

_TMP = tempfile.mkdtemp(prefix="hx-models-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_TMP, "inductor"))

import torch  # noqa: E402

import halide_xpu  # noqa: E402
from halide_xpu import compiler, stats  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_cpu import geomean, per_call_us, plot  # noqa: E402
from models import suite  # noqa: E402

try:
    from tqdm import tqdm
except ImportError:  # progress line by line without tqdm
    def tqdm(items: Any, **_: Any) -> Any:  # type: ignore[no-redef]
        items = list(items)
        for i, item in enumerate(items):
            print(f"[{i + 1}/{len(items)}] {item[0]}", file=sys.stderr, flush=True)
            yield item

GPU_BACKENDS = {"eager": {}, "triton": {"cuda_backend": "triton"}, "hx_cuda": {"cuda_backend": "halide_xpu"},
                "upstream_halide": {"cuda_backend": "halide"}}
CPU_BACKENDS = {"eager": {}, "cpp": {"cpu_backend": "cpp"}, "hx_host": {"cpu_backend": "halide_xpu"}}


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    return {"atol": 5e-2, "rtol": 5e-2} if dtype == torch.bfloat16 else {"atol": 2e-3, "rtol": 2e-3}


def gpu_time_us(fn: Callable[[], Any], reps: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / reps)
    return best


def run_model(name: str, model: torch.nn.Module, inputs: tuple, backend: str, cfg: dict[str, Any], gpu: bool,
              min_time: float) -> dict[str, Any]:
    torch._dynamo.reset()
    stats.reset()
    compiler._memory.clear()
    halide_xpu.config.cache_dir = os.path.join(_TMP, "hx", backend, name)
    row: dict[str, Any] = {}
    with torch.no_grad():
        expected = model(*inputs)
        with torch._inductor.config.patch(fx_graph_cache=False, **cfg):
            try:
                if backend == "eager":
                    call = lambda: model(*inputs)  # noqa: E731
                    row["correct"] = True
                else:
                    compiled = torch.compile(model, fullgraph=True)
                    t0 = time.perf_counter()
                    out = compiled(*inputs)
                    if gpu:
                        torch.cuda.synchronize()
                    row["compile_cold_s"] = time.perf_counter() - t0
                    torch.testing.assert_close(out, expected, **_tolerance(expected.dtype))
                    row["correct"] = True
                    row["max_abs_err"] = float((out.float() - expected.float()).abs().max())
                    if backend.startswith("hx_"):
                        row["halide_kernels"] = stats.counters["kernels_generated"]
                        row["fallbacks"] = len(stats.fallbacks)
                    call = lambda: compiled(*inputs)  # noqa: E731
                row["us"] = gpu_time_us(call) if gpu else per_call_us(call, min_time)
            except AssertionError as e:
                row.update(correct=False, error=str(e).splitlines()[0][:200])
            except Exception as e:
                row.update(failed=True, error=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    return row


def run(scale: int, backends: dict[str, dict[str, Any]], anchor: str, gpu: bool, out_dir: Path, min_time: float,
        only: str = "", upstream_models: int = 2) -> dict[str, Any]:
    device = "cuda" if gpu else "cpu"
    rows = []
    models = [m for m in suite() if not only or m[0] in only.split(",")]
    for i, (name, build) in enumerate(tqdm(models, desc="models", unit="model")):
        model, inputs = build(scale, torch.float32)
        model, inputs = model.to(device), tuple(t.to(device) for t in inputs)
        row = {"name": name, "dtype": str(inputs[0].dtype).replace("torch.", ""), "input": list(inputs[0].shape), "results": {}}
        for b, cfg in backends.items():
            if b == "upstream_halide" and i >= upstream_models:
                continue
            row["results"][b] = run_model(name, model, inputs, b, cfg, gpu, min_time)
        rows.append(row)
    names = list(backends)
    summary = {}
    for b in names:
        ratios = [r["results"][b]["us"] / r["results"][anchor]["us"] for r in rows
                  if "us" in r["results"].get(b, {}) and "us" in r["results"].get(anchor, {}) and r["results"][b].get("correct", b == "eager")]
        summary[f"{b}_vs_{anchor}_geomean"] = geomean(ratios) if ratios else None
    head = "| model | dtype | input | " + " | ".join(f"{b} µs" for b in names) + " | " + " | ".join(f"{b}/{anchor}" for b in names if b != anchor)
    lines = [head + " | hx kernels (fallbacks) | hx cold compile s |", "|" + "---|" * (3 + 2 * len(names) + 1)]
    hx = next((b for b in names if b.startswith("hx_")), None)
    for r in rows:
        res = r["results"]
        cells = [f"{res[b]['us']:.1f}" if "us" in res.get(b, {}) and res[b].get("correct", b == "eager") else
                 ("fail" if b in res else "-") for b in names]
        ratios = [f"{res[b]['us'] / res[anchor]['us']:.2f}" if "us" in res.get(b, {}) and res[b].get("correct") and "us" in res.get(anchor, {}) else
                  "-" for b in names if b != anchor]
        h = res.get(hx, {})
        lines.append(f"| {r['name']} | {r['dtype']} | {'×'.join(map(str, r['input']))} | " + " | ".join(cells) + " | " +
                     " | ".join(ratios) + f" | {h.get('halide_kernels', '-')} ({h.get('fallbacks', '-')}) | {h.get('compile_cold_s', float('nan')):.2f} |")
    lines.append("")
    lines += [f"- **{k}**: {v:.3f}" if v else f"- **{k}**: n/a" for k, v in summary.items()]
    failures = [f"{r['name']}/{b}: {res.get('error')}" for r in rows for b, res in r["results"].items() if "error" in res]
    lines += ["", "Failures (recorded as such):"] + [f"- {f}" for f in failures] if failures else []
    table = "\n".join(lines) + "\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": torch.cuda.get_device_name() if gpu else "cpu",
            "torch": torch.__version__, "scale": scale, "anchor": anchor}
    (out_dir / "models.json").write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
    (out_dir / "models.md").write_text(f"# Model suite on {meta['device']} ({meta['date']}, torch {meta['torch']})\n\n"
                                       f"Times per forward (no grad); ratios vs {anchor} in the same run.\n\n" + table)
    try:  # "us" is recorded only for results that matched eager
        plot(rows, names, out_dir / "models.png", anchor=anchor, anchor_label=anchor)
    except ImportError:
        print("matplotlib missing: no models.png", file=sys.stderr)
    print(table)
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=int, default=0, help="shrink factor (default: 1 on GPU, 8 on CPU)")
    ap.add_argument("--models", default="", help="comma-separated subset")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    gpu = torch.cuda.is_available()
    if gpu:
        backends, anchor = GPU_BACKENDS, "triton"
        name = re.sub(r"[^A-Za-z0-9]+", "_", torch.cuda.get_device_name()).strip("_")
    else:
        backends, anchor, name = CPU_BACKENDS, "cpp", "cpu"
        halide_xpu.config.cpu_target = "host"
    out = Path(args.out or Path(__file__).parent / "results" / name)
    run(args.scale or (1 if gpu else 8), backends, anchor, gpu, out, args.min_time, args.models)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""AdamW's foreach step over ResNet-18's parameters: halide-xpu's combo kernels at several vectors per work-item
(``config.combo_per_item``) and work-group sizes (``config.combo_wg``) beside Triton's foreach kernels, same run:
GPU-kernel time per step (torch.profiler), median over batches of steps. Each variant compiles the step again (~1-2 min
on the H200 for ours).

    python3 benchmarks/bench_combo.py --per-item 1,2 --wg 128,256 --out benchmarks/results/<GPU>/combo
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch


def markdown(title: str, rows: list[dict[str, Any]]) -> str:
    lines = [f"# {title}", "", "| dtype | per_item | wg | ours µs | Triton µs | ratio |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['dtype']} | {r['per_item']} | {r.get('wg', 256)} | {r['ours_us']} | {r['triton_us']} | {r['ratio']}× |"
              for r in rows]
    return "\n".join(lines) + "\n"


def resnet18_shapes() -> list[tuple[int, ...]]:
    """ResNet-18's parameter shapes (conv weights, batch-norm weights and biases, the classifier)."""
    shapes: list[tuple[int, ...]] = [(64, 3, 7, 7), (64,), (64,)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            first = cin if block == 0 else cout
            shapes += [(cout, first, 3, 3), (cout,), (cout,), (cout, cout, 3, 3), (cout,), (cout,)]
            if block == 0 and (stride != 1 or cin != cout):
                shapes += [(cout, cin, 1, 1), (cout,), (cout,)]
        cin = cout
    return shapes + [(1000, 512), (1000,)]


def time_step(backend: str, per_item: int, dtype: torch.dtype, reps: int, wg: int = 256) -> float:
    """Median GPU-kernel µs of one compiled AdamW foreach step: the device time of every kernel the step launched
    (torch.profiler), per step over ``reps`` profiled steps. Wall time between CUDA events measures the host here
    (62 parameters: ~1.2 ms of Python and launches per step, either backend)."""
    import halide_xpu
    from torch.profiler import ProfilerActivity, profile

    torch._dynamo.reset()
    halide_xpu.config.combo_per_item = per_item
    halide_xpu.config.combo_wg = wg
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, device="cuda", dtype=dtype)) for s in resnet18_shapes()]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=1e-4, foreach=True)
    backend_key = "triton" if backend == "triton" else "halide_xpu"
    with torch._inductor.config.patch(fx_graph_cache=False, cuda_backend=backend_key):
        step = torch.compile(opt.step)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        per_step = []
        for _ in range(max(1, reps // 10)):
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    step()
                torch.cuda.synchronize()
            per_step.append(sum(k.self_device_time_total for k in prof.key_averages()) / 10)
    return statistics.median(per_step)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-item", default="1,2,4", help="comma-separated config.combo_per_item values")
    ap.add_argument("--wg", default="256", help="comma-separated config.combo_wg values (work-items per group)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--out", default="benchmarks/results/combo")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_combo: needs a CUDA device", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    for name in args.dtypes.split(","):
        dtype = getattr(torch, name)
        triton_us = time_step("triton", 1, dtype, args.reps)
        print(f"{name} triton {triton_us:.1f} us", flush=True)
        for per_item, wg in ((int(p), int(w)) for p in args.per_item.split(",") for w in args.wg.split(",")):
            try:
                ours = time_step("ours", per_item, dtype, args.reps, wg)
            except Exception as e:  # a failing variant is recorded, the others still run
                print(f"{name} per_item={per_item} wg={wg} failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            rows.append({"dtype": name, "per_item": per_item, "wg": wg, "ours_us": round(ours, 1),
                         "triton_us": round(triton_us, 1), "ratio": round(ours / triton_us, 3)})
            print(f"{name} per_item={per_item} wg={wg} ours {ours:.1f} us ({ours / triton_us:.3f}x Triton)", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    (out / "bench_combo.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "bench_combo.md").write_text(markdown(f"AdamW foreach step, ResNet-18 parameters ({meta['device']})", rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Sweep schedule tunables on the GPU: each kernel once under Triton, then under halide-xpu per override set."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from bench_gpu import run_case  # sets the Inductor cache dir before torch compiles anything
import halide_xpu
from bench_cpu import geomean
from kernels import bf16_suite, suite

try:
    from tqdm import tqdm
except ImportError:  # the GPU machines may lack it
    def tqdm(items, **_):  # type: ignore[no-redef]
        return items


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--configs", required=True,
                    help="';'-separated override sets, e.g. 'default;stage=0;wg_row=512,fold=16' (default: none)")
    ap.add_argument("--kernels", default="", help="comma-separated names from kernels.py (default: all)")
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--suite", choices=("kernels", "bf16"), default="kernels",
                    help="kernels.py's suite, or its bf16 cases at GPT-2/BERT training shapes")
    ap.add_argument("--out", required=True, help="folder for sweep.json and sweep.md")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    configs = [c.strip() for c in args.configs.split(";") if c.strip()]
    for c in configs:  # a typo fails here, not after the Triton runs
        halide_xpu.config.schedule_overrides = "" if c == "default" else c
    cases = [c for c in (bf16_suite() if args.suite == "bf16" else suite())
             if not args.kernels or c[0] in args.kernels.split(",")]
    torch.manual_seed(0)
    rows = []
    for name, _family, fn, make in tqdm(cases, desc="kernels", unit="kernel"):
        inputs = tuple(t.cuda() for t in make(args.size))
        row = {"name": name, "triton": run_case(name, fn, inputs, "triton"), "configs": {}}
        for c in configs:
            halide_xpu.config.schedule_overrides = "" if c == "default" else c
            res = run_case(name, fn, inputs, "hx_cuda")
            if "us" in res and "us" in row["triton"]:
                res["vs_triton"] = res["us"] / row["triton"]["us"]
            row["configs"][c] = res
            print(f"{name:22s} {c:28s} {res.get('vs_triton', float('nan')):.3f} {res.get('error', '')}", flush=True)
        halide_xpu.config.schedule_overrides = {}
        rows.append(row)
        del inputs
        torch.cuda.empty_cache()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "size": args.size}
    (out / "sweep.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [f"# Schedule sweep on {meta['device']} ({meta['date']}, torch {meta['torch']}, size {args.size})", "",
             "halide-xpu time / Inductor+Triton time in the same run, per override set (lower is better).", "",
             "| kernel | triton µs | " + " | ".join(configs) + " |", "|---|---:|" + "---:|" * len(configs)]
    for r in rows:
        cells = [f"{r['configs'][c]['vs_triton']:.2f}" if "vs_triton" in r["configs"][c] else "fail" for c in configs]
        lines.append(f"| {r['name']} | {r['triton'].get('us', float('nan')):.1f} | " + " | ".join(cells) + " |")
    gm = [geomean([r["configs"][c]["vs_triton"] for r in rows if "vs_triton" in r["configs"][c]]) for c in configs]
    lines.append("| **geomean** | | " + " | ".join(f"**{g:.3f}**" for g in gm) + " |")
    (out / "sweep.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

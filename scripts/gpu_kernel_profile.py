"""Per-kernel GPU times of one compiled graph (torch.profiler/CUPTI): where a Halide pipeline spends its time."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from kernels import suite  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("kernels", help="comma-separated kernel names from benchmarks/kernels.py")
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--backend", default="halide_xpu")
    args = ap.parse_args()
    torch._inductor.config.cuda_backend = args.backend
    cases = {c[0]: c for c in suite()}
    for name in args.kernels.split(","):
        _, _, fn, make = cases[name]
        inputs = tuple(t.cuda() for t in make(args.size))
        torch._dynamo.reset()
        compiled = torch.compile(fn)
        for _ in range(3):
            compiled(*inputs)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                compiled(*inputs)
            torch.cuda.synchronize()
        print(f"== {name} ({args.backend})")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))
    return 0


if __name__ == "__main__":
    sys.exit(main())

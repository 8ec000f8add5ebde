"""Tuned vs default schedules on shapes not used for tuning: each suite case at other sizes, database off vs on."""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_cpu import per_call_us, tolerance  # noqa: E402  (sets a fresh Inductor cache dir)

import torch  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

import halide_xpu  # noqa: E402
from halide_xpu import compiler  # noqa: E402
from halide_xpu.autotune import database  # noqa: E402
from kernels import suite  # noqa: E402


def measure(fn, inputs: tuple, mode: str, min_time: float) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """(µs per call, schedule records applied) of ``fn`` compiled with ``config.autotune = mode``."""
    torch._dynamo.reset()
    compiler._memory.clear()
    halide_xpu.config.autotune = mode
    with torch.no_grad(), torch._inductor.config.patch(cpu_backend="halide_xpu", fx_graph_cache=False):
        compiled = torch.compile(fn, fullgraph=True)
        out, codes = run_and_get_code(compiled, *inputs)
        expected = fn(*inputs)
        first = out[0] if isinstance(out, tuple) else out
        torch.testing.assert_close(out, expected, equal_nan=True, **tolerance(first.dtype))
        return per_call_us(lambda: compiled(*inputs), min_time), "\n".join(codes).count("# schedule record:")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="800,1200", help="matrix sides (the committed records were tuned at 1024)")
    ap.add_argument("--kernels", default="", help="comma-separated subset of kernel names")
    ap.add_argument("--target", default="opencl", choices=["host", "opencl"])
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--repeat", type=int, default=1, help="rounds of off,db,db,off measurements (best of each)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    halide_xpu.config.cpu_target = args.target
    key = database.device_key(args.target)
    rows = []
    torch.manual_seed(0)
    for size in [int(s) for s in args.sizes.split(",")]:
        for name, _family, fn, make in suite():
            if args.kernels and name not in args.kernels.split(","):
                continue
            inputs = make(size)
            times: dict[str, list[float]] = {"off": [], "db": []}
            applied = 0
            for mode in ["off", "db", "db", "off"] * args.repeat:  # ABBA: load drift hits both alike
                us, n = measure(fn, inputs, mode, args.min_time)
                times[mode].append(us)
                applied = max(applied, n if mode == "db" else 0)
            off, on = min(times["off"]), min(times["db"])
            rows.append({"kernel": name, "size": size, "default_us": off, "tuned_us": on, "records": applied,
                         "speedup": off / on})
            print(f"{name:22s} {size:5d} default {off:9.1f} us  tuned {on:9.1f} us  {off / on:5.2f}x  ({applied} records)")
    applied_rows = [r for r in rows if r["records"]]
    geo = math.exp(sum(math.log(r["speedup"]) for r in applied_rows) / len(applied_rows)) if applied_rows else float("nan")
    lines = [f"# Tuned vs default on held-out sizes ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"Device: {key}. Records tuned at size 1024 (`schedules/`); these sizes were not tuned. Each time is "
             f"the best of {2 * args.repeat} compiles+timings, database off and on measured off, on, on, off.", "",
             "| kernel | size | default µs | tuned µs | speedup | records applied |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['kernel']} | {r['size']} | {r['default_us']:.1f} | {r['tuned_us']:.1f} | {r['speedup']:.2f}x | {r['records']} |"
              for r in rows]
    others = [r["speedup"] for r in rows if not r["records"]]
    noise = f"{min(others):.2f}-{max(others):.2f}x" if others else "n/a"
    lines += ["", f"geomean speedup where a record applied: {geo:.3f}x ({len(applied_rows)} of {len(rows)}); "
              f"where none applied (same kernels both times: the noise): {noise}", ""]
    out = args.out or Path(__file__).parent / "results" / re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{key.target}_{key.name}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune_heldout.md").write_text("\n".join(lines))
    (out / "tune_heldout.json").write_text(json.dumps({"device": str(key), "geomean": geo, "rows": rows}, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

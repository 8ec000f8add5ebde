"""Sweep schedule tunables over harvested kernels (a saved kernel list): each kernel per override set, timed by the
autotuner's measuring worker and checked against its default schedule's outputs."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from halide_xpu.autotune.measure import Worker
from halide_xpu.autotune.tune import load_kernels

try:
    from tqdm import tqdm
except ImportError:  # the GPU machines may lack it
    def tqdm(items, **_):  # type: ignore[no-redef]
        return items


def parse_configs(text: str) -> list[dict[str, int]]:
    """'default;col_split=8,col_unroll=16' -> [{}, {'col_split': 8, 'col_unroll': 16}]."""
    out = []
    for part in text.split(";"):
        part = part.strip()
        if part in ("", "default"):
            out.append({})
            continue
        try:
            out.append({k.strip(): int(v) for k, v in (kv.split("=") for kv in part.split(","))})
        except ValueError as e:
            raise SystemExit(f"bad override set {part!r} (want name=int,name=int): {e}")
    return out


def _device() -> str:
    try:
        import torch

        return torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    except Exception:  # noqa: BLE001 - a title only
        return "unknown device"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("lists", nargs="+", type=Path, help="saved kernel lists (JSON lines, .xz allowed)")
    ap.add_argument("--keys", default="", help="comma-separated kernel keys (parts of the entries' names)")
    ap.add_argument("--configs", required=True, help="';'-separated override sets, e.g. 'default;col_split=8'")
    ap.add_argument("--reps", type=int, default=7, help="timed batches per candidate (median)")
    ap.add_argument("--out", type=Path, required=True, help="folder for sweep.json and sweep.md")
    args = ap.parse_args()
    keys = [k for k in args.keys.split(",") if k]
    kernels = [k for p in args.lists for k in load_kernels(p) if not keys or any(key in k.name for key in keys)]
    if not kernels:
        raise SystemExit(f"no kernel of {[str(p) for p in args.lists]} matches {keys}")
    configs = parse_configs(args.configs)
    rows: list[dict[str, Any]] = []
    with Worker(timeout_s=180) as worker:
        for kernel in tqdm(kernels, desc="kernels"):
            defaults = dict(kernel.meta.schedule.params)
            row: dict[str, Any] = {"name": kernel.name, "us": {}, "errors": {}}
            for cfg in configs:
                label = ",".join(f"{k}={v}" for k, v in cfg.items()) or "default"
                t0 = time.monotonic()
                r = worker.measure(kernel.meta, kernel.source, {**defaults, **cfg}, defaults, args.reps)
                row["us"][label] = r.us if r.ok else None
                if not r.ok:
                    row["errors"][label] = r.error[:300]
                print(f"{kernel.name} [{label}] {r.us if r.ok else r.error[:120]} ({time.monotonic() - t0:.1f}s)",
                      file=sys.stderr, flush=True)
            rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sweep.json").write_text(json.dumps({"configs": args.configs, "rows": rows}, indent=1))
    labels = list(rows[0]["us"])
    md = [f"# Harvested kernels per override set ({_device()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"commit {os.environ.get('HALIDE_XPU_COMMIT', 'unknown')})", "",
          "Median wall-clock µs per launch (the autotuner's worker, outputs checked against the default schedule's); "
          "ratio to `default` (the kernel's recorded parameters).", "",
          "| kernel | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for row in rows:
        base = row["us"].get("default")
        cells = []
        for lb in labels:
            us = row["us"][lb]
            cells.append("failed" if us is None else f"{us:.2f}" + (f" ({us / base:.2f}×)" if base else ""))
        md.append(f"| {row['name']} | " + " | ".join(cells) + " |")
    (args.out / "sweep.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The CPU benchmark runs end to end on a tiny size and writes its JSON, table and plot."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_cpu.py"


def test_bench_cpu_smoke(tmp_path: Path) -> None:
    cmd = [sys.executable, str(BENCH), "--size", "32", "--kernels", "add_relu,softmax,col_sum",
           "--backends", "cpp,hx_host,hx_opencl", "--min-time", "0.01", "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads((tmp_path / "kernels.json").read_text())
    assert len(data["rows"]) == 3
    assert data["summary"]["hx_host_mismatches"] == 0 and data["summary"]["hx_host_failures"] == 0
    assert all(r["results"]["hx_host"]["kernels"] >= 1 for r in data["rows"])
    assert (tmp_path / "kernels.md").read_text().count("|") > 10
    assert (tmp_path / "kernels.png").stat().st_size > 1000

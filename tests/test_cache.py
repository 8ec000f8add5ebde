"""Disk cache: a warm process does not run Halide; a corrupt entry is rebuilt with a warning."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import json, torch, halide_xpu
torch._inductor.config.cpu_backend = "halide_xpu"
torch._inductor.config.fx_graph_cache = False
halide_xpu.config.cpu_target = {target!r}
f = lambda x: torch.softmax(x, -1) * 2 + x.sum(0)
x = torch.randn(31, 64)
torch.testing.assert_close(torch.compile(f)(x), f(x))
print(json.dumps(dict(halide_xpu.stats.counters)))
"""


def _run(target: str, cache: Path) -> tuple[dict, str]:
    env = {**os.environ, "HALIDE_XPU_CACHE_DIR": str(cache)}
    res = subprocess.run([sys.executable, "-c", SCRIPT.format(target=target)], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), res.stderr


@pytest.mark.parametrize("target_name", ["host", "opencl"])
def test_cache_reuse_and_corruption(target_name: str, tmp_path: Path) -> None:
    from conftest import opencl_available

    if target_name == "opencl" and not opencl_available():
        pytest.skip("no OpenCL device")
    cold, _ = _run(target_name, tmp_path)
    assert cold.get("halide_compiles", 0) >= 1 and cold.get("kernels_generated", 0) >= 1
    warm, _ = _run(target_name, tmp_path)
    assert warm.get("halide_compiles", 0) == 0, warm
    assert warm.get("disk_cache_hits", 0) == cold["halide_compiles"]

    libs = sorted(tmp_path.rglob("kernel.so"))
    assert libs
    libs[0].write_bytes(libs[0].read_bytes()[:100])  # truncate one library
    healed, stderr = _run(target_name, tmp_path)
    assert "corrupt cache entry" in stderr
    assert healed.get("halide_compiles", 0) == 1
    record = json.loads((libs[0].parent / "done.json").read_text())
    assert record["variant"] and record["schedule"] is not None

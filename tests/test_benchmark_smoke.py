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


def test_bench_models_smoke(tmp_path: Path) -> None:
    bench = BENCH.parent / "bench_models.py"
    cmd = [sys.executable, str(bench), "--scale", "16", "--models", "mlp_block,resnet_basic_block", "--min-time", "0.01",
           "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads((tmp_path / "models.json").read_text())
    for row in data["rows"]:
        hx = row["results"]["hx_host"]
        assert hx["correct"] and hx["halide_kernels"] >= 1 and hx["fallbacks"] == 0, hx
    assert (tmp_path / "models.md").exists() and (tmp_path / "models.png").stat().st_size > 1000


def test_bench_launch_smoke(tmp_path: Path) -> None:
    from conftest import sycl_unavailable

    if sycl_unavailable():
        import pytest

        pytest.skip(str(sycl_unavailable()))
    bench = BENCH.parent / "bench_launch.py"
    cmd = [sys.executable, str(bench), "--kernels", "add_1k", "--min-time", "0.02", "--out", str(tmp_path)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    row = json.loads((tmp_path / "launch_overhead.json").read_text())["rows"][0]
    assert row["kernels_per_call"] == 1 and 0 < row["usm_async_us"] < row["halide_opencl_us"]


def test_kernel_table_keeps_kernels_without_node_group() -> None:
    """Triton's combo/foreach kernels (the optimizer step) name no node group: they count as unpaired, never dropped;
    extern kernels (cuBLAS) belong to neither side."""
    sys.path.insert(0, str(BENCH.parent))
    import kernel_table

    table = kernel_table.compare(([], {"triton_for_fused_0": [10.0, 1, ""], "sm90_gemm": [5.0, 1, ""]}),
                                 ([], {"hx:abc": [7.0, 3, "pointwise"]}))
    assert table["summary"]["unmatched_triton_us"] == 10.0 and table["summary"]["unmatched_ours_us"] == 7.0
    assert {u["kernel"] for u in table["unpaired"]} == {"triton_for_fused_0", "hx:abc"}


def test_kernel_table_ratio_per_launch() -> None:
    """A node group launched more often on one side shows its ratio per launch beside the counts."""
    sys.path.insert(0, str(BENCH.parent))
    import kernel_table

    row = {"launches": 2, "base_launches": 1, "ours_us": 80.0, "triton_us": 38.0}
    assert kernel_table.launches_cell(row) == "2 / 1 (1.05× per launch)"
    assert kernel_table.launches_cell({**row, "launches": 1}) == "1 / 1"
    assert kernel_table.launches_cell({**row, "base_launches": None}) == "2 / ?"


def test_kernel_table_splits_a_kernel_two_graphs_define() -> None:
    """One kernel of ours defined in two graphs (GPT-2's weight copy, forward and backward) under two node groups is
    paired with Triton's kernel of each group, its time and launches split between them: not both launches
    charged to the first group (2.2x there) with Triton's second kernel left unpaired."""
    sys.path.insert(0, str(BENCH.parent))
    import kernel_table

    def graph(name: str, nodes: str) -> str:
        return f"\n\n# Topologically Sorted Source Nodes: [{nodes}]\n{name} = async_compile.triton('x')\n"

    triton = ([graph("triton_fwd", "logits"), graph("triton_bwd", "permute_9")],
              {"triton_fwd": [36.0, 1, ""], "triton_bwd": [35.0, 1, ""]})
    ours = ([graph("shared", "logits"), graph("shared", "permute_9")], {"shared": [80.0, 2, "pointwise"]})
    table = kernel_table.compare(triton, ours)
    rows = {tuple(r["nodes"]): r for r in table["rows"]}
    assert set(rows) == {("logits",), ("permute_9",)} and not table["unpaired"]
    assert rows[("logits",)]["ours_us"] == 40.0 and rows[("logits",)]["launches"] == 1
    assert rows[("permute_9",)]["triton_us"] == 35.0 and rows[("permute_9",)]["base_launches"] == 1


def test_kernel_table_pairs_each_call_site() -> None:
    """One definition of ours called for three node groups (GPT-2's identical residual LayerNorms, deduplicated) is
    paired call by call with Triton, whose third kernel's source differs (another definition): each group one
    launch a side, not ours' three launches against Triton's two (1.66x) and a Triton kernel left unpaired."""
    sys.path.insert(0, str(BENCH.parent))
    import kernel_table

    def call(name: str, nodes: str, run: str = "") -> str:
        return f"        # Topologically Sorted Source Nodes: [{nodes}], Original ATen: [aten.add]\n        {name}{run}(buf0)\n"

    head = "\n\n# Topologically Sorted Source Nodes: [{}]\n{} = async_compile.triton('x')\n"
    triton_code = (head.format("x_3", "triton_ln_7") + head.format("x_11", "triton_ln_8") + "def call(args):\n"
                   + call("triton_ln_7", "x_3", ".run") + call("triton_ln_7", "x_7", ".run")
                   + call("triton_ln_8", "x_11", ".run"))
    ours_code = head.format("x_3", "ours_ln") + "def call(args):\n" + "".join(
        call("ours_ln", n) for n in ("x_3", "x_7", "x_11"))
    groups = kernel_table.kernel_groups([ours_code])
    assert groups["ours_ln"]["groups"] == [("x_3",), ("x_7",), ("x_11",)]
    table = kernel_table.compare(([triton_code], {"triton_ln_7": [14.0, 2, ""], "triton_ln_8": [7.3, 1, ""]}),
                                 ([ours_code], {"ours_ln": [23.4, 3, "fused_warps"]}))
    rows = {r["nodes"][0]: r for r in table["rows"]}
    assert set(rows) == {"x_3", "x_7", "x_11"} and not table["unpaired"]
    assert all(r["launches"] == 1 and r["base_launches"] == 1 for r in rows.values())
    assert rows["x_11"]["triton_us"] == 7.3 and rows["x_3"]["triton_us"] == 7.0 and rows["x_7"]["ours_us"] == 7.8

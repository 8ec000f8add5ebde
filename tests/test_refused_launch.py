"""A launch CUDA refuses is caught before it runs: Llama's bf16 rotary backward (harvested from the H200 run where it
failed with CUDA_ERROR_INVALID_VALUE) now builds within CUDA's limits, and ``cuda_launch`` names such launches."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from harvested import lower_to
from halide_xpu.autotune.measure import parse_meta
from halide_xpu.target import cuda_launch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from replay_kernel import compile_cuda_twin  # noqa: E402

RECORD = Path(__file__).parents[1] / "benchmarks" / "results" / "NVIDIA_H200" / "refused_launch_llama_bf16_train.jsonl"


def _record() -> dict:
    return json.loads(RECORD.read_text().splitlines()[0])


def test_rotary_backward_launch_within_limits(tmp_path: Path) -> None:
    """Its cos/sin table was read at a masked select index and at a plain one; staged for the plain one, the tile
    spanned from element 0 to the tile: 512 x 8 work-items. No input read at a masked index is staged now."""
    rec = _record()
    stmt = tmp_path / "k.stmt"
    _, lines, _ = compile_cuda_twin(parse_meta(rec["meta"]), rec["source"], lower_to(stmt))
    text = stmt.read_text(errors="replace")
    assert text.count("halide_cuda_run(") == 1
    assert cuda_launch.refused_launches(text) == [], cuda_launch.refused_launches(text)
    assert not any(".in_()" in line for line in lines), lines


def test_refused_launches() -> None:
    ok = 'halide_cuda_run(cuda[0], "k", 512, 1, 1, 256, 1, 1, 0 + (2080*4), (void *)x'
    assert cuda_launch.refused_launches(ok) == []
    for bad in ('halide_cuda_run(cuda[0], "k", 512, 1, 1, 512, 8, 1, 0, (void *)x',  # 4096 work-items
                'halide_cuda_run(cuda[0], "k", 1, 70000, 1, 32, 1, 1, 0, (void *)x',  # grid y
                'halide_cuda_run(cuda[0], "k", 1, 1, 1, 1, 1, 128, 0, (void *)x',  # work-group z
                'halide_cuda_run(cuda[0], "k", 1, 1, 1, 32, 1, 1, 0 + (13000*4), (void *)x'):  # 52 KB
        assert len(cuda_launch.refused_launches(bad)) == 1, bad

"""The GPU column form for few results (gpu_columns._few_results: 32 work-items per column, 8-column work-groups)
against eager on the OpenCL device, forced for any device size, over the shapes and dtypes it must survive."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import conftest
import halide_xpu
from conftest import compile_and_check
from halide_xpu.schedule import gpu_columns


@pytest.fixture
def few(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """opencl (the GPU schedules on the OpenCL CPU device) with every column reduction of <= 1024 rows "few"."""
    conftest.use_opencl_device(monkeypatch, tmp_path)
    monkeypatch.setattr(gpu_columns, "FEW_PER_UNIT", 1 << 20)
    return tmp_path


def _split(cache: Path) -> bool:
    """Whether a kernel built into ``cache`` shares its columns among several work-items (the split column form;
    how many depends on the device's compute units: 32 on the H100 twin in test_resnet_kernels)."""
    return any(re.search(r"_sums_cri, (\d+), hl.TailStrategy.GuardWithIf\)", p.read_text())
               for p in cache.rglob("schedule.txt"))


@pytest.mark.parametrize("rows,cols", [(33, 3), (100, 7), (784, 64), (1000, 8), (196, 130)])
def test_few_results_column_sums(few: Path, rows: int, cols: int) -> None:
    """Sums, means, max and a variance over the rows of (rows, cols): shares of rows that 32 work-items split
    unevenly (33, 100, 1000 rows), a column count below one 8-column group and one that does not divide it."""
    g = torch.Generator().manual_seed(rows * cols)
    x = torch.randn(rows, cols, generator=g)
    compile_and_check(lambda x: (x.sum(0), x.amax(0), (x * x).mean(0)), x, rtol=1e-4, atol=1e-4)
    compile_and_check(lambda x: torch.var_mean(x, 0), x, rtol=1e-4, atol=1e-4)
    assert _split(few), "the split column form did not run"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool])
def test_few_results_column_dtypes(few: Path, dtype: torch.dtype) -> None:
    """Low-precision inputs accumulate in fp32 and round once; integer sums stay exact (int64 wraps as eager's);
    a bool column's any/sum."""
    g = torch.Generator().manual_seed(7)
    if dtype == torch.bool:
        x = torch.rand(300, 24, generator=g) > 0.9
        compile_and_check(lambda x: (x.sum(0), x.any(0)), x)
    elif dtype.is_floating_point:
        x = (torch.randn(300, 24, generator=g) * 4).to(dtype)
        compile_and_check(lambda x: x.sum(0), x, rtol=2e-2, atol=2e-2)
    else:
        hi = 2**62 if dtype == torch.int64 else 2**20
        x = torch.randint(-hi, hi, (300, 24), generator=g, dtype=dtype)
        compile_and_check(lambda x: x.sum(0), x)


@pytest.mark.parametrize("split,step", [(8, 7), (4, 14), (2, 14)])
def test_split_column_steps_divide_shares(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, split: int,
                                          step: int) -> None:
    """392-row chunks (ResNet-18's first batch norm) at 8, 4 and 2 work-items per column: shares of 49, 98 and 196
    rows walked in unrolled steps of 7, 14 and 14 rows (``share_unroll``: no guarded step), mean and variance as
    eager's on the OpenCL device."""
    conftest.use_opencl_device(monkeypatch, tmp_path)
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {"col_split": split})
    g = torch.Generator().manual_seed(split)
    x = torch.randn(3, 392, 16, generator=g) * 3 + 1
    compile_and_check(lambda x: torch.var_mean(x, 1), x, rtol=1e-4, atol=1e-4)
    schedules = "\n".join(p.read_text() for p in tmp_path.rglob("schedule.txt"))
    assert re.search(rf"_cri, {split}, hl.TailStrategy.GuardWithIf\)", schedules), schedules
    assert re.search(rf"_croi, {step}, hl.TailStrategy.GuardWithIf\)", schedules), schedules


def test_share_unroll() -> None:
    """The largest divisor in [4, most], else 4 (guarded)."""
    assert [gpu_columns.share_unroll(n, 16) for n in (196, 98, 49, 64, 125, 127, 24)] == [14, 14, 7, 16, 5, 4, 12]
    assert [gpu_columns.share_unroll(n, 8) for n in (196, 49, 64)] == [7, 7, 8]
    assert gpu_columns.share_unroll(49, 4) == 4

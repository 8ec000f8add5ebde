"""Scans (cumsum, cumprod, logcumsumexp, cummax/cummin) as our kernels on every target, against eager."""
from __future__ import annotations

import pytest
import torch

import halide_xpu
from halide_xpu import scan
from conftest import compile_and_check, eager_in_float64


@pytest.fixture(autouse=True)
def _scans_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(halide_xpu.config, "scan_kernels", "all")  # CPU devices too (default: GPU devices only)


def _rows(target: str, n: int) -> int:
    """Rows for a test of the per-row scan: GPUs chunk scans of fewer rows (scan.GPU_MIN_ROWS; test_chunked_scans)."""
    from halide_xpu.scan import GPU_MIN_ROWS

    return GPU_MIN_ROWS if target == "cuda" else n


def _check(fn, *args, **kwargs) -> str:
    code = compile_and_check(fn, *args, **kwargs)
    assert "ScheduleSpec(family='scan'" in code, "no scan kernel of ours"
    return code


def test_cumsum_rows_and_columns(target: str) -> None:
    x = torch.randn(_rows(target, 37), 33)
    _check(lambda x: torch.cumsum(x, 1) * 2 + 1, x, rtol=1e-5, atol=1e-5)
    _check(lambda x: torch.cumsum(x.t(), 0), x, rtol=1e-5, atol=1e-5)  # the scanned dim is the outer one


def test_low_precision_scans_accumulate_in_fp32(target: str) -> None:
    """fp16/bf16 scans run in fp32 and round once per element, as Triton's do (GPUTests' ``split_cumsum_low_prec``
    and ``logcumsumexp`` compare with a float reference; ATen's fp16 scan drifted 1.3e-3 from it)."""
    x = torch.rand(_rows(target, 6), 700) + 0.5
    for dtype in (torch.float16, torch.bfloat16):
        h = (x / 1.7).to(dtype)
        _check(torch.cumprod, h, -1, reference=eager_in_float64(lambda t, d: torch.cumprod(t, d)))
        _check(lambda t: torch.cumsum(t, 1), h, reference=eager_in_float64(lambda t: torch.cumsum(t, 1)))
        _check(lambda t: t.logcumsumexp(1), h, reference=eager_in_float64(lambda t: t.logcumsumexp(1)))


def test_logcumsumexp_special_values(target: str) -> None:
    """-inf entries (the combine's mask path), +inf and NaN propagate as in eager."""
    x = torch.rand(_rows(target, 20), 30)
    x[3, :5] = float("-inf")
    x[4, 7] = float("inf")
    x[5, 9] = float("nan")
    _check(lambda x: (x.t().logcumsumexp(0), x.logcumsumexp(1)), x, rtol=1e-5, atol=1e-5)


def test_cummax_cummin_ties(target: str) -> None:
    """A tuple scan (value, index): ties pick the index eager picks."""
    x = torch.randint(0, 4, (_rows(target, 6), 40)).float()
    _check(lambda x: (*torch.cummax(x, 1), *torch.cummin(x, 1)), x)


def test_integer_and_bool_cumsum(target: str) -> None:
    """int32 and bool scans produce int64, as eager does."""
    x = torch.randint(-2**30, 2**30, (_rows(target, 5), 17), dtype=torch.int32)
    _check(lambda x: (torch.cumsum(x, 1), torch.cumsum(x > 0, 1)), x)


def test_cumsum_dynamic_length(target: str) -> None:
    for n in (19, 41):
        _check(lambda x: torch.cumsum(x, 1), torch.randn(_rows(target, 4), n), dynamic=True, rtol=1e-5, atol=1e-5)


def test_few_rows(target: str) -> None:
    """One row and 8 rows of 512 (HF Llama's position_ids): on GPUs the chunked form (scan.py ``_chunked``: rows
    of 32-element chunks scanned in parallel), on CPU devices one work-item per row."""
    for x in (torch.rand(10, 3, 35).view(-1), torch.rand(8, 512)):
        if target == "cuda" and x.dim() == 1:  # Inductor may split one long row's scan (a Triton-only form)
            halide_xpu.stats.reset()
            x = x.cuda()
            torch.testing.assert_close(torch.compile(lambda x: torch.cumsum(x, -1))(x), torch.cumsum(x, -1),
                                       rtol=1e-4, atol=1e-4)
            torch._dynamo.reset()
        else:
            code = _check(lambda x: torch.cumsum(x, -1), x, rtol=1e-4, atol=1e-4)
            assert ("_loc = hl.Func" in code) == (target == "cuda"), "the chunked form on GPUs only"


@pytest.fixture
def chunked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunked form on CPU devices as well (on the OpenCL device with the GPU schedules)."""
    monkeypatch.setattr(halide_xpu.config, "scan_chunks", "all")


@pytest.mark.parametrize("n", [33, 64, 100, 512, 700, 2000])
def test_chunked_scans(target: str, chunked: None, n: int) -> None:
    """Chunked scans (a row's 32-element chunks, then the chunk totals, then each element with its chunk's prefix)
    equal eager for every scan kind: rows not a whole number of chunks, cummax/cummin ties across chunk borders (the
    later index wins), -inf/inf/NaN in logcumsumexp, integer overflow wrapping as eager's."""
    g = torch.Generator().manual_seed(n)
    x = torch.randint(0, 3, (6, n), generator=g).float()
    x[1, 5] = float("nan")
    code = _check(lambda x: (*torch.cummax(x, 1), *torch.cummin(x, 1), torch.cumsum(x, 1)), x)
    assert "_loc = hl.Func" in code, "not the chunked form"
    y = torch.rand(6, n, generator=g) * 4
    y[3, :40] = float("-inf")
    y[4, n // 2] = float("inf")
    # cumprod of factors in [0.75, 1.25]: a float32 running product that underflows before the inf (y / 2 over 350
    # elements: e^-108) is 0 * inf = NaN or inf by the order of the products alone (eager CUDA's scan gave inf, the
    # chunks' prefix NaN; CPU devices accumulate float32 in float64)
    _check(lambda y: (y.logcumsumexp(1), torch.cumprod(0.75 + y / 8, 1)), y, rtol=1e-5, atol=1e-5)
    i = torch.randint(-2**62, 2**62, (4, n), generator=g)
    _check(lambda i: (torch.cumsum(i, 1), torch.cumsum(i > 0, 1)), i)
    h = (torch.rand(5, n, generator=g) + 0.5).to(torch.bfloat16)
    _check(lambda t: torch.cumsum(t, 1), h, reference=eager_in_float64(lambda t: torch.cumsum(t, 1)))
    # rows over two dims (one fused work-group dim); uint8 values beside int64 indices (mixed widths: the chunks'
    # Funcs in per-launch scratch once corrupted the OpenCL device's heap; the chunks now hold both in 64 bits)
    u = torch.randint(0, 2, (3, 4, n), generator=g, dtype=torch.uint8)
    _check(lambda u: (*torch.cummax(u, 2), torch.cumsum(u.float(), 2)), u)


def test_masked_cumsum_backward(target: str) -> None:
    """The scan's result leaves the kernel's scan in the op's own type (float64 running values on CPU tensors met a
    float32 reduction: Halide refused the kernel; OpInfo ``masked.cumsum`` backward)."""
    if target == "cuda":
        pytest.skip("one row: CUDA gives it to Triton")
    x = torch.randn(37)  # one row: the scan and the sum over it are one kernel
    mask = torch.rand(x.shape) > 0.3
    _check(lambda x, m, g: (torch.cumsum(torch.where(m, x, 0), 0) * g).sum(), x, mask, torch.randn(x.shape),
           rtol=1e-4, atol=1e-4)


def test_logcumsumexp_backward_at_large_values(target: str) -> None:
    """On CPU tensors eager scans float32 in float64 (``at::acc_type``); a float32 running value at inputs of 1e4 put
    logcumsumexp's gradient 3.4e-4 off eager (OpInfo sample on opencl). GPUs scan float32 in float32, as eager does."""
    from conftest import on_target

    if target == "cuda":
        pytest.skip("CUDA scans float32 in float32, as eager CUDA does (and gives 25 rows to Triton)")
    x = on_target(torch.full((5, 5, 5), 1e4) + torch.randn(5, 5, 5))
    grads = []
    for fn in (lambda t: t.logcumsumexp(0), torch.compile(lambda t: t.logcumsumexp(0), fullgraph=True)):
        leaf = x.detach().clone().requires_grad_(True)
        (fn(leaf) * torch.linspace(-1, 1, 125, device=x.device).view(5, 5, 5)).sum().backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1], grads[0])
    assert halide_xpu.stats.counters["kernels_generated"] > 0


@pytest.mark.parametrize("rows, n", [(8, 512), (1, 512), ("broadcast", 512), (4, 2000)])
def test_chunked_scan_is_one_cuda_kernel(target: str, chunked: None, tmp_path, monkeypatch: pytest.MonkeyPatch,
                                         rows: int | str, n: int) -> None:
    """The chunked form built as a CUDA twin (H100 caps, no GPU): one launch, a work-group per row, a work-item per
    chunk (was five kernels: each Func's pure and update stage on its own). One row is one work-group, not one
    work-item scanning the whole row; one row's scan stored for 8 rows (HF Llama's packed-sequence check over 512
    position ids: 6.7 us on one work-item of the H200, Triton 0.9) a work-group per stored row."""
    import re
    import sys
    from pathlib import Path

    if target != "opencl":
        pytest.skip("the kernels of the OpenCL build are rebuilt as CUDA twins")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from harvested import lower_to
    from replay_kernel import compile_cuda_twin, load_meta

    monkeypatch.setattr(halide_xpu.config, "cache_dir", str(tmp_path))
    if rows == "broadcast":
        rows = 8
        _check(lambda x: torch.cumsum(x.expand(8, -1) != 1, 1), torch.randint(0, 3, (512,)))
    elif n == 512:
        x = torch.randint(0, 3, (rows, n))
        # int32 values beside int64 indices: chunk Funcs of one width (both held in 64 bits; mixed widths took
        # the five-kernel scan_rows form: cummax of float32 on the H200 22 us, Triton 1.5)
        _check(lambda x: (torch.cumsum(x, 1), *torch.cummax(x.int(), 1)), x)
    else:  # one scan: rows of 2000 int64 sums and cummax Tuples would not fit local memory
        _check(lambda x: torch.cumsum(x, 1), torch.randint(0, 3, (rows, n)))
    entries = [p.parent for p in tmp_path.rglob("kernel.py") if "_loc = hl.Func" in p.read_text()]
    assert entries, "no chunked scan kernel built"
    for entry in entries:
        stmt = tmp_path / "twin.stmt"
        _, lines, variant = compile_cuda_twin(load_meta(entry), (entry / "kernel.py").read_text(), lower_to(stmt))
        assert variant == "scan_chunks", lines
        # every doubling step of the chunk totals computed in local memory, none inlined (a step matched by its
        # Halide name missed the ``$N`` suffix of a Func made twice: each work-item re-read every chunk total)
        steps = set(re.findall(r"^\s*(\w+_pre_s\d+) = hl\.Func", (entry / "kernel.py").read_text(), re.M))
        assert steps and all(any(line.startswith(f"{s}.compute_at(") for line in lines) for s in steps), lines
        launches = re.findall(r'halide_cuda_run\([^,]+, "[^"]+", (\d+), \d+, \d+, (\d+), (\d+),',
                              stmt.read_text(errors="replace"))
        # a work-group per row: the chunks (a work-item each) on its second dim, a chunk's points on its first
        # (as many as the work-group's limit allows); every stage on the same two dims (the chunk totals' steps on
        # the first took 63 x 63 work-items for rows of 2000, past CUDA's 1024)
        chunk = scan.chunk_length(n)
        count = -(-n // chunk)
        lanes = chunk
        while lanes > 1 and lanes * count > 1024:
            lanes //= 2
        assert launches == [(str(rows), str(lanes), str(count))], launches

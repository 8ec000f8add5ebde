"""Random graphs (``halide_xpu.graph_fuzz``) of odd shapes and mixed dtypes, forward and backward, against eager on
every CPU target: a fixed range of seeds in CI (``python -m halide_xpu fuzz`` runs as many as you like)."""
from __future__ import annotations

import pytest
import torch

from conftest import opencl_available, sycl_unavailable
from halide_xpu import graph_fuzz

SEEDS = {"host": range(0, 40), "opencl": range(0, 40), "sycl": range(40, 55)}


def _ready(target: str) -> None:
    if target == "opencl" and not opencl_available():
        pytest.skip("no OpenCL device")
    if target == "sycl" and sycl_unavailable():
        pytest.skip(sycl_unavailable())


@pytest.mark.parametrize("target", list(SEEDS))
def test_random_graphs_match_eager(target: str) -> None:
    _ready(target)
    verdicts = [graph_fuzz.check(graph_fuzz.generate(seed), target) for seed in SEEDS[target]]
    bad = [f"{v.result} {graph_fuzz.generate(v.seed).describe()}\n  {v.detail}" for v in verdicts
           if v.result in ("mismatch", "error")]
    assert not bad, "\n".join(bad)
    ran = sum(v.result == "pass" for v in verdicts)
    assert ran >= 0.8 * len(verdicts), [(v.seed, v.result) for v in verdicts]  # our kernels ran, not fallbacks


def test_programs_are_reproducible_and_varied() -> None:
    cases = [graph_fuzz.generate(seed) for seed in range(60)]
    assert graph_fuzz.generate(7) == cases[7]
    ops = {op for c in cases for op, _, _ in c.steps}
    # every family is drawn: pointwise, reductions, scans, views, indirect loads and stores, casts
    assert {"sum", "softmax", "cumsum", "permute", "gather", "index_add", "cast"} <= ops, ops
    assert any(c.backward for c in cases) and any(c.dynamic for c in cases)
    dtypes = {d for c in cases for _, d in c.inputs}
    assert {"float32", "bfloat16", "float16", "int32", "int64"} <= dtypes, dtypes


def test_the_judge_catches_garbage_and_passes_rounding() -> None:
    ref = torch.linspace(-3, 3, 100, dtype=torch.float64)
    eager = ref.to(torch.bfloat16)
    assert graph_fuzz._compare(ref.to(torch.bfloat16), eager, ref, "out") is None  # rounding
    wrong = eager.clone()
    wrong[70] += 1  # one dropped/garbage element
    assert "1 of 100 off" in graph_fuzz._compare(wrong, eager, ref, "out")
    assert graph_fuzz._compare(torch.arange(4), torch.tensor([0, 1, 2, 4]), torch.arange(4), "idx")
    nan = eager.clone()
    nan[3] = float("nan")
    assert "NaN" in graph_fuzz._compare(nan, eager, ref, "out")


def test_exp_of_a_bfloat16_cast_builds_on_the_host() -> None:
    """The first graph_fuzz find: a cast to bfloat16 left the value 16-bit on the host and ``hx.exp``'s select met
    two types (the kernel did not build)."""
    case = graph_fuzz.Case(8, (((100, 7), "float32"),), ((7, (100, 1)),),
                           (("cast", (0,), ("bfloat16",)), ("gather", (1,), (1, 0)), ("exp_neg", (1,), ())), (3,),
                           False, False)
    verdict = graph_fuzz.check(case, "host")
    assert verdict.result == "pass", verdict.detail


def test_a_case_that_kills_its_worker_costs_that_case_only() -> None:
    """The command line checks each case in a worker process: a device runtime's abort (Halide's OpenCL runtime on a
    negative stride) is recorded as ``crash`` and the next case runs in a new worker."""
    worker = graph_fuzz.Worker("host", timeout_s=300)
    try:
        died = worker.check("not a seed")  # type: ignore[arg-type]  # the worker's int() raises: it exits
        assert died.result == "crash" and worker.proc is None
        assert worker.check(3).result == "pass"
    finally:
        if worker.proc is not None:
            worker.proc.kill()


@pytest.mark.parametrize("seed", [1020, 1108, 1230, 1261])
def test_dynamic_shape_finds(seed: int) -> None:
    """graph_fuzz's dynamic-shape finds on the GPU schedules (opencl): a flip's offset ``ks0 - 1`` not applied
    (1020, 1230: read at -129 / -30), ``evaluate_max`` of kernel size symbols raising (1108: a cat's backward), a
    negative symbolic stride that made Halide's OpenCL runtime abort the process (1261: logcumsumexp's backward)."""
    _ready("opencl")
    case = graph_fuzz.generate(seed)
    assert case.dynamic
    verdict = graph_fuzz.check(case, "opencl")
    assert verdict.result in ("pass", "no_kernel"), verdict.detail

"""Combo kernels (halide_xpu.combo): an optimizer's foreach step as one launch on GPU targets, equal to eager."""
from __future__ import annotations

import pytest
import torch

import halide_xpu
from halide_xpu import combo, compiler, stats

from conftest import on_target

SHAPES = [(96, 64), (64,), (1000,), (3,), (7, 5), (1,)]


def _adamw(dtype: torch.dtype, compiled: bool, steps: int = 3) -> list[torch.Tensor]:
    torch.manual_seed(0)
    ps = [torch.nn.Parameter(on_target(torch.randn(s).to(dtype))) for s in SHAPES]
    opt = torch.optim.AdamW(ps, lr=1e-2, eps=1e-3, foreach=True)
    step = torch.compile(opt.step) if compiled else opt.step
    for _ in range(steps):
        for p in ps:
            p.grad = on_target(torch.randn(p.shape).to(dtype))
        step()
    state = [opt.state[p][k] for k in ("exp_avg", "exp_avg_sq", "step") for p in ps]
    return [t.detach().cpu().clone() for t in [*ps, *state]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_adamw_foreach_step_is_one_launch(target, dtype):
    """Three AdamW steps over six parameters (odd sizes, a 1-element one): parameters and both moments match eager,
    and on GPU targets the update is one combo kernel of six parts and the step counters another."""
    compiler._memory.clear()
    with torch.no_grad():
        actual = _adamw(dtype, True)
        expected = _adamw(dtype, False)
    tol = {} if dtype == torch.float32 else {"atol": 0.02, "rtol": 0.02}
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, **tol)
    if target == "host":
        assert not stats.counters["combo_kernels"]
        return
    assert stats.counters["combo_kernels"] == 2 and stats.counters["combo_parts"] == 2 * len(SHAPES), stats.counters
    assert not stats.counters["schedule_errors"] and not stats.fallbacks
    built = [l for l in compiler._memory.values() if l.meta.schedule.family == combo.FAMILY]
    assert built and all(l.variant.startswith("combo") for l in built), [l.variant for l in built]



@pytest.mark.parametrize("per_item", [2, 3])
def test_vectors_per_work_item(target, per_item, monkeypatch):
    """``config.combo_per_item``: each work-item stores several vectors of its part (unrolled inside the work-item
    loop, a work-group's vectors contiguous), a part's last vectors guarded; the same numbers."""
    if target == "host":
        pytest.skip("combo kernels are GPU-target kernels")
    monkeypatch.setattr(halide_xpu.config, "combo_per_item", per_item)
    compiler._memory.clear()
    with torch.no_grad():
        actual = _adamw(torch.float32, True, steps=2)
        expected = _adamw(torch.float32, False, steps=2)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    built = [l for l in compiler._memory.values() if l.meta.schedule.family == combo.FAMILY]
    assert built and all(l.meta.schedule.get("per_item", 0) == per_item for l in built)
    assert all(any(".unroll(hxc$y)" in line for line in l.schedule) for l in built)


def test_combo_kernels_off(target, monkeypatch):
    """``config.combo_kernels = False``: one kernel per parameter, as before, and the same numbers."""
    monkeypatch.setattr(halide_xpu.config, "combo_kernels", False)
    with torch.no_grad():
        actual = _adamw(torch.float32, True, steps=1)
        expected = _adamw(torch.float32, False, steps=1)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    assert not stats.counters["combo_kernels"]


def test_store_order_of_in_place_outputs():
    """A part's outputs are stored so that none overwrites an input a later store still reads; a cycle refuses."""
    from halide_xpu.meta import ArgSpec, KernelMeta

    src = ("def algorithm():\n    tmp0[h0] = in_ptr0[h0,] + in_ptr1[h0,]\n    out_ptr0[h0,] = tmp0[h0]\n"
           "    out_ptr1[h0,] = in_ptr1[h0,]\n")
    args = tuple(ArgSpec(n, "out" if "out" in n else "in", "float32", ("8",), ("1",)) for n in
                 ("in_ptr0", "in_ptr1", "out_ptr0", "out_ptr1"))
    meta = KernelMeta(args=args, target="sycl", halide_target="host", outputs=("out_ptr0", "out_ptr1"))
    # out_ptr1 overwrites in_ptr1, which out_ptr0 reads: out_ptr0 first
    assert combo._store_order(meta, src, {"out_ptr1": "in_ptr1", "out_ptr0": "in_ptr0"}) == ("out_ptr0", "out_ptr1")
    # out_ptr0 overwrites in_ptr1 too (read by out_ptr1) and out_ptr1 overwrites in_ptr0? no: in_ptr1 both ways
    cyclic = src.replace("out_ptr1[h0,] = in_ptr1[h0,]", "out_ptr1[h0,] = in_ptr0[h0,]")
    assert combo._store_order(meta, cyclic, {"out_ptr0": "in_ptr0", "out_ptr1": "in_ptr1"}) is None


def test_launches_hold_at_most_max_buffers():
    """BERT's 42 AdamW parts of 8 buffers each exceeded Halide's 256 CUDA kernel arguments on the H200: parts are
    split into launches of at most ``MAX_BUFFERS`` buffers, and parts that share a written buffer never meet."""
    from halide_xpu.meta import ArgSpec, KernelMeta

    def part(i: int) -> combo.Part:
        names = [f"in_ptr{j}" for j in range(5)] + [f"out_ptr{j}" for j in range(3)]
        args = tuple(ArgSpec(n, "out" if "out" in n else "in", "float32", ("8",), ("1",)) for n in names)
        meta = KernelMeta(args=args, target="cuda", halide_target="host-cuda", outputs=names[5:])
        return combo.Part(meta, "", (), tuple(names[5:]), frozenset({f"g{i}", "lr"}), frozenset({f"p{i}"}))

    found = combo.groups([part(i) for i in range(42)])
    assert [len(g) for g in found] == [24, 18]
    assert all(sum(len(p.meta.args) for p in g) <= combo.MAX_BUFFERS for g in found)
    clash = combo.Part(part(0).meta, "", (), (), frozenset({"p1"}), frozenset({"q"}))  # reads what part 1 writes
    assert [len(g) for g in combo.groups([part(1), clash])] == [1, 1]


OPTIMIZERS = {
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True),
    "adam_amsgrad_maximize": lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True, maximize=True, foreach=True),
    "adamw_capturable": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, capturable=True, foreach=True),
    "rmsprop_centered": lambda ps: torch.optim.RMSprop(ps, lr=1e-2, centered=True, momentum=0.5, foreach=True),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_other_foreach_optimizers(target, name):
    """Other foreach steps (momentum buffers, amsgrad's running max, capturable's tensor step, a centered average)
    with gradient clipping before them: parameters and state match eager after three steps."""
    if target == "host":
        pytest.skip("combo kernels are GPU-target kernels")
    if name == "adamw_capturable" and target != "cuda":
        pytest.skip("torch's capturable optimizers take CUDA/XPU tensors only")

    def run(compiled: bool) -> list[torch.Tensor]:
        torch.manual_seed(0)
        ps = [torch.nn.Parameter(on_target(torch.randn(s))) for s in SHAPES]
        opt = OPTIMIZERS[name](ps)

        def step() -> None:
            torch.nn.utils.clip_grad_norm_(ps, 1.0, foreach=True)
            opt.step()

        fn = torch.compile(step) if compiled else step
        for _ in range(3):
            for p in ps:
                p.grad = on_target(torch.randn(p.shape))
            fn()
        state = [v for p in ps for v in opt.state[p].values() if isinstance(v, torch.Tensor)]
        return [t.detach().cpu().clone() for t in [*ps, *state]]

    with torch.no_grad():
        actual, expected = run(True), run(False)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=2e-5, rtol=2e-5)
    assert stats.counters["combo_kernels"] >= 1, stats.counters

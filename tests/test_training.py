"""Training steps (forward + backward + AdamW) of small models on every target, compared with eager, gradient by
gradient and parameter by parameter; our kernels must be the ones that ran."""
from __future__ import annotations

import copy

import pytest
import torch

import halide_xpu
from conftest import KERNEL_CALL, on_target
from training_models import MODELS


def _step(model: torch.nn.Module, inputs: tuple, compiled: bool) -> tuple[torch.Tensor, dict, dict]:
    """One step; returns (loss, grads, params after an AdamW step)."""
    # eps 1e-3: a gradient that is 0 up to rounding (a conv bias before batch norm) must not become a full step
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-3, foreach=True)
    fwd = torch.compile(model) if compiled else model
    loss = fwd(*inputs)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    step = torch.compile(opt.step) if compiled else opt.step
    step()
    return loss.detach(), grads, {n: p.detach().clone() for n, p in model.named_parameters()}


def _on_target(model: torch.nn.Module) -> torch.nn.Module:
    """Parameters and buffers where the target's kernels read them (deepcopy does not keep the sycl emulation's
    USM allocations)."""
    for t in [*model.parameters(), *model.buffers()]:
        t.data = on_target(t.data)
    return model


def _err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest difference relative to the reference tensor's scale."""
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-6)).item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_training_step(target: str, name: str, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    reference = MODELS[name]()
    inputs = on_target(MODELS[name].inputs())
    lowp = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    eager = _on_target(copy.deepcopy(reference).to(dtype))
    ours = _on_target(copy.deepcopy(reference).to(dtype))
    reference = _on_target(reference)
    halide_xpu.stats.reset()
    torch._dynamo.reset()
    codes: list[str] = []
    from torch._inductor.utils import run_and_get_code

    (loss, grads, params), codes = run_and_get_code(lambda: _step(ours, tuple(lowp), True))
    assert halide_xpu.stats.counters["kernels_generated"] > 0 and any(KERNEL_CALL.search(c) for c in codes)
    assert not halide_xpu.stats.fallbacks, halide_xpu.stats.fallbacks
    e_loss, e_grads, e_params = _step(eager, tuple(lowp), False)
    if dtype == torch.float32:
        torch.testing.assert_close(loss, e_loss, rtol=1e-4, atol=1e-5)
        for n in grads:
            torch.testing.assert_close(grads[n], e_grads[n], rtol=1e-3, atol=1e-5, msg=lambda m: f"grad {n}: {m}")
            torch.testing.assert_close(params[n], e_params[n], rtol=1e-4, atol=1e-5, msg=lambda m: f"param {n}: {m}")
        return
    # bf16: both runs against an fp32 reference; ours may not be much further from it than eager bf16 is
    r_loss, r_grads, _ = _step(copy.deepcopy(reference), tuple(inputs), False)
    assert _err(loss, r_loss) <= 3 * _err(e_loss, r_loss) + 2e-2, (loss, e_loss, r_loss)
    for n in grads:
        ours_err, eager_err = _err(grads[n], r_grads[n]), _err(e_grads[n], r_grads[n])
        assert torch.isfinite(grads[n]).all(), n
        assert ours_err <= 3 * eager_err + 3e-2, f"grad {n}: ours {ours_err:.3g} vs eager bf16 {eager_err:.3g}"

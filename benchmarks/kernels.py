"""The kernel suite: memory-bound graphs Inductor turns into one or two kernels, at realistic sizes."""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

Case = tuple[str, str, Callable[..., Any], Callable[[int], tuple[torch.Tensor, ...]]]


def _rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _mat(scale: int, dtype: torch.dtype = torch.float32, n: int = 2) -> Callable[[int], tuple[torch.Tensor, ...]]:
    return lambda s: tuple(torch.randn(s, s, dtype=dtype) for _ in range(n))


def _mat_vec(s: int) -> tuple[torch.Tensor, ...]:
    return torch.randn(s, s), torch.randn(s)


def suite() -> list[Case]:
    """(name, family, fn, make_inputs(size)) — size is the matrix side (1024 is the reference)."""
    return [
        ("add_relu", "pointwise", lambda x, y: torch.relu(x + y), _mat(0)),
        ("gelu_tanh", "pointwise", lambda x, y: F.gelu(x, approximate="tanh") * y, _mat(0)),
        ("swiglu", "pointwise", lambda x, y: F.silu(x) * y, _mat(0)),
        ("bias_add_broadcast", "pointwise", lambda x, b: x + b, _mat_vec),
        ("pointwise_chain", "pointwise", lambda x, y: torch.sigmoid(x * 2 - y).exp().clamp(max=4) * y + 1, _mat(0)),
        ("transpose_copy", "pointwise", lambda x: x.t().contiguous() * 2, _mat(0, n=1)),
        ("row_sum", "reduction", lambda x: x.sum(-1), _mat(0, n=1)),
        ("col_sum", "reduction", lambda x: x.sum(0), _mat(0, n=1)),
        ("row_max", "reduction", lambda x: x.amax(-1), _mat(0, n=1)),
        ("full_sum", "reduction", lambda x: x.sum(), _mat(0, n=1)),
        ("argmax_row", "reduction", lambda x: x.argmax(-1), _mat(0, n=1)),
        ("var_mean_row", "welford", lambda x: torch.var_mean(x, -1), _mat(0, n=1)),
        ("softmax", "reduction", lambda x: torch.softmax(x, -1), _mat(0, n=1)),
        ("log_softmax", "reduction", lambda x: torch.log_softmax(x, -1), _mat(0, n=1)),
        ("layer_norm", "welford", lambda x, w: F.layer_norm(x, (x.shape[-1],), w), _mat_vec),
        ("rms_norm", "reduction", _rms, _mat_vec),
        ("residual_layer_norm", "welford", lambda x, y, w: F.layer_norm(x + y, (x.shape[-1],), w), lambda s: (*_mat(0)(s), torch.randn(s))),
        ("gelu_bf16", "pointwise", lambda x, y: F.gelu(x) * y, _mat(0, torch.bfloat16)),
        ("softmax_fp16", "reduction", lambda x: torch.softmax(x.float(), -1).half(), _mat(0, torch.float16, n=1)),
        ("mean_mid_dim_3d", "reduction", lambda x: x.view(x.shape[0] // 8, 8, -1).mean(1), _mat(0, n=1)),
    ]

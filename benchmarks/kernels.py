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


def _adam_like(p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """In fp32, results rounded once (Inductor keeps fp32 intermediates where eager rounds each to bf16)."""
    p, m, v, g = (t.float() for t in (p, m, v, g))
    m2 = m * 0.9 + g * 0.1
    v2 = v * 0.999 + g * g * 0.001
    return tuple(t.to(torch.bfloat16) for t in (p - 1e-3 * m2 / (v2.sqrt() + 1e-8), m2, v2))


def _bf16(*shapes: tuple[int, ...], dtype: torch.dtype = torch.bfloat16) -> Callable[[int], tuple[torch.Tensor, ...]]:
    return lambda _s: tuple(torch.randn(*shape, dtype=dtype) for shape in shapes)


def bf16_suite() -> list[Case]:
    """16-bit kernels at GPT-2 / BERT training shapes (benchmarks/real_models.py: batch 8 x 512 tokens, width 768,
    vocab 50257): casts, pads, gelu, an optimizer-style 3-output update, norms. ``size`` is ignored."""
    tokens, vocab, width = 8 * 512, 50257, 768
    return [
        ("logits_to_bf16", "pointwise", lambda x: x.to(torch.bfloat16), _bf16((tokens, vocab), dtype=torch.float32)),
        ("logits_pad_bf16", "pointwise", lambda x: F.pad(x, (0, 7)), _bf16((tokens, vocab))),
        ("scale_bf16", "pointwise", lambda x: x * 0.5, _bf16((tokens, 4 * width))),
        ("gelu_bf16_mlp", "pointwise", lambda x: F.gelu(x, approximate="tanh"), _bf16((tokens, 4 * width))),
        ("residual_add_bf16", "pointwise", lambda x, y: x + y, _bf16((tokens, width), (tokens, width))),
        ("adam_like_bf16", "pointwise", _adam_like, _bf16(*[(2_359_296,)] * 4)),
        ("layer_norm_bf16", "welford", lambda x, w: F.layer_norm(x, (width,), w), _bf16((tokens, width), (width,))),
        ("softmax_bf16_rows", "reduction", lambda x: torch.softmax(x, -1), _bf16((tokens * 12, 512))),
    ]

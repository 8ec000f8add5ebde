"""Model suite: small models built from code with random weights (no downloads), for whole-graph comparisons."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

# name -> (builder(scale, dtype) -> (module, inputs)); scale 1 is the GPU size, the CPU smoke test uses less
Model = tuple[str, Callable[[int, torch.dtype], tuple[nn.Module, tuple[torch.Tensor, ...]]]]


class MLPBlock(nn.Module):
    """Pre-norm transformer MLP: LayerNorm → Linear → GELU → Linear, residual."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps).to(x.dtype) * self.weight


class LlamaMLP(nn.Module):
    """RMSNorm → SwiGLU MLP, residual (Llama-style)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        h = 8 * d // 3
        self.norm, self.gate, self.up, self.down = RMSNorm(d), nn.Linear(d, h, bias=False), nn.Linear(d, h, bias=False), nn.Linear(h, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class GPTBlock(nn.Module):
    """Pre-norm attention block with causal SDPA, then MLP (GPT-2 style, tanh GELU)."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class BasicBlock(nn.Module):
    """ResNet basic block in eval mode (conv → BN → ReLU → conv → BN, residual, ReLU)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


def _init(m: nn.Module, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    for p in m.parameters():
        nn.init.normal_(p, std=0.02) if p.dim() > 1 else nn.init.uniform_(p, 0.5, 1.5)
    for buf_name, buf in m.named_buffers():
        if "running_var" in buf_name:
            buf.uniform_(0.5, 1.5)
        elif "running_mean" in buf_name:
            buf.normal_(0, 0.1)
    return m.eval().to(dtype)


def suite() -> list[Model]:
    """(name, builder): builder(scale, dtype) gives a module and inputs; tokens/batch shrink with ``scale``."""
    # nn.TransformerEncoderLayer's inference fast path is one fused extern op: turn it off so Inductor lowers it
    torch.backends.mha.set_fastpath_enabled(False)

    def tokens(scale: int, d: int, dtype: torch.dtype, batch: int = 8, seq: int = 512) -> torch.Tensor:
        return torch.randn(max(1, batch // scale), max(8, seq // scale), d, dtype=dtype)

    return [
        ("mlp_block", lambda s, dt: (_init(MLPBlock(1024 // s), dt), (tokens(s, 1024 // s, dt),))),
        ("llama_mlp_block", lambda s, dt: (_init(LlamaMLP(1024 // s), dt), (tokens(s, 1024 // s, dt),))),
        ("gpt_block", lambda s, dt: (_init(GPTBlock(768 // s, 12 // min(s, 12) or 1), dt), (tokens(s, 768 // s, dt),))),
        (
            "transformer_encoder_layer",
            lambda s, dt: (
                _init(nn.TransformerEncoderLayer(512 // s, 8, 2048 // s, dropout=0.0, batch_first=True, norm_first=True), dt),
                (tokens(s, 512 // s, dt),),
            ),
        ),
        ("resnet_basic_block", lambda s, dt: (_init(BasicBlock(64 // s), dt), (torch.randn(32 // s or 1, 64 // s, 56, 56, dtype=dt),))),
        ("mlp_block_bf16", lambda s, dt: (_init(MLPBlock(1024 // s), torch.bfloat16), (tokens(s, 1024 // s, torch.bfloat16),))),
    ]

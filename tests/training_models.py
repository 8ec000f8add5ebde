"""Small models built in code for training-step tests: a GPT-style transformer and a conv net (no downloads)."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """Pre-norm transformer block: LayerNorm, causal self-attention, GELU MLP, residuals."""

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
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    """Token + position embeddings, transformer blocks, final LayerNorm, tied LM head, cross-entropy loss."""

    def __init__(self, vocab: int = 64, d: int = 32, heads: int = 2, layers: int = 1, ctx: int = 16) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, idx: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.ln(x) @ self.tok.weight.t()
        return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten())

    @staticmethod
    def inputs(batch: int = 2, t: int = 8, vocab: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(1)
        return torch.randint(0, vocab, (batch, t), generator=g), torch.randint(0, vocab, (batch, t), generator=g)


class ConvNet(nn.Module):
    """Conv, batch norm, ReLU, max-pool, SiLU, adaptive average pool, linear, label-smoothed cross entropy."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.c1, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.fc = nn.Conv2d(8, 16, 3, padding=1), nn.Linear(16, classes)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.adaptive_avg_pool2d(F.silu(self.c2(x)), 1).flatten(1)
        return F.cross_entropy(self.fc(x).float(), target, label_smoothing=0.1)

    @staticmethod
    def inputs(batch: int = 4, side: int = 8, classes: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(1)
        return torch.randn(batch, 3, side, side, generator=g), torch.randint(0, classes, (batch,), generator=g)


MODELS = {"gpt": TinyGPT, "convnet": ConvNet}

"""Probe: integer abs/clamp on CUDA, ours vs eager CUDA vs eager CPU, with the kernels' sources (2026-12-07)."""
import sys

import torch
from torch._inductor.utils import run_and_get_code

import halide_xpu  # noqa: F401

torch._inductor.config.cuda_backend = "halide_xpu"
out = open(sys.argv[1], "w") if len(sys.argv) > 1 else sys.stdout
fns = {"abs_clamp": lambda x: x.abs().clamp(-1, 1), "abs_sub": lambda x: x.abs() - 2, "abs_amin": lambda x: x.abs().amin(),
       "abs": lambda x: x.abs()}
for dt in (torch.int8, torch.int16, torch.int32, torch.int64):
    info = torch.iinfo(dt)
    x = torch.tensor([0, -3, 5, 1, -1, 0, info.min, info.max] * 9, dtype=dt)
    for name, fn in fns.items():
        torch._dynamo.reset()
        got, codes = run_and_get_code(torch.compile(fn), x.cuda())
        print(dt, name, "ours", got.cpu().flatten()[:8].tolist(), "cuda eager", fn(x.cuda()).cpu().flatten()[:8].tolist(),
              "cpu eager", fn(x).flatten()[:8].tolist(), file=out, flush=True)
        if name == "abs_clamp":
            print("\n".join(codes), file=out)

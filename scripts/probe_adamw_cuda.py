"""AdamW's foreach step over GPT-2's parameters (2 blocks of 768, bf16) on CUDA: device time per step of each
kernel, Triton and halide-xpu under each schedule override set, and the parameters after the steps against
eager's. Run on the GPU machine:
  python3 scripts/probe_adamw_cuda.py OUT.json pairs=0 default vector=8"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from typing import Any

import torch

import halide_xpu

SHAPES = [(50257, 768), (1024, 768)] + [s for _ in range(2) for s in (
    (768,), (768,), (768, 2304), (2304,), (768, 768), (768,), (768,), (768,), (768, 3072), (3072,), (3072, 768),
    (768,))] + [(768,), (768,)]


def _params() -> list[torch.nn.Parameter]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    ps = [torch.nn.Parameter(torch.randn(s, device="cuda", generator=gen).bfloat16()) for s in SHAPES]
    for p in ps:
        p.grad = torch.randn(p.shape, device="cuda", generator=gen).bfloat16()
    return ps


def _run(backend: str, overrides: str, steps: int = 3, reps: int = 20) -> dict[str, Any]:
    torch._dynamo.reset()
    torch._inductor.config.cuda_backend = backend
    halide_xpu.config.schedule_overrides = "" if overrides == "default" else overrides
    ps = _params()
    opt = torch.optim.AdamW(ps, lr=1e-3, eps=1e-3, foreach=True)
    step = torch.compile(opt.step) if backend != "eager" else opt.step
    for _ in range(steps):
        step()
    after = [p.detach().float().clone() for p in ps]
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            step()
        torch.cuda.synchronize()
    per_kernel: dict[str, list[float]] = defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[e.name].append(e.device_time)
    kernels = sorted(((n, sum(t) / reps, len(t) // reps, sorted(t)[len(t) // 2]) for n, t in per_kernel.items()),
                     key=lambda k: -k[1])
    return {"after": after, "us_per_step": sum(k[1] for k in kernels),
            "kernels": [{"name": n[:90], "us_per_step": round(u, 2), "launches": c, "median_us": round(m, 2)}
                        for n, u, c, m in kernels[:12]]}


def main() -> int:
    out, configs = sys.argv[1], sys.argv[2:] or ["default"]
    ref = _run("eager", "default")
    rows = [{"backend": "eager", "config": "", "us_per_step": round(ref["us_per_step"], 1)}]
    for backend, config in [("triton", "")] + [("halide_xpu", c) for c in configs]:
        try:
            r = _run(backend, config)
        except Exception as e:  # one failing config does not end the probe
            print(f"{backend} {config}: {type(e).__name__}: {e}", flush=True)
            continue
        err = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-6)) for a, b in zip(r["after"], ref["after"]))
        rows.append({"backend": backend, "config": config, "us_per_step": round(r["us_per_step"], 1),
                     "max_rel_err_vs_eager": err, "kernels": r["kernels"]})
        print(f"{backend:10s} {config:40s} {r['us_per_step']:8.1f} us/step  max rel err {err:.2e}", flush=True)
        for k in r["kernels"][:6]:
            print(f"    {k['us_per_step']:8.1f} us  x{k['launches']:<3d} median {k['median_us']:7.2f}  {k['name']}")
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

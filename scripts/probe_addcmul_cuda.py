"""GPUTests ``addcmul_fma_bitwise_equal`` as that test runs it (value 1, then 2.5 in the same process, under
``emulate_precision_casts``), with the rounding each result matches and our kernels' Halide source and PTX
arithmetic. Run on the GPU machine:  python3 scripts/probe_addcmul_cuda.py"""
from __future__ import annotations

import re
from pathlib import Path

import torch
from torch._inductor.utils import run_and_get_code

import halide_xpu  # noqa: F401 - registers the backend
from halide_xpu import compiler
from halide_xpu.target import ptx


def main() -> None:
    torch._inductor.config.cuda_backend = "halide_xpu"
    torch._inductor.config.fallback_random = True
    s, t1, t2 = (torch.randn(64, 64, device="cuda") for _ in range(3))
    with torch._inductor.config.patch(emulate_precision_casts=True):
        for value in (1.0, 2.5):
            expected = torch.addcmul(s, t1, t2, value=value)
            fn = torch.compile(lambda a, b, c, v=value: torch.addcmul(a, b, c, value=v))
            actual, codes = run_and_get_code(fn, s, t1, t2)
            p = t1.double() * t2.double() if value == 1 else (t1 * t2).double()
            refs = {"fma via float64": (value * p + s.double()).float(), "multiply then add": s + value * (t1 * t2)}
            counts = {n: (int((r != expected).sum()), int((r != actual).sum())) for n, r in refs.items()}
            print(f"value={value}: {int((actual != expected).sum())} of 4096 differ from eager; "
                  f"(eager, ours) mismatches per reference: {counts}", flush=True)
            source = "\n".join(codes)
            start = source.find("def algorithm")
            print(source[start:start + 1200] if start >= 0 else source[:3000])
    for launcher in compiler._memory.values():
        if launcher.meta.target != "cuda":
            continue
        print("== kernel", launcher.library, launcher.meta.fast_math)
        for module in Path(launcher.library).read_bytes().split(ptx.HEADER)[1:]:
            text = module.split(b"\0")[0].decode("ascii", "replace")
            print("-- module")
            print("\n".join(l.strip() for l in text.splitlines() if re.search(r"\b(fma|mul|add|sub|cvt)\.[a-z0-9.]*f(32|64)", l)))


if __name__ == "__main__":
    main()

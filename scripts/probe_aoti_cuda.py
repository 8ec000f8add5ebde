"""GPU-machine diagnostic: package a small model with halide-xpu CUDA kernels through AOTInductor and run it in a
fresh process under scripts/segv_backtrace.c, printing the native stack if it dies; with ``triton`` the same model
through Triton's kernels (the control).
   python3 scripts/probe_aoti_cuda.py OUT_DIR [halide_xpu|triton]"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
import torch.nn.functional as F

import halide_xpu


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = F.silu(x * 2.0 + 1.0)
        return h.sum(1), x[i] * 2, torch.softmax(h, -1)


def main(out: Path, backend: str) -> int:
    out.mkdir(parents=True, exist_ok=True)
    torch._inductor.config.cuda_backend = backend
    x, i = torch.randn(8, 16, device="cuda"), torch.tensor([3, 1, 7], device="cuda")
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(Model(), (x, i), dynamic_shapes={"x": {0: batch}, "i": None})
    halide_xpu.stats.reset()
    path = torch._inductor.aoti_compile_and_package(ep, package_path=str(out / "m.pt2"))
    print("kernels", dict(halide_xpu.stats.counters), "fallbacks", halide_xpu.stats.fallbacks, flush=True)
    torch.save([(x.cpu(), i.cpu()), (torch.randn(5, 16), torch.tensor([4, 0, 2]))], out / "in.pt")
    script = textwrap.dedent(f"""
        import torch
        print([l.split()[-1] for l in open("/proc/self/maps") if "libstdc++" in l][:1], flush=True)
        m = torch._inductor.aoti_load_package({path!r})
        print("loaded", flush=True)
        for x, i in torch.load({str(out / 'in.pt')!r}):
            x, i = x.cuda(), i.cuda()
            got = m(x, i)
            torch.cuda.synchronize()
            h = torch.nn.functional.silu(x * 2.0 + 1.0)
            ref = (h.sum(1), x[i] * 2, torch.softmax(h, -1))
            print("max abs diff", [float((a - b).abs().max()) for a, b in zip(got, ref)], flush=True)
    """)
    so = "/tmp/segv_bt.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", so, str(Path(__file__).with_name("segv_backtrace.c"))],
                   check=True)
    env = dict(os.environ, LD_PRELOAD=" ".join(filter(None, [os.environ.get("PROBE_PRELOAD"), so])))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    print("fresh process exit", r.returncode)
    print(r.stdout[-4000:])
    print(r.stderr[-8000:])
    return r.returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/aoti_probe"),
                  sys.argv[2] if len(sys.argv) > 2 else "halide_xpu"))

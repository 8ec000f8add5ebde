"""Profile one compiled graph on CUDA (halide-xpu vs Triton): which device kernels run and for how long."""
from __future__ import annotations

import sys

import torch

import halide_xpu  # noqa: F401  (registers the backend)

CASES = {
    "full_sum": lambda x: x.sum(),
    "softmax": lambda x: torch.softmax(x, -1),
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)),
    "transpose_copy": lambda x: x.t().contiguous() * 2,
    "argmax_row": lambda x: x.argmax(-1),
}


def main(names: list[str]) -> None:
    x = torch.randn(8192, 8192, device="cuda")
    for name in names or list(CASES):
        for backend in ("triton", "halide_xpu"):
            torch._dynamo.reset()
            with torch._inductor.config.patch(cuda_backend=backend, fx_graph_cache=False):
                f = torch.compile(CASES[name])
                f(x)
                torch.cuda.synchronize()
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as prof:
                    for _ in range(5):
                        f(x)
                    torch.cuda.synchronize()
            print(f"===== {name} / {backend}")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8))


if __name__ == "__main__":
    main(sys.argv[1:])

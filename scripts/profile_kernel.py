"""Run cache entries (``kernel.py`` + ``meta.repr``: ``real_models.py --dump``, ``tests/data/harvested/``) on the
CUDA device with random inputs of their recorded shapes and print each Halide GPU kernel's device time (torch
profiler): which stage of a slow pipeline is slow. GPU machine only."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from replay_kernel import load_meta  # noqa: E402

from halide_xpu import compiler  # noqa: E402


def _tensor(arg, numel_hint: int = 100) -> torch.Tensor:
    """A CUDA tensor laid out as ``arg`` says (static shapes only); integer inputs hold small valid indices."""
    shape = [int(e) for e in reversed(arg.shape)] or [1]
    stride = [int(s) for s in reversed(arg.stride)] or [1]
    size = 1 + sum((e - 1) * s for e, s in zip(shape, stride)) + int(arg.offset)
    dtype = getattr(torch, arg.dtype)
    if dtype.is_floating_point:
        flat = torch.randn(size, device="cuda").to(dtype)
    elif dtype == torch.bool:
        flat = torch.rand(size, device="cuda") > 0.5
    else:
        flat = torch.randint(0, numel_hint, (size,), device="cuda", dtype=dtype)
    return flat


def profile_entry(entry: Path, reps: int) -> None:
    meta = load_meta(entry)
    if meta.target != "cuda":  # e.g. a fake-XPU kernel: rebuilt for CUDA
        meta = dataclasses.replace(meta, target="cuda", device_type="cuda", device_index=0,
                                   halide_target="host-cuda-cuda_capability_86-user_context-strict_float-no_runtime")
    launcher = compiler.load(meta, (entry / "kernel.py").read_text())
    args = [_tensor(a) for a in meta.call_args]
    stream = torch.cuda.current_stream().cuda_stream
    from ctypes import c_void_p

    for _ in range(3):
        launcher(*args, c_void_p(stream))
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            launcher(*args, c_void_p(stream))
        torch.cuda.synchronize()
    rows = [(e.self_device_time_total / reps, e.count // reps, e.key) for e in prof.key_averages() if e.self_device_time_total > 0]
    rows.sort(reverse=True)
    print(f"== {entry.name}: variant {launcher.variant}, {sum(r[0] for r in rows):.1f} us per launch")
    for us, n, name in rows:
        print(f"  {us:9.1f} us  x{n}  {name[:110]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("entries", nargs="+")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    for e in args.entries:
        try:
            profile_entry(Path(e), args.reps)
        except Exception as exc:  # one kernel's failure never ends the run
            print(f"== {Path(e).name}: FAILED {type(exc).__name__}: {str(exc)[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Host cost per kernel launch through Inductor's Python wrapper vs its C++ wrapper, beside the default backend.

A graph of K dependent tiny reductions (K kernels, nothing to fuse) is compiled with 1 and with 9 steps; the
difference of per-call times over 8 is the cost one more kernel adds to a call (launch path, no compute to speak
of). Backends on ``--device cpu``: Inductor C++ (anchor) and halide-xpu host/opencl/sycl; on ``--device cuda``:
Triton (anchor) and halide-xpu with its direct CUDA launch and with Halide's runtime launching. Results: ``<out>/wrapper.json`` + ``wrapper.md``.
    python3 benchmarks/bench_wrapper.py --device cpu
    python3 benchmarks/bench_wrapper.py --device cuda --out benchmarks/results/<gpu>
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import platform
import re
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch._inductor.utils import run_and_get_code

import halide_xpu

sys.path.insert(0, str(Path(__file__).parent))
from bench_cpu import bound_inductor, commit as bench_commit, per_call_us  # noqa: E402

STEPS = (1, 9)
# halide-xpu on CUDA, by launch path (config.cuda_launch): the runtime's direct launch and Halide's own
LAUNCHES = {"halide_xpu": "direct", "halide_xpu/halide-launch": "halide"}


def chain(steps: int, tag: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """``steps`` dependent reductions; ``tag`` gives the function a code object of its own (Dynamo caches compiled
    graphs per code object: backends compiled side by side must not share one)."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        s = x.sum()
        for i in range(1, steps):  # each reduction needs the previous one, over another length: one kernel each
            s = (x[i:] * s).sum()
        return s

    name = "chain_" + re.sub(r"\W", "_", tag)
    code = fn.__code__.replace(co_name=name)
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


@contextlib.contextmanager
def _cuda_launch(path: str) -> Iterator[None]:
    """halide_xpu.config.cuda_launch set to ``path`` while kernels are compiled (it is part of each kernel's key)."""
    before = halide_xpu.config.cuda_launch
    halide_xpu.config.cuda_launch = path
    try:
        yield
    finally:
        halide_xpu.config.cuda_launch = before


@contextlib.contextmanager
def backend(device: str, name: str, cpp_wrapper: bool) -> Iterator[tuple[dict[str, Any], Callable[[torch.Tensor], torch.Tensor]]]:
    """Inductor configured for ``name`` on ``device``; yields its knobs and a function moving inputs where the
    kernels need them."""
    knobs: dict[str, Any] = {"cpp_wrapper": cpp_wrapper, "fx_graph_cache": False}
    move: Callable[[torch.Tensor], torch.Tensor] = lambda t: t  # noqa: E731
    scope = contextlib.nullcontext()
    if device == "cuda":
        knobs["cuda_backend"] = "triton" if name == "triton" else "halide_xpu"
        move = lambda t: t.cuda()  # noqa: E731
        if name in LAUNCHES:
            scope = _cuda_launch(LAUNCHES[name])
    else:
        knobs["cpu_backend"] = "cpp" if name == "cpp" else "halide_xpu"
        if name != "cpp":
            halide_xpu.config.cpu_target = name
        if name == "sycl":
            from halide_xpu import usm

            scope, move = usm.usm_tensors(), usm.to_usm
    with torch._inductor.config.patch(knobs), scope:
        yield knobs, move


def _scope(device: str, name: str) -> Any:
    """What a call needs at run time (the sycl emulation's USM allocator), nothing else."""
    if device == "cpu" and name == "sycl":
        from halide_xpu import usm

        return usm.usm_tensors()
    return contextlib.nullcontext()


def prepare(device: str, name: str, cpp_wrapper: bool, numel: int) -> tuple[dict[str, Any], dict[int, Callable[[], None]]]:
    """Compile the 1- and 9-step graphs for one backend and wrapper, checked against eager: (row, step -> call)."""
    row: dict[str, Any] = {"backend": name, "wrapper": "C++" if cpp_wrapper else "Python"}
    calls: dict[int, Callable[[], None]] = {}
    with backend(device, name, cpp_wrapper) as (knobs, move):
        x = move(torch.full((numel,), 1e-3))
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        for steps in STEPS:
            halide_xpu.stats.reset()
            fn = torch.compile(chain(steps, f"{name}_{row['wrapper']}_{steps}"), fullgraph=True,
                               backend=bound_inductor(knobs, halide_xpu.config.cpu_target))
            out, codes = run_and_get_code(fn, x)
            torch.testing.assert_close(out, chain(steps, "eager")(x), rtol=1e-4, atol=1e-6)
            pattern = r"\b(?:cpp_fused|triton_\w+|halide_xpu_kernel)_\w*\d+\b"
            row[f"kernels_{steps}"] = len(set(re.findall(pattern, "\n".join(codes))))
            if name not in ("cpp", "triton"):
                assert halide_xpu.stats.counters["kernels_generated"] >= steps, halide_xpu.stats.counters
                assert not halide_xpu.stats.fallbacks, halide_xpu.stats.fallbacks

            def call(fn: Callable = fn, x: torch.Tensor = x) -> None:
                fn(x)
                sync()

            calls[steps] = call
    return row, calls


def measure(device: str, prepared: list[tuple[dict[str, Any], dict[int, Callable[[], None]]]], min_time: float,
            rounds: int) -> None:
    """Per-call times, the backends alternated over ``rounds`` rounds (a shared host drifts: one backend measured
    after the other saw Triton's figure move 5x between runs); each figure is its best round."""
    for r in range(rounds):
        for row, calls in prepared:
            with _scope(device, row["backend"]):
                for steps, call in calls.items():
                    t = per_call_us(call, min_time / rounds)
                    row[f"call_us_{steps}"] = min(t, row.get(f"call_us_{steps}", t))
    for row, _ in prepared:
        extra = row[f"kernels_{STEPS[1]}"] - row[f"kernels_{STEPS[0]}"]
        row["per_kernel_us"] = ((row[f"call_us_{STEPS[1]}"] - row[f"call_us_{STEPS[0]}"]) / extra if extra > 0
                                else float("nan"))


def _num(value: float, unit: str = "") -> str:
    return "—" if value != value else f"{value:.2f}{unit}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--numel", type=int, default=256, help="elements per reduction (tiny: launch cost dominates)")
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds per figure, over all rounds")
    ap.add_argument("--rounds", type=int, default=5, help="backends alternated this many times; best round kept")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "cpu"))
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    names = ["triton", *LAUNCHES] if args.device == "cuda" else ["cpp", "host", "opencl", "sycl"]
    rows, prepared = [], []
    for name in names:
        for cpp in (False, True):
            try:
                row, calls = prepare(args.device, name, cpp, args.numel)
                prepared.append((row, calls))
            except Exception as e:  # one backend failing must not lose the others' numbers
                row = {"backend": name, "wrapper": "C++" if cpp else "Python", "error": f"{type(e).__name__}: {e}"[:300]}
            rows.append(row)
    measure(args.device, prepared, args.min_time, args.rounds)
    for row in rows:
        print(json.dumps(row), flush=True)
    anchor = {r["wrapper"]: r for r in rows if r["backend"] in ("cpp", "triton") and "error" not in r}
    for r in rows:
        if "error" not in r and r["wrapper"] in anchor and anchor[r["wrapper"]]["per_kernel_us"] == anchor[r["wrapper"]]["per_kernel_us"]:
            r["vs_anchor"] = r["per_kernel_us"] / anchor[r["wrapper"]]["per_kernel_us"]
    commit = bench_commit()
    dev = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or platform.machine()
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
            "device": dev, "torch": torch.__version__, "numel": args.numel, "steps": STEPS, "rounds": args.rounds}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "wrapper.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [f"# Host cost per kernel: Python vs C++ wrapper ({dev}, {meta['date']}, commit {commit}, torch {torch.__version__})",
             "", f"Per-call time of a graph of {STEPS[0]} and {STEPS[1]} dependent reductions of {args.numel} elements; "
             "per kernel = the difference / the difference in kernel launches (a backend that fuses the steps launches fewer: "
             "nan). Ratio against the default backend with the same wrapper. Backends compiled first, then timed in "
             f"{args.rounds} alternating rounds (best round).", "",
             f"| backend | wrapper | kernels | call µs ({STEPS[0]} step) | call µs ({STEPS[1]} steps) | µs per kernel | vs anchor |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['backend']} | {r['wrapper']} | | error: {r['error'][:80]} | | | |")
            continue
        lines.append(f"| {r['backend']} | {r['wrapper']} | {r[f'kernels_{STEPS[0]}']} / {r[f'kernels_{STEPS[1]}']} | {r[f'call_us_{STEPS[0]}']:.1f} | {r[f'call_us_{STEPS[1]}']:.1f} | "
                     f"{_num(r['per_kernel_us'])} | {_num(r.get('vs_anchor', float('nan')), '×')} |")
    (out / "wrapper.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

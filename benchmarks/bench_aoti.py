"""Step time of a model deployed through AOTInductor vs the same model through torch.compile (CPU and CUDA).

A small transformer-style block (embedding gather, LayerNorm, GELU MLP, residual, softmax over the vocabulary
projection) is run by: eager; torch.compile with Inductor's C++ backend (the anchor); torch.compile with halide-xpu
(Python and C++ wrapper) on its host and opencl targets; AOTInductor packages of each, loaded with
``aoti_load_package``. On ``--device cuda`` the anchor is Triton, beside halide-xpu's cuda target. Every variant's
output is compared with eager first. Results: ``<out>/aoti.json`` + ``aoti.md``.
    python3 benchmarks/bench_aoti.py                 # CPU: halide-xpu host and opencl targets
    python3 benchmarks/bench_aoti.py --device cuda --out benchmarks/results/<gpu>
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

import halide_xpu

sys.path.insert(0, str(Path(__file__).parent))
from bench_cpu import commit as bench_commit, per_call_us  # noqa: E402


class Block(torch.nn.Module):
    """Embedding + LayerNorm + GELU MLP + residual + vocabulary softmax: gathers, row reductions, pointwise."""

    def __init__(self, vocab: int = 512, dim: int = 128) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.norm = torch.nn.LayerNorm(dim)
        self.up, self.down = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.emb(tokens)
        h = h + self.down(F.gelu(self.up(self.norm(h))))
        return torch.softmax(self.head(h), -1)


def _knobs(device: str, backend: str) -> dict[str, Any]:
    """Inductor's backend choice for ``device``."""
    return {"cuda_backend" if device == "cuda" else "cpu_backend": backend}


def _compiled(model: torch.nn.Module, device: str, backend: str, cpp_wrapper: bool, tokens: torch.Tensor,
              target: str = "host") -> Callable[..., Any]:
    """``torch.compile(model)`` compiled (on its first call) under ``backend``'s Inductor configuration."""
    torch._dynamo.reset()
    halide_xpu.config.cpu_target = target
    fn = torch.compile(model, fullgraph=True)
    with torch._inductor.config.patch({**_knobs(device, backend), "cpp_wrapper": cpp_wrapper, "fx_graph_cache": False}):
        fn(tokens)
    return fn


def _aoti(model: torch.nn.Module, device: str, backend: str, tokens: torch.Tensor, folder: Path,
          target: str = "host") -> Callable[..., Any]:
    halide_xpu.config.cpu_target = target
    ep = torch.export.export(model, (tokens,))
    with torch._inductor.config.patch(_knobs(device, backend)):
        path = torch._inductor.aoti_compile_and_package(ep, package_path=str(folder / f"{backend}_{target}.pt2"))
    return torch._inductor.aoti_load_package(path)


def _variants(device: str, model: torch.nn.Module, tokens: torch.Tensor,
              tmp: Path) -> list[tuple[str, str, Callable[[], Callable[..., Any]]]]:
    """(backend, deployment, maker) of every variant on ``device``; the anchor second (after eager)."""
    variants: list[tuple[str, str, Callable[[], Callable[..., Any]]]] = [("eager", "—", lambda: model)]
    if device == "cuda":
        for backend, name in (("triton", "Triton"), ("halide_xpu", "halide-xpu cuda")):
            variants += [
                (name, "torch.compile", lambda b=backend: _compiled(model, device, b, False, tokens)),
                (name, "torch.compile, cpp_wrapper", lambda b=backend: _compiled(model, device, b, True, tokens)),
                (name, "AOTInductor", lambda b=backend: _aoti(model, device, b, tokens, tmp)),
            ]
        return variants
    variants.append(("Inductor C++", "torch.compile", lambda: _compiled(model, device, "cpp", False, tokens)))
    variants.append(("Inductor C++", "AOTInductor", lambda: _aoti(model, device, "cpp", tokens, tmp)))
    for target in ("host", "opencl"):
        name = f"halide-xpu {target}"
        variants += [
            (name, "torch.compile", lambda t=target: _compiled(model, device, "halide_xpu", False, tokens, t)),
            (name, "torch.compile, cpp_wrapper", lambda t=target: _compiled(model, device, "halide_xpu", True, tokens, t)),
            (name, "AOTInductor", lambda t=target: _aoti(model, device, "halide_xpu", tokens, tmp, t)),
        ]
    return variants


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "cpu"))
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    model = Block().eval().to(args.device)
    tokens = torch.randint(0, 512, (args.batch, args.seq), device=args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    anchor_backend = "Triton" if args.device == "cuda" else "Inductor C++"
    with torch.no_grad():
        expected = model(tokens)
        rows: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory() as tmp:
            variants = _variants(args.device, model, tokens, Path(tmp))
            for backend, how, make in variants:
                row: dict[str, Any] = {"backend": backend, "deployment": how}
                try:
                    halide_xpu.stats.reset()
                    fn = make()
                    torch.testing.assert_close(fn(tokens), expected, rtol=1e-4, atol=1e-5)
                    if backend.startswith("halide"):
                        assert halide_xpu.stats.counters["kernels_generated"] > 0 and not halide_xpu.stats.fallbacks, (
                            halide_xpu.stats.counters, halide_xpu.stats.fallbacks)
                    row["step_us"] = per_call_us(lambda: (fn(tokens), sync()), args.min_time)
                except Exception as e:  # one variant failing must not lose the others' numbers
                    row["error"] = f"{type(e).__name__}: {e}"[:300]
                rows.append(row)
                print(json.dumps(row), flush=True)
    anchor = next((r["step_us"] for r in rows if r["backend"] == anchor_backend and r["deployment"] == "torch.compile"
                   and "step_us" in r), None)
    for r in rows:
        if anchor and "step_us" in r:
            r["vs_anchor"] = r["step_us"] / anchor
    commit = bench_commit()
    dev = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or platform.machine()
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
            "device": dev, "torch": torch.__version__,
            "batch": args.batch, "seq": args.seq}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "aoti.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [f"# AOTInductor vs torch.compile step time ({meta['device']}, {meta['date']}, commit {commit}, "
             f"torch {torch.__version__})", "",
             f"`Block` inference on {args.batch}×{args.seq} tokens (embedding, LayerNorm, GELU MLP, vocabulary softmax); "
             f"best of 7 batches. Ratio against torch.compile with {anchor_backend}, measured in the same run.", "",
             f"| backend | deployment | step µs | vs {anchor_backend} torch.compile |", "|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['backend']} | {r['deployment']} | error: {r['error'][:100]} | |")
        else:
            ratio = f"{r['vs_anchor']:.2f}×" if "vs_anchor" in r else "—"
            lines.append(f"| {r['backend']} | {r['deployment']} | {r['step_us']:.1f} | {ratio} |")
    (out / "aoti.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

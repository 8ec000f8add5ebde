"""Show the device code (PTX) our schedules give a graph on CUDA: compiled from the CPU build on a machine without
a GPU, or (``--gpu``) the kernels the CUDA backend really builds, with the PTX as rewritten (target/ptx.py)."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

os.environ.setdefault("HALIDE_XPU_CACHE_DIR", "/tmp/halide_xpu_dump_cache")  # read when halide_xpu loads

import halide as hl  # noqa: E402
import torch  # noqa: E402

import halide_xpu  # noqa: F401,E402  (registers the backend)
from halide_xpu import compiler  # noqa: E402
from replay_kernel import CUDA_TARGET, H100  # noqa: E402  (this folder: the CUDA twin's caps and target)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import kernels  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("kernels", nargs="+", help="names from benchmarks/kernels.py")
    ap.add_argument("--size", type=int, default=1024, help="matrix side")
    ap.add_argument("--out", default="/tmp/halide_xpu_device_code")
    ap.add_argument("--gpu", action="store_true", help="compile with the CUDA backend on this machine's GPU")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.gpu:
        return _dump_gpu(args.kernels, args.size, out)
    build = compiler.build
    cases = {c[0]: c for c in kernels.suite()}

    for name in args.kernels:
        counter = [0]

        def dump(meta, source, workdir, name=name):  # the CPU build runs the graph; a CUDA twin is only compiled
            counter[0] += 1
            stem = out / f"{name}_{counter[0]}"
            cuda = dataclasses.replace(meta, target="cuda", device_type="cuda", halide_target=CUDA_TARGET)
            stmt = lambda p, a, t: p.compile_to_lowered_stmt(f"{stem}.stmt", a, hl.StmtOutputFormat.Text, t)  # noqa: E731
            _, lines, variant = compiler.compile_scheduled(cuda, source, stmt, H100)
            Path(f"{stem}.schedule.txt").write_text(f"# variant {variant}\n" + "\n".join(lines) + "\n")
            print(f"{name}: {stem}.stmt ({variant})")
            return build(meta, source, workdir)

        compiler.build = dump
        try:
            torch._dynamo.reset()
            _, _, fn, make = cases[name]
            with torch._inductor.config.patch(cpu_backend="halide_xpu", fx_graph_cache=False):
                torch.compile(fn)(*make(args.size))
        finally:
            compiler.build = build


def _dump_gpu(names: list[str], size: int, out: Path) -> None:
    """Build each graph with the CUDA backend; save every kernel's source, schedule and (rewritten) PTX."""
    from halide_xpu.target import ptx

    cases = {c[0]: c for c in kernels.suite()}
    for name in names:
        torch._dynamo.reset()
        compiler._memory.clear()
        _, _, fn, make = cases[name]
        inputs = [t.cuda() for t in make(size)]
        with torch._inductor.config.patch(cuda_backend="halide_xpu", fx_graph_cache=False):
            torch.compile(fn)(*inputs)
        for i, launcher in enumerate(compiler._memory.values()):
            src = launcher.library.parent
            stem = out / f"{name}_{i + 1}"
            code, _ = ptx.rewrite(ptx.extract((src / "kernel.o").read_bytes()), launcher.meta.fast_math)
            Path(f"{stem}.ptx").write_text(code)
            Path(f"{stem}.py").write_text((src / "kernel.py").read_text())
            Path(f"{stem}.schedule.txt").write_text(f"# variant {launcher.variant}\n" + "\n".join(launcher.schedule) + "\n")
            print(f"{name}: {stem}.ptx ({launcher.variant})")


if __name__ == "__main__":
    main()

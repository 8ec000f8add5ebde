"""Rebuild kernels from cache entries (``kernel.py`` + ``meta.repr``, e.g. the top kernels ``real_models.py --dump``
copies from a GPU run) with the current schedules, for their own target or as a CUDA twin with H100 caps on a
machine without a GPU: prints the variant, the single-work-item stages and the schedule (``-v``)."""
from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
from pathlib import Path
from typing import Any

import halide as hl

from halide_xpu import compiler, meta as meta_mod
from halide_xpu.target.targets import CUDA_SHARED_BYTES, DeviceCaps

ITEMSIZE = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2, "int8": 1,
            "uint8": 1, "bool": 1}
H100 = DeviceCaps(True, 132, 4, max_work_group=1024, sub_group=32, local_mem=CUDA_SHARED_BYTES)
CUDA_TARGET = "x86-64-linux-cuda-cuda_capability_86-user_context-strict_float-no_runtime"


def load_meta(entry: Path) -> meta_mod.KernelMeta:
    names = {n: getattr(meta_mod, n) for n in dir(meta_mod) if not n.startswith("_")}
    return eval((entry / "meta.repr").read_text(), {"__builtins__": {}}, names)  # noqa: S307 (our own records)


def with_contiguous_bytes(meta: meta_mod.KernelMeta, source: str) -> meta_mod.KernelMeta:
    """``meta`` with ``LoopVar.contiguous_bytes`` filled in from its inputs' layouts and the first access of each in
    ``source`` (records harvested before that field existed carry zeros)."""
    if any(v.contiguous_bytes for v in meta.loop_vars):
        return meta
    weights: dict[str, int] = {}
    for a in meta.args:
        if a.kind != "in" or not a.shape:
            continue
        m = re.search(rf"\b{a.name}\[([^\]]*)\]", source)
        if m is None:
            continue
        nbytes = math.prod(int(d) if d.isdigit() else 8192 for d in a.shape) * ITEMSIZE.get(a.dtype, 4)
        for index, stride in zip(m.group(1).split(","), a.stride):
            if stride.strip() == "1":
                for var in re.findall(r"\bh\d+\b", index):
                    weights[var] = weights.get(var, 0) + nbytes
    loop_vars = tuple(dataclasses.replace(v, contiguous_bytes=weights.get(v.name, 0)) for v in meta.loop_vars)
    return dataclasses.replace(meta, loop_vars=loop_vars)


def cuda_twin_meta(meta: meta_mod.KernelMeta) -> meta_mod.KernelMeta:
    """``meta`` (a kernel built for another target) as a CUDA kernel's."""
    return dataclasses.replace(meta, target="cuda", device_type="cuda", halide_target=CUDA_TARGET)


def compile_cuda_twin(meta: meta_mod.KernelMeta, source: str, compile_fn: Any) -> tuple[Any, list[str], str]:
    """``source`` scheduled and compiled (``compile_fn(pipeline, arguments, target)``) for CUDA with H100 caps:
    (compile_fn's result, schedule lines, variant)."""
    return compiler.compile_scheduled(cuda_twin_meta(meta), source, compile_fn, H100)


def replay(entry: Path, out: Path, verbose: bool) -> str:
    meta = load_meta(entry)
    if meta.target == "cuda":
        meta = dataclasses.replace(meta, halide_target=CUDA_TARGET)
    source = (entry / "kernel.py").read_text()
    meta = with_contiguous_bytes(meta, source)
    stem = out / entry.name
    stmt = lambda p, a, t: p.compile_to_lowered_stmt(f"{stem}.stmt", a, hl.StmtOutputFormat.Text, t)  # noqa: E731
    _, lines, variant = compiler.compile_scheduled(meta, source, stmt, H100 if meta.target == "cuda" else None)
    (out / f"{entry.name}.schedule.txt").write_text(f"# variant {variant}\n" + "\n".join(lines) + "\n")
    single = [line for line in lines if "gpu_single_thread" in line]
    print(f"{entry.name}: {meta.target} variant {variant}, single-work-item stages: {len(single)} {single}")
    if verbose:
        print("\n".join(lines))
    return variant


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("entries", nargs="+", help="cache entry folders (each with kernel.py and meta.repr)")
    ap.add_argument("--out", default="/tmp/halide_xpu_replay")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for e in args.entries:
        try:
            replay(Path(e), out, args.verbose)
        except Exception as exc:  # one kernel's failure never ends the run
            failed += 1
            print(f"{Path(e).name}: FAILED {type(exc).__name__}: {str(exc)[:500]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

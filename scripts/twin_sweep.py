"""Compile a real model's step on this CPU and each of its kernels again as a CUDA twin (H100 caps, no GPU needed):
per kernel the schedule variant, the variants Halide rejected and why, and the device kernels one launch runs.
Finds schedules that fall back to staged forms (several launches) at real layer widths before a GPU run does."""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import halide as hl
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "scripts")]
from replay_kernel import compile_cuda_twin, cuda_twin_meta  # noqa: E402

from halide_xpu import compiler  # noqa: E402
from halide_xpu.target.cuda_launch import refused_launches  # noqa: E402

_REJECTED = re.compile(r"schedule (\S+) rejected by Halide: (.*)", re.S)


class _Rejections(logging.Handler):
    """Collects the compiler's 'schedule X rejected' debug records of the kernel being compiled."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.found: dict[int, list[tuple[str, str]]] = {}  # by thread: kernels build on several at once

    def emit(self, record: logging.LogRecord) -> None:
        m = _REJECTED.match(record.getMessage())
        if m:
            self.found.setdefault(record.thread, []).append((m.group(1), " ".join(m.group(2).split())[:240]))


def sweep(model: str, dtype: torch.dtype, mode: str, batch: int, seq: int, work: Path,
          dump: Path | None = None, dump_all: bool = False) -> list[dict[str, Any]]:
    """The kernels of one model step as CUDA twins: [{key, variant, launches, rejected, outputs}]; the sources of
    kernels with a rejected variant or several launches (every kernel with ``dump_all``) go to ``dump/<key>``
    (for ``replay_kernel.py``)."""
    import halide_xpu
    from real_models import models

    rows, build, handler = [], compiler.build, _Rejections()
    clog = logging.getLogger("halide_xpu.compiler")
    clog.addHandler(handler)
    clog.setLevel(logging.DEBUG)

    def twin(meta: Any, source: str, workdir: Path, caps: Any = None) -> Any:
        stmt = work / f"twin_{threading.get_ident()}.stmt"  # kernels build on several threads at once
        handler.found[threading.get_ident()] = []
        row: dict[str, Any] = {"key": hashlib.sha256(source.encode()).hexdigest()[:12], "outputs": len(meta.outputs)}
        try:
            _, _, variant = compile_cuda_twin(
                meta, source, lambda p, a, t: p.compile_to_lowered_stmt(str(stmt), a, hl.StmtOutputFormat.Text, t))
            text = stmt.read_text(errors="replace")
            row.update(variant=variant, launches=text.count("halide_cuda_run("), invalid=refused_launches(text))
        except Exception as e:  # noqa: BLE001 (a twin that fails is a finding, not the end of the sweep)
            row.update(variant="error", launches=0, error=str(e)[-300:])
        row["rejected"] = handler.found.pop(threading.get_ident(), [])
        rows.append(row)
        if dump is not None and (dump_all or row["rejected"] or row["launches"] != 1):
            (dump / row["key"]).mkdir(parents=True, exist_ok=True)
            (dump / row["key"] / "kernel.py").write_text(source)
            (dump / row["key"] / "meta.repr").write_text(repr(cuda_twin_meta(meta)))
        print(json.dumps(row), flush=True)
        return build(meta, source, workdir, caps)

    compiler.build, compiler._memory = twin, {}
    torch._inductor.config.cpu_backend = "halide_xpu"
    # a device target's source (bf16 as bits, indices clamped), without the error word CUDA kernels lack
    halide_xpu.config.cpu_target, halide_xpu.config.device_checks = "opencl", False
    halide_xpu.config.cache_dir = str(work / "cache")
    try:
        net, inputs, loss_fn = models(False)[model]()
        net = net.to(dtype)
        ids, labels = (t[:batch, :seq].contiguous() for t in inputs())
        torch._dynamo.reset()
        if mode == "train":
            step = torch.compile(lambda: loss_fn(net, ids, labels).backward())
        else:
            step = torch.compile(lambda: net(input_ids=ids).logits)
        step()
    finally:
        compiler.build = build
        clog.removeHandler(handler)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", default="gpt2,bert,llama")
    p.add_argument("--dtypes", default="float32")
    p.add_argument("--modes", default="train,infer")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--out", default=None, help="JSON file for all rows")
    p.add_argument("--dump", default=None, help="folder for the sources of flagged kernels")
    p.add_argument("--dump-all", action="store_true", help="with --dump: every kernel's source")
    args = p.parse_args()
    found: dict[str, list] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            for dtype in args.dtypes.split(","):
                for mode in args.modes.split(","):
                    case = f"{model} {dtype} {mode}"
                    print(f"== {case}", flush=True)
                    try:
                        found[case] = sweep(model, getattr(torch, dtype), mode, args.batch, args.seq, Path(tmp),
                                            Path(args.dump) if args.dump else None, args.dump_all)
                    except Exception as e:  # noqa: BLE001 (a step that fails here is reported, the sweep goes on)
                        print(f"   FAILED {case}: {type(e).__name__}: {str(e)[-300:]}", flush=True)
                        found[case] = []
    invalid = [(c, r) for c, rows in found.items() for r in rows if r.get("invalid")]
    for case, r in invalid:
        print(f"  INVALID LAUNCH {case} {r['key']} {r['variant']}: {'; '.join(r['invalid'])}")
    staged = [(c, r) for c, rows in found.items() for r in rows if r["rejected"] or r["launches"] > 1]
    print(f"\n{sum(map(len, found.values()))} kernels; {len(staged)} with a rejected variant or several launches:")
    for case, r in staged:
        why = "; ".join(f"{n}: {m[:120]}" for n, m in r["rejected"])
        print(f"  {case} {r['key']} {r['variant']} x{r['launches']} {why}")
    if args.out:
        Path(args.out).write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

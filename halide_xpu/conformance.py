"""OpInfo conformance suite: every (op, dtype, direction) of PyTorch's ``op_db`` through torch.compile on a
target, compared with eager (``python -m halide_xpu conformance --target host``).

Targets: halide-xpu's ``host``/``opencl``/``sycl`` (cpu) and ``cuda``, and Inductor's own backends as anchors:
``cpp`` (cpu) and ``triton`` (cuda). Jobs run in worker subprocesses (``conformance_worker.py``), fed one job at a
time; a worker that dies (signal) or hangs costs that job (``crash`` / ``timeout``) and is replaced.

Classes: ``pass`` (every sample matches eager; on halide-xpu targets also at least one halide-xpu kernel and no
fallback), ``no_kernel`` (matches, but no halide-xpu kernel or a node fell back), ``mismatch``, ``error`` (compile
or run raised), ``eager_error`` (eager itself fails: skipped), ``crash``, ``timeout``.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

from .conformance_worker import INDUCTOR_CONFIG_ENV, inductor_config

TARGETS = ("host", "opencl", "sycl", "cuda", "cpp", "triton")
ANCHORS = {"host": "cpp", "opencl": "cpp", "sycl": "cpp", "cuda": "triton"}
CLASSES = ("pass", "no_kernel", "mismatch", "error", "eager_error", "crash", "timeout")
DEFAULT_DTYPES = ("float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool")
CI_DTYPES = ("float32", "int32", "bfloat16")
CI_MAX_SAMPLES = 2
DEFAULT_OUT = "benchmarks/results/conformance"

# The CI subset: every lowering family, the hard members. (name, variant, dtypes or None for CI_DTYPES).
# Names not in op_db or picked among alternatives: "__rshift__" -> bitwise_right_shift, "embedding" ->
# nn.functional.embedding, norm -> linalg.vector_norm, native_layer_norm -> nn.functional.layer_norm (the op that
# decomposes to it), constant_pad_nd -> nn.functional.pad.reflect (reflected indices, the harder one).
CI_SUBSET: tuple[tuple[str, str, Optional[tuple[str, ...]]], ...] = (
    # pointwise math
    ("exp", "", None), ("log1p", "", None), ("erf", "", None), ("erfc", "", None), ("sigmoid", "", None),
    ("tanh", "", None), ("atan2", "", None), ("pow", "", None), ("rsqrt", "", None),
    ("nn.functional.gelu", "", None), ("nn.functional.silu", "", None),
    # integer ops
    ("floor_divide", "", None), ("remainder", "", None), ("fmod", "", None), ("bitwise_and", "", ("int32", "int8")),
    ("bitwise_right_shift", "", ("int64", "int8")), ("abs", "", ("float32", "int8", "bfloat16")),
    # comparisons, select, clamp
    ("lt", "", None), ("where", "", None), ("clamp", "", None), ("nan_to_num", "", None),
    # reductions
    ("sum", "", None), ("mean", "", None), ("amax", "", None), ("argmax", "", None), ("var", "", None),
    ("var_mean", "", None), ("std", "", None), ("logsumexp", "", None), ("prod", "", None),
    ("linalg.vector_norm", "", None), ("any", "", ("float32", "bool")), ("all", "", ("int32", "bool")),
    ("masked.sum", "", None), ("masked.var", "", None),
    # normalisations, losses
    ("softmax", "", None), ("log_softmax", "", None), ("nn.functional.cross_entropy", "", None),
    ("nn.functional.layer_norm", "", None), ("nn.functional.batch_norm", "", None),
    # indexing: gathers, scatters (indirect and accumulating stores)
    ("gather", "", None), ("index_select", "", None), ("index_put", "", None), ("scatter", "", None),
    ("scatter_add", "", None), ("scatter_reduce", "sum", None), ("scatter_reduce", "amax", None),
    ("index_add", "", None), ("nn.functional.embedding", "", None),
    # data movement
    ("roll", "", None), ("flip", "", None), ("fft.fftshift", "", None), ("cat", "", None),
    ("nn.functional.pad", "reflect", None),
    # windows, resampling, scans
    ("nn.functional.max_pool2d", "", None), ("nn.functional.avg_pool2d", "", None),
    ("nn.functional.interpolate", "bilinear", None), ("cumsum", "", None),
    # fused pointwise with several inputs
    ("masked_fill", "", None), ("addcmul", "", None), ("lerp", "", None),
    # found by the full sweep: 0-d loads at offsets (unbind), an in-place update of a slice in a backward graph
    # (householder), scalar loads past a 1-element dimension (chunked linear cross entropy)
    ("unbind_copy", "", ("float32",)), ("linalg.householder_product", "", ("float32",)),
    ("nn.functional.linear_cross_entropy", "chunked_none", ("float32",)),
)
# ``--subset quick`` (the test suite's run, ~1/3 of ``ci``): the same ops, one sample, float32 forward for all,
# plus the integer/bool, bf16 and backward jobs below (one or more per family).
QUICK_MAX_SAMPLES = 1
QUICK_DTYPES = {
    "floor_divide": ("float32", "int32"), "remainder": ("float32", "int32"), "fmod": ("float32", "int32"),
    "bitwise_and": ("int32", "int8"), "bitwise_right_shift": ("int64", "int8"), "abs": ("float32", "int8"),
    "lt": ("float32", "int32"), "clamp": ("float32", "int32"), "sum": ("float32", "int32", "bfloat16"),
    "argmax": ("float32", "int32"), "any": ("float32", "bool"), "all": ("int32", "bool"),
    "scatter_reduce.sum": ("float32", "int32"), "erf": ("float32", "bfloat16"),
    "nn.functional.gelu": ("float32", "bfloat16"), "var_mean": ("float32", "bfloat16"),
    "softmax": ("float32", "bfloat16"), "nn.functional.layer_norm": ("float32", "bfloat16"),
    "scatter_add": ("float32", "bfloat16"), "nn.functional.avg_pool2d": ("float32", "bfloat16"),
}
QUICK_BACKWARD = {
    "abs", "tanh", "nn.functional.gelu", "logsumexp", "softmax", "nn.functional.layer_norm",
    "nn.functional.batch_norm", "nn.functional.cross_entropy", "nn.functional.embedding", "gather", "index_put",
    "scatter_reduce.amax", "nn.functional.max_pool2d", "nn.functional.pad.reflect", "linalg.householder_product",
    "nn.functional.linear_cross_entropy.chunked_none",
}


def device_of(target: str) -> str:
    return "cuda" if target in ("cuda", "triton") else "cpu"


def op_key(name: str, variant: str) -> str:
    return f"{name}.{variant}" if variant else name


def record_id(rec: dict[str, Any]) -> tuple[str, str, str]:
    return (op_key(rec["op"], rec["variant"]), rec["dtype"], rec["direction"])


def enumerate_jobs(target: str, ops: Optional[str] = None, subset: Optional[str] = None,
                   dtypes: Optional[list[str]] = None, backward: bool = True,
                   max_samples: int = 3) -> tuple[list[dict[str, Any]], list[str]]:
    """The jobs of a run and the names of CI-subset ops missing from this torch's ``op_db``."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    device = device_of(target)
    by_key = {(o.name, o.variant_test_name): o for o in op_db}
    missing: list[str] = []
    if subset in ("ci", "quick"):
        chosen = []
        for name, variant, ci_dtypes in CI_SUBSET:
            if (name, variant) not in by_key:
                missing.append(op_key(name, variant))
            elif subset == "quick":
                chosen.append((by_key[(name, variant)], list(dtypes or QUICK_DTYPES.get(op_key(name, variant),
                                                                                       ("float32",)))))
            else:
                chosen.append((by_key[(name, variant)], list(dtypes or ci_dtypes or CI_DTYPES)))
    elif subset is None:
        chosen = [(o, list(dtypes or DEFAULT_DTYPES)) for o in op_db]
    else:
        raise ValueError(f"unknown subset {subset!r}; choose 'ci' or 'quick'")
    pattern = re.compile(ops) if ops else None
    jobs = []
    for op, wanted in chosen:
        key = op_key(op.name, op.variant_test_name)
        if pattern and not pattern.search(key):
            continue
        supported = {str(d).replace("torch.", "") for d in op.supported_dtypes(device)}
        base = {"op": op.name, "variant": op.variant_test_name, "max_samples": max_samples}
        jobs += [dict(base, dtype=d, direction="forward") for d in wanted if d in supported]
        if subset == "quick" and key not in QUICK_BACKWARD:
            continue
        if backward and op.supports_autograd and torch.float32 in op.supported_backward_dtypes(device) \
                and "float32" in supported:
            jobs.append(dict(base, dtype="float32", direction="backward"))
    return jobs, missing


WORKER = ("-m", "halide_xpu.conformance_worker")  # after sys.executable; then the target


class Worker:
    """One ``conformance_worker`` subprocess, fed one job at a time."""

    def __init__(self, target: str, log_path: Path, env: dict[str, str]) -> None:
        self.log = open(log_path, "wb")
        self.log_path = log_path
        self.proc = subprocess.Popen(
            [sys.executable, *WORKER, target], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, env=env, start_new_session=True,
        )
        self.buffer = b""
        self.job: Optional[dict[str, Any]] = None
        self.deadline = 0.0
        self.ready = False
        self.log_offset = 0
        self.sample: Optional[int] = None  # the sample the job is compiling/running

    def send(self, job: dict[str, Any], timeout_s: float) -> None:
        self.job, self.deadline, self.sample = job, time.monotonic() + timeout_s, None
        self.log.flush()
        self.log_offset = self.log_path.stat().st_size
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()

    def lines(self) -> tuple[list[dict[str, Any]], bool]:
        """Messages available now, and whether the worker's stdout closed."""
        assert self.proc.stdout is not None
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        self.buffer += chunk
        *complete, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in complete if line.strip()], not chunk

    def log_tail(self, n: int = 4000) -> str:
        """What the worker logged since the job started (faulthandler's module list dropped)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        lines = [line for line in text.splitlines() if not line.startswith("Extension modules:")]
        text = "\n".join(lines).strip()
        return text if len(text) <= n else text[: n // 2] + "\n…\n" + text[-n // 2:]

    def kill(self) -> Optional[int]:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the worker's own session: it and its compile pool
        rc = self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.log):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        return rc


def _death(rc: Optional[int]) -> str:
    if rc is not None and rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def run_jobs(target: str, jobs: list[dict[str, Any]], *, workers: int = 1, timeout_s: float = 120,
             log_dir: Path, on_record: Any = None, progress: bool = True,
             env: Optional[dict[str, str]] = None) -> list[dict[str, Any]]:
    """Run ``jobs`` on ``target`` in ``workers`` subprocesses; ``on_record(rec)`` after each result."""
    from tqdm import tqdm

    log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if env is None else env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    pending = collections.deque(jobs)
    records: list[dict[str, Any]] = []
    counts: collections.Counter = collections.Counter()
    bar = tqdm(total=len(jobs), desc=f"conformance {target}", file=sys.stderr, disable=not progress,
               dynamic_ncols=True)
    sel = selectors.DefaultSelector()
    live: list[Worker] = []
    started = 0
    startup_s = max(timeout_s, 300.0)  # importing torch + op_db + the backend

    def spawn() -> None:
        nonlocal started
        w = Worker(target, log_dir / f"{target}.worker{started}.log", env)
        started += 1
        w.deadline = time.monotonic() + startup_s
        sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        live.append(w)

    def retire(w: Worker) -> Optional[int]:
        sel.unregister(w.proc.stdout)
        live.remove(w)
        return w.kill()

    def emit(job: dict[str, Any], rec: dict[str, Any]) -> None:
        rec = {"op": job["op"], "variant": job["variant"], "dtype": job["dtype"],
               "direction": job["direction"], **rec}
        rec["class"] = rec.pop("cls")
        records.append(rec)
        counts[rec["class"]] += 1
        bar.update(1)
        bar.set_postfix({k: v for k, v in counts.items()}, refresh=False)
        if on_record:
            on_record(rec)

    def dispatch(w: Worker) -> None:
        if pending:
            w.send(pending.popleft(), timeout_s)
        else:
            w.job = None

    try:
        for _ in range(min(workers, len(pending))):
            spawn()
        while live:
            for key, _ in sel.select(timeout=1.0):
                w = key.data
                messages, closed = w.lines()
                for msg in messages:
                    if msg["event"] == "ready":
                        w.ready = True
                        dispatch(w)
                    elif msg["event"] == "sample":
                        w.sample = msg["index"]
                    elif msg["event"] == "result":
                        emit(msg["job"], msg["record"])
                        dispatch(w)
                    elif msg["event"] == "fatal":
                        raise RuntimeError(f"conformance worker for {target} cannot start: {msg['reason']}")
                if closed:
                    rc, job = retire(w), w.job
                    if not w.ready:
                        raise RuntimeError(f"conformance worker for {target} died at start ({_death(rc)}); "
                                           f"see {w.log_path}")
                    if job is not None:
                        emit(job, {"cls": "crash", "reason": f"worker died: {_death(rc)}", "sample": w.sample,
                                   "log_tail": w.log_tail()})
                    if pending:
                        spawn()
            for w in list(live):
                if w.job is None and w.ready:
                    retire(w)  # nothing left for it
                elif time.monotonic() > w.deadline:
                    job = w.job
                    retire(w)
                    if not w.ready:
                        raise RuntimeError(f"conformance worker for {target} did not start in {startup_s:.0f} s")
                    emit(job, {"cls": "timeout", "reason": f"no result in {timeout_s:.0f} s", "sample": w.sample,
                               "log_tail": w.log_tail()})
                    if pending:
                        spawn()
    finally:
        for w in list(live):
            retire(w)
        bar.close()
    return records


def summary_counts(records: list[dict[str, Any]]) -> dict[str, int]:
    c = collections.Counter(r["class"] for r in records)
    return {k: c.get(k, 0) for k in CLASSES}


def _versions() -> dict[str, str]:
    import torch

    import halide_xpu
    from halide_xpu.cache import halide_version

    commit = os.environ.get("HALIDE_XPU_COMMIT", "")  # a copied tree (the GPU machine's) names its commit
    if not commit:
        try:  # the commit the run tested, "+dirty" with local changes
            root = Path(__file__).resolve().parent.parent
            git = lambda *a: subprocess.run(["git", *a], cwd=root, capture_output=True, text=True, timeout=10)  # noqa
            commit = git("rev-parse", "--short", "HEAD").stdout.strip()
            dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
            commit = (commit + ("+dirty" if dirty else "")) or "unknown"
        except (OSError, subprocess.SubprocessError):
            commit = "unknown"
    return {"torch": torch.__version__, "halide": halide_version(), "halide_xpu": halide_xpu.__version__,
            "commit": commit}


def write_json(path: Path, target: str, records: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    records = sorted(records, key=lambda r: (record_id(r)[0], r["direction"], r["dtype"]))
    doc = {"target": target, **meta, "summary": summary_counts(records), "records": records}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def _cell(text: Any, n: int = 160) -> str:
    text = str(text).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= n else text[: n - 1] + "…"


def reason_of(rec: dict[str, Any]) -> str:
    reason = rec.get("reason", "")
    if rec["class"] == "mismatch":
        reason = f"sample {rec.get('sample')}, output {rec.get('output')}, max abs diff {rec.get('max_abs_diff')}: " \
                 + reason
    elif rec["class"] in ("crash", "timeout"):
        reason = f"sample {rec.get('sample')}: {reason}"
        if rec.get("log_tail"):
            reason += " — log: " + _telling_line(rec["log_tail"])
    elif rec["class"] == "error" and rec.get("sample") is not None:
        reason = f"sample {rec['sample']}: {reason}"
    return reason


def _telling_line(log: str) -> str:
    """The line of a dead worker's log that says most: the compiler pass it died in, else the innermost
    Python frame of the crashing thread (faulthandler), else an error line."""
    lines = [line.strip() for line in log.strip().splitlines() if line.strip()]
    passes = [line for line in lines if "Running pass" in line]
    if passes:
        return passes[-1]
    current = [i for i, line in enumerate(lines) if line.startswith("Current thread")]
    frames = [line for line in lines[current[-1] + 1:] if line.startswith('File "')] if current else []
    if frames:
        return frames[0]
    errors = [line for line in lines if "rror" in line]
    return (errors or lines or [""])[-1]


def write_markdown(path: Path, doc: dict[str, Any]) -> None:
    recs = doc["records"]
    lines = [f"# OpInfo conformance: `{doc['target']}`", "",
             f"{doc.get('date', '')} · torch {doc.get('torch')} · halide {doc.get('halide')} · "
             f"halide_xpu {doc.get('halide_xpu')} @ {doc.get('commit', '?')} · {doc.get('wall_s', '?')} s", "",
             f"`{doc.get('command', '')}`", "",
             "| class | forward | backward | total |", "|---|---:|---:|---:|"]
    n = collections.Counter((r["class"], r["direction"]) for r in recs)
    lines += [f"| {c} | {n[c, 'forward']} | {n[c, 'backward']} | {n[c, 'forward'] + n[c, 'backward']} |"
              for c in CLASSES]
    lines.append(f"| **all** | {sum(r['direction'] == 'forward' for r in recs)} | "
                 f"{sum(r['direction'] == 'backward' for r in recs)} | {len(recs)} |")
    if doc.get("missing_ops"):
        lines += ["", "Not in this torch's op_db: " + ", ".join(f"`{m}`" for m in doc["missing_ops"])]
    bad = [r for r in recs if r["class"] != "pass"]
    lines += ["", f"## Not passing ({len(bad)})", ""]
    if bad:
        lines += ["| op | dtype | direction | class | reason |", "|---|---|---|---|---|"]
        order = {c: i for i, c in enumerate(CLASSES)}
        for r in sorted(bad, key=lambda r: (order[r["class"]], record_id(r))):
            lines.append(f"| {op_key(r['op'], r['variant'])} | {r['dtype']} | {r['direction']} | {r['class']} | "
                         f"{_cell(reason_of(r))} |")
    path.write_text("\n".join(lines) + "\n")


def write_comparison(out: Path) -> Optional[Path]:
    """``summary.md``: each halide-xpu target whose anchor's JSON is in ``out``, against that anchor."""
    docs = {t: json.loads((out / f"{t}.json").read_text()) for t in TARGETS if (out / f"{t}.json").exists()}
    pairs = [(t, ANCHORS[t]) for t in TARGETS if t in ANCHORS and t in docs and ANCHORS[t] in docs]
    if not pairs:
        return None
    lines = ["# OpInfo conformance against Inductor's own backends", "",
             "Counted over the (op, dtype, direction) records both runs have.", "",
             "| target | anchor | records | pass | anchor pass | no_kernel | mismatch | error | crash | timeout | "
             "pass on anchor, not here |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    details = []
    for t, a in pairs:
        ours = {record_id(r): r for r in docs[t]["records"]}
        anchor = {record_id(r): r for r in docs[a]["records"]}
        common = sorted(set(ours) & set(anchor))
        c = collections.Counter(ours[k]["class"] for k in common)
        lost = [k for k in common if anchor[k]["class"] == "pass" and ours[k]["class"] != "pass"]
        lines.append(f"| {t} | {a} | {len(common)} | {c['pass']} | "
                     f"{sum(anchor[k]['class'] == 'pass' for k in common)} | {c['no_kernel']} | {c['mismatch']} | "
                     f"{c['error']} | {c['crash']} | {c['timeout']} | {len(lost)} |")
        details += ["", f"## `{t}`: pass on `{a}`, not on `{t}` ({len(lost)})", ""]
        if lost:
            details += ["| op | dtype | direction | class | reason |", "|---|---|---|---|---|"]
            details += [f"| {k[0]} | {k[1]} | {k[2]} | {ours[k]['class']} | {_cell(reason_of(ours[k]))} |"
                        for k in lost]
    path = out / "summary.md"
    path.write_text("\n".join(lines + details) + "\n")
    return path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", choices=TARGETS, required=True,
                   help="halide-xpu: host, opencl, sycl (cpu), cuda; Inductor's anchors: cpp (cpu), triton (cuda)")
    p.add_argument("--ops", help="regex over op names ('name' or 'name.variant')")
    p.add_argument("--subset", choices=["ci", "quick"], help="the fixed CI subset (defaults: --max-samples "
                   f"{CI_MAX_SAMPLES}, dtypes {','.join(CI_DTYPES)} where supported); quick: its ops trimmed for "
                   "the test suite (1 sample, float32 + chosen integer/bf16/backward jobs)")
    p.add_argument("--dtypes", help=f"comma-separated (default {','.join(DEFAULT_DTYPES)})")
    p.add_argument("--max-samples", type=int, help="samples per (op, dtype, direction) (default 3)")
    p.add_argument("--no-backward", action="store_true", help="forward only")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--timeout-s", type=float, default=120.0, help="per (op, dtype, direction) (default 120)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--resume", action="store_true", help="keep the records already in <out>/<target>.json")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--inductor-config", action="append", default=[], metavar="KEY=VALUE",
                   help="an Inductor config value for the workers, repeatable (force_pointwise_cat=True: the cat "
                        "lowering GPUs take, which Inductor turns off for CPU devices)")


def run(args: argparse.Namespace, command: Optional[str] = None, env: Optional[dict[str, str]] = None) -> dict:
    """Run the suite as the command line asks; returns the JSON document written to ``<out>/<target>.json``."""
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()] if args.dtypes else None
    for d in dtypes or ():
        if d not in DEFAULT_DTYPES + ("float64", "int16", "complex64"):
            raise ValueError(f"unknown dtype {d!r}")
    settings = inductor_config(getattr(args, "inductor_config", None) or [])
    if settings:
        env = {**(os.environ if env is None else env), INDUCTOR_CONFIG_ENV: json.dumps(settings)}
    max_samples = args.max_samples or {"ci": CI_MAX_SAMPLES, "quick": QUICK_MAX_SAMPLES}.get(args.subset, 3)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.target}.json"
    jobs, missing = enumerate_jobs(args.target, args.ops, args.subset, dtypes, not args.no_backward, max_samples)
    kept: dict[tuple[str, str, str], dict[str, Any]] = {}
    if args.resume and path.exists():
        kept = {record_id(r): r for r in json.loads(path.read_text())["records"]}
        jobs = [j for j in jobs if record_id(j) not in kept]
    meta = {
        **_versions(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": command or "(api)",
        "options": {"ops": args.ops, "subset": args.subset, "dtypes": dtypes, "max_samples": max_samples,
                    "backward": not args.no_backward, "timeout_s": args.timeout_s, "jobs": args.jobs,
                    "inductor_config": settings},
        "missing_ops": missing,
    }
    records = list(kept.values())
    start = time.perf_counter()

    def on_record(rec: dict[str, Any]) -> None:
        records.append(rec)
        meta["wall_s"] = round(time.perf_counter() - start, 1)
        write_json(path, args.target, records, meta)  # written as it goes: --resume after an interruption

    run_jobs(args.target, jobs, workers=max(1, args.jobs), timeout_s=args.timeout_s, log_dir=out / "tmp",
             on_record=on_record, progress=not args.quiet, env=env)
    meta["wall_s"] = round(time.perf_counter() - start, 1)
    write_json(path, args.target, records, meta)
    doc = json.loads(path.read_text())
    write_markdown(path.with_suffix(".md"), doc)
    write_comparison(out)
    return doc


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m halide_xpu conformance")
    add_arguments(p)
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    try:
        inductor_config(args.inductor_config)
    except ValueError as e:
        p.error(str(e))
    doc = run(args, command="python3 -m halide_xpu conformance " + " ".join(argv))
    print(json.dumps({"target": doc["target"], "summary": doc["summary"], "wall_s": doc.get("wall_s")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Measures schedule candidates in a worker subprocess: compile, check against the defaults, warm up, median of N.

A candidate that crashes or hangs the worker is reported as failed and the worker is restarted; the tuning run
goes on. ``HALIDE_XPU_TUNE_FAULT=crash:wg=64`` (or ``hang:...``) makes the worker die (hang) on candidates with
those tunables: the tests' way to exercise that path."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Optional

from .. import config
from ..meta import ArgSpec, KernelMeta, LoopVar, ScheduleSpec

log = logging.getLogger(__name__)

FAULT_ENV = "HALIDE_XPU_TUNE_FAULT"
_FORWARDED = ("cpu_target", "opencl_platform", "opencl_device_type", "sycl_device", "cache_dir", "asserts")


@dataclasses.dataclass
class Result:
    """One candidate's outcome: ``us`` (median per call) when it ran, else ``error``."""

    params: dict[str, int]
    us: Optional[float] = None
    error: str = ""
    compile_s: float = 0.0
    variant: str = ""
    family: str = ""  # the schedule family measured: the kernel's, or ``autoschedule:<name>``

    @property
    def ok(self) -> bool:
        return self.us is not None


def parse_meta(text: str) -> KernelMeta:
    """A ``repr(KernelMeta)`` back to the record (the generated wrapper code evaluates the same text)."""
    names = {"KernelMeta": KernelMeta, "ArgSpec": ArgSpec, "LoopVar": LoopVar, "ScheduleSpec": ScheduleSpec}
    meta = eval(text, {"__builtins__": {}}, names)  # noqa: S307 - our own repr, from our own kernel lists
    if not isinstance(meta, KernelMeta):
        raise ValueError("not a KernelMeta")
    return meta


# ---------------------------------------------------------------------------------------------- parent side
class Worker:
    """A persistent measuring subprocess; ``measure`` never raises for a bad candidate."""

    def __init__(self, timeout_s: float = 120.0) -> None:
        self.timeout_s = timeout_s
        self.proc: Optional[subprocess.Popen] = None
        self._stderr: Optional[Any] = None
        self.restarts = 0

    def _start(self) -> subprocess.Popen:
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "halide_xpu.autotune.measure"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        return self.proc

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        lines = [ln for ln in self._stderr.read().splitlines() if ln.strip()]
        return lines[-1][:200] if lines else ""

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def measure(self, meta: KernelMeta, source: str, params: dict[str, int], defaults: dict[str, int],
                reps: int = 5, min_batch_s: float = 0.01, compile_only: bool = False,
                family: Optional[str] = None) -> Result:
        """Compile and time ``params`` of ``family`` (default the kernel's; ``autoschedule:<name>`` runs a Halide
        autoscheduler) (``compile_only``: build into the kernel cache, ``us`` is 0)."""
        family = family or meta.schedule.family
        job = {"meta": repr(meta), "source": source, "params": params, "defaults": defaults, "reps": reps,
               "min_batch_s": min_batch_s, "compile_only": compile_only, "family": family,
               "config": {k: getattr(config, k) for k in _FORWARDED}}
        proc = self.proc if self.proc is not None and self.proc.poll() is None else self._start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], self.timeout_s)
            line = proc.stdout.readline() if ready else None
        except (BrokenPipeError, OSError) as e:
            line, ready = "", [str(e)]
        if line is None:
            self.close()
            self.restarts += 1
            return Result(params, error=f"timeout after {self.timeout_s:.0f}s", family=family)
        if not line:
            code = proc.wait()
            why = f"worker died ({_exit_text(code)}){': ' + self._stderr_tail() if self._stderr_tail() else ''}"
            self.close()
            self.restarts += 1
            return Result(params, error=why, family=family)
        data = json.loads(line)
        return Result(params, data.get("us"), data.get("error", ""), data.get("compile_s", 0.0), data.get("variant", ""),
                      family)

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class CompilePool:
    """``jobs`` workers that build candidates into the kernel cache in parallel; the measuring worker then loads
    them from the cache (measurements stay one at a time: parallel runs would disturb each other's timings)."""

    def __init__(self, jobs: int, timeout_s: float = 120.0) -> None:
        self.workers = [Worker(timeout_s) for _ in range(max(0, jobs))]

    def build(self, meta: KernelMeta, source: str, candidates: list[dict[str, int]], defaults: dict[str, int],
              deadline: Optional[float] = None) -> None:
        """Builds ``candidates`` (in order; none started after ``deadline``, a ``time.monotonic()`` value)."""
        if not self.workers or len(candidates) < 2:
            return
        import threading
        from concurrent.futures import ThreadPoolExecutor

        queue, lock = list(candidates), threading.Lock()

        def drain(worker: Worker) -> None:
            while True:
                with lock:
                    if not queue or (deadline is not None and time.monotonic() > deadline):
                        return
                    params = queue.pop(0)
                worker.measure(meta, source, params, defaults, compile_only=True)  # a failure shows when measured

        with ThreadPoolExecutor(len(self.workers)) as pool:
            list(pool.map(drain, self.workers))

    def close(self) -> None:
        for w in self.workers:
            w.close()


def _exit_text(code: Optional[int]) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"


# ---------------------------------------------------------------------------------------------- worker side
def _storage_elements(arg: ArgSpec, meta: KernelMeta) -> int:
    """Elements a call argument's buffer spans, over every argument aliasing it; static layouts only."""
    size = 1
    for a in meta.args:
        if a.name != arg.name and a.alias_of != arg.name:
            continue
        try:
            shape, stride, offset = [int(e) for e in a.shape], [int(s) for s in a.stride], int(a.offset)
        except ValueError:
            raise ValueError(f"dynamic layout of {a.name}: tuning needs static shapes") from None
        if 0 in shape:
            continue
        size = max(size, offset + 1 + sum((e - 1) * abs(s) for e, s in zip(shape, stride)))
    return size


class _Bench:
    """The worker's buffers for one kernel (same seed for every candidate) and its reference outputs."""

    def __init__(self, meta: KernelMeta) -> None:
        import torch

        self.torch = torch
        self.meta = meta
        self.device = {"cuda": "cuda", "xpu": "xpu"}.get(meta.device_type, "cpu")
        self.reference: Optional[list[Any]] = None
        if meta.target == "sycl" and self.device == "cpu":  # the emulation's tensors: USM of its queue, kept open
            from .. import usm

            self._usm = usm.usm_tensors()
            self._usm.__enter__()

    def inputs(self) -> list[Any]:
        torch = self.torch
        gen = torch.Generator().manual_seed(0)
        args: list[Any] = []
        for a in self.meta.call_args:
            if a.kind == "scalar":
                raise ValueError(f"size argument {a.name}: tuning needs static shapes")
            n = _storage_elements(a, self.meta)
            dtype = getattr(torch, a.dtype)
            if dtype.is_floating_point and a.kind == "in":
                t = torch.randn(n, generator=gen).to(dtype)
            else:  # integer inputs (indices) stay 0: in bounds for any gather
                t = torch.zeros(n, dtype=dtype)
            args.append(self._place(t))
        if self.meta.takes_stream:
            args.append(self._stream())
        return args

    def _place(self, t: Any) -> Any:
        return t.to(self.device)

    def _stream(self) -> int:
        torch = self.torch
        if self.device == "cuda":
            return torch.cuda.current_stream().cuda_stream
        return torch.xpu.current_stream().sycl_queue

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()
        elif self.device == "xpu":
            self.torch.xpu.synchronize()

    def outputs(self, args: list[Any]) -> list[Any]:
        outs = [i for i, a in enumerate(self.meta.call_args) if a.kind == "out" or a.name in self.meta.inplace]
        return [args[i].detach().cpu().clone() for i in outs]

    def check(self, args: list[Any]) -> str:
        """'' when ``args``' outputs match the defaults' (the first call of this kernel in this worker)."""
        got = self.outputs(args)
        if self.reference is None:
            self.reference = got
            return ""
        for want, have in zip(self.reference, got):
            if not outputs_match(want, have):
                return "wrong result: outputs differ from the default schedule's"
        return ""


def outputs_match(want: Any, have: Any) -> bool:
    """A candidate's output against the defaults': element-wise close, or, where only sums with cancellation
    differ, close at the output's scale. Another work-group size or atomic accumulation order rounds a sum of
    thousands of terms differently, and an element that cancels to near zero then misses an element-wise
    tolerance (the H200: 1 of 16M elements of an embedding gradient off by 0.0078 where the largest is 532; the
    default schedule itself differed by 1.2e-4 between two runs). A wrong index or a lost update moves the
    norm-wise error by orders of magnitude more than the 1e-4 (16-bit: 2e-3) allowed here."""
    import torch

    loose = want.dtype in (torch.float16, torch.bfloat16)
    rtol, atol = (2e-2, 2e-2) if loose else (1e-3, 1e-4)
    want, have = want.double(), have.double()
    if torch.allclose(have, want, rtol=rtol, atol=atol, equal_nan=True):
        return True
    if not want.is_floating_point() or not bool((want.isnan() == have.isnan()).all()):  # empty: allclose above
        return False
    want, have = torch.nan_to_num(want, nan=0.0), torch.nan_to_num(have, nan=0.0)
    if not bool(torch.isfinite(want).all() and torch.isfinite(have).all()):
        return False
    diff, scale = (have - want).abs(), want.abs().max()
    return bool(diff.max() <= rtol * scale and diff.norm() <= rtol / 10 * want.norm())


def _fault(params: dict[str, int]) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    if ":" not in spec:
        return
    how, cond = spec.split(":", 1)
    want = {k.strip(): int(v) for k, v in (kv.split("=", 1) for kv in cond.split(",") if kv.strip())}
    if want and all(params.get(k) == v for k, v in want.items()):
        if how == "hang":
            time.sleep(3600)
        os.kill(os.getpid(), signal.SIGKILL)


def time_call(call: Callable[[], None], sync: Callable[[], None], reps: int, min_batch_s: float) -> float:
    """Median seconds per call over ``reps`` batches, each at least ``min_batch_s``, after warm-up."""
    for _ in range(2):
        call()
    sync()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        sync()
        if time.perf_counter() - t0 >= min_batch_s or n >= 1 << 14:
            break
        n *= 2
    runs = []
    for _ in range(max(1, reps)):
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        sync()
        runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs)


def run_job(job: dict[str, Any], benches: dict[str, _Bench]) -> dict[str, Any]:
    from .. import compiler

    for k, v in job.get("config", {}).items():
        if getattr(config, k) != v:
            setattr(config, k, v)
    meta = parse_meta(job["meta"])
    source = job["source"]
    family = job.get("family") or meta.schedule.family
    if job.get("compile_only"):
        params = {str(k): int(v) for k, v in job["params"].items()}
        _fault(params)
        t0 = time.perf_counter()
        spec = ScheduleSpec(family, tuple(sorted(params.items())))
        launcher = compiler.load(dataclasses.replace(meta, schedule=spec), source)
        return {"us": 0.0, "compile_s": time.perf_counter() - t0, "variant": launcher.variant}
    bench = benches.setdefault(job["meta"] + source, _Bench(meta))
    if bench.reference is None and (job["params"] != job["defaults"] or family != meta.schedule.family):
        ref = run_job({**job, "params": job["defaults"], "family": None}, benches)  # the defaults' outputs first
        if ref.get("error"):
            return {"error": f"default schedule failed: {ref['error']}"}
    params = {str(k): int(v) for k, v in job["params"].items()}
    _fault(params)
    meta = dataclasses.replace(meta, schedule=ScheduleSpec(family, tuple(sorted(params.items()))))
    t0 = time.perf_counter()
    launcher = compiler.load(meta, source)
    compile_s = time.perf_counter() - t0
    args = bench.inputs()
    launcher(*args)
    bench.sync()
    wrong = bench.check(args)
    if wrong:
        return {"error": wrong, "compile_s": compile_s}
    seconds = time_call(lambda: launcher(*args), bench.sync, int(job.get("reps", 5)), float(job.get("min_batch_s", 0.01)))
    return {"us": seconds * 1e6, "compile_s": compile_s, "variant": launcher.variant}


def worker_main() -> int:
    """Reads one JSON job per line on stdin, answers one JSON line each; stdout is the protocol channel only."""
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # prints of Halide, compilers or libraries go to stderr
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    benches: dict[str, _Bench] = {}
    for line in sys.stdin:
        try:
            reply = run_job(json.loads(line), benches)
        except Exception as e:  # noqa: BLE001 - a candidate Halide rejects, a kernel error: that candidate failed
            text = str(e).strip().splitlines()
            reply = {"error": f"{type(e).__name__}: {text[-1][:300] if text else ''}"}
        channel.write(json.dumps(reply) + "\n")
        channel.flush()
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())

"""``python -m halide_xpu tune``: collect kernels, coordinate-descent search per kernel, store the best per device."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import logging
import lzma
import re
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from .. import config
from ..meta import KernelMeta
from . import database, equivalence, space
from .measure import CompilePool, Result, Worker, parse_meta

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
MIN_GAIN = 0.03  # a candidate replaces the best only when this much faster: below it is this machine's noise


@dataclasses.dataclass
class Kernel:
    """One kernel to tune: where it came from, its default metadata and its algorithm source."""

    name: str
    meta: KernelMeta
    source: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "meta": repr(self.meta), "source": self.source}


# ---------------------------------------------------------------------------------------------- collection
@contextlib.contextmanager
def capturing() -> Iterator[list[tuple[KernelMeta, str]]]:
    """Records every kernel halide-xpu loads while active (``compiler.load`` is what generated code calls)."""
    from .. import compiler

    seen: list[tuple[KernelMeta, str]] = []
    real = compiler.load

    def load(meta: KernelMeta, source: str) -> Any:
        seen.append((meta, source))
        return real(meta, source)

    compiler.load = load
    try:
        yield seen
    finally:
        compiler.load = real


def _bench_module(name: str) -> Any:
    """``benchmarks/<name>.py`` of the source checkout, imported."""
    path = REPO / "benchmarks" / f"{name}.py"
    if not path.exists():
        raise SystemExit(f"--suite/--model need a source checkout: {path} not found (use --kernels FILE)")
    spec = importlib.util.spec_from_file_location(f"halide_xpu_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def suite_cases(names: Optional[list[str]] = None) -> list[tuple[str, Callable[..., Any], Callable[[int], tuple]]]:
    """(name, fn, make_inputs) of ``benchmarks/kernels.py`` (a source checkout's), optionally only ``names``."""
    cases = [(n, fn, make) for n, _family, fn, make in _bench_module("kernels").suite()]
    if names:
        unknown = set(names) - {c[0] for c in cases}
        if unknown:
            raise SystemExit(f"unknown suite kernels: {sorted(unknown)}; known: {[c[0] for c in cases]}")
        cases = [c for c in cases if c[0] in names]
    return cases


def model_cases(names: Optional[list[str]], scale: int) -> list[tuple[str, Callable[..., Any], Callable[[int], tuple]]]:
    """(name, module, inputs) of ``benchmarks/models.py`` (fp32, inputs shrunk by ``scale``), optionally ``names``."""
    import torch

    models = _bench_module("models")
    cases = []
    for name, build in models.suite():
        if names and name not in names:
            continue
        module, inputs = build(scale, torch.float32)
        cases.append((name, module, lambda _size, inputs=inputs: inputs))
    if names and len(cases) != len(set(names)):
        raise SystemExit(f"unknown models in {names}; known: {[n for n, _ in models.suite()]}")
    return cases


_BACKEND_KNOB = {"cpu": {"cpu_backend": "halide_xpu"}, "cuda": {"cuda_backend": "halide_xpu"}, "xpu": {"xpu_backend": "halide"}}


def collect(cases: list[tuple[str, Callable[..., Any], Callable[[int], tuple]]], size: int,
            device: str = "cpu") -> list[Kernel]:
    """Compile each case with torch.compile (halide-xpu, database off) on ``device`` (cpu: ``cpu_target``'s
    kernels; cuda, xpu: the GPU's) and keep its kernels, deduplicated."""
    import torch

    found: list[Kernel] = []
    keys: set[tuple[str, str]] = set()
    mode = config.autotune
    config.autotune = "off"  # the default tunables are what a record is measured against
    try:
        for name, fn, make in cases:
            torch._dynamo.reset()
            inputs = make(size)
            if device != "cpu":
                inputs = tuple(t.to(device) for t in inputs)
                fn = fn.to(device) if isinstance(fn, torch.nn.Module) else fn
            with contextlib.ExitStack() as scope:
                if device == "cpu" and config.resolved_cpu_target == "sycl":  # the emulation's tensors live in USM
                    from .. import usm

                    scope.enter_context(usm.usm_tensors())
                    inputs = tuple(usm.to_usm(t) for t in inputs)
                seen = scope.enter_context(capturing())
                scope.enter_context(torch.no_grad())
                scope.enter_context(torch._inductor.config.patch(fx_graph_cache=False, **_BACKEND_KNOB[device]))
                try:
                    torch.compile(fn, fullgraph=True)(*inputs)
                except Exception as e:  # noqa: BLE001 - one case failing to compile does not stop the others
                    log.warning("halide_xpu tune: %s does not compile (%s: %s); skipped", name, type(e).__name__, e)
                    continue
            for i, (meta, source) in enumerate(seen):
                key = (repr(meta), source)
                if key not in keys:
                    keys.add(key)
                    found.append(Kernel(name if len(seen) == 1 else f"{name}#{i}", meta, source))
    finally:
        config.autotune = mode
        torch._dynamo.reset()
    return found


def load_kernels(path: Path) -> list[Kernel]:
    """A saved kernel list: JSON lines of ``{"name", "meta" (repr of KernelMeta), "source"}`` (``.xz``-compressed
    too)."""
    out = []
    text = lzma.open(path, "rt").read() if path.suffix == ".xz" else path.read_text()
    for i, line in enumerate(text.splitlines()):
        if line.strip():
            d = json.loads(line)
            out.append(Kernel(d.get("name", f"{path.stem}#{i}"), parse_meta(d["meta"]), d["source"]))
    return out


def save_kernels(kernels: list[Kernel], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(k.to_json()) + "\n" for k in kernels))


# ---------------------------------------------------------------------------------------------- search
@dataclasses.dataclass
class Outcome:
    """A kernel's tuning result: the record written (or why none), for the before/after table."""

    kernel: str
    signature: str
    status: str  # tuned | cached | failed | skipped
    record: Optional[database.Record] = None
    note: str = ""
    results: list[Result] = dataclasses.field(default_factory=list)  # every candidate measured, in order


def _caps(meta: KernelMeta) -> Any:
    from ..target import targets

    return targets.device_caps(meta.target, meta.device_type, meta.device_index)


def search(kernel: Kernel, worker: Worker, budget_s: float, reps: int = 5,
           on_result: Callable[[Result], None] = lambda r: None, pool: Optional[CompilePool] = None,
           autoschedulers: bool = True) -> tuple[Optional[database.Record], list[Result]]:
    """Screening, then coordinate descent: every single change from the defaults is measured and the winners of
    several tunables combined; then each tunable in turn takes its best value (a candidate that looks faster is
    measured again next to the best), until a pass changes nothing or ``budget_s`` is spent; then Halide's
    autoschedulers as whole-schedule candidates (budget left). The winner is re-measured against the defaults,
    back to back, before it is kept. With a ``pool`` the candidates are compiled in parallel first: every tunable's
    values from the defaults at once (compiles, not timings, bound a GPU kernel's search), then, once the best has
    moved, one tunable's at a time."""
    t_end = time.monotonic() + budget_s
    defaults = dict(kernel.meta.schedule.params)
    caps = _caps(kernel.meta)
    dims = space.search_space(kernel.meta, caps)
    results: list[Result] = []

    def run(params: dict[str, int], family: Optional[str] = None) -> Result:
        r = worker.measure(kernel.meta, kernel.source, params, defaults, reps, family=family)
        results.append(r)
        on_result(r)
        return r

    base = run(defaults)
    if not base.ok:
        return None, results
    warm = run(defaults)  # a fresh worker's first timing runs slow (thread pools, caches): the defaults twice
    best, best_us, scheduler = dict(defaults), min(base.us, warm.us if warm.ok else base.us), ""

    def fastest(params: dict[str, int], family: str) -> float:
        return min(r.us for r in results if r.ok and r.params == params and r.family == family)

    def beats(r: Result) -> Optional[float]:
        """``r``'s time when it beats the best so far, checked by measuring both again back to back (the load
        of a shared machine drifts over seconds: one faster sample is not enough); else None."""
        nonlocal best_us
        if not r.ok or r.us >= best_us * (1 - MIN_GAIN):
            return None
        again_best = run(best, f"autoschedule:{scheduler}" if scheduler else None)
        again = run(r.params, r.family)
        if again_best.ok:
            best_us = again_best.us
        if again.ok and again.us < best_us * (1 - MIN_GAIN):
            return again.us
        return None

    tried = {tuple(sorted(defaults.items()))}
    built = set(tried)  # candidates the pool was given (a build already in the kernel cache is not sent again)
    prints: dict[tuple, Optional[str]] = {}
    first: dict[str, tuple] = {}  # schedule fingerprint -> the first candidate that had it
    equivalent: set[tuple] = set()

    def same_schedule(cand: dict[str, int]) -> bool:
        """Whether ``cand`` builds the schedule of an earlier candidate (a tunable its form does not read)."""
        key = tuple(sorted(cand.items()))
        if key not in prints:
            prints[key] = equivalence.fingerprint(equivalence.with_params(kernel.meta, cand), kernel.source, caps)
        fp = prints[key]
        if fp is None or first.setdefault(fp, key) == key:
            return False
        equivalent.add(key)
        return True

    same_schedule(defaults)

    def fresh(cand: dict[str, int]) -> bool:
        """Whether ``cand`` is to be measured: not tried before, budget left, not an earlier one's schedule; marks
        it tried."""
        key = tuple(sorted(cand.items()))
        if key in tried or time.monotonic() > t_end:
            return False
        tried.add(key)
        return not same_schedule(cand)

    def build(candidates: list[dict[str, int]]) -> None:
        todo = [c for c in candidates if tuple(sorted(c.items())) not in built and not same_schedule(c)]
        built.update(tuple(sorted(c.items())) for c in todo)
        if pool is not None and time.monotonic() < t_end:
            pool.build(kernel.meta, kernel.source, todo, defaults, deadline=t_end)

    # the first pass's candidates while nothing beat the defaults: built at once, the pool full
    build([{**defaults, d.name: v} for d in dims for v in d.values])
    # screening: every single change from the defaults measured first, then the tunables whose best value beat the
    # defaults combined. Coordinate descent alone follows the first tunable that wins and measures the others'
    # values only from there (GPT-2's padded logits gradient on the H200: wg=64 won first, 0.91x; vector=2 from the
    # defaults, 0.81x in a sweep, was never measured)
    winners: dict[str, Result] = {}
    for dim in dims:
        for value in dim.values:
            cand = {**defaults, dim.name: value}
            if not fresh(cand):
                continue
            r = run(cand)
            if r.ok and r.us < best_us * (1 - MIN_GAIN) and (dim.name not in winners or r.us < winners[dim.name].us):
                winners[dim.name] = r
    ranked = sorted(winners.values(), key=lambda r: r.us)
    us = beats(ranked[0]) if ranked else None
    if us is not None:
        best, best_us = ranked[0].params, us
    combined = {**defaults, **{name: r.params[name] for name, r in winners.items()}}
    if len(ranked) > 1 and fresh(combined):
        us = beats(run(combined))
        if us is not None:
            best, best_us = combined, us
    for _ in range(2):
        changed = False
        for dim in dims:
            build([{**best, dim.name: v} for v in dim.values])
            for value in dim.values:
                cand = {**best, dim.name: value}
                if not fresh(cand):
                    continue
                us = beats(run(cand))
                if us is not None:
                    best, best_us, changed = cand, us, True
        if not changed or time.monotonic() > t_end:
            break
    explicit = {d.name: best[d.name] for d in dims}
    for name in space.autoschedulers(kernel.meta, caps) if autoschedulers else ():
        if time.monotonic() > t_end:
            break
        us = beats(run({"parallelism": caps.parallelism}, f"autoschedule:{name}"))
        if us is not None:
            best, best_us, scheduler = {"parallelism": caps.parallelism}, us, name
    family = f"autoschedule:{scheduler}" if scheduler else kernel.meta.schedule.family
    if best != defaults or scheduler:  # confirm: the defaults and the winner measured again, back to back
        run(defaults)
        run(best, family)
    default_us = fastest(defaults, kernel.meta.schedule.family)  # best of every measurement of each
    best_us = fastest(best, family)
    if best_us > default_us * (1 - MIN_GAIN / 2):
        explicit, best_us, scheduler = {d.name: defaults[d.name] for d in dims}, default_us, ""
    extents = tuple(v.static_extent or 0 for v in kernel.meta.loop_vars)
    record = database.Record(best if scheduler else explicit, round(best_us, 3), round(default_us, 3), kernel.name,
                             extents, candidates=len(results), failed=sum(not r.ok for r in results),
                             scheduler=scheduler, equivalent=len(equivalent))
    if equivalent:
        log.info("halide_xpu tune: %s: %d candidates not measured (the schedule of one that was)", kernel.name,
                 len(equivalent))
    return record, results


def tune_kernels(kernels: list[Kernel], db: database.ScheduleDB, budget_s: float, budget_kernel_s: float,
                 force: bool = False, reps: int = 5, timeout_s: float = 120.0, progress: bool = True,
                 jobs: int = 1, autoschedulers: bool = True) -> list[Outcome]:
    """Tune each kernel not yet in the database, or whose record lacks a tunable of today's search space (all with
    ``force``), within the budgets; records written as they finish, so an interrupted run resumes where it stopped."""
    outcomes: list[Outcome] = []
    t_end = time.monotonic() + budget_s
    bar = _progress(len(kernels), progress)
    pool = CompilePool(jobs, timeout_s) if jobs > 1 else None
    with Worker(timeout_s) as worker, contextlib.closing(pool or CompilePool(0)):
        for k in kernels:
            sig = database.signature(k.meta, k.source)
            key = database.device_key(k.meta.target, k.meta.device_type, k.meta.device_index)
            bar.set_description(k.name[:24])
            existing = db.get(key, sig)
            stale = existing is not None and space.missing_tunables(k.meta, existing.record.params,
                                                                     existing.record.scheduler)
            if stale:  # tuned before these tunables existed: measured under other schedules, tuned again
                log.info("halide_xpu tune: %s: the record lacks %s; tuned again", k.name, ", ".join(stale))
            if existing is not None and not force and not stale:
                outcomes.append(Outcome(k.name, sig.key, "cached", existing.record))
            elif time.monotonic() > t_end:
                outcomes.append(Outcome(k.name, sig.key, "skipped", note="run budget spent"))
            else:
                left = min(budget_kernel_s, t_end - time.monotonic())
                record, results = search(k, worker, left, reps, lambda r: bar.set_postfix_str(_short(r)), pool,
                                         autoschedulers)
                if record is None:
                    err = results[0].error if results else "not measured"
                    outcomes.append(Outcome(k.name, sig.key, "failed", note=f"default schedule: {err}", results=results))
                else:
                    db.put(key, sig, record)
                    errors = sorted({r.error.split(':')[0] for r in results if not r.ok})
                    outcomes.append(Outcome(k.name, sig.key, "tuned", record, "; ".join(errors), results))
            bar.update(1)
    bar.close()
    return outcomes


def _short(r: Result) -> str:
    params = ",".join(f"{k}={v}" for k, v in sorted(r.params.items()))[:40]
    return f"{params}: " + (f"{r.us:.1f}us" if r.ok else f"failed {r.error[:30]}")


class _NoBar:
    def set_description(self, *_: Any) -> None: ...
    def set_postfix_str(self, *_: Any) -> None: ...
    def update(self, *_: Any) -> None: ...
    def close(self) -> None: ...


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, unit="kernel")


_untunable: set[str] = set()


def tune_at_compile(meta: KernelMeta, source: str, key: database.DeviceKey,
                    sig: database.Signature) -> Optional[database.Hit]:
    """``config.autotune = "max"``: tune a kernel the database lacks now, within ``config.autotune_budget_s``,
    into the first database directory."""
    if sig.key in _untunable or any(v.static_extent is None for v in meta.loop_vars):
        return None  # dynamic shapes, or failed before in this process: defaults, without a new attempt
    directory = database.db_paths()[0]
    kernel = Kernel(f"compile:{sig.algorithm}", meta, source)
    log.warning("halide_xpu: tuning kernel %s (autotune=max, up to %.0fs)", sig.key, config.autotune_budget_s)
    with Worker() as worker:
        record, results = search(kernel, worker, config.autotune_budget_s)
    if record is None:
        log.warning("halide_xpu: tuning %s failed (%s); default schedule", sig.key, results[0].error if results else "?")
        _untunable.add(sig.key)
        return None
    path = database.ScheduleDB(directory).put(key, sig, record)
    return database.Hit(sig, record, path)


# ---------------------------------------------------------------------------------------------- report
def _geomean(xs: list[float]) -> float:
    return statistics.geometric_mean(xs) if xs else float("nan")


def report(outcomes: list[Outcome], key: database.DeviceKey, defaults: dict[str, dict[str, int]]) -> tuple[str, dict]:
    """The before/after table (markdown) and its JSON."""
    lines = [f"# Schedule tuning on {key}", "",
             "| kernel | signature | default µs | tuned µs | speedup | tunables changed | candidates (failed) + same schedule | status |",
             "|---|---|---:|---:|---:|---|---:|---|"]
    speedups = []
    for o in outcomes:
        r = o.record
        if r is None:
            lines.append(f"| {o.kernel} | `{o.signature}` | | | | | | {o.status}: {o.note} |")
            continue
        base = defaults.get(o.kernel, {})
        changed = r.changes(base)
        if r.speedup:
            speedups.append(r.speedup)
        lines.append(f"| {o.kernel} | `{o.signature}` | {r.default_us or 0:.1f} | {r.time_us or 0:.1f} | "
                     f"{r.speedup or 0:.2f}x | {changed} | {r.candidates} ({r.failed}) + {r.equivalent} | {o.status}"
                     f"{': ' + o.note if o.note else ''} |")
    geo = f"{_geomean(speedups):.3f}x" if speedups else "n/a"
    lines += ["", f"geomean speedup over the defaults: {geo} ({len(speedups)} kernels)", ""]
    data = {"device": dataclasses.asdict(key), "geomean_speedup": _geomean(speedups) if speedups else None,
            "kernels": [{"kernel": o.kernel, "signature": o.signature, "status": o.status, "note": o.note,
                         "record": o.record.to_json() if o.record else None,
                         "candidates": [{"family": r.family, "params": r.params, "us": r.us, "error": r.error,
                                         "variant": r.variant, "compile_s": round(r.compile_s, 3)} for r in o.results]}
                        for o in outcomes]}
    return "\n".join(lines), data


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--suite", nargs="?", const="all", help="benchmarks/kernels.py cases: all, or names a,b,c")
    src.add_argument("--model", help="benchmarks/models.py models, names a,b,c or all (fp32, see --scale)")
    src.add_argument("--kernels", type=Path, help="a saved kernel list (JSON lines, see --save-kernels)")
    parser.add_argument("--size", type=int, default=1024, help="suite input size (matrix side)")
    parser.add_argument("--scale", type=int, default=8, help="--model inputs shrunk by this (1: the GPU size)")
    parser.add_argument("--target", choices=["host", "opencl", "sycl", "cuda", "xpu"],
                        help="host/opencl/sycl: cpu tensors on that cpu_target; cuda, xpu: the GPU's tensors")
    parser.add_argument("--db", type=Path, help="database directory written (default: the first of schedule_db)")
    parser.add_argument("--budget-s", type=float, default=600.0, help="time for the whole run")
    parser.add_argument("--budget-kernel-s", type=float, default=30.0, help="time per kernel")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="a candidate taking longer has failed")
    parser.add_argument("--reps", type=int, default=5, help="timed batches per candidate (median)")
    parser.add_argument("--force", action="store_true", help="tune kernels the database already has")
    parser.add_argument("--jobs", type=int, default=1, help="compile candidates in this many parallel workers")
    parser.add_argument("--no-autoschedulers", action="store_true", help="no Halide autoscheduler candidates")
    parser.add_argument("--save-kernels", type=Path, help="write the collected kernels as a --kernels list")
    parser.add_argument("--out", type=Path, help="tune.md/tune.json directory (default benchmarks/results/<device>)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--evaluate", action="store_true",
                        help="no tuning: each kernel's defaults vs the record the database (--db, else schedule_db) "
                             "has for its signature, measured back to back (kernels not tuned: other shapes)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m halide_xpu tune", description=__doc__)
    add_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    device = args.target if args.target in ("cuda", "xpu") else "cpu"
    if args.target and device == "cpu":
        config.cpu_target = args.target
    t0 = time.monotonic()
    if args.kernels:
        kernels = load_kernels(args.kernels)
    elif args.model:
        kernels = collect(model_cases(None if args.model == "all" else args.model.split(","), args.scale), args.size, device)
    else:
        kernels = collect(suite_cases(None if args.suite == "all" else args.suite.split(",")), args.size, device)
    if args.save_kernels:
        save_kernels(kernels, args.save_kernels)
    if not kernels:
        print("no kernels to tune")
        return 1
    m = kernels[0].meta
    key = database.device_key(m.target, m.device_type, m.device_index)
    out = args.out or REPO / "benchmarks" / "results" / re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{key.target}_{key.name}")
    if args.evaluate:
        from .evaluate import evaluate, report as eval_report

        bar = _progress(len(kernels), not args.no_progress)
        rows = evaluate(kernels, [args.db] if args.db else database.db_paths(), args.reps, args.timeout_s,
                        budget_s=args.budget_s, progress=bar)
        bar.close()
        text, data = eval_report(rows, str(key))
        print(text)
        out.mkdir(parents=True, exist_ok=True)
        (out / "evaluate.md").write_text(text)
        (out / "evaluate.json").write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {out / 'evaluate.md'} and evaluate.json")
        return 0 if data["summary"]["measured"] else 1
    db = database.ScheduleDB(args.db or database.db_paths()[0])
    print(f"tuning {len(kernels)} kernels on {key} into {db.path_for(key)} (collected in {time.monotonic() - t0:.0f}s)")
    budget = max(0.0, args.budget_s - (time.monotonic() - t0))
    outcomes = tune_kernels(kernels, db, budget, args.budget_kernel_s, args.force, args.reps, args.timeout_s,
                            not args.no_progress, args.jobs, not args.no_autoschedulers)
    text, data = report(outcomes, key, {k.name: dict(k.meta.schedule.params) for k in kernels})
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.md").write_text(text)
    (out / "tune.json").write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out / 'tune.md'} and tune.json; records in {db.path_for(key)}")
    return 0 if any(o.status in ("tuned", "cached") for o in outcomes) else 1

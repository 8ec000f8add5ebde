"""``tune --evaluate``: the schedule database on kernels it was not tuned on: defaults vs the record each finds."""
from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any, Optional

from . import database
from .measure import Result, Worker


@dataclasses.dataclass
class Row:
    """One kernel: the record its signature found (or none) and the best time of each side."""

    kernel: str
    signature: str
    record: str = ""  # the record's tunables (or autoscheduler), "" without one
    default_us: Optional[float] = None
    record_us: Optional[float] = None
    note: str = ""

    @property
    def speedup(self) -> Optional[float]:
        if self.default_us and self.record_us:
            return self.default_us / self.record_us
        return None


def _best(results: list[Result]) -> Optional[float]:
    times = [r.us for r in results if r.ok and r.us]
    return min(times) if times else None


def evaluate(kernels: list[Any], paths: list[Path], reps: int = 5, timeout_s: float = 120.0, rounds: int = 2,
             budget_s: float = 600.0, progress: Any = None) -> list[Row]:
    """Each kernel with a record in ``paths``: defaults and record measured defaults, record, record, defaults
    (``rounds`` times; a shared machine's drift hits both alike), best of each. Kernels without a record are
    listed, not measured."""
    rows: list[Row] = []
    t_end = time.monotonic() + budget_s
    with Worker(timeout_s) as worker:
        for k in kernels:
            meta = k.meta
            key = database.device_key(meta.target, meta.device_type, meta.device_index)
            sig = database.signature(meta, k.source)
            hit = database.lookup(key, sig, paths)
            row = Row(k.name, sig.key)
            rows.append(row)
            if progress is not None:
                progress.update(1)
            if hit is None:
                row.note = "no record for this signature"
                continue
            defaults = dict(meta.schedule.params)
            spec = database.record_spec(meta, hit.record)  # what a compile with this record builds
            params, family = dict(spec.params), spec.family
            row.record = hit.record.changes(defaults)
            if time.monotonic() > t_end:
                row.note = "budget spent"
                continue
            base: list[Result] = [worker.measure(meta, k.source, defaults, defaults, reps)]  # warms the worker up
            tuned: list[Result] = []
            for _ in range(rounds):
                base.append(worker.measure(meta, k.source, defaults, defaults, reps))
                tuned.append(worker.measure(meta, k.source, params, defaults, reps, family=family))
                tuned.append(worker.measure(meta, k.source, params, defaults, reps, family=family))
                base.append(worker.measure(meta, k.source, defaults, defaults, reps))
            row.default_us, row.record_us = _best(base[1:]), _best(tuned)
            errors = sorted({r.error.split(":")[0] for r in base + tuned if not r.ok})
            row.note = "; ".join(errors)
    return rows


def _geomean(xs: list[float]) -> Optional[float]:
    return statistics.geometric_mean(xs) if xs else None


def report(rows: list[Row], key: str) -> tuple[str, dict[str, Any]]:
    """Markdown table and JSON: per kernel, then geomean over kernels whose record changes a tunable, over every
    kernel with a record, and the summed times."""
    changed = [r.speedup for r in rows if r.speedup and r.record != "(defaults)"]
    found = [r.speedup for r in rows if r.speedup]
    total_default = sum(r.default_us for r in rows if r.speedup and r.default_us)
    total_record = sum(r.record_us for r in rows if r.speedup and r.record_us)
    summary = {"kernels": len(rows), "with_record": sum(bool(r.record) for r in rows), "measured": len(found),
               "geomean_changed": _geomean(changed), "changed": len(changed), "geomean_all": _geomean(found),
               "sum_default_us": round(total_default, 1), "sum_record_us": round(total_record, 1)}
    fmt = lambda x: f"{x:.3f}x" if x else "n/a"  # noqa: E731
    lines = [f"# Schedule records on kernels not tuned ({key})", "",
             f"{summary['kernels']} kernels, {summary['with_record']} found a record; records that change a tunable: "
             f"{summary['changed']}, geomean {fmt(summary['geomean_changed'])}; every measured record: geomean "
             f"{fmt(summary['geomean_all'])}; summed {total_default:.1f} us default vs {total_record:.1f} us with records.",
             "", "| kernel | signature | record | default µs | record µs | speedup | note |",
             "|---|---|---|---:|---:|---:|---|"]
    for r in sorted(rows, key=lambda r: -(r.default_us or 0)):
        lines.append(f"| {r.kernel[:90]} | `{r.signature}` | {r.record} | {r.default_us or 0:.1f} | "
                     f"{r.record_us or 0:.1f} | {fmt(r.speedup)} | {r.note} |")
    return "\n".join(lines) + "\n", {"summary": summary, "rows": [dataclasses.asdict(r) for r in rows]}

"""Compile-time use of the schedule database: a record's tunables replace the defaults, shown in the kernel source."""
from __future__ import annotations

import dataclasses
import logging
from typing import Optional

from .. import config, stats
from ..meta import KernelMeta
from . import database, space

log = logging.getLogger(__name__)

COMMENT = "# schedule record:"
_failed: list[str] = []  # warned once per process


def mode() -> str:
    """``config.autotune``; Inductor's ``max_autotune`` turns ``db`` into ``max``."""
    if config.autotune == "db":
        try:
            import torch._inductor.config as inductor_config

            if inductor_config.max_autotune:
                return "max"
        except ImportError:  # pragma: no cover - torch is always there at compile time
            pass
    return config.autotune


def find(meta: KernelMeta, source: str) -> Optional[database.Hit]:
    """The record for this kernel on its device (tuned now in ``max`` mode when the database has none)."""
    how = mode()
    if how == "off" or meta.schedule.family.startswith("autoschedule:"):
        return None
    try:
        key = database.device_key(meta.target, meta.device_type, meta.device_index)
    except Exception as e:  # noqa: BLE001 - no device key, no records: the defaults are used
        log.debug("schedule database: no device key for %s (%s)", meta.target, e)
        return None
    sig = database.signature(meta, source)
    hit = database.lookup(key, sig)
    if hit is None and how == "max":
        from . import tune  # the search: only imported when tuning

        hit = tune.tune_at_compile(meta, source, key, sig)
    return hit


def apply(meta: KernelMeta, source: str) -> tuple[KernelMeta, str]:
    """``(meta, source)`` with a database record's tunables applied and named in a comment line of the source
    (which is part of the kernel cache key, like the tunables in ``meta``); unchanged without a record."""
    try:
        hit = find(meta, source)
    except Exception as e:  # noqa: BLE001 - a database problem never fails a compile: the defaults are used
        if not _failed:
            _failed.append(str(e))
            log.warning("halide_xpu: schedule database lookup failed (%s: %s); default schedules", type(e).__name__, e)
        return meta, source
    if hit is None:
        return meta, source
    missing = space.missing_tunables(meta, hit.record.params, hit.record.scheduler)
    if missing:
        stats.counters["stale_schedule_records"] += 1
        log.info("halide_xpu: schedule record %s from %s predates tunables %s of this kernel's search space (it was "
                 "measured without them): default schedules", hit.signature.key, hit.path, ", ".join(missing))
        return meta, source
    spec = database.record_spec(meta, hit.record)
    log.info("halide_xpu: schedule record %s from %s: %s", hit.signature.key, hit.path, hit.record.describe())
    comment = f"{COMMENT} {hit.signature.key} {hit.record.describe()} [{hit.path.name}]"
    return dataclasses.replace(meta, schedule=spec), f"{comment}\n{source}"

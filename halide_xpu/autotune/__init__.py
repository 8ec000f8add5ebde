"""Schedule autotuning: a database of tuned tunables per device and kernel signature, its use at compile time,
and the ``python -m halide_xpu tune`` search (space.py, measure.py, tune.py); see schedules/README.md."""
from __future__ import annotations

from .database import Record, ScheduleDB, device_key, signature

__all__ = ["Record", "ScheduleDB", "device_key", "signature"]

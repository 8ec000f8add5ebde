"""Schedule database: JSON files of tuned tunables, one per device key, records keyed by a kernel signature."""
from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
import logging
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Optional

from .. import cache, config
from ..meta import KernelMeta, ScheduleSpec

log = logging.getLogger(__name__)

SCHEMA = "halide-xpu-schedules"
FORMAT = 1  # bump when the file layout or the signature changes
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "schedules"  # committed records of a source checkout
_SHORT_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "bool": "b8",
                 "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
                 "uint32": "u32", "uint64": "u64"}


# ---------------------------------------------------------------------------------------------- device keys
@dataclasses.dataclass(frozen=True)
class DeviceKey:
    """Which device (and software stack) a record was measured on: records of another key are not used."""

    target: str  # halide_xpu target: host | opencl | sycl | cuda
    name: str  # device name as the driver reports it
    driver: str  # driver / runtime version (host: the core count, which the CPU schedules depend on)
    halide: str  # Halide version: a new one can change what a tunable does

    @property
    def device(self) -> str:
        return f"{self.target} | {self.name} | {self.driver}"

    def __str__(self) -> str:
        return f"{self.device} | halide {self.halide}"

    @property
    def file_name(self) -> str:
        """``schedules/<this>.json``: the key, lower-cased, runs of other characters as one ``-``."""
        slug = re.sub(r"[^a-z0-9.]+", "-", str(self).lower()).strip("-")
        if len(slug) > 150:
            slug = slug[:120] + "-" + hashlib.sha256(str(self).encode()).hexdigest()[:10]
        return slug + ".json"

    def header(self) -> dict[str, Any]:
        return {"target": self.target, "name": self.name, "driver": self.driver}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "unknown cpu"


@functools.lru_cache(maxsize=None)
def device_key(target: str, device_type: str = "cpu", index: int = 0) -> DeviceKey:
    """The key of the device kernels of ``target`` run on, from what the target layer reports."""
    halide = cache.halide_version()
    if target == "host":
        return DeviceKey(target, _cpu_model(), f"{os.cpu_count() or 1} cpus", halide)
    if target == "opencl":
        from ..target import opencl_devices

        dev = opencl_devices.require_device()
        return DeviceKey(target, dev.name, f"{dev.platform}, {dev.version}, driver {dev.driver_version or '?'}", halide)
    if target == "sycl":
        from ..target import sycl_devices

        info = sycl_devices.device_info(device_type, index)
        driver = "?"
        try:
            if device_type == "xpu":
                import torch

                driver = str(getattr(torch.xpu.get_device_properties(index), "driver_version", "?"))
            else:
                driver = str(getattr(sycl_devices.emulation_device(), "driver_version", "?"))
        except Exception as e:  # noqa: BLE001 - the name alone still keys the records
            log.debug("no driver version for the sycl device: %s", e)
        return DeviceKey(target, info.name, f"{info.backend}, driver {driver}", halide)
    if target == "cuda":
        import torch

        name = torch.cuda.get_device_name(index)
        cap = ".".join(map(str, torch.cuda.get_device_capability(index)))
        return DeviceKey(target, name, f"cuda {torch.version.cuda}, sm {cap}", halide)
    raise ValueError(f"unknown halide_xpu target {target!r}")


# ---------------------------------------------------------------------------------------------- signatures
_NAMES = re.compile(r"\b(in_ptr|out_ptr|ks|hr|h|rdom)(\d+)\b")
_TEMPS = re.compile(r"\btmp\d+\b")
_SCALAR_DEF = re.compile(r"^(tmp\d+)\[\(\)\] =")
# a Halide type's width is algorithm; any other number (sizes, strides, offsets, 1/size as 1024.0) is normalised
_NUMBERS = re.compile(r"(hl\.(?:Float|Int|UInt|BFloat)\(\d+\))|(?<![\w.])(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def normalise_algorithm(source: str) -> str:
    """The kernel's ``algorithm()`` body as a sorted multiset of lines: comments dropped, scalar constants
    (0-d Funcs: ``1/size`` and the like, whose form Inductor picks by value) folded to ``C``, temporaries unnamed,
    other generated names renumbered in order of appearance, numbers replaced by ``N``."""
    body = source.split("def algorithm():", 1)[-1]
    lines = [ln.strip() for ln in body.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#")]
    defs: dict[str, list[str]] = {}
    for ln in lines:
        if m := _SCALAR_DEF.match(ln):
            defs.setdefault(m.group(1), []).append(ln)
    # constants: one definition reading no buffer and no loop (a reduction to a scalar is algorithm, kept)
    scalars = {n for n, d in defs.items() if len(d) == 1 and not re.search(r"in_ptr|\bhr?\d|rdom|\[h", d[0])}
    kept = []
    for ln in lines:
        name = ln.split(" ", 1)[0].split("[", 1)[0]
        if re.fullmatch(r"tmp\d+ = hl\.Func\('tmp\d+'\)", ln) or (name in scalars and ln.startswith(f"{name}[()] =")):
            continue  # declarations (some never defined) and constants
        for s in scalars:
            ln = ln.replace(f"{s}[()]", "C")
        kept.append(ln)
    numbering: dict[str, dict[str, int]] = {}

    def rename(m: re.Match) -> str:
        seen = numbering.setdefault(m.group(1), {})
        return f"{m.group(1)}{seen.setdefault(m.group(0), len(seen))}"

    text = _TEMPS.sub("tmp", _NAMES.sub(rename, "\n".join(kept)))
    text = _NUMBERS.sub(lambda m: m.group(1) or "N", text)
    return "\n".join(sorted(text.splitlines()))


def _bucket(extent: Optional[int]) -> str:
    """log2 bucket of an extent, rounded: 1024 serves 724..1448."""
    if extent is None:
        return "?"
    return "z" if extent <= 0 else str(round(math.log2(extent)))


@dataclasses.dataclass(frozen=True)
class Signature:
    """What a record is looked up by: family, normalised algorithm hash, dtypes, shape class."""

    family: str
    algorithm: str  # sha256 prefix of the normalised algorithm and the loop structure
    dtypes: str  # inputs > outputs, e.g. ``f32,f32>f32``
    shape: str  # log2 buckets of the loop extents, ``r`` marks reduction loops, e.g. ``r10x6``

    @property
    def key(self) -> str:
        return f"{self.family}/{self.algorithm}/{self.dtypes}/{self.shape}"


def signature(meta: KernelMeta, source: str) -> Signature:
    """The kernel's signature: concrete sizes and names normalised away, so nearby shapes share a record."""
    loops = ",".join(("r" if v.reduction else "") + ("c" if v.contiguous else "") for v in meta.loop_vars)
    structure = f"{meta.schedule.family}|{loops}|{len(meta.outputs)}|{len(meta.snapshots)}|{len(meta.inplace)}"
    digest = hashlib.sha256(f"{structure}\n{normalise_algorithm(source)}".encode()).hexdigest()[:16]
    ins = [_SHORT_DTYPES.get(a.dtype, a.dtype) for a in meta.args if a.kind == "in" and a.alias_of is None]
    outs = [_SHORT_DTYPES.get(a.dtype, a.dtype) for a in meta.args if a.kind == "out"]
    shape = "x".join(("r" if v.reduction else "") + _bucket(v.static_extent) for v in meta.loop_vars) or "scalar"
    return Signature(meta.schedule.family, digest, f"{','.join(ins)}>{','.join(outs)}", shape)


# ---------------------------------------------------------------------------------------------- records
@dataclasses.dataclass
class Record:
    """The tunables chosen for one signature on one device, with the times they were chosen by."""

    params: dict[str, int]
    time_us: Optional[float] = None  # median time of the chosen tunables
    default_us: Optional[float] = None  # median time of the defaults, same run
    kernel: str = ""  # what was tuned (suite case, kernel list entry)
    extents: tuple[int, ...] = ()  # the concrete loop extents tuned at
    candidates: int = 0
    failed: int = 0
    tuned_at: str = ""
    scheduler: str = ""  # a Halide autoscheduler won (``params`` are its parameters), else "" (explicit schedule)
    equivalent: int = 0  # candidates not measured: the same schedule as one that was (equivalence.fingerprint)

    @property
    def speedup(self) -> Optional[float]:
        return self.default_us / self.time_us if self.time_us and self.default_us else None

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["extents"] = list(self.extents)
        if self.speedup:
            out["speedup"] = round(self.speedup, 3)
        out["tuned_at"] = self.tuned_at or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return out

    @classmethod
    def from_json(cls, data: Any) -> "Record":
        if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
            raise ValueError("a record needs a 'params' object")
        params = {str(k): int(v) for k, v in data["params"].items()}
        known = {f.name for f in dataclasses.fields(cls)}
        rest = {k: v for k, v in data.items() if k in known and k != "params"}
        rest["extents"] = tuple(int(e) for e in rest.get("extents", ()))
        if rest.get("scheduler") and rest["scheduler"] not in config.SCHEDULERS[1:]:
            raise ValueError(f"unknown autoscheduler {rest['scheduler']!r}")
        return cls(params=params, **rest)

    def changes(self, defaults: dict[str, int]) -> str:
        """The tunables this record sets away from ``defaults`` (or its autoscheduler), for tables."""
        if self.scheduler:
            return f"autoscheduler {self.scheduler}"
        return ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()) if defaults.get(k) != v) or "(defaults)"

    def describe(self) -> str:
        params = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        times = f"{self.time_us:.1f} us tuned vs {self.default_us:.1f} us default" if self.speedup else "untimed"
        return f"{'autoscheduler ' + self.scheduler + ' ' if self.scheduler else ''}{params} ({times})"


@dataclasses.dataclass(frozen=True)
class Hit:
    signature: Signature
    record: Record
    path: Path


_warned: set[tuple[str, str]] = set()


def _warn_once(path: Path, why: str) -> None:
    if (str(path), why) not in _warned:
        _warned.add((str(path), why))
        log.warning("halide_xpu: schedule database %s ignored: %s", path, why)


def reset_warnings() -> None:
    _warned.clear()


def db_paths() -> list[Path]:
    """Directories searched, first hit wins: ``config.schedule_db``, default the user's then the committed ones."""
    if config.schedule_db:
        return [Path(p).expanduser() for p in config.schedule_db.split(os.pathsep) if p]
    return [user_dir(), PACKAGE_DIR]


def user_dir() -> Path:
    return Path(config.cache_dir).expanduser() / "schedules"


@functools.lru_cache(maxsize=256)
def _parse(path: str, mtime_ns: int, size: int) -> tuple[Optional[dict[str, Any]], str]:
    """(contents, "") or (None, why the file is unusable); cached per file version."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, f"corrupt file ({type(e).__name__}: {str(e)[:80]})"
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return None, f"corrupt file (not a {SCHEMA} file)"
    if data.get("format") != FORMAT:
        return None, f"format {data.get('format')!r}, this version reads {FORMAT}"
    if not isinstance(data.get("device"), dict) or not isinstance(data.get("records"), dict):
        return None, "corrupt file (no device or records)"
    return data, ""


def _read(path: Path) -> tuple[Optional[dict[str, Any]], str]:
    try:
        st = path.stat()
    except OSError as e:
        return None, f"unreadable ({e})"
    return _parse(str(path), st.st_mtime_ns, st.st_size)


class ScheduleDB:
    """One directory of record files (one file per device key)."""

    def __init__(self, directory: os.PathLike | str) -> None:
        self.directory = Path(directory)

    def path_for(self, key: DeviceKey) -> Path:
        return self.directory / key.file_name

    def records(self, key: DeviceKey) -> dict[str, tuple[Record, Path]]:
        """Every usable record for ``key`` in this directory; unusable files and records are warned about once."""
        found: dict[str, tuple[Record, Path]] = {}
        if not self.directory.is_dir():
            return found
        for path in sorted(self.directory.glob("*.json")):
            data, why = _read(path)
            if data is None:
                _warn_once(path, why)
                continue
            if data["device"] != key.header():
                if path.name == key.file_name:  # named for this device, written for another
                    _warn_once(path, f"records for another device ({data['device']}), this is {key.device}")
                else:
                    log.debug("schedule database %s is for %s", path, data["device"])
                continue
            if data.get("halide") != key.halide:
                _warn_once(path, f"stale: tuned with Halide {data.get('halide')}, this is Halide {key.halide}")
                continue
            for sig, raw in data["records"].items():
                try:
                    found.setdefault(sig, (Record.from_json(raw), path))
                except (TypeError, ValueError) as e:
                    _warn_once(path, f"corrupt record {sig!r} ({e})")
        return found

    def get(self, key: DeviceKey, sig: Signature) -> Optional[Hit]:
        entry = self.records(key).get(sig.key)
        return Hit(sig, *entry) if entry else None

    def put(self, key: DeviceKey, sig: Signature, record: Record) -> Path:
        """Add or replace one record: read-modify-write under a file lock, written to a temporary file then
        ``os.replace``d, so readers see the old or the new file and two writers both land."""
        from filelock import FileLock

        path = self.path_for(key)
        self.directory.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock", timeout=120):
            data, why = _read(path) if path.exists() else (None, "")
            if data is not None and (data["device"] != key.header() or data.get("halide") != key.halide):
                data, why = None, "written for another device or Halide version"
            if data is None and why:
                log.warning("halide_xpu: replacing schedule database %s (%s)", path, why)
            records = dict(data["records"]) if data else {}
            records[sig.key] = record.to_json()
            out = {"schema": SCHEMA, "format": FORMAT, "device": key.header(), "halide": key.halide,
                   "records": dict(sorted(records.items()))}
            fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=self.directory)
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(out, f, indent=1)
                    f.write("\n")
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        return path


def lookup(key: DeviceKey, sig: Signature, paths: Optional[list[Path]] = None) -> Optional[Hit]:
    """The first record for ``sig`` on ``key`` in the database directories."""
    for directory in db_paths() if paths is None else paths:
        hit = ScheduleDB(directory).get(key, sig)
        if hit is not None:
            return hit
    return None


def record_spec(meta: KernelMeta, record: Record) -> ScheduleSpec:
    """The schedule a compile builds ``meta`` with under ``record``: the family's defaults with the record's tunables
    (``config.schedule_overrides`` still win), or the record's autoscheduler."""
    from ..schedule import default_spec
    from ..target import targets

    if record.scheduler:  # a Halide autoscheduler was faster than every explicit candidate
        return ScheduleSpec(f"autoschedule:{record.scheduler}", tuple(sorted(record.params.items())))
    caps = targets.device_caps(meta.target, meta.device_type, meta.device_index)
    return default_spec(meta.loop_vars, meta.schedule.family, caps, tuned=record.params)

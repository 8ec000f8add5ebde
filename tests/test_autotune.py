"""Schedule autotuning: the database (round trip, shape classes, ignored files), records applied at compile time,
failed candidates, and an end-to-end ``python -m halide_xpu tune`` on the OpenCL CPU device."""
from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import halide_xpu
from halide_xpu import compiler
from halide_xpu.autotune import apply, database, space, tune
from halide_xpu.autotune.database import DeviceKey, Record, ScheduleDB
from halide_xpu.meta import ArgSpec, KernelMeta, LoopVar, ScheduleSpec
from halide_xpu.target import targets

from conftest import opencl_available

REPO = Path(__file__).resolve().parents[1]
KEY = DeviceKey("opencl", "Test Device", "driver 1.0", "21.0.0")

SOURCE = """
import halide as hl
def algorithm():
    in_ptr0 = hl.ImageParam(hl.Float(32), 2, 'in_ptr0')
    out_ptr0 = hl.Func(hl.Float(32), 1, 'out_ptr0')
    h0 = hl.Var('h0')
    h1 = hl.Var('h1')
    rdom = hl.RDom([hl.Range(0, {n})])
    hr0 = rdom[0]
    tmp{t} = hl.Func('tmp{t}')
    tmp{t}[h1] = hl.cast(hl.Float(32), 0)
    tmp{t}[h1] = tmp{t}[h1] + in_ptr0[hr0, h1] * 1e-06
    out_ptr0[h1] = tmp{t}[h1]
    # buffer layouts (min, extent, stride per dimension, innermost first)
    in_ptr0.dim(0).set_bounds(0, {n}).set_stride(1)
    in_ptr0.dim(1).set_bounds(0, {m}).set_stride({n})
    return locals()
"""


def fake_kernel(n: int, m: int, t: int = 0) -> tuple[KernelMeta, str]:
    """A row-sum kernel's metadata and source at sizes ``n`` (reduced, contiguous) x ``m``."""
    meta = KernelMeta(
        args=(ArgSpec("in_ptr0", "in", "float32", (str(n), str(m)), ("1", str(n))),
              ArgSpec("out_ptr0", "out", "float32", (str(m),), ("1",))),
        target="opencl", halide_target="host-opencl", loop_vars=(LoopVar("h0", str(n), True, True), LoopVar("h1", str(m))),
        outputs=("out_ptr0",), reductions=(f"tmp{t}",), schedule=ScheduleSpec("reduction", (("wg", 256),)))
    return meta, SOURCE.format(n=n, m=m, t=t)


def test_signature_normalises_names_and_sizes() -> None:
    a = database.signature(*fake_kernel(1000, 64))
    b = database.signature(*fake_kernel(1100, 70, t=7))  # other sizes in the same log2 buckets, other tmp number
    assert a == b and a.key == b.key
    assert a.dtypes == "f32>f32" and a.shape == "r10x6"
    assert database.signature(*fake_kernel(4096, 64)).shape == "r12x6"  # another shape class
    meta, source = fake_kernel(1000, 64)
    other = source.replace("* 1e-06", "* 1e-06 + 1.0")
    assert database.signature(meta, other).algorithm != a.algorithm  # another algorithm
    assert database.signature(meta, "# schedule record: x\n" + source) == a  # comments are not algorithm
    # Inductor writes 1/size as a float constant at one size, an int constant and a cast at another
    scaled = source.replace("out_ptr0[h1] = tmp0[h1]", "tmp3 = hl.Func('tmp3')\n    tmp3[()] = hl.f64(1024.0)\n"
                            "    out_ptr0[h1] = tmp0[h1] / tmp3[()]")
    cast = source.replace("out_ptr0[h1] = tmp0[h1]", "tmp3 = hl.Func('tmp3')\n    tmp3[()] = 1200\n    tmp4 = hl.Func('tmp4')\n"
                          "    tmp4[()] = hl.cast(hl.Float(32), tmp3[()])\n    out_ptr0[h1] = tmp0[h1] / tmp4[()]")
    assert database.signature(meta, scaled) == database.signature(meta, cast) != a
    half = dataclasses.replace(meta, args=(dataclasses.replace(meta.args[0], dtype="float16"), meta.args[1]))
    assert database.signature(half, source).dtypes == "f16>f32"


def test_database_round_trip_and_shape_class(tmp_path: Path) -> None:
    db = ScheduleDB(tmp_path)
    sig = database.signature(*fake_kernel(1024, 64))
    path = db.put(KEY, sig, Record({"wg": 64, "vector": 8}, 10.0, 20.0, "row_sum", (1024, 64)))
    assert path == tmp_path / KEY.file_name and path.name.endswith("-halide-21.0.0.json")
    data = json.loads(path.read_text())
    assert data["device"] == KEY.header() and data["halide"] == "21.0.0"
    assert data["records"][sig.key]["params"] == {"wg": 64, "vector": 8}
    # a kernel of another concrete size in the same shape class finds the record
    hit = database.lookup(KEY, database.signature(*fake_kernel(900, 60)), [tmp_path])
    assert hit is not None and hit.record.params == {"wg": 64, "vector": 8} and hit.record.speedup == 2.0
    assert database.lookup(KEY, database.signature(*fake_kernel(8192, 64)), [tmp_path]) is None
    assert database.lookup(dataclasses.replace(KEY, name="Other Device"), sig, [tmp_path]) is None
    # first directory wins
    first = tmp_path / "user"
    ScheduleDB(first).put(KEY, sig, Record({"wg": 128}))
    assert database.lookup(KEY, sig, [first, tmp_path]).record.params == {"wg": 128}


def _writer(directory: str, start: int) -> None:
    db = ScheduleDB(directory)
    for i in range(start, start + 15):
        db.put(KEY, database.signature(*fake_kernel(1 << (i % 20 + 1), 1 << (i // 20 + 1))), Record({"wg": i}))


def test_two_writers(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), s)) for s in (0, 15)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    records = json.loads((tmp_path / KEY.file_name).read_text())["records"]
    assert sorted(r["params"]["wg"] for r in records.values()) == list(range(30))
    assert not list(tmp_path.glob("*.tmp"))


def test_foreign_stale_corrupt_files_warned_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    database.reset_warnings()
    sig = database.signature(*fake_kernel(1024, 64))
    good = tmp_path / "good"
    ScheduleDB(good).put(KEY, sig, Record({"wg": 64}))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.json").write_text('{"schema": "halide-xpu-sched')  # truncated
    foreign = json.loads((good / KEY.file_name).read_text())
    foreign["device"]["name"] = "Another GPU"
    (bad / KEY.file_name).write_text(json.dumps(foreign))  # named for this device, written on another
    stale = json.loads((good / KEY.file_name).read_text())
    stale["halide"] = "19.0.0"
    (bad / "old-halide.json").write_text(json.dumps(stale))
    with caplog.at_level(logging.WARNING, logger="halide_xpu.autotune.database"):
        for _ in range(3):
            assert database.lookup(KEY, sig, [bad]) is None
            assert database.lookup(KEY, sig, [bad, good]).record.params == {"wg": 64}
    texts = [r.getMessage() for r in caplog.records]
    assert len(texts) == 3, texts  # one warning per file, however often it is read
    assert any("corrupt file" in t and "broken.json" in t for t in texts)
    assert any("another device" in t and "Another GPU" in t for t in texts)
    assert any("stale" in t and "19.0.0" in t for t in texts)


def test_search_space_pruned() -> None:
    meta, _ = fake_kernel(100, 64)
    caps = targets.DeviceCaps(True, 2, 4, max_work_group=128)
    dims = {t.name: t.values for t in space.search_space(meta, caps)}
    assert dims["wg"] == (32, 64, 128, 256)  # <= the device's 128 (256: the kernel's default, kept) and the row
    assert space.kind(meta) == "inner"
    host = {t.name: t.values for t in space.search_space(dataclasses.replace(
        meta, schedule=ScheduleSpec("pointwise", (("vector", 8), ("tasks_per_core", 4), ("min_chunk", 4096)))),
        targets.DeviceCaps(False, 2, 8))}
    assert set(host) == {"vector", "tasks_per_core", "min_chunk"} and max(host["vector"]) <= 16


def test_output_check_tells_rounding_from_wrong_results() -> None:
    """Sums with cancellation rounded in another order pass; a wrong element or a lost update does not."""
    from halide_xpu.autotune.measure import outputs_match

    torch.manual_seed(0)
    want = torch.randn(1 << 16) * 100
    want[7] = 0.0  # a sum that cancelled: the other order leaves 0.0078 here (the H200's embedding gradient)
    have = want.clone()
    have[7] = 0.0078
    assert outputs_match(want, have)
    assert outputs_match(want.bfloat16(), (want * (1 + 1e-3)).bfloat16())
    wrong = want.clone()
    wrong[100] += 0.05 * want.abs().max()  # one element wrong by 5 % of the output's scale
    assert not outputs_match(want, wrong)
    lost = want.clone()
    lost[::1000] = 0  # every thousandth update lost
    assert not outputs_match(want, lost)
    assert not outputs_match(want, torch.where(torch.arange(want.numel()) == 3, float("nan"), want))
    assert not outputs_match(torch.arange(10), torch.arange(10) + (torch.arange(10) == 4))  # integers: exact


def _cpu_target() -> str:
    return "opencl" if opencl_available() else "host"


def _capture(fn, *args) -> tuple[KernelMeta, str]:  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    with tune.capturing() as seen:
        torch.compile(fn, fullgraph=True)(*args)
    assert len(seen) == 1, seen
    return seen[0]


def test_tuned_record_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _cpu_target()
    monkeypatch.setattr(halide_xpu.config, "cpu_target", target)
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "schedule_db", str(tmp_path))
    fn = lambda x: x.sum(-1)  # noqa: E731
    monkeypatch.setattr(halide_xpu.config, "autotune", "off")
    meta, source = _capture(fn, torch.randn(64, 1000))
    defaults = dict(meta.schedule.params)
    tuned = {"wg": 64, "vector": 2} if target == "opencl" else {"tasks_per_core": 2, "vector": 4 if defaults["vector"] != 4 else 8}
    assert all(dict(meta.schedule.params)[k] != v for k, v in tuned.items())
    sig = database.signature(meta, source)
    key = database.device_key(meta.target)
    searched = {t.name: defaults[t.name] for t in space.search_space(meta, targets.device_caps(meta.target))}
    ScheduleDB(tmp_path).put(key, sig, Record({**searched, **tuned}, 1.0, 2.0, "test"))
    monkeypatch.setattr(halide_xpu.config, "autotune", "db")
    x = torch.randn(60, 1100)  # another size of the same shape class
    torch._dynamo.reset()
    out, codes = run_and_get_code(torch.compile(fn, fullgraph=True), x)
    torch.testing.assert_close(out, x.sum(-1), rtol=1e-4, atol=1e-4)
    code = "\n".join(codes)
    assert f"# schedule record: {sig.key} " in code and "(1.0 us tuned vs 2.0 us default)" in code
    for k, v in tuned.items():
        assert f"('{k}', {v})" in code
    launched = [l for l in compiler._memory.values() if l.meta.schedule.get(next(iter(tuned)), 0) == next(iter(tuned.values()))]
    assert launched and "# schedule record:" in (launched[0].library.parent / "kernel.py").read_text()
    # the record is part of the kernel cache key (a hash of the source, which names it, and of the meta)
    tuned_meta, tuned_source = apply.apply(meta, source)
    assert compiler.kernel_key(tuned_meta, tuned_source) != compiler.kernel_key(meta, source)
    assert compiler.kernel_key(meta, tuned_source) != compiler.kernel_key(meta, source)
    # explicit overrides win over the record
    name = next(iter(tuned))
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {name: 4 if tuned[name] != 4 else 8})
    again, _ = apply.apply(meta, source)
    assert again.schedule.get(name, 0) == halide_xpu.config.schedule_overrides[name]
    monkeypatch.setattr(halide_xpu.config, "schedule_overrides", {})
    monkeypatch.setattr(halide_xpu.config, "autotune", "off")
    plain, text = apply.apply(meta, source)
    assert plain == meta and text == source


def test_stale_record_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record without one of the tunables the kernel's search space has now (tuned before that tunable existed,
    so measured under other schedules) is not applied: the defaults are, and the stale record is counted."""
    target = _cpu_target()
    monkeypatch.setattr(halide_xpu.config, "cpu_target", target)
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "schedule_db", str(tmp_path))
    monkeypatch.setattr(halide_xpu.config, "autotune", "off")
    meta, source = _capture(lambda x: x.sum(-1), torch.randn(64, 1000))
    names = [t.name for t in space.search_space(meta, targets.device_caps(meta.target))]
    assert len(names) >= 2, names
    params = {n: dict(meta.schedule.params)[n] for n in names[1:]}  # the first tunable missing
    ScheduleDB(tmp_path).put(database.device_key(meta.target), database.signature(meta, source),
                             Record(params, 1.0, 2.0, "test"))
    monkeypatch.setattr(halide_xpu.config, "autotune", "db")
    halide_xpu.stats.reset()
    same, text = apply.apply(meta, source)
    assert same == meta and text == source
    assert halide_xpu.stats.counters["stale_schedule_records"] == 1


def test_stale_record_tuned_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tune`` searches a kernel again whose record lacks a tunable of today's search space (such a record is not
    applied at compile time, so keeping it as 'cached' would leave the kernel untuned); a whole record stays."""
    target = _cpu_target()
    monkeypatch.setattr(halide_xpu.config, "cpu_target", target)
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "autotune", "off")
    meta, source = _capture(lambda x: x.sum(-1), torch.randn(64, 1000))
    names = [t.name for t in space.search_space(meta, targets.device_caps(meta.target))]
    key, sig = database.device_key(meta.target), database.signature(meta, source)
    db = ScheduleDB(tmp_path)
    db.put(key, sig, Record({n: dict(meta.schedule.params)[n] for n in names[1:]}, 1.0, 2.0, "test"))
    kernel = tune.Kernel("row_sum", meta, source)
    outcomes = tune.tune_kernels([kernel], db, 30, 6, progress=False, autoschedulers=False)
    assert outcomes[0].status == "tuned", outcomes
    record = db.get(key, sig).record
    assert not space.missing_tunables(meta, record.params) and record.kernel == "row_sum"
    again = tune.tune_kernels([kernel], db, 30, 6, progress=False, autoschedulers=False)
    assert again[0].status == "cached", again


def test_autoscheduler_record_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _cpu_target()
    monkeypatch.setattr(halide_xpu.config, "cpu_target", target)
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "schedule_db", str(tmp_path))
    monkeypatch.setattr(halide_xpu.config, "autotune", "off")
    fn = lambda x: torch.softmax(x, -1)  # noqa: E731
    meta, source = _capture(fn, torch.randn(64, 256))
    scheduler = "Anderson2021" if target == "opencl" else "Li2018"
    record = Record({"parallelism": 2}, 1.0, 2.0, "test", scheduler=scheduler)
    ScheduleDB(tmp_path).put(database.device_key(meta.target), database.signature(meta, source), record)
    monkeypatch.setattr(halide_xpu.config, "autotune", "db")
    torch._dynamo.reset()
    x = torch.randn(64, 256)
    out, codes = run_and_get_code(torch.compile(fn, fullgraph=True), x)
    torch.testing.assert_close(out, fn(x))
    code = "\n".join(codes)
    assert f"family='autoschedule:{scheduler}'" in code and f"autoscheduler {scheduler} parallelism=2" in code
    with pytest.raises(ValueError, match="autoscheduler"):
        Record.from_json({"params": {}, "scheduler": "Magic2030"})


def test_config_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="autotune"):
        halide_xpu.config.autotune = "sometimes"
    monkeypatch.setattr(halide_xpu.config, "schedule_db", ["/a", "/b"])
    assert database.db_paths() == [Path("/a"), Path("/b")]
    monkeypatch.setattr(halide_xpu.config, "schedule_db", None)
    assert database.db_paths() == [database.user_dir(), database.PACKAGE_DIR]


def test_crashing_candidate_does_not_stop_tuning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _cpu_target()
    monkeypatch.setattr(halide_xpu.config, "cpu_target", target)
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "autotune", "off")
    meta, source = _capture(lambda x: x.sum(-1), torch.randn(128, 256))
    dims = space.search_space(meta, targets.device_caps(meta.target))
    first = dims[0]
    bad = next(v for v in first.values if v != dict(meta.schedule.params)[first.name])
    monkeypatch.setenv("HALIDE_XPU_TUNE_FAULT", f"crash:{first.name}={bad}")  # the worker SIGKILLs itself
    db = ScheduleDB(tmp_path)
    outcomes = tune.tune_kernels([tune.Kernel("row_sum", meta, source)], db, 60, 20, progress=False,
                                 autoschedulers=False)  # an autoscheduler may win: no ``first.name`` to check
    assert outcomes[0].status == "tuned", outcomes
    record = outcomes[0].record
    assert record is not None and record.failed >= 1 and record.candidates > record.failed + 1
    assert record.params[first.name] != bad and "worker died" in outcomes[0].note
    assert db.get(database.device_key(meta.target), database.signature(meta, source)) is not None


def test_hanging_candidate_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from halide_xpu.autotune.measure import Worker

    monkeypatch.setattr(halide_xpu.config, "cpu_target", _cpu_target())
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "autotune", "off")
    meta, source = _capture(lambda x: x * 2, torch.randn(64, 64))
    defaults = dict(meta.schedule.params)
    monkeypatch.setenv("HALIDE_XPU_TUNE_FAULT", "hang:vector=2")
    with Worker(timeout_s=120) as worker:
        assert worker.measure(meta, source, defaults, defaults, reps=1).ok  # worker started, defaults compiled
        worker.timeout_s = 3
        hung = worker.measure(meta, source, {**defaults, "vector": 2}, defaults, reps=1)
        assert not hung.ok and hung.error.startswith("timeout") and worker.restarts == 1
        worker.timeout_s = 120
        assert worker.measure(meta, source, defaults, defaults, reps=1).ok  # a new worker carries on


def test_autotune_max_tunes_at_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(halide_xpu.config, "cpu_target", _cpu_target())
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "schedule_db", str(tmp_path))
    monkeypatch.setattr(halide_xpu.config, "autotune", "max")
    monkeypatch.setattr(halide_xpu.config, "autotune_budget_s", 8)
    torch._dynamo.reset()
    x = torch.randn(32, 512)
    out, codes = run_and_get_code(torch.compile(lambda x: x.amax(-1), fullgraph=True), x)
    torch.testing.assert_close(out, x.amax(-1))
    assert "# schedule record: reduction/" in "\n".join(codes)
    records = json.loads(next(tmp_path.glob("*.json")).read_text())["records"]
    assert len(records) == 1 and next(iter(records.values()))["kernel"].startswith("compile:")


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")
def test_tune_end_to_end_opencl(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HALIDE_XPU_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "halide_xpu", "tune", "--suite", "add_relu,row_sum,softmax", "--size", "256",
           "--target", "opencl", "--db", str(tmp_path / "db"), "--out", str(tmp_path / "out"), "--budget-s", "90",
           "--budget-kernel-s", "20", "--no-progress", "--jobs", "2"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = (tmp_path / "out" / "tune.md").read_text()
    assert "| row_sum |" in table and "geomean speedup" in table
    data = json.loads((tmp_path / "out" / "tune.json").read_text())
    assert [k["status"] for k in data["kernels"]] == ["tuned"] * 3
    files = list((tmp_path / "db").glob("*.json"))
    assert len(files) == 1 and len(json.loads(files[0].read_text())["records"]) == 3
    # resumable: a second run finds every kernel in the database
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [k["status"] for k in json.loads((tmp_path / "out" / "tune.json").read_text())["kernels"]] == ["cached"] * 3
    # held out: the same cases at 240 (256's log2 class, also of 256² points) find those records, measured against
    # the defaults back to back
    held = [*cmd[:cmd.index("--size") + 1], "240", "--target", "opencl", "--db", str(tmp_path / "db"),
            "--out", str(tmp_path / "held"), "--budget-s", "60", "--no-progress", "--evaluate"]
    proc = subprocess.run(held, env=env, capture_output=True, text=True, timeout=240, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "held" / "evaluate.json").read_text())["summary"]
    assert summary["kernels"] == summary["with_record"] == summary["measured"] == 3, summary
    assert "found a record" in (tmp_path / "held" / "evaluate.md").read_text()


def test_same_schedule_candidates_share_a_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tunable the kernel's schedule form never reads gives the fingerprint of the defaults (the candidate is not
    measured); one it reads gives another. A bf16 GELU as a CUDA twin (H100 caps, no GPU): its strided 16-bit lanes
    read ``strided_lanes``, not ``staged_lanes``; building other kernels in between does not move the fingerprint
    (Halide's process-wide name counters are normalised)."""
    sys.path.insert(0, str(REPO / "scripts"))
    from replay_kernel import H100, cuda_twin_meta

    from halide_xpu.autotune import equivalence

    if not opencl_available():
        pytest.skip("the GPU-style default tunables come from an OpenCL build here")
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "opencl")
    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "autotune", "off")
    x = torch.randn(64, 256).bfloat16()
    meta, source = _capture(lambda x: torch.nn.functional.gelu(x.float()).to(x.dtype), x)
    meta = cuda_twin_meta(meta)
    defaults = dict(meta.schedule.params)

    def fp(**change: int) -> str:
        out = equivalence.fingerprint(equivalence.with_params(meta, {**defaults, **change}), source, H100)
        assert out is not None
        return out

    base = fp()
    other_kernel, other_source = _capture(lambda x: x.float().sum(-1), x)
    equivalence.fingerprint(cuda_twin_meta(other_kernel), other_source, H100)
    assert fp() == base and fp(staged_lanes=4) == base
    assert fp(wg=64) != base and fp(pairs=0) != base
    # a family built elsewhere (combos, scans) has none: its candidates are all measured
    assert equivalence.fingerprint(dataclasses.replace(meta, schedule=ScheduleSpec("combo", meta.schedule.params)),
                                   source, H100) is None


class _FakeWorker:
    """Times from a formula: ``wg=64`` alone 0.9x, ``vector=2`` alone 0.8x, both 0.95x (the shape that made
    coordinate descent miss ``vector=2`` on the H200: ``wg`` won first, and ``vector=2`` at ``wg=64`` lost)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, int]] = []

    def measure(self, meta, source, params, defaults, reps=5, family=None):  # type: ignore[no-untyped-def]
        from halide_xpu.autotune.measure import Result

        self.seen.append(dict(params))
        wg, vec = params.get("wg"), params.get("vector")
        us = {(64, 2): 95.0, (64, 4): 90.0, (256, 2): 80.0}.get((wg, vec), 100.0)
        return Result(dict(params), us=us, family=family or meta.schedule.family)


def test_search_screens_single_changes_then_combines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every single change from the defaults is measured before the descent moves, and the tunables that won on
    their own are tried together: ``vector=2`` is found although ``wg`` comes first in the space and wins first
    (fingerprints off: the fake times are not the fake kernel's schedules)."""
    from halide_xpu.autotune import equivalence

    monkeypatch.setattr(equivalence, "fingerprint", lambda *a: None)
    meta, source = fake_kernel(1024, 64)
    meta = dataclasses.replace(meta, schedule=ScheduleSpec("reduction", (("wg", 256), ("vector", 4), ("stage", 1))))
    worker = _FakeWorker()
    record, results = tune.search(tune.Kernel("fake", meta, source), worker, 60, autoschedulers=False)
    assert record is not None and record.params["wg"] == 256 and record.params["vector"] == 2, record
    assert {"wg": 64, "vector": 2, "stage": 1} in worker.seen  # the winners combined were measured too
    assert record.time_us == pytest.approx(80.0) and record.default_us == pytest.approx(100.0)

"""OpInfo conformance (``python -m halide_xpu conformance``) on every CPU target: the ``quick`` subset (the CI
subset's ops, every lowering family, trimmed to one sample) through worker subprocesses, as the CLI runs it."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

import halide_xpu
from conftest import CPU_TARGETS, opencl_available, sycl_unavailable
from halide_xpu import conformance

# Floors on `pass` records of the quick subset (96 jobs on torch 2.13; `no_kernel` is expected where Inductor
# leaves the op to aten, e.g. cumsum, int pow).
PASS_FLOOR = {"host": 90, "opencl": 90, "sycl": 90}
MUST_BE_ZERO = ("mismatch", "crash", "timeout")


def _skip_reason(target: str) -> str | None:
    if target == "opencl" and not opencl_available():
        return "no OpenCL device"
    if target == "sycl":
        return sycl_unavailable()
    return None


def _describe(records: list[dict]) -> str:
    return "\n".join(
        f"  {conformance.op_key(r['op'], r['variant'])} {r['dtype']} {r['direction']}: {r['class']}: "
        f"{conformance.reason_of(r)[:300]}"
        for r in records
    )


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    conformance.add_arguments(parser)
    return parser.parse_args([*argv, "--quiet"])


def _env() -> dict[str, str]:
    # The workers use this session's kernel cache (conftest's isolated one), never the user's.
    return dict(os.environ, HALIDE_XPU_CACHE_DIR=str(halide_xpu.config.cache_dir))


@pytest.mark.parametrize("target", CPU_TARGETS)
def test_conformance_quick(target: str, tmp_path: Path) -> None:
    why = _skip_reason(target)
    if why:
        pytest.skip(why)
    doc = conformance.run(_args("--target", target, "--subset", "quick", "--out", str(tmp_path)),
                          command=f"pytest quick {target}", env=_env())

    # Outputs: the JSON (records, counts, versions, command) and the markdown report.
    on_disk = json.loads((tmp_path / f"{target}.json").read_text())
    assert on_disk["summary"] == doc["summary"] and on_disk["torch"] and on_disk["halide"]
    assert (tmp_path / f"{target}.md").read_text().startswith(f"# OpInfo conformance: `{target}`")
    assert not doc["missing_ops"], doc["missing_ops"]
    records = doc["records"]
    assert len(records) == sum(doc["summary"].values()) >= 80
    # Every family ran: each subset op has a record.
    ran = {conformance.op_key(r["op"], r["variant"]) for r in records}
    assert ran == {conformance.op_key(n, v) for n, v, _ in conformance.CI_SUBSET}

    bad = [r for r in records if r["class"] in MUST_BE_ZERO]
    errors = [r for r in records if r["class"] == "error"]
    assert not bad, f"{target}: {len(bad)} mismatch/crash/timeout records:\n{_describe(bad)}"
    passed = doc["summary"]["pass"]
    assert passed >= PASS_FLOOR[target], (
        f"{target}: {passed} pass < floor {PASS_FLOOR[target]}; not passing:\n"
        + _describe([r for r in records if r["class"] != "pass"])
    )
    assert not errors, f"{target}: {len(errors)} compile/run errors:\n{_describe(errors)}"


def _record(op: str, cls: str, **extra: object) -> dict:
    return {"op": op, "variant": "", "dtype": "float32", "direction": "forward", "class": cls, **extra}


def test_resume_and_comparison(tmp_path: Path) -> None:
    """``--resume`` runs only the missing jobs and keeps the rest; ``summary.md`` compares with the anchor."""
    meta = {"torch": "x", "halide": "y", "command": "test"}
    conformance.write_json(tmp_path / "cpp.json", "cpp", [_record("exp", "pass"), _record("where", "pass")], meta)
    conformance.write_json(tmp_path / "host.json", "host", [_record("exp", "mismatch", reason="kept", sample=0)],
                           meta)
    doc = conformance.run(_args("--target", "host", "--ops", "^(exp|where)$", "--dtypes", "float32",
                                "--max-samples", "1", "--no-backward", "--out", str(tmp_path), "--resume"),
                          env=_env())
    by_op = {r["op"]: r for r in doc["records"]}
    assert by_op["exp"]["reason"] == "kept" and by_op["where"]["class"] == "pass", _describe(doc["records"])
    assert doc["summary"]["mismatch"] == 1 and doc["summary"]["pass"] == 1
    summary = (tmp_path / "summary.md").read_text()
    assert "| host | cpp | 2 | 1 | 2 | 0 | 1 | 0 | 0 | 0 | 1 |" in summary, summary
    assert "| exp | float32 | forward | mismatch | sample 0" in summary, summary
    report = (tmp_path / "host.md").read_text()
    assert "| mismatch | 1 | 0 | 1 |" in report and "| exp | float32 | forward | mismatch |" in report, report


FAKE_WORKER = r"""
import json, os, signal, sys, time
print(json.dumps({"event": "ready"}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    print(json.dumps({"event": "sample", "index": 0}), flush=True)
    if job["op"] == "segv":
        print("about to crash", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    if job["op"] == "hang":
        time.sleep(60)
    print(json.dumps({"event": "result", "job": job, "record": {"cls": "pass", "seconds": 0}}), flush=True)
"""


def test_crash_and_timeout_cost_one_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that dies or hangs is replaced; the job it ran is recorded as crash/timeout, the rest run."""
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    monkeypatch.setattr(conformance, "WORKER", (str(script),))
    jobs = [{"op": op, "variant": "", "dtype": "float32", "direction": "forward", "max_samples": 1}
            for op in ("a", "segv", "b", "hang", "c")]
    records = conformance.run_jobs("host", jobs, timeout_s=3, log_dir=tmp_path, progress=False)
    got = {r["op"]: r for r in records}
    assert [r["op"] for r in records] == ["a", "segv", "b", "hang", "c"]
    assert {op: r["class"] for op, r in got.items()} == {
        "a": "pass", "segv": "crash", "b": "pass", "hang": "timeout", "c": "pass"}
    assert got["segv"]["reason"] == "worker died: SIGSEGV" and "about to crash" in got["segv"]["log_tail"]
    assert got["segv"]["sample"] == 0 and conformance.reason_of(got["segv"]).startswith("sample 0: worker died")


def test_compare_tolerances() -> None:
    import torch

    from halide_xpu.conformance_worker import Mismatch, compare

    x = torch.linspace(-3, 3, 50)
    compare((x + 1e-6, [x.long()]), (x, [x.long()]), "add")  # fp32 default tolerance
    compare(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]), "add")  # NaN == NaN
    compare(x.exp() * (1 + 5e-5), x.exp(), "exp")  # transcendental: 1e-4
    compare(x.bfloat16() + 0.01, x.bfloat16(), "add")  # bf16: atol 1e-2, rtol 1.6e-2
    for actual, expected, name in [
        (x * (1 + 5e-5), x, "add"),  # fp32 too far for a plain op
        (x.long() + (x > 2).long(), x.long(), "add"),  # integers exactly
        (x.double(), x, "add"),  # dtype
        (x[:-1], x, "add"),  # shape
        ((x, x), (x,), "add"),  # structure
    ]:
        with pytest.raises(Mismatch):
            compare(actual, expected, name)


def test_inductor_config_reaches_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--inductor-config force_pointwise_cat=True`` runs the cat lowering GPUs take (Inductor turns it off for CPU
    devices) on a CPU target: the workers apply it, the run records it, and bad keys or values are refused."""
    import torch

    from halide_xpu import conformance_worker

    with pytest.raises(ValueError, match="has no 'no_such_knob'"):
        conformance.inductor_config(["no_such_knob=1"])
    with pytest.raises(ValueError, match="not a Python literal"):
        conformance.inductor_config(["force_pointwise_cat=yes please"])
    monkeypatch.setattr(torch._inductor.config, "force_pointwise_cat", False)
    monkeypatch.setenv(conformance_worker.INDUCTOR_CONFIG_ENV, json.dumps({"force_pointwise_cat": True}))
    conformance_worker.configure("host")
    assert torch._inductor.config.force_pointwise_cat is True
    monkeypatch.delenv(conformance_worker.INDUCTOR_CONFIG_ENV)
    target = next((t for t in ("opencl", "sycl") if _skip_reason(t) is None), "host")
    doc = conformance.run(_args("--target", target, "--ops", "^(cat|stack)$", "--dtypes", "bfloat16,int64",
                                "--max-samples", "2", "--out", str(tmp_path), "--jobs", "2",
                                "--inductor-config", "force_pointwise_cat=True"), env=_env())
    assert doc["options"]["inductor_config"] == {"force_pointwise_cat": True}
    assert doc["summary"]["pass"] >= 6 and all(doc["summary"][c] == 0 for c in (*MUST_BE_ZERO, "no_kernel", "error")), \
        _describe(doc["records"])

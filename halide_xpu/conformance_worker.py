"""Worker of the OpInfo conformance suite (``python -m halide_xpu.conformance_worker TARGET``).

Reads one job per line on stdin (JSON: op, variant, dtype, direction, max_samples), runs it against eager and
answers one JSON line per job on its own stdout. Anything else the process prints (torch, Halide, C code) goes
to stderr: the protocol channel is a private copy of the original stdout. The parent (``conformance.py``) runs
this in a subprocess so a crash or a hang costs one job.
"""
from __future__ import annotations

import ast
import faulthandler
import json
import math
import os
import sys
import time
import traceback
import zlib
from typing import Any, Callable, Iterable, Optional

CPU_TARGETS = ("host", "opencl", "sycl", "cpp")
HALIDE_XPU_TARGETS = ("host", "opencl", "sycl", "cuda")
LOW_PRECISION = {"float16", "bfloat16"}
TOL_LOW = (1e-2, 1.6e-2)  # atol, rtol for fp16/bf16 (test_torchinductor_opinfo's spirit: eager rounds every op)
TOL_LOOSE_FP32 = (1e-4, 1e-4)  # fp32 ops heavy in transcendentals or long accumulations
# fp32 ops compared with TOL_LOOSE_FP32: a name token in this set (op "nn.functional.layer_norm" -> "layer_norm").
LOOSE_FP32 = {
    "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "erf", "erfc", "erfinv", "sigmoid", "logit", "tanh",
    "sinh", "cosh", "asinh", "acosh", "atanh", "atan2", "pow", "float_power", "rsqrt", "sqrt", "gelu", "silu",
    "mish", "softplus", "elu", "selu", "celu", "logsigmoid", "tanhshrink", "logsumexp", "softmax", "log_softmax",
    "softmin", "cross_entropy", "nll_loss", "kl_div", "var", "std", "var_mean", "std_mean", "norm",
    "vector_norm", "layer_norm", "native_layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm",
    "prod", "cumsum", "cumprod", "logcumsumexp", "interpolate", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "mean", "sum", "nansum", "addcmul", "addcdiv", "lerp", "lgamma", "digamma", "polygamma", "sinc", "i0",
}


class Mismatch(AssertionError):
    def __init__(self, message: str, output: str, max_abs_diff: float) -> None:
        super().__init__(message)
        self.output = output
        self.max_abs_diff = max_abs_diff


INDUCTOR_CONFIG_ENV = "HALIDE_XPU_CONFORMANCE_INDUCTOR_CONFIG"  # JSON {key: value}, set by conformance.run


def inductor_config(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` texts as Inductor config values (Python literals); a ValueError names an unknown key or value."""
    import torch._inductor.config as ic

    found: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--inductor-config {pair!r}: expected KEY=VALUE")
        if not hasattr(ic, key):
            raise ValueError(f"--inductor-config {pair!r}: torch._inductor.config has no {key!r}")
        try:
            found[key] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            raise ValueError(f"--inductor-config {pair!r}: {text!r} is not a Python literal") from None
    return found


def configure(target: str) -> str:
    """Point Inductor at ``target``; returns the device type its tensors live on."""
    import torch

    import halide_xpu

    ic = torch._inductor.config
    ic.fx_graph_cache = False  # every compile codegens, so the kernel counters mean something
    for key, value in json.loads(os.environ.get(INDUCTOR_CONFIG_ENV, "{}")).items():  # conformance --inductor-config
        setattr(ic, key, value)
    ic.fallback_random = True  # random ops draw like eager (same seed on both sides)
    if hasattr(torch._functorch.config, "enable_autograd_cache"):
        torch._functorch.config.enable_autograd_cache = False
    if target in ("host", "opencl", "sycl"):
        if target == "opencl":
            from halide_xpu.target import opencl_devices

            if opencl_devices.select_device() is None:
                raise RuntimeError("no OpenCL device")
        if target == "sycl":
            from halide_xpu.target import sycl_devices

            why = sycl_devices.available()
            if why:
                raise RuntimeError(f"sycl emulation unavailable: {why}")
        halide_xpu.config.cpu_target = target
        ic.cpu_backend = "halide_xpu"
        return "cpu"
    if target == "cpp":
        ic.cpu_backend = "cpp"
        return "cpu"
    if not torch.cuda.is_available():
        raise RuntimeError(f"target {target} needs CUDA")
    ic.cuda_backend = "halide_xpu" if target == "cuda" else "triton"
    return "cuda"


def tolerance(op_name: str, dtype: Any) -> tuple[float, float] | tuple[None, None]:
    import torch

    if not (dtype.is_floating_point or dtype.is_complex):
        return 0.0, 0.0
    if dtype in (torch.float16, torch.bfloat16, torch.complex32):
        return TOL_LOW
    if dtype in (torch.float32, torch.complex64):
        tokens = set(op_name.replace(".", " ").split()) | {op_name.rsplit(".", 1)[-1]}
        if tokens & LOOSE_FP32:
            return TOL_LOOSE_FP32
    return None, None  # torch's defaults


# Ops whose values are unspecified (uninitialised memory): only dtype, shape and strides are compared
UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"}


def compare(actual: Any, expected: Any, op_name: str) -> None:
    """Every tensor leaf with ``assert_close`` (dtype, shape, values; NaN == NaN), other leaves with ``==``."""
    import torch

    if op_name.split(".")[0] in UNINITIALISED:
        actual, expected = (torch.utils._pytree.tree_map(
            lambda t: torch.zeros_like(t) if isinstance(t, torch.Tensor) else t, x) for x in (actual, expected))
    from torch.utils._pytree import tree_flatten

    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if a_spec != e_spec:
        raise Mismatch(f"output structure differs: {a_spec} vs {e_spec}", "structure", math.inf)
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise Mismatch(f"output {i}: {type(a).__name__} instead of a tensor", str(i), math.inf)
            atol, rtol = tolerance(op_name, e.dtype)
            try:
                torch.testing.assert_close(a, e, equal_nan=True, atol=atol, rtol=rtol)
            except AssertionError as err:
                raise Mismatch(_first_lines(str(err), 3), str(i), max_abs_diff(a, e)) from None
        elif a != e and not (isinstance(a, float) and isinstance(e, float) and math.isnan(a) and math.isnan(e)):
            raise Mismatch(f"output {i}: {a!r} != {e!r}", str(i), math.inf)


def max_abs_diff(a: Any, e: Any) -> float:
    import torch

    if a.shape != e.shape or a.dtype != e.dtype:
        return math.inf
    if a.numel() == 0:
        return 0.0
    a, e = a.detach().cpu().to(torch.complex128 if e.is_complex() else torch.float64), e.detach().cpu()
    e = e.to(a.dtype)
    diff = (a - e).abs()
    both_nan = a.isnan() & e.isnan()
    diff = torch.where(both_nan, torch.zeros_like(diff), diff)
    diff = torch.where(diff.isnan(), torch.full_like(diff, math.inf), diff)  # NaN on one side only
    same_inf = (a == e)  # equal infinities are no difference
    diff = torch.where(same_inf, torch.zeros_like(diff), diff)
    return float(diff.max())


def _first_lines(text: str, n: int) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[:n])[:400]


def _root(e: BaseException) -> BaseException:
    seen = set()
    while (e.__cause__ or e.__context__) is not None and id(e) not in seen:
        seen.add(id(e))
        inner = e.__cause__ or e.__context__
        if type(inner).__name__ in ("SkipFrame", "Unsupported"):
            break
        e = inner
    return e


def _upcast(sample_args: Any) -> Any:
    import torch
    from torch.utils._pytree import tree_map

    def up(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.dtype in (torch.float16, torch.bfloat16, torch.float32):
            return t.detach().to(torch.float64).requires_grad_(t.requires_grad)  # backward: still a leaf to grad
        return t

    return tree_map(up, sample_args)


def _matches_float64(fn: Callable[..., Any], args: tuple, kwargs: dict, actual: Any, op_name: str) -> bool:
    """Second chance for a float mismatch, as Inductor's ``reference_in_float``: eager in float64 (forward, or
    forward + backward), rounded to the compiled result's dtype, within the same tolerance. Summation order (atomic
    accumulation on GPUs) may move a float32 result off float32 eager's by more than the tolerance, not off the
    exact one."""
    import torch
    from torch.utils._pytree import tree_map

    try:
        ref_args, ref_kwargs = _upcast((args, kwargs))
        ref = fn(*ref_args, **ref_kwargs)
        ref = tree_map(lambda r, a: r.to(a.dtype) if isinstance(r, torch.Tensor) and isinstance(a, torch.Tensor)
                       else r, ref, actual)
        compare(actual, ref, op_name)
        return True
    except Exception:
        return False


def _clone(tree: Any) -> Any:
    """A copy for eager (strides and storage offsets kept), so an op that writes its input cannot skew the
    compiled run, which gets the sample itself."""
    import torch
    from torch._dynamo.utils import clone_input
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: clone_input(t) if isinstance(t, torch.Tensor) else t, tree)


def _differentiable(tree: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor) and t.requires_grad]


def run_job(job: dict[str, Any], ops: dict[tuple[str, str], Any], device: str, target: str,
            send: Callable[[dict[str, Any]], None] = lambda msg: None) -> dict[str, Any]:
    import torch

    import halide_xpu

    op = ops[(job["op"], job["variant"])]
    name = job["op"] + (f".{job['variant']}" if job["variant"] else "")
    dtype = getattr(torch, job["dtype"])
    backward = job["direction"] == "backward"
    seed = zlib.crc32(f"{name}|{job['dtype']}|{job['direction']}".encode())
    record: dict[str, Any] = {"samples": 0}
    halide_xpu.stats.reset()
    from torch._inductor import metrics

    metrics.reset()  # anchors: Inductor's own kernel count (_finish)
    torch._dynamo.reset()
    torch.manual_seed(seed)

    def forward(*a: Any, **k: Any) -> Any:
        return op(*a, **k)

    def with_grads(grad_outs: list[Any], *a: Any, **k: Any) -> Any:
        out = op(*a, **k)
        outs = [o for o in _differentiable(out) if o.is_floating_point()]
        loss = sum((o * g).sum() for o, g in zip(outs, grad_outs))
        return torch.autograd.grad(loss, _differentiable((a, k)), allow_unused=True)

    fn = with_grads if backward else forward
    compiled = torch.compile(fn, backend="inductor", dynamic=False)
    samples = op.sample_inputs(device, dtype, requires_grad=backward)
    eager_failure = None
    for index, sample in enumerate(samples):
        if record["samples"] >= job["max_samples"] or index >= 4 * job["max_samples"]:
            break
        args, kwargs = (sample.input, *sample.args), dict(sample.kwargs)
        try:
            if backward:
                torch.manual_seed(seed + index)
                out = op(*args, **kwargs)
                outs = [o for o in _differentiable(out) if o.is_floating_point()]
                if not outs or not _differentiable((args, kwargs)):
                    eager_failure = eager_failure or "no differentiable output/input"
                    continue
                args = ([torch.randn(o.shape, dtype=o.dtype, device=o.device) for o in outs], *args)
            torch.manual_seed(seed + index)
            eager_args, eager_kwargs = (args, kwargs) if backward else _clone((args, kwargs))
            expected = fn(*eager_args, **eager_kwargs)
        except Exception as e:
            eager_failure = eager_failure or f"{type(e).__name__}: {_first_lines(str(e), 1)}"
            continue
        record["samples"] += 1
        send({"event": "sample", "index": index})  # a crash from here on is this sample's
        try:
            torch.manual_seed(seed + index)
            actual = compiled(*args, **kwargs)
        except Exception as e:
            root = _root(e)
            record.update(cls="error", sample=index, exc=type(root).__name__,
                          reason=f"{type(root).__name__}: {_first_lines(str(root), 1)}",
                          traceback=traceback.format_exc(limit=-6)[-3000:])
            return _finish(record, target)
        try:
            compare(actual, expected, name)
        except Mismatch as m:
            if dtype.is_floating_point and _matches_float64(fn, args, kwargs, actual, name):
                record["float64_reference"] = record.get("float64_reference", 0) + 1
                continue
            diff = m.max_abs_diff
            record.update(cls="mismatch", sample=index, output=m.output,
                          max_abs_diff=diff if math.isfinite(diff) else str(diff), reason=str(m)[:400],
                          sample_desc=_first_lines(repr(sample), 1)[:300])
            return _finish(record, target)
    if record["samples"] == 0:
        record.update(cls="eager_error", reason=eager_failure or "no sample")
        return _finish(record, target)
    record["cls"] = "pass"
    return _finish(record, target)


def _finish(record: dict[str, Any], target: str) -> dict[str, Any]:
    import halide_xpu

    stats = halide_xpu.stats
    record["kernels"] = int(stats.counters.get("kernels_generated", 0))
    record["fallbacks"] = [f"{','.join(f.nodes)}: {f.reason}"[:300] for f in stats.fallbacks][:5]
    if record["cls"] == "mismatch" and target in HALIDE_XPU_TARGETS and record["kernels"] == 0 \
            and not stats.fallbacks:  # no kernel of ours ran: Inductor's or ATen's number (the anchors' too)
        record.update(cls="no_kernel", reason="mismatch without a halide_xpu kernel: " + record["reason"])
    elif record["cls"] == "pass" and target in HALIDE_XPU_TARGETS:
        if stats.fallbacks:
            record.update(cls="no_kernel", reason="fallback: " + record["fallbacks"][0])
        elif record["kernels"] == 0:
            record.update(cls="no_kernel", reason="no halide_xpu kernel generated")
    elif target not in HALIDE_XPU_TARGETS:  # an anchor passes by a kernel of its own, not by running ATen
        from torch._inductor import metrics

        record["kernels"] = int(metrics.generated_kernel_count)
        if record["cls"] == "pass" and record["kernels"] == 0:
            record.update(cls="no_kernel", reason="Inductor generated no kernel")
        elif record["cls"] == "mismatch" and record["kernels"] == 0:
            record.update(cls="no_kernel", reason="mismatch without an Inductor kernel: " + record["reason"])
    return record


def _scope(target: str) -> Any:
    import contextlib

    if target == "sycl":
        from halide_xpu import usm

        return usm.usm_tensors()  # the emulation's XPU tensors: samples, outputs, temporaries in USM
    return contextlib.nullcontext()


def serve(target: str, lines: Iterable[str], send: Callable[[dict[str, Any]], None]) -> None:
    device = configure(target)
    from torch.testing._internal.common_methods_invocations import op_db

    ops = {(o.name, o.variant_test_name): o for o in op_db}
    send({"event": "ready", "pid": os.getpid()})
    for line in lines:
        if not line.strip():
            continue
        job = json.loads(line)
        start = time.perf_counter()
        try:
            with _scope(target):
                record = run_job(job, ops, device, target, send)
        except Exception as e:  # the harness itself failed (sample generation, ...): one error, not a dead worker
            record = {"cls": "error", "exc": type(e).__name__, "reason": f"harness: {type(e).__name__}: "
                      f"{_first_lines(str(e), 1)}", "traceback": traceback.format_exc(limit=-6)[-3000:]}
        record["seconds"] = round(time.perf_counter() - start, 2)
        send({"event": "result", "job": job, "record": record})


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    target = argv[0]
    faulthandler.enable()  # a crash leaves the Python stack in the log (the parent quotes its tail)
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints (ours, torch's, native code's) go to the log, not into the protocol
    sys.stdout = sys.stderr

    def send(msg: dict[str, Any]) -> None:
        proto.write(json.dumps(msg, default=str) + "\n")
        proto.flush()

    try:
        serve(target, sys.stdin, send)
    except Exception as e:
        send({"event": "fatal", "reason": f"{type(e).__name__}: {e}"})
        traceback.print_exc()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

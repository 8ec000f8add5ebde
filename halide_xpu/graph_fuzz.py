"""Random graphs of odd shapes and mixed dtypes through torch.compile, forward and backward, against eager in float64
(``python -m halide_xpu fuzz --target opencl --count 200``): finds the wrong numbers no hand-picked case asks for.

A case is a seed: :func:`generate` builds a small program (pointwise math, broadcasts, row/column reductions,
scans, views and slices, gathers and scatters, casts) by running each step eagerly on the case's inputs, so every
step is legal for the shapes it meets. :func:`check` compiles it with halide-xpu on a target and judges every
output (and, for float programs, every input gradient) by ``|ours - ref64| <= 2 |eager - ref64| + tol``: no worse
than eager in the same dtype plus a small tolerance, which separates garbage (O(1)) from rounding.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import random
import sys
import time
import traceback
from typing import Any, Callable, Iterator, Optional

import torch

log = logging.getLogger(__name__)

DIMS = (1, 2, 3, 5, 7, 8, 16, 17, 31, 33, 64, 65, 100, 127, 130, 257, 1000, 4097)
MAX_NUMEL = 1 << 17
FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
INT_DTYPES = (torch.int32, torch.int64)
RARE_DTYPES = (torch.float64, torch.int8, torch.uint8)  # one program in ten
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 1e-2, torch.float64: 1e-7}  # conformance TOL_LOW
KERNEL_MARK = "halide_xpu_kernel_"
RESULTS = ("pass", "no_kernel", "mismatch", "error", "crash", "timeout", "inductor_mismatch", "eager_error")
BAD = ("mismatch", "error", "crash", "timeout")  # ours to fix


def _small(x: torch.Tensor) -> torch.Tensor:
    return x.abs() + 1


# name -> (arity, kinds it takes, function). Kinds: "f" float, "i" integer, "b" bool. Bounded outputs keep chains
# of steps finite (no inf reached by accident: special values have their own tests).
UNARY: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "sin": ("f", torch.sin), "tanh": ("f", torch.tanh), "sigmoid": ("f", torch.sigmoid), "neg": ("fi", torch.neg),
    "relu": ("f", torch.relu), "gelu": ("f", torch.nn.functional.gelu), "silu": ("f", torch.nn.functional.silu),
    "exp_neg": ("f", lambda x: torch.exp(-x.abs())), "log1p_abs": ("f", lambda x: torch.log1p(x.abs())),
    "rsqrt1": ("f", lambda x: torch.rsqrt(_small(x))), "half": ("f", lambda x: x * 0.5), "sq": ("f", lambda x: x * x),
    "abs": ("fi", torch.abs), "not": ("b", torch.logical_not), "bitnot": ("i", torch.bitwise_not),
    "shl3": ("i", lambda x: x << 3), "shr2": ("i", lambda x: x >> 2), "mul_big": ("i", lambda x: x * 40503),
    "clamp1": ("fi", lambda x: x.clamp(-1, 1)), "cube": ("fi", lambda x: x * x * x), "sign": ("i", torch.sign),
    "erf": ("f", torch.erf), "atan": ("f", torch.atan), "softplus": ("f", torch.nn.functional.softplus),
}
BINARY: dict[str, tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]] = {
    "add": ("fi", torch.add), "sub": ("fi", torch.sub), "mul": ("fi", torch.mul), "max": ("fi", torch.maximum),
    "min": ("fi", torch.minimum), "div1": ("f", lambda x, y: x / _small(y)),
    "where_gt": ("fi", lambda x, y: torch.where(x > y, x, y)), "xor": ("i", torch.bitwise_xor),
    "floordiv1": ("i", lambda x, y: torch.floor_divide(x, _small(y))),
    "rem1": ("i", lambda x, y: torch.remainder(x, _small(y))), "or": ("b", torch.logical_or),
}
# reductions over one dim: name -> (kinds, function(x, dim, keepdim))
REDUCE: dict[str, tuple[str, Callable[[torch.Tensor, int, bool], torch.Tensor]]] = {
    "sum": ("fi", lambda x, d, k: x.sum(d, keepdim=k)), "mean": ("f", lambda x, d, k: x.mean(d, keepdim=k)),
    "amax": ("fi", lambda x, d, k: x.amax(d, keepdim=k)), "amin": ("fi", lambda x, d, k: x.amin(d, keepdim=k)),
    "var": ("f", lambda x, d, k: x.var(d, keepdim=k)), "logsumexp": ("f", lambda x, d, k: x.logsumexp(d, keepdim=k)),
    "softmax": ("f", lambda x, d, k: torch.softmax(x, d)), "log_softmax": ("f", lambda x, d, k: torch.log_softmax(x, d)),
    "cumsum": ("fi", lambda x, d, k: torch.cumsum(x, d)), "any": ("b", lambda x, d, k: x.any(d, keepdim=k)),
    "norm": ("f", lambda x, d, k: torch.linalg.vector_norm(x, dim=d, keepdim=k)),
    "layer_norm": ("f", lambda x, d, k: torch.nn.functional.layer_norm(x, x.shape[-1:])),
    "std": ("f", lambda x, d, k: x.std(d, keepdim=k)), "cummax": ("fi", lambda x, d, k: torch.cummax(x, d)[0]),
    "logcumsumexp": ("f", lambda x, d, k: torch.logcumsumexp(x, d)),
    "prod_tanh": ("f", lambda x, d, k: torch.tanh(x).prod(d, keepdim=k)), "all": ("b", lambda x, d, k: x.all(d, keepdim=k)),
    "sum_bool": ("b", lambda x, d, k: x.sum(d, keepdim=k)),
}
CASTS = ("float32", "bfloat16", "float16", "int32", "int64", "bool")


def _kind(t: torch.Tensor) -> str:
    return "b" if t.dtype == torch.bool else ("f" if t.is_floating_point() else "i")


@dataclasses.dataclass(frozen=True)
class Case:
    """A generated program: its inputs (shape, dtype name), index tensors (values below a bound, shape) passed after
    them, and steps (op, value indices, params; an index step names its index tensor by position)."""

    seed: int
    inputs: tuple[tuple[tuple[int, ...], str], ...]
    indices: tuple[tuple[int, tuple[int, ...]], ...]
    steps: tuple[tuple[str, tuple[int, ...], tuple[Any, ...]], ...]
    outputs: tuple[int, ...]
    backward: bool
    dynamic: bool

    def describe(self) -> str:
        lines = [f"seed {self.seed}: inputs {list(self.inputs)}, index tensors (bound, shape) {list(self.indices)}, "
                 f"backward={self.backward}, dynamic={self.dynamic}"]
        n = len(self.inputs)
        lines += [f"  v{n + i} = {op}({', '.join(f'v{a}' for a in args)}{''.join(f', {p!r}' for p in ps)})"
                  for i, (op, args, ps) in enumerate(self.steps)]
        return "\n".join(lines + [f"  return {', '.join(f'v{o}' for o in self.outputs)}"])


def make_inputs(case: Case, device: str = "cpu") -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(case.seed)
    out = []
    for shape, dtype in case.inputs:
        dt = getattr(torch, dtype)
        if dt.is_floating_point:
            t = (torch.randn(shape, generator=g) * 2).to(dt)
        elif dt == torch.bool:
            t = torch.rand(shape, generator=g) > 0.5
        else:  # the full range: products and sums wrap as eager's do
            t = torch.randint(-(2**31), 2**31 - 1, shape, generator=g, dtype=torch.int64).to(dt)
        out.append(t.to(device))
    g = torch.Generator().manual_seed(case.seed + 1)  # apart: the same whatever inputs come before
    for bound, shape in case.indices:
        out.append(torch.randint(0, bound, shape, generator=g).to(device))
    return out


def apply(op: str, args: list[torch.Tensor], ps: tuple[Any, ...], index: list[torch.Tensor]) -> torch.Tensor:
    """One step of a program (what :func:`generate` recorded); ``index``: the case's index tensors."""
    x = args[0]
    if op in UNARY:
        return UNARY[op][1](x)
    if op in BINARY:
        return BINARY[op][1](x, args[1])
    if op in REDUCE:
        return REDUCE[op][1](x, ps[0], ps[1])
    if op in ("argmax", "argmin"):
        return getattr(x, op)(ps[0], keepdim=ps[1])
    if op == "cast":
        return x.to(getattr(torch, ps[0]))
    if op == "permute":
        return x.permute(*ps[0])
    if op == "slice2":
        # every other element along dim ps[0] (no tuple of slices: torch 2.11's Dynamo cannot trace building one)
        return x.narrow(ps[0], ps[1], x.shape[ps[0]] - ps[1]).transpose(0, ps[0])[::2].transpose(0, ps[0])
    if op == "flip":
        return x.flip(ps[0])
    if op == "pad":
        return torch.nn.functional.pad(x, (ps[0], ps[1]), value=ps[2] if x.is_floating_point() else int(ps[2]))
    if op == "roll":
        return x.roll(ps[0], ps[1])
    if op == "expand":
        return x.unsqueeze(ps[0]).expand(*x.shape[: ps[0]], ps[1], *x.shape[ps[0]:])
    if op == "flatten":
        return x.flatten(ps[0], ps[0] + 1)
    if op == "cat":
        return torch.cat([x, args[1]], ps[0])
    if op == "index_select":
        return x.index_select(ps[0], index[ps[1]])
    if op == "gather":
        return x.gather(ps[0], index[ps[1]])
    if op == "index_add":
        base = torch.zeros(*x.shape[: ps[0]], ps[2], *x.shape[ps[0] + 1:], dtype=x.dtype, device=x.device)
        return base.index_add(ps[0], index[ps[1]], x)
    if op == "masked_fill":
        return x.masked_fill(args[1], ps[0])
    raise ValueError(f"unknown fuzz op {op!r}")


def evaluate(case: Case, inputs: list[torch.Tensor], f64: bool = False) -> tuple[torch.Tensor, ...]:
    """Runs ``case`` on ``inputs``; ``f64``: floats computed in float64 and casts between float dtypes skipped (the
    reference)."""
    vals, index = list(inputs[: len(case.inputs)]), list(inputs[len(case.inputs):])
    for op, args, ps in case.steps:
        if f64 and op == "cast" and ps[0] in ("float32", "bfloat16", "float16") and vals[args[0]].is_floating_point():
            vals.append(vals[args[0]])
            continue
        if f64 and op == "cast" and ps[0] in ("float32", "bfloat16", "float16"):
            vals.append(vals[args[0]].to(torch.float64))
            continue
        vals.append(apply(op, [vals[a] for a in args], ps, index))
    return tuple(vals[o] for o in case.outputs)


def _shape(rng: random.Random, rank: int) -> tuple[int, ...]:
    while True:
        shape = tuple(rng.choice(DIMS) for _ in range(rank))
        n = 1
        for d in shape:
            n *= d
        if n <= MAX_NUMEL:
            return shape


def _step(rng: random.Random, vals: list[torch.Tensor],
          index: list[tuple[int, tuple[int, ...]]]) -> Optional[tuple[str, tuple[int, ...], tuple[Any, ...]]]:
    """A random step legal for ``vals`` (None: the draw did not fit; draw again); index tensors it needs are added
    to ``index``."""
    i = rng.randrange(len(vals)) if rng.random() < 0.4 else len(vals) - 1 - rng.randrange(min(2, len(vals)))
    x = vals[i]
    kind, rank = _kind(x), x.dim()
    family = rng.choice(["unary", "unary", "binary", "binary", "reduce", "reduce", "view", "index", "cast"])
    if family == "unary":
        ops = [k for k, (kinds, _) in UNARY.items() if kind in kinds]
        return (rng.choice(ops), (i,), ()) if ops else None
    if family == "binary":  # a partner of the same kind whose shape broadcasts with x's
        partners = [j for j, v in enumerate(vals) if _kind(v) == kind and _broadcasts(x.shape, v.shape)]
        ops = [k for k, (kinds, _) in BINARY.items() if kind in kinds]
        if kind == "f" and rng.random() < 0.2:
            masks = [j for j, v in enumerate(vals) if v.dtype == torch.bool and _broadcasts(x.shape, v.shape)
                     and torch.broadcast_shapes(x.shape, v.shape) == x.shape]
            if masks:
                return ("masked_fill", (i, rng.choice(masks)), (rng.choice([0.0, -3.5]),))
        if kind == "f" and rng.random() < 0.15:  # type promotion: a float with an integer or a bool
            others = [j for j, v in enumerate(vals) if _kind(v) != "f" and _broadcasts(x.shape, v.shape)]
            if others:
                return (rng.choice(["add", "mul"]), (i, rng.choice(others)), ())
        return (rng.choice(ops), (i, rng.choice(partners)), ()) if ops and partners else None
    if family == "reduce" and rank:
        d = rng.randrange(rank)
        if rng.random() < 0.15 and kind != "b":
            argop = rng.choice(["argmax", "argmin"])
            return (argop, (i,), (d, rng.random() < 0.5)) if _is_input(i, vals) else None
        ops = [k for k, (kinds, _) in REDUCE.items() if kind in kinds]
        return (rng.choice(ops), (i,), (d, rng.random() < 0.5)) if ops else None
    if family == "view" and rank:
        d = rng.randrange(rank)
        choice = rng.choice(["permute", "slice2", "flip", "expand", "flatten", "cat", "pad", "roll"])
        if choice == "pad" and kind != "b":  # constant padding on the last dim, before and after
            return ("pad", (i,), (rng.choice([0, 1, 3]), rng.choice([1, 2, 5]), rng.choice([0.0, -1.5])))
        if choice == "roll":
            return ("roll", (i,), (rng.choice([1, -2, 7]), d))
        if choice == "permute" and rank > 1:
            perm = list(range(rank))
            rng.shuffle(perm)
            return ("permute", (i,), (tuple(perm),))
        if choice == "slice2" and x.shape[d] > 1:
            return ("slice2", (i,), (d, rng.randrange(min(3, x.shape[d]))))
        if choice == "flip":
            return ("flip", (i,), ((d,),))
        if choice == "expand" and x.numel() * 7 <= MAX_NUMEL and rank < 4:
            return ("expand", (i,), (d, rng.choice([2, 3, 7])))
        if choice == "flatten" and rank > 1 and d < rank - 1:
            return ("flatten", (i,), (d,))
        if choice == "cat":
            partners = [j for j, v in enumerate(vals) if v.dtype == x.dtype and v.dim() == rank and
                        all(a == b for k, (a, b) in enumerate(zip(v.shape, x.shape)) if k != d)]
            if partners and 2 * x.numel() <= MAX_NUMEL:
                return ("cat", (i, rng.choice(partners)), (d,))
        return None
    if family == "index" and rank:
        d = rng.randrange(rank)
        n = x.shape[d]
        if rng.random() < 0.4:
            return ("index_select", (i,), (d, _index(rng, index, n, (rng.choice([1, 3, 17, n]),))))
        if rng.random() < 0.5:
            shape = tuple(s if k != d else rng.choice([1, 2, n]) for k, s in enumerate(x.shape))
            return ("gather", (i,), (d, _index(rng, index, n, shape)))
        if kind == "f" or x.dtype == torch.int64:  # index_add: rows added into fewer (accumulating indirect store)
            m = rng.choice([1, 2, 5, max(1, n // 3)])
            return ("index_add", (i,), (d, _index(rng, index, m, (n,)), m))
        return None
    if family == "cast":  # a float becomes an integer only where it is an input (no rounding decides it)
        casts = [c for c in CASTS if kind != "f" or _is_input(i, vals) or c in ("float32", "bfloat16", "float16")]
        return ("cast", (i,), (rng.choice(casts),))
    return None


def _index(rng: random.Random, index: list[tuple[int, tuple[int, ...]]], bound: int, shape: tuple[int, ...]) -> int:
    """A new index tensor (values below ``bound``) for a step; returns its position."""
    index.append((bound, shape))
    return len(index) - 1


def _is_input(i: int, vals: list[torch.Tensor]) -> bool:
    return getattr(vals[i], "_fuzz_input", False)


def _broadcasts(a: torch.Size, b: torch.Size) -> bool:
    try:
        return torch.broadcast_shapes(a, b) == a or torch.broadcast_shapes(a, b) == b
    except RuntimeError:
        return False


def generate(seed: int) -> Case:
    """The program of ``seed``: 1-3 inputs, 3-10 steps, 1-3 outputs among the computed values."""
    rng = random.Random(seed)
    dtype = rng.choice(RARE_DTYPES if rng.random() < 0.1 else FLOAT_DTYPES + FLOAT_DTYPES + INT_DTYPES)
    shape = _shape(rng, rng.choice([1, 2, 2, 2, 3, 4]))
    specs = [(shape, str(dtype).removeprefix("torch."))]
    for _ in range(rng.randrange(3)):  # partners: the same shape or a broadcast row/column; same dtype or another
        other = tuple(s if rng.random() < 0.7 else 1 for s in shape)
        specs.append((other, rng.choice([specs[0][1], specs[0][1], "float32", "bool"])))
    vals = make_inputs(Case(seed, tuple(specs), (), (), (), False, False))
    for v in vals:
        v._fuzz_input = True  # type: ignore[attr-defined]
    index: list[tuple[int, tuple[int, ...]]] = []
    steps: list[tuple[str, tuple[int, ...], tuple[Any, ...]]] = []
    want, tries = rng.randrange(3, 11), 0
    while len(steps) < want and tries < 200:
        tries += 1
        drawn = len(index)
        step = _step(rng, vals, index)
        if step is not None:
            try:
                tensors = make_inputs(Case(seed, (), tuple(index), (), (), False, False))
                out = apply(step[0], [vals[a] for a in step[1]], step[2], tensors)
            except (RuntimeError, IndexError, ValueError):
                out = None  # not legal here (eager refuses): draw again
            if out is not None and 0 < out.numel() <= MAX_NUMEL:
                steps.append(step)
                vals.append(out)
                continue
        del index[drawn:]
    computed = list(range(len(specs), len(vals)))
    if not computed:
        return generate(seed + 1_000_003)
    outputs = tuple(sorted({computed[-1], *rng.sample(computed, min(len(computed), rng.randrange(3)))}))
    backward = dtype.is_floating_point and rng.random() < 0.4
    return Case(seed, tuple(specs), tuple(index), tuple(steps), outputs, backward, rng.random() < 0.15)


@dataclasses.dataclass
class Verdict:
    seed: int
    result: str  # one of RESULTS
    detail: str = ""
    seconds: float = 0.0


def _loss(outs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """A scalar of every float output, each weighted by a fixed pattern (no output's gradient is uniform)."""
    total = 0
    for o in outs:
        if o.is_floating_point() and o.requires_grad:
            w = torch.arange(o.numel(), device=o.device, dtype=torch.float64).remainder(7).sub(3).reshape(o.shape)
            total = total + (o.double() * w).sum()
    return total


def _run(case: Case, fn: Callable[..., Any], inputs: list[torch.Tensor], backward: bool) -> list[torch.Tensor]:
    """Outputs of ``fn`` on ``inputs`` and, with ``backward``, the gradients of every float input."""
    if backward:
        inputs = [x.detach().requires_grad_(x.is_floating_point()) for x in inputs]
    outs = fn(*inputs)
    result = [o.detach() for o in outs]
    if backward:
        loss = _loss(outs)
        if isinstance(loss, torch.Tensor):
            grads = torch.autograd.grad(loss, [x for x in inputs if x.requires_grad], allow_unused=True)
            result += [g if g is not None else torch.zeros(()) for g in grads]
    return result


def _coarsest(case: Case) -> float:
    """The tolerance of the least precise float dtype a case computes in (an fp32 gradient that went through a
    bfloat16 step carries bfloat16's rounding, and eager's rounds differently)."""
    names = [d for _, d in case.inputs] + [ps[0] for op, _, ps in case.steps if op == "cast"]
    return max([TOLERANCE[getattr(torch, d)] for d in names if getattr(torch, d).is_floating_point] + [0.0])


def _compare(ours: torch.Tensor, eager: torch.Tensor, ref: torch.Tensor, what: str,
             coarsest: float = 0.0) -> Optional[str]:
    """Why ``ours`` is wrong (None: no worse than eager, within the tolerance of its dtype or ``coarsest``)."""
    if ours.shape != eager.shape or ours.dtype != eager.dtype:
        return f"{what}: {ours.dtype}{tuple(ours.shape)} vs eager {eager.dtype}{tuple(eager.shape)}"
    if not ours.is_floating_point():
        if torch.equal(ours.cpu(), eager.cpu()):
            return None
        bad = (ours.cpu() != eager.cpu()).nonzero()
        return f"{what}: {len(bad)} of {ours.numel()} differ, first at {bad[0].tolist()}"
    o, e, r = ours.cpu().double(), eager.cpu().double(), ref.cpu().double()
    same = (o == e) | (torch.isnan(o) & torch.isnan(e))  # equal infinities too
    nan_ok = torch.isnan(o) == torch.isnan(e)
    if not bool(nan_ok.all()):
        return f"{what}: NaN where eager has none (or the reverse) at {(~nan_ok).nonzero()[0].tolist()}"
    o, e, r = (torch.where(same, 0.0, t.nan_to_num(0.0)) for t in (o, e, r))
    tol = max(TOLERANCE[ours.dtype], coarsest)
    scale = max(1.0, float(r.abs().max())) if r.numel() else 1.0
    allowed = 2 * (e - r).abs() + tol * scale + tol * r.abs()
    err = (o - r).abs()
    if bool((err <= allowed).all()):
        return None
    k = int((err - allowed).argmax())
    return (f"{what}: {int((err > allowed).sum())} of {o.numel()} off, worst at flat {k}: ours {float(o.flatten()[k]):.6g}, "
            f"eager {float(e.flatten()[k]):.6g}, float64 {float(r.flatten()[k]):.6g}")


ANCHORS = {"host": "cpp", "opencl": "cpp", "sycl": "cpp", "cuda": "triton"}


@contextlib.contextmanager
def on_target(target: str, backend: str = "halide_xpu") -> Iterator[str]:
    """Inductor set to compile with ``backend`` (halide-xpu, or the anchor: Inductor's C++ or Triton) for
    ``target``; yields the device the tensors go to."""
    import torch._inductor.config as ic

    from . import config

    saved = (ic.cpu_backend, ic.cuda_backend, config.cpu_target, ic.fx_graph_cache)
    scope: Any = contextlib.nullcontext()
    if target == "cuda":
        ic.cuda_backend = backend
    else:
        ic.cpu_backend, config.cpu_target = backend, target
        if target == "sycl":
            from . import usm

            scope = usm.usm_tensors()
    ic.fx_graph_cache = False
    try:
        with scope:
            yield "cuda" if target == "cuda" else "cpu"
    finally:
        ic.cpu_backend, ic.cuda_backend, config.cpu_target, ic.fx_graph_cache = saved


def _compiled_problems(case: Case, target: str, backend: str) -> tuple[list[str], list[str]]:
    """What is wrong with ``case`` compiled by ``backend`` on ``target`` (a raised error is one problem), and the
    generated code. Raises ``ValueError`` when eager itself refuses the program."""
    from torch._inductor.utils import run_and_get_code

    fn = lambda *xs: evaluate(case, list(xs))  # noqa: E731
    with on_target(target, backend) as device:
        inputs = make_inputs(case, device)
        try:
            eager = _run(case, fn, inputs, case.backward)
            ref = _run(case, lambda *xs: evaluate(case, list(xs), f64=True),
                       [x.double() if x.is_floating_point() else x for x in inputs], case.backward)
        except Exception as e:  # noqa: BLE001 - the program itself is not legal: not ours to judge
            raise ValueError(f"{type(e).__name__}: {e}") from e
        torch._dynamo.reset()
        compiled = torch.compile(fn, dynamic=case.dynamic, fullgraph=True)
        try:
            ours, codes = run_and_get_code(_run, case, compiled, inputs, case.backward)
        except Exception as e:  # noqa: BLE001 - recorded with its traceback
            return ["raised: " + "".join(traceback.format_exception(e))[-2000:]], []
    names = [f"output {k}" for k in range(len(case.outputs))] + [f"grad {k}" for k in range(len(ours) - len(case.outputs))]
    problems = [p for o, e, r, n in zip(ours, eager, ref, names)
                if (p := _compare(o, e, r.to(e.dtype) if not e.is_floating_point() else r, n, _coarsest(case)))]
    return problems, codes


def check(case: Case, target: str) -> Verdict:
    """Compiles ``case`` with halide-xpu on ``target`` and judges it against eager (see the module docstring). A
    case that Inductor's own backend for the device (``ANCHORS``) gets wrong too is ``inductor_mismatch``: the
    lowering, not our kernels, decides it (a bfloat16 ``amax`` backward compares a max saved in bfloat16 with its
    input recomputed in fp32, finds no tie and divides by a count of 0, on Inductor's C++ as on ours)."""
    start = time.perf_counter()
    try:
        problems, codes = _compiled_problems(case, target, "halide_xpu")
    except ValueError as e:
        return Verdict(case.seed, "eager_error", str(e))
    if problems:
        result = "error" if problems[0].startswith("raised: ") else "mismatch"
        try:
            anchor, _ = _compiled_problems(case, target, ANCHORS[target])
        except ValueError:
            anchor = []
        # Inductor's own backend disagreeing with eager too (an Inductor semantic, not ours); an anchor that only
        # raised says nothing about our numbers: the case stays a mismatch (seed 7547 hid a NaN gradient so)
        if result == "mismatch" and any(not p.startswith("raised: ") for p in anchor):
            result = "inductor_mismatch"
        detail = "; ".join(problems) + (f" | {ANCHORS[target]}: " + "; ".join(anchor) if anchor else "")
        return Verdict(case.seed, result, detail, time.perf_counter() - start)
    if not any(KERNEL_MARK in c for c in codes):
        return Verdict(case.seed, "no_kernel", "", time.perf_counter() - start)
    return Verdict(case.seed, "pass", "", time.perf_counter() - start)


class Worker:
    """A child process that checks one seed at a time (``--worker TARGET``): a case that aborts the process (a
    device runtime's assertion) or hangs costs that case (``crash`` / ``timeout``) and the worker is replaced."""

    def __init__(self, target: str, timeout_s: float) -> None:
        self.target, self.timeout_s, self.proc = target, timeout_s, None

    def check(self, seed: int) -> Verdict:
        import selectors
        import subprocess

        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, "-m", "halide_xpu.graph_fuzz", "--worker", self.target],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True)
        self.proc.stdin.write(f"{seed}\n")
        self.proc.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        timed_out = not sel.select(self.timeout_s)
        sel.close()
        line = "" if timed_out else self.proc.stdout.readline()  # "" at end of file: the worker died
        if line:
            return Verdict(**json.loads(line))
        self.proc.kill()
        self.proc.wait()
        self.proc = None
        return Verdict(seed, "timeout" if timed_out else "crash", f"the worker {'hung' if timed_out else 'died'}")


def _serve(target: str) -> int:
    """The worker's loop: a seed per line in, a verdict (JSON) per line out on a private copy of stdout."""
    import os

    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything torch, Halide or a compiler prints goes to stderr
    for line in sys.stdin:
        v = check(generate(int(line)), target)
        out.write(json.dumps(dataclasses.asdict(v)) + "\n")
        out.flush()
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return _serve(argv[1])
    parser = argparse.ArgumentParser(prog="python -m halide_xpu fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="opencl", choices=["host", "opencl", "sycl", "cuda"])
    parser.add_argument("--seed", type=int, default=0, help="first case's seed")
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--show", action="store_true", help="print each case's program")
    parser.add_argument("--json", help="write every verdict to this JSON file")
    parser.add_argument("--timeout-s", type=float, default=600, help="per case, in its worker process")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from tqdm import tqdm

    verdicts, worker = [], Worker(args.target, args.timeout_s)
    bar = tqdm(range(args.seed, args.seed + args.count), desc=f"fuzz {args.target}", file=sys.stderr)
    for seed in bar:
        case = generate(seed)
        if args.show:
            print(case.describe())
        v = worker.check(seed)
        verdicts.append(v)
        if v.result not in ("pass", "no_kernel", "eager_error"):
            print(f"{v.result.upper()} {case.describe()}\n  {v.detail}", flush=True)
        bar.set_postfix(bad=sum(x.result in BAD for x in verdicts))
    counts = {r: sum(v.result == r for v in verdicts) for r in RESULTS}
    print(f"fuzz {args.target} seeds {args.seed}..{args.seed + args.count - 1}: {counts}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"target": args.target, "counts": counts, "verdicts": [dataclasses.asdict(v) for v in verdicts]},
                      f, indent=1)
    return 1 if any(counts[r] for r in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())

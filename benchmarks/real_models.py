"""Real models (transformers GPT-2, Llama, BERT; timm ResNet-18, ViT-tiny), random init, no downloads: inference and
one training step (forward + backward + AdamW), halide-xpu beside Triton / Inductor C++ and eager in the same run.

Each case reports: finite, error against eager (norm-wise, per output / gradient / updated parameter), our kernel
count and fallbacks, and step time of every backend. Results: ``<out>/real_models.json`` + ``real_models.md``.
    python3 benchmarks/real_models.py --device cuda                 # the GPU machine (carry the hf wheels)
    python3 benchmarks/real_models.py --device cpu --small --models gpt2,llama
    python3 benchmarks/real_models.py --models gpt2 --dtypes bfloat16 --modes train --backends ours_off \\
        --save-kernels k.jsonl                                      # our kernels, most device time first: tune's input
    python3 benchmarks/real_models.py --shape 12x400 --backends ours_off,ours,inductor,inductor_max --kernel-table
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="hx-real-"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import halide_xpu  # noqa: E402
from halide_xpu import stats  # noqa: E402
from halide_xpu.autotune.tune import capturing  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_cpu import bound_inductor, commit as _commit  # noqa: E402

# norm-wise relative error allowed against eager in the same dtype (bf16: two roundings of every intermediate)
TOLERANCE = {torch.float32: 2e-3, torch.bfloat16: 5e-2}


class _Seq2Seq(torch.nn.Module):
    """An encoder-decoder called as the others are: ``model(ids)`` (inference: the ids also feed the decoder) or
    ``model(input_ids=, labels=)`` (training: the decoder reads the labels shifted right)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config

    def forward(self, input_ids: torch.Tensor, labels: Optional[torch.Tensor] = None) -> Any:
        return self.model(input_ids=input_ids, labels=labels, decoder_input_ids=None if labels is not None else input_ids)


def _hf(kind: str, small: bool, shape: Optional[tuple[int, ...]] = None
        ) -> Callable[[], tuple[torch.nn.Module, Callable[[], tuple], Callable]]:
    def build() -> tuple[torch.nn.Module, Callable[[], tuple], Callable]:
        import transformers as tf

        batch, seq = shape if shape and len(shape) == 2 else (2, 64) if small else (8, 512)
        if kind == "gpt2":
            cfg = tf.GPT2Config(n_layer=2, n_positions=1024, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                **({"n_embd": 128, "n_head": 4} if small else {}))
            model, vocab = tf.GPT2LMHeadModel(cfg), cfg.vocab_size
        elif kind == "llama":
            cfg = tf.LlamaConfig(hidden_size=256 if small else 512, intermediate_size=688 if small else 1376,
                                 num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=4,
                                 vocab_size=32000, max_position_embeddings=1024)
            model, vocab = tf.LlamaForCausalLM(cfg), cfg.vocab_size
        elif kind == "t5":  # encoder-decoder: relative position bias, RMS norms, gated GELU, tied LM head
            cfg = tf.T5Config(num_layers=2, num_decoder_layers=2, num_heads=8, dropout_rate=0.0, vocab_size=32128,
                              feed_forward_proj="gated-gelu", d_model=128 if small else 512,
                              d_kv=16 if small else 64, d_ff=512 if small else 1024, decoder_start_token_id=0,
                              pad_token_id=0)
            model, vocab = _Seq2Seq(tf.T5ForConditionalGeneration(cfg)), cfg.vocab_size
        else:
            cfg = tf.BertConfig(num_hidden_layers=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                **({"hidden_size": 128, "num_attention_heads": 4,
                                                         "intermediate_size": 512} if small else {}))
            model, vocab = tf.BertForMaskedLM(cfg), cfg.vocab_size
        model.config.use_cache = False  # dropout is 0 above: eager and compiled draw different masks

        def inputs() -> tuple:
            ids = torch.randint(0, vocab, (batch, seq))
            return ids, ids.clone()

        def loss_fn(m: torch.nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            return m(input_ids=ids, labels=labels).loss

        return model, inputs, loss_fn
    return build


def _timm(name: str, small: bool, shape: Optional[tuple[int, ...]] = None
          ) -> Callable[[], tuple[torch.nn.Module, Callable[[], tuple], Callable]]:
    def build() -> tuple[torch.nn.Module, Callable[[], tuple], Callable]:
        import timm

        model = timm.create_model(name, pretrained=False)
        batch = shape[0] if shape else 2 if small else 32

        def inputs() -> tuple:
            return torch.randn(batch, 3, 224, 224), torch.randint(0, 1000, (batch,))

        def loss_fn(m: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(m(x), y, label_smoothing=0.1)

        return model, inputs, loss_fn
    return build


def models(small: bool, shape: Optional[tuple[int, ...]] = None) -> dict[str, Callable]:
    """Builders by name; ``shape``: (batch, sequence) for the transformers models, (batch,) for the timm ones."""
    return {"gpt2": _hf("gpt2", small, shape), "llama": _hf("llama", small, shape), "bert": _hf("bert", small, shape),
            "t5": _hf("t5", small, shape), "resnet18": _timm("resnet18", small, shape), "vit_tiny": _timm("vit_tiny_patch16_224", small, shape)}


def _rel(a: torch.Tensor, b: torch.Tensor, floor: float = 1e-12) -> float:
    """Norm-wise relative error; the denominator at least ``floor`` (see ``_errors``)."""
    a, b = a.detach().double(), b.detach().double()
    return ((a - b).norm() / b.norm().clamp_min(floor)).item()


def _errors(got: list[torch.Tensor], ref: list[torch.Tensor]) -> list[float]:
    """Each output's error against eager, relative to its own norm floored at 1e-3 x the median reference norm: a
    gradient that is exactly zero in exact arithmetic (BERT's attention key bias: softmax ignores a per-row
    constant) is rounding noise in eager, and any backend's relative error against noise is ~1."""
    norms = sorted(float(r.detach().double().norm()) for r in ref)
    floor = max(1e-12, 1e-3 * norms[len(norms) // 2])
    return [_rel(a, b, floor) for a, b in zip(got, ref)]


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time_ms(fn: Callable[[], Any], device: str, reps: int) -> float:
    """Median of ``reps`` timed calls after two warm-up calls."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        _sync(device)
        t = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


def _alternated_ms(fns: dict[str, Callable[[], Any]], device: str, reps: int, rounds: int = 3) -> dict[str, float]:
    """Step time per backend: the backends alternated over ``rounds`` rounds of ``reps`` calls, each backend's
    figure its best round's median (one backend timed after another on the shared GPU host saw Triton's ResNet-18
    step move from 17 to 26 ms between runs)."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, fn in fns.items():
            best[name] = min(best.get(name, math.inf), _time_ms(fn, device, reps))
    return best


BACKENDS = ("ours", "ours_off", "inductor", "inductor_max")  # ours_off: schedule database off (default tunables)


def _backend_config(backend: str, device: str) -> dict[str, Any]:
    key = "cuda_backend" if device == "cuda" else "cpu_backend"
    anchor = "triton" if device == "cuda" else "cpp"
    knobs: dict[str, Any] = {key: {"ours": "halide_xpu", "ours_off": "halide_xpu", "inductor": anchor,
                                   "inductor_max": anchor}[backend]}
    if backend == "inductor_max":  # Triton's own tuning of its pointwise and reduction kernels (every config
        # benchmarked, then refined); matmuls stay library calls, as with ours, so node groups still pair
        knobs.update(max_autotune_pointwise=True, coordinate_descent_tuning=True)
    return knobs


def _compiler(backend: str, device: str) -> Callable[..., Any]:
    """``bound_inductor`` for ``backend``; ``ours_off`` also compiles with ``halide_xpu.config.autotune = "off"``
    (every compile of it, a later recompile included)."""
    inner = bound_inductor(_backend_config(backend, device))
    if backend != "ours_off":
        return inner

    def compile(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        saved, halide_xpu.config.autotune = halide_xpu.config.autotune, "off"
        try:
            return inner(gm, example_inputs)
        finally:
            halide_xpu.config.autotune = saved

    return compile


def _ranked_kernels(case: str, seen: list[tuple[Any, str]], codes: list[str], times: dict[str, list[Any]]
                    ) -> list[dict[str, Any]]:
    """Our kernels of one case as tune's ``--kernels`` records (plus ``us``: device time in one call), most first."""
    from halide_xpu import compiler
    from kernel_table import kernel_groups

    groups = kernel_groups(codes) if codes else {}
    out, keys = [], set()
    for meta, source in seen:
        key = "hx:" + compiler.kernel_key(meta, source)[:12]
        if key in keys:
            continue
        keys.add(key)
        nodes = ",".join(groups.get(key, {}).get("nodes", ()))[:80]
        us = times.get(key, [0.0])[0]
        out.append({"name": f"{case} {key[3:]} {nodes}".strip(), "meta": repr(meta), "source": source, "us": us})
    return sorted(out, key=lambda r: -r["us"])


@contextlib.contextmanager
def _named_launches() -> Iterator[dict[str, Path]]:
    """Wraps every halide-xpu kernel launch in a profiler range ``hx:<cache key>:<variant>`` (its device time is
    the kernels it launched); yields {range name: the kernel's cache entry}."""
    from halide_xpu import runtime

    entries: dict[str, Path] = {}
    plain = runtime.KernelLauncher.__call__

    def call(self: Any, *args: Any) -> None:
        name = f"hx:{self.library.parent.name[:12]}:{self.variant}"
        entries.setdefault(name, self.library.parent)
        with torch.profiler.record_function(name):
            plain(self, *args)

    runtime.KernelLauncher.__call__ = call
    try:
        yield entries
    finally:
        runtime.KernelLauncher.__call__ = plain


def _top_kernels(fn: Callable[[], Any], device: str, count: int, dump: Optional[Path] = None) -> list[list]:
    """The ``count`` device kernels with the most self time in one call: [name, total µs, calls]; then, for
    halide-xpu, the ``count`` launches with the most device time (their sources copied under ``dump``)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with _named_launches() as entries, profile(activities=activities) as prof:
        fn()
        _sync(device)
    rows, launches = [], []
    if device == "cuda":  # our pipelines' GPU kernels by their PTX names (a range's device time was inflated)
        from kernel_table import attribute

        launches = [[f"{k}:{v[2]}", round(v[0], 1), v[1]] for k, v in attribute(prof, entries).items() if k.startswith("hx:")]
    for e in prof.key_averages():
        if e.key.startswith("hx:"):
            if device != "cuda":
                launches.append([e.key, round(e.cpu_time_total, 1), e.count])
            continue
        us = getattr(e, "self_device_time_total", 0) if device == "cuda" else e.self_cpu_time_total
        if us > 0 and (device == "cuda" or not e.key.startswith(("aten::", "cuda"))):
            rows.append([e.key[:120], round(us, 1), e.count])
    rows.sort(key=lambda r: -r[1])
    launches.sort(key=lambda r: -r[1])
    total = round(sum(r[1] for r in rows), 1)
    if dump is not None:
        for key, _, _ in launches[:count]:
            dest = dump / key.split(":")[1]
            dest.mkdir(parents=True, exist_ok=True)
            entry = entries.get(key) or next((p for k, p in entries.items() if k.startswith(key.rsplit(":", 1)[0])), None)
            for f in ("kernel.py", "schedule.txt", "done.json", "meta.repr"):
                if entry is not None and (entry / f).exists():
                    shutil.copy(entry / f, dest / f)
    return [["(all)", total, sum(r[2] for r in rows)], *rows[:count], *launches[:count]]


def run_case(name: str, build: Callable, dtype: torch.dtype, mode: str, device: str, backends: list[str],
             reps: int, profile: int = 0, dump: Optional[Path] = None, tables: Optional[dict] = None,
             kernels: Optional[list] = None) -> dict[str, Any]:
    """One model × dtype × mode ("infer" or "train"): eager reference, then each compiled backend. ``tables``: pair
    each of our kernels with Triton's kernel of the same node group (kernel_table.py), stored under the case's name;
    ``kernels``: gets the first of our backends' kernels (``_ranked_kernels``)."""
    torch.manual_seed(0)
    model, make_inputs, loss_fn = build()
    model = model.to(device=device, dtype=dtype).train(mode == "train")
    inputs = tuple(t.to(device, dtype if t.is_floating_point() else t.dtype) for t in make_inputs())

    def infer(m: torch.nn.Module, fn: Callable) -> Callable[[], list[torch.Tensor]]:
        def go() -> list[torch.Tensor]:
            with torch.no_grad():
                out = fn(*inputs[:1])
            return [getattr(out, "logits", out)]
        return go

    def train(m: torch.nn.Module, compiler: Optional[Callable]) -> Callable[[], list[torch.Tensor]]:
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, eps=1e-3, foreach=True)
        step = torch.compile(opt.step, backend=compiler) if compiler else opt.step
        fwd = torch.compile(loss_fn, backend=compiler) if compiler else loss_fn

        def go() -> list[torch.Tensor]:
            opt.zero_grad(set_to_none=True)
            loss = fwd(m, *inputs)
            loss.backward()
            grads = [p.grad.detach().clone() for p in m.parameters()]
            step()
            return [loss.detach(), *grads, *[p.detach().clone() for p in m.parameters()]]
        return go

    def runner(m: torch.nn.Module, compiler: Optional[Callable]) -> Callable[[], list[torch.Tensor]]:
        return train(m, compiler) if mode == "train" else infer(m, torch.compile(m, backend=compiler) if compiler else m)

    rec: dict[str, Any] = {"model": name, "dtype": str(dtype).split(".")[-1], "mode": mode, "ms": {}, "rel_err": {}}
    eager_model = copy.deepcopy(model)
    per_backend: dict[str, Any] = {}
    ref = runner(eager_model, None)()
    timed: dict[str, Callable[[], Any]] = {"eager": runner(copy.deepcopy(model), None)}
    torch._dynamo.reset()
    captured = kernels is None  # the first of our backends that compiles gives the kernel list
    for backend in backends:
        stats.reset()
        m = copy.deepcopy(model)
        try:
            capture = not captured and backend.startswith("ours")
            with torch._inductor.config.patch(_backend_config(backend, device)), contextlib.ExitStack() as scope:
                seen = scope.enter_context(capturing()) if capture else []
                fn = runner(m, _compiler(backend, device))
                if tables is not None or capture:
                    from torch._inductor.utils import run_and_get_code

                    got, codes = run_and_get_code(fn)
                else:
                    got = fn()
                errs = _errors(got, ref)
                rec["rel_err"][backend] = max(errs)
                rec.setdefault("worst_output", {})[backend] = [errs.index(max(errs)), len(errs)]
                rec.setdefault("finite", {})[backend] = all(bool(torch.isfinite(t).all()) for t in got)
                if backend.startswith("ours"):
                    rec["kernels"] = stats.counters["kernels_generated"]
                    rec["fallbacks"] = [f"{f.reason}" for f in stats.fallbacks][:5]
                timed[backend] = fn
                if tables is not None or (capture and device == "cuda"):
                    from kernel_table import device_times

                    per_backend[backend] = (codes, device_times(fn))
                if capture:
                    times = per_backend[backend][1] if backend in per_backend else {}
                    kernels += _ranked_kernels(f"{name} {rec['dtype']} {mode}", seen, codes, times)
                    captured = True
                if profile:
                    rec.setdefault("top_kernels", {})[backend] = _top_kernels(
                        fn, device, profile, dump / f"{name}_{rec['dtype']}_{mode}" if dump and backend == "ours" else None)
        except Exception as e:  # one failing backend never ends the run
            rec.setdefault("errors", {})[backend] = f"{type(e).__name__}: {str(e)[:600]}"
            traceback.print_exc(limit=-3)
    rec["ms"] = {b: round(ms, 3) for b, ms in _alternated_ms(timed, device, reps).items()}
    if tables is not None:
        from kernel_table import compare

        case, ours = f"{name} {rec['dtype']} {mode}", "ours" if "ours" in per_backend else "ours_off"
        pairs = {case: ("inductor", ours, "Triton", "triton_"),
                 f"{case} | vs Triton max-autotune": ("inductor_max", ours, "Triton max-autotune", "triton_"),
                 f"{case} | tuned vs default": ("ours_off", "ours", "default schedules", "hx:")}
        for title, (base, other, label, prefix) in pairs.items():
            if {base, other} <= set(per_backend):
                tables[title] = compare(per_backend[base], per_backend[other], base=label, base_prefix=prefix)
                rec.setdefault("kernel_tables", {})[title] = tables[title]["summary"]
    tol = TOLERANCE[dtype]
    anchor = max([v for k, v in rec["rel_err"].items() if k.startswith("inductor")] or [0.0])
    ours = [b for b in backends if b.startswith("ours")]
    rec["ok"] = bool(ours) and all(b in rec["rel_err"] and rec["finite"][b] and rec["rel_err"][b] <= max(tol, 2 * anchor)
                                   for b in ours) and rec.get("kernels", 0) > 0
    return rec


def write(out: Path, records: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "real_models.json").write_text(json.dumps({**meta, "records": records}, indent=1))
    lines = [f"# Real models, {meta['device_name']} ({meta['date']}, torch {meta['torch']})", "",
             "| model | dtype | mode | ok | rel err ours | rel err Inductor | ours ms | Inductor ms | eager ms | "
             "ours / Inductor | other ms | kernels | commit | note |", "|" + "---|" * 14]
    for r in records:
        ms, err = r["ms"], r["rel_err"]
        ratio = f"{ms['ours'] / ms['inductor']:.2f}" if "ours" in ms and "inductor" in ms else ""
        note = "; ".join(f"{k}: {v}" for k, v in r.get("errors", {}).items())[:200].replace("|", "/")
        lines.append(f"| {r['model']} | {r['dtype']} | {r['mode']} | {'yes' if r['ok'] else '**NO**'} | "
                     f"{err.get('ours', float('nan')):.2e} | {err.get('inductor', float('nan')):.2e} | "
                     f"{ms.get('ours', '')} | {ms.get('inductor', '')} | {ms.get('eager', '')} | {ratio} | "
                     f"{', '.join(f'{b} {ms[b]}' for b in ('ours_off', 'inductor_max') if b in ms)} | "
                     f"{r.get('kernels', '')} | {r.get('commit', meta.get('commit', ''))} | {note} |")
    (out / "real_models.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--target", default=None, help="cpu_target for --device cpu (host, opencl, sycl)")
    p.add_argument("--models", default="gpt2,llama,bert,t5,resnet18,vit_tiny")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--modes", default="infer,train")
    p.add_argument("--small", action="store_true", help="small configs and batches (CPU)")
    p.add_argument("--no-inductor", action="store_true", help="skip the Triton / C++ anchor")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--profile", type=int, default=0, help="record the N kernels with the most device time")
    p.add_argument("--dump", default=None, help="with --profile: copy the top halide-xpu kernels' sources here")
    p.add_argument("--kernel-table", action="store_true",
                   help="CUDA: pair each of our kernels with Triton's for the same node group (harvested_kernels.md)")
    p.add_argument("--out", default=None, help="default benchmarks/results/<device name>")
    p.add_argument("--shape", default=None, help="inputs: BATCHxSEQ (transformers models), BATCH (timm models)")
    p.add_argument("--backends", default="ours,inductor",
                   help=f"of {','.join(BACKENDS)} (ours_off: schedule database off; inductor_max: Triton with "
                        "max_autotune_pointwise + coordinate_descent_tuning)")
    p.add_argument("--save-kernels", type=Path, default=None,
                   help="write our kernels (first of our backends; on CUDA most device time first) as a tune --kernels list")
    args = p.parse_args()
    backends = [b for b in args.backends.split(",") if b and not (args.no_inductor and b.startswith("inductor"))]
    if set(backends) - set(BACKENDS):
        p.error(f"unknown backends {sorted(set(backends) - set(BACKENDS))}; known: {', '.join(BACKENDS)}")
    try:
        shape = tuple(int(x) for x in args.shape.split("x")) if args.shape else None
    except ValueError:
        p.error(f"--shape {args.shape!r}: expected BATCHxSEQ or BATCH, e.g. 12x400")
    torch._inductor.config.fx_graph_cache = False
    if args.target:
        halide_xpu.config.cpu_target = args.target
    if args.device == "cpu" and halide_xpu.config.resolved_cpu_target == "sycl":  # the emulation runs on USM tensors
        from halide_xpu import usm

        usm.usm_tensors_process_wide()
    name = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu-{halide_xpu.config.resolved_cpu_target}"
    out = Path(args.out or Path(__file__).parent / "results" / name.replace(" ", "_"))
    meta = {"device_name": name, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": " ".join(sys.argv), "commit": _commit(), "shape": args.shape or ("small" if args.small else "default")}
    table = models(args.small, shape)
    kernels: Optional[list[dict[str, Any]]] = [] if args.save_kernels else None
    records: list[dict[str, Any]] = []
    tables: Optional[dict[str, Any]] = {} if args.kernel_table and args.device == "cuda" else None
    for model_name in args.models.split(","):
        for dt in args.dtypes.split(","):
            for mode in args.modes.split(","):
                t = time.perf_counter()
                print(f"== {model_name} {dt} {mode}", flush=True)
                try:
                    rec = run_case(model_name, table[model_name], getattr(torch, dt), mode, args.device, backends,
                                   args.reps, args.profile, Path(args.dump) if args.dump else None, tables, kernels)
                except Exception as e:  # a model that cannot even build or run eagerly
                    rec = {"model": model_name, "dtype": dt, "mode": mode, "ms": {}, "rel_err": {}, "ok": False,
                           "errors": {"eager": f"{type(e).__name__}: {str(e)[:600]}"}}
                    traceback.print_exc(limit=-3)
                rec["wall_s"] = round(time.perf_counter() - t, 1)
                print(json.dumps(rec), flush=True)
                records.append(rec)
                write(out, records, meta)
                if tables:
                    from kernel_table import write as write_table

                    write_table(out, tables, {"device": name, "date": meta["date"], "commit": meta["commit"]})
    if kernels is not None:
        kernels.sort(key=lambda k: -k["us"])
        args.save_kernels.parent.mkdir(parents=True, exist_ok=True)
        args.save_kernels.write_text("".join(json.dumps(k) + "\n" for k in kernels))
        print(f"wrote {len(kernels)} kernels to {args.save_kernels}")
    bad = [f"{r['model']}/{r['dtype']}/{r['mode']}" for r in records if not r["ok"]]
    print(f"{len(records) - len(bad)}/{len(records)} ok" + (f"; not ok: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

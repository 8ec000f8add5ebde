"""Temporary: scatter_reduce.sum bf16 OpInfo samples on CUDA, ours vs Triton vs eager."""
import glob, os, shutil, sys
import torch
import halide_xpu  # noqa
from torch.testing._internal.common_methods_invocations import op_db
from torch._inductor.utils import run_and_get_code

op = next(o for o in op_db if o.name == "scatter_reduce" and o.variant_test_name == "sum")
dev = "cuda"
for k, s in enumerate(op.sample_inputs(dev, torch.bfloat16)):
    if k >= 3:
        break
    args = (s.input, *s.args)
    fn = lambda *a: op.op(*a, **s.kwargs)
    ref = fn(*args)
    for backend in ("halide_xpu", "triton"):
        torch._dynamo.reset()
        with torch._inductor.config.patch(cuda_backend=backend, fx_graph_cache=False):
            out, code = run_and_get_code(torch.compile(fn), *args)
        bad = ~torch.isclose(out.float(), ref.float(), rtol=1.6e-2, atol=1e-5)
        print(k, backend, "shape", tuple(s.input.shape), "args", [tuple(a.shape) if torch.is_tensor(a) else a for a in s.args],
              s.kwargs, "bad", int(bad.sum()), "/", bad.numel(), flush=True)
        if bad.any() and backend == "halide_xpu":
            idx = bad.nonzero()[:5]
            print("  ours", out[bad][:5].tolist(), "ref", ref[bad][:5].tolist(), "idx", idx.tolist())
            os.makedirs(os.environ["OUT"] + f"/scatter{k}", exist_ok=True)
            open(os.environ["OUT"] + f"/scatter{k}/wrapper.py", "w").write("\n".join(code))
            print("\n".join(code)[:6000])

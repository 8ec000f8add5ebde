"""GPU-machine probe: torch's integer ``abs`` then a clamp, in several Halide forms, on the CUDA target (the
H100 gave 1 for clamp(abs(INT_MIN), -1, 1) where torch gives -1; int16/32/64, not int8): prints each form's
values and the lowered statement of the one in use (halide_helpers.abs_value)."""
import os
import sys

import halide as hl
import numpy as np

from halide_xpu import halide_helpers as hx


def xor_shift(x):
    t = x.type()
    u = hl.UInt(t.bits())
    m = hl.reinterpret(u, x >> hl.cast(t, t.bits() - 1))
    return hl.reinterpret(t, (hl.reinterpret(u, x) ^ m) - m)


def unsigned_negation(x):  # halide_helpers.abs_value until 2026-12-07 (clamp gave 1 for INT_MIN on the H100)
    u = hl.UInt(x.type().bits())
    bits = hl.reinterpret(u, x)
    return hl.reinterpret(x.type(), hl.select(x < hl.cast(x.type(), 0), hl.cast(u, 0) - bits, bits))


FORMS = {"abs_value": hx.abs_value, "unsigned_negation": unsigned_negation, "xor_shift": xor_shift,
         "cast_abs": lambda x: hl.cast(x.type(), hl.abs(x))}
target = hl.get_host_target().with_feature(hl.TargetFeature.CUDA).with_feature(hl.TargetFeature.CUDACapability80)
out_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
for bits in (8, 16, 32, 64):
    t = hl.Int(bits)
    info = np.iinfo(f"int{bits}")
    data = np.array([0, -3, 5, 1, -1, 0, info.min, info.max], dtype=f"int{bits}")
    for name, form in FORMS.items():
        for post in ("none", "max", "clamp"):
            inp = hl.ImageParam(t, 1, "inp")
            x = hl.Var("x")
            a = form(inp[x])
            low = hl.max(a, hl.cast(t, -1))
            e = {"none": a, "max": low, "clamp": hl.min(low, hl.cast(t, 1))}[post]
            f = hl.Func("f")
            f[x] = e
            xo, xi = hl.Var("xo"), hl.Var("xi")
            f.gpu_tile(x, xo, xi, 8)
            buf = hl.Buffer(data)
            inp.set(buf)
            try:
                res = np.asarray(f.realize([8], target))
                print(f"int{bits} {name:17s} {post:5s} {res.tolist()}", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"int{bits} {name:17s} {post:5s} ERROR {e}", flush=True)
            if name == "abs_value" and post == "clamp" and bits == 32:
                f.compile_to_lowered_stmt(os.path.join(out_dir, "abs_clamp_int32.stmt"), [inp],
                                          hl.StmtOutputFormat.Text, target)

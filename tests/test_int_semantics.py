"""torch's integer rules in kernels: floor/trunc division and C remainder exact per dtype, wrapping overflow."""
from __future__ import annotations

import halide as hl
import numpy as np
import pytest
import torch

from conftest import compile_and_check, on_target
from halide_xpu import halide_helpers as hx

SIGNED = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64}


@pytest.mark.parametrize("name", sorted(SIGNED) + ["uint8"])
def test_division_helpers_exact(name: str) -> None:
    """Every sign combination, exact multiples, the most negative value, against numpy (division by 0 excluded)."""
    t = np.dtype(SIGNED.get(name, np.uint8))
    info = np.iinfo(t)
    if t.kind == "u":
        a, b = [7, 9, 200, 255, 0, 3, info.max], [2, 2, 3, 7, 9, 255, 1]
    else:
        a, b = [7, -7, 7, -7, 8, -8, 0, 5, info.min + 1, info.max], [2, 2, -2, -2, -2, -2, 3, -1, -1, 3]
    a, b = np.array(a, dtype=t), np.array(b, dtype=t)
    x = hl.Var("x")
    expected = {
        "floordiv": np.floor_divide(a, b),
        "truncdiv": (np.sign(a) * np.sign(b) * (np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64)))).astype(t),
        "mod": np.fmod(a, b),
    }
    for op, want in expected.items():
        f = hl.Func(op)
        f[x] = getattr(hx, op)(hl.Buffer(a)[x], hl.Buffer(b)[x])
        np.testing.assert_array_equal(np.asarray(f.realize([len(a)])), want, err_msg=f"{name} {op}")


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_integer_wraparound(target: str, dtype: torch.dtype) -> None:
    """``a*b + a//b - a%b`` wraps like eager in every integer dtype (int8 77*1 + 77 gave 127 when ``//`` went
    through float); the extreme values are always in the input, not left to a random draw."""
    info = torch.iinfo(dtype)
    g = torch.Generator().manual_seed(0)
    a = torch.randint(info.min, info.max, (256,), dtype=dtype, generator=g)
    b = torch.randint(1, 100, (256,), dtype=dtype, generator=g)
    a[:6] = torch.tensor([77, info.max, info.min, info.max - 1, 0, 1], dtype=dtype)
    b[:6] = torch.tensor([1, 2, 3, 1, 7, 99], dtype=dtype)
    compile_and_check(lambda a, b: a * b + a // b - a % b, a, b)
    compile_and_check(lambda a, b: a * a + b * 3 - a, a, b)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64])
def test_shifts_wrap_and_saturate_their_count(target: str, dtype: torch.dtype) -> None:
    """``a << b`` wraps (Halide assumed a signed 32-bit shift does not overflow: ``(x << 3) % (|x << 3| + 1)`` gave
    -1 for 1) and gives 0 for a count outside [0, bits); ``a >> b`` fills with the sign there, as torch does."""
    info = torch.iinfo(dtype)
    x = torch.tensor([5, info.max, 100, info.min, 77, 0, 1, info.max // 3] * 8, dtype=dtype)
    counts = [0, 1, 3, 7, 8, 9, 31, 32, 33, 63, 64, 70, 2, 5, 6, 4] * 4
    s = torch.tensor(counts if dtype != torch.int8 else [min(c, 127) for c in counts], dtype=dtype)
    compile_and_check(lambda x, s: (x << s, x >> s, (x << 3) % ((x << 3).abs() + 1)), x, s)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64])
def test_abs_keeps_the_signed_type(target: str, dtype: torch.dtype) -> None:
    """Halide's ``abs`` of a signed integer is unsigned: a clamp after it cast its bound -1 to the unsigned type
    (2**32 - 1 for int32) and ``x.abs().clamp(-1, 1)`` gave 1 for 0; ``abs`` of the minimum wraps, as in torch."""
    info = torch.iinfo(dtype)
    x = torch.tensor([0, -3, 5, 1, -1, 0, info.min, info.max] * 9, dtype=dtype)
    compile_and_check(lambda x: (x.abs().clamp(-1, 1), x.abs() - 2, torch.abs(x).amin()), x)


@pytest.mark.parametrize("src", [torch.float32, torch.bfloat16, torch.float16])
def test_negative_floats_to_integers_then_integer_math(target: str, src: torch.dtype) -> None:
    """A float converted to an integer, then integer arithmetic (which wraps through unsigned integers): Halide's
    simplifier merged ``cast(uint64, cast(int64, f))`` into ``cast(uint64, f)``, wrong for negative ``f``:
    ``x.long() * 3`` gave -3 for -2.0 on the host and 3 for -1.5 on OpenCL (``halide_helpers.float_to_int``)."""
    x = torch.tensor([1.5, 2.0, 0.5, -1.5, -2.0, 1.0, -0.5, 3.0, -7.75, -100.0, 0.0, -0.0] * 11, dtype=src)
    compile_and_check(lambda x: (x.long() * 3, x.int() - 1, (x.long() * 40503).cumsum(0), x.int().sum()), x)
    # to uint8 from a negative float: torch's (and Triton's) wrap through a signed integer, 255 for -1.5
    compile_and_check(lambda x: (x * 0.5).to(torch.int16).to(torch.uint8) + 1, x[x > -100])


@pytest.mark.parametrize("op", ["fmod", "remainder", "floor_divide", "trunc_div"])
def test_integer_division_by_zero_raises_on_host(monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    """Eager and Inductor's C++ raise ZeroDivisionError for an integer divisor of 0 on CPU; the host target too (the
    kernel's check pipeline, as on the device targets), and a nonzero divisor still computes exactly."""
    import halide_xpu
    from halide_xpu.runtime import HalideKernelError

    monkeypatch.setattr(torch._inductor.config, "cpu_backend", "halide_xpu")
    monkeypatch.setattr(halide_xpu.config, "cpu_target", "host")
    fn = {"fmod": torch.fmod, "remainder": torch.remainder, "floor_divide": torch.floor_divide,
          "trunc_div": lambda a, b: torch.div(a, b, rounding_mode="trunc")}[op]
    a = torch.arange(1, 33, dtype=torch.int32).reshape(4, 8) * 7 - 100
    b = torch.tensor([3, -5, 0, 7, 1, -1, 2, 9], dtype=torch.int32)
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True)
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as info:
        compiled(a, b)
    assert isinstance(info.value, HalideKernelError), info.value  # raised by our kernel, not by a fallback
    b[2] = 4
    torch.testing.assert_close(compiled(a, b), fn(a, b))


@pytest.mark.parametrize("op", ["fmod", "floor_divide"])
def test_integer_division_by_zero_on_device_targets(target: str, op: str) -> None:
    """The opencl and sycl targets run on CPU tensors, where eager raises ZeroDivisionError: the kernel's device
    check (an error word computed before it, read back after) fails the call; Halide's own values (0 for the
    quotient, ``a`` for the remainder) came back silently before. A valid divisor gives eager's values."""
    if target in ("host", "cuda"):
        pytest.skip("host raises (test above); CUDA eager has no error to match")
    fn = {"fmod": torch.fmod, "floor_divide": torch.floor_divide}[op]
    a = torch.arange(1, 9, dtype=torch.int32) * 7 - 30
    b = torch.tensor([3, -5, 0, 7, 1, -1, 2, 9], dtype=torch.int32)
    a, b = on_target((a, b))
    compiled = torch.compile(fn, fullgraph=True)
    from halide_xpu.runtime import HalideKernelError

    with pytest.raises(HalideKernelError, match="ZeroDivisionError"):  # raised by our kernel, not a fallback
        compiled(a, b)
    b[2] = 4
    torch.testing.assert_close(compiled(a, b), fn(a, b))


def test_bool_counts_accumulate_in_int32(target: str) -> None:
    """A count of bools (``(x > 0).sum()``, a loss's count of targets not ignored) is accumulated in int32 and cast
    to int64 (``hx.indicator``: an int64 count beside float sums sent a GPU kernel's partials to global scratch);
    a sum of int64 values keeps its int64 accumulator and wraps as eager's."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(37, 300, generator=g)
    code = compile_and_check(lambda x: ((x > 0).sum(), (x > 0.5).sum(1), (x * (x > 0)).sum()), x, rtol=1e-5,
                             atol=1e-4)
    assert "hx.indicator(" in code, "the count was not narrowed"
    big = torch.full((300,), 2**62, dtype=torch.int64)
    code = compile_and_check(lambda i: (i.sum(), (i > 0).sum()), big)  # 300 * 2**62 wraps in int64
    assert code.count("hx.indicator(") == 1, "only the bool count is narrowed"
    ints = torch.randint(-2**20, 2**20, (300, 24), generator=g, dtype=torch.int32)
    code = compile_and_check(lambda i: (i.sum(0), i.sum()), ints)  # int64 sums of int32 casts: not counts
    assert "hx.indicator(" not in code

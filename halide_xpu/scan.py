"""Inductor's ``ops.scan`` (cumsum, cumprod, logcumsumexp, cummax/cummin, associative_scan) as a Halide update.

The scan is a Func over the row's dimensions and the scanned one: its pure definition holds each element's values
(in the accumulator type of eager's scan on that device: fp16/bf16 in fp32, as Triton's do; fp32 in fp64 on CPU), and one update over ``RDom(1, n)`` combines
the running value at ``r - 1`` with the element at ``r``. The schedule (schedule/scan.py) runs rows in parallel and
each row's update in order. Few rows of static length take the chunked form (``_chunked``, ``config.scan_chunks``).
"""
from __future__ import annotations

import re
from typing import Any, Callable

import sympy
import torch
from torch._inductor.codegen.halide import HalideCSEVariable, Unsupported, halide_acc_type
from torch._inductor.ops_handler import AddParenHandler
from torch._inductor.utils import sympy_index_symbol
from torch._inductor.virtualized import OpsValue, V

from . import config, sizes


def _text(value: Any) -> str:
    return str(value.value if isinstance(value, OpsValue) else value)


class _CombineOverrides(AddParenHandler):
    """The kernel's op overrides on the scan's element references (text, no CSE variables): min/max through the
    NaN-propagating helpers, since upstream's NaN handling needs a CSE variable (logcumsumexp's combine lost a NaN
    and every later element of its row)."""

    def minimum(self, a: Any, b: Any) -> str:
        return f"hx.minimum({a}, {b})"

    def maximum(self, a: Any, b: Any) -> str:
        return f"hx.maximum({a}, {b})"


def _pack(parts: Any, several: bool) -> str:
    """The text of one scan value: a Tuple of ``parts`` for a scan of several values, else the one part."""
    return f"hl.Tuple([{', '.join(parts)}])" if several else parts[0]


def _combine(kernel: Any, combine_fn: Callable[[tuple, tuple], tuple], left: tuple, right: tuple) -> list[str]:
    """``combine_fn(left, right)`` as inline text (no CSE inside an update definition)."""
    with V.set_ops_handler(_CombineOverrides(kernel.overrides())):
        return [_text(v) for v in combine_fn(left, right)]


def _acc_type(dtype: torch.dtype) -> str:
    """The type a scan accumulates in, as eager's scan on the same device does (``at::acc_type``): on CPU tensors
    float32 in float64 (logcumsumexp's backward at inputs of 1e4 on opencl: 3.4e-4 off eager with a float32 running
    value), on GPUs float32; fp16/bf16 in float32 everywhere."""
    if dtype == torch.float32 and V.graph.get_current_device_or_throw().type == "cpu":
        return "hl.Float(64)"
    return halide_acc_type(dtype)


# GPUs: a row's scan is serial in one work-item (~70 ns a step on the H100), so a scan of few rows leaves the device
# idle: HF Llama's position_ids (8 rows of 512) took 37 us where Triton's per-row parallel scan takes 1 us. Such
# scans are chunked (``_chunked``): rows of static length split in config.scan_chunk-long pieces scanned in
# parallel, then each row's chunk totals, then every element combined with its chunk's prefix; a row of dynamic
# length goes to Inductor's Triton kernel (logged).
GPU_MIN_ROWS = 4096
GPU_SHORT_ROW = 32


def _too_few_rows(kernel: Any) -> bool:
    """Whether the scan takes the chunked form (``config.scan_chunks``): fewer rows than GPU_MIN_ROWS, each longer
    than GPU_SHORT_ROW."""
    mode = config.scan_chunks
    if mode == "off" or (mode == "gpu" and V.graph.get_current_device_or_throw().type == "cpu"):
        return False
    rows = length = 1
    for tree in kernel.range_trees:
        n = sizes.hint(tree.numel, GPU_MIN_ROWS)
        if tree.is_reduction:
            length *= n
        else:
            rows *= n
    return rows < GPU_MIN_ROWS and length > GPU_SHORT_ROW


def scan(kernel: Any, dtypes: tuple[torch.dtype, ...], combine_fn: Callable[[tuple, tuple], tuple],
         values: tuple[Any, ...]) -> tuple[HalideCSEVariable, ...]:
    """The scan's result Funcs, one per value; ``kernel.scan_funcs`` names the Func the update is on."""
    if len(kernel.reduction_renames) != 1:
        raise Unsupported("scan over several dimensions")
    numel = kernel.range_trees[-1].numel
    length = int(numel) if isinstance(numel, (int, sympy.Integer)) else None
    chunked = _too_few_rows(kernel)
    if chunked and length is None:
        raise Unsupported(f"a scan of fewer than {GPU_MIN_ROWS} rows longer than {GPU_SHORT_ROW} of dynamic length: "
                          "one serial work-item per row would leave the GPU idle, and chunks need a static length")
    (axis,) = list(kernel.reduction_renames)
    spread: list[HalideCSEVariable] = []
    dims: set[Any] = set()
    for value in values:
        if not isinstance(value, HalideCSEVariable) or value.used_dims is None:
            raise Unsupported(f"scan of {value!r}")
        if axis not in value.used_dims:  # a value constant along the scan: a Func over the scanned dim as well
            value = kernel.genfunc(f"{value}", kernel.sort_used_dims({*value.used_dims, axis}), shape=value.shape)
        spread.append(value)
        dims.update(value.used_dims)
    acc = kernel.newfunc(kernel.sort_used_dims(dims))
    n = kernel.kexpr(kernel.rename_indexing(kernel.range_trees[-1].numel))
    rdom = f"{acc.name}_rdom"
    kernel.body.writeline(f"{rdom} = hl.RDom([hl.Range(1, hl.max(1, {n}) - 1)])")
    here = {axis: sympy_index_symbol(f"{rdom}.x")}
    before = {axis: sympy_index_symbol(f"{rdom}.x") - 1}
    several = len(spread) > 1

    def element(i: int, where: dict) -> str:
        return acc.subs_str(where) + (f"[{i}]" if several else "")

    if chunked:
        _chunked(kernel, acc, axis, length, dtypes, spread, combine_fn)
        return _results(kernel, acc, dtypes, several)
    initial = [f"hl.cast({_acc_type(d)}, {v.subs_str(here)})" for d, v in zip(dtypes, spread)]
    start = [f"hl.cast({_acc_type(d)}, {v})" for d, v in zip(dtypes, spread)]
    kernel.body.writeline(f"{acc} = {_pack(start, several)}")
    left = tuple(element(i, before) for i in range(len(spread)))
    # the element at r from its own Func, not from acc[r]: a Tuple update that read acc[r] after storing one of its
    # elements would see the new value (Halide 21 orders a Tuple update's stores that way under strict_float: see
    # welford.combine)
    combined = _combine(kernel, combine_fn, left, tuple(initial))
    kernel.body.writeline(f"{acc.subs_str(here)} = {_pack(combined, several)}")
    kernel.scan_funcs.append(acc.name)
    return _results(kernel, acc, dtypes, several)


def _results(kernel: Any, acc: HalideCSEVariable, dtypes: tuple[torch.dtype, ...], several: bool) -> tuple:
    """The scan's values as Funcs in the op's own types (``acc`` holds the running values)."""
    results = []
    for i, d in enumerate(dtypes):
        element_ = f"{acc}[{i}]" if several else f"{acc}"
        if _acc_type(d) != halide_acc_type(d):  # float64 running values on CPU: the scan's own type outside it
            element_ = f"hl.cast({halide_acc_type(d)}, {element_})"
        elif not several:
            results.append(acc)
            continue
        part = kernel.newfunc(acc.used_dims)
        kernel.body.writeline(f"{part} = {element_}")
        results.append(part)
    return tuple(results)


def _stored_types(types: list[str]) -> list[str]:
    """The types a chunked scan's Funcs hold its values in: ``types`` (Halide type texts), or all 64-bit where their
    widths differ (cummax's float32 values beside int64 indices), since a GPU work-group's local memory holds one
    width (schedule/scan.py refuses mixed widths). Each element round-trips exactly (float32 -> float64 -> float32);
    every combine computes in the scan's own types."""
    parsed = [re.fullmatch(r"hl\.(Float|Int|UInt|Bool)\((\d*)\)", t) for t in types]
    bits = {int(m.group(2) or 1) if m else 0 for m in parsed}
    if len(bits) <= 1 or any(m is None for m in parsed):
        return types
    wide = {"Float": "hl.Float(64)", "Int": "hl.Int(64)", "UInt": "hl.UInt(64)", "Bool": "hl.UInt(64)"}
    return [wide[m.group(1)] for m in parsed]


MAX_CHUNKS = 1024  # chunks of a row: a work-item each in one work-group (CUDA's limit; schedule/scan.py checks the
# device's own)


def chunk_length(n: int) -> int:
    """Elements of a row of ``n`` one work-item scans serially in the chunked form: ``config.scan_chunk``, doubled
    until the row has at most MAX_CHUNKS chunks."""
    length = min(config.scan_chunk, n)
    while -(-n // length) > MAX_CHUNKS:
        length *= 2
    return length


def _chunked(kernel: Any, acc: HalideCSEVariable, axis: Any, n: int, dtypes: tuple[torch.dtype, ...],
             spread: list[HalideCSEVariable], combine_fn: Callable[[tuple, tuple], tuple]) -> None:
    """``acc`` as a chunked scan of rows of ``n`` elements: ``loc`` scans each ``config.scan_chunk``-long piece (rows
    x chunks in parallel, that many serial steps), ``pre`` each row's chunk totals in log2(chunks) steps (``pre_s<k>``:
    step k combines each total with the one 2**k chunks before it, all chunks at once; was one serial step a chunk,
    with a work-group barrier between steps), and ``acc`` combines every element with the total of the chunks before
    its own (the combine is associative: the order of the operands is kept, so cummax's ties still pick the later
    index)."""
    L = chunk_length(n)
    count = -(-n // L)
    name = acc.name
    loc, pre, j, c = f"{name}_loc", f"{name}_pre", f"{name}_j", f"{name}_c"
    dims = list(acc.used_dims)
    k = dims.index(axis)
    several = len(spread) > 1

    def at(func: str, inner: list[str], sub: str = "") -> str:  # func[rows with ``inner`` at the axis]
        args = [str(d) for d in dims[:k]] + inner + [str(d) for d in dims[k + 1:]]
        return f"{func}[{', '.join(args)}]{sub}"

    types = [_acc_type(d) for d in dtypes]
    stored = _stored_types(types)

    def elems(func: str, inner: list[str]) -> tuple[str, ...]:  # a chunk Func's elements, in the scan's types
        refs = [at(func, inner, f"[{i}]" if several else "") for i in range(len(spread))]
        return tuple(r if s == t else f"hl.cast({t}, {r})" for r, s, t in zip(refs, stored, types))

    def pack(parts: Any) -> str:  # a chunk Func's value
        return _pack([p if s == t else f"hl.cast({s}, {p})" for p, s, t in zip(parts, stored, types)], several)

    def value_at(index: str) -> list[str]:  # the elements at ``index`` (a Python name bound to an Expr)
        where = {axis: sympy_index_symbol(index)}
        return [f"hl.cast({t}, {v.subs_str(where)})" for t, v in zip(types, spread)]

    def combined(left: tuple[str, ...], right: tuple[str, ...]) -> list[str]:
        return _combine(kernel, combine_fn, left, right)

    w = kernel.body.writeline
    w(f"{j}, {c} = hl.Var('{j}'), hl.Var('{c}')")
    w(f"{loc}_len = {L}")  # the chunk's length, for the schedule (schedule/scan.py scan_chunks)
    w(f"{loc} = hl.Func('{loc}')")
    w(f"{loc}_i = hl.min({c} * {L} + {j}, {n - 1})")  # the last chunk's points past the row repeat its end
    w(f"{at(loc, [j, c])} = {pack(value_at(f'{loc}_i'))}")
    w(f"{loc}_r = hl.RDom([hl.Range(1, {L - 1})])")
    w(f"{loc}_ri = hl.min({c} * {L} + {loc}_r.x, {n - 1})")
    # a single value's step reads the element its pure definition loaded (all of a work-group's loads at once,
    # adjacent work-items adjacent points: schedule/scan.py); a Tuple's loads it again (a Tuple update that read
    # loc[r] after storing one of its elements would see the new value, see scan())
    right = tuple(value_at(f"{loc}_ri")) if several else elems(loc, [f"{loc}_r.x", c])
    step = combined(elems(loc, [f"{loc}_r.x - 1", c]), right)
    w(f"{at(loc, [f'{loc}_r.x', c])} = {pack(step)}")
    steps = (count - 1).bit_length()  # pre[c]: chunks 0..c combined, after ceil(log2(count)) doubling steps
    names = [f"{pre}_s{k}" for k in range(steps)] + [pre]
    w(f"{names[0]} = hl.Func('{names[0]}')")
    w(f"{at(names[0], [c])} = {pack(elems(loc, [str(L - 1), c]))}")
    for s in range(steps):  # after step s, names[s + 1][c] holds chunks c - 2**(s+1) + 1 .. c
        d, mine = 1 << s, elems(names[s], [c])
        w(f"{names[s + 1]} = hl.Func('{names[s + 1]}')")
        both = combined(elems(names[s], [f"hl.max({c} - {d}, 0)"]), mine)
        w(f"{at(names[s + 1], [c])} = {pack([f'hl.select({c} >= {d}, {b}, {m})' for b, m in zip(both, mine)])}")
    a = str(axis)
    own = elems(loc, [f"{a} % {L}", f"{a} / {L}"])
    both = combined(elems(pre, [f"hl.max({a} / {L} - 1, 0)"]), own)
    w(f"{acc} = {_pack([f'hl.select({a} < {L}, {o}, {b})' for o, b in zip(own, both)], several)}")
    kernel.scan_funcs += [loc, *names]

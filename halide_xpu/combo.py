"""Combo kernels: the independent pointwise kernels of one foreach/combo node as one Halide pipeline, one launch.

An optimizer's foreach step is one small kernel per parameter (BERT: 42 launches of AdamW's update, 42 more of the
step counters; Triton's combo kernel is one launch each). Here each part keeps its own algorithm (its source, the
arguments renamed apart) and every output of every part becomes an update over a 4-D RDom ``hxc``: lanes, vectors
per work-item, work-items and blocks (the loops' order). The blocks of all parts are laid end to end, and each
part's RDom spans all of them with a predicate for its own (one set of loop bounds for every update). Halide fuses
the updates' block and work-item loops (``compute_with``), so a work-group computes one part, its work-items
``per_item`` vectors of ``lanes`` points each, and a part's outputs are stored in an order in which no store
overwrites what a later store of the same work-item still reads (an in-place optimizer update). The stores go
through ``hx.row_index`` so that every block RVar is of one kind (``gpu_scatter`` does the same)."""
from __future__ import annotations

import dataclasses
import logging
import re
from typing import Optional

from . import pairs
from .target import targets
from .meta import DTYPES, KernelMeta, ScheduleSpec
from .schedule.common import accesses, costly_scalar_names, parse_defs

log = logging.getLogger(__name__)

FAMILY = "combo"
MAX_PARTS = 64  # parts per launch: bounds the kernel's compile time
# buffers per launch: Halide's CUDA runtime refuses a kernel of more than 256 arguments (BERT's AdamW step, 42 parts
# of 8 buffers, failed on the H200 with "more than 256 kernel arguments"); room is left for Halide's scalars
MAX_BUFFERS = 192
_ARG = re.compile(r"(?<![\w])(in_ptr|out_ptr)(\d+)(?!\d)")
_DEF = re.compile(r"^\s*(\w+)(?:\[.*?\])?\s*=\s*(.*)$")
_HEADER_END = "def algorithm():\n"


@dataclasses.dataclass(frozen=True)
class Part:
    """One kernel of a combo node, ready to merge: its metadata and source (bf16 words applied), the wrapper's
    argument expressions (one per ``meta.call_args``), its outputs in store order, the graph buffers it reads and
    writes."""

    meta: KernelMeta
    source: str
    call_args: tuple[str, ...]
    order: tuple[str, ...]
    reads: frozenset[str]
    writes: frozenset[str]

    @property
    def points(self) -> int:
        return int(self.meta.loop_vars[0].extent) if self.meta.loop_vars else 1


def _depends(source: str) -> dict[str, set[str]]:
    """Name -> the names its definitions read, from the source's assignments."""
    deps: dict[str, set[str]] = {}
    for line in source.splitlines():
        m = _DEF.match(line)
        if m:
            deps.setdefault(m.group(1), set()).update(re.findall(r"[A-Za-z_]\w*", m.group(2)))
    return deps


def _reads(name: str, deps: dict[str, set[str]]) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        for d in deps.get(todo.pop(), ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def _store_order(meta: KernelMeta, source: str, overwrites: dict[str, str]) -> Optional[tuple[str, ...]]:
    """The outputs in an order where each output that overwrites an input (``overwrites``: output -> input) is
    stored after every other output that reads that input; None if there is none (a cycle)."""
    deps = _depends(source)
    reads = {o: _reads(o, deps) for o in meta.outputs}
    after = {o: {p for p in meta.outputs if p != o and overwrites.get(o) in reads[p]} for o in meta.outputs}
    order: list[str] = []
    while len(order) < len(meta.outputs):
        ready = [o for o in meta.outputs if o not in order and after[o] <= set(order)]
        if not ready:
            return None
        order.append(ready[0])
    return tuple(order)


def part_of(meta: KernelMeta, source: str, call_args: tuple[str, ...], buffers: dict[str, str]) -> Optional[Part]:
    """``meta``'s kernel as a combo part, or None where it is not one (logged at debug): a GPU pointwise kernel over
    at most one loop Var of static extent, every buffer 1-D over it (or 0-d) and read or stored only at that Var,
    no index scalars, checks or ordered stores. ``buffers``: argument name -> graph buffer name."""
    why = _unfit(meta, source)
    if why:
        log.debug("halide_xpu: kernel not combined: %s", why)
        return None
    overwrites = {}
    for a in meta.args:
        if a.kind == "out":
            same = [b.name for b in meta.args if b.kind == "in" and buffers.get(b.name) == buffers.get(a.name)]
            if same:
                overwrites[a.name] = same[0]
    order = _store_order(meta, source, overwrites)
    if order is None:
        log.debug("halide_xpu: kernel not combined: its in-place outputs read each other's inputs")
        return None
    meta, source = pairs.apply(meta, source, inputs_only=False)  # a combo's parts keep one point per element
    reads = frozenset(buffers[a.name] for a in meta.args if a.kind == "in" and a.name in buffers)
    writes = frozenset(buffers[a.name] for a in meta.args if a.kind == "out" and a.name in buffers)
    return Part(meta, source, call_args, order, reads, writes)


def _unfit(meta: KernelMeta, source: str) -> Optional[str]:
    if meta.target not in ("cuda", "sycl", "opencl") or meta.schedule.family != "pointwise":
        return f"target {meta.target}, family {meta.schedule.family}"
    if meta.reductions or len(meta.loop_vars) > 1 or any(v.reduction for v in meta.loop_vars):
        return "more than one loop Var"
    if meta.loop_vars and meta.loop_vars[0].static_extent is None:
        return "a symbolic extent"
    if meta.error_word or meta.ordered_stores or meta.pairs or meta.scalar_lanes:
        return "device checks, ordered stores or a built variant"
    if not meta.outputs or _HEADER_END not in source:
        return "no outputs"
    var = meta.loop_vars[0].name if meta.loop_vars else None
    for a in meta.args:
        if not a.is_buffer or a.alias_of or a.partial:
            return f"argument {a.name}: a scalar, an alias or a partial output"
        if a.shape and (var is None or a.shape != (meta.loop_vars[0].extent,) or a.stride != ("1",)):
            return f"argument {a.name}: not 1-D over the loop Var"
        if not a.shape and a.kind == "out" and var is not None:
            return f"output {a.name}: 0-d beside a loop Var"
        index = accesses(source, a.name)
        if any(i not in ([var], ["()"]) for i in index) or (a.kind == "out" and len(index) != 1):
            return f"argument {a.name}: read or stored at another index"
    return None


def _layout(part: Part, threads: int, vector: int, per_item: int) -> tuple[int, int, int]:
    """(lanes, work-items, blocks) of a part: lanes the widest power of two up to ``vector`` that divides its points
    (no lane past the end), work-items up to ``threads``, each storing ``per_item`` vectors of lanes."""
    n = part.points
    lanes = vector
    while lanes > 1 and n % lanes:
        lanes //= 2
    items = -(-n // lanes)
    wi = min(threads, -(-items // 32) * 32)
    return lanes, wi, -(-items // (wi * per_item))


def _lanes(part: Part, vector_bytes: int) -> int:
    widest = max((4 if a.name in part.meta.pairs else DTYPES[a.dtype][3]) for a in part.meta.args)
    return max(1, vector_bytes // widest)


def merge(parts: list[Part], threads: int, vector_bytes: int = 16,
          per_item: int = 1) -> tuple[KernelMeta, str, tuple[str, ...]]:
    """One kernel of ``parts``: (metadata, source, the wrapper's argument expressions). Each work-item stores
    ``per_item`` vectors of each output of its part (``config.combo_per_item``), a work-group's vectors contiguous
    (coalesced) for each of them, which spreads its fixed cost (every part's buffer arguments loaded, the part's 0-d
    values such as AdamW's float64-exact ``pow(beta, step)``) over more points. H200, ResNet-18's AdamW step (24
    parts, Triton's foreach kernels 97 us): 161 us at 1, 186 us at 4 (benchmarks/bench_combo.py)."""
    # largest first: a work-group tests the block ranges of the parts before its own (a chain of branches), so
    # the parts holding most blocks are found first
    parts = sorted(parts, key=lambda part: -part.points)
    counters = {"in_ptr": 0, "out_ptr": 0}
    args, call_args, pair_names, inplace = [], [], [], []
    out_args, out_calls = [], []
    header = parts[0].source.split(_HEADER_END)[0]
    bodies, stores = [], []
    lanes_of = [_lanes(part, vector_bytes) for part in parts]
    wi = max(_layout(part, threads, lanes, per_item)[1] for part, lanes in zip(parts, lanes_of))
    layouts = [_layout(part, wi, lanes, per_item) for part, lanes in zip(parts, lanes_of)]
    total = sum(blocks for _, _, blocks in layouts)
    block = 0
    for i, part in enumerate(parts):
        renames: dict[str, str] = {}
        for a in part.meta.args:
            kind = "out_ptr" if a.kind == "out" else "in_ptr"
            renames[a.name] = f"{kind}{counters[kind]}"
            counters[kind] += 1
        body = _ARG.sub(lambda m: renames.get(m.group(0), m.group(0)), part.source.split(_HEADER_END)[1])
        for old in part.meta.outputs:  # the part's output Funcs become values the combo's outputs store
            body = body.replace(f"'{renames[old]}'", f"'{renames[old]}_part'")
        bodies.append(f"def part{i}():\n{body}")
        passed = dict(zip((a.name for a in part.meta.call_args), part.call_args))
        for a in part.meta.args:
            if a.kind == "in":
                args.append(dataclasses.replace(a, name=renames[a.name]))
                call_args.append(passed[a.name])
        for name in part.order:  # Halide's argument order: inputs, then outputs in the pipeline's order
            a = next(b for b in part.meta.args if b.name == name)
            shape, stride = (a.shape, a.stride) if a.shape else (("1",), ("1",))
            out_args.append(dataclasses.replace(a, name=renames[a.name], shape=shape, stride=stride))
            out_calls.append(passed[a.name])
        pair_names += [renames[n] for n in part.meta.pairs]
        inplace += [renames[n] for n in part.meta.inplace]
        lanes, _, blocks = layouts[i]
        n = part.points
        item = f"((hxc.w - {block}) * {per_item} + hxc.y) * {wi} + hxc.z"
        stores.append(f"    # part {i}: {n} points, {lanes} lanes x {wi} work-items x {per_item} x {blocks} blocks"
                      f" from block {block}")
        # every part's RDom spans every block (its own blocks by predicate): one set of loop bounds, which keeps
        # Halide's bounds inference of the fused loops small (their union over differing bounds grew ~cubically)
        stores.append(f"    hxc = hl.RDom([hl.Range(0, {lanes}), hl.Range(0, {per_item}), hl.Range(0, {wi}),"
                      f" hl.Range(0, {total})], 'hxc')")
        stores.append(f"    hxc.where(hxc.w >= {block})")
        stores.append(f"    hxc.where(hxc.w < {block + blocks})")
        stores.append(f"    hxc.where(({item}) * {lanes} < {n})")
        stores.append(f"    hxi = hl.unsafe_promise_clamped(({item}) * {lanes} + hxc.x, 0, {n - 1})")
        stores.append(f"    hxf = part{i}()")
        stores.append("    funcs.update({k: v for k, v in hxf.items() if k.startswith('in_ptr')})")
        zero_d = not part.meta.loop_vars
        for old in part.order:
            new = renames[old]
            stores.append(f"    funcs[{new!r}] = hx.combo_output(hxf[{new!r}], hxc, hxi, {new!r}, {n}, {zero_d})")
        stores.append(f"    funcs['hx_combo_parts'].append({[renames[o] for o in part.order]!r})")
        # the part's costly 0-d values: computed once per work-item where it stores several vectors (schedule.combo)
        scalars = costly_scalar_names(parse_defs(part.source))
        stores.append(f"    funcs['hx_combo_scalars'].append([hxf[n] for n in {scalars!r}])")
        block += blocks
    lines = [header.rstrip("\n"), "", *bodies, _HEADER_END.rstrip("\n"), "    funcs = {'hx_combo_parts': [], 'hx_combo_scalars': []}", *stores, "    return funcs", ""]
    first = parts[0].meta
    # Halide checks a host pointer for outputs an update stores (it copies them to the device first): the glue
    # passes device pointers there
    halide_target = targets.without_host_asserts(first.halide_target, first.target)
    meta = dataclasses.replace(
        first,
        halide_target=halide_target,
        args=tuple(args + out_args),
        loop_vars=(),
        outputs=tuple(a.name for a in out_args),
        reductions=(),
        schedule=ScheduleSpec(FAMILY, (("blocks", block), ("parts", len(parts)), ("per_item", per_item),
                                       ("wg", threads))),
        snapshots=(),
        inplace=tuple(inplace),
        pairs=tuple(pair_names),
    )
    return meta, "\n".join(lines), tuple(call_args + out_calls)


def groups(parts: list[Part]) -> list[list[Part]]:
    """``parts`` split into launches: one per target, up to ``MAX_PARTS`` parts and ``MAX_BUFFERS`` buffers, never a
    part that reads a buffer another part of its launch writes (each launch's buffers and reads/writes kept as it
    grows: one check per part and launch)."""
    found: list[list[Part]] = []
    tallies: list[tuple[tuple, int, set[str], set[str]]] = []  # (target key, buffers, reads, writes) per launch
    for part in parts:
        key = (part.meta.target, part.meta.halide_target, part.meta.device_index)
        for i, (group, (gkey, buffers, read, written)) in enumerate(zip(found, tallies)):
            if gkey != key or len(group) >= MAX_PARTS or buffers + len(part.meta.args) > MAX_BUFFERS:
                continue
            if part.reads & written or part.writes & (read | written):
                continue
            group.append(part)
            read |= part.reads
            written |= part.writes
            tallies[i] = (gkey, buffers + len(part.meta.args), read, written)
            break
        else:
            found.append([part])
            tallies.append((key, len(part.meta.args), set(part.reads), set(part.writes)))
    return found

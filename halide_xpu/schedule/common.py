"""Shared schedule helpers: a recorder that applies and logs directives, extents, var lookup."""
from __future__ import annotations

import functools
import math
import re
from typing import Any, Callable, Optional

import halide as hl

from ..meta import DTYPES, STORAGE_SUFFIX, KernelMeta
from ..target.targets import DeviceCaps

_UNIQUE_SUFFIX = re.compile(r"\$\d+")  # Halide's suffix for re-created Func names, noise in a printed schedule
_DEF = re.compile(r"^\s*(tmp\d+)\[[^\]]*\] = (.*)$", re.M)
_TRANSCENDENTAL = re.compile(r"\b(hl\.(exp|log|erf|pow|sin|cos|tan|atan|atan2)|hx\.(exp|tanh_vec|cuda_exp|cuda_erf))\(")
_NO_OPENCL_VECTORS = re.compile(r"\bhl\.(is_nan|is_inf|is_finite|erf)\(")
_LHS = re.compile(r"^\s*((?:tmp|out_ptr)\d+)\[([^\]]*)\] = (.*)$", re.M)
_REF = re.compile(r"\b(tmp\d+)\[")
_IDENTITY_CAST = re.compile(r"^hl\.cast\(hl\.\w+\(\d*\), (tmp\d+)\[([^\]]*)\]\)$")
_COSTLY = re.compile(r"\b(?:hl|hx)\.(?:tanh|exp|exp2|expm1|erf|erfc|log|log1p|log2|log10|pow|pow_constant_base|sin|cos|"
                     r"tan|atan|atan2|sigmoid|lgamma|digamma|cuda_exp|cuda_erf)\(")
_FAST_TRANSCENDENTAL = re.compile(r"\bhx\.cuda_exp\(")
_TO_HALF = re.compile(r"\bhl\.cast\(hl\.Float\(16\)")
_LOAD = re.compile(r"\b(in_ptr\d+)\[([^,\]]+)[,\]]")
_INDEX = re.compile(r"\b(in_ptr\d+)\[([^\[\]]+)\]")  # a load's whole index list (none nested)
_LOAD_START = re.compile(r"\b(in_ptr\d+)\[")
# Bytes every GPU launch adds to a work-group's local memory for Halide 21's uncounted padding (compiler.py's launch
# wrappers; native/usm_device.cpp's hx_local_bytes adds the same); schedules budget local memory less this
LOCAL_SLACK = 256
GUARD = hl.TailStrategy.GuardWithIf
SHIFT = hl.TailStrategy.ShiftInwards
GRID_YZ_MAX = 65535  # work-groups along a grid's y or z (CUDA's limit; x allows 2**31 - 1)


def indirectly_loaded(source: str) -> set[str]:
    """Inputs of ``source`` that some load indexes by another Func's value (``in_ptr0[tmp6[h1], h1]``)."""
    found = set()
    for m in _LOAD_START.finditer(source):
        depth, i = 1, m.end()
        while i < len(source) and depth:
            depth += {"[": 1, "]": -1}.get(source[i], 0)
            if source[i] == "[" and depth == 2:
                found.add(m.group(1))
            i += 1
    return found


def _fmt(x: Any) -> str:
    if isinstance(x, (hl.Var, hl.RVar)):
        return x.name()
    if isinstance(x, hl.TailStrategy):
        return f"hl.TailStrategy.{x.name}"
    if isinstance(x, hl.MemoryType):
        return f"hl.MemoryType.{x.name}"
    if isinstance(x, hl.Func):
        return x.name()
    if isinstance(x, hl.Stage):
        return x.name()
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    return repr(x)


def index_texts(pattern: re.Pattern, source: str) -> set[str]:
    """The texts of ``pattern``'s first group in a kernel's source, spaces and a trailing comma dropped."""
    return {m.group(1).replace(" ", "").rstrip(",") for m in pattern.finditer(source)}


def accesses(source: str, name: str) -> list[list[str]]:
    """Each access ``name[...]`` of a kernel's source as its index texts, nested brackets kept whole
    (``in_ptr1[h0, tmp3[h1]]`` -> ``["h0", "tmp3[h1]"]``)."""
    found = []
    for m in re.finditer(rf"\b{name}\[", source):
        depth, parts, part = 1, [], ""
        for ch in source[m.end():]:
            depth += {"[": 1, "]": -1}.get(ch, 0)
            if depth == 0 or (ch == "," and depth == 1):
                parts.append(part.strip())
                part = ""
                if depth == 0:
                    break
                continue
            part += ch
        found.append([p for p in parts if p])
    return found


def reads(source: str, name: str) -> set[str]:
    """The indices at which a kernel's source reads (or writes) ``name``, spaces dropped: ``{"h0"}`` for
    ``name[h0,]``, ``{"tmp3[h1],h0"}`` for ``name[tmp3[h1], h0]``."""
    return {",".join(p.replace(" ", "") for p in parts) for parts in accesses(source, name)}


class Recorder:
    """Applies schedule directives and keeps them as readable Python lines. With ``unroll_lanes`` every
    ``vectorize`` becomes ``unroll`` (lanes as unrolled scalar work, see ``Plan.unroll_lanes``); so does the
    ``vectorize`` of a stage stored per work-group (computed at a GPU block Var): Halide 21 packs a work-group's
    allocations into one local-memory buffer at offsets aligned to the element type only, yet keeps each vector
    store's alignment from before the packing. A 2-lane float32 store landed 4 bytes off its 8 (CUDA misaligned
    address, ``test_row_reductions_backward[cuda-130-bf16]``: a float32 row after a 1-element partial; H100)."""

    def __init__(self, unroll_lanes: bool = False) -> None:
        self.lines: list[str] = []
        self.history: dict[str, list[tuple[str, tuple]]] = {}  # directives applied to each Func's pure stage
        self.computed_at: dict[str, tuple[hl.Func, str]] = {}  # Func name -> (Func, name of the Var it is computed at)
        self.block_vars: set[str] = set()  # Vars given to gpu_blocks / the block Var of gpu_tile
        self.unroll_lanes = unroll_lanes
        self.labels: set[str] = set()  # every stage label given a directive ("f", "f.update(0)", ...)
        self.hoisted: dict[str, Any] = {}  # broadcast name -> the output computing it per work-item (pointwise)
        self._at_by_label: dict[str, str] = {}  # label of a Func given compute_at -> the name of the Var it is at

    def __call__(self, stage: Any, label: str, method: str, *args: Any) -> Any:
        if method == "vectorize" and (self.unroll_lanes or self.stored_per_work_group(label)):
            method = "unroll"
        result = getattr(stage, method)(*args)
        self.labels.add(label)
        if isinstance(stage, hl.Func):
            self.history.setdefault(stage.name(), []).append((method, args))
            if method == "compute_at":
                self.computed_at[stage.name()] = (stage, args[1].name() if isinstance(args[1], (hl.Var, hl.RVar)) else "")
                self._at_by_label[label] = self.computed_at[stage.name()][1]
        if method == "gpu_blocks":
            self.block_vars.update(a.name() for a in args if isinstance(a, (hl.Var, hl.RVar)))
        elif method == "gpu_tile" and len(args) >= 3:
            self.block_vars.add(args[1].name())
        line = f"{label}.{method}({', '.join(_fmt(a) for a in args)})"
        self.lines.append(_UNIQUE_SUFFIX.sub("", line))
        return result

    def note(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def stored_per_work_group(self, label: str) -> bool:
        """Whether the Func of stage ``label`` (``f`` or ``f.update(0)``) is computed at a GPU block Var."""
        return self._at_by_label.get(label.split(".")[0]) in self.block_vars

    def check_local_vectors(self) -> None:
        """Refuse the variant where a stage vectorized before its Func was stored per work-group (or before its
        block Var was given to ``gpu_blocks``) kept its vectors in local memory (see the class)."""
        for line in self.lines:
            label = line.split(".vectorize(")[0] if ".vectorize(" in line else None
            if label is not None and self.stored_per_work_group(label) and not self._in_registers(label):
                raise NotApplicable(f"{label} stores vectors in local memory (misaligned: see Recorder)")

    def _in_registers(self, label: str) -> bool:
        name = label.split(".")[0]
        return any(line.startswith(f"{name}.store_in(") and "Register" in line for line in self.lines)


class NotApplicable(RuntimeError):
    """A schedule variant does not fit this kernel's shape: the next one is tried."""


def parse_defs(source: str) -> dict[str, tuple[list[str], str]]:
    """Func name -> (its pure Vars, its definitions' right-hand sides), parsed from kernel source."""
    defs: dict[str, tuple[list[str], str]] = {}
    for m in _LHS.finditer(source):
        args = [a.strip() for a in m.group(2).split(",") if a.strip()]
        old = defs.get(m.group(1))
        defs[m.group(1)] = (args, (old[1] + "\n" if old else "") + m.group(3))
    return defs


def costly_scalar_names(defs: dict[str, tuple[list[str], str]]) -> list[str]:
    """The 0-d Funcs of ``defs`` (``parse_defs``) that compute a transcendental and are not read under a select.
    A Func computed at a loop and read only under a select is computed only when "used" (Halide's skip-stages), and
    where that condition is the same for every point Halide evaluates it in host code, loading device inputs
    there: a segfault (a scalar cross-entropy on CUDA, ``ignore_index`` read from the target)."""
    return [name for name, (args, rhs) in defs.items()
            if args == ["()"] and _COSTLY.search(rhs) and not _under_select(name, defs)]


def _under_select(name: str, defs: dict[str, tuple[list[str], str]]) -> bool:
    """Whether ``name`` reaches a select through the Funcs that read it."""
    seen, todo = {name}, [name]
    while todo:
        current = todo.pop()
        for other, (_, rhs) in defs.items():
            if other in seen or not re.search(rf"\b{re.escape(current)}\[", rhs):
                continue
            if "hl.select(" in rhs or "where(" in rhs:
                return True
            seen.add(other)
            todo.append(other)
    return False


class Plan:
    """The Funcs of one built algorithm plus what the kernel metadata says about them."""

    def __init__(self, meta: KernelMeta, funcs: dict[str, Any], caps: DeviceCaps, source: str = "") -> None:
        self.meta = meta
        self.funcs = funcs
        self.caps = caps
        self.source = source
        self.extents = {v.name: v.static_extent for v in meta.loop_vars}
        self.reduction_var_names = {v.name for v in meta.loop_vars if v.reduction}
        self.contiguous_var_names = {v.name for v in meta.loop_vars if v.contiguous}
        self.contiguous_bytes = {v.name: v.contiguous_bytes for v in meta.loop_vars}
        self.out_specs = {a.name: a for a in meta.args if a.kind == "out"}

    @property
    def tail(self) -> hl.TailStrategy:
        """How output loops end: ShiftInwards (recomputes a few points, no scalar tail) unless an output writes an
        input's buffer, where a recomputed point would read its own first write."""
        return GUARD if self.meta.inplace else SHIFT

    def shared_transcendentals(self) -> list[hl.Func]:
        """Pure Funcs computing exp/log/… that several other Funcs read: worth storing once per row, not recomputing."""
        defs: dict[str, str] = {}
        for m in _DEF.finditer(self.source):
            defs[m.group(1)] = defs.get(m.group(1), "") + "\n" + m.group(2)
        found = []
        for name, rhs in defs.items():
            if not _TRANSCENDENTAL.search(rhs) or name in self.meta.reductions or "\n" in rhs.strip():
                continue
            users = sum(1 for other, r in defs.items() if other != name and re.search(rf"\b{name}\[", r))
            users += sum(1 for line in self.source.splitlines() if re.match(rf"\s*out_ptr\d+\[.*\b{name}\[", line))
            func = self.funcs.get(name)
            if users >= 2 and isinstance(func, hl.Func) and not func.has_update_definition():
                found.append(func)
        return found

    def costly_scalars(self) -> list[hl.Func]:
        """0-d pure Funcs computing a transcendental (AdamW's bias corrections ``pow(beta, step)``): the same value
        for every point, worth computing once per work-group rather than in every work-item."""
        found = []
        for name in costly_scalar_names(self.defs):
            func = self.funcs.get(name)
            if isinstance(func, hl.Func) and not func.has_update_definition() and name not in self.meta.reductions:
                found.append(func)
        return found

    @functools.cached_property
    def defs(self) -> dict[str, tuple[list[str], str]]:
        """Func name -> (its pure Vars, its definitions' right-hand sides), parsed from the kernel source."""
        return parse_defs(self.source)

    def _identity_cast(self, name: str) -> bool:
        """Whether Func ``name`` is ``hl.cast(T, other[same args])`` of a Func ``other`` already of type ``T``."""
        args, rhs = self.defs.get(name, ([], ""))
        m = _IDENTITY_CAST.match(rhs)
        if not m or [a.strip() for a in m.group(2).split(",") if a.strip()] != args:
            return False
        this, other = self.funcs.get(name), self.funcs.get(m.group(1))
        return isinstance(this, hl.Func) and isinstance(other, hl.Func) and this.defined() and other.defined() \
            and this.type() == other.type()

    def reached(self, name: str) -> set[str]:
        """The Funcs (``tmpN``) Func ``name``'s definitions read, directly or through others (``name`` itself not)."""
        seen: set[str] = set()
        todo = [name]
        while todo:
            for ref in _REF.findall(self.defs.get(todo.pop(), ([], ""))[1]):
                if ref not in seen and ref != name:
                    seen.add(ref)
                    todo.append(ref)
        return seen

    def reads_reduction(self, name: str) -> bool:
        """Whether Func ``name`` depends on a reduction result (softmax's ``exp(x - max)``) or only on inputs."""
        return any(ref in self.meta.reductions for ref in self.reached(name))

    def readers(self, name: str, materialized: set[str]) -> set[str]:
        """The Funcs in ``materialized`` that read Func ``name``, directly or through Funcs that are inlined."""
        found: set[str] = set()
        todo, seen = [name], {name}
        while todo:
            ref = todo.pop()
            for other, (_, rhs) in self.defs.items():
                if other == ref or other in seen or ref not in _REF.findall(rhs):
                    continue
                seen.add(other)
                if other in materialized:
                    found.add(other)
                else:
                    todo.append(other)
        return found

    def row_resident(self, budget: int, row_bytes: Callable[[hl.Func], Optional[int]], exp_cost: int = 6,
                     fast_exp_cost: int = 2) -> list[hl.Func]:
        """Funcs spanning the reduced row that several passes over the row read (the reductions, the output
        when it spans the row, and the Funcs staged before), chosen greedily by the work each saves — a global
        load costs 2 per byte, a transcendental ``exp_cost`` (Halide's polynomials; ``fast_exp_cost`` for the
        CUDA hardware exp), any other op 1 — while their rows fit ``budget`` bytes of local memory: softmax's
        input, a residual norm's ``x + y``. H100 sweeps: with Halide's exp, fp32 softmax 1.2x Triton staging the
        input vs 1.3-1.5x staging the exp, fp16 softmax 1.25x staging the exp vs 1.45-1.65x staging the input;
        with the hardware exp fp16 softmax 1.12x staging the input vs 1.73x staging the exp."""
        defs = self.defs
        reductions = set(self.meta.reductions)
        dtypes = {a.name: a.dtype for a in self.meta.args}
        passes = [r for r in self.meta.reductions if r in defs]
        passes += [o for o in self.meta.outputs if o in defs and any(a in self.reduction_var_names for a in defs[o][0])]

        def refs(name: str) -> set[str]:
            return {r for r in _REF.findall(defs[name][1]) if r != name and r in defs and r not in reductions}

        def spans_row(name: str) -> bool:
            return name.startswith("tmp") and any(a in self.reduction_var_names for a in defs[name][0])

        def reach(name: str, staged: list[str], seen: set[str]) -> set[str]:
            for r in refs(name) - seen:
                seen.add(r)
                if r not in staged:
                    reach(r, staged, seen)
            return seen

        def cost(name: str, staged: list[str]) -> int:
            rhs = defs[name][1]
            loads = sum(2 * DTYPES.get(dtypes.get(m[0], "float32"), DTYPES["float32"])[3] for m in _LOAD.findall(rhs))
            fast = len(_FAST_TRANSCENDENTAL.findall(rhs))
            own = 1 + loads + exp_cost * (len(_TRANSCENDENTAL.findall(rhs)) - fast) + fast_exp_cost * fast
            # a Func that does not span the row (a per-row target index, a row's max) is computed once per row,
            # not per element: staging what reads it saves nothing of its cost (BERT's log-softmax backward staged
            # ``target == h0`` as bytes in global scratch: 2x Triton)
            return own + sum(1 if r in staged or not spans_row(r) else cost(r, staged) for r in refs(name))

        staged: list[str] = []
        while True:
            counts: dict[str, int] = {}
            for p in passes + staged:
                for name in reach(p, staged, set()):
                    counts[name] = counts.get(name, 0) + 1
            best: Optional[tuple[int, str]] = None
            for name, n in counts.items():
                func = self.funcs.get(name)
                if self._identity_cast(name):  # a same-type cast (upstream's f32 cast of an f32 sum) reads its
                    continue  # source's stage: staging both held one row twice (GPT-2's residual LayerNorm)
                size = row_bytes(func) if isinstance(func, hl.Func) and spans_row(name) and name not in staged else None
                if n < 2 or size is None or size > budget:
                    continue
                score = (n - 1) * cost(name, staged)
                if score >= 4 and (best is None or score > best[0]):  # saves at least a global load per element
                    best = (score, name)
            if best is None:
                return [self.funcs[n] for n in staged]
            staged.append(best[1])
            budget -= row_bytes(self.funcs[best[1]]) or 0

    @property
    def gpu_vectors(self) -> bool:
        """Whether GPU work-items may take several lanes. Halide 21's OpenCL backend fails (an empty "Error:") on
        vectorized is_nan/is_inf (which erf, clamp and max/min NaN checks use), so such OpenCL kernels stay scalar."""
        return not ("opencl" in self.meta.halide_target and _NO_OPENCL_VECTORS.search(self.source))

    @functools.cached_property
    def unroll_lanes(self) -> bool:
        """CUDA kernels with 8/16/64-bit buffers or fp16 conversions unroll their lanes instead of vectorizing.
        Halide 21's PTX backend emits vector memory operations only for 4 x 32-bit; narrower vectors are built
        from scalar loads with 64-bit shuffles (gelu on bf16: 65 instructions per element vectorized, 53
        unrolled), and it drops vectorized float -> half conversions (stores the float's bits: found by
        softmax_fp16 on the H100; scalar conversions are right). A pointwise kernel's 64-bit output unrolls too:
        its tail's predicated store of a 64-bit vector aborts the process in Halide 21's PTX codegen (LLVM's
        "Val should be a vector" in ``CreateMaskedStore``: ``arange`` to a dynamic size, GPUTests
        ``graph_partition_unbacked_symint_as_output``). Every kernel built for pointers off the vector
        alignment (``KernelMeta.scalar_lanes``, any target) unrolls them too. In a pointwise kernel without
        masked loads, an input the innermost loop Var does not index (the row ids of an embedding gather) is loaded
        once per row, not as a vector, and does not count. Masked loads (an RDom update per load) and reduction
        kernels (whose first Var may be the reduction's) keep the rule: their int64 temporaries, vectorized, hit the
        same masked-store abort (the LM loss backward's targets)."""
        if self.meta.scalar_lanes:
            return True
        if "cuda" not in self.meta.halide_target.split("-"):
            return False
        pointwise = not self.meta.reductions
        inner = self.meta.loop_vars[0].name if self.meta.loop_vars and "hl.RDom(" not in self.source else ""

        def narrow(a: Any) -> bool:  # a 64-bit result per row (argmax) leaves the row's fp32 loads vectorized
            size = 4 if a.name in self.meta.pairs else DTYPES[a.dtype][3]  # bf16 pairs: 32-bit words
            if pointwise and a.kind == "in" and inner and not any(re.search(rf"\b{inner}\b", i)
                                                                   for i in reads(self.source, a.name)):
                return False  # read per row (a gather's int64 row ids): one scalar load, not a vector of lanes
            return a.is_buffer and (size < 4 or (size != 4 and (a.kind == "in" or pointwise)))

        return any(narrow(a) for a in self.meta.args) or bool(_TO_HALF.search(self.source))

    @property
    def min_wg(self) -> int:
        """The smallest work-group a schedule makes: a whole sub-group (16 where unknown), however short the
        row. Intel's OpenCL CPU compiler crashed the process on work-groups of 4 with barriers (a softmax
        backward over rows of 10); idle work-items are guarded."""
        return min(self.caps.max_work_group, self.caps.sub_group or 16)

    def is_named(self, func: Any, names: tuple[str, ...]) -> bool:
        """Whether ``func`` is the algorithm's Func called one of ``names`` (Halide renames a re-created Func
        ``out_ptr0$1``: compare objects, not ``Func.name()``)."""
        return any(self.funcs.get(n) is func for n in names)

    def name_of(self, func: Any, names: Any) -> Optional[str]:
        """The one of ``names`` that is ``func`` (``is_named``), None if none is."""
        return next((n for n in names if self.funcs.get(n) is func), None)

    def outputs(self) -> list[hl.Func]:
        return [self.funcs[n] for n in self.meta.outputs]

    def transposed_inputs(self, x: hl.Var, y: hl.Var) -> list[Any]:
        """Inputs read along ``y`` at their stride-1 dim while the output runs along ``x`` (a transpose): 2-D ones,
        and N-D ones indexed ``[y, x, others...]`` (attention's heads: (batch, tokens, heads, dim) to (batch, heads,
        tokens, dim)), the other dims indexed by neither ``x`` nor ``y``."""
        found = []
        mentions = lambda v, text: re.search(rf"\b{v.name()}\b", text) is not None  # noqa: E731
        # a masked load's select index (kernel._select_masked_load) reaches a fixed element for masked-off points:
        # a tile staged from it would span from there to the tile. Any such load of an input rules it out, not
        # only that load (Llama's bf16 rotary backward read its cos/sin table both ways: the tile grew to 512 x 8
        # work-items and the launch failed, CUDA_ERROR_INVALID_VALUE)
        masked = {m.group(1) for m in _LOAD.finditer(self.source) if "hl.select(" in m.group(2)}
        # an input also read at loaded indices (a gather): its tile would be read there too, far outside the tile
        # (graph_fuzz seed 7765: ``in_ptr0[tmp6[h1], h1]`` read a 65-row tile at row 999, the OpenCL CPU runtime
        # segfaulted)
        masked |= indirectly_loaded(self.source)
        for m in _LOAD.finditer(self.source):
            name, first = m.group(1), m.group(2)
            param = self.funcs.get(name + STORAGE_SUFFIX, self.funcs.get(name))
            stride1 = re.search(rf"^\s*{name}(?:{STORAGE_SUFFIX})?\.dim\(0\)\.set_bounds\([^)]*\)\.set_stride\(1\)", self.source, re.M)
            if not (isinstance(param, hl.ImageParam) and stride1 and mentions(y, first) and not mentions(x, first)
                    and all(p is not param for p in found) and name not in masked):
                continue
            if param.dimensions() > 2:
                full = _INDEX.match(self.source, m.start())
                dims = [d.strip() for d in full.group(2).split(",")] if full else []
                if (len(dims) != param.dimensions() or not mentions(x, dims[1]) or mentions(y, dims[1])
                        or any(mentions(x, d) or mentions(y, d) for d in dims[2:])):
                    continue
            elif param.dimensions() != 2:
                continue
            found.append(param)
        return found

    def lane_inputs(self, x: hl.Var) -> Optional[list[Any]]:
        """The 1-D inputs of a 1-D kernel, each loaded only at ``x`` itself (``in_ptrN[x,]``), or None where any
        other load exists (those a staging of ``x``'s points, ``pointwise._gpu_staged``, would not cover)."""
        found: list[Any] = []
        for m in _INDEX.finditer(self.source):
            name, index = m.group(1), m.group(2).replace(",", "").strip()
            param = self.funcs.get(name + STORAGE_SUFFIX, self.funcs.get(name))
            if not isinstance(param, hl.ImageParam):
                return None
            if param.dimensions() == 0:
                continue
            if param.dimensions() != 1 or index != x.name():
                return None
            if all(p is not param for p in found):
                found.append(param)
        return found

    def reductions(self) -> list[hl.Func]:
        return [self.funcs[n] for n in self.meta.reductions if isinstance(self.funcs.get(n), hl.Func)]

    def output_extents(self, name: str) -> list[Optional[int]]:
        """Static extent of each output dimension (innermost first), None when symbolic."""
        out = []
        for e in self.out_specs[name].shape:
            try:
                out.append(int(e))
            except ValueError:
                out.append(None)
        return out

    def var_extent(self, func: hl.Func, var: hl.Var) -> Optional[int]:
        if var.name() in self.extents:
            return self.extents[var.name()]
        for name in self.out_specs:  # by object: a re-created Func is named out_ptr0$1
            if self.funcs.get(name) is func:
                names = [v.name() for v in func.args()]
                return self.output_extents(name)[names.index(var.name())]
        return None

    def is_contiguous(self, var: hl.Var) -> bool:
        """Whether ``var`` indexes a stride-1 dimension of some input."""
        return var.name() in self.contiguous_var_names

    def most_contiguous(self, vars_: list[Any]) -> Any:
        """The Var of ``vars_`` along which the most input bytes are stride-1 (the first where none is)."""
        best = max(vars_, key=lambda v: (self.is_contiguous(v), self.contiguous_bytes.get(v.name(), 0)))
        return best if self.is_contiguous(best) else vars_[0]

    def is_reduction_var(self, var: hl.Var) -> bool:
        return var.name() in self.reduction_var_names


def total(extents: list[Optional[int]]) -> Optional[int]:
    if any(e is None for e in extents):
        return None
    return math.prod(e for e in extents if e is not None)


def pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def fuse_all(rec: Recorder, func: Any, vars_: list[Any], label: str, prefix: Optional[str] = None) -> Any:
    """Fuse ``vars_`` (innermost first; Vars of a Func, or RVars of an update stage) into one of their kind, named
    ``<prefix>_f<i>`` (default prefix ``label``)."""
    fused = vars_[0]
    kind = hl.RVar if isinstance(fused, hl.RVar) else hl.Var
    for i, v in enumerate(vars_[1:]):
        new = kind(f"{prefix or label}_f{i}")
        rec(func, label, "fuse", fused, v, new)
        fused = new
    return fused


_EXPR_TEXT = re.compile(r"^<halide\.Expr of type \w+: (.*)>$")


def update_pure_vars(f: hl.Func, i: int) -> list[hl.Var]:
    """The Vars of ``f`` that update ``i`` keeps as pure arguments (a scan's update leaves out the scanned dim)."""
    texts = set()
    for arg in f.update_args(i):
        m = _EXPR_TEXT.match(str(arg))
        texts.add(m.group(1) if m else str(arg))
    return [v for v in f.args() if v.name() in texts]


def hoist_scalars(rec: Recorder, plan: Plan, out: hl.Func, block: str) -> None:
    """GPU: each costly 0-d Func (``Plan.costly_scalars``) computed once, not in every work-item: an AdamW update of
    38.6M bf16 parameters on the H100 spent 316 of its 516 us on two float64-exact ``pow(beta, step)`` per
    work-item. Tunable ``scalar_hoist``: 1 at ``out``'s block Var ``block`` (Halide runs a block-level stage on
    one work-item and shares the value through local memory), 2 in a one-work-item kernel of its own, 0 inline.
    Only where every output shares ``out``'s kernel (one output, or outputs fused at one loop)."""
    how = plan.meta.schedule.get("scalar_hoist", 1)
    if not how or block not in rec.block_vars:
        return
    for f in plan.costly_scalars():
        if how == 2:
            rec(f, f.name(), "compute_root")
            rec(f, f.name(), "gpu_single_thread")
        else:
            rec(f, f.name(), "compute_at", out, hl.Var(block))


def primary_output(plan: Plan) -> hl.Func:
    """The output a fused reduction schedule is built around: the one with the most dims (first on ties)."""
    outs = plan.outputs()
    return max(outs, key=lambda f: (len(f.args()), -outs.index(f)))


def source_name(f: hl.Func) -> str:
    """``f``'s name in the kernel source (Halide appends ``$n`` to a Func re-created in one process)."""
    return _UNIQUE_SUFFIX.sub("", f.name())


def reduction_extent(plan: Plan, f: hl.Func) -> Optional[int]:
    """Static extent of the kernel's (first) reduction loop, None when symbolic or absent."""
    names = [v.name for v in plan.meta.loop_vars if v.reduction]
    exts = [plan.extents[n] for n in names]
    return exts[0] if exts else None


def reduction_size(plan: Plan) -> Optional[int]:
    """Static number of points of the kernel's reduction domain (every reduction loop), None when symbolic."""
    exts = [plan.extents[v.name] for v in plan.meta.loop_vars if v.reduction]
    return total(exts) if exts else None


def fused_rvar(rec: Recorder, f: hl.Func) -> hl.RVar:
    """``f``'s update reduction as one RVar: several RVars (a reduction over dims Inductor could not merge, e.g. a
    channels-last batch-norm backward fused with a max-pool backward: N, H, W split by the windows) are fused
    innermost first, which keeps the order of the points."""
    rvars = list(f.rvars(0))
    fused = rvars[0]
    for i, outer in enumerate(rvars[1:]):
        new = hl.RVar(f"{f.name()}_rf{i}")
        rec(f.update(), f"{f.name()}.update()", "fuse", fused, outer, new)
        fused = new
    return fused


def inner_reduction(plan: Plan) -> bool:
    """A reduction over a contiguous (stride-1) input dimension: vectorize by rfactor, not across rows. Where inputs
    are stride-1 along a reduced and a kept dim, the one with more input bytes decides (a LayerNorm backward's column
    partials read bf16 rows along the kept dim and a small rstd along the reduced one: a column reduction)."""
    loop_vars = plan.meta.loop_vars
    reduced = [v.contiguous_bytes for v in loop_vars if v.reduction and v.contiguous]
    kept = [v.contiguous_bytes for v in loop_vars if not v.reduction and v.contiguous]
    return bool(reduced) and max(reduced) >= max(kept, default=0)


def separate_local_widths(rec: Recorder) -> None:
    """Funcs stored per work-group (computed at a GPU block Var) share one local-memory allocation, which Halide
    21 sizes wrongly when their element widths differ (FuseGPUThreadLoops: groups padded to the widest type
    without counting it; slots reused across types sized with truncating division). An int64 count beside
    float32 sums gave garbage, or a crashed process on Intel's OpenCL CPU device. With mixed widths, only the
    4-byte Funcs stay in local memory; the others go to per-launch global scratch (``MemoryType.Heap``)."""
    stored = {name: f for name, (f, at) in rec.computed_at.items() if at in rec.block_vars
              and ("store_in", (hl.MemoryType.Register,)) not in rec.history.get(name, [])}
    widths = {name: {t.bytes() for t in f.types()} for name, f in stored.items()}
    if len(set().union(*widths.values()) if widths else set()) <= 1:
        return
    for name, f in stored.items():
        memory = hl.MemoryType.GPUShared if widths[name] == {4} else hl.MemoryType.Heap
        rec(f, name, "store_in", memory)

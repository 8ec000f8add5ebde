"""Inductor kernel → Halide algorithm source (no schedule inside) plus a ``KernelMeta`` for compiling and calling."""
from __future__ import annotations

import itertools
import logging
import re
from typing import Any, Optional

import sympy
import torch
from torch._inductor.codegen.common import DeferredLine, SizeArg
from torch._inductor.codegen.halide import (DimensionInfo, HalideCSEVariable, HalideKernel, HalidePrinter, Unsupported,
                                            halide_type)
from torch._inductor.utils import IndentedBuffer
from torch.utils._ordered_set import OrderedSet
from torch._inductor.virtualized import V
from torch.utils._sympy.functions import Identity
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

from . import config, sizes
from .kernel_checks import DeviceChecks
from .kernel_reductions import ReductionLowering
from .wrapper_calls import emit_call
from .meta import STORAGE_SUFFIX, ArgSpec, KernelMeta, LoopVar
from .overrides import HalideXpuOverrides
from .schedule import default_spec
from .target import targets

log = logging.getLogger(__name__)


_BF16_STORE = re.compile(r"^(\s*out_ptr\d+\[[^=]*\] = )hl\.cast\(hl\.BFloat\(16\), ")


_BF16_ACCUMULATE = re.compile(r"^(\s*)(out_ptr\d+)(\[[^=]*\]) \+= hl\.cast\(hl\.BFloat\(16\), (.*)\)$")


_HL_F64 = re.compile(r"\bhl\.f64\(((?:float\('-?(?:inf|nan)'\))|[-+0-9.eE]+)\)")


def _exact_f64(line: str) -> str:
    """Upstream's float64 literals (``masked``'s other value, reduction defaults) as ``hx.f64``: exact on the
    OpenCL C printer, which writes ``hl.f64`` through float32 (a pad value of 0.1 in float64 was off by 4e-9)."""
    return _HL_F64.sub(r"hx.f64(\1)", line) if "hl.f64(" in line else line


def _bf16_as_bits(line: str) -> str:
    """Rewrite bfloat16 casts for device targets: stores produce bits, accumulating stores add in fp32 to the
    element's value and store bits, other casts round in fp32 (on CUDA with the hardware conversion,
    halide_helpers.bf16_round)."""
    line = _BF16_ACCUMULATE.sub(r"\1\2\3 = hx.bf16_bits(hx.bf16_to_f32(\2\3) + \4)", line)
    line = _BF16_STORE.sub(r"\1hx.bf16_bits(", line)
    return line.replace("hl.cast(hl.BFloat(16), ", "hx.bf16_round(")


def _f16_keeps_nan(line: str) -> str:
    """Casts to float16 where bfloat16 is a Halide type (the host target) go through ``hx.f16_cast``: Halide's
    simplifier folds ``cast(f16, cast(f32, b))`` of a bfloat16 ``b`` into a direct conversion that turns NaN into
    ±inf (``x.var(0).to(float16)`` of one bf16 row gave -inf, found by ``graph_fuzz``)."""
    return line.replace("hl.cast(hl.Float(16), ", "hx.f16_cast(") if "hl.cast(hl.Float(16), " in line else line


def _known_number(bound: Any) -> bool:
    """A finite number (sympy's ``is_finite`` holds for Inductor's ``int_oo``, the bound of an unknown size)."""
    return bool(bound.is_number and bound.is_finite) and not bound.has(int_oo, -int_oo)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


class HalideXpuPrinter(HalidePrinter):
    """Upstream's printer, plus the sympy functions of dynamic shapes it printed as Python (``math.ceil`` of a Halide
    Expr raised TypeError, ``IntInfinity`` a NameError): integer ceil/floor of an integer quotient exactly, in
    Halide's integer division (floor for the positive sizes it meets), and ±int_oo as the index type's limits."""

    def _int_quotient(self, expr: Any, rounding: str) -> Optional[str]:
        inner = expr.args[0]
        if type(inner).__name__ != "IntTrueDiv":
            return None
        a, b = (self._print(x) for x in inner.args)
        return f"(({a}) / ({b}))" if rounding == "floor" else f"(-((-({a})) / ({b})))"

    def _print_CeilToInt(self, expr: Any) -> str:
        return self._int_quotient(expr, "ceil") or self._print_ceiling(expr)

    def _print_FloorToInt(self, expr: Any) -> str:
        return self._int_quotient(expr, "floor") or self._print_floor(expr)

    def _print_IntInfinity(self, expr: Any) -> str:
        return f"{V.kernel.index_dtype}.max()"

    def _print_NegativeIntInfinity(self, expr: Any) -> str:
        return f"{V.kernel.index_dtype}.min()"


class HalideXpuKernel(DeviceChecks, ReductionLowering, HalideKernel):
    """Upstream ``HalideKernel`` translation; our own source format, metadata, schedule spec and call."""

    overrides = HalideXpuOverrides  # type: ignore[assignment]
    kexpr = staticmethod(HalideXpuPrinter().doprint)  # type: ignore[assignment]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reduction_funcs: list[str] = []
        self.scan_funcs: list[str] = []  # Funcs holding a scan's update (scan.py), scheduled as the scan family
        self.partial_outputs: set[str] = set()  # output args whose other elements keep their contents
        self.ordered_outputs: set[str] = set()  # outputs whose stores must run in loop order (the last write wins)
        self._pending_checks: list[tuple[Any, str, Any]] = []  # (index, size, load mask) of checks not yet attached
        self.device_checks: list[Any] = []  # Funcs ``select(ok, 0, code)`` reduced into the error word (device_check)

    def finalize_indexing(self, indices: Any) -> None:
        """Upstream's dimensions, from every range tree's whole extent as well as the indices the kernel uses: its
        dead-symbol elimination keeps only the loop dimensions some index reads, so a reduction over a broadcast
        (``x.expand(64, 33).sum()``: only ``r % 33`` is read) lost its other 64 and summed 33 elements, and an
        accumulating store of broadcast values lost repeats. With each tree's full range named, the dimensions
        multiply to the tree's extent."""
        whole = [tree.lookup(sympy.S.One, tree.numel).symbol() for tree in self.range_trees]
        try:
            super().finalize_indexing([*indices, *whole])
        except AssertionError as e:  # upstream's split of a tree into dims found no factor (dynamic sizes, seed 7552)
            raise Unsupported(f"no Halide dimensions for the sizes {[t.numel for t in self.range_trees]}") from e

    def store(self, name: str, index: Any, value: Any, mode: Any = None) -> None:  # type: ignore[override]
        """Upstream leaves an indirect or accumulating store's other elements undefined (``hl.undef``): the output
        buffer keeps what it holds there, so device targets must start from the buffer's contents (compiler.py)."""
        prepared = self.prepare_indexing(index)
        # a value varying along a dim the index does not use writes each element several times (x[[0, 0]] += ...):
        # like an indirect store, an update over a domain (the last write wins, as in eager), not a pure definition
        spread = bool(set(getattr(value, "used_dims", None) or ()) - set(prepared.free_symbols))
        if mode is not None or spread or self.is_indirect_indexing(prepared):
            self.partial_outputs.add(self.args.output(name))
        if spread and mode is None:
            self.ordered_outputs.add(self.args.output(name))
        self._store_over_domain = spread
        if mode is not None:
            value = self._repeat_over_unused_dims(prepared, value)
        if self._pending_checks:
            value = self._attach_checks(value)
        try:
            super().store(name, index, value, mode)
        finally:
            self._store_over_domain = False

    def _repeat_over_unused_dims(self, index: Any, value: Any) -> Any:
        """An accumulating store adds its value once per element of the loop domain, also along the dims neither the
        index nor the value reads (``index_add`` of a broadcast scalar at indices proven to be ``[0, 0]``): the value
        becomes a Func over those dims too, so the update's RDom iterates them (seed 8111 added once for twice)."""
        loop_dims = [v for v in self.halide_vars if self.inside_reduction or v not in self.reduction_renames]
        read = {*self.used_dims_from_index(index), *(value.used_dims or ())}
        unused = [d for d in loop_dims if d not in read]
        if not unused:
            return value
        return self.genfunc(f"{value}", self.sort_used_dims({*(value.used_dims or ()), *unused}), shape=value.shape)

    def is_indirect_indexing(self, index: Any) -> bool:  # type: ignore[override]
        return getattr(self, "_store_over_domain", False) or super().is_indirect_indexing(index)

    def apply_offset_to_dimension(self, dims, offset):  # type: ignore[override]
        """Upstream folds a constant offset into a dim's index; grow that dim's extent so bounds checks hold: to the
        index's upper bound (``install_dims``) where it is known (a flip reads ``1048575 - h0``: adding the offset to
        the extent doubled it, and the OpenCL target copied a buffer that large: a crashed process), else by the
        offset."""
        before = [d.expr for d in dims]
        super().apply_offset_to_dimension(dims, offset)
        for dim, old in zip(dims, before):
            if dim.expr == old:
                continue
            upper = self._upper(dim.expr)
            if not _known_number(upper):
                dim.size = dim.size + (dim.expr - old)
            elif V.graph.sizevars.statically_known_gt(upper + 1, dim.size):  # a scalar at offset 3: x[3] of 1
                dim.size = upper + 1

    def install_dims(self, var, dims, offset, is_store):  # type: ignore[override]
        """Upstream sizes a dimension by its index at the loop's last iteration, which is the largest only for
        increasing indices: ``(h0 + 7) % 10`` (roll, fftshift) peaks before that. Use the index's upper bound."""
        for dim in dims:
            if dim.expr is not None and not isinstance(dim.expr, sympy.Symbol):
                upper = self._upper(dim.expr)
                if _known_number(upper) and V.graph.sizevars.statically_known_gt(upper + 1, dim.size):
                    dim.size = upper + 1
                elif not _known_number(upper):
                    # a symbolic modulus (flip of repeat_interleave under dynamic shapes: ``(-1 - h0) // 2 %
                    # ks0**2``; a roll: ``ks0*ks3*((h2 + 57) % ks2)``): the values stay below its bound, whatever
                    # the last iteration gives
                    peak = sizes.modular_upper_bound(dim.expr, {s: self.sym_size(s) for s in self._ranges(dim.expr)})
                    if peak is not None:
                        dim.size = sympy.Max(dim.size, peak + 1)
        try:
            return super().install_dims(var, dims, offset, is_store)
        except AssertionError:  # upstream's evaluate_max needs value ranges, which kernel size symbols lack
            pass
        # (dynamic shapes: ``vr must not be None for symbol ks0``, a cat's backward under graph_fuzz)
        for old, new in zip(self.buffer_dimensions[var], dims):
            if old.stride != new.stride:
                return False
            if old.size != new.size or old.expr != new.expr:
                old.size, old.expr = sympy.Max(old.size, new.size), None
        return True

    def _upper(self, expr: Any) -> Any:
        """Upper bound of an index expression over the loop ranges (not a number when sizes are symbolic)."""
        try:
            return bound_sympy(expr, self._ranges(expr)).upper
        except (RuntimeError, AssertionError, TypeError):  # sympy/ValueRanges give up on some symbolic forms
            return sympy.oo

    def _ranges(self, expr: Any) -> dict[Any, ValueRanges]:
        """Each loop or gather symbol of ``expr`` over [0, its extent); unbounded above when the extent is symbolic."""
        ranges = {}
        for s in expr.free_symbols:
            try:
                size = sympy.sympify(self.sym_size(s))
            except (KeyError, AttributeError):
                continue
            ranges[s] = ValueRanges(0, size - 1 if size.is_number else int_oo)
        return ranges

    def prepare_indexing(self, index: Any) -> Any:  # type: ignore[override]
        """Upstream's, without Inductor's ``Identity`` wrappers (a cat's pointwise lowering keeps ``Identity(768)``
        from folding): sympy does not evaluate through them, so a dimension's extent stayed ``1 + Identity(2303)``,
        a number no ``int()`` takes: the kernel's layout read as dynamic (no ``pairs``, no tuning) and its masked
        load kept the guarded per-point form (GPT-2's q/k/v gradient cat, 2.4x Triton on the H200)."""
        index = super().prepare_indexing(index)
        return index.replace(Identity, lambda x: x) if index.has(Identity) else index

    def indexing_to_dimensions(self, var, index, is_store):  # type: ignore[override]
        """A masked load's indices are clamped per dimension (``make_index_str``), which is exact only while each
        dimension's index stays in [0, extent). Upstream folds offsets and negative strides into the dimensions
        (reflection padding reads ``15 - h0 - 10*h1`` as ``5 - h0``, ``1 - h1``): a dimension can dip below 0 while
        the address is valid. Such loads go through a 1-D view of the whole buffer with the flat index clamped."""
        try:
            with sizes.kernel_sizes_resolved(self.args.sizevars):
                var, dims = super().indexing_to_dimensions(var, index, is_store)
        except AssertionError:  # upstream asserts a store's index is affine per loop var (a cat into a strided
            # buffer over a flattened range: 16*(h0//8) + h0 % 8); Inductor's own kernel takes the node, logged
            if not is_store:
                raise
            raise Unsupported(f"a store whose index is not affine in the loop vars: {index}") from None
        except (AttributeError, TypeError):  # sympy's simplify of a length holding ``Where`` (a roll of a gathered
            # row under dynamic shapes: StrictLessThan has no diff): read through a 1-D view of the buffer
            if is_store:
                raise Unsupported(f"a store index sympy cannot size: {index}") from None
            return self._flat_view(var, sympy.expand(self.rename_indexing(index)))
        self._refuse_symbolic_negative_strides(dims)
        if not is_store and self._dips_below_its_offset(var, dims):
            return self._flat_view(var, sympy.expand(self.buffer_offsets[var] + sum(d.expr * d.stride for d in dims)))
        if is_store or not getattr(self, "_masked_load", False) or len(dims) < 2 or any(d.expr is None for d in dims):
            return var, dims
        if all(self._lowest(d.expr) >= 0 for d in dims):
            return var, dims
        flat = sympy.expand(self.buffer_offsets[var] + sum(d.expr * d.stride for d in dims))
        return self._flat_view(var, flat, keep=dims)

    def _dips_below_its_offset(self, var: str, dims: list) -> bool:
        """Whether a load's dimensions may index below 0 from a symbolic pointer offset that upstream could not
        fold into them (not known >= the stride): under dynamic shapes a flip of every other element read
        ``in_ptr0[0, -h0]`` from ``ks1 - 2 + 2*n`` with its dimension declared ``[0, n)`` (Halide's bounds error,
        graph_fuzz seed 8685). Such loads read a 1-D view at the whole flat index (``_flat_view``)."""
        offset = sympy.sympify(self.buffer_offsets.get(var, 0))
        if offset.is_number or any(d.expr is None for d in dims):
            return False
        with sizes.kernel_sizes_resolved(self.args.sizevars):
            for d in dims:
                try:
                    low = bound_sympy(d.expr, self._ranges(d.expr)).lower
                except (RuntimeError, AssertionError, TypeError):
                    return True
                if not V.graph.sizevars.statically_known_geq(low, 0):
                    return True
        return False

    def _flat_view(self, var: str, flat: Any, keep: Optional[list] = None) -> tuple[str, list]:
        """A 1-D view of the whole buffer behind ``var`` read at ``flat`` (``keep``: the dimensions to use where
        the buffer's size is unknown; without them such a load goes to Inductor's own kernel)."""
        base = var.split("_view")[0]
        size = self._storage_size(base, flat)
        if size.has(int_oo, sympy.oo):  # no known bound on the buffer (symbolic): keep the dimensions
            if keep is None:
                raise Unsupported(f"a load of {base} at {flat}: no dimensions and no known size")
            return var, keep
        view = [DimensionInfo(flat, size if size.is_number else self.rename_indexing(size), 1)]
        if base not in self.buffer_dimensions:  # the buffer's first load: the view is its layout (views alias it)
            self.install_dims(base, view, 0, False)
            return base, view
        for i in itertools.count():
            alias = f"{base}_flat{i}"
            if self.install_dims(alias, view, 0, False):
                if alias not in self.buffer_aliases[base]:
                    self.buffer_aliases[base].append(alias)
                return alias, view

    def _refuse_symbolic_negative_strides(self, dims: list) -> None:
        """A dimension whose stride is a size expression not known nonnegative (``-ks0``: a flipped row of a
        reverse scan under dynamic shapes, logcumsumexp's backward) cannot go to a device: Halide's OpenCL runtime
        aborts the process on a negative stride (``buf->dim[i].stride >= 0``, found by ``graph_fuzz``). The host
        runtime takes it; device targets give the node to Inductor's own kernel, logged."""
        if self.target_name() == "host":
            return
        with sizes.kernel_sizes_resolved(self.args.sizevars):
            for d in dims:
                stride = sympy.sympify(d.stride)
                if not stride.is_number and not V.graph.sizevars.statically_known_geq(stride, 0):
                    raise Unsupported(f"a stride not known to be nonnegative ({stride}): GPU runtimes refuse it")

    def _lowest(self, expr: Any) -> Any:
        try:
            low = bound_sympy(expr, self._ranges(expr)).lower
        except (RuntimeError, AssertionError, TypeError):
            return -1
        return low if _known_number(low) else -1

    def _storage_size(self, arg: str, flat: Any) -> Any:
        """Elements of the buffer behind input ``arg`` (its layout's storage), else the flat index's bound + 1."""
        for buf, name in self.args.input_buffers.items():
            if name == arg:
                try:
                    return sympy.sympify(V.graph.get_buffer(buf).get_layout().storage_size())
                except (AttributeError, KeyError, NotImplementedError):
                    break
        return sympy.sympify(self._upper(flat)) + 1

    def load(self, name: str, index: Any) -> Any:  # type: ignore[override]
        """A masked load is upstream's guarded Func (``f = other; f = load + mask`` over a one-point RDom whose
        ``where`` is the mask: the load runs only where the mask holds, so it is memory-safe however far a
        dimension's declared extent passes the real buffer), read through a pure Func whose call clamps every
        coordinate to its loop's extent. A Func with an update cannot be inlined and runs at its consumer's
        innermost loop; inside a GuardWithIf-split reduction that is rfactored, Halide 21's bounds inference gives
        it (and its inputs) the unguarded range (ViT-tiny's LayerNorm over 192 read ``in_ptr0`` up to 255 on CUDA:
        a work-group of 128 covers 256). The clamped call bounds that range; real loop points are unchanged."""
        if self._load_mask and self.target_name() != "host":  # device targets (opencl and sycl run it on CPUs)
            branch_free = self._select_masked_load(name, index)
            if branch_free is not None:
                return self._attach_checks(branch_free) if self._pending_checks else branch_free
        self._masked_load = bool(self._load_mask)
        try:
            guarded = super().load(name, index)
        finally:
            self._masked_load = False
        dims = getattr(guarded, "used_dims", None)
        if not self._load_mask or not dims:
            return self._attach_checks(guarded) if self._pending_checks else guarded
        coords = []
        for d in dims:
            try:
                size = self.sym_size(d)
            except KeyError:
                return guarded
            coords.append(f"hl.clamp({d}, 0, {self.kexpr(self.rename_indexing(size - 1))})")
        result = self.newfunc(dims)
        self.body.writeline(f"{result} = {guarded.name}[{', '.join(coords)}]")
        return self._attach_checks(result) if self._pending_checks else result

    def _select_masked_load(self, name: str, index: Any) -> Optional[HalideCSEVariable]:
        """GPU form of a masked load: every point loads, the masked-off ones from the tensor's first element (in
        bounds however far a declared extent passes the real buffer, ``_first_element``), and a select picks ``other``. No branch per element, so a
        work-item's loads are in flight together (GPT-2's padded logits gradient, 4096 x 50257 bf16 into two
        outputs: 798 us with a guarded load per element vs Triton's 313 on the H200). None: upstream's form."""
        mask = self._load_mask
        if not isinstance(mask, HalideCSEVariable) or mask.used_dims is None:
            return None
        # float values only: a loaded index (an LM loss's targets) would carry the select's bounds into the region
        # of a gathered input, and a tile staged from it outgrew local memory (CUDA launch INVALID_VALUE)
        if not V.graph.get_dtype(name).is_floating_point:
            return None
        arg = self.args.input(name)
        index = self.prepare_indexing(index)
        self._masked_load = True  # dims that may dip below 0 become a flat view (indexing_to_dimensions)
        try:
            var, dims = self.indexing_to_dimensions(arg, index, False)
        finally:
            self._masked_load = False
        used = OrderedSet((*self.used_dims_from_index(index), *mask.used_dims))
        if not dims or not used:
            return None
        safe = self._first_element(arg, var, dims)
        if safe is None:
            return None
        unmasked = self._unmasked_dims(name, var, dims, mask)
        coords = [d.index_str() if i in unmasked else f"hl.select({mask}, {self._clamped(d)}, {c})"
                  for i, (d, c) in enumerate(zip(dims, safe))]
        line = f"{var}[{', '.join(coords)}{',' if len(coords) == 1 else ''}]"
        dtype = V.graph.get_dtype(name)
        if dtype in (torch.float16, torch.bfloat16):
            dtype = torch.float32
            line = f"hl.cast(hl.Float(32), {line})"
        other = self.kexpr(self._load_other or 0)  # type: ignore[arg-type]
        result = self.newfunc(self.sort_used_dims(used))
        self.body.writeline(f"{result} = hl.select({mask}, {line}, hl.cast({halide_type(dtype)}, {other}))")
        return result

    def _unmasked_dims(self, name: str, var: str, dims: list, mask: HalideCSEVariable) -> set[int]:
        """The dims of a masked load whose index is a loop Var the mask does not read, over a loop no longer than
        the real tensor's extent at that stride (the view's origin at the tensor's): in bounds at every point, so
        they keep the plain Var (a padded embedding's rows are masked, its columns are not: ``pairs`` then reads
        the columns as words, where the select had left one 16-bit load per element)."""
        try:
            if int(self.buffer_offsets.get(var, 0)) != 0:
                return set()
            layout = V.graph.get_buffer(name).get_layout()
            real = list(zip(layout.size, layout.stride))
        except Exception:  # symbolic offsets or an input without a fixed layout: keep every select
            return set()
        sizevars, found, masked = V.graph.sizevars, set(), set(mask.used_dims or ())
        for i, d in enumerate(dims):
            sym = d.expr
            if not isinstance(sym, sympy.Symbol) or sym not in self.halide_vars or sym in masked:
                continue
            at = [n for n, st in real if sizevars.statically_known_equals(st, d.stride)]
            if len(at) == 1 and sizevars.statically_known_leq(self.halide_vars[sym], at[0]) \
                    and sizevars.statically_known_leq(self.halide_vars[sym], d.size):
                found.add(i)
        return found

    def _first_element(self, arg: str, var: str, dims: list) -> Optional[list[int]]:
        """Coordinates of ``var``'s view at the tensor's first element, which a non-empty tensor always has: the
        view's origin is ``offset`` elements from it (a cat's second input reads x[h0 - 64] where h0 >= 64, so
        the origin lies 64 before the tensor). None where sizes are symbolic or no coordinates reach it."""
        try:
            offset = int(self.buffer_offsets.get(var, 1))
            strides = [int(d.stride) for d in dims]
            extents = [int(d.size) for d in dims]
            if not V.graph.sizevars.statically_known_gt(self._storage_size(arg, sympy.S.Zero), 0) or offset > 0:
                return None
        except (TypeError, ValueError):  # symbolic
            return None
        left, coords = -offset, [0] * len(dims)
        for i in sorted(range(len(dims)), key=lambda i: -strides[i]):
            if strides[i] > 0:
                coords[i] = min(left // strides[i], extents[i] - 1)
                left -= coords[i] * strides[i]
        return coords if left == 0 else None

    def make_index_str(self, dims, replacements=None, zero_vars=False):  # type: ignore[override]
        """Masked loads clamp their indices: Halide's bounds inference does not see the mask (pad/cat)."""
        if not getattr(self, "_masked_load", False) or not dims:
            return super().make_index_str(dims, replacements, zero_vars)
        parts = [self._clamped(d, replacements, zero_vars) for d in dims]
        return ", ".join(parts) + ("," if len(parts) == 1 else "")

    def _clamped(self, d: DimensionInfo, replacements: Any = None, zero_vars: bool = False) -> str:
        """Dimension ``d``'s index clamped to its declared extent."""
        return f"hl.clamp({d.index_str(replacements, zero_vars)}, 0, {self.kexpr(self.rename_indexing(d.size - 1))})"

    def scan(self, dtypes, combine_fn, values):  # type: ignore[override]
        from . import scan

        return scan.scan(self, dtypes, combine_fn, values)

    def _family(self) -> str:
        return "scan" if self.scan_funcs else "reduction" if self.reduction_funcs else "pointwise"

    # ---------------------------------------------------------------- metadata
    def target_name(self) -> str:
        device = V.graph.get_current_device_or_throw()
        if device.type == "cpu":
            return config.resolved_cpu_target
        if device.type == "xpu":
            return config.xpu_target
        if device.type == "cuda":
            return config.cuda_target
        raise Unsupported(f"device {device.type}")

    def halide_target(self, target: str, device: Any) -> str:
        """The Halide target string. Device kernels with data-dependent (gather) indices drop Halide's runtime
        asserts: its input bounds check evaluates such an index on the host, reading a device buffer through a null
        host pointer (a scalar ``x[target[0]]`` crashed the process on CUDA). The indices are clamped into the
        buffer in device code either way."""
        text = targets.halide_target(target, device)
        return targets.without_host_asserts(text, target) if getattr(self, "indirect_indices", False) else text

    def fast_math(self) -> bool:
        """Whether this kernel uses the CUDA target's fast math (target/ptx.py)."""
        return self.target_name() == "cuda" and config.cuda_fast_math

    def _expr(self, expr: Any) -> str:
        from torch._inductor.codegen.cpp_utils import cexpr

        expr = self.rename_indexing(expr)
        if getattr(expr, "is_Integer", False) or isinstance(expr, int):
            return str(int(expr))
        return cexpr(expr)

    @staticmethod
    def _hint_bytes(itemsize: int, dims: list) -> int:
        """Bytes of a buffer of ``dims`` (size hints; 8192 for an unhinted symbol)."""
        numel = 1
        for d in dims:
            numel *= sizes.hint(d.size, 8192)
        return int(numel * itemsize)

    def xpu_meta(self) -> KernelMeta:
        """Metadata of the kernel. Not cached: rendering the source can add size args that the final meta needs."""
        args = []
        itemsizes: dict[str, int] = {}
        for _, arg in self.halide_argdefs():
            if isinstance(arg, SizeArg):
                args.append(ArgSpec(arg.name, "scalar", "int64" if "64" in self.index_dtype else "int32"))
                continue
            dims = self.buffer_dimensions[arg.name]
            itemsizes[arg.name] = arg.dtype.itemsize
            args.append(
                ArgSpec(
                    arg.name,
                    "out" if "out_ptr" in arg.name else "in",
                    _dtype_name(arg.dtype),
                    shape=tuple(self._expr(d.size) for d in dims),
                    stride=tuple(self._expr(d.stride) for d in dims),
                    offset=self._expr(self.buffer_offsets[arg.name]),
                    alias_of=arg.alias_of,
                    partial=arg.name in self.partial_outputs,
                )
            )
        reduction_vars = set(map(str, self.reduction_renames))
        # which Vars index a stride-1 input dimension, weighted by those inputs' bytes: a split column sum of a
        # LayerNorm backward reads bf16 rows along the kept dim and a small fp32 rstd along the reduced one, and
        # must be scheduled as the column reduction it is (was a work-group per result: 6-7x Triton on the H200)
        contiguous: dict[str, int] = {}
        outer = {inner: name for name, inner in self.args.input_buffers.items()}
        for name, dims in self.buffer_dimensions.items():
            if "out_ptr" in name:
                continue
            nbytes = self._hint_bytes(itemsizes.get(name, 4), dims)
            if name in outer:  # at most the buffer's own bytes: a gathered or modular index's dims span its range
                # (ResNet-18's relu mask read at 25088*(i//49 % 32) + i % 49: 777,777 x 512 "elements" of a
                # 0.8 MB tensor outweighed 13 MB of rows along the channels, and the column sum ran uncoalesced)
                try:
                    nbytes = min(nbytes, sizes.hint(V.graph.get_numel(outer[name]), 8192) * itemsizes.get(name, 4))
                except KeyError:  # not a graph buffer (a kernel-local one)
                    pass
            for d in dims:
                if d.expr is not None and d.stride == 1:
                    for s in getattr(d.expr, "free_symbols", ()):
                        contiguous[str(s)] = contiguous.get(str(s), 0) + nbytes
        loop_vars = tuple(
            LoopVar(str(sym), self._expr(size), str(sym) in reduction_vars, str(sym) in contiguous,
                    contiguous.get(str(sym), 0))
            for sym, size in self.halide_vars.items()
        )
        outputs = tuple(a.name for a in args if a.kind == "out")
        target = self.target_name()
        device = V.graph.get_current_device_or_throw()
        caps = targets.device_caps(target, device.type, max(device.index or 0, 0))
        return KernelMeta(
            args=tuple(args),
            target=target,
            halide_target=self.halide_target(target, device),
            loop_vars=loop_vars,
            outputs=outputs,
            reductions=tuple(self.reduction_funcs + self.scan_funcs),
            schedule=default_spec(loop_vars, self._family(), caps),
            device_index=max(device.index or 0, 0),
            device_type=device.type,
            fast_math=self.fast_math(),
            halide_launch=target == "cuda" and config.cuda_launch == "halide",
            snapshots=self._snapshots(args),
            inplace=self._inplace(),
            ordered_stores=tuple(sorted(self.ordered_outputs)),
            error_word=bool(self.device_checks),
        )

    def _inplace(self) -> tuple[str, ...]:
        """Inputs whose buffer an output writes. A schedule that computes a point twice (ShiftInwards tails) would
        read its own first write there: ``x[1:] -= y`` recomputed 4 of 20 elements (householder_product backward)."""
        written = {b for b, n in self.args.output_buffers.items() if isinstance(n, str)}
        return tuple(n for b, n in self.args.input_buffers.items() if b in written)

    def _snapshots(self, args: list[ArgSpec]) -> tuple[str, ...]:
        """Inputs that are also outputs (a mutation: an optimizer's in-place update) in a kernel of several
        outputs. Each output is its own loop, so a later loop would read what an earlier one already overwrote:
        such inputs are copied first (schedule.apply)."""
        outputs = [a for a in args if a.kind == "out"]
        return self._inplace() if len(outputs) >= 2 else ()

    # ---------------------------------------------------------------- source
    def codegen_kernel(self, name: Optional[str] = None) -> str:
        """The kernel as a Python module defining ``algorithm()``, which returns its Funcs and Params."""
        if self.args.inplace_buffers:
            raise Unsupported("inplace_buffers")
        bf16_bits = self.xpu_meta().bf16_as_bits  # also adds every size arg the layouts need, before argdefs
        argdefs = self.halide_argdefs()
        code = IndentedBuffer()
        code.splice(
            """
            import halide as hl
            import math
            from math import inf, nan
            from torch._inductor.runtime import halide_helpers
            from halide_xpu import halide_helpers as hx

            def algorithm():
            """,
            strip=True,
        )
        with code.indent():
            for _, arg in argdefs:
                if isinstance(arg, SizeArg):
                    # Halide indexes with 32 bits: int64 sizes (unbacked symbols) arrive as int64 and are narrowed,
                    # range-checked, in the glue (compiler.glue_source)
                    code.writeline(f"{arg.name} = hl.Param(hl.Int(32), {arg.name!r})")
                    continue
                ndim = len(self.buffer_dimensions[arg.name])
                htype = halide_type(arg.dtype)
                if bf16_bits and arg.dtype == torch.bfloat16:
                    htype = "hl.UInt(16)"
                if "out_ptr" in arg.name:
                    code.writeline(f"{arg.name} = hl.Func({htype}, {ndim}, {arg.name!r})")
                elif htype != halide_type(arg.dtype):
                    code.writeline(f"{arg.name}{STORAGE_SUFFIX} = hl.ImageParam({htype}, {ndim}, {arg.name!r})")
                    code.writeline(f"{arg.name} = hx.bf16_input({arg.name}{STORAGE_SUFFIX})")
                else:
                    code.writeline(f"{arg.name} = hl.ImageParam({htype}, {ndim}, {arg.name!r})")
            for old, new in self.args.aliases():
                code.writeline(f"{old} = {new}")
            code.splice(self.indexing_code)

            def fill_dims(m: re.Match) -> str:
                var = self.cse.varname_map[m.group(1)]
                assert isinstance(var, HalideCSEVariable) and var.used_dims is not None, var
                return str(var)

            for line in self.body._lines:
                if isinstance(line, str):
                    line = _exact_f64(HalideCSEVariable.undefined_re.sub(fill_dims, line))
                    line = _bf16_as_bits(line) if bf16_bits else _f16_keeps_nan(line)
                elif isinstance(line, DeferredLine):
                    line = line._new_line(_exact_f64(_bf16_as_bits(line.line) if bf16_bits else _f16_keeps_nan(line.line)))
                code.writeline(line)
            self._codegen_error_word(code)
            code.writeline("# buffer layouts (min, extent, stride per dimension, innermost first)")
            for _, arg in argdefs:
                if isinstance(arg, SizeArg):
                    continue
                buf = f"{arg.name}.output_buffer()" if "out_ptr" in arg.name else arg.name
                if bf16_bits and arg.dtype == torch.bfloat16 and "out_ptr" not in arg.name:
                    buf += STORAGE_SUFFIX
                for i, dim in enumerate(self.buffer_dimensions[arg.name]):
                    size = self.kexpr(self.rename_indexing(dim.size))
                    stride = self.kexpr(self.rename_indexing(dim.stride))
                    code.writeline(f"{buf}.dim({i}).set_bounds(0, {size}).set_stride({stride})")
            code.writeline("return locals()")
        return code.getvalue()

    # ---------------------------------------------------------------- call
    def call_kernel(self, name: str, node: Any = None, deallocate_ws: bool = True) -> None:
        if name.startswith(COMBO_PART):  # a part of a combo kernel: the scheduling calls the combined kernel
            return
        emit_call(name, list(self.xpu_call_args()), self.xpu_meta)

    def xpu_call_args(self) -> tuple[str, ...]:
        """The wrapper's argument expressions of a call (one per ``KernelMeta.call_args``)."""
        return tuple(str(n) for n, arg in self.halide_argdefs() if arg.alias_of is None)


COMBO_PART = "hx_combo_part_"  # placeholder name of a kernel that a combo kernel will run (scheduling.py)

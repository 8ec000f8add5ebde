"""Frozen records describing a compiled kernel: usable by the runtime without importing torch."""
from __future__ import annotations

import dataclasses
from typing import Optional

STORAGE_SUFFIX = "__storage"  # generated name of an ImageParam that a converting Func wraps (bf16 as bits)

# torch dtype name -> (halide type code, bits, C element type, element size in bytes)
# halide_type_code_t: 0 int, 1 uint, 2 float, 3 handle, 4 bfloat
DTYPES: dict[str, tuple[int, int, str, int]] = {
    "bool": (1, 1, "uint8_t", 1),
    "uint8": (1, 8, "uint8_t", 1),
    "int8": (0, 8, "int8_t", 1),
    "int16": (0, 16, "int16_t", 2),
    "uint16": (1, 16, "uint16_t", 2),
    "int32": (0, 32, "int32_t", 4),
    "uint32": (1, 32, "uint32_t", 4),
    "int64": (0, 64, "int64_t", 8),
    "uint64": (1, 64, "uint64_t", 8),
    "float16": (2, 16, "uint16_t", 2),
    "bfloat16": (4, 16, "uint16_t", 2),
    "float32": (2, 32, "float", 4),
    "float64": (2, 64, "double", 8),
}


# codes of a device kernel's error word (kernel.device_check) and the error each raises, as eager does on CPU
DEVICE_CHECK_INDEX = 1
DEVICE_CHECK_DIVISOR = 2
DEVICE_CHECK_MESSAGES = {
    DEVICE_CHECK_INDEX: "index out of bounds: a kernel's indirect or computed index is outside its buffer",
    DEVICE_CHECK_DIVISOR: "ZeroDivisionError: integer division by zero in a kernel",
}


# what a kernel's glue returns, before anything runs, for a pointer off ``KernelMeta.pointer_alignment`` (Halide's
# error codes are negative)
MISALIGNED = 4096


@dataclasses.dataclass(frozen=True)
class ArgSpec:
    """One kernel argument: a tensor (``in``/``out``) or an index scalar (``scalar``)."""

    name: str
    kind: str  # "in" | "out" | "scalar"
    dtype: str  # key of DTYPES for tensors, "int32"/"int64" for scalars
    shape: tuple[str, ...] = ()  # C expressions over scalar args, innermost first
    stride: tuple[str, ...] = ()
    offset: str = "0"
    alias_of: Optional[str] = None
    partial: bool = False  # an output not every element of which is written (indirect/accumulating stores)

    @property
    def is_buffer(self) -> bool:
        return self.kind != "scalar"

    @property
    def c_type(self) -> str:
        """Its C type in a kernel library's ``hx_launch`` (index scalars are 32-bit unless recorded as int64)."""
        if self.kind == "scalar":
            return "int64_t" if self.dtype == "int64" else "int32_t"
        return "void*"


@dataclasses.dataclass(frozen=True)
class LoopVar:
    """A Halide Var of the kernel's iteration space with its extent (a C/Halide expression)."""

    name: str
    extent: str
    reduction: bool = False
    contiguous: bool = False  # indexes a stride-1 dimension of some input
    contiguous_bytes: int = 0  # bytes of the inputs it indexes on their stride-1 dimension (size hints)

    @property
    def static_extent(self) -> Optional[int]:
        try:
            return int(self.extent)
        except ValueError:
            return None


@dataclasses.dataclass(frozen=True)
class ScheduleSpec:
    """Which schedule family applies and its tunable parameters (named, hashable)."""

    family: str  # "pointwise" | "reduction" | "autoschedule:<name>"
    params: tuple[tuple[str, int], ...] = ()

    def get(self, name: str, default: int) -> int:
        return dict(self.params).get(name, default)

    def with_params(self, **kw: int) -> "ScheduleSpec":
        merged = dict(self.params)
        merged.update(kw)
        return ScheduleSpec(self.family, tuple(sorted(merged.items())))


@dataclasses.dataclass(frozen=True)
class KernelMeta:
    """Everything needed to compile and call one generated Halide pipeline."""

    args: tuple[ArgSpec, ...]
    target: str  # halide_xpu target name: "host" | "opencl" | "cuda" | "sycl" (USM runtime, usm.py)
    halide_target: str  # full Halide target string
    loop_vars: tuple[LoopVar, ...] = ()
    outputs: tuple[str, ...] = ()  # Func names of the pipeline outputs, in Halide argument order
    reductions: tuple[str, ...] = ()  # Func names holding reduction results
    schedule: ScheduleSpec = ScheduleSpec("pointwise")
    device_index: int = 0
    device_type: str = "cpu"  # torch device type of the tensors: cpu | cuda | xpu
    fast_math: bool = False  # CUDA: exp on the exp2 unit, approximate fp32 division (config.cuda_fast_math)
    snapshots: tuple[str, ...] = ()  # inputs that an output overwrites while other output loops still read them
    inplace: tuple[str, ...] = ()  # inputs an output writes (the same buffer): no output point may be computed twice
    ordered_stores: tuple[str, ...] = ()  # outputs whose indirect stores write an element several times, last wins
    error_word: bool = False  # device checks: a check pipeline computes an error word before the kernel runs
    scalar_lanes: bool = False  # built for pointers off the vector alignment: every lane unrolled (no vector access)
    pairs: tuple[str, ...] = ()  # bf16 buffers passed as uint32 words of two elements, half the extent (pairs.py)
    halide_launch: bool = False  # CUDA: launched through Halide's runtime, not the direct launch (config.cuda_launch)

    @property
    def pointer_alignment(self) -> int:
        """Bytes every buffer pointer of a call must be a multiple of (0: any). Halide's device code takes a buffer's
        base as aligned to the vector width (CUDA: at most 16 bytes, ``st.global.v4.b32``; OpenCL C: a vector-pointer
        cast, up to 16 lanes of 8 bytes), and cuda/sycl kernels get tensors' pointers in place, storage offset
        included: a view at 20 bytes faulted (GPUTests graph_partition_misaligned_input). The glue refuses such a
        call with ``MISALIGNED``, and the caller runs the ``scalar_lanes`` build instead. Fresh tensors pass: torch's
        CUDA and XPU allocators align to 512 bytes, the sycl emulation's USM allocator to 128."""
        if self.scalar_lanes:
            return 0
        return {"cuda": 16, "sycl": 128}.get(self.target, 0)

    @property
    def takes_stream(self) -> bool:
        """Inductor's wrapper passes torch's current raw stream (last call argument) on GPU devices."""
        return self.device_type != "cpu"

    @property
    def glue_takes_stream(self) -> bool:
        """The kernel gets a queue/stream as Halide's user_context: torch's, or the emulation's sycl queue."""
        return self.target in ("cuda", "sycl")

    @property
    def bf16_as_bits(self) -> bool:
        """Device targets keep bfloat16 tensors as uint16 bits (Halide's OpenCL printer mistakes bf16 for half)."""
        return self.target != "host"

    def type_code_bits(self, arg: ArgSpec) -> tuple[int, int]:
        """(halide_type_code_t, bits) of the halide_buffer_t passed for ``arg``."""
        if arg.name in self.pairs:
            return 1, 32
        if arg.dtype == "bfloat16" and self.bf16_as_bits:
            return 1, 16
        code, bits, _, _ = DTYPES[arg.dtype]
        return code, bits

    @property
    def call_args(self) -> tuple[ArgSpec, ...]:
        """Arguments the Python caller passes (aliases share their base pointer)."""
        return tuple(a for a in self.args if a.alias_of is None)

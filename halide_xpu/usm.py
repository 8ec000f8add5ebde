"""SYCL USM runtime for Halide pipelines: torch's XPU pointers and queue, used in place (the ``sycl`` target).

Design. Halide's generated host code (bounds, multi-kernel pipelines, intermediates) is kept as is; only its
device API changes. A kernel object compiled for Halide's OpenCL target calls four device entry points:
``halide_opencl_{initialize_kernels,run,finalize_kernels,device_interface}``. For the sycl target the
compiler renames those references (``objcopy --redefine-sym``) to ``hx_usm_*`` in ``native/usm_device.cpp``,
which is built into the one shared Halide runtime. So the OpenCL runtime and the USM runtime coexist in one
process, and every generic Halide entry (``halide_device_malloc``, ``halide_copy_to_host``, crops...) reaches
our ``halide_device_interface_t`` whose ``device`` handles are raw USM pointers.

Why dpctl's C interface and not OpenCL's USM extension: torch's XPU queue is a ``sycl::queue`` that on Intel
GPUs runs on Level Zero, not OpenCL. dpctl takes that ``sycl::queue*`` as is (``DPCTLSyclQueueRef``), builds
kernel bundles from OpenCL C in the queue's context, submits nd-ranges with USM pointer arguments and
allocates USM, for any backend, without SYCL headers at build time (``dlopen`` at first use). OpenCL USM
(``clSetKernelArgMemPointerINTEL``) would only serve OpenCL-backend queues.

Runtime rules: the queue is Halide's ``user_context`` (the glue passes torch's raw XPU stream, i.e. the
``sycl::queue*``); the queue must be in-order (torch's are) so a pipeline's kernels and its intermediates need
no events; intermediates come from USM device memory and go to a per-queue pool on free (reuse on the same
in-order queue is safe; the pool is released, after a queue wait, above 256 MiB and at exit); tensors are
never copied and never freed by Halide; no device-wide synchronize per kernel. Each kernel is compiled with
``intel_reqd_sub_group_size`` chosen from the device; work-groups above the device or kernel limit are
refused with an error instead of failing inside the driver.

Emulation: the same runtime runs on a SYCL device of Intel's OpenCL CPU runtime. Only the queue (our
in-order dpctl queue, see :func:`queue`) and the pointers (CPU tensors over USM shared memory, see
:func:`usm_tensors`) come from elsewhere; because the consumer of a CPU tensor is host code, the glue waits
on the queue after each emulated launch, which on a real XPU the stream order provides.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import logging
import threading
from typing import Any, Callable, Iterator, Optional

from . import native_sources
from .target import sycl_devices

log = logging.getLogger(__name__)

COUNTER_NAMES = ("launches", "copies_to_host", "copies_to_device", "usm_allocations", "usm_frees", "program_builds",
                 "binary_loads", "binary_rejects", "native_loads", "native_rejects")
POOL_LIMIT_BYTES = 256 << 20
_local = threading.local()
_lock = threading.Lock()
_ready: list[ctypes.CDLL] = []


def runtime() -> ctypes.CDLL:
    """The shared Halide runtime with the USM module initialised (dpctl loaded, sub-group size chosen)."""
    if _ready:
        return _ready[0]
    from .runtime import halide_runtime

    with _lock:
        if _ready:
            return _ready[0]
        lib = halide_runtime()
        if lib.hx_usm_init(sycl_devices.dpctl_library().encode()) != 0:
            lib.hx_usm_init_error.restype = ctypes.c_char_p
            raise sycl_devices.SyclUnavailable(lib.hx_usm_init_error().decode())
        atexit.register(lib.hx_usm_release_all)
        _ready.append(lib)
        return lib


def configure(info: sycl_devices.SyclDeviceInfo) -> None:
    runtime().hx_usm_configure(ctypes.c_int(info.sub_group), ctypes.c_uint64(POOL_LIMIT_BYTES))


def counters() -> dict[str, int]:
    """Process-wide counts of the USM runtime (launches, host<->device copies, allocations, programs made, SPIR-V
    modules and native binaries loaded and refused) and ``device_compiles``: device-code compilations run ahead of launch (stats)."""
    from . import stats

    out = (ctypes.c_uint64 * len(COUNTER_NAMES))()
    runtime().hx_usm_counters(out)
    return {**dict(zip(COUNTER_NAMES, map(int, out))), "device_compiles": stats.counters["device_compiles"]}


def prepare_source(source: str, sub_group: int) -> str:
    """Halide's OpenCL C of a kernel object as the runtime builds it for a device of ``sub_group`` (the runtime's
    ``prepare_source``, the one definition of those edits)."""
    fn = runtime().hx_usm_prepare_source
    fn.restype = ctypes.c_char_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return fn(source.encode(), sub_group).decode()


BINARY_KINDS = {"spirv": 0, "native": 1}


def set_binary(kind: str, prepared_source: str, data: bytes, options: str = "") -> None:
    """Kernel objects whose prepared source is ``prepared_source`` load ``data`` (a SPIR-V module or a native
    binary, with the build ``options`` its loader takes) instead of building the source; empty ``data`` forgets."""
    fn = runtime().hx_usm_set_binary
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
    fn(BINARY_KINDS[kind], prepared_source.encode(), data, len(data), options.encode())


def set_native_loader(address: int) -> None:
    """The function (sycl_interop.cpp's hx_native_bundle) that makes kernel bundles from native binaries."""
    runtime().hx_usm_set_native_loader(ctypes.c_void_p(address))


def launch_queue(meta: Any) -> Optional[Callable[[], int]]:
    """Prepare the USM runtime for a sycl kernel of ``meta``; the queue getter its launcher uses when the caller
    passes no queue (the CPU emulation's current queue), else None (torch's XPU stream is passed)."""
    runtime()
    if meta.device_type == "cpu":
        default_queue()
        return current_queue_ref
    configure(sycl_devices.device_info(meta.device_type, meta.device_index))
    return None


# ------------------------------------------------------------------ queues (emulation)
@functools.lru_cache(maxsize=None)
def default_queue() -> Any:
    """The emulation's in-order queue on :func:`sycl_devices.emulation_device` (kept for the process)."""
    dev = sycl_devices.emulation_device()
    q = sycl_devices.dpctl().SyclQueue(dev, property="in_order")
    configure(sycl_devices.emulation_info())
    return q


def current_queue() -> Any:
    """The emulation's current queue: the innermost :func:`queue` scope, else :func:`default_queue`."""
    stack = getattr(_local, "queues", None)
    return stack[-1] if stack else default_queue()


def current_queue_ref() -> int:
    """``sycl::queue*`` of :func:`current_queue` as an int (what torch's XPU raw stream is on real hardware)."""
    return current_queue().addressof_ref()


@contextlib.contextmanager
def queue(q: Any) -> Iterator[Any]:
    """Run emulated kernels on ``q`` (a dpctl.SyclQueue, in-order) inside this scope, like ``torch.xpu.stream``."""
    if not q.is_in_order:
        raise ValueError("halide_xpu.usm.queue: the SYCL queue must be in-order (dpctl.SyclQueue(..., property='in_order'))")
    runtime()
    stack = _local.__dict__.setdefault("queues", [])
    stack.append(q)
    try:
        yield q
    finally:
        stack.pop()


# ------------------------------------------------------------------ USM-backed CPU tensors (emulation)
@functools.lru_cache(maxsize=None)
def _allocator_library() -> ctypes.CDLL:
    import torch

    torch_dir = torch.__path__[0]
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    try:
        lib = native_sources.build_shared(
            "usm-allocator", ["usm_allocator.cpp"],
            [f"-I{torch_dir}/include", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-L{torch_dir}/lib", "-lc10",
             f"-Wl,-rpath,{torch_dir}/lib", "-ldl"], key_parts=[torch.__version__])
    except native_sources.NativeBuildError as e:
        raise RuntimeError(f"halide_xpu: building the USM tensor allocator failed: {e}") from None
    alloc = ctypes.CDLL(str(lib))
    if alloc.hx_usm_alloc_init(sycl_devices.dpctl_library().encode()) != 0:
        raise sycl_devices.SyclUnavailable("dpctl lacks DPCTLaligned_alloc_shared/DPCTLfree_with_queue")
    alloc.hx_usm_alloc_push.restype = ctypes.c_void_p
    alloc.hx_usm_alloc_push.argtypes = [ctypes.c_void_p]
    alloc.hx_usm_alloc_pop.argtypes = [ctypes.c_void_p]
    alloc.hx_usm_alloc_live.restype = ctypes.c_ulonglong
    return alloc


@contextlib.contextmanager
def usm_tensors(q: Optional[Any] = None) -> Iterator[Any]:
    """Inside this scope every CPU tensor torch allocates lives in USM shared memory of ``q``'s context
    (default :func:`current_queue`): the emulation's stand-in for XPU tensors. Tensors stay valid after it."""
    q = q if q is not None else current_queue()
    previous = _enter(q)
    try:
        yield q
    finally:
        _clone_through_cpu_allocator(-1)
        _allocator_library().hx_usm_alloc_pop(ctypes.c_void_p(previous))


def _enter(q: Any) -> Optional[int]:
    """Opens a USM scope on ``q``: CPU allocations and storage clones go to its USM; returns the allocator's
    previous queue (what the scope's exit restores)."""
    previous = _allocator_library().hx_usm_alloc_push(ctypes.c_void_p(q.addressof_ref()))
    _clone_through_cpu_allocator(+1)
    return previous


_clone_scopes = [0, None]  # open usm_tensors scopes, torch's own UntypedStorage.clone while any is open


def _clone_through_cpu_allocator(step: int) -> None:
    """While a :func:`usm_tensors` scope is open, ``UntypedStorage.clone`` of a CPU storage (what ``copy.deepcopy``
    of a tensor or module calls) allocates through the CPU allocator, as ``torch.empty`` does, so the copy lives in
    USM like its source, as an XPU tensor's copy is an XPU tensor. torch's own clone builds ``UntypedStorage(n)``,
    which takes c10's default CPU allocator, not the one the scope set (CpuTests' ``test_buffer_copied_in_graph``
    gave kernels host memory the runtime refuses)."""
    import torch

    with _lock:
        _clone_scopes[0] += step
        if step > 0 and _clone_scopes[0] == 1:
            original = _clone_scopes[1] = torch.UntypedStorage.clone

            def clone(self: Any) -> Any:
                if self.device.type != "cpu":
                    return original(self)
                return torch.empty(self.nbytes(), dtype=torch.uint8).untyped_storage().copy_(self)

            torch.UntypedStorage.clone = clone
        elif step < 0 and _clone_scopes[0] == 0:
            torch.UntypedStorage.clone = _clone_scopes[1]


def usm_tensors_process_wide() -> None:
    """:func:`usm_tensors` for the rest of the process (``HALIDE_XPU_USM_TENSORS=1``, registration.py): every CPU
    tensor is USM shared memory of the default queue, so code that allocates its own tensors (PyTorch's test
    suites) runs on the ``sycl`` emulation target."""
    global _process_wide
    if _process_wide is None:  # never left: a scope's exit at interpreter shutdown ran on torn-down module globals
        q = default_queue()
        _enter(q)
        _process_wide = q  # keeps the queue (and its context) alive


_process_wide: Optional[Any] = None


def live_usm_tensors() -> int:
    """How many USM allocations made by :func:`usm_tensors` are alive."""
    return int(_allocator_library().hx_usm_alloc_live())


def pointer_kind(ptr: int, q: Optional[Any] = None) -> str:
    """'device' | 'shared' | 'host' | 'unknown': the USM kind of ``ptr`` in the context of ``q``."""
    q = q if q is not None else current_queue()
    lib = _dpctl_c()
    kind = lib.DPCTLUSM_GetPointerType(ctypes.c_void_p(ptr), ctypes.c_void_p(q.sycl_context.addressof_ref()))
    return ("unknown", "device", "shared", "host")[kind]


@functools.lru_cache(maxsize=None)
def _dpctl_c() -> ctypes.CDLL:
    lib = ctypes.CDLL(sycl_devices.dpctl_library())
    lib.DPCTLUSM_GetPointerType.restype = ctypes.c_int
    return lib


def to_usm(t: Any) -> Any:
    """A copy of tensor ``t`` over USM of the current :func:`usm_tensors` scope, keeping its view (sizes,
    strides, storage offset) on a copy of its whole storage."""
    import torch

    source = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
    storage = torch.empty(source.numel(), dtype=torch.uint8)
    storage.copy_(source)
    return torch.empty(0, dtype=t.dtype).set_(storage.untyped_storage(), t.storage_offset(), t.size(), t.stride())

"""Inductor's C++ wrapper calling halide-xpu kernels: each kernel is a C function that loads its library once."""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from .meta import MISALIGNED, KernelMeta

log = logging.getLogger(__name__)

# Python run once per process by the wrapper before its first kernel: the Halide runtime the kernel libraries bind
# to (loaded RTLD_GLOBAL, error handler set, OpenCL device chosen), the USM module for the sycl target.
_PREPARE = "import halide_xpu.cpp_wrapper as m; m.prepare({target!r})"

_HEADER = r"""
#include <dlfcn.h>
#include <Python.h>
#include <stdexcept>
#include <string>
#ifndef HALIDE_XPU_CPP_WRAPPER_HELPERS
#define HALIDE_XPU_CPP_WRAPPER_HELPERS
// Loads a halide-xpu kernel library (after the Python side has loaded the Halide runtime it binds to).
static void *hx_kernel_symbol(const char *prepare, const char *library, const char *symbol) {
    if (Py_IsInitialized()) {
        PyGILState_STATE gil = PyGILState_Ensure();
        int failed = PyRun_SimpleString(prepare);
        PyGILState_Release(gil);
        if (failed) throw std::runtime_error(std::string("halide_xpu: runtime setup failed: ") + prepare);
    }
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw std::runtime_error(std::string("halide_xpu: cannot load kernel library: ") + dlerror());
    void *fn = dlsym(lib, symbol);
    if (!fn) throw std::runtime_error(std::string("halide_xpu: no ") + symbol + " in " + library);
    return fn;
}
// The Halide runtime's last message for this thread, as an exception.
static std::runtime_error hx_kernel_error(const char *kernel, int err) {
    std::string text = std::string("halide_xpu kernel ") + kernel + " failed (Halide error " + std::to_string(err) + ")";
    if (Py_IsInitialized()) {
        PyGILState_STATE gil = PyGILState_Ensure();
        PyObject *mod = PyImport_ImportModule("halide_xpu.cpp_wrapper");
        PyObject *msg = mod ? PyObject_CallMethod(mod, "error_text", "si", kernel, err) : nullptr;
        const char *utf8 = msg ? PyUnicode_AsUTF8(msg) : nullptr;
        if (utf8) text = utf8;
        PyErr_Clear();
        Py_XDECREF(msg);
        Py_XDECREF(mod);
        PyGILState_Release(gil);
    }
    return std::runtime_error(text);
}
// The sycl emulation's current queue (halide_xpu.usm.current_queue_ref: torch's stream on a real XPU).
static void *hx_current_queue() {
    void *queue = nullptr;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *mod = PyImport_ImportModule("halide_xpu.usm");
    PyObject *ref = mod ? PyObject_CallMethod(mod, "current_queue_ref", nullptr) : nullptr;
    if (ref) queue = PyLong_AsVoidPtr(ref);
    PyErr_Clear();
    Py_XDECREF(ref);
    Py_XDECREF(mod);
    PyGILState_Release(gil);
    if (!queue) throw std::runtime_error("halide_xpu: no SYCL queue for the sycl target");
    return queue;
}
#endif
"""


# AOTInductor: no Python in the process. The kernel and runtime libraries travel in the package (additional_files)
# and lie beside the model library when it is loaded; the runtime is loaded RTLD_GLOBAL first (kernels bind to it).
_AOT_HEADER = r"""
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#ifndef HALIDE_XPU_AOT_HELPERS
#define HALIDE_XPU_AOT_HELPERS
static std::string hx_package_dir() {
    Dl_info info;
    if (!dladdr(reinterpret_cast<void *>(&hx_package_dir), &info) || !info.dli_fname)
        throw std::runtime_error("halide_xpu: cannot locate the model library");
    std::string path = info.dli_fname;
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}
// Halide's default error handler aborts the process: record the message instead (and pass it on to a handler
// someone else installed, e.g. halide_xpu's Python side in the same process), then throw.
typedef void (*hx_error_handler_t)(void *, const char *);
static thread_local std::string hx_last_error;
static hx_error_handler_t hx_previous_handler = nullptr;
static void hx_on_error(void *user_context, const char *msg) {
    hx_last_error = msg ? msg : "";
    if (hx_previous_handler) hx_previous_handler(user_context, msg);
}
// A packaged library beside the model library, else where it was built (AOTInductor's eager-mode kernels are
// compiled into a folder of their own, without the package's other files).
static std::string hx_locate(const char *name, const char *built) {
    std::string beside = hx_package_dir() + "/" + name;
    FILE *f = fopen(beside.c_str(), "rb");
    if (f) { fclose(f); return beside; }
    return built;
}
// ``required``: a symbol of the runtime the kernel needs. A process that has such a runtime already (halide_xpu
// loaded one, or an earlier package did) keeps it: a second copy would bring a second device-allocation pool and
// module cache, and Halide's exit hooks of both copies would release the same device state.
static void *hx_kernel_symbol(const char *runtime, const char *runtime_built, const char *required,
                              const char *library, const char *library_built, const char *symbol) {
    if (!dlsym(RTLD_DEFAULT, required) && !dlopen(hx_locate(runtime, runtime_built).c_str(), RTLD_NOW | RTLD_GLOBAL))
        throw std::runtime_error(std::string("halide_xpu: cannot load the Halide runtime: ") + dlerror());
    // the runtime the kernels bind to: the first one loaded globally
    auto set_handler = reinterpret_cast<hx_error_handler_t (*)(hx_error_handler_t)>(dlsym(RTLD_DEFAULT, "halide_set_error_handler"));
    void *fallback = dlsym(RTLD_DEFAULT, "halide_default_error");
    if (set_handler) {
        hx_error_handler_t previous = set_handler(&hx_on_error);
        if (previous != &hx_on_error && reinterpret_cast<void *>(previous) != fallback) hx_previous_handler = previous;
    }
    void *lib = dlopen(hx_locate(library, library_built).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw std::runtime_error(std::string("halide_xpu: cannot load kernel library: ") + dlerror());
    void *fn = dlsym(lib, symbol);
    if (!fn) throw std::runtime_error(std::string("halide_xpu: no ") + symbol + " in " + library);
    return fn;
}
static std::runtime_error hx_kernel_error(const char *kernel, int err) {
    return std::runtime_error(std::string("halide_xpu kernel ") + kernel + " failed (Halide error " + std::to_string(err)
                              + "): " + hx_last_error);
}
// The opencl target's set-up, recorded when the package was made (halide_xpu's Python does it in a compiling
// process): the ICD the OpenCL loader should use and the libraries it needs, loaded globally; the device Halide's
// OpenCL runtime picks (HL_OCL_*). Entries that do not exist here, and variables the user set, are left alone.
static void hx_prepare_opencl(const char *const *preload, const char *const *env) {
    for (; *preload; ++preload) {
        FILE *f = fopen(*preload, "rb");
        if (f) { fclose(f); dlopen(*preload, RTLD_NOW | RTLD_GLOBAL); }
    }
    bool user_icd = getenv("OCL_ICD_FILENAMES") || getenv("OCL_ICD_VENDORS");
    for (; env[0]; env += 2) {
        bool icd = std::string(env[0]) == "OCL_ICD_FILENAMES";
        FILE *f = icd ? fopen(env[1], "rb") : nullptr;
        if (f) fclose(f);
        if ((icd && (user_icd || !f)) || getenv(env[0])) continue;
        setenv(env[0], env[1], 0);
    }
}
// The sycl target without halide_xpu's Python (the CPU emulation): the runtime's USM module set up as the package
// recorded it (dpctl's C library, sub-group size, pool limit) and an in-order queue of the recorded device, made
// once per model, whose host tensors are staged through USM copies.
static void *hx_prepare_sycl(const char *dpctl, const char *filter, int sub_group, unsigned long long pool_limit) {
    static void *made = nullptr;  // one queue for the model's kernels
    if (made) return made;
    auto init = reinterpret_cast<int (*)(const char *)>(dlsym(RTLD_DEFAULT, "hx_usm_init"));
    auto why = reinterpret_cast<const char *(*)()>(dlsym(RTLD_DEFAULT, "hx_usm_init_error"));
    auto configure = reinterpret_cast<void (*)(int, unsigned long long)>(dlsym(RTLD_DEFAULT, "hx_usm_configure"));
    auto staging = reinterpret_cast<void (*)(void *)>(dlsym(RTLD_DEFAULT, "hx_usm_stage_host"));
    auto make_queue = reinterpret_cast<void *(*)(const char *)>(dlsym(RTLD_DEFAULT, "hx_usm_make_queue"));
    if (!init || !why || !configure || !staging || !make_queue)
        throw std::runtime_error("halide_xpu: the Halide runtime lacks the USM module");
    if (init(dpctl)) throw std::runtime_error(std::string("halide_xpu: sycl set-up failed: ") + why());
    configure(sub_group, pool_limit);
    if (!filter) return nullptr;  // a real XPU: kernels get torch's queue, tensors are USM
    void *queue = make_queue(filter);
    if (!queue) throw std::runtime_error(std::string("halide_xpu: sycl set-up failed: ") + why());
    staging(queue);  // this queue's host tensors go through USM copies
    return made = queue;
}
#endif
"""
# cuda: packages of our kernels run in a fresh process (H200, torch 2.11, 2026-11-27). That machine's fresh processes
# crash in AOTInductor's own device-string regex unless the system libstdc++ is preloaded, Triton's packages exactly
# alike (README, "AOTInductor on CUDA"). sycl: the CPU emulation (a real XPU's packages would take torch's queue).
AOT_TARGETS = ("host", "opencl", "cuda", "sycl")
# a symbol of our Halide runtime that a kernel of the target needs (native/*.cpp, Halide's OpenCL module)
RUNTIME_MARKERS = {"host": "hx_local_bytes", "opencl": "halide_opencl_run", "cuda": "hx_cuda_direct_run",
                   "sycl": "hx_usm_make_queue"}


def prepare(target: str) -> None:
    """Everything a kernel library of ``target`` needs in this process before it is loaded."""
    from .runtime import halide_runtime

    halide_runtime()
    if target == "sycl":
        from . import usm

        usm.runtime()
        usm.default_queue()


def error_text(kernel: str, err: int) -> str:
    """The message a failing kernel raises from the C++ wrapper: the Halide runtime's last error, explained."""
    from .runtime import _errors

    return f"halide_xpu kernel {kernel} failed (error {err}): {getattr(_errors, 'last', '')}"


def arg_types(meta: KernelMeta) -> list[str]:
    """C types of the wrapper's call arguments, in ``meta.call_args`` order (pointers as ``void*``)."""
    return [a.c_type for a in meta.call_args]


# A CPU tensor read by a GPU kernel (``x + cpu_t[0]``: Inductor passes 0-d CPU tensors to Triton by value), copied
# to the kernel's device for one call: a synchronous copy on torch's current stream; the caching allocator keeps the
# copy's memory for the kernel queued after it on that stream.
_DEVICE_COPY = r"""
#ifndef HALIDE_XPU_DEVICE_COPY
#define HALIDE_XPU_DEVICE_COPY
static AtenTensorHandle hx_device_copy(AtenTensorHandle host, int32_t device_type, int32_t device_index) {
    int64_t ndim = 0;
    int64_t *sizes = nullptr, *strides = nullptr;
    int32_t dtype = 0;
    AtenTensorHandle copy = nullptr;
    if (aoti_torch_get_dim(host, &ndim) || aoti_torch_get_sizes(host, &sizes) || aoti_torch_get_strides(host, &strides)
        || aoti_torch_get_dtype(host, &dtype)
        || aoti_torch_empty_strided(ndim, sizes, strides, dtype, device_type, device_index, &copy)
        || aoti_torch_copy_(copy, host, 0))
        throw std::runtime_error("halide_xpu: cannot copy a CPU tensor argument to the kernel's device");
    return copy;
}
#endif
"""


def call_line(kernel_name: str, call_args: list[Any], meta: KernelMeta, stream: str,
              host_args: frozenset[int] = frozenset()) -> str:
    """The C++ wrapper's call of our kernel function on a GPU: tensors as device pointers, sizes as integers, the
    raw stream last. ``host_args``: positions of CPU tensors (0-d CPU tensors a GPU graph reads), copied to the
    device first."""
    from torch._inductor.codegen.cpp_utils import cexpr

    copies, args = [], []
    for i, (a, spec) in enumerate(zip(call_args, meta.call_args)):
        if spec.is_buffer and i in host_args:
            device = f"aoti_torch_device_type_{meta.device_type}()"
            copies.append(f"RAIIAtenTensorHandle hx_device{i}(hx_device_copy({a}, {device}, {meta.device_index}));")
            args.append(f"(void*)(hx_device{i}.data_ptr())")
        elif spec.is_buffer:
            args.append(f"(void*)({a}.data_ptr())")
        else:
            args.append(f"({spec.c_type})({cexpr(a) if not isinstance(a, str) else a})")
    call = f"{kernel_name}({', '.join(args + [stream])});"
    return f"{{ {' '.join(copies)} {call} }}" if copies else call


def unsupported(device_type: str, target: str, aot_mode: bool) -> str | None:
    """Why halide-xpu kernels cannot be called from this C++ wrapper (None when they can)."""
    if device_type not in ("cpu", "cuda", "xpu"):
        return f"the C++ wrapper calls halide-xpu kernels on cpu, cuda and xpu, not on {device_type}"
    if aot_mode and target not in AOT_TARGETS:
        return (f"AOTInductor packages halide-xpu kernels of the {', '.join(AOT_TARGETS)} targets; {target!r} needs "
                "its device runtime set up by halide_xpu's Python side")
    return None


def _sycl_setup(meta: KernelMeta) -> str:
    """C++ expression: the emulation's queue as this process sets it up (usm.default_queue), made by the package."""
    from . import usm
    from .target import sycl_devices

    info = sycl_devices.device_info(meta.device_type, meta.device_index)
    emulated = meta.device_type == "cpu"  # else torch's XPU queue comes with each call
    args = (json.dumps(sycl_devices.dpctl_library()),
            json.dumps(sycl_devices.emulation_device().filter_string) if emulated else "nullptr",
            str(info.sub_group), f"{usm.POOL_LIMIT_BYTES}ULL")
    return f"hx_prepare_sycl({', '.join(args)})"


def _opencl_setup() -> str:
    """C++ statement: the opencl target's loader set-up as this process has it (opencl_devices.load_opencl and
    select_device), replayed by an AOTInductor package before it loads the Halide runtime."""
    from .target import opencl_devices

    opencl_devices.require_device()
    intel = opencl_devices.intel_cpu_runtime_dir()
    preload = [os.path.join(intel, d) for d in (*opencl_devices.INTEL_DEPS, "libOpenCL.so.1")] if intel else []
    env = [(k, os.environ[k]) for k in ("OCL_ICD_FILENAMES", "HL_OCL_PLATFORM_NAME", "HL_OCL_DEVICE_TYPE")
           if k in os.environ]
    strings = lambda xs: "{" + ", ".join([*map(json.dumps, xs), "nullptr"]) + "}"  # noqa: E731
    return (f"static const char *const preload[] = {strings(preload)}; "
            f"static const char *const env[] = {strings([x for kv in env for x in kv])}; "
            "hx_prepare_opencl(preload, env);")


@functools.lru_cache(maxsize=None)
def _digest(path: str, mtime_ns: int, size: int) -> str:  # noqa: ARG001 - the file's identity is the cache key
    """A library file's content hash: the runtime is packaged with every kernel, hashed once."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _packaged(library: str, aot_files: list[Any]) -> tuple[tuple[str, str], tuple[str, str]]:
    """Copies of the kernel library and of the Halide runtime under names unique in a package, added to the
    package's files; returns (runtime, kernel) as (file name, path) pairs."""
    from . import cache
    from .runtime import runtime_library

    names = []
    for path, stem in ((runtime_library(), "hx_runtime"), (Path(library), "hx_kernel")):
        stat = path.stat()
        digest = _digest(str(path), stat.st_mtime_ns, stat.st_size)
        copy = cache.cache_root() / "aoti" / f"{stem}_{digest}.hxlib"  # not .so: AOTInductor (2.11) packages one .so, the model
        if not copy.exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            tmp = copy.with_suffix(f".{os.getpid()}.tmp")
            shutil.copyfile(path, tmp)
            os.replace(tmp, copy)
        if str(copy) not in aot_files:
            aot_files.append(str(copy))
        names.append((copy.name, str(copy)))
    return names[0], names[1]


def kernel_definition(kernel_name: str, meta: KernelMeta, library: str, aot_files: list[Any] | None = None,
                      scalar_library: str | None = None) -> str:
    """C++ function ``kernel_name(args...)`` for the wrapper's header: loads ``library`` on first use, then calls its
    ``hx_launch``; a failing kernel throws. ``aot_files``: AOTInductor's list of files to package (AOT mode).
    ``scalar_library``: the build that takes calls ``library`` refuses as ``MISALIGNED`` (pointers off the vector
    alignment), loaded on the first such call."""
    params = [f"{a.c_type} {a.name}" for a in meta.call_args]
    stream = []
    if meta.glue_takes_stream:  # GPU wrappers pass torch's raw stream last; the CPU sycl emulation has its queue
        # (a package's own: hx_queue, made by _sycl_setup)
        stream = [("hx_current_queue()" if aot_files is None else "hx_queue") if meta.device_type == "cpu" else "stream"]
        if meta.device_type != "cpu":
            params.append("void* stream")
    names = ", ".join([a.name for a in meta.call_args] + stream)
    fn_type = f"int (*)({', '.join(arg_types(meta) + (['void*'] if meta.glue_takes_stream else []))})"

    def load(lib: str) -> str:  # hx_kernel_symbol's arguments before the symbol
        if aot_files is None:
            return f"{json.dumps(_PREPARE.format(target=meta.target))}, {json.dumps(lib)}"
        runtime, kernel = _packaged(lib, aot_files)
        return ", ".join(json.dumps(p) for p in (*runtime, RUNTIME_MARKERS[meta.target], *kernel))

    header = (_HEADER if aot_files is None else _AOT_HEADER) + (_DEVICE_COPY if meta.device_type != "cpu" else "")
    scalar = []
    if scalar_library is not None:
        symbol = f"hx_kernel_symbol({load(scalar_library)}, \"hx_launch\")"
        scalar = [f"    if (err == {MISALIGNED}) {{  // a pointer off the vector alignment: the build with unrolled lanes",
                  f"        static fn_t scalar = reinterpret_cast<fn_t>({symbol});",
                  f"        err = scalar({names});",
                  "    }"]
    # the OpenCL loader set-up: the opencl target's, and the sycl emulation's (its SYCL device is an OpenCL one)
    emulated = meta.target == "opencl" or (meta.target == "sycl" and meta.device_type == "cpu")
    setup = f"    {_opencl_setup()}" if aot_files is not None and emulated else ""
    return "\n".join([
        header,
        f"static void {kernel_name}({', '.join(params)}) {{",
        f"    using fn_t = {fn_type};",
        *([f"    static bool ready = [] {{ {setup.strip()} return true; }}();", "    (void)ready;"] if setup else []),
        f"    static fn_t fn = reinterpret_cast<fn_t>(hx_kernel_symbol({load(library)}, \"hx_launch\"));",
        *([f"    static void *hx_queue = {_sycl_setup(meta)};", "    (void)hx_queue;"]
          if aot_files is not None and meta.target == "sycl" else []),
        f"    int err = fn({names});",
        *scalar,
        f"    if (err) throw hx_kernel_error(\"{kernel_name}\", err);",
        "}",
        "",
    ])

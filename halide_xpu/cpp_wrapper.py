"""Inductor's C++ wrapper calling halide-xpu kernels: each kernel is a C function that loads its library once."""
from __future__ import annotations

import json
import logging
from typing import Any

from .meta import KernelMeta

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
// The Halide runtime's last message for this thread, explained (runtime._explain), as an exception.
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
    from .runtime import _errors, _explain

    return f"halide_xpu kernel {kernel} failed (error {err}): {_explain(getattr(_errors, 'last', ''))}"


def _c_type(arg: Any) -> str:
    if arg.kind == "scalar":
        return "int64_t" if arg.dtype == "int64" else "int32_t"
    return "void*"


def arg_types(meta: KernelMeta) -> list[str]:
    """C types of the wrapper's call arguments, in ``meta.call_args`` order (pointers as ``void*``)."""
    return [_c_type(a) for a in meta.call_args]


def unsupported(device_type: str, aot_mode: bool) -> str | None:
    """Why halide-xpu kernels cannot be called from this C++ wrapper (None when they can)."""
    if aot_mode:
        return "AOTInductor does not package halide-xpu kernels yet"
    if device_type not in ("cpu", "cuda", "xpu"):
        return f"the C++ wrapper calls halide-xpu kernels on cpu, cuda and xpu, not on {device_type}"
    return None


def kernel_definition(kernel_name: str, meta: KernelMeta, library: str) -> str:
    """C++ function ``kernel_name(args...)`` for the wrapper's header: loads ``library`` on first use, then calls its
    ``hx_launch``; a failing kernel throws (the Halide message is in the halide_xpu log)."""
    params = [f"{_c_type(a)} {a.name}" for a in meta.call_args]
    stream = []
    if meta.glue_takes_stream:  # GPU wrappers pass torch's raw stream last; the CPU sycl emulation has its queue
        stream = ["hx_current_queue()"] if meta.device_type == "cpu" else ["stream"]
        if meta.device_type != "cpu":
            params.append("void* stream")
    names = ", ".join([a.name for a in meta.call_args] + stream)
    fn_type = f"int (*)({', '.join([_c_type(a) for a in meta.call_args] + (['void*'] if meta.glue_takes_stream else []))})"
    prepare_src = json.dumps(_PREPARE.format(target=meta.target))
    return "\n".join([
        _HEADER,
        f"static void {kernel_name}({', '.join(params)}) {{",
        f"    using fn_t = {fn_type};",
        f"    static fn_t fn = reinterpret_cast<fn_t>(hx_kernel_symbol({prepare_src}, {json.dumps(library)}, \"hx_launch\"));",
        f"    if (int err = fn({names})) throw hx_kernel_error(\"{kernel_name}\", err);",
        "}",
        "",
    ])

"""Builds a kernel: run the algorithm, apply an explicit schedule, AOT-compile with Halide, link a ctypes glue."""
from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from . import cache, config, device_binary, pairs, schedule, stats, usm
from . import halide_helpers as hx
from .meta import DEVICE_CHECK_MESSAGES, DTYPES, MISALIGNED, STORAGE_SUFFIX, ArgSpec, KernelMeta
from .native_sources import halide_include_dir
from .runtime import KernelLauncher
from .schedule.common import LOCAL_SLACK
from .target import cuda_launch, opencl_atomics, opencl_build, opencl_source, ptx, targets
from .target.targets import DeviceCaps

log = logging.getLogger(__name__)

FN_NAME = "hx_kernel"
CHECK_FN_NAME = "hx_checks"  # the check pipeline (device checks), run before the kernel
_memory: dict[str, KernelLauncher] = {}
_memory_lock = threading.Lock()


# The sycl target's kernels call the USM runtime where Halide's OpenCL target calls its OpenCL runtime.
USM_RENAMES = {f"halide_opencl_{n}": f"hx_usm_{n}" for n in ("initialize_kernels", "run", "finalize_kernels", "device_interface")}

USM_DECLS = """\
extern "C" const halide_device_interface_t *hx_usm_device_interface();
extern "C" int hx_usm_check_pointer(void *queue, const void *ptr, const char *arg);
extern "C" void hx_usm_wait(void *queue);
"""

GLUE_PRELUDE = """\
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include "HalideRuntime.h"
#include "kernel.h"
// errors.cpp (the process's Halide runtime): errors reported on this thread so far. A kernel built without asserts
// (gather indices: kernel.halide_target) ignores what its device calls return, so the glue compares the count
extern "C" __attribute__((weak)) uint64_t hx_error_count();
namespace c10 {
inline int64_t div_floor_integer(int64_t a, int64_t b) {
  if ((a < 0) != (b < 0)) { const auto q = a / b; const auto r = a % b; return r ? q - 1 : q; }
  return a / b;
}
// Python's a % b (Inductor's C++ printer for PythonMod: a roll's extent under dynamic shapes)
inline int64_t div_mod(int64_t a, int64_t b) {
  const auto r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
}
static inline void hx_buffer(halide_buffer_t *b, halide_dimension_t *dims, int nd, void *host,
                             uint8_t code, uint8_t bits, uint64_t flags) {
  std::memset(b, 0, sizeof(*b));
  b->host = static_cast<uint8_t *>(host);
  b->type = halide_type_t(static_cast<halide_type_code_t>(code), bits, 1);
  b->dimensions = nd;
  b->dim = nd ? dims : nullptr;
  b->flags = flags;
}
"""


# Halide 21 under-sizes a work-group's shared (local) memory when allocations of different widths share it
# (FuseGPUThreadLoops: each group's offset is padded to the widest type, the total is not; an int64 count beside
# float32 sums ran past the end: wrong values, and a crashed process on Intel's OpenCL CPU device). Offsets are
# right, so launches get room for the padding: the kernel object's launch call is renamed to these wrappers.
LAUNCH_RENAMES = {"opencl": "halide_opencl_run", "cuda": "halide_cuda_run"}
# CUDA kernels' module and launch calls, renamed to the runtime's direct launch (native/cuda_hooks.cpp) unless the
# kernel was built with config.cuda_launch = "halide"
DIRECT_CUDA = {"halide_cuda_initialize_kernels": "hx_cuda_direct_initialize",
               "halide_cuda_finalize_kernels": "hx_cuda_direct_finalize", "halide_cuda_run": "hx_cuda_direct_run"}

LAUNCH_WRAPPER = """\
extern "C" int {real}(void *, void *, const char *, int, int, int, int, int, int, int, size_t *, void **, int8_t *);
extern "C" __attribute__((visibility("hidden"))) int hx_{api}_run(void *uc, void *st, const char *entry, int bx,
    int by, int bz, int tx, int ty, int tz, int shared, size_t *sizes, void **args, int8_t *is_buffer) {{
  if (shared > 0) shared = (shared + 63) / 64 * 64 + {slack};
  return {real}(uc, st, entry, bx, by, bz, tx, ty, tz, shared, sizes, args, is_buffer);
}}
"""


def glue_source(meta: KernelMeta) -> str:
    """C++ entry ``hx_launch(pointers..., scalars..., [stream])`` that wraps raw pointers in halide_buffer_t."""
    params = []
    for a in meta.call_args:
        params.append(f"{a.c_type} {a.name}")
    names = [a.name for a in meta.call_args]
    in_place = meta.target in ("cuda", "sycl")  # device pointers used in place: never copied, never freed
    interface = "halide_cuda_device_interface()" if meta.target == "cuda" else "hx_usm_device_interface()"
    body, call = [], []
    if meta.glue_takes_stream:
        params.append("void *stream")
        names.append("stream")
        call.append("stream")
    check_call = list(call)
    staging = meta.target == "sycl" and meta.device_type == "cpu"  # the emulation may stage host tensors
    if meta.target == "sycl":
        # zero-size tensors may have no storage: they take any pointer of the call. With staging, hx_host_<arg> is
        # host memory the runtime stages through USM copies (hx_usm_stage_host: an AOTInductor package's queue on
        # the CPU emulation), else a USM pointer used in place
        pointers = [a.name for a in meta.call_args if a.is_buffer]
        body.append("  void *hx_any = nullptr;")
        if staging:
            body.append("  bool hx_any_host = false;")
        for n in pointers:
            check = f'hx_usm_check_pointer(stream, {n}, "{n}")'
            if staging:
                body.append(f"  bool hx_host_{n} = false;")
                body.append(f"  if ({n}) {{ int e = {check}; if (e < 0) return e; "
                            f"hx_host_{n} = e == 1; hx_any = {n}; hx_any_host = hx_host_{n}; }}")
            else:
                body.append(f"  if ({n}) {{ if (int e = {check}) return e; hx_any = {n}; }}")
        body.append("  if (!hx_any) return 0;  // every tensor is empty")
        for n in pointers:
            body.append(f"  if (!{n}) {{ {n} = hx_any;{f' hx_host_{n} = hx_any_host;' if staging else ''} }}")
    if meta.pointer_alignment:  # see KernelMeta.pointer_alignment: the scalar_lanes build takes this call
        offsets = [f"static_cast<uint8_t *>({a.alias_of or a.name}) + ({a.offset}) * {DTYPES[a.dtype][3]}"
                   for a in meta.args if a.is_buffer]
        misaligned = " | ".join(f"reinterpret_cast<uintptr_t>({o})" for o in offsets)
        body.append(f"  if (({misaligned}) % {meta.pointer_alignment}) return {MISALIGNED};")
    for a in meta.call_args:
        if a.kind == "scalar" and a.dtype == "int64":  # the kernel takes int32 sizes: refuse what does not fit
            body.append(f"  if ({a.name} != (int32_t){a.name}) return halide_error_code_buffer_extents_too_large;")
    for i, a in enumerate(meta.args):
        if a.kind == "scalar":
            call.append(a.name)
            check_call.append(a.name)
            continue
        code, bits = meta.type_code_bits(a)
        size = DTYPES[a.dtype][3]
        shape, stride = a.shape, a.stride
        if a.name in meta.pairs:  # words of two elements along the first dim (pairs.py)
            shape, stride = (f"({shape[0]}) / 2", *shape[1:]), (stride[0], *(f"({s}) / 2" for s in stride[1:]))
        dims = ", ".join(f"{{0, (int32_t)({e}), (int32_t)({s}), 0}}" for e, s in zip(shape, stride))
        body.append(f"  halide_dimension_t d{i}[{max(len(a.shape), 1)}] = {{{dims or '{0, 1, 1, 0}'}}};")
        base = a.alias_of or a.name
        # inputs, and outputs that keep their other elements, start as host data Halide copies to the device
        flags = "halide_buffer_flag_host_dirty" if a.kind == "in" or a.partial else "0"
        ptr = f"static_cast<uint8_t *>({base}) + ({a.offset}) * {size}"
        body.append(f"  halide_buffer_t b{i};")
        if in_place:
            indent = "  "
            if staging:
                body.append(f"  if (hx_host_{base}) hx_buffer(&b{i}, d{i}, {len(a.shape)}, {ptr}, {code}, {bits}, {flags});")
                body.append("  else {")
                indent = "    "
            body.append(f"{indent}hx_buffer(&b{i}, d{i}, {len(a.shape)}, nullptr, {code}, {bits}, halide_buffer_flag_device_dirty);")
            body.append(f"{indent}b{i}.device = reinterpret_cast<uint64_t>({ptr});")
            body.append(f"{indent}b{i}.device_interface = {interface};")
            if staging:
                body.append("  }")
        else:
            body.append(f"  hx_buffer(&b{i}, d{i}, {len(a.shape)}, {ptr}, {code}, {bits}, {flags});")
        call.append(f"&b{i}")
        if a.kind != "out":
            check_call.append(f"&b{i}")
    prelude = GLUE_PRELUDE + {"cuda": '#include "HalideRuntimeCuda.h"\n', "sycl": USM_DECLS}.get(meta.target, "")
    if meta.error_word:
        prelude += '#include "checks.h"\n'
    # hx_launch_n runs the pipeline n times on the same buffers (benchmarks: device-resident after the first)
    lines = [prelude, f'extern "C" int hx_launch_n({", ".join(params + ["int32_t hx_n"])}) {{', *body]
    lines.append("  int err = 0;")
    lines.append("  const uint64_t hx_errors = hx_error_count ? hx_error_count() : 0;")
    if meta.error_word:
        lines += _check_glue(check_call, "stream" if meta.glue_takes_stream else "nullptr")
    lines.append(f"  for (int32_t i = 0; i < hx_n && !err; i++) err = {FN_NAME}({', '.join(call)});")
    if meta.target == "sycl" and meta.device_type == "cpu":  # emulation: host code reads the results next
        lines.append("  if (!err) hx_usm_wait(stream);")
    if staging or not in_place:  # host pointers (all, or those staged): results back, device copies released
        held = (lambda a: f"hx_host_{a.alias_of or a.name} && ") if staging else (lambda a: "")  # noqa: E731
        uc = "stream" if staging else "nullptr"
        for i, a in enumerate(meta.args):
            if a.kind == "out":
                lines.append(f"  if (!err && {held(a)}b{i}.device) err = halide_copy_to_host({uc}, &b{i});")
        for i, a in enumerate(meta.args):
            if a.is_buffer:
                lines.append(f"  if ({held(a)}b{i}.device) halide_device_free({uc}, &b{i});")
    lines.append("  if (!err && hx_error_count && hx_error_count() != hx_errors)")
    lines.append("    err = halide_error_code_device_run_failed;  // reported, and not returned (built without asserts)")
    lines += ["  return err;", "}", "",
              f'extern "C" int hx_launch({", ".join(params)}) {{ return hx_launch_n({", ".join(names + ["1"])}); }}', ""]
    return "\n".join(lines)


def _check_glue(call: list[str], user_context: str) -> list[str]:
    """Glue lines that run the check pipeline (``meta.error_word``) before the kernel and fail the call, with the
    failed check's message through Halide's error handler, when its error word is not 0."""
    messages = " ".join(f'case {code}: halide_error({user_context}, "{text}\\n"); break;'
                        for code, text in DEVICE_CHECK_MESSAGES.items())
    return [
        "  int32_t hx_word = 0;",
        "  halide_dimension_t d_word[1] = {{0, 1, 1, 0}};",
        "  halide_buffer_t b_word;",
        "  hx_buffer(&b_word, d_word, 1, &hx_word, 0, 32, 0);",
        f"  err = {CHECK_FN_NAME}({', '.join([*call, '&b_word'])});",
        f"  if (!err && b_word.device) err = halide_copy_to_host({user_context}, &b_word);",
        f"  if (b_word.device) halide_device_free({user_context}, &b_word);",
        f"  if (!err && hx_word) {{ switch (hx_word) {{ {messages} }} err = halide_error_code_generic_error; }}",
    ]


def _redefine_symbols(obj: Path, renames: dict[str, str]) -> None:
    """Rename symbols in the object file ``obj`` (binutils objcopy)."""
    args = [f"--redefine-sym={old}={new}" for old, new in renames.items()]
    proc = subprocess.run(["objcopy", *args, str(obj)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"halide_xpu: objcopy (binutils) failed on {obj}: {proc.stderr}")


def _autoschedule(pipeline: Any, funcs: dict[str, Any], meta: KernelMeta, target: Any) -> list[str]:
    import halide as hl

    name = meta.schedule.family.split(":", 1)[1]
    from torch._inductor.codecache import HalideCodeCache

    hl.load_plugin(HalideCodeCache.find_libautoschedule(name))
    for a in meta.args:
        if not a.is_buffer:
            continue
        ranges = [hl.Range(0, int(e)) for e in a.shape]
        target_obj = funcs[a.name].output_buffer() if a.kind == "out" else funcs[a.name]
        target_obj.set_estimates(ranges)
    pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(name, dict(meta.schedule.params)))
    return [f"# autoscheduler {name}"]


def compile_scheduled(
    meta: KernelMeta, source: str, compile_fn: Callable[[Any, list[Any], Any], Any], caps: Optional[DeviceCaps] = None,
    marked: bool = True,
) -> tuple[Any, list[str], str]:
    """Run the algorithm, apply the first schedule variant Halide accepts and ``compile_fn(pipeline, arguments,
    target)`` it; returns (compile_fn's result, schedule lines, variant name)."""
    import halide as hl

    meta, source = pairs.apply(meta, source)  # build() applied it already (the glue needs it): a cached no-op then
    code = compile(source, "<halide_xpu kernel>", "exec")
    target = hl.Target(meta.halide_target)
    caps = caps or targets.device_caps(meta.target, meta.device_type, meta.device_index)
    auto = meta.schedule.family.startswith("autoschedule:")
    candidates = [("autoschedule", None)] if auto else schedule.variants(meta, caps)
    errors = []
    for name, variant in candidates:
        vsource = source if auto else schedule.variant_source(name, meta, source)
        if vsource is None:
            continue
        ns: dict[str, Any] = {}
        exec(code if vsource is source else compile(vsource, "<halide_xpu kernel>", "exec"), ns)
        with hx.building_for(meta.target if marked else "plain"):
            funcs = ns["algorithm"]()
        pipeline = hl.Pipeline([funcs[o] for o in meta.outputs])
        try:
            lines = (_autoschedule(pipeline, funcs, meta, target) if auto
                     else schedule.apply(variant, meta, funcs, caps, vsource))
            arguments = [hl.Argument(funcs.get(a.name + STORAGE_SUFFIX, funcs[a.name])) for a in meta.args if a.kind != "out"]
            if name == "fused_warps":  # see gpu_warps.branch_shuffles
                result = _check_warps(pipeline, arguments, target, compile_fn)
            else:
                result = compile_fn(pipeline, arguments, target)
            stats.counters["halide_compiles"] += 1
            break
        except (hl.HalideError, schedule.UnscheduledUpdate, schedule.NotApplicable) as e:
            errors.append(f"{name}: {e}")
            log.debug("schedule %s rejected by Halide: %s", name, e)
        except Exception as e:  # a bug in the variant's code: the next variant builds the kernel, said loudly
            errors.append(f"{name}: {type(e).__name__}: {e}")
            stats.counters["schedule_errors"] += 1
            log.warning("halide_xpu: schedule variant %r raised %s: %s; trying the next", name, type(e).__name__, e,
                        exc_info=log.isEnabledFor(logging.DEBUG))
    else:
        raise RuntimeError("halide_xpu: every schedule failed to compile:\n" + "\n".join(errors))
    if errors:
        log.info("halide_xpu: using schedule variant %r after %d rejected", name, len(errors))
    return result, lines, name


def _build_checks(meta: KernelMeta, source: str, workdir: Path) -> Optional[tuple[Path, list[str]]]:
    """The kernel's check pipeline (``meta.error_word``): a second run of its algorithm whose one output is
    ``hx_error``, so its Funcs are unscheduled copies (the kernel's schedule may compute an index inside its own
    loops); entry ``CHECK_FN_NAME``, same arguments as the kernel minus its outputs. Returns (object, schedule),
    or None when no check is real (float divisions). On the opencl target its OpenCL C is built in a child first
    (``config.opencl_build_check``); if that fails, the checks run on the host (the buffers are host memory)."""
    import halide as hl

    ns: dict[str, Any] = {}
    exec(compile(source, "<halide_xpu kernel checks>", "exec"), ns)
    with hx.building_for(meta.target):
        funcs = ns["algorithm"]()
        if not hx.checks_built():
            return None
    obj = workdir / "checks.o"
    outputs = {hl.OutputFileType.object: str(obj), hl.OutputFileType.c_header: str(workdir / "checks.h")}
    arguments = [hl.Argument(funcs.get(a.name + STORAGE_SUFFIX, funcs[a.name])) for a in meta.args if a.kind != "out"]
    for halide_target in (meta.halide_target, targets.host_target_of(meta.halide_target)):
        target = hl.Target(halide_target)
        lines = schedule.schedule_error_word(funcs["hx_error"], funcs["hx_error_checks"], target.has_gpu_feature())
        hl.Pipeline([funcs["hx_error"]]).compile_to(outputs, arguments, CHECK_FN_NAME, target)
        stats.counters["halide_compiles"] += 1
        if meta.target != "opencl" or not config.opencl_build_check or not target.has_gpu_feature():
            break
        src = workdir / "checks.cl"
        why = opencl_build.check_in_child(src) if device_binary.save_source(obj, src) else None
        if not why:
            break
        log.warning("halide_xpu: the checks of OpenCL kernel %s run on the host: %s", workdir.name, why[-300:])
        ns = {}
        exec(compile(source, "<halide_xpu kernel checks>", "exec"), ns)
        with hx.building_for(meta.target):
            funcs = ns["algorithm"]()  # unscheduled Funcs again for the host build
    return obj, lines


class _CompileTo:
    """``compile_scheduled``'s compile step: the pipeline's ``outputs`` files, entry ``FN_NAME``; ``also`` adds
    files to one call (the warp form's conceptual Stmt, checked from the same lowering as the object)."""

    def __init__(self, outputs: dict[Any, str]) -> None:
        self.outputs = outputs

    def __call__(self, p: Any, args: list[Any], target: Any, also: Optional[dict[Any, str]] = None) -> None:
        p.compile_to({**self.outputs, **(also or {})}, args, FN_NAME, target)


def _check_warps(pipeline: Any, arguments: list[Any], target: Any, compile_fn: Any) -> Any:
    """The warp form compiled by ``compile_fn`` and refused when a shuffle stayed in a branch (``branch_shuffles``):
    a build's compile step writes the conceptual Stmt in the same lowering; another ``compile_fn`` (a test's, a
    script's) gets a separate lowering for the check first."""
    import halide as hl

    if "also" not in inspect.signature(compile_fn).parameters:
        schedule.gpu_warps.check_lowered(pipeline, arguments, target)
        return compile_fn(pipeline, arguments, target)
    with tempfile.TemporaryDirectory(prefix="hx_warps_") as tmp:
        stmt = Path(tmp) / "kernel.conceptual.stmt"
        result = compile_fn(pipeline, arguments, target, also={hl.OutputFileType.conceptual_stmt: str(stmt)})
        schedule.gpu_warps.refuse_branch_shuffles(stmt.read_text(errors="replace"))
    return result


def build(meta: KernelMeta, source: str, workdir: Path, caps: Optional[DeviceCaps] = None) -> tuple[list[str], str]:
    """Compile ``source`` for ``meta`` into ``workdir/kernel.so``; returns (schedule lines, variant name). ``caps``:
    the device's, by default asked of it (given: a build for a device this machine lacks)."""
    import halide as hl

    meta, source = pairs.apply(meta, source)
    (workdir / "kernel.py").write_text(source)
    (workdir / "meta.repr").write_text(repr(meta))  # scripts/replay_kernel.py rebuilds a kernel from its entry
    outputs = {hl.OutputFileType.object: str(workdir / "kernel.o"), hl.OutputFileType.c_header: str(workdir / "kernel.h")}
    marked = meta.target == "cuda" and any(f"hx.{name}(" in source for name in hx.MARKING)
    if os.environ.get("HALIDE_XPU_DUMP_STMT") or meta.target == "cuda":  # CUDA: marks and launches checked in it
        outputs[hl.OutputFileType.stmt] = str(workdir / "kernel.stmt")
    compile_only = _CompileTo(outputs)

    def compile_fn(p: Any, args: list[Any], target: Any, also: Optional[dict[Any, str]] = None) -> None:
        compile_only(p, args, target, also)
        if target.has_feature(hl.TargetFeature.OpenCL):  # see opencl_atomics: one read per compare-and-swap
            try:
                opencl_atomics.patch_object(workdir / "kernel.o")
            except ValueError as e:
                raise schedule.NotApplicable(str(e)) from None
            wrong = opencl_source.private_arrays_indexed_as_shared((workdir / "kernel.o").read_bytes())
            if wrong:  # see opencl_source: the next variant
                raise schedule.NotApplicable(f"Halide's OpenCL C indexes private arrays {wrong} as shared ones")
        if meta.target == "cuda" and target.has_gpu_feature():  # a launch the driver refuses: the next variant
            refused = cuda_launch.refused_launches((workdir / "kernel.stmt").read_text(errors="replace"))
            if refused:
                stats.counters["cuda_launch_refusals"] += 1
                raise schedule.NotApplicable(f"a launch CUDA refuses: {refused[0]}")
        if meta.target == "opencl" and config.opencl_build_check:  # see opencl_build: a crash kills a child only
            src = workdir / device_binary.SOURCE_FILE
            if device_binary.save_source(workdir / "kernel.o", src):
                why = opencl_build.check_in_child(src)
                if why:
                    stats.counters["opencl_build_rejects"] += 1
                    raise schedule.NotApplicable(why)

    built = meta
    try:
        _, lines, name = compile_scheduled(meta, source, compile_fn, caps)
    except RuntimeError as e:
        if meta.target != "opencl":
            raise
        # no variant the OpenCL compiler takes: the kernel runs on the host (same glue: host pointers)
        log.warning("halide_xpu: OpenCL kernel %s built for the host instead: %s", workdir.name, str(e)[-600:])
        stats.counters["opencl_host_fallbacks"] += 1
        built = dataclasses.replace(meta, halide_target=targets.host_target_of(meta.halide_target))
        _, lines, name = compile_scheduled(built, source, compile_only, targets.device_caps("host"))
    objects = [workdir / "kernel.o"]
    if meta.error_word:
        checked = _build_checks(built, source, workdir)
        if checked is None:  # every recorded check was a float division: nothing to check
            meta = dataclasses.replace(meta, error_word=False)
        else:
            objects.append(checked[0])
            lines += ["# check pipeline (device checks: the error word read after the launch)", *checked[1]]
    if marked and "fast_inverse" in (workdir / "kernel.stmt").read_text(errors="replace"):
        # Halide computed a marked value on the host (a loop-invariant one: kernel arguments are evaluated there),
        # where no PTX rewrite turns the mark into its meaning: x86's approximate reciprocal (bf16(0.0) became inf)
        log.info("halide_xpu: a marked CUDA value is loop-invariant and runs on the host: built with plain math")
        _, lines, name = compile_scheduled(meta, source, compile_fn, caps, marked=False)
    glue = glue_source(meta)
    if meta.target == "sycl":  # the OpenCL target's device calls go to the USM runtime (usm.py)
        for obj in objects:
            _redefine_symbols(obj, USM_RENAMES)
        device_binary.save_source(workdir / "kernel.o", workdir / device_binary.SOURCE_FILE)
    direct = meta.target == "cuda" and not meta.halide_launch
    if meta.target in LAUNCH_RENAMES:  # room for Halide's shared-memory padding (LOCAL_SLACK)
        real = LAUNCH_RENAMES[meta.target]
        for obj in objects:
            _redefine_symbols(obj, {real: f"hx_{meta.target}_run"})
        glue += LAUNCH_WRAPPER.format(real=DIRECT_CUDA[real] if direct else real, api=meta.target, slack=LOCAL_SLACK)
    if meta.target == "cuda":
        if marked:
            ptx.check_markers(meta.halide_target)
        ptx.tag_kernel_names(workdir / "kernel.o", kernel_key(meta, source)[:5])  # kernel names per pipeline
        init = DIRECT_CUDA[ptx.INIT_SYMBOL] if direct else ptx.INIT_SYMBOL
        fast = ptx.rewrite_object(workdir / "kernel.o", meta.fast_math, init)
        if fast:
            _redefine_symbols(workdir / "kernel.o", {ptx.INIT_SYMBOL: ptx.GLUE_SYMBOL})
            glue += fast
        if direct:
            for obj in objects:
                _redefine_symbols(obj, {k: v for k, v in DIRECT_CUDA.items() if k != "halide_cuda_run"})
    (workdir / "glue.cpp").write_text(glue)
    (workdir / "schedule.txt").write_text("\n".join(lines) + "\n")
    subprocess.run(
        ["c++", "-O2", "-fPIC", "-shared", "-std=c++17", f"-I{halide_include_dir()}", f"-I{workdir}",
         str(workdir / "glue.cpp"), *map(str, objects), "-o", str(workdir / cache.LIBRARY)],
        check=True,
        capture_output=True,
        text=True,
    )
    return lines, name


@functools.lru_cache(maxsize=None)
def code_version() -> str:
    """Digest of the code that shapes a built kernel (schedules, glue, the helpers kernels call, native runtime): part
    of every cache key."""
    root = Path(__file__).parent
    files = sorted([*root.glob("schedule/*.py"), root / "compiler.py", root / "halide_helpers.py", root / "pairs.py",
                    *root.glob("special_*.py"), root / "ieee_math.py", root / "meta.py",
                    *root.glob("target/*.py"), *root.glob("native/*.cpp")])
    return cache.cache_key(*(f.read_text() for f in files))


def kernel_key(meta: KernelMeta, source: str) -> str:
    return cache.cache_key(source, repr(meta), code_version())


def _queue(meta: KernelMeta) -> Optional[Callable[[], int]]:
    """The queue getter of a sycl kernel's launcher (the USM runtime readied for it); None on other targets."""
    return usm.launch_queue(meta) if meta.target == "sycl" else None


def scalar_variant(meta: KernelMeta) -> KernelMeta:
    """``meta`` built for pointers off the vector alignment (``KernelMeta.pointer_alignment``): lanes unrolled."""
    return dataclasses.replace(meta, scalar_lanes=True)


def load(meta: KernelMeta, source: str) -> KernelLauncher:
    """The launcher for a kernel: from memory, else from the disk cache, else compiled now."""
    key = kernel_key(meta, source)
    with _memory_lock:
        if key in _memory:
            stats.counters["memory_cache_hits"] += 1
            return _memory[key]
    found = cache.lookup(key)
    launcher = None
    if found is not None:
        lib, record = found
        try:
            launcher = KernelLauncher(lib, meta, record.get("schedule", []), record.get("variant", "?"), _queue(meta))
            stats.counters["disk_cache_hits"] += 1
        except (OSError, AttributeError) as e:
            cache.invalidate(key, str(e))
    if launcher is None:
        t0 = time.perf_counter()
        workdir = cache.new_workdir()
        try:
            lines, variant = build(meta, source, workdir)
        except subprocess.CalledProcessError as e:
            raise RuntimeError(f"halide_xpu: linking kernel failed in {workdir}:\n{e.stderr}") from e
        lib = cache.publish(key, workdir, {"schedule": lines, "variant": variant, "target": meta.halide_target})
        launcher = KernelLauncher(lib, meta, lines, variant, _queue(meta))
        seconds = time.perf_counter() - t0
        stats.compile_seconds.append(seconds)
        log.debug("compiled kernel %s in %.3fs (%s)", key[:12], seconds, variant)
    if meta.target == "sycl":  # device code built now (SPIR-V, in child processes), not at first launch
        launcher.device_binary = device_binary.attach(meta, launcher.library.parent)
    if meta.pointer_alignment:  # built on the first call that passes a pointer off the vector alignment
        launcher.scalar_variant = functools.partial(load, scalar_variant(meta), source)
    with _memory_lock:
        _memory[key] = launcher
    return launcher

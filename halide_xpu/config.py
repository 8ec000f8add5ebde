"""Knobs of halide-xpu: module attributes, validated on assignment, defaults from ``HALIDE_XPU_*`` env vars."""
from __future__ import annotations

import logging
import os
import sys
import types
from typing import Any, Callable, Optional

log = logging.getLogger(__name__)

CPU_TARGETS = ("opencl", "host", "sycl")  # sycl: the XPU runtime (USM, SYCL queue) emulated on a CPU device
CUDA_TARGETS = ("cuda",)  # CUDA tensors need a CUDA-pointer target; OpenCL on NVIDIA runs via cpu_target
CUDA_LAUNCHES = ("direct", "halide")
XPU_TARGETS = ("sycl",)  # torch XPU tensors are USM pointers on a SYCL queue (usm.py)
SCHEDULERS = ("explicit", "Mullapudi2016", "Adams2019", "Li2018", "Anderson2021")
DEVICE_TYPES = ("cpu", "gpu", "accelerator")
# sycl target's device code: auto = native where a toolchain for the device exists, else SPIR-V, else OpenCL C
DEVICE_BINARIES = ("auto", "source", "spirv", "native")
GRF_MODES = ("default", "small", "large", "auto")  # register file per hardware thread on Intel GPUs
# schedule database (autotune/): off = defaults only, db = apply tuned records, max = also tune a kernel the
# database lacks when it is first compiled (within autotune_budget_s)
AUTOTUNE_MODES = ("off", "db", "max")
SCAN_MODES = ("off", "gpu", "all")


def _choice(name: str, choices: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"halide_xpu.config.{name}={value!r} is not valid; choose one of {list(choices)}")
        return value

    return check


def _optional_choice(name: str, choices: tuple[str, ...]) -> Callable[[Any], Optional[str]]:
    inner = _choice(name, choices)
    return lambda value: None if value in (None, "") else inner(value)


def _optional_str(value: Any) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"expected a string or None, got {value!r}")
    return value or None


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"expected a boolean, got {value!r}")
    return bool(value)


def _positive_int(value: Any) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def _overrides(value: Any) -> dict[str, int]:
    """``"wg=256,vector=4"`` or a dict → {name: int}: forces schedule tunables (for tuning by hand or script)."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, str):
        items = [kv.split("=", 1) for kv in value.split(",") if kv.strip()]
    else:
        raise ValueError(f"expected 'name=int,...' or a dict, got {value!r}")
    try:
        return {str(k).strip(): int(v) for k, v in items}
    except (TypeError, ValueError):
        raise ValueError(f"schedule_overrides: expected 'name=int,...', got {value!r}") from None


def _paths(value: Any) -> Optional[str]:
    """``os.pathsep``-separated directories (or a list of them); None/"" = the default (autotune/database.py)."""
    if value in (None, ""):
        return None
    if isinstance(value, (list, tuple)):
        return os.pathsep.join(os.fspath(v) for v in value)
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"expected paths separated by {os.pathsep!r}, got {value!r}")
    return os.fspath(value)


def _seconds(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number of seconds, got {value!r}") from None
    if seconds < 0:
        raise ValueError(f"expected a number of seconds >= 0, got {value!r}")
    return seconds


def _path(value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"expected a path, got {value!r}")
    return os.fspath(value)


# name -> (validator, default); a default of None for cpu_target means "resolve from the machine".
_KNOBS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "cpu_target": (_optional_choice("cpu_target", CPU_TARGETS), None),
    "cuda_target": (_choice("cuda_target", CUDA_TARGETS), "cuda"),
    "xpu_target": (_choice("xpu_target", XPU_TARGETS), "sycl"),
    "sycl_device": (_optional_str, None),  # dpctl filter string for the sycl emulation device, e.g. "opencl:cpu:0"
    "opencl_platform": (_optional_str, None),
    "opencl_device_type": (_optional_choice("opencl_device_type", DEVICE_TYPES), None),
    "scheduler": (_choice("scheduler", SCHEDULERS), "explicit"),
    "fallback": (_bool, True),
    "asserts": (_bool, True),
    # CUDA target: exp on the hardware exp2 unit and Triton's fp32 division (div.full, <= 2 ulp), see target/ptx.py.
    # On again since 2026-11-25: HF Llama's fp32 training step was wrong with it (relative error 0.44) because the
    # PTX rewrite matched marker chains across the kernels of a module; matched per kernel, Llama and GPT-2 fp32
    # training agree with eager to 1.7e-6 / 6.1e-6 and the CUDA op, training and special-value suites pass with it
    "cuda_fast_math": (_bool, True),
    # CUDA kernels' launch path: "direct" (native/cuda_hooks.cpp: module and functions cached per pipeline and
    # context, cuLaunchKernel on torch's stream) or "halide" (Halide's CUDA runtime: context push/pop, a module
    # lookup and cuModuleGetFunction per call); "halide" is kept for comparison (benchmarks/bench_wrapper.py)
    "cuda_launch": (_choice("cuda_launch", CUDA_LAUNCHES), "direct"),
    # device kernels on CPU and XPU tensors check indirect/computed indices and integer divisors as eager does,
    # through an error word computed before the kernel and read back after it (kernel.device_check); CUDA kernels
    # check indices with a device-side assert, as eager CUDA does (halide_helpers.index_checked): off, such a
    # kernel reads a clamped index and divides by zero as Halide defines it, silently
    "device_checks": (_bool, True),
    "schedule_overrides": (_overrides, {}),
    # scans (cumsum, cumprod, logcumsumexp, cummax, associative_scan) as our kernels (scan.py): "gpu" on CUDA and XPU
    # devices, where a scan we cannot lower (a split scan of one long row) falls back to Triton's; "all" also on
    # CPU devices, where Inductor's C++ backend has no scan kernel to fall back to; "off": ATen's scan kernels
    "scan_kernels": (_choice("scan_kernels", SCAN_MODES), "gpu"),
    # scans of fewer rows than scan.GPU_MIN_ROWS, longer than 32, as chunks scanned in parallel (scan.py _chunked):
    # "gpu" (CUDA and XPU devices, where one serial work-item per row leaves the device idle), "all" also on CPU
    # devices (tests: the OpenCL CPU device runs the GPU schedules), "off": one work-item per row everywhere
    "scan_chunks": (_choice("scan_chunks", SCAN_MODES), "gpu"),
    # elements of a row one work-item scans serially in the chunked form (the chunk totals then combine in
    # log2(row / scan_chunk) steps across the work-group); on the H200 (benchmarks/bench_scan.py) 2 and 4 beat 8, 16
    # and 32 on every scan (HF Llama's position ids, 8 x 512: 1.60, 1.62, 1.77, 2.15, 2.36 us; Triton 1.06) and 2
    # beat 4 on longer rows (cumsum of 64 x 2000 float32: 2.19 vs 2.49 us, Triton 1.58)
    "scan_chunk": (_positive_int, 2),
    # GPU targets: the pointwise kernels of a foreach/combo node (an optimizer step) in one launch (combo.py)
    "combo_kernels": (_bool, True),
    # vectors each work-item of a combo kernel stores per output (combo.merge; benchmarks/bench_combo.py measures)
    "combo_per_item": (_positive_int, 1),
    # work-items per work-group of a combo kernel (at most the device's; benchmarks/bench_combo.py measures)
    "combo_wg": (_positive_int, 256),
    # how the sycl target's kernels reach the device (device_binary.py): OpenCL C source built at first launch, or
    # SPIR-V / native binaries built ahead of launch in child processes and cached on disk
    "device_binary": (_choice("device_binary", DEVICE_BINARIES), "auto"),
    # Intel GPUs' register-file mode for the sycl target's device binaries (build options of the device
    # compiler; a kernel's schedule parameter `grf`, e.g. from a tuned record, wins); ignored on other devices
    "grf_mode": (_choice("grf_mode", GRF_MODES), "default"),
    # opencl target: build each new kernel's OpenCL C in a child process first (target/opencl_build.py): a crash
    # of the OpenCL compiler rejects that schedule instead of killing the process at the kernel's first launch
    "opencl_build_check": (_bool, True),
    "cache_dir": (_path, os.path.join(os.path.expanduser("~"), ".cache", "halide_xpu")),
    # tuned schedule records (schedules/README.md): directories searched, default the package checkout's
    # schedules/ plus <cache_dir>/schedules; "off" ignores them, "max" tunes missing kernels at compile time
    "schedule_db": (_paths, None),
    "autotune": (_choice("autotune", AUTOTUNE_MODES), "db"),
    "autotune_budget_s": (_seconds, 30.0),  # autotune="max": tuning time per kernel
}


class _ConfigModule(types.ModuleType):
    """Module type whose attribute assignments are validated."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _KNOBS:
            value = _KNOBS[name][0](value)
            if name in ("opencl_platform", "opencl_device_type"):
                from .target import opencl_devices

                opencl_devices.select_device.cache_clear()
            if name == "sycl_device":
                from .target import sycl_devices

                sycl_devices.emulation_device.cache_clear()
        super().__setattr__(name, value)

    @property
    def resolved_cpu_target(self) -> str:
        """``cpu_target`` with ``None`` resolved: opencl when an OpenCL device exists, else host (warned once)."""
        if self.cpu_target is not None:
            return self.cpu_target
        from .target import opencl_devices

        if opencl_devices.select_device() is not None:
            return "opencl"
        _warn_no_opencl_once()
        return "host"

    def knobs(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _KNOBS}


_warned: list[bool] = []


def _warn_no_opencl_once() -> None:
    if not _warned:
        _warned.append(True)
        log.warning(
            "halide_xpu: no OpenCL device found; cpu_target falls back to 'host'. "
            "Install Intel's OpenCL CPU runtime (pip install intel-opencl-rt) or PoCL (apt-get install pocl-opencl-icd)."
        )


def reset_warnings() -> None:
    _warned.clear()


def _load_defaults(module: types.ModuleType) -> None:
    for name, (check, default) in _KNOBS.items():
        env = os.environ.get(f"HALIDE_XPU_{name.upper()}")
        if env is not None:
            try:
                value = check(env)
            except ValueError as e:
                raise ValueError(f"environment variable HALIDE_XPU_{name.upper()}: {e}") from None
        else:
            value = default
        types.ModuleType.__setattr__(module, name, value)


_self = sys.modules[__name__]
_self.__class__ = _ConfigModule
_load_defaults(_self)

# Declared for type checkers; real values are set by _load_defaults above.
cpu_target: Optional[str]
cuda_target: str
xpu_target: str
opencl_platform: Optional[str]
opencl_device_type: Optional[str]
sycl_device: Optional[str]
scheduler: str
fallback: bool
asserts: bool
cuda_fast_math: bool
cuda_launch: str
device_checks: bool
cache_dir: str
scan_kernels: str
scan_chunks: str
scan_chunk: int
device_binary: str
schedule_overrides: dict[str, int]
combo_per_item: int
combo_wg: int
schedule_db: Optional[str]
autotune: str
autotune_budget_s: float
opencl_build_check: bool

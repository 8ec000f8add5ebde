"""Command line: ``python -m halide_xpu demo`` runs the demo, ``python -m halide_xpu info`` lists devices and knobs,
``python -m halide_xpu conformance --target host`` runs the OpInfo conformance suite, ``python -m halide_xpu tune
--suite`` tunes schedules into the schedule database, ``python -m halide_xpu fuzz --target opencl`` compiles random
graphs against eager (``--help`` for their options)."""
from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["conformance"]:  # its own options: see conformance.add_arguments
        from .conformance import main as conformance

        return conformance(argv[1:])
    if argv[:1] == ["fuzz"]:  # its own options: see graph_fuzz.main
        from .graph_fuzz import main as fuzz

        return fuzz(argv[1:])
    if argv[:1] == ["tune"]:  # its own options: see autotune/tune.add_arguments
        from .autotune.tune import main as tune

        return tune(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m halide_xpu")
    parser.add_argument("command", choices=["demo", "info", "conformance", "tune", "fuzz"])
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "info":
        from . import config
        from .target import opencl_devices

        for dev in opencl_devices.list_devices():
            print("OpenCL:", dev.describe())
        if not opencl_devices.list_devices():
            print("OpenCL: no device (pip install intel-opencl-rt, or apt-get install pocl-opencl-icd)")
        print("selected:", (opencl_devices.select_device() or "none"))
        from .target import sycl_devices

        why = sycl_devices.available()
        print("SYCL emulation (cpu_target='sycl'):", why or sycl_devices.emulation_info())
        _device_binaries(None if why else sycl_devices.emulation_info().backend)
        for k, v in config.knobs().items():
            print(f"config.{k} = {v!r}")
        print("resolved cpu_target =", config.resolved_cpu_target)
        from .autotune import database

        print("schedule database (first hit wins):", ", ".join(map(str, database.db_paths())))
        print("schedule device key (cpu):", database.device_key(config.resolved_cpu_target))
        return 0
    from .demo import main as demo

    return demo()


def _device_binaries(backend: str | None) -> None:
    """The sycl target's device-binary formats: which are available here, the toolchains found, why not."""
    from . import config, device_binary
    from .target import spirv, sycl_native

    for name in ("clang", "llvm-spirv", "spirv-val", "ocloc"):
        print(f"toolchain {name}: {spirv.version(name)}")
    why = sycl_native.unavailable()
    print("SYCL interop library (native binaries from the device's compiler):",
          why.removeprefix("native: ") if why else sycl_native.library_path())
    for fmt in device_binary.ORDER:
        for where, on in (("emulation device", backend), ("xpu device", "level_zero")):
            why = device_binary.unavailable(fmt, on) if on else "no emulation device"
            print(f"device binary {fmt} ({where}): {'available' if why is None else why.removeprefix(fmt + ': ')}")
    if backend:
        print(f"device_binary={config.device_binary!r} on the emulation device ({backend}) uses:",
              device_binary.choose_format(backend))
    print("Level Zero:", spirv.level_zero_status())


if __name__ == "__main__":
    sys.exit(main())

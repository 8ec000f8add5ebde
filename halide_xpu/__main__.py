"""Command line: ``python -m halide_xpu demo`` runs the demo, ``python -m halide_xpu info`` lists devices and knobs,
``python -m halide_xpu conformance --target host`` runs the OpInfo conformance suite (``--help`` for its options)."""
from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["conformance"]:  # its own options: see conformance.add_arguments
        from .conformance import main as conformance

        return conformance(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m halide_xpu")
    parser.add_argument("command", choices=["demo", "info", "conformance"])
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
        for k, v in config.knobs().items():
            print(f"config.{k} = {v!r}")
        print("resolved cpu_target =", config.resolved_cpu_target)
        return 0
    from .demo import main as demo

    return demo()


if __name__ == "__main__":
    sys.exit(main())

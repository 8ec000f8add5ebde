"""Child process that builds native device binaries: SPIR-V in, the device compiler's binary out (sycl_native.py)."""
from __future__ import annotations

import json
import sys
import traceback


def build(selector: str, spirv: bytes, options: str, library: str) -> bytes:
    """Load ``spirv`` on the device ``selector`` (its compiler runs here) and return the built program's binary."""
    from . import sycl_devices, sycl_native

    dpctl = sycl_devices.dpctl()
    import dpctl.program as programs

    program = programs.create_program_from_spirv(dpctl.SyclQueue(selector), spirv, options)
    return sycl_native.binary_of(program.addressof_ref(), library)


def main() -> int:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = stdin.readline()
        if not line:
            return 0
        request = json.loads(line)
        payload = stdin.read(request["size"])
        try:
            data = build(request["selector"], payload, request["options"], request["library"])
            reply = {"ok": True, "size": len(data)}
        except Exception as e:  # noqa: BLE001 - reported to the parent, which falls back to SPIR-V
            data, reply = b"", {"ok": False, "error": f"{type(e).__name__}: {e}"}
            traceback.print_exc()
        stdout.write(json.dumps(reply).encode() + b"\n" + data)
        stdout.flush()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Sets up halide-xpu on a fresh CPU machine: torch 2.13 (CPU build), halide 21, Intel's OpenCL CPU runtime,
# and the test/benchmark extras. Idempotent. PYTHON picks the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.__version__.split('+')[0] >= '2.11' else 1)" 2>/dev/null; then
  echo "== installing torch 2.13.0 (CPU build)"
  "$PY" -m pip install -q "torch==2.13.0"
fi
echo "== installing halide-xpu with test and benchmark extras"
"$PY" -m pip install -q -e ".[test,bench]"
APT_UPDATED=0
apt_update() {  # apt-get update at most once per run
  [ "$APT_UPDATED" = 1 ] || { apt-get update -qq && APT_UPDATED=1; }
}
if [ "${HALIDE_XPU_WITH_POCL:-0}" = "1" ] && command -v apt-get >/dev/null; then
  echo "== installing PoCL (second OpenCL CPU runtime)"
  { apt_update && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pocl-opencl-icd; } || echo "PoCL install failed; continuing"
fi
# Device-code toolchain of the sycl target (OpenCL C -> SPIR-V), Level Zero's loader (info reports the driver) and
# headers (the SYCL interop library that extracts and loads native device binaries is built against them).
if [ "${HALIDE_XPU_NO_DEVICE_TOOLCHAIN:-0}" != "1" ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = "0" ]; then
    echo "== installing clang-15, llvm-spirv-15, spirv-tools, libze1, libze-dev (SPIR-V and native device binaries)"
    { apt_update && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-15 llvm-spirv-15 spirv-tools libze1 libze-dev; } \
      || echo "SPIR-V toolchain install failed; the sycl target builds kernels from OpenCL C source instead"
  else
    echo "== no apt-get (or not root): skipping clang-15/llvm-spirv-15/spirv-tools; the sycl target builds kernels from" \
         "OpenCL C source (install those packages to get SPIR-V device binaries)"
  fi
fi
"$PY" -m halide_xpu info

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
if [ "${HALIDE_XPU_WITH_POCL:-0}" = "1" ] && command -v apt-get >/dev/null; then
  echo "== installing PoCL (second OpenCL CPU runtime)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pocl-opencl-icd) || echo "PoCL install failed; continuing"
fi
"$PY" -m halide_xpu info

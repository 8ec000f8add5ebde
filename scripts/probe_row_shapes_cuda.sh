#!/usr/bin/env bash
# GPU-machine probe for the CUDA misaligned-address fault of tests/test_row_shapes.py (H100, 2026-12-07): every
# launch blocking, so the test whose kernel faults is the one that fails; the faulting xdist worker exits
# (tests/conftest.py) and a fresh one runs the rest. Also re-runs the abs / float64 erf cases. Writes $OUT/rows.tar.
set -u
source scripts/gpu_env.sh
OUT=${OUT:-/tmp/out}
R=/tmp/rows && mkdir -p "$R"
echo "commit ${HALIDE_XPU_COMMIT:-?} $(date -u +%FT%TZ)" > "$R/README.txt"
(timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_int_semantics.py tests/test_special_values.py \
   -k cuda -rf > "$R/abs_erf.log" 2>&1; echo "exit $?" >> "$R/abs_erf.log") &
(timeout 200 python3 -m halide_xpu fuzz --target cuda --seed 7547 --count 1 --show > "$R/fuzz_7547.log" 2>&1) &
export CUDA_LAUNCH_BLOCKING=1
rs() {  # name, timeout, -k expression
  timeout "$2" python3 -m pytest -q -p no:cacheprovider -n 8 --max-worker-restart=100 -rf tests/test_row_shapes.py \
    -k "$3" > "$R/$1.log" 2>&1; echo "exit $?" >> "$R/$1.log"
}
rs backward_scans 240 "cuda and (backward or scans)"
rs columns "${PROBE_COLUMNS_S:-160}" "cuda and (column or forward)"
wait
grep -h "sticky CUDA error\|crashed while running\|^FAILED" "$R"/*.log | sort -u > "$R/crashed.txt"
# the kernels (Halide source and schedule) of each worker's cache, to read the faulting one at home
find /tmp/pytest-of-*/ \( -name kernel.py -o -name schedule.txt \) -print0 2>/dev/null \
  | tar cf "$R/kernels.tar" --null -T - 2>/dev/null
export PATH=$PATH:/usr/local/cuda/bin
if command -v compute-sanitizer >/dev/null; then
  t=$(grep -o "tests/test_row_shapes.py::[^ ]*" "$R/crashed.txt" | head -1)
  [ -n "$t" ] && timeout 90 compute-sanitizer --tool memcheck --print-limit 5 python3 -m pytest -q -p no:cacheprovider \
    "$t" > "$R/sanitizer.log" 2>&1
else echo "no compute-sanitizer" > "$R/sanitizer.log"; fi
mkdir -p "$OUT" && tar cf "$OUT/rows.tar" -C /tmp rows

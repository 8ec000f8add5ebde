#!/usr/bin/env bash
# One GPU-machine call that checks the CUDA fixes made on a machine without a GPU (compiled as CUDA twins there,
# never run): the project's tests of those fixes and the GPUTests they target, both backends. Run from the project
# root on the GPU machine. ../shared does not travel: copy ../shared/tools/inductor_ut.py and a 2.11-era
# test_torchinductor.py into an ignored folder ut/ and carry it with .whl (halide) and .whl_ut (expecttest,
# hypothesis: pack-wheels-for-device.sh ut expecttest hypothesis); see README, "Running on the GPU machines".
# Writes $OUT/pending.tar.   run: bash scripts/gpu_pending.sh   (about 7 minutes on an H100)
set -u
source scripts/gpu_env.sh
[ -f .whl_ut/ut.tar.xz ] && tar xJf .whl_ut/ut.tar.xz -C /tmp/site2
OUT=${OUT:-/tmp/out}
R=$OUT/pending
mkdir -p "$R"
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
export HALIDE_XPU_COMMIT=$COMMIT
echo "commit $COMMIT" > "$R/README.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$R/README.txt"
# the project's tests of the fixes (alignment, grids) and the suites they touch, 8 files in parallel
for t in tests/test_alignment.py tests/test_gpu_schedules.py tests/test_ops.py tests/test_scans.py \
         tests/test_training.py tests/test_cpp_wrapper.py tests/test_special_functions.py tests/test_ptx.py; do
  [ -f "$t" ] || continue
  timeout 420 python3 -m pytest -q -x -p no:cacheprovider "$t" -k "cuda" > "$R/$(basename "$t" .py).log" 2>&1 &
done
# GPUTests the fixes target (and the ones still open), halide-xpu and Triton side by side
export INDUCTOR_UT_FILE=${INDUCTOR_UT_FILE:-$PWD/ut/test_torchinductor.py}
if [ -f "$INDUCTOR_UT_FILE" ] && [ -f ut/inductor_ut.py ]; then
  TESTS="test_large_grid test_graph_partition_misaligned_input test_config_option_dont_assume_alignment_recompiles
         test_graph_partition_unbacked_symint_as_output test_multilayer_var_lowp test_index_put1
         test_tmp_not_defined_issue3 test_split_reduction_with_int64_size"
  for b in halide_xpu triton; do
    timeout 400 python3 ut/inductor_ut.py --device cuda --backend $b --tests $TESTS --jobs 2 \
      --out "$R/gputests_${b}_$COMMIT.json" > "$R/gputests_$b.log" 2>&1 &
  done
fi
wait
tail -n 3 "$R"/*.log
tar cf "$OUT/pending.tar" -C "$OUT" pending

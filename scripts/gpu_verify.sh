#!/usr/bin/env bash
# One GPU-machine call that verifies the CUDA path at the current commit: the project's whole CUDA test suite
# (`-k cuda`, files in parallel) and PyTorch's GPUTests on halide-xpu, resumable across calls.
# Run from the project root on the GPU machine, carrying .whl (halide), .whl_ut (expecttest, hypothesis:
# pack-wheels-for-device.sh ut expecttest hypothesis) and ut/ (../shared/tools/inductor_ut.py and a 2.11-era
# test_torchinductor.py; ../shared does not travel). A GPUTests JSON from an earlier call, put at
# ut/resume/gputests_<backend>.json, is resumed. Writes $OUT/verify.tar.
#   bash scripts/gpu_verify.sh tests gputests        stages: tests, gputests, triton (GPUTests on Triton too),
#   probe (AOTInductor CUDA, halide-xpu and Triton, in a fresh process and the SIGABRT GPUTest under a native-stack
#   printer), householder (householder backward's OpInfo samples on cuda and Triton), harvest (real_models.py --kernel-table
#   on GPU_VERIFY_MODELS/_DTYPES/_MODES, default gpt2,llama,bert bf16 training, plus our kernels' sources), bench (bench_wrapper.py and
#   bench_aoti.py on cuda, after the other stages), tune (our kernels of the GPU_VERIFY_MODELS training steps at
#   GPU_TUNE_SHAPE, default 8x512, most device time first, tuned for GPU_TUNE_S into $OUT/verify/tune/db: the committed
#   records plus the new; GPU_TUNE_KERNELS: a list harvested before), heldout (real_models.py at GPU_HELDOUT_SHAPE,
#   default 10x400: database off vs on vs Triton vs Triton max-autotune, per-kernel tables), warps (test_gpu_warps.py's
#   CUDA cases, then real_models.py at GPU_WARPS_SHAPE with warp_rows=0 and =4, each beside Triton), pairs (test_pairs.py's
#   CUDA cases, scripts/probe_adamw_cuda.py, real_models.py at GPU_PAIRS_SHAPE per GPU_PAIRS_VALUES), profile (scripts/probe_wrapper_cuda.py: a step's host and device
#   time per wrapper, Triton and ours), addcmul (scripts/probe_addcmul_cuda.py)
# Knobs: GPU_VERIFY_PTX (non-empty: the warps/pairs stages also keep both sides' device code, PTX and sources),
# GPU_VERIFY_UT_ARGS (e.g. --filter REGEX), GPU_VERIFY_WALL_S (default 450: no new test after it), GPU_VERIFY_JOBS
# (GPUTests workers, default 8), GPU_VERIFY_BENCH_S (each benchmark's limit, default 150), HALIDE_XPU_COMMIT (the
# commit to record: the device copy's .git may lag the working tree). Keep the whole call under the run's limit: the
# tar of everything is made last, and a call returns at most 8 files.
set -u
source scripts/gpu_env.sh
[ -f .whl_ut/ut.tar.xz ] && tar xJf .whl_ut/ut.tar.xz -C /tmp/site2
OUT=${OUT:-/tmp/out}
R=$OUT/verify
mkdir -p "$R"
COMMIT=${HALIDE_XPU_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}  # the caller's: .git may lag
export HALIDE_XPU_COMMIT=$COMMIT
WALL=${GPU_VERIFY_WALL_S:-450}
JOBS=${GPU_VERIFY_JOBS:-8}
{ echo "commit $COMMIT  $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } \
  > "$R/README.txt"
stages=" $* "

if [[ $stages == *" tests "* ]]; then
  # every test file's CUDA cases (GPU_VERIFY_TESTS: a glob of files), six files at a time
  ls ${GPU_VERIFY_TESTS:-tests/test_*.py} | timeout $((WALL + 100)) xargs -P 6 -I{} sh -c \
    'timeout '"$WALL"' python3 -m pytest -q -p no:cacheprovider "{}" -k cuda > "'"$R"'/$(basename {} .py).log" 2>&1' &
fi

run_ut() {  # backend
  local b=$1 out=$R/gputests_$1.json
  [ -f "ut/resume/gputests_$b.json" ] && cp "ut/resume/gputests_$b.json" "$out"
  INDUCTOR_UT_FILE=$PWD/ut/test_torchinductor.py timeout $((WALL + 100)) python3 ut/inductor_ut.py --device cuda \
    --backend "$b" --jobs "$JOBS" --max-wall-s "$WALL" --timeout-s 240 --resume --out "$out" ${GPU_VERIFY_UT_ARGS:-} \
    --log-dir /tmp/ut_logs_$b > "$R/gputests_$b.log" 2>&1
}
[[ $stages == *" gputests "* ]] && [ -f ut/test_torchinductor.py ] && run_ut halide_xpu &
[[ $stages == *" triton "* ]] && [ -f ut/test_torchinductor.py ] && run_ut triton &
if [[ $stages == *" probe "* ]]; then
  (timeout 200 python3 scripts/probe_aoti_cuda.py /tmp/aoti_probe > "$R/probe_aoti_cuda.log" 2>&1
   timeout 150 python3 scripts/probe_aoti_cuda.py /tmp/aoti_probe_triton triton > "$R/probe_aoti_triton.log" 2>&1
   for p in /tmp/aoti_probe /tmp/aoti_probe_triton; do mkdir -p "$R/$(basename $p)" && cp $p/m.pt2 "$R/$(basename $p)/"; done
   find "${TORCHINDUCTOR_CACHE_DIR:-/tmp/inductor-cache}" -name "*.cpp" -newer scripts/gpu_verify.sh -size -2M \
     -exec cp {} "$R/aoti_probe/" \; 2>/dev/null
   cc -shared -fPIC -O1 -o /tmp/segv_bt.so scripts/segv_backtrace.c
   LD_PRELOAD=/tmp/segv_bt.so INDUCTOR_UT_FILE=$PWD/ut/test_torchinductor.py timeout 150 python3 ut/inductor_ut.py \
     --device cuda --backend halide_xpu --tests test_graph_partition_unbacked_symint_as_output --out "$R/probe_symint.json" \
     --log-dir "$R/probe_symint_logs" > "$R/probe_symint.log" 2>&1
   ) &
fi
if [[ $stages == *" householder "* ]]; then
  (for t in cuda triton; do
     timeout 90 python3 -m halide_xpu conformance --target $t --ops '^linalg\.householder_product$' --dtypes float32 \
       --out "$R/householder" --quiet > "$R/householder_$t.log" 2>&1
   done) &
fi
wait
# benchmarks after everything else (alone on the GPU and the host): launch cost per wrapper, AOTInductor step time
if [[ $stages == *" bench "* ]]; then
  B=${GPU_VERIFY_BENCH_S:-150}
  timeout "$B" python3 benchmarks/bench_wrapper.py --device cuda --rounds 7 --out "$R/bench" > "$R/bench_wrapper.log" 2>&1
  LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6 2>/dev/null || echo libstdc++.so.6) timeout "$B" \
    python3 benchmarks/bench_aoti.py --device cuda --out "$R/bench" > "$R/bench_aoti.log" 2>&1
fi
if [[ $stages == *" harvest "* ]]; then  # harvested-kernel tables (ours vs Triton per node group) + our kernels' sources
  HARVEST_CACHE=/tmp/hx_harvest_cache
  HALIDE_XPU_CACHE_DIR=$HARVEST_CACHE timeout "${GPU_VERIFY_HARVEST_S:-420}" python3 benchmarks/real_models.py \
    --device cuda --models "${GPU_VERIFY_MODELS:-gpt2,llama,bert}" --dtypes "${GPU_VERIFY_DTYPES:-bfloat16}" \
    --modes "${GPU_VERIFY_MODES:-train}" --kernel-table --reps 3 --out "$R/harvest" > "$R/harvest.log" 2>&1
  echo "real_models.py exit status $?" >> "$R/harvest.log"
  (cd "$HARVEST_CACHE" && find . \( -name kernel.py -o -name meta.repr -o -name schedule.txt \) -print0 \
     | tar cf "$R/harvest_sources.tar" --null -T -) 2>/dev/null
fi
if [[ $stages == *" tune "* ]]; then  # our kernels of the training steps at GPU_TUNE_SHAPE, tuned on this GPU (issue 13)
  T=$R/tune
  mkdir -p "$T/db" && cp schedules/*.json "$T/db/" 2>/dev/null  # records tuned before: kept, their kernels skipped
  K=${GPU_TUNE_KERNELS:-.tune/kernels.jsonl}  # a list harvested by an earlier call, or harvest now
  if [ ! -s "$K" ]; then
    K=$T/kernels.jsonl
    HALIDE_XPU_CACHE_DIR=/tmp/hx_tune_cache timeout "${GPU_TUNE_HARVEST_S:-240}" python3 benchmarks/real_models.py \
      --device cuda --models "${GPU_VERIFY_MODELS:-gpt2,llama,bert}" --dtypes "${GPU_VERIFY_DTYPES:-bfloat16}" \
      --modes "${GPU_VERIFY_MODES:-train}" --shape "${GPU_TUNE_SHAPE:-8x512}" --backends ours_off --reps 1 \
      --save-kernels "$K" --out "$T/harvest" > "$T/harvest.log" 2>&1
  fi
  HALIDE_XPU_CACHE_DIR=/tmp/hx_tune_cache timeout $((${GPU_TUNE_S:-300} + 90)) python3 -m halide_xpu tune \
    --kernels "$K" --target cuda --db "$T/db" --budget-s "${GPU_TUNE_S:-300}" --budget-kernel-s "${GPU_TUNE_KERNEL_S:-20}" \
    --jobs 12 --no-autoschedulers --no-progress --out "$T" > "$T/tune.log" 2>&1
  echo "tune exit status $?" >> "$T/tune.log"
fi
if [[ $stages == *" heldout "* ]]; then  # tuned vs default vs Triton (default and max-autotune) at GPU_HELDOUT_SHAPE
  DB=$R/tune/db; [ -d "$DB" ] || DB=$PWD/schedules
  HALIDE_XPU_SCHEDULE_DB=$DB HALIDE_XPU_CACHE_DIR=/tmp/hx_heldout_cache timeout "${GPU_HELDOUT_S:-420}" \
    python3 benchmarks/real_models.py --device cuda --models "${GPU_VERIFY_MODELS:-gpt2,llama,bert}" \
    --dtypes "${GPU_VERIFY_DTYPES:-bfloat16}" --modes "${GPU_VERIFY_MODES:-train}" --shape "${GPU_HELDOUT_SHAPE:-10x400}" \
    --backends ours_off,ours,inductor,inductor_max --kernel-table --reps 3 --out "$R/heldout" > "$R/heldout.log" 2>&1
  echo "real_models.py exit status $?" >> "$R/heldout.log"
fi
step_kernels() {  # NAME OVERRIDES SHAPE LIMIT_S: the models' steps with schedule overrides, beside Triton, kernel tables
  HALIDE_XPU_SCHEDULE_OVERRIDES=$2 HALIDE_XPU_CACHE_DIR=/tmp/hx_$1 TRITON_CACHE_DIR=/tmp/triton_$1 timeout "$4" \
    python3 benchmarks/real_models.py --device cuda --models "${GPU_VERIFY_MODELS:-gpt2,llama,bert}" \
    --dtypes "${GPU_VERIFY_DTYPES:-bfloat16}" --modes "${GPU_VERIFY_MODES:-train}" --shape "$3" \
    --backends ours,inductor --kernel-table --reps 3 --out "$R/$1" > "$R/$1.log" 2>&1
  echo "real_models.py exit status $?" >> "$R/$1.log"
  if [ -n "${GPU_VERIFY_PTX:-}" ]; then  # both sides' device code: our kernels (glue.cpp holds the rewritten PTX), Triton's
    (cd /tmp && find "hx_$1" "triton_$1" \( -name kernel.py -o -name meta.repr -o -name schedule.txt -o -name glue.cpp \
       -o -name "*.ptx" -o -name "*.ttgir" \) -print0 | tar cJf "$R/$1_device_code.tar.xz" --null -T -) 2>/dev/null
  fi
}
if [[ $stages == *" warps "* ]]; then  # CUDA rows of one warp each (warp_rows): eager-checked, then a step's kernels
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_gpu_warps.py -k cuda -n 4 > "$R/warps_tests.log" 2>&1
  for w in ${GPU_WARPS_VALUES:-0 4}; do  # the same step with the work-group form (0) and warps (4), each beside Triton
    step_kernels "warps_$w" "warp_rows=$w" "${GPU_WARPS_SHAPE:-8x512}" "${GPU_WARPS_S:-200}"
  done
fi
if [[ $stages == *" pairs "* ]]; then  # bf16 buffers as 32-bit words (pairs): eager-checked, AdamW's step, a step's kernels
  timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_pairs.py tests/test_gpu_schedules.py -k cuda -n 4 \
    > "$R/pairs_tests.log" 2>&1
  [ "${GPU_PAIRS_ADAMW:-1}" = 1 ] && timeout 150 python3 scripts/probe_adamw_cuda.py "$R/probe_adamw.json" pairs=0 default \
    > "$R/probe_adamw.log" 2>&1
  for p in ${GPU_PAIRS_VALUES:-1}; do  # each beside Triton (GPU_PAIRS_VALUES="0 1": both forms)
    step_kernels "pairs_$p" "pairs=$p" "${GPU_PAIRS_SHAPE:-10x400}" "${GPU_PAIRS_S:-240}"
  done
fi
if [[ $stages == *" addcmul "* ]]; then
  timeout 120 python3 scripts/probe_addcmul_cuda.py > "$R/probe_addcmul.log" 2>&1
fi
if [[ $stages == *" profile "* ]]; then  # where a step's time goes per wrapper; a crash at exit shows as its rc
  LD_PRELOAD=$(g++ -print-file-name=libstdc++.so.6 2>/dev/null || echo libstdc++.so.6) timeout 240 \
    python3 scripts/probe_wrapper_cuda.py "$R/bench" > "$R/probe_wrapper.log" 2>&1
  echo "probe_wrapper_cuda.py exit status $?" >> "$R/probe_wrapper.log"
fi
# one summary file (only 8 files come back from a call): each log's last lines, failures in full
{ for f in "$R"/*.log; do echo "== $f"; grep -E "^(FAILED|ERROR)" "$f"; tail -n 2 "$f"; done
  cat "$R"/probe_wrapper.log "$R"/probe_addcmul.log 2>/dev/null; } > "$R/summary.txt" 2>&1
cat "$R/summary.txt"
tar cf "$OUT/verify.tar" -C "$OUT" verify

#!/usr/bin/env bash
# Stress for GPU-side races, on the GPU machine after scripts/gpu-check.sh has built build-gpu:
# the runtime and tern2 GEMV tests in 4 parallel processes, 6 repeats each, with programmatic
# dependent launch on (TRIT_PDL=1) and off (TRIT_PDL=0). Prints the failed test runs and the most
# common failure lines per mode; full logs in $OUT (or build-gpu/gpu-stress). Exit 1 on a failure.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
T=${GPU_TESTS:-build-gpu/tests/trit_gpu_tests}
LOG_DIR=${OUT:-build-gpu/gpu-stress}
FILTER=${FILTER:-'CudaRuntime.Int8*:Tern2GemvDp4a.*:Tern2Gemv.*'}
mkdir -p "$LOG_DIR"
failed=0
for mode in 1 0; do
    for p in 1 2 3 4; do
        TRIT_PDL=$mode "$T" --gtest_filter="$FILTER" --gtest_repeat=6 >"$LOG_DIR/stress_${mode}_$p.txt" 2>&1 &
    done
    wait
    runs=$(cat "$LOG_DIR"/stress_"${mode}"_*.txt | grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)')
    echo "TRIT_PDL=$mode: $runs failed test runs"
    if [[ $runs -gt 0 ]]; then
        failed=1
        cat "$LOG_DIR"/stress_"${mode}"_*.txt | grep -E -A3 "Failure$" | grep -vE "^--" | sort | uniq -c | sort -rn | head -12
    fi
done
exit $failed

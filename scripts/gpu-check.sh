#!/usr/bin/env bash
# The GPU round in one command, for the GPU machine (docs: shared GPU.md): configure build-gpu
# (Release, Ninja, TRIT_CUDA=ON, LibTorch from the Python torch), build, run all of ctest, then
# compute-sanitizer memcheck and racecheck on trit_gpu_tests, the kernel benchmarks against cuBLAS
# (`trit bench kernels`, CSV in $OUT), then, when Fashion-MNIST is there, a CUDA training run,
# its export to every packed format validated on the GPU runtime (`trit validate --device cuda`)
# and the training-throughput benchmark. Full logs go to $OUT (or build-gpu/gpu-check); a
# step/status/seconds table prints last. Exit 1 if any step failed.
#   STEPS_ONLY="ctest memcheck" limits the round to those steps (configure and build always run);
#   BENCH_ARGS="--quick" is passed to `trit bench kernels`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
LOG_DIR=${OUT:-$BUILD_DIR/gpu-check}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$LOG_DIR"

STEPS=()
STATUS=()
SECONDS_TAKEN=()
FAILED=0

# run_step NAME CMD...: runs CMD with output to $LOG_DIR/NAME.log (last lines echoed on failure);
# records status and time instead of letting set -e end the round.
run_step() {
    local name=$1
    shift
    local log="$LOG_DIR/$name.log" start=$SECONDS rc=0
    echo "== $name: $*" | tee "$log"
    "$@" >>"$log" 2>&1 || rc=$?
    STEPS+=("$name")
    SECONDS_TAKEN+=($((SECONDS - start)))
    if [[ $rc -eq 0 ]]; then
        STATUS+=("ok")
    else
        STATUS+=("FAIL (rc=$rc)")
        FAILED=1
        tail -n 40 "$log" || true
    fi
    return 0
}

skip_step() {
    STEPS+=("$1")
    STATUS+=("skipped: $2")
    SECONDS_TAKEN+=(0)
}

last_ok() { [[ ${STATUS[${#STATUS[@]}-1]} == ok ]]; }

# wanted NAME: whether STEPS_ONLY (when set) lists NAME.
wanted() { [[ -z "${STEPS_ONLY:-}" || " $STEPS_ONLY " == *" $1 "* ]]; }

SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' \
    2>"$LOG_DIR/torch.log" || true)

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
    nvcc --version 2>/dev/null | tail -n 1 || /usr/local/cuda/bin/nvcc --version | tail -n 1 || true
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true
} >"$LOG_DIR/device.txt" 2>&1

if [[ -z "$TORCH_PREFIX" ]]; then
    skip_step configure "python3 could not import torch (see torch.log)"
    FAILED=1
else
    run_step configure cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DTRIT_CUDA=ON "-DTorch_DIR=$TORCH_PREFIX/Torch"
fi

if last_ok; then
    run_step build cmake --build "$BUILD_DIR" -j "$JOBS"
else
    skip_step build "configure failed"
fi

GPU_TESTS="$BUILD_DIR/tests/trit_gpu_tests"
if last_ok; then
    wanted ctest && run_step ctest ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
    if [[ -x "$GPU_TESTS" ]]; then
        # The bin1 shape table (300 cases, each with a large CPU reference) would take most of an
        # hour under memcheck: its small-m half runs in a step of its own.
        wanted memcheck && run_step memcheck "$SANITIZER" --tool memcheck --error-exitcode 1 \
            "$GPU_TESTS" --gtest_filter='-Table/Bin1GemmShapes.*'
        wanted memcheck && run_step memcheck-bin1 "$SANITIZER" --tool memcheck --error-exitcode 1 \
            "$GPU_TESTS" --gtest_filter='Table/Bin1GemmShapes.*_m1_*:Table/Bin1GemmShapes.*_m7_*'
        # Racecheck reports shared-memory hazards of every kernel launched; LibTorch's own kernels
        # (the *Torch* suites) are not ours to fix, so it runs the raw-kernel tests only.
        wanted racecheck && run_step racecheck "$SANITIZER" --tool racecheck --error-exitcode 1 \
            "$GPU_TESTS" --gtest_filter='-*Torch*:*CudaRuntime*:Table/Bin1GemmShapes.*'
        wanted racecheck && run_step racecheck-bin1 "$SANITIZER" --tool racecheck --error-exitcode 1 \
            "$GPU_TESTS" --gtest_filter='Table/Bin1GemmShapes.*_m1_*:Table/Bin1GemmShapes.*_m7_*'
    else
        for step in memcheck racecheck; do skip_step "$step" "$GPU_TESTS not built"; done
        FAILED=1
    fi
    # Training on the GPU with LibTorch CUDA, on the real data when it travelled with the run.
    FMNIST=${FASHION_MNIST_DIR:-.gpu-carry/fashion-mnist}
    if wanted bench-kernels; then
        # shellcheck disable=SC2086
        run_step bench-kernels "$BUILD_DIR/cli/trit" bench kernels --csv "$LOG_DIR/bench-kernels.csv" \
            ${BENCH_ARGS:-}
    fi
    if [[ -f "$FMNIST/train-images-idx3-ubyte.gz" ]] && wanted train-cuda; then
        run_step train-cuda "$BUILD_DIR/cli/trit" train recipes/fashion_mnist_ternary.yaml \
            --device cuda --set "data.path=$FMNIST" --set training.epochs=2 \
            --out "$BUILD_DIR/runs/ternary-cuda" --overwrite
        # The GPU-trained run, exported to every packed format, runs on the GPU runtime and is
        # compared with the training forward on the GPU and the CPU reference runtime.
        run_step validate-cuda env TRIT="$BUILD_DIR/cli/trit" DEVICE=cuda DATA="$FMNIST" \
            OUT_DIR="$BUILD_DIR/runs/formats" VERBOSE=1 scripts/validate-formats.sh \
            "$BUILD_DIR/runs/ternary-cuda"
        run_step bench-train "$BUILD_DIR/cli/trit" bench train --device cuda \
            --set "data.path=$FMNIST" --csv "$LOG_DIR/bench-train-cuda.csv"
    elif wanted train-cuda; then
        skip_step train-cuda "no Fashion-MNIST at $FMNIST"
    fi
else
    for step in ctest memcheck racecheck; do skip_step "$step" "build failed"; done
fi

{
    echo
    printf '%-14s %-32s %8s\n' step status seconds
    for i in "${!STEPS[@]}"; do
        printf '%-14s %-32s %8s\n' "${STEPS[$i]}" "${STATUS[$i]}" "${SECONDS_TAKEN[$i]}"
    done
    echo "logs: $LOG_DIR"
} | tee "$LOG_DIR/summary.txt"
exit "$FAILED"

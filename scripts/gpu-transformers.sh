#!/usr/bin/env bash
# The transformer round on the GPU machine (docs: shared GPU.md), after scripts/gpu-check.sh has
# built build-gpu: trains the four transformer recipes with --device cuda (the same recipe files
# as on the CPU; data from .gpu-carry), compares each pair, exports the ternary models to tern2
# and validates them on the GPU runtime, evaluates the files, generates text from both GPTs, and
# measures training throughput (fp32 and bf16 autocast). Logs, summaries and CSV go to $OUT (or
# build-gpu/transformers).
#   RECIPES="vit_fp32 vit_ternary" limits the training; EXTRA_RUNS="name:recipe:--set k=v ..."
#   adds runs of a recipe with overrides (tuning); SKIP_BENCH=1 skips the throughput benchmark.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
LOG=${OUT:-$BUILD_DIR/transformers}
RUNS=${RUNS_DIR:-$BUILD_DIR/runs}
FMNIST=${FASHION_MNIST_DIR:-$PWD/.gpu-carry/fashion-mnist}
FORTUNES=${FORTUNES_DIR:-$PWD/.gpu-carry/fortunes}
trit=$BUILD_DIR/cli/trit
mkdir -p "$LOG" "$RUNS"

data_set() {  # the data.path override for a recipe
    case $1 in gpt*) echo "data.path=$FORTUNES" ;; *) echo "data.path=$FMNIST" ;; esac
}

# Training: every run in parallel on the one GPU (their speed is not what is measured here).
pids=()
for r in ${RECIPES:-vit_fp32 vit_ternary gpt_fp32 gpt_ternary}; do
    "$trit" train "recipes/$r.yaml" --device cuda --set "$(data_set "$r")" --out "$RUNS/$r" \
        --overwrite >"$LOG/train-$r.log" 2>&1 &
    pids+=($!)
done
for spec in ${EXTRA_RUNS:-}; do
    IFS=: read -r name recipe sets <<<"$spec"
    # shellcheck disable=SC2086
    "$trit" train "recipes/$recipe.yaml" --device cuda --set "$(data_set "$recipe")" ${sets//,/ } \
        --out "$RUNS/$name" --overwrite >"$LOG/train-$name.log" 2>&1 &
    pids+=($!)
done
start=$SECONDS
for p in "${pids[@]}"; do wait "$p" || echo "a training run failed (pid $p)"; done
echo "training: $((SECONDS - start)) s" | tee "$LOG/times.txt"
for f in "$LOG"/train-*.log; do echo "== $f"; grep -E "^result|error" "$f"; done | tee "$LOG/results.txt"

if [[ -d "$RUNS/vit_fp32" && -d "$RUNS/vit_ternary" ]]; then
    "$trit" summary "$RUNS/vit_fp32" "$RUNS/vit_ternary" | tee "$LOG/summary-vit.txt"
fi
if [[ -d "$RUNS/gpt_fp32" && -d "$RUNS/gpt_ternary" ]]; then
    "$trit" summary "$RUNS/gpt_fp32" "$RUNS/gpt_ternary" | tee "$LOG/summary-gpt.txt"
fi

# Export, validate on the GPU runtime, evaluate the file.
for r in vit_ternary gpt_ternary; do
    [[ -f "$RUNS/$r/checkpoint.pt" ]] || continue
    d=$(data_set "$r")
    d=${d#data.path=}
    "$trit" export "$RUNS/$r" --format tern2 --out "$RUNS/$r/model-tern2.h5" >"$LOG/export-$r.log" 2>&1
    # On the GPU runtime (against the training forward on the GPU and the CPU reference runtime),
    # then on the CPU reference runtime alone (against the training forward on the CPU).
    for dev in cuda cpu; do
        "$trit" validate "$RUNS/$r/model-tern2.h5" --against "$RUNS/$r" --device $dev --data "$d" \
            >"$LOG/validate-$r-$dev.log" 2>&1
        echo "validate $r on $dev: rc $?" >>"$LOG/results.txt"
        grep -E "agreement|relative|bit-identical|PASS|FAIL" "$LOG/validate-$r-$dev.log" >>"$LOG/results.txt"
    done
    "$trit" eval "$RUNS/$r/model-tern2.h5" --device cuda --data "$d" >"$LOG/eval-$r-h5.log" 2>&1
    cat "$LOG/eval-$r-h5.log" >>"$LOG/results.txt"
done

for r in gpt_fp32 gpt_ternary; do
    [[ -f "$RUNS/$r/checkpoint.pt" ]] || continue
    "$trit" generate "$RUNS/$r" --device cuda --prompt "The " --max-tokens 300 --temperature 0.8 \
        --top-k 40 --seed 1 >"$LOG/generate-$r.txt" 2>&1
    { echo "== generate $r"; cat "$LOG/generate-$r.txt"; echo; } >>"$LOG/results.txt"
done

if [[ -z "${SKIP_BENCH:-}" ]]; then
    for pair in "vit_fp32 vit_ternary" "gpt_fp32 gpt_ternary"; do
        set -- $pair
        for prec in fp32 bf16; do
            "$trit" bench train --device cuda --precision "$prec" --recipes "recipes/$1.yaml" \
                "recipes/$2.yaml" --set "$(data_set "$1")" --steps ${BENCH_STEPS:-50} \
                --repeats ${BENCH_REPEATS:-7} --warmup 10 --csv "$LOG/bench-train-$1-$prec.csv" \
                >"$LOG/bench-train-$1-$prec.log" 2>&1
            echo "== bench $1 $prec" >>"$LOG/results.txt"
            cat "$LOG/bench-train-$1-$prec.log" >>"$LOG/results.txt"
        done
    done
fi
cat "$LOG/results.txt"

#!/usr/bin/env bash
# The BWTA round on the GPU machine, after scripts/gpu-check.sh has built build-gpu: trains the
# float teachers when their run directories lack a checkpoint (TEACHERS, default vit_fp32 and
# gpt_fp32), then the BWTA runs in parallel on the one GPU, each `name:recipe[:--set;k=v;...]`
# of RUNS_SPEC (default: vit_bwta and gpt_bwta), with the teachers' paths and the data paths set,
# each under `timeout RUN_TIMEOUT` (seconds). Writes logs, summaries, metrics and plots to $OUT
# (or build-gpu/bwta); VALIDATE="run ..." exports those runs to bin1 and validates the files on
# the GPU runtime and on the CPU reference (whole evaluation split); TAR="run ..." packs those run
# directories (checkpoints included) into $OUT/<run>.tar.gz.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
LOG=${OUT:-$BUILD_DIR/bwta}
RUNS=${RUNS_DIR:-$BUILD_DIR/runs}
FMNIST=${FASHION_MNIST_DIR:-$PWD/.gpu-carry/fashion-mnist}
FORTUNES=${FORTUNES_DIR:-$PWD/.gpu-carry/fortunes}
trit=$BUILD_DIR/cli/trit
mkdir -p "$LOG" "$RUNS"

data_set() {  # the data.path override for a recipe
    case $1 in gpt*) echo "data.path=$FORTUNES" ;; *) echo "data.path=$FMNIST" ;; esac
}
teacher_of() {  # the float run a BWTA recipe starts from and distils from
    case $1 in gpt*) echo "$RUNS/gpt_fp32" ;; *) echo "$RUNS/vit_fp32" ;; esac
}

start=$SECONDS
pids=()
for r in ${TEACHERS-vit_fp32 gpt_fp32}; do
    [[ -f "$RUNS/$r/checkpoint.pt" ]] && continue
    "$trit" train "recipes/$r.yaml" --device cuda --set "$(data_set "$r")" --out "$RUNS/$r" \
        --overwrite >"$LOG/train-$r.log" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || echo "a teacher run failed (pid $p)"; done
echo "teachers: $((SECONDS - start)) s" | tee -a "$LOG/times.txt"

pids=()
for spec in ${RUNS_SPEC:-vit_bwta:vit_bwta gpt_bwta:gpt_bwta}; do
    IFS=: read -r name recipe sets <<<"$spec"
    t=$(teacher_of "$recipe")
    # shellcheck disable=SC2086
    timeout "${RUN_TIMEOUT:-540}" "$trit" train "recipes/$recipe.yaml" --device cuda \
        --set "$(data_set "$recipe")" --set "init.from=$t" --set "distillation.teacher=$t" \
        ${sets//;/ } --out "$RUNS/$name" --overwrite >"$LOG/train-$name.log" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || echo "a BWTA run failed or timed out (pid $p)"; done
echo "all runs: $((SECONDS - start)) s" | tee -a "$LOG/times.txt"

for f in "$LOG"/train-*.log; do echo "== $f"; grep -E "^result|error|^stage|layer selection" "$f"; done \
    | tee "$LOG/results.txt"
for d in "$RUNS"/*/; do
    n=$(basename "$d")
    [[ -f "$d/metrics.jsonl" ]] || continue
    mkdir -p "$LOG/runs/$n"
    cp "$d"/{metrics.jsonl,recipe.yaml} "$LOG/runs/$n/" 2>/dev/null
    cp "$d/summary.json" "$LOG/runs/$n/" 2>/dev/null
    "$trit" plot "$d" -o "$LOG/runs/$n/curves.png" >/dev/null 2>&1
done
for n in ${VALIDATE:-}; do
    d=$(data_set "$n")
    d=${d#data.path=}
    "$trit" export "$RUNS/$n" --format bin1 --out "$RUNS/$n/model-bin1.h5" >"$LOG/export-$n.log" 2>&1
    echo "export $n: rc $?" >>"$LOG/results.txt"
    for dev in cuda cpu; do
        "$trit" validate "$RUNS/$n/model-bin1.h5" --against "$RUNS/$n" --device $dev --data "$d" \
            >"$LOG/validate-$n-$dev.log" 2>&1
        echo "validate $n on $dev: rc $?" >>"$LOG/results.txt"
        cat "$LOG/validate-$n-$dev.log" >>"$LOG/results.txt"
    done
done
for n in ${TAR:-}; do tar -C "$RUNS" -czf "$LOG/$n.tar.gz" "$n"; done

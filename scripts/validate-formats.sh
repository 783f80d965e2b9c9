#!/usr/bin/env bash
# Exports each run directory given to every packed format, validates each file against its run on
# the whole test split (CPU reference runtime), and prints one table row per (run, format): logit
# error, top-1 agreement, accuracy of the packed model and of the training forward, bits per
# weight of the packed layers. Files go to $OUT_DIR (default runs/formats). DEVICE=cuda runs the
# packed models on the GPU runtime (the row then compares it with the training forward on the GPU;
# `trit validate` also checks it against the CPU reference). Exit 1 if any validation failed.
#   scripts/validate-formats.sh runs/fashion_mnist_fp32 runs/fashion_mnist_ternary
#   DEVICE=cuda scripts/validate-formats.sh runs/fashion_mnist_ternary
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
trit=${TRIT:-build/cli/trit}
formats=${FORMATS:-"tern2 tern24 bin1 bt1 bt2 bt3 bt4"}
out=${OUT_DIR:-runs/formats}
device=${DEVICE:-cpu}
data=(${DATA:+--data "$DATA"})
mkdir -p "$out"
status=0
printf '%-28s %-7s %11s %11s %9s %9s %9s %8s\n' run format "max |err|" "rel err" "top-1" "packed" "trained" "bits/w"
for run in "$@"; do
  for f in $formats; do
    file="$out/$(basename "$run")-$f.h5"
    "$trit" export "$run" --format "$f" --out "$file" >/dev/null
    v=$("$trit" validate "$file" --against "$run" --device "$device" "${data[@]}") || status=1
    [[ -n "${VERBOSE:-}" ]] && echo "$v"
    err=$(sed -n 's/.*max |logit error| \([^,]*\),.*/\1/p' <<<"$v" | head -n 1)
    rel=$(sed -n 's/.*relative \([^ ]*\) .*/\1/p' <<<"$v" | head -n 1)
    agree=$(sed -n 's/.*top-1 agreement \([^ ]*\) .*/\1/p' <<<"$v" | head -n 1)
    acc_p=$(sed -n 's/.*accuracy: packed \([^,]*\),.*/\1/p' <<<"$v" | head -n 1)
    acc_t=$(sed -n 's/.*accuracy: packed [^,]*, training forward \(.*\)$/\1/p' <<<"$v" | head -n 1)
    bits=$("$trit" inspect "$file" | awk '/FP32 weights/ {w = $5 / 4} /codes \+ scales/ {printf "%.4f", 8 * $4 / w}')
    printf '%-28s %-7s %11s %11s %9s %9s %9s %8s\n' "$(basename "$run")" "$f" "$err" "$rel" "$agree" \
      "$acc_p" "$acc_t" "$bits"
  done
done
exit $status

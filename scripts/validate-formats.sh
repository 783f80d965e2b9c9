#!/usr/bin/env bash
# Exports each run directory given to every packed format, validates each file against its run on
# the whole test split (CPU reference runtime), and prints one table row per (run, format): logit
# error, top-1 agreement, accuracy of the packed model and of the training forward, bits per
# weight of the packed layers. Files go to $OUT_DIR (default runs/formats). Exit 1 if any
# validation failed.
#   scripts/validate-formats.sh runs/fashion_mnist_fp32 runs/fashion_mnist_ternary
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
trit=${TRIT:-build/cli/trit}
formats=${FORMATS:-"tern2 tern24 bin1 bt1 bt2 bt3 bt4"}
out=${OUT_DIR:-runs/formats}
mkdir -p "$out"
status=0
printf '%-28s %-7s %11s %11s %9s %9s %9s %8s\n' run format "max |err|" "rel err" "top-1" "packed" "trained" "bits/w"
for run in "$@"; do
  for f in $formats; do
    file="$out/$(basename "$run")-$f.h5"
    "$trit" export "$run" --format "$f" --out "$file" >/dev/null
    v=$("$trit" validate "$file" --against "$run") || status=1
    err=$(sed -n 's/.*max |logit error| \([^,]*\),.*/\1/p' <<<"$v")
    rel=$(sed -n 's/.*relative \([^ ]*\) .*/\1/p' <<<"$v")
    agree=$(sed -n 's/.*top-1 agreement \([^ ]*\) .*/\1/p' <<<"$v")
    acc_p=$(sed -n 's/.*accuracy: packed \([^,]*\),.*/\1/p' <<<"$v")
    acc_t=$(sed -n 's/.*training forward \(.*\)$/\1/p' <<<"$v")
    bits=$("$trit" inspect "$file" | awk '/FP32 weights/ {w = $5 / 4} /codes \+ scales/ {printf "%.4f", 8 * $4 / w}')
    printf '%-28s %-7s %11s %11s %9s %9s %9s %8s\n' "$(basename "$run")" "$f" "$err" "$rel" "$agree" \
      "$acc_p" "$acc_t" "$bits"
  done
done
exit $status

#!/usr/bin/env bash
# The post-training quantization table of docs/RESULTS.md: quantizes the float byte-level GPT of a
# finished gpt_fp32 run with each method (trit ptq), evaluates every result on the validation text
# (trit eval: bits per byte) and prints a Markdown table against the float model.
#   RUN=runs/gpt_fp32 (the float run), DATA=/usr/share/games/fortunes (its corpus),
#   DEVICE=cpu (cpu: the CPU reference runtime, ~4 min per model on 2 cores; cuda: the GPU runtime),
#   OUT_DIR=$RUN/ptq, TRIT=build/cli/trit, METHODS="name:flags;..." to run other variants.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RUN=${RUN:-runs/gpt_fp32}
DATA=${DATA:-/usr/share/games/fortunes}
DEVICE=${DEVICE:-cpu}
OUT_DIR=${OUT_DIR:-$RUN/ptq}
TRIT=${TRIT:-build/cli/trit}
METHODS=${METHODS:-"bt3:--method bt --depth 3;bt2:--method bt --depth 2;bt2-gptq:--method bt,gptq --depth 2;bt1:--method bt --depth 1;bt1-gptq:--method bt,gptq --depth 1;tern2:--method rtn;tern2-gptq:--method rtn,gptq"}
mkdir -p "$OUT_DIR"

bpb() { sed -n 's/.*validation \([0-9.]*\) bits\/byte.*/\1/p' "$1" | tail -1; }

"$TRIT" eval "$RUN" --data "$DATA" --device "$DEVICE" >"$OUT_DIR/float.eval"
FLOAT=$(bpb "$OUT_DIR/float.eval")
ROWS="| float32 | 32 | $FLOAT | +0.00 % |"
IFS=';' read -ra SPECS <<<"$METHODS"
for spec in "${SPECS[@]}"; do
    name=${spec%%:*}
    flags=${spec#*:}
    # shellcheck disable=SC2086
    "$TRIT" ptq --model "$RUN" $flags --calibration-data "$DATA" -o "$OUT_DIR/$name.h5" >"$OUT_DIR/$name.log"
    bits=$(sed -n 's/.*weights at \([0-9.]*\) bits per weight.*/\1/p' "$OUT_DIR/$name.log")
    "$TRIT" eval "$OUT_DIR/$name.h5" --data "$DATA" --device "$DEVICE" >"$OUT_DIR/$name.eval"
    b=$(bpb "$OUT_DIR/$name.eval")
    rel=$(awk -v a="$b" -v f="$FLOAT" 'BEGIN { printf "%+.2f %%", 100 * (a / f - 1) }')
    ROWS+=$'\n'"| $name (\`$flags\`) | $bits | $b | $rel |"
    echo "$name: $bits bits/weight, $b bits/byte ($rel)"
done
echo
echo "| model | bits / weight (quantized layers) | validation bits / byte | vs float |"
echo "| --- | --- | --- | --- |"
echo "$ROWS"

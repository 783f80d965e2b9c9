#!/usr/bin/env bash
# The main job, end to end: set up and build (setup.sh), train the float baseline and the default
# ternary QAT recipe on Fashion-MNIST and compare them, then export the ternary model to the packed
# tern2 format, validate the file against the training forward on the whole test split with the
# CPU reference runtime, and inspect it. Runs go to runs/<recipe name> (replaced on every call);
# extra arguments go to both `trit train` calls.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh

trit=build/cli/trit
for recipe in fashion_mnist_fp32 fashion_mnist_ternary; do
  "$trit" train "recipes/$recipe.yaml" --out "runs/$recipe" --overwrite "$@"
done
echo
echo "== result (ternary vs float, same budget) =="
"$trit" summary runs/fashion_mnist_fp32 runs/fashion_mnist_ternary

model=runs/fashion_mnist_ternary/model-tern2.h5
echo
echo "== export, validate, inspect =="
"$trit" export runs/fashion_mnist_ternary --format tern2 --out "$model"
"$trit" validate "$model" --against runs/fashion_mnist_ternary
"$trit" inspect "$model"

#!/usr/bin/env bash
# The main job, end to end: set up and build (setup.sh), train the float baseline and the default
# ternary QAT recipe on Fashion-MNIST, and print how close ternary comes to float. Runs go to
# runs/<recipe name> (replaced on every call). Extra arguments go to both `trit train` calls.
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

#!/usr/bin/env bash
# Set up and build (setup.sh), then run the whole test suite. GPU tests (label gpu) skip where no
# GPU is visible. Extra arguments go to ctest (e.g. -R Recipe, -L gpu).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"

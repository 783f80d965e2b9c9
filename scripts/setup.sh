#!/usr/bin/env bash
# Installs what trit needs on Debian 12 that is missing (nothing when all is there), checks that
# LibTorch will use OpenBLAS (the reference BLAS is ~7x slower), then configures and builds into
# build/. Idempotent; run as root or as a user with sudo. Used by main.sh and test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache git
  libtorch-dev libopenblas0-pthread libyaml-cpp-dev libcli11-dev libhdf5-dev libgtest-dev
  libgmock-dev zlib1g-dev
  dataset-fashion-mnist fortunes
)

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null; then
  SUDO=(sudo)
else
  SUDO=()
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 && ${#SUDO[@]} -eq 0 ]]; then
    echo "setup: missing packages (${missing[*]}) and neither root nor sudo to install them" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  "${SUDO[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# LibTorch links libblas.so.3: make sure the alternative resolves to OpenBLAS (pthread build).
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 || true)
if [[ $blas != *openblas* ]]; then
  echo "setup: pointing libblas.so.3 at OpenBLAS (was: ${blas:-none})"
  "${SUDO[@]}" update-alternatives --set libblas.so.3-x86_64-linux-gnu \
    /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3
fi

if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build -j "$(nproc)"

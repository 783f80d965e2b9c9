#!/usr/bin/env bash
# A/B of the kernels of two source trees on one GPU machine, as docs/BENCHMARKS.md measures a
# change: both trees built there, `trit bench kernels` run alternately A, B, A, B, ... in one
# session, so machine-to-machine spread does not enter the comparison.
#
#   scripts/gpu-ab.sh prepare REV
#       (development machine) REV's tracked files into .gpu-carry/ab-base, the A tree. Name
#       .gpu-carry in the device tool's carry; the working tree is B.
#   scripts/gpu-ab.sh run [-r ROUNDS] [-t TARGETS] -- BENCH_ARGS...
#       (GPU machine) configures and builds trit for A (in /tmp/trit-ab-a) and B (build-gpu),
#       runs `trit bench kernels BENCH_ARGS` ROUNDS times (2) per tree, alternately, and prints
#       the comparison. TARGETS (default trit) are built for B, e.g. "trit trit_gpu_tests".
#       Logs under $OUT/ab (else build-gpu/ab).
#   scripts/gpu-ab.sh compare DIR
#       the comparison of DIR/A_<round>.txt and DIR/B_<round>.txt: per case (kernel, format, m, n,
#       k, in the order the benchmark prints them), each tree's path and its medians' range over
#       the rounds, and B / A of the ranges' midpoints.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BASE_DIR=.gpu-carry/ab-base

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    exit 2
}

compare() {
    local dir=$1
    local files=("$dir"/A_*.txt "$dir"/B_*.txt)
    [[ -e ${files[0]} ]] || { echo "gpu-ab: no A_<round>.txt in $dir" >&2; exit 1; }
    # Result rows: model kernel format path m n k median_us ...; a case is (kernel, format, m, n,
    # k) and its occurrence in the file (several --paths give several rows of one case).
    awk '
        FNR == 1 { tree = FILENAME; sub(/.*\//, "", tree); tree = substr(tree, 1, 1); delete seen }
        NF >= 8 && $5 ~ /^[0-9]+$/ && $8 ~ /^[0-9.]+$/ {
            key = $2 " " $3 " " $5 " " $6 " " $7; occ = ++seen[key]; id = key " #" occ
            if (!(id in order)) { order[id] = ++ncase; name[ncase] = id }
            t = $8 + 0; p = tree SUBSEP id
            if (!(p in lo) || t < lo[p]) lo[p] = t
            if (!(p in hi) || t > hi[p]) hi[p] = t
            path[p] = $4
        }
        END {
            printf "%-16s %-9s %5s %6s %6s  %-18s %-17s  %-18s %-17s %6s\n", "kernel", "format", "m",
                   "n", "k", "A path", "A us", "B path", "B us", "B/A"
            for (i = 1; i <= ncase; ++i) {
                id = name[i]; split(id, f, " "); a = "A" SUBSEP id; b = "B" SUBSEP id
                ra = (a in lo) ? sprintf("%.2f-%.2f", lo[a], hi[a]) : "-"
                rb = (b in lo) ? sprintf("%.2f-%.2f", lo[b], hi[b]) : "-"
                ratio = (a in lo && b in lo) ? sprintf("%.3f", (lo[b] + hi[b]) / (lo[a] + hi[a])) : "-"
                printf "%-16s %-9s %5s %6s %6s  %-18s %-17s  %-18s %-17s %6s\n", f[1], f[2], f[3], f[4],
                       f[5], (a in path) ? path[a] : "-", ra, (b in path) ? path[b] : "-", rb, ratio
            }
        }' "${files[@]}"
}

configure_build() {  # SOURCE BUILD TARGETS...
    local src=$1 build=$2
    shift 2
    cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIT_CUDA=ON \
        "-DTorch_DIR=$TORCH_PREFIX/Torch" >"$LOG_DIR/configure-$(basename "$build").log" 2>&1 &&
        cmake --build "$build" -j "$(nproc)" --target "$@" >"$LOG_DIR/build-$(basename "$build").log" 2>&1
}

case ${1:-} in
    prepare)
        [[ $# -eq 2 ]] || usage
        git rev-parse --verify --quiet "$2^{commit}" >/dev/null || { echo "gpu-ab: '$2' is not a commit" >&2; exit 1; }
        git check-ignore -q .gpu-carry/x || { echo "gpu-ab: .gpu-carry must be ignored by git" >&2; exit 1; }
        rm -rf "$BASE_DIR"
        mkdir -p "$BASE_DIR"
        git archive "$2" | tar -x -C "$BASE_DIR"
        echo "A = $(git rev-parse --short "$2") in $BASE_DIR; B = the working tree"
        ;;
    compare)
        [[ $# -eq 2 ]] || usage
        compare "$2"
        ;;
    run)
        shift
        ROUNDS=2
        TARGETS=trit
        while [[ $# -gt 0 && $1 != -- ]]; do
            case $1 in
                -r) ROUNDS=${2:?-r needs a count}; shift 2 ;;
                -t) TARGETS=${2:?-t needs targets}; shift 2 ;;
                *) usage ;;
            esac
        done
        [[ ${1:-} == -- ]] || usage
        shift
        [[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "gpu-ab: -r takes a positive count, not '$ROUNDS'" >&2; exit 1; }
        [[ -f $BASE_DIR/CMakeLists.txt ]] || { echo "gpu-ab: no A tree in $BASE_DIR (run prepare)" >&2; exit 1; }
        LOG_DIR=${OUT:+$OUT/ab}
        LOG_DIR=${LOG_DIR:-build-gpu/ab}
        mkdir -p "$LOG_DIR"
        TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null) ||
            { echo "gpu-ab: python3 cannot import torch (run on the GPU machine, shared GPU.md)" >&2; exit 1; }
        # A builds from a copy outside the working tree, so its build directory does not travel.
        rm -rf /tmp/trit-ab-src && cp -r "$BASE_DIR" /tmp/trit-ab-src
        configure_build /tmp/trit-ab-src /tmp/trit-ab-a trit || { echo "gpu-ab: A failed to build ($LOG_DIR)" >&2; exit 1; }
        # shellcheck disable=SC2086
        configure_build . build-gpu $TARGETS || { echo "gpu-ab: B failed to build ($LOG_DIR)" >&2; exit 1; }
        for ((r = 1; r <= ROUNDS; ++r)); do
            /tmp/trit-ab-a/cli/trit bench kernels "$@" --csv "$LOG_DIR/A_$r.csv" >"$LOG_DIR/A_$r.txt" 2>&1
            build-gpu/cli/trit bench kernels "$@" --csv "$LOG_DIR/B_$r.csv" >"$LOG_DIR/B_$r.txt" 2>&1
        done
        compare "$LOG_DIR" | tee "$LOG_DIR/compare.txt"
        ;;
    *)
        usage
        ;;
esac

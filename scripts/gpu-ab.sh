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
#   scripts/gpu-ab.sh swap [-r ROUNDS] [-t TARGETS] -- BENCH_ARGS...
#       (GPU machine) the same comparison from one build: builds B (build-gpu, TARGETS), then per
#       round copies A's version of every source file that differs (kernels/, cli/, bench/ but
#       bench/lab/, core/, exporters/, quantizers/, trainers/; none added or removed), rebuilds trit, runs A,
#       copies B's back, rebuilds, runs B. An incremental rebuild of a kernel file takes seconds
#       where a second full build takes minutes. B's files are restored on any exit.
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

# The source files whose contents differ between the A tree and the working tree (B), one per
# line; an error when a file is in one tree only (swap cannot build that).
changed_files() {
    local d f only=0 out=()
    for d in kernels cli bench core exporters quantizers trainers; do
        while IFS= read -r f; do
            if [[ ! -f $f || ! -f $BASE_DIR/$f ]]; then
                echo "gpu-ab: $f is in one tree only: swap needs the same files in A and B (use run)" >&2
                only=1
            elif ! cmp -s "$f" "$BASE_DIR/$f"; then
                out+=("$f")
            fi
        done < <({ (cd "$BASE_DIR" && find "$d" -type f 2>/dev/null); find "$d" -type f 2>/dev/null; } |
            grep -v '^bench/lab/' | sort -u)  # the lab's files are not part of the build
    done
    ((only == 0)) || return 1
    ((${#out[@]} == 0)) || printf '%s\n' "${out[@]}"
}

bench() {  # TREE ROUND TRIT BENCH_ARGS...: one benchmark run into $LOG_DIR/TREE_ROUND.{txt,csv}
    local tree=$1 round=$2 trit=$3
    shift 3
    "$trit" bench kernels "$@" --csv "$LOG_DIR/${tree}_$round.csv" >"$LOG_DIR/${tree}_$round.txt" 2>&1 ||
        { echo "gpu-ab: the benchmark failed for $tree in round $round ($LOG_DIR/${tree}_$round.txt)" >&2; exit 1; }
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
    run | swap)
        MODE=$1
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
        if [[ $MODE == swap ]]; then
            FILES=$(changed_files) || exit 1
            [[ -n $FILES ]] || { echo "gpu-ab: A and B have the same sources: nothing to compare" >&2; exit 1; }
            echo "gpu-ab: swapping $(echo "$FILES" | wc -l) file(s): $(echo $FILES)"
            SAVE=$(mktemp -d)
            while IFS= read -r f; do mkdir -p "$SAVE/$(dirname "$f")" && cp "$f" "$SAVE/$f"; done <<<"$FILES"
            # B's files back on every exit; plain cp (new mtimes), so the next build sees them.
            trap 'while IFS= read -r f; do cp "$SAVE/$f" "$f"; done <<<"$FILES"' EXIT
            put() {  # TREE_DIR: its versions of FILES into the working tree, then trit rebuilt
                while IFS= read -r f; do cp "$1/$f" "$f"; done <<<"$FILES"
                cmake --build build-gpu -j "$(nproc)" --target trit >>"$LOG_DIR/rebuild.log" 2>&1
            }
            # shellcheck disable=SC2086
            configure_build . build-gpu $TARGETS || { echo "gpu-ab: B failed to build ($LOG_DIR)" >&2; exit 1; }
            for ((r = 1; r <= ROUNDS; ++r)); do
                put "$BASE_DIR" || { echo "gpu-ab: A failed to build ($LOG_DIR/rebuild.log)" >&2; exit 1; }
                bench A "$r" build-gpu/cli/trit "$@"
                put "$SAVE" || { echo "gpu-ab: B failed to rebuild ($LOG_DIR/rebuild.log)" >&2; exit 1; }
                bench B "$r" build-gpu/cli/trit "$@"
            done
        else
            # A builds from a copy outside the working tree, so its build directory does not travel.
            rm -rf /tmp/trit-ab-src && cp -r "$BASE_DIR" /tmp/trit-ab-src
            configure_build /tmp/trit-ab-src /tmp/trit-ab-a trit || { echo "gpu-ab: A failed to build ($LOG_DIR)" >&2; exit 1; }
            # shellcheck disable=SC2086
            configure_build . build-gpu $TARGETS || { echo "gpu-ab: B failed to build ($LOG_DIR)" >&2; exit 1; }
            for ((r = 1; r <= ROUNDS; ++r)); do
                bench A "$r" /tmp/trit-ab-a/cli/trit "$@"
                bench B "$r" build-gpu/cli/trit "$@"
            done
        fi
        compare "$LOG_DIR" | tee "$LOG_DIR/compare.txt"
        ;;
    *)
        usage
        ;;
esac

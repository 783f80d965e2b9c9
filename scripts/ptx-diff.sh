#!/usr/bin/env bash
# Which kernels' compiled code a change alters. Compiles every kernels/*.cu to PTX at two
# revisions (nvcc, CMake's flags: sm_90, the *_sm90.cu files for sm_90a) and compares them kernel
# by kernel, so that a change to a shared header or struct shows every kernel it reaches. A struct
# grown by one unused pointer (session 40's ProductOut::w_scale_half) changed all twelve streaming
# GEMVs' code and cost tern24 3 % beyond L2 (docs/BENCHMARKS.md, session 45): check with this
# before timing, and time what it lists.
#
#   scripts/ptx-diff.sh [-j N] [-v] BASE [OTHER]
#     BASE, OTHER  git revisions (OTHER: the working tree when omitted)
#     -j N         parallel nvcc jobs (default: nproc)
#     -v           also list the kernels whose instructions differ
#
# Per kernel file: the kernels at BASE, how many have different PTX text and how many a different
# instruction sequence (opcodes in order); "text" alone means only operands differ (registers,
# parameter offsets). Kernels only on one side are counted as added / removed. Anonymous-namespace
# hashes, labels and the parameter array's declared size are normalised away. Needs nvcc
# (TRIT_NVCC, else nvcc on PATH, else /usr/local/cuda/bin/nvcc); no GPU.
set -euo pipefail
export LC_ALL=C

cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS=$(nproc)
VERBOSE=0
usage() { sed -n '9,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while getopts "j:vh" opt; do
    case $opt in
        j) [[ $OPTARG =~ ^[1-9][0-9]*$ ]] || { echo "ptx-diff: -j wants a positive integer, got '$OPTARG'" >&2; exit 2; }
           JOBS=$OPTARG ;;
        v) VERBOSE=1 ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[[ $# -ge 1 && $# -le 2 ]] || usage
BASE=$1
OTHER=${2:-}

for rev in "$BASE" ${OTHER:+"$OTHER"}; do
    git rev-parse --verify --quiet "$rev^{commit}" >/dev/null ||
        { echo "ptx-diff: '$rev' is not a git revision here" >&2; exit 2; }
done
NVCC=${TRIT_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x $NVCC ]] || { echo "ptx-diff: no nvcc (looked for TRIT_NVCC, nvcc on PATH, $NVCC)" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# checkout SIDE REV: the sources the kernels include (kernels, core, exporters) at REV, or the
# working tree's when REV is empty.
checkout() {
    mkdir -p "$WORK/$1"
    if [[ -n $2 ]]; then
        git archive "$2" kernels core exporters | tar -x -C "$WORK/$1"
    else
        cp -r kernels core exporters "$WORK/$1/"
    fi
}

# compile SIDE: kernels/X.cu -> X.ptx with the flags CMake gives it (kernels/CMakeLists.txt).
compile() {
    local dir=$WORK/$1
    for f in "$dir"/kernels/*.cu; do
        local b arch defs="-DTRIT_HAVE_CUDA=1 -DTRIT_HAVE_SM90A=1"
        b=$(basename "$f" .cu)
        arch=sm_90
        if [[ $b == *_sm90 ]]; then arch=sm_90a; defs="-DTRIT_HAVE_CUDA=1"; fi
        echo "cd '$dir' && '$NVCC' -O3 -DNDEBUG $defs -arch=$arch -ptx --prec-div=true --prec-sqrt=true --ftz=false -std=c++17 -I. kernels/$b.cu -o $b.ptx 2> $b.err || { echo 'ptx-diff: nvcc failed on kernels/$b.cu ($1):' >&2; cat $b.err >&2; exit 1; }"
    done | xargs -d '\n' -P "$JOBS" -I{} bash -c '{}'
}

# digest SIDE FILE: one line per kernel: name, md5 of its normalised text, md5 of its opcodes.
digest() {
    local dir=$WORK/$1/k_$2
    mkdir -p "$dir"
    awk -v dir="$dir" '
        # No {8}: mawk has no interval expressions.
        function norm(s) {
            gsub(/_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]_/, "_H_", s)
            gsub(/cu_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]/, "cu_H", s)
            gsub(/\$L__[A-Za-z0-9_]+/, "L", s); gsub(/_param_0\[[0-9]+\]/, "_param_0[N]", s)
            return s
        }
        /^\.(visible )?\.?entry / {
            name = $0; sub(/^.*entry /, "", name); sub(/\(.*$/, "", name); name = norm(name)
            n++; text = dir "/" n ".text"; ops = dir "/" n ".ops"; print name > (dir "/" n ".name")
            close(dir "/" n ".name"); inside = 1
        }
        inside {
            print norm($0) > text
            if ($0 ~ /^\t/ && $1 !~ /^(\.|\/\/|\{|\})/ && $1 !~ /:$/) print ($1 ~ /^@/ ? "@ " $2 : $1) > ops
            if ($0 == "}") { inside = 0; close(text); close(ops) }
        }' "$WORK/$1/$2.ptx"
    for n in "$dir"/*.name; do
        [[ -e $n ]] || continue
        local k=${n%.name}
        touch "$k.ops"
        printf '%s %s %s\n' "$(cat "$n")" "$(md5sum <"$k.text" | cut -c1-32)" "$(md5sum <"$k.ops" | cut -c1-32)"
    done | sort
}

checkout a "$BASE"
checkout b "$OTHER"
compile a
compile b

printf '%-28s %8s %8s %8s %8s %8s\n' file kernels text opcodes added removed
total_ops=0
for f in "$WORK"/a/kernels/*.cu; do
    b=$(basename "$f" .cu)
    [[ -f $WORK/b/$b.ptx ]] || { printf '%-28s %8s\n' "$b.cu" "(only at $BASE)"; continue; }
    digest a "$b" >"$WORK/$b.a"
    digest b "$b" >"$WORK/$b.b"
    read -r kernels text ops added removed < <(join -a1 -a2 -e NONE -o 0,1.2,1.3,2.2,2.3 \
        "$WORK/$b.a" "$WORK/$b.b" | awk '
        $2 == "NONE" { added++; next }
        $4 == "NONE" { removed++; kernels++; next }
        { kernels++; if ($2 != $4) text++; if ($3 != $5) ops++ }
        END { print kernels + 0, text + 0, ops + 0, added + 0, removed + 0 }')
    printf '%-28s %8d %8d %8d %8d %8d\n' "$b.cu" "$kernels" "$text" "$ops" "$added" "$removed"
    total_ops=$((total_ops + ops))
    if [[ $VERBOSE == 1 && $ops -gt 0 ]]; then
        join "$WORK/$b.a" "$WORK/$b.b" | awk '$3 != $5 { print "    " $1 }'
    fi
done
for f in "$WORK"/b/kernels/*.cu; do
    b=$(basename "$f" .cu)
    [[ -f $WORK/a/$b.ptx ]] || printf '%-28s %8s\n' "$b.cu" "(new)"
done
echo "kernels whose instructions differ: $total_ops"

#!/bin/bash
# New process to first output on ../shared/torch-models/tiny_mlp: irtool-run (the runtime alone)
# against `irtool run` (the whole toolkit: LLVM, Graphviz, libxml2 loaded at exec) and /bin/true
# (the cost of a process). Each is run N times in a row; prints the mean and the best, in ms.
# Usage: bench/cold_start.sh [BUILD_DIR] [N]
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
N=${2:-200}
TINY=${IRTOOL_SHARED_DIR:-$ROOT/../shared}/torch-models/tiny_mlp
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$BUILD/irtool" compile "$TINY/model.onnx" -o "$TMP/tiny.irx" >/dev/null
measure() { # LABEL CMD...: N runs, mean and best wall time of one
    local label=$1; shift
    local best=999999 total=0 t0 t1 us
    for ((i = 0; i < N; i++)); do
        t0=$EPOCHREALTIME; "$@" >/dev/null; t1=$EPOCHREALTIME
        us=$(( (${t1/./} - ${t0/./}) ))
        total=$((total + us)); ((us < best)) && best=$us
    done
    printf '  %-28s mean %6.2f ms  best %6.2f ms\n' "$label" "$(bc -l <<< "$total / $N / 1000")" "$(bc -l <<< "$best / 1000")"
}
echo "cold start, tiny_mlp (x [4, 64]), $N runs each; $(lscpu | sed -n 's/^Model name: *//p')"
measure "/bin/true" /bin/true
measure "irtool-run" "$BUILD/irtool-run" "$TMP/tiny.irx" --input "x=$TINY/input_x.npy"
measure "irtool run" "$BUILD/irtool" run "$TMP/tiny.irx" --input "x=$TINY/input_x.npy"

#!/usr/bin/env bash
# One-thread CPU time per inference of irtool's compiled artifact against onnxruntime's, for a
# machine whose cores other processes keep busy (where bench/run_peer_bench.sh's wall-clock
# medians are not usable): each runner is run twice in a new process, with N1 and N2 timed
# iterations, and its user + system CPU seconds of the two runs differ by (N2 - N1) inferences,
# so process start, model load, compile and warm-up cancel out. One thread only: at two threads
# the figure that matters is wall time, which this cannot give.
#
# usage: bench/run_cpu_ratio.sh BUILD_DIR MODEL.onnx INPUT.npy [N1 N2 [ROUNDS]]
#   defaults N1 = 5, N2 = 45, ROUNDS = 3 (a line per round, then the median of the ratios);
#   GNU time counts in 10 ms steps, so N2 - N1 inferences should take a second or more
# Needs onnxruntime-node installed in bench/peers (see bench/peers/README.md) and GNU time.
set -euo pipefail

BUILD=${1:?usage: run_cpu_ratio.sh BUILD_DIR MODEL.onnx INPUT.npy [N1 N2 [ROUNDS]]}
MODEL=${2:?model missing}
INPUT=${3:?input .npy missing}
N1=${4:-5}
N2=${5:-45}
ROUNDS=${6:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
IRTOOL=$(cd "$BUILD" && pwd)/irtool
[ -x "$IRTOOL" ] || { echo "run_cpu_ratio: $IRTOOL not found (build first)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "run_cpu_ratio: /usr/bin/time (GNU time) missing" >&2; exit 1; }
[ -d "$HERE/peers/node_modules/onnxruntime-node" ] || { echo "run_cpu_ratio: onnxruntime-node missing in bench/peers" >&2; exit 1; }
[ "$N2" -gt "$N1" ] || { echo "run_cpu_ratio: N2 ($N2) must exceed N1 ($N1)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cpu_ratio.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

if ! out=$("$IRTOOL" compile "$MODEL" --input "$INPUT" --target cpu --cache-dir "$WORK/cache" -o "$WORK/model.irx" 2>&1); then
    echo "$out" | tail -3 >&2
    echo "run_cpu_ratio: compile failed" >&2
    exit 1
fi

# user + system CPU seconds of one command (its output discarded)
cpu_s() {
    local t
    if ! t=$(/usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null); then
        echo "run_cpu_ratio: failed: $*" >&2
        echo "$t" | tail -3 >&2
        exit 1
    fi
    echo "$t" | tail -1 | awk '{ print $1 + $2 }'
}
ort() { cpu_s node "$HERE/peers/ort_bench.js" "$MODEL" --input "$INPUT" --iterations "$1" --warmup 2 --threads 1; }
irt() { cpu_s "$IRTOOL" bench "$WORK/model.irx" --input "$INPUT" --iterations "$1" --warmup 2 --threads 1; }

ratios=()
echo "$(basename "$MODEL"), one thread, CPU ms per inference ($((N2 - N1)) inferences by difference); load: $(uptime | sed 's/.*load average: //')"
for r in $(seq "$ROUNDS"); do
    o1=$(ort "$N1"); o2=$(ort "$N2"); i1=$(irt "$N1"); i2=$(irt "$N2")
    line=$(awk -v o1="$o1" -v o2="$o2" -v i1="$i1" -v i2="$i2" -v n=$((N2 - N1)) 'BEGIN {
        o = (o2 - o1) / n * 1000; i = (i2 - i1) / n * 1000
        printf "%.1f %.1f %.2f", i, o, (o > 0 ? i / o : 0) }')
    read -r i o q <<< "$line"
    echo "round $r: irtool $i ms, onnxruntime $o ms, irtool / onnxruntime $q"
    ratios+=("$q")
done
printf '%s\n' "${ratios[@]}" | sort -g | awk '{ v[NR] = $1 } END { printf "median irtool / onnxruntime: %s\n", v[int((NR + 1) / 2)] }'

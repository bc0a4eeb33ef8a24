#!/usr/bin/env bash
# A/B of two irtool builds on the peer bench's models: each build compiles every model into its
# own artifact (irtool compile --target cpu), then the two artifacts are timed by their own
# build's `irtool bench` in alternating rounds (A, B, A, B, ...), so load on the machine falls on
# both alike. Prints a markdown table: each build's median over its rounds' medians and B / A.
# Use it to check that a change keeps the compiled models' speed ("within 5%").
#
# usage: bench/ab_builds.sh BUILD_A BUILD_B [ITERATIONS]
#   BUILD_A, BUILD_B  Release builds holding irtool (e.g. a worktree of the base commit, and build/)
#   ITERATIONS        timed runs per round (default 20, after 3 warm-up runs)
# Environment: ROUNDS (default 5), THREADS (default 1), ONLY (an extended regex on the labels),
#   SHARED (default ../shared next to the repository).
set -euo pipefail

A=$(cd "${1:?usage: ab_builds.sh BUILD_A BUILD_B [ITERATIONS]}" && pwd)/irtool
B=$(cd "${2:?usage: ab_builds.sh BUILD_A BUILD_B [ITERATIONS]}" && pwd)/irtool
ITERS=${3:-20}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-1}
ONLY=${ONLY:-}
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${SHARED:-$(cd "$HERE/../.." && pwd)/shared}
MODELS=$HERE/models
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ab_builds.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for x in "$A" "$B"; do [ -x "$x" ] || { echo "ab_builds: $x not found (build first)" >&2; exit 1; }; done

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }
field() { sed -n 's/.*"\?median_ms"\?[=:] *\([0-9.][0-9.]*\).*/\1/p' | head -1; }

ab_model() {  # LABEL MODEL INPUT...
    local label=$1 model=$2; shift 2
    if [ -n "$ONLY" ] && ! [[ $label =~ $ONLY ]]; then return; fi
    [ -f "$model" ] || { echo "  $label: $model missing, skipped" >&2; return; }
    local args=() side
    for i in "$@"; do args+=(--input "$i"); done
    echo "  $label ..." >&2
    for side in A B; do
        local bin=$A
        [ $side = B ] && bin=$B
        if ! "$bin" compile "$model" "${args[@]}" --target cpu --no-cache --no-validate -o "$WORK/$side.irx" >"$WORK/log" 2>&1; then
            echo "| $label | $side does not compile: $(tail -1 "$WORK/log") | | |"
            return
        fi
        : >"$WORK/$side.ms"
    done
    for ((r = 0; r < ROUNDS; r++)); do
        for side in A B; do
            local bin=$A
            [ $side = B ] && bin=$B
            "$bin" bench "$WORK/$side.irx" "${args[@]}" --iterations "$ITERS" --warmup 3 --threads "$THREADS" 2>/dev/null |
                field >>"$WORK/$side.ms" || true
        done
    done
    local ma mb
    ma=$(median <"$WORK/A.ms")
    mb=$(median <"$WORK/B.ms")
    echo "| $label | $ma | $mb | $(awk -v a="$ma" -v b="$mb" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", b / a; else print "-" }') |"
}

echo "A/B of compiled artifacts, $(lscpu | sed -n 's/^Model name: *//p'), $THREADS thread(s), $ROUNDS alternating rounds of $ITERS runs, $(date -u +%Y-%m-%d)"
echo "A: $A"
echo "B: $B"
echo
echo "| model | A ms | B ms | B / A |"
echo "|---|---|---|---|"
for m in tiny_mlp convnet encoder; do
    ab_model "$m" "$SHARED/torch-models/$m/model.onnx" "x=$SHARED/torch-models/$m/input_x.npy"
done
node "$HERE/peers/gen_npy.js" 1x3x224x224 "$WORK/in.npy" 2>/dev/null || /usr/bin/python3 -c "import numpy as np; np.save('$WORK/in.npy', np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32))"
for m in resnet50 squeezenet bvlc_alexnet; do
    ab_model "light_$m" "$SHARED/onnx-tests/light/light_$m.onnx" "$WORK/in.npy"
done
ab_model mobilenetv2 "$MODELS/mobilenetv2.onnx" "x=$MODELS/mobilenetv2_x.npy"
ab_model causal_lm "$MODELS/causal_lm.onnx" "x=$MODELS/causal_lm_x.npy"
DECODE_IN=("x=$MODELS/decode_step_x.npy")
for l in 0 1 2 3; do DECODE_IN+=("past_key_$l=$MODELS/decode_step_past_key_$l.npy" "past_value_$l=$MODELS/decode_step_past_value_$l.npy"); done
ab_model decode_step "$MODELS/decode_step.onnx" "${DECODE_IN[@]}"

#!/bin/bash
# A mutation campaign over every reader (issue 29). Seeds: the corpus models and inputs, ONNX
# node tests and their .pb data, the .irx seed artifact and its manifest (built by the harness).
#  1. file mutants (tests/fuzz/mutate.py, COUNT per reader) through the readers' harness
#     (tests/fuzz/harness.c) in BUILD_DIR's fuzz_replay, built with ASan + UBSan, each input in
#     its own process with a 10 s limit: crashes (signals, sanitizer reports), hangs, findings
#     (an error without a diagnostic, a broken round trip, an artifact that ran with outputs
#     other than its original's);
#  2. with FUZZ_BUILD set (a clang build with -DIRTOOL_FUZZ=ON), libFuzzer's own coverage-guided
#     mutation over the same seeds, COUNT runs per target; a finding stops it and leaves its
#     input in WORK/findings/.
# Prints a markdown table.
#
# usage: tests/fuzz/campaign.sh BUILD_DIR [COUNT] [WORK]
#   BUILD_DIR  cmake -DCMAKE_BUILD_TYPE=Debug -DIRTOOL_SANITIZE=ON (fuzz_replay and irtool)
#   COUNT      mutants per reader (default 6000)
#   WORK       seeds, mutants, logs (default /tmp/irtool-campaign)
# Environment: SHARED (default ../shared beside the repository), FUZZ_BUILD, SEED (default 1).
# tests/fuzz/corpus/<reader>/ (the replay test's inputs) holds the issue's cases
# (make_cases.py) and a few mutants of each reader picked from a campaign.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:?usage: campaign.sh BUILD_DIR [COUNT] [WORK]}" && pwd)
COUNT=${2:-6000}
WORK=${3:-/tmp/irtool-campaign}
SHARED=${SHARED:-$ROOT/../shared}
SEED=${SEED:-1}
IRTOOL=$B/irtool
FB=${FUZZ_BUILD:-}
mkdir -p "$WORK"/{seeds,mutants,findings,grown}
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$ROOT/.ci/lsan.supp

# ---- seeds ------------------------------------------------------------------------------------
S=$WORK/seeds
mkdir -p "$S"/{ir,irb,onnx,npy,pb,irx}
cp "$ROOT"/corpus/*.ir "$ROOT"/corpus/errors/*.ir "$S/ir/" 2>/dev/null || true
cp "$ROOT"/tests/fuzz/corpus/ir/* "$S/ir/" 2>/dev/null || true
if [ -x "$IRTOOL" ]; then
    for f in "$ROOT"/corpus/*.ir; do "$IRTOOL" convert "$f" -o "$S/irb/$(basename "$f" .ir).irb" >/dev/null 2>&1 || true; done
fi
cp "$ROOT"/corpus/inputs/*.npy "$S/npy/" 2>/dev/null || true
k=0
for d in "$SHARED"/onnx-tests/node/test_*; do  # small node tests: a model and its .pb data
    [ $((k++ % 25)) -eq 0 ] || continue
    n=$(basename "$d")
    cp "$d/model.onnx" "$S/onnx/$n.onnx" 2>/dev/null || true
    cp "$d"/test_data_set_0/input_0.pb "$S/pb/$n.pb" 2>/dev/null || true
done
cp "$SHARED"/torch-models/tiny_mlp/model.onnx "$S/onnx/tiny_mlp.onnx" 2>/dev/null || true
cp "$SHARED"/torch-models/tiny_mlp/*.npy "$S/npy/" 2>/dev/null || true
for r in irb onnx npy pb; do cp "$ROOT"/tests/fuzz/corpus/$r/* "$S/$r/" 2>/dev/null || true; done
IRTOOL_FUZZ_IRX_SEED_OUT=$S/irx "$B/fuzz_replay" irx /dev/null >/dev/null 2>&1 || true
# (the issue's .irx cases are broken on purpose: as seeds they would leave few mutants that load)

# ---- 1. file mutants --------------------------------------------------------------------------
printf '| reader | mutants | crashes | hangs | findings |\n|---|---:|---:|---:|---:|\n'
for r in ir irb onnx npy pb irx; do
    M=$WORK/mutants/$r
    rm -rf "$M"
    /usr/bin/python3 "$ROOT/tests/fuzz/mutate.py" "$S/$r" "$M" "$COUNT" "$SEED"
    set +e
    # in-process batches; a batch that dies (crash, hang) is run again one child per input to count
    find "$M" -type f | sort | xargs -n 500 sh -c '"$0" "$@"; [ $? -le 1 ] || FUZZ_REPLAY_FORK=1 "$0" "$@"' "$B/fuzz_replay" "$r" > "$WORK/replay-$r.log" 2>&1
    set -e
    # xargs may split the list: sum the summary lines
    awk -v r=".$r" '/inputs, / { n += $2; c += $4; h += $6; f += $8; w += $10; ok += $17 }
        END { printf "| %s | %d | %d | %d | %d%s |\n", r, n, c, h, f,
              r == ".irx" ? sprintf(" (of the manifest mutants %d ran with other outputs; %d inputs ran with the original'"'"'s)", w, ok) : "" }' \
        "$WORK/replay-$r.log"
done
[ -n "$FB" ] || exit 0

# ---- 2. libFuzzer -------------------------------------------------------------------------------------
printf '| reader | target | inputs run | crashes / sanitizer reports / findings | hangs (> 10 s) |\n|---|---|---:|---:|---:|\n'
for pair in ir:fuzz_text irb:fuzz_binary onnx:fuzz_onnx npy:fuzz_npy pb:fuzz_pb irx:fuzz_irx; do
    r=${pair%%:*}
    t=${pair#*:}
    G=$WORK/grown/$r
    mkdir -p "$G" "$WORK/findings/$r"
    log=$WORK/$t.log
    set +e
    "$FB/$t" -runs="$COUNT" -seed="$SEED" -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$WORK/findings/$r/" "$G" "$S/$r" >"$log" 2>&1
    set -e
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    crashes=$(find "$WORK/findings/$r" -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' | wc -l)
    hangs=$(find "$WORK/findings/$r" -name 'timeout-*' | wc -l)
    printf '| .%s | %s | %s | %s | %s |\n' "$r" "$t" "${runs:-?}" "$crashes" "$hangs"
    grep -h 'manifest mutants that loaded' "$log" | tail -1 >&2 || true
done

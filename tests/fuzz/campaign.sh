#!/bin/bash
# A mutation campaign over every reader (issue 29): each libFuzzer target (tests/fuzz/fuzz_*.c,
# built with clang and ASan + UBSan) runs RUNS mutated inputs grown from seeds (the corpus
# models and inputs, ONNX node tests, the .irx seed artifact and its manifest), with a timeout
# per input, so a crash, a sanitizer report, a hang or an artifact that runs with outputs other
# than its original's stops the run and leaves its input in WORK/findings/. Prints one line per
# reader: runs, crashes (incl. sanitizer reports and findings), hangs.
#
# usage: tests/fuzz/campaign.sh FUZZ_BUILD_DIR [RUNS] [WORK]
#   FUZZ_BUILD_DIR  cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang-19 -DIRTOOL_FUZZ=ON
#                   -DIRTOOL_BUILD_TESTS=OFF -DIRTOOL_BUILD_BENCH=OFF; cmake --build build-fuzz
#                   --target fuzz_text fuzz_binary fuzz_onnx fuzz_npy fuzz_pb fuzz_irx
#   RUNS            mutated inputs per reader (default 6000)
#   WORK            seeds, grown corpora and findings (default /tmp/irtool-campaign)
# Environment: SHARED (default ../shared beside the repository), SEED (libFuzzer -seed, default 1).
# tests/fuzz/corpus/<reader>/ (the replay test's inputs) was picked from the grown corpora with
# libFuzzer's -merge=1 and kept to a few hundred KB in all.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FB=$(cd "${1:?usage: campaign.sh FUZZ_BUILD_DIR [RUNS] [WORK]}" && pwd)
RUNS=${2:-6000}
WORK=${3:-/tmp/irtool-campaign}
SHARED=${SHARED:-$ROOT/../shared}
SEED=${SEED:-1}
IRTOOL=${IRTOOL:-$ROOT/build-asan/irtool}
mkdir -p "$WORK"/{seeds,grown,findings}
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
IRTOOL_FUZZ_IRX_SEED_OUT=$S/irx "$FB/fuzz_irx" -runs=0 "$S/irx" >/dev/null 2>&1 || true
cp "$ROOT"/tests/fuzz/corpus/irx/* "$S/irx/" 2>/dev/null || true

# ---- runs -------------------------------------------------------------------------------------
printf '| reader | target | inputs run | crashes / sanitizer reports / findings | hangs (> 10 s) |\n|---|---|---:|---:|---:|\n'
for pair in ir:fuzz_text irb:fuzz_binary onnx:fuzz_onnx npy:fuzz_npy pb:fuzz_pb irx:fuzz_irx; do
    r=${pair%%:*}
    t=${pair#*:}
    G=$WORK/grown/$r
    mkdir -p "$G" "$WORK/findings/$r"
    log=$WORK/$t.log
    set +e
    "$FB/$t" -runs="$RUNS" -seed="$SEED" -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$WORK/findings/$r/" "$G" "$S/$r" >"$log" 2>&1
    set -e
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    crashes=$(find "$WORK/findings/$r" -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' | wc -l)
    hangs=$(find "$WORK/findings/$r" -name 'timeout-*' | wc -l)
    printf '| .%s | %s | %s | %s | %s |\n' "$r" "$t" "${runs:-?}" "$crashes" "$hangs"
    grep -h 'manifest mutants that loaded' "$log" | tail -1 >&2 || true
done

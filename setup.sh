#!/usr/bin/env bash
# irtool set-up: installs the Debian packages that are missing, builds, and then either runs
# the main job on the bundled default model (`./setup.sh demo`) or builds the tests with
# AddressSanitizer + UndefinedBehaviorSanitizer and runs them all (`./setup.sh test`), or runs
# the fuzzing campaign (`./setup.sh fuzz`, docs/reliability.md).
# Works on a fresh Debian 12 machine (as root, or with sudo). Nothing is downloaded except
# Debian packages.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
MODE=${1:-demo}
JOBS=${JOBS:-$(nproc)}
SHARED=${IRTOOL_SHARED_DIR:-$ROOT/../shared}

PACKAGES=(cmake make gcc pkg-config libprotobuf-c-dev protobuf-c-compiler libonnx-dev
          libgraphviz-dev libxml2-dev libcriterion-dev libopenblas-dev llvm-19-dev libxxhash-dev)
# `./setup.sh fuzz` only: clang with libFuzzer for the fuzz targets (tests/fuzz/)
FUZZ_PACKAGES=(clang-19 libclang-rt-19-dev)

install_missing() {
    local missing=()
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "setup: installing ${missing[*]}"
    local SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() { # build DIR [cmake args...]
    local dir=$1; shift
    cmake -S "$ROOT" -B "$dir" "$@" >/dev/null
    cmake --build "$dir" -j "$JOBS"
}

case "$MODE" in
demo)
    install_missing
    build build -DCMAKE_BUILD_TYPE=Release -DIRTOOL_BUILD_TESTS=OFF
    IRTOOL=$ROOT/build/irtool
    MODEL=corpus/mlp.ir
    mkdir -p out
    echo "== irtool verify $MODEL"; "$IRTOOL" verify "$MODEL"
    echo "== irtool info $MODEL"; "$IRTOOL" info "$MODEL"
    echo "== irtool opt -p 'shape-infer,fuse' $MODEL -o out/mlp.fused.ir --pass-stats"
    "$IRTOOL" opt -p 'shape-infer,fuse' "$MODEL" -o out/mlp.fused.ir --pass-stats
    echo "== irtool run out/mlp.fused.ir --input x=corpus/inputs/mlp_x.npy --output-dir out"
    "$IRTOOL" run out/mlp.fused.ir --input x=corpus/inputs/mlp_x.npy --output-dir out
    echo "== irtool convert out/mlp.fused.ir -o out/mlp.fused.irb; irtool info out/mlp.fused.irb --json"
    "$IRTOOL" convert out/mlp.fused.ir -o out/mlp.fused.irb
    "$IRTOOL" info out/mlp.fused.irb --json
    echo "== irtool viz out/mlp.fused.ir -o out/mlp.fused.svg"
    "$IRTOOL" viz out/mlp.fused.ir -o out/mlp.fused.svg && echo "wrote out/mlp.fused.svg"
    ;;
test)
    install_missing
    # Sanitizer build: every Criterion test runs under ASan + UBSan.
    build build-asan -DCMAKE_BUILD_TYPE=Debug -DIRTOOL_SANITIZE=ON -DIRTOOL_BUILD_BENCH=OFF
    (cd build-asan && IRTOOL_SHARED_DIR="$SHARED" ASAN_OPTIONS=detect_leaks=1 \
        LSAN_OPTIONS="suppressions=$ROOT/.ci/lsan.supp" \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$JOBS")
    # Optimized build for the accuracy checks below.
    build build -DCMAKE_BUILD_TYPE=Release -DIRTOOL_BUILD_TESTS=OFF -DIRTOOL_BUILD_BENCH=OFF
    # Accuracy regressions of pipelines against corpus/validate/baseline.json (JUnit in out/).
    IRTOOL_SHARED_DIR="$SHARED" "$ROOT/.ci/validate.sh" "$ROOT/build/irtool"
    # Conformance on ONNX's own test data, when ../shared is present.
    if [ -d "$SHARED/onnx-tests" ]; then
        "$ROOT/.ci/conformance.sh" "$ROOT/build/irtool" "$SHARED"
    else
        echo "setup: $SHARED/onnx-tests not found; conformance skipped"
    fi
    ;;
fuzz)
    # The mutation campaign of docs/reliability.md: file mutants through the sanitizer build,
    # then libFuzzer over the clang-built targets (COUNT inputs per reader, default 6000).
    PACKAGES+=("${FUZZ_PACKAGES[@]}")
    install_missing
    build build-asan -DCMAKE_BUILD_TYPE=Debug -DIRTOOL_SANITIZE=ON -DIRTOOL_BUILD_BENCH=OFF
    build build-fuzz -DCMAKE_C_COMPILER=clang-19 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIRTOOL_FUZZ=ON \
        -DIRTOOL_BUILD_TESTS=OFF -DIRTOOL_BUILD_BENCH=OFF
    SHARED="$SHARED" FUZZ_BUILD="$ROOT/build-fuzz" "$ROOT/tests/fuzz/campaign.sh" "$ROOT/build-asan" "${COUNT:-6000}"
    ;;
*)
    echo "usage: ./setup.sh [demo|test|fuzz]" >&2
    exit 2
    ;;
esac

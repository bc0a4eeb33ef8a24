#!/usr/bin/env bash
# irtool set-up: installs the Debian packages that are missing, builds, and then either runs
# the README's walk on a model exported from PyTorch (`./setup.sh demo`) or builds the tests with
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
          libgraphviz-dev libxml2-dev libcriterion-dev libopenblas-dev llvm-19-dev libxxhash-dev
          libjansson-dev libb2-dev zlib1g-dev chromium
          python3 python3-dev python3-numpy python3-pytest python3-venv python3-setuptools python3-wheel
          python3-torch)
PYTHON=${PYTHON:-/usr/bin/python3} # Debian's Python (the Python package builds against it)
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
    # The README's walk on a model exported from PyTorch (a TransformerEncoderLayer with a
    # dynamic batch B and sequence S; corpus/torch/make_models.py made it).
    M=corpus/torch/encoder_dynamic
    mkdir -p out
    run() { echo "== irtool $*"; "$IRTOOL" "$@"; }
    run verify $M/model.onnx
    run opt $M/model.onnx -p default,fuse -o out/encoder.opt.ir --pass-stats 2>&1 | tail -4
    run viz out/encoder.opt.ir -o out/encoder.html && echo "wrote out/encoder.html (open it in a browser)"
    run validate $M/model.onnx -p default,fuse --random 2
    run compile $M/model.onnx -p 'shape-infer{B=1:16,S=1:256}' -o out/encoder.irx
    run run out/encoder.irx --input x=$M/input_x.npy --output-dir out
    ;;
test)
    install_missing
    # Layering: who may include whom (docs/architecture.md).
    "$ROOT/.ci/check_includes.sh"
    # No switch over op ids in backend/: per-op facts are table rows (docs/architecture.md).
    "$ROOT/.ci/check_op_switches.sh"
    # Sanitizer build: every Criterion test runs under ASan + UBSan.
    build build-asan -DCMAKE_BUILD_TYPE=Debug -DIRTOOL_SANITIZE=ON -DIRTOOL_BUILD_BENCH=OFF
    (cd build-asan && IRTOOL_SHARED_DIR="$SHARED" ASAN_OPTIONS=detect_leaks=1 \
        LSAN_OPTIONS="suppressions=$ROOT/.ci/lsan.supp" \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$JOBS")
    # Optimized build for the accuracy checks below.
    build build -DCMAKE_BUILD_TYPE=Release -DIRTOOL_BUILD_TESTS=OFF -DIRTOOL_BUILD_BENCH=OFF
    # Accuracy regressions of pipelines against corpus/validate/baseline.json (JUnit in out/).
    IRTOOL_SHARED_DIR="$SHARED" "$ROOT/.ci/validate.sh" "$ROOT/build/irtool"
    # Install to a temporary prefix; pkg-config and CMake consumers build and run against it.
    "$ROOT/.ci/consumers.sh" "$ROOT/build"
    # The Python package (python/) in a venv over Debian's Python, and its pytest suite
    # (PyTorch tests skip with a message where python3-torch is missing).
    "$PYTHON" -m venv --system-site-packages build/pyvenv
    build/pyvenv/bin/pip install -q --no-build-isolation --no-index ./python
    rm -rf python/build python/irtool.egg-info
    rc=0
    IRTOOL_SHARED_DIR="$SHARED" build/pyvenv/bin/python -m pytest -q -rs python/tests || rc=$?
    if [ "$rc" -eq 5 ]; then
        echo "setup: pytest collected no tests under python/tests"; exit 1
    elif [ "$rc" -ne 0 ]; then
        exit "$rc"
    fi
    # The HTML viewer in headless Chromium (screenshot in out/browser/).
    "$ROOT/tests/browser/run.sh" "$ROOT/build/irtool" "$SHARED" "$ROOT/out/browser"
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

#!/bin/sh
# Install check: `cmake --install BUILD --prefix TMP`, then two consumers built against TMP alone:
# run_any.c through pkg-config (irtool-runtime, linking only the runtime) and, through
# find_package(irtool), verify_model.c (irtool::irtool) and run_any.c again (irtool::runtime).
# Both run on an artifact compiled by BUILD/irtool; neither the runtime-only consumer nor
# irtool-run may load LLVM, Graphviz, libxml2 or protobuf-c. Usage: .ci/consumers.sh BUILD_DIR
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:?usage: .ci/consumers.sh BUILD_DIR}" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
P=$TMP/prefix
cmake --install "$BUILD" --prefix "$P" >/dev/null
LIBDIR=$(dirname "$(find "$P" -name 'libirtool-runtime.so' | head -1)")
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
test "$(pkg-config --variable=prefix irtool-runtime)" = "$P" || { echo "consumers: irtool-runtime.pc has the wrong prefix"; exit 1; }
test "$(pkg-config --variable=prefix irtool)" = "$P" || { echo "consumers: irtool.pc has the wrong prefix"; exit 1; }
"$BUILD/irtool" compile "$ROOT/corpus/mlp.ir" --no-cache -o "$TMP/mlp.irx" >/dev/null
no_toolkit_libs() { # BINARY: fails when it would load a toolkit library
    if ldd "$1" | grep -E 'libLLVM|libgvc|libcgraph|libxml2|libprotobuf-c'; then
        echo "consumers: $1 loads a toolkit library"; exit 1
    fi
}
# pkg-config + C, the runtime only
cc -std=c11 -Wall -Werror "$ROOT/.ci/consumers/run_any.c" -o "$TMP/run_any" \
    $(pkg-config --cflags --libs irtool-runtime) -Wl,-rpath,"$LIBDIR"
no_toolkit_libs "$TMP/run_any"
"$TMP/run_any" "$TMP/mlp.irx" | grep -q '^y: f32\[2, 10\]$' || { echo "consumers: run_any (pkg-config) failed"; exit 1; }
no_toolkit_libs "$P/bin/irtool-run"
# CMake + C, the toolkit and the runtime
cmake -S "$ROOT/.ci/consumers" -B "$TMP/cm" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_RPATH="$LIBDIR" >/dev/null
cmake --build "$TMP/cm" >/dev/null
"$TMP/cm/verify_model" "$ROOT/corpus/mlp.ir" | grep -q ' nodes$' || { echo "consumers: verify_model failed"; exit 1; }
no_toolkit_libs "$TMP/cm/run_any_cmake"
"$TMP/cm/run_any_cmake" "$TMP/mlp.irx" | grep -q '^y: f32\[2, 10\]$' || { echo "consumers: run_any (CMake) failed"; exit 1; }
echo "consumers: install to a temporary prefix, pkg-config and CMake consumers: ok"

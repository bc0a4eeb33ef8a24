#!/usr/bin/env bash
# ONNX conformance with the reference interpreter, then with the LLVM and CUDA backends
# (--backend llvm, lists .ci/expected/llvm-<folder>.txt), on ../shared/onnx-tests. Each folder has a
# list of the tests known to pass (.ci/expected/<folder>.txt); a test on that list that stops
# passing fails the run, newly passing ones are printed so the list can grow. JUnit reports go
# to out/conformance-<folder>.xml.
set -euo pipefail
IRTOOL=$1
SHARED=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$ROOT/out"
status=0
for folder in node simple pytorch-converted pytorch-operator light; do
    dir="$SHARED/onnx-tests/$folder"
    [ -d "$dir" ] || { echo "conformance: $dir missing, skipped"; continue; }
    echo "== irtool conformance $folder"
    expect=()
    [ -f "$ROOT/.ci/expected/$folder.txt" ] && expect=(--expect "$ROOT/.ci/expected/$folder.txt")
    if ! "$IRTOOL" conformance "$dir" --quiet --junit "$ROOT/out/conformance-$folder.xml" "${expect[@]}"; then
        status=1
    fi
done
# The LLVM backend (JIT): all five folders take well under a minute on one core.
for folder in node simple pytorch-converted pytorch-operator light; do
    dir="$SHARED/onnx-tests/$folder"
    [ -d "$dir" ] || continue
    echo "== irtool conformance $folder --backend llvm"
    expect=()
    [ -f "$ROOT/.ci/expected/llvm-$folder.txt" ] && expect=(--expect "$ROOT/.ci/expected/llvm-$folder.txt")
    if ! "$IRTOOL" conformance "$dir" --backend llvm --quiet --junit "$ROOT/out/conformance-llvm-$folder.xml" "${expect[@]}"; then
        status=1
    fi
done
# The LLVM backend with shapes known at run time only: each node test compiled once as an artifact
# with its input dims symbolic (.ci/expected/llvm-symbolic-node.txt).
dir="$SHARED/onnx-tests/node"
if [ -d "$dir" ]; then
    echo "== irtool conformance node --backend llvm --symbolic"
    if ! "$IRTOOL" conformance "$dir" --backend llvm --symbolic -j 2 --quiet --junit "$ROOT/out/conformance-llvm-symbolic-node.xml" \
        --expect "$ROOT/.ci/expected/llvm-symbolic-node.txt"; then
        status=1
    fi
fi
# The CUDA backend: each node test compiled for cuda:sm_90 (NVPTX, then ptxas); without a GPU it
# is compile-only, and .ci/expected/cuda-node.txt lists the tests that must keep compiling.
have_ptxas=0
{ [ -n "${IRTOOL_PTXAS:-}" ] || [ -x /usr/local/cuda/bin/ptxas ] || command -v ptxas >/dev/null 2>&1; } && have_ptxas=1
if [ -d "$dir" ] && [ $have_ptxas = 0 ]; then
    echo "conformance: no CUDA toolkit (ptxas), --backend cuda skipped"
elif [ -d "$dir" ]; then
    echo "== irtool conformance node --backend cuda"
    if ! "$IRTOOL" conformance "$dir" --backend cuda -j 2 --quiet --junit "$ROOT/out/conformance-cuda-node.xml" \
        --expect "$ROOT/.ci/expected/cuda-node.txt"; then
        status=1
    fi
fi
exit $status

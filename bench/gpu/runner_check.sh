#!/bin/bash
# irtool-run on a GPU host without LLVM. Prepare on the build machine (LLVM, ptxas):
#   bench/gpu/runner_check.sh prepare DIR      compiles tiny_mlp for cuda:sm_90 and for the CPU
#                                              into DIR with build/irtool-run and the data
# then on the GPU host:
#   DIR/runner_check.sh run DIR                ldd, both artifacts run, the CUDA output against
#                                              PyTorch's, ten cold starts of each
set -u
case "${1:-}" in
prepare)
    ROOT=$(cd "$(dirname "$0")/../.." && pwd)
    D=${2:?DIR}; T=${IRTOOL_SHARED_DIR:-$ROOT/../shared}/torch-models/tiny_mlp
    mkdir -p "$D" && cp "$ROOT/build/irtool-run" "$0" "$T/input_x.npy" "$T/output_y.npy" "$D/" || exit 1
    "$ROOT/build/irtool" compile "$T/model.onnx" --target cuda:sm_90 --input "x=$T/input_x.npy" -o "$D/tiny_cuda.irx" &&
        "$ROOT/build/irtool" compile "$T/model.onnx" --target cpu:x86-64-v3 -o "$D/tiny_cpu.irx" ;;
run)
    D=${2:?DIR}; R=${OUT:-$D/out}; cd "$D" || exit 1
    ldd ./irtool-run
    ./irtool-run tiny_cuda.irx --input x=input_x.npy -o "$R/cuda"; echo "cuda rc=$?"
    ./irtool-run tiny_cpu.irx --input x=input_x.npy; echo "cpu rc=$?"
    python3 -c "import numpy as np; print('max |cuda - torch|', abs(np.load('$R/cuda/y.npy') - np.load('output_y.npy')).max())"
    for a in tiny_cuda tiny_cpu; do
        echo -n "$a cold start (us):"
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            t0=$EPOCHREALTIME; ./irtool-run $a.irx --input x=input_x.npy >/dev/null 2>&1; t1=$EPOCHREALTIME
            echo -n " $(( ${t1/./} - ${t0/./} ))"
        done
        echo
    done ;;
*) echo "usage: runner_check.sh prepare DIR | run DIR" >&2; exit 2 ;;
esac

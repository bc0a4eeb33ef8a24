#!/usr/bin/env bash
# Builds the GPU pack on the build machine (LLVM, ptxas; no GPU needed): one folder holding
# everything the GPU machine runs, since that machine has the CUDA driver, cuBLAS and PyTorch
# but no LLVM, so it cannot build or run irtool itself, only artifacts through the runtime.
#   bench/gpu/pack.sh [BUILD_DIR] [PACK_DIR]     (defaults: build/, bench/gpu/pack/)
# PACK_DIR afterwards (at most 48 MiB; run.sh there checks it on the GPU, see bench/gpu/README.md):
#   run.sh torch_peers.py export.py   the GPU-side script, the PyTorch peers and their modules
#   bin/irtool-run bin/gpu_bench      runners linked to libirtool-runtime only (static)
#   models/NAME/                      sm_90 artifacts of whole models, inputs and references;
#                                     run.txt: one line per run (inputs, expected outputs, tolerance)
#   node/TEST[/SET]/                  every ONNX node test the CUDA backend compiles (irtool
#                                     conformance --pack): model.irx, input_K.npy, expected_K.npy
#   bench/                            the fused chain, the copy graph, the bf16 and FP8 GEMMs
#   MANIFEST.txt                      what was packed, what was refused and why
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" 2>/dev/null && pwd) || { echo "pack.sh: no build folder ${1:-$ROOT/build} (run ./setup.sh demo first)" >&2; exit 1; }
P=${2:-$ROOT/bench/gpu/pack}
SHARED=${IRTOOL_SHARED_DIR:-$ROOT/../shared}
IRTOOL=$BUILD/irtool
SM=${IRTOOL_GPU_SM:-sm_90}
LIMIT_MIB=48
for f in "$IRTOOL" "$BUILD/libirtool-runtime.a"; do
  [ -e "$f" ] || { echo "pack.sh: $f is missing: build it first (cmake --build $BUILD)" >&2; exit 1; }
done
if [ -z "${IRTOOL_PTXAS:-}" ] && ! command -v ptxas >/dev/null && [ ! -x /usr/local/cuda/bin/ptxas ]; then
  echo "pack.sh: no CUDA toolkit (ptxas) here; the CUDA backend needs it to assemble kernels" >&2; exit 1
fi
[ -d "$SHARED/torch-models" ] && [ -d "$SHARED/onnx-tests/node" ] ||
  { echo "pack.sh: $SHARED/torch-models and $SHARED/onnx-tests/node are needed (set IRTOOL_SHARED_DIR)" >&2; exit 1; }

rm -rf "$P.tmp" && mkdir -p "$P.tmp"/{bin,models,bench} || exit 1
T=$P.tmp
MAN=$T/MANIFEST.txt
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
{
  echo "irtool GPU pack for cuda:$SM"
  echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?') on $(uname -n)"
  echo "toolkit: $( (${IRTOOL_PTXAS:-ptxas} --version 2>/dev/null || /usr/local/cuda/bin/ptxas --version) | tail -1)"
} > "$MAN"
note() { echo "$*" | tee -a "$MAN"; }

# ---- runners: libirtool-runtime linked statically, so only libc, libm and libdl are needed ----
CC=${CC:-cc}
for prog in "tools/runner/irtool_run.c irtool-run" "bench/gpu/gpu_bench.c gpu_bench"; do
  set -- $prog
  "$CC" -O2 -D_GNU_SOURCE -I"$ROOT" "$ROOT/$1" "$BUILD/libirtool-runtime.a" -lm -ldl -lpthread -o "$T/bin/$2" ||
    { echo "pack.sh: cannot build $2" >&2; exit 1; }
done
cp "$ROOT/bench/gpu/run.sh" "$ROOT/bench/gpu/torch_peers.py" "$SHARED/torch-models/export.py" "$T/" || exit 1

# ---- models: compiled here, references from the interpreter (and PyTorch eager) -------------------
# pack_model NAME MODEL PIPELINE TOLERANCE INPUT... : one artifact, run.txt line(s) for each shape
interp_ref() { # MODEL OUTDIR INPUT... -> OUTDIR/<output>.npy from the reference interpreter
  local model=$1 out=$2; shift 2
  local args=()
  for i in "$@"; do args+=(--input "$i"); done
  "$IRTOOL" run "$model" "${args[@]}" --output-dir "$out" > /dev/null
}
pack_model() {
  local name=$1 model=$2 pipe=$3 tol=$4; shift 4
  local d=$T/models/$name
  mkdir -p "$d"
  local args=()
  for i in "$@"; do args+=(--input "$i"); done
  if ! out=$("$IRTOOL" compile "$model" -p "$pipe" --target "cuda:$SM" --no-cache "${args[@]}" -o "$d/model.irx" 2>&1); then
    note "not packed: $name: $(echo "$out" | grep -v '^ ' | tail -1)"
    rm -rf "$d"
    return
  fi
  local k=0 ins=()
  for i in "$@"; do cp "$i" "$d/in$k.npy"; ins+=("in$k.npy"); k=$((k + 1)); done
  interp_ref "$model" "$WORK/$name.ref" "$@" || { note "not packed: $name: the interpreter failed"; rm -rf "$d"; return; }
  local exp=()
  for f in "$WORK/$name.ref"/*.npy; do cp "$f" "$d/ref_$(basename "$f")"; exp+=("$(basename "$f" .npy)=ref_$(basename "$f")"); done
  echo "${ins[*]} | ${exp[*]} | $tol | interpreter" > "$d/run.txt"
  note "packed: $name ($pipe)"
}
F32="--rtol 1e-4 --atol 1e-5"
FP8="--cosine 0.99"
for m in tiny_mlp convnet encoder branchy; do
  s=$SHARED/torch-models/$m
  pack_model "torch_$m" "$s/model.onnx" default "$F32" "$s/input_x.npy"
  [ -d "$T/models/torch_$m" ] && cp "$s/output_y.npy" "$T/models/torch_$m/eager_y.npy" &&
    echo "in0.npy | y=eager_y.npy | $F32 | pytorch eager" >> "$T/models/torch_$m/run.txt"
done
for m in tiny_mlp encoder; do
  s=$SHARED/torch-models/$m
  pack_model "torch_${m}_fp8" "$s/model.onnx" "default,quantize-fp8{calib=dynamic},fuse" "$FP8" "$s/input_x.npy"
  # (the reference is the interpreter on the f32 model: irtool run applies no pipeline)
done
# SqueezeNet at its fixed shape on a seeded input, compared through its logits: its synthetic
# weights push them to ~1e9, where the final Softmax's output is decided by rounding alone
SQ=$SHARED/onnx-tests/light/light_squeezenet.onnx
if [ -f "$SQ" ] && "$IRTOOL" opt "$SQ" -o "$WORK/sq.ir" > /dev/null 2>&1; then
  R=$(awk '/^  return %/ { print $2 }' "$WORK/sq.ir")
  L=$(awk -v r="$R" '$1 == r && $3 ~ /^Softmax\(/ { sub(/^Softmax\(/, "", $3); sub(/\).*/, "", $3); print $3 }' "$WORK/sq.ir")
  [ -n "$L" ] && sed -i "s/^  return $R\$/  return $L/" "$WORK/sq.ir"
  /usr/bin/python3 -c "import numpy as np; np.save('$WORK/sq_x.npy', np.random.default_rng(7).random((1, 3, 224, 224), dtype=np.float32))" &&
    pack_model light_squeezenet_logits "$WORK/sq.ir" default "$F32" "$WORK/sq_x.npy"
fi
# A transformer block with symbolic batch and sequence: compiled once, run at two shapes
E=$ROOT/corpus/torch/encoder_dynamic
d=$T/models/encoder_dynamic
mkdir -p "$d"
if out=$("$IRTOOL" compile "$E/model.onnx" --target "cuda:$SM" --no-cache -o "$d/model.irx" 2>&1); then
  for k in "" 2; do
    cp "$E/input_x$k.npy" "$d/in_x$k.npy" && cp "$E/output_y$k.npy" "$d/eager_y$k.npy"
    echo "in_x$k.npy | y=eager_y$k.npy | $F32 | pytorch eager" >> "$d/run.txt"
  done
  note "packed: encoder_dynamic (symbolic batch and sequence, run at two shapes)"
else
  rm -rf "$d"
  note "not packed: encoder_dynamic (symbolic batch and sequence): $(echo "$out" | grep -v '^ ' | tail -1)"
fi

# ---- bench graphs: 16-op chain and copy over 256 MiB, 8192^3 GEMMs (inputs made on the GPU side) ----
N=67108864
{
  echo "graph @chain(%x: f32[$N]) {"
  echo "  const %a: f32[] = [1.0001]"
  echo "  const %b: f32[] = [0.5]"
  prev=x
  for i in $(seq 1 16); do
    case $((i % 4)) in
      1) echo "  %v$i = Mul(%$prev, %a) : f32[$N]" ;; 2) echo "  %v$i = Add(%$prev, %b) : f32[$N]" ;;
      3) echo "  %v$i = Relu(%$prev) : f32[$N]" ;; 0) echo "  %v$i = Sub(%$prev, %b) : f32[$N]" ;;
    esac
    prev=v$i
  done
  echo "  return %$prev"
  echo "}"
} > "$WORK/chain.ir"
printf 'graph @copy(%%x: f32[%s]) {\n  %%y = Identity(%%x) : f32[%s]\n  return %%y\n}\n' $N $N > "$WORK/copy.ir"
M=8192
printf 'graph @gemm_bf16(%%a: bf16[%s, %s], %%b: bf16[%s, %s]) {\n  %%y = MatMul(%%a, %%b) : bf16[%s, %s]\n  return %%y\n}\n' $M $M $M $M $M $M > "$WORK/gemm_bf16.ir"
cat > "$WORK/gemm_fp8.ir" <<EOF
graph @gemm_fp8(%a: f8e4m3fn[$M, $M], %b: f8e4m3fn[$M, $M]) {
  const %sa: f32[] = [1.0]
  const %sb: f32[] = [1.0]
  %y = irtool.fp8_matmul(%a, %b, %sa, %sb) : f32[$M, $M]
  return %y
}
EOF
for g in "chain default,fuse" "copy default" "gemm_bf16 default" "gemm_fp8 default"; do
  set -- $g
  if out=$("$IRTOOL" compile "$WORK/$1.ir" -p "$2" --target "cuda:$SM" --no-cache --no-validate -o "$T/bench/$1.irx" 2>&1); then
    note "packed: bench/$1"
  else
    note "not packed: bench/$1: $(echo "$out" | grep -v '^ ' | tail -1)"
  fi
done

# ---- ONNX node tests: every one the CUDA backend compiles ------------------------------------------
"$IRTOOL" conformance "$SHARED/onnx-tests/node" --backend cuda --quiet -j "$(nproc)" --pack "$T/node" > "$WORK/node.log" 2>&1
note "node tests: $(tail -1 "$WORK/node.log"); packed: $(find "$T/node" -name model.irx | wc -l) data sets of $(ls "$T/node" | wc -l) tests"
# a test folder without model.irx did not finish packing (an error after some files): drop it
find "$T/node" -mindepth 1 -maxdepth 2 -type d -exec sh -c 'ls "$1"/*.npy >/dev/null 2>&1 && [ ! -f "$1/model.irx" ] && rm -rf "$1"' _ {} \;

MIB=$(du -sm "$T" | cut -f1)
note "size: $MIB MiB (limit $LIMIT_MIB)"
if [ "$MIB" -gt "$LIMIT_MIB" ]; then echo "pack.sh: the pack is $MIB MiB, over the $LIMIT_MIB MiB limit" >&2; exit 1; fi
rm -rf "$P" && mv "$T" "$P" && echo "pack: $P"

#!/usr/bin/env bash
# GPU checks and measurements of the CUDA backend (issue 9), for a machine with an NVIDIA GPU
# (planned: one H200, 16 cores); the whole script is meant to finish in under 10 minutes.
#   bench/gpu/run.sh [BUILD_DIR]      (default BUILD_DIR: build-gpu, built here when absent)
# Writes everything to $OUT (or bench/gpu/results/): summary.txt plus the logs.
#  1. correctness: torch models, light CNNs and corpus models compiled for the GPU's sm; the
#     compile gate itself runs the CUDA artifact against the interpreter (f32: rtol 1e-4,
#     atol 1e-5; FP8 GEMMs: cosine >= 0.99) and refuses on failure
#  2. bandwidth: a fused 16-op elementwise chain over 256 MiB against a device-to-device copy
#  3. GEMM 8192^3 through cuBLASLt: bf16 against FP8 E4M3 (f32 output)
#  4. cold start: compile from scratch, compile served from the cache, and a fresh process that
#     loads the cached artifact and runs once (gpu_bench cold)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
RES=${OUT:-$ROOT/bench/gpu/results}
SHARED=${IRTOOL_SHARED_DIR:-$ROOT/../shared}
mkdir -p "$RES"
WORK=$(mktemp -d)
export XDG_CACHE_HOME=$WORK/cache
SUM=$RES/summary.txt
: > "$SUM"
log() { echo "$*" | tee -a "$SUM"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# ---- 0. toolkit and build ----------------------------------------------------------------------
if [ -z "${IRTOOL_PTXAS:-}" ] && ! command -v ptxas >/dev/null && [ ! -x /usr/local/cuda/bin/ptxas ]; then
  echo "no CUDA toolkit here (ptxas): the compile gate runs on this machine and needs it; set IRTOOL_PTXAS"; exit 1
fi
if [ ! -x "$BUILD/irtool" ] || [ ! -x "$BUILD/bench/gpu_bench" ]; then
  t0=$(now)
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DIRTOOL_BUILD_TESTS=OFF > "$RES/build.log" 2>&1 &&
    cmake --build "$BUILD" -j"$(nproc)" --target irtool gpu_bench >> "$RES/build.log" 2>&1 ||
    { echo "build failed: see $RES/build.log"; tail -20 "$RES/build.log"; exit 1; }
  log "build: $(secs "$t0" "$(now)") s"
fi
IRTOOL=$BUILD/irtool
BENCH=$BUILD/bench/gpu_bench

# ---- GPU -------------------------------------------------------------------------------------
log "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
log "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -1)"
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
case "$CC" in
  90) SM=sm_90 ;; 89) SM=sm_89 ;; 80|86|87) SM=sm_80 ;; "") echo "no GPU (nvidia-smi failed)"; exit 1 ;; *) SM=sm_90 ;;
esac
SM=${IRTOOL_GPU_SM:-$SM}
log "target: cuda:$SM"

# ---- 1. correctness ----------------------------------------------------------------------------
check() { # name model pipeline [--input spec]...
  local name=$1 model=$2 pipe=$3; shift 3
  if [ ! -f "$model" ]; then log "  $name: SKIP (missing $model)"; return; fi
  local out
  out=$(timeout 180 "$IRTOOL" compile "$model" -p "$pipe" --target "cuda:$SM" -o "$WORK/$name.irx" --no-cache "$@" 2>&1)
  echo "== $name ($pipe)" >> "$RES/correctness.log"; echo "$out" >> "$RES/correctness.log"
  if echo "$out" | grep -q "GPU run matches the interpreter"; then log "  $name: PASS"
  else log "  $name: FAIL: $(echo "$out" | grep -v '^ ' | tail -1 | cut -c1-240)"; fi
}
log "1. outputs of CUDA artifacts against the interpreter (compile gate on the GPU)"
C=$ROOT/corpus
for m in branchy convnet encoder tiny_mlp; do
  check "torch_$m" "$SHARED/torch-models/$m/model.onnx" default --input "$SHARED/torch-models/$m/input_x.npy"
  check "torch_${m}_fp8" "$SHARED/torch-models/$m/model.onnx" "default,fuse,quantize-fp8{calib=dynamic}" \
    --input "$SHARED/torch-models/$m/input_x.npy"
done
for m in squeezenet resnet50 bvlc_alexnet; do
  check "light_$m" "$SHARED/onnx-tests/light/light_$m.onnx" "default,fuse"
done
check corpus_mlp "$C/mlp.ir" "default,fuse" --input "x=$C/inputs/mlp_x.npy"
check corpus_conv_block "$C/conv_block.ir" "default,fuse"

# ---- 2. bandwidth --------------------------------------------------------------------------------
N=67108864 # 256 MiB of f32
{
  echo "graph @chain(%x: f32[$N]) {"
  echo "  const %a: f32[] = [1.0001]"
  echo "  const %b: f32[] = [0.5]"
  prev=x
  for i in $(seq 1 16); do
    case $((i % 4)) in
      1) echo "  %v$i = Mul(%$prev, %a) : f32[$N]" ;;
      2) echo "  %v$i = Add(%$prev, %b) : f32[$N]" ;;
      3) echo "  %v$i = Relu(%$prev) : f32[$N]" ;;
      0) echo "  %v$i = Sub(%$prev, %b) : f32[$N]" ;;
    esac
    prev=v$i
  done
  echo "  return %$prev"
  echo "}"
} > "$WORK/chain.ir"
printf 'graph @copy(%%x: f32[%s]) {\n  %%y = Identity(%%x) : f32[%s]\n  return %%y\n}\n' $N $N > "$WORK/copy.ir"
log "2. fused elementwise chain vs device copy (256 MiB in, 256 MiB out)"
bw() { # name ir pipeline -> GB/s
  "$IRTOOL" compile "$2" -p "$3" --target "cuda:$SM" -o "$WORK/$1.irx" --no-cache >> "$RES/bandwidth.log" 2>&1 ||
    { log "  $1: compile failed (see bandwidth.log)" >&2; echo 0; return; }
  local ms
  ms=$("$BENCH" time "$WORK/$1.irx" 50 2>>"$RES/bandwidth.log" | awk '/compute_ms/ { print $2 }')
  echo "$1 compute_ms ${ms:-?}" >> "$RES/bandwidth.log"
  awk -v ms="${ms:-0}" -v n=$N 'BEGIN { if (ms > 0) printf "%.1f", 2 * n * 4 / (ms * 1e-3) / 1e9; else print 0 }'
}
BW_CHAIN=$(bw chain "$WORK/chain.ir" "default,fuse")
BW_COPY=$(bw copy "$WORK/copy.ir" default)
log "  fused 16-op chain: $BW_CHAIN GB/s; cuMemcpyDtoD copy: $BW_COPY GB/s; ratio $(awk -v a="$BW_CHAIN" -v b="$BW_COPY" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "?" }') (target 80%+)"
grep -c "^kernel " <("$IRTOOL" inspect "$WORK/chain.irx" 2>/dev/null) | sed 's/^/  chain kernels: /' | tee -a "$SUM"

# ---- 3. GEMM ---------------------------------------------------------------------------------------
M=8192
cat > "$WORK/gemm_bf16.ir" <<EOF
graph @gemm_bf16(%a: bf16[$M, $M], %b: bf16[$M, $M]) {
  %y = MatMul(%a, %b) : bf16[$M, $M]
  return %y
}
EOF
cat > "$WORK/gemm_fp8.ir" <<EOF
graph @gemm_fp8(%a: f8e4m3fn[$M, $M], %b: f8e4m3fn[$M, $M]) {
  const %sa: f32[] = [1.0]
  const %sb: f32[] = [1.0]
  %y = irtool.fp8_matmul(%a, %b, %sa, %sb) : f32[$M, $M]
  return %y
}
EOF
log "3. GEMM ${M}^3 through cuBLASLt (not validated: the interpreter would take hours at this size)"
tflops() {
  "$IRTOOL" compile "$WORK/$1.ir" --target "cuda:$SM" -o "$WORK/$1.irx" --no-cache --no-validate >> "$RES/gemm.log" 2>&1 ||
    { log "  $1: compile failed (see gemm.log)" >&2; echo 0; return; }
  local ms
  ms=$("$BENCH" time "$WORK/$1.irx" 20 2>>"$RES/gemm.log" | awk '/compute_ms/ { print $2 }')
  echo "$1 compute_ms ${ms:-?}" >> "$RES/gemm.log"
  awk -v ms="${ms:-0}" -v m=$M 'BEGIN { if (ms > 0) printf "%.0f", 2 * m * m * m / (ms * 1e-3) / 1e12; else print 0 }'
}
TF_BF16=$(tflops gemm_bf16)
TF_FP8=$(tflops gemm_fp8)
log "  bf16: $TF_BF16 TFLOP/s; fp8 e4m3 (incl. the B transpose kernel): $TF_FP8 TFLOP/s; ratio $(awk -v a="$TF_FP8" -v b="$TF_BF16" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "?" }') (target 1.6x+)"

# ---- 4. cold start ----------------------------------------------------------------------------------
MODEL=$SHARED/torch-models/encoder/model.onnx
IN=$SHARED/torch-models/encoder/input_x.npy
if [ -f "$MODEL" ]; then
  log "4. cold start (torch encoder)"
  rm -rf "$XDG_CACHE_HOME"
  t0=$(now); "$IRTOOL" compile "$MODEL" -p "default,fuse" --input "$IN" --target "cuda:$SM" -o "$WORK/enc.irx" > "$RES/cold.log" 2>&1; t1=$(now)
  "$IRTOOL" compile "$MODEL" -p "default,fuse" --input "$IN" --target "cuda:$SM" -o "$WORK/enc2.irx" >> "$RES/cold.log" 2>&1; t2=$(now)
  for i in 1 2 3; do "$BENCH" cold "$WORK/enc.irx" >> "$RES/cold.log" 2>&1; done
  t3=$(now); "$BENCH" cold "$WORK/enc.irx" >> "$RES/cold.log" 2>&1; t4=$(now)
  log "  compile from scratch (with the GPU gate): $(secs "$t0" "$t1") s; compile served by the cache: $(secs "$t1" "$t2") s"
  log "  new process: load cached artifact + first run: $(secs "$t3" "$t4") s wall ($(tail -1 "$RES/cold.log"))"
fi
rm -rf "$WORK"
log "done: $(date -u '+%H:%M:%S UTC')"

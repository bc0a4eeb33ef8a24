#!/usr/bin/env bash
# GPU side of the pack (bench/gpu/pack.sh builds it on a machine with LLVM and ptxas): runs from
# inside the pack on a machine with an NVIDIA GPU, its driver and cuBLASLt (the toolkit's, or a
# Python environment's nvidia/cublas), nothing built there. Meant to finish in under 5 minutes.
#   PACK/run.sh [PART...]      parts: models node figures peers (default: all, in that order)
# Writes $OUT (or PACK/results/): summary.txt, models.log, node.log, figures.log, peers.log.
#  1. models: every packed model's outputs against the interpreter's (f32: rtol 1e-4, atol 1e-5;
#     FP8: cosine >= 0.99 against the f32 model) and PyTorch eager's; the symbolic transformer
#     at two shapes from one artifact
#  2. node: every packed ONNX node test, compared as `irtool conformance` compares (rtol 1e-3,
#     atol 1e-7, NaN equal, integers exact): 'N passed, N failed, N skipped' and the failures
#  3. figures: fused 16-op chain against a device copy (GB/s), 8192^3 GEMM bf16 against FP8
#     E4M3 (TFLOP/s), a new process loading an artifact and answering (load, first run)
#  4. peers: PyTorch eager and torch.compile on the same modules (torch_peers.py)
set -uo pipefail
P=$(cd "$(dirname "$0")" && pwd)
RES=${OUT:-$P/results}
mkdir -p "$RES"
SUM=$RES/summary.txt
RUN=$P/bin/irtool-run
BENCH=$P/bin/gpu_bench
PARTS=${*:-models node figures peers}
: > "$SUM"
log() { echo "$*" | tee -a "$SUM"; }
has() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
JOBS=$(nproc 2>/dev/null || echo 4)

log "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
log "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -1)"
log "pack: $(sed -n 2p "$P/MANIFEST.txt")"
[ -x "$RUN" ] || { log "no $RUN: is this a pack from bench/gpu/pack.sh?"; exit 1; }
# cuBLASLt: the runtime searches the toolkit and Python environments itself; name it when known
if [ -z "${IRTOOL_CUBLASLT:-}" ]; then
  LT=$(python3 -c "import nvidia, os, glob; print(next(iter(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], '*', 'lib', 'libcublasLt.so.*')))), ''))" 2>/dev/null)
  [ -n "$LT" ] && export IRTOOL_CUBLASLT=$LT
fi
log "cublasLt: ${IRTOOL_CUBLASLT:-(runtime search)}"

# ---- 1. models ------------------------------------------------------------------------------------
if has models; then
  log "1. packed models on the GPU"
  : > "$RES/models.log"
  for d in "$P"/models/*/; do
    name=$(basename "$d")
    while IFS='|' read -r ins exps tol ref; do
      args=()
      for i in $ins; do args+=(--input "$d$i"); done
      for e in $exps; do args+=(--expect "${e%%=*}=$d${e#*=}"); done
      # shellcheck disable=SC2086
      out=$(cd "$d" && timeout 120 "$RUN" "$d/model.irx" "${args[@]}" $tol 2>&1); rc=$?
      { echo "== $name: ${ins} against ${ref# } ($tol)"; echo "$out"; } >> "$RES/models.log"
      case $rc in
        0) log "  $name [$(echo $ins)] vs${ref}: PASS $(echo "$out" | grep -o 'cosine similarity [0-9.]*' | head -1)" ;;
        3) log "  $name [$(echo $ins)] vs${ref}: FAIL $(echo "$out" | grep differs | head -1 | cut -c1-200)" ;;
        *) log "  $name [$(echo $ins)] vs${ref}: ERROR (exit $rc) $(echo "$out" | tail -1 | cut -c1-200)" ;;
      esac
    done < "$d/run.txt"
  done
fi

# ---- 2. node tests ---------------------------------------------------------------------------------
node_one() { # TESTDIR -> one line: pass NAME / fail NAME: why
  local d=$1 name=${1#"$P/node/"} args=()
  for f in "$d"/input_*.npy; do [ -e "$f" ] && args+=(--input "$f"); done
  for f in "$d"/expected_*.npy; do [ -e "$f" ] && args+=(--expect "$f"); done
  local out rc
  out=$(timeout 60 "$RUN" "$d/model.irx" "${args[@]}" 2>&1); rc=$?
  case $rc in
    0) echo "pass $name" ;;
    3) echo "fail $name: $(echo "$out" | grep differs | head -1)" ;;
    124) echo "fail $name: timed out after 60 s" ;;
    *) echo "fail $name: exit $rc: $(echo "$out" | tail -1 | cut -c1-300)" ;;
  esac
}
export -f node_one
export RUN P
if has node && [ -d "$P/node" ]; then
  log "2. ONNX node tests on the GPU (rtol 1e-3, atol 1e-7)"
  t0=$(date +%s)
  find "$P/node" -name model.irx -printf '%h\n' | sort | xargs -P "$JOBS" -I{} bash -c 'node_one "$@"' _ {} > "$RES/node.raw"
  # a test with several data sets passes when all of them pass
  sed -E 's#^(pass|fail) ([^/: ]+)(/test_data_set_[0-9]+)?#\1 \2#' "$RES/node.raw" | sort -k2,2 -s > "$RES/node.log"
  rm -f "$RES/node.raw"
  tests=$(awk '{ sub(":", "", $2); print $2 }' "$RES/node.log" | sort -u | wc -l)
  failed=$(awk '$1 == "fail" { sub(":", "", $2); print $2 }' "$RES/node.log" | sort -u | wc -l)
  log "  $((tests - failed)) passed, $failed failed, 0 skipped ($tests packed tests; $(( $(date +%s) - t0 )) s)"
  grep '^fail' "$RES/node.log" | head -40 | sed 's/^/  /' | tee -a "$SUM" > /dev/null
fi

# ---- 3. figures ------------------------------------------------------------------------------------
ms_of() { awk '/compute_ms/ { print $2 }'; }
if has figures; then
  log "3. figures"
  : > "$RES/figures.log"
  N=67108864
  bw() { # artifact -> GB/s (256 MiB read + 256 MiB written per run)
    local ms
    ms=$("$BENCH" time "$1" 50 2>>"$RES/figures.log" | tee -a "$RES/figures.log" | ms_of)
    awk -v ms="${ms:-0}" -v n=$N 'BEGIN { if (ms > 0) printf "%.1f", 2 * n * 4 / (ms * 1e-3) / 1e9; else print 0 }'
  }
  if [ -f "$P/bench/chain.irx" ] && [ -f "$P/bench/copy.irx" ]; then
    BW_CHAIN=$(bw "$P/bench/chain.irx"); BW_COPY=$(bw "$P/bench/copy.irx")
    log "  fused 16-op chain: $BW_CHAIN GB/s; device copy: $BW_COPY GB/s; ratio $(awk -v a="$BW_CHAIN" -v b="$BW_COPY" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "?" }') (target 80%+)"
  fi
  tflops() {
    local ms
    ms=$("$BENCH" time "$1" 20 2>>"$RES/figures.log" | tee -a "$RES/figures.log" | ms_of)
    awk -v ms="${ms:-0}" 'BEGIN { m = 8192; if (ms > 0) printf "%.0f", 2 * m * m * m / (ms * 1e-3) / 1e12; else print 0 }'
  }
  if [ -f "$P/bench/gemm_bf16.irx" ] && [ -f "$P/bench/gemm_fp8.irx" ]; then
    TB=$(tflops "$P/bench/gemm_bf16.irx"); TF=$(tflops "$P/bench/gemm_fp8.irx")
    log "  GEMM 8192^3: bf16 $TB TFLOP/s, FP8 E4M3 $TF TFLOP/s; ratio $(awk -v a="$TF" -v b="$TB" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "?" }') (target 1.6x+)"
  fi
  for m in torch_encoder torch_tiny_mlp; do
    a=$P/models/$m/model.irx
    [ -f "$a" ] || continue
    for _ in 1 2 3 4 5; do "$BENCH" cold "$a" >> "$RES/cold.tmp" 2>&1; done
    log "  new process, $m: $(tail -1 "$RES/cold.tmp") (last of 5; all in figures.log)"
    cat "$RES/cold.tmp" >> "$RES/figures.log"; rm -f "$RES/cold.tmp"
    t0=$(date +%s%N); "$RUN" "$a" --input "$P/models/$m/in0.npy" > /dev/null 2>&1; t1=$(date +%s%N)
    log "  irtool-run $m, whole process (exec, CUDA context, load, run, exit): $(( (t1 - t0) / 1000000 )) ms"
    "$RUN" "$a" --input "$P/models/$m/in0.npy" --repeat 200 2>&1 | grep '^time' | sed "s/^/  $m irtool-run /" | tee -a "$SUM"
  done
fi

# ---- 4. peers ----------------------------------------------------------------------------------------
if has peers; then
  log "4. PyTorch on the same GPU (eager, torch.compile)"
  timeout 240 python3 "$P/torch_peers.py" > "$RES/peers.log" 2>&1 || log "  torch_peers.py failed or timed out: see peers.log"
  grep '^|' "$RES/peers.log" | tee -a "$SUM"
fi
log "done: $(date -u '+%H:%M:%S UTC')"

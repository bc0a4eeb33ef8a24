#!/usr/bin/env bash
# Peer benchmark (issue 8): irtool's interpreter and compiled artifact (irtool compile, then
# irtool bench of the .irx) against onnxruntime (CPU) and PyTorch eager, the artifact and
# onnxruntime at 1 and 2 threads (issue 30; the interpreter and PyTorch at one), measured one
# after another in one run, with the geometric mean of each column, plus a memory-bandwidth probe (STREAM-style triad), a
# fused 16-op elementwise chain over 64 MiB, and cold start (a new process loads a compiled
# tiny_mlp artifact and runs it once, against compiling from scratch).
#
# usage: bench/run_peer_bench.sh BUILD_DIR [ITERATIONS]
#   BUILD_DIR   a Release build holding irtool (LLVM backend enabled)
#   ITERATIONS  timed runs per model, runner and round (default 20; 3 warm-up runs before them)
# Each model runs ROUNDS rounds (environment, default 3) of every runner one after another; the
# report gives each runner's median over its rounds' medians.
# Environment: SHARED (default: ../shared next to the repository), CC (default cc),
#   TMPDIR (inputs, the chain model and the triad binary; default /tmp), THREADS (the thread
#   counts of the artifact and onnxruntime columns, default "1 2"), ONLY (an extended regex: only
#   the models whose label matches, and no bandwidth or cold-start sections).
# MobileNetV2, the causal LM and its decode step (issue 30) are exported by bench/export_models.py
# into bench/models/ on first run (git-ignored: over 1 MB each), which needs /usr/bin/python3 with torch.
# Needs: node 20 with `npm install --ignore-scripts` done in bench/peers (onnxruntime-node),
#   /usr/bin/python3 with torch and numpy for the PyTorch column (skipped when missing).
# Prints a markdown report on stdout; run it on an otherwise idle machine.
set -euo pipefail

BUILD=${1:?usage: run_peer_bench.sh BUILD_DIR [ITERATIONS]}
ITERS=${2:-20}
WARMUP=3
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-1 2}
ONLY=${ONLY:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PEERS=$HERE/peers
SHARED=${SHARED:-$(cd "$ROOT/.." && pwd)/shared}
IRTOOL=$(cd "$BUILD" && pwd)/irtool
CC=${CC:-cc}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/peer_bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

[ -x "$IRTOOL" ] || { echo "run_peer_bench: $IRTOOL not found (build first)" >&2; exit 1; }
HAVE_ORT=0
if command -v node >/dev/null && [ -d "$PEERS/node_modules/onnxruntime-node" ]; then HAVE_ORT=1
else echo "run_peer_bench: onnxruntime-node missing (cd bench/peers && npm install --ignore-scripts); column skipped" >&2; fi
HAVE_TORCH=0
if /usr/bin/python3 -c "import torch, numpy" 2>/dev/null; then HAVE_TORCH=1
else echo "run_peer_bench: /usr/bin/python3 lacks torch/numpy; PyTorch column skipped" >&2; fi

field() { sed -n "s/.*\"\?$1\"\?[=:] *\([0-9.][0-9.]*\).*/\1/p" | head -1; }
fmt3() { awk '{ if ($1 ~ /^[0-9.]+$/) printf "%.3f\n", $1; else print }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else printf "-" }'; }

# irtool bench on the interpreter: MODEL INPUT... -> median ms, or "error"
run_interp() {
    local model=$1; shift
    local args=() out
    for i in "$@"; do args+=(--input "$i"); done
    if out=$("$IRTOOL" bench "$model" --backend interp "${args[@]}" --iterations "$ITERS" --warmup "$WARMUP" --threads 1 2>&1); then
        echo "$out" | field median_ms
    else
        echo "$out" | tail -3 >&2
        echo "error"
    fi
}

# The compiled artifact: `irtool compile` (validation gate included, a fresh cache, so a real
# compile; its seconds go to $WORK/compile.txt) into $WORK/model.irx: MODEL INPUT... -> nothing,
# or "unsupported: OP" / "error"
compile_model() {
    local model=$1; shift
    local args=() out
    for i in "$@"; do args+=(--input "$i"); done
    rm -rf "$WORK/cache" "$WORK/model.irx"
    if ! out=$("$IRTOOL" compile "$model" "${args[@]}" --target cpu --cache-dir "$WORK/cache" -o "$WORK/model.irx" 2>&1); then
        if echo "$out" | grep -q "does not support"; then
            echo "unsupported: $(echo "$out" | sed -n 's/.*does not support \([^ ]*\).*/\1/p' | head -1)"
        else
            echo "$out" | tail -3 >&2
            echo "error"
        fi
        return
    fi
    echo "$out" | sed -n 's/^compiled .*, \([0-9.]*\) s)$/\1/p' | head -1 > "$WORK/compile.txt"
}

# `irtool bench` of $WORK/model.irx through libirtool-runtime: THREADS INPUT... -> median ms, or "error"
run_compiled() {
    local threads=$1; shift
    local args=() out
    for i in "$@"; do args+=(--input "$i"); done
    if out=$("$IRTOOL" bench "$WORK/model.irx" "${args[@]}" --iterations "$ITERS" --warmup "$WARMUP" --threads "$threads" 2>&1); then
        echo "$out" | field median_ms
    else
        echo "$out" | tail -3 >&2
        echo "error"
    fi
}

# The middle value of numbers (a lone non-number, e.g. "error", is passed through).
middle() {
    local nums
    nums=$(printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g)
    if [ -z "$nums" ]; then printf '%s\n' "$@" | head -1; return; fi
    echo "$nums" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

run_ort() {  # THREADS MODEL INPUT...
    [ $HAVE_ORT = 1 ] || { echo "-"; return; }
    local threads=$1 model=$2; shift 2
    local args=() out
    for i in "$@"; do args+=(--input "$i"); done
    if out=$(node "$PEERS/ort_bench.js" "$model" "${args[@]}" --iterations "$ITERS" --warmup "$WARMUP" --threads "$threads" 2>/dev/null); then
        echo "$out" | field median_ms | fmt3
    else echo "error"; fi
}

run_torch() {
    [ $HAVE_TORCH = 1 ] || { echo "-"; return; }
    local name=$1 model=$2 input=$3 out
    if out=$(/usr/bin/python3 "$PEERS/torch_bench.py" "$SHARED/torch-models/export.py" "$name" "$input" \
                 --onnx "$model" --iterations "$ITERS" --warmup "$WARMUP" 2>/dev/null); then
        echo "$out" | field median_ms | fmt3
    else echo "error"; fi
}

# The artifact's outputs (irtool run -o) against a reference .npy written by PyTorch eager:
# OUTPUT_NAME REF.npy INPUT... -> "ok", "differs" or "error" (tolerance as the validation gate's)
check_eager() {
    local name=$1 ref=$2; shift 2
    local args=()
    for i in "$@"; do args+=(--input "$i"); done
    rm -rf "$WORK/out"
    "$IRTOOL" run "$WORK/model.irx" "${args[@]}" -o "$WORK/out" >/dev/null 2>&1 || { echo error; return; }
    /usr/bin/python3 -c "import numpy as np, sys
a, b = np.load('$WORK/out/$name.npy'), np.load('$ref')
sys.exit(0 if a.shape == b.shape and np.all(np.abs(a - b) <= 1e-5 + 1e-4 * np.abs(b)) else 1)" 2>/dev/null &&
        echo ok || echo differs
}

ROWS=()
EAGER_NOTES=()
GEO_COLS=()  # per row: the numeric columns' values, tab-separated, for the geometric means
bench_model() {  # LABEL MODEL TORCH_NAME(or -) SHAPE INPUT_SPEC...
    local label=$1 model=$2 tname=$3 shape=$4; shift 4
    if [ -n "$ONLY" ] && ! [[ $label =~ $ONLY ]]; then return; fi
    echo "  $label ..." >&2
    local interp llvm_compile torch cstate t i
    local files=(); for s in "$@"; do files+=("${s#*=}"); done
    : > "$WORK/compile.txt"
    cstate=$(compile_model "$model" "$@")
    llvm_compile=$(cat "$WORK/compile.txt")
    if [ "$label" = decode_step ] && [ -z "$cstate" ]; then
        EAGER_NOTES+=("decode_step: the artifact's logits against PyTorch eager (bench/models/decode_step_logits.npy): $(check_eager logits "$MODELS/decode_step_logits.npy" "$@")")
    fi
    # ROUNDS rounds, each runner once per round, one after another (the thread counts of one
    # runner back to back): the median of each runner's per-round medians (a burst of load from
    # other tenants then hits all runners alike)
    local ri=() rt=()
    local -A rl=() ro=()
    for _ in $(seq "$ROUNDS"); do
        ri+=("$(run_interp "$model" "$@")")
        for t in $THREADS; do
            if [ -n "$cstate" ]; then rl[$t]+="$cstate"$'\n'; else rl[$t]+="$(run_compiled "$t" "$@")"$'\n'; fi
        done
        for t in $THREADS; do ro[$t]+="$(run_ort "$t" "$model" "$@")"$'\n'; done
        if [ "$tname" != - ]; then rt+=("$(run_torch "$tname" "$model" "${files[0]}")"); else rt+=("n/a"); fi
    done
    interp=$(middle "${ri[@]}"); torch=$(middle "${rt[@]}")
    local row="| $label | $shape | $interp |" geo="$interp" llvm1=
    for t in $THREADS; do
        local l o vals
        mapfile -t vals <<< "${rl[$t]%$'\n'}"; l=$(middle "${vals[@]}")
        mapfile -t vals <<< "${ro[$t]%$'\n'}"; o=$(middle "${vals[@]}")
        [ -n "$llvm1" ] || llvm1=$l
        row+=" $l | $o | $(ratio "$l" "$o") |"
        geo+=$'\t'"$l"$'\t'"$o"$'\t'"$(ratio "$l" "$o")"
    done
    ROWS+=("$row ${llvm_compile:--} | $torch | $(ratio "$interp" "$llvm1") |")
    GEO_COLS+=("$geo")
}

# The geometric-mean row: each numeric column's geometric mean over the rows where it is a
# number (the ratio columns: over the models both runners ran), with the count when rows are
# missing.
geomean_row() {
    printf '%s\n' "${GEO_COLS[@]}" | awk -F'\t' -v nt="$1" '
        { for (c = 1; c <= NF; c++) if ($c ~ /^[0-9.]+$/ && $c > 0) { s[c] += log($c); n[c]++ } rows++ }
        END {
            out = "| geometric mean | |"
            for (c = 1; c <= 1 + 3 * nt; c++) {
                v = n[c] ? sprintf(c == 1 || (c - 1) % 3 ? "%.3f" : "%.2f", exp(s[c] / n[c])) : "-"
                if (n[c] && n[c] < rows) v = v " (" n[c] ")"
                out = out " " (c > 1 && (c - 1) % 3 == 0 ? "**" v "**" : v) " |"
            }
            print out " | | |"
        }'
}

# CPU time on the whole machine (jiffies, USER_HZ) vs this script's children: the difference is
# load from other processes during the run, reported below so a contaminated run is visible.
busy_jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
BUSY0=$(busy_jiffies); T0=$(date +%s.%N)
CPU_MODEL=$(lscpu | sed -n 's/^Model name: *//p')
CPU_FLAGS=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -x -E 'avx2|fma|avx512f|avx512_bf16|amx_tile|amx_bf16' | tr '\n' ' ')
echo "run_peer_bench: $CPU_MODEL (${CPU_FLAGS:-none of avx2 fma avx512f avx512_bf16 amx}), $ITERS iterations, $WARMUP warm-up, threads: $THREADS" >&2
for m in tiny_mlp convnet encoder; do
    d=$SHARED/torch-models/$m
    shape=$(/usr/bin/python3 -c "import numpy as np; print('x'.join(map(str, np.load('$d/input_x.npy').shape)))" 2>/dev/null || echo "?")
    bench_model "$m" "$d/model.onnx" "$m" "$shape" "x=$d/input_x.npy"
done
node "$PEERS/gen_npy.js" 1x3x224x224 "$WORK/in_1x3x224x224.npy"
for m in resnet50 squeezenet bvlc_alexnet; do
    bench_model "light_$m" "$SHARED/onnx-tests/light/light_$m.onnx" - 1x3x224x224 "$WORK/in_1x3x224x224.npy"
done
MODELS=$HERE/models
if [ ! -f "$MODELS/mobilenetv2.onnx" ] || [ ! -f "$MODELS/causal_lm.onnx" ] || [ ! -f "$MODELS/decode_step.onnx" ]; then
    echo "  exporting MobileNetV2, the causal LM and its decode step (bench/export_models.py) ..." >&2
    /usr/bin/python3 "$HERE/export_models.py" "$MODELS" >/dev/null 2>&1 ||
        echo "run_peer_bench: bench/export_models.py failed (needs /usr/bin/python3 with torch); rows skipped" >&2
fi
[ -f "$MODELS/mobilenetv2.onnx" ] && bench_model mobilenetv2 "$MODELS/mobilenetv2.onnx" - 1x3x64x64 "x=$MODELS/mobilenetv2_x.npy"
[ -f "$MODELS/causal_lm.onnx" ] && bench_model causal_lm "$MODELS/causal_lm.onnx" - "1x32 int64" "x=$MODELS/causal_lm_x.npy"
if [ -f "$MODELS/decode_step.onnx" ]; then
    DECODE_IN=("x=$MODELS/decode_step_x.npy")
    for l in 0 1 2 3; do
        DECODE_IN+=("past_key_$l=$MODELS/decode_step_past_key_$l.npy" "past_value_$l=$MODELS/decode_step_past_value_$l.npy")
    done
    bench_model decode_step "$MODELS/decode_step.onnx" - "1x1 int64, KV 4x1x4x31x32" "${DECODE_IN[@]}"
fi

if [ -z "$ONLY" ]; then
# Memory bandwidth: STREAM-style triad, then a 16-op elementwise chain over 64 MiB (f32[16M]).
echo "  triad, fused chain ..." >&2
"$CC" -O3 -march=native -o "$WORK/triad" "$PEERS/triad.c"
TRIAD_JSON=$("$WORK/triad")
TRIAD_GBS=$(echo "$TRIAD_JSON" | field gb_s)
TRIAD_MS=$(echo "$TRIAD_JSON" | field best_ms)
N=16777216
OPS=(Add Mul Relu Sub Mul Add Neg Relu Add Mul Sub Relu Add Mul Neg Add)
{
    echo "graph @chain16(%x: f32[$N]) {"
    for i in "${!OPS[@]}"; do echo "  const %c$i: f32[] = [1.$((i + 1))]"; done
    prev=%x
    for i in "${!OPS[@]}"; do
        case ${OPS[$i]} in
            Relu|Neg) echo "  %v$i = ${OPS[$i]}($prev) : f32[$N]" ;;
            *) echo "  %v$i = ${OPS[$i]}($prev, %c$i) : f32[$N]" ;;
        esac
        prev=%v$i
    done
    echo "  return $prev"
    echo "}"
} > "$WORK/chain16.ir"
"$IRTOOL" opt "$WORK/chain16.ir" -p fuse -o "$WORK/chain16.fused.ir"
NGROUPS=$("$IRTOOL" info "$WORK/chain16.fused.ir" | sed -n 's/^ *fused groups *//p')
CHAIN_OUT=$("$IRTOOL" bench "$WORK/chain16.fused.ir" --backend llvm --iterations "$ITERS" --warmup "$WARMUP" --threads 1)
CHAIN_MS=$(echo "$CHAIN_OUT" | field median_ms)
CHAIN_MIN=$(echo "$CHAIN_OUT" | field min_ms)
CHAIN_KERNELS=$(echo "$CHAIN_OUT" | sed -n 's/.*kernels=\([0-9]*\).*/\1/p')
CHAIN_UNFUSED_MS=$("$IRTOOL" bench "$WORK/chain16.ir" --backend llvm --iterations "$ITERS" --warmup "$WARMUP" --threads 1 | field median_ms)
CHAIN_INTERP_MS=$("$IRTOOL" bench "$WORK/chain16.ir" --backend interp --iterations 5 --warmup 1 | field median_ms)
BYTES=$((2 * N * 4))  # read x once, write the result once
PASS_BYTES=$((${#OPS[@]} * 2 * N * 4))  # each op reads and writes 64 MiB when run as its own kernel
gbs_pass() { awk -v b=$PASS_BYTES -v ms="$1" 'BEGIN { printf "%.2f", b / (ms * 1e-3) / 1e9 }'; }
gbs() { awk -v b=$BYTES -v ms="$1" 'BEGIN { printf "%.2f", b / (ms * 1e-3) / 1e9 }'; }
frac() { awk -v g="$1" -v t="$TRIAD_GBS" 'BEGIN { printf "%.1f%%", 100 * g / t }'; }

# Cold start: a new process loads the cached tiny_mlp artifact, runs it once and exits
# (examples/run_artifact, linked against libirtool-runtime only), against compiling from scratch
# in a new process (`irtool run --backend llvm`: import, specialize, codegen, JIT, run once) and
# against a process that does nothing (/bin/true). Mean wall time of COLD_N runs each.
echo "  cold start ..." >&2
COLD_N=${COLD_N:-20}
TM=$SHARED/torch-models/tiny_mlp
RUNART=$(cd "$BUILD" && pwd)/run_artifact
mean_ms() {  # mean wall ms of COLD_N runs of the command
    local t0 t1
    t0=$(date +%s%N)
    for _ in $(seq "$COLD_N"); do "$@" >/dev/null 2>&1 || return 1; done
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" -v n="$COLD_N" 'BEGIN { printf "%.2f", (b - a) / n / 1e6 }'
}
COLD_ROW="| - | - | - | - | - |"
if [ -x "$RUNART" ] && "$IRTOOL" compile "$TM/model.onnx" --input "x=$TM/input_x.npy" --target cpu -o "$WORK/tiny.irx" \
        --cache-dir "$WORK/cache" >/dev/null 2>&1; then
    COLD_TRUE=$(mean_ms /bin/true)
    COLD_ART=$(mean_ms "$RUNART" "$WORK/tiny.irx")
    COLD_SCRATCH=$(mean_ms "$IRTOOL" run "$TM/model.onnx" --backend llvm --input "x=$TM/input_x.npy")
    COLD_BLAS=$(sed -n 's/^blas //p' < <("$IRTOOL" inspect "$WORK/tiny.irx"))
    COLD_ROW="| $COLD_TRUE | $COLD_ART | $COLD_SCRATCH | $(ratio "$COLD_SCRATCH" "$COLD_ART") | ${COLD_BLAS:-?} |"
fi
fi

BUSY1=$(busy_jiffies); T1=$(date +%s.%N)
times > "$WORK/times.txt"  # in this shell: in a $(...) subshell, times reports zero
OWN=$(awk '{ for (f = 1; f <= 2; f++) { split($f, m, "m"); sub("s", "", m[2]); t += m[1] * 60 + m[2] } } END { print t }' "$WORK/times.txt")
OTHER=$(awk -v b0="$BUSY0" -v b1="$BUSY1" -v own="$OWN" -v t0="$T0" -v t1="$T1" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { o = (b1 - b0) / hz - own; if (o < 0) o = 0; printf "%.0f%%", 100 * o / (t1 - t0) }')
echo "run_peer_bench: other processes used $OTHER of one core on average during the run" >&2

NT=0; HEAD=""; SEP=""
for t in $THREADS; do
    NT=$((NT + 1))
    HEAD+=" compiled ms, $t thr | onnxruntime ms, $t thr | compiled / onnxruntime, $t thr |"; SEP+="---:|---:|---:|"
done
cat <<EOF2
## Peer benchmark

$(date -u +%Y-%m-%d), $(nproc) cores ($CPU_MODEL, $(free -g | awk '/^Mem:/ {print $2}') GiB; flags: ${CPU_FLAGS:-none of avx2 fma avx512f avx512_bf16 amx}), irtool $("$IRTOOL" --version | awk '{print $2}') Release,
onnxruntime-node $( [ $HAVE_ORT = 1 ] && node -p "require('$PEERS/node_modules/onnxruntime-node/package.json').version" || echo "-") (CPU EP, intra-op threads as the column says, inter-op 1),
PyTorch $( [ $HAVE_TORCH = 1 ] && /usr/bin/python3 -c "import torch; print(torch.__version__)" || echo "-") eager (set_num_threads(1), no_grad).
Median over $ROUNDS rounds of the median of $ITERS runs after $WARMUP warm-up runs, in-process, wall
clock; in each round the runners were measured one after another (\`bench/run_peer_bench.sh $BUILD\`); other processes used $OTHER of one core
on average during the run (whole-machine CPU time minus this script's; near 0% on an idle machine).

| model | input | interp ms |$HEAD compile s | PyTorch eager ms | interp / compiled |
|---|---|---:|$SEP---:|---:|---:|
$(printf '%s\n' "${ROWS[@]}")
$(geomean_row "$NT")
$( [ ${#EAGER_NOTES[@]} = 0 ] || printf '\n%s\n' "${EAGER_NOTES[@]}")

PyTorch "n/a": no PyTorch module for that model (the light_* models exist only as ONNX; mobilenetv2,
causal_lm and decode_step are bench/export_models.py's, timed here as ONNX only).
compiled: the .irx artifact of \`irtool compile MODEL --target cpu\` (host CPU), run by \`irtool
bench\` through libirtool-runtime; compile s: that compile's wall time with its validation gate
(the interpreter and the artifact run once on the inputs), from an empty cache.
irtool bench runs with --threads N (N threads for OpenBLAS and for the generated kernels' pool;
the interpreter with one); onnxruntime with intraOpNumThreads N. The geometric mean of a column
is taken over the rows where it is a number ((n): over n rows only).
Conv, Gemm/MatMul of 1-4 rows and, on AVX2, of 5-128 rows with constant weights run in generated code where the rules of docs/cpu_speed.md choose it (AVX-512 and AVX2 hosts).
EOF2
[ -z "$ONLY" ] || exit 0
cat <<EOF3

### Memory bandwidth

| probe | ms | effective GB/s | of triad | per-op traffic GB/s |
|---|---:|---:|---:|---:|
| triad a = b + s*c, 3 x 64 MiB, best of 5 (cc -O3 -march=native) | $TRIAD_MS | $TRIAD_GBS | 100% | - |
| 16-op elementwise chain, f32[16M], \`opt -p fuse\` ($NGROUPS fused group), llvm, $CHAIN_KERNELS kernels | $CHAIN_MS | $(gbs "$CHAIN_MS") | $(frac "$(gbs "$CHAIN_MS")") | $(gbs_pass "$CHAIN_MS") |
| the same fused chain, best of $ITERS (the triad figure is a best of 5) | $CHAIN_MIN | $(gbs "$CHAIN_MIN") | $(frac "$(gbs "$CHAIN_MIN")") | $(gbs_pass "$CHAIN_MIN") |
| same chain without \`opt -p fuse\`, llvm (the backend fuses elementwise chains itself) | $CHAIN_UNFUSED_MS | $(gbs "$CHAIN_UNFUSED_MS") | $(frac "$(gbs "$CHAIN_UNFUSED_MS")") | $(gbs_pass "$CHAIN_UNFUSED_MS") |
| same chain unfused, interp (median of 5) | $CHAIN_INTERP_MS | $(gbs "$CHAIN_INTERP_MS") | $(frac "$(gbs "$CHAIN_INTERP_MS")") | $(gbs_pass "$CHAIN_INTERP_MS") |

Effective GB/s: 2 x 64 MiB (the input read once, the output written once) over the median time,
what a single fused kernel would have to move. Per-op traffic GB/s: 16 x 2 x 64 MiB over the same
time, what the run actually moves when every op reads and writes a whole 64 MiB tensor. The fused
group is one kernel (see the kernel count): one pass over memory. irtool bench reuses its output
tensors between iterations (llvm_program_run_into) and the program keeps its workspace, as a
serving loop would; the triad probe likewise reuses its arrays.

### Cold start (tiny_mlp, mean of $COLD_N new processes)

| /bin/true ms | load artifact + run once ms | compile from scratch + run ms (\`irtool run --backend llvm\`) | scratch / artifact | artifact loads BLAS (manifest \`blas\`) |
|---:|---:|---:|---:|---:|
$COLD_ROW
EOF3

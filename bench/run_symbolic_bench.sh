#!/usr/bin/env bash
# Run-time shapes against static shapes (issue 25): each model is compiled from one ONNX file
# static (`--input` binds B and S to the bench shape), symbolic (no --input, no bounds: dims
# evaluated at run time, values placed in the workspace per binding) and, for comparison,
# symbolic with bounds (`-p shape-infer{B=1:16,S=1:256}`: the workspace planned once for the
# largest binding). The artifacts are timed with `irtool bench` at the same shape, the order
# rotated each round, ROUNDS rounds in one run. The report gives each artifact's median over the
# rounds of its median per-run thread CPU time (median_cpu_ms, steadier than wall time on a
# shared machine; the wall ratio beside it) and the ratios to static, with the machine (CPU
# model, AVX-512 and AMX flags).
#
# usage: bench/run_symbolic_bench.sh BUILD_DIR [ITERATIONS]
#   BUILD_DIR   a Release build holding irtool (LLVM backend enabled)
#   ITERATIONS  timed runs per artifact and round (default 30; 3 warm-up runs before them)
# Environment: ROUNDS (default 5), THREADS (irtool bench --threads, default 1), TMPDIR.
# Models: the ../shared/torch-models encoder as exported with dynamic axes
#   (corpus/torch/encoder_dynamic: the same weights) at [8, 128, 32], and a 4-layer causal
#   decoder stack exported by bench/decoder_stack.py at [4, 128, 64] (needs /usr/bin/python3
#   with torch and numpy; skipped without them).
set -euo pipefail

BUILD=${1:?usage: run_symbolic_bench.sh BUILD_DIR [ITERATIONS]}
ITERS=${2:-30}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
IRTOOL=$(cd "$BUILD" && pwd)/irtool
PY=/usr/bin/python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/symbolic_bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
[ -x "$IRTOOL" ] || { echo "run_symbolic_bench: $IRTOOL not found (build first)" >&2; exit 1; }
$PY -c "import numpy" 2>/dev/null || { echo "run_symbolic_bench: $PY lacks numpy (apt-get install python3-numpy)" >&2; exit 1; }

flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { case " $flags " in *" $1 "*) echo yes ;; *) echo no ;; esac; }
echo "# Run-time shapes against static shapes"
echo
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; avx512f $(has avx512f), amx_tile $(has amx_tile)"
echo "irtool bench: $ITERS runs after 3 warm-up, $ROUNDS rounds, --threads $THREADS; $(date -u +%Y-%m-%d)"
echo

# model name, onnx file, input shape (comma-separated)
models=("encoder|$ROOT/corpus/torch/encoder_dynamic/model.onnx|8,128,32")
if $PY -c "import torch" 2>/dev/null; then
    $PY "$HERE/decoder_stack.py" "$WORK/decoder" >/dev/null
    models+=("decoder x4|$WORK/decoder/model.onnx|4,128,64")
else
    echo "run_symbolic_bench: $PY lacks torch; the decoder stack is skipped" >&2
fi

# median of the numbers on stdin
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "| model | shape | static ms | symbolic ms | symbolic / static | bounded ms | bounded / static | symbolic / static (wall) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for m in "${models[@]}"; do
    IFS='|' read -r name onnx shape <<<"$m"
    d=$WORK/$(echo "$name" | tr -c 'a-z0-9\n' '_')
    mkdir -p "$d"
    $PY -c "import numpy as np; np.random.seed(1); np.save('$d/x.npy', np.random.rand($shape).astype(np.float32))"
    "$IRTOOL" compile "$onnx" --input "x=$d/x.npy" --no-cache --quiet -o "$d/static.irx" >/dev/null
    "$IRTOOL" compile "$onnx" --no-cache --quiet -o "$d/symbolic.irx" >/dev/null
    "$IRTOOL" compile "$onnx" -p 'shape-infer{B=1:16,S=1:256}' --no-cache --quiet -o "$d/bounded.irx" >/dev/null
    : >"$d/static.txt"
    : >"$d/symbolic.txt"
    : >"$d/bounded.txt"
    for r in $(seq 1 "$ROUNDS"); do
        case $((r % 3)) in
        1) order="static symbolic bounded" ;;
        2) order="symbolic bounded static" ;;
        *) order="bounded static symbolic" ;;
        esac
        for k in $order; do
            "$IRTOOL" bench "$d/$k.irx" --input "x=$d/x.npy" --iterations "$ITERS" --warmup 3 --threads "$THREADS" |
                sed -n 's/^median_ms=\([0-9.]*\) .*median_cpu_ms=\([0-9.]*\).*/\1 \2/p' >>"$d/$k.txt"
        done
    done
    sc=$(awk '{print $2}' "$d/static.txt" | median); yc=$(awk '{print $2}' "$d/symbolic.txt" | median)
    bc=$(awk '{print $2}' "$d/bounded.txt" | median)
    sw=$(awk '{print $1}' "$d/static.txt" | median); yw=$(awk '{print $1}' "$d/symbolic.txt" | median)
    awk -v n="$name" -v s="[${shape//,/, }]" -v sc="$sc" -v yc="$yc" -v bc="$bc" -v sw="$sw" -v yw="$yw" \
        'BEGIN {printf "| %s | %s | %.3f | %.3f | %.2fx | %.3f | %.2fx | %.2fx |\n", n, s, sc, yc, yc / sc, bc, bc / sc, yw / sw}'
done

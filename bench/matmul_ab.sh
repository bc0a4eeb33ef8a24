#!/usr/bin/env bash
# A/B of two irtool builds on single linear layers: for each shape M x K x N, a graph
# MatMul(x [M, K], W [K, N] constant) + bias Add is compiled by each build (irtool compile
# --target cpu) and the two artifacts are timed alternately (`irtool bench`), ROUNDS rounds;
# prints each build's median of its rounds' medians and B / A. Used to fit the rule of the
# packed-B GEMM on AVX2 (docs/cpu_speed.md): A a build with the BLAS path, B one with the other.
#
# usage: bench/matmul_ab.sh BUILD_A BUILD_B [M,K,N ...]
# Environment: THREADS (default 1), ROUNDS (default 5). Needs python3 (stdlib) for the weights.
set -euo pipefail
A=$(cd "${1:?usage: matmul_ab.sh BUILD_A BUILD_B [M,K,N ...]}" && pwd)/irtool
B=$(cd "${2:?usage: matmul_ab.sh BUILD_A BUILD_B [M,K,N ...]}" && pwd)/irtool
shift 2
SHAPES=("$@")
[ ${#SHAPES[@]} -gt 0 ] || SHAPES=(8,128,512 32,128,512 32,512,128 32,128,1024 48,256,256 64,768,768 64,768,3072
                                   96,768,768 128,768,768 128,768,3072 256,768,768 16,4096,1024)
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-5}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/matmul_ab.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "-" }'; }

echo "MatMul + bias A/B, $(lscpu | sed -n 's/^Model name: *//p'), $THREADS thread(s), $ROUNDS rounds, $(date -u +%Y-%m-%d)"
echo "A: $A"
echo "B: $B"
echo
echo "| M x K x N | A ms | B ms | B / A |"
echo "|---|---:|---:|---:|"
for s in "${SHAPES[@]}"; do
    IFS=, read -r m k n <<<"$s"
    python3 - "$m" "$k" "$n" >"$WORK/m.ir" <<'PY'
import base64, random, struct, sys
m, k, n = map(int, sys.argv[1:4])
rng = random.Random(1)
def b64(c): return base64.b64encode(struct.pack('<%df' % c, *[rng.uniform(-0.1, 0.1) for _ in range(c)])).decode()
print(f'graph @mm(%x: f32[{m}, {k}]) {{\n  const %w: f32[{k}, {n}] = base64 "{b64(k * n)}"\n'
      f'  const %b: f32[{n}] = base64 "{b64(n)}"\n  %h = MatMul(%x, %w) : f32[{m}, {n}]\n'
      f'  %y = Add(%h, %b) : f32[{m}, {n}]\n  return %y\n}}')
PY
    "$A" compile "$WORK/m.ir" --target cpu --no-cache --no-validate -o "$WORK/A.irx" >/dev/null
    "$B" compile "$WORK/m.ir" --target cpu --no-cache --no-validate -o "$WORK/B.irx" >/dev/null
    iters=$(awk -v w="$((m * k * n))" 'BEGIN { i = int(1e9 / w); print (i < 200 ? 200 : (i > 3000 ? 3000 : i)) }')
    : >"$WORK/A.ms"
    : >"$WORK/B.ms"
    for ((r = 0; r < ROUNDS; r++)); do
        "$A" bench "$WORK/A.irx" --iterations "$iters" --threads "$THREADS" | sed -n 's/^median_ms=\([0-9.]*\).*/\1/p' >>"$WORK/A.ms"
        "$B" bench "$WORK/B.irx" --iterations "$iters" --threads "$THREADS" | sed -n 's/^median_ms=\([0-9.]*\).*/\1/p' >>"$WORK/B.ms"
    done
    ma=$(median <"$WORK/A.ms")
    mb=$(median <"$WORK/B.ms")
    echo "| $m x $k x $n | $ma | $mb | $(awk -v a="$ma" -v b="$mb" 'BEGIN { printf "%.2f", b / a }') |"
done

#!/bin/sh
# Render-time benchmark for `irtool viz` (issue 7): synthetic graphs of 1k, 10k and 50k nodes
# (bench/gen_graph), plain and after `shape-infer,fuse`, each drawn by default (auto-collapse
# above 2000 nodes), with --collapse, and open (up to OPEN_MAX nodes, default 5000: dot is roughly quadratic, 10k open takes minutes). Prints a markdown table.
# usage: bench/run_viz_bench.sh BUILD_DIR [OPEN_MAX]   (BUILD_DIR configured with IRTOOL_BUILD_BENCH=ON)
set -eu
build=${1:?usage: run_viz_bench.sh BUILD_DIR [OPEN_MAX]}
open_max=${2:-5000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
files=
for n in 1000 10000 50000; do
    "$build/bench/gen_graph" "$n" "$tmp/g$n.ir" >/dev/null
    "$build/irtool" opt "$tmp/g$n.ir" -p shape-infer,fuse -o "$tmp/g$n.fused.ir"
    files="$files $tmp/g$n.ir $tmp/g$n.fused.ir"
done
# shellcheck disable=SC2086
"$build/bench/bench_viz" --open-max "$open_max" $files

#!/bin/sh
# Runs the IR core benchmark (issue 2) and the pass pipeline benchmark (issue 4): generates
# 10k, 100k and 1M-node text graphs into a temporary directory, times them with bench_ir and
# bench_passes and prints the markdown tables.
#   usage: bench/run_ir_bench.sh BUILD_DIR [JSON_OUT]
# Builds nothing: BUILD_DIR must hold bench/gen_graph and bench/bench_ir. Takes about 1-3
# minutes and needs ~2.5 GiB free in $TMPDIR (the 1 GiB weight file is written and deleted).
set -eu
if [ $# -lt 1 ] || [ ! -x "$1/bench/bench_ir" ] || [ ! -x "$1/bench/gen_graph" ] || [ ! -x "$1/bench/bench_passes" ]; then
  echo "usage: $0 BUILD_DIR [JSON_OUT]   (BUILD_DIR/bench/{gen_graph,bench_ir,bench_passes} must exist)" >&2
  exit 2
fi
build=$1
json=${2:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/irbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
for n in 10000 100000 1000000; do
  "$build/bench/gen_graph" "$n" "$tmp/g$n.ir"
done
set -- --tmp "$tmp" --weights 1,64,1024
if [ -n "$json" ]; then set -- "$@" --json "$json"; fi
"$build/bench/bench_ir" "$@" "$tmp/g10000.ir" "$tmp/g100000.ir" "$tmp/g1000000.ir"
echo
"$build/bench/bench_passes" "$tmp/g10000.ir" "$tmp/g100000.ir" "$tmp/g1000000.ir"

#!/bin/sh
# Regenerates docs/ops.md, the op support matrix, from the op and backend tables.
# usage: scripts/gen_ops_doc.sh [PATH/TO/irtool]   (default build/irtool)
set -eu
cd "$(dirname "$0")/.."
irtool=${1:-build/irtool}
"$irtool" ops --markdown > docs/ops.md.tmp
mv docs/ops.md.tmp docs/ops.md
echo "wrote docs/ops.md"

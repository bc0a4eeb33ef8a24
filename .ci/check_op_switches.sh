#!/usr/bin/env bash
# No switch over op ids in backend/ (docs/architecture.md, "Where an op's story lives"): what an
# op does there is a row of a table keyed by op id (an X-macro .def file, or an array indexed
# by op id in the family's file) naming the op's functions. Fails on every `case IR_OP_` in
# backend/ outside *.def files and the files ALLOWED names below, printing FILE:LINE.
set -euo pipefail
cd "$(dirname "$0")/.."

# Files that may still switch on op ids, each with why (none today).
ALLOWED=()

files=$(git ls-files 'backend/*.c' 'backend/*.h' 2>/dev/null || find backend -name '*.[ch]')
bad=0
n=0
for f in $files; do
    n=$((n + 1))
    for a in "${ALLOWED[@]}"; do [[ $f == "$a" ]] && continue 2; done
    if hits=$(grep -nE 'case[[:space:]]+IR_OP_' "$f"); then
        while IFS= read -r h; do echo "$f:${h%%:*}: a switch over op ids (make it a column of the op's table row)"; done <<<"$hits"
        bad=1
    fi
done
if [[ $bad -ne 0 ]]; then
    echo "check_op_switches: op-id switches in backend/ (see docs/architecture.md)" >&2
    exit 1
fi
echo "check_op_switches: $n backend files have no switch over op ids (${#ALLOWED[@]} allowed)"

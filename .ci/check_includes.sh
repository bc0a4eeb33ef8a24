#!/usr/bin/env bash
# The include rules of docs/architecture.md, checked on every C file: each folder lists the
# project headers (by path prefix) it must not include, and whether LLVM's C API is allowed.
# Prints every broken rule as FILE:LINE: ... and exits 1 when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."

# folder | forbidden include prefixes (space-separated) | llvm-c allowed (yes/no)
RULES=(
  "ir/|validate/ passes/ viz/ backend/ tools/|no"
  "validate/|passes/ viz/ backend/ tools/|no"
  "passes/|viz/ backend/ tools/|no"
  "viz/|passes/ backend/ tools/|no"
  "backend/lower/|backend/llvm/ backend/cpu/ backend/cuda/ backend/artifact/ backend/runtime/ viz/ tools/|no"
  "backend/llvm/|backend/cpu/ backend/cuda/ backend/artifact/ viz/ tools/|yes"
  "backend/cpu/|backend/cuda/ backend/artifact/ viz/ tools/|yes"
  "backend/cuda/|backend/cpu/ backend/artifact/ viz/ tools/|yes"
  "backend/artifact/|viz/ tools/|yes"
  "backend/runtime/|backend/lower/ backend/llvm/ backend/cpu/ backend/cuda/ backend/artifact/ backend/backend.h passes/ validate/ viz/ tools/ ir/ir_internal.h ir/infer.h|no"
  "backend/backend.h|backend/lower/ backend/llvm/ backend/cpu/ backend/cuda/ backend/artifact/ viz/ tools/|no"
)

bad=0
check() { # check FILE DIR FORBIDDEN LLVM_OK
    local f=$1 dir=$2 forbidden=$3 llvm_ok=$4
    while IFS=: read -r line inc; do
        for p in $forbidden; do
            if [[ $inc == "$p"* ]]; then
                echo "$f:$line: includes \"$inc\" ($dir may not include $p)"
                bad=1
            fi
        done
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | sed -E 's/^([0-9]+):[^"]*"([^"]*)".*/\1:\2/')
    if [[ $llvm_ok == no ]] && grep -qn '#[[:space:]]*include[[:space:]]*<llvm-c/' "$f"; then
        echo "$f:$(grep -n '#[[:space:]]*include[[:space:]]*<llvm-c/' "$f" | head -1 | cut -d: -f1): includes an LLVM header (not allowed here)"
        bad=1
    fi
}

n=0
while IFS= read -r f; do
    for rule in "${RULES[@]}"; do
        IFS='|' read -r dir forbidden llvm_ok <<<"$rule"
        if [[ $f == "$dir"* ]]; then
            check "$f" "$dir" "$forbidden" "$llvm_ok"
        fi
    done
    n=$((n + 1))
done < <(git ls-files '*.c' '*.h' 2>/dev/null || find ir validate passes viz backend tools -name '*.[ch]')

if [[ $bad -ne 0 ]]; then
    echo "check_includes: include rules broken (see docs/architecture.md)" >&2
    exit 1
fi
echo "check_includes: $n files follow the include rules"

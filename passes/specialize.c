/* specialize: turns symbols into constants (`specialize{B=8}`): every type and constraint
 * gets the value, constraints that become constant are checked, and the symbol disappears.
 * Run shape-infer afterwards to fold the new constants through shape computations. */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    if (ir_pass_num_options(c) == 0) {
        ir_pass_error(c, 0, "give the symbols to fix, e.g. specialize{B=8}");
        return IR_EINVAL;
    }
    for (uint32_t i = 0; i < ir_pass_num_options(c); i++) {
        const char *name, *value;
        ir_pass_option_at(c, i, &name, &value);
        IrSymId s = ir_sym_find(g, name, strlen(name));
        if (!s) {
            ir_pass_error(c, 0, "the graph has no symbol '%s'", name);
            return IR_EINVAL;
        }
        char *end;
        long long v = strtoll(value, &end, 10);
        if (*end || !*value || v < 0) {
            ir_pass_error(c, 0, "'%s=%s': expected a non-negative integer", name, value);
            return IR_EINVAL;
        }
        IrStatus st = ir_graph_specialize_symbol(g, s, v, ir_pass_diag(c));
        if (st) return st;
        ir_pass_stat(c, "symbols-specialized", 1);
        ir_pass_changed(c);
    }
    return IR_OK;
}

const IrPass pass_specialize = {
    .name = "specialize",
    .summary = "replace symbols by constants, e.g. specialize{B=8}",
    .options = (const IrPassOption[]){{NULL, NULL, NULL}},
    .run = run,
    .free_options = true,
};

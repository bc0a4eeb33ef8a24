/* Helpers shared by the passes: the forward-walk replacement map (a pass that replaces a value
 * records repl[old] = new and rewrites each later use as it walks, which keeps it linear) and
 * reading constants behind values. */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

IrValueId ir_pass_resolve(const IrValueId *repl, uint32_t n, IrValueId v) {
    while (v && v <= n && repl[v]) v = repl[v];
    return v;
}

void ir_pass_remap_operands(IrGraph *g, IrNodeId node, const IrValueId *repl, uint32_t n) {
    for (uint32_t i = 0; i < ir_node_num_operands(g, node); i++) {
        IrValueId v = ir_node_operand(g, node, i), w = ir_pass_resolve(repl, n, v);
        if (w != v) ir_node_set_operand(g, node, i, w);
    }
}

IrStatus ir_pass_remap_region_outputs(IrGraph *g, IrRegionId r, const IrValueId *repl, uint32_t n) {
    uint32_t no = ir_region_num_outputs(g, r);
    bool changed = false;
    for (uint32_t i = 0; i < no && !changed; i++)
        changed = ir_pass_resolve(repl, n, ir_region_output(g, r, i)) != ir_region_output(g, r, i);
    if (!changed) return IR_OK;
    IrValueId *outs = malloc(no * sizeof *outs);
    if (!outs) return IR_ENOMEM;
    for (uint32_t i = 0; i < no; i++) outs[i] = ir_pass_resolve(repl, n, ir_region_output(g, r, i));
    ir_region_set_outputs(g, r, no, outs);
    free(outs);
    return ir_graph_status(g);
}

bool ir_pass_const_of(const IrGraph *g, IrValueId v, IrConstId *out) {
    if (!v) return false;
    IrConstId k = ir_value_const(g, v);
    if (!k) {
        IrNodeId d = ir_value_def_node(g, v);
        IrAttrValue a;
        if (d && ir_node_op(g, d) == IR_OP_CONSTANT && ir_node_attr(g, d, "value", &a) && a.kind == IR_ATTR_TENSOR)
            k = a.tensor;
    }
    if (!k) return false;
    *out = k;
    return true;
}

IrStatus ir_pass_replace_node(IrGraph *g, IrNodeId old, IrValueId v) {
    IrValueId ov = ir_node_result(g, old, 0);
    char *name = strdup(ir_value_name(g, ov));
    if (!name) return IR_ENOMEM;
    ir_graph_replace_uses(g, ov, v);
    ir_node_erase(g, old);
    IrStatus st = ir_value_rename(g, v, name);
    free(name);
    return st;
}

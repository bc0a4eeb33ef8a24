/* dce: removes nodes whose results are never used, and graph constants nothing refers to.
 * Works backwards through each region so chains of dead nodes go in one pass; region outputs
 * and graph outputs count as uses. Every op in the table is free of side effects.
 */
#include "passes/passes.h"

#include <stdlib.h>

static void erase_dead(IrGraph *g, IrRegionId r, uint32_t *uses, int64_t *removed);

static void release(uint32_t *uses, IrValueId v) {
    if (v && uses[v]) uses[v]--;
}

/* Drops the uses held by a node that is about to go, including everything nested in it. */
static void release_node(IrGraph *g, IrNodeId n, uint32_t *uses, int64_t *removed) {
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) release(uses, ir_node_operand(g, n, i));
    for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++) {
        IrRegionId r = ir_node_region_at(g, n, k);
        for (IrNodeId m = ir_region_first(g, r); m; m = ir_node_next(g, m)) release_node(g, m, uses, removed);
        for (uint32_t i = 0; i < ir_region_num_outputs(g, r); i++) release(uses, ir_region_output(g, r, i));
    }
    (*removed)++;
}

static void erase_node_if_dead(IrGraph *g, IrNodeId n, uint32_t *uses, int64_t *removed) {
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId v = ir_node_result(g, n, i);
        if (v && uses[v]) {
            /* live: its regions may still hold dead nodes */
            for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++)
                erase_dead(g, ir_node_region_at(g, n, k), uses, removed);
            return;
        }
    }
    release_node(g, n, uses, removed);
    ir_node_erase(g, n);
}

static void erase_dead(IrGraph *g, IrRegionId r, uint32_t *uses, int64_t *removed) {
    for (IrNodeId n = ir_region_last(g, r); n;) {
        IrNodeId prev = ir_node_prev(g, n);
        erase_node_if_dead(g, n, uses, removed);
        n = prev;
    }
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    uint32_t *uses = malloc(((size_t)ir_graph_num_values(g) + 1) * sizeof *uses);
    if (!uses) return IR_ENOMEM;
    ir_graph_count_uses(g, uses);
    int64_t removed = 0;
    erase_dead(g, 1, uses, &removed);
    uint32_t consts_before = ir_graph_num_const_values(g);
    ir_graph_remove_unused_consts(g, uses);
    int64_t consts_removed = consts_before - ir_graph_num_const_values(g);
    free(uses);
    if (removed || consts_removed) ir_pass_changed(c);
    ir_pass_stat(c, "nodes-removed", removed);
    ir_pass_stat(c, "constants-removed", consts_removed);
    return IR_OK;
}

const IrPass pass_dce = {
    .name = "dce",
    .summary = "remove nodes and constants whose values are never used",
    .options = (const IrPassOption[]){{NULL, NULL, NULL}},
    .run = run,
};

/* Value facts every target reads the same way: static shapes, the slot layout of a compiled
 * graph's buffers. */
#include "backend/lower/lower.h"

#include <stdlib.h>
#include <string.h>

bool lower_value_shape(const IrGraph *g, IrValueId v, uint32_t *rank, int64_t *dims) {
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!t || r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return false;
    const IrExprId *d = ir_type_dims(g, t);
    for (uint32_t i = 0; i < r; i++)
        if (!ir_expr_is_const(g, d[i], &dims[i])) return false;
    *rank = r;
    return true;
}

uint32_t lower_sym_slot(const IrGraph *g) {
    uint32_t nn = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) nn++;
    return ir_graph_num_values(g) + 1 + nn;
}

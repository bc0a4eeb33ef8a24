/* Fused groups as every target sees them: a member's place in its group's body, and which
 * groups are elementwise groups of the core f32 ops that each target compiles as one kernel. */
#include "backend/lower/lower.h"

#include <stdlib.h>
#include <string.h>

bool lower_core_ew_op(IrOp op) { return lower_op_flags(op) & LOWER_CORE_EW; }

bool lower_fused_member_ok(IrOp op) { return lower_core_ew_op(op) && ir_op_info(op)->cls == IR_CLASS_ELEMENTWISE; }

bool lower_bcast_to(uint32_t r, const int64_t *d, uint32_t orank, const int64_t *od) {
    if (r > orank) return false;
    for (uint32_t i = 0; i < r; i++) {
        int64_t o = od[orank - r + i];
        if (d[i] != o && d[i] != 1) return false;
    }
    return true;
}

bool lower_in_region(const IrGraph *g, IrValueId v, IrRegionId body) {
    if (ir_value_kind(g, v) == IR_VALUE_RESULT) return ir_node_region(g, ir_value_def_node(g, v)) == body;
    for (uint32_t i = 0; i < ir_region_num_args(g, body); i++)
        if (ir_region_arg(g, body, i) == v) return true;
    return false;
}

/* The value a group member reads as v: the group's operand for a body argument, else v. */
IrValueId lower_outer_value(const IrGraph *g, IrNodeId group, IrValueId v) {
    if (group && ir_node_op(g, group) == IR_OP_FUSED) {
        IrRegionId body = ir_node_region_at(g, group, 0);
        for (uint32_t i = 0; i < ir_region_num_args(g, body); i++)
            if (ir_region_arg(g, body, i) == v) return ir_node_operand(g, group, i);
    }
    return v;
}

bool lower_fused_ew_group(const IrGraph *g, IrNodeId n, bool need_static) {
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) != 1) return false;
    IrRegionId body = ir_node_region_at(g, n, 0);
    uint32_t nr = ir_node_num_results(g, n), na = ir_region_num_args(g, body), orank = 0, r;
    int64_t od[IR_MAX_RANK], d[IR_MAX_RANK];
    if (nr == 0 || ir_region_num_outputs(g, body) != nr || na != ir_node_num_operands(g, n)) return false;
    if (nr + na + 1 > LOWER_GROUP_MAX_OPS) return false;
    if (!ir_region_first(g, body)) return false;
    if (need_static && !lower_value_shape(g, ir_node_result(g, n, 0), &orank, od)) return false;
    for (IrNodeId m = ir_region_first(g, body); m; m = ir_node_next(g, m)) {
        IrOp op = ir_node_op(g, m);
        if (!lower_fused_member_ok(op) || ir_node_num_results(g, m) != 1 || ir_node_num_regions(g, m) != 0) return false;
        if (ir_node_num_operands(g, m) + 1 > LOWER_GROUP_MAX_OPS) return false;
        IrValueId res = ir_node_result(g, m, 0);
        IrTypeId rt = ir_value_type(g, res);
        if (rt && ir_type_dtype(g, rt) != IR_DTYPE_F32) return false;
        if (need_static && (!lower_value_shape(g, res, &r, d) || !lower_bcast_to(r, d, orank, od))) return false;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (!v) continue;
            /* outer values must come in through the group's operands (liveness sees only those),
             * graph constants excepted (always bound) */
            if (!lower_in_region(g, v, body) && ir_value_kind(g, v) != IR_VALUE_CONST) return false;
            IrTypeId t = ir_value_type(g, v);
            bool cond = op == IR_OP_WHERE && i == 0;
            if (t && ir_type_dtype(g, t) != (cond ? IR_DTYPE_BOOL : IR_DTYPE_F32)) return false;
            if (cond && ir_value_kind(g, v) == IR_VALUE_RESULT) return false;
            if (need_static && (!lower_value_shape(g, v, &r, d) || !lower_bcast_to(r, d, orank, od))) return false;
        }
    }
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId o = ir_region_output(g, body, i), res = ir_node_result(g, n, i);
        if (!o || !lower_in_region(g, o, body)) return false;
        if (ir_value_kind(g, o) != IR_VALUE_RESULT) return false; /* pass-through args: keep it simple */
        if (!need_static) continue;
        if (!lower_value_shape(g, o, &r, d) || r != orank) return false;
        for (uint32_t k = 0; k < r; k++)
            if (d[k] != od[k]) return false;
        if (res && (!lower_value_shape(g, res, &r, d) || r != orank)) return false;
        for (uint32_t k = 0; res && k < r; k++)
            if (d[k] != od[k]) return false;
    }
    return true;
}

bool lower_member_result(const IrGraph *g, IrValueId v, IrRegionId body) {
    return v && ir_value_kind(g, v) == IR_VALUE_RESULT && lower_in_region(g, v, body);
}

IrStatus lower_inline_group(IrGraph *g, IrNodeId n) {
    IrRegionId body = ir_node_region_at(g, n, 0);
    uint32_t nv = ir_graph_num_values(g), nr = ir_node_num_results(g, n);
    IrValueId *map = calloc(nv + 1, sizeof *map), *outs = calloc(nr + 1, sizeof *outs);
    char **names = calloc(nr + 1, sizeof *names);
    IrStatus s = map && outs && names ? IR_OK : IR_ENOMEM;
    for (uint32_t i = 0; !s && i < ir_region_num_args(g, body) && i < ir_node_num_operands(g, n); i++)
        map[ir_region_arg(g, body, i)] = ir_node_operand(g, n, i);
    if (!s) s = ir_region_clone_into(g, body, IR_ROOT_REGION, n, map, outs);
    for (uint32_t i = 0; !s && i < nr; i++) {
        IrValueId r = ir_node_result(g, n, i);
        if (!r) continue;
        names[i] = strdup(ir_value_name(g, r));
        ir_graph_replace_uses(g, r, outs[i]);
    }
    if (!s) {
        ir_node_erase(g, n);
        for (uint32_t i = 0; i < nr; i++) { /* fresh results take the group's names back (a clash keeps theirs) */
            if (!names[i] || outs[i] <= nv || ir_value_kind(g, outs[i]) != IR_VALUE_RESULT) continue;
            IrStatus rs = ir_value_rename(g, outs[i], names[i]); /* free now: the group is erased */
            (void)rs;
        }
    }
    for (uint32_t i = 0; names && i < nr; i++) free(names[i]);
    free(names), free(map), free(outs);
    return s;
}

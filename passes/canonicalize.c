/* canonicalize: local rewrites that remove work without changing results.
 *
 * Patterns: Identity; inference-mode Dropout; no-op Cast; x+0, x-0, x*1, x/1, x^1 (when the
 * constant cannot change the result's shape or dtype); Transpose of Transpose (composed, or
 * removed when the composition is the identity); Reshape of Reshape; Reshape, Flatten,
 * Squeeze, Unsqueeze and Expand whose result type equals the input's static type; single-input
 * Concat, Sum, Max, Min and Mean; Squeeze of an Unsqueeze on the same axes.
 * Uses are rewritten while walking forward, so the pass is linear. A graph output keeps its
 * name, so a node defining one is never replaced by its input.
 */
#include "passes/passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Canon {
    IrPassContext *c;
    IrGraph *g;
    IrValueId *repl;
    uint32_t n_values;
    uint8_t *is_graph_output;
} Canon;


static bool const_of(const IrGraph *g, IrValueId v, IrConstId *out) { return ir_pass_const_of(g, v, out); }

/* True when v is a constant whose elements all equal x. */
static bool const_all(const IrGraph *g, IrValueId v, double x) {
    IrConstId k;
    int64_t n;
    if (!const_of(g, v, &k) || !ir_type_numel(g, ir_const_type(g, k), &n) || n == 0) return false;
    IrDType dt = ir_type_dtype(g, ir_const_type(g, k));
    for (int64_t i = 0; i < n; i++)
        if (ir_elem_get_f64(dt, ir_const_data(g, k), (size_t)i) != x) return false;
    return true;
}

static bool const_ints(const IrGraph *g, IrValueId v, int64_t *vals, uint32_t *n, uint32_t cap) {
    IrConstId k;
    int64_t numel;
    if (!const_of(g, v, &k) || !ir_type_numel(g, ir_const_type(g, k), &numel) || numel > cap) return false;
    IrDType dt = ir_type_dtype(g, ir_const_type(g, k));
    if (!ir_dtype_is_int(dt)) return false;
    for (int64_t i = 0; i < numel; i++) vals[i] = ir_elem_get_i64(dt, ir_const_data(g, k), (size_t)i);
    *n = (uint32_t)numel;
    return true;
}

/* A static type: known dtype and rank, every dim a constant. */
static bool static_type(const IrGraph *g, IrTypeId t) {
    int64_t n;
    return t && ir_type_numel(g, t, &n);
}

/* Replaces node n's result 0 by v (n is left for dce unless it has no other use). */
static bool forward(Canon *s, IrNodeId n, IrValueId v, const char *stat) {
    IrValueId r = ir_node_result(s->g, n, 0);
    if (!r || !v || s->is_graph_output[r]) return false;
    /* the replacement must have the same type when both are known */
    IrTypeId tr = ir_value_type(s->g, r), tv = ir_value_type(s->g, v);
    if (tr && tv && tr != tv) return false;
    for (uint32_t i = 1; i < ir_node_num_results(s->g, n); i++)
        if (ir_node_result(s->g, n, i)) return false; /* other results would lose their definition */
    s->repl[r] = v;
    ir_node_erase(s->g, n);
    ir_pass_stat(s->c, stat, 1);
    return true;
}

/* ---- patterns ------------------------------------------------------------------------------ */

static bool p_identity(Canon *s, IrNodeId n) { return forward(s, n, ir_node_operand(s->g, n, 0), "identity-removed"); }

static bool p_dropout(Canon *s, IrNodeId n) {
    IrGraph *g = s->g;
    /* inference: no training_mode operand, or a constant false one; the mask must be absent */
    if (ir_node_num_results(g, n) > 1 && ir_node_result(g, n, 1)) return false;
    if (ir_node_num_operands(g, n) > 2 && ir_node_operand(g, n, 2) && !const_all(g, ir_node_operand(g, n, 2), 0))
        return false;
    return forward(s, n, ir_node_operand(g, n, 0), "dropout-removed");
}

static bool p_cast(Canon *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrValueId x = ir_node_operand(g, n, 0);
    IrDType from = ir_type_dtype(g, ir_value_type(g, x));
    if (from == IR_DTYPE_NONE || from != (IrDType)ir_node_attr_int(g, n, "to", NULL)) return false;
    return forward(s, n, x, "cast-removed");
}

/* x op c where c is the identity element and cannot broadcast x to a larger shape. */
static bool neutral_operand(Canon *s, IrNodeId n, uint32_t xi, uint32_t ci, double neutral) {
    IrGraph *g = s->g;
    IrValueId x = ir_node_operand(g, n, xi), c = ir_node_operand(g, n, ci);
    IrValueId r = ir_node_result(g, n, 0);
    if (!const_all(g, c, neutral)) return false;
    IrTypeId tx = ir_value_type(g, x), tr = ir_value_type(g, r);
    if (!tx || !static_type(g, tx)) return false;
    /* the result's shape must be x's: the constant must not add dims or grow any */
    IrTypeId tc = ir_value_type(g, c);
    uint32_t rx = ir_type_rank(g, tx), rc = ir_type_rank(g, tc);
    if (rc == IR_RANK_UNKNOWN || rc > rx || ir_type_dtype(g, tc) != ir_type_dtype(g, tx)) return false;
    for (uint32_t i = 0; i < rc; i++) {
        int64_t dc, dx;
        if (!ir_expr_is_const(g, ir_type_dims(g, tc)[i], &dc) || !ir_expr_is_const(g, ir_type_dims(g, tx)[rx - rc + i], &dx))
            return false;
        if (dc != 1 && dc != dx) return false;
    }
    if (tr && tr != tx) return false;
    return forward(s, n, x, "neutral-removed");
}

static bool p_add(Canon *s, IrNodeId n) { return neutral_operand(s, n, 0, 1, 0) || neutral_operand(s, n, 1, 0, 0); }
static bool p_sub(Canon *s, IrNodeId n) { return neutral_operand(s, n, 0, 1, 0); }
static bool p_mul(Canon *s, IrNodeId n) { return neutral_operand(s, n, 0, 1, 1) || neutral_operand(s, n, 1, 0, 1); }
static bool p_div(Canon *s, IrNodeId n) { return neutral_operand(s, n, 0, 1, 1); }
static bool p_pow(Canon *s, IrNodeId n) { return neutral_operand(s, n, 0, 1, 1); }

static bool p_transpose(Canon *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrValueId x = ir_node_operand(g, n, 0);
    IrNodeId d = ir_value_def_node(g, x);
    if (!d || ir_node_op(g, d) != IR_OP_TRANSPOSE) return false;
    IrAttrValue p1, p2;
    if (!ir_node_attr(g, d, "perm", &p1) || !ir_node_attr(g, n, "perm", &p2) || p1.count != p2.count || p1.count > 64)
        return false;
    int64_t perm[64];
    bool ident = true;
    for (uint32_t i = 0; i < p2.count; i++) {
        if (p2.ints[i] < 0 || p2.ints[i] >= (int64_t)p1.count) return false;
        perm[i] = p1.ints[p2.ints[i]];
        ident &= perm[i] == (int64_t)i;
    }
    IrValueId y = ir_node_operand(g, d, 0);
    if (ident) return forward(s, n, y, "transpose-pair-removed");
    ir_node_set_operand(g, n, 0, y);
    IrAttrValue a = {.kind = IR_ATTR_INTS, .count = p2.count, .ints = perm};
    ir_node_set_attr(g, n, "perm", &a);
    ir_pass_stat(s->c, "transposes-composed", 1);
    return true;
}

static bool p_reshape(Canon *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrValueId x = ir_node_operand(g, n, 0), r = ir_node_result(g, n, 0);
    if (static_type(g, ir_value_type(g, x)) && ir_value_type(g, x) == ir_value_type(g, r))
        return forward(s, n, x, "reshape-removed");
    IrNodeId d = ir_value_def_node(g, x);
    if (!d || ir_node_op(g, d) != IR_OP_RESHAPE) return false;
    int64_t shape[64];
    uint32_t k;
    if (!const_ints(g, ir_node_operand(g, n, 1), shape, &k, 64)) return false;
    if (!ir_node_attr_int(g, n, "allowzero", NULL))
        for (uint32_t i = 0; i < k; i++)
            if (shape[i] == 0) return false; /* 0 copies a dim of the inner result */
    ir_node_set_operand(g, n, 0, ir_node_operand(g, d, 0));
    ir_pass_stat(s->c, "reshapes-merged", 1);
    return true;
}

static bool p_same_static_type(Canon *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrValueId x = ir_node_operand(g, n, 0), r = ir_node_result(g, n, 0);
    if (!static_type(g, ir_value_type(g, x)) || ir_value_type(g, x) != ir_value_type(g, r)) return false;
    return forward(s, n, x, "noop-reshape-removed");
}

static bool p_single_input(Canon *s, IrNodeId n) {
    if (ir_node_num_operands(s->g, n) != 1) return false;
    IrValueId x = ir_node_operand(s->g, n, 0);
    if (ir_value_type(s->g, x) != ir_value_type(s->g, ir_node_result(s->g, n, 0))) return false;
    return forward(s, n, x, "single-input-removed");
}

static bool p_squeeze(Canon *s, IrNodeId n) {
    IrGraph *g = s->g;
    if (p_same_static_type(s, n)) return true;
    IrValueId x = ir_node_operand(g, n, 0);
    IrNodeId d = ir_value_def_node(g, x);
    if (!d || ir_node_op(g, d) != IR_OP_UNSQUEEZE || ir_node_num_operands(g, n) < 2) return false;
    int64_t a[64], b[64];
    uint32_t na, nb;
    if (!const_ints(g, ir_node_operand(g, n, 1), a, &na, 64) || !const_ints(g, ir_node_operand(g, d, 1), b, &nb, 64) ||
        na != nb || memcmp(a, b, na * sizeof *a) != 0)
        return false;
    for (uint32_t i = 0; i < na; i++)
        if (a[i] < 0) return false; /* negative axes mean different things before and after */
    return forward(s, n, ir_node_operand(g, d, 0), "squeeze-unsqueeze-removed");
}

typedef bool (*Pattern)(Canon *s, IrNodeId n);

static Pattern pattern_for(IrOp op) {
    static const struct {
        IrOp op;
        Pattern fn;
    } table[] = {
        {IR_OP_IDENTITY, p_identity}, {IR_OP_DROPOUT, p_dropout},     {IR_OP_CAST, p_cast},
        {IR_OP_ADD, p_add},           {IR_OP_SUB, p_sub},             {IR_OP_MUL, p_mul},
        {IR_OP_DIV, p_div},           {IR_OP_POW, p_pow},             {IR_OP_TRANSPOSE, p_transpose},
        {IR_OP_RESHAPE, p_reshape},   {IR_OP_FLATTEN, p_same_static_type}, {IR_OP_UNSQUEEZE, p_same_static_type},
        {IR_OP_EXPAND, p_same_static_type}, {IR_OP_SQUEEZE, p_squeeze}, {IR_OP_CONCAT, p_single_input},
        {IR_OP_SUM, p_single_input},  {IR_OP_MAX, p_single_input},    {IR_OP_MIN, p_single_input},
        {IR_OP_MEAN, p_single_input},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].op == op) return table[i].fn;
    return NULL;
}

static void canon_region(Canon *s, IrRegionId r, int64_t *applied) {
    IrGraph *g = s->g;
    for (IrNodeId n = ir_region_first(g, r); n;) {
        IrNodeId next = ir_node_next(g, n);
        ir_pass_remap_operands(g, n, s->repl, s->n_values);
        for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++) canon_region(s, ir_node_region_at(g, n, k), applied);
        Pattern p = pattern_for(ir_node_op(g, n));
        if (p && p(s, n)) (*applied)++;
        n = next;
    }
    if (ir_pass_remap_region_outputs(g, r, s->repl, s->n_values) != IR_OK) return;
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    size_t nv = (size_t)ir_graph_num_values(g) + 1;
    Canon s = {c, g, calloc(nv, sizeof(IrValueId)), (uint32_t)(nv - 1), calloc(nv, 1)};
    if (!s.repl || !s.is_graph_output) {
        free(s.repl);
        free(s.is_graph_output);
        return IR_ENOMEM;
    }
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) s.is_graph_output[ir_graph_output(g, i)] = 1;
    int64_t applied = 0;
    canon_region(&s, 1, &applied);
    free(s.repl);
    free(s.is_graph_output);
    if (applied) ir_pass_changed(c);
    ir_pass_stat(c, "patterns-applied", applied);
    return ir_graph_status(g);
}

const IrPass pass_canonicalize = {
    .name = "canonicalize",
    .summary = "local rewrites: identities, no-op casts and reshapes, x+0 and x*1, transpose and reshape pairs",
    .options = (const IrPassOption[]){{NULL, NULL, NULL}},
    .run = run,
};

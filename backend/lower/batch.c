/* Symbolic batch for artifacts: decides whether a graph whose only symbol is a leading batch
 * dim can be compiled once for one sample (the symbol bound to 1) and run on any batch by the
 * runtime, which loops the compiled entry over the samples with the batched inputs and outputs
 * offset per sample (the workspace is planned for one sample and reused). That is exact only
 * when no node mixes samples, so every node that touches a batched value is checked against
 * per-op rules (axis not 0, no reduction over the batch, MatMul/Gemm rows, perm[0] == 0, ...)
 * on the shape-inferred graph; data computed from the batch size (Shape, Size) may only feed
 * shape operands. Anything else is refused with the node and the reason.
 */
#include "backend/lower/lower.h"

#include <stdlib.h>
#include <string.h>
#include "passes/passes.h"

enum { V_NONE = 0, V_BATCH = 1, V_TAINT = 2, V_BAD = 3 };

typedef struct Ba {
    IrGraph *g;
    IrSymId sym;
    uint8_t *cls; /* by value id */
    IrDiag *diag;
} Ba;

static bool expr_has_sym(const IrGraph *g, IrExprId e, IrSymId s) {
    if (ir_expr_kind(g, e) == IR_EXPR_SYM) return ir_expr_sym_id(g, e) == s;
    int64_t c;
    if (ir_expr_is_const(g, e, &c)) return false;
    return true; /* a compound expression: treat as mentioning it (conservative) */
}

/* V_BATCH when dim 0 is exactly the symbol and no other dim mentions it, V_NONE when the type
 * is fully static, V_BAD otherwise (unknown or symbolic elsewhere). */
static int classify_type(const Ba *b, IrValueId v) {
    IrTypeId t = ir_value_type(b->g, v);
    uint32_t r = ir_type_rank(b->g, t);
    if (!t || r == IR_RANK_UNKNOWN) return V_BAD;
    const IrExprId *d = ir_type_dims(b->g, t);
    int cls = V_NONE;
    for (uint32_t k = 0; k < r; k++) {
        int64_t c;
        if (ir_expr_is_const(b->g, d[k], &c)) {
            if (c < 0) return V_BAD;
            continue;
        }
        if (k == 0 && ir_expr_kind(b->g, d[k]) == IR_EXPR_SYM && ir_expr_sym_id(b->g, d[k]) == b->sym) cls = V_BATCH;
        else return V_BAD;
    }
    return cls;
}

static IrStatus refuse(Ba *b, IrNodeId n, const char *why) {
    ir_diag_at_node(b->diag, b->g, n, IR_SEV_ERROR,
                    "cannot compile once for any batch: %s %s (bind the batch with --input instead)",
                    ir_op_name(ir_node_op(b->g, n)), why);
    return IR_EUNSUPPORTED;
}

static bool axis_attr_not0(const IrGraph *g, IrNodeId n, const char *name, int64_t dflt, uint32_t rank) {
    bool found;
    int64_t a = ir_node_attr_int(g, n, name, &found);
    if (!found) a = dflt;
    return ir_shape_axis(a, rank) != 0;
}

static uint32_t rank_of(const IrGraph *g, IrValueId v) { return ir_type_rank(g, ir_value_type(g, v)); }

/* What the batch rules of lower_ops.def see of a node with a batched operand or result (its
 * results already checked batched): operand count, operand 0, its rank, and whether batched. */
typedef struct BaNode {
    IrNodeId n;
    uint32_t no, r;
    IrValueId x;
    bool x_b;
} BaNode;

/* Row-major with dim 0 kept as the batch: per-sample blocks stay contiguous. */
static const char *batch_keep(const Ba *b, const BaNode *o) {
    (void)b, (void)o;
    return NULL;
}

/* Image ops (Conv, pools, per-channel norms): samples are independent when only x is batched. */
static const char *batch_image(const Ba *b, const BaNode *o) {
    for (uint32_t i = 1; i < o->no; i++)
        if (ir_node_operand(b->g, o->n, i) && b->cls[ir_node_operand(b->g, o->n, i)] == V_BATCH) return "with batched weights";
    return o->x_b ? NULL : "on a non-batched input";
}

static const char *batch_matmul(const Ba *b, const BaNode *o) {
    IrValueId y = ir_node_operand(b->g, o->n, 1);
    if (b->cls[y] == V_BATCH && rank_of(b->g, y) < 3) return "with a batched right operand of rank 2";
    if (o->x_b && o->r < 2) return "with a batched vector";
    return NULL;
}

static const char *batch_gemm(const Ba *b, const BaNode *o) {
    bool found;
    if (!o->x_b || ir_node_attr_int(b->g, o->n, "transA", &found) != 0) return "with transA or a non-batched A";
    if (b->cls[ir_node_operand(b->g, o->n, 1)] == V_BATCH) return "with a batched B";
    return NULL;
}

/* Ops along `axis` (default -1: Softmax and its kin). */
static const char *batch_axis_last(const Ba *b, const BaNode *o) {
    return axis_attr_not0(b->g, o->n, "axis", -1, o->r) ? NULL : "along the batch axis";
}

static const char *batch_layernorm(const Ba *b, const BaNode *o) {
    for (uint32_t i = 1; i < o->no; i++)
        if (ir_node_operand(b->g, o->n, i) && b->cls[ir_node_operand(b->g, o->n, i)] == V_BATCH) return "with batched scale";
    return batch_axis_last(b, o);
}

/* Ops along `axis` (default 0: ArgMax, Concat, Split, GatherElements). */
static const char *batch_axis0(const Ba *b, const BaNode *o) {
    return axis_attr_not0(b->g, o->n, "axis", 0, o->r) ? NULL : "along the batch axis";
}

static const char *batch_gather(const Ba *b, const BaNode *o) {
    if (o->x_b) return batch_axis0(b, o);
    return NULL; /* a table indexed by batched indices */
}

static const char *batch_transpose(const Ba *b, const BaNode *o) {
    IrAttrValue av;
    if (ir_node_attr(b->g, o->n, "perm", &av) && av.kind == IR_ATTR_INTS && av.count == o->r)
        return av.ints[0] == 0 ? NULL : "moving the batch axis";
    return o->r <= 1 ? NULL : "moving the batch axis";
}

static const char *batch_reduce(const Ba *b, const BaNode *o) {
    const IrGraph *g = b->g;
    IrNodeId n = o->n;
    int64_t axes[IR_MAX_RANK];
    uint32_t na = 0;
    IrAttrValue av;
    if (ir_node_attr(g, n, "axes", &av) && av.kind == IR_ATTR_INTS && av.count <= IR_MAX_RANK) {
        for (uint32_t i = 0; i < av.count; i++) axes[na++] = av.ints[i];
    } else if (o->no > 1 && ir_node_operand(g, n, 1)) {
        if (!lower_const_ints(g, ir_node_operand(g, n, 1), axes, &na, IR_MAX_RANK)) return "with non-constant axes";
    }
    if (na == 0) return "over all axes";
    for (uint32_t i = 0; i < na; i++)
        if (ir_shape_axis(axes[i], o->r) == 0) return "over the batch axis";
    return NULL;
}

static const char *batch_slice(const Ba *b, const BaNode *o) {
    const IrGraph *g = b->g;
    IrNodeId n = o->n;
    int64_t axes[IR_MAX_RANK], st[IR_MAX_RANK], en[IR_MAX_RANK];
    uint32_t na = 0, ns = 0, ne = 0;
    if (!lower_const_ints(g, ir_node_operand(g, n, 1), st, &ns, IR_MAX_RANK) ||
        !lower_const_ints(g, ir_node_operand(g, n, 2), en, &ne, IR_MAX_RANK))
        return "with non-constant starts or ends";
    if (o->no > 3 && ir_node_operand(g, n, 3)) {
        if (!lower_const_ints(g, ir_node_operand(g, n, 3), axes, &na, IR_MAX_RANK)) return "with non-constant axes";
    } else {
        for (uint32_t i = 0; i < ns; i++) axes[i] = i;
        na = ns;
    }
    for (uint32_t i = 0; i < na && i < ns && i < ne; i++)
        if (ir_shape_axis(axes[i], o->r) == 0 && !(st[i] == 0 && en[i] >= INT32_MAX)) return "along the batch axis";
    return NULL;
}

static const char *batch_pad(const Ba *b, const BaNode *o) {
    int64_t p[2 * IR_MAX_RANK];
    uint32_t np;
    if (o->no > 3 && ir_node_operand(b->g, o->n, 3)) return "with axes";
    if (!lower_const_ints(b->g, ir_node_operand(b->g, o->n, 1), p, &np, 2 * IR_MAX_RANK) || np != 2 * o->r)
        return "with non-constant pads";
    return p[0] == 0 && p[o->r] == 0 ? NULL : "along the batch axis";
}

static const char *batch_tile(const Ba *b, const BaNode *o) {
    int64_t rep[IR_MAX_RANK];
    uint32_t nr;
    if (!lower_const_ints(b->g, ir_node_operand(b->g, o->n, 1), rep, &nr, IR_MAX_RANK) || nr != o->r)
        return "with non-constant repeats";
    return rep[0] == 1 ? NULL : "along the batch axis";
}

static const char *batch_trilu(const Ba *b, const BaNode *o) {
    (void)b;
    return o->r >= 3 ? NULL : "on a batched matrix";
}

static const char *batch_fused(const Ba *b, const BaNode *o) {
    return lower_fused_ew_group(b->g, o->n, false) ? NULL : "group other than elementwise";
}

static bool data_nonzero(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi);
static bool data_compress(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi);
static bool data_string_normalizer(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi);
static bool data_unique(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi);
static bool data_nms(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi);

typedef struct LowerOpRow {
    const char *(*batch)(const Ba *, const BaNode *);
    uint32_t shape_args;
    bool (*data_dim)(const IrGraph *, IrNodeId, IrValueId, uint32_t, uint32_t *, int64_t *);
    const char *data_name;
    uint32_t flags;
} LowerOpRow;

#define NONE NULL
static const LowerOpRow lower_ops[IR_OP_COUNT] = {
#define LOWER_OP(ID, batch, shape_args, data_dim, data_name, flags) [IR_OP_##ID] = {batch, shape_args, data_dim, data_name, flags},
#include "backend/lower/lower_ops.def"
#undef LOWER_OP
};
#undef NONE

uint32_t lower_op_flags(IrOp op) { return (unsigned)op < IR_OP_COUNT ? lower_ops[op].flags : 0; }

/* The batch rule of lower_ops.def for a node with a batched operand or result. */
static const char *op_rule(Ba *b, IrNodeId n) {
    const IrGraph *g = b->g;
    IrOp op = ir_node_op(g, n);
    BaNode o = {.n = n, .no = ir_node_num_operands(g, n)};
    o.x = o.no ? ir_node_operand(g, n, 0) : 0;
    o.r = o.x ? rank_of(g, o.x) : 0;
    o.x_b = o.x && b->cls[o.x] == V_BATCH;
    if (ir_op_info(op)->cls == IR_CLASS_ELEMENTWISE && op != IR_OP_FUSED) return NULL;
    if (!lower_ops[op].batch) return "(not known to keep samples apart)";
    return lower_ops[op].batch(b, &o);
}

/* Operand positions that take shapes, not data (where a batch-size-derived value may go). */
bool lower_shape_operand(IrOp op, uint32_t i) { return (unsigned)op < IR_OP_COUNT && i < 32 && (lower_ops[op].shape_args >> i & 1u); }
bool lower_rank_dim(IrOp op, uint32_t i, uint32_t r, uint32_t k) {
    return (lower_op_flags(op) & LOWER_INDEX_TUPLES) && i == 1 && k + 1 == r;
}

/* Ops that compute shapes from shapes (their results stay "derived from the batch size"). */
static bool shape_math(IrOp op) { return lower_ops[op].flags & LOWER_SHAPE_MATH; }

void ir_batch_plan_free(IrBatchPlan *bp) {
    free(bp->in_batched);
    free(bp->out_batched);
    memset(bp, 0, sizeof *bp);
}

IrStatus ir_batch_analyze(IrGraph *g, IrBatchPlan *bp, IrDiag *diag) {
    memset(bp, 0, sizeof *bp);
    Ba b = {.g = g, .diag = diag};
    /* the one symbol, only as dim 0 of inputs */
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        IrValueId v = ir_graph_input(g, i);
        IrTypeId t = ir_value_type(g, v);
        uint32_t r = ir_type_rank(g, t);
        if (!t || r == IR_RANK_UNKNOWN) continue;
        for (uint32_t k = 0; k < r; k++) {
            IrExprId e = ir_type_dims(g, t)[k];
            int64_t c;
            if (ir_expr_is_const(g, e, &c)) continue;
            if (ir_expr_kind(g, e) != IR_EXPR_SYM || k != 0 || (b.sym && ir_expr_sym_id(g, e) != b.sym)) {
                ir_diag_error(diag, "cannot compile once for any batch: input '%s' has a symbolic dim other than one "
                              "leading batch symbol (bind it with --input)", ir_value_name(g, v));
                return IR_EUNSUPPORTED;
            }
            b.sym = ir_expr_sym_id(g, e);
        }
    }
    if (!b.sym) return IR_OK;
    bp->sym = b.sym;
    bp->lo = 0;
    bp->hi = -1;
    bp->div = 1;
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
        IrConstraint c = ir_graph_constraint(g, i);
        bool on_sym = ir_expr_kind(g, c.a) == IR_EXPR_SYM && ir_expr_sym_id(g, c.a) == b.sym;
        if (c.kind == IR_CONSTRAINT_RANGE && on_sym) {
            if (c.lo > bp->lo) bp->lo = c.lo;
            if (bp->hi < 0 || c.hi < bp->hi) bp->hi = c.hi;
        } else if (c.kind == IR_CONSTRAINT_DIVISIBLE && on_sym && c.lo > 0) {
            bp->div = bp->div * c.lo; /* a multiple of both (not the lcm: conservative) */
        } else if (on_sym || (c.kind == IR_CONSTRAINT_EQ && expr_has_sym(g, c.b, b.sym))) {
            ir_diag_error(diag, "cannot compile once for any batch: a constraint ties '%s' to other dims",
                          ir_sym_name(g, b.sym));
            return IR_EUNSUPPORTED;
        }
    }
    IrPipeline *pl = NULL;
    IrStatus s = ir_pipeline_parse("shape-infer", diag, &pl);
    IrPipelineOptions po = {.verify_each = true};
    if (!s) s = ir_pipeline_run(pl, g, &po, diag);
    ir_pipeline_destroy(pl);
    if (s) return s;
    uint32_t nv = ir_graph_num_values(g);
    b.cls = calloc(nv + 1, 1);
    bp->n_in = ir_graph_num_inputs(g);
    bp->n_out = ir_graph_num_outputs(g);
    bp->in_batched = calloc(bp->n_in + 1, sizeof *bp->in_batched);
    bp->out_batched = calloc(bp->n_out + 1, sizeof *bp->out_batched);
    if (!b.cls || !bp->in_batched || !bp->out_batched) {
        free(b.cls);
        ir_batch_plan_free(bp);
        return IR_ENOMEM;
    }
    for (uint32_t i = 0; i < bp->n_in; i++) {
        IrValueId v = ir_graph_input(g, i);
        b.cls[v] = (uint8_t)classify_type(&b, v);
        bp->in_batched[i] = b.cls[v] == V_BATCH;
    }
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && !s; n = ir_node_next(g, n)) {
        IrOp op = ir_node_op(g, n);
        bool any_b = false, any_t = false;
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrValueId v = ir_node_operand(g, n, i);
            if (!v) continue;
            if (b.cls[v] == V_BATCH) any_b = true;
            if (b.cls[v] == V_TAINT && !lower_shape_operand(op, i)) any_t = true;
        }
        /* regions may use batched values of the enclosing scope without naming them as operands */
        if (ir_node_num_regions(g, n) && !(op == IR_OP_FUSED && lower_fused_ew_group(g, n, false))) {
            s = refuse(&b, n, "with regions (lower them first, or bind the batch)");
            break;
        }
        if (op == IR_OP_SHAPE || op == IR_OP_SIZE) {
            for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
                if (ir_node_result(g, n, i)) b.cls[ir_node_result(g, n, i)] = any_b || any_t ? V_TAINT : V_NONE;
            continue;
        }
        if (any_t && !any_b) {
            if (!shape_math(op)) {
                s = refuse(&b, n, "on values computed from the batch size");
                break;
            }
            for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
                if (ir_node_result(g, n, i)) b.cls[ir_node_result(g, n, i)] = V_TAINT;
            continue;
        }
        if (any_t) {
            s = refuse(&b, n, "mixing batched data with values computed from the batch size");
            break;
        }
        bool res_b = false;
        for (uint32_t i = 0; i < ir_node_num_results(g, n) && !s; i++) {
            IrValueId v = ir_node_result(g, n, i);
            if (!v) continue;
            int c = classify_type(&b, v);
            if (c == V_BAD) s = refuse(&b, n, "with a result whose shape is not [batch, static dims...]");
            b.cls[v] = (uint8_t)c;
            res_b |= c == V_BATCH;
        }
        if (s) break;
        if (!any_b && !res_b) continue;
        if (any_b && !res_b) {
            s = refuse(&b, n, "with a batched operand and a result without the batch");
            break;
        }
        for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
            IrValueId v = ir_node_result(g, n, i);
            if (v && b.cls[v] != V_BATCH) {
                s = refuse(&b, n, "with results both with and without the batch");
                break;
            }
        }
        if (s) break;
        const char *why = op_rule(&b, n);
        if (why) s = refuse(&b, n, why);
    }
    for (uint32_t i = 0; !s && i < bp->n_out; i++) {
        IrValueId v = ir_graph_output(g, i);
        if (b.cls[v] == V_TAINT || b.cls[v] == V_BAD) {
            ir_diag_error(diag, "cannot compile once for any batch: output '%s' depends on the batch size",
                          ir_value_name(g, v));
            s = IR_EUNSUPPORTED;
        }
        bp->out_batched[i] = b.cls[v] == V_BATCH;
    }
    free(b.cls);
    if (s) ir_batch_plan_free(bp);
    return s;
}

/* ---- symbolic shapes in compiled code ------------------------------------------------------- */

static int sym_index(const IrSymPlan *sp, IrSymId s) {
    for (uint32_t i = 0; i < sp->n; i++)
        if (sp->sym[i] == s) return (int)i;
    return -1;
}

/* NULL when every symbol of x is in sp and x has no `?`; else the reason. */
static const char *expr_bound(const IrGraph *g, const IrSymPlan *sp, IrExprId x, IrSymId *bad) {
    int64_t c;
    if (ir_expr_is_const(g, x, &c)) return NULL;
    switch (ir_expr_kind(g, x)) {
    case IR_EXPR_UNKNOWN: return "an unknown dim";
    case IR_EXPR_SYM:
        *bad = ir_expr_sym_id(g, x);
        for (uint32_t i = 0; i < sp->n_def; i++)
            if (sp->def_sym[i] == *bad) return NULL;
        for (uint32_t i = 0; i < sp->n_data; i++)
            if (sp->data_sym[i] == *bad) return NULL;
        return sym_index(sp, *bad) < 0 ? "a symbol that is no input's dim" : NULL;
    default: {
        const char *w = expr_bound(g, sp, ir_expr_lhs(g, x), bad);
        return w ? w : expr_bound(g, sp, ir_expr_rhs(g, x), bad);
    }
    }
}

static IrStatus sym_refuse(IrDiag *diag, const char *fmt, const char *a, const char *b) {
    char m[512];
    snprintf(m, sizeof m, fmt, a, b, b);
    ir_diag_error(diag, "cannot compile with symbolic shapes: %s (bind the symbols with --input instead)", m);
    return IR_EUNSUPPORTED;
}

/* a == b with a a symbol no input binds and b over bound symbols: a definition of a (recorded). */
static bool sym_defines(const IrGraph *g, IrSymPlan *sp, IrExprId a, IrExprId b) {
    IrSymId bad = 0;
    if (ir_expr_kind(g, a) != IR_EXPR_SYM || sym_index(sp, ir_expr_sym_id(g, a)) >= 0 || sp->n_def == IR_SYM_PLAN_MAX)
        return false;
    for (uint32_t i = 0; i < sp->n_data; i++)
        if (sp->data_sym[i] == ir_expr_sym_id(g, a)) return false;
    IrSymPlan bound = *sp;
    bound.n_def = 0; /* b over input-bound symbols only */
    bound.n_data = 0;
    if (expr_bound(g, &bound, b, &bad)) return false;
    for (uint32_t i = 0; i < sp->n_def; i++)
        if (sp->def_sym[i] == ir_expr_sym_id(g, a)) return sp->def_expr[i] == b;
    sp->def_sym[sp->n_def] = ir_expr_sym_id(g, a);
    sp->def_expr[sp->n_def++] = b;
    return true;
}

/* Whether some value's type mentions symbol s. */
static bool expr_mentions(const IrGraph *g, IrExprId e, IrSymId s) {
    switch (ir_expr_kind(g, e)) {
    case IR_EXPR_SYM: return ir_expr_sym_id(g, e) == s;
    case IR_EXPR_ADD: case IR_EXPR_SUB: case IR_EXPR_MUL: case IR_EXPR_DIV: case IR_EXPR_MOD: case IR_EXPR_MIN: case IR_EXPR_MAX:
        return expr_mentions(g, ir_expr_lhs(g, e), s) || expr_mentions(g, ir_expr_rhs(g, e), s);
    default: return false;
    }
}

static bool sym_used(const IrGraph *g, IrSymId s) {
    for (uint32_t v = 1; v <= ir_graph_num_values(g); v++) {
        IrTypeId t = ir_value_type(g, v);
        uint32_t r = ir_type_rank(g, t);
        for (uint32_t k = 0; t && !ir_type_is_container(g, t) && r != IR_RANK_UNKNOWN && k < r; k++)
            if (expr_mentions(g, ir_type_dims(g, t)[k], s)) return true;
    }
    return false;
}

IrStatus ir_sym_plan(const IrGraph *g, IrSymPlan *sp, IrDiag *diag) {
    memset(sp, 0, sizeof *sp);
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        IrValueId v = ir_graph_input(g, i);
        IrTypeId t = ir_value_type(g, v);
        uint32_t r = ir_type_rank(g, t);
        if (!t || r == IR_RANK_UNKNOWN) return sym_refuse(diag, "input '%s' has an unknown rank%s", ir_value_name(g, v), "");
        for (uint32_t k = 0; k < r; k++) {
            IrExprId e = ir_type_dims(g, t)[k];
            int64_t c;
            if (ir_expr_is_const(g, e, &c)) continue;
            if (ir_expr_kind(g, e) != IR_EXPR_SYM)
                return sym_refuse(diag, "input '%s' has a dim that is not a plain symbol%s", ir_value_name(g, v), "");
            if (sym_index(sp, ir_expr_sym_id(g, e)) >= 0) continue;
            if (sp->n == IR_SYM_PLAN_MAX) return sym_refuse(diag, "more than 16 symbols%s%s", "", "");
            sp->sym[sp->n] = ir_expr_sym_id(g, e);
            sp->lo[sp->n] = 0, sp->hi[sp->n] = -1, sp->div[sp->n] = 1;
            sp->in[sp->n] = i, sp->dim[sp->n] = k;
            sp->n++;
        }
    }
    for (IrSymId s = 1; s <= ir_graph_num_syms(g); s++) { /* symbols bound from an input's values */
        LowerValueBind vb;
        if (sym_index(sp, s) >= 0 || !lower_value_input_sym(g, s, &vb) || !sym_used(g, s)) continue;
        if (vb.by && sym_index(sp, vb.by) < 0) continue; /* its base is not bound before the run: left unbound */
        if (sp->n == IR_SYM_PLAN_MAX) return sym_refuse(diag, "more than 16 symbols%s%s", "", "");
        sp->sym[sp->n] = s;
        sp->lo[sp->n] = 0, sp->hi[sp->n] = -1, sp->div[sp->n] = 1;
        sp->in[sp->n] = vb.in, sp->dim[sp->n] = vb.k, sp->by_value[sp->n] = true;
        sp->mul_sym[sp->n] = vb.by, sp->mul_const[sp->n] = vb.c;
        sp->n++;
    }
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) { /* data symbols */
        uint32_t k;
        int64_t hi;
        IrSymId ds = lower_data_sym(g, n);
        if (!ds || !lower_data_dim(g, n, &k, &hi)) continue;
        if (sp->n_data == IR_SYM_PLAN_MAX) return sym_refuse(diag, "more than 16 data-dependent dims%s%s", "", "");
        sp->data_sym[sp->n_data] = ds;
        sp->data_hi[sp->n_data++] = hi; /* the op's own bound, whatever else the model claims */
    }
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) { /* dims values decide */
        LowerValueDim vd[IR_SYM_PLAN_MAX];
        uint32_t nv = lower_value_dim_syms(g, n, vd, IR_SYM_PLAN_MAX);
        for (uint32_t i = 0; i < nv; i++) {
            if (sp->n_data == IR_SYM_PLAN_MAX || i >= IR_SYM_PLAN_MAX)
                return sym_refuse(diag, "more than 16 data-dependent dims%s%s", "", "");
            sp->data_sym[sp->n_data] = vd[i].sym;
            sp->data_hi[sp->n_data++] = vd[i].hi;
        }
    }
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
        IrConstraint c = ir_graph_constraint(g, i);
        int at = ir_expr_kind(g, c.a) == IR_EXPR_SYM ? sym_index(sp, ir_expr_sym_id(g, c.a)) : -1;
        int dat = -1;
        for (uint32_t j = 0; j < sp->n_data && ir_expr_kind(g, c.a) == IR_EXPR_SYM; j++)
            if (sp->data_sym[j] == ir_expr_sym_id(g, c.a)) dat = (int)j;
        if (c.kind == IR_CONSTRAINT_RANGE && dat >= 0) {
        } else if (c.kind == IR_CONSTRAINT_RANGE && at >= 0) {
            if (c.lo > sp->lo[at]) sp->lo[at] = c.lo;
            if (c.hi >= 0 && (sp->hi[at] < 0 || c.hi < sp->hi[at])) sp->hi[at] = c.hi;
        } else if (c.kind == IR_CONSTRAINT_DIVISIBLE && at >= 0 && c.lo > 0) {
            sp->div[at] *= c.lo; /* a multiple of both (not the lcm: conservative) */
        } else if (c.kind == IR_CONSTRAINT_EQ && sym_defines(g, sp, c.a, c.b)) {
        } else if (c.kind == IR_CONSTRAINT_EQ && sym_defines(g, sp, c.b, c.a)) {
        } else if (c.kind == IR_CONSTRAINT_EQ && sp->n_eq < IR_SYM_PLAN_MAX && !expr_bound(g, sp, c.a, &(IrSymId){0}) &&
                   !expr_bound(g, sp, c.b, &(IrSymId){0})) {
            sp->eq_a[sp->n_eq] = c.a; /* an equality over bound symbols: a check on every run */
            sp->eq_b[sp->n_eq++] = c.b;
        } else {
            IrSymId bad = 0;
            bool mentions = expr_bound(g, &(IrSymPlan){0}, c.a, &bad) || (c.kind == IR_CONSTRAINT_EQ &&
                                                                           expr_bound(g, &(IrSymPlan){0}, c.b, &bad));
            if (!mentions || (c.kind != IR_CONSTRAINT_EQ && bad && !sym_used(g, bad))) continue; /* a symbol no value has */
            IrStrBuf b = {0};
            ir_constraint_print(g, &c, &b);
            IrStatus s = sym_refuse(diag, "the constraint '%s' is not a range or divisibility of one symbol%s",
                                    b.data ? b.data : "?", "");
            free(b.data);
            return s;
        }
    }
    for (uint32_t i = 0; i < sp->n_data; i++)
        if (sp->data_hi[i] < 0)
            return sym_refuse(diag, "the data-dependent dim '%s' has no upper bound%s", ir_sym_name(g, sp->data_sym[i]), "");
    /* a symbol without an upper bound (hi -1) is fine: the values it sizes are placed in the
     * workspace at run time (lower_plan_memory) */
    for (uint32_t v = 1; v <= ir_graph_num_values(g); v++) {
        IrTypeId t = ir_value_type(g, v);
        uint32_t r = ir_type_rank(g, t);
        if (!t || ir_type_is_container(g, t) || r == IR_RANK_UNKNOWN) continue;
        for (uint32_t k = 0; k < r; k++) {
            IrSymId bad = 0;
            const char *why = expr_bound(g, sp, ir_type_dims(g, t)[k], &bad);
            if (why) {
                char m[160];
                snprintf(m, sizeof m, "%s%s%s", why, bad ? " " : "", bad ? ir_sym_name(g, bad) : "");
                return sym_refuse(diag, "'%s' has %s", ir_value_name(g, v), m);
            }
        }
    }
    return IR_OK;
}

void ir_sym_binding(const IrGraph *g, const IrSymPlan *sp, int64_t pick, int64_t *vals) {
    lower_sym_binding(g, sp, pick, false, vals);
}

void lower_sym_binding(const IrGraph *g, const IrSymPlan *sp, int64_t pick, bool at_hi, int64_t *vals) {
    for (uint32_t s = 0; s <= ir_graph_num_syms(g); s++) vals[s] = -1;
    for (uint32_t i = 0; i < sp->n; i++) {
        int64_t v = pick < sp->lo[i] ? sp->lo[i] : pick;
        if (sp->hi[i] >= 0 && (at_hi || v > sp->hi[i])) v = sp->hi[i];
        v = v / sp->div[i] * sp->div[i];
        if (v < sp->lo[i]) v += sp->div[i];
        vals[sp->sym[i]] = v;
    }
    for (uint32_t i = 0; i < sp->n_data; i++) vals[sp->data_sym[i]] = sp->data_hi[i];
    for (uint32_t i = 0; i < sp->n_def; i++)
        if (!ir_expr_eval(g, sp->def_expr[i], vals, &vals[sp->def_sym[i]])) vals[sp->def_sym[i]] = -1;
}

bool ir_sym_plan_has_data(const IrGraph *g) {
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n))
        if (lower_data_sym(g, n) || lower_value_dim_syms(g, n, NULL, 0)) return true;
    return false;
}

/* ---- data-dependent dims ----------------------------------------------------------------------
 * A dim that the data decides (NonZero's count, the entries Compress keeps) becomes a data
 * symbol: a symbol the node's kernel writes into the run's symbol array when it has counted, with
 * the largest value it can take as its range, so the kernels after it evaluate their shapes at
 * run time (cpu/dyn.c), the workspace holds the largest case and the output dims are read after
 * the run. */

/* Upper bound of dim expression e from its symbols' range constraints: constants, symbols, sums,
 * products and divisions by a positive constant only (dims only grow with their symbols there);
 * -1 for anything else (a difference, an unbounded symbol). */
static int64_t expr_max(const IrGraph *g, IrExprId e) {
    int64_t c;
    if (ir_expr_is_const(g, e, &c)) return c;
    switch (ir_expr_kind(g, e)) {
    case IR_EXPR_SYM: {
        int64_t hi = -1;
        for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
            IrConstraint k = ir_graph_constraint(g, i);
            if (k.kind == IR_CONSTRAINT_RANGE && k.a == e && k.hi >= 0 && (hi < 0 || k.hi < hi)) hi = k.hi;
        }
        return hi;
    }
    case IR_EXPR_ADD: case IR_EXPR_MUL: {
        int64_t a = expr_max(g, ir_expr_lhs(g, e)), b = expr_max(g, ir_expr_rhs(g, e));
        if (a < 0 || b < 0) return -1;
        return ir_expr_kind(g, e) == IR_EXPR_ADD ? a + b : a * b;
    }
    case IR_EXPR_DIV: {
        int64_t a = expr_max(g, ir_expr_lhs(g, e)), b;
        return a >= 0 && ir_expr_is_const(g, ir_expr_rhs(g, e), &b) && b > 0 ? a / b : -1;
    }
    default: return -1;
    }
}

/* Whether symbol s is some graph input's dim (the runtime binds it). */
static bool input_bound(const IrGraph *g, IrSymId s) {
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        uint32_t r = ir_type_rank(g, t);
        for (uint32_t k = 0; t && r != IR_RANK_UNKNOWN && k < r; k++)
            if (ir_expr_kind(g, ir_type_dims(g, t)[k]) == IR_EXPR_SYM && ir_expr_sym_id(g, ir_type_dims(g, t)[k]) == s)
                return true;
    }
    return false;
}

static int64_t numel_max(const IrGraph *g, IrValueId v, uint32_t from, uint32_t to) {
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!t || r == IR_RANK_UNKNOWN) return -1;
    int64_t n = 1;
    for (uint32_t k = from; k < to && k < r; k++) {
        int64_t m = expr_max(g, ir_type_dims(g, t)[k]);
        if (m < 0) return -1;
        n *= m;
    }
    return n;
}

/* Compress and Unique take items along their `axis` when it is given, else the elements of x
 * flattened: the result dim k those items make and how many there can be (-1: unbounded); false
 * for an axis out of range. */
static bool axis_items(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *items) {
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (found && axis < 0) axis += rx;
    if (found && (axis < 0 || axis >= (int64_t)rx)) return false;
    *k = found ? (uint32_t)axis : 0;
    *items = found ? numel_max(g, x, (uint32_t)axis, (uint32_t)axis + 1) : numel_max(g, x, 0, rx);
    return true;
}

static bool data_nonzero(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi) {
    (void)n;
    *k = 1;
    *hi = numel_max(g, x, 0, rx);
    return true;
}

/* At most the condition's entries, and the items it covers. */
static bool data_compress(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi) {
    IrValueId c = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    int64_t nc = c ? numel_max(g, c, 0, 1) : -1, nx;
    if (!axis_items(g, n, x, rx, k, &nx)) return false;
    *hi = nx < 0 || nc < 0 ? -1 : nx < nc ? nx : nc;
    return true;
}

/* [C] or [1, C]: at most C kept, at least one (empty) string. */
static bool data_string_normalizer(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi) {
    (void)n;
    int64_t c = numel_max(g, x, 0, rx);
    *k = rx - 1;
    *hi = c < 0 ? -1 : c > 1 ? c : 1;
    return rx == 1 || rx == 2;
}

/* At most every item distinct. */
static bool data_unique(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi) {
    return axis_items(g, n, x, rx, k, hi);
}

/* At most every box of every class of every batch. */
static bool data_nms(const IrGraph *g, IrNodeId n, IrValueId x, uint32_t rx, uint32_t *k, int64_t *hi) {
    (void)x, (void)rx;
    IrValueId sc = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    *k = 0;
    *hi = sc ? numel_max(g, sc, 0, 3) : -1;
    return true;
}

bool lower_data_dim(const IrGraph *g, IrNodeId n, uint32_t *k, int64_t *hi) {
    *hi = -1;
    IrValueId x = ir_node_num_operands(g, n) ? ir_node_operand(g, n, 0) : 0, y = ir_node_result(g, n, 0);
    uint32_t rx = x ? ir_type_rank(g, ir_value_type(g, x)) : IR_RANK_UNKNOWN;
    if (!y || rx == IR_RANK_UNKNOWN || !lower_ops[ir_node_op(g, n)].data_dim) return false;
    return lower_ops[ir_node_op(g, n)].data_dim(g, n, x, rx, k, hi);
}

/* Names the data symbols make (lower_data_symbols): base, then a number. */
static const char *data_base(IrOp op) { return lower_ops[op].data_name ? lower_ops[op].data_name : "selected"; }

IrSymId lower_data_sym(const IrGraph *g, IrNodeId n) {
    uint32_t k;
    int64_t hi;
    IrValueId y = ir_node_num_results(g, n) ? ir_node_result(g, n, 0) : 0;
    if (!y || !lower_data_dim(g, n, &k, &hi) || hi < 0 || k >= ir_type_rank(g, ir_value_type(g, y))) return 0;
    IrExprId e = ir_type_dims(g, ir_value_type(g, y))[k];
    if (ir_expr_kind(g, e) != IR_EXPR_SYM) return 0;
    IrSymId s = ir_expr_sym_id(g, e);
    const char *name = ir_sym_name(g, s), *base = data_base(ir_node_op(g, n));
    if (strncmp(name, base, strlen(base)) != 0 || input_bound(g, s)) return 0;
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) { /* ranged [0, hi] by lower_data_symbols */
        IrConstraint c = ir_graph_constraint(g, i);
        if (c.kind == IR_CONSTRAINT_RANGE && c.a == e && c.lo == 0 && c.hi == hi) return s;
    }
    return 0;
}

/* The types after node n (inferred from what the model claimed there, or declared) are
 * forgotten, so that shape-infer types them again from n's new symbols. */
static IrStatus forget_after(IrGraph *g, IrNodeId n) {
    uint8_t *mark = calloc(ir_graph_num_values(g) + 1, 1);
    if (!mark) return IR_ENOMEM;
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) mark[ir_node_result(g, n, i)] = 1;
    for (IrNodeId m = ir_node_next(g, n); m; m = ir_node_next(g, m)) {
        bool hit = false;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m) && !hit; i++) hit = mark[ir_node_operand(g, m, i)];
        for (uint32_t i = 0; hit && i < ir_node_num_results(g, m); i++) {
            IrValueId v = ir_node_result(g, m, i);
            if (!v || ir_type_is_container(g, ir_value_type(g, v))) continue;
            mark[v] = 1;
            ir_value_set_type(g, v, 0);
        }
    }
    free(mark);
    return IR_OK;
}

/* A fresh symbol base1, base2, ... ranged [0, hi]; 0 when none can be named. */
static IrSymId fresh_data_sym(IrGraph *g, const char *base, int64_t hi) {
    char name[64];
    IrSymId s = 0;
    for (uint32_t i = 1; !s && i < 100000; i++) {
        snprintf(name, sizeof name, "%s%u", base, i);
        if (!ir_sym_find(g, name, strlen(name))) s = ir_sym_declare(g, name);
    }
    if (!s) return 0;
    IrConstraint c = {.kind = IR_CONSTRAINT_RANGE, .a = ir_expr_sym(g, s), .lo = 0, .hi = hi, .origin = IR_CONSTRAINT_USER};
    ir_graph_add_constraint(g, &c);
    return s;
}

/* ---- dims an operand's values decide ----------------------------------------------------------
 * Slice with starts/ends/axes/steps, Split with its sizes, TopK with K, ReduceSum with axes,
 * Squeeze and Unsqueeze with axes given at run time: shape-infer leaves such a dim
 * `?`. Each becomes a data symbol of its own (VALUE_BASE1, ...), ranged [0, hi], that a prologue
 * of the node's kernel (cpu/data.c, cpu_value_dims) computes from the operand before the kernel
 * and its consumers read it. Its bound: the input's dim (rank-keeping ops; a result dim never
 * exceeds it) or the largest input dim (Squeeze, Unsqueeze, ReduceSum without keepdims), at least 1. */
#define VALUE_BASE "valdim"

static bool value_dims_op(const IrGraph *g, IrNodeId n) { return lower_op_flags(ir_node_op(g, n)) & LOWER_VALUE_DIMS; }

/* Whether a result dim of n may be any input dim (not the one at its own position). */
static bool value_dims_move(const IrGraph *g, IrNodeId n) {
    bool found;
    uint32_t f = lower_op_flags(ir_node_op(g, n));
    return (f & LOWER_VALUE_DIMS_ANY) ||
           ((f & LOWER_VALUE_DIMS_UNKEPT) && ir_node_attr_int(g, n, "keepdims", &found) == 0 && found);
}

int64_t lower_value_dim_hi(const IrGraph *g, IrNodeId n, uint32_t k) {
    IrValueId x = ir_node_num_operands(g, n) ? ir_node_operand(g, n, 0) : 0;
    IrTypeId t = x ? ir_value_type(g, x) : 0;
    uint32_t rx = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
    if (!value_dims_op(g, n) || rx == IR_RANK_UNKNOWN || ir_type_is_container(g, t)) return -1;
    bool any = value_dims_move(g, n);
    int64_t hi = 1;
    if (lower_op_flags(ir_node_op(g, n)) & LOWER_VALUE_DIMS_PROD) { /* a Reshape dim: at most every element */
        for (uint32_t j = 0; j < rx; j++) {
            int64_t m = expr_max(g, ir_type_dims(g, t)[j]);
            if (m < 0 || (m > 0 && hi > INT64_MAX / m)) return -1;
            hi *= m > 0 ? m : 1;
        }
        return hi;
    }
    if (!any && k >= rx) return -1;
    for (uint32_t j = any ? 0 : k; j < (any ? rx : k + 1); j++) {
        int64_t m = expr_max(g, ir_type_dims(g, t)[j]);
        if (m < 0) return -1;
        if (m > hi) hi = m;
    }
    return hi;
}

/* Whether symbol s is in some operand's type of n (then it is not n's to write). */
static bool operand_has_sym(const IrGraph *g, IrNodeId n, IrSymId s) {
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrTypeId t = ir_node_operand(g, n, i) ? ir_value_type(g, ir_node_operand(g, n, i)) : 0;
        uint32_t r = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
        for (uint32_t k = 0; r != IR_RANK_UNKNOWN && !ir_type_is_container(g, t) && k < r; k++)
            if (expr_mentions(g, ir_type_dims(g, t)[k], s)) return true;
    }
    return false;
}

uint32_t lower_value_dim_syms(const IrGraph *g, IrNodeId n, LowerValueDim *out, uint32_t max) {
    uint32_t cnt = 0;
    IrSymId found[64]; /* the first 64 found, for the repeats (TopK's indices share its values' dims) */
    if (!value_dims_op(g, n)) return 0;
    for (uint32_t r = 0; r < ir_node_num_results(g, n); r++) {
        IrValueId y = ir_node_result(g, n, r);
        IrTypeId t = y ? ir_value_type(g, y) : 0;
        uint32_t rank = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
        for (uint32_t k = 0; rank != IR_RANK_UNKNOWN && !ir_type_is_container(g, t) && k < rank; k++) {
            IrExprId e = ir_type_dims(g, t)[k];
            if (ir_expr_kind(g, e) != IR_EXPR_SYM) continue;
            IrSymId s = ir_expr_sym_id(g, e);
            bool seen = false;
            for (uint32_t i = 0; i < cnt && i < 64 && !seen; i++) seen = found[i] == s;
            int64_t hi = lower_value_dim_hi(g, n, k);
            if (seen || hi < 0 || strncmp(ir_sym_name(g, s), VALUE_BASE, strlen(VALUE_BASE)) != 0 || input_bound(g, s) ||
                operand_has_sym(g, n, s))
                continue;
            bool ranged = false;
            for (uint32_t i = 0; i < ir_graph_num_constraints(g) && !ranged; i++) {
                IrConstraint c = ir_graph_constraint(g, i);
                ranged = c.kind == IR_CONSTRAINT_RANGE && c.a == e && c.lo == 0 && c.hi == hi;
            }
            if (!ranged) continue;
            if (cnt < max) out[cnt] = (LowerValueDim){.sym = s, .hi = hi, .result = r, .dim = k};
            if (cnt < 64) found[cnt] = s;
            cnt++;
        }
    }
    return cnt;
}

/* ---- dims a graph input's values give --------------------------------------------------------
 * Tile's repeats, Pad's pads, ConstantOfShape's, Expand's and MaxUnpool's shape, OneHot's depth,
 * the signal ops' sizes and Resize's sizes or scales given as a graph input: the runtime reads them before the run, so each entry k of input
 * i becomes a symbol of its own bound from the input's values like the symbols input dims bind:
 * value<i>_<k> is the entry itself (at least 0, no upper bound); value<i>_<k>_mul<c> and
 * value<i>_<k>_mul_<S> are trunc(c * entry) and trunc(S * entry) for a constant c or a symbol S
 * bound before it (Resize's out = trunc(in * scale)). The result dims are expressions over them
 * (x_k * R_k, x_k + P_k + P_(k+r), S_k, the depth, the scaled dims), given by the op's
 * LOWER_VALUE_INPUT row of lower_ops.def: sizes, the memory plan (values placed per binding) and
 * the output shapes follow as for any symbol without an upper bound. */
#define VALUE_INPUT_MAX 16

/* The graph input index of v when v is one whose values can bind symbols (1-D or scalar i32/i64
 * of at most VALUE_INPUT_MAX entries, static count; f32/f64 too with floats, truncated as
 * OneHot's depth is); -1 otherwise. */
static int value_input(const IrGraph *g, IrValueId v, int64_t *count, bool floats) {
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    IrDType dt = v ? ir_type_dtype(g, ir_value_type(g, v)) : IR_DTYPE_NONE;
    bool ok = dt == IR_DTYPE_I64 || dt == IR_DTYPE_I32 || (floats && (dt == IR_DTYPE_F32 || dt == IR_DTYPE_F64));
    if (!v || !ok || !lower_value_shape(g, v, &r, d) || r > 1) return -1;
    *count = r ? d[0] : 1;
    if (*count > VALUE_INPUT_MAX) return -1;
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++)
        if (ir_graph_input(g, i) == v) return (int)i;
    return -1;
}

/* value<in>_<k>, with _mul<c> or _mul_<S> when scaled by the constant c or the symbol S. */
static void value_sym_name(const IrGraph *g, char *name, size_t cap, int in, int64_t k, IrSymId by, int64_t c) {
    int at = snprintf(name, cap, "value%d_%lld", in, (long long)k);
    if (by) snprintf(name + at, cap - (size_t)at, "_mul_%s", ir_sym_name(g, by));
    else if (c >= 0) snprintf(name + at, cap - (size_t)at, "_mul%lld", (long long)c);
}

/* The expression of a symbol named value_sym_name (declared on first use). */
static IrExprId value_sym_of(IrGraph *g, int in, int64_t k, IrSymId by, int64_t c) {
    char name[160];
    value_sym_name(g, name, sizeof name, in, k, by, c);
    IrSymId s = ir_sym_find(g, name, strlen(name));
    if (!s) s = ir_sym_declare(g, name);
    return s ? ir_expr_sym(g, s) : 0;
}

/* The expression of entry k of graph input `in` (its symbol). */
static IrExprId value_sym(IrGraph *g, int in, int64_t k) { return value_sym_of(g, in, k, 0, -1); }

/* trunc(dx * entry k of input `in`): dx a constant or a plain symbol, else 0 (not expressible). */
static IrExprId value_scaled_sym(IrGraph *g, int in, int64_t k, IrExprId dx) {
    int64_t c;
    if (ir_expr_is_const(g, dx, &c)) return c >= 0 ? value_sym_of(g, in, k, 0, c) : 0;
    return ir_expr_kind(g, dx) == IR_EXPR_SYM ? value_sym_of(g, in, k, ir_expr_sym_id(g, dx), -1) : 0;
}

/* OneHot: the depth (a scalar graph input) inserted at `axis` into the indices' dims. */
static bool value_dims_one_hot(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank) {
    int64_t cnt;
    int in = ir_node_num_operands(g, n) > 1 ? value_input(g, ir_node_operand(g, n, 1), &cnt, true) : -1;
    IrTypeId ti = ir_value_type(g, ir_node_operand(g, n, 0));
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (in < 0 || cnt != 1 || !ti || ir_type_rank(g, ti) + 1 != rank || !ir_shape_axis_checked(&axis, rank)) return false;
    IrExprId depth = value_sym(g, in, 0);
    for (uint32_t k = 0, j = 0; k < rank; k++) dims[k] = (int64_t)k == axis ? depth : ir_type_dims(g, ti)[j++];
    return depth != 0;
}

/* The graph input operand `at` of n gives `per` entries per result dim (-1 when it does not). */
static int value_operand(IrGraph *g, IrNodeId n, uint32_t at, uint32_t rank, int64_t per) {
    int64_t cnt;
    int in = ir_node_num_operands(g, n) > at ? value_input(g, ir_node_operand(g, n, at), &cnt, false) : -1;
    return in >= 0 && cnt == per * (int64_t)rank ? in : -1;
}

/* The dims of operand 0 into xd (copied: new symbols and expressions may move the type's own)
 * when it has rank `rank`; NULL otherwise. */
static const IrExprId *operand_dims(const IrGraph *g, IrNodeId n, uint32_t rank, IrExprId *xd) {
    IrTypeId t = ir_value_type(g, ir_node_operand(g, n, 0));
    if (!t || ir_type_is_container(g, t) || ir_type_rank(g, t) != rank || rank > IR_MAX_RANK) return NULL;
    memcpy(xd, ir_type_dims(g, t), rank * sizeof *xd);
    return xd;
}

/* Tile: x_k * R_k. */
static bool value_dims_tile(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank) {
    int in = value_operand(g, n, 1, rank, 1);
    IrExprId xbuf[IR_MAX_RANK];
    const IrExprId *xd = operand_dims(g, n, rank, xbuf);
    for (uint32_t k = 0; in >= 0 && xd && k < rank; k++) {
        IrExprId v = value_sym(g, in, k);
        if (!v) return false;
        dims[k] = ir_expr_binary(g, IR_EXPR_MUL, xd[k], v);
    }
    return in >= 0 && xd;
}

/* Pad (pads only, no axes): x_k + P_k + P_(k+r). */
static bool value_dims_pad(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank) {
    int in = ir_node_num_operands(g, n) > 3 && ir_node_operand(g, n, 3) ? -1 : value_operand(g, n, 1, rank, 2);
    IrExprId xbuf[IR_MAX_RANK];
    const IrExprId *xd = operand_dims(g, n, rank, xbuf);
    for (uint32_t k = 0; in >= 0 && xd && k < rank; k++) {
        IrExprId a = value_sym(g, in, k), b = value_sym(g, in, k + rank);
        if (!a || !b) return false;
        dims[k] = ir_expr_binary(g, IR_EXPR_ADD, ir_expr_binary(g, IR_EXPR_ADD, xd[k], a), b);
    }
    return in >= 0 && xd;
}

/* ConstantOfShape: the entries. */
static bool value_dims_constant_of_shape(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank) {
    int in = value_operand(g, n, 0, rank, 1);
    for (uint32_t k = 0; in >= 0 && k < rank; k++)
        if (!(dims[k] = value_sym(g, in, k))) return false;
    return in >= 0;
}

/* Resize: sizes (stretch policy) are the resized axes' dims; scales give trunc(x_k * scale). The
 * other axes keep x's dims. */
static bool value_dims_resize(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank) {
    IrExprId xbuf[IR_MAX_RANK];
    const IrExprId *xd = operand_dims(g, n, rank, xbuf);
    if (!xd || rank > IR_MAX_RANK) return false;
    int64_t axes[IR_MAX_RANK];
    uint32_t na = rank;
    IrAttrValue av;
    if (ir_node_attr(g, n, "axes", &av) && av.kind == IR_ATTR_INTS && av.count > 0) {
        if (av.count > rank) return false;
        na = av.count;
        for (uint32_t i = 0; i < na; i++) {
            axes[i] = av.ints[i];
            if (!ir_shape_axis_checked(&axes[i], rank)) return false;
        }
    } else {
        for (uint32_t i = 0; i < na; i++) axes[i] = i;
    }
    memcpy(dims, xd, rank * sizeof *dims);
    uint32_t no = ir_node_num_operands(g, n);
    IrValueId scales = no > 2 ? ir_node_operand(g, n, 2) : 0, sizes = no > 3 ? ir_node_operand(g, n, 3) : 0;
    int64_t cnt;
    if (sizes && lower_value_nbytes(g, sizes) > 0) {
        const char *pol = ir_node_attr_string(g, n, "keep_aspect_ratio_policy", NULL);
        int in = value_input(g, sizes, &cnt, false);
        if (in < 0 || cnt != na || (pol && strcmp(pol, "stretch") != 0)) return false;
        for (uint32_t i = 0; i < na; i++)
            if (!(dims[axes[i]] = value_sym(g, in, i))) return false;
        return true;
    }
    int in = scales && ir_dtype_is_float(lower_value_dtype(g, scales)) ? value_input(g, scales, &cnt, true) : -1;
    if (in < 0 || cnt != na) return false;
    for (uint32_t i = 0; i < na; i++)
        if (!(dims[axes[i]] = value_scaled_sym(g, in, i, xd[axes[i]]))) return false;
    return true;
}

/* MaxUnpool with output_shape given as a graph input: its entries. */
static bool value_dims_max_unpool(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank) {
    int in = value_operand(g, n, 2, rank, 1);
    IrExprId xbuf[IR_MAX_RANK];
    const IrExprId *xd = operand_dims(g, n, rank, xbuf);
    for (uint32_t k = 0; in >= 0 && xd && k < rank; k++)
        if (!(dims[k] = value_sym(g, in, k))) return false;
    return in >= 0 && xd;
}

/* Expand to a shape given as a graph input: dim k broadcasts the input's (aligned at the right)
 * with entry k, max(x_k, S_k) where the two agree or one is 1 (the kernel checks that). */
static bool value_dims_expand(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank) {
    int64_t cnt;
    int in = ir_node_num_operands(g, n) > 1 ? value_input(g, ir_node_operand(g, n, 1), &cnt, false) : -1;
    IrTypeId tx = ir_value_type(g, ir_node_operand(g, n, 0));
    uint32_t rx = tx && !ir_type_is_container(g, tx) ? ir_type_rank(g, tx) : IR_RANK_UNKNOWN;
    if (in < 0 || rx == IR_RANK_UNKNOWN || rx > rank || cnt > rank || (cnt != rank && rx != rank)) return false;
    for (uint32_t k = 0; k < rank; k++) {
        IrExprId xk = k + rx >= rank ? ir_type_dims(g, tx)[k + rx - rank] : 0;
        IrExprId sk = k + cnt >= rank ? value_sym(g, in, k + cnt - rank) : 0;
        if ((k + cnt >= rank && !sk)) return false;
        dims[k] = xk && sk ? ir_expr_binary(g, IR_EXPR_MAX, xk, sk) : xk ? xk : sk;
    }
    return true;
}

/* The symbol of scalar integer graph input operand i of n (0 when it is not one). */
static IrExprId scalar_value_sym(IrGraph *g, IrNodeId n, uint32_t i) {
    int64_t cnt;
    int in = i < ir_node_num_operands(g, n) ? value_input(g, ir_node_operand(g, n, i), &cnt, false) : -1;
    return in >= 0 && cnt == 1 ? value_sym(g, in, 0) : 0;
}

static IrExprId ex2(IrGraph *g, IrExprKind k, IrExprId a, IrExprId b) { return a && b ? ir_expr_binary(g, k, a, b) : 0; }

/* Whether operand i of n is given and not empty (an empty tensor stands for an absent input). */
static bool operand_given(const IrGraph *g, IrNodeId n, uint32_t i) {
    IrValueId v = i < ir_node_num_operands(g, n) ? ir_node_operand(g, n, i) : 0;
    IrTypeId t = v ? ir_value_type(g, v) : 0;
    uint32_t r = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
    int64_t c;
    for (uint32_t k = 0; r != IR_RANK_UNKNOWN && k < r; k++)
        if (ir_expr_is_const(g, ir_type_dims(g, t)[k], &c) && c == 0) return false;
    return t != 0;
}

/* Signal ops from scalar graph inputs: a window's [size]; MelWeightMatrix's [dft_length / 2 + 1,
 * num_mel_bins]; DFT's dft_length at its axis (n / 2 + 1 when onesided); STFT's [batch, frames,
 * bins, 2] with frames = (len - frame_length) / max(frame_step, 1) + 1 (at least 0: a bad step or
 * length fails the run in the kernel, after the sizes are taken) and the frame length from the
 * frame_length input, else the window's length, else the signal's. */
static bool value_dims_signal(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank) {
    IrOp op = ir_node_op(g, n);
    IrExprId two = ir_expr_const(g, 2), one = ir_expr_const(g, 1);
    if (op == IR_OP_HANN_WINDOW || op == IR_OP_HAMMING_WINDOW || op == IR_OP_BLACKMAN_WINDOW) {
        dims[0] = scalar_value_sym(g, n, 0);
        return rank == 1 && dims[0];
    }
    if (op == IR_OP_MEL_WEIGHT_MATRIX) {
        dims[0] = ex2(g, IR_EXPR_ADD, ex2(g, IR_EXPR_DIV, scalar_value_sym(g, n, 1), two), one);
        dims[1] = scalar_value_sym(g, n, 0);
        return rank == 2 && dims[0] && dims[1];
    }
    IrValueId x = ir_node_operand(g, n, 0);
    IrTypeId tx = x ? ir_value_type(g, x) : 0;
    uint32_t rx = tx ? ir_type_rank(g, tx) : IR_RANK_UNKNOWN;
    if (rx == IR_RANK_UNKNOWN || rx > IR_MAX_RANK) return false;
    const IrExprId *xd = ir_type_dims(g, tx);
    bool onesided = ir_node_attr_int(g, n, "onesided", NULL) != 0;
    if (op == IR_OP_DFT) {
        int64_t axis = ir_node_attr_int(g, n, "axis", NULL);
        if (rank != rx || rank < 2 || ir_node_num_operands(g, n) > 2 || !ir_shape_axis_checked(&axis, rank) ||
            axis >= (int64_t)rank - 1 || !operand_given(g, n, 1))
            return false;
        IrExprId len = scalar_value_sym(g, n, 1);
        memcpy(dims, xd, rank * sizeof *dims);
        dims[axis] = onesided ? ex2(g, IR_EXPR_ADD, ex2(g, IR_EXPR_DIV, len, two), one) : len;
        dims[rank - 1] = two;
        return dims[axis] != 0;
    }
    if (op != IR_OP_STFT || rank != 4 || rx != 3) return false;
    IrExprId step = scalar_value_sym(g, n, 1), fl = xd[1];
    if (operand_given(g, n, 3)) {
        fl = scalar_value_sym(g, n, 3);
    } else if (operand_given(g, n, 2)) {
        IrTypeId tw = ir_value_type(g, ir_node_operand(g, n, 2));
        if (!tw || ir_type_rank(g, tw) != 1) return false;
        fl = ir_type_dims(g, tw)[0];
    }
    IrExprId frames = ex2(g, IR_EXPR_ADD, ex2(g, IR_EXPR_DIV, ex2(g, IR_EXPR_SUB, xd[1], fl), ex2(g, IR_EXPR_MAX, step, one)), one);
    dims[0] = xd[0];
    dims[1] = ex2(g, IR_EXPR_MAX, frames, ir_expr_const(g, 0));
    dims[2] = onesided ? ex2(g, IR_EXPR_ADD, ex2(g, IR_EXPR_DIV, fl, two), one) : fl;
    dims[3] = two;
    return dims[1] && dims[2];
}

typedef bool (*ValueInputDims)(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank);
static const ValueInputDims value_input_rows[IR_OP_COUNT] = {
#define LOWER_OP(ID, batch, shape_args, data_dim, data_name, flags)
#define LOWER_VALUE_INPUT(ID, dims) [IR_OP_##ID] = value_dims_##dims,
#include "backend/lower/lower_ops.def"
#undef LOWER_VALUE_INPUT
#undef LOWER_OP
};

/* Result dims of n from an input's values (false when n is not such a node). */
static bool value_input_dims(IrGraph *g, IrNodeId n, IrExprId *dims, uint32_t rank) {
    ValueInputDims f = value_input_rows[ir_node_op(g, n)];
    return f && f(g, n, dims, rank);
}

bool lower_value_input_sym(const IrGraph *g, IrSymId s, LowerValueBind *b) {
    const char *name = ir_sym_name(g, s);
    unsigned a, k;
    int used = 0;
    if (strncmp(name, "value", 5) != 0 || sscanf(name + 5, "%u_%u%n", &a, &k, &used) != 2) return false;
    const char *rest = name + 5 + used;
    *b = (LowerValueBind){.in = a, .k = k, .c = -1};
    if (strncmp(rest, "_mul_", 5) == 0) {
        b->by = ir_sym_find(g, rest + 5, strlen(rest + 5));
        if (!b->by || b->by == s) return false;
    } else if (strncmp(rest, "_mul", 4) == 0) {
        char *end;
        long long c = strtoll(rest + 4, &end, 10);
        if (*end || c < 0 || c > (1ll << 40)) return false;
        b->c = c;
    } else if (*rest) {
        return false;
    }
    char canon[160];
    value_sym_name(g, canon, sizeof canon, (int)a, k, b->by, b->c);
    int64_t cnt;
    return strcmp(canon, name) == 0 && a < ir_graph_num_inputs(g) &&
           value_input(g, ir_graph_input(g, a), &cnt, true) == (int)a && k < cnt;
}

/* Gives each `?` dim of a value-decided node's results a data symbol; TopK's indices share
 * the symbols of its values. */
static IrStatus value_symbols(IrGraph *g, IrNodeId n, bool *added, IrDiag *diag) {
    bool any = false;
    IrExprId first[IR_MAX_RANK];
    uint32_t first_rank = 0;
    for (uint32_t r = 0; r < ir_node_num_results(g, n); r++) {
        IrValueId y = ir_node_result(g, n, r);
        IrTypeId t = y ? ir_value_type(g, y) : 0;
        uint32_t rank = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
        if (!t || ir_type_is_container(g, t) || rank == IR_RANK_UNKNOWN || rank > IR_MAX_RANK) continue;
        IrExprId dims[IR_MAX_RANK];
        memcpy(dims, ir_type_dims(g, t), rank * sizeof *dims);
        bool changed = false;
        for (uint32_t k = 0; k < rank; k++) {
            if (ir_expr_kind(g, dims[k]) != IR_EXPR_UNKNOWN) continue;
            if (ir_node_op(g, n) == IR_OP_TOP_K && r > 0 && first_rank == rank) {
                dims[k] = first[k];
                changed = true;
                continue;
            }
            int64_t hi = lower_value_dim_hi(g, n, k);
            if (hi < 0) continue;
            IrSymId s = fresh_data_sym(g, VALUE_BASE, hi);
            if (!s) {
                ir_diag_error(diag, "llvm backend: cannot name the data-dependent dim of %%%s", ir_value_name(g, y));
                return IR_ENOMEM;
            }
            dims[k] = ir_expr_sym(g, s);
            changed = true;
        }
        if (r == 0) memcpy(first, dims, rank * sizeof *dims), first_rank = rank;
        if (!changed) continue;
        ir_value_set_type(g, y, ir_type_tensor(g, ir_type_dtype(g, t), rank, dims));
        any = true;
    }
    *added |= any;
    return any ? forget_after(g, n) : IR_OK;
}

IrStatus lower_data_symbols(IrGraph *g, bool *added, IrDiag *diag) {
    *added = false;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) {
        IrStatus vs = value_dims_op(g, n) ? value_symbols(g, n, added, diag) : IR_OK;
        if (vs) return vs;
        IrValueId y0 = ir_node_num_results(g, n) ? ir_node_result(g, n, 0) : 0;
        IrTypeId t0 = y0 ? ir_value_type(g, y0) : 0;
        uint32_t r0 = t0 && !ir_type_is_container(g, t0) ? ir_type_rank(g, t0) : IR_RANK_UNKNOWN;
        IrExprId vdims[IR_MAX_RANK];
        bool unknown = false;
        for (uint32_t k = 0; r0 != IR_RANK_UNKNOWN && r0 <= IR_MAX_RANK && k < r0; k++)
            unknown |= ir_expr_kind(g, ir_type_dims(g, t0)[k]) == IR_EXPR_UNKNOWN;
        if (unknown && value_input_dims(g, n, vdims, r0)) {
            ir_value_set_type(g, y0, ir_type_tensor(g, ir_type_dtype(g, t0), r0, vdims));
            if ((vs = forget_after(g, n))) return vs;
            *added = true;
        }
        uint32_t k;
        int64_t hi;
        if (!lower_data_dim(g, n, &k, &hi) || hi < 0) continue;
        IrValueId y = ir_node_result(g, n, 0);
        IrTypeId t = ir_value_type(g, y);
        uint32_t r = ir_type_rank(g, t);
        if (!t || r == IR_RANK_UNKNOWN || k >= r || r > IR_MAX_RANK) continue;
        IrExprId dims[IR_MAX_RANK];
        memcpy(dims, ir_type_dims(g, t), r * sizeof *dims);
        if (lower_data_sym(g, n)) continue; /* made by an earlier run */
        /* a fresh symbol even where the model names one: a symbol of the model may be bound by an
         * input or ranged below what the data can give, and the kernel writes the true count */
        IrOp op = ir_node_op(g, n);
        IrSymId s = fresh_data_sym(g, data_base(op), hi);
        if (!s) {
            ir_diag_error(diag, "llvm backend: cannot name the data-dependent dim of %%%s", ir_value_name(g, y));
            return IR_ENOMEM;
        }
        dims[k] = ir_expr_sym(g, s);
        ir_value_set_type(g, y, ir_type_tensor(g, ir_type_dtype(g, t), r, dims));
        IrStatus fs = forget_after(g, n);
        if (fs) return fs;
        for (uint32_t i = 1; op == IR_OP_UNIQUE && i < 4 && i < ir_node_num_results(g, n); i++) /* indices, counts */
            if (i != 2 && ir_node_result(g, n, i))
                ir_value_set_type(g, ir_node_result(g, n, i), ir_type_tensor(g, IR_DTYPE_I64, 1, &dims[k]));
        *added = true;
    }
    return IR_OK;
}

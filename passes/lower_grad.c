/* lower-grad: turns ai.onnx.preview.training.Gradient nodes into the ops that compute the
 * gradients (reverse mode, written out in the graph), so the backends, which know no Gradient,
 * can compile them. The nodes between xs (and zs, held constant) and y are walked from y back;
 * each contributes its operands' gradients: Add, Sub, Sum (the output gradient), Mul, Div, Neg,
 * Identity, Relu (Where x > 0), Sigmoid, Tanh, Exp, Log, and 2-D MatMul (with transposes);
 * gradients of broadcast operands are summed over the broadcast dims (ReduceSum + Reshape,
 * static shapes). dy/dy is ones; an x that y does not depend on gets zeros. A Gradient through
 * any other op, a fused group or a symbolic shape stays as it is (the interpreter computes it;
 * the backends refuse it naming the op). The interpreter computes in f64 and rounds once; the
 * lowered graph rounds at every op (within 1e-6 relative on the tests' models).
 */
#include "ir/shape.h"
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

#define GRAD_MAX_RANK 16

typedef struct LowerGrad {
    IrGraph *g;
    IrNodeId at;      /* new nodes go before the Gradient node */
    IrValueId *grad;  /* accumulated gradient by value id (values of the start) */
    uint8_t *need;    /* values on a path to y */
    uint32_t nv;
    bool failed;
} LowerGrad;

static IrValueId node1(LowerGrad *s, IrOp op, uint32_t n, const IrValueId *ops) {
    if (s->failed) return 0;
    IrNodeId nd = ir_node_create_before(s->g, s->at, op, n, ops, 1, NULL, NULL);
    if (!nd) {
        s->failed = true;
        return 0;
    }
    ir_pass_inherit_provenance(s->g, nd, s->at);
    IrDiag quiet;
    ir_diag_init(&quiet, NULL, NULL);
    IrTypeId t = 0;
    if (ir_node_infer_types(s->g, nd, &quiet, &t) == IR_OK && t) ir_value_set_type(s->g, ir_node_result(s->g, nd, 0), t);
    else s->failed = true;
    return ir_node_result(s->g, nd, 0);
}

static IrValueId op2(LowerGrad *s, IrOp op, IrValueId a, IrValueId b) { return node1(s, op, 2, (IrValueId[]){a, b}); }
static IrValueId op1(LowerGrad *s, IrOp op, IrValueId a) { return node1(s, op, 1, &a); }

static IrValueId const_i64s(LowerGrad *s, const int64_t *v, int64_t n) {
    IrTypeId t = ir_type_tensor_i64(s->g, IR_DTYPE_I64, 1, &n);
    IrConstId c = ir_const_create(s->g, t, v, (size_t)n * sizeof *v);
    IrValueId r = c ? ir_graph_add_const_value(s->g, NULL, c) : 0;
    if (!r) s->failed = true;
    return r;
}

/* A constant of dtype dt holding value x, shaped like v (static) or a scalar. */
static IrValueId filled(LowerGrad *s, IrValueId like, double x, bool scalar) {
    IrTypeId t = ir_value_type(s->g, like);
    IrDType dt = ir_type_dtype(s->g, t);
    uint32_t r = scalar ? 0 : ir_type_rank(s->g, t);
    int64_t d[GRAD_MAX_RANK];
    if (r > GRAD_MAX_RANK) {
        s->failed = true;
        return 0;
    }
    for (uint32_t k = 0; k < r; k++)
        if (!ir_expr_is_const(s->g, ir_type_dims(s->g, t)[k], &d[k])) s->failed = true, d[k] = 0;
    int64_t numel = ir_shape_numel(r, d);
    size_t es = ir_dtype_size(dt);
    unsigned char *buf = calloc((size_t)(numel ? numel : 1), es ? es : 1);
    if (!buf || s->failed || (dt != IR_DTYPE_F32 && dt != IR_DTYPE_F64)) {
        free(buf);
        s->failed = true;
        return 0;
    }
    for (int64_t i = 0; i < numel; i++) ir_elem_set_f64(dt, buf, (size_t)i, x);
    IrConstId c = ir_const_create(s->g, ir_type_tensor_i64(s->g, dt, r, d), buf, (size_t)numel * es);
    free(buf);
    IrValueId v = c ? ir_graph_add_const_value(s->g, NULL, c) : 0;
    if (!v) s->failed = true;
    return v;
}

/* gy summed down to the shape of operand v (numpy broadcasting undone; static shapes). */
static IrValueId unbroadcast(LowerGrad *s, IrValueId gy, IrValueId v) {
    const IrGraph *g = s->g;
    IrTypeId ty = ir_value_type(g, gy), tv = ir_value_type(g, v);
    uint32_t ry = ir_type_rank(g, ty), rv = ir_type_rank(g, tv);
    if (ry == IR_RANK_UNKNOWN || rv == IR_RANK_UNKNOWN || rv > ry || ry > GRAD_MAX_RANK) {
        s->failed = true;
        return 0;
    }
    int64_t axes[GRAD_MAX_RANK], dv[GRAD_MAX_RANK];
    uint32_t na = 0;
    for (uint32_t k = 0; k < ry; k++) {
        int64_t a, b = 1;
        if (!ir_expr_is_const(g, ir_type_dims(g, ty)[k], &a)) s->failed = true;
        int32_t j = (int32_t)k - (int32_t)(ry - rv);
        if (j >= 0 && !ir_expr_is_const(g, ir_type_dims(g, tv)[j], &b)) s->failed = true;
        if (j >= 0) dv[j] = b;
        if (j < 0 || (b == 1 && a != 1)) axes[na++] = k;
    }
    if (s->failed) return 0;
    if (na == 0) return gy;
    IrValueId sum = op2(s, IR_OP_REDUCE_SUM, gy, const_i64s(s, axes, na)); /* keepdims */
    return op2(s, IR_OP_RESHAPE, sum, const_i64s(s, dv, rv));
}

static void accumulate(LowerGrad *s, IrValueId v, IrValueId gv) {
    if (!v || !gv || v > s->nv || s->failed) return;
    s->grad[v] = s->grad[v] ? op2(s, IR_OP_ADD, s->grad[v], gv) : gv;
}

static void backprop(LowerGrad *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrValueId y = ir_node_result(g, n, 0), gy = y <= s->nv ? s->grad[y] : 0;
    if (!gy) return;
    IrValueId a = ir_node_operand(g, n, 0), b = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    switch (ir_node_op(g, n)) {
    case IR_OP_ADD:
        accumulate(s, a, unbroadcast(s, gy, a));
        accumulate(s, b, unbroadcast(s, gy, b));
        return;
    case IR_OP_SUB:
        accumulate(s, a, unbroadcast(s, gy, a));
        accumulate(s, b, unbroadcast(s, op1(s, IR_OP_NEG, gy), b));
        return;
    case IR_OP_SUM:
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++)
            accumulate(s, ir_node_operand(g, n, i), unbroadcast(s, gy, ir_node_operand(g, n, i)));
        return;
    case IR_OP_MUL:
        accumulate(s, a, unbroadcast(s, op2(s, IR_OP_MUL, gy, b), a));
        accumulate(s, b, unbroadcast(s, op2(s, IR_OP_MUL, gy, a), b));
        return;
    case IR_OP_DIV: /* d(a/b)/db = -(a/b)/b */
        accumulate(s, a, unbroadcast(s, op2(s, IR_OP_DIV, gy, b), a));
        accumulate(s, b, unbroadcast(s, op1(s, IR_OP_NEG, op2(s, IR_OP_DIV, op2(s, IR_OP_MUL, gy, y), b)), b));
        return;
    case IR_OP_NEG: accumulate(s, a, op1(s, IR_OP_NEG, gy)); return;
    case IR_OP_IDENTITY: accumulate(s, a, gy); return;
    case IR_OP_RELU: {
        IrValueId pos = op2(s, IR_OP_GREATER, a, filled(s, a, 0.0, true));
        accumulate(s, a, node1(s, IR_OP_WHERE, 3, (IrValueId[]){pos, gy, filled(s, a, 0.0, true)}));
        return;
    }
    case IR_OP_SIGMOID: /* y (1 - y) */
        accumulate(s, a, op2(s, IR_OP_MUL, gy, op2(s, IR_OP_MUL, y, op2(s, IR_OP_SUB, filled(s, y, 1.0, true), y))));
        return;
    case IR_OP_TANH: /* 1 - y^2 */
        accumulate(s, a, op2(s, IR_OP_MUL, gy, op2(s, IR_OP_SUB, filled(s, y, 1.0, true), op2(s, IR_OP_MUL, y, y))));
        return;
    case IR_OP_EXP: accumulate(s, a, op2(s, IR_OP_MUL, gy, y)); return;
    case IR_OP_LOG: accumulate(s, a, op2(s, IR_OP_DIV, gy, a)); return;
    case IR_OP_MAT_MUL: {
        if (ir_type_rank(g, ir_value_type(g, a)) != 2 || ir_type_rank(g, ir_value_type(g, b)) != 2) {
            s->failed = true;
            return;
        }
        accumulate(s, a, op2(s, IR_OP_MAT_MUL, gy, op1(s, IR_OP_TRANSPOSE, b)));
        accumulate(s, b, op2(s, IR_OP_MAT_MUL, op1(s, IR_OP_TRANSPOSE, a), gy));
        return;
    }
    default: s->failed = true; return;
    }
}

static IrValueId value_named(const IrGraph *g, IrStrId name) {
    for (IrValueId v = 1; v <= ir_graph_num_values(g); v++)
        if (ir_value_name_id(g, v) == name) return v;
    return 0;
}

/* Marks the values y depends on through nodes of the top level, stopping at leaves; false when
 * y depends on anything else than leaves, constants and graph inputs through such nodes. */
static bool mark(LowerGrad *s, IrValueId v, const uint8_t *leaf, uint32_t depth) {
    const IrGraph *g = s->g;
    if (!v || v > s->nv || s->need[v] || depth > 100000) return v && depth <= 100000;
    s->need[v] = 1;
    if (leaf[v] || ir_value_kind(g, v) != IR_VALUE_RESULT) return true;
    IrNodeId n = ir_value_def_node(g, v);
    if (ir_node_region(g, n) != IR_ROOT_REGION || ir_node_num_regions(g, n)) return false;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++)
        if (!mark(s, ir_node_operand(g, n, i), leaf, depth + 1)) return false;
    return true;
}

/* One Gradient node: true when it was replaced. */
static bool lower_one(IrPassContext *c, IrNodeId gn, IrStatus *st) {
    IrGraph *g = ir_pass_graph(c);
    IrAttrValue xs, ys, zs;
    if (!ir_node_attr(g, gn, "xs", &xs) || !ir_node_attr(g, gn, "y", &ys) || xs.count != ir_node_num_results(g, gn))
        return false;
    LowerGrad s = {.g = g, .at = gn, .nv = ir_graph_num_values(g)};
    s.grad = calloc(s.nv + 1, sizeof *s.grad);
    s.need = calloc(s.nv + 1, 1);
    uint8_t *leaf = calloc(s.nv + 1, 1);
    IrValueId *xv = calloc(xs.count + 1, sizeof *xv);
    IrValueId y = value_named(g, ys.kind == IR_ATTR_STRING ? ys.s : ys.strs ? ys.strs[0] : 0);
    bool ok = s.grad && s.need && leaf && xv && y;
    if (!ok && (!s.grad || !s.need || !leaf || !xv)) *st = IR_ENOMEM;
    for (uint32_t i = 0; ok && i < xs.count; i++) ok = (xv[i] = value_named(g, xs.strs[i])) != 0, leaf[xv[i]] = 1;
    if (ok && ir_node_attr(g, gn, "zs", &zs))
        for (uint32_t i = 0; i < zs.count; i++) {
            IrValueId z = value_named(g, zs.strs[i]);
            if (z) leaf[z] = 1;
        }
    ok = ok && mark(&s, y, leaf, 0);
    if (ok) { /* reverse order of the top level, from y back */
        s.grad[y] = filled(&s, y, 1.0, false);
        for (IrNodeId n = ir_node_prev(g, gn); n && !s.failed; n = ir_node_prev(g, n)) {
            IrValueId r = ir_node_num_results(g, n) == 1 ? ir_node_result(g, n, 0) : 0;
            if (r && r <= s.nv && s.need[r] && !leaf[r]) backprop(&s, n);
        }
        IrValueId *out = calloc(xs.count + 1, sizeof *out);
        for (uint32_t i = 0; out && i < xs.count && !s.failed; i++)
            out[i] = s.grad[xv[i]] ? s.grad[xv[i]] : filled(&s, xv[i], 0.0, false);
        ok = out && !s.failed;
        for (uint32_t i = 0; ok && i < xs.count; i++) { /* the results: Identity of the gradient, same names */
            IrValueId r = ir_node_result(g, gn, i);
            if (!r) continue;
            IrValueId id = op1(&s, IR_OP_IDENTITY, out[i]);
            if (!id || s.failed) {
                ok = false;
                break;
            }
            out[i] = id;
        }
        if (ok) {
            char **names = calloc(xs.count + 1, sizeof *names);
            for (uint32_t i = 0; names && i < xs.count; i++)
                if (ir_node_result(g, gn, i)) {
                    names[i] = strdup(ir_value_name(g, ir_node_result(g, gn, i)));
                    ir_graph_replace_uses(g, ir_node_result(g, gn, i), out[i]);
                }
            ir_node_erase(g, gn);
            for (uint32_t i = 0; names && i < xs.count; i++)
                if (names[i] && ir_value_rename(g, out[i], names[i])) {} /* a clash keeps the generated name */
            for (uint32_t i = 0; names && i < xs.count; i++) free(names[i]);
            free(names);
        }
        free(out);
    }
    /* a failed attempt may leave unused nodes before gn; dce removes them */
    free(s.grad), free(s.need), free(leaf), free(xv);
    return ok;
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    IrStatus st = IR_OK;
    int64_t lowered = 0, kept = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION), next; n && !st; n = next) {
        next = ir_node_next(g, n);
        if (ir_node_op(g, n) != IR_OP_GRADIENT) continue;
        if (lower_one(c, n, &st)) lowered++;
        else kept++;
    }
    if (lowered) ir_pass_changed(c);
    ir_pass_stat(c, "gradients-lowered", lowered);
    ir_pass_stat(c, "gradients-kept", kept);
    return st ? st : ir_graph_status(g);
}

const IrPass pass_lower_grad = {
    .name = "lower-grad",
    .summary = "write out Gradient nodes as the ops computing them (reverse mode)",
    .options = (const IrPassOption[]){{NULL, NULL, NULL}},
    .run = run,
};

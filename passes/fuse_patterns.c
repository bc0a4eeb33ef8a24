/* fuse: the rewrites and recognisers behind the fuse pass (passes/fuse.c drives them).
 *
 * - BatchNormalization (inference) after a Conv whose result feeds only it is folded into the
 *   Conv: w' = w*gamma/sqrt(var+eps) per output channel, b' = (b-mean)*gamma/sqrt(var+eps)+beta,
 *   computed in double and stored as f32 graph constants (a splat weight scaled uniformly stays a
 *   ConstantOfShape splat, so light models stay light). A rewrite, not a group.
 * - Epilogues: Conv/ConvTranspose/Gemm/MatMul followed by a chain of single-use bias or
 *   residual Adds (Sum of two) and activations.
 * - Patterns kept whole: attention (MatMul, scale by Mul/Div, optional mask Add/Where, Softmax,
 *   MatMul), decomposed LayerNorm, GELU in erf and tanh form in any operand order.
 * Matchers only look at free nodes of the current region and check single use where a pattern
 * relies on it; fuse_form checks convexity and size.
 */
#include "ir/shape.h"
#include "passes/fuse_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- constants --------------------------------------------------------------------------------- */

static const float zero_f32 = 0.0f;

static bool tensor_view(const IrGraph *g, IrConstId c, FuseConst *out) {
    IrTypeId t = ir_const_type(g, c);
    uint32_t rank = ir_type_rank(g, t);
    if (rank == IR_RANK_UNKNOWN || rank > 8 || !ir_type_numel(g, t, &out->numel)) return false;
    out->dt = ir_type_dtype(g, t);
    out->data = ir_const_data(g, c);
    out->splat = false;
    out->rank = rank;
    for (uint32_t i = 0; i < rank; i++) out->dims[i] = ir_expr_const_value(g, ir_type_dims(g, t)[i]);
    out->shape_operand = 0;
    return out->numel == 0 || out->data;
}

bool fuse_const_view(const IrGraph *g, IrValueId v, FuseConst *out) {
    if (!v) return false;
    IrConstId c = ir_value_const(g, v);
    if (c) return tensor_view(g, c, out);
    IrNodeId d = ir_value_def_node(g, v);
    if (!d) return false;
    IrAttrValue a;
    if (ir_node_op(g, d) == IR_OP_CONSTANT)
        return ir_node_attr(g, d, "value", &a) && a.kind == IR_ATTR_TENSOR && tensor_view(g, a.tensor, out);
    if (ir_node_op(g, d) != IR_OP_CONSTANT_OF_SHAPE) return false;
    FuseConst shape;
    if (!fuse_const_view(g, ir_node_operand(g, d, 0), &shape) || !ir_dtype_is_int(shape.dt) || shape.numel > 8)
        return false;
    out->rank = (uint32_t)shape.numel;
    for (uint32_t i = 0; i < out->rank; i++) out->dims[i] = (int64_t)fuse_const_at(&shape, i);
    if (!ir_shape_numel_checked(out->rank, out->dims, &out->numel)) return false;
    out->splat = true;
    out->shape_operand = ir_node_operand(g, d, 0);
    if (ir_node_attr(g, d, "value", &a)) {
        FuseConst val;
        if (a.kind != IR_ATTR_TENSOR || !tensor_view(g, a.tensor, &val) || val.numel != 1) return false;
        out->dt = val.dt;
        out->data = val.data;
    } else {
        out->dt = IR_DTYPE_F32;
        out->data = &zero_f32;
    }
    return true;
}

double fuse_const_at(const FuseConst *k, int64_t i) { return ir_elem_get_f64(k->dt, k->data, k->splat ? 0 : (size_t)i); }

bool fuse_const_near(const IrGraph *g, IrValueId v, double x, double rtol) {
    FuseConst k;
    if (!fuse_const_view(g, v, &k) || k.numel < 1 || (!k.splat && k.numel > 4096) || !ir_dtype_is_float(k.dt))
        return false;
    int64_t n = k.splat ? 1 : k.numel;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(fuse_const_at(&k, i) - x) <= rtol * fabs(x) + 1e-12)) return false;
    return true;
}

/* ---- BatchNormalization folding ---------------------------------------------------------------- */

typedef struct Bn {
    Fuse *f;
    IrGraph *g;
    uint32_t nval;
    uint32_t *uses;
    IrValueId *repl;
    uint8_t *orphan, *root_out;
} Bn;

static IrValueId bn_resolve(const Bn *b, IrValueId v) {
    while (v && v <= b->nval && b->repl[v]) v = b->repl[v];
    return v;
}

void fuse_copy_attrs(IrGraph *g, IrNodeId from, IrNodeId to) {
    for (uint32_t i = 0; i < ir_node_num_attrs(g, from) && !ir_graph_status(g); i++) {
        IrAttrValue a = ir_node_attr_at(g, from, i);
        IrStrId name = ir_node_attr_name(g, from, i);
        size_t elem = a.kind == IR_ATTR_INTS ? sizeof(int64_t) : a.kind == IR_ATTR_FLOATS ? sizeof(double)
                                                             : a.kind == IR_ATTR_STRINGS ? sizeof(IrStrId) : 0;
        void *tmp = NULL; /* arrays live in graph pools that may move while the copy is stored */
        if (elem && a.count) {
            const void *src = a.kind == IR_ATTR_INTS ? (const void *)a.ints
                              : a.kind == IR_ATTR_FLOATS ? (const void *)a.floats : (const void *)a.strs;
            if (!(tmp = malloc(elem * a.count))) return;
            memcpy(tmp, src, elem * a.count);
            if (a.kind == IR_ATTR_INTS) a.ints = tmp;
            else if (a.kind == IR_ATTR_FLOATS) a.floats = tmp;
            else a.strs = tmp;
        }
        ir_node_set_attr_id(g, to, name, &a);
        free(tmp);
    }
}

/* Provenance of `dst`: the provenance (or names) of a then b. */
void fuse_merge_provenance(IrGraph *g, IrNodeId dst, IrNodeId a, IrNodeId b) {
    IrStrId ids[64];
    uint32_t n = 0;
    IrNodeId src[2] = {a, b};
    for (int s = 0; s < 2; s++) {
        uint32_t np = ir_node_num_provenance(g, src[s]);
        if (!np && *ir_node_name(g, src[s]) && n < 64) ids[n++] = fuse_node_name_id(g, src[s]);
        for (uint32_t i = 0; i < np && n < 64; i++) ids[n++] = ir_node_provenance(g, src[s], i);
    }
    if (n) ir_node_set_provenance(g, dst, n, ids);
}

char *fuse_fresh_name(const IrGraph *g, const char *base, const char *suffix) {
    size_t n = strlen(base) + strlen(suffix) + 16;
    char *s = malloc(n);
    if (!s) return NULL;
    snprintf(s, n, "%s%s", base, suffix);
    for (uint32_t k = 2; ir_value_find(g, s, strlen(s)); k++) snprintf(s, n, "%s%s%u", base, suffix, k);
    return s;
}

static IrValueId add_const(IrGraph *g, const char *base, const float *data, uint32_t rank, const int64_t *dims) {
    size_t n = (size_t)ir_shape_numel(rank, dims);
    IrConstId c = ir_const_create(g, ir_type_tensor_i64(g, IR_DTYPE_F32, rank, dims), data, n * sizeof(float));
    char *name = fuse_fresh_name(g, base, ".bnfold");
    IrValueId v = c && name ? ir_graph_add_const_value(g, name, c) : 0;
    free(name);
    return v;
}

void fuse_mark_orphan(const IrGraph *g, uint32_t nval, uint8_t *orphan, IrValueId v) {
    if (!v || v > nval) return;
    IrValueKind k = ir_value_kind(g, v);
    IrOp op = k == IR_VALUE_RESULT ? ir_node_op(g, ir_value_def_node(g, v)) : IR_OP_NONE;
    if (k == IR_VALUE_CONST || op == IR_OP_CONSTANT || op == IR_OP_CONSTANT_OF_SHAPE) orphan[v] = 1;
}

void fuse_drop_orphans(IrGraph *g, uint32_t nval, uint8_t *orphan) {
    uint32_t n = ir_graph_num_values(g);
    uint32_t *now = calloc((size_t)n + 1, sizeof *now);
    if (!now) return;
    ir_graph_count_uses(g, now);
    for (uint32_t v = 1; v <= nval; v++) {
        if (!orphan[v] || now[v] || ir_value_kind(g, v) != IR_VALUE_RESULT) continue;
        IrNodeId d = ir_value_def_node(g, v);
        if (!ir_node_alive(g, d)) continue;
        for (uint32_t i = 0; i < ir_node_num_operands(g, d); i++) fuse_mark_orphan(g, nval, orphan, ir_node_operand(g, d, i));
        ir_node_erase(g, d);
    }
    ir_graph_count_uses(g, now);
    for (uint32_t v = 1; v <= n; v++) now[v] = now[v] || v > nval || !orphan[v];
    ir_graph_remove_unused_consts(g, now);
    free(now);
}

/* A weight the fold may leave unused. */
static void mark_orphan(Bn *b, IrValueId v) { fuse_mark_orphan(b->g, b->nval, b->orphan, v); }

/* The folded weight: a ConstantOfShape splat when the weight is a splat scaled uniformly, else
 * a graph constant. */
static IrValueId folded_weight(Bn *b, IrNodeId conv, IrValueId w, const FuseConst *wk, const double *s, int64_t m) {
    IrGraph *g = b->g;
    bool uniform = true;
    for (int64_t o = 1; o < m; o++) uniform &= s[o] == s[0];
    if (wk->splat && uniform) {
        float x = (float)(fuse_const_at(wk, 0) * s[0]);
        int64_t one = 1;
        IrConstId c = ir_const_create(g, ir_type_tensor_i64(g, IR_DTYPE_F32, 1, &one), &x, sizeof x);
        char *name = fuse_fresh_name(g, ir_value_name(g, w), ".bnfold");
        IrTypeId t = ir_value_type(g, w);
        IrNodeId n = name && c ? ir_node_create_before(g, conv, IR_OP_CONSTANT_OF_SHAPE, 1, &wk->shape_operand, 1,
                                                       (const char *const *)&name, &t)
                               : 0;
        free(name);
        if (!n) return 0;
        IrAttrValue a = {.kind = IR_ATTR_TENSOR, .tensor = c};
        ir_node_set_attr(g, n, "value", &a);
        ir_pass_inherit_provenance(g, n, conv);
        return ir_node_result(g, n, 0);
    }
    float *data = malloc((size_t)(wk->numel ? wk->numel : 1) * sizeof *data);
    if (!data) return 0;
    int64_t per = wk->numel / m;
    for (int64_t i = 0; i < wk->numel; i++) data[i] = (float)(fuse_const_at(wk, i) * s[i / per]);
    IrValueId v = add_const(g, ir_value_name(g, w), data, wk->rank, wk->dims);
    free(data);
    return v;
}

/* Returns true when bn was folded into its Conv (bn is then erased). */
static bool fold_one(Bn *b, IrNodeId bn) {
    IrGraph *g = b->g;
    if (ir_node_attr_int(g, bn, "training_mode", NULL) != 0) return false;
    for (uint32_t i = 1; i < ir_node_num_results(g, bn); i++) {
        IrValueId r = ir_node_result(g, bn, i);
        if (r && (r > b->nval || b->uses[r])) return false;
    }
    IrValueId x = ir_node_operand(g, bn, 0), bn_out = ir_node_result(g, bn, 0);
    if (!x || !bn_out || x > b->nval || b->uses[x] != 1 || ir_value_kind(g, x) != IR_VALUE_RESULT) return false;
    IrNodeId conv = ir_value_def_node(g, x);
    if (ir_node_op(g, conv) != IR_OP_CONV || ir_node_region(g, conv) != ir_node_region(g, bn) ||
        ir_node_num_results(g, conv) != 1)
        return false;
    IrDType xdt = ir_type_dtype(g, ir_value_type(g, x));
    if (xdt != IR_DTYPE_NONE && xdt != IR_DTYPE_F32) return false;
    IrValueId w = ir_node_operand(g, conv, 1), bias = ir_node_num_operands(g, conv) > 2 ? ir_node_operand(g, conv, 2) : 0;
    FuseConst wk, bk, pk[4];
    if (!fuse_const_view(g, w, &wk) || wk.dt != IR_DTYPE_F32 || wk.rank < 3 || wk.dims[0] < 1) return false;
    int64_t m = wk.dims[0];
    if (bias && (!fuse_const_view(g, bias, &bk) || !ir_dtype_is_float(bk.dt) || bk.numel != m)) return false;
    for (int i = 0; i < 4; i++)
        if (!fuse_const_view(g, ir_node_operand(g, bn, 1 + (uint32_t)i), &pk[i]) || !ir_dtype_is_float(pk[i].dt) ||
            pk[i].numel != m)
            return false;
    double eps = ir_node_attr_float(g, bn, "epsilon", NULL);
    double *s = malloc((size_t)m * sizeof *s);
    float *bf = malloc((size_t)m * sizeof *bf);
    if (!s || !bf) {
        free(s), free(bf);
        return false;
    }
    for (int64_t o = 0; o < m; o++) {
        double gamma = fuse_const_at(&pk[0], o), beta = fuse_const_at(&pk[1], o);
        double mean = fuse_const_at(&pk[2], o), var = fuse_const_at(&pk[3], o);
        s[o] = gamma / sqrt(var + eps);
        bf[o] = (float)(((bias ? fuse_const_at(&bk, o) : 0.0) - mean) * s[o] + beta);
    }
    IrValueId w2 = folded_weight(b, conv, w, &wk, s, m);
    char *bname = malloc(strlen(ir_value_name(g, bias ? bias : w)) + 8);
    if (bname) sprintf(bname, "%s%s", ir_value_name(g, bias ? bias : w), bias ? "" : ".bias");
    IrValueId b2 = w2 && bname ? add_const(g, bname, bf, 1, &m) : 0;
    free(bname);
    free(s), free(bf);
    if (!w2 || !b2) return false;

    IrNodeId c2 = conv;
    if (ir_node_num_operands(g, conv) > 2) {
        ir_node_set_operand(g, conv, 1, w2);
        ir_node_set_operand(g, conv, 2, b2);
    } else {
        IrValueId ops[3] = {ir_node_operand(g, conv, 0), w2, b2};
        IrTypeId t = ir_value_type(g, x) ? ir_value_type(g, x) : ir_value_type(g, bn_out);
        c2 = ir_node_create_before(g, conv, IR_OP_CONV, 3, ops, 1, NULL, &t);
        if (!c2) return false;
        fuse_copy_attrs(g, conv, c2);
        char *name = strdup(ir_node_name(g, conv)); /* the name lives in storage that may move */
        if (name) ir_node_set_name(g, c2, name);
        free(name);
        ir_node_set_loc(g, c2, ir_node_loc(g, conv));
    }
    fuse_merge_provenance(g, c2, conv, bn);
    mark_orphan(b, w);
    mark_orphan(b, bias);
    for (uint32_t i = 1; i < 5; i++) mark_orphan(b, ir_node_operand(g, bn, i));
    IrValueId out = ir_node_result(g, c2, 0);
    /* the Conv's result takes the BatchNorm's name when that is a graph output, else keeps its
     * own */
    char *keep = strdup(ir_value_name(g, bn_out && b->root_out[bn_out] ? bn_out : x));
    b->repl[bn_out] = out;
    ir_node_erase(g, bn);
    if (c2 != conv) ir_node_erase(g, conv);
    if (keep && ir_value_rename(g, out, keep) != IR_OK) {
        /* the name stays as generated; nothing depends on it */
    }
    free(keep);
    b->f->bn_folded++;
    ir_pass_changed(b->f->c);
    return true;
}

static void bn_region(Bn *b, IrRegionId r) {
    IrGraph *g = b->g;
    for (IrNodeId n = ir_region_first(g, r), next; n; n = next) {
        next = ir_node_next(g, n);
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrValueId v = ir_node_operand(g, n, i), w = bn_resolve(b, v);
            if (w != v) ir_node_set_operand(g, n, i, w);
        }
        for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++) bn_region(b, ir_node_region_at(g, n, k));
        if (ir_node_op(g, n) == IR_OP_BATCH_NORMALIZATION) fold_one(b, n);
    }
    uint32_t no = ir_region_num_outputs(g, r);
    IrValueId *outs = no ? malloc(no * sizeof *outs) : NULL;
    if (!outs) return;
    for (uint32_t i = 0; i < no; i++) outs[i] = bn_resolve(b, ir_region_output(g, r, i));
    ir_region_set_outputs(g, r, no, outs);
    free(outs);
}

IrStatus fuse_fold_batchnorm(Fuse *f) {
    IrGraph *g = f->g;
    Bn b = {.f = f, .g = g, .nval = ir_graph_num_values(g)};
    size_t nv = (size_t)b.nval + 1;
    b.uses = calloc(nv, sizeof *b.uses);
    b.repl = calloc(nv, sizeof *b.repl);
    b.orphan = calloc(nv, 1);
    b.root_out = calloc(nv, 1);
    IrStatus st = IR_ENOMEM;
    if (b.uses && b.repl && b.orphan && b.root_out) {
        ir_graph_count_uses(g, b.uses);
        for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++)
            if (ir_graph_output(g, i)) b.root_out[ir_graph_output(g, i)] = 1;
        bn_region(&b, IR_ROOT_REGION);
        st = ir_graph_status(g);
    }
    if (!st && f->bn_folded) fuse_drop_orphans(g, b.nval, b.orphan);
    free(b.uses), free(b.repl), free(b.orphan), free(b.root_out);
    return st;
}

/* ---- helpers for matchers ---------------------------------------------------------------------- */

static IrOp op_of(const Fuse *f, IrNodeId n) { return n ? ir_node_op(f->g, n) : IR_OP_NONE; }
static IrValueId res0(const Fuse *f, IrNodeId n) { return ir_node_result(f->g, n, 0); }
static IrValueId opnd(const Fuse *f, IrNodeId n, uint32_t i) {
    return i < ir_node_num_operands(f->g, n) ? fuse_operand(f, n, i) : 0;
}

/* The free node defining v if it has op `op`. */
static IrNodeId def_is(const Fuse *f, IrValueId v, IrOp op) {
    IrNodeId d = fuse_free_def(f, v);
    return op_of(f, d) == op ? d : 0;
}

/* Binary node n with v on one side: the other operand (0 when v is not an operand). */
static IrValueId other_of(const Fuse *f, IrNodeId n, IrValueId v) {
    IrValueId a = opnd(f, n, 0), b = opnd(f, n, 1);
    return a == v ? b : b == v ? a : 0;
}

/* The only user of n's result when it is a free node with op `op`. */
static IrNodeId single_user_is(Fuse *f, IrNodeId n, IrOp op) {
    IrNodeId u = fuse_only_user(f, res0(f, n));
    return u && fuse_is_free(f, u) && ir_node_op(f->g, u) == op ? u : 0;
}

/* Mul with a constant near x on either side: returns the other operand. */
static IrValueId mul_by(const Fuse *f, IrNodeId n, double x) {
    if (op_of(f, n) != IR_OP_MUL) return 0;
    if (fuse_const_near(f->g, opnd(f, n, 1), x, 1e-3)) return opnd(f, n, 0);
    if (fuse_const_near(f->g, opnd(f, n, 0), x, 1e-3)) return opnd(f, n, 1);
    return 0;
}

static bool single_use(const Fuse *f, IrNodeId n) { return fuse_uses(f, res0(f, n)) == 1; }

/* ---- attention ---------------------------------------------------------------------------------- */

static bool is_scalar_const(const Fuse *f, IrValueId v) {
    FuseConst k;
    return fuse_const_view(f->g, v, &k) && k.numel == 1;
}

/* A Transpose that swaps the last two axes and keeps the others (K^T from keys [.., S, d]). */
static bool swaps_last_two(const Fuse *f, IrNodeId t) {
    IrAttrValue p;
    if (op_of(f, t) != IR_OP_TRANSPOSE || !ir_node_attr(f->g, t, "perm", &p) || p.kind != IR_ATTR_INTS || p.count < 2)
        return false;
    for (uint32_t i = 0; i < p.count; i++)
        if (p.ints[i] != (i + 2 < p.count ? (int64_t)i : i + 2 == p.count ? (int64_t)p.count - 1 : (int64_t)p.count - 2))
            return false;
    return true;
}

static bool match_attention(Fuse *f, IrNodeId sm) {
    if (!fuse_row_reduction(f, sm)) return false; /* probabilities over the keys: the last axis */
    IrNodeId mem[8];
    uint32_t k = 0;
    bool have_mask = false, have_scale = false;
    IrValueId v = opnd(f, sm, 0);
    IrNodeId qk = 0;
    for (int step = 0; step < 3 && !qk; step++) {
        IrNodeId d = fuse_free_def(f, v);
        IrOp op = op_of(f, d);
        if (!d || ir_node_num_results(f->g, d) != 1) return false;
        if (op == IR_OP_MAT_MUL) {
            qk = d;
        } else if ((op == IR_OP_ADD || op == IR_OP_WHERE) && !have_mask) {
            /* continue through the side computed from the scores */
            uint32_t lo = op == IR_OP_WHERE ? 1 : 0, hi = op == IR_OP_WHERE ? 2 : 1, pick = UINT32_MAX;
            for (uint32_t i = lo; i <= hi && pick == UINT32_MAX; i++) {
                IrOp o = op_of(f, fuse_free_def(f, opnd(f, d, i)));
                if (o == IR_OP_MAT_MUL || o == IR_OP_MUL || o == IR_OP_DIV) pick = i;
            }
            if (pick == UINT32_MAX) return false;
            v = opnd(f, d, pick);
            have_mask = true;
            mem[k++] = d;
        } else if ((op == IR_OP_MUL || op == IR_OP_DIV) && !have_scale) {
            uint32_t pick = UINT32_MAX;
            for (uint32_t i = 0; i < (op == IR_OP_DIV ? 1u : 2u) && pick == UINT32_MAX; i++) {
                IrOp o = op_of(f, fuse_free_def(f, opnd(f, d, i)));
                if (o == IR_OP_MAT_MUL || o == IR_OP_ADD || o == IR_OP_WHERE) pick = i;
            }
            if (pick == UINT32_MAX) return false;
            v = opnd(f, d, pick);
            have_scale = true;
            mem[k++] = d;
        } else {
            return false;
        }
    }
    if (!qk) return false;
    mem[k++] = qk;
    IrNodeId kt = fuse_free_def(f, opnd(f, qk, 1));
    if ((f->kinds & FUSE_ATTENTION_KT) && kt && swaps_last_two(f, kt) && single_use(f, kt)) mem[k++] = kt;
    /* a scale applied to Q before the product belongs to the pattern too */
    IrNodeId pre = fuse_free_def(f, opnd(f, qk, 0));
    if (!have_scale && pre && single_use(f, pre) &&
        ((op_of(f, pre) == IR_OP_DIV && is_scalar_const(f, opnd(f, pre, 1))) ||
         (op_of(f, pre) == IR_OP_MUL && (is_scalar_const(f, opnd(f, pre, 0)) || is_scalar_const(f, opnd(f, pre, 1))))))
        mem[k++] = pre;
    mem[k++] = sm;
    /* probabilities times V */
    IrValueId probs = res0(f, sm);
    f->tmp.n = 0;
    fuse_users(f, sm, &f->tmp);
    IrNodeId pv = 0;
    for (uint32_t i = 0; i < f->tmp.n && !pv; i++) {
        IrNodeId u = f->tmp.a[i];
        if (fuse_is_free(f, u) && ir_node_op(f->g, u) == IR_OP_MAT_MUL && opnd(f, u, 0) == probs) pv = u;
    }
    if (!pv) return false;
    mem[k++] = pv;
    return fuse_form(f, mem, k, "attention", sm);
}

/* ---- decomposed LayerNorm ----------------------------------------------------------------------- */

static bool match_layernorm(Fuse *f, IrNodeId m1) {
    if (!fuse_row_reduction(f, m1)) return false;
    IrValueId x = opnd(f, m1, 0), mean = res0(f, m1);
    IrNodeId sub = 0, sq = 0, div = 0;
    f->tmp.n = 0;
    fuse_users(f, m1, &f->tmp);
    for (uint32_t i = 0; i < f->tmp.n && !sub; i++) {
        IrNodeId u = f->tmp.a[i];
        if (fuse_is_free(f, u) && ir_node_op(f->g, u) == IR_OP_SUB && opnd(f, u, 0) == x && opnd(f, u, 1) == mean) sub = u;
    }
    if (!sub) return false;
    IrValueId d = res0(f, sub);
    f->tmp.n = 0;
    fuse_users(f, sub, &f->tmp);
    for (uint32_t i = 0; i < f->tmp.n; i++) {
        IrNodeId u = f->tmp.a[i];
        if (!fuse_is_free(f, u)) continue;
        IrOp op = ir_node_op(f->g, u);
        if (!sq && op == IR_OP_POW && opnd(f, u, 0) == d && fuse_const_near(f->g, opnd(f, u, 1), 2.0, 1e-6)) sq = u;
        if (!sq && op == IR_OP_MUL && opnd(f, u, 0) == d && opnd(f, u, 1) == d) sq = u;
        if (!div && op == IR_OP_DIV && opnd(f, u, 0) == d) div = u;
    }
    if (!sq || !div) return false;
    IrNodeId m2 = single_user_is(f, sq, IR_OP_REDUCE_MEAN);
    if (!m2 || !fuse_row_reduction(f, m2)) return false;
    IrNodeId ae = single_user_is(f, m2, IR_OP_ADD);
    if (!ae || !is_scalar_const(f, other_of(f, ae, res0(f, m2)))) return false;
    IrNodeId rt = single_user_is(f, ae, IR_OP_SQRT);
    if (!rt || opnd(f, div, 1) != res0(f, rt) || !single_use(f, rt)) return false;
    IrNodeId mem[9] = {m1, sub, sq, m2, ae, rt, div};
    uint32_t k = 7;
    IrNodeId gm = single_user_is(f, div, IR_OP_MUL);
    if (gm) {
        mem[k++] = gm;
        IrNodeId ba = single_user_is(f, gm, IR_OP_ADD);
        if (ba) mem[k++] = ba;
    }
    return fuse_form(f, mem, k, "layernorm", m1);
}

/* ---- GELU --------------------------------------------------------------------------------------- */

/* x * 0.5 * a in any association and operand order, starting from a = 1 + erf(...) / tanh(...).
 * Appends the multiplications to mem; returns how many (0 = no match). */
static uint32_t gelu_tail(Fuse *f, IrNodeId a, IrValueId x, IrNodeId *mem) {
    IrValueId av = res0(f, a);
    IrNodeId m1 = single_user_is(f, a, IR_OP_MUL);
    if (!m1) return 0;
    IrValueId o = other_of(f, m1, av);
    if (!o) return 0;
    if (o == x || fuse_const_near(f->g, o, 0.5, 1e-6)) {
        IrNodeId m2 = single_user_is(f, m1, IR_OP_MUL);
        IrValueId o2 = m2 ? other_of(f, m2, res0(f, m1)) : 0;
        if (!o2 || !(o == x ? fuse_const_near(f->g, o2, 0.5, 1e-6) : o2 == x)) return 0;
        mem[0] = m1, mem[1] = m2;
        return 2;
    }
    IrNodeId h = def_is(f, o, IR_OP_MUL);
    if (h && single_use(f, h) && mul_by(f, h, 0.5) == x) {
        mem[0] = h, mem[1] = m1;
        return 2;
    }
    return 0;
}

static bool match_gelu_erf(Fuse *f, IrNodeId e) {
    IrNodeId u = fuse_free_def(f, opnd(f, e, 0));
    if (!u || !single_use(f, u)) return false;
    IrValueId x = 0;
    if (op_of(f, u) == IR_OP_DIV && fuse_const_near(f->g, opnd(f, u, 1), sqrt(2.0), 1e-3)) x = opnd(f, u, 0);
    if (!x) x = mul_by(f, u, sqrt(0.5));
    if (!x) return false;
    IrNodeId a = single_user_is(f, e, IR_OP_ADD);
    if (!a || !fuse_const_near(f->g, other_of(f, a, res0(f, e)), 1.0, 1e-6)) return false;
    IrNodeId mem[8] = {u, e, a};
    uint32_t t = gelu_tail(f, a, x, mem + 3);
    return t && fuse_form(f, mem, 3 + t, "gelu", e);
}

/* 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) */
static bool match_gelu_tanh(Fuse *f, IrNodeId t) {
    IrNodeId s = fuse_free_def(f, opnd(f, t, 0));
    IrValueId rv = s && single_use(f, s) ? mul_by(f, s, sqrt(2.0 / M_PI)) : 0;
    IrNodeId r = def_is(f, rv, IR_OP_ADD);
    if (!r || !single_use(f, r)) return false;
    for (uint32_t side = 0; side < 2; side++) {
        IrValueId x = opnd(f, r, side);
        IrNodeId q = def_is(f, opnd(f, r, 1 - side), IR_OP_MUL);
        IrValueId pv = q && single_use(f, q) ? mul_by(f, q, 0.044715) : 0;
        IrNodeId p = fuse_free_def(f, pv), x2 = 0;
        if (!p || !single_use(f, p)) continue;
        if (op_of(f, p) == IR_OP_POW) {
            if (opnd(f, p, 0) != x || !fuse_const_near(f->g, opnd(f, p, 1), 3.0, 1e-6)) continue;
        } else if (op_of(f, p) == IR_OP_MUL) {
            IrValueId sqv = other_of(f, p, x);
            x2 = def_is(f, sqv, IR_OP_MUL);
            if (!x2 || !single_use(f, x2) || opnd(f, x2, 0) != x || opnd(f, x2, 1) != x) continue;
        } else {
            continue;
        }
        IrNodeId a = single_user_is(f, t, IR_OP_ADD);
        if (!a || !fuse_const_near(f->g, other_of(f, a, res0(f, t)), 1.0, 1e-6)) return false;
        IrNodeId mem[12];
        uint32_t k = 0;
        if (x2) mem[k++] = x2;
        mem[k++] = p, mem[k++] = q, mem[k++] = r, mem[k++] = s, mem[k++] = t, mem[k++] = a;
        uint32_t n = gelu_tail(f, a, x, mem + k);
        return n && fuse_form(f, mem, k + n, "gelu", t);
    }
    return false;
}

void fuse_match_patterns(Fuse *f) {
    for (uint32_t i = 0; i < f->order.n && !f->status; i++) {
        IrNodeId n = f->order.a[i];
        if (!fuse_is_free(f, n)) continue;
        switch (ir_node_op(f->g, n)) {
        case IR_OP_SOFTMAX:
            if (f->kinds & FUSE_ATTENTION) match_attention(f, n);
            break;
        case IR_OP_REDUCE_MEAN:
            if (f->kinds & FUSE_LAYERNORM) match_layernorm(f, n);
            break;
        case IR_OP_ERF:
            if (f->kinds & FUSE_GELU) match_gelu_erf(f, n);
            break;
        case IR_OP_TANH:
            if (f->kinds & FUSE_GELU) match_gelu_tanh(f, n);
            break;
        default: break;
        }
    }
}

/* ---- epilogues ---------------------------------------------------------------------------------- */

static bool is_anchor(IrOp op) {
    return op == IR_OP_CONV || op == IR_OP_CONV_TRANSPOSE || op == IR_OP_GEMM || op == IR_OP_MAT_MUL;
}

static bool is_activation(IrOp op) {
    switch (op) {
    case IR_OP_RELU:
    case IR_OP_LEAKY_RELU:
    case IR_OP_SIGMOID:
    case IR_OP_TANH:
    case IR_OP_CLIP:
    case IR_OP_GELU:
    case IR_OP_HARD_SWISH:
    case IR_OP_HARD_SIGMOID:
    case IR_OP_ELU:
    case IR_OP_SELU:
    case IR_OP_CELU:
    case IR_OP_SOFTPLUS:
    case IR_OP_MISH:
    case IR_OP_PRELU:
    case IR_OP_THRESHOLDED_RELU: return true;
    default: return false;
    }
}

/* Whether u can extend the chain ending in value cur (anchor at position apos). */
static bool epilogue_step(Fuse *f, IrNodeId u, IrValueId cur, IrNodeId anchor) {
    if (!fuse_is_free(f, u) || ir_node_num_results(f->g, u) != 1) return false;
    IrOp op = ir_node_op(f->g, u);
    if (is_activation(op)) {
        for (uint32_t i = 1; i < ir_node_num_operands(f->g, u); i++)
            if (opnd(f, u, i) == cur) return false;
        return opnd(f, u, 0) == cur;
    }
    bool add = op == IR_OP_ADD || (op == IR_OP_SUM && ir_node_num_operands(f->g, u) == 2);
    if (!add) return false;
    IrValueId other = other_of(f, u, cur);
    if (!other || other == cur) return false;
    /* a residual Add joining two contraction chains goes to the later contraction */
    IrNodeId od = fuse_free_def(f, other);
    if (od && is_anchor(ir_node_op(f->g, od)) && fuse_uses(f, other) == 1 && f->pos[od] > f->pos[anchor]) return false;
    return true;
}

void fuse_match_epilogues(Fuse *f) {
    IrNodeId *mem = malloc(f->max_size * sizeof *mem);
    if (!mem) {
        f->status = IR_ENOMEM;
        return;
    }
    for (uint32_t i = 0; i < f->order.n && !f->status; i++) {
        IrNodeId a = f->order.a[i];
        if (!fuse_is_free(f, a) || !is_anchor(ir_node_op(f->g, a)) || ir_node_num_results(f->g, a) != 1) continue;
        uint32_t k = 0;
        mem[k++] = a;
        IrValueId cur = res0(f, a);
        while (k < f->max_size) {
            IrNodeId u = fuse_only_user(f, cur);
            if (!u || !epilogue_step(f, u, cur, a)) break;
            mem[k++] = u;
            cur = res0(f, u);
        }
        while (k >= 2 && !fuse_form(f, mem, k, "epilogue", a) && !f->status) k--;
    }
    free(mem);
}

/* Symbolic shapes in the CUDA generator: one artifact for any binding of the input symbols. In a
 * kernel a dim is a value (a constant when static, else evaluated from the run's symbol array,
 * the kernels' last parameter); a step's sizes (work items, rows, bytes, GEMM dims and strides)
 * are host formulas over the symbols that the runtime evaluates at launch. The emitters here
 * serve the nodes whose shapes are symbolic; anything else is refused naming the op.
 */
#include "backend/cuda/cu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- formulas ---------------------------------------------------------------------------------- */

bool cuda_fx_text(const IrGraph *g, IrExprId x, IrStrBuf *b) {
    int64_t v;
    const char *sp = b->len ? " " : "";
    if (ir_expr_is_const(g, x, &v)) return ir_strbuf_printf(b, "%s%lld", sp, (long long)v), true;
    IrExprKind k = ir_expr_kind(g, x);
    if (k == IR_EXPR_SYM) return ir_strbuf_printf(b, "%ss%u", sp, (unsigned)ir_expr_sym_id(g, x)), true;
    static const struct { IrExprKind k; char op; } ops[] = {{IR_EXPR_ADD, '+'}, {IR_EXPR_SUB, '-'}, {IR_EXPR_MUL, '*'},
                                                            {IR_EXPR_DIV, '/'}, {IR_EXPR_MOD, '%'}, {IR_EXPR_MIN, '<'},
                                                            {IR_EXPR_MAX, '>'}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i].k == k) {
            if (!cuda_fx_text(g, ir_expr_lhs(g, x), b) || !cuda_fx_text(g, ir_expr_rhs(g, x), b)) return false;
            ir_strbuf_printf(b, " %c", ops[i].op);
            return true;
        }
    return false; /* `?` */
}

int64_t cuda_fx_add(CuModule *m, const char *text) {
    for (uint32_t i = 0; i < m->n_fx; i++)
        if (strcmp(m->fx[i], text) == 0) return i;
    if (m->n_fx == m->cap_fx) {
        uint32_t cap = m->cap_fx ? 2 * m->cap_fx : 32;
        char **p = realloc(m->fx, cap * sizeof *p);
        if (!p) return -1;
        m->fx = p;
        m->cap_fx = cap;
    }
    if (!(m->fx[m->n_fx] = strdup(text))) return -1;
    return m->n_fx++;
}

/* scale times the product of expressions ex[0..n): a constant, or CU_FX(formula). */
static IrStatus fx_exprs(Cu *c, const IrExprId *ex, uint32_t n, int64_t scale, int64_t *out) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    int64_t k = scale, v;
    uint32_t terms = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (ir_expr_is_const(c->g, ex[i], &v)) {
            k *= v;
            continue;
        }
        if (!cuda_fx_text(c->g, ex[i], &b)) {
            ir_strbuf_free(&b);
            return cu_unsupported(c, "with an unknown dim");
        }
        if (terms++) ir_strbuf_printf(&b, " *");
    }
    if (!terms || k == 0) {
        ir_strbuf_free(&b);
        *out = k;
        return IR_OK;
    }
    if (k != 1) ir_strbuf_printf(&b, " %lld *", (long long)k);
    int64_t id = b.failed ? -1 : cuda_fx_add(c->m, b.data);
    ir_strbuf_free(&b);
    if (id < 0) {
        c->m->fx_failed = true;
        return IR_ENOMEM;
    }
    *out = CU_FX(id);
    return IR_OK;
}

int64_t cu_fx_scale(Cu *c, int64_t x, int64_t scale) {
    if (x >= 0 || scale == 1) return x * (x >= 0 ? scale : 1);
    char t[64];
    snprintf(t, sizeof t, " %lld *", (long long)scale);
    const char *f = c->m->fx[-1 - x];
    char *s = malloc(strlen(f) + sizeof t);
    int64_t id = -1;
    if (s) {
        strcpy(s, f);
        strcat(s, t);
        id = cuda_fx_add(c->m, s);
        free(s);
    }
    c->m->fx_failed |= id < 0;
    return id < 0 ? 0 : CU_FX(id);
}

int64_t cu_fx_prod(Cu *c, IrValueId v, uint32_t from, uint32_t to, int64_t scale) {
    IrTypeId t = ir_value_type(c->g, v);
    int64_t out = 0;
    if (fx_exprs(c, ir_type_dims(c->g, t) + from, to - from, scale, &out)) return 0;
    return out;
}

/* ---- dims as values -------------------------------------------------------------------------- */

bool cu_static(const IrGraph *g, IrValueId v) {
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    return lower_value_shape(g, v, &r, d);
}

bool cu_value_shape(Cu *c, IrValueId v, uint32_t *rank, int64_t *dims) {
    IrTypeId t = ir_value_type(c->g, v);
    uint32_t r = t ? ir_type_rank(c->g, t) : IR_RANK_UNKNOWN;
    if (!t || r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return false;
    for (uint32_t k = 0; k < r; k++) {
        IrExprId x = ir_type_dims(c->g, t)[k];
        if (ir_expr_is_const(c->g, x, &dims[k])) continue;
        if (ir_expr_kind(c->g, x) == IR_EXPR_UNKNOWN) return false;
        dims[k] = -1;
    }
    *rank = r;
    return true;
}

LLVMValueRef cu_dim(Cu *c, IrExprId x) {
    const IrGraph *g = c->g;
    int64_t v;
    if (ir_expr_is_const(g, x, &v)) return ci(c, v);
    IrExprKind k = ir_expr_kind(g, x);
    if (k == IR_EXPR_SYM) {
        LLVMValueRef s = ld(c, c->i64, c->syms, LLVMConstInt(c->i64, ir_expr_sym_id(g, x), 0));
        return c->it == c->i64 ? s : LLVMBuildTrunc(c->b, s, c->it, "");
    }
    if (k == IR_EXPR_UNKNOWN) return NULL;
    LLVMValueRef a = cu_dim(c, ir_expr_lhs(g, x)), b = cu_dim(c, ir_expr_rhs(g, x));
    if (!a || !b) return NULL;
    switch (k) {
    case IR_EXPR_ADD: return LLVMBuildNSWAdd(c->b, a, b, "");
    case IR_EXPR_SUB: return LLVMBuildNSWSub(c->b, a, b, "");
    case IR_EXPR_MUL: return LLVMBuildNSWMul(c->b, a, b, "");
    case IR_EXPR_DIV: return LLVMBuildSDiv(c->b, a, b, "");
    case IR_EXPR_MOD: return LLVMBuildSRem(c->b, a, b, "");
    case IR_EXPR_MIN: return sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, a, b, ""), a, b);
    case IR_EXPR_MAX: return sel(c, LLVMBuildICmp(c->b, LLVMIntSGT, a, b, ""), a, b);
    default: return NULL;
    }
}

bool cu_dims_of(Cu *c, IrValueId v, CuDims *s) {
    IrTypeId t = ir_value_type(c->g, v);
    s->rank = t ? ir_type_rank(c->g, t) : IR_RANK_UNKNOWN;
    if (!t || s->rank == IR_RANK_UNKNOWN || s->rank > IR_MAX_RANK) return false;
    for (uint32_t k = 0; k < s->rank; k++) {
        s->ex[k] = ir_type_dims(c->g, t)[k];
        if (!ir_expr_is_const(c->g, s->ex[k], &s->cd[k])) s->cd[k] = -1;
        if (!(s->d[k] = cu_dim(c, s->ex[k]))) return false;
    }
    return true;
}

LLVMValueRef cu_dims_prod(Cu *c, const CuDims *s, uint32_t from, uint32_t to) {
    LLVMValueRef p = ci(c, 1);
    for (uint32_t k = from; k < to; k++) p = s->cd[k] == 1 ? p : LLVMBuildNSWMul(c->b, p, s->d[k], "");
    return p;
}

void cu_dims_strides(Cu *c, const CuDims *s, LLVMValueRef *st) {
    LLVMValueRef p = ci(c, 1);
    for (uint32_t k = s->rank; k-- > 0;) {
        st[k] = p;
        if (s->cd[k] != 1) p = LLVMBuildNSWMul(c->b, p, s->d[k], "");
    }
}

void cu_dims_bcast(Cu *c, const CuDims *s, const CuDims *out, LLVMValueRef *st) {
    LLVMValueRef own[IR_MAX_RANK];
    cu_dims_strides(c, s, own);
    for (uint32_t k = 0; k < out->rank; k++) st[k] = NULL;
    for (uint32_t j = 0; j < s->rank && j < out->rank; j++) {
        uint32_t k = out->rank - s->rank + j;
        if (s->cd[j] == 1) continue;
        if (s->ex[j] == out->ex[k] || s->cd[j] > 1) st[k] = own[j];
        else /* another expression than the output's: broadcast when it is 1 in this run */
            st[k] = sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, s->d[j], ci(c, 1), ""), ci(c, 0), own[j]);
    }
}

void cu_nest_v(Cu *c, const CuDims *s, uint32_t n_ops, LLVMValueRef (*st)[IR_MAX_RANK], NestBody body, void *user) {
    Loop l;
    cu_grid_begin_v(c, &l, cu_dims_prod(c, s, 0, s->rank));
    LLVMValueRef contig[IR_MAX_RANK], offs[CU_MAX_ARGS + 8], rem = l.iv;
    cu_dims_strides(c, s, contig);
    bool flat[CU_MAX_ARGS + 8];
    for (uint32_t j = 0; j < n_ops; j++) {
        flat[j] = true;
        for (uint32_t k = 0; k < s->rank && flat[j]; k++) flat[j] = s->cd[k] == 1 || st[j][k] == contig[k];
        offs[j] = flat[j] ? l.iv : ci(c, 0);
    }
    for (uint32_t k = s->rank; k-- > 0;) {
        if (s->cd[k] == 1) continue;
        LLVMValueRef coord = k == 0 ? rem : LLVMBuildURem(c->b, rem, s->d[k], "");
        if (k > 0) rem = LLVMBuildUDiv(c->b, rem, s->d[k], "");
        for (uint32_t j = 0; j < n_ops; j++)
            if (!flat[j] && st[j][k])
                offs[j] = LLVMBuildNSWAdd(c->b, offs[j], LLVMBuildNSWMul(c->b, coord, st[j][k], ""), "");
    }
    body(c, offs, user);
    cu_loop_end(c, &l);
}

/* ---- elementwise (single f32 nodes and fused groups) ----------------------------------------- */

typedef struct SymEw {
    uint32_t n_load, n_store;
    IrValueId load_v[CU_MAX_ARGS], store_v[CU_MAX_ARGS];
    uint32_t load_slot[CU_MAX_ARGS], store_slot[CU_MAX_ARGS];
    bool load_bool[CU_MAX_ARGS];
    IrRegionId body;
    LLVMValueRef *vals;
} SymEw;

static void sym_ew_body(Cu *c, LLVMValueRef *offs, void *user) {
    SymEw *p = user;
    for (uint32_t j = 0; j < p->n_load; j++)
        p->vals[p->load_v[j]] = ld(c, p->load_bool[j] ? c->i8 : c->f32, pslot(c, p->load_slot[j]), offs[p->n_store + j]);
    cu_ew_eval_members(c, p->body, p->vals);
    for (uint32_t j = 0; j < p->n_store; j++) st(c, c->f32, pslot(c, p->store_slot[j]), offs[j], p->vals[p->store_v[j]]);
}

static bool ew_dtype_ok(const IrGraph *g, IrNodeId m) {
    for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
        IrValueId v = ir_node_operand(g, m, i);
        bool cond = ir_node_op(g, m) == IR_OP_WHERE && i == 0;
        if (v && lower_value_dtype(g, v) != (cond ? IR_DTYPE_BOOL : IR_DTYPE_F32)) return false;
    }
    return ir_node_num_results(g, m) == 1 && lower_value_dtype(g, ir_node_result(g, m, 0)) == IR_DTYPE_F32;
}

static IrStatus sym_add_load(Cu *c, SymEw *p, IrValueId inner, IrValueId src) {
    for (uint32_t j = 0; j < p->n_load; j++)
        if (p->load_v[j] == inner) return IR_OK;
    if (p->n_store + p->n_load >= CU_MAX_ARGS - 1) return cu_unsupported(c, "with this many operands");
    p->load_v[p->n_load] = inner;
    p->load_slot[p->n_load] = src;
    p->load_bool[p->n_load++] = lower_value_dtype(c->g, src) == IR_DTYPE_BOOL;
    return IR_OK;
}

static IrStatus sym_ew(Cu *c, bool fused) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    SymEw p = {0};
    IrValueId out0 = ir_node_result(g, n, 0);
    if (fused) {
        p.body = ir_node_region_at(g, n, 0);
        for (IrNodeId m = ir_region_first(g, p.body); m; m = ir_node_next(g, m))
            if (!lower_core_ew_op(ir_node_op(g, m)) || !ew_dtype_ok(g, m)) return cu_unsupported(c, "group with these members and symbolic shapes");
    } else if (!ew_dtype_ok(g, n) || !cu_ew_f32_op(ir_node_op(g, n))) {
        return cu_unsupported(c, "on non-f32 tensors with symbolic shapes");
    }
    IrTypeId t0 = ir_value_type(g, out0);
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId res = ir_node_result(g, n, i);
        if (!res) continue;
        IrTypeId t = ir_value_type(g, res);
        if (ir_type_rank(g, t) != ir_type_rank(g, t0) ||
            memcmp(ir_type_dims(g, t), ir_type_dims(g, t0), ir_type_rank(g, t0) * sizeof(IrExprId)))
            return cu_unsupported(c, "group whose results differ in shape");
        if (p.n_store >= CU_MAX_ARGS - 1) return cu_unsupported(c, "with this many results");
        p.store_v[p.n_store] = fused ? ir_region_output(g, p.body, i) : res;
        p.store_slot[p.n_store++] = res;
    }
    IrStatus s = IR_OK;
    if (fused) {
        for (IrNodeId m = ir_region_first(g, p.body); m && !s; m = ir_node_next(g, m))
            for (uint32_t i = 0; i < ir_node_num_operands(g, m) && !s; i++) {
                IrValueId v = ir_node_operand(g, m, i), src = v;
                if (!v || (ir_value_kind(g, v) == IR_VALUE_RESULT && lower_in_region(g, v, p.body))) continue;
                for (uint32_t a = 0; a < ir_region_num_args(g, p.body); a++)
                    if (ir_region_arg(g, p.body, a) == v) src = ir_node_operand(g, n, a);
                if (!src) return cu_unsupported(c, "group with these operands");
                s = sym_add_load(c, &p, v, src);
            }
    } else {
        for (uint32_t i = 0; i < ir_node_num_operands(g, n) && !s; i++) {
            IrValueId v = ir_node_operand(g, n, i);
            if (v) s = sym_add_load(c, &p, v, v);
        }
    }
    int64_t work = cu_fx_prod(c, out0, 0, ir_type_rank(g, t0), 1);
    if (s || !work) return s;
    uint32_t slots[CU_MAX_ARGS];
    for (uint32_t j = 0; j < p.n_store; j++) slots[j] = p.store_slot[j];
    for (uint32_t j = 0; j < p.n_load; j++) slots[p.n_store + j] = p.load_slot[j];
    if ((s = cu_kbegin(c, slots, p.n_store + p.n_load, CU_BLOCK, false))) return s;
    CuDims od, xd;
    LLVMValueRef strides[CU_MAX_ARGS + 8][IR_MAX_RANK];
    if (!cu_dims_of(c, out0, &od)) return cu_unsupported(c, "with an unknown dim");
    for (uint32_t j = 0; j < p.n_store; j++) cu_dims_strides(c, &od, strides[j]);
    for (uint32_t j = 0; j < p.n_load; j++) {
        if (!cu_dims_of(c, p.load_slot[j], &xd) || xd.rank > od.rank) return cu_unsupported(c, "with these operand shapes");
        cu_dims_bcast(c, &xd, &od, strides[p.n_store + j]);
    }
    p.vals = calloc(ir_graph_num_values(g) + 1, sizeof *p.vals);
    if (!p.vals) return IR_ENOMEM;
    cu_nest_v(c, &od, p.n_store + p.n_load, strides, sym_ew_body, &p);
    free(p.vals);
    return cu_kend(c, work, NULL);
}

/* ---- data movement ------------------------------------------------------------------------------ */

/* The same bytes under another shape (Reshape, Flatten, Squeeze, Unsqueeze, Identity): a copy. */
static IrStatus sym_copy(Cu *c) {
    IrValueId x = ir_node_operand(c->g, c->node, 0), y = ir_node_result(c->g, c->node, 0);
    int64_t nb = cu_fx_prod(c, y, 0, ir_type_rank(c->g, ir_value_type(c->g, y)), (int64_t)ir_dtype_size(lower_value_dtype(c->g, y)));
    if (!nb) return IR_OK;
    CuStep s = {.kind = CU_STEP_COPY, .n_args = 2, .arg = {{y, 0}, {x, 0}}, .bytes = nb};
    return cu_push_step(c, &s);
}

/* y[nest over sh] = x[base + sum coord_k * xs[k]], y laid out as sh at ybase (dst strides ys). */
typedef struct SymMove {
    uint32_t y, x;
    LLVMTypeRef t;
    LLVMValueRef ybase, xbase;
} SymMove;

static void sym_move_body(Cu *c, LLVMValueRef *o, void *user) {
    SymMove *p = user;
    LLVMValueRef yo = p->ybase ? LLVMBuildNSWAdd(c->b, o[0], p->ybase, "") : o[0];
    LLVMValueRef xo = p->xbase ? LLVMBuildNSWAdd(c->b, o[1], p->xbase, "") : o[1];
    st(c, p->t, pslot(c, p->y), yo, ld(c, p->t, pslot(c, p->x), xo));
}

static IrStatus sym_transpose(Cu *c) {
    const IrGraph *g = c->g;
    IrValueId x = ir_node_operand(g, c->node, 0), y = ir_node_result(g, c->node, 0);
    uint32_t r = ir_type_rank(g, ir_value_type(g, x));
    int64_t perm[IR_MAX_RANK];
    uint32_t np = 0;
    IrAttrValue av;
    if (r > IR_MAX_RANK) return cu_unsupported(c, "with this rank");
    if (ir_node_attr(g, c->node, "perm", &av)) {
        if (av.kind != IR_ATTR_INTS || av.count != r) return cu_unsupported(c, "with this perm");
        for (uint32_t k = 0; k < r; k++) perm[k] = av.ints[k];
        np = r;
    }
    for (uint32_t k = np; k < r; k++) perm[k] = r - 1 - k;
    int64_t work = cu_fx_prod(c, y, 0, r, 1);
    if (!work) return IR_OK;
    uint32_t slots[2] = {y, x};
    IrStatus s = cu_kbegin(c, slots, 2, CU_BLOCK, false);
    if (s) return s;
    CuDims yd, xd;
    if (!cu_dims_of(c, y, &yd) || !cu_dims_of(c, x, &xd)) return cu_unsupported(c, "with an unknown dim");
    LLVMValueRef stv[2][IR_MAX_RANK], xs[IR_MAX_RANK];
    cu_dims_strides(c, &yd, stv[0]);
    cu_dims_strides(c, &xd, xs);
    for (uint32_t k = 0; k < r; k++) {
        if (perm[k] < 0 || perm[k] >= (int64_t)r) return cu_unsupported(c, "with this perm");
        stv[1][k] = xs[perm[k]];
    }
    SymMove p = {y, x, int_type(c, ir_dtype_size(lower_value_dtype(g, x))), NULL, NULL};
    cu_nest_v(c, &yd, 2, stv, sym_move_body, &p);
    return cu_kend(c, work, NULL);
}

/* Concat (operand i copied to the output at the running position along the axis) and Split
 * (result i copied from the input at it): positions are sums of dims, values at run time. */
static IrStatus sym_concat_split(Cu *c, bool split) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId whole = split ? ir_node_operand(g, n, 0) : ir_node_result(g, n, 0);
    uint32_t r = ir_type_rank(g, ir_value_type(g, whole));
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (!found) axis = 0;
    if (!ir_shape_axis_checked(&axis, r) || r > IR_MAX_RANK) return cu_unsupported(c, "with this axis");
    uint32_t parts = split ? ir_node_num_results(g, n) : ir_node_num_operands(g, n);
    IrExprId pos_ex[64];
    uint32_t n_pos = 0;
    IrStatus s = IR_OK;
    for (uint32_t i = 0; i < parts && !s; i++) {
        IrValueId part = split ? ir_node_result(g, n, i) : ir_node_operand(g, n, i);
        if (!part) continue;
        int64_t work = cu_fx_prod(c, part, 0, r, 1);
        IrExprId ax = ir_type_dims(g, ir_value_type(g, part))[axis];
        if (work) {
            uint32_t slots[2] = {split ? part : whole, split ? whole : part};
            if ((s = cu_kbegin(c, slots, 2, CU_BLOCK, false))) return s;
            CuDims pd, wd;
            if (!cu_dims_of(c, part, &pd) || !cu_dims_of(c, whole, &wd)) return cu_unsupported(c, "with an unknown dim");
            LLVMValueRef stv[2][IR_MAX_RANK], ws[IR_MAX_RANK];
            cu_dims_strides(c, &pd, stv[split ? 0 : 1]);
            cu_dims_strides(c, &wd, ws);
            memcpy(stv[split ? 1 : 0], ws, sizeof ws);
            LLVMValueRef pos = ci(c, 0);
            for (uint32_t q = 0; q < n_pos; q++) pos = LLVMBuildNSWAdd(c->b, pos, cu_dim(c, pos_ex[q]), "");
            LLVMValueRef base = LLVMBuildNSWMul(c->b, pos, ws[axis], "");
            SymMove p = {slots[0], slots[1], int_type(c, ir_dtype_size(lower_value_dtype(g, whole))), split ? NULL : base,
                         split ? base : NULL};
            cu_nest_v(c, &pd, 2, stv, sym_move_body, &p);
            s = cu_kend(c, work, NULL);
        }
        if (n_pos == 64) return cu_unsupported(c, "with this many parts");
        pos_ex[n_pos++] = ax;
    }
    return s;
}

/* Slice with constant axes and steps, starts constant or read by the kernel: the output's dims
 * come from shape inference (so the ends are not needed); each start is clamped against its dim
 * at run time as ONNX says. */
static IrStatus sym_slice(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    uint32_t r = ir_type_rank(g, ir_value_type(g, x));
    if (r > IR_MAX_RANK) return cu_unsupported(c, "with this rank");
    int64_t starts[IR_MAX_RANK], axes[IR_MAX_RANK], steps[IR_MAX_RANK];
    uint32_t ns = 0, na = 0, nst = 0;
    uint32_t nops = ir_node_num_operands(g, n);
    if (nops < 3) return cu_unsupported(c, "without starts and ends");
    /* starts given at run time are read by the kernel (the output's dims, from shape
     * inference, make the ends unnecessary); their count is the tensor's length */
    IrValueId vs = ir_node_operand(g, n, 1);
    bool rt_starts = !lower_const_ints(g, vs, starts, &ns, IR_MAX_RANK);
    uint32_t vr;
    int64_t vd[IR_MAX_RANK];
    IrDType sdt = lower_value_dtype(g, vs);
    if (rt_starts) {
        if (!lower_value_shape(g, vs, &vr, vd) || vr != 1 || vd[0] > IR_MAX_RANK || (sdt != IR_DTYPE_I64 && sdt != IR_DTYPE_I32))
            return cu_unsupported(c, "with these starts and symbolic shapes");
        ns = (uint32_t)vd[0];
    }
    if (nops > 3 && ir_node_operand(g, n, 3)) {
        if (!lower_const_ints(g, ir_node_operand(g, n, 3), axes, &na, IR_MAX_RANK) || na != ns)
            return cu_unsupported(c, "with axes given at run time");
    } else
        for (na = 0; na < ns; na++) axes[na] = na;
    if (nops > 4 && ir_node_operand(g, n, 4)) {
        if (!lower_const_ints(g, ir_node_operand(g, n, 4), steps, &nst, IR_MAX_RANK) || nst != ns)
            return cu_unsupported(c, "with steps given at run time");
    } else
        for (nst = 0; nst < ns; nst++) steps[nst] = 1;
    int64_t work = cu_fx_prod(c, y, 0, r, 1);
    if (!work) return IR_OK;
    uint32_t slots[3] = {y, x, vs};
    IrStatus s = cu_kbegin(c, slots, rt_starts ? 3 : 2, CU_BLOCK, false);
    if (s) return s;
    CuDims yd, xd;
    if (!cu_dims_of(c, y, &yd) || !cu_dims_of(c, x, &xd)) return cu_unsupported(c, "with an unknown dim");
    LLVMValueRef stv[2][IR_MAX_RANK], xs[IR_MAX_RANK], base = ci(c, 0);
    LLVMTypeRef st_t = sdt == IR_DTYPE_I32 ? c->i32 : c->i64;
    cu_dims_strides(c, &yd, stv[0]);
    cu_dims_strides(c, &xd, xs);
    memcpy(stv[1], xs, sizeof xs);
    for (uint32_t i = 0; i < ns; i++) {
        int64_t a = axes[i];
        if (!ir_shape_axis_checked(&a, r) || steps[i] == 0) return cu_unsupported(c, "with this axis or step");
        LLVMValueRef d = xd.d[a], st0;
        if (rt_starts) { /* clamped to +-2^62 first, so start + dim cannot overflow */
            st0 = LLVMBuildSExt(c->b, ld(c, st_t, pslot(c, vs), ci(c, i)), c->i64, "");
            st0 = sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, st0, ci(c, -(INT64_MAX / 2)), ""), ci(c, -(INT64_MAX / 2)), st0);
            st0 = sel(c, LLVMBuildICmp(c->b, LLVMIntSGT, st0, ci(c, INT64_MAX / 2), ""), ci(c, INT64_MAX / 2), st0);
        } else
            st0 = ci(c, starts[i] < -(INT64_MAX / 2) ? -(INT64_MAX / 2) : starts[i] > INT64_MAX / 2 ? INT64_MAX / 2 : starts[i]);
        LLVMValueRef v = sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, st0, ci(c, 0), ""), LLVMBuildNSWAdd(c->b, st0, d, ""), st0);
        LLVMValueRef hi = steps[i] > 0 ? d : LLVMBuildNSWSub(c->b, d, ci(c, 1), "");
        v = sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, v, ci(c, 0), ""), ci(c, 0), v);
        v = sel(c, LLVMBuildICmp(c->b, LLVMIntSGT, v, hi, ""), hi, v);
        base = LLVMBuildNSWAdd(c->b, base, LLVMBuildNSWMul(c->b, v, xs[a], ""), "");
        stv[1][a] = LLVMBuildNSWMul(c->b, xs[a], ci(c, steps[i]), "");
    }
    SymMove p = {y, x, int_type(c, ir_dtype_size(lower_value_dtype(g, x))), NULL, base};
    cu_nest_v(c, &yd, 2, stv, sym_move_body, &p);
    return cu_kend(c, work, NULL);
}

/* Gather on any axis: y[o, j, i] = x[o, idx[j] (+ dim when negative), i]. */
typedef struct SymGather {
    uint32_t y, x, idx;
    LLVMTypeRef t, it;
    LLVMValueRef inner, nidx, dim;
} SymGather;

static void sym_gather_body(Cu *c, LLVMValueRef *o, void *user) {
    SymGather *p = user;
    LLVMValueRef f = o[0];
    LLVMValueRef i = LLVMBuildURem(c->b, f, p->inner, ""), t = LLVMBuildUDiv(c->b, f, p->inner, "");
    LLVMValueRef j = LLVMBuildURem(c->b, t, p->nidx, ""), oo = LLVMBuildUDiv(c->b, t, p->nidx, "");
    LLVMValueRef k = LLVMBuildSExt(c->b, ld(c, p->it, pslot(c, p->idx), j), c->i64, "");
    k = sel(c, LLVMBuildICmp(c->b, LLVMIntSLT, k, ci(c, 0), ""), LLVMBuildNSWAdd(c->b, k, p->dim, ""), k);
    LLVMValueRef src = LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, oo, p->dim, ""), k, ""), p->inner, ""), i, "");
    st(c, p->t, pslot(c, p->y), f, ld(c, p->t, pslot(c, p->x), src));
}

static IrStatus sym_gather(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), ix = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrDType idt = lower_value_dtype(g, ix);
    if (idt != IR_DTYPE_I64 && idt != IR_DTYPE_I32) return cu_unsupported(c, "with these index dtypes");
    uint32_t r = ir_type_rank(g, ir_value_type(g, x));
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (!found) axis = 0;
    if (r > IR_MAX_RANK || !ir_shape_axis_checked(&axis, r)) return cu_unsupported(c, "with this axis");
    int64_t work = cu_fx_prod(c, y, 0, ir_type_rank(g, ir_value_type(g, y)), 1);
    if (!work) return IR_OK;
    uint32_t slots[3] = {y, x, ix};
    IrStatus s = cu_kbegin(c, slots, 3, CU_BLOCK, false);
    if (s) return s;
    CuDims xd, idd, yd;
    if (!cu_dims_of(c, x, &xd) || !cu_dims_of(c, ix, &idd) || !cu_dims_of(c, y, &yd)) return cu_unsupported(c, "with an unknown dim");
    SymGather p = {y, x, ix, int_type(c, ir_dtype_size(lower_value_dtype(g, x))), idt == IR_DTYPE_I64 ? c->i64 : c->i32,
                   cu_dims_prod(c, &xd, (uint32_t)axis + 1, r), cu_dims_prod(c, &idd, 0, idd.rank), xd.d[axis]};
    Loop l;
    cu_grid_begin_v(c, &l, cu_dims_prod(c, &yd, 0, yd.rank));
    sym_gather_body(c, &l.iv, &p);
    cu_loop_end(c, &l);
    return cu_kend(c, work, NULL);
}

/* Shape (with start/end): the dims of this run, written by one thread. */
typedef struct SymShape {
    uint32_t y, x;
    int64_t start, end;
} SymShape;

static void sym_shape_one(Cu *c, void *user, LLVMValueRef i) {
    (void)i;
    SymShape *p = user;
    CuDims xd;
    if (!cu_dims_of(c, p->x, &xd)) return;
    for (int64_t k = p->start; k < p->end; k++)
        st(c, c->i64, pslot(c, p->y), ci(c, k - p->start), LLVMBuildSExt(c->b, xd.d[k], c->i64, ""));
}

static IrStatus sym_shape(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    int64_t r = ir_type_rank(g, ir_value_type(g, x));
    bool fs, fe;
    int64_t start = ir_node_attr_int(g, n, "start", &fs), end = ir_node_attr_int(g, n, "end", &fe);
    if (!fs) start = 0;
    if (!fe) end = r;
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < start ? start : end > r ? r : end;
    if (end == start) return IR_OK;
    uint32_t slots[2] = {y, x};
    CuDims xd;
    IrStatus s = cu_kbegin(c, slots, 2, 32, false);
    if (s) return s;
    if (!cu_dims_of(c, x, &xd)) return cu_unsupported(c, "with an unknown dim");
    SymShape p = {y, x, start, end};
    return cu_kend_serial(c, 1, sym_shape_one, &p);
}

/* ConstantOfShape whose shape follows symbols: filled per run (a static one is a constant). */
typedef struct SymFill {
    uint32_t y;
    LLVMTypeRef t;
    LLVMValueRef v;
} SymFill;

static void sym_fill_body(Cu *c, LLVMValueRef *o, void *user) {
    SymFill *p = user;
    st(c, p->t, pslot(c, p->y), o[0], p->v);
}

static IrStatus sym_const_of_shape(Cu *c) {
    const IrGraph *g = c->g;
    IrValueId y = ir_node_result(g, c->node, 0);
    size_t es = ir_dtype_size(lower_value_dtype(g, y));
    uint64_t bits = 0;
    IrAttrValue av;
    if (es == 0 || es > 8) return cu_unsupported_dtype(c, lower_value_dtype(g, y));
    if (ir_node_attr(g, c->node, "value", &av) && av.kind == IR_ATTR_TENSOR) {
        if (ir_const_nbytes(g, av.tensor) != es) return cu_unsupported(c, "with this value");
        memcpy(&bits, ir_const_data(g, av.tensor), es); /* little-endian: the low bytes */
    }
    int64_t work = cu_fx_prod(c, y, 0, ir_type_rank(g, ir_value_type(g, y)), 1);
    if (!work) return IR_OK;
    uint32_t slots[1] = {y};
    IrStatus s = cu_kbegin(c, slots, 1, CU_BLOCK, false);
    if (s) return s;
    CuDims yd;
    if (!cu_dims_of(c, y, &yd)) return cu_unsupported(c, "with an unknown dim");
    SymFill p = {y, int_type(c, es), NULL};
    p.v = LLVMConstInt(p.t, bits, 0);
    LLVMValueRef stv[1][IR_MAX_RANK];
    cu_dims_strides(c, &yd, stv[0]);
    cu_nest_v(c, &yd, 1, stv, sym_fill_body, &p);
    return cu_kend(c, work, NULL);
}

/* ---- contractions through cuBLASLt ------------------------------------------------------------- */

/* A dim as a step field: the constant, or CU_FX of its formula. */
static int64_t fx_dim(Cu *c, IrExprId x, IrStatus *s) {
    int64_t v = 0;
    if (!*s) *s = fx_exprs(c, &x, 1, 1, &v);
    return v;
}

static IrStatus sym_gemm(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrValueId vc = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    if (lower_value_dtype(g, va) != IR_DTYPE_F32 || lower_value_dtype(g, vb) != IR_DTYPE_F32) return cu_unsupported(c, "on non-f32 tensors");
    const IrExprId *da = ir_type_dims(g, ir_value_type(g, va)), *db = ir_type_dims(g, ir_value_type(g, vb));
    if (ir_type_rank(g, ir_value_type(g, va)) != 2 || ir_type_rank(g, ir_value_type(g, vb)) != 2) return cu_unsupported(c, "with these ranks");
    bool found;
    int ta = (int)ir_node_attr_int(g, n, "transA", &found), tb = (int)ir_node_attr_int(g, n, "transB", &found);
    double alpha = ir_node_attr_float(g, n, "alpha", &found);
    if (!found) alpha = 1.0;
    double beta = ir_node_attr_float(g, n, "beta", &found);
    if (!found) beta = 1.0;
    IrStatus s = IR_OK;
    CuGemm gm = {.dt = "f32", .a = {va, 0}, .b = {vb, 0}, .c = {vy, 0}, .batch = 1, .ta = ta, .tb = tb, .alpha = alpha};
    gm.m = fx_dim(c, da[ta ? 1 : 0], &s);
    gm.k = fx_dim(c, da[ta ? 0 : 1], &s);
    gm.n = fx_dim(c, db[tb ? 0 : 1], &s);
    gm.lda = fx_dim(c, da[1], &s);
    gm.ldb = fx_dim(c, db[1], &s);
    gm.ldc = gm.n;
    if (s) return s;
    if (vc && beta != 0.0) { /* only a bias row [N] or [1, N] (cuBLASLt's BIAS epilogue) */
        uint32_t rc;
        int64_t dc[IR_MAX_RANK];
        if (gm.n < 0 || beta != 1.0 || !lower_value_shape(g, vc, &rc, dc) || rc < 1 || rc > 2 || dc[rc - 1] != gm.n ||
            (rc == 2 && dc[0] != 1) || gm.n < 2)
            return cu_unsupported(c, "with this C and symbolic shapes (a bias row only)");
        gm.bias_slot = vc;
    }
    if (gm.n == 0 || gm.m == 0) return IR_OK;
    if (gm.k == 0) return cu_unsupported(c, "with K = 0");
    return cu_push_gemm(c, &gm);
}

/* MatMul: x[..., M, K] @ w[K, N] as one GEMM of all the rows, or equal batch dims as one
 * strided-batched GEMM. */
static IrStatus sym_matmul(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrDType dt = lower_value_dtype(g, va);
    if ((dt != IR_DTYPE_F32 && dt != IR_DTYPE_BF16) || lower_value_dtype(g, vb) != dt)
        return cu_unsupported(c, "on tensors other than f32 or bf16");
    uint32_t ra = ir_type_rank(g, ir_value_type(g, va)), rb = ir_type_rank(g, ir_value_type(g, vb));
    const IrExprId *da = ir_type_dims(g, ir_value_type(g, va)), *db = ir_type_dims(g, ir_value_type(g, vb));
    if (ra < 2 || rb < 2 || ra > IR_MAX_RANK || rb > IR_MAX_RANK) return cu_unsupported(c, "with 1-D operands and symbolic shapes");
    bool same_batch = ra == rb && memcmp(da, db, (ra - 2) * sizeof *da) == 0;
    if (rb != 2 && !same_batch) return cu_unsupported(c, "with broadcast batch dims and symbolic shapes");
    IrStatus s = IR_OK;
    CuGemm gm = {.a = {va, 0}, .b = {vb, 0}, .c = {vy, 0}, .alpha = 1.0, .batch = 1};
    snprintf(gm.dt, sizeof gm.dt, "%s", dt == IR_DTYPE_BF16 ? "bf16" : "f32");
    gm.k = fx_dim(c, da[ra - 1], &s);
    gm.n = fx_dim(c, db[rb - 1], &s);
    gm.lda = gm.k;
    gm.ldb = gm.ldc = gm.n;
    if (rb == 2) { /* every row of x at once */
        if (!s) s = fx_exprs(c, da, ra - 1, 1, &gm.m);
    } else {
        gm.m = fx_dim(c, da[ra - 2], &s);
        if (!s) s = fx_exprs(c, da, ra - 2, 1, &gm.batch);
        IrExprId mk[2] = {da[ra - 2], da[ra - 1]}, kn[2] = {db[rb - 2], db[rb - 1]}, mn[2] = {da[ra - 2], db[rb - 1]};
        if (!s) s = fx_exprs(c, mk, 2, 1, &gm.sa);
        if (!s) s = fx_exprs(c, kn, 2, 1, &gm.sb);
        if (!s) s = fx_exprs(c, mn, 2, 1, &gm.sc);
    }
    if (s) return s;
    if (gm.m == 0 || gm.n == 0 || gm.batch == 0) return IR_OK;
    if (gm.k == 0) return cu_unsupported(c, "with K = 0");
    return cu_push_gemm(c, &gm);
}

/* ---- dispatch ------------------------------------------------------------------------------------ */

/* inference (training_mode absent or a constant false): a copy, the mask all true */
static IrStatus sym_dropout(Cu *c) {
    const IrGraph *g = c->g;
    IrValueId tm = ir_node_num_operands(g, c->node) > 2 ? ir_node_operand(g, c->node, 2) : 0;
    const unsigned char *tmv = tm ? lower_value_const_data(g, tm) : NULL;
    IrValueId mask = ir_node_num_results(g, c->node) > 1 ? ir_node_result(g, c->node, 1) : 0;
    if ((tm && (!tmv || *tmv)) || lower_value_dtype(g, ir_node_result(g, c->node, 0)) == IR_DTYPE_STRING)
        return cu_unsupported(c, "in training mode with symbolic shapes");
    int64_t nb = mask ? cu_fx_prod(c, mask, 0, ir_type_rank(g, ir_value_type(g, mask)),
                                   (int64_t)ir_dtype_size(lower_value_dtype(g, mask))) : 0;
    CuStep st_ = {.kind = CU_STEP_MEMSET, .n_args = 1, .arg = {{mask, 0}}, .bytes = nb, .value = 1};
    IrStatus s = nb ? cu_push_step(c, &st_) : IR_OK;
    return s ? s : sym_copy(c);
}

static IrStatus sym_concat(Cu *c) { return sym_concat_split(c, false); }
static IrStatus sym_split(Cu *c) { return sym_concat_split(c, true); }
static IrStatus sym_fused(Cu *c) { return sym_ew(c, true); }
static IrStatus sym_family(Cu *c) { return cuda_op_row(ir_node_op(c->g, c->node))->emit(c); }

static IrStatus (*const sym_emit[IR_OP_COUNT])(Cu *) = {
#define CUDA_SYM(id, fn) [IR_OP_##id] = fn,
#include "backend/cuda/sym_ops.def"
#undef CUDA_SYM
};

IrStatus cu_gen_symbolic(Cu *c) {
    IrOp op = ir_node_op(c->g, c->node);
    const CudaOpRow *row = cuda_op_row(op);
    if (sym_emit[op]) return sym_emit[op](c);
    if (row->emit == cuda_emit_cmp) return cu_gen_ew_typed(c); /* comparisons and logic, every dtype */
    if (row->emit == cuda_emit_ew && ir_node_num_results(c->g, c->node) == 1) {
        IrNodeId n = c->node;
        bool f32 = ew_dtype_ok(c->g, n) && cu_ew_f32_op(op);
        return f32 ? sym_ew(c, false) : cu_gen_ew_typed(c); /* ew_typed.c takes value strides too */
    }
    IrValueId v = ir_node_num_results(c->g, c->node) ? ir_node_result(c->g, c->node, 0) : 0;
    const char *vn = v ? ir_value_name(c->g, v) : "";
    ir_diag_at_node(c->diag, c->g, c->node, IR_SEV_ERROR,
                    "the cuda backend (%s) does not support %s with symbolic shapes yet%s%s%s; bind the symbols with "
                    "--input", c->target, ir_op_name(op), *vn ? " ('" : "", vn, *vn ? "')" : "");
    return IR_EUNSUPPORTED;
}

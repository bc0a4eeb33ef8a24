/* Normalizations done one thread per element: BatchNormalization (inference) and LRN; the
 * bias epilogue kernel shared by Conv and Gemm.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- BatchNormalization (inference), bias epilogues ------------------------------------------- */

typedef struct BnCtx {
    uint32_t y, x, scale, bias, mean, var;
    double eps;
} BnCtx;

static void bn_body(Cu *c, LLVMValueRef *o, void *user) {
    BnCtx *p = user;
    LLVMValueRef ch = o[2];
    LLVMValueRef v = LLVMBuildFAdd(c->b, ld(c, c->f32, pslot(c, p->var), ch), cf(c, p->eps), "");
    LLVMValueRef inv = LLVMBuildFDiv(c->b, cf(c, 1.0), cu_f32_intr(c, "llvm.sqrt", v), "");
    LLVMValueRef t = LLVMBuildFSub(c->b, ld(c, c->f32, pslot(c, p->x), o[1]), ld(c, c->f32, pslot(c, p->mean), ch), "");
    t = LLVMBuildFMul(c->b, LLVMBuildFMul(c->b, t, inv, ""), ld(c, c->f32, pslot(c, p->scale), ch), "");
    st(c, c->f32, pslot(c, p->y), o[0], LLVMBuildFAdd(c->b, t, ld(c, c->f32, pslot(c, p->bias), ch), ""));
}

static IrStatus gen_batchnorm(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    if (ir_node_num_operands(g, n) < 5) return cu_unsupported(c, "without mean and var");
    bool tm_found;
    if (ir_node_attr_int(g, n, "training_mode", &tm_found) != 0) return cu_unsupported(c, "in training mode");
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) return cu_unsupported(c, "in training mode");
    BnCtx p = {ir_node_result(g, n, 0), ir_node_operand(g, n, 0), ir_node_operand(g, n, 1), ir_node_operand(g, n, 2),
               ir_node_operand(g, n, 3), ir_node_operand(g, n, 4), 0};
    bool found;
    p.eps = ir_node_attr_float(g, n, "epsilon", &found);
    if (!found) p.eps = 1e-5;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    if (!cu_value_shape(c, p.x, &r, d)) return cu_unsupported(c, "with an unknown dim");
    for (uint32_t i = 0; i < 5; i++)
        if (lower_value_dtype(g, ir_node_operand(g, n, i)) != IR_DTYPE_F32) return cu_unsupported(c, "on non-f32 tensors");
    if (r < 2) return cu_unsupported(c, "with rank < 2");
    for (uint32_t k = 1; k < r; k++)
        if (d[k] < 0) return cu_unsupported(c, "with symbolic dims other than the batch");
    if (d[0] < 0) { /* a symbolic batch: the flat index, its channel (i / inner) % C */
        int64_t work = cu_fx_prod(c, p.x, 0, r, 1), inner = ir_shape_numel(r - 2, d + 2);
        if (!work) return IR_OK;
        uint32_t slots[6] = {p.y, p.x, p.scale, p.bias, p.mean, p.var};
        IrStatus st_ = cu_kbegin(c, slots, 6, CU_BLOCK, false);
        if (st_) return st_;
        CuDims xd;
        if (!cu_dims_of(c, p.x, &xd)) return cu_unsupported(c, "with an unknown dim");
        Loop l;
        cu_grid_begin_v(c, &l, cu_dims_prod(c, &xd, 0, r));
        LLVMValueRef o[3] = {l.iv, l.iv, LLVMBuildURem(c->b, LLVMBuildUDiv(c->b, l.iv, ci(c, inner), ""), ci(c, d[1]), "")};
        bn_body(c, o, &p);
        cu_loop_end(c, &l);
        return cu_kend(c, work, NULL);
    }
    int64_t dims[3] = {d[0], d[1], ir_shape_numel(r - 2, d + 2)}, s[3][IR_MAX_RANK] = {{d[1] * dims[2], dims[2], 1},
                                                                             {d[1] * dims[2], dims[2], 1}, {0, 1, 0}};
    uint32_t slots[6] = {p.y, p.x, p.scale, p.bias, p.mean, p.var};
    IrStatus st_ = cu_kbegin(c, slots, 6, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 3, dims, 3, s, NULL, bn_body, &p);
    return cu_kend(c, ir_shape_numel(3, dims), NULL);
}

/* y[o0] = (y[o0] or acc[o0]) * scale + beta * bias[o1] */
typedef struct BiasCtx {
    uint32_t y, bias;
    double beta;
} BiasCtx;

static void bias_body(Cu *c, LLVMValueRef *o, void *user) {
    BiasCtx *p = user;
    LLVMValueRef t = LLVMBuildFMul(c->b, ld(c, c->f32, pslot(c, p->bias), o[1]), cf(c, p->beta), "");
    st(c, c->f32, pslot(c, p->y), o[0], LLVMBuildFAdd(c->b, ld(c, c->f32, pslot(c, p->y), o[0]), t, ""));
}

IrStatus cu_bias_kernel(Cu *c, uint32_t y, uint32_t bias, double beta, uint32_t rank, const int64_t *dims,
                            int64_t (*s)[IR_MAX_RANK]) {
    BiasCtx p = {y, bias, beta};
    uint32_t slots[2] = {y, bias};
    IrStatus st_ = cu_kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, rank, dims, 2, s, NULL, bias_body, &p);
    return cu_kend(c, ir_shape_numel(rank, dims), NULL);
}

/* LRN across channels: y = x / (bias + alpha/size * sum over the channel window of x^2)^beta,
 * one thread per element, the window loop unrolled (size is small and static). */
typedef struct LrnCtx {
    uint32_t y, x;
    int64_t c, s, size;
    double alpha, beta, bias;
} LrnCtx;

static void lrn_body(Cu *c, LLVMValueRef *o, void *user) {
    LrnCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef ch = LLVMBuildURem(b, LLVMBuildUDiv(b, o[0], ci(c, p->s), ""), ci(c, p->c), "");
    LLVMValueRef sq = cf(c, 0.0);
    int64_t lo = (p->size - 1) / 2, hi = p->size - 1 - lo;
    for (int64_t j = -lo; j <= hi; j++) {
        LLVMValueRef cj = LLVMBuildAdd(b, ch, ci(c, j), "");
        LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, cj, ci(c, p->c), ""); /* also catches cj < 0 */
        LLVMValueRef off = sel(c, ok, LLVMBuildAdd(b, o[0], ci(c, j * p->s), ""), o[0]);
        LLVMValueRef v = ld(c, c->f32, pslot(c, p->x), off);
        sq = sel(c, ok, LLVMBuildFAdd(b, sq, LLVMBuildFMul(b, v, v, ""), ""), sq);
    }
    LLVMValueRef den = LLVMBuildFAdd(b, cf(c, p->bias), LLVMBuildFMul(b, sq, cf(c, p->alpha / (double)p->size), ""), "");
    den = cu_pow(c, den, cf(c, p->beta));
    st(c, c->f32, pslot(c, p->y), o[0], LLVMBuildFDiv(b, ld(c, c->f32, pslot(c, p->x), o[0]), den, ""));
}

static IrStatus gen_lrn(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (lower_value_dtype(g, x) != IR_DTYPE_F32) return cu_unsupported(c, "on non-f32 tensors");
    uint32_t r;
    int64_t d[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, x, &r, d);
    if (r < 2) return cu_unsupported(c, "with rank < 2");
    bool found;
    LrnCtx p = {y, x, d[1], ir_shape_numel(r - 2, d + 2), ir_node_attr_int(g, n, "size", &found), 0, 0, 0};
    if (!found || p.size <= 0 || p.size > 64) return cu_unsupported(c, "with this size");
    p.alpha = ir_node_attr_float(g, n, "alpha", &found);
    if (!found) p.alpha = 1e-4;
    p.beta = ir_node_attr_float(g, n, "beta", &found);
    if (!found) p.beta = 0.75;
    p.bias = ir_node_attr_float(g, n, "bias", &found);
    if (!found) p.bias = 1.0;
    int64_t total = ir_shape_numel(r, d);
    if (!total) return IR_OK;
    uint32_t slots[2] = {y, x};
    IrStatus st_ = cu_kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, lrn_body, &p);
    return cu_kend(c, total, NULL);
}


/* ---- rows of backend/cuda/cuda_ops.def ---- */

IrStatus cuda_emit_batchnorm(Cu *c) { return gen_batchnorm(c); }
IrStatus cuda_emit_lrn(Cu *c) { return gen_lrn(c); }

/* ---- LayerNormalization on every float dtype, with Mean and InvStdDev: one thread per row ---- */

/* Offset of element j of the normalized dims in an operand broadcast to them (strides s). */
static LLVMValueRef bcast_off(Cu *c, uint32_t nd, const int64_t *dims, const int64_t *s, LLVMValueRef j) {
    LLVMValueRef off = ci(c, 0), rem = j;
    for (uint32_t k = nd; k-- > 0;) {
        if (dims[k] == 1) continue;
        LLVMValueRef coord = k == 0 ? rem : LLVMBuildURem(c->b, rem, ci(c, dims[k]), "");
        if (k > 0) rem = LLVMBuildUDiv(c->b, rem, ci(c, dims[k]), "");
        if (s[k]) off = LLVMBuildAdd(c->b, off, LLVMBuildMul(c->b, coord, ci(c, s[k]), ""), "");
    }
    return off;
}

typedef struct LnCtx {
    IrValueId x, sc, bi, y, mean, inv;
    int64_t len;
    uint32_t nd;
    int64_t nd_dims[IR_MAX_RANK], ss[IR_MAX_RANK], bs[IR_MAX_RANK];
    double eps;
} LnCtx;

static LLVMValueRef ln_x(Cu *c, const LnCtx *p, LLVMValueRef base, LLVMValueRef j) {
    return cu_load_typed(c, lower_value_dtype(c->g, p->x), pslot(c, p->x), LLVMBuildAdd(c->b, base, j, ""));
}

static void ln_body(Cu *c, LLVMValueRef *o, void *user) {
    LnCtx *p = user;
    LLVMBuilderRef b = c->b;
    const IrGraph *g = c->g;
    LLVMValueRef nf = LLVMConstReal(c->f64, (double)p->len), acc;
    Loop l;
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->len), ci(c, 1), LLVMConstReal(c->f64, 0.0), &acc);
    cu_loop_acc_next(c, acc, LLVMBuildFAdd(b, acc, ln_x(c, p, o[0], l.iv), ""));
    cu_loop_end(c, &l);
    LLVMValueRef m = LLVMBuildFDiv(b, acc, nf, "");
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->len), ci(c, 1), LLVMConstReal(c->f64, 0.0), &acc);
    LLVMValueRef t = LLVMBuildFSub(b, ln_x(c, p, o[0], l.iv), m, "");
    cu_loop_acc_next(c, acc, LLVMBuildFAdd(b, acc, LLVMBuildFMul(b, t, t, ""), ""));
    cu_loop_end(c, &l);
    LLVMValueRef v = LLVMBuildFAdd(b, LLVMBuildFDiv(b, acc, nf, ""), LLVMConstReal(c->f64, p->eps), "");
    LLVMValueRef inv = LLVMBuildFDiv(b, LLVMConstReal(c->f64, 1.0), cu_intr(c, "llvm.sqrt", &c->f64, 1, &v, 1), "");
    cu_loop_begin(c, &l, ci(c, 0), ci(c, p->len), ci(c, 1));
    LLVMValueRef r = LLVMBuildFMul(b, LLVMBuildFSub(b, ln_x(c, p, o[0], l.iv), m, ""), inv, "");
    r = LLVMBuildFMul(b, r, cu_load_typed(c, lower_value_dtype(g, p->sc), pslot(c, p->sc), bcast_off(c, p->nd, p->nd_dims, p->ss, l.iv)), "");
    if (p->bi)
        r = LLVMBuildFAdd(b, r, cu_load_typed(c, lower_value_dtype(g, p->bi), pslot(c, p->bi), bcast_off(c, p->nd, p->nd_dims, p->bs, l.iv)), "");
    cu_store_typed(c, lower_value_dtype(g, p->y), pslot(c, p->y), LLVMBuildAdd(b, o[0], l.iv, ""), r);
    cu_loop_end(c, &l);
    if (p->mean) cu_store_typed(c, lower_value_dtype(g, p->mean), pslot(c, p->mean), o[1], m);
    if (p->inv) cu_store_typed(c, lower_value_dtype(g, p->inv), pslot(c, p->inv), o[1], inv);
}

IrStatus cu_gen_layernorm_typed(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    LnCtx p = {.x = ir_node_operand(g, n, 0), .sc = ir_node_operand(g, n, 1), .y = ir_node_result(g, n, 0)};
    p.bi = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    p.mean = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    p.inv = ir_node_num_results(g, n) > 2 ? ir_node_result(g, n, 2) : 0;
    IrValueId all[6] = {p.x, p.sc, p.bi, p.y, p.mean, p.inv};
    for (int i = 0; i < 6; i++)
        if (all[i] && cu_kind(lower_value_dtype(g, all[i])) != CU_KF) return cu_unsupported_dtype(c, lower_value_dtype(g, all[i]));
    for (int i = 0; i < 6; i++)
        if (all[i] && !cu_typed_ok(lower_value_dtype(g, all[i]))) return cu_unsupported_dtype(c, lower_value_dtype(g, all[i]));
    uint32_t r, vr;
    int64_t dd[IR_MAX_RANK], vd[IR_MAX_RANK];
    lower_value_shape(g, p.x, &r, dd);
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (!found) axis = -1;
    if (!ir_shape_axis_checked(&axis, r)) return cu_unsupported(c, "with this axis");
    p.eps = ir_node_attr_float(g, n, "epsilon", &found);
    if (!found) p.eps = 1e-5;
    p.nd = r - (uint32_t)axis;
    memcpy(p.nd_dims, dd + axis, p.nd * sizeof *dd);
    p.len = ir_shape_numel(p.nd, p.nd_dims);
    for (int k = 0; k < 2; k++) {
        IrValueId v = k ? p.bi : p.sc;
        if (!v) continue;
        lower_value_shape(g, v, &vr, vd);
        if (vr > p.nd || !lower_bcast_to(vr, vd, p.nd, p.nd_dims)) return cu_unsupported(c, "with a scale or bias that does not broadcast");
        ir_shape_broadcast_strides(vr, vd, p.nd, NULL, k ? p.bs : p.ss);
    }
    int64_t outer = ir_shape_numel((uint32_t)axis, dd);
    if (!outer || !p.len) return IR_OK;
    int64_t s[2][IR_MAX_RANK] = {{p.len}, {1}};
    uint32_t slots[6] = {p.y, p.x, p.sc, p.bi ? p.bi : p.x, p.mean ? p.mean : p.y, p.inv ? p.inv : p.y};
    IrStatus st_ = cu_kbegin(c, slots, 6, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &outer, 2, s, NULL, ln_body, &p);
    return cu_kend(c, outer, NULL);
}

/* ---- InstanceNormalization: one thread per (n, c) in double ------------------------------- */

typedef struct InCtx {
    IrValueId x, sc, bi, y;
    IrDType xt, st, bt, yt;
    int64_t C, len;
    double eps;
} InCtx;

static void in_body(Cu *c, LLVMValueRef *o, void *user) {
    InCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef base = LLVMBuildMul(b, o[0], ci(c, p->len), ""), X = pslot(c, p->x), acc, nf = LLVMConstReal(c->f64, (double)p->len);
    LLVMValueRef ch = LLVMBuildURem(b, o[0], ci(c, p->C), "");
    Loop l;
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->len), ci(c, 1), LLVMConstReal(c->f64, 0.0), &acc);
    cu_loop_acc_next(c, acc, LLVMBuildFAdd(b, acc, cu_load_typed(c, p->xt, X, LLVMBuildAdd(b, base, l.iv, "")), ""));
    cu_loop_end(c, &l);
    LLVMValueRef m = LLVMBuildFDiv(b, acc, nf, "");
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->len), ci(c, 1), LLVMConstReal(c->f64, 0.0), &acc);
    LLVMValueRef t = LLVMBuildFSub(b, cu_load_typed(c, p->xt, X, LLVMBuildAdd(b, base, l.iv, "")), m, "");
    cu_loop_acc_next(c, acc, LLVMBuildFAdd(b, acc, LLVMBuildFMul(b, t, t, ""), ""));
    cu_loop_end(c, &l);
    LLVMValueRef v = LLVMBuildFAdd(b, LLVMBuildFDiv(b, acc, nf, ""), LLVMConstReal(c->f64, p->eps), "");
    LLVMValueRef inv = LLVMBuildFDiv(b, LLVMConstReal(c->f64, 1.0), cu_intr(c, "llvm.sqrt", &c->f64, 1, &v, 1), "");
    LLVMValueRef k = LLVMBuildFMul(b, inv, cu_load_typed(c, p->st, pslot(c, p->sc), ch), ""), bb = cu_load_typed(c, p->bt, pslot(c, p->bi), ch);
    cu_loop_begin(c, &l, ci(c, 0), ci(c, p->len), ci(c, 1));
    LLVMValueRef off = LLVMBuildAdd(b, base, l.iv, "");
    LLVMValueRef r = LLVMBuildFAdd(b, LLVMBuildFMul(b, LLVMBuildFSub(b, cu_load_typed(c, p->xt, X, off), m, ""), k, ""), bb, "");
    cu_store_typed(c, p->yt, pslot(c, p->y), off, r);
    cu_loop_end(c, &l);
}

IrStatus cuda_emit_instance_norm(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    InCtx p = {.x = ir_node_operand(g, n, 0), .sc = ir_node_operand(g, n, 1), .bi = ir_node_operand(g, n, 2), .y = ir_node_result(g, n, 0)};
    p.xt = lower_value_dtype(g, p.x), p.st = lower_value_dtype(g, p.sc), p.bt = lower_value_dtype(g, p.bi), p.yt = lower_value_dtype(g, p.y);
    IrDType all[4] = {p.xt, p.st, p.bt, p.yt};
    for (int i = 0; i < 4; i++)
        if (cu_kind(all[i]) != CU_KF || !cu_typed_ok(all[i])) return cu_unsupported_dtype(c, all[i]);
    uint32_t r;
    int64_t d[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, p.x, &r, d);
    if (r < 2) return cu_unsupported(c, "with rank < 2");
    p.C = d[1];
    p.len = ir_shape_numel(r - 2, d + 2);
    if (lower_value_nbytes(g, p.sc) != (size_t)p.C * ir_dtype_size(p.st) || lower_value_nbytes(g, p.bi) != (size_t)p.C * ir_dtype_size(p.bt))
        return cu_unsupported(c, "with a scale or bias of other than C entries");
    bool found;
    p.eps = ir_node_attr_float(g, n, "epsilon", &found);
    if (!found) p.eps = 1e-5;
    int64_t rows = d[0] * p.C;
    if (!rows || !p.len) return IR_OK;
    uint32_t slots[4] = {p.y, p.x, p.sc, p.bi};
    IrStatus st_ = cu_kbegin(c, slots, 4, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &rows, 1, s1, NULL, in_body, &p);
    return cu_kend(c, rows, NULL);
}

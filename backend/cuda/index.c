/* Index kernels, one thread per output element: Gather on any axis, DepthToSpace and
 * SpaceToDepth (strided views), ReverseSequence, OneHot, EyeLike and Range (its start and delta
 * read on the device: the output length is static). Values move as raw bytes where they are not
 * computed, so every dtype is handled.
 */
#include "backend/cuda/cu.h"

#include <string.h>

static LLVMValueRef i64c(Cu *c, int64_t v) { return LLVMConstInt(c->i64, (unsigned long long)v, 1); }
static LLVMValueRef to_it(Cu *c, LLVMValueRef v) { return c->it == c->i64 ? v : LLVMBuildTrunc(c->b, v, c->it, ""); }

/* body: the op's element i (one function per op, named by its cuda_emit_ function). */
typedef struct IxCtx {
    void (*body)(Cu *c, const struct IxCtx *p, LLVMValueRef i);
    IrValueId y, x, aux, aux2;
    IrDType xt, yt, at;
    LLVMTypeRef et;
    int64_t outer, n, inner, ni, k, depth, B, T, xs_b, xs_t;
    bool batch_first;
} IxCtx;

#define IX_BODY(name) static void name(Cu *c, const IxCtx *p, LLVMValueRef i)

/* y[o, j, e] = x[o, idx[j] (wrapped, clamped), e] */
IX_BODY(ix_gather) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef Y = pslot(c, p->y);
    LLVMValueRef e = LLVMBuildURem(b, i, ci(c, p->inner), ""), r = LLVMBuildUDiv(b, i, ci(c, p->inner), "");
    LLVMValueRef j = LLVMBuildURem(b, r, ci(c, p->ni), ""), ou = LLVMBuildUDiv(b, r, ci(c, p->ni), "");
    LLVMValueRef v = cu_load_typed(c, p->at, pslot(c, p->aux), j);
    v = sel(c, LLVMBuildICmp(b, LLVMIntSLT, v, i64c(c, 0), ""), LLVMBuildAdd(b, v, i64c(c, p->n), ""), v);
    v = sel(c, LLVMBuildICmp(b, LLVMIntSLT, v, i64c(c, 0), ""), i64c(c, 0), v);
    v = to_it(c, sel(c, LLVMBuildICmp(b, LLVMIntSGE, v, i64c(c, p->n), ""), i64c(c, p->n - 1), v));
    LLVMValueRef src = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, ou, ci(c, p->n), ""), v, ""), ci(c, p->inner), ""), e, "");
    st(c, p->et, Y, i, ld(c, p->et, pslot(c, p->x), src));
}

/* i = (t, b) or (b, t) major, then inner */
IX_BODY(ix_reverse_sequence) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef Y = pslot(c, p->y);
    LLVMValueRef e = LLVMBuildURem(b, i, ci(c, p->inner), ""), r = LLVMBuildUDiv(b, i, ci(c, p->inner), "");
    LLVMValueRef t, bi;
    if (p->batch_first) t = LLVMBuildURem(b, r, ci(c, p->T), ""), bi = LLVMBuildUDiv(b, r, ci(c, p->T), "");
    else bi = LLVMBuildURem(b, r, ci(c, p->B), ""), t = LLVMBuildUDiv(b, r, ci(c, p->B), "");
    LLVMValueRef len = to_it(c, cu_load_typed(c, p->at, pslot(c, p->aux), bi));
    LLVMValueRef src_t = sel(c, LLVMBuildICmp(b, LLVMIntSLT, t, len, ""), LLVMBuildSub(b, LLVMBuildSub(b, len, ci(c, 1), ""), t, ""), t);
    src_t = sel(c, LLVMBuildICmp(b, LLVMIntUGE, src_t, ci(c, p->T), ""), t, src_t); /* a bad length reads in place */
    LLVMValueRef src = LLVMBuildAdd(b, LLVMBuildAdd(b, LLVMBuildMul(b, bi, ci(c, p->xs_b), ""), LLVMBuildMul(b, src_t, ci(c, p->xs_t), ""), ""), e, "");
    st(c, p->et, Y, i, ld(c, p->et, pslot(c, p->x), src));
}

/* y[o, c, in] = idx[o, in] (as an integer, wrapped) == c ? on : off */
IX_BODY(ix_one_hot) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef Y = pslot(c, p->y);
    LLVMValueRef in = LLVMBuildURem(b, i, ci(c, p->inner), ""), r = LLVMBuildUDiv(b, i, ci(c, p->inner), "");
    LLVMValueRef cc = LLVMBuildURem(b, r, ci(c, p->depth), ""), ou = LLVMBuildUDiv(b, r, ci(c, p->depth), "");
    LLVMValueRef v = cu_load_typed(c, p->at, pslot(c, p->x), LLVMBuildAdd(b, LLVMBuildMul(b, ou, ci(c, p->inner), ""), in, ""));
    if (cu_kind(p->at) == CU_KF) v = cu_convert(c, v, IR_DTYPE_F64, IR_DTYPE_I64);
    v = sel(c, LLVMBuildICmp(b, LLVMIntSLT, v, i64c(c, 0), ""), LLVMBuildAdd(b, v, i64c(c, p->depth), ""), v);
    LLVMValueRef hit = LLVMBuildICmp(b, LLVMIntEQ, v, LLVMBuildZExt(b, cc, c->i64, ""), "");
    st(c, p->et, Y, i, ld(c, p->et, pslot(c, p->aux), sel(c, hit, ci(c, 1), ci(c, 0))));
}

IX_BODY(ix_eye_like) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef Y = pslot(c, p->y);
    LLVMValueRef col = LLVMBuildURem(b, i, ci(c, p->inner), ""), row = LLVMBuildUDiv(b, i, ci(c, p->inner), "");
    LLVMValueRef hit = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildSub(b, col, row, ""), ci(c, p->k), "");
    LLVMValueRef v = LLVMBuildZExt(b, hit, c->i64, "");
    cu_store_typed(c, p->yt, Y, i, cu_kind(p->yt) == CU_KF ? cu_convert(c, v, IR_DTYPE_I64, IR_DTYPE_F64) : v);
}

/* start + i * delta */
IX_BODY(ix_range) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef Y = pslot(c, p->y);
    LLVMValueRef s0 = cu_load_typed(c, p->yt, pslot(c, p->x), ci(c, 0)), dl = cu_load_typed(c, p->yt, pslot(c, p->aux), ci(c, 0));
    LLVMValueRef i64 = LLVMBuildZExt(b, i, c->i64, ""), v;
    if (cu_kind(p->yt) == CU_KF) v = LLVMBuildFAdd(b, s0, LLVMBuildFMul(b, LLVMBuildSIToFP(b, i64, c->f64, ""), dl, ""), "");
    else v = LLVMBuildAdd(b, s0, LLVMBuildMul(b, i64, dl, ""), "");
    cu_store_typed(c, p->yt, Y, i, v);
}

static void ix_body(Cu *c, LLVMValueRef *o, void *user) {
    IxCtx *p = user;
    p->body(c, p, o[0]);
}

static IrStatus ix_kernel(Cu *c, IxCtx *p) {
    uint32_t r;
    int64_t d[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    /* symbolic shapes (Range only: its body reads the flat index alone): the count a formula */
    bool sym = !lower_value_shape(c->g, p->y, &r, d);
    if (sym && p->body != ix_range) return cu_unsupported(c, "with symbolic shapes");
    int64_t total = sym ? cu_fx_prod(c, p->y, 0, ir_type_rank(c->g, ir_value_type(c->g, p->y)), 1) : ir_shape_numel(r, d);
    if (!total) return IR_OK;
    uint32_t slots[3] = {p->y, p->x ? p->x : p->y, p->aux ? p->aux : p->y};
    IrStatus st_ = cu_kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    CuDims yd;
    if (!sym) cu_emit_nest(c, 1, &total, 1, s1, NULL, ix_body, p);
    else if (!cu_dims_of(c, p->y, &yd)) return cu_unsupported(c, "with an unknown dim");
    else {
        Loop l;
        cu_grid_begin_v(c, &l, cu_dims_prod(c, &yd, 0, yd.rank));
        ix_body(c, &l.iv, p);
        cu_loop_end(c, &l);
    }
    return cu_kend(c, total, NULL);
}

static bool int_index(IrDType t) { return t == IR_DTYPE_I64 || t == IR_DTYPE_I32; }

/* Gather on axis 0 keeps data.c's kernel; other axes here. */
IrStatus cu_gen_gather_axis(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IxCtx p = {.body = ix_gather, .y = ir_node_result(g, n, 0), .x = ir_node_operand(g, n, 0), .aux = ir_node_operand(g, n, 1)};
    p.at = lower_value_dtype(g, p.aux);
    if (!int_index(p.at)) return cu_unsupported(c, "with non-i32/i64 indices");
    p.et = int_type(c, ir_dtype_size(lower_value_dtype(g, p.x)));
    uint32_t r, ri;
    int64_t d[IR_MAX_RANK], di[IR_MAX_RANK];
    lower_value_shape(g, p.x, &r, d);
    lower_value_shape(g, p.aux, &ri, di);
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (r == 0 || !ir_shape_axis_checked(&axis, r)) return cu_unsupported(c, "with this axis");
    ir_shape_split(r, d, (uint32_t)axis, &p.outer, &p.n, &p.inner);
    p.ni = ir_shape_numel(ri, di);
    if (p.n == 0 && p.outer * p.ni * p.inner != 0) return cu_unsupported(c, "on an empty axis");
    return ix_kernel(c, &p);
}

IrStatus cuda_emit_reverse_sequence(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IxCtx p = {.body = ix_reverse_sequence, .y = ir_node_result(g, n, 0), .x = ir_node_operand(g, n, 0), .aux = ir_node_operand(g, n, 1)};
    p.at = lower_value_dtype(g, p.aux);
    if (!int_index(p.at)) return cu_unsupported(c, "with non-i32/i64 lengths");
    p.et = int_type(c, ir_dtype_size(lower_value_dtype(g, p.x)));
    uint32_t r;
    int64_t d[IR_MAX_RANK], xs[IR_MAX_RANK];
    lower_value_shape(g, p.x, &r, d);
    bool found;
    int64_t ba = ir_node_attr_int(g, n, "batch_axis", &found), ta;
    if (!found) ba = 1;
    ta = ir_node_attr_int(g, n, "time_axis", &found);
    if (!found) ta = 0;
    if (r < 2 || !ir_shape_axis_checked(&ba, r) || !ir_shape_axis_checked(&ta, r) || ba == ta || ba > 1 || ta > 1)
        return cu_unsupported(c, "with these axes");
    ir_shape_strides(r, d, xs);
    p.B = d[ba], p.T = d[ta], p.xs_b = xs[ba], p.xs_t = xs[ta], p.batch_first = ba == 0;
    p.inner = ir_shape_numel(r - 2, d + 2);
    return ix_kernel(c, &p);
}

IrStatus cuda_emit_one_hot(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IxCtx p = {.body = ix_one_hot, .y = ir_node_result(g, n, 0), .x = ir_node_operand(g, n, 0), .aux = ir_node_operand(g, n, 2)};
    p.at = lower_value_dtype(g, p.x);
    if (!cu_typed_ok(p.at) || p.at == IR_DTYPE_BOOL) return cu_unsupported_dtype(c, p.at);
    p.et = int_type(c, ir_dtype_size(lower_value_dtype(g, p.aux)));
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    lower_value_shape(g, p.y, &r, d);
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (!found) axis = -1;
    if (!ir_shape_axis_checked(&axis, r)) return cu_unsupported(c, "with this axis");
    ir_shape_split(r, d, (uint32_t)axis, &p.outer, &p.depth, &p.inner);
    return ix_kernel(c, &p);
}

IrStatus cuda_emit_eye_like(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IxCtx p = {.body = ix_eye_like, .y = ir_node_result(g, n, 0)};
    p.yt = lower_value_dtype(g, p.y);
    if (!cu_typed_ok(p.yt)) return cu_unsupported_dtype(c, p.yt);
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    lower_value_shape(g, p.y, &r, d);
    if (r != 2) return cu_unsupported(c, "with rank other than 2");
    bool found;
    p.k = ir_node_attr_int(g, n, "k", &found);
    p.inner = d[1];
    return ix_kernel(c, &p);
}

IrStatus cuda_emit_range(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IxCtx p = {.body = ix_range, .y = ir_node_result(g, n, 0), .x = ir_node_operand(g, n, 0), .aux = ir_node_operand(g, n, 2)};
    p.yt = lower_value_dtype(g, p.y);
    if (!cu_typed_ok(p.yt) || p.yt == IR_DTYPE_BOOL || lower_value_dtype(g, p.x) != p.yt || lower_value_dtype(g, p.aux) != p.yt)
        return cu_unsupported_dtype(c, p.yt);
    return ix_kernel(c, &p);
}

/* DepthToSpace / SpaceToDepth: the output viewed as 6 dims over strides of the input */
IrStatus cuda_emit_space_depth(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    lower_value_shape(g, x, &r, d);
    bool found;
    int64_t bs = ir_node_attr_int(g, n, "blocksize", &found);
    if (r != 4 || bs <= 0) return cu_unsupported(c, "with this rank or blocksize");
    int64_t N = d[0], C = d[1], H = d[2], W = d[3], HW = H * W, vd[6], s[2][IR_MAX_RANK];
    if (ir_node_op(g, n) == IR_OP_DEPTH_TO_SPACE) {
        const char *mode = ir_node_attr_string(g, n, "mode", &found);
        bool crd = found && mode && strcmp(mode, "CRD") == 0;
        if (C % (bs * bs)) return cu_unsupported(c, "with channels not divisible by blocksize^2");
        int64_t c2 = C / (bs * bs);
        int64_t v[6] = {N, c2, H, bs, W, bs}, vs[6] = {C * HW, crd ? bs * bs * HW : HW, W, crd ? bs * HW : bs * c2 * HW, 1, crd ? HW : c2 * HW};
        memcpy(vd, v, sizeof v);
        memcpy(s[1], vs, sizeof vs);
    } else {
        if (H % bs || W % bs) return cu_unsupported(c, "with spatial dims not divisible by blocksize");
        int64_t v[6] = {N, bs, bs, C, H / bs, W / bs}, vs[6] = {C * H * W, W, 1, H * W, bs * W, bs};
        memcpy(vd, v, sizeof v);
        memcpy(s[1], vs, sizeof vs);
    }
    ir_shape_strides(6, vd, s[0]);
    return cu_copy_kernel(c, y, x, ir_dtype_size(lower_value_dtype(g, x)), 6, vd, s, NULL);
}

/* ---- GatherND / ScatterND: index tuples of k entries address slices of the data ---------------- */

typedef struct NdCtx {
    IrValueId y, x, idx, upd;
    IrDType dt, it;
    LLVMTypeRef et;
    uint32_t bdims, k;
    int64_t xd[IR_MAX_RANK], xs[IR_MAX_RANK], nt, slice;
    int red; /* ScatterND: 0 none, 1 add, 2 mul, 3 max, 4 min */
} NdCtx;

/* offset in x of tuple t (flat over all tuples) of the batch whose offset is `base` */
static LLVMValueRef nd_tuple_off(Cu *c, const NdCtx *p, LLVMValueRef t, LLVMValueRef base) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef off = base;
    for (uint32_t q = 0; q < p->k; q++) {
        LLVMValueRef v = cu_load_typed(c, p->it, pslot(c, p->idx), LLVMBuildAdd(b, LLVMBuildMul(b, t, ci(c, p->k), ""), ci(c, q), ""));
        int64_t n = p->xd[p->bdims + q];
        v = sel(c, LLVMBuildICmp(b, LLVMIntSLT, v, i64c(c, 0), ""), LLVMBuildAdd(b, v, i64c(c, n), ""), v);
        v = sel(c, LLVMBuildICmp(b, LLVMIntULT, v, i64c(c, n), ""), v, i64c(c, 0)); /* out of range: element 0 */
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, to_it(c, v), ci(c, p->xs[p->bdims + q]), ""), "");
    }
    return off;
}

static void gnd_body(Cu *c, LLVMValueRef *o, void *user) {
    NdCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef e = LLVMBuildURem(b, o[0], ci(c, p->slice), ""), t = LLVMBuildUDiv(b, o[0], ci(c, p->slice), "");
    LLVMValueRef batch = LLVMBuildUDiv(b, t, ci(c, p->nt), ""), base = ci(c, 0), rem = batch;
    for (uint32_t q = p->bdims; q-- > 0;) {
        LLVMValueRef cq = q == 0 ? rem : LLVMBuildURem(b, rem, ci(c, p->xd[q]), "");
        if (q > 0) rem = LLVMBuildUDiv(b, rem, ci(c, p->xd[q]), "");
        base = LLVMBuildAdd(b, base, LLVMBuildMul(b, cq, ci(c, p->xs[q]), ""), "");
    }
    LLVMValueRef src = LLVMBuildAdd(b, nd_tuple_off(c, p, t, base), e, "");
    st(c, p->et, pslot(c, p->y), o[0], ld(c, p->et, pslot(c, p->x), src));
}

IrStatus cuda_emit_gather_nd(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    NdCtx p = {.y = ir_node_result(g, n, 0), .x = ir_node_operand(g, n, 0), .idx = ir_node_operand(g, n, 1)};
    p.it = lower_value_dtype(g, p.idx);
    if (!int_index(p.it)) return cu_unsupported(c, "with non-i32/i64 indices");
    p.et = int_type(c, ir_dtype_size(lower_value_dtype(g, p.x)));
    uint32_t r, ri;
    int64_t di[IR_MAX_RANK];
    lower_value_shape(g, p.x, &r, p.xd);
    lower_value_shape(g, p.idx, &ri, di);
    ir_shape_strides(r, p.xd, p.xs);
    bool found;
    p.bdims = (uint32_t)ir_node_attr_int(g, n, "batch_dims", &found);
    if (ri < 1 || p.bdims >= ri || p.bdims >= r) return cu_unsupported(c, "with these ranks");
    p.k = (uint32_t)di[ri - 1];
    if (p.bdims + p.k > r) return cu_unsupported(c, "with index tuples longer than the data rank");
    int64_t batches = ir_shape_numel(p.bdims, p.xd);
    p.nt = batches ? ir_shape_numel(ri - 1, di) / batches : 0;
    p.slice = ir_shape_numel(r - p.bdims - p.k, p.xd + p.bdims + p.k);
    int64_t total = batches * p.nt * p.slice, s1[1][IR_MAX_RANK] = {{1}};
    if (!total) return IR_OK;
    uint32_t slots[3] = {p.y, p.x, p.idx};
    IrStatus st_ = cu_kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, gnd_body, &p);
    return cu_kend(c, total, NULL);
}

static void snd_one(Cu *c, void *user, LLVMValueRef i) {
    NdCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef e = LLVMBuildURem(b, i, ci(c, p->slice), ""), t = LLVMBuildUDiv(b, i, ci(c, p->slice), "");
    LLVMValueRef dst = LLVMBuildAdd(b, nd_tuple_off(c, p, t, ci(c, 0)), e, "");
    cu_scatter_store(c, p->red, p->dt, pslot(c, p->y), dst, cu_load_typed(c, p->dt, pslot(c, p->upd), i));
}

IrStatus cuda_emit_scatter_nd(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0);
    NdCtx p = {.y = ir_node_result(g, n, 0), .x = x, .idx = ir_node_operand(g, n, 1), .upd = ir_node_operand(g, n, 2)};
    p.it = lower_value_dtype(g, p.idx);
    p.dt = lower_value_dtype(g, x);
    if (!int_index(p.it)) return cu_unsupported(c, "with non-i32/i64 indices");
    if (!cu_typed_ok(p.dt)) return cu_unsupported_dtype(c, p.dt);
    IrStatus st_ = cu_scatter_reduction(c, p.dt, &p.red);
    if (st_) return st_;
    uint32_t r, ri;
    int64_t di[IR_MAX_RANK];
    lower_value_shape(g, x, &r, p.xd);
    lower_value_shape(g, p.idx, &ri, di);
    ir_shape_strides(r, p.xd, p.xs);
    if (ri < 1) return cu_unsupported(c, "with indices of rank 0");
    p.k = (uint32_t)di[ri - 1];
    if (p.k > r) return cu_unsupported(c, "with index tuples longer than the data rank");
    p.slice = ir_shape_numel(r - p.k, p.xd + p.k);
    int64_t total = ir_shape_numel(ri - 1, di) * p.slice;
    return cu_scatter_launch(c, p.y, x, p.idx, p.upd, p.red, total, snd_one, &p);
}

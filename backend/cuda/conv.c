/* 2-D NCHW windows: MaxPool/AveragePool one thread per output, Conv as an im2col kernel plus
 * one cuBLASLt GEMM per (image, group).
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pooling and convolution (2-D NCHW) ------------------------------------------------------- */

/* window geometry and tap index math: backend/llvm/emit.h */
static LLVMValueRef win_coord(Cu *c, LLVMValueRef o, int64_t stride, int64_t pad, LLVMValueRef k, int64_t dil) {
    return llvm_win_coord(c->b, c->it, o, stride, pad, k, dil);
}
static LLVMValueRef pix(Cu *c, const LowerWin *wn, LLVMValueRef ih, LLVMValueRef iw, LLVMValueRef *valid) {
    return llvm_win_pix(c->b, c->it, wn, ih, iw, valid);
}

typedef struct PoolCtx {
    LowerWin w;
    bool max, include_pad;
    uint32_t x, y;
} PoolCtx;

static void pool_body(Cu *c, LLVMValueRef *o, void *user) {
    PoolCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef ohw = ci(c, p->w.oh * p->w.ow);
    LLVMValueRef plane = LLVMBuildUDiv(b, o[0], ohw, ""), rem = LLVMBuildURem(b, o[0], ohw, "");
    LLVMValueRef oh = LLVMBuildUDiv(b, rem, ci(c, p->w.ow), ""), ow = LLVMBuildURem(b, rem, ci(c, p->w.ow), "");
    LLVMValueRef xbase = LLVMBuildMul(b, plane, ci(c, p->w.h * p->w.w), "");
    LLVMValueRef acc = cf(c, p->max ? -INFINITY : 0.0), cnt = cf(c, 0.0);
    /* the window is small and static: unrolled */
    for (int64_t kh = 0; kh < p->w.kh; kh++)
        for (int64_t kw = 0; kw < p->w.kw; kw++) {
            LLVMValueRef ih = win_coord(c, oh, p->w.sh, p->w.pt, ci(c, kh), p->w.dh);
            LLVMValueRef iw = win_coord(c, ow, p->w.sw, p->w.pl, ci(c, kw), p->w.dw), valid;
            LLVMValueRef off = pix(c, &p->w, ih, iw, &valid);
            LLVMValueRef v = ld(c, c->f32, pslot(c, p->x), LLVMBuildAdd(b, xbase, off, ""));
            LLVMValueRef na = p->max ? pool_max_step(b, v, acc) : LLVMBuildFAdd(b, acc, v, "");
            acc = sel(c, valid, na, acc);
            cnt = sel(c, valid, LLVMBuildFAdd(b, cnt, cf(c, 1.0), ""), cnt);
        }
    if (!p->max) acc = LLVMBuildFDiv(b, acc, p->include_pad ? cf(c, (double)(p->w.kh * p->w.kw)) : cnt, "");
    st(c, c->f32, pslot(c, p->y), o[0], acc);
}

static IrStatus gen_pool(Cu *c, bool max) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (ir_node_num_results(g, n) > 1 && ir_node_result(g, n, 1)) return cu_unsupported(c, "with an Indices output");
    if (lower_value_dtype(g, x) != IR_DTYPE_F32) return cu_unsupported(c, "on non-f32 tensors");
    IrAttrValue av;
    if (!ir_node_attr(g, n, "kernel_shape", &av) || av.count != 2) return cu_unsupported(c, "other than 2-D");
    if (av.ints[0] * av.ints[1] > 1024) return cu_unsupported(c, "with windows over 1024 taps");
    PoolCtx p = {.max = max, .x = x, .y = y};
    const char *why = lower_win_read(g, n, x, y, av.ints[0], av.ints[1], &p.w);
    if (why) return cu_unsupported(c, why);
    bool found;
    p.include_pad = ir_node_attr_int(g, n, "count_include_pad", &found) != 0;
    int64_t total = p.w.n * p.w.c * p.w.oh * p.w.ow, s[1][IR_MAX_RANK] = {{1}};
    if (!total) return IR_OK;
    uint32_t slots[2] = {y, x};
    IrStatus st_ = cu_kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s, NULL, pool_body, &p);
    return cu_kend(c, total, NULL);
}

/* col[row, oh*OW + ow] for rows (ch, kh, kw) of one (image, group); the launch's byte offset on
 * x selects the image/group. */
typedef struct ConvCtx {
    LowerWin w;
    int64_t k;
    uint32_t x, col;
} ConvCtx;

static void im2col_body(Cu *c, LLVMValueRef *o, void *user) {
    ConvCtx *p = user;
    LLVMBuilderRef b = c->b;
    int64_t ohw = p->w.oh * p->w.ow;
    LLVMValueRef row = LLVMBuildUDiv(b, o[0], ci(c, ohw), ""), pos = LLVMBuildURem(b, o[0], ci(c, ohw), "");
    LLVMValueRef kk = ci(c, p->w.kh * p->w.kw);
    LLVMValueRef ch = LLVMBuildUDiv(b, row, kk, ""), rk = LLVMBuildURem(b, row, kk, "");
    LLVMValueRef kh = LLVMBuildUDiv(b, rk, ci(c, p->w.kw), ""), kw = LLVMBuildURem(b, rk, ci(c, p->w.kw), "");
    LLVMValueRef oh = LLVMBuildUDiv(b, pos, ci(c, p->w.ow), ""), ow = LLVMBuildURem(b, pos, ci(c, p->w.ow), "");
    LLVMValueRef ih = win_coord(c, oh, p->w.sh, p->w.pt, kh, p->w.dh), iw = win_coord(c, ow, p->w.sw, p->w.pl, kw, p->w.dw);
    LLVMValueRef valid, off = pix(c, &p->w, ih, iw, &valid);
    LLVMValueRef xo = LLVMBuildAdd(b, LLVMBuildMul(b, ch, ci(c, p->w.h * p->w.w), ""), off, "");
    LLVMValueRef v = ld(c, c->f32, pslot(c, p->x), xo);
    st(c, c->f32, pslot(c, p->col), o[0], sel(c, valid, v, cf(c, 0.0)));
}

IrStatus cu_push_gemm(Cu *c, const CuGemm *gm) {
    CuStep s = {.kind = CU_STEP_GEMM, .gemm = *gm};
    return cu_push_step(c, &s);
}

static IrStatus gen_conv(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), w = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId bias = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    LowerConvGeom cv;
    const char *why = lower_conv_read(g, n, &cv);
    if (why) return cu_unsupported(c, why);
    ConvCtx p = {.w = cv.w, .k = cv.k, .x = x, .col = c->nv + 1 + c->index};
    int64_t groups = cv.groups, oc = cv.oc, cgr = cv.cg, ocg = cv.ocg, ohw = cv.ohw;
    if (p.w.n * groups > 4096) return cu_unsupported(c, "with more than 4096 (image, group) pairs");
    /* a pointwise conv (1x1, stride 1, no pads) reads its input as the GEMM's B directly: the
     * memory plan gives it no im2col scratch (cuda_plan_scratch) */
    bool pointwise = cuda_plan_scratch(g, n, NULL, NULL) == 0 && p.w.kh == 1 && p.w.kw == 1 && ohw == p.w.h * p.w.w;
    if (!pointwise && cuda_plan_scratch(g, n, NULL, NULL) != p.k * ohw * 4)
        return cu_unsupported(c, "(internal: scratch size mismatch)");
    int64_t work = p.k * ohw, s1[1][IR_MAX_RANK] = {{1}};
    IrStatus st_ = IR_OK;
    if (!pointwise) {
        uint32_t slots[2] = {p.col, x};
        st_ = cu_kbegin(c, slots, 2, CU_BLOCK, false);
        if (st_) return st_;
        cu_emit_nest(c, 1, &work, 1, s1, NULL, im2col_body, &p);
        LLVMBuildRetVoid(c->b);
    }
    for (int64_t img = 0; img < p.w.n * groups && !st_; img++) {
        int64_t grp = img % groups, offs[2] = {0, img * cgr * p.w.h * p.w.w * 4};
        if (!pointwise) st_ = cu_relaunch(c, work, offs);
        CuGemm gm = {.dt = "f32", .m = ocg, .n = ohw, .k = p.k, .lda = p.k, .ldb = ohw, .ldc = ohw, .batch = 1,
                     .alpha = 1.0, .a = {w, grp * ocg * p.k * 4}, .b = {p.col, 0}, .c = {y, img * ocg * ohw * 4}};
        if (pointwise) gm.b = (CuArg){x, offs[1]};
        if (!st_) st_ = cu_push_gemm(c, &gm);
    }
    if (st_ || !bias) return st_;
    int64_t dims3[3] = {p.w.n, oc, ohw}, s3[2][IR_MAX_RANK] = {{oc * ohw, ohw, 1}, {0, 1, 0}};
    return cu_bias_kernel(c, y, bias, 1.0, 3, dims3, s3);
}


/* ---- a symbolic batch: the rest of the shapes static, the image count a formula ------------------ */

/* Window geometry with n = -1 (the batch follows a symbol) from the dims and the attributes. */
static const char *win_sym(Cu *c, IrValueId x, IrValueId y, int64_t kh, int64_t kw, LowerWin *wn) {
    uint32_t rx, ry;
    int64_t dx[IR_MAX_RANK], dy[IR_MAX_RANK], a[6];
    if (!cu_value_shape(c, x, &rx, dx) || !cu_value_shape(c, y, &ry, dy) || rx != 4 || ry != 4) return "other than 2-D";
    for (uint32_t k = 1; k < 4; k++)
        if (dx[k] < 0 || dy[k] < 0) return "with symbolic dims other than the batch";
    const char *why = lower_win_attrs(c->g, c->node, a);
    *wn = (LowerWin){-1, dx[1], dx[2], dx[3], dy[2], dy[3], kh, kw, a[0], a[1], a[2], a[3], a[4], a[5]};
    return why;
}

/* The grid-stride loop over y's elements (its batch a symbol) and the step's work formula. */
static IrStatus sym_launch(Cu *c, IrValueId y, const uint32_t *slots, uint32_t n, NestBody body, void *user) {
    int64_t work = cu_fx_prod(c, y, 0, 4, 1);
    if (!work) return IR_OK;
    IrStatus s = cu_kbegin(c, slots, n, CU_BLOCK, false);
    if (s) return s;
    CuDims yd;
    if (!cu_dims_of(c, y, &yd)) return cu_unsupported(c, "with an unknown dim");
    Loop l;
    cu_grid_begin_v(c, &l, cu_dims_prod(c, &yd, 0, 4));
    body(c, &l.iv, user);
    cu_loop_end(c, &l);
    return cu_kend(c, work, NULL);
}

/* Direct convolution, one thread per output: y[img, o, oh, ow] = bias[o] + sum over the group's
 * channels and the taps (unrolled) of x * w. */
typedef struct DirCtx {
    LowerWin w;
    int64_t cg, ocg, oc;
    uint32_t x, wt, y, bias;
} DirCtx;

static void direct_body(Cu *c, LLVMValueRef *o, void *user) {
    DirCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef f = o[0];
    LLVMValueRef ow = LLVMBuildURem(b, f, ci(c, p->w.ow), ""), t = LLVMBuildUDiv(b, f, ci(c, p->w.ow), "");
    LLVMValueRef oh = LLVMBuildURem(b, t, ci(c, p->w.oh), "");
    t = LLVMBuildUDiv(b, t, ci(c, p->w.oh), "");
    LLVMValueRef oc = LLVMBuildURem(b, t, ci(c, p->oc), ""), img = LLVMBuildUDiv(b, t, ci(c, p->oc), "");
    LLVMValueRef grp = LLVMBuildUDiv(b, oc, ci(c, p->ocg), "");
    int64_t hw = p->w.h * p->w.w, taps = p->w.kh * p->w.kw;
    LLVMValueRef xbase = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, img, ci(c, p->w.c), ""), LLVMBuildMul(b, grp, ci(c, p->cg), ""), ""),
                                      ci(c, hw), "");
    LLVMValueRef wbase = LLVMBuildMul(b, oc, ci(c, p->cg * taps), "");
    LLVMValueRef init = p->bias ? ld(c, c->f32, pslot(c, p->bias), oc) : cf(c, 0.0), acc;
    Loop l;
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->cg), ci(c, 1), init, &acc);
    LLVMValueRef xb = LLVMBuildAdd(b, xbase, LLVMBuildMul(b, l.iv, ci(c, hw), ""), "");
    LLVMValueRef wb = LLVMBuildAdd(b, wbase, LLVMBuildMul(b, l.iv, ci(c, taps), ""), ""), a = acc;
    for (int64_t kh = 0; kh < p->w.kh; kh++)
        for (int64_t kw = 0; kw < p->w.kw; kw++) {
            LLVMValueRef ih = win_coord(c, oh, p->w.sh, p->w.pt, ci(c, kh), p->w.dh);
            LLVMValueRef iw = win_coord(c, ow, p->w.sw, p->w.pl, ci(c, kw), p->w.dw), valid;
            LLVMValueRef off = pix(c, &p->w, ih, iw, &valid);
            LLVMValueRef xv = sel(c, valid, ld(c, c->f32, pslot(c, p->x), LLVMBuildAdd(b, xb, off, "")), cf(c, 0.0));
            LLVMValueRef wv = ld(c, c->f32, pslot(c, p->wt), LLVMBuildAdd(b, wb, ci(c, kh * p->w.kw + kw), ""));
            a = LLVMBuildFAdd(b, a, LLVMBuildFMul(b, xv, wv, ""), "");
        }
    cu_loop_acc_next(c, acc, a);
    cu_loop_end(c, &l);
    st(c, c->f32, pslot(c, p->y), f, acc);
}

static IrStatus gen_conv_sym(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), w = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId bias = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    uint32_t rw;
    int64_t dw[IR_MAX_RANK];
    if (lower_value_dtype(g, x) != IR_DTYPE_F32 || lower_value_dtype(g, w) != IR_DTYPE_F32 || !lower_value_shape(g, w, &rw, dw) ||
        rw != 4 || (bias && !cu_static(g, bias)))
        return cu_unsupported(c, "other than f32 2-D with static weights and a symbolic batch");
    if (dw[2] * dw[3] > 121) return cu_unsupported(c, "with windows over 121 taps and a symbolic batch");
    DirCtx p = {.x = x, .wt = w, .y = y, .bias = bias};
    const char *why = win_sym(c, x, y, dw[2], dw[3], &p.w);
    if (why) return cu_unsupported(c, why);
    bool found;
    int64_t groups = ir_node_attr_int(g, n, "group", &found);
    if (!found) groups = 1;
    p.oc = dw[0];
    p.cg = dw[1];
    if (groups < 1 || p.oc % groups || p.cg * groups != p.w.c) return cu_unsupported(c, "with this group");
    p.ocg = p.oc / groups;
    uint32_t slots[4] = {y, x, w, bias ? bias : w};
    return sym_launch(c, y, slots, 4, direct_body, &p);
}

static IrStatus gen_pool_sym(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrAttrValue av;
    if ((ir_node_num_results(g, n) > 1 && ir_node_result(g, n, 1)) || lower_value_dtype(g, x) != IR_DTYPE_F32 ||
        !ir_node_attr(g, n, "kernel_shape", &av) || av.count != 2 || av.ints[0] * av.ints[1] > 1024)
        return cu_unsupported(c, "other than f32 2-D without Indices with a symbolic batch");
    PoolCtx p = {.max = ir_node_op(g, n) == IR_OP_MAX_POOL, .x = x, .y = y};
    const char *why = win_sym(c, x, y, av.ints[0], av.ints[1], &p.w);
    if (why) return cu_unsupported(c, why);
    bool found;
    p.include_pad = ir_node_attr_int(g, n, "count_include_pad", &found) != 0;
    uint32_t slots[2] = {y, x};
    return sym_launch(c, y, slots, 2, pool_body, &p);
}

/* ---- rows of backend/cuda/cuda_ops.def ---- */

IrStatus cuda_emit_conv(Cu *c) { return cu_static(c->g, ir_node_operand(c->g, c->node, 0)) ? gen_conv(c) : gen_conv_sym(c); }
/* f32 2-D pools without Indices: the unrolled kernel above; the rest in pool.c */
IrStatus cuda_emit_pool(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (!cu_static(g, x)) return gen_pool_sym(c);
    IrAttrValue av;
    LowerWin w;
    bool fast = !(ir_node_num_results(g, n) > 1 && ir_node_result(g, n, 1)) && lower_value_dtype(g, x) == IR_DTYPE_F32 &&
                lower_value_dtype(g, y) == IR_DTYPE_F32 && ir_node_attr(g, n, "kernel_shape", &av) && av.count == 2 &&
                av.ints[0] * av.ints[1] <= 1024 && !lower_win_read(g, n, x, y, av.ints[0], av.ints[1], &w);
    return fast ? gen_pool(c, ir_node_op(g, n) == IR_OP_MAX_POOL) : cu_gen_pool_nd(c);
}

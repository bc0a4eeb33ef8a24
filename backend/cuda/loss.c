/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss as the interpreter computes them (in
 * double): one thread per (n, d) position takes its log-probability (SCE: a log-softmax over
 * the classes, stored when log_prob is asked for) and writes the weighted loss, or the loss and
 * its weight to the tail scratch; `sum` and `mean` then add those in the interpreter's order in
 * one thread.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <string.h>

typedef struct LossCtx {
    bool sce, has_ii;
    int mode; /* 0 none, 1 sum, 2 mean */
    int64_t ii, N, C, D;
    IrValueId x, t, w, y, lp;
    IrDType xt, tt, wt, yt;
    uint32_t tail;
} LossCtx;

static LLVMValueRef dd(Cu *c, double v) { return LLVMConstReal(c->f64, v); }

static void loss_body(Cu *c, LLVMValueRef *o, void *user) {
    LossCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef i = o[0]; /* n * D + d */
    LLVMValueRef n = LLVMBuildUDiv(b, i, ci(c, p->D), ""), dpos = LLVMBuildURem(b, i, ci(c, p->D), "");
    LLVMValueRef base = LLVMBuildAdd(b, LLVMBuildMul(b, n, ci(c, p->C * p->D), ""), dpos, ""); /* (n*C + 0)*D + d */
    LLVMValueRef X = pslot(c, p->x), step = ci(c, p->D);
    LLVMValueRef t = cu_load_typed(c, p->tt, pslot(c, p->t), i);
    LLVMValueRef ignored = p->has_ii ? LLVMBuildICmp(b, LLVMIntEQ, t, LLVMConstInt(c->i64, (unsigned long long)p->ii, 1), "")
                                     : LLVMConstInt(c->i1, 0, 0);
    LLVMValueRef bad = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, t, LLVMConstInt(c->i64, 0, 0), ""),
                                   LLVMBuildICmp(b, LLVMIntSGE, t, LLVMConstInt(c->i64, (unsigned long long)p->C, 1), ""), "");
    LLVMValueRef tc = sel(c, LLVMBuildOr(b, ignored, bad, ""), ci(c, 0), c->it == c->i64 ? t : LLVMBuildTrunc(b, t, c->it, ""));
    LLVMValueRef toff = LLVMBuildAdd(b, base, LLVMBuildMul(b, tc, step, ""), "");
    LLVMValueRef lpv = cu_load_typed(c, p->xt, X, toff);
    if (p->sce) {
        Loop l;
        LLVMValueRef mx, s;
        cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->C), ci(c, 1), dd(c, -INFINITY), &mx);
        LLVMValueRef v = cu_load_typed(c, p->xt, X, LLVMBuildAdd(b, base, LLVMBuildMul(b, l.iv, step, ""), ""));
        LLVMValueRef a2[2] = {mx, v};
        cu_loop_acc_next(c, mx, cu_intr(c, "llvm.maxnum", &c->f64, 1, a2, 2));
        cu_loop_end(c, &l);
        cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p->C), ci(c, 1), dd(c, 0.0), &s);
        v = cu_load_typed(c, p->xt, X, LLVMBuildAdd(b, base, LLVMBuildMul(b, l.iv, step, ""), ""));
        cu_loop_acc_next(c, s, LLVMBuildFAdd(b, s, cu_libm1(c, "__nv_exp", LLVMBuildFSub(b, v, mx, "")), ""));
        cu_loop_end(c, &l);
        LLVMValueRef shift = LLVMBuildFAdd(b, mx, cu_libm1(c, "__nv_log", s), "");
        if (p->lp) {
            cu_loop_begin(c, &l, ci(c, 0), ci(c, p->C), ci(c, 1));
            LLVMValueRef off = LLVMBuildAdd(b, base, LLVMBuildMul(b, l.iv, step, ""), "");
            cu_store_typed(c, lower_value_dtype(c->g, p->lp), pslot(c, p->lp), off, LLVMBuildFSub(b, cu_load_typed(c, p->xt, X, off), shift, ""));
            cu_loop_end(c, &l);
        }
        lpv = LLVMBuildFSub(b, lpv, shift, "");
    }
    LLVMValueRef w = p->w ? cu_load_typed(c, p->wt, pslot(c, p->w), tc) : dd(c, 1.0);
    LLVMValueRef l = LLVMBuildFMul(b, LLVMBuildFNeg(b, lpv, ""), w, "");
    l = sel(c, ignored, dd(c, 0.0), sel(c, bad, dd(c, NAN), l));
    w = sel(c, ignored, dd(c, 0.0), w);
    if (p->mode == 0) {
        cu_store_typed(c, p->yt, pslot(c, p->y), i, l);
        return;
    }
    LLVMValueRef T = pslot(c, p->tail);
    st(c, c->f64, T, LLVMBuildMul(b, i, ci(c, 2), ""), l);
    st(c, c->f64, T, LLVMBuildAdd(b, LLVMBuildMul(b, i, ci(c, 2), ""), ci(c, 1), ""), w);
}

static IrStatus loss_total(Cu *c, LossCtx *p) {
    uint32_t slots[2] = {p->y, p->tail};
    IrStatus s = cu_kbegin(c, slots, 2, 32, false);
    if (s) return s;
    LLVMBuilderRef b = c->b;
    LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "one"), done = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, cu_sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x"), ci(c, 0), ""), one, done);
    LLVMPositionBuilderAtEnd(b, one);
    LLVMValueRef T = pslot(c, p->tail), sum, wsum;
    int64_t total = p->N * p->D;
    Loop l;
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, total), ci(c, 1), dd(c, 0.0), &sum);
    cu_loop_acc_next(c, sum, LLVMBuildFAdd(b, sum, ld(c, c->f64, T, LLVMBuildMul(b, l.iv, ci(c, 2), "")), ""));
    cu_loop_end(c, &l);
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, total), ci(c, 1), dd(c, 0.0), &wsum);
    cu_loop_acc_next(c, wsum, LLVMBuildFAdd(b, wsum, ld(c, c->f64, T, LLVMBuildAdd(b, LLVMBuildMul(b, l.iv, ci(c, 2), ""), ci(c, 1), "")), ""));
    cu_loop_end(c, &l);
    LLVMValueRef r = sum;
    if (p->mode == 2) r = LLVMBuildFDiv(b, sum, p->w || p->has_ii ? wsum : dd(c, (double)total), "");
    cu_store_typed(c, p->yt, pslot(c, p->y), ci(c, 0), r);
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, done);
    return cu_kend(c, 1, NULL);
}

IrStatus cuda_emit_loss(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    LossCtx p = {.sce = ir_node_op(g, n) == IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS, .x = ir_node_operand(g, n, 0),
                 .t = ir_node_operand(g, n, 1), .y = ir_node_result(g, n, 0), .tail = c->m->tail_slot};
    p.w = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    p.lp = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    p.xt = lower_value_dtype(g, p.x);
    p.tt = lower_value_dtype(g, p.t);
    p.yt = lower_value_dtype(g, p.y);
    p.wt = p.w ? lower_value_dtype(g, p.w) : IR_DTYPE_F32;
    if (cu_kind(p.xt) != CU_KF || !cu_typed_ok(p.xt) || cu_kind(p.yt) != CU_KF || !cu_typed_ok(p.yt))
        return cu_unsupported_dtype(c, p.xt);
    if (cu_kind(p.wt) != CU_KF || !cu_typed_ok(p.wt)) return cu_unsupported_dtype(c, p.wt);
    if (p.lp && (cu_kind(lower_value_dtype(g, p.lp)) != CU_KF || !cu_typed_ok(lower_value_dtype(g, p.lp))))
        return cu_unsupported_dtype(c, lower_value_dtype(g, p.lp));
    if (p.tt != IR_DTYPE_I64 && p.tt != IR_DTYPE_I32) return cu_unsupported(c, "with targets other than i32/i64");
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    lower_value_shape(g, p.x, &r, d);
    if (r < 2) return cu_unsupported(c, "with rank < 2");
    p.N = d[0];
    p.C = d[1];
    p.D = ir_shape_numel(r - 2, d + 2);
    bool found;
    p.ii = ir_node_attr_int(g, n, "ignore_index", &p.has_ii);
    const char *red = ir_node_attr_string(g, n, "reduction", &found);
    if (!found || !red || strcmp(red, "mean") == 0) p.mode = 2;
    else if (strcmp(red, "sum") == 0) p.mode = 1;
    else if (strcmp(red, "none") == 0) p.mode = 0;
    else return cu_unsupported(c, "with this reduction");
    if (p.w && lower_value_nbytes(g, p.w) != (size_t)p.C * ir_dtype_size(p.wt)) return cu_unsupported(c, "with a weight of other than C entries");
    int64_t total = p.N * p.D, s1[1][IR_MAX_RANK] = {{1}};
    if (p.mode) cu_tail_need(c, (total ? total : 1) * 16);
    if (total && p.C) {
        uint32_t slots[6] = {p.y, p.x, p.t, p.w ? p.w : p.x, p.lp ? p.lp : p.x, p.tail};
        IrStatus st_ = cu_kbegin(c, slots, p.mode ? 6 : 5, CU_BLOCK, false);
        if (st_) return st_;
        cu_emit_nest(c, 1, &total, 1, s1, NULL, loss_body, &p);
        if ((st_ = cu_kend(c, total, NULL))) return st_;
    } else if (total) {
        return cu_unsupported(c, "with no classes");
    }
    return p.mode ? loss_total(c, &p) : IR_OK;
}

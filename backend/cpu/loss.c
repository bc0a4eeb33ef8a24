/* Loss kernels of the LLVM backend: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
 * (with its optional log_prob output), as the interpreter computes them: per (n, d) position the
 * log-probability of the target class (for SCE the log-softmax over C, in f64), weighted by
 * weight[target] and 0 at ignore_index; reduction none, sum, or mean (over the summed weights
 * when weights or ignore_index are given, else over N*D). Targets outside [0, C) read class 0
 * instead of outside the buffer (the interpreter refuses them).
 */
#include "backend/cpu/cpu.h"

typedef struct Loss {
    bool sce, has_ii, has_w;
    int mode; /* 0 none, 1 sum, 2 mean */
    int64_t c, d, ii;
    IrDType xt, tt, wt, yt;
    LLVMValueRef x, t, w, y, lp, sum, wsum;
} Loss;

/* o[0] = n*D + d (target and unreduced output); idx = (n, d); x at (n*C + c)*D + d */
static void loss_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Loss *p = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef xbase = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildMul(b, idx[0], lo_i64(e, p->c), ""), lo_i64(e, p->d), ""),
                                      idx[1], "");
    LLVMValueRef shift = LLVMConstReal(f64, 0);
    if (p->sce) {
        LLVMValueRef mx = lo_var(e, f64, LLVMConstReal(f64, -INFINITY)), s = lo_var(e, f64, LLVMConstReal(f64, 0));
        LoLoop l;
        lo_loop_begin(e, &l, p->c);
        LLVMValueRef v = lo_to_f64(e, lo_load(e, p->xt, p->x, LLVMBuildAdd(b, xbase, LLVMBuildMul(b, l.iv, lo_i64(e, p->d), ""), "")));
        LLVMValueRef cur = LLVMBuildLoad2(b, f64, mx, "");
        LLVMValueRef args[2] = {cur, v};
        LLVMBuildStore(b, lo_intrinsic(e, "llvm.maxnum", f64, args, 2), mx);
        lo_loop_end(e, &l);
        LLVMValueRef m = LLVMBuildLoad2(b, f64, mx, "");
        lo_loop_begin(e, &l, p->c);
        v = lo_to_f64(e, lo_load(e, p->xt, p->x, LLVMBuildAdd(b, xbase, LLVMBuildMul(b, l.iv, lo_i64(e, p->d), ""), "")));
        LLVMValueRef t = LLVMBuildFSub(b, v, m, "");
        LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, s, ""), lo_intrinsic(e, "llvm.exp", f64, &t, 1), ""), s);
        lo_loop_end(e, &l);
        LLVMValueRef sv = LLVMBuildLoad2(b, f64, s, "");
        shift = LLVMBuildFAdd(b, m, lo_intrinsic(e, "llvm.log", f64, &sv, 1), "");
        if (p->lp) {
            lo_loop_begin(e, &l, p->c);
            LLVMValueRef off = LLVMBuildAdd(b, xbase, LLVMBuildMul(b, l.iv, lo_i64(e, p->d), ""), "");
            v = lo_to_f64(e, lo_load(e, p->xt, p->x, off));
            lo_store(e, p->xt, p->lp, off, lo_from_f64(e, LLVMBuildFSub(b, v, shift, ""), p->xt));
            lo_loop_end(e, &l);
        }
    }
    LLVMValueRef t = LLVMBuildSExt(b, lo_load(e, p->tt, p->t, o[0]), lo_i64_t(e), "");
    LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, t, lo_i64(e, p->c), "");
    LLVMValueRef tc = LLVMBuildSelect(b, ok, t, lo_i64(e, 0), "");
    LLVMValueRef ign = p->has_ii ? LLVMBuildICmp(b, LLVMIntEQ, t, lo_i64(e, p->ii), "") : LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    LLVMValueRef w = p->has_w ? lo_to_f64(e, lo_load(e, p->wt, p->w, tc)) : LLVMConstReal(f64, 1);
    w = LLVMBuildSelect(b, ign, LLVMConstReal(f64, 0), w, "");
    LLVMValueRef lpv = lo_to_f64(e, lo_load(e, p->xt, p->x, LLVMBuildAdd(b, xbase, LLVMBuildMul(b, tc, lo_i64(e, p->d), ""), "")));
    lpv = LLVMBuildFSub(b, lpv, shift, "");
    LLVMValueRef l = LLVMBuildSelect(b, ign, LLVMConstReal(f64, 0), LLVMBuildFMul(b, LLVMBuildFNeg(b, lpv, ""), w, ""), "");
    if (p->mode == 0) lo_store(e, p->yt, p->y, o[0], lo_from_f64(e, l, p->yt));
    LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, p->sum, ""), l, ""), p->sum);
    LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, p->wsum, ""), w, ""), p->wsum);
}

IrStatus llvm_ops_loss_gen(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    Loss p = {.sce = ir_node_op(g, n) == IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS};
    IrValueId x = ir_node_operand(g, n, 0), t = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId w = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    IrValueId lp = p.sce && ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    uint32_t r, rt;
    int64_t d[IR_MAX_RANK], dt[IR_MAX_RANK];
    lo_shape(e, x, &r, d);
    lo_shape(e, t, &rt, dt);
    p.xt = lo_dtype(e, x);
    p.tt = lo_dtype(e, t);
    p.yt = lo_dtype(e, y);
    if (!lo_is_float(p.xt) || p.yt != p.xt) return lo_unsupported_dtype(e, p.xt);
    if (p.tt != IR_DTYPE_I64 && p.tt != IR_DTYPE_I32) return lo_unsupported(e, "with non-i32/i64 targets");
    if (r < 2 || rt != r - 1 || dt[0] != d[0]) return lo_unsupported(e, "with these shapes");
    for (uint32_t i = 1; i < rt; i++)
        if (dt[i] != d[i + 1]) return lo_unsupported(e, "with these shapes");
    p.c = d[1];
    p.d = ir_shape_numel(r - 2, d + 2);
    if (w) {
        p.has_w = true;
        p.wt = lo_dtype(e, w);
        if (!lo_is_float(p.wt)) return lo_unsupported_dtype(e, p.wt);
        p.w = lo_buf(e, w);
    }
    IrAttrValue av;
    if (ir_node_attr(g, n, "ignore_index", &av) && av.kind == IR_ATTR_INT) p.has_ii = true, p.ii = av.i;
    bool found;
    const char *red = ir_node_attr_string(g, n, "reduction", &found);
    if (!red) red = "mean";
    p.mode = strcmp(red, "none") == 0 ? 0 : strcmp(red, "sum") == 0 ? 1 : strcmp(red, "mean") == 0 ? 2 : -1;
    if (p.mode < 0) return lo_unsupported(e, "with this reduction");
    if (p.c == 0) return lo_unsupported(e, "with no classes");
    p.x = lo_buf(e, x);
    p.t = lo_buf(e, t);
    p.y = lo_buf(e, y);
    p.lp = lp ? lo_buf(e, lp) : NULL;
    LLVMTypeRef f64 = lo_f64_t(e);
    p.sum = lo_var(e, f64, LLVMConstReal(f64, 0));
    p.wsum = lo_var(e, f64, LLVMConstReal(f64, 0));
    int64_t dims[2] = {d[0], p.d};
    int64_t s[1][LLVM_OPS_MAX_NEST] = {{p.d, 1}};
    lo_nest(e, 2, dims, 1, s, NULL, loss_body, &p);
    if (p.mode != 0) {
        LLVMValueRef v = LLVMBuildLoad2(e->b, f64, p.sum, "");
        if (p.mode == 2) {
            LLVMValueRef den = p.has_w || p.has_ii ? LLVMBuildLoad2(e->b, f64, p.wsum, "")
                                                   : LLVMConstReal(f64, (double)(d[0] * p.d));
            v = LLVMBuildFDiv(e->b, v, den, "");
        }
        lo_store(e, p.yt, p.y, lo_i64(e, 0), lo_from_f64(e, v, p.yt));
    }
    return IR_OK;
}

/* Loss kernels of the LLVM backend: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
 * (with its optional log_prob output), as the interpreter computes them: per (n, d) position the
 * log-probability of the target class (for SCE the log-softmax over C, in f64), weighted by
 * weight[target] and 0 at ignore_index; reduction none, sum, or mean (over the summed weights
 * when weights or ignore_index are given, else over N*D). Targets outside [0, C) read class 0
 * instead of outside the buffer (the interpreter refuses them). One emitter for static and
 * run-time shapes (llvm/dims.h: N, C and the spatial dims may be symbols).
 */
#include "backend/cpu/cpu.h"

typedef struct Loss {
    bool sce, has_ii, has_w;
    int mode; /* 0 none, 1 sum, 2 mean */
    int64_t ii;
    IrDType xt, tt, wt, yt;
    LLVMValueRef c, d; /* classes, and the spatial elements per class (i64) */
    LLVMValueRef x, t, w, y, lp, sum, wsum;
} Loss;

/* A loop over the n classes (a constant count as the counted loop). */
static void class_loop(LlvmEmit *e, LlvmLoop *l, LLVMValueRef n) {
    if (LLVMIsAConstantInt(n) && LLVMConstIntGetSExtValue(n) >= 1) llvm_loop_begin(e->b, e->fn, l, LLVMConstIntGetSExtValue(n));
    else llvm_loop_begin_v(e->b, e->fn, l, n);
}

/* o[0] = n*D + d (target and unreduced output); idx = (n, d); x at (n*C + c)*D + d */
static void loss_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Loss *p = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef xbase = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildMul(b, idx[0], p->c, ""), p->d, ""), idx[1], "");
    LLVMValueRef shift = LLVMConstReal(f64, 0);
    if (p->sce) {
        LLVMValueRef mx = lo_var(e, f64, LLVMConstReal(f64, -INFINITY)), s = lo_var(e, f64, LLVMConstReal(f64, 0));
        LlvmLoop l;
        class_loop(e, &l, p->c);
        LLVMValueRef v = lo_to_f64(e, lo_load(e, p->xt, p->x, LLVMBuildAdd(b, xbase, LLVMBuildMul(b, l.iv, p->d, ""), "")));
        LLVMValueRef cur = LLVMBuildLoad2(b, f64, mx, "");
        LLVMValueRef args[2] = {cur, v};
        LLVMBuildStore(b, lo_intrinsic(e, "llvm.maxnum", f64, args, 2), mx);
        llvm_loop_end(e->b, e->fn, &l);
        LLVMValueRef m = LLVMBuildLoad2(b, f64, mx, "");
        class_loop(e, &l, p->c);
        v = lo_to_f64(e, lo_load(e, p->xt, p->x, LLVMBuildAdd(b, xbase, LLVMBuildMul(b, l.iv, p->d, ""), "")));
        LLVMValueRef t = LLVMBuildFSub(b, v, m, "");
        LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, s, ""), lo_intrinsic(e, "llvm.exp", f64, &t, 1), ""), s);
        llvm_loop_end(e->b, e->fn, &l);
        LLVMValueRef sv = LLVMBuildLoad2(b, f64, s, "");
        shift = LLVMBuildFAdd(b, m, lo_intrinsic(e, "llvm.log", f64, &sv, 1), "");
        if (p->lp) {
            class_loop(e, &l, p->c);
            LLVMValueRef off = LLVMBuildAdd(b, xbase, LLVMBuildMul(b, l.iv, p->d, ""), "");
            v = lo_to_f64(e, lo_load(e, p->xt, p->x, off));
            lo_store(e, p->xt, p->lp, off, lo_from_f64(e, LLVMBuildFSub(b, v, shift, ""), p->xt));
            llvm_loop_end(e->b, e->fn, &l);
        }
    }
    LLVMValueRef t = LLVMBuildSExt(b, lo_load(e, p->tt, p->t, o[0]), lo_i64_t(e), "");
    LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, t, p->c, "");
    LLVMValueRef tc = LLVMBuildSelect(b, ok, t, lo_i64(e, 0), "");
    LLVMValueRef ign = p->has_ii ? LLVMBuildICmp(b, LLVMIntEQ, t, lo_i64(e, p->ii), "") : LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    LLVMValueRef w = p->has_w ? lo_to_f64(e, lo_load(e, p->wt, p->w, tc)) : LLVMConstReal(f64, 1);
    w = LLVMBuildSelect(b, ign, LLVMConstReal(f64, 0), w, "");
    LLVMValueRef lpv = lo_to_f64(e, lo_load(e, p->xt, p->x, LLVMBuildAdd(b, xbase, LLVMBuildMul(b, tc, p->d, ""), "")));
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
    LlvmDims s, ts;
    if (!llvm_dims_of(e, x, &s) || !llvm_dims_of(e, t, &ts)) return lo_unsupported(e, "with an unknown shape");
    p.xt = lo_dtype(e, x);
    p.tt = lo_dtype(e, t);
    p.yt = lo_dtype(e, y);
    if (!lo_is_float(p.xt) || p.yt != p.xt) return lo_unsupported_dtype(e, p.xt);
    if (p.tt != IR_DTYPE_I64 && p.tt != IR_DTYPE_I32) return lo_unsupported(e, "with non-i32/i64 targets");
    if (s.rank < 2 || ts.rank != s.rank - 1) return lo_unsupported(e, "with these shapes");
    /* the target's dims are x's N and spatial dims: checked here where both are constants, else
     * when the kernel runs (the run fails and nothing is read when one differs) */
    LLVMValueRef differ = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    for (uint32_t i = 0; i < ts.rank; i++) {
        uint32_t k = i ? i + 1 : 0;
        if (ts.ex[i] == s.ex[k] || (ts.cd[i] >= 0 && ts.cd[i] == s.cd[k])) continue;
        if (ts.cd[i] >= 0 && s.cd[k] >= 0) return lo_unsupported(e, "with these shapes");
        differ = LLVMBuildOr(e->b, differ, LLVMBuildICmp(e->b, LLVMIntNE, ts.dim[i], s.dim[k], ""), "");
    }
    p.c = s.dim[1];
    p.d = llvm_dims_prod(e, &s, 2, s.rank);
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
    if (s.cd[1] == 0) return lo_unsupported(e, "with no classes");
    p.x = lo_buf(e, x);
    p.t = lo_buf(e, t);
    p.y = lo_buf(e, y);
    p.lp = lp ? lo_buf(e, lp) : NULL;
    LLVMBasicBlockRef after = NULL;
    if (!LLVMIsAConstant(differ)) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s %%%s: the target's dims are not the input's N and spatial dims",
                 ir_op_name(ir_node_op(g, n)), ir_value_name(g, y));
        lo_fail_if(e, differ, msg);
        after = llvm_if_begin(e->b, e->fn, LLVMBuildNot(e->b, differ, ""));
    }
    LLVMTypeRef f64 = lo_f64_t(e);
    p.sum = lo_var(e, f64, LLVMConstReal(f64, 0));
    p.wsum = lo_var(e, f64, LLVMConstReal(f64, 0));
    /* the positions (n, d) in one nest (not in parts: the sums run across it) */
    LlvmDims pos = {.rank = 2, .dim = {s.dim[0], p.d}, .cd = {s.cd[0], llvm_dims_cprod(&s, 2, s.rank)}};
    LLVMValueRef st[1][IR_MAX_RANK] = {{p.d, lo_i64(e, 1)}};
    llvm_nest(e, &pos, 1, st, NULL, loss_body, &p);
    if (p.mode != 0) {
        LLVMValueRef v = LLVMBuildLoad2(e->b, f64, p.sum, "");
        if (p.mode == 2) {
            LLVMValueRef den = p.has_w || p.has_ii ? LLVMBuildLoad2(e->b, f64, p.wsum, "")
                                                   : LLVMBuildSIToFP(e->b, LLVMBuildNSWMul(e->b, s.dim[0], p.d, ""), f64, "");
            v = LLVMBuildFDiv(e->b, v, den, "");
        }
        lo_store(e, p.yt, p.y, lo_i64(e, 0), lo_from_f64(e, v, p.yt));
    }
    if (after) llvm_if_end(e->b, after);
    return IR_OK;
}

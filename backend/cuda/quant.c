/* QuantizeLinear and DequantizeLinear to and from the integer dtypes, per tensor or per
 * channel along `axis`, one thread per element with the interpreter's arithmetic: x / scale in
 * f32, rounded half to even, plus the zero point, saturated to the dtype's range; (q - zp) *
 * scale in f32 back. FP8 formats are refused here (fp8.c has irtool's own FP8 ops).
 */
#include "backend/cuda/cu.h"

#include <string.h>

typedef struct QlCtx {
    bool quant;
    IrValueId x, s, zp, y;
    IrDType xt, st, zt, yt;
    int64_t inner, ch;
    double lo, hi;
} QlCtx;

static void ql_body(Cu *c, LLVMValueRef *o, void *user) {
    QlCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef ch = p->ch == 1 ? ci(c, 0) : LLVMBuildURem(b, LLVMBuildUDiv(b, o[0], ci(c, p->inner), ""), ci(c, p->ch), "");
    LLVMValueRef s = LLVMBuildFPTrunc(b, cu_load_typed(c, p->st, pslot(c, p->s), ch), c->f32, "");
    if (p->quant) {
        LLVMValueRef x = LLVMBuildFPTrunc(b, cu_load_typed(c, p->xt, pslot(c, p->x), o[0]), c->f32, "");
        LLVMValueRef q = LLVMBuildFPExt(b, LLVMBuildFDiv(b, x, s, ""), c->f64, "");
        LLVMValueRef r = cu_libm1(c, "__nv_rint", q);
        if (p->zp) r = LLVMBuildFAdd(b, r, LLVMBuildSIToFP(b, cu_load_typed(c, p->zt, pslot(c, p->zp), ch), c->f64, ""), "");
        LLVMValueRef lo = LLVMConstReal(c->f64, p->lo), hi = LLVMConstReal(c->f64, p->hi);
        r = sel(c, fcmp(c, LLVMRealUGE, r, lo), r, lo); /* NaN -> lo, as !(r >= lo) */
        r = sel(c, fcmp(c, LLVMRealOGT, r, hi), hi, r);
        cu_store_typed(c, p->yt, pslot(c, p->y), o[0], LLVMBuildFPToSI(b, sel(c, fcmp(c, LLVMRealUNO, r, r), lo, r), c->i64, ""));
        return;
    }
    LLVMValueRef v = LLVMBuildSIToFP(b, cu_load_typed(c, p->xt, pslot(c, p->x), o[0]), c->f32, "");
    if (cu_kind(p->xt) == CU_KU) v = LLVMBuildUIToFP(b, cu_load_typed(c, p->xt, pslot(c, p->x), o[0]), c->f32, "");
    LLVMValueRef z = p->zp ? LLVMBuildSIToFP(b, cu_load_typed(c, p->zt, pslot(c, p->zp), ch), c->f32, "") : LLVMConstReal(c->f32, 0.0);
    LLVMValueRef y = LLVMBuildFMul(b, LLVMBuildFSub(b, v, z, ""), s, "");
    cu_store_typed(c, p->yt, pslot(c, p->y), o[0], LLVMBuildFPExt(b, y, c->f64, ""));
}

IrStatus cuda_emit_qlinear(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    QlCtx p = {.quant = ir_node_op(g, n) == IR_OP_QUANTIZE_LINEAR, .x = ir_node_operand(g, n, 0), .s = ir_node_operand(g, n, 1),
               .y = ir_node_result(g, n, 0)};
    p.zp = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    if (p.zp && lower_value_nbytes(g, p.zp) == 0) p.zp = 0;
    p.xt = lower_value_dtype(g, p.x), p.st = lower_value_dtype(g, p.s), p.yt = lower_value_dtype(g, p.y);
    p.zt = p.zp ? lower_value_dtype(g, p.zp) : IR_DTYPE_U8;
    IrDType qt = p.quant ? p.yt : p.xt;
    if (!cu_typed_ok(qt) || cu_kind(qt) == CU_KF || qt == IR_DTYPE_BOOL || (p.zp && p.zt != qt)) return cu_unsupported_dtype(c, qt);
    if (p.quant && !ir_dtype_quant_range(qt, &p.lo, &p.hi)) return cu_unsupported_dtype(c, qt);
    IrDType ft = p.quant ? p.xt : p.yt;
    if (cu_kind(ft) != CU_KF || !cu_typed_ok(ft) || cu_kind(p.st) != CU_KF || !cu_typed_ok(p.st)) return cu_unsupported_dtype(c, ft);
    uint32_t r, rs;
    int64_t d[IR_MAX_RANK], ds[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, p.x, &r, d);
    lower_value_shape(g, p.s, &rs, ds);
    int64_t ns = ir_shape_numel(rs, ds);
    p.inner = 1, p.ch = 1;
    if (ns != 1) {
        bool found;
        int64_t axis = ir_node_attr_int(g, n, "axis", &found);
        if (!found) axis = 1;
        if (rs != 1 || !ir_shape_axis_checked(&axis, r) || d[axis] != ns) return cu_unsupported(c, "with this scale layout (blocked?)");
        p.inner = ir_shape_numel(r - (uint32_t)axis - 1, d + axis + 1);
        p.ch = ns;
    }
    int64_t total = ir_shape_numel(r, d);
    if (!total) return IR_OK;
    uint32_t slots[4] = {p.y, p.x, p.s, p.zp ? p.zp : p.s};
    IrStatus st_ = cu_kbegin(c, slots, 4, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, ql_body, &p);
    return cu_kend(c, total, NULL);
}

/* ---- DynamicQuantizeLinear: the range in one thread (f32, as the interpreter), then u8 ------- */

typedef struct DqlCtx {
    IrValueId x, y, ys, yz;
    IrDType xt;
    int64_t n;
} DqlCtx;

static void dql_body(Cu *c, LLVMValueRef *o, void *user) {
    DqlCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef scale = ld(c, c->f32, pslot(c, p->ys), ci(c, 0));
    LLVMValueRef zp = LLVMBuildUIToFP(b, ld(c, c->i8, pslot(c, p->yz), ci(c, 0)), c->f64, "");
    LLVMValueRef x = LLVMBuildFPTrunc(b, cu_load_typed(c, p->xt, pslot(c, p->x), o[0]), c->f32, "");
    LLVMValueRef q = cu_libm1(c, "__nv_rint", LLVMBuildFPExt(b, LLVMBuildFDiv(b, x, scale, ""), c->f64, ""));
    LLVMValueRef r = sel(c, fcmp(c, LLVMRealONE, scale, LLVMConstReal(c->f32, 0.0)), LLVMBuildFAdd(b, q, zp, ""), zp);
    r = sel(c, fcmp(c, LLVMRealUGE, r, LLVMConstReal(c->f64, 0.0)), r, LLVMConstReal(c->f64, 0.0));
    r = sel(c, fcmp(c, LLVMRealUNO, r, r), LLVMConstReal(c->f64, 0.0), r);
    r = sel(c, fcmp(c, LLVMRealOGT, r, LLVMConstReal(c->f64, 255.0)), LLVMConstReal(c->f64, 255.0), r);
    st(c, c->i8, pslot(c, p->y), o[0], LLVMBuildFPToUI(b, r, c->i8, ""));
}

IrStatus cuda_emit_dynamic_quant(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    DqlCtx p = {.x = ir_node_operand(g, n, 0), .y = ir_node_result(g, n, 0), .ys = ir_node_result(g, n, 1), .yz = ir_node_result(g, n, 2)};
    p.xt = lower_value_dtype(g, p.x);
    if (cu_kind(p.xt) != CU_KF || !cu_typed_ok(p.xt)) return cu_unsupported_dtype(c, p.xt);
    if (!p.y || !p.ys || !p.yz || lower_value_dtype(g, p.ys) != IR_DTYPE_F32 || lower_value_dtype(g, p.yz) != IR_DTYPE_U8 ||
        lower_value_dtype(g, p.y) != IR_DTYPE_U8)
        return cu_unsupported(c, "with these results");
    uint32_t r;
    int64_t d[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, p.x, &r, d);
    p.n = ir_shape_numel(r, d);
    /* kernel 1: min(0, x) and max(0, x), scale and zero point */
    uint32_t slots1[3] = {p.ys, p.yz, p.x};
    IrStatus st_ = cu_kbegin(c, slots1, 3, 32, false);
    if (st_) return st_;
    LLVMBuilderRef b = c->b;
    LLVMBasicBlockRef one = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "one"), done = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "done");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, cu_sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x"), ci(c, 0), ""), one, done);
    LLVMPositionBuilderAtEnd(b, one);
    LLVMValueRef mn, mx, zero = LLVMConstReal(c->f32, 0.0);
    Loop l;
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p.n), ci(c, 1), zero, &mn);
    LLVMValueRef v = LLVMBuildFPTrunc(b, cu_load_typed(c, p.xt, pslot(c, p.x), l.iv), c->f32, "");
    cu_loop_acc_next(c, mn, sel(c, fcmp(c, LLVMRealOLT, v, mn), v, mn));
    cu_loop_end(c, &l);
    cu_loop_begin_acc(c, &l, ci(c, 0), ci(c, p.n), ci(c, 1), zero, &mx);
    v = LLVMBuildFPTrunc(b, cu_load_typed(c, p.xt, pslot(c, p.x), l.iv), c->f32, "");
    cu_loop_acc_next(c, mx, sel(c, fcmp(c, LLVMRealOGT, v, mx), v, mx));
    cu_loop_end(c, &l);
    LLVMValueRef scale = LLVMBuildFDiv(b, LLVMBuildFSub(b, mx, mn, ""), LLVMConstReal(c->f32, 255.0), "");
    LLVMValueRef izp = sel(c, fcmp(c, LLVMRealONE, scale, zero), LLVMBuildFSub(b, zero, LLVMBuildFDiv(b, mn, scale, ""), ""), zero);
    izp = sel(c, fcmp(c, LLVMRealOLT, izp, zero), zero, sel(c, fcmp(c, LLVMRealOGT, izp, LLVMConstReal(c->f32, 255.0)), LLVMConstReal(c->f32, 255.0), izp));
    LLVMValueRef zpd = cu_libm1(c, "__nv_rint", LLVMBuildFPExt(b, izp, c->f64, ""));
    st(c, c->f32, pslot(c, p.ys), ci(c, 0), scale);
    st(c, c->i8, pslot(c, p.yz), ci(c, 0), LLVMBuildFPToUI(b, zpd, c->i8, ""));
    LLVMBuildBr(b, done);
    LLVMPositionBuilderAtEnd(b, done);
    if ((st_ = cu_kend(c, 1, NULL))) return st_;
    if (!p.n) return IR_OK;
    uint32_t slots2[4] = {p.y, p.x, p.ys, p.yz};
    if ((st_ = cu_kbegin(c, slots2, 4, CU_BLOCK, false))) return st_;
    cu_emit_nest(c, 1, &p.n, 1, s1, NULL, dql_body, &p);
    return cu_kend(c, p.n, NULL);
}

/* MaxPool and AveragePool over 1 to 3 spatial axes on every float dtype (MaxPool also on the
 * integer dtypes up to 32 bits, which double holds exactly), with auto_pad,
 * dilations, count_include_pad and MaxPool's Indices output (row- or column-major), one thread
 * per output element walking its window in the interpreter's order, in double. The f32 2-D
 * pools without Indices keep conv.c's unrolled kernel.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <string.h>

typedef struct PlCtx {
    bool max, include_pad, col_major;
    IrValueId x, y, idx;
    IrDType xt, yt;
    uint32_t r;
    int64_t N, C, in[3], k[3], out[3], s[3], d[3], pb[3], pe[3], taps;
} PlCtx;


static LLVMValueRef i64c(Cu *c, int64_t v) { return LLVMConstInt(c->i64, (unsigned long long)v, 1); }

static void pl_body(Cu *c, LLVMValueRef *o, void *user) {
    PlCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef rem = LLVMBuildZExt(b, o[0], c->i64, ""), oc[3], lo[3];
    for (uint32_t i = p->r; i-- > 0;) {
        oc[i] = LLVMBuildURem(b, rem, i64c(c, p->out[i]), "");
        rem = LLVMBuildUDiv(b, rem, i64c(c, p->out[i]), "");
    }
    LLVMValueRef nc = rem; /* n * C + c */
    int64_t isz = 1;
    for (uint32_t i = 0; i < p->r; i++) isz *= p->in[i];
    LLVMValueRef padded = i64c(c, 1);
    for (uint32_t i = 0; i < p->r; i++) {
        lo[i] = LLVMBuildSub(b, LLVMBuildMul(b, oc[i], i64c(c, p->s[i]), ""), i64c(c, p->pb[i]), "");
        /* taps inside the explicitly padded input: min(k, (lim - lo) / d + 1), 0 when lim < lo */
        LLVMValueRef lim = i64c(c, p->in[i] + p->pe[i] - 1);
        LLVMValueRef cnt = LLVMBuildAdd(b, LLVMBuildSDiv(b, LLVMBuildSub(b, lim, lo[i], ""), i64c(c, p->d[i]), ""), i64c(c, 1), "");
        cnt = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, lim, lo[i], ""), i64c(c, 0), cnt, "");
        cnt = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, cnt, i64c(c, p->k[i]), ""), i64c(c, p->k[i]), cnt, "");
        padded = LLVMBuildMul(b, padded, cnt, "");
    }
    LLVMValueRef acc = cu_var(c, c->f64, LLVMConstReal(c->f64, p->max ? -INFINITY : 0.0));
    LLVMValueRef arg = cu_var(c, c->i64, i64c(c, -1)), cnt = cu_var(c, c->i64, i64c(c, 0));
    Loop l;
    cu_loop_begin(c, &l, i64c(c, 0), i64c(c, p->taps), i64c(c, 1));
    LLVMValueRef t = l.iv, off = i64c(c, 0), valid = LLVMConstInt(c->i1, 1, 0);
    for (uint32_t i = p->r; i-- > 0;) {
        LLVMValueRef q = LLVMBuildSRem(b, t, i64c(c, p->k[i]), "");
        t = LLVMBuildSDiv(b, t, i64c(c, p->k[i]), "");
        LLVMValueRef pos = LLVMBuildAdd(b, lo[i], LLVMBuildMul(b, q, i64c(c, p->d[i]), ""), "");
        valid = LLVMBuildAnd(b, valid, LLVMBuildICmp(b, LLVMIntULT, pos, i64c(c, p->in[i]), ""), "");
        int64_t st = 1;
        for (uint32_t j = i + 1; j < p->r; j++) st *= p->in[j];
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, pos, i64c(c, p->in[i]), ""), pos, i64c(c, 0), ""), i64c(c, st), ""), "");
    }
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "tap"), join = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "next");
    LLVMBuildCondBr(b, valid, yes, join);
    LLVMPositionBuilderAtEnd(b, yes);
    LLVMValueRef gi = LLVMBuildAdd(b, LLVMBuildMul(b, nc, i64c(c, isz), ""), off, "");
    LLVMValueRef v = cu_load_typed(c, p->xt, pslot(c, p->x), c->it == c->i64 ? gi : LLVMBuildTrunc(b, gi, c->it, ""));
    if (cu_kind(p->xt) != CU_KF) v = LLVMBuildSIToFP(b, v, c->f64, ""); /* exact: at most 32 bits, widened to i64 */
    LLVMValueRef a = LLVMBuildLoad2(b, c->f64, acc, "");
    LLVMBuildStore(b, LLVMBuildAdd(b, LLVMBuildLoad2(b, c->i64, cnt, ""), i64c(c, 1), ""), cnt);
    if (p->max) { /* the first NaN wins */
        LLVMValueRef first = LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildLoad2(b, c->i64, arg, ""), i64c(c, 0), "");
        LLVMValueRef take = LLVMBuildOr(b, first, LLVMBuildOr(b, fcmp(c, LLVMRealOGT, v, a),
                                                             LLVMBuildAnd(b, fcmp(c, LLVMRealUNO, v, v), fcmp(c, LLVMRealORD, a, a), ""), ""), "");
        LLVMBuildStore(b, sel(c, take, v, a), acc);
        LLVMBuildStore(b, sel(c, take, off, LLVMBuildLoad2(b, c->i64, arg, "")), arg);
    } else {
        LLVMBuildStore(b, LLVMBuildFAdd(b, a, v, ""), acc);
    }
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, join);
    cu_loop_end(c, &l);
    LLVMValueRef res = LLVMBuildLoad2(b, c->f64, acc, "");
    if (!p->max) res = LLVMBuildFDiv(b, res, LLVMBuildSIToFP(b, p->include_pad ? padded : LLVMBuildLoad2(b, c->i64, cnt, ""), c->f64, ""), "");
    if (cu_kind(p->yt) != CU_KF) { /* saturating: a window with no tap inside the input stays defined */
        LLVMTypeRef ft = c->f64;
        unsigned id = LLVMLookupIntrinsicID("llvm.fptosi.sat", 15);
        LLVMTypeRef tys[2] = {c->i64, ft};
        res = LLVMBuildCall2(b, LLVMIntrinsicGetType(c->ctx, id, tys, 2), LLVMGetIntrinsicDeclaration(c->mod, id, tys, 2), &res, 1, "");
    }
    cu_store_typed(c, p->yt, pslot(c, p->y), o[0], res);
    if (p->idx) {
        LLVMValueRef ix = LLVMBuildLoad2(b, c->i64, arg, "");
        ix = sel(c, LLVMBuildICmp(b, LLVMIntSLT, ix, i64c(c, 0), ""), i64c(c, 0), ix);
        if (p->col_major) { /* the first spatial axis fastest */
            LLVMValueRef j[3], rr = ix, cm = i64c(c, 0), mul = i64c(c, 1);
            for (uint32_t i = p->r; i-- > 0;) {
                j[i] = LLVMBuildSRem(b, rr, i64c(c, p->in[i]), "");
                rr = LLVMBuildSDiv(b, rr, i64c(c, p->in[i]), "");
            }
            for (uint32_t i = 0; i < p->r; i++) {
                cm = LLVMBuildAdd(b, cm, LLVMBuildMul(b, j[i], mul, ""), "");
                mul = LLVMBuildMul(b, mul, i64c(c, p->in[i]), "");
            }
            ix = cm;
        }
        cu_store_typed(c, IR_DTYPE_I64, pslot(c, p->idx), o[0], LLVMBuildAdd(b, LLVMBuildMul(b, nc, i64c(c, isz), ""), ix, ""));
    }
}

IrStatus cu_gen_pool_nd(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    PlCtx p = {.max = ir_node_op(g, n) == IR_OP_MAX_POOL, .x = ir_node_operand(g, n, 0), .y = ir_node_result(g, n, 0)};
    p.idx = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    p.xt = lower_value_dtype(g, p.x);
    p.yt = lower_value_dtype(g, p.y);
    bool int_max = p.max && (cu_kind(p.xt) == CU_KS || cu_kind(p.xt) == CU_KU) && ir_dtype_size(p.xt) <= 4;
    if ((cu_kind(p.xt) != CU_KF && !int_max) || !cu_typed_ok(p.xt) || p.yt != p.xt) return cu_unsupported_dtype(c, p.xt);
    uint32_t rx, ry;
    int64_t xd[IR_MAX_RANK], yd[IR_MAX_RANK];
    lower_value_shape(g, p.x, &rx, xd);
    lower_value_shape(g, p.y, &ry, yd);
    if (rx < 3 || rx > 5 || ry != rx) return cu_unsupported(c, "with rank other than 3 to 5");
    p.r = rx - 2;
    p.N = xd[0], p.C = xd[1];
    IrAttrValue av;
    if (!ir_node_attr(g, n, "kernel_shape", &av) || av.count != p.r) return cu_unsupported(c, "without a kernel_shape per spatial axis");
    p.taps = 1;
    for (uint32_t i = 0; i < p.r; i++) {
        p.k[i] = av.ints[i], p.in[i] = xd[2 + i], p.out[i] = yd[2 + i], p.s[i] = p.d[i] = 1;
        if (p.k[i] < 1) return cu_unsupported(c, "with this kernel_shape");
        p.taps *= p.k[i];
    }
    if (ir_node_attr(g, n, "strides", &av) && av.count == p.r)
        for (uint32_t i = 0; i < p.r; i++) p.s[i] = av.ints[i];
    if (ir_node_attr(g, n, "dilations", &av) && av.count == p.r)
        for (uint32_t i = 0; i < p.r; i++) p.d[i] = av.ints[i];
    bool found;
    const char *ap = ir_node_attr_string(g, n, "auto_pad", &found);
    if (!found || !ap || !*ap) ap = "NOTSET";
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    if (strcmp(ap, "NOTSET") == 0 && ir_node_attr(g, n, "pads", &av) && av.count == 2 * p.r)
        for (uint32_t i = 0; i < p.r; i++) p.pb[i] = av.ints[i], p.pe[i] = av.ints[p.r + i];
    else if (!same && strcmp(ap, "VALID") != 0 && strcmp(ap, "NOTSET") != 0) return cu_unsupported(c, "with this auto_pad");
    for (uint32_t i = 0; i < p.r; i++) {
        if (p.s[i] < 1 || p.d[i] < 1) return cu_unsupported(c, "with these strides or dilations");
        if (same) {
            int64_t ek = (p.k[i] - 1) * p.d[i] + 1, total = (p.out[i] - 1) * p.s[i] + ek - p.in[i];
            if (total < 0) total = 0;
            p.pb[i] = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
            p.pe[i] = total - p.pb[i];
        }
    }
    p.include_pad = ir_node_attr_int(g, n, "count_include_pad", &found) != 0;
    p.col_major = ir_node_attr_int(g, n, "storage_order", &found) != 0;
    if (p.idx && lower_value_dtype(g, p.idx) != IR_DTYPE_I64) return cu_unsupported(c, "with Indices other than i64");
    int64_t total = ir_shape_numel(ry, yd), s1[1][IR_MAX_RANK] = {{1}};
    if (!total) return IR_OK;
    uint32_t slots[3] = {p.y, p.x, p.idx ? p.idx : p.y};
    IrStatus st_ = cu_kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, pl_body, &p);
    return cu_kend(c, total, NULL);
}

/* ConvTranspose over 1 to 3 spatial axes (groups, strides, dilations, pads, output_padding,
 * output_shape, auto_pad) as a gather: one thread per output element sums, in double, every
 * (input channel of its group, kernel tap) whose input position maps onto it, plus the bias.
 */
#include "backend/cuda/cu.h"

#include <string.h>

typedef struct CtCtx {
    IrValueId x, w, b, y;
    IrDType xt, wt, bt, yt;
    uint32_t r;
    int64_t C, M, G, in[3], k[3], out[3], s[3], d[3], pb[3], ksz;
} CtCtx;

static LLVMValueRef i64c(Cu *c, int64_t v) { return LLVMConstInt(c->i64, (unsigned long long)v, 1); }
static LLVMValueRef it(Cu *c, LLVMValueRef v) { return c->it == c->i64 ? v : LLVMBuildTrunc(c->b, v, c->it, ""); }

static void ct_body(Cu *c, LLVMValueRef *o, void *user) {
    CtCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef rem = LLVMBuildZExt(b, o[0], c->i64, ""), oc[3];
    int64_t isz = 1, osz = 1;
    for (uint32_t i = 0; i < p->r; i++) isz *= p->in[i], osz *= p->out[i];
    for (uint32_t i = p->r; i-- > 0;) {
        oc[i] = LLVMBuildURem(b, rem, i64c(c, p->out[i]), "");
        rem = LLVMBuildUDiv(b, rem, i64c(c, p->out[i]), "");
    }
    LLVMValueRef m = LLVMBuildURem(b, rem, i64c(c, p->M), ""), nb = LLVMBuildUDiv(b, rem, i64c(c, p->M), "");
    int64_t Cg = p->C / p->G, Mg = p->M / p->G;
    LLVMValueRef grp = LLVMBuildUDiv(b, m, i64c(c, Mg), ""), mm = LLVMBuildURem(b, m, i64c(c, Mg), "");
    LLVMValueRef acc;
    Loop l;
    /* flat loop over (channel of the group, tap) */
    cu_loop_begin_acc(c, &l, i64c(c, 0), i64c(c, Cg * p->ksz), i64c(c, 1), LLVMConstReal(c->f64, 0.0), &acc);
    LLVMValueRef tap = LLVMBuildSRem(b, l.iv, i64c(c, p->ksz), ""), cc = LLVMBuildSDiv(b, l.iv, i64c(c, p->ksz), "");
    LLVMValueRef ch = LLVMBuildAdd(b, LLVMBuildMul(b, grp, i64c(c, Cg), ""), cc, "");
    LLVMValueRef t = tap, xoff = i64c(c, 0), valid = LLVMConstInt(c->i1, 1, 0);
    int64_t st = 1;
    for (uint32_t i = p->r; i-- > 0;) {
        LLVMValueRef q = LLVMBuildSRem(b, t, i64c(c, p->k[i]), "");
        t = LLVMBuildSDiv(b, t, i64c(c, p->k[i]), "");
        /* o = i*s - pb + q*d  ->  i = (o + pb - q*d) / s when divisible and inside */
        LLVMValueRef num = LLVMBuildSub(b, LLVMBuildAdd(b, oc[i], i64c(c, p->pb[i]), ""), LLVMBuildMul(b, q, i64c(c, p->d[i]), ""), "");
        LLVMValueRef pos = LLVMBuildSDiv(b, num, i64c(c, p->s[i]), "");
        LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, num, i64c(c, 0), ""),
                                       LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildSRem(b, num, i64c(c, p->s[i]), ""), i64c(c, 0), ""), "");
        ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLT, pos, i64c(c, p->in[i]), ""), "");
        valid = LLVMBuildAnd(b, valid, ok, "");
        xoff = LLVMBuildAdd(b, xoff, LLVMBuildMul(b, sel(c, ok, pos, i64c(c, 0)), i64c(c, st), ""), "");
        st *= p->in[i];
    }
    LLVMValueRef xi = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, nb, i64c(c, p->C), ""), ch, ""), i64c(c, isz), ""), xoff, "");
    LLVMValueRef wi = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, ch, i64c(c, Mg), ""), mm, ""), i64c(c, p->ksz), ""), tap, "");
    LLVMValueRef prod = LLVMBuildFMul(b, cu_load_typed(c, p->xt, pslot(c, p->x), it(c, xi)), cu_load_typed(c, p->wt, pslot(c, p->w), it(c, wi)), "");
    cu_loop_acc_next(c, acc, sel(c, valid, LLVMBuildFAdd(b, acc, prod, ""), acc));
    cu_loop_end(c, &l);
    if (p->b) acc = LLVMBuildFAdd(b, acc, cu_load_typed(c, p->bt, pslot(c, p->b), it(c, m)), "");
    cu_store_typed(c, p->yt, pslot(c, p->y), o[0], acc);
}

IrStatus cuda_emit_conv_transpose(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    CtCtx p = {.x = ir_node_operand(g, n, 0), .w = ir_node_operand(g, n, 1), .y = ir_node_result(g, n, 0)};
    p.b = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    if (p.b && lower_value_nbytes(g, p.b) == 0) p.b = 0;
    p.xt = lower_value_dtype(g, p.x), p.wt = lower_value_dtype(g, p.w), p.yt = lower_value_dtype(g, p.y);
    p.bt = p.b ? lower_value_dtype(g, p.b) : p.xt;
    IrDType all[4] = {p.xt, p.wt, p.yt, p.bt};
    for (int i = 0; i < 4; i++)
        if (cu_kind(all[i]) != CU_KF || !cu_typed_ok(all[i])) return cu_unsupported_dtype(c, all[i]);
    uint32_t rx, rw, ry;
    int64_t xd[IR_MAX_RANK], wd[IR_MAX_RANK], yd[IR_MAX_RANK];
    lower_value_shape(g, p.x, &rx, xd);
    lower_value_shape(g, p.w, &rw, wd);
    lower_value_shape(g, p.y, &ry, yd);
    if (rx < 3 || rx > 5 || rw != rx || ry != rx) return cu_unsupported(c, "with rank other than 3 to 5");
    p.r = rx - 2;
    bool found;
    p.G = ir_node_attr_int(g, n, "group", &found);
    if (!found) p.G = 1;
    p.C = xd[1];
    if (p.G < 1 || p.C % p.G || wd[0] != p.C) return cu_unsupported(c, "with these groups");
    p.M = wd[1] * p.G;
    if (yd[1] != p.M) return cu_unsupported(c, "with these shapes");
    p.ksz = 1;
    int64_t op[3] = {0, 0, 0}, pe[3] = {0, 0, 0};
    for (uint32_t i = 0; i < p.r; i++) {
        p.in[i] = xd[2 + i], p.k[i] = wd[2 + i], p.out[i] = yd[2 + i], p.s[i] = p.d[i] = 1, p.pb[i] = 0;
        p.ksz *= p.k[i];
    }
    IrAttrValue av;
    if (ir_node_attr(g, n, "strides", &av))
        for (uint32_t i = 0; i < p.r && i < av.count; i++) p.s[i] = av.ints[i];
    if (ir_node_attr(g, n, "dilations", &av))
        for (uint32_t i = 0; i < p.r && i < av.count; i++) p.d[i] = av.ints[i];
    if (ir_node_attr(g, n, "output_padding", &av))
        for (uint32_t i = 0; i < p.r && i < av.count; i++) op[i] = av.ints[i];
    bool have_os = ir_node_attr(g, n, "output_shape", &av) && av.count > 0;
    const char *ap = ir_node_attr_string(g, n, "auto_pad", &found);
    if (!found || !ap || !*ap) ap = "NOTSET";
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    IrAttrValue pads;
    if (strcmp(ap, "NOTSET") == 0 && ir_node_attr(g, n, "pads", &pads) && pads.count == 2 * p.r)
        for (uint32_t i = 0; i < p.r; i++) p.pb[i] = pads.ints[i], pe[i] = pads.ints[p.r + i];
    for (uint32_t i = 0; i < p.r; i++) {
        if (p.s[i] < 1 || p.d[i] < 1) return cu_unsupported(c, "with these strides or dilations");
        int64_t full = p.s[i] * (p.in[i] - 1) + op[i] + (p.k[i] - 1) * p.d[i] + 1;
        if (have_os || same) { /* the static output size is the one wanted */
            int64_t total = full - p.out[i];
            if (total < 0) total = 0;
            p.pb[i] = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
        } else if (full - p.pb[i] - pe[i] != p.out[i]) {
            return cu_unsupported(c, "(internal: output size mismatch)");
        }
    }
    int64_t total = ir_shape_numel(ry, yd), s1[1][IR_MAX_RANK] = {{1}};
    if (!total) return IR_OK;
    uint32_t slots[4] = {p.y, p.x, p.w, p.b ? p.b : p.x};
    IrStatus st_ = cu_kbegin(c, slots, 4, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, ct_body, &p);
    return cu_kend(c, total, NULL);
}

/* MatMulInteger and QLinearMatMul (u8/i8): the kernel passes the sizes, the start of each output
 * batch's A and B matrices (numpy broadcasting of the batch dims) and the zero points and scales
 * to the runtime's irt_qmatmul, which accumulates exactly in int64 and requantizes as the
 * interpreter does. ConvInteger and QLinearConv (2-D) the same way through
 * irt_qconv, the window read as Conv's.
 */
#include "backend/cpu/cpu.h"
#include "backend/runtime/abi.h"

static int64_t q_kind(IrDType dt) { return dt == IR_DTYPE_U8 ? 0 : dt == IR_DTYPE_I8 ? 1 : -1; }

/* The operands of MatMulInteger/ConvInteger (a, b, a_zp, b_zp) or of their QLinear forms (a,
 * a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, ...; q), absent ones 0; the kinds of a, b and
 * the output (q_kind; output: 0 i32, 1 u8, 2 i8; -1 another dtype) and whether the scales are
 * f32 and y_zp of the output's dtype. */
typedef struct QOps {
    bool q, scales_ok;
    IrValueId a, b, az, bz, as, bs, ys, yz, y;
    int64_t ka, kb, ko;
} QOps;

static void q_operands(const IrGraph *g, IrNodeId n, bool q, QOps *o) {
    o->q = q;
    o->a = ir_node_operand(g, n, 0), o->b = ir_node_operand(g, n, q ? 3 : 1), o->y = ir_node_result(g, n, 0);
    o->az = ir_node_operand(g, n, 2), o->bz = ir_node_operand(g, n, q ? 5 : 3);
    o->as = q ? ir_node_operand(g, n, 1) : 0, o->bs = q ? ir_node_operand(g, n, 4) : 0;
    o->ys = q ? ir_node_operand(g, n, 6) : 0, o->yz = q ? ir_node_operand(g, n, 7) : 0;
    o->ka = q_kind(lower_value_dtype(g, o->a)), o->kb = q_kind(lower_value_dtype(g, o->b));
    o->ko = q ? 1 + q_kind(lower_value_dtype(g, o->y)) : lower_value_dtype(g, o->y) == IR_DTYPE_I32 ? 0 : -1;
    o->scales_ok = !q || (lower_value_dtype(g, o->as) == IR_DTYPE_F32 && lower_value_dtype(g, o->bs) == IR_DTYPE_F32 &&
                          lower_value_dtype(g, o->ys) == IR_DTYPE_F32 && lower_value_dtype(g, o->yz) == lower_value_dtype(g, o->y));
}

/* The batch dims of s (all but the last two) as a shape of their own. */
static void qmm_batch_dims(const LlvmDims *s, LlvmDims *bd) {
    bd->rank = s->rank - 2;
    for (uint32_t k = 0; k < bd->rank; k++) bd->dim[k] = s->dim[k], bd->cd[k] = s->cd[k], bd->ex[k] = s->ex[k];
}

/* Where output batch bi's A and B matrices start (numpy broadcasting of the batch dims): per
 * batch {A element, B element, A row, B column}, the table irt_qmatmul reads. */
static int64_t *qmm_batch_table(uint32_t ry, uint32_t ra, uint32_t rb, const int64_t *dy, const int64_t *da,
                                const int64_t *db, int64_t M, int64_t K, int64_t N, int64_t nb) {
    int64_t *boff = malloc((size_t)(4 * (nb ? nb : 1)) * sizeof *boff);
    if (!boff) return NULL;
    uint32_t nbd = ry - 2;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t rem = bi, ia = 0, ib = 0, sa = 1, sb = 1;
        for (uint32_t k = nbd; k-- > 0;) {
            int64_t c = rem % dy[k];
            rem /= dy[k];
            int64_t ka_ = (int64_t)k - (int64_t)(ry - ra), kb_ = (int64_t)k - (int64_t)(ry - rb); /* dims of A, B */
            if (ka_ >= 0) ia += (da[ka_] == 1 ? 0 : c) * sa, sa *= da[ka_];
            if (kb_ >= 0) ib += (db[kb_] == 1 ? 0 : c) * sb, sb *= db[kb_];
        }
        boff[4 * bi] = ia * M * K, boff[4 * bi + 1] = ib * K * N, boff[4 * bi + 2] = ia * M, boff[4 * bi + 3] = ib * N;
    }
    return boff;
}

/* One output batch of a run-time shape: irt_qmatmul on that batch alone (its table entry built
 * on the stack, the output advanced to the batch). */
typedef struct QmmBatch {
    LLVMValueRef p, boff, M, K, N, args[11];
    int64_t osize;
} QmmBatch;

static void qmm_batch_body(LlvmEmit *e, LLVMValueRef *offs, LLVMValueRef *idx, void *user) {
    (void)idx;
    QmmBatch *q = user;
    LLVMBuilderRef b = e->b;
    LLVMValueRef ent[4] = {LLVMBuildMul(b, offs[0], LLVMBuildMul(b, q->M, q->K, ""), ""),
                           LLVMBuildMul(b, offs[1], LLVMBuildMul(b, q->K, q->N, ""), ""), LLVMBuildMul(b, offs[0], q->M, ""),
                           LLVMBuildMul(b, offs[1], q->N, "")};
    for (int i = 0; i < 4; i++) {
        LLVMValueRef k = lo_i64(e, i);
        LLVMBuildStore(b, ent[i], LLVMBuildGEP2(b, lo_i64_t(e), q->boff, &k, 1, ""));
    }
    LLVMValueRef args[11];
    memcpy(args, q->args, sizeof args);
    args[0] = q->p, args[1] = q->boff;
    LLVMValueRef yoff = LLVMBuildMul(b, offs[2], LLVMBuildMul(b, q->M, lo_i64(e, q->osize), ""), "");
    args[10] = lo_gep(e, lo_i8_t(e), q->args[10], LLVMBuildMul(b, yoff, q->N, ""));
    lo_call_runtime(e, IRT_FN_QMATMUL, NULL, args, 11);
}

/* MatMulInteger/QLinearMatMul: sizes as values (llvm/dims.h). With static shapes one call reads
 * a constant table of every batch's start; with run-time shapes the batches are a loop nest
 * whose broadcast strides give each batch's A and B, one call per batch. */
IrStatus llvm_ops_qmm_gen(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    bool q = ir_node_op(g, n) == IR_OP_QLINEAR_MAT_MUL;
    QOps o;
    q_operands(g, n, q, &o);
    IrValueId va = o.a, vb = o.b, y = o.y, vaz = o.az, vbz = o.bz, vas = o.as, vbs = o.bs, vys = o.ys, vyz = o.yz;
    LlvmDims sa, sb, sy, sc;
    if (!llvm_dims_of(e, va, &sa) || !llvm_dims_of(e, vb, &sb) || !llvm_dims_of(e, y, &sy) || sa.rank < 2 || sb.rank < 2 ||
        sy.rank != (sa.rank > sb.rank ? sa.rank : sb.rank))
        return llvm_ops_refuse(e, "with these shapes (A and B of rank 2 or more)");
    int64_t ka = o.ka, kb = o.kb, ko = o.ko;
    if (ka < 0 || kb < 0 || ko < 0 || (vaz && lower_value_dtype(g, vaz) != lower_value_dtype(g, va)) ||
        (vbz && lower_value_dtype(g, vbz) != lower_value_dtype(g, vb)) || !o.scales_ok)
        return llvm_ops_refuse(e, "on these dtypes (u8 or i8, f32 scales)");
    uint32_t ra = sa.rank, rb = sb.rank, ry = sy.rank;
    /* K of A against B's, the output's M and N, and each batch dim of A and B (the output's or
     * 1): refused when they differ as constants, else checked when the kernel runs */
    LLVMBuilderRef bl = e->b;
    LLVMValueRef pairs[3][2] = {{sb.dim[rb - 2], sa.dim[ra - 1]}, {sy.dim[ry - 2], sa.dim[ra - 2]}, {sy.dim[ry - 1], sb.dim[rb - 1]}};
    LLVMValueRef bad = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    for (int i = 0; i < 3; i++) bad = LLVMBuildOr(bl, bad, LLVMBuildICmp(bl, LLVMIntNE, pairs[i][0], pairs[i][1], ""), "");
    for (uint32_t k = 0; k + 2 < ry; k++) {
        const LlvmDims *ops[2] = {&sa, &sb};
        for (int j = 0; j < 2; j++) {
            if (k + ops[j]->rank < ry) continue; /* a leading dim A or B lacks */
            LLVMValueRef d = ops[j]->dim[k + ops[j]->rank - ry];
            LLVMValueRef off = LLVMBuildAnd(bl, LLVMBuildICmp(bl, LLVMIntNE, d, sy.dim[k], ""),
                                            LLVMBuildICmp(bl, LLVMIntNE, d, lo_i64(e, 1), ""), "");
            bad = LLVMBuildOr(bl, bad, off, "");
        }
    }
    LLVMValueRef counts[4] = {lo_i64(e, 0), lo_i64(e, 0), lo_i64(e, 0), lo_i64(e, 0)}; /* a_zp, b_zp, a_scale, b_scale */
    IrValueId cv[4] = {vaz, vbz, vas, vbs};
    for (int i = 0; i < 4; i++)
        if (cv[i]) {
            if (!llvm_dims_of(e, cv[i], &sc)) return llvm_ops_refuse(e, "with these shapes");
            counts[i] = llvm_dims_prod(e, &sc, 0, sc.rank);
        }
    if (q && ((LLVMIsAConstantInt(counts[2]) && !LLVMConstIntGetSExtValue(counts[2])) ||
              (LLVMIsAConstantInt(counts[3]) && !LLVMConstIntGetSExtValue(counts[3])) || !llvm_dims_of(e, vys, &sc) ||
              llvm_dims_cprod(&sc, 0, sc.rank) == 0 || !llvm_dims_of(e, vyz, &sc) || llvm_dims_cprod(&sc, 0, sc.rank) == 0))
        return llvm_ops_refuse(e, "without scales or output zero point");
    for (int i = 2; q && i < 4; i++) /* scales of a run-time count: none is no scale */
        bad = LLVMBuildOr(bl, bad, LLVMBuildICmp(bl, LLVMIntEQ, counts[i], lo_i64(e, 0), ""), "");
    bool refuse;
    LLVMBasicBlockRef shapes = lo_run_guard(e, bad, q ? "QLinearMatMul: A, B and the output disagree in shape, or a scale is empty"
                                                      : "MatMulInteger: A, B and the output disagree in shape", &refuse);
    if (refuse) return llvm_ops_refuse(e, "with these shapes");
    LLVMValueRef M = sa.dim[ra - 2], K = sa.dim[ra - 1], N = sb.dim[rb - 1];
    LLVMValueRef nb = llvm_dims_prod(e, &sy, 0, ry - 2);
    bool fixed = llvm_dims_static(&sa) && llvm_dims_static(&sb) && llvm_dims_static(&sy);
    LLVMValueRef pv[11] = {lo_i64(e, ka), lo_i64(e, kb), lo_i64(e, ko), fixed ? nb : lo_i64(e, 1), M, K, N,
                           counts[0], counts[1], counts[2], counts[3]};
    LLVMValueRef gp = lo_i64s(e, pv, 11, "qmm.p");
    if (!gp) return IR_ENOMEM;
    LLVMTypeRef ptr = lo_ptr_t(e);
    /* a zero point of no elements is absent */
    IrValueId ops[8] = {va, vb, vaz, vbz, vas, vbs, vys, vyz};
    LLVMValueRef args[11];
    for (int i = 0; i < 8; i++) {
        bool zp = i >= 2 && i < 4 && ops[i];
        if (zp && LLVMIsAConstantInt(counts[i - 2]) && !LLVMConstIntGetSExtValue(counts[i - 2])) ops[i] = 0;
        args[2 + i] = ops[i] ? lo_buf(e, ops[i]) : LLVMConstPointerNull(ptr);
        if (zp && ops[i] && !LLVMIsAConstantInt(counts[i - 2]))
            args[2 + i] = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, counts[i - 2], lo_i64(e, 0), ""),
                                          LLVMConstPointerNull(ptr), args[2 + i], "");
    }
    args[10] = lo_buf(e, y);
    if (fixed) {
        int64_t da[IR_MAX_RANK], db[IR_MAX_RANK], dy[IR_MAX_RANK];
        for (uint32_t k = 0; k < ry; k++) dy[k] = sy.cd[k], da[k] = k < ra ? sa.cd[k] : 0, db[k] = k < rb ? sb.cd[k] : 0;
        int64_t nbc = llvm_dims_cprod(&sy, 0, ry - 2);
        int64_t *boff = qmm_batch_table(ry, ra, rb, dy, da, db, sa.cd[ra - 2], sa.cd[ra - 1], sb.cd[rb - 1], nbc);
        if (!boff) return IR_ENOMEM;
        args[0] = gp, args[1] = lo_const_i64s(e, boff, 4 * nbc, "qmm.boff");
        free(boff);
        if (!args[1]) return IR_ENOMEM;
        lo_call_runtime(e, IRT_FN_QMATMUL, NULL, args, 11);
        if (shapes) lo_if_end(e, shapes);
        return IR_OK;
    }
    QmmBatch qb = {.p = gp, .boff = LLVMBuildAlloca(e->ab, LLVMArrayType2(lo_i64_t(e), 4), "qmm.boff.run"), .M = M, .K = K,
                   .N = N, .osize = ko ? 1 : 4};
    memcpy(qb.args, args, sizeof args);
    LlvmDims ab, bb, yb;
    qmm_batch_dims(&sa, &ab), qmm_batch_dims(&sb, &bb), qmm_batch_dims(&sy, &yb);
    LLVMValueRef st[3][IR_MAX_RANK];
    llvm_dims_bcast_strides(e, &ab, &yb, st[0]);
    llvm_dims_bcast_strides(e, &bb, &yb, st[1]);
    llvm_dims_strides(e, &yb, st[2]);
    llvm_nest(e, &yb, 3, st, NULL, qmm_batch_body, &qb);
    if (shapes) lo_if_end(e, shapes);
    return IR_OK;
}

/* ConvInteger/QLinearConv (2-D): sizes as values (llvm/dims.h), so shapes known at run time only
 * are served too; zero points, scales and bias must have a static element count. */
IrStatus llvm_ops_qconv_gen(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    bool q = ir_node_op(g, n) == IR_OP_QLINEAR_CONV;
    QOps o;
    q_operands(g, n, q, &o);
    IrValueId vx = o.a, vw = o.b, y = o.y, vxz = o.az, vwz = o.bz, vxs = o.as, vws = o.bs, vys = o.ys, vyz = o.yz;
    IrValueId vb = q ? ir_node_operand(g, n, 8) : 0;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    LlvmDims sx, sw, sy;
    if (!llvm_dims_of(e, vx, &sx) || !llvm_dims_of(e, vw, &sw) || !llvm_dims_of(e, y, &sy) || sx.rank != 4 || sw.rank != 4 ||
        sy.rank != 4)
        return llvm_ops_refuse(e, "other than 2-D (NCHW)");
    int64_t kx = o.ka, kw = o.kb, ko = o.ko;
    if (kx < 0 || kw < 0 || ko < 0 || (vb && lower_value_dtype(g, vb) != IR_DTYPE_I32) || !o.scales_ok)
        return llvm_ops_refuse(e, "on these dtypes (u8 or i8, f32 scales, i32 bias)");
    if ((vxz && lower_value_dtype(g, vxz) != lower_value_dtype(g, vx)) || (vwz && lower_value_dtype(g, vwz) != lower_value_dtype(g, vw)))
        return llvm_ops_refuse(e, "with zero points of another dtype than their tensors");
    /* a kernel_shape other than the weight's is refused where both are known; where the weight's
     * dims are symbols, shape-infer has tied them to it */
    IrAttrValue ks;
    if (ir_node_attr(g, n, "kernel_shape", &ks) &&
        (ks.count != 2 || (sw.cd[2] >= 0 && ks.ints[0] != sw.cd[2]) || (sw.cd[3] >= 0 && ks.ints[1] != sw.cd[3])))
        return llvm_ops_refuse(e, "with a kernel_shape other than the weight's");
    if (q && (lower_value_nbytes(g, vys) < 4 || lower_value_nbytes(g, vyz) < 1)) return llvm_ops_refuse(e, "without y_scale or y_zero_point");
    int64_t a[6];
    const char *why = lower_win_attrs(g, n, a);
    if (why) return llvm_ops_refuse(e, why);
    bool found;
    int64_t G = ir_node_attr_int(g, n, "group", &found);
    if (!found) G = 1;
    int64_t C = sx.cd[1], M = sw.cd[0];
    if (G < 1 || (C >= 0 && C % G) || (M >= 0 && M % G) || (C >= 0 && sw.cd[1] >= 0 && sw.cd[1] != C / G))
        return llvm_ops_refuse(e, "with these groups");
    int64_t cnt[5] = {0, 0, 0, 0, 0}; /* x_zp, w_zp, w_scale, bias, x_scale */
    IrValueId cv[5] = {vxz, vwz, vws, vb, vxs};
    for (int i = 0; i < 5; i++)
        if (cv[i]) {
            if (!lower_value_shape(g, cv[i], &r, d)) return llvm_ops_refuse(e, "with zero points, scales or bias of run-time size");
            cnt[i] = ir_shape_numel(r, d);
        }
    if (cnt[0] > 1) return llvm_ops_refuse(e, "with a per-channel input zero point");
    if ((cnt[1] > 1 && cnt[1] != M) || (cnt[2] > 1 && cnt[2] != M) || (cnt[3] && cnt[3] != M) || (q && (cnt[2] == 0 || cnt[4] == 0)))
        return llvm_ops_refuse(e, "with these zero points, scales or bias");
    LLVMValueRef pv[22] = {lo_i64(e, kx), lo_i64(e, kw), lo_i64(e, ko), sx.dim[0], sx.dim[1], sx.dim[2], sx.dim[3],
                           sw.dim[0], sw.dim[2], sw.dim[3], sy.dim[2], sy.dim[3]};
    int64_t tail[10] = {a[0], a[1], a[2], a[3], a[4], a[5], G, cnt[0] > 0, cnt[1], cnt[2]};
    for (int i = 0; i < 10; i++) pv[12 + i] = lo_i64(e, tail[i]);
    LLVMValueRef gp = lo_i64s(e, pv, 22, "qconv.p");
    if (!gp) return IR_ENOMEM;
    LLVMTypeRef ptr = lo_ptr_t(e);
    IrValueId ops[9] = {vx, vw, cnt[0] ? vxz : 0, cnt[1] ? vwz : 0, vxs, vws, vys, vyz, cnt[3] ? vb : 0};
    LLVMValueRef args[11] = {gp};
    for (int i = 0; i < 9; i++) args[1 + i] = ops[i] ? lo_buf(e, ops[i]) : LLVMConstPointerNull(ptr);
    args[10] = lo_buf(e, y);
    lo_call_runtime(e, IRT_FN_QCONV, NULL, args, 11);
    return IR_OK;
}

/* Contractions through cuBLASLt steps: MatMul (strided-batched or per batch index) and Gemm
 * (with its bias as the BIAS epilogue or a kernel).
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- contractions -------------------------------------------------------------------------------- */

static IrStatus gen_matmul(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrDType dt = lower_value_dtype(g, va);
    if ((dt != IR_DTYPE_F32 && dt != IR_DTYPE_BF16) || lower_value_dtype(g, vb) != dt)
        return cu_unsupported(c, "on tensors other than f32 or bf16");
    LowerMatMulShape ms;
    const char *why = lower_matmul_shape(g, n, &ms);
    if (why) return cu_unsupported(c, why);
    int64_t m = ms.m, k = ms.k, nn = ms.n, nb = ms.nb, *bd = ms.bd;
    uint32_t bra = ms.ra - 2, brb = ms.rb - 2, br = ms.br;
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    if (nb * m * nn == 0) return IR_OK;
    ir_shape_broadcast_strides(bra, ms.da, br, NULL, sa);
    ir_shape_broadcast_strides(brb, ms.db, br, NULL, sb);
    size_t es = ir_dtype_size(dt);
    CuGemm gm = {.m = m, .n = nn, .k = k, .lda = k, .ldb = nn, .ldc = nn, .alpha = 1.0, .a = {va, 0}, .b = {vb, 0},
                 .c = {vy, 0}};
    snprintf(gm.dt, sizeof gm.dt, "%s", dt == IR_DTYPE_BF16 ? "bf16" : "f32");
    /* batch offsets of A and B: one strided-batched GEMM when they are b * stride (stride 0 =
     * broadcast), else one GEMM per batch index */
    int64_t *oa = malloc((size_t)(nb ? nb : 1) * 2 * sizeof *oa);
    if (!oa) return IR_ENOMEM;
    int64_t *ob = oa + nb;
    bool uniform = true;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t rem = bi, a_off = 0, b_off = 0;
        for (uint32_t q = br; q-- > 0;) {
            int64_t coord = rem % bd[q];
            rem /= bd[q];
            a_off += coord * sa[q];
            b_off += coord * sb[q];
        }
        oa[bi] = a_off * m * k;
        ob[bi] = b_off * k * nn;
        if (bi >= 1 && (oa[bi] != bi * oa[1] || ob[bi] != bi * ob[1])) uniform = false;
    }
    IrStatus s = IR_OK;
    if (uniform) {
        gm.batch = nb;
        gm.sa = nb > 1 ? oa[1] : 0;
        gm.sb = nb > 1 ? ob[1] : 0;
        gm.sc = m * nn;
        if (nb > 1 && gm.sb == 0 && gm.sa == m * k) { /* x[..., M, K] @ w[K, N]: one GEMM with M * batch rows */
            gm.m *= nb;
            gm.batch = 1;
            gm.sa = gm.sc = 0;
        }
        s = cu_push_gemm(c, &gm);
    } else if (nb > 4096) {
        s = cu_unsupported(c, "with this broadcast over more than 4096 batches");
    } else {
        gm.batch = 1;
        for (int64_t bi = 0; bi < nb && !s; bi++) {
            gm.a.off = oa[bi] * (int64_t)es;
            gm.b.off = ob[bi] * (int64_t)es;
            gm.c.off = bi * m * nn * (int64_t)es;
            s = cu_push_gemm(c, &gm);
        }
    }
    free(oa);
    return s;
}

static IrStatus gen_gemm(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrValueId vc = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    LowerGemmShape gs;
    const char *why = lower_gemm_shape(g, n, &gs);
    if (why) return cu_unsupported(c, why);
    CuGemm gm = {.dt = "f32", .a = {va, 0}, .b = {vb, 0}, .c = {vy, 0}, .batch = 1, .ta = gs.ta, .tb = gs.tb,
                 .alpha = gs.alpha, .m = gs.m, .n = gs.n, .k = gs.k, .lda = gs.lda, .ldb = gs.ldb, .ldc = gs.n};
    double beta = gs.beta;
    IrStatus s = IR_OK;
    uint32_t rc = gs.rc;
    const int64_t *dc = gs.dc, *dy = gs.dy;
    int64_t st2[2][IR_MAX_RANK];
    /* a bias row [N] (or [1, N]) with beta 1: cuBLASLt's BIAS epilogue, no extra kernel */
    bool epi = vc && beta == 1.0 && rc >= 1 && rc <= 2 && dc[rc - 1] == gm.n && (rc == 1 || dc[0] == 1) && gm.n > 1;
    if (epi) gm.bias_slot = vc;
    if (gm.m && gm.n) {
        if (gm.k == 0) return cu_unsupported(c, "with K = 0");
        s = cu_push_gemm(c, &gm);
    } else return IR_OK;
    if (s || !vc || beta == 0.0 || epi) return s;
    ir_shape_strides(2, dy, st2[0]);
    ir_shape_broadcast_strides(rc, dc, 2, NULL, st2[1]);
    return cu_bias_kernel(c, vy, vc, beta, 2, dy, st2);
}


/* ---- rows of backend/cuda/cuda_ops.def ---- */

IrStatus cuda_emit_matmul(Cu *c) { return gen_matmul(c); }
IrStatus cuda_emit_gemm(Cu *c) { return gen_gemm(c); }

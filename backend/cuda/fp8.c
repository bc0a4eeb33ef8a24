/* FP8 (e4m3fn): quantize/dequantize kernels through a decode table and the encoder, and
 * FP8 MatMul as an e4m3 cuBLASLt GEMM (sm_89+) or dequantized operands and an f32 GEMM.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- FP8 ---------------------------------------------------------------------------------------- */

/* The 256 E4M3FN values (exact, from ir/dtype.c) as a constant table: decoding on every target,
 * and the search table of the software encoder used below sm_89. */
static LLVMValueRef f8_table(Cu *c) {
    if (c->f8tab) return c->f8tab;
    LLVMValueRef v[256];
    for (int i = 0; i < 256; i++) v[i] = cf(c, (double)ir_f8e4m3fn_to_f32((uint8_t)i));
    LLVMTypeRef at = LLVMArrayType2(c->f32, 256);
    c->f8tab = LLVMAddGlobalInAddressSpace(c->mod, at, "irt_e4m3_values", 4);
    LLVMSetInitializer(c->f8tab, LLVMConstArray2(c->f32, v, 256));
    LLVMSetGlobalConstant(c->f8tab, 1);
    LLVMSetLinkage(c->f8tab, LLVMInternalLinkage);
    return c->f8tab;
}

static LLVMValueRef f8_decode(Cu *c, LLVMValueRef byte) {
    LLVMValueRef idx[2] = {c32(c, 0), LLVMBuildZExt(c->b, byte, c->i32, "")};
    return LLVMBuildLoad2(c->b, c->f32, LLVMBuildGEP2(c->b, LLVMArrayType2(c->f32, 256), f8_table(c), idx, 2, ""), "");
}

/* f32 -> E4M3FN, round to nearest even, saturating to +-448, NaN kept. */
static LLVMValueRef f8_encode(Cu *c, LLVMValueRef q) {
    LLVMBuilderRef b = c->b;
    if (c->sm >= 89) {
        c->m->uses_fp8_ptx = true;
        LLVMTypeRef args[2] = {c->f32, c->f32};
        LLVMTypeRef ft = LLVMFunctionType(c->i16, args, 2, 0);
        const char *as = "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", *cons = "=h,f,f";
        LLVMValueRef ia = LLVMGetInlineAsm(ft, (char *)as, strlen(as), (char *)cons, strlen(cons), 0, 0,
                                           LLVMInlineAsmDialectATT, 0);
        LLVMValueRef av[2] = {cf(c, 0.0), q}; /* the second source lands in the low byte */
        return LLVMBuildTrunc(b, LLVMBuildCall2(b, ft, ia, av, 2, ""), c->i8, "");
    }
    /* software: binary search of |q| among the 127 finite non-negative codes (monotone in the
     * code), then ties to the even code */
    LLVMValueRef a = cu_f32_intr(c, "llvm.fabs", q);
    LLVMValueRef lo = c32(c, 0);
    for (int step = 64; step >= 1; step /= 2) {
        LLVMValueRef cand = LLVMBuildAdd(b, lo, c32(c, step), "");
        LLVMValueRef inr = LLVMBuildICmp(b, LLVMIntSLE, cand, c32(c, 126), "");
        LLVMValueRef safe = sel(c, inr, cand, c32(c, 126));
        LLVMValueRef cv = f8_decode(c, LLVMBuildTrunc(b, safe, c->i8, ""));
        lo = sel(c, LLVMBuildAnd(b, inr, fcmp(c, LLVMRealOLE, cv, a), ""), cand, lo);
    }
    LLVMValueRef hi = sel(c, LLVMBuildICmp(b, LLVMIntSLT, lo, c32(c, 126), ""), LLVMBuildAdd(b, lo, c32(c, 1), ""), lo);
    LLVMValueRef vlo = f8_decode(c, LLVMBuildTrunc(b, lo, c->i8, "")), vhi = f8_decode(c, LLVMBuildTrunc(b, hi, c->i8, ""));
    LLVMValueRef dl = LLVMBuildFSub(b, a, vlo, ""), dh = LLVMBuildFSub(b, vhi, a, "");
    LLVMValueRef even_lo = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, lo, c32(c, 1), ""), c32(c, 0), "");
    LLVMValueRef up = LLVMBuildOr(b, fcmp(c, LLVMRealOGT, dl, dh),
                                  LLVMBuildAnd(b, fcmp(c, LLVMRealOEQ, dl, dh), LLVMBuildNot(b, even_lo, ""), ""), "");
    LLVMValueRef code = sel(c, up, hi, lo);
    code = sel(c, fcmp(c, LLVMRealOGE, a, cf(c, 448.0)), c32(c, 126), code);
    LLVMValueRef sign = sel(c, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildBitCast(b, q, c->i32, ""), c32(c, 0), ""), c32(c, 0x80), c32(c, 0));
    code = LLVMBuildOr(b, code, sign, "");
    code = sel(c, fcmp(c, LLVMRealUNO, q, q), c32(c, 0x7f), code);
    return LLVMBuildTrunc(b, code, c->i8, "");
}

typedef struct QCtx {
    uint32_t y, x, s;
    bool quant, per_ch;
    int64_t inner, ch;
} QCtx;

static void q_body(Cu *c, LLVMValueRef *o, void *user) {
    QCtx *p = user;
    LLVMValueRef sidx = p->per_ch ? LLVMBuildURem(c->b, LLVMBuildUDiv(c->b, o[0], ci(c, p->inner), ""), ci(c, p->ch), "")
                                  : ci(c, 0);
    LLVMValueRef sc = ld(c, c->f32, pslot(c, p->s), sidx);
    if (p->quant) {
        LLVMValueRef q = LLVMBuildFDiv(c->b, ld(c, c->f32, pslot(c, p->x), o[0]), sc, "");
        st(c, c->i8, pslot(c, p->y), o[0], f8_encode(c, q));
    } else {
        LLVMValueRef v = f8_decode(c, ld(c, c->i8, pslot(c, p->x), o[0]));
        st(c, c->f32, pslot(c, p->y), o[0], LLVMBuildFMul(c->b, v, sc, ""));
    }
}

static IrStatus gen_quant(Cu *c, bool quant) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), s = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    if (quant) {
        bool found;
        const char *fmt = ir_node_attr_string(g, n, "format", &found);
        if (fmt && strcmp(fmt, "e4m3fn") != 0) return cu_unsupported(c, "with a format other than e4m3fn");
        if (!ir_node_attr_int(g, n, "saturate", &found) && found) return cu_unsupported(c, "without saturate");
        if (lower_value_dtype(g, x) != IR_DTYPE_F32) return cu_unsupported(c, "on non-f32 input");
    } else {
        if (lower_value_dtype(g, x) != IR_DTYPE_F8E4M3FN) return cu_unsupported(c, "on a format other than e4m3fn");
        if (lower_value_dtype(g, y) != IR_DTYPE_F32) return cu_unsupported(c, "to a dtype other than f32");
    }
    if (lower_value_dtype(g, s) != IR_DTYPE_F32) return cu_unsupported(c, "with a non-f32 scale");
    uint32_t r, rs;
    int64_t d[IR_MAX_RANK], ds[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, x, &r, d);
    lower_value_shape(g, s, &rs, ds);
    QCtx p = {y, x, s, quant, ir_shape_numel(rs, ds) > 1, 1, 1};
    if (p.per_ch) {
        bool found;
        int64_t axis = ir_shape_axis(ir_node_attr_int(g, n, "axis", &found), r);
        if (!found || axis < 0 || axis >= (int64_t)r || d[axis] != ir_shape_numel(rs, ds))
            return cu_unsupported(c, "with this scale layout");
        p.ch = d[axis];
        p.inner = ir_shape_numel(r - (uint32_t)axis - 1, d + axis + 1);
    }
    int64_t total = ir_shape_numel(r, d);
    if (!total) return IR_OK;
    uint32_t slots[3] = {y, x, s};
    IrStatus st_ = cu_kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, q_body, &p);
    return cu_kend(c, total, NULL);
}

/* tail scratch: CUDA-only temporaries after the planned workspace (steps run in order, so one
 * region as large as the largest need serves every node) */

/* irtool.fp8_matmul [M,K] x [K,N]: on sm_89+ with per-tensor a_scale, K and N multiples of 16:
 * B is transposed to [N,K] (tail scratch) and cuBLASLt runs an E4M3 GEMM with f32 output, the
 * scalar scales as its A/B scale pointers (a per-channel b_scale and the bias follow as a kernel).
 * Otherwise (sm_80 or other shapes): both operands are dequantized to f32 in the tail scratch
 * and multiplied with an f32 GEMM, as the interpreter does. */
typedef struct Fp8Epi {
    uint32_t y, bs, bias;
    bool per_col, have_bias;
    int64_t n, nbias;
} Fp8Epi;

static void fp8_epi_body(Cu *c, LLVMValueRef *o, void *user) {
    Fp8Epi *p = user;
    LLVMValueRef col = LLVMBuildURem(c->b, o[0], ci(c, p->n), "");
    LLVMValueRef v = ld(c, c->f32, pslot(c, p->y), o[0]);
    if (p->per_col) v = LLVMBuildFMul(c->b, v, ld(c, c->f32, pslot(c, p->bs), col), "");
    if (p->have_bias) {
        LLVMValueRef bi = p->nbias == 1 ? ci(c, 0) : LLVMBuildURem(c->b, col, ci(c, p->nbias), "");
        v = LLVMBuildFAdd(c->b, v, ld(c, c->f32, pslot(c, p->bias), bi), "");
    }
    st(c, c->f32, pslot(c, p->y), o[0], v);
}

typedef struct DqCtx {
    uint32_t y, x, s;
    int64_t n, ns; /* scale index: ns == 1 ? 0 : (i / div) % ns */
    int64_t div;
    bool transpose; /* y[j*K + kk] = x[kk*N + j] (B -> [N,K]) */
    int64_t k;
} DqCtx;

static void dq_body(Cu *c, LLVMValueRef *o, void *user) {
    DqCtx *p = user;
    LLVMValueRef v = f8_decode(c, ld(c, c->i8, pslot(c, p->x), o[0]));
    if (p->s) {
        LLVMValueRef si = p->ns == 1 ? ci(c, 0) : LLVMBuildURem(c->b, LLVMBuildUDiv(c->b, o[0], ci(c, p->div), ""), ci(c, p->ns), "");
        v = LLVMBuildFMul(c->b, v, ld(c, c->f32, pslot(c, p->s), si), "");
    }
    st(c, c->f32, pslot(c, p->y), o[0], v);
}

/* Byte transpose y[N, K] = x[K, N]^T through 32x32 tiles in shared memory (one block of 32x8
 * threads per tile, 4 rows each), so that both the reads and the writes of a warp touch 32
 * consecutive bytes. */
static IrStatus transpose_bytes_kernel(Cu *c, uint32_t y, uint32_t x, int64_t k, int64_t n) {
    uint32_t slots[2] = {y, x};
    IrStatus s = cu_kbegin(c, slots, 2, 256, true);
    if (s) return s;
    LLVMBuilderRef b = c->b;
    LLVMTypeRef at = LLVMArrayType2(c->i8, 32 * 33);
    LLVMValueRef tile = LLVMAddGlobalInAddressSpace(c->mod, at, "", 3);
    LLVMSetInitializer(tile, LLVMGetUndef(at));
    LLVMSetLinkage(tile, LLVMInternalLinkage);
    int64_t tn = (n + 31) / 32, tk = (k + 31) / 32;
    LLVMValueRef blk = cu_sreg(c, "llvm.nvvm.read.ptx.sreg.ctaid.x"), tid = cu_sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x");
    LLVMValueRef t_n = LLVMBuildURem(b, blk, ci(c, tn), ""), t_k = LLVMBuildUDiv(b, blk, ci(c, tn), "");
    LLVMValueRef tx = LLVMBuildURem(b, tid, ci(c, 32), ""), ty = LLVMBuildUDiv(b, tid, ci(c, 32), "");
    LLVMValueRef z = c32(c, 0);
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < 4; r++) {
            LLVMValueRef rr = LLVMBuildAdd(b, ty, ci(c, 8 * r), "");
            /* pass 0: tile[rr][tx] = x[t_k*32 + rr, t_n*32 + tx]; pass 1: y[t_n*32 + rr, t_k*32 + tx] = tile[tx][rr] */
            LLVMValueRef row = LLVMBuildAdd(b, LLVMBuildMul(b, pass ? t_n : t_k, ci(c, 32), ""), rr, "");
            LLVMValueRef col = LLVMBuildAdd(b, LLVMBuildMul(b, pass ? t_k : t_n, ci(c, 32), ""), tx, "");
            LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, row, ci(c, pass ? n : k), ""),
                                           LLVMBuildICmp(b, LLVMIntULT, col, ci(c, pass ? k : n), ""), "");
            LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "in"),
                              join = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "join");
            LLVMBuildCondBr(b, ok, yes, join);
            LLVMPositionBuilderAtEnd(b, yes);
            LLVMValueRef gi = LLVMBuildAdd(b, LLVMBuildMul(b, row, ci(c, pass ? k : n), ""), col, "");
            LLVMValueRef si[2] = {z, LLVMBuildZExtOrBitCast(b, pass ? LLVMBuildAdd(b, LLVMBuildMul(b, tx, ci(c, 33), ""), rr, "")
                                                                    : LLVMBuildAdd(b, LLVMBuildMul(b, rr, ci(c, 33), ""), tx, ""),
                                                           c->i32, "")};
            LLVMValueRef sp = LLVMBuildGEP2(b, at, tile, si, 2, "");
            if (pass == 0) LLVMBuildStore(b, ld(c, c->i8, pslot(c, x), gi), sp);
            else st(c, c->i8, pslot(c, y), gi, LLVMBuildLoad2(b, c->i8, sp, ""));
            LLVMBuildBr(b, join);
            LLVMPositionBuilderAtEnd(b, join);
        }
        if (!pass) cu_intr(c, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
    }
    return cu_kend(c, tn * tk, NULL);
}

static IrStatus gen_fp8_matmul(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vas = ir_node_operand(g, n, 2),
              vbs = ir_node_operand(g, n, 3), vy = ir_node_result(g, n, 0);
    IrValueId vbias = ir_node_num_operands(g, n) > 4 ? ir_node_operand(g, n, 4) : 0;
    if (lower_value_dtype(g, va) != IR_DTYPE_F8E4M3FN || lower_value_dtype(g, vb) != IR_DTYPE_F8E4M3FN)
        return cu_unsupported(c, "on a format other than e4m3fn");
    if (lower_value_dtype(g, vy) != IR_DTYPE_F32) return cu_unsupported(c, "with out_dtype other than f32");
    uint32_t ra, rb, rs;
    int64_t da[IR_MAX_RANK], db[IR_MAX_RANK], dsa[IR_MAX_RANK], dsb[IR_MAX_RANK], dbias[IR_MAX_RANK];
    lower_value_shape(g, va, &ra, da);
    lower_value_shape(g, vb, &rb, db);
    if (ra < 2 || rb != 2) return cu_unsupported(c, "with a weight of rank other than 2 or a vector input");
    /* leading dims of A fold into M (A is contiguous, B shared); per-row scales repeat per matrix */
    int64_t m = ir_shape_numel(ra - 1, da), mrow = da[ra - 2], k = da[ra - 1], nn = db[1];
    if (db[0] != k || k == 0) return cu_unsupported(c, "with these shapes");
    lower_value_shape(g, vas, &rs, dsa);
    int64_t nas = ir_shape_numel(rs, dsa);
    lower_value_shape(g, vbs, &rs, dsb);
    int64_t nbs = ir_shape_numel(rs, dsb), nbias = 0;
    if (vbias) {
        lower_value_shape(g, vbias, &rs, dbias);
        nbias = ir_shape_numel(rs, dbias);
        if (lower_value_dtype(g, vbias) != IR_DTYPE_F32 || (nbias != 1 && nbias != nn)) return cu_unsupported(c, "with this bias");
    }
    if (lower_value_dtype(g, vas) != IR_DTYPE_F32 || lower_value_dtype(g, vbs) != IR_DTYPE_F32 || (nas != 1 && nas != mrow) ||
        (nbs != 1 && nbs != nn))
        return cu_unsupported(c, "with these scales");
    if (m * nn == 0) return IR_OK;
    uint32_t tail = c->m->tail_slot;
    int64_t s1[1][IR_MAX_RANK] = {{1}}, total;
    IrStatus st_;
    bool tensor_core = c->sm >= 89 && nas == 1 && k % 16 == 0 && nn % 16 == 0;
    if (tensor_core) {
        /* a constant B is laid out as [N, K] now; a computed one by a kernel in the tail scratch */
        const uint8_t *bd = lower_value_const_data(g, vb);
        uint32_t bslot = tail;
        if (bd) {
            IrArtifactConst *x = realloc(c->m->extra, (c->m->n_extra + 1) * sizeof *x);
            if (x) c->m->extra = x;
            IrValueId *xo = x ? realloc(c->m->extra_of, (c->m->n_extra + 1) * sizeof *xo) : NULL;
            if (xo) c->m->extra_of = xo;
            uint8_t *t = xo ? malloc((size_t)(k * nn)) : NULL;
            if (!t) return IR_ENOMEM;
            xo[c->m->n_extra] = vb;
            for (int64_t kk = 0; kk < k; kk++)
                for (int64_t j = 0; j < nn; j++) t[j * k + kk] = bd[kk * nn + j];
            bslot = c->m->tail_slot + 1 + c->m->n_extra;
            x[c->m->n_extra++] = (IrArtifactConst){bslot, t, (size_t)(k * nn)};
        } else {
            cu_tail_need(c, k * nn);
            if ((st_ = transpose_bytes_kernel(c, tail, vb, k, nn))) return st_;
        }
        CuGemm gm = {.dt = "e4m3", .ta = 0, .tb = 1, .m = m, .n = nn, .k = k, .lda = k, .ldb = k, .ldc = nn, .batch = 1,
                     .alpha = 1.0, .a = {va, 0}, .b = {bslot, 0}, .c = {vy, 0}, .as_slot = vas,
                     .bs_slot = nbs == 1 ? vbs : 0};
        if ((st_ = cu_push_gemm(c, &gm))) return st_;
    } else {
        /* f32 copies of A (scaled per row or tensor) and B (scaled per column or tensor) */
        int64_t a_bytes = (m * k * 4 + 255) / 256 * 256;
        cu_tail_need(c, a_bytes + k * nn * 4);
        for (int which = 0; which < 2; which++) {
            DqCtx p = {.y = tail, .x = which ? vb : va, .s = which ? vbs : vas};
            p.ns = which ? nbs : nas;
            p.div = which ? 1 : k;
            if (which) p.n = nn;
            total = which ? k * nn : m * k;
            uint32_t slots[3] = {tail, p.x, p.s};
            if ((st_ = cu_kbegin(c, slots, 3, CU_BLOCK, false))) return st_;
            cu_emit_nest(c, 1, &total, 1, s1, NULL, dq_body, &p);
            int64_t offs[3] = {which ? a_bytes : 0, 0, 0};
            if ((st_ = cu_kend(c, total, offs))) return st_;
        }
        CuGemm gm = {.dt = "f32", .m = m, .n = nn, .k = k, .lda = k, .ldb = nn, .ldc = nn, .batch = 1, .alpha = 1.0,
                     .a = {tail, 0}, .b = {tail, a_bytes}, .c = {vy, 0}};
        if ((st_ = cu_push_gemm(c, &gm))) return st_;
        nbs = 1; /* already applied */
    }
    if (nbs == 1 && !vbias) return IR_OK;
    Fp8Epi p = {vy, vbs, vbias ? vbias : vy, nbs != 1, vbias != 0, nn, nbias};
    uint32_t slots[3] = {vy, vbs, vbias ? vbias : vy};
    total = m * nn;
    if ((st_ = cu_kbegin(c, slots, 3, CU_BLOCK, false))) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, fp8_epi_body, &p);
    return cu_kend(c, total, NULL);
}


/* ---- rows of backend/cuda/cuda_ops.def ---- */

IrStatus cuda_emit_quant(Cu *c) { return gen_quant(c, ir_node_op(c->g, c->node) == IR_OP_QUANTIZE_FP8); }
IrStatus cuda_emit_fp8_matmul(Cu *c) { return gen_fp8_matmul(c); }

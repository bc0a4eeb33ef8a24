/* Signal ops: HannWindow, HammingWindow, BlackmanWindow, DFT, STFT, MelWeightMatrix and Range,
 * one emitter each for static and run-time shapes (llvm/dims.h). The scalars a kernel reads (window
 * size, dft_length, frame_step, frame_length, num_mel_bins, start/limit/delta) must give its output
 * shape, else the run fails with the got and the expected size. Windows and DFT twiddles of a
 * constant length are tables made at compile time, else the kernel computes them with the same
 * formulas (the interpreter's, validate/k_misc.c), in double; the DFT is its naive one.
 */
#include "backend/cpu/cpu.h"
#include "backend/runtime/abi.h"
#include "ir/kernels_shared.h"

bool llvm_ops_signal_claims(IrOp op) {
    return op == IR_OP_HANN_WINDOW || op == IR_OP_HAMMING_WINDOW || op == IR_OP_BLACKMAN_WINDOW || op == IR_OP_DFT ||
           op == IR_OP_STFT || op == IR_OP_MEL_WEIGHT_MATRIX || op == IR_OP_RANGE;
}

/* ---- run-time checks ------------------------------------------------------------------------- */

static LLVMValueRef icmp(LlvmEmit *e, LLVMIntPredicate p, LLVMValueRef a, int64_t c) {
    return LLVMBuildICmp(e->b, p, a, lo_i64(e, c), "");
}

/* Writes the decimal digits of v (i64) at buf + pos; the position after them. */
static LLVMValueRef put_i64(LlvmEmit *e, LLVMValueRef buf, LLVMValueRef pos, LLVMValueRef v) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef i8 = lo_i8_t(e), i64 = lo_i64_t(e);
    LLVMValueRef neg = icmp(e, LLVMIntSLT, v, 0);
    LLVMBuildStore(b, LLVMConstInt(i8, '-', 0), lo_gep(e, i8, buf, pos));
    pos = LLVMBuildAdd(b, pos, LLVMBuildZExt(b, neg, i64, ""), "");
    LLVMValueRef tmp = LLVMBuildAlloca(e->ab, LLVMArrayType2(i8, 20), "");
    LLVMValueRef u = lo_var(e, i64, LLVMBuildSelect(b, neg, LLVMBuildNeg(b, v, ""), v, "")); /* unsigned from here */
    LLVMValueRef nd = lo_var(e, i64, lo_i64(e, 1));
    LoLoop l;
    lo_loop_begin(e, &l, 20);
    LLVMValueRef x = LLVMBuildLoad2(b, i64, u, "");
    LLVMValueRef dig = LLVMBuildAdd(b, LLVMBuildURem(b, x, lo_i64(e, 10), ""), lo_i64(e, '0'), "");
    LLVMBuildStore(b, LLVMBuildTrunc(b, dig, i8, ""), lo_gep(e, i8, tmp, LLVMBuildSub(b, lo_i64(e, 19), l.iv, "")));
    LLVMValueRef more = icmp(e, LLVMIntNE, x, 0);
    LLVMBuildStore(b, LLVMBuildSelect(b, more, LLVMBuildAdd(b, l.iv, lo_i64(e, 1), ""), LLVMBuildLoad2(b, i64, nd, ""), ""), nd);
    LLVMBuildStore(b, LLVMBuildUDiv(b, x, lo_i64(e, 10), ""), u);
    lo_loop_end(e, &l);
    LLVMValueRef n = LLVMBuildLoad2(b, i64, nd, "");
    LLVMBuildMemCpy(b, lo_gep(e, i8, buf, pos), 1, lo_gep(e, i8, tmp, LLVMBuildSub(b, lo_i64(e, 20), n, "")), 1, n);
    return LLVMBuildAdd(b, pos, n, "");
}

/* Fails the run when cond holds, with the message txt[0] val[0] txt[1] ... val[nv - 1] txt[nv]
 * (val: i64). */
static void fail_vals(LlvmEmit *e, LLVMValueRef cond, const char *const *txt, const LLVMValueRef *val, int nv) {
    size_t cap = 1 + 21 * (size_t)nv;
    for (int i = 0; i <= nv; i++) cap += strlen(txt[i]);
    LLVMBasicBlockRef after = lo_if_begin(e, cond);
    LLVMBuilderRef b = e->b;
    LLVMValueRef buf = LLVMBuildAlloca(e->ab, LLVMArrayType2(lo_i8_t(e), cap), ""), pos = lo_i64(e, 0);
    for (int i = 0; i <= nv; i++) {
        int64_t nt = (int64_t)strlen(txt[i]);
        LLVMBuildMemCpy(b, lo_gep(e, lo_i8_t(e), buf, pos), 1, LLVMBuildGlobalStringPtr(b, txt[i], "msg"), 1,
                        lo_i64(e, nt + (i == nv)));
        pos = LLVMBuildAdd(b, pos, lo_i64(e, nt), "");
        if (i < nv) pos = put_i64(e, buf, pos, val[i]);
    }
    LLVMValueRef args[2] = {lo_buf(e, lower_sym_slot(e->g) + 1), buf};
    lo_call_runtime(e, IRT_FN_FAIL, NULL, args, 2);
    lo_if_end(e, after);
}

/* Fails the run when cond holds with the message pre, the value got (i64), post. */
static void fail_got(LlvmEmit *e, LLVMValueRef cond, const char *pre, LLVMValueRef got, const char *post) {
    fail_vals(e, cond, (const char *[]){pre, post}, &got, 1);
}

/* Fails the run when got (i64) is not the output's size want (cw: its constant, -1 when known at
 * run time only): "PRE got UNIT, expected want (the ... output shape)". */
static void check_size(LlvmEmit *e, const char *pre, LLVMValueRef got, const char *unit, LLVMValueRef want, int64_t cw) {
    char post[128];
    LLVMValueRef bad = LLVMBuildICmp(e->b, LLVMIntNE, got, want, "");
    if (cw >= 0) {
        snprintf(post, sizeof post, "%s, expected %lld (the compiled output shape)", unit, (long long)cw);
        fail_got(e, bad, pre, got, post);
        return;
    }
    snprintf(post, sizeof post, "%s, expected ", unit);
    LLVMValueRef v[2] = {got, want};
    fail_vals(e, bad, (const char *[]){pre, post, " (the output shape)"}, v, 2);
}

/* pre followed by text, in out. */
static const char *msg(char *out, size_t cap, const char *pre, const char *text) {
    snprintf(out, cap, "%s%s", pre, text);
    return out;
}

/* The constant value of i64 v, or -1 when it is known at run time only. */
static int64_t const_of(LLVMValueRef v) { return LLVMIsAConstantInt(v) ? LLVMConstIntGetSExtValue(v) : -1; }

/* "Op %name: " of the node's first result. */
static void who(const LlvmEmit *e, char *out, size_t cap) {
    snprintf(out, cap, "%s %%%s: ", ir_op_name(ir_node_op(e->g, e->node)), ir_value_name(e->g, ir_node_result(e->g, e->node, 0)));
}

/* Whether optional operand v is absent or empty (a dim the constant 0), as the interpreter reads it. */
static bool absent(LlvmEmit *e, IrValueId v) {
    LlvmDims s;
    if (!v || !llvm_dims_of(e, v, &s)) return !v;
    for (uint32_t k = 0; k < s.rank; k++)
        if (s.cd[k] == 0) return true;
    return false;
}

/* Whether v is a one-element integer tensor (read by load_int). */
static bool int_scalar(LlvmEmit *e, IrValueId v) {
    if (!v) return false;
    IrDType dt = lo_dtype(e, v);
    return !lo_is_float(dt) && dt != IR_DTYPE_BOOL && lo_store_t(e, dt) && lower_value_nbytes(e->g, v) == ir_dtype_size(dt);
}

/* The one element of integer tensor v as i64 (as the interpreter's interp_get_i). */
static LLVMValueRef load_int(LlvmEmit *e, IrValueId v) { return lo_load_int(e, lo_dtype(e, v), lo_buf(e, v), lo_i64(e, 0)); }

/* Whether x equals none of the n candidates. */
static LLVMValueRef none_of(LlvmEmit *e, LLVMValueRef x, const int64_t *cand, int n) {
    LLVMValueRef bad = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 1, 0);
    for (int i = 0; i < n; i++) bad = LLVMBuildAnd(e->b, bad, icmp(e, LLVMIntNE, x, cand[i]), "");
    return bad;
}

/* ", expected A (or B) (the compiled output shape)" for the candidates. */
static void expected(char *out, size_t cap, const int64_t *cand, int n) {
    if (n == 1)
        snprintf(out, cap, ", expected %lld (the compiled output shape)", (long long)cand[0]);
    else
        snprintf(out, cap, ", expected %lld or %lld (the compiled output shape)", (long long)cand[0], (long long)cand[1]);
}

/* ---- windows --------------------------------------------------------------------------------- */

/* cos(x * k / N) in f64. */
static LLVMValueRef cos_of(LlvmEmit *e, LLVMValueRef x, double k, LLVMValueRef N) {
    LLVMValueRef t = LLVMBuildFDiv(e->b, LLVMBuildFMul(e->b, x, LLVMConstReal(lo_f64_t(e), k), ""), N, "");
    return lo_intrinsic(e, "llvm.cos", lo_f64_t(e), &t, 1);
}

/* Window value at x (f64) for N (f64): ir_window_value's operations in its order. */
static LLVMValueRef window_value(LlvmEmit *e, int kind, LLVMValueRef x, LLVMValueRef N) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    if (kind == 2) {
        LLVMValueRef t = LLVMBuildFDiv(b, LLVMBuildFMul(b, x, LLVMConstReal(f64, M_PI), ""), N, "");
        LLVMValueRef s = lo_intrinsic(e, "llvm.sin", f64, &t, 1);
        return LLVMBuildFMul(b, s, s, "");
    }
    if (kind == 1) {
        double alpha = 25.0 / 46.0;
        LLVMValueRef t = LLVMBuildFMul(b, LLVMBuildFMul(b, x, LLVMConstReal(f64, M_PI), ""), LLVMConstReal(f64, 2), "");
        t = LLVMBuildFDiv(b, t, N, "");
        LLVMValueRef c = lo_intrinsic(e, "llvm.cos", f64, &t, 1);
        return LLVMBuildFSub(b, LLVMConstReal(f64, alpha), LLVMBuildFMul(b, c, LLVMConstReal(f64, 1 - alpha), ""), "");
    }
    LLVMValueRef c2 = LLVMBuildFMul(b, cos_of(e, x, M_PI * 2, N), LLVMConstReal(f64, -0.5), "");
    LLVMValueRef c4 = LLVMBuildFMul(b, cos_of(e, x, M_PI * 4, N), LLVMConstReal(f64, 0.08), "");
    return LLVMBuildFAdd(b, LLVMBuildFAdd(b, c2, c4, ""), LLVMConstReal(f64, 0.42), "");
}

/* The window of the interpreter's window_run: a table made now for a constant size, else
 * computed in the kernel. */
static IrStatus gen_window(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrOp op = ir_node_op(g, n);
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrDType dt = lo_dtype(e, y);
    size_t es = ir_dtype_size(dt);
    LlvmDims sy;
    if (!llvm_dims_of(e, y, &sy) || sy.rank != 1) return llvm_ops_refuse(e, "with this output shape");
    if (dt == IR_DTYPE_STRING || es == 0) return llvm_ops_refuse(e, "with this output_datatype");
    if (!int_scalar(e, x)) return llvm_ops_refuse(e, "with a size that is not an integer scalar");
    int64_t len = sy.cd[0];
    if (len < 0 && !lo_is_float(dt))
        return llvm_ops_refuse(e, "with an integer output_datatype and a size known at run time only");
    bool periodic = ir_node_attr_int(g, n, "periodic", NULL) != 0;
    int kind = op == IR_OP_HANN_WINDOW ? 2 : op == IR_OP_HAMMING_WINDOW ? 1 : 0;
    char pre[160], m[200];
    who(e, pre, sizeof pre);
    check_size(e, msg(m, sizeof m, pre, "the window size is "), load_int(e, x), "", sy.dim[0], len);
    if (len == 0) return IR_OK;
    LLVMBuilderRef b = e->b;
    if (len < 0) { /* known at run time only */
        LLVMValueRef nw = periodic ? sy.dim[0] : LLVMBuildSub(b, sy.dim[0], lo_i64(e, 1), "");
        LLVMValueRef N = LLVMBuildSIToFP(b, nw, lo_f64_t(e), ""), yb = lo_buf(e, y);
        LlvmLoop l;
        llvm_loop_n(e, &l, sy.dim[0]);
        LLVMValueRef w = window_value(e, kind, LLVMBuildSIToFP(b, l.iv, lo_f64_t(e), ""), N);
        lo_store(e, dt, yb, l.iv, lo_from_f64(e, w, dt));
        llvm_loop_end(b, e->fn, &l);
        return IR_OK;
    }
    unsigned char *data = malloc((size_t)len * es);
    if (!data) return IR_ENOMEM;
    double N = periodic ? (double)len : (double)(len - 1);
    for (int64_t i = 0; i < len; i++) ir_elem_set_f64(dt, data, (size_t)i, ir_window_value(kind, i, N)); /* as the interpreter */
    LLVMValueRef tab = lo_const_bytes(e, data, (size_t)len * es, "window");
    LLVMBuildMemCpy(b, lo_buf(e, y), 1, tab, 8, lo_i64(e, len * (int64_t)es));
    free(data);
    return IR_OK;
}

/* ---- DFT ------------------------------------------------------------------------------------- */

/* One naive DFT as validate/k_misc.c's dft1: length n, m samples read (m <= n; zero beyond),
 * bins outputs (i64 values); twiddle j = k * t mod n from the tables ct, st when n is a constant,
 * else computed. load gives sample t (re and, for complex input, im as f64); store takes bin k. */
typedef struct DftSeq {
    LLVMValueRef n, m, bins, ct, st;
    bool inverse;
    void (*load)(LlvmEmit *e, void *user, LLVMValueRef t, LLVMValueRef *re, LLVMValueRef *im);
    void (*store)(LlvmEmit *e, void *user, LLVMValueRef k, LLVMValueRef re, LLVMValueRef im);
    void *user;
} DftSeq;

/* The twiddle tables of a constant length n (ct, st NULL otherwise). */
static IrStatus twiddles(LlvmEmit *e, LLVMValueRef nv, bool inverse, LLVMValueRef *ct, LLVMValueRef *st) {
    int64_t n = const_of(nv);
    *ct = *st = NULL;
    if (n < 1) return IR_OK;
    LLVMValueRef *c = malloc((size_t)n * sizeof *c), *s = malloc((size_t)n * sizeof *s);
    if (!c || !s) {
        free(c), free(s);
        return IR_ENOMEM;
    }
    for (int64_t j = 0; j < n; j++) {
        double ang = 2 * M_PI * (double)j / (double)n;
        if (!inverse) ang = -ang;
        c[j] = LLVMConstReal(lo_f64_t(e), cos(ang));
        s[j] = LLVMConstReal(lo_f64_t(e), sin(ang));
    }
    *ct = lo_const_array(e, lo_f64_t(e), c, (uint64_t)n, "dft.cos");
    *st = lo_const_array(e, lo_f64_t(e), s, (uint64_t)n, "dft.sin");
    free(c), free(s);
    return IR_OK;
}

/* Twiddle j of q from its tables (j = k * t mod n). */
static void twiddle(LlvmEmit *e, const DftSeq *q, LLVMValueRef j, LLVMValueRef *c, LLVMValueRef *s) {
    LLVMTypeRef f64 = lo_f64_t(e);
    *c = LLVMBuildLoad2(e->b, f64, lo_gep(e, f64, q->ct, j), "");
    *s = LLVMBuildLoad2(e->b, f64, lo_gep(e, f64, q->st, j), "");
}

/* The loops over bins and samples for one sequence (its offsets are in the caller's user). Without
 * tables (a length known at run time only) bin k's twiddles are the powers of its root
 * e^(-+2 pi i k / n), one cos and sin a bin, multiplied up in double (the error grows as t * 1e-16,
 * far below f32's). vars: the sums (re, im), the table index, the running twiddle (re, im). */
static void dft_seq(LlvmEmit *e, const DftSeq *q, LLVMValueRef *vars) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e), i64 = lo_i64_t(e);
    LlvmLoop lk, lt;
    llvm_loop_n(e, &lk, q->bins);
    LLVMBuildStore(b, LLVMConstReal(f64, 0), vars[0]);
    LLVMBuildStore(b, LLVMConstReal(f64, 0), vars[1]);
    LLVMValueRef rc = NULL, rs = NULL;
    if (q->ct) {
        LLVMBuildStore(b, lo_i64(e, 0), vars[2]);
    } else {
        LLVMValueRef ang = LLVMBuildFMul(b, LLVMConstReal(f64, 2 * M_PI), LLVMBuildSIToFP(b, lk.iv, f64, ""), "");
        ang = LLVMBuildFDiv(b, ang, LLVMBuildSIToFP(b, q->n, f64, ""), "");
        if (!q->inverse) ang = LLVMBuildFNeg(b, ang, "");
        rc = lo_intrinsic(e, "llvm.cos", f64, &ang, 1);
        rs = lo_intrinsic(e, "llvm.sin", f64, &ang, 1);
        LLVMBuildStore(b, LLVMConstReal(f64, 1), vars[3]);
        LLVMBuildStore(b, LLVMConstReal(f64, 0), vars[4]);
    }
    if (const_of(q->m) != 0) {
        llvm_loop_n(e, &lt, q->m);
        LLVMValueRef j = NULL, c, s;
        if (q->ct) {
            j = LLVMBuildLoad2(b, i64, vars[2], "");
            twiddle(e, q, j, &c, &s);
        } else {
            c = LLVMBuildLoad2(b, f64, vars[3], ""), s = LLVMBuildLoad2(b, f64, vars[4], "");
            LLVMBuildStore(b, LLVMBuildFSub(b, LLVMBuildFMul(b, c, rc, ""), LLVMBuildFMul(b, s, rs, ""), ""), vars[3]);
            LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildFMul(b, c, rs, ""), LLVMBuildFMul(b, s, rc, ""), ""), vars[4]);
        }
        LLVMValueRef xr, xi = NULL;
        q->load(e, q->user, lt.iv, &xr, &xi);
        LLVMValueRef dr = LLVMBuildFMul(b, xr, c, ""), di = LLVMBuildFMul(b, xr, s, "");
        if (xi) {
            dr = LLVMBuildFSub(b, dr, LLVMBuildFMul(b, xi, s, ""), "");
            di = LLVMBuildFAdd(b, di, LLVMBuildFMul(b, xi, c, ""), "");
        }
        LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, vars[0], ""), dr, ""), vars[0]);
        LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, vars[1], ""), di, ""), vars[1]);
        if (q->ct) {
            LLVMValueRef jn = LLVMBuildAdd(b, j, lk.iv, ""); /* k < n and j < n: one subtraction wraps it */
            LLVMValueRef wrap = LLVMBuildICmp(b, LLVMIntSGE, jn, q->n, "");
            LLVMBuildStore(b, LLVMBuildSelect(b, wrap, LLVMBuildSub(b, jn, q->n, ""), jn, ""), vars[2]);
        }
        llvm_loop_end(b, e->fn, &lt);
    }
    LLVMValueRef sr = LLVMBuildLoad2(b, f64, vars[0], ""), si = LLVMBuildLoad2(b, f64, vars[1], "");
    if (q->inverse) {
        LLVMValueRef nf = LLVMBuildSIToFP(b, q->n, f64, "");
        sr = LLVMBuildFDiv(b, sr, nf, "");
        si = LLVMBuildFDiv(b, si, nf, "");
    }
    q->store(e, q->user, lk.iv, sr, si);
    llvm_loop_end(b, e->fn, &lk);
}

static LLVMValueRef *dft_vars(LlvmEmit *e, LLVMValueRef *vars) {
    for (int i = 0; i < 5; i++) vars[i] = LLVMBuildAlloca(e->ab, i == 2 ? lo_i64_t(e) : lo_f64_t(e), "");
    return vars;
}

/* The smaller of two i64 values. */
static LLVMValueRef min_i64(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, b, ""), a, b, "");
}

/* The bins of a DFT of length n: n / 2 + 1 when onesided. */
static LLVMValueRef bins_of(LlvmEmit *e, LLVMValueRef n, bool onesided) {
    return onesided ? LLVMBuildAdd(e->b, LLVMBuildSDiv(e->b, n, lo_i64(e, 2), ""), lo_i64(e, 1), "") : n;
}

/* The DFT lengths whose bins give `bins`: the one asked, or the two a onesided output allows;
 * among them those in [1, hi]. Returns how many (0-2). */
static int dft_lengths(int64_t asked, int64_t bins, bool onesided, int64_t hi, int64_t *cand) {
    int64_t c[2];
    int nc = 0, k = 0;
    if (asked > 0)
        c[nc++] = asked;
    else if (onesided)
        c[nc++] = 2 * (bins - 1), c[nc++] = 2 * bins - 1;
    else
        c[nc++] = bins;
    for (int i = 0; i < nc; i++)
        if (c[i] >= 1 && c[i] <= hi && (onesided ? c[i] / 2 + 1 : c[i]) == bins) cand[k++] = c[i];
    return k;
}

typedef struct DftAt {
    IrDType dt;
    LLVMValueRef cw; /* i64: 1 (real) or 2 (complex) input elements a sample */
    LLVMValueRef x, y, xbase, ybase;
    LLVMValueRef tstride, kstride; /* elements between samples, between output bins */
} DftAt;

static void dft_load(LlvmEmit *e, void *user, LLVMValueRef t, LLVMValueRef *re, LLVMValueRef *im) {
    DftAt *a = user;
    LLVMValueRef off = LLVMBuildAdd(e->b, a->xbase, LLVMBuildMul(e->b, t, a->tstride, ""), "");
    *re = lo_to_f64(e, lo_load(e, a->dt, a->x, off));
    int64_t cw = const_of(a->cw);
    if (cw == 1) return;
    /* complex, or known at run time only: the imaginary part, or 0 read from the real one */
    LLVMValueRef v = lo_to_f64(e, lo_load(e, a->dt, a->x, LLVMBuildAdd(e->b, off, LLVMBuildSub(e->b, a->cw, lo_i64(e, 1), ""), "")));
    *im = cw == 2 ? v : LLVMBuildSelect(e->b, icmp(e, LLVMIntEQ, a->cw, 2), v, LLVMConstReal(lo_f64_t(e), 0), "");
}

static void dft_store(LlvmEmit *e, void *user, LLVMValueRef k, LLVMValueRef re, LLVMValueRef im) {
    DftAt *a = user;
    LLVMValueRef off = LLVMBuildAdd(e->b, a->ybase, LLVMBuildMul(e->b, k, a->kstride, ""), "");
    lo_store(e, a->dt, a->y, off, lo_from_f64(e, re, a->dt));
    lo_store(e, a->dt, a->y, LLVMBuildAdd(e->b, off, lo_i64(e, 1), ""), lo_from_f64(e, im, a->dt));
}

/* X [outer, n_in, inner, 1|2] -> Y [outer, bins, inner, 2], DFT length n (i64 values). */
static IrStatus dft_body(LlvmEmit *e, DftAt *a, LLVMValueRef outer, LLVMValueRef inner, LLVMValueRef n_in, LLVMValueRef n,
                         LLVMValueRef bins, bool inverse) {
    LLVMValueRef vars[5];
    DftSeq q = {n, min_i64(e, n_in, n), bins, NULL, NULL, inverse, dft_load, dft_store, a};
    IrStatus s = twiddles(e, n, inverse, &q.ct, &q.st);
    if (s) return s;
    dft_vars(e, vars);
    LLVMBuilderRef b = e->b;
    LLVMValueRef cw = a->cw, two = lo_i64(e, 2);
    a->tstride = LLVMBuildMul(b, inner, cw, ""), a->kstride = LLVMBuildMul(b, inner, two, "");
    LLVMValueRef xrow = LLVMBuildMul(b, n_in, a->tstride, ""), yrow = LLVMBuildMul(b, bins, a->kstride, "");
    LlvmLoop lo, lq;
    llvm_loop_n(e, &lo, outer);
    llvm_loop_n(e, &lq, inner);
    a->xbase = LLVMBuildAdd(b, LLVMBuildMul(b, lo.iv, xrow, ""), LLVMBuildMul(b, lq.iv, cw, ""), "");
    a->ybase = LLVMBuildAdd(b, LLVMBuildMul(b, lo.iv, yrow, ""), LLVMBuildMul(b, lq.iv, two, ""), "");
    dft_seq(e, &q, vars);
    llvm_loop_end(b, e->fn, &lq);
    llvm_loop_end(b, e->fn, &lo);
    return IR_OK;
}

/* Whether any of the values is the constant 0 (the output is empty: nothing to compute). */
static bool some_zero(const LLVMValueRef *v, int n) {
    for (int i = 0; i < n; i++)
        if (const_of(v[i]) == 0) return true;
    return false;
}

static IrStatus gen_dft(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrValueId vl = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    if (absent(e, vl)) vl = 0;
    DftAt a = {.dt = lo_dtype(e, x)};
    LlvmDims sx, sy;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy) || sx.rank < 2 || sy.rank != sx.rank ||
        (sx.cd[sx.rank - 1] != 1 && sx.cd[sx.rank - 1] != 2 && sx.cd[sx.rank - 1] != -1) || sy.cd[sy.rank - 1] != 2)
        return llvm_ops_refuse(e, "with these shapes");
    uint32_t r = sx.rank;
    if (!lo_is_float(a.dt) || lo_dtype(e, y) != a.dt) return llvm_ops_refuse(e, "on non-float tensors");
    int64_t axis = ir_shape_axis(ir_node_attr_int(g, n, "axis", NULL), r);
    if (axis < 0 || axis >= (int64_t)r - 1) return llvm_ops_refuse(e, "with this axis");
    bool inverse = ir_node_attr_int(g, n, "inverse", NULL) != 0, onesided = ir_node_attr_int(g, n, "onesided", NULL) != 0;
    for (uint32_t i = 0; i < r - 1; i++)
        if (i != axis && sy.ex[i] != sx.ex[i]) return llvm_ops_refuse(e, "with these shapes");
    if (vl && !int_scalar(e, vl)) return llvm_ops_refuse(e, "with a dft_length that is not an integer scalar");
    const void *ld = vl ? lower_value_const_data(g, vl) : NULL;
    LLVMValueRef bins = sy.dim[axis], n_in = sx.dim[axis];
    LLVMValueRef outer = llvm_dims_prod(e, &sx, 0, (uint32_t)axis), inner = llvm_dims_prod(e, &sx, (uint32_t)axis + 1, r - 1);
    int64_t cbins = sy.cd[axis];
    a.cw = sx.dim[r - 1];
    a.x = lo_buf(e, x), a.y = lo_buf(e, y);
    char pre[160], m[200], post[96];
    who(e, pre, sizeof pre);
    if (sx.cd[r - 1] < 0) { /* real or complex: known at run time only */
        LLVMValueRef bad = LLVMBuildAnd(e->b, icmp(e, LLVMIntNE, a.cw, 1), icmp(e, LLVMIntNE, a.cw, 2), "");
        fail_got(e, bad, msg(m, sizeof m, pre, "the input's last dim is "), a.cw, ", expected 1 (real) or 2 (complex)");
    }
    if (vl && !ld && cbins >= 0) { /* given at run time, the bins compiled: one of the lengths giving them */
        int64_t cand[2];
        int nc = dft_lengths(0, cbins, onesided, INT32_MAX, cand);
        if (nc == 0) return llvm_ops_refuse(e, "with a dft_length that does not give the output shape");
        expected(post, sizeof post, cand, nc);
        LLVMValueRef len = load_int(e, vl);
        fail_got(e, none_of(e, len, cand, nc), msg(m, sizeof m, pre, "dft_length is "), len, post);
        if (some_zero((LLVMValueRef[]){outer, inner, bins}, 3)) return IR_OK;
        for (int i = 0; i < nc; i++) {
            LLVMBasicBlockRef after = nc > 1 ? lo_if_begin(e, icmp(e, LLVMIntEQ, len, cand[i])) : NULL;
            IrStatus s = dft_body(e, &a, outer, inner, n_in, lo_i64(e, cand[i]), bins, inverse);
            if (s) return s;
            if (after) lo_if_end(e, after);
        }
        return IR_OK;
    }
    LLVMValueRef len = !vl ? n_in : ld ? lo_i64(e, ir_elem_get_i64(lo_dtype(e, vl), ld, 0)) : load_int(e, vl);
    int64_t clen = const_of(len);
    if (!vl && clen == 0) return llvm_ops_refuse(e, "on an empty signal");
    if (vl && ld && clen < 1) return llvm_ops_refuse(e, "with a dft_length below 1");
    if (clen < 0) /* known at run time only */
        fail_got(e, icmp(e, LLVMIntSLT, len, 1), msg(m, sizeof m, pre, vl ? "dft_length is " : "the signal length is "), len,
                 ", expected a positive value");
    if (clen >= 0 && cbins >= 0) {
        int64_t cand[2];
        if (dft_lengths(clen, cbins, onesided, INT32_MAX, cand) == 0)
            return llvm_ops_refuse(e, "with a dft_length that does not give the output shape");
    } else {
        check_size(e, msg(m, sizeof m, pre, vl ? "dft_length gives " : "the signal length gives "), bins_of(e, len, onesided),
                   " bins", bins, cbins);
    }
    if (some_zero((LLVMValueRef[]){outer, inner, bins}, 3)) return IR_OK;
    return dft_body(e, &a, outer, inner, n_in, len, bins, inverse);
}

/* ---- STFT ------------------------------------------------------------------------------------ */

typedef struct StftAt {
    IrDType dt, wdt;
    LLVMValueRef len, bins, cw; /* i64: the signal's length, the bins of a frame, 1 (real) or 2 (complex) */
    LLVMValueRef x, w, y, step, xbase, ybase, f; /* w NULL: no window */
} StftAt;

/* Sample t of frame f, windowed: zero past the signal's end (the read stays in bounds). */
static void stft_load(LlvmEmit *e, void *user, LLVMValueRef t, LLVMValueRef *re, LLVMValueRef *im) {
    StftAt *a = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef pos = LLVMBuildAdd(b, LLVMBuildMul(b, a->f, a->step, ""), t, "");
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntULT, pos, a->len, "");
    LLVMValueRef off = LLVMBuildSelect(b, in, LLVMBuildAdd(b, a->xbase, LLVMBuildMul(b, pos, a->cw, ""), ""), a->xbase, "");
    LLVMValueRef w = a->w ? lo_to_f64(e, lo_load(e, a->wdt, a->w, t)) : NULL, zero = LLVMConstReal(f64, 0);
    LLVMValueRef v = lo_to_f64(e, lo_load(e, a->dt, a->x, off));
    *re = LLVMBuildSelect(b, in, w ? LLVMBuildFMul(b, v, w, "") : v, zero, "");
    int64_t cw = const_of(a->cw);
    if (cw == 1) return;
    /* complex, or known at run time only: the imaginary part, or 0 read from the real one */
    v = lo_to_f64(e, lo_load(e, a->dt, a->x, LLVMBuildAdd(b, off, LLVMBuildSub(b, a->cw, lo_i64(e, 1), ""), "")));
    LLVMValueRef is_im = cw == 2 ? in : LLVMBuildAnd(b, in, icmp(e, LLVMIntEQ, a->cw, 2), "");
    *im = LLVMBuildSelect(b, is_im, w ? LLVMBuildFMul(b, v, w, "") : v, zero, "");
}

static void stft_store(LlvmEmit *e, void *user, LLVMValueRef k, LLVMValueRef re, LLVMValueRef im) {
    StftAt *a = user;
    LLVMValueRef off = LLVMBuildAdd(e->b, a->ybase, LLVMBuildMul(e->b, k, lo_i64(e, 2), ""), "");
    lo_store(e, a->dt, a->y, off, lo_from_f64(e, re, a->dt));
    lo_store(e, a->dt, a->y, LLVMBuildAdd(e->b, off, lo_i64(e, 1), ""), lo_from_f64(e, im, a->dt));
}

/* Every frame of every batch for frame length fl, window length wl (i64 values). */
static IrStatus stft_body(LlvmEmit *e, StftAt *a, LLVMValueRef batch, LLVMValueRef frames, LLVMValueRef fl, LLVMValueRef wl) {
    LLVMValueRef vars[5];
    DftSeq q = {fl, min_i64(e, wl, fl), a->bins, NULL, NULL, false, stft_load, stft_store, a};
    IrStatus s = twiddles(e, fl, false, &q.ct, &q.st);
    if (s) return s;
    dft_vars(e, vars);
    LLVMBuilderRef b = e->b;
    LLVMValueRef xrow = LLVMBuildMul(b, a->len, a->cw, ""), yrow = LLVMBuildMul(b, a->bins, lo_i64(e, 2), "");
    LlvmLoop lb, lf;
    llvm_loop_n(e, &lb, batch);
    llvm_loop_n(e, &lf, frames);
    a->f = lf.iv;
    a->xbase = LLVMBuildMul(b, lb.iv, xrow, "");
    a->ybase = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, lb.iv, frames, ""), lf.iv, ""), yrow, "");
    dft_seq(e, &q, vars);
    llvm_loop_end(b, e->fn, &lf);
    llvm_loop_end(b, e->fn, &lb);
    return IR_OK;
}

static IrStatus gen_stft(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    uint32_t no = ir_node_num_operands(g, n);
    IrValueId x = ir_node_operand(g, n, 0), vs = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId vw = no > 2 ? ir_node_operand(g, n, 2) : 0, vf = no > 3 ? ir_node_operand(g, n, 3) : 0;
    if (absent(e, vw)) vw = 0;
    if (absent(e, vf)) vf = 0;
    StftAt a = {.dt = lo_dtype(e, x)};
    LlvmDims sx, sy, sw;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy) || sx.rank != 3 || (sx.cd[2] != 1 && sx.cd[2] != 2 && sx.cd[2] != -1) ||
        sy.rank != 4 || sy.ex[0] != sx.ex[0] || sy.cd[3] != 2 || (vw && !llvm_dims_of(e, vw, &sw)))
        return llvm_ops_refuse(e, "with these shapes");
    if (!lo_is_float(a.dt) || lo_dtype(e, y) != a.dt || (vw && !lo_is_float(lo_dtype(e, vw))))
        return llvm_ops_refuse(e, "on non-float tensors");
    if (!int_scalar(e, vs) || (vf && !int_scalar(e, vf)))
        return llvm_ops_refuse(e, "with a frame_step or frame_length that is not an integer scalar");
    bool onesided = ir_node_attr_int(g, n, "onesided", NULL) != 0;
    LLVMValueRef wl = vw ? llvm_dims_prod(e, &sw, 0, sw.rank) : NULL, frames = sy.dim[1];
    a.len = sx.dim[1], a.bins = sy.dim[2], a.cw = sx.dim[2];
    int64_t clen = sx.cd[1], cbins = sy.cd[2], cand[2];
    const void *fd = vf ? lower_value_const_data(g, vf) : NULL;
    char pre[160], m[200], post[96];
    who(e, pre, sizeof pre);
    if (sx.cd[2] < 0) { /* real or complex: known at run time only */
        LLVMValueRef bad = LLVMBuildAnd(e->b, icmp(e, LLVMIntNE, a.cw, 1), icmp(e, LLVMIntNE, a.cw, 2), "");
        fail_got(e, bad, msg(m, sizeof m, pre, "the signal's last dim is "), a.cw, ", expected 1 (real) or 2 (complex)");
    }
    a.step = load_int(e, vs);
    fail_got(e, icmp(e, LLVMIntSLT, a.step, 1), msg(m, sizeof m, pre, "frame_step is "), a.step, ", expected a positive value");
    int nc = 0;
    LLVMValueRef fl;
    if (vf && !fd && clen >= 0 && cbins >= 0) { /* given at run time, the bins compiled: one of the lengths giving them */
        nc = dft_lengths(0, cbins, onesided, clen, cand);
        if (nc == 0) return llvm_ops_refuse(e, "with a frame_length that does not give the output shape");
        fl = load_int(e, vf);
        expected(post, sizeof post, cand, nc);
        fail_got(e, none_of(e, fl, cand, nc), msg(m, sizeof m, pre, "frame_length is "), fl, post);
    } else {
        fl = !vf ? (vw ? wl : a.len) : fd ? lo_i64(e, ir_elem_get_i64(lo_dtype(e, vf), fd, 0)) : load_int(e, vf);
        int64_t cfl = const_of(fl);
        if (vf && fd && cfl < 1) return llvm_ops_refuse(e, "with a frame_length below 1");
        if (cfl >= 0 && clen >= 0 && cbins >= 0) {
            if (dft_lengths(cfl, cbins, onesided, clen, cand) == 0)
                return llvm_ops_refuse(e, "with a frame_length that does not give the output shape");
        } else { /* known at run time only */
            LLVMValueRef bad = LLVMBuildOr(e->b, icmp(e, LLVMIntSLT, fl, 1), LLVMBuildICmp(e->b, LLVMIntSGT, fl, a.len, ""), "");
            LLVMValueRef v[2] = {fl, a.len};
            fail_vals(e, bad, (const char *[]){msg(m, sizeof m, pre, "frame_length is "), ", expected 1 to ", " (the signal length)"},
                      v, 2);
            check_size(e, msg(m, sizeof m, pre, "frame_length gives "), bins_of(e, fl, onesided), " bins", a.bins, cbins);
        }
    }
    LLVMBuilderRef b = e->b;
    LLVMValueRef step1 = LLVMBuildSelect(b, icmp(e, LLVMIntSLT, a.step, 1), lo_i64(e, 1), a.step, "");
    LLVMValueRef got = LLVMBuildAdd(b, LLVMBuildSDiv(b, LLVMBuildSub(b, a.len, fl, ""), step1, ""), lo_i64(e, 1), "");
    check_size(e, msg(m, sizeof m, pre, "frame_step and frame_length give "), got, " frames", frames, sy.cd[1]);
    a.x = lo_buf(e, x), a.y = lo_buf(e, y), a.w = vw ? lo_buf(e, vw) : NULL, a.wdt = vw ? lo_dtype(e, vw) : a.dt;
    if (some_zero((LLVMValueRef[]){sy.dim[0], frames, a.bins}, 3)) return IR_OK;
    if (nc == 0) return stft_body(e, &a, sy.dim[0], frames, fl, vw ? wl : fl);
    for (int i = 0; i < nc; i++) {
        LLVMBasicBlockRef after = nc > 1 ? lo_if_begin(e, icmp(e, LLVMIntEQ, fl, cand[i])) : NULL;
        IrStatus s = stft_body(e, &a, sy.dim[0], frames, lo_i64(e, cand[i]), vw ? wl : lo_i64(e, cand[i]));
        if (s) return s;
        if (after) lo_if_end(e, after);
    }
    return IR_OK;
}

/* ---- MelWeightMatrix ------------------------------------------------------------------------- */

/* i64 of an f64 value, saturating (NaN: 0), so a bad sample rate gives no poison. */
static LLVMValueRef f64_to_i64(LlvmEmit *e, LLVMValueRef v) {
    LLVMTypeRef ts[2] = {lo_i64_t(e), lo_f64_t(e)};
    unsigned id = LLVMLookupIntrinsicID("llvm.fptosi.sat", 15);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->mod, id, ts, 2);
    return LLVMBuildCall2(e->b, LLVMIntrinsicGetType(e->ctx, id, ts, 2), f, &v, 1, "");
}

typedef struct Mel {
    LLVMValueRef lo_mel, step, dft1, sr; /* f32, f32, f64 (dft_length + 1), f64 */
} Mel;

/* Edge bin i of the interpreter's filters: floor((dft + 1) * hz(i) / sr). */
static LLVMValueRef mel_bin(LlvmEmit *e, const Mel *m, LLVMValueRef i) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef f = LLVMBuildFAdd(b, LLVMBuildFMul(b, LLVMBuildSIToFP(b, i, f64, ""), LLVMBuildFPExt(b, m->step, f64, ""), ""),
                                   LLVMBuildFPExt(b, m->lo_mel, f64, ""), "");
    LLVMValueRef pa[2] = {LLVMConstReal(f64, 10.0), LLVMBuildFDiv(b, f, LLVMConstReal(f64, 2595.0), "")};
    LLVMValueRef p = lo_intrinsic(e, "llvm.pow", f64, pa, 2);
    f = LLVMBuildFMul(b, LLVMConstReal(f64, 700.0), LLVMBuildFSub(b, p, LLVMConstReal(f64, 1.0), ""), "");
    LLVMValueRef q = LLVMBuildFDiv(b, LLVMBuildFMul(b, m->dft1, f, ""), m->sr, "");
    return f64_to_i64(e, lo_intrinsic(e, "llvm.floor", f64, &q, 1));
}

/* 2595 * log10(1 + hz / 700) in f32, as the interpreter. */
static LLVMValueRef to_mel(LlvmEmit *e, LLVMValueRef hz) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f32 = lo_f32_t(e);
    LLVMValueRef v = LLVMBuildFAdd(b, LLVMConstReal(f32, 1.0), LLVMBuildFDiv(b, hz, LLVMConstReal(f32, 700.0), ""), "");
    return LLVMBuildFMul(b, LLVMConstReal(f32, 2595.0), lo_intrinsic(e, "llvm.log10", f32, &v, 1), "");
}

static LLVMValueRef sel(LlvmEmit *e, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(e->b, c, a, b, "");
}

/* Column i: w[j] = ramp up over [l, c] (1 at c when l == c), then down over [c, h). */
static void mel_column(LlvmEmit *e, const Mel *m, LLVMValueRef i, IrDType dt, LLVMValueRef y, LLVMValueRef nspec, LLVMValueRef nmel) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef l = mel_bin(e, m, i), c = mel_bin(e, m, LLVMBuildAdd(b, i, lo_i64(e, 1), ""));
    LLVMValueRef h = mel_bin(e, m, LLVMBuildAdd(b, i, lo_i64(e, 2), ""));
    LLVMValueRef cl = LLVMBuildSIToFP(b, LLVMBuildSub(b, c, l, ""), f64, ""),
                 hc = LLVMBuildSIToFP(b, LLVMBuildSub(b, h, c, ""), f64, "");
    LlvmLoop lj;
    llvm_loop_n(e, &lj, nspec);
    LLVMValueRef j = lj.iv, zero = LLVMConstReal(f64, 0);
    LLVMValueRef up = LLVMBuildFDiv(b, LLVMBuildSIToFP(b, LLVMBuildSub(b, j, l, ""), f64, ""), cl, "");
    LLVMValueRef in_up = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLE, l, j, ""), LLVMBuildICmp(b, LLVMIntSLE, j, c, ""), "");
    LLVMValueRef flat = LLVMBuildICmp(b, LLVMIntEQ, c, l, "");
    LLVMValueRef w =
        sel(e, flat, sel(e, LLVMBuildICmp(b, LLVMIntEQ, j, c, ""), LLVMConstReal(f64, 1), zero), sel(e, in_up, up, zero));
    LLVMValueRef down = LLVMBuildFDiv(b, LLVMBuildSIToFP(b, LLVMBuildSub(b, h, j, ""), f64, ""), hc, "");
    LLVMValueRef in_down =
        LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGT, h, c, ""),
                     LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLE, c, j, ""), LLVMBuildICmp(b, LLVMIntSLT, j, h, ""), ""), "");
    w = sel(e, in_down, down, w);
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, j, nmel, ""), i, "");
    lo_store(e, dt, y, off, lo_from_f64(e, w, dt));
    llvm_loop_end(b, e->fn, &lj);
}

static IrStatus gen_mel(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId y = ir_node_result(g, n, 0), in[5];
    for (uint32_t i = 0; i < 5; i++) in[i] = ir_node_operand(g, n, i);
    IrDType dt = lo_dtype(e, y);
    LlvmDims sy;
    if (!llvm_dims_of(e, y, &sy) || sy.rank != 2) return llvm_ops_refuse(e, "with this output shape");
    if (!lo_is_float(dt)) return llvm_ops_refuse(e, "with a non-float output_datatype");
    if (sy.cd[0] == 0 || sy.cd[1] == 0) return llvm_ops_refuse(e, "with an empty output");
    if (!int_scalar(e, in[0]) || !int_scalar(e, in[1]) || !int_scalar(e, in[2]))
        return llvm_ops_refuse(e, "with num_mel_bins, dft_length or sample_rate not an integer scalar");
    for (int i = 3; i < 5; i++)
        if (!lo_is_float(lo_dtype(e, in[i])) || lower_value_nbytes(g, in[i]) != ir_dtype_size(lo_dtype(e, in[i])))
            return llvm_ops_refuse(e, "with edge frequencies that are not float scalars");
    LLVMValueRef nspec = sy.dim[0], nmel = sy.dim[1];
    LLVMBuilderRef b = e->b;
    LLVMValueRef vm = load_int(e, in[0]), vd = load_int(e, in[1]), vr = load_int(e, in[2]);
    char pre[160], m[200], post[96];
    who(e, pre, sizeof pre);
    check_size(e, msg(m, sizeof m, pre, "num_mel_bins is "), vm, "", nmel, sy.cd[1]);
    msg(m, sizeof m, pre, "dft_length is ");
    if (sy.cd[0] >= 0) {
        int64_t dfts[2] = {2 * (sy.cd[0] - 1), 2 * sy.cd[0] - 1};
        const int64_t *dc = dfts[0] >= 1 ? dfts : dfts + 1; /* one bin: dft_length 1 only */
        int ndc = dfts[0] >= 1 ? 2 : 1;
        expected(post, sizeof post, dc, ndc);
        fail_got(e, none_of(e, vd, dc, ndc), m, vd, post);
    } else { /* known at run time only: dft_length / 2 + 1 bins */
        LLVMValueRef bad = LLVMBuildOr(b, icmp(e, LLVMIntSLT, vd, 1), LLVMBuildICmp(b, LLVMIntNE, bins_of(e, vd, true), nspec, ""), "");
        LLVMValueRef v[2] = {vd, nspec};
        fail_vals(e, bad, (const char *[]){m, ", expected one that gives ", " bins (the output shape)"}, v, 2);
    }
    fail_got(e, icmp(e, LLVMIntSLT, vr, 1), msg(m, sizeof m, pre, "sample_rate is "), vr, ", expected a positive value");
    if (some_zero((LLVMValueRef[]){nspec, nmel}, 2)) return IR_OK;
    LLVMTypeRef f32 = lo_f32_t(e), f64 = lo_f64_t(e);
    LLVMValueRef lo = lo_load(e, lo_dtype(e, in[3]), lo_buf(e, in[3]), lo_i64(e, 0));
    LLVMValueRef hi = lo_load(e, lo_dtype(e, in[4]), lo_buf(e, in[4]), lo_i64(e, 0));
    if (LLVMTypeOf(lo) != f32) lo = LLVMBuildFPTrunc(b, lo, f32, "");
    if (LLVMTypeOf(hi) != f32) hi = LLVMBuildFPTrunc(b, hi, f32, "");
    Mel mm = {.lo_mel = to_mel(e, lo)};
    LLVMValueRef parts = LLVMBuildSIToFP(b, LLVMBuildAdd(b, nmel, lo_i64(e, 2), ""), f32, "");
    mm.step = LLVMBuildFDiv(b, LLVMBuildFSub(b, to_mel(e, hi), mm.lo_mel, ""), parts, "");
    mm.dft1 = LLVMBuildSIToFP(b, LLVMBuildAdd(b, vd, lo_i64(e, 1), ""), f64, "");
    mm.sr = LLVMBuildSIToFP(b, vr, f64, "");
    LLVMValueRef yb = lo_buf(e, y);
    LlvmLoop li;
    llvm_loop_n(e, &li, nmel);
    mel_column(e, &mm, li.iv, dt, yb, nspec, nmel);
    llvm_loop_end(b, e->fn, &li);
    return IR_OK;
}

/* ---- Range ----------------------------------------------------------------------------------- */

/* start + i * delta for the output's length, after checking that start, limit and delta give it:
 * ceil((limit - start) / delta) in f64 for floats, the interpreter's unsigned count for
 * integers. */
static IrStatus gen_range(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId y = ir_node_result(g, n, 0), in[3];
    IrDType dt = lo_dtype(e, y);
    LlvmDims sy;
    if (!llvm_dims_of(e, y, &sy) || sy.rank != 1) return llvm_ops_refuse(e, "with this output shape");
    bool fl = lo_is_float(dt);
    if (!fl && dt != IR_DTYPE_I8 && dt != IR_DTYPE_I16 && dt != IR_DTYPE_I32 && dt != IR_DTYPE_I64)
        return llvm_ops_refuse(e, "on this dtype (floats, signed integers)");
    for (uint32_t i = 0; i < 3; i++) {
        in[i] = ir_node_operand(g, n, i);
        if (lo_dtype(e, in[i]) != dt || lower_value_nbytes(g, in[i]) != ir_dtype_size(dt))
            return llvm_ops_refuse(e, "with start, limit or delta not a scalar of the output's dtype");
    }
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e), i64 = lo_i64_t(e);
    LLVMValueRef v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = lo_load(e, dt, lo_buf(e, in[i]), lo_i64(e, 0));
        v[i] = fl ? lo_to_f64(e, v[i]) : LLVMBuildSExtOrBitCast(b, v[i], i64, "");
    }
    char pre[160];
    who(e, pre, sizeof pre);
    size_t np = strlen(pre);
    LLVMValueRef got;
    if (fl) {
        LLVMValueRef inf = LLVMConstReal(f64, INFINITY), bad = LLVMBuildFCmp(b, LLVMRealOEQ, v[2], LLVMConstReal(f64, 0), "");
        for (int i = 0; i < 3; i++) /* not finite (NaN included) */
            bad = LLVMBuildOr(b, bad, LLVMBuildFCmp(b, LLVMRealUGE, lo_intrinsic(e, "llvm.fabs", f64, &v[i], 1), inf, ""), "");
        strncat(pre, "start, limit and delta must be finite, delta nonzero", sizeof pre - np - 1);
        lo_fail_if(e, bad, pre);
        LLVMValueRef q = LLVMBuildFDiv(b, LLVMBuildFSub(b, v[1], v[0], ""), v[2], "");
        LLVMValueRef c = lo_intrinsic(e, "llvm.ceil", f64, &q, 1);
        got = sel(e, LLVMBuildFCmp(b, LLVMRealOGT, c, LLVMConstReal(f64, 0), ""), f64_to_i64(e, c), lo_i64(e, 0));
    } else {
        LLVMValueRef dz = icmp(e, LLVMIntEQ, v[2], 0);
        strncat(pre, "delta is zero", sizeof pre - np - 1);
        lo_fail_if(e, dz, pre);
        LLVMValueRef pos = icmp(e, LLVMIntSGT, v[2], 0);
        LLVMValueRef span = sel(e, pos, LLVMBuildSub(b, v[1], v[0], ""), LLVMBuildSub(b, v[0], v[1], "")); /* wraps as u64 */
        LLVMValueRef step = sel(e, pos, v[2], LLVMBuildNeg(b, v[2], ""));
        step = sel(e, dz, lo_i64(e, 1), step);
        LLVMValueRef cnt = LLVMBuildUDiv(b, LLVMBuildSub(b, LLVMBuildAdd(b, span, step, ""), lo_i64(e, 1), ""), step, "");
        LLVMValueRef some =
            sel(e, pos, LLVMBuildICmp(b, LLVMIntSGT, v[1], v[0], ""), LLVMBuildICmp(b, LLVMIntSGT, v[0], v[1], ""));
        got = sel(e, some, cnt, lo_i64(e, 0));
    }
    pre[np] = 0;
    strncat(pre, "start, limit and delta give ", sizeof pre - np - 1);
    check_size(e, pre, got, " elements", sy.dim[0], sy.cd[0]);
    if (sy.cd[0] == 0) return IR_OK;
    LLVMValueRef yb = lo_buf(e, y);
    LlvmLoop l;
    llvm_loop_n(e, &l, sy.dim[0]);
    LLVMValueRef x;
    if (fl) {
        x = LLVMBuildFAdd(b, v[0], LLVMBuildFMul(b, LLVMBuildSIToFP(b, l.iv, f64, ""), v[2], ""), "");
        x = lo_from_f64(e, x, dt);
    } else {
        x = LLVMBuildAdd(b, v[0], LLVMBuildMul(b, l.iv, v[2], ""), "");
        x = LLVMBuildTruncOrBitCast(b, x, lo_store_t(e, dt), "");
    }
    lo_store(e, dt, yb, l.iv, x);
    llvm_loop_end(b, e->fn, &l);
    return IR_OK;
}

IrStatus llvm_ops_window_gen(LlvmEmit *e) { return gen_window(e); }
IrStatus llvm_ops_dft_gen(LlvmEmit *e) { return gen_dft(e); }
IrStatus llvm_ops_stft_gen(LlvmEmit *e) { return gen_stft(e); }
IrStatus llvm_ops_mel_gen(LlvmEmit *e) { return gen_mel(e); }
IrStatus llvm_ops_range_gen(LlvmEmit *e) { return gen_range(e); }

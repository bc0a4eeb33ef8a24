/* Signal ops on the static path: HannWindow, HammingWindow, BlackmanWindow, DFT, STFT,
 * MelWeightMatrix, and Range whose inputs come at run time. The output shape is static, so the
 * kernel is compiled for it and checks at run time that the scalars it reads (window size,
 * dft_length, frame_step, frame_length, num_mel_bins, start/limit/delta) give exactly that
 * shape, failing the run with the expected and the got size otherwise. Windows and DFT twiddles
 * are tables computed at compile time with the interpreter's formulas (validate/k_misc.c); the
 * DFT is its naive one, in double. A length the output leaves open (onesided: n / 2 + 1 bins
 * come from two n) is compiled for both candidates, and the run picks one.
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

/* Fails the run when cond holds with the message pre, the value got (i64), post. */
static void fail_got(LlvmEmit *e, LLVMValueRef cond, const char *pre, LLVMValueRef got, const char *post) {
    size_t np = strlen(pre), nq = strlen(post);
    LLVMBasicBlockRef after = lo_if_begin(e, cond);
    LLVMBuilderRef b = e->b;
    LLVMValueRef buf = LLVMBuildAlloca(e->ab, LLVMArrayType2(lo_i8_t(e), np + nq + 24), "");
    LLVMBuildMemCpy(b, buf, 1, LLVMBuildGlobalStringPtr(b, pre, "msg"), 1, lo_i64(e, (int64_t)np));
    LLVMValueRef pos = put_i64(e, buf, lo_i64(e, (int64_t)np), got);
    LLVMBuildMemCpy(b, lo_gep(e, lo_i8_t(e), buf, pos), 1, LLVMBuildGlobalStringPtr(b, post, "msg"), 1,
                    lo_i64(e, (int64_t)nq + 1));
    LLVMValueRef args[2] = {lo_buf(e, lower_sym_slot(e->g) + 1), buf};
    lo_call_runtime(e, IRT_FN_FAIL, NULL, args, 2);
    lo_if_end(e, after);
}

/* "Op %name: " of the node's first result. */
static void who(const LlvmEmit *e, char *out, size_t cap) {
    snprintf(out, cap, "%s %%%s: ", ir_op_name(ir_node_op(e->g, e->node)), ir_value_name(e->g, ir_node_result(e->g, e->node, 0)));
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

/* The window of the interpreter's window_run, computed here and copied into the output. */
static IrStatus gen_window(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrOp op = ir_node_op(g, n);
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrDType dt = lo_dtype(e, y);
    size_t es = ir_dtype_size(dt);
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    if (!lower_value_shape(g, y, &r, d) || r != 1) return llvm_ops_refuse(e, "with this output shape");
    if (dt == IR_DTYPE_STRING || es == 0) return llvm_ops_refuse(e, "with this output_datatype");
    if (!int_scalar(e, x)) return llvm_ops_refuse(e, "with a size that is not an integer scalar");
    int64_t len = d[0];
    unsigned char *data = malloc((size_t)(len ? len : 1) * es);
    if (!data) return IR_ENOMEM;
    double N = ir_node_attr_int(g, n, "periodic", NULL) != 0 ? (double)len : (double)(len - 1);
    int kind = op == IR_OP_HANN_WINDOW ? 2 : op == IR_OP_HAMMING_WINDOW ? 1 : 0;
    for (int64_t i = 0; i < len; i++) ir_elem_set_f64(dt, data, (size_t)i, ir_window_value(kind, i, N)); /* as the interpreter */
    char pre[160], post[96];
    who(e, pre, sizeof pre);
    strncat(pre, "the window size is ", sizeof pre - strlen(pre) - 1);
    expected(post, sizeof post, &len, 1);
    LLVMValueRef size = load_int(e, x);
    fail_got(e, icmp(e, LLVMIntNE, size, len), pre, size, post);
    if (len > 0) {
        LLVMValueRef tab = lo_const_bytes(e, data, (size_t)len * es, "window");
        LLVMBuildMemCpy(e->b, lo_buf(e, y), 1, tab, 8, lo_i64(e, len * (int64_t)es));
    }
    free(data);
    return IR_OK;
}

/* ---- DFT ------------------------------------------------------------------------------------- */

/* One naive DFT as validate/k_misc.c's dft1: length n, m samples read (m <= n; zero beyond),
 * bins outputs; twiddle j = k * t mod n from tables made here. load gives sample t (re and, for
 * complex input, im as f64); store takes bin k. */
typedef struct DftSeq {
    int64_t n, m, bins;
    bool inverse, cplx;
    void (*load)(LlvmEmit *e, void *user, LLVMValueRef t, LLVMValueRef *re, LLVMValueRef *im);
    void (*store)(LlvmEmit *e, void *user, LLVMValueRef k, LLVMValueRef re, LLVMValueRef im);
    void *user;
} DftSeq;

static IrStatus twiddles(LlvmEmit *e, int64_t n, bool inverse, LLVMValueRef *ct, LLVMValueRef *st) {
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

/* The loops over bins and samples for one sequence (its offsets are in the caller's user). */
static void dft_seq(LlvmEmit *e, const DftSeq *q, LLVMValueRef ct, LLVMValueRef st, LLVMValueRef *vars) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e), i64 = lo_i64_t(e);
    LoLoop lk, lt;
    lo_loop_begin(e, &lk, q->bins);
    LLVMBuildStore(b, LLVMConstReal(f64, 0), vars[0]);
    LLVMBuildStore(b, LLVMConstReal(f64, 0), vars[1]);
    LLVMBuildStore(b, lo_i64(e, 0), vars[2]);
    if (q->m > 0) {
        lo_loop_begin(e, &lt, q->m);
        LLVMValueRef j = LLVMBuildLoad2(b, i64, vars[2], "");
        LLVMValueRef c = LLVMBuildLoad2(b, f64, lo_gep(e, f64, ct, j), "");
        LLVMValueRef s = LLVMBuildLoad2(b, f64, lo_gep(e, f64, st, j), "");
        LLVMValueRef xr, xi = NULL;
        q->load(e, q->user, lt.iv, &xr, &xi);
        LLVMValueRef dr = LLVMBuildFMul(b, xr, c, ""), di = LLVMBuildFMul(b, xr, s, "");
        if (xi) {
            dr = LLVMBuildFSub(b, dr, LLVMBuildFMul(b, xi, s, ""), "");
            di = LLVMBuildFAdd(b, di, LLVMBuildFMul(b, xi, c, ""), "");
        }
        LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, vars[0], ""), dr, ""), vars[0]);
        LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, f64, vars[1], ""), di, ""), vars[1]);
        LLVMValueRef jn = LLVMBuildAdd(b, j, lk.iv, ""); /* k < n and j < n: one subtraction wraps it */
        LLVMValueRef wrap = icmp(e, LLVMIntSGE, jn, q->n);
        LLVMBuildStore(b, LLVMBuildSelect(b, wrap, LLVMBuildSub(b, jn, lo_i64(e, q->n), ""), jn, ""), vars[2]);
        lo_loop_end(e, &lt);
    }
    LLVMValueRef sr = LLVMBuildLoad2(b, f64, vars[0], ""), si = LLVMBuildLoad2(b, f64, vars[1], "");
    if (q->inverse) {
        sr = LLVMBuildFDiv(b, sr, LLVMConstReal(f64, (double)q->n), "");
        si = LLVMBuildFDiv(b, si, LLVMConstReal(f64, (double)q->n), "");
    }
    q->store(e, q->user, lk.iv, sr, si);
    lo_loop_end(e, &lk);
}

static LLVMValueRef *dft_vars(LlvmEmit *e, LLVMValueRef *vars) {
    vars[0] = LLVMBuildAlloca(e->ab, lo_f64_t(e), "");
    vars[1] = LLVMBuildAlloca(e->ab, lo_f64_t(e), "");
    vars[2] = LLVMBuildAlloca(e->ab, lo_i64_t(e), "");
    return vars;
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
    bool cplx;
    LLVMValueRef x, y, xbase, ybase;
    int64_t tstride, kstride; /* elements between samples, between output bins */
} DftAt;

static void dft_load(LlvmEmit *e, void *user, LLVMValueRef t, LLVMValueRef *re, LLVMValueRef *im) {
    DftAt *a = user;
    LLVMValueRef off = LLVMBuildAdd(e->b, a->xbase, LLVMBuildMul(e->b, t, lo_i64(e, a->tstride), ""), "");
    *re = lo_to_f64(e, lo_load(e, a->dt, a->x, off));
    if (a->cplx) *im = lo_to_f64(e, lo_load(e, a->dt, a->x, LLVMBuildAdd(e->b, off, lo_i64(e, 1), "")));
}

static void dft_store(LlvmEmit *e, void *user, LLVMValueRef k, LLVMValueRef re, LLVMValueRef im) {
    DftAt *a = user;
    LLVMValueRef off = LLVMBuildAdd(e->b, a->ybase, LLVMBuildMul(e->b, k, lo_i64(e, a->kstride), ""), "");
    lo_store(e, a->dt, a->y, off, lo_from_f64(e, re, a->dt));
    lo_store(e, a->dt, a->y, LLVMBuildAdd(e->b, off, lo_i64(e, 1), ""), lo_from_f64(e, im, a->dt));
}

/* X [outer, n_in, inner, 1|2] -> Y [outer, bins, inner, 2], DFT length n. */
static IrStatus dft_body(LlvmEmit *e, DftAt *a, int64_t outer, int64_t inner, int64_t n_in, int64_t n, int64_t bins,
                         bool inverse) {
    LLVMValueRef ct, st, vars[3];
    IrStatus s = twiddles(e, n, inverse, &ct, &st);
    if (s) return s;
    dft_vars(e, vars);
    DftSeq q = {n, n_in < n ? n_in : n, bins, inverse, a->cplx, dft_load, dft_store, a};
    int64_t cw = a->cplx ? 2 : 1;
    a->tstride = inner * cw, a->kstride = inner * 2;
    LoLoop lo, lq;
    lo_loop_begin(e, &lo, outer);
    lo_loop_begin(e, &lq, inner);
    LLVMBuilderRef b = e->b;
    a->xbase =
        LLVMBuildAdd(b, LLVMBuildMul(b, lo.iv, lo_i64(e, n_in * inner * cw), ""), LLVMBuildMul(b, lq.iv, lo_i64(e, cw), ""), "");
    a->ybase =
        LLVMBuildAdd(b, LLVMBuildMul(b, lo.iv, lo_i64(e, bins * inner * 2), ""), LLVMBuildMul(b, lq.iv, lo_i64(e, 2), ""), "");
    dft_seq(e, &q, ct, st, vars);
    lo_loop_end(e, &lq);
    lo_loop_end(e, &lo);
    return IR_OK;
}

static IrStatus gen_dft(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrValueId vl = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    if (vl && lower_value_nbytes(g, vl) == 0) vl = 0; /* empty: absent, as the interpreter reads it */
    DftAt a = {.dt = lo_dtype(e, x)};
    uint32_t r, ry;
    int64_t d[IR_MAX_RANK], dy[IR_MAX_RANK];
    if (!lower_value_shape(g, x, &r, d) || !lower_value_shape(g, y, &ry, dy) || r < 2 || ry != r ||
        (d[r - 1] != 1 && d[r - 1] != 2))
        return llvm_ops_refuse(e, "with these shapes");
    if (!lo_is_float(a.dt) || lo_dtype(e, y) != a.dt) return llvm_ops_refuse(e, "on non-float tensors");
    int64_t axis = ir_shape_axis(ir_node_attr_int(g, n, "axis", NULL), r);
    if (axis < 0 || axis >= (int64_t)r - 1) return llvm_ops_refuse(e, "with this axis");
    bool inverse = ir_node_attr_int(g, n, "inverse", NULL) != 0, onesided = ir_node_attr_int(g, n, "onesided", NULL) != 0;
    int64_t bins = dy[axis], n_in = d[axis], outer = ir_shape_numel((uint32_t)axis, d), inner = 1;
    for (uint32_t i = (uint32_t)axis + 1; i < r - 1; i++) inner *= d[i];
    for (uint32_t i = 0; i < r - 1; i++)
        if (i != axis && dy[i] != d[i]) return llvm_ops_refuse(e, "with these shapes");
    if (dy[r - 1] != 2) return llvm_ops_refuse(e, "with these shapes");
    if (vl && !int_scalar(e, vl)) return llvm_ops_refuse(e, "with a dft_length that is not an integer scalar");
    const void *ld = vl ? lower_value_const_data(g, vl) : NULL;
    if (!vl && n_in < 1) return llvm_ops_refuse(e, "on an empty signal");
    int64_t asked = !vl ? n_in : ld ? ir_elem_get_i64(lo_dtype(e, vl), ld, 0) : 0, cand[2];
    if (vl && ld && asked < 1) return llvm_ops_refuse(e, "with a dft_length below 1");
    int nc = dft_lengths(asked, bins, onesided, INT32_MAX, cand);
    if (nc == 0) return llvm_ops_refuse(e, "with a dft_length that does not give the output shape");
    a.cplx = d[r - 1] == 2;
    a.x = lo_buf(e, x), a.y = lo_buf(e, y);
    LLVMValueRef len = NULL;
    if (vl && !ld) { /* given at run time: one of the lengths compiled */
        char pre[160], post[96];
        who(e, pre, sizeof pre);
        strncat(pre, "dft_length is ", sizeof pre - strlen(pre) - 1);
        expected(post, sizeof post, cand, nc);
        len = load_int(e, vl);
        fail_got(e, none_of(e, len, cand, nc), pre, len, post);
    }
    if (outer * inner * bins == 0) return IR_OK;
    for (int i = 0; i < nc; i++) {
        LLVMBasicBlockRef after = nc > 1 ? lo_if_begin(e, icmp(e, LLVMIntEQ, len, cand[i])) : NULL;
        IrStatus s = dft_body(e, &a, outer, inner, n_in, cand[i], bins, inverse);
        if (s) return s;
        if (after) lo_if_end(e, after);
    }
    return IR_OK;
}

/* ---- STFT ------------------------------------------------------------------------------------ */

typedef struct StftAt {
    IrDType dt, wdt;
    bool cplx;
    int64_t len, bins;
    LLVMValueRef x, w, y, step, xbase, ybase, f; /* w NULL: no window */
} StftAt;

/* Sample t of frame f, windowed: zero past the signal's end (the read stays in bounds). */
static void stft_load(LlvmEmit *e, void *user, LLVMValueRef t, LLVMValueRef *re, LLVMValueRef *im) {
    StftAt *a = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef pos = LLVMBuildAdd(b, LLVMBuildMul(b, a->f, a->step, ""), t, "");
    LLVMValueRef in = icmp(e, LLVMIntULT, pos, a->len);
    int64_t cw = a->cplx ? 2 : 1;
    LLVMValueRef off =
        LLVMBuildSelect(b, in, LLVMBuildAdd(b, a->xbase, LLVMBuildMul(b, pos, lo_i64(e, cw), ""), ""), a->xbase, "");
    LLVMValueRef w = a->w ? lo_to_f64(e, lo_load(e, a->wdt, a->w, t)) : NULL, zero = LLVMConstReal(f64, 0);
    LLVMValueRef v = lo_to_f64(e, lo_load(e, a->dt, a->x, off));
    *re = LLVMBuildSelect(b, in, w ? LLVMBuildFMul(b, v, w, "") : v, zero, "");
    if (!a->cplx) return;
    v = lo_to_f64(e, lo_load(e, a->dt, a->x, LLVMBuildAdd(b, off, lo_i64(e, 1), "")));
    *im = LLVMBuildSelect(b, in, w ? LLVMBuildFMul(b, v, w, "") : v, zero, "");
}

static void stft_store(LlvmEmit *e, void *user, LLVMValueRef k, LLVMValueRef re, LLVMValueRef im) {
    StftAt *a = user;
    LLVMValueRef off = LLVMBuildAdd(e->b, a->ybase, LLVMBuildMul(e->b, k, lo_i64(e, 2), ""), "");
    lo_store(e, a->dt, a->y, off, lo_from_f64(e, re, a->dt));
    lo_store(e, a->dt, a->y, LLVMBuildAdd(e->b, off, lo_i64(e, 1), ""), lo_from_f64(e, im, a->dt));
}

/* Every frame of every batch for frame length fl, window length wl. */
static IrStatus stft_body(LlvmEmit *e, StftAt *a, int64_t batch, int64_t frames, int64_t fl, int64_t wl) {
    LLVMValueRef ct, st, vars[3];
    IrStatus s = twiddles(e, fl, false, &ct, &st);
    if (s) return s;
    dft_vars(e, vars);
    DftSeq q = {fl, wl < fl ? wl : fl, a->bins, false, a->cplx, stft_load, stft_store, a};
    LLVMBuilderRef b = e->b;
    LoLoop lb, lf;
    lo_loop_begin(e, &lb, batch);
    lo_loop_begin(e, &lf, frames);
    a->f = lf.iv;
    a->xbase = LLVMBuildMul(b, lb.iv, lo_i64(e, a->len * (a->cplx ? 2 : 1)), "");
    a->ybase =
        LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, lb.iv, lo_i64(e, frames), ""), lf.iv, ""), lo_i64(e, a->bins * 2), "");
    dft_seq(e, &q, ct, st, vars);
    lo_loop_end(e, &lf);
    lo_loop_end(e, &lb);
    return IR_OK;
}

static IrStatus gen_stft(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    uint32_t no = ir_node_num_operands(g, n);
    IrValueId x = ir_node_operand(g, n, 0), vs = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId vw = no > 2 ? ir_node_operand(g, n, 2) : 0, vf = no > 3 ? ir_node_operand(g, n, 3) : 0;
    if (vw && lower_value_nbytes(g, vw) == 0) vw = 0;
    if (vf && lower_value_nbytes(g, vf) == 0) vf = 0;
    StftAt a = {.dt = lo_dtype(e, x)};
    uint32_t r, ry, rw;
    int64_t d[IR_MAX_RANK], dy[IR_MAX_RANK], dw[IR_MAX_RANK];
    if (!lower_value_shape(g, x, &r, d) || !lower_value_shape(g, y, &ry, dy) || r != 3 || (d[2] != 1 && d[2] != 2) || ry != 4 ||
        dy[0] != d[0] || dy[3] != 2 || (vw && !lower_value_shape(g, vw, &rw, dw)))
        return llvm_ops_refuse(e, "with these shapes");
    if (!lo_is_float(a.dt) || lo_dtype(e, y) != a.dt || (vw && !lo_is_float(lo_dtype(e, vw))))
        return llvm_ops_refuse(e, "on non-float tensors");
    if (!int_scalar(e, vs) || (vf && !int_scalar(e, vf)))
        return llvm_ops_refuse(e, "with a frame_step or frame_length that is not an integer scalar");
    bool onesided = ir_node_attr_int(g, n, "onesided", NULL) != 0;
    int64_t wl = vw ? ir_shape_numel(rw, dw) : 0, frames = dy[1], cand[2];
    a.len = d[1], a.bins = dy[2], a.cplx = d[2] == 2;
    const void *fd = vf ? lower_value_const_data(g, vf) : NULL;
    int64_t asked = !vf ? (vw ? wl : a.len) : fd ? ir_elem_get_i64(lo_dtype(e, vf), fd, 0) : 0;
    if (vf && fd && asked < 1) return llvm_ops_refuse(e, "with a frame_length below 1");
    int nc = dft_lengths(asked, a.bins, onesided, a.len, cand);
    if (nc == 0) return llvm_ops_refuse(e, "with a frame_length that does not give the output shape");
    char pre[160], post[96];
    who(e, pre, sizeof pre);
    size_t np = strlen(pre);
    a.step = load_int(e, vs);
    strncat(pre, "frame_step is ", sizeof pre - np - 1);
    fail_got(e, icmp(e, LLVMIntSLT, a.step, 1), pre, a.step, ", expected a positive value");
    LLVMValueRef fl = lo_i64(e, cand[0]);
    if (vf && !fd) {
        fl = load_int(e, vf);
        pre[np] = 0;
        strncat(pre, "frame_length is ", sizeof pre - np - 1);
        expected(post, sizeof post, cand, nc);
        fail_got(e, none_of(e, fl, cand, nc), pre, fl, post);
    }
    LLVMBuilderRef b = e->b;
    LLVMValueRef step1 = LLVMBuildSelect(b, icmp(e, LLVMIntSLT, a.step, 1), lo_i64(e, 1), a.step, "");
    LLVMValueRef got = LLVMBuildAdd(b, LLVMBuildSDiv(b, LLVMBuildSub(b, lo_i64(e, a.len), fl, ""), step1, ""), lo_i64(e, 1), "");
    pre[np] = 0;
    strncat(pre, "frame_step and frame_length give ", sizeof pre - np - 1);
    snprintf(post, sizeof post, " frames, expected %lld (the compiled output shape)", (long long)frames);
    fail_got(e, icmp(e, LLVMIntNE, got, frames), pre, got, post);
    a.x = lo_buf(e, x), a.y = lo_buf(e, y), a.w = vw ? lo_buf(e, vw) : NULL, a.wdt = vw ? lo_dtype(e, vw) : a.dt;
    if (d[0] * frames * a.bins == 0) return IR_OK;
    for (int i = 0; i < nc; i++) {
        LLVMBasicBlockRef after = nc > 1 ? lo_if_begin(e, icmp(e, LLVMIntEQ, fl, cand[i])) : NULL;
        IrStatus s = stft_body(e, &a, d[0], frames, cand[i], vw ? wl : cand[i]);
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
static void mel_column(LlvmEmit *e, const Mel *m, LLVMValueRef i, IrDType dt, LLVMValueRef y, int64_t nspec, int64_t nmel) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e);
    LLVMValueRef l = mel_bin(e, m, i), c = mel_bin(e, m, LLVMBuildAdd(b, i, lo_i64(e, 1), ""));
    LLVMValueRef h = mel_bin(e, m, LLVMBuildAdd(b, i, lo_i64(e, 2), ""));
    LLVMValueRef cl = LLVMBuildSIToFP(b, LLVMBuildSub(b, c, l, ""), f64, ""),
                 hc = LLVMBuildSIToFP(b, LLVMBuildSub(b, h, c, ""), f64, "");
    LoLoop lj;
    lo_loop_begin(e, &lj, nspec);
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
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, j, lo_i64(e, nmel), ""), i, "");
    lo_store(e, dt, y, off, lo_from_f64(e, w, dt));
    lo_loop_end(e, &lj);
}

static IrStatus gen_mel(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId y = ir_node_result(g, n, 0), in[5];
    for (uint32_t i = 0; i < 5; i++) in[i] = ir_node_operand(g, n, i);
    IrDType dt = lo_dtype(e, y);
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    if (!lower_value_shape(g, y, &r, d) || r != 2) return llvm_ops_refuse(e, "with this output shape");
    if (!lo_is_float(dt)) return llvm_ops_refuse(e, "with a non-float output_datatype");
    if (d[0] < 1 || d[1] < 1) return llvm_ops_refuse(e, "with an empty output");
    if (!int_scalar(e, in[0]) || !int_scalar(e, in[1]) || !int_scalar(e, in[2]))
        return llvm_ops_refuse(e, "with num_mel_bins, dft_length or sample_rate not an integer scalar");
    for (int i = 3; i < 5; i++)
        if (!lo_is_float(lo_dtype(e, in[i])) || lower_value_nbytes(g, in[i]) != ir_dtype_size(lo_dtype(e, in[i])))
            return llvm_ops_refuse(e, "with edge frequencies that are not float scalars");
    int64_t nspec = d[0], nmel = d[1], dfts[2] = {2 * (nspec - 1), 2 * nspec - 1};
    LLVMBuilderRef b = e->b;
    LLVMValueRef vm = load_int(e, in[0]), vd = load_int(e, in[1]), vr = load_int(e, in[2]);
    char pre[160], post[96];
    who(e, pre, sizeof pre);
    size_t np = strlen(pre);
    strncat(pre, "num_mel_bins is ", sizeof pre - np - 1);
    expected(post, sizeof post, &nmel, 1);
    fail_got(e, icmp(e, LLVMIntNE, vm, nmel), pre, vm, post);
    pre[np] = 0;
    strncat(pre, "dft_length is ", sizeof pre - np - 1);
    const int64_t *dc = dfts[0] >= 1 ? dfts : dfts + 1; /* one bin: dft_length 1 only */
    int ndc = dfts[0] >= 1 ? 2 : 1;
    expected(post, sizeof post, dc, ndc);
    fail_got(e, none_of(e, vd, dc, ndc), pre, vd, post);
    pre[np] = 0;
    strncat(pre, "sample_rate is ", sizeof pre - np - 1);
    fail_got(e, icmp(e, LLVMIntSLT, vr, 1), pre, vr, ", expected a positive value");
    if (nspec * nmel == 0) return IR_OK;
    LLVMTypeRef f32 = lo_f32_t(e), f64 = lo_f64_t(e);
    LLVMValueRef lo = lo_load(e, lo_dtype(e, in[3]), lo_buf(e, in[3]), lo_i64(e, 0));
    LLVMValueRef hi = lo_load(e, lo_dtype(e, in[4]), lo_buf(e, in[4]), lo_i64(e, 0));
    if (LLVMTypeOf(lo) != f32) lo = LLVMBuildFPTrunc(b, lo, f32, "");
    if (LLVMTypeOf(hi) != f32) hi = LLVMBuildFPTrunc(b, hi, f32, "");
    Mel m = {.lo_mel = to_mel(e, lo)};
    m.step = LLVMBuildFDiv(b, LLVMBuildFSub(b, to_mel(e, hi), m.lo_mel, ""), LLVMConstReal(f32, (float)(nmel + 2)), "");
    m.dft1 = LLVMBuildSIToFP(b, LLVMBuildAdd(b, vd, lo_i64(e, 1), ""), f64, "");
    m.sr = LLVMBuildSIToFP(b, vr, f64, "");
    LLVMValueRef yb = lo_buf(e, y);
    LoLoop li;
    lo_loop_begin(e, &li, nmel);
    mel_column(e, &m, li.iv, dt, yb, nspec, nmel);
    lo_loop_end(e, &li);
    return IR_OK;
}

/* ---- Range ----------------------------------------------------------------------------------- */

/* start + i * delta for the compiled length, after checking that start, limit and delta give it:
 * ceil((limit - start) / delta) in f64 for floats, the interpreter's unsigned count for
 * integers. */
static IrStatus gen_range(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId y = ir_node_result(g, n, 0), in[3];
    IrDType dt = lo_dtype(e, y);
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    if (!lower_value_shape(g, y, &r, d) || r != 1) return llvm_ops_refuse(e, "with this output shape");
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
    char pre[160], post[96];
    who(e, pre, sizeof pre);
    size_t np = strlen(pre);
    int64_t len = d[0];
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
    snprintf(post, sizeof post, " elements, expected %lld (the compiled output shape)", (long long)len);
    fail_got(e, icmp(e, LLVMIntNE, got, len), pre, got, post);
    if (len == 0) return IR_OK;
    LLVMValueRef yb = lo_buf(e, y);
    LoLoop l;
    lo_loop_begin(e, &l, len);
    LLVMValueRef x;
    if (fl) {
        x = LLVMBuildFAdd(b, v[0], LLVMBuildFMul(b, LLVMBuildSIToFP(b, l.iv, f64, ""), v[2], ""), "");
        x = lo_from_f64(e, x, dt);
    } else {
        x = LLVMBuildAdd(b, v[0], LLVMBuildMul(b, l.iv, v[2], ""), "");
        x = LLVMBuildTruncOrBitCast(b, x, lo_store_t(e, dt), "");
    }
    lo_store(e, dt, yb, l.iv, x);
    lo_loop_end(e, &l);
    return IR_OK;
}

IrStatus llvm_ops_window_gen(LlvmEmit *e) { return gen_window(e); }
IrStatus llvm_ops_dft_gen(LlvmEmit *e) { return gen_dft(e); }
IrStatus llvm_ops_stft_gen(LlvmEmit *e) { return gen_stft(e); }
IrStatus llvm_ops_mel_gen(LlvmEmit *e) { return gen_mel(e); }
IrStatus llvm_ops_range_gen(LlvmEmit *e) { return gen_range(e); }

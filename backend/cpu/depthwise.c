/* Depthwise and grouped 2-D Conv (few input channels per group) as direct vector kernels for
 * one image of NCHW f32: each output channel's plane row by row, a vector of output columns at a
 * time, the taps' weights broadcast in registers and every tap one (strided: one wide, then
 * shuffled) load of an input row. Border rows and columns are emitted apart with the taps and
 * lanes they have (masks known at compile time), so the interior runs without checks. The bias
 * seeds the accumulators and the caller's epilogue is applied before the only store.
 */
#include "backend/llvm/emit.h"
#include "backend/cpu/cpu.h"

#define DW_MAX_TAPS 64 /* kh * kw: the taps' broadcast weights are held across a channel */
#define DW_MAX_CG 16   /* input channels per group: more is a GEMM's work (im2col + BLAS) */

typedef struct Dw {
    const LlvmDepthwise *p;
    const LowerWin *w;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMTypeRef i1, i32, i64, f32, vt;
    int vw;
    int64_t cg, ocg, taps;
    LLVMValueRef m;                /* the output channel (i64) */
    LLVMValueRef xc;               /* its group's first input channel (i64) */
    LLVMValueRef init;             /* the accumulators' start: the bias broadcast, or zeros */
    LLVMValueRef wv[DW_MAX_TAPS];  /* one input channel per group: the taps broadcast */
    LLVMValueRef acc;              /* several: the accumulator across them (an alloca) */
} Dw;

static LLVMValueRef ci(Dw *d, int64_t v) { return LLVMConstInt(d->i64, (unsigned long long)v, 1); }
static LLVMValueRef add(Dw *d, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(d->b, a, b, ""); }
static LLVMValueRef mul(Dw *d, LLVMValueRef a, int64_t k) { return LLVMBuildMul(d->b, a, ci(d, k), ""); }
static LLVMValueRef at(Dw *d, LLVMValueRef p, LLVMValueRef off) { return LLVMBuildGEP2(d->b, d->f32, p, &off, 1, ""); }

static LLVMValueRef splat(Dw *d, LLVMValueRef s) {
    LLVMValueRef v = LLVMBuildInsertElement(d->b, LLVMGetUndef(d->vt), s, LLVMConstInt(d->i32, 0, 0), "");
    return LLVMBuildShuffleVector(d->b, v, LLVMGetUndef(d->vt), LLVMConstNull(LLVMVectorType(d->i32, (unsigned)d->vw)), "");
}

static LLVMValueRef fma_v(Dw *d, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    unsigned id = LLVMLookupIntrinsicID("llvm.fma", 8);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(d->mod, id, &d->vt, 1), args[3] = {a, b, c};
    return LLVMBuildCall2(d->b, LLVMIntrinsicGetType(d->ctx, id, &d->vt, 1), f, args, 3, "");
}

static LLVMValueRef load_v(Dw *d, LLVMTypeRef t, LLVMValueRef p) {
    LLVMValueRef v = LLVMBuildLoad2(d->b, t, p, "");
    LLVMSetAlignment(v, 4);
    return v;
}

/* Weight of tap t of input channel ci (of the group) of output channel m, broadcast. */
static LLVMValueRef weight(Dw *d, LLVMValueRef cidx, int64_t t) {
    LLVMValueRef off = add(d, mul(d, add(d, mul(d, d->m, d->cg), cidx), d->taps), ci(d, t));
    return splat(d, load_v(d, d->f32, at(d, d->p->wt, off)));
}

/* Input column of output column o at tap column kw. */
static int64_t in_col(const LowerWin *w, int64_t o, int64_t kw) { return o * w->sw - w->pl + kw * w->dw; }

/* Whether the wide load of output columns ow0 .. ow0 + vw - 1 at every tap column stays inside
 * the input row, and the vector inside the output row (an interior vector). */
static bool col_inside(const Dw *d, int64_t ow0) {
    const LowerWin *w = d->w;
    return ow0 + d->vw <= w->ow && in_col(w, ow0, 0) >= 0 && in_col(w, ow0, w->kw - 1) + (int64_t)d->vw * w->sw <= w->w;
}

/* The input lanes under output columns ow0 .. (tap column kw) of input row `row`: a plain load
 * in the interior (ow0c < 0: ow0 known at run time only), else masked by the valid lanes; with a
 * stride every sw-th lane of a wide load. NULL when no lane is valid. */
static LLVMValueRef tap_load(Dw *d, LLVMValueRef row, LLVMValueRef ow0, int64_t ow0c, int64_t kw) {
    const LowerWin *w = d->w;
    LLVMBuilderRef b = d->b;
    unsigned s = (unsigned)w->sw, wide = (unsigned)d->vw * s;
    LLVMTypeRef wt = LLVMVectorType(d->f32, wide);
    LLVMValueRef p = at(d, row, add(d, mul(d, ow0, w->sw), ci(d, kw * w->dw - w->pl)));
    LLVMValueRef v;
    if (ow0c < 0) {
        v = load_v(d, wt, p);
    } else {
        LLVMValueRef bits[64];
        bool any = false;
        for (unsigned t = 0; t < wide; t++) {
            int64_t o = ow0c + t / s, iw = in_col(w, ow0c, kw) + t;
            bool ok = t % s == 0 && o < w->ow && iw >= 0 && iw < w->w;
            any |= ok;
            bits[t] = LLVMConstInt(d->i1, ok, 0);
        }
        if (!any) return NULL;
        v = llvm_masked_load(b, wt, p, LLVMConstVector(bits, wide));
    }
    if (s == 1) return v;
    LLVMValueRef idx[16];
    for (int l = 0; l < d->vw; l++) idx[l] = LLVMConstInt(d->i32, (unsigned long long)l * s, 0);
    return LLVMBuildShuffleVector(b, v, LLVMGetUndef(wt), LLVMConstVector(idx, (unsigned)d->vw), "");
}

/* acc plus the taps kh in [k0, k1) of input channel plane `plane` (i64: channel index) for the
 * vector of output row oh at columns ow0; weights from d->wv (cidx NULL) or loaded. */
static LLVMValueRef taps(Dw *d, LLVMValueRef acc, LLVMValueRef plane, LLVMValueRef cidx, LLVMValueRef oh, LLVMValueRef ow0,
                         int64_t ow0c, int64_t k0, int64_t k1) {
    const LowerWin *w = d->w;
    for (int64_t kh = k0; kh < k1; kh++) {
        LLVMValueRef ih = add(d, mul(d, oh, w->sh), ci(d, kh * w->dh - w->pt));
        LLVMValueRef row = at(d, d->p->x, mul(d, add(d, mul(d, plane, w->h), ih), w->w));
        for (int64_t kw = 0; kw < w->kw; kw++) {
            LLVMValueRef xv = tap_load(d, row, ow0, ow0c, kw);
            if (!xv) continue;
            int64_t t = kh * w->kw + kw;
            acc = fma_v(d, xv, cidx ? weight(d, cidx, t) : d->wv[t], acc);
        }
    }
    return acc;
}

/* One output vector: row oh (taps kh in [k0, k1) inside the input), columns ow0 (ow0c: its
 * value when known at compile time, else -1), accumulated, finished and stored. */
static void out_vec(Dw *d, LLVMValueRef oh, LLVMValueRef ow0, int64_t ow0c, int64_t k0, int64_t k1) {
    const LowerWin *w = d->w;
    LLVMBuilderRef b = d->b;
    LLVMValueRef v;
    if (d->cg == 1) {
        v = taps(d, d->init, d->xc, NULL, oh, ow0, ow0c, k0, k1);
    } else {
        LLVMBuildStore(b, d->init, d->acc);
        LlvmLoop lc;
        llvm_loop_begin(b, d->fn, &lc, d->cg);
        LLVMValueRef a = LLVMBuildLoad2(b, d->vt, d->acc, "");
        LLVMBuildStore(b, taps(d, a, add(d, d->xc, lc.iv), lc.iv, oh, ow0, ow0c, k0, k1), d->acc);
        llvm_loop_end(b, d->fn, &lc);
        v = LLVMBuildLoad2(b, d->vt, d->acc, "");
    }
    int64_t lanes = ow0c < 0 || ow0c + d->vw <= w->ow ? d->vw : w->ow - ow0c;
    LLVMValueRef col = add(d, mul(d, oh, w->ow), ow0);
    if (d->p->epi_vec) v = d->p->epi_vec(d->p->user, v, d->m, col, (int)lanes);
    LLVMValueRef yp = at(d, d->p->y, add(d, mul(d, d->m, w->oh * w->ow), col));
    if (lanes == d->vw) LLVMSetAlignment(LLVMBuildStore(b, v, yp), 4);
    else llvm_store_lanes(b, v, yp, lanes);
}

/* Every vector of output row oh (taps kh in [k0, k1)): border vectors one by one, the interior
 * ones in a loop. */
static void out_row(Dw *d, LLVMValueRef oh, int64_t k0, int64_t k1) {
    int64_t nv = (d->w->ow + d->vw - 1) / d->vw, j0 = 0, j1;
    while (j0 < nv && !col_inside(d, j0 * d->vw)) j0++;
    j1 = j0;
    while (j1 < nv && col_inside(d, j1 * d->vw)) j1++;
    for (int64_t j = 0; j < j0; j++) out_vec(d, oh, ci(d, j * d->vw), j * d->vw, k0, k1);
    if (j1 - j0 == 1) out_vec(d, oh, ci(d, j0 * d->vw), -1, k0, k1);
    else if (j1 > j0) {
        LlvmLoop lj;
        llvm_loop_begin(d->b, d->fn, &lj, j1 - j0);
        out_vec(d, oh, mul(d, add(d, lj.iv, ci(d, j0)), d->vw), -1, k0, k1);
        llvm_loop_end(d->b, d->fn, &lj);
    }
    for (int64_t j = j1; j < nv; j++) out_vec(d, oh, ci(d, j * d->vw), j * d->vw, k0, k1);
}

/* The taps kh in [*k0, *k1) whose input row is inside the image for output row oh. */
static void row_taps(const LowerWin *w, int64_t oh, int64_t *k0, int64_t *k1) {
    *k0 = 0, *k1 = w->kh;
    while (*k0 < w->kh && oh * w->sh - w->pt + *k0 * w->dh < 0) (*k0)++;
    while (*k1 > *k0 && oh * w->sh - w->pt + (*k1 - 1) * w->dh >= w->h) (*k1)--;
}

/* Output channel d->m: border rows one by one, the interior ones in a loop. */
static void out_channel(Dw *d) {
    const LowerWin *w = d->w;
    int64_t r0 = 0, r1, k0, k1;
    for (;; r0++) {
        if (r0 == w->oh) break;
        row_taps(w, r0, &k0, &k1);
        if (k0 == 0 && k1 == w->kh) break;
    }
    for (r1 = r0; r1 < w->oh; r1++) {
        row_taps(w, r1, &k0, &k1);
        if (k0 != 0 || k1 != w->kh) break;
    }
    for (int64_t r = 0; r < r0; r++) {
        row_taps(w, r, &k0, &k1);
        out_row(d, ci(d, r), k0, k1);
    }
    if (r1 > r0) {
        LlvmLoop lr;
        llvm_loop_begin(d->b, d->fn, &lr, r1 - r0);
        out_row(d, add(d, lr.iv, ci(d, r0)), 0, w->kh);
        llvm_loop_end(d->b, d->fn, &lr);
    }
    for (int64_t r = r1; r < w->oh; r++) {
        row_taps(w, r, &k0, &k1);
        out_row(d, ci(d, r), k0, k1);
    }
}

static int dw_lanes(const LowerWin *w, unsigned simd_bits) {
    if (simd_bits >= 512 && w->ow >= 12) return 16;
    return w->ow > 4 ? 8 : 4;
}

bool llvm_depthwise_fits(const LowerWin *w, int64_t groups, int64_t m, unsigned simd_bits) {
    if (simd_bits < 256 || groups < 2 || m % groups || w->c % groups) return false;
    int64_t cg = w->c / groups;
    return cg <= DW_MAX_CG && w->kh * w->kw <= DW_MAX_TAPS && w->sw <= 4 && w->sh >= 1 && w->dh >= 1 && w->dw >= 1;
}

void llvm_depthwise_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmDepthwise *p, LLVMValueRef lo,
                         LLVMValueRef hi) {
    Dw d = {.p = p, .w = p->w, .b = b, .fn = fn};
    d.mod = LLVMGetGlobalParent(fn);
    d.ctx = LLVMGetModuleContext(d.mod);
    d.i1 = LLVMInt1TypeInContext(d.ctx);
    d.i32 = LLVMInt32TypeInContext(d.ctx);
    d.i64 = LLVMInt64TypeInContext(d.ctx);
    d.f32 = LLVMFloatTypeInContext(d.ctx);
    d.vw = dw_lanes(p->w, p->simd_bits);
    d.vt = LLVMVectorType(d.f32, (unsigned)d.vw);
    d.cg = p->w->c / p->groups;
    d.ocg = p->m / p->groups;
    d.taps = p->w->kh * p->w->kw;
    if (d.cg > 1) d.acc = LLVMBuildAlloca(ab, d.vt, "");
    LlvmLoop lm;
    llvm_loop_begin_v(b, fn, &lm, LLVMBuildSub(b, hi, lo, ""));
    d.m = add(&d, lm.iv, lo);
    d.xc = mul(&d, LLVMBuildSDiv(b, d.m, ci(&d, d.ocg), ""), d.cg);
    d.init = p->bias ? splat(&d, load_v(&d, d.f32, at(&d, p->bias, d.m))) : LLVMConstNull(d.vt);
    if (d.cg == 1)
        for (int64_t t = 0; t < d.taps; t++) d.wv[t] = weight(&d, ci(&d, 0), t);
    out_channel(&d);
    llvm_loop_end(b, fn, &lm);
}

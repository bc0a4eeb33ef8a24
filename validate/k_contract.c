/* Contraction kernels: MatMul, Gemm, Conv, ConvTranspose, Einsum, the integer and QLinear
 * forms, Det and irtool.fp8_matmul.
 *
 * f32 MatMul/Gemm/Conv go through one cache-blocked, register-tiled GEMM in plain C (gcc -O2
 * vectorizes the micro-kernel's fixed-size inner loops). Every output element is the f32 sum
 * over k taken in increasing k order starting from 0.0f, with separate multiply and add (ISO C
 * mode compiles with -ffp-contract=off, so no FMA), whatever the tiling or thread split: work
 * is split only by output rows/columns, never inside a reduction, so results do not depend on
 * the thread count. Other dtypes take a simple path that accumulates in double (int64 for
 * integers).
 */
#include "validate/interp_internal.h"
#include "ir/kernels_shared.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* ---- small helpers ------------------------------------------------------------------------ */

static int64_t numel(const IrTensor *t) { return ir_tensor_numel(t); }

/* Threads the caller asked for (IrInterpOptions.threads; 0 = 1). Kernels otherwise never look
 * inside InterpCtx; this is the one place that does, until interp.h grows an accessor. */
static int k_threads(KernelArgs *a) {
    int t = a->ctx && a->ctx->opt ? a->ctx->opt->threads : 0;
    return t < 1 ? 1 : t > 64 ? 64 : t;
}

/* Converts any tensor to a malloc'd double array (NULL with numel 0 gives a 1-entry array). */
static double *to_f64(const IrTensor *t) {
    int64_t n = numel(t);
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (!d) return NULL;
    if (t->dtype == IR_DTYPE_F32)
        for (int64_t i = 0; i < n; i++) d[i] = ((const float *)t->data)[i];
    else
        for (int64_t i = 0; i < n; i++) d[i] = interp_get_f(t, i);
    return d;
}

static IrStatus oom(KernelArgs *a) {
    interp_error(a, "out of memory");
    return IR_ENOMEM;
}

/* ---- the f32 GEMM ------------------------------------------------------------------------- */

/* C[M,N] = A[M,K] @ B[K,N]; A(i,k) = a[i*ars + k*acs], B(k,j) = b[k*brs + j*bcs], C row-major
 * with leading dimension ldc. */
typedef struct SgemmArgs {
    int64_t M, N, K;
    const float *a;
    int64_t ars, acs;
    const float *b;
    int64_t brs, bcs;
    float *c;
    int64_t ldc;
} SgemmArgs;

#define GEMM_MR 4
#define GEMM_NR 8
#define GEMM_KC 256
#define GEMM_MC 128
#define GEMM_NC 1024

/* The micro-kernel: a GEMM_MR x GEMM_NR tile over kc steps. One named accumulator row per
 * output row (not a 2-D array) so gcc -O2 keeps all of them in vector registers: 4 x 8 floats
 * is 8 SSE registers, leaving room for the B row and the broadcast. Measured on the 2-core dev
 * box at ~40 GFLOP/s per core (a 2-D acc array spilled to the stack and ran at ~20). `first`
 * starts from zero, else continues the sums already in c. */
#define GEMM_ROWS(X) X(0) X(1) X(2) X(3)
static void sgemm_micro(int64_t kc, const float *restrict ap, const float *restrict bp,
                        float *restrict c, int64_t ldc, int first) {
#define GEMM_DECL(i) float acc##i[GEMM_NR];
    GEMM_ROWS(GEMM_DECL)
#define GEMM_INIT(i) for (int j = 0; j < GEMM_NR; j++) acc##i[j] = first ? 0.0f : c[i * ldc + j];
    GEMM_ROWS(GEMM_INIT)
    for (int64_t k = 0; k < kc; k++) {
        const float *b = bp + k * GEMM_NR, *av = ap + k * GEMM_MR;
#define GEMM_STEP(i)                                                                                 \
    {                                                                                                \
        float x = av[i];                                                                             \
        for (int j = 0; j < GEMM_NR; j++) acc##i[j] += x * b[j];                                     \
    }
        GEMM_ROWS(GEMM_STEP)
    }
#define GEMM_STORE(i) for (int j = 0; j < GEMM_NR; j++) c[i * ldc + j] = acc##i[j];
    GEMM_ROWS(GEMM_STORE)
#undef GEMM_DECL
#undef GEMM_INIT
#undef GEMM_STEP
#undef GEMM_STORE
}

/* Packs A rows [i0, i0+mc) x cols [k0, k0+kc) into MR-row panels, zero-padded. */
static void sgemm_pack_a(const SgemmArgs *s, int64_t i0, int64_t mc, int64_t k0, int64_t kc, float *dst) {
    for (int64_t ip = 0; ip < mc; ip += GEMM_MR) {
        float *d = dst + ip * kc;
        for (int ii = 0; ii < GEMM_MR; ii++) {
            int64_t i = i0 + ip + ii;
            if (ip + ii < mc) {
                const float *src = s->a + i * s->ars + k0 * s->acs;
                for (int64_t k = 0; k < kc; k++) d[k * GEMM_MR + ii] = src[k * s->acs];
            } else {
                for (int64_t k = 0; k < kc; k++) d[k * GEMM_MR + ii] = 0.0f;
            }
        }
    }
}

/* Packs B rows [k0, k0+kc) x cols [j0, j0+nc) into NR-column panels, zero-padded. */
static void sgemm_pack_b(const SgemmArgs *s, int64_t k0, int64_t kc, int64_t j0, int64_t nc, float *dst) {
    for (int64_t jp = 0; jp < nc; jp += GEMM_NR) {
        float *d = dst + jp * kc;
        int64_t w = nc - jp < GEMM_NR ? nc - jp : GEMM_NR;
        for (int64_t k = 0; k < kc; k++) {
            const float *src = s->b + (k0 + k) * s->brs + (j0 + jp) * s->bcs;
            float *row = d + k * GEMM_NR;
            if (w == GEMM_NR && s->bcs == 1) {
                for (int j = 0; j < GEMM_NR; j++) row[j] = src[j];
            } else {
                int j = 0;
                for (; j < w; j++) row[j] = src[j * s->bcs];
                for (; j < GEMM_NR; j++) row[j] = 0.0f;
            }
        }
    }
}

static void sgemm_serial(const SgemmArgs *s, float *abuf, float *bbuf) {
    if (s->K == 0) {
        for (int64_t i = 0; i < s->M; i++)
            for (int64_t j = 0; j < s->N; j++) s->c[i * s->ldc + j] = 0.0f;
        return;
    }
    float edge[GEMM_MR * GEMM_NR];
    for (int64_t jc = 0; jc < s->N; jc += GEMM_NC) {
        int64_t nc = s->N - jc < GEMM_NC ? s->N - jc : GEMM_NC;
        for (int64_t pc = 0; pc < s->K; pc += GEMM_KC) {
            int64_t kc = s->K - pc < GEMM_KC ? s->K - pc : GEMM_KC;
            sgemm_pack_b(s, pc, kc, jc, nc, bbuf);
            for (int64_t ic = 0; ic < s->M; ic += GEMM_MC) {
                int64_t mc = s->M - ic < GEMM_MC ? s->M - ic : GEMM_MC;
                sgemm_pack_a(s, ic, mc, pc, kc, abuf);
                for (int64_t jr = 0; jr < nc; jr += GEMM_NR) {
                    int64_t nw = nc - jr < GEMM_NR ? nc - jr : GEMM_NR;
                    for (int64_t ir = 0; ir < mc; ir += GEMM_MR) {
                        int64_t mh = mc - ir < GEMM_MR ? mc - ir : GEMM_MR;
                        float *c = s->c + (ic + ir) * s->ldc + jc + jr;
                        const float *ap = abuf + ir * kc, *bp = bbuf + jr * kc;
                        if (mh == GEMM_MR && nw == GEMM_NR) {
                            sgemm_micro(kc, ap, bp, c, s->ldc, pc == 0);
                            continue;
                        }
                        if (pc != 0)
                            for (int64_t i = 0; i < mh; i++)
                                for (int64_t j = 0; j < nw; j++) edge[i * GEMM_NR + j] = c[i * s->ldc + j];
                        sgemm_micro(kc, ap, bp, edge, GEMM_NR, pc == 0);
                        for (int64_t i = 0; i < mh; i++)
                            for (int64_t j = 0; j < nw; j++) c[i * s->ldc + j] = edge[i * GEMM_NR + j];
                    }
                }
            }
        }
    }
}

typedef struct SgemmJob {
    SgemmArgs s;
    float *abuf, *bbuf;
} SgemmJob;

static void *sgemm_thread(void *p) {
    SgemmJob *j = p;
    sgemm_serial(&j->s, j->abuf, j->bbuf);
    return NULL;
}

#define SGEMM_ABUF ((size_t)GEMM_MC * GEMM_KC)
#define SGEMM_BBUF ((size_t)GEMM_KC * (GEMM_NC + GEMM_NR))

/* Splits the output into `threads` blocks of whole rows or whole columns (whichever is
 * larger); each element is computed the same way in any split. Returns false on OOM. */
static bool sgemm(const SgemmArgs *s, int threads) {
    if (s->M <= 0 || s->N <= 0) return true;
    int64_t work = s->M * s->N * (s->K > 0 ? s->K : 1);
    if (work < (int64_t)1 << 18) threads = 1;
    bool by_cols = s->N >= s->M;
    int64_t units = by_cols ? (s->N + GEMM_NR - 1) / GEMM_NR : (s->M + GEMM_MR - 1) / GEMM_MR;
    if (threads > units) threads = (int)units;
    if (threads < 1) threads = 1;
    SgemmJob jobs[64];
    float *mem = malloc((size_t)threads * (SGEMM_ABUF + SGEMM_BBUF) * sizeof(float));
    if (!mem) return false;
    int64_t done = 0;
    for (int t = 0; t < threads; t++) {
        int64_t cnt = units / threads + (t < units % threads);
        SgemmJob *j = &jobs[t];
        j->s = *s;
        j->abuf = mem + (size_t)t * (SGEMM_ABUF + SGEMM_BBUF);
        j->bbuf = j->abuf + SGEMM_ABUF;
        if (by_cols) {
            int64_t j0 = done * GEMM_NR, j1 = (done + cnt) * GEMM_NR;
            if (j1 > s->N) j1 = s->N;
            j->s.N = j1 - j0;
            j->s.b = s->b + j0 * s->bcs;
            j->s.c = s->c + j0;
        } else {
            int64_t i0 = done * GEMM_MR, i1 = (done + cnt) * GEMM_MR;
            if (i1 > s->M) i1 = s->M;
            j->s.M = i1 - i0;
            j->s.a = s->a + i0 * s->ars;
            j->s.c = s->c + i0 * s->ldc;
        }
        done += cnt;
    }
    pthread_t tid[64];
    int started = 0;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&tid[t], NULL, sgemm_thread, &jobs[t]) != 0) break;
        started = t;
    }
    sgemm_serial(&jobs[0].s, jobs[0].abuf, jobs[0].bbuf);
    for (int t = 1; t <= started; t++) pthread_join(tid[t], NULL);
    for (int t = started + 1; t < threads; t++) sgemm_serial(&jobs[t].s, jobs[t].abuf, jobs[t].bbuf);
    free(mem);
    return true;
}

/* ---- MatMul shapes (numpy semantics) ----------------------------------------------------- */

typedef struct MMShape {
    int64_t M, K, N;
    uint32_t brank; /* batch rank of the output */
    int64_t bdims[IR_MAX_RANK];
    int64_t astr[IR_MAX_RANK], bstr[IR_MAX_RANK]; /* batch strides (elements); 0 = broadcast */
    int64_t nbatch;
    uint32_t out_rank;
    int64_t out_dims[IR_MAX_RANK];
} MMShape;

static IrStatus mm_shape(KernelArgs *a, const IrTensor *A, const IrTensor *B, MMShape *s) {
    if (A->rank == 0 || B->rank == 0) return interp_error(a, "operands must have rank >= 1");
    int64_t ad[IR_MAX_RANK + 1], bd[IR_MAX_RANK + 1];
    uint32_t ar = A->rank, br = B->rank;
    if (ar == 1) { ad[0] = 1; ad[1] = A->dims[0]; ar = 2; }
    else memcpy(ad, A->dims, ar * sizeof(int64_t));
    if (br == 1) { bd[0] = B->dims[0]; bd[1] = 1; br = 2; }
    else memcpy(bd, B->dims, br * sizeof(int64_t));
    s->M = ad[ar - 2];
    s->K = ad[ar - 1];
    s->N = bd[br - 1];
    if (bd[br - 2] != s->K)
        return interp_error(a, "contraction dims differ: %lld vs %lld", (long long)s->K, (long long)bd[br - 2]);
    /* the batch dims (all but the last two) broadcast; strides count whole M x K / K x N matrices */
    uint32_t abr = ar - 2, bbr = br - 2;
    IrShapeBroadcastError e;
    if (!ir_shape_broadcast2(abr, ad, bbr, bd, &s->brank, s->bdims, &e))
        return interp_error(a, "batch dims do not broadcast: %lld vs %lld (A axis %u, B axis %u)", (long long)e.other_dim,
                            (long long)e.dim, e.other_axis, e.axis);
    ir_shape_broadcast_strides(abr, ad, s->brank, NULL, s->astr);
    ir_shape_broadcast_strides(bbr, bd, s->brank, NULL, s->bstr);
    for (uint32_t i = 0; i < s->brank; i++) {
        s->astr[i] *= s->M * s->K;
        s->bstr[i] *= s->K * s->N;
    }
    s->nbatch = 1;
    s->out_rank = 0;
    for (uint32_t i = 0; i < s->brank; i++) {
        s->nbatch *= s->bdims[i];
        s->out_dims[s->out_rank++] = s->bdims[i];
    }
    if (A->rank != 1) s->out_dims[s->out_rank++] = s->M;
    if (B->rank != 1) s->out_dims[s->out_rank++] = s->N;
    return IR_OK;
}

static void mm_batch_offsets(const MMShape *s, int64_t bi, int64_t *aoff, int64_t *boff) {
    int64_t ao = 0, bo = 0;
    for (uint32_t i = s->brank; i-- > 0;) {
        int64_t idx = bi % s->bdims[i];
        bi /= s->bdims[i];
        ao += idx * s->astr[i];
        bo += idx * s->bstr[i];
    }
    *aoff = ao;
    *boff = bo;
}

/* Generic matmul over already-converted operands: double (float dtypes) or int64. */
static void mm_generic_f64(const MMShape *s, const double *A, const double *B, double *Y) {
    for (int64_t bi = 0; bi < s->nbatch; bi++) {
        int64_t ao, bo;
        mm_batch_offsets(s, bi, &ao, &bo);
        double *y = Y + bi * s->M * s->N;
        for (int64_t i = 0; i < s->M; i++)
            for (int64_t j = 0; j < s->N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < s->K; k++) acc += A[ao + i * s->K + k] * B[bo + k * s->N + j];
                y[i * s->N + j] = acc;
            }
    }
}

static void mm_generic_i64(const MMShape *s, const int64_t *A, const int64_t *B, int64_t *Y) {
    for (int64_t bi = 0; bi < s->nbatch; bi++) {
        int64_t ao, bo;
        mm_batch_offsets(s, bi, &ao, &bo);
        int64_t *y = Y + bi * s->M * s->N;
        for (int64_t i = 0; i < s->M; i++)
            for (int64_t j = 0; j < s->N; j++) {
                uint64_t acc = 0; /* wraps like the fixed-width integer types */
                for (int64_t k = 0; k < s->K; k++)
                    acc += (uint64_t)A[ao + i * s->K + k] * (uint64_t)B[bo + k * s->N + j];
                y[i * s->N + j] = (int64_t)acc;
            }
    }
}

static int64_t *to_i64(const IrTensor *t) {
    int64_t n = numel(t);
    int64_t *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    if (!d) return NULL;
    for (int64_t i = 0; i < n; i++) d[i] = interp_get_i(t, i);
    return d;
}

static IrStatus mm_f32(KernelArgs *a, const MMShape *s, const float *A, const float *B, float *Y) {
    int th = k_threads(a);
    /* B shared by every batch and A's batches contiguous: one tall GEMM. */
    bool b_shared = true, a_dense = true;
    for (uint32_t i = 0; i < s->brank; i++) {
        if (s->bstr[i] != 0 && s->bdims[i] != 1) b_shared = false;
        if (s->astr[i] == 0 && s->bdims[i] != 1) a_dense = false;
    }
    if (b_shared && a_dense) {
        SgemmArgs g = {s->M * s->nbatch, s->N, s->K, A, s->K, 1, B, s->N, 1, Y, s->N};
        return sgemm(&g, th) ? IR_OK : oom(a);
    }
    for (int64_t bi = 0; bi < s->nbatch; bi++) {
        int64_t ao, bo;
        mm_batch_offsets(s, bi, &ao, &bo);
        SgemmArgs g = {s->M, s->N, s->K, A + ao, s->K, 1, B + bo, s->N, 1, Y + bi * s->M * s->N, s->N};
        if (!sgemm(&g, th)) return oom(a);
    }
    return IR_OK;
}

IrStatus interp_MAT_MUL(KernelArgs *a) {
    const IrTensor *A = a->in[0], *B = a->in[1];
    if (A->dtype != B->dtype) return interp_error(a, "operand dtypes differ");
    MMShape s;
    IrStatus st = mm_shape(a, A, B, &s);
    if (st) return st;
    if ((st = interp_alloc_output(a, 0, A->dtype, s.out_rank, s.out_dims))) return st;
    if (numel(&a->out[0]) == 0) return IR_OK;
    if (A->dtype == IR_DTYPE_F32) return mm_f32(a, &s, A->data, B->data, a->out[0].data);
    int64_t n = numel(&a->out[0]);
    if (ir_dtype_is_float(A->dtype)) {
        double *x = to_f64(A), *y = to_f64(B), *o = malloc((size_t)n * sizeof(double));
        if (x && y && o) {
            mm_generic_f64(&s, x, y, o);
            for (int64_t i = 0; i < n; i++) interp_set_f(&a->out[0], i, o[i]);
        }
        bool ok = x && y && o;
        free(x), free(y), free(o);
        return ok ? IR_OK : oom(a);
    }
    if (!ir_dtype_is_int(A->dtype)) return interp_unsupported(a, "this dtype");
    int64_t *x = to_i64(A), *y = to_i64(B), *o = malloc((size_t)n * sizeof(int64_t));
    if (x && y && o) {
        mm_generic_i64(&s, x, y, o);
        for (int64_t i = 0; i < n; i++) interp_set_i(&a->out[0], i, o[i]);
    }
    bool ok = x && y && o;
    free(x), free(y), free(o);
    return ok ? IR_OK : oom(a);
}

/* MatMulInteger / QLinearMatMul: (A - a_zp) @ (B - b_zp) exactly in int64. a_zp is a scalar or
 * per row of A ([M] or [..., M, 1]); b_zp a scalar or per column ([N] or [..., 1, N]). */
static IrStatus mm_integer(KernelArgs *a, const IrTensor *A, const IrTensor *B, const IrTensor *azp,
                           const IrTensor *bzp, MMShape *s, int64_t **out) {
    IrStatus st = mm_shape(a, A, B, s);
    if (st) return st;
    int64_t *x = to_i64(A), *y = to_i64(B);
    int64_t n = s->nbatch * s->M * s->N;
    int64_t *o = malloc((size_t)(n > 0 ? n : 1) * sizeof(int64_t));
    if (!x || !y || !o) {
        free(x), free(y), free(o);
        return oom(a);
    }
    if (azp && numel(azp) > 0) {
        int64_t nz = numel(azp);
        for (int64_t i = 0; i < numel(A); i++) {
            int64_t row = i / s->K; /* linear row index over A's batches */
            x[i] -= interp_get_i(azp, nz == 1 ? 0 : row % nz);
        }
    }
    if (bzp && numel(bzp) > 0) {
        int64_t nz = numel(bzp);
        for (int64_t i = 0; i < numel(B); i++) {
            int64_t col = (i / (s->K * s->N)) * s->N + i % s->N;
            y[i] -= interp_get_i(bzp, nz == 1 ? 0 : col % nz);
        }
    }
    mm_generic_i64(s, x, y, o);
    free(x), free(y);
    *out = o;
    return IR_OK;
}

IrStatus interp_MAT_MUL_INTEGER(KernelArgs *a) {
    MMShape s;
    int64_t *o;
    IrStatus st = mm_integer(a, a->in[0], a->in[1], a->n_in > 2 ? a->in[2] : NULL,
                             a->n_in > 3 ? a->in[3] : NULL, &s, &o);
    if (st) return st;
    if ((st = interp_alloc_output(a, 0, IR_DTYPE_I32, s.out_rank, s.out_dims))) {
        free(o);
        return st;
    }
    for (int64_t i = 0; i < numel(&a->out[0]); i++) interp_set_i(&a->out[0], i, o[i]);
    free(o);
    return IR_OK;
}

/* Requantization shared by the QLinear ops: round half to even, add the zero point, saturate. */
static int64_t qsat(double v, IrDType dt) {
    double r = nearbyint(v); /* default rounding mode: half to even */
    double lo = dt == IR_DTYPE_U8 ? 0 : dt == IR_DTYPE_I8 ? -128 : dt == IR_DTYPE_U16 ? 0 : dt == IR_DTYPE_I16 ? -32768 : -2147483648.0;
    double hi = dt == IR_DTYPE_U8 ? 255 : dt == IR_DTYPE_I8 ? 127 : dt == IR_DTYPE_U16 ? 65535 : dt == IR_DTYPE_I16 ? 32767 : 2147483647.0;
    if (!(r >= lo)) r = lo; /* NaN saturates low */
    if (r > hi) r = hi;
    return (int64_t)r;
}

IrStatus interp_QLINEAR_MAT_MUL(KernelArgs *a) {
    const IrTensor *A = a->in[0], *as = a->in[1], *azp = a->in[2], *B = a->in[3], *bs = a->in[4],
                   *bzp = a->in[5], *ys = a->in[6], *yzp = a->in[7];
    if (!as || !bs || !ys || !yzp || !numel(as) || !numel(bs) || !numel(ys) || !numel(yzp))
        return interp_error(a, "scales and output zero point are required");
    MMShape s;
    int64_t *o;
    IrStatus st = mm_integer(a, A, B, azp, bzp, &s, &o);
    if (st) return st;
    if ((st = interp_alloc_output(a, 0, yzp->dtype, s.out_rank, s.out_dims))) {
        free(o);
        return st;
    }
    int64_t nas = numel(as), nbs = numel(bs);
    double ysc = interp_get_f(ys, 0), yz = (double)interp_get_i(yzp, 0);
    for (int64_t bi = 0, e = 0; bi < s.nbatch; bi++)
        for (int64_t i = 0; i < s.M; i++)
            for (int64_t j = 0; j < s.N; j++, e++) {
                float sa = (float)interp_get_f(as, nas == 1 ? 0 : i % nas);
                float sb = (float)interp_get_f(bs, nbs == 1 ? 0 : j % nbs);
                double m = (double)(float)(sa * sb) / ysc;
                interp_set_i(&a->out[0], e, qsat((double)o[e] * m + yz, yzp->dtype));
            }
    free(o);
    return IR_OK;
}

/* ---- Gemm --------------------------------------------------------------------------------- */

IrStatus interp_GEMM(KernelArgs *a) {
    const IrTensor *A = a->in[0], *B = a->in[1], *C = a->n_in > 2 ? a->in[2] : NULL;
    if (A->rank != 2 || B->rank != 2) return interp_error(a, "A and B must be rank 2");
    bool ta = interp_attr_int(a, "transA") != 0, tb = interp_attr_int(a, "transB") != 0;
    double alpha = interp_attr_float(a, "alpha"), beta = interp_attr_float(a, "beta");
    int64_t M = ta ? A->dims[1] : A->dims[0], K = ta ? A->dims[0] : A->dims[1];
    int64_t Kb = tb ? B->dims[1] : B->dims[0], N = tb ? B->dims[0] : B->dims[1];
    if (K != Kb) return interp_error(a, "contraction dims differ: %lld vs %lld", (long long)K, (long long)Kb);
    int64_t cd[2] = {1, 1};
    if (C) {
        if (C->rank > 2) return interp_error(a, "C must have rank <= 2");
        for (uint32_t i = 0; i < C->rank; i++) cd[2 - C->rank + i] = C->dims[i];
        if ((cd[0] != 1 && cd[0] != M) || (cd[1] != 1 && cd[1] != N))
            return interp_error(a, "C does not broadcast to [%lld, %lld]", (long long)M, (long long)N);
    }
    int64_t od[2] = {M, N};
    IrStatus st = interp_alloc_output(a, 0, A->dtype, 2, od);
    if (st) return st;
    IrTensor *Y = &a->out[0];
    if (M * N == 0) return IR_OK;
    if (A->dtype == IR_DTYPE_F32 && B->dtype == IR_DTYPE_F32) {
        float *y = Y->data;
        SgemmArgs g = {M, N, K, A->data, ta ? 1 : K, ta ? M : 1, B->data, tb ? 1 : N, tb ? K : 1, y, N};
        if (!sgemm(&g, k_threads(a))) return oom(a);
        float fa = (float)alpha, fb = (float)beta;
        if (fa != 1.0f)
            for (int64_t i = 0; i < M * N; i++) y[i] = fa * y[i];
        if (C && fb != 0.0f)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    int64_t ci = (cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j);
                    y[i * N + j] += fb * (C->dtype == IR_DTYPE_F32 ? ((const float *)C->data)[ci] : (float)interp_get_f(C, ci));
                }
        return IR_OK;
    }
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += interp_get_f(A, ta ? k * M + i : i * K + k) * interp_get_f(B, tb ? j * K + k : k * N + j);
            double v = alpha * acc;
            if (C && beta != 0) v += beta * interp_get_f(C, (cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j));
            interp_set_f(Y, i * N + j, v);
        }
    return IR_OK;
}

/* ---- convolution geometry ----------------------------------------------------------------- */

/* Spatial dims are padded to three (leading size-1 dims), so every loop is 3-D. */
typedef InterpWindow ConvGeom;

static IrStatus conv_geom(KernelArgs *a, const IrTensor *X, const IrTensor *W, ConvGeom *g) {
    if (X->rank < 3 || X->rank > 5) return interp_error(a, "input must have rank 3..5 (got %u)", X->rank);
    if (W->rank != X->rank) return interp_error(a, "weight rank %u differs from input rank %u", W->rank, X->rank);
    g->r = X->rank - 2;
    g->N = X->dims[0];
    g->C = X->dims[1];
    g->M = W->dims[0];
    g->G = interp_attr_int(a, "group");
    if (g->G < 1 || g->C % g->G || g->M % g->G)
        return interp_error(a, "group %lld does not divide the channels", (long long)g->G);
    if (W->dims[1] != g->C / g->G)
        return interp_error(a, "weight has %lld input channels, expected %lld", (long long)W->dims[1], (long long)(g->C / g->G));
    int64_t ks[3];
    int n = interp_attr_ints(a, "kernel_shape", ks, 3);
    for (uint32_t i = 0; i < g->r; i++) {
        g->in[i] = X->dims[2 + i];
        g->k[i] = W->dims[2 + i];
        if (n > 0 && (n != (int)g->r || ks[i] != g->k[i])) return interp_error(a, "kernel_shape does not match the weight");
    }
    return interp_window_finish(a, g, false);
}

/* Naive convolution in double: y[n, m, o...] = sum_{c, k...} x * w (+ bias). x and w are
 * already zero-point-corrected for the integer forms. */
static void conv_f64(const ConvGeom *g, const double *x, const double *w, const double *bias, double *y) {
    int64_t Cg = g->C / g->G, Mg = g->M / g->G;
    int64_t isz = g->in[0] * g->in[1] * g->in[2], osz = g->out[0] * g->out[1] * g->out[2];
    int64_t ksz = g->k[0] * g->k[1] * g->k[2];
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t m = 0; m < g->M; m++) {
            int64_t grp = m / Mg;
            double *yo = y + (n * g->M + m) * osz;
            for (int64_t o0 = 0; o0 < g->out[0]; o0++)
                for (int64_t o1 = 0; o1 < g->out[1]; o1++)
                    for (int64_t o2 = 0; o2 < g->out[2]; o2++) {
                        double acc = 0;
                        for (int64_t c = 0; c < Cg; c++) {
                            const double *xc = x + (n * g->C + grp * Cg + c) * isz;
                            const double *wc = w + (m * Cg + c) * ksz;
                            for (int64_t k0 = 0; k0 < g->k[0]; k0++) {
                                int64_t i0 = o0 * g->s[0] - g->pb[0] + k0 * g->d[0];
                                if (i0 < 0 || i0 >= g->in[0]) continue;
                                for (int64_t k1 = 0; k1 < g->k[1]; k1++) {
                                    int64_t i1 = o1 * g->s[1] - g->pb[1] + k1 * g->d[1];
                                    if (i1 < 0 || i1 >= g->in[1]) continue;
                                    for (int64_t k2 = 0; k2 < g->k[2]; k2++) {
                                        int64_t i2 = o2 * g->s[2] - g->pb[2] + k2 * g->d[2];
                                        if (i2 < 0 || i2 >= g->in[2]) continue;
                                        acc += xc[(i0 * g->in[1] + i1) * g->in[2] + i2] *
                                               wc[(k0 * g->k[1] + k1) * g->k[2] + k2];
                                    }
                                }
                            }
                        }
                        if (bias) acc += bias[m];
                        yo[(o0 * g->out[1] + o1) * g->out[2] + o2] = acc;
                    }
        }
}

/* im2col for one image and group: col[(c, k0, k1, k2), (o0, o1, o2)]. */
static void im2col_f32(const ConvGeom *g, const float *x, int64_t Cg, float *col) {
    int64_t osz = g->out[0] * g->out[1] * g->out[2];
    int64_t isz = g->in[0] * g->in[1] * g->in[2];
    float *dst = col;
    for (int64_t c = 0; c < Cg; c++) {
        const float *xc = x + c * isz;
        for (int64_t k0 = 0; k0 < g->k[0]; k0++)
            for (int64_t k1 = 0; k1 < g->k[1]; k1++)
                for (int64_t k2 = 0; k2 < g->k[2]; k2++, dst += osz) {
                    float *d = dst;
                    for (int64_t o0 = 0; o0 < g->out[0]; o0++) {
                        int64_t i0 = o0 * g->s[0] - g->pb[0] + k0 * g->d[0];
                        bool in0 = i0 >= 0 && i0 < g->in[0];
                        for (int64_t o1 = 0; o1 < g->out[1]; o1++, d += g->out[2]) {
                            int64_t i1 = o1 * g->s[1] - g->pb[1] + k1 * g->d[1];
                            if (!in0 || i1 < 0 || i1 >= g->in[1]) {
                                for (int64_t o2 = 0; o2 < g->out[2]; o2++) d[o2] = 0.0f;
                                continue;
                            }
                            const float *row = xc + (i0 * g->in[1] + i1) * g->in[2];
                            int64_t base = k2 * g->d[2] - g->pb[2];
                            if (g->s[2] == 1) {
                                for (int64_t o2 = 0; o2 < g->out[2]; o2++) {
                                    int64_t i2 = o2 + base;
                                    d[o2] = i2 >= 0 && i2 < g->in[2] ? row[i2] : 0.0f;
                                }
                            } else {
                                for (int64_t o2 = 0; o2 < g->out[2]; o2++) {
                                    int64_t i2 = o2 * g->s[2] + base;
                                    d[o2] = i2 >= 0 && i2 < g->in[2] ? row[i2] : 0.0f;
                                }
                            }
                        }
                    }
                }
    }
}

static IrStatus conv_f32(KernelArgs *a, const ConvGeom *g, const float *x, const float *w, const float *b, float *y) {
    int64_t Cg = g->C / g->G, Mg = g->M / g->G;
    int64_t isz = g->in[0] * g->in[1] * g->in[2], osz = g->out[0] * g->out[1] * g->out[2];
    int64_t ksz = g->k[0] * g->k[1] * g->k[2], K = Cg * ksz;
    bool direct = ksz == 1;
    for (int i = 0; i < 3; i++)
        if (g->s[i] != 1 || g->pb[i] || g->pe[i]) direct = false;
    float *col = NULL;
    if (!direct && K * osz > 0) {
        col = malloc((size_t)(K * osz) * sizeof(float));
        if (!col) return oom(a);
    }
    int th = k_threads(a);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t grp = 0; grp < g->G; grp++) {
            const float *xg = x + (n * g->C + grp * Cg) * isz;
            if (!direct) im2col_f32(g, xg, Cg, col);
            SgemmArgs s = {Mg, osz, K, w + grp * Mg * K, K, 1, direct ? xg : col, osz, 1,
                           y + (n * g->M + grp * Mg) * osz, osz};
            if (!sgemm(&s, th)) {
                free(col);
                return oom(a);
            }
        }
    free(col);
    if (b)
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t m = 0; m < g->M; m++) {
                float *yo = y + (n * g->M + m) * osz;
                float bv = b[m];
                for (int64_t p = 0; p < osz; p++) yo[p] += bv;
            }
    return IR_OK;
}

static void conv_out_dims(const ConvGeom *g, int64_t *od) {
    od[0] = g->N;
    od[1] = g->M;
    for (uint32_t i = 0; i < g->r; i++) od[2 + i] = g->out[3 - g->r + i];
}

IrStatus interp_CONV(KernelArgs *a) {
    const IrTensor *X = a->in[0], *W = a->in[1], *B = a->n_in > 2 ? a->in[2] : NULL;
    ConvGeom g = {0};
    IrStatus st = conv_geom(a, X, W, &g);
    if (st) return st;
    if (B && numel(B) != g.M) return interp_error(a, "bias must have %lld entries", (long long)g.M);
    int64_t od[5];
    conv_out_dims(&g, od);
    if ((st = interp_alloc_output(a, 0, X->dtype, X->rank, od))) return st;
    if (numel(&a->out[0]) == 0) return IR_OK;
    if (X->dtype == IR_DTYPE_F32 && W->dtype == IR_DTYPE_F32 && (!B || B->dtype == IR_DTYPE_F32))
        return conv_f32(a, &g, X->data, W->data, B ? B->data : NULL, a->out[0].data);
    double *x = to_f64(X), *w = to_f64(W), *b = B ? to_f64(B) : NULL;
    int64_t n = numel(&a->out[0]);
    double *y = malloc((size_t)n * sizeof(double));
    bool ok = x && w && y && (!B || b);
    if (ok) {
        conv_f64(&g, x, w, b, y);
        for (int64_t i = 0; i < n; i++) interp_set_f(&a->out[0], i, y[i]);
    }
    free(x), free(w), free(b), free(y);
    return ok ? IR_OK : oom(a);
}

/* Subtracts a zero point (scalar, or per channel along axis 0 of a tensor of `per` blocks). */
static void sub_zero_point(double *v, int64_t n, const IrTensor *zp, int64_t channels, int64_t block) {
    if (!zp || numel(zp) == 0) return;
    int64_t nz = numel(zp);
    for (int64_t i = 0; i < n; i++) {
        int64_t ch = nz == 1 ? 0 : (i / block) % channels;
        v[i] -= (double)interp_get_i(zp, ch < nz ? ch : 0);
    }
}

/* Conv on (x - x_zp), (w - w_zp) in double (exact for 8-bit data); y is malloc'd. */
static IrStatus conv_integer_core(KernelArgs *a, const IrTensor *X, const IrTensor *xzp, const IrTensor *W,
                                  const IrTensor *wzp, ConvGeom *g, double **y) {
    IrStatus st = conv_geom(a, X, W, g);
    if (st) return st;
    if (xzp && numel(xzp) > 1) return interp_unsupported(a, "a per-channel input zero point");
    double *x = to_f64(X), *w = to_f64(W);
    int64_t n = g->N * g->M * g->out[0] * g->out[1] * g->out[2];
    double *o = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!x || !w || !o) {
        free(x), free(w), free(o);
        return oom(a);
    }
    sub_zero_point(x, numel(X), xzp, 1, 1);
    sub_zero_point(w, numel(W), wzp, g->M, numel(W) / (g->M ? g->M : 1));
    conv_f64(g, x, w, NULL, o);
    free(x), free(w);
    *y = o;
    return IR_OK;
}

IrStatus interp_CONV_INTEGER(KernelArgs *a) {
    ConvGeom g = {0};
    double *y;
    IrStatus st = conv_integer_core(a, a->in[0], a->n_in > 2 ? a->in[2] : NULL, a->in[1],
                                    a->n_in > 3 ? a->in[3] : NULL, &g, &y);
    if (st) return st;
    int64_t od[5];
    conv_out_dims(&g, od);
    if ((st = interp_alloc_output(a, 0, IR_DTYPE_I32, a->in[0]->rank, od))) {
        free(y);
        return st;
    }
    for (int64_t i = 0; i < numel(&a->out[0]); i++) interp_set_i(&a->out[0], i, (int64_t)y[i]);
    free(y);
    return IR_OK;
}

IrStatus interp_QLINEAR_CONV(KernelArgs *a) {
    const IrTensor *X = a->in[0], *xs = a->in[1], *xzp = a->in[2], *W = a->in[3], *ws = a->in[4],
                   *wzp = a->in[5], *ys = a->in[6], *yzp = a->in[7], *B = a->n_in > 8 ? a->in[8] : NULL;
    if (!xs || !ws || !ys || !yzp || !numel(xs) || !numel(ws) || !numel(ys) || !numel(yzp))
        return interp_error(a, "scales and output zero point are required");
    if (B && numel(B) == 0) B = NULL; /* an empty bias: none */
    ConvGeom g = {0};
    double *y;
    IrStatus st = conv_integer_core(a, X, xzp, W, wzp, &g, &y);
    if (st) return st;
    int64_t od[5];
    conv_out_dims(&g, od);
    if ((st = interp_alloc_output(a, 0, yzp->dtype, X->rank, od))) {
        free(y);
        return st;
    }
    int64_t osz = g.out[0] * g.out[1] * g.out[2], nws = numel(ws);
    float fxs = (float)interp_get_f(xs, 0), fys = (float)interp_get_f(ys, 0);
    double yz = (double)interp_get_i(yzp, 0);
    for (int64_t i = 0; i < numel(&a->out[0]); i++) {
        int64_t m = (i / osz) % g.M;
        double acc = y[i] + (B ? (double)interp_get_i(B, m) : 0.0);
        float sw = (float)interp_get_f(ws, nws == 1 ? 0 : m);
        double mult = (double)(float)(fxs * sw) / (double)fys;
        interp_set_i(&a->out[0], i, qsat(acc * mult + yz, yzp->dtype));
    }
    free(y);
    return IR_OK;
}

/* ---- ConvTranspose ------------------------------------------------------------------------ */

/* f32 ConvTranspose: per image and group, cols[(m, k...), i...] = W_g^T @ X_g through the GEMM
 * (each column sums over input channels in increasing order), then col2im scatter-adds the
 * columns into the output in a fixed (m, k, i) order and the bias is added last. */
static IrStatus conv_transpose_f32(KernelArgs *a, const ConvGeom *g, const float *x, const float *w, const float *b,
                                   float *y) {
    int64_t Cg = g->C / g->G, Mg = g->M / g->G;
    int64_t isz = g->in[0] * g->in[1] * g->in[2], osz = g->out[0] * g->out[1] * g->out[2];
    int64_t ksz = g->k[0] * g->k[1] * g->k[2], rows = Mg * ksz;
    float *col = malloc((size_t)(rows * isz > 0 ? rows * isz : 1) * sizeof(float));
    if (!col) return oom(a);
    int th = k_threads(a);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t grp = 0; grp < g->G; grp++) {
            const float *xg = x + (n * g->C + grp * Cg) * isz;
            SgemmArgs s = {rows, isz, Cg, w + grp * Cg * rows, 1, rows, xg, isz, 1, col, isz};
            if (!sgemm(&s, th)) {
                free(col);
                return oom(a);
            }
            for (int64_t mm = 0; mm < Mg; mm++) {
                float *yo = y + (n * g->M + grp * Mg + mm) * osz;
                for (int64_t k0 = 0; k0 < g->k[0]; k0++)
                    for (int64_t k1 = 0; k1 < g->k[1]; k1++)
                        for (int64_t k2 = 0; k2 < g->k[2]; k2++) {
                            const float *cr = col + ((mm * g->k[0] + k0) * g->k[1] * g->k[2] + k1 * g->k[2] + k2) * isz;
                            for (int64_t i0 = 0; i0 < g->in[0]; i0++) {
                                int64_t o0 = i0 * g->s[0] + k0 * g->d[0] - g->pb[0];
                                if (o0 < 0 || o0 >= g->out[0]) continue;
                                for (int64_t i1 = 0; i1 < g->in[1]; i1++) {
                                    int64_t o1 = i1 * g->s[1] + k1 * g->d[1] - g->pb[1];
                                    if (o1 < 0 || o1 >= g->out[1]) continue;
                                    const float *src = cr + (i0 * g->in[1] + i1) * g->in[2];
                                    float *dst = yo + (o0 * g->out[1] + o1) * g->out[2];
                                    for (int64_t i2 = 0; i2 < g->in[2]; i2++) {
                                        int64_t o2 = i2 * g->s[2] + k2 * g->d[2] - g->pb[2];
                                        if (o2 >= 0 && o2 < g->out[2]) dst[o2] += src[i2];
                                    }
                                }
                            }
                        }
            }
        }
    free(col);
    if (b)
        for (int64_t n = 0; n < g->N; n++)
            for (int64_t m = 0; m < g->M; m++)
                for (int64_t p = 0; p < osz; p++) y[(n * g->M + m) * osz + p] += b[m];
    return IR_OK;
}

IrStatus interp_CONV_TRANSPOSE(KernelArgs *a) {
    const IrTensor *X = a->in[0], *W = a->in[1], *B = a->n_in > 2 ? a->in[2] : NULL;
    if (X->rank < 3 || X->rank > 5 || W->rank != X->rank) return interp_error(a, "input and weight must have the same rank 3..5");
    ConvGeom g = {0};
    g.r = X->rank - 2;
    g.N = X->dims[0];
    g.C = X->dims[1];
    g.G = interp_attr_int(a, "group");
    if (g.G < 1 || g.C % g.G || W->dims[0] != g.C) return interp_error(a, "weight/group do not match the input channels");
    g.M = W->dims[1] * g.G;
    uint32_t r = g.r;
    int64_t v[6], op[3] = {0, 0, 0}, os[3];
    int n;
    for (uint32_t i = 0; i < r; i++) {
        g.in[i] = X->dims[2 + i];
        g.k[i] = W->dims[2 + i];
        g.s[i] = g.d[i] = 1;
        g.pb[i] = g.pe[i] = 0;
    }
    if ((n = interp_attr_ints(a, "strides", v, 6)) > 0) for (uint32_t i = 0; i < r && (int)i < n; i++) g.s[i] = v[i];
    if ((n = interp_attr_ints(a, "dilations", v, 6)) > 0) for (uint32_t i = 0; i < r && (int)i < n; i++) g.d[i] = v[i];
    if ((n = interp_attr_ints(a, "output_padding", v, 6)) > 0) for (uint32_t i = 0; i < r && (int)i < n; i++) op[i] = v[i];
    int n_os = interp_attr_ints(a, "output_shape", v, 6);
    if (n_os > 0) {
        if (n_os != (int)r && n_os != (int)r + 2) return interp_error(a, "output_shape must have %u entries", r);
        for (uint32_t i = 0; i < r; i++) os[i] = v[n_os - (int)r + (int)i];
    }
    const char *ap = interp_attr_string(a, "auto_pad");
    if (!ap || !*ap) ap = "NOTSET";
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    if (strcmp(ap, "NOTSET") == 0 && (n = interp_attr_ints(a, "pads", v, 6)) > 0) {
        if (n != 2 * (int)r) return interp_error(a, "pads must have %u entries", 2 * r);
        for (uint32_t i = 0; i < r; i++) g.pb[i] = v[i], g.pe[i] = v[r + i];
    }
    for (uint32_t i = 0; i < r; i++) {
        int64_t full = g.s[i] * (g.in[i] - 1) + op[i] + (g.k[i] - 1) * g.d[i] + 1;
        if (n_os > 0 || same) {
            int64_t want = n_os > 0 ? os[i] : g.in[i] * g.s[i];
            int64_t total = full - want;
            if (total < 0) total = 0;
            if (strcmp(ap, "SAME_UPPER") == 0) g.pb[i] = total / 2, g.pe[i] = total - total / 2;
            else g.pb[i] = total - total / 2, g.pe[i] = total / 2;
            g.out[i] = want;
        } else {
            g.out[i] = full - g.pb[i] - g.pe[i];
        }
        if (g.out[i] < 0) return interp_error(a, "negative output size");
    }
    interp_window_pad3(&g);
    if (B && numel(B) != g.M) return interp_error(a, "bias must have %lld entries", (long long)g.M);
    int64_t od[5];
    conv_out_dims(&g, od);
    IrStatus st = interp_alloc_output(a, 0, X->dtype, X->rank, od);
    if (st) return st;
    int64_t total = numel(&a->out[0]);
    if (total == 0) return IR_OK;
    if (X->dtype == IR_DTYPE_F32 && W->dtype == IR_DTYPE_F32 && (!B || B->dtype == IR_DTYPE_F32))
        return conv_transpose_f32(a, &g, X->data, W->data, B ? B->data : NULL, a->out[0].data);
    double *x = to_f64(X), *w = to_f64(W), *y = calloc((size_t)(total > 0 ? total : 1), sizeof(double));
    if (!x || !w || !y) {
        free(x), free(w), free(y);
        return oom(a);
    }
    int64_t Cg = g.C / g.G, Mg = g.M / g.G;
    int64_t isz = g.in[0] * g.in[1] * g.in[2], osz = g.out[0] * g.out[1] * g.out[2];
    int64_t ksz = g.k[0] * g.k[1] * g.k[2];
    for (int64_t nb = 0; nb < g.N; nb++)
        for (int64_t c = 0; c < g.C; c++) {
            int64_t grp = c / Cg;
            const double *xc = x + (nb * g.C + c) * isz;
            for (int64_t mm = 0; mm < Mg; mm++) {
                int64_t m = grp * Mg + mm;
                double *yo = y + (nb * g.M + m) * osz;
                const double *wk = w + (c * Mg + mm) * ksz;
                for (int64_t i0 = 0; i0 < g.in[0]; i0++)
                    for (int64_t i1 = 0; i1 < g.in[1]; i1++)
                        for (int64_t i2 = 0; i2 < g.in[2]; i2++) {
                            double xv = xc[(i0 * g.in[1] + i1) * g.in[2] + i2];
                            for (int64_t k0 = 0; k0 < g.k[0]; k0++) {
                                int64_t o0 = i0 * g.s[0] + k0 * g.d[0] - g.pb[0];
                                if (o0 < 0 || o0 >= g.out[0]) continue;
                                for (int64_t k1 = 0; k1 < g.k[1]; k1++) {
                                    int64_t o1 = i1 * g.s[1] + k1 * g.d[1] - g.pb[1];
                                    if (o1 < 0 || o1 >= g.out[1]) continue;
                                    for (int64_t k2 = 0; k2 < g.k[2]; k2++) {
                                        int64_t o2 = i2 * g.s[2] + k2 * g.d[2] - g.pb[2];
                                        if (o2 < 0 || o2 >= g.out[2]) continue;
                                        yo[(o0 * g.out[1] + o1) * g.out[2] + o2] +=
                                            xv * wk[(k0 * g.k[1] + k1) * g.k[2] + k2];
                                    }
                                }
                            }
                        }
            }
        }
    for (int64_t i = 0; i < total; i++) {
        double v2 = y[i];
        if (B) v2 += interp_get_f(B, (i / osz) % g.M);
        interp_set_f(&a->out[0], i, v2);
    }
    free(x), free(w), free(y);
    return IR_OK;
}

/* ---- Einsum ------------------------------------------------------------------------------- */

/* Labels: letters map to 0..51; ellipsis dims get labels 52.. (right-aligned across operands). */
#define EIN_MAXL 80
typedef struct EinTerm {
    int n;
    int lab[IR_MAX_RANK];
} EinTerm;

static int ein_letter(char ch) {
    if (ch >= 'a' && ch <= 'z') return ch - 'a';
    if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
    return -1;
}

/* Parses one term between p and e; ell = number of ellipsis dims for it (labels 52+ell_max-ell..). */
static bool ein_term(const char *p, const char *e, int rank, int ell_max, EinTerm *t, int *ell_out) {
    int letters = 0;
    bool has_ell = false;
    for (const char *q = p; q < e; q++) {
        if (*q == '.') {
            if (q + 2 >= e || q[1] != '.' || q[2] != '.' || has_ell) return false;
            has_ell = true;
            q += 2;
        } else if (ein_letter(*q) >= 0) {
            letters++;
        } else if (*q != ' ') {
            return false;
        }
    }
    int ell = has_ell ? rank - letters : 0;
    if (rank >= 0 && (ell < 0 || (!has_ell && letters != rank))) return false;
    if (ell_out) *ell_out = ell;
    t->n = 0;
    for (const char *q = p; q < e; q++) {
        if (*q == '.') {
            /* operands: 52.. here, shifted right-aligned to the widest ellipsis later */
            int ne = rank >= 0 ? ell : ell_max;
            for (int i = 0; i < ne; i++) {
                if (t->n >= IR_MAX_RANK) return false;
                t->lab[t->n++] = 52 + i;
            }
            q += 2;
        } else if (ein_letter(*q) >= 0) {
            if (t->n >= IR_MAX_RANK) return false;
            t->lab[t->n++] = ein_letter(*q);
        }
    }
    return true;
}

IrStatus interp_EINSUM(KernelArgs *a) {
    const char *eq = interp_attr_string(a, "equation");
    if (!eq) return interp_error(a, "equation is required");
    const char *arrow = strstr(eq, "->");
    const char *lhs_end = arrow ? arrow : eq + strlen(eq);
    uint32_t nin = a->n_in;
    EinTerm terms[16], out;
    if (nin > 16) return interp_unsupported(a, "more than 16 operands");
    const char *p = eq;
    int ell_max = 0, ells[16];
    for (uint32_t t = 0; t < nin; t++) {
        const char *e = p;
        while (e < lhs_end && *e != ',') e++;
        if (t + 1 < nin && e >= lhs_end) return interp_error(a, "equation has fewer terms than operands");
        if (!ein_term(p, e, (int)a->in[t]->rank, 0, &terms[t], &ells[t]))
            return interp_error(a, "term %u of '%s' does not match operand rank %u", t, eq, a->in[t]->rank);
        if (ells[t] > ell_max) ell_max = ells[t];
        p = e + 1;
    }
    if (p < lhs_end) return interp_error(a, "equation has more terms than operands");
    /* re-label ellipsis dims right-aligned to ell_max */
    for (uint32_t t = 0; t < nin; t++)
        for (int i = 0; i < terms[t].n; i++)
            if (terms[t].lab[i] >= 52) terms[t].lab[i] += ell_max - ells[t];
    int64_t size[EIN_MAXL];
    int count[EIN_MAXL];
    for (int l = 0; l < EIN_MAXL; l++) size[l] = -1, count[l] = 0;
    for (uint32_t t = 0; t < nin; t++)
        for (int i = 0; i < terms[t].n; i++) {
            int l = terms[t].lab[i];
            int64_t d = a->in[t]->dims[i];
            count[l]++;
            if (size[l] == -1 || size[l] == 1) size[l] = d;
            else if (d != size[l] && d != 1) return interp_error(a, "dimension mismatch for a label of '%s'", eq);
        }
    if (arrow) {
        if (!ein_term(arrow + 2, arrow + 2 + strlen(arrow + 2), -1, ell_max, &out, NULL))
            return interp_error(a, "bad output term in '%s'", eq);
        for (int i = 0; i < out.n; i++)
            if (size[out.lab[i]] < 0) return interp_error(a, "output label not in the inputs of '%s'", eq);
    } else {
        out.n = 0;
        for (int l = 52; l < 52 + ell_max; l++) out.lab[out.n++] = l;
        for (int l = 26; l < 52; l++) /* numpy: uppercase sorts before lowercase */
            if (count[l] == 1) out.lab[out.n++] = l;
        for (int l = 0; l < 26; l++)
            if (count[l] == 1) out.lab[out.n++] = l;
    }
    bool in_out[EIN_MAXL] = {0};
    for (int i = 0; i < out.n; i++) in_out[out.lab[i]] = true;
    int loops[EIN_MAXL], nl = 0;
    for (int i = 0; i < out.n; i++) loops[nl++] = out.lab[i];
    for (int l = 0; l < EIN_MAXL; l++)
        if (size[l] >= 0 && !in_out[l]) loops[nl++] = l;
    int64_t od[IR_MAX_RANK];
    for (int i = 0; i < out.n; i++) od[i] = size[out.lab[i]];
    IrStatus st = interp_alloc_output(a, 0, a->in[0]->dtype, (uint32_t)out.n, od);
    if (st) return st;
    int64_t total_out = numel(&a->out[0]);
    int64_t inner = 1;
    for (int i = out.n; i < nl; i++) inner *= size[loops[i]];
    /* per operand, stride of each label (0 when broadcast) */
    int64_t lstride[16][EIN_MAXL];
    for (uint32_t t = 0; t < nin; t++) {
        int64_t str[IR_MAX_RANK];
        ir_shape_strides(a->in[t]->rank, a->in[t]->dims, str);
        for (int l = 0; l < EIN_MAXL; l++) lstride[t][l] = 0;
        for (int i = 0; i < terms[t].n; i++)
            if (a->in[t]->dims[i] != 1) lstride[t][terms[t].lab[i]] += str[i];
    }
    /* operands converted once; the summed labels walk an odometer with per-operand strides */
    bool is_int = ir_dtype_is_int(a->in[0]->dtype);
    double *fv[16] = {0};
    int64_t *iv[16] = {0};
    bool ok = true;
    for (uint32_t t = 0; t < nin && ok; t++) ok = is_int ? (iv[t] = to_i64(a->in[t])) != NULL : (fv[t] = to_f64(a->in[t])) != NULL;
    if (!ok) {
        for (uint32_t t = 0; t < nin; t++) free(fv[t]), free(iv[t]);
        return oom(a);
    }
    int64_t idx[EIN_MAXL], base[16], off[16];
    for (int64_t o = 0; o < total_out; o++) {
        int64_t rem = o;
        for (int i = out.n; i-- > 0;) {
            idx[i] = rem % size[loops[i]];
            rem /= size[loops[i]];
        }
        for (uint32_t t = 0; t < nin; t++) {
            base[t] = 0;
            for (int i = 0; i < out.n; i++) base[t] += idx[i] * lstride[t][loops[i]];
            off[t] = base[t];
        }
        for (int i = out.n; i < nl; i++) idx[i] = 0;
        double acc = 0;
        uint64_t iacc = 0;
        for (int64_t q = 0; q < inner; q++) {
            if (is_int) {
                uint64_t prod = 1;
                for (uint32_t t = 0; t < nin; t++) prod *= (uint64_t)iv[t][off[t]];
                iacc += prod;
            } else {
                double prod = 1;
                for (uint32_t t = 0; t < nin; t++) prod *= fv[t][off[t]];
                acc += prod;
            }
            for (int i = nl; i-- > out.n;) { /* advance the odometer over the summed labels */
                int l = loops[i];
                for (uint32_t t = 0; t < nin; t++) off[t] += lstride[t][l];
                if (++idx[i] < size[l]) break;
                for (uint32_t t = 0; t < nin; t++) off[t] -= lstride[t][l] * size[l];
                idx[i] = 0;
            }
        }
        if (is_int) interp_set_i(&a->out[0], o, (int64_t)iacc);
        else interp_set_f(&a->out[0], o, acc);
    }
    for (uint32_t t = 0; t < nin; t++) free(fv[t]), free(iv[t]);
    return IR_OK;
}

/* ---- Det ---------------------------------------------------------------------------------- */

IrStatus interp_DET(KernelArgs *a) {
    const IrTensor *X = a->in[0];
    if (X->rank < 2 || X->dims[X->rank - 1] != X->dims[X->rank - 2])
        return interp_error(a, "input must be [..., M, M]");
    int64_t m = X->dims[X->rank - 1];
    IrStatus st = interp_alloc_output(a, 0, X->dtype, X->rank - 2, X->dims);
    if (st) return st;
    int64_t nb = numel(&a->out[0]);
    double *lu = malloc((size_t)(m * m > 0 ? m * m : 1) * sizeof(double));
    if (!lu) return oom(a);
    for (int64_t b = 0; b < nb; b++) {
        for (int64_t i = 0; i < m * m; i++) lu[i] = interp_get_f(X, b * m * m + i);
        double det = ir_det_lu(lu, m);
        interp_set_f(&a->out[0], b, det);
    }
    free(lu);
    return IR_OK;
}

/* ---- irtool.fp8_matmul -------------------------------------------------------------------- */

/* out = (decode(a) * a_scale) @ (decode(b) * b_scale) + bias. Operands are decoded and scaled in
 * f32 (one rounding each); the products are summed in f32, FMA-free, in increasing k order
 * from 0.0f (the GEMM above), then the bias is added in f32 and the result converted to
 * out_dtype (round to nearest even). a_scale: a scalar or one per row of a ([M]); b_scale: a
 * scalar or one per column of b ([N]). */
IrStatus interp_FP8_MAT_MUL(KernelArgs *a) {
    const IrTensor *A = a->in[0], *B = a->in[1], *as = a->in[2], *bs = a->in[3];
    const IrTensor *bias = a->n_in > 4 ? a->in[4] : NULL;
    for (int i = 0; i < 2; i++) {
        IrDType d = a->in[i]->dtype;
        if (d != IR_DTYPE_F8E4M3FN && d != IR_DTYPE_F8E5M2) return interp_error(a, "operand %d must be fp8, got %s", i, ir_dtype_name(d));
    }
    if (!as || !bs) return interp_error(a, "a_scale and b_scale are required");
    IrDType od = (IrDType)interp_attr_int(a, "out_dtype");
    MMShape s;
    IrStatus st = mm_shape(a, A, B, &s);
    if (st) return st;
    int64_t nas = numel(as), nbs = numel(bs);
    if ((nas != 1 && nas != s.M) || (nbs != 1 && nbs != s.N))
        return interp_error(a, "a_scale must be a scalar or [M], b_scale a scalar or [N]");
    if ((st = interp_alloc_output(a, 0, od, s.out_rank, s.out_dims))) return st;
    int64_t na = numel(A), nb = numel(B), ny = numel(&a->out[0]);
    float *fa = malloc((size_t)(na > 0 ? na : 1) * sizeof(float)), *fb = malloc((size_t)(nb > 0 ? nb : 1) * sizeof(float));
    float *fy = malloc((size_t)(ny > 0 ? ny : 1) * sizeof(float));
    if (!fa || !fb || !fy) {
        free(fa), free(fb), free(fy);
        return oom(a);
    }
    const uint8_t *pa = A->data, *pb = B->data;
    for (int64_t i = 0; i < na; i++) {
        float v = A->dtype == IR_DTYPE_F8E4M3FN ? ir_f8e4m3fn_to_f32(pa[i]) : ir_f8e5m2_to_f32(pa[i]);
        fa[i] = v * (float)interp_get_f(as, nas == 1 ? 0 : (i / s.K) % s.M);
    }
    for (int64_t i = 0; i < nb; i++) {
        float v = B->dtype == IR_DTYPE_F8E4M3FN ? ir_f8e4m3fn_to_f32(pb[i]) : ir_f8e5m2_to_f32(pb[i]);
        fb[i] = v * (float)interp_get_f(bs, nbs == 1 ? 0 : i % s.N);
    }
    st = ny ? mm_f32(a, &s, fa, fb, fy) : IR_OK;
    if (!st) {
        IrTensor *Y = &a->out[0];
        int64_t nbias = bias ? numel(bias) : 0;
        for (int64_t i = 0; i < ny; i++) {
            float v = fy[i];
            if (nbias) v += (float)interp_get_f(bias, nbias == 1 ? 0 : (i % s.N) % nbias);
            interp_set_f(Y, i, (double)v);
        }
    }
    free(fa), free(fb), free(fy);
    return st;
}

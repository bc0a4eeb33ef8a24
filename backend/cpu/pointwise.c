/* 1x1 Conv (stride 1, no padding, one group) as a generated register-tiled GEMM for targets
 * where the packed GEMM of gemm.c is not used (AVX2): per image Y [m x n] = W [m x k] * X [k x n]
 * with the weights packed at compile time in blocks of r rows, k-major (each K step's r weights
 * one contiguous run), an r x (nv vectors) tile of Y in registers across the whole K loop, the
 * bias seeding it and the caller's epilogue applied before its only store. Nothing is packed at
 * run time and nothing is called, which at the small pixel counts of late layers beats a BLAS call.
 * At 4 pixels or fewer the tile turns around: rows in the lanes, each K step's weights of the
 * block a few 8-lane loads and each pixel's X value broadcast (pw_tile's bc). */
#include "backend/llvm/emit.h"
#include "backend/cpu/cpu.h"

#include <stdlib.h>

/* Where the generated kernel beat OpenBLAS, one 1x1 Conv + Relu at a time on an AVX2 EPYC
 * (docs/cpu_speed.md): X's block of one column tile (k x tile width) within L1, since it is read
 * again for every row block; and a few hundred pixels at most, unless k is tiny (above that
 * OpenBLAS's blocking wins, ResNet-50's 56x56 and 28x28 layers by 5-25%). */
#define PW_X_BYTES (32 << 10)
#define PW_MAX_PIXELS 256
#define PW_SMALL_K 32

typedef struct PwTile {
    int vw, nv, r; /* lanes per vector, vectors per tile row, rows per tile */
    bool bc;       /* n <= 4: r / 8 vectors of 8 rows per pixel, X broadcast (vw 4 for the stores) */
} PwTile;

/* Tiles of at most 12 accumulators (AVX2's 16 registers: 12, the X vectors and a broadcast).
 * At n <= 4 the row tile of 8 x 1 vector of 4 lanes took 9 loads (X and 8 broadcast weights) per
 * 8 FMAs of 4 lanes; rows in lanes take r / 8 + n loads per r / 8 * n FMAs of 8 lanes
 * (MobileNetV2's 2x2-pixel 1x1 layers on Zen 3: see docs/performance.md). */
static PwTile pw_tile(int64_t n) {
    PwTile t = {.vw = n <= 4 ? 4 : 8};
    if (n <= 4) {
        t.bc = true;
        t.nv = (int)n;
        t.r = n == 4 ? 24 : 32;
        return t;
    }
    int64_t v = (n + t.vw - 1) / t.vw;
    t.nv = v >= 3 ? 3 : (int)v;
    t.r = t.nv == 3 ? 4 : t.nv == 2 ? 6 : 8;
    return t;
}

bool llvm_pointwise_fits(int64_t m, int64_t n, int64_t k, unsigned simd_bits) {
    if (simd_bits < 256 || llvm_pgemm_vector_width(simd_bits) || m < 1 || n < 1 || k < 1) return false;
    PwTile t = pw_tile(n);
    int64_t cols = t.bc ? n : (int64_t)t.nv * t.vw;
    return k * cols * 4 <= PW_X_BYTES && (n <= PW_MAX_PIXELS || k <= PW_SMALL_K);
}

int64_t llvm_pointwise_units(int64_t m, int64_t n) {
    PwTile t = pw_tile(n);
    return (m + t.r - 1) / t.r;
}

float *llvm_pointwise_pack(int64_t m, int64_t n, int64_t k, const float *w, size_t *bytes) {
    PwTile t = pw_tile(n);
    int64_t blocks = (m + t.r - 1) / t.r;
    *bytes = (size_t)(blocks * t.r * k) * sizeof(float);
    float *out = malloc(*bytes);
    if (!out) return NULL;
    for (int64_t b = 0; b < blocks; b++)
        for (int64_t kk = 0; kk < k; kk++)
            for (int i = 0; i < t.r; i++) {
                int64_t row = b * t.r + i;
                out[(b * k + kk) * t.r + i] = row < m ? w[row * k + kk] : 0.0f;
            }
    return out;
}

typedef struct Pw {
    const LlvmPointwise *p;
    PwTile t;
    LLVMBuilderRef b, ab;
    LLVMValueRef fn;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMTypeRef i1, i32, i64, f32, vt;
    LLVMValueRef acc[12]; /* allocas: the tile's accumulators (8 lanes with t.bc) */
} Pw;

static LLVMValueRef ci(Pw *q, int64_t v) { return LLVMConstInt(q->i64, (unsigned long long)v, 1); }
static LLVMValueRef add(Pw *q, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(q->b, a, b, ""); }
static LLVMValueRef mul(Pw *q, LLVMValueRef a, int64_t k) { return LLVMBuildMul(q->b, a, ci(q, k), ""); }
static LLVMValueRef at(Pw *q, LLVMValueRef p, LLVMValueRef off) { return LLVMBuildGEP2(q->b, q->f32, p, &off, 1, ""); }

static LLVMValueRef splat(Pw *q, LLVMValueRef s) {
    LLVMValueRef v = LLVMBuildInsertElement(q->b, LLVMGetUndef(q->vt), s, LLVMConstInt(q->i32, 0, 0), "");
    return LLVMBuildShuffleVector(q->b, v, LLVMGetUndef(q->vt), LLVMConstNull(LLVMVectorType(q->i32, (unsigned)q->t.vw)), "");
}

static LLVMValueRef fma_v(Pw *q, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    unsigned id = LLVMLookupIntrinsicID("llvm.fma", 8);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(q->mod, id, &q->vt, 1), args[3] = {a, b, c};
    return LLVMBuildCall2(q->b, LLVMIntrinsicGetType(q->ctx, id, &q->vt, 1), f, args, 3, "");
}

static LLVMValueRef ld_f32(Pw *q, LLVMValueRef p) {
    LLVMValueRef v = LLVMBuildLoad2(q->b, q->f32, p, "");
    LLVMSetAlignment(v, 4);
    return v;
}

/* The tile of rows [row0, row0 + rows) of block mb and columns n0 .. (nv vectors, the last of
 * `last` lanes): K loop, bias, epilogue, stores. */
static void tile(Pw *q, LLVMValueRef mb, LLVMValueRef row0, int rows, LLVMValueRef n0, int nv, int last) {
    const LlvmPointwise *p = q->p;
    LLVMBuilderRef b = q->b;
    int vw = q->t.vw, r = q->t.r;
    LLVMValueRef init[8];
    for (int i = 0; i < rows; i++)
        init[i] = p->bias ? splat(q, ld_f32(q, at(q, p->bias, add(q, row0, ci(q, i))))) : LLVMConstNull(q->vt);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < nv; j++) LLVMBuildStore(b, init[i], q->acc[i * q->t.nv + j]);
    LlvmLoop lk;
    llvm_loop_begin(b, q->fn, &lk, p->k);
    LLVMValueRef xrow = at(q, p->x, add(q, mul(q, lk.iv, p->n), n0));
    LLVMValueRef xv[3];
    for (int j = 0; j < nv; j++) {
        LLVMValueRef xp = at(q, xrow, ci(q, (int64_t)j * vw));
        xv[j] = llvm_load_lanes(b, xp, (unsigned)vw, j == nv - 1 ? last : vw);
    }
    LLVMValueRef wrow = at(q, p->wp, mul(q, add(q, mul(q, mb, p->k), lk.iv), r));
    for (int i = 0; i < rows; i++) {
        LLVMValueRef wv = splat(q, ld_f32(q, at(q, wrow, ci(q, i))));
        for (int j = 0; j < nv; j++) {
            LLVMValueRef a = LLVMBuildLoad2(b, q->vt, q->acc[i * q->t.nv + j], "");
            LLVMBuildStore(b, fma_v(q, xv[j], wv, a), q->acc[i * q->t.nv + j]);
        }
    }
    llvm_loop_end(b, q->fn, &lk);
    for (int i = 0; i < rows; i++) {
        LLVMValueRef row = add(q, row0, ci(q, i));
        for (int j = 0; j < nv; j++) {
            int lanes = j == nv - 1 ? last : vw;
            LLVMValueRef col = add(q, n0, ci(q, (int64_t)j * vw));
            LLVMValueRef v = LLVMBuildLoad2(b, q->vt, q->acc[i * q->t.nv + j], "");
            if (p->epi_vec) v = p->epi_vec(p->user, v, row, col, lanes);
            llvm_store_lanes(b, v, at(q, p->y, add(q, mul(q, row, p->n), col)), lanes);
        }
    }
}

static LLVMValueRef splat8(Pw *q, LLVMValueRef s) {
    LLVMTypeRef v8 = LLVMVectorType(q->f32, 8);
    LLVMValueRef v = LLVMBuildInsertElement(q->b, LLVMGetUndef(v8), s, LLVMConstInt(q->i32, 0, 0), "");
    return LLVMBuildShuffleVector(q->b, v, LLVMGetUndef(v8), LLVMConstNull(LLVMVectorType(q->i32, 8)), "");
}

/* The whole row block mb (rows of its r, all n <= 4 pixels) with rows in lanes: acc[v * n + j]
 * holds rows v * 8 .. v * 8 + 7 of pixel j. The same FMAs in the same K order as tile (bias
 * first), so results match it; each row is gathered back into a vector over the pixels for the
 * epilogue and the store. */
static void tile_bc(Pw *q, LLVMValueRef mb, LLVMValueRef row0, int rows) {
    const LlvmPointwise *p = q->p;
    LLVMBuilderRef b = q->b;
    int n = q->t.nv, rv = q->t.r / 8;
    LLVMTypeRef v8 = LLVMVectorType(q->f32, 8);
    for (int v = 0; v < rv; v++) {
        LLVMValueRef init = LLVMConstNull(v8);
        for (int l = 0; p->bias && l < 8 && v * 8 + l < rows; l++)
            init = LLVMBuildInsertElement(b, init, ld_f32(q, at(q, p->bias, add(q, row0, ci(q, v * 8 + l)))),
                                          LLVMConstInt(q->i32, (unsigned long long)l, 0), "");
        for (int j = 0; j < n; j++) LLVMBuildStore(b, init, q->acc[v * n + j]);
    }
    LlvmLoop lk;
    llvm_loop_begin(b, q->fn, &lk, p->k);
    LLVMValueRef wrow = at(q, p->wp, mul(q, add(q, mul(q, mb, p->k), lk.iv), q->t.r)), wv[4];
    for (int v = 0; v < rv; v++) {
        wv[v] = LLVMBuildLoad2(b, v8, at(q, wrow, ci(q, (int64_t)v * 8)), "");
        LLVMSetAlignment(wv[v], 4);
    }
    LLVMValueRef xrow = at(q, p->x, mul(q, lk.iv, p->n));
    for (int j = 0; j < n; j++) {
        LLVMValueRef xs = splat8(q, ld_f32(q, at(q, xrow, ci(q, j))));
        for (int v = 0; v < rv; v++) {
            LLVMValueRef a = LLVMBuildLoad2(b, v8, q->acc[v * n + j], "");
            unsigned id = LLVMLookupIntrinsicID("llvm.fma", 8);
            LLVMValueRef f = LLVMGetIntrinsicDeclaration(q->mod, id, &v8, 1), args[3] = {xs, wv[v], a};
            LLVMBuildStore(b, LLVMBuildCall2(b, LLVMIntrinsicGetType(q->ctx, id, &v8, 1), f, args, 3, ""), q->acc[v * n + j]);
        }
    }
    llvm_loop_end(b, q->fn, &lk);
    LLVMValueRef accs[12];
    for (int i = 0; i < rv * n; i++) accs[i] = LLVMBuildLoad2(b, v8, q->acc[i], "");
    for (int i = 0; i < rows; i++) {
        LLVMValueRef v = LLVMConstNull(q->vt);
        for (int j = 0; j < n; j++) {
            LLVMValueRef lane = LLVMConstInt(q->i32, (unsigned long long)(i % 8), 0);
            LLVMValueRef e = LLVMBuildExtractElement(b, accs[(i / 8) * n + j], lane, "");
            v = LLVMBuildInsertElement(b, v, e, LLVMConstInt(q->i32, (unsigned long long)j, 0), "");
        }
        LLVMValueRef row = add(q, row0, ci(q, i));
        if (p->epi_vec) v = p->epi_vec(p->user, v, row, ci(q, 0), n);
        llvm_store_lanes(b, v, at(q, p->y, mul(q, row, p->n)), n);
    }
}

/* Every column tile of row block mb (rows: its rows, r but for a last partial block). */
static void row_block(Pw *q, LLVMValueRef mb, int rows) {
    if (q->t.bc) {
        tile_bc(q, mb, mul(q, mb, q->t.r), rows);
        return;
    }
    int64_t width = (int64_t)q->t.nv * q->t.vw, full = q->p->n / width, rest = q->p->n % width;
    LLVMValueRef row0 = mul(q, mb, q->t.r);
    if (full == 1) tile(q, mb, row0, rows, ci(q, 0), q->t.nv, q->t.vw);
    else if (full > 1) {
        LlvmLoop ln;
        llvm_loop_begin(q->b, q->fn, &ln, full);
        tile(q, mb, row0, rows, mul(q, ln.iv, width), q->t.nv, q->t.vw);
        llvm_loop_end(q->b, q->fn, &ln);
    }
    if (rest) {
        int nv = (int)((rest + q->t.vw - 1) / q->t.vw), last = (int)(rest - (int64_t)(nv - 1) * q->t.vw);
        tile(q, mb, row0, rows, ci(q, full * width), nv, last);
    }
}

void llvm_pointwise_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmPointwise *p, LLVMValueRef lo,
                         LLVMValueRef hi) {
    Pw q = {.p = p, .t = pw_tile(p->n), .b = b, .ab = ab, .fn = fn};
    q.mod = LLVMGetGlobalParent(fn);
    q.ctx = LLVMGetModuleContext(q.mod);
    q.i1 = LLVMInt1TypeInContext(q.ctx);
    q.i32 = LLVMInt32TypeInContext(q.ctx);
    q.i64 = LLVMInt64TypeInContext(q.ctx);
    q.f32 = LLVMFloatTypeInContext(q.ctx);
    q.vt = LLVMVectorType(q.f32, (unsigned)q.t.vw);
    for (int i = 0; i < 12; i++) q.acc[i] = LLVMBuildAlloca(ab, q.t.bc ? LLVMVectorType(q.f32, 8) : q.vt, "");
    int64_t nfull = p->m / q.t.r, part_rows = p->m % q.t.r;
    /* full blocks [lo, min(hi, nfull)), then the partial one when it is in [lo, hi) */
    LLVMValueRef cfull = ci(&q, nfull);
    LLVMValueRef end = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, hi, cfull, ""), hi, cfull, "");
    LLVMValueRef cnt = LLVMBuildSub(b, end, lo, "");
    cnt = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, cnt, ci(&q, 0), ""), ci(&q, 0), cnt, "");
    LlvmLoop lm;
    llvm_loop_begin_v(b, fn, &lm, cnt);
    row_block(&q, add(&q, lm.iv, lo), q.t.r);
    llvm_loop_end(b, fn, &lm);
    if (part_rows) {
        LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLE, lo, cfull, ""), LLVMBuildICmp(b, LLVMIntSGT, hi, cfull, ""), "");
        LLVMBasicBlockRef after = llvm_if_begin(b, fn, in);
        row_block(&q, cfull, (int)part_rows);
        llvm_if_end(b, after);
    }
}

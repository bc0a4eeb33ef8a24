/* f32 GEMM on Intel AMX (AMX-TILE + AMX-BF16) at f32 accuracy: C = A * B (+ bias per row, then
 * the epilogue in registers) for a constant A (a Conv's weights) and an f32 B read as it is.
 *
 * AMX multiplies bf16 pairs into f32 accumulators. Each f32 x is split exactly into three bf16
 * parts, x = h + m + l (h: x with its low 16 bits cut; m: the same of x - h; l: of x - h - m;
 * each difference is exact), which carry all 24 bits of x's significand. The product a * b is
 * then the sum of the six larger cross products ah*bh + ah*bm + am*bh + ah*bl + al*bh + am*bm;
 * the three dropped (am*bl, al*bm, al*bl) are below 2^-22 of |a * b|, the size of f32's own
 * rounding, and every bf16 product is exact in the f32 accumulator (AMX reads bf16 denormals as
 * zero and flushes denormal results, so values below about 2^-110 lose their lower parts: an
 * absolute error near 1e-38). Weights that are not finite keep a Conv on FMAs (the codegen's
 * choice); activations that are not finite are handled per chunk (chunk_f32). Six TDPBF16PS per 16 x 16
 * x 32 block still do 85 multiply-adds a cycle where AVX-512 FMAs do 32 (a microbenchmark of the
 * loop below from L1: 520 GFLOP/s of f32 work against 191 for the 8 x 48 FMA microkernel).
 *
 * A is split and packed at compile time (llvm_amx_packed_a): for each strip of 16 rows and each
 * block of 32 columns, its h, m and l tiles, 16 rows of 32 bf16 (1 KiB each), in the order the
 * kernel reads them. B is split and packed at run time, a chunk of up to AX_NC columns at a time, into
 * a stack buffer of VNNI tiles (16 rows of column pairs: the bf16 of B[2r][j] low, B[2r+1][j]
 * high in one dword), which the cutting makes a mask and a shift per dword, no shuffles. Per
 * chunk, for each strip of 16 rows: two 16 x 16 C tiles (tmm0, tmm1) accumulate across K with
 * A's parts in tmm2-4 and B's streamed through tmm5-7, then go to a 16 x 32 stack tile where the
 * bias and the epilogue are applied on the way to C. Work units are chunks (parts for the
 * runtime's threads); narrow B (under AX_MIN_COLS columns) is one chunk packed whole, in K slabs
 * when it is too deep for the stack, with strips of rows as the units. Every part loads the tile
 * configuration itself (the state is per thread) and releases it at the end. The process must
 * hold the XTILEDATA permission (the runtime asks for it when it loads code built with AMX:
 * irt_cpu_amx_enable). A chunk whose B holds an infinity or a NaN is computed with f32 FMAs
 * instead (chunk_f32). Stack: up to AX_NARROW_BYTES of packed B, 2 KiB of C tile, and with K
 * slabs and a partial last column tile m * 64 bytes more. */

#include "backend/cpu/cpu.h"
#include <stdlib.h>
#include <string.h>

#define AX_NC 128 /* columns of B per chunk (a work unit) at most: 8 column tiles; 64 ran a 64 -> 256
                   * channel layer at 56x56 in 0.47-0.55 ms, 128 and 256 in 0.455 */
#define AX_KB 32  /* K per tile block (16 bf16 pairs) */
#define AX_TILE 1024
#define AX_MIN_COLS 512 /* narrower B (14x14 layers and below) is one chunk: in chunks of AX_NC every chunk
                         * streamed all of A (1.5x its f32 bytes), 14x14 layers 15-25% slower than FMAs */

typedef struct Ax {
    const LlvmPgemm *p;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMValueRef fn, bpack, cbuf;
    LLVMTypeRef i8, i32, i64, f32, ptr, vf, vi;
    int64_t kb;  /* K / AX_KB */
    int64_t skb; /* K blocks per slab: narrow B with a K too large to pack whole goes through K in
                  * slabs (the last may be shorter), C's partial sums kept in C (a last partial
                  * column tile in tbuf) */
    LLVMValueRef tbuf;
    LLVMValueRef nonfinite; /* i32 slot: the chunk's B holds an infinity or a NaN (see chunk_f32) */
    LLVMBuilderRef ab;      /* the entry block's builder (allocas) */
    LLVMValueRef tap_off, tap_mask; /* with p->conv, per chunk: each tap's offset into a channel's
                                     * planes and its lanes inside the image, per column tile */
    bool apf;   /* prefetch the next strip's A (narrow B: A streams from memory once) */
} Ax;

/* The most stack the pack of B takes: B narrower than AX_MIN_COLS is packed whole once per part
 * (A then streams once and the parts share out strips of rows), in K slabs when that would pass
 * it; wider B's chunks halve from AX_NC columns until they fit. */
#define AX_NARROW_BYTES (400 << 10)

static int64_t narrow_bytes(int64_t n, int64_t k) { return (n + 15) / 16 * 16 * k * 6; }
#define AX_MAX_SLABS 8
/* K blocks per slab for narrow B: all of K when its pack fits AX_NARROW_BYTES, else the fewest
 * slabs that fit, as equal as blocks allow (the last may be shorter); 0 when more than
 * AX_MAX_SLABS slabs would be needed. */
static int64_t slab_blocks(int64_t n, int64_t k) {
    int64_t kb = k / AX_KB, most = kb;
    while (most > 0 && narrow_bytes(n, most * AX_KB) > AX_NARROW_BYTES) most--;
    if (most == 0) return 0;
    int64_t slabs = (kb + most - 1) / most;
    return slabs <= AX_MAX_SLABS ? (kb + slabs - 1) / slabs : 0;
}

static bool narrow(int64_t n) { return n < AX_MIN_COLS; }
#define AX_MIN_ROWS 64 /* fewer rows of C share too little of the pack: SqueezeNet's 128 -> 16 layer
                        * at 55x55 ran 0.206 ms against 0.144 with FMAs */
#define AX_NARROW_MIN 128 /* below this (7x7 layers), A's 1.5x bytes bound the product: 512 -> 2048
                           * channels at 7x7 ran 0.87-0.90 ms against 0.63-0.68 with FMAs */

/* Columns per chunk for K: AX_NC, halved while the chunk's pack would pass AX_NARROW_BYTES. */
static int64_t chunk_cols(int64_t k) {
    int64_t nc = AX_NC;
    while (nc > 32 && nc * k * 6 > AX_NARROW_BYTES) nc /= 2;
    return nc;
}

bool llvm_amx_fits(int64_t m, int64_t n, int64_t k) {
    if (m < AX_MIN_ROWS || m % 16 || k < AX_KB || k % AX_KB || n < AX_NARROW_MIN) return false;
    return narrow(n) ? slab_blocks(n, k) > 0 : chunk_cols(k) * k * 6 <= AX_NARROW_BYTES;
}

int64_t llvm_amx_conv_k(const LowerWin *w) { return (w->c * w->kh * w->kw + AX_KB - 1) / AX_KB * AX_KB; }

bool llvm_amx_conv_fits(const LowerWin *w, int64_t m) {
    /* each column tile within one output row (tiles start at multiples of 16), wide B only */
    return w->ow % 16 == 0 && !narrow(w->oh * w->ow) && llvm_amx_fits(m, w->oh * w->ow, llvm_amx_conv_k(w));
}

int64_t llvm_amx_units(int64_t m, int64_t n, int64_t k) {
    return narrow(n) ? m / 16 : (n + chunk_cols(k) - 1) / chunk_cols(k);
}

/* The three bf16 parts of x, each as the high half of an f32 (the low half zero). */
static void split3(float x, uint32_t part[3]) {
    for (int i = 0; i < 3; i++) {
        uint32_t u;
        memcpy(&u, &x, 4);
        u &= 0xFFFF0000u;
        part[i] = u;
        float h;
        memcpy(&h, &u, 4);
        x = x - h;
        if (x != x) x = 0.0f; /* infinities: the part h carries them */
    }
}

uint16_t *llvm_amx_packed_a(int64_t m, int64_t k, const float *a, int64_t lda) {
    size_t n = (size_t)(m * k * 3);
    uint16_t *u = malloc(n * sizeof *u);
    if (!u) return NULL;
    int64_t kb = k / AX_KB;
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < k; c++) {
            uint32_t part[3];
            split3(c < lda ? a[r * lda + c] : 0.0f, part);
            int64_t rb = r / 16, i = r % 16, b = c / AX_KB, j = c % AX_KB;
            for (int p = 0; p < 3; p++) u[((rb * kb + b) * 3 + p) * 512 + i * 32 + j] = (uint16_t)(part[p] >> 16);
        }
    return u;
}

static LLVMValueRef ci(Ax *q, int64_t v) { return LLVMConstInt(q->i64, (unsigned long long)v, 1); }
static LLVMValueRef add(Ax *q, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(q->b, a, b, ""); }
static LLVMValueRef mul(Ax *q, LLVMValueRef a, int64_t c) { return LLVMBuildNSWMul(q->b, a, ci(q, c), ""); }
static LLVMValueRef byte_at(Ax *q, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildGEP2(q->b, LLVMInt8TypeInContext(q->ctx), base, &off, 1, "");
}
static LLVMValueRef f32_at(Ax *q, LLVMValueRef base, LLVMValueRef off) { return LLVMBuildGEP2(q->b, q->f32, base, &off, 1, ""); }

static void intrinsic(Ax *q, const char *name, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(q->mod, id, NULL, 0);
    LLVMBuildCall2(q->b, LLVMIntrinsicGetType(q->ctx, id, NULL, 0), f, args, n, "");
}
static LLVMValueRef tile(Ax *q, int t) { return LLVMConstInt(q->i8, (unsigned)t, 0); }
static void tload_s(Ax *q, int t, LLVMValueRef p, int64_t stride) {
    LLVMValueRef a[3] = {tile(q, t), p, ci(q, stride)};
    intrinsic(q, "llvm.x86.tileloadd64", a, 3);
}
static void tload(Ax *q, int t, LLVMValueRef p) { tload_s(q, t, p, 64); }
static void tzero(Ax *q, int t) {
    LLVMValueRef a[1] = {tile(q, t)};
    intrinsic(q, "llvm.x86.tilezero", a, 1);
}
static void tstore(Ax *q, int t, LLVMValueRef p, int64_t stride) {
    LLVMValueRef a[3] = {tile(q, t), p, ci(q, stride)};
    intrinsic(q, "llvm.x86.tilestored64", a, 3);
}
static void tdp(Ax *q, int c, int a, int b) {
    LLVMValueRef x[3] = {tile(q, c), tile(q, a), tile(q, b)};
    intrinsic(q, "llvm.x86.tdpbf16ps", x, 3);
}

/* The palette-1 configuration: tiles 0-7 all 16 rows of 64 bytes. */
static LLVMValueRef tile_config(Ax *q) {
    const char *name = "irtool.amx_config";
    LLVMValueRef g = LLVMGetNamedGlobal(q->mod, name);
    if (g) return g;
    uint8_t cfg[64] = {1};
    for (int t = 0; t < 8; t++) {
        cfg[16 + 2 * t] = 64; /* colsb, little-endian u16 */
        cfg[48 + t] = 16;     /* rows */
    }
    LLVMValueRef v[64];
    for (int i = 0; i < 64; i++) v[i] = LLVMConstInt(q->i8, cfg[i], 0);
    LLVMTypeRef at = LLVMArrayType(q->i8, 64);
    g = LLVMAddGlobal(q->mod, at, name);
    LLVMSetInitializer(g, LLVMConstArray(q->i8, v, 64));
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetAlignment(g, 64);
    return g;
}

static LLVMValueRef vsplat_i(Ax *q, uint32_t c) {
    LLVMValueRef e[16];
    for (int i = 0; i < 16; i++) e[i] = LLVMConstInt(q->i32, c, 0);
    return LLVMConstVector(e, 16);
}

/* bias[row] * bias_scale in every lane, or NULL without a bias. */
static LLVMValueRef row_bias(Ax *q, LLVMValueRef row) {
    const LlvmPgemm *p = q->p;
    if (!p->bias) return NULL;
    LLVMBuilderRef b = q->b;
    LLVMValueRef s = LLVMBuildLoad2(b, q->f32, f32_at(q, p->bias, row), "");
    if (p->bias_scale != 1.0) s = LLVMBuildFMul(b, s, LLVMConstReal(q->f32, p->bias_scale), "");
    LLVMValueRef v = LLVMBuildInsertElement(b, LLVMGetUndef(q->vf), s, LLVMConstInt(q->i32, 0, 0), "");
    return LLVMBuildShuffleVector(b, v, LLVMGetUndef(q->vf), LLVMConstNull(LLVMVectorType(q->i32, 16)), "");
}

/* The lanes of a column tile whose pixels iw .. iw + 15 of a row (rowin: the row is inside) are
 * inside the plane. */
static LLVMValueRef tap_lanes(Ax *q, LLVMValueRef rowin, LLVMValueRef iw) {
    const LowerWin *w = q->p->conv;
    LLVMBuilderRef b = q->b;
    int64_t ph, pw;
    llvm_conv_plane(w, q->p->phased, &ph, &pw);
    LLVMValueRef lanes[16];
    for (int l = 0; l < 16; l++) lanes[l] = LLVMConstInt(q->i32, (unsigned)l, 0);
    LLVMValueRef iw32 = LLVMBuildTrunc(b, iw, q->i32, "");
    LLVMValueRef v = LLVMBuildInsertElement(b, LLVMGetUndef(q->vi), iw32, LLVMConstInt(q->i32, 0, 0), "");
    v = LLVMBuildShuffleVector(b, v, LLVMGetUndef(q->vi), LLVMConstNull(q->vi), "");
    v = LLVMBuildAdd(b, v, LLVMConstVector(lanes, 16), "");
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntULT, v, vsplat_i(q, (uint32_t)pw), "");
    LLVMValueRef rowv = LLVMBuildInsertElement(b, LLVMGetUndef(LLVMVectorType(LLVMInt1TypeInContext(q->ctx), 16)), rowin,
                                               LLVMConstInt(q->i32, 0, 0), "");
    rowv = LLVMBuildShuffleVector(b, rowv, LLVMGetUndef(LLVMTypeOf(rowv)), LLVMConstNull(q->vi), "");
    return LLVMBuildAnd(b, in, rowv, "");
}

/* The chunk's tap tables (q->tap_off, q->tap_mask) for its column tiles from j0. */
static void tap_tables(Ax *q, LLVMValueRef j0, int64_t tiles) {
    const LowerWin *w = q->p->conv;
    LLVMBuilderRef b = q->b;
    int64_t ph, pw, taps = w->kh * w->kw;
    llvm_conv_plane(w, q->p->phased, &ph, &pw);
    LLVMTypeRef i16 = LLVMIntTypeInContext(q->ctx, 16);
    LlvmLoop lt;
    llvm_loop_begin(b, q->fn, &lt, taps);
    LLVMValueRef plane, dh, dw;
    llvm_conv_tap(b, w, q->p->phased, lt.iv, &plane, &dh, &dw);
    for (int64_t t = 0; t < tiles; t++) {
        LLVMValueRef j = add(q, j0, ci(q, 16 * t));
        LLVMValueRef oh = LLVMBuildUDiv(b, j, ci(q, w->ow), ""), ow = LLVMBuildURem(b, j, ci(q, w->ow), "");
        LLVMValueRef ih = add(q, oh, dh), iw = add(q, ow, dw);
        LLVMValueRef rowin = LLVMBuildICmp(b, LLVMIntULT, ih, ci(q, ph), "");
        LLVMValueRef ihc = LLVMBuildSelect(b, rowin, ih, ci(q, 0), "");
        LLVMValueRef at = add(q, mul(q, lt.iv, AX_NC / 16), ci(q, t));
        LLVMBuildStore(b, add(q, plane, add(q, mul(q, ihc, pw), iw)), LLVMBuildGEP2(b, q->i64, q->tap_off, &at, 1, ""));
        LLVMBuildStore(b, LLVMBuildBitCast(b, tap_lanes(q, rowin, iw), i16, ""), LLVMBuildGEP2(b, i16, q->tap_mask, &at, 1, ""));
    }
    llvm_loop_end(b, q->fn, &lt);
}

/* Im2col row k by the chunk's tap tables: its channel's planes (src), its tap, whether it exists. */
static void conv_rows_of_tables(Ax *q, LLVMValueRef k, LLVMValueRef *src, LLVMValueRef *t_idx, LLVMValueRef *real) {
    const LowerWin *w = q->p->conv;
    LLVMBuilderRef b = q->b;
    int64_t taps = w->kh * w->kw;
    *real = LLVMBuildICmp(b, LLVMIntSLT, k, ci(q, w->c * taps), "");
    LLVMValueRef kk = LLVMBuildSelect(b, *real, k, ci(q, 0), "");
    LLVMValueRef c = LLVMBuildUDiv(b, kk, ci(q, taps), "");
    *t_idx = LLVMBuildURem(b, kk, ci(q, taps), "");
    *src = f32_at(q, q->p->b, mul(q, c, llvm_conv_channel_floats(w, q->p->phased)));
}

/* 16 columns of such a row for column tile t. */
static LLVMValueRef conv_load_table(Ax *q, LLVMValueRef src, LLVMValueRef tap, LLVMValueRef real, int64_t t) {
    LLVMBuilderRef b = q->b;
    LLVMTypeRef i16 = LLVMIntTypeInContext(q->ctx, 16), mv = LLVMVectorType(LLVMInt1TypeInContext(q->ctx), 16);
    LLVMValueRef at = add(q, mul(q, tap, AX_NC / 16), ci(q, t));
    LLVMValueRef off = LLVMBuildLoad2(b, q->i64, LLVMBuildGEP2(b, q->i64, q->tap_off, &at, 1, ""), "");
    LLVMValueRef m = LLVMBuildLoad2(b, i16, LLVMBuildGEP2(b, i16, q->tap_mask, &at, 1, ""), "");
    m = LLVMBuildSelect(b, real, m, LLVMConstInt(i16, 0, 0), "");
    return llvm_masked_load(b, q->vf, f32_at(q, src, off), LLVMBuildBitCast(b, m, mv, ""));
}

/* B's rows k0 = 2 * pair and k0 + 1 over the chunk's column tiles (cols columns from j0) into
 * the pack: for column tile t, block kb, part p, row r: dword j = bf16(B[k0][.]) | bf16(B[k0+1][.]) << 16. */
static void pack_pair(Ax *q, LLVMValueRef pair, LLVMValueRef rel, LLVMValueRef j0, int64_t cols) {
    const LlvmPgemm *p = q->p;
    LLVMBuilderRef b = q->b;
    LLVMValueRef kb = LLVMBuildLShr(b, rel, ci(q, 4), ""), r = LLVMBuildAnd(b, rel, ci(q, 15), "");
    LLVMValueRef row0 = add(q, mul(q, mul(q, pair, 2), p->ldb), j0), hi = vsplat_i(q, 0xFFFF0000u), sh = vsplat_i(q, 16);
    int64_t tiles = (cols + 15) / 16;
    LLVMValueRef nf = NULL;
    LLVMValueRef csrc[2], ctap[2], creal[2];
    if (p->conv)
        for (int r2 = 0; r2 < 2; r2++)
            conv_rows_of_tables(q, add(q, mul(q, pair, 2), ci(q, r2)), &csrc[r2], &ctap[r2], &creal[r2]);
    for (int64_t t = 0; t < tiles; t++) {
        int64_t lanes = cols - 16 * t < 16 ? cols - 16 * t : 16;
        LLVMValueRef x0, x1;
        if (p->conv) {
            x0 = conv_load_table(q, csrc[0], ctap[0], creal[0], t);
            x1 = conv_load_table(q, csrc[1], ctap[1], creal[1], t);
        } else {
            x0 = llvm_load_lanes(b, f32_at(q, p->b, add(q, row0, ci(q, 16 * t))), 16, lanes);
            x1 = llvm_load_lanes(b, f32_at(q, p->b, add(q, row0, ci(q, p->ldb + 16 * t))), 16, lanes);
        }
        /* tile t's block kb: ((t * KB + kb) * 3 + part) tiles in, row r */
        LLVMValueRef base = add(q, mul(q, add(q, mul(q, ci(q, t), q->skb), kb), 3 * AX_TILE), mul(q, r, 64));
        /* lanes whose exponent is all ones (an infinity or a NaN): the chunk goes to chunk_f32 */
        LLVMValueRef ex = vsplat_i(q, 0x7F800000u);
        LLVMValueRef e0 = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, LLVMBuildBitCast(b, x0, q->vi, ""), ex, ""), ex, "");
        LLVMValueRef e1 = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, LLVMBuildBitCast(b, x1, q->vi, ""), ex, ""), ex, "");
        LLVMValueRef e = LLVMBuildOr(b, e0, e1, "");
        nf = nf ? LLVMBuildOr(b, nf, e, "") : e;
        for (int part = 0; part < 3; part++) {
            LLVMValueRef u0 = LLVMBuildBitCast(b, x0, q->vi, ""), u1 = LLVMBuildBitCast(b, x1, q->vi, "");
            LLVMValueRef h0 = LLVMBuildAnd(b, u0, hi, ""), h1 = LLVMBuildAnd(b, u1, hi, "");
            LLVMValueRef d = LLVMBuildOr(b, h1, LLVMBuildLShr(b, u0, sh, ""), "");
            LLVMSetAlignment(LLVMBuildStore(b, d, byte_at(q, q->bpack, add(q, base, ci(q, part * AX_TILE)))), 64);
            if (part == 2) break;
            /* the rest, exact */
            x0 = LLVMBuildFSub(b, x0, LLVMBuildBitCast(b, h0, q->vf, ""), "");
            x1 = LLVMBuildFSub(b, x1, LLVMBuildBitCast(b, h1, q->vf, ""), "");
        }
    }
    LLVMValueRef bits = LLVMBuildZExt(b, LLVMBuildBitCast(b, nf, LLVMIntTypeInContext(q->ctx, 16), ""), q->i32, "");
    LLVMBuildStore(b, LLVMBuildOr(b, LLVMBuildLoad2(b, q->i32, q->nonfinite, ""), bits, ""), q->nonfinite);
}

static LLVMValueRef vec_at(Ax *q, LLVMValueRef base, int64_t i) {
    LLVMValueRef off = ci(q, i);
    return LLVMBuildGEP2(q->b, q->vf, base, &off, 1, "");
}

/* The chunk's C with f32 FMAs, A rebuilt from its parts (h + m + l is A exactly), then bias and
 * epilogue: for a chunk whose B holds an infinity or a NaN, which the split cannot carry (an
 * infinite part h meets A's parts, and a zero part of A times it is NaN where f32 gives +-inf). */
static void chunk_f32(Ax *q, LLVMValueRef j0, int64_t cols, LLVMValueRef rb0, LLVMValueRef nrb) {
    const LlvmPgemm *p = q->p;
    LLVMBuilderRef b = q->b;
    int64_t tiles = (cols + 15) / 16;
    LLVMValueRef acc = LLVMBuildArrayAlloca(q->ab, q->vf, ci(q, tiles), "amx_f32");
    LLVMSetAlignment(acc, 64);
    unsigned fid = LLVMLookupIntrinsicID("llvm.fma", 8);
    LLVMValueRef fma = LLVMGetIntrinsicDeclaration(q->mod, fid, &q->vf, 1);
    LLVMTypeRef fmat = LLVMIntrinsicGetType(q->ctx, fid, &q->vf, 1), i16 = LLVMIntTypeInContext(q->ctx, 16);
    LlvmLoop lr, li, lk;
    llvm_loop_begin_v(b, q->fn, &lr, nrb);
    LLVMValueRef rb = add(q, rb0, lr.iv);
    llvm_loop_begin(b, q->fn, &li, 16);
    LLVMValueRef row = add(q, mul(q, rb, 16), li.iv);
    for (int64_t t = 0; t < tiles; t++) LLVMBuildStore(b, LLVMConstNull(q->vf), vec_at(q, acc, t));
    llvm_loop_begin(b, q->fn, &lk, p->k);
    /* A[row][k]: part pt at ((rb * KB + k / 32) * 3 + pt) * 512 + i * 32 + k % 32 */
    LLVMValueRef blk = add(q, mul(q, rb, q->kb), LLVMBuildLShr(b, lk.iv, ci(q, 5), ""));
    LLVMValueRef at = add(q, add(q, mul(q, blk, 3 * 512), mul(q, li.iv, 32)), LLVMBuildAnd(b, lk.iv, ci(q, 31), ""));
    LLVMValueRef a = NULL;
    for (int pt = 0; pt < 3; pt++) {
        LLVMValueRef idx = add(q, at, ci(q, pt * 512));
        LLVMValueRef h = LLVMBuildLoad2(b, i16, LLVMBuildGEP2(b, i16, p->a, &idx, 1, ""), "");
        LLVMValueRef u = LLVMBuildShl(b, LLVMBuildZExt(b, h, q->i32, ""), LLVMConstInt(q->i32, 16, 0), "");
        LLVMValueRef f = LLVMBuildBitCast(b, u, q->f32, "");
        a = a ? LLVMBuildFAdd(b, a, f, "") : f;
    }
    LLVMValueRef av = LLVMBuildInsertElement(b, LLVMGetUndef(q->vf), a, LLVMConstInt(q->i32, 0, 0), "");
    av = LLVMBuildShuffleVector(b, av, LLVMGetUndef(q->vf), LLVMConstNull(LLVMVectorType(q->i32, 16)), "");
    LLVMValueRef csrc = NULL, ctap = NULL, creal = NULL;
    if (p->conv) conv_rows_of_tables(q, lk.iv, &csrc, &ctap, &creal); /* the chunk's tap tables are built */
    for (int64_t t = 0; t < tiles; t++) {
        int64_t lanes = cols - 16 * t < 16 ? cols - 16 * t : 16;
        LLVMValueRef j = add(q, j0, ci(q, 16 * t));
        LLVMValueRef x = p->conv ? conv_load_table(q, csrc, ctap, creal, t)
                                 : llvm_load_lanes(b, f32_at(q, p->b, add(q, mul(q, lk.iv, p->ldb), j)), 16, lanes);
        LLVMValueRef slot = vec_at(q, acc, t);
        LLVMValueRef args[3] = {av, x, LLVMBuildLoad2(b, q->vf, slot, "")};
        LLVMBuildStore(b, LLVMBuildCall2(b, fmat, fma, args, 3, ""), slot);
    }
    llvm_loop_end(b, q->fn, &lk);
    LLVMValueRef bias = row_bias(q, row);
    for (int64_t t = 0; t < tiles; t++) {
        int64_t lanes = cols - 16 * t < 16 ? cols - 16 * t : 16;
        LLVMValueRef x = LLVMBuildLoad2(b, q->vf, vec_at(q, acc, t), "");
        if (bias) x = LLVMBuildFAdd(b, x, bias, "");
        LLVMValueRef col = add(q, j0, ci(q, 16 * t));
        if (p->epi_vec) x = p->epi_vec(p->user, x, row, col, (int)lanes);
        llvm_store_lanes(b, x, f32_at(q, p->c, add(q, mul(q, row, p->ldc), col)), lanes);
    }
    llvm_loop_end(b, q->fn, &li);
    llvm_loop_end(b, q->fn, &lr);
}

/* Where C tile c of strip rb keeps its partial sums between slabs (see Ax.skb): in C itself
 * (row stride ldc) when the tile's 16 columns are all in C, else in tbuf (row stride 16). */
static LLVMValueRef partial_at(Ax *q, LLVMValueRef rb, int64_t t, LLVMValueRef j0, int64_t cols, int64_t *stride) {
    const LlvmPgemm *p = q->p;
    if (16 * (t + 1) <= cols) {
        *stride = p->ldc * 4;
        return f32_at(q, p->c, add(q, mul(q, mul(q, rb, 16), p->ldc), add(q, j0, ci(q, 16 * t))));
    }
    *stride = 64;
    return f32_at(q, q->tbuf, mul(q, rb, 256));
}

/* C tiles for one strip of 16 rows (rb) and one pair (or single) of column tiles t0 (, t0 + 1)
 * of the chunk at j0, over the K blocks [kb0, kb0 + skb): from zero (first) or the partial
 * sums, then bias + epilogue into C (last) or the partial sums back. */
static void strip_tiles(Ax *q, LLVMValueRef rb, int64_t t0, int ntiles, LLVMValueRef j0, int64_t cols, int64_t kb0,
                        int64_t nkb, bool first, bool last) {
    const LlvmPgemm *p = q->p;
    LLVMBuilderRef b = q->b;
    int64_t stride;
    for (int c = 0; c < ntiles; c++) {
        if (first) tzero(q, c);
        else {
            LLVMValueRef at = partial_at(q, rb, t0 + c, j0, cols, &stride);
            tload_s(q, c, at, stride);
        }
    }
    LlvmLoop lk;
    llvm_loop_begin(b, q->fn, &lk, nkb);
    LLVMValueRef abase = byte_at(q, p->a, mul(q, add(q, mul(q, rb, q->kb), add(q, ci(q, kb0), lk.iv)), 3 * AX_TILE));
    for (int part = 0; part < 3; part++) tload(q, 2 + part, byte_at(q, abase, ci(q, part * AX_TILE)));
    if (t0 == 0 && q->apf) /* the next strip's block of A into L2 while this one multiplies */
        for (int64_t l = 0; l < 3 * AX_TILE; l += 64)
            llvm_prefetch_at(q->b, byte_at(q, abase, ci(q, q->kb * 3 * AX_TILE + l)), false, 2);
    for (int c = 0; c < ntiles; c++) {
        LLVMValueRef bbase = byte_at(q, q->bpack, mul(q, add(q, ci(q, (t0 + c) * q->skb), lk.iv), 3 * AX_TILE));
        tload(q, 5, bbase);
        tdp(q, c, 2, 5);
        tdp(q, c, 3, 5);
        tdp(q, c, 4, 5);
        tload(q, 6, byte_at(q, bbase, ci(q, AX_TILE)));
        tdp(q, c, 2, 6);
        tdp(q, c, 3, 6);
        tload(q, 7, byte_at(q, bbase, ci(q, 2 * AX_TILE)));
        tdp(q, c, 2, 7);
    }
    llvm_loop_end(b, q->fn, &lk);
    if (!last) {
        for (int c = 0; c < ntiles; c++) {
            LLVMValueRef at = partial_at(q, rb, t0 + c, j0, cols, &stride);
            tstore(q, c, at, stride);
        }
        return;
    }
    for (int c = 0; c < ntiles; c++) tstore(q, c, byte_at(q, q->cbuf, ci(q, 64 * c)), 128);
    /* rows of the strip: bias, epilogue, store */
    LlvmLoop li;
    llvm_loop_begin(b, q->fn, &li, 16);
    LLVMValueRef row = add(q, mul(q, rb, 16), li.iv);
    LLVMValueRef bias = row_bias(q, row);
    for (int c = 0; c < ntiles; c++) {
        int64_t lanes = cols - 16 * (t0 + c);
        if (lanes <= 0) break;
        if (lanes > 16) lanes = 16;
        LLVMValueRef x = LLVMBuildLoad2(b, q->vf, f32_at(q, q->cbuf, add(q, mul(q, li.iv, 32), ci(q, 16 * c))), "");
        LLVMSetAlignment(x, 64);
        if (bias) x = LLVMBuildFAdd(b, x, bias, "");
        LLVMValueRef col = add(q, j0, ci(q, 16 * (t0 + c)));
        if (p->epi_vec) x = p->epi_vec(p->user, x, row, col, (int)lanes);
        llvm_store_lanes(b, x, f32_at(q, p->c, add(q, mul(q, row, p->ldc), col)), lanes);
    }
    llvm_loop_end(b, q->fn, &li);
}

/* One chunk: cols columns of B and C from j0 (a value), strips of rows [rb0, rb0 + nrb) (values). */
static void chunk(Ax *q, LLVMValueRef j0, int64_t cols, LLVMValueRef rb0, LLVMValueRef nrb) {
    int64_t tiles = (cols + 15) / 16;
    LLVMBuildStore(q->b, LLVMConstInt(q->i32, 0, 0), q->nonfinite);
    if (q->p->conv) tap_tables(q, j0, tiles);
    for (int64_t kb0 = 0; kb0 < q->kb; kb0 += q->skb) {
        int64_t nkb = q->kb - kb0 < q->skb ? q->kb - kb0 : q->skb;
        bool first = kb0 == 0, last = kb0 + nkb == q->kb;
        LlvmLoop lp;
        llvm_loop_begin(q->b, q->fn, &lp, nkb * AX_KB / 2);
        pack_pair(q, add(q, ci(q, kb0 * AX_KB / 2), lp.iv), lp.iv, j0, cols);
        llvm_loop_end(q->b, q->fn, &lp);
        /* strips outer: a strip's A stays near while the chunk's B passes (pairs outer ran a 64 ->
         * 256 channel layer at 56x56 in 0.52 ms against 0.46) */
        LLVMBasicBlockRef after = NULL;
        if (last) { /* an infinity or a NaN anywhere in the chunk's B: all of it in f32 instead */
            LLVMValueRef flag = LLVMBuildLoad2(q->b, q->i32, q->nonfinite, "");
            LLVMValueRef bad = LLVMBuildICmp(q->b, LLVMIntNE, flag, LLVMConstInt(q->i32, 0, 0), "");
            LLVMBasicBlockRef f32 = llvm_if_begin(q->b, q->fn, bad);
            chunk_f32(q, j0, cols, rb0, nrb);
            llvm_if_end(q->b, f32);
            after = llvm_if_begin(q->b, q->fn, LLVMBuildNot(q->b, bad, ""));
        }
        LlvmLoop lr;
        llvm_loop_begin_v(q->b, q->fn, &lr, nrb);
        for (int64_t t = 0; t < tiles; t += 2)
            strip_tiles(q, add(q, rb0, lr.iv), t, tiles - t >= 2 ? 2 : 1, j0, cols, kb0, nkb, first, last);
        llvm_loop_end(q->b, q->fn, &lr);
        if (after) llvm_if_end(q->b, after);
    }
}

void llvm_amx_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmPgemm *p) {
    Ax q = {.p = p, .b = b, .fn = fn};
    q.mod = LLVMGetGlobalParent(fn);
    q.ctx = LLVMGetModuleContext(q.mod);
    q.i8 = LLVMInt8TypeInContext(q.ctx);
    q.i32 = LLVMInt32TypeInContext(q.ctx);
    q.i64 = LLVMInt64TypeInContext(q.ctx);
    q.f32 = LLVMFloatTypeInContext(q.ctx);
    q.ptr = LLVMPointerTypeInContext(q.ctx, 0);
    q.vf = LLVMVectorType(q.f32, 16);
    q.vi = LLVMVectorType(q.i32, 16);
    q.kb = p->k / AX_KB;
    q.ab = ab;
    q.nonfinite = LLVMBuildAlloca(ab, q.i32, "amx_nonfinite");
    if (p->conv) {
        int64_t taps = p->conv->kh * p->conv->kw;
        q.tap_off = LLVMBuildArrayAlloca(ab, q.i64, ci(&q, taps * (AX_NC / 16)), "amx_tapoff");
        q.tap_mask = LLVMBuildArrayAlloca(ab, LLVMIntTypeInContext(q.ctx, 16), ci(&q, taps * (AX_NC / 16)), "amx_tapmask");
    }
    q.apf = narrow(p->n);
    int64_t nc = chunk_cols(p->k), wide = narrow(p->n) ? (p->n + 15) / 16 * 16 : nc;
    q.skb = narrow(p->n) ? slab_blocks(p->n, p->k) : q.kb;
    q.bpack = LLVMBuildArrayAlloca(ab, q.i8, ci(&q, (wide / 16) * q.skb * 3 * AX_TILE), "amx_b");
    if (q.skb < q.kb && p->n % 16) {
        q.tbuf = LLVMBuildArrayAlloca(ab, q.f32, ci(&q, p->m * 16), "amx_t");
        LLVMSetAlignment(q.tbuf, 64);
    }
    LLVMSetAlignment(q.bpack, 64);
    q.cbuf = LLVMBuildArrayAlloca(ab, q.f32, ci(&q, 16 * 32), "amx_c");
    LLVMSetAlignment(q.cbuf, 64);
    LLVMValueRef cfg = tile_config(&q);
    intrinsic(&q, "llvm.x86.ldtilecfg", &cfg, 1);
    /* units: chunks of AX_NC columns, the last one possibly narrower (narrow B: strips of 16
     * rows); this part's share [part * units / n_parts, (part + 1) * units / n_parts), part -1: all */
    int64_t units = llvm_amx_units(p->m, p->n, p->k), full = p->n / nc, rest = p->n % nc;
    LLVMValueRef lo = ci(&q, 0), hi = ci(&q, units);
    if (p->part) {
        llvm_part_range(b, p->part, hi, ci(&q, p->n_parts), &lo, &hi);
    }
    if (narrow(p->n)) {
        LLVMValueRef cnt = LLVMBuildSub(b, hi, lo, "");
        LLVMBasicBlockRef after = llvm_if_begin(b, fn, LLVMBuildICmp(b, LLVMIntSGT, cnt, ci(&q, 0), ""));
        chunk(&q, ci(&q, 0), p->n, lo, cnt);
        llvm_if_end(b, after);
        intrinsic(&q, "llvm.x86.tilerelease", NULL, 0);
        return;
    }
    LLVMValueRef all = ci(&q, p->m / 16);
    LLVMValueRef hf = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, hi, ci(&q, full), ""), hi, ci(&q, full), "");
    LlvmLoop lu;
    LLVMValueRef cnt = LLVMBuildSub(b, hf, lo, "");
    cnt = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, cnt, ci(&q, 0), ""), cnt, ci(&q, 0), "");
    llvm_loop_begin_v(b, fn, &lu, cnt);
    chunk(&q, mul(&q, add(&q, lo, lu.iv), nc), nc, ci(&q, 0), all);
    llvm_loop_end(b, fn, &lu);
    if (rest) {
        LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLE, lo, ci(&q, full), ""),
                                       LLVMBuildICmp(b, LLVMIntSGT, hi, ci(&q, full), ""), "");
        LLVMBasicBlockRef after = llvm_if_begin(b, fn, in);
        chunk(&q, ci(&q, full * nc), rest, ci(&q, 0), all);
        llvm_if_end(b, after);
    }
    intrinsic(&q, "llvm.x86.tilerelease", NULL, 0);
}

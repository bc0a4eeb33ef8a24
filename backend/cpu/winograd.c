/* Winograd convolution F(m x m, 3x3) (Lavin and Gray, 2016), m = 4 or 2, for 3x3 stride-1 Conv
 * (and m = 2 for stride 2, see BTS2) with one group and constant weights, on AVX-512 and AVX2:
 * per image, every a x a input tile (a = m + 2, overlapping by 2; stride 2: a = 5, tiles 4
 * apart) is transformed (V = B^T d B), the a^2 tile positions are as many
 * independent GEMMs over the channels (M_e = U_e V_e, through the packed GEMM of cpu/gemm.c)
 * and each m x m output tile is A^T M A plus the bias, the epilogue applied to each output
 * vector before its only store. The weights are transformed at compile time (U = G g G^T, in
 * double) and stored packed among the artifact's constants.
 *
 * F(2x2, 3x3): 16 multiplies per 4 outputs where the direct form does 36 (2.25x less GEMM
 * work); its coefficients are 0, +-1 and 1/2, so it is as accurate as the direct form.
 * Stride 2 (2x2 outputs from 5x5 inputs): 25 multiplies per 4 outputs against 36, coefficients
 * 0 and +-1; ResNet-50's stride-2 3x3 layers at 28x28 and 14x14 1.65 -> 1.40 and 1.55 -> 1.21
 * ms (at 7x7, 16 tiles, the direct GEMM stays).
 * F(4x4, 3x3): 36 multiplies per 16 outputs (4x less), and V and M 2.25x the image instead of
 * 4x; ResNet-50's 56x56 and 28x28 layers 25-30% faster than with F(2x2). Its transforms have
 * coefficients up to 8 (points 0, +-1, +-2), so rounding errors of 5-8e-6 of a layer's largest
 * output (random layers of 16-56 channels: 2-8e-5 on outputs up to 10, where F(2x2) and the
 * direct form stay near 1e-6): outside rtol 1e-4 / atol 1e-5 for the few outputs near zero of a
 * layer alone (tests/cpu/test_cpu_epilogue.c holds it to 2e-5 of the largest output), but
 * not visible at a network's outputs after normalization (a ResNet-50 with random He-initialized
 * weights: logits' max error 1.43e-5 with either tile). It is the default where a layer has 40+
 * tiles of 4x4; the graph metadata key "irtool.winograd" (IR_META_WINOGRAD: "2" or "off", set
 * by --winograd) limits the tile, and `irtool compile` recompiles with F(2x2) when its
 * validation gate fails with F(4x4) layers.
 *
 * On AVX2 (8-lane vectors, the packed GEMM's 3 x 8 by 4 tile) it replaces im2col + OpenBLAS for
 * the same layers: EPYC Zen 3, ResNet-50 one thread 106 -> 80 ms of CPU, SqueezeNet 10.4 -> 7.3
 * (the alternatives there, F(2x2) everywhere, stride 2 left direct, bands of 0.5-1 MB for its
 * 512 KB L2: alike or up to 4% slower).
 * Vectors run over 16 tiles (AVX2: 8) of one tile row: masked loads of an input row cover their
 * columns (lanes in the padding read zero), a shuffle picks column m*s*l + j of tile l, and the output
 * rows are interleaved back the same way. Scratch (one image): V [E][C][T] and M [E][M][T]
 * for the T tiles of one band of tile rows (the image runs band by band, so V and M stay in
 * L2). The three phases (input transform by channel, GEMMs by tile position, output transform
 * by output channel) split into parts for the runtime's threads.
 */
#include "backend/llvm/emit.h"
#include "backend/cpu/cpu.h"

#include <stdlib.h>
#include <string.h>

#define WG_VW_MAX 16 /* f32 lanes per vector: 16 on AVX-512, 8 on AVX2 (WgGeom.vw) */
/* V and M of one band of tile rows are kept under this many bytes together, so the GEMMs read
 * V and the output transform reads M from L2 (see geom); at 56x56x64 bands of 4 to 10 tile rows
 * (0.9 to 2.3 MB) measured alike, one band (6.4 MB) 15-20% slower, on a core with 2 MB of L2 */
#define WG_BAND_BYTES (2 << 20)
#define WG_BAND_TILES 96 /* ... unless that leaves a band fewer tiles than this */

/* Transform matrices: B^T (a x a), G (a x 3), A^T (m x a) for m = 2, a = m + 2. */
static const double BT2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
static const double AT2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
/* m = 4, a = 6: points 0, 1, -1, 2, -2 and infinity (Lavin and Gray's F(4x4, 3x3)). */
static const double BT4[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                 {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const double G4[6][3] = {{1.0 / 4, 0, 0},
                                {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                {0, 0, 1}};
static const double AT4[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
/* Stride 2, m = 2: a 5x5 input tile (tiles 4 apart) for a 2x2 output tile. In one dimension
 * the even samples x0, x2, x4 meet taps g0 and g2 (F(2, 2): points 0, 1 and infinity, 3
 * multiplies) and the odd ones x1, x3 tap g1 (2 multiplies): y0 = e0 + e1 + e3 and
 * y1 = e1 + e2 + e4 with e0 = (x0 - x2) g0, e1 = x2 (g0 + g2), e2 = (x4 - x2) g2, e3 = x1 g1,
 * e4 = x3 g1. Five multiplies for two outputs where the direct form does six: in 2D 25 GEMM
 * positions for 4 outputs against 36 (1.44x less work), coefficients 0 and +-1. */
static const double BTS2[5][5] = {{1, 0, -1, 0, 0}, {0, 0, 1, 0, 0}, {0, 0, -1, 0, 1}, {0, 1, 0, 0, 0}, {0, 0, 0, 1, 0}};
static const double GS2[5][3] = {{1, 0, 0}, {1, 0, 1}, {0, 0, 1}, {0, 1, 0}, {0, 1, 0}};
static const double ATS2[2][5] = {{1, 1, 0, 1, 0}, {0, 1, 1, 0, 1}};

/* The vector width the emitters use (the AMX bit of simd_bits does not matter here). */
static unsigned wg_bits(unsigned simd_bits) { return simd_bits >= 512 ? 512 : 256; }
static int wg_lanes(unsigned simd_bits) { return wg_bits(simd_bits) == 512 ? 16 : 8; }

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t up16(int64_t a) { return cdiv(a, 16) * 16; }

/* Geometry of one image. */
typedef struct WgGeom {
    int m, a, e;                 /* output tile, input tile, tile positions a * a */
    int vw;                      /* f32 lanes per vector: tiles per group */
    int s;                       /* the Conv's stride (1, or 2 with m = 2); tiles m * s apart */
    int64_t th, tw, groups;      /* tile rows, tile columns, vector groups per tile row */
    int64_t tb, nb, last, bt;    /* tile rows per band, bands, tile rows of the last band, tiles
                                  * of a full band (the GEMMs' columns, V's and M's row length) */
    int64_t wide;                /* floats of the input row segment a group of tiles reads */
    int64_t v_f, mo_f;           /* floats of the two scratch parts (multiples of 16) */
} WgGeom;

static double bt(const WgGeom *q, int i, int j) { return q->s == 2 ? BTS2[i][j] : q->m == 4 ? BT4[i][j] : BT2[i][j]; }
static double gm(const WgGeom *q, int i, int j) { return q->s == 2 ? GS2[i][j] : q->m == 4 ? G4[i][j] : G2[i][j]; }
static double at(const WgGeom *q, int i, int j) { return q->s == 2 ? ATS2[i][j] : q->m == 4 ? AT4[i][j] : AT2[i][j]; }

static void geom(const LowerWin *w, int64_t m_out, int m, int vw, WgGeom *q) {
    q->m = m;
    q->vw = vw;
    q->s = (int)w->sh;
    q->a = q->s == 2 ? 5 : m + 2;
    q->e = q->a * q->a;
    q->th = cdiv(w->oh, m);
    q->tw = cdiv(w->ow, m);
    q->groups = cdiv(q->tw, vw);
    q->wide = up16((int64_t)vw * m * q->s + (q->a - m * q->s));
    /* Bands of tile rows, each through all three phases: V and M of the whole image (56x56x64:
     * 3.2 MB each) went through L3 between the phases, and one ResNet-50 layer at 56x56 took
     * 1.5-2 ms against 0.9 at 28x28 for the same multiplies. Equal bands, as few as fit (the
     * weights U are read once per band). */
    int64_t row_bytes = (int64_t)q->e * (w->c + m_out) * q->tw * 4;
    int64_t per = WG_BAND_BYTES / row_bytes;
    /* but at least two of the GEMM's 48-column panels of tiles where the image has them: a
     * stride-2 layer's 25 positions made bands of 70 and 28 tiles (28x28 and 14x14 outputs,
     * 128 and 256 channels: 1.43 and 1.60 ms against 1.27 and 1.10 with bands of 98 and 49) */
    if (per * q->tw < WG_BAND_TILES) per = cdiv(WG_BAND_TILES, q->tw);
    q->nb = cdiv(q->th, per);
    q->tb = cdiv(q->th, q->nb);
    q->nb = cdiv(q->th, q->tb);
    q->last = q->th - (q->nb - 1) * q->tb;
    q->bt = q->tb * q->tw;
    q->v_f = up16((int64_t)q->e * w->c * q->bt);
    q->mo_f = up16((int64_t)q->e * m_out * q->bt) + vw; /* + one vector: loads past the last tile */
}

int llvm_winograd_tile(const LowerWin *w, int64_t m_out, unsigned simd_bits, int max_tile) {
    if (max_tile < 2 || simd_bits < 256 || w->kh != 3 || w->kw != 3 || w->sh != w->sw || w->sh < 1 || w->sh > 2 || w->dh != 1 ||
        w->dw != 1)
        return 0;
    if (w->c < 16 || m_out < 16 || w->pt < 0 || w->pl < 0 || w->pt > 2 || w->pl > 2) return 0;
    if (w->sh == 2) /* the 2x2 output tile only (see BTS2); 7x7 outputs (16 tiles) stay direct */
        return cdiv(w->oh, 2) * cdiv(w->ow, 2) >= 40 ? 2 : 0;
    /* enough tiles that the GEMMs' columns fill the packed GEMM's 48-column panels (a 14x14
     * image has 16 tiles of 4x4: F(2x2), 49 tiles, measured faster there) */
    if (max_tile >= 4 && cdiv(w->oh, 4) * cdiv(w->ow, 4) >= 40) return 4;
    return cdiv(w->oh, 2) * cdiv(w->ow, 2) >= 40 ? 2 : 0;
}

int64_t llvm_winograd_scratch_bytes(const LowerWin *w, int64_t m_out, int tile) {
    WgGeom q; /* the bands do not depend on the lanes, the widest vector bounds the rest */
    geom(w, m_out, tile, WG_VW_MAX, &q);
    return (q.v_f + q.mo_f) * 4;
}

typedef struct Wg {
    const LlvmWinograd *p;
    WgGeom q;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMTypeRef i1, i8, i32, i64, f32, ptr, vt;
} Wg;

static LLVMValueRef ci(Wg *c, int64_t v) { return LLVMConstInt(c->i64, (unsigned long long)v, 1); }
static LLVMValueRef gepf(Wg *c, LLVMValueRef base, LLVMValueRef off) { return LLVMBuildGEP2(c->b, c->f32, base, &off, 1, ""); }
static LLVMValueRef addi(Wg *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(c->b, a, b, ""); }
static LLVMValueRef muli(Wg *c, LLVMValueRef a, int64_t k) { return LLVMBuildNSWMul(c->b, a, ci(c, k), ""); }

static LLVMValueRef shuffle(Wg *c, LLVMValueRef a, LLVMValueRef b, const int *idx, unsigned n) {
    LLVMValueRef m[128];
    for (unsigned i = 0; i < n; i++) m[i] = LLVMConstInt(c->i32, (unsigned long long)idx[i], 0);
    return LLVMBuildShuffleVector(c->b, a, b ? b : LLVMGetPoison(LLVMTypeOf(a)), LLVMConstVector(m, n), "");
}

/* sum_i k[i] * v[i] over the nonzero coefficients (+-1 as additions). */
static LLVMValueRef lincomb(Wg *c, const double *k, LLVMValueRef *v, int n) {
    LLVMValueRef acc = NULL;
    for (int i = 0; i < n; i++) {
        if (k[i] == 0) continue;
        double a = k[i] < 0 ? -k[i] : k[i];
        LLVMValueRef t = v[i];
        if (a != 1) t = LLVMBuildFMul(c->b, t, llvm_splat_const(LLVMConstReal(c->f32, a), (unsigned)c->q.vw), "");
        if (!acc) acc = k[i] < 0 ? LLVMBuildFNeg(c->b, t, "") : t;
        else acc = k[i] < 0 ? LLVMBuildFSub(c->b, acc, t, "") : LLVMBuildFAdd(c->b, acc, t, "");
    }
    return acc ? acc : LLVMConstNull(c->vt);
}

/* A loop over units [lo, hi); iv is the unit. */
static LLVMValueRef range_begin(Wg *c, LlvmLoop *l, LLVMValueRef lo, LLVMValueRef hi) {
    llvm_loop_begin_v(c->b, c->fn, l, LLVMBuildNSWSub(c->b, hi, lo, ""));
    return addi(c, l->iv, lo);
}

/* Tile rows of band `band` (an i64 value): tb, or `last` for the last band. */
static LLVMValueRef band_rows(Wg *c, LLVMValueRef band) {
    const WgGeom *q = &c->q;
    if (q->last == q->tb) return ci(c, q->tb);
    return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, band, ci(c, q->nb - 1), ""), ci(c, q->last), ci(c, q->tb), "");
}

/* V[k * a + l][c][t] = (B^T d B)[k][l] for channels [lo, hi) and the band's tiles (t counted
 * from the band's first). Per group of 16 tiles, in two steps that keep a dozen vectors live:
 * B^T down the a input rows, vector by vector of the wide rows (tile l's columns are lanes
 * m * s * l .. m * s * l + a - 1 of them, s the stride), into buf (a wide rows
 * on the stack); then per row of that, the columns picked out by shuffles and B across them.
 * The same operations in the same order as B^T on the picked columns first (the lanes do not
 * mix), without the 36 + 36 live vectors that spilled (56x56x64 F(4x4): 96 stack accesses per
 * group, the transform a third of the layer). */
static void input_transform(Wg *c, LLVMValueRef v, LLVMValueRef buf, LLVMValueRef band, LLVMValueRef lo, LLVMValueRef hi) {
    const LowerWin *w = c->p->w;
    const WgGeom *q = &c->q;
    LLVMBuilderRef b = c->b;
    int m = q->m, a = q->a;
    LLVMTypeRef wt = LLVMVectorType(c->f32, (unsigned)q->wide);
    LlvmLoop lc, lt;
    LLVMValueRef ch = range_begin(c, &lc, lo, hi);
    llvm_loop_begin_v(b, c->fn, &lt, band_rows(c, band));
    LLVMValueRef trow = addi(c, muli(c, band, q->tb), lt.iv);
    /* input row r of the tile row (ih = trow * m * s + r - pt): where it starts (row 0 when outside
     * the image) and whether it is inside */
    LLVMValueRef rowp[6], rowin[6];
    for (int i = 0; i < a; i++) {
        LLVMValueRef ih = LLVMBuildNSWSub(b, addi(c, muli(c, trow, m * q->s), ci(c, i)), ci(c, w->pt), "");
        rowin[i] = LLVMBuildICmp(b, LLVMIntULT, ih, ci(c, w->h), "");
        LLVMValueRef rin = LLVMBuildSelect(b, rowin[i], ih, ci(c, 0), "");
        rowp[i] = gepf(c, c->p->x, muli(c, addi(c, muli(c, ch, w->h), rin), w->w));
    }
    for (int64_t gi = 0; gi < q->groups; gi++) {
        int64_t lanes = q->tw - gi * q->vw < q->vw ? q->tw - gi * q->vw : q->vw;
        /* buf[k] = sum_i B^T[k][i] * input row i, a vector at a time: masked loads straight from
         * the input (lanes in the padding read zero), no padded copy */
        for (int64_t j0 = 0; j0 < q->wide; j0 += q->vw) {
            int64_t col0 = gi * q->vw * m * q->s + j0 - w->pl; /* input column of lane 0 */
            LLVMValueRef bits[WG_VW_MAX];
            bool any = false;
            for (int l = 0; l < q->vw; l++) {
                bool inside = col0 + l >= 0 && col0 + l < w->w;
                any |= inside;
                bits[l] = LLVMConstInt(c->i1, inside, 0);
            }
            LLVMValueRef cm = LLVMConstVector(bits, (unsigned)q->vw), d[6];
            for (int i = 0; i < a; i++) {
                if (!any) {
                    d[i] = LLVMConstNull(c->vt);
                    continue;
                }
                LLVMValueRef mask = LLVMBuildSelect(b, rowin[i], cm, LLVMConstNull(LLVMTypeOf(cm)), "");
                d[i] = llvm_masked_load(b, c->vt, gepf(c, rowp[i], ci(c, col0)), mask);
            }
            for (int k = 0; k < a; k++) {
                double kk[6];
                for (int i = 0; i < a; i++) kk[i] = bt(q, k, i);
                LLVMValueRef st = LLVMBuildStore(b, lincomb(c, kk, d, a), gepf(c, buf, ci(c, k * q->wide + j0)));
                LLVMSetAlignment(st, 64);
                LLVMSetVolatile(st, 1); /* kept in memory: promoted back to registers, it spilled */
            }
        }
        /* each row k of buf: its columns j of the 16 tiles, then B across them */
        LLVMValueRef t0 = addi(c, muli(c, lt.iv, q->tw), ci(c, gi * q->vw));
        LlvmLoop lk;
        llvm_loop_begin(b, c->fn, &lk, a);
        LLVMValueRef row = LLVMBuildLoad2(b, wt, gepf(c, buf, muli(c, lk.iv, q->wide)), "");
        LLVMSetAlignment(row, 64);
        LLVMValueRef t[6];
        for (int j = 0; j < a; j++) {
            int idx[WG_VW_MAX];
            for (int l = 0; l < q->vw; l++) idx[l] = m * q->s * l + j;
            t[j] = shuffle(c, row, NULL, idx, (unsigned)q->vw);
        }
        for (int l = 0; l < a; l++) {
            double kk[6];
            for (int j = 0; j < a; j++) kk[j] = bt(q, l, j);
            LLVMValueRef o = lincomb(c, kk, t, a);
            /* position k * a + l */
            LLVMValueRef pos = addi(c, muli(c, lk.iv, a), ci(c, l));
            LLVMValueRef off = addi(c, muli(c, ch, q->bt), muli(c, pos, w->c * q->bt));
            llvm_store_lanes(b, o, gepf(c, v, addi(c, off, t0)), lanes);
        }
        llvm_loop_end(b, c->fn, &lk);
    }
    llvm_loop_end(b, c->fn, &lt);
    llvm_loop_end(b, c->fn, &lc);
}

/* Y[mo] rows for output channels [lo, hi) from M: A^T M A + bias per tile, interleaved back
 * into output rows. */
static void output_transform(Wg *c, LLVMValueRef mo_buf, LLVMValueRef band, LLVMValueRef lo, LLVMValueRef hi) {
    const LlvmWinograd *p = c->p;
    const LowerWin *w = p->w;
    const WgGeom *q = &c->q;
    int m = q->m, a = q->a;
    unsigned width = (unsigned)(q->vw * m);
    LlvmLoop lm, lt;
    LLVMValueRef mo = range_begin(c, &lm, lo, hi);
    LLVMValueRef bias = NULL;
    if (p->bias) {
        LLVMValueRef s = LLVMBuildLoad2(c->b, c->f32, gepf(c, p->bias, mo), "");
        LLVMValueRef v0 = LLVMBuildInsertElement(c->b, LLVMGetPoison(c->vt), s, LLVMConstInt(c->i32, 0, 0), "");
        bias = LLVMBuildShuffleVector(c->b, v0, LLVMGetPoison(c->vt), LLVMConstNull(LLVMVectorType(c->i32, (unsigned)q->vw)), "");
    }
    llvm_loop_begin_v(c->b, c->fn, &lt, band_rows(c, band));
    LLVMValueRef trow = addi(c, muli(c, band, q->tb), lt.iv);
    for (int64_t gi = 0; gi < q->groups; gi++) {
        LLVMValueRef t0 = addi(c, muli(c, lt.iv, q->tw), ci(c, gi * q->vw));
        LLVMValueRef mv[36], t[4][6];
        for (int e = 0; e < q->e; e++) {
            LLVMValueRef off = addi(c, muli(c, mo, q->bt), ci(c, (int64_t)e * p->m_out * q->bt));
            mv[e] = llvm_load_lanes(c->b, gepf(c, mo_buf, addi(c, off, t0)), (unsigned)q->vw, q->vw);
        }
        for (int i = 0; i < m; i++)
            for (int l = 0; l < a; l++) {
                double kk[6];
                LLVMValueRef col[6];
                for (int k = 0; k < a; k++) {
                    kk[k] = at(q, i, k);
                    col[k] = mv[k * a + l];
                }
                t[i][l] = lincomb(c, kk, col, a);
            }
        int64_t c0 = gi * q->vw * m, valid = w->ow - c0 < (int64_t)width ? w->ow - c0 : (int64_t)width;
        for (int i = 0; i < m; i++) {
            LLVMValueRef y[4];
            for (int j = 0; j < m; j++) {
                double kk[6];
                for (int l = 0; l < a; l++) kk[l] = at(q, j, l);
                y[j] = lincomb(c, kk, t[i], a);
                if (bias) y[j] = LLVMBuildFAdd(c->b, y[j], bias, "");
            }
            /* element m * l + j of the output row segment is tile l's column j */
            int idx[64], cat[64];
            for (int k = 0; k < 4 * q->vw; k++) cat[k] = k;
            LLVMValueRef all = shuffle(c, y[0], y[1], cat, 2 * (unsigned)q->vw);
            if (m == 4) all = shuffle(c, all, shuffle(c, y[2], y[3], cat, 2 * (unsigned)q->vw), cat, 4 * (unsigned)q->vw);
            for (int l = 0; l < q->vw; l++)
                for (int j = 0; j < m; j++) idx[m * l + j] = j * q->vw + l;
            LLVMValueRef out = shuffle(c, all, NULL, idx, width);
            LLVMValueRef oh = addi(c, muli(c, trow, m), ci(c, i));
            LLVMBasicBlockRef after = NULL;
            if (w->oh % m != 0) after = llvm_if_begin(c->b, c->fn, LLVMBuildICmp(c->b, LLVMIntSLT, oh, ci(c, w->oh), ""));
            LLVMValueRef col = addi(c, muli(c, oh, w->ow), ci(c, c0));
            if (p->epi_vec) out = p->epi_vec(p->user, out, mo, col, (int)valid);
            llvm_store_lanes(c->b, out, gepf(c, p->y, addi(c, muli(c, mo, w->oh * w->ow), col)), valid);
            if (after) llvm_if_end(c->b, after);
        }
    }
    llvm_loop_end(c->b, c->fn, &lt);
    llvm_loop_end(c->b, c->fn, &lm);
}

/* U[k * a + l][mo][c] = (G g G^T)[k][l], each U_e in the packed GEMM's layout
 * (llvm_pgemm_pack_a), malloc'd (*bytes long). */
float *llvm_winograd_weights(const LlvmWinograd *p, size_t *bytes_out) {
    WgGeom q;
    geom(p->w, p->m_out, p->tile, wg_lanes(p->simd_bits), &q);
    int a = q.a;
    int64_t mc = p->m_out * p->w->c;
    size_t bytes = (size_t)q.e * (size_t)mc * 4;
    *bytes_out = bytes;
    float *u = malloc(bytes);
    if (!u) return NULL;
    for (int64_t r = 0; r < mc; r++) {
        const float *g = p->weights + r * 9;
        double t[6][3];
        for (int k = 0; k < a; k++)
            for (int j = 0; j < 3; j++) t[k][j] = gm(&q, k, 0) * g[j] + gm(&q, k, 1) * g[3 + j] + gm(&q, k, 2) * g[6 + j];
        for (int k = 0; k < a; k++)
            for (int l = 0; l < a; l++)
                u[(int64_t)(k * a + l) * mc + r] = (float)(t[k][0] * gm(&q, l, 0) + t[k][1] * gm(&q, l, 1) + t[k][2] * gm(&q, l, 2));
    }
    float *packed = llvm_pgemm_packed_a_for(wg_bits(p->simd_bits), q.e, p->m_out, p->w->c, u);
    free(u);
    return packed;
}

int64_t llvm_winograd_units(const LlvmWinograd *p, int phase) {
    WgGeom q;
    geom(p->w, p->m_out, p->tile, wg_lanes(p->simd_bits), &q);
    return phase == 0 ? p->w->c : phase == 1 ? q.e : p->m_out;
}

int64_t llvm_winograd_bands(const LlvmWinograd *p) {
    WgGeom q;
    geom(p->w, p->m_out, p->tile, wg_lanes(p->simd_bits), &q);
    return q.nb;
}

/* The band's GEMMs: M_e = U_e V_e over `tiles` columns for tile positions [lo, hi). */
static void band_gemms(Wg *c, LLVMBuilderRef ab, LLVMValueRef v, LLVMValueRef mo, int64_t tiles, LLVMValueRef lo, LLVMValueRef hi) {
    const LlvmWinograd *p = c->p;
    int64_t bt = c->q.bt;
    LlvmLoop le;
    LLVMValueRef e = range_begin(c, &le, lo, hi);
    LlvmPgemm pg = {.m = p->m_out, .n = tiles, .k = p->w->c, .lda = p->w->c, .ldb = bt, .ldc = bt,
                    .a = gepf(c, p->u, muli(c, e, p->m_out * p->w->c)), .b = gepf(c, v, muli(c, e, p->w->c * bt)),
                    .c = gepf(c, mo, muli(c, e, p->m_out * bt)), .simd_bits = wg_bits(p->simd_bits), .a_packed = true};
    llvm_pgemm_emit(c->b, ab, c->fn, &pg);
    llvm_loop_end(c->b, c->fn, &le);
}

void llvm_winograd_phase(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmWinograd *p, int phase,
                         LLVMValueRef band, LLVMValueRef lo, LLVMValueRef hi) {
    Wg c = {.p = p, .b = b, .fn = fn};
    c.mod = LLVMGetGlobalParent(fn);
    c.ctx = LLVMGetModuleContext(c.mod);
    c.i1 = LLVMInt1TypeInContext(c.ctx);
    c.i8 = LLVMInt8TypeInContext(c.ctx);
    c.i32 = LLVMInt32TypeInContext(c.ctx);
    c.i64 = LLVMInt64TypeInContext(c.ctx);
    c.f32 = LLVMFloatTypeInContext(c.ctx);
    c.ptr = LLVMPointerTypeInContext(c.ctx, 0);
    geom(p->w, p->m_out, p->tile, wg_lanes(p->simd_bits), &c.q);
    c.vt = LLVMVectorType(c.f32, (unsigned)c.q.vw);
    LLVMValueRef v = p->scratch, mo = gepf(&c, v, ci(&c, c.q.v_f));
    if (phase == 0) {
        LLVMValueRef buf = LLVMBuildArrayAlloca(ab, c.f32, ci(&c, c.q.a * c.q.wide), "wgrows");
        LLVMSetAlignment(buf, 64);
        input_transform(&c, v, buf, band, lo, hi);
    } else if (phase == 2) output_transform(&c, mo, band, lo, hi);
    else if (c.q.last == c.q.tb) band_gemms(&c, ab, v, mo, c.q.bt, lo, hi);
    else { /* the last band is narrower: its own GEMMs (stale columns are never computed) */
        LLVMBasicBlockRef full = LLVMAppendBasicBlockInContext(c.ctx, fn, "wgfull"), lastb = LLVMAppendBasicBlockInContext(c.ctx, fn, "wglast");
        LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(c.ctx, fn, "wgjoin");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, band, ci(&c, c.q.nb - 1), ""), lastb, full);
        LLVMPositionBuilderAtEnd(b, full);
        band_gemms(&c, ab, v, mo, c.q.bt, lo, hi);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, lastb);
        band_gemms(&c, ab, v, mo, c.q.last * c.q.tw, lo, hi);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, join);
    }
}

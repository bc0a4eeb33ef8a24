/* Packed-panel GEMM emitted inline by the CPU code generator: C = A * B (+ bias per row) for f32
 * row-major matrices whose sizes are known at compile time, with explicit vectors (16 lanes on
 * AVX-512, 8 on AVX2: pg_lanes). B is copied one block of KC rows by NR = 3 vectors of columns at
 * a time into an aligned stack panel that stays in L1 while every strip of A (8 rows on AVX-512,
 * 4 on AVX2) is multiplied with it; the strip's tile of C lives in registers across the K block.
 * Columns beyond N are masked, rows beyond M take a narrower strip, 1-4 column tails are dot
 * products over K, so any shape works. B may be a Conv's implicit im2col (read from the input,
 * never materialized) or constant weights packed at compile time in the panels' layout
 * (b_packed: read in place, nothing copied per call); the work splits into parts for the
 * runtime's thread pool. Also
 * GEMV-shaped products (1-4 rows of A). Nothing is called at run time but irt_parallel. */
#include "backend/llvm/emit.h"
#include "backend/cpu/cpu.h"
#include "backend/runtime/abi.h"

#include <stdlib.h>
#include <string.h>

#define PG_KMAX 192 /* K blocks: K split into the fewest equal blocks of at most this many rows
                     * (a multiple of 16), so the panel of KC x NR floats stays in L1 and every
                     * block but the last is full: K = 576 is three passes over C, not five */
#define PG_L2_BYTES (768 << 10)
#define PG_BPF_COLS 1024 /* B this wide (and K >= 128): its next panel prefetched (Pg.bpf) */
#define DOT_COLS 4 /* flat tails of at most this many columns are dot products (dot_tail) */
#define PG_NV 3    /* vectors per panel: NR = 48 columns with AVX-512, 24 with AVX2 */
#define PG_LINE 16   /* floats per cache line */
#define PG_A_AHEAD 2048 /* bytes of packed A prefetched ahead of the K step being read: a C
                         * microkernel of the 8 x 48 tile streaming A from memory (2 MiB pages)
                         * ran 161-164 GFLOP/s at 2-4 KiB, 155-156 at 8 KiB, 152-158 at 1 KiB
                         * (175 with A in L1); before, each strip prefetched the next one, 6 KiB
                         * ahead at K blocks of 192: stage 4 of ResNet-50 3-6% faster now, the
                         * network 1-3% (minimum times) */

/* f32 lanes of the generated kernels' vectors: 16 with AVX-512, 8 with AVX2 + FMA, else 0 (the
 * packed GEMM and the GEMV are gated per target and shape by their callers: see
 * llvm_pgemm_vector_width, llvm_pgemm_conv_fits and llvm_gemv_fits). */
static int pg_lanes(unsigned simd_bits) { return simd_bits >= 512 ? 16 : simd_bits >= 256 ? 8 : 0; }

/* The register tile: PG_NV vectors of columns by the rows of a strip (the strips of packed A,
 * llvm_pgemm_pack_a). AVX-512: 3 x 16 columns by 8 rows, 24 of the 32 registers accumulating.
 * AVX2: 3 x 8 columns by 4 rows, 12 accumulators, 3 vectors of B and a broadcast filling the 16
 * (6 rows by 2 x 8 columns, OpenBLAS's and BLIS's shape, measured 0-15% slower on ResNet-50's
 * 3x3 layers: one more load per 12 FMAs). */
static int pg_pack_rows(int vw) { return vw >= 16 ? 8 : 4; }

typedef struct Pg {
    const LlvmPgemm *p;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMValueRef fn, panel, xt; /* xt: the dot tail's columns, DOT_COLS x PG_KMAX, K contiguous */
    int64_t kc, nkb, krest;     /* K blocks: nkb of kc rows, then one of krest (< kc) */
    LLVMTypeRef i1, i32, i64, f32, ptr, vt;
    int vw, nv, nr;
    int pr; /* rows per strip of packed A (pg_pack_rows) */
    bool rows; /* implicit im2col whose columns do not map linearly to pixels: one output row's
                * columns per panel (see for_panels); only when OW is under a vector's width */
    int tail;  /* columns of a dot tail computed with the panel being emitted (kblock), 0: none */
    LLVMValueRef tap_off, tap_mask; /* pack_conv_taps' tables (implicit im2col), or NULL */
    bool wrap; /* such columns in flat panels anyway (OW >= a vector's width): a vector that
                * crosses an output row reads the rest of its lanes from the next plane row */
    bool bpf;  /* B's next panel prefetched into L2 by the strips (see strip_prefetch) */
    int bpf_per, bpf_lines; /* with bpf: lines per prefetch slot, lines per row of a panel */
    int64_t bpf_slots;      /* with bpf: prefetch slots per strip of the K block being emitted */
} Pg;

typedef LlvmLoop PgLoop;

static LLVMValueRef pci(Pg *q, int64_t v) { return LLVMConstInt(q->i64, (unsigned long long)v, 1); }

/* The first and last K block flags: i1 constants where known at compile time, else run-time
 * values (one copy of the block's code serves every K block). 1 / 0 for constants, -1 else. */
static int flag_const(LLVMValueRef f) { return LLVMIsAConstantInt(f) ? (int)LLVMConstIntGetZExtValue(f) : -1; }
static LLVMValueRef cflag(Pg *q, bool v) { return LLVMConstInt(q->i1, v, 0); }

static LLVMBasicBlockRef if_begin(Pg *q, LLVMValueRef flag) { return llvm_if_begin(q->b, q->fn, flag); }
static void if_end(Pg *q, LLVMBasicBlockRef no) { llvm_if_end(q->b, no); }

static void pg_loop_begin(Pg *q, PgLoop *l, int64_t n) { llvm_loop_begin(q->b, q->fn, l, n); }
static void pg_loop_end(Pg *q, PgLoop *l) { llvm_loop_end(q->b, q->fn, l); }

/* A loop over [lo, hi) (run-time bounds; nothing when empty). */
typedef struct PgRange {
    LLVMValueRef iv, hi;
    LLVMBasicBlockRef head, exit;
} PgRange;

static void pg_range_begin(Pg *q, PgRange *l, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(q->b);
    l->head = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "pr");
    l->exit = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "prx");
    l->hi = hi;
    LLVMBuildCondBr(q->b, LLVMBuildICmp(q->b, LLVMIntSLT, lo, hi, ""), l->head, l->exit);
    LLVMPositionBuilderAtEnd(q->b, l->head);
    l->iv = LLVMBuildPhi(q->b, q->i64, "");
    LLVMAddIncoming(l->iv, &lo, &pre, 1);
}

static void pg_range_end(Pg *q, PgRange *l) {
    LLVMValueRef next = LLVMBuildNSWAdd(q->b, l->iv, pci(q, 1), "");
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(q->b);
    LLVMAddIncoming(l->iv, &next, &cur, 1);
    LLVMBuildCondBr(q->b, LLVMBuildICmp(q->b, LLVMIntSLT, next, l->hi, ""), l->head, l->exit);
    LLVMPositionBuilderAtEnd(q->b, l->exit);
}

/* A counted loop 0..count-1 carrying rows x cols accumulators (acc[i * stride + j]) as phis:
 * after acc_loop_begin acc holds the phis, the body replaces them by the updated values, and
 * acc_loop_end feeds those back; after it acc holds the values of the last iteration. */
typedef struct AccLoop {
    PgLoop l;
    LLVMValueRef phi[64];
    int rows, cols, stride;
} AccLoop;

static void acc_loop_begin(Pg *q, AccLoop *a, int64_t count, LLVMValueRef *acc, int rows, int cols, int stride) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(q->b);
    pg_loop_begin(q, &a->l, count);
    a->rows = rows;
    a->cols = cols;
    a->stride = stride;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            LLVMValueRef ph = LLVMBuildPhi(q->b, q->vt, "");
            LLVMAddIncoming(ph, &acc[i * stride + j], &pre, 1);
            a->phi[i * cols + j] = acc[i * stride + j] = ph;
        }
}

static void acc_loop_end(Pg *q, AccLoop *a, LLVMValueRef *acc) {
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(q->b);
    for (int i = 0; i < a->rows; i++)
        for (int j = 0; j < a->cols; j++) LLVMAddIncoming(a->phi[i * a->cols + j], &acc[i * a->stride + j], &cur, 1);
    pg_loop_end(q, &a->l);
}

static LLVMValueRef gep(Pg *q, LLVMValueRef base, LLVMValueRef off) { return LLVMBuildGEP2(q->b, q->f32, base, &off, 1, ""); }
static LLVMValueRef add(Pg *q, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(q->b, a, b, ""); }
static LLVMValueRef mul(Pg *q, LLVMValueRef a, int64_t c) { return LLVMBuildNSWMul(q->b, a, pci(q, c), ""); }

static LLVMValueRef vload(Pg *q, LLVMValueRef p, unsigned align) {
    LLVMValueRef v = LLVMBuildLoad2(q->b, q->vt, p, "");
    LLVMSetAlignment(v, align);
    return v;
}
static void vstore(Pg *q, LLVMValueRef v, LLVMValueRef p, unsigned align) { LLVMSetAlignment(LLVMBuildStore(q->b, v, p), align); }

/* Vector at p, lanes >= `lanes` (when < vw) read as zero and never touched; and the store. */
static LLVMValueRef load_lanes(Pg *q, LLVMValueRef p, int lanes) { return llvm_load_lanes(q->b, p, (unsigned)q->vw, lanes); }
static void store_lanes(Pg *q, LLVMValueRef v, LLVMValueRef p, int lanes) { llvm_store_lanes(q->b, v, p, lanes); }

static LLVMValueRef splat(Pg *q, LLVMValueRef s) {
    LLVMValueRef v = LLVMBuildInsertElement(q->b, LLVMGetUndef(q->vt), s, LLVMConstInt(q->i32, 0, 0), "");
    return LLVMBuildShuffleVector(q->b, v, LLVMGetUndef(q->vt), LLVMConstNull(LLVMVectorType(q->i32, (unsigned)q->vw)), "");
}

static LLVMValueRef fma_v(Pg *q, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    unsigned id = LLVMLookupIntrinsicID("llvm.fma", 8);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(q->mod, id, &q->vt, 1), args[3] = {a, b, c};
    return LLVMBuildCall2(q->b, LLVMIntrinsicGetType(q->ctx, id, &q->vt, 1), f, args, 3, "");
}

/* PREFETCH of the cache line at p (never faults, so it may run past the matrix): for writing
 * (PREFETCHW where the target has it: the line comes in owned) or reading, into L1 (locality 3)
 * or L2 only (2). */
void llvm_prefetch_at(LLVMBuilderRef b, LLVMValueRef p, bool write, unsigned locality) {
    LLVMModuleRef mod = LLVMGetGlobalParent(LLVMGetBasicBlockParent(LLVMGetInsertBlock(b)));
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), i32 = LLVMInt32TypeInContext(ctx);
    unsigned id = LLVMLookupIntrinsicID("llvm.prefetch", 13);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(mod, id, &ptr, 1);
    LLVMValueRef args[4] = {p, LLVMConstInt(i32, write, 0), LLVMConstInt(i32, locality, 0), LLVMConstInt(i32, 1, 0)};
    LLVMBuildCall2(b, LLVMIntrinsicGetType(ctx, id, &ptr, 1), f, args, 4, "");
}
void llvm_prefetch_for(LLVMBuilderRef b, LLVMValueRef p, bool write) { llvm_prefetch_at(b, p, write, 3); }
void llvm_prefetch(LLVMBuilderRef b, LLVMValueRef p) { llvm_prefetch_for(b, p, false); }
static void prefetch(Pg *q, LLVMValueRef p) { llvm_prefetch(q->b, p); }
static void prefetch_l2(Pg *q, LLVMValueRef p) { llvm_prefetch_at(q->b, p, false, 2); }

/* The sum of v's lanes (in any order). */
static LLVMValueRef hsum(Pg *q, LLVMValueRef v) {
    unsigned id = LLVMLookupIntrinsicID("llvm.vector.reduce.fadd", 23);
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(q->mod, id, &q->vt, 1);
    LLVMValueRef args[2] = {LLVMConstReal(q->f32, -0.0), v};
    LLVMValueRef r = LLVMBuildCall2(q->b, LLVMIntrinsicGetType(q->ctx, id, &q->vt, 1), f, args, 2, "");
    LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
    return r;
}

/* Rows per strip for nv vectors of columns: the accumulators, nv B vectors and a broadcast fit
 * the 32 vector registers of AVX-512 or the 16 of AVX2. */
static int strip_rows(const Pg *q, int nv) {
    if (q->vw >= 16) return nv >= 3 ? 8 : nv == 2 ? 12 : 16;
    return nv >= 3 ? 4 : nv == 2 ? 6 : 12;
}

/* Rows per strip for a panel of nv vectors: with A packed (llvm_pgemm_pack_a) every strip has
 * q->pr rows, the layout's blocks. */
static int strip_rows_of(const Pg *q, int nv) { return q->p->a_packed ? q->pr : strip_rows(q, nv); }

/* Where A[m0 + i][k0 + k] is for a strip of mr rows at m0 (a multiple of q->pr, or the
 * last rows) of the K block at k0 of kc columns: row-major A, or packed A (see
 * llvm_pgemm_pack_a: the block's strips one after another, each k-major over its rows). */
static LLVMValueRef a_elem(Pg *q, LLVMValueRef m0, int mr, int i, LLVMValueRef k0, int64_t kc, LLVMValueRef k) {
    const LlvmPgemm *p = q->p;
    if (!p->a_packed) return gep(q, p->a, add(q, mul(q, add(q, m0, pci(q, i)), p->lda), add(q, k0, k)));
    LLVMValueRef strip0 = add(q, mul(q, k0, p->m), mul(q, m0, kc));
    return gep(q, p->a, add(q, strip0, add(q, mul(q, k, mr), pci(q, i))));
}

/* Lanes of vector v of a panel whose last vector has `last` lanes. */
static int lanes_of(const Pg *q, int v, int nv, int last) { return v == nv - 1 ? last : q->vw; }

/* bias[row] * bias_scale, or NULL without a bias. */
static LLVMValueRef row_bias(Pg *q, LLVMValueRef row) {
    const LlvmPgemm *p = q->p;
    if (!p->bias) return NULL;
    LLVMValueRef v = LLVMBuildLoad2(q->b, q->f32, gep(q, p->bias, row), "");
    return p->bias_scale != 1.0 ? LLVMBuildFMul(q->b, v, LLVMConstReal(q->f32, p->bias_scale), "") : v;
}

/* The tile's final values (the epilogue applied with epi) into C. */
static void strip_store(Pg *q, LLVMValueRef acc[16][4], LLVMValueRef cptr[16][4], LLVMValueRef m0, int mr, LLVMValueRef j0,
                        int nv, int last, bool epi) {
    const LlvmPgemm *p = q->p;
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nv; v++) {
            LLVMValueRef x = acc[i][v];
            if (epi) x = p->epi_vec(p->user, x, add(q, m0, pci(q, i)), add(q, j0, pci(q, (int64_t)v * q->vw)), lanes_of(q, v, nv, last));
            store_lanes(q, x, cptr[i][v], lanes_of(q, v, nv, last));
        }
}

/* One K step of a strip's tile: acc[i][v] += A[m0 + i, k0 + k] * panel row k. */
static void strip_step(Pg *q, LLVMValueRef acc[16][4], LLVMValueRef m0, int mr, int nv, LLVMValueRef k0, int64_t kc,
                       LLVMValueRef k) {
    LLVMValueRef bv[4];
    unsigned al = q->p->b_packed ? (unsigned)q->vw * 4 : 64; /* a packed B's rows: NR floats apart from a 64-byte base */
    for (int v = 0; v < nv; v++) bv[v] = vload(q, gep(q, q->panel, add(q, mul(q, k, q->nr), pci(q, (int64_t)v * q->vw))), al);
    for (int i = 0; i < mr; i++) {
        LLVMValueRef a = LLVMBuildLoad2(q->b, q->f32, a_elem(q, m0, mr, i, k0, kc, k), "");
        LLVMValueRef s = splat(q, a);
        for (int v = 0; v < nv; v++) acc[i][v] = fma_v(q, s, bv[v], acc[i][v]);
    }
}

/* Prefetches of the next strip's operands, the u-th time (every 1, 2 or 4 K steps, at K step
 * kpos): two lines of A (weights stream from memory in deep layers, and the hardware prefetcher
 * does not follow them: without these the 7x7 layers run 2.7x slower) — with A packed, where
 * strips and K blocks are one run, the two lines PG_A_AHEAD bytes past what this step reads;
 * else lines 2u and 2u + 1 of the next strip's rows in this K block (row-major over (line,
 * row)) — and one line each of its tile of C and of the epilogue's operands
 * (line min(u / mr, nv) of row u % mr; a residual's rows are hundreds of short streams). They
 * never fault, so past the last strip they are harmless. Stage 4 of ResNet-50 (7x7) -7%,
 * stage 1 (56x56) -17% when they came in (seventh session, one prefetch of each per K step);
 * one per K step cost 10% of a 1x1 Conv's time on a later machine. */
static void strip_prefetch(Pg *q, LLVMValueRef m0, int mr, LLVMValueRef j0, int nv, LLVMValueRef k0, int64_t kc, LLVMValueRef u,
                           LLVMValueRef kpos) {
    const LlvmPgemm *p = q->p;
    LLVMBuilderRef b = q->b;
    LLVMValueRef next = add(q, m0, pci(q, mr));
    for (int h = 0; h < 2; h++) {
        LLVMValueRef line = add(q, mul(q, u, 2), pci(q, h));
        if (p->a_packed) {
            prefetch(q, gep(q, a_elem(q, m0, mr, 0, k0, kc, kpos), pci(q, PG_A_AHEAD / 4 + h * 16)));
            continue;
        }
        LLVMValueRef row = add(q, next, LLVMBuildURem(b, line, pci(q, mr), ""));
        LLVMValueRef col = mul(q, LLVMBuildUDiv(b, line, pci(q, mr), ""), PG_LINE);
        prefetch(q, gep(q, p->a, add(q, mul(q, row, p->lda), add(q, k0, col))));
    }
    LLVMValueRef pl = LLVMBuildUDiv(b, u, pci(q, mr), "");
    LLVMValueRef prow = add(q, next, LLVMBuildURem(b, u, pci(q, mr), ""));
    LLVMValueRef pcl = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, pl, pci(q, nv), ""), pl, pci(q, nv), "");
    LLVMValueRef pcol = add(q, j0, mul(q, pcl, q->vw));
    prefetch(q, gep(q, p->c, add(q, mul(q, prow, p->ldc), pcol)));
    if (p->epi_prefetch) p->epi_prefetch(p->user, prow, pcol);
    if (!q->bpf || !q->bpf_per) return;
    /* B's rows of the next panel (columns j0 + NR ..), this K block: the strips' slots in turn
     * take bpf_per of its kc x bpf_lines lines each (slot g: lines g * bpf_per ..) */
    LLVMValueRef g = add(q, mul(q, LLVMBuildUDiv(b, m0, pci(q, q->pr), ""), q->bpf_slots), u);
    for (int h = 0; h < q->bpf_per; h++) {
        LLVMValueRef idx = add(q, mul(q, g, q->bpf_per), pci(q, h));
        LLVMValueRef r = LLVMBuildUDiv(b, idx, pci(q, q->bpf_lines), ""), l = LLVMBuildURem(b, idx, pci(q, q->bpf_lines), "");
        r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, r, pci(q, kc), ""), r, pci(q, kc - 1), "");
        LLVMValueRef col = mul(q, l, q->vw);
        if (q->bpf_lines > q->nv) /* rows not line-aligned: the last line at the panel's end */
            col = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, l, pci(q, q->nv), ""), pci(q, q->nr - 1), col, "");
        prefetch_l2(q, gep(q, p->b, add(q, mul(q, add(q, k0, r), p->ldb), add(q, add(q, j0, pci(q, q->nr)), col))));
    }
}

/* C[m0 .. m0+mr, j0 .. j0+cols] (+)= A[m0.., k0 .. k0+kc] * panel: the tile in registers. */
static void strip(Pg *q, LLVMValueRef m0, int mr, LLVMValueRef j0, int nv, int last, LLVMValueRef k0, int64_t kc,
                  LLVMValueRef first, LLVMValueRef done) {
    const LlvmPgemm *p = q->p;
    LLVMBuilderRef b = q->b;
    LLVMValueRef acc[16][4], cptr[16][4];
    for (int i = 0; i < mr; i++) {
        LLVMValueRef row = add(q, m0, pci(q, i));
        LLVMValueRef bv = flag_const(first) != 0 ? row_bias(q, row) : NULL;
        LLVMValueRef init = bv ? splat(q, bv) : LLVMConstNull(q->vt);
        for (int v = 0; v < nv; v++) {
            cptr[i][v] = gep(q, p->c, add(q, add(q, mul(q, row, p->ldc), j0), pci(q, (int64_t)v * q->vw)));
            acc[i][v] = init;
        }
    }
    if (flag_const(first) != 1) { /* later K blocks add to C: loaded only then (a branch, so the
                                   * first block does not wait on reads of C) */
        bool rt = flag_const(first) == -1;
        LLVMBasicBlockRef from = LLVMGetInsertBlock(b), join = NULL;
        if (rt) {
            LLVMBasicBlockRef ldb = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "ldc");
            join = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "ldcx");
            LLVMBuildCondBr(b, first, join, ldb);
            LLVMPositionBuilderAtEnd(b, ldb);
        }
        LLVMValueRef old[16][4];
        for (int i = 0; i < mr; i++)
            for (int v = 0; v < nv; v++) old[i][v] = load_lanes(q, cptr[i][v], lanes_of(q, v, nv, last));
        if (rt) {
            LLVMBasicBlockRef ldend = LLVMGetInsertBlock(b);
            LLVMBuildBr(b, join);
            LLVMPositionBuilderAtEnd(b, join);
            for (int i = 0; i < mr; i++)
                for (int v = 0; v < nv; v++) {
                    LLVMValueRef ph = LLVMBuildPhi(b, q->vt, "");
                    LLVMAddIncoming(ph, &acc[i][v], &from, 1);
                    LLVMAddIncoming(ph, &old[i][v], &ldend, 1);
                    acc[i][v] = ph;
                }
        } else
            memcpy(acc, old, sizeof old);
    }
    /* k loop with the tile as phis; the prefetches once every 2^shift K steps: at most every
     * 4th step, as often as covering the next strip's mr x (nv + 1) lines of C and its
     * mr x kc / 16 lines of A (two a time) takes. With A packed the loop runs 2^shift steps per
     * iteration and prefetches once per iteration (1x1 Convs of ResNet-50 2-10% faster than
     * one step and a branch per iteration, the loop's own instructions sharing the FMA ports);
     * with A's rows apart (mr pointers) LLVM hoisted the broadcasts of later steps and spilled
     * (a Winograd layer at 14x14 0.81 -> 1.49 ms), so there one step per iteration and the
     * prefetches behind a branch */
    int shift = 2;
    while (shift > 0 && ((kc >> shift) < (int64_t)mr * (nv + 1) || 2 * (kc >> shift) < mr * ((kc + 15) / 16))) shift--;
    int unroll = p->a_packed ? 1 << shift : 1;
    if (q->bpf) {
        int64_t strips = (p->m + q->pr - 1) / q->pr, slots = kc >> shift;
        int64_t per = slots ? (kc * q->bpf_lines + strips * slots - 1) / (strips * slots) : 0;
        q->bpf_slots = slots;
        q->bpf_per = (int)(per > 3 ? 3 : per);
    }
    AccLoop al;
    if (kc / unroll) {
        acc_loop_begin(q, &al, kc / unroll, &acc[0][0], mr, nv, 4);
        LLVMValueRef k = al.l.iv, u = k;
        LLVMBasicBlockRef skip = NULL;
        if (unroll == 1 && shift) {
            skip = if_begin(q, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, k, pci(q, (1 << shift) - 1), ""), pci(q, 0), ""));
            u = LLVMBuildLShr(b, k, pci(q, shift), "");
        }
        strip_prefetch(q, m0, mr, j0, nv, k0, kc, u, unroll > 1 ? mul(q, k, unroll) : k);
        if (skip) if_end(q, skip);
        for (int s = 0; s < unroll; s++) strip_step(q, acc, m0, mr, nv, k0, kc, add(q, mul(q, k, unroll), pci(q, s)));
        acc_loop_end(q, &al, &acc[0][0]);
    }
    if (kc % unroll) {
        acc_loop_begin(q, &al, kc % unroll, &acc[0][0], mr, nv, 4);
        strip_step(q, acc, m0, mr, nv, k0, kc, add(q, al.l.iv, pci(q, kc / unroll * unroll)));
        acc_loop_end(q, &al, &acc[0][0]);
    }
    int dc = flag_const(done);
    if (!p->epi_vec || dc == 0) strip_store(q, acc, cptr, m0, mr, j0, nv, last, false);
    else if (dc == 1) strip_store(q, acc, cptr, m0, mr, j0, nv, last, true);
    else { /* the epilogue on the last K block only */
        LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "ep"), no = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "nep");
        LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "epx");
        LLVMBuildCondBr(b, done, yes, no);
        LLVMPositionBuilderAtEnd(b, yes);
        strip_store(q, acc, cptr, m0, mr, j0, nv, last, true);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, no);
        strip_store(q, acc, cptr, m0, mr, j0, nv, last, false);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, join);
    }
}

/* ---- implicit im2col: B row k = (c, kh, kw), column j = (oh, ow) of one input image ----------
 * The panel is filled straight from the input: each vector of columns is one masked load of
 * pixels (ih, iw) = (oh * sh - pt + kh * dh, ow * sw - pl + kw * dw), lanes outside the image
 * (the padding) or beyond N reading zero. A strided Conv reads the input split into stride
 * phases (llvm_conv_phase_floats), where every tap is a unit-stride shift of one phase plane.
 * Consecutive columns are then consecutive pixels within an output row; across rows too when
 * OW equals the plane width, else panels hold one output row each (Pg.rows). No im2col
 * buffer is written. */
static LLVMValueRef splat_i32(Pg *q, LLVMValueRef s) {
    LLVMTypeRef vt = LLVMVectorType(q->i32, (unsigned)q->vw);
    LLVMValueRef v = LLVMBuildInsertElement(q->b, LLVMGetUndef(vt), s, LLVMConstInt(q->i32, 0, 0), "");
    return LLVMBuildShuffleVector(q->b, v, LLVMGetUndef(vt), LLVMConstNull(vt), "");
}
static LLVMValueRef ci32v(Pg *q, int64_t c) { return splat_i32(q, LLVMConstInt(q->i32, (unsigned long long)c, 1)); }

/* Output rows and columns (oh, ow) of the lanes of vector v of the panel at j0, and which lanes
 * are columns < N. */
static void lane_coords(Pg *q, LLVMValueRef j0, int v, LLVMValueRef *oh, LLVMValueRef *ow, LLVMValueRef *valid) {
    const LowerWin *w = q->p->conv;
    LLVMValueRef lanes[64];
    for (int i = 0; i < q->vw; i++) lanes[i] = LLVMConstInt(q->i32, (unsigned long long)(v * q->vw + i), 0);
    LLVMValueRef j = LLVMBuildAdd(q->b, splat_i32(q, LLVMBuildTrunc(q->b, j0, q->i32, "")), LLVMConstVector(lanes, (unsigned)q->vw), "");
    *oh = LLVMBuildUDiv(q->b, j, ci32v(q, w->ow), "");
    *ow = LLVMBuildURem(q->b, j, ci32v(q, w->ow), "");
    *valid = LLVMBuildICmp(q->b, LLVMIntULT, j, ci32v(q, q->p->n), "");
}

/* floor(t / s) and t - s * floor(t / s) for a run-time i64 t and constant s > 0 */
static void floor_divmod(LLVMBuilderRef b, LLVMValueRef t, int64_t s, LLVMValueRef *quo, LLVMValueRef *rem) {
    LLVMTypeRef i64 = LLVMTypeOf(t);
    LLVMValueRef sv = LLVMConstInt(i64, (unsigned long long)s, 1);
    LLVMValueRef r = LLVMBuildSRem(b, t, sv, "");
    r = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, r, LLVMConstInt(i64, 0, 1), ""), LLVMBuildAdd(b, r, sv, ""), r, "");
    *rem = r;
    *quo = LLVMBuildSDiv(b, LLVMBuildSub(b, t, r, ""), sv, "");
}

void llvm_conv_tap(LLVMBuilderRef b, const LowerWin *w, bool phased, LLVMValueRef t, LLVMValueRef *plane, LLVMValueRef *dh,
                   LLVMValueRef *dw) {
    LLVMTypeRef i64 = LLVMTypeOf(t);
#define C64(v) LLVMConstInt(i64, (unsigned long long)(v), 1)
    LLVMValueRef kh = LLVMBuildUDiv(b, t, C64(w->kw), ""), kw = LLVMBuildURem(b, t, C64(w->kw), "");
    LLVMValueRef offh = LLVMBuildSub(b, LLVMBuildNSWMul(b, kh, C64(w->dh), ""), C64(w->pt), "");
    LLVMValueRef offw = LLVMBuildSub(b, LLVMBuildNSWMul(b, kw, C64(w->dw), ""), C64(w->pl), "");
    *plane = C64(0);
    if (phased) { /* tap offset t = s * quo + rem: phase plane rem, unit-stride shift quo */
        int64_t ph, pw;
        llvm_conv_plane(w, true, &ph, &pw);
        LLVMValueRef qh, ah, qw, aw;
        floor_divmod(b, offh, w->sh, &qh, &ah);
        floor_divmod(b, offw, w->sw, &qw, &aw);
        *plane = LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, ah, C64(w->sw), ""), aw, ""), C64(ph * pw), "");
        offh = qh;
        offw = qw;
    }
#undef C64
    *dh = offh;
    *dw = offw;
}

int64_t llvm_conv_channel_floats(const LowerWin *w, bool phased) {
    int64_t ph, pw;
    llvm_conv_plane(w, phased, &ph, &pw);
    return phased ? w->sh * w->sw * ph * pw : ph * pw;
}

void llvm_conv_plane(const LowerWin *w, bool phased, int64_t *ph, int64_t *pw) {
    *ph = phased ? (w->h + w->sh - 1) / w->sh : w->h;
    *pw = phased ? (w->w + w->sw - 1) / w->sw : w->w;
}

int64_t llvm_conv_phase_floats(const LowerWin *w) {
    if (w->sh == 1 && w->sw == 1) return 0;
    int64_t hp, wp;
    llvm_conv_plane(w, true, &hp, &wp);
    return w->c * w->sh * w->sw * hp * wp;
}

/* Whether consecutive columns across an output row's end are not consecutive pixels (OW is
 * not the width of the planes read). */
static bool pg_wraps(const LlvmPgemm *p) {
    int64_t ph, pw;
    if (!p->conv) return false;
    llvm_conv_plane(p->conv, p->phased, &ph, &pw);
    return p->conv->ow != pw;
}

/* Whether panels hold one output row each: the columns wrap and a vector could span more than
 * two output rows (OW under 16). Wider rows keep flat panels (no lanes lost at row ends: a
 * 111-wide row was three panels of 48 for 111 columns) and split vectors at row ends. */
static bool pg_rows(const LlvmPgemm *p) {
    return pg_wraps(p) && p->conv->ow < pg_lanes(p->simd_bits);
}

/* One row of a panel whose vectors cross output rows (q->wrap: OW is not the plane width, so a
 * vector takes the lanes of its first output row from one place and the rest from the next
 * plane row); pack_conv_taps does every other implicit im2col panel. */
static void pack_conv_row_wrap(Pg *q, LLVMValueRef j0, int nv, LLVMValueRef kk, LLVMValueRef dst, LLVMValueRef *oh,
                               LLVMValueRef *ow, LLVMValueRef *valid) {
    const LowerWin *w = q->p->conv;
    LLVMBuilderRef b = q->b;
    int64_t taps = w->kh * w->kw;
    LLVMValueRef c = LLVMBuildUDiv(b, kk, pci(q, taps), ""), r = LLVMBuildURem(b, kk, pci(q, taps), "");
    int64_t ph, pw;
    llvm_conv_plane(w, q->p->phased, &ph, &pw);
    LLVMValueRef poff, offh, offw;
    llvm_conv_tap(b, w, q->p->phased, r, &poff, &offh, &offw);
    LLVMValueRef plane = gep(q, q->p->b, add(q, mul(q, c, llvm_conv_channel_floats(w, q->p->phased)), poff));
    LLVMValueRef offh32 = splat_i32(q, LLVMBuildTrunc(b, offh, q->i32, "")), offw32 = splat_i32(q, LLVMBuildTrunc(b, offw, q->i32, ""));
    for (int v = 0; v < nv; v++) {
        LLVMValueRef ih = LLVMBuildAdd(b, oh[v], offh32, ""), iw = LLVMBuildAdd(b, ow[v], offw32, "");
        LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, ih, ci32v(q, ph), ""),
                                       LLVMBuildICmp(b, LLVMIntULT, iw, ci32v(q, pw), ""), "");
        LLVMValueRef mask = LLVMBuildAnd(b, in, valid[v], "");
        /* lanes of the vector's first output row, then those of the next one */
        LLVMValueRef jv = add(q, j0, pci(q, (int64_t)v * q->vw));
        LLVMValueRef oh0 = LLVMBuildUDiv(b, jv, pci(q, w->ow), ""), ow0 = LLVMBuildURem(b, jv, pci(q, w->ow), "");
        LLVMValueRef off = add(q, add(q, mul(q, oh0, pw), ow0), add(q, mul(q, offh, pw), offw));
        LLVMValueRef same = LLVMBuildICmp(b, LLVMIntEQ, oh[v], splat_i32(q, LLVMBuildTrunc(b, oh0, q->i32, "")), "");
        LLVMValueRef x1 = llvm_masked_load(b, q->vt, gep(q, plane, off), LLVMBuildAnd(b, mask, same, ""));
        LLVMValueRef x2 = llvm_masked_load(b, q->vt, gep(q, plane, add(q, off, pci(q, pw - w->ow))),
                                           LLVMBuildAnd(b, mask, LLVMBuildNot(b, same, ""), ""));
        vstore(q, LLVMBuildSelect(b, same, x1, x2, ""), gep(q, q->panel, add(q, dst, pci(q, (int64_t)v * q->vw))), 64);
    }
}

/* The panel's implicit im2col by taps (flat panels whose vectors stay within one output row's
 * wrap, i.e. not q->wrap): a row's pixels depend on its channel only through the plane it reads,
 * so for each tap (kh, kw) the offset into a channel's planes and the lanes inside the image are
 * worked out once per panel (tap_off, tap_mask: nv 16-bit masks), and each row is a divide by
 * the taps, two loads and its masked loads. Per row, pack_conv_row's arithmetic was about 60
 * instructions, over 10% of a stride-2 3x3 layer. */
static void pack_conv_taps(Pg *q, LLVMValueRef j0, int nv, LLVMValueRef k0, int64_t kc, LLVMValueRef *oh, LLVMValueRef *ow,
                           LLVMValueRef *valid) {
    const LowerWin *w = q->p->conv;
    LLVMBuilderRef b = q->b;
    int64_t taps = w->kh * w->kw, ph, pw;
    llvm_conv_plane(w, q->p->phased, &ph, &pw);
    LLVMTypeRef mi = LLVMIntTypeInContext(q->ctx, (unsigned)q->vw), mv = LLVMVectorType(q->i1, (unsigned)q->vw); /* a mask as bits */
    LLVMValueRef base = j0;
    if (q->rows) {
        LLVMValueRef oh0 = LLVMBuildUDiv(b, j0, pci(q, w->ow), ""), ow0 = LLVMBuildURem(b, j0, pci(q, w->ow), "");
        base = add(q, mul(q, oh0, pw), ow0);
    }
    PgLoop lt;
    pg_loop_begin(q, &lt, taps);
    LLVMValueRef off, offh, offw;
    llvm_conv_tap(b, w, q->p->phased, lt.iv, &off, &offh, &offw);
    off = add(q, off, add(q, base, add(q, mul(q, offh, pw), offw)));
    LLVMBuildStore(b, off, LLVMBuildGEP2(b, q->i64, q->tap_off, &lt.iv, 1, ""));
    LLVMValueRef offh32 = splat_i32(q, LLVMBuildTrunc(b, offh, q->i32, "")), offw32 = splat_i32(q, LLVMBuildTrunc(b, offw, q->i32, ""));
    for (int v = 0; v < nv; v++) {
        LLVMValueRef ih = LLVMBuildAdd(b, oh[v], offh32, ""), iw = LLVMBuildAdd(b, ow[v], offw32, "");
        LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, ih, ci32v(q, ph), ""), LLVMBuildICmp(b, LLVMIntULT, iw, ci32v(q, pw), ""), "");
        LLVMValueRef mk = LLVMBuildBitCast(b, LLVMBuildAnd(b, in, valid[v], ""), mi, "");
        LLVMValueRef at = add(q, mul(q, lt.iv, nv), pci(q, v));
        LLVMBuildStore(b, mk, LLVMBuildGEP2(b, mi, q->tap_mask, &at, 1, ""));
    }
    pg_loop_end(q, &lt);
    /* the rows: channel kk / taps, tap kk % taps */
    int64_t cstride = llvm_conv_channel_floats(w, q->p->phased);
    PgLoop lk;
    pg_loop_begin(q, &lk, kc);
    LLVMValueRef kk = add(q, k0, lk.iv), dst = mul(q, lk.iv, q->nr);
    LLVMValueRef c = LLVMBuildUDiv(b, kk, pci(q, taps), ""), t = LLVMBuildURem(b, kk, pci(q, taps), "");
    LLVMValueRef o = LLVMBuildLoad2(b, q->i64, LLVMBuildGEP2(b, q->i64, q->tap_off, &t, 1, ""), "");
    LLVMValueRef src = gep(q, q->p->b, add(q, mul(q, c, cstride), o));
    for (int v = 0; v < nv; v++) {
        LLVMValueRef at = add(q, mul(q, t, nv), pci(q, v));
        LLVMValueRef mk = LLVMBuildBitCast(b, LLVMBuildLoad2(b, mi, LLVMBuildGEP2(b, mi, q->tap_mask, &at, 1, ""), ""), mv, "");
        LLVMValueRef x = llvm_masked_load(b, q->vt, gep(q, src, pci(q, (int64_t)v * q->vw)), mk);
        vstore(q, x, gep(q, q->panel, add(q, dst, pci(q, (int64_t)v * q->vw))), 64);
    }
    pg_loop_end(q, &lk);
}

/* Rows k0 .. k0 + kc of B's columns at j0 (nv vectors, the last with `last` lanes) into the panel. */
static void pack_panel(Pg *q, LLVMValueRef j0, int nv, int last, LLVMValueRef k0, int64_t kc) {
    const LlvmPgemm *p = q->p;
    LLVMValueRef oh[4], ow[4], valid[4];
    if (p->conv)
        for (int v = 0; v < nv; v++) lane_coords(q, j0, v, &oh[v], &ow[v], &valid[v]);
    if (p->conv && !q->wrap) {
        pack_conv_taps(q, j0, nv, k0, kc, oh, ow, valid);
        return;
    }
    PgLoop lk;
    pg_loop_begin(q, &lk, kc);
    LLVMValueRef dst = mul(q, lk.iv, q->nr);
    if (p->conv) pack_conv_row_wrap(q, j0, nv, add(q, k0, lk.iv), dst, oh, ow, valid);
    else {
        LLVMValueRef src = add(q, mul(q, add(q, k0, lk.iv), p->ldb), j0);
        for (int v = 0; v < nv; v++) {
            LLVMValueRef x = load_lanes(q, gep(q, p->b, add(q, src, pci(q, (int64_t)v * q->vw))), lanes_of(q, v, nv, last));
            vstore(q, x, gep(q, q->panel, add(q, dst, pci(q, (int64_t)v * q->vw))), 64);
        }
    }
    pg_loop_end(q, &lk);
}

/* ---- dot tail: the last 1..DOT_COLS columns of a flat GEMM ------------------------------------
 * A tail that narrow would fill one vector per row with 1 to 4 useful lanes (a 7x7 output is
 * 48 + 1 columns: a third of the work for 1/49 of the result). Instead each output is a dot
 * product over K with 16 K-lanes per FMA: the tail's columns are copied K-contiguous from the
 * panel, rows of A are read as they are, and each sum is reduced once per K block. */
/* The dot strip's sums over packed A: per K step the strip's mr values of A (contiguous) times
 * each column's B value (dot_packed_step: mr-lane vectors), or two K steps per vector with
 * DOT_CHAINS sets of accumulators in flight (one chain of FMAs waited on each one's latency);
 * sums[i][t] gets row i's sum for column t. */
#define DOT_CHAINS 4
static LLVMValueRef dot_packed_a(Pg *q, LLVMValueRef m0, int mr, LLVMValueRef k0, int64_t kc, LLVMValueRef k) {
    return llvm_load_lanes(q->b, a_elem(q, m0, mr, 0, k0, kc, k), (unsigned)q->pr, mr);
}

static void dot_packed_step(Pg *q, LLVMValueRef *acc, LLVMValueRef m0, int mr, int cols, LLVMValueRef k0, int64_t kc, LLVMValueRef k) {
    LLVMBuilderRef b = q->b;
    LLVMTypeRef vt8 = LLVMVectorType(q->f32, (unsigned)q->pr);
    LLVMValueRef av = dot_packed_a(q, m0, mr, k0, kc, k);
    unsigned fid = LLVMLookupIntrinsicID("llvm.fma", 8);
    LLVMValueRef fma = LLVMGetIntrinsicDeclaration(q->mod, fid, &vt8, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(q->ctx, fid, &vt8, 1);
    for (int t = 0; t < cols; t++) {
        LLVMValueRef x = LLVMBuildLoad2(b, q->f32, gep(q, q->xt, add(q, pci(q, (int64_t)t * PG_KMAX), k)), "");
        LLVMValueRef xs = LLVMBuildInsertElement(b, LLVMGetUndef(vt8), x, LLVMConstInt(q->i32, 0, 0), "");
        xs = LLVMBuildShuffleVector(b, xs, LLVMGetUndef(vt8), LLVMConstNull(LLVMVectorType(q->i32, (unsigned)q->pr)), "");
        LLVMValueRef args[3] = {av, xs, acc[t]};
        acc[t] = LLVMBuildCall2(b, fty, fma, args, 3, "");
    }
}

static void dot_sums_packed(Pg *q, LLVMValueRef m0, int mr, int cols, LLVMValueRef k0, int64_t kc, LLVMValueRef sums[8][DOT_COLS]) {
    LLVMBuilderRef b = q->b;
    LLVMTypeRef vt8 = LLVMVectorType(q->f32, (unsigned)q->pr), v2 = LLVMVectorType(q->f32, 2);
    LLVMValueRef acc[DOT_CHAINS][DOT_COLS], acc8[DOT_COLS];
    for (int t = 0; t < cols; t++) {
        acc8[t] = LLVMConstNull(vt8);
        for (int u = 0; u < DOT_CHAINS; u++) acc[u][t] = LLVMConstNull(q->vt);
    }
    /* Full strips: two K steps per vector (the strip's values for k and k + 1 are 16
     * consecutive floats; B's two values spread over the halves), DOT_CHAINS pairs in flight. */
    int64_t iters = mr == q->pr && q->vw == 2 * q->pr ? kc / (2 * DOT_CHAINS) : 0;
    if (iters) {
        AccLoop al;
        acc_loop_begin(q, &al, iters, &acc[0][0], DOT_CHAINS, cols, DOT_COLS);
        LLVMValueRef half[16];
        for (int l = 0; l < q->vw; l++) half[l] = LLVMConstInt(q->i32, l < q->pr ? 0 : 1, 0);
        for (int u = 0; u < DOT_CHAINS; u++) {
            LLVMValueRef k = add(q, mul(q, al.l.iv, 2 * DOT_CHAINS), pci(q, 2 * u));
            LLVMValueRef av = vload(q, a_elem(q, m0, mr, 0, k0, kc, k), 4);
            for (int t = 0; t < cols; t++) {
                LLVMValueRef x2 = LLVMBuildLoad2(b, v2, gep(q, q->xt, add(q, pci(q, (int64_t)t * PG_KMAX), k)), "");
                LLVMSetAlignment(x2, 4);
                LLVMValueRef xs = LLVMBuildShuffleVector(b, x2, LLVMGetUndef(v2), LLVMConstVector(half, (unsigned)q->vw), "");
                acc[u][t] = fma_v(q, av, xs, acc[u][t]);
            }
        }
        acc_loop_end(q, &al, &acc[0][0]);
    }
    for (int64_t k = iters * 2 * DOT_CHAINS; k < kc; k++) dot_packed_step(q, acc8, m0, mr, cols, k0, kc, pci(q, k));
    LLVMValueRef lo[8], hi[8];
    for (int l = 0; l < q->pr; l++) {
        lo[l] = LLVMConstInt(q->i32, (unsigned long long)l, 0);
        hi[l] = LLVMConstInt(q->i32, (unsigned long long)(l + q->pr), 0);
    }
    for (int t = 0; t < cols; t++) {
        LLVMValueRef v = acc8[t];
        if (iters) {
            LLVMValueRef w = LLVMBuildFAdd(b, LLVMBuildFAdd(b, acc[0][t], acc[1][t], ""), LLVMBuildFAdd(b, acc[2][t], acc[3][t], ""), "");
            LLVMValueRef wl = LLVMBuildShuffleVector(b, w, LLVMGetUndef(q->vt), LLVMConstVector(lo, (unsigned)q->pr), "");
            LLVMValueRef wh = LLVMBuildShuffleVector(b, w, LLVMGetUndef(q->vt), LLVMConstVector(hi, (unsigned)q->pr), "");
            v = LLVMBuildFAdd(b, v, LLVMBuildFAdd(b, wl, wh, ""), "");
        }
        for (int i = 0; i < mr; i++) sums[i][t] = LLVMBuildExtractElement(b, v, LLVMConstInt(q->i32, (unsigned long long)i, 0), "");
    }
}

static void dot_strip(Pg *q, LLVMValueRef m0, int mr, LLVMValueRef j0, int cols, LLVMValueRef k0, int64_t kc,
                      LLVMValueRef first, LLVMValueRef done) {
    const LlvmPgemm *p = q->p;
    LLVMBuilderRef b = q->b;
    int64_t chunks = kc / q->vw, krest = kc % q->vw;
    LLVMValueRef acc[8][DOT_COLS], arow[8], sums[8][DOT_COLS];
    if (p->a_packed) {
        dot_sums_packed(q, m0, mr, cols, k0, kc, sums);
        chunks = krest = 0;
    }
    for (int i = 0; i < mr && !p->a_packed; i++) {
        arow[i] = gep(q, p->a, add(q, mul(q, add(q, m0, pci(q, i)), p->lda), k0));
        for (int t = 0; t < cols; t++) acc[i][t] = LLVMConstNull(q->vt);
    }
    if (chunks) {
        AccLoop al;
        acc_loop_begin(q, &al, chunks, &acc[0][0], mr, cols, DOT_COLS);
        LLVMValueRef off = mul(q, al.l.iv, q->vw), xv[DOT_COLS];
        for (int t = 0; t < cols; t++) xv[t] = vload(q, gep(q, q->xt, add(q, pci(q, (int64_t)t * PG_KMAX), off)), 64);
        for (int i = 0; i < mr; i++) {
            LLVMValueRef av = vload(q, gep(q, arow[i], off), 4);
            for (int t = 0; t < cols; t++) acc[i][t] = fma_v(q, av, xv[t], acc[i][t]);
        }
        acc_loop_end(q, &al, &acc[0][0]);
    }
    if (krest) {
        LLVMValueRef off = pci(q, chunks * q->vw), xv[DOT_COLS];
        for (int t = 0; t < cols; t++) xv[t] = load_lanes(q, gep(q, q->xt, add(q, pci(q, (int64_t)t * PG_KMAX), off)), (int)krest);
        for (int i = 0; i < mr; i++) {
            LLVMValueRef av = load_lanes(q, gep(q, arow[i], off), (int)krest);
            for (int t = 0; t < cols; t++) acc[i][t] = fma_v(q, av, xv[t], acc[i][t]);
        }
    }
    for (int i = 0; i < mr; i++) {
        LLVMValueRef row = add(q, m0, pci(q, i));
        int fc = flag_const(first), dc = flag_const(done);
        LLVMValueRef bv = fc != 0 ? row_bias(q, row) : NULL, init = bv ? bv : LLVMConstReal(q->f32, 0.0);
        for (int t = 0; t < cols; t++) {
            LLVMValueRef col = add(q, j0, pci(q, t)), cp = gep(q, p->c, add(q, mul(q, row, p->ldc), col));
            LLVMValueRef prev = init;
            if (fc != 1) {
                LLVMValueRef old = LLVMBuildLoad2(b, q->f32, cp, "");
                prev = fc == 0 ? old : LLVMBuildSelect(b, first, init, old, "");
            }
            LLVMValueRef s = LLVMBuildFAdd(b, prev, p->a_packed ? sums[i][t] : hsum(q, acc[i][t]), "");
            if (p->epi_vec && dc != 0) {
                LLVMValueRef v = LLVMBuildInsertElement(b, LLVMGetUndef(q->vt), s, LLVMConstInt(q->i32, 0, 0), "");
                v = p->epi_vec(p->user, v, row, col, 1);
                LLVMValueRef e = LLVMBuildExtractElement(b, v, LLVMConstInt(q->i32, 0, 0), "");
                s = dc == 1 ? e : LLVMBuildSelect(b, done, e, s, "");
            }
            LLVMBuildStore(b, s, cp);
        }
    }
}

static void panel_done_if(Pg *q, LLVMValueRef done, LLVMValueRef j0, int64_t width) {
    const LlvmPgemm *p = q->p;
    int dc = flag_const(done);
    if (!p->panel_done || dc == 0) return;
    LLVMBasicBlockRef no = dc == 1 ? NULL : if_begin(q, done);
    p->panel_done(p->user, j0, width);
    if (no) if_end(q, no);
}

/* The dot tail's columns j0 .. j0 + cols of rows k0 .. k0 + kc into xt, K contiguous (through
 * the panel). */
static void pack_tail(Pg *q, LLVMValueRef j0, int cols, LLVMValueRef k0, int64_t kc) {
    pack_panel(q, j0, 1, cols, k0, kc);
    PgLoop lk;
    pg_loop_begin(q, &lk, kc);
    for (int t = 0; t < cols; t++) {
        LLVMValueRef x = LLVMBuildLoad2(q->b, q->f32, gep(q, q->panel, add(q, mul(q, lk.iv, q->nr), pci(q, t))), "");
        LLVMBuildStore(q->b, x, gep(q, q->xt, add(q, pci(q, (int64_t)t * PG_KMAX), lk.iv)));
    }
    pg_loop_end(q, &lk);
}

static void dot_tail(Pg *q, LLVMValueRef j0, int cols, LLVMValueRef k0, int64_t kc, LLVMValueRef first, LLVMValueRef done) {
    const LlvmPgemm *p = q->p;
    pack_tail(q, j0, cols, k0, kc);
    /* (rows of row-major A: mr x cols accumulators, at most 8 on AVX2's 16 registers) */
    int mr = p->a_packed ? q->pr : cols == 1 ? 8 : q->vw >= 16 || cols == 2 ? 4 : 2;
    int64_t full = p->m / mr, rest = p->m % mr;
    if (full) {
        PgLoop lm;
        pg_loop_begin(q, &lm, full);
        dot_strip(q, mul(q, lm.iv, mr), mr, j0, cols, k0, kc, first, done);
        pg_loop_end(q, &lm);
    }
    if (rest) dot_strip(q, pci(q, full * mr), (int)rest, j0, cols, k0, kc, first, done);
    panel_done_if(q, done, j0, cols);
}

/* One K block of one column panel: copy B's rows into the panel, then every strip of rows;
 * with `done`, the K block is the last and the caller's epilogue runs over the panel. With
 * q->tail, the dot tail's columns right after the panel too, strip by strip while the strip's
 * rows of A are in L1: as a pass of its own it read all of A again (a 7x7 output is 48 + 1
 * columns, and with 2048 x 1024 weights that was the weights' second trip from memory). */
static void kblock(Pg *q, LLVMValueRef j0, int nv, int last, LLVMValueRef k0, int64_t kc, LLVMValueRef first,
                   LLVMValueRef done) {
    const LlvmPgemm *p = q->p;
    if (nv == 1 && last <= DOT_COLS && !q->rows && !p->b_packed) {
        dot_tail(q, j0, last, k0, kc, first, done);
        return;
    }
    LLVMValueRef jt = add(q, j0, pci(q, q->nr));
    if (q->tail) pack_tail(q, jt, q->tail, k0, kc);
    if (p->b_packed) /* the panel as llvm_pgemm_packed_b laid it out: panel j0 / NR, rows from k0 */
        q->panel = gep(q, p->b, add(q, mul(q, LLVMBuildSDiv(q->b, j0, pci(q, q->nr), ""), p->k * q->nr), mul(q, k0, q->nr)));
    else
        pack_panel(q, j0, nv, last, k0, kc);
    int mr = strip_rows_of(q, nv);
    if (p->m_rt) { /* rows known at run time: whole strips in a loop, then the last one's rows */
        LLVMBuilderRef b = q->b;
        LLVMValueRef whole = LLVMBuildUDiv(b, p->m_rt, pci(q, mr), ""), left = LLVMBuildURem(b, p->m_rt, pci(q, mr), "");
        PgRange l;
        pg_range_begin(q, &l, pci(q, 0), whole);
        strip(q, mul(q, l.iv, mr), mr, j0, nv, last, k0, kc, first, done);
        pg_range_end(q, &l);
        LLVMValueRef m0 = mul(q, whole, mr);
        for (int r = 1; r < mr; r++) {
            LLVMBasicBlockRef after = if_begin(q, LLVMBuildICmp(b, LLVMIntEQ, left, pci(q, r), ""));
            strip(q, m0, r, j0, nv, last, k0, kc, first, done);
            if_end(q, after);
        }
        return;
    }
    int64_t full = p->m / mr, rest = p->m % mr;
    if (full) {
        PgLoop lm;
        pg_loop_begin(q, &lm, full);
        LLVMValueRef m0 = mul(q, lm.iv, mr);
        strip(q, m0, mr, j0, nv, last, k0, kc, first, done);
        if (q->tail) dot_strip(q, m0, mr, jt, q->tail, k0, kc, first, done);
        pg_loop_end(q, &lm);
    }
    if (rest) {
        strip(q, pci(q, full * mr), (int)rest, j0, nv, last, k0, kc, first, done);
        if (q->tail) dot_strip(q, pci(q, full * mr), (int)rest, jt, q->tail, k0, kc, first, done);
    }
    panel_done_if(q, done, j0, (int64_t)(nv - 1) * q->vw + last);
    if (q->tail) panel_done_if(q, done, jt, q->tail);
}

/* Emits f for every column panel: flat (columns in runs of NR, then a narrower tail) or, in
 * rows mode, per output row (its columns in runs of NR, then the row's tail). */
typedef void (*PanelFn)(Pg *q, LLVMValueRef j0, int nv, int last, void *ctx);


/* This call's share [lo, hi) of `units` work units: all of them for part -1 (or no part),
 * else part's slice of n_parts equal ones. */
static void part_range_of(Pg *q, LLVMValueRef part, int64_t n_parts, int64_t units, LLVMValueRef *lo, LLVMValueRef *hi) {
    if (!part || n_parts <= 1) {
        *lo = pci(q, 0);
        *hi = pci(q, units);
        return;
    }
    llvm_part_range(q->b, part, pci(q, units), pci(q, n_parts), lo, hi);
}

static void part_range(Pg *q, int64_t units, LLVMValueRef *lo, LLVMValueRef *hi) {
    if (q->p->part && q->p->n_parts_rt) {
        llvm_part_range(q->b, q->p->part, pci(q, units), q->p->n_parts_rt, lo, hi);
        return;
    }
    part_range_of(q, q->p->part, q->p->n_parts, units, lo, hi);
}

/* Units [lo, hi) of `full` whole ones followed, when rest, by a narrower one (unit `full`):
 * unit(q, index, narrow, ctx) for each, the whole ones in a loop. */
typedef void (*UnitFn)(Pg *q, LLVMValueRef index, bool narrow, void *ctx);

static void units_in_range(Pg *q, LLVMValueRef lo, LLVMValueRef hi, int64_t full, bool rest, UnitFn unit, void *ctx) {
    LLVMBuilderRef b = q->b;
    if (full) {
        PgRange l;
        LLVMValueRef top = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, hi, pci(q, full), ""), hi, pci(q, full), "");
        pg_range_begin(q, &l, lo, top);
        unit(q, l.iv, false, ctx);
        pg_range_end(q, &l);
    }
    if (rest) {
        LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLE, lo, pci(q, full), ""),
                                       LLVMBuildICmp(b, LLVMIntSGT, hi, pci(q, full), ""), "");
        LLVMBasicBlockRef after = if_begin(q, in);
        unit(q, pci(q, full), true, ctx);
        if_end(q, after);
    }
}

typedef struct SpanArgs {
    LLVMValueRef base;
    int64_t full, rest;
    PanelFn f;
    void *ctx;
} SpanArgs;

/* Whether a span's last 1..DOT_COLS columns are computed with its last full panel (kblock). */
static bool merged_tail(const Pg *q, const SpanArgs *a) {
    return !q->rows && !q->p->b_packed && a->full > 0 && a->rest > 0 && a->rest <= DOT_COLS;
}

static void span_unit(Pg *q, LLVMValueRef index, bool narrow, void *ctx) {
    SpanArgs *a = ctx;
    LLVMValueRef j0 = add(q, a->base, mul(q, index, q->nr));
    if (!narrow && merged_tail(q, a)) { /* the last full panel takes the tail */
        LLVMBuilderRef b = q->b;
        LLVMBasicBlockRef with = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "tl"), without = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "ntl");
        LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(q->ctx, q->fn, "tlx");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, index, pci(q, a->full - 1), ""), with, without);
        LLVMPositionBuilderAtEnd(b, with);
        q->tail = (int)a->rest;
        a->f(q, j0, q->nv, q->vw, a->ctx);
        q->tail = 0;
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, without);
        a->f(q, j0, q->nv, q->vw, a->ctx);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, join);
        return;
    }
    if (!narrow) {
        a->f(q, j0, q->nv, q->vw, a->ctx);
        return;
    }
    if (merged_tail(q, a)) return; /* done with the last full panel */
    int nv = (int)((a->rest + q->vw - 1) / q->vw);
    a->f(q, j0, nv, (int)(a->rest - (int64_t)(nv - 1) * q->vw), a->ctx);
}

/* Panels [lo, hi) of a span of `span` columns at base: runs of NR, the narrower one last. */
static void panels_of_span(Pg *q, LLVMValueRef base, int64_t span, LLVMValueRef lo, LLVMValueRef hi, PanelFn f, void *ctx) {
    SpanArgs a = {base, span / q->nr, span % q->nr, f, ctx};
    units_in_range(q, lo, hi, span / q->nr, a.rest != 0, span_unit, &a);
}

/* Every panel of this call's share: flat panels are the units, or whole output rows in rows mode. */
static void for_panels(Pg *q, PanelFn f, void *ctx) {
    LLVMValueRef lo, hi;
    if (!q->rows) {
        part_range(q, llvm_pgemm_units(q->p), &lo, &hi);
        panels_of_span(q, pci(q, 0), q->p->n, lo, hi, f, ctx);
        return;
    }
    part_range(q, llvm_pgemm_units(q->p), &lo, &hi);
    PgRange l;
    pg_range_begin(q, &l, lo, hi);
    int64_t per = q->p->conv->ow / q->nr + (q->p->conv->ow % q->nr != 0);
    panels_of_span(q, mul(q, l.iv, q->p->conv->ow), q->p->conv->ow, pci(q, 0), pci(q, per), f, ctx);
    pg_range_end(q, &l);
}

/* Work units a packed GEMM splits into for parts (flat panels, or output rows). */
int64_t llvm_pgemm_units(const LlvmPgemm *p) {
    int64_t nr = PG_NV * pg_lanes(p->simd_bits);
    return pg_rows(p) ? p->conv->oh : (p->n + nr - 1) / nr;
}

typedef struct KbArgs {
    LLVMValueRef k0, first, done;
    int64_t kc;
} KbArgs;

static void kblock_cb(Pg *q, LLVMValueRef j0, int nv, int last, void *ctx) {
    KbArgs *a = ctx;
    kblock(q, j0, nv, last, a->k0, a->kc, a->first, a->done);
}

/* K block [k0, k0 + kc) of every column panel. */
static void kblock_all_panels(Pg *q, LLVMValueRef k0, int64_t kc, LLVMValueRef first, LLVMValueRef done) {
    KbArgs a = {.k0 = k0, .first = first, .done = done, .kc = kc};
    for_panels(q, kblock_cb, &a);
}

/* The flags of K block kb (a loop counter) of nkb full ones, followed by krest rows or not. */
static void kb_flags(Pg *q, LLVMValueRef kb, LLVMValueRef *first, LLVMValueRef *done) {
    *first = q->nkb == 1 ? cflag(q, true) : LLVMBuildICmp(q->b, LLVMIntEQ, kb, pci(q, 0), "");
    if (q->krest) *done = cflag(q, false);
    else *done = q->nkb == 1 ? cflag(q, true) : LLVMBuildICmp(q->b, LLVMIntEQ, kb, pci(q, q->nkb - 1), "");
}

/* Every K block of the panel at column j0 (nv vectors wide, the last with `last` lanes). */
static void panel_all_kblocks(Pg *q, LLVMValueRef j0, int nv, int last, void *ctx) {
    (void)ctx;
    if (q->nkb) {
        PgLoop l;
        pg_loop_begin(q, &l, q->nkb);
        LLVMValueRef first, done;
        kb_flags(q, l.iv, &first, &done);
        kblock(q, j0, nv, last, mul(q, l.iv, q->kc), q->kc, first, done);
        pg_loop_end(q, &l);
    }
    if (q->krest) kblock(q, j0, nv, last, pci(q, q->nkb * q->kc), q->krest, cflag(q, q->nkb == 0), cflag(q, true));
}

/* AVX-512 only as the general rule: with AVX2 vectors ResNet-50 ran in 94 ms against 87 ms
 * through OpenBLAS's AVX2 kernels, so there the packed GEMM takes only the Convs of
 * llvm_pgemm_conv_fits. */
int llvm_pgemm_vector_width(unsigned simd_bits) { return simd_bits >= 512 ? 16 : 0; }

/* The AVX2 rule (ResNet-50's, AlexNet's, MobileNetV2's and small CNNs' layers measured one
 * at a time against im2col and OpenBLAS and against pointwise.c: docs/cpu_speed.md): every 1x1
 * Conv but the ones pointwise.c takes (faster than the packed GEMM on half of those); larger
 * kernels on small planes (at most 64 output pixels: 1.1-1.4x), on images of up to 4 channels
 * (the stem Convs: 1.4x, where im2col is most of OpenBLAS's time) and with 5x5 or larger
 * kernels (1.15x). The 3x3 Convs on larger planes ran within the noise of OpenBLAS or up to 15%
 * slower (128 channels at 28x28), so they keep the BLAS call where Winograd (cpu/winograd.c,
 * chosen before this rule) does not take them. */
bool llvm_pgemm_conv_fits(const LowerWin *w, int64_t m, unsigned simd_bits) {
    if (simd_bits >= 512) return true;
    if (!pg_lanes(simd_bits) || m < 1) return false;
    int64_t n = w->oh * w->ow;
    if (w->kh == 1 && w->kw == 1) {
        bool plain = w->sh == 1 && w->sw == 1 && w->pt == 0 && w->pl == 0 && w->oh == w->h && w->ow == w->w;
        return !(plain && llvm_pointwise_fits(m, n, w->c, simd_bits));
    }
    return n <= 64 || w->c <= 4 || w->kh * w->kw >= 25;
}

/* The emitter's state for function fn at builder b: types and the vector width (vw 0: none). */
static Pg pg_open(LLVMBuilderRef b, LLVMValueRef fn, unsigned simd_bits) {
    Pg q = {.b = b, .fn = fn};
    q.mod = LLVMGetGlobalParent(fn);
    q.ctx = LLVMGetModuleContext(q.mod);
    q.i1 = LLVMInt1TypeInContext(q.ctx);
    q.i32 = LLVMInt32TypeInContext(q.ctx);
    q.i64 = LLVMInt64TypeInContext(q.ctx);
    q.f32 = LLVMFloatTypeInContext(q.ctx);
    q.ptr = LLVMPointerTypeInContext(q.ctx, 0);
    q.vw = pg_lanes(simd_bits);
    if (q.vw) q.vt = LLVMVectorType(q.f32, (unsigned)q.vw);
    return q;
}

/* K split into nkb blocks of kc rows, then one of krest (< kc): the fewest equal blocks of at
 * most PG_KMAX, kc a multiple of 16. */
static void pg_kblocks(int64_t k, int64_t *kc, int64_t *nkb, int64_t *krest) {
    int64_t blocks = (k + PG_KMAX - 1) / PG_KMAX;
    *kc = ((k + blocks - 1) / blocks + 15) / 16 * 16;
    if (*kc > PG_KMAX) *kc = PG_KMAX;
    *nkb = k / *kc;
    *krest = k % *kc;
}

/* A's strips of `rows` rows (pg_pack_rows of the target's lanes) per K block. */
static void pack_a_rows(int64_t m, int64_t k, const float *a, int64_t lda, float *out, int64_t rows) {
    int64_t kc, nkb, krest;
    pg_kblocks(k, &kc, &nkb, &krest);
    for (int64_t k0 = 0; k0 < k; k0 += kc) {
        int64_t w = k - k0 < kc ? k - k0 : kc;
        for (int64_t m0 = 0; m0 < m; m0 += rows) {
            int64_t h = m - m0 < rows ? m - m0 : rows;
            float *o = out + k0 * m + m0 * w;
            for (int64_t kk = 0; kk < w; kk++)
                for (int64_t i = 0; i < h; i++) o[kk * h + i] = a[(m0 + i) * lda + k0 + kk];
        }
    }
}

void llvm_pgemm_pack_a(int64_t m, int64_t k, const float *a, int64_t lda, float *out) { pack_a_rows(m, k, a, lda, out, pg_pack_rows(16)); }

float *llvm_pgemm_packed_a_for(unsigned simd_bits, int64_t count, int64_t m, int64_t k, const float *a) {
    size_t n = (size_t)(count * m * k);
    float *u = malloc(n * sizeof *u);
    if (!u) return NULL;
    int64_t rows = pg_pack_rows(pg_lanes(simd_bits) ? pg_lanes(simd_bits) : 16);
    for (int64_t g = 0; g < count; g++) pack_a_rows(m, k, a + g * m * k, k, u + g * m * k, rows);
    return u;
}

float *llvm_pgemm_packed_a(int64_t count, int64_t m, int64_t k, const float *a) { return llvm_pgemm_packed_a_for(512, count, m, k, a); }

int64_t llvm_pgemm_packed_b_floats(unsigned simd_bits, int64_t k, int64_t n) {
    int64_t nr = PG_NV * pg_lanes(simd_bits);
    return nr ? (n + nr - 1) / nr * k * nr : 0;
}

float *llvm_pgemm_packed_b(unsigned simd_bits, int64_t k, int64_t n, const float *b, bool tb) {
    int64_t nr = PG_NV * pg_lanes(simd_bits), total = llvm_pgemm_packed_b_floats(simd_bits, k, n);
    if (!total) return NULL;
    float *out = calloc((size_t)total, sizeof *out); /* the last panel's columns past N stay zero */
    if (!out) return NULL;
    for (int64_t j0 = 0; j0 < n; j0 += nr) {
        float *panel = out + j0 / nr * k * nr;
        int64_t w = n - j0 < nr ? n - j0 : nr;
        for (int64_t kk = 0; kk < k; kk++)
            for (int64_t j = 0; j < w; j++) panel[kk * nr + j] = tb ? b[(j0 + j) * k + kk] : b[kk * n + j0 + j];
    }
    return out;
}

void llvm_pgemm_emit(LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef fn, const LlvmPgemm *p) {
    Pg q = pg_open(b, fn, p->simd_bits);
    q.p = p;
    if (!q.vw || p->m <= 0 || p->n <= 0 || p->k <= 0) return;
    q.nv = PG_NV;
    q.pr = pg_pack_rows(q.vw);
    q.nr = q.nv * q.vw;
    q.rows = pg_rows(p);
    q.wrap = pg_wraps(p) && !q.rows;
    pg_kblocks(p->k, &q.kc, &q.nkb, &q.krest);
    /* B as a wide matrix (a 1x1 Conv's input at 56x56): its rows are as many streams as K, too
     * many for the hardware prefetchers, and packing a panel waited on the cache (a quarter of
     * a 256 -> 64 channel layer's time; a C model of it: 0.76 ms, 0.70 with these prefetches,
     * 0.58 without the packing at all), so the strips prefetch the next panel's lines into L2
     * as they go. ResNet-50's 56x56 layers with K = 256 7-9% faster; narrower ones (28x28 and
     * below) and K = 64 measured no better or slightly slower, so they keep the plain pack. */
    q.bpf = !p->conv && !p->b_packed && p->n >= PG_BPF_COLS && p->k >= 128;
    q.bpf_lines = p->ldb % q.vw == 0 ? q.nv : q.nv + 1;
    q.panel = LLVMBuildArrayAlloca(ab, q.f32, pci(&q, (int64_t)PG_KMAX * q.nr), "panel");
    LLVMSetAlignment(q.panel, 64);
    q.xt = LLVMBuildArrayAlloca(ab, q.f32, pci(&q, (int64_t)PG_KMAX * DOT_COLS), "xt");
    LLVMSetAlignment(q.xt, 64);
    if (p->conv) {
        int64_t taps = p->conv->kh * p->conv->kw;
        q.tap_off = LLVMBuildArrayAlloca(ab, q.i64, pci(&q, taps), "tapoff");
        q.tap_mask = LLVMBuildArrayAlloca(ab, LLVMIntTypeInContext(q.ctx, (unsigned)q.vw), pci(&q, taps * q.nv), "tapmask");
    }
    /* Loop order. Panels outermost keep one panel's column block of C in L2 across K, but read
     * all of A once per panel; K blocks outermost read A once (its block of KC columns stays
     * in L2 across the panels) and pass over all of C per K block. The second is chosen when
     * A does not fit L2 or C does: layers with few output pixels and many weights. */
    bool k_outer = p->m * p->k * 4 > PG_L2_BYTES || p->m * p->n * 4 <= PG_L2_BYTES;
    if (k_outer) {
        if (q.nkb) {
            PgLoop l;
            pg_loop_begin(&q, &l, q.nkb);
            LLVMValueRef first, done;
            kb_flags(&q, l.iv, &first, &done);
            kblock_all_panels(&q, mul(&q, l.iv, q.kc), q.kc, first, done);
            pg_loop_end(&q, &l);
        }
        if (q.krest) kblock_all_panels(&q, pci(&q, q.nkb * q.kc), q.krest, cflag(&q, q.nkb == 0), cflag(&q, true));
        return;
    }
    for_panels(&q, panel_all_kblocks, NULL);
}

char *llvm_host_features(void) {
    char *f = LLVMGetHostCPUFeatures(), *out = f ? strdup(f) : NULL;
    if (f) LLVMDisposeMessage(f);
    char why[256];
    if (!out || !strstr(out, "+amx-tile") || irt_cpu_amx_enable(why, sizeof why) == 0) return out;
    /* the tile state refused: code for this host must not use the tiles */
    for (char *a = strstr(out, "+amx-"); a; a = strstr(a + 1, "+amx-")) *a = '-';
    return out;
}

/* CPU names without a feature string (irtool compile --target cpu:NAME), by the x86-64 level
 * whose vector features they have. */
static const char *const cpu_v4[] = {"x86-64-v4", "skylake-avx512", "cascadelake", "cooperlake", "cannonlake",
                                     "icelake-client", "icelake-server", "tigerlake", "rocketlake", "sapphirerapids",
                                     "graniterapids", "emeraldrapids", "znver4", "znver5"};
static const char *const cpu_v3[] = {"x86-64-v3", "haswell", "broadwell", "skylake", "alderlake", "raptorlake",
                                     "meteorlake", "znver1", "znver2", "znver3", "arrowlake", "lunarlake", "gracemont"};

static int cpu_level(const char *cpu) {
    for (size_t i = 0; cpu && i < sizeof cpu_v4 / sizeof cpu_v4[0]; i++)
        if (strcmp(cpu, cpu_v4[i]) == 0) return 4;
    for (size_t i = 0; cpu && i < sizeof cpu_v3 / sizeof cpu_v3[0]; i++)
        if (strcmp(cpu, cpu_v3[i]) == 0) return 3;
    return 0;
}

const char *llvm_cpu_implied_features(const char *cpu) {
    switch (cpu_level(cpu)) {
    case 4: return "+avx,+avx2,+fma,+f16c,+bmi,+bmi2,+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl";
    case 3: return "+avx,+avx2,+fma,+f16c,+bmi,+bmi2";
    default: return "";
    }
}

unsigned llvm_simd_bits(const char *cpu, const char *features) {
    if (features && *features) {
        if (strstr(features, "+avx512f"))
            return 512 | (strstr(features, "+amx-tile") && strstr(features, "+amx-bf16") ? LLVM_SIMD_AMX : 0);
        if (strstr(features, "+avx2") && strstr(features, "+fma")) return 256;
        return 0;
    }
    int level = cpu_level(cpu);
    return level == 4 ? 512 : level == 3 ? 256 : 0;
}

/* ---- GEMV-shaped products: a few rows of A (batch-1 linear layers) ---------------------------
 * C[i, :] = alpha * A[i, :] * op(B) for m <= 4. These are bound by streaming B once (a BLAS
 * GEMM packs all of B first, which for a 4096 x 9216 weight matrix costs more than the product).
 * With B transposed (rows of B are output columns, contiguous in K) each output is a dot product
 * over K: blocks of a few output columns accumulate a vector of K-lanes each and are reduced at
 * the end. With B as is (rows of B are K), each K step broadcasts A[i, k] over a block of
 * contiguous columns of B. Vectors of 16 lanes (AVX-512) or 8 (AVX2), blocks sized to the
 * target's registers (gv_cols, gv_vectors). */
#define GV_COLS 8 /* the most output columns of a block with B transposed (gv_cols) */

/* Output columns per block with B transposed: 4 dot products at a time on AVX-512; on AVX2's
 * 16 registers as many as fit beside the m rows of A (m * cols accumulators + m). */
static int gv_cols(const LlvmGemv *p, int vw) {
    if (vw >= 16) return 4;
    return p->m == 1 ? 8 : p->m == 2 ? 4 : p->m == 3 ? 3 : 2;
}

/* Vectors of output columns per block with B as is: 4 on AVX-512 (256 bytes of each row of B);
 * on AVX2 up to 12 accumulators (8, 6, 4, 3 vectors for 1-4 rows of A), so that each row of B
 * still gives the hardware prefetcher a run of several cache lines. */
#define GV_NV 8
static int gv_vectors(const LlvmGemv *p, int vw) { return vw >= 16 ? 4 : (int[]){8, 6, 4, 3}[p->m - 1]; }

static int64_t gv_width(const LlvmGemv *p, int vw) { return p->tb ? gv_cols(p, vw) : gv_vectors(p, vw) * vw; }


/* Output columns n0 .. n0 + cols - 1 (B transposed): dot products over K for every row of A. */
static void gemv_t_block(Pg *q, const LlvmGemv *p, LLVMValueRef n0, int cols) {
    LLVMBuilderRef b = q->b;
    int64_t kv = p->k / q->vw, krest = p->k % q->vw;
    LLVMValueRef acc[4][GV_COLS];
    for (int i = 0; i < p->m; i++)
        for (int c = 0; c < cols; c++) acc[i][c] = LLVMConstNull(q->vt);
    LLVMValueRef brow[GV_COLS];
    for (int c = 0; c < cols; c++) brow[c] = gep(q, p->b, mul(q, add(q, n0, pci(q, c)), p->ldb));
    if (kv) {
        AccLoop al;
        acc_loop_begin(q, &al, kv, &acc[0][0], (int)p->m, cols, GV_COLS);
        LLVMValueRef off = mul(q, al.l.iv, q->vw), av[4], bv[GV_COLS];
        for (int i = 0; i < p->m; i++) av[i] = vload(q, gep(q, p->a, add(q, pci(q, (int64_t)i * p->lda), off)), 4);
        for (int c = 0; c < cols; c++) bv[c] = vload(q, gep(q, brow[c], off), 4);
        for (int i = 0; i < p->m; i++)
            for (int c = 0; c < cols; c++) acc[i][c] = fma_v(q, av[i], bv[c], acc[i][c]);
        acc_loop_end(q, &al, &acc[0][0]);
    }
    if (krest) {
        LLVMValueRef off = pci(q, kv * q->vw), av[4];
        for (int i = 0; i < p->m; i++) av[i] = load_lanes(q, gep(q, p->a, add(q, pci(q, (int64_t)i * p->lda), off)), (int)krest);
        for (int c = 0; c < cols; c++) {
            LLVMValueRef bv = load_lanes(q, gep(q, brow[c], off), (int)krest);
            for (int i = 0; i < p->m; i++) acc[i][c] = fma_v(q, av[i], bv, acc[i][c]);
        }
    }
    for (int i = 0; i < p->m; i++)
        for (int c = 0; c < cols; c++) {
            LLVMValueRef s = hsum(q, acc[i][c]);
            if (p->alpha != 1.0) s = LLVMBuildFMul(b, s, LLVMConstReal(q->f32, p->alpha), "");
            LLVMBuildStore(b, s, gep(q, p->c, add(q, pci(q, (int64_t)i * p->ldc), add(q, n0, pci(q, c)))));
        }
}

/* Output columns j0 .. j0 + nv * vw (the last vector `last` lanes), B as is: a K loop
 * broadcasting A[i, k] over contiguous columns of row k of B. */
static void gemv_n_block(Pg *q, const LlvmGemv *p, LLVMValueRef j0, int nv, int last) {
    LLVMBuilderRef b = q->b;
    LLVMValueRef acc[4][GV_NV];
    for (int i = 0; i < p->m; i++)
        for (int v = 0; v < nv; v++) acc[i][v] = LLVMConstNull(q->vt);
    AccLoop lp;
    acc_loop_begin(q, &lp, p->k, &acc[0][0], (int)p->m, nv, GV_NV);
    LLVMValueRef k = lp.l.iv, row = add(q, mul(q, k, p->ldb), j0), bv[GV_NV];
    for (int v = 0; v < nv; v++) bv[v] = load_lanes(q, gep(q, p->b, add(q, row, pci(q, (int64_t)v * q->vw))), lanes_of(q, v, nv, last));
    for (int i = 0; i < p->m; i++) {
        LLVMValueRef s = splat(q, LLVMBuildLoad2(b, q->f32, gep(q, p->a, add(q, pci(q, (int64_t)i * p->lda), k)), ""));
        for (int v = 0; v < nv; v++) acc[i][v] = fma_v(q, s, bv[v], acc[i][v]);
    }
    acc_loop_end(q, &lp, &acc[0][0]);
    LLVMValueRef al = splat(q, LLVMConstReal(q->f32, p->alpha));
    for (int i = 0; i < p->m; i++)
        for (int v = 0; v < nv; v++) {
            LLVMValueRef x = p->alpha != 1.0 ? LLVMBuildFMul(b, acc[i][v], al, "") : acc[i][v];
            store_lanes(q, x, gep(q, p->c, add(q, pci(q, (int64_t)i * p->ldc), add(q, j0, pci(q, (int64_t)v * q->vw)))),
                        lanes_of(q, v, nv, last));
        }
}

/* One block of output columns: gv_cols dot products (B transposed) or gv_vectors vectors of
 * columns (B as is); the narrow one is the rest of N. */
typedef struct GvArgs {
    const LlvmGemv *p;
    int64_t width, rest;
} GvArgs;

static void gemv_unit(Pg *q, LLVMValueRef index, bool narrow, void *ctx) {
    GvArgs *a = ctx;
    int64_t cols = narrow ? a->rest : a->width;
    LLVMValueRef n0 = mul(q, index, a->width);
    if (a->p->tb) {
        gemv_t_block(q, a->p, n0, (int)cols);
        return;
    }
    int nv = (int)((cols + q->vw - 1) / q->vw);
    gemv_n_block(q, a->p, n0, nv, (int)(cols - (int64_t)(nv - 1) * q->vw));
}

int64_t llvm_gemv_units(const LlvmGemv *p) {
    int vw = pg_lanes(p->simd_bits);
    if (!vw) return 0;
    int64_t w = gv_width(p, vw);
    return (p->n + w - 1) / w;
}

/* Every GEMV shape measured on AVX2 ran faster generated than through OpenBLAS (1.3x to 5x; B
 * transposed, OpenBLAS packs it as for a GEMM: docs/cpu_speed.md), so the rule is the target's. */
bool llvm_gemv_fits(int64_t m, int64_t n, int64_t k, bool tb, unsigned simd_bits) {
    (void)tb;
    return m >= 1 && m <= 4 && n > 0 && k > 0 && pg_lanes(simd_bits) != 0;
}

bool llvm_gemv_emit(LLVMBuilderRef b, LLVMValueRef fn, const LlvmGemv *p) {
    Pg q = pg_open(b, fn, p->simd_bits);
    if (!q.vw || p->m < 1 || p->m > 4 || p->n <= 0 || p->k <= 0) return false;
    GvArgs a = {.p = p, .width = gv_width(p, q.vw)};
    a.rest = p->n % a.width;
    LLVMValueRef lo, hi;
    part_range_of(&q, p->part, p->n_parts, llvm_gemv_units(p), &lo, &hi);
    units_in_range(&q, lo, hi, p->n / a.width, a.rest != 0, gemv_unit, &a);
    return true;
}

/* irtool's FP8 ops on the CPU (what `quantize-fp8` writes): irtool.quantize_fp8,
 * irtool.dequantize_fp8 and irtool.fp8_matmul, E4M3FN and E5M2. The CPU has no
 * FP8 arithmetic, so the kernels compute what the interpreter computes, bit for bit:
 * - quantize: x / scale in f32, then rounded to nearest even into the format as ir/dtype.c
 *   does (on the double's bits, NaN kept, saturating to the largest finite value when asked),
 *   emitted as integer operations on the bits so the loop vectorizes;
 * - dequantize: the code's value from a 256-entry table (made at compile time by ir/dtype.c's
 *   decoder) times the scale in f32 (f64 when `to` is f64);
 * - fp8_matmul: both operands decoded and scaled in f32 (a constant B at compile time, else into
 *   scratch per run), then every output summed in f32 without FMA in increasing k order from 0,
 *   the bias added last, as the interpreter's reference GEMM: the compiled model gives the
 *   interpreter's numbers, so a rounding that flips an activation's FP8 code downstream cannot
 *   tell them apart. Register tiles of 4 rows x 4 vectors of 16 columns (each output's order
 *   kept).
 * Scales are f32 (per tensor, or per channel along `axis` for the quantize ops; per row of A and
 * per column of B for the matmul), the weight B of the matmul 2-D. Dims other than the channel
 * axis, K and N may be symbolic (cpu/dyn.c passes their run-time values), as a dynamic batch.
 */

#include "backend/cpu/cpu.h"
#include <math.h>

#define MM_ROWS 4 /* fp8_matmul's register tile: rows, */
#define MM_VECS 4 /* vectors of */
#define MM_VW 16  /* columns */

bool llvm_ops_fp8_claims(IrOp op) {
    return op == IR_OP_QUANTIZE_FP8 || op == IR_OP_DEQUANTIZE_FP8 || op == IR_OP_FP8_MAT_MUL;
}

static bool is_fp8(IrDType dt) { return dt == IR_DTYPE_F8E4M3FN || dt == IR_DTYPE_F8E5M2; }

/* Code c of format dt decoded (ir/dtype.c's decoder). */
static float fp8_value(IrDType dt, uint8_t c) { return dt == IR_DTYPE_F8E4M3FN ? ir_f8e4m3fn_to_f32(c) : ir_f8e5m2_to_f32(c); }

/* N rounded up to whole vectors: the row length of the matmul's decoded B and of its sums. */
static int64_t pad_vw(int64_t n) { return (n + MM_VW - 1) / MM_VW * MM_VW; }

/* Scratch of fp8_matmul: B decoded (K rows of N rounded up to 16 floats), then MM_ROWS decoded
 * rows of A (K each) and their sums (rows of N rounded up). */
/* The f32 scales of fp8_matmul's B when B and they are constants (B then decoded at compile
 * time), else NULL. */
static const float *b_const(const IrGraph *g, IrValueId vb, IrValueId vbs) {
    const void *bc = lower_value_const_data(g, vb);
    const float *sc = lower_value_dtype(g, vbs) == IR_DTYPE_F32 ? lower_value_const_data(g, vbs) : NULL;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    if (!bc || !sc || !lower_value_shape(g, vb, &r, d) || r != 2) return NULL;
    return d[0] * pad_vw(d[1]) * 4 <= (64 << 20) ? sc : NULL; /* decoded: at most 64 MiB */
}

int64_t llvm_ops_fp8_scratch_bytes(const IrGraph *g, IrNodeId n) {
    if (ir_node_op(g, n) != IR_OP_FP8_MAT_MUL || ir_node_num_operands(g, n) < 4) return 0;
    uint32_t rb;
    int64_t db[IR_MAX_RANK];
    if (!lower_value_shape(g, ir_node_operand(g, n, 1), &rb, db) || rb != 2) return 0;
    int64_t n16 = pad_vw(db[1]);
    int64_t bsz = b_const(g, ir_node_operand(g, n, 1), ir_node_operand(g, n, 3)) ? 0 : db[0] * n16;
    return (bsz + MM_ROWS * db[0] + MM_ROWS * n16) * 4 + 64;
}

static LLVMValueRef c64(LlvmEmit *e, uint64_t v) { return LLVMConstInt(lo_i64_t(e), v, 0); }

/* The node being compiled and how its symbolic dims are evaluated (dim NULL: static only). */
typedef struct F8 {
    LlvmEmit *e;
    LLVMValueRef (*dim)(void *ctx, IrExprId x);
    void *ctx;
} F8;

/* The product of dims [lo, hi) of v's type as a value (a constant where they are), or NULL
 * when one is symbolic and cannot be evaluated. */
static LLVMValueRef dims_prod(F8 *f, IrValueId v, uint32_t lo, uint32_t hi) {
    const IrGraph *g = f->e->g;
    IrTypeId t = ir_value_type(g, v);
    int64_t c = 1, x;
    LLVMValueRef p = NULL;
    for (uint32_t k = lo; k < hi; k++) {
        IrExprId ex = ir_type_dims(g, t)[k];
        if (ir_expr_is_const(g, ex, &x)) {
            c *= x;
            continue;
        }
        LLVMValueRef dv = f->dim ? f->dim(f->ctx, ex) : NULL;
        if (!dv) return NULL;
        p = p ? LLVMBuildNSWMul(f->e->b, p, dv, "") : dv;
    }
    return p ? (c == 1 ? p : LLVMBuildNSWMul(f->e->b, p, lo_i64(f->e, c), "")) : lo_i64(f->e, c);
}

/* Rank of v's type (IR_RANK_UNKNOWN as 0 dims known). */
static uint32_t rank_of(const IrGraph *g, IrValueId v) {
    uint32_t r = ir_type_rank(g, ir_value_type(g, v));
    return r == IR_RANK_UNKNOWN ? 0 : r;
}

/* Dim k of v when constant, else -1. */
static int64_t cdim(const IrGraph *g, IrValueId v, uint32_t k) {
    int64_t x;
    return ir_expr_is_const(g, ir_type_dims(g, ir_value_type(g, v))[k], &x) ? x : -1;
}

static void loop_v(LlvmEmit *e, LlvmLoop *l, LLVMValueRef n) { llvm_loop_begin_v(e->b, e->fn, l, n); }

/* Round half to even: 1 when the dropped bits `round` exceed half, or equal it with an odd lsb
 * (i64 values). */
static LLVMValueRef rne_up(LlvmEmit *e, LLVMValueRef round, LLVMValueRef half, LLVMValueRef lsb_of) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, lsb_of, c64(e, 1), ""), c64(e, 0), "");
    LLVMValueRef up = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntUGT, round, half, ""),
                                  LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, round, half, ""), odd, ""), "");
    return LLVMBuildZExt(b, up, lo_i64_t(e), "");
}

/* The FP8 code of f32 value f: ir/dtype.c's fp8_from_float on the bits, branch-free, from the
 * same format constants (ir_fp8_format). */
static LLVMValueRef f32_to_fp8(LlvmEmit *e, LLVMValueRef f, IrDType dt, bool sat) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->ctx), i64 = lo_i64_t(e);
    const IrFp8Format *F = ir_fp8_format(dt);
    bool e4 = F->e4m3;
    const uint64_t bias = F->bias, sig = F->sig_bits, man_mask = F->man_mask;
    const uint64_t mindenorm_o2 = F->mindenorm_o2, overflow = F->overflow, minnorm = F->minnorm, maxnorm = F->maxnorm;
    const uint64_t half_ulp = 1ull << (53 - sig - 1);
    /* NaN -> the canonical f32 NaN, then exactly to double */
    LLVMValueRef x = LLVMBuildBitCast(b, f, i32, "");
    LLVMValueRef nan32 = LLVMBuildICmp(b, LLVMIntUGT, LLVMBuildAnd(b, x, LLVMConstInt(i32, 0x7FFFFFFF, 0), ""),
                                       LLVMConstInt(i32, 0x7F800000, 0), "");
    x = LLVMBuildSelect(b, nan32, LLVMConstInt(i32, 0x7FFFFFFF, 0), x, "");
    LLVMValueRef xb = LLVMBuildBitCast(b, LLVMBuildFPExt(b, LLVMBuildBitCast(b, x, lo_f32_t(e), ""), lo_f64_t(e), ""), i64, "");
    LLVMValueRef sign = LLVMBuildShl(b, LLVMBuildLShr(b, xb, c64(e, 63), ""), c64(e, 7), "");
    LLVMValueRef exp = LLVMBuildAnd(b, LLVMBuildAdd(b, LLVMBuildAnd(b, LLVMBuildLShr(b, xb, c64(e, 52), ""), c64(e, 0x7FF), ""),
                                                    c64(e, (uint64_t)(bias - 1023)), ""),
                                    c64(e, 0xFF), ""); /* uint8 as in C */
    LLVMValueRef man = LLVMBuildAnd(b, LLVMBuildLShr(b, xb, c64(e, 53 - sig), ""), c64(e, man_mask), "");
    LLVMValueRef ax = LLVMBuildAnd(b, xb, c64(e, 0x7FFFFFFFFFFFFFFFull), "");
    LLVMValueRef one = c64(e, 1), zero = c64(e, 0);
    /* normal */
    LLVMValueRef rn = LLVMBuildOr(b, LLVMBuildShl(b, exp, c64(e, sig - 1), ""), man, "");
    LLVMValueRef round = LLVMBuildAnd(b, xb, c64(e, (half_ulp << 1) - 1), "");
    rn = LLVMBuildAdd(b, rn, rne_up(e, round, c64(e, half_ulp), man), "");
    /* subnormal: shift = (uint8)(1 - exp), at most 5 where this case is taken (clamped to keep
     * the other lanes' shifts defined) */
    LLVMValueRef shift = LLVMBuildAnd(b, LLVMBuildSub(b, one, exp, ""), c64(e, 0xFF), "");
    shift = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, shift, c64(e, 8), ""), c64(e, 8), shift, "");
    LLVMValueRef mans = LLVMBuildOr(b, man, c64(e, 1ull << (sig - 1)), "");
    LLVMValueRef rs = LLVMBuildAnd(b, LLVMBuildLShr(b, mans, shift, ""), c64(e, 0xFF), "");
    LLVMValueRef hs = LLVMBuildShl(b, c64(e, half_ulp), shift, "");
    LLVMValueRef rounds = LLVMBuildAnd(b, LLVMBuildOr(b, xb, c64(e, 1ull << 52), ""),
                                       LLVMBuildSub(b, LLVMBuildShl(b, hs, one, ""), one, ""), "");
    rs = LLVMBuildAdd(b, rs, rne_up(e, rounds, hs, rs), "");
    /* the cases, last test first */
    LLVMValueRef res = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGE, ax, c64(e, minnorm), ""), rn, rs, "");
    res = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, ax, c64(e, overflow), ""), c64(e, sat ? maxnorm : e4 ? 0x7F : 0x7C),
                          res, "");
    LLVMValueRef nanc = e4 ? c64(e, 0x7F) : LLVMBuildOr(b, c64(e, 0x7E), man, "");
    res = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, ax, c64(e, 0x7FF0000000000000ull), ""), nanc, res, "");
    res = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULE, ax, c64(e, mindenorm_o2), ""), zero, res, "");
    return LLVMBuildTrunc(b, LLVMBuildOr(b, res, sign, ""), lo_i8_t(e), "");
}

/* The 256 decoded values of format dt (ir/dtype.c's decoder) as a constant table. */
static LLVMValueRef decode_table(LlvmEmit *e, IrDType dt) {
    LLVMValueRef v[256];
    for (int i = 0; i < 256; i++) {
        float f = fp8_value(dt, (uint8_t)i);
        uint32_t bits;
        memcpy(&bits, &f, 4); /* the exact bits, NaN payloads and signs included */
        v[i] = LLVMConstBitCast(LLVMConstInt(LLVMInt32TypeInContext(e->ctx), bits, 0), lo_f32_t(e));
    }
    return lo_const_array(e, lo_f32_t(e), v, 256, dt == IR_DTYPE_F8E4M3FN ? "irtool.fp8_e4m3" : "irtool.fp8_e5m2");
}

/* Element off of fp8 buffer p, decoded to f32 through table t. */
static LLVMValueRef decode_at(LlvmEmit *e, LLVMValueRef t, LLVMValueRef p, LLVMValueRef off) {
    LLVMValueRef code = LLVMBuildLoad2(e->b, lo_i8_t(e), lo_gep(e, lo_i8_t(e), p, off), "");
    LLVMValueRef idx = LLVMBuildZExt(e->b, code, lo_i64_t(e), "");
    return LLVMBuildLoad2(e->b, lo_f32_t(e), lo_gep(e, lo_f32_t(e), t, idx), "");
}

/* Per-tensor or per-channel layout of a scale for x: *outer x *ch x *inner elements, the scale
 * indexed by the middle one (ch 1: one scale). NULL, or why not. */
static const char *channel_layout(F8 *f, IrValueId x, IrValueId s, LLVMValueRef *outer, int64_t *ch, LLVMValueRef *inner) {
    const IrGraph *g = f->e->g;
    uint32_t rs, rx = rank_of(g, x);
    int64_t ds[IR_MAX_RANK];
    if (!rx && ir_type_rank(g, ir_value_type(g, x)) != 0) return "with an unranked input";
    if (!lower_value_shape(g, s, &rs, ds)) return "with a scale of symbolic size";
    int64_t ns = ir_shape_numel(rs, ds);
    *ch = 1, *inner = lo_i64(f->e, 1), *outer = dims_prod(f, x, 0, rx);
    if (ns != 1) {
        bool found;
        int64_t axis = ir_node_attr_int(g, f->e->node, "axis", &found);
        if (!found || rs != 1) return "with a per-channel scale but no axis, or not 1-D";
        if (axis < 0) axis += rx;
        if (axis < 0 || axis >= (int64_t)rx || cdim(g, x, (uint32_t)axis) != ns) return "with a scale that does not match the axis";
        *ch = ns;
        *inner = dims_prod(f, x, (uint32_t)axis + 1, rx);
        *outer = dims_prod(f, x, 0, (uint32_t)axis);
    }
    return *outer && *inner ? NULL : "with symbolic dims known at run time only";
}

/* A quantize or dequantize node: its operands, the loop layout of its scale and, per element,
 * the conversion (elem) of element off under channel scale sc (f32; sv as loaded, f64 for an
 * f64 scale). */
typedef struct Q8 {
    F8 *f;
    IrValueId x, s, y;
    IrDType xd, sd, yd;
    bool sat;
    LLVMValueRef px, py, table;
    void (*elem)(struct Q8 *q, LLVMValueRef off, LLVMValueRef sc, LLVMValueRef sv);
} Q8;

/* The loops outer x channel x inner over every element, the channel's scale loaded once per
 * channel; a refusal when the scale's layout is not supported. */
static IrStatus q8_loops(Q8 *q) {
    LlvmEmit *e = q->f->e;
    int64_t ch;
    LLVMValueRef outer, inner;
    const char *why = channel_layout(q->f, q->x, q->s, &outer, &ch, &inner);
    if (why) return llvm_ops_refuse(e, why);
    LLVMBuilderRef b = e->b;
    q->px = lo_buf(e, q->x), q->py = lo_buf(e, q->y);
    LLVMValueRef ps = lo_buf(e, q->s);
    LlvmLoop lo, lc, li;
    loop_v(e, &lo, outer);
    loop_v(e, &lc, lo_i64(e, ch));
    LLVMValueRef sv = lo_load(e, q->sd, ps, lc.iv);
    LLVMValueRef sc = q->sd == IR_DTYPE_F64 ? LLVMBuildFPTrunc(b, sv, lo_f32_t(e), "") : sv; /* (float)interp_get_f */
    LLVMValueRef base = LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, lo.iv, lo_i64(e, ch), ""), lc.iv, ""), inner, "");
    loop_v(e, &li, inner);
    q->elem(q, LLVMBuildNSWAdd(b, base, li.iv, ""), sc, sv);
    llvm_loop_end(b, e->fn, &li);
    llvm_loop_end(b, e->fn, &lc);
    llvm_loop_end(b, e->fn, &lo);
    return IR_OK;
}

static void q8_operands(Q8 *q, F8 *f) {
    const IrGraph *g = f->e->g;
    IrNodeId n = f->e->node;
    *q = (Q8){.f = f, .x = ir_node_operand(g, n, 0), .s = ir_node_operand(g, n, 1), .y = ir_node_result(g, n, 0)};
    q->xd = lo_dtype(f->e, q->x), q->sd = lo_dtype(f->e, q->s), q->yd = lo_dtype(f->e, q->y);
}

/* y = code(x / scale): the quotient in f32, as the interpreter. */
static void quantize_elem(Q8 *q, LLVMValueRef off, LLVMValueRef sc, LLVMValueRef sv) {
    LlvmEmit *e = q->f->e;
    (void)sv;
    LLVMValueRef xv = lo_load(e, q->xd, q->px, off);
    if (q->xd == IR_DTYPE_F64) xv = LLVMBuildFPTrunc(e->b, xv, lo_f32_t(e), "");
    LLVMValueRef c = f32_to_fp8(e, LLVMBuildFDiv(e->b, xv, sc, ""), q->yd, q->sat);
    LLVMBuildStore(e->b, c, lo_gep(e, lo_i8_t(e), q->py, off));
}

/* y = decode(x) * scale in f32 (in f64 when `to` is f64). */
static void dequantize_elem(Q8 *q, LLVMValueRef off, LLVMValueRef sc, LLVMValueRef sv) {
    LlvmEmit *e = q->f->e;
    LLVMValueRef d = decode_at(e, q->table, q->px, off);
    LLVMValueRef v = q->yd == IR_DTYPE_F64 ? LLVMBuildFMul(e->b, lo_to_f64(e, d), lo_to_f64(e, sv), "") : LLVMBuildFMul(e->b, d, sc, "");
    lo_store(e, q->yd, q->py, off, v);
}

static IrStatus gen_quantize(F8 *f) {
    LlvmEmit *e = f->e;
    Q8 q;
    q8_operands(&q, f);
    if (!lo_is_float(q.xd) || !lo_is_float(q.sd) || !is_fp8(q.yd)) return llvm_ops_refuse(e, "on these dtypes");
    bool found;
    const char *fmt = ir_node_attr_string(e->g, e->node, "format", &found);
    if (fmt && strcmp(fmt, q.yd == IR_DTYPE_F8E4M3FN ? "e4m3fn" : "e5m2") != 0) return llvm_ops_refuse(e, "with this format");
    q.sat = ir_node_attr_int(e->g, e->node, "saturate", &found) != 0 || !found;
    q.elem = quantize_elem;
    return q8_loops(&q);
}

static IrStatus gen_dequantize(F8 *f) {
    LlvmEmit *e = f->e;
    Q8 q;
    q8_operands(&q, f);
    if (!is_fp8(q.xd) || !lo_is_float(q.sd) || !lo_is_float(q.yd)) return llvm_ops_refuse(e, "on these dtypes");
    q.table = decode_table(e, q.xd);
    q.elem = dequantize_elem;
    return q8_loops(&q);
}

/* ---- fp8_matmul: register tiles of MM_ROWS rows x MM_VECS vectors of 16 columns, each output
 * summed as acc + a * b (no FMA) for k ascending from 0: the interpreter's order, so the
 * same numbers; B decoded with rows padded to whole vectors (gen_matmul). */
typedef struct MmTile {
    F8 *f;
    int64_t K, N, N16, M, nas, nbias;
    IrDType yd;
    LLVMValueRef pa, pas, pbias, py, fa, fb, acc, ta;
} MmTile;

/* Columns [j0, j0 + nv * 16) of rows row0 .. row0 + nr - 1 (their A rows decoded in fa) into
 * acc (rows of N16). */
static void mm_block(MmTile *t, int nr, int64_t j0, int nv) {
    LlvmEmit *e = t->f->e;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f32 = lo_f32_t(e), vt = LLVMVectorType(f32, MM_VW);
    LLVMValueRef acc[MM_ROWS][MM_VECS], phi[MM_ROWS][MM_VECS];
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    LoLoop lk;
    lo_loop_begin(e, &lk, t->K);
    for (int i = 0; i < nr; i++)
        for (int v = 0; v < nv; v++) {
            LLVMValueRef z = LLVMConstNull(vt);
            phi[i][v] = LLVMBuildPhi(b, vt, "");
            LLVMAddIncoming(phi[i][v], &z, &pre, 1);
        }
    LLVMValueRef bv[MM_VECS];
    LLVMValueRef brow = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, lk.iv, lo_i64(e, t->N16), ""), lo_i64(e, j0), "");
    for (int v = 0; v < nv; v++) {
        LLVMValueRef p = lo_gep(e, f32, t->fb, LLVMBuildNSWAdd(b, brow, lo_i64(e, (int64_t)v * MM_VW), ""));
        bv[v] = LLVMBuildLoad2(b, vt, p, "");
        LLVMSetAlignment(bv[v], 4);
    }
    for (int i = 0; i < nr; i++) {
        LLVMValueRef a = LLVMBuildLoad2(b, f32, lo_gep(e, f32, t->fa, LLVMBuildNSWAdd(b, lk.iv, lo_i64(e, (int64_t)i * t->K), "")), "");
        LLVMValueRef av = LLVMBuildInsertElement(b, LLVMGetUndef(vt), a, LLVMConstInt(LLVMInt32TypeInContext(e->ctx), 0, 0), "");
        av = LLVMBuildShuffleVector(b, av, LLVMGetUndef(vt), LLVMConstNull(LLVMVectorType(LLVMInt32TypeInContext(e->ctx), MM_VW)), "");
        for (int v = 0; v < nv; v++) acc[i][v] = LLVMBuildFAdd(b, phi[i][v], LLVMBuildFMul(b, av, bv[v], ""), "");
    }
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(b);
    for (int i = 0; i < nr; i++)
        for (int v = 0; v < nv; v++) LLVMAddIncoming(phi[i][v], &acc[i][v], &latch, 1);
    lo_loop_end(e, &lk);
    for (int i = 0; i < nr; i++)
        for (int v = 0; v < nv; v++) {
            LLVMValueRef p = lo_gep(e, f32, t->acc, lo_i64(e, (int64_t)i * t->N16 + j0 + (int64_t)v * MM_VW));
            LLVMSetAlignment(LLVMBuildStore(b, acc[i][v], p), 4);
        }
}

/* Rows row0 .. row0 + nr - 1: their A rows decoded and scaled into fa, every column block
 * summed into acc, then the bias added and the outputs stored in their dtype. */
static void mm_rows(MmTile *t, LLVMValueRef row0, int nr) {
    LlvmEmit *e = t->f->e;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f32 = lo_f32_t(e);
    LoLoop lk, ln;
    for (int i = 0; i < nr && t->K > 0; i++) {
        LLVMValueRef row = LLVMBuildNSWAdd(b, row0, lo_i64(e, i), "");
        LLVMValueRef si = t->nas == 1 ? lo_i64(e, 0) : LLVMBuildSRem(b, row, lo_i64(e, t->M), "");
        LLVMValueRef asc = LLVMBuildLoad2(b, f32, lo_gep(e, f32, t->pas, si), "");
        LLVMValueRef arow = LLVMBuildNSWMul(b, row, lo_i64(e, t->K), "");
        lo_loop_begin(e, &lk, t->K);
        LLVMValueRef v = LLVMBuildFMul(b, decode_at(e, t->ta, t->pa, LLVMBuildNSWAdd(b, arow, lk.iv, "")), asc, "");
        LLVMBuildStore(b, v, lo_gep(e, f32, t->fa, LLVMBuildNSWAdd(b, lk.iv, lo_i64(e, (int64_t)i * t->K), "")));
        lo_loop_end(e, &lk);
    }
    int64_t nvec = t->N16 / MM_VW, j = 0;
    if (t->K == 0) { /* empty sums: the bias alone, as the interpreter */
        lo_loop_begin(e, &ln, MM_ROWS * t->N16);
        LLVMBuildStore(b, LLVMConstReal(f32, 0.0), lo_gep(e, f32, t->acc, ln.iv));
        lo_loop_end(e, &ln);
        nvec = 0;
    }
    for (; j + MM_VECS <= nvec; j += MM_VECS) mm_block(t, nr, j * MM_VW, MM_VECS);
    if (j < nvec) mm_block(t, nr, j * MM_VW, (int)(nvec - j));
    for (int i = 0; i < nr; i++) {
        LLVMValueRef yrow = LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, row0, lo_i64(e, i), ""), lo_i64(e, t->N), "");
        lo_loop_begin(e, &ln, t->N);
        LLVMValueRef v = LLVMBuildLoad2(b, f32, lo_gep(e, f32, t->acc, LLVMBuildNSWAdd(b, ln.iv, lo_i64(e, (int64_t)i * t->N16), "")), "");
        if (t->nbias) {
            LLVMValueRef bi = t->nbias == 1 ? lo_i64(e, 0) : LLVMBuildSRem(b, ln.iv, lo_i64(e, t->nbias), "");
            v = LLVMBuildFAdd(b, v, LLVMBuildLoad2(b, f32, lo_gep(e, f32, t->pbias, bi), ""), "");
        }
        lo_store(e, t->yd, t->py, LLVMBuildNSWAdd(b, yrow, ln.iv, ""), t->yd == IR_DTYPE_F64 ? lo_to_f64(e, v) : v);
        lo_loop_end(e, &ln);
    }
}

static IrStatus gen_matmul(F8 *f) {
    LlvmEmit *e = f->e;
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LLVMBuilderRef b = e->b;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vas = ir_node_operand(g, n, 2);
    IrValueId vbs = ir_node_operand(g, n, 3), vbias = ir_node_num_operands(g, n) > 4 ? ir_node_operand(g, n, 4) : 0;
    IrValueId y = ir_node_result(g, n, 0);
    IrDType ad = lo_dtype(e, va), bd = lo_dtype(e, vb), yd = lo_dtype(e, y);
    if (!is_fp8(ad) || !is_fp8(bd) || !vas || !vbs || lo_dtype(e, vas) != IR_DTYPE_F32 || lo_dtype(e, vbs) != IR_DTYPE_F32 ||
        (vbias && lo_dtype(e, vbias) != IR_DTYPE_F32) || !lo_is_float(yd))
        return llvm_ops_refuse(e, "on these dtypes (fp8 operands, f32 scales and bias)");
    uint32_t ra = rank_of(g, va), rb, r;
    int64_t db[IR_MAX_RANK], d[IR_MAX_RANK];
    if (!lower_value_shape(g, vb, &rb, db) || ra < 1 || rb != 2) return llvm_ops_refuse(e, "with these shapes (a 2-D B of static shape)");
    int64_t K = cdim(g, va, ra - 1), M = ra >= 2 ? cdim(g, va, ra - 2) : 1, N = db[1];
    LLVMValueRef rows = dims_prod(f, va, 0, ra - 1);
    if (db[0] != K) return llvm_ops_refuse(e, "with these shapes");
    if (!rows) return llvm_ops_refuse(e, "with symbolic dims known at run time only");
    if (!lower_value_shape(g, vas, &r, d)) return llvm_ops_refuse(e, "with an a_scale of symbolic size");
    int64_t nas = ir_shape_numel(r, d);
    if (!lower_value_shape(g, vbs, &r, d)) return llvm_ops_refuse(e, "with a b_scale of symbolic size");
    int64_t nbs = ir_shape_numel(r, d), nbias = 0;
    if (vbias) {
        if (!lower_value_shape(g, vbias, &r, d)) return llvm_ops_refuse(e, "with a bias of symbolic size");
        nbias = ir_shape_numel(r, d);
    }
    if ((nas != 1 && nas != M) || (nbs != 1 && nbs != N)) return llvm_ops_refuse(e, "with these scale shapes");
    if (N == 0) return IR_OK;
    int64_t N16 = pad_vw(N);
    LLVMTypeRef f32 = lo_f32_t(e);
    LLVMValueRef pa = lo_buf(e, va), pb = lo_buf(e, vb), pas = lo_buf(e, vas), pbs = lo_buf(e, vbs), py = lo_buf(e, y);
    LLVMValueRef pbias = vbias ? lo_buf(e, vbias) : NULL;
    LLVMValueRef fb = lo_buf(e, ir_graph_num_values(g) + 1 + e->index); /* the scratch: [B], A rows, sums */
    LLVMValueRef fa = lo_gep(e, f32, fb, lo_i64(e, b_const(g, vb, vbs) ? 0 : K * N16));
    LLVMValueRef acc = lo_gep(e, f32, fa, lo_i64(e, MM_ROWS * K));
    LLVMValueRef ta = decode_table(e, ad), tb = bd == ad ? ta : decode_table(e, bd);
    /* B decoded and scaled per column, rows padded to N16 columns (zeros): at compile time when B
     * and its scales are constants (the same f32 products), else per run into scratch */
    LoLoop lk, ln;
    const float *bsc = b_const(g, vb, vbs);
    if (bsc) {
        const uint8_t *bc = lower_value_const_data(g, vb);
        float *h = calloc((size_t)(K * N16), sizeof *h);
        if (!h) return IR_ENOMEM;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < N; j++) {
                h[k * N16 + j] = fp8_value(bd, bc[k * N + j]) * bsc[nbs == 1 ? 0 : j];
            }
        fb = lo_const_bytes(e, h, (size_t)(K * N16) * sizeof *h, "irtool.fp8_weight");
        free(h);
    } else if (K > 0) {
        lo_loop_begin(e, &lk, K);
        lo_loop_begin(e, &ln, N16);
        LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, ln.iv, lo_i64(e, N), "");
        LLVMValueRef n = LLVMBuildSelect(b, in, ln.iv, lo_i64(e, 0), "");
        LLVMValueRef sc = LLVMBuildLoad2(b, f32, lo_gep(e, f32, pbs, nbs == 1 ? lo_i64(e, 0) : n), "");
        LLVMValueRef v = LLVMBuildFMul(b, decode_at(e, tb, pb, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, lk.iv, lo_i64(e, N), ""), n, "")), sc, "");
        LLVMValueRef off = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, lk.iv, lo_i64(e, N16), ""), ln.iv, "");
        LLVMBuildStore(b, LLVMBuildSelect(b, in, v, LLVMConstReal(f32, 0.0), ""), lo_gep(e, f32, fb, off));
        lo_loop_end(e, &ln);
        lo_loop_end(e, &lk);
    }
    /* rows in tiles of MM_ROWS, then one at a time */
    MmTile t = {.f = f, .K = K, .N = N, .N16 = N16, .M = M, .nas = nas, .nbias = nbias, .yd = yd, .pa = pa, .pas = pas,
                .pbias = pbias, .py = py, .fa = fa, .fb = fb, .acc = acc, .ta = ta};
    LLVMValueRef tiles = LLVMBuildUDiv(b, rows, lo_i64(e, MM_ROWS), "");
    LlvmLoop lt, lr;
    loop_v(e, &lt, tiles);
    mm_rows(&t, LLVMBuildNSWMul(b, lt.iv, lo_i64(e, MM_ROWS), ""), MM_ROWS);
    llvm_loop_end(b, e->fn, &lt);
    loop_v(e, &lr, LLVMBuildSub(b, rows, LLVMBuildNSWMul(b, tiles, lo_i64(e, MM_ROWS), ""), ""));
    mm_rows(&t, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, tiles, lo_i64(e, MM_ROWS), ""), lr.iv, ""), 1);
    llvm_loop_end(b, e->fn, &lr);
    return IR_OK;
}

IrStatus llvm_ops_fp8_gen_at(LlvmEmit *e, LLVMValueRef (*dim)(void *ctx, IrExprId x), void *ctx) {
    static IrStatus (*const gens[IR_OP_COUNT])(F8 *) = {
        [IR_OP_QUANTIZE_FP8] = gen_quantize,
        [IR_OP_DEQUANTIZE_FP8] = gen_dequantize,
        [IR_OP_FP8_MAT_MUL] = gen_matmul,
    };
    F8 f = {e, dim, ctx};
    IrOp op = ir_node_op(e->g, e->node);
    return gens[op] ? gens[op](&f) : lo_unsupported(e, "in the fp8 family");
}

IrStatus llvm_ops_fp8_gen(LlvmEmit *e) { return llvm_ops_fp8_gen_at(e, NULL, NULL); }

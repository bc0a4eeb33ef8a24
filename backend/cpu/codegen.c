/* LLVM code generation for the CPU backend: one internal LLVM function per node over flat
 * buffers (loop nests over static shapes; an elementwise `irtool.fused` group is one node, one
 * loop nest, its intermediates never in memory), an entry `irt_entry(bufs, fns)` that calls them in
 * program order, O3 via the new pass manager for the host CPU, and an ORC LLJIT to load it.
 * Invariants: shapes are static (the caller specializes symbols); only the top-level region is
 * compiled; buffer of value v is bufs[v]; library helpers (GEMM, tanh, erf) are reached through
 * the IrtFnTable argument, never by symbol name. Anything else is refused naming the op.
 */

#include "backend/cpu/cpu.h"
#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Cg {
    const IrGraph *g;
    IrDiag *diag;
    IrNodeId node;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b, ab; /* ab: allocas, kept at the top of the entry block */
    LLVMTypeRef i1, i8, i32, i64, f32, ptr, vd;
    LLVMValueRef fn, bufs, fns;
    uint32_t n_blas; /* GEMM calls emitted (the global "irtool.blas" tells loaders) */
    IrNodeId group;  /* the epilogue group being compiled (its arguments map to its operands) */
    LlvmSlots slots; /* the current kernel's buffers, in bufs order */
    unsigned simd_bits; /* target vector width for the packed GEMM (0: BLAS) */
    uint32_t n_part_fns; /* part functions of the current kernel (irt_parallel), for their names */
    /* A kernel run as n_parts parts (gen_node: elementwise, row and attention kernels): the body
     * is emitted into a part function and emit_nest splits its outermost loop by `part`. */
    LLVMValueRef part;
    int64_t n_parts;
    bool part_used;
    uint32_t derived_slot; /* > 0: compile-time data goes to `derived` (llvm_build_kernel) */
    LlvmDerived derived;
    /* Streaming nests (emit_nest): when set, the innermost loop runs by cache lines and calls
     * this once per line with the line's offsets and each operand's step along that loop */
    void (*stream_pf)(struct Cg *cg, const LLVMValueRef *offs, const int64_t *step, void *user);
} Cg;

/* ---- shapes ------------------------------------------------------------------------------ */


static IrStatus unsupported(Cg *cg, const char *what) {
    ir_diag_at_node(cg->diag, cg->g, cg->node, IR_SEV_ERROR, "the llvm backend does not support %s%s%s yet",
                    ir_op_name(ir_node_op(cg->g, cg->node)), what ? " " : "", what ? what : "");
    return IR_EUNSUPPORTED;
}

/* ---- IR building helpers -------------------------------------------------------------------- */

static LLVMValueRef ci64(Cg *cg, int64_t v) { return LLVMConstInt(cg->i64, (unsigned long long)v, 1); }
static LLVMValueRef cf32(Cg *cg, double v) { return LLVMConstReal(cg->f32, v); }


/* The kernel being emitted as the family emitters see it (node cg->node, kernel index); in a
 * kernel in parts its part, so that llvm_nest shares the first nest out as with run-time shapes. */
static LlvmEmit emit_ctx(Cg *cg, uint32_t index) {
    return (LlvmEmit){.g = cg->g, .diag = cg->diag, .node = cg->node, .index = index, .ctx = cg->ctx, .mod = cg->mod,
                      .b = cg->b, .ab = cg->ab, .fn = cg->fn, .bufs = cg->bufs, .fns = cg->fns, .slots = &cg->slots, .owner = cg,
                      .part = cg->part, .np = cg->part ? LLVMConstInt(cg->i64, (unsigned long long)cg->n_parts, 1) : NULL};
}

static LLVMValueRef buf(Cg *cg, IrValueId v) {
    LLVMValueRef idx = ci64(cg, llvm_slot_local(&cg->slots, v));
    LLVMValueRef p = LLVMBuildGEP2(cg->b, cg->ptr, cg->bufs, &idx, 1, "");
    return LLVMBuildLoad2(cg->b, cg->ptr, p, "");
}

/* The buffer of v, which may be an argument of the group being compiled (cg->group). */
static LLVMValueRef obuf(Cg *cg, IrValueId v) {
    if (cg->group) {
        IrRegionId body = ir_node_region_at(cg->g, cg->group, 0);
        for (uint32_t i = 0; i < ir_region_num_args(cg->g, body); i++)
            if (ir_region_arg(cg->g, body, i) == v) return buf(cg, ir_node_operand(cg->g, cg->group, i));
    }
    return buf(cg, v);
}

static LLVMValueRef elem_ptr(Cg *cg, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildGEP2(cg->b, t, base, &off, 1, "");
}
static LLVMValueRef ld(Cg *cg, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildLoad2(cg->b, t, elem_ptr(cg, t, base, off), "");
}
static void st(Cg *cg, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off, LLVMValueRef v) {
    LLVMBuildStore(cg->b, v, elem_ptr(cg, t, base, off));
}

static LLVMValueRef intrinsic(Cg *cg, const char *name, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMTypeRef tys[1] = {cg->f32};
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(cg->mod, id, tys, 1);
    LLVMTypeRef ft = LLVMIntrinsicGetType(cg->ctx, id, tys, 1);
    return LLVMBuildCall2(cg->b, ft, f, args, n, "");
}

static LLVMValueRef table_fn(Cg *cg, int slot) {
    LLVMValueRef idx = ci64(cg, slot);
    LLVMValueRef p = LLVMBuildGEP2(cg->b, cg->ptr, cg->fns, &idx, 1, "");
    return LLVMBuildLoad2(cg->b, cg->ptr, p, "");
}

static LLVMValueRef var_f32(Cg *cg, double init) {
    LLVMValueRef a = LLVMBuildAlloca(cg->ab, cg->f32, "");
    LLVMBuildStore(cg->b, cf32(cg, init), a);
    return a;
}

/* A counted loop 0..n-1 (n >= 1), emitted as header-tests-at-bottom (llvm/emit.c). */
typedef LlvmLoop Loop;
static void loop_begin(Cg *cg, Loop *l, int64_t n) { llvm_loop_begin(cg->b, cg->fn, l, n); }
static void loop_end(Cg *cg, Loop *l) { llvm_loop_end(cg->b, cg->fn, l); }

/* Loop nest over dims; offs[j] = base[j] + sum_k i_k * strides[j][k] for each of n_ops
 * operands; body runs once per point. Nothing is emitted for an empty shape. */
typedef void (*NestBody)(Cg *cg, LLVMValueRef *offs, void *user);
#define MAX_OPS 32

/* This part's share [lo, lo + n) of a loop of d: [part * d / P, (part + 1) * d / P); part -1
 * (irt_parallel on one thread): all of it. */
static void part_share(Cg *cg, int64_t d, LLVMValueRef *lo, LLVMValueRef *n) {
    LLVMValueRef hi;
    llvm_part_range(cg->b, cg->part, ci64(cg, d), ci64(cg, cg->n_parts), lo, &hi);
    *n = LLVMBuildNSWSub(cg->b, hi, *lo, "");
}

/* Offsets at index iv of level k. */
static void nest_offs(Cg *cg, uint32_t k, uint32_t n_ops, int64_t (*strides)[IR_MAX_RANK], const LLVMValueRef *offs,
                      LLVMValueRef iv, LLVMValueRef *out) {
    for (uint32_t j = 0; j < n_ops; j++)
        out[j] = strides[j][k] ? LLVMBuildNSWAdd(cg->b, offs[j], LLVMBuildNSWMul(cg->b, iv, ci64(cg, strides[j][k]), ""), "")
                               : offs[j];
}

/* The innermost loop of a streaming nest, over [lo, lo + n): by lines of NEST_LINE points, each
 * line's prefetches (cg->stream_pf) then its points, and the last n % NEST_LINE points on their
 * own. The hardware prefetcher stops at every 4 KiB page; prefetching a page or so ahead keeps
 * the loads coming (a 16-op chain over 64 MiB: 9.9 -> 12.3 GB/s, as fast as the triad). */
#define NEST_LINE 16 /* f32 points per 64-byte line */
static void nest_stream(Cg *cg, uint32_t k, int64_t (*strides)[IR_MAX_RANK], uint32_t n_ops, LLVMValueRef *offs,
                        LLVMValueRef lo, LLVMValueRef n, NestBody body, void *user) {
    int64_t step[MAX_OPS];
    for (uint32_t j = 0; j < n_ops; j++) step[j] = strides[j][k];
    LLVMValueRef lines = LLVMBuildSDiv(cg->b, n, ci64(cg, NEST_LINE), ""), at[MAX_OPS], in[MAX_OPS];
    Loop l, p;
    llvm_loop_begin_v(cg->b, cg->fn, &l, lines);
    LLVMValueRef i0 = LLVMBuildNSWAdd(cg->b, lo, LLVMBuildNSWMul(cg->b, l.iv, ci64(cg, NEST_LINE), ""), "");
    nest_offs(cg, k, n_ops, strides, offs, i0, at);
    cg->stream_pf(cg, at, step, user);
    loop_begin(cg, &p, NEST_LINE);
    nest_offs(cg, k, n_ops, strides, at, p.iv, in);
    body(cg, in, user);
    loop_end(cg, &p);
    loop_end(cg, &l);
    LLVMValueRef done = LLVMBuildNSWMul(cg->b, lines, ci64(cg, NEST_LINE), "");
    llvm_loop_begin_v(cg->b, cg->fn, &p, LLVMBuildNSWSub(cg->b, n, done, ""));
    nest_offs(cg, k, n_ops, strides, offs, LLVMBuildNSWAdd(cg->b, LLVMBuildNSWAdd(cg->b, lo, done, ""), p.iv, ""), in);
    body(cg, in, user);
    loop_end(cg, &p);
}

/* split: the level whose loop runs only this part's share (cg->part of cg->n_parts), or rank. */
static void nest_rec(Cg *cg, uint32_t k, uint32_t rank, const int64_t *dims, uint32_t n_ops,
                     int64_t (*strides)[IR_MAX_RANK], LLVMValueRef *offs, NestBody body, void *user, uint32_t split) {
    if (k == rank) {
        body(cg, offs, user);
        return;
    }
    bool innermost = true;
    for (uint32_t i = k + 1; i < rank; i++) innermost &= dims[i] == 1;
    if (cg->stream_pf && innermost && dims[k] >= 2 * NEST_LINE) {
        LLVMValueRef lo = ci64(cg, 0), n = ci64(cg, dims[k]);
        if (k == split) part_share(cg, dims[k], &lo, &n);
        nest_stream(cg, k, strides, n_ops, offs, lo, n, body, user);
        return;
    }
    if (dims[k] == 1) {
        nest_rec(cg, k + 1, rank, dims, n_ops, strides, offs, body, user, split);
        return;
    }
    Loop l;
    LLVMValueRef iv, lo = NULL;
    if (k == split) {
        LLVMValueRef n;
        part_share(cg, dims[k], &lo, &n);
        llvm_loop_begin_v(cg->b, cg->fn, &l, n);
        iv = LLVMBuildNSWAdd(cg->b, l.iv, lo, "");
    } else {
        loop_begin(cg, &l, dims[k]);
        iv = l.iv;
    }
    LLVMValueRef inner[MAX_OPS];
    nest_offs(cg, k, n_ops, strides, offs, iv, inner);
    nest_rec(cg, k + 1, rank, dims, n_ops, strides, inner, body, user, split);
    loop_end(cg, &l);
}

static void emit_nest(Cg *cg, uint32_t rank, const int64_t *dims, uint32_t n_ops, int64_t (*strides)[IR_MAX_RANK],
                      const int64_t *base, NestBody body, void *user) {
    if (ir_shape_numel(rank, dims) == 0) return;
    LLVMValueRef offs[MAX_OPS];
    for (uint32_t j = 0; j < n_ops; j++) offs[j] = ci64(cg, base ? base[j] : 0);
    uint32_t split = rank;
    LLVMBasicBlockRef after = NULL;
    if (cg->part && !cg->part_used) { /* a kernel in parts: the first loop long enough is shared out */
        cg->part_used = true;
        for (uint32_t k = 0; k < rank && split == rank; k++)
            if (dims[k] >= cg->n_parts) split = k;
            else if (dims[k] > 1) break;
        if (split == rank) /* nothing to share: part 0 (or -1, all parts) does it all */
            after = llvm_if_begin(cg->b, cg->fn, LLVMBuildICmp(cg->b, LLVMIntSLE, cg->part, ci64(cg, 0), ""));
    }
    nest_rec(cg, 0, rank, dims, n_ops, strides, offs, body, user, split);
    if (after) llvm_if_end(cg->b, after);
}

/* Streaming kernels: nests whose result is at least STREAM_MIN_BYTES run by lines with each
 * contiguous f32 operand prefetched STREAM_READ_AHEAD bytes ahead and the stored results
 * STREAM_WRITE_AHEAD bytes ahead for writing (so the read for ownership starts early too). In C
 * on this project's Intel machine (one thread, 64 MiB): 9.9 GB/s with no prefetch, 11.4 with the
 * loads', 12.3-12.5 with both, distances from 1 to 16 KiB within 5% of these. */
#define STREAM_MIN_BYTES (1 << 20)
#define STREAM_READ_AHEAD 4096
#define STREAM_WRITE_AHEAD 1024
static void stream_line(Cg *cg, LLVMValueRef base, LLVMTypeRef t, LLVMValueRef off, int64_t step, bool write) {
    if (step != 1 || t != cg->f32) return;
    int64_t ahead = (write ? STREAM_WRITE_AHEAD : STREAM_READ_AHEAD) / 4;
    llvm_prefetch_for(cg->b, elem_ptr(cg, cg->f32, base, LLVMBuildNSWAdd(cg->b, off, ci64(cg, ahead), "")), write);
}

/* Strides of an operand of shape (r, d) broadcast (numpy rules) to an output of rank orank. */
/* ---- elementwise ------------------------------------------------------------------------------ */

typedef struct EwCtx {
    IrOp op;
    uint32_t n_in;
    LLVMValueRef ptrs[MAX_OPS]; /* [0] output, then inputs (NULL for absent) */
    LLVMTypeRef tys[MAX_OPS];
    double alpha, beta;
} EwCtx;

static LLVMValueRef fcmp_sel(Cg *cg, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(cg->b, LLVMBuildFCmp(cg->b, p, a, b, ""), a, b, "");
}

/* max/min exactly as the interpreter: (x is NaN || x >= y) ? x : y, so a NaN on either side wins. */
static LLVMValueRef nan_max(Cg *cg, LLVMValueRef x, LLVMValueRef y, bool max) {
    LLVMValueRef c = LLVMBuildOr(cg->b, LLVMBuildFCmp(cg->b, LLVMRealUNO, x, x, ""),
                                 LLVMBuildFCmp(cg->b, max ? LLVMRealOGE : LLVMRealOLE, x, y, ""), "");
    return LLVMBuildSelect(cg->b, c, x, y, "");
}

/* The f32 formulas of the core elementwise ops (lower_ops.def's LOWER_CORE_EW), keyed by op id
 * in f32_ew_ops: x[i] the operands' values (NULL for absent ones). */
#define F32_EW(name) \
    static LLVMValueRef name(Cg *cg __attribute__((unused)), const EwCtx *e __attribute__((unused)), LLVMValueRef *x)
F32_EW(f32_add) { return LLVMBuildFAdd(cg->b, x[0], x[1], ""); }
F32_EW(f32_sum) {
    LLVMValueRef acc = x[0];
    for (uint32_t i = 1; i < e->n_in; i++) acc = LLVMBuildFAdd(cg->b, acc, x[i], "");
    return acc;
}
F32_EW(f32_mean) { return LLVMBuildFDiv(cg->b, f32_sum(cg, e, x), cf32(cg, (double)e->n_in), ""); }
F32_EW(f32_sub) { return LLVMBuildFSub(cg->b, x[0], x[1], ""); }
F32_EW(f32_mul) { return LLVMBuildFMul(cg->b, x[0], x[1], ""); }
F32_EW(f32_div) { return LLVMBuildFDiv(cg->b, x[0], x[1], ""); }
F32_EW(f32_pow) { return intrinsic(cg, "llvm.pow", x, 2); }
static LLVMValueRef f32_fold_max(Cg *cg, const EwCtx *e, LLVMValueRef *x, bool max) {
    LLVMValueRef acc = x[0];
    for (uint32_t i = 1; i < e->n_in; i++) acc = nan_max(cg, acc, x[i], max);
    return acc;
}
F32_EW(f32_max) { return f32_fold_max(cg, e, x, true); }
F32_EW(f32_min) { return f32_fold_max(cg, e, x, false); }
F32_EW(f32_relu) { return fcmp_sel(cg, LLVMRealUGT, x[0], cf32(cg, 0.0)); }
F32_EW(f32_neg) { return LLVMBuildFNeg(cg->b, x[0], ""); }
F32_EW(f32_abs) { return intrinsic(cg, "llvm.fabs", x, 1); }
F32_EW(f32_exp) { return llvm_exp_f32(cg->b, x[0]); }
F32_EW(f32_log) { return intrinsic(cg, "llvm.log", x, 1); }
F32_EW(f32_sqrt) { return intrinsic(cg, "llvm.sqrt", x, 1); }
F32_EW(f32_floor) { return intrinsic(cg, "llvm.floor", x, 1); }
F32_EW(f32_ceil) { return intrinsic(cg, "llvm.ceil", x, 1); }
F32_EW(f32_reciprocal) { return LLVMBuildFDiv(cg->b, cf32(cg, 1.0), x[0], ""); }
F32_EW(f32_tanh) { return llvm_tanh_f32(cg->b, x[0]); }
F32_EW(f32_erf) { return llvm_erf_f32(cg->b, x[0]); }
F32_EW(f32_identity) { return x[0]; }
F32_EW(f32_sigmoid) {
    LLVMBuilderRef b = cg->b;
    LLVMValueRef one = cf32(cg, 1.0), nx = LLVMBuildFNeg(b, x[0], "");
    return LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, llvm_exp_f32(b, nx), ""), "");
}
F32_EW(f32_leaky_relu) {
    LLVMBuilderRef b = cg->b;
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x[0], cf32(cg, 0.0), ""),
                           LLVMBuildFMul(b, x[0], cf32(cg, e->alpha), ""), x[0], "");
}
F32_EW(f32_clip) {
    LLVMBuilderRef b = cg->b;
    LLVMValueRef v = x[0];
    if (e->ptrs[2]) v = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, v, x[1], ""), x[1], v, "");
    if (e->ptrs[3]) v = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, v, x[2], ""), x[2], v, "");
    return v;
}
F32_EW(f32_where) {
    return LLVMBuildSelect(cg->b, LLVMBuildICmp(cg->b, LLVMIntNE, x[0], LLVMConstInt(cg->i8, 0, 0), ""), x[1], x[2], "");
}

static LLVMValueRef (*const f32_ew_ops[IR_OP_COUNT])(Cg *, const EwCtx *, LLVMValueRef *) = {
    [IR_OP_ADD] = f32_add, [IR_OP_SUM] = f32_sum, [IR_OP_MEAN] = f32_mean, [IR_OP_SUB] = f32_sub,
    [IR_OP_MUL] = f32_mul, [IR_OP_DIV] = f32_div, [IR_OP_POW] = f32_pow, [IR_OP_MAX] = f32_max,
    [IR_OP_MIN] = f32_min, [IR_OP_RELU] = f32_relu, [IR_OP_NEG] = f32_neg, [IR_OP_ABS] = f32_abs,
    [IR_OP_EXP] = f32_exp, [IR_OP_LOG] = f32_log, [IR_OP_SQRT] = f32_sqrt, [IR_OP_FLOOR] = f32_floor,
    [IR_OP_CEIL] = f32_ceil, [IR_OP_RECIPROCAL] = f32_reciprocal, [IR_OP_TANH] = f32_tanh, [IR_OP_ERF] = f32_erf,
    [IR_OP_IDENTITY] = f32_identity, [IR_OP_SIGMOID] = f32_sigmoid, [IR_OP_LEAKY_RELU] = f32_leaky_relu,
    [IR_OP_CLIP] = f32_clip, [IR_OP_WHERE] = f32_where,
};

static LLVMValueRef ew_value(Cg *cg, EwCtx *e, LLVMValueRef *x) { return f32_ew_ops[e->op] ? f32_ew_ops[e->op](cg, e, x) : NULL; }

static void ew_body(Cg *cg, LLVMValueRef *offs, void *user) {
    EwCtx *e = user;
    LLVMValueRef x[MAX_OPS];
    for (uint32_t i = 0; i < e->n_in; i++)
        x[i] = e->ptrs[i + 1] ? ld(cg, e->tys[i + 1], e->ptrs[i + 1], offs[i + 1]) : NULL;
    st(cg, cg->f32, e->ptrs[0], offs[0], ew_value(cg, e, x));
}

static void ew_stream(Cg *cg, const LLVMValueRef *offs, const int64_t *step, void *user) {
    EwCtx *e = user;
    for (uint32_t i = 0; i <= e->n_in; i++)
        if (e->ptrs[i]) stream_line(cg, e->ptrs[i], e->tys[i], offs[i], step[i], i == 0);
}

static bool ew_supported(IrOp op) { return lower_core_ew_op(op); }

static IrStatus gen_elementwise(Cg *cg, IrOp op) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    EwCtx e = {.op = op, .n_in = ir_node_num_operands(g, n)};
    if (e.n_in + 1 > MAX_OPS) return unsupported(cg, "with this many operands");
    IrValueId out = ir_node_result(g, n, 0);
    uint32_t orank, r;
    int64_t odims[IR_MAX_RANK], d[IR_MAX_RANK], strides[MAX_OPS][IR_MAX_RANK];
    lower_value_shape(g, out, &orank, odims);
    if (ir_type_dtype(g, ir_value_type(g, out)) != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
    ir_shape_strides(orank, odims, strides[0]);
    e.ptrs[0] = buf(cg, out);
    e.tys[0] = cg->f32;
    for (uint32_t i = 0; i < e.n_in; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        e.ptrs[i + 1] = NULL;
        memset(strides[i + 1], 0, sizeof strides[i + 1]);
        if (!v) continue;
        IrDType dt = ir_type_dtype(g, ir_value_type(g, v));
        bool cond = op == IR_OP_WHERE && i == 0;
        if (cond ? dt != IR_DTYPE_BOOL : dt != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
        lower_value_shape(g, v, &r, d);
        ir_shape_broadcast_strides(r, d, orank, NULL, strides[i + 1]);
        e.ptrs[i + 1] = buf(cg, v);
        e.tys[i + 1] = cond ? cg->i8 : cg->f32;
    }
    bool found;
    e.alpha = ir_node_attr_float(g, n, "alpha", &found);
    if (ir_shape_numel(orank, odims) * 4 >= STREAM_MIN_BYTES) cg->stream_pf = ew_stream;
    emit_nest(cg, orank, odims, e.n_in + 1, strides, NULL, ew_body, &e);
    cg->stream_pf = NULL;
    return IR_OK;
}

/* ---- fused elementwise groups ------------------------------------------------------------ */

/* An `irtool.fused` group whose members are all supported f32 elementwise ops becomes one kernel:
 * a loop nest over the group's result shape that loads each group operand once per point (with
 * broadcast indexing), evaluates the members in order on scalars and stores only the results.
 * Every member value is broadcast-compatible with the result shape, so evaluating it at the
 * broadcast index of each output point gives the same float operations as the unfused kernels. */
typedef struct FusedCtx {
    IrRegionId body;
    uint32_t n_load, n_store;
    IrValueId load_v[MAX_OPS], store_v[MAX_OPS];
    LLVMValueRef load_p[MAX_OPS], store_p[MAX_OPS];
    LLVMTypeRef load_t[MAX_OPS];
    bool hoisted[MAX_OPS]; /* one-element operands: loaded once before the nest */
    LLVMValueRef *vals; /* by value id, per point */
} FusedCtx;

/* Value of elementwise member m of a fused group from the values of its operands (vals, by value
 * id); stored in vals[its result] and returned. */
static LLVMValueRef member_value(Cg *cg, IrNodeId m, LLVMValueRef *vals) {
    const IrGraph *g = cg->g;
    EwCtx e = {.op = ir_node_op(g, m), .n_in = ir_node_num_operands(g, m)};
    LLVMValueRef x[MAX_OPS];
    for (uint32_t i = 0; i < e.n_in; i++) {
        IrValueId v = ir_node_operand(g, m, i);
        x[i] = v ? vals[v] : NULL;
        e.ptrs[i + 1] = x[i]; /* non-NULL marks a present operand (Clip) */
    }
    bool found;
    e.alpha = ir_node_attr_float(g, m, "alpha", &found);
    return vals[ir_node_result(g, m, 0)] = ew_value(cg, &e, x);
}

static void fused_body(Cg *cg, LLVMValueRef *offs, void *user) {
    FusedCtx *f = user;
    const IrGraph *g = cg->g;
    /* offs: [0, n_store) stores, then loads */
    for (uint32_t j = 0; j < f->n_load; j++)
        if (!f->hoisted[j]) f->vals[f->load_v[j]] = ld(cg, f->load_t[j], f->load_p[j], offs[f->n_store + j]);
    for (IrNodeId m = ir_region_first(g, f->body); m; m = ir_node_next(g, m)) member_value(cg, m, f->vals);
    for (uint32_t j = 0; j < f->n_store; j++) st(cg, cg->f32, f->store_p[j], offs[j], f->vals[f->store_v[j]]);
}

static void fused_stream(Cg *cg, const LLVMValueRef *offs, const int64_t *step, void *user) {
    FusedCtx *f = user;
    for (uint32_t j = 0; j < f->n_store; j++) stream_line(cg, f->store_p[j], cg->f32, offs[j], step[j], true);
    for (uint32_t j = 0; j < f->n_load; j++)
        if (!f->hoisted[j]) stream_line(cg, f->load_p[j], f->load_t[j], offs[f->n_store + j], step[f->n_store + j], false);
}

static IrStatus gen_fused_ew(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    if (!lower_fused_ew_group(g, n, true)) return unsupported(cg, "group with these members or shapes");
    IrRegionId body = ir_node_region_at(g, n, 0);
    FusedCtx f = {.body = body};
    uint32_t orank, r;
    int64_t od[IR_MAX_RANK], d[IR_MAX_RANK], strides[MAX_OPS][IR_MAX_RANK];
    lower_value_shape(g, ir_node_result(g, n, 0), &orank, od);
    f.vals = calloc(ir_graph_num_values(g) + 1, sizeof *f.vals);
    if (!f.vals) return IR_ENOMEM;
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId res = ir_node_result(g, n, i);
        if (!res) continue;
        f.store_v[f.n_store] = ir_region_output(g, body, i);
        f.store_p[f.n_store] = buf(cg, res);
        ir_shape_strides(orank, od, strides[f.n_store]);
        f.n_store++;
    }
    /* loads: the group's operands (bound to the region args) and graph constants used inside */
    for (IrNodeId m = ir_region_first(g, body); m; m = ir_node_next(g, m)) {
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i), src = v;
            if (!v || ir_value_kind(g, v) == IR_VALUE_RESULT) continue;
            bool seen = false;
            for (uint32_t j = 0; j < f.n_load && !seen; j++) seen = f.load_v[j] == v;
            if (seen) continue;
            src = lower_outer_value(g, n, v);
            if (!src || f.n_store + f.n_load >= MAX_OPS) {
                free(f.vals);
                return unsupported(cg, "group with these operands");
            }
            lower_value_shape(g, v, &r, d);
            ir_shape_broadcast_strides(r, d, orank, NULL, strides[f.n_store + f.n_load]);
            f.load_v[f.n_load] = v;
            f.load_p[f.n_load] = buf(cg, src);
            f.load_t[f.n_load] = ir_type_dtype(g, ir_value_type(g, v)) == IR_DTYPE_BOOL ? cg->i8 : cg->f32;
            /* scalars (and other one-element operands) are loaded once: the stores could alias
             * them as far as LLVM knows, which would keep the load in the loop */
            if (ir_shape_numel(r, d) == 1) {
                f.hoisted[f.n_load] = true;
                f.vals[v] = ld(cg, f.load_t[f.n_load], f.load_p[f.n_load], ci64(cg, 0));
            }
            f.n_load++;
        }
    }
    if (ir_shape_numel(orank, od) * 4 >= STREAM_MIN_BYTES) cg->stream_pf = fused_stream;
    emit_nest(cg, orank, od, f.n_store + f.n_load, strides, NULL, fused_body, &f);
    cg->stream_pf = NULL;
    free(f.vals);
    return IR_OK;
}

/* ---- reductions --------------------------------------------------------------------------- */

/* Rows of length `len` with element stride `step`: trailing reductions and the row groups' row
 * op, computed by the row family (cpu/rows.c). */
typedef struct RowCtx {
    IrOp op;
    LLVMValueRef x, y, scale, bias;
    int64_t len, step;
    double eps;
} RowCtx;

/* o[0]: the row's first x element; o[1]: a reduction's y element. */
static void row_body(Cg *cg, LLVMValueRef *o, void *user) {
    RowCtx *c = user;
    LlvmEmit e = emit_ctx(cg, 0);
    bool red = c->op != IR_OP_SOFTMAX && c->op != IR_OP_LOG_SOFTMAX && c->op != IR_OP_LAYER_NORMALIZATION;
    LlvmRow r = {.op = c->op, .x = c->x, .y = c->y, .scale = c->scale, .bias = c->bias, .len = ci64(cg, c->len),
                 .step = ci64(cg, c->step), .xoff = o[0], .yoff = red ? o[1] : o[0], .eps = c->eps};
    llvm_row_f32(&e, &r);
}

static IrStatus derived_data(Cg *cg, void *data, size_t bytes, const char *name, LLVMValueRef *global, uint32_t *slot);

/* ---- fused row-reduction groups ---------------------------------------------------------------
 * An `irtool.fused` group around one reduction R over the last axis (Softmax, LogSoftmax,
 * LayerNormalization, or ReduceSum/Mean/Max/Min of the last axis) with f32 elementwise members
 * before it (computing R's input, e.g. a residual Add) and after it (using R's output, e.g. a
 * scale or an activation) becomes one kernel. Per row: the members before R are evaluated along
 * the row into a stack buffer (exported values stored on the way), R runs on the buffer exactly
 * as the standalone kernel does (row_body), then the members after R are evaluated per element
 * of R's output and stored. One pass over memory instead of one per member. */

typedef struct RowGroup {
    IrNodeId red;
    uint32_t rx, ry;           /* ranks of R's input X and output Y */
    int64_t dx[IR_MAX_RANK], dy[IR_MAX_RANK], len;
    uint8_t *phase;            /* by node id: 1 before R, 2 after R, 3 R */
} RowGroup;

/* Whether v is the result of a member of group body (not an argument or a constant). */

/* Marks in need[] (by node id) the members that feed an already marked one, walking back from
 * member `from`. */
static void mark_feeders(const IrGraph *g, IrRegionId body, uint8_t *need, IrNodeId from) {
    for (IrNodeId m = from; m; m = ir_node_prev(g, m)) {
        if (!need[m]) continue;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (lower_member_result(g, v, body)) need[ir_value_def_node(g, v)] = 1;
        }
    }
}

/* The operands a row or attention group kernel loads (group arguments, constants) and stores
 * (its results), each tagged with the loop of the kernel it belongs to: strides over the loop
 * nest (the leading nest_rank dims of its broadcast shape) and a step along the row. */
typedef struct GroupOps {
    uint32_t n;
    IrValueId val[MAX_OPS];
    bool store[MAX_OPS];
    uint8_t tag[MAX_OPS];
    int64_t outer[MAX_OPS][IR_MAX_RANK], step[MAX_OPS];
    LLVMValueRef ptr[MAX_OPS];
} GroupOps;

/* Adds v (pointer p) broadcast to rank orank: a load once per tag, a store once per result
 * buffer (a value exported twice is stored twice); its index, or UINT32_MAX when full. */
static uint32_t gops_add(Cg *cg, GroupOps *o, IrValueId v, LLVMValueRef p, bool store, uint8_t tag, uint32_t orank,
                         uint32_t nest_rank) {
    for (uint32_t k = 0; k < o->n && !store; k++)
        if (o->val[k] == v && !o->store[k] && o->tag[k] == tag) return k;
    if (o->n >= MAX_OPS) return UINT32_MAX;
    uint32_t k = o->n++, r;
    int64_t d[IR_MAX_RANK], st_[IR_MAX_RANK];
    lower_value_shape(cg->g, v, &r, d);
    ir_shape_broadcast_strides(r, d, orank, NULL, st_);
    o->val[k] = v;
    o->store[k] = store;
    o->tag[k] = tag;
    o->ptr[k] = p;
    for (uint32_t i = 0; i < nest_rank; i++) o->outer[k][i] = st_[i];
    o->step[k] = orank > nest_rank ? st_[orank - 1] : 0;
    return k;
}

static LLVMValueRef gops_at(Cg *cg, const GroupOps *o, uint32_t k, LLVMValueRef base, LLVMValueRef j) {
    return LLVMBuildNSWAdd(cg->b, base, LLVMBuildNSWMul(cg->b, j, ci64(cg, o->step[k]), ""), "");
}

/* Element j of every operand with this tag: loads into vals (store = false) or stores from it. */
static void gops_access(Cg *cg, const GroupOps *o, LLVMValueRef *offs, LLVMValueRef j, uint8_t tag, bool store,
                        LLVMValueRef *vals) {
    for (uint32_t k = 0; k < o->n; k++) {
        if (o->tag[k] != tag || o->store[k] != store) continue;
        LLVMValueRef at = gops_at(cg, o, k, offs[k], j);
        if (store) st(cg, cg->f32, o->ptr[k], at, vals[o->val[k]]);
        else vals[o->val[k]] = ld(cg, cg->f32, o->ptr[k], at);
    }
}

static bool row_red_op(const IrGraph *g, IrNodeId m, uint32_t rank) {
    IrOp op = ir_node_op(g, m);
    if (rank < 1) return false;
    if (op == IR_OP_SOFTMAX || op == IR_OP_LOG_SOFTMAX || op == IR_OP_LAYER_NORMALIZATION) {
        bool found;
        int64_t axis = ir_node_attr_int(g, m, "axis", &found);
        for (uint32_t i = 1; i < ir_node_num_results(g, m); i++)
            if (ir_node_result(g, m, i)) return false;
        return ir_shape_axis(found ? axis : -1, rank) == (int64_t)rank - 1;
    }
    if (op != IR_OP_REDUCE_SUM && op != IR_OP_REDUCE_MEAN && op != IR_OP_REDUCE_MAX && op != IR_OP_REDUCE_MIN) return false;
    LowerReduceShape rs;
    return !lower_reduce_shape(g, m, op, &rs) && rs.inner == 1;
}

static bool shape_is(const IrGraph *g, IrValueId v, uint32_t rank, const int64_t *dims) {
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    if (!lower_value_shape(g, v, &r, d) || r != rank) return false;
    for (uint32_t k = 0; k < r; k++)
        if (d[k] != dims[k]) return false;
    return true;
}

/* Whether group n has this form (static shapes); fills rg (rg->phase: caller frees). */
static bool row_group_scan(const IrGraph *g, IrNodeId n, RowGroup *rg) {
    memset(rg, 0, sizeof *rg);
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) != 1) return false;
    IrRegionId body = ir_node_region_at(g, n, 0);
    uint32_t nr = ir_node_num_results(g, n);
    if (nr == 0 || ir_region_num_outputs(g, body) != nr || ir_region_num_args(g, body) != ir_node_num_operands(g, n))
        return false;
    for (IrNodeId m = ir_region_first(g, body); m; m = ir_node_next(g, m)) {
        IrValueId x0 = ir_node_operand(g, m, 0), y0 = ir_node_result(g, m, 0);
        uint32_t r;
        int64_t d[IR_MAX_RANK];
        if (!x0 || !y0 || ir_node_num_regions(g, m) || !lower_value_shape(g, x0, &r, d)) return false;
        if (lower_value_dtype(g, y0) != IR_DTYPE_F32 || lower_value_dtype(g, x0) != IR_DTYPE_F32) return false;
        if (row_red_op(g, m, r)) {
            if (rg->red) return false; /* one reduction per group */
            rg->red = m;
            rg->rx = r;
            memcpy(rg->dx, d, sizeof d);
            if (!lower_value_shape(g, y0, &rg->ry, rg->dy)) return false;
        } else if (!lower_fused_member_ok(ir_node_op(g, m)) || ir_node_op(g, m) == IR_OP_WHERE || ir_node_num_results(g, m) != 1)
            return false;
    }
    if (!rg->red) return false;
    rg->len = rg->dx[rg->rx - 1];
    if (rg->len < 1 || rg->len > LLVM_ROW_GROUP_MAX_LEN || (rg->ry != rg->rx && rg->ry + 1 != rg->rx)) return false;
    for (uint32_t k = 0; k + 1 < rg->rx; k++)
        if (rg->dy[k] != rg->dx[k]) return false;
    rg->phase = calloc(ir_graph_node_capacity(g) + 1, 1);
    if (!rg->phase) return false;
    /* after R: members using R's or another such member's result; before R: the rest, each of
     * which must feed R (walking back from R) */
    IrValueId rout = ir_node_result(g, rg->red, 0);
    rg->phase[rg->red] = 3;
    for (IrNodeId m = ir_node_next(g, rg->red); m; m = ir_node_next(g, m))
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (v && (v == rout || (lower_member_result(g, v, body) && rg->phase[ir_value_def_node(g, v)] == 2))) rg->phase[m] = 2;
        }
    uint8_t *need = calloc(ir_graph_node_capacity(g) + 1, 1);
    if (!need) return false;
    need[rg->red] = 1;
    mark_feeders(g, body, need, rg->red);
    bool ok = true;
    for (IrNodeId m = ir_region_first(g, body); m && ok; m = ir_node_next(g, m)) {
        if (m == rg->red) continue;
        if (!rg->phase[m]) rg->phase[m] = need[m] ? 1 : 0;
        if (!rg->phase[m] || (rg->phase[m] == 2 && need[m])) ok = false;
    }
    free(need);
    /* operands: group arguments, constants, or members of the same phase (R's result after R);
     * shapes: members before R have X's shape, members after R have Y's, operands broadcast */
    for (IrNodeId m = ir_region_first(g, body); m && ok; m = ir_node_next(g, m)) {
        uint8_t ph = rg->phase[m];
        for (uint32_t i = 0; i < ir_node_num_operands(g, m) && ok; i++) {
            IrValueId v = ir_node_operand(g, m, i);
            uint32_t r;
            int64_t d[IR_MAX_RANK];
            if (!v) continue;
            bool member = lower_member_result(g, v, body);
            if (!member && !lower_in_region(g, v, body) && ir_value_kind(g, v) != IR_VALUE_CONST) ok = false;
            else if (member && ph != 3 && rg->phase[ir_value_def_node(g, v)] != ph && !(ph == 2 && v == rout)) ok = false;
            else if (ph == 3 && i > 0) /* LayerNorm scale and bias: one value per row element */
                ok = ir_node_op(g, m) != IR_OP_LAYER_NORMALIZATION ||
                     (!member && lower_value_dtype(g, v) == IR_DTYPE_F32 && lower_value_shape(g, v, &r, d) && ir_shape_numel(r, d) == rg->len);
            else if (ph != 3)
                ok = lower_value_dtype(g, v) == IR_DTYPE_F32 && lower_value_shape(g, v, &r, d) &&
                     lower_bcast_to(r, d, ph == 1 ? rg->rx : rg->ry, ph == 1 ? rg->dx : rg->dy);
        }
        if (ok && ph == 1) ok = shape_is(g, ir_node_result(g, m, 0), rg->rx, rg->dx);
        if (ok && ph == 2) ok = shape_is(g, ir_node_result(g, m, 0), rg->ry, rg->dy);
    }
    if (ok && ir_node_op(g, rg->red) == IR_OP_LAYER_NORMALIZATION)
        ok = ir_node_num_operands(g, rg->red) >= 2 && ir_node_operand(g, rg->red, 1);
    uint32_t ops = 0;
    for (uint32_t i = 0; i < nr && ok; i++) {
        IrValueId o = ir_region_output(g, body, i);
        ok = lower_member_result(g, o, body) &&
             shape_is(g, ir_node_result(g, n, i), rg->phase[ir_value_def_node(g, o)] == 1 ? rg->rx : rg->ry,
                      rg->phase[ir_value_def_node(g, o)] == 1 ? rg->dx : rg->dy);
        ops++;
    }
    for (IrNodeId m = ir_region_first(g, body); m; m = ir_node_next(g, m)) ops += ir_node_num_operands(g, m);
    return ok && ops + 2 <= MAX_OPS;
}

bool llvm_fused_row_group(const IrGraph *g, IrNodeId n) {
    RowGroup rg;
    bool ok = row_group_scan(g, n, &rg);
    free(rg.phase);
    return ok;
}

typedef struct RowGroupCtx {
    RowGroup rg;
    IrRegionId body;
    GroupOps ops;               /* tag 1: the loop before R, 2: after */
    LLVMValueRef *vals, xb, yb;
    RowCtx rc;
} RowGroupCtx;

static void row_group_op(Cg *cg, RowGroupCtx *c, IrValueId v, LLVMValueRef p, bool store, uint8_t phase) {
    (void)gops_add(cg, &c->ops, v, p, store, phase, phase == 1 ? c->rg.rx : c->rg.ry, c->rg.rx - 1); /* fits: scan counted */
}

static void row_group_phase(Cg *cg, RowGroupCtx *c, LLVMValueRef *o, uint8_t phase) {
    const IrGraph *g = cg->g;
    bool reduce = c->rg.ry != c->rg.rx || c->rg.dy[c->rg.ry - 1] != c->rg.len;
    int64_t n = phase == 2 && reduce ? 1 : c->rg.len;
    Loop l;
    LLVMValueRef j = ci64(cg, 0);
    if (n > 1) {
        loop_begin(cg, &l, n);
        j = l.iv;
    }
    gops_access(cg, &c->ops, o, j, phase, false, c->vals);
    if (phase == 2) c->vals[ir_node_result(g, c->rg.red, 0)] = ld(cg, cg->f32, c->yb, j);
    for (IrNodeId m = ir_region_first(g, c->body); m; m = ir_node_next(g, m))
        if (c->rg.phase[m] == phase) member_value(cg, m, c->vals);
    if (phase == 1) st(cg, cg->f32, c->xb, j, c->vals[ir_node_operand(g, c->rg.red, 0)]);
    gops_access(cg, &c->ops, o, j, phase, true, c->vals);
    if (n > 1) loop_end(cg, &l);
}

static void row_group_body(Cg *cg, LLVMValueRef *o, void *user) {
    RowGroupCtx *c = user;
    row_group_phase(cg, c, o, 1);
    LLVMValueRef zero[2] = {ci64(cg, 0), ci64(cg, 0)};
    row_body(cg, zero, &c->rc);
    row_group_phase(cg, c, o, 2);
}

static IrStatus gen_row_group(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    RowGroupCtx c = {.body = ir_node_region_at(g, n, 0)};
    if (!row_group_scan(g, n, &c.rg)) {
        free(c.rg.phase);
        return unsupported(cg, "group with these members or shapes");
    }
    c.vals = calloc(ir_graph_num_values(g) + 1, sizeof *c.vals);
    if (!c.vals) {
        free(c.rg.phase);
        return IR_ENOMEM;
    }
    cg->group = n;
    IrNodeId red = c.rg.red;
    IrValueId rin = ir_node_operand(g, red, 0);
    /* loads: operands of the members of each phase that are not members (R's input too when
     * it comes straight from outside) */
    for (IrNodeId m = ir_region_first(g, c.body); m; m = ir_node_next(g, m)) {
        if (m == red) continue;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (v && !lower_member_result(g, v, c.body)) row_group_op(cg, &c, v, obuf(cg, v), false, c.rg.phase[m]);
        }
    }
    if (!lower_member_result(g, rin, c.body)) row_group_op(cg, &c, rin, obuf(cg, rin), false, 1);
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId o = ir_region_output(g, c.body, i), res = ir_node_result(g, n, i);
        if (!res) continue;
        IrNodeId def = ir_value_def_node(g, o);
        row_group_op(cg, &c, o, buf(cg, res), true, c.rg.phase[def] == 1 ? 1 : 2);
    }
    c.xb = LLVMBuildArrayAlloca(cg->ab, cg->f32, ci64(cg, c.rg.len), "");
    c.yb = LLVMBuildArrayAlloca(cg->ab, cg->f32, ci64(cg, c.rg.len), "");
    IrOp op = ir_node_op(g, red);
    bool found;
    c.rc = (RowCtx){.op = op, .x = c.xb, .y = c.yb, .len = c.rg.len, .step = 1};
    if (op == IR_OP_LAYER_NORMALIZATION) {
        c.rc.eps = ir_node_attr_float(g, red, "epsilon", &found);
        c.rc.scale = obuf(cg, ir_node_operand(g, red, 1));
        if (ir_node_num_operands(g, red) > 2 && ir_node_operand(g, red, 2)) c.rc.bias = obuf(cg, ir_node_operand(g, red, 2));
    }
    emit_nest(cg, c.rg.rx - 1, c.rg.dx, c.ops.n, c.ops.outer, NULL, row_group_body, &c);
    cg->group = 0;
    free(c.vals);
    free(c.rg.phase);
    return IR_OK;
}

/* ---- fused attention groups -------------------------------------------------------------------
 * An `irtool.fused` group MatMul(Q', K^T) -> [elementwise on the scores] -> Softmax (last axis)
 * -> MatMul(P, V), with elementwise members computing Q' from Q (a scale), becomes one kernel:
 * per batch and query row, Q's row is evaluated into a stack buffer, the row of scores is
 * accumulated over d (contiguous rows of K^T), the score members and the Softmax run on it as
 * row_body does, and the output row is accumulated over the keys (contiguous rows of V). The
 * scores and probabilities are never stored. K^T and V come from outside the group with the
 * scores' batch dims; or K^T is a member Transpose of keys K [.., Sk, d] from outside (fuse's
 * attention-kt: a decode step's cache), and each score is then a dot product over a row of K,
 * so no transposed copy of the cache is made. */
#define ATTN_MAX_LEN 65536
/* Q's row is held in registers (the d terms unrolled) up to this head size */
#define ATTN_UNROLL_D 128

typedef struct AttnGroup {
    IrNodeId mm1, sm, mm2;
    IrNodeId kt_t;                    /* the member Transpose making K^T from K, or 0 */
    uint32_t r;                       /* rank of the scores [..., Sq, Sk] */
    int64_t ds[IR_MAX_RANK], dq[IR_MAX_RANK], dout[IR_MAX_RANK];
    int64_t sq, sk, d, dv;
    uint8_t *phase;                   /* by node id: 1 on Q's side, 2 on the scores */
} AttnGroup;

static bool attn_outer_operand(const IrGraph *g, IrValueId v, IrRegionId body) {
    return v && (ir_value_kind(g, v) == IR_VALUE_CONST || (lower_in_region(g, v, body) && !lower_member_result(g, v, body)));
}

static bool attn_scan(const IrGraph *g, IrNodeId n, AttnGroup *a) {
    memset(a, 0, sizeof *a);
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) != 1 || ir_node_num_results(g, n) != 1) return false;
    IrRegionId body = ir_node_region_at(g, n, 0);
    if (ir_region_num_outputs(g, body) != 1 || ir_region_num_args(g, body) != ir_node_num_operands(g, n)) return false;
    IrValueId out = ir_region_output(g, body, 0);
    if (!lower_member_result(g, out, body)) return false;
    a->mm2 = ir_value_def_node(g, out);
    if (ir_node_op(g, a->mm2) != IR_OP_MAT_MUL) return false;
    IrValueId p = ir_node_operand(g, a->mm2, 0);
    if (!lower_member_result(g, p, body)) return false;
    a->sm = ir_value_def_node(g, p);
    uint32_t r, rq, rk, rv, ro;
    int64_t dk[IR_MAX_RANK], dvv[IR_MAX_RANK];
    if (ir_node_op(g, a->sm) != IR_OP_SOFTMAX || !lower_value_shape(g, p, &r, a->ds) || r < 2 || !row_red_op(g, a->sm, r)) return false;
    a->r = r;
    a->sq = a->ds[r - 2];
    a->sk = a->ds[r - 1];
    /* walk back from the Softmax's input through the score members to the first MatMul */
    a->phase = calloc(ir_graph_node_capacity(g) + 1, 1);
    if (!a->phase) return false;
    IrValueId s = ir_node_operand(g, a->sm, 0);
    while (lower_member_result(g, s, body)) {
        IrNodeId m = ir_value_def_node(g, s);
        if (ir_node_op(g, m) == IR_OP_MAT_MUL) {
            a->mm1 = m;
            break;
        }
        a->phase[m] = 2;
        s = ir_node_operand(g, m, 0); /* the chain runs through operand 0 */
    }
    if (!a->mm1) return false;
    IrValueId q = ir_node_operand(g, a->mm1, 0), kt = ir_node_operand(g, a->mm1, 1), v = ir_node_operand(g, a->mm2, 1);
    IrValueId k_src = kt; /* what the kernel reads: K^T, or K under the member Transpose */
    if (lower_member_result(g, kt, body)) {
        a->kt_t = ir_value_def_node(g, kt);
        IrAttrValue pm;
        if (ir_node_op(g, a->kt_t) != IR_OP_TRANSPOSE || !ir_node_attr(g, a->kt_t, "perm", &pm) || pm.kind != IR_ATTR_INTS ||
            pm.count != r)
            return false;
        for (uint32_t i = 0; i < r; i++)
            if (pm.ints[i] != (i + 2 < r ? (int64_t)i : i + 2 == r ? (int64_t)r - 1 : (int64_t)r - 2)) return false;
        k_src = ir_node_operand(g, a->kt_t, 0);
    }
    if (!lower_value_shape(g, q, &rq, a->dq) || !lower_value_shape(g, kt, &rk, dk) || !lower_value_shape(g, v, &rv, dvv) ||
        !lower_value_shape(g, out, &ro, a->dout) || rq != r || rk != r || rv != r || ro != r)
        return false;
    a->d = a->dq[r - 1];
    a->dv = dvv[r - 1];
    for (uint32_t k = 0; k + 2 < r; k++)
        if (a->dq[k] != a->ds[k] || dk[k] != a->ds[k] || dvv[k] != a->ds[k]) return false;
    if (a->dq[r - 2] != a->sq || dk[r - 2] != a->d || dk[r - 1] != a->sk || dvv[r - 2] != a->sk || a->dout[r - 2] != a->sq ||
        a->dout[r - 1] != a->dv)
        return false;
    if (!attn_outer_operand(g, k_src, body) || !attn_outer_operand(g, v, body)) return false;
    if (a->sk > ATTN_MAX_LEN || a->d > ATTN_MAX_LEN || a->dv > ATTN_MAX_LEN) return false;
    if (a->kt_t && a->d > ATTN_UNROLL_D) return false;
    /* Q's side: the members computing MatMul1's operand 0 */
    uint8_t *need = calloc(ir_graph_node_capacity(g) + 1, 1);
    if (!need) return false;
    if (lower_member_result(g, q, body)) need[ir_value_def_node(g, q)] = 1;
    mark_feeders(g, body, need, a->mm1);
    bool ok = true;
    for (IrNodeId m = ir_region_first(g, body); m && ok; m = ir_node_next(g, m)) {
        if (m == a->mm1 || m == a->sm || m == a->mm2 || m == a->kt_t) continue;
        if (need[m]) a->phase[m] = 1;
        uint8_t ph = a->phase[m];
        IrOp op = ir_node_op(g, m);
        if (!ph || !lower_fused_member_ok(op) || op == IR_OP_WHERE || ir_node_num_results(g, m) != 1) ok = false;
        const int64_t *od = ph == 1 ? a->dq : a->ds;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m) && ok; i++) {
            IrValueId o = ir_node_operand(g, m, i);
            uint32_t orr;
            int64_t odd[IR_MAX_RANK];
            if (!o) continue;
            bool member = lower_member_result(g, o, body);
            if (member) ok = o == ir_node_result(g, a->mm1, 0) ? ph == 2 : a->phase[ir_value_def_node(g, o)] == ph;
            else ok = attn_outer_operand(g, o, body);
            ok = ok && lower_value_dtype(g, o) == IR_DTYPE_F32 && lower_value_shape(g, o, &orr, odd) && lower_bcast_to(orr, odd, r, od);
        }
        if (ok) ok = shape_is(g, ir_node_result(g, m, 0), r, od) && lower_value_dtype(g, ir_node_result(g, m, 0)) == IR_DTYPE_F32;
    }
    free(need);
    for (int i = 0; i < 4 && ok; i++) {
        IrNodeId m = i == 0 ? a->mm1 : i == 1 ? a->sm : i == 2 ? a->mm2 : a->kt_t;
        if (!m) continue;
        for (uint32_t k = 0; k < ir_node_num_operands(g, m) && ok; k++)
            ok = lower_value_dtype(g, ir_node_operand(g, m, k)) == IR_DTYPE_F32;
    }
    return ok;
}

bool llvm_fused_attention_group(const IrGraph *g, IrNodeId n) {
    AttnGroup a;
    bool ok = attn_scan(g, n, &a);
    free(a.phase);
    return ok;
}

typedef struct AttnCtx {
    AttnGroup a;
    IrRegionId body;
    GroupOps ops; /* tag 1: Q's side (along d), 2: scores (along Sk), 3: K^T, 4: V, 5: output */
    LLVMValueRef *vals, qb, sb, xb, pb, ob;
} AttnCtx;

static bool attn_op(Cg *cg, AttnCtx *c, IrValueId v, LLVMValueRef p, uint8_t tag) {
    uint32_t R = c->a.r, k = gops_add(cg, &c->ops, v, p, tag == 5, tag, R, R - 1);
    if (k == UINT32_MAX) return false;
    if (tag == 3 || tag == 4) c->ops.outer[k][R - 2] = 0; /* K^T and V do not move with the query row */
    return true;
}

static uint32_t attn_find(const AttnCtx *c, uint8_t tag) {
    for (uint32_t k = 0; k < c->ops.n; k++)
        if (c->ops.tag[k] == tag) return k;
    return 0;
}

/* Elementwise members of one phase at element j: their loads, then the members in order. */
static void attn_members(Cg *cg, AttnCtx *c, LLVMValueRef *o, LLVMValueRef j, uint8_t phase) {
    const IrGraph *g = cg->g;
    gops_access(cg, &c->ops, o, j, phase, false, c->vals);
    for (IrNodeId m = ir_region_first(g, c->body); m; m = ir_node_next(g, m))
        if (c->a.phase[m] == phase) member_value(cg, m, c->vals);
}

/* dst[0 .. n) = sum over i < len of src[i] * mat[base + i * n + 0 .. n): a row times a dense
 * matrix, accumulated along contiguous rows of the matrix (Q times K^T, P times V). */
static void row_times_matrix(Cg *cg, LLVMValueRef dst, int64_t n, LLVMValueRef src, int64_t len, LLVMValueRef mat,
                             LLVMValueRef base) {
    LLVMBuilderRef b = cg->b;
    Loop l, lj;
    if (n <= 64 && len >= 1) {
        /* a narrow matrix (an attention head's V, dv <= 64): the output row is held in vector
         * accumulators in registers, one multiply-add of kr matrix rows per step (kr > 1 when a
         * row is narrower than 16 floats: kr consecutive rows fill one vector, their kr weights
         * spread over it, the kr segments summed at the end); 8 accumulators take turns (steps
         * 8i + u) so the additions do not wait on each other, summed at the end */
        int64_t kr = n < 16 && 16 % n == 0 && len % (16 / n) == 0 ? 16 / n : 1, w = n * kr, steps = len / kr;
        LLVMTypeRef vt = LLVMVectorType(cg->f32, (unsigned)w), pt = LLVMVectorType(cg->f32, (unsigned)kr);
        LLVMValueRef zero = LLVMConstNull(vt), acc[8], phi[8], spread[64];
        for (int64_t e = 0; e < w; e++) spread[e] = LLVMConstInt(cg->i32, (unsigned long long)(e / n), 0);
        int u_n = steps >= 16 ? 8 : 1;
        int64_t blocks = steps / u_n, rest = steps - blocks * u_n;
        LLVMTypeRef ft[1] = {vt};
        unsigned fma_id = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
        LLVMValueRef fma = LLVMGetIntrinsicDeclaration(cg->mod, fma_id, ft, 1);
        LLVMTypeRef fma_t = LLVMIntrinsicGetType(cg->ctx, fma_id, ft, 1);
        for (int u = 0; u < u_n; u++) acc[u] = zero;
        for (int pass = 0; pass < 2; pass++) {
            int64_t trips = pass == 0 ? blocks : rest, k = pass == 0 ? u_n : 1, first = pass == 0 ? 0 : blocks * u_n;
            if (trips == 0) continue;
            LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
            loop_begin(cg, &l, trips);
            for (int u = 0; u < k; u++) {
                phi[u] = LLVMBuildPhi(b, vt, "");
                LLVMAddIncoming(phi[u], &acc[u], &pre, 1);
            }
            for (int u = 0; u < k; u++) {
                LLVMValueRef step = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, l.iv, ci64(cg, k), ""), ci64(cg, first + u), "");
                LLVMValueRef key = LLVMBuildNSWMul(b, step, ci64(cg, kr), ""), xv;
                if (kr > 1) {
                    LLVMValueRef pv = LLVMBuildLoad2(b, pt, elem_ptr(cg, cg->f32, src, key), "");
                    LLVMSetAlignment(pv, 4);
                    xv = LLVMBuildShuffleVector(b, pv, LLVMGetPoison(pt), LLVMConstVector(spread, (unsigned)w), "");
                } else {
                    xv = LLVMBuildInsertElement(b, LLVMGetPoison(vt), ld(cg, cg->f32, src, key), LLVMConstInt(cg->i32, 0, 0), "");
                    xv = LLVMBuildShuffleVector(b, xv, LLVMGetPoison(vt), LLVMConstNull(LLVMVectorType(cg->i32, (unsigned)w)), "");
                }
                LLVMValueRef row = LLVMBuildNSWAdd(b, base, LLVMBuildNSWMul(b, key, ci64(cg, n), ""), "");
                LLVMValueRef mv = LLVMBuildLoad2(b, vt, elem_ptr(cg, cg->f32, mat, row), "");
                LLVMSetAlignment(mv, 4);
                LLVMValueRef args[3] = {xv, mv, phi[u]};
                acc[u] = LLVMBuildCall2(b, fma_t, fma, args, 3, "");
            }
            LLVMBasicBlockRef cur = LLVMGetInsertBlock(b);
            for (int u = 0; u < k; u++) LLVMAddIncoming(phi[u], &acc[u], &cur, 1);
            loop_end(cg, &l);
        }
        for (int h = u_n; h > 1; h /= 2)
            for (int u = 0; u < h / 2; u++) acc[u] = LLVMBuildFAdd(b, acc[u], acc[u + h / 2], "");
        LLVMValueRef r = acc[0];
        if (kr > 1) { /* the kr segments of n lanes */
            LLVMValueRef seg[16], sum = NULL;
            for (int64_t sg = 0; sg < kr; sg++) {
                for (int64_t e = 0; e < n; e++) seg[e] = LLVMConstInt(cg->i32, (unsigned long long)(sg * n + e), 0);
                LLVMValueRef part = LLVMBuildShuffleVector(b, r, LLVMGetPoison(vt), LLVMConstVector(seg, (unsigned)n), "");
                sum = sum ? LLVMBuildFAdd(b, sum, part, "") : part;
            }
            r = sum;
        }
        LLVMSetAlignment(LLVMBuildStore(b, r, dst), 4);
        return;
    }
    loop_begin(cg, &lj, n);
    st(cg, cg->f32, dst, lj.iv, cf32(cg, 0.0));
    loop_end(cg, &lj);
    loop_begin(cg, &l, len);
    LLVMValueRef x = ld(cg, cg->f32, src, l.iv), row = LLVMBuildNSWAdd(b, base, LLVMBuildNSWMul(b, l.iv, ci64(cg, n), ""), "");
    loop_begin(cg, &lj, n);
    LLVMValueRef prod = LLVMBuildFMul(b, x, ld(cg, cg->f32, mat, LLVMBuildNSWAdd(b, row, lj.iv, "")), "");
    st(cg, cg->f32, dst, lj.iv, LLVMBuildFAdd(b, ld(cg, cg->f32, dst, lj.iv), prod, ""));
    loop_end(cg, &lj);
    loop_end(cg, &l);
}

/* One query row in three passes over the keys: (1) each score (Q's row times a column of K^T,
 * the d terms unrolled when d <= ATTN_UNROLL_D, so the loop over keys vectorizes; else Q times
 * K^T a row of K^T at a time first), its members, the row maximum; (2) e = exp(x - max) and
 * their sum; (3) the output row accumulated from the unnormalized e over V's rows, then scaled
 * by 1 / sum once (Softmax's division moved past the second MatMul: the same value up to
 * rounding). */

/* Q's row (q: d / 8 vectors of 8 when d is a multiple of 8, else d scalars) times the key row at
 * k[row .. row + d): vector multiply-adds and one horizontal sum (reassociated). */
static LLVMValueRef attn_key_dot(Cg *cg, LLVMValueRef *q, int64_t d, LLVMValueRef k, LLVMValueRef row) {
    LLVMBuilderRef b = cg->b;
    if (d % 8) {
        LLVMValueRef sc = NULL;
        for (int64_t t = 0; t < d; t++) {
            LLVMValueRef prod = LLVMBuildFMul(b, q[t], ld(cg, cg->f32, k, LLVMBuildNSWAdd(b, row, ci64(cg, t), "")), "");
            sc = sc ? LLVMBuildFAdd(b, sc, prod, "") : prod;
            LLVMSetFastMathFlags(sc, LLVMFastMathAllowReassoc);
        }
        return sc;
    }
    LLVMTypeRef vt = LLVMVectorType(cg->f32, 8), ft[1] = {vt};
    unsigned fma_id = LLVMLookupIntrinsicID("llvm.fmuladd", 12), red_id = LLVMLookupIntrinsicID("llvm.vector.reduce.fadd", 23);
    LLVMValueRef fma = LLVMGetIntrinsicDeclaration(cg->mod, fma_id, ft, 1), red = LLVMGetIntrinsicDeclaration(cg->mod, red_id, ft, 1);
    LLVMValueRef acc = NULL;
    for (int64_t t = 0; t < d / 8; t++) {
        LLVMValueRef kv = LLVMBuildLoad2(b, vt, elem_ptr(cg, cg->f32, k, LLVMBuildNSWAdd(b, row, ci64(cg, 8 * t), "")), "");
        LLVMSetAlignment(kv, 4);
        if (!acc) acc = LLVMBuildFMul(b, q[t], kv, "");
        else acc = LLVMBuildCall2(b, LLVMIntrinsicGetType(cg->ctx, fma_id, ft, 1), fma, (LLVMValueRef[]){q[t], kv, acc}, 3, "");
    }
    LLVMValueRef sc = LLVMBuildCall2(b, LLVMIntrinsicGetType(cg->ctx, red_id, ft, 1), red, (LLVMValueRef[]){cf32(cg, -0.0), acc}, 2, "");
    LLVMSetFastMathFlags(sc, LLVMFastMathAllowReassoc);
    return sc;
}

static void attn_body(Cg *cg, LLVMValueRef *o, void *user) {
    AttnCtx *c = user;
    const IrGraph *g = cg->g;
    LLVMBuilderRef b = cg->b;
    const AttnGroup *a = &c->a;
    Loop l, lj;
    /* Q's row, through the members on Q's side */
    loop_begin(cg, &l, a->d);
    attn_members(cg, c, o, l.iv, 1);
    st(cg, cg->f32, c->qb, l.iv, c->vals[ir_node_operand(g, a->mm1, 0)]);
    loop_end(cg, &l);
    uint32_t kk = attn_find(c, 3), kv = attn_find(c, 4), ko = attn_find(c, 5);
    bool unroll = a->d <= ATTN_UNROLL_D;
    LLVMValueRef q[ATTN_UNROLL_D];
    if (a->kt_t && a->d % 8 == 0) { /* Q's row as vectors of 8 for the dot products with K's rows */
        LLVMTypeRef vt = LLVMVectorType(cg->f32, 8);
        for (int64_t t = 0; t < a->d / 8; t++) {
            q[t] = LLVMBuildLoad2(b, vt, elem_ptr(cg, cg->f32, c->qb, ci64(cg, 8 * t)), "");
            LLVMSetAlignment(q[t], 4);
        }
    } else if (unroll)
        for (int64_t t = 0; t < a->d; t++) q[t] = ld(cg, cg->f32, c->qb, ci64(cg, t));
    else row_times_matrix(cg, c->sb, a->sk, c->qb, a->d, c->ops.ptr[kk], o[kk]); /* the scores */
    LLVMValueRef mx = var_f32(cg, -INFINITY), sum = var_f32(cg, 0.0);
    loop_begin(cg, &lj, a->sk);
    LLVMValueRef sc;
    if (a->kt_t) {
        sc = attn_key_dot(cg, q, a->d, c->ops.ptr[kk], LLVMBuildNSWAdd(b, o[kk], LLVMBuildNSWMul(b, lj.iv, ci64(cg, a->d), ""), ""));
    } else if (unroll) {
        sc = NULL;
        for (int64_t t = 0; t < a->d; t++) {
            LLVMValueRef off = LLVMBuildNSWAdd(b, o[kk], LLVMBuildNSWAdd(b, ci64(cg, t * a->sk), lj.iv, ""), "");
            LLVMValueRef prod = LLVMBuildFMul(b, q[t], ld(cg, cg->f32, c->ops.ptr[kk], off), "");
            sc = sc ? LLVMBuildFAdd(b, sc, prod, "") : prod;
        }
    } else sc = ld(cg, cg->f32, c->sb, lj.iv);
    c->vals[ir_node_result(g, a->mm1, 0)] = sc;
    attn_members(cg, c, o, lj.iv, 2);
    LLVMValueRef x = c->vals[ir_node_operand(g, a->sm, 0)];
    st(cg, cg->f32, c->xb, lj.iv, x);
    LLVMBuildStore(b, intrinsic(cg, "llvm.maximum", (LLVMValueRef[]){LLVMBuildLoad2(b, cg->f32, mx, ""), x}, 2), mx);
    loop_end(cg, &lj);
    LLVMValueRef m = LLVMBuildLoad2(b, cg->f32, mx, "");
    loop_begin(cg, &lj, a->sk);
    LLVMValueRef ex = llvm_exp_f32(b, LLVMBuildFSub(b, ld(cg, cg->f32, c->xb, lj.iv), m, ""));
    st(cg, cg->f32, c->pb, lj.iv, ex);
    LLVMValueRef acc = LLVMBuildFAdd(b, LLVMBuildLoad2(b, cg->f32, sum, ""), ex, "");
    LLVMSetFastMathFlags(acc, LLVMFastMathAllowReassoc);
    LLVMBuildStore(b, acc, sum);
    loop_end(cg, &lj);
    LLVMValueRef inv = LLVMBuildFDiv(b, cf32(cg, 1.0), LLVMBuildLoad2(b, cg->f32, sum, ""), "");
    row_times_matrix(cg, c->ob, a->dv, c->pb, a->sk, c->ops.ptr[kv], o[kv]); /* the output row */
    loop_begin(cg, &l, a->dv);
    st(cg, cg->f32, c->ops.ptr[ko], gops_at(cg, &c->ops, ko, o[ko], l.iv), LLVMBuildFMul(b, ld(cg, cg->f32, c->ob, l.iv), inv, ""));
    loop_end(cg, &l);
}

static IrStatus gen_attention_group(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    AttnCtx c = {.body = ir_node_region_at(g, n, 0)};
    if (!attn_scan(g, n, &c.a)) {
        free(c.a.phase);
        return unsupported(cg, "group with these members or shapes");
    }
    c.vals = calloc(ir_graph_num_values(g) + 1, sizeof *c.vals);
    if (!c.vals) {
        free(c.a.phase);
        return IR_ENOMEM;
    }
    cg->group = n;
    const AttnGroup *a = &c.a;
    bool ok = true;
    for (IrNodeId m = ir_region_first(g, c.body); m && ok; m = ir_node_next(g, m)) {
        if (!a->phase[m]) continue;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m) && ok; i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (v && !lower_member_result(g, v, c.body)) ok = attn_op(cg, &c, v, obuf(cg, v), a->phase[m]);
        }
    }
    IrValueId q = ir_node_operand(g, a->mm1, 0);
    if (ok && !lower_member_result(g, q, c.body)) ok = attn_op(cg, &c, q, obuf(cg, q), 1);
    IrValueId kt = a->kt_t ? ir_node_operand(g, a->kt_t, 0) : ir_node_operand(g, a->mm1, 1), v = ir_node_operand(g, a->mm2, 1);
    if (ok) ok = attn_op(cg, &c, kt, obuf(cg, kt), 3) && attn_op(cg, &c, v, obuf(cg, v), 4);
    if (ok) ok = attn_op(cg, &c, ir_region_output(g, c.body, 0), buf(cg, ir_node_result(g, n, 0)), 5);
    if (!ok) {
        cg->group = 0;
        free(c.vals);
        free(c.a.phase);
        return unsupported(cg, "group with this many operands");
    }
    c.qb = LLVMBuildArrayAlloca(cg->ab, cg->f32, ci64(cg, a->d), "");
    c.sb = LLVMBuildArrayAlloca(cg->ab, cg->f32, ci64(cg, a->sk), "");
    c.xb = LLVMBuildArrayAlloca(cg->ab, cg->f32, ci64(cg, a->sk), "");
    c.pb = LLVMBuildArrayAlloca(cg->ab, cg->f32, ci64(cg, a->sk), "");
    c.ob = LLVMBuildArrayAlloca(cg->ab, cg->f32, ci64(cg, a->dv), "");
    emit_nest(cg, a->r - 1, a->ds, c.ops.n, c.ops.outer, NULL, attn_body, &c);
    cg->group = 0;
    free(c.vals);
    free(c.a.phase);
    return IR_OK;
}

/* ---- contractions ------------------------------------------------------------------------- */

/* Contractions (Conv, Gemm, MatMul) call the BLAS GEMM and apply their epilogue while the output
 * tile is hot: the GEMM is issued per block of output rows (at most EPI_BLOCK_BYTES of output,
 * so the block is still in L2), and right after each call one loop nest over that block adds
 * the bias and evaluates the members of an `irtool.fused` epilogue group (activation, residual
 * Add, ...; BatchNorm was folded into the Conv's weights by the fuse pass), then stores once. */
#define EPI_BLOCK_BYTES (512 << 10)

typedef struct Epi {
    IrRegionId body;    /* members after the anchor (0: none) */
    IrNodeId anchor;
    uint32_t n_members;
    uint32_t orank;
    int64_t od[IR_MAX_RANK];
    uint32_t n_ops;     /* [0] the output, then the bias (if bias_op), then the members' loads */
    int64_t strides[MAX_OPS][IR_MAX_RANK];
    LLVMValueRef ptr[MAX_OPS];
    IrValueId load_v[MAX_OPS];
    uint32_t bias_op;   /* index of the bias operand, 0 for none */
    double bias_scale;  /* Gemm's beta; 1 for Conv */
    LLVMValueRef *vals; /* by value id, per point */
} Epi;

static bool is_contraction(IrOp op) { return op == IR_OP_CONV || op == IR_OP_GEMM || op == IR_OP_MAT_MUL; }

/* A group the backend compiles as one contraction kernel: the body is a contraction followed
 * by a chain of supported f32 elementwise members, each using the previous one's result (the
 * other operands come from outside: the group's arguments or graph constants), and the group's
 * only result is the last member's. With need_static, also that every member has the anchor's
 * output shape and every other operand broadcasts to it. */
bool llvm_fused_epilogue_group(const IrGraph *g, IrNodeId n, bool need_static) {
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) != 1 || ir_node_num_results(g, n) != 1) return false;
    IrRegionId body = ir_node_region_at(g, n, 0);
    if (ir_region_num_outputs(g, body) != 1 || ir_region_num_args(g, body) != ir_node_num_operands(g, n)) return false;
    IrNodeId a = ir_region_first(g, body);
    if (!a || !is_contraction(ir_node_op(g, a)) || ir_node_num_results(g, a) != 1 || ir_node_num_regions(g, a)) return false;
    uint32_t orank = 0, r, loads = 0;
    int64_t od[IR_MAX_RANK], d[IR_MAX_RANK];
    IrValueId cur = ir_node_result(g, a, 0);
    if (!cur || ir_type_dtype(g, ir_value_type(g, cur)) != IR_DTYPE_F32) return false;
    if (need_static && !lower_value_shape(g, cur, &orank, od)) return false;
    for (uint32_t i = 0; i < ir_node_num_operands(g, a); i++) {
        IrValueId v = ir_node_operand(g, a, i);
        if (v && !lower_in_region(g, v, body) && ir_value_kind(g, v) != IR_VALUE_CONST) return false;
        if (v && ir_value_kind(g, v) == IR_VALUE_RESULT) return false;
    }
    for (IrNodeId m = ir_node_next(g, a); m; m = ir_node_next(g, m)) {
        IrOp op = ir_node_op(g, m);
        if (!lower_fused_member_ok(op) || op == IR_OP_WHERE || ir_node_num_results(g, m) != 1 || ir_node_num_regions(g, m))
            return false;
        bool uses_cur = false;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (!v) continue;
            if (v == cur) {
                uses_cur = true;
                continue;
            }
            if (ir_value_kind(g, v) == IR_VALUE_RESULT || (!lower_in_region(g, v, body) && ir_value_kind(g, v) != IR_VALUE_CONST))
                return false;
            if (ir_type_dtype(g, ir_value_type(g, v)) != IR_DTYPE_F32) return false;
            if (need_static && (!lower_value_shape(g, v, &r, d) || !lower_bcast_to(r, d, orank, od))) return false;
            loads++;
        }
        cur = ir_node_result(g, m, 0);
        if (!uses_cur || !cur || ir_type_dtype(g, ir_value_type(g, cur)) != IR_DTYPE_F32) return false;
        if (need_static) {
            if (!lower_value_shape(g, cur, &r, d) || r != orank) return false;
            for (uint32_t k = 0; k < r; k++)
                if (d[k] != od[k]) return false;
        }
    }
    if (loads + 2 > MAX_OPS || ir_region_output(g, body, 0) != cur) return false;
    if (need_static) {
        if (!lower_value_shape(g, ir_node_result(g, n, 0), &r, d) || r != orank) return false;
        for (uint32_t k = 0; k < r; k++)
            if (d[k] != od[k]) return false;
    }
    return true;
}


/* The epilogue of contraction `anchor` writing ybuf: the members after it when it opens the
 * epilogue group being compiled. */
static IrStatus epi_init(Cg *cg, Epi *e, IrNodeId anchor, LLVMValueRef ybuf) {
    const IrGraph *g = cg->g;
    memset(e, 0, sizeof *e);
    e->anchor = anchor;
    lower_value_shape(g, ir_node_result(g, anchor, 0), &e->orank, e->od);
    ir_shape_strides(e->orank, e->od, e->strides[0]);
    e->ptr[0] = ybuf;
    e->n_ops = 1;
    if (!cg->group) return IR_OK;
    e->body = ir_node_region(g, anchor);
    e->vals = calloc(ir_graph_num_values(g) + 1, sizeof *e->vals);
    if (!e->vals) return IR_ENOMEM;
    for (IrNodeId m = ir_node_next(g, anchor); m; m = ir_node_next(g, m)) {
        e->n_members++;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (!v || ir_value_kind(g, v) == IR_VALUE_RESULT) continue;
            bool seen = false;
            for (uint32_t j = 1; j < e->n_ops && !seen; j++) seen = e->load_v[j] == v;
            if (seen) continue;
            uint32_t r;
            int64_t d[IR_MAX_RANK];
            lower_value_shape(g, v, &r, d);
            ir_shape_broadcast_strides(r, d, e->orank, NULL, e->strides[e->n_ops]);
            e->load_v[e->n_ops] = v;
            e->ptr[e->n_ops++] = obuf(cg, v);
        }
    }
    return IR_OK;
}

/* The bias operand v (a Gemm's C, a Conv's bias) with its strides over the output and scale
 * (Gemm's beta): added before the members, its value id kept with the loads (epi_reload). */
static void epi_bias(Cg *cg, Epi *e, IrValueId v, const int64_t *strides, double scale) {
    e->bias_op = e->n_ops;
    e->bias_scale = scale;
    memcpy(e->strides[e->n_ops], strides, sizeof e->strides[0]);
    e->load_v[e->n_ops] = v;
    e->ptr[e->n_ops++] = obuf(cg, v);
}

/* In a part function: the epilogue's buffers loaded again from the part's own bufs (the
 * result y first, then every operand) into e and, when given, flat (a view of the same). */
static void epi_reload(Cg *cg, Epi *e, Epi *flat, IrValueId y) {
    e->ptr[0] = buf(cg, y);
    for (uint32_t j = 1; j < e->n_ops; j++) e->ptr[j] = obuf(cg, e->load_v[j]);
    if (flat) memcpy(flat->ptr, e->ptr, sizeof e->ptr);
}

static bool epi_active(const Epi *e) { return e->bias_op || e->n_members; }

static void epi_body(Cg *cg, LLVMValueRef *offs, void *user) {
    Epi *e = user;
    const IrGraph *g = cg->g;
    LLVMValueRef x = ld(cg, cg->f32, e->ptr[0], offs[0]);
    if (e->bias_op) {
        LLVMValueRef t = ld(cg, cg->f32, e->ptr[e->bias_op], offs[e->bias_op]);
        if (e->bias_scale != 1.0) t = LLVMBuildFMul(cg->b, t, cf32(cg, e->bias_scale), "");
        x = LLVMBuildFAdd(cg->b, x, t, "");
    }
    if (e->n_members) {
        e->vals[ir_node_result(g, e->anchor, 0)] = x;
        for (uint32_t j = 1; j < e->n_ops; j++)
            if (j != e->bias_op) e->vals[e->load_v[j]] = ld(cg, cg->f32, e->ptr[j], offs[j]);
        for (IrNodeId m = ir_node_next(g, e->anchor); m; m = ir_node_next(g, m)) x = member_value(cg, m, e->vals);
    }
    st(cg, cg->f32, e->ptr[0], offs[0], x);
}

/* The epilogue over the box of output points start[k] .. start[k] + len[k] - 1. */
static void epi_box(Cg *cg, Epi *e, LLVMValueRef *start, const int64_t *len) {
    if (!epi_active(e) || ir_shape_numel(e->orank, len) == 0) return;
    LLVMValueRef offs[MAX_OPS];
    for (uint32_t j = 0; j < e->n_ops; j++) {
        offs[j] = ci64(cg, 0);
        for (uint32_t k = 0; k < e->orank; k++)
            if (e->strides[j][k] && start[k])
                offs[j] = LLVMBuildNSWAdd(cg->b, offs[j], LLVMBuildNSWMul(cg->b, start[k], ci64(cg, e->strides[j][k]), ""), "");
    }
    nest_rec(cg, 0, e->orank, len, e->n_ops, e->strides, offs, epi_body, e, e->orank);
}

/* Rows per GEMM call so that a block of output rows of `cols` floats stays in L2 (a multiple of
 * 16, the GEMM kernels' row unroll); all rows when there is no epilogue. */
static int64_t rows_per_block(const Epi *e, int64_t rows, int64_t cols) {
    if (!epi_active(e) || cols <= 0) return rows;
    int64_t mb = EPI_BLOCK_BYTES / (cols * 4) / 16 * 16;
    if (mb < 16) mb = 16;
    return mb < rows ? mb : rows;
}

typedef struct GemmCtx {
    LLVMValueRef a, b, c;
    int64_t m, n, k, ta, tb, lda, ldb;
    double alpha;
} GemmCtx;

static void blas_call(Cg *cg, GemmCtx *c, LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oc) {
    LLVMTypeRef ps[13] = {cg->i64, cg->i64, cg->i64, cg->i64, cg->i64, cg->f32, cg->ptr,
                          cg->i64, cg->ptr, cg->i64, cg->f32, cg->ptr, cg->i64};
    LLVMTypeRef ft = LLVMFunctionType(cg->vd, ps, 13, 0);
    LLVMValueRef args[13] = {ci64(cg, c->ta), ci64(cg, c->tb), ci64(cg, c->m), ci64(cg, c->n), ci64(cg, c->k),
                             cf32(cg, c->alpha), elem_ptr(cg, cg->f32, c->a, oa), ci64(cg, c->lda),
                             elem_ptr(cg, cg->f32, c->b, ob), ci64(cg, c->ldb), cf32(cg, 0.0),
                             elem_ptr(cg, cg->f32, c->c, oc), ci64(cg, c->n)};
    LLVMBuildCall2(cg->b, ft, table_fn(cg, IRT_FN_SGEMM), args, 13, "");
    cg->n_blas++;
}


/* GEMMs up to SMALL_GEMM multiply-adds are generated loops instead of a BLAS call: below that
 * the call and packing overhead dominate (measured on the torch models: tiny_mlp 0.008 ->
 * 0.004 ms, the encoder's 20x32x96 layers on par), and a model made only of small ones never
 * loads BLAS (cold start). Row i of C: with B not transposed, C[i,:] += A[i,p] * B[p,:]
 * (contiguous, vectorized); with B transposed, each C[i,j] is a dot product over contiguous rows (its sum
 * may be reassociated so it vectorizes; the result is scaled by alpha last, as BLAS does). */
#define SMALL_GEMM 131072

static LLVMValueRef a_at(Cg *cg, GemmCtx *c, LLVMValueRef oa, LLVMValueRef i, LLVMValueRef p) {
    LLVMBuilderRef b = cg->b;
    LLVMValueRef off = c->ta ? LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, p, ci64(cg, c->lda), ""), i, "")
                             : LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, i, ci64(cg, c->lda), ""), p, "");
    return ld(cg, cg->f32, c->a, LLVMBuildNSWAdd(b, oa, off, ""));
}

static void small_gemm(Cg *cg, GemmCtx *c, LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oc) {
    LLVMBuilderRef b = cg->b;
    Loop li, lj, lp;
    loop_begin(cg, &li, c->m);
    LLVMValueRef crow = LLVMBuildNSWAdd(b, oc, LLVMBuildNSWMul(b, li.iv, ci64(cg, c->n), ""), "");
    if (c->tb) {
        loop_begin(cg, &lj, c->n);
        LLVMValueRef acc = var_f32(cg, 0.0);
        LLVMBuildStore(b, cf32(cg, 0.0), acc);
        LLVMValueRef brow = LLVMBuildNSWAdd(b, ob, LLVMBuildNSWMul(b, lj.iv, ci64(cg, c->ldb), ""), "");
        loop_begin(cg, &lp, c->k);
        LLVMValueRef prod = LLVMBuildFMul(b, a_at(cg, c, oa, li.iv, lp.iv),
                                          ld(cg, cg->f32, c->b, LLVMBuildNSWAdd(b, brow, lp.iv, "")), "");
        LLVMValueRef sum = LLVMBuildFAdd(b, LLVMBuildLoad2(b, cg->f32, acc, ""), prod, "");
        LLVMSetFastMathFlags(sum, LLVMFastMathAllowReassoc);
        LLVMBuildStore(b, sum, acc);
        loop_end(cg, &lp);
        LLVMValueRef r = LLVMBuildLoad2(b, cg->f32, acc, "");
        if (c->alpha != 1.0) r = LLVMBuildFMul(b, r, cf32(cg, c->alpha), "");
        st(cg, cg->f32, c->c, LLVMBuildNSWAdd(b, crow, lj.iv, ""), r);
        loop_end(cg, &lj);
    } else {
        /* the row accumulates in a stack array: it aliases nothing, so the update vectorizes
         * without run-time overlap checks */
        LLVMValueRef acc = LLVMBuildArrayAlloca(cg->ab, cg->f32, ci64(cg, c->n), "");
        loop_begin(cg, &lj, c->n);
        st(cg, cg->f32, acc, lj.iv, cf32(cg, 0.0));
        loop_end(cg, &lj);
        loop_begin(cg, &lp, c->k);
        LLVMValueRef av = a_at(cg, c, oa, li.iv, lp.iv);
        LLVMValueRef brow = LLVMBuildNSWAdd(b, ob, LLVMBuildNSWMul(b, lp.iv, ci64(cg, c->ldb), ""), "");
        loop_begin(cg, &lj, c->n);
        LLVMValueRef prod = LLVMBuildFMul(b, av, ld(cg, cg->f32, c->b, LLVMBuildNSWAdd(b, brow, lj.iv, "")), "");
        st(cg, cg->f32, acc, lj.iv, LLVMBuildFAdd(b, ld(cg, cg->f32, acc, lj.iv), prod, ""));
        loop_end(cg, &lj);
        loop_end(cg, &lp);
        loop_begin(cg, &lj, c->n);
        LLVMValueRef r = ld(cg, cg->f32, acc, lj.iv);
        if (c->alpha != 1.0) r = LLVMBuildFMul(b, r, cf32(cg, c->alpha), "");
        st(cg, cg->f32, c->c, LLVMBuildNSWAdd(b, crow, lj.iv, ""), r);
        loop_end(cg, &lj);
    }
    loop_end(cg, &li);
}

/* A new function void part(void *ctx, const IrtFnTable *fns, int64_t part) beside the current
 * kernel, for irt_parallel: named after the kernel and numbered, internal. */
static LLVMValueRef part_fn_new(Cg *cg) {
    LLVMTypeRef ps[3] = {cg->ptr, cg->ptr, cg->i64};
    size_t nl;
    const char *kname = LLVMGetValueName2(cg->fn, &nl);
    char name[128];
    snprintf(name, sizeof name, "%.*s.part%u", (int)(nl < 100 ? nl : 100), kname, cg->n_part_fns++);
    LLVMValueRef fn = LLVMAddFunction(cg->mod, name, LLVMFunctionType(cg->vd, ps, 3, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    return fn;
}

/* fns->parallel(n_parts, fn, ctx, fns) at the kernel's builder. */
static void call_parallel(Cg *cg, int64_t n_parts, LLVMValueRef fn, LLVMValueRef ctx) {
    LLVMTypeRef ps[4] = {cg->i64, cg->ptr, cg->ptr, cg->ptr};
    LLVMValueRef args[4] = {ci64(cg, n_parts), fn, ctx, cg->fns};
    LLVMBuildCall2(cg->b, LLVMFunctionType(cg->vd, ps, 4, 0), table_fn(cg, IRT_FN_PARALLEL), args, 4, "");
}

/* The part rule for kernels handed to irt_parallel: parts of at least PART_WORK multiply-adds,
 * at most `units` (the kernel's own grain) and 16. A smaller kernel runs whole on the calling
 * thread (one part): waking a worker and waiting for it cost more than its share of such a
 * kernel (bench/pool_bench.c; docs/decode.md). */
#define PART_WORK 65536.0

static int64_t part_count(int64_t units, double work) {
    double p = work / PART_WORK;
    int64_t n = p < 16 ? (int64_t)p : 16;
    if (n > units) n = units;
    return n < 1 ? 1 : n;
}

/* A GEMV-shaped product in its own function part(ctx = {a, b, c}, fns, part) that the kernel
 * hands to irt_parallel: up to 16 shares of the output columns, each streaming its rows of B. */
static bool gemv_parallel(Cg *cg, const LlvmGemv *gv) {
    int64_t units = llvm_gemv_units(gv), parts = part_count(units, (double)gv->m * (double)gv->n * (double)gv->k);
    LLVMValueRef fn = part_fn_new(cg);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(cg->ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(cg->ctx, fn, "entry"));
    LlvmGemv g2 = *gv;
    LLVMValueRef ctx = LLVMGetParam(fn, 0), *dst[3] = {&g2.a, &g2.b, &g2.c};
    for (int i = 0; i < 3; i++) {
        LLVMValueRef idx = ci64(cg, i);
        *dst[i] = LLVMBuildLoad2(b, cg->ptr, LLVMBuildGEP2(b, cg->ptr, ctx, &idx, 1, ""), "");
    }
    g2.part = LLVMGetParam(fn, 2);
    g2.n_parts = parts;
    bool ok = llvm_gemv_emit(b, fn, &g2);
    if (ok) LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    if (!ok) { /* not a shape or target it takes: the caller uses BLAS */
        LLVMDeleteFunction(fn);
        return false;
    }
    LLVMValueRef arr = LLVMBuildArrayAlloca(cg->ab, cg->ptr, ci64(cg, 3), ""), src[3] = {gv->a, gv->b, gv->c};
    for (int i = 0; i < 3; i++) {
        LLVMValueRef idx = ci64(cg, i);
        LLVMBuildStore(cg->b, src[i], LLVMBuildGEP2(cg->b, cg->ptr, arr, &idx, 1, ""));
    }
    call_parallel(cg, parts, fn, arr);
    return true;
}

static void gemm_call(Cg *cg, GemmCtx *c, LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oc) {
    if (c->m <= 0 || c->n <= 0 || c->k <= 0) return;
    if (c->m <= 4 && !c->ta && (double)c->m * (double)c->n * (double)c->k > SMALL_GEMM &&
        llvm_gemv_fits(c->m, c->n, c->k, c->tb != 0, cg->simd_bits)) {
        LlvmGemv gv = {.m = c->m, .n = c->n, .k = c->k, .lda = c->lda, .ldb = c->ldb, .ldc = c->n, .tb = c->tb != 0,
                       .alpha = c->alpha, .a = elem_ptr(cg, cg->f32, c->a, oa), .b = elem_ptr(cg, cg->f32, c->b, ob),
                       .c = elem_ptr(cg, cg->f32, c->c, oc), .simd_bits = cg->simd_bits};
        if (gemv_parallel(cg, &gv)) return;
    }
    /* (the row accumulator of the non-transposed form lives on the stack: at most 16 KiB) */
    if ((double)c->m * (double)c->n * (double)c->k <= SMALL_GEMM && (c->tb || c->n <= 4096)) small_gemm(cg, c, oa, ob, oc);
    else blas_call(cg, c, oa, ob, oc);
}

static void matmul_body(Cg *cg, LLVMValueRef *o, void *user) { gemm_call(cg, user, o[1], o[2], o[0]); }

/* GEMM of output rows [row0, row0 + rows) then the epilogue over them; a_row is the element
 * step of A per output row, box_row the output dim the rows run along. */
typedef struct RowBlock {
    GemmCtx *gc;
    Epi *e;
    LLVMValueRef a_base, b_base, c_base; /* element offsets of this (image, group) or batch */
    int64_t a_row;
    uint32_t box_row;
    LLVMValueRef start[IR_MAX_RANK];
    int64_t len[IR_MAX_RANK];
} RowBlock;

static void row_block(Cg *cg, RowBlock *rb, LLVMValueRef row0, int64_t rows) {
    GemmCtx c = *rb->gc;
    c.m = rows;
    LLVMBuilderRef b = cg->b;
    LLVMValueRef oa = LLVMBuildNSWAdd(b, rb->a_base, LLVMBuildNSWMul(b, row0, ci64(cg, rb->a_row), ""), "");
    LLVMValueRef oc = LLVMBuildNSWAdd(b, rb->c_base, LLVMBuildNSWMul(b, row0, ci64(cg, c.n), ""), "");
    gemm_call(cg, &c, oa, rb->b_base, oc);
    LLVMValueRef start[IR_MAX_RANK];
    int64_t len[IR_MAX_RANK];
    memcpy(start, rb->start, sizeof start);
    memcpy(len, rb->len, sizeof len);
    start[rb->box_row] = start[rb->box_row] ? LLVMBuildNSWAdd(b, start[rb->box_row], row0, "") : row0;
    len[rb->box_row] = rows;
    epi_box(cg, rb->e, start, len);
}

/* All rows of one GEMM in blocks of rows_per_block: a loop over the full blocks, then the rest. */
static void row_blocks(Cg *cg, RowBlock *rb) {
    int64_t m = rb->gc->m, mb = rows_per_block(rb->e, m, rb->gc->n), full = m / mb;
    if (full == 1) row_block(cg, rb, ci64(cg, 0), mb);
    else if (full > 1) {
        Loop l;
        loop_begin(cg, &l, full);
        row_block(cg, rb, LLVMBuildNSWMul(cg->b, l.iv, ci64(cg, mb), ""), mb);
        loop_end(cg, &l);
    }
    if (m % mb) row_block(cg, rb, ci64(cg, full * mb), m % mb);
}

static bool gen_matmul_packed(Cg *cg, const GemmCtx *c, IrValueId va, IrValueId vb, const Epi *flat2, IrStatus *status);

static IrStatus gen_matmul_node(Cg *cg, IrNodeId n, LLVMValueRef ybuf, Epi *e) {
    const IrGraph *g = cg->g;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1);
    for (int i = 0; i < 2; i++)
        if (lower_value_dtype(g, i ? vb : va) != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
    LowerMatMulShape ms;
    const char *why = lower_matmul_shape(g, n, &ms);
    if (why) return unsupported(cg, why);
    const int64_t *da = ms.da, *db = ms.db, *dy = ms.dy, *bd = ms.bd;
    uint32_t ry = ms.ry, bra = ms.ra - 2, brb = ms.rb - 2, br = ms.br;
    int64_t s[3][IR_MAX_RANK];
    /* (B's buffer only where the BLAS or loop paths read it: constant weights the packed GEMM
     * holds packed are then left out of the artifact) */
    GemmCtx c = {.a = obuf(cg, va), .c = ybuf, .m = ms.m, .k = ms.k, .n = ms.n, .alpha = 1.0};
    c.lda = c.k;
    c.ldb = c.n;
    /* B shared by every batch and A's batches contiguous (a linear layer on a 3-D input): one
     * GEMM with the batches stacked as rows */
    bool b_shared = true, a_dense = bra == br;
    for (uint32_t k = 0; k < brb; k++) b_shared = b_shared && db[k] == 1;
    for (uint32_t k = 0; k < bra && a_dense; k++) a_dense = da[k] == bd[k];
    if (ir_shape_numel(br, bd) > 1 && b_shared && a_dense && ry >= 2 && dy[ry - 1] == c.n && ry == br + 2) {
        c.m *= ir_shape_numel(br, bd);
        RowBlock rbk = {.gc = &c, .e = e, .a_base = ci64(cg, 0), .b_base = ci64(cg, 0), .c_base = ci64(cg, 0),
                        .a_row = c.k, .box_row = ry - 2};
        /* the box runs over output rows of the stacked matrix: view the output as [M', N] */
        Epi flat = *e;
        flat.orank = 2;
        flat.od[0] = c.m;
        flat.od[1] = c.n;
        bool ok = true;
        for (uint32_t j = 0; j < flat.n_ops && ok; j++) {
            /* an operand broadcast over rows (stride 0 in every leading dim) or dense like the output */
            bool lead_zero = true, dense = true;
            for (uint32_t k = 0; k + 1 < e->orank; k++) lead_zero = lead_zero && e->strides[j][k] == 0;
            for (uint32_t k = 0; k < e->orank; k++) dense = dense && e->strides[j][k] == e->strides[0][k];
            flat.strides[j][0] = lead_zero ? 0 : c.n;
            flat.strides[j][1] = e->strides[j][e->orank - 1];
            ok = lead_zero || dense;
        }
        IrStatus ps;
        if (ok && gen_matmul_packed(cg, &c, va, vb, &flat, &ps)) return ps;
        if (ok) {
            rbk.e = &flat;
            rbk.box_row = 0;
            rbk.len[0] = c.m;
            rbk.len[1] = c.n;
            c.b = obuf(cg, vb);
            if (c.m && c.n) row_blocks(cg, &rbk);
            return IR_OK;
        }
        c.m /= ir_shape_numel(br, bd);
    }
    if (ir_shape_numel(br, bd) == 1 && ry >= 2 && dy[ry - 2] == c.m && dy[ry - 1] == c.n) {
        /* one GEMM: viewed as [M, N] (the leading dims are 1s), the packed GEMM where it takes it */
        Epi flat = *e;
        flat.orank = 2;
        flat.od[0] = c.m;
        flat.od[1] = c.n;
        for (uint32_t j = 0; j < flat.n_ops; j++) {
            flat.strides[j][0] = e->strides[j][ry - 2];
            flat.strides[j][1] = e->strides[j][ry - 1];
        }
        IrStatus ps;
        if (gen_matmul_packed(cg, &c, va, vb, &flat, &ps)) return ps;
        /* else row blocks with the epilogue on each */
        RowBlock rbk = {.gc = &c, .e = e, .a_base = ci64(cg, 0), .b_base = ci64(cg, 0), .c_base = ci64(cg, 0),
                        .a_row = c.k, .box_row = ry - 2};
        for (uint32_t k = 0; k < ry; k++) rbk.len[k] = dy[k];
        c.b = obuf(cg, vb);
        if (c.m && c.n) row_blocks(cg, &rbk);
        return IR_OK;
    }
    ir_shape_strides(br, bd, s[0]);
    ir_shape_broadcast_strides(bra, da, br, NULL, s[1]);
    ir_shape_broadcast_strides(brb, db, br, NULL, s[2]);
    for (uint32_t k = 0; k < br; k++) {
        s[0][k] *= c.m * c.n;
        s[1][k] *= c.m * c.k;
        s[2][k] *= c.k * c.n;
    }
    c.b = obuf(cg, vb);
    emit_nest(cg, br, bd, 3, s, NULL, matmul_body, &c);
    /* batched: the epilogue once over the whole output, in the same kernel */
    LLVMValueRef start[IR_MAX_RANK] = {0};
    epi_box(cg, e, start, e->od);
    return IR_OK;
}

static IrStatus gen_gemm_node(Cg *cg, IrNodeId n, LLVMValueRef ybuf, Epi *e) {
    const IrGraph *g = cg->g;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1);
    IrValueId vc = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    LowerGemmShape gs;
    const char *why = lower_gemm_shape(g, n, &gs);
    if (why) return unsupported(cg, why);
    GemmCtx c = {.a = obuf(cg, va), .c = ybuf, .ta = gs.ta, .tb = gs.tb, .alpha = gs.alpha, /* .b: as gen_matmul_node */
                 .m = gs.m, .n = gs.n, .k = gs.k, .lda = gs.lda, .ldb = gs.ldb};
    const int64_t *dy = gs.dy;
    if (!c.m || !c.n) return IR_OK;
    if (c.k == 0) return unsupported(cg, "with K = 0");
    if (vc && gs.beta != 0.0) {
        int64_t sc[IR_MAX_RANK];
        ir_shape_broadcast_strides(gs.rc, gs.dc, 2, NULL, sc);
        epi_bias(cg, e, vc, sc, gs.beta);
    }
    IrStatus ps;
    if (gen_matmul_packed(cg, &c, va, vb, e, &ps)) return ps;
    c.b = obuf(cg, vb);
    RowBlock rbk = {.gc = &c, .e = e, .a_base = ci64(cg, 0), .b_base = ci64(cg, 0), .c_base = ci64(cg, 0),
                    .a_row = c.ta ? 1 : c.lda, .box_row = 0, .len = {dy[0], dy[1]}};
    row_blocks(cg, &rbk);
    return IR_OK;
}

/* ---- convolution and pooling (2-D, NCHW) ------------------------------------------------------ */

/* window geometry and tap index math: backend/llvm/emit.h */
static LLVMValueRef pix(Cg *cg, const LowerWin *wn, LLVMValueRef ih, LLVMValueRef iw, LLVMValueRef *valid) {
    return llvm_win_pix(cg->b, cg->i64, wn, ih, iw, valid);
}
static LLVMValueRef win_coord(Cg *cg, LLVMValueRef o, int64_t stride, int64_t pad, LLVMValueRef k, int64_t dil) {
    return llvm_win_coord(cg->b, cg->i64, o, stride, pad, k, dil);
}

/* Pooling: loops over (N*C planes, OH) and three spans of OW: where every horizontal tap of
 * the window is inside the input (computed at compile time) the taps are unrolled with only the
 * row checked, so the loop over OW vectorizes; at the left and right borders the window loops run
 * with full bounds checks. Taps are visited in the same order everywhere (rows, then columns),
 * as the interpreter does. */
typedef struct PoolCtx {
    LowerWin w;
    bool max, include_pad;
    LLVMValueRef x, y;
} PoolCtx;

static LLVMValueRef pool_finish(Cg *cg, PoolCtx *c, LLVMValueRef acc, LLVMValueRef cnt) {
    if (c->max) return acc;
    LLVMValueRef den = c->include_pad ? cf32(cg, (double)(c->w.kh * c->w.kw)) : cnt;
    return LLVMBuildFDiv(cg->b, acc, den, "");
}

static LLVMValueRef pool_step(Cg *cg, PoolCtx *c, LLVMValueRef a, LLVMValueRef v) {
    return c->max ? pool_max_step(cg->b, v, a) : LLVMBuildFAdd(cg->b, a, v, ""); /* as the interpreter */
}

/* One output point at (oh, ow) of the plane at xbase, with bounds checks on both axes. */
static void pool_point_checked(Cg *cg, PoolCtx *c, LLVMValueRef xbase, LLVMValueRef oh, LLVMValueRef ow, LLVMValueRef yoff) {
    LLVMBuilderRef b = cg->b;
    LLVMValueRef acc = var_f32(cg, c->max ? -INFINITY : 0.0), cnt = var_f32(cg, 0.0);
    Loop lh, lw;
    loop_begin(cg, &lh, c->w.kh);
    LLVMValueRef ih = win_coord(cg, oh, c->w.sh, c->w.pt, lh.iv, c->w.dh);
    loop_begin(cg, &lw, c->w.kw);
    LLVMValueRef iw = win_coord(cg, ow, c->w.sw, c->w.pl, lw.iv, c->w.dw), valid;
    LLVMValueRef off = pix(cg, &c->w, ih, iw, &valid);
    LLVMValueRef v = ld(cg, cg->f32, c->x, LLVMBuildAdd(b, xbase, off, ""));
    LLVMValueRef a = LLVMBuildLoad2(b, cg->f32, acc, "");
    LLVMBuildStore(b, LLVMBuildSelect(b, valid, pool_step(cg, c, a, v), a, ""), acc);
    LLVMValueRef k = LLVMBuildLoad2(b, cg->f32, cnt, "");
    LLVMBuildStore(b, LLVMBuildSelect(b, valid, LLVMBuildFAdd(b, k, cf32(cg, 1.0), ""), k, ""), cnt);
    loop_end(cg, &lw);
    loop_end(cg, &lh);
    LLVMValueRef r = pool_finish(cg, c, LLVMBuildLoad2(b, cg->f32, acc, ""), LLVMBuildLoad2(b, cg->f32, cnt, ""));
    st(cg, cg->f32, c->y, yoff, r);
}

/* One output point whose horizontal taps are all inside: taps unrolled, rows checked. */
static void pool_point_inner(Cg *cg, PoolCtx *c, LLVMValueRef xbase, LLVMValueRef oh, LLVMValueRef ow, LLVMValueRef yoff) {
    LLVMBuilderRef b = cg->b;
    LLVMValueRef acc = cf32(cg, c->max ? -INFINITY : 0.0), cnt = cf32(cg, 0.0);
    LLVMValueRef iw0 = LLVMBuildSub(b, LLVMBuildMul(b, ow, ci64(cg, c->w.sw), ""), ci64(cg, c->w.pl), "");
    for (int64_t kh = 0; kh < c->w.kh; kh++) {
        LLVMValueRef ih = win_coord(cg, oh, c->w.sh, c->w.pt, ci64(cg, kh), c->w.dh);
        LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, ih, ci64(cg, c->w.h), "");
        LLVMValueRef row = LLVMBuildAdd(b, xbase, LLVMBuildMul(b, LLVMBuildSelect(b, ok, ih, ci64(cg, 0), ""), ci64(cg, c->w.w), ""), "");
        for (int64_t kw = 0; kw < c->w.kw; kw++) {
            LLVMValueRef v = ld(cg, cg->f32, c->x, LLVMBuildAdd(b, row, LLVMBuildAdd(b, iw0, ci64(cg, kw * c->w.dw), ""), ""));
            acc = LLVMBuildSelect(b, ok, pool_step(cg, c, acc, v), acc, "");
            cnt = LLVMBuildSelect(b, ok, LLVMBuildFAdd(b, cnt, cf32(cg, 1.0), ""), cnt, "");
        }
    }
    st(cg, cg->f32, c->y, yoff, pool_finish(cg, c, acc, cnt));
}

/* ---- vector pooling: 16 output columns at a time (AVX-512 targets) ----------------------------
 * For the columns whose horizontal taps are all inside, one vector per tap: stride 1 is a plain
 * (masked) load, stride 2 one load of twice the lanes keeping the even ones; rows outside the
 * input are skipped as the scalar code does. The same comparisons and adds as pool_step, per
 * lane, so results are identical. Used for rows of any width: at first only under 48 columns,
 * where LLVM did not vectorize the scalar loop, but wider rows vectorized poorly too (stride-2
 * gathers and a scalar remainder): ResNet-50's 3x3 stride-2 MaxPool 0.44 -> 0.19 ms. */
#define POOL_LANES 16

/* Columns x[off + j * sw] for j < lanes (sw 1 or 2). */
static LLVMValueRef pool_columns(Cg *cg, PoolCtx *c, LLVMValueRef off, int64_t lanes) {
    LLVMValueRef p = elem_ptr(cg, cg->f32, c->x, off);
    if (c->w.sw == 1) return llvm_load_lanes(cg->b, p, POOL_LANES, lanes);
    LLVMValueRef wide = llvm_load_lanes(cg->b, p, 2 * POOL_LANES, 2 * lanes - 1), idx[POOL_LANES];
    for (int i = 0; i < POOL_LANES; i++) idx[i] = LLVMConstInt(cg->i32, (unsigned long long)(2 * i), 0);
    return LLVMBuildShuffleVector(cg->b, wide, LLVMGetUndef(LLVMTypeOf(wide)), LLVMConstVector(idx, POOL_LANES), "");
}

/* lanes (<= 16) output columns from ow0 on, row oh of the plane at xbase. */
static void pool_vec_block(Cg *cg, PoolCtx *c, LLVMValueRef xbase, LLVMValueRef oh, LLVMValueRef ybase, LLVMValueRef ow0,
                           int64_t lanes) {
    LLVMBuilderRef b = cg->b;
    const LowerWin *w = &c->w;
    LLVMTypeRef vt = LLVMVectorType(cg->f32, POOL_LANES);
    LLVMValueRef init = cf32(cg, c->max ? -INFINITY : 0.0), accs[POOL_LANES];
    for (int i = 0; i < POOL_LANES; i++) accs[i] = init;
    LLVMValueRef acc = LLVMConstVector(accs, POOL_LANES), cnt = cf32(cg, 0.0);
    LLVMValueRef iw0 = LLVMBuildSub(b, LLVMBuildMul(b, ow0, ci64(cg, w->sw), ""), ci64(cg, w->pl), "");
    for (int64_t kh = 0; kh < w->kh; kh++) {
        LLVMValueRef ih = win_coord(cg, oh, w->sh, w->pt, ci64(cg, kh), w->dh);
        LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, ih, ci64(cg, w->h), "");
        LLVMValueRef row = LLVMBuildAdd(b, xbase, LLVMBuildMul(b, LLVMBuildSelect(b, ok, ih, ci64(cg, 0), ""), ci64(cg, w->w), ""), "");
        for (int64_t kw = 0; kw < w->kw; kw++) {
            LLVMValueRef v = pool_columns(cg, c, LLVMBuildAdd(b, row, LLVMBuildAdd(b, iw0, ci64(cg, kw), ""), ""), lanes);
            LLVMValueRef step = c->max ? pool_max_step(b, v, acc) : LLVMBuildFAdd(b, acc, v, "");
            acc = LLVMBuildSelect(b, ok, step, acc, "");
            cnt = LLVMBuildSelect(b, ok, LLVMBuildFAdd(b, cnt, cf32(cg, 1.0), ""), cnt, "");
        }
    }
    if (!c->max) {
        LLVMValueRef den = c->include_pad ? cf32(cg, (double)(w->kh * w->kw)) : cnt, dens[POOL_LANES];
        LLVMValueRef dv = LLVMBuildInsertElement(b, LLVMGetUndef(vt), den, LLVMConstInt(cg->i32, 0, 0), "");
        for (int i = 0; i < POOL_LANES; i++) dens[i] = LLVMConstInt(cg->i32, 0, 0);
        acc = LLVMBuildFDiv(b, acc, LLVMBuildShuffleVector(b, dv, LLVMGetUndef(vt), LLVMConstVector(dens, POOL_LANES), ""), "");
    }
    llvm_store_lanes(b, acc, elem_ptr(cg, cg->f32, c->y, LLVMBuildAdd(b, ybase, ow0, "")), lanes);
}

/* Columns [from, to) in blocks of 16, the last one masked. */
static void pool_vec_span(Cg *cg, PoolCtx *c, LLVMValueRef xbase, LLVMValueRef oh, LLVMValueRef ybase, int64_t from,
                          int64_t to) {
    int64_t n = to - from, full = n / POOL_LANES, rest = n % POOL_LANES;
    if (full) {
        Loop l;
        loop_begin(cg, &l, full);
        pool_vec_block(cg, c, xbase, oh, ybase, LLVMBuildNSWAdd(cg->b, LLVMBuildNSWMul(cg->b, l.iv, ci64(cg, POOL_LANES), ""), ci64(cg, from), ""),
                       POOL_LANES);
        loop_end(cg, &l);
    }
    if (rest) pool_vec_block(cg, c, xbase, oh, ybase, ci64(cg, from + full * POOL_LANES), rest);
}

typedef void (*PoolPoint)(Cg *, PoolCtx *, LLVMValueRef, LLVMValueRef, LLVMValueRef, LLVMValueRef);

static void pool_span(Cg *cg, PoolCtx *c, PoolPoint f, LLVMValueRef xbase, LLVMValueRef oh, LLVMValueRef ybase,
                      int64_t from, int64_t to) {
    if (to <= from) return;
    Loop l;
    loop_begin(cg, &l, to - from);
    LLVMValueRef ow = LLVMBuildNSWAdd(cg->b, l.iv, ci64(cg, from), "");
    f(cg, c, xbase, oh, ow, LLVMBuildNSWAdd(cg->b, ybase, ow, ""));
    loop_end(cg, &l);
}

/* Output row oh of the plane at xbase into y at ybase: checked columns [0, lo), the inner span
 * [lo, hi), checked columns from hi on. The inner span is 16-lane blocks on AVX-512 (strides 1
 * and 2); on AVX2 the scalar loop, which LLVM vectorizes: the blocks ran 2.3x slower there
 * (SqueezeNet's first MaxPool on Zen 3: 0.76 against 0.33 ms). */
static void pool_row(Cg *cg, PoolCtx *c, LLVMValueRef xbase, LLVMValueRef oh, LLVMValueRef ybase, int64_t lo, int64_t hi) {
    const LowerWin *w = &c->w;
    pool_span(cg, c, pool_point_checked, xbase, oh, ybase, 0, lo);
    if (cg->simd_bits >= 512 && (w->sw == 1 || w->sw == 2) && w->dw == 1) pool_vec_span(cg, c, xbase, oh, ybase, lo, hi);
    else pool_span(cg, c, pool_point_inner, xbase, oh, ybase, lo, hi);
    pool_span(cg, c, pool_point_checked, xbase, oh, ybase, hi > lo ? hi : lo, w->ow);
}

static IrStatus gen_pool(Cg *cg, bool max) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (ir_node_num_results(g, n) > 1 && ir_node_result(g, n, 1)) return unsupported(cg, "with an Indices output");
    if (ir_type_dtype(g, ir_value_type(g, x)) != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
    IrAttrValue av;
    if (!ir_node_attr(g, n, "kernel_shape", &av) || av.count != 2) return unsupported(cg, "other than 2-D");
    PoolCtx c = {.max = max, .x = buf(cg, x), .y = buf(cg, y)};
    const char *why = lower_win_read(g, n, x, y, av.ints[0], av.ints[1], &c.w);
    if (why) return unsupported(cg, why);
    bool found;
    c.include_pad = ir_node_attr_int(g, n, "count_include_pad", &found) != 0;
    const LowerWin *w = &c.w;
    if (w->n * w->c * w->oh * w->ow == 0) return IR_OK;
    /* ow in [lo, hi): every horizontal tap ow*sw - pl + kw*dw inside [0, W) */
    int64_t lo = w->pl > 0 ? (w->pl + w->sw - 1) / w->sw : 0;
    int64_t last = w->w - 1 + w->pl - (w->kw - 1) * w->dw, hi = last < 0 ? 0 : last / w->sw + 1;
    if (hi > w->ow) hi = w->ow;
    if (lo > w->ow) lo = w->ow;
    if (hi < lo || w->kh * w->kw > 64) hi = lo; /* large windows: checked loops everywhere */
    LLVMBuilderRef b = cg->b;
    if (cg->part && !cg->part_used) {
        /* a kernel in parts: each part takes a share of the output rows of all planes (row r is
         * row r % OH of plane r / OH), so the parts write disjoint spans of y; unsigned, so LLVM
         * knows oh < OH and drops the row checks of the inner span (srem: 2.7x slower) */
        cg->part_used = true;
        LLVMValueRef rlo, rn;
        part_share(cg, w->n * w->c * w->oh, &rlo, &rn);
        Loop lr;
        llvm_loop_begin_v(b, cg->fn, &lr, rn);
        LLVMValueRef r = LLVMBuildNSWAdd(b, lr.iv, rlo, "");
        LLVMValueRef plane = LLVMBuildUDiv(b, r, ci64(cg, w->oh), ""), oh = LLVMBuildURem(b, r, ci64(cg, w->oh), "");
        pool_row(cg, &c, LLVMBuildNSWMul(b, plane, ci64(cg, w->h * w->w), ""), oh,
                 LLVMBuildNSWMul(b, r, ci64(cg, w->ow), ""), lo, hi);
        loop_end(cg, &lr);
        return IR_OK;
    }
    Loop lp, lh;
    loop_begin(cg, &lp, w->n * w->c);
    LLVMValueRef xbase = LLVMBuildNSWMul(b, lp.iv, ci64(cg, w->h * w->w), "");
    loop_begin(cg, &lh, w->oh);
    LLVMValueRef ybase = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, lp.iv, ci64(cg, w->oh * w->ow), ""),
                                         LLVMBuildNSWMul(b, lh.iv, ci64(cg, w->ow), ""), "");
    pool_row(cg, &c, xbase, lh.iv, ybase, lo, hi);
    loop_end(cg, &lh);
    loop_end(cg, &lp);
    return IR_OK;
}

/* Conv: one GEMM per (image, group) through the BLAS helper, in blocks of output channels each
 * followed by its epilogue (bias, fused members). A 1x1 stride-1 unpadded Conv multiplies the
 * input planes directly (they already are the K x OH*OW matrix); others go through im2col into
 * the node's scratch buffer first. */
typedef struct ConvCtx {
    LowerWin w;
    int64_t cg_, k;
    LLVMValueRef x, col;
} ConvCtx;

/* col[row, oh*OW + ow] for rows (c, kh, kw) of the image/group whose input starts at o[1].
 * Loops over c, kh (run time), kw (unrolled), oh, then three constant-bound ow loops: the left
 * padding, the in-bounds span (computed at compile time for each kw: a contiguous copy when the
 * stride is 1, which vectorizes) and the right padding; rows outside the input are zeros. */
static void im2col_body(Cg *cg, LLVMValueRef *o, void *user) {
    ConvCtx *c = user;
    LLVMBuilderRef b = cg->b;
    const LowerWin *w = &c->w;
    LLVMValueRef zero = cf32(cg, 0.0);
    Loop lc, lkh, loh, lw;
    loop_begin(cg, &lc, c->cg_);
    LLVMValueRef xplane = LLVMBuildNSWAdd(b, o[1], LLVMBuildNSWMul(b, lc.iv, ci64(cg, w->h * w->w), ""), "");
    loop_begin(cg, &lkh, w->kh);
    LLVMValueRef row0 = LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, lc.iv, ci64(cg, w->kh), ""), lkh.iv, ""),
                                        ci64(cg, w->kw), "");
    for (int64_t kw = 0; kw < w->kw; kw++) {
        int64_t shift = kw * w->dw - w->pl, lo = 0, hi;
        if (shift < 0) lo = (-shift + w->sw - 1) / w->sw;
        hi = (w->w - shift + w->sw - 1) / w->sw;
        if (hi > w->ow) hi = w->ow;
        if (lo > w->ow) lo = w->ow;
        if (hi < lo) hi = lo;
        LLVMValueRef row = LLVMBuildNSWAdd(b, row0, ci64(cg, kw), "");
        LLVMValueRef rbase = LLVMBuildNSWMul(b, row, ci64(cg, w->oh * w->ow), "");
        loop_begin(cg, &loh, w->oh);
        LLVMValueRef ih = win_coord(cg, loh.iv, w->sh, w->pt, lkh.iv, w->dh);
        LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, ih, ci64(cg, w->h), "");
        LLVMValueRef ihc = LLVMBuildSelect(b, ok, ih, ci64(cg, 0), "");
        LLVMValueRef src = LLVMBuildAdd(b, xplane, LLVMBuildMul(b, ihc, ci64(cg, w->w), ""), "");
        LLVMValueRef dst = LLVMBuildNSWAdd(b, rbase, LLVMBuildNSWMul(b, loh.iv, ci64(cg, w->ow), ""), "");
        if (lo > 0) {
            loop_begin(cg, &lw, lo);
            st(cg, cg->f32, c->col, LLVMBuildNSWAdd(b, dst, lw.iv, ""), zero);
            loop_end(cg, &lw);
        }
        if (hi > lo) {
            loop_begin(cg, &lw, hi - lo);
            LLVMValueRef ow = LLVMBuildNSWAdd(b, lw.iv, ci64(cg, lo), "");
            LLVMValueRef iw = LLVMBuildAdd(b, LLVMBuildMul(b, ow, ci64(cg, w->sw), ""), ci64(cg, shift), "");
            LLVMValueRef v = ld(cg, cg->f32, c->x, LLVMBuildAdd(b, src, iw, ""));
            st(cg, cg->f32, c->col, LLVMBuildNSWAdd(b, dst, ow, ""), LLVMBuildSelect(b, ok, v, zero, ""));
            loop_end(cg, &lw);
        }
        if (hi < w->ow) {
            loop_begin(cg, &lw, w->ow - hi);
            st(cg, cg->f32, c->col, LLVMBuildNSWAdd(b, dst, LLVMBuildNSWAdd(b, lw.iv, ci64(cg, hi), ""), ""), zero);
            loop_end(cg, &lw);
        }
        loop_end(cg, &loh);
    }
    loop_end(cg, &lkh);
    loop_end(cg, &lc);
}

/* The Conv node of n: n itself, or the anchor of an epilogue group; 0 otherwise. */
static IrNodeId conv_of(const IrGraph *g, IrNodeId n) {
    if (ir_node_op(g, n) == IR_OP_CONV) return n;
    if (ir_node_op(g, n) == IR_OP_FUSED && llvm_fused_epilogue_group(g, n, false)) {
        IrNodeId a = ir_region_first(g, ir_node_region_at(g, n, 0));
        return ir_node_op(g, a) == IR_OP_CONV ? a : 0;
    }
    return 0;
}


/* Whether Conv cn goes through the packed GEMM with implicit im2col: on AVX-512 one group or
 * groups of at least 8 output channels (depthwise convolutions keep the per-group loops: a
 * strip of one row would waste the tile); on AVX2 one group and a shape of its rule. */
static bool conv_packed(const IrGraph *g, IrNodeId cn, unsigned simd_bits) {
    LowerConvGeom cv;
    if (lower_conv_read(g, cn, &cv)) return false;
    if (llvm_pgemm_vector_width(simd_bits)) return cv.groups == 1 || cv.ocg >= 8;
    return cv.groups == 1 && llvm_pgemm_conv_fits(&cv.w, cv.ocg, simd_bits);
}


/* Whether Conv cn runs as a direct depthwise/grouped kernel (cpu/depthwise.c): groups of few
 * input channels that the packed GEMM does not take (per-group GEMMs of a few rows each, or a
 * BLAS call per group, cost far more than the taps' multiplies). */
static bool conv_direct(const IrGraph *g, IrNodeId cn, unsigned simd_bits) {
    LowerConvGeom cv;
    return !lower_conv_read(g, cn, &cv) && llvm_depthwise_fits(&cv.w, cv.groups, cv.oc, simd_bits) &&
           !conv_packed(g, cn, simd_bits);
}

/* The Winograd tile of Conv cn (anchor of n) when it is computed that way (cpu/winograd.c):
 * a one-group 3x3 stride-1 or stride-2 f32 Conv whose weights are constants, on AVX-512 or AVX2
 * (llvm_winograd_tile); 0 otherwise. */
static int conv_winograd(const IrGraph *g, IrNodeId n, IrNodeId cn, unsigned simd_bits) {
    LowerConvGeom cv;
    if (lower_conv_read(g, cn, &cv) || cv.groups != 1) return 0;
    IrValueId w = lower_outer_value(g, n, ir_node_operand(g, cn, 1));
    if (lower_value_dtype(g, w) != IR_DTYPE_F32 || !lower_value_const_data(g, w)) return 0;
    return llvm_winograd_tile(&cv.w, cv.oc, simd_bits, llvm_winograd_max_tile(g));
}

int llvm_winograd_max_tile(const IrGraph *g) {
    for (uint32_t i = 0; i < ir_graph_num_meta(g); i++) {
        const char *k, *v;
        ir_graph_meta_at(g, i, &k, &v);
        if (strcmp(k, IR_META_WINOGRAD) == 0) return strcmp(v, "off") == 0 ? 0 : strcmp(v, "2") == 0 ? 2 : 4;
    }
    return 4;
}

int llvm_node_winograd_tile(const IrGraph *g, IrNodeId n, unsigned simd_bits) {
    IrNodeId cn = conv_of(g, n);
    return cn && !lower_conv_pointwise(g, cn) ? conv_winograd(g, n, cn, simd_bits) : 0;
}

int64_t llvm_node_scratch_bytes(const IrGraph *g, IrNodeId n, unsigned simd_bits) {
    int64_t rnn = llvm_ops_rnn_scratch_bytes(g, n, NULL) + llvm_ops_misc_scratch_bytes(g, n) + llvm_ops_resize_scratch_bytes(g, n, NULL) +
                  llvm_ops_fp8_scratch_bytes(g, n);
    if (rnn) return rnn;
    IrNodeId cn = conv_of(g, n);
    if (!cn || lower_conv_pointwise(g, cn)) return 0;
    int tile = conv_winograd(g, n, cn, simd_bits);
    if (tile) {
        LowerConvGeom cv;
        return lower_conv_read(g, cn, &cv) ? 0 : llvm_winograd_scratch_bytes(&cv.w, cv.oc, tile);
    }
    if (conv_direct(g, cn, simd_bits)) return 0;
    if (conv_packed(g, cn, simd_bits)) { /* the phase planes of a strided Conv, else nothing */
        LowerConvGeom cv;
        return lower_conv_read(g, cn, &cv) ? 0 : llvm_conv_phase_floats(&cv.w) * 4;
    }
    return lower_conv_im2col_bytes(g, cn);
}

int64_t llvm_plan_scratch(const IrGraph *g, IrNodeId n, const int64_t *sym, void *simd_bits) {
    if (sym && llvm_dyn_node(g, n)) return llvm_dyn_scratch_bytes(g, n, sym);
    return llvm_node_scratch_bytes(g, n, *(const unsigned *)simd_bits);
}

/* Conv with one group through the packed GEMM (backend/cpu/gemm.c): per image, C = W * cols
 * with the columns read straight from the input (implicit im2col) and the bias added in registers; the epilogue members run on each
 * column panel of the output as soon as it is final, viewing the output as [N, C, OH*OW]. */
typedef struct ConvPanel {
    Cg *cg;
    Epi *flat;
    LLVMValueRef img, chan0; /* chan0: the group's first output channel (NULL: 0) */
    int64_t rows;
} ConvPanel;

/* The epilogue in registers when every member is Relu, Clip, Add, Sub, Mul or Sum whose other
 * operands are dense along the output pixels or constant over them (per channel): each vector
 * of output columns is finished before its only store. */
static bool epi_vec_ok(const Cg *cg, const Epi *flat) {
    for (IrNodeId m = ir_node_next(cg->g, flat->anchor); m; m = ir_node_next(cg->g, m)) {
        IrOp op = ir_node_op(cg->g, m);
        if (op != IR_OP_RELU && op != IR_OP_ADD && op != IR_OP_SUB && op != IR_OP_MUL && op != IR_OP_SUM && op != IR_OP_CLIP)
            return false;
        if (ir_node_num_operands(cg->g, m) < 1 || ir_node_num_operands(cg->g, m) > MAX_OPS) return false;
        for (uint32_t i = 0; i < ir_node_num_operands(cg->g, m); i++) {
            IrValueId o = ir_node_operand(cg->g, m, i);
            bool known = !o || ir_value_kind(cg->g, o) == IR_VALUE_RESULT; /* the previous member's (checked by the group) */
            for (uint32_t j = 1; j < flat->n_ops && !known; j++) known = flat->load_v[j] == o;
            if (!o || !known) return false;
        }
    }
    for (uint32_t j = 1; j < flat->n_ops; j++)
        if (flat->strides[j][2] != 0 && flat->strides[j][2] != 1) return false;
    return true;
}

/* Element offset of epilogue operand j at output row `row` (of this group), column 0. */
static LLVMValueRef operand_row_off(ConvPanel *cp, uint32_t j, LLVMValueRef row) {
    Cg *cg = cp->cg;
    const Epi *f = cp->flat;
    LLVMBuilderRef b = cg->b;
    if (cp->chan0) row = LLVMBuildNSWAdd(b, row, cp->chan0, "");
    return LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, cp->img, ci64(cg, f->strides[j][0]), ""),
                           LLVMBuildNSWMul(b, row, ci64(cg, f->strides[j][1]), ""), "");
}

static LLVMValueRef vec_operand(ConvPanel *cp, uint32_t j, LLVMTypeRef vt, LLVMValueRef row, LLVMValueRef col, int lanes) {
    Cg *cg = cp->cg;
    const Epi *f = cp->flat;
    LLVMBuilderRef b = cg->b;
    LLVMValueRef off = operand_row_off(cp, j, row);
    unsigned vw = LLVMGetVectorSize(vt);
    if (f->strides[j][2] == 0) { /* one value per channel: broadcast it */
        LLVMValueRef s = ld(cg, cg->f32, f->ptr[j], off);
        LLVMValueRef v = LLVMBuildInsertElement(b, LLVMGetUndef(vt), s, LLVMConstInt(cg->i32, 0, 0), "");
        return LLVMBuildShuffleVector(b, v, LLVMGetUndef(vt), LLVMConstNull(LLVMVectorType(cg->i32, vw)), "");
    }
    return llvm_load_lanes(b, elem_ptr(cg, cg->f32, f->ptr[j], LLVMBuildNSWAdd(b, off, col, "")), vw, lanes);
}

/* Prefetches of the epilogue's full-size operands (a residual) at (row, col) of the flat output. */
static void conv_epi_prefetch(void *user, LLVMValueRef row, LLVMValueRef col) {
    ConvPanel *cp = user;
    Cg *cg = cp->cg;
    const Epi *f = cp->flat;
    for (uint32_t j = 1; j < f->n_ops; j++) {
        if (f->strides[j][2] == 0 || !f->ptr[j]) continue; /* columns contiguous, as vec_operand reads them */
        LLVMValueRef off = LLVMBuildNSWAdd(cg->b, operand_row_off(cp, j, row), col, "");
        llvm_prefetch(cg->b, elem_ptr(cg, cg->f32, f->ptr[j], off));
    }
}

static LLVMValueRef conv_epi_vec(void *user, LLVMValueRef v, LLVMValueRef row, LLVMValueRef col, int lanes) {
    ConvPanel *cp = user;
    Cg *cg = cp->cg;
    const IrGraph *g = cg->g;
    const Epi *f = cp->flat;
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef vt = LLVMTypeOf(v);
    LLVMValueRef ops[MAX_OPS] = {0};
    if (f->bias_op) { /* a Gemm's C (times beta), first, as epi_body adds it */
        LLVMValueRef t = vec_operand(cp, f->bias_op, vt, row, col, lanes);
        if (f->bias_scale != 1.0) t = LLVMBuildFMul(b, t, llvm_splat_const(cf32(cg, f->bias_scale), LLVMGetVectorSize(vt)), "");
        v = LLVMBuildFAdd(b, v, t, "");
    }
    IrValueId cur = ir_node_result(g, f->anchor, 0);
    for (IrNodeId m = ir_node_next(g, f->anchor); m; m = ir_node_next(g, m)) {
        IrOp op = ir_node_op(g, m);
        LLVMValueRef x[MAX_OPS] = {0};
        uint32_t n = ir_node_num_operands(g, m);
        for (uint32_t i = 0; i < n; i++) {
            IrValueId o = ir_node_operand(g, m, i);
            if (o == cur) {
                x[i] = v;
                continue;
            }
            uint32_t j = 1;
            while (j < f->n_ops && f->load_v[j] != o) j++;
            if (!ops[j]) ops[j] = vec_operand(cp, j, vt, row, col, lanes);
            x[i] = ops[j];
        }
        if (op == IR_OP_RELU) {
            LLVMValueRef z = LLVMConstNull(vt);
            v = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUGT, x[0], z, ""), x[0], z, "");
        } else if (op == IR_OP_CLIP) { /* as ew_value: NaN stays */
            v = x[0];
            if (n > 1) v = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, v, x[1], ""), x[1], v, "");
            if (n > 2) v = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, v, x[2], ""), x[2], v, "");
        } else if (op == IR_OP_SUB) v = LLVMBuildFSub(b, x[0], x[1], "");
        else if (op == IR_OP_MUL) v = LLVMBuildFMul(b, x[0], x[1], "");
        else {
            v = x[0];
            for (uint32_t i = 1; i < n; i++) v = LLVMBuildFAdd(b, v, x[i], "");
        }
        cur = ir_node_result(g, m, 0);
    }
    return v;
}

static void conv_panel_done(void *user, LLVMValueRef j0, int64_t width) {
    ConvPanel *cp = user;
    LLVMValueRef start[IR_MAX_RANK] = {cp->img, cp->chan0, j0};
    int64_t len[IR_MAX_RANK] = {1, cp->rows, width};
    epi_box(cp->cg, cp->flat, start, len);
}

/* Whether some tap k of a window reads phase a: (k * dil - pad) mod stride == a. */
static bool phase_used(int64_t a, int64_t taps, int64_t dil, int64_t pad, int64_t stride) {
    for (int64_t k = 0; k < taps; k++)
        if ((((k * dil - pad) % stride) + stride) % stride == a) return true;
    return false;
}

#define PHASE_LANES 16

/* conv_split_phases with vectors (packed Convs run on AVX-512 targets, strides up to 4): each
 * plane row is read as 16 * sw columns at a time, one masked load (lanes past the image read
 * zero), and every used phase b takes lanes l * sw + b of it by a shuffle; rows past the image
 * are zeros. The scalar form did not vectorize (stride-sw loads) and took 8% of a stride-2 3x3
 * layer. */
static void conv_split_phases_vec(Cg *cg, const LowerWin *w, LLVMValueRef x, LLVMValueRef ph) {
    LLVMBuilderRef b = cg->b;
    int64_t hp, wp, sw = w->sw;
    llvm_conv_plane(w, true, &hp, &wp);
    unsigned wide = (unsigned)(PHASE_LANES * sw);
    LLVMTypeRef vt = LLVMVectorType(cg->f32, PHASE_LANES);
    Loop lc, li;
    loop_begin(cg, &lc, w->c);
    LLVMValueRef splane = LLVMBuildNSWMul(b, lc.iv, ci64(cg, w->h * w->w), "");
    for (int64_t a = 0; a < w->sh; a++) {
        if (!phase_used(a, w->kh, w->dh, w->pt, w->sh)) continue;
        int64_t rows = (w->h - a + w->sh - 1) / w->sh;
        loop_begin(cg, &li, hp);
        LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, li.iv, ci64(cg, rows), "");
        LLVMValueRef ih = LLVMBuildSelect(b, in, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, li.iv, ci64(cg, w->sh), ""), ci64(cg, a), ""),
                                          ci64(cg, 0), "");
        LLVMValueRef srow = LLVMBuildNSWAdd(b, splane, LLVMBuildNSWMul(b, ih, ci64(cg, w->w), ""), "");
        for (int64_t j0 = 0; j0 < wp; j0 += PHASE_LANES) {
            int64_t lanes = wp - j0 < PHASE_LANES ? wp - j0 : PHASE_LANES;
            int64_t avail = w->w - j0 * sw; /* input columns from j0 * sw on */
            LLVMValueRef row = llvm_load_lanes(b, elem_ptr(cg, cg->f32, x, LLVMBuildNSWAdd(b, srow, ci64(cg, j0 * sw), "")), wide, avail);
            for (int64_t bb = 0; bb < sw; bb++) {
                if (!phase_used(bb, w->kw, w->dw, w->pl, sw)) continue;
                LLVMValueRef idx[PHASE_LANES];
                for (int l = 0; l < PHASE_LANES; l++) idx[l] = LLVMConstInt(cg->i32, (unsigned long long)(l * sw + bb), 0);
                LLVMValueRef v = LLVMBuildShuffleVector(b, row, LLVMGetPoison(LLVMTypeOf(row)), LLVMConstVector(idx, PHASE_LANES), "");
                v = LLVMBuildSelect(b, in, v, LLVMConstNull(vt), "");
                LLVMValueRef dplane = ci64(cg, (a * sw + bb) * hp * wp);
                LLVMValueRef doff = LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, lc.iv, ci64(cg, w->sh * sw * hp * wp), ""),
                                                    LLVMBuildNSWAdd(b, dplane, LLVMBuildNSWMul(b, li.iv, ci64(cg, wp), ""), ""), "");
                llvm_store_lanes(b, v, elem_ptr(cg, cg->f32, ph, LLVMBuildNSWAdd(b, doff, ci64(cg, j0), "")), lanes);
            }
        }
        loop_end(cg, &li);
    }
    loop_end(cg, &lc);
}

/* The input image at x split into stride phases at ph (llvm_conv_phase_floats): for each
 * channel and phase (a, b), rows i and columns j of pixel (i * sh + a, j * sw + b); zeros past
 * the image. Phases no tap reads are skipped (a 1x1 stride-2 Conv copies one pixel in four). */
static void conv_split_phases(Cg *cg, const LowerWin *w, LLVMValueRef x, LLVMValueRef ph) {
    if (cg->simd_bits >= 512 && w->sw <= 4) {
        conv_split_phases_vec(cg, w, x, ph);
        return;
    }
    LLVMBuilderRef b = cg->b;
    int64_t hp, wp;
    llvm_conv_plane(w, true, &hp, &wp);
    Loop lc, li, lj;
    loop_begin(cg, &lc, w->c);
    for (int64_t a = 0; a < w->sh; a++)
        for (int64_t bb = 0; bb < w->sw; bb++) {
            if (!phase_used(a, w->kh, w->dh, w->pt, w->sh) || !phase_used(bb, w->kw, w->dw, w->pl, w->sw)) continue;
            LLVMValueRef dplane = LLVMBuildNSWMul(b, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, lc.iv, ci64(cg, w->sh * w->sw), ""),
                                                                   ci64(cg, a * w->sw + bb), ""), ci64(cg, hp * wp), "");
            LLVMValueRef splane = LLVMBuildNSWMul(b, lc.iv, ci64(cg, w->h * w->w), "");
            int64_t rows = (w->h - a + w->sh - 1) / w->sh, cols = (w->w - bb + w->sw - 1) / w->sw;
            loop_begin(cg, &li, hp);
            LLVMValueRef drow = LLVMBuildNSWAdd(b, dplane, LLVMBuildNSWMul(b, li.iv, ci64(cg, wp), ""), "");
            LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, li.iv, ci64(cg, rows), "");
            LLVMValueRef ih = LLVMBuildSelect(b, in, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, li.iv, ci64(cg, w->sh), ""), ci64(cg, a), ""),
                                              ci64(cg, 0), "");
            LLVMValueRef srow = LLVMBuildNSWAdd(b, splane, LLVMBuildNSWMul(b, ih, ci64(cg, w->w), ""), "");
            if (cols > 0) {
                loop_begin(cg, &lj, cols);
                LLVMValueRef v = ld(cg, cg->f32, x, LLVMBuildNSWAdd(b, srow, LLVMBuildNSWAdd(b, LLVMBuildNSWMul(b, lj.iv, ci64(cg, w->sw), ""),
                                                                                       ci64(cg, bb), ""), ""));
                st(cg, cg->f32, ph, LLVMBuildNSWAdd(b, drow, lj.iv, ""), LLVMBuildSelect(b, in, v, cf32(cg, 0.0), ""));
                loop_end(cg, &lj);
            }
            if (cols < wp) {
                loop_begin(cg, &lj, wp - cols);
                st(cg, cg->f32, ph, LLVMBuildNSWAdd(b, drow, LLVMBuildNSWAdd(b, lj.iv, ci64(cg, cols), ""), ""), cf32(cg, 0.0));
                loop_end(cg, &lj);
            }
            loop_end(cg, &li);
        }
    loop_end(cg, &lc);
}

/* The GEMM of a packed Conv for one image, in its own function part(ctx, fns, part) with ctx =
 * {bufs, image}: the kernel hands it to irt_parallel, which runs shares of the output panels on
 * the runtime's threads (part -1: all of them on one). Buffers and the epilogue's operands are
 * loaded again inside it from the kernel's bufs. */
typedef struct ConvPart {
    ConvCtx *c;
    const Epi *e, *flat;
    int64_t groups, m, plane, n_parts;
    IrValueId w, bias, y;
    bool pointwise, phased, flat_ok;
    bool amx;       /* the GEMM on AMX (cpu/amx.c; packed holds its packed weights) */
    bool amx_im2col; /* ... over the implicit im2col (else B is a plain matrix) */
    uint32_t index;
    LLVMValueRef packed;  /* the weights in the GEMM's packed layout: a constant, */
    uint32_t packed_slot; /* or the kernel's derived buffer; neither: the weights as they are */
} ConvPart;

static void conv_part_body(Cg *cg, const ConvPart *a, LLVMValueRef img, LLVMValueRef part) {
    const LowerWin *wn = &a->c->w;
    LLVMBuilderRef b = cg->b;
    int64_t ohw = wn->oh * wn->ow, m = a->m, groups = a->groups;
    Epi e = *a->e, flat = *a->flat;
    epi_reload(cg, &e, &flat, a->y);
    LLVMValueRef src = a->phased ? buf(cg, ir_graph_num_values(cg->g) + 1 + a->index)
                                 : elem_ptr(cg, cg->f32, obuf(cg, ir_node_operand(cg->g, e.anchor, 0)),
                                            LLVMBuildMul(b, img, ci64(cg, wn->c * wn->h * wn->w), ""));
    LLVMValueRef wp = a->packed ? a->packed : a->packed_slot ? buf(cg, a->packed_slot) : obuf(cg, a->w);
    LLVMValueRef bp = a->bias ? obuf(cg, a->bias) : NULL;
    LLVMValueRef ybase = LLVMBuildMul(b, img, ci64(cg, groups * m * ohw), "");
    Loop lg = {0};
    if (groups > 1) loop_begin(cg, &lg, groups);
    LLVMValueRef grp = groups > 1 ? lg.iv : ci64(cg, 0);
    ConvPanel cp = {.cg = cg, .flat = &flat, .img = img, .chan0 = groups > 1 ? LLVMBuildMul(b, grp, ci64(cg, m), "") : NULL,
                    .rows = m};
    LLVMValueRef ch0 = groups > 1 ? cp.chan0 : ci64(cg, 0);
    LlvmPgemm pg = {.m = m, .n = ohw, .k = a->c->k, .lda = a->c->k, .ldb = ohw, .ldc = ohw,
                    .a = elem_ptr(cg, cg->f32, wp, LLVMBuildMul(b, ch0, ci64(cg, a->c->k), "")),
                    .b = elem_ptr(cg, cg->f32, src, LLVMBuildMul(b, grp, ci64(cg, a->c->cg_ * a->plane), "")),
                    .conv = a->pointwise ? NULL : wn, .phased = a->phased,
                    .c = elem_ptr(cg, cg->f32, e.ptr[0], LLVMBuildAdd(b, ybase, LLVMBuildMul(b, ch0, ci64(cg, ohw), ""), "")),
                    .bias = bp ? elem_ptr(cg, cg->f32, bp, ch0) : NULL, .bias_scale = 1.0, .simd_bits = cg->simd_bits,
                    .panel_done = a->flat_ok && epi_active(&e) ? conv_panel_done : NULL, .user = &cp,
                    .part = part, .n_parts = a->n_parts, .a_packed = a->packed || a->packed_slot};
    if (pg.panel_done && epi_vec_ok(cg, &flat)) {
        pg.panel_done = NULL;
        pg.epi_vec = conv_epi_vec;
        pg.epi_prefetch = conv_epi_prefetch;
    }
    if (!a->amx) llvm_pgemm_emit(b, cg->ab, cg->fn, &pg);
    else {
        if (a->amx_im2col) pg.k = llvm_amx_conv_k(wn); /* K padded to the tiles' 32 (zero weight rows there) */
        else { /* a plain matrix: the input, or a strided 1x1 Conv's phase plane (0, 0) */
            pg.conv = NULL;
            pg.phased = false;
            pg.ldb = a->phased ? a->plane : ohw;
        }
        llvm_amx_emit(b, cg->ab, cg->fn, &pg);
    }
    if (groups > 1) loop_end(cg, &lg);
}

/* A part function part(ctx = {bufs, image}, fns, part) being emitted: part_fn_enter points cg
 * at it (buffers are loaded from its own bufs) and gives the image; part_fn_leave returns cg to
 * the kernel. */
typedef struct PartSave {
    LLVMValueRef fn, bufs, fns;
    LLVMBuilderRef ab;
    LLVMBasicBlockRef block;
} PartSave;

static LLVMValueRef part_fn_enter(Cg *cg, PartSave *sv, LLVMValueRef *img) {
    LLVMValueRef fn = part_fn_new(cg);
    *sv = (PartSave){cg->fn, cg->bufs, cg->fns, cg->ab, LLVMGetInsertBlock(cg->b)};
    cg->ab = LLVMCreateBuilderInContext(cg->ctx);
    cg->fn = fn;
    cg->fns = LLVMGetParam(fn, 1);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(cg->ctx, fn, "entry");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->ctx, fn, "body");
    LLVMPositionBuilderAtEnd(cg->b, entry);
    LLVMPositionBuilderBefore(cg->ab, LLVMBuildBr(cg->b, body));
    LLVMPositionBuilderAtEnd(cg->b, body);
    LLVMValueRef ctx = LLVMGetParam(fn, 0), one = ci64(cg, 1);
    cg->bufs = LLVMBuildLoad2(cg->b, cg->ptr, ctx, "");
    *img = LLVMBuildLoad2(cg->b, cg->i64, LLVMBuildGEP2(cg->b, cg->ptr, ctx, &one, 1, ""), "");
    return fn;
}

static void part_fn_leave(Cg *cg, const PartSave *sv) {
    LLVMBuildRetVoid(cg->b);
    LLVMDisposeBuilder(cg->ab);
    cg->ab = sv->ab;
    cg->fn = sv->fn;
    cg->bufs = sv->bufs;
    cg->fns = sv->fns;
    LLVMPositionBuilderAtEnd(cg->b, sv->block);
}

static LLVMValueRef conv_part_fn(Cg *cg, const ConvPart *a) {
    PartSave sv;
    LLVMValueRef img, fn = part_fn_enter(cg, &sv, &img);
    conv_part_body(cg, a, img, LLVMGetParam(fn, 2));
    part_fn_leave(cg, &sv);
    return fn;
}

/* The epilogue e of a Conv viewed as [N, C, OH*OW] (flat): false when an operand's rows and
 * columns do not flatten that way (then the epilogue runs over the 4-D output afterwards). */
static bool conv_flat_epi(const Epi *e, const LowerWin *wn, Epi *flat) {
    *flat = *e;
    bool ok = e->orank == 4;
    flat->orank = 3;
    flat->od[2] = wn->oh * wn->ow;
    for (uint32_t j = 0; j < e->n_ops && ok; j++) {
        ok = e->strides[j][2] == e->strides[j][3] * wn->ow;
        flat->strides[j][2] = e->strides[j][3];
    }
    return ok;
}

/* ---- MatMul with constant weights through the packed GEMM ------------------------------------
 * C [M, N] = A [M, K] * W with W a constant of the graph packed at compile time
 * (llvm_pgemm_packed_b): the strips read the weights' panels in place, so nothing is packed per
 * call (OpenBLAS packs all of B on every call), the epilogue runs in registers (or over each
 * panel once it is final), and the panels split into parts for the runtime's threads at no
 * extra cost per part: the activations are the only operand both threads read. */
typedef struct MmPart {
    const Epi *flat3; /* the epilogue viewed as [1, M, N] */
    int64_t m, n, k, n_parts;
    IrValueId a, y;
    LLVMValueRef packed;  /* the packed weights: a constant, */
    uint32_t packed_slot; /* or the kernel's derived buffer */
    bool vec;
} MmPart;

static LLVMValueRef mm_part_fn(Cg *cg, const MmPart *a) {
    PartSave sv;
    LLVMValueRef img, fn = part_fn_enter(cg, &sv, &img);
    Epi flat = *a->flat3;
    epi_reload(cg, &flat, NULL, a->y);
    ConvPanel cp = {.cg = cg, .flat = &flat, .img = img, .rows = a->m};
    LlvmPgemm pg = {.m = a->m, .n = a->n, .k = a->k, .lda = a->k, .ldb = a->n, .ldc = a->n, .a = obuf(cg, a->a),
                    .b = a->packed ? a->packed : buf(cg, a->packed_slot), .c = flat.ptr[0], .bias_scale = 1.0,
                    .simd_bits = cg->simd_bits, .user = &cp, .part = LLVMGetParam(fn, 2), .n_parts = a->n_parts,
                    .b_packed = true};
    if (epi_active(&flat)) {
        if (a->vec) {
            pg.epi_vec = conv_epi_vec;
            pg.epi_prefetch = conv_epi_prefetch;
        } else
            pg.panel_done = conv_panel_done;
    }
    llvm_pgemm_emit(cg->b, cg->ab, cg->fn, &pg);
    part_fn_leave(cg, &sv);
    return fn;
}

/* Where the packed GEMM with packed weights replaces the BLAS call: AVX2 targets, 5 to
 * MM_PACKED_MAX_M rows (1-4 are GEMVs). Against OpenBLAS (bench/matmul_ab.sh, EPYC Zen 3,
 * docs/cpu_speed.md): 0.35-0.5x at 8-48 rows and two threads, 0.8-0.95x at 64-96 rows, even
 * at 128 and 256; AVX-512 targets keep the BLAS call (not measured there). */
#define MM_PACKED_MAX_M 128
static bool matmul_packed_fits(const Cg *cg, int64_t m, int64_t n, int64_t k) {
    return (cg->simd_bits & ~(unsigned)LLVM_SIMD_AMX) == 256 && m > 4 && m <= MM_PACKED_MAX_M && n > 0 && k > 0;
}

/* The weights wd (B [k, n], or with tb [n, k]) in the packed GEMM's layout as the kernel's
 * derived data (llvm_pgemm_packed_b). */
static IrStatus packed_b_data(Cg *cg, const float *wd, int64_t k, int64_t n, bool tb, LLVMValueRef *global, uint32_t *slot) {
    return derived_data(cg, llvm_pgemm_packed_b(cg->simd_bits, k, n, wd, tb), (size_t)llvm_pgemm_packed_b_floats(cg->simd_bits, k, n) * 4,
                        "irtool.packed_b", global, slot);
}

/* The MatMul or Gemm of c (A [M, K] dense, B [K, N] or with tb [N, K], shared by every row; a
 * Gemm's alpha 1) with its epilogue flat2 (viewed as [M, N]; a Gemm's C as its bias operand)
 * through the packed GEMM when B is a constant and the rule takes the shape: true with *status
 * set; false (nothing emitted) to use the BLAS path. */
static bool gen_matmul_packed(Cg *cg, const GemmCtx *c, IrValueId va, IrValueId vb, const Epi *flat2, IrStatus *status) {
    const IrGraph *g = cg->g;
    if (c->ta || c->alpha != 1.0 || c->lda != c->k || c->ldb != (c->tb ? c->k : c->n) || !matmul_packed_fits(cg, c->m, c->n, c->k))
        return false;
    IrValueId wo = lower_outer_value(g, cg->group, vb);
    const float *wd = lower_value_dtype(g, wo) == IR_DTYPE_F32 ? lower_value_const_data(g, wo) : NULL;
    if (!wd) return false;
    Epi flat3 = *flat2;
    flat3.orank = 3;
    flat3.od[0] = 1;
    flat3.od[1] = c->m;
    flat3.od[2] = c->n;
    for (uint32_t j = 0; j < flat3.n_ops; j++) {
        flat3.strides[j][2] = flat2->strides[j][1];
        flat3.strides[j][1] = flat2->strides[j][0];
        flat3.strides[j][0] = 0;
    }
    LlvmPgemm shape = {.n = c->n, .simd_bits = cg->simd_bits};
    MmPart a = {.flat3 = &flat3, .m = c->m, .n = c->n, .k = c->k, .a = va, .y = ir_node_result(g, cg->node, 0),
                .n_parts = part_count(llvm_pgemm_units(&shape), (double)c->m * (double)c->n * (double)c->k),
                .vec = epi_active(&flat3) && epi_vec_ok(cg, &flat3)};
    *status = packed_b_data(cg, wd, c->k, c->n, c->tb != 0, &a.packed, &a.packed_slot);
    if (*status) return true;
    LLVMValueRef part = mm_part_fn(cg, &a);
    LLVMBuilderRef b = cg->b;
    LLVMValueRef ctx = LLVMBuildArrayAlloca(cg->ab, cg->ptr, ci64(cg, 2), ""), one = ci64(cg, 1);
    LLVMBuildStore(b, cg->bufs, ctx);
    LLVMBuildStore(b, ci64(cg, 0), LLVMBuildGEP2(b, cg->ptr, ctx, &one, 1, ""));
    call_parallel(cg, a.n_parts, part, ctx);
    return true;
}

/* ---- the same with run-time rows (cpu/dyn.c: a MatMul whose batch or sequence is a symbol) --- */

LLVMValueRef cpu_matmul_packed_when(LlvmEmit *e, IrValueId vb, LLVMValueRef rows, int64_t k, int64_t n) {
    Cg *cg = e->owner;
    if (!cg || !matmul_packed_fits(cg, MM_PACKED_MAX_M, n, k) || lower_value_dtype(e->g, vb) != IR_DTYPE_F32 ||
        !lower_value_const_data(e->g, vb))
        return NULL;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    if (!lower_value_shape(e->g, vb, &r, d) || ir_shape_numel(r, d) != k * n || d[r - 1] != n) return NULL;
    LLVMValueRef lo = LLVMBuildICmp(e->b, LLVMIntSGT, rows, ci64(cg, 4), ""); /* 1-4 rows: the BLAS path */
    return LLVMBuildAnd(e->b, lo, LLVMBuildICmp(e->b, LLVMIntSLE, rows, ci64(cg, MM_PACKED_MAX_M), ""), "");
}

/* The product in its own function part(ctx, fns, part) handed to irt_parallel, ctx = {A, C,
 * packed B, rows, parts}: parts of the column panels as the static kernel's, their count for
 * this run's rows by the same rule (part_count). */
IrStatus cpu_matmul_packed_rows(LlvmEmit *e, IrValueId vb, LLVMValueRef a, LLVMValueRef c, LLVMValueRef rows, int64_t k, int64_t n) {
    Cg *cg = e->owner;
    LLVMValueRef packed;
    uint32_t slot;
    IrStatus s = packed_b_data(cg, lower_value_const_data(e->g, vb), k, n, false, &packed, &slot);
    if (s) return s;
    LlvmPgemm shape = {.n = n, .simd_bits = cg->simd_bits};
    int64_t units = llvm_pgemm_units(&shape), most = units < 16 ? units : 16;
    LLVMBuilderRef b = e->b;
    /* parts: one per PART_WORK multiply-adds of this run, 1 to min(16, panels) */
    LLVMValueRef np = LLVMBuildSDiv(b, LLVMBuildMul(b, rows, ci64(cg, n * k), ""), ci64(cg, (int64_t)PART_WORK), "");
    np = lo_iclamp(e, np, ci64(cg, 1), ci64(cg, most));
    LLVMValueRef vals[5] = {a, c, packed ? packed : lo_buf(e, slot), rows, np};
    LLVMValueRef ctx = LLVMBuildArrayAlloca(e->ab, cg->i64, ci64(cg, 5), "");
    for (int i = 0; i < 5; i++) {
        LLVMValueRef idx = ci64(cg, i);
        LLVMBuildStore(b, vals[i], LLVMBuildGEP2(b, cg->i64, ctx, &idx, 1, ""));
    }
    LLVMValueRef fn = part_fn_new(cg);
    LLVMBuilderRef pb = LLVMCreateBuilderInContext(cg->ctx), pab = LLVMCreateBuilderInContext(cg->ctx);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(cg->ctx, fn, "entry"), body = LLVMAppendBasicBlockInContext(cg->ctx, fn, "body");
    LLVMPositionBuilderAtEnd(pb, entry);
    LLVMPositionBuilderBefore(pab, LLVMBuildBr(pb, body));
    LLVMPositionBuilderAtEnd(pb, body);
    LLVMValueRef got[5], pctx = LLVMGetParam(fn, 0);
    for (int i = 0; i < 5; i++) {
        LLVMValueRef idx = ci64(cg, i);
        got[i] = LLVMBuildLoad2(pb, i < 3 ? cg->ptr : cg->i64, LLVMBuildGEP2(pb, cg->i64, pctx, &idx, 1, ""), "");
    }
    LlvmPgemm pg = {.m = MM_PACKED_MAX_M, .m_rt = got[3], .n = n, .k = k, .lda = k, .ldb = n, .ldc = n, .a = got[0], .b = got[2],
                    .c = got[1], .bias_scale = 1.0, .simd_bits = cg->simd_bits, .b_packed = true, .part = LLVMGetParam(fn, 2),
                    .n_parts_rt = got[4]};
    llvm_pgemm_emit(pb, pab, fn, &pg);
    LLVMBuildRetVoid(pb);
    LLVMDisposeBuilder(pb);
    LLVMDisposeBuilder(pab);
    LLVMTypeRef ps[4] = {cg->i64, cg->ptr, cg->ptr, cg->ptr};
    LLVMValueRef idx = ci64(cg, IRT_FN_PARALLEL);
    LLVMValueRef par = LLVMBuildLoad2(b, cg->ptr, LLVMBuildGEP2(b, cg->ptr, e->fns, &idx, 1, ""), "");
    LLVMValueRef args[4] = {np, fn, ctx, e->fns};
    LLVMBuildCall2(b, LLVMFunctionType(cg->vd, ps, 4, 0), par, args, 4, "");
    return IR_OK;
}

/* Parts a packed Conv's GEMM is split into: its work units (panels or output rows), at most 16. */
#define CONV_MAX_PARTS 16

static IrStatus gen_conv_packed(Cg *cg, ConvCtx *c, int64_t groups, int64_t m, IrValueId w, IrValueId bias,
                                bool pointwise, uint32_t index, Epi *e) {
    const LowerWin *wn = &c->w;
    int64_t ohw = wn->oh * wn->ow;
    Epi flat;
    bool flat_ok = conv_flat_epi(e, wn, &flat);
    bool phased = !pointwise && llvm_conv_phase_floats(wn) > 0;
    LlvmPgemm shape = {.n = ohw, .conv = pointwise ? NULL : wn, .phased = phased, .simd_bits = cg->simd_bits};
    int64_t units = llvm_pgemm_units(&shape);
    ConvPart a = {.c = c, .e = e, .flat = &flat, .groups = groups, .m = m, .plane = wn->h * wn->w,
                  .n_parts = part_count(units, (double)groups * (double)m * (double)ohw * (double)c->k), .w = w, .bias = bias,
                  .y = ir_node_result(cg->g, cg->node, 0), .pointwise = pointwise,
                  .phased = phased, .flat_ok = flat_ok, .index = index};
    if (phased) a.plane = llvm_conv_phase_floats(wn) / wn->c;
    /* Constant weights are packed at compile time in the order the GEMM reads them: each strip
     * of 8 output channels and each K block one contiguous run, which the hardware prefetcher
     * follows (row-major, a strip read 8 rows of a few cache lines each, a page apart). */
    IrValueId wo = lower_outer_value(cg->g, cg->group, w);
    const float *wd = lower_value_dtype(cg->g, wo) == IR_DTYPE_F32 ? lower_value_const_data(cg->g, wo) : NULL;
    /* On AMX targets a 1x1 Conv of one group with constant weights multiplies on the tiles
     * (cpu/amx.c) when its epilogue runs in registers (or there is none); strided without pads,
     * its B is the phase plane (0, 0), a plain matrix with a row stride of the phases' plane. */
    int64_t hp, wp;
    llvm_conv_plane(wn, phased, &hp, &wp);
    bool plain = pointwise || (phased && wn->kh == 1 && wn->kw == 1 && wn->pt == 0 && wn->pl == 0 && hp == wn->oh && wp == wn->ow);
    a.amx_im2col = !plain && llvm_amx_conv_fits(wn, m);
    a.amx = (cg->simd_bits & LLVM_SIMD_AMX) && wd && groups == 1 && (plain ? llvm_amx_fits(m, ohw, c->k) : a.amx_im2col) &&
            (!epi_active(e) || (flat_ok && epi_vec_ok(cg, &flat)));
    /* an infinite or NaN weight: its bf16 parts cannot carry it (inf times a zero part of B is NaN) */
    for (int64_t i = 0; a.amx && i < m * c->k; i++) a.amx = isfinite(wd[i]);
    if (a.amx) {
        int64_t kp = a.amx_im2col ? llvm_amx_conv_k(wn) : c->k;
        int64_t au = llvm_amx_units(m, ohw, kp);
        a.n_parts = part_count(au, (double)m * (double)ohw * (double)kp);
        IrStatus s = derived_data(cg, llvm_amx_packed_a(m, kp, wd, c->k), (size_t)(m * kp) * 6, "irtool.amx_a", &a.packed,
                                  &a.packed_slot);
        if (s) return s;
    } else if (wd) {
        IrStatus s = derived_data(cg, llvm_pgemm_packed_a_for(cg->simd_bits, groups, m, c->k, wd), (size_t)(groups * m * c->k) * 4,
                                  "irtool.packed_a", &a.packed, &a.packed_slot);
        if (s) return s;
    }
    LLVMValueRef part = conv_part_fn(cg, &a);
    LLVMBuilderRef b = cg->b;
    LLVMValueRef ctx = LLVMBuildArrayAlloca(cg->ab, cg->ptr, ci64(cg, 2), "");
    Loop li;
    loop_begin(cg, &li, wn->n);
    if (phased) {
        LLVMValueRef src = elem_ptr(cg, cg->f32, c->x, LLVMBuildMul(b, li.iv, ci64(cg, wn->c * wn->h * wn->w), ""));
        conv_split_phases(cg, wn, src, buf(cg, ir_graph_num_values(cg->g) + 1 + index));
    }
    LLVMValueRef one = ci64(cg, 1);
    LLVMBuildStore(b, cg->bufs, ctx);
    LLVMBuildStore(b, li.iv, LLVMBuildGEP2(b, cg->ptr, ctx, &one, 1, ""));
    call_parallel(cg, a.n_parts, part, ctx);
    if (!flat_ok && epi_active(e)) {
        LLVMValueRef start[IR_MAX_RANK] = {li.iv};
        int64_t len[IR_MAX_RANK] = {1, groups * m, wn->oh, wn->ow};
        epi_box(cg, e, start, len);
    }
    loop_end(cg, &li);
    return IR_OK;
}

/* A Conv through Winograd (cpu/winograd.c), one image at a time, band by band of tile rows,
 * each band in three phases, each phase a function the kernel hands to irt_parallel (ctx =
 * {bufs, image, band}; buffers and the epilogue's operands are loaded again inside it). The epilogue runs in registers where it can (as the
 * packed GEMM's), else over each image after the last phase. */
typedef struct WgPart {
    const ConvCtx *c;
    const Epi *e, *flat;
    int tile;
    int64_t m;
    IrValueId x, w, bias, y;
    LLVMValueRef u;   /* the transformed weights: a constant, */
    uint32_t u_slot;  /* or the kernel's derived buffer */
    const float *wd;
    bool vec;
    uint32_t index;
} WgPart;

static LLVMValueRef wg_part_fn(Cg *cg, const WgPart *a, int phase, int64_t n_parts) {
    PartSave sv;
    LLVMValueRef img, fn = part_fn_enter(cg, &sv, &img);
    LLVMBuilderRef b = cg->b;
    LLVMValueRef part = LLVMGetParam(fn, 2);
    const LowerWin *wn = &a->c->w;
    Epi e = *a->e, flat = *a->flat;
    epi_reload(cg, &e, &flat, a->y);
    ConvPanel cp = {.cg = cg, .flat = &flat, .img = img, .rows = a->m};
    LlvmWinograd wg = {.w = wn, .tile = a->tile, .m_out = a->m, .weights = a->wd, .simd_bits = cg->simd_bits, .u = a->u ? a->u : buf(cg, a->u_slot),
                       .x = elem_ptr(cg, cg->f32, obuf(cg, a->x), LLVMBuildMul(b, img, ci64(cg, wn->c * wn->h * wn->w), "")),
                       .y = elem_ptr(cg, cg->f32, e.ptr[0], LLVMBuildMul(b, img, ci64(cg, a->m * wn->oh * wn->ow), "")),
                       .scratch = buf(cg, ir_graph_num_values(cg->g) + 1 + a->index),
                       .bias = a->bias ? obuf(cg, a->bias) : NULL, .epi_vec = a->vec ? conv_epi_vec : NULL, .user = &cp};
    int64_t units = llvm_winograd_units(&wg, phase);
    LLVMValueRef lo, hi;
    llvm_part_range(b, part, ci64(cg, units), ci64(cg, n_parts), &lo, &hi);
    LLVMValueRef two = ci64(cg, 2), band = LLVMBuildLoad2(b, cg->i64, LLVMBuildGEP2(b, cg->ptr, LLVMGetParam(fn, 0), &two, 1, ""), "");
    llvm_winograd_phase(b, cg->ab, fn, &wg, phase, band, lo, hi);
    part_fn_leave(cg, &sv);
    return fn;
}

static IrStatus gen_conv_winograd(Cg *cg, ConvCtx *c, int tile, int64_t m, IrValueId x, IrValueId w, IrValueId bias,
                                  uint32_t index, Epi *e) {
    const LowerWin *wn = &c->w;
    LLVMBuilderRef b = cg->b;
    Epi flat;
    bool flat_ok = conv_flat_epi(e, wn, &flat);
    WgPart a = {.c = c, .e = e, .flat = &flat, .tile = tile, .m = m, .x = x, .w = w, .bias = bias,
                .y = ir_node_result(cg->g, cg->node, 0), .vec = flat_ok && epi_active(e) && epi_vec_ok(cg, &flat),
                .wd = lower_value_const_data(cg->g, lower_outer_value(cg->g, cg->group, w)), .index = index};
    if (!a.wd) return unsupported(cg, "Conv: Winograd weights are not constant");
    LlvmWinograd wg = {.w = wn, .tile = tile, .m_out = m, .weights = a.wd, .simd_bits = cg->simd_bits};
    size_t ub = 0;
    float *ud = llvm_winograd_weights(&wg, &ub);
    IrStatus us = derived_data(cg, ud, ub, "irtool.winograd_weights", &a.u, &a.u_slot);
    if (us) return us;
    LLVMValueRef fns[3];
    int64_t parts[3];
    for (int ph = 0; ph < 3; ph++) {
        int64_t units = llvm_winograd_units(&wg, ph);
        parts[ph] = units < CONV_MAX_PARTS ? units : CONV_MAX_PARTS;
        fns[ph] = wg_part_fn(cg, &a, ph, parts[ph]);
    }
    /* ctx = {bufs, image, band} */
    LLVMValueRef ctx = LLVMBuildArrayAlloca(cg->ab, cg->ptr, ci64(cg, 3), ""), one = ci64(cg, 1), two = ci64(cg, 2);
    Loop li, lb;
    loop_begin(cg, &li, wn->n);
    LLVMBuildStore(b, cg->bufs, ctx);
    LLVMBuildStore(b, li.iv, LLVMBuildGEP2(b, cg->ptr, ctx, &one, 1, ""));
    loop_begin(cg, &lb, llvm_winograd_bands(&wg));
    LLVMBuildStore(b, lb.iv, LLVMBuildGEP2(b, cg->ptr, ctx, &two, 1, ""));
    for (int ph = 0; ph < 3; ph++) call_parallel(cg, parts[ph], fns[ph], ctx);
    loop_end(cg, &lb);
    if (epi_active(e) && !a.vec) {
        LLVMValueRef start[IR_MAX_RANK] = {li.iv};
        int64_t len[IR_MAX_RANK] = {1, m, wn->oh, wn->ow};
        epi_box(cg, e, start, len);
    }
    loop_end(cg, &li);
    return IR_OK;
}

/* A depthwise or grouped Conv through cpu/depthwise.c, one image at a time, its output channels
 * shared out in parts (ctx = {bufs, image}); the epilogue in registers where it can be, else over
 * each image afterwards. */
typedef struct DwPart {
    const LowerConvGeom *cv;
    const Epi *e, *flat;
    int64_t n_parts;
    IrValueId x, w, bias, y;
    bool vec;
} DwPart;

static LLVMValueRef dw_part_fn(Cg *cg, const DwPart *a) {
    PartSave sv;
    LLVMValueRef img, fn = part_fn_enter(cg, &sv, &img);
    LLVMBuilderRef b = cg->b;
    const LowerWin *wn = &a->cv->w;
    int64_t units = a->cv->oc;
    Epi e = *a->e, flat = *a->flat;
    epi_reload(cg, &e, &flat, a->y);
    ConvPanel cp = {.cg = cg, .flat = &flat, .img = img, .rows = units};
    LlvmDepthwise dw = {.w = wn, .groups = a->cv->groups, .m = units, .wt = obuf(cg, a->w),
                        .x = elem_ptr(cg, cg->f32, obuf(cg, a->x), LLVMBuildMul(b, img, ci64(cg, wn->c * wn->h * wn->w), "")),
                        .y = elem_ptr(cg, cg->f32, e.ptr[0], LLVMBuildMul(b, img, ci64(cg, units * wn->oh * wn->ow), "")),
                        .bias = a->bias ? obuf(cg, a->bias) : NULL, .simd_bits = cg->simd_bits,
                        .epi_vec = a->vec ? conv_epi_vec : NULL, .user = &cp};
    /* this part's channels */
    LLVMValueRef lo, hi;
    llvm_part_range(b, LLVMGetParam(fn, 2), ci64(cg, units), ci64(cg, a->n_parts), &lo, &hi);
    llvm_depthwise_emit(b, cg->ab, fn, &dw, lo, hi);
    part_fn_leave(cg, &sv);
    return fn;
}

/* The images of a direct Conv one at a time, each shared out in n_parts by part_fn (ctx =
 * {bufs, image}); the epilogue over the image after it unless the kernel applied it in registers
 * (vec). */
static void images_in_parts(Cg *cg, const LowerConvGeom *cv, Epi *e, LLVMValueRef part_fn, int64_t n_parts, bool vec) {
    const LowerWin *wn = &cv->w;
    LLVMBuilderRef b = cg->b;
    LLVMValueRef ctx = LLVMBuildArrayAlloca(cg->ab, cg->ptr, ci64(cg, 2), ""), one = ci64(cg, 1);
    Loop li;
    loop_begin(cg, &li, wn->n);
    LLVMBuildStore(b, cg->bufs, ctx);
    LLVMBuildStore(b, li.iv, LLVMBuildGEP2(b, cg->ptr, ctx, &one, 1, ""));
    call_parallel(cg, n_parts, part_fn, ctx);
    if (epi_active(e) && !vec) {
        LLVMValueRef start[IR_MAX_RANK] = {li.iv};
        int64_t len[IR_MAX_RANK] = {1, cv->oc, wn->oh, wn->ow};
        epi_box(cg, e, start, len);
    }
    loop_end(cg, &li);
}

static IrStatus gen_conv_depthwise(Cg *cg, const LowerConvGeom *cv, IrValueId x, IrValueId w, IrValueId bias, Epi *e) {
    const LowerWin *wn = &cv->w;
    Epi flat;
    bool flat_ok = conv_flat_epi(e, wn, &flat);
    DwPart a = {.cv = cv, .e = e, .flat = &flat, .n_parts = part_count(cv->oc, (double)cv->oc * (double)cv->ohw * (double)cv->k), .x = x,
                .w = w, .bias = bias, .y = ir_node_result(cg->g, cg->node, 0),
                .vec = flat_ok && epi_active(e) && epi_vec_ok(cg, &flat)};
    images_in_parts(cg, cv, e, dw_part_fn(cg, &a), a.n_parts, a.vec);
    return IR_OK;
}

/* A 1x1 Conv of one group with constant weights through cpu/pointwise.c (AVX2 targets), one
 * image at a time, its row blocks shared out in parts (ctx = {bufs, image}); the epilogue as the
 * depthwise kernel's. */
typedef struct PwPart {
    const LowerConvGeom *cv;
    const Epi *e, *flat;
    int64_t n_parts;
    IrValueId x, bias, y;
    LLVMValueRef packed; /* the packed weights: a constant, */
    uint32_t packed_slot; /* or the kernel's derived buffer */
    bool vec;
} PwPart;

static LLVMValueRef pw_part_fn(Cg *cg, const PwPart *a) {
    PartSave sv;
    LLVMValueRef img, fn = part_fn_enter(cg, &sv, &img);
    LLVMBuilderRef b = cg->b;
    const LowerWin *wn = &a->cv->w;
    int64_t m = a->cv->oc, ohw = wn->oh * wn->ow, units = llvm_pointwise_units(m, ohw);
    Epi e = *a->e, flat = *a->flat;
    epi_reload(cg, &e, &flat, a->y);
    ConvPanel cp = {.cg = cg, .flat = &flat, .img = img, .rows = m};
    LlvmPointwise pw = {.m = m, .n = ohw, .k = wn->c, .wp = a->packed ? a->packed : buf(cg, a->packed_slot),
                        .x = elem_ptr(cg, cg->f32, obuf(cg, a->x), LLVMBuildMul(b, img, ci64(cg, wn->c * ohw), "")),
                        .y = elem_ptr(cg, cg->f32, e.ptr[0], LLVMBuildMul(b, img, ci64(cg, m * ohw), "")),
                        .bias = a->bias ? obuf(cg, a->bias) : NULL, .epi_vec = a->vec ? conv_epi_vec : NULL, .user = &cp};
    LLVMValueRef lo, hi;
    llvm_part_range(b, LLVMGetParam(fn, 2), ci64(cg, units), ci64(cg, a->n_parts), &lo, &hi);
    llvm_pointwise_emit(b, cg->ab, fn, &pw, lo, hi);
    part_fn_leave(cg, &sv);
    return fn;
}

static IrStatus gen_conv_pointwise(Cg *cg, const LowerConvGeom *cv, const float *wd, IrValueId x, IrValueId bias, Epi *e) {
    const LowerWin *wn = &cv->w;
    Epi flat;
    bool flat_ok = conv_flat_epi(e, wn, &flat);
    int64_t ohw = wn->oh * wn->ow, units = llvm_pointwise_units(cv->oc, ohw);
    PwPart a = {.cv = cv, .e = e, .flat = &flat, .n_parts = part_count(units, (double)cv->oc * (double)ohw * (double)wn->c), .x = x,
                .bias = bias, .y = ir_node_result(cg->g, cg->node, 0), .vec = flat_ok && epi_active(e) && epi_vec_ok(cg, &flat)};
    size_t bytes = 0;
    float *packed = llvm_pointwise_pack(cv->oc, ohw, wn->c, wd, &bytes);
    IrStatus s = derived_data(cg, packed, bytes, "irtool.pointwise_w", &a.packed, &a.packed_slot);
    if (s) return s;
    images_in_parts(cg, cv, e, pw_part_fn(cg, &a), a.n_parts, a.vec);
    return IR_OK;
}

static IrStatus gen_conv_node(Cg *cg, IrNodeId n, LLVMValueRef ybuf, uint32_t index, Epi *e) {
    const IrGraph *g = cg->g;
    IrValueId x = ir_node_operand(g, n, 0), w = ir_node_operand(g, n, 1);
    IrValueId bias = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    LowerConvGeom cv;
    const char *why = lower_conv_read(g, n, &cv);
    if (why) return unsupported(cg, why);
    ConvCtx c = {.w = cv.w, .cg_ = cv.cg, .k = cv.k, .x = obuf(cg, x)};
    int64_t groups = cv.groups, ocg = cv.ocg, ohw = cv.ohw;
    if (conv_direct(g, n, cg->simd_bits)) return gen_conv_depthwise(cg, &cv, x, w, bias, e);
    bool pointwise = lower_conv_pointwise(g, n), packed = conv_packed(g, n, cg->simd_bits);
    if (pointwise && !packed && groups == 1 && llvm_pointwise_fits(ocg, ohw, c.k, cg->simd_bits)) {
        IrValueId wo = lower_outer_value(g, cg->group, w);
        const float *wd = lower_value_dtype(g, wo) == IR_DTYPE_F32 ? lower_value_const_data(g, wo) : NULL;
        if (wd) return gen_conv_pointwise(cg, &cv, wd, x, bias, e);
    }
    /* before the im2col path: on AVX2 the Convs Winograd takes are not packed ones */
    int tile = !pointwise ? conv_winograd(g, cg->group ? cg->group : n, n, cg->simd_bits) : 0;
    if (tile) return gen_conv_winograd(cg, &c, tile, ocg, x, w, bias, index, e);
    if (!pointwise && !packed) {
        c.col = buf(cg, ir_graph_num_values(g) + 1 + index); /* the im2col scratch slot */
    }
    if (bias && !packed) {
        int64_t sb[IR_MAX_RANK] = {0, 1, 0, 0};
        epi_bias(cg, e, bias, sb, 1.0);
    }
    if (packed) return gen_conv_packed(cg, &c, groups, ocg, w, bias, pointwise, index, e);
    GemmCtx gc = {.a = obuf(cg, w), .b = pointwise ? c.x : c.col, .c = ybuf, .m = ocg, .n = ohw, .k = c.k, .lda = c.k,
                  .ldb = ohw, .alpha = 1.0};
    /* one (image, group) at a time */
    Loop li;
    loop_begin(cg, &li, c.w.n * groups);
    LLVMBuilderRef b = cg->b;
    LLVMValueRef ig = li.iv, grp = LLVMBuildSRem(b, ig, ci64(cg, groups), "");
    LLVMValueRef xoff = LLVMBuildMul(b, ig, ci64(cg, c.cg_ * c.w.h * c.w.w), "");
    if (!pointwise) {
        LLVMValueRef offs[2] = {ci64(cg, 0), xoff};
        im2col_body(cg, offs, &c);
    }
    RowBlock rbk = {.gc = &gc, .e = e, .a_base = LLVMBuildMul(b, grp, ci64(cg, ocg * c.k), ""),
                    .b_base = pointwise ? xoff : ci64(cg, 0), .c_base = LLVMBuildMul(b, ig, ci64(cg, ocg * ohw), ""),
                    .a_row = c.k, .box_row = 1, .len = {1, 0, c.w.oh, c.w.ow}};
    rbk.start[0] = groups == 1 ? ig : LLVMBuildSDiv(b, ig, ci64(cg, groups), "");
    rbk.start[1] = groups == 1 ? NULL : LLVMBuildMul(b, grp, ci64(cg, ocg), "");
    row_blocks(cg, &rbk);
    loop_end(cg, &li);
    return IR_OK;
}

static IrStatus gen_contraction(Cg *cg, uint32_t index) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node, anchor = n;
    if (ir_node_op(g, n) == IR_OP_FUSED) {
        cg->group = n;
        anchor = ir_region_first(g, ir_node_region_at(g, n, 0));
    }
    Epi e;
    LLVMValueRef ybuf = buf(cg, ir_node_result(g, n, 0));
    IrStatus s = epi_init(cg, &e, anchor, ybuf);
    if (!s) {
        IrOp op = ir_node_op(g, anchor); /* Conv, Gemm, else MatMul */
        s = op == IR_OP_CONV   ? gen_conv_node(cg, anchor, ybuf, index, &e)
            : op == IR_OP_GEMM ? gen_gemm_node(cg, anchor, ybuf, &e)
                               : gen_matmul_node(cg, anchor, ybuf, &e);
    }
    free(e.vals);
    cg->group = 0;
    return s;
}

/* ---- per node ----------------------------------------------------------------------------- */

/* ---- the op table's static-shape emitters (backend/cpu/cpu_ops.def) ---------------------------
 * Each takes the kernel being emitted (e->owner is the Cg) and picks its family's path: the f32
 * kernels of this file, or the typed emitters of the family files for other dtypes and cases. */

static Cg *cg_of(LlvmEmit *e) { return e->owner; }

bool cpu_concat_placed(LlvmEmit *e) {
    const Cg *cg = e->owner;
    if (!cg || !cg->simd_bits) return false; /* the plan places Concat inputs in place on vector targets */
    uint32_t *uses = calloc(ir_graph_num_values(e->g) + 1, sizeof *uses);
    if (!uses) return false; /* copying is right either way */
    ir_graph_count_uses(e->g, uses);
    bool in_place = lower_concat_in_place(e->g, e->node, uses);
    free(uses);
    return in_place;
}

/* Whether every operand and result of n is f32 (absent ones aside). */
static bool all_f32(const IrGraph *g, IrNodeId n) {
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (v && ir_type_dtype(g, ir_value_type(g, v)) != IR_DTYPE_F32) return false;
    }
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId v = ir_node_result(g, n, i);
        if (v && ir_type_dtype(g, ir_value_type(g, v)) != IR_DTYPE_F32) return false;
    }
    return true;
}

/* Whether every operand and result of n has a static shape. */
static bool all_static(const IrGraph *g, IrNodeId n) {
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (v && !lower_value_shape(g, v, &r, d)) return false;
    }
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId v = ir_node_result(g, n, i);
        if (v && !lower_value_shape(g, v, &r, d)) return false;
    }
    return true;
}

/* An elementwise node this file's f32 kernel computes (else the typed emitter does). */
static bool ew_f32_path(const IrGraph *g, IrNodeId n) {
    IrOp op = ir_node_op(g, n);
    return ew_supported(op) && op != IR_OP_WHERE && all_f32(g, n);
}

bool cpu_parts_ew(const IrGraph *g, IrNodeId n) { return ew_f32_path(g, n); }
bool cpu_parts_group(const IrGraph *g, IrNodeId n) { return !llvm_fused_epilogue_group(g, n, true); }
bool cpu_parts_always(const IrGraph *g, IrNodeId n) { return (void)g, (void)n, true; }

/* Static f32 ops: this file's vector kernel; other dtypes and run-time shapes: the typed one. */
IrStatus cpu_emit_ew(LlvmEmit *e) {
    return ew_f32_path(e->g, e->node) && all_static(e->g, e->node) ? gen_elementwise(cg_of(e), ir_node_op(e->g, e->node))
                                                                     : llvm_ops_ew_gen(e);
}

IrStatus cpu_emit_contraction(LlvmEmit *e) { return gen_contraction(cg_of(e), e->index); }

/* Conv: 2-D f32 through the GEMM paths here; other ranks, dtypes and SAME pads in cpu/conv.c. */
IrStatus cpu_emit_conv(LlvmEmit *e) {
    return llvm_ops_conv_claims(e->g, e->node) ? llvm_ops_conv_gen(e) : gen_contraction(cg_of(e), e->index);
}

IrStatus cpu_emit_pool(LlvmEmit *e) {
    if (llvm_ops_conv_claims(e->g, e->node)) return llvm_ops_pool_nd_gen(e);
    return gen_pool(cg_of(e), ir_node_op(e->g, e->node) == IR_OP_MAX_POOL);
}

/* A fused group: a contraction with its epilogue, a row reduction with its neighbours, an
 * attention block, or elementwise members. */
IrStatus cpu_emit_fused(LlvmEmit *e) {
    Cg *cg = cg_of(e);
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    if (llvm_fused_epilogue_group(g, n, true)) return gen_contraction(cg, e->index);
    if (llvm_fused_row_group(g, n)) return gen_row_group(cg);
    if (llvm_fused_attention_group(g, n)) return cpu_attention_fits(g, n) ? cpu_attention_emit(e) : gen_attention_group(cg);
    return gen_fused_ew(cg);
}

static IrStatus gen_node_body(Cg *cg, uint32_t index) {
    const CpuOpRow *row = cpu_op_row(ir_node_op(cg->g, cg->node));
    if (!row->emit) return unsupported(cg, NULL);
    LlvmEmit e = emit_ctx(cg, index);
    if (row->flags & CPU_BLAS) cg->n_blas++;
    IrStatus s = row->emit(&e);
    cg->n_blas += e.uses_blas;
    return s;
}

/* Checks what every kernel assumes: static shapes on all operands and results. */
static IrStatus check_static(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    for (uint32_t i = 0; i < ir_node_num_operands(g, n) + ir_node_num_results(g, n); i++) {
        bool res = i >= ir_node_num_operands(g, n);
        IrValueId v = res ? ir_node_result(g, n, i - ir_node_num_operands(g, n)) : ir_node_operand(g, n, i);
        if (v && ir_type_is_container(g, ir_value_type(g, v))) {
            ir_diag_at_node(cg->diag, g, n, IR_SEV_ERROR,
                            "the llvm backend does not support %s values: '%s' of %s has an unsupported type "
                            "(sequences and optionals run in the interpreter only)",
                            ir_type_kind(g, ir_value_type(g, v)) == IR_TYPE_SEQ ? "sequence" : "optional",
                            ir_value_name(g, v), ir_op_name(ir_node_op(g, n)));
            return IR_EUNSUPPORTED;
        }
        if (v && !lower_value_shape(g, v, &r, d)) {
            ir_diag_at_node(cg->diag, g, n, IR_SEV_ERROR,
                            "the llvm backend needs static shapes, but '%s' of %s has a symbolic or unknown shape "
                            "(bind the symbols first: the run/bench commands specialize from the inputs)",
                            ir_value_name(g, v), ir_op_name(ir_node_op(g, n)));
            return IR_EUNSUPPORTED;
        }
    }
    return IR_OK;
}

/* The module's "irtool.blas" global says whether any of its kernels calls the BLAS GEMM (read
 * back by llvm_module_uses_blas before optimization, which drops it: it is unused). Every module
 * gets one, so a per-kernel module answers for itself. */
static void set_blas_flag(Cg *cg, bool uses) {
    LLVMValueRef flag = LLVMGetNamedGlobal(cg->mod, "irtool.blas");
    if (!flag) {
        flag = LLVMAddGlobal(cg->mod, cg->i32, "irtool.blas");
        LLVMSetInitializer(flag, LLVMConstInt(cg->i32, 0, 0));
        LLVMSetGlobalConstant(flag, 1);
        LLVMSetLinkage(flag, LLVMInternalLinkage);
    }
    if (uses) LLVMSetInitializer(flag, LLVMConstInt(cg->i32, 1, 0));
}

/* ---- kernels in parts ---------------------------------------------------------------------
 * Elementwise, row-reduction, attention and BatchNorm kernels over at least KERNEL_PART_MIN
 * elements run as KERNEL_PARTS parts on the runtime's pool (irt_parallel): the body goes into a
 * part function part(args, fns, part) and its one loop nest shares its outermost long loop out
 * (emit_nest); the kernel only calls irt_parallel. With one thread the parts run in turn. */
#define KERNEL_PARTS 16
#define KERNEL_PART_MIN (1 << 16)

static bool kernel_in_parts(const Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    const CpuOpRow *row = cpu_op_row(ir_node_op(g, n));
    bool ok = row->parts && row->parts(g, n);
    if (!ok || cg->simd_bits == 0) return false; /* CPU targets only (a CUDA build's CPU gate too) */
    int64_t most = 0;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n) + ir_node_num_results(g, n); i++) {
        uint32_t no = ir_node_num_operands(g, n);
        IrValueId v = i < no ? ir_node_operand(g, n, i) : ir_node_result(g, n, i - no);
        uint32_t r;
        int64_t d[IR_MAX_RANK];
        if (v && lower_value_shape(g, v, &r, d) && ir_shape_numel(r, d) > most) most = ir_shape_numel(r, d);
    }
    return most >= KERNEL_PART_MIN;
}

/* Moves emission into a new part function; the kernel's builders wait at its body. Part -1
 * (irt_parallel without workers) is the whole kernel. */
static LLVMValueRef begin_parts(Cg *cg) {
    LLVMValueRef pf = part_fn_new(cg);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(cg->ctx, pf, "entry");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->ctx, pf, "body");
    LLVMPositionBuilderAtEnd(cg->b, entry);
    LLVMValueRef term = LLVMBuildBr(cg->b, body);
    LLVMPositionBuilderBefore(cg->ab, term);
    LLVMPositionBuilderAtEnd(cg->b, body);
    cg->fn = pf;
    cg->bufs = LLVMGetParam(pf, 0);
    cg->fns = LLVMGetParam(pf, 1);
    cg->part = LLVMGetParam(pf, 2);
    cg->n_parts = KERNEL_PARTS;
    cg->part_used = false;
    return pf;
}

/* Ends the part function and, back in the kernel (body block `kbody`), hands it to irt_parallel. */
static void end_parts(Cg *cg, LLVMValueRef pf, LLVMBasicBlockRef kbody) {
    LLVMBuildRetVoid(cg->b);
    LLVMValueRef kfn = LLVMGetBasicBlockParent(kbody);
    cg->fn = kfn;
    cg->bufs = LLVMGetParam(kfn, 0);
    cg->fns = LLVMGetParam(kfn, 1);
    cg->part = NULL;
    cg->n_parts = 0;
    LLVMPositionBuilderBefore(cg->ab, LLVMGetBasicBlockTerminator(LLVMGetEntryBasicBlock(kfn)));
    LLVMPositionBuilderAtEnd(cg->b, kbody);
    call_parallel(cg, KERNEL_PARTS, pf, cg->bufs);
}

static IrStatus gen_node(Cg *cg, LLVMTypeRef kty, uint32_t index, const char *ext_name, LLVMValueRef *kfn) {
    *kfn = NULL;
    cg->slots.n = 0;
    cg->n_part_fns = 0;
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    /* string tensors: elements {data, len}; the ops whose row has a string emitter handle them,
     * other ops say so before any op rule does; string constants are blobs */
    const CpuOpRow *srow = cpu_op_row(ir_node_op(g, n));
    bool strings = srow->flags & CPU_STR_ALWAYS; /* integers or strings: the string emitter */
    for (uint32_t i = 0, no = ir_node_num_operands(g, n); i < no + ir_node_num_results(g, n); i++) {
        IrValueId v = i < no ? ir_node_operand(g, n, i) : ir_node_result(g, n, i - no);
        if (!v || ir_type_dtype(g, ir_value_type(g, v)) != IR_DTYPE_STRING) continue;
        bool handled = srow->emit_str != NULL;
        if (!handled || (i == 0 && ir_value_kind(g, v) == IR_VALUE_CONST)) {
            ir_diag_at_node(cg->diag, g, n, IR_SEV_ERROR, "the llvm backend does not support dtype string (%%%s of %s%s)",
                            ir_value_name(g, v), ir_op_name(ir_node_op(g, n)), handled ? ": a string constant" : "");
            return IR_EUNSUPPORTED;
        }
        strings = true;
    }
    bool dyn = llvm_dyn_node(g, n); /* dims known at run time only: backend/cpu/dyn.c */
    IrStatus s = dyn ? IR_OK : check_static(cg);
    if (s) return s;
    IrOp op = ir_node_op(cg->g, cg->node);
    const CpuOpRow *row = cpu_op_row(op);
    if (!dyn && !strings && !row->emit && !(row->flags & CPU_ONCE)) return unsupported(cg, NULL);
    if ((row->flags & CPU_ONCE) && !dyn) return IR_OK; /* bound to data made once */
    char name[32];
    snprintf(name, sizeof name, "k%u", index);
    cg->fn = LLVMAddFunction(cg->mod, ext_name ? ext_name : name, kty);
    if (!ext_name) LLVMSetLinkage(cg->fn, LLVMInternalLinkage);
    cg->bufs = LLVMGetParam(cg->fn, 0);
    cg->fns = LLVMGetParam(cg->fn, 1);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "entry");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "body");
    LLVMPositionBuilderAtEnd(cg->b, entry);
    LLVMValueRef term = LLVMBuildBr(cg->b, body);
    LLVMPositionBuilderBefore(cg->ab, term);
    LLVMPositionBuilderAtEnd(cg->b, body);
    uint32_t blas_before = cg->n_blas;
    LLVMValueRef part_fn = NULL;
    if (strings) {
        LlvmEmit e = emit_ctx(cg, index);
        s = srow->emit_str(&e);
    } else if (dyn) {
        LlvmEmit e = emit_ctx(cg, index);
        bool blas = false;
        s = cpu_value_dims(&e); /* dims the operands' values decide: stored before the body reads them */
        if (!s) s = llvm_dyn_gen(&e, &blas);
        cg->n_blas += blas;
    } else if (kernel_in_parts(cg)) {
        part_fn = begin_parts(cg);
        s = gen_node_body(cg, index);
        end_parts(cg, part_fn, body);
    } else s = gen_node_body(cg, index);
    LLVMBuildRetVoid(cg->b);
    if (!s) set_blas_flag(cg, cg->n_blas > blas_before);
    for (uint32_t j = 0; !s && j < cg->slots.n; j++)
        if (cg->slots.v[j] == UINT32_MAX) s = IR_ENOMEM;
    if (!s && cg->slots.n == 0) llvm_slot_local(&cg->slots, 0); /* keep an array to pass */
    if (s) {
        if (part_fn) LLVMDeleteFunction(part_fn);
        LLVMDeleteFunction(cg->fn);
        return s;
    }
    *kfn = cg->fn;
    return IR_OK;
}

/* ---- module and JIT ---------------------------------------------------------------------- */

bool llvm_module_uses_blas(LLVMModuleRef mod) {
    LLVMValueRef flag = LLVMGetNamedGlobal(mod, "irtool.blas"), init = flag ? LLVMGetInitializer(flag) : NULL;
    if (!init || !LLVMIsAConstantInt(init)) return true; /* not ours to judge: assume it does */
    return LLVMConstIntGetZExtValue(init) != 0;
}

static void cg_init(Cg *cg, const IrGraph *g, LLVMContextRef ctx, unsigned simd_bits, IrDiag *diag, LLVMModuleRef mod) {
    *cg = (Cg){.g = g, .diag = diag, .ctx = ctx, .mod = mod, .simd_bits = simd_bits};
    cg->b = LLVMCreateBuilderInContext(ctx);
    cg->ab = LLVMCreateBuilderInContext(ctx);
    cg->i1 = LLVMInt1TypeInContext(ctx);
    cg->i8 = LLVMInt8TypeInContext(ctx);
    cg->i32 = LLVMInt32TypeInContext(ctx);
    cg->i64 = LLVMInt64TypeInContext(ctx);
    cg->f32 = LLVMFloatTypeInContext(ctx);
    cg->ptr = LLVMPointerTypeInContext(ctx, 0);
    cg->vd = LLVMVoidTypeInContext(ctx);
}

static void cg_fini(Cg *cg) {
    LLVMDisposeBuilder(cg->b);
    LLVMDisposeBuilder(cg->ab);
    free(cg->slots.v);
    free(cg->derived.data);
}

/* Compile-time data of the kernel being emitted (bytes at data, taken over): the kernel's
 * derived buffer when the caller asked for one (*slot > 0 then; read it with buf(cg, *slot)),
 * else a private constant of the module (*global). */
static IrStatus derived_data(Cg *cg, void *data, size_t bytes, const char *name, LLVMValueRef *global, uint32_t *slot) {
    *global = NULL;
    *slot = 0;
    if (!data) return IR_ENOMEM;
    if (cg->derived_slot && !cg->derived.data) {
        cg->derived = (LlvmDerived){cg->derived_slot, data, bytes};
        *slot = cg->derived_slot;
        return IR_OK;
    }
    LLVMValueRef init = LLVMConstStringInContext2(cg->ctx, (const char *)data, bytes, 1);
    free(data);
    LLVMValueRef gv = LLVMAddGlobal(cg->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
    LLVMSetAlignment(gv, 64);
    *global = gv;
    return IR_OK;
}

static LLVMTypeRef kernel_type(LLVMContextRef ctx) {
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), ps[2] = {ptr, ptr};
    return LLVMFunctionType(LLVMVoidTypeInContext(ctx), ps, 2, 0);
}

/* Emits into `entry` (builder b at its end) the call of kernel k with its slot array. */
static void call_kernel(LLVMContextRef ctx, LLVMBuilderRef b, LLVMBuilderRef ab, LLVMValueRef entry, LLVMValueRef k,
                        const LlvmSlots *sl) {
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), i64 = LLVMInt64TypeInContext(ctx);
    LLVMValueRef bufs = LLVMGetParam(entry, 0), fns = LLVMGetParam(entry, 1);
    LLVMValueRef arr = LLVMBuildArrayAlloca(ab, ptr, LLVMConstInt(i64, sl->n, 0), "");
    for (uint32_t j = 0; j < sl->n; j++) {
        LLVMValueRef si = LLVMConstInt(i64, sl->v[j], 0), li = LLVMConstInt(i64, j, 0);
        LLVMValueRef p = LLVMBuildLoad2(b, ptr, LLVMBuildGEP2(b, ptr, bufs, &si, 1, ""), "");
        LLVMBuildStore(b, p, LLVMBuildGEP2(b, ptr, arr, &li, 1, ""));
    }
    LLVMValueRef args[2] = {arr, fns};
    LLVMBuildCall2(b, kernel_type(ctx), k, args, 2, "");
}

static IrStatus verify_module(LLVMModuleRef mod, IrDiag *diag) {
    char *msg = NULL;
    IrStatus s = IR_OK;
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
        ir_diag_error(diag, "llvm backend: internal error, generated module is invalid: %s", msg ? msg : "?");
        s = IR_EINVAL;
    }
    LLVMDisposeMessage(msg);
    return s;
}

/* Adds entry function `name` of type ety to mod: *eb appends to its body, *eab inserts before
 * the entry block's terminator (allocas); the caller ends it (ret void) and disposes of both
 * builders. */
static LLVMValueRef entry_begin(LLVMModuleRef mod, const char *name, LLVMTypeRef ety, LLVMBuilderRef *eb,
                                LLVMBuilderRef *eab) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMValueRef entry = LLVMAddFunction(mod, name, ety);
    *eb = LLVMCreateBuilderInContext(ctx);
    *eab = LLVMCreateBuilderInContext(ctx);
    LLVMBasicBlockRef eblock = LLVMAppendBasicBlockInContext(ctx, entry, "entry");
    LLVMBasicBlockRef ebody = LLVMAppendBasicBlockInContext(ctx, entry, "body");
    LLVMPositionBuilderAtEnd(*eb, eblock);
    LLVMPositionBuilderBefore(*eab, LLVMBuildBr(*eb, ebody));
    LLVMPositionBuilderAtEnd(*eb, ebody);
    return entry;
}

IrStatus llvm_build_module(const IrGraph *g, LLVMContextRef ctx, unsigned simd_bits, IrDiag *diag, LLVMModuleRef *out,
                           uint32_t *n_kernels, LlvmDerived **derived, uint32_t *n_derived) {
    *derived = NULL;
    *n_derived = 0;
    uint32_t derived_base = lower_sym_slot(g) + 2, nd = 0;
    LlvmDerived *der = NULL;
    Cg cg;
    cg_init(&cg, g, ctx, simd_bits, diag, LLVMModuleCreateWithNameInContext("irtool", ctx));
    set_blas_flag(&cg, false);
    LLVMTypeRef kty = kernel_type(ctx);
    LLVMBuilderRef eb, eab;
    LLVMValueRef entry = entry_begin(cg.mod, "irt_entry", kty, &eb, &eab);
    IrStatus status = IR_OK;
    uint32_t index = 0, nk = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && !status; n = ir_node_next(g, n), index++) {
        cg.node = n;
        cg.derived_slot = derived_base + nd;
        LLVMValueRef k;
        status = gen_node(&cg, kty, index, NULL, &k);
        if (cg.derived.data) { /* this kernel's derived data: taken over */
            LlvmDerived *grown = status ? NULL : realloc(der, (nd + 1) * sizeof *der);
            if (grown) {
                der = grown;
                der[nd++] = cg.derived;
            } else {
                free(cg.derived.data);
                if (!status) status = IR_ENOMEM;
            }
            cg.derived = (LlvmDerived){0};
        }
        if (status || !k) continue;
        call_kernel(ctx, eb, eab, entry, k, &cg.slots);
        nk++;
    }
    LLVMBuildRetVoid(eb);
    LLVMDisposeBuilder(eb);
    LLVMDisposeBuilder(eab);
    if (!status) status = verify_module(cg.mod, diag);
    cg_fini(&cg);
    if (status) {
        for (uint32_t i = 0; i < nd; i++) free(der[i].data);
        free(der);
        LLVMDisposeModule(cg.mod);
        return status;
    }
    *n_kernels = nk;
    *derived = der;
    *n_derived = nd;
    *out = cg.mod;
    return IR_OK;
}

IrStatus llvm_build_kernel(const IrGraph *g, LLVMContextRef ctx, unsigned simd_bits, IrNodeId n, uint32_t index,
                           const char *name, IrDiag *diag, LLVMModuleRef *mod, LlvmSlots *slots, uint32_t derived_slot,
                           LlvmDerived *derived) {
    Cg cg;
    cg_init(&cg, g, ctx, simd_bits, diag, LLVMModuleCreateWithNameInContext("irtool-kernel", ctx));
    cg.node = n;
    cg.derived_slot = derived_slot;
    *derived = (LlvmDerived){0};
    LLVMValueRef k;
    IrStatus s = gen_node(&cg, kernel_type(ctx), index, name, &k);
    if (!s && k) s = verify_module(cg.mod, diag);
    *mod = NULL;
    slots->n = 0;
    if (!s && k) {
        *mod = cg.mod;
        for (uint32_t j = 0; j < cg.slots.n && !s; j++)
            if (llvm_slot_local(slots, cg.slots.v[j]) == UINT32_MAX) s = IR_ENOMEM;
    }
    if (!*mod || s) LLVMDisposeModule(cg.mod);
    if (s) *mod = NULL;
    if (*mod) { /* the caller takes the derived data */
        *derived = cg.derived;
        cg.derived.data = NULL;
    }
    cg_fini(&cg);
    return s;
}

/* irt_entry(bufs, fns) calling the external kernels names[i] with their slots, or with traced
 * irt_entry_trace(bufs, fns, hook, user): the same with hook(user, i) called before kernel i and
 * hook(user, nk) after the last one (irt_profile times the kernels with it). */
static void build_entry_fn(LLVMModuleRef mod, bool traced, uint32_t nk, char *const *names, const LlvmSlots *slots) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef kty = kernel_type(ctx), ptr = LLVMPointerTypeInContext(ctx, 0), i32 = LLVMInt32TypeInContext(ctx);
    LLVMTypeRef hps[2] = {ptr, i32}, tps[4] = {ptr, ptr, ptr, ptr};
    LLVMTypeRef hty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), hps, 2, 0);
    LLVMTypeRef ety = traced ? LLVMFunctionType(LLVMVoidTypeInContext(ctx), tps, 4, 0) : kty;
    LLVMBuilderRef eb, eab;
    LLVMValueRef entry = entry_begin(mod, traced ? "irt_entry_trace" : "irt_entry", ety, &eb, &eab);
    for (uint32_t i = 0; i <= nk; i++) {
        if (traced) {
            LLVMValueRef hargs[2] = {LLVMGetParam(entry, 3), LLVMConstInt(i32, i, 0)};
            LLVMBuildCall2(eb, hty, LLVMGetParam(entry, 2), hargs, 2, "");
        }
        if (i == nk) break;
        LLVMValueRef k = LLVMGetNamedFunction(mod, names[i]);
        if (!k) k = LLVMAddFunction(mod, names[i], kty);
        call_kernel(ctx, eb, eab, entry, k, &slots[i]);
    }
    LLVMBuildRetVoid(eb);
    LLVMDisposeBuilder(eb);
    LLVMDisposeBuilder(eab);
}

IrStatus llvm_build_entry(LLVMModuleRef mod, uint32_t nk, char *const *names, const LlvmSlots *slots, IrDiag *diag) {
    build_entry_fn(mod, false, nk, names, slots);
    build_entry_fn(mod, true, nk, names, slots);
    return verify_module(mod, diag);
}

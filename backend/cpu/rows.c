/* The row family of the CPU backend: Softmax, LogSoftmax and LayerNormalization, one emitter
 * each for static and run-time shapes (written on llvm/dims.h: constant dims fold, so a static
 * kernel is the code it always was). The f32 row arithmetic (llvm_row_f32) also serves the
 * trailing f32 reductions and the fused row groups of cpu/codegen.c and cpu/dyn.c. LayerNorm on
 * other dtypes, with broadcast scale/bias or with its Mean/InvStdDev outputs accumulates in f64
 * like the interpreter.
 */
#include "backend/cpu/cpu.h"

static LLVMValueRef ci(LlvmEmit *e, int64_t v) { return lo_i64(e, v); }
static LLVMValueRef cf32(LlvmEmit *e, double v) { return LLVMConstReal(lo_f32_t(e), v); }
static LLVMValueRef mul(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWMul(e->b, a, b, ""); }

static bool const_is(LLVMValueRef v, int64_t c) { return LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) == c; }

/* A loop over n elements; a constant n >= 1 gives the counted loop (its trip count in sight of
 * the vectorizer), anything else the loop that skips a zero count. */
static void row_loop(LlvmEmit *e, LlvmLoop *l, LLVMValueRef n) {
    if (LLVMIsAConstantInt(n) && LLVMConstIntGetSExtValue(n) >= 1) llvm_loop_begin(e->b, e->fn, l, LLVMConstIntGetSExtValue(n));
    else llvm_loop_begin_v(e->b, e->fn, l, n);
}

/* Element j of a row at base with element stride step: base + j * step. */
static LLVMValueRef row_at(LlvmEmit *e, LLVMValueRef base, LLVMValueRef j, LLVMValueRef step) {
    return LLVMBuildNSWAdd(e->b, base, const_is(step, 1) ? j : mul(e, j, step), "");
}

static LLVMValueRef ldf(LlvmEmit *e, LLVMValueRef p, LLVMValueRef off) { return lo_load(e, IR_DTYPE_F32, p, off); }
static void stf(LlvmEmit *e, LLVMValueRef p, LLVMValueRef off, LLVMValueRef v) { lo_store(e, IR_DTYPE_F32, p, off, v); }
static LLVMValueRef fcall(LlvmEmit *e, const char *name, LLVMValueRef *args, unsigned n) {
    return lo_intrinsic(e, name, lo_f32_t(e), args, n);
}

/* ---- one f32 row ---------------------------------------------------------------------------- */

enum { FOLD_SUM, FOLD_MAX, FOLD_MIN, FOLD_SQDEV };

/* acc <- f(acc, x[j]) over the row at base (FOLD_SQDEV: the sum of (x[j] - shift)^2). */
static LLVMValueRef row_fold(LlvmEmit *e, const LlvmRow *r, LLVMValueRef base, double init, int kind, LLVMValueRef shift) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef acc = lo_var(e, lo_f32_t(e), cf32(e, init));
    LlvmLoop l;
    row_loop(e, &l, r->len);
    LLVMValueRef x = ldf(e, r->x, row_at(e, base, l.iv, r->step));
    LLVMValueRef a = LLVMBuildLoad2(b, lo_f32_t(e), acc, ""), v;
    if (kind == FOLD_SUM) v = LLVMBuildFAdd(b, a, x, "");
    /* max/min: llvm.maximum/minimum, NaN-propagating like the interpreter (only the sign of a
     * zero result may differ), and recognized as reductions, so the row vectorizes */
    else if (kind == FOLD_MAX) v = fcall(e, "llvm.maximum", (LLVMValueRef[]){a, x}, 2);
    else if (kind == FOLD_MIN) v = fcall(e, "llvm.minimum", (LLVMValueRef[]){a, x}, 2);
    else {
        LLVMValueRef t = LLVMBuildFSub(b, x, shift, "");
        v = LLVMBuildFAdd(b, a, LLVMBuildFMul(b, t, t, ""), "");
    }
    /* sums may be reassociated, so they vectorize (several partial sums, added at the end): a
     * row is then read at vector speed, not one add latency per element; the result differs
     * from the sequential sum by rounding only */
    if (kind == FOLD_SUM || kind == FOLD_SQDEV) LLVMSetFastMathFlags(v, LLVMFastMathAllowReassoc);
    LLVMBuildStore(b, v, acc);
    llvm_loop_end(e->b, e->fn, &l);
    return LLVMBuildLoad2(b, lo_f32_t(e), acc, "");
}

static void softmax_row(LlvmEmit *e, const LlvmRow *r) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f32 = lo_f32_t(e);
    LlvmLoop l;
    LLVMValueRef m = row_fold(e, r, r->xoff, -INFINITY, FOLD_MAX, NULL);
    LLVMValueRef sum = lo_var(e, f32, cf32(e, 0.0));
    row_loop(e, &l, r->len);
    LLVMValueRef off = row_at(e, r->xoff, l.iv, r->step);
    LLVMValueRef ex = llvm_exp_f32(b, LLVMBuildFSub(b, ldf(e, r->x, off), m, ""));
    stf(e, r->y, off, ex);
    LLVMValueRef acc = LLVMBuildFAdd(b, LLVMBuildLoad2(b, f32, sum, ""), ex, "");
    LLVMSetFastMathFlags(acc, LLVMFastMathAllowReassoc); /* vectorizes, with exp (llvm_exp_f32) */
    LLVMBuildStore(b, acc, sum);
    llvm_loop_end(e->b, e->fn, &l);
    LLVMValueRef total = LLVMBuildLoad2(b, f32, sum, "");
    LLVMValueRef inv = LLVMBuildFDiv(b, cf32(e, 1.0), total, "");
    LLVMValueRef shift = LLVMBuildFAdd(b, m, fcall(e, "llvm.log", &total, 1), "");
    row_loop(e, &l, r->len);
    off = row_at(e, r->xoff, l.iv, r->step);
    if (r->op == IR_OP_LOG_SOFTMAX) stf(e, r->y, off, LLVMBuildFSub(b, ldf(e, r->x, off), shift, ""));
    else stf(e, r->y, off, LLVMBuildFMul(b, ldf(e, r->y, off), inv, ""));
    llvm_loop_end(e->b, e->fn, &l);
}

static void layernorm_row_f32(LlvmEmit *e, const LlvmRow *r);

/* ReduceSum/Mean/Max/Min, GlobalAveragePool: one output element at yoff. */
static void fold_row(LlvmEmit *e, const LlvmRow *r) {
    int kind = r->op == IR_OP_REDUCE_MAX ? FOLD_MAX : r->op == IR_OP_REDUCE_MIN ? FOLD_MIN : FOLD_SUM;
    double init = kind == FOLD_MAX ? -INFINITY : kind == FOLD_MIN ? INFINITY : 0.0;
    LLVMValueRef v = row_fold(e, r, r->xoff, init, kind, NULL);
    if (r->op == IR_OP_REDUCE_MEAN || r->op == IR_OP_GLOBAL_AVERAGE_POOL)
        v = LLVMBuildFDiv(e->b, v, LLVMBuildSIToFP(e->b, r->len, lo_f32_t(e), ""), "");
    stf(e, r->y, r->yoff, v);
}

/* The f32 row of each op with one; the ops without one fold their row (fold_row). */
static void (*const row_f32_ops[IR_OP_COUNT])(LlvmEmit *, const LlvmRow *) = {
    [IR_OP_SOFTMAX] = softmax_row,
    [IR_OP_LOG_SOFTMAX] = softmax_row,
    [IR_OP_LAYER_NORMALIZATION] = layernorm_row_f32,
};

void llvm_row_f32(LlvmEmit *e, const LlvmRow *r) { (row_f32_ops[r->op] ? row_f32_ops[r->op] : fold_row)(e, r); }

/* ---- the rows of a node ---------------------------------------------------------------------- */

/* The normalized axis of n over rank r (the op's default when absent); -1 when out of range. */
static int64_t row_axis(const IrGraph *g, IrNodeId n, uint32_t r) {
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    return llvm_axis(found ? axis : -1, r);
}

/* A rank-1 or rank-2 shape of row counts: dims as values, constants where they are known. */
static LlvmDims rows_shape(uint32_t rank, const LLVMValueRef *dim, const int64_t *cd) {
    LlvmDims s = {.rank = rank};
    for (uint32_t k = 0; k < rank; k++) s.dim[k] = dim[k], s.cd[k] = cd[k];
    return s;
}

static void row_point(LlvmEmit *e, LLVMValueRef *offs, LLVMValueRef *idx, void *user) {
    (void)idx;
    LlvmRow r = *(const LlvmRow *)user;
    r.xoff = r.yoff = offs[0];
    llvm_row_f32(e, &r);
}

/* Softmax and LogSoftmax over one axis of an f32 tensor: [outer, len, inner] viewed as
 * outer * inner rows of len elements with stride inner. */
IrStatus cpu_rows_softmax(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    LlvmDims s;
    if (lo_dtype(e, x) != IR_DTYPE_F32 || lo_dtype(e, y) != IR_DTYPE_F32) return lo_unsupported(e, "on non-f32 tensors");
    if (!llvm_dims_of(e, x, &s)) return lo_unsupported(e, "with an unknown shape");
    int64_t axis = row_axis(g, n, s.rank);
    if (axis < 0) return lo_unsupported(e, "with this axis");
    uint32_t a = (uint32_t)axis;
    LlvmRow r = {.op = ir_node_op(g, n), .x = lo_buf(e, x), .y = lo_buf(e, y), .len = s.dim[a],
                 .step = llvm_dims_prod(e, &s, a + 1, s.rank)};
    LLVMValueRef dim[2] = {llvm_dims_prod(e, &s, 0, a), r.step};
    int64_t cd[2] = {llvm_dims_cprod(&s, 0, a), llvm_dims_cprod(&s, a + 1, s.rank)};
    LlvmDims rows = rows_shape(2, dim, cd);
    LLVMValueRef st[1][IR_MAX_RANK] = {{mul(e, r.len, r.step), ci(e, 1)}};
    llvm_nest(e, &rows, 1, st, NULL, row_point, &r);
    return IR_OK;
}

/* ---- LayerNormalization ---------------------------------------------------------------------- */

/* Whether v (LayerNorm's scale or bias) has one element per element of x's row from axis on,
 * in the same order: its dims those of x there (a leading dim of x that is the constant 1 may
 * be missing). */
static bool covers_row(LlvmEmit *e, const LlvmDims *s, uint32_t axis, IrValueId v) {
    LlvmDims vs;
    uint32_t nd = s->rank - axis;
    if (!llvm_dims_of(e, v, &vs) || vs.rank > nd) return false;
    for (uint32_t k = 0; k < nd; k++) {
        uint32_t i = axis + k;
        if (k < nd - vs.rank) {
            if (s->cd[i] != 1) return false;
            continue;
        }
        uint32_t j = k - (nd - vs.rank);
        if (vs.ex[j] != s->ex[i] && !(vs.cd[j] >= 0 && vs.cd[j] == s->cd[i])) return false;
    }
    return true;
}

/* One row of LayerNorm in three passes over the normalized dims ns (x and y contiguous from the
 * row's start, scale and bias at their broadcast strides): the sum, the squared deviations,
 * then y = (x - mean) * inv * scale + bias. Computed in ct: f32 with the sums reassociated (they
 * vectorize: several partial sums, added at the end; only rounding differs from the sequential
 * sum) for the f32 row, f64 like the interpreter for any dtype, broadcast scale/bias and the
 * Mean/InvStdDev outputs (stored at the row's index). */
typedef struct Ln {
    IrDType dt, st, bt, mt, it;     /* X and Y, Scale, B, Mean, InvStdDev */
    LLVMTypeRef ct;
    LLVMValueRef x, y, scale, bias, mean, inv, acc, count, cur_mean, cur_inv;
    LlvmDims ns;                    /* the normalized dims */
    LLVMValueRef s[3][IR_MAX_RANK]; /* x, scale, bias over them (NULL: 0) */
    double eps;
    int pass;
} Ln;

static LLVMValueRef to_ct(LlvmEmit *e, const Ln *p, LLVMValueRef v) {
    return LLVMTypeOf(v) == p->ct ? v : LLVMBuildFPExt(e->b, v, p->ct, "");
}

/* A ct value as dtype dt's compute type. */
static LLVMValueRef from_ct(LlvmEmit *e, const Ln *p, LLVMValueRef v, IrDType dt) {
    LLVMTypeRef t = lo_comp_t(e, dt);
    if (t == p->ct) return v;
    return p->ct == lo_f64_t(e) ? LLVMBuildFPTrunc(e->b, v, t, "") : LLVMBuildFPExt(e->b, v, t, "");
}

static void ln_point(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Ln *p = user;
    LLVMBuilderRef b = e->b;
    LLVMValueRef v = to_ct(e, p, lo_load(e, p->dt, p->x, o[0]));
    if (p->pass < 2) {
        LLVMValueRef a = LLVMBuildLoad2(b, p->ct, p->acc, ""), t = v, r;
        if (p->pass == 1) {
            t = LLVMBuildFSub(b, v, p->cur_mean, "");
            t = LLVMBuildFMul(b, t, t, "");
        }
        r = LLVMBuildFAdd(b, a, t, "");
        if (p->ct == lo_f32_t(e)) LLVMSetFastMathFlags(r, LLVMFastMathAllowReassoc);
        LLVMBuildStore(b, r, p->acc);
        return;
    }
    LLVMValueRef r = LLVMBuildFMul(b, LLVMBuildFSub(b, v, p->cur_mean, ""), p->cur_inv, "");
    r = LLVMBuildFMul(b, r, to_ct(e, p, lo_load(e, p->st, p->scale, o[1])), "");
    if (p->bias) r = LLVMBuildFAdd(b, r, to_ct(e, p, lo_load(e, p->bt, p->bias, o[2])), "");
    lo_store(e, p->dt, p->y, o[0], from_ct(e, p, r, p->dt));
}

/* The row at x offset xoff, index row (for Mean/InvStdDev). Its nests never take the kernel's
 * parts: the rows do. */
static void ln_row(LlvmEmit *e, Ln *p, LLVMValueRef xoff, LLVMValueRef row) {
    LLVMBuilderRef b = e->b;
    bool used = e->part_used;
    e->part_used = true;
    LLVMValueRef offs[3] = {xoff, ci(e, 0), ci(e, 0)};
    p->acc = lo_var(e, p->ct, LLVMConstReal(p->ct, 0));
    p->pass = 0;
    llvm_nest(e, &p->ns, 3, p->s, offs, ln_point, p);
    p->cur_mean = LLVMBuildFDiv(b, LLVMBuildLoad2(b, p->ct, p->acc, ""), p->count, "");
    p->acc = lo_var(e, p->ct, LLVMConstReal(p->ct, 0));
    p->pass = 1;
    llvm_nest(e, &p->ns, 3, p->s, offs, ln_point, p);
    LLVMValueRef var = LLVMBuildFDiv(b, LLVMBuildLoad2(b, p->ct, p->acc, ""), p->count, "");
    LLVMValueRef ve = LLVMBuildFAdd(b, var, LLVMConstReal(p->ct, p->eps), "");
    p->cur_inv = LLVMBuildFDiv(b, LLVMConstReal(p->ct, 1.0), lo_intrinsic(e, "llvm.sqrt", p->ct, &ve, 1), "");
    p->pass = 2;
    llvm_nest(e, &p->ns, 3, p->s, offs, ln_point, p);
    if (p->mean) lo_store(e, p->mt, p->mean, row, from_ct(e, p, p->cur_mean, p->mt));
    if (p->inv) lo_store(e, p->it, p->inv, row, from_ct(e, p, p->cur_inv, p->it));
    e->part_used = used;
}

/* The f32 row of an LlvmRow: len contiguous elements, scale and bias one value per element. */
static void layernorm_row_f32(LlvmEmit *e, const LlvmRow *r) {
    Ln p = {.dt = IR_DTYPE_F32, .st = IR_DTYPE_F32, .bt = IR_DTYPE_F32, .ct = lo_f32_t(e), .x = r->x, .y = r->y,
            .scale = r->scale, .bias = r->bias, .eps = r->eps,
            .ns = {.rank = 1, .dim = {r->len}, .cd = {LLVMIsAConstantInt(r->len) ? LLVMConstIntGetSExtValue(r->len) : -1}},
            .s = {{ci(e, 1)}, {ci(e, 1)}, {r->bias ? ci(e, 1) : NULL}}};
    p.count = LLVMBuildSIToFP(e->b, r->len, p.ct, "");
    ln_row(e, &p, r->xoff, NULL);
}

static void ln_rows_point(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) { ln_row(e, user, o[0], idx[0]); }

/* The general form (f64): any float dtypes, scale and bias broadcast over the normalized dims,
 * the Mean and InvStdDev outputs. */
static IrStatus layernorm_general(LlvmEmit *e, const LlvmDims *s, uint32_t axis, const LlvmDims *rows, LLVMValueRef inner) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), sc = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId bi = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    IrValueId mv = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    IrValueId iv = ir_node_num_results(g, n) > 2 ? ir_node_result(g, n, 2) : 0;
    Ln p = {.dt = lo_dtype(e, x), .st = lo_dtype(e, sc), .bt = bi ? lo_dtype(e, bi) : IR_DTYPE_F32,
            .mt = mv ? lo_dtype(e, mv) : IR_DTYPE_F32, .it = iv ? lo_dtype(e, iv) : IR_DTYPE_F32, .ct = lo_f64_t(e)};
    IrDType dts[5] = {p.dt, p.st, p.bt, p.mt, p.it};
    for (int i = 0; i < 5; i++)
        if (!lo_is_float(dts[i])) return lo_unsupported_dtype(e, dts[i]);
    if (lo_dtype(e, y) != p.dt) return lo_unsupported(e, "with Y of another dtype than X");
    p.ns.rank = s->rank - axis;
    for (uint32_t k = 0; k < p.ns.rank; k++)
        p.ns.dim[k] = s->dim[axis + k], p.ns.cd[k] = s->cd[axis + k], p.ns.ex[k] = s->ex[axis + k];
    llvm_dims_strides(e, &p.ns, p.s[0]);
    IrValueId sb[2] = {sc, bi};
    for (int i = 0; i < 2; i++) {
        LlvmDims vs;
        if (!sb[i]) continue;
        if (!llvm_dims_of(e, sb[i], &vs) || vs.rank > p.ns.rank)
            return lo_unsupported(e, i ? "with this bias shape" : "with this scale shape");
        llvm_dims_bcast_strides(e, &vs, &p.ns, p.s[1 + i]);
    }
    if (llvm_dims_cprod(&p.ns, 0, p.ns.rank) == 0) return IR_OK;
    bool found;
    p.eps = ir_node_attr_float(g, n, "epsilon", &found);
    p.x = lo_buf(e, x);
    p.y = lo_buf(e, y);
    p.scale = lo_buf(e, sc);
    p.bias = bi ? lo_buf(e, bi) : NULL;
    p.mean = mv ? lo_buf(e, mv) : NULL;
    p.inv = iv ? lo_buf(e, iv) : NULL;
    p.count = LLVMBuildSIToFP(e->b, inner, p.ct, "");
    LLVMValueRef st[1][IR_MAX_RANK] = {{inner}};
    llvm_nest(e, rows, 1, st, NULL, ln_rows_point, &p);
    return IR_OK;
}

/* LayerNormalization: rows of every dim from axis on. f32 with scale (and bias) of one value
 * per row element and no Mean/InvStdDev: the vectorized row (llvm_row_f32); else the general
 * form. */
IrStatus cpu_rows_layernorm(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrValueId sc = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    IrValueId bi = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    LlvmDims s;
    if (!llvm_dims_of(e, x, &s)) return lo_unsupported(e, "with an unknown shape");
    int64_t axis = row_axis(g, n, s.rank);
    if (axis < 0) return lo_unsupported(e, "with this axis");
    if (!sc) return lo_unsupported(e, "without scale");
    uint32_t a = (uint32_t)axis;
    LLVMValueRef inner = llvm_dims_prod(e, &s, a, s.rank), outer = llvm_dims_prod(e, &s, 0, a);
    int64_t cd = llvm_dims_cprod(&s, 0, a);
    LlvmDims rows = rows_shape(1, &outer, &cd);
    bool fast = lo_dtype(e, x) == IR_DTYPE_F32 && lo_dtype(e, y) == IR_DTYPE_F32 && lo_dtype(e, sc) == IR_DTYPE_F32 &&
                covers_row(e, &s, a, sc) && (!bi || (lo_dtype(e, bi) == IR_DTYPE_F32 && covers_row(e, &s, a, bi)));
    for (uint32_t i = 1; fast && i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) fast = false;
    if (!fast) return layernorm_general(e, &s, a, &rows, inner);
    bool found;
    LlvmRow r = {.op = IR_OP_LAYER_NORMALIZATION, .x = lo_buf(e, x), .y = lo_buf(e, y), .scale = lo_buf(e, sc),
                 .bias = bi ? lo_buf(e, bi) : NULL, .len = inner, .step = ci(e, 1),
                 .eps = ir_node_attr_float(g, n, "epsilon", &found)};
    LLVMValueRef st[1][IR_MAX_RANK] = {{inner}};
    llvm_nest(e, &rows, 1, st, NULL, row_point, &r);
    return IR_OK;
}

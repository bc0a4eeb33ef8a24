/* LLVM code generation for the CPU backend: one internal LLVM function per node over flat
 * buffers (loop nests over static shapes; an elementwise `irtool.fused` group is one node, one
 * loop nest, its intermediates never in memory), an entry `irt_entry(bufs, fns)` that calls them in
 * program order, O3 via the new pass manager for the host CPU, and an ORC LLJIT to load it.
 * Invariants: shapes are static (the caller specializes symbols); only the top-level region is
 * compiled; buffer of value v is bufs[v]; library helpers (GEMM, tanh, erf) are reached through
 * the IrtFnTable argument, never by symbol name. Anything else is refused naming the op.
 */
#include "backend/llvm_internal.h"

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
    LlvmSlots slots; /* the current kernel's buffers, in bufs order */
} Cg;

/* ---- shapes ------------------------------------------------------------------------------ */

bool llvm_value_shape(const IrGraph *g, IrValueId v, uint32_t *rank, int64_t *dims) {
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!t || r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return false;
    const IrExprId *d = ir_type_dims(g, t);
    for (uint32_t i = 0; i < r; i++)
        if (!ir_expr_is_const(g, d[i], &dims[i])) return false;
    *rank = r;
    return true;
}

static int64_t numel(uint32_t r, const int64_t *d) {
    int64_t n = 1;
    for (uint32_t i = 0; i < r; i++) n *= d[i];
    return n;
}

static void strides_of(uint32_t r, const int64_t *d, int64_t *s) {
    int64_t k = 1;
    for (uint32_t i = r; i-- > 0;) {
        s[i] = k;
        k *= d[i];
    }
}

static IrStatus unsupported(Cg *cg, const char *what) {
    ir_diag_at_node(cg->diag, cg->g, cg->node, IR_SEV_ERROR, "the llvm backend does not support %s%s%s yet",
                    ir_op_name(ir_node_op(cg->g, cg->node)), what ? " " : "", what ? what : "");
    return IR_EUNSUPPORTED;
}

/* ---- IR building helpers -------------------------------------------------------------------- */

static LLVMValueRef ci64(Cg *cg, int64_t v) { return LLVMConstInt(cg->i64, (unsigned long long)v, 1); }
static LLVMValueRef cf32(Cg *cg, double v) { return LLVMConstReal(cg->f32, v); }

uint32_t llvm_slot_local(LlvmSlots *s, uint32_t slot) {
    for (uint32_t j = 0; j < s->n; j++)
        if (s->v[j] == slot) return j;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 16;
        uint32_t *v = realloc(s->v, cap * sizeof *v);
        if (!v) return UINT32_MAX;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n] = slot;
    return s->n++;
}

static LLVMValueRef buf(Cg *cg, IrValueId v) {
    LLVMValueRef idx = ci64(cg, llvm_slot_local(&cg->slots, v));
    LLVMValueRef p = LLVMBuildGEP2(cg->b, cg->ptr, cg->bufs, &idx, 1, "");
    return LLVMBuildLoad2(cg->b, cg->ptr, p, "");
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

static LLVMValueRef call_f32_fn(Cg *cg, int slot, LLVMValueRef x) {
    LLVMTypeRef ft = LLVMFunctionType(cg->f32, &cg->f32, 1, 0);
    return LLVMBuildCall2(cg->b, ft, table_fn(cg, slot), &x, 1, "");
}

static LLVMValueRef var_f32(Cg *cg, double init) {
    LLVMValueRef a = LLVMBuildAlloca(cg->ab, cg->f32, "");
    LLVMBuildStore(cg->b, cf32(cg, init), a);
    return a;
}

/* A counted loop 0..n-1 (n >= 1), emitted as header-tests-at-bottom. */
typedef struct Loop {
    LLVMValueRef iv;
    LLVMBasicBlockRef head;
    int64_t n;
} Loop;

static void loop_begin(Cg *cg, Loop *l, int64_t n) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(cg->b);
    l->head = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "loop");
    l->n = n;
    LLVMBuildBr(cg->b, l->head);
    LLVMPositionBuilderAtEnd(cg->b, l->head);
    l->iv = LLVMBuildPhi(cg->b, cg->i64, "i");
    LLVMValueRef zero = ci64(cg, 0);
    LLVMAddIncoming(l->iv, &zero, &pre, 1);
}

static void loop_end(Cg *cg, Loop *l) {
    LLVMValueRef next = LLVMBuildNUWAdd(cg->b, l->iv, ci64(cg, 1), "");
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(cg->b);
    LLVMAddIncoming(l->iv, &next, &cur, 1);
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "exit");
    LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntSLT, next, ci64(cg, l->n), ""), l->head, exit);
    LLVMPositionBuilderAtEnd(cg->b, exit);
}

/* Loop nest over dims; offs[j] = base[j] + sum_k i_k * strides[j][k] for each of n_ops
 * operands; body runs once per point. Nothing is emitted for an empty shape. */
typedef void (*NestBody)(Cg *cg, LLVMValueRef *offs, void *user);
#define MAX_OPS 32

static void nest_rec(Cg *cg, uint32_t k, uint32_t rank, const int64_t *dims, uint32_t n_ops,
                     int64_t (*strides)[IR_MAX_RANK], LLVMValueRef *offs, NestBody body, void *user) {
    if (k == rank) {
        body(cg, offs, user);
        return;
    }
    if (dims[k] == 1) {
        nest_rec(cg, k + 1, rank, dims, n_ops, strides, offs, body, user);
        return;
    }
    Loop l;
    loop_begin(cg, &l, dims[k]);
    LLVMValueRef inner[MAX_OPS];
    for (uint32_t j = 0; j < n_ops; j++)
        inner[j] = strides[j][k] ? LLVMBuildNSWAdd(cg->b, offs[j], LLVMBuildNSWMul(cg->b, l.iv, ci64(cg, strides[j][k]), ""), "")
                                 : offs[j];
    nest_rec(cg, k + 1, rank, dims, n_ops, strides, inner, body, user);
    loop_end(cg, &l);
}

static void emit_nest(Cg *cg, uint32_t rank, const int64_t *dims, uint32_t n_ops, int64_t (*strides)[IR_MAX_RANK],
                      const int64_t *base, NestBody body, void *user) {
    if (numel(rank, dims) == 0) return;
    LLVMValueRef offs[MAX_OPS];
    for (uint32_t j = 0; j < n_ops; j++) offs[j] = ci64(cg, base ? base[j] : 0);
    nest_rec(cg, 0, rank, dims, n_ops, strides, offs, body, user);
}

/* Strides of an operand of shape (r, d) broadcast (numpy rules) to an output of rank orank. */
static void bcast_strides(uint32_t r, const int64_t *d, uint32_t orank, int64_t *out) {
    int64_t s[IR_MAX_RANK];
    strides_of(r, d, s);
    for (uint32_t k = 0; k < orank; k++) {
        int32_t i = (int32_t)k - (int32_t)(orank - r);
        out[k] = (i < 0 || d[i] == 1) ? 0 : s[i];
    }
}

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

static LLVMValueRef ew_value(Cg *cg, EwCtx *e, LLVMValueRef *x) {
    LLVMBuilderRef b = cg->b;
    LLVMValueRef one = cf32(cg, 1.0), zero = cf32(cg, 0.0);
    switch (e->op) {
    case IR_OP_ADD: return LLVMBuildFAdd(b, x[0], x[1], "");
    case IR_OP_SUM:
    case IR_OP_MEAN: {
        LLVMValueRef acc = x[0];
        for (uint32_t i = 1; i < e->n_in; i++) acc = LLVMBuildFAdd(b, acc, x[i], "");
        return e->op == IR_OP_MEAN ? LLVMBuildFDiv(b, acc, cf32(cg, (double)e->n_in), "") : acc;
    }
    case IR_OP_SUB: return LLVMBuildFSub(b, x[0], x[1], "");
    case IR_OP_MUL: return LLVMBuildFMul(b, x[0], x[1], "");
    case IR_OP_DIV: return LLVMBuildFDiv(b, x[0], x[1], "");
    case IR_OP_POW: return intrinsic(cg, "llvm.pow", x, 2);
    case IR_OP_MAX:
    case IR_OP_MIN: {
        LLVMValueRef acc = x[0];
        for (uint32_t i = 1; i < e->n_in; i++)
            acc = nan_max(cg, acc, x[i], e->op == IR_OP_MAX);
        return acc;
    }
    case IR_OP_RELU: return fcmp_sel(cg, LLVMRealUGT, x[0], zero);
    case IR_OP_NEG: return LLVMBuildFNeg(b, x[0], "");
    case IR_OP_ABS: return intrinsic(cg, "llvm.fabs", x, 1);
    case IR_OP_EXP: return intrinsic(cg, "llvm.exp", x, 1);
    case IR_OP_LOG: return intrinsic(cg, "llvm.log", x, 1);
    case IR_OP_SQRT: return intrinsic(cg, "llvm.sqrt", x, 1);
    case IR_OP_FLOOR: return intrinsic(cg, "llvm.floor", x, 1);
    case IR_OP_CEIL: return intrinsic(cg, "llvm.ceil", x, 1);
    case IR_OP_RECIPROCAL: return LLVMBuildFDiv(b, one, x[0], "");
    case IR_OP_TANH: return call_f32_fn(cg, IRT_FN_TANHF, x[0]);
    case IR_OP_ERF: return call_f32_fn(cg, IRT_FN_ERFF, x[0]);
    case IR_OP_IDENTITY: return x[0];
    case IR_OP_SIGMOID: {
        LLVMValueRef nx = LLVMBuildFNeg(b, x[0], "");
        return LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, intrinsic(cg, "llvm.exp", &nx, 1), ""), "");
    }
    case IR_OP_LEAKY_RELU:
        return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x[0], zero, ""),
                               LLVMBuildFMul(b, x[0], cf32(cg, e->alpha), ""), x[0], "");
    case IR_OP_CLIP: {
        LLVMValueRef v = x[0];
        if (e->ptrs[2]) v = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, v, x[1], ""), x[1], v, "");
        if (e->ptrs[3]) v = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, v, x[2], ""), x[2], v, "");
        return v;
    }
    case IR_OP_WHERE:
        return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntNE, x[0], LLVMConstInt(cg->i8, 0, 0), ""), x[1], x[2], "");
    default: return NULL;
    }
}

static void ew_body(Cg *cg, LLVMValueRef *offs, void *user) {
    EwCtx *e = user;
    LLVMValueRef x[MAX_OPS];
    for (uint32_t i = 0; i < e->n_in; i++)
        x[i] = e->ptrs[i + 1] ? ld(cg, e->tys[i + 1], e->ptrs[i + 1], offs[i + 1]) : NULL;
    st(cg, cg->f32, e->ptrs[0], offs[0], ew_value(cg, e, x));
}

static bool ew_supported(IrOp op) {
    switch (op) {
    case IR_OP_ADD: case IR_OP_SUM: case IR_OP_MEAN: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: case IR_OP_POW: case IR_OP_MAX:
    case IR_OP_MIN: case IR_OP_RELU: case IR_OP_NEG: case IR_OP_ABS: case IR_OP_EXP: case IR_OP_LOG:
    case IR_OP_SQRT: case IR_OP_FLOOR: case IR_OP_CEIL: case IR_OP_RECIPROCAL: case IR_OP_TANH:
    case IR_OP_ERF: case IR_OP_SIGMOID: case IR_OP_LEAKY_RELU: case IR_OP_CLIP: case IR_OP_WHERE:
        return true;
    default: return false;
    }
}

static IrStatus gen_elementwise(Cg *cg, IrOp op) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    EwCtx e = {.op = op, .n_in = ir_node_num_operands(g, n)};
    if (e.n_in + 1 > MAX_OPS) return unsupported(cg, "with this many operands");
    IrValueId out = ir_node_result(g, n, 0);
    uint32_t orank, r;
    int64_t odims[IR_MAX_RANK], d[IR_MAX_RANK], strides[MAX_OPS][IR_MAX_RANK];
    llvm_value_shape(g, out, &orank, odims);
    if (ir_type_dtype(g, ir_value_type(g, out)) != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
    strides_of(orank, odims, strides[0]);
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
        llvm_value_shape(g, v, &r, d);
        bcast_strides(r, d, orank, strides[i + 1]);
        e.ptrs[i + 1] = buf(cg, v);
        e.tys[i + 1] = cond ? cg->i8 : cg->f32;
    }
    bool found;
    e.alpha = ir_node_attr_float(g, n, "alpha", &found);
    emit_nest(cg, orank, odims, e.n_in + 1, strides, NULL, ew_body, &e);
    return IR_OK;
}

/* ---- fused elementwise groups ------------------------------------------------------------ */

/* An `irtool.fused` group whose members are all supported f32 elementwise ops becomes one kernel:
 * a loop nest over the group's result shape that loads each group operand once per point (with
 * broadcast indexing), evaluates the members in order on scalars and stores only the results.
 * Every member value is broadcast-compatible with the result shape, so evaluating it at the
 * broadcast index of each output point gives the same float operations as the unfused kernels. */
static bool fused_member_ok(IrOp op) { return ew_supported(op) && ir_op_info(op)->cls == IR_CLASS_ELEMENTWISE; }

/* Whether (r, d) broadcasts (numpy rules) to (orank, od). */
static bool bcast_to(uint32_t r, const int64_t *d, uint32_t orank, const int64_t *od) {
    if (r > orank) return false;
    for (uint32_t i = 0; i < r; i++) {
        int64_t o = od[orank - r + i];
        if (d[i] != o && d[i] != 1) return false;
    }
    return true;
}

static bool in_region(const IrGraph *g, IrValueId v, IrRegionId body) {
    if (ir_value_kind(g, v) == IR_VALUE_RESULT) return ir_node_region(g, ir_value_def_node(g, v)) == body;
    for (uint32_t i = 0; i < ir_region_num_args(g, body); i++)
        if (ir_region_arg(g, body, i) == v) return true;
    return false;
}

bool llvm_fused_ew_group(const IrGraph *g, IrNodeId n, bool need_static) {
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) != 1) return false;
    IrRegionId body = ir_node_region_at(g, n, 0);
    uint32_t nr = ir_node_num_results(g, n), na = ir_region_num_args(g, body), orank = 0, r;
    int64_t od[IR_MAX_RANK], d[IR_MAX_RANK];
    if (nr == 0 || ir_region_num_outputs(g, body) != nr || na != ir_node_num_operands(g, n)) return false;
    if (nr + na + 1 > MAX_OPS) return false;
    if (!ir_region_first(g, body)) return false;
    if (need_static && !llvm_value_shape(g, ir_node_result(g, n, 0), &orank, od)) return false;
    for (IrNodeId m = ir_region_first(g, body); m; m = ir_node_next(g, m)) {
        IrOp op = ir_node_op(g, m);
        if (!fused_member_ok(op) || ir_node_num_results(g, m) != 1 || ir_node_num_regions(g, m) != 0) return false;
        if (ir_node_num_operands(g, m) + 1 > MAX_OPS) return false;
        IrValueId res = ir_node_result(g, m, 0);
        IrTypeId rt = ir_value_type(g, res);
        if (rt && ir_type_dtype(g, rt) != IR_DTYPE_F32) return false;
        if (need_static && (!llvm_value_shape(g, res, &r, d) || !bcast_to(r, d, orank, od))) return false;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (!v) continue;
            /* outer values must come in through the group's operands (liveness sees only those),
             * graph constants excepted (always bound) */
            if (!in_region(g, v, body) && ir_value_kind(g, v) != IR_VALUE_CONST) return false;
            IrTypeId t = ir_value_type(g, v);
            bool cond = op == IR_OP_WHERE && i == 0;
            if (t && ir_type_dtype(g, t) != (cond ? IR_DTYPE_BOOL : IR_DTYPE_F32)) return false;
            if (cond && ir_value_kind(g, v) == IR_VALUE_RESULT) return false;
            if (need_static && (!llvm_value_shape(g, v, &r, d) || !bcast_to(r, d, orank, od))) return false;
        }
    }
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId o = ir_region_output(g, body, i), res = ir_node_result(g, n, i);
        if (!o || !in_region(g, o, body)) return false;
        if (ir_value_kind(g, o) != IR_VALUE_RESULT) return false; /* pass-through args: keep it simple */
        if (!need_static) continue;
        if (!llvm_value_shape(g, o, &r, d) || r != orank) return false;
        for (uint32_t k = 0; k < r; k++)
            if (d[k] != od[k]) return false;
        if (res && (!llvm_value_shape(g, res, &r, d) || r != orank)) return false;
        for (uint32_t k = 0; res && k < r; k++)
            if (d[k] != od[k]) return false;
    }
    return true;
}

typedef struct FusedCtx {
    IrRegionId body;
    uint32_t n_load, n_store;
    IrValueId load_v[MAX_OPS], store_v[MAX_OPS];
    LLVMValueRef load_p[MAX_OPS], store_p[MAX_OPS];
    LLVMTypeRef load_t[MAX_OPS];
    bool hoisted[MAX_OPS]; /* one-element operands: loaded once before the nest */
    LLVMValueRef *vals; /* by value id, per point */
} FusedCtx;

static void fused_body(Cg *cg, LLVMValueRef *offs, void *user) {
    FusedCtx *f = user;
    const IrGraph *g = cg->g;
    /* offs: [0, n_store) stores, then loads */
    for (uint32_t j = 0; j < f->n_load; j++)
        if (!f->hoisted[j]) f->vals[f->load_v[j]] = ld(cg, f->load_t[j], f->load_p[j], offs[f->n_store + j]);
    for (IrNodeId m = ir_region_first(g, f->body); m; m = ir_node_next(g, m)) {
        EwCtx e = {.op = ir_node_op(g, m), .n_in = ir_node_num_operands(g, m)};
        LLVMValueRef x[MAX_OPS];
        for (uint32_t i = 0; i < e.n_in; i++) {
            IrValueId v = ir_node_operand(g, m, i);
            x[i] = v ? f->vals[v] : NULL;
            e.ptrs[i + 1] = x[i]; /* non-NULL marks a present operand (Clip) */
        }
        bool found;
        e.alpha = ir_node_attr_float(g, m, "alpha", &found);
        f->vals[ir_node_result(g, m, 0)] = ew_value(cg, &e, x);
    }
    for (uint32_t j = 0; j < f->n_store; j++) st(cg, cg->f32, f->store_p[j], offs[j], f->vals[f->store_v[j]]);
}

static IrStatus gen_fused_ew(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    if (!llvm_fused_ew_group(g, n, true)) return unsupported(cg, "group with these members or shapes");
    IrRegionId body = ir_node_region_at(g, n, 0);
    FusedCtx f = {.body = body};
    uint32_t orank, r;
    int64_t od[IR_MAX_RANK], d[IR_MAX_RANK], strides[MAX_OPS][IR_MAX_RANK];
    llvm_value_shape(g, ir_node_result(g, n, 0), &orank, od);
    f.vals = calloc(ir_graph_num_values(g) + 1, sizeof *f.vals);
    if (!f.vals) return IR_ENOMEM;
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId res = ir_node_result(g, n, i);
        if (!res) continue;
        f.store_v[f.n_store] = ir_region_output(g, body, i);
        f.store_p[f.n_store] = buf(cg, res);
        strides_of(orank, od, strides[f.n_store]);
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
            for (uint32_t a = 0; a < ir_region_num_args(g, body); a++)
                if (ir_region_arg(g, body, a) == v) src = ir_node_operand(g, n, a);
            if (!src || f.n_store + f.n_load >= MAX_OPS) {
                free(f.vals);
                return unsupported(cg, "group with these operands");
            }
            llvm_value_shape(g, v, &r, d);
            bcast_strides(r, d, orank, strides[f.n_store + f.n_load]);
            f.load_v[f.n_load] = v;
            f.load_p[f.n_load] = buf(cg, src);
            f.load_t[f.n_load] = ir_type_dtype(g, ir_value_type(g, v)) == IR_DTYPE_BOOL ? cg->i8 : cg->f32;
            /* scalars (and other one-element operands) are loaded once: the stores could alias
             * them as far as LLVM knows, which would keep the load in the loop */
            if (numel(r, d) == 1) {
                f.hoisted[f.n_load] = true;
                f.vals[v] = ld(cg, f.load_t[f.n_load], f.load_p[f.n_load], ci64(cg, 0));
            }
            f.n_load++;
        }
    }
    emit_nest(cg, orank, od, f.n_store + f.n_load, strides, NULL, fused_body, &f);
    free(f.vals);
    return IR_OK;
}

/* BatchNormalization (inference): per-channel affine over dim 1. */
typedef struct BnCtx {
    LLVMValueRef y, x, scale, bias, mean, var;
    double eps;
} BnCtx;

static void bn_body(Cg *cg, LLVMValueRef *o, void *user) {
    BnCtx *c = user;
    LLVMBuilderRef b = cg->b;
    LLVMValueRef x = ld(cg, cg->f32, c->x, o[1]);
    LLVMValueRef v = LLVMBuildFAdd(b, ld(cg, cg->f32, c->var, o[2]), cf32(cg, c->eps), "");
    LLVMValueRef den = intrinsic(cg, "llvm.sqrt", &v, 1);
    LLVMValueRef t = LLVMBuildFDiv(b, LLVMBuildFSub(b, x, ld(cg, cg->f32, c->mean, o[2]), ""), den, "");
    t = LLVMBuildFAdd(b, LLVMBuildFMul(b, t, ld(cg, cg->f32, c->scale, o[2]), ""), ld(cg, cg->f32, c->bias, o[2]), "");
    st(cg, cg->f32, c->y, o[0], t);
}

static IrStatus gen_batchnorm(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) return unsupported(cg, "in training mode");
    uint32_t r;
    int64_t d[IR_MAX_RANK], s[3][IR_MAX_RANK];
    llvm_value_shape(g, ir_node_operand(g, n, 0), &r, d);
    if (r < 2) return unsupported(cg, "with rank < 2");
    strides_of(r, d, s[0]);
    strides_of(r, d, s[1]);
    memset(s[2], 0, sizeof s[2]);
    s[2][1] = 1;
    bool found;
    BnCtx c = {buf(cg, ir_node_result(g, n, 0)), buf(cg, ir_node_operand(g, n, 0)), buf(cg, ir_node_operand(g, n, 1)),
               buf(cg, ir_node_operand(g, n, 2)), buf(cg, ir_node_operand(g, n, 3)), buf(cg, ir_node_operand(g, n, 4)),
               ir_node_attr_float(g, n, "epsilon", &found)};
    emit_nest(cg, r, d, 3, s, NULL, bn_body, &c);
    return IR_OK;
}

/* ---- reductions --------------------------------------------------------------------------- */

/* Rows of length `len` with element stride `step`: softmax, layer norm, trailing reductions. */
typedef struct RowCtx {
    IrOp op;
    LLVMValueRef x, y, scale, bias;
    int64_t len, step;
    double eps;
} RowCtx;

static LLVMValueRef row_off(Cg *cg, LLVMValueRef base, Loop *l, int64_t step) {
    return LLVMBuildNSWAdd(cg->b, base, step == 1 ? l->iv : LLVMBuildNSWMul(cg->b, l->iv, ci64(cg, step), ""), "");
}

/* acc <- f(acc, x[j]) over the row, x[j] transformed by pre (optional). */
static LLVMValueRef row_fold(Cg *cg, RowCtx *c, LLVMValueRef base, double init, int kind, LLVMValueRef shift) {
    LLVMValueRef acc = var_f32(cg, init);
    Loop l;
    loop_begin(cg, &l, c->len);
    LLVMValueRef x = ld(cg, cg->f32, c->x, row_off(cg, base, &l, c->step));
    LLVMValueRef a = LLVMBuildLoad2(cg->b, cg->f32, acc, ""), r;
    if (kind == 0) r = LLVMBuildFAdd(cg->b, a, x, "");                    /* sum */
    else if (kind == 1) r = nan_max(cg, a, x, true);                      /* max */
    else if (kind == 2) r = nan_max(cg, a, x, false);                     /* min */
    else {                                                                /* sum of (x-shift)^2 */
        LLVMValueRef t = LLVMBuildFSub(cg->b, x, shift, "");
        r = LLVMBuildFAdd(cg->b, a, LLVMBuildFMul(cg->b, t, t, ""), "");
    }
    LLVMBuildStore(cg->b, r, acc);
    loop_end(cg, &l);
    return LLVMBuildLoad2(cg->b, cg->f32, acc, "");
}

static void row_body(Cg *cg, LLVMValueRef *o, void *user) {
    RowCtx *c = user;
    LLVMBuilderRef b = cg->b;
    Loop l;
    switch (c->op) {
    case IR_OP_SOFTMAX:
    case IR_OP_LOG_SOFTMAX: {
        LLVMValueRef m = row_fold(cg, c, o[0], -INFINITY, 1, NULL);
        LLVMValueRef sum = var_f32(cg, 0.0);
        loop_begin(cg, &l, c->len);
        LLVMValueRef off = row_off(cg, o[0], &l, c->step);
        LLVMValueRef t = LLVMBuildFSub(b, ld(cg, cg->f32, c->x, off), m, "");
        LLVMValueRef ex = intrinsic(cg, "llvm.exp", &t, 1);
        st(cg, cg->f32, c->y, off, ex);
        LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, cg->f32, sum, ""), ex, ""), sum);
        loop_end(cg, &l);
        LLVMValueRef total = LLVMBuildLoad2(b, cg->f32, sum, "");
        LLVMValueRef inv = LLVMBuildFDiv(b, cf32(cg, 1.0), total, "");
        LLVMValueRef shift = LLVMBuildFAdd(b, m, intrinsic(cg, "llvm.log", &total, 1), "");
        loop_begin(cg, &l, c->len);
        off = row_off(cg, o[0], &l, c->step);
        if (c->op == IR_OP_LOG_SOFTMAX)
            st(cg, cg->f32, c->y, off, LLVMBuildFSub(b, ld(cg, cg->f32, c->x, off), shift, ""));
        else st(cg, cg->f32, c->y, off, LLVMBuildFMul(b, ld(cg, cg->f32, c->y, off), inv, ""));
        loop_end(cg, &l);
        return;
    }
    case IR_OP_LAYER_NORMALIZATION: {
        LLVMValueRef nf = cf32(cg, (double)c->len);
        LLVMValueRef mean = LLVMBuildFDiv(b, row_fold(cg, c, o[0], 0.0, 0, NULL), nf, "");
        LLVMValueRef var = LLVMBuildFDiv(b, row_fold(cg, c, o[0], 0.0, 3, mean), nf, "");
        LLVMValueRef ve = LLVMBuildFAdd(b, var, cf32(cg, c->eps), "");
        LLVMValueRef inv = LLVMBuildFDiv(b, cf32(cg, 1.0), intrinsic(cg, "llvm.sqrt", &ve, 1), "");
        loop_begin(cg, &l, c->len);
        LLVMValueRef off = row_off(cg, o[0], &l, 1);
        LLVMValueRef t = LLVMBuildFMul(b, LLVMBuildFSub(b, ld(cg, cg->f32, c->x, off), mean, ""), inv, "");
        t = LLVMBuildFMul(b, t, ld(cg, cg->f32, c->scale, l.iv), "");
        if (c->bias) t = LLVMBuildFAdd(b, t, ld(cg, cg->f32, c->bias, l.iv), "");
        st(cg, cg->f32, c->y, off, t);
        loop_end(cg, &l);
        return;
    }
    default: { /* trailing reductions: o[0] input row start, o[1] output element */
        int kind = c->op == IR_OP_REDUCE_MAX ? 1 : c->op == IR_OP_REDUCE_MIN ? 2 : 0;
        double init = kind == 1 ? -INFINITY : kind == 2 ? INFINITY : 0.0;
        LLVMValueRef r = row_fold(cg, c, o[0], init, kind, NULL);
        if (c->op == IR_OP_REDUCE_MEAN || c->op == IR_OP_GLOBAL_AVERAGE_POOL)
            r = LLVMBuildFDiv(b, r, cf32(cg, (double)c->len), "");
        st(cg, cg->f32, c->y, o[1], r);
        return;
    }
    }
}

static int64_t norm_axis(int64_t a, uint32_t r) { return a < 0 ? a + (int64_t)r : a; }

static IrStatus gen_softmax_layernorm(Cg *cg, IrOp op) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    IrValueId x = ir_node_operand(g, n, 0);
    if (ir_type_dtype(g, ir_value_type(g, x)) != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
    llvm_value_shape(g, x, &r, d);
    bool found;
    int64_t axis = norm_axis(ir_node_attr_int(g, n, "axis", &found), r);
    if (!found) axis = r ? r - 1 : 0;
    if (axis < 0 || axis >= (int64_t)r) return unsupported(cg, "with this axis");
    RowCtx c = {.op = op, .x = buf(cg, x), .y = buf(cg, ir_node_result(g, n, 0))};
    int64_t outer = numel((uint32_t)axis, d), inner = 1, s[1][IR_MAX_RANK];
    if (op == IR_OP_SOFTMAX || op == IR_OP_LOG_SOFTMAX) {
        for (uint32_t k = (uint32_t)axis + 1; k < r; k++) inner *= d[k];
        c.len = d[axis];
        c.step = inner;
        int64_t dims[2] = {outer, inner};
        s[0][0] = c.len * inner;
        s[0][1] = 1;
        emit_nest(cg, 2, dims, 1, s, NULL, row_body, &c);
        return IR_OK;
    }
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) return unsupported(cg, "with Mean/InvStdDev outputs");
    c.len = numel(r - (uint32_t)axis, d + axis);
    c.step = 1;
    c.eps = ir_node_attr_float(g, n, "epsilon", &found);
    for (uint32_t i = 1; i < 3; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v) continue;
        uint32_t vr;
        int64_t vd[IR_MAX_RANK];
        llvm_value_shape(g, v, &vr, vd);
        if (numel(vr, vd) != c.len || ir_type_dtype(g, ir_value_type(g, v)) != IR_DTYPE_F32)
            return unsupported(cg, "with broadcast scale or bias");
        *(i == 1 ? &c.scale : &c.bias) = buf(cg, v);
    }
    if (!c.scale) return unsupported(cg, "without scale");
    s[0][0] = c.len;
    emit_nest(cg, 1, &outer, 1, s, NULL, row_body, &c);
    return IR_OK;
}

/* Reads a small constant integer operand (graph constant or Constant node). */
static bool const_ints(const IrGraph *g, IrValueId v, int64_t *vals, uint32_t *n, uint32_t cap) {
    const void *data = llvm_value_const_data(g, v);
    if (!data) return false;
    IrTypeId t = ir_value_type(g, v);
    int64_t cnt;
    if (!ir_type_numel(g, t, &cnt) || cnt > (int64_t)cap) return false;
    for (int64_t i = 0; i < cnt; i++) vals[i] = ir_elem_get_i64(ir_type_dtype(g, t), data, (size_t)i);
    *n = (uint32_t)cnt;
    return true;
}

static IrStatus gen_reduce(Cg *cg, IrOp op) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    uint32_t r, na = 0;
    int64_t d[IR_MAX_RANK], axes[IR_MAX_RANK];
    IrValueId x = ir_node_operand(g, n, 0);
    if (ir_type_dtype(g, ir_value_type(g, x)) != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
    llvm_value_shape(g, x, &r, d);
    bool found;
    if (op == IR_OP_GLOBAL_AVERAGE_POOL) {
        if (r < 3) return unsupported(cg, "with rank < 3");
        for (uint32_t k = 2; k < r; k++) axes[na++] = k;
    } else {
        IrAttrValue av;
        if (ir_node_attr(g, n, "axes", &av) && av.kind == IR_ATTR_INTS) {
            if (av.count > IR_MAX_RANK) return unsupported(cg, "with these axes");
            for (uint32_t i = 0; i < av.count; i++) axes[na++] = av.ints[i];
        } else if (ir_node_num_operands(g, n) > 1 && ir_node_operand(g, n, 1)) {
            if (!const_ints(g, ir_node_operand(g, n, 1), axes, &na, IR_MAX_RANK))
                return unsupported(cg, "with non-constant axes");
        }
        if (na == 0) {
            if (ir_node_attr_int(g, n, "noop_with_empty_axes", &found)) return unsupported(cg, "with noop_with_empty_axes");
            for (uint32_t k = 0; k < r; k++) axes[na++] = k;
        }
    }
    bool red[IR_MAX_RANK] = {0};
    for (uint32_t i = 0; i < na; i++) {
        int64_t a = norm_axis(axes[i], r);
        if (a < 0 || a >= (int64_t)r) return unsupported(cg, "with these axes");
        red[a] = true;
    }
    uint32_t first = r, end = 0;
    for (uint32_t k = 0; k < r; k++)
        if (red[k]) {
            if (first == r) first = k;
            end = k + 1;
        }
    for (uint32_t k = first; k < end; k++)
        if (!red[k]) return unsupported(cg, "over non-adjacent axes");
    /* [outer, len, inner]: reduce the middle block with stride inner */
    int64_t inner = numel(r - end, d + end), dims[2] = {numel(first, d), inner}, s[2][IR_MAX_RANK];
    RowCtx c = {.op = op, .x = buf(cg, x), .y = buf(cg, ir_node_result(g, n, 0)), .len = numel(end - first, d + first),
                .step = inner};
    if (c.len == 0) return unsupported(cg, "over empty axes");
    s[0][0] = c.len * inner;
    s[0][1] = 1;
    s[1][0] = inner;
    s[1][1] = 1;
    emit_nest(cg, 2, dims, 2, s, NULL, row_body, &c);
    return IR_OK;
}

/* ---- contractions ------------------------------------------------------------------------- */

typedef struct GemmCtx {
    LLVMValueRef a, b, c;
    int64_t m, n, k, ta, tb, lda, ldb;
    double alpha;
} GemmCtx;

static void gemm_call(Cg *cg, GemmCtx *c, LLVMValueRef oa, LLVMValueRef ob, LLVMValueRef oc) {
    LLVMTypeRef ps[13] = {cg->i64, cg->i64, cg->i64, cg->i64, cg->i64, cg->f32, cg->ptr,
                          cg->i64, cg->ptr, cg->i64, cg->f32, cg->ptr, cg->i64};
    LLVMTypeRef ft = LLVMFunctionType(cg->vd, ps, 13, 0);
    LLVMValueRef args[13] = {ci64(cg, c->ta), ci64(cg, c->tb), ci64(cg, c->m), ci64(cg, c->n), ci64(cg, c->k),
                             cf32(cg, c->alpha), elem_ptr(cg, cg->f32, c->a, oa), ci64(cg, c->lda),
                             elem_ptr(cg, cg->f32, c->b, ob), ci64(cg, c->ldb), cf32(cg, 0.0),
                             elem_ptr(cg, cg->f32, c->c, oc), ci64(cg, c->n)};
    LLVMBuildCall2(cg->b, ft, table_fn(cg, IRT_FN_SGEMM), args, 13, "");
}

static void matmul_body(Cg *cg, LLVMValueRef *o, void *user) { gemm_call(cg, user, o[1], o[2], o[0]); }

static IrStatus gen_matmul(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    uint32_t ra, rb, ry;
    int64_t da[IR_MAX_RANK + 1], db[IR_MAX_RANK + 1], dy[IR_MAX_RANK];
    for (int i = 0; i < 2; i++)
        if (ir_type_dtype(g, ir_value_type(g, i ? vb : va)) != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
    llvm_value_shape(g, va, &ra, da);
    llvm_value_shape(g, vb, &rb, db);
    llvm_value_shape(g, vy, &ry, dy);
    if (ra == 0 || rb == 0) return unsupported(cg, "on scalars");
    if (ra == 1) {
        da[1] = da[0];
        da[0] = 1;
        ra = 2;
    }
    if (rb == 1) {
        db[1] = 1;
        rb = 2;
    }
    GemmCtx c = {.a = buf(cg, va), .b = buf(cg, vb), .c = buf(cg, vy), .m = da[ra - 2], .k = da[ra - 1],
                 .n = db[rb - 1], .alpha = 1.0};
    c.lda = c.k;
    c.ldb = c.n;
    uint32_t bra = ra - 2, brb = rb - 2, br = bra > brb ? bra : brb;
    int64_t bd[IR_MAX_RANK], s[3][IR_MAX_RANK];
    for (uint32_t k = 0; k < br; k++) {
        int32_t ia = (int32_t)k - (int32_t)(br - bra), ib = (int32_t)k - (int32_t)(br - brb);
        int64_t x = ia >= 0 ? da[ia] : 1, y = ib >= 0 ? db[ib] : 1;
        bd[k] = x == 1 ? y : x;
    }
    if (numel(br, bd) * c.m * c.n != numel(ry, dy)) return unsupported(cg, "with these shapes");
    strides_of(br, bd, s[0]);
    bcast_strides(bra, da, br, s[1]);
    bcast_strides(brb, db, br, s[2]);
    for (uint32_t k = 0; k < br; k++) {
        s[0][k] *= c.m * c.n;
        s[1][k] *= c.m * c.k;
        s[2][k] *= c.k * c.n;
    }
    if (c.k == 0) return unsupported(cg, "with K = 0");
    emit_nest(cg, br, bd, 3, s, NULL, matmul_body, &c);
    return IR_OK;
}

typedef struct BiasCtx {
    LLVMValueRef y, c;
    double beta;
} BiasCtx;

static void bias_body(Cg *cg, LLVMValueRef *o, void *user) {
    BiasCtx *c = user;
    LLVMValueRef t = LLVMBuildFMul(cg->b, ld(cg, cg->f32, c->c, o[1]), cf32(cg, c->beta), "");
    st(cg, cg->f32, c->y, o[0], LLVMBuildFAdd(cg->b, ld(cg, cg->f32, c->y, o[0]), t, ""));
}

static IrStatus gen_gemm(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrValueId vc = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    for (int i = 0; i < 3; i++) {
        IrValueId v = i == 0 ? va : i == 1 ? vb : vc;
        if (v && ir_type_dtype(g, ir_value_type(g, v)) != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
    }
    uint32_t ra, rb, ry;
    int64_t da[IR_MAX_RANK], db[IR_MAX_RANK], dy[IR_MAX_RANK];
    llvm_value_shape(g, va, &ra, da);
    llvm_value_shape(g, vb, &rb, db);
    llvm_value_shape(g, vy, &ry, dy);
    if (ra != 2 || rb != 2 || ry != 2) return unsupported(cg, "with non-2D operands");
    bool found;
    GemmCtx c = {.a = buf(cg, va), .b = buf(cg, vb), .c = buf(cg, vy)};
    c.ta = ir_node_attr_int(g, n, "transA", &found) != 0;
    c.tb = ir_node_attr_int(g, n, "transB", &found) != 0;
    c.alpha = ir_node_attr_float(g, n, "alpha", &found);
    if (!found) c.alpha = 1.0;
    double beta = ir_node_attr_float(g, n, "beta", &found);
    if (!found) beta = 1.0;
    c.m = dy[0];
    c.n = dy[1];
    c.k = c.ta ? da[0] : da[1];
    c.lda = da[1];
    c.ldb = db[1];
    if (c.m && c.n) {
        if (c.k == 0) return unsupported(cg, "with K = 0");
        LLVMValueRef z = ci64(cg, 0);
        gemm_call(cg, &c, z, z, z);
    }
    if (vc && beta != 0.0) {
        uint32_t rc;
        int64_t dc[IR_MAX_RANK], s[2][IR_MAX_RANK];
        llvm_value_shape(g, vc, &rc, dc);
        strides_of(2, dy, s[0]);
        bcast_strides(rc, dc, 2, s[1]);
        BiasCtx bc = {c.c, buf(cg, vc), beta};
        emit_nest(cg, 2, dy, 2, s, NULL, bias_body, &bc);
    }
    return IR_OK;
}

/* ---- convolution and pooling (2-D, NCHW) ------------------------------------------------------ */

typedef struct Win {
    int64_t n, c, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
} Win;

/* Window geometry from the attributes; false (with the reason) for what is not supported. */
static const char *win_read(Cg *cg, IrValueId x, IrValueId y, int64_t kh, int64_t kw, Win *wn) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    uint32_t r, ry;
    int64_t d[IR_MAX_RANK], dy[IR_MAX_RANK], v[8];
    llvm_value_shape(g, x, &r, d);
    llvm_value_shape(g, y, &ry, dy);
    if (r != 4 || ry != 4) return "other than 2-D (NCHW)";
    bool found;
    const char *ap = ir_node_attr_string(g, n, "auto_pad", &found);
    if (ap && strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0) return "with auto_pad SAME_*";
    *wn = (Win){d[0], d[1], d[2], d[3], dy[2], dy[3], kh, kw, 1, 1, 1, 1, 0, 0};
    IrAttrValue av;
    if (ir_node_attr(g, n, "strides", &av) && av.count == 2) wn->sh = av.ints[0], wn->sw = av.ints[1];
    if (ir_node_attr(g, n, "dilations", &av) && av.count == 2) wn->dh = av.ints[0], wn->dw = av.ints[1];
    if (ir_node_attr(g, n, "pads", &av) && av.count == 4 && !(ap && strcmp(ap, "VALID") == 0)) {
        for (int i = 0; i < 4; i++) v[i] = av.ints[i];
        wn->pt = v[0], wn->pl = v[1];
    }
    return NULL;
}

/* In-bounds test and clamped offset of input pixel (ih, iw) of a plane. */
static LLVMValueRef pix(Cg *cg, const Win *wn, LLVMValueRef ih, LLVMValueRef iw, LLVMValueRef *valid) {
    LLVMBuilderRef b = cg->b;
    LLVMValueRef okh = LLVMBuildICmp(b, LLVMIntULT, ih, ci64(cg, wn->h), "");
    LLVMValueRef okw = LLVMBuildICmp(b, LLVMIntULT, iw, ci64(cg, wn->w), "");
    *valid = LLVMBuildAnd(b, okh, okw, "");
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, ih, ci64(cg, wn->w), ""), iw, "");
    return LLVMBuildSelect(b, *valid, off, ci64(cg, 0), "");
}

static LLVMValueRef win_coord(Cg *cg, LLVMValueRef o, int64_t stride, int64_t pad, LLVMValueRef k, int64_t dil) {
    LLVMValueRef v = LLVMBuildMul(cg->b, o, ci64(cg, stride), "");
    v = LLVMBuildSub(cg->b, v, ci64(cg, pad), "");
    return LLVMBuildAdd(cg->b, v, LLVMBuildMul(cg->b, k, ci64(cg, dil), ""), "");
}

/* Pooling: nest over (N*C, OH, OW); the window loops run inside with bounds checks. */
typedef struct PoolCtx {
    Win w;
    bool max, include_pad;
    LLVMValueRef x, y;
} PoolCtx;

static void pool_body(Cg *cg, LLVMValueRef *o, void *user) {
    PoolCtx *c = user;
    LLVMBuilderRef b = cg->b;
    /* o[0] = plane*OH*OW + oh*OW + ow: recover the pieces */
    LLVMValueRef ohw = ci64(cg, c->w.oh * c->w.ow);
    LLVMValueRef plane = LLVMBuildSDiv(b, o[0], ohw, ""), rem = LLVMBuildSRem(b, o[0], ohw, "");
    LLVMValueRef oh = LLVMBuildSDiv(b, rem, ci64(cg, c->w.ow), ""), ow = LLVMBuildSRem(b, rem, ci64(cg, c->w.ow), "");
    LLVMValueRef xbase = LLVMBuildMul(b, plane, ci64(cg, c->w.h * c->w.w), "");
    LLVMValueRef acc = var_f32(cg, c->max ? -INFINITY : 0.0), cnt = var_f32(cg, 0.0);
    Loop lh, lw;
    loop_begin(cg, &lh, c->w.kh);
    LLVMValueRef ih = win_coord(cg, oh, c->w.sh, c->w.pt, lh.iv, c->w.dh);
    loop_begin(cg, &lw, c->w.kw);
    LLVMValueRef iw = win_coord(cg, ow, c->w.sw, c->w.pl, lw.iv, c->w.dw), valid;
    LLVMValueRef off = pix(cg, &c->w, ih, iw, &valid);
    LLVMValueRef v = ld(cg, cg->f32, c->x, LLVMBuildAdd(b, xbase, off, ""));
    LLVMValueRef a = LLVMBuildLoad2(b, cg->f32, acc, "");
    LLVMValueRef na = c->max ? fcmp_sel(cg, LLVMRealOGT, v, a) : LLVMBuildFAdd(b, a, v, ""); /* as the interpreter */
    LLVMBuildStore(b, LLVMBuildSelect(b, valid, na, a, ""), acc);
    LLVMValueRef k = LLVMBuildLoad2(b, cg->f32, cnt, "");
    LLVMBuildStore(b, LLVMBuildSelect(b, valid, LLVMBuildFAdd(b, k, cf32(cg, 1.0), ""), k, ""), cnt);
    loop_end(cg, &lw);
    loop_end(cg, &lh);
    LLVMValueRef r = LLVMBuildLoad2(b, cg->f32, acc, "");
    if (!c->max) {
        LLVMValueRef den = c->include_pad ? cf32(cg, (double)(c->w.kh * c->w.kw)) : LLVMBuildLoad2(b, cg->f32, cnt, "");
        r = LLVMBuildFDiv(b, r, den, "");
    }
    st(cg, cg->f32, c->y, o[0], r);
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
    const char *why = win_read(cg, x, y, av.ints[0], av.ints[1], &c.w);
    if (why) return unsupported(cg, why);
    bool found;
    c.include_pad = ir_node_attr_int(g, n, "count_include_pad", &found) != 0;
    int64_t total = c.w.n * c.w.c * c.w.oh * c.w.ow, s[1][IR_MAX_RANK] = {{1}};
    emit_nest(cg, 1, &total, 1, s, NULL, pool_body, &c);
    return IR_OK;
}

/* Conv: im2col into the node's scratch buffer, then one GEMM per (image, group) through the
 * BLAS helper, then the bias as an epilogue over the output. */
typedef struct ConvCtx {
    Win w;
    int64_t cg_, k;
    LLVMValueRef x, col;
} ConvCtx;

/* col[row, oh*OW + ow] for rows (c, kh, kw) of the image/group whose input starts at o[1]. */
static void im2col_body(Cg *cg, LLVMValueRef *o, void *user) {
    ConvCtx *c = user;
    LLVMBuilderRef b = cg->b;
    Loop lr, lo;
    loop_begin(cg, &lr, c->k);
    LLVMValueRef row = lr.iv;
    LLVMValueRef kk = ci64(cg, c->w.kh * c->w.kw);
    LLVMValueRef ch = LLVMBuildSDiv(b, row, kk, ""), rk = LLVMBuildSRem(b, row, kk, "");
    LLVMValueRef kh = LLVMBuildSDiv(b, rk, ci64(cg, c->w.kw), ""), kw = LLVMBuildSRem(b, rk, ci64(cg, c->w.kw), "");
    LLVMValueRef xbase = LLVMBuildAdd(b, o[1], LLVMBuildMul(b, ch, ci64(cg, c->w.h * c->w.w), ""), "");
    LLVMValueRef cbase = LLVMBuildMul(b, row, ci64(cg, c->w.oh * c->w.ow), "");
    loop_begin(cg, &lo, c->w.oh * c->w.ow);
    LLVMValueRef oh = LLVMBuildSDiv(b, lo.iv, ci64(cg, c->w.ow), ""), ow = LLVMBuildSRem(b, lo.iv, ci64(cg, c->w.ow), "");
    LLVMValueRef ih = win_coord(cg, oh, c->w.sh, c->w.pt, kh, c->w.dh), iw = win_coord(cg, ow, c->w.sw, c->w.pl, kw, c->w.dw);
    LLVMValueRef valid, off = pix(cg, &c->w, ih, iw, &valid);
    LLVMValueRef v = ld(cg, cg->f32, c->x, LLVMBuildAdd(b, xbase, off, ""));
    st(cg, cg->f32, c->col, LLVMBuildAdd(b, cbase, lo.iv, ""), LLVMBuildSelect(b, valid, v, cf32(cg, 0.0), ""));
    loop_end(cg, &lo);
    loop_end(cg, &lr);
}

int64_t llvm_node_scratch_bytes(const IrGraph *g, IrNodeId n) {
    if (ir_node_op(g, n) != IR_OP_CONV) return 0;
    uint32_t r, rw;
    int64_t dw[IR_MAX_RANK], dy[IR_MAX_RANK];
    if (!llvm_value_shape(g, ir_node_operand(g, n, 1), &rw, dw) || !llvm_value_shape(g, ir_node_result(g, n, 0), &r, dy) ||
        rw != 4 || r != 4)
        return 0;
    return dw[1] * dw[2] * dw[3] * dy[2] * dy[3] * 4;
}

static IrStatus gen_conv(Cg *cg, uint32_t index) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    IrValueId x = ir_node_operand(g, n, 0), w = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId bias = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    for (int i = 0; i < 3; i++) {
        IrValueId v = i == 0 ? x : i == 1 ? w : bias;
        if (v && ir_type_dtype(g, ir_value_type(g, v)) != IR_DTYPE_F32) return unsupported(cg, "on non-f32 tensors");
    }
    uint32_t rw;
    int64_t dw[IR_MAX_RANK];
    llvm_value_shape(g, w, &rw, dw);
    if (rw != 4) return unsupported(cg, "other than 2-D (NCHW)");
    ConvCtx c = {.x = buf(cg, x)};
    const char *why = win_read(cg, x, y, dw[2], dw[3], &c.w);
    if (why) return unsupported(cg, why);
    bool found;
    int64_t groups = ir_node_attr_int(g, n, "group", &found), oc = dw[0];
    if (!found) groups = 1;
    if (groups < 1 || c.w.c % groups || oc % groups || dw[1] != c.w.c / groups) return unsupported(cg, "with these groups");
    c.cg_ = c.w.c / groups;
    c.k = c.cg_ * dw[2] * dw[3];
    int64_t ocg = oc / groups, ohw = c.w.oh * c.w.ow;
    if (ohw == 0 || c.k == 0 || oc == 0 || c.w.n == 0) return unsupported(cg, "on empty tensors");
    c.col = buf(cg, ir_graph_num_values(g) + 1 + index); /* the scratch slot */
    GemmCtx gc = {.a = buf(cg, w), .b = c.col, .c = buf(cg, y), .m = ocg, .n = ohw, .k = c.k, .lda = c.k, .ldb = ohw,
                  .alpha = 1.0};
    /* one (image, group) at a time: im2col then GEMM */
    Loop li;
    loop_begin(cg, &li, c.w.n * groups);
    LLVMValueRef img = li.iv;
    LLVMValueRef grp = LLVMBuildSRem(cg->b, img, ci64(cg, groups), "");
    LLVMValueRef offs[2] = {ci64(cg, 0), LLVMBuildMul(cg->b, img, ci64(cg, c.cg_ * c.w.h * c.w.w), "")};
    im2col_body(cg, offs, &c);
    gemm_call(cg, &gc, LLVMBuildMul(cg->b, grp, ci64(cg, ocg * c.k), ""), ci64(cg, 0),
              LLVMBuildMul(cg->b, img, ci64(cg, ocg * ohw), ""));
    loop_end(cg, &li);
    if (bias) {
        /* a nest over (N, OC, OH*OW) whose bias index is the channel */
        int64_t dims3[3] = {c.w.n, oc, ohw}, s3[2][IR_MAX_RANK] = {{oc * ohw, ohw, 1}, {0, 1, 0}};
        BiasCtx bc = {gc.c, buf(cg, bias), 1.0};
        emit_nest(cg, 3, dims3, 2, s3, NULL, bias_body, &bc);
    }
    return IR_OK;
}

/* ---- data movement ------------------------------------------------------------------------ */

typedef struct CopyCtx {
    LLVMValueRef dst, src;
    LLVMTypeRef t;
} CopyCtx;

static void copy_body(Cg *cg, LLVMValueRef *o, void *user) {
    CopyCtx *c = user;
    st(cg, c->t, c->dst, o[0], ld(cg, c->t, c->src, o[1]));
}

static IrStatus gen_copy_bytes(Cg *cg) {
    const IrGraph *g = cg->g;
    IrValueId x = ir_node_operand(g, cg->node, 0), y = ir_node_result(g, cg->node, 0);
    size_t nb = llvm_value_nbytes(g, y);
    if (nb != llvm_value_nbytes(g, x)) return unsupported(cg, "changing the element count");
    if (nb) LLVMBuildMemCpy(cg->b, buf(cg, y), 16, buf(cg, x), 16, ci64(cg, (int64_t)nb));
    return IR_OK;
}

static LLVMTypeRef elem_type(Cg *cg, const IrGraph *g, IrValueId v) {
    return LLVMIntTypeInContext(cg->ctx, (unsigned)(8 * ir_dtype_size(ir_type_dtype(g, ir_value_type(g, v)))));
}

static IrStatus gen_transpose(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    uint32_t r, ry;
    int64_t d[IR_MAX_RANK], dy[IR_MAX_RANK], sx[IR_MAX_RANK], s[2][IR_MAX_RANK], perm[IR_MAX_RANK];
    llvm_value_shape(g, x, &r, d);
    llvm_value_shape(g, y, &ry, dy);
    IrAttrValue av;
    if (ir_node_attr(g, n, "perm", &av) && av.kind == IR_ATTR_INTS && av.count == r) {
        for (uint32_t k = 0; k < r; k++) perm[k] = norm_axis(av.ints[k], r);
    } else {
        for (uint32_t k = 0; k < r; k++) perm[k] = r - 1 - k;
    }
    strides_of(r, d, sx);
    strides_of(r, dy, s[0]);
    for (uint32_t k = 0; k < r; k++) {
        if (perm[k] < 0 || perm[k] >= (int64_t)r) return unsupported(cg, "with this perm");
        s[1][k] = sx[perm[k]];
    }
    CopyCtx c = {buf(cg, y), buf(cg, x), elem_type(cg, g, x)};
    emit_nest(cg, r, dy, 2, s, NULL, copy_body, &c);
    return IR_OK;
}

static IrStatus gen_concat(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    IrValueId y = ir_node_result(g, n, 0);
    uint32_t ry, r;
    int64_t dy[IR_MAX_RANK], d[IR_MAX_RANK], s[2][IR_MAX_RANK], sy[IR_MAX_RANK];
    llvm_value_shape(g, y, &ry, dy);
    strides_of(ry, dy, sy);
    bool found;
    int64_t axis = norm_axis(ir_node_attr_int(g, n, "axis", &found), ry), pos = 0;
    if (axis < 0 || axis >= (int64_t)ry) return unsupported(cg, "with this axis");
    LLVMValueRef dst = buf(cg, y);
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId x = ir_node_operand(g, n, i);
        llvm_value_shape(g, x, &r, d);
        memcpy(s[0], sy, sizeof sy);
        strides_of(r, d, s[1]);
        int64_t base[2] = {pos * sy[axis], 0};
        CopyCtx c = {dst, buf(cg, x), elem_type(cg, g, x)};
        emit_nest(cg, r, d, 2, s, base, copy_body, &c);
        pos += d[axis];
    }
    return IR_OK;
}

/* Slice with constant starts/ends/axes/steps: a strided copy. */
static IrStatus gen_slice(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    uint32_t r, ry, ns = 0, ne = 0, na = 0, nst = 0;
    int64_t d[IR_MAX_RANK], dy[IR_MAX_RANK], sx[IR_MAX_RANK], s[2][IR_MAX_RANK];
    int64_t starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes[IR_MAX_RANK], steps[IR_MAX_RANK];
    llvm_value_shape(g, x, &r, d);
    llvm_value_shape(g, y, &ry, dy);
    uint32_t nops = ir_node_num_operands(g, n);
    if (!const_ints(g, ir_node_operand(g, n, 1), starts, &ns, IR_MAX_RANK) ||
        !const_ints(g, ir_node_operand(g, n, 2), ends, &ne, IR_MAX_RANK) || ns != ne)
        return unsupported(cg, "with non-constant starts or ends");
    if (nops > 3 && ir_node_operand(g, n, 3)) {
        if (!const_ints(g, ir_node_operand(g, n, 3), axes, &na, IR_MAX_RANK) || na != ns)
            return unsupported(cg, "with non-constant axes");
    } else {
        for (uint32_t i = 0; i < ns; i++) axes[i] = i;
    }
    if (nops > 4 && ir_node_operand(g, n, 4)) {
        if (!const_ints(g, ir_node_operand(g, n, 4), steps, &nst, IR_MAX_RANK) || nst != ns)
            return unsupported(cg, "with non-constant steps");
    } else {
        for (uint32_t i = 0; i < ns; i++) steps[i] = 1;
    }
    if (ry != r) return unsupported(cg, "with these shapes");
    strides_of(r, d, sx);
    strides_of(r, dy, s[0]);
    memcpy(s[1], sx, sizeof sx);
    int64_t base[2] = {0, 0};
    for (uint32_t i = 0; i < ns; i++) {
        int64_t a = norm_axis(axes[i], r), st = steps[i], dim;
        if (a < 0 || a >= (int64_t)r || st == 0) return unsupported(cg, "with these axes or steps");
        dim = d[a];
        int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
        if (st > 0) b = b < 0 ? 0 : b > dim ? dim : b;
        else b = b < 0 ? -1 : b > dim - 1 ? dim - 1 : b;
        base[1] += b * sx[a];
        s[1][a] = sx[a] * st;
    }
    CopyCtx c = {buf(cg, y), buf(cg, x), elem_type(cg, g, x)};
    emit_nest(cg, r, dy, 2, s, base, copy_body, &c);
    return IR_OK;
}

typedef struct GatherCtx {
    LLVMValueRef y, x, idx;
    LLVMTypeRef it;
    int64_t rows, row_bytes;
} GatherCtx;

static void gather_body(Cg *cg, LLVMValueRef *o, void *user) {
    GatherCtx *c = user;
    LLVMBuilderRef b = cg->b;
    LLVMValueRef i = LLVMBuildSExt(b, ld(cg, c->it, c->idx, o[0]), cg->i64, "");
    i = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, i, ci64(cg, 0), ""), LLVMBuildAdd(b, i, ci64(cg, c->rows), ""), i, "");
    /* Out-of-range indices are clamped so generated code never reads outside the buffer. */
    i = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, i, ci64(cg, 0), ""), ci64(cg, 0), i, "");
    i = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGE, i, ci64(cg, c->rows), ""), ci64(cg, c->rows - 1), i, "");
    LLVMValueRef src = elem_ptr(cg, cg->i8, c->x, LLVMBuildMul(b, i, ci64(cg, c->row_bytes), ""));
    LLVMValueRef dst = elem_ptr(cg, cg->i8, c->y, LLVMBuildMul(b, o[0], ci64(cg, c->row_bytes), ""));
    LLVMBuildMemCpy(b, dst, 1, src, 1, ci64(cg, c->row_bytes));
}

static IrStatus gen_gather(Cg *cg) {
    const IrGraph *g = cg->g;
    IrNodeId n = cg->node;
    IrValueId x = ir_node_operand(g, n, 0), ix = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    bool found;
    uint32_t r, ri;
    int64_t d[IR_MAX_RANK], di[IR_MAX_RANK], s[1][IR_MAX_RANK];
    llvm_value_shape(g, x, &r, d);
    llvm_value_shape(g, ix, &ri, di);
    if (r == 0 || norm_axis(ir_node_attr_int(g, n, "axis", &found), r) != 0) return unsupported(cg, "on an axis other than 0");
    IrDType it = ir_type_dtype(g, ir_value_type(g, ix));
    if (it != IR_DTYPE_I64 && it != IR_DTYPE_I32) return unsupported(cg, "with non-i32/i64 indices");
    if (d[0] == 0) return unsupported(cg, "on an empty axis");
    GatherCtx c = {buf(cg, y), buf(cg, x), buf(cg, ix), it == IR_DTYPE_I64 ? cg->i64 : cg->i32, d[0],
                   numel(r - 1, d + 1) * (int64_t)ir_dtype_size(ir_type_dtype(g, ir_value_type(g, x)))};
    int64_t cnt = numel(ri, di);
    s[0][0] = 1;
    if (c.row_bytes) emit_nest(cg, 1, &cnt, 1, s, NULL, gather_body, &c);
    return IR_OK;
}

/* ---- per node ----------------------------------------------------------------------------- */

bool llvm_op_supported(IrOp op) {
    if (ew_supported(op) || llvm_ops_supported(op)) return true;
    switch (op) {
    case IR_OP_IDENTITY: case IR_OP_RESHAPE: case IR_OP_FLATTEN: case IR_OP_SQUEEZE: case IR_OP_UNSQUEEZE:
    case IR_OP_DROPOUT: case IR_OP_TRANSPOSE: case IR_OP_CONCAT: case IR_OP_GATHER: case IR_OP_SLICE: case IR_OP_MAT_MUL:
    case IR_OP_GEMM: case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX: case IR_OP_LAYER_NORMALIZATION: case IR_OP_REDUCE_MEAN:
    case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN: case IR_OP_GLOBAL_AVERAGE_POOL:
    case IR_OP_BATCH_NORMALIZATION: case IR_OP_CONSTANT: case IR_OP_CONSTANT_OF_SHAPE: case IR_OP_CONV: case IR_OP_MAX_POOL:
    case IR_OP_AVERAGE_POOL:
        return true;
    default: return false;
    }
}

static IrStatus gen_node_body(Cg *cg, uint32_t index) {
    IrOp op = ir_node_op(cg->g, cg->node);
    if (op == IR_OP_FUSED) return gen_fused_ew(cg);
    if (llvm_ops_claims(cg->g, cg->node, ew_supported(op))) { /* backend/llvm_ops_*.c */
        LlvmEmit e = {cg->g, cg->diag, cg->node, index, cg->ctx, cg->mod, cg->b, cg->ab, cg->fn, cg->bufs, cg->fns, &cg->slots};
        return llvm_ops_gen(&e);
    }
    if (ew_supported(op)) return gen_elementwise(cg, op);
    switch (op) {
    case IR_OP_DROPOUT: {
        /* inference only: training_mode must be absent (or a constant false) */
        IrValueId tm = ir_node_num_operands(cg->g, cg->node) > 2 ? ir_node_operand(cg->g, cg->node, 2) : 0;
        const unsigned char *tmv = tm ? llvm_value_const_data(cg->g, tm) : NULL;
        if (tm && (!tmv || *tmv)) return unsupported(cg, "in training mode");
        IrValueId mask = ir_node_num_results(cg->g, cg->node) > 1 ? ir_node_result(cg->g, cg->node, 1) : 0;
        size_t nb = mask ? llvm_value_nbytes(cg->g, mask) : 0;
        if (nb) /* the mask is all true in inference */
            LLVMBuildMemSet(cg->b, buf(cg, mask), LLVMConstInt(cg->i8, 1, 0), ci64(cg, (int64_t)nb), 1);
        return gen_copy_bytes(cg);
    }
    case IR_OP_IDENTITY: case IR_OP_RESHAPE: case IR_OP_FLATTEN: case IR_OP_SQUEEZE: case IR_OP_UNSQUEEZE:
        return gen_copy_bytes(cg);
    case IR_OP_TRANSPOSE: return gen_transpose(cg);
    case IR_OP_CONCAT: return gen_concat(cg);
    case IR_OP_GATHER: return gen_gather(cg);
    case IR_OP_SLICE: return gen_slice(cg);
    case IR_OP_MAT_MUL: return gen_matmul(cg);
    case IR_OP_GEMM: return gen_gemm(cg);
    case IR_OP_SOFTMAX: case IR_OP_LOG_SOFTMAX: case IR_OP_LAYER_NORMALIZATION: return gen_softmax_layernorm(cg, op);
    case IR_OP_REDUCE_MEAN: case IR_OP_REDUCE_SUM: case IR_OP_REDUCE_MAX: case IR_OP_REDUCE_MIN:
    case IR_OP_GLOBAL_AVERAGE_POOL:
        return gen_reduce(cg, op);
    case IR_OP_BATCH_NORMALIZATION: return gen_batchnorm(cg);
    case IR_OP_CONV: return gen_conv(cg, index);
    case IR_OP_MAX_POOL: return gen_pool(cg, true);
    case IR_OP_AVERAGE_POOL: return gen_pool(cg, false);
    default: return unsupported(cg, NULL);
    }
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
        if (v && !llvm_value_shape(g, v, &r, d)) {
            ir_diag_at_node(cg->diag, g, n, IR_SEV_ERROR,
                            "the llvm backend needs static shapes, but '%s' of %s has a symbolic or unknown shape "
                            "(bind the symbols first: the run/bench commands specialize from the inputs)",
                            ir_value_name(g, v), ir_op_name(ir_node_op(g, n)));
            return IR_EUNSUPPORTED;
        }
    }
    return IR_OK;
}

static IrStatus gen_node(Cg *cg, LLVMTypeRef kty, uint32_t index, const char *ext_name, LLVMValueRef *kfn) {
    *kfn = NULL;
    cg->slots.n = 0;
    IrStatus s = check_static(cg);
    if (s) return s;
    IrOp op = ir_node_op(cg->g, cg->node);
    if (!llvm_op_supported(op) && op != IR_OP_FUSED) return unsupported(cg, NULL);
    if (op == IR_OP_CONSTANT || op == IR_OP_CONSTANT_OF_SHAPE) return IR_OK; /* bound to data made once */
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
    s = gen_node_body(cg, index);
    LLVMBuildRetVoid(cg->b);
    for (uint32_t j = 0; !s && j < cg->slots.n; j++)
        if (cg->slots.v[j] == UINT32_MAX) s = IR_ENOMEM;
    if (!s && cg->slots.n == 0) llvm_slot_local(&cg->slots, 0); /* keep an array to pass */
    if (s) {
        LLVMDeleteFunction(cg->fn);
        return s;
    }
    *kfn = cg->fn;
    return IR_OK;
}

/* ---- module and JIT ---------------------------------------------------------------------- */

static void cg_init(Cg *cg, const IrGraph *g, LLVMContextRef ctx, IrDiag *diag, LLVMModuleRef mod) {
    *cg = (Cg){.g = g, .diag = diag, .ctx = ctx, .mod = mod};
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

IrStatus llvm_build_module(const IrGraph *g, LLVMContextRef ctx, IrDiag *diag, LLVMModuleRef *out,
                           uint32_t *n_kernels) {
    Cg cg;
    cg_init(&cg, g, ctx, diag, LLVMModuleCreateWithNameInContext("irtool", ctx));
    LLVMTypeRef kty = kernel_type(ctx);
    LLVMValueRef entry = LLVMAddFunction(cg.mod, "irt_entry", kty);
    LLVMBuilderRef eb = LLVMCreateBuilderInContext(ctx), eab = LLVMCreateBuilderInContext(ctx);
    LLVMBasicBlockRef eblock = LLVMAppendBasicBlockInContext(ctx, entry, "entry");
    LLVMBasicBlockRef ebody = LLVMAppendBasicBlockInContext(ctx, entry, "body");
    LLVMPositionBuilderAtEnd(eb, eblock);
    LLVMPositionBuilderBefore(eab, LLVMBuildBr(eb, ebody));
    LLVMPositionBuilderAtEnd(eb, ebody);
    IrStatus status = IR_OK;
    uint32_t index = 0, nk = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && !status; n = ir_node_next(g, n), index++) {
        cg.node = n;
        LLVMValueRef k;
        status = gen_node(&cg, kty, index, NULL, &k);
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
        LLVMDisposeModule(cg.mod);
        return status;
    }
    *n_kernels = nk;
    *out = cg.mod;
    return IR_OK;
}

IrStatus llvm_build_kernel(const IrGraph *g, LLVMContextRef ctx, IrNodeId n, uint32_t index, const char *name,
                           IrDiag *diag, LLVMModuleRef *mod, LlvmSlots *slots) {
    Cg cg;
    cg_init(&cg, g, ctx, diag, LLVMModuleCreateWithNameInContext("irtool-kernel", ctx));
    cg.node = n;
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
    cg_fini(&cg);
    return s;
}

IrStatus llvm_build_entry(LLVMModuleRef mod, uint32_t nk, char *const *names, const LlvmSlots *slots, IrDiag *diag) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef kty = kernel_type(ctx);
    LLVMValueRef entry = LLVMAddFunction(mod, "irt_entry", kty);
    LLVMBuilderRef eb = LLVMCreateBuilderInContext(ctx), eab = LLVMCreateBuilderInContext(ctx);
    LLVMBasicBlockRef eblock = LLVMAppendBasicBlockInContext(ctx, entry, "entry");
    LLVMBasicBlockRef ebody = LLVMAppendBasicBlockInContext(ctx, entry, "body");
    LLVMPositionBuilderAtEnd(eb, eblock);
    LLVMPositionBuilderBefore(eab, LLVMBuildBr(eb, ebody));
    LLVMPositionBuilderAtEnd(eb, ebody);
    for (uint32_t i = 0; i < nk; i++) {
        LLVMValueRef k = LLVMGetNamedFunction(mod, names[i]);
        if (!k) k = LLVMAddFunction(mod, names[i], kty);
        call_kernel(ctx, eb, eab, entry, k, &slots[i]);
    }
    LLVMBuildRetVoid(eb);
    LLVMDisposeBuilder(eb);
    LLVMDisposeBuilder(eab);
    return verify_module(mod, diag);
}

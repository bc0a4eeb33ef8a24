/* NVPTX code generation for the CUDA backend: every top-level node of a specialized graph becomes
 * kernels (grid-stride loops over its output, 128-bit vector accesses for same-shape elementwise
 * groups, one block per row with warp shuffles for softmax/layer norm/reductions) or runtime
 * steps (device copies, cuBLASLt GEMMs; Conv = im2col kernel + GEMM). Kernels take one global
 * pointer per buffer they touch (the step lists the slots). Shapes are static; anything else is
 * refused naming the op and the target. Transcendentals use ex2/lg2.approx (max rel. err ~2^-22).
 */
#include "backend/cuda/cuda.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Cu {
    const IrGraph *g;
    IrDiag *diag;
    IrNodeId node;
    uint32_t index, nv;
    int sm;
    const char *target;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef i1, i8, i16, i32, i64, f32, gptr, vd, it; /* it: index type (i32 when everything fits) */
    LLVMValueRef fn, smem, f8tab;
    uint32_t n_params, param_slot[CU_MAX_ARGS];
    LLVMValueRef param[CU_MAX_ARGS];
    CuModule *m;
    uint32_t cur_kernel;
} Cu;

/* ---- shapes: backend/llvm/emit.h ---------------------------------------------------------- */

static IrStatus unsupported(Cu *c, const char *what) {
    ir_diag_at_node(c->diag, c->g, c->node, IR_SEV_ERROR, "the cuda backend (%s) does not support %s%s%s",
                    c->target, ir_op_name(ir_node_op(c->g, c->node)), what ? " " : "", what ? what : "");
    return IR_EUNSUPPORTED;
}

/* ---- steps and kernels -------------------------------------------------------------------------- */

static IrStatus push_step(Cu *c, const CuStep *s) {
    CuModule *m = c->m;
    if (m->n_s == m->cap_s) {
        uint32_t cap = m->cap_s ? 2 * m->cap_s : 64;
        CuStep *p = realloc(m->s, cap * sizeof *p);
        if (!p) return IR_ENOMEM;
        m->s = p;
        m->cap_s = cap;
    }
    m->s[m->n_s] = *s;
    m->s[m->n_s].node = c->index;
    m->n_s++;
    return IR_OK;
}

static LLVMValueRef ci(Cu *c, int64_t v) { return LLVMConstInt(c->it, (unsigned long long)v, 1); }
static LLVMValueRef c32(Cu *c, int64_t v) { return LLVMConstInt(c->i32, (unsigned long long)v, 1); }
static LLVMValueRef cf(Cu *c, double v) { return LLVMConstReal(c->f32, v); }

static LLVMValueRef call_intr(Cu *c, const char *name, LLVMTypeRef *over, unsigned n_over, LLVMValueRef *args,
                              unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(c->mod, id, over, n_over);
    LLVMTypeRef ft = LLVMIntrinsicGetType(c->ctx, id, over, n_over);
    return LLVMBuildCall2(c->b, ft, f, args, n, "");
}
static LLVMValueRef sreg(Cu *c, const char *name) {
    LLVMValueRef v = call_intr(c, name, NULL, 0, NULL, 0);
    return c->it == c->i32 ? v : LLVMBuildZExt(c->b, v, c->it, "");
}
static LLVMValueRef f32_intr(Cu *c, const char *name, LLVMValueRef x) { return call_intr(c, name, &c->f32, 1, &x, 1); }

/* Starts kernel `name` whose parameters are the buffers of `slots` (deduplicated, in order);
 * c->param[i] is then the global pointer of slots[i]'s first occurrence. */
static IrStatus kbegin(Cu *c, const uint32_t *slots, uint32_t n, uint32_t block, bool rows) {
    CuModule *m = c->m;
    c->n_params = 0;
    for (uint32_t i = 0; i < n; i++) {
        bool dup = false;
        for (uint32_t j = 0; j < c->n_params && !dup; j++) dup = c->param_slot[j] == slots[i];
        if (dup) continue;
        if (c->n_params == CU_MAX_ARGS) return unsupported(c, "with this many buffers");
        c->param_slot[c->n_params++] = slots[i];
    }
    if (m->n_k == m->cap_k) {
        uint32_t cap = m->cap_k ? 2 * m->cap_k : 32;
        CuKernel *p = realloc(m->k, cap * sizeof *p);
        if (!p) return IR_ENOMEM;
        m->k = p;
        m->cap_k = cap;
    }
    CuKernel *k = &m->k[m->n_k];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "k%u_%u", c->index, m->n_k);
    k->node = c->index;
    k->block = block;
    k->rows = rows;
    k->n_params = c->n_params;
    k->regs = k->smem = k->stack = -1;
    c->cur_kernel = m->n_k++;
    LLVMTypeRef ps[CU_MAX_ARGS];
    for (uint32_t i = 0; i < c->n_params; i++) ps[i] = c->gptr;
    c->fn = LLVMAddFunction(c->mod, k->name, LLVMFunctionType(c->vd, ps, c->n_params, 0));
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (uint32_t i = 0; i < c->n_params; i++) {
        c->param[i] = LLVMGetParam(c->fn, i);
        LLVMAddAttributeAtIndex(c->fn, i + 1, LLVMCreateEnumAttribute(c->ctx, noalias, 0));
    }
    /* nvvm.annotations: kernel, and launch bounds (maxntidx) */
    LLVMMetadataRef fmd = LLVMValueAsMetadata(c->fn);
    const char *keys[2] = {"kernel", "maxntidx"};
    unsigned vals[2] = {1, block};
    for (int i = 0; i < 2; i++) {
        LLVMMetadataRef ops[3] = {fmd, LLVMMDStringInContext2(c->ctx, keys[i], strlen(keys[i])),
                                  LLVMValueAsMetadata(LLVMConstInt(c->i32, vals[i], 0))};
        LLVMAddNamedMetadataOperand(c->mod, "nvvm.annotations",
                                    LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, ops, 3)));
    }
    LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, c->fn, "entry"));
    return IR_OK;
}

static LLVMValueRef pslot(Cu *c, uint32_t slot) {
    for (uint32_t j = 0; j < c->n_params; j++)
        if (c->param_slot[j] == slot) return c->param[j];
    return NULL;
}

/* Ends the kernel and adds a launch step over `work` items (or rows) with the slots at offsets. */
static IrStatus kend(Cu *c, int64_t work, const int64_t *offs) {
    LLVMBuildRetVoid(c->b);
    CuStep s = {.kind = CU_STEP_KERNEL, .kernel = c->cur_kernel, .n_args = c->n_params, .work = work};
    for (uint32_t i = 0; i < c->n_params; i++) s.arg[i] = (CuArg){c->param_slot[i], offs ? offs[i] : 0};
    return work > 0 ? push_step(c, &s) : IR_OK;
}

/* Another launch of the current kernel with other byte offsets per parameter. */
static IrStatus relaunch(Cu *c, int64_t work, const int64_t *offs) {
    CuStep s = {.kind = CU_STEP_KERNEL, .kernel = c->cur_kernel, .n_args = c->n_params, .work = work};
    for (uint32_t i = 0; i < c->n_params; i++) s.arg[i] = (CuArg){c->param_slot[i], offs[i]};
    return push_step(c, &s);
}

static LLVMValueRef gep(Cu *c, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildGEP2(c->b, t, base, &off, 1, "");
}
static LLVMValueRef ld(Cu *c, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildLoad2(c->b, t, gep(c, t, base, off), "");
}
static void st(Cu *c, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off, LLVMValueRef v) {
    LLVMBuildStore(c->b, v, gep(c, t, base, off));
}

/* ---- loops ----------------------------------------------------------------------------------- */

/* i = start; while (i < n) { body; i += step }  (the test first, so n may be smaller than start) */
typedef struct Loop {
    LLVMValueRef iv, step, n;
    LLVMBasicBlockRef head, body, exit;
} Loop;

static void loop_begin_acc(Cu *c, Loop *l, LLVMValueRef start, LLVMValueRef n, LLVMValueRef step, LLVMValueRef init,
                           LLVMValueRef *acc) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
    l->head = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "head");
    l->body = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "body");
    l->exit = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "exit");
    l->step = step;
    l->n = n;
    LLVMBuildBr(c->b, l->head);
    LLVMPositionBuilderAtEnd(c->b, l->head);
    l->iv = LLVMBuildPhi(c->b, LLVMTypeOf(start), "i");
    LLVMAddIncoming(l->iv, &start, &pre, 1);
    if (acc) {
        *acc = LLVMBuildPhi(c->b, LLVMTypeOf(init), "acc");
        LLVMAddIncoming(*acc, &init, &pre, 1);
    }
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, l->iv, n, ""), l->body, l->exit);
    LLVMPositionBuilderAtEnd(c->b, l->body);
}

static void loop_begin(Cu *c, Loop *l, LLVMValueRef start, LLVMValueRef n, LLVMValueRef step) {
    loop_begin_acc(c, l, start, n, step, NULL, NULL);
}

/* the accumulator's value for the next iteration (call before loop_end) */
static void loop_acc_next(Cu *c, LLVMValueRef acc, LLVMValueRef next) {
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(c->b);
    LLVMAddIncoming(acc, &next, &cur, 1);
}

static void loop_end(Cu *c, Loop *l) {
    LLVMValueRef next = LLVMBuildNSWAdd(c->b, l->iv, l->step, "");
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(c->b);
    LLVMAddIncoming(l->iv, &next, &cur, 1);
    LLVMBuildBr(c->b, l->head);
    LLVMPositionBuilderAtEnd(c->b, l->exit);
}

/* Grid-stride loop over [0, work): i = blockIdx*blockDim + threadIdx, step gridDim*blockDim. */
static void grid_begin(Cu *c, Loop *l, int64_t work) {
    LLVMValueRef ntid = sreg(c, "llvm.nvvm.read.ptx.sreg.ntid.x");
    LLVMValueRef start = LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, sreg(c, "llvm.nvvm.read.ptx.sreg.ctaid.x"), ntid, ""),
                                         sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x"), "");
    LLVMValueRef step = LLVMBuildNSWMul(c->b, sreg(c, "llvm.nvvm.read.ptx.sreg.nctaid.x"), ntid, "");
    loop_begin(c, l, start, ci(c, work), step);
}

/* Loop nest over dims as one grid-stride loop: offs[j] = base[j] + sum_k coord_k * strides[j][k]. */
typedef void (*NestBody)(Cu *c, LLVMValueRef *offs, void *user);

/* offs[j] = base[j] + sum_k coord_k(flat) * strides[j][k] (operands laid out like the iteration
 * space get flat + base directly, without the divisions). */
static void nest_offsets(Cu *c, uint32_t rank, const int64_t *dims, uint32_t n_ops, int64_t (*strides)[IR_MAX_RANK],
                         const int64_t *base, LLVMValueRef flat, LLVMValueRef *offs) {
    LLVMValueRef rem = flat;
    int64_t contig[IR_MAX_RANK];
    ir_shape_strides(rank, dims, contig);
    for (uint32_t j = 0; j < n_ops; j++) {
        bool same = true;
        for (uint32_t k = 0; k < rank && same; k++) same = dims[k] == 1 || strides[j][k] == contig[k];
        offs[j] = same ? LLVMBuildNSWAdd(c->b, ci(c, base ? base[j] : 0), flat, "") : NULL;
    }
    bool any_rest = false;
    for (uint32_t j = 0; j < n_ops; j++) any_rest |= offs[j] == NULL;
    if (!any_rest) return;
    LLVMValueRef acc[CU_MAX_ARGS + 8];
    for (uint32_t j = 0; j < n_ops; j++) acc[j] = offs[j] ? NULL : ci(c, base ? base[j] : 0);
    for (uint32_t k = rank; k-- > 0;) {
        if (dims[k] == 1) continue;
        LLVMValueRef coord = k == 0 ? rem : LLVMBuildURem(c->b, rem, ci(c, dims[k]), "");
        if (k > 0) rem = LLVMBuildUDiv(c->b, rem, ci(c, dims[k]), "");
        for (uint32_t j = 0; j < n_ops; j++)
            if (acc[j] && strides[j][k])
                acc[j] = LLVMBuildNSWAdd(c->b, acc[j], LLVMBuildNSWMul(c->b, coord, ci(c, strides[j][k]), ""), "");
    }
    for (uint32_t j = 0; j < n_ops; j++)
        if (!offs[j]) offs[j] = acc[j];
}

static void emit_nest(Cu *c, uint32_t rank, const int64_t *dims, uint32_t n_ops, int64_t (*strides)[IR_MAX_RANK],
                      const int64_t *base, NestBody body, void *user) {
    Loop l;
    grid_begin(c, &l, ir_shape_numel(rank, dims));
    LLVMValueRef offs[CU_MAX_ARGS + 8];
    nest_offsets(c, rank, dims, n_ops, strides, base, l.iv, offs);
    body(c, offs, user);
    loop_end(c, &l);
}

/* ---- block reductions ------------------------------------------------------------------------- */

enum { RED_SUM, RED_MAX, RED_MIN };

/* max/min exactly as the interpreter: (x is NaN || x >= y) ? x : y */
static LLVMValueRef nan_max(Cu *c, LLVMValueRef x, LLVMValueRef y, bool max) {
    LLVMValueRef k = LLVMBuildOr(c->b, LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, ""),
                                 LLVMBuildFCmp(c->b, max ? LLVMRealOGE : LLVMRealOLE, x, y, ""), "");
    return LLVMBuildSelect(c->b, k, x, y, "");
}

static LLVMValueRef red_op(Cu *c, int kind, LLVMValueRef a, LLVMValueRef x) {
    return kind == RED_SUM ? LLVMBuildFAdd(c->b, a, x, "") : nan_max(c, a, x, kind == RED_MAX);
}

static LLVMValueRef warp_reduce(Cu *c, int kind, LLVMValueRef v) {
    for (int off = 16; off >= 1; off /= 2) {
        LLVMValueRef args[4] = {c32(c, -1), v, c32(c, off), c32(c, 0x1f)};
        v = red_op(c, kind, v, call_intr(c, "llvm.nvvm.shfl.sync.bfly.f32", NULL, 0, args, 4));
    }
    return v;
}

/* Every thread of the block gets the reduction of v over the block (block: multiple of 32). */
static LLVMValueRef block_reduce(Cu *c, int kind, LLVMValueRef v, uint32_t block) {
    v = warp_reduce(c, kind, v);
    if (block <= 32) return v;
    uint32_t nw = block / 32;
    LLVMValueRef tid = call_intr(c, "llvm.nvvm.read.ptx.sreg.tid.x", NULL, 0, NULL, 0);
    LLVMValueRef lane = LLVMBuildAnd(c->b, tid, c32(c, 31), ""), warp = LLVMBuildLShr(c->b, tid, c32(c, 5), "");
    LLVMTypeRef at = LLVMArrayType2(c->f32, 32);
    LLVMValueRef z = c32(c, 0);
    LLVMBasicBlockRef w = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "wr"), j = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "wj");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, lane, z, ""), w, j);
    LLVMPositionBuilderAtEnd(c->b, w);
    LLVMValueRef idx[2] = {z, warp};
    LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, at, c->smem, idx, 2, ""));
    LLVMBuildBr(c->b, j);
    LLVMPositionBuilderAtEnd(c->b, j);
    call_intr(c, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
    double init = kind == RED_SUM ? 0.0 : kind == RED_MAX ? -INFINITY : INFINITY;
    LLVMValueRef idx2[2] = {z, LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntULT, lane, c32(c, nw), ""), lane, z, "")};
    LLVMValueRef sv = LLVMBuildLoad2(c->b, c->f32, LLVMBuildGEP2(c->b, at, c->smem, idx2, 2, ""), "");
    sv = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntULT, lane, c32(c, nw), ""), sv, cf(c, init), "");
    sv = warp_reduce(c, kind, sv);
    call_intr(c, "llvm.nvvm.barrier0", NULL, 0, NULL, 0); /* smem is reused by the next reduction */
    return sv;
}

/* ---- scalar math ------------------------------------------------------------------------------ */

static LLVMValueRef fexp(Cu *c, LLVMValueRef x) {
    LLVMValueRef t = LLVMBuildFMul(c->b, x, cf(c, 1.4426950408889634), "");
    return call_intr(c, "llvm.nvvm.ex2.approx.f", NULL, 0, &t, 1);
}
static LLVMValueRef flog(Cu *c, LLVMValueRef x) {
    return LLVMBuildFMul(c->b, call_intr(c, "llvm.nvvm.lg2.approx.f", NULL, 0, &x, 1), cf(c, 0.6931471805599453), "");
}
static LLVMValueRef sel(Cu *c, LLVMValueRef k, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(c->b, k, a, b, ""); }
static LLVMValueRef fcmp(Cu *c, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFCmp(c->b, p, a, b, ""); }

/* pow(x, y) = 2^(y log2|x|), with the sign of x for odd integral y, NaN for x < 0 and
 * non-integral y, 1 for y == 0 (as powf). */
static LLVMValueRef fpow(Cu *c, LLVMValueRef x, LLVMValueRef y) {
    LLVMValueRef ax = f32_intr(c, "llvm.fabs", x);
    LLVMValueRef l2 = call_intr(c, "llvm.nvvm.lg2.approx.f", NULL, 0, &ax, 1);
    LLVMValueRef t = LLVMBuildFMul(c->b, y, l2, "");
    LLVMValueRef r = call_intr(c, "llvm.nvvm.ex2.approx.f", NULL, 0, &t, 1);
    LLVMValueRef integral = fcmp(c, LLVMRealOEQ, f32_intr(c, "llvm.floor", y), y);
    LLVMValueRef half = LLVMBuildFMul(c->b, y, cf(c, 0.5), "");
    LLVMValueRef odd = LLVMBuildAnd(c->b, integral, fcmp(c, LLVMRealONE, f32_intr(c, "llvm.floor", half), half), "");
    LLVMValueRef neg = fcmp(c, LLVMRealOLT, x, cf(c, 0.0));
    r = sel(c, LLVMBuildAnd(c->b, neg, odd, ""), LLVMBuildFNeg(c->b, r, ""), r);
    r = sel(c, LLVMBuildAnd(c->b, neg, LLVMBuildNot(c->b, integral, ""), ""), cf(c, NAN), r);
    return sel(c, fcmp(c, LLVMRealOEQ, y, cf(c, 0.0)), cf(c, 1.0), r);
}

/* tanh(x) = sign(x) (1 - 2 / (e^(2|x|) + 1)) */
static LLVMValueRef ftanh(Cu *c, LLVMValueRef x) {
    LLVMValueRef ax = f32_intr(c, "llvm.fabs", x);
    LLVMValueRef e = fexp(c, LLVMBuildFMul(c->b, ax, cf(c, 2.0), ""));
    LLVMValueRef t = LLVMBuildFSub(c->b, cf(c, 1.0), LLVMBuildFDiv(c->b, cf(c, 2.0), LLVMBuildFAdd(c->b, e, cf(c, 1.0), ""), ""), "");
    LLVMValueRef args[2] = {t, x};
    return call_intr(c, "llvm.copysign", &c->f32, 1, args, 2);
}

/* erf by Abramowitz-Stegun 7.1.26 (|error| <= 1.5e-7) */
static LLVMValueRef ferf(Cu *c, LLVMValueRef x) {
    LLVMValueRef ax = f32_intr(c, "llvm.fabs", x);
    LLVMValueRef t = LLVMBuildFDiv(c->b, cf(c, 1.0), LLVMBuildFAdd(c->b, cf(c, 1.0), LLVMBuildFMul(c->b, ax, cf(c, 0.3275911), ""), ""), "");
    static const double a[5] = {1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592};
    LLVMValueRef p = cf(c, a[0]);
    for (int i = 1; i < 5; i++) p = LLVMBuildFAdd(c->b, LLVMBuildFMul(c->b, p, t, ""), cf(c, a[i]), "");
    p = LLVMBuildFMul(c->b, p, t, "");
    LLVMValueRef e = fexp(c, LLVMBuildFNeg(c->b, LLVMBuildFMul(c->b, ax, ax, ""), ""));
    LLVMValueRef r = LLVMBuildFSub(c->b, cf(c, 1.0), LLVMBuildFMul(c->b, p, e, ""), "");
    LLVMValueRef args[2] = {r, x};
    return call_intr(c, "llvm.copysign", &c->f32, 1, args, 2);
}

/* ---- elementwise ------------------------------------------------------------------------------ */


/* x[i]: operand values (NULL for an absent optional operand). */
static LLVMValueRef ew_value(Cu *c, IrOp op, uint32_t n_in, LLVMValueRef *x, double alpha) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef one = cf(c, 1.0), zero = cf(c, 0.0);
    switch (op) {
    case IR_OP_ADD: return LLVMBuildFAdd(b, x[0], x[1], "");
    case IR_OP_SUM:
    case IR_OP_MEAN: {
        LLVMValueRef acc = x[0];
        for (uint32_t i = 1; i < n_in; i++) acc = LLVMBuildFAdd(b, acc, x[i], "");
        return op == IR_OP_MEAN ? LLVMBuildFDiv(b, acc, cf(c, (double)n_in), "") : acc;
    }
    case IR_OP_SUB: return LLVMBuildFSub(b, x[0], x[1], "");
    case IR_OP_MUL: return LLVMBuildFMul(b, x[0], x[1], "");
    case IR_OP_DIV: return LLVMBuildFDiv(b, x[0], x[1], "");
    case IR_OP_POW: return fpow(c, x[0], x[1]);
    case IR_OP_MAX:
    case IR_OP_MIN: {
        LLVMValueRef acc = x[0];
        for (uint32_t i = 1; i < n_in; i++) acc = nan_max(c, acc, x[i], op == IR_OP_MAX);
        return acc;
    }
    case IR_OP_RELU: return sel(c, fcmp(c, LLVMRealUGT, x[0], zero), x[0], zero);
    case IR_OP_NEG: return LLVMBuildFNeg(b, x[0], "");
    case IR_OP_ABS: return f32_intr(c, "llvm.fabs", x[0]);
    case IR_OP_EXP: return fexp(c, x[0]);
    case IR_OP_LOG: return flog(c, x[0]);
    case IR_OP_SQRT: return f32_intr(c, "llvm.sqrt", x[0]);
    case IR_OP_FLOOR: return f32_intr(c, "llvm.floor", x[0]);
    case IR_OP_CEIL: return f32_intr(c, "llvm.ceil", x[0]);
    case IR_OP_RECIPROCAL: return LLVMBuildFDiv(b, one, x[0], "");
    case IR_OP_TANH: return ftanh(c, x[0]);
    case IR_OP_ERF: return ferf(c, x[0]);
    case IR_OP_IDENTITY: return x[0];
    case IR_OP_SIGMOID: return LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, fexp(c, LLVMBuildFNeg(b, x[0], "")), ""), "");
    case IR_OP_LEAKY_RELU: return sel(c, fcmp(c, LLVMRealOLT, x[0], zero), LLVMBuildFMul(b, x[0], cf(c, alpha), ""), x[0]);
    case IR_OP_CLIP: {
        LLVMValueRef v = x[0];
        if (n_in > 1 && x[1]) v = sel(c, fcmp(c, LLVMRealOLT, v, x[1]), x[1], v);
        if (n_in > 2 && x[2]) v = sel(c, fcmp(c, LLVMRealOGT, v, x[2]), x[2], v);
        return v;
    }
    case IR_OP_WHERE: return sel(c, LLVMBuildICmp(b, LLVMIntNE, x[0], LLVMConstInt(c->i8, 0, 0), ""), x[1], x[2]);
    default: return NULL;
    }
}

/* One kernel for a single elementwise node or an elementwise `irtool.fused` group: the loads are
 * the group's operands (or the node's), the members are evaluated on scalars in order, only
 * the results are stored. With every operand of the output's shape (or one element) and the
 * element count a multiple of 4, each thread handles 4 elements with 128-bit loads and stores. */
typedef struct EwPlan {
    uint32_t n_load, n_store;
    IrValueId load_v[CU_MAX_ARGS], store_v[CU_MAX_ARGS]; /* values inside the group */
    uint32_t load_slot[CU_MAX_ARGS], store_slot[CU_MAX_ARGS];
    bool load_bool[CU_MAX_ARGS], scalar[CU_MAX_ARGS];
    int64_t strides[CU_MAX_ARGS + 8][IR_MAX_RANK];
    IrRegionId body; /* 0: a single node */
    LLVMValueRef *vals;
    int vec;
} EwPlan;

static void ew_eval(Cu *c, EwPlan *p) {
    const IrGraph *g = c->g;
    IrNodeId first = p->body ? ir_region_first(g, p->body) : c->node;
    for (IrNodeId m = first; m; m = p->body ? ir_node_next(g, m) : 0) {
        uint32_t n_in = ir_node_num_operands(g, m);
        LLVMValueRef x[CU_MAX_ARGS];
        for (uint32_t i = 0; i < n_in && i < CU_MAX_ARGS; i++) {
            IrValueId v = ir_node_operand(g, m, i);
            x[i] = v ? p->vals[v] : NULL;
        }
        bool found;
        double alpha = ir_node_attr_float(g, m, "alpha", &found);
        p->vals[ir_node_result(g, m, 0)] = ew_value(c, ir_node_op(g, m), n_in, x, alpha);
    }
}

static void ew_body(Cu *c, LLVMValueRef *offs, void *user) {
    EwPlan *p = user;
    for (uint32_t j = 0; j < p->n_load; j++)
        if (!p->scalar[j])
            p->vals[p->load_v[j]] = ld(c, p->load_bool[j] ? c->i8 : c->f32, pslot(c, p->load_slot[j]), offs[p->n_store + j]);
    ew_eval(c, p);
    for (uint32_t j = 0; j < p->n_store; j++) st(c, c->f32, pslot(c, p->store_slot[j]), offs[j], p->vals[p->store_v[j]]);
}

/* 4 consecutive outputs of one row per iteration: operands with unit last stride are read with
 * one 128-bit load (their offset is a multiple of 4), operands broadcast along the last dim with
 * one scalar load. */
static void ew_body_vec(Cu *c, EwPlan *p, LLVMValueRef i, uint32_t rank, const int64_t *od) {
    LLVMValueRef flat = LLVMBuildNSWMul(c->b, i, ci(c, 4), ""), offs[CU_MAX_ARGS + 8];
    nest_offsets(c, rank, od, p->n_store + p->n_load, p->strides, NULL, flat, offs);
    LLVMValueRef lanes[CU_MAX_ARGS], one[CU_MAX_ARGS];
    for (uint32_t j = 0; j < p->n_load; j++) {
        if (p->scalar[j]) continue;
        LLVMTypeRef et = p->load_bool[j] ? c->i8 : c->f32, vt = LLVMVectorType(et, 4);
        LLVMValueRef ptr = gep(c, et, pslot(c, p->load_slot[j]), offs[p->n_store + j]);
        lanes[j] = one[j] = NULL;
        if (rank && p->strides[p->n_store + j][rank - 1] == 0) {
            one[j] = LLVMBuildLoad2(c->b, et, ptr, "");
        } else {
            lanes[j] = LLVMBuildLoad2(c->b, vt, ptr, "");
            LLVMSetAlignment(lanes[j], p->load_bool[j] ? 4 : 16);
        }
    }
    LLVMValueRef out[CU_MAX_ARGS];
    for (uint32_t j = 0; j < p->n_store; j++) out[j] = LLVMGetUndef(LLVMVectorType(c->f32, 4));
    for (int k = 0; k < 4; k++) {
        for (uint32_t j = 0; j < p->n_load; j++)
            if (!p->scalar[j])
                p->vals[p->load_v[j]] = one[j] ? one[j] : LLVMBuildExtractElement(c->b, lanes[j], c32(c, k), "");
        ew_eval(c, p);
        for (uint32_t j = 0; j < p->n_store; j++)
            out[j] = LLVMBuildInsertElement(c->b, out[j], p->vals[p->store_v[j]], c32(c, k), "");
    }
    for (uint32_t j = 0; j < p->n_store; j++) {
        LLVMValueRef st_ = LLVMBuildStore(c->b, out[j], gep(c, c->f32, pslot(c, p->store_slot[j]), offs[j]));
        LLVMSetAlignment(st_, 16);
    }
}

static IrStatus ew_add_load(Cu *c, EwPlan *p, IrValueId inner, IrValueId src, uint32_t orank) {
    for (uint32_t j = 0; j < p->n_load; j++)
        if (p->load_v[j] == inner) return IR_OK;
    if (p->n_store + p->n_load >= CU_MAX_ARGS) return unsupported(c, "with this many operands");
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    lower_value_shape(c->g, src, &r, d);
    uint32_t j = p->n_load++;
    p->load_v[j] = inner;
    p->load_slot[j] = src;
    p->load_bool[j] = lower_value_dtype(c->g, src) == IR_DTYPE_BOOL;
    p->scalar[j] = ir_shape_numel(r, d) == 1;
    ir_shape_broadcast_strides(r, d, orank, NULL, p->strides[p->n_store + j]);
    return IR_OK;
}

static IrStatus gen_ew(Cu *c, bool fused) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    EwPlan p = {0};
    uint32_t orank;
    int64_t od[IR_MAX_RANK];
    IrValueId out0 = ir_node_result(g, n, 0);
    lower_value_shape(g, out0, &orank, od);
    if (fused) {
        if (!lower_fused_ew_group(g, n, true)) return unsupported(c, "group with these members or shapes");
        p.body = ir_node_region_at(g, n, 0);
        for (IrNodeId m = ir_region_first(g, p.body); m; m = ir_node_next(g, m))
            if (!lower_core_ew_op(ir_node_op(g, m))) {
                ir_diag_at_node(c->diag, g, m, IR_SEV_ERROR, "the cuda backend (%s) does not support %s in a fused group",
                                c->target, ir_op_name(ir_node_op(g, m)));
                return IR_EUNSUPPORTED;
            }
    } else {
        if (lower_value_dtype(g, out0) != IR_DTYPE_F32) return unsupported(c, "on non-f32 tensors");
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrValueId v = ir_node_operand(g, n, i);
            bool cond = ir_node_op(g, n) == IR_OP_WHERE && i == 0;
            if (v && lower_value_dtype(g, v) != (cond ? IR_DTYPE_BOOL : IR_DTYPE_F32)) return unsupported(c, "on non-f32 tensors");
        }
    }
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId res = ir_node_result(g, n, i);
        if (!res) continue;
        if (p.n_store >= CU_MAX_ARGS) return unsupported(c, "with this many results");
        p.store_v[p.n_store] = fused ? ir_region_output(g, p.body, i) : res;
        p.store_slot[p.n_store] = res;
        ir_shape_strides(orank, od, p.strides[p.n_store]);
        p.n_store++;
    }
    IrStatus s = IR_OK;
    if (fused) {
        for (IrNodeId m = ir_region_first(g, p.body); m && !s; m = ir_node_next(g, m))
            for (uint32_t i = 0; i < ir_node_num_operands(g, m) && !s; i++) {
                IrValueId v = ir_node_operand(g, m, i), src = v;
                if (!v || ir_value_kind(g, v) == IR_VALUE_RESULT) continue;
                for (uint32_t a = 0; a < ir_region_num_args(g, p.body); a++)
                    if (ir_region_arg(g, p.body, a) == v) src = ir_node_operand(g, n, a);
                if (!src) return unsupported(c, "group with these operands");
                s = ew_add_load(c, &p, v, src, orank);
            }
    } else {
        for (uint32_t i = 0; i < ir_node_num_operands(g, n) && !s; i++) {
            IrValueId v = ir_node_operand(g, n, i);
            if (v) s = ew_add_load(c, &p, v, v, orank);
        }
    }
    if (s) return s;
    int64_t total = ir_shape_numel(orank, od);
    /* vector path: rows of a multiple of 4; every operand contiguous along the row (its other
     * strides then multiples of 4, so 16-byte aligned) or broadcast along it */
    bool vec = orank > 0 && od[orank - 1] % 4 == 0 && total >= 4;
    for (uint32_t j = 0; j < p.n_load && vec; j++) {
        if (p.scalar[j]) continue;
        const int64_t *sj = p.strides[p.n_store + j];
        vec = sj[orank - 1] == 0 || sj[orank - 1] == 1;
        for (uint32_t k = 0; k + 1 < orank && vec && sj[orank - 1] == 1; k++) vec = sj[k] % 4 == 0;
    }
    uint32_t slots[CU_MAX_ARGS];
    for (uint32_t j = 0; j < p.n_store; j++) slots[j] = p.store_slot[j];
    for (uint32_t j = 0; j < p.n_load; j++) slots[p.n_store + j] = p.load_slot[j];
    if ((s = kbegin(c, slots, p.n_store + p.n_load, CU_BLOCK, false))) return s;
    p.vals = calloc(ir_graph_num_values(g) + 1, sizeof *p.vals);
    if (!p.vals) return IR_ENOMEM;
    for (uint32_t j = 0; j < p.n_load; j++) /* one-element operands: loaded once */
        if (p.scalar[j]) p.vals[p.load_v[j]] = ld(c, p.load_bool[j] ? c->i8 : c->f32, pslot(c, p.load_slot[j]), ci(c, 0));
    if (vec) {
        Loop l;
        grid_begin(c, &l, total / 4);
        ew_body_vec(c, &p, l.iv, orank, od);
        loop_end(c, &l);
    } else {
        emit_nest(c, orank, od, p.n_store + p.n_load, p.strides, NULL, ew_body, &p);
    }
    free(p.vals);
    return kend(c, vec ? total / 4 : total, NULL);
}

/* Comparisons (f32 -> bool) and logic on bools: a grid-stride kernel with broadcast indexing. */
typedef struct CmpCtx {
    IrOp op;
    uint32_t y, a, b;
    bool logic;
} CmpCtx;

static void cmp_body(Cu *c, LLVMValueRef *o, void *user) {
    CmpCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMTypeRef t = p->logic ? c->i8 : c->f32;
    LLVMValueRef x = ld(c, t, pslot(c, p->a), o[1]), r;
    LLVMValueRef z = LLVMConstInt(c->i8, 0, 0);
    if (p->op == IR_OP_NOT) {
        r = LLVMBuildICmp(b, LLVMIntEQ, x, z, "");
    } else {
        LLVMValueRef yv = ld(c, t, pslot(c, p->b), o[2]);
        switch (p->op) {
        case IR_OP_EQUAL: r = fcmp(c, LLVMRealOEQ, x, yv); break;
        case IR_OP_GREATER: r = fcmp(c, LLVMRealOGT, x, yv); break;
        case IR_OP_GREATER_OR_EQUAL: r = fcmp(c, LLVMRealOGE, x, yv); break;
        case IR_OP_LESS: r = fcmp(c, LLVMRealOLT, x, yv); break;
        case IR_OP_LESS_OR_EQUAL: r = fcmp(c, LLVMRealOLE, x, yv); break;
        default: {
            LLVMValueRef xa = LLVMBuildICmp(b, LLVMIntNE, x, z, ""), ya = LLVMBuildICmp(b, LLVMIntNE, yv, z, "");
            r = p->op == IR_OP_AND ? LLVMBuildAnd(b, xa, ya, "") : p->op == IR_OP_OR ? LLVMBuildOr(b, xa, ya, "")
                                                                   : LLVMBuildXor(b, xa, ya, "");
        }
        }
    }
    st(c, c->i8, pslot(c, p->y), o[0], LLVMBuildZExt(b, r, c->i8, ""));
}


static IrStatus gen_cmp(Cu *c, IrOp op) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    bool logic = op == IR_OP_NOT || op == IR_OP_AND || op == IR_OP_OR || op == IR_OP_XOR;
    uint32_t na = op == IR_OP_NOT ? 1 : 2, orank, r;
    CmpCtx p = {op, ir_node_result(g, n, 0), ir_node_operand(g, n, 0), na > 1 ? ir_node_operand(g, n, 1) : 0, logic};
    for (uint32_t i = 0; i < na; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v || lower_value_dtype(g, v) != (logic ? IR_DTYPE_BOOL : IR_DTYPE_F32))
            return unsupported(c, logic ? "on non-bool tensors" : "on non-f32 tensors");
    }
    int64_t od[IR_MAX_RANK], d[IR_MAX_RANK], s[3][IR_MAX_RANK];
    lower_value_shape(g, p.y, &orank, od);
    ir_shape_strides(orank, od, s[0]);
    for (uint32_t i = 0; i < na; i++) {
        lower_value_shape(g, ir_node_operand(g, n, i), &r, d);
        ir_shape_broadcast_strides(r, d, orank, NULL, s[1 + i]);
    }
    int64_t total = ir_shape_numel(orank, od);
    if (!total) return IR_OK;
    uint32_t slots[3] = {p.y, p.a, p.b ? p.b : p.a};
    IrStatus st_ = kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    emit_nest(c, orank, od, na + 1, s, NULL, cmp_body, &p);
    return kend(c, total, NULL);
}

/* ---- BatchNormalization (inference), bias epilogues ------------------------------------------- */

typedef struct BnCtx {
    uint32_t y, x, scale, bias, mean, var;
    double eps;
} BnCtx;

static void bn_body(Cu *c, LLVMValueRef *o, void *user) {
    BnCtx *p = user;
    LLVMValueRef ch = o[2];
    LLVMValueRef v = LLVMBuildFAdd(c->b, ld(c, c->f32, pslot(c, p->var), ch), cf(c, p->eps), "");
    LLVMValueRef inv = LLVMBuildFDiv(c->b, cf(c, 1.0), f32_intr(c, "llvm.sqrt", v), "");
    LLVMValueRef t = LLVMBuildFSub(c->b, ld(c, c->f32, pslot(c, p->x), o[1]), ld(c, c->f32, pslot(c, p->mean), ch), "");
    t = LLVMBuildFMul(c->b, LLVMBuildFMul(c->b, t, inv, ""), ld(c, c->f32, pslot(c, p->scale), ch), "");
    st(c, c->f32, pslot(c, p->y), o[0], LLVMBuildFAdd(c->b, t, ld(c, c->f32, pslot(c, p->bias), ch), ""));
}

static IrStatus gen_batchnorm(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    if (ir_node_num_operands(g, n) < 5) return unsupported(c, "without mean and var");
    bool tm_found;
    if (ir_node_attr_int(g, n, "training_mode", &tm_found) != 0) return unsupported(c, "in training mode");
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) return unsupported(c, "in training mode");
    BnCtx p = {ir_node_result(g, n, 0), ir_node_operand(g, n, 0), ir_node_operand(g, n, 1), ir_node_operand(g, n, 2),
               ir_node_operand(g, n, 3), ir_node_operand(g, n, 4), 0};
    bool found;
    p.eps = ir_node_attr_float(g, n, "epsilon", &found);
    if (!found) p.eps = 1e-5;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    lower_value_shape(g, p.x, &r, d);
    for (uint32_t i = 0; i < 5; i++)
        if (lower_value_dtype(g, ir_node_operand(g, n, i)) != IR_DTYPE_F32) return unsupported(c, "on non-f32 tensors");
    if (r < 2) return unsupported(c, "with rank < 2");
    int64_t dims[3] = {d[0], d[1], ir_shape_numel(r - 2, d + 2)}, s[3][IR_MAX_RANK] = {{d[1] * dims[2], dims[2], 1},
                                                                             {d[1] * dims[2], dims[2], 1}, {0, 1, 0}};
    uint32_t slots[6] = {p.y, p.x, p.scale, p.bias, p.mean, p.var};
    IrStatus st_ = kbegin(c, slots, 6, CU_BLOCK, false);
    if (st_) return st_;
    emit_nest(c, 3, dims, 3, s, NULL, bn_body, &p);
    return kend(c, ir_shape_numel(3, dims), NULL);
}

/* y[o0] = (y[o0] or acc[o0]) * scale + beta * bias[o1] */
typedef struct BiasCtx {
    uint32_t y, bias;
    double beta;
} BiasCtx;

static void bias_body(Cu *c, LLVMValueRef *o, void *user) {
    BiasCtx *p = user;
    LLVMValueRef t = LLVMBuildFMul(c->b, ld(c, c->f32, pslot(c, p->bias), o[1]), cf(c, p->beta), "");
    st(c, c->f32, pslot(c, p->y), o[0], LLVMBuildFAdd(c->b, ld(c, c->f32, pslot(c, p->y), o[0]), t, ""));
}

static IrStatus bias_kernel(Cu *c, uint32_t y, uint32_t bias, double beta, uint32_t rank, const int64_t *dims,
                            int64_t (*s)[IR_MAX_RANK]) {
    BiasCtx p = {y, bias, beta};
    uint32_t slots[2] = {y, bias};
    IrStatus st_ = kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    emit_nest(c, rank, dims, 2, s, NULL, bias_body, &p);
    return kend(c, ir_shape_numel(rank, dims), NULL);
}

/* ---- rows: softmax, layer norm, reductions ---------------------------------------------------- */

static uint32_t row_block(int64_t len) {
    uint32_t b = 32;
    while (b < 256 && b < len) b *= 2;
    return b;
}

/* Per row (one block): base offset of the row, thread loop j = tid; j < len; j += block. */
typedef struct Row {
    LLVMValueRef row, tid;
    uint32_t block;
} Row;

static void row_enter(Cu *c, Row *r, uint32_t block) {
    r->block = block;
    r->row = sreg(c, "llvm.nvvm.read.ptx.sreg.ctaid.x");
    r->tid = sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x");
}

static void row_loop(Cu *c, Row *r, Loop *l, int64_t len) { loop_begin(c, l, r->tid, ci(c, len), ci(c, r->block)); }
static void row_loop_acc(Cu *c, Row *r, Loop *l, int64_t len, double init, LLVMValueRef *acc) {
    loop_begin_acc(c, l, r->tid, ci(c, len), ci(c, r->block), cf(c, init), acc);
}

/* Folds x[base + j*step] over the row in each thread, then across the block. */
static LLVMValueRef row_fold(Cu *c, Row *r, LLVMValueRef x, LLVMValueRef base, int64_t len, int64_t step, int kind,
                             LLVMValueRef shift) {
    double init = kind == RED_MAX ? -INFINITY : kind == RED_MIN ? INFINITY : 0.0;
    Loop l;
    LLVMValueRef acc;
    row_loop_acc(c, r, &l, len, init, &acc);
    LLVMValueRef off = LLVMBuildNSWAdd(c->b, base, step == 1 ? l.iv : LLVMBuildNSWMul(c->b, l.iv, ci(c, step), ""), "");
    LLVMValueRef v = ld(c, c->f32, x, off);
    if (shift) {
        LLVMValueRef t = LLVMBuildFSub(c->b, v, shift, "");
        v = LLVMBuildFMul(c->b, t, t, "");
    }
    loop_acc_next(c, acc, red_op(c, kind == 3 ? RED_SUM : kind, acc, v));
    loop_end(c, &l);
    return block_reduce(c, kind == 3 ? RED_SUM : kind, acc, r->block);
}

static IrStatus gen_softmax_layernorm(Cu *c, IrOp op) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (lower_value_dtype(g, x) != IR_DTYPE_F32) return unsupported(c, "on non-f32 tensors");
    lower_value_shape(g, x, &r, d);
    bool found;
    int64_t axis = ir_shape_axis(ir_node_attr_int(g, n, "axis", &found), r);
    if (!found) axis = r ? r - 1 : 0;
    if (axis < 0 || axis >= (int64_t)r) return unsupported(c, "with this axis");
    int64_t outer = ir_shape_numel((uint32_t)axis, d);
    IrStatus s;
    Row rw;
    Loop l;
    if (op == IR_OP_SOFTMAX || op == IR_OP_LOG_SOFTMAX) {
        int64_t inner = ir_shape_numel(r - (uint32_t)axis - 1, d + axis + 1), len = d[axis];
        if (len == 0 || outer * inner == 0) return IR_OK;
        uint32_t slots[2] = {y, x};
        if ((s = kbegin(c, slots, 2, row_block(len), true))) return s;
        LLVMValueRef X = pslot(c, x), Y = pslot(c, y);
        row_enter(c, &rw, row_block(len));
        /* row = o * inner + i  ->  base = o * len * inner + i */
        LLVMValueRef o = LLVMBuildUDiv(c->b, rw.row, ci(c, inner), ""), i = LLVMBuildURem(c->b, rw.row, ci(c, inner), "");
        LLVMValueRef base = LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, o, ci(c, len * inner), ""), i, "");
        LLVMValueRef m = row_fold(c, &rw, X, base, len, inner, RED_MAX, NULL);
        /* sum of exp(x - m), storing exp for softmax */
        LLVMValueRef acc;
        row_loop_acc(c, &rw, &l, len, 0.0, &acc);
        LLVMValueRef off = LLVMBuildNSWAdd(c->b, base, LLVMBuildNSWMul(c->b, l.iv, ci(c, inner), ""), "");
        LLVMValueRef ex = fexp(c, LLVMBuildFSub(c->b, ld(c, c->f32, X, off), m, ""));
        if (op == IR_OP_SOFTMAX) st(c, c->f32, Y, off, ex);
        loop_acc_next(c, acc, LLVMBuildFAdd(c->b, acc, ex, ""));
        loop_end(c, &l);
        LLVMValueRef total = block_reduce(c, RED_SUM, acc, rw.block);
        LLVMValueRef inv = LLVMBuildFDiv(c->b, cf(c, 1.0), total, "");
        LLVMValueRef shift = LLVMBuildFAdd(c->b, m, flog(c, total), "");
        row_loop(c, &rw, &l, len);
        off = LLVMBuildNSWAdd(c->b, base, LLVMBuildNSWMul(c->b, l.iv, ci(c, inner), ""), "");
        if (op == IR_OP_LOG_SOFTMAX) st(c, c->f32, Y, off, LLVMBuildFSub(c->b, ld(c, c->f32, X, off), shift, ""));
        else st(c, c->f32, Y, off, LLVMBuildFMul(c->b, ld(c, c->f32, Y, off), inv, ""));
        loop_end(c, &l);
        return kend(c, outer * inner, NULL);
    }
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) return unsupported(c, "with Mean/InvStdDev outputs");
    int64_t len = ir_shape_numel(r - (uint32_t)axis, d + axis);
    double eps = ir_node_attr_float(g, n, "epsilon", &found);
    IrValueId sc = ir_node_operand(g, n, 1), bi = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    for (int k = 0; k < 2; k++) {
        IrValueId v = k ? bi : sc;
        if (!v) continue;
        uint32_t vr;
        int64_t vd[IR_MAX_RANK];
        lower_value_shape(g, v, &vr, vd);
        if (ir_shape_numel(vr, vd) != len || lower_value_dtype(g, v) != IR_DTYPE_F32) return unsupported(c, "with broadcast scale or bias");
    }
    if (!sc) return unsupported(c, "without scale");
    if (len == 0 || outer == 0) return IR_OK;
    uint32_t slots[4] = {y, x, sc, bi ? bi : sc};
    if ((s = kbegin(c, slots, 4, row_block(len), true))) return s;
    LLVMValueRef X = pslot(c, x), Y = pslot(c, y);
    row_enter(c, &rw, row_block(len));
    LLVMValueRef base = LLVMBuildNSWMul(c->b, rw.row, ci(c, len), "");
    LLVMValueRef nf = cf(c, (double)len);
    LLVMValueRef mean = LLVMBuildFDiv(c->b, row_fold(c, &rw, X, base, len, 1, RED_SUM, NULL), nf, "");
    LLVMValueRef var = LLVMBuildFDiv(c->b, row_fold(c, &rw, X, base, len, 1, 3, mean), nf, "");
    LLVMValueRef inv = LLVMBuildFDiv(c->b, cf(c, 1.0), f32_intr(c, "llvm.sqrt", LLVMBuildFAdd(c->b, var, cf(c, eps), "")), "");
    row_loop(c, &rw, &l, len);
    LLVMValueRef off = LLVMBuildNSWAdd(c->b, base, l.iv, "");
    LLVMValueRef t = LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, ld(c, c->f32, X, off), mean, ""), inv, "");
    t = LLVMBuildFMul(c->b, t, ld(c, c->f32, pslot(c, sc), l.iv), "");
    if (bi) t = LLVMBuildFAdd(c->b, t, ld(c, c->f32, pslot(c, bi), l.iv), "");
    st(c, c->f32, Y, off, t);
    loop_end(c, &l);
    return kend(c, outer, NULL);
}

static IrStatus gen_reduce(Cu *c, IrOp op) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (lower_value_dtype(g, x) != IR_DTYPE_F32) return unsupported(c, "on non-f32 tensors");
    LowerReduceShape rs;
    const char *why = lower_reduce_shape(g, n, op, &rs);
    if (why) return unsupported(c, why);
    int64_t inner = rs.inner, outer = rs.outer, len = rs.len;
    if (outer * inner == 0) return IR_OK;
    uint32_t slots[2] = {y, x};
    IrStatus s = kbegin(c, slots, 2, row_block(len), true);
    if (s) return s;
    Row rw;
    row_enter(c, &rw, row_block(len));
    LLVMValueRef o = LLVMBuildUDiv(c->b, rw.row, ci(c, inner), ""), i = LLVMBuildURem(c->b, rw.row, ci(c, inner), "");
    LLVMValueRef base = LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, o, ci(c, len * inner), ""), i, "");
    int kind = op == IR_OP_REDUCE_MAX ? RED_MAX : op == IR_OP_REDUCE_MIN ? RED_MIN : RED_SUM;
    LLVMValueRef v = row_fold(c, &rw, pslot(c, x), base, len, inner, kind, NULL);
    if (op == IR_OP_REDUCE_MEAN || op == IR_OP_GLOBAL_AVERAGE_POOL) v = LLVMBuildFDiv(c->b, v, cf(c, (double)len), "");
    LLVMBasicBlockRef w = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "w"), j = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "j");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, rw.tid, ci(c, 0), ""), w, j);
    LLVMPositionBuilderAtEnd(c->b, w);
    st(c, c->f32, pslot(c, y), rw.row, v);
    LLVMBuildBr(c->b, j);
    LLVMPositionBuilderAtEnd(c->b, j);
    return kend(c, outer * inner, NULL);
}

/* ---- data movement ------------------------------------------------------------------------------ */

static LLVMTypeRef int_type(Cu *c, size_t bytes) { return LLVMIntTypeInContext(c->ctx, (unsigned)(8 * bytes)); }

typedef struct CopyCtx {
    uint32_t dst, src;
    LLVMTypeRef t;
} CopyCtx;

static void copy_body(Cu *c, LLVMValueRef *o, void *user) {
    CopyCtx *p = user;
    st(c, p->t, pslot(c, p->dst), o[0], ld(c, p->t, pslot(c, p->src), o[1]));
}

static IrStatus copy_kernel(Cu *c, uint32_t dst, uint32_t src, size_t esize, uint32_t rank, const int64_t *dims,
                            int64_t (*s)[IR_MAX_RANK], const int64_t *base) {
    if (ir_shape_numel(rank, dims) == 0) return IR_OK;
    CopyCtx p = {dst, src, int_type(c, esize)};
    uint32_t slots[2] = {dst, src};
    IrStatus st_ = kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    emit_nest(c, rank, dims, 2, s, base, copy_body, &p);
    return kend(c, ir_shape_numel(rank, dims), NULL);
}

static IrStatus gen_copy_bytes(Cu *c) {
    const IrGraph *g = c->g;
    IrValueId x = ir_node_operand(g, c->node, 0), y = ir_node_result(g, c->node, 0);
    size_t nb = lower_value_nbytes(g, y);
    if (nb != lower_value_nbytes(g, x)) return unsupported(c, "changing the element count");
    if (!nb) return IR_OK;
    CuStep s = {.kind = CU_STEP_COPY, .n_args = 2, .arg = {{y, 0}, {x, 0}}, .bytes = (int64_t)nb};
    return push_step(c, &s);
}

static IrStatus gen_transpose(Cu *c) {
    IrValueId x = ir_node_operand(c->g, c->node, 0), y = ir_node_result(c->g, c->node, 0);
    LowerCopyPlan p;
    const char *why = lower_transpose_plan(c->g, c->node, &p);
    if (why) return unsupported(c, why);
    return copy_kernel(c, y, x, ir_dtype_size(lower_value_dtype(c->g, x)), p.rank, p.dims, p.s, NULL);
}

static IrStatus gen_concat(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId y = ir_node_result(g, n, 0);
    int64_t pos = 0;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId x = ir_node_operand(g, n, i);
        LowerCopyPlan p;
        const char *why = lower_concat_part(g, n, i, &pos, &p);
        if (why) return unsupported(c, why);
        IrStatus st_ = copy_kernel(c, y, x, ir_dtype_size(lower_value_dtype(g, x)), p.rank, p.dims, p.s, p.base);
        if (st_) return st_;
    }
    return IR_OK;
}

static IrStatus gen_slice(Cu *c) {
    IrValueId x = ir_node_operand(c->g, c->node, 0), y = ir_node_result(c->g, c->node, 0);
    LowerCopyPlan p;
    const char *why = lower_slice_plan(c->g, c->node, &p);
    if (why) return unsupported(c, why);
    return copy_kernel(c, y, x, ir_dtype_size(lower_value_dtype(c->g, x)), p.rank, p.dims, p.s, p.base);
}

/* Gather on axis 0: thread per (index, element of the row); indices wrapped and clamped. */
typedef struct GatherCtx {
    uint32_t y, x, idx;
    LLVMTypeRef et, xt;
    int64_t rows, row_len;
} GatherCtx;

static void gather_body(Cu *c, LLVMValueRef *o, void *user) {
    GatherCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef q = LLVMBuildUDiv(b, o[0], ci(c, p->row_len), ""), e = LLVMBuildURem(b, o[0], ci(c, p->row_len), "");
    LLVMValueRef i = LLVMBuildSExtOrBitCast(b, ld(c, p->xt, pslot(c, p->idx), q), c->i64, "");
    LLVMValueRef rows = LLVMConstInt(c->i64, (unsigned long long)p->rows, 1), z = LLVMConstInt(c->i64, 0, 1);
    i = sel(c, LLVMBuildICmp(b, LLVMIntSLT, i, z, ""), LLVMBuildAdd(b, i, rows, ""), i);
    i = sel(c, LLVMBuildICmp(b, LLVMIntSLT, i, z, ""), z, i);
    i = sel(c, LLVMBuildICmp(b, LLVMIntSGE, i, rows, ""), LLVMConstInt(c->i64, (unsigned long long)(p->rows - 1), 1), i);
    LLVMValueRef src = LLVMBuildAdd(b, LLVMBuildMul(b, i, LLVMConstInt(c->i64, (unsigned long long)p->row_len, 1), ""),
                                    LLVMBuildZExtOrBitCast(b, e, c->i64, ""), "");
    st(c, p->et, pslot(c, p->y), o[0], ld(c, p->et, pslot(c, p->x), src));
}

static IrStatus gen_gather(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), ix = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    bool found;
    uint32_t r, ri;
    int64_t d[IR_MAX_RANK], di[IR_MAX_RANK], s[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, x, &r, d);
    lower_value_shape(g, ix, &ri, di);
    if (r == 0 || ir_shape_axis(ir_node_attr_int(g, n, "axis", &found), r) != 0) return unsupported(c, "on an axis other than 0");
    IrDType it = lower_value_dtype(g, ix);
    if (it != IR_DTYPE_I64 && it != IR_DTYPE_I32) return unsupported(c, "with non-i32/i64 indices");
    if (d[0] == 0) return unsupported(c, "on an empty axis");
    GatherCtx p = {y, x, ix, int_type(c, ir_dtype_size(lower_value_dtype(g, x))), it == IR_DTYPE_I64 ? c->i64 : c->i32, d[0],
                   ir_shape_numel(r - 1, d + 1)};
    int64_t total = ir_shape_numel(ri, di) * p.row_len;
    if (total == 0) return IR_OK;
    uint32_t slots[3] = {y, x, ix};
    IrStatus st_ = kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    emit_nest(c, 1, &total, 1, s, NULL, gather_body, &p);
    return kend(c, total, NULL);
}

static IrStatus gen_dropout(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId tm = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    const unsigned char *tmv = tm ? lower_value_const_data(g, tm) : NULL;
    if (tm && (!tmv || *tmv)) return unsupported(c, "in training mode");
    IrValueId mask = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    size_t nb = mask ? lower_value_nbytes(g, mask) : 0;
    if (nb) {
        CuStep s = {.kind = CU_STEP_MEMSET, .n_args = 1, .arg = {{mask, 0}}, .bytes = (int64_t)nb, .value = 1};
        IrStatus st_ = push_step(c, &s);
        if (st_) return st_;
    }
    return gen_copy_bytes(c);
}

/* LRN across channels: y = x / (bias + alpha/size * sum over the channel window of x^2)^beta,
 * one thread per element, the window loop unrolled (size is small and static). */
typedef struct LrnCtx {
    uint32_t y, x;
    int64_t c, s, size;
    double alpha, beta, bias;
} LrnCtx;

static void lrn_body(Cu *c, LLVMValueRef *o, void *user) {
    LrnCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef ch = LLVMBuildURem(b, LLVMBuildUDiv(b, o[0], ci(c, p->s), ""), ci(c, p->c), "");
    LLVMValueRef sq = cf(c, 0.0);
    int64_t lo = (p->size - 1) / 2, hi = p->size - 1 - lo;
    for (int64_t j = -lo; j <= hi; j++) {
        LLVMValueRef cj = LLVMBuildAdd(b, ch, ci(c, j), "");
        LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntULT, cj, ci(c, p->c), ""); /* also catches cj < 0 */
        LLVMValueRef off = sel(c, ok, LLVMBuildAdd(b, o[0], ci(c, j * p->s), ""), o[0]);
        LLVMValueRef v = ld(c, c->f32, pslot(c, p->x), off);
        sq = sel(c, ok, LLVMBuildFAdd(b, sq, LLVMBuildFMul(b, v, v, ""), ""), sq);
    }
    LLVMValueRef den = LLVMBuildFAdd(b, cf(c, p->bias), LLVMBuildFMul(b, sq, cf(c, p->alpha / (double)p->size), ""), "");
    den = fpow(c, den, cf(c, p->beta));
    st(c, c->f32, pslot(c, p->y), o[0], LLVMBuildFDiv(b, ld(c, c->f32, pslot(c, p->x), o[0]), den, ""));
}

static IrStatus gen_lrn(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (lower_value_dtype(g, x) != IR_DTYPE_F32) return unsupported(c, "on non-f32 tensors");
    uint32_t r;
    int64_t d[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, x, &r, d);
    if (r < 2) return unsupported(c, "with rank < 2");
    bool found;
    LrnCtx p = {y, x, d[1], ir_shape_numel(r - 2, d + 2), ir_node_attr_int(g, n, "size", &found), 0, 0, 0};
    if (!found || p.size <= 0 || p.size > 64) return unsupported(c, "with this size");
    p.alpha = ir_node_attr_float(g, n, "alpha", &found);
    if (!found) p.alpha = 1e-4;
    p.beta = ir_node_attr_float(g, n, "beta", &found);
    if (!found) p.beta = 0.75;
    p.bias = ir_node_attr_float(g, n, "bias", &found);
    if (!found) p.bias = 1.0;
    int64_t total = ir_shape_numel(r, d);
    if (!total) return IR_OK;
    uint32_t slots[2] = {y, x};
    IrStatus st_ = kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    emit_nest(c, 1, &total, 1, s1, NULL, lrn_body, &p);
    return kend(c, total, NULL);
}

/* ---- pooling and convolution (2-D NCHW) ------------------------------------------------------- */

/* window geometry and tap index math: backend/llvm/emit.h */
static LLVMValueRef win_coord(Cu *c, LLVMValueRef o, int64_t stride, int64_t pad, LLVMValueRef k, int64_t dil) {
    return llvm_win_coord(c->b, c->it, o, stride, pad, k, dil);
}
static LLVMValueRef pix(Cu *c, const LowerWin *wn, LLVMValueRef ih, LLVMValueRef iw, LLVMValueRef *valid) {
    return llvm_win_pix(c->b, c->it, wn, ih, iw, valid);
}

typedef struct PoolCtx {
    LowerWin w;
    bool max, include_pad;
    uint32_t x, y;
} PoolCtx;

static void pool_body(Cu *c, LLVMValueRef *o, void *user) {
    PoolCtx *p = user;
    LLVMBuilderRef b = c->b;
    LLVMValueRef ohw = ci(c, p->w.oh * p->w.ow);
    LLVMValueRef plane = LLVMBuildUDiv(b, o[0], ohw, ""), rem = LLVMBuildURem(b, o[0], ohw, "");
    LLVMValueRef oh = LLVMBuildUDiv(b, rem, ci(c, p->w.ow), ""), ow = LLVMBuildURem(b, rem, ci(c, p->w.ow), "");
    LLVMValueRef xbase = LLVMBuildMul(b, plane, ci(c, p->w.h * p->w.w), "");
    LLVMValueRef acc = cf(c, p->max ? -INFINITY : 0.0), cnt = cf(c, 0.0);
    /* the window is small and static: unrolled */
    for (int64_t kh = 0; kh < p->w.kh; kh++)
        for (int64_t kw = 0; kw < p->w.kw; kw++) {
            LLVMValueRef ih = win_coord(c, oh, p->w.sh, p->w.pt, ci(c, kh), p->w.dh);
            LLVMValueRef iw = win_coord(c, ow, p->w.sw, p->w.pl, ci(c, kw), p->w.dw), valid;
            LLVMValueRef off = pix(c, &p->w, ih, iw, &valid);
            LLVMValueRef v = ld(c, c->f32, pslot(c, p->x), LLVMBuildAdd(b, xbase, off, ""));
            LLVMValueRef na = p->max ? pool_max_step(b, v, acc) : LLVMBuildFAdd(b, acc, v, "");
            acc = sel(c, valid, na, acc);
            cnt = sel(c, valid, LLVMBuildFAdd(b, cnt, cf(c, 1.0), ""), cnt);
        }
    if (!p->max) acc = LLVMBuildFDiv(b, acc, p->include_pad ? cf(c, (double)(p->w.kh * p->w.kw)) : cnt, "");
    st(c, c->f32, pslot(c, p->y), o[0], acc);
}

static IrStatus gen_pool(Cu *c, bool max) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    if (ir_node_num_results(g, n) > 1 && ir_node_result(g, n, 1)) return unsupported(c, "with an Indices output");
    if (lower_value_dtype(g, x) != IR_DTYPE_F32) return unsupported(c, "on non-f32 tensors");
    IrAttrValue av;
    if (!ir_node_attr(g, n, "kernel_shape", &av) || av.count != 2) return unsupported(c, "other than 2-D");
    if (av.ints[0] * av.ints[1] > 1024) return unsupported(c, "with windows over 1024 taps");
    PoolCtx p = {.max = max, .x = x, .y = y};
    const char *why = lower_win_read(g, n, x, y, av.ints[0], av.ints[1], &p.w);
    if (why) return unsupported(c, why);
    bool found;
    p.include_pad = ir_node_attr_int(g, n, "count_include_pad", &found) != 0;
    int64_t total = p.w.n * p.w.c * p.w.oh * p.w.ow, s[1][IR_MAX_RANK] = {{1}};
    if (!total) return IR_OK;
    uint32_t slots[2] = {y, x};
    IrStatus st_ = kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    emit_nest(c, 1, &total, 1, s, NULL, pool_body, &p);
    return kend(c, total, NULL);
}

/* col[row, oh*OW + ow] for rows (ch, kh, kw) of one (image, group); the launch's byte offset on
 * x selects the image/group. */
typedef struct ConvCtx {
    LowerWin w;
    int64_t k;
    uint32_t x, col;
} ConvCtx;

static void im2col_body(Cu *c, LLVMValueRef *o, void *user) {
    ConvCtx *p = user;
    LLVMBuilderRef b = c->b;
    int64_t ohw = p->w.oh * p->w.ow;
    LLVMValueRef row = LLVMBuildUDiv(b, o[0], ci(c, ohw), ""), pos = LLVMBuildURem(b, o[0], ci(c, ohw), "");
    LLVMValueRef kk = ci(c, p->w.kh * p->w.kw);
    LLVMValueRef ch = LLVMBuildUDiv(b, row, kk, ""), rk = LLVMBuildURem(b, row, kk, "");
    LLVMValueRef kh = LLVMBuildUDiv(b, rk, ci(c, p->w.kw), ""), kw = LLVMBuildURem(b, rk, ci(c, p->w.kw), "");
    LLVMValueRef oh = LLVMBuildUDiv(b, pos, ci(c, p->w.ow), ""), ow = LLVMBuildURem(b, pos, ci(c, p->w.ow), "");
    LLVMValueRef ih = win_coord(c, oh, p->w.sh, p->w.pt, kh, p->w.dh), iw = win_coord(c, ow, p->w.sw, p->w.pl, kw, p->w.dw);
    LLVMValueRef valid, off = pix(c, &p->w, ih, iw, &valid);
    LLVMValueRef xo = LLVMBuildAdd(b, LLVMBuildMul(b, ch, ci(c, p->w.h * p->w.w), ""), off, "");
    LLVMValueRef v = ld(c, c->f32, pslot(c, p->x), xo);
    st(c, c->f32, pslot(c, p->col), o[0], sel(c, valid, v, cf(c, 0.0)));
}

static IrStatus push_gemm(Cu *c, const CuGemm *gm) {
    CuStep s = {.kind = CU_STEP_GEMM, .gemm = *gm};
    return push_step(c, &s);
}

static IrStatus gen_conv(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), w = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId bias = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    LowerConvGeom cv;
    const char *why = lower_conv_read(g, n, &cv);
    if (why) return unsupported(c, why);
    ConvCtx p = {.w = cv.w, .k = cv.k, .x = x, .col = c->nv + 1 + c->index};
    int64_t groups = cv.groups, oc = cv.oc, cgr = cv.cg, ocg = cv.ocg, ohw = cv.ohw;
    if (p.w.n * groups > 4096) return unsupported(c, "with more than 4096 (image, group) pairs");
    /* a pointwise conv (1x1, stride 1, no pads) reads its input as the GEMM's B directly: the
     * memory plan gives it no im2col scratch (cuda_plan_scratch) */
    bool pointwise = cuda_plan_scratch(g, n, NULL, NULL) == 0 && p.w.kh == 1 && p.w.kw == 1 && ohw == p.w.h * p.w.w;
    if (!pointwise && cuda_plan_scratch(g, n, NULL, NULL) != p.k * ohw * 4)
        return unsupported(c, "(internal: scratch size mismatch)");
    int64_t work = p.k * ohw, s1[1][IR_MAX_RANK] = {{1}};
    IrStatus st_ = IR_OK;
    if (!pointwise) {
        uint32_t slots[2] = {p.col, x};
        st_ = kbegin(c, slots, 2, CU_BLOCK, false);
        if (st_) return st_;
        emit_nest(c, 1, &work, 1, s1, NULL, im2col_body, &p);
        LLVMBuildRetVoid(c->b);
    }
    for (int64_t img = 0; img < p.w.n * groups && !st_; img++) {
        int64_t grp = img % groups, offs[2] = {0, img * cgr * p.w.h * p.w.w * 4};
        if (!pointwise) st_ = relaunch(c, work, offs);
        CuGemm gm = {.dt = "f32", .m = ocg, .n = ohw, .k = p.k, .lda = p.k, .ldb = ohw, .ldc = ohw, .batch = 1,
                     .alpha = 1.0, .a = {w, grp * ocg * p.k * 4}, .b = {p.col, 0}, .c = {y, img * ocg * ohw * 4}};
        if (pointwise) gm.b = (CuArg){x, offs[1]};
        if (!st_) st_ = push_gemm(c, &gm);
    }
    if (st_ || !bias) return st_;
    int64_t dims3[3] = {p.w.n, oc, ohw}, s3[2][IR_MAX_RANK] = {{oc * ohw, ohw, 1}, {0, 1, 0}};
    return bias_kernel(c, y, bias, 1.0, 3, dims3, s3);
}

/* ---- contractions -------------------------------------------------------------------------------- */

static IrStatus gen_matmul(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrDType dt = lower_value_dtype(g, va);
    if ((dt != IR_DTYPE_F32 && dt != IR_DTYPE_BF16) || lower_value_dtype(g, vb) != dt)
        return unsupported(c, "on tensors other than f32 or bf16");
    LowerMatMulShape ms;
    const char *why = lower_matmul_shape(g, n, &ms);
    if (why) return unsupported(c, why);
    int64_t m = ms.m, k = ms.k, nn = ms.n, nb = ms.nb, *bd = ms.bd;
    uint32_t bra = ms.ra - 2, brb = ms.rb - 2, br = ms.br;
    int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK];
    if (nb * m * nn == 0) return IR_OK;
    ir_shape_broadcast_strides(bra, ms.da, br, NULL, sa);
    ir_shape_broadcast_strides(brb, ms.db, br, NULL, sb);
    size_t es = ir_dtype_size(dt);
    CuGemm gm = {.m = m, .n = nn, .k = k, .lda = k, .ldb = nn, .ldc = nn, .alpha = 1.0, .a = {va, 0}, .b = {vb, 0},
                 .c = {vy, 0}};
    snprintf(gm.dt, sizeof gm.dt, "%s", dt == IR_DTYPE_BF16 ? "bf16" : "f32");
    /* batch offsets of A and B: one strided-batched GEMM when they are b * stride (stride 0 =
     * broadcast), else one GEMM per batch index */
    int64_t *oa = malloc((size_t)(nb ? nb : 1) * 2 * sizeof *oa);
    if (!oa) return IR_ENOMEM;
    int64_t *ob = oa + nb;
    bool uniform = true;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t rem = bi, a_off = 0, b_off = 0;
        for (uint32_t q = br; q-- > 0;) {
            int64_t coord = rem % bd[q];
            rem /= bd[q];
            a_off += coord * sa[q];
            b_off += coord * sb[q];
        }
        oa[bi] = a_off * m * k;
        ob[bi] = b_off * k * nn;
        if (bi >= 1 && (oa[bi] != bi * oa[1] || ob[bi] != bi * ob[1])) uniform = false;
    }
    IrStatus s = IR_OK;
    if (uniform) {
        gm.batch = nb;
        gm.sa = nb > 1 ? oa[1] : 0;
        gm.sb = nb > 1 ? ob[1] : 0;
        gm.sc = m * nn;
        if (nb > 1 && gm.sb == 0 && gm.sa == m * k) { /* x[..., M, K] @ w[K, N]: one GEMM with M * batch rows */
            gm.m *= nb;
            gm.batch = 1;
            gm.sa = gm.sc = 0;
        }
        s = push_gemm(c, &gm);
    } else if (nb > 4096) {
        s = unsupported(c, "with this broadcast over more than 4096 batches");
    } else {
        gm.batch = 1;
        for (int64_t bi = 0; bi < nb && !s; bi++) {
            gm.a.off = oa[bi] * (int64_t)es;
            gm.b.off = ob[bi] * (int64_t)es;
            gm.c.off = bi * m * nn * (int64_t)es;
            s = push_gemm(c, &gm);
        }
    }
    free(oa);
    return s;
}

static IrStatus gen_gemm(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrValueId vc = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    LowerGemmShape gs;
    const char *why = lower_gemm_shape(g, n, &gs);
    if (why) return unsupported(c, why);
    CuGemm gm = {.dt = "f32", .a = {va, 0}, .b = {vb, 0}, .c = {vy, 0}, .batch = 1, .ta = gs.ta, .tb = gs.tb,
                 .alpha = gs.alpha, .m = gs.m, .n = gs.n, .k = gs.k, .lda = gs.lda, .ldb = gs.ldb, .ldc = gs.n};
    double beta = gs.beta;
    IrStatus s = IR_OK;
    uint32_t rc = gs.rc;
    const int64_t *dc = gs.dc, *dy = gs.dy;
    int64_t st2[2][IR_MAX_RANK];
    /* a bias row [N] (or [1, N]) with beta 1: cuBLASLt's BIAS epilogue, no extra kernel */
    bool epi = vc && beta == 1.0 && rc >= 1 && rc <= 2 && dc[rc - 1] == gm.n && (rc == 1 || dc[0] == 1) && gm.n > 1;
    if (epi) gm.bias_slot = vc;
    if (gm.m && gm.n) {
        if (gm.k == 0) return unsupported(c, "with K = 0");
        s = push_gemm(c, &gm);
    } else return IR_OK;
    if (s || !vc || beta == 0.0 || epi) return s;
    ir_shape_strides(2, dy, st2[0]);
    ir_shape_broadcast_strides(rc, dc, 2, NULL, st2[1]);
    return bias_kernel(c, vy, vc, beta, 2, dy, st2);
}

/* ---- FP8 ---------------------------------------------------------------------------------------- */

/* The 256 E4M3FN values (exact, from ir/dtype.c) as a constant table: decoding on every target,
 * and the search table of the software encoder used below sm_89. */
static LLVMValueRef f8_table(Cu *c) {
    if (c->f8tab) return c->f8tab;
    LLVMValueRef v[256];
    for (int i = 0; i < 256; i++) v[i] = cf(c, (double)ir_f8e4m3fn_to_f32((uint8_t)i));
    LLVMTypeRef at = LLVMArrayType2(c->f32, 256);
    c->f8tab = LLVMAddGlobalInAddressSpace(c->mod, at, "irt_e4m3_values", 4);
    LLVMSetInitializer(c->f8tab, LLVMConstArray2(c->f32, v, 256));
    LLVMSetGlobalConstant(c->f8tab, 1);
    LLVMSetLinkage(c->f8tab, LLVMInternalLinkage);
    return c->f8tab;
}

static LLVMValueRef f8_decode(Cu *c, LLVMValueRef byte) {
    LLVMValueRef idx[2] = {c32(c, 0), LLVMBuildZExt(c->b, byte, c->i32, "")};
    return LLVMBuildLoad2(c->b, c->f32, LLVMBuildGEP2(c->b, LLVMArrayType2(c->f32, 256), f8_table(c), idx, 2, ""), "");
}

/* f32 -> E4M3FN, round to nearest even, saturating to +-448, NaN kept. */
static LLVMValueRef f8_encode(Cu *c, LLVMValueRef q) {
    LLVMBuilderRef b = c->b;
    if (c->sm >= 89) {
        c->m->uses_fp8_ptx = true;
        LLVMTypeRef args[2] = {c->f32, c->f32};
        LLVMTypeRef ft = LLVMFunctionType(c->i16, args, 2, 0);
        const char *as = "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", *cons = "=h,f,f";
        LLVMValueRef ia = LLVMGetInlineAsm(ft, (char *)as, strlen(as), (char *)cons, strlen(cons), 0, 0,
                                           LLVMInlineAsmDialectATT, 0);
        LLVMValueRef av[2] = {cf(c, 0.0), q}; /* the second source lands in the low byte */
        return LLVMBuildTrunc(b, LLVMBuildCall2(b, ft, ia, av, 2, ""), c->i8, "");
    }
    /* software: binary search of |q| among the 127 finite non-negative codes (monotone in the
     * code), then ties to the even code */
    LLVMValueRef a = f32_intr(c, "llvm.fabs", q);
    LLVMValueRef lo = c32(c, 0);
    for (int step = 64; step >= 1; step /= 2) {
        LLVMValueRef cand = LLVMBuildAdd(b, lo, c32(c, step), "");
        LLVMValueRef inr = LLVMBuildICmp(b, LLVMIntSLE, cand, c32(c, 126), "");
        LLVMValueRef safe = sel(c, inr, cand, c32(c, 126));
        LLVMValueRef cv = f8_decode(c, LLVMBuildTrunc(b, safe, c->i8, ""));
        lo = sel(c, LLVMBuildAnd(b, inr, fcmp(c, LLVMRealOLE, cv, a), ""), cand, lo);
    }
    LLVMValueRef hi = sel(c, LLVMBuildICmp(b, LLVMIntSLT, lo, c32(c, 126), ""), LLVMBuildAdd(b, lo, c32(c, 1), ""), lo);
    LLVMValueRef vlo = f8_decode(c, LLVMBuildTrunc(b, lo, c->i8, "")), vhi = f8_decode(c, LLVMBuildTrunc(b, hi, c->i8, ""));
    LLVMValueRef dl = LLVMBuildFSub(b, a, vlo, ""), dh = LLVMBuildFSub(b, vhi, a, "");
    LLVMValueRef even_lo = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, lo, c32(c, 1), ""), c32(c, 0), "");
    LLVMValueRef up = LLVMBuildOr(b, fcmp(c, LLVMRealOGT, dl, dh),
                                  LLVMBuildAnd(b, fcmp(c, LLVMRealOEQ, dl, dh), LLVMBuildNot(b, even_lo, ""), ""), "");
    LLVMValueRef code = sel(c, up, hi, lo);
    code = sel(c, fcmp(c, LLVMRealOGE, a, cf(c, 448.0)), c32(c, 126), code);
    LLVMValueRef sign = sel(c, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildBitCast(b, q, c->i32, ""), c32(c, 0), ""), c32(c, 0x80), c32(c, 0));
    code = LLVMBuildOr(b, code, sign, "");
    code = sel(c, fcmp(c, LLVMRealUNO, q, q), c32(c, 0x7f), code);
    return LLVMBuildTrunc(b, code, c->i8, "");
}

typedef struct QCtx {
    uint32_t y, x, s;
    bool quant, per_ch;
    int64_t inner, ch;
} QCtx;

static void q_body(Cu *c, LLVMValueRef *o, void *user) {
    QCtx *p = user;
    LLVMValueRef sidx = p->per_ch ? LLVMBuildURem(c->b, LLVMBuildUDiv(c->b, o[0], ci(c, p->inner), ""), ci(c, p->ch), "")
                                  : ci(c, 0);
    LLVMValueRef sc = ld(c, c->f32, pslot(c, p->s), sidx);
    if (p->quant) {
        LLVMValueRef q = LLVMBuildFDiv(c->b, ld(c, c->f32, pslot(c, p->x), o[0]), sc, "");
        st(c, c->i8, pslot(c, p->y), o[0], f8_encode(c, q));
    } else {
        LLVMValueRef v = f8_decode(c, ld(c, c->i8, pslot(c, p->x), o[0]));
        st(c, c->f32, pslot(c, p->y), o[0], LLVMBuildFMul(c->b, v, sc, ""));
    }
}

static IrStatus gen_quant(Cu *c, bool quant) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0), s = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    if (quant) {
        bool found;
        const char *fmt = ir_node_attr_string(g, n, "format", &found);
        if (fmt && strcmp(fmt, "e4m3fn") != 0) return unsupported(c, "with a format other than e4m3fn");
        if (!ir_node_attr_int(g, n, "saturate", &found) && found) return unsupported(c, "without saturate");
        if (lower_value_dtype(g, x) != IR_DTYPE_F32) return unsupported(c, "on non-f32 input");
    } else {
        if (lower_value_dtype(g, x) != IR_DTYPE_F8E4M3FN) return unsupported(c, "on a format other than e4m3fn");
        if (lower_value_dtype(g, y) != IR_DTYPE_F32) return unsupported(c, "to a dtype other than f32");
    }
    if (lower_value_dtype(g, s) != IR_DTYPE_F32) return unsupported(c, "with a non-f32 scale");
    uint32_t r, rs;
    int64_t d[IR_MAX_RANK], ds[IR_MAX_RANK], s1[1][IR_MAX_RANK] = {{1}};
    lower_value_shape(g, x, &r, d);
    lower_value_shape(g, s, &rs, ds);
    QCtx p = {y, x, s, quant, ir_shape_numel(rs, ds) > 1, 1, 1};
    if (p.per_ch) {
        bool found;
        int64_t axis = ir_shape_axis(ir_node_attr_int(g, n, "axis", &found), r);
        if (!found || axis < 0 || axis >= (int64_t)r || d[axis] != ir_shape_numel(rs, ds))
            return unsupported(c, "with this scale layout");
        p.ch = d[axis];
        p.inner = ir_shape_numel(r - (uint32_t)axis - 1, d + axis + 1);
    }
    int64_t total = ir_shape_numel(r, d);
    if (!total) return IR_OK;
    uint32_t slots[3] = {y, x, s};
    IrStatus st_ = kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    emit_nest(c, 1, &total, 1, s1, NULL, q_body, &p);
    return kend(c, total, NULL);
}

/* tail scratch: CUDA-only temporaries after the planned workspace (steps run in order, so one
 * region as large as the largest need serves every node) */
static void tail_need(Cu *c, int64_t bytes) {
    if (bytes > c->m->tail_bytes) c->m->tail_bytes = bytes;
}

/* irtool.fp8_matmul [M,K] x [K,N]: on sm_89+ with per-tensor a_scale, K and N multiples of 16:
 * B is transposed to [N,K] (tail scratch) and cuBLASLt runs an E4M3 GEMM with f32 output, the
 * scalar scales as its A/B scale pointers (a per-channel b_scale and the bias follow as a kernel).
 * Otherwise (sm_80 or other shapes): both operands are dequantized to f32 in the tail scratch
 * and multiplied with an f32 GEMM, as the interpreter does. */
typedef struct Fp8Epi {
    uint32_t y, bs, bias;
    bool per_col, have_bias;
    int64_t n, nbias;
} Fp8Epi;

static void fp8_epi_body(Cu *c, LLVMValueRef *o, void *user) {
    Fp8Epi *p = user;
    LLVMValueRef col = LLVMBuildURem(c->b, o[0], ci(c, p->n), "");
    LLVMValueRef v = ld(c, c->f32, pslot(c, p->y), o[0]);
    if (p->per_col) v = LLVMBuildFMul(c->b, v, ld(c, c->f32, pslot(c, p->bs), col), "");
    if (p->have_bias) {
        LLVMValueRef bi = p->nbias == 1 ? ci(c, 0) : LLVMBuildURem(c->b, col, ci(c, p->nbias), "");
        v = LLVMBuildFAdd(c->b, v, ld(c, c->f32, pslot(c, p->bias), bi), "");
    }
    st(c, c->f32, pslot(c, p->y), o[0], v);
}

typedef struct DqCtx {
    uint32_t y, x, s;
    int64_t n, ns; /* scale index: ns == 1 ? 0 : (i / div) % ns */
    int64_t div;
    bool transpose; /* y[j*K + kk] = x[kk*N + j] (B -> [N,K]) */
    int64_t k;
} DqCtx;

static void dq_body(Cu *c, LLVMValueRef *o, void *user) {
    DqCtx *p = user;
    LLVMValueRef v = f8_decode(c, ld(c, c->i8, pslot(c, p->x), o[0]));
    if (p->s) {
        LLVMValueRef si = p->ns == 1 ? ci(c, 0) : LLVMBuildURem(c->b, LLVMBuildUDiv(c->b, o[0], ci(c, p->div), ""), ci(c, p->ns), "");
        v = LLVMBuildFMul(c->b, v, ld(c, c->f32, pslot(c, p->s), si), "");
    }
    st(c, c->f32, pslot(c, p->y), o[0], v);
}

/* Byte transpose y[N, K] = x[K, N]^T through 32x32 tiles in shared memory (one block of 32x8
 * threads per tile, 4 rows each), so that both the reads and the writes of a warp touch 32
 * consecutive bytes. */
static IrStatus transpose_bytes_kernel(Cu *c, uint32_t y, uint32_t x, int64_t k, int64_t n) {
    uint32_t slots[2] = {y, x};
    IrStatus s = kbegin(c, slots, 2, 256, true);
    if (s) return s;
    LLVMBuilderRef b = c->b;
    LLVMTypeRef at = LLVMArrayType2(c->i8, 32 * 33);
    LLVMValueRef tile = LLVMAddGlobalInAddressSpace(c->mod, at, "", 3);
    LLVMSetInitializer(tile, LLVMGetUndef(at));
    LLVMSetLinkage(tile, LLVMInternalLinkage);
    int64_t tn = (n + 31) / 32, tk = (k + 31) / 32;
    LLVMValueRef blk = sreg(c, "llvm.nvvm.read.ptx.sreg.ctaid.x"), tid = sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x");
    LLVMValueRef t_n = LLVMBuildURem(b, blk, ci(c, tn), ""), t_k = LLVMBuildUDiv(b, blk, ci(c, tn), "");
    LLVMValueRef tx = LLVMBuildURem(b, tid, ci(c, 32), ""), ty = LLVMBuildUDiv(b, tid, ci(c, 32), "");
    LLVMValueRef z = c32(c, 0);
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < 4; r++) {
            LLVMValueRef rr = LLVMBuildAdd(b, ty, ci(c, 8 * r), "");
            /* pass 0: tile[rr][tx] = x[t_k*32 + rr, t_n*32 + tx]; pass 1: y[t_n*32 + rr, t_k*32 + tx] = tile[tx][rr] */
            LLVMValueRef row = LLVMBuildAdd(b, LLVMBuildMul(b, pass ? t_n : t_k, ci(c, 32), ""), rr, "");
            LLVMValueRef col = LLVMBuildAdd(b, LLVMBuildMul(b, pass ? t_k : t_n, ci(c, 32), ""), tx, "");
            LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, row, ci(c, pass ? n : k), ""),
                                           LLVMBuildICmp(b, LLVMIntULT, col, ci(c, pass ? k : n), ""), "");
            LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "in"),
                              join = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "join");
            LLVMBuildCondBr(b, ok, yes, join);
            LLVMPositionBuilderAtEnd(b, yes);
            LLVMValueRef gi = LLVMBuildAdd(b, LLVMBuildMul(b, row, ci(c, pass ? k : n), ""), col, "");
            LLVMValueRef si[2] = {z, LLVMBuildZExtOrBitCast(b, pass ? LLVMBuildAdd(b, LLVMBuildMul(b, tx, ci(c, 33), ""), rr, "")
                                                                    : LLVMBuildAdd(b, LLVMBuildMul(b, rr, ci(c, 33), ""), tx, ""),
                                                           c->i32, "")};
            LLVMValueRef sp = LLVMBuildGEP2(b, at, tile, si, 2, "");
            if (pass == 0) LLVMBuildStore(b, ld(c, c->i8, pslot(c, x), gi), sp);
            else st(c, c->i8, pslot(c, y), gi, LLVMBuildLoad2(b, c->i8, sp, ""));
            LLVMBuildBr(b, join);
            LLVMPositionBuilderAtEnd(b, join);
        }
        if (!pass) call_intr(c, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
    }
    return kend(c, tn * tk, NULL);
}

static IrStatus gen_fp8_matmul(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vas = ir_node_operand(g, n, 2),
              vbs = ir_node_operand(g, n, 3), vy = ir_node_result(g, n, 0);
    IrValueId vbias = ir_node_num_operands(g, n) > 4 ? ir_node_operand(g, n, 4) : 0;
    if (lower_value_dtype(g, va) != IR_DTYPE_F8E4M3FN || lower_value_dtype(g, vb) != IR_DTYPE_F8E4M3FN)
        return unsupported(c, "on a format other than e4m3fn");
    if (lower_value_dtype(g, vy) != IR_DTYPE_F32) return unsupported(c, "with out_dtype other than f32");
    uint32_t ra, rb, rs;
    int64_t da[IR_MAX_RANK], db[IR_MAX_RANK], dsa[IR_MAX_RANK], dsb[IR_MAX_RANK], dbias[IR_MAX_RANK];
    lower_value_shape(g, va, &ra, da);
    lower_value_shape(g, vb, &rb, db);
    if (ra < 2 || rb != 2) return unsupported(c, "with a weight of rank other than 2 or a vector input");
    /* leading dims of A fold into M (A is contiguous, B shared); per-row scales repeat per matrix */
    int64_t m = ir_shape_numel(ra - 1, da), mrow = da[ra - 2], k = da[ra - 1], nn = db[1];
    if (db[0] != k || k == 0) return unsupported(c, "with these shapes");
    lower_value_shape(g, vas, &rs, dsa);
    int64_t nas = ir_shape_numel(rs, dsa);
    lower_value_shape(g, vbs, &rs, dsb);
    int64_t nbs = ir_shape_numel(rs, dsb), nbias = 0;
    if (vbias) {
        lower_value_shape(g, vbias, &rs, dbias);
        nbias = ir_shape_numel(rs, dbias);
        if (lower_value_dtype(g, vbias) != IR_DTYPE_F32 || (nbias != 1 && nbias != nn)) return unsupported(c, "with this bias");
    }
    if (lower_value_dtype(g, vas) != IR_DTYPE_F32 || lower_value_dtype(g, vbs) != IR_DTYPE_F32 || (nas != 1 && nas != mrow) ||
        (nbs != 1 && nbs != nn))
        return unsupported(c, "with these scales");
    if (m * nn == 0) return IR_OK;
    uint32_t tail = c->m->tail_slot;
    int64_t s1[1][IR_MAX_RANK] = {{1}}, total;
    IrStatus st_;
    bool tensor_core = c->sm >= 89 && nas == 1 && k % 16 == 0 && nn % 16 == 0;
    if (tensor_core) {
        /* a constant B is laid out as [N, K] now; a computed one by a kernel in the tail scratch */
        const uint8_t *bd = lower_value_const_data(g, vb);
        uint32_t bslot = tail;
        if (bd) {
            IrArtifactConst *x = realloc(c->m->extra, (c->m->n_extra + 1) * sizeof *x);
            if (x) c->m->extra = x;
            IrValueId *xo = x ? realloc(c->m->extra_of, (c->m->n_extra + 1) * sizeof *xo) : NULL;
            if (xo) c->m->extra_of = xo;
            uint8_t *t = xo ? malloc((size_t)(k * nn)) : NULL;
            if (!t) return IR_ENOMEM;
            xo[c->m->n_extra] = vb;
            for (int64_t kk = 0; kk < k; kk++)
                for (int64_t j = 0; j < nn; j++) t[j * k + kk] = bd[kk * nn + j];
            bslot = c->m->tail_slot + 1 + c->m->n_extra;
            x[c->m->n_extra++] = (IrArtifactConst){bslot, t, (size_t)(k * nn)};
        } else {
            tail_need(c, k * nn);
            if ((st_ = transpose_bytes_kernel(c, tail, vb, k, nn))) return st_;
        }
        CuGemm gm = {.dt = "e4m3", .ta = 0, .tb = 1, .m = m, .n = nn, .k = k, .lda = k, .ldb = k, .ldc = nn, .batch = 1,
                     .alpha = 1.0, .a = {va, 0}, .b = {bslot, 0}, .c = {vy, 0}, .as_slot = vas,
                     .bs_slot = nbs == 1 ? vbs : 0};
        if ((st_ = push_gemm(c, &gm))) return st_;
    } else {
        /* f32 copies of A (scaled per row or tensor) and B (scaled per column or tensor) */
        int64_t a_bytes = (m * k * 4 + 255) / 256 * 256;
        tail_need(c, a_bytes + k * nn * 4);
        for (int which = 0; which < 2; which++) {
            DqCtx p = {.y = tail, .x = which ? vb : va, .s = which ? vbs : vas};
            p.ns = which ? nbs : nas;
            p.div = which ? 1 : k;
            if (which) p.n = nn;
            total = which ? k * nn : m * k;
            uint32_t slots[3] = {tail, p.x, p.s};
            if ((st_ = kbegin(c, slots, 3, CU_BLOCK, false))) return st_;
            emit_nest(c, 1, &total, 1, s1, NULL, dq_body, &p);
            int64_t offs[3] = {which ? a_bytes : 0, 0, 0};
            if ((st_ = kend(c, total, offs))) return st_;
        }
        CuGemm gm = {.dt = "f32", .m = m, .n = nn, .k = k, .lda = k, .ldb = nn, .ldc = nn, .batch = 1, .alpha = 1.0,
                     .a = {tail, 0}, .b = {tail, a_bytes}, .c = {vy, 0}};
        if ((st_ = push_gemm(c, &gm))) return st_;
        nbs = 1; /* already applied */
    }
    if (nbs == 1 && !vbias) return IR_OK;
    Fp8Epi p = {vy, vbs, vbias ? vbias : vy, nbs != 1, vbias != 0, nn, nbias};
    uint32_t slots[3] = {vy, vbs, vbias ? vbias : vy};
    total = m * nn;
    if ((st_ = kbegin(c, slots, 3, CU_BLOCK, false))) return st_;
    emit_nest(c, 1, &total, 1, s1, NULL, fp8_epi_body, &p);
    return kend(c, total, NULL);
}

/* ---- per node and module ------------------------------------------------------------------------ */

/* ---- the op table (backend/cuda/cuda_ops.def) ----------------------------------------------- */

static IrStatus cuda_emit_ew(Cu *c) { return gen_ew(c, false); }
static IrStatus cuda_emit_fused(Cu *c) { return gen_ew(c, true); }
static IrStatus cuda_emit_cmp(Cu *c) { return gen_cmp(c, ir_node_op(c->g, c->node)); }
static IrStatus cuda_emit_none(Cu *c) { return (void)c, IR_OK; } /* constants section */
static IrStatus cuda_emit_copy(Cu *c) { return gen_copy_bytes(c); }
static IrStatus cuda_emit_dropout(Cu *c) { return gen_dropout(c); }
static IrStatus cuda_emit_transpose(Cu *c) { return gen_transpose(c); }
static IrStatus cuda_emit_concat(Cu *c) { return gen_concat(c); }
static IrStatus cuda_emit_gather(Cu *c) { return gen_gather(c); }
static IrStatus cuda_emit_slice(Cu *c) { return gen_slice(c); }
static IrStatus cuda_emit_matmul(Cu *c) { return gen_matmul(c); }
static IrStatus cuda_emit_gemm(Cu *c) { return gen_gemm(c); }
static IrStatus cuda_emit_rows(Cu *c) { return gen_softmax_layernorm(c, ir_node_op(c->g, c->node)); }
static IrStatus cuda_emit_reduce(Cu *c) { return gen_reduce(c, ir_node_op(c->g, c->node)); }
static IrStatus cuda_emit_batchnorm(Cu *c) { return gen_batchnorm(c); }
static IrStatus cuda_emit_lrn(Cu *c) { return gen_lrn(c); }
static IrStatus cuda_emit_conv(Cu *c) { return gen_conv(c); }
static IrStatus cuda_emit_pool(Cu *c) { return gen_pool(c, ir_node_op(c->g, c->node) == IR_OP_MAX_POOL); }
static IrStatus cuda_emit_quant(Cu *c) { return gen_quant(c, ir_node_op(c->g, c->node) == IR_OP_QUANTIZE_FP8); }
static IrStatus cuda_emit_fp8_matmul(Cu *c) { return gen_fp8_matmul(c); }

static const CudaOpRow cuda_ops[IR_OP_COUNT] = {
#define CUDA_OP(id, emit) [IR_OP_##id] = {emit, NULL},
#define CUDA_NONE(id, why) [IR_OP_##id] = {NULL, why},
#include "backend/cuda/cuda_ops.def"
#undef CUDA_OP
#undef CUDA_NONE
};

/* one row per op of ir/ops.def (with no duplicate, which the initializer refuses): counted here */
enum {
    CUDA_ROWS = 0
#define CUDA_OP(id, emit) +1
#define CUDA_NONE(id, why) +1
#include "backend/cuda/cuda_ops.def"
#undef CUDA_OP
#undef CUDA_NONE
};
_Static_assert(CUDA_ROWS == IR_OP_COUNT - 1, "backend/cuda/cuda_ops.def needs exactly one row per op of ir/ops.def");

const CudaOpRow *cuda_op_row(IrOp op) {
    static const CudaOpRow none = {NULL, "not an op"};
    return op > IR_OP_NONE && op < IR_OP_COUNT ? &cuda_ops[op] : &none;
}

static IrStatus gen_node(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    for (uint32_t i = 0; i < ir_node_num_operands(g, n) + ir_node_num_results(g, n); i++) {
        bool res = i >= ir_node_num_operands(g, n);
        IrValueId v = res ? ir_node_result(g, n, i - ir_node_num_operands(g, n)) : ir_node_operand(g, n, i);
        if (v && !lower_value_shape(g, v, &r, d)) {
            ir_diag_at_node(c->diag, g, n, IR_SEV_ERROR,
                            "the cuda backend needs static shapes, but '%s' of %s has a symbolic or unknown shape",
                            ir_value_name(g, v), ir_op_name(ir_node_op(g, n)));
            return IR_EUNSUPPORTED;
        }
    }
    const CudaOpRow *row = cuda_op_row(ir_node_op(g, n));
    return row->emit ? row->emit(c) : unsupported(c, NULL);
}

int64_t cuda_plan_scratch(const IrGraph *g, IrNodeId n, const int64_t *sym, void *user) {
    (void)sym, (void)user;
    return ir_node_op(g, n) == IR_OP_CONV && !lower_conv_pointwise(g, n) ? lower_conv_im2col_bytes(g, n) : 0;
}

void cuda_module_free(CuModule *m) {
    for (uint32_t i = 0; i < m->n_extra; i++) free((void *)m->extra[i].data);
    free(m->extra);
    free(m->extra_of);
    free(m->k);
    free(m->s);
    memset(m, 0, sizeof *m);
}

IrStatus cuda_build_module(const IrGraph *g, int sm, const char *target_name, LLVMContextRef ctx, IrDiag *diag,
                           LLVMModuleRef *mod, CuModule *out) {
    memset(out, 0, sizeof *out);
    Cu c = {.g = g, .diag = diag, .ctx = ctx, .sm = sm, .target = target_name, .m = out, .nv = ir_graph_num_values(g)};
    uint32_t nn = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) nn++;
    out->tail_slot = c.nv + 1 + nn; /* = lower_plan_memory's n_slots */
    c.mod = LLVMModuleCreateWithNameInContext("irtool_cuda", ctx);
    c.b = LLVMCreateBuilderInContext(ctx);
    c.i1 = LLVMInt1TypeInContext(ctx);
    c.i8 = LLVMInt8TypeInContext(ctx);
    c.i16 = LLVMInt16TypeInContext(ctx);
    c.i32 = LLVMInt32TypeInContext(ctx);
    c.i64 = LLVMInt64TypeInContext(ctx);
    c.f32 = LLVMFloatTypeInContext(ctx);
    c.gptr = LLVMPointerTypeInContext(ctx, 1);
    c.vd = LLVMVoidTypeInContext(ctx);
    /* 32-bit index arithmetic when every buffer (and the scratch) has fewer than 2^31 elements */
    bool small = true;
    for (uint32_t v = 1; v <= c.nv && small; v++) small = lower_value_nbytes(g, v) < (1ull << 31);
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && small; n = ir_node_next(g, n))
        small = cuda_plan_scratch(g, n, NULL, NULL) < (1ll << 31);
    c.it = small ? c.i32 : c.i64;
    c.smem = LLVMAddGlobalInAddressSpace(c.mod, LLVMArrayType2(c.f32, 32), "irt_red_smem", 3);
    LLVMSetInitializer(c.smem, LLVMGetUndef(LLVMArrayType2(c.f32, 32)));
    LLVMSetLinkage(c.smem, LLVMInternalLinkage);
    LLVMSetAlignment(c.smem, 4);
    IrStatus s = IR_OK;
    uint32_t index = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && !s; n = ir_node_next(g, n), index++) {
        c.node = n;
        c.index = index;
        s = gen_node(&c);
    }
    if (!s) {
        char *msg = NULL;
        if (LLVMVerifyModule(c.mod, LLVMReturnStatusAction, &msg)) {
            ir_diag_error(diag, "cuda backend: internal error, generated module is invalid: %s", msg ? msg : "?");
            s = IR_EINVAL;
        }
        LLVMDisposeMessage(msg);
    }
    LLVMDisposeBuilder(c.b);
    if (s) {
        LLVMDisposeModule(c.mod);
        cuda_module_free(out);
        return s;
    }
    *mod = c.mod;
    return IR_OK;
}

/* The ops whose CUDA row names an emitter (some configurations of them are still refused at
 * compile time, naming the node); irtool ops lists them. */
bool cuda_op_supported(IrOp op) { return cuda_op_row(op)->emit != NULL; }

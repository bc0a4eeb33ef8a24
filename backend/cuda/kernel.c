/* The CUDA generator's kernel kit: steps and kernels (parameters, nvvm annotations, launch
 * steps), grid-stride loops and loop nests with broadcast offsets, warp and block reductions,
 * and the scalar math the family emitters share (ex2/lg2.approx based exp/log/pow, tanh, erf).
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- shapes: backend/llvm/emit.h ---------------------------------------------------------- */

IrStatus cu_unsupported(Cu *c, const char *what) {
    ir_diag_at_node(c->diag, c->g, c->node, IR_SEV_ERROR, "the cuda backend (%s) does not support %s%s%s",
                    c->target, ir_op_name(ir_node_op(c->g, c->node)), what ? " " : "", what ? what : "");
    return IR_EUNSUPPORTED;
}

/* ---- steps and kernels -------------------------------------------------------------------------- */

IrStatus cu_push_step(Cu *c, const CuStep *s) {
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


LLVMValueRef cu_intr(Cu *c, const char *name, LLVMTypeRef *over, unsigned n_over, LLVMValueRef *args,
                              unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef f = LLVMGetIntrinsicDeclaration(c->mod, id, over, n_over);
    LLVMTypeRef ft = LLVMIntrinsicGetType(c->ctx, id, over, n_over);
    return LLVMBuildCall2(c->b, ft, f, args, n, "");
}
LLVMValueRef cu_sreg(Cu *c, const char *name) {
    LLVMValueRef v = cu_intr(c, name, NULL, 0, NULL, 0);
    return c->it == c->i32 ? v : LLVMBuildZExt(c->b, v, c->it, "");
}
LLVMValueRef cu_f32_intr(Cu *c, const char *name, LLVMValueRef x) { return cu_intr(c, name, &c->f32, 1, &x, 1); }

/* Starts kernel `name` whose parameters are the buffers of `slots` (deduplicated, in order);
 * c->param[i] is then the global pointer of slots[i]'s first occurrence. */
IrStatus cu_kbegin(Cu *c, const uint32_t *slots, uint32_t n, uint32_t block, bool rows) {
    CuModule *m = c->m;
    c->n_params = 0;
    c->syms = NULL;
    for (uint32_t i = 0; i <= n; i++) {
        if (i == n && !m->symbolic) break;
        uint32_t slot = i < n ? slots[i] : m->sym_slot; /* symbolic shapes: the symbols last */
        bool dup = false;
        for (uint32_t j = 0; j < c->n_params && !dup; j++) dup = c->param_slot[j] == slot;
        if (dup) continue;
        if (c->n_params == CU_MAX_ARGS) return cu_unsupported(c, "with this many buffers");
        c->param_slot[c->n_params++] = slot;
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
    if (m->symbolic) c->syms = pslot(c, m->sym_slot);
    return IR_OK;
}


LLVMValueRef cu_var(Cu *c, LLVMTypeRef t, LLVMValueRef init) {
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(c->b), entry = LLVMGetEntryBasicBlock(c->fn);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first) LLVMPositionBuilderBefore(c->b, first);
    else LLVMPositionBuilderAtEnd(c->b, entry);
    LLVMValueRef a = LLVMBuildAlloca(c->b, t, "");
    LLVMPositionBuilderAtEnd(c->b, cur);
    LLVMBuildStore(c->b, init, a);
    return a;
}

/* Ends the kernel and adds a launch step over `work` items (or rows) with the slots at offsets. */
IrStatus cu_kend(Cu *c, int64_t work, const int64_t *offs) {
    LLVMBuildRetVoid(c->b);
    CuStep s = {.kind = CU_STEP_KERNEL, .kernel = c->cur_kernel, .n_args = c->n_params, .work = work};
    for (uint32_t i = 0; i < c->n_params; i++) s.arg[i] = (CuArg){c->param_slot[i], offs ? offs[i] : 0};
    return work != 0 ? cu_push_step(c, &s) : IR_OK; /* negative: a formula (CU_FX) */
}

IrStatus cu_kend_serial(Cu *c, int64_t total, void (*one)(Cu *c, void *user, LLVMValueRef i), void *user) {
    LLVMValueRef zero = LLVMConstInt(c->it, 0, 0);
    LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "one"), done = LLVMAppendBasicBlockInContext(c->ctx, c->fn, "done");
    LLVMValueRef tid = cu_sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x"), bid = cu_sreg(c, "llvm.nvvm.read.ptx.sreg.ctaid.x");
    LLVMValueRef first = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, tid, LLVMConstNull(LLVMTypeOf(tid)), ""),
                                      LLVMBuildICmp(c->b, LLVMIntEQ, bid, LLVMConstNull(LLVMTypeOf(bid)), ""), "");
    LLVMBuildCondBr(c->b, first, run, done);
    LLVMPositionBuilderAtEnd(c->b, run);
    Loop l;
    cu_loop_begin(c, &l, zero, LLVMConstInt(c->it, (unsigned long long)total, 0), LLVMConstInt(c->it, 1, 0));
    one(c, user, l.iv);
    cu_loop_end(c, &l);
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, done);
    return cu_kend(c, 1, NULL);
}

/* Another launch of the current kernel with other byte offsets per parameter. */
IrStatus cu_relaunch(Cu *c, int64_t work, const int64_t *offs) {
    CuStep s = {.kind = CU_STEP_KERNEL, .kernel = c->cur_kernel, .n_args = c->n_params, .work = work};
    for (uint32_t i = 0; i < c->n_params; i++) s.arg[i] = (CuArg){c->param_slot[i], offs[i]};
    return cu_push_step(c, &s);
}


/* ---- loops ----------------------------------------------------------------------------------- */


void cu_loop_begin_acc(Cu *c, Loop *l, LLVMValueRef start, LLVMValueRef n, LLVMValueRef step, LLVMValueRef init,
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

void cu_loop_begin(Cu *c, Loop *l, LLVMValueRef start, LLVMValueRef n, LLVMValueRef step) {
    cu_loop_begin_acc(c, l, start, n, step, NULL, NULL);
}

/* the accumulator's value for the next iteration (call before loop_end) */
void cu_loop_acc_next(Cu *c, LLVMValueRef acc, LLVMValueRef next) {
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(c->b);
    LLVMAddIncoming(acc, &next, &cur, 1);
}

void cu_loop_end(Cu *c, Loop *l) {
    LLVMValueRef next = LLVMBuildNSWAdd(c->b, l->iv, l->step, "");
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(c->b);
    LLVMAddIncoming(l->iv, &next, &cur, 1);
    LLVMBuildBr(c->b, l->head);
    LLVMPositionBuilderAtEnd(c->b, l->exit);
}

/* Grid-stride loop over [0, work): i = blockIdx*blockDim + threadIdx, step gridDim*blockDim. */
void cu_grid_begin(Cu *c, Loop *l, int64_t work) { cu_grid_begin_v(c, l, ci(c, work)); }

void cu_grid_begin_v(Cu *c, Loop *l, LLVMValueRef n) {
    LLVMValueRef ntid = cu_sreg(c, "llvm.nvvm.read.ptx.sreg.ntid.x");
    LLVMValueRef start = LLVMBuildNSWAdd(c->b, LLVMBuildNSWMul(c->b, cu_sreg(c, "llvm.nvvm.read.ptx.sreg.ctaid.x"), ntid, ""),
                                         cu_sreg(c, "llvm.nvvm.read.ptx.sreg.tid.x"), "");
    LLVMValueRef step = LLVMBuildNSWMul(c->b, cu_sreg(c, "llvm.nvvm.read.ptx.sreg.nctaid.x"), ntid, "");
    cu_loop_begin(c, l, start, n, step);
}


/* offs[j] = base[j] + sum_k coord_k(flat) * strides[j][k] (operands laid out like the iteration
 * space get flat + base directly, without the divisions). */
void cu_nest_offsets(Cu *c, uint32_t rank, const int64_t *dims, uint32_t n_ops, int64_t (*strides)[IR_MAX_RANK],
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

void cu_emit_nest(Cu *c, uint32_t rank, const int64_t *dims, uint32_t n_ops, int64_t (*strides)[IR_MAX_RANK],
                      const int64_t *base, NestBody body, void *user) {
    Loop l;
    cu_grid_begin(c, &l, ir_shape_numel(rank, dims));
    LLVMValueRef offs[CU_MAX_ARGS + 8];
    cu_nest_offsets(c, rank, dims, n_ops, strides, base, l.iv, offs);
    body(c, offs, user);
    cu_loop_end(c, &l);
}

/* ---- block reductions ------------------------------------------------------------------------- */


/* max/min exactly as the interpreter: (x is NaN || x >= y) ? x : y */
LLVMValueRef cu_nan_max(Cu *c, LLVMValueRef x, LLVMValueRef y, bool max) {
    LLVMValueRef k = LLVMBuildOr(c->b, LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, ""),
                                 LLVMBuildFCmp(c->b, max ? LLVMRealOGE : LLVMRealOLE, x, y, ""), "");
    return LLVMBuildSelect(c->b, k, x, y, "");
}

LLVMValueRef cu_red_op(Cu *c, int kind, LLVMValueRef a, LLVMValueRef x) {
    return kind == RED_SUM ? LLVMBuildFAdd(c->b, a, x, "") : cu_nan_max(c, a, x, kind == RED_MAX);
}

LLVMValueRef cu_warp_reduce(Cu *c, int kind, LLVMValueRef v) {
    for (int off = 16; off >= 1; off /= 2) {
        LLVMValueRef args[4] = {c32(c, -1), v, c32(c, off), c32(c, 0x1f)};
        v = cu_red_op(c, kind, v, cu_intr(c, "llvm.nvvm.shfl.sync.bfly.f32", NULL, 0, args, 4));
    }
    return v;
}

/* Every thread of the block gets the reduction of v over the block (block: multiple of 32). */
LLVMValueRef cu_block_reduce(Cu *c, int kind, LLVMValueRef v, uint32_t block) {
    v = cu_warp_reduce(c, kind, v);
    if (block <= 32) return v;
    uint32_t nw = block / 32;
    LLVMValueRef tid = cu_intr(c, "llvm.nvvm.read.ptx.sreg.tid.x", NULL, 0, NULL, 0);
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
    cu_intr(c, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
    double init = kind == RED_SUM ? 0.0 : kind == RED_MAX ? -INFINITY : INFINITY;
    LLVMValueRef idx2[2] = {z, LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntULT, lane, c32(c, nw), ""), lane, z, "")};
    LLVMValueRef sv = LLVMBuildLoad2(c->b, c->f32, LLVMBuildGEP2(c->b, at, c->smem, idx2, 2, ""), "");
    sv = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntULT, lane, c32(c, nw), ""), sv, cf(c, init), "");
    sv = cu_warp_reduce(c, kind, sv);
    cu_intr(c, "llvm.nvvm.barrier0", NULL, 0, NULL, 0); /* smem is reused by the next reduction */
    return sv;
}

/* ---- scalar math ------------------------------------------------------------------------------ */

LLVMValueRef cu_exp(Cu *c, LLVMValueRef x) {
    LLVMValueRef t = LLVMBuildFMul(c->b, x, cf(c, 1.4426950408889634), "");
    return cu_intr(c, "llvm.nvvm.ex2.approx.f", NULL, 0, &t, 1);
}
LLVMValueRef cu_log(Cu *c, LLVMValueRef x) {
    return LLVMBuildFMul(c->b, cu_intr(c, "llvm.nvvm.lg2.approx.f", NULL, 0, &x, 1), cf(c, 0.6931471805599453), "");
}

/* pow(x, y) = 2^(y log2|x|), with the sign of x for odd integral y, NaN for x < 0 and
 * non-integral y, 1 for y == 0 (as powf). */
LLVMValueRef cu_pow(Cu *c, LLVMValueRef x, LLVMValueRef y) {
    LLVMValueRef ax = cu_f32_intr(c, "llvm.fabs", x);
    LLVMValueRef l2 = cu_intr(c, "llvm.nvvm.lg2.approx.f", NULL, 0, &ax, 1);
    LLVMValueRef t = LLVMBuildFMul(c->b, y, l2, "");
    LLVMValueRef r = cu_intr(c, "llvm.nvvm.ex2.approx.f", NULL, 0, &t, 1);
    LLVMValueRef integral = fcmp(c, LLVMRealOEQ, cu_f32_intr(c, "llvm.floor", y), y);
    LLVMValueRef half = LLVMBuildFMul(c->b, y, cf(c, 0.5), "");
    LLVMValueRef odd = LLVMBuildAnd(c->b, integral, fcmp(c, LLVMRealONE, cu_f32_intr(c, "llvm.floor", half), half), "");
    LLVMValueRef neg = fcmp(c, LLVMRealOLT, x, cf(c, 0.0));
    r = sel(c, LLVMBuildAnd(c->b, neg, odd, ""), LLVMBuildFNeg(c->b, r, ""), r);
    r = sel(c, LLVMBuildAnd(c->b, neg, LLVMBuildNot(c->b, integral, ""), ""), cf(c, NAN), r);
    return sel(c, fcmp(c, LLVMRealOEQ, y, cf(c, 0.0)), cf(c, 1.0), r);
}

/* tanh(x) = sign(x) (1 - 2 / (e^(2|x|) + 1)) */
LLVMValueRef cu_tanh(Cu *c, LLVMValueRef x) {
    LLVMValueRef ax = cu_f32_intr(c, "llvm.fabs", x);
    LLVMValueRef e = cu_exp(c, LLVMBuildFMul(c->b, ax, cf(c, 2.0), ""));
    LLVMValueRef t = LLVMBuildFSub(c->b, cf(c, 1.0), LLVMBuildFDiv(c->b, cf(c, 2.0), LLVMBuildFAdd(c->b, e, cf(c, 1.0), ""), ""), "");
    LLVMValueRef args[2] = {t, x};
    return cu_intr(c, "llvm.copysign", &c->f32, 1, args, 2);
}

/* erf by Abramowitz-Stegun 7.1.26 (|error| <= 1.5e-7) */
LLVMValueRef cu_erf(Cu *c, LLVMValueRef x) {
    LLVMValueRef ax = cu_f32_intr(c, "llvm.fabs", x);
    LLVMValueRef t = LLVMBuildFDiv(c->b, cf(c, 1.0), LLVMBuildFAdd(c->b, cf(c, 1.0), LLVMBuildFMul(c->b, ax, cf(c, 0.3275911), ""), ""), "");
    static const double a[5] = {1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592};
    LLVMValueRef p = cf(c, a[0]);
    for (int i = 1; i < 5; i++) p = LLVMBuildFAdd(c->b, LLVMBuildFMul(c->b, p, t, ""), cf(c, a[i]), "");
    p = LLVMBuildFMul(c->b, p, t, "");
    LLVMValueRef e = cu_exp(c, LLVMBuildFNeg(c->b, LLVMBuildFMul(c->b, ax, ax, ""), ""));
    LLVMValueRef r = LLVMBuildFSub(c->b, cf(c, 1.0), LLVMBuildFMul(c->b, p, e, ""), "");
    LLVMValueRef args[2] = {r, x};
    return cu_intr(c, "llvm.copysign", &c->f32, 1, args, 2);
}

void cu_tail_need(Cu *c, int64_t bytes) {
    if (bytes > c->m->tail_bytes) c->m->tail_bytes = bytes;
}

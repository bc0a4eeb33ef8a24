/* Data movement: device copies, strided copy kernels (Transpose, Concat, Slice), Gather on
 * axis 0 and Dropout in inference.
 */
#include "backend/cuda/cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- data movement ------------------------------------------------------------------------------ */


typedef struct CopyCtx {
    uint32_t dst, src;
    LLVMTypeRef t;
} CopyCtx;

static void copy_body(Cu *c, LLVMValueRef *o, void *user) {
    CopyCtx *p = user;
    st(c, p->t, pslot(c, p->dst), o[0], ld(c, p->t, pslot(c, p->src), o[1]));
}

IrStatus cu_copy_kernel(Cu *c, uint32_t dst, uint32_t src, size_t esize, uint32_t rank, const int64_t *dims,
                            int64_t (*s)[IR_MAX_RANK], const int64_t *base) {
    if (ir_shape_numel(rank, dims) == 0) return IR_OK;
    CopyCtx p = {dst, src, int_type(c, esize)};
    uint32_t slots[2] = {dst, src};
    IrStatus st_ = cu_kbegin(c, slots, 2, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, rank, dims, 2, s, base, copy_body, &p);
    return cu_kend(c, ir_shape_numel(rank, dims), NULL);
}

IrStatus cu_copy_bytes(Cu *c) {
    const IrGraph *g = c->g;
    IrValueId x = ir_node_operand(g, c->node, 0), y = ir_node_result(g, c->node, 0);
    size_t nb = lower_value_nbytes(g, y);
    if (nb != lower_value_nbytes(g, x)) return cu_unsupported(c, "changing the element count");
    if (!nb) return IR_OK;
    CuStep s = {.kind = CU_STEP_COPY, .n_args = 2, .arg = {{y, 0}, {x, 0}}, .bytes = (int64_t)nb};
    return cu_push_step(c, &s);
}

static IrStatus gen_transpose(Cu *c) {
    IrValueId x = ir_node_operand(c->g, c->node, 0), y = ir_node_result(c->g, c->node, 0);
    LowerCopyPlan p;
    const char *why = lower_transpose_plan(c->g, c->node, &p);
    if (why) return cu_unsupported(c, why);
    return cu_copy_kernel(c, y, x, ir_dtype_size(lower_value_dtype(c->g, x)), p.rank, p.dims, p.s, NULL);
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
        if (why) return cu_unsupported(c, why);
        IrStatus st_ = cu_copy_kernel(c, y, x, ir_dtype_size(lower_value_dtype(g, x)), p.rank, p.dims, p.s, p.base);
        if (st_) return st_;
    }
    return IR_OK;
}

static IrStatus gen_slice(Cu *c) {
    IrValueId x = ir_node_operand(c->g, c->node, 0), y = ir_node_result(c->g, c->node, 0);
    LowerCopyPlan p;
    if (lower_slice_plan(c->g, c->node, &p)) return cu_gen_slice_rt(c); /* parameters given at run time */
    return cu_copy_kernel(c, y, x, ir_dtype_size(lower_value_dtype(c->g, x)), p.rank, p.dims, p.s, p.base);
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
    if (r == 0 || ir_shape_axis(ir_node_attr_int(g, n, "axis", &found), r) != 0) return cu_unsupported(c, "on an axis other than 0");
    IrDType it = lower_value_dtype(g, ix);
    if (it != IR_DTYPE_I64 && it != IR_DTYPE_I32) return cu_unsupported(c, "with non-i32/i64 indices");
    if (d[0] == 0) return cu_unsupported(c, "on an empty axis");
    GatherCtx p = {y, x, ix, int_type(c, ir_dtype_size(lower_value_dtype(g, x))), it == IR_DTYPE_I64 ? c->i64 : c->i32, d[0],
                   ir_shape_numel(r - 1, d + 1)};
    int64_t total = ir_shape_numel(ri, di) * p.row_len;
    if (total == 0) return IR_OK;
    uint32_t slots[3] = {y, x, ix};
    IrStatus st_ = cu_kbegin(c, slots, 3, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s, NULL, gather_body, &p);
    return cu_kend(c, total, NULL);
}

static IrStatus gen_dropout(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId tm = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    const unsigned char *tmv = tm ? lower_value_const_data(g, tm) : NULL;
    if (tm && lower_value_nbytes(g, tm) && (!tmv || *tmv)) return cu_gen_dropout_train(c); /* training: random masks */
    IrValueId mask = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    size_t nb = mask ? lower_value_nbytes(g, mask) : 0;
    if (nb) {
        CuStep s = {.kind = CU_STEP_MEMSET, .n_args = 1, .arg = {{mask, 0}}, .bytes = (int64_t)nb, .value = 1};
        IrStatus st_ = cu_push_step(c, &s);
        if (st_) return st_;
    }
    return cu_copy_bytes(c);
}


/* ---- rows of backend/cuda/cuda_ops.def ---- */

IrStatus cuda_emit_copy(Cu *c) { return cu_copy_bytes(c); }
IrStatus cuda_emit_dropout(Cu *c) { return gen_dropout(c); }
IrStatus cuda_emit_transpose(Cu *c) { return gen_transpose(c); }
IrStatus cuda_emit_concat(Cu *c) { return gen_concat(c); }
IrStatus cuda_emit_gather(Cu *c) {
    const IrGraph *g = c->g;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    lower_value_shape(g, ir_node_operand(g, c->node, 0), &r, d);
    bool found;
    return r && ir_shape_axis(ir_node_attr_int(g, c->node, "axis", &found), r) == 0 ? gen_gather(c) : cu_gen_gather_axis(c);
}
IrStatus cuda_emit_slice(Cu *c) { return gen_slice(c); }

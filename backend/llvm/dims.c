/* Shapes as LLVM values for static and run-time shapes alike (llvm/dims.h): dims, products,
 * strides with numpy broadcasting decided at run time where the graph cannot decide it, and the
 * loop nest whose bounds are values (constants fold), shared out across the parts of a kernel.
 */
#include "backend/llvm/dims.h"

#include "backend/llvm/typed.h"

static LLVMTypeRef i64t(LlvmEmit *e) { return LLVMInt64TypeInContext(e->ctx); }
static LLVMValueRef ci(LlvmEmit *e, int64_t v) { return LLVMConstInt(i64t(e), (unsigned long long)v, 1); }
static LLVMValueRef mul(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWMul(e->b, a, b, ""); }
static LLVMValueRef add(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(e->b, a, b, ""); }

LLVMValueRef llvm_syms(LlvmEmit *e) {
    if (!e->syms) {
        LLVMValueRef si = ci(e, llvm_slot_local(e->slots, lower_sym_slot(e->g)));
        LLVMTypeRef ptr = LLVMPointerTypeInContext(e->ctx, 0);
        e->syms = LLVMBuildLoad2(e->ab, ptr, LLVMBuildGEP2(e->ab, ptr, e->bufs, &si, 1, ""), "");
    }
    return e->syms;
}

LLVMValueRef llvm_dim_expr(LlvmEmit *e, IrExprId x) {
    const IrGraph *g = e->g;
    int64_t c;
    if (ir_expr_is_const(g, x, &c)) return ci(e, c);
    IrExprKind k = ir_expr_kind(g, x);
    if (k == IR_EXPR_SYM) {
        LLVMValueRef idx = ci(e, ir_expr_sym_id(g, x));
        return LLVMBuildLoad2(e->b, i64t(e), LLVMBuildGEP2(e->b, i64t(e), llvm_syms(e), &idx, 1, ""), "");
    }
    if (k == IR_EXPR_UNKNOWN) return NULL;
    LLVMValueRef a = llvm_dim_expr(e, ir_expr_lhs(g, x)), b = llvm_dim_expr(e, ir_expr_rhs(g, x));
    if (!a || !b) return NULL;
    switch (k) {
    case IR_EXPR_ADD: return add(e, a, b);
    case IR_EXPR_SUB: return LLVMBuildNSWSub(e->b, a, b, "");
    case IR_EXPR_MUL: return mul(e, a, b);
    case IR_EXPR_DIV: return LLVMBuildSDiv(e->b, a, b, "");
    case IR_EXPR_MOD: return LLVMBuildSRem(e->b, a, b, "");
    case IR_EXPR_MIN: return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, b, ""), a, b, "");
    case IR_EXPR_MAX: return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, a, b, ""), a, b, "");
    default: return NULL;
    }
}

bool llvm_dims_of(LlvmEmit *e, IrValueId v, LlvmDims *s) {
    const IrGraph *g = e->g;
    IrTypeId t = ir_value_type(g, v);
    s->rank = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
    if (!t || s->rank == IR_RANK_UNKNOWN || s->rank > IR_MAX_RANK) return false;
    for (uint32_t k = 0; k < s->rank; k++) {
        s->ex[k] = ir_type_dims(g, t)[k];
        if (!ir_expr_is_const(g, s->ex[k], &s->cd[k])) s->cd[k] = -1;
        if (!(s->dim[k] = llvm_dim_expr(e, s->ex[k]))) return false;
    }
    return true;
}

bool llvm_dims_static(const LlvmDims *s) {
    for (uint32_t k = 0; k < s->rank; k++)
        if (s->cd[k] < 0) return false;
    return true;
}

LLVMValueRef llvm_dims_prod(LlvmEmit *e, const LlvmDims *s, uint32_t from, uint32_t to) {
    LLVMValueRef p = ci(e, 1);
    for (uint32_t k = from; k < to; k++) p = mul(e, p, s->dim[k]);
    return p;
}

int64_t llvm_dims_cprod(const LlvmDims *s, uint32_t from, uint32_t to) {
    int64_t p = 1;
    for (uint32_t k = from; k < to; k++) {
        if (s->cd[k] < 0) return -1;
        p *= s->cd[k];
    }
    return p;
}

void llvm_dims_strides(LlvmEmit *e, const LlvmDims *s, LLVMValueRef *st) {
    LLVMValueRef k = ci(e, 1);
    for (uint32_t j = s->rank; j-- > 0;) {
        st[j] = k;
        k = mul(e, k, s->dim[j]);
    }
}

void llvm_dims_bcast_strides(LlvmEmit *e, const LlvmDims *s, const LlvmDims *out, LLVMValueRef *st) {
    LLVMValueRef k = ci(e, 1);
    for (uint32_t i = 0; i < out->rank; i++) st[i] = NULL;
    for (uint32_t j = s->rank; j-- > 0;) {
        uint32_t i = j + out->rank - s->rank;
        if (s->cd[j] != 1) {
            st[i] = k;
            if (s->ex[j] != out->ex[i] && !(s->cd[j] >= 0 && s->cd[j] == out->cd[i]))
                st[i] = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, s->dim[j], ci(e, 1), ""), ci(e, 0), k, "");
        }
        k = mul(e, k, s->dim[j]);
    }
}

void llvm_loop_n(LlvmEmit *e, LlvmLoop *l, LLVMValueRef n) {
    if (LLVMIsAConstantInt(n) && LLVMConstIntGetSExtValue(n) > 0) llvm_loop_begin(e->b, e->fn, l, LLVMConstIntGetSExtValue(n));
    else llvm_loop_begin_v(e->b, e->fn, l, n);
}

static void nest_rec(LlvmEmit *e, uint32_t k, const LlvmDims *s, uint32_t n_ops, LLVMValueRef (*st)[IR_MAX_RANK],
                     LLVMValueRef *offs, LLVMValueRef *idx, LlvmNestBody body, void *user, uint32_t split) {
    if (k == s->rank) {
        body(e, offs, idx, user);
        return;
    }
    if (s->cd[k] == 1) {
        idx[k] = ci(e, 0);
        nest_rec(e, k + 1, s, n_ops, st, offs, idx, body, user, split);
        return;
    }
    LlvmLoop l;
    LLVMValueRef iv;
    if (k == split) { /* this part's share of the outer loop */
        LLVMValueRef lo, hi;
        llvm_part_range(e->b, e->part, s->dim[k], e->np, &lo, &hi);
        llvm_loop_begin_v(e->b, e->fn, &l, LLVMBuildNSWSub(e->b, hi, lo, ""));
        iv = add(e, l.iv, lo);
    } else {
        if (s->cd[k] > 0) llvm_loop_begin(e->b, e->fn, &l, s->cd[k]);
        else llvm_loop_begin_v(e->b, e->fn, &l, s->dim[k]);
        iv = l.iv;
    }
    idx[k] = iv;
    LLVMValueRef inner[LLVM_NEST_MAX_OPS];
    for (uint32_t j = 0; j < n_ops; j++) inner[j] = st[j][k] ? add(e, offs[j], mul(e, iv, st[j][k])) : offs[j];
    nest_rec(e, k + 1, s, n_ops, st, inner, idx, body, user, split);
    llvm_loop_end(e->b, e->fn, &l);
}

void llvm_nest(LlvmEmit *e, const LlvmDims *s, uint32_t n_ops, LLVMValueRef (*st)[IR_MAX_RANK], const LLVMValueRef *base,
               LlvmNestBody body, void *user) {
    for (uint32_t k = 0; k < s->rank; k++)
        if (s->cd[k] == 0) return;
    LLVMValueRef offs[LLVM_NEST_MAX_OPS], idx[IR_MAX_RANK];
    for (uint32_t j = 0; j < n_ops && j < LLVM_NEST_MAX_OPS; j++) offs[j] = base ? base[j] : ci(e, 0);
    uint32_t split = s->rank;
    LLVMBasicBlockRef after = NULL;
    if (e->part && !e->part_used) {
        e->part_used = true;
        for (uint32_t k = 0; k < s->rank && split == s->rank; k++)
            if (s->cd[k] != 1) split = k;
        if (split == s->rank) after = llvm_if_begin(e->b, e->fn, LLVMBuildICmp(e->b, LLVMIntSLE, e->part, ci(e, 0), ""));
    }
    nest_rec(e, 0, s, n_ops, st, offs, idx, body, user, split);
    if (after) llvm_if_end(e->b, after);
}

/* Strided data movement: Transpose, Concat, Slice and Gather, one emitter each for static and
 * run-time shapes (llvm/dims.h: a static dim is an i64 constant, so every stride and count folds).
 * A copy is a nest over the result with a stride per side; dims of 1 are dropped and neighbours
 * whose constant strides continue each other are merged, and when the innermost merged run is
 * contiguous on both sides each run is one memcpy (a Concat along channels of batch-1 tensors is
 * one copy per input). Gather copies one row per index, indices clamped so the code never reads
 * outside its data.
 */
#include "backend/cpu/cpu.h"
#include "backend/llvm/dims.h"
#include "backend/llvm/typed.h"

#include <string.h>

/* A copy of `rank` dims: offsets (in elements) base[j] + sum_k i_k * st[j][k], j = 0 the
 * destination and 1 the source. */
typedef struct MvPlan {
    uint32_t rank;
    LLVMValueRef dim[IR_MAX_RANK];
    LLVMValueRef st[2][IR_MAX_RANK];
    LLVMValueRef base[2];
} MvPlan;

typedef struct MvBody {
    LLVMValueRef dst, src, run_bytes; /* run_bytes: each point copies a run of them, else one element */
    LLVMTypeRef t;
    int64_t esize;
} MvBody;

static void mv_body(LlvmEmit *e, LLVMValueRef *offs, LLVMValueRef *idx, void *user) {
    (void)idx;
    MvBody *c = user;
    if (!c->run_bytes) {
        LLVMValueRef v = LLVMBuildLoad2(e->b, c->t, lo_gep(e, c->t, c->src, offs[1]), "");
        LLVMBuildStore(e->b, v, lo_gep(e, c->t, c->dst, offs[0]));
        return;
    }
    LLVMTypeRef i8 = lo_i8_t(e);
    LLVMValueRef es = lo_i64(e, c->esize);
    LLVMValueRef d = lo_gep(e, i8, c->dst, LLVMBuildNSWMul(e->b, offs[0], es, ""));
    LLVMValueRef s = lo_gep(e, i8, c->src, LLVMBuildNSWMul(e->b, offs[1], es, ""));
    LLVMBuildMemCpy(e->b, d, 1, s, 1, c->run_bytes);
}

/* Emits the copy p of dtype dt elements from src to dst. */
static void mv_copy(LlvmEmit *e, const MvPlan *p, LLVMValueRef dst, LLVMValueRef src, IrDType dt) {
    MvPlan m = {.rank = 0, .base = {p->base[0] ? p->base[0] : lo_i64(e, 0), p->base[1] ? p->base[1] : lo_i64(e, 0)}};
    for (uint32_t k = 0; k < p->rank; k++) {
        int64_t dk, a0, a1, b0, b1, dp;
        if (lo_const_int(p->dim[k], &dk) && dk == 1) continue;
        uint32_t r = m.rank;
        if (r && lo_const_int(p->dim[k], &dk) && lo_const_int(m.dim[r - 1], &dp) && lo_const_int(m.st[0][r - 1], &a0) && lo_const_int(m.st[1][r - 1], &a1) &&
            lo_const_int(p->st[0][k], &b0) && lo_const_int(p->st[1][k], &b1) && a0 == b0 * dk && a1 == b1 * dk) {
            m.dim[r - 1] = lo_i64(e, dp * dk);
            m.st[0][r - 1] = p->st[0][k];
            m.st[1][r - 1] = p->st[1][k];
            continue;
        }
        m.dim[r] = p->dim[k];
        m.st[0][r] = p->st[0][k];
        m.st[1][r] = p->st[1][k];
        m.rank++;
    }
    MvBody c = {.dst = dst, .src = src, .t = lo_store_t(e, dt), .esize = (int64_t)ir_dtype_size(dt)};
    int64_t s0, s1, dn;
    uint32_t r = m.rank;
    /* contiguous innermost runs: one memcpy each (a run known at run time too) */
    if (r && lo_const_int(m.st[0][r - 1], &s0) && lo_const_int(m.st[1][r - 1], &s1) && s0 == 1 && s1 == 1 &&
        (!lo_const_int(m.dim[r - 1], &dn) || dn * c.esize >= 64)) {
        c.run_bytes = LLVMBuildNSWMul(e->b, m.dim[r - 1], lo_i64(e, c.esize), "");
        r--;
    }
    LlvmDims s = {.rank = r};
    for (uint32_t k = 0; k < r; k++) {
        s.dim[k] = m.dim[k];
        s.cd[k] = lo_const_int(m.dim[k], &dn) ? dn : -1;
    }
    llvm_nest(e, &s, 2, m.st, m.base, mv_body, &c);
}

/* Row-major strides of s as values (constants when static). */
static void dense(LlvmEmit *e, const LlvmDims *s, LLVMValueRef *st) { llvm_dims_strides(e, s, st); }

IrStatus cpu_move_transpose(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    LlvmDims sx, sy;
    IrDType dt = lo_dtype(e, x);
    if (!lo_store_t(e, dt)) return lo_unsupported_dtype(e, dt);
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy) || sx.rank != sy.rank) return lo_unsupported(e, "with an unknown shape");
    int64_t perm[IR_MAX_RANK];
    IrAttrValue av;
    bool has = ir_node_attr(g, n, "perm", &av) && av.kind == IR_ATTR_INTS;
    if (has && av.count != sx.rank) return lo_unsupported(e, "with this perm");
    for (uint32_t k = 0; k < sx.rank; k++) perm[k] = has ? av.ints[k] : (int64_t)(sx.rank - 1 - k);
    LLVMValueRef xs[IR_MAX_RANK];
    MvPlan p = {.rank = sy.rank};
    dense(e, &sx, xs);
    dense(e, &sy, p.st[0]);
    for (uint32_t k = 0; k < sy.rank; k++) {
        if (perm[k] < 0 || perm[k] >= (int64_t)sx.rank) return lo_unsupported(e, "with this perm");
        p.dim[k] = sy.dim[k];
        p.st[1][k] = xs[perm[k]];
    }
    mv_copy(e, &p, lo_buf(e, y), lo_buf(e, x), dt);
    return IR_OK;
}

IrStatus cpu_move_concat(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    if (cpu_concat_placed(e)) return IR_OK; /* inputs computed in place by the memory plan: nothing to copy */
    IrValueId y = ir_node_result(g, n, 0);
    IrDType dt = lo_dtype(e, y);
    LlvmDims sy, sx;
    if (!lo_store_t(e, dt)) return lo_unsupported_dtype(e, dt);
    if (!llvm_dims_of(e, y, &sy) || sy.rank == 0) return lo_unsupported(e, "with an unknown shape");
    bool found;
    int64_t axis = llvm_axis(ir_node_attr_int(g, n, "axis", &found), sy.rank);
    if (axis < 0) return lo_unsupported(e, "with this axis");
    MvPlan p = {.rank = sy.rank};
    dense(e, &sy, p.st[0]);
    LLVMValueRef pos = lo_i64(e, 0);
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId x = ir_node_operand(g, n, i);
        if (!x || !llvm_dims_of(e, x, &sx) || sx.rank != sy.rank) return lo_unsupported(e, "with these operands");
        dense(e, &sx, p.st[1]);
        memcpy(p.dim, sx.dim, sx.rank * sizeof *p.dim);
        p.base[0] = LLVMBuildNSWMul(e->b, pos, p.st[0][axis], "");
        p.base[1] = NULL;
        mv_copy(e, &p, lo_buf(e, y), lo_buf(e, x), dt);
        pos = LLVMBuildNSWAdd(e->b, pos, sx.dim[axis], "");
    }
    return IR_OK;
}

/* ---- Slice ----------------------------------------------------------------------------------
 * Constant starts/ends/axes/steps: the copy the target-independent plan gives. Starts (and
 * steps, axes) read at run time (computed from shapes in exported models): clamped as ONNX says,
 * the result's dims from its type; with their count known at run time only, cpu_data_slice_any. */

static LLVMValueRef index_at(LlvmEmit *e, IrValueId v, uint32_t i) { return lo_load_int(e, lo_dtype(e, v), lo_buf(e, v), lo_i64(e, i)); }

static IrStatus slice_runtime(LlvmEmit *e, const LlvmDims *sx, const LlvmDims *sy, IrDType dt) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LLVMBuilderRef b = e->b;
    uint32_t no = ir_node_num_operands(g, n);
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrValueId vs = no > 1 ? ir_node_operand(g, n, 1) : 0, va = no > 3 ? ir_node_operand(g, n, 3) : 0;
    IrValueId vst = no > 4 ? ir_node_operand(g, n, 4) : 0;
    uint32_t r0;
    int64_t d0[IR_MAX_RANK];
    if (!vs) return lo_unsupported(e, "without starts");
    if (!lower_value_shape(g, vs, &r0, d0)) return cpu_data_slice_any(e); /* their count known at run time */
    if (r0 != 1 || d0[0] > (int64_t)sx->rank) return lo_unsupported(e, "with these starts");
    IrDType it = lo_dtype(e, vs);
    if ((it != IR_DTYPE_I64 && it != IR_DTYPE_I32) || (vst && lo_dtype(e, vst) != it)) return lo_unsupported(e, "with these starts");
    int64_t axes[IR_MAX_RANK];
    uint32_t na = (uint32_t)d0[0];
    bool rt_axes = false; /* axes read at run time: every dim takes its share through selects */
    if (va) {
        uint32_t k, ra;
        int64_t da[IR_MAX_RANK];
        if (!lower_const_ints(g, va, axes, &k, IR_MAX_RANK) || k != na) {
            IrDType at = lo_dtype(e, va);
            if ((at != IR_DTYPE_I64 && at != IR_DTYPE_I32) || !lower_value_shape(g, va, &ra, da) || ra != 1 || da[0] != na)
                return lo_unsupported(e, "with these axes");
            rt_axes = true;
        }
    } else {
        for (uint32_t i = 0; i < na; i++) axes[i] = i;
    }
    LLVMValueRef xs[IR_MAX_RANK], zero = lo_i64(e, 0);
    MvPlan p = {.rank = sy->rank, .base = {zero, zero}};
    dense(e, sx, xs);
    memcpy(p.st[1], xs, sx->rank * sizeof *xs);
    dense(e, sy, p.st[0]);
    memcpy(p.dim, sy->dim, sy->rank * sizeof *p.dim);
    for (uint32_t i = 0; i < na; i++) {
        int64_t a = rt_axes ? 0 : llvm_axis(axes[i], sx->rank);
        if (a < 0) return lo_unsupported(e, "with these axes");
        LLVMValueRef av = NULL, dim = sx->dim[a], dn = xs[a];
        if (rt_axes) { /* the axis, normalized, picks its dim and stride */
            av = index_at(e, va, i);
            av = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, av, zero, ""), LLVMBuildAdd(b, av, lo_i64(e, sx->rank), ""), av, "");
            for (uint32_t k = 1; k < sx->rank; k++) {
                LLVMValueRef is = LLVMBuildICmp(b, LLVMIntEQ, av, lo_i64(e, k), "");
                dim = LLVMBuildSelect(b, is, sx->dim[k], dim, "");
                dn = LLVMBuildSelect(b, is, xs[k], dn, "");
            }
        }
        LLVMValueRef start = index_at(e, vs, i), step = vst ? index_at(e, vst, i) : lo_i64(e, 1);
        start = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, start, zero, ""), LLVMBuildAdd(b, start, dim, ""), start, "");
        LLVMValueRef back = LLVMBuildICmp(b, LLVMIntSLT, step, zero, "");
        LLVMValueRef hi = LLVMBuildSelect(b, back, LLVMBuildNSWSub(b, dim, lo_i64(e, 1), ""), dim, "");
        start = lo_iclamp(e, start, zero, hi);
        p.base[1] = LLVMBuildAdd(b, p.base[1], LLVMBuildMul(b, start, dn, ""), "");
        if (!rt_axes) {
            p.st[1][a] = LLVMBuildMul(b, step, xs[a], "");
            continue;
        }
        for (uint32_t k = 0; k < sx->rank; k++)
            p.st[1][k] = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, av, lo_i64(e, k), ""), LLVMBuildMul(b, step, xs[k], ""),
                                         p.st[1][k], "");
    }
    mv_copy(e, &p, lo_buf(e, y), lo_buf(e, x), dt);
    return IR_OK;
}

IrStatus cpu_move_slice(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrDType dt = lo_dtype(e, x);
    LlvmDims sx, sy;
    if (!lo_store_t(e, dt)) return lo_unsupported_dtype(e, dt);
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy) || sx.rank != sy.rank) return lo_unsupported(e, "with an unknown shape");
    LowerCopyPlan cp;
    if (!llvm_dims_static(&sx) || !llvm_dims_static(&sy) || lower_slice_plan(g, n, &cp)) return slice_runtime(e, &sx, &sy, dt);
    MvPlan p = {.rank = cp.rank, .base = {lo_i64(e, cp.base[0]), lo_i64(e, cp.base[1])}};
    for (uint32_t k = 0; k < cp.rank; k++) {
        p.dim[k] = lo_i64(e, cp.dims[k]);
        p.st[0][k] = lo_i64(e, cp.s[0][k]);
        p.st[1][k] = lo_i64(e, cp.s[1][k]);
    }
    mv_copy(e, &p, lo_buf(e, y), lo_buf(e, x), dt);
    return IR_OK;
}

/* ---- Gather on any axis ---------------------------------------------------------------------
 * [outer, n_idx, inner] blocks copied row by row, each index read at run time (negative ones
 * counted from the end, out-of-range ones clamped so the code never reads outside the data). */
typedef struct Ga {
    LLVMValueRef x, y, idx, rows, inner_bytes, nidx;
    IrDType it;
} Ga;

static void gather_row(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Ga *c = user;
    LLVMBuilderRef b = e->b;
    LLVMValueRef p = o[0], j = o[1], zero = lo_i64(e, 0); /* outer block p, index j */
    LLVMValueRef i = lo_load_int(e, c->it, c->idx, j);
    i = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, i, zero, ""), LLVMBuildAdd(b, i, c->rows, ""), i, "");
    i = lo_iclamp(e, i, zero, LLVMBuildNSWSub(b, c->rows, lo_i64(e, 1), ""));
    LLVMTypeRef i8 = lo_i8_t(e);
    LLVMValueRef src = lo_gep(e, i8, c->x, LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, p, c->rows, ""), i, ""), c->inner_bytes, ""));
    LLVMValueRef dst = lo_gep(e, i8, c->y, LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, p, c->nidx, ""), j, ""), c->inner_bytes, ""));
    LLVMBuildMemCpy(b, dst, 1, src, 1, c->inner_bytes);
}

IrStatus cpu_move_gather(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), ix = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    LlvmDims sx, si;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, ix, &si)) return lo_unsupported(e, "with an unknown shape");
    if (sx.rank == 0) return lo_unsupported(e, "on a scalar");
    bool found;
    int64_t axis = llvm_axis(ir_node_attr_int(g, n, "axis", &found), sx.rank);
    if (axis < 0) return lo_unsupported(e, "with this axis");
    Ga c = {.x = lo_buf(e, x), .y = lo_buf(e, y), .idx = lo_buf(e, ix), .it = lo_dtype(e, ix), .rows = sx.dim[axis]};
    if (c.it != IR_DTYPE_I64 && c.it != IR_DTYPE_I32) return lo_unsupported(e, "with non-i32/i64 indices");
    c.inner_bytes = LLVMBuildMul(e->b, llvm_dims_prod(e, &sx, (uint32_t)axis + 1, sx.rank), lo_i64(e, (int64_t)ir_dtype_size(lo_dtype(e, x))), "");
    c.nidx = llvm_dims_prod(e, &si, 0, si.rank);
    LLVMValueRef outer = llvm_dims_prod(e, &sx, 0, (uint32_t)axis);
    int64_t co, cn;
    LlvmDims loops = {.rank = 2, .dim = {outer, c.nidx}, .cd = {lo_const_int(outer, &co) ? co : -1, lo_const_int(c.nidx, &cn) ? cn : -1}};
    LLVMValueRef st[2][IR_MAX_RANK] = {{lo_i64(e, 1), NULL}, {NULL, lo_i64(e, 1)}};
    /* an empty axis has no row to read: the result is empty too unless no index is given */
    int64_t rows;
    if (lo_const_int(c.rows, &rows) && rows == 0) return lo_unsupported(e, "on an empty axis");
    LLVMBasicBlockRef after = lo_const_int(c.rows, &rows) ? NULL : lo_if_begin(e, LLVMBuildICmp(e->b, LLVMIntSGT, c.rows, lo_i64(e, 0), ""));
    llvm_nest(e, &loops, 2, st, NULL, gather_row, &c);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

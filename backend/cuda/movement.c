/* Data movement by index: one thread per output element computes its coordinates and the
 * source element (Trilu, GatherElements, Tile, Pad in all four modes), strided copies (Split,
 * Expand), and ScatterElements (a device copy of the data, then the updates: in parallel
 * without a reduction, else in the interpreter's order by one thread). Elements move as raw
 * bytes, so every dtype is handled.
 */
#include "backend/cuda/cu.h"

#include <string.h>

static LLVMValueRef i64c(Cu *c, int64_t v) { return LLVMConstInt(c->i64, (unsigned long long)v, 1); }

/* coords[k] of flat index i over dims (row-major), in the index type */
static void coords_of(Cu *c, uint32_t rank, const int64_t *dims, LLVMValueRef i, LLVMValueRef *coords) {
    LLVMValueRef rem = i;
    for (uint32_t k = rank; k-- > 0;) {
        coords[k] = k == 0 ? rem : LLVMBuildURem(c->b, rem, ci(c, dims[k]), "");
        if (k > 0) rem = LLVMBuildUDiv(c->b, rem, ci(c, dims[k]), "");
    }
}

static LLVMValueRef dot(Cu *c, uint32_t rank, LLVMValueRef *coords, const int64_t *strides) {
    LLVMValueRef off = ci(c, 0);
    for (uint32_t k = 0; k < rank; k++)
        if (strides[k]) off = LLVMBuildAdd(c->b, off, LLVMBuildMul(c->b, coords[k], ci(c, strides[k]), ""), "");
    return off;
}

/* an index operand's element as an index-type value, wrapped once if negative and clamped to
 * [0, n) so a bad index cannot read outside the buffer */
static LLVMValueRef index_at(Cu *c, IrValueId idx, LLVMValueRef off, int64_t n) {
    LLVMBuilderRef b = c->b;
    IrDType it = lower_value_dtype(c->g, idx);
    LLVMValueRef v = cu_load_typed(c, it, pslot(c, idx), off);
    v = sel(c, LLVMBuildICmp(b, LLVMIntSLT, v, i64c(c, 0), ""), LLVMBuildAdd(b, v, i64c(c, n), ""), v);
    v = sel(c, LLVMBuildICmp(b, LLVMIntSLT, v, i64c(c, 0), ""), i64c(c, 0), v);
    v = sel(c, LLVMBuildICmp(b, LLVMIntSGE, v, i64c(c, n), ""), i64c(c, n > 0 ? n - 1 : 0), v);
    return c->it == c->i64 ? v : LLVMBuildTrunc(b, v, c->it, "");
}

/* src: the op's source offset of the output element at coordinates co (flat index i), and
 * through *keep the condition to load it (else zero, or Pad's constant); one per op. */
typedef struct MovCtx {
    IrOp op;
    LLVMValueRef (*src)(Cu *c, const struct MovCtx *p, LLVMValueRef *co, LLVMValueRef i, LLVMValueRef *keep);
    IrValueId y, x, idx, k;
    LLVMTypeRef et;
    uint32_t rank;
    int64_t od[IR_MAX_RANK], xd[IR_MAX_RANK], xs[IR_MAX_RANK];
    int64_t axis, lo[IR_MAX_RANK];
    int mode;       /* Pad: 0 constant, 1 edge, 2 reflect, 3 wrap */
    IrValueId fill; /* Pad: the constant value operand (0 = zeros) */
    bool upper;
} MovCtx;

/* Pad's source coordinate of output coordinate o on a dim of n (-1: outside, constant mode) */
static LLVMValueRef pad_src(Cu *c, LLVMValueRef o, int64_t n, int mode, LLVMValueRef *inside) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, o, ci(c, 0), ""), LLVMBuildICmp(b, LLVMIntSLT, o, ci(c, n), ""), "");
    *inside = in;
    if (mode == 0 || n == 0) return sel(c, in, o, ci(c, 0));
    *inside = LLVMConstInt(c->i1, 1, 0);
    LLVMValueRef r;
    if (mode == 1) r = sel(c, LLVMBuildICmp(b, LLVMIntSLT, o, ci(c, 0), ""), ci(c, 0), ci(c, n - 1));
    else if (mode == 3 || n == 1) r = n == 1 ? ci(c, 0) : LLVMBuildSRem(b, LLVMBuildAdd(b, LLVMBuildSRem(b, o, ci(c, n), ""), ci(c, n), ""), ci(c, n), "");
    else {
        int64_t p = 2 * (n - 1);
        LLVMValueRef q = LLVMBuildSRem(b, LLVMBuildAdd(b, LLVMBuildSRem(b, o, ci(c, p), ""), ci(c, p), ""), ci(c, p), "");
        r = sel(c, LLVMBuildICmp(b, LLVMIntSLT, q, ci(c, n), ""), q, LLVMBuildSub(b, ci(c, p), q, ""));
    }
    return sel(c, in, o, r);
}

#define MOV_SRC(name) static LLVMValueRef name(Cu *c, const MovCtx *p, LLVMValueRef *co, LLVMValueRef i, LLVMValueRef *keep)

MOV_SRC(src_trilu) {
    LLVMBuilderRef b = c->b;
    LLVMValueRef k = ci(c, 0);
    if (p->k) k = LLVMBuildIntCast2(b, cu_load_typed(c, lower_value_dtype(c->g, p->k), pslot(c, p->k), ci(c, 0)), c->it, 1, "");
    LLVMValueRef diff = LLVMBuildSub(b, co[p->rank - 1], co[p->rank - 2], "");
    *keep = LLVMBuildICmp(b, p->upper ? LLVMIntSGE : LLVMIntSLE, diff, k, "");
    return i;
}

MOV_SRC(src_gather_elements) {
    (void)keep;
    LLVMValueRef cc[IR_MAX_RANK];
    memcpy(cc, co, sizeof cc);
    cc[p->axis] = index_at(c, p->idx, i, p->xd[p->axis]);
    return dot(c, p->rank, cc, p->xs);
}

MOV_SRC(src_tile) {
    (void)i, (void)keep;
    LLVMValueRef cc[IR_MAX_RANK];
    for (uint32_t k = 0; k < p->rank; k++) cc[k] = p->xd[k] == p->od[k] ? co[k] : LLVMBuildURem(c->b, co[k], ci(c, p->xd[k]), "");
    return dot(c, p->rank, cc, p->xs);
}

MOV_SRC(src_pad) {
    (void)i;
    LLVMBuilderRef b = c->b;
    LLVMValueRef cc[IR_MAX_RANK], inside = LLVMConstInt(c->i1, 1, 0), in;
    for (uint32_t k = 0; k < p->rank; k++) {
        cc[k] = pad_src(c, LLVMBuildSub(b, co[k], ci(c, p->lo[k]), ""), p->xd[k], p->mode, &in);
        inside = LLVMBuildAnd(b, inside, in, "");
    }
    *keep = inside;
    return dot(c, p->rank, cc, p->xs);
}

static void mov_body(Cu *c, LLVMValueRef *o, void *user) {
    MovCtx *p = user;
    LLVMValueRef co[IR_MAX_RANK], Y = pslot(c, p->y), X = pslot(c, p->x);
    coords_of(c, p->rank, p->od, o[0], co);
    LLVMValueRef keep = NULL, v;
    LLVMValueRef src = p->src(c, p, co, o[0], &keep);
    v = ld(c, p->et, X, src);
    if (keep) {
        LLVMValueRef other = LLVMConstInt(p->et, 0, 0);
        if (p->op == IR_OP_PAD && p->fill) other = ld(c, p->et, pslot(c, p->fill), ci(c, 0));
        v = sel(c, keep, v, other);
    }
    st(c, p->et, Y, o[0], v);
}

static IrStatus mov_kernel(Cu *c, MovCtx *p, LLVMValueRef (*src)(Cu *, const MovCtx *, LLVMValueRef *, LLVMValueRef, LLVMValueRef *)) {
    p->src = src;
    int64_t total = ir_shape_numel(p->rank, p->od), s1[1][IR_MAX_RANK] = {{1}};
    if (!total) return IR_OK;
    uint32_t slots[4] = {p->y, p->x, p->idx ? p->idx : p->x, p->k ? p->k : p->fill ? p->fill : p->x};
    IrStatus st_ = cu_kbegin(c, slots, 4, CU_BLOCK, false);
    if (st_) return st_;
    cu_emit_nest(c, 1, &total, 1, s1, NULL, mov_body, p);
    return cu_kend(c, total, NULL);
}

static IrStatus mov_begin(Cu *c, MovCtx *p) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    p->op = ir_node_op(g, n);
    p->y = ir_node_result(g, n, 0);
    p->x = ir_node_operand(g, n, 0);
    IrDType dt = lower_value_dtype(g, p->x);
    if (dt == IR_DTYPE_STRING) return cu_unsupported_dtype(c, dt);
    p->et = int_type(c, ir_dtype_size(dt));
    uint32_t yr;
    lower_value_shape(g, p->x, &p->rank, p->xd);
    lower_value_shape(g, p->y, &yr, p->od);
    if (yr != p->rank || p->rank == 0) return cu_unsupported(c, "with these ranks");
    ir_shape_strides(p->rank, p->xd, p->xs);
    return IR_OK;
}

static bool small_int_operand(const IrGraph *g, IrValueId v) {
    IrDType t = lower_value_dtype(g, v);
    return t == IR_DTYPE_I64 || t == IR_DTYPE_I32;
}

IrStatus cuda_emit_trilu(Cu *c) {
    MovCtx p = {0};
    IrStatus s = mov_begin(c, &p);
    if (s) return s;
    if (p.rank < 2) return cu_unsupported(c, "with rank < 2");
    const IrGraph *g = c->g;
    p.k = ir_node_num_operands(g, c->node) > 1 ? ir_node_operand(g, c->node, 1) : 0;
    if (p.k && lower_value_nbytes(g, p.k) == 0) p.k = 0;
    if (p.k && !small_int_operand(g, p.k)) return cu_unsupported(c, "with a k other than i32/i64");
    bool found;
    p.upper = ir_node_attr_int(g, c->node, "upper", &found) != 0 || !found;
    return mov_kernel(c, &p, src_trilu);
}

IrStatus cuda_emit_gather_elements(Cu *c) {
    MovCtx p = {0};
    IrStatus s = mov_begin(c, &p);
    if (s) return s;
    const IrGraph *g = c->g;
    p.idx = ir_node_operand(g, c->node, 1);
    if (!small_int_operand(g, p.idx)) return cu_unsupported(c, "with indices other than i32/i64");
    bool found;
    p.axis = ir_node_attr_int(g, c->node, "axis", &found);
    if (!ir_shape_axis_checked(&p.axis, p.rank)) return cu_unsupported(c, "with this axis");
    if (p.xd[p.axis] == 0) return cu_unsupported(c, "on an empty axis");
    return mov_kernel(c, &p, src_gather_elements);
}

IrStatus cuda_emit_tile(Cu *c) {
    MovCtx p = {0};
    IrStatus s = mov_begin(c, &p);
    if (s) return s;
    for (uint32_t k = 0; k < p.rank; k++)
        if (p.xd[k] == 0 && p.od[k] != 0) return cu_unsupported(c, "of an empty dim");
    return mov_kernel(c, &p, src_tile);
}

IrStatus cuda_emit_pad(Cu *c) {
    MovCtx p = {0};
    IrStatus s = mov_begin(c, &p);
    if (s) return s;
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    bool found;
    const char *ms = ir_node_attr_string(g, n, "mode", &found);
    if (!found || !ms || strcmp(ms, "constant") == 0) p.mode = 0;
    else if (strcmp(ms, "edge") == 0) p.mode = 1;
    else if (strcmp(ms, "reflect") == 0) p.mode = 2;
    else if (strcmp(ms, "wrap") == 0) p.mode = 3;
    else return cu_unsupported(c, "in this mode");
    int64_t pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
    uint32_t np = 0, nax = p.rank;
    IrValueId ta = ir_node_num_operands(g, n) > 3 ? ir_node_operand(g, n, 3) : 0;
    if (ta && lower_value_nbytes(g, ta) == 0) ta = 0;
    if (!lower_const_ints(g, ir_node_operand(g, n, 1), pads, &np, 2 * IR_MAX_RANK) ||
        (ta && !lower_const_ints(g, ta, axes, &nax, IR_MAX_RANK)))
        return cu_gen_pad_rt(c, p.mode); /* pads or axes given at run time */
    if (!ta)
        for (uint32_t i = 0; i < nax; i++) axes[i] = i;
    if (np != 2 * nax) return cu_unsupported(c, "with this many pads");
    for (uint32_t i = 0; i < nax; i++) {
        int64_t a = axes[i];
        if (!ir_shape_axis_checked(&a, p.rank)) return cu_unsupported(c, "with an axis out of range");
        p.lo[a] = pads[i];
    }
    for (uint32_t k = 0; k < p.rank; k++)
        if (p.mode && p.xd[k] == 0 && p.od[k] > 0) return cu_unsupported(c, "of an empty dim in this mode");
    IrValueId cv = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    if (cv && lower_value_nbytes(g, cv) > 0) {
        if (lower_value_dtype(g, cv) != lower_value_dtype(g, p.x)) return cu_unsupported(c, "with a constant of another dtype");
        p.fill = cv;
    }
    return mov_kernel(c, &p, src_pad);
}

/* Expand: a copy with broadcast strides; Split: one strided copy per output. */
IrStatus cuda_emit_expand(Cu *c) {
    const IrGraph *g = c->g;
    IrValueId x = ir_node_operand(g, c->node, 0), y = ir_node_result(g, c->node, 0);
    uint32_t r, yr;
    int64_t xd[IR_MAX_RANK], yd[IR_MAX_RANK], s[2][IR_MAX_RANK];
    lower_value_shape(g, x, &r, xd);
    lower_value_shape(g, y, &yr, yd);
    if (r > yr || !lower_bcast_to(r, xd, yr, yd)) return cu_unsupported(c, "with these shapes");
    ir_shape_strides(yr, yd, s[0]);
    ir_shape_broadcast_strides(r, xd, yr, NULL, s[1]);
    return cu_copy_kernel(c, y, x, ir_dtype_size(lower_value_dtype(g, x)), yr, yd, s, NULL);
}

IrStatus cuda_emit_split(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0);
    uint32_t r, yr;
    int64_t xd[IR_MAX_RANK], yd[IR_MAX_RANK], s[2][IR_MAX_RANK];
    lower_value_shape(g, x, &r, xd);
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found);
    if (!ir_shape_axis_checked(&axis, r)) return cu_unsupported(c, "with this axis");
    ir_shape_strides(r, xd, s[1]);
    size_t es = ir_dtype_size(lower_value_dtype(g, x));
    int64_t pos = 0;
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId y = ir_node_result(g, n, i);
        if (!y) return cu_unsupported(c, "with an unused output");
        lower_value_shape(g, y, &yr, yd);
        if (yr != r) return cu_unsupported(c, "with these shapes");
        ir_shape_strides(yr, yd, s[0]);
        int64_t base[2] = {0, pos * s[1][axis]};
        IrStatus st_ = cu_copy_kernel(c, y, x, es, r, yd, s, base);
        if (st_) return st_;
        pos += yd[axis];
    }
    if (pos != xd[axis]) return cu_unsupported(c, "(internal: outputs do not cover the axis)");
    return IR_OK;
}

/* ---- ScatterElements ------------------------------------------------------------------------ */

typedef struct ScCtx {
    IrValueId y, idx, upd;
    IrDType dt;
    int red; /* 0 none, 1 add, 2 mul, 3 max, 4 min */
    uint32_t rank;
    int64_t id[IR_MAX_RANK], ys[IR_MAX_RANK], axis, axis_n;
} ScCtx;

static void sc_one(Cu *c, void *user, LLVMValueRef i) {
    ScCtx *p = user;
    LLVMValueRef co[IR_MAX_RANK];
    coords_of(c, p->rank, p->id, i, co);
    co[p->axis] = index_at(c, p->idx, i, p->axis_n);
    LLVMValueRef dst = dot(c, p->rank, co, p->ys);
    cu_scatter_store(c, p->red, p->dt, pslot(c, p->y), dst, cu_load_typed(c, p->dt, pslot(c, p->upd), i));
}

IrStatus cuda_emit_scatter_elements(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    IrValueId x = ir_node_operand(g, n, 0);
    ScCtx p = {.y = ir_node_result(g, n, 0), .idx = ir_node_operand(g, n, 1), .upd = ir_node_operand(g, n, 2)};
    p.dt = lower_value_dtype(g, x);
    if (!cu_typed_ok(p.dt)) return cu_unsupported_dtype(c, p.dt);
    if (!small_int_operand(g, p.idx)) return cu_unsupported(c, "with indices other than i32/i64");
    IrStatus st_ = cu_scatter_reduction(c, p.dt, &p.red);
    if (st_) return st_;
    bool found;
    uint32_t r;
    int64_t yd[IR_MAX_RANK];
    lower_value_shape(g, x, &r, yd);
    lower_value_shape(g, p.idx, &p.rank, p.id);
    if (p.rank != r || r == 0) return cu_unsupported(c, "with these ranks");
    ir_shape_strides(r, yd, p.ys);
    p.axis = ir_node_attr_int(g, n, "axis", &found);
    if (!ir_shape_axis_checked(&p.axis, r)) return cu_unsupported(c, "with this axis");
    p.axis_n = yd[p.axis];
    int64_t total = p.axis_n ? ir_shape_numel(p.rank, p.id) : 0;
    return cu_scatter_launch(c, p.y, x, p.idx, p.upd, p.red, total, sc_one, &p);
}

/* Data movement and quantization kernels of the LLVM backend, each one emitter for static and
 * run-time shapes where it is written on llvm/dims.h: the copy ops (Identity, Reshape, Flatten,
 * Squeeze, Unsqueeze, Dropout), Expand, Tile, Split, Pad (all modes), Trilu, GatherElements,
 * ScatterElements, GatherND, ScatterND, TopK, OneHot, EyeLike, ConstantOfShape,
 * Quantize/DequantizeLinear (integer types), DynamicQuantizeLinear, Einsum, DepthToSpace,
 * SpaceToDepth, ReverseSequence, GridSample (2-D). Float arithmetic in f64 like the interpreter;
 * shape-like operands (repeats, pads, split sizes) must be constants after specialization,
 * anything else is refused; what the graph cannot check with symbolic dims is checked when the
 * kernel runs.
 */
#include "backend/cpu/cpu.h"

typedef int64_t Strides[LLVM_OPS_MAX_NEST];

/* ---- plain copies -------------------------------------------------------------------------- */

typedef struct Copy {
    IrDType dt;
    LLVMValueRef dst, src;
} Copy;

static void copy_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Copy *c = user;
    LLVMTypeRef t = lo_store_t(e, c->dt);
    LLVMBuildStore(e->b, LLVMBuildLoad2(e->b, t, lo_gep(e, t, c->src, o[1]), ""), lo_gep(e, t, c->dst, o[0]));
}

/* Bytes of a value of shape s and dtype dt, as an i64 value (a constant when s is static). */
static LLVMValueRef dims_nbytes(LlvmEmit *e, const LlvmDims *s, IrDType dt) {
    return LLVMBuildNSWMul(e->b, llvm_dims_prod(e, s, 0, s->rank), lo_i64(e, (int64_t)ir_dtype_size(dt)), "");
}

/* A rank-1 shape of n elements (n an i64 value, constant or not). */
static void flat_dims(LLVMValueRef n, LlvmDims *s) {
    s->rank = 1;
    s->dim[0] = n;
    s->cd[0] = LLVMIsAConstantInt(n) ? LLVMConstIntGetSExtValue(n) : -1;
    s->ex[0] = 0;
}

/* Index entries that address a dim of length 0 have nothing to read (run_guard). */
static LLVMBasicBlockRef guard_empty_dim(LlvmEmit *e, LLVMValueRef dim, LLVMValueRef entries, const char *msg, bool *refuse) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef bad = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, dim, lo_i64(e, 0), ""),
                                    LLVMBuildICmp(b, LLVMIntSGT, entries, lo_i64(e, 0), ""), "");
    return lo_run_guard(e, bad, msg, refuse);
}

/* y = x's bytes (the copy ops: same elements, another shape). The count is x's, so a result
 * whose rank only the run knows (Reshape by a shape read at run time) is copied too; nothing
 * moves when the memory plan gave y x's place (lower_plan_memory: x dies here). */
static IrStatus copy_bytes(LlvmEmit *e, IrValueId x, IrValueId y) {
    IrDType dt = lo_dtype(e, x);
    LlvmDims sx, sy;
    bool hx = llvm_dims_of(e, x, &sx), hy = llvm_dims_of(e, y, &sy);
    if (!hx && !hy) return lo_unsupported(e, "with an unknown shape");
    LLVMValueRef nb = dims_nbytes(e, hx ? &sx : &sy, dt);
    if (hx && hy) {
        LLVMValueRef ne = LLVMBuildICmp(e->b, LLVMIntNE, nb, dims_nbytes(e, &sy, dt), "");
        if (LLVMIsAConstantInt(ne) && LLVMConstIntGetZExtValue(ne)) return lo_unsupported(e, "changing the element count");
    }
    if (LLVMIsAConstantInt(nb) && LLVMConstIntGetSExtValue(nb) == 0) return IR_OK;
    LLVMValueRef dst = lo_buf(e, y), src = lo_buf(e, x);
    LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildICmp(e->b, LLVMIntNE, dst, src, ""));
    /* alignment 1: an in-place Concat's part sits at any element offset of the Concat's output */
    LLVMBuildMemCpy(e->b, dst, 1, src, 1, nb);
    lo_if_end(e, after);
    return IR_OK;
}

/* Dropout in inference: training_mode absent or a constant false; in training, a ratio of 0
 * (nothing dropped, scale 1) is the same copy; training_mode and ratio given at run time fail
 * the run when they would drop anything (random masks are not compiled, nor interpreted). The
 * mask, where something reads it, is all true. */
static IrStatus gen_dropout(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LLVMBuilderRef b = e->b;
    IrValueId tm = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    IrValueId rv = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    if (tm && (lower_value_dtype(g, tm) != IR_DTYPE_BOOL || lower_value_nbytes(g, tm) > 1))
        return lo_unsupported(e, "with a training_mode that is not one bool");
    if (tm && lower_value_nbytes(g, tm) == 0) tm = 0; /* empty: false, as the interpreter reads it */
    const unsigned char *tmv = tm ? lower_value_const_data(g, tm) : NULL;
    const void *rd = rv ? lower_value_const_data(g, rv) : NULL;
    bool zero = rd && ir_dtype_is_float(lower_value_dtype(g, rv)) && lower_value_nbytes(g, rv) &&
                ir_elem_get_f64(lower_value_dtype(g, rv), rd, 0) == 0.0;
    if (tm && tmv && *tmv && !zero) return lo_unsupported(e, "in training mode with a ratio above 0");
    if (tm && !tmv && !zero) {
        LLVMValueRef on = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildLoad2(b, lo_i8_t(e), lo_buf(e, tm), ""), LLVMConstInt(lo_i8_t(e), 0, 0), "");
        if (rv && lower_value_dtype(g, rv) == IR_DTYPE_F32 && lower_value_nbytes(g, rv) == 4) {
            LLVMValueRef r = LLVMBuildLoad2(b, lo_f32_t(e), lo_buf(e, rv), "");
            on = LLVMBuildAnd(b, on, LLVMBuildFCmp(b, LLVMRealOGT, r, LLVMConstReal(lo_f32_t(e), 0), ""), "");
        } else if (rv) return lo_unsupported(e, "in training mode with this ratio");
        char msg[200];
        snprintf(msg, sizeof msg, "Dropout %%%s: training_mode with a ratio above 0 (random masks) is not supported",
                 ir_value_name(g, ir_node_result(g, n, 0)));
        lo_fail_if(e, on, msg);
    }
    IrValueId mask = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    if (mask) { /* a mask nothing reads is not written */
        uint32_t *uses = calloc(ir_graph_num_values(g) + 1, sizeof *uses);
        if (!uses) return IR_ENOMEM;
        ir_graph_count_uses(g, uses);
        if (!uses[mask]) mask = 0;
        free(uses);
    }
    LlvmDims sm;
    if (mask && !llvm_dims_of(e, mask, &sm)) return lo_unsupported(e, "with a mask of unknown shape");
    if (mask) LLVMBuildMemSet(b, lo_buf(e, mask), LLVMConstInt(lo_i8_t(e), 1, 0), dims_nbytes(e, &sm, IR_DTYPE_BOOL), 1);
    return copy_bytes(e, ir_node_operand(g, n, 0), ir_node_result(g, n, 0));
}

static IrStatus gen_expand(LlvmEmit *e) {
    IrValueId x = ir_node_operand(e->g, e->node, 0), y = ir_node_result(e->g, e->node, 0);
    LlvmDims sx, sy;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy)) return lo_unsupported(e, "with an unknown shape");
    if (sx.rank > sy.rank) return lo_unsupported(e, "with these shapes");
    IrDType dt = lo_dtype(e, x);
    if (!lo_store_t(e, dt)) return lo_unsupported_dtype(e, dt);
    /* dims the run decides (a shape given at run time): each input dim is 1 or the result's */
    LLVMValueRef bad = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    for (uint32_t k = 0; k < sx.rank; k++) {
        LLVMValueRef xd = sx.dim[k], yd = sy.dim[sy.rank - sx.rank + k];
        if (LLVMIsAConstantInt(xd) && LLVMIsAConstantInt(yd)) continue;
        LLVMValueRef ok = LLVMBuildOr(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, xd, lo_i64(e, 1), ""),
                                      LLVMBuildICmp(e->b, LLVMIntEQ, xd, yd, ""), "");
        bad = LLVMBuildOr(e->b, bad, LLVMBuildNot(e->b, ok, ""), "");
    }
    /* ... and so is each entry of a shape read at run time */
    IrValueId vs = ir_node_num_operands(e->g, e->node) > 1 ? ir_node_operand(e->g, e->node, 1) : 0;
    LlvmDims ss;
    IrDType st_dt = vs ? lo_dtype(e, vs) : IR_DTYPE_NONE;
    int64_t cvals[IR_MAX_RANK];
    uint32_t n_c;
    if (!llvm_dims_static(&sy) && vs && !lower_const_ints(e->g, vs, cvals, &n_c, IR_MAX_RANK) && (st_dt == IR_DTYPE_I64 || st_dt == IR_DTYPE_I32) &&
        llvm_dims_of(e, vs, &ss) && ss.rank == 1 && ss.cd[0] >= 0 && ss.cd[0] <= sy.rank) {
        for (int64_t j = 0; j < ss.cd[0]; j++) {
            LLVMValueRef v = lo_load_int(e, st_dt, lo_buf(e, vs), lo_i64(e, j)), yd = sy.dim[sy.rank - ss.cd[0] + j];
            LLVMValueRef ok = LLVMBuildOr(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, v, lo_i64(e, 1), ""),
                                          LLVMBuildICmp(e->b, LLVMIntEQ, v, yd, ""), "");
            bad = LLVMBuildOr(e->b, bad, LLVMBuildNot(e->b, ok, ""), "");
        }
    }
    LLVMValueRef st[2][IR_MAX_RANK];
    llvm_dims_strides(e, &sy, st[0]);
    llvm_dims_bcast_strides(e, &sx, &sy, st[1]);
    LlvmDims run = sy; /* nothing is copied from dims that do not broadcast */
    if (!LLVMIsAConstantInt(bad) || LLVMConstIntGetZExtValue(bad)) {
        lo_fail_if(e, bad, "Expand: the input's dims do not broadcast to the shape");
        if (run.rank) run.dim[0] = LLVMBuildSelect(e->b, bad, lo_i64(e, 0), run.dim[0], ""), run.cd[0] = -1;
    }
    Copy c = {dt, lo_buf(e, y), lo_buf(e, x)};
    llvm_nest(e, &run, 2, st, NULL, copy_body, &c);
    return IR_OK;
}

/* Tile: a nest over (repeat_k, d_k) pairs (pairs whose repeat is the constant 1 have no repeat
 * loop); out index of dim k is rep * d_k + i. */
static IrStatus gen_tile(LlvmEmit *e) {
    IrValueId x = ir_node_operand(e->g, e->node, 0), y = ir_node_result(e->g, e->node, 0);
    LlvmDims sx, sy, nd = {.rank = 0};
    uint32_t nrep;
    int64_t rep[IR_MAX_RANK];
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy)) return lo_unsupported(e, "with an unknown shape");
    uint32_t r = sx.rank;
    if (sy.rank != r) return lo_unsupported(e, "with these shapes");
    LLVMBuilderRef b = e->b;
    LLVMValueRef reps[IR_MAX_RANK], zero = lo_i64(e, 0), bad = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    if (lower_const_ints(e->g, ir_node_operand(e->g, e->node, 1), rep, &nrep, IR_MAX_RANK) && nrep == r) {
        for (uint32_t k = 0; k < r; k++) reps[k] = lo_i64(e, rep[k]);
    } else { /* repeats as data: the result's shape says them */
        for (uint32_t k = 0; k < r; k++) {
            LLVMValueRef d0 = LLVMBuildICmp(b, LLVMIntEQ, sx.dim[k], zero, "");
            LLVMValueRef q = LLVMBuildSDiv(b, sy.dim[k], LLVMBuildSelect(b, d0, lo_i64(e, 1), sx.dim[k], ""), "");
            LLVMValueRef rem = LLVMBuildSub(b, sy.dim[k], LLVMBuildMul(b, q, sx.dim[k], ""), "");
            bad = LLVMBuildOr(b, bad, LLVMBuildICmp(b, LLVMIntNE, LLVMBuildSelect(b, d0, sy.dim[k], rem, ""), zero, ""), "");
            reps[k] = LLVMBuildSelect(b, d0, zero, q, "");
        }
    }
    LLVMValueRef stx[IR_MAX_RANK], sty[IR_MAX_RANK], st[2][IR_MAX_RANK];
    llvm_dims_strides(e, &sx, stx);
    llvm_dims_strides(e, &sy, sty);
    for (uint32_t k = 0; k < r; k++) {
        bool one = LLVMIsAConstantInt(reps[k]) && LLVMConstIntGetSExtValue(reps[k]) == 1;
        if (nd.rank + (one ? 1 : 2) > IR_MAX_RANK) return lo_unsupported(e, "of this rank");
        if (!one) {
            nd.dim[nd.rank] = reps[k];
            nd.cd[nd.rank] = LLVMIsAConstantInt(reps[k]) ? LLVMConstIntGetSExtValue(reps[k]) : -1;
            nd.ex[nd.rank] = 0;
            st[0][nd.rank] = LLVMBuildMul(b, sx.dim[k], sty[k], ""), st[1][nd.rank] = NULL;
            nd.rank++;
        }
        nd.dim[nd.rank] = sx.dim[k], nd.cd[nd.rank] = sx.cd[k], nd.ex[nd.rank] = sx.ex[k];
        st[0][nd.rank] = sty[k], st[1][nd.rank] = stx[k];
        nd.rank++;
    }
    Copy c = {lo_dtype(e, x), lo_buf(e, y), lo_buf(e, x)};
    if (!lo_store_t(e, c.dt)) return lo_unsupported_dtype(e, c.dt);
    bool refuse;
    LLVMBasicBlockRef after = lo_run_guard(e, bad, "Tile: the result's dims are not multiples of the input's", &refuse);
    if (refuse) return lo_unsupported(e, "with these shapes");
    llvm_nest(e, &nd, 2, st, NULL, copy_body, &c);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* Split: each result is the input's slab along the axis at a running offset (the results'
 * sizes along it, constants or evaluated at run time). */
static IrStatus gen_split(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrValueId x = ir_node_operand(g, e->node, 0);
    LlvmDims sx, sy;
    if (!llvm_dims_of(e, x, &sx)) return lo_unsupported(e, "with an unknown shape");
    bool found;
    int64_t axis = llvm_axis(ir_node_attr_int(g, e->node, "axis", &found), sx.rank);
    if (axis < 0) return lo_unsupported(e, "with this axis");
    IrDType dt = lo_dtype(e, x);
    if (!lo_store_t(e, dt)) return lo_unsupported_dtype(e, dt);
    LLVMValueRef st[2][IR_MAX_RANK], pos = lo_i64(e, 0), src = lo_buf(e, x);
    llvm_dims_strides(e, &sx, st[1]);
    for (uint32_t i = 0; i < ir_node_num_results(g, e->node); i++) {
        IrValueId y = ir_node_result(g, e->node, i);
        if (!y) continue;
        if (!llvm_dims_of(e, y, &sy) || sy.rank != sx.rank) return lo_unsupported(e, "with these shapes");
        llvm_dims_strides(e, &sy, st[0]);
        LLVMValueRef base[2] = {lo_i64(e, 0), LLVMBuildNSWMul(e->b, pos, st[1][axis], "")};
        Copy c = {dt, lo_buf(e, y), src};
        llvm_nest(e, &sy, 2, st, base, copy_body, &c);
        pos = LLVMBuildNSWAdd(e->b, pos, sy.dim[axis], "");
    }
    return IR_OK;
}

/* ConstantOfShape: the value attribute (f32 0 without one) stored into every element. With
 * static shapes the table binds the result to data made once (CPU_ONCE): this serves the
 * shapes known at run time only. */
typedef struct Fill {
    LLVMValueRef y, v;
    LLVMTypeRef t;
} Fill;

static void fill_const_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Fill *f = user;
    LLVMBuildStore(e->b, f->v, lo_gep(e, f->t, f->y, o[0]));
}

static IrStatus gen_constant_of_shape(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId y = ir_node_result(g, n, 0);
    IrDType dt = lower_value_dtype(g, y);
    size_t es = ir_dtype_size(dt);
    Fill f = {.t = lo_store_t(e, dt)};
    LlvmDims sy;
    if (!f.t || es > 8) return lo_unsupported_dtype(e, dt);
    if (!llvm_dims_of(e, y, &sy)) return lo_unsupported(e, "with an unknown shape");
    uint64_t bits = 0;
    IrAttrValue av;
    if (ir_node_attr(g, n, "value", &av) && av.kind == IR_ATTR_TENSOR) {
        if (ir_const_nbytes(g, av.tensor) != es) return lo_unsupported(e, "with this value");
        memcpy(&bits, ir_const_data(g, av.tensor), es); /* little-endian: the low bytes */
    }
    f.y = lo_buf(e, y);
    f.v = LLVMConstBitCast(LLVMConstInt(LLVMIntTypeInContext(e->ctx, (unsigned)(8 * es)), bits, 0), f.t);
    LlvmDims flat;
    flat_dims(llvm_dims_prod(e, &sy, 0, sy.rank), &flat);
    LLVMValueRef st[1][IR_MAX_RANK] = {{lo_i64(e, 1)}};
    llvm_nest(e, &flat, 1, st, NULL, fill_const_body, &f);
    return IR_OK;
}

/* ---- index-computing kernels (Pad, Trilu, GatherElements) --------------------------------- */

typedef struct Pad {
    IrDType dt;
    LLVMValueRef dst, src, fill;
    uint32_t r;
    int mode; /* 0 constant, 1 edge, 2 reflect, 3 wrap */
    LLVMValueRef d[IR_MAX_RANK], sx[IR_MAX_RANK], before[IR_MAX_RANK]; /* pads given as data: loaded */
} Pad;

static void pad_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Pad *p = user;
    LLVMBuilderRef b = e->b;
    LLVMValueRef valid = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 1, 0), off = lo_i64(e, 0);
    for (uint32_t k = 0; k < p->r; k++) {
        LLVMValueRef c = LLVMBuildSub(b, idx[k], p->before[k], ""), n = p->d[k];
        LLVMValueRef zero = lo_i64(e, 0), last = LLVMBuildSub(b, n, lo_i64(e, 1), "");
        switch (p->mode) {
        case 0:
            valid = LLVMBuildAnd(b, valid, LLVMBuildICmp(b, LLVMIntULT, c, n, ""), "");
            c = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, c, n, ""), c, zero, "");
            break;
        case 1:
            c = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, c, zero, ""), zero, c, "");
            c = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, c, last, ""), last, c, "");
            break;
        case 2: {
            /* reflect about the edges (period 2(d-1)), then fold into range; a dim of 1 reads 0 */
            LLVMValueRef per = LLVMBuildMul(b, last, lo_i64(e, 2), "");
            LLVMValueRef none = LLVMBuildICmp(b, LLVMIntSLE, per, zero, "");
            LLVMValueRef m = LLVMBuildSRem(b, c, LLVMBuildSelect(b, none, lo_i64(e, 1), per, ""), "");
            m = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, m, zero, ""), LLVMBuildAdd(b, m, per, ""), m, "");
            c = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, m, last, ""), LLVMBuildSub(b, per, m, ""), m, "");
            c = LLVMBuildSelect(b, none, zero, c, "");
            break;
        }
        default: {
            LLVMValueRef m = LLVMBuildSRem(b, c, n, "");
            c = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, m, zero, ""), LLVMBuildAdd(b, m, n, ""), m, "");
            break;
        }
        }
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, c, p->sx[k], ""), "");
    }
    LLVMTypeRef t = lo_store_t(e, p->dt);
    LLVMValueRef v = LLVMBuildLoad2(b, t, lo_gep(e, t, p->src, off), "");
    if (p->mode == 0) v = LLVMBuildSelect(b, valid, v, p->fill, "");
    LLVMBuildStore(b, v, lo_gep(e, t, p->dst, o[0]));
}

static void pad_fill_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Pad *p = user;
    LLVMTypeRef t = lo_store_t(e, p->dt);
    LLVMBuildStore(e->b, p->fill, lo_gep(e, t, p->dst, o[0]));
}

static IrStatus gen_pad(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    Pad p = {.dt = lo_dtype(e, x)};
    LlvmDims sx, sy;
    uint32_t np, na = 0;
    int64_t pads[2 * IR_MAX_RANK], axes[IR_MAX_RANK];
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy)) return lo_unsupported(e, "with an unknown shape");
    p.r = sx.rank;
    if (!lo_store_t(e, p.dt)) return lo_unsupported_dtype(e, p.dt);
    IrValueId vp = ir_node_operand(g, n, 1);
    bool rt_pads = !lower_const_ints(g, vp, pads, &np, 2 * IR_MAX_RANK);
    if (rt_pads) { /* pads as data (the result's shape known): the leading ones read per run */
        uint32_t rp;
        int64_t dp[IR_MAX_RANK];
        if (lo_dtype(e, vp) != IR_DTYPE_I64 || !lower_value_shape(g, vp, &rp, dp) || rp != 1 || dp[0] > 2 * IR_MAX_RANK)
            return lo_unsupported(e, "with these pads");
        np = (uint32_t)dp[0];
    }
    IrValueId av = ir_node_num_operands(g, n) > 3 ? ir_node_operand(g, n, 3) : 0;
    if (av) {
        if (!lower_const_ints(g, av, axes, &na, IR_MAX_RANK)) return lo_unsupported(e, "with non-constant axes");
    } else {
        na = p.r;
        for (uint32_t k = 0; k < p.r; k++) axes[k] = k;
    }
    if (np != 2 * na || sy.rank != p.r) return lo_unsupported(e, "with these pads");
    for (uint32_t k = 0; k < p.r; k++) p.before[k] = lo_i64(e, 0);
    for (uint32_t i = 0; i < na; i++) {
        int64_t a = llvm_axis(axes[i], p.r);
        if (a < 0) return lo_unsupported(e, "with these axes");
        p.before[a] = rt_pads ? lo_load(e, IR_DTYPE_I64, lo_buf(e, vp), lo_i64(e, i)) : lo_i64(e, pads[i]);
    }
    bool found;
    const char *mode = ir_node_attr_string(g, n, "mode", &found);
    if (!mode || strcmp(mode, "constant") == 0) p.mode = 0;
    else if (strcmp(mode, "edge") == 0) p.mode = 1;
    else if (strcmp(mode, "reflect") == 0) p.mode = 2;
    else if (strcmp(mode, "wrap") == 0) p.mode = 3;
    else return lo_unsupported(e, "with this mode");
    LLVMBuilderRef b = e->b;
    LLVMValueRef bad = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    for (uint32_t k = 0; k < p.r && p.mode != 0; k++) /* edge, reflect, wrap read the dim: not empty */
        bad = LLVMBuildOr(b, bad, LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, sx.dim[k], lo_i64(e, 0), ""),
                                               LLVMBuildICmp(b, LLVMIntNE, sy.dim[k], lo_i64(e, 0), ""), ""), "");
    bool refuse;
    LLVMBasicBlockRef after = lo_run_guard(e, bad, "Pad: an empty dim padded in a mode that reads it", &refuse);
    if (refuse) return lo_unsupported(e, "of an empty dim in this mode");
    for (uint32_t k = 0; k < p.r; k++) p.d[k] = sx.dim[k];
    llvm_dims_strides(e, &sx, p.sx);
    LLVMTypeRef t = lo_store_t(e, p.dt);
    p.fill = LLVMConstNull(t);
    IrValueId cv = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    LlvmDims sc;
    if (cv && p.mode == 0 && llvm_dims_of(e, cv, &sc)) {
        LLVMValueRef nc = llvm_dims_prod(e, &sc, 0, sc.rank), cb = lo_buf(e, cv);
        /* an empty constant_value operand pads with 0: read only when there is one */
        LLVMValueRef has = LLVMBuildICmp(b, LLVMIntSGE, nc, lo_i64(e, 1), "");
        LLVMValueRef at = LLVMBuildSelect(b, has, cb, lo_var(e, t, p.fill), "");
        p.fill = LLVMBuildLoad2(b, t, at, "");
    }
    p.dst = lo_buf(e, y);
    p.src = lo_buf(e, x);
    LLVMValueRef st[1][IR_MAX_RANK];
    llvm_dims_strides(e, &sy, st[0]);
    /* the padding nest first (it takes the kernel's parts); with no source element (constant
     * mode only) the fill value everywhere */
    LLVMValueRef nx = llvm_dims_prod(e, &sx, 0, p.r), empty = LLVMBuildICmp(b, LLVMIntEQ, nx, lo_i64(e, 0), "");
    bool always = LLVMIsAConstantInt(empty) && LLVMConstIntGetZExtValue(empty);
    bool never = LLVMIsAConstantInt(empty) && !LLVMConstIntGetZExtValue(empty);
    if (!always) {
        LLVMBasicBlockRef some = never ? NULL : lo_if_begin(e, LLVMBuildNot(b, empty, ""));
        llvm_nest(e, &sy, 1, st, NULL, pad_body, &p);
        if (some) lo_if_end(e, some);
    }
    if (!never) {
        LLVMBasicBlockRef none = always ? NULL : lo_if_begin(e, empty);
        LlvmDims flat;
        flat_dims(llvm_dims_prod(e, &sy, 0, sy.rank), &flat);
        LLVMValueRef one[1][IR_MAX_RANK] = {{lo_i64(e, 1)}};
        llvm_nest(e, &flat, 1, one, NULL, pad_fill_body, &p);
        if (none) lo_if_end(e, none);
    }
    if (after) lo_if_end(e, after);
    return IR_OK;
}

typedef struct Trilu {
    IrDType dt;
    LLVMValueRef dst, src, k; /* k: i64, a constant or read once at run time */
    uint32_t r;
    bool upper;
} Trilu;

static void trilu_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Trilu *t = user;
    LLVMBuilderRef b = e->b;
    LLVMValueRef diff = LLVMBuildSub(b, idx[t->r - 1], idx[t->r - 2], "");
    LLVMValueRef keep = LLVMBuildICmp(b, t->upper ? LLVMIntSGE : LLVMIntSLE, diff, t->k, "");
    LLVMTypeRef ty = lo_store_t(e, t->dt);
    LLVMValueRef v = LLVMBuildLoad2(b, ty, lo_gep(e, ty, t->src, o[0]), "");
    LLVMBuildStore(b, LLVMBuildSelect(b, keep, v, LLVMConstNull(ty), ""), lo_gep(e, ty, t->dst, o[0]));
}

static IrStatus gen_trilu(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrValueId x = ir_node_operand(g, e->node, 0), y = ir_node_result(g, e->node, 0);
    IrValueId kv = ir_node_num_operands(g, e->node) > 1 ? ir_node_operand(g, e->node, 1) : 0;
    Trilu t = {.dt = lo_dtype(e, x)};
    int64_t kk[1];
    uint32_t nk;
    LlvmDims s;
    if (!llvm_dims_of(e, x, &s)) return lo_unsupported(e, "with an unknown shape");
    t.r = s.rank;
    if (t.r < 2) return lo_unsupported(e, "with rank < 2");
    if (!lo_store_t(e, t.dt)) return lo_unsupported_dtype(e, t.dt);
    t.k = lo_i64(e, 0);
    if (kv && lower_const_ints(g, kv, kk, &nk, 1) && nk == 1) t.k = lo_i64(e, kk[0]);
    else if (kv) { /* k given at run time: a one-element integer tensor */
        uint32_t kr;
        int64_t kd[IR_MAX_RANK];
        lo_shape(e, kv, &kr, kd);
        IrDType kt = lo_dtype(e, kv);
        if (ir_shape_numel(kr, kd) != 1 || !(kt == IR_DTYPE_I64 || kt == IR_DTYPE_I32)) return lo_unsupported(e, "with this k");
        t.k = LLVMBuildSExt(e->b, lo_load(e, kt, lo_buf(e, kv), lo_i64(e, 0)), lo_i64_t(e), "");
    }
    bool found;
    t.upper = ir_node_attr_int(g, e->node, "upper", &found) != 0;
    t.dst = lo_buf(e, y);
    t.src = lo_buf(e, x);
    LLVMValueRef st[1][IR_MAX_RANK];
    llvm_dims_strides(e, &s, st[0]);
    /* size-1 dims have no loop but still need an index: the nest gives constant 0 for them */
    llvm_nest(e, &s, 1, st, NULL, trilu_body, &t);
    return IR_OK;
}

/* An index into a dim of n (i64 value): negative ones counted from the end, out-of-range ones
 * clamped (the kernel never leaves the buffer; the interpreter reports them). */
static LLVMValueRef clamp_index(LlvmEmit *e, LLVMValueRef i, LLVMValueRef n) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef zero = lo_i64(e, 0);
    i = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, i, zero, ""), LLVMBuildAdd(b, i, n, ""), i, "");
    i = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGE, i, n, ""), LLVMBuildSub(b, n, lo_i64(e, 1), ""), i, "");
    return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, i, zero, ""), zero, i, "");
}

/* Element `at` of an index buffer of dtype it, fixed into a dim of n as clamp_index. */
static LLVMValueRef fix_index(LlvmEmit *e, IrDType it, LLVMValueRef ind, LLVMValueRef at, LLVMValueRef n) {
    return clamp_index(e, LLVMBuildSExt(e->b, lo_load(e, it, ind, at), lo_i64_t(e), ""), n);
}

typedef struct GatherEl {
    IrDType dt, it;
    LLVMValueRef dst, src, ind, dim; /* dim: the data's length along the axis */
    uint32_t r, axis;
    LLVMValueRef sx[IR_MAX_RANK];
} GatherEl;

/* Offset in the data of the element an index at idx (the index's point) addresses. */
static LLVMValueRef gather_el_offset(LlvmEmit *e, const GatherEl *c, LLVMValueRef at, LLVMValueRef *idx) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef i = fix_index(e, c->it, c->ind, at, c->dim), off = lo_i64(e, 0);
    for (uint32_t k = 0; k < c->r; k++)
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, k == c->axis ? i : idx[k], c->sx[k], ""), "");
    return off;
}

static void gather_el_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    GatherEl *c = user;
    LLVMValueRef off = gather_el_offset(e, c, o[0], idx);
    LLVMTypeRef t = lo_store_t(e, c->dt);
    LLVMBuildStore(e->b, LLVMBuildLoad2(e->b, t, lo_gep(e, t, c->src, off), ""), lo_gep(e, t, c->dst, o[0]));
}

/* The shapes, axis and buffers shared by GatherElements and ScatterElements: data x, indices
 * ix (their shape *si, the nest's); NULL or why it is refused. */
static const char *gather_el_setup(LlvmEmit *e, IrValueId x, IrValueId ix, GatherEl *c, LlvmDims *si) {
    const IrGraph *g = e->g;
    LlvmDims sx;
    c->dt = lo_dtype(e, x), c->it = lo_dtype(e, ix);
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, ix, si)) return "with an unknown shape";
    c->r = sx.rank;
    bool found;
    int64_t axis = llvm_axis(ir_node_attr_int(g, e->node, "axis", &found), c->r);
    if (si->rank != c->r || axis < 0) return "with these shapes";
    if (c->it != IR_DTYPE_I64 && c->it != IR_DTYPE_I32) return "with non-i32/i64 indices";
    c->axis = (uint32_t)axis;
    c->dim = sx.dim[axis];
    llvm_dims_strides(e, &sx, c->sx);
    c->ind = lo_buf(e, ix);
    return NULL;
}

static IrStatus gen_gather_elements(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrValueId x = ir_node_operand(g, e->node, 0), ix = ir_node_operand(g, e->node, 1), y = ir_node_result(g, e->node, 0);
    GatherEl c;
    LlvmDims si;
    const char *why = gather_el_setup(e, x, ix, &c, &si);
    if (why) return lo_unsupported(e, why);
    if (!lo_store_t(e, c.dt)) return lo_unsupported_dtype(e, c.dt);
    bool refuse;
    LLVMBasicBlockRef after = guard_empty_dim(e, c.dim, llvm_dims_prod(e, &si, 0, si.rank),
                                              "GatherElements: an index into an empty axis", &refuse);
    if (refuse) return lo_unsupported(e, "on an empty axis");
    c.dst = lo_buf(e, y);
    c.src = lo_buf(e, x);
    LLVMValueRef st[1][IR_MAX_RANK];
    llvm_dims_strides(e, &si, st[0]);
    llvm_nest(e, &si, 1, st, NULL, gather_el_body, &c);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* ScatterElements: the data copied, then each update stored (or combined: add, mul, max, min)
 * at its index along the axis; out-of-range indices are clamped. */
typedef struct ScatterEl {
    GatherEl g; /* dst = the output, src = the updates, ind = the indices */
    int red;    /* 0 none, 1 add, 2 mul, 3 max, 4 min */
} ScatterEl;

/* dst[off] = u, or combined with what is there (red: 1 add, 2 mul, 3 max, 4 min; maxnum/minnum
 * on floats, as the interpreter's fmax/fmin). */
static void scatter_store(LlvmEmit *e, IrDType dt, int red, LLVMValueRef dst, LLVMValueRef off, LLVMValueRef u) {
    LLVMBuilderRef b = e->b;
    if (red) {
        LLVMValueRef x = lo_load(e, dt, dst, off);
        bool fl = lo_is_float(dt), uns = dt == IR_DTYPE_U8 || dt == IR_DTYPE_U16 || dt == IR_DTYPE_U32 || dt == IR_DTYPE_U64;
        LLVMValueRef args[2] = {x, u};
        switch (red) {
        case 1: u = fl ? LLVMBuildFAdd(b, x, u, "") : LLVMBuildAdd(b, x, u, ""); break;
        case 2: u = fl ? LLVMBuildFMul(b, x, u, "") : LLVMBuildMul(b, x, u, ""); break;
        default:
            if (fl) u = lo_intrinsic(e, red == 3 ? "llvm.maxnum" : "llvm.minnum", LLVMTypeOf(x), args, 2);
            else {
                LLVMIntPredicate p = red == 3 ? (uns ? LLVMIntUGT : LLVMIntSGT) : (uns ? LLVMIntULT : LLVMIntSLT);
                u = LLVMBuildSelect(b, LLVMBuildICmp(b, p, u, x, ""), u, x, "");
            }
        }
    }
    lo_store(e, dt, dst, off, u);
}

/* The reduction attribute of a scatter (0 none .. 4 min, -1 unknown). */
static int scatter_reduction(const IrGraph *g, IrNodeId n) {
    bool found;
    const char *red = ir_node_attr_string(g, n, "reduction", &found);
    return !red || !strcmp(red, "none") ? 0 : !strcmp(red, "add") ? 1 : !strcmp(red, "mul") ? 2 : !strcmp(red, "max") ? 3
         : !strcmp(red, "min") ? 4 : -1;
}

static void scatter_el_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    ScatterEl *sc = user;
    GatherEl *c = &sc->g;
    LLVMValueRef off = gather_el_offset(e, c, o[0], idx);
    scatter_store(e, c->dt, sc->red, c->dst, off, lo_load(e, c->dt, c->src, o[0]));
}

static IrStatus gen_scatter_elements(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), ix = ir_node_operand(g, n, 1), up = ir_node_operand(g, n, 2);
    IrValueId y = ir_node_result(g, n, 0);
    ScatterEl c = {0};
    LlvmDims si, sx, su;
    const char *why = gather_el_setup(e, x, ix, &c.g, &si);
    if (why) return lo_unsupported(e, why);
    if (!llvm_dims_of(e, up, &su) || !llvm_dims_of(e, x, &sx) || su.rank != si.rank) return lo_unsupported(e, "with these shapes");
    for (uint32_t k = 0; k < si.rank; k++) /* what the graph shows wrong; the interpreter checks the rest */
        if ((si.cd[k] >= 0 && su.cd[k] >= 0 && si.cd[k] != su.cd[k]) ||
            (k != c.g.axis && si.cd[k] >= 0 && sx.cd[k] >= 0 && si.cd[k] > sx.cd[k]))
            return lo_unsupported(e, "with these shapes");
    if (!lo_store_t(e, c.g.dt) || lo_dtype(e, up) != c.g.dt) return lo_unsupported_dtype(e, c.g.dt);
    c.red = scatter_reduction(g, n);
    if (c.red < 0 || (c.red && c.g.dt == IR_DTYPE_BOOL)) return lo_unsupported(e, "with this reduction");
    c.g.dst = lo_buf(e, y);
    c.g.src = lo_buf(e, up);
    LLVMBuildMemCpy(e->b, c.g.dst, 1, lo_buf(e, x), 1, dims_nbytes(e, &sx, c.g.dt));
    bool refuse;
    LLVMBasicBlockRef after = guard_empty_dim(e, c.g.dim, llvm_dims_prod(e, &si, 0, si.rank),
                                              "ScatterElements: an index into an empty axis", &refuse);
    if (refuse) return lo_unsupported(e, "on an empty axis");
    LLVMValueRef st[1][IR_MAX_RANK];
    llvm_dims_strides(e, &si, st[0]);
    llvm_nest(e, &si, 1, st, NULL, scatter_el_body, &c);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* GatherND / ScatterND: index tuples of length k (the indices' last dim) address slices of
 * data; GatherND copies each slice out (batch_dims leading dims shared with the indices),
 * ScatterND copies data, then stores (or combines) each update slice at its tuple. */
typedef struct Nd {
    IrDType dt, it;
    LLVMValueRef data, ind, out, upd, per_batch, slice, batch_stride, dims[IR_MAX_RANK], xs[IR_MAX_RANK];
    int64_t k, bd;
    int red;
    bool scatter;
} Nd;

static void nd_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Nd *c = user;
    LLVMBuilderRef b = e->b;
    /* o[0]: the tuple's number t; its batch is t / per_batch */
    LLVMValueRef t = o[0];
    LLVMValueRef off = c->bd == 0 ? lo_i64(e, 0) : LLVMBuildMul(b, LLVMBuildSDiv(b, t, c->per_batch, ""), c->batch_stride, "");
    for (int64_t q = 0; q < c->k; q++) {
        LLVMValueRef at = LLVMBuildAdd(b, LLVMBuildMul(b, t, lo_i64(e, c->k), ""), lo_i64(e, q), "");
        LLVMValueRef i = fix_index(e, c->it, c->ind, at, c->dims[c->bd + q]);
        off = LLVMBuildAdd(b, off, LLVMBuildMul(b, i, c->xs[c->bd + q], ""), "");
    }
    LLVMValueRef rest = LLVMBuildMul(b, t, c->slice, "");
    if (!c->scatter) {
        LLVMValueRef es = lo_i64(e, (int64_t)ir_dtype_size(c->dt));
        LLVMTypeRef i8 = lo_i8_t(e);
        LLVMValueRef dst = lo_gep(e, i8, c->out, LLVMBuildMul(b, rest, es, ""));
        LLVMValueRef src = lo_gep(e, i8, c->data, LLVMBuildMul(b, off, es, ""));
        LLVMBuildMemCpy(b, dst, 1, src, 1, LLVMBuildMul(b, c->slice, es, ""));
        return;
    }
    LoLoop l;
    llvm_loop_begin_v(b, e->fn, &l, c->slice);
    scatter_store(e, c->dt, c->red, c->out, LLVMBuildAdd(b, off, l.iv, ""),
                  lo_load(e, c->dt, c->upd, LLVMBuildAdd(b, rest, l.iv, "")));
    lo_loop_end(e, &l);
}

/* GatherND / ScatterND on shapes static or known at run time; the tuple length k is the
 * indices' last dim, or follows from the ranks when that dim is a symbol. */
static IrStatus gen_nd(LlvmEmit *e, bool scatter) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), ix = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId up = scatter ? ir_node_operand(g, n, 2) : 0;
    Nd c = {.dt = lo_dtype(e, x), .it = lo_dtype(e, ix), .scatter = scatter};
    LlvmDims sx, si, sr; /* data, indices, and the result (GatherND) or updates (ScatterND) */
    bool found;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, ix, &si) || !llvm_dims_of(e, scatter ? up : y, &sr))
        return lo_unsupported(e, "with an unknown shape");
    uint32_t r = sx.rank, ri = si.rank;
    if (c.it != IR_DTYPE_I64 && c.it != IR_DTYPE_I32) return lo_unsupported(e, "with non-i32/i64 indices");
    if (!lo_store_t(e, c.dt) || ri < 1) return lo_unsupported(e, "on these tensors");
    c.bd = scatter ? 0 : ir_node_attr_int(g, n, "batch_dims", &found);
    /* result rank (ri - 1) + (r - bd - k); updates rank (ri - 1) + (r - k) */
    c.k = si.cd[ri - 1] >= 0 ? si.cd[ri - 1] : (int64_t)ri - 1 + (int64_t)r - c.bd - (int64_t)sr.rank;
    if (c.bd < 0 || c.bd >= (int64_t)ri || c.k < 0 || c.bd + c.k > (int64_t)r ||
        (int64_t)sr.rank != (int64_t)ri - 1 + (int64_t)r - c.bd - c.k)
        return lo_unsupported(e, "with these shapes");
    LLVMBuilderRef b = e->b;
    LLVMValueRef tuples = llvm_dims_prod(e, &si, 0, ri - 1), batches = llvm_dims_prod(e, &sx, 0, (uint32_t)c.bd);
    /* no batch: per_batch is not read (no tuple runs when batches is 0) */
    c.per_batch = LLVMBuildSDiv(b, tuples, LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, batches, lo_i64(e, 0), ""),
                                                            lo_i64(e, 1), batches, ""), "");
    c.slice = llvm_dims_prod(e, &sx, (uint32_t)(c.bd + c.k), r);
    llvm_dims_strides(e, &sx, c.xs);
    for (uint32_t k = 0; k < r; k++) c.dims[k] = sx.dim[k];
    c.batch_stride = c.bd > 0 ? c.xs[c.bd - 1] : lo_i64(e, 0);
    c.data = lo_buf(e, x);
    c.ind = lo_buf(e, ix);
    c.out = lo_buf(e, y);
    if (scatter) {
        c.red = scatter_reduction(g, n);
        if (c.red < 0 || (c.red && c.dt == IR_DTYPE_BOOL) || lo_dtype(e, up) != c.dt) return lo_unsupported(e, "with this reduction");
        c.upd = lo_buf(e, up);
        LLVMBuildMemCpy(b, c.out, 1, c.data, 1, dims_nbytes(e, &sx, c.dt));
    }
    bool refuse;
    LLVMBasicBlockRef after = guard_empty_dim(e, llvm_dims_prod(e, &sx, (uint32_t)c.bd, (uint32_t)(c.bd + c.k)), tuples,
                                              scatter ? "ScatterND: an index into an empty dim" : "GatherND: an index into an empty dim", &refuse);
    if (refuse) return lo_unsupported(e, "on an empty dim");
    LlvmDims flat;
    flat_dims(tuples, &flat);
    LLVMValueRef st[1][IR_MAX_RANK] = {{lo_i64(e, 1)}};
    llvm_nest(e, &flat, 1, st, NULL, nd_body, &c);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* QuantizeLinear / DequantizeLinear with integer quantized types (the FP8 forms are refused):
 * one scale (and zero point) per tensor or per channel of `axis`, in f32 as the interpreter:
 * q = x / scale rounded half to even, plus the zero point, saturated; y = (q - zp) * scale. */
typedef struct Qdq {
    IrDType xdt, ydt, sdt, zdt;
    LLVMValueRef x, y, scale, zp, inner, ch; /* ch: channels of the scale (constant 1 per tensor) */
    double lo, hi;
    bool quant;
} Qdq;


static void qdq_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Qdq *c = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f32 = lo_f32_t(e), f64 = lo_f64_t(e);
    bool one = LLVMIsAConstantInt(c->ch) && LLVMConstIntGetSExtValue(c->ch) == 1;
    LLVMValueRef ci = one ? lo_i64(e, 0) : LLVMBuildSRem(b, LLVMBuildSDiv(b, o[0], c->inner, ""), c->ch, "");
    LLVMValueRef sc = lo_load(e, c->sdt, c->scale, ci);
    if (LLVMTypeOf(sc) != f32) sc = LLVMBuildFPTrunc(b, sc, f32, "");
    LLVMValueRef z = NULL;
    if (c->zp) {
        LLVMValueRef zi = lo_load(e, c->zdt, c->zp, ci);
        bool uns = c->zdt == IR_DTYPE_U8 || c->zdt == IR_DTYPE_U16 || c->zdt == IR_DTYPE_U32;
        z = uns ? LLVMBuildUIToFP(b, zi, f64, "") : LLVMBuildSIToFP(b, zi, f64, "");
    }
    if (c->quant) {
        LLVMValueRef xv = lo_load(e, c->xdt, c->x, o[0]);
        if (LLVMTypeOf(xv) != f32) xv = LLVMBuildFPTrunc(b, xv, f32, "");
        LLVMValueRef q = LLVMBuildFPExt(b, LLVMBuildFDiv(b, xv, sc, ""), f64, "");
        LLVMValueRef r = lo_intrinsic(e, "llvm.rint", f64, &q, 1); /* half to even */
        if (z) r = LLVMBuildFAdd(b, r, z, "");
        LLVMValueRef lo = LLVMConstReal(f64, c->lo), hi = LLVMConstReal(f64, c->hi);
        r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUGE, r, lo, ""), r, lo, ""); /* NaN -> lo */
        r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, r, hi, ""), hi, r, "");
        LLVMValueRef iv = LLVMBuildFPToSI(b, r, lo_i64_t(e), "");
        lo_store(e, c->ydt, c->y, o[0], LLVMBuildTrunc(b, iv, lo_comp_t(e, c->ydt), ""));
        return;
    }
    LLVMValueRef xi = lo_load(e, c->xdt, c->x, o[0]);
    bool uns = c->xdt == IR_DTYPE_U8 || c->xdt == IR_DTYPE_U16 || c->xdt == IR_DTYPE_U32;
    LLVMValueRef v = uns ? LLVMBuildUIToFP(b, xi, f32, "") : LLVMBuildSIToFP(b, xi, f32, "");
    if (z) v = LLVMBuildFSub(b, v, LLVMBuildFPTrunc(b, z, f32, ""), "");
    LLVMValueRef y = LLVMBuildFMul(b, v, sc, "");
    if (LLVMTypeOf(y) != lo_comp_t(e, c->ydt)) y = LLVMBuildFPExt(b, y, lo_comp_t(e, c->ydt), "");
    lo_store(e, c->ydt, c->y, o[0], y);
}

/* Quantize/DequantizeLinear on shapes static or known at run time: a scale whose length is a
 * symbol is per axis (1 at run time reads as per tensor); what the graph cannot show (its
 * length against the axis, the zero point's against it) is checked when the kernel runs. */
static IrStatus gen_qdq(LlvmEmit *e, bool quant) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), vs = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrValueId vz = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    Qdq c = {.xdt = lo_dtype(e, x), .ydt = lo_dtype(e, y), .sdt = lo_dtype(e, vs), .quant = quant};
    LlvmDims sx, ss, sz;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, vs, &ss) || (vz && !llvm_dims_of(e, vz, &sz)))
        return lo_unsupported(e, "with an unknown shape");
    LLVMBuilderRef b = e->b;
    LLVMValueRef ns = llvm_dims_prod(e, &ss, 0, ss.rank), bad = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    if (vz) {
        LLVMValueRef nz = llvm_dims_prod(e, &sz, 0, sz.rank);
        if (LLVMIsAConstantInt(nz) && LLVMConstIntGetSExtValue(nz) == 0) vz = 0;
        else {
            LLVMValueRef ne = LLVMBuildICmp(b, LLVMIntNE, nz, ns, "");
            if (LLVMIsAConstantInt(ne) && LLVMConstIntGetZExtValue(ne)) return lo_unsupported(e, "with a zero point unlike its scale");
            bad = LLVMBuildOr(b, bad, ne, "");
        }
    }
    c.zdt = vz ? lo_dtype(e, vz) : IR_DTYPE_NONE;
    IrDType qdt = quant ? c.ydt : c.xdt; /* the quantized side: its range saturates */
    if (!ir_dtype_quant_range(qdt, &c.lo, &c.hi) || (vz && c.zdt != qdt))
        return lo_unsupported(e, "with this quantized type (integer types only)");
    if ((c.sdt != IR_DTYPE_F32 && c.sdt != IR_DTYPE_F16 && c.sdt != IR_DTYPE_BF16) ||
        (quant && c.xdt != IR_DTYPE_F32 && c.xdt != IR_DTYPE_F16 && c.xdt != IR_DTYPE_BF16))
        return lo_unsupported(e, "with this scale or input dtype");
    uint32_t r = sx.rank;
    c.inner = lo_i64(e, 1), c.ch = lo_i64(e, 1);
    if (!LLVMIsAConstantInt(ns) || LLVMConstIntGetSExtValue(ns) != 1) {
        bool found;
        int64_t axis = llvm_axis(ir_node_attr_int(g, n, "axis", &found), r);
        if (!found) axis = r > 1 ? 1 : 0;
        if (ss.rank != 1 || axis < 0 || axis >= (int64_t)r) return lo_unsupported(e, "with this per-axis scale");
        LLVMValueRef ne = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, sx.dim[axis], ns, ""),
                                       LLVMBuildICmp(b, LLVMIntNE, ns, lo_i64(e, 1), ""), "");
        if (LLVMIsAConstantInt(ne) && LLVMConstIntGetZExtValue(ne)) return lo_unsupported(e, "with this per-axis scale");
        bad = LLVMBuildOr(b, bad, ne, "");
        c.inner = llvm_dims_prod(e, &sx, (uint32_t)axis + 1, r);
        c.ch = ns;
    }
    bool refuse;
    LLVMBasicBlockRef after = lo_run_guard(e, bad, quant ? "QuantizeLinear: the scale or zero point does not match the input"
                                                      : "DequantizeLinear: the scale or zero point does not match the input", &refuse);
    if (refuse) return lo_unsupported(e, "with these shapes");
    c.x = lo_buf(e, x);
    c.y = lo_buf(e, y);
    c.scale = lo_buf(e, vs);
    c.zp = vz ? lo_buf(e, vz) : NULL;
    LlvmDims flat;
    flat_dims(llvm_dims_prod(e, &sx, 0, r), &flat);
    LLVMValueRef st[1][IR_MAX_RANK] = {{lo_i64(e, 1)}};
    llvm_nest(e, &flat, 1, st, NULL, qdq_body, &c);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* DynamicQuantizeLinear (f32 -> u8): the range over the whole input (0 included), scale =
 * range / 255, zero point = round(-min / scale) saturated, then y as QuantizeLinear; the float
 * operations in the interpreter's order. */
static IrStatus gen_dynamic_quantize(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0);
    if (lo_dtype(e, x) != IR_DTYPE_F32) return lo_unsupported(e, "on non-f32 input");
    LlvmDims sx;
    if (!llvm_dims_of(e, x, &sx)) return lo_unsupported(e, "with an unknown shape");
    LLVMValueRef total = llvm_dims_prod(e, &sx, 0, sx.rank);
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f32 = lo_f32_t(e), f64 = lo_f64_t(e), i8 = lo_i8_t(e);
    LLVMValueRef xb = lo_buf(e, x), zero = LLVMConstReal(f32, 0.0);
    LLVMValueRef mn = lo_var(e, f32, zero), mx = lo_var(e, f32, zero);
    LoLoop l;
    llvm_loop_begin_v(b, e->fn, &l, total);
    LLVMValueRef v = lo_load(e, IR_DTYPE_F32, xb, l.iv), a = LLVMBuildLoad2(b, f32, mn, ""), c = LLVMBuildLoad2(b, f32, mx, "");
    LLVMBuildStore(b, LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, v, a, ""), v, a, ""), mn);
    LLVMBuildStore(b, LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, v, c, ""), v, c, ""), mx);
    lo_loop_end(e, &l);
    LLVMValueRef lo = LLVMBuildLoad2(b, f32, mn, ""), hi = LLVMBuildLoad2(b, f32, mx, "");
    LLVMValueRef scale = LLVMBuildFDiv(b, LLVMBuildFSub(b, hi, lo, ""), LLVMConstReal(f32, 255.0), "");
    LLVMValueRef nz = LLVMBuildFCmp(b, LLVMRealUNE, scale, zero, "");
    LLVMValueRef izp = LLVMBuildSelect(b, nz, LLVMBuildFSub(b, zero, LLVMBuildFDiv(b, lo, scale, ""), ""), zero, "");
    izp = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, izp, zero, ""), zero, izp, "");
    izp = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, izp, LLVMConstReal(f32, 255.0), ""), LLVMConstReal(f32, 255.0), izp, "");
    LLVMValueRef izd = LLVMBuildFPExt(b, izp, f64, "");
    LLVMValueRef zpd = lo_intrinsic(e, "llvm.rint", f64, &izd, 1);
    IrValueId ys = ir_node_result(g, n, 1), yz = ir_node_result(g, n, 2), y = ir_node_result(g, n, 0);
    if (ys) LLVMBuildStore(b, scale, lo_buf(e, ys));
    if (yz) LLVMBuildStore(b, LLVMBuildTrunc(b, LLVMBuildFPToSI(b, zpd, lo_i64_t(e), ""), i8, ""), lo_buf(e, yz));
    if (!y) return IR_OK;
    LLVMValueRef yb = lo_buf(e, y);
    llvm_loop_begin_v(b, e->fn, &l, total);
    LLVMValueRef q = LLVMBuildFPExt(b, LLVMBuildFDiv(b, lo_load(e, IR_DTYPE_F32, xb, l.iv), scale, ""), f64, "");
    LLVMValueRef rq = LLVMBuildFAdd(b, lo_intrinsic(e, "llvm.rint", f64, &q, 1), zpd, "");
    rq = LLVMBuildSelect(b, nz, rq, zpd, "");
    rq = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUGE, rq, LLVMConstReal(f64, 0.0), ""), rq, LLVMConstReal(f64, 0.0), "");
    rq = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, rq, LLVMConstReal(f64, 255.0), ""), LLVMConstReal(f64, 255.0), rq, "");
    LLVMBuildStore(b, LLVMBuildTrunc(b, LLVMBuildFPToSI(b, rq, lo_i64_t(e), ""), i8, ""), lo_gep(e, i8, yb, l.iv));
    lo_loop_end(e, &l);
    return IR_OK;
}

/* ---- Einsum: every output element a sum over the other labels of the operands' product --------
 * Labels as the interpreter numbers them (letters 0..51, ellipsis dims 52.. right-aligned);
 * a label repeated in one operand walks its diagonal; dims of 1 broadcast. Floats accumulate
 * in f64 and integers in i64, as the interpreter; one loop nest over the output's labels, an
 * inner one over the summed labels. */
#define EIN_LABELS 80

typedef struct Ein {
    uint32_t n_in;
    IrDType dt;
    LLVMValueRef in[LLVM_OPS_MAX_OPS - 1], out, acc;
    LlvmDims sum;                                      /* the summed labels' sizes */
    LLVMValueRef sum_st[LLVM_OPS_MAX_OPS][IR_MAX_RANK]; /* per operand, per summed label */
} Ein;

static int ein_label(char ch) {
    if (ch >= 'a' && ch <= 'z') return ch - 'a';
    if (ch >= 'A' && ch <= 'Z') return 26 + ch - 'A';
    return -1;
}

/* Labels of the term [p, e) for an operand of `rank` (-1: the output, ell dims given). */
static bool ein_parse(const char *p, const char *e, int rank, int ell, int *lab, int *n, int *ell_out) {
    int letters = 0;
    bool has = false;
    for (const char *q = p; q < e; q++) {
        if (*q == '.') {
            if (q + 2 >= e || q[1] != '.' || q[2] != '.' || has) return false;
            has = true, q += 2;
        } else if (ein_label(*q) >= 0) letters++;
        else if (*q != ' ') return false;
    }
    int ne = rank >= 0 ? (has ? rank - letters : 0) : (has ? ell : 0);
    if (ne < 0 || (rank >= 0 && !has && letters != rank) || letters + ne > IR_MAX_RANK) return false;
    *n = 0;
    for (const char *q = p; q < e; q++) {
        if (*q == '.') {
            for (int i = 0; i < ne; i++) lab[(*n)++] = 52 + i;
            q += 2;
        } else if (ein_label(*q) >= 0) lab[(*n)++] = ein_label(*q);
    }
    if (ell_out) *ell_out = ne;
    return true;
}

static void ein_inner(LlvmEmit *e, LLVMValueRef *offs, LLVMValueRef *idx, void *user) {
    (void)idx;
    Ein *c = user;
    LLVMBuilderRef b = e->b;
    bool fl = lo_is_float(c->dt);
    LLVMTypeRef at = fl ? lo_f64_t(e) : lo_i64_t(e);
    LLVMValueRef prod = NULL;
    for (uint32_t t = 0; t < c->n_in; t++) {
        LLVMValueRef v = lo_load(e, c->dt, c->in[t], offs[t]);
        v = fl ? lo_to_f64(e, v) : LLVMBuildSExtOrBitCast(b, v, at, "");
        prod = !prod ? v : fl ? LLVMBuildFMul(b, prod, v, "") : LLVMBuildMul(b, prod, v, "");
    }
    LLVMValueRef a = LLVMBuildLoad2(b, at, c->acc, "");
    LLVMBuildStore(b, fl ? LLVMBuildFAdd(b, a, prod, "") : LLVMBuildAdd(b, a, prod, ""), c->acc);
}

static void ein_outer(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    Ein *c = user;
    bool fl = lo_is_float(c->dt);
    LLVMTypeRef at = fl ? lo_f64_t(e) : lo_i64_t(e);
    LLVMBuildStore(e->b, LLVMConstNull(at), c->acc);
    llvm_nest(e, &c->sum, c->n_in, c->sum_st, o + 1, ein_inner, c);
    LLVMValueRef r = LLVMBuildLoad2(e->b, at, c->acc, "");
    r = fl ? lo_from_f64(e, r, c->dt) : LLVMBuildTrunc(e->b, r, lo_comp_t(e, c->dt), "");
    lo_store(e, c->dt, c->out, o[0], r);
}

static IrStatus gen_einsum(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    bool found;
    const char *eq = ir_node_attr_string(g, n, "equation", &found);
    Ein c = {.n_in = ir_node_num_operands(g, n)};
    if (!eq || c.n_in + 1 > LLVM_OPS_MAX_OPS) return lo_unsupported(e, "with this equation");
    c.dt = lo_dtype(e, ir_node_operand(g, n, 0));
    if (!lo_store_t(e, c.dt) || c.dt == IR_DTYPE_BOOL) return lo_unsupported_dtype(e, c.dt);
    LLVMBuilderRef b = e->b;
    const char *arrow = strstr(eq, "->"), *end = arrow ? arrow : eq + strlen(eq), *p = eq;
    int lab[LLVM_OPS_MAX_OPS][IR_MAX_RANK], nl[LLVM_OPS_MAX_OPS], ells[LLVM_OPS_MAX_OPS], ell_max = 0;
    LlvmDims dims[LLVM_OPS_MAX_OPS];
    /* per label: its size (NULL: not seen), the size's constant (-1: symbolic) and expression */
    LLVMValueRef size[EIN_LABELS] = {0};
    int64_t csize[EIN_LABELS];
    IrExprId xsize[EIN_LABELS];
    int count[EIN_LABELS] = {0};
    LLVMValueRef bad = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
    for (uint32_t t = 0; t < c.n_in; t++) {
        const char *q = p;
        while (q < end && *q != ',') q++;
        if (!llvm_dims_of(e, ir_node_operand(g, n, t), &dims[t])) return lo_unsupported(e, "with an unknown shape");
        if (lo_dtype(e, ir_node_operand(g, n, t)) != c.dt || !ein_parse(p, q, (int)dims[t].rank, 0, lab[t], &nl[t], &ells[t]))
            return lo_unsupported(e, "with this equation");
        if (ells[t] > ell_max) ell_max = ells[t];
        p = q + 1;
    }
    for (uint32_t t = 0; t < c.n_in; t++)
        for (int i = 0; i < nl[t]; i++) {
            if (lab[t][i] >= 52) lab[t][i] += ell_max - ells[t];
            int l = lab[t][i];
            count[l]++;
            if (!size[l] || csize[l] == 1) {
                size[l] = dims[t].dim[i], csize[l] = dims[t].cd[i], xsize[l] = dims[t].ex[i];
            } else if (dims[t].cd[i] != 1 && dims[t].ex[i] != xsize[l]) {
                LLVMValueRef ne = LLVMBuildICmp(b, LLVMIntNE, dims[t].dim[i], size[l], "");
                if (LLVMIsAConstantInt(ne) && LLVMConstIntGetZExtValue(ne)) return lo_unsupported(e, "with mismatched dims");
                bad = LLVMBuildOr(b, bad, ne, "");
            }
        }
    int olab[IR_MAX_RANK], on = 0;
    if (arrow) {
        if (!ein_parse(arrow + 2, arrow + 2 + strlen(arrow + 2), -1, ell_max, olab, &on, NULL)) return lo_unsupported(e, "with this equation");
        for (int i = 0; i < on; i++)
            if (!size[olab[i]]) return lo_unsupported(e, "with this equation");
    } else {
        for (int l = 52; l < 52 + ell_max; l++) olab[on++] = l;
        for (int l = 26; l < 52; l++)
            if (count[l] == 1) olab[on++] = l;
        for (int l = 0; l < 26; l++)
            if (count[l] == 1) olab[on++] = l;
    }
    bool in_out[EIN_LABELS] = {0};
    LlvmDims od = {.rank = (uint32_t)on};
    for (int i = 0; i < on; i++) {
        in_out[olab[i]] = true;
        od.dim[i] = size[olab[i]], od.cd[i] = csize[olab[i]], od.ex[i] = xsize[olab[i]];
    }
    /* strides of every operand per label (summed for a diagonal, NULL when broadcast) */
    LLVMValueRef lst[LLVM_OPS_MAX_OPS][EIN_LABELS] = {{0}};
    for (uint32_t t = 0; t < c.n_in; t++) {
        LLVMValueRef st[IR_MAX_RANK];
        llvm_dims_strides(e, &dims[t], st);
        for (int i = 0; i < nl[t]; i++)
            if (dims[t].cd[i] != 1) {
                LLVMValueRef *d = &lst[t][lab[t][i]];
                *d = *d ? LLVMBuildAdd(b, *d, st[i], "") : st[i];
            }
    }
    LLVMValueRef ost[LLVM_OPS_MAX_OPS][IR_MAX_RANK];
    llvm_dims_strides(e, &od, ost[0]);
    for (int i = 0; i < on; i++)
        for (uint32_t t = 0; t < c.n_in; t++) ost[t + 1][i] = lst[t][olab[i]];
    for (int l = 0; l < EIN_LABELS; l++)
        if (size[l] && !in_out[l]) {
            if (c.sum.rank == IR_MAX_RANK) return lo_unsupported(e, "with this many summed labels");
            for (uint32_t t = 0; t < c.n_in; t++) c.sum_st[t][c.sum.rank] = lst[t][l];
            c.sum.dim[c.sum.rank] = size[l], c.sum.cd[c.sum.rank] = csize[l], c.sum.ex[c.sum.rank] = xsize[l];
            c.sum.rank++;
        }
    bool refuse;
    LLVMBasicBlockRef after = lo_run_guard(e, bad, "Einsum: operands disagree on a label's size", &refuse);
    if (refuse) return lo_unsupported(e, "with mismatched dims");
    for (uint32_t t = 0; t < c.n_in; t++) c.in[t] = lo_buf(e, ir_node_operand(g, n, t));
    c.out = lo_buf(e, ir_node_result(g, n, 0));
    c.acc = lo_var(e, lo_is_float(c.dt) ? lo_f64_t(e) : lo_i64_t(e), LLVMConstNull(lo_is_float(c.dt) ? lo_f64_t(e) : lo_i64_t(e)));
    /* the output's points, each a sum over the summed labels (zeros when one of them is empty) */
    llvm_nest(e, &od, c.n_in + 1, ost, NULL, ein_outer, &c);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* DepthToSpace (DCR or CRD) and SpaceToDepth: every output element copied from the input
 * element its (n, c, h, w) maps to, blocks of blocksize x blocksize. */
typedef struct D2s {
    LLVMTypeRef t;
    LLVMValueRef x, y, c, h, w; /* the input's C, H, W */
    int64_t bs;
    bool to_space, crd;
} D2s;

static void d2s_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    D2s *p = user;
    LLVMBuilderRef b = e->b;
    LLVMValueRef n = idx[0], c = idx[1], oh = idx[2], ow = idx[3], bs = lo_i64(e, p->bs), src_c, ih, iw;
    if (p->to_space) { /* y[n, c, h*bs + i, w*bs + j] = x[n, DCR ? (i*bs + j)*C' + c : c*bs*bs + i*bs + j, h, w] */
        LLVMValueRef i = LLVMBuildSRem(b, oh, bs, ""), j = LLVMBuildSRem(b, ow, bs, "");
        ih = LLVMBuildSDiv(b, oh, bs, ""), iw = LLVMBuildSDiv(b, ow, bs, "");
        LLVMValueRef blk = LLVMBuildAdd(b, LLVMBuildMul(b, i, bs, ""), j, "");
        LLVMValueRef cout = LLVMBuildSDiv(b, p->c, lo_i64(e, p->bs * p->bs), "");
        src_c = p->crd ? LLVMBuildAdd(b, LLVMBuildMul(b, c, lo_i64(e, p->bs * p->bs), ""), blk, "")
                       : LLVMBuildAdd(b, LLVMBuildMul(b, blk, cout, ""), c, "");
    } else { /* y[n, (i*bs + j)*C + c, h, w] = x[n, c, h*bs + i, w*bs + j] */
        LLVMValueRef blk = LLVMBuildSDiv(b, c, p->c, "");
        src_c = LLVMBuildSRem(b, c, p->c, "");
        LLVMValueRef i = LLVMBuildSDiv(b, blk, bs, ""), j = LLVMBuildSRem(b, blk, bs, "");
        ih = LLVMBuildAdd(b, LLVMBuildMul(b, oh, bs, ""), i, "");
        iw = LLVMBuildAdd(b, LLVMBuildMul(b, ow, bs, ""), j, "");
    }
    LLVMValueRef off = LLVMBuildMul(b, n, p->c, "");
    off = LLVMBuildMul(b, LLVMBuildAdd(b, off, src_c, ""), p->h, "");
    off = LLVMBuildMul(b, LLVMBuildAdd(b, off, ih, ""), p->w, "");
    off = LLVMBuildAdd(b, off, iw, "");
    LLVMBuildStore(b, LLVMBuildLoad2(b, p->t, lo_gep(e, p->t, p->x, off), ""), lo_gep(e, p->t, p->y, o[0]));
}

static IrStatus gen_depth_space(LlvmEmit *e, bool to_space) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    LlvmDims sx, sy;
    bool found;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy)) return lo_unsupported(e, "with an unknown shape");
    D2s p = {.t = lo_store_t(e, lo_dtype(e, x)), .to_space = to_space, .bs = ir_node_attr_int(g, n, "blocksize", &found)};
    const char *mode = ir_node_attr_string(g, n, "mode", &found);
    p.crd = mode && !strcmp(mode, "CRD");
    if (!p.t || sx.rank != 4 || sy.rank != 4 || p.bs < 1) return lo_unsupported(e, "other than 4-D with a positive blocksize");
    p.c = sx.dim[1], p.h = sx.dim[2], p.w = sx.dim[3];
    LLVMBuilderRef b = e->b;
    LLVMValueRef zero = lo_i64(e, 0), bad;
    if (to_space) bad = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildSRem(b, p.c, lo_i64(e, p.bs * p.bs), ""), zero, "");
    else
        bad = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntNE, LLVMBuildSRem(b, p.h, lo_i64(e, p.bs), ""), zero, ""),
                          LLVMBuildICmp(b, LLVMIntNE, LLVMBuildSRem(b, p.w, lo_i64(e, p.bs), ""), zero, ""), "");
    bool refuse;
    LLVMBasicBlockRef after = lo_run_guard(e, bad, to_space ? "DepthToSpace: channels not a multiple of blocksize^2"
                                                         : "SpaceToDepth: height or width not a multiple of blocksize", &refuse);
    if (refuse) return lo_unsupported(e, "with these dims");
    p.x = lo_buf(e, x);
    p.y = lo_buf(e, y);
    LLVMValueRef st[1][IR_MAX_RANK];
    llvm_dims_strides(e, &sy, st[0]);
    llvm_nest(e, &sy, 1, st, NULL, d2s_body, &p);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* ReverseSequence: along time_axis, the first sequence_lens[b] steps of batch entry b reversed,
 * the rest copied (lengths clamped to [0, T]). */
typedef struct Rev {
    LLVMTypeRef t;
    IrDType lt;
    LLVMValueRef x, y, lens, tlen, tstride;
    int64_t ta, ba;
} Rev;

static void rev_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Rev *p = user;
    LLVMBuilderRef b = e->b;
    LLVMValueRef t = idx[p->ta], bi = idx[p->ba];
    LLVMValueRef len = LLVMBuildSExtOrBitCast(b, lo_load(e, p->lt, p->lens, bi), lo_i64_t(e), "");
    len = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, len, lo_i64(e, 0), ""), lo_i64(e, 0), len, "");
    len = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, len, p->tlen, ""), p->tlen, len, "");
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, t, len, "");
    LLVMValueRef src_t = LLVMBuildSelect(b, in, LLVMBuildSub(b, LLVMBuildSub(b, len, lo_i64(e, 1), ""), t, ""), t, "");
    LLVMValueRef off = LLVMBuildAdd(b, o[0], LLVMBuildMul(b, LLVMBuildSub(b, src_t, t, ""), p->tstride, ""), "");
    LLVMBuildStore(b, LLVMBuildLoad2(b, p->t, lo_gep(e, p->t, p->x, off), ""), lo_gep(e, p->t, p->y, o[0]));
}

static IrStatus gen_reverse_sequence(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), vl = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    LlvmDims sx;
    bool found;
    if (!llvm_dims_of(e, x, &sx)) return lo_unsupported(e, "with an unknown shape");
    uint32_t r = sx.rank;
    Rev p = {.t = lo_store_t(e, lo_dtype(e, x)), .lt = lo_dtype(e, vl)};
    p.ba = llvm_axis(ir_node_attr_int(g, n, "batch_axis", &found), r);
    p.ta = llvm_axis(ir_node_attr_int(g, n, "time_axis", &found), r);
    if (!p.t || r < 2 || p.ba == p.ta || p.ba < 0 || p.ba > 1 || p.ta < 0 || p.ta > 1 ||
        (p.lt != IR_DTYPE_I64 && p.lt != IR_DTYPE_I32))
        return lo_unsupported(e, "with these axes or lengths");
    LLVMValueRef st[1][IR_MAX_RANK];
    llvm_dims_strides(e, &sx, st[0]);
    p.tlen = sx.dim[p.ta];
    p.tstride = st[0][p.ta];
    LlvmDims sl;
    if (!llvm_dims_of(e, vl, &sl)) return lo_unsupported(e, "with an unknown shape");
    bool refuse; /* a length per batch entry */
    LLVMValueRef bad = LLVMBuildICmp(e->b, LLVMIntNE, llvm_dims_prod(e, &sl, 0, sl.rank), sx.dim[p.ba], "");
    LLVMBasicBlockRef after = lo_run_guard(e, bad, "ReverseSequence: sequence_lens does not have one length per batch entry", &refuse);
    if (refuse) return lo_unsupported(e, "with these lengths");
    p.x = lo_buf(e, x), p.y = lo_buf(e, y), p.lens = lo_buf(e, vl);
    llvm_nest(e, &sx, 1, st, NULL, rev_body, &p);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* ---- GridSample (2-D): the interpreter's arithmetic in f64 per output point --------------------
 * Each grid point (x, y) in [-1, 1] maps to an input position (align_corners or not), out-of-range
 * positions move by padding_mode (border clamps, reflection folds), then nearest, bilinear or
 * bicubic (A = -0.75) taps read pixels that are zero outside (zeros) or clamped/folded. */
typedef struct Gs {
    IrDType xdt, gdt;
    LLVMValueRef x, grid, y;
    LLVMValueRef c, hw, ohw, dim[2]; /* channels, input and output plane sizes, input H and W (i64) */
    LLVMValueRef fdim[2], lo[2], hi[2]; /* H and W as f64, the unpadded coordinate range per axis */
    int mode, pad; /* mode 0 nearest, 1 bilinear, 2 bicubic; pad 0 zeros, 1 border, 2 reflection */
    bool ac;
} Gs;

static LLVMValueRef fk(LlvmEmit *e, double v) { return LLVMConstReal(lo_f64_t(e), v); }

static LLVMValueRef fsel_lt(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef t, LLVMValueRef f) {
    return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOLT, a, b, ""), t, f, "");
}

/* gs_reflect: x folded into [lo, hi] (identity inside); lo and hi f64 values. */
static LLVMValueRef gs_reflect_ir(LlvmEmit *e, LLVMValueRef x, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef f64 = lo_f64_t(e), i64 = lo_i64_t(e);
    LLVMValueRef rng = LLVMBuildFSub(b, hi, lo, "");
    LLVMValueRef below = LLVMBuildFCmp(b, LLVMRealOLT, x, lo, ""), above = LLVMBuildFCmp(b, LLVMRealOGT, x, hi, "");
    LLVMValueRef dx = LLVMBuildSelect(b, below, LLVMBuildFSub(b, lo, x, ""), LLVMBuildFSub(b, x, hi, ""), "");
    LLVMValueRef nq = LLVMBuildFPToSI(b, LLVMBuildFDiv(b, dx, rng, ""), i64, "");
    LLVMValueRef r = LLVMBuildFSub(b, dx, LLVMBuildFMul(b, LLVMBuildSIToFP(b, nq, f64, ""), rng, ""), "");
    LLVMValueRef even = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildSRem(b, nq, LLVMConstInt(i64, 2, 0), ""), LLVMConstInt(i64, 0, 0), "");
    LLVMValueRef lo_r = LLVMBuildFAdd(b, lo, r, ""), hi_r = LLVMBuildFSub(b, hi, r, "");
    LLVMValueRef vb = LLVMBuildSelect(b, even, lo_r, hi_r, ""), va = LLVMBuildSelect(b, even, hi_r, lo_r, "");
    return LLVMBuildSelect(b, below, vb, LLVMBuildSelect(b, above, va, x, ""), "");
}

/* Pixel (iy, ix) of the plane at base (i64 indices), 0 outside with zeros padding. */
static LLVMValueRef gs_pixel_ir(LlvmEmit *e, const Gs *c, LLVMValueRef base, LLVMValueRef iy, LLVMValueRef ix) {
    LLVMBuilderRef b = e->b;
    LLVMValueRef idx[2] = {iy, ix}, ok = NULL;
    for (int d = 0; d < 2; d++) {
        LLVMValueRef v = idx[d], n = c->dim[d];
        if (c->pad == 0) {
            LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, v, lo_i64(e, 0), ""), LLVMBuildICmp(b, LLVMIntSLT, v, n, ""), "");
            ok = ok ? LLVMBuildAnd(b, ok, in, "") : in;
        } else if (c->pad == 2) {
            v = LLVMBuildFPToSI(b, gs_reflect_ir(e, LLVMBuildSIToFP(b, v, lo_f64_t(e), ""), c->lo[d], c->hi[d]), lo_i64_t(e), "");
        }
        /* clamped (border, reflection), which also keeps the zeros case's address inside */
        v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, v, lo_i64(e, 0), ""), lo_i64(e, 0), v, "");
        v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGE, v, n, ""), LLVMBuildSub(b, n, lo_i64(e, 1), ""), v, "");
        idx[d] = v;
    }
    LLVMValueRef off = LLVMBuildAdd(b, base, LLVMBuildAdd(b, LLVMBuildMul(b, idx[0], c->dim[1], ""), idx[1], ""), "");
    LLVMValueRef px = lo_to_f64(e, lo_load(e, c->xdt, c->x, off));
    return ok ? LLVMBuildSelect(b, ok, px, fk(e, 0.0), "") : px;
}

static void gs_cubic_ir(LlvmEmit *e, LLVMValueRef t, LLVMValueRef *w) {
    LLVMBuilderRef b = e->b;
    const double A = -0.75;
    LLVMValueRef t1 = LLVMBuildFAdd(b, t, fk(e, 1), ""), u = LLVMBuildFSub(b, fk(e, 1), t, ""), u1 = LLVMBuildFSub(b, fk(e, 2), t, "");
    /* w0 = ((A(t+1) - 5A)(t+1) + 8A)(t+1) - 4A; w1 = ((A+2)t - (A+3)) t t + 1; w2 likewise of 1-t; w3 of 2-t as w0 */
    LLVMValueRef far[2] = {t1, u1}, near[2] = {t, u};
    for (int k = 0; k < 2; k++) {
        LLVMValueRef v = far[k];
        LLVMValueRef a = LLVMBuildFSub(b, LLVMBuildFMul(b, fk(e, A), v, ""), fk(e, 5 * A), "");
        a = LLVMBuildFAdd(b, LLVMBuildFMul(b, a, v, ""), fk(e, 8 * A), "");
        w[k ? 3 : 0] = LLVMBuildFSub(b, LLVMBuildFMul(b, a, v, ""), fk(e, 4 * A), "");
        v = near[k];
        LLVMValueRef q = LLVMBuildFSub(b, LLVMBuildFMul(b, fk(e, A + 2), v, ""), fk(e, A + 3), "");
        w[k ? 2 : 1] = LLVMBuildFAdd(b, LLVMBuildFMul(b, LLVMBuildFMul(b, q, v, ""), v, ""), fk(e, 1), "");
    }
}

/* One output point: o[0] its grid offset / 2 (n, oh, ow), o[1] its offset in the output's first
 * plane of batch n; the channels loop inside. */
static void gs_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    Gs *c = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef i64 = lo_i64_t(e);
    LLVMValueRef n = idx[0], gbase = LLVMBuildMul(b, o[0], lo_i64(e, 2), "");
    LLVMValueRef pos[2];
    for (int i = 0; i < 2; i++) { /* the grid holds (x, y): the height's coordinate second */
        LLVMValueRef nv = lo_to_f64(e, lo_load(e, c->gdt, c->grid, LLVMBuildAdd(b, gbase, lo_i64(e, 1 - i), "")));
        LLVMValueRef len = c->fdim[i], len1 = LLVMBuildFSub(b, len, fk(e, 1), "");
        LLVMValueRef v1 = LLVMBuildFAdd(b, nv, fk(e, 1), "");
        LLVMValueRef v = c->ac ? LLVMBuildFMul(b, LLVMBuildFDiv(b, v1, fk(e, 2), ""), len1, "")
                               : LLVMBuildFDiv(b, LLVMBuildFSub(b, LLVMBuildFMul(b, v1, len, ""), fk(e, 1), ""), fk(e, 2), "");
        if (c->mode == 0) v = lo_intrinsic(e, "llvm.rint", lo_f64_t(e), &v, 1);
        if (c->pad == 1) {
            LLVMValueRef out = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOLT, v, c->lo[i], ""), LLVMBuildFCmp(b, LLVMRealOGT, v, c->hi[i], ""), "");
            LLVMValueRef cl = fsel_lt(e, v, fk(e, 0), fk(e, 0), v);
            cl = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, cl, len1, ""), len1, cl, "");
            v = LLVMBuildSelect(b, out, cl, v, "");
        } else if (c->pad == 2) {
            v = gs_reflect_ir(e, v, c->lo[i], c->hi[i]);
        }
        pos[i] = v;
    }
    LoLoop lc;
    llvm_loop_begin_v(b, e->fn, &lc, c->c);
    LLVMValueRef nc = LLVMBuildAdd(b, LLVMBuildMul(b, n, c->c, ""), lc.iv, "");
    LLVMValueRef plane = LLVMBuildMul(b, nc, c->hw, "");
    LLVMValueRef outv;
    if (c->mode == 0) {
        outv = gs_pixel_ir(e, c, plane, LLVMBuildFPToSI(b, pos[0], i64, ""), LLVMBuildFPToSI(b, pos[1], i64, ""));
    } else {
        int taps = c->mode == 1 ? 2 : 4;
        LLVMValueRef base[2], w[2][4];
        for (int i = 0; i < 2; i++) {
            LLVMValueRef f = lo_intrinsic(e, "llvm.floor", lo_f64_t(e), &pos[i], 1), t = LLVMBuildFSub(b, pos[i], f, "");
            base[i] = LLVMBuildFPToSI(b, f, i64, "");
            if (c->mode == 1) w[i][0] = LLVMBuildFSub(b, fk(e, 1), t, ""), w[i][1] = t;
            else base[i] = LLVMBuildSub(b, base[i], lo_i64(e, 1), ""), gs_cubic_ir(e, t, w[i]);
        }
        outv = fk(e, 0);
        for (int qy = 0; qy < taps; qy++)
            for (int qx = 0; qx < taps; qx++) {
                LLVMValueRef px = gs_pixel_ir(e, c, plane, LLVMBuildAdd(b, base[0], lo_i64(e, qy), ""),
                                              LLVMBuildAdd(b, base[1], lo_i64(e, qx), ""));
                LLVMValueRef wt = LLVMBuildFMul(b, w[0][qy], w[1][qx], "");
                outv = LLVMBuildFAdd(b, outv, LLVMBuildFMul(b, wt, px, ""), "");
            }
    }
    LLVMValueRef yo = LLVMBuildAdd(b, LLVMBuildMul(b, nc, c->ohw, ""), o[1], "");
    lo_store(e, c->xdt, c->y, yo, lo_from_f64(e, outv, c->xdt));
    lo_loop_end(e, &lc);
}

static IrStatus gen_grid_sample(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), gr = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    LlvmDims sx, sg;
    bool found;
    Gs c = {.xdt = lo_dtype(e, x), .gdt = lo_dtype(e, gr)};
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, gr, &sg)) return lo_unsupported(e, "with an unknown shape");
    if (sx.rank != 4 || sg.rank != 4 || (sg.cd[3] >= 0 && sg.cd[3] != 2) || !lo_is_float(c.xdt) || !lo_is_float(c.gdt) ||
        (sx.cd[0] >= 0 && sg.cd[0] >= 0 && sx.cd[0] != sg.cd[0]))
        return lo_unsupported(e, "other than 2-D on floats");
    const char *mode = ir_node_attr_string(g, n, "mode", &found), *pm = ir_node_attr_string(g, n, "padding_mode", &found);
    c.mode = !mode || !strcmp(mode, "bilinear") || !strcmp(mode, "linear") ? 1 : !strcmp(mode, "nearest") ? 0
           : !strcmp(mode, "bicubic") || !strcmp(mode, "cubic") ? 2 : -1;
    c.pad = !pm || !strcmp(pm, "zeros") ? 0 : !strcmp(pm, "border") ? 1 : !strcmp(pm, "reflection") ? 2 : -1;
    if (c.mode < 0 || c.pad < 0) return lo_unsupported(e, "with this mode");
    c.ac = ir_node_attr_int(g, n, "align_corners", &found) != 0;
    LLVMBuilderRef b = e->b;
    c.c = sx.dim[1];
    c.dim[0] = sx.dim[2], c.dim[1] = sx.dim[3];
    c.hw = llvm_dims_prod(e, &sx, 2, 4);
    c.ohw = llvm_dims_prod(e, &sg, 1, 3);
    for (int i = 0; i < 2; i++) {
        c.fdim[i] = LLVMBuildSIToFP(b, c.dim[i], lo_f64_t(e), "");
        c.lo[i] = fk(e, c.ac ? 0 : -0.5);
        c.hi[i] = LLVMBuildFSub(b, c.fdim[i], fk(e, c.ac ? 1 : 0.5), "");
    }
    LLVMBasicBlockRef pair = NULL; /* a grid's last dim known at run time: 2, else the run fails */
    if (sg.cd[3] < 0) {
        LLVMValueRef two = LLVMBuildICmp(b, LLVMIntEQ, sg.dim[3], lo_i64(e, 2), "");
        lo_fail_if(e, LLVMBuildNot(b, two, ""), "GridSample: the grid's last dim is not 2");
        pair = lo_if_begin(e, two);
    }
    bool refuse;
    LLVMValueRef points = llvm_dims_prod(e, &sg, 0, 3);
    LLVMBasicBlockRef after = guard_empty_dim(e, c.hw, LLVMBuildMul(b, points, c.c, ""), "GridSample: an empty image", &refuse);
    if (refuse) return lo_unsupported(e, "on an empty image");
    c.x = lo_buf(e, x), c.grid = lo_buf(e, gr), c.y = lo_buf(e, y);
    LlvmDims pts = {.rank = 3};
    for (uint32_t k = 0; k < 3; k++) pts.dim[k] = sg.dim[k], pts.cd[k] = sg.cd[k], pts.ex[k] = sg.ex[k];
    LLVMValueRef st[2][IR_MAX_RANK];
    llvm_dims_strides(e, &pts, st[0]);
    st[1][0] = NULL, st[1][1] = sg.dim[2], st[1][2] = lo_i64(e, 1);
    llvm_nest(e, &pts, 2, st, NULL, gs_body, &c);
    if (after) lo_if_end(e, after);
    if (pair) lo_if_end(e, pair);
    return IR_OK;
}

/* EyeLike: ones on diagonal k of a 2-D output, zeros elsewhere. */
static IrStatus gen_eye_like(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrValueId y = ir_node_result(g, e->node, 0);
    IrDType dt = lo_dtype(e, y);
    LlvmDims sy;
    if (!llvm_dims_of(e, y, &sy)) return lo_unsupported(e, "with an unknown shape");
    if (sy.rank != 2 || !lo_store_t(e, dt)) return lo_unsupported_dtype(e, dt);
    bool found;
    int64_t k = ir_node_attr_int(g, e->node, "k", &found);
    LLVMBuilderRef b = e->b;
    LLVMValueRef dst = lo_buf(e, y);
    LLVMBuildMemSet(b, dst, LLVMConstInt(lo_i8_t(e), 0, 0), dims_nbytes(e, &sy, dt), 1);
    LLVMTypeRef ct = lo_comp_t(e, dt);
    LLVMValueRef one = lo_is_float(dt) ? LLVMConstReal(ct, 1.0) : LLVMConstInt(ct, 1, 0);
    LoLoop l; /* row i has its one at column i + k when that is inside */
    llvm_loop_begin_v(b, e->fn, &l, sy.dim[0]);
    LLVMValueRef j = LLVMBuildAdd(b, l.iv, lo_i64(e, k), "");
    LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, j, lo_i64(e, 0), ""), LLVMBuildICmp(b, LLVMIntSLT, j, sy.dim[1], ""), "");
    LLVMBasicBlockRef after = lo_if_begin(e, in);
    lo_store(e, dt, dst, LLVMBuildAdd(b, LLVMBuildMul(b, l.iv, sy.dim[1], ""), j, ""), one);
    lo_if_end(e, after);
    lo_loop_end(e, &l);
    return IR_OK;
}

/* OneHot: depth is the output's size along axis; values [off, on] read at run time. */
typedef struct OneHot {
    IrDType it, vt;
    LLVMValueRef y, ind, off, on, depth;
    uint32_t axis;
} OneHot;

static void one_hot_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    OneHot *c = user;
    LLVMBuilderRef b = e->b;
    LLVMValueRef v = lo_load(e, c->it, c->ind, o[1]);
    if (lo_is_float(c->it)) {
        LLVMTypeRef tys[2] = {lo_i64_t(e), LLVMTypeOf(v)};
        unsigned id = LLVMLookupIntrinsicID("llvm.fptosi.sat", 15);
        LLVMValueRef f = LLVMGetIntrinsicDeclaration(e->mod, id, tys, 2);
        v = LLVMBuildCall2(b, LLVMIntrinsicGetType(e->ctx, id, tys, 2), f, &v, 1, "");
    } else {
        bool uns = c->it == IR_DTYPE_U8 || c->it == IR_DTYPE_U16 || c->it == IR_DTYPE_U32 || c->it == IR_DTYPE_U64;
        if (LLVMTypeOf(v) != lo_i64_t(e)) v = uns ? LLVMBuildZExt(b, v, lo_i64_t(e), "") : LLVMBuildSExt(b, v, lo_i64_t(e), "");
    }
    v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, v, lo_i64(e, 0), ""), LLVMBuildAdd(b, v, c->depth, ""), v, "");
    LLVMValueRef hit = LLVMBuildICmp(b, LLVMIntEQ, v, idx[c->axis], "");
    lo_store(e, c->vt, c->y, o[0], LLVMBuildSelect(b, hit, c->on, c->off, ""));
}

static IrStatus gen_one_hot(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId ind = ir_node_operand(g, n, 0), vals = ir_node_operand(g, n, 2), y = ir_node_result(g, n, 0);
    OneHot c = {.it = lo_dtype(e, ind), .vt = lo_dtype(e, vals)};
    LlvmDims sy, si, sv;
    if (!llvm_dims_of(e, y, &sy) || !llvm_dims_of(e, ind, &si) || !llvm_dims_of(e, vals, &sv))
        return lo_unsupported(e, "with an unknown shape");
    if (!lo_store_t(e, c.it) || c.it == IR_DTYPE_BOOL || !lo_store_t(e, c.vt) || lo_dtype(e, y) != c.vt)
        return lo_unsupported_dtype(e, c.it);
    if (sy.rank != si.rank + 1) return lo_unsupported(e, "with these shapes");
    bool found;
    int64_t axis = llvm_axis(ir_node_attr_int(g, n, "axis", &found), sy.rank);
    if (axis < 0) return lo_unsupported(e, "with this axis");
    bool refuse; /* values: [off, on] */
    LLVMValueRef bad = LLVMBuildICmp(e->b, LLVMIntNE, llvm_dims_prod(e, &sv, 0, sv.rank), lo_i64(e, 2), "");
    LLVMBasicBlockRef after = lo_run_guard(e, bad, "OneHot: values does not hold two elements", &refuse);
    if (refuse) return lo_unsupported(e, "with these shapes");
    c.axis = (uint32_t)axis;
    c.depth = sy.dim[axis];
    c.y = lo_buf(e, y);
    c.ind = lo_buf(e, ind);
    LLVMValueRef vp = lo_buf(e, vals);
    c.off = lo_load(e, c.vt, vp, lo_i64(e, 0));
    c.on = lo_load(e, c.vt, vp, lo_i64(e, 1));
    LLVMValueRef st[2][IR_MAX_RANK], si_st[IR_MAX_RANK];
    llvm_dims_strides(e, &sy, st[0]);
    llvm_dims_strides(e, &si, si_st);
    for (uint32_t k = 0, j = 0; k < sy.rank; k++) st[1][k] = k == c.axis ? NULL : si_st[j++];
    llvm_nest(e, &sy, 2, st, NULL, one_hot_body, &c);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* ---- TopK: k rounds of selection per row (k and the row static) ------------------------------
 * Round t picks the untaken element that sorts first as the interpreter's stable sort has it:
 * the largest (or smallest) value, NaN above every number, ties to the lower index. O(k * len). */
typedef struct TopK {
    IrDType dt;
    LLVMValueRef x, vals, idx, taken, len, k, inner;
    bool largest, uns;
} TopK;

static void topk_body(LlvmEmit *e, LLVMValueRef *o, LLVMValueRef *idx, void *user) {
    (void)idx;
    TopK *c = user;
    LLVMBuilderRef b = e->b;
    LLVMTypeRef ct = lo_comp_t(e, c->dt), i64 = lo_i64_t(e), i8 = lo_i8_t(e);
    bool fl = lo_is_float(c->dt);
    LLVMBuildMemSet(b, c->taken, LLVMConstInt(i8, 0, 0), c->len, 1);
    LLVMValueRef bi = lo_var(e, i64, lo_i64(e, -1)), best = lo_var(e, ct, LLVMConstNull(ct));
    LoLoop lt, lj;
    llvm_loop_begin_v(b, e->fn, &lt, c->k);
    LLVMBuildStore(b, lo_i64(e, -1), bi);
    llvm_loop_begin_v(b, e->fn, &lj, c->len);
    LLVMValueRef free_ = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildLoad2(b, i8, lo_gep(e, i8, c->taken, lj.iv), ""),
                                       LLVMConstInt(i8, 0, 0), "");
    LLVMBasicBlockRef after = lo_if_begin(e, free_);
    LLVMValueRef v = lo_load(e, c->dt, c->x, LLVMBuildAdd(b, o[0], LLVMBuildMul(b, lj.iv, c->inner, ""), ""));
    LLVMValueRef cur = LLVMBuildLoad2(b, ct, best, ""), better;
    if (fl) {
        LLVMValueRef vn = LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), cn = LLVMBuildFCmp(b, LLVMRealUNO, cur, cur, "");
        LLVMValueRef num = LLVMBuildFCmp(b, c->largest ? LLVMRealOGT : LLVMRealOLT, v, cur, "");
        better = c->largest ? LLVMBuildOr(b, LLVMBuildAnd(b, vn, LLVMBuildNot(b, cn, ""), ""), num, "")
                            : LLVMBuildOr(b, LLVMBuildAnd(b, LLVMBuildNot(b, vn, ""), cn, ""), num, "");
    } else {
        LLVMIntPredicate p = c->largest ? (c->uns ? LLVMIntUGT : LLVMIntSGT) : (c->uns ? LLVMIntULT : LLVMIntSLT);
        better = LLVMBuildICmp(b, p, v, cur, "");
    }
    LLVMValueRef none = LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildLoad2(b, i64, bi, ""), lo_i64(e, 0), "");
    LLVMValueRef take = LLVMBuildOr(b, none, better, "");
    LLVMBuildStore(b, LLVMBuildSelect(b, take, v, cur, ""), best);
    LLVMBuildStore(b, LLVMBuildSelect(b, take, lj.iv, LLVMBuildLoad2(b, i64, bi, ""), ""), bi);
    lo_if_end(e, after);
    lo_loop_end(e, &lj);
    LLVMValueRef at = LLVMBuildLoad2(b, i64, bi, "");
    LLVMBuildStore(b, LLVMConstInt(i8, 1, 0), lo_gep(e, i8, c->taken, at));
    LLVMValueRef off = LLVMBuildAdd(b, o[1], LLVMBuildMul(b, lt.iv, c->inner, ""), "");
    lo_store(e, c->dt, c->vals, off, LLVMBuildLoad2(b, ct, best, ""));
    if (c->idx) lo_store(e, IR_DTYPE_I64, c->idx, off, at);
    lo_loop_end(e, &lt);
}

/* TopK by K selection passes over each row (a row's taken flags on the stack: rows of at most
 * 1M elements, checked when the kernel runs where the length is a symbol). */
static IrStatus gen_topk(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), vy = ir_node_result(g, n, 0);
    IrValueId vi = ir_node_num_results(g, n) > 1 ? ir_node_result(g, n, 1) : 0;
    TopK c = {.dt = lo_dtype(e, x)};
    LlvmDims sx, sy;
    uint32_t nk;
    int64_t kv[1];
    bool found;
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, vy, &sy)) return lo_unsupported(e, "with an unknown shape");
    uint32_t r = sx.rank;
    if (!lo_store_t(e, c.dt) || c.dt == IR_DTYPE_BOOL) return lo_unsupported_dtype(e, c.dt);
    if (r == 0) return lo_unsupported(e, "on scalars");
    int64_t axis = llvm_axis(ir_node_attr_int(g, n, "axis", &found), r);
    if (axis < 0) return lo_unsupported(e, "with this axis");
    if (lower_const_ints(g, ir_node_operand(g, n, 1), kv, &nk, 1) && nk == 1) c.k = lo_i64(e, kv[0]);
    else if (sy.rank == r) c.k = sy.dim[axis]; /* K as data: the result's dim */
    else return lo_unsupported(e, "with K given at run time and an unknown result shape");
    c.largest = ir_node_attr_int(g, n, "largest", &found) != 0 || !found;
    c.uns = c.dt == IR_DTYPE_U8 || c.dt == IR_DTYPE_U16 || c.dt == IR_DTYPE_U32 || c.dt == IR_DTYPE_U64;
    LLVMBuilderRef b = e->b;
    c.len = sx.dim[axis];
    c.inner = llvm_dims_prod(e, &sx, (uint32_t)axis + 1, r);
    LLVMValueRef bad = LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSLT, c.k, lo_i64(e, 0), ""), LLVMBuildICmp(b, LLVMIntSGT, c.k, c.len, ""), "");
    bool refuse;
    if (LLVMIsAConstantInt(bad) && LLVMConstIntGetZExtValue(bad)) return lo_unsupported(e, "with K out of range");
    bad = LLVMBuildOr(b, bad, LLVMBuildICmp(b, LLVMIntSGT, c.len, lo_i64(e, 1 << 20), ""), "");
    LLVMBasicBlockRef after = lo_run_guard(e, bad, "TopK: K out of range, or a row of more than 1M elements", &refuse);
    if (refuse) return lo_unsupported(e, "over rows of more than 1M elements");
    c.x = lo_buf(e, x);
    c.vals = lo_buf(e, vy);
    c.idx = vi ? lo_buf(e, vi) : NULL;
    /* the flags: in the entry block when the row length is a constant, else where it is known */
    c.taken = LLVMBuildArrayAlloca(LLVMIsAConstantInt(c.len) ? e->ab : b, lo_i8_t(e), c.len, "");
    LlvmDims rows = {.rank = 2, .dim = {llvm_dims_prod(e, &sx, 0, (uint32_t)axis), c.inner}};
    rows.cd[0] = llvm_dims_cprod(&sx, 0, (uint32_t)axis), rows.cd[1] = llvm_dims_cprod(&sx, (uint32_t)axis + 1, r);
    LLVMValueRef st[2][IR_MAX_RANK] = {{LLVMBuildMul(b, c.len, c.inner, ""), lo_i64(e, 1)}, {LLVMBuildMul(b, c.k, c.inner, ""), lo_i64(e, 1)}};
    LLVMBasicBlockRef some = lo_if_begin(e, LLVMBuildICmp(b, LLVMIntSGT, c.k, lo_i64(e, 0), ""));
    llvm_nest(e, &rows, 2, st, NULL, topk_body, &c);
    lo_if_end(e, some);
    if (after) lo_if_end(e, after);
    return IR_OK;
}

/* ---- dims an operand's values decide (lower_value_dim_syms) ---------------------------------
 * The node's kernel starts by computing them from the operand (Slice starts/ends/axes/steps,
 * Split sizes, TopK's K, ReduceSum's axes, Squeeze/Unsqueeze axes) and storing them into the
 * run's symbol array, where the kernel body and every consumer read them. Operands that cannot
 * give a valid result (axes out of range or repeated, sizes not summing to the dim, K above it,
 * a squeezed dim other than 1) fail the run and store zeros, so nothing is read or written out
 * of bounds. */

typedef struct ValDims {
    LLVMValueRef dim[IR_MAX_RANK]; /* the result's dims, i64 */
    uint32_t rank;
    LLVMValueRef bad;              /* i1: the operands give no valid result */
} ValDims;

static LLVMValueRef i1c(LlvmEmit *e, bool v) { return LLVMConstInt(LLVMInt1TypeInContext(e->ctx), v, 0); }
static LLVMValueRef sel(LlvmEmit *e, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(e->b, c, a, b, ""); }
static LLVMValueRef ilt(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(e->b, LLVMIntSLT, a, b, ""); }
static LLVMValueRef ieq(LlvmEmit *e, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(e->b, LLVMIntEQ, a, b, ""); }

/* Whether v is a 1-D integer operand; its entry count as an i64 value. */
static bool int_list(LlvmEmit *e, IrValueId v, LLVMValueRef *count) {
    LlvmDims s;
    IrDType dt = v ? lo_dtype(e, v) : IR_DTYPE_NONE;
    if (!v || (dt != IR_DTYPE_I64 && dt != IR_DTYPE_I32) || !llvm_dims_of(e, v, &s) || s.rank != 1) return false;
    *count = s.dim[0];
    return true;
}

/* Entry i of the integer list v (i64). */
static LLVMValueRef list_at(LlvmEmit *e, IrValueId v, LLVMValueRef i) { return lo_load_int(e, lo_dtype(e, v), lo_buf(e, v), i); }

/* Axis a of a rank-r value normalised (negative counts from the end); *out set when out of range
 * (the axis is then 0). */
static LLVMValueRef norm_axis_rt(LlvmEmit *e, LLVMValueRef a, uint32_t r, LLVMValueRef *out) {
    a = sel(e, ilt(e, a, lo_i64(e, 0)), LLVMBuildAdd(e->b, a, lo_i64(e, r), ""), a);
    LLVMValueRef o = LLVMBuildOr(e->b, ilt(e, a, lo_i64(e, 0)), LLVMBuildICmp(e->b, LLVMIntSGE, a, lo_i64(e, r), ""), "");
    *out = LLVMBuildOr(e->b, *out, o, "");
    return sel(e, o, lo_i64(e, 0), a);
}

/* Slice's effective start, step and length per dim of x (dims no axis names: 0, 1, the dim),
 * starts/ends/axes/steps read at run time, their count too. Axes out of range or repeated set
 * *bad. start/step/len are [rank x i64] arrays on the stack. */
static bool slice_params(LlvmEmit *e, const LlvmDims *sx, LLVMValueRef start, LLVMValueRef step, LLVMValueRef len,
                         LLVMValueRef *bad) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LLVMBuilderRef b = e->b;
    uint32_t no = ir_node_num_operands(g, n), r = sx->rank;
    IrValueId vs = no > 1 ? ir_node_operand(g, n, 1) : 0, ve = no > 2 ? ir_node_operand(g, n, 2) : 0;
    IrValueId va = no > 3 ? ir_node_operand(g, n, 3) : 0, vst = no > 4 ? ir_node_operand(g, n, 4) : 0;
    LLVMValueRef na, cnt;
    if (!int_list(e, vs, &na) || !int_list(e, ve, &cnt) || (va && !int_list(e, va, &cnt)) || (vst && !int_list(e, vst, &cnt)))
        return false;
    LLVMTypeRef i64 = lo_i64_t(e);
    LLVMValueRef seen = lo_var(e, i64, lo_i64(e, 0)), badv = lo_var(e, LLVMInt1TypeInContext(e->ctx), i1c(e, false));
    for (uint32_t k = 0; k < r; k++) {
        LLVMValueRef kk = lo_i64(e, k);
        LLVMBuildStore(b, lo_i64(e, 0), lo_gep(e, i64, start, kk));
        LLVMBuildStore(b, lo_i64(e, 1), lo_gep(e, i64, step, kk));
        LLVMBuildStore(b, sx->dim[k], lo_gep(e, i64, len, kk));
    }
    /* every list as long as starts (the interpreter refuses others) */
    LLVMValueRef mismatch = i1c(e, false);
    IrValueId others[3] = {ve, va, vst};
    for (int i = 0; i < 3; i++)
        if (others[i] && int_list(e, others[i], &cnt)) mismatch = LLVMBuildOr(b, mismatch, LLVMBuildICmp(b, LLVMIntNE, cnt, na, ""), "");
    mismatch = LLVMBuildOr(b, mismatch, LLVMBuildICmp(b, LLVMIntSGT, na, lo_i64(e, r), ""), "");
    LLVMBuildStore(b, mismatch, badv);
    LoLoop l;
    llvm_loop_begin_v(b, e->fn, &l, sel(e, mismatch, lo_i64(e, 0), na));
    LLVMValueRef out = i1c(e, false);
    LLVMValueRef a = norm_axis_rt(e, va ? list_at(e, va, l.iv) : l.iv, r, &out);
    LLVMValueRef bit = LLVMBuildShl(b, lo_i64(e, 1), a, ""), sv = LLVMBuildLoad2(b, i64, seen, "");
    out = LLVMBuildOr(b, out, LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, sv, bit, ""), lo_i64(e, 0), ""), "");
    LLVMBuildStore(b, LLVMBuildOr(b, sv, bit, ""), seen);
    LLVMBuildStore(b, LLVMBuildOr(b, LLVMBuildLoad2(b, LLVMInt1TypeInContext(e->ctx), badv, ""), out, ""), badv);
    LLVMValueRef dim = sx->dim[0];
    for (uint32_t k = 1; k < r; k++) dim = sel(e, ieq(e, a, lo_i64(e, k)), sx->dim[k], dim);
    LLVMValueRef st = list_at(e, vs, l.iv), en = list_at(e, ve, l.iv), sp = vst ? list_at(e, vst, l.iv) : lo_i64(e, 1);
    LLVMValueRef back = ilt(e, sp, lo_i64(e, 0)), zero_step = ieq(e, sp, lo_i64(e, 0));
    LLVMBuildStore(b, LLVMBuildOr(b, LLVMBuildLoad2(b, LLVMInt1TypeInContext(e->ctx), badv, ""), zero_step, ""), badv);
    sp = sel(e, zero_step, lo_i64(e, 1), sp);
    st = sel(e, ilt(e, st, lo_i64(e, 0)), LLVMBuildAdd(b, st, dim, ""), st);
    en = sel(e, ilt(e, en, lo_i64(e, 0)), LLVMBuildAdd(b, en, dim, ""), en);
    LLVMValueRef dm1 = LLVMBuildSub(b, dim, lo_i64(e, 1), "");
    st = sel(e, back, lo_iclamp(e, st, lo_i64(e, 0), dm1), lo_iclamp(e, st, lo_i64(e, 0), dim));
    en = sel(e, back, lo_iclamp(e, en, lo_i64(e, -1), dm1), lo_iclamp(e, en, lo_i64(e, 0), dim));
    LLVMValueRef span = sel(e, back, LLVMBuildSub(b, st, en, ""), LLVMBuildSub(b, en, st, ""));
    LLVMValueRef as = sel(e, back, LLVMBuildNeg(b, sp, ""), sp);
    LLVMValueRef ln = LLVMBuildSDiv(b, LLVMBuildAdd(b, span, LLVMBuildSub(b, as, lo_i64(e, 1), ""), ""), as, "");
    ln = sel(e, ilt(e, span, lo_i64(e, 1)), lo_i64(e, 0), ln);
    LLVMBuildStore(b, st, lo_gep(e, i64, start, a));
    LLVMBuildStore(b, sp, lo_gep(e, i64, step, a));
    LLVMBuildStore(b, ln, lo_gep(e, i64, len, a));
    lo_loop_end(e, &l);
    *bad = LLVMBuildLoad2(b, LLVMInt1TypeInContext(e->ctx), badv, "");
    return true;
}

static bool slice_dims(LlvmEmit *e, const LlvmDims *sx, ValDims *v) {
    LLVMTypeRef at = LLVMArrayType(lo_i64_t(e), sx->rank ? sx->rank : 1);
    LLVMValueRef st = LLVMBuildAlloca(e->ab, at, ""), sp = LLVMBuildAlloca(e->ab, at, ""), ln = LLVMBuildAlloca(e->ab, at, "");
    if (!slice_params(e, sx, st, sp, ln, &v->bad)) return false;
    v->rank = sx->rank;
    for (uint32_t k = 0; k < sx->rank; k++) v->dim[k] = LLVMBuildLoad2(e->b, lo_i64_t(e), lo_gep(e, lo_i64_t(e), ln, lo_i64(e, k)), "");
    return true;
}

/* Split by sizes given at run time: result r's dim `axis` is sizes[r]; they must sum to it. */
static bool split_dims(LlvmEmit *e, const LlvmDims *sx, uint32_t r, ValDims *v) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId vs = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    LLVMValueRef cnt;
    bool found;
    int64_t axis = llvm_axis(ir_node_attr_int(g, n, "axis", &found), sx->rank);
    if (axis < 0 || !int_list(e, vs, &cnt)) return false;
    uint32_t nr = ir_node_num_results(g, n);
    LLVMValueRef total = lo_i64(e, 0), neg = i1c(e, false);
    LLVMValueRef bad = LLVMBuildICmp(e->b, LLVMIntNE, cnt, lo_i64(e, nr), "");
    LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildNot(e->b, bad, ""));
    LLVMValueRef tv = lo_var(e, lo_i64_t(e), lo_i64(e, 0)), nv = lo_var(e, LLVMInt1TypeInContext(e->ctx), i1c(e, false));
    for (uint32_t i = 0; i < nr; i++) {
        LLVMValueRef si = list_at(e, vs, lo_i64(e, i));
        total = LLVMBuildAdd(e->b, total, si, "");
        neg = LLVMBuildOr(e->b, neg, ilt(e, si, lo_i64(e, 0)), "");
    }
    LLVMBuildStore(e->b, total, tv);
    LLVMBuildStore(e->b, neg, nv);
    LLVMValueRef own = list_at(e, vs, lo_i64(e, r)), ov = lo_var(e, lo_i64_t(e), lo_i64(e, 0));
    LLVMBuildStore(e->b, own, ov);
    lo_if_end(e, after);
    total = LLVMBuildLoad2(e->b, lo_i64_t(e), tv, "");
    bad = LLVMBuildOr(e->b, bad, LLVMBuildLoad2(e->b, LLVMInt1TypeInContext(e->ctx), nv, ""), "");
    v->bad = LLVMBuildOr(e->b, bad, LLVMBuildICmp(e->b, LLVMIntNE, total, sx->dim[axis], ""), "");
    v->rank = sx->rank;
    for (uint32_t k = 0; k < sx->rank; k++) v->dim[k] = sx->dim[k];
    v->dim[axis] = LLVMBuildLoad2(e->b, lo_i64_t(e), ov, "");
    return true;
}

/* TopK: dim `axis` is K (0 <= K <= the dim). */
static bool topk_dims(LlvmEmit *e, const LlvmDims *sx, ValDims *v) {
    const IrGraph *g = e->g;
    IrValueId vk = ir_node_operand(g, e->node, 1);
    LLVMValueRef cnt;
    bool found;
    int64_t axis = llvm_axis(ir_node_attr_int(g, e->node, "axis", &found), sx->rank);
    if (axis < 0 || !int_list(e, vk, &cnt)) return false;
    v->bad = LLVMBuildICmp(e->b, LLVMIntNE, cnt, lo_i64(e, 1), "");
    LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildNot(e->b, v->bad, ""));
    LLVMValueRef kv = lo_var(e, lo_i64_t(e), lo_i64(e, 0));
    LLVMBuildStore(e->b, list_at(e, vk, lo_i64(e, 0)), kv);
    lo_if_end(e, after);
    LLVMValueRef k = LLVMBuildLoad2(e->b, lo_i64_t(e), kv, "");
    v->bad = LLVMBuildOr(e->b, v->bad, LLVMBuildOr(e->b, ilt(e, k, lo_i64(e, 0)), ilt(e, sx->dim[axis], k), ""), "");
    v->rank = sx->rank;
    for (uint32_t j = 0; j < sx->rank; j++) v->dim[j] = sx->dim[j];
    v->dim[axis] = k;
    return true;
}

/* The bitmask of the axes listed in v (normalised for rank r; at most 63 dims), their count
 * read at run time; *bad when one is out of range or repeated. */
static LLVMValueRef axes_mask(LlvmEmit *e, IrValueId v, uint32_t r, LLVMValueRef cnt, LLVMValueRef *bad) {
    LLVMBuilderRef b = e->b;
    LLVMTypeRef i64 = lo_i64_t(e), i1 = LLVMInt1TypeInContext(e->ctx);
    LLVMValueRef mask = lo_var(e, i64, lo_i64(e, 0)), badv = lo_var(e, i1, i1c(e, false));
    LoLoop l;
    llvm_loop_begin_v(b, e->fn, &l, cnt);
    LLVMValueRef out = i1c(e, false);
    LLVMValueRef a = norm_axis_rt(e, list_at(e, v, l.iv), r, &out);
    LLVMValueRef bit = LLVMBuildShl(b, lo_i64(e, 1), a, ""), m = LLVMBuildLoad2(b, i64, mask, "");
    out = LLVMBuildOr(b, out, LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, m, bit, ""), lo_i64(e, 0), ""), "");
    LLVMBuildStore(b, LLVMBuildOr(b, m, bit, ""), mask);
    LLVMBuildStore(b, LLVMBuildOr(b, LLVMBuildLoad2(b, i1, badv, ""), out, ""), badv);
    lo_loop_end(e, &l);
    *bad = LLVMBuildLoad2(b, i1, badv, "");
    return LLVMBuildLoad2(b, i64, mask, "");
}

static LLVMValueRef mask_has(LlvmEmit *e, LLVMValueRef mask, uint32_t k) {
    return LLVMBuildICmp(e->b, LLVMIntNE, LLVMBuildAnd(e->b, mask, lo_i64(e, (int64_t)1 << k), ""), lo_i64(e, 0), "");
}

/* ReduceSum: with keepdims the reduced dims are 1 (no axes: all, or none with
 * noop_with_empty_axes); without, the kept dims in order, the axes' count a constant. */
static bool reduce_dims(LlvmEmit *e, const LlvmDims *sx, ValDims *v) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId va = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    LLVMValueRef cnt;
    LlvmDims sy;
    bool found;
    if (!int_list(e, va, &cnt) || sx->rank > 63 || !llvm_dims_of(e, ir_node_result(g, n, 0), &sy)) return false;
    LLVMValueRef mask = axes_mask(e, va, sx->rank, cnt, &v->bad);
    bool noop = ir_node_attr_int(g, n, "noop_with_empty_axes", &found) != 0;
    bool keep = ir_node_attr_int(g, n, "keepdims", &found) != 0 || !found;
    LLVMValueRef none = ieq(e, cnt, lo_i64(e, 0));
    v->rank = sy.rank;
    if (keep) {
        if (sy.rank != sx->rank) return false;
        for (uint32_t k = 0; k < sx->rank; k++)
            v->dim[k] = sel(e, none, noop ? sx->dim[k] : lo_i64(e, 1), sel(e, mask_has(e, mask, k), lo_i64(e, 1), sx->dim[k]));
        return true;
    }
    if (!LLVMIsAConstantInt(cnt) || (int64_t)sy.rank != (int64_t)sx->rank - LLVMConstIntGetSExtValue(cnt)) return false;
    for (uint32_t j = 0; j < sy.rank; j++) v->dim[j] = lo_i64(e, 1);
    LLVMValueRef yi = lo_i64(e, 0); /* the result dim the next kept input dim becomes */
    for (uint32_t k = 0; k < sx->rank; k++) {
        LLVMValueRef kept = LLVMBuildNot(e->b, mask_has(e, mask, k), "");
        for (uint32_t j = 0; j < sy.rank; j++)
            v->dim[j] = sel(e, LLVMBuildAnd(e->b, kept, ieq(e, yi, lo_i64(e, j)), ""), sx->dim[k], v->dim[j]);
        yi = LLVMBuildAdd(e->b, yi, LLVMBuildZExt(e->b, kept, lo_i64_t(e), ""), "");
    }
    return true;
}

/* Squeeze (each named dim must be 1) and Unsqueeze (a 1 inserted at each named result dim), the
 * axes' count a constant (it gives the result's rank). */
static bool squeeze_dims(LlvmEmit *e, const LlvmDims *sx, bool un, ValDims *v) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId va = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    LlvmDims sy;
    LLVMValueRef cnt;
    if (!int_list(e, va, &cnt) || !LLVMIsAConstantInt(cnt) || !llvm_dims_of(e, ir_node_result(g, n, 0), &sy)) return false;
    int64_t na = LLVMConstIntGetSExtValue(cnt);
    uint32_t r = un ? sy.rank : sx->rank; /* the rank the axes index */
    if (r > 63 || (un ? (int64_t)sy.rank != (int64_t)sx->rank + na : (int64_t)sy.rank != (int64_t)sx->rank - na)) return false;
    LLVMBuilderRef b = e->b;
    LLVMValueRef mask = axes_mask(e, va, r, cnt, &v->bad);
    v->rank = sy.rank;
    if (un) {
        LLVMValueRef xi = lo_i64(e, 0); /* the input dim the next kept result dim takes */
        for (uint32_t j = 0; j < sy.rank; j++) {
            LLVMValueRef ins = mask_has(e, mask, j), d = lo_i64(e, 1);
            for (uint32_t k = 0; k < sx->rank; k++) d = sel(e, ieq(e, xi, lo_i64(e, k)), sx->dim[k], d);
            v->dim[j] = sel(e, ins, lo_i64(e, 1), d);
            xi = LLVMBuildAdd(b, xi, LLVMBuildZExt(b, LLVMBuildNot(b, ins, ""), lo_i64_t(e), ""), "");
        }
        return true;
    }
    for (uint32_t j = 0; j < sy.rank; j++) v->dim[j] = lo_i64(e, 1);
    LLVMValueRef yi = lo_i64(e, 0); /* the result dim the next kept input dim becomes */
    for (uint32_t k = 0; k < sx->rank; k++) {
        LLVMValueRef sq = mask_has(e, mask, k);
        v->bad = LLVMBuildOr(b, v->bad, LLVMBuildAnd(b, sq, LLVMBuildICmp(b, LLVMIntNE, sx->dim[k], lo_i64(e, 1), ""), ""), "");
        for (uint32_t j = 0; j < sy.rank; j++)
            v->dim[j] = sel(e, LLVMBuildAnd(b, LLVMBuildNot(b, sq, ""), ieq(e, yi, lo_i64(e, j)), ""), sx->dim[k], v->dim[j]);
        yi = LLVMBuildAdd(b, yi, LLVMBuildZExt(b, LLVMBuildNot(b, sq, ""), lo_i64_t(e), ""), "");
    }
    return true;
}

/* Reshape to a shape given at run time (its count a constant: the result's rank): entry j is
 * the dim, 0 the input's dim j (unless allowzero), -1 the one dim inferred from the element
 * count; a shape that does not hold the input's elements is invalid. */
static bool reshape_dims(LlvmEmit *e, const LlvmDims *sx, ValDims *v) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId vs = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    LlvmDims sy;
    LLVMValueRef cnt;
    bool found;
    if (!int_list(e, vs, &cnt) || !LLVMIsAConstantInt(cnt) || !llvm_dims_of(e, ir_node_result(g, n, 0), &sy) ||
        LLVMConstIntGetSExtValue(cnt) != (int64_t)sy.rank)
        return false;
    bool allowzero = ir_node_attr_int(g, n, "allowzero", &found) != 0;
    LLVMBuilderRef b = e->b;
    LLVMValueRef zero = lo_i64(e, 0), one = lo_i64(e, 1), minus = lo_i64(e, -1);
    LLVMValueRef total = llvm_dims_prod(e, sx, 0, sx->rank), known = one, n_infer = zero;
    LLVMValueRef ent[IR_MAX_RANK];
    v->rank = sy.rank;
    for (uint32_t j = 0; j < sy.rank; j++) {
        LLVMValueRef d = list_at(e, vs, lo_i64(e, j)), is_inf = ieq(e, d, minus);
        if (!allowzero) d = sel(e, ieq(e, d, zero), j < sx->rank ? sx->dim[j] : zero, d);
        if (!allowzero && j >= sx->rank) v->bad = LLVMBuildOr(b, v->bad, ieq(e, list_at(e, vs, lo_i64(e, j)), zero), "");
        v->bad = LLVMBuildOr(b, v->bad, ilt(e, d, minus), "");
        n_infer = LLVMBuildAdd(b, n_infer, LLVMBuildZExt(b, is_inf, lo_i64_t(e), ""), "");
        known = LLVMBuildMul(b, known, sel(e, is_inf, one, d), "");
        ent[j] = d;
    }
    LLVMValueRef one_inf = ieq(e, n_infer, one), safe = sel(e, ieq(e, known, zero), one, known);
    LLVMValueRef inferred = LLVMBuildSDiv(b, total, safe, "");
    v->bad = LLVMBuildOr(b, v->bad, LLVMBuildICmp(b, LLVMIntSGT, n_infer, one, ""), "");
    /* with a -1: the others divide the element count (and are not 0); without: they hold it */
    LLVMValueRef inf_bad = LLVMBuildOr(b, ieq(e, known, zero), LLVMBuildICmp(b, LLVMIntNE, LLVMBuildSRem(b, total, safe, ""), zero, ""), "");
    v->bad = LLVMBuildOr(b, v->bad, sel(e, one_inf, inf_bad, LLVMBuildICmp(b, LLVMIntNE, known, total, "")), "");
    for (uint32_t j = 0; j < sy.rank; j++) v->dim[j] = sel(e, ieq(e, ent[j], minus), inferred, ent[j]);
    return true;
}

IrStatus cpu_value_dims(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LowerValueDim vd[IR_SYM_PLAN_MAX];
    uint32_t nv = lower_value_dim_syms(g, n, vd, IR_SYM_PLAN_MAX);
    if (!nv) return IR_OK;
    LlvmDims sx;
    if (nv > IR_SYM_PLAN_MAX || !llvm_dims_of(e, ir_node_operand(g, n, 0), &sx))
        return lo_unsupported(e, "with dims its operands decide and an unknown input shape");
    IrOp op = ir_node_op(g, n);
    LLVMValueRef bad = i1c(e, false), val[IR_SYM_PLAN_MAX];
    for (uint32_t r = 0; r < ir_node_num_results(g, n); r++) {
        bool needed = false;
        for (uint32_t i = 0; i < nv; i++) needed |= vd[i].result == r;
        if (!needed) continue;
        ValDims v = {.bad = i1c(e, false)};
        bool ok = op == IR_OP_SLICE ? slice_dims(e, &sx, &v)
                  : op == IR_OP_SPLIT ? split_dims(e, &sx, r, &v)
                  : op == IR_OP_TOP_K ? topk_dims(e, &sx, &v)
                  : op == IR_OP_REDUCE_SUM ? reduce_dims(e, &sx, &v)
                  : op == IR_OP_RESHAPE ? reshape_dims(e, &sx, &v)
                  : (op == IR_OP_SQUEEZE || op == IR_OP_UNSQUEEZE) && squeeze_dims(e, &sx, op == IR_OP_UNSQUEEZE, &v);
        if (!ok) return lo_unsupported(e, "with these operands deciding its result's dims at run time");
        bad = LLVMBuildOr(e->b, bad, v.bad, "");
        for (uint32_t i = 0; i < nv; i++)
            if (vd[i].result == r) {
                if (vd[i].dim >= v.rank) return lo_unsupported(e, "with these shapes");
                val[i] = v.dim[vd[i].dim];
                bad = LLVMBuildOr(e->b, bad, LLVMBuildICmp(e->b, LLVMIntSGT, val[i], lo_i64(e, vd[i].hi), ""), "");
            }
    }
    char msg[160];
    snprintf(msg, sizeof msg, "%s: the operands that decide its result's shape are invalid (axes out of range or repeated, "
             "sizes that do not fit the input)", ir_op_name(op));
    lo_fail_if(e, bad, msg);
    LLVMValueRef syms = llvm_syms(e);
    for (uint32_t i = 0; i < nv; i++) {
        LLVMValueRef idx = lo_i64(e, vd[i].sym);
        LLVMBuildStore(e->b, sel(e, bad, lo_i64(e, 0), val[i]), LLVMBuildGEP2(e->b, lo_i64_t(e), syms, &idx, 1, ""));
    }
    return IR_OK;
}

/* Slice with starts/ends/axes/steps whose count comes at run time too: the effective starts and
 * steps per dim (slice_params), then one copy nest over the result. */
IrStatus cpu_data_slice_any(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrValueId x = ir_node_operand(g, e->node, 0), y = ir_node_result(g, e->node, 0);
    IrDType dt = lo_dtype(e, x);
    LlvmDims sx, sy;
    if (!lo_store_t(e, dt)) return lo_unsupported_dtype(e, dt);
    if (!llvm_dims_of(e, x, &sx) || !llvm_dims_of(e, y, &sy) || sx.rank != sy.rank || sx.rank == 0)
        return lo_unsupported(e, "with an unknown shape");
    LLVMTypeRef i64 = lo_i64_t(e), at = LLVMArrayType(i64, sx.rank);
    LLVMValueRef st = LLVMBuildAlloca(e->ab, at, ""), sp = LLVMBuildAlloca(e->ab, at, ""), ln = LLVMBuildAlloca(e->ab, at, "");
    LLVMValueRef bad;
    if (!slice_params(e, &sx, st, sp, ln, &bad)) return lo_unsupported(e, "with these starts");
    LLVMValueRef strides[2][IR_MAX_RANK], dense[IR_MAX_RANK], base[2] = {lo_i64(e, 0), lo_i64(e, 0)};
    llvm_dims_strides(e, &sy, strides[0]);
    llvm_dims_strides(e, &sx, dense);
    for (uint32_t k = 0; k < sx.rank; k++) {
        LLVMValueRef kk = lo_i64(e, k);
        LLVMValueRef s0 = LLVMBuildLoad2(e->b, i64, lo_gep(e, i64, st, kk), ""), s1 = LLVMBuildLoad2(e->b, i64, lo_gep(e, i64, sp, kk), "");
        base[1] = LLVMBuildAdd(e->b, base[1], LLVMBuildMul(e->b, s0, dense[k], ""), "");
        strides[1][k] = LLVMBuildMul(e->b, s1, dense[k], "");
    }
    /* the result's dims are the ones computed (cpu_value_dims) unless the operands are invalid */
    LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildNot(e->b, bad, ""));
    Copy c = {dt, lo_buf(e, y), lo_buf(e, x)};
    llvm_nest(e, &sy, 2, strides, base, copy_body, &c);
    lo_if_end(e, after);
    return IR_OK;
}

/* ---- the table's entry points (backend/cpu/cpu_ops.def names them per op) ------------------- */

IrStatus cpu_data_copy(LlvmEmit *e) { return copy_bytes(e, ir_node_operand(e->g, e->node, 0), ir_node_result(e->g, e->node, 0)); }
IrStatus cpu_data_dropout(LlvmEmit *e) { return gen_dropout(e); }
IrStatus cpu_data_constant_of_shape(LlvmEmit *e) { return gen_constant_of_shape(e); }
IrStatus cpu_data_expand(LlvmEmit *e) { return gen_expand(e); }
IrStatus cpu_data_tile(LlvmEmit *e) { return gen_tile(e); }
IrStatus cpu_data_split(LlvmEmit *e) { return gen_split(e); }
IrStatus cpu_data_pad(LlvmEmit *e) { return gen_pad(e); }
IrStatus cpu_data_trilu(LlvmEmit *e) { return gen_trilu(e); }
IrStatus cpu_data_gather_elements(LlvmEmit *e) { return gen_gather_elements(e); }
IrStatus cpu_data_scatter_elements(LlvmEmit *e) { return gen_scatter_elements(e); }
IrStatus cpu_data_topk(LlvmEmit *e) { return gen_topk(e); }
IrStatus cpu_data_gather_nd(LlvmEmit *e) { return gen_nd(e, false); }
IrStatus cpu_data_scatter_nd(LlvmEmit *e) { return gen_nd(e, true); }
IrStatus cpu_data_quantize(LlvmEmit *e) { return gen_qdq(e, true); }
IrStatus cpu_data_dequantize(LlvmEmit *e) { return gen_qdq(e, false); }
IrStatus cpu_data_dynamic_quantize(LlvmEmit *e) { return gen_dynamic_quantize(e); }
IrStatus cpu_data_einsum(LlvmEmit *e) { return gen_einsum(e); }
IrStatus cpu_data_depth_to_space(LlvmEmit *e) { return gen_depth_space(e, true); }
IrStatus cpu_data_space_to_depth(LlvmEmit *e) { return gen_depth_space(e, false); }
IrStatus cpu_data_reverse_sequence(LlvmEmit *e) { return gen_reverse_sequence(e); }
IrStatus cpu_data_grid_sample(LlvmEmit *e) { return gen_grid_sample(e); }
IrStatus cpu_data_eye_like(LlvmEmit *e) { return gen_eye_like(e); }
IrStatus cpu_data_one_hot(LlvmEmit *e) { return gen_one_hot(e); }

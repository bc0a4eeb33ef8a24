/* Kernels over shapes known at run time only: a node whose shapes mention symbols (S, B*S, S+1)
 * reads the symbols' values from the run's symbol array (slot lower_sym_slot: int64 values by
 * symbol id) and evaluates every dim, stride and trip count from them in the kernel, so one
 * compiled artifact runs every binding its constraints allow. Covers every elementwise op of
 * the typed emitter (cpu/elementwise.c: all dtypes, Cast, comparisons, Where; broadcasting decided
 * at run time where a dim is not the output's), MatMul and Gemm through the
 * BLAS GEMM (MatMuls with a few constant columns of B or of A as generated loops), attention
 * groups (fused Q*K^T, members, Softmax, P*V: one kernel, three passes per query row),
 * elementwise groups (one nest, the members on values, only the results stored), row groups
 * (members before and after one Softmax/LogSoftmax/LayerNorm over a constant-length last axis), 2-D Conv (im2col + GEMM),
 * Range and Shape/Size; rows flagged
 * CPU_ANY_SHAPE (cpu_ops.def) run their one emitter here; anything else with a symbolic shape is
 * refused naming the op. Also `irt_shapes`,
 * the function the runtime calls first: it computes the defined symbols (T == S + 1) into the
 * symbol array, gives the output dims and the workspace extent of the binding, and the
 * equalities between symbols the runtime checks.
 */
#include "backend/cpu/cpu.h"

typedef struct Dyn {
    LlvmEmit *e; /* its syms, part, np and part_used serve the shape kit of llvm/dims.h */
    LLVMBuilderRef b;
    LLVMContextRef ctx;
    bool blas;
} Dyn;

#define DYN_MAX_OPS LLVM_NEST_MAX_OPS

static LLVMTypeRef i64t(Dyn *d) { return LLVMInt64TypeInContext(d->ctx); }
static LLVMValueRef ci(Dyn *d, int64_t v) { return LLVMConstInt(i64t(d), (unsigned long long)v, 1); }
static LLVMValueRef mul(Dyn *d, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWMul(d->b, a, b, ""); }
static LLVMValueRef add(Dyn *d, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildNSWAdd(d->b, a, b, ""); }
static void loop_v(Dyn *d, LlvmLoop *l, LLVMValueRef n) { llvm_loop_begin_v(d->b, d->e->fn, l, n); }
static void loop_c(Dyn *d, LlvmLoop *l, int64_t n) { llvm_loop_begin(d->b, d->e->fn, l, n); }
static void loop_end(Dyn *d, LlvmLoop *l) { llvm_loop_end(d->b, d->e->fn, l); }

/* The shape kit of llvm/dims.h under this file's short names. */
typedef LlvmDims DShape;
static LLVMValueRef syms_array(Dyn *d, const IrGraph *g) { (void)g; return llvm_syms(d->e); }
static LLVMValueRef dexpr(Dyn *d, const IrGraph *g, IrExprId x) { (void)g; return llvm_dim_expr(d->e, x); }
static bool dshape(Dyn *d, IrValueId v, DShape *s) { return llvm_dims_of(d->e, v, s); }
static LLVMValueRef dprod(Dyn *d, const DShape *s, uint32_t from, uint32_t to) { return llvm_dims_prod(d->e, s, from, to); }
static int64_t cprod(const DShape *s, uint32_t from, uint32_t to) { return llvm_dims_cprod(s, from, to); }
static void dstrides(Dyn *d, const DShape *s, const DShape *out, LLVMValueRef *st) { llvm_dims_bcast_strides(d->e, s, out, st); }

typedef void (*DynBody)(Dyn *d, LLVMValueRef *offs, void *user);
typedef struct DynNest {
    Dyn *d;
    DynBody body;
    void *user;
} DynNest;
static void nest_body(LlvmEmit *e, LLVMValueRef *offs, LLVMValueRef *idx, void *user) {
    (void)e, (void)idx;
    DynNest *c = user;
    c->body(c->d, offs, c->user);
}
/* Loop nest over shape s (llvm_nest): offs[j] = base[j] + sum_k i_k * st[j][k]. */
static void nest(Dyn *d, const DShape *s, uint32_t n_ops, LLVMValueRef (*st)[IR_MAX_RANK], const LLVMValueRef *base,
                 DynBody body, void *user) {
    DynNest c = {d, body, user};
    llvm_nest(d->e, s, n_ops, st, base, nest_body, &c);
}

static IrStatus refuse(Dyn *d, const char *why) {
    const LlvmEmit *e = d->e;
    ir_diag_at_node(e->diag, e->g, e->node, IR_SEV_ERROR,
                    "the llvm backend does not support %s %s when its shapes are known at run time only "
                    "(bind the symbols with --input to compile for one shape)",
                    ir_op_name(ir_node_op(e->g, e->node)), why);
    return IR_EUNSUPPORTED;
}

static LLVMValueRef buf(Dyn *d, IrValueId v) { return lo_buf(d->e, v); }

/* ---- elementwise groups ------------------------------------------------------------------
 * An `irtool.fused` group of typed elementwise members (any dtype but f16/bf16 results, which the
 * op-by-op kernels round at every store) over run-time shapes: one nest over the group's
 * result shape, each group operand and graph constant loaded once per point with numpy
 * strides decided at run time (dstrides), the members evaluated in order on values, only the
 * results stored. Every member's value broadcasts to the results' shape (the group's results
 * all have one shape), so evaluating it at each result point gives the op-by-op numbers. */



/* Same rank and the same dims (equal expressions or equal constants). */
static bool same_dims(const IrGraph *g, IrTypeId a, IrTypeId b) {
    uint32_t r = ir_type_rank(g, a);
    if (!a || !b || r == IR_RANK_UNKNOWN || r != ir_type_rank(g, b)) return false;
    for (uint32_t k = 0; k < r; k++) {
        IrExprId x = ir_type_dims(g, a)[k], y = ir_type_dims(g, b)[k];
        int64_t cx, cy;
        if (x != y && !(ir_expr_is_const(g, x, &cx) && ir_expr_is_const(g, y, &cy) && cx == cy)) return false;
    }
    return true;
}

bool llvm_dyn_ew_group(const IrGraph *g, IrNodeId n) {
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) != 1 || !llvm_dyn_node(g, n)) return false;
    IrRegionId body = ir_node_region_at(g, n, 0);
    uint32_t nr = ir_node_num_results(g, n);
    if (nr == 0 || ir_region_num_outputs(g, body) != nr || ir_region_num_args(g, body) != ir_node_num_operands(g, n) ||
        !ir_region_first(g, body))
        return false;
    IrTypeId ot = ir_value_type(g, ir_node_result(g, n, 0));
    uint32_t orank = ot ? ir_type_rank(g, ot) : IR_RANK_UNKNOWN, loads = 0;
    if (orank == IR_RANK_UNKNOWN || orank > IR_MAX_RANK) return false;
    for (IrNodeId m = ir_region_first(g, body); m; m = ir_node_next(g, m)) {
        if (ir_node_num_results(g, m) != 1 || ir_node_num_regions(g, m) != 0 || !llvm_ops_ew_member_ok(g, m)) return false;
        IrTypeId rt = ir_value_type(g, ir_node_result(g, m, 0));
        IrDType dt = rt ? ir_type_dtype(g, rt) : IR_DTYPE_NONE;
        if (!rt || dt == IR_DTYPE_F16 || dt == IR_DTYPE_BF16 || ir_type_rank(g, rt) > orank) return false;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (!v || ir_value_kind(g, v) == IR_VALUE_RESULT) continue;
            /* outer values come in through the group's operands (liveness sees only those),
             * graph constants excepted */
            if (!lower_in_region(g, v, body) && ir_value_kind(g, v) != IR_VALUE_CONST) return false;
            IrTypeId t = ir_value_type(g, v);
            if (!t || ir_type_rank(g, t) == IR_RANK_UNKNOWN || ir_type_rank(g, t) > orank) return false;
            loads++; /* an upper bound: a value read twice counts twice */
        }
    }
    if (nr + loads > DYN_MAX_OPS) return false;
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId o = ir_region_output(g, body, i), res = ir_node_result(g, n, i);
        if (!o || ir_value_kind(g, o) != IR_VALUE_RESULT || !lower_in_region(g, o, body)) return false;
        if (res && !same_dims(g, ir_value_type(g, res), ot)) return false;
    }
    return true;
}

typedef struct DGroup {
    IrRegionId body;
    IrNodeId first;   /* the first member evaluated (a contraction's epilogue: the one after it) */
    IrValueId read_back; /* a contraction's result, read from store 0 before the members (0: none) */
    uint32_t n_store, n_load, n_mem;
    IrValueId store_v[DYN_MAX_OPS], load_v[DYN_MAX_OPS];
    IrDType store_t[DYN_MAX_OPS], load_t[DYN_MAX_OPS];
    LLVMValueRef store_p[DYN_MAX_OPS], load_p[DYN_MAX_OPS];
    LlvmEwPoint **mem; /* by member, in order */
    LLVMValueRef *vals; /* compute values by value id, at the current point */
    /* scoped noalias metadata, by operand (stores, then loads): each buffer is its own scope */
    LLVMValueRef scope[DYN_MAX_OPS], others[DYN_MAX_OPS];
    unsigned k_scope, k_noalias;
} DGroup;

/* The group's buffers never overlap (the memory plan keeps a node's operands live while it places
 * its results), which LLVM cannot see through the slot array: without saying so every access
 * needs a run-time overlap check, and an inner loop of a few points (8 channels) was then not
 * vectorized at all (2x slower than op by op). */
static void group_scopes(Dyn *d, DGroup *c, uint32_t n_ops) {
    char name[64];
    snprintf(name, sizeof name, "irtool.group.%u", (unsigned)d->e->node);
    LLVMMetadataRef dom_name = LLVMMDStringInContext2(d->ctx, name, strlen(name));
    LLVMMetadataRef dom = LLVMMDNodeInContext2(d->ctx, &dom_name, 1), sc[DYN_MAX_OPS];
    for (uint32_t j = 0; j < n_ops; j++) {
        snprintf(name, sizeof name, "irtool.group.%u.%u", (unsigned)d->e->node, j);
        LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(d->ctx, name, strlen(name)), dom};
        sc[j] = LLVMMDNodeInContext2(d->ctx, ops, 2);
    }
    for (uint32_t j = 0; j < n_ops; j++) {
        LLVMMetadataRef rest[DYN_MAX_OPS];
        uint32_t nr = 0;
        for (uint32_t k = 0; k < n_ops; k++)
            if (k != j) rest[nr++] = sc[k];
        c->scope[j] = LLVMMetadataAsValue(d->ctx, LLVMMDNodeInContext2(d->ctx, &sc[j], 1));
        c->others[j] = LLVMMetadataAsValue(d->ctx, LLVMMDNodeInContext2(d->ctx, rest, nr));
    }
    c->k_scope = LLVMGetMDKindIDInContext(d->ctx, "alias.scope", 11);
    c->k_noalias = LLVMGetMDKindIDInContext(d->ctx, "noalias", 7);
}

/* Tags the memory access that produced v (a load, possibly under its dtype's conversion) or, for
 * NULL, the store just built, with operand j's scopes. */
static void group_tag(Dyn *d, DGroup *c, uint32_t j, LLVMValueRef v) {
    LLVMValueRef in = v ? v : LLVMGetLastInstruction(LLVMGetInsertBlock(d->b));
    for (int depth = 0; in && depth < 4 && !LLVMIsALoadInst(in) && !LLVMIsAStoreInst(in); depth++)
        in = LLVMIsAInstruction(in) && LLVMGetNumOperands(in) > 0 ? LLVMGetOperand(in, 0) : NULL;
    if (!in || !LLVMIsAInstruction(in) || (!LLVMIsALoadInst(in) && !LLVMIsAStoreInst(in))) return;
    LLVMSetMetadata(in, c->k_scope, c->scope[j]);
    LLVMSetMetadata(in, c->k_noalias, c->others[j]);
}

/* Member m (prepared as p) at the current point: its operands' values from vals, its result into
 * vals. */
static void member_eval(Dyn *d, const LlvmEwPoint *p, IrNodeId m, LLVMValueRef *vals) {
    const IrGraph *g = d->e->g;
    bool present[LLVM_OPS_MAX_OPS] = {0};
    LLVMValueRef x[LLVM_OPS_MAX_OPS] = {0};
    uint32_t no = llvm_ops_ew_point_inputs(p, present);
    for (uint32_t k = 0; k < no; k++)
        if (present[k]) x[k] = vals[ir_node_operand(g, m, k)];
    vals[ir_node_result(g, m, 0)] = llvm_ops_ew_member(d->e, p, x);
}

static void group_body(Dyn *d, LLVMValueRef *o, void *user) {
    DGroup *c = user;
    const IrGraph *g = d->e->g;
    for (uint32_t j = 0; j < c->n_load; j++) {
        c->vals[c->load_v[j]] = lo_load(d->e, c->load_t[j], c->load_p[j], o[c->n_store + j]);
        group_tag(d, c, c->n_store + j, c->vals[c->load_v[j]]);
    }
    uint32_t i = 0;
    for (IrNodeId m = c->first; m; m = ir_node_next(g, m), i++) member_eval(d, c->mem[i], m, c->vals);
    for (uint32_t j = 0; j < c->n_store; j++) {
        lo_store(d->e, c->store_t[j], c->store_p[j], o[j], c->vals[c->store_v[j]]);
        group_tag(d, c, j, NULL);
    }
}

/* Fills c for the members from c->first on, over output shape os: the group's results as stores
 * (after any store c already holds), each outside operand once as a load (after any load it
 * holds), with strides against os in strides[store or load index]. Returns non-zero (refusing)
 * when an operand does not fit. */
static IrStatus group_prepare(Dyn *d, DGroup *c, const DShape *os, LLVMValueRef (*strides)[IR_MAX_RANK], bool results) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    DShape s;
    for (IrNodeId m = c->first; m; m = ir_node_next(g, m)) c->n_mem++;
    c->mem = calloc(c->n_mem ? c->n_mem : 1, sizeof *c->mem);
    c->vals = calloc(ir_graph_num_values(g) + 1, sizeof *c->vals);
    if (!c->mem || !c->vals) return IR_ENOMEM;
    for (uint32_t i = 0; results && i < ir_node_num_results(g, n); i++) {
        IrValueId res = ir_node_result(g, n, i);
        if (!res) continue;
        c->store_v[c->n_store] = ir_region_output(g, c->body, i);
        c->store_p[c->n_store] = buf(d, res);
        c->store_t[c->n_store] = lower_value_dtype(g, res);
        dstrides(d, os, os, strides[c->n_store]);
        c->n_store++;
    }
    uint32_t i = 0;
    for (IrNodeId m = c->first; m; m = ir_node_next(g, m), i++) {
        IrStatus st = llvm_ops_ew_member_new(d->e, m, &c->mem[i]);
        if (st) return st;
        for (uint32_t k = 0; k < ir_node_num_operands(g, m); k++) {
            IrValueId v = ir_node_operand(g, m, k);
            if (!v || ir_value_kind(g, v) == IR_VALUE_RESULT) continue;
            bool seen = false;
            for (uint32_t j = 0; j < c->n_load && !seen; j++) seen = c->load_v[j] == v;
            if (seen) continue;
            IrValueId src = lower_outer_value(g, n, v);
            if (c->n_store + c->n_load >= DYN_MAX_OPS || !dshape(d, src, &s) || s.rank > os->rank)
                return refuse(d, "group with these operands");
            c->load_v[c->n_load] = v;
            c->load_p[c->n_load] = buf(d, src);
            c->load_t[c->n_load] = lower_value_dtype(g, src);
            dstrides(d, &s, os, strides[c->n_store + c->n_load]);
            c->n_load++;
        }
    }
    group_scopes(d, c, c->n_store + c->n_load);
    return IR_OK;
}

static void group_free(DGroup *c) {
    for (uint32_t k = 0; c->mem && k < c->n_mem; k++) free(c->mem[k]);
    free(c->mem);
    free(c->vals);
}

static IrStatus gen_group(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    if (!llvm_dyn_ew_group(g, n)) return refuse(d, "group with these members or shapes");
    DGroup c = {.body = ir_node_region_at(g, n, 0)};
    c.first = ir_region_first(g, c.body);
    DShape os;
    LLVMValueRef strides[DYN_MAX_OPS][IR_MAX_RANK];
    IrStatus st = dshape(d, ir_node_result(g, n, 0), &os) ? IR_OK : refuse(d, "on an unranked tensor");
    if (!st) st = group_prepare(d, &c, &os, strides, true);
    if (!st) nest(d, &os, c.n_store + c.n_load, strides, NULL, group_body, &c);
    group_free(&c);
    return st;
}

/* ---- row groups over run-time shapes -------------------------------------------------------
 * An `irtool.fused` group of one row op R (Softmax, LogSoftmax or LayerNormalization over the
 * last axis) with f32 elementwise members before it (feeding R: a residual Add, a scale, a
 * mask) and after it (using R's result), the row length a constant and the rows' dims known
 * at run time (B, S): per row, the members before R computed into a row buffer, R on it, then
 * the members after R, only the group's results stored. */

typedef struct DRow {
    IrNodeId red;
    uint32_t rx;
    int64_t len;
    uint8_t *phase; /* by node id: 1 before R, 2 after R, 3 R */
} DRow;

/* v's dims broadcast to those of t (numpy, aligned at the end): each the same dim or 1. */
static bool bcast_dims(const IrGraph *g, IrTypeId v, IrTypeId t) {
    uint32_t r = v ? ir_type_rank(g, v) : IR_RANK_UNKNOWN, rt = ir_type_rank(g, t);
    if (r == IR_RANK_UNKNOWN || r > rt) return false;
    for (uint32_t k = 0; k < r; k++) {
        IrExprId x = ir_type_dims(g, v)[k], y = ir_type_dims(g, t)[rt - r + k];
        int64_t cx, cy;
        bool kx = ir_expr_is_const(g, x, &cx), ky = ir_expr_is_const(g, y, &cy);
        if (x != y && !(kx && cx == 1) && !(kx && ky && cx == cy)) return false;
    }
    return true;
}


static bool drow_scan(const IrGraph *g, IrNodeId n, DRow *r) {
    memset(r, 0, sizeof *r);
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) != 1 || !llvm_dyn_node(g, n)) return false;
    IrRegionId body = ir_node_region_at(g, n, 0);
    uint32_t nr = ir_node_num_results(g, n), ops = nr;
    if (nr == 0 || ir_region_num_outputs(g, body) != nr || ir_region_num_args(g, body) != ir_node_num_operands(g, n))
        return false;
    for (IrNodeId m = ir_region_first(g, body); m; m = ir_node_next(g, m)) {
        IrOp op = ir_node_op(g, m);
        IrValueId x0 = ir_node_operand(g, m, 0), y0 = ir_node_result(g, m, 0);
        if (!x0 || !y0 || ir_node_num_regions(g, m) || lower_value_dtype(g, y0) != IR_DTYPE_F32) return false;
        if (op == IR_OP_SOFTMAX || op == IR_OP_LOG_SOFTMAX || op == IR_OP_LAYER_NORMALIZATION) {
            IrTypeId xt = ir_value_type(g, x0);
            uint32_t rx = xt ? ir_type_rank(g, xt) : IR_RANK_UNKNOWN;
            bool found;
            int64_t axis = ir_node_attr_int(g, m, "axis", &found);
            if (r->red || rx == IR_RANK_UNKNOWN || rx < 1 || rx > IR_MAX_RANK ||
                ir_shape_axis(found ? axis : -1, rx) != (int64_t)rx - 1 || lower_value_dtype(g, x0) != IR_DTYPE_F32)
                return false;
            for (uint32_t i = 1; i < ir_node_num_results(g, m); i++)
                if (ir_node_result(g, m, i)) return false;
            if (!ir_expr_is_const(g, ir_type_dims(g, xt)[rx - 1], &r->len) || r->len < 1 || r->len > LLVM_ROW_GROUP_MAX_LEN) return false;
            if (!same_dims(g, ir_value_type(g, y0), xt)) return false;
            r->red = m;
            r->rx = rx;
        } else if (op == IR_OP_WHERE || ir_node_num_results(g, m) != 1 || !llvm_ops_ew_member_ok(g, m)) {
            return false;
        }
        ops += ir_node_num_operands(g, m);
    }
    if (!r->red || ops + 2 > DYN_MAX_OPS) return false;
    IrTypeId xt = ir_value_type(g, ir_node_operand(g, r->red, 0));
    r->phase = calloc(ir_graph_node_capacity(g) + 1, 1);
    uint8_t *need = calloc(ir_graph_node_capacity(g) + 1, 1);
    bool ok = r->phase && need;
    IrValueId rout = ir_node_result(g, r->red, 0);
    if (ok) {
        /* after R: members using R's result or such a member's; before R: those R needs */
        r->phase[r->red] = 3;
        for (IrNodeId m = ir_node_next(g, r->red); m; m = ir_node_next(g, m))
            for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
                IrValueId v = ir_node_operand(g, m, i);
                if (v && (v == rout || (lower_member_result(g, v, body) && r->phase[ir_value_def_node(g, v)] == 2))) r->phase[m] = 2;
            }
        need[r->red] = 1;
        for (IrNodeId m = r->red; m; m = ir_node_prev(g, m)) {
            if (!need[m]) continue;
            for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
                IrValueId v = ir_node_operand(g, m, i);
                if (lower_member_result(g, v, body)) need[ir_value_def_node(g, v)] = 1;
            }
        }
    }
    for (IrNodeId m = ok ? ir_region_first(g, body) : 0; m && ok; m = ir_node_next(g, m)) {
        if (m == r->red) continue;
        if (!r->phase[m]) r->phase[m] = need[m] ? 1 : 0;
        if (!r->phase[m] || (r->phase[m] == 2 && need[m])) ok = false;
    }
    free(need);
    /* operands: arguments, constants or members of the same phase (R's result after R), f32,
     * broadcasting to the rows; LayerNorm's scale and bias one value per row element */
    for (IrNodeId m = ok ? ir_region_first(g, body) : 0; m && ok; m = ir_node_next(g, m)) {
        uint8_t ph = r->phase[m];
        for (uint32_t i = 0; i < ir_node_num_operands(g, m) && ok; i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (!v) continue;
            bool mem = lower_member_result(g, v, body);
            IrTypeId t = ir_value_type(g, v);
            if (!mem && !lower_in_region(g, v, body) && ir_value_kind(g, v) != IR_VALUE_CONST) ok = false;
            else if (mem && ph != 3 && r->phase[ir_value_def_node(g, v)] != ph && !(ph == 2 && v == rout)) ok = false;
            else if (ph == 3 && i > 0) {
                int64_t c;
                ok = !mem && ir_node_op(g, m) == IR_OP_LAYER_NORMALIZATION && lower_value_dtype(g, v) == IR_DTYPE_F32 && t &&
                     ir_type_rank(g, t) == 1 && ir_expr_is_const(g, ir_type_dims(g, t)[0], &c) && c == r->len;
            } else if (ph != 3) {
                int64_t c;
                uint32_t rk = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
                ok = lower_value_dtype(g, v) == IR_DTYPE_F32 && bcast_dims(g, t, xt) &&
                     (rk == 0 || (ir_expr_is_const(g, ir_type_dims(g, t)[rk - 1], &c) && (c == 1 || c == r->len)));
            }
        }
        if (ok && ph != 3) ok = same_dims(g, ir_value_type(g, ir_node_result(g, m, 0)), xt);
    }
    if (ok && ir_node_op(g, r->red) == IR_OP_LAYER_NORMALIZATION)
        ok = ir_node_num_operands(g, r->red) >= 2 && ir_node_operand(g, r->red, 1);
    for (uint32_t i = 0; i < nr && ok; i++) {
        IrValueId o = ir_region_output(g, body, i), res = ir_node_result(g, n, i);
        ok = lower_member_result(g, o, body) && (!res || same_dims(g, ir_value_type(g, res), xt));
    }
    if (!ok) {
        free(r->phase);
        r->phase = NULL;
    }
    return ok;
}

bool llvm_dyn_row_group(const IrGraph *g, IrNodeId n) {
    DRow r;
    bool ok = drow_scan(g, n, &r);
    free(r.phase);
    return ok;
}

typedef struct DRowCtx {
    DRow r;
    IrRegionId body;
    uint32_t n;
    IrValueId val[DYN_MAX_OPS];
    bool store[DYN_MAX_OPS];
    uint8_t tag[DYN_MAX_OPS]; /* 1: the loop before R, 2: after */
    LLVMValueRef ptr[DYN_MAX_OPS], step[DYN_MAX_OPS]; /* step: along the row (NULL: 0) */
    LlvmEwPoint **mem;                                 /* by member (NULL for R) */
    LLVMValueRef *vals, xb, yb;
    LlvmRow row;
} DRowCtx;

/* Adds v at pointer p read (or written) in the loop of tag: its strides over the rows into
 * st[k], its step along the row. */
static IrStatus drow_op(Dyn *d, DRowCtx *c, const DShape *xs, IrValueId v, LLVMValueRef p, bool store, uint8_t tag,
                        LLVMValueRef (*st)[IR_MAX_RANK]) {
    for (uint32_t k = 0; k < c->n && !store; k++)
        if (c->val[k] == v && !c->store[k] && c->tag[k] == tag) return IR_OK;
    DShape s;
    if (c->n >= DYN_MAX_OPS || !dshape(d, v, &s)) return refuse(d, "group with these operands");
    uint32_t k = c->n++;
    LLVMValueRef full[IR_MAX_RANK];
    dstrides(d, &s, xs, full);
    c->val[k] = v;
    c->store[k] = store;
    c->tag[k] = tag;
    c->ptr[k] = p;
    c->step[k] = full[xs->rank - 1];
    for (uint32_t i = 0; i + 1 < xs->rank; i++) st[k][i] = full[i];
    return IR_OK;
}

static void drow_access(Dyn *d, DRowCtx *c, LLVMValueRef *o, LLVMValueRef j, uint8_t tag, bool store) {
    for (uint32_t k = 0; k < c->n; k++) {
        if (c->tag[k] != tag || c->store[k] != store) continue;
        LLVMValueRef at = c->step[k] ? add(d, o[k], mul(d, j, c->step[k])) : o[k];
        if (store) lo_store(d->e, IR_DTYPE_F32, c->ptr[k], at, c->vals[c->val[k]]);
        else c->vals[c->val[k]] = lo_load(d->e, IR_DTYPE_F32, c->ptr[k], at);
    }
}

static void drow_phase(Dyn *d, DRowCtx *c, LLVMValueRef *o, uint8_t phase) {
    const IrGraph *g = d->e->g;
    LlvmLoop l;
    loop_c(d, &l, c->r.len);
    drow_access(d, c, o, l.iv, phase, false);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(d->ctx);
    if (phase == 2)
        c->vals[ir_node_result(g, c->r.red, 0)] = LLVMBuildLoad2(d->b, f32, LLVMBuildGEP2(d->b, f32, c->yb, &l.iv, 1, ""), "");
    uint32_t i = 0;
    for (IrNodeId m = ir_region_first(g, c->body); m; m = ir_node_next(g, m), i++)
        if (c->r.phase[m] == phase) member_eval(d, c->mem[i], m, c->vals);
    if (phase == 1)
        LLVMBuildStore(d->b, c->vals[ir_node_operand(g, c->r.red, 0)], LLVMBuildGEP2(d->b, f32, c->xb, &l.iv, 1, ""));
    drow_access(d, c, o, l.iv, phase, true);
    loop_end(d, &l);
}

static void drow_body(Dyn *d, LLVMValueRef *o, void *user) {
    DRowCtx *c = user;
    drow_phase(d, c, o, 1);
    llvm_row_f32(d->e, &c->row);
    drow_phase(d, c, o, 2);
}

/* The row group r (drow_scan's, its phases then freed here). */
static IrStatus gen_row_group(Dyn *d, DRow r) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    DRowCtx c = {.r = r, .body = ir_node_region_at(g, n, 0)};
    uint32_t n_mem = 0;
    for (IrNodeId m = ir_region_first(g, c.body); m; m = ir_node_next(g, m)) n_mem++;
    c.mem = calloc(n_mem, sizeof *c.mem);
    c.vals = calloc(ir_graph_num_values(g) + 1, sizeof *c.vals);
    IrStatus st = c.mem && c.vals ? IR_OK : IR_ENOMEM;
    IrNodeId red = c.r.red;
    IrValueId rin = ir_node_operand(g, red, 0);
    DShape xs;
    LLVMValueRef strides[DYN_MAX_OPS][IR_MAX_RANK];
    if (!st && !dshape(d, rin, &xs)) st = refuse(d, "on an unranked tensor");
    /* loads: the members' operands that are not members, per phase (R's input when it comes from
     * outside); stores: the group's results */
    uint32_t i = 0;
    for (IrNodeId m = ir_region_first(g, c.body); !st && m; m = ir_node_next(g, m), i++) {
        if (m == red) continue;
        st = llvm_ops_ew_member_new(d->e, m, &c.mem[i]);
        for (uint32_t k = 0; !st && k < ir_node_num_operands(g, m); k++) {
            IrValueId v = ir_node_operand(g, m, k);
            if (v && !lower_member_result(g, v, c.body))
                st = drow_op(d, &c, &xs, v, buf(d, lower_outer_value(g, n, v)), false, c.r.phase[m], strides);
        }
    }
    if (!st && !lower_member_result(g, rin, c.body))
        st = drow_op(d, &c, &xs, rin, buf(d, lower_outer_value(g, n, rin)), false, 1, strides);
    for (uint32_t r = 0; !st && r < ir_node_num_results(g, n); r++) {
        IrValueId o = ir_region_output(g, c.body, r), res = ir_node_result(g, n, r);
        if (!res) continue;
        st = drow_op(d, &c, &xs, res, buf(d, res), true, c.r.phase[ir_value_def_node(g, o)] == 1 ? 1 : 2, strides);
        if (!st) c.val[c.n - 1] = o; /* stored from the member's value */
    }
    if (!st) {
        LLVMTypeRef f32 = LLVMFloatTypeInContext(d->ctx);
        c.xb = LLVMBuildArrayAlloca(d->e->ab, f32, ci(d, c.r.len), "");
        c.yb = LLVMBuildArrayAlloca(d->e->ab, f32, ci(d, c.r.len), "");
        bool found;
        c.row = (LlvmRow){.op = ir_node_op(g, red), .x = c.xb, .y = c.yb, .len = ci(d, c.r.len), .step = ci(d, 1),
                          .xoff = ci(d, 0), .yoff = ci(d, 0)};
        if (c.row.op == IR_OP_LAYER_NORMALIZATION) {
            c.row.eps = ir_node_attr_float(g, red, "epsilon", &found);
            if (!found) c.row.eps = 1e-5;
            IrValueId sv = ir_node_operand(g, red, 1), bv = ir_node_num_operands(g, red) > 2 ? ir_node_operand(g, red, 2) : 0;
            c.row.scale = buf(d, lower_outer_value(g, n, sv));
            if (bv) c.row.bias = buf(d, lower_outer_value(g, n, bv));
        }
        DShape outer = xs;
        outer.rank = xs.rank - 1;
        nest(d, &outer, c.n, strides, NULL, drow_body, &c);
    }
    for (uint32_t k = 0; c.mem && k < n_mem; k++) free(c.mem[k]);
    free(c.mem);
    free(c.vals);
    free(c.r.phase);
    return st;
}

/* ---- MatMul through the BLAS GEMM -------------------------------------------------------------- */

typedef struct Mm {
    LLVMValueRef a, b, c, m, n, k;
    int64_t cn, ck; /* n and k when constant, else -1 */
} Mm;

/* fns->sgemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc): row-major C = alpha op(A)
 * op(B) + beta C through the runtime's BLAS. */
static void sgemm(Dyn *d, bool ta, bool tb, LLVMValueRef m, LLVMValueRef n, LLVMValueRef k, double alpha, LLVMValueRef a,
                  LLVMValueRef lda, LLVMValueRef b, LLVMValueRef ldb, double beta, LLVMValueRef c, LLVMValueRef ldc) {
    LlvmEmit *e = d->e;
    LLVMTypeRef f32 = lo_f32_t(e), ptr = lo_ptr_t(e), i64 = i64t(d);
    LLVMTypeRef ps[13] = {i64, i64, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64};
    LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(d->ctx), ps, 13, 0);
    LLVMValueRef slot = ci(d, IRT_FN_SGEMM);
    LLVMValueRef fn = LLVMBuildLoad2(d->b, ptr, LLVMBuildGEP2(d->b, ptr, e->fns, &slot, 1, ""), "");
    LLVMValueRef args[13] = {ci(d, ta), ci(d, tb), m, n, k, LLVMConstReal(f32, alpha), a, lda, b, ldb, LLVMConstReal(f32, beta), c, ldc};
    LLVMBuildCall2(d->b, ft, fn, args, 13, "");
    d->blas = true;
}

/* ---- skinny products as generated loops (BLAS spends more on its packing than on them) ---- */

#define MM_NARROW_N 64 /* B with at most this many (constant) columns: rows of C in registers */
#define MM_SMALL_K 16  /* A with at most this many (constant) columns: K unrolled per C vector */

static LLVMValueRef splat(Dyn *d, LLVMValueRef x, unsigned w) {
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), w);
    LLVMValueRef v = LLVMBuildInsertElement(d->b, LLVMGetPoison(vt), x, LLVMConstInt(LLVMInt32TypeInContext(d->ctx), 0, 0), "");
    return LLVMBuildShuffleVector(d->b, v, LLVMGetPoison(vt), LLVMConstNull(LLVMVectorType(LLVMInt32TypeInContext(d->ctx), w)), "");
}

static LLVMValueRef vload(Dyn *d, LLVMTypeRef vt, LLVMValueRef p) {
    LLVMValueRef v = LLVMBuildLoad2(d->b, vt, p, "");
    LLVMSetAlignment(v, 4);
    return v;
}

static LLVMValueRef fmuladd(Dyn *d, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMValueRef args[3] = {a, b, c};
    return lo_intrinsic(d->e, "llvm.fmuladd", LLVMTypeOf(c), args, 3);
}

/* One pass of mm_narrow: `trips` steps of un accumulators (phis), each step kr consecutive rows
 * of B (kr * n lanes) times kr elements of A's row spread over them, from row `first` on; the
 * accumulators' values after it (or as they were when it did not run) replace acc. */
static LLVMValueRef narrow_pass(Dyn *d, LLVMValueRef a, LLVMValueRef b, LLVMValueRef first, LLVMValueRef trips, int un,
                                int64_t kr, int64_t n, LLVMValueRef *acc) {
    LlvmEmit *e = d->e;
    LLVMTypeRef f32 = lo_f32_t(e), vt = LLVMVectorType(f32, (unsigned)(kr * n)), pt = LLVMVectorType(f32, (unsigned)kr);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(d->ctx);
    LLVMValueRef spread[64], phi[8], nacc[8];
    for (int64_t q = 0; q < kr * n; q++) spread[q] = LLVMConstInt(i32, (unsigned long long)(q / n), 0);
    LlvmLoop lk;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(d->b);
    loop_v(d, &lk, trips);
    for (int u = 0; u < un; u++) {
        phi[u] = LLVMBuildPhi(d->b, vt, "");
        LLVMAddIncoming(phi[u], &acc[u], &pre, 1);
    }
    for (int u = 0; u < un; u++) {
        LLVMValueRef t = add(d, first, mul(d, add(d, mul(d, lk.iv, ci(d, un)), ci(d, u)), ci(d, kr))), x;
        if (kr > 1) {
            LLVMValueRef pv = vload(d, pt, lo_gep(e, f32, a, t));
            x = LLVMBuildShuffleVector(d->b, pv, LLVMGetPoison(pt), LLVMConstVector(spread, (unsigned)(kr * n)), "");
        } else x = splat(d, LLVMBuildLoad2(d->b, f32, lo_gep(e, f32, a, t), ""), (unsigned)n);
        nacc[u] = fmuladd(d, x, vload(d, vt, lo_gep(e, f32, b, mul(d, t, ci(d, n)))), phi[u]);
    }
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(d->b);
    for (int u = 0; u < un; u++) LLVMAddIncoming(phi[u], &nacc[u], &cur, 1);
    loop_end(d, &lk);
    for (int u = 0; u < un; u++) { /* after the loop, or straight from before it */
        LLVMValueRef ph = LLVMBuildPhi(d->b, vt, "");
        LLVMBasicBlockRef from[2] = {pre, cur};
        LLVMValueRef vals[2] = {acc[u], nacc[u]};
        LLVMAddIncoming(ph, vals, from, 2);
        acc[u] = ph;
    }
    return add(d, first, mul(d, trips, ci(d, (int64_t)un * kr)));
}

/* The row arow [k] times B [k x n] as an n-lane vector. */
static LLVMValueRef narrow_row(Dyn *d, LLVMValueRef arow, LLVMValueRef b, LLVMValueRef k, int64_t n) {
    LLVMTypeRef f32 = lo_f32_t(d->e), i32 = LLVMInt32TypeInContext(d->ctx);
    int64_t kr = n < 16 && 16 % n == 0 ? 16 / n : 1;
    LLVMTypeRef vw = LLVMVectorType(f32, (unsigned)(kr * n));
    LLVMValueRef acc[8], one[1];
    for (int u = 0; u < 8; u++) acc[u] = LLVMConstNull(vw);
    LLVMValueRef t = narrow_pass(d, arow, b, ci(d, 0), LLVMBuildSDiv(d->b, k, ci(d, 8 * kr), ""), 8, kr, n, acc);
    for (int h = 8; h > 1; h /= 2)
        for (int u = 0; u < h / 2; u++) acc[u] = LLVMBuildFAdd(d->b, acc[u], acc[u + h / 2], "");
    one[0] = acc[0];
    if (kr > 1) { /* whole vectors of kr rows, then the kr segments of n lanes summed */
        t = narrow_pass(d, arow, b, t, LLVMBuildSDiv(d->b, LLVMBuildNSWSub(d->b, k, t, ""), ci(d, kr), ""), 1, kr, n, one);
        LLVMValueRef seg[16], sum = NULL;
        for (int64_t sg = 0; sg < kr; sg++) {
            for (int64_t q = 0; q < n; q++) seg[q] = LLVMConstInt(i32, (unsigned long long)(sg * n + q), 0);
            LLVMValueRef part = LLVMBuildShuffleVector(d->b, one[0], LLVMGetPoison(vw), LLVMConstVector(seg, (unsigned)n), "");
            sum = sum ? LLVMBuildFAdd(d->b, sum, part, "") : part;
        }
        one[0] = sum;
    }
    narrow_pass(d, arow, b, t, LLVMBuildNSWSub(d->b, k, t, ""), 1, 1, n, one); /* the rows left */
    return one[0];
}

/* C [m x n] = A [m x k] B [k x n], n a constant of at most MM_NARROW_N: per row of C, vector
 * accumulators over k in registers (narrow_row). Rows of B under 16 floats go kr = 16 / n to a
 * vector (their kr weights spread over it, the kr segments summed at the end); 8 accumulators
 * take turns so the additions do not wait on each other; then one accumulator, then single
 * rows for the rest of the run-time k. */
static void mm_narrow(Dyn *d, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, LLVMValueRef m, LLVMValueRef k, int64_t n) {
    LlvmEmit *e = d->e;
    LLVMTypeRef f32 = lo_f32_t(e);
    LlvmLoop li;
    loop_v(d, &li, m);
    LLVMValueRef r = narrow_row(d, lo_gep(e, f32, a, mul(d, li.iv, k)), b, k, n);
    LLVMSetAlignment(LLVMBuildStore(d->b, r, lo_gep(e, f32, c, mul(d, li.iv, ci(d, n)))), 4);
    loop_end(d, &li);
}

/* C [m x n] = A [m x k] B [k x n], k a constant of at most MM_SMALL_K: per row of C, 16 columns
 * at a time (the last ones masked), the k products of each summed in registers. */
static void mm_small_k(Dyn *d, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, LLVMValueRef m, LLVMValueRef n, int64_t k) {
    LlvmEmit *e = d->e;
    LLVMTypeRef f32 = lo_f32_t(e), vt = LLVMVectorType(f32, 16), i32 = LLVMInt32TypeInContext(d->ctx);
    LLVMValueRef lane[16];
    for (int i = 0; i < 16; i++) lane[i] = LLVMConstInt(i32, (unsigned long long)i, 0);
    LLVMValueRef lanes = LLVMConstVector(lane, 16), full = LLVMBuildSDiv(d->b, n, ci(d, 16), "");
    LLVMValueRef rem = LLVMBuildNSWSub(d->b, n, mul(d, full, ci(d, 16)), "");
    LLVMValueRef mask = LLVMBuildICmp(d->b, LLVMIntSLT, lanes, splat(d, LLVMBuildTrunc(d->b, rem, i32, ""), 16), "");
    LlvmLoop li, lj;
    loop_v(d, &li, m);
    LLVMValueRef xa[MM_SMALL_K];
    for (int64_t t = 0; t < k; t++)
        xa[t] = splat(d, LLVMBuildLoad2(d->b, f32, lo_gep(e, f32, a, add(d, mul(d, li.iv, ci(d, k)), ci(d, t))), ""), 16);
    LLVMValueRef crow = mul(d, li.iv, n);
    for (int pass = 0; pass < 2; pass++) {
        LLVMValueRef j0;
        LLVMBasicBlockRef after = NULL;
        if (pass == 0) {
            loop_v(d, &lj, full);
            j0 = mul(d, lj.iv, ci(d, 16));
        } else {
            after = lo_if_begin(e, LLVMBuildICmp(d->b, LLVMIntSGT, rem, ci(d, 0), ""));
            j0 = mul(d, full, ci(d, 16));
        }
        LLVMValueRef acc = LLVMConstNull(vt);
        for (int64_t t = 0; t < k; t++) {
            LLVMValueRef p = lo_gep(e, f32, b, add(d, mul(d, ci(d, t), n), j0)), v;
            if (pass == 0) v = vload(d, vt, p);
            else v = llvm_masked_load(d->b, vt, p, mask);
            acc = fmuladd(d, xa[t], v, acc);
        }
        LLVMValueRef q = lo_gep(e, f32, c, add(d, crow, j0));
        if (pass == 0) {
            LLVMSetAlignment(LLVMBuildStore(d->b, acc, q), 4);
            loop_end(d, &lj);
        } else {
            llvm_masked_store(d->b, acc, q, mask);
            lo_if_end(e, after);
        }
    }
    loop_end(d, &li);
}

/* Products of at most this many multiply-adds take the generated loops above when their shape
 * fits them, larger ones the BLAS GEMM (codegen.c's SMALL_GEMM): there its packing pays off,
 * and the narrow loops' 8 accumulators of up to 64 lanes spill on 16-register AVX2. */
#define MM_LOOPS_MAX 131072

/* C [m x n] = A [m x k] B [k x n], dense row-major, m a run-time count of rows. */
static void mm_call(Dyn *d, const Mm *p, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, LLVMValueRef m) {
    bool narrow = p->cn > 0 && p->cn <= MM_NARROW_N, small_k = p->ck > 0 && p->ck <= MM_SMALL_K;
    LLVMValueRef small = NULL;
    LLVMBasicBlockRef after;
    if (narrow) {
        small = LLVMBuildICmp(d->b, LLVMIntSLE, mul(d, mul(d, m, p->n), p->k), ci(d, MM_LOOPS_MAX), "");
        after = lo_if_begin(d->e, small);
        mm_narrow(d, a, b, c, m, p->k, p->cn);
        lo_if_end(d->e, after);
        after = lo_if_begin(d->e, LLVMBuildNot(d->b, small, ""));
    }
    if (small_k) mm_small_k(d, a, b, c, m, p->n, p->ck);
    else sgemm(d, false, false, m, p->n, p->k, 1.0, a, p->k, b, p->n, 0.0, c, p->n);
    if (narrow) lo_if_end(d->e, after);
}

static void mm_body(Dyn *d, LLVMValueRef *o, void *user) {
    Mm *p = user;
    LLVMTypeRef f32 = lo_f32_t(d->e);
    mm_call(d, p, lo_gep(d->e, f32, p->a, o[1]), lo_gep(d->e, f32, p->b, o[2]), lo_gep(d->e, f32, p->c, o[0]), p->m);
}

/* ---- contraction epilogues ------------------------------------------------------------------
 * An `irtool.fused` epilogue group (a MatMul or Gemm, then a chain of f32 elementwise members:
 * bias, activation, residual Add) over run-time shapes, as codegen.c compiles it for static
 * ones: the product is written to the group's result, then one nest evaluates the members on
 * it and the group's other operands and stores once. A MatMul whose batches stack into one
 * GEMM (B shared, A's batches contiguous) runs in blocks of rows that stay in L2, each block's
 * epilogue right after its product; other ones run the epilogue over the whole result. */
#define EPI_BLOCK_BYTES (512 << 10)

typedef struct DEpi {
    DGroup c;           /* store 0: the group's result; load 0: the product, read back from it */
    DShape os;          /* the product's shape */
    LLVMValueRef st[DYN_MAX_OPS][IR_MAX_RANK];
    LLVMValueRef row[DYN_MAX_OPS], col[DYN_MAX_OPS]; /* strides on the [rows, n] view (NULL: 0) */
    bool flat;          /* every operand fits that view */
} DEpi;

bool llvm_dyn_epilogue_group(const IrGraph *g, IrNodeId n) {
    if (!llvm_fused_epilogue_group(g, n, false) || !llvm_dyn_node(g, n)) return false;
    IrRegionId body = ir_node_region_at(g, n, 0);
    IrNodeId a = ir_region_first(g, body);
    IrOp op = ir_node_op(g, a);
    if (op != IR_OP_MAT_MUL && op != IR_OP_GEMM) return false;
    IrTypeId ot = ir_value_type(g, ir_node_result(g, a, 0));
    uint32_t r = ot ? ir_type_rank(g, ot) : IR_RANK_UNKNOWN, loads = 0;
    if (r == IR_RANK_UNKNOWN || r < 2 || r > IR_MAX_RANK) return false;
    for (uint32_t i = 0; i < 2; i++) { /* what the product's kernel takes (else op by op, refused by name) */
        IrTypeId t = ir_value_type(g, ir_node_operand(g, a, i));
        uint32_t ri = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
        if (ri == IR_RANK_UNKNOWN || ri < 2 || ri > r || ir_type_dtype(g, t) != IR_DTYPE_F32 || (op == IR_OP_GEMM && ri != 2)) return false;
    }
    for (IrNodeId m = ir_node_next(g, a); m; m = ir_node_next(g, m)) {
        if (!llvm_ops_ew_member_ok(g, m) || !same_dims(g, ir_value_type(g, ir_node_result(g, m, 0)), ot)) return false;
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++) {
            IrValueId v = ir_node_operand(g, m, i);
            if (!v || ir_value_kind(g, v) == IR_VALUE_RESULT) continue;
            IrTypeId t = ir_value_type(g, v);
            if (!t || ir_type_rank(g, t) == IR_RANK_UNKNOWN || ir_type_rank(g, t) > r) return false;
            loads++;
        }
    }
    return loads + 2 <= DYN_MAX_OPS && same_dims(g, ir_value_type(g, ir_node_result(g, n, 0)), ot);
}

static void epi_body(Dyn *d, LLVMValueRef *o, void *user) {
    DGroup *c = user;
    c->vals[c->read_back] = lo_load(d->e, IR_DTYPE_F32, c->store_p[0], o[0]);
    group_tag(d, c, 0, c->vals[c->read_back]); /* the result's own scope: the store aliases it */
    group_body(d, o, c);
}

/* The epilogue over rows [row0, row0 + rows) of the [rows, n] view. */
static void epi_rows(Dyn *d, DEpi *ep, LLVMValueRef row0, LLVMValueRef rows, LLVMValueRef n, int64_t cn) {
    uint32_t no = ep->c.n_store + ep->c.n_load;
    DShape v = {.rank = 2, .dim = {rows, n}, .cd = {-1, cn}};
    LLVMValueRef st[DYN_MAX_OPS][IR_MAX_RANK], base[DYN_MAX_OPS];
    for (uint32_t j = 0; j < no; j++) {
        st[j][0] = ep->row[j];
        st[j][1] = ep->col[j];
        base[j] = ep->row[j] ? mul(d, row0, ep->row[j]) : ci(d, 0);
    }
    nest(d, &v, no, st, base, epi_body, &ep->c);
}

/* Sets up the epilogue of the group being compiled (its anchor writing y with shape os). */
static IrStatus epi_prepare(Dyn *d, DEpi *ep, IrNodeId anchor, LLVMValueRef y, const DShape *os) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    ep->os = *os;
    ep->c.body = ir_node_region(g, anchor);
    ep->c.first = ir_node_next(g, anchor);
    ep->c.read_back = ir_node_result(g, anchor, 0);
    ep->c.store_v[0] = ir_region_output(g, ep->c.body, 0);
    ep->c.store_p[0] = y;
    ep->c.store_t[0] = IR_DTYPE_F32;
    ep->c.n_store = 1;
    dstrides(d, os, os, ep->st[0]);
    IrStatus s = group_prepare(d, &ep->c, os, ep->st, false);
    if (s) return s;
    /* the [rows, n] view: an operand is read along rows like the result (its dims are the
     * result's) or not at all (a bias: every leading stride 0) */
    uint32_t r = os->rank;
    IrTypeId ot = ir_value_type(g, ir_node_result(g, anchor, 0));
    ep->flat = true;
    for (uint32_t j = 0; j < ep->c.n_store + ep->c.n_load; j++) {
        bool lead_zero = true;
        for (uint32_t k = 0; k + 1 < r; k++) lead_zero = lead_zero && !ep->st[j][k];
        IrValueId v = j == 0 ? ir_node_result(g, n, 0) : lower_outer_value(g, n, ep->c.load_v[j - 1]);
        bool dense = same_dims(g, ir_value_type(g, v), ot);
        ep->row[j] = lead_zero ? NULL : dense ? os->dim[r - 1] : NULL;
        ep->col[j] = ep->st[j][r - 1];
        ep->flat = ep->flat && (lead_zero || dense);
    }
    return IR_OK;
}

/* A stacked MatMul's rows (B shared, A's batches contiguous) through the BLAS GEMM or the loops
 * of mm_call, with its epilogue ep (NULL: none): in blocks of rows that stay in L2, each block's
 * epilogue right after its product, where the epilogue's operands allow. */
static void matmul_rows(Dyn *d, Mm *p, DEpi *ep, LLVMValueRef y, LLVMValueRef rows) {
    if (ep && ep->flat && p->cn > 0) { /* blocks of rows, each block's epilogue while it is hot */
        int64_t mb = EPI_BLOCK_BYTES / (p->cn * 4) / 16 * 16;
        mb = mb < 16 ? 16 : mb;
        LLVMValueRef blocks = LLVMBuildSDiv(d->b, add(d, rows, ci(d, mb - 1)), ci(d, mb), "");
        LlvmLoop lb;
        loop_v(d, &lb, blocks);
        LLVMValueRef row0 = mul(d, lb.iv, ci(d, mb)), left = LLVMBuildNSWSub(d->b, rows, row0, "");
        LLVMValueRef m = LLVMBuildSelect(d->b, LLVMBuildICmp(d->b, LLVMIntSLT, left, ci(d, mb), ""), left, ci(d, mb), "");
        LLVMTypeRef f32 = lo_f32_t(d->e);
        mm_call(d, p, lo_gep(d->e, f32, p->a, mul(d, row0, p->k)), p->b, lo_gep(d->e, f32, y, mul(d, row0, p->n)), m);
        epi_rows(d, ep, row0, m, p->n, p->cn);
        loop_end(d, &lb);
        return;
    }
    mm_call(d, p, p->a, p->b, y, rows);
    if (ep && ep->flat) epi_rows(d, ep, ci(d, 0), rows, p->n, p->cn);
    else if (ep) nest(d, &ep->os, ep->c.n_store + ep->c.n_load, ep->st, NULL, epi_body, &ep->c);
}

/* MatMul node mm (inside the group being compiled, or the node itself) into y; its epilogue
 * ep (NULL for none) on the result. */
static IrStatus gen_matmul_into(Dyn *d, IrNodeId mm, LLVMValueRef y, DEpi *ep) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    IrValueId va = lower_outer_value(g, n, ir_node_operand(g, mm, 0)), vb = lower_outer_value(g, n, ir_node_operand(g, mm, 1));
    IrValueId vy = ir_node_result(g, mm, 0);
    DShape sa, sb, sy;
    if (lower_value_dtype(g, va) != IR_DTYPE_F32 || lower_value_dtype(g, vb) != IR_DTYPE_F32) return refuse(d, "on non-f32 tensors");
    if (!dshape(d, va, &sa) || !dshape(d, vb, &sb) || !dshape(d, vy, &sy)) return refuse(d, "with unranked operands");
    if (sa.rank < 2 || sb.rank < 2) return refuse(d, "with a 1-D operand");
    Mm p = {.a = buf(d, va), .b = buf(d, vb), .c = y, .m = sa.dim[sa.rank - 2], .k = sa.dim[sa.rank - 1],
            .n = sb.dim[sb.rank - 1], .cn = sb.cd[sb.rank - 1], .ck = sa.cd[sa.rank - 1]};
    if (ep) {
        IrStatus s = epi_prepare(d, ep, mm, y, &sy);
        if (s) return s;
    }
    /* B shared by every batch and A's batches contiguous (a linear layer on a 3-D input): one
     * GEMM with the batches stacked as rows */
    bool stack = sa.rank == sy.rank;
    for (uint32_t k = 0; k + 2 < sb.rank; k++) stack = stack && sb.cd[k] == 1;
    for (uint32_t k = 0; stack && k + 2 < sa.rank; k++)
        stack = sa.ex[k] == sy.ex[k] || (sa.cd[k] >= 0 && sa.cd[k] == sy.cd[k]);
    if (stack) {
        LLVMValueRef rows = dprod(d, &sy, 0, sy.rank - 1), none = LLVMBuildICmp(d->b, LLVMIntEQ, mul(d, rows, p.n), ci(d, 0), "");
        LLVMBasicBlockRef after = lo_if_begin(d->e, LLVMBuildNot(d->b, none, ""));
        /* constant weights and few rows: the packed GEMM with B packed at compile time (the
         * static MatMuls' rule), its epilogue over the rows after it; else matmul_rows */
        LLVMValueRef packed = p.ck > 0 && p.cn > 0 && sb.rank == 2 ? cpu_matmul_packed_when(d->e, vb, rows, p.ck, p.cn) : NULL;
        IrStatus s = IR_OK;
        if (packed) {
            LLVMBasicBlockRef other = lo_if_begin(d->e, packed);
            s = cpu_matmul_packed_rows(d->e, vb, p.a, y, rows, p.ck, p.cn);
            if (!s && ep && ep->flat) epi_rows(d, ep, ci(d, 0), rows, p.n, p.cn);
            else if (!s && ep) nest(d, &ep->os, ep->c.n_store + ep->c.n_load, ep->st, NULL, epi_body, &ep->c);
            lo_if_end(d->e, other);
            other = lo_if_begin(d->e, LLVMBuildNot(d->b, packed, ""));
            if (!s) matmul_rows(d, &p, ep, y, rows);
            lo_if_end(d->e, other);
        } else
            matmul_rows(d, &p, ep, y, rows);
        lo_if_end(d->e, after);
        return s;
    }
    /* the batch dims: a nest over the output's, each operand's matrix stride broadcast */
    DShape bs = sy, ba = sa, bb = sb;
    bs.rank = sy.rank - 2, ba.rank = sa.rank - 2, bb.rank = sb.rank - 2;
    LLVMValueRef st[3][IR_MAX_RANK];
    if (ba.rank > bs.rank || bb.rank > bs.rank) return refuse(d, "with more batch dims than its result");
    dstrides(d, &bs, &bs, st[0]);
    dstrides(d, &ba, &bs, st[1]);
    dstrides(d, &bb, &bs, st[2]);
    LLVMValueRef mat[3] = {mul(d, p.m, p.n), mul(d, p.m, p.k), mul(d, p.k, p.n)};
    for (uint32_t j = 0; j < 3; j++)
        for (uint32_t k = 0; k < bs.rank; k++)
            if (st[j][k]) st[j][k] = mul(d, st[j][k], mat[j]);
    LLVMValueRef none = LLVMBuildICmp(d->b, LLVMIntEQ, mul(d, p.m, p.n), ci(d, 0), "");
    LLVMBasicBlockRef after = lo_if_begin(d->e, LLVMBuildNot(d->b, none, ""));
    nest(d, &bs, 3, st, NULL, mm_body, &p);
    lo_if_end(d->e, after);
    if (ep) nest(d, &ep->os, ep->c.n_store + ep->c.n_load, ep->st, NULL, epi_body, &ep->c);
    return IR_OK;
}

static IrStatus gen_matmul(Dyn *d) { return gen_matmul_into(d, d->e->node, buf(d, ir_node_result(d->e->g, d->e->node, 0)), NULL); }

/* Gemm: Y = alpha * op(A) * op(B) + beta * C (C broadcast to [M, N]): Y is filled with beta * C
 * first, then the GEMM accumulates into it. */
typedef struct GemmFill {
    LLVMValueRef y, c, beta;
} GemmFill;

static void fill_body(Dyn *d, LLVMValueRef *o, void *user) {
    GemmFill *f = user;
    LLVMTypeRef f32 = lo_f32_t(d->e);
    LLVMValueRef v = LLVMBuildLoad2(d->b, f32, lo_gep(d->e, f32, f->c, o[1]), "");
    LLVMBuildStore(d->b, LLVMBuildFMul(d->b, v, f->beta, ""), lo_gep(d->e, f32, f->y, o[0]));
}

/* Gemm node gm (inside the group being compiled, or the node itself) into y. */
static IrStatus gen_gemm_into(Dyn *d, IrNodeId gm, LLVMValueRef y) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    IrValueId va = lower_outer_value(g, n, ir_node_operand(g, gm, 0)), vb = lower_outer_value(g, n, ir_node_operand(g, gm, 1));
    IrValueId vy = ir_node_result(g, gm, 0);
    IrValueId vc = ir_node_num_operands(g, gm) > 2 ? lower_outer_value(g, n, ir_node_operand(g, gm, 2)) : 0;
    DShape sa, sb, sy, sc;
    if (lower_value_dtype(g, va) != IR_DTYPE_F32 || lower_value_dtype(g, vb) != IR_DTYPE_F32 ||
        (vc && lower_value_dtype(g, vc) != IR_DTYPE_F32))
        return refuse(d, "on non-f32 tensors");
    if (!dshape(d, va, &sa) || !dshape(d, vb, &sb) || !dshape(d, vy, &sy) || sa.rank != 2 || sb.rank != 2 || sy.rank != 2)
        return refuse(d, "on other than 2-D operands");
    bool found;
    int64_t ta = ir_node_attr_int(g, gm, "transA", &found), tb = ir_node_attr_int(g, gm, "transB", &found);
    double alpha = ir_node_attr_float(g, gm, "alpha", &found);
    if (!found) alpha = 1.0;
    double beta = ir_node_attr_float(g, gm, "beta", &found);
    if (!found) beta = 1.0;
    LLVMTypeRef f32 = lo_f32_t(d->e);
    LLVMValueRef m = sy.dim[0], nn = sy.dim[1], k = sa.dim[ta ? 0 : 1];
    if (vc) {
        if (!dshape(d, vc, &sc) || sc.rank > 2) return refuse(d, "with this C");
        LLVMValueRef st[2][IR_MAX_RANK];
        dstrides(d, &sy, &sy, st[0]);
        dstrides(d, &sc, &sy, st[1]);
        GemmFill f = {.y = y, .c = buf(d, vc), .beta = LLVMConstReal(f32, beta)};
        nest(d, &sy, 2, st, NULL, fill_body, &f);
    }
    LLVMValueRef none = LLVMBuildICmp(d->b, LLVMIntEQ, mul(d, m, nn), ci(d, 0), "");
    LLVMBasicBlockRef after = lo_if_begin(d->e, LLVMBuildNot(d->b, none, ""));
    sgemm(d, ta != 0, tb != 0, m, nn, k, alpha, buf(d, va), sa.dim[1], buf(d, vb), sb.dim[1], vc ? 1.0 : 0.0, y, nn);
    lo_if_end(d->e, after);
    return IR_OK;
}

static IrStatus gen_gemm(Dyn *d) { return gen_gemm_into(d, d->e->node, buf(d, ir_node_result(d->e->g, d->e->node, 0))); }

/* An epilogue group: its contraction into the group's result, then the members on it. */
static IrStatus gen_epilogue(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    if (!llvm_dyn_epilogue_group(g, n)) return refuse(d, "group with these members or shapes");
    IrNodeId anchor = ir_region_first(g, ir_node_region_at(g, n, 0));
    LLVMValueRef y = buf(d, ir_node_result(g, n, 0));
    DEpi ep = {0};
    IrStatus s;
    if (ir_node_op(g, anchor) == IR_OP_MAT_MUL) s = gen_matmul_into(d, anchor, y, &ep);
    else {
        DShape os;
        s = dshape(d, ir_node_result(g, anchor, 0), &os) ? gen_gemm_into(d, anchor, y) : refuse(d, "on an unranked tensor");
        if (!s) s = epi_prepare(d, &ep, anchor, y, &os);
        if (!s) nest(d, &ep.os, ep.c.n_store + ep.c.n_load, ep.st, NULL, epi_body, &ep.c);
    }
    group_free(&ep.c);
    return s;
}

static LLVMValueRef nbytes(Dyn *d, IrValueId v, bool *ok) {
    DShape s;
    v = lower_size_source(d->e->g, v); /* as the memory plan sizes it */
    *ok = dshape(d, v, &s);
    if (!*ok) return NULL;
    return mul(d, dprod(d, &s, 0, s.rank), ci(d, (int64_t)ir_dtype_size(lower_value_dtype(d->e->g, v))));
}

static IrStatus gen_shape(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    DShape s;
    if (!dshape(d, x, &s) || lower_value_dtype(g, y) != IR_DTYPE_I64) return refuse(d, "on this tensor");
    LLVMValueRef out = buf(d, y);
    if (ir_node_op(g, n) == IR_OP_SIZE) {
        LLVMBuildStore(d->b, dprod(d, &s, 0, s.rank), out);
        return IR_OK;
    }
    bool found;
    int64_t r = s.rank, start = ir_node_attr_int(g, n, "start", &found), end = ir_node_attr_int(g, n, "end", &found);
    if (!found) end = r;
    start = start < 0 ? start + r : start;
    end = end < 0 ? end + r : end;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    for (int64_t k = start; k < end; k++)
        LLVMBuildStore(d->b, s.dim[k], lo_gep(d->e, i64t(d), out, ci(d, k - start)));
    return IR_OK;
}

/* ---- attention groups ---------------------------------------------------------------------------
 * An `irtool.fused` attention group (MatMul(Q', K^T) -> members -> Softmax -> MatMul(P, V)),
 * compiled as one kernel on llvm/dims.h, so one emitter serves static shapes (dims are LLVM
 * constants and fold; codegen.c takes it for every group it fits) and symbolic batch and
 * sequence dims: per query row, Q's row through its members (the head size d a constant,
 * unrolled), then over the keys the scores, their members and the maximum, then exp and the
 * sum, then the output row from V's rows in vector registers (dv a constant) scaled by 1 / sum
 * once. Members form a chain on each side: any typed elementwise op of one operand, or of two
 * with the other from outside the group (broadcast to the chain's shape, read with strides
 * decided at run time). The score rows live on the stack when the key count is a constant,
 * else in a scratch row per part (16 parts at most). */
#define DATT_MAX_MEMBERS 4
#define DATT_MAX_D 128
#define DATT_MAX_DV 64
#define DATT_PARTS 16
#define DATT_STACK_KEYS 16384 /* a constant key count up to this: the rows on the stack (128 KiB) */

typedef struct DAttn {
    IrRegionId body;
    IrNodeId mm1, sm, mm2;
    IrValueId q, kt, v;                                 /* region arguments */
    IrNodeId m1[DATT_MAX_MEMBERS], m2[DATT_MAX_MEMBERS]; /* Q's side, the scores' side, in order */
    uint8_t c1[DATT_MAX_MEMBERS], c2[DATT_MAX_MEMBERS];   /* which operand of each is the chain */
    uint32_t n1, n2, r;
    int64_t d, dv;
} DAttn;

static bool is_arg(const IrGraph *g, IrRegionId body, IrValueId v) {
    for (uint32_t i = 0; i < ir_region_num_args(g, body); i++)
        if (ir_region_arg(g, body, i) == v) return true;
    return false;
}

static bool f32_ranked(const IrGraph *g, IrValueId v, uint32_t *rank) {
    IrTypeId t = ir_value_type(g, v);
    *rank = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
    return t && ir_type_dtype(g, t) == IR_DTYPE_F32 && *rank != IR_RANK_UNKNOWN && *rank <= IR_MAX_RANK;
}

static bool is_outside(const IrGraph *g, IrRegionId body, IrValueId v) {
    return is_arg(g, body, v) || ir_value_kind(g, v) == IR_VALUE_CONST;
}

/* Walks back from x through members into list (in order, with the chain operand's index in
 * ci); the value before them in *from: a MatMul's result when stop_mm, else a region argument
 * (Q, which may itself be an operand of the first member: the one with the member's type). */
static bool datt_chain(const IrGraph *g, IrRegionId body, IrValueId x, bool stop_mm, IrNodeId *list, uint8_t *cidx,
                       uint32_t *n, IrValueId *from) {
    IrNodeId rev[DATT_MAX_MEMBERS];
    uint8_t rc[DATT_MAX_MEMBERS];
    uint32_t k = 0, rk;
    while (!is_arg(g, body, x)) {
        IrNodeId m = ir_value_def_node(g, x);
        if (!m || ir_node_region(g, m) != body) return false;
        IrOp op = ir_node_op(g, m);
        if (stop_mm && op == IR_OP_MAT_MUL) break;
        if (k == DATT_MAX_MEMBERS || ir_node_num_results(g, m) != 1 || !f32_ranked(g, x, &rk)) return false;
        if (op == IR_OP_WHERE || ir_node_num_regions(g, m) || !llvm_ops_ew_member_ok(g, m)) return false;
        if (ir_node_num_operands(g, m) == 1) {
            rc[k] = 0;
            rev[k++] = m;
            x = ir_node_operand(g, m, 0);
            continue;
        }
        if (ir_node_num_operands(g, m) != 2) return false;
        IrValueId a = ir_node_operand(g, m, 0), b = ir_node_operand(g, m, 1);
        bool ao = is_outside(g, body, a), bo = is_outside(g, body, b);
        int c = !ao && bo ? 0 : ao && !bo ? 1 : -1;
        if (c < 0 && ao && bo && !stop_mm) /* both from outside: Q is the one shaped like the result */
            c = ir_value_type(g, a) == ir_value_type(g, x) ? 0 : ir_value_type(g, b) == ir_value_type(g, x) ? 1 : -1;
        if (c < 0) return false;
        IrValueId other = c == 0 ? b : a;
        if (!f32_ranked(g, other, &rk)) return false;
        rc[k] = (uint8_t)c;
        rev[k++] = m;
        x = c == 0 ? a : b;
    }
    if (stop_mm && (is_arg(g, body, x) || ir_node_op(g, ir_value_def_node(g, x)) != IR_OP_MAT_MUL)) return false;
    for (uint32_t i = 0; i < k; i++) {
        list[i] = rev[k - 1 - i];
        cidx[i] = rc[k - 1 - i];
    }
    *n = k;
    *from = x;
    return true;
}

static bool same_dim(const IrGraph *g, IrExprId a, IrExprId b) {
    int64_t x, y;
    return a == b || (ir_expr_is_const(g, a, &x) && ir_expr_is_const(g, b, &y) && x == y);
}

static bool datt_scan(const IrGraph *g, IrNodeId n, DAttn *a) {
    memset(a, 0, sizeof *a);
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) != 1 || ir_node_num_results(g, n) != 1) return false;
    IrRegionId body = a->body = ir_node_region_at(g, n, 0);
    if (ir_region_num_outputs(g, body) != 1 || ir_region_num_args(g, body) != ir_node_num_operands(g, n)) return false;
    IrValueId out = ir_region_output(g, body, 0), p, s;
    if (is_arg(g, body, out) || !(a->mm2 = ir_value_def_node(g, out)) || ir_node_op(g, a->mm2) != IR_OP_MAT_MUL) return false;
    p = ir_node_operand(g, a->mm2, 0);
    a->v = ir_node_operand(g, a->mm2, 1);
    if (is_arg(g, body, p) || !is_arg(g, body, a->v)) return false;
    a->sm = ir_value_def_node(g, p);
    if (ir_node_op(g, a->sm) != IR_OP_SOFTMAX) return false;
    if (!datt_chain(g, body, ir_node_operand(g, a->sm, 0), true, a->m2, a->c2, &a->n2, &s)) return false;
    a->mm1 = ir_value_def_node(g, s);
    a->kt = ir_node_operand(g, a->mm1, 1);
    if (!is_arg(g, body, a->kt)) return false;
    if (!datt_chain(g, body, ir_node_operand(g, a->mm1, 0), false, a->m1, a->c1, &a->n1, &a->q)) return false;
    uint32_t count = 0;
    for (IrNodeId m = ir_region_first(g, body); m; m = ir_node_next(g, m)) count++;
    if (count != a->n1 + a->n2 + 3 || a->n1 + a->n2 > DATT_MAX_MEMBERS) return false;
    uint32_t rs, rq, rk, rv, ro;
    IrValueId sc = ir_node_result(g, a->mm1, 0);
    if (!f32_ranked(g, sc, &rs) || !f32_ranked(g, a->q, &rq) || !f32_ranked(g, a->kt, &rk) || !f32_ranked(g, a->v, &rv) ||
        !f32_ranked(g, out, &ro) || rs < 2 || rq != rs || rk != rs || rv != rs || ro != rs)
        return false;
    a->r = rs;
    bool found;
    int64_t axis = ir_node_attr_int(g, a->sm, "axis", &found);
    if (found && axis != -1 && axis != (int64_t)rs - 1) return false;
    const IrExprId *ds = ir_type_dims(g, ir_value_type(g, sc)), *dq = ir_type_dims(g, ir_value_type(g, a->q));
    const IrExprId *dk = ir_type_dims(g, ir_value_type(g, a->kt)), *dv = ir_type_dims(g, ir_value_type(g, a->v));
    const IrExprId *dout = ir_type_dims(g, ir_value_type(g, out));
    for (uint32_t k = 0; k + 2 < rs; k++)
        if (!same_dim(g, dq[k], ds[k]) || !same_dim(g, dk[k], ds[k]) || !same_dim(g, dv[k], ds[k]) || !same_dim(g, dout[k], ds[k]))
            return false;
    if (!ir_expr_is_const(g, dq[rs - 1], &a->d) || !ir_expr_is_const(g, dv[rs - 1], &a->dv)) return false;
    if (a->d < 1 || a->d > DATT_MAX_D || a->dv < 1 || a->dv > DATT_MAX_DV) return false;
    return same_dim(g, dq[rs - 2], ds[rs - 2]) && same_dim(g, dk[rs - 2], dq[rs - 1]) && same_dim(g, dk[rs - 1], ds[rs - 1]) &&
           same_dim(g, dv[rs - 2], ds[rs - 1]) && same_dim(g, dout[rs - 2], ds[rs - 2]) && same_dim(g, dout[rs - 1], dv[rs - 1]);
}

bool llvm_dyn_attention_group(const IrGraph *g, IrNodeId n) {
    DAttn a;
    return datt_scan(g, n, &a) && llvm_dyn_node(g, n);
}

typedef struct DAttnCtx {
    const DAttn *a;
    LLVMValueRef ptr[DYN_MAX_OPS], last[DYN_MAX_OPS]; /* operand buffers, strides along the last dim */
    LLVMValueRef sk, scratch;
    bool stack;         /* scratch is a stack array (keys a constant count) */
    LLVMValueRef pstack; /* then the probabilities' row is one of its own: two arrays let LLVM
                          * finish the exp loop's tail with masked vector loads (an 8-lane exp),
                          * one array of 2 rows did not (a tiny head ran 1.3x slower) */
    LlvmEwPoint *mp[2 * DATT_MAX_MEMBERS]; /* the members, Q's side first */
} DAttnCtx;

/* The group operand a region argument (or constant) stands for. */
static IrValueId datt_outer(const IrGraph *g, IrNodeId n, IrRegionId body, IrValueId v) {
    for (uint32_t i = 0; i < ir_region_num_args(g, body); i++)
        if (ir_region_arg(g, body, i) == v) return ir_node_operand(g, n, i);
    return v;
}

/* Member i (Q's side first, then the scores') applied to the chain value x (its operand
 * chain_idx) by the typed elementwise emitter, its other operand (if any) read at off. */
static LLVMValueRef datt_member(Dyn *d, const DAttnCtx *c, uint32_t i, int chain_idx, LLVMValueRef x, LLVMValueRef off) {
    LLVMValueRef xs[2] = {NULL, NULL};
    xs[chain_idx] = x;
    if (ir_node_num_operands(d->e->g, i < c->a->n1 ? c->a->m1[i] : c->a->m2[i - c->a->n1]) == 2)
        xs[1 - chain_idx] = LLVMBuildLoad2(d->b, lo_f32_t(d->e), lo_gep(d->e, lo_f32_t(d->e), c->ptr[4 + i], off), "");
    return llvm_ops_ew_member(d->e, c->mp[i], xs);
}

static void datt_body(Dyn *d, LLVMValueRef *o, void *user) {
    DAttnCtx *c = user;
    const DAttn *a = c->a;
    LlvmEmit *e = d->e;
    LLVMTypeRef f32 = lo_f32_t(e);
    LLVMBuilderRef b = d->b;
    /* Q's row (operand 0) through its members (operands 4 ..) */
    LLVMValueRef q[DATT_MAX_D];
    for (int64_t t = 0; t < a->d; t++) {
        LLVMValueRef x = LLVMBuildLoad2(b, f32, lo_gep(e, f32, c->ptr[0], add(d, o[0], ci(d, t))), "");
        for (uint32_t i = 0; i < a->n1; i++)
            x = datt_member(d, c, i, a->c1[i], x, add(d, o[4 + i], mul(d, ci(d, t), c->last[4 + i])));
        q[t] = x;
    }
    /* this part's score rows: on the stack for a constant key count, else in the scratch */
    LLVMValueRef xb = c->scratch;
    if (!c->stack) {
        LLVMValueRef slot = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, d->e->part, ci(d, 0), ""), ci(d, 0), d->e->part, "");
        xb = lo_gep(e, f32, c->scratch, mul(d, mul(d, slot, c->sk), ci(d, 2)));
    }
    LLVMValueRef pb = c->pstack ? c->pstack : lo_gep(e, f32, xb, c->sk);
    LLVMValueRef mx = lo_var(e, f32, LLVMConstReal(f32, -INFINITY)), sum = lo_var(e, f32, LLVMConstReal(f32, 0.0));
    LlvmLoop lj;
    llvm_loop_n(d->e, &lj, c->sk);
    LLVMValueRef s = NULL;
    for (int64_t t = 0; t < a->d; t++) {
        LLVMValueRef kv = LLVMBuildLoad2(b, f32, lo_gep(e, f32, c->ptr[1], add(d, o[1], add(d, mul(d, ci(d, t), c->sk), lj.iv))), "");
        LLVMValueRef prod = LLVMBuildFMul(b, q[t], kv, "");
        s = s ? LLVMBuildFAdd(b, s, prod, "") : prod;
    }
    for (uint32_t i = 0; i < a->n2; i++) {
        uint32_t k = 4 + a->n1 + i;
        s = datt_member(d, c, a->n1 + i, a->c2[i], s, add(d, o[k], mul(d, lj.iv, c->last[k])));
    }
    LLVMBuildStore(b, s, lo_gep(e, f32, xb, lj.iv));
    LLVMValueRef mm[2] = {LLVMBuildLoad2(b, f32, mx, ""), s};
    LLVMBuildStore(b, lo_intrinsic(e, "llvm.maximum", f32, mm, 2), mx);
    loop_end(d, &lj);
    LLVMValueRef m = LLVMBuildLoad2(b, f32, mx, "");
    llvm_loop_n(d->e, &lj, c->sk);
    LLVMValueRef ex = llvm_exp_f32(b, LLVMBuildFSub(b, LLVMBuildLoad2(b, f32, lo_gep(e, f32, xb, lj.iv), ""), m, ""));
    LLVMBuildStore(b, ex, lo_gep(e, f32, pb, lj.iv));
    LLVMValueRef acc = LLVMBuildFAdd(b, LLVMBuildLoad2(b, f32, sum, ""), ex, "");
    LLVMSetFastMathFlags(acc, LLVMFastMathAllowReassoc);
    LLVMBuildStore(b, acc, sum);
    loop_end(d, &lj);
    LLVMValueRef tot = LLVMBuildLoad2(b, f32, sum, "");
    LLVMValueRef inv = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, tot, LLVMConstReal(f32, 0.0), ""),
                                       LLVMBuildFDiv(b, LLVMConstReal(f32, 1.0), tot, ""), LLVMConstReal(f32, 0.0), "");
    LLVMValueRef row = narrow_row(d, pb, lo_gep(e, f32, c->ptr[2], o[2]), c->sk, a->dv);
    row = LLVMBuildFMul(b, row, splat(d, inv, (unsigned)a->dv), "");
    LLVMSetAlignment(LLVMBuildStore(b, row, lo_gep(e, f32, c->ptr[3], o[3])), 4);
}

/* The score rows live in the workspace's scratch, which no operand overlaps, but LLVM sees
 * pointers read from the slot array and checks every row loop for overlap at run time (or
 * keeps it scalar); the static kernel's rows are stack arrays. Each load and store from block
 * `from` on is tagged with one of two scopes, the scratch's (pointers derived from `scratch`)
 * or the operands', each noalias with the other. */
static void datt_scopes(Dyn *d, LLVMBasicBlockRef from, LLVMValueRef scratch) {
    char name[64];
    snprintf(name, sizeof name, "irtool.attn.%u", (unsigned)d->e->node);
    LLVMMetadataRef dn = LLVMMDStringInContext2(d->ctx, name, strlen(name)), dom = LLVMMDNodeInContext2(d->ctx, &dn, 1), sc[2];
    for (int k = 0; k < 2; k++) {
        snprintf(name, sizeof name, "irtool.attn.%u.%s", (unsigned)d->e->node, k ? "operands" : "scratch");
        LLVMMetadataRef ops[2] = {LLVMMDStringInContext2(d->ctx, name, strlen(name)), dom};
        sc[k] = LLVMMDNodeInContext2(d->ctx, ops, 2);
    }
    unsigned k_scope = LLVMGetMDKindIDInContext(d->ctx, "alias.scope", 11), k_noalias = LLVMGetMDKindIDInContext(d->ctx, "noalias", 7);
    for (LLVMBasicBlockRef bb = from; bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            bool ld = LLVMIsALoadInst(in) != NULL;
            if (!ld && !LLVMIsAStoreInst(in)) continue;
            LLVMValueRef p = LLVMGetOperand(in, ld ? 0 : 1);
            while (LLVMIsAGetElementPtrInst(p)) p = LLVMGetOperand(p, 0);
            if (!LLVMIsALoadInst(p) && !LLVMIsAArgument(p) && p != scratch) continue; /* allocas, the syms array */
            int k = p == scratch ? 0 : 1;
            LLVMSetMetadata(in, k_scope, LLVMMetadataAsValue(d->ctx, LLVMMDNodeInContext2(d->ctx, &sc[k], 1)));
            LLVMSetMetadata(in, k_noalias, LLVMMetadataAsValue(d->ctx, LLVMMDNodeInContext2(d->ctx, &sc[1 - k], 1)));
        }
}

static IrStatus gen_attention(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    DAttn a;
    if (!datt_scan(g, n, &a)) return refuse(d, "group with these members or shapes");
    uint32_t r = a.r, nops = 4 + a.n1 + a.n2;
    DShape ss, sq, sk, sv, so, rows;
    IrValueId sc = ir_node_result(g, a.mm1, 0);
    if (!dshape(d, sc, &ss) || !dshape(d, a.q, &sq) || !dshape(d, a.kt, &sk) || !dshape(d, a.v, &sv) ||
        !dshape(d, ir_node_result(g, n, 0), &so))
        return refuse(d, "with unranked operands");
    DAttnCtx c = {.a = &a, .sk = ss.dim[r - 1], .stack = ss.cd[r - 1] > 0 && ss.cd[r - 1] <= DATT_STACK_KEYS};
    c.scratch = c.stack ? LLVMBuildArrayAlloca(d->e->ab, lo_f32_t(d->e), ci(d, ss.cd[r - 1]), "")
                        : lo_buf(d->e, ir_graph_num_values(g) + 1 + d->e->index);
    c.pstack = c.stack ? LLVMBuildArrayAlloca(d->e->ab, lo_f32_t(d->e), ci(d, ss.cd[r - 1]), "") : NULL;
    LLVMValueRef st[DYN_MAX_OPS][IR_MAX_RANK], full[IR_MAX_RANK];
    IrValueId vals[3] = {a.q, a.kt, a.v};
    const DShape *shp[3] = {&sq, &sk, &sv};
    for (int i = 0; i < 3; i++) { /* Q moves with the query row; K^T and V only with the batch */
        c.ptr[i] = lo_buf(d->e, datt_outer(g, n, a.body, vals[i]));
        dstrides(d, shp[i], shp[i], st[i]);
        if (i > 0) st[i][r - 2] = NULL;
    }
    c.ptr[3] = lo_buf(d->e, ir_node_result(g, n, 0));
    dstrides(d, &so, &so, st[3]);
    for (uint32_t i = 0; i < a.n1 + a.n2; i++) {
        IrNodeId m = i < a.n1 ? a.m1[i] : a.m2[i - a.n1];
        uint32_t k = 4 + i;
        if (ir_node_num_operands(g, m) == 1) { /* no other operand: a dummy read of nothing */
            c.ptr[k] = c.ptr[0];
            for (uint32_t j = 0; j < r; j++) st[k][j] = NULL;
            c.last[k] = ci(d, 0);
            continue;
        }
        int chain = i < a.n1 ? a.c1[i] : a.c2[i - a.n1];
        IrValueId other = ir_node_operand(g, m, chain == 0 ? 1 : 0);
        DShape so_m;
        if (!dshape(d, other, &so_m)) return refuse(d, "with unranked operands");
        c.ptr[k] = lo_buf(d->e, datt_outer(g, n, a.body, other));
        const DShape *target = i < a.n1 ? &sq : &ss;
        if (so_m.rank > target->rank) return refuse(d, "with a member operand of higher rank");
        dstrides(d, &so_m, target, full);
        for (uint32_t j = 0; j < r; j++) st[k][j] = full[j];
        c.last[k] = full[r - 1] ? full[r - 1] : ci(d, 0);
    }
    rows = ss;
    rows.rank = r - 1;
    IrStatus s = IR_OK;
    for (uint32_t i = 0; !s && i < a.n1 + a.n2; i++) s = llvm_ops_ew_member_new(d->e, i < a.n1 ? a.m1[i] : a.m2[i - a.n1], &c.mp[i]);
    if (!s) {
        LLVMBasicBlockRef from = LLVMGetInsertBlock(d->b);
        nest(d, &rows, nops, st, NULL, datt_body, &c);
        datt_scopes(d, from, c.scratch);
    }
    for (uint32_t i = 0; i < a.n1 + a.n2; i++) free(c.mp[i]);
    return s;
}

/* ---- windows: Conv (im2col + the BLAS GEMM) ------------------------------------------------- */

typedef struct DWin {
    LLVMValueRef n, c, h, w, oh, ow; /* run-time dims (NCHW) */
    int64_t kh, kw, sh, sw, dh, dw, pt, pl;
} DWin;

static const char *dwin_read(Dyn *d, const DShape *sx, const DShape *sy, int64_t kh, int64_t kw, DWin *w) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    if (sx->rank != 4 || sy->rank != 4) return "other than 2-D (NCHW)";
    int64_t a[6];
    const char *why = lower_win_attrs(g, n, a);
    *w = (DWin){sx->dim[0], sx->dim[1], sx->dim[2], sx->dim[3], sy->dim[2], sy->dim[3], kh, kw, a[0], a[1], a[2], a[3], a[4], a[5]};
    return why;
}

/* Fails the run when the binding leaves a window larger than its padded input (the interpreter's
 * error; the output dim would be 0 or negative), instead of an empty result. */
static void dwin_check(Dyn *d, const DWin *w, const char *op) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    bool found;
    const char *ap = ir_node_attr_string(g, n, "auto_pad", &found);
    int64_t pb = 0, pr = 0;
    IrAttrValue av;
    if (ir_node_attr(g, n, "pads", &av) && av.count == 4 && !(ap && strcmp(ap, "VALID") == 0)) pb = av.ints[2], pr = av.ints[3];
    LLVMValueRef sh = add(d, w->h, ci(d, w->pt + pb - ((w->kh - 1) * w->dh + 1)));
    LLVMValueRef sw = add(d, w->w, ci(d, w->pl + pr - ((w->kw - 1) * w->dw + 1)));
    LLVMValueRef bad = LLVMBuildOr(d->b, LLVMBuildICmp(d->b, LLVMIntSLT, sh, ci(d, 0), ""),
                                   LLVMBuildICmp(d->b, LLVMIntSLT, sw, ci(d, 0), ""), "");
    char msg[200];
    snprintf(msg, sizeof msg, "%s %%%s: kernel %lldx%lld larger than the padded input for this binding", op,
             ir_value_name(g, ir_node_result(g, n, 0)), (long long)w->kh, (long long)w->kw);
    lo_fail_if(d->e, bad, msg);
}

/* in = (o * stride - pad + k * dil) inside [0, size): the coordinate and the test */
static LLVMValueRef win_in(Dyn *d, LLVMValueRef o, int64_t stride, int64_t pad, int64_t k, int64_t dil, LLVMValueRef size,
                           LLVMValueRef *ok) {
    LLVMValueRef v = add(d, LLVMBuildNSWSub(d->b, mul(d, o, ci(d, stride)), ci(d, pad), ""), ci(d, k * dil));
    LLVMValueRef t = LLVMBuildAnd(d->b, LLVMBuildICmp(d->b, LLVMIntSGE, v, ci(d, 0), ""),
                                  LLVMBuildICmp(d->b, LLVMIntSLT, v, size, ""), "");
    *ok = *ok ? LLVMBuildAnd(d->b, *ok, t, "") : t;
    return v;
}


/* Whether gen_conv takes Conv n: what it checks, without emitting anything. */
static bool conv_gemm_fits(const IrGraph *g, IrNodeId n) {
    IrValueId vx = ir_node_operand(g, n, 0), vw = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrValueId vb = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    uint32_t rw;
    int64_t dw[IR_MAX_RANK], a[6], c;
    if (lower_value_dtype(g, vx) != IR_DTYPE_F32 || lower_value_dtype(g, vw) != IR_DTYPE_F32 ||
        (vb && lower_value_dtype(g, vb) != IR_DTYPE_F32) || !lower_value_shape(g, vw, &rw, dw) || rw != 4)
        return false;
    IrTypeId tx = ir_value_type(g, vx);
    if (ir_type_rank(g, tx) != 4 || ir_type_rank(g, ir_value_type(g, vy)) != 4 || lower_win_attrs(g, n, a)) return false;
    bool found;
    int64_t groups = ir_node_attr_int(g, n, "group", &found);
    if (!found) groups = 1;
    return ir_expr_is_const(g, ir_type_dims(g, tx)[1], &c) && groups >= 1 && c % groups == 0 && dw[0] % groups == 0 &&
           dw[1] == c / groups;
}

static IrStatus gen_conv(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    IrValueId vx = ir_node_operand(g, n, 0), vw = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrValueId vb = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    DShape sx, sy;
    uint32_t rw;
    int64_t dw[IR_MAX_RANK];
    if (lower_value_dtype(g, vx) != IR_DTYPE_F32 || lower_value_dtype(g, vw) != IR_DTYPE_F32 || !dshape(d, vx, &sx) ||
        !dshape(d, vy, &sy) || !lower_value_shape(g, vw, &rw, dw) || rw != 4 || (vb && lower_value_dtype(g, vb) != IR_DTYPE_F32))
        return refuse(d, "other than f32 2-D with static weights");
    DWin w;
    const char *why = dwin_read(d, &sx, &sy, dw[2], dw[3], &w);
    if (why) return refuse(d, why);
    bool found;
    int64_t groups = ir_node_attr_int(g, n, "group", &found);
    if (!found) groups = 1;
    int64_t c = sx.cd[1], oc = dw[0];
    if (c < 0 || groups < 1 || c % groups || oc % groups || dw[1] != c / groups) return refuse(d, "with these channels or groups");
    int64_t cg = c / groups, ocg = oc / groups, k = cg * dw[2] * dw[3];
    dwin_check(d, &w, "Conv");
    bool pointwise = dw[2] == 1 && dw[3] == 1 && w.sh == 1 && w.sw == 1 && w.pt == 0 && w.pl == 0;
    LlvmEmit *e = d->e;
    LLVMTypeRef f32 = lo_f32_t(e);
    LLVMValueRef x = buf(d, vx), wt = buf(d, vw), y = buf(d, vy), bias = vb ? buf(d, vb) : NULL;
    LLVMValueRef col = pointwise ? NULL : lo_buf(e, ir_graph_num_values(g) + 1 + e->index);
    LLVMValueRef hw = mul(d, w.h, w.w), p = mul(d, w.oh, w.ow);
    LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildICmp(d->b, LLVMIntSGT, p, ci(d, 0), ""));
    LlvmLoop ln, lg;
    loop_v(d, &ln, w.n);
    loop_c(d, &lg, groups);
    LLVMValueRef xg = add(d, mul(d, ln.iv, ci(d, c)), mul(d, lg.iv, ci(d, cg))); /* first channel of the group */
    LLVMValueRef bmat;
    if (pointwise) {
        bmat = lo_gep(e, f32, x, mul(d, xg, hw));
    } else { /* col[(ci, i, j), (oh, ow)] = x[n, g * cg + ci, ih, iw] or 0 outside */
        LlvmLoop lc, loh, low;
        loop_c(d, &lc, cg);
        for (int64_t i = 0; i < w.kh; i++)
            for (int64_t j = 0; j < w.kw; j++) {
                LLVMValueRef row = add(d, mul(d, add(d, mul(d, lc.iv, ci(d, w.kh)), ci(d, i)), ci(d, w.kw)), ci(d, j));
                loop_v(d, &loh, w.oh);
                LLVMValueRef okh = NULL;
                LLVMValueRef ih = win_in(d, loh.iv, w.sh, w.pt, i, w.dh, w.h, &okh);
                loop_v(d, &low, w.ow);
                LLVMValueRef ok = okh;
                LLVMValueRef iw = win_in(d, low.iv, w.sw, w.pl, j, w.dw, w.w, &ok);
                LLVMValueRef src = add(d, mul(d, add(d, xg, lc.iv), hw), add(d, mul(d, ih, w.w), iw));
                src = LLVMBuildSelect(d->b, ok, src, ci(d, 0), "");
                LLVMValueRef v = LLVMBuildLoad2(d->b, f32, lo_gep(e, f32, x, src), "");
                v = LLVMBuildSelect(d->b, ok, v, LLVMConstReal(f32, 0.0), "");
                LLVMValueRef dst = add(d, mul(d, row, p), add(d, mul(d, loh.iv, w.ow), low.iv));
                LLVMBuildStore(d->b, v, lo_gep(e, f32, col, dst));
                loop_end(d, &low);
                loop_end(d, &loh);
            }
        loop_end(d, &lc);
        bmat = col;
    }
    LLVMValueRef yg = add(d, mul(d, ln.iv, ci(d, oc)), mul(d, lg.iv, ci(d, ocg))); /* first output channel */
    LLVMValueRef ymat = lo_gep(e, f32, y, mul(d, yg, p));
    sgemm(d, false, false, ci(d, ocg), p, ci(d, k), 1.0, lo_gep(e, f32, wt, mul(d, lg.iv, ci(d, ocg * k))), ci(d, k), bmat,
          p, 0.0, ymat, p);
    if (bias) { /* y[m, :] += bias[g * ocg + m] */
        LlvmLoop lm, lp;
        loop_c(d, &lm, ocg);
        LLVMValueRef bv = LLVMBuildLoad2(d->b, f32, lo_gep(e, f32, bias, add(d, mul(d, lg.iv, ci(d, ocg)), lm.iv)), "");
        loop_v(d, &lp, p);
        LLVMValueRef q = lo_gep(e, f32, ymat, add(d, mul(d, lm.iv, p), lp.iv));
        LLVMBuildStore(d->b, LLVMBuildFAdd(d->b, LLVMBuildLoad2(d->b, f32, q, ""), bv, ""), q);
        loop_end(d, &lp);
        loop_end(d, &lm);
    }
    loop_end(d, &lg);
    loop_end(d, &ln);
    lo_if_end(e, after);
    return IR_OK;
}

/* A 1x1 Conv with unit strides and no padding: its input is already the GEMM's matrix, so it
 * needs no im2col scratch (dw: the weight's dims). */
static bool conv_pointwise(const IrGraph *g, IrNodeId n, const int64_t *dw) {
    IrAttrValue av;
    bool unit = dw[2] == 1 && dw[3] == 1;
    if (ir_node_attr(g, n, "strides", &av))
        for (uint32_t i = 0; i < av.count; i++) unit &= av.ints[i] == 1;
    if (ir_node_attr(g, n, "pads", &av))
        for (uint32_t i = 0; i < av.count; i++) unit &= av.ints[i] == 0;
    return unit;
}

int64_t llvm_dyn_scratch_bytes(const IrGraph *g, IrNodeId n, const int64_t *sym) {
    DAttn a;
    if (sym && ir_node_op(g, n) == IR_OP_FUSED && datt_scan(g, n, &a)) { /* a score row and its exps per part */
        int64_t sk;
        IrTypeId t = ir_value_type(g, ir_node_result(g, a.mm1, 0));
        return ir_expr_eval(g, ir_type_dims(g, t)[a.r - 1], sym, &sk) ? DATT_PARTS * 2 * sk * 4 : 0;
    }
    if (ir_node_op(g, n) == IR_OP_NON_MAX_SUPPRESSION && sym) { /* irt_nms: candidates, corners, kept */
        int64_t ns;
        IrTypeId t = ir_value_type(g, ir_node_operand(g, n, 0));
        return ir_type_rank(g, t) == 3 && ir_expr_eval(g, ir_type_dims(g, t)[1], sym, &ns) && ns > 0
                   ? ns * IRT_NMS_SCRATCH_PER_BOX
                   : 0;
    }
    int64_t rnn = llvm_ops_rnn_scratch_bytes(g, n, sym) + llvm_ops_fp8_scratch_bytes(g, n) + llvm_ops_misc_scratch_at(g, n, sym) +
                  llvm_ops_resize_scratch_bytes(g, n, sym);
    if (rnn) return rnn;
    if (ir_node_op(g, n) == IR_OP_UNIQUE && sym) { /* irt_unique: 5 int64 per item */
        int64_t items = 1, v;
        IrTypeId t = ir_value_type(g, ir_node_operand(g, n, 0));
        for (uint32_t k = 0; k < ir_type_rank(g, t) && ir_type_rank(g, t) != IR_RANK_UNKNOWN; k++)
            items *= ir_expr_eval(g, ir_type_dims(g, t)[k], sym, &v) ? v : 0;
        return (items ? items : 1) * 5 * 8;
    }
    if (ir_node_op(g, n) != IR_OP_CONV || !sym) return 0;
    IrValueId vw = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    uint32_t rw;
    int64_t dw[IR_MAX_RANK], oh, ow;
    IrTypeId ty = ir_value_type(g, vy);
    if (!lower_value_shape(g, vw, &rw, dw) || rw != 4 || ir_type_rank(g, ty) != 4) return 0;
    if (!ir_expr_eval(g, ir_type_dims(g, ty)[2], sym, &oh) || !ir_expr_eval(g, ir_type_dims(g, ty)[3], sym, &ow)) return 0;
    if (conv_pointwise(g, n, dw)) return 0; /* the input is the matrix */
    return dw[1] * dw[2] * dw[3] * oh * ow * 4;
}

/* ---- entry points ------------------------------------------------------------------------------ */

/* 1 when some dim of v is a symbolic expression, 2 when one is unknown (`?`), else 0. */
static int type_dims(const IrGraph *g, IrValueId v) {
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    int64_t c;
    int k_ = 0;
    for (uint32_t k = 0; t && r != IR_RANK_UNKNOWN && k < r; k++) {
        IrExprId e = ir_type_dims(g, t)[k];
        if (ir_expr_kind(g, e) == IR_EXPR_UNKNOWN) return 2;
        if (!ir_expr_is_const(g, e, &c)) k_ = 1;
    }
    return k_;
}

static bool type_symbolic(const IrGraph *g, IrValueId v) { return type_dims(g, v) == 1; }

/* Symbolic dims and no unknown one (those are refused as not static by the caller). */
bool llvm_dyn_node(const IrGraph *g, IrNodeId n) {
    int any = 0;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n) + ir_node_num_results(g, n); i++) {
        uint32_t no = ir_node_num_operands(g, n);
        IrValueId v = i < no ? ir_node_operand(g, n, i) : ir_node_result(g, n, i - no);
        int k = v ? type_dims(g, v) : 0;
        if (k == 2) return false;
        any |= k;
    }
    return any != 0;
}

/* ---- data-dependent dims: NonZero, Compress ------------------------------------------------- */

/* The data symbol of node n's result (lower_data_symbols), 0 if it has none. */
static IrSymId data_sym(const IrGraph *g, IrNodeId n) { return lower_data_sym(g, n); }

static void set_sym(Dyn *d, IrSymId s, LLVMValueRef v) {
    LLVMValueRef idx = ci(d, s);
    LLVMBuildStore(d->b, v, LLVMBuildGEP2(d->b, i64t(d), syms_array(d, d->e->g), &idx, 1, ""));
}

/* x[i] != 0 (NaN counts, as in the interpreter). */
static LLVMValueRef is_nonzero(Dyn *d, IrDType dt, LLVMValueRef x, LLVMValueRef i) {
    LLVMValueRef v = lo_load(d->e, dt, x, i);
    if (lo_is_float(dt)) return LLVMBuildFCmp(d->b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
    return LLVMBuildICmp(d->b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
}

static LLVMValueRef count_nonzero(Dyn *d, IrDType dt, LLVMValueRef x, LLVMValueRef n) {
    LLVMValueRef cnt = lo_var(d->e, i64t(d), ci(d, 0));
    LlvmLoop l;
    loop_v(d, &l, n);
    LLVMValueRef c = LLVMBuildLoad2(d->b, i64t(d), cnt, "");
    LLVMBuildStore(d->b, add(d, c, LLVMBuildZExt(d->b, is_nonzero(d, dt, x, l.iv), i64t(d), "")), cnt);
    loop_end(d, &l);
    return LLVMBuildLoad2(d->b, i64t(d), cnt, "");
}

/* NonZero: counts (the count is the data symbol), then writes each nonzero's index into column
 * j of the [rank, count] result, in row-major order of x. */
static IrStatus gen_nonzero(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrDType dt = lower_value_dtype(g, x);
    IrSymId s = data_sym(g, n);
    DShape sx;
    if (!s || !dshape(d, x, &sx) || !lo_store_t(d->e, dt) || lower_value_dtype(g, y) != IR_DTYPE_I64)
        return refuse(d, "on this tensor");
    LLVMValueRef X = buf(d, x), Y = buf(d, y), numel = dprod(d, &sx, 0, sx.rank);
    LLVMValueRef cnt = count_nonzero(d, dt, X, numel);
    set_sym(d, s, cnt);
    LLVMValueRef j = lo_var(d->e, i64t(d), ci(d, 0));
    LlvmLoop l;
    loop_v(d, &l, numel);
    LLVMBasicBlockRef after = lo_if_begin(d->e, is_nonzero(d, dt, X, l.iv));
    LLVMValueRef jv = LLVMBuildLoad2(d->b, i64t(d), j, ""), rem = l.iv;
    for (uint32_t k = sx.rank; k-- > 0;) {
        LLVMValueRef q = LLVMBuildSDiv(d->b, rem, sx.dim[k], "");
        LLVMValueRef r = LLVMBuildNSWSub(d->b, rem, mul(d, q, sx.dim[k]), "");
        LLVMBuildStore(d->b, r, lo_gep(d->e, i64t(d), Y, add(d, mul(d, ci(d, k), cnt), jv)));
        rem = q;
    }
    LLVMBuildStore(d->b, add(d, jv, ci(d, 1)), j);
    lo_if_end(d->e, after);
    loop_end(d, &l);
    return IR_OK;
}

/* Compress and Unique: x as [outer, items, inner] around the node's `axis`, or its elements
 * flattened as [1, all, 1] without one (the axis is checked by lower_data_dim); returns the
 * number of items when it is constant, else -1. */
static int64_t axis_split(Dyn *d, const DShape *sx, LLVMValueRef *outer, LLVMValueRef *items, LLVMValueRef *inner) {
    bool found;
    int64_t axis = ir_node_attr_int(d->e->g, d->e->node, "axis", &found);
    if (found && axis < 0) axis += sx->rank;
    *outer = found ? dprod(d, sx, 0, (uint32_t)axis) : ci(d, 1);
    *items = found ? sx->dim[axis] : dprod(d, sx, 0, sx->rank);
    *inner = found ? dprod(d, sx, (uint32_t)axis + 1, sx->rank) : ci(d, 1);
    return found ? sx->cd[axis] : cprod(sx, 0, sx->rank);
}

/* Compress: counts the true entries of the condition among the first min(len, dim) (the data
 * symbol), then copies the kept slices (elements without an axis) in order. */
static IrStatus gen_compress(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    IrValueId x = ir_node_operand(g, n, 0), c = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    IrSymId s = data_sym(g, n);
    size_t es = ir_dtype_size(lower_value_dtype(g, x));
    DShape sx, sc;
    if (!s || !dshape(d, x, &sx) || !dshape(d, c, &sc) || sc.rank != 1 || !lo_store_t(d->e, lower_value_dtype(g, x)) ||
        lower_value_dtype(g, c) != IR_DTYPE_BOOL)
        return refuse(d, "on this tensor (a bool condition)");
    LLVMValueRef outer, along, inner;
    int64_t room = axis_split(d, &sx, &outer, &along, &inner);
    /* a condition longer than the axis is an error (the interpreter's too): at compile time when
     * both are known, else the run fails */
    int64_t len = sc.cd[0];
    if (len >= 0 && room >= 0 && len > room) return refuse(d, "with a condition longer than the axis");
    LLVMValueRef lim = LLVMBuildSelect(d->b, LLVMBuildICmp(d->b, LLVMIntSLT, sc.dim[0], along, ""), sc.dim[0], along, "");
    if (len < 0 || room < 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "Compress %%%s: the condition is longer than the axis", ir_value_name(g, y));
        lo_fail_if(d->e, LLVMBuildICmp(d->b, LLVMIntSGT, sc.dim[0], along, ""), msg);
    }
    LLVMValueRef X = buf(d, x), C = buf(d, c), Y = buf(d, y);
    IrDType cdt = lower_value_dtype(g, c);
    LLVMValueRef kept = count_nonzero(d, cdt, C, lim);
    set_sym(d, s, kept);
    LLVMValueRef bytes = mul(d, inner, ci(d, (int64_t)es));
    LLVMValueRef j = lo_var(d->e, i64t(d), ci(d, 0));
    LlvmLoop lo, li;
    loop_v(d, &lo, outer);
    LLVMBuildStore(d->b, ci(d, 0), j);
    loop_v(d, &li, lim);
    LLVMBasicBlockRef after = lo_if_begin(d->e, is_nonzero(d, cdt, C, li.iv));
    LLVMValueRef jv = LLVMBuildLoad2(d->b, i64t(d), j, "");
    LLVMTypeRef i8 = lo_i8_t(d->e);
    LLVMValueRef src = lo_gep(d->e, i8, X, mul(d, add(d, mul(d, lo.iv, along), li.iv), bytes));
    LLVMValueRef dst = lo_gep(d->e, i8, Y, mul(d, add(d, mul(d, lo.iv, kept), jv), bytes));
    LLVMBuildMemCpy(d->b, dst, 1, src, 1, bytes);
    LLVMBuildStore(d->b, add(d, jv, ci(d, 1)), j);
    lo_if_end(d->e, after);
    loop_end(d, &li);
    loop_end(d, &lo);
    return IR_OK;
}

/* NonMaxSuppression: the runtime's irt_nms (a sort and a greedy pass per batch and class) on the
 * f32 boxes and scores, the optional scalars read here; its count is the data symbol. */
static IrStatus gen_nms(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    LlvmEmit *e = d->e;
    IrValueId vb = ir_node_operand(g, n, 0), vs = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    uint32_t no = ir_node_num_operands(g, n);
    IrValueId vm = no > 2 ? ir_node_operand(g, n, 2) : 0, vi = no > 3 ? ir_node_operand(g, n, 3) : 0;
    IrValueId vt = no > 4 ? ir_node_operand(g, n, 4) : 0;
    IrSymId s = data_sym(g, n);
    DShape sb, ss;
    LLVMValueRef bad = NULL;
    if (s && dshape(d, vb, &sb) && dshape(d, vs, &ss)) {
        /* B, S and the 4 agree: at compile time when constant, else at run time (shape-infer
         * also guards the symbols' binding) */
        bool ok = sb.rank == 3 && ss.rank == 3;
        LLVMValueRef pair[3][2] = {{sb.dim[0], ss.dim[0]}, {sb.dim[1], ss.dim[2]}, {sb.dim[2], ci(d, 4)}};
        bad = LLVMConstInt(LLVMInt1TypeInContext(e->ctx), 0, 0);
        for (int k = 0; k < 3 && ok; k++) {
            bool both = LLVMIsAConstantInt(pair[k][0]) && LLVMIsAConstantInt(pair[k][1]);
            if (both) ok = LLVMConstIntGetSExtValue(pair[k][0]) == LLVMConstIntGetSExtValue(pair[k][1]);
            else bad = LLVMBuildOr(d->b, bad, LLVMBuildICmp(d->b, LLVMIntNE, pair[k][0], pair[k][1], ""), "");
        }
        if (!ok) {
            ir_diag_at_node(e->diag, g, n, IR_SEV_ERROR, "NonMaxSuppression expects boxes [B, S, 4] and scores [B, C, S]");
            return IR_EUNSUPPORTED;
        }
    }
    if (!s || !dshape(d, vb, &sb) || !dshape(d, vs, &ss) ||
        lower_value_dtype(g, vb) != IR_DTYPE_F32 || lower_value_dtype(g, vs) != IR_DTYPE_F32 ||
        (vm && lower_value_dtype(g, vm) != IR_DTYPE_I64) || (vi && lower_value_dtype(g, vi) != IR_DTYPE_F32) ||
        (vt && lower_value_dtype(g, vt) != IR_DTYPE_F32))
        return refuse(d, "on these tensors (f32 boxes and scores, i64 and f32 scalars)");
    LLVMTypeRef f32 = lo_f32_t(e);
    /* an optional scalar: element 0 when the tensor has one, else the default */
    LLVMValueRef maxo = ci(d, 0), iou = LLVMConstReal(f32, 0.0), has_st = ci(d, 0), sthr = LLVMConstReal(f32, 0.0);
    DShape t;
    if (vm && dshape(d, vm, &t) && cprod(&t, 0, t.rank) != 0) maxo = lo_load(e, IR_DTYPE_I64, buf(d, vm), ci(d, 0));
    if (vi && dshape(d, vi, &t) && cprod(&t, 0, t.rank) != 0) iou = lo_load(e, IR_DTYPE_F32, buf(d, vi), ci(d, 0));
    if (vt && dshape(d, vt, &t) && cprod(&t, 0, t.rank) != 0) {
        has_st = ci(d, 1);
        sthr = lo_load(e, IR_DTYPE_F32, buf(d, vt), ci(d, 0));
    }
    int64_t center = ir_node_attr_int(g, n, "center_point_box", NULL);
    LLVMValueRef args[12] = {buf(d, vb), buf(d, vs), sb.dim[0], ss.dim[1], sb.dim[1], maxo, iou, has_st, sthr,
                             ci(d, center != 0), buf(d, y), lo_buf(e, ir_graph_num_values(g) + 1 + e->index)};
    if (LLVMIsAConstantInt(bad)) {
        set_sym(d, s, lo_call_runtime(e, IRT_FN_NMS, i64t(d), args, 12));
        return IR_OK;
    }
    char msg[200]; /* shapes that disagree select nothing and fail the run */
    snprintf(msg, sizeof msg, "NonMaxSuppression %%%s: boxes are not [B, S, 4] with the scores' [B, C, S]", ir_value_name(g, y));
    lo_fail_if(e, bad, msg);
    LLVMValueRef cnt = lo_var(e, i64t(d), ci(d, 0));
    LLVMBasicBlockRef after = lo_if_begin(e, LLVMBuildNot(d->b, bad, ""));
    LLVMBuildStore(d->b, lo_call_runtime(e, IRT_FN_NMS, i64t(d), args, 12), cnt);
    lo_if_end(e, after);
    set_sym(d, s, LLVMBuildLoad2(d->b, i64t(d), cnt, ""));
    return IR_OK;
}

/* Unique: the runtime's irt_unique (a stable sort of the items, then the groups) in the node's
 * scratch; the number of distinct items is the data symbol (Y's axis dim, indices, counts). */
static IrStatus gen_unique(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    LlvmEmit *e = d->e;
    IrValueId x = ir_node_operand(g, n, 0);
    IrDType dt = lower_value_dtype(g, x);
    IrSymId s = data_sym(g, n);
    DShape sx;
    int64_t kind = dt == IR_DTYPE_F32 ? 0 : dt == IR_DTYPE_F64 ? 1 : ir_dtype_is_signed(dt) ? 2 : 3;
    if (!s || !dshape(d, x, &sx) || (lo_is_float(dt) && kind > 1) || !lo_store_t(e, dt))
        return refuse(d, "on this tensor (f32, f64, integers, bool)");
    LLVMValueRef outer, items, inner;
    axis_split(d, &sx, &outer, &items, &inner);
    bool found;
    LLVMTypeRef ptr = lo_ptr_t(e);
    LLVMValueRef outs[4];
    for (uint32_t i = 0; i < 4; i++) {
        IrValueId v = i < ir_node_num_results(g, n) ? ir_node_result(g, n, i) : 0;
        outs[i] = v ? buf(d, v) : LLVMConstPointerNull(ptr);
    }
    int64_t sorted = ir_node_attr_int(g, n, "sorted", &found);
    if (!found) sorted = 1;
    LLVMValueRef args[12] = {buf(d, x), ci(d, kind), ci(d, (int64_t)ir_dtype_size(dt)), outer, items, inner, ci(d, sorted != 0),
                             outs[0], outs[1], outs[2], outs[3], lo_buf(e, ir_graph_num_values(g) + 1 + e->index)};
    set_sym(d, s, lo_call_runtime(e, IRT_FN_UNIQUE, i64t(d), args, 12));
    return IR_OK;
}

/* A dim's value for llvm_ops_rnn_gen_at and llvm_ops_fp8_gen_at. */
static LLVMValueRef sym_dim(void *ctx, IrExprId x) {
    Dyn *d = ctx;
    return dexpr(d, d->e->g, x);
}

/* ---- strings: elements {data, len} (IrtString), bytes made during a run from the run's memory -- */

/* A constant string blob of n strings (u64 offsets[n + 1], then the bytes), as the runtime reads
 * pools and stopwords; NULL when out of memory. */
static LLVMValueRef string_blob(LlvmEmit *e, const IrGraph *g, const IrStrId *strs, uint32_t n, const char *name) {
    size_t bytes = 0;
    for (uint32_t k = 0; k < n; k++) bytes += strlen(ir_str(g, strs[k]));
    size_t len = (n + 1) * 8 + bytes;
    unsigned char *blob = calloc(1, len + 1);
    if (!blob) return NULL;
    uint64_t at = 0;
    for (uint32_t k = 0; k <= n; k++) { /* offsets, little-endian, then the bytes */
        for (int b = 0; b < 8; b++) blob[k * 8 + b] = (unsigned char)(at >> (8 * b));
        if (k < n) {
            const char *w = ir_str(g, strs[k]);
            memcpy(blob + (n + 1) * 8 + at, w, strlen(w));
            at += strlen(w);
        }
    }
    LLVMValueRef gv = lo_const_bytes(e, blob, len, name);
    free(blob);
    return gv;
}

/* StringNormalizer: the runtime's irt_strnorm with the stopwords as a constant string blob; the
 * count it returns is the data symbol. */
static IrStatus gen_strnorm(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    LlvmEmit *e = d->e;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrSymId s = data_sym(g, n);
    DShape sx;
    if (!s || !dshape(d, x, &sx)) return refuse(d, "on this tensor");
    const char *act = ir_node_attr_string(g, n, "case_change_action", NULL);
    int64_t mode = !act || !*act || !strcmp(act, "NONE") ? 0 : !strcmp(act, "LOWER") ? 1 : !strcmp(act, "UPPER") ? 2 : -1;
    if (mode < 0) return refuse(d, "with this case_change_action");
    int64_t sensitive = ir_node_attr_int(g, n, "is_case_sensitive", NULL) != 0;
    IrAttrValue sw = {0};
    uint32_t ns = ir_node_attr(g, n, "stopwords", &sw) && sw.kind == IR_ATTR_STRINGS ? sw.count : 0;
    LLVMValueRef gv = string_blob(e, g, sw.strs, ns, "stopwords");
    if (!gv) return IR_ENOMEM;
    LLVMValueRef args[8] = {buf(d, x), dprod(d, &sx, 0, sx.rank), buf(d, y), gv, ci(d, ns), ci(d, mode), ci(d, sensitive),
                            lo_buf(e, lower_sym_slot(g) + 1)};
    set_sym(d, s, lo_call_runtime(e, IRT_FN_STRNORM, i64t(d), args, 8));
    return IR_OK;
}

/* TfIdfVectorizer (integers or strings): the attributes checked as the interpreter does and passed
 * as constants to the runtime's irt_tfidf, the rows and their length as values (llvm/dims.h), so
 * shapes known at run time only are served too; the output's width is the attributes'. */
static IrStatus gen_tfidf(LlvmEmit *e) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    IrDType dt = lower_value_dtype(g, x);
    LlvmDims sx, sy;
    if (!llvm_dims_of(e, x, &sx) || (sx.rank != 1 && sx.rank != 2) || lower_value_dtype(g, y) != IR_DTYPE_F32 ||
        (dt != IR_DTYPE_I32 && dt != IR_DTYPE_I64 && dt != IR_DTYPE_STRING))
        return llvm_ops_refuse(e, "on this tensor");
    const char *mode = ir_node_attr_string(g, n, "mode", NULL);
    int64_t m = !mode ? -1 : !strcmp(mode, "TF") ? 0 : !strcmp(mode, "IDF") ? 1 : !strcmp(mode, "TFIDF") ? 2 : -1;
    int64_t lo = ir_node_attr_int(g, n, "min_gram_length", NULL), hi = ir_node_attr_int(g, n, "max_gram_length", NULL);
    int64_t skip = ir_node_attr_int(g, n, "max_skip_count", NULL);
    bool strs = dt == IR_DTYPE_STRING;
    IrAttrValue pool = {0}, cnt = {0}, idx = {0}, w = {0};
    if (m < 0 || lo < 1 || hi < lo || skip < 0 || !ir_node_attr(g, n, strs ? "pool_strings" : "pool_int64s", &pool) ||
        !ir_node_attr(g, n, "ngram_counts", &cnt) || !ir_node_attr(g, n, "ngram_indexes", &idx) || cnt.count == 0)
        return llvm_ops_refuse(e, "with these attributes");
    int64_t grams = 0, width = 0;
    for (uint32_t i = 0; i < cnt.count; i++) {
        int64_t end = i + 1 < cnt.count ? cnt.ints[i + 1] : (int64_t)pool.count;
        if (cnt.ints[i] < 0 || end < cnt.ints[i] || end > (int64_t)pool.count || (end - cnt.ints[i]) % (int64_t)(i + 1))
            return llvm_ops_refuse(e, "with ngram_counts that do not split the pool into whole n-grams");
        grams += (end - cnt.ints[i]) / (int64_t)(i + 1);
    }
    for (uint32_t i = 0; i < idx.count; i++) {
        if (idx.ints[i] < 0) return llvm_ops_refuse(e, "with a negative ngram_indexes entry");
        if (idx.ints[i] + 1 > width) width = idx.ints[i] + 1;
    }
    bool have_w = ir_node_attr(g, n, "weights", &w) && w.count;
    if ((int64_t)idx.count != grams || (have_w && w.count != idx.count) || !llvm_dims_of(e, y, &sy) || sy.rank != sx.rank ||
        sy.cd[sy.rank - 1] != width)
        return llvm_ops_refuse(e, "with these attributes");
    size_t np = 8 + cnt.count + idx.count;
    int64_t *params = malloc(np * sizeof *params);
    float *wf = have_w ? malloc(w.count * sizeof *wf) : NULL;
    if (!params || (have_w && !wf)) {
        free(params), free(wf);
        return IR_ENOMEM;
    }
    int64_t head[8] = {lo, hi, skip, m, width, pool.count, cnt.count, idx.count};
    memcpy(params, head, sizeof head);
    for (uint32_t i = 0; i < cnt.count; i++) params[8 + i] = cnt.ints[i];
    for (uint32_t i = 0; i < idx.count; i++) params[8 + cnt.count + i] = idx.ints[i];
    for (uint32_t i = 0; have_w && i < w.count; i++) wf[i] = (float)w.floats[i];
    LLVMValueRef gp = lo_const_bytes(e, params, np * 8, "tfidf.params");
    int64_t *pi = strs ? NULL : calloc(pool.count + 1, sizeof *pi); /* (one more: never empty) */
    if (pi) memcpy(pi, pool.ints, pool.count * sizeof *pi);
    LLVMValueRef gpool = strs ? string_blob(e, g, pool.strs, pool.count, "tfidf.pool")
                         : pi ? lo_const_bytes(e, pi, (pool.count + 1) * sizeof *pi, "tfidf.pool")
                              : NULL;
    free(pi);
    LLVMTypeRef ptr = lo_ptr_t(e);
    LLVMValueRef gw = have_w ? lo_const_bytes(e, wf, w.count * 4, "tfidf.weights") : LLVMConstPointerNull(ptr);
    free(params), free(wf);
    if (!gpool) return IR_ENOMEM;
    LLVMValueRef args[8] = {lo_buf(e, x), lo_i64(e, strs ? 2 : dt == IR_DTYPE_I32 ? 0 : 1), llvm_dims_prod(e, &sx, 0, sx.rank - 1),
                            sx.dim[sx.rank - 1], gp, gpool, gw, lo_buf(e, y)};
    lo_call_runtime(e, IRT_FN_TFIDF, NULL, args, 8);
    return IR_OK;
}

static int64_t str_kind(IrDType dt) {
    switch (dt) {
    case IR_DTYPE_STRING: return 0;
    case IR_DTYPE_F32: return 1;
    case IR_DTYPE_F64: return 2;
    case IR_DTYPE_I32: return 3;
    case IR_DTYPE_I64: return 4;
    case IR_DTYPE_BOOL: return 5;
    default: return -1;
    }
}

/* Cast (or CastLike) from or to strings: the runtime's irt_cast_str. */
static IrStatus gen_cast_str(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    LlvmEmit *e = d->e;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    int64_t from = str_kind(lower_value_dtype(g, x)), to = str_kind(lower_value_dtype(g, y));
    DShape sx;
    if (from < 0 || to < 0 || !dshape(d, x, &sx)) return refuse(d, "between these dtypes (strings and f32, f64, i32, i64, bool)");
    LLVMValueRef args[6] = {buf(d, x), dprod(d, &sx, 0, sx.rank), ci(d, from), ci(d, to), buf(d, y), lo_buf(e, lower_sym_slot(g) + 1)};
    lo_call_runtime(e, IRT_FN_CAST_STR, NULL, args, 6);
    return IR_OK;
}

/* Reshape and the other copies of a string tensor: its elements (16 bytes each) as they are. */
static IrStatus gen_str_copy(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    DShape sy;
    if (!dshape(d, y, &sy)) return refuse(d, "on this tensor");
    LLVMValueRef X = buf(d, x), Y = buf(d, y);
    LLVMBasicBlockRef after = lo_if_begin(d->e, LLVMBuildICmp(d->b, LLVMIntNE, X, Y, ""));
    LLVMBuildMemMove(d->b, Y, 8, X, 8, mul(d, dprod(d, &sy, 0, sy.rank), ci(d, 16)));
    lo_if_end(d->e, after);
    return IR_OK;
}

/* ---- the op table's entries (backend/cpu/cpu_ops.def) ---------------------------------------- */

IrStatus cpu_str_normalizer(LlvmEmit *e) { Dyn d = {.e = e, .b = e->b, .ctx = e->ctx}; return gen_strnorm(&d); }
IrStatus cpu_str_tfidf(LlvmEmit *e) { return gen_tfidf(e); }
IrStatus cpu_str_cast(LlvmEmit *e) { Dyn d = {.e = e, .b = e->b, .ctx = e->ctx}; return gen_cast_str(&d); }
IrStatus cpu_str_copy(LlvmEmit *e) { Dyn d = {.e = e, .b = e->b, .ctx = e->ctx}; return gen_str_copy(&d); }


/* An attention group, static or run-time shapes: one emitter (gen_attention) for both. */
bool cpu_attention_fits(const IrGraph *g, IrNodeId n) {
    DAttn a;
    return datt_scan(g, n, &a);
}
IrStatus cpu_attention_emit(LlvmEmit *e) {
    Dyn d = {.e = e, .b = e->b, .ctx = e->ctx};
    return gen_attention(&d);
}
IrStatus cpu_dyn_fused(Dyn *d) {
    DAttn a;
    DRow r;
    if (llvm_dyn_epilogue_group(d->e->g, d->e->node)) return gen_epilogue(d);
    if (datt_scan(d->e->g, d->e->node, &a)) return gen_attention(d);
    return drow_scan(d->e->g, d->e->node, &r) ? gen_row_group(d, r) : gen_group(d);
}
/* Conv with run-time shapes: 2-D f32 with weights of static shape and explicit pads through
 * im2col and the BLAS GEMM; the others (SAME_* pads, 1-D and 3-D, other float dtypes, weights whose
 * dims are symbols) by the direct window kernel of cpu/conv.c. */
IrStatus cpu_dyn_conv(Dyn *d) { return conv_gemm_fits(d->e->g, d->e->node) ? gen_conv(d) : llvm_ops_conv_gen(d->e); }
IrStatus cpu_dyn_matmul(Dyn *d) { return gen_matmul(d); }
IrStatus cpu_dyn_gemm(Dyn *d) { return gen_gemm(d); }
IrStatus cpu_dyn_shape(Dyn *d) { return gen_shape(d); }
IrStatus cpu_dyn_nonzero(Dyn *d) { return gen_nonzero(d); }
IrStatus cpu_dyn_compress(Dyn *d) { return gen_compress(d); }
IrStatus cpu_dyn_nms(Dyn *d) { return gen_nms(d); }
IrStatus cpu_dyn_unique(Dyn *d) { return gen_unique(d); }
/* irt_rnn, its input projection through BLAS */
IrStatus cpu_dyn_rnn(Dyn *d) {
    d->blas = true;
    return llvm_ops_rnn_gen_at(d->e, sym_dim, d);
}
IrStatus cpu_dyn_fp8(Dyn *d) { return llvm_ops_fp8_gen_at(d->e, sym_dim, d); }

static IrStatus emit_op(Dyn *d, IrOp op) {
    const CpuOpRow *row = cpu_op_row(op);
    if (row->flags & CPU_ANY_SHAPE) return row->emit(d->e);
    return row->emit_dyn ? row->emit_dyn(d) : refuse(d, "yet");
}

/* Parts for this binding: one per 64K elements of the first operand or result (of an attention
 * group: its scores), 1 to 16. */
#define DYN_PART_MIN (1 << 16)
static LLVMValueRef parts_count(Dyn *d) {
    const IrGraph *g = d->e->g;
    IrNodeId n = d->e->node;
    LLVMValueRef most = ci(d, 0);
    IrValueId vs[2] = {ir_node_num_operands(g, n) ? ir_node_operand(g, n, 0) : 0, ir_node_result(g, n, 0)};
    DAttn a;
    if (ir_node_op(g, n) == IR_OP_FUSED && datt_scan(g, n, &a)) vs[0] = ir_node_result(g, a.mm1, 0); /* the scores */
    for (int i = 0; i < 2; i++) {
        DShape s;
        if (!vs[i] || !dshape(d, vs[i], &s)) continue;
        LLVMValueRef c = dprod(d, &s, 0, s.rank);
        most = LLVMBuildSelect(d->b, LLVMBuildICmp(d->b, LLVMIntSGT, c, most, ""), c, most, "");
    }
    LLVMValueRef np = LLVMBuildSDiv(d->b, most, ci(d, DYN_PART_MIN), "");
    return lo_iclamp(d->e, np, ci(d, 1), ci(d, 16));
}

IrStatus llvm_dyn_gen(LlvmEmit *e, bool *uses_blas) {
    Dyn d = {.e = e, .b = e->b, .ctx = e->ctx};
    IrOp op = ir_node_op(e->g, e->node);
    *uses_blas = false;
    /* an epilogue group calls the GEMM: one kernel, not a nest in parts */
    if (!(cpu_op_row(op)->flags & CPU_DYN_NEST) || (op == IR_OP_FUSED && llvm_dyn_epilogue_group(e->g, e->node))) {
        IrStatus s = emit_op(&d, op);
        *uses_blas = d.blas;
        return s;
    }
    /* in parts: the body in part(args, fns, part), handed to irt_parallel with a count for this
     * binding (1 for small shapes: run at once, no pool) */
    LLVMTypeRef ptr = lo_ptr_t(e), vd = LLVMVoidTypeInContext(e->ctx), ps[3] = {ptr, ptr, i64t(&d)};
    size_t nl;
    const char *kname = LLVMGetValueName2(e->fn, &nl);
    char name[128];
    snprintf(name, sizeof name, "%.*s.dpart", (int)(nl < 100 ? nl : 100), kname);
    LLVMValueRef pf = LLVMAddFunction(e->mod, name, LLVMFunctionType(vd, ps, 3, 0));
    LLVMSetLinkage(pf, LLVMInternalLinkage);
    LLVMBuilderRef pb = LLVMCreateBuilderInContext(e->ctx), pab = LLVMCreateBuilderInContext(e->ctx);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->ctx, pf, "entry");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->ctx, pf, "body");
    LLVMPositionBuilderAtEnd(pb, entry);
    LLVMPositionBuilderBefore(pab, LLVMBuildBr(pb, body));
    LLVMPositionBuilderAtEnd(pb, body);
    LlvmEmit pe = *e;
    pe.b = pb, pe.ab = pab, pe.fn = pf, pe.bufs = LLVMGetParam(pf, 0), pe.fns = LLVMGetParam(pf, 1);
    pe.syms = NULL, pe.part = LLVMGetParam(pf, 2), pe.part_used = false;
    Dyn dp = {.e = &pe, .b = pb, .ctx = e->ctx};
    pe.np = parts_count(&dp);
    IrStatus s = emit_op(&dp, op);
    LLVMBuildRetVoid(pb);
    LLVMDisposeBuilder(pb);
    LLVMDisposeBuilder(pab);
    if (s) {
        LLVMDeleteFunction(pf);
        return s;
    }
    LLVMTypeRef cps[4] = {i64t(&d), ptr, ptr, ptr};
    LLVMValueRef slot = ci(&d, IRT_FN_PARALLEL);
    LLVMValueRef par = LLVMBuildLoad2(e->b, ptr, LLVMBuildGEP2(e->b, ptr, e->fns, &slot, 1, ""), "");
    LLVMValueRef args[4] = {parts_count(&d), pf, e->bufs, e->fns};
    LLVMBuildCall2(e->b, LLVMFunctionType(vd, cps, 4, 0), par, args, 4, "");
    return IR_OK;
}

IrStatus llvm_build_shapes(LLVMModuleRef mod, const IrGraph *g, const IrSymPlan *sp, const LowerMemPlan *plan,
                           IrDiag *diag) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), ps[2] = {ptr, ptr};
    LLVMValueRef fn = LLVMAddFunction(mod, "irt_shapes", LLVMFunctionType(LLVMVoidTypeInContext(ctx), ps, 2, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    LlvmEmit e = {.g = g, .diag = diag, .ctx = ctx, .mod = mod, .b = b, .fn = fn};
    e.syms = LLVMGetParam(fn, 0);
    Dyn d = {.e = &e, .b = b, .ctx = ctx};
    LLVMValueRef out = LLVMGetParam(fn, 1);
    IrStatus s = IR_OK;
    for (uint32_t i = 0; i < sp->n_def && !s; i++) { /* defined symbols first: the kernels read them too */
        LLVMValueRef v = dexpr(&d, g, sp->def_expr[i]);
        if (!v) s = IR_EUNSUPPORTED;
        else LLVMBuildStore(b, v, lo_gep(&e, i64t(&d), e.syms, ci(&d, sp->def_sym[i])));
    }
    int64_t pos = 0;
    for (uint32_t i = 0; i < ir_graph_num_outputs(g) && !s; i++) {
        DShape sh;
        if (!dshape(&d, ir_graph_output(g, i), &sh)) s = IR_EUNSUPPORTED;
        for (uint32_t k = 0; !s && k < sh.rank; k++) LLVMBuildStore(b, sh.dim[k], lo_gep(&e, i64t(&d), out, ci(&d, pos++)));
    }
    /* the workspace the binding needs: the end of the furthest planned value */
#define SMAX(x, y) LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, (x), (y), ""), (x), (y), "")
    LLVMValueRef ext = ci(&d, 0);
    for (uint32_t v = 1; v <= ir_graph_num_values(g) && !s; v++) {
        if (plan->offset[v] < 0 || !type_symbolic(g, v)) continue;
        bool ok;
        LLVMValueRef end = add(&d, ci(&d, plan->offset[v]), nbytes(&d, v, &ok));
        if (!ok) s = IR_EUNSUPPORTED;
        else ext = SMAX(end, ext);
    }
    /* blocks placed at run time (symbols without an upper bound): each at the 64-byte aligned end
     * of the furthest of its preds, the first ones after the static part */
    LLVMValueRef *off = plan->n_dyn ? calloc(plan->n_dyn, sizeof *off) : NULL, *len = off ? calloc(plan->n_dyn, sizeof *len) : NULL;
    if (plan->n_dyn && (!off || !len)) s = IR_ENOMEM;
    if (plan->n_dyn) ext = SMAX(ci(&d, (int64_t)(plan->peak + 63) / 64 * 64), ext);
    for (uint32_t k = 0; k < plan->n_dyn && !s; k++) {
        const LowerDynBlock *bk = &plan->dyn[k];
        bool ok = true;
        if (bk->slot > ir_graph_num_values(g)) { /* a scratch: the sum of its form's terms */
            len[k] = ci(&d, 0);
            for (uint32_t i = 0; i < bk->scratch.n_terms && ok; i++) {
                const LowerScratchTerm *tm = &bk->scratch.term[i];
                LLVMValueRef p = ci(&d, tm->c);
                for (uint32_t j = 0; j < tm->n_dims && ok; j++) {
                    LLVMValueRef dv = dexpr(&d, g, tm->dims[j]);
                    if (dv) p = mul(&d, p, dv);
                    ok = dv != NULL;
                }
                if (ok) len[k] = add(&d, len[k], p);
            }
        } else {
            len[k] = nbytes(&d, bk->slot, &ok);
        }
        if (!ok) {
            s = IR_EUNSUPPORTED;
            break;
        }
        if (bk->alias >= 0) {
            off[k] = off[bk->alias];
        } else {
            LLVMValueRef at = ci(&d, (int64_t)(plan->peak + 63) / 64 * 64);
            for (uint32_t j = 0; j < bk->n_pred; j++) at = SMAX(add(&d, off[bk->pred[j]], len[bk->pred[j]]), at);
            off[k] = LLVMBuildAnd(b, add(&d, at, ci(&d, 63)), ci(&d, ~(int64_t)63), "");
        }
        ext = SMAX(add(&d, off[k], len[k]), ext);
    }
#undef SMAX
    if (!s) LLVMBuildStore(b, ext, lo_gep(&e, i64t(&d), out, ci(&d, pos++)));
    for (uint32_t i = 0; i < sp->n_eq && !s; i++) { /* the equalities to check: a - b, 0 when they hold */
        LLVMValueRef va = dexpr(&d, g, sp->eq_a[i]), vb = dexpr(&d, g, sp->eq_b[i]);
        if (!va || !vb) s = IR_EUNSUPPORTED;
        else LLVMBuildStore(b, LLVMBuildSub(b, va, vb, ""), lo_gep(&e, i64t(&d), out, ci(&d, pos++)));
    }
    for (uint32_t k = 0; k < plan->n_dyn && !s; k++) { /* then each block's offset and bytes */
        LLVMBuildStore(b, off[k], lo_gep(&e, i64t(&d), out, ci(&d, pos++)));
        LLVMBuildStore(b, len[k], lo_gep(&e, i64t(&d), out, ci(&d, pos++)));
    }
    free(off);
    free(len);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    if (s) ir_diag_error(diag, "llvm backend: an output or planned value has an unknown dim");
    return s;
}

/* One term c * dims[0] * dims[1] ... (n dims) of a scratch form. */
static void form_term(LowerScratchForm *f, int64_t c, uint32_t n, const IrExprId *dims) {
    LowerScratchTerm *t = &f->term[f->n_terms++];
    *t = (LowerScratchTerm){.c = c, .n_dims = n};
    if (n) memcpy(t->dims, dims, n * sizeof *dims);
}

bool llvm_dyn_scratch_form(const IrGraph *g, IrNodeId n, LowerScratchForm *f) {
    memset(f, 0, sizeof *f);
    if (!llvm_dyn_node(g, n)) return false;
    if (llvm_ops_resize_scratch_form(g, n, f)) return true;
    IrOp op = ir_node_op(g, n);
    DAttn a;
    if (op == IR_OP_FUSED && datt_scan(g, n, &a)) { /* as llvm_dyn_scratch_bytes, whose cases these mirror */
        IrTypeId t = ir_value_type(g, ir_node_result(g, a.mm1, 0));
        form_term(f, DATT_PARTS * 2 * 4, 1, &ir_type_dims(g, t)[a.r - 1]);
        return true;
    }
    IrTypeId tx = ir_node_num_operands(g, n) ? ir_value_type(g, ir_node_operand(g, n, 0)) : 0;
    uint32_t rx = tx ? ir_type_rank(g, tx) : IR_RANK_UNKNOWN;
    if (op == IR_OP_NON_MAX_SUPPRESSION && rx == 3) {
        form_term(f, IRT_NMS_SCRATCH_PER_BOX, 1, &ir_type_dims(g, tx)[1]);
        return true;
    }
    if (op == IR_OP_DET) return llvm_ops_misc_scratch_form(g, n, f);
    if (op == IR_OP_UNIQUE && rx <= LOWER_SCRATCH_DIMS) {
        form_term(f, 5 * 8, rx, ir_type_dims(g, tx));
        return true;
    }
    uint32_t rr;
    int64_t dr[IR_MAX_RANK];
    if ((op == IR_OP_RNN || op == IR_OP_GRU || op == IR_OP_LSTM) && rx == 3 && ir_node_num_operands(g, n) >= 3 &&
        lower_value_shape(g, ir_node_operand(g, n, 2), &rr, dr) && rr == 3) { /* irt_rnn_scratch floats */
        bool bf = ir_node_attr_int(g, n, "layout", NULL) != 0;
        IrExprId seq = ir_type_dims(g, tx)[bf ? 1 : 0], batch = ir_type_dims(g, tx)[bf ? 0 : 1], sb[2] = {seq, batch};
        int64_t h = dr[2], gates = dr[1] / (h ? h : 1), ghp = (gates * h + 15) / 16 * 16;
        form_term(f, 4 * (gates * h + 3 * h + ghp * (h + 2) + 16), 0, NULL);
        form_term(f, 4 * 2 * h, 1, &batch);
        form_term(f, 4 * gates * h, 2, sb);
        return true;
    }
    if (op != IR_OP_CONV) return false;
    IrTypeId ty = ir_value_type(g, ir_node_result(g, n, 0));
    uint32_t rw;
    int64_t dw[IR_MAX_RANK];
    if (!lower_value_shape(g, ir_node_operand(g, n, 1), &rw, dw) || rw != 4 || ir_type_rank(g, ty) != 4) return false;
    if (conv_pointwise(g, n, dw)) return true; /* none */
    form_term(f, dw[1] * dw[2] * dw[3] * 4, 2, &ir_type_dims(g, ty)[2]);
    return true;
}

/* The reference interpreter's executor: binds graph inputs (checking dtypes, ranks, symbolic
 * dims and the graph's constraints), views graph constants in place, then runs each region's
 * nodes in program order through the kernel table (kernels.c).
 *
 * Invariants: env[v] holds value v's tensor while env_set[v]; every value is charged to the
 * node of its own region that consumes it (a use inside a nested region is charged to the
 * enclosing node in the value's region), so after that node runs the value can be freed.
 * Region-local values are cleared when their region ends, so a Loop body may run any number
 * of times with bounded memory. One thread; results never depend on `threads` (ignored).
 */
#include "validate/interp_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Values charged to each node (CSR), and each region's locally defined outputs. */
typedef struct Plan {
    uint32_t *node_start; /* node capacity + 2 entries */
    IrValueId *node_vals;
} Plan;

typedef struct Exec {
    InterpCtx c;
    Plan plan;
    uint32_t diag_errors_at_start;
} Exec;

/* ---- planning ------------------------------------------------------------------------------ */

static IrRegionId value_region(const IrGraph *g, IrValueId v) {
    switch (ir_value_kind(g, v)) {
    case IR_VALUE_ARG: return ir_value_def_region(g, v);
    case IR_VALUE_RESULT: return ir_node_region(g, ir_value_def_node(g, v));
    default: return IR_ROOT_REGION;
    }
}

/* The ancestor of node n (or n itself) that lives in region r; 0 when r does not enclose n. */
static IrNodeId anchor_in(const IrGraph *g, IrNodeId n, IrRegionId r) {
    while (n && ir_node_region(g, n) != r) n = ir_region_parent(g, ir_node_region(g, n));
    return n;
}

/* Visits every use: (value, anchor node) pairs, or anchor 0 for region outputs that are local
 * to the region (those are consumed when the region ends). */
typedef void (*UseFn)(void *user, IrValueId v, IrNodeId anchor);

static void for_each_use(const IrGraph *g, UseFn fn, void *user) {
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrValueId v = ir_node_operand(g, n, i);
            if (v) fn(user, v, anchor_in(g, n, value_region(g, v)));
        }
        for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++) {
            IrRegionId r = ir_node_region_at(g, n, k);
            for (uint32_t i = 0; i < ir_region_num_outputs(g, r); i++) {
                IrValueId v = ir_region_output(g, r, i);
                if (!v) continue;
                IrRegionId vr = value_region(g, v);
                fn(user, v, vr == r ? 0 : anchor_in(g, n, vr));
            }
        }
    }
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++)
        if (ir_graph_output(g, i)) fn(user, ir_graph_output(g, i), 0);
}

typedef struct PlanBuild {
    InterpCtx *c;
    Plan *p;
    uint32_t *fill;
    bool counting;
} PlanBuild;

static void plan_use(void *user, IrValueId v, IrNodeId anchor) {
    PlanBuild *b = user;
    if (v > b->c->n_values) return;
    if (b->counting) {
        b->c->uses[v]++;
        if (anchor) b->p->node_start[anchor + 1]++;
    } else if (anchor) {
        b->p->node_vals[b->fill[anchor]++] = v;
    }
}

static IrStatus plan_build(Exec *e) {
    InterpCtx *c = &e->c;
    uint32_t cap = ir_graph_node_capacity(c->g) + 2;
    e->plan.node_start = calloc(cap + 1, sizeof(uint32_t));
    uint32_t *fill = calloc(cap + 1, sizeof(uint32_t));
    if (!e->plan.node_start || !fill) {
        free(fill);
        return IR_ENOMEM;
    }
    PlanBuild b = {c, &e->plan, fill, true};
    for_each_use(c->g, plan_use, &b);
    for (uint32_t i = 1; i <= cap; i++) e->plan.node_start[i] += e->plan.node_start[i - 1];
    uint32_t total = e->plan.node_start[cap];
    e->plan.node_vals = malloc((total ? total : 1) * sizeof(IrValueId));
    if (!e->plan.node_vals) {
        free(fill);
        return IR_ENOMEM;
    }
    memcpy(fill, e->plan.node_start, (cap + 1) * sizeof(uint32_t));
    b.counting = false;
    for_each_use(c->g, plan_use, &b);
    free(fill);
    return IR_OK;
}

/* ---- environment --------------------------------------------------------------------------- */

static void env_clear(InterpCtx *c, IrValueId v) {
    if (!c->env_set[v]) return;
    ir_tensor_free(&c->env[v]);
    c->env_set[v] = false;
    c->left[v] = 0;
}

/* Binds v to t (taking ownership of t's data when owned). */
static void env_bind(InterpCtx *c, IrValueId v, IrTensor *t) {
    env_clear(c, v);
    c->env[v] = *t;
    memset(t, 0, sizeof *t);
    c->env_set[v] = true;
    c->left[v] = c->uses[v];
}

static void env_consume(InterpCtx *c, IrValueId v) {
    if (!c->env_set[v]) return;
    if (c->left[v]) c->left[v]--;
    if (!c->left[v]) env_clear(c, v);
}

/* Clears every value defined in region r (its args and node results) that is still bound. */
static void region_clear(InterpCtx *c, IrRegionId r) {
    const IrGraph *g = c->g;
    for (uint32_t i = 0; i < ir_region_num_args(g, r); i++) env_clear(c, ir_region_arg(g, r, i));
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n))
        for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
            if (ir_node_result(g, n, i)) env_clear(c, ir_node_result(g, n, i));
}

/* ---- nodes --------------------------------------------------------------------------------- */

static void type_text(const IrGraph *g, IrTypeId t, char *buf, size_t cap) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_type_print(g, t, &b);
    snprintf(buf, cap, "%s", b.data ? b.data : "?");
    ir_strbuf_free(&b);
}

/* Checks that the kernel produced every present result with the declared dtype and rank. */
static IrStatus check_results(InterpCtx *c, IrNodeId n, const IrTensor *out, uint32_t n_out) {
    const IrGraph *g = c->g;
    for (uint32_t i = 0; i < n_out; i++) {
        IrValueId v = ir_node_result(g, n, i);
        if (!v) continue;
        if (out[i].dtype == IR_DTYPE_NONE && out[i].form == IR_TYPE_TENSOR) {
            interp_diag_node(c->diag, g, n, "internal error: the %s kernel did not produce result %u (%%%s)",
                             ir_op_name(ir_node_op(g, n)), i, ir_value_name(g, v));
            return IR_EVERIFY;
        }
        if (ir_tensor_numel(&out[i]) && (!out[i].owned || !out[i].data)) {
            interp_diag_node(c->diag, g, n, "internal error: the %s kernel returned result %u (%%%s) without owning it",
                             ir_op_name(ir_node_op(g, n)), i, ir_value_name(g, v));
            return IR_EVERIFY;
        }
        IrTypeId t = ir_value_type(g, v);
        if (!ir_tensor_fits_type(g, t, &out[i])) {
            char want[256], got[256];
            type_text(g, t, want, sizeof want);
            ir_tensor_shape_str(&out[i], got, sizeof got);
            interp_diag_node(c->diag, g, n,
                             "internal error: the %s kernel produced %s for result %u (%%%s), declared %s",
                             ir_op_name(ir_node_op(g, n)), got, i, ir_value_name(g, v), want);
            return IR_EVERIFY;
        }
    }
    return IR_OK;
}

static IrStatus exec_node(Exec *e, IrNodeId n) {
    InterpCtx *c = &e->c;
    const IrGraph *g = c->g;
    uint32_t n_in = ir_node_num_operands(g, n), n_out = ir_node_num_results(g, n);
    const IrTensor *in_small[16];
    IrTensor out_small[4];
    const IrTensor **in = n_in <= 16 ? in_small : malloc(n_in * sizeof *in);
    IrTensor *out = n_out <= 4 ? out_small : malloc(n_out * sizeof *out);
    IrStatus s = IR_OK;
    if ((n_in && !in) || (n_out && !out)) {
        s = IR_ENOMEM;
        interp_diag_node(c->diag, g, n, "out of memory");
        goto done;
    }
    memset(out, 0, n_out * sizeof *out);
    for (uint32_t i = 0; i < n_in; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        in[i] = NULL;
        if (!v) continue;
        if (!c->env_set[v]) {
            interp_diag_node(c->diag, g, n, "internal error: operand %u (%%%s) has no value", i, ir_value_name(g, v));
            s = IR_EVERIFY;
            goto done;
        }
        in[i] = &c->env[v];
    }
    IrOp op = ir_node_op(g, n);
    for (uint32_t i = 0; i < n_in && !ir_op_takes_containers(op); i++) {
        if (in[i] && in[i]->form != IR_TYPE_TENSOR) {
            interp_diag_node(c->diag, g, n, "operand %u (%%%s) is %s, and %s takes tensors only", i,
                             ir_value_name(g, ir_node_operand(g, n, i)),
                             in[i]->form == IR_TYPE_SEQ ? "a sequence" : "an optional", ir_op_name(op));
            s = IR_EVERIFY;
            goto done;
        }
    }
    InterpKernel k = op > IR_OP_NONE && op < IR_OP_COUNT ? interp_kernels[op] : NULL;
    KernelArgs a = {c, g, n, in, n_in, out, n_out};
    uint32_t errs = c->diag ? c->diag->n_errors : 0;
    if (!k) s = interp_unsupported(&a, NULL);
    else s = k(&a);
    if (s && c->diag && c->diag->n_errors == errs)
        interp_diag_node(c->diag, g, n, "failed (%s)", ir_status_name(s));
    if (!s) s = check_results(c, n, out, n_out);
    for (uint32_t i = 0; i < n_out && !s; i++) {
        s = ir_tensor_own_strings(&out[i]);
        if (s) interp_diag_node(c->diag, g, n, "out of memory");
    }
    if (s) {
        for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&out[i]);
        goto done;
    }
    for (uint32_t i = 0; i < n_out; i++) {
        IrValueId v = ir_node_result(g, n, i);
        if (!v) {
            ir_tensor_free(&out[i]);
            continue;
        }
        env_bind(c, v, &out[i]);
        if (c->opt && c->opt->on_value) c->opt->on_value(c->opt->user, g, v, &c->env[v]);
        if (!c->left[v]) env_clear(c, v);
    }
    /* release what this node (and its nested regions) used for the last time */
    for (uint32_t i = e->plan.node_start[n]; i < e->plan.node_start[n + 1]; i++) env_consume(c, e->plan.node_vals[i]);
done:
    if (in != in_small) free(in);
    if (out != out_small) free(out);
    return s;
}

/* ---- regions ------------------------------------------------------------------------------- */

static IrStatus run_region(Exec *e, IrNodeId parent, IrRegionId r, const IrTensor *args, uint32_t n_args,
                           IrTensor *outs) {
    InterpCtx *c = &e->c;
    const IrGraph *g = c->g;
    uint32_t n_out = ir_region_num_outputs(g, r);
    for (uint32_t i = 0; i < n_out; i++) memset(&outs[i], 0, sizeof outs[i]);
    if (n_args != ir_region_num_args(g, r)) {
        if (parent) interp_diag_node(c->diag, g, parent, "region %u expects %u arguments, got %u", r,
                                     ir_region_num_args(g, r), n_args);
        else ir_diag_error(c->diag, "the graph expects %u inputs, got %u", ir_region_num_args(g, r), n_args);
        return IR_EINVAL;
    }
    for (uint32_t i = 0; i < n_args; i++) {
        IrValueId v = ir_region_arg(g, r, i);
        IrTensor view;
        ir_tensor_borrow(&view, &args[i]);
        env_bind(c, v, &view);
        if (!c->left[v]) env_clear(c, v);
    }
    IrStatus s = IR_OK;
    for (IrNodeId n = ir_region_first(g, r); n && !s; n = ir_node_next(g, n)) s = exec_node(e, n);
    for (uint32_t i = 0; i < n_out && !s; i++) {
        IrValueId v = ir_region_output(g, r, i);
        if (!v || !c->env_set[v]) {
            if (parent) interp_diag_node(c->diag, g, parent, "internal error: region output %u has no value", i);
            else ir_diag_error(c->diag, "internal error: graph output %u has no value", i);
            s = IR_EVERIFY;
            break;
        }
        bool local = value_region(g, v) == r;
        if (local && c->left[v] == 1 && c->env[v].owned) {
            outs[i] = c->env[v]; /* last use: move */
            memset(&c->env[v], 0, sizeof c->env[v]);
            c->env_set[v] = false;
            c->left[v] = 0;
            continue;
        }
        s = ir_tensor_copy(&outs[i], &c->env[v]);
        if (s) {
            ir_diag_error(c->diag, "out of memory copying output '%s'", ir_value_name(g, v));
            break;
        }
        if (local) env_consume(c, v);
    }
    if (s)
        for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outs[i]);
    region_clear(c, r);
    return s;
}

IrStatus interp_exec_region(InterpCtx *c, IrNodeId parent, IrRegionId r, const IrTensor *args, uint32_t n_args,
                            IrTensor *outs) {
    Exec *e = (Exec *)c; /* c is the first member of Exec */
    if (r == 0 || r > ir_graph_num_regions(c->g) || ir_region_parent(c->g, r) != parent) {
        interp_diag_node(c->diag, c->g, parent, "internal error: region %u is not a region of this node", r);
        return IR_EINVAL;
    }
    return run_region(e, parent, r, args, n_args, outs);
}

/* ---- inputs and symbols -------------------------------------------------------------------- */

typedef struct SymSource {
    uint32_t input, dim; /* where the symbol got its value */
} SymSource;

static void expr_text(const IrGraph *g, IrExprId e, char *buf, size_t cap) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_expr_print(g, e, &b);
    snprintf(buf, cap, "%s", b.data ? b.data : "?");
    ir_strbuf_free(&b);
}

static void input_error(InterpCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void input_error(InterpCtx *c, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ir_diag_report(c->diag, IR_SEV_ERROR, ir_graph_source_file(c->g), 0, 0, NULL, 0, "%s", msg);
}

/* Checks one input's dtype and rank and binds the symbols its plain symbolic dims name. */
static IrStatus bind_input_syms(InterpCtx *c, uint32_t i, const IrTensor *t, SymSource *src) {
    const IrGraph *g = c->g;
    IrValueId v = ir_graph_input(g, i);
    const char *name = ir_value_name(g, v);
    IrTypeId ty = ir_value_type(g, v);
    IrDType dt = ir_type_dtype(g, ty);
    uint32_t rank = ir_type_rank(g, ty);
    char shape[256];
    ir_tensor_shape_str(t, shape, sizeof shape);
    if (t->rank > IR_MAX_RANK || (ir_tensor_numel(t) && !t->data) || t->form > IR_TYPE_OPT ||
        (t->n_items && !t->items)) {
        input_error(c, "input '%s': malformed tensor", name);
        return IR_EINVAL;
    }
    if (ty && (IrTypeKind)t->form != ir_type_kind(g, ty)) {
        char want[256];
        type_text(g, ty, want, sizeof want);
        input_error(c, "input '%s' is %s (%s), the graph declares %s", name,
                    t->form == IR_TYPE_SEQ ? "a sequence" : t->form == IR_TYPE_OPT ? "an optional" : "a tensor", shape,
                    want);
        return IR_EINVAL;
    }
    if (t->form != IR_TYPE_TENSOR) {
        if (ir_tensor_fits_type(g, ty, t)) return IR_OK;
        char want[256];
        type_text(g, ty, want, sizeof want);
        input_error(c, "input '%s' holds %s, the graph declares %s", name, shape, want);
        return IR_EINVAL;
    }
    if (dt != IR_DTYPE_NONE && t->dtype != dt) {
        input_error(c, "input '%s' has dtype %s, the graph declares %s (got %s)", name, ir_dtype_name(t->dtype),
                    ir_dtype_name(dt), shape);
        return IR_EINVAL;
    }
    if (rank == IR_RANK_UNKNOWN) return IR_OK;
    if (t->rank != rank) {
        char want[256];
        type_text(g, ty, want, sizeof want);
        input_error(c, "input '%s' has rank %u (%s), the graph declares rank %u (%s)", name, t->rank, shape, rank,
                    want);
        return IR_EINVAL;
    }
    const IrExprId *dims = ir_type_dims(g, ty);
    for (uint32_t d = 0; d < rank; d++) {
        int64_t k;
        if (ir_expr_is_const(g, dims[d], &k)) {
            if (k != t->dims[d]) {
                input_error(c, "input '%s' dim %u is %lld, the graph declares %lld (got %s)", name, d,
                            (long long)t->dims[d], (long long)k, shape);
                return IR_EINVAL;
            }
        } else if (ir_expr_kind(g, dims[d]) == IR_EXPR_SYM) {
            IrSymId s = ir_expr_sym_id(g, dims[d]);
            if (c->sym[s] < 0) {
                c->sym[s] = t->dims[d];
                src[s].input = i;
                src[s].dim = d;
            } else if (c->sym[s] != t->dims[d]) {
                input_error(c, "input '%s' dim %u is %lld, but symbol %s was bound to %lld by input '%s' dim %u",
                            name, d, (long long)t->dims[d], ir_sym_name(g, s), (long long)c->sym[s],
                            ir_value_name(g, ir_graph_input(g, src[s].input)), src[s].dim);
                return IR_EINVAL;
            }
        }
    }
    return IR_OK;
}

/* Dims written as expressions (S/2, B*S) must equal their value once the symbols are bound. */
static IrStatus check_input_exprs(InterpCtx *c, uint32_t i, const IrTensor *t) {
    const IrGraph *g = c->g;
    IrValueId v = ir_graph_input(g, i);
    IrTypeId ty = ir_value_type(g, v);
    uint32_t rank = ir_type_rank(g, ty);
    if (rank == IR_RANK_UNKNOWN || t->form != IR_TYPE_TENSOR) return IR_OK;
    const IrExprId *dims = ir_type_dims(g, ty);
    for (uint32_t d = 0; d < rank; d++) {
        IrExprKind k = ir_expr_kind(g, dims[d]);
        int64_t val;
        if (k == IR_EXPR_CONST || k == IR_EXPR_SYM || k == IR_EXPR_UNKNOWN || dims[d] == 0) continue;
        if (!ir_expr_eval(g, dims[d], c->sym, &val)) continue;
        if (val != t->dims[d]) {
            char ex[256];
            expr_text(g, dims[d], ex, sizeof ex);
            input_error(c, "input '%s' dim %u is %lld, but the graph declares %s = %lld", ir_value_name(g, v), d,
                        (long long)t->dims[d], ex, (long long)val);
            return IR_EINVAL;
        }
    }
    return IR_OK;
}

/* Names the inputs a constraint's symbols came from: " (B from input 'x' dim 0)". */
static void constraint_origin(InterpCtx *c, IrExprId e, const SymSource *src, IrStrBuf *b) {
    const IrGraph *g = c->g;
    if (!e) return;
    IrExprKind k = ir_expr_kind(g, e);
    if (k == IR_EXPR_SYM) {
        IrSymId s = ir_expr_sym_id(g, e);
        if (c->sym[s] >= 0)
            ir_strbuf_printf(b, "%s%s = %lld from input '%s' dim %u", b->len ? ", " : "", ir_sym_name(g, s),
                             (long long)c->sym[s], ir_value_name(g, ir_graph_input(g, src[s].input)), src[s].dim);
        return;
    }
    if (k == IR_EXPR_CONST || k == IR_EXPR_UNKNOWN) return;
    constraint_origin(c, ir_expr_lhs(g, e), src, b);
    constraint_origin(c, ir_expr_rhs(g, e), src, b);
}

static IrStatus check_constraints(InterpCtx *c, const SymSource *src) {
    const IrGraph *g = c->g;
    IrStatus status = IR_OK;
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
        IrConstraint k = ir_graph_constraint(g, i);
        int64_t a, b = 0;
        if (!ir_expr_eval(g, k.a, c->sym, &a)) continue; /* mentions a symbol no input binds */
        if (k.kind == IR_CONSTRAINT_EQ && !ir_expr_eval(g, k.b, c->sym, &b)) continue;
        bool ok = k.kind == IR_CONSTRAINT_RANGE       ? (a >= k.lo && a <= k.hi)
                  : k.kind == IR_CONSTRAINT_DIVISIBLE ? (k.lo != 0 && a % k.lo == 0)
                                                      : a == b;
        if (ok) continue;
        char ea[256], eb[256];
        expr_text(g, k.a, ea, sizeof ea);
        IrStrBuf why;
        ir_strbuf_init(&why);
        constraint_origin(c, k.a, src, &why);
        if (k.kind == IR_CONSTRAINT_EQ) constraint_origin(c, k.b, src, &why);
        const char *from = why.data ? why.data : "no input binds its symbols";
        char val[300] = "";
        if (ir_expr_kind(g, k.a) != IR_EXPR_SYM) snprintf(val, sizeof val, "; %s = %lld", ea, (long long)a);
        if (k.kind == IR_CONSTRAINT_RANGE)
            input_error(c, "inputs violate constraint %s in [%lld, %lld]: %s%s", ea, (long long)k.lo, (long long)k.hi,
                        from, val);
        else if (k.kind == IR_CONSTRAINT_DIVISIBLE)
            input_error(c, "inputs violate constraint %s %% %lld == 0: %s%s", ea, (long long)k.lo, from, val);
        else {
            expr_text(g, k.b, eb, sizeof eb);
            input_error(c, "inputs violate constraint %s == %s: %s (%lld != %lld)", ea, eb, from, (long long)a,
                        (long long)b);
        }
        ir_strbuf_free(&why);
        status = IR_EINVAL;
    }
    return status;
}

static IrStatus bind_consts(InterpCtx *c) {
    const IrGraph *g = c->g;
    for (uint32_t i = 0; i < ir_graph_num_const_values(g); i++) {
        IrValueId v = ir_graph_const_value(g, i);
        IrConstId k = ir_value_const(g, v);
        IrTypeId t = ir_const_type(g, k);
        uint32_t rank = ir_type_rank(g, t);
        int64_t dims[IR_MAX_RANK];
        bool ok = rank != IR_RANK_UNKNOWN && rank <= IR_MAX_RANK;
        for (uint32_t d = 0; ok && d < rank; d++) ok = ir_expr_is_const(g, ir_type_dims(g, t)[d], &dims[d]);
        if (!ok) {
            input_error(c, "constant '%s' has no static shape", ir_value_name(g, v));
            return IR_EVERIFY;
        }
        IrTensor view;
        IrStatus s = ir_tensor_from_const(&view, g, k);
        if (s == IR_ENOMEM) {
            input_error(c, "out of memory binding constant '%s'", ir_value_name(g, v));
            return s;
        }
        if (s) {
            input_error(c, "constant '%s' holds %zu bytes, not the data its type needs", ir_value_name(g, v),
                        ir_const_nbytes(g, k));
            return IR_EVERIFY;
        }
        env_bind(c, v, &view);
    }
    return IR_OK;
}

/* ---- entry --------------------------------------------------------------------------------- */

static void exec_free(Exec *e) {
    InterpCtx *c = &e->c;
    if (c->env)
        for (uint32_t v = 0; v <= c->n_values; v++) ir_tensor_free(&c->env[v]);
    free(c->env);
    free(c->env_set);
    free(c->uses);
    free(c->left);
    free(c->sym);
    free(e->plan.node_start);
    free(e->plan.node_vals);
}

IrStatus ir_interp_run(const IrGraph *g, const IrTensor *inputs, uint32_t n_inputs, IrTensor *outputs,
                       const IrInterpOptions *opt, IrDiag *diag) {
    uint32_t n_out = ir_graph_num_outputs(g);
    for (uint32_t i = 0; i < n_out; i++) memset(&outputs[i], 0, sizeof outputs[i]);
    if (n_inputs != ir_graph_num_inputs(g)) {
        ir_diag_report(diag, IR_SEV_ERROR, ir_graph_source_file(g), 0, 0, NULL, 0,
                       "the graph has %u input%s, %u given", ir_graph_num_inputs(g),
                       ir_graph_num_inputs(g) == 1 ? "" : "s", n_inputs);
        return IR_EINVAL;
    }
    Exec e;
    memset(&e, 0, sizeof e);
    InterpCtx *c = &e.c;
    c->g = g;
    c->diag = diag;
    c->opt = opt;
    c->n_values = ir_graph_num_values(g);
    uint32_t n_syms = ir_graph_num_syms(g);
    c->env = calloc(c->n_values + 1, sizeof *c->env);
    c->env_set = calloc(c->n_values + 1, sizeof *c->env_set);
    c->uses = calloc(c->n_values + 1, sizeof *c->uses);
    c->left = calloc(c->n_values + 1, sizeof *c->left);
    c->sym = malloc((n_syms + 1) * sizeof *c->sym);
    SymSource *src = calloc(n_syms + 1, sizeof *src);
    IrStatus s = IR_OK;
    if (!c->env || !c->env_set || !c->uses || !c->left || !c->sym || !src || plan_build(&e)) {
        ir_diag_error(diag, "out of memory preparing the interpreter");
        s = IR_ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i <= n_syms; i++) c->sym[i] = -1;
    for (uint32_t i = 0; i < n_inputs && !s; i++) s = bind_input_syms(c, i, &inputs[i], src);
    for (uint32_t i = 0; i < n_inputs && !s; i++) s = check_input_exprs(c, i, &inputs[i]);
    if (!s) s = check_constraints(c, src);
    if (!s) s = bind_consts(c);
    if (!s) s = run_region(&e, 0, IR_ROOT_REGION, inputs, n_inputs, outputs);
out:
    free(src);
    exec_free(&e);
    return s;
}

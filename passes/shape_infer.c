/* shape-infer: symbolic shape propagation through the whole graph.
 *
 * Walks every region in program order, running each op's type rule (ir/infer.c) with shape
 * facts enabled, so shape computations (Shape, Gather, Slice, Concat, arithmetic on shapes)
 * are evaluated symbolically and Reshape of a computed shape gets symbolic dims. Declared
 * types are refined, never contradicted: a constant beats `?`, a declared symbol is kept when
 * the rule derives an equal-but-different expression (the equality becomes a fact).
 * Constraints come from the graph and from options (`shape-infer{B=1:64,S=512}`). What the
 * rules assumed (dims that must match, dims that must divide) is checked against the
 * constraints: a contradiction is an error naming the op, its operand shapes and the
 * constraint; what constraints do not already imply is recorded as a fact, and as a guard
 * (a runtime check on inputs) when it only involves symbols bound by graph inputs.
 */
#include "passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 64

typedef struct ShapeInfer {
    IrPassContext *c;
    IrGraph *g;
    IrShapeFacts *facts;
    int64_t *fixed;    /* symbol -> value when a constraint fixes it, else -1 */
    uint8_t *bound_by_input;
    int64_t typed, refined, unknown;
    bool failed;
} ShapeInfer;

static char *type_str(const IrGraph *g, IrTypeId t) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_type_print(g, t, &b);
    return b.data ? b.data : strdup("?");
}

static char *constraint_str(const IrGraph *g, const IrConstraint *c) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_constraint_print(g, c, &b);
    return b.data ? b.data : strdup("?");
}

/* Operand shapes of a node, for messages: "f32[B, 8] and f32[B, 16]". */
static char *operand_shapes(const IrGraph *g, IrNodeId n) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v) continue;
        if (b.len) ir_strbuf_puts(&b, " and ");
        ir_type_print(g, ir_value_type(g, v), &b);
    }
    return b.data ? b.data : strdup("(no operands)");
}

/* ---- options -------------------------------------------------------------------------------- */

static bool add_option_constraints(ShapeInfer *s) {
    IrGraph *g = s->g;
    for (uint32_t i = 0; i < ir_pass_num_options(s->c); i++) {
        const char *name, *value;
        ir_pass_option_at(s->c, i, &name, &value);
        IrSymId sym = ir_sym_find(g, name, strlen(name));
        if (!sym) {
            ir_pass_error(s->c, 0, "option '%s': the graph has no symbol '%s'", name, name);
            return false;
        }
        char *end;
        long long lo = strtoll(value, &end, 10), hi = lo;
        if (*end == ':') hi = strtoll(end + 1, &end, 10);
        if (*end || value[0] == 0 || lo > hi || lo < 0) {
            ir_pass_error(s->c, 0, "option '%s=%s': expected a value N or a range LO:HI", name, value);
            return false;
        }
        IrConstraint c = {.kind = IR_CONSTRAINT_RANGE, .a = ir_expr_sym(g, sym), .lo = lo, .hi = hi};
        if (lo == hi) {
            c.kind = IR_CONSTRAINT_EQ;
            c.b = ir_expr_const(g, lo);
        }
        ir_graph_add_constraint(g, &c);
    }
    return true;
}

/* Symbols fixed to a value (S == 512, or a range of one value). */
static void collect_fixed(ShapeInfer *s) {
    IrGraph *g = s->g;
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
        IrConstraint c = ir_graph_constraint(g, i);
        if (c.origin != IR_CONSTRAINT_USER || ir_expr_kind(g, c.a) != IR_EXPR_SYM) continue;
        int64_t v;
        if (c.kind == IR_CONSTRAINT_EQ && ir_expr_is_const(g, c.b, &v)) s->fixed[ir_expr_sym_id(g, c.a)] = v;
        if (c.kind == IR_CONSTRAINT_RANGE && c.lo == c.hi) s->fixed[ir_expr_sym_id(g, c.a)] = c.lo;
    }
}

static void mark_input_symbols(ShapeInfer *s, IrExprId e) {
    IrGraph *g = s->g;
    switch (ir_expr_kind(g, e)) {
    case IR_EXPR_SYM: s->bound_by_input[ir_expr_sym_id(g, e)] = 1; break;
    case IR_EXPR_CONST:
    case IR_EXPR_UNKNOWN: break;
    default:
        mark_input_symbols(s, ir_expr_lhs(g, e));
        mark_input_symbols(s, ir_expr_rhs(g, e));
    }
}

static bool only_input_symbols(ShapeInfer *s, IrExprId e) {
    IrGraph *g = s->g;
    switch (ir_expr_kind(g, e)) {
    case IR_EXPR_SYM: return s->bound_by_input[ir_expr_sym_id(g, e)];
    case IR_EXPR_CONST: return true;
    case IR_EXPR_UNKNOWN: return false;
    default: return only_input_symbols(s, ir_expr_lhs(g, e)) && only_input_symbols(s, ir_expr_rhs(g, e));
    }
}

/* ---- merging declared and inferred types ---------------------------------------------------- */

static void contradiction(ShapeInfer *s, IrNodeId n, IrValueId v, IrTypeId decl, IrTypeId inf) {
    char *d = type_str(s->g, decl), *i = type_str(s->g, inf), *ops = operand_shapes(s->g, n);
    ir_pass_error(s->c, n, "%s: result %%%s is declared %s but its operands (%s) give %s",
                  ir_op_name(ir_node_op(s->g, n)), ir_value_name(s->g, v), d, ops, i);
    free(d);
    free(i);
    free(ops);
    s->failed = true;
}

static bool user_constraint_implies(ShapeInfer *s, const IrConstraint *r);

static void record_fact(ShapeInfer *s, IrNodeId n, IrExprId a, IrExprId b) {
    IrGraph *g = s->g;
    IrConstraint c = {.kind = IR_CONSTRAINT_EQ, .a = a, .b = b, .origin = IR_CONSTRAINT_FACT,
                      .note = *ir_node_name(g, n) ? ir_str_intern_cstr(g, ir_node_name(g, n)) : 0};
    if (user_constraint_implies(s, &c)) return;
    ir_graph_add_constraint(g, &c);
    ir_pass_stat(s->c, "facts", 1);
}

/* How much a seq/opt type says about its tensors: 0 nothing, 1 the dtype, 2 the rank too. */
static int container_detail(const IrGraph *g, IrTypeId t) {
    while (ir_type_is_container(g, t)) t = ir_type_elem(g, t);
    return !t ? 0 : ir_type_rank(g, t) == IR_RANK_UNKNOWN ? 1 : 2;
}

static void merge_result(ShapeInfer *s, IrNodeId n, IrValueId v, IrTypeId inf) {
    IrGraph *g = s->g;
    IrTypeId decl = ir_value_type(g, v);
    if (!inf) {
        if (!decl || ir_type_rank(g, decl) == IR_RANK_UNKNOWN) s->unknown++;
        return;
    }
    if (!decl) {
        ir_value_set_type(g, v, inf);
        s->typed++;
        return;
    }
    if (decl == inf) return;
    if (ir_type_is_container(g, decl) || ir_type_is_container(g, inf)) {
        /* sequences and optionals: no facts about element dims (elements may differ); the
         * inferred type replaces the declared one only when it says more */
        if (!ir_type_compatible(g, decl, inf)) {
            contradiction(s, n, v, decl, inf);
        } else if (container_detail(g, inf) > container_detail(g, decl)) {
            ir_value_set_type(g, v, inf);
            s->refined++;
        }
        return;
    }
    if (ir_type_dtype(g, decl) != ir_type_dtype(g, inf)) {
        contradiction(s, n, v, decl, inf);
        return;
    }
    uint32_t rd = ir_type_rank(g, decl), ri = ir_type_rank(g, inf);
    if (rd == IR_RANK_UNKNOWN) {
        ir_value_set_type(g, v, inf);
        s->refined++;
        return;
    }
    if (ri == IR_RANK_UNKNOWN) return;
    if (rd != ri || rd > MAXR) {
        contradiction(s, n, v, decl, inf);
        return;
    }
    IrExprId dims[MAXR];
    bool changed = false;
    for (uint32_t k = 0; k < rd; k++) {
        IrExprId a = ir_type_dims(g, decl)[k], b = ir_type_dims(g, inf)[k];
        int64_t va, vb;
        bool ca = ir_expr_is_const(g, a, &va), cb = ir_expr_is_const(g, b, &vb);
        dims[k] = a;
        if (a == b || ir_expr_kind(g, b) == IR_EXPR_UNKNOWN) continue;
        if (ir_expr_kind(g, a) == IR_EXPR_UNKNOWN) {
            dims[k] = b;
            changed = true;
        } else if (ca && cb) {
            contradiction(s, n, v, decl, inf);
            return;
        } else if (cb) {
            record_fact(s, n, a, b);
            dims[k] = b;
            changed = true;
        } else {
            record_fact(s, n, a, b); /* keep the declared name (e.g. T for S + 1) */
        }
    }
    if (changed) {
        ir_value_set_type(g, v, ir_type_tensor(g, ir_type_dtype(g, decl), rd, dims));
        s->refined++;
    }
}

/* ---- the walk ------------------------------------------------------------------------------- */

static void infer_region(ShapeInfer *s, IrRegionId r);

static void seed_loop_args(ShapeInfer *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrRegionId body = ir_node_region_at(g, n, 0);
    uint32_t na = ir_region_num_args(g, body);
    if (na >= 1 && !ir_value_type(g, ir_region_arg(g, body, 0)))
        ir_value_set_type(g, ir_region_arg(g, body, 0), ir_type_tensor(g, IR_DTYPE_I64, 0, NULL));
    if (na >= 2 && !ir_value_type(g, ir_region_arg(g, body, 1)))
        ir_value_set_type(g, ir_region_arg(g, body, 1), ir_type_tensor(g, IR_DTYPE_BOOL, 0, NULL));
    for (uint32_t i = 2; i < na && i < ir_node_num_operands(g, n); i++) {
        IrValueId arg = ir_region_arg(g, body, i), init = ir_node_operand(g, n, i);
        if (!ir_value_type(g, arg) && init) ir_value_set_type(g, arg, ir_value_type(g, init));
    }
}

/* SequenceMap's body arguments: one element of each sequence operand, a tensor operand as is. */
static void seed_sequence_map_args(ShapeInfer *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrRegionId body = ir_node_region_at(g, n, 0);
    for (uint32_t i = 0; i < ir_region_num_args(g, body) && i < ir_node_num_operands(g, n); i++) {
        IrValueId arg = ir_region_arg(g, body, i);
        IrTypeId t = ir_value_type(g, ir_node_operand(g, n, i));
        if (ir_type_kind(g, t) == IR_TYPE_SEQ) t = ir_type_elem(g, t);
        if (!ir_value_type(g, arg) && ir_type_kind(g, t) == IR_TYPE_TENSOR) ir_value_set_type(g, arg, t);
    }
}

static void infer_node(ShapeInfer *s, IrNodeId n) {
    IrGraph *g = s->g;
    if (ir_node_op(g, n) == IR_OP_LOOP) seed_loop_args(s, n);
    if (ir_node_op(g, n) == IR_OP_SEQUENCE_MAP) seed_sequence_map_args(s, n);
    for (uint32_t k = 0; k < ir_node_num_regions(g, n) && !s->failed; k++) infer_region(s, ir_node_region_at(g, n, k));
    if (s->failed) return;
    uint32_t nr = ir_node_num_results(g, n);
    IrTypeId small[16], *inf = nr <= 16 ? small : malloc(nr * sizeof *inf);
    if (!inf) {
        s->failed = true;
        return;
    }
    if (ir_node_infer_types_ex(g, n, ir_pass_diag(s->c), inf, s->facts) != IR_OK) {
        s->failed = true; /* the rule reported the op and shapes */
    } else {
        for (uint32_t i = 0; i < nr && !s->failed; i++) {
            IrValueId v = ir_node_result(g, n, i);
            if (v) merge_result(s, n, v, inf[i]);
        }
    }
    if (inf != small) free(inf);
}

static void infer_region(ShapeInfer *s, IrRegionId r) {
    for (IrNodeId n = ir_region_first(s->g, r); n && !s->failed; n = ir_node_next(s->g, n)) infer_node(s, n);
}

/* ---- requirements against constraints ------------------------------------------------------- */

/* Value of an expression with the fixed symbols substituted, when that makes it constant. */
static bool eval_fixed(ShapeInfer *s, IrExprId e, int64_t *v) { return ir_expr_eval(s->g, e, s->fixed, v); }

/* Sufficient test that e is a multiple of k under the user's constraints: a constant multiple,
 * a symbol declared divisible by a multiple of k, or a product with such a factor. */
static bool divides(ShapeInfer *s, IrExprId e, int64_t k) {
    IrGraph *g = s->g;
    int64_t v;
    if (ir_expr_is_const(g, e, &v)) return v % k == 0;
    if (ir_expr_kind(g, e) == IR_EXPR_MUL) return divides(s, ir_expr_lhs(g, e), k) || divides(s, ir_expr_rhs(g, e), k);
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
        IrConstraint c = ir_graph_constraint(g, i);
        if (c.origin == IR_CONSTRAINT_USER && c.kind == IR_CONSTRAINT_DIVISIBLE && c.a == e && c.lo % k == 0) return true;
    }
    return false;
}

static bool user_constraint_implies(ShapeInfer *s, const IrConstraint *r) {
    IrGraph *g = s->g;
    if (r->kind == IR_CONSTRAINT_DIVISIBLE && divides(s, r->a, r->lo)) return true;
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
        IrConstraint c = ir_graph_constraint(g, i);
        if (c.origin != IR_CONSTRAINT_USER || c.kind != r->kind) continue;
        if (r->kind == IR_CONSTRAINT_EQ && ((c.a == r->a && c.b == r->b) || (c.a == r->b && c.b == r->a))) return true;
        if (r->kind == IR_CONSTRAINT_DIVISIBLE && c.a == r->a && c.lo % r->lo == 0) return true;
    }
    return false;
}

/* a % k == 0 where a = coef * X: reduce to X % (k / gcd(coef, k)) == 0. */
static IrConstraint reduce_divisible(IrGraph *g, IrConstraint r) {
    IrExprId a = r.a;
    int64_t coef = 1, c;
    if (ir_expr_kind(g, a) == IR_EXPR_MUL && ir_expr_is_const(g, ir_expr_rhs(g, a), &c)) {
        coef = c;
        a = ir_expr_lhs(g, a);
    }
    int64_t x = coef < 0 ? -coef : coef, y = r.lo;
    while (y) {
        int64_t t = x % y;
        x = y;
        y = t;
    }
    if (x > 1) {
        r.a = a;
        r.lo /= x;
    }
    return r;
}

/* A symbol's range (user constraint) or [0, INT64_MAX]. */
static void sym_range(ShapeInfer *s, IrExprId e, int64_t *lo, int64_t *hi) {
    *lo = 0;
    *hi = INT64_MAX;
    for (uint32_t i = 0; i < ir_graph_num_constraints(s->g); i++) {
        IrConstraint c = ir_graph_constraint(s->g, i);
        if (c.origin == IR_CONSTRAINT_USER && c.kind == IR_CONSTRAINT_RANGE && c.a == e) {
            *lo = c.lo;
            *hi = c.hi;
        }
    }
}

static void check_requirement(ShapeInfer *s, IrConstraint r, IrNodeId n) {
    IrGraph *g = s->g;
    if (r.kind == IR_CONSTRAINT_DIVISIBLE) r = reduce_divisible(g, r);
    if (r.kind == IR_CONSTRAINT_DIVISIBLE && r.lo <= 1) return;
    if (user_constraint_implies(s, &r)) return;
    int64_t va, vb;
    bool violated = false, holds = false;
    const char *why = NULL;
    IrConstraint culprit = {0};
    if (r.kind == IR_CONSTRAINT_EQ) {
        bool ka = eval_fixed(s, r.a, &va), kb = eval_fixed(s, r.b, &vb);
        if (ka && kb) {
            violated = va != vb;
            holds = !violated;
            why = "the fixed symbol values";
        } else if (ka != kb && ir_expr_kind(g, ka ? r.b : r.a) == IR_EXPR_SYM) {
            /* symbol == constant: the constant must lie in the symbol's range and meet its
             * divisibility */
            IrExprId sym = ka ? r.b : r.a;
            int64_t v = ka ? va : vb, lo, hi;
            sym_range(s, sym, &lo, &hi);
            if (v < lo || v > hi) {
                violated = true;
                for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
                    IrConstraint c = ir_graph_constraint(g, i);
                    if (c.origin == IR_CONSTRAINT_USER && c.kind == IR_CONSTRAINT_RANGE && c.a == sym) culprit = c;
                }
            }
            for (uint32_t i = 0; i < ir_graph_num_constraints(g) && !violated; i++) {
                IrConstraint c = ir_graph_constraint(g, i);
                if (c.origin == IR_CONSTRAINT_USER && c.kind == IR_CONSTRAINT_DIVISIBLE && c.a == sym && v % c.lo != 0) {
                    violated = true;
                    culprit = c;
                }
            }
        }
    } else if (eval_fixed(s, r.a, &va)) {
        violated = va % r.lo != 0;
        holds = !violated;
        why = "the fixed symbol values";
    }
    if (holds) return;
    char *req = constraint_str(g, &r), *ops = operand_shapes(g, n);
    if (violated) {
        char *by = culprit.kind ? constraint_str(g, &culprit) : NULL;
        ir_pass_error(s->c, n, "%s needs %s (operand shapes %s), which contradicts %s%s",
                      ir_op_name(ir_node_op(g, n)), req, ops, by ? "constraint " : "", by ? by : why);
        free(by);
        s->failed = true;
    } else {
        IrStrId note = *ir_node_name(g, n) ? ir_str_intern_cstr(g, ir_node_name(g, n)) : 0;
        r.note = note;
        /* a requirement on input dims alone is checked at run time (a guard); any other is
         * recorded as a fact the graph relies on */
        bool guard = only_input_symbols(s, r.a) && (r.kind != IR_CONSTRAINT_EQ || only_input_symbols(s, r.b));
        r.origin = guard ? IR_CONSTRAINT_GUARD : IR_CONSTRAINT_FACT;
        ir_graph_add_constraint(g, &r);
        ir_pass_stat(s->c, guard ? "guards" : "facts", 1);
    }
    free(req);
    free(ops);
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    ShapeInfer s = {c, g, NULL, NULL, NULL, 0, 0, 0, false};
    if (!add_option_constraints(&s)) return IR_EINVAL;
    ir_graph_clear_constraints(g, IR_CONSTRAINT_FACT);
    ir_graph_clear_constraints(g, IR_CONSTRAINT_GUARD);
    uint32_t ns = ir_graph_num_syms(g) + 1;
    s.fixed = malloc(ns * sizeof *s.fixed);
    s.bound_by_input = calloc(ns, 1);
    IrStatus st = ir_shape_facts_create(g, &s.facts);
    if (!s.fixed || !s.bound_by_input || st) {
        free(s.fixed);
        free(s.bound_by_input);
        ir_shape_facts_destroy(s.facts);
        return IR_ENOMEM;
    }
    for (uint32_t i = 0; i < ns; i++) s.fixed[i] = -1;
    collect_fixed(&s);
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        uint32_t r = ir_type_rank(g, t);
        for (uint32_t k = 0; r != IR_RANK_UNKNOWN && k < r; k++) mark_input_symbols(&s, ir_type_dims(g, t)[k]);
    }
    infer_region(&s, 1);
    for (uint32_t i = 0; !s.failed && i < ir_shape_facts_num_required(s.facts); i++) {
        IrNodeId n;
        IrConstraint r = ir_shape_facts_required(s.facts, i, &n);
        check_requirement(&s, r, n);
    }
    ir_pass_stat(c, "values-typed", s.typed);
    ir_pass_stat(c, "values-refined", s.refined);
    ir_pass_stat(c, "values-unknown", s.unknown);
    if (s.typed || s.refined || ir_shape_facts_num_required(s.facts)) ir_pass_changed(c);
    free(s.fixed);
    free(s.bound_by_input);
    ir_shape_facts_destroy(s.facts);
    return s.failed ? IR_EVERIFY : IR_OK;
}

const IrPass pass_shape_infer = {
    .name = "shape-infer",
    .summary = "propagate symbolic shapes through every op; record facts, guards; options SYM=N or SYM=LO:HI",
    .options = (const IrPassOption[]){{NULL, NULL, NULL}},
    .run = run,
    .free_options = true,
};

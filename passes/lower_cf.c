/* lower-cf: turns structured control flow into straight-line code where that is cheap and
 * exact.
 *  - If with a constant predicate: the taken branch is cloned inline before the If.
 *  - If on a data-dependent predicate whose branches are cheap (<= max-cost nodes together) and
 *    free of random ops, shape guards and loops, with a bool one-element predicate and, for each
 *    output, the same type in both branches with no `?` dim (constants or symbol expressions):
 *    both branches inline, then one Where(cond, then, else) per output. Both branches then run,
 *    so an error only the untaken branch would raise (an index out of range, say) surfaces.
 *  - Loop with a constant trip count 1..max-trip, a constant-true (or absent) condition that
 *    the body passes through unchanged (possibly via Identity) or replaces by constant true:
 *    the body is cloned once per iteration, the iteration number becoming an i64 constant; scan
 *    outputs become Concat(axis 0) of Unsqueeze(axis 0) of the per-iteration values.
 *  - Scan whose scan inputs have a constant length 1..max-trip: per step each scan input's
 *    element is a Gather at the step (from the end for a reverse direction) and the body is
 *    cloned on the states; scan outputs become Concat of Unsqueeze at their axes (in reverse
 *    order for a reverse direction).
 * Everything else stays structured and is reported as a note. Nested regions are lowered
 * first, so an inner If can make its Loop unrollable. Names survive: a lowered node's result
 * name goes to the inlined value when that is a fresh copy (else a graph output gets an
 * Identity of that name), and inlined If branches' copies take back their originals' names
 * (unrolled copies are "<name>_u<k>"). Uses are rewritten while walking forward, so the pass is
 * linear in the graph plus the code it creates.
 */
#include "ir/shape.h"
#include "passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Lower {
    IrPassContext *c;
    IrGraph *g;
    IrValueId *repl; /* value -> replacement (0 = itself); values of the pass's start only */
    uint8_t *is_graph_output;
    uint32_t n_values; /* entries of repl / is_graph_output, less one */
    IrValueId *map;    /* clone map, grown to the graph's value count before each use */
    size_t map_cap;
    int64_t max_cost, max_trip, max_unroll;
    int64_t inlined, selected, unrolled;
} Lower;

static void set_repl(Lower *s, IrValueId from, IrValueId to) {
    if (from && from <= s->n_values && from != to) s->repl[from] = to;
}

static IrStatus status_or(const IrGraph *g, IrStatus fallback) {
    return ir_graph_status(g) ? ir_graph_status(g) : fallback;
}

/* The clone map must cover every value id; entries of values that no longer exist may stay
 * set (a clone only looks up values of the region it copies, and outer values never were the
 * source of a copy, so their entries are 0). */
static IrStatus map_reserve(Lower *s) {
    size_t need = (size_t)ir_graph_num_values(s->g) + 1;
    if (need <= s->map_cap) return IR_OK;
    size_t cap = need > 2 * s->map_cap ? need : 2 * s->map_cap;
    IrValueId *m = realloc(s->map, cap * sizeof *m);
    if (!m) return IR_ENOMEM;
    memset(m + s->map_cap, 0, (cap - s->map_cap) * sizeof *m);
    s->map = m;
    s->map_cap = cap;
    return IR_OK;
}

/* ---- facts about values and regions ------------------------------------------------------- */

static bool const_of(const IrGraph *g, IrValueId v, IrConstId *out) { return ir_pass_const_of(g, v, out); }

/* A constant with exactly one element, as an integer (bools read 0/1). */
static bool const_scalar(const IrGraph *g, IrValueId v, int64_t *out) {
    IrConstId k;
    int64_t n;
    if (!const_of(g, v, &k) || !ir_type_numel(g, ir_const_type(g, k), &n) || n != 1) return false;
    *out = ir_elem_get_i64(ir_type_dtype(g, ir_const_type(g, k)), ir_const_data(g, k), 0);
    return true;
}

static bool expr_known(const IrGraph *g, IrExprId e) {
    switch (ir_expr_kind(g, e)) {
    case IR_EXPR_CONST:
    case IR_EXPR_SYM: return true;
    case IR_EXPR_UNKNOWN: return false;
    default: return e && expr_known(g, ir_expr_lhs(g, e)) && expr_known(g, ir_expr_rhs(g, e));
    }
}

/* Every dim a constant or an expression over symbols: two values of this one (interned) type
 * have the same shape at run time, which `?` dims would not promise. */
static bool shape_known(const IrGraph *g, IrTypeId t) {
    uint32_t rank = ir_type_rank(g, t);
    if (!t || rank == IR_RANK_UNKNOWN || ir_type_dtype(g, t) == IR_DTYPE_NONE) return false;
    for (uint32_t i = 0; i < rank; i++)
        if (!expr_known(g, ir_type_dims(g, t)[i])) return false;
    return true;
}

/* Nodes in r and below; *bad names the first op that must not run speculatively. */
static int64_t region_cost(const IrGraph *g, IrRegionId r, const char **bad) {
    int64_t n = 0;
    for (IrNodeId m = ir_region_first(g, r); m; m = ir_node_next(g, m)) {
        IrOp op = ir_node_op(g, m);
        if (ir_op_info(op)->cls == IR_CLASS_RANDOM && !*bad) *bad = ir_op_name(op);
        switch (op) {
        case IR_OP_DROPOUT:
        case IR_OP_SHAPE_GUARD:
        case IR_OP_LOOP:
        case IR_OP_SCAN:
            if (!*bad) *bad = ir_op_name(op);
            break;
        default: break;
        }
        n++;
        for (uint32_t k = 0; k < ir_node_num_regions(g, m); k++) n += region_cost(g, ir_node_region_at(g, m, k), bad);
    }
    return n;
}

static bool region_uses(const IrGraph *g, IrRegionId r, IrValueId v) {
    for (uint32_t i = 0; i < ir_region_num_outputs(g, r); i++)
        if (ir_region_output(g, r, i) == v) return true;
    for (IrNodeId m = ir_region_first(g, r); m; m = ir_node_next(g, m)) {
        for (uint32_t i = 0; i < ir_node_num_operands(g, m); i++)
            if (ir_node_operand(g, m, i) == v) return true;
        for (uint32_t k = 0; k < ir_node_num_regions(g, m); k++)
            if (region_uses(g, ir_node_region_at(g, m, k), v)) return true;
    }
    return false;
}

/* ---- building ------------------------------------------------------------------------------- */

/* Provenance of a node about to be erased, to stamp on what replaces it. */
typedef struct Prov {
    IrStrId *ids;
    uint32_t n;
} Prov;

static Prov prov_take(IrGraph *g, IrNodeId n) {
    Prov p = {NULL, ir_node_num_provenance(g, n)};
    if (!p.n && !*ir_node_name(g, n)) return p;
    p.ids = malloc((p.n ? p.n : 1) * sizeof *p.ids);
    if (!p.ids) {
        p.n = 0;
        return p;
    }
    if (p.n)
        for (uint32_t i = 0; i < p.n; i++) p.ids[i] = ir_node_provenance(g, n, i);
    else
        p.ids[p.n++] = ir_str_intern_cstr(g, ir_node_name(g, n));
    return p;
}

/* Creates a node before `next` (or at the end of r), stamps provenance and types it by the op's
 * rule. `name` NULL = generated. */
static IrNodeId build(IrGraph *g, IrRegionId r, IrNodeId next, const Prov *p, IrOp op, uint32_t n_ops,
                      const IrValueId *ops, const char *name) {
    const char *names[1] = {name};
    IrNodeId n = next ? ir_node_create_before(g, next, op, n_ops, ops, 1, names, NULL)
                      : ir_node_create(g, r, op, n_ops, ops, 1, names, NULL);
    if (!n) return 0;
    if (p->n) ir_node_set_provenance(g, n, p->n, p->ids);
    return n;
}

static void type_by_rule(IrGraph *g, IrNodeId n) {
    IrDiag quiet;
    ir_diag_init(&quiet, NULL, NULL);
    IrTypeId t = 0;
    if (ir_node_infer_types(g, n, &quiet, &t) == IR_OK && t) ir_value_set_type(g, ir_node_result(g, n, 0), t);
}

/* Result names of node n (malloc'd copies; NULL for absent results). */
static char **names_take(const IrGraph *g, IrNodeId n) {
    uint32_t nr = ir_node_num_results(g, n);
    char **names = calloc(nr ? nr : 1, sizeof *names);
    for (uint32_t i = 0; names && i < nr; i++) {
        IrValueId r = ir_node_result(g, n, i);
        if (r && !(names[i] = strdup(ir_value_name(g, r)))) {
            for (uint32_t k = 0; k < i; k++) free(names[k]);
            free(names);
            return NULL;
        }
    }
    return names;
}

static void names_free(char **names, uint32_t n) {
    for (uint32_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

/* Once node n is erased, result i (named names[i]) is replaced by v. A value the lowering
 * created takes the name; otherwise a graph output gets an Identity of that name, and any
 * other result is simply replaced. `fresh_from`: values with larger ids are the lowering's. */
static IrStatus rebind_result(Lower *s, IrValueId old, const char *name, IrValueId v, IrValueId fresh_from,
                              uint8_t *claimed, IrRegionId r, IrNodeId next, const Prov *p) {
    IrGraph *g = s->g;
    if (!old) return IR_OK;
    bool fresh = v > fresh_from && ir_value_kind(g, v) == IR_VALUE_RESULT && !claimed[v - fresh_from - 1];
    if (fresh) {
        claimed[v - fresh_from - 1] = 1;
        if (ir_value_rename(g, v, name) != IR_OK) return status_or(g, IR_EINVAL);
    } else if (old <= s->n_values && s->is_graph_output[old]) {
        IrNodeId id = build(g, r, next, p, IR_OP_IDENTITY, 1, &v, name);
        if (!id) return status_or(g, IR_EINVAL);
        ir_value_set_type(g, ir_node_result(g, id, 0), ir_value_type(g, v));
        v = ir_node_result(g, id, 0);
    }
    set_repl(s, old, v);
    return IR_OK;
}

/* The copies a clone of region r made (original -> copy, for results and nested region
 * arguments), gathered before the original goes so the copies can take the freed names. */
typedef struct Copies {
    IrValueId *pairs; /* original, copy, original, copy, ... */
    size_t n, cap;
    bool failed;
} Copies;

static void copies_add(Copies *c, IrValueId orig, IrValueId copy) {
    if (!orig || !copy || c->failed) return;
    if (c->n + 2 > c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        IrValueId *p = realloc(c->pairs, cap * sizeof *p);
        if (!p) {
            c->failed = true;
            return;
        }
        c->pairs = p;
        c->cap = cap;
    }
    c->pairs[c->n++] = orig;
    c->pairs[c->n++] = copy;
}

static void copies_collect(const IrGraph *g, IrRegionId r, const IrValueId *map, Copies *c) {
    for (IrNodeId m = ir_region_first(g, r); m; m = ir_node_next(g, m)) {
        for (uint32_t i = 0; i < ir_node_num_results(g, m); i++) {
            IrValueId v = ir_node_result(g, m, i);
            if (v) copies_add(c, v, map[v]);
        }
        for (uint32_t k = 0; k < ir_node_num_regions(g, m); k++) {
            IrRegionId nr = ir_node_region_at(g, m, k);
            for (uint32_t i = 0; i < ir_region_num_args(g, nr); i++) {
                IrValueId a = ir_region_arg(g, nr, i);
                copies_add(c, a, map[a]);
            }
            copies_collect(g, nr, map, c);
        }
    }
}

/* Once the originals are erased, each copy not renamed already takes its original's name, so
 * values keep the names they had in the source model (a name taken meanwhile is left be). */
static IrStatus copies_rename(IrGraph *g, const Copies *c, IrValueId fresh_from, const uint8_t *claimed) {
    for (size_t i = 0; i < c->n; i += 2) {
        IrValueId orig = c->pairs[i], copy = c->pairs[i + 1];
        if (copy <= fresh_from || (claimed && claimed[copy - fresh_from - 1])) continue;
        char *name = strdup(ir_value_name(g, orig));
        if (!name) return IR_ENOMEM;
        IrStatus st = ir_value_rename(g, copy, name);
        free(name);
        if (st != IR_OK && st != IR_EINVAL) return st;
    }
    return ir_graph_status(g);
}

/* ---- If ------------------------------------------------------------------------------------- */

/* The taken branch, inline. */
static IrStatus inline_if(Lower *s, IrNodeId n, IrRegionId branch) {
    IrGraph *g = s->g;
    IrRegionId r = ir_node_region(g, n);
    IrNodeId next = ir_node_next(g, n);
    uint32_t nr = ir_node_num_results(g, n);
    IrValueId fresh_from = ir_graph_num_values(g);
    IrValueId *outs = calloc(nr ? nr : 1, sizeof *outs);
    char **names = names_take(g, n);
    Prov p = prov_take(g, n);
    IrStatus st = outs && names ? map_reserve(s) : IR_ENOMEM;
    if (st == IR_OK) st = ir_region_clone_into(g, branch, r, n, s->map, outs);
    Copies copies = {0};
    if (st == IR_OK) copies_collect(g, branch, s->map, &copies);
    if (copies.failed) st = IR_ENOMEM;
    uint8_t *claimed = NULL;
    if (st == IR_OK) {
        claimed = calloc((size_t)(ir_graph_num_values(g) - fresh_from) + 1, 1);
        if (!claimed) st = IR_ENOMEM;
    }
    if (st == IR_OK) {
        IrValueId *res = malloc((nr ? nr : 1) * sizeof *res);
        if (!res) st = IR_ENOMEM;
        for (uint32_t i = 0; res && i < nr; i++) res[i] = ir_node_result(g, n, i);
        if (res) ir_node_erase(g, n);
        for (uint32_t i = 0; res && i < nr && st == IR_OK; i++)
            st = rebind_result(s, res[i], names[i], outs[i], fresh_from, claimed, r, next, &p);
        free(res);
    }
    if (st == IR_OK) st = copies_rename(g, &copies, fresh_from, claimed);
    if (st == IR_OK) s->inlined++;
    free(copies.pairs);
    free(claimed);
    free(p.ids);
    names_free(names, nr);
    free(outs);
    return st;
}

/* Why a data-dependent If cannot become Where; NULL when it can. */
static const char *select_blocker(Lower *s, IrNodeId n, char *buf, size_t cap) {
    IrGraph *g = s->g;
    IrRegionId t = ir_node_region_at(g, n, 0), e = ir_node_region_at(g, n, 1);
    const char *bad = NULL;
    int64_t cost = region_cost(g, t, &bad) + region_cost(g, e, &bad);
    if (bad) {
        snprintf(buf, cap, "a branch contains %s, which must not run speculatively", bad);
        return buf;
    }
    if (cost > s->max_cost) {
        snprintf(buf, cap, "the branches hold %lld nodes (max-cost=%lld)", (long long)cost, (long long)s->max_cost);
        return buf;
    }
    IrTypeId ct = ir_value_type(g, ir_node_operand(g, n, 0));
    int64_t numel;
    if (ir_type_dtype(g, ct) != IR_DTYPE_BOOL || !ir_type_numel(g, ct, &numel) || numel != 1)
        return "the predicate is not a bool tensor of one element with a static shape";
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrTypeId a = ir_value_type(g, ir_region_output(g, t, i)), b = ir_value_type(g, ir_region_output(g, e, i));
        if (a != b || !shape_known(g, a)) {
            snprintf(buf, cap, "output %u does not have the same fully known type in both branches", i);
            return buf;
        }
        if (ir_type_rank(g, ct) > ir_type_rank(g, a)) {
            snprintf(buf, cap, "the predicate has a higher rank than output %u", i);
            return buf;
        }
    }
    return NULL;
}

/* Both branches inline, then one Where per output. */
static IrStatus select_if(Lower *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrRegionId r = ir_node_region(g, n);
    IrNodeId next = ir_node_next(g, n);
    uint32_t nr = ir_node_num_results(g, n);
    IrValueId cond = ir_node_operand(g, n, 0), fresh_from = ir_graph_num_values(g);
    IrValueId *outs = calloc(2 * (size_t)(nr ? nr : 1), sizeof *outs);
    IrValueId *res = calloc(nr ? nr : 1, sizeof *res);
    char **names = names_take(g, n);
    Prov p = prov_take(g, n);
    IrStatus st = outs && res && names ? map_reserve(s) : IR_ENOMEM;
    if (st == IR_OK) st = ir_region_clone_into(g, ir_node_region_at(g, n, 0), r, n, s->map, outs);
    if (st == IR_OK) st = map_reserve(s);
    if (st == IR_OK) st = ir_region_clone_into(g, ir_node_region_at(g, n, 1), r, n, s->map, outs + nr);
    Copies copies = {0};
    for (uint32_t k = 0; k < 2 && st == IR_OK; k++) copies_collect(g, ir_node_region_at(g, n, k), s->map, &copies);
    if (copies.failed) st = IR_ENOMEM;
    if (st == IR_OK) {
        for (uint32_t i = 0; i < nr; i++) res[i] = ir_node_result(g, n, i);
        ir_node_erase(g, n);
    }
    for (uint32_t i = 0; i < nr && st == IR_OK; i++) {
        if (!res[i]) continue;
        IrValueId ops[3] = {cond, outs[i], outs[nr + i]};
        IrNodeId w = build(g, r, next, &p, IR_OP_WHERE, 3, ops, names[i]);
        if (!w) {
            st = status_or(g, IR_EINVAL);
            break;
        }
        type_by_rule(g, w);
        set_repl(s, res[i], ir_node_result(g, w, 0));
    }
    if (st == IR_OK) st = copies_rename(g, &copies, fresh_from, NULL);
    if (st == IR_OK) s->selected++;
    free(copies.pairs);
    free(p.ids);
    names_free(names, nr);
    free(res);
    free(outs);
    return st;
}

/* ---- Loop ----------------------------------------------------------------------------------- */

/* Follows Identity nodes back to their source. */
static IrValueId through_identity(const IrGraph *g, IrValueId v) {
    for (IrNodeId d; v && (d = ir_value_def_node(g, v)) && ir_node_op(g, d) == IR_OP_IDENTITY;)
        v = ir_node_operand(g, d, 0);
    return v;
}

/* Why the Loop cannot be unrolled; NULL when it can (trip count in *trip). */
static const char *unroll_blocker(Lower *s, IrNodeId n, int64_t *trip, char *buf, size_t cap) {
    IrGraph *g = s->g;
    IrRegionId body = ir_node_region_at(g, n, 0);
    int64_t m, cond;
    if (!const_scalar(g, ir_node_operand(g, n, 0), &m)) return "the trip count is not a constant";
    if (m <= 0) return "the trip count is 0";
    if (m > s->max_trip) {
        snprintf(buf, cap, "the trip count %lld exceeds max-trip=%lld", (long long)m, (long long)s->max_trip);
        return buf;
    }
    IrValueId c0 = ir_node_operand(g, n, 1);
    if (c0 && (!const_scalar(g, c0, &cond) || !cond)) return "the initial condition is not constant true";
    uint32_t n_carried = ir_node_num_operands(g, n) - 2, nr = ir_node_num_results(g, n);
    if (nr < n_carried || ir_region_num_args(g, body) != 2 + n_carried || ir_region_num_outputs(g, body) != 1 + nr)
        return "the body does not match the Loop's operands and results";
    IrValueId out = through_identity(g, ir_region_output(g, body, 0));
    if (out != ir_region_arg(g, body, 1) && (!const_scalar(g, out, &cond) || !cond))
        return "the body may change the condition";
    const char *bad = NULL;
    int64_t cost = region_cost(g, body, &bad);
    if (cost * m > s->max_unroll) {
        snprintf(buf, cap, "unrolling would create %lld nodes (max-unroll-nodes=%lld)", (long long)(cost * m),
                 (long long)s->max_unroll);
        return buf;
    }
    *trip = m;
    return NULL;
}

/* A scalar graph constant (i64 iteration number or bool true) named "<base><suffix>" when that
 * name is free. */
static IrValueId scalar_const(IrGraph *g, IrDType dt, int64_t v, const char *base, const char *suffix) {
    IrTypeId t = ir_type_tensor_i64(g, dt, 0, NULL);
    uint8_t bytes[8] = {0};
    ir_elem_set_i64(dt, bytes, 0, v);
    IrConstId c = ir_const_create(g, t, bytes, ir_dtype_size(dt));
    char name[256];
    int n = snprintf(name, sizeof name, "%s%s", base, suffix);
    bool free_ = n > 0 && (size_t)n < sizeof name && !ir_value_find(g, name, (size_t)n);
    return c ? ir_graph_add_const_value(g, free_ ? name : NULL, c) : 0;
}

typedef struct Unroll {
    IrRegionId body;
    uint32_t n_carried, n_scan;
    IrValueId *carried; /* current carried values */
    IrValueId *scans;   /* [iteration * n_scan + j] */
    IrValueId *outs;    /* body outputs of the last iteration */
} Unroll;

static IrStatus unroll_iterations(Lower *s, IrNodeId n, Unroll *u, int64_t trip) {
    IrGraph *g = s->g;
    IrRegionId r = ir_node_region(g, n);
    IrValueId iter_arg = ir_region_arg(g, u->body, 0), cond_arg = ir_region_arg(g, u->body, 1);
    bool iter_used = region_uses(g, u->body, iter_arg), cond_used = region_uses(g, u->body, cond_arg);
    char base[200], cbase[200], suffix[32];
    snprintf(base, sizeof base, "%s", ir_value_name(g, iter_arg));
    snprintf(cbase, sizeof cbase, "%s", ir_value_name(g, cond_arg));
    IrValueId cond = ir_node_operand(g, n, 1);
    if (cond_used && !cond && !(cond = scalar_const(g, IR_DTYPE_BOOL, 1, cbase, "_true")))
        return status_or(g, IR_ENOMEM);
    for (int64_t it = 0; it < trip; it++) {
        IrStatus st = map_reserve(s);
        if (st) return st;
        if (iter_used) {
            snprintf(suffix, sizeof suffix, "_it%lld", (long long)it);
            IrValueId iv = scalar_const(g, IR_DTYPE_I64, it, base, suffix);
            if (!iv || (st = map_reserve(s))) return st ? st : status_or(g, IR_ENOMEM);
            s->map[iter_arg] = iv;
        }
        s->map[cond_arg] = cond;
        for (uint32_t k = 0; k < u->n_carried; k++) s->map[ir_region_arg(g, u->body, 2 + k)] = u->carried[k];
        st = ir_region_clone_into(g, u->body, r, n, s->map, u->outs);
        if (st) return st;
        for (uint32_t k = 0; k < u->n_carried; k++) u->carried[k] = u->outs[1 + k];
        for (uint32_t j = 0; j < u->n_scan; j++) u->scans[it * u->n_scan + j] = u->outs[1 + u->n_carried + j];
    }
    return IR_OK;
}

/* "<base><suffix>" in buf when no value has that name, else NULL (a generated name). */
static const char *free_name(const IrGraph *g, char *buf, size_t cap, const char *base, const char *suffix) {
    int n = snprintf(buf, cap, "%s%s", base, suffix);
    return n > 0 && (size_t)n < cap && !ir_value_find(g, buf, (size_t)n) ? buf : NULL;
}

/* An i64 constant [v] (rank 1) named after base when that name is free. */
static IrValueId axes_const(IrGraph *g, int64_t v, const char *base) {
    int64_t one = 1;
    IrConstId k = ir_const_create(g, ir_type_tensor_i64(g, IR_DTYPE_I64, 1, &one), &v, sizeof v);
    char buf[256];
    return k ? ir_graph_add_const_value(g, free_name(g, buf, sizeof buf, base, "_axes"), k) : 0;
}

/* Unsqueeze(axes) of each iteration's value of scan output j (vals[it * stride + j]; last
 * iteration first when reverse), named after `scan`, before node `at` (the Loop or Scan). */
static bool unsqueeze_scan(Lower *s, const IrValueId *vals, uint32_t stride, uint32_t j, int64_t trip, bool reverse,
                           IrValueId axes, IrRegionId r, IrNodeId at, const Prov *p, const char *scan, IrValueId *parts) {
    for (int64_t it = 0; it < trip; it++) {
        int64_t src = reverse ? trip - 1 - it : it;
        IrValueId ops[2] = {vals[src * stride + j], axes};
        char buf[256], suffix[32];
        snprintf(suffix, sizeof suffix, "_it%lld", (long long)src);
        IrNodeId un = build(s->g, r, at, p, IR_OP_UNSQUEEZE, 2, ops, free_name(s->g, buf, sizeof buf, scan, suffix));
        if (!un) return false;
        type_by_rule(s->g, un);
        parts[it] = ir_node_result(s->g, un, 0);
    }
    return true;
}

/* Concat(axis) of the unsqueezed values, named `name`, before `next` (or at the end of r). */
static IrValueId concat_scan(IrGraph *g, IrRegionId r, IrNodeId next, const Prov *p, const char *name,
                             const IrValueId *parts, int64_t trip, int64_t axis) {
    IrNodeId cn = build(g, r, next, p, IR_OP_CONCAT, (uint32_t)trip, parts, name);
    if (!cn) return 0;
    IrAttrValue a = {.kind = IR_ATTR_INT, .i = axis};
    ir_node_set_attr(g, cn, "axis", &a);
    type_by_rule(g, cn);
    return ir_node_result(g, cn, 0);
}

static IrStatus unroll_loop(Lower *s, IrNodeId n, int64_t trip) {
    IrGraph *g = s->g;
    IrRegionId r = ir_node_region(g, n);
    IrNodeId next = ir_node_next(g, n);
    uint32_t nr = ir_node_num_results(g, n);
    Unroll u = {ir_node_region_at(g, n, 0), ir_node_num_operands(g, n) - 2, 0, NULL, NULL, NULL};
    u.n_scan = nr - u.n_carried;
    IrValueId fresh_from = ir_graph_num_values(g);
    u.carried = calloc(u.n_carried + 1, sizeof *u.carried);
    u.scans = calloc((size_t)trip * u.n_scan + 1, sizeof *u.scans);
    u.outs = calloc(ir_region_num_outputs(g, u.body) + 1, sizeof *u.outs);
    IrValueId *res = calloc(nr + 1, sizeof *res);
    char **names = names_take(g, n);
    Prov p = prov_take(g, n);
    uint8_t *claimed = NULL;
    IrStatus st = u.carried && u.scans && u.outs && res && names ? IR_OK : IR_ENOMEM;
    for (uint32_t k = 0; k < u.n_carried && st == IR_OK; k++) u.carried[k] = ir_node_operand(g, n, 2 + k);
    if (st == IR_OK) st = unroll_iterations(s, n, &u, trip);
    /* scan outputs: stacked with Concat nodes that take the Loop's result names once it is gone */
    IrValueId axes = 0;
    if (st == IR_OK && u.n_scan && !(axes = axes_const(g, 0, names[u.n_carried] ? names[u.n_carried] : "scan")))
        st = status_or(g, IR_ENOMEM);
    if (st == IR_OK) {
        claimed = calloc((size_t)(ir_graph_num_values(g) - fresh_from) + 1, 1);
        if (!claimed) st = IR_ENOMEM;
    }
    if (st == IR_OK) {
        /* the per-iteration Unsqueezes go before the Loop; the Concats, which take the Loop's
         * result names, where it was once it is erased */
        IrValueId *unsq = calloc((size_t)trip * u.n_scan + 1, sizeof *unsq);
        if (!unsq) st = IR_ENOMEM;
        for (uint32_t j = 0; j < u.n_scan && st == IR_OK; j++) {
            if (!ir_node_result(g, n, u.n_carried + j)) continue;
            if (!unsqueeze_scan(s, u.scans, u.n_scan, j, trip, false, axes, r, n, &p, names[u.n_carried + j],
                                unsq + (size_t)j * trip))
                st = status_or(g, IR_EINVAL);
        }
        for (uint32_t i = 0; i < nr; i++) res[i] = ir_node_result(g, n, i);
        if (st == IR_OK) ir_node_erase(g, n);
        for (uint32_t i = 0; i < nr && st == IR_OK; i++) {
            if (i < u.n_carried) {
                st = rebind_result(s, res[i], names[i], u.carried[i], fresh_from, claimed, r, next, &p);
                continue;
            }
            if (!res[i]) continue;
            IrValueId v = concat_scan(g, r, next, &p, names[i], unsq + (size_t)(i - u.n_carried) * trip, trip, 0);
            if (!v) st = status_or(g, IR_EINVAL);
            set_repl(s, res[i], v);
        }
        free(unsq);
    }
    if (st == IR_OK) s->unrolled++;
    free(claimed);
    free(p.ids);
    names_free(names, nr);
    free(res);
    free(u.outs);
    free(u.scans);
    free(u.carried);
    return st;
}

/* ---- Scan ------------------------------------------------------------------------------------ */

/* A Scan's layout: n_state states, n_in scan inputs, n_out scan outputs, each scan input's axis
 * and direction and each scan output's, and the scan length. */
typedef struct ScanPlan {
    uint32_t n_state, n_in, n_out;
    int64_t len, *in_axis, *in_rev, *out_axis, *out_rev; /* one block, freed through in_axis */
} ScanPlan;

/* attribute `name` (ints) into v[0..n), else `dflt`; false when present with another count */
static bool scan_ints(const IrGraph *g, IrNodeId n, const char *name, int64_t *v, uint32_t cnt, int64_t dflt) {
    IrAttrValue a;
    for (uint32_t i = 0; i < cnt; i++) v[i] = dflt;
    if (!ir_node_attr(g, n, name, &a)) return true;
    if (a.kind != IR_ATTR_INTS || a.count != cnt) return false;
    for (uint32_t i = 0; i < cnt; i++) v[i] = a.ints[i];
    return true;
}

/* Why the Scan cannot be unrolled; NULL when it can (its layout in *q, in_axis malloc'd). */
static const char *scan_blocker(Lower *s, IrNodeId n, ScanPlan *q, char *buf, size_t cap) {
    IrGraph *g = s->g;
    IrRegionId body = ir_node_region_at(g, n, 0);
    bool found;
    int64_t m = ir_node_attr_int(g, n, "num_scan_inputs", &found);
    uint32_t nops = ir_node_num_operands(g, n), nr = ir_node_num_results(g, n);
    if (!found || m < 1 || m > nops) return "num_scan_inputs does not match the operands";
    q->n_in = (uint32_t)m;
    q->n_state = nops - q->n_in;
    if (nr < q->n_state) return "the results do not match the states";
    q->n_out = nr - q->n_state;
    if (ir_region_num_args(g, body) != nops || ir_region_num_outputs(g, body) != nr)
        return "the body does not match the Scan's operands and results";
    q->in_axis = calloc(2 * (size_t)(q->n_in + q->n_out) + 1, sizeof *q->in_axis);
    if (!q->in_axis) return "out of memory";
    q->in_rev = q->in_axis + q->n_in;
    q->out_axis = q->in_rev + q->n_in;
    q->out_rev = q->out_axis + q->n_out;
    if (!scan_ints(g, n, "scan_input_axes", q->in_axis, q->n_in, 0) ||
        !scan_ints(g, n, "scan_input_directions", q->in_rev, q->n_in, 0) ||
        !scan_ints(g, n, "scan_output_axes", q->out_axis, q->n_out, 0) ||
        !scan_ints(g, n, "scan_output_directions", q->out_rev, q->n_out, 0))
        return "a scan axes or directions attribute has the wrong length";
    q->len = -1;
    for (uint32_t j = 0; j < q->n_in; j++) {
        IrTypeId t = ir_value_type(g, ir_node_operand(g, n, q->n_state + j));
        uint32_t rank = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
        int64_t a = q->in_axis[j] < 0 ? q->in_axis[j] + (int64_t)rank : q->in_axis[j], len;
        if (rank == IR_RANK_UNKNOWN || a < 0 || a >= (int64_t)rank || !ir_expr_is_const(g, ir_type_dims(g, t)[a], &len))
            return "a scan input's length is not a constant";
        if (q->len >= 0 && len != q->len) return "the scan inputs have different lengths";
        q->in_axis[j] = a;
        q->len = len;
    }
    for (uint32_t k = 0; k < q->n_out; k++) {
        if (q->out_axis[k] >= 0) continue;
        IrTypeId t = ir_value_type(g, ir_region_output(g, body, q->n_state + k));
        uint32_t rank = t ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
        if (rank == IR_RANK_UNKNOWN) return "a scan output's axis is negative and its rank unknown";
        if (!ir_shape_axis_checked(&q->out_axis[k], rank + 1)) return "a scan output's axis is out of range";
    }
    if (q->len <= 0) return "the scan length is 0";
    if (q->len > s->max_trip) {
        snprintf(buf, cap, "the scan length %lld exceeds max-trip=%lld", (long long)q->len, (long long)s->max_trip);
        return buf;
    }
    const char *bad = NULL;
    int64_t cost = region_cost(g, body, &bad) + q->n_in;
    if (cost * q->len > s->max_unroll) {
        snprintf(buf, cap, "unrolling would create %lld nodes (max-unroll-nodes=%lld)", (long long)(cost * q->len),
                 (long long)s->max_unroll);
        return buf;
    }
    return NULL;
}

/* Element `it` of scan input j: Gather(x, it or its reverse, axis). */
static IrValueId scan_element(Lower *s, IrNodeId n, const ScanPlan *q, uint32_t j, int64_t it, const Prov *p) {
    IrGraph *g = s->g;
    IrValueId x = ir_node_operand(g, n, q->n_state + j);
    char base[200], suffix[32], buf[256];
    snprintf(base, sizeof base, "%s", ir_value_name(g, x));
    snprintf(suffix, sizeof suffix, "_i%lld", (long long)it);
    int64_t idx = q->in_rev[j] ? q->len - 1 - it : it;
    IrValueId ops[2] = {x, scalar_const(g, IR_DTYPE_I64, idx, base, suffix)};
    if (!ops[1]) return 0;
    snprintf(suffix, sizeof suffix, "_it%lld", (long long)it);
    IrNodeId gn = build(g, ir_node_region(g, n), n, p, IR_OP_GATHER, 2, ops, free_name(g, buf, sizeof buf, base, suffix));
    if (!gn) return 0;
    IrAttrValue a = {.kind = IR_ATTR_INT, .i = q->in_axis[j]};
    ir_node_set_attr(g, gn, "axis", &a);
    type_by_rule(g, gn);
    return ir_node_result(g, gn, 0);
}

/* Unrolls a Scan: per step, each scan input's element (Gather), then a copy of the body on the
 * states; each scan output is the Concat of the steps' values unsqueezed at its axis (in
 * reverse for a reverse direction). */
static IrStatus unroll_scan(Lower *s, IrNodeId n, const ScanPlan *q) {
    IrGraph *g = s->g;
    IrRegionId r = ir_node_region(g, n), body = ir_node_region_at(g, n, 0);
    IrNodeId next = ir_node_next(g, n);
    uint32_t nr = ir_node_num_results(g, n);
    int64_t L = q->len;
    IrValueId fresh_from = ir_graph_num_values(g);
    IrValueId *state = calloc(q->n_state + 1, sizeof *state), *outs = calloc(nr + 1, sizeof *outs);
    IrValueId *parts = calloc((size_t)L * q->n_out + 1, sizeof *parts), *res = calloc(nr + 1, sizeof *res);
    char **names = names_take(g, n);
    Prov p = prov_take(g, n);
    uint8_t *claimed = NULL;
    IrStatus st = state && outs && parts && res && names ? IR_OK : IR_ENOMEM;
    for (uint32_t k = 0; k < q->n_state && st == IR_OK; k++) state[k] = ir_node_operand(g, n, k);
    for (int64_t it = 0; it < L && st == IR_OK; it++) {
        IrValueId *elem = calloc(q->n_in + 1, sizeof *elem);
        if (!elem) st = IR_ENOMEM;
        for (uint32_t j = 0; j < q->n_in && st == IR_OK; j++)
            if (!(elem[j] = scan_element(s, n, q, j, it, &p))) st = status_or(g, IR_ENOMEM);
        if (st == IR_OK) st = map_reserve(s);
        if (st == IR_OK) {
            for (uint32_t k = 0; k < q->n_state; k++) s->map[ir_region_arg(g, body, k)] = state[k];
            for (uint32_t j = 0; j < q->n_in; j++) s->map[ir_region_arg(g, body, q->n_state + j)] = elem[j];
            st = ir_region_clone_into(g, body, r, n, s->map, outs);
        }
        for (uint32_t k = 0; k < q->n_state && st == IR_OK; k++) state[k] = outs[k];
        for (uint32_t k = 0; k < q->n_out && st == IR_OK; k++) parts[it * q->n_out + k] = outs[q->n_state + k];
        free(elem);
    }
    if (st == IR_OK) {
        claimed = calloc((size_t)(ir_graph_num_values(g) - fresh_from) + 1, 1);
        if (!claimed) st = IR_ENOMEM;
    }
    /* the unsqueezed steps go before the Scan, the Concats (taking its result names) after it */
    IrValueId *unsq = st == IR_OK ? calloc((size_t)L * q->n_out + 1, sizeof *unsq) : NULL;
    if (st == IR_OK && !unsq) st = IR_ENOMEM;
    for (uint32_t k = 0; k < q->n_out && st == IR_OK; k++) {
        if (!ir_node_result(g, n, q->n_state + k)) continue;
        const char *nm = names[q->n_state + k];
        IrValueId axes = axes_const(g, q->out_axis[k], nm);
        if (!axes || !unsqueeze_scan(s, parts, q->n_out, k, L, q->out_rev[k] != 0, axes, r, n, &p, nm, unsq + (size_t)k * L))
            st = status_or(g, IR_ENOMEM);
    }
    for (uint32_t i = 0; i < nr; i++) res[i] = ir_node_result(g, n, i);
    if (st == IR_OK) ir_node_erase(g, n);
    for (uint32_t i = 0; i < nr && st == IR_OK; i++) {
        if (i < q->n_state) {
            st = rebind_result(s, res[i], names[i], state[i], fresh_from, claimed, r, next, &p);
            continue;
        }
        if (!res[i]) continue;
        uint32_t k = i - q->n_state;
        IrValueId v = concat_scan(g, r, next, &p, names[i], unsq + (size_t)k * L, L, q->out_axis[k]);
        if (!v) st = status_or(g, IR_EINVAL);
        set_repl(s, res[i], v);
    }
    if (st == IR_OK) s->unrolled++;
    free(unsq);
    free(claimed);
    free(p.ids);
    names_free(names, nr);
    free(res);
    free(parts);
    free(outs);
    free(state);
    return st;
}

/* ---- the walk ------------------------------------------------------------------------------- */

static void note_structured(Lower *s, IrNodeId n, const char *why) {
    ir_diag_at_node(ir_pass_diag(s->c), s->g, n, IR_SEV_NOTE, "lower-cf: %s stays structured: %s",
                    ir_op_name(ir_node_op(s->g, n)), why);
}

static IrStatus lower_node(Lower *s, IrNodeId n) {
    IrGraph *g = s->g;
    char buf[256];
    const char *why;
    switch (ir_node_op(g, n)) {
    case IR_OP_IF: {
        int64_t pred;
        if (const_scalar(g, ir_node_operand(g, n, 0), &pred))
            return inline_if(s, n, ir_node_region_at(g, n, pred ? 0 : 1));
        if (!(why = select_blocker(s, n, buf, sizeof buf))) return select_if(s, n);
        note_structured(s, n, why);
        return IR_OK;
    }
    case IR_OP_LOOP: {
        int64_t trip = 0;
        if (!(why = unroll_blocker(s, n, &trip, buf, sizeof buf))) return unroll_loop(s, n, trip);
        note_structured(s, n, why);
        return IR_OK;
    }
    case IR_OP_SCAN: {
        ScanPlan q = {0};
        IrStatus st = IR_OK;
        if (!(why = scan_blocker(s, n, &q, buf, sizeof buf))) st = unroll_scan(s, n, &q);
        else note_structured(s, n, why);
        free(q.in_axis);
        return st;
    }
    default: return IR_OK;
    }
}

static IrStatus lower_region(Lower *s, IrRegionId r) {
    IrGraph *g = s->g;
    IrStatus st = IR_OK;
    for (IrNodeId n = ir_region_first(g, r); n && st == IR_OK;) {
        IrNodeId next = ir_node_next(g, n);
        ir_pass_remap_operands(g, n, s->repl, s->n_values);
        for (uint32_t k = 0; k < ir_node_num_regions(g, n) && st == IR_OK; k++)
            st = lower_region(s, ir_node_region_at(g, n, k));
        if (st == IR_OK) st = lower_node(s, n);
        n = next;
    }
    if (st == IR_OK) st = ir_pass_remap_region_outputs(g, r, s->repl, s->n_values);
    return st;
}

static int64_t count_structured(const IrGraph *g) {
    int64_t n = 0;
    for (IrNodeId m = ir_graph_walk_next(g, 0); m; m = ir_graph_walk_next(g, m))
        n += ir_op_info(ir_node_op(g, m))->cls == IR_CLASS_CONTROL_FLOW;
    return n;
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    uint32_t nv = ir_graph_num_values(g);
    Lower s = {.c = c,
               .g = g,
               .repl = calloc((size_t)nv + 1, sizeof(IrValueId)),
               .is_graph_output = calloc((size_t)nv + 1, 1),
               .n_values = nv,
               .max_cost = ir_pass_option_int(c, "max-cost", 32),
               .max_trip = ir_pass_option_int(c, "max-trip", 16),
               .max_unroll = ir_pass_option_int(c, "max-unroll-nodes", 1024)};
    IrStatus st = s.repl && s.is_graph_output ? IR_OK : IR_ENOMEM;
    for (uint32_t i = 0; st == IR_OK && i < ir_graph_num_outputs(g); i++) s.is_graph_output[ir_graph_output(g, i)] = 1;
    if (st == IR_OK) st = lower_region(&s, IR_ROOT_REGION);
    free(s.repl);
    free(s.is_graph_output);
    free(s.map);
    if (s.inlined || s.selected || s.unrolled) ir_pass_changed(c);
    ir_pass_stat(c, "ifs-inlined", s.inlined);
    ir_pass_stat(c, "ifs-selected", s.selected);
    ir_pass_stat(c, "loops-unrolled", s.unrolled);
    ir_pass_stat(c, "cf-structured", count_structured(g));
    return st ? st : ir_graph_status(g);
}

const IrPass pass_lower_cf = {
    .name = "lower-cf",
    .summary = "inline If on constant predicates, turn cheap If into Where, unroll short constant-trip Loops and Scans",
    .options = (const IrPassOption[]){{"max-cost", "32", "most nodes (both branches) for If -> Where"},
                                      {"max-trip", "16", "largest trip count (Loop) or scan length (Scan) unrolled"},
                                      {"max-unroll-nodes", "1024", "most nodes one unrolled Loop or Scan may create"},
                                      {NULL, NULL, NULL}},
    .run = run,
};

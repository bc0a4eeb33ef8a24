/* Running a reference and a candidate model on the same inputs, comparing their outputs, and
 * when one fails, comparing intermediates in candidate order to find the first diverging node.
 * A candidate node maps to reference nodes through its provenance (the names of the nodes it
 * came from; its own name when it has none); results pair by value name, else by position.
 * Also: inputs generated to fit a graph's types and constraints, and the reproducer builder.
 */
#include "validate/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- random inputs ------------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static IrSymId expr_sym(const IrGraph *g, IrExprId e) {
    return e && ir_expr_kind(g, e) == IR_EXPR_SYM ? ir_expr_sym_id(g, e) : 0;
}

/* Picks a value per symbol: max(lo, min(hi, 4)), rounded up to divisors, equalities solved. */
static void bind_symbols(const IrGraph *g, int64_t *val) {
    uint32_t ns = ir_graph_num_syms(g), nc = ir_graph_num_constraints(g);
    for (uint32_t s = 0; s <= ns; s++) val[s] = -1;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < nc; i++) {
            IrConstraint c = ir_graph_constraint(g, i);
            IrSymId s = expr_sym(g, c.a);
            if (!s || val[s] >= 0) continue;
            if (c.kind == IR_CONSTRAINT_RANGE) val[s] = c.lo > (c.hi < 4 ? c.hi : 4) ? c.lo : (c.hi < 4 ? c.hi : 4);
        }
        for (uint32_t i = 0; i < nc; i++) {
            IrConstraint c = ir_graph_constraint(g, i);
            IrSymId s = expr_sym(g, c.a);
            if (!s || c.kind != IR_CONSTRAINT_DIVISIBLE || c.lo <= 0) continue;
            if (val[s] < 0) val[s] = 4;
            if (val[s] % c.lo) val[s] += c.lo - val[s] % c.lo;
        }
        for (uint32_t round = 0; round < nc + 1; round++)
            for (uint32_t i = 0; i < nc; i++) {
                IrConstraint c = ir_graph_constraint(g, i);
                if (c.kind != IR_CONSTRAINT_EQ) continue;
                IrSymId sa = expr_sym(g, c.a), sb = expr_sym(g, c.b);
                int64_t v;
                if (sa && val[sa] < 0 && ir_expr_eval(g, c.b, val, &v)) val[sa] = v;
                else if (sb && val[sb] < 0 && ir_expr_eval(g, c.a, val, &v)) val[sb] = v;
            }
        if (pass == 0) /* symbols no constraint pins: 4 */
            for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
                IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
                uint32_t rank = ir_type_rank(g, t);
                const IrExprId *d = rank == IR_RANK_UNKNOWN ? NULL : ir_type_dims(g, t);
                for (uint32_t k = 0; d && k < rank; k++) {
                    IrSymId s = expr_sym(g, d[k]);
                    bool eq_bound = false;
                    for (uint32_t j = 0; j < nc && s && val[s] < 0; j++) {
                        IrConstraint c = ir_graph_constraint(g, j);
                        eq_bound |= c.kind == IR_CONSTRAINT_EQ && (expr_sym(g, c.a) == s || expr_sym(g, c.b) == s);
                    }
                    if (s && val[s] < 0 && !eq_bound) val[s] = 4;
                }
            }
    }
}

/* One random tensor of type t (rank and dtype known) into *out; symbols from val, `?` = 1. */
static IrStatus random_tensor(const IrGraph *g, IrValueId v, IrTypeId t, const int64_t *val, uint64_t st, IrTensor *out,
                             IrDiag *diag) {
    uint32_t rank = ir_type_rank(g, t);
    if (!t || rank == IR_RANK_UNKNOWN || rank > IR_MAX_RANK) {
        ir_diag_error(diag, "input '%s' has no known rank%s; random inputs need one", ir_value_name(g, v),
                      ir_type_is_container(g, ir_value_type(g, v)) ? " for its elements" : "");
        return IR_EUNSUPPORTED;
    }
    int64_t dims[IR_MAX_RANK];
    const IrExprId *d = ir_type_dims(g, t);
    for (uint32_t k = 0; k < rank; k++)
        if (!ir_expr_eval(g, d[k], val, &dims[k])) dims[k] = 1; /* `?` */
    IrDType dt = ir_type_dtype(g, t);
    /* a model may declare dims no machine holds: say so rather than fail to allocate (or, under
     * a sanitizer, abort) */
    uint64_t bytes = ir_dtype_size(dt), pages = (uint64_t)sysconf(_SC_PHYS_PAGES), page = (uint64_t)sysconf(_SC_PAGESIZE);
    bool over = false;
    for (uint32_t k = 0; k < rank; k++) over |= dims[k] < 0 || __builtin_mul_overflow(bytes, (uint64_t)dims[k], &bytes);
    if (over || (pages && page && bytes / page >= pages)) {
        IrStrBuf b = {0};
        ir_type_print(g, t, &b);
        char nb[32] = "more than 2^64";
        if (!over) snprintf(nb, sizeof nb, "%llu", (unsigned long long)bytes);
        ir_diag_error(diag, "input '%s' is %s, %s bytes: more than this machine's memory (give --input files of a size "
                      "it holds)", ir_value_name(g, v), b.data ? b.data : "?", nb);
        ir_strbuf_free(&b);
        return IR_EUNSUPPORTED;
    }
    IrStatus s = ir_tensor_alloc(out, dt, rank, dims);
    if (s == IR_ENOMEM) ir_diag_error(diag, "out of memory making a random input '%s' (%llu bytes)", ir_value_name(g, v),
                                      (unsigned long long)bytes);
    if (s) return s;
    int64_t numel = ir_tensor_numel(out);
    for (int64_t k = 0; k < numel; k++) {
        uint64_t r = splitmix(&st);
        if (ir_dtype_is_float(dt)) ir_elem_set_f64(dt, out->data, (size_t)k, (double)(r >> 11) * 0x1.0p-52 - 1.0);
        else if (dt == IR_DTYPE_STRING) ((IrStringElem *)out->data)[k] = (IrStringElem){r >> 63 ? "1" : "0", 1};
        else ir_elem_set_i64(dt, out->data, (size_t)k, (int64_t)(r >> 63));
    }
    if (dt == IR_DTYPE_STRING && (s = ir_tensor_own_strings(out))) ir_tensor_free(out); /* "0" and "1" */
    return s;
}

/* A value of type t: a tensor; a sequence of two tensors of its element type; an optional
 * holding one value of its content type. */
static IrStatus random_value(const IrGraph *g, IrValueId v, IrTypeId t, const int64_t *val, uint64_t st, IrTensor *out,
                             IrDiag *diag) {
    IrTypeKind k = ir_type_kind(g, t);
    if (k == IR_TYPE_TENSOR) return random_tensor(g, v, t, val, st, out, diag);
    IrTypeId e = ir_type_elem(g, t);
    if (k == IR_TYPE_SEQ) ir_tensor_seq_init(out, ir_type_dtype(g, e));
    else ir_tensor_opt_init(out, ir_type_elem_dtype(g, e));
    for (uint32_t i = 0; i < (k == IR_TYPE_SEQ ? 2u : 1u); i++) {
        IrTensor item;
        IrStatus s = random_value(g, v, e, val, st + 7919 * (i + 1), &item, diag);
        if (!s && ir_tensor_seq_insert(out, out->n_items, &item)) {
            ir_tensor_free(&item);
            s = IR_ENOMEM;
        }
        if (s) {
            ir_tensor_free(out);
            return s;
        }
    }
    return IR_OK;
}

IrStatus ir_random_inputs(const IrGraph *g, uint64_t seed, IrTensor *inputs, IrDiag *diag) {
    uint32_t ns = ir_graph_num_syms(g), n = ir_graph_num_inputs(g);
    int64_t *val = malloc((ns + 1) * sizeof *val);
    if (!val) return IR_ENOMEM;
    bind_symbols(g, val);
    memset(inputs, 0, n * sizeof *inputs);
    IrStatus s = IR_OK;
    for (uint32_t i = 0; i < n && !s; i++) {
        IrValueId v = ir_graph_input(g, i);
        s = random_value(g, v, ir_value_type(g, v), val, seed * 0x100000001B3ull + i + 1, &inputs[i], diag);
    }
    if (s)
        for (uint32_t i = 0; i < n; i++) ir_tensor_free(&inputs[i]);
    free(val);
    return s;
}

/* ---- capture ------------------------------------------------------------------------------- */

typedef struct Capture {
    IrTensor *vals; /* by value id */
    uint32_t n;
    bool failed;
} Capture;

static void capture_fn(void *user, const IrGraph *g, IrValueId v, const IrTensor *t) {
    Capture *c = user;
    if (v >= c->n || ir_value_kind(g, v) != IR_VALUE_RESULT) return;
    if (ir_node_region(g, ir_value_def_node(g, v)) != IR_ROOT_REGION) return;
    ir_tensor_free(&c->vals[v]);
    if (ir_tensor_copy(&c->vals[v], t)) c->failed = true;
}

/* Runs g; outputs has one slot per graph output. With cap, every top-level value and input is
 * captured. */
static IrStatus run_graph(const IrGraph *g, const IrTensor *inputs, IrTensor *outputs, Capture *cap, IrDiag *diag) {
    IrInterpOptions o = {0};
    if (cap) {
        o.on_value = capture_fn;
        o.user = cap;
        for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
            IrValueId v = ir_graph_input(g, i);
            if (v < cap->n && ir_tensor_copy(&cap->vals[v], &inputs[i])) return IR_ENOMEM;
        }
    }
    IrStatus s = ir_interp_run(g, inputs, ir_graph_num_inputs(g), outputs, &o, diag);
    if (!s && cap && cap->failed) s = IR_ENOMEM;
    return s;
}

/* ---- options and tolerances ---------------------------------------------------------------- */

void ir_validate_options_init(IrValidateOptions *o) {
    memset(o, 0, sizeof *o);
    o->rtol = o->atol = o->min_cosine = -1;
    o->localize = true;
}

static IrTolerance tol_for(const IrValidateOptions *o, const char *output, IrDType dt, bool fp8) {
    IrTolerance t = ir_tolerance_default(dt, fp8);
    if (o->rtol >= 0) t.rtol = o->rtol;
    if (o->atol >= 0) t.atol = o->atol;
    if (o->min_cosine >= 0) t.min_cosine = o->min_cosine;
    for (uint32_t i = 0; output && i < o->n_per_output; i++) {
        if (strcmp(o->per_output[i].output, output)) continue;
        const IrTolerance *p = &o->per_output[i].tol;
        if (p->rtol >= 0) t.rtol = p->rtol;
        if (p->atol >= 0) t.atol = p->atol;
        if (p->min_cosine >= 0) t.min_cosine = p->min_cosine;
        if ((p->rtol >= 0 || p->atol >= 0) && p->min_cosine < 0) t.by_cosine = false;
    }
    return t;
}

/* ---- matching candidate nodes to reference nodes --------------------------------------------- */

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

static bool origin_has(const IrGraph *cand, IrNodeId n, const char *name) {
    if (!name[0]) return false;
    uint32_t np = ir_node_num_provenance(cand, n);
    if (!np) return strcmp(ir_node_name(cand, n), name) == 0;
    for (uint32_t i = 0; i < np; i++)
        if (strcmp(ir_str(cand, ir_node_provenance(cand, n, i)), name) == 0) return true;
    return false;
}

static const char *origin_at(const IrGraph *g, IrNodeId n, uint32_t i) {
    return ir_node_num_provenance(g, n) ? ir_str(g, ir_node_provenance(g, n, i)) : ir_node_name(g, n);
}

static bool same_origin(const IrGraph *g, IrNodeId a, IrNodeId b) {
    uint32_t na = ir_node_num_provenance(g, a), nb = ir_node_num_provenance(g, b);
    if ((na ? na : 1) != (nb ? nb : 1)) return false;
    for (uint32_t i = 0; i < (na ? na : 1); i++)
        if (strcmp(origin_at(g, a, i), origin_at(g, b, i))) return false;
    return true;
}

/* True when v is used only by nodes with n's own origin: a step inside a pass's rewrite of one
 * node (quantize-fp8's scale computation), not a counterpart of the original node's result. */
static bool internal_value(const IrGraph *g, IrNodeId n, IrValueId v) {
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++)
        if (ir_graph_output(g, i) == v) return false;
    bool used = false;
    for (IrNodeId m = ir_graph_walk_next(g, 0); m; m = ir_graph_walk_next(g, m)) {
        bool uses = false;
        for (uint32_t j = 0; j < ir_node_num_operands(g, m) && !uses; j++) uses = ir_node_operand(g, m, j) == v;
        for (uint32_t r = 0; r < ir_node_num_regions(g, m) && !uses; r++) {
            IrRegionId rr = ir_node_region_at(g, m, r);
            for (uint32_t o = 0; o < ir_region_num_outputs(g, rr) && !uses; o++) uses = ir_region_output(g, rr, o) == v;
        }
        if (!uses) continue;
        if (ir_node_region(g, m) != IR_ROOT_REGION || !same_origin(g, m, n)) return false;
        used = true;
    }
    return used;
}

/* The reference value cand's result i maps to (0: none); names gets the reference nodes. */
static IrValueId match_value(const IrGraph *ref, const IrGraph *cand, IrNodeId n, uint32_t i,
                             const IrTensor *cand_t, const IrTensor *ref_vals, IrStrBuf *names) {
    const char *vn = ir_value_name(cand, ir_node_result(cand, n, i));
    IrValueId by_name = 0, by_pos = 0, by_shape = 0;
    uint32_t found = 0;
    for (IrNodeId r = ir_region_first(ref, IR_ROOT_REGION); r; r = ir_node_next(ref, r)) {
        if (!origin_has(cand, n, ir_node_name(ref, r))) continue;
        ir_strbuf_printf(names, "%s%s", found ? "," : "", ir_node_name(ref, r));
        found++;
        for (uint32_t k = 0; k < ir_node_num_results(ref, r); k++) {
            IrValueId rv = ir_node_result(ref, r, k);
            if (rv && strcmp(ir_value_name(ref, rv), vn) == 0) by_name = rv;
            const IrTensor *t = rv ? &ref_vals[rv] : NULL;
            bool same = t && t->dtype == cand_t->dtype && t->rank == cand_t->rank;
            for (uint32_t d = 0; same && d < t->rank; d++) same = t->dims[d] == cand_t->dims[d];
            if (same) by_shape = rv; /* the last one in reference order: a group's output */
        }
        if (ir_node_num_results(ref, r) == ir_node_num_results(cand, n)) by_pos = ir_node_result(ref, r, i);
    }
    if (by_name) return by_name;
    if (found && internal_value(cand, n, ir_node_result(cand, n, i))) return 0;
    if (found == 1 && by_pos) return by_pos;
    if (found > 1 && by_shape && ir_node_num_results(cand, n) == 1) return by_shape;
    if (found) return 0;
    IrValueId rv = ir_value_find(ref, vn, strlen(vn));
    if (rv && ir_value_kind(ref, rv) == IR_VALUE_RESULT) {
        IrNodeId d = ir_value_def_node(ref, rv);
        if (ir_node_region(ref, d) != IR_ROOT_REGION) return 0;
        ir_strbuf_puts(names, ir_node_name(ref, d));
        return rv;
    }
    return 0;
}

static char *node_location(const IrGraph *g, IrNodeId n) {
    char buf[512];
    IrLoc loc = ir_node_loc(g, n);
    uint32_t line = loc.line, col = loc.col;
    const char *file = loc.file ? ir_str(g, loc.file) : NULL;
    if (!file) {
        ir_node_text_pos(g, n, &line, &col);
        file = ir_graph_source_file(g);
    }
    if (!line) buf[0] = 0;
    else snprintf(buf, sizeof buf, "%s:%u:%u", file ? file : "<input>", line, col);
    return dupstr(buf);
}

/* Explains an operand that differs from the reference node's (a dropped or rewired node). */
static void operand_note(const IrGraph *ref, const IrGraph *cand, IrNodeId n, IrValueId rv, IrStrBuf *b) {
    IrNodeId r = ir_value_kind(ref, rv) == IR_VALUE_RESULT ? ir_value_def_node(ref, rv) : 0;
    if (!r || ir_node_num_operands(ref, r) != ir_node_num_operands(cand, n)) return;
    for (uint32_t j = 0; j < ir_node_num_operands(cand, n); j++) {
        IrValueId a = ir_node_operand(cand, n, j), b2 = ir_node_operand(ref, r, j);
        if (!a || !b2) continue;
        const char *an = ir_value_name(cand, a), *bn = ir_value_name(ref, b2);
        if (strcmp(an, bn) == 0) continue;
        ir_strbuf_printf(b, "operand %u is %%%s in the candidate but %%%s in the reference", j, an, bn);
        if (ir_value_kind(ref, b2) == IR_VALUE_RESULT) {
            IrNodeId d = ir_value_def_node(ref, b2);
            ir_strbuf_printf(b, " (from node '%s', %s)", ir_node_name(ref, d), ir_op_name(ir_node_op(ref, d)));
        }
        return;
    }
}

/* Records node n's metrics (keeping the worst result per node). */
static void note_node(IrValidateResult *res, const IrGraph *cand, IrNodeId n, const IrCompareMetrics *m, uint32_t cap) {
    const char *name = ir_node_name(cand, n);
    if (!name[0] || !res->nodes) return;
    IrNodeError *e = res->n_nodes ? &res->nodes[res->n_nodes - 1] : NULL;
    if (!e || strcmp(e->name, name)) {
        if (res->n_nodes == cap) return;
        e = &res->nodes[res->n_nodes++];
        e->name = dupstr(name);
        e->op = dupstr(ir_op_name(ir_node_op(cand, n)));
        e->pass = true;
        e->cosine = 1;
    }
    if (m->max_abs_err > e->max_abs_err) e->max_abs_err = m->max_abs_err;
    if (m->max_rel_err > e->max_rel_err) e->max_rel_err = m->max_rel_err;
    if (m->cosine < e->cosine) e->cosine = m->cosine;
    e->pass = e->pass && m->pass;
}

static void localize(const IrGraph *ref, const IrGraph *cand, const IrValidateOptions *o, IrValidateResult *res) {
    bool fp8 = ir_graph_has_fp8(cand);
    uint32_t cap = ir_graph_num_nodes(cand) + 1;
    res->nodes = calloc(cap, sizeof *res->nodes);
    for (IrNodeId n = ir_region_first(cand, IR_ROOT_REGION); n; n = ir_node_next(cand, n)) {
        for (uint32_t i = 0; i < ir_node_num_results(cand, n); i++) {
            IrValueId cv = ir_node_result(cand, n, i);
            if (!cv || cv >= res->n_cand_values || !res->cand_values[cv].dtype) continue;
            const IrTensor *ct = &res->cand_values[cv];
            IrStrBuf names;
            ir_strbuf_init(&names);
            IrValueId rv = match_value(ref, cand, n, i, ct, res->ref_values, &names);
            const IrTensor *rt = rv && rv < res->n_ref_values ? &res->ref_values[rv] : NULL;
            if (!rt || !rt->dtype || rt->dtype != ct->dtype) {
                ir_strbuf_free(&names);
                continue;
            }
            IrTolerance t = tol_for(o, NULL, ct->dtype, fp8);
            IrCompareMetrics m;
            ir_compare_tensors(rt, ct, &t, &m);
            if (m.comparable) note_node(res, cand, n, &m, cap);
            if (!m.comparable || m.pass || res->div.found) {
                ir_strbuf_free(&names);
                continue;
            }
            IrDivergence *d = &res->div;
            d->found = true;
            d->cand_node = n;
            d->result = i;
            d->node_name = dupstr(ir_node_name(cand, n));
            d->op = dupstr(ir_op_name(ir_node_op(cand, n)));
            d->value = dupstr(ir_value_name(cand, cv));
            d->location = node_location(cand, n);
            if (d->location && !d->location[0] && ir_value_kind(ref, rv) == IR_VALUE_RESULT) {
                free(d->location);
                d->location = node_location(ref, ir_value_def_node(ref, rv));
            }
            d->ref_nodes = dupstr(names.data ? names.data : "");
            d->ref_value = rv;
            IrStrBuf note;
            ir_strbuf_init(&note);
            operand_note(ref, cand, n, rv, &note);
            d->note = dupstr(note.data ? note.data : "");
            ir_strbuf_free(&note);
            d->m = m;
            ir_strbuf_free(&names);
        }
    }
}

/* ---- the driver ---------------------------------------------------------------------------- */

static IrStatus alloc_capture(const IrGraph *g, Capture *c) {
    c->n = ir_graph_num_values(g) + 1;
    c->vals = calloc(c->n, sizeof *c->vals);
    c->failed = false;
    return c->vals ? IR_OK : IR_ENOMEM;
}

/* Every output of ref (values rout) against the candidate's (cout) into res->outputs. */
static void compare_outputs(const IrGraph *ref, const IrTensor *rout, const IrTensor *cout, bool fp8,
                            const IrValidateOptions *opt, IrValidateResult *res) {
    uint32_t nro = ir_graph_num_outputs(ref);
    res->n_outputs = nro;
    res->pass = true;
    for (uint32_t i = 0; i < nro; i++) {
        IrOutputResult *o = &res->outputs[i];
        o->name = dupstr(ir_value_name(ref, ir_graph_output(ref, i)));
        o->tol = tol_for(opt, o->name, cout[i].dtype, fp8);
        ir_compare_tensors(&rout[i], &cout[i], &o->tol, &o->m);
        if (!o->m.pass) res->pass = false;
    }
}

IrStatus ir_validate_run(const IrGraph *ref, const IrGraph *cand, const IrTensor *inputs, uint32_t n_inputs,
                         const IrValidateOptions *opt, IrValidateResult *res, IrDiag *diag) {
    memset(res, 0, sizeof *res);
    uint32_t nri = ir_graph_num_inputs(ref), nci = ir_graph_num_inputs(cand);
    uint32_t nro = ir_graph_num_outputs(ref), nco = ir_graph_num_outputs(cand);
    if (n_inputs != nri || nci != nri) {
        ir_diag_error(diag, "the models take %u and %u inputs; %u given", nri, nci, n_inputs);
        return IR_EINVAL;
    }
    if (nro != nco) {
        ir_diag_error(diag, "the reference has %u outputs, the candidate %u", nro, nco);
        return IR_EINVAL;
    }
    /* candidate inputs by name, else by position */
    IrTensor *cin = calloc(nci + 1, sizeof *cin);
    IrTensor *rout = calloc(nro + 1, sizeof *rout), *cout = calloc(nro + 1, sizeof *cout);
    res->outputs = calloc(nro + 1, sizeof *res->outputs);
    Capture rc = {0}, cc = {0};
    IrStatus s = cin && rout && cout && res->outputs ? IR_OK : IR_ENOMEM;
    for (uint32_t i = 0; !s && i < nci; i++) {
        const char *nm = ir_value_name(cand, ir_graph_input(cand, i));
        uint32_t k = i;
        for (uint32_t j = 0; j < nri; j++)
            if (strcmp(ir_value_name(ref, ir_graph_input(ref, j)), nm) == 0) k = j;
        cin[i] = inputs[k];
        cin[i].owned = false;
    }
    if (!s && opt->localize) s = alloc_capture(ref, &rc);
    if (!s && opt->localize) s = alloc_capture(cand, &cc);
    if (!s) s = run_graph(ref, inputs, rout, opt->localize ? &rc : NULL, diag);
    if (!s) s = run_graph(cand, cin, cout, opt->localize ? &cc : NULL, diag);
    res->ref_values = rc.vals, res->n_ref_values = rc.n;
    res->cand_values = cc.vals, res->n_cand_values = cc.n;
    if (!s) {
        compare_outputs(ref, rout, cout, ir_graph_has_fp8(cand), opt, res);
        if (!res->pass && opt->localize) localize(ref, cand, opt, res);
    }
    for (uint32_t i = 0; rout && cout && i < nro; i++) {
        ir_tensor_free(&rout[i]);
        ir_tensor_free(&cout[i]);
    }
    free(cin);
    free(rout);
    free(cout);
    return s;
}

IrStatus ir_validate_outputs(const IrGraph *ref, const IrTensor *inputs, uint32_t n_inputs, const IrTensor *cand_out,
                             uint32_t n_cand, bool cand_fp8, const IrValidateOptions *opt, IrValidateResult *res,
                             IrDiag *diag) {
    memset(res, 0, sizeof *res);
    uint32_t nro = ir_graph_num_outputs(ref);
    if (n_inputs != ir_graph_num_inputs(ref)) {
        ir_diag_error(diag, "the reference takes %u inputs; %u given", ir_graph_num_inputs(ref), n_inputs);
        return IR_EINVAL;
    }
    if (n_cand != nro) {
        ir_diag_error(diag, "the reference has %u outputs, the candidate %u", nro, n_cand);
        return IR_EINVAL;
    }
    IrTensor *rout = calloc(nro + 1, sizeof *rout);
    res->outputs = calloc(nro + 1, sizeof *res->outputs);
    IrStatus s = rout && res->outputs ? IR_OK : IR_ENOMEM;
    if (!s) s = run_graph(ref, inputs, rout, NULL, diag);
    if (!s) compare_outputs(ref, rout, cand_out, cand_fp8, opt, res);
    for (uint32_t i = 0; rout && i < nro; i++) ir_tensor_free(&rout[i]);
    free(rout);
    return s;
}

void ir_validate_result_free(IrValidateResult *r) {
    for (uint32_t i = 0; r->outputs && i < r->n_outputs; i++) free(r->outputs[i].name);
    free(r->outputs);
    for (uint32_t i = 0; r->nodes && i < r->n_nodes; i++) free(r->nodes[i].name), free(r->nodes[i].op);
    free(r->nodes);
    for (uint32_t i = 0; r->ref_values && i < r->n_ref_values; i++) ir_tensor_free(&r->ref_values[i]);
    for (uint32_t i = 0; r->cand_values && i < r->n_cand_values; i++) ir_tensor_free(&r->cand_values[i]);
    free(r->ref_values);
    free(r->cand_values);
    IrDivergence *d = &r->div;
    free(d->node_name);
    free(d->op);
    free(d->value);
    free(d->location);
    free(d->ref_nodes);
    free(d->note);
    memset(r, 0, sizeof *r);
}

/* ---- reproducer ---------------------------------------------------------------------------- */

static IrTypeId tensor_type(IrGraph *dst, const IrTensor *t) {
    return ir_type_tensor_i64(dst, t->dtype, t->rank, t->dims);
}

static IrStatus copy_attrs(const IrGraph *src, IrNodeId n, IrGraph *dst, IrNodeId m) {
    for (uint32_t i = 0; i < ir_node_num_attrs(src, n); i++) {
        const char *name = ir_str(src, ir_node_attr_name(src, n, i));
        IrAttrValue v = ir_node_attr_at(src, n, i);
        IrStrId strs_small[16], *strs = NULL;
        if (v.kind == IR_ATTR_STRING) v.s = ir_str_intern_cstr(dst, ir_str(src, v.s));
        if (v.kind == IR_ATTR_STRINGS) {
            strs = v.count <= 16 ? strs_small : malloc(v.count * sizeof *strs);
            if (!strs) return IR_ENOMEM;
            for (uint32_t k = 0; k < v.count; k++) strs[k] = ir_str_intern_cstr(dst, ir_str(src, v.strs[k]));
            v.strs = strs;
        }
        if (v.kind == IR_ATTR_TENSOR) {
            IrTypeId t = ir_const_type(src, v.tensor);
            uint32_t rank = ir_type_rank(src, t);
            int64_t dims[IR_MAX_RANK];
            if (rank > IR_MAX_RANK) return IR_EUNSUPPORTED;
            for (uint32_t k = 0; k < rank; k++)
                if (!ir_expr_is_const(src, ir_type_dims(src, t)[k], &dims[k])) return IR_EUNSUPPORTED;
            IrTypeId nt = ir_type_tensor_i64(dst, ir_type_dtype(src, t), rank, dims);
            v.tensor = ir_const_create(dst, nt, ir_const_data(src, v.tensor), ir_const_nbytes(src, v.tensor));
        }
        ir_node_set_attr(dst, m, name, &v);
        if (strs && strs != strs_small) free(strs);
    }
    return IR_OK;
}

/* The value of src's v during the run: captured, or a graph constant's data. */
static bool value_tensor(const IrGraph *src, IrValueId v, const IrTensor *vals, uint32_t n, IrTensor *out) {
    if (v < n && vals[v].dtype) {
        *out = vals[v];
        out->owned = false;
        return true;
    }
    if (ir_value_kind(src, v) != IR_VALUE_CONST) return false;
    IrConstId c = ir_value_const(src, v);
    IrTypeId t = ir_const_type(src, c);
    uint32_t rank = ir_type_rank(src, t);
    int64_t dims[IR_MAX_RANK];
    if (rank > IR_MAX_RANK) return false;
    for (uint32_t k = 0; k < rank; k++)
        if (!ir_expr_is_const(src, ir_type_dims(src, t)[k], &dims[k])) return false;
    ir_tensor_view(out, ir_type_dtype(src, t), rank, dims, ir_const_data(src, c));
    return true;
}

typedef struct Extract {
    const IrGraph *src;
    IrGraph *dst;
    const IrTensor *vals;
    uint32_t nvals;
    IrValueId *map;    /* src value -> dst value */
    int64_t *symvals;  /* src symbol values bound from the captured inputs */
    IrDiag *diag;
} Extract;

/* src's type with every dim evaluated under the bound symbols (`?` when it cannot be). */
static IrTypeId translate_type(Extract *x, IrTypeId t) {
    uint32_t rank = ir_type_rank(x->src, t);
    if (!t || rank == IR_RANK_UNKNOWN || rank > IR_MAX_RANK) return 0;
    int64_t dims[IR_MAX_RANK];
    for (uint32_t k = 0; k < rank; k++)
        if (!ir_expr_eval(x->src, ir_type_dims(x->src, t)[k], x->symvals, &dims[k])) dims[k] = -1;
    return ir_type_tensor_i64(x->dst, ir_type_dtype(x->src, t), rank, dims);
}

/* The dst value for src operand v: already mapped, or a new constant holding its run value. */
static IrStatus operand_value(Extract *x, IrValueId v, IrValueId *out) {
    if (!v || x->map[v]) {
        *out = v ? x->map[v] : 0;
        return IR_OK;
    }
    IrTensor t;
    if (ir_value_kind(x->src, v) == IR_VALUE_CONST &&
        ir_type_dtype(x->src, ir_value_type(x->src, v)) == IR_DTYPE_STRING) { /* the blob, as is */
        IrConstId sc = ir_value_const(x->src, v);
        IrConstId c = ir_const_create(x->dst, translate_type(x, ir_const_type(x->src, sc)), ir_const_data(x->src, sc),
                                      ir_const_nbytes(x->src, sc));
        x->map[v] = ir_graph_add_const_value(x->dst, ir_value_name(x->src, v), c);
        *out = x->map[v];
        return IR_OK;
    }
    if (!value_tensor(x->src, v, x->vals, x->nvals, &t)) {
        ir_diag_error(x->diag, "--reduce: no value for operand %%%s", ir_value_name(x->src, v));
        return IR_ENOTFOUND;
    }
    if (t.form != IR_TYPE_TENSOR) {
        ir_diag_error(x->diag, "--reduce: operand %%%s is %s, which cannot become a constant", ir_value_name(x->src, v),
                      t.form == IR_TYPE_SEQ ? "a sequence" : "an optional");
        return IR_EUNSUPPORTED;
    }
    IrConstId c = ir_tensor_to_const(x->dst, tensor_type(x->dst, &t), &t);
    x->map[v] = ir_graph_add_const_value(x->dst, ir_value_name(x->src, v), c);
    *out = x->map[v];
    return IR_OK;
}

/* Copies node n (and its regions, recursively) to the end of dst region r. */
static IrStatus copy_node(Extract *x, IrNodeId n, IrRegionId r) {
    const IrGraph *src = x->src;
    uint32_t no = ir_node_num_operands(src, n), nr = ir_node_num_results(src, n);
    IrValueId ops[64];
    IrTypeId types[64];
    const char *names[64];
    if (no > 64 || nr > 64) return IR_EUNSUPPORTED;
    for (uint32_t j = 0; j < no; j++) {
        IrStatus s = operand_value(x, ir_node_operand(src, n, j), &ops[j]);
        if (s) return s;
    }
    for (uint32_t j = 0; j < nr; j++) {
        IrValueId v = ir_node_result(src, n, j);
        names[j] = v ? ir_value_name(src, v) : NULL;
        types[j] = !v ? 0 : v < x->nvals && x->vals[v].dtype ? tensor_type(x->dst, &x->vals[v])
                                                             : translate_type(x, ir_value_type(src, v));
    }
    IrNodeId m = ir_node_create(x->dst, r, ir_node_op(src, n), no, ops, nr, names, types);
    if (!m) return IR_ENOMEM;
    ir_node_set_name(x->dst, m, ir_node_name(src, n));
    uint32_t np = ir_node_num_provenance(src, n);
    IrStrId prov[64];
    for (uint32_t k = 0; k < np && k < 64; k++) prov[k] = ir_str_intern_cstr(x->dst, ir_str(src, ir_node_provenance(src, n, k)));
    if (np) ir_node_set_provenance(x->dst, m, np < 64 ? np : 64, prov);
    IrStatus s = copy_attrs(src, n, x->dst, m);
    for (uint32_t k = 0; !s && k < ir_node_num_regions(src, n); k++) {
        IrRegionId sr = ir_node_region_at(src, n, k), dr = ir_node_region_at(x->dst, m, k);
        for (uint32_t a = 0; a < ir_region_num_args(src, sr); a++) {
            IrValueId av = ir_region_arg(src, sr, a);
            x->map[av] = ir_region_add_arg(x->dst, dr, ir_value_name(src, av), translate_type(x, ir_value_type(src, av)));
        }
        for (IrNodeId c = ir_region_first(src, sr); !s && c; c = ir_node_next(src, c)) s = copy_node(x, c, dr);
        uint32_t nout = ir_region_num_outputs(src, sr);
        IrValueId outs[64];
        if (!s && nout > 64) s = IR_EUNSUPPORTED;
        for (uint32_t o = 0; !s && o < nout; o++) s = operand_value(x, ir_region_output(src, sr, o), &outs[o]);
        if (!s) ir_region_set_outputs(x->dst, dr, nout, outs);
    }
    for (uint32_t j = 0; j < nr; j++) {
        IrValueId v = ir_node_result(src, n, j);
        if (v) x->map[v] = ir_node_result(x->dst, m, j);
    }
    return s;
}

/* Copies the nodes of src marked in `keep` into a fresh graph; operands defined outside become
 * constants holding their values from the run; `output` is the graph's output. */
static IrStatus extract(const IrGraph *src, const bool *keep, const IrTensor *vals, uint32_t nvals, IrValueId output,
                        IrGraph **out, IrDiag *diag) {
    Extract x = {src, NULL, vals, nvals, NULL, NULL, diag};
    IrStatus s = ir_graph_create(&x.dst);
    if (s) return s;
    ir_graph_set_name(x.dst, "reduced");
    x.map = calloc(ir_graph_num_values(src) + 1, sizeof *x.map);
    x.symvals = malloc((ir_graph_num_syms(src) + 1) * sizeof *x.symvals);
    if (!x.map || !x.symvals) s = IR_ENOMEM;
    for (uint32_t i = 0; !s && i <= ir_graph_num_syms(src); i++) x.symvals[i] = -1;
    for (uint32_t i = 0; !s && i < ir_graph_num_inputs(src); i++) { /* bind symbols from the inputs */
        IrValueId v = ir_graph_input(src, i);
        IrTypeId t = ir_value_type(src, v);
        if (v >= nvals || !vals[v].dtype || ir_type_rank(src, t) != vals[v].rank) continue;
        for (uint32_t k = 0; k < vals[v].rank; k++) {
            IrSymId sym = expr_sym(src, ir_type_dims(src, t)[k]);
            if (sym) x.symvals[sym] = vals[v].dims[k];
        }
    }
    for (IrNodeId n = ir_region_first(src, IR_ROOT_REGION); !s && n; n = ir_node_next(src, n))
        if (keep[n]) s = copy_node(&x, n, IR_ROOT_REGION);
    if (!s && !x.map[output]) s = IR_ENOTFOUND;
    if (!s) ir_region_set_outputs(x.dst, IR_ROOT_REGION, 1, &x.map[output]);
    if (!s) s = ir_graph_status(x.dst);
    free(x.map);
    free(x.symvals);
    if (s) ir_graph_destroy(x.dst);
    else *out = x.dst;
    return s;
}

IrStatus ir_validate_reduce(const IrGraph *ref, const IrGraph *cand, const IrValidateResult *res, IrGraph **ref_out,
                            IrGraph **cand_out, IrDiag *diag) {
    const IrDivergence *d = &res->div;
    if (!d->found) {
        ir_diag_error(diag, "--reduce: no diverging node was found");
        return IR_ENOTFOUND;
    }
    bool *kr = calloc(ir_graph_node_capacity(ref) + 1, 1), *kc = calloc(ir_graph_node_capacity(cand) + 1, 1);
    IrStatus s = kr && kc ? IR_OK : IR_ENOMEM;
    if (!s) {
        kc[d->cand_node] = true;
        for (IrNodeId r = ir_region_first(ref, IR_ROOT_REGION); r; r = ir_node_next(ref, r))
            kr[r] = origin_has(cand, d->cand_node, ir_node_name(ref, r));
        if (ir_value_kind(ref, d->ref_value) == IR_VALUE_RESULT) kr[ir_value_def_node(ref, d->ref_value)] = true;
        /* reference nodes after the compared value's producer are not needed */
        bool after = false;
        for (IrNodeId r = ir_region_first(ref, IR_ROOT_REGION); r; r = ir_node_next(ref, r)) {
            if (after) kr[r] = false;
            if (ir_value_kind(ref, d->ref_value) == IR_VALUE_RESULT && r == ir_value_def_node(ref, d->ref_value)) after = true;
        }
    }
    if (!s) s = extract(ref, kr, res->ref_values, res->n_ref_values, d->ref_value, ref_out, diag);
    if (!s) {
        s = extract(cand, kc, res->cand_values, res->n_cand_values, ir_node_result(cand, d->cand_node, d->result), cand_out,
                    diag);
        if (s) {
            ir_graph_destroy(*ref_out);
            *ref_out = NULL;
        }
    }
    free(kr);
    free(kc);
    return s;
}

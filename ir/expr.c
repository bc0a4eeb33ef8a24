/* Symbolic dim expressions: simplification to a canonical polynomial form, evaluation and
 * printing.
 *
 * Sums and products are kept as polynomials over atoms (symbols, and floor divisions or
 * remainders that do not simplify): like terms are combined, terms and the atoms in each term
 * are ordered by structure (symbol names, never ids), and constants are folded. So `S*B` and
 * `B*S`, or `(S + 1) + 2` and `S + 3`, intern to the same id, and exact divisions cancel:
 * `(16*B*S)/(8*B)` is `2*S`; min/max of operands a constant apart pick one. Expressions too large
 * for the normal form stay as built.
 */
#include "ir_internal.h"

#define MAX_TERMS 24
#define MAX_ATOMS 8

static int64_t floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
    return q;
}
static int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }

static bool checked_op(IrExprKind k, int64_t a, int64_t b, int64_t *r) {
    switch (k) {
    case IR_EXPR_ADD: return !__builtin_add_overflow(a, b, r);
    case IR_EXPR_SUB: return !__builtin_sub_overflow(a, b, r);
    case IR_EXPR_MUL: return !__builtin_mul_overflow(a, b, r);
    case IR_EXPR_DIV:
        if (b == 0 || (a == INT64_MIN && b == -1)) return false;
        *r = floordiv(a, b);
        return true;
    case IR_EXPR_MOD:
        if (b == 0 || (a == INT64_MIN && b == -1)) return false;
        *r = floormod(a, b);
        return true;
    case IR_EXPR_MIN: *r = a < b ? a : b; return true;
    case IR_EXPR_MAX: *r = a > b ? a : b; return true;
    default: return false;
    }
}

/* Structural order, independent of ids so printing does not depend on interning order. */
static int expr_cmp(const IrGraph *g, IrExprId x, IrExprId y) {
    if (x == y) return 0;
    const IrExprRec *a = ir__expr(g, x), *b = ir__expr(g, y);
    bool ac = a->kind == IR_EXPR_CONST, bc = b->kind == IR_EXPR_CONST;
    if (ac != bc) return ac ? 1 : -1;
    if (ac) return a->value < b->value ? -1 : a->value > b->value;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    if (a->kind == IR_EXPR_SYM) return strcmp(ir_sym_name(g, a->a), ir_sym_name(g, b->a));
    if (a->kind == IR_EXPR_UNKNOWN) return 0;
    int c = expr_cmp(g, a->a, b->a);
    return c ? c : expr_cmp(g, a->b, b->b);
}

/* ---- polynomials --------------------------------------------------------------------------- */

typedef struct Term {
    int64_t coef;
    uint32_t n;
    IrExprId atom[MAX_ATOMS]; /* sorted by expr_cmp */
} Term;

typedef struct Poly {
    uint32_t n;
    Term t[MAX_TERMS];
} Poly;

static int term_cmp(const IrGraph *g, const Term *a, const Term *b) {
    /* positive terms first (so `S - B`, not `B*(-1) + S`), then higher degree first; constants
     * (degree 0) last */
    if ((a->coef < 0) != (b->coef < 0)) return a->coef < 0 ? 1 : -1;
    if (a->n != b->n) return a->n > b->n ? -1 : 1;
    for (uint32_t i = 0; i < a->n; i++) {
        int c = expr_cmp(g, a->atom[i], b->atom[i]);
        if (c) return c;
    }
    return 0;
}

static bool same_monomial(const Term *a, const Term *b) {
    return a->n == b->n && memcmp(a->atom, b->atom, a->n * sizeof(IrExprId)) == 0;
}

/* Adds coef*mono into p; false on overflow or too many terms. */
static bool poly_add_term(const IrGraph *g, Poly *p, const Term *t) {
    if (t->coef == 0) return true;
    for (uint32_t i = 0; i < p->n; i++)
        if (same_monomial(&p->t[i], t)) {
            if (__builtin_add_overflow(p->t[i].coef, t->coef, &p->t[i].coef)) return false;
            if (p->t[i].coef == 0) p->t[i] = p->t[--p->n];
            return true;
        }
    if (p->n == MAX_TERMS) return false;
    p->t[p->n++] = *t;
    (void)g;
    return true;
}

static bool term_mul(const IrGraph *g, const Term *a, const Term *b, Term *out) {
    if (a->n + b->n > MAX_ATOMS) return false;
    if (__builtin_mul_overflow(a->coef, b->coef, &out->coef)) return false;
    /* merge sorted atom lists */
    uint32_t i = 0, j = 0, k = 0;
    while (i < a->n || j < b->n) {
        if (j >= b->n || (i < a->n && expr_cmp(g, a->atom[i], b->atom[j]) <= 0))
            out->atom[k++] = a->atom[i++];
        else
            out->atom[k++] = b->atom[j++];
    }
    out->n = k;
    return true;
}

static bool to_poly(const IrGraph *g, IrExprId e, Poly *p);

static bool atom_poly(IrExprId e, Poly *p) {
    p->n = 1;
    p->t[0].coef = 1;
    p->t[0].n = 1;
    p->t[0].atom[0] = e;
    return true;
}

static bool poly_combine(const IrGraph *g, IrExprKind k, const Poly *a, const Poly *b, Poly *out) {
    out->n = 0;
    if (k == IR_EXPR_ADD || k == IR_EXPR_SUB) {
        for (uint32_t i = 0; i < a->n; i++)
            if (!poly_add_term(g, out, &a->t[i])) return false;
        for (uint32_t i = 0; i < b->n; i++) {
            Term t = b->t[i];
            if (k == IR_EXPR_SUB) {
                if (t.coef == INT64_MIN) return false;
                t.coef = -t.coef;
            }
            if (!poly_add_term(g, out, &t)) return false;
        }
        return true;
    }
    /* MUL */
    for (uint32_t i = 0; i < a->n; i++)
        for (uint32_t j = 0; j < b->n; j++) {
            Term t;
            if (!term_mul(g, &a->t[i], &b->t[j], &t) || !poly_add_term(g, out, &t)) return false;
        }
    return true;
}

static bool to_poly(const IrGraph *g, IrExprId e, Poly *p) {
    const IrExprRec *r = ir__expr(g, e);
    switch ((IrExprKind)r->kind) {
    case IR_EXPR_CONST:
        p->n = 0;
        if (r->value) {
            p->n = 1;
            p->t[0].coef = r->value;
            p->t[0].n = 0;
        }
        return true;
    case IR_EXPR_ADD:
    case IR_EXPR_SUB:
    case IR_EXPR_MUL: {
        Poly a, b;
        if (!to_poly(g, r->a, &a) || !to_poly(g, r->b, &b)) return false;
        return poly_combine(g, (IrExprKind)r->kind, &a, &b, p);
    }
    default: return atom_poly(e, p);
    }
}

static IrExprId raw(IrGraph *g, IrExprKind k, IrExprId a, IrExprId b) {
    IrExprRec rec = {.kind = (uint8_t)k, .a = a, .b = b};
    return ir__expr_intern(g, rec);
}

/* Builds the canonical tree of a polynomial: terms in term order joined by + and -, each term
 * its atoms multiplied left to right, then the coefficient. */
static IrExprId from_poly(IrGraph *g, Poly *p) {
    /* insertion sort: few terms */
    for (uint32_t i = 1; i < p->n; i++)
        for (uint32_t j = i; j > 0 && term_cmp(g, &p->t[j - 1], &p->t[j]) > 0; j--) {
            Term t = p->t[j - 1];
            p->t[j - 1] = p->t[j];
            p->t[j] = t;
        }
    if (p->n == 0) return ir_expr_const(g, 0);
    /* all terms negative: start from 0 so it prints `0 - S` rather than `S*(-1)` */
    IrExprId acc = p->t[0].coef < 0 && (p->n > 1 || p->t[0].n > 0) ? ir_expr_const(g, 0) : 0;
    for (uint32_t i = 0; i < p->n; i++) {
        const Term *t = &p->t[i];
        int64_t c = t->coef;
        bool neg = acc && c < 0 && c != INT64_MIN;
        if (neg) c = -c;
        IrExprId term = 0;
        for (uint32_t k = 0; k < t->n; k++) term = term ? raw(g, IR_EXPR_MUL, term, t->atom[k]) : t->atom[k];
        if (!term)
            term = ir_expr_const(g, c);
        else if (c != 1)
            term = raw(g, IR_EXPR_MUL, term, ir_expr_const(g, c));
        acc = !acc ? term : raw(g, neg ? IR_EXPR_SUB : IR_EXPR_ADD, acc, term);
    }
    return acc;
}

static int64_t gcd64(int64_t a, int64_t b) {
    if (a < 0) a = a == INT64_MIN ? INT64_MAX : -a;
    if (b < 0) b = b == INT64_MIN ? INT64_MAX : -b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* p / (c * mono) when every term is an exact multiple; false otherwise. */
static bool poly_div_term(const IrGraph *g, const Poly *p, const Term *d, Poly *out) {
    if (d->coef == 0) return false;
    out->n = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        const Term *t = &p->t[i];
        if (t->coef % d->coef != 0) return false;
        Term q = {t->coef / d->coef, 0, {0}};
        /* remove d's atoms from t's (both sorted) */
        uint32_t j = 0;
        for (uint32_t k = 0; k < t->n; k++) {
            if (j < d->n && t->atom[k] == d->atom[j])
                j++;
            else
                q.atom[q.n++] = t->atom[k];
        }
        if (j != d->n) return false;
        if (!poly_add_term(g, out, &q)) return false;
    }
    return true;
}

static IrExprId expr_binary(IrGraph *g, IrExprKind k, IrExprId a, IrExprId b);

#define BINOP_CACHE 4096

/* Type rules combine the same few dims over and over (a product of a shape, a broadcast), so
 * results are memoized in a small direct-mapped table keyed by (kind, a, b). */
IrExprId ir_expr_binary(IrGraph *g, IrExprKind k, IrExprId a, IrExprId b) {
    if (!a || !b || g->status) return 0;
    if (k < IR_EXPR_ADD || k > IR_EXPR_MAX) return 0;
    if (!g->binop_cache) g->binop_cache = calloc(BINOP_CACHE, sizeof *g->binop_cache);
    uint32_t slot = (uint32_t)((a * 0x9E3779B1u) ^ (b * 0x85EBCA77u) ^ ((uint32_t)k * 0xC2B2AE3Du)) & (BINOP_CACHE - 1);
    if (g->binop_cache) {
        uint32_t *e = g->binop_cache[slot];
        if (e[0] == (uint32_t)k && e[1] == a && e[2] == b && e[3]) return e[3];
    }
    IrExprId r = expr_binary(g, k, a, b);
    if (g->binop_cache && r) {
        uint32_t *e = g->binop_cache[slot];
        e[0] = (uint32_t)k, e[1] = a, e[2] = b, e[3] = r;
    }
    return r;
}

static IrExprId expr_binary(IrGraph *g, IrExprKind k, IrExprId a, IrExprId b) {
    if (ir_expr_kind(g, a) == IR_EXPR_UNKNOWN || ir_expr_kind(g, b) == IR_EXPR_UNKNOWN) return ir_expr_unknown(g);
    int64_t va, vb, r;
    bool ca = ir_expr_is_const(g, a, &va), cb = ir_expr_is_const(g, b, &vb);
    if (ca && cb && checked_op(k, va, vb, &r)) return ir_expr_const(g, r);
    /* identities, before building polynomials (the type rules hit these constantly) */
    if (k == IR_EXPR_MUL && ((ca && va == 1) || (cb && vb == 1))) return ca && va == 1 ? b : a;
    if (k == IR_EXPR_MUL && ((ca && va == 0) || (cb && vb == 0))) return ir_expr_const(g, 0);
    if ((k == IR_EXPR_ADD || k == IR_EXPR_SUB) && cb && vb == 0) return a;
    if (k == IR_EXPR_ADD && ca && va == 0) return b;
    if ((k == IR_EXPR_DIV) && cb && vb == 1) return a;
    Poly pa, pb, out;
    bool pa_ok = to_poly(g, a, &pa), pb_ok = to_poly(g, b, &pb);
    if (k == IR_EXPR_MIN || k == IR_EXPR_MAX) {
        if (a == b) return a;
        /* operands a constant apart (S and S - 1): the smaller or larger one */
        if (pa_ok && pb_ok && poly_combine(g, IR_EXPR_SUB, &pa, &pb, &out) &&
            (out.n == 0 || (out.n == 1 && out.t[0].n == 0))) {
            int64_t diff = out.n ? out.t[0].coef : 0;
            return (diff <= 0) == (k == IR_EXPR_MIN) ? a : b;
        }
        /* commutative: one order, so min(S, B) and min(B, S) intern alike */
        return expr_cmp(g, a, b) <= 0 ? raw(g, k, a, b) : raw(g, k, b, a);
    }
    switch (k) {
    case IR_EXPR_ADD:
    case IR_EXPR_SUB:
    case IR_EXPR_MUL:
        if (pa_ok && pb_ok && poly_combine(g, k, &pa, &pb, &out)) return from_poly(g, &out);
        break;
    case IR_EXPR_DIV:
        if (cb && vb == 1) return a;
        if (a == b) return ir_expr_const(g, 1);
        if (pa_ok && pb_ok && pb.n == 1 && pb.t[0].coef > 0) {
            if (poly_div_term(g, &pa, &pb.t[0], &out)) return from_poly(g, &out);
            /* divide out the divisor's atoms, then reduce by the common constant factor:
             * floor(g*x / (g*c)) == floor(x / c) */
            Term atoms = pb.t[0];
            int64_t cdiv = atoms.coef;
            atoms.coef = 1;
            Poly rest = pa;
            if (atoms.n && !poly_div_term(g, &pa, &atoms, &rest)) break;
            int64_t gg = cdiv;
            for (uint32_t i = 0; i < rest.n; i++) gg = gcd64(gg, rest.t[i].coef);
            Term d = {gg, 0, {0}};
            if (gg > 1 && !poly_div_term(g, &rest, &d, &out)) break;
            if (gg <= 1) out = rest;
            if (cdiv / gg == 1) return from_poly(g, &out);
            if (atoms.n || gg > 1) return raw(g, IR_EXPR_DIV, from_poly(g, &out), ir_expr_const(g, cdiv / gg));
        }
        break;
    case IR_EXPR_MOD:
        if (cb && vb == 1) return ir_expr_const(g, 0);
        if (a == b) return ir_expr_const(g, 0);
        if (pa_ok && pb_ok && pb.n == 1 && poly_div_term(g, &pa, &pb.t[0], &out)) return ir_expr_const(g, 0);
        break;
    default: break;
    }
    return raw(g, k, a, b);
}

bool ir_expr_eval(const IrGraph *g, IrExprId e, const int64_t *sym_values, int64_t *out) {
    if (!e || e >= g->exprs.len) return false;
    const IrExprRec *r = ir__expr(g, e);
    switch ((IrExprKind)r->kind) {
    case IR_EXPR_CONST: *out = r->value; return true;
    case IR_EXPR_UNKNOWN: return false;
    case IR_EXPR_SYM:
        if (!sym_values || sym_values[r->a] < 0) return false;
        *out = sym_values[r->a];
        return true;
    default: {
        int64_t a, b;
        if (!ir_expr_eval(g, r->a, sym_values, &a) || !ir_expr_eval(g, r->b, sym_values, &b)) return false;
        return checked_op((IrExprKind)r->kind, a, b, out);
    }
    }
}

static int expr_prec(IrExprKind k) {
    switch (k) {
    case IR_EXPR_ADD:
    case IR_EXPR_SUB: return 1;
    case IR_EXPR_MUL:
    case IR_EXPR_DIV:
    case IR_EXPR_MOD: return 2;
    default: return 3; /* atoms and min/max (printed as calls) */
    }
}

static void expr_print_prec(const IrGraph *g, IrExprId e, IrStrBuf *b, int min_prec) {
    if (!e || e >= g->exprs.len) {
        ir_strbuf_putc(b, '?');
        return;
    }
    const IrExprRec *r = ir__expr(g, e);
    switch ((IrExprKind)r->kind) {
    case IR_EXPR_CONST:
        if (r->value < 0 && min_prec > 0) ir_strbuf_printf(b, "(%lld)", (long long)r->value);
        else ir_strbuf_printf(b, "%lld", (long long)r->value);
        return;
    case IR_EXPR_UNKNOWN: ir_strbuf_putc(b, '?'); return;
    case IR_EXPR_SYM: ir_strbuf_puts(b, ir_sym_name(g, r->a)); return;
    case IR_EXPR_MIN:
    case IR_EXPR_MAX:
        ir_strbuf_puts(b, r->kind == IR_EXPR_MIN ? "min(" : "max(");
        expr_print_prec(g, r->a, b, 0);
        ir_strbuf_puts(b, ", ");
        expr_print_prec(g, r->b, b, 0);
        ir_strbuf_putc(b, ')');
        return;
    default: break;
    }
    static const char ops[] = {[IR_EXPR_ADD] = '+', [IR_EXPR_SUB] = '-', [IR_EXPR_MUL] = '*',
                               [IR_EXPR_DIV] = '/', [IR_EXPR_MOD] = '%'};
    int p = expr_prec((IrExprKind)r->kind);
    bool paren = p < min_prec;
    if (paren) ir_strbuf_putc(b, '(');
    expr_print_prec(g, r->a, b, p);
    if (p == 1) ir_strbuf_putc(b, ' ');
    ir_strbuf_putc(b, ops[r->kind]);
    if (p == 1) ir_strbuf_putc(b, ' ');
    /* left-associative: the right operand needs a strictly higher precedence */
    expr_print_prec(g, r->b, b, p + 1);
    if (paren) ir_strbuf_putc(b, ')');
}

void ir_expr_print(const IrGraph *g, IrExprId e, IrStrBuf *b) { expr_print_prec(g, e, b, 0); }

IrExprId ir_expr_substitute(IrGraph *g, IrExprId e, IrSymId s, int64_t value) {
    if (!e || e >= g->exprs.len) return e;
    const IrExprRec r = *ir__expr(g, e);
    switch ((IrExprKind)r.kind) {
    case IR_EXPR_CONST:
    case IR_EXPR_UNKNOWN: return e;
    case IR_EXPR_SYM: return r.a == s ? ir_expr_const(g, value) : e;
    default: {
        IrExprId a = ir_expr_substitute(g, r.a, s, value), b = ir_expr_substitute(g, r.b, s, value);
        if (a == r.a && b == r.b) return e;
        int64_t vb;
        if ((r.kind == IR_EXPR_DIV || r.kind == IR_EXPR_MOD) && ir_expr_is_const(g, b, &vb) && vb == 0) return ir_expr_unknown(g);
        return ir_expr_binary(g, (IrExprKind)r.kind, a, b);
    }
    }
}

static bool constraint_holds(IrGraph *g, const IrConstraint *c, bool *decided) {
    int64_t a, b;
    *decided = false;
    if (!ir_expr_is_const(g, c->a, &a)) return true;
    switch (c->kind) {
    case IR_CONSTRAINT_RANGE: *decided = true; return a >= c->lo && a <= c->hi;
    case IR_CONSTRAINT_DIVISIBLE: *decided = true; return c->lo != 0 && a % c->lo == 0;
    case IR_CONSTRAINT_EQ:
        if (!ir_expr_is_const(g, c->b, &b)) return true;
        *decided = true;
        return a == b;
    }
    return true;
}

IrStatus ir_graph_specialize_symbol(IrGraph *g, IrSymId s, int64_t value, IrDiag *diag) {
    if (!s || s >= g->syms.len) return IR_EINVAL;
    char symname[256];
    snprintf(symname, sizeof symname, "%s", ir_sym_name(g, s));
    /* constraints first: a violated one stops before anything changes */
    for (uint32_t i = 0; i < g->constraints.len; i++) {
        IrConstraintRec *r = &IR_VEC_AT(g->constraints, IrConstraintRec, i);
        IrConstraint c = {.kind = (IrConstraintKind)r->kind, .a = ir_expr_substitute(g, r->a, s, value),
                          .b = r->b ? ir_expr_substitute(g, r->b, s, value) : 0, .lo = r->lo, .hi = r->hi};
        bool decided;
        if (!constraint_holds(g, &c, &decided)) {
            IrConstraint orig = ir_graph_constraint(g, i);
            IrStrBuf b;
            ir_strbuf_init(&b);
            ir_constraint_print(g, &orig, &b);
            ir_diag_error(diag, "%s=%lld violates %s %s", symname, (long long)value,
                          orig.origin == IR_CONSTRAINT_GUARD ? "guard" : orig.origin == IR_CONSTRAINT_FACT ? "fact" : "constraint",
                          b.data ? b.data : "?");
            ir_strbuf_free(&b);
            return IR_EVERIFY;
        }
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->constraints.len; i++) {
        IrConstraintRec r = IR_VEC_AT(g->constraints, IrConstraintRec, i);
        IrConstraint c = {.kind = (IrConstraintKind)r.kind, .a = ir_expr_substitute(g, r.a, s, value),
                          .b = r.b ? ir_expr_substitute(g, r.b, s, value) : 0, .lo = r.lo, .hi = r.hi};
        bool decided;
        constraint_holds(g, &c, &decided);
        if (decided) continue; /* satisfied, and now constant */
        r.a = c.a;
        r.b = c.b;
        IR_VEC_AT(g->constraints, IrConstraintRec, k++) = r;
    }
    g->constraints.len = k;
    /* types: substitute in every value's type */
    uint32_t nt = g->types.len;
    uint32_t *map = calloc(nt, sizeof *map);
    if (!map) return IR_ENOMEM;
    for (uint32_t t = 1; t < nt; t++) {
        IrTypeRec rec = *ir__type(g, t);
        map[t] = t;
        if (rec.kind != IR_TYPE_TENSOR) {
            /* seq/opt: the element type is older, so already mapped */
            if (rec.dims && map[rec.dims] != rec.dims)
                map[t] = rec.kind == IR_TYPE_SEQ ? ir_type_seq(g, map[rec.dims]) : ir_type_opt(g, map[rec.dims]);
            continue;
        }
        if (rec.rank == IR_RANK_UNKNOWN || rec.rank == 0) continue;
        IrExprId small[16], *d = rec.rank <= 16 ? small : malloc(rec.rank * sizeof *d);
        if (!d) {
            free(map);
            return IR_ENOMEM;
        }
        bool changed = false;
        for (uint32_t i = 0; i < rec.rank; i++) {
            IrExprId old = ir__u32(g, ir__type(g, t)->dims)[i];
            d[i] = ir_expr_substitute(g, old, s, value);
            changed |= d[i] != old;
            int64_t cv;
            if (ir_expr_is_const(g, d[i], &cv) && cv < 0) { /* the graph is left failed: callers drop it */
                ir_diag_error(diag, "%s=%lld makes a dim negative (%lld): an op's window larger than its input, or "
                              "another shape rule fails for this binding",
                              symname, (long long)value, (long long)cv);
                if (d != small) free(d);
                free(map);
                return IR_EVERIFY;
            }
        }
        if (changed) map[t] = ir_type_tensor(g, (IrDType)rec.dtype, rec.rank, d);
        if (d != small) free(d);
    }
    for (uint32_t v = 1; v < g->values.len; v++) {
        IrValueRec *r = ir__val(g, v);
        if (r->type && r->type < nt) r->type = map[r->type];
    }
    free(map);
    /* the symbol stays in the table (ids are stable), marked so it is no longer listed */
    IR_VEC_AT(g->syms, IrSymRec, s).specialized = 1;
    return g->status;
}

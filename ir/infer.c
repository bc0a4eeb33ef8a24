/* Type and shape rules for the op table, over symbolic dims.
 *
 * Rules are conservative: when an input type or a shape-determining constant is unknown the
 * affected dims (or the whole result) stay unknown rather than guessed. Constant shape inputs
 * (Reshape's shape, Slice's starts...) are read when they are graph constants or Constant nodes.
 */
#include "infer.h"
#include "shape.h"

#include <math.h>
#include <stdarg.h>

#define MAXR 64

typedef void (*ValuesFn)(IrInferCtx *c);
static ValuesFn values_fn(IrOp op);

/* ---- context ------------------------------------------------------------------------------- */

IrGraph *ir_infer_graph(IrInferCtx *c) { return c->g; }
IrNodeId ir_infer_node(IrInferCtx *c) { return c->n; }
uint32_t ir_infer_num_inputs(IrInferCtx *c) { return ir_node_num_operands(c->g, c->n); }
uint32_t ir_infer_num_outputs(IrInferCtx *c) { return c->n_out; }

IrTypeId ir_infer_input_type(IrInferCtx *c, uint32_t i) {
    if (i >= ir_node_num_operands(c->g, c->n)) return 0;
    IrValueId v = ir_node_operand(c->g, c->n, i);
    return v ? ir_value_type(c->g, v) : 0;
}

static bool has_input(IrInferCtx *c, uint32_t i) {
    return i < ir_node_num_operands(c->g, c->n) && ir_node_operand(c->g, c->n, i) != 0;
}

const void *ir_infer_input_const(IrInferCtx *c, uint32_t i, IrTypeId *type) {
    if (!has_input(c, i)) return NULL;
    IrGraph *g = c->g;
    IrValueId v = ir_node_operand(g, c->n, i);
    IrConstId k = ir_value_const(g, v);
    if (!k) {
        IrNodeId d = ir_value_def_node(g, v);
        IrAttrValue a;
        if (d && ir_node_op(g, d) == IR_OP_CONSTANT && ir_node_attr(g, d, "value", &a) &&
            a.kind == IR_ATTR_TENSOR)
            k = a.tensor;
    }
    if (!k) return NULL;
    if (type) *type = ir_const_type(g, k);
    return ir_const_data(g, k);
}

void ir_infer_set_output(IrInferCtx *c, uint32_t i, IrTypeId t) {
    if (i < c->n_out) c->out[i] = t;
}

IrStatus ir_infer_error(IrInferCtx *c, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ir_diag_at_node(c->diag, c->g, c->n, IR_SEV_ERROR, "%s: %s", ir_op_name(ir_node_op(c->g, c->n)), buf);
    c->status = IR_EVERIFY;
    return IR_EVERIFY;
}

IrStatus ir_node_infer_types(IrGraph *g, IrNodeId n, IrDiag *diag, IrTypeId *inferred) {
    return ir_node_infer_types_ex(g, n, diag, inferred, NULL);
}

IrStatus ir_node_infer_types_ex(IrGraph *g, IrNodeId n, IrDiag *diag, IrTypeId *inferred, IrShapeFacts *facts) {
    return ir__node_infer_types(g, n, diag, inferred, facts, true);
}

IrStatus ir__node_infer_types(IrGraph *g, IrNodeId n, IrDiag *diag, IrTypeId *inferred, IrShapeFacts *facts,
                              bool check_attrs) {
    IrInferCtx c = {g, n, diag, inferred, ir_node_num_results(g, n), IR_OK, facts};
    for (uint32_t i = 0; i < c.n_out; i++) inferred[i] = 0;
    IrInferFn fn = ir_op_info(ir_node_op(g, n))->infer;
    if (!fn) return IR_OK;
    /* rules read attributes by their schema kind: refuse a node whose attributes disagree
     * (the verifier reports those; this protects callers that run rules on unverified graphs) */
    for (uint32_t i = 0; check_attrs && i < ir_node_num_attrs(g, n); i++) {
        const char *nm = ir_str(g, ir_node_attr_name(g, n, i));
        IrAttrSpec spec;
        IrAttrKind have = ir_node_attr_at(g, n, i).kind;
        if (ir_op_attr_spec(ir_node_op(g, n), nm, strlen(nm), &spec) && spec.kind != have)
            return ir_infer_error(&c, "attribute '%s' must be %s, got %s", nm, ir_attr_kind_name(spec.kind),
                                  ir_attr_kind_name(have));
    }
    if (!ir_op_takes_containers(ir_node_op(g, n))) {
        /* only the seq/opt ops (and Identity, If, Loop) see sequences and optionals */
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrTypeId t = ir_infer_input_type(&c, i);
            if (!ir_type_is_container(g, t)) continue;
            IrStrBuf b;
            ir_strbuf_init(&b);
            ir_type_print(g, t, &b);
            ir_infer_error(&c, "operand %u (%%%s) is %s: this op takes tensors only", i,
                           ir_value_name(g, ir_node_operand(g, n, i)), b.data ? b.data : "?");
            ir_strbuf_free(&b);
            return IR_EVERIFY;
        }
        for (uint32_t i = 0; i < c.n_out; i++) {
            IrValueId v = ir_node_result(g, n, i);
            IrTypeId t = v ? ir_value_type(g, v) : 0;
            if (!ir_type_is_container(g, t)) continue;
            IrStrBuf b;
            ir_strbuf_init(&b);
            ir_type_print(g, t, &b);
            ir_infer_error(&c, "result %u (%%%s) is declared %s: this op gives tensors only", i, ir_value_name(g, v),
                           b.data ? b.data : "?");
            ir_strbuf_free(&b);
            return IR_EVERIFY;
        }
    }
    if (!ir__op_takes_strings(ir_node_op(g, n)))
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++)
            if (ir_type_dtype(g, ir_infer_input_type(&c, i)) == IR_DTYPE_STRING)
                return ir_infer_error(&c, "operand %u is a string tensor; %s does not take strings", i,
                                      ir_op_name(ir_node_op(g, n)));
    IrStatus s = fn(&c);
    if (s == IR_OK && c.status == IR_OK && facts) {
        ValuesFn vf = values_fn(ir_node_op(g, n));
        if (vf) vf(&c);
    }
    return s ? s : c.status;
}

/* ---- shape facts -------------------------------------------------------------------------- */

#define NO_VALUES UINT32_MAX

struct IrShapeFacts {
    uint32_t n_values;
    uint32_t *off, *cnt; /* per value; cnt NO_VALUES = unknown */
    IrExprId *pool;
    uint32_t len, cap;
    IrConstraint *req;
    IrNodeId *req_node;
    uint32_t n_req, cap_req;
};

IrStatus ir_shape_facts_create(const IrGraph *g, IrShapeFacts **out) {
    IrShapeFacts *f = calloc(1, sizeof *f);
    if (!f) return IR_ENOMEM;
    f->n_values = ir_graph_num_values(g) + 1;
    f->off = calloc(f->n_values, sizeof *f->off);
    f->cnt = malloc(f->n_values * sizeof *f->cnt);
    if (!f->off || !f->cnt) {
        ir_shape_facts_destroy(f);
        return IR_ENOMEM;
    }
    for (uint32_t i = 0; i < f->n_values; i++) f->cnt[i] = NO_VALUES;
    *out = f;
    return IR_OK;
}

void ir_shape_facts_destroy(IrShapeFacts *f) {
    if (!f) return;
    free(f->off);
    free(f->cnt);
    free(f->pool);
    free(f->req);
    free(f->req_node);
    free(f);
}

bool ir_shape_facts_values(const IrShapeFacts *f, IrValueId v, const IrExprId **vals, uint32_t *n) {
    if (!f || v >= f->n_values || f->cnt[v] == NO_VALUES) return false;
    *vals = f->pool + f->off[v];
    *n = f->cnt[v];
    return true;
}

uint32_t ir_shape_facts_num_required(const IrShapeFacts *f) { return f ? f->n_req : 0; }
IrConstraint ir_shape_facts_required(const IrShapeFacts *f, uint32_t i, IrNodeId *node) {
    if (node) *node = f->req_node[i];
    return f->req[i];
}

static void facts_require(IrInferCtx *c, IrConstraint r) {
    IrShapeFacts *f = c->facts;
    if (!f) return;
    for (uint32_t i = 0; i < f->n_req; i++)
        if (f->req[i].kind == r.kind && f->req[i].a == r.a && f->req[i].b == r.b && f->req[i].lo == r.lo) return;
    if (f->n_req == f->cap_req) {
        uint32_t nc = f->cap_req ? f->cap_req * 2 : 16;
        IrConstraint *nr = realloc(f->req, nc * sizeof *nr);
        if (nr) f->req = nr;
        IrNodeId *nn = realloc(f->req_node, nc * sizeof *nn);
        if (nn) f->req_node = nn;
        if (!nr || !nn) return;
        f->cap_req = nc;
    }
    f->req[f->n_req] = r;
    f->req_node[f->n_req++] = c->n;
}

void ir_infer_require_equal(IrInferCtx *c, IrExprId a, IrExprId b) {
    if (a == b || !a || !b) return;
    if (ir_expr_kind(c->g, a) == IR_EXPR_UNKNOWN || ir_expr_kind(c->g, b) == IR_EXPR_UNKNOWN) return;
    /* canonical order so the same requirement is recorded once */
    if (a > b) {
        IrExprId t = a;
        a = b;
        b = t;
    }
    IrConstraint r = {.kind = IR_CONSTRAINT_EQ, .a = a, .b = b, .origin = IR_CONSTRAINT_FACT};
    facts_require(c, r);
}

void ir_infer_require_divisible(IrInferCtx *c, IrExprId a, int64_t k) {
    if (!a || k <= 1 || ir_expr_kind(c->g, a) == IR_EXPR_UNKNOWN) return;
    IrExprId m = ir_expr_binary(c->g, IR_EXPR_MOD, a, ir_expr_const(c->g, k));
    int64_t v;
    if (ir_expr_is_const(c->g, m, &v) && v == 0) return;
    IrConstraint r = {.kind = IR_CONSTRAINT_DIVISIBLE, .a = a, .lo = k, .origin = IR_CONSTRAINT_FACT};
    facts_require(c, r);
}

bool ir_infer_input_values(IrInferCtx *c, uint32_t i, IrExprId *vals, uint32_t *n, uint32_t cap) {
    if (!has_input(c, i)) return false;
    IrValueId v = ir_node_operand(c->g, c->n, i);
    const IrExprId *fv;
    uint32_t fn;
    if (ir_shape_facts_values(c->facts, v, &fv, &fn)) {
        if (fn > cap) return false;
        memcpy(vals, fv, fn * sizeof *vals);
        *n = fn;
        return true;
    }
    IrTypeId t;
    const void *data = ir_infer_input_const(c, i, &t);
    if (!data) return false;
    IrDType dt = ir_type_dtype(c->g, t);
    int64_t numel;
    if (!ir_dtype_is_int(dt) || !ir_type_numel(c->g, t, &numel) || numel > cap || ir_type_rank(c->g, t) > 1) return false;
    for (int64_t k = 0; k < numel; k++) vals[k] = ir_expr_const(c->g, ir_elem_get_i64(dt, data, (size_t)k));
    *n = (uint32_t)numel;
    return true;
}

void ir_infer_set_output_values(IrInferCtx *c, uint32_t i, const IrExprId *vals, uint32_t n) {
    IrShapeFacts *f = c->facts;
    if (!f || i >= c->n_out) return;
    IrValueId v = ir_node_result(c->g, c->n, i);
    if (!v || v >= f->n_values) return;
    if (f->len + n > f->cap) {
        uint32_t nc = f->cap ? f->cap * 2 : 256;
        while (nc < f->len + n) nc *= 2;
        IrExprId *np = realloc(f->pool, nc * sizeof *np);
        if (!np) return;
        f->pool = np;
        f->cap = nc;
    }
    memcpy(f->pool + f->len, vals, n * sizeof *vals);
    f->off[v] = f->len;
    f->cnt[v] = n;
    f->len += n;
}

/* ---- helpers ------------------------------------------------------------------------------- */

typedef IrInferShape Shape;

bool ir__infer_input_shape(IrInferCtx *c, uint32_t i, IrInferShape *s) {
    IrTypeId t = ir_infer_input_type(c, i);
    s->dt = ir_type_dtype(c->g, t);
    s->rank = ir_type_rank(c->g, t);
    if (s->rank != IR_RANK_UNKNOWN && s->rank > IR_INFER_MAXR) s->rank = IR_RANK_UNKNOWN;
    if (s->rank != IR_RANK_UNKNOWN) memcpy(s->d, ir_type_dims(c->g, t), s->rank * sizeof(IrExprId));
    return t != 0;
}

static bool shape_of(IrInferCtx *c, uint32_t i, Shape *s) { return ir__infer_input_shape(c, i, s); }

static IrTypeId mk(IrInferCtx *c, IrDType dt, uint32_t rank, const IrExprId *d) {
    if (dt == IR_DTYPE_NONE) return 0;
    return ir_type_tensor(c->g, dt, rank, d);
}
static IrTypeId mk_shape(IrInferCtx *c, const Shape *s) { return mk(c, s->dt, s->rank, s->d); }
static IrExprId K(IrInferCtx *c, int64_t v) { return ir_expr_const(c->g, v); }
static IrExprId UNK(IrInferCtx *c) { return ir_expr_unknown(c->g); }
static bool cval(IrInferCtx *c, IrExprId e, int64_t *v) { return ir_expr_is_const(c->g, e, v); }

/* The entry count of 1-D operand i when its length is a constant. */
static bool const_len(IrInferCtx *c, uint32_t i, int64_t *n) {
    Shape s;
    return shape_of(c, i, &s) && s.rank == 1 && cval(c, s.d[0], n);
}

/* Reads a 1-D (or scalar) integer input whose every element is a known constant (a graph
 * constant, a Constant node, or a shape computation that folded to constants). */
static bool const_ints(IrInferCtx *c, uint32_t i, int64_t *vals, uint32_t *n, uint32_t cap) {
    IrExprId e[MAXR * 2];
    uint32_t k;
    if (cap > MAXR * 2) cap = MAXR * 2;
    if (!ir_infer_input_values(c, i, e, &k, cap)) return false;
    for (uint32_t j = 0; j < k; j++)
        if (!ir_expr_is_const(c->g, e[j], &vals[j])) return false;
    *n = k;
    return true;
}

static bool attr_ints(IrInferCtx *c, const char *name, int64_t *vals, uint32_t *n, uint32_t cap) {
    IrAttrValue a;
    if (!ir_node_attr(c->g, c->n, name, &a) || a.kind != IR_ATTR_INTS || a.count > cap) return false;
    memcpy(vals, a.ints, a.count * sizeof(int64_t));
    *n = a.count;
    return true;
}

static int64_t attr_int(IrInferCtx *c, const char *name) { return ir_node_attr_int(c->g, c->n, name, NULL); }

static IrExprId bin(IrInferCtx *c, IrExprKind k, IrExprId a, IrExprId b) { return ir_expr_binary(c->g, k, a, b); }

/* Numpy-style broadcasting of two shapes into out. */
static IrStatus broadcast2(IrInferCtx *c, const Shape *a, const Shape *b, Shape *out) {
    if (a->rank == IR_RANK_UNKNOWN || b->rank == IR_RANK_UNKNOWN) {
        out->rank = IR_RANK_UNKNOWN;
        return IR_OK;
    }
    uint32_t r = a->rank > b->rank ? a->rank : b->rank;
    for (uint32_t i = 0; i < r; i++) {
        IrExprId da = i < r - a->rank ? K(c, 1) : a->d[i - (r - a->rank)];
        IrExprId db = i < r - b->rank ? K(c, 1) : b->d[i - (r - b->rank)];
        int64_t va, vb, v;
        bool ca = cval(c, da, &va), cb = cval(c, db, &vb);
        if (da == db) {
            out->d[i] = da;
        } else if (ca && cb) {
            if (!ir_shape_broadcast_dim(va, vb, &v)) {
                IrStrBuf x, y;
                ir_strbuf_init(&x);
                ir_strbuf_init(&y);
                ir_type_print(c->g, ir_infer_input_type(c, 0), &x);
                ir_type_print(c->g, ir_infer_input_type(c, 1), &y);
                ir_infer_error(c, "cannot broadcast dim %u: %lld vs %lld (operand types %s and %s)", i,
                               (long long)va, (long long)vb, x.data ? x.data : "?", y.data ? y.data : "?");
                ir_strbuf_free(&x);
                ir_strbuf_free(&y);
                return IR_EVERIFY;
            }
            out->d[i] = v == va ? da : db;
        } else if (ca && va == 1) { /* a 1 gives way to a symbolic dim */
            out->d[i] = db;
        } else if (cb && vb == 1) {
            out->d[i] = da;
        } else if (ca) {
            out->d[i] = da; /* the other dim must equal it (or be 1) */
            if (ir_expr_kind(c->g, db) != IR_EXPR_UNKNOWN) ir_infer_require_equal(c, da, db);
        } else if (cb) {
            out->d[i] = db;
            if (ir_expr_kind(c->g, da) != IR_EXPR_UNKNOWN) ir_infer_require_equal(c, da, db);
        } else if (ir_expr_kind(c->g, da) == IR_EXPR_UNKNOWN) {
            out->d[i] = db;
        } else if (ir_expr_kind(c->g, db) == IR_EXPR_UNKNOWN) {
            out->d[i] = da;
        } else {
            /* two different symbolic dims: valid when they are equal (a dim that happens to
             * be 1 at run time is not assumed); recorded so shape-infer can guard it */
            out->d[i] = da;
            ir_infer_require_equal(c, da, db);
        }
    }
    out->rank = r;
    return IR_OK;
}

static IrStatus broadcast_all(IrInferCtx *c, uint32_t first, uint32_t count, Shape *out, bool *known) {
    *known = true;
    bool started = false;
    for (uint32_t i = first; i < first + count; i++) {
        Shape s;
        if (!shape_of(c, i, &s)) {
            *known = false;
            continue;
        }
        if (!started) {
            *out = s;
            started = true;
            continue;
        }
        Shape r;
        r.dt = out->dt;
        if (broadcast2(c, out, &s, &r)) return IR_EVERIFY;
        *out = r;
    }
    if (!started) *known = false;
    if (!*known) out->rank = IR_RANK_UNKNOWN;
    return IR_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- symbolic values of shape computations -------------------------------------------------
 * Run after an op's type rule when shape-infer collects facts: small integer results get their
 * contents as dim expressions, so Shape -> Gather -> Concat -> Reshape resolves symbolically. */

#define MAXV 64

static bool in_vals(IrInferCtx *c, uint32_t i, IrExprId *v, uint32_t *n) { return ir_infer_input_values(c, i, v, n, MAXV); }

static bool out_is_int(IrInferCtx *c) {
    IrValueId r = c->n_out ? ir_node_result(c->g, c->n, 0) : 0;
    IrTypeId t = r ? c->out[0] : 0;
    return t && ir_dtype_is_int(ir_type_dtype(c->g, t));
}

/* The result holds the same elements as operand 0 (Identity, Reshape, Squeeze, Cast to int...). */
static void pass_values(IrInferCtx *c) {
    IrExprId v[MAXV];
    uint32_t n;
    if (!c->facts || !out_is_int(c) || !in_vals(c, 0, v, &n)) return;
    int64_t numel;
    if (c->out[0] && ir_type_numel(c->g, c->out[0], &numel) && numel != (int64_t)n) return;
    ir_infer_set_output_values(c, 0, v, n);
}

static void values_shape(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x) || x.rank == IR_RANK_UNKNOWN) return;
    bool found;
    int64_t start = ir_node_attr_int(c->g, c->n, "start", NULL);
    int64_t end = ir_node_attr_int(c->g, c->n, "end", &found);
    if (!found) end = x.rank;
    start = clamp64(ir_shape_axis(start, x.rank), 0, x.rank);
    end = clamp64(ir_shape_axis(end, x.rank), 0, x.rank);
    if (end > start) ir_infer_set_output_values(c, 0, x.d + start, (uint32_t)(end - start));
}

static void values_size(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x) || x.rank == IR_RANK_UNKNOWN) return;
    IrExprId p = K(c, 1);
    for (uint32_t i = 0; i < x.rank; i++) p = bin(c, IR_EXPR_MUL, p, x.d[i]);
    ir_infer_set_output_values(c, 0, &p, 1);
}

static void values_constant(IrInferCtx *c) {
    IrAttrValue a;
    IrExprId v[MAXV];
    if (ir_node_attr(c->g, c->n, "value_int", &a) && a.kind == IR_ATTR_INT) {
        v[0] = K(c, a.i);
        ir_infer_set_output_values(c, 0, v, 1);
    } else if (ir_node_attr(c->g, c->n, "value_ints", &a) && a.kind == IR_ATTR_INTS && a.count <= MAXV) {
        for (uint32_t i = 0; i < a.count; i++) v[i] = K(c, a.ints[i]);
        ir_infer_set_output_values(c, 0, v, a.count);
    }
}

static void values_gather(IrInferCtx *c) {
    IrExprId d[MAXV], idx[MAXV], o[MAXV];
    uint32_t nd, ni;
    Shape x;
    if (!shape_of(c, 0, &x) || x.rank != 1 || attr_int(c, "axis") != 0) return;
    if (!in_vals(c, 0, d, &nd) || !in_vals(c, 1, idx, &ni)) return;
    for (uint32_t i = 0; i < ni; i++) {
        int64_t k;
        if (!cval(c, idx[i], &k)) return;
        if (!ir_shape_axis_checked(&k, nd)) return;
        o[i] = d[k];
    }
    ir_infer_set_output_values(c, 0, o, ni);
}

static void values_concat(IrInferCtx *c) {
    IrExprId o[MAXV], v[MAXV];
    uint32_t n = 0, k;
    for (uint32_t i = 0; i < ir_infer_num_inputs(c); i++) {
        if (!in_vals(c, i, v, &k) || n + k > MAXV) return;
        memcpy(o + n, v, k * sizeof *v);
        n += k;
    }
    ir_infer_set_output_values(c, 0, o, n);
}

static void values_slice(IrInferCtx *c) {
    IrExprId v[MAXV], o[MAXV];
    uint32_t n, ns, ne, nsp = 1;
    int64_t st[1], en[1], sp[1] = {1};
    if (!in_vals(c, 0, v, &n) || !const_ints(c, 1, st, &ns, 1) || !const_ints(c, 2, en, &ne, 1)) return;
    if (has_input(c, 4) && !const_ints(c, 4, sp, &nsp, 1)) return;
    if (sp[0] != 1) return;
    int64_t s0 = st[0] < 0 ? st[0] + n : st[0], e0 = en[0] < 0 ? en[0] + n : en[0];
    s0 = clamp64(s0, 0, n);
    e0 = clamp64(e0, 0, n);
    uint32_t k = 0;
    for (int64_t i = s0; i < e0; i++) o[k++] = v[i];
    ir_infer_set_output_values(c, 0, o, k);
}

static void values_arith(IrInferCtx *c) {
    IrExprId a[MAXV], b[MAXV], o[MAXV];
    uint32_t na, nb;
    if (!out_is_int(c) || !in_vals(c, 0, a, &na) || !in_vals(c, 1, b, &nb)) return;
    if (na != nb && na != 1 && nb != 1) return;
    IrExprKind k;
    switch (ir_node_op(c->g, c->n)) {
    case IR_OP_ADD: k = IR_EXPR_ADD; break;
    case IR_OP_SUB: k = IR_EXPR_SUB; break;
    case IR_OP_MUL: k = IR_EXPR_MUL; break;
    case IR_OP_DIV: k = IR_EXPR_DIV; break; /* shape values are non-negative: floor == trunc */
    default: return;
    }
    uint32_t n = na > nb ? na : nb;
    for (uint32_t i = 0; i < n; i++) {
        o[i] = bin(c, k, a[na == 1 ? 0 : i], b[nb == 1 ? 0 : i]);
        if (!o[i]) return;
    }
    ir_infer_set_output_values(c, 0, o, n);
}

static void values_neg(IrInferCtx *c) {
    IrExprId v[MAXV];
    uint32_t n;
    if (!out_is_int(c) || !in_vals(c, 0, v, &n)) return;
    for (uint32_t i = 0; i < n; i++) v[i] = bin(c, IR_EXPR_SUB, K(c, 0), v[i]);
    ir_infer_set_output_values(c, 0, v, n);
}

/* A 1-D integer ConstantOfShape of known length (a shape built from a count: [1] * k). */
static void values_constant_of_shape(IrInferCtx *c) {
    IrAttrValue a;
    int64_t len, fill = 0;
    IrTypeId t = c->n_out ? c->out[0] : 0;
    if (!out_is_int(c) || ir_type_rank(c->g, t) != 1 || !cval(c, ir_type_dims(c->g, t)[0], &len) || len > MAXV) return;
    if (ir_node_attr(c->g, c->n, "value", &a) && a.kind == IR_ATTR_TENSOR) {
        IrDType dt = ir_type_dtype(c->g, ir_const_type(c->g, a.tensor));
        const void *p = ir_const_data(c->g, a.tensor);
        if (!p) return;
        if (dt == IR_DTYPE_I64) memcpy(&fill, p, sizeof fill);
        else if (dt == IR_DTYPE_I32) {
            int32_t v32;
            memcpy(&v32, p, sizeof v32);
            fill = v32;
        } else return;
    }
    IrExprId v[MAXV];
    for (int64_t i = 0; i < len; i++) v[i] = K(c, fill);
    ir_infer_set_output_values(c, 0, v, (uint32_t)len);
}

static void values_reduce_prod(IrInferCtx *c) {
    IrExprId v[MAXV];
    uint32_t n;
    Shape x;
    if (!shape_of(c, 0, &x) || x.rank != 1 || !in_vals(c, 0, v, &n)) return;
    IrExprId p = K(c, 1);
    for (uint32_t i = 0; i < n; i++) p = bin(c, IR_EXPR_MUL, p, v[i]);
    ir_infer_set_output_values(c, 0, &p, 1);
}

static ValuesFn values_fn(IrOp op) {
    static const struct {
        IrOp op;
        ValuesFn fn;
    } table[] = {
        {IR_OP_SHAPE, values_shape},       {IR_OP_SIZE, values_size},       {IR_OP_CONSTANT, values_constant},
        {IR_OP_GATHER, values_gather},     {IR_OP_CONCAT, values_concat},   {IR_OP_SLICE, values_slice},
        {IR_OP_ADD, values_arith},         {IR_OP_SUB, values_arith},       {IR_OP_MUL, values_arith},
        {IR_OP_DIV, values_arith},         {IR_OP_IDENTITY, pass_values},   {IR_OP_CAST, pass_values},
        {IR_OP_SQUEEZE, pass_values},      {IR_OP_UNSQUEEZE, pass_values},  {IR_OP_FLATTEN, pass_values},
        {IR_OP_REDUCE_PROD, values_reduce_prod}, {IR_OP_NEG, values_neg},  {IR_OP_CONSTANT_OF_SHAPE, values_constant_of_shape},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].op == op) return table[i].fn;
    return NULL;
}

/* ---- elementwise --------------------------------------------------------------------------- */

IrStatus ir_infer_none(IrInferCtx *c) {
    (void)c;
    return IR_OK;
}

IrStatus ir_infer_unary(IrInferCtx *c) {
    IrTypeId t = ir_infer_input_type(c, 0);
    for (uint32_t i = 0; i < c->n_out && i < 1; i++) ir_infer_set_output(c, i, t);
    return IR_OK;
}

/* BatchNormalization: Y like X; the running mean and variance (training mode) like the input
 * mean and variance. */
IrStatus ir_infer_batchnorm(IrInferCtx *c) {
    ir_infer_set_output(c, 0, ir_infer_input_type(c, 0));
    for (uint32_t i = 1; i < c->n_out && i < 3; i++) ir_infer_set_output(c, i, ir_infer_input_type(c, 2 + i));
    return IR_OK;
}

IrStatus ir_infer_unary_bool(IrInferCtx *c) {
    Shape s;
    if (!shape_of(c, 0, &s)) return IR_OK;
    s.dt = IR_DTYPE_BOOL;
    ir_infer_set_output(c, 0, mk_shape(c, &s));
    return IR_OK;
}

IrStatus ir_infer_cast(IrInferCtx *c) {
    Shape s;
    bool found;
    int64_t to = attr_int(c, "to");
    (void)found;
    if (to <= IR_DTYPE_NONE || to >= IR_DTYPE_COUNT) return ir_infer_error(c, "attribute 'to' is not a dtype");
    if (!shape_of(c, 0, &s)) {
        ir_infer_set_output(c, 0, mk(c, (IrDType)to, IR_RANK_UNKNOWN, NULL));
        return IR_OK;
    }
    s.dt = (IrDType)to;
    ir_infer_set_output(c, 0, mk_shape(c, &s));
    return IR_OK;
}

IrStatus ir_infer_cast_like(IrInferCtx *c) {
    Shape s;
    IrDType to = ir_type_dtype(c->g, ir_infer_input_type(c, 1));
    if (!shape_of(c, 0, &s) || to == IR_DTYPE_NONE) return IR_OK;
    s.dt = to;
    ir_infer_set_output(c, 0, mk_shape(c, &s));
    return IR_OK;
}

IrStatus ir_infer_dropout(IrInferCtx *c) {
    Shape s;
    if (!shape_of(c, 0, &s)) return IR_OK;
    ir_infer_set_output(c, 0, mk_shape(c, &s));
    s.dt = IR_DTYPE_BOOL;
    ir_infer_set_output(c, 1, mk_shape(c, &s));
    return IR_OK;
}

static IrStatus check_same_dtype(IrInferCtx *c, uint32_t first, uint32_t count, IrDType *dt) {
    *dt = IR_DTYPE_NONE;
    for (uint32_t i = first; i < first + count; i++) {
        IrDType d = ir_type_dtype(c->g, ir_infer_input_type(c, i));
        if (d == IR_DTYPE_NONE) continue;
        if (*dt == IR_DTYPE_NONE)
            *dt = d;
        else if (*dt != d)
            return ir_infer_error(c, "operand %u has dtype %s but operand %u has %s", first,
                                  ir_dtype_name(*dt), i, ir_dtype_name(d));
    }
    return IR_OK;
}

IrStatus ir_infer_broadcast(IrInferCtx *c) {
    uint32_t n = ir_infer_num_inputs(c);
    IrDType dt;
    if (check_same_dtype(c, 0, n, &dt)) return IR_EVERIFY;
    Shape s;
    bool known;
    if (broadcast_all(c, 0, n, &s, &known)) return IR_EVERIFY;
    s.dt = dt;
    ir_infer_set_output(c, 0, mk(c, dt, known ? s.rank : IR_RANK_UNKNOWN, s.d));
    return IR_OK;
}

IrStatus ir_infer_broadcast_lhs(IrInferCtx *c) {
    Shape s;
    bool known;
    if (broadcast_all(c, 0, ir_infer_num_inputs(c), &s, &known)) return IR_EVERIFY;
    IrDType dt = ir_type_dtype(c->g, ir_infer_input_type(c, 0));
    ir_infer_set_output(c, 0, mk(c, dt, known ? s.rank : IR_RANK_UNKNOWN, s.d));
    return IR_OK;
}

IrStatus ir_infer_compare(IrInferCtx *c) {
    IrDType dt;
    if (check_same_dtype(c, 0, 2, &dt)) return IR_EVERIFY;
    Shape s;
    bool known;
    if (broadcast_all(c, 0, 2, &s, &known)) return IR_EVERIFY;
    ir_infer_set_output(c, 0, mk(c, IR_DTYPE_BOOL, known ? s.rank : IR_RANK_UNKNOWN, s.d));
    return IR_OK;
}

IrStatus ir_infer_where(IrInferCtx *c) {
    IrDType cd = ir_type_dtype(c->g, ir_infer_input_type(c, 0));
    if (cd != IR_DTYPE_NONE && cd != IR_DTYPE_BOOL)
        return ir_infer_error(c, "condition must be bool, got %s", ir_dtype_name(cd));
    IrDType dt;
    if (check_same_dtype(c, 1, 2, &dt)) return IR_EVERIFY;
    Shape s;
    bool known;
    if (broadcast_all(c, 0, 3, &s, &known)) return IR_EVERIFY;
    ir_infer_set_output(c, 0, mk(c, dt, known ? s.rank : IR_RANK_UNKNOWN, s.d));
    return IR_OK;
}

IrStatus ir_infer_like_input1(IrInferCtx *c) {
    Shape x, idx;
    if (!shape_of(c, 0, &x) || !shape_of(c, 1, &idx)) return IR_OK;
    idx.dt = x.dt;
    ir_infer_set_output(c, 0, mk_shape(c, &idx));
    return IR_OK;
}

/* ---- reductions ---------------------------------------------------------------------------- */

static IrStatus reduce_common(IrInferCtx *c, const int64_t *axes, uint32_t n_axes, bool axes_known,
                              IrDType out_dt) {
    Shape s;
    if (!shape_of(c, 0, &s)) return IR_OK;
    if (out_dt == IR_DTYPE_NONE) out_dt = s.dt;
    bool keep = attr_int(c, "keepdims") != 0;
    if (s.rank == IR_RANK_UNKNOWN || !axes_known) {
        ir_infer_set_output(c, 0, mk(c, out_dt, keep && s.rank != IR_RANK_UNKNOWN ? s.rank : IR_RANK_UNKNOWN, s.d));
        if (keep && s.rank != IR_RANK_UNKNOWN) {
            Shape o = s;
            o.dt = out_dt;
            for (uint32_t i = 0; i < o.rank; i++) o.d[i] = UNK(c);
            ir_infer_set_output(c, 0, mk_shape(c, &o));
        }
        return IR_OK;
    }
    bool red[MAXR] = {0};
    if (n_axes == 0) {
        bool noop = attr_int(c, "noop_with_empty_axes") != 0;
        if (noop) {
            s.dt = out_dt;
            ir_infer_set_output(c, 0, mk_shape(c, &s));
            return IR_OK;
        }
        for (uint32_t i = 0; i < s.rank; i++) red[i] = true;
    }
    for (uint32_t i = 0; i < n_axes; i++) {
        int64_t a = axes[i];
        if (!ir_shape_axis_checked(&a, s.rank)) return ir_infer_error(c, "axis %lld out of range for rank %u", (long long)axes[i], s.rank);
        red[a] = true;
    }
    Shape o;
    o.dt = out_dt;
    o.rank = 0;
    for (uint32_t i = 0; i < s.rank; i++) {
        if (!red[i])
            o.d[o.rank++] = s.d[i];
        else if (keep)
            o.d[o.rank++] = K(c, 1);
    }
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_reduce(IrInferCtx *c) {
    int64_t axes[MAXR];
    uint32_t n = 0;
    IrAttrValue a;
    if (ir_node_attr(c->g, c->n, "axes", &a)) {
        if (a.count > MAXR) return ir_infer_error(c, "too many axes");
        memcpy(axes, a.ints, a.count * sizeof(int64_t));
        n = a.count;
    }
    return reduce_common(c, axes, n, true, IR_DTYPE_NONE);
}

IrStatus ir_infer_reduce_sum(IrInferCtx *c) {
    int64_t axes[MAXR];
    uint32_t n = 0;
    bool known = true;
    if (has_input(c, 1)) known = const_ints(c, 1, axes, &n, MAXR);
    Shape s;
    int64_t na;
    if (!known && attr_int(c, "keepdims") == 0 && const_len(c, 1, &na) && na > 0 && shape_of(c, 0, &s) &&
        s.rank != IR_RANK_UNKNOWN && na <= (int64_t)s.rank) { /* axes at run time, their count gives the rank */
        s.rank -= (uint32_t)na;
        for (uint32_t i = 0; i < s.rank; i++) s.d[i] = UNK(c);
        ir_infer_set_output(c, 0, mk_shape(c, &s));
        return IR_OK;
    }
    return reduce_common(c, axes, n, known, IR_DTYPE_NONE);
}

IrStatus ir_infer_argreduce(IrInferCtx *c) {
    int64_t axis = attr_int(c, "axis");
    return reduce_common(c, &axis, 1, true, IR_DTYPE_I64);
}

IrStatus ir_infer_layer_norm(IrInferCtx *c) {
    Shape s;
    if (!shape_of(c, 0, &s)) return IR_OK;
    ir_infer_set_output(c, 0, mk_shape(c, &s));
    if (c->n_out > 1 && s.rank != IR_RANK_UNKNOWN) {
        int64_t axis = attr_int(c, "axis");
        if (!ir_shape_axis_checked(&axis, s.rank)) return ir_infer_error(c, "axis out of range");
        Shape m = s;
        m.dt = IR_DTYPE_F32;
        for (uint32_t i = (uint32_t)axis; i < m.rank; i++) m.d[i] = K(c, 1);
        for (uint32_t i = 1; i < c->n_out; i++) ir_infer_set_output(c, i, mk_shape(c, &m));
    }
    return IR_OK;
}

/* ---- contractions -------------------------------------------------------------------------- */

static IrStatus dims_must_match(IrInferCtx *c, IrExprId a, IrExprId b, const char *what) {
    int64_t va, vb;
    if (cval(c, a, &va) && cval(c, b, &vb) && va != vb)
        return ir_infer_error(c, "%s mismatch: %lld vs %lld", what, (long long)va, (long long)vb);
    ir_infer_require_equal(c, a, b);
    return IR_OK;
}

static IrStatus matmul_shapes(IrInferCtx *c, Shape a, Shape b, IrDType out_dt) {
    if (a.rank == IR_RANK_UNKNOWN || b.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk(c, out_dt, IR_RANK_UNKNOWN, NULL));
        return IR_OK;
    }
    if (a.rank == 0 || b.rank == 0) return ir_infer_error(c, "operands must have rank >= 1");
    bool a1 = a.rank == 1, b1 = b.rank == 1;
    if (a1) {
        a.d[1] = a.d[0];
        a.d[0] = K(c, 1);
        a.rank = 2;
    }
    if (b1) {
        b.d[1] = K(c, 1);
        b.rank = 2;
    }
    if (dims_must_match(c, a.d[a.rank - 1], b.d[b.rank - 2], "contraction dim")) return IR_EVERIFY;
    Shape ba = a, bb = b, o;
    ba.rank -= 2;
    bb.rank -= 2;
    if (broadcast2(c, &ba, &bb, &o)) return IR_EVERIFY;
    if (!a1) o.d[o.rank++] = a.d[a.rank - 2];
    if (!b1) o.d[o.rank++] = b.d[b.rank - 1];
    o.dt = out_dt;
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_matmul(IrInferCtx *c) {
    Shape a, b;
    IrDType dt;
    if (check_same_dtype(c, 0, 2, &dt)) return IR_EVERIFY;
    if (!shape_of(c, 0, &a) || !shape_of(c, 1, &b)) return IR_OK;
    return matmul_shapes(c, a, b, dt);
}

IrStatus ir_infer_matmul_integer(IrInferCtx *c) {
    Shape a, b;
    if (!shape_of(c, 0, &a) || !shape_of(c, 1, &b)) return IR_OK;
    return matmul_shapes(c, a, b, IR_DTYPE_I32);
}

IrStatus ir_infer_fp8_matmul(IrInferCtx *c) {
    /* operands: a (fp8), b (fp8), a_scale, b_scale, optional bias */
    Shape a, b;
    if (!shape_of(c, 0, &a) || !shape_of(c, 1, &b)) return IR_OK;
    IrDType out = (IrDType)attr_int(c, "out_dtype");
    if (out <= IR_DTYPE_NONE || out >= IR_DTYPE_COUNT) return ir_infer_error(c, "bad out_dtype");
    return matmul_shapes(c, a, b, out);
}

IrStatus ir_infer_gemm(IrInferCtx *c) {
    Shape a, b;
    IrDType dt;
    if (check_same_dtype(c, 0, 2, &dt)) return IR_EVERIFY;
    if (!shape_of(c, 0, &a) || !shape_of(c, 1, &b)) return IR_OK;
    if (a.rank == IR_RANK_UNKNOWN || b.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk(c, dt, 2, (IrExprId[]){UNK(c), UNK(c)}));
        return IR_OK;
    }
    if (a.rank != 2 || b.rank != 2) return ir_infer_error(c, "operands must be rank 2 (got %u and %u)", a.rank, b.rank);
    bool ta = attr_int(c, "transA") != 0, tb = attr_int(c, "transB") != 0;
    IrExprId m = ta ? a.d[1] : a.d[0], ka = ta ? a.d[0] : a.d[1];
    IrExprId kb = tb ? b.d[1] : b.d[0], nn = tb ? b.d[0] : b.d[1];
    if (dims_must_match(c, ka, kb, "contraction dim")) return IR_EVERIFY;
    IrExprId d[2] = {m, nn};
    ir_infer_set_output(c, 0, mk(c, dt, 2, d));
    return IR_OK;
}

/* Spatial output size for conv/pool: floor or ceil of (in + pads - dil*(k-1) - 1)/stride + 1. The
 * kernel k may be a symbol (a weight whose dims are known at run time only). */
IrExprId ir__infer_window_out(IrInferCtx *c, IrExprId in, IrExprId k, int64_t stride, int64_t dil, int64_t pad_total,
                              bool ceil_mode, const char *auto_pad) {
    bool same = strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0;
    if (same) {
        /* ceil(in / stride) */
        IrExprId num = bin(c, IR_EXPR_ADD, in, K(c, stride - 1));
        return bin(c, IR_EXPR_DIV, num, K(c, stride));
    }
    /* dil*(k-1) + 1 */
    IrExprId eff = bin(c, IR_EXPR_ADD, bin(c, IR_EXPR_MUL, bin(c, IR_EXPR_SUB, k, K(c, 1)), K(c, dil)), K(c, 1));
    if (strcmp(auto_pad, "VALID") == 0) pad_total = 0;
    IrExprId num = bin(c, IR_EXPR_SUB, bin(c, IR_EXPR_ADD, in, K(c, pad_total)), eff);
    if (ceil_mode) num = bin(c, IR_EXPR_ADD, num, K(c, stride - 1));
    IrExprId q = bin(c, IR_EXPR_DIV, num, K(c, stride));
    int64_t qv;
    if (ceil_mode && cval(c, q, &qv)) {
        /* ONNX: the last window must start inside the (left-padded) input */
        int64_t inv;
        if (cval(c, in, &inv) && qv * stride >= inv + pad_total / 2 + (pad_total % 2)) qv--;
        return K(c, qv + 1);
    }
    return bin(c, IR_EXPR_ADD, q, K(c, 1));
}

/* Kernel dims of a Conv-like node with weight shape w: kernel_shape when given (then w's spatial
 * dims must equal it: a fact, so weight dims that are symbols become those constants), else
 * w's spatial dims, symbols included. */
void ir__infer_conv_kernel(IrInferCtx *c, const IrInferShape *w, uint32_t nsp, const int64_t *attr_kernel,
                           IrExprId *kernel) {
    for (uint32_t i = 0; i < nsp; i++) {
        kernel[i] = attr_kernel ? K(c, attr_kernel[i]) : w->d[2 + i];
        if (attr_kernel && w->rank == nsp + 2) ir_infer_require_equal(c, w->d[2 + i], kernel[i]);
    }
}

static IrStatus conv_like(IrInferCtx *c, const Shape *x, uint32_t nsp, const IrExprId *kernel,
                          IrExprId out_channels, bool ceil_mode) {
    int64_t strides[MAXR], dil[MAXR], pads[2 * MAXR];
    uint32_t ns = 0, nd = 0, np = 0;
    if (!attr_ints(c, "strides", strides, &ns, MAXR)) ns = 0;
    if (!attr_ints(c, "dilations", dil, &nd, MAXR)) nd = 0;
    if (!attr_ints(c, "pads", pads, &np, 2 * MAXR)) np = 0;
    if ((ns && ns != nsp) || (nd && nd != nsp) || (np && np != 2 * nsp))
        return ir_infer_error(c, "strides/dilations/pads do not match %u spatial dims", nsp);
    const char *auto_pad = ir_node_attr_string(c->g, c->n, "auto_pad", NULL);
    if (!auto_pad) auto_pad = "NOTSET";
    Shape o;
    o.dt = x->dt;
    o.rank = x->rank;
    o.d[0] = x->d[0];
    o.d[1] = out_channels;
    for (uint32_t i = 0; i < nsp; i++) {
        int64_t s = ns ? strides[i] : 1, d = nd ? dil[i] : 1, k = 1;
        int64_t p = np ? pads[i] + pads[i + nsp] : 0;
        bool kc = cval(c, kernel[i], &k);
        if (s <= 0 || d <= 0 || k <= 0) return ir_infer_error(c, "non-positive stride, dilation or kernel");
        int64_t in;
        bool same = strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0;
        if (!same && kc && cval(c, x->d[2 + i], &in) && in + (strcmp(auto_pad, "VALID") == 0 ? 0 : p) < d * (k - 1) + 1)
            return ir_infer_error(c, "kernel larger than padded input on spatial axis %u", i);
        o.d[2 + i] = ir__infer_window_out(c, x->d[2 + i], kernel[i], s, d, p, ceil_mode, auto_pad);
    }
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_conv(IrInferCtx *c) {
    Shape x, w;
    IrDType dt;
    if (check_same_dtype(c, 0, 2, &dt)) return IR_EVERIFY;
    if (!shape_of(c, 0, &x) || !shape_of(c, 1, &w)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN || w.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk(c, dt, x.rank, x.d));
        return IR_OK;
    }
    if (x.rank < 3 || w.rank != x.rank) return ir_infer_error(c, "input rank %u and weight rank %u do not fit", x.rank, w.rank);
    uint32_t nsp = x.rank - 2;
    int64_t ks[MAXR];
    uint32_t nk;
    bool has_ks = attr_ints(c, "kernel_shape", ks, &nk, MAXR);
    if (has_ks && nk != nsp) return ir_infer_error(c, "kernel_shape has %u dims, expected %u", nk, nsp);
    IrExprId kernel[MAXR];
    ir__infer_conv_kernel(c, &w, nsp, has_ks ? ks : NULL, kernel);
    int64_t group = attr_int(c, "group"), cin, wc;
    if (group <= 0) return ir_infer_error(c, "group must be positive");
    if (cval(c, x.d[1], &cin) && cval(c, w.d[1], &wc) && cin != wc * group)
        return ir_infer_error(c, "input channels %lld != weight channels %lld x group %lld",
                              (long long)cin, (long long)wc, (long long)group);
    ir_infer_require_equal(c, x.d[1], bin(c, IR_EXPR_MUL, w.d[1], K(c, group)));
    return conv_like(c, &x, nsp, kernel, w.d[0], false);
}

IrStatus ir_infer_conv_transpose(IrInferCtx *c) {
    Shape x, w;
    if (!shape_of(c, 0, &x) || !shape_of(c, 1, &w)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN || w.rank == IR_RANK_UNKNOWN || x.rank < 3) {
        ir_infer_set_output(c, 0, mk(c, x.dt, x.rank, x.d));
        return IR_OK;
    }
    if (w.rank != x.rank) return ir_infer_error(c, "input rank %u and weight rank %u do not fit", x.rank, w.rank);
    uint32_t nsp = x.rank - 2;
    int64_t group = attr_int(c, "group");
    if (group <= 0) return ir_infer_error(c, "group must be positive");
    ir_infer_require_equal(c, x.d[1], w.d[0]);
    Shape o = x;
    o.d[1] = bin(c, IR_EXPR_MUL, w.d[1], K(c, group));
    int64_t oshape[MAXR], strides[MAXR], pads[2 * MAXR], dil[MAXR], opad[MAXR], ks[MAXR];
    uint32_t nos, ns = 0, np = 0, nd = 0, nop = 0, nk = 0;
    bool has_ks = attr_ints(c, "kernel_shape", ks, &nk, MAXR);
    if (has_ks && nk != nsp) return ir_infer_error(c, "kernel_shape has %u dims, expected %u", nk, nsp);
    IrExprId kernel[MAXR];
    ir__infer_conv_kernel(c, &w, nsp, has_ks ? ks : NULL, kernel);
    if (attr_ints(c, "output_shape", oshape, &nos, MAXR) && nos == nsp) {
        for (uint32_t i = 0; i < nsp; i++) o.d[2 + i] = K(c, oshape[i]);
        ir_infer_set_output(c, 0, mk_shape(c, &o));
        return IR_OK;
    }
    attr_ints(c, "strides", strides, &ns, MAXR);
    attr_ints(c, "pads", pads, &np, 2 * MAXR);
    attr_ints(c, "dilations", dil, &nd, MAXR);
    attr_ints(c, "output_padding", opad, &nop, MAXR);
    const char *auto_pad = ir_node_attr_string(c->g, c->n, "auto_pad", NULL);
    bool same = auto_pad && (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0);
    for (uint32_t i = 0; i < nsp; i++) {
        int64_t s = ns == nsp ? strides[i] : 1, d = nd == nsp ? dil[i] : 1;
        int64_t p = np == 2 * nsp ? pads[i] + pads[i + nsp] : 0, op = nop == nsp ? opad[i] : 0;
        if (same) {
            o.d[2 + i] = bin(c, IR_EXPR_MUL, x.d[2 + i], K(c, s));
            continue;
        }
        /* s*(in-1) + op + ((k-1)*d+1) - pads, k a constant or the weight's symbol */
        IrExprId e = bin(c, IR_EXPR_MUL, bin(c, IR_EXPR_SUB, x.d[2 + i], K(c, 1)), K(c, s));
        IrExprId span = bin(c, IR_EXPR_MUL, bin(c, IR_EXPR_SUB, kernel[i], K(c, 1)), K(c, d));
        o.d[2 + i] = bin(c, IR_EXPR_ADD, bin(c, IR_EXPR_ADD, e, span), K(c, op + 1 - p));
    }
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_pool(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk_shape(c, &x));
        return IR_OK;
    }
    if (x.rank < 3) return ir_infer_error(c, "input must have rank >= 3, got %u", x.rank);
    uint32_t nsp = x.rank - 2, nk;
    int64_t kernel[MAXR];
    if (!attr_ints(c, "kernel_shape", kernel, &nk, MAXR) || nk != nsp)
        return ir_infer_error(c, "kernel_shape must have %u entries", nsp);
    IrExprId kd[MAXR];
    for (uint32_t i = 0; i < nsp; i++) kd[i] = K(c, kernel[i]);
    IrStatus s = conv_like(c, &x, nsp, kd, x.d[1], attr_int(c, "ceil_mode") != 0);
    if (s == IR_OK && c->n_out > 1 && c->out[0]) {
        Shape o;
        o.dt = IR_DTYPE_I64;
        o.rank = ir_type_rank(c->g, c->out[0]);
        memcpy(o.d, ir_type_dims(c->g, c->out[0]), o.rank * sizeof(IrExprId));
        ir_infer_set_output(c, 1, mk_shape(c, &o));
    }
    return s;
}

IrStatus ir_infer_global_pool(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank != IR_RANK_UNKNOWN) {
        if (x.rank < 2) return ir_infer_error(c, "input must have rank >= 2");
        for (uint32_t i = 2; i < x.rank; i++) x.d[i] = K(c, 1);
    }
    ir_infer_set_output(c, 0, mk_shape(c, &x));
    return IR_OK;
}

/* ---- data movement ------------------------------------------------------------------------- */

IrStatus ir_infer_concat(IrInferCtx *c) {
    uint32_t n = ir_infer_num_inputs(c);
    IrDType dt;
    if (check_same_dtype(c, 0, n, &dt)) return IR_EVERIFY;
    Shape o;
    bool have = false;
    int64_t axis = attr_int(c, "axis");
    for (uint32_t i = 0; i < n; i++) {
        Shape s;
        if (!shape_of(c, i, &s) || s.rank == IR_RANK_UNKNOWN) {
            if (have) {
                o.d[axis] = UNK(c);
            }
            if (!have && s.rank == IR_RANK_UNKNOWN) continue;
            if (!have) return IR_OK;
            continue;
        }
        if (!have) {
            o = s;
            if (!ir_shape_axis_checked(&axis, s.rank)) return ir_infer_error(c, "axis %lld out of range for rank %u", (long long)attr_int(c, "axis"), s.rank);
            have = true;
            continue;
        }
        if (s.rank != o.rank) return ir_infer_error(c, "operand %u has rank %u, expected %u", i, s.rank, o.rank);
        for (uint32_t k = 0; k < o.rank; k++) {
            if ((int64_t)k == axis) {
                o.d[k] = bin(c, IR_EXPR_ADD, o.d[k], s.d[k]);
            } else if (dims_must_match(c, o.d[k], s.d[k], "non-axis dim")) {
                return IR_EVERIFY;
            }
        }
    }
    if (!have) return IR_OK;
    o.dt = dt;
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_expand(IrInferCtx *c) {
    Shape x, t;
    uint32_t n;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (!ir_infer_input_values(c, 1, t.d, &n, MAXR)) {
        /* the shape's values come at run time: the rank is known when its length is */
        Shape st;
        int64_t len;
        if (x.rank != IR_RANK_UNKNOWN && shape_of(c, 1, &st) && st.rank == 1 && cval(c, st.d[0], &len) && len >= 0 && len <= MAXR) {
            Shape o = {.dt = x.dt, .rank = (uint32_t)len > x.rank ? (uint32_t)len : x.rank};
            for (uint32_t i = 0; i < o.rank; i++) o.d[i] = UNK(c);
            ir_infer_set_output(c, 0, mk_shape(c, &o));
        } else {
            ir_infer_set_output(c, 0, mk(c, x.dt, IR_RANK_UNKNOWN, NULL));
        }
        return IR_OK;
    }
    t.dt = x.dt;
    t.rank = n;
    Shape o;
    o.dt = x.dt;
    if (broadcast2(c, &x, &t, &o)) return IR_EVERIFY;
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_flatten(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk(c, x.dt, 2, (IrExprId[]){UNK(c), UNK(c)}));
        return IR_OK;
    }
    int64_t axis = attr_int(c, "axis");
    axis = ir_shape_axis(axis, x.rank); /* Flatten's axis may equal the rank */
    if (axis < 0 || axis > (int64_t)x.rank) return ir_infer_error(c, "axis out of range");
    IrExprId a = K(c, 1), b = K(c, 1);
    for (uint32_t i = 0; i < x.rank; i++) {
        if ((int64_t)i < axis)
            a = bin(c, IR_EXPR_MUL, a, x.d[i]);
        else
            b = bin(c, IR_EXPR_MUL, b, x.d[i]);
    }
    ir_infer_set_output(c, 0, mk(c, x.dt, 2, (IrExprId[]){a, b}));
    return IR_OK;
}

IrStatus ir_infer_gather(IrInferCtx *c) {
    Shape x, idx;
    if (!shape_of(c, 0, &x) || !shape_of(c, 1, &idx)) return IR_OK;
    IrDType it = idx.dt;
    if (it != IR_DTYPE_I64 && it != IR_DTYPE_I32) return ir_infer_error(c, "indices must be i32 or i64, got %s", ir_dtype_name(it));
    if (x.rank == IR_RANK_UNKNOWN || idx.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk(c, x.dt, IR_RANK_UNKNOWN, NULL));
        return IR_OK;
    }
    int64_t axis = attr_int(c, "axis");
    if (!ir_shape_axis_checked(&axis, x.rank)) return ir_infer_error(c, "axis out of range for rank %u", x.rank);
    Shape o;
    o.dt = x.dt;
    o.rank = 0;
    if (x.rank - 1 + idx.rank > MAXR) return ir_infer_error(c, "result rank too large");
    for (uint32_t i = 0; i < x.rank; i++) {
        if ((int64_t)i == axis)
            for (uint32_t k = 0; k < idx.rank; k++) o.d[o.rank++] = idx.d[k];
        else
            o.d[o.rank++] = x.d[i];
    }
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_pad(IrInferCtx *c) {
    Shape x;
    int64_t pads[2 * MAXR], axes[MAXR];
    uint32_t np, na = 0;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN || !const_ints(c, 1, pads, &np, 2 * MAXR)) {
        Shape o = x, p;
        if (x.rank != IR_RANK_UNKNOWN && !has_input(c, 3) && has_input(c, 1) && shape_of(c, 1, &p) && p.rank == 1)
            ir_infer_require_equal(c, p.d[0], K(c, 2 * (int64_t)x.rank)); /* a begin and an end per dim */
        for (uint32_t i = 0; o.rank != IR_RANK_UNKNOWN && i < o.rank; i++) o.d[i] = UNK(c);
        ir_infer_set_output(c, 0, mk_shape(c, &o));
        return IR_OK;
    }
    if (has_input(c, 3)) {
        if (!const_ints(c, 3, axes, &na, MAXR)) {
            Shape o = x;
            for (uint32_t i = 0; i < o.rank; i++) o.d[i] = UNK(c);
            ir_infer_set_output(c, 0, mk_shape(c, &o));
            return IR_OK;
        }
    } else {
        na = x.rank;
        for (uint32_t i = 0; i < na; i++) axes[i] = i;
    }
    if (np != 2 * na) return ir_infer_error(c, "pads has %u entries, expected %u", np, 2 * na);
    for (uint32_t i = 0; i < na; i++) {
        int64_t a = axes[i];
        if (!ir_shape_axis_checked(&a, x.rank)) return ir_infer_error(c, "pad axis out of range");
        x.d[a] = bin(c, IR_EXPR_ADD, x.d[a], K(c, pads[i] + pads[i + na]));
    }
    ir_infer_set_output(c, 0, mk_shape(c, &x));
    return IR_OK;
}

IrStatus ir_infer_reshape(IrInferCtx *c) {
    Shape x;
    IrExprId dims[MAXR];
    uint32_t n;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (!ir_infer_input_values(c, 1, dims, &n, MAXR)) {
        Shape st;
        if (shape_of(c, 1, &st) && st.rank == 1) {
            int64_t len;
            if (cval(c, st.d[0], &len) && len >= 0 && len <= MAXR) {
                Shape o;
                o.dt = x.dt;
                o.rank = (uint32_t)len;
                for (uint32_t i = 0; i < o.rank; i++) o.d[i] = UNK(c);
                ir_infer_set_output(c, 0, mk_shape(c, &o));
                return IR_OK;
            }
        }
        ir_infer_set_output(c, 0, mk(c, x.dt, IR_RANK_UNKNOWN, NULL));
        return IR_OK;
    }
    bool allowzero = attr_int(c, "allowzero") != 0;
    Shape o;
    o.dt = x.dt;
    o.rank = n;
    int infer_at = -1;
    IrExprId known = K(c, 1);
    for (uint32_t i = 0; i < n; i++) {
        int64_t v;
        bool is_c = cval(c, dims[i], &v);
        if (is_c && v == -1) {
            if (infer_at >= 0) return ir_infer_error(c, "more than one -1 in shape");
            infer_at = (int)i;
            continue;
        }
        if (is_c && v == 0 && !allowzero) {
            if (x.rank == IR_RANK_UNKNOWN) o.d[i] = UNK(c);
            else if (i >= x.rank) return ir_infer_error(c, "0 in shape refers past input rank %u", x.rank);
            else o.d[i] = x.d[i];
        } else if (is_c && v < 0) {
            return ir_infer_error(c, "invalid dim %lld in shape", (long long)v);
        } else {
            o.d[i] = dims[i];
        }
        known = bin(c, IR_EXPR_MUL, known, o.d[i]);
    }
    if (x.rank != IR_RANK_UNKNOWN) {
        IrExprId total = K(c, 1);
        for (uint32_t i = 0; i < x.rank; i++) total = bin(c, IR_EXPR_MUL, total, x.d[i]);
        int64_t tv, kv;
        if (infer_at >= 0) {
            if (cval(c, total, &tv) && cval(c, known, &kv)) {
                if (kv == 0 || tv % kv != 0)
                    return ir_infer_error(c, "cannot reshape %lld elements with -1 and %lld others", (long long)tv, (long long)kv);
                o.d[infer_at] = K(c, tv / kv);
            } else {
                o.d[infer_at] = bin(c, IR_EXPR_DIV, total, known);
                if (ir_expr_kind(c->g, o.d[infer_at]) == IR_EXPR_DIV && cval(c, known, &kv))
                    ir_infer_require_divisible(c, total, kv);
            }
        } else if (cval(c, total, &tv) && cval(c, known, &kv)) {
            if (tv != kv) return ir_infer_error(c, "cannot reshape %lld elements into %lld", (long long)tv, (long long)kv);
        } else {
            ir_infer_require_equal(c, total, known);
        }
    } else if (infer_at >= 0) {
        o.d[infer_at] = UNK(c);
    }
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    pass_values(c);
    return IR_OK;
}


/* A bound of Slice on symbolic dim D: negative counts from the end, then clamped to [0, D]
 * (step > 0) or [-1, D - 1] (step < 0); bounds past the int32 range mean "to the end". */
static IrExprId slice_bound(IrInferCtx *c, IrExprId D, int64_t v, bool fwd) {
    IrExprId hi = fwd ? D : bin(c, IR_EXPR_SUB, D, K(c, 1));
    int64_t lo = fwd ? 0 : -1;
    if (v >= INT32_MAX) return hi;
    if (v <= INT32_MIN) return K(c, lo);
    if (v >= 0) return v == 0 && fwd ? K(c, 0) : bin(c, IR_EXPR_MIN, K(c, v), hi);
    return bin(c, IR_EXPR_MAX, bin(c, IR_EXPR_ADD, D, K(c, v)), K(c, lo));
}

/* Elements Slice takes from symbolic dim D: max(0, ceil((end - start) / step)) over the clamped
 * bounds (min/max expressions, so x[:, 1:] has D - 1 elements when D >= 1 and 0 when D is 0). */
static IrExprId slice_len(IrInferCtx *c, IrExprId D, int64_t start, int64_t end, int64_t step) {
    bool fwd = step > 0;
    IrExprId s = slice_bound(c, D, start, fwd), e = slice_bound(c, D, end, fwd);
    IrExprId span = fwd ? bin(c, IR_EXPR_SUB, e, s) : bin(c, IR_EXPR_SUB, s, e);
    int64_t m = fwd ? step : -step;
    if (m > 1) span = bin(c, IR_EXPR_DIV, bin(c, IR_EXPR_ADD, span, K(c, m - 1)), K(c, m));
    /* x[s:] (the end is D, the start at most D) and x[:e] (the start is 0, the end at least 0)
     * never go negative */
    if (fwd && (end >= INT32_MAX || start == 0)) return span;
    return bin(c, IR_EXPR_MAX, span, K(c, 0));
}

IrStatus ir_infer_slice(IrInferCtx *c) {
    Shape x;
    int64_t st[MAXR], en[MAXR], ax[MAXR], sp[MAXR];
    uint32_t ns, ne, na, nsp;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk_shape(c, &x));
        return IR_OK;
    }
    bool ok = const_ints(c, 1, st, &ns, MAXR) && const_ints(c, 2, en, &ne, MAXR) && ns == ne;
    if (ok && has_input(c, 3)) ok = const_ints(c, 3, ax, &na, MAXR) && na == ns;
    else if (ok) {
        na = ns;
        for (uint32_t i = 0; i < na; i++) ax[i] = i;
    }
    if (ok && has_input(c, 4)) ok = const_ints(c, 4, sp, &nsp, MAXR) && nsp == ns;
    else if (ok)
        for (uint32_t i = 0; i < ns; i++) sp[i] = 1;
    Shape o = x;
    if (!ok) { /* bounds at run time: the dims the axes name are unknown (all, when they are too) */
        int64_t n = 0;
        na = 0;
        bool axes_known = has_input(c, 3) ? const_ints(c, 3, ax, &na, MAXR) : const_len(c, 1, &n) && n <= (int64_t)x.rank;
        if (axes_known && !has_input(c, 3))
            for (na = 0; na < (uint32_t)n; na++) ax[na] = na;
        bool cut[MAXR] = {0};
        for (uint32_t i = 0; axes_known && i < na; i++) {
            int64_t a = ax[i];
            if (!ir_shape_axis_checked(&a, x.rank)) return ir_infer_error(c, "axis %lld out of range", (long long)ax[i]);
            cut[a] = true;
        }
        for (uint32_t i = 0; i < o.rank; i++)
            if (!axes_known || cut[i]) o.d[i] = UNK(c);
        ir_infer_set_output(c, 0, mk_shape(c, &o));
        return IR_OK;
    }
    for (uint32_t i = 0; i < ns; i++) {
        int64_t a = ax[i], dim;
        if (!ir_shape_axis_checked(&a, x.rank)) return ir_infer_error(c, "slice axis out of range");
        if (sp[i] == 0) return ir_infer_error(c, "slice step is zero");
        if (!cval(c, x.d[a], &dim)) {
            o.d[a] = slice_len(c, x.d[a], st[i], en[i], sp[i]);
            continue;
        }
        int64_t s = st[i], e = en[i], step = sp[i];
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        int64_t len;
        if (step > 0) {
            s = clamp64(s, 0, dim);
            e = clamp64(e, 0, dim);
            len = e > s ? (e - s + step - 1) / step : 0;
        } else {
            s = clamp64(s, -1, dim - 1);
            e = clamp64(e, -1, dim - 1);
            len = s > e ? (s - e + (-step) - 1) / (-step) : 0;
        }
        o.d[a] = K(c, len);
    }
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_split(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        for (uint32_t i = 0; i < c->n_out; i++) ir_infer_set_output(c, i, mk_shape(c, &x));
        return IR_OK;
    }
    int64_t axis = attr_int(c, "axis");
    if (!ir_shape_axis_checked(&axis, x.rank)) return ir_infer_error(c, "axis out of range");
    int64_t sizes[MAXR];
    uint32_t n = 0;
    int64_t dim;
    Shape o = x;
    if (has_input(c, 1)) {
        if (!const_ints(c, 1, sizes, &n, MAXR)) {
            o.d[axis] = UNK(c);
            for (uint32_t i = 0; i < c->n_out; i++) ir_infer_set_output(c, i, mk_shape(c, &o));
            return IR_OK;
        }
        if (n != c->n_out) return ir_infer_error(c, "split has %u sizes for %u outputs", n, c->n_out);
        int64_t total = 0;
        for (uint32_t i = 0; i < n; i++) total += sizes[i];
        if (cval(c, x.d[axis], &dim) && total != dim)
            return ir_infer_error(c, "split sizes sum to %lld, dim is %lld", (long long)total, (long long)dim);
        for (uint32_t i = 0; i < n; i++) {
            o.d[axis] = K(c, sizes[i]);
            ir_infer_set_output(c, i, mk_shape(c, &o));
        }
        return IR_OK;
    }
    uint32_t parts = c->n_out;
    if (cval(c, x.d[axis], &dim)) {
        int64_t chunk = (dim + parts - 1) / parts;
        for (uint32_t i = 0; i < parts; i++) {
            int64_t sz = dim - chunk * i;
            o.d[axis] = K(c, sz < chunk ? (sz < 0 ? 0 : sz) : chunk);
            ir_infer_set_output(c, i, mk_shape(c, &o));
        }
    } else {
        o.d[axis] = bin(c, IR_EXPR_DIV, x.d[axis], K(c, parts));
        for (uint32_t i = 0; i < parts; i++) ir_infer_set_output(c, i, mk_shape(c, &o));
    }
    return IR_OK;
}

IrStatus ir_infer_squeeze(IrInferCtx *c) {
    Shape x;
    int64_t axes[MAXR];
    uint32_t n = 0;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk_shape(c, &x));
        return IR_OK;
    }
    bool drop[MAXR] = {0};
    if (has_input(c, 1)) {
        if (!const_ints(c, 1, axes, &n, MAXR)) { /* axes at run time: their count gives the rank */
            int64_t na;
            Shape o = {.dt = x.dt, .rank = IR_RANK_UNKNOWN};
            if (const_len(c, 1, &na) && na <= (int64_t)x.rank) o.rank = x.rank - (uint32_t)na;
            for (uint32_t i = 0; o.rank != IR_RANK_UNKNOWN && i < o.rank; i++) o.d[i] = UNK(c);
            ir_infer_set_output(c, 0, o.rank == IR_RANK_UNKNOWN ? mk(c, x.dt, IR_RANK_UNKNOWN, NULL) : mk_shape(c, &o));
            return IR_OK;
        }
        for (uint32_t i = 0; i < n; i++) {
            int64_t a = axes[i], v;
            if (!ir_shape_axis_checked(&a, x.rank)) return ir_infer_error(c, "axis out of range");
            if (cval(c, x.d[a], &v) && v != 1) return ir_infer_error(c, "cannot squeeze dim %lld of size %lld", (long long)a, (long long)v);
            drop[a] = true;
        }
    } else {
        for (uint32_t i = 0; i < x.rank; i++) {
            int64_t v;
            if (!cval(c, x.d[i], &v)) {
                ir_infer_set_output(c, 0, mk(c, x.dt, IR_RANK_UNKNOWN, NULL));
                return IR_OK;
            }
            drop[i] = v == 1;
        }
    }
    Shape o;
    o.dt = x.dt;
    o.rank = 0;
    for (uint32_t i = 0; i < x.rank; i++)
        if (!drop[i]) o.d[o.rank++] = x.d[i];
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_unsqueeze(IrInferCtx *c) {
    Shape x;
    int64_t axes[MAXR];
    uint32_t n;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk_shape(c, &x));
        return IR_OK;
    }
    if (!const_ints(c, 1, axes, &n, MAXR)) { /* axes at run time: their count gives the rank */
        int64_t na;
        Shape o = {.dt = x.dt, .rank = IR_RANK_UNKNOWN};
        if (const_len(c, 1, &na) && na >= 0 && x.rank + na <= MAXR) o.rank = x.rank + (uint32_t)na;
        for (uint32_t i = 0; o.rank != IR_RANK_UNKNOWN && i < o.rank; i++) o.d[i] = UNK(c);
        ir_infer_set_output(c, 0, o.rank == IR_RANK_UNKNOWN ? mk(c, x.dt, IR_RANK_UNKNOWN, NULL) : mk_shape(c, &o));
        return IR_OK;
    }
    uint32_t r = x.rank + n;
    if (r > MAXR) return ir_infer_error(c, "result rank too large");
    bool ins[MAXR] = {0};
    for (uint32_t i = 0; i < n; i++) {
        int64_t a = axes[i];
        if (!ir_shape_axis_checked(&a, r)) return ir_infer_error(c, "axis %lld out of range", (long long)axes[i]);
        if (ins[a]) return ir_infer_error(c, "repeated axis %lld", (long long)a);
        ins[a] = true;
    }
    Shape o;
    o.dt = x.dt;
    o.rank = r;
    for (uint32_t i = 0, k = 0; i < r; i++) o.d[i] = ins[i] ? K(c, 1) : x.d[k++];
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_tile(IrInferCtx *c) {
    Shape x;
    IrExprId reps[MAXR];
    uint32_t n;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN || !ir_infer_input_values(c, 1, reps, &n, MAXR)) {
        Shape r;
        if (x.rank != IR_RANK_UNKNOWN && shape_of(c, 1, &r) && r.rank == 1) /* one repeat per dim */
            ir_infer_require_equal(c, r.d[0], K(c, x.rank));
        for (uint32_t i = 0; x.rank != IR_RANK_UNKNOWN && i < x.rank; i++) x.d[i] = UNK(c);
        ir_infer_set_output(c, 0, mk_shape(c, &x));
        return IR_OK;
    }
    if (n != x.rank) return ir_infer_error(c, "repeats has %u entries for rank %u", n, x.rank);
    for (uint32_t i = 0; i < n; i++) x.d[i] = bin(c, IR_EXPR_MUL, x.d[i], reps[i]);
    ir_infer_set_output(c, 0, mk_shape(c, &x));
    return IR_OK;
}

IrStatus ir_infer_transpose(IrInferCtx *c) {
    Shape x;
    int64_t perm[MAXR];
    uint32_t n;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk_shape(c, &x));
        return IR_OK;
    }
    if (!attr_ints(c, "perm", perm, &n, MAXR)) {
        n = x.rank;
        for (uint32_t i = 0; i < n; i++) perm[i] = n - 1 - i;
    }
    if (n != x.rank) return ir_infer_error(c, "perm has %u entries for rank %u", n, x.rank);
    bool seen[MAXR] = {0};
    Shape o;
    o.dt = x.dt;
    o.rank = n;
    for (uint32_t i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= (int64_t)n || seen[perm[i]]) return ir_infer_error(c, "perm is not a permutation");
        seen[perm[i]] = true;
        o.d[i] = x.d[perm[i]];
    }
    ir_infer_set_output(c, 0, mk_shape(c, &o));
    return IR_OK;
}

IrStatus ir_infer_topk(IrInferCtx *c) {
    Shape x;
    int64_t k[1];
    uint32_t n;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.rank != IR_RANK_UNKNOWN) {
        int64_t axis = attr_int(c, "axis");
        if (!ir_shape_axis_checked(&axis, x.rank)) return ir_infer_error(c, "axis out of range");
        x.d[axis] = const_ints(c, 1, k, &n, 1) && n == 1 ? K(c, k[0]) : UNK(c);
    }
    ir_infer_set_output(c, 0, mk_shape(c, &x));
    x.dt = IR_DTYPE_I64;
    ir_infer_set_output(c, 1, mk_shape(c, &x));
    return IR_OK;
}

IrStatus ir_infer_nonzero(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    IrExprId d[2] = {x.rank == IR_RANK_UNKNOWN ? UNK(c) : K(c, x.rank), UNK(c)};
    ir_infer_set_output(c, 0, mk(c, IR_DTYPE_I64, 2, d));
    return IR_OK;
}

/* ---- shapes and constants ------------------------------------------------------------------ */

IrStatus ir_infer_shape(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x) || x.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, mk(c, IR_DTYPE_I64, 1, (IrExprId[]){UNK(c)}));
        return IR_OK;
    }
    bool found;
    int64_t start = ir_node_attr_int(c->g, c->n, "start", NULL);
    int64_t end = ir_node_attr_int(c->g, c->n, "end", &found);
    if (!found) end = x.rank;
    start = clamp64(ir_shape_axis(start, x.rank), 0, x.rank);
    end = clamp64(ir_shape_axis(end, x.rank), 0, x.rank);
    IrExprId d = K(c, end > start ? end - start : 0);
    ir_infer_set_output(c, 0, mk(c, IR_DTYPE_I64, 1, &d));
    return IR_OK;
}

IrStatus ir_infer_size(IrInferCtx *c) {
    ir_infer_set_output(c, 0, mk(c, IR_DTYPE_I64, 0, NULL));
    return IR_OK;
}

IrStatus ir_infer_constant(IrInferCtx *c) {
    IrGraph *g = c->g;
    IrAttrValue a;
    uint32_t set = 0;
    for (uint32_t i = 0; i < ir_node_num_attrs(g, c->n); i++) set++;
    if (set != 1) return ir_infer_error(c, "exactly one value attribute must be set (found %u)", set);
    a = ir_node_attr_at(g, c->n, 0);
    const char *nm = ir_str(g, ir_node_attr_name(g, c->n, 0));
    if (a.kind == IR_ATTR_TENSOR && strcmp(nm, "value") == 0) {
        ir_infer_set_output(c, 0, ir_const_type(g, a.tensor));
    } else if (strcmp(nm, "value_float") == 0) {
        ir_infer_set_output(c, 0, mk(c, IR_DTYPE_F32, 0, NULL));
    } else if (strcmp(nm, "value_int") == 0) {
        ir_infer_set_output(c, 0, mk(c, IR_DTYPE_I64, 0, NULL));
    } else if (strcmp(nm, "value_floats") == 0 || strcmp(nm, "value_ints") == 0) {
        IrExprId d = K(c, a.count);
        ir_infer_set_output(c, 0, mk(c, a.kind == IR_ATTR_INTS ? IR_DTYPE_I64 : IR_DTYPE_F32, 1, &d));
    } else {
        return ir_infer_error(c, "attribute '%s' is not supported (strings and sparse tensors are not)", nm);
    }
    return IR_OK;
}

IrStatus ir_infer_constant_of_shape(IrInferCtx *c) {
    IrAttrValue a;
    IrDType dt = IR_DTYPE_F32;
    if (ir_node_attr(c->g, c->n, "value", &a) && a.kind == IR_ATTR_TENSOR) {
        IrTypeId vt = ir_const_type(c->g, a.tensor);
        int64_t numel;
        if (!ir_type_numel(c->g, vt, &numel) || numel != 1)
            return ir_infer_error(c, "value must hold exactly one element");
        dt = ir_type_dtype(c->g, vt);
    }
    IrExprId dims[MAXR];
    uint32_t n;
    if (ir_infer_input_values(c, 0, dims, &n, MAXR)) {
        Shape o;
        o.dt = dt;
        o.rank = n;
        for (uint32_t i = 0; i < n; i++) {
            int64_t v;
            if (cval(c, dims[i], &v) && v < 0) return ir_infer_error(c, "negative dim %lld", (long long)v);
            o.d[i] = dims[i];
        }
        ir_infer_set_output(c, 0, mk_shape(c, &o));
        return IR_OK;
    }
    Shape s;
    int64_t len;
    if (shape_of(c, 0, &s) && s.rank == 1 && cval(c, s.d[0], &len) && len <= MAXR) {
        Shape o;
        o.dt = dt;
        o.rank = (uint32_t)len;
        for (uint32_t i = 0; i < o.rank; i++) o.d[i] = UNK(c);
        ir_infer_set_output(c, 0, mk_shape(c, &o));
        return IR_OK;
    }
    ir_infer_set_output(c, 0, mk(c, dt, IR_RANK_UNKNOWN, NULL));
    return IR_OK;
}

IrStatus ir_infer_eye_like(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    bool found;
    int64_t dt = ir_node_attr_int(c->g, c->n, "dtype", &found);
    if (found) x.dt = (IrDType)dt;
    if (x.rank != IR_RANK_UNKNOWN && x.rank != 2) return ir_infer_error(c, "input must be rank 2");
    ir_infer_set_output(c, 0, mk_shape(c, &x));
    return IR_OK;
}

IrStatus ir_infer_range(IrInferCtx *c) {
    IrDType dt;
    if (check_same_dtype(c, 0, 3, &dt)) return IR_EVERIFY;
    IrTypeId ts, tl, td;
    const void *s = ir_infer_input_const(c, 0, &ts), *l = ir_infer_input_const(c, 1, &tl),
               *d = ir_infer_input_const(c, 2, &td);
    IrExprId n = UNK(c);
    if (s && l && d) {
        double start = ir_elem_get_f64(dt, s, 0), limit = ir_elem_get_f64(dt, l, 0),
               delta = ir_elem_get_f64(dt, d, 0);
        if (delta == 0) return ir_infer_error(c, "delta is zero");
        double cnt = ceil((limit - start) / delta);
        n = K(c, cnt > 0 ? (int64_t)cnt : 0);
    } else if (ir_dtype_is_int(dt)) { /* integer start and delta known, limit a symbolic value
                                       * (arange(S) of an exported model): (limit - start) / delta
                                       * rounded up, assuming limit >= start */
        IrExprId sv, lv, dv;
        uint32_t k1, k2, k3;
        int64_t st, de;
        if (ir_infer_input_values(c, 0, &sv, &k1, 1) && ir_infer_input_values(c, 1, &lv, &k2, 1) &&
            ir_infer_input_values(c, 2, &dv, &k3, 1) && k1 == 1 && k2 == 1 && k3 == 1 && cval(c, sv, &st) &&
            cval(c, dv, &de) && de > 0) {
            IrExprId span = ir_expr_binary(c->g, IR_EXPR_SUB, lv, K(c, st));
            n = de == 1 ? span : ir_expr_binary(c->g, IR_EXPR_DIV, ir_expr_binary(c->g, IR_EXPR_ADD, span, K(c, de - 1)), K(c, de));
        }
    }
    ir_infer_set_output(c, 0, mk(c, dt, 1, &n));
    return IR_OK;
}

/* ---- quantization -------------------------------------------------------------------------- */

IrStatus ir_infer_quantize_linear(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    IrDType zp = ir_type_dtype(c->g, ir_infer_input_type(c, 2));
    x.dt = zp != IR_DTYPE_NONE ? zp : IR_DTYPE_U8;
    ir_infer_set_output(c, 0, mk_shape(c, &x));
    return IR_OK;
}

IrStatus ir_infer_dequantize_linear(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    IrDType st = ir_type_dtype(c->g, ir_infer_input_type(c, 1));
    x.dt = st != IR_DTYPE_NONE ? st : IR_DTYPE_F32;
    ir_infer_set_output(c, 0, mk_shape(c, &x));
    return IR_OK;
}

IrStatus ir_infer_quantize_fp8(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    const char *fmt = ir_node_attr_string(c->g, c->n, "format", NULL);
    if (!fmt || (strcmp(fmt, "e4m3fn") != 0 && strcmp(fmt, "e5m2") != 0))
        return ir_infer_error(c, "format must be \"e4m3fn\" or \"e5m2\"");
    if (!ir_dtype_is_float(x.dt)) return ir_infer_error(c, "input must be floating point");
    x.dt = strcmp(fmt, "e4m3fn") == 0 ? IR_DTYPE_F8E4M3FN : IR_DTYPE_F8E5M2;
    ir_infer_set_output(c, 0, mk_shape(c, &x));
    return IR_OK;
}

IrStatus ir_infer_dequantize_fp8(IrInferCtx *c) {
    Shape x;
    if (!shape_of(c, 0, &x)) return IR_OK;
    if (x.dt != IR_DTYPE_F8E4M3FN && x.dt != IR_DTYPE_F8E5M2)
        return ir_infer_error(c, "input must be f8e4m3fn or f8e5m2, got %s", ir_dtype_name(x.dt));
    x.dt = (IrDType)attr_int(c, "to");
    ir_infer_set_output(c, 0, mk_shape(c, &x));
    return IR_OK;
}

/* ---- regions ------------------------------------------------------------------------------- */

static IrTypeId region_out_type(IrInferCtx *c, IrRegionId r, uint32_t i) {
    if (i >= ir_region_num_outputs(c->g, r)) return 0;
    IrValueId v = ir_region_output(c->g, r, i);
    return v ? ir_value_type(c->g, v) : 0;
}

static const char *kind_word(const IrGraph *g, IrTypeId t) {
    IrTypeKind k = ir_type_kind(g, t);
    return k == IR_TYPE_SEQ ? "sequence" : k == IR_TYPE_OPT ? "optional" : "tensor";
}

IrStatus ir_infer_if(IrInferCtx *c) {
    IrGraph *g = c->g;
    IrDType cd = ir_type_dtype(g, ir_infer_input_type(c, 0));
    if (cd != IR_DTYPE_NONE && cd != IR_DTYPE_BOOL) return ir_infer_error(c, "condition must be bool, got %s", ir_dtype_name(cd));
    IrRegionId t = ir_node_region_at(g, c->n, 0), e = ir_node_region_at(g, c->n, 1);
    IrRegionId br[2] = {t, e};
    for (int k = 0; k < 2; k++) {
        if (ir_region_num_args(g, br[k]))
            return ir_infer_error(c, "%s takes no arguments", k ? "else_branch" : "then_branch");
        if (ir_region_num_outputs(g, br[k]) != c->n_out)
            return ir_infer_error(c, "%s returns %u values for %u results", k ? "else_branch" : "then_branch",
                                  ir_region_num_outputs(g, br[k]), c->n_out);
    }
    for (uint32_t i = 0; i < c->n_out; i++) {
        IrTypeId a = region_out_type(c, t, i), b = region_out_type(c, e, i);
        if (a == b) {
            ir_infer_set_output(c, i, a);
        } else if (a && b && ir_type_kind(g, a) != ir_type_kind(g, b)) {
            return ir_infer_error(c, "branch outputs %u differ in kind (%s and %s)", i, kind_word(g, a), kind_word(g, b));
        } else if (a && b && ir_type_elem_dtype(g, a) != ir_type_elem_dtype(g, b) && ir_type_elem_dtype(g, a) &&
                   ir_type_elem_dtype(g, b)) {
            return ir_infer_error(c, "branch outputs %u have dtypes %s and %s", i,
                                  ir_dtype_name(ir_type_elem_dtype(g, a)), ir_dtype_name(ir_type_elem_dtype(g, b)));
        } else if (a && b) {
            /* dims that differ become `?`, ranks that differ unranked (through seq/opt too) */
            ir_infer_set_output(c, i, ir_type_join(g, a, b));
        }
    }
    return IR_OK;
}

IrStatus ir_infer_loop(IrInferCtx *c) {
    /* results: N loop-carried values (types of the initial values), then K scan outputs
     * (body output types with a leading trip-count dim). */
    IrGraph *g = c->g;
    uint32_t n_carried = ir_infer_num_inputs(c) - 2;
    IrRegionId body = ir_node_region_at(g, c->n, 0);
    if (c->n_out < n_carried)
        return ir_infer_error(c, "%u loop-carried operands but only %u results", n_carried, c->n_out);
    if (ir_region_num_args(g, body) != 2 + n_carried)
        return ir_infer_error(c, "body takes %u arguments, expected %u (iteration, condition, %u carried)",
                              ir_region_num_args(g, body), 2 + n_carried, n_carried);
    if (ir_region_num_outputs(g, body) != 1 + c->n_out)
        return ir_infer_error(c, "body returns %u values, expected %u (condition, carried, scan outputs)",
                              ir_region_num_outputs(g, body), 1 + c->n_out);
    for (uint32_t i = 0; i < c->n_out; i++) {
        if (i < n_carried) {
            IrTypeId init = ir_infer_input_type(c, 2 + i), out = region_out_type(c, body, 1 + i);
            if (ir_type_is_container(g, init) || ir_type_is_container(g, out)) {
                /* seq/opt carried values: the join when the kinds agree; an optional initial
                 * value that the body replaces by its content (ONNX loop16_seq_none) stays as
                 * declared */
                ir_infer_set_output(c, i, init && out ? ir_type_join(g, init, out) : 0);
                continue;
            }
            ir_infer_set_output(c, i, init == out ? init : (init ? init : out));
            if (init && out && init != out && ir_type_rank(g, init) != ir_type_rank(g, out))
                ir_infer_set_output(c, i, mk(c, ir_type_dtype(g, init), IR_RANK_UNKNOWN, NULL));
        } else {
            IrTypeId t = region_out_type(c, body, 1 + i);
            if (!t) continue;
            if (ir_type_is_container(g, t)) return ir_infer_error(c, "scan output %u must be a tensor", i - n_carried);
            uint32_t r = ir_type_rank(g, t);
            if (r == IR_RANK_UNKNOWN || r + 1 > MAXR) {
                ir_infer_set_output(c, i, mk(c, ir_type_dtype(g, t), IR_RANK_UNKNOWN, NULL));
                continue;
            }
            IrExprId d[MAXR];
            int64_t trip[1];
            uint32_t nt;
            d[0] = has_input(c, 0) && const_ints(c, 0, trip, &nt, 1) && nt == 1 ? UNK(c) : UNK(c);
            memcpy(d + 1, ir_type_dims(g, t), r * sizeof(IrExprId));
            ir_infer_set_output(c, i, mk(c, ir_type_dtype(g, t), r + 1, d));
        }
    }
    return IR_OK;
}

IrStatus ir_infer_fused(IrInferCtx *c) {
    IrRegionId body = ir_node_region_at(c->g, c->n, 0);
    if (ir_region_num_outputs(c->g, body) != c->n_out)
        return ir_infer_error(c, "body returns %u values for %u results", ir_region_num_outputs(c->g, body), c->n_out);
    if (ir_region_num_args(c->g, body) != ir_infer_num_inputs(c))
        return ir_infer_error(c, "body takes %u arguments for %u operands", ir_region_num_args(c->g, body), ir_infer_num_inputs(c));
    for (uint32_t i = 0; i < c->n_out; i++) ir_infer_set_output(c, i, region_out_type(c, body, i));
    return IR_OK;
}

/* fuse: forms fused groups as `irtool.fused` region ops, driven by the op table's classes.
 *
 * Per region (nested regions of If/Loop/Scan are processed on their own; nodes with regions are
 * never members): first the recognised patterns (attention, decomposed LayerNorm, GELU), then
 * contraction epilogues (bias / activation / residual after Conv, Gemm, MatMul), then row
 * reductions with their elementwise producers and elementwise DAGs. BatchNormalization after
 * Conv is folded into the Conv's weights before any of that (fuse_patterns.c).
 *
 * A group never duplicates a node and is convex (no path from a member through a non-member
 * back to a member). Each group is built as soon as it is chosen, so later decisions see real
 * nodes and groups can never form a cycle between them. The fused node sits where the last
 * member was; non-members between the members that depend on a member move after it. Its
 * operands are every outside value the members use, graph constants included, so a body refers
 * only to its arguments (self-contained for backends). Its results are the member results used
 * outside; they take the members' names (so graph outputs keep theirs) and the inner values are
 * renamed `<name>.inner`. Outside uses are rewritten in one forward walk at the end.
 */
#include "passes/fuse_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[6] = {"elementwise", "reduction", "epilogue", "attention", "layernorm", "gelu"};
static const char *const kind_stats[6] = {"groups-elementwise", "groups-reduction", "groups-epilogue",
                                          "groups-attention",   "groups-layernorm", "groups-gelu"};

/* ---- small helpers ---------------------------------------------------------------------------- */

static void fail(Fuse *f, IrStatus st) {
    if (!f->status) f->status = st;
}

bool fuse_vec_push(Fuse *f, FuseVec *v, IrNodeId n) {
    if (v->n == v->cap) {
        uint32_t nc = v->cap ? v->cap * 2 : 64;
        IrNodeId *na = realloc(v->a, nc * sizeof *na);
        if (!na) {
            fail(f, IR_ENOMEM);
            return false;
        }
        v->a = na;
        v->cap = nc;
    }
    v->a[v->n++] = n;
    return true;
}

IrValueId fuse_resolve(const Fuse *f, IrValueId v) {
    while (v && v <= f->nval && f->repl[v]) v = f->repl[v];
    return v;
}

IrValueId fuse_operand(const Fuse *f, IrNodeId n, uint32_t i) { return fuse_resolve(f, ir_node_operand(f->g, n, i)); }

uint32_t fuse_uses(const Fuse *f, IrValueId v) { return v && v <= f->nval ? f->uses[v] : UINT32_MAX; }

bool fuse_is_free(const Fuse *f, IrNodeId n) {
    const IrGraph *g = f->g;
    return n && n <= f->ncap && ir_node_alive(g, n) && ir_node_region(g, n) == f->region && !f->rep[n] &&
           ir_node_op(g, n) != IR_OP_FUSED && ir_node_num_regions(g, n) == 0;
}

IrNodeId fuse_free_def(const Fuse *f, IrValueId v) {
    v = fuse_resolve(f, v);
    if (!v || ir_value_kind(f->g, v) != IR_VALUE_RESULT) return 0;
    IrNodeId d = ir_value_def_node(f->g, v);
    return fuse_is_free(f, d) ? d : 0;
}

static IrNodeId rep_of(const Fuse *f, IrNodeId n) { return n <= f->ncap && f->rep[n] ? f->rep[n] : n; }

static void raw_users(Fuse *f, IrNodeId n, IrNodeId self, FuseVec *out) {
    for (uint32_t i = 0; i < f->ucnt[n]; i++) {
        IrNodeId u = rep_of(f, f->edges.a[f->uoff[n] + i]);
        if (u != self) fuse_vec_push(f, out, u);
    }
}

void fuse_users(Fuse *f, IrNodeId n, FuseVec *out) {
    if (!n || n > f->ncap || ir_node_region(f->g, n) != f->region) return;
    if (f->flags[n] & FL_NEWFUSED) {
        for (uint32_t i = 0; i < f->gcount[n]; i++) raw_users(f, f->gmem.a[f->gfirst[n] + i], n, out);
    } else {
        raw_users(f, n, n, out);
    }
}

IrNodeId fuse_only_user(Fuse *f, IrValueId v) {
    if (fuse_uses(f, v) != 1 || ir_value_kind(f->g, v) != IR_VALUE_RESULT) return 0;
    f->tmp.n = 0;
    fuse_users(f, ir_value_def_node(f->g, v), &f->tmp);
    for (uint32_t i = 0; i < f->tmp.n; i++) {
        IrNodeId u = f->tmp.a[i];
        for (uint32_t k = 0; k < ir_node_num_operands(f->g, u); k++)
            if (fuse_operand(f, u, k) == v) return u;
    }
    return 0;
}

/* ---- options ---------------------------------------------------------------------------------- */

static bool parse_kinds(const char *s, unsigned *out) {
    static const struct {
        const char *name;
        unsigned bits;
    } tab[] = {{"elementwise", FUSE_ELEMENTWISE}, {"reduction", FUSE_REDUCTION}, {"epilogue", FUSE_EPILOGUE},
               {"patterns", FUSE_PATTERNS},       {"attention", FUSE_ATTENTION}, {"layernorm", FUSE_LAYERNORM},
               {"gelu", FUSE_GELU},               {"bn", FUSE_BN},               {"convsum", FUSE_CONVSUM},
               {"all", FUSE_ALL},                 {"attention-kt", FUSE_ATTENTION_KT}};
    unsigned bits = 0;
    while (*s) {
        const char *e = strchr(s, '+');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        bool found = false;
        for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
            if (strlen(tab[i].name) == n && memcmp(tab[i].name, s, n) == 0) bits |= tab[i].bits, found = true;
        if (!found) return false;
        s += n;
        if (*s == '+') s++;
    }
    *out = bits;
    return true;
}

/* ---- the use index of a region ------------------------------------------------------------------ */

static bool static_value(const Fuse *f, IrValueId v) {
    if (!v) return true;
    IrValueKind k = ir_value_kind(f->g, v);
    if (k == IR_VALUE_CONST) return true;
    if (k != IR_VALUE_RESULT) return false;
    IrNodeId d = ir_value_def_node(f->g, v);
    return d <= f->ncap && (f->flags[d] & FL_STATIC);
}

/* Shape arithmetic and computations on constants only: left alone (const-fold's business, and
 * pointless to fuse). */
static bool static_node(const Fuse *f, IrNodeId n) {
    IrOp op = ir_node_op(f->g, n);
    if (op == IR_OP_CONSTANT || op == IR_OP_SHAPE || op == IR_OP_SIZE) return true;
    uint32_t no = ir_node_num_operands(f->g, n);
    if (!no || ir_node_num_regions(f->g, n)) return false;
    for (uint32_t i = 0; i < no; i++)
        if (!static_value(f, ir_node_operand(f->g, n, i))) return false;
    return true;
}

typedef struct EdgeList {
    IrNodeId *src, *dst;
    uint32_t n, cap;
} EdgeList;

static void edge_add(Fuse *f, EdgeList *e, IrValueId v, IrNodeId user) {
    if (!v || ir_value_kind(f->g, v) != IR_VALUE_RESULT) return;
    IrNodeId d = ir_value_def_node(f->g, v);
    if (!d || d > f->ncap || ir_node_region(f->g, d) != f->region || d == user) return;
    if (e->n == e->cap) {
        uint32_t nc = e->cap ? e->cap * 2 : 256;
        IrNodeId *ns = realloc(e->src, nc * sizeof *ns);
        if (ns) e->src = ns;
        IrNodeId *nd = ns ? realloc(e->dst, nc * sizeof *nd) : NULL;
        if (!nd) {
            fail(f, IR_ENOMEM);
            return;
        }
        e->dst = nd;
        e->cap = nc;
    }
    e->src[e->n] = d;
    e->dst[e->n++] = user;
}

/* Uses inside the regions of `user` count as uses by `user`. */
static void scan_nested(Fuse *f, EdgeList *e, IrRegionId r, IrNodeId user) {
    for (IrNodeId x = ir_region_first(f->g, r); x; x = ir_node_next(f->g, x)) {
        for (uint32_t i = 0; i < ir_node_num_operands(f->g, x); i++) edge_add(f, e, ir_node_operand(f->g, x, i), user);
        for (uint32_t k = 0; k < ir_node_num_regions(f->g, x); k++) scan_nested(f, e, ir_node_region_at(f->g, x, k), user);
    }
    for (uint32_t i = 0; i < ir_region_num_outputs(f->g, r); i++) edge_add(f, e, ir_region_output(f->g, r, i), user);
}

static void index_region(Fuse *f, IrRegionId r) {
    IrGraph *g = f->g;
    EdgeList e = {0};
    f->region = r;
    f->order.n = 0;
    uint32_t p = 0;
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n)) {
        if (n > f->ncap) continue; /* cannot happen: nodes created later are not indexed */
        f->pos[n] = ++p;
        f->ucnt[n] = 0;
        if (static_node(f, n)) f->flags[n] |= FL_STATIC;
        fuse_vec_push(f, &f->order, n);
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) edge_add(f, &e, ir_node_operand(g, n, i), n);
        for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++) scan_nested(f, &e, ir_node_region_at(g, n, k), n);
    }
    for (uint32_t i = 0; i < e.n; i++) f->ucnt[e.src[i]]++;
    uint32_t off = 0;
    for (uint32_t i = 0; i < f->order.n; i++) {
        IrNodeId n = f->order.a[i];
        f->uoff[n] = off;
        off += f->ucnt[n];
        f->ucnt[n] = 0;
    }
    f->edges.n = 0;
    for (uint32_t i = 0; i < off; i++) fuse_vec_push(f, &f->edges, 0);
    for (uint32_t i = 0; i < e.n && !f->status; i++) {
        IrNodeId d = e.src[i];
        f->edges.a[f->uoff[d] + f->ucnt[d]++] = e.dst[i];
    }
    free(e.src);
    free(e.dst);
}

/* ---- convexity ---------------------------------------------------------------------------------- */

static void next_stamp(uint32_t *stamp, uint32_t *marks, uint32_t n) {
    if (++*stamp == 0) {
        memset(marks, 0, (n + 1) * sizeof *marks);
        *stamp = 1;
    }
}

/* No path from a member through non-members back to a member. Nodes are in program order, so a
 * node after the last member cannot lead back: the search stays inside the group's span. */
static bool convex(Fuse *f, const IrNodeId *mem, uint32_t k) {
    next_stamp(&f->stamp, f->mark, f->ncap);
    next_stamp(&f->stamp2, f->mark2, f->ncap);
    uint32_t maxpos = 0;
    for (uint32_t i = 0; i < k; i++) {
        f->mark[mem[i]] = f->stamp;
        if (f->pos[mem[i]] > maxpos) maxpos = f->pos[mem[i]];
    }
    f->stack.n = 0;
    for (uint32_t i = 0; i < k; i++) {
        f->tmp.n = 0;
        fuse_users(f, mem[i], &f->tmp);
        for (uint32_t j = 0; j < f->tmp.n; j++)
            if (f->mark[f->tmp.a[j]] != f->stamp) fuse_vec_push(f, &f->stack, f->tmp.a[j]);
    }
    while (f->stack.n && !f->status) {
        IrNodeId x = f->stack.a[--f->stack.n];
        if (f->mark[x] == f->stamp) return false; /* back at a member through a non-member */
        if (f->mark2[x] == f->stamp2 || f->pos[x] >= maxpos) continue;
        f->mark2[x] = f->stamp2;
        fuse_users(f, x, &f->stack);
    }
    return !f->status;
}

/* ---- building a group -------------------------------------------------------------------------- */

/* "<base><suffix>", or with a number appended, that names no value yet (malloc'd). */
static char *unique_name(const IrGraph *g, const char *base, const char *suffix) {
    size_t n = strlen(base) + strlen(suffix) + 16;
    char *s = malloc(n);
    if (!s) return NULL;
    snprintf(s, n, "%s%s", base, suffix);
    for (uint32_t k = 2; ir_value_find(g, s, strlen(s)); k++) snprintf(s, n, "%s%s%u", base, suffix, k);
    return s;
}

static int64_t type_bytes(const Fuse *f, IrTypeId t, bool *sized) {
    const IrGraph *g = f->g;
    uint32_t rank = ir_type_rank(g, t);
    IrDType dt = ir_type_dtype(g, t);
    *sized = false;
    if (!t || rank == IR_RANK_UNKNOWN || dt == IR_DTYPE_NONE) return 0;
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; i++) {
        int64_t d;
        if (!ir_expr_eval(g, ir_type_dims(g, t)[i], f->sym_hi, &d) || d < 0) return 0;
        n *= d;
    }
    *sized = true;
    return n * (int64_t)ir_dtype_size(dt);
}

static int kind_index(const char *kind) {
    for (int i = 0; i < 6; i++)
        if (strcmp(kind_names[i], kind) == 0) return i;
    return 0;
}

static void sort_by_pos(const Fuse *f, IrNodeId *m, uint32_t k) {
    for (uint32_t i = 1; i < k; i++) {
        IrNodeId x = m[i];
        uint32_t j = i;
        while (j > 0 && f->pos[m[j - 1]] > f->pos[x]) m[j] = m[j - 1], j--;
        m[j] = x;
    }
}

static bool is_member(const IrNodeId *m, uint32_t k, IrNodeId n) {
    for (uint32_t i = 0; i < k; i++)
        if (m[i] == n) return true;
    return false;
}

IrStrId fuse_node_name_id(IrGraph *g, IrNodeId n) {
    const char *name = ir_node_name(g, n);
    size_t len = strlen(name);
    if (!len) return 0;
    char *copy = malloc(len + 1);
    if (!copy) return 0;
    memcpy(copy, name, len + 1);
    IrStrId s = ir_str_intern(g, copy, len);
    free(copy);
    return s;
}

static void set_provenance(Fuse *f, IrNodeId fn, const IrNodeId *m, uint32_t k) {
    IrGraph *g = f->g;
    uint32_t cap = 16, n = 0;
    IrStrId *ids = malloc(cap * sizeof *ids);
    for (uint32_t i = 0; ids && i < k; i++) {
        uint32_t np = ir_node_num_provenance(g, m[i]);
        for (uint32_t j = 0; ids && j < (np ? np : 1); j++) {
            IrStrId s = np ? ir_node_provenance(g, m[i], j) : fuse_node_name_id(g, m[i]);
            bool dup = !s;
            for (uint32_t q = 0; !dup && q < n; q++) dup = ids[q] == s;
            if (dup) continue;
            if (n == cap) {
                IrStrId *ni = realloc(ids, 2 * cap * sizeof *ni);
                if (!ni) break;
                ids = ni, cap *= 2;
            }
            ids[n++] = s;
        }
    }
    if (!ids) {
        fail(f, IR_ENOMEM);
        return;
    }
    if (n) ir_node_set_provenance(g, fn, n, ids);
    free(ids);
}

/* Positions of the span are reused for its new order: fewer nodes than before (the members
 * collapse into one), so the old numbers suffice and nothing outside the span moves. */
static void renumber_span(Fuse *f, const uint32_t *old_pos, uint32_t n_old, IrNodeId first, IrNodeId stop) {
    uint32_t i = 0;
    for (IrNodeId x = first; x && x != stop && i < n_old; x = ir_node_next(f->g, x)) f->pos[x] = old_pos[i++];
}

typedef struct Build {
    IrValueId *ops, *outs; /* operands (outside values) and results (exported member values) */
    uint32_t n_ops, n_outs;
    char **out_names;
    FuseVec moved;      /* non-members inside the span that depend on a member */
    uint32_t *span_pos; /* old positions of the span, reused in its new order */
    uint32_t n_span;
    int64_t saved, unsized;
} Build;

static void build_free(Build *b) {
    for (uint32_t i = 0; b->out_names && i < b->n_outs; i++) free(b->out_names[i]);
    free(b->ops), free(b->outs), free(b->out_names), free(b->moved.a), free(b->span_pos);
}

/* Operands: the outside values the members use, in first-use order. Results: member results
 * with a use outside the group; the others are intermediates that stay in the group. */
static bool collect_io(Fuse *f, const IrNodeId *m, uint32_t k, Build *b) {
    IrGraph *g = f->g;
    uint32_t cap_ops = 1, cap_outs = 1;
    for (uint32_t i = 0; i < k; i++) {
        cap_ops += ir_node_num_operands(g, m[i]);
        cap_outs += ir_node_num_results(g, m[i]);
        for (uint32_t j = 0; j < ir_node_num_operands(g, m[i]); j++) {
            IrValueId v = ir_node_operand(g, m[i], j), w = fuse_resolve(f, v);
            if (w != v) ir_node_set_operand(g, m[i], j, w);
        }
    }
    b->ops = malloc(cap_ops * sizeof *b->ops);
    b->outs = malloc(cap_outs * sizeof *b->outs);
    b->out_names = calloc(cap_outs, sizeof *b->out_names);
    if (!b->ops || !b->outs || !b->out_names) return false;
    for (uint32_t i = 0; i < k; i++)
        for (uint32_t j = 0; j < ir_node_num_operands(g, m[i]); j++) {
            IrValueId v = ir_node_operand(g, m[i], j);
            if (!v || (ir_value_kind(g, v) == IR_VALUE_RESULT && is_member(m, k, ir_value_def_node(g, v)))) continue;
            bool seen = false;
            for (uint32_t q = 0; !seen && q < b->n_ops; q++) seen = b->ops[q] == v;
            if (!seen) b->ops[b->n_ops++] = v;
        }
    for (uint32_t i = 0; i < k; i++)
        for (uint32_t j = 0; j < ir_node_num_results(g, m[i]); j++) {
            IrValueId v = ir_node_result(g, m[i], j);
            if (!v) continue;
            uint32_t inside = 0;
            for (uint32_t a = 0; a < k; a++)
                for (uint32_t q = 0; q < ir_node_num_operands(g, m[a]); q++) inside += ir_node_operand(g, m[a], q) == v;
            if (fuse_uses(f, v) > inside) {
                b->outs[b->n_outs++] = v;
            } else if (inside) {
                bool sized;
                int64_t bytes = type_bytes(f, ir_value_type(g, v), &sized);
                if (sized) b->saved += bytes;
                else b->unsized++;
            }
        }
    return true;
}

/* The nodes between the first and the last member that depend on a member: they move after
 * the fused node (convexity guarantees no member depends on them). */
static bool collect_moved(Fuse *f, const IrNodeId *m, uint32_t k, IrNodeId next, Build *b) {
    IrGraph *g = f->g;
    b->span_pos = malloc((f->pos[m[k - 1]] - f->pos[m[0]] + 1) * sizeof *b->span_pos);
    if (!b->span_pos) return false;
    next_stamp(&f->stamp, f->mark, f->ncap);
    for (uint32_t i = 0; i < k; i++) f->mark[m[i]] = f->stamp;
    next_stamp(&f->stamp2, f->mark2, f->ncap);
    for (IrNodeId x = m[0]; x && x != next; x = ir_node_next(g, x)) {
        b->span_pos[b->n_span++] = f->pos[x];
        bool member = f->mark[x] == f->stamp;
        if (!member && f->mark2[x] != f->stamp2) continue;
        if (!member && !fuse_vec_push(f, &b->moved, x)) return false;
        f->tmp.n = 0;
        fuse_users(f, x, &f->tmp);
        for (uint32_t i = 0; i < f->tmp.n; i++) f->mark2[f->tmp.a[i]] = f->stamp2;
    }
    return true;
}

/* Creates the fused node before `next` (0 = at the end), its results named as the exported
 * values were (those become `<name>.inner`), and its body arguments. */
static IrNodeId create_fused(Fuse *f, IrNodeId next, Build *b, IrValueId *args) {
    IrGraph *g = f->g;
    IrTypeId *types = malloc((b->n_outs + 1) * sizeof *types);
    if (!types) return 0;
    IrStatus st = IR_OK;
    for (uint32_t i = 0; i < b->n_outs && !st; i++) {
        IrValueId v = b->outs[i];
        types[i] = ir_value_type(g, v);
        b->out_names[i] = strdup(ir_value_name(g, v));
        char *inner = b->out_names[i] ? unique_name(g, b->out_names[i], ".inner") : NULL;
        st = inner ? ir_value_rename(g, v, inner) : IR_ENOMEM;
        free(inner);
    }
    const char *const *names = (const char *const *)b->out_names;
    IrNodeId fn = st ? 0
                  : next ? ir_node_create_before(g, next, IR_OP_FUSED, b->n_ops, b->ops, b->n_outs, names, types)
                         : ir_node_create(g, f->region, IR_OP_FUSED, b->n_ops, b->ops, b->n_outs, names, types);
    free(types);
    if (!fn) return 0;
    IrRegionId body = ir_node_region_at(g, fn, 0);
    for (uint32_t i = 0; i < b->n_ops; i++) {
        char *an = unique_name(g, ir_value_name(g, b->ops[i]), ".arg");
        args[i] = an ? ir_region_add_arg(g, body, an, ir_value_type(g, b->ops[i])) : 0;
        free(an);
        if (!args[i]) return 0;
    }
    return fn;
}

static void describe_fused(Fuse *f, IrNodeId fn, const IrNodeId *m, uint32_t k, const char *kind, IrNodeId anchor) {
    IrGraph *g = f->g;
    IrAttrValue kv = {.kind = IR_ATTR_STRING, .s = ir_str_intern_cstr(g, kind)};
    ir_node_set_attr(g, fn, "kind", &kv);
    const char *an = ir_node_name(g, anchor);
    char *gname = malloc(strlen(an) + 64);
    if (!gname) {
        fail(f, IR_ENOMEM);
        return;
    }
    if (*an)
        sprintf(gname, "fused_%s", an);
    else
        sprintf(gname, "fused_%s_%u", ir_op_name(ir_node_op(g, anchor)), f->pos[anchor]);
    ir_node_set_name(g, fn, gname);
    free(gname);
    ir_node_set_loc(g, fn, ir_node_loc(g, anchor));
    set_provenance(f, fn, m, k);
}

/* Moves the (sorted, convex) members into a new fused node. Returns false when the group has no
 * result used outside (dead code is left for dce) or on failure. */
static bool materialize(Fuse *f, IrNodeId *m, uint32_t k, const char *kind, IrNodeId anchor) {
    IrGraph *g = f->g;
    IrRegionId r = f->region;
    Build b = {0};
    IrNodeId next = ir_node_next(g, m[k - 1]), prev = ir_node_prev(g, m[0]);
    if (!collect_io(f, m, k, &b) || (b.n_outs && !collect_moved(f, m, k, next, &b))) {
        fail(f, IR_ENOMEM);
        build_free(&b);
        return false;
    }
    if (!b.n_outs) {
        build_free(&b);
        return false;
    }
    IrValueId *args = malloc((b.n_ops + 1) * sizeof *args);
    IrNodeId fn = args ? create_fused(f, next, &b, args) : 0;
    if (!fn || fn > f->ncap) {
        fail(f, ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM);
        free(args);
        build_free(&b);
        return false;
    }
    IrRegionId body = ir_node_region_at(g, fn, 0);
    for (uint32_t i = 0; i < k; i++) {
        ir_node_move(g, m[i], body, 0);
        for (uint32_t j = 0; j < ir_node_num_operands(g, m[i]); j++) {
            IrValueId v = ir_node_operand(g, m[i], j);
            for (uint32_t q = 0; v && q < b.n_ops; q++)
                if (b.ops[q] == v) ir_node_set_operand(g, m[i], j, args[q]);
        }
    }
    free(args);
    ir_region_set_outputs(g, body, b.n_outs, b.outs);
    for (uint32_t i = 0; i < b.moved.n; i++) ir_node_move(g, b.moved.a[i], r, next);
    describe_fused(f, fn, m, k, kind, anchor);

    /* bookkeeping for later decisions in this region */
    for (uint32_t i = 0; i < b.n_outs; i++) f->repl[b.outs[i]] = ir_node_result(g, fn, i);
    f->flags[fn] = FL_NEWFUSED;
    f->gfirst[fn] = f->gmem.n;
    f->gcount[fn] = k;
    for (uint32_t i = 0; i < k; i++) {
        fuse_vec_push(f, &f->gmem, m[i]);
        f->rep[m[i]] = fn;
    }
    renumber_span(f, b.span_pos, b.n_span, prev ? ir_node_next(g, prev) : ir_region_first(g, r), next);
    f->groups++;
    f->members += k;
    f->bytes_saved += b.saved;
    f->unsized += b.unsized;
    f->per_kind[kind_index(kind)]++;
    build_free(&b);
    if (ir_graph_status(g)) fail(f, ir_graph_status(g));
    ir_pass_changed(f->c);
    return !f->status;
}

bool fuse_form(Fuse *f, const IrNodeId *members, uint32_t k, const char *kind, IrNodeId anchor) {
    if (f->status || k < 2 || k > f->max_size) return false;
    IrNodeId small[64], *m = k <= 64 ? small : malloc(k * sizeof *m);
    if (!m) {
        fail(f, IR_ENOMEM);
        return false;
    }
    bool ok = true;
    for (uint32_t i = 0; ok && i < k; i++) {
        m[i] = members[i];
        ok = fuse_is_free(f, m[i]) && !is_member(m, i, m[i]);
    }
    if (ok) {
        sort_by_pos(f, m, k);
        ok = convex(f, m, k) && materialize(f, m, k, kind, anchor);
    }
    if (m != small) free(m);
    return ok;
}

/* ---- reductions and elementwise groups --------------------------------------------------------- */

static bool last_axis(int64_t axis, uint32_t rank) { return axis == -1 || (rank != IR_RANK_UNKNOWN && axis == (int64_t)rank - 1); }

bool fuse_row_reduction(const Fuse *f, IrNodeId n) {
    const IrGraph *g = f->g;
    IrOp op = ir_node_op(g, n);
    uint32_t rank = ir_type_rank(g, ir_value_type(g, ir_node_operand(g, n, 0)));
    switch (op) {
    case IR_OP_SOFTMAX:
    case IR_OP_LOG_SOFTMAX:
    case IR_OP_LAYER_NORMALIZATION: return last_axis(ir_node_attr_int(g, n, "axis", NULL), rank);
    case IR_OP_REDUCE_L1:
    case IR_OP_REDUCE_L2:
    case IR_OP_REDUCE_LOG_SUM:
    case IR_OP_REDUCE_LOG_SUM_EXP:
    case IR_OP_REDUCE_MAX:
    case IR_OP_REDUCE_MEAN:
    case IR_OP_REDUCE_MIN:
    case IR_OP_REDUCE_PROD:
    case IR_OP_REDUCE_SUM_SQUARE: {
        IrAttrValue a;
        if (!ir_node_attr(g, n, "axes", &a)) return rank == 1;
        return a.kind == IR_ATTR_INTS && a.count == 1 && last_axis(a.ints[0], rank);
    }
    case IR_OP_REDUCE_SUM: {
        FuseConst k;
        if (ir_node_num_operands(g, n) < 2 || !ir_node_operand(g, n, 1))
            return rank == 1 && !ir_node_attr_int(g, n, "noop_with_empty_axes", NULL);
        return fuse_const_view(g, ir_node_operand(g, n, 1), &k) && ir_dtype_is_int(k.dt) && k.numel == 1 &&
               last_axis((int64_t)fuse_const_at(&k, 0), rank);
    }
    default: return false;
    }
}

static bool ew_fusible(const Fuse *f, IrNodeId n) {
    const IrGraph *g = f->g;
    if (!fuse_is_free(f, n) || ir_op_info(ir_node_op(g, n))->cls != IR_CLASS_ELEMENTWISE || (f->flags[n] & FL_STATIC))
        return false;
    IrValueId r0 = ir_node_result(g, n, 0);
    if (!r0) return false;
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i) && fuse_uses(f, ir_node_result(g, n, i))) return false;
    /* integer scalars and vectors are shape arithmetic */
    IrTypeId t = ir_value_type(g, r0);
    IrDType dt = ir_type_dtype(g, t);
    if (t && (ir_dtype_is_int(dt) || dt == IR_DTYPE_BOOL) && ir_type_rank(g, t) <= 1) return false;
    /* an Identity of a sequence or an optional is no tensor computation */
    if (ir_type_is_container(g, t)) return false;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++)
        if (ir_type_is_container(g, ir_value_type(g, ir_node_operand(g, n, i)))) return false;
    return true;
}

/* Grows a group backwards from `seed` over elementwise producers, keeping it convex. */
static void grow(Fuse *f, IrNodeId seed, const char *kind) {
    IrNodeId *m = malloc(f->max_size * sizeof *m);
    if (!m) {
        fail(f, IR_ENOMEM);
        return;
    }
    uint32_t k = 1;
    m[0] = seed;
    for (uint32_t i = 0; i < k && k < f->max_size && !f->status; i++)
        for (uint32_t j = 0; j < ir_node_num_operands(f->g, m[i]) && k < f->max_size; j++) {
            IrNodeId d = fuse_free_def(f, ir_node_operand(f->g, m[i], j));
            if (!d || !ew_fusible(f, d) || is_member(m, k, d)) continue;
            m[k] = d;
            if (convex(f, m, k + 1)) k++;
        }
    if (k >= 2) fuse_form(f, m, k, kind, seed);
    free(m);
}

/* ---- driver ------------------------------------------------------------------------------------- */

static void process_region(Fuse *f, IrRegionId r) {
    index_region(f, r);
    if (f->kinds & FUSE_PATTERNS) fuse_match_patterns(f);
    if (f->kinds & FUSE_EPILOGUE) fuse_match_epilogues(f);
    if (f->kinds & (FUSE_ELEMENTWISE | FUSE_REDUCTION))
        for (uint32_t i = f->order.n; i-- > 0 && !f->status;) {
            IrNodeId n = f->order.a[i];
            if ((f->kinds & FUSE_REDUCTION) && fuse_is_free(f, n) && fuse_row_reduction(f, n))
                grow(f, n, "reduction");
            else if ((f->kinds & FUSE_ELEMENTWISE) && ew_fusible(f, n))
                grow(f, n, "elementwise");
        }
    for (IrNodeId n = ir_region_first(f->g, r); n && !f->status; n = ir_node_next(f->g, n)) {
        if (ir_node_op(f->g, n) == IR_OP_FUSED) continue;
        for (uint32_t k = 0; k < ir_node_num_regions(f->g, n); k++) process_region(f, ir_node_region_at(f->g, n, k));
    }
}

/* Outside uses of exported member results now name the fused nodes' results. Linear: one walk,
 * skipping the bodies built here (inside them the member values stay). */
static void resolve_region(Fuse *f, IrRegionId r) {
    IrGraph *g = f->g;
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n)) {
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrValueId v = ir_node_operand(g, n, i), w = fuse_resolve(f, v);
            if (w != v) ir_node_set_operand(g, n, i, w);
        }
        if (n <= f->ncap && (f->flags[n] & FL_NEWFUSED)) continue;
        for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++) resolve_region(f, ir_node_region_at(g, n, k));
    }
    uint32_t no = ir_region_num_outputs(g, r);
    bool changed = false;
    for (uint32_t i = 0; i < no; i++) changed |= fuse_resolve(f, ir_region_output(g, r, i)) != ir_region_output(g, r, i);
    if (!changed) return;
    IrValueId *outs = malloc(no * sizeof *outs);
    if (!outs) {
        fail(f, IR_ENOMEM);
        return;
    }
    for (uint32_t i = 0; i < no; i++) outs[i] = fuse_resolve(f, ir_region_output(g, r, i));
    ir_region_set_outputs(g, r, no, outs);
    free(outs);
}

/* Upper bounds of the symbols: range constraints, then equalities to bounded expressions. */
static bool symbol_bounds(Fuse *f) {
    const IrGraph *g = f->g;
    uint32_t ns = ir_graph_num_syms(g), nc = ir_graph_num_constraints(g);
    f->sym_hi = malloc((ns + 1) * sizeof *f->sym_hi);
    if (!f->sym_hi) return false;
    for (uint32_t s = 0; s <= ns; s++) f->sym_hi[s] = -1;
    for (uint32_t i = 0; i < nc; i++) {
        IrConstraint c = ir_graph_constraint(g, i);
        if (c.kind != IR_CONSTRAINT_RANGE || ir_expr_kind(g, c.a) != IR_EXPR_SYM) continue;
        IrSymId s = ir_expr_sym_id(g, c.a);
        if (f->sym_hi[s] < 0 || c.hi < f->sym_hi[s]) f->sym_hi[s] = c.hi;
    }
    for (int round = 0; round < 4; round++)
        for (uint32_t i = 0; i < nc; i++) {
            IrConstraint c = ir_graph_constraint(g, i);
            if (c.kind != IR_CONSTRAINT_EQ) continue;
            for (int side = 0; side < 2; side++) {
                IrExprId a = side ? c.b : c.a, b = side ? c.a : c.b;
                int64_t v;
                if (ir_expr_kind(g, a) == IR_EXPR_SYM && f->sym_hi[ir_expr_sym_id(g, a)] < 0 &&
                    ir_expr_eval(g, b, f->sym_hi, &v))
                    f->sym_hi[ir_expr_sym_id(g, a)] = v;
            }
        }
    return true;
}

static IrStatus parse_options(IrPassContext *c, Fuse *f) {
    const char *ms = ir_pass_option(c, "max-size"), *kinds = ir_pass_option(c, "kinds");
    char *end;
    long long v = strtoll(ms ? ms : "64", &end, 10);
    if (*end || v < 1 || v > 100000) {
        ir_pass_error(c, 0, "max-size must be a positive integer, got '%s'", ms ? ms : "");
        return IR_EINVAL;
    }
    f->max_size = (uint32_t)v;
    if (!parse_kinds(kinds ? kinds : "all", &f->kinds)) {
        ir_pass_error(c, 0, "bad kinds '%s' (a '+'-separated list of elementwise, reduction, epilogue, patterns, "
                            "attention, layernorm, gelu, bn, convsum, all, attention-kt)", kinds ? kinds : "");
        return IR_EINVAL;
    }
    return IR_OK;
}

static void fuse_free(Fuse *f) {
    free(f->uses), free(f->repl), free(f->pos), free(f->rep), free(f->flags), free(f->uoff);
    free(f->ucnt), free(f->gfirst), free(f->gcount), free(f->mark), free(f->mark2), free(f->sym_hi);
    free(f->edges.a), free(f->gmem.a), free(f->stack.a), free(f->tmp.a), free(f->order.a);
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    Fuse f = {.c = c, .g = g};
    IrStatus st = parse_options(c, &f);
    if (st) return st;
    if (f.kinds & FUSE_BN) {
        st = fuse_fold_batchnorm(&f);
        ir_pass_stat(c, "bn-folded", f.bn_folded);
        if (st) return st;
    }
    if (f.kinds & FUSE_CONVSUM) {
        st = fuse_merge_conv_sums(&f);
        ir_pass_stat(c, "convs-merged", f.convsums);
        if (st) return st;
    }
    if (f.kinds & ~FUSE_REWRITES) {
        f.nval = ir_graph_num_values(g);
        f.ncap = ir_graph_node_capacity(g) + ir_graph_num_nodes(g) + 16;
        size_t nv = (size_t)f.nval + 1, nn = (size_t)f.ncap + 1;
        f.uses = calloc(nv, sizeof *f.uses);
        f.repl = calloc(nv, sizeof *f.repl);
        f.pos = calloc(nn, sizeof *f.pos);
        f.rep = calloc(nn, sizeof *f.rep);
        f.flags = calloc(nn, 1);
        f.uoff = calloc(nn, sizeof *f.uoff);
        f.ucnt = calloc(nn, sizeof *f.ucnt);
        f.gfirst = calloc(nn, sizeof *f.gfirst);
        f.gcount = calloc(nn, sizeof *f.gcount);
        f.mark = calloc(nn, sizeof *f.mark);
        f.mark2 = calloc(nn, sizeof *f.mark2);
        if (!f.uses || !f.repl || !f.pos || !f.rep || !f.flags || !f.uoff || !f.ucnt || !f.gfirst || !f.gcount ||
            !f.mark || !f.mark2 || !symbol_bounds(&f)) {
            fuse_free(&f);
            return IR_ENOMEM;
        }
        ir_graph_count_uses(g, f.uses);
        process_region(&f, IR_ROOT_REGION);
        if (f.groups && !f.status) resolve_region(&f, IR_ROOT_REGION);
    }
    ir_pass_stat(c, "groups-formed", f.groups);
    ir_pass_stat(c, "nodes-fused", f.members);
    ir_pass_stat(c, "intermediate-bytes-saved", f.bytes_saved);
    ir_pass_stat(c, "intermediates-unsized", f.unsized);
    for (int i = 0; i < 6; i++)
        if (f.per_kind[i]) ir_pass_stat(c, kind_stats[i], f.per_kind[i]);
    st = f.status ? f.status : ir_graph_status(g);
    fuse_free(&f);
    return st;
}

const IrPass pass_fuse = {
    .name = "fuse",
    .summary = "form fused groups (irtool.fused): elementwise chains, row reductions, contraction epilogues, "
               "attention/LayerNorm/GELU patterns; fold BatchNorm into Conv",
    .options = (const IrPassOption[]){{"max-size", "64", "most nodes in one group"},
                                      {"kinds", "elementwise+reduction+epilogue+patterns+bn+convsum",
                                       "'+'-separated kinds to form: elementwise, reduction, epilogue, patterns "
                                       "(or attention, layernorm, gelu), bn, convsum (the sum of two Convs of one "
                                       "geometry as one Conv over their channels side by side); not in all: "
                                       "attention-kt (attention groups take the Transpose making K^T)"},
                                      {NULL, NULL, NULL}},
    .run = run,
};

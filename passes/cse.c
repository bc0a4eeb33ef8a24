/* cse: common subexpression elimination. Two nodes with the same op, operands, attributes and
 * result count compute the same values (every op is a pure function; random ops excepted, which
 * are never merged), so the later one's results are replaced by the earlier one's. Scoped: a
 * node may be replaced by an equal node in its own region or an enclosing one, never a sibling
 * region. Nodes with regions are left alone. Linear time: see the candidate chains below.
 */
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct Table {
    IrNodeId *slots;
    uint32_t cap, count;
    struct Table *parent;
} Table;

static bool mergeable(IrOp op) {
    return ir_op_info(op)->cls != IR_CLASS_RANDOM && op != IR_OP_SHAPE_GUARD && ir_op_num_regions(op) == 0;
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static uint64_t attr_hash(const IrGraph *g, IrAttrValue a) {
    uint64_t h = a.kind;
    switch (a.kind) {
    case IR_ATTR_INT:
    case IR_ATTR_DTYPE: return mix(h, (uint64_t)a.i);
    case IR_ATTR_FLOAT: return mix(h, hash_bytes(&a.f, sizeof a.f));
    case IR_ATTR_STRING: return mix(h, a.s);
    case IR_ATTR_INTS: return mix(h, hash_bytes(a.ints, a.count * sizeof *a.ints));
    case IR_ATTR_FLOATS: return mix(h, hash_bytes(a.floats, a.count * sizeof *a.floats));
    case IR_ATTR_STRINGS: return mix(h, hash_bytes(a.strs, a.count * sizeof *a.strs));
    case IR_ATTR_TENSOR:
        return mix(mix(h, ir_const_type(g, a.tensor)),
                   hash_bytes(ir_const_data(g, a.tensor), ir_const_nbytes(g, a.tensor)));
    default: return h;
    }
}

static bool attr_equal(const IrGraph *g, IrAttrValue a, IrAttrValue b) {
    if (a.kind != b.kind || a.count != b.count) return false;
    switch (a.kind) {
    case IR_ATTR_INT:
    case IR_ATTR_DTYPE: return a.i == b.i;
    case IR_ATTR_FLOAT: return memcmp(&a.f, &b.f, sizeof a.f) == 0;
    case IR_ATTR_STRING: return a.s == b.s;
    case IR_ATTR_INTS: return memcmp(a.ints, b.ints, a.count * sizeof *a.ints) == 0;
    case IR_ATTR_FLOATS: return memcmp(a.floats, b.floats, a.count * sizeof *a.floats) == 0;
    case IR_ATTR_STRINGS: return memcmp(a.strs, b.strs, a.count * sizeof *a.strs) == 0;
    case IR_ATTR_TENSOR:
        return ir_const_type(g, a.tensor) == ir_const_type(g, b.tensor) &&
               ir_const_nbytes(g, a.tensor) == ir_const_nbytes(g, b.tensor) &&
               memcmp(ir_const_data(g, a.tensor), ir_const_data(g, b.tensor), ir_const_nbytes(g, a.tensor)) == 0;
    default: return false;
    }
}

static uint64_t node_hash(const IrGraph *g, IrNodeId n) {
    uint64_t h = mix(ir_node_op(g, n), ir_node_num_results(g, n));
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) h = mix(h, ir_node_operand(g, n, i));
    for (uint32_t i = 0; i < ir_node_num_attrs(g, n); i++)
        h = mix(mix(h, ir_node_attr_name(g, n, i)), attr_hash(g, ir_node_attr_at(g, n, i)));
    /* final avalanche: the table indexes by the low bits */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static bool node_equal(const IrGraph *g, IrNodeId a, IrNodeId b) {
    if (ir_node_op(g, a) != ir_node_op(g, b) || ir_node_num_operands(g, a) != ir_node_num_operands(g, b) ||
        ir_node_num_results(g, a) != ir_node_num_results(g, b) || ir_node_num_attrs(g, a) != ir_node_num_attrs(g, b))
        return false;
    for (uint32_t i = 0; i < ir_node_num_operands(g, a); i++)
        if (ir_node_operand(g, a, i) != ir_node_operand(g, b, i)) return false;
    for (uint32_t i = 0; i < ir_node_num_results(g, a); i++) {
        IrValueId ra = ir_node_result(g, a, i), rb = ir_node_result(g, b, i);
        if ((ra == 0) != (rb == 0)) return false;
        /* an Optional without operand is typed by its result alone: opt<f32> != opt<i64> */
        IrTypeId ta = ra ? ir_value_type(g, ra) : 0, tb = rb ? ir_value_type(g, rb) : 0;
        if (ta != tb && (ir_type_is_container(g, ta) || ir_type_is_container(g, tb))) return false;
    }
    for (uint32_t i = 0; i < ir_node_num_attrs(g, a); i++)
        if (ir_node_attr_name(g, a, i) != ir_node_attr_name(g, b, i) ||
            !attr_equal(g, ir_node_attr_at(g, a, i), ir_node_attr_at(g, b, i)))
            return false;
    return true;
}

static IrNodeId table_find(const IrGraph *g, const Table *t, IrNodeId n, uint64_t h) {
    for (; t; t = t->parent) {
        if (!t->cap) continue;
        for (uint32_t j = (uint32_t)h & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
            IrNodeId m = t->slots[j];
            if (!m) break;
            if (node_equal(g, m, n)) return m;
        }
    }
    return 0;
}

static bool table_insert(const IrGraph *g, Table *t, IrNodeId n, uint64_t h) {
    if ((t->count + 1) * 2 > t->cap) {
        uint32_t nc = t->cap ? t->cap * 2 : 64;
        IrNodeId *ns = calloc(nc, sizeof *ns);
        if (!ns) return false;
        for (uint32_t i = 0; i < t->cap; i++) {
            IrNodeId m = t->slots[i];
            if (!m) continue;
            uint32_t j = (uint32_t)node_hash(g, m) & (nc - 1);
            while (ns[j]) j = (j + 1) & (nc - 1);
            ns[j] = m;
        }
        free(t->slots);
        t->slots = ns;
        t->cap = nc;
    }
    uint32_t j = (uint32_t)h & (t->cap - 1);
    while (t->slots[j]) j = (j + 1) & (t->cap - 1);
    t->slots[j] = n;
    t->count++;
    return true;
}

/* A graph output keeps its own name, so its defining node is never the one replaced. */
static bool defines_graph_output(const IrGraph *g, IrNodeId n) {
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
        for (uint32_t k = 0; k < ir_graph_num_outputs(g); k++)
            if (ir_node_result(g, n, i) && ir_node_result(g, n, i) == ir_graph_output(g, k)) return true;
    return false;
}

/* Candidates for a node with operands are found through its first operand: every earlier
 * node with the same first operand is on that value's chain (most recent first). The chains
 * follow the graph's own locality, which keeps the pass linear and cache-friendly on large
 * graphs where one big hash table would miss the cache on every probe. A chain is searched up
 * to MAX_CANDIDATES deep, so a value with very many users costs bounded time (a duplicate that
 * far back is not merged). Nodes without operands use the hash table. */
#define MAX_CANDIDATES 16

typedef struct Cse {
    IrPassContext *c;
    IrValueId *repl; /* value -> the value that replaces it (0 = itself) */
    uint32_t n_values;
    IrNodeId *head;  /* value -> most recent node whose first operand it is */
    IrNodeId *next;  /* node -> previous node on the same chain */
    int64_t merged;
} Cse;


/* True when a value defined by node m is visible at node n: m's region encloses n's. */
static bool in_scope(const IrGraph *g, IrNodeId m, IrNodeId n) {
    IrRegionId rm = ir_node_region(g, m);
    for (IrRegionId r = ir_node_region(g, n);;) {
        if (r == rm) return true;
        IrNodeId parent = ir_region_parent(g, r);
        if (!parent) return false;
        r = ir_node_region(g, parent);
    }
}

static IrNodeId chain_find(const Cse *s, const IrGraph *g, IrNodeId n) {
    IrValueId v = ir_node_operand(g, n, 0);
    if (!v) return 0;
    uint32_t k = 0;
    for (IrNodeId m = s->head[v]; m && k < MAX_CANDIDATES; m = s->next[m], k++)
        if (ir_node_op(g, m) == ir_node_op(g, n) && node_equal(g, m, n) && in_scope(g, m, n)) return m;
    return 0;
}

static void chain_insert(Cse *s, const IrGraph *g, IrNodeId n) {
    IrValueId v = ir_node_operand(g, n, 0);
    if (!v) return;
    s->next[n] = s->head[v];
    s->head[v] = n;
}

/* Uses are rewritten while walking forward (a use always follows its definition), so the whole
 * pass stays linear instead of rescanning the graph per merged node. */
static IrStatus cse_region(Cse *s, IrRegionId r, Table *parent) {
    IrGraph *g = ir_pass_graph(s->c);
    Table t = {NULL, 0, 0, parent};
    IrStatus st = IR_OK;
    for (IrNodeId n = ir_region_first(g, r); n && st == IR_OK;) {
        IrNodeId next = ir_node_next(g, n);
        ir_pass_remap_operands(g, n, s->repl, s->n_values);
        for (uint32_t k = 0; k < ir_node_num_regions(g, n) && st == IR_OK; k++)
            st = cse_region(s, ir_node_region_at(g, n, k), &t);
        if (st == IR_OK && mergeable(ir_node_op(g, n))) {
            bool by_chain = ir_node_num_operands(g, n) && ir_node_operand(g, n, 0);
            uint64_t h = by_chain ? 0 : node_hash(g, n);
            IrNodeId prev = by_chain ? chain_find(s, g, n) : table_find(g, &t, n, h);
            if (prev && !defines_graph_output(g, n)) {
                for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
                    IrValueId from = ir_node_result(g, n, i);
                    if (from) s->repl[from] = ir_node_result(g, prev, i);
                }
                ir_node_erase(g, n);
                s->merged++;
            } else if (!prev) {
                if (by_chain)
                    chain_insert(s, g, n);
                else if (!table_insert(g, &t, n, h))
                    st = IR_ENOMEM;
            }
        }
        n = next;
    }
    if (st == IR_OK) st = ir_pass_remap_region_outputs(g, r, s->repl, s->n_values);
    free(t.slots);
    return st;
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    size_t nv = (size_t)ir_graph_num_values(g) + 1, nn = (size_t)ir_graph_node_capacity(g) + 1;
    Cse s = {c, calloc(nv, sizeof(IrValueId)), (uint32_t)(nv - 1), calloc(nv, sizeof(IrNodeId)), calloc(nn, sizeof(IrNodeId)), 0};
    IrStatus st = IR_ENOMEM;
    if (s.repl && s.head && s.next) st = cse_region(&s, 1, NULL);
    free(s.repl);
    free(s.head);
    free(s.next);
    if (s.merged) ir_pass_changed(c);
    ir_pass_stat(c, "nodes-merged", s.merged);
    return st;
}

const IrPass pass_cse = {
    .name = "cse",
    .summary = "merge nodes that compute the same values (same op, operands and attributes)",
    .options = (const IrPassOption[]){{NULL, NULL, NULL}},
    .run = run,
};

/* Graph storage: tables, pools, interning of strings, expressions and types, values, nodes,
 * regions, constants and attributes.
 *
 * Invariants: entry 0 of every table is reserved (id 0 = none); region 1 is the root; a node's
 * attributes are sorted by name; every value has a unique name. An allocation failure sets
 * g->status to IR_ENOMEM and turns later builder calls into no-ops returning 0.
 */
#include "ir_internal.h"

#include <sys/mman.h>

_Noreturn void ir_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "irtool internal error: assertion `%s` failed at %s:%d\n", expr, file, line);
    abort();
}

const char *ir_status_name(IrStatus s) {
    switch (s) {
    case IR_OK: return "ok";
    case IR_ESYNTAX: return "syntax error";
    case IR_EVERIFY: return "verification failed";
    case IR_EUNSUPPORTED: return "unsupported";
    case IR_EIO: return "I/O error";
    case IR_ENOMEM: return "out of memory";
    case IR_EINVAL: return "invalid argument";
    case IR_ENOTFOUND: return "not found";
    }
    return "unknown status";
}

/* ---- vectors and hashing ------------------------------------------------------------------ */

/* Big tables are touched all over while a large graph is built: transparent huge pages cut
 * the page faults and TLB misses (a hint only; ignored where unsupported). */
static void advise_huge(void *p, size_t len) {
    const uintptr_t huge = 2u << 20;
    if (len < 4 * huge) return;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + len) & ~(huge - 1);
    if (e > a) madvise((void *)a, e - a, MADV_HUGEPAGE);
}

bool ir_vec_reserve(IrVec *v, size_t elem, uint32_t need) {
    if (need <= v->cap) return true;
    size_t ncap = v->cap ? (size_t)v->cap : 16;
    while (ncap < need) ncap = ncap + ncap / 2 + 16;
    if (ncap > UINT32_MAX) ncap = UINT32_MAX;
    if (ncap < need) return false;
    void *p = realloc(v->data, ncap * elem);
    if (!p) return false;
    v->data = p;
    v->cap = (uint32_t)ncap;
    advise_huge(p, ncap * elem);
    return true;
}

void ir_vec_free(IrVec *v) {
    free(v->data);
    v->data = NULL;
    v->len = v->cap = 0;
}

void ir_hash_free(IrHash *h) {
    free(h->ent);
    free(h->slots);
    h->ent = NULL;
    h->slots = NULL;
    h->cap = h->count = 0;
}

uint64_t ir_hash_bytes(const void *p, size_t n, uint64_t seed) {
    /* FNV-1a over 8-byte words, then a final mix; fast enough and deterministic. */
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull ^ seed;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    while (n--) h = (h ^ *s++) * 1099511628211ull;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

typedef bool (*HashEq)(const IrGraph *g, uint32_t id, const void *key);

/* Each slot holds the id and the high 32 bits of its key's hash in one word, so a probe reads
 * one cache line, compares keys only on a hash match, and growing never rehashes a key. */
#define ENT_ID(e) ((uint32_t)(e))
#define ENT_TAG(e) ((uint32_t)((e) >> 32))

static bool hash_grow(IrHash *h) {
    uint32_t ncap = h->cap ? h->cap * 2 : 64;
    uint64_t *ne = calloc(ncap, sizeof *ne);
    if (!ne) return false;
    advise_huge(ne, (size_t)ncap * sizeof *ne);
    for (uint32_t i = 0; i < h->cap; i++) {
        uint64_t e = h->ent[i];
        if (!ENT_ID(e)) continue;
        uint32_t j = ENT_TAG(e) & (ncap - 1);
        while (ne[j]) j = (j + 1) & (ncap - 1);
        ne[j] = e;
    }
    free(h->ent);
    h->ent = ne;
    h->cap = ncap;
    return true;
}

/* Presizes an empty table for about n keys (fewer rehashes while a big file is read). */
static void hash_reserve(IrHash *h, uint32_t n) {
    if (h->cap) return;
    uint32_t cap = 64;
    while (cap < n + n / 3 && cap < (1u << 30)) cap *= 2;
    h->ent = calloc(cap, sizeof *h->ent);
    h->cap = h->ent ? cap : 0;
    if (h->ent) advise_huge(h->ent, (size_t)cap * sizeof *h->ent);
}

/* Finds key; returns its id or 0. The slot index comes from the hash's high half, which is
 * also the stored tag. */
static uint32_t hash_find(const IrHash *h, const IrGraph *g, uint64_t hv, HashEq eq, const void *key) {
    if (!h->cap) return 0;
    uint32_t tag = (uint32_t)(hv >> 32);
    for (uint32_t j = tag & (h->cap - 1);; j = (j + 1) & (h->cap - 1)) {
        uint64_t e = h->ent[j];
        if (!e) return 0;
        if (ENT_TAG(e) == tag && eq(g, ENT_ID(e), key)) return ENT_ID(e);
    }
}

/* Inserts id (known absent). */
static bool hash_insert(IrHash *h, uint64_t hv, uint32_t id) {
    if ((h->count + 1) * 4 > h->cap * 3) {
        if (!hash_grow(h)) return false;
    }
    uint32_t tag = (uint32_t)(hv >> 32);
    uint32_t j = tag & (h->cap - 1);
    while (h->ent[j]) j = (j + 1) & (h->cap - 1);
    h->ent[j] = (uint64_t)tag << 32 | id;
    h->count++;
    return true;
}

void ir__graph_reserve(IrGraph *g, uint32_t lines) {
    /* a text line is about one node: ~1.4 values, ~2.5 new strings, ~6 pool words */
    if (lines < 4096) return;
    if (!g->str_hash_ok) {
        if (g->str_offs.len > 1) return; /* holds strings: the lazy build will size it */
        g->str_hash_ok = true;           /* an empty table is a built one */
    }
    hash_reserve(&g->str_hash, lines * 5 / 2);
    ir_vec_reserve(&g->nodes, sizeof(IrNodeRec), lines);
    ir_vec_reserve(&g->values, sizeof(IrValueRec), lines + lines / 2);
    ir_vec_reserve(&g->str_offs, 4, lines * 5 / 2);
    ir_vec_reserve(&g->u32pool, 4, lines * 6);
}

void ir__oom(IrGraph *g) {
    if (g->status == IR_OK) g->status = IR_ENOMEM;
}

/* ---- graph lifetime ------------------------------------------------------------------------ */

#define PUSH(g, vec, T, val, fail)                                                             \
    do {                                                                                       \
        if (!ir_vec_reserve(&(vec), sizeof(T), (vec).len + 1)) {                               \
            ir__oom(g);                                                                        \
            fail;                                                                              \
        }                                                                                      \
        ((T *)(vec).data)[(vec).len++] = (val);                                                \
    } while (0)

IrStatus ir_graph_create(IrGraph **out) {
    *out = NULL;
    IrGraph *g = calloc(1, sizeof *g);
    if (!g) return IR_ENOMEM;
    /* reserve id 0 in every table, string 0 = "", region 1 = root */
    char nul = 0;
    uint32_t zero = 0;
    IrExprRec e0 = {0};
    IrTypeRec t0 = {0};
    IrValueRec v0 = {0};
    IrNodeRec n0 = {0};
    IrAttrRec a0 = {0};
    IrRegionRec r0 = {0};
    IrConstRec c0 = {0};
    IrSymRec s0 = {0};
    int64_t i0 = 0;
    double f0 = 0;
    PUSH(g, g->str_bytes, char, nul, goto fail);
    PUSH(g, g->str_offs, uint32_t, zero, goto fail);
    PUSH(g, g->exprs, IrExprRec, e0, goto fail);
    PUSH(g, g->types, IrTypeRec, t0, goto fail);
    PUSH(g, g->values, IrValueRec, v0, goto fail);
    PUSH(g, g->nodes, IrNodeRec, n0, goto fail);
    PUSH(g, g->attrs, IrAttrRec, a0, goto fail);
    PUSH(g, g->regions, IrRegionRec, r0, goto fail);
    PUSH(g, g->regions, IrRegionRec, r0, goto fail);
    PUSH(g, g->consts, IrConstRec, c0, goto fail);
    PUSH(g, g->syms, IrSymRec, s0, goto fail);
    PUSH(g, g->u32pool, uint32_t, zero, goto fail);
    PUSH(g, g->i64pool, int64_t, i0, goto fail);
    PUSH(g, g->f64pool, double, f0, goto fail);
    *out = g;
    return IR_OK;
fail:
    ir_graph_destroy(g);
    return IR_ENOMEM;
}

void ir_graph_destroy(IrGraph *g) {
    if (!g) return;
    IrVec *vecs[] = {&g->str_bytes, &g->str_offs, &g->exprs, &g->types, &g->values, &g->nodes,
                     &g->attrs, &g->regions, &g->consts, &g->const_values, &g->syms,
                     &g->constraints, &g->u32pool, &g->i64pool, &g->f64pool, &g->opsets,
                     &g->meta};
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) ir_vec_free(vecs[i]);
    ir_hash_free(&g->str_hash);
    ir_hash_free(&g->expr_hash);
    ir_hash_free(&g->type_hash);
    free(g->name_hash.slots);
    for (uint32_t i = 0; i < g->mappings.len; i++) {
        IrMapping m = IR_VEC_AT(g->mappings, IrMapping, i);
        munmap(m.addr, m.len);
    }
    ir_vec_free(&g->mappings);
    for (IrBlock *b = g->blocks; b;) {
        IrBlock *n = b->next;
        free(b);
        b = n;
    }
    free(g->source_file);
    free(g->binop_cache);
    if (g->source_owned) free((char *)g->source_text);
    free(g);
}

IrStatus ir_graph_status(const IrGraph *g) { return g->status; }

void ir_graph_set_name(IrGraph *g, const char *name) { g->name = ir_str_intern_cstr(g, name); }
const char *ir_graph_name(const IrGraph *g) { return ir_str(g, g->name); }
const char *ir_graph_source_file(const IrGraph *g) { return g->source_file; }
void ir__graph_take_source_text(IrGraph *g, char *text, size_t len) {
    ir_graph_set_source_text(g, text, len);
    g->source_owned = true;
}

void ir_graph_set_source_text(IrGraph *g, const char *text, size_t len) {
    if (g->source_owned) free((char *)g->source_text);
    g->source_owned = false;
    g->source_text = text;
    g->source_len = text ? len : 0;
}

void ir_graph_set_source_file(IrGraph *g, const char *path) {
    free(g->source_file);
    g->source_file = NULL;
    if (path) {
        g->source_file = strdup(path);
        if (!g->source_file) ir__oom(g);
    }
}

size_t ir_graph_memory_bytes(const IrGraph *g) {
    size_t n = sizeof *g;
    n += (size_t)g->str_bytes.cap + (size_t)g->str_offs.cap * 4;
    n += (size_t)g->exprs.cap * sizeof(IrExprRec) + (size_t)g->types.cap * sizeof(IrTypeRec);
    n += (size_t)g->values.cap * sizeof(IrValueRec) + (size_t)g->nodes.cap * sizeof(IrNodeRec);
    n += (size_t)g->attrs.cap * sizeof(IrAttrRec) + (size_t)g->regions.cap * sizeof(IrRegionRec);
    n += (size_t)g->consts.cap * sizeof(IrConstRec) + (size_t)g->u32pool.cap * 4;
    n += (size_t)g->i64pool.cap * 8 + (size_t)g->f64pool.cap * 8;
    n += ((size_t)g->str_hash.cap + g->expr_hash.cap + g->type_hash.cap) * 8 + (size_t)g->name_hash.cap * 4;
    return n;
}

void *ir__alloc_block(IrGraph *g, size_t n) {
    size_t hdr = 64; /* keeps the payload 64-byte aligned */
    if (n > SIZE_MAX - hdr) {
        ir__oom(g);
        return NULL;
    }
    void *p = NULL;
    if (posix_memalign(&p, 64, hdr + (n ? n : 1)) != 0) {
        ir__oom(g);
        return NULL;
    }
    IrBlock *b = p;
    b->next = g->blocks;
    g->blocks = b;
    return (char *)p + hdr;
}

IrStatus ir_graph_adopt_mapping(IrGraph *g, void *addr, size_t len) {
    IrMapping m = {addr, len};
    PUSH(g, g->mappings, IrMapping, m, return IR_ENOMEM);
    return IR_OK;
}

void ir__invalidate_hashes(IrGraph *g) {
    ir_hash_free(&g->str_hash);
    ir_hash_free(&g->expr_hash);
    ir_hash_free(&g->type_hash);
    free(g->name_hash.slots);
    g->name_hash.slots = NULL;
    g->name_hash.cap = g->name_hash.count = 0;
    g->str_hash_ok = g->expr_hash_ok = g->type_hash_ok = g->name_hash_ok = false;
    memset(g->small_const, 0, sizeof g->small_const);
    free(g->binop_cache);
    g->binop_cache = NULL;
}

/* ---- pools --------------------------------------------------------------------------------- */

uint32_t ir__pool_u32(IrGraph *g, const uint32_t *vals, uint32_t n) {
    if (n == 0) return 0;
    if (g->status || !ir_vec_reserve(&g->u32pool, 4, g->u32pool.len + n)) {
        ir__oom(g);
        return 0;
    }
    uint32_t off = g->u32pool.len;
    if (vals)
        memcpy(ir__u32(g, off), vals, (size_t)n * 4);
    else
        memset(ir__u32(g, off), 0, (size_t)n * 4);
    g->u32pool.len += n;
    return off;
}

uint32_t ir__pool_i64(IrGraph *g, const int64_t *vals, uint32_t n) {
    if (n == 0) return 0;
    if (g->status || !ir_vec_reserve(&g->i64pool, 8, g->i64pool.len + n)) {
        ir__oom(g);
        return 0;
    }
    uint32_t off = g->i64pool.len;
    memcpy(&IR_VEC_AT(g->i64pool, int64_t, off), vals, (size_t)n * 8);
    g->i64pool.len += n;
    return off;
}

uint32_t ir__pool_f64(IrGraph *g, const double *vals, uint32_t n) {
    if (n == 0) return 0;
    if (g->status || !ir_vec_reserve(&g->f64pool, 8, g->f64pool.len + n)) {
        ir__oom(g);
        return 0;
    }
    uint32_t off = g->f64pool.len;
    memcpy(&IR_VEC_AT(g->f64pool, double, off), vals, (size_t)n * 8);
    g->f64pool.len += n;
    return off;
}

/* ---- strings ------------------------------------------------------------------------------- */

const char *ir_str(const IrGraph *g, IrStrId id) {
    if (id >= g->str_offs.len) return "";
    return (const char *)g->str_bytes.data + IR_VEC_AT(g->str_offs, uint32_t, id);
}

static uint64_t str_hash_of(const IrGraph *g, uint32_t id) {
    const char *s = ir_str(g, id);
    return ir_hash_bytes(s, strlen(s), 0);
}

typedef struct StrKey {
    const char *s;
    size_t n;
} StrKey;

static bool str_eq(const IrGraph *g, uint32_t id, const void *key) {
    const StrKey *k = key;
    const char *s = ir_str(g, id);
    return strncmp(s, k->s, k->n) == 0 && s[k->n] == 0;
}

static bool str_hash_build(IrGraph *g) {
    if (g->str_hash_ok) return true;
    ir_hash_free(&g->str_hash);
    for (uint32_t id = 1; id < g->str_offs.len; id++) {
        if (!hash_insert(&g->str_hash, str_hash_of(g, id), id)) return false;
    }
    g->str_hash_ok = true;
    return true;
}

IrStrId ir__str_find_hashed(const IrGraph *g, const char *s, size_t n, uint64_t hv) {
    if (n == 0) return 0;
    if (!g->str_hash_ok && !str_hash_build((IrGraph *)g)) return 0;
    StrKey k = {s, n};
    return hash_find(&g->str_hash, g, hv, str_eq, &k);
}

IrStrId ir_str_find(const IrGraph *g, const char *s, size_t n) {
    return ir__str_find_hashed(g, s, n, ir_hash_bytes(s, n, 0));
}

IrStrId ir_str_intern(IrGraph *g, const char *s, size_t n) {
    if (n && memchr(s, 0, n)) n = strlen(s); /* strings never hold NUL */
    return ir__str_intern_hashed(g, s, n, ir_hash_bytes(s, n, 0));
}

IrStrId ir__str_intern_hashed(IrGraph *g, const char *s, size_t n, uint64_t hv) {
    if (n == 0 || g->status) return 0;
    if (!g->str_hash_ok && !str_hash_build(g)) goto oom;
    StrKey k = {s, n};
    IrStrId id = hash_find(&g->str_hash, g, hv, str_eq, &k);
    if (id) return id;
    if (n > UINT32_MAX - 1 - g->str_bytes.len) goto oom;
    /* s may point into the table itself (a name copied from the graph): growing moves it */
    const char *base = g->str_bytes.data;
    bool inside = base && s >= base && s < base + g->str_bytes.len;
    size_t rel = inside ? (size_t)(s - base) : 0;
    if (!ir_vec_reserve(&g->str_bytes, 1, g->str_bytes.len + (uint32_t)n + 1)) goto oom;
    if (!ir_vec_reserve(&g->str_offs, 4, g->str_offs.len + 1)) goto oom;
    if (inside) s = (const char *)g->str_bytes.data + rel;
    uint32_t off = g->str_bytes.len;
    memcpy((char *)g->str_bytes.data + off, s, n);
    ((char *)g->str_bytes.data)[off + n] = 0;
    g->str_bytes.len += (uint32_t)n + 1;
    id = g->str_offs.len;
    IR_VEC_AT(g->str_offs, uint32_t, g->str_offs.len++) = off;
    if (!hash_insert(&g->str_hash, hv, id)) goto oom;
    return id;
oom:
    ir__oom(g);
    return 0;
}

void ir__str_prefetch(const IrGraph *g, uint64_t hv) {
    if (!g->str_hash.cap) return;
    __builtin_prefetch(&g->str_hash.ent[(uint32_t)(hv >> 32) & (g->str_hash.cap - 1)], 1);
}

IrStrId ir__str_append(IrGraph *g, const char *s, size_t n) {
    if (n == 0 || g->status) return 0;
    if (memchr(s, 0, n)) n = strlen(s);
    const char *base = g->str_bytes.data; /* s may point into the table, which may move */
    bool inside = base && s >= base && s < base + g->str_bytes.len;
    size_t rel = inside ? (size_t)(s - base) : 0;
    if (n > UINT32_MAX - 1 - g->str_bytes.len || !ir_vec_reserve(&g->str_bytes, 1, g->str_bytes.len + (uint32_t)n + 1) ||
        !ir_vec_reserve(&g->str_offs, 4, g->str_offs.len + 1)) {
        ir__oom(g);
        return 0;
    }
    if (inside) s = (const char *)g->str_bytes.data + rel;
    uint32_t off = g->str_bytes.len;
    memcpy((char *)g->str_bytes.data + off, s, n);
    ((char *)g->str_bytes.data)[off + n] = 0;
    g->str_bytes.len += (uint32_t)n + 1;
    IR_VEC_AT(g->str_offs, uint32_t, g->str_offs.len++) = off;
    return g->str_offs.len - 1;
}

IrStrId ir_str_intern_cstr(IrGraph *g, const char *s) { return s ? ir_str_intern(g, s, strlen(s)) : 0; }

/* ---- symbols, expressions, constraints ---------------------------------------------------- */

uint32_t ir_graph_num_syms(const IrGraph *g) { return g->syms.len - 1; }
bool ir_sym_specialized(const IrGraph *g, IrSymId s) {
    return s && s < g->syms.len && IR_VEC_AT(g->syms, IrSymRec, s).specialized;
}

IrSymId ir_sym_find(const IrGraph *g, const char *name, size_t n) {
    IrStrId s = ir_str_find(g, name, n);
    if (!s) return 0;
    for (uint32_t i = 1; i < g->syms.len; i++)
        if (IR_VEC_AT(g->syms, IrSymRec, i).name == s && !IR_VEC_AT(g->syms, IrSymRec, i).specialized) return i;
    return 0;
}

IrSymId ir_sym_declare(IrGraph *g, const char *name) {
    IrSymId s = ir_sym_find(g, name, strlen(name));
    if (s) return s;
    IrSymRec r = {ir_str_intern_cstr(g, name), 0};
    if (!r.name) return 0;
    PUSH(g, g->syms, IrSymRec, r, return 0);
    return g->syms.len - 1;
}

const char *ir_sym_name(const IrGraph *g, IrSymId s) {
    if (s == 0 || s >= g->syms.len) return "?";
    return ir_str(g, IR_VEC_AT(g->syms, IrSymRec, s).name);
}

static uint64_t expr_hash_rec(const IrExprRec *e) {
    uint64_t k[3] = {e->kind, ((uint64_t)e->a << 32) | e->b, (uint64_t)e->value};
    return ir_hash_bytes(k, sizeof k, 7);
}
static uint64_t expr_hash_of(const IrGraph *g, uint32_t id) { return expr_hash_rec(ir__expr(g, id)); }
static bool expr_eq(const IrGraph *g, uint32_t id, const void *key) {
    const IrExprRec *a = ir__expr(g, id), *b = key;
    return a->kind == b->kind && a->a == b->a && a->b == b->b && a->value == b->value;
}

IrExprId ir__expr_intern(IrGraph *g, IrExprRec rec) {
    if (g->status) return 0;
    if (!g->expr_hash_ok) {
        ir_hash_free(&g->expr_hash);
        for (uint32_t id = 1; id < g->exprs.len; id++)
            if (!hash_insert(&g->expr_hash, expr_hash_of(g, id), id)) goto oom;
        g->expr_hash_ok = true;
    }
    uint64_t hv = expr_hash_rec(&rec);
    IrExprId id = hash_find(&g->expr_hash, g, hv, expr_eq, &rec);
    if (id) return id;
    PUSH(g, g->exprs, IrExprRec, rec, return 0);
    id = g->exprs.len - 1;
    if (!hash_insert(&g->expr_hash, hv, id)) goto oom;
    return id;
oom:
    ir__oom(g);
    return 0;
}

IrExprId ir_expr_const(IrGraph *g, int64_t v) {
    /* small constants are asked for all the time by the type rules: skip the hash for them */
    bool small = v >= -1 && v <= 256;
    if (small && g->small_const[v + 1]) return g->small_const[v + 1];
    IrExprRec r = {.kind = IR_EXPR_CONST, .value = v};
    IrExprId id = ir__expr_intern(g, r);
    if (small) g->small_const[v + 1] = id;
    return id;
}
IrExprId ir_expr_unknown(IrGraph *g) {
    IrExprRec r = {.kind = IR_EXPR_UNKNOWN};
    return ir__expr_intern(g, r);
}
IrExprId ir_expr_sym(IrGraph *g, IrSymId s) {
    if (s == 0 || s >= g->syms.len) return 0;
    IrExprRec r = {.kind = IR_EXPR_SYM, .a = s};
    return ir__expr_intern(g, r);
}

IrExprKind ir_expr_kind(const IrGraph *g, IrExprId e) {
    return e && e < g->exprs.len ? (IrExprKind)ir__expr(g, e)->kind : IR_EXPR_UNKNOWN;
}
int64_t ir_expr_const_value(const IrGraph *g, IrExprId e) { return ir__expr(g, e)->value; }
IrSymId ir_expr_sym_id(const IrGraph *g, IrExprId e) { return ir__expr(g, e)->a; }
IrExprId ir_expr_lhs(const IrGraph *g, IrExprId e) { return ir__expr(g, e)->a; }
IrExprId ir_expr_rhs(const IrGraph *g, IrExprId e) { return ir__expr(g, e)->b; }

bool ir_expr_is_const(const IrGraph *g, IrExprId e, int64_t *value) {
    if (!e || e >= g->exprs.len || ir__expr(g, e)->kind != IR_EXPR_CONST) return false;
    if (value) *value = ir__expr(g, e)->value;
    return true;
}

void ir_graph_add_constraint(IrGraph *g, const IrConstraint *c) {
    IrConstraintRec r = {.kind = c->kind, .a = c->a, .b = c->kind == IR_CONSTRAINT_EQ ? c->b : 0,
                         .origin = c->origin, .lo = c->lo, .hi = c->kind == IR_CONSTRAINT_RANGE ? c->hi : 0,
                         .note = c->note};
    for (uint32_t i = 0; i < g->constraints.len; i++) {
        const IrConstraintRec *o = &IR_VEC_AT(g->constraints, IrConstraintRec, i);
        if (o->kind == r.kind && o->a == r.a && o->b == r.b && o->lo == r.lo && o->hi == r.hi && o->origin == r.origin)
            return;
    }
    PUSH(g, g->constraints, IrConstraintRec, r, return);
}
void ir_graph_clear_constraints(IrGraph *g, IrConstraintOrigin origin) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->constraints.len; i++)
        if (IR_VEC_AT(g->constraints, IrConstraintRec, i).origin != (uint32_t)origin)
            IR_VEC_AT(g->constraints, IrConstraintRec, k++) = IR_VEC_AT(g->constraints, IrConstraintRec, i);
    g->constraints.len = k;
}
uint32_t ir_graph_num_constraints(const IrGraph *g) { return g->constraints.len; }
IrConstraint ir_graph_constraint(const IrGraph *g, uint32_t i) {
    IrConstraintRec r = IR_VEC_AT(g->constraints, IrConstraintRec, i);
    IrConstraint c = {.kind = (IrConstraintKind)r.kind, .a = r.a, .b = r.b, .lo = r.lo, .hi = r.hi,
                      .origin = (IrConstraintOrigin)r.origin, .note = r.note};
    return c;
}

void ir_constraint_print(const IrGraph *g, const IrConstraint *c, IrStrBuf *b) {
    ir_expr_print(g, c->a, b);
    switch (c->kind) {
    case IR_CONSTRAINT_RANGE: ir_strbuf_printf(b, " in [%lld, %lld]", (long long)c->lo, (long long)c->hi); break;
    case IR_CONSTRAINT_EQ:
        ir_strbuf_puts(b, " == ");
        ir_expr_print(g, c->b, b);
        break;
    case IR_CONSTRAINT_DIVISIBLE: ir_strbuf_printf(b, " %% %lld == 0", (long long)c->lo); break;
    }
}

/* ---- types --------------------------------------------------------------------------------- */

typedef struct TypeKey {
    uint8_t dtype, kind;
    uint32_t rank;
    const uint32_t *dims;
    uint32_t elem; /* seq/opt */
} TypeKey;

static uint64_t type_hash_key(const TypeKey *k) {
    if (k->kind != IR_TYPE_TENSOR)
        return ir_hash_bytes(&k->elem, 4, ((uint64_t)(0x100u | k->kind) << 32) ^ 0x5e9u);
    uint32_t r = k->rank == IR_RANK_UNKNOWN ? 0 : k->rank;
    uint64_t h = ir_hash_bytes(k->dims, (size_t)r * 4, ((uint64_t)k->dtype << 32) ^ k->rank);
    return h;
}
static uint64_t type_hash_of(const IrGraph *g, uint32_t id) {
    const IrTypeRec *t = ir__type(g, id);
    TypeKey k = {t->dtype, t->kind, t->rank, t->kind == IR_TYPE_TENSOR ? ir__u32(g, t->dims) : NULL,
                 t->kind == IR_TYPE_TENSOR ? 0 : t->dims};
    return type_hash_key(&k);
}
static bool type_eq(const IrGraph *g, uint32_t id, const void *key) {
    const IrTypeRec *t = ir__type(g, id);
    const TypeKey *k = key;
    if (t->kind != k->kind) return false;
    if (t->kind != IR_TYPE_TENSOR) return t->dims == k->elem;
    if (t->dtype != k->dtype || t->rank != k->rank) return false;
    if (t->rank == IR_RANK_UNKNOWN || t->rank == 0) return true;
    return memcmp(ir__u32(g, t->dims), k->dims, (size_t)t->rank * 4) == 0;
}

static bool type_hash_ready(IrGraph *g) {
    if (g->type_hash_ok) return true;
    ir_hash_free(&g->type_hash);
    for (uint32_t id = 1; id < g->types.len; id++)
        if (!hash_insert(&g->type_hash, type_hash_of(g, id), id)) return false;
    g->type_hash_ok = true;
    return true;
}

IrTypeId ir_type_tensor(IrGraph *g, IrDType dt, uint32_t rank, const IrExprId *dims) {
    if (g->status) return 0;
    if (dt <= IR_DTYPE_NONE || dt >= IR_DTYPE_COUNT) return 0;
    if (rank != IR_RANK_UNKNOWN && rank > 0xFFFF) return 0;
    if (!type_hash_ready(g)) goto oom;
    uint32_t r = rank == IR_RANK_UNKNOWN ? 0 : rank;
    for (uint32_t i = 0; i < r; i++)
        if (!dims[i] || dims[i] >= g->exprs.len) return 0;
    TypeKey k = {(uint8_t)dt, IR_TYPE_TENSOR, rank, dims, 0};
    uint64_t hv = type_hash_key(&k);
    IrTypeId id = hash_find(&g->type_hash, g, hv, type_eq, &k);
    if (id) return id;
    IrTypeRec rec = {.dtype = (uint8_t)dt, .rank = rank, .dims = 0};
    if (r) {
        rec.dims = ir__pool_u32(g, dims, r);
        if (!rec.dims) return 0;
    }
    PUSH(g, g->types, IrTypeRec, rec, return 0);
    id = g->types.len - 1;
    if (!hash_insert(&g->type_hash, hv, id)) goto oom;
    return id;
oom:
    ir__oom(g);
    return 0;
}

/* seq<elem> / opt<elem>: the element id is stored in `dims` and is always older than the
 * container (types are created bottom up), which keeps the table acyclic. */
static IrTypeId type_container(IrGraph *g, IrTypeKind kind, IrTypeId elem) {
    if (g->status) return 0;
    if (elem >= g->types.len) return 0;
    if (!type_hash_ready(g)) goto oom;
    TypeKey k = {0, (uint8_t)kind, IR_RANK_UNKNOWN, NULL, elem};
    uint64_t hv = type_hash_key(&k);
    IrTypeId id = hash_find(&g->type_hash, g, hv, type_eq, &k);
    if (id) return id;
    IrTypeRec rec = {.dtype = IR_DTYPE_NONE, .kind = (uint8_t)kind, .rank = IR_RANK_UNKNOWN, .dims = elem};
    PUSH(g, g->types, IrTypeRec, rec, return 0);
    id = g->types.len - 1;
    if (!hash_insert(&g->type_hash, hv, id)) goto oom;
    return id;
oom:
    ir__oom(g);
    return 0;
}

IrTypeId ir_type_seq(IrGraph *g, IrTypeId elem) {
    if (ir_type_kind(g, elem) != IR_TYPE_TENSOR) return 0;
    return type_container(g, IR_TYPE_SEQ, elem);
}

IrTypeId ir_type_opt(IrGraph *g, IrTypeId inner) {
    if (ir_type_kind(g, inner) == IR_TYPE_OPT) return 0;
    return type_container(g, IR_TYPE_OPT, inner);
}

IrTypeKind ir_type_kind(const IrGraph *g, IrTypeId t) {
    return t && t < g->types.len ? (IrTypeKind)ir__type(g, t)->kind : IR_TYPE_TENSOR;
}

IrTypeId ir_type_elem(const IrGraph *g, IrTypeId t) {
    return ir_type_kind(g, t) != IR_TYPE_TENSOR ? ir__type(g, t)->dims : 0;
}

bool ir_type_is_container(const IrGraph *g, IrTypeId t) { return ir_type_kind(g, t) != IR_TYPE_TENSOR; }

IrDType ir_type_elem_dtype(const IrGraph *g, IrTypeId t) {
    while (ir_type_kind(g, t) != IR_TYPE_TENSOR) t = ir_type_elem(g, t);
    return ir_type_dtype(g, t);
}

bool ir_type_compatible(const IrGraph *g, IrTypeId a, IrTypeId b) {
    if (!a || !b || a == b) return true;
    IrTypeKind ka = ir_type_kind(g, a), kb = ir_type_kind(g, b);
    if (ka != kb) return false;
    if (ka != IR_TYPE_TENSOR) return ir_type_compatible(g, ir_type_elem(g, a), ir_type_elem(g, b));
    if (ir_type_dtype(g, a) != ir_type_dtype(g, b)) return false;
    uint32_t ra = ir_type_rank(g, a), rb = ir_type_rank(g, b);
    if (ra == IR_RANK_UNKNOWN || rb == IR_RANK_UNKNOWN) return true;
    if (ra != rb) return false;
    for (uint32_t i = 0; i < ra; i++) {
        int64_t x, y;
        if (ir_expr_is_const(g, ir_type_dims(g, a)[i], &x) && ir_expr_is_const(g, ir_type_dims(g, b)[i], &y) &&
            x != y)
            return false;
    }
    return true;
}

IrTypeId ir_type_join(IrGraph *g, IrTypeId a, IrTypeId b) {
    if (a == b) return a;
    if (!a || !b) return 0;
    IrTypeKind k = ir_type_kind(g, a);
    if (k != ir_type_kind(g, b)) return 0;
    if (k == IR_TYPE_TENSOR && ir_type_dtype(g, a) != ir_type_dtype(g, b)) return 0;
    if (k != IR_TYPE_TENSOR) {
        IrTypeId ea = ir_type_elem(g, a), eb = ir_type_elem(g, b);
        IrTypeId e = ir_type_join(g, ea, eb);
        if (!e && ea && eb) return 0;
        return k == IR_TYPE_SEQ ? ir_type_seq(g, e) : ir_type_opt(g, e);
    }
    uint32_t ra = ir_type_rank(g, a), rb = ir_type_rank(g, b);
    if (ra != rb || ra == IR_RANK_UNKNOWN) return ir_type_tensor(g, ir_type_dtype(g, a), IR_RANK_UNKNOWN, NULL);
    IrExprId small[16], *d = ra <= 16 ? small : malloc(ra * sizeof *d);
    if (!d) {
        ir__oom(g);
        return 0;
    }
    for (uint32_t i = 0; i < ra; i++) {
        IrExprId x = ir_type_dims(g, a)[i], y = ir_type_dims(g, b)[i];
        d[i] = x == y ? x : ir_expr_unknown(g);
    }
    IrTypeId t = ir_type_tensor(g, ir_type_dtype(g, a), ra, d);
    if (d != small) free(d);
    return t;
}

IrTypeId ir_type_tensor_i64(IrGraph *g, IrDType dt, uint32_t rank, const int64_t *dims) {
    IrExprId small[16] = {0};
    IrExprId *d = rank <= 16 ? small : malloc((size_t)rank * sizeof *d);
    if (!d) {
        ir__oom(g);
        return 0;
    }
    for (uint32_t i = 0; i < rank; i++)
        d[i] = dims[i] < 0 ? ir_expr_unknown(g) : ir_expr_const(g, dims[i]);
    IrTypeId t = ir_type_tensor(g, dt, rank, d);
    if (d != small) free(d);
    return t;
}

IrDType ir_type_dtype(const IrGraph *g, IrTypeId t) {
    return t && t < g->types.len ? (IrDType)ir__type(g, t)->dtype : IR_DTYPE_NONE;
}
uint32_t ir_type_rank(const IrGraph *g, IrTypeId t) {
    return t && t < g->types.len ? ir__type(g, t)->rank : IR_RANK_UNKNOWN;
}
const IrExprId *ir_type_dims(const IrGraph *g, IrTypeId t) {
    if (!t || t >= g->types.len || ir__type(g, t)->kind != IR_TYPE_TENSOR) return NULL;
    return ir__u32(g, ir__type(g, t)->dims);
}

bool ir_type_numel(const IrGraph *g, IrTypeId t, int64_t *out) {
    uint32_t r = ir_type_rank(g, t);
    if (r == IR_RANK_UNKNOWN) return false;
    const IrExprId *d = ir_type_dims(g, t);
    int64_t n = 1;
    for (uint32_t i = 0; i < r; i++) {
        int64_t v;
        if (!ir_expr_is_const(g, d[i], &v) || v < 0) return false;
        if (__builtin_mul_overflow(n, v, &n)) return false;
    }
    *out = n;
    return true;
}

void ir_type_print(const IrGraph *g, IrTypeId t, IrStrBuf *b) {
    if (!t || t >= g->types.len) {
        ir_strbuf_putc(b, '?');
        return;
    }
    const IrTypeRec *r = ir__type(g, t);
    if (r->kind != IR_TYPE_TENSOR) {
        /* seq<f32[?, 3]>; an element of unknown shape prints as its dtype alone: seq<f32> */
        ir_strbuf_puts(b, r->kind == IR_TYPE_SEQ ? "seq<" : "opt<");
        IrTypeId e = r->dims;
        if (e && ir_type_kind(g, e) == IR_TYPE_TENSOR && ir_type_rank(g, e) == IR_RANK_UNKNOWN)
            ir_strbuf_puts(b, ir_dtype_name(ir_type_dtype(g, e)));
        else
            ir_type_print(g, e, b);
        ir_strbuf_putc(b, '>');
        return;
    }
    ir_strbuf_puts(b, ir_dtype_name((IrDType)r->dtype));
    if (r->rank == IR_RANK_UNKNOWN) {
        ir_strbuf_puts(b, "[*]");
        return;
    }
    ir_strbuf_putc(b, '[');
    for (uint32_t i = 0; i < r->rank; i++) {
        if (i) ir_strbuf_puts(b, ", ");
        ir_expr_print(g, ir__u32(g, r->dims)[i], b);
    }
    ir_strbuf_putc(b, ']');
}

/* ---- values -------------------------------------------------------------------------------- */

/* Value names map through a per-string index: name_hash.slots[strid] = value id. */
static bool name_index_build(IrGraph *g) {
    if (g->name_hash_ok && g->name_hash.cap >= g->str_offs.len) return true;
    uint32_t cap = g->str_offs.len + g->str_offs.len / 2 + 64;
    uint32_t *ns = calloc(cap, 4);
    if (!ns) return false;
    if (g->name_hash_ok) {
        memcpy(ns, g->name_hash.slots, (size_t)g->name_hash.cap * 4);
    } else {
        for (uint32_t v = 1; v < g->values.len; v++) {
            const IrValueRec *r = ir__val(g, v);
            if (r->name && r->kind) ns[r->name] = v;
        }
        /* dead results must not hold their names */
        for (uint32_t n = 1; n < g->nodes.len; n++) {
            const IrNodeRec *nr = ir__node(g, n);
            if (!(nr->flags & IR_NODE_DEAD)) continue;
            for (uint32_t i = 0; i < nr->n_results; i++) {
                IrValueId rv = ir__u32(g, nr->results)[i];
                if (rv && ns[ir__val(g, rv)->name] == rv) ns[ir__val(g, rv)->name] = 0;
            }
        }
    }
    free(g->name_hash.slots);
    g->name_hash.slots = ns;
    g->name_hash.cap = cap;
    g->name_hash_ok = true;
    return true;
}

static uint32_t name_lookup(IrGraph *g, IrStrId s) {
    if (!s) return 0;
    if (!name_index_build(g)) {
        ir__oom(g);
        return 0;
    }
    return s < g->name_hash.cap ? g->name_hash.slots[s] : 0;
}

static void name_set(IrGraph *g, IrStrId s, IrValueId v) {
    if (!s) return;
    if (!name_index_build(g)) {
        ir__oom(g);
        return;
    }
    g->name_hash.slots[s] = v;
}

IrStrId ir__unique_value_name(IrGraph *g) {
    char buf[32];
    for (;;) {
        snprintf(buf, sizeof buf, "t%u", ++g->name_counter);
        IrStrId s = ir_str_intern_cstr(g, buf);
        if (!s) return 0;
        if (!name_lookup(g, s)) return s;
    }
}

IrValueId ir__value_new(IrGraph *g, IrStrId name, IrValueKind kind, uint32_t def, uint32_t index,
                        IrTypeId type) {
    if (g->status) return 0;
    if (!name) name = ir__unique_value_name(g);
    if (!name || name_lookup(g, name)) return 0;
    IrValueRec r = {.name = name, .type = type, .def = def, .index = index, .kind = kind};
    PUSH(g, g->values, IrValueRec, r, return 0);
    IrValueId v = g->values.len - 1;
    name_set(g, name, v);
    return v;
}

uint32_t ir_graph_num_values(const IrGraph *g) { return g->values.len - 1; }
IrValueKind ir_value_kind(const IrGraph *g, IrValueId v) { return (IrValueKind)ir__val(g, v)->kind; }
const char *ir_value_name(const IrGraph *g, IrValueId v) { return ir_str(g, ir__val(g, v)->name); }
IrStrId ir_value_name_id(const IrGraph *g, IrValueId v) { return ir__val(g, v)->name; }
IrTypeId ir_value_type(const IrGraph *g, IrValueId v) { return v ? ir__val(g, v)->type : 0; }
void ir_value_set_type(IrGraph *g, IrValueId v, IrTypeId t) { ir__val(g, v)->type = t; }
IrNodeId ir_value_def_node(const IrGraph *g, IrValueId v) {
    return ir__val(g, v)->kind == IR_VALUE_RESULT ? ir__val(g, v)->def : 0;
}
uint32_t ir_value_def_index(const IrGraph *g, IrValueId v) { return ir__val(g, v)->index; }
IrRegionId ir_value_def_region(const IrGraph *g, IrValueId v) {
    return ir__val(g, v)->kind == IR_VALUE_ARG ? ir__val(g, v)->def : 0;
}
IrConstId ir_value_const(const IrGraph *g, IrValueId v) {
    return ir__val(g, v)->kind == IR_VALUE_CONST ? ir__val(g, v)->def : 0;
}

IrValueId ir__value_by_name(IrGraph *g, IrStrId name) { return name_lookup(g, name); }

IrValueId ir_value_find(const IrGraph *g, const char *name, size_t n) {
    IrStrId s = ir_str_find(g, name, n);
    return s ? name_lookup((IrGraph *)g, s) : 0;
}

IrStatus ir_value_rename(IrGraph *g, IrValueId v, const char *name) {
    IrStrId s = ir_str_intern_cstr(g, name);
    if (!s) return g->status ? g->status : IR_EINVAL;
    IrValueId other = name_lookup(g, s);
    if (other == v) return IR_OK;
    if (other) return IR_EINVAL;
    IrValueRec *r = ir__val(g, v);
    if (name_lookup(g, r->name) == v) name_set(g, r->name, 0);
    r->name = s;
    name_set(g, s, v);
    return g->status;
}

/* ---- constants ----------------------------------------------------------------------------- */

static IrConstId const_new(IrGraph *g, IrTypeId type, const void *data, size_t nbytes) {
    IrConstRec r = {.type = type, .data = data, .nbytes = nbytes};
    PUSH(g, g->consts, IrConstRec, r, return 0);
    return g->consts.len - 1;
}

IrConstId ir_const_create(IrGraph *g, IrTypeId type, const void *data, size_t nbytes) {
    if (g->status) return 0;
    void *p = ir__alloc_block(g, nbytes);
    if (!p) return 0;
    if (nbytes) {
        if (data)
            memcpy(p, data, nbytes);
        else
            memset(p, 0, nbytes);
    }
    return const_new(g, type, p, nbytes);
}

IrConstId ir_const_create_strings(IrGraph *g, IrTypeId type, const IrStringElem *elems, size_t n) {
    if (g->status) return 0;
    size_t nbytes = ir_string_blob_size(elems, n);
    void *p = ir__alloc_block(g, nbytes);
    if (!p) return 0;
    ir_string_blob_write(elems, n, p);
    return const_new(g, type, p, nbytes);
}

IrConstId ir_const_create_borrowed(IrGraph *g, IrTypeId type, const void *data, size_t nbytes) {
    if (g->status) return 0;
    return const_new(g, type, data, nbytes);
}

IrTypeId ir_const_type(const IrGraph *g, IrConstId c) { return ir__const(g, c)->type; }
const void *ir_const_data(const IrGraph *g, IrConstId c) { return ir__const(g, c)->data; }
size_t ir_const_nbytes(const IrGraph *g, IrConstId c) { return ir__const(g, c)->nbytes; }
uint32_t ir_graph_num_consts(const IrGraph *g) { return g->consts.len - 1; }

void ir_const_set_external(IrGraph *g, IrConstId c, IrStrId path, uint64_t offset) {
    ir__const(g, c)->ext_path = path;
    ir__const(g, c)->ext_offset = offset;
}

bool ir_const_external(const IrGraph *g, IrConstId c, IrStrId *path, uint64_t *offset) {
    const IrConstRec *r = ir__const(g, c);
    if (!r->ext_path) return false;
    *path = r->ext_path;
    *offset = r->ext_offset;
    return true;
}

IrValueId ir_graph_add_const_value(IrGraph *g, const char *name, IrConstId c) {
    if (g->status || !c) return 0;
    IrStrId s = name ? ir_str_intern_cstr(g, name) : 0;
    IrValueId v = ir__value_new(g, s, IR_VALUE_CONST, c, 0, ir__const(g, c)->type);
    if (!v) return 0;
    PUSH(g, g->const_values, uint32_t, v, return 0);
    return v;
}
uint32_t ir_graph_num_const_values(const IrGraph *g) { return g->const_values.len; }

void ir_graph_remove_unused_consts(IrGraph *g, const uint32_t *uses) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->const_values.len; i++) {
        IrValueId v = IR_VEC_AT(g->const_values, uint32_t, i);
        if (uses[v]) {
            IR_VEC_AT(g->const_values, uint32_t, k++) = v;
        } else if (name_lookup(g, ir__val(g, v)->name) == v) {
            name_set(g, ir__val(g, v)->name, 0); /* the name is free again */
        }
    }
    g->const_values.len = k;
}
IrValueId ir_graph_const_value(const IrGraph *g, uint32_t i) {
    return IR_VEC_AT(g->const_values, uint32_t, i);
}

/* ---- regions ------------------------------------------------------------------------------- */

uint32_t ir_graph_num_regions(const IrGraph *g) { return g->regions.len - 1; }
IrNodeId ir_region_parent(const IrGraph *g, IrRegionId r) { return ir__region(g, r)->parent; }
IrNodeId ir_region_first(const IrGraph *g, IrRegionId r) { return ir__region(g, r)->first; }
IrNodeId ir_region_last(const IrGraph *g, IrRegionId r) { return ir__region(g, r)->last; }
uint32_t ir_region_num_args(const IrGraph *g, IrRegionId r) { return ir__region(g, r)->n_args; }
IrValueId ir_region_arg(const IrGraph *g, IrRegionId r, uint32_t i) {
    return ir__u32(g, ir__region(g, r)->args)[i];
}
uint32_t ir_region_num_outputs(const IrGraph *g, IrRegionId r) { return ir__region(g, r)->n_outs; }
IrValueId ir_region_output(const IrGraph *g, IrRegionId r, uint32_t i) {
    return ir__u32(g, ir__region(g, r)->outs)[i];
}

IrValueId ir_region_add_arg(IrGraph *g, IrRegionId r, const char *name, IrTypeId type) {
    if (g->status) return 0;
    IrRegionRec *rr = ir__region(g, r);
    IrStrId s = name ? ir_str_intern_cstr(g, name) : 0;
    IrValueId v = ir__value_new(g, s, IR_VALUE_ARG, r, rr->n_args, type);
    if (!v) return 0;
    rr = ir__region(g, r);
    /* extend in place when the slice ends the pool, else copy */
    if (rr->n_args && rr->args + rr->n_args == g->u32pool.len) {
        if (!ir__pool_u32(g, &v, 1)) return 0;
    } else {
        uint32_t off = ir__pool_u32(g, NULL, rr->n_args + 1);
        if (!off) return 0;
        rr = ir__region(g, r);
        if (rr->n_args) memcpy(ir__u32(g, off), ir__u32(g, rr->args), (size_t)rr->n_args * 4);
        ir__u32(g, off)[rr->n_args] = v;
        rr->args = off;
    }
    rr->n_args++;
    return v;
}

void ir_region_set_outputs(IrGraph *g, IrRegionId r, uint32_t n, const IrValueId *vals) {
    uint32_t off = ir__pool_u32(g, vals, n);
    if (n && !off) return;
    ir__region(g, r)->outs = off;
    ir__region(g, r)->n_outs = n;
}

/* ---- nodes --------------------------------------------------------------------------------- */

static void node_link(IrGraph *g, IrNodeId n, IrRegionId r, IrNodeId before) {
    IrNodeRec *nr = ir__node(g, n);
    IrRegionRec *rr = ir__region(g, r);
    nr->region = r;
    if (!before) {
        nr->prev = rr->last;
        nr->next = 0;
        if (rr->last)
            ir__node(g, rr->last)->next = n;
        else
            rr->first = n;
        rr->last = n;
    } else {
        IrNodeRec *br = ir__node(g, before);
        nr->prev = br->prev;
        nr->next = before;
        if (br->prev)
            ir__node(g, br->prev)->next = n;
        else
            rr->first = n;
        br->prev = n;
    }
}

static void node_unlink(IrGraph *g, IrNodeId n) {
    IrNodeRec *nr = ir__node(g, n);
    IrRegionRec *rr = ir__region(g, nr->region);
    if (nr->prev)
        ir__node(g, nr->prev)->next = nr->next;
    else
        rr->first = nr->next;
    if (nr->next)
        ir__node(g, nr->next)->prev = nr->prev;
    else
        rr->last = nr->prev;
    nr->prev = nr->next = 0;
}

IrNodeId ir__node_create(IrGraph *g, IrRegionId r, IrNodeId before, IrOp op, uint32_t n_operands,
                         const IrValueId *operands, uint32_t n_results, const IrStrId *names,
                         const IrTypeId *result_types) {
    if (g->status) return 0;
    if (op <= IR_OP_NONE || op >= IR_OP_COUNT || n_operands > 0xFFFF || n_results > 0xFFFF)
        return 0;
    if (r == 0 || r >= g->regions.len) return 0;
    /* a taken (or repeated) result name refuses the node before anything is created */
    for (uint32_t i = 0; names && i < n_results; i++) {
        IrStrId s = names[i];
        if (!s || s == IR_ABSENT_NAME) continue;
        if (name_lookup(g, s)) return 0;
        for (uint32_t k = 0; k < i; k++)
            if (names[k] == s) return 0;
    }
    IrNodeRec rec = {0};
    rec.op = (uint16_t)op;
    rec.n_operands = (uint16_t)n_operands;
    rec.n_results = (uint16_t)n_results;
    rec.operands = ir__pool_u32(g, operands, n_operands);
    rec.results = ir__pool_u32(g, NULL, n_results);
    if (g->status) return 0;
    PUSH(g, g->nodes, IrNodeRec, rec, return 0);
    IrNodeId n = g->nodes.len - 1;
    for (uint32_t i = 0; i < n_results; i++) {
        IrStrId s = names ? names[i] : 0;
        if (s == IR_ABSENT_NAME) continue; /* absent optional result */
        IrValueId v = ir__value_new(g, s, IR_VALUE_RESULT, n, i, result_types ? result_types[i] : 0);
        if (!v) return 0; /* only an allocation failure gets here (names were checked) */
        ir__u32(g, ir__node(g, n)->results)[i] = v;
    }
    uint32_t nreg = ir_op_num_regions(op);
    if (nreg) {
        uint32_t off = ir__pool_u32(g, NULL, nreg);
        if (!off) return 0;
        for (uint32_t i = 0; i < nreg; i++) {
            IrRegionRec rr = {.parent = n};
            PUSH(g, g->regions, IrRegionRec, rr, return 0);
            ir__u32(g, off)[i] = g->regions.len - 1;
        }
        ir__node(g, n)->regions = off;
        ir__node(g, n)->n_regions = (uint16_t)nreg;
    }
    node_link(g, n, r, before);
    g->n_live_nodes++;
    return n;
}

static IrNodeId node_create(IrGraph *g, IrRegionId r, IrNodeId before, IrOp op, uint32_t n_operands,
                            const IrValueId *operands, uint32_t n_results,
                            const char *const *result_names, const IrTypeId *result_types) {
    IrStrId small[8] = {0}, *ids = n_results <= 8 ? small : calloc(n_results, sizeof *ids);
    if (!ids) {
        ir__oom(g);
        return 0;
    }
    for (uint32_t i = 0; i < n_results; i++)
        ids[i] = result_names && result_names[i] ? ir_str_intern_cstr(g, result_names[i]) : 0;
    IrNodeId n = ir__node_create(g, r, before, op, n_operands, operands, n_results, ids, result_types);
    if (ids != small) free(ids);
    return n;
}

IrNodeId ir_node_create(IrGraph *g, IrRegionId r, IrOp op, uint32_t n_operands,
                        const IrValueId *operands, uint32_t n_results,
                        const char *const *result_names, const IrTypeId *result_types) {
    return node_create(g, r, 0, op, n_operands, operands, n_results, result_names, result_types);
}

IrNodeId ir_node_create_before(IrGraph *g, IrNodeId before, IrOp op, uint32_t n_operands,
                               const IrValueId *operands, uint32_t n_results,
                               const char *const *result_names, const IrTypeId *result_types) {
    if (!before || before >= g->nodes.len) return 0;
    return node_create(g, ir__node(g, before)->region, before, op, n_operands, operands, n_results,
                       result_names, result_types);
}

bool ir_node_alive(const IrGraph *g, IrNodeId n) {
    return n && n < g->nodes.len && !(ir__node(g, n)->flags & IR_NODE_DEAD);
}

static void node_kill(IrGraph *g, IrNodeId n) {
    IrNodeRec *nr = ir__node(g, n);
    for (uint32_t i = 0; i < nr->n_regions; i++) {
        IrRegionId r = ir__u32(g, nr->regions)[i];
        for (IrNodeId c = ir__region(g, r)->first; c;) {
            IrNodeId next = ir__node(g, c)->next;
            node_kill(g, c);
            c = next;
        }
        for (uint32_t a = 0; a < ir__region(g, r)->n_args; a++) {
            IrValueId v = ir__u32(g, ir__region(g, r)->args)[a];
            if (g->name_hash_ok && name_lookup(g, ir__val(g, v)->name) == v)
                name_set(g, ir__val(g, v)->name, 0);
        }
        ir__region(g, r)->first = ir__region(g, r)->last = 0;
    }
    nr = ir__node(g, n);
    for (uint32_t i = 0; i < nr->n_results; i++) {
        IrValueId v = ir__u32(g, nr->results)[i];
        if (v && g->name_hash_ok && name_lookup(g, ir__val(g, v)->name) == v)
            name_set(g, ir__val(g, v)->name, 0);
    }
    nr->flags |= IR_NODE_DEAD;
    g->n_live_nodes--;
}

void ir_node_erase(IrGraph *g, IrNodeId n) {
    if (!ir_node_alive(g, n)) return;
    node_unlink(g, n);
    node_kill(g, n);
}

void ir_node_move(IrGraph *g, IrNodeId n, IrRegionId r, IrNodeId before) {
    if (!ir_node_alive(g, n) || n == before) return;
    node_unlink(g, n);
    node_link(g, n, before ? ir__node(g, before)->region : r, before);
}

uint32_t ir_graph_node_capacity(const IrGraph *g) { return g->nodes.len - 1; }
uint32_t ir_graph_num_nodes(const IrGraph *g) { return g->n_live_nodes; }
IrOp ir_node_op(const IrGraph *g, IrNodeId n) { return (IrOp)ir__node(g, n)->op; }
IrRegionId ir_node_region(const IrGraph *g, IrNodeId n) { return ir__node(g, n)->region; }
IrNodeId ir_node_next(const IrGraph *g, IrNodeId n) { return ir__node(g, n)->next; }
IrNodeId ir_node_prev(const IrGraph *g, IrNodeId n) { return ir__node(g, n)->prev; }
uint32_t ir_node_num_operands(const IrGraph *g, IrNodeId n) { return ir__node(g, n)->n_operands; }
IrValueId ir_node_operand(const IrGraph *g, IrNodeId n, uint32_t i) {
    const IrNodeRec *nd = ir__node(g, n);
    return i < nd->n_operands ? ir__u32(g, nd->operands)[i] : 0; /* past the last: absent */
}
void ir_node_set_operand(IrGraph *g, IrNodeId n, uint32_t i, IrValueId v) {
    ir__u32(g, ir__node(g, n)->operands)[i] = v;
}
uint32_t ir_node_num_results(const IrGraph *g, IrNodeId n) { return ir__node(g, n)->n_results; }
IrValueId ir_node_result(const IrGraph *g, IrNodeId n, uint32_t i) {
    const IrNodeRec *nd = ir__node(g, n);
    return i < nd->n_results ? ir__u32(g, nd->results)[i] : 0; /* past the last: absent */
}
uint32_t ir_node_num_regions(const IrGraph *g, IrNodeId n) { return ir__node(g, n)->n_regions; }
IrRegionId ir_node_region_at(const IrGraph *g, IrNodeId n, uint32_t i) {
    return ir__u32(g, ir__node(g, n)->regions)[i];
}

const char *ir_node_name(const IrGraph *g, IrNodeId n) { return ir_str(g, ir__node(g, n)->name); }
void ir_node_set_name(IrGraph *g, IrNodeId n, const char *name) {
    ir__node(g, n)->name = name ? ir__str_append(g, name, strlen(name)) : 0;
}
IrLoc ir_node_loc(const IrGraph *g, IrNodeId n) {
    const IrNodeRec *r = ir__node(g, n);
    IrLoc l = {r->loc_file, r->loc_line, r->loc_col};
    return l;
}
void ir_node_set_loc(IrGraph *g, IrNodeId n, IrLoc loc) {
    IrNodeRec *r = ir__node(g, n);
    r->loc_file = loc.file;
    r->loc_line = loc.line;
    r->loc_col = loc.col;
}
void ir_node_text_pos(const IrGraph *g, IrNodeId n, uint32_t *line, uint32_t *col) {
    *line = ir__node(g, n)->text_line;
    *col = ir__node(g, n)->text_col;
}
void ir_node_set_text_pos(IrGraph *g, IrNodeId n, uint32_t line, uint32_t col) {
    ir__node(g, n)->text_line = line;
    ir__node(g, n)->text_col = col;
}
uint32_t ir_node_num_provenance(const IrGraph *g, IrNodeId n) { return ir__node(g, n)->n_prov; }
IrStrId ir_node_provenance(const IrGraph *g, IrNodeId n, uint32_t i) {
    return ir__u32(g, ir__node(g, n)->prov)[i];
}
void ir_node_set_provenance(IrGraph *g, IrNodeId n, uint32_t count, const IrStrId *names) {
    uint32_t off = ir__pool_u32(g, names, count);
    if (count && !off) return;
    ir__node(g, n)->prov = off;
    ir__node(g, n)->n_prov = count;
}

/* ---- attributes ---------------------------------------------------------------------------- */

static IrAttrRec *node_attrs(const IrGraph *g, IrNodeId n) {
    return &IR_VEC_AT(g->attrs, IrAttrRec, ir__node(g, n)->attrs);
}

void ir_node_set_attr_id(IrGraph *g, IrNodeId n, IrStrId name, const IrAttrValue *v) {
    if (g->status || !name) return;
    IrAttrRec rec = {.name = name, .kind = (uint8_t)v->kind};
    switch (v->kind) {
    case IR_ATTR_INT:
    case IR_ATTR_DTYPE: rec.u.i = v->i; break;
    case IR_ATTR_FLOAT: rec.u.f = (float)v->f; break; /* attributes are f32, as in ONNX */
    case IR_ATTR_STRING: rec.u.s = v->s; break;
    case IR_ATTR_TENSOR: rec.u.s = v->tensor; break;
    case IR_ATTR_INTS:
        rec.count = v->count;
        rec.u.off = ir__pool_i64(g, v->ints, v->count);
        break;
    case IR_ATTR_FLOATS:
        rec.count = v->count;
        rec.u.off = ir__pool_f64(g, v->floats, v->count);
        for (uint32_t i = 0; i < v->count && !g->status; i++)
            IR_VEC_AT(g->f64pool, double, rec.u.off + i) = (float)v->floats[i];
        break;
    case IR_ATTR_STRINGS:
        rec.count = v->count;
        rec.u.off = ir__pool_u32(g, v->strs, v->count);
        break;
    default: return;
    }
    if (g->status) return;
    IrNodeRec *nr = ir__node(g, n);
    IrAttrRec *a = node_attrs(g, n);
    /* replace an existing entry */
    for (uint32_t i = 0; i < nr->n_attrs; i++)
        if (a[i].name == name) {
            a[i] = rec;
            return;
        }
    /* sorted insert position by name text */
    const char *nm = ir_str(g, name);
    uint32_t pos = 0;
    while (pos < nr->n_attrs && strcmp(ir_str(g, a[pos].name), nm) < 0) pos++;
    if (nr->n_attrs == 0xFFFF) return;
    bool at_end = nr->n_attrs && nr->attrs + nr->n_attrs == g->attrs.len;
    if (!ir_vec_reserve(&g->attrs, sizeof(IrAttrRec), g->attrs.len + 1 + (at_end ? 0 : nr->n_attrs))) {
        ir__oom(g);
        return;
    }
    nr = ir__node(g, n);
    if (!at_end) {
        uint32_t off = g->attrs.len;
        memcpy(&IR_VEC_AT(g->attrs, IrAttrRec, off), node_attrs(g, n), (size_t)nr->n_attrs * sizeof(IrAttrRec));
        g->attrs.len += nr->n_attrs;
        nr->attrs = off;
    }
    a = node_attrs(g, n);
    memmove(a + pos + 1, a + pos, (size_t)(nr->n_attrs - pos) * sizeof(IrAttrRec));
    a[pos] = rec;
    g->attrs.len++;
    nr->n_attrs++;
}

void ir_node_set_attr(IrGraph *g, IrNodeId n, const char *name, const IrAttrValue *v) {
    ir_node_set_attr_id(g, n, ir_str_intern_cstr(g, name), v);
}

uint32_t ir_node_num_attrs(const IrGraph *g, IrNodeId n) { return ir__node(g, n)->n_attrs; }
IrStrId ir_node_attr_name(const IrGraph *g, IrNodeId n, uint32_t i) { return node_attrs(g, n)[i].name; }

IrAttrValue ir_node_attr_at(const IrGraph *g, IrNodeId n, uint32_t i) {
    const IrAttrRec *a = &node_attrs(g, n)[i];
    IrAttrValue v = {.kind = (IrAttrKind)a->kind, .count = a->count};
    switch ((IrAttrKind)a->kind) {
    case IR_ATTR_INT:
    case IR_ATTR_DTYPE: v.i = a->u.i; break;
    case IR_ATTR_FLOAT: v.f = a->u.f; break;
    case IR_ATTR_STRING: v.s = a->u.s; break;
    case IR_ATTR_TENSOR: v.tensor = a->u.s; break;
    case IR_ATTR_INTS: v.ints = &IR_VEC_AT(g->i64pool, int64_t, a->u.off); break;
    case IR_ATTR_FLOATS: v.floats = &IR_VEC_AT(g->f64pool, double, a->u.off); break;
    case IR_ATTR_STRINGS: v.strs = ir__u32(g, (uint32_t)a->u.off); break;
    default: break;
    }
    return v;
}

bool ir_node_attr(const IrGraph *g, IrNodeId n, const char *name, IrAttrValue *out) {
    /* a node has few attributes: comparing their text beats hashing the name */
    const IrNodeRec *nr = ir__node(g, n);
    const IrAttrRec *a = node_attrs(g, n);
    for (uint32_t i = 0; i < nr->n_attrs; i++)
        if (strcmp(ir_str(g, a[i].name), name) == 0) {
            if (out) *out = ir_node_attr_at(g, n, i);
            return true;
        }
    return false;
}

static bool default_of(const IrGraph *g, IrNodeId n, const char *name, IrAttrSpec *spec) {
    return ir_op_attr_spec(ir_node_op(g, n), name, strlen(name), spec) && spec->has_default;
}

int64_t ir_node_attr_int(const IrGraph *g, IrNodeId n, const char *name, bool *found) {
    IrAttrValue v;
    IrAttrSpec spec;
    if (found) *found = true;
    if (ir_node_attr(g, n, name, &v) && (v.kind == IR_ATTR_INT || v.kind == IR_ATTR_DTYPE))
        return v.i;
    if (default_of(g, n, name, &spec)) {
        if (spec.kind == IR_ATTR_DTYPE)
            return ir_dtype_from_name(spec.default_text, spec.default_len);
        return strtoll(spec.default_text, NULL, 10);
    }
    if (found) *found = false;
    return 0;
}

double ir_node_attr_float(const IrGraph *g, IrNodeId n, const char *name, bool *found) {
    IrAttrValue v;
    IrAttrSpec spec;
    if (found) *found = true;
    if (ir_node_attr(g, n, name, &v) && v.kind == IR_ATTR_FLOAT) return v.f;
    if (default_of(g, n, name, &spec)) return strtod(spec.default_text, NULL);
    if (found) *found = false;
    return 0;
}

/* String defaults of the op table as NUL-terminated literals, so a default can be returned
 * without touching the graph (which is const here, and may be shared between threads). A test
 * checks that every string default in ops.def is listed. */
static const char *const string_defaults[] = {
    "DCR", "NOTSET", "avg", "bilinear", "constant", "e4m3fn", "elementwise", "forward",
    "half_pixel", "mean", "nearest", "none", "round_prefer_floor", "stretch", "zeros",
};

const char *ir_node_attr_string(const IrGraph *g, IrNodeId n, const char *name, bool *found) {
    IrAttrValue v;
    IrAttrSpec spec;
    if (found) *found = true;
    if (ir_node_attr(g, n, name, &v) && v.kind == IR_ATTR_STRING) return ir_str(g, v.s);
    if (default_of(g, n, name, &spec)) {
        for (size_t i = 0; i < sizeof string_defaults / sizeof string_defaults[0]; i++)
            if (strlen(string_defaults[i]) == spec.default_len &&
                memcmp(string_defaults[i], spec.default_text, spec.default_len) == 0)
                return string_defaults[i];
        IR_ASSERT(!"string default missing from string_defaults[]");
    }
    if (found) *found = false;
    return NULL;
}

/* ---- traversal and uses -------------------------------------------------------------------- */

IrNodeId ir_graph_walk_next(const IrGraph *g, IrNodeId cur) {
    if (!cur) return ir__region(g, IR_ROOT_REGION)->first;
    const IrNodeRec *nr = ir__node(g, cur);
    for (uint32_t i = 0; i < nr->n_regions; i++) {
        IrNodeId f = ir__region(g, ir__u32(g, nr->regions)[i])->first;
        if (f) return f;
    }
    for (;;) {
        nr = ir__node(g, cur);
        if (nr->next) return nr->next;
        IrRegionId r = nr->region;
        IrNodeId parent = ir__region(g, r)->parent;
        if (!parent) return 0;
        /* the next non-empty sibling region of the parent */
        const IrNodeRec *pr = ir__node(g, parent);
        uint32_t i = 0;
        while (i < pr->n_regions && ir__u32(g, pr->regions)[i] != r) i++;
        for (i++; i < pr->n_regions; i++) {
            IrNodeId f = ir__region(g, ir__u32(g, pr->regions)[i])->first;
            if (f) return f;
        }
        cur = parent;
    }
}

void ir_graph_count_uses(const IrGraph *g, uint32_t *counts) {
    memset(counts, 0, ((size_t)g->values.len) * sizeof *counts);
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        const IrNodeRec *nr = ir__node(g, n);
        for (uint32_t i = 0; i < nr->n_operands; i++) counts[ir__u32(g, nr->operands)[i]]++;
        /* Gradient names y in an attribute: that value (and so what computes it) stays used */
        IrAttrValue y;
        if (nr->op == IR_OP_GRADIENT && ir_node_attr(g, n, "y", &y) && y.kind == IR_ATTR_STRING) {
            const char *nm = ir_str(g, y.s);
            counts[ir_value_find(g, nm, strlen(nm))]++;
        }
    }
    for (uint32_t r = 1; r < g->regions.len; r++) {
        const IrRegionRec *rr = ir__region(g, r);
        if (rr->parent && !ir_node_alive(g, rr->parent)) continue;
        for (uint32_t i = 0; i < rr->n_outs; i++) counts[ir__u32(g, rr->outs)[i]]++;
    }
    counts[0] = 0;
}

void ir_graph_replace_uses(IrGraph *g, IrValueId from, IrValueId to) {
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        const IrNodeRec *nr = ir__node(g, n);
        for (uint32_t i = 0; i < nr->n_operands; i++)
            if (ir__u32(g, nr->operands)[i] == from) ir__u32(g, nr->operands)[i] = to;
    }
    for (uint32_t r = 1; r < g->regions.len; r++) {
        const IrRegionRec *rr = ir__region(g, r);
        for (uint32_t i = 0; i < rr->n_outs; i++)
            if (ir__u32(g, rr->outs)[i] == from) ir__u32(g, rr->outs)[i] = to;
    }
}

/* ---- metadata ------------------------------------------------------------------------------ */

void ir_graph_set_opset(IrGraph *g, const char *domain, int64_t version) {
    IrStrId d = ir_str_intern_cstr(g, domain && *domain ? domain : "");
    for (uint32_t i = 0; i < g->opsets.len; i++) {
        IrKV *kv = &IR_VEC_AT(g->opsets, IrKV, i);
        if (kv->key == d) {
            kv->value = (uint32_t)version;
            return;
        }
    }
    IrKV kv = {d, (uint32_t)version};
    PUSH(g, g->opsets, IrKV, kv, return);
}
uint32_t ir_graph_num_opsets(const IrGraph *g) { return g->opsets.len; }
void ir_graph_opset_at(const IrGraph *g, uint32_t i, const char **domain, int64_t *version) {
    IrKV kv = IR_VEC_AT(g->opsets, IrKV, i);
    *domain = ir_str(g, kv.key);
    *version = kv.value;
}
void ir_graph_set_meta(IrGraph *g, const char *key, const char *value) {
    IrStrId k = ir_str_intern_cstr(g, key), v = ir_str_intern_cstr(g, value);
    for (uint32_t i = 0; i < g->meta.len; i++) {
        IrKV *kv = &IR_VEC_AT(g->meta, IrKV, i);
        if (kv->key == k) {
            kv->value = v;
            return;
        }
    }
    IrKV kv = {k, v};
    PUSH(g, g->meta, IrKV, kv, return);
}
uint32_t ir_graph_num_meta(const IrGraph *g) { return g->meta.len; }
void ir_graph_meta_at(const IrGraph *g, uint32_t i, const char **key, const char **value) {
    IrKV kv = IR_VEC_AT(g->meta, IrKV, i);
    *key = ir_str(g, kv.key);
    *value = ir_str(g, kv.value);
}

/* Binary format (.irb): writer and mapping reader. Layout in ir/irtool.proto.
 *
 * The reader maps the whole file, decodes the protobuf metadata (columns of the graph tables),
 * checks every id, offset and list before the graph is handed out, and points constants into
 * the mapping, so load time does not depend on weight size. A file that fails any check is
 * rejected with a message saying which table was bad; it never reaches the rest of irtool.
 */
#include "ir_internal.h"
#include "irtool.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "IRTOOLB\n"
#define HEADER_SIZE 64
#define WEIGHT_ALIGN 64
#define SECTION_ALIGN 4096
#define MAX_EXPR_DEPTH 512
#define MAX_REGION_DEPTH 64 /* as the text parser's: consumers walk regions recursively */

typedef struct Header {
    char magic[8];
    uint32_t version, flags;
    uint64_t meta_offset, meta_size, weights_offset, weights_size, file_size;
} Header;

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

bool ir_is_binary(const void *data, size_t len) { return len >= 8 && memcmp(data, MAGIC, 8) == 0; }

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* ---- writer -------------------------------------------------------------------------------- */

/* Column buffers are carved out of one allocation. */
typedef struct Cols {
    void **ptrs;
    size_t n, cap;
    bool failed;
} Cols;

static void *col_alloc(Cols *c, size_t count, size_t elem) {
    if (c->failed) return NULL;
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 64;
        void **np = realloc(c->ptrs, nc * sizeof *np);
        if (!np) {
            c->failed = true;
            return NULL;
        }
        c->ptrs = np;
        c->cap = nc;
    }
    void *p = calloc(count ? count : 1, elem);
    if (!p) {
        c->failed = true;
        return NULL;
    }
    c->ptrs[c->n++] = p;
    return p;
}

static void cols_free(Cols *c) {
    for (size_t i = 0; i < c->n; i++) free(c->ptrs[i]);
    free(c->ptrs);
}

#define COL32(msg, field, cnt) (msg.n_##field = (cnt), msg.field = col_alloc(&cols, (cnt), 4))
#define COL64(msg, field, cnt) (msg.n_##field = (cnt), msg.field = col_alloc(&cols, (cnt), 8))

IrStatus ir_write_binary(const IrGraph *g, const char *path, IrDiag *diag) {
    if (g->status) return g->status;
    Irtool__IrbGraph m = IRTOOL__IRB_GRAPH__INIT;
    Cols cols = {0};
    m.format_version = IR_BINARY_FORMAT_VERSION;
    m.producer = (char *)"irtool " IRTOOL_VERSION_STRING;
    m.name = g->name;
    m.str_bytes.data = g->str_bytes.data;
    m.str_bytes.len = g->str_bytes.len;
    m.n_str_offs = g->str_offs.len;
    m.str_offs = g->str_offs.data;

    uint32_t n = g->exprs.len;
    COL32(m, expr_kind, n), COL32(m, expr_a, n), COL32(m, expr_b, n), COL64(m, expr_value, n);
    if (!cols.failed)
        for (uint32_t i = 0; i < n; i++) {
            const IrExprRec *e = ir__expr(g, i);
            m.expr_kind[i] = e->kind, m.expr_a[i] = e->a, m.expr_b[i] = e->b, m.expr_value[i] = e->value;
        }
    n = g->types.len;
    COL32(m, type_dtype, n), COL32(m, type_rank, n), COL32(m, type_dims, n);
    if (!cols.failed)
        for (uint32_t i = 0; i < n; i++) {
            const IrTypeRec *t = ir__type(g, i);
            m.type_dtype[i] = i && t->kind == IR_TYPE_TENSOR ? (uint32_t)ir_dtype_onnx((IrDType)t->dtype) : 0;
            m.type_rank[i] = t->rank, m.type_dims[i] = t->dims;
        }
    /* the kind column only when a seq/opt type exists: tensor-only files stay as they were */
    bool any_container = false;
    for (uint32_t i = 1; i < n; i++) any_container |= ir__type(g, i)->kind != IR_TYPE_TENSOR;
    if (any_container) {
        COL32(m, type_kind, n);
        if (!cols.failed)
            for (uint32_t i = 0; i < n; i++) m.type_kind[i] = ir__type(g, i)->kind;
    }
    n = g->values.len;
    COL32(m, value_name, n), COL32(m, value_type, n), COL32(m, value_def, n), COL32(m, value_kind, n),
        COL32(m, value_index, n);
    if (!cols.failed)
        for (uint32_t i = 0; i < n; i++) {
            const IrValueRec *v = ir__val(g, i);
            m.value_name[i] = v->name, m.value_type[i] = v->type, m.value_def[i] = v->def;
            m.value_kind[i] = v->kind, m.value_index[i] = v->index;
        }
    n = g->nodes.len;
    /* op names used by the graph, numbered in order of first use */
    uint32_t op_index[IR_OP_COUNT] = {0};
    char *op_names[IR_OP_COUNT + 1];
    size_t n_op_names = 1;
    op_names[0] = (char *)"";
    COL32(m, node_op, n), COL32(m, node_flags, n), COL32(m, node_n_operands, n), COL32(m, node_operands, n),
        COL32(m, node_n_results, n), COL32(m, node_results, n), COL32(m, node_attrs, n),
        COL32(m, node_n_attrs, n), COL32(m, node_regions, n), COL32(m, node_n_regions, n),
        COL32(m, node_name, n), COL32(m, node_region, n), COL32(m, node_prev, n), COL32(m, node_next, n),
        COL32(m, node_loc_file, n), COL32(m, node_loc_line, n), COL32(m, node_loc_col, n),
        COL32(m, node_prov, n), COL32(m, node_n_prov, n);
    if (!cols.failed)
        for (uint32_t i = 1; i < n; i++) {
            const IrNodeRec *r = ir__node(g, i);
            if (!op_index[r->op]) {
                op_index[r->op] = (uint32_t)n_op_names;
                op_names[n_op_names++] = (char *)ir_op_name((IrOp)r->op);
            }
            m.node_op[i] = op_index[r->op];
            m.node_flags[i] = r->flags, m.node_n_operands[i] = r->n_operands, m.node_operands[i] = r->operands;
            m.node_n_results[i] = r->n_results, m.node_results[i] = r->results, m.node_attrs[i] = r->attrs;
            m.node_n_attrs[i] = r->n_attrs, m.node_regions[i] = r->regions, m.node_n_regions[i] = r->n_regions;
            m.node_name[i] = r->name, m.node_region[i] = r->region, m.node_prev[i] = r->prev;
            m.node_next[i] = r->next, m.node_loc_file[i] = r->loc_file, m.node_loc_line[i] = r->loc_line;
            m.node_loc_col[i] = r->loc_col, m.node_prov[i] = r->prov, m.node_n_prov[i] = r->n_prov;
        }
    m.n_op_names = n_op_names;
    m.op_names = op_names;
    n = g->attrs.len;
    COL32(m, attr_name, n), COL32(m, attr_kind, n), COL32(m, attr_count, n), COL64(m, attr_bits, n);
    if (!cols.failed)
        for (uint32_t i = 0; i < n; i++) {
            const IrAttrRec *a = &IR_VEC_AT(g->attrs, IrAttrRec, i);
            m.attr_name[i] = a->name, m.attr_kind[i] = a->kind, m.attr_count[i] = a->count;
            int64_t bits;
            switch ((IrAttrKind)a->kind) {
            case IR_ATTR_INT: bits = a->u.i; break;
            case IR_ATTR_DTYPE: bits = ir_dtype_onnx((IrDType)a->u.i); break;
            case IR_ATTR_FLOAT: memcpy(&bits, &a->u.f, 8); break;
            case IR_ATTR_STRING:
            case IR_ATTR_TENSOR: bits = a->u.s; break;
            default: bits = (int64_t)a->u.off; break;
            }
            m.attr_bits[i] = bits;
        }
    n = g->regions.len;
    COL32(m, region_parent, n), COL32(m, region_first, n), COL32(m, region_last, n), COL32(m, region_args, n),
        COL32(m, region_n_args, n), COL32(m, region_outs, n), COL32(m, region_n_outs, n);
    if (!cols.failed)
        for (uint32_t i = 0; i < n; i++) {
            const IrRegionRec *r = ir__region(g, i);
            m.region_parent[i] = r->parent, m.region_first[i] = r->first, m.region_last[i] = r->last;
            m.region_args[i] = r->args, m.region_n_args[i] = r->n_args, m.region_outs[i] = r->outs;
            m.region_n_outs[i] = r->n_outs;
        }
    n = g->consts.len;
    uint64_t woff = 0;
    COL32(m, const_type, n), COL64(m, const_offset, n), COL64(m, const_nbytes, n), COL32(m, const_ext_path, n),
        COL64(m, const_ext_offset, n);
    if (!cols.failed)
        for (uint32_t i = 1; i < n; i++) {
            const IrConstRec *c = ir__const(g, i);
            m.const_type[i] = c->type, m.const_nbytes[i] = c->nbytes, m.const_ext_path[i] = c->ext_path;
            m.const_ext_offset[i] = c->ext_offset;
            woff = align_up(woff, WEIGHT_ALIGN);
            m.const_offset[i] = woff;
            woff += c->nbytes;
        }
    m.n_const_values = g->const_values.len;
    m.const_values = g->const_values.data;
    n = g->syms.len;
    COL32(m, sym_name, n), COL32(m, sym_specialized, n);
    if (!cols.failed)
        for (uint32_t i = 0; i < n; i++) {
            m.sym_name[i] = IR_VEC_AT(g->syms, IrSymRec, i).name;
            m.sym_specialized[i] = IR_VEC_AT(g->syms, IrSymRec, i).specialized;
        }
    n = g->constraints.len;
    COL32(m, constraint_kind, n), COL32(m, constraint_a, n), COL32(m, constraint_b, n),
        COL64(m, constraint_lo, n), COL64(m, constraint_hi, n), COL32(m, constraint_origin, n),
        COL32(m, constraint_note, n);
    if (!cols.failed)
        for (uint32_t i = 0; i < n; i++) {
            const IrConstraintRec *c = &IR_VEC_AT(g->constraints, IrConstraintRec, i);
            m.constraint_kind[i] = c->kind, m.constraint_a[i] = c->a, m.constraint_b[i] = c->b;
            m.constraint_lo[i] = c->lo, m.constraint_hi[i] = c->hi;
            m.constraint_origin[i] = c->origin, m.constraint_note[i] = c->note;
        }
    m.n_u32pool = g->u32pool.len;
    m.u32pool = g->u32pool.data;
    m.n_i64pool = g->i64pool.len;
    m.i64pool = g->i64pool.data;
    m.n_f64pool = g->f64pool.len;
    m.f64pool = g->f64pool.data;
    n = g->opsets.len;
    COL32(m, opset_domain, n), COL32(m, opset_version, n);
    if (!cols.failed)
        for (uint32_t i = 0; i < n; i++) {
            m.opset_domain[i] = IR_VEC_AT(g->opsets, IrKV, i).key;
            m.opset_version[i] = IR_VEC_AT(g->opsets, IrKV, i).value;
        }
    n = g->meta.len;
    COL32(m, meta_key, n), COL32(m, meta_value, n);
    if (!cols.failed)
        for (uint32_t i = 0; i < n; i++) {
            m.meta_key[i] = IR_VEC_AT(g->meta, IrKV, i).key;
            m.meta_value[i] = IR_VEC_AT(g->meta, IrKV, i).value;
        }
    if (cols.failed) {
        cols_free(&cols);
        ir_diag_error(diag, "out of memory writing binary IR");
        return IR_ENOMEM;
    }

    size_t meta_size = irtool__irb_graph__get_packed_size(&m);
    uint64_t weights_offset = align_up(HEADER_SIZE + meta_size, SECTION_ALIGN);
    uint64_t total = weights_offset + woff;
    if (total > SIZE_MAX) {
        cols_free(&cols);
        ir_diag_error(diag, "binary IR too large");
        return IR_ENOMEM;
    }
    unsigned char *buf = calloc(1, (size_t)total);
    if (!buf) {
        cols_free(&cols);
        ir_diag_error(diag, "out of memory writing binary IR (%llu bytes)", (unsigned long long)total);
        return IR_ENOMEM;
    }
    memcpy(buf, MAGIC, 8);
    put_u32(buf + 8, IR_BINARY_FORMAT_VERSION);
    put_u32(buf + 12, 0);
    put_u64(buf + 16, HEADER_SIZE);
    put_u64(buf + 24, meta_size);
    put_u64(buf + 32, weights_offset);
    put_u64(buf + 40, woff);
    put_u64(buf + 48, total);
    irtool__irb_graph__pack(&m, buf + HEADER_SIZE);
    for (uint32_t i = 1; i < g->consts.len; i++) {
        const IrConstRec *c = ir__const(g, i);
        if (c->nbytes) memcpy(buf + weights_offset + m.const_offset[i], c->data, c->nbytes);
    }
    cols_free(&cols);
    IrStatus st = ir_write_file_atomic(path, buf, (size_t)total, diag);
    free(buf);
    return st;
}

/* ---- reader -------------------------------------------------------------------------------- */

typedef struct Loader {
    const char *name;
    IrDiag *diag;
    const Irtool__IrbGraph *m;
    IrGraph *g;
} Loader;

static IrStatus bad(Loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static IrStatus bad(Loader *L, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ir_diag_report(L->diag, IR_SEV_ERROR, L->name, 0, 0, NULL, 0, "corrupt binary IR: %s", msg);
    return IR_ESYNTAX;
}

/* Copies a column into a table vector of records via a per-record setter. */
static bool vec_resize(IrGraph *g, IrVec *v, size_t elem, size_t n) {
    if (n > UINT32_MAX || !ir_vec_reserve(v, elem, (uint32_t)n)) {
        ir__oom(g);
        return false;
    }
    v->len = (uint32_t)n;
    return true;
}

static bool same_len(size_t a, size_t b) { return a == b; }

static bool slice_ok(uint32_t off, uint32_t count, uint32_t len) {
    return count == 0 || ((uint64_t)off + count <= len && off != 0);
}

static IrStatus load_tables(Loader *L) {
    const Irtool__IrbGraph *m = L->m;
    IrGraph *g = L->g;
    /* strings */
    if (m->str_bytes.len == 0 || m->str_bytes.data[0] != 0 || m->str_bytes.data[m->str_bytes.len - 1] != 0)
        return bad(L, "string table is not NUL-terminated");
    if (m->n_str_offs == 0 || m->str_offs[0] != 0) return bad(L, "string offsets");
    for (size_t i = 0; i < m->n_str_offs; i++)
        if (m->str_offs[i] >= m->str_bytes.len) return bad(L, "string offset %zu out of range", i);
    if (!vec_resize(g, &g->str_bytes, 1, m->str_bytes.len) || !vec_resize(g, &g->str_offs, 4, m->n_str_offs))
        return IR_ENOMEM;
    memcpy(g->str_bytes.data, m->str_bytes.data, m->str_bytes.len);
    memcpy(g->str_offs.data, m->str_offs, m->n_str_offs * 4);
    uint32_t nstr = (uint32_t)m->n_str_offs;
#define STR_OK(id) ((id) < nstr)
    if (!STR_OK(m->name)) return bad(L, "graph name");
    g->name = m->name;

    /* pools */
    if (m->n_u32pool == 0 || m->n_i64pool == 0 || m->n_f64pool == 0) return bad(L, "pools");
    if (!vec_resize(g, &g->u32pool, 4, m->n_u32pool) || !vec_resize(g, &g->i64pool, 8, m->n_i64pool) ||
        !vec_resize(g, &g->f64pool, 8, m->n_f64pool))
        return IR_ENOMEM;
    memcpy(g->u32pool.data, m->u32pool, m->n_u32pool * 4);
    memcpy(g->i64pool.data, m->i64pool, m->n_i64pool * 8);
    memcpy(g->f64pool.data, m->f64pool, m->n_f64pool * 8);
    uint32_t np = g->u32pool.len;

    /* symbols */
    if (m->n_sym_name == 0 || m->n_sym_specialized != m->n_sym_name) return bad(L, "symbol table");
    if (!vec_resize(g, &g->syms, sizeof(IrSymRec), m->n_sym_name)) return IR_ENOMEM;
    for (size_t i = 0; i < m->n_sym_name; i++) {
        if (!STR_OK(m->sym_name[i]) || (i && !m->sym_name[i]) || m->sym_specialized[i] > 1) return bad(L, "symbol %zu", i);
        IR_VEC_AT(g->syms, IrSymRec, i).name = m->sym_name[i];
        IR_VEC_AT(g->syms, IrSymRec, i).specialized = m->sym_specialized[i];
    }
    uint32_t nsym = g->syms.len;

    /* expressions: operands refer to earlier entries only, so there are no cycles */
    size_t ne = m->n_expr_kind;
    if (ne == 0 || !same_len(ne, m->n_expr_a) || !same_len(ne, m->n_expr_b) || !same_len(ne, m->n_expr_value))
        return bad(L, "expression table");
    if (!vec_resize(g, &g->exprs, sizeof(IrExprRec), ne)) return IR_ENOMEM;
    uint16_t *depth = calloc(ne, sizeof *depth);
    if (!depth) return IR_ENOMEM;
    for (size_t i = 0; i < ne; i++) {
        IrExprRec *e = ir__expr(g, (uint32_t)i);
        memset(e, 0, sizeof *e);
        e->kind = (uint8_t)m->expr_kind[i];
        e->a = m->expr_a[i];
        e->b = m->expr_b[i];
        e->value = m->expr_value[i];
        if (i == 0) continue;
        bool ok = true;
        switch (m->expr_kind[i]) {
        case IR_EXPR_CONST:
        case IR_EXPR_UNKNOWN: depth[i] = 1; break;
        case IR_EXPR_SYM:
            ok = e->a && e->a < nsym;
            depth[i] = 1;
            break;
        case IR_EXPR_ADD:
        case IR_EXPR_SUB:
        case IR_EXPR_MUL:
        case IR_EXPR_DIV:
        case IR_EXPR_MOD:
        case IR_EXPR_MIN:
        case IR_EXPR_MAX:
            ok = e->a && e->b && e->a < i && e->b < i;
            if (ok) depth[i] = (uint16_t)(1 + (depth[e->a] > depth[e->b] ? depth[e->a] : depth[e->b]));
            ok = ok && depth[i] <= MAX_EXPR_DEPTH;
            break;
        default: ok = false;
        }
        if (!ok) {
            free(depth);
            return bad(L, "expression %zu", i);
        }
    }
    free(depth);
    uint32_t nexpr = g->exprs.len;

    /* types */
    size_t nt = m->n_type_dtype;
    if (nt == 0 || !same_len(nt, m->n_type_rank) || !same_len(nt, m->n_type_dims) ||
        (m->n_type_kind && !same_len(nt, m->n_type_kind)))
        return bad(L, "type table");
    if (!vec_resize(g, &g->types, sizeof(IrTypeRec), nt)) return IR_ENOMEM;
    memset(g->types.data, 0, sizeof(IrTypeRec));
    for (size_t i = 1; i < nt; i++) {
        IrTypeRec *t = ir__type(g, (uint32_t)i);
        memset(t, 0, sizeof *t);
        uint32_t kind = m->n_type_kind ? m->type_kind[i] : IR_TYPE_TENSOR; /* files before seq/opt */
        if (kind != IR_TYPE_TENSOR) {
            /* seq/opt: the element type is an older entry; a sequence holds tensors, an
             * optional anything but an optional */
            uint32_t e = m->type_dims[i];
            if (kind > IR_TYPE_OPT || m->type_dtype[i] || m->type_rank[i] != IR_RANK_UNKNOWN || e >= i)
                return bad(L, "type %zu (kind %u)", i, kind);
            uint32_t ek = ir__type(g, e)->kind;
            if (e && ((kind == IR_TYPE_SEQ && ek != IR_TYPE_TENSOR) || (kind == IR_TYPE_OPT && ek == IR_TYPE_OPT)))
                return bad(L, "type %zu element %u", i, e);
            t->kind = (uint8_t)kind;
            t->rank = IR_RANK_UNKNOWN;
            t->dims = e;
            continue;
        }
        IrDType dt = ir_dtype_from_onnx((int)m->type_dtype[i]);
        if (dt == IR_DTYPE_NONE) return bad(L, "type %zu has unknown dtype code %u", i, m->type_dtype[i]);
        t->dtype = (uint8_t)dt;
        t->rank = m->type_rank[i];
        t->dims = m->type_dims[i];
        if (t->rank != IR_RANK_UNKNOWN) {
            if (t->rank > 0xFFFF || !slice_ok(t->dims, t->rank, np)) return bad(L, "type %zu dims", i);
            for (uint32_t k = 0; k < t->rank; k++) {
                uint32_t d = ir__u32(g, t->dims)[k];
                if (!d || d >= nexpr) return bad(L, "type %zu dim %u", i, k);
            }
        }
    }
    uint32_t ntypes = g->types.len;

    /* constants */
    size_t nc = m->n_const_type;
    if (nc == 0 || !same_len(nc, m->n_const_offset) || !same_len(nc, m->n_const_nbytes) ||
        !same_len(nc, m->n_const_ext_path) || !same_len(nc, m->n_const_ext_offset))
        return bad(L, "constant table");
    if (!vec_resize(g, &g->consts, sizeof(IrConstRec), nc)) return IR_ENOMEM;
    memset(g->consts.data, 0, sizeof(IrConstRec));
    for (size_t i = 1; i < nc; i++) {
        IrConstRec *c = ir__const(g, (uint32_t)i);
        memset(c, 0, sizeof *c);
        c->type = m->const_type[i];
        c->nbytes = m->const_nbytes[i];
        c->ext_path = m->const_ext_path[i];
        c->ext_offset = m->const_ext_offset[i];
        int64_t numel;
        if (!c->type || c->type >= ntypes || !ir_type_numel(g, c->type, &numel) ||
            !ir__const_size_ok(ir_type_dtype(g, c->type), numel, NULL, c->nbytes) || !STR_OK(c->ext_path))
            return bad(L, "constant %zu", i);
    }

    /* values */
    size_t nv = m->n_value_name;
    if (nv == 0 || !same_len(nv, m->n_value_type) || !same_len(nv, m->n_value_def) ||
        !same_len(nv, m->n_value_kind) || !same_len(nv, m->n_value_index))
        return bad(L, "value table");
    if (!vec_resize(g, &g->values, sizeof(IrValueRec), nv)) return IR_ENOMEM;
    memset(g->values.data, 0, sizeof(IrValueRec));
    size_t nn = m->n_node_op, nr = m->n_region_parent;
    for (size_t i = 1; i < nv; i++) {
        IrValueRec *v = ir__val(g, (uint32_t)i);
        v->name = m->value_name[i];
        v->type = m->value_type[i];
        v->def = m->value_def[i];
        v->kind = m->value_kind[i] & 0xFF;
        v->index = m->value_index[i] & 0xFFFFFF;
        bool ok = v->name && STR_OK(v->name) && v->type < ntypes && m->value_index[i] <= 0xFFFFFF &&
                  m->value_kind[i] <= 0xFF;
        if (ok) switch (v->kind) {
            case IR_VALUE_ARG: ok = v->def && v->def < nr; break;
            case IR_VALUE_RESULT: ok = v->def && v->def < nn; break;
            case IR_VALUE_CONST: ok = v->def && v->def < nc; break;
            default: ok = false;
            }
        if (!ok) return bad(L, "value %zu", i);
    }
    uint32_t nvals = g->values.len;

    /* attributes */
    size_t na = m->n_attr_name;
    if (na == 0 || !same_len(na, m->n_attr_kind) || !same_len(na, m->n_attr_count) || !same_len(na, m->n_attr_bits))
        return bad(L, "attribute table");
    if (!vec_resize(g, &g->attrs, sizeof(IrAttrRec), na)) return IR_ENOMEM;
    memset(g->attrs.data, 0, sizeof(IrAttrRec));
    for (size_t i = 1; i < na; i++) {
        IrAttrRec *a = &IR_VEC_AT(g->attrs, IrAttrRec, i);
        memset(a, 0, sizeof *a);
        a->name = m->attr_name[i];
        a->kind = (uint8_t)m->attr_kind[i];
        a->count = m->attr_count[i];
        int64_t bits = m->attr_bits[i];
        bool ok = a->name && STR_OK(a->name) && m->attr_kind[i] <= 0xFF;
        if (ok) switch ((IrAttrKind)a->kind) {
            case IR_ATTR_INT: a->u.i = bits; break;
            case IR_ATTR_DTYPE:
                a->u.i = ir_dtype_from_onnx((int)bits);
                ok = a->u.i != IR_DTYPE_NONE && bits > 0 && bits < 64;
                break;
            case IR_ATTR_FLOAT: memcpy(&a->u.f, &bits, 8); break;
            case IR_ATTR_STRING: a->u.s = (uint32_t)bits; ok = bits >= 0 && bits < nstr; break;
            case IR_ATTR_TENSOR: a->u.s = (uint32_t)bits; ok = bits > 0 && (uint64_t)bits < nc; break;
            case IR_ATTR_INTS:
                a->u.off = (uint64_t)bits;
                ok = bits >= 0 && bits <= UINT32_MAX && slice_ok((uint32_t)bits, a->count, g->i64pool.len);
                break;
            case IR_ATTR_FLOATS:
                a->u.off = (uint64_t)bits;
                ok = bits >= 0 && bits <= UINT32_MAX && slice_ok((uint32_t)bits, a->count, g->f64pool.len);
                break;
            case IR_ATTR_STRINGS:
                a->u.off = (uint64_t)bits;
                ok = bits >= 0 && bits <= UINT32_MAX && slice_ok((uint32_t)bits, a->count, np);
                for (uint32_t k = 0; ok && k < a->count; k++) ok = ir__u32(g, (uint32_t)bits)[k] < nstr;
                break;
            default: ok = false;
            }
        if (!ok) return bad(L, "attribute %zu", i);
    }

    /* regions */
    if (nr < 2 || !same_len(nr, m->n_region_first) || !same_len(nr, m->n_region_last) ||
        !same_len(nr, m->n_region_args) || !same_len(nr, m->n_region_n_args) ||
        !same_len(nr, m->n_region_outs) || !same_len(nr, m->n_region_n_outs))
        return bad(L, "region table");
    if (!vec_resize(g, &g->regions, sizeof(IrRegionRec), nr)) return IR_ENOMEM;
    memset(g->regions.data, 0, sizeof(IrRegionRec));
    for (size_t i = 1; i < nr; i++) {
        IrRegionRec *r = ir__region(g, (uint32_t)i);
        r->parent = m->region_parent[i], r->first = m->region_first[i], r->last = m->region_last[i];
        r->args = m->region_args[i], r->n_args = m->region_n_args[i];
        r->outs = m->region_outs[i], r->n_outs = m->region_n_outs[i];
        bool ok = r->parent < nn && r->first < nn && r->last < nn && (i == 1) == (r->parent == 0) &&
                  slice_ok(r->args, r->n_args, np) && slice_ok(r->outs, r->n_outs, np);
        for (uint32_t k = 0; ok && k < r->n_args; k++) {
            uint32_t v = ir__u32(g, r->args)[k];
            ok = v && v < nvals && ir__val(g, v)->kind == IR_VALUE_ARG && ir__val(g, v)->def == i &&
                 ir__val(g, v)->index == k;
        }
        for (uint32_t k = 0; ok && k < r->n_outs; k++) {
            uint32_t v = ir__u32(g, r->outs)[k];
            ok = v < nvals;
        }
        if (!ok) return bad(L, "region %zu", i);
    }

    /* nodes */
    if (nn == 0 || !same_len(nn, m->n_node_flags) || !same_len(nn, m->n_node_n_operands) ||
        !same_len(nn, m->n_node_operands) || !same_len(nn, m->n_node_n_results) ||
        !same_len(nn, m->n_node_results) || !same_len(nn, m->n_node_attrs) || !same_len(nn, m->n_node_n_attrs) ||
        !same_len(nn, m->n_node_regions) || !same_len(nn, m->n_node_n_regions) || !same_len(nn, m->n_node_name) ||
        !same_len(nn, m->n_node_region) || !same_len(nn, m->n_node_prev) || !same_len(nn, m->n_node_next) ||
        !same_len(nn, m->n_node_loc_file) || !same_len(nn, m->n_node_loc_line) ||
        !same_len(nn, m->n_node_loc_col) || !same_len(nn, m->n_node_prov) || !same_len(nn, m->n_node_n_prov))
        return bad(L, "node table");
    if (!vec_resize(g, &g->nodes, sizeof(IrNodeRec), nn)) return IR_ENOMEM;
    memset(g->nodes.data, 0, sizeof(IrNodeRec));
    /* op names are resolved once each */
    size_t nops = m->n_op_names;
    uint16_t *op_of = calloc(nops ? nops : 1, sizeof *op_of);
    if (!op_of) return IR_ENOMEM;
    IrStatus st = IR_OK;
    for (size_t k = 1; k < nops && st == IR_OK; k++) {
        const char *nm = m->op_names[k];
        IrOp op = ir_op_from_name(nm, strlen(nm));
        if (op == IR_OP_NONE) {
            ir_diag_report(L->diag, IR_SEV_ERROR, L->name, 0, 0, NULL, 0,
                           "binary IR uses op '%.64s', which this irtool does not know", nm);
            st = IR_EUNSUPPORTED;
        }
        op_of[k] = (uint16_t)op;
    }
    for (size_t i = 1; i < nn && st == IR_OK; i++) {
        IrNodeRec *r = ir__node(g, (uint32_t)i);
        memset(r, 0, sizeof *r);
        uint32_t ops = m->node_op[i];
        if (!ops || ops >= nops) {
            st = bad(L, "node %zu op", i);
            break;
        }
        r->op = op_of[ops];
        bool ok = m->node_flags[i] <= IR_NODE_DEAD && m->node_n_operands[i] <= 0xFFFF &&
                  m->node_n_results[i] <= 0xFFFF && m->node_n_attrs[i] <= 0xFFFF && m->node_n_regions[i] <= 0xFFFF;
        r->flags = (uint16_t)m->node_flags[i];
        r->n_operands = (uint16_t)m->node_n_operands[i], r->operands = m->node_operands[i];
        r->n_results = (uint16_t)m->node_n_results[i], r->results = m->node_results[i];
        r->n_attrs = (uint16_t)m->node_n_attrs[i], r->attrs = m->node_attrs[i];
        r->n_regions = (uint16_t)m->node_n_regions[i], r->regions = m->node_regions[i];
        r->name = m->node_name[i], r->region = m->node_region[i];
        r->prev = m->node_prev[i], r->next = m->node_next[i];
        r->loc_file = m->node_loc_file[i], r->loc_line = m->node_loc_line[i], r->loc_col = m->node_loc_col[i];
        r->prov = m->node_prov[i], r->n_prov = m->node_n_prov[i];
        ok = ok && slice_ok(r->operands, r->n_operands, np) && slice_ok(r->results, r->n_results, np) &&
             slice_ok(r->regions, r->n_regions, np) && slice_ok(r->prov, r->n_prov, np) &&
             (r->n_attrs == 0 || ((uint64_t)r->attrs + r->n_attrs <= na && r->attrs)) && STR_OK(r->name) &&
             STR_OK(r->loc_file) && r->region && r->region < nr && r->prev < nn && r->next < nn &&
             r->n_regions == ir_op_num_regions((IrOp)r->op);
        for (uint32_t k = 0; ok && k < r->n_operands; k++) ok = ir__u32(g, r->operands)[k] < nvals;
        for (uint32_t k = 0; ok && k < r->n_results; k++) {
            uint32_t v = ir__u32(g, r->results)[k];
            ok = v == 0 || (v < nvals && ir__val(g, v)->kind == IR_VALUE_RESULT && ir__val(g, v)->def == i &&
                            ir__val(g, v)->index == k);
        }
        for (uint32_t k = 0; ok && k < r->n_regions; k++) {
            uint32_t rr = ir__u32(g, r->regions)[k];
            ok = rr > 1 && rr < nr && ir__region(g, rr)->parent == i;
        }
        for (uint32_t k = 0; ok && k < r->n_prov; k++) ok = ir__u32(g, r->prov)[k] < nstr;
        if (!ok) st = bad(L, "node %zu", i);
    }
    free(op_of);
    if (st) return st;
    return IR_OK;
}

/* Checks the region tree and node lists: every live node sits in exactly one list, lists are
 * well linked, and no region is nested inside itself. */
static IrStatus check_structure(Loader *L) {
    IrGraph *g = L->g;
    uint32_t nn = g->nodes.len, nr = g->regions.len;
    uint8_t *seen = calloc(nn, 1);
    if (!seen) return IR_ENOMEM;
    IrStatus st = IR_OK;
    uint32_t live = 0;
    for (uint32_t r = 1; r < nr && !st; r++) {
        IrRegionRec *rr = ir__region(g, r);
        uint32_t prev = 0, count = 0;
        for (uint32_t n = rr->first; n; n = ir__node(g, n)->next) {
            IrNodeRec *nd = ir__node(g, n);
            if (seen[n] || nd->region != r || nd->prev != prev || (nd->flags & IR_NODE_DEAD) || ++count > nn) {
                st = bad(L, "node list of region %u", r);
                break;
            }
            seen[n] = 1;
            prev = n;
        }
        if (!st && rr->last != prev) st = bad(L, "node list of region %u does not end at its last node", r);
        live += count;
    }
    for (uint32_t n = 1; n < nn && !st; n++)
        if (!seen[n] && !(ir__node(g, n)->flags & IR_NODE_DEAD)) st = bad(L, "node %u is in no region", n);
    /* region nesting: walking up from any region must reach the root within nr steps */
    for (uint32_t r = 2; r < nr && !st; r++) {
        uint32_t cur = r, steps = 0;
        while (cur != IR_ROOT_REGION) {
            uint32_t parent = ir__region(g, cur)->parent;
            if (!parent || (ir__node(g, parent)->flags & IR_NODE_DEAD)) break; /* detached region */
            cur = ir__node(g, parent)->region;
            if (++steps > nr) {
                st = bad(L, "region %u is nested inside itself", r);
                break;
            }
            if (steps > MAX_REGION_DEPTH) {
                st = bad(L, "region %u is nested more than %d deep (the reader's limit)", r, MAX_REGION_DEPTH);
                break;
            }
        }
    }
    free(seen);
    if (st) return st;
    g->n_live_nodes = live;
    return IR_OK;
}

/* Value names must be unique among live values (results of live nodes, arguments of live
 * regions, listed constants). */
static IrStatus check_names(Loader *L) {
    IrGraph *g = L->g;
    uint32_t nv = g->values.len;
    IrStatus st = IR_OK;
    uint8_t *listed = calloc(nv, 1);
    uint32_t *owner = calloc(g->str_offs.len, 4);
    if (!listed || !owner) {
        free(listed);
        free(owner);
        return IR_ENOMEM;
    }
    for (uint32_t i = 0; i < g->const_values.len; i++) listed[IR_VEC_AT(g->const_values, uint32_t, i)] = 1;
    for (uint32_t v = 1; v < nv && !st; v++) {
        IrValueRec *r = ir__val(g, v);
        bool alive = (r->kind == IR_VALUE_CONST && listed[v]) ||
                     (r->kind == IR_VALUE_RESULT && !(ir__node(g, r->def)->flags & IR_NODE_DEAD)) ||
                     (r->kind == IR_VALUE_ARG &&
                      (r->def == IR_ROOT_REGION || !(ir__node(g, ir__region(g, r->def)->parent)->flags & IR_NODE_DEAD)));
        if (!alive) continue;
        if (owner[r->name]) st = bad(L, "value name '%s' is defined twice", ir_str(g, r->name));
        owner[r->name] = v;
    }
    free(listed);
    free(owner);
    return st;
}

static IrStatus load_rest(Loader *L) {
    const Irtool__IrbGraph *m = L->m;
    IrGraph *g = L->g;
    uint32_t nstr = g->str_offs.len, nexpr = g->exprs.len;
    if (!vec_resize(g, &g->const_values, 4, m->n_const_values)) return IR_ENOMEM;
    for (size_t i = 0; i < m->n_const_values; i++) {
        uint32_t v = m->const_values[i];
        if (!v || v >= g->values.len || ir__val(g, v)->kind != IR_VALUE_CONST) return bad(L, "constant value %zu", i);
        IR_VEC_AT(g->const_values, uint32_t, i) = v;
    }
    size_t nk = m->n_constraint_kind;
    if (!same_len(nk, m->n_constraint_a) || !same_len(nk, m->n_constraint_b) || !same_len(nk, m->n_constraint_lo) ||
        !same_len(nk, m->n_constraint_hi) || !same_len(nk, m->n_constraint_origin) || !same_len(nk, m->n_constraint_note))
        return bad(L, "constraint table");
    if (!vec_resize(g, &g->constraints, sizeof(IrConstraintRec), nk)) return IR_ENOMEM;
    for (size_t i = 0; i < nk; i++) {
        IrConstraintRec *c = &IR_VEC_AT(g->constraints, IrConstraintRec, i);
        memset(c, 0, sizeof *c);
        c->kind = m->constraint_kind[i], c->a = m->constraint_a[i], c->b = m->constraint_b[i];
        c->lo = m->constraint_lo[i], c->hi = m->constraint_hi[i];
        c->origin = m->constraint_origin[i], c->note = m->constraint_note[i];
        bool ok = c->a && c->a < nexpr && c->kind >= IR_CONSTRAINT_RANGE && c->kind <= IR_CONSTRAINT_DIVISIBLE &&
                  c->origin <= IR_CONSTRAINT_GUARD && c->note < nstr;
        if (ok && c->kind == IR_CONSTRAINT_EQ) ok = c->b && c->b < nexpr;
        if (!ok) return bad(L, "constraint %zu", i);
    }
    if (!same_len(m->n_opset_domain, m->n_opset_version) || !same_len(m->n_meta_key, m->n_meta_value))
        return bad(L, "metadata");
    if (!vec_resize(g, &g->opsets, sizeof(IrKV), m->n_opset_domain) || !vec_resize(g, &g->meta, sizeof(IrKV), m->n_meta_key))
        return IR_ENOMEM;
    for (size_t i = 0; i < m->n_opset_domain; i++) {
        if (m->opset_domain[i] >= nstr) return bad(L, "opset %zu", i);
        IR_VEC_AT(g->opsets, IrKV, i) = (IrKV){m->opset_domain[i], m->opset_version[i]};
    }
    for (size_t i = 0; i < m->n_meta_key; i++) {
        if (m->meta_key[i] >= nstr || m->meta_value[i] >= nstr) return bad(L, "meta %zu", i);
        IR_VEC_AT(g->meta, IrKV, i) = (IrKV){m->meta_key[i], m->meta_value[i]};
    }
    return IR_OK;
}

/* Decodes a whole mapped or in-memory file. weights are borrowed when `borrow`, else copied. */
static IrStatus decode(const unsigned char *data, size_t len, const char *name, IrDiag *diag, bool borrow,
                       IrGraph **out) {
    Loader L = {name, diag, NULL, NULL};
    if (len < HEADER_SIZE || memcmp(data, MAGIC, 8) != 0) {
        ir_diag_report(diag, IR_SEV_ERROR, name, 0, 0, NULL, 0, "not an irtool binary IR file (bad magic)");
        return IR_ESYNTAX;
    }
    Header h;
    memcpy(h.magic, data, 8);
    h.version = get_u32(data + 8);
    h.flags = get_u32(data + 12);
    h.meta_offset = get_u64(data + 16);
    h.meta_size = get_u64(data + 24);
    h.weights_offset = get_u64(data + 32);
    h.weights_size = get_u64(data + 40);
    h.file_size = get_u64(data + 48);
    if (h.version > IR_BINARY_FORMAT_VERSION) {
        ir_diag_report(diag, IR_SEV_ERROR, name, 0, 0, NULL, 0,
                       "binary IR format version %u is newer than this irtool supports (%u); upgrade irtool",
                       h.version, IR_BINARY_FORMAT_VERSION);
        return IR_EUNSUPPORTED;
    }
    if (h.version == 0 || h.flags != 0) return bad(&L, "header version/flags");
    if (h.file_size != len) return bad(&L, "file is %zu bytes but its header says %llu (truncated?)", len, (unsigned long long)h.file_size);
    if (h.meta_offset < HEADER_SIZE || h.meta_offset > len || h.meta_size > len - h.meta_offset ||
        h.weights_offset < h.meta_offset + h.meta_size || h.weights_offset > len || h.weights_size > len - h.weights_offset)
        return bad(&L, "section offsets");
    Irtool__IrbGraph *m = irtool__irb_graph__unpack(NULL, (size_t)h.meta_size, data + h.meta_offset);
    if (!m) return bad(&L, "metadata does not decode");
    L.m = m;
    if (m->format_version != h.version) {
        irtool__irb_graph__free_unpacked(m, NULL);
        return bad(&L, "metadata version");
    }
    IrStatus st = ir_graph_create(&L.g);
    if (st) {
        irtool__irb_graph__free_unpacked(m, NULL);
        return st;
    }
    /* ir_graph_create reserved entry 0 in each table; the loader overwrites whole tables */
    st = load_tables(&L);
    if (!st) st = check_structure(&L);
    if (!st) st = load_rest(&L);
    if (!st) st = check_names(&L);
    if (!st) {
        for (uint32_t i = 1; i < L.g->consts.len; i++) {
            IrConstRec *c = ir__const(L.g, i);
            uint64_t off = m->const_offset[i];
            if (off > h.weights_size || c->nbytes > h.weights_size - off) {
                st = bad(&L, "constant %u data lies outside the weights section", i);
                break;
            }
            const unsigned char *p = data + h.weights_offset + off;
            int64_t numel = 0;
            ir_type_numel(L.g, c->type, &numel);
            if (!ir__const_size_ok(ir_type_dtype(L.g, c->type), numel, p, c->nbytes)) {
                st = bad(&L, "constant %u: malformed string data", i);
                break;
            }
            if (borrow) {
                c->data = p;
            } else {
                void *copy = ir__alloc_block(L.g, c->nbytes);
                if (!copy) {
                    st = IR_ENOMEM;
                    break;
                }
                if (c->nbytes) memcpy(copy, p, c->nbytes);
                c->data = copy;
            }
        }
    }
    irtool__irb_graph__free_unpacked(m, NULL);
    if (!st && L.g->status) st = L.g->status;
    if (st) {
        if (st == IR_ENOMEM) ir_diag_report(diag, IR_SEV_ERROR, name, 0, 0, NULL, 0, "out of memory loading binary IR");
        ir_graph_destroy(L.g);
        return st;
    }
    ir__invalidate_hashes(L.g);
    ir_graph_set_source_file(L.g, name);
    *out = L.g;
    return IR_OK;
}

IrStatus ir_read_binary_mem(const void *data, size_t len, const char *name, IrDiag *diag, IrGraph **out) {
    *out = NULL;
    return decode(data, len, name ? name : "<input>", diag, false, out);
}

IrStatus ir_read_binary(const char *path, IrDiag *diag, IrGraph **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "cannot open: %s", strerror(errno));
        return IR_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        /* not a regular file (a pipe, say): read it into memory instead */
        char *buf;
        size_t len;
        IrStatus s = ir_read_file(path, diag, &buf, &len);
        if (s) return s;
        s = decode((const unsigned char *)buf, len, path, diag, false, out);
        free(buf);
        return s;
    }
    size_t len = (size_t)st.st_size;
    if (len == 0) {
        close(fd);
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "not an irtool binary IR file (empty)");
        return IR_ESYNTAX;
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "cannot map: %s", strerror(errno));
        return IR_EIO;
    }
    IrStatus s = decode(map, len, path, diag, true, out);
    if (s) {
        munmap(map, len);
        return s;
    }
    if (ir_graph_adopt_mapping(*out, map, len) != IR_OK) {
        ir_graph_destroy(*out);
        *out = NULL;
        munmap(map, len);
        return IR_ENOMEM;
    }
    return IR_OK;
}

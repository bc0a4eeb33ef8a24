/* ONNX import: a serialized ModelProto (decoded with protobuf-c) becomes an IrGraph.
 *
 * Reads opsets 1-17 of the default domain and upgrades older operator forms to the opset-17
 * forms of the op table: attributes that became inputs turn into graph constants, Upsample and
 * Resize-10 become Resize-11+, old Softmax gets its flatten semantics spelled out, the axis-
 * aligned broadcasting of opsets 1-6 and old PRelu's per-channel slope become Unsqueezes for
 * numpy broadcasting, Scan-8 becomes a Loop over the batch around Scan-9. Every other
 * attribute is converted through the op table's schema; one it does not list is an error, as
 * are unknown ops, domains and dtypes, each naming the node. Value names stay the ONNX names
 * (a name that an earlier subgraph already used gets a suffix); subgraph references to outer
 * values resolve through a chain of scopes. Hostile input cannot crash it: protobuf nesting is
 * bounded before protobuf-c recurses, and every size is checked before it is used.
 */
#include "ir_internal.h"
#include "onnx_internal.h"
#include "shape.h"

#include "onnx.pb-c.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX importer reads raw_data as little-endian bytes in place"
#endif

#define MAX_WIRE_DEPTH 100 /* protobuf nesting; a real model needs about 6 per subgraph level */
#define MAX_SUBGRAPH_DEPTH 16 /* If/Loop/Scan bodies inside each other */
#define MAX_RANK 1024
#define DROPPED_VALUE UINT32_MAX /* scope entry for an output the upgrade removed */

typedef Onnx__AttributeProto__AttributeType AttrType;
#define AT(x) ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__##x

static const char *S(const char *s) { return s ? s : ""; }

/* ---- protobuf nesting bound ---------------------------------------------------------------- */

static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* Depth of [p, end) read as a protobuf message: length-delimited fields whose payload itself
 * reads as a message count as one level deeper. -1 when it is not a message at all. A call
 * below level `max` does not descend further (a depth above max means too deep), so the scan
 * itself recurses at most max + 1 levels. */
static int wire_depth(const uint8_t *p, const uint8_t *end, int level, int max) {
    int deepest = level;
    while (p < end) {
        uint64_t key, n;
        if (!wire_varint(&p, end, &key) || (key >> 3) == 0) return -1;
        switch (key & 7) {
        case 0:
            if (!wire_varint(&p, end, &n)) return -1;
            break;
        case 1:
            if (end - p < 8) return -1;
            p += 8;
            break;
        case 5:
            if (end - p < 4) return -1;
            p += 4;
            break;
        case 2:
            if (!wire_varint(&p, end, &n) || n > (uint64_t)(end - p)) return -1;
            if (n && level <= max && deepest <= max) { /* past max: only validate, no descent */
                int d = wire_depth(p, p + n, level + 1, max);
                if (d > deepest) deepest = d;
            }
            p += n;
            break;
        default: return -1;
        }
    }
    return deepest;
}

/* ---- string-keyed map (keys borrowed) ------------------------------------------------------ */

typedef struct NameMap {
    const char **keys;
    uint32_t *vals;
    uint32_t cap, count;
} NameMap;

static void nm_free(NameMap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static uint32_t nm_slot(const NameMap *m, const char *k) {
    uint32_t j = (uint32_t)ir_hash_bytes(k, strlen(k), 17) & (m->cap - 1);
    while (m->keys[j] && strcmp(m->keys[j], k) != 0) j = (j + 1) & (m->cap - 1);
    return j;
}

static bool nm_get(const NameMap *m, const char *k, uint32_t *v) {
    if (!m->cap) return false;
    uint32_t j = nm_slot(m, k);
    if (!m->keys[j]) return false;
    if (v) *v = m->vals[j];
    return true;
}

static bool nm_put(NameMap *m, const char *k, uint32_t v) {
    if ((m->count + 1) * 4 > m->cap * 3) {
        NameMap n = {0};
        n.cap = m->cap ? m->cap * 2 : 64;
        n.keys = calloc(n.cap, sizeof *n.keys);
        n.vals = calloc(n.cap, sizeof *n.vals);
        if (!n.keys || !n.vals) {
            nm_free(&n);
            return false;
        }
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                uint32_t j = nm_slot(&n, m->keys[i]);
                n.keys[j] = m->keys[i];
                n.vals[j] = m->vals[i];
                n.count++;
            }
        nm_free(m);
        *m = n;
    }
    uint32_t j = nm_slot(m, k);
    if (!m->keys[j]) {
        m->keys[j] = k;
        m->count++;
    }
    m->vals[j] = v;
    return true;
}

/* ---- importer state ------------------------------------------------------------------------ */

typedef struct Scope {
    struct Scope *up;
    NameMap vals; /* ONNX name -> IrValueId (or DROPPED_VALUE) */
} Scope;

typedef struct Imp {
    IrGraph *g;
    IrDiag *diag;
    const char *file; /* diagnostics */
    const char *path; /* the model file; NULL = no external data */
    char *dir;        /* realpath of the model's folder, computed on first use */
    int64_t opset;    /* of the default domain */
    IrStatus status;  /* first failure */
    NameMap taken;    /* every value name in the model plus generated ones */
    NameMap syms;     /* dim_param text -> IrSymId */
    char **owned;     /* strings this import allocated (keys of the maps) */
    uint32_t n_owned, cap_owned;
    IrValueId *guessed; /* values typed only while importing (see guess_types) */
    uint32_t n_guessed, cap_guessed;
    int subgraph_depth; /* subgraphs open around the node being imported */
} Imp;

static void imp_fail(Imp *I, IrStatus s) {
    if (I->status == IR_OK) I->status = s;
}

static void imp_error(Imp *I, IrStatus s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void imp_error(Imp *I, IrStatus s, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ir_diag_report(I->diag, IR_SEV_ERROR, I->file, 0, 0, NULL, 0, "%s", msg);
    imp_fail(I, s);
}

static void imp_oom(Imp *I) { imp_error(I, IR_ENOMEM, "out of memory"); }

static char *imp_strdup(Imp *I, const char *s, size_t n) {
    if (I->n_owned == I->cap_owned) {
        uint32_t nc = I->cap_owned ? I->cap_owned * 2 : 64;
        char **p = realloc(I->owned, nc * sizeof *p);
        if (!p) return NULL;
        I->owned = p;
        I->cap_owned = nc;
    }
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    I->owned[I->n_owned++] = d;
    return d;
}

/* A node as named in messages: `node 'Conv_3' (op Conv)`, or by position when unnamed. */
typedef struct NodeRef {
    const Onnx__NodeProto *np;
    uint32_t index; /* 1-based within its graph */
} NodeRef;

static void node_who(const NodeRef *nr, char *buf, size_t cap) {
    const char *op = S(nr->np->op_type);
    if (nr->np->name && *nr->np->name)
        snprintf(buf, cap, "node '%.200s' (op %.80s)", nr->np->name, op);
    else
        snprintf(buf, cap, "node #%u (op %.80s)", nr->index, op);
}

static void node_error(Imp *I, const NodeRef *nr, IrStatus s, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void node_error(Imp *I, const NodeRef *nr, IrStatus s, const char *fmt, ...) {
    char msg[1024], who[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    node_who(nr, who, sizeof who);
    imp_error(I, s, "%s: %s", who, msg);
}

static const char *onnx_dtype_name(int code) {
    static const char *names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16",
                                  "int32", "int64", "string", "bool", "float16", "double",
                                  "uint32", "uint64", "complex64", "complex128", "bfloat16",
                                  "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz",
                                  "uint4", "int4"};
    if (code >= 0 && (size_t)code < sizeof names / sizeof names[0]) return names[code];
    return "unknown";
}

static const char *attr_type_name(int t) {
    switch (t) {
    case AT(FLOAT): return "float";
    case AT(INT): return "int";
    case AT(STRING): return "string";
    case AT(TENSOR): return "tensor";
    case AT(GRAPH): return "graph";
    case AT(SPARSE_TENSOR): return "sparse tensor";
    case AT(TYPE_PROTO): return "type";
    case AT(FLOATS): return "floats";
    case AT(INTS): return "ints";
    case AT(STRINGS): return "strings";
    case AT(TENSORS): return "tensors";
    case AT(GRAPHS): return "graphs";
    case AT(SPARSE_TENSORS): return "sparse tensors";
    case AT(TYPE_PROTOS): return "types";
    default: return "undefined";
    }
}

/* ---- value names --------------------------------------------------------------------------- */

static bool taken(Imp *I, const char *name) {
    return nm_get(&I->taken, name, NULL) || ir_value_find(I->g, name, strlen(name));
}

/* A fresh value name `base` + `suffix` (+ `_N`) that no ONNX value and no IR value uses. */
static IrStrId gen_name(Imp *I, const char *base, const char *suffix) {
    char buf[512];
    snprintf(buf, sizeof buf, "%.400s%s", base, suffix);
    size_t bl = strlen(buf);
    for (uint32_t k = 1; taken(I, buf); k++) snprintf(buf + bl, sizeof buf - bl, "_%u", k);
    char *own = imp_strdup(I, buf, strlen(buf));
    if (!own || !nm_put(&I->taken, own, 1)) {
        imp_oom(I);
        return 0;
    }
    return ir_str_intern_cstr(I->g, buf);
}

/* The IR name for an ONNX value: the same text unless an earlier scope already used it. */
static IrStrId value_name(Imp *I, const char *onnx_name) {
    if (!ir_value_find(I->g, onnx_name, strlen(onnx_name))) return ir_str_intern_cstr(I->g, onnx_name);
    return gen_name(I, onnx_name, "");
}

static void prescan_graph(Imp *I, const Onnx__GraphProto *gp, int depth);

static void prescan_node(Imp *I, const Onnx__NodeProto *np, int depth) {
    for (size_t i = 0; i < np->n_output; i++)
        if (np->output[i] && *np->output[i] && !nm_put(&I->taken, np->output[i], 1)) imp_oom(I);
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        if (a->g) prescan_graph(I, a->g, depth + 1);
        for (size_t k = 0; k < a->n_graphs; k++) prescan_graph(I, a->graphs[k], depth + 1);
    }
}

static void prescan_graph(Imp *I, const Onnx__GraphProto *gp, int depth) {
    if (depth > MAX_WIRE_DEPTH) return;
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i]->name && !nm_put(&I->taken, gp->initializer[i]->name, 1)) imp_oom(I);
    for (size_t i = 0; i < gp->n_input; i++)
        if (gp->input[i]->name && !nm_put(&I->taken, gp->input[i]->name, 1)) imp_oom(I);
    for (size_t i = 0; i < gp->n_node; i++) prescan_node(I, gp->node[i], depth);
}

/* ---- symbols and dimension expressions ----------------------------------------------------- */

static IrSymId sym_for(Imp *I, const char *param) {
    uint32_t id;
    if (nm_get(&I->syms, param, &id)) return id;
    char buf[256];
    size_t n = 0;
    for (const char *p = param; *p && n < 200; p++) {
        unsigned char c = (unsigned char)*p;
        buf[n++] = (isalnum(c) && c < 0x80) || c == '_' ? (char)c : '_';
    }
    buf[n] = 0;
    if (n == 0 || isdigit((unsigned char)buf[0])) {
        memmove(buf + 1, buf, n + 1);
        buf[0] = '_';
        n++;
    }
    for (uint32_t k = 2; ir_sym_find(I->g, buf, strlen(buf)); k++) snprintf(buf + n, sizeof buf - n, "_%u", k);
    IrSymId s = ir_sym_declare(I->g, buf);
    char *own = imp_strdup(I, param, strlen(param));
    if (!s || !own || !nm_put(&I->syms, own, s)) {
        imp_oom(I);
        return 0;
    }
    return s;
}

/* A small reader for the text format's dimension syntax (types and constraints in metadata). */
typedef struct ExprReader {
    IrGraph *g;
    const char *p;
    int depth;
    bool bad;
} ExprReader;

static void er_space(ExprReader *E) {
    while (*E->p == ' ' || *E->p == '\t') E->p++;
}

static bool er_accept(ExprReader *E, char c) {
    er_space(E);
    if (*E->p != c) return false;
    E->p++;
    return true;
}

static bool er_int(ExprReader *E, int64_t *v) {
    er_space(E);
    char *end;
    errno = 0;
    long long x = strtoll(E->p, &end, 10);
    if (end == E->p || errno) return false;
    E->p = end;
    *v = x;
    return true;
}

static IrExprId er_expr(ExprReader *E);

static IrExprId er_factor(ExprReader *E) {
    er_space(E);
    if (++E->depth > 64) {
        E->bad = true;
        return 0;
    }
    IrExprId e = 0;
    char c = *E->p;
    int64_t v;
    if (isdigit((unsigned char)c) || c == '-') {
        if (er_int(E, &v)) e = ir_expr_const(E->g, v);
    } else if (c == '?') {
        E->p++;
        e = ir_expr_unknown(E->g);
    } else if (isalpha((unsigned char)c) || c == '_') {
        const char *s = E->p;
        while (isalnum((unsigned char)*E->p) || *E->p == '_' || *E->p == '.') E->p++;
        IrSymId sym = ir_sym_find(E->g, s, (size_t)(E->p - s));
        if (sym) e = ir_expr_sym(E->g, sym);
    } else if (c == '(') {
        E->p++;
        e = er_expr(E);
        if (!er_accept(E, ')')) e = 0;
    }
    E->depth--;
    if (!e) E->bad = true;
    return e;
}

static IrExprId er_term(ExprReader *E) {
    IrExprId e = er_factor(E);
    while (e) {
        er_space(E);
        char c = *E->p;
        if (c != '*' && c != '/' && c != '%') break;
        E->p++;
        IrExprId r = er_factor(E);
        int64_t rv;
        if (!r || (c != '*' && ir_expr_is_const(E->g, r, &rv) && rv == 0)) {
            E->bad = true;
            return 0;
        }
        e = ir_expr_binary(E->g, c == '*' ? IR_EXPR_MUL : c == '/' ? IR_EXPR_DIV : IR_EXPR_MOD, e, r);
    }
    return e;
}

static IrExprId er_expr(ExprReader *E) {
    IrExprId e = er_term(E);
    while (e) {
        er_space(E);
        char c = *E->p;
        if (c != '+' && !(c == '-' && E->p[1] != '=')) break;
        E->p++;
        IrExprId r = er_term(E);
        if (!r) return 0;
        e = ir_expr_binary(E->g, c == '+' ? IR_EXPR_ADD : IR_EXPR_SUB, e, r);
    }
    return e;
}

/* `f32[B, S/8, 8]`, `f32[]`, `f32[*]`, `seq<f32[S]>`, `seq<f32>`, `opt<seq<f32>>`; 0 when it
 * does not read. `depth` bounds the nesting. */
static IrTypeId er_type_at(ExprReader *E, int depth) {
    IrGraph *g = E->g;
    er_space(E);
    const char *s = E->p;
    while (isalnum((unsigned char)*E->p)) E->p++;
    size_t n = (size_t)(E->p - s);
    if (n == 3 && (!memcmp(s, "seq", 3) || !memcmp(s, "opt", 3)) && *E->p == '<' && depth < 2) {
        bool seq = s[0] == 's';
        E->p++;
        er_space(E);
        const char *q = E->p;
        while (isalnum((unsigned char)*q)) q++;
        IrTypeId e;
        IrDType edt = ir_dtype_from_name(E->p, (size_t)(q - E->p));
        const char *after = q;
        while (*after == ' ') after++;
        if (edt && *after == '>') {
            E->p = q;
            e = ir_type_tensor(g, edt, IR_RANK_UNKNOWN, NULL);
        } else {
            e = er_type_at(E, depth + 1);
        }
        if (!e || !er_accept(E, '>')) return 0;
        return seq ? ir_type_seq(g, e) : ir_type_opt(g, e);
    }
    IrDType dt = ir_dtype_from_name(s, n);
    if (!dt || !er_accept(E, '[')) return 0;
    if (er_accept(E, '*')) return er_accept(E, ']') ? ir_type_tensor(g, dt, IR_RANK_UNKNOWN, NULL) : 0;
    IrExprId dims[64];
    uint32_t rank = 0;
    if (!er_accept(E, ']')) {
        do {
            if (rank == 64) return 0;
            dims[rank] = er_expr(E);
            if (E->bad || !dims[rank]) return 0;
            rank++;
        } while (er_accept(E, ','));
        if (!er_accept(E, ']')) return 0;
    }
    return ir_type_tensor(g, dt, rank, dims);
}

static IrTypeId er_type(IrGraph *g, const char *text) {
    ExprReader E = {g, text, 0, false};
    IrTypeId t = er_type_at(&E, 0);
    er_space(&E);
    return *E.p ? 0 : t;
}

/* ---- types --------------------------------------------------------------------------------- */

/* Text after `key` in a doc string made of `key=value` lines; the value is unescaped into buf. */
static bool doc_value(const char *doc, const char *key, const char **cursor, char *buf, size_t cap) {
    size_t kl = strlen(key);
    const char *p = cursor && *cursor ? *cursor : doc;
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        const char *next = eol ? eol + 1 : p + strlen(p);
        if (strncmp(p, key, kl) == 0) {
            size_t n = 0;
            for (const char *q = p + kl; q < (eol ? eol : next) && n + 1 < cap; q++) {
                if (*q == '\\' && q + 1 < (eol ? eol : next)) {
                    q++;
                    buf[n++] = *q == 'n' ? '\n' : *q;
                } else {
                    buf[n++] = *q;
                }
            }
            buf[n] = 0;
            if (cursor) *cursor = next;
            return true;
        }
        p = next;
    }
    return false;
}

/* The IR type of an ONNX TypeProto without doc-string hints; depth bounds seq/opt nesting. */
static bool type_from_proto_plain(Imp *I, const Onnx__TypeProto *tp, const char *what, int depth, IrTypeId *out) {
    *out = 0;
    if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return true;
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ||
        tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
        bool seq = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
        const Onnx__TypeProto *et = seq ? (tp->sequence_type ? tp->sequence_type->elem_type : NULL)
                                        : (tp->optional_type ? tp->optional_type->elem_type : NULL);
        IrTypeId e = 0;
        if (depth > 2) {
            imp_error(I, IR_EUNSUPPORTED, "%s: sequence/optional types nested too deeply (more than 3 levels)", what);
            return false;
        }
        if (!type_from_proto_plain(I, et, what, depth + 1, &e)) return false;
        IrTypeKind ek = ir_type_kind(I->g, e);
        if (seq && ek != IR_TYPE_TENSOR) {
            imp_error(I, IR_EUNSUPPORTED, "%s: a sequence of %s is not supported (sequences hold tensors)", what,
                      ek == IR_TYPE_SEQ ? "sequences" : "optionals");
            return false;
        }
        if (!seq && ek == IR_TYPE_OPT) {
            imp_error(I, IR_EUNSUPPORTED, "%s: an optional of an optional is not supported", what);
            return false;
        }
        *out = seq ? ir_type_seq(I->g, e) : ir_type_opt(I->g, e);
        if (!*out) imp_oom(I);
        return *out != 0;
    }
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
        const char *kind = tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE ? "a map" : "a sparse tensor";
        imp_error(I, IR_EUNSUPPORTED, "%s has %s type; only tensors, sequences and optionals are supported", what,
                  kind);
        return false;
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt || !tt->has_elem_type || tt->elem_type == 0) return true;
    IrDType dt = ir_dtype_from_onnx(tt->elem_type);
    if (!dt) {
        imp_error(I, IR_EUNSUPPORTED, "%s: dtype %s is not supported", what, onnx_dtype_name(tt->elem_type));
        return false;
    }
    if (!tt->shape) {
        *out = ir_type_tensor(I->g, dt, IR_RANK_UNKNOWN, NULL);
        return true;
    }
    if (tt->shape->n_dim > MAX_RANK) {
        imp_error(I, IR_EUNSUPPORTED, "%s: rank %zu is too large", what, tt->shape->n_dim);
        return false;
    }
    uint32_t rank = (uint32_t)tt->shape->n_dim;
    IrExprId small[16], *dims = rank <= 16 ? small : malloc(rank * sizeof *dims);
    if (!dims) {
        imp_oom(I);
        return false;
    }
    for (uint32_t i = 0; i < rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0)
            dims[i] = ir_expr_const(I->g, d->dim_value);
        else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                 *d->dim_param)
            dims[i] = ir_expr_sym(I->g, sym_for(I, d->dim_param));
        else
            dims[i] = ir_expr_unknown(I->g);
    }
    *out = ir_type_tensor(I->g, dt, rank, dims);
    if (dims != small) free(dims);
    return true;
}

/* The IR type of an ONNX value; `what` names the value in messages. False on error. A doc
 * string written by our exporter carries the exact type (dims that are expressions), used when
 * it agrees with the TypeProto's kind and dtype. */
static bool type_from_proto(Imp *I, const Onnx__TypeProto *tp, const char *doc, const char *what,
                            IrTypeId *out) {
    if (!type_from_proto_plain(I, tp, what, 0, out)) return false;
    char buf[1024];
    if (*out && doc && doc_value(doc, IR_ONNX_DOC_TYPE, NULL, buf, sizeof buf)) {
        IrTypeId t = er_type(I->g, buf);
        if (t && ir_type_kind(I->g, t) == ir_type_kind(I->g, *out) &&
            ir_type_elem_dtype(I->g, t) == ir_type_elem_dtype(I->g, *out))
            *out = t;
    }
    return true;
}

/* ---- tensors ------------------------------------------------------------------------------- */

static const char *model_dir(Imp *I) {
    if (I->dir) return I->dir;
    const char *slash = strrchr(I->path, '/');
    char *d = slash ? strndup(I->path, (size_t)(slash - I->path) + (slash == I->path)) : strdup(".");
    if (!d) return NULL;
    I->dir = realpath(d, NULL);
    free(d);
    return I->dir;
}

static bool parse_u64(const char *s, uint64_t *v) {
    if (!s || !isdigit((unsigned char)*s)) return false;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (*end || errno) return false;
    *v = x;
    return true;
}

/* Tensor data stored beside the model: location/offset/length, mapped read-only. */
static IrConstId tensor_external(Imp *I, const Onnx__TensorProto *t, IrTypeId type, size_t nbytes,
                                 const char *what) {
    const char *loc = NULL;
    uint64_t off = 0, length = 0;
    bool has_length = false;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const char *k = S(t->external_data[i]->key), *v = t->external_data[i]->value;
        if (strcmp(k, "location") == 0) {
            loc = v;
        } else if (strcmp(k, "offset") == 0) {
            if (!parse_u64(v, &off)) goto bad_number;
        } else if (strcmp(k, "length") == 0) {
            if (!parse_u64(v, &length)) goto bad_number;
            has_length = true;
        }
    }
    if (!loc || !*loc) {
        imp_error(I, IR_ESYNTAX, "%s: external data has no location", what);
        return 0;
    }
    if (!I->path) {
        imp_error(I, IR_EIO, "%s: external data '%s' cannot be found: the model was not read from a file",
                  what, loc);
        return 0;
    }
    if (loc[0] == '/') {
        imp_error(I, IR_EIO, "%s: external data path '%s' is absolute; it must be relative to the model's folder",
                  what, loc);
        return 0;
    }
    if (has_length && length != nbytes) {
        imp_error(I, IR_ESYNTAX, "%s: external data length %llu does not match the %zu bytes of its type",
                  what, (unsigned long long)length, nbytes);
        return 0;
    }
    const char *dir = model_dir(I);
    if (!dir) {
        imp_error(I, IR_EIO, "%s: cannot resolve the folder of '%s': %s", what, I->path, strerror(errno));
        return 0;
    }
    struct stat st;
    const char *why;
    int fd = ir__open_beside(dir, loc, &st, &why);
    if (fd == -2) imp_error(I, IR_EIO, "%s: external data path '%s' escapes the model's folder", what, loc);
    else if (fd < 0) imp_error(I, IR_EIO, "%s: cannot open external data '%s': %s", what, loc, why);
    if (fd < 0) return 0;
    if ((uint64_t)st.st_size < off || (uint64_t)st.st_size - off < nbytes) {
        imp_error(I, IR_EIO, "%s: external data '%s' is shorter than offset %llu + %zu bytes", what, loc,
                  (unsigned long long)off, nbytes);
        close(fd);
        return 0;
    }
    if (nbytes == 0) {
        close(fd);
        return ir_const_create(I->g, type, NULL, 0);
    }
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t base = off - off % (uint64_t)pg;
    size_t len = nbytes + (size_t)(off - base);
    void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)base);
    close(fd);
    if (m == MAP_FAILED) {
        imp_error(I, IR_EIO, "%s: cannot map external data '%s': %s", what, loc, strerror(errno));
        return 0;
    }
    if (ir_graph_adopt_mapping(I->g, m, len) != IR_OK) {
        munmap(m, len);
        imp_oom(I);
        return 0;
    }
    return ir_const_create_borrowed(I->g, type, (const char *)m + (off - base), nbytes);
bad_number:
    imp_error(I, IR_ESYNTAX, "%s: external data offset/length is not a number", what);
    return 0;
}

/* A string TensorProto (string_data, one bytes entry per element; ONNX has no raw form for
 * strings) as a constant blob. */
static IrConstId strings_to_const(Imp *I, const Onnx__TensorProto *t, IrTypeId type, int64_t numel, const char *what) {
    if (t->has_raw_data || (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)) {
        imp_error(I, IR_ESYNTAX, "%s: string tensors keep their data in string_data", what);
        return 0;
    }
    if (t->n_string_data != (size_t)numel) {
        imp_error(I, IR_ESYNTAX, "%s: tensor has %zu strings, its shape needs %lld", what, t->n_string_data,
                  (long long)numel);
        return 0;
    }
    IrStringElem *el = malloc((t->n_string_data + 1) * sizeof *el);
    if (!el) {
        imp_oom(I);
        return 0;
    }
    for (size_t i = 0; i < t->n_string_data; i++)
        el[i] = (IrStringElem){(const char *)t->string_data[i].data, t->string_data[i].len};
    IrConstId c = ir_const_create_strings(I->g, type, el, t->n_string_data);
    free(el);
    if (!c) imp_oom(I);
    return c;
}

/* A TensorProto as graph-owned constant data; `what` names it in messages ("initializer 'w'"). */
static IrConstId tensor_to_const(Imp *I, const Onnx__TensorProto *t, const char *what) {
    IrGraph *g = I->g;
    IrDType dt = t->has_data_type ? ir_dtype_from_onnx(t->data_type) : IR_DTYPE_NONE;
    if (!dt) {
        imp_error(I, IR_EUNSUPPORTED, "%s: dtype %s is not supported", what,
                  onnx_dtype_name(t->has_data_type ? t->data_type : 0));
        return 0;
    }
    if (t->n_dims > MAX_RANK) {
        imp_error(I, IR_EUNSUPPORTED, "%s: rank %zu is too large", what, t->n_dims);
        return 0;
    }
    int64_t numel;
    if (!ir_shape_numel_checked((uint32_t)t->n_dims, t->dims, &numel)) {
        imp_error(I, IR_ESYNTAX, "%s: invalid shape (a negative dim, or more elements than int64 counts)", what);
        return 0;
    }
    size_t esz = ir_dtype_size(dt);
    if ((uint64_t)numel > (uint64_t)(SIZE_MAX / 2) / esz) {
        imp_error(I, IR_ENOMEM, "%s: tensor too large", what);
        return 0;
    }
    size_t nbytes = (size_t)numel * esz;
    IrTypeId type = ir_type_tensor_i64(g, dt, (uint32_t)t->n_dims, t->dims);
    if (!type) {
        imp_oom(I);
        return 0;
    }
    if (t->segment) {
        imp_error(I, IR_EUNSUPPORTED, "%s: segmented tensors are not supported", what);
        return 0;
    }
    if (dt == IR_DTYPE_STRING) return strings_to_const(I, t, type, numel, what);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return tensor_external(I, t, type, nbytes, what);
    if (t->has_raw_data) {
        if (t->raw_data.len != nbytes) {
            imp_error(I, IR_ESYNTAX, "%s: raw_data has %zu bytes, its shape needs %zu", what, t->raw_data.len, nbytes);
            return 0;
        }
        return ir_const_create(g, type, t->raw_data.data, nbytes);
    }
    size_t count;
    switch (dt) {
    case IR_DTYPE_F32: count = t->n_float_data; break;
    case IR_DTYPE_F64: count = t->n_double_data; break;
    case IR_DTYPE_I64: count = t->n_int64_data; break;
    case IR_DTYPE_U32:
    case IR_DTYPE_U64: count = t->n_uint64_data; break;
    default: count = t->n_int32_data; break;
    }
    if (count != (size_t)numel) {
        if (count == 0)
            imp_error(I, IR_ESYNTAX, "%s: tensor has no data", what);
        else
            imp_error(I, IR_ESYNTAX, "%s: tensor has %zu values, its shape needs %lld", what, count, (long long)numel);
        return 0;
    }
    IrConstId c = ir_const_create(g, type, NULL, nbytes);
    if (!c) {
        imp_oom(I);
        return 0;
    }
    void *dst = (void *)ir_const_data(g, c); /* graph-owned, freshly allocated */
    for (size_t i = 0; i < count; i++) {
        switch (dt) {
        case IR_DTYPE_F32: ((float *)dst)[i] = t->float_data[i]; break;
        case IR_DTYPE_F64: ((double *)dst)[i] = t->double_data[i]; break;
        case IR_DTYPE_I64: ((int64_t *)dst)[i] = t->int64_data[i]; break;
        case IR_DTYPE_U64: ((uint64_t *)dst)[i] = t->uint64_data[i]; break;
        case IR_DTYPE_U32: ((uint32_t *)dst)[i] = (uint32_t)t->uint64_data[i]; break;
        case IR_DTYPE_I32: ((int32_t *)dst)[i] = t->int32_data[i]; break;
        default: {
            /* f16/bf16/i16/u16/i8/u8/bool/fp8: the low bytes of each int32 (bit patterns) */
            uint32_t bits = (uint32_t)t->int32_data[i];
            if (esz == 2) {
                uint16_t h = (uint16_t)bits;
                memcpy((char *)dst + i * 2, &h, 2);
            } else {
                ((uint8_t *)dst)[i] = dt == IR_DTYPE_BOOL ? (bits != 0) : (uint8_t)bits;
            }
        }
        }
    }
    return c;
}

/* ---- nodes --------------------------------------------------------------------------------- */

static int attr_type(const Onnx__AttributeProto *a) {
    if (a->has_type && a->type != AT(UNDEFINED)) return a->type;
    if (a->n_floats) return AT(FLOATS);
    if (a->n_ints) return AT(INTS);
    if (a->n_strings) return AT(STRINGS);
    if (a->n_tensors) return AT(TENSORS);
    if (a->n_graphs) return AT(GRAPHS);
    if (a->g) return AT(GRAPH);
    if (a->t) return AT(TENSOR);
    if (a->sparse_tensor) return AT(SPARSE_TENSOR);
    if (a->has_s) return AT(STRING);
    if (a->has_f) return AT(FLOAT);
    if (a->has_i) return AT(INT);
    return AT(UNDEFINED);
}

typedef struct PendingAttr {
    const char *name;
    IrAttrValue v;
} PendingAttr;

/* A node being built: operands after name resolution and upgrades, attributes added by the
 * upgrades, and which ONNX attributes the upgrades consumed. */
typedef struct NodeBuild {
    NodeRef ref;
    Scope *scope;
    IrRegionId region;
    const NameMap *types; /* name -> ValueInfoProto index of this graph */
    Onnx__ValueInfoProto *const *infos;
    IrOp op;
    IrValueId *ops;
    uint32_t n_ops, cap_ops;
    bool *consumed;
    PendingAttr extra[8];
    uint32_t n_extra;
    uint32_t n_out; /* ONNX outputs kept */
    int64_t *ibuf;  /* scratch for attribute arrays */
} NodeBuild;

static const Onnx__AttributeProto *nb_attr(NodeBuild *nb, const char *name, bool consume) {
    const Onnx__NodeProto *np = nb->ref.np;
    for (size_t i = 0; i < np->n_attribute; i++)
        if (strcmp(S(np->attribute[i]->name), name) == 0) {
            if (consume) nb->consumed[i] = true;
            return np->attribute[i];
        }
    return NULL;
}

static bool nb_set_operand(Imp *I, NodeBuild *nb, uint32_t pos, IrValueId v) {
    if (pos >= nb->cap_ops) {
        uint32_t nc = pos + 8;
        IrValueId *p = realloc(nb->ops, nc * sizeof *p);
        if (!p) {
            imp_oom(I);
            return false;
        }
        nb->ops = p;
        nb->cap_ops = nc;
    }
    while (nb->n_ops <= pos) nb->ops[nb->n_ops++] = 0;
    nb->ops[pos] = v;
    return true;
}

static void nb_extra(NodeBuild *nb, const char *name, IrAttrValue v) {
    if (nb->n_extra < sizeof nb->extra / sizeof nb->extra[0]) nb->extra[nb->n_extra++] = (PendingAttr){name, v};
}

static void nb_extra_str(Imp *I, NodeBuild *nb, const char *name, const char *s) {
    IrAttrValue v = {.kind = IR_ATTR_STRING, .s = ir_str_intern_cstr(I->g, s)};
    nb_extra(nb, name, v);
}

/* Base for names of values the upgrade creates: the node's first output (or its name). */
static const char *nb_base(NodeBuild *nb) {
    const Onnx__NodeProto *np = nb->ref.np;
    if (np->n_output && np->output[0] && *np->output[0]) return np->output[0];
    if (np->name && *np->name) return np->name;
    return "onnx";
}

/* A new graph constant (dims given, data bytes) named after the node; 0 on failure. */
static IrValueId nb_const_value(Imp *I, NodeBuild *nb, IrDType dt, uint32_t rank, const int64_t *dims,
                                const void *data, const char *suffix) {
    IrTypeId t = ir_type_tensor_i64(I->g, dt, rank, dims);
    IrConstId c = t ? ir_const_create(I->g, t, data, (size_t)ir_shape_numel(rank, dims) * ir_dtype_size(dt)) : 0;
    IrStrId name = c ? gen_name(I, nb_base(nb), suffix) : 0;
    IrValueId v = name ? ir_graph_add_const_value(I->g, ir_str(I->g, name), c) : 0;
    if (!v) imp_oom(I);
    return v;
}

/* Adds a graph constant (dims given, data bytes) as operand `pos`. */
static bool nb_const_operand(Imp *I, NodeBuild *nb, uint32_t pos, IrDType dt, uint32_t rank,
                             const int64_t *dims, const void *data, const char *suffix) {
    IrValueId v = nb_const_value(I, nb, dt, rank, dims, data, suffix);
    return v && nb_set_operand(I, nb, pos, v);
}

static void guess_types(Imp *I, IrNodeId n);

/* A one-result node the upgrade inserts beside the op itself (an Unsqueeze of an operand):
 * its result gets a fresh name from `suffix`, its name `NODE/what` when the ONNX node has one,
 * and in old models a guessed type like every other result. 0 on failure. */
static IrNodeId nb_aux_node(Imp *I, NodeBuild *nb, IrOp op, uint32_t n_ops, const IrValueId *ops,
                            const char *suffix, const char *what) {
    IrStrId name = gen_name(I, nb_base(nb), suffix);
    IrNodeId n = name ? ir__node_create(I->g, nb->region, 0, op, n_ops, ops, 1, &name, NULL) : 0;
    if (!n) {
        imp_oom(I);
        return 0;
    }
    const Onnx__NodeProto *np = nb->ref.np;
    if (np->name && *np->name) {
        char buf[512];
        snprintf(buf, sizeof buf, "%.400s/%s", np->name, what);
        ir_node_set_name(I->g, n, buf);
    }
    if (I->opset < 13) guess_types(I, n);
    return n;
}

/* `v` with `count` axes of size 1 inserted from position `first` on (Unsqueeze-13). */
static IrValueId nb_unsqueeze(Imp *I, NodeBuild *nb, IrValueId v, int64_t first, int64_t count) {
    int64_t axes[MAX_RANK];
    if (count <= 0) return v;
    if (count > MAX_RANK) {
        node_error(I, &nb->ref, IR_EUNSUPPORTED, "rank too large");
        return 0;
    }
    for (int64_t i = 0; i < count; i++) axes[i] = first + i;
    IrValueId ops[2] = {v, nb_const_value(I, nb, IR_DTYPE_I64, 1, &count, axes, "_axes")};
    IrNodeId n = ops[1] ? nb_aux_node(I, nb, IR_OP_UNSQUEEZE, 2, ops, "_unsqueezed", "unsqueeze") : 0;
    return n ? ir_node_result(I->g, n, 0) : 0;
}

static uint32_t value_rank(Imp *I, IrValueId v) {
    return v ? ir_type_rank(I->g, ir_value_type(I->g, v)) : IR_RANK_UNKNOWN;
}

/* An INTS attribute that became an i64[n] input (Split's split, Squeeze's axes, ...). */
static bool attr_to_ints_input(Imp *I, NodeBuild *nb, const char *name, uint32_t pos) {
    const Onnx__AttributeProto *a = nb_attr(nb, name, true);
    if (!a) return true;
    if (attr_type(a) != AT(INTS) && attr_type(a) != AT(INT)) {
        node_error(I, &nb->ref, IR_ESYNTAX, "attribute '%s' must be ints, got %s", name, attr_type_name(attr_type(a)));
        return false;
    }
    bool one = attr_type(a) == AT(INT);
    int64_t n = one ? 1 : (int64_t)a->n_ints;
    char suffix[64];
    snprintf(suffix, sizeof suffix, "_%s", name);
    return nb_const_operand(I, nb, pos, IR_DTYPE_I64, 1, &n, one ? &a->i : a->ints, suffix);
}

/* A FLOAT attribute that became a scalar input of the data's dtype (Clip's min, Pad's value). */
static bool attr_to_scalar_input(Imp *I, NodeBuild *nb, const char *name, uint32_t pos) {
    const Onnx__AttributeProto *a = nb_attr(nb, name, true);
    if (!a) return true;
    if (attr_type(a) != AT(FLOAT)) {
        node_error(I, &nb->ref, IR_ESYNTAX, "attribute '%s' must be a float, got %s", name, attr_type_name(attr_type(a)));
        return false;
    }
    IrDType dt = nb->n_ops && nb->ops[0] ? ir_type_dtype(I->g, ir_value_type(I->g, nb->ops[0])) : IR_DTYPE_NONE;
    if (dt == IR_DTYPE_NONE) dt = IR_DTYPE_F32;
    unsigned char buf[8] = {0};
    ir_elem_set_f64(dt, buf, 0, a->f);
    char suffix[64];
    snprintf(suffix, sizeof suffix, "_%s", name);
    return nb_const_operand(I, nb, pos, dt, 0, NULL, buf, suffix);
}

/* Upsample-7/9 and Resize-10 behave like Resize-11+ with asymmetric coordinates (and floor
 * rounding for nearest), as ONNX's own version converter maps them. */
static bool upgrade_resize(Imp *I, NodeBuild *nb, bool upsample) {
    if (upsample && I->opset < 7) {
        /* Upsample-1: NCHW input, height_scale and width_scale */
        const Onnx__AttributeProto *h = nb_attr(nb, "height_scale", true), *w = nb_attr(nb, "width_scale", true);
        if (!h || !w || attr_type(h) != AT(FLOAT) || attr_type(w) != AT(FLOAT)) {
            node_error(I, &nb->ref, IR_ESYNTAX, "Upsample-1 needs 'height_scale' and 'width_scale' attributes (floats)");
            return false;
        }
        int64_t n = 4;
        float scales[4] = {1.0f, 1.0f, h->f, w->f};
        if (!nb_set_operand(I, nb, 1, 0) || !nb_const_operand(I, nb, 2, IR_DTYPE_F32, 1, &n, scales, "_scales"))
            return false;
    } else if (upsample && I->opset < 9) {
        const Onnx__AttributeProto *a = nb_attr(nb, "scales", true);
        if (!a || attr_type(a) != AT(FLOATS)) {
            node_error(I, &nb->ref, IR_ESYNTAX, "Upsample needs a 'scales' attribute (floats)");
            return false;
        }
        int64_t n = (int64_t)a->n_floats;
        if (!nb_set_operand(I, nb, 1, 0) ||
            !nb_const_operand(I, nb, 2, IR_DTYPE_F32, 1, &n, a->floats, "_scales"))
            return false;
    } else {
        IrValueId scales = nb->n_ops > 1 ? nb->ops[1] : 0;
        if (!nb_set_operand(I, nb, 1, 0) || !nb_set_operand(I, nb, 2, scales)) return false;
    }
    const Onnx__AttributeProto *m = nb_attr(nb, "mode", true);
    char mode[32] = "nearest";
    if (m && m->has_s && m->s.len < sizeof mode) {
        memcpy(mode, m->s.data, m->s.len);
        mode[m->s.len] = 0;
    }
    if (strcmp(mode, "bilinear") == 0 || strcmp(mode, "trilinear") == 0) strcpy(mode, "linear");
    if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0) {
        node_error(I, &nb->ref, IR_EUNSUPPORTED, "mode '%s' is not supported", mode);
        return false;
    }
    nb_extra_str(I, nb, "mode", strcmp(mode, "nearest") == 0 ? "nearest" : "linear");
    nb_extra_str(I, nb, "coordinate_transformation_mode", "asymmetric");
    if (strcmp(mode, "nearest") == 0) nb_extra_str(I, nb, "nearest_mode", "floor");
    return true;
}

/* Binary ops before opset 7 broadcast only with broadcast=1, and then B's dims are a contiguous
 * run of A's starting at `axis` (by default the trailing ones, as numpy aligns them). B gets
 * trailing 1s so that numpy broadcasting aligns it at `axis` too. Without broadcast=1 the
 * shapes had to be equal, which numpy broadcasting accepts as well. */
static bool upgrade_old_broadcast(Imp *I, NodeBuild *nb) {
    const Onnx__AttributeProto *b = nb_attr(nb, "broadcast", true), *ax = nb_attr(nb, "axis", true);
    if (!b || attr_type(b) != AT(INT) || b->i == 0 || !ax || nb->n_ops != 2) return true;
    if (attr_type(ax) != AT(INT)) {
        node_error(I, &nb->ref, IR_ESYNTAX, "attribute 'axis' must be int, got %s", attr_type_name(attr_type(ax)));
        return false;
    }
    uint32_t ra = value_rank(I, nb->ops[0]), rb = value_rank(I, nb->ops[1]);
    if (ra == IR_RANK_UNKNOWN || rb == IR_RANK_UNKNOWN) {
        node_error(I, &nb->ref, IR_EUNSUPPORTED,
                   "broadcast at axis %lld needs the ranks of both operands, and they are unknown", (long long)ax->i);
        return false;
    }
    int64_t axis = ax->i < 0 ? ax->i + (int64_t)ra : ax->i;
    if (axis < 0 || rb > ra || axis > (int64_t)(ra - rb)) {
        node_error(I, &nb->ref, IR_ESYNTAX, "broadcast axis %lld does not fit operands of rank %u and %u",
                   (long long)ax->i, ra, rb);
        return false;
    }
    IrValueId v = nb_unsqueeze(I, nb, nb->ops[1], rb, (int64_t)ra - axis - (int64_t)rb);
    return v && nb_set_operand(I, nb, 1, v);
}

/* Cast's `to` before opset 6: a TensorProto.DataType name ("FLOAT", "INT64"). */
static bool upgrade_old_cast(Imp *I, NodeBuild *nb) {
    const Onnx__AttributeProto *a = nb_attr(nb, "to", false);
    if (!a || attr_type(a) != AT(STRING)) return true; /* an int `to` goes through the schema */
    nb_attr(nb, "to", true);
    char name[32] = "";
    if (a->s.len < sizeof name) {
        memcpy(name, a->s.data, a->s.len);
        name[a->s.len] = 0;
    }
    for (int code = 1; strcmp(onnx_dtype_name(code), "unknown") != 0; code++)
        if (strcasecmp(name, onnx_dtype_name(code)) == 0) {
            IrDType dt = ir_dtype_from_onnx(code);
            if (!dt) break;
            nb_extra(nb, "to", (IrAttrValue){.kind = IR_ATTR_DTYPE, .i = dt});
            return true;
        }
    node_error(I, &nb->ref, IR_EUNSUPPORTED, "attribute 'to': dtype '%s' is not supported", name);
    return false;
}

/* Forms of opsets 1 to 6 that later opsets changed (consumed_inputs is dropped for every op). */
static bool upgrade_before_7(Imp *I, NodeBuild *nb) {
    int64_t v = I->opset;
    const Onnx__NodeProto *np = nb->ref.np;
    switch (nb->op) {
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
    case IR_OP_POW:
    case IR_OP_AND:
    case IR_OP_OR:
    case IR_OP_XOR:
    case IR_OP_EQUAL:
    case IR_OP_GREATER:
    case IR_OP_LESS: return upgrade_old_broadcast(I, nb);
    case IR_OP_PRELU: {
        /* a 1-D slope of C values was per channel (dim 1), not numpy-aligned with the last dim */
        uint32_t rx = nb->n_ops == 2 ? value_rank(I, nb->ops[0]) : 0, rs = nb->n_ops == 2 ? value_rank(I, nb->ops[1]) : 0;
        if (rs != 1 || rx == IR_RANK_UNKNOWN || rx < 3) return true;
        IrValueId s = nb_unsqueeze(I, nb, nb->ops[1], 1, (int64_t)rx - 2);
        return s && nb_set_operand(I, nb, 1, s);
    }
    case IR_OP_CONCAT:
        if (v < 4 && !nb_attr(nb, "axis", false)) nb_extra(nb, "axis", (IrAttrValue){.kind = IR_ATTR_INT, .i = 1});
        return true;
    case IR_OP_RESHAPE:
        if (v >= 5) return true;
        if (!nb_attr(nb, "shape", false)) {
            node_error(I, &nb->ref, IR_ESYNTAX, "Reshape before opset 5 needs a 'shape' attribute");
            return false;
        }
        return attr_to_ints_input(I, nb, "shape", 1);
    case IR_OP_CAST: return v >= 6 || upgrade_old_cast(I, nb);
    case IR_OP_TILE:
        if (v < 6 && np->n_input != 2) {
            node_error(I, &nb->ref, IR_EUNSUPPORTED, "Tile before opset 6 (tiles and axis inputs) is not supported");
            return false;
        }
        return true;
    case IR_OP_LP_POOL:
    case IR_OP_GLOBAL_LP_POOL: {
        /* p was a float before opset 2 */
        const Onnx__AttributeProto *p = nb_attr(nb, "p", false);
        if (!p || attr_type(p) != AT(FLOAT)) return true;
        nb_attr(nb, "p", true);
        if (!(p->f >= 1.0f && p->f <= 1e6f) || p->f != (float)(int64_t)p->f) {
            node_error(I, &nb->ref, IR_EUNSUPPORTED, "p = %g is not an integer", (double)p->f);
            return false;
        }
        nb_extra(nb, "p", (IrAttrValue){.kind = IR_ATTR_INT, .i = (int64_t)p->f});
        return true;
    }
    case IR_OP_RNN:
    case IR_OP_GRU:
    case IR_OP_LSTM:
        /* output_sequence only said whether Y is computed; an unused Y is simply not read */
        nb_attr(nb, "output_sequence", true);
        return true;
    default: return true;
    }
}

/* Rewrites older operator forms into their opset-17 forms. */
static bool upgrade_node(Imp *I, NodeBuild *nb, bool upsample) {
    int64_t v = I->opset;
    /* legacy attributes with no meaning for inference, dropped on every op */
    nb_attr(nb, "consumed_inputs", true);
    if (v < 7 && !upgrade_before_7(I, nb)) return false;
    switch (nb->op) {
    case IR_OP_SPLIT: return v >= 13 || attr_to_ints_input(I, nb, "split", 1);
    case IR_OP_SQUEEZE:
    case IR_OP_UNSQUEEZE:
    case IR_OP_REDUCE_SUM: return v >= 13 || attr_to_ints_input(I, nb, "axes", 1);
    case IR_OP_CLIP:
        return v >= 11 || (attr_to_scalar_input(I, nb, "min", 1) && attr_to_scalar_input(I, nb, "max", 2));
    case IR_OP_PAD:
        if (v >= 11) return true;
        if (!nb_attr(nb, "pads", false) && nb_attr(nb, "paddings", false))
            return attr_to_ints_input(I, nb, "paddings", 1) && attr_to_scalar_input(I, nb, "value", 2);
        return attr_to_ints_input(I, nb, "pads", 1) && attr_to_scalar_input(I, nb, "value", 2);
    case IR_OP_SLICE:
        return v >= 10 || (attr_to_ints_input(I, nb, "starts", 1) && attr_to_ints_input(I, nb, "ends", 2) &&
                           attr_to_ints_input(I, nb, "axes", 3));
    case IR_OP_TOP_K: return v >= 10 || attr_to_ints_input(I, nb, "k", 1);
    case IR_OP_RESIZE: return (upsample || v == 10) ? upgrade_resize(I, nb, upsample) : true;
    case IR_OP_DROPOUT:
        nb_attr(nb, "is_test", true);
        return v >= 12 || attr_to_scalar_input(I, nb, "ratio", 1);
    case IR_OP_BATCH_NORMALIZATION: {
        nb_attr(nb, "is_test", true);
        const Onnx__AttributeProto *sp = nb_attr(nb, "spatial", true);
        if (sp && sp->i != 1) {
            node_error(I, &nb->ref, IR_EUNSUPPORTED, "spatial=%lld (per-activation statistics) is not supported",
                       (long long)sp->i);
            return false;
        }
        /* before opset 14 the extra outputs were training statistics; inference has only Y */
        if (v < 14) nb->n_out = nb->n_out ? 1 : 0;
        return true;
    }
    default: return true;
    }
}

/* Converts one ONNX attribute through the op table's schema. Arrays the value points at are
 * allocated into *tmp (freed by the caller after the attribute is set). */
static bool convert_attr(Imp *I, NodeBuild *nb, const Onnx__AttributeProto *a, const IrAttrSpec *spec,
                         IrAttrValue *out, void **tmp) {
    int at = attr_type(a);
    const char *name = S(a->name);
    memset(out, 0, sizeof *out);
    out->kind = spec->kind;
    switch (spec->kind) {
    case IR_ATTR_INT:
        if (at != AT(INT)) break;
        out->i = a->i;
        return true;
    case IR_ATTR_FLOAT:
        if (at == AT(FLOAT)) out->f = a->f;
        else if (at == AT(INT)) out->f = (double)a->i;
        else break;
        return true;
    case IR_ATTR_STRING:
        if (at != AT(STRING)) break;
        out->s = ir_str_intern(I->g, (const char *)a->s.data, a->s.len);
        return true;
    case IR_ATTR_INTS:
        if (at != AT(INTS)) break;
        out->count = (uint32_t)a->n_ints;
        out->ints = a->ints;
        return true;
    case IR_ATTR_FLOATS: {
        if (at != AT(FLOATS) && at != AT(INTS)) break;
        size_t n = at == AT(FLOATS) ? a->n_floats : a->n_ints;
        double *d = malloc((n ? n : 1) * sizeof *d);
        if (!d) {
            imp_oom(I);
            return false;
        }
        for (size_t i = 0; i < n; i++) d[i] = at == AT(FLOATS) ? a->floats[i] : (double)a->ints[i];
        *tmp = d;
        out->count = (uint32_t)n;
        out->floats = d;
        return true;
    }
    case IR_ATTR_STRINGS: {
        if (at != AT(STRINGS)) break;
        IrStrId *s = malloc((a->n_strings ? a->n_strings : 1) * sizeof *s);
        if (!s) {
            imp_oom(I);
            return false;
        }
        for (size_t i = 0; i < a->n_strings; i++)
            s[i] = ir_str_intern(I->g, (const char *)a->strings[i].data, a->strings[i].len);
        *tmp = s;
        out->count = (uint32_t)a->n_strings;
        out->strs = s;
        return true;
    }
    case IR_ATTR_TENSOR: {
        if (at != AT(TENSOR) || !a->t) break;
        char what[512], who[320];
        node_who(&nb->ref, who, sizeof who);
        snprintf(what, sizeof what, "%s: attribute '%.80s'", who, name);
        out->tensor = tensor_to_const(I, a->t, what);
        return out->tensor != 0;
    }
    case IR_ATTR_DTYPE: {
        if (at != AT(INT)) break;
        IrDType dt = a->i >= 0 && a->i <= INT_MAX ? ir_dtype_from_onnx((int)a->i) : IR_DTYPE_NONE;
        if (!dt) {
            node_error(I, &nb->ref, IR_EUNSUPPORTED, "attribute '%s': dtype %s is not supported", name,
                       onnx_dtype_name(a->i >= 0 && a->i <= INT_MAX ? (int)a->i : -1));
            return false;
        }
        out->i = dt;
        return true;
    }
    default: break;
    }
    node_error(I, &nb->ref, IR_ESYNTAX, "attribute '%s' must be %s, got %s", name, ir_attr_kind_name(spec->kind),
               attr_type_name(at));
    return false;
}

static void apply_doc(Imp *I, IrNodeId n, const char *doc) {
    if (!doc || !strstr(doc, "irtool.")) return;
    char buf[1024];
    if (doc_value(doc, IR_ONNX_DOC_LOC, NULL, buf, sizeof buf)) {
        char *end;
        unsigned long line = strtoul(buf, &end, 10), col = 0;
        if (*end == ':') col = strtoul(end + 1, &end, 10);
        if (*end == ':' && line <= UINT32_MAX && col <= UINT32_MAX) {
            IrLoc loc = {ir_str_intern_cstr(I->g, end + 1), (uint32_t)line, (uint32_t)col};
            ir_node_set_loc(I->g, n, loc);
        }
    }
    IrStrId prov[256];
    uint32_t np = 0;
    const char *cur = NULL;
    while (np < 256 && doc_value(doc, IR_ONNX_DOC_FROM, &cur, buf, sizeof buf)) prov[np++] = ir_str_intern_cstr(I->g, buf);
    if (np) ir_node_set_provenance(I->g, n, np, prov);
}

static bool import_graph(Imp *I, const Onnx__GraphProto *gp, IrRegionId r, Scope *up, bool root);

/* Old models (opset < 13) rarely declare intermediate types, yet some upgrades depend on them
 * (the rank at old Softmax, the dtype of Clip's bounds). So results without a declared type get
 * their inferred type while the import runs; the types are cleared again at the end, so the
 * graph keeps exactly what the file declared. */
static void guess_types(Imp *I, IrNodeId n) {
    uint32_t nr = ir_node_num_results(I->g, n);
    bool missing = false;
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId v = ir_node_result(I->g, n, i);
        missing |= v && !ir_value_type(I->g, v);
    }
    if (!missing || nr > 64) return;
    IrTypeId inferred[64];
    IrDiag quiet;
    ir_diag_init(&quiet, NULL, NULL);
    if (ir_node_infer_types(I->g, n, &quiet, inferred) != IR_OK) return;
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId v = ir_node_result(I->g, n, i);
        if (!v || ir_value_type(I->g, v) || !inferred[i]) continue;
        if (I->n_guessed == I->cap_guessed) {
            uint32_t nc = I->cap_guessed ? I->cap_guessed * 2 : 256;
            IrValueId *p = realloc(I->guessed, nc * sizeof *p);
            if (!p) return;
            I->guessed = p;
            I->cap_guessed = nc;
        }
        I->guessed[I->n_guessed++] = v;
        ir_value_set_type(I->g, v, inferred[i]);
    }
}

/* Finds the ONNX-declared type of a value defined in the current graph (value_info/outputs). */
static bool declared_type(Imp *I, NodeBuild *nb, const char *name, IrTypeId *t) {
    uint32_t k;
    *t = 0;
    if (!nm_get(nb->types, name, &k)) return true;
    char what[320];
    snprintf(what, sizeof what, "value '%.300s'", name);
    return type_from_proto(I, nb->infos[k]->type, nb->infos[k]->doc_string, what, t);
}

/* Creates one node: results named and typed, then scope entries for them. result_names may
 * hold IR_ABSENT_NAME. */
static IrNodeId make_node(Imp *I, NodeBuild *nb, IrOp op, uint32_t n_ops, const IrValueId *ops,
                          uint32_t n_res, const char *const *onnx_names) {
    IrStrId small[8], *names = n_res <= 8 ? small : malloc(n_res * sizeof *names);
    IrTypeId tsmall[8], *types = n_res <= 8 ? tsmall : malloc(n_res * sizeof *types);
    IrNodeId n = 0;
    if (!names || !types) {
        imp_oom(I);
        goto out;
    }
    for (uint32_t i = 0; i < n_res; i++) {
        const char *on = onnx_names[i];
        types[i] = 0;
        if (!on || !*on) {
            names[i] = IR_ABSENT_NAME;
            continue;
        }
        uint32_t prev;
        if (nm_get(&nb->scope->vals, on, &prev)) {
            node_error(I, &nb->ref, IR_ESYNTAX, "value '%s' is defined more than once", on);
            goto out;
        }
        for (uint32_t k = 0; k < i; k++)
            if (onnx_names[k] && strcmp(onnx_names[k], on) == 0) {
                node_error(I, &nb->ref, IR_ESYNTAX, "value '%s' is defined more than once", on);
                goto out;
            }
        names[i] = value_name(I, on);
        if (!names[i] || !declared_type(I, nb, on, &types[i])) goto out;
    }
    if (I->status) goto out;
    n = ir__node_create(I->g, nb->region, 0, op, n_ops, ops, n_res, names, types);
    if (!n) {
        imp_oom(I);
        goto out;
    }
    for (uint32_t i = 0; i < n_res; i++)
        if (names[i] != IR_ABSENT_NAME && !nm_put(&nb->scope->vals, onnx_names[i], ir_node_result(I->g, n, i))) {
            imp_oom(I);
            n = 0;
            goto out;
        }
out:
    if (names != small) free(names);
    if (types != tsmall) free(types);
    return n;
}

/* Softmax, LogSoftmax and Hardmax before opset 13 work on the input flattened to 2-D at `axis`.
 * That equals the opset-13 op at `axis` when every later dim is 1 (the last axis, typically);
 * otherwise the flattening is spelled out: Shape, Flatten, the op over the last axis, Reshape
 * back. */
static IrNodeId import_old_softmax(Imp *I, NodeBuild *nb) {
    const Onnx__AttributeProto *a = nb_attr(nb, "axis", true);
    int64_t axis = a ? a->i : 1;
    IrValueId x = nb->n_ops ? nb->ops[0] : 0;
    uint32_t rank = x ? ir_type_rank(I->g, ir_value_type(I->g, x)) : IR_RANK_UNKNOWN;
    const Onnx__NodeProto *np = nb->ref.np;
    const char *out = np->n_output ? np->output[0] : NULL;
    /* the same op when every dim after `axis` is 1 (the last axis included) */
    bool same = false;
    if (rank != IR_RANK_UNKNOWN && rank > 0) {
        int64_t a = axis < 0 ? axis + (int64_t)rank : axis;
        same = a >= 0 && a < (int64_t)rank;
        const IrExprId *dims = ir_type_dims(I->g, ir_value_type(I->g, x));
        for (int64_t k = a + 1; same && k < (int64_t)rank; k++) {
            int64_t d;
            same = ir_expr_is_const(I->g, dims[k], &d) && d == 1;
        }
    }
    if (!x || !out || !*out || np->n_output != 1 || same) {
        IrAttrValue v = {.kind = IR_ATTR_INT, .i = axis};
        nb_extra(nb, "axis", v);
        return make_node(I, nb, nb->op, nb->n_ops, nb->ops, nb->n_out, (const char *const *)np->output);
    }
    const char *base = nb_base(nb);
    IrStrId n_shape = gen_name(I, base, "_shape"), n_flat = gen_name(I, base, "_2d"), n_y = gen_name(I, base, "_flat");
    if (!n_shape || !n_flat || !n_y) return 0;
    IrNodeId s = ir__node_create(I->g, nb->region, 0, IR_OP_SHAPE, 1, &x, 1, &n_shape, NULL);
    IrNodeId f = s ? ir__node_create(I->g, nb->region, 0, IR_OP_FLATTEN, 1, &x, 1, &n_flat, NULL) : 0;
    IrValueId fv = f ? ir_node_result(I->g, f, 0) : 0;
    IrNodeId m = f ? ir__node_create(I->g, nb->region, 0, nb->op, 1, &fv, 1, &n_y, NULL) : 0;
    if (!m) {
        imp_oom(I);
        return 0;
    }
    IrAttrValue av = {.kind = IR_ATTR_INT, .i = axis};
    ir_node_set_attr(I->g, f, "axis", &av);
    av.i = -1;
    ir_node_set_attr(I->g, m, "axis", &av);
    IrValueId rops[2] = {ir_node_result(I->g, m, 0), ir_node_result(I->g, s, 0)};
    IrNodeId r = make_node(I, nb, IR_OP_RESHAPE, 2, rops, 1, (const char *const *)np->output);
    if (r && np->name && *np->name) {
        char buf[512];
        snprintf(buf, sizeof buf, "%.400s/shape", np->name);
        ir_node_set_name(I->g, s, buf);
        snprintf(buf, sizeof buf, "%.400s/flatten", np->name);
        ir_node_set_name(I->g, f, buf);
        ir_node_set_name(I->g, m, np->name);
        snprintf(buf, sizeof buf, "%.400s/reshape", np->name);
        ir_node_set_name(I->g, r, buf);
    }
    return r ? m : 0; /* attributes and the name go on the op itself */
}

/* Scan-8 has a batch axis 0 before the sequence axis on every state and scan input and output,
 * and an optional sequence_lens. Without sequence_lens it is a Loop over the batch whose body
 * takes batch element i of every input (Gather at axis 0) and runs the Scan-9 op on them; the
 * Loop stacks each result along a new axis 0, which is the batch axis again:
 *   %B = Squeeze(Shape(first input, end = 1), [0])
 *   %y... = Loop(%B, true) { (%i, %cond): %x_k_i = Gather(%x_k, %i) ...; Scan(%x_k_i ...) {...} }
 * Returns the Scan node (which gets the attributes, the body and the name). */
static IrNodeId import_scan8(Imp *I, NodeBuild *nb) {
    const Onnx__NodeProto *np = nb->ref.np;
    IrGraph *g = I->g;
    if (nb->n_ops > 0 && nb->ops[0]) {
        node_error(I, &nb->ref, IR_EUNSUPPORTED, "Scan-8 with sequence_lens is not supported");
        return 0;
    }
    if (nb->n_ops < 2 || nb->n_out == 0) {
        node_error(I, &nb->ref, IR_ESYNTAX, "Scan has no inputs or no outputs");
        return 0;
    }
    const Onnx__AttributeProto *dirs = nb_attr(nb, "directions", true);
    if (dirs) {
        IrAttrValue dv = {.kind = IR_ATTR_INTS, .count = (uint32_t)dirs->n_ints, .ints = dirs->ints};
        nb_extra(nb, "scan_input_directions", dv);
    }
    /* the batch size, a scalar */
    int64_t one = 1, zero = 0;
    IrNodeId sh = nb_aux_node(I, nb, IR_OP_SHAPE, 1, &nb->ops[1], "_shape", "batch_shape");
    if (!sh) return 0;
    IrAttrValue endv = {.kind = IR_ATTR_INT, .i = 1};
    ir_node_set_attr(g, sh, "end", &endv);
    IrValueId sq_ops[2] = {ir_node_result(g, sh, 0), nb_const_value(I, nb, IR_DTYPE_I64, 1, &one, &zero, "_axes")};
    IrNodeId bsz = sq_ops[1] ? nb_aux_node(I, nb, IR_OP_SQUEEZE, 2, sq_ops, "_batch", "batch") : 0;
    if (!bsz) return 0;
    uint8_t yes = 1; /* the op table wants a condition operand; the body passes it through */
    IrValueId loop_ops[2] = {ir_node_result(g, bsz, 0), nb_const_value(I, nb, IR_DTYPE_BOOL, 0, NULL, &yes, "_true")};
    if (!loop_ops[1]) return 0;
    IrNodeId loop = make_node(I, nb, IR_OP_LOOP, 2, loop_ops, nb->n_out, (const char *const *)np->output);
    if (!loop) return 0;
    if (np->name && *np->name) {
        char buf[512];
        snprintf(buf, sizeof buf, "%.400s/batch_loop", np->name);
        ir_node_set_name(g, loop, buf);
    }
    IrRegionId body = ir_node_region_at(g, loop, 0);
    const char *base = nb_base(nb);
    IrStrId n_it = gen_name(I, base, "_batch_index"), n_cond = gen_name(I, base, "_cond");
    if (!n_it || !n_cond) return 0;
    IrValueId it = ir_region_add_arg(g, body, ir_str(g, n_it), ir_type_tensor(g, IR_DTYPE_I64, 0, NULL));
    IrValueId cond = ir_region_add_arg(g, body, ir_str(g, n_cond), ir_type_tensor(g, IR_DTYPE_BOOL, 0, NULL));
    uint32_t n_in = nb->n_ops - 1;
    IrValueId *ops = calloc(n_in, sizeof *ops), *outs = calloc(nb->n_out + 1, sizeof *outs);
    IrStrId *names = calloc(nb->n_out, sizeof *names);
    IrNodeId scan = 0;
    if (!it || !cond || !ops || !outs || !names) goto oom;
    for (uint32_t k = 0; k < n_in; k++) {
        IrValueId gops[2] = {nb->ops[1 + k], it};
        IrStrId gn = gen_name(I, base, "_batch_item");
        IrNodeId gather = gn ? ir__node_create(g, body, 0, IR_OP_GATHER, 2, gops, 1, &gn, NULL) : 0;
        if (!gather) goto oom;
        ops[k] = ir_node_result(g, gather, 0);
    }
    for (uint32_t k = 0; k < nb->n_out; k++)
        if (!(names[k] = gen_name(I, base, "_batch_result"))) goto oom;
    scan = ir__node_create(g, body, 0, IR_OP_SCAN, n_in, ops, nb->n_out, names, NULL);
    if (!scan) goto oom;
    outs[0] = cond;
    for (uint32_t k = 0; k < nb->n_out; k++) outs[1 + k] = ir_node_result(g, scan, k);
    ir_region_set_outputs(g, body, nb->n_out + 1, outs);
    goto done;
oom:
    imp_oom(I);
    scan = 0;
done:
    free(ops);
    free(outs);
    free(names);
    return scan;
}

/* Dropout's mask had the data's dtype before opset 10 (bool since): a Cast restores it, and the
 * ONNX name of the mask now means the Cast's result. */
static bool old_dropout_mask(Imp *I, NodeBuild *nb, IrNodeId n) {
    const Onnx__NodeProto *np = nb->ref.np;
    if (nb->n_out < 2 || !np->output[1] || !*np->output[1]) return true;
    IrValueId mask = ir_node_result(I->g, n, 1);
    IrTypeId declared = ir_value_type(I->g, mask);
    IrDType dt = nb->n_ops && nb->ops[0] ? ir_type_dtype(I->g, ir_value_type(I->g, nb->ops[0])) : IR_DTYPE_NONE;
    if (!dt) dt = ir_type_dtype(I->g, declared);
    if (dt == IR_DTYPE_BOOL) return true;
    if (!dt) {
        node_error(I, &nb->ref, IR_EUNSUPPORTED, "the mask output needs the dtype of the data, which is unknown");
        return false;
    }
    ir_value_set_type(I->g, mask, 0);
    IrNodeId c = nb_aux_node(I, nb, IR_OP_CAST, 1, &mask, "_cast", "mask_cast");
    if (!c) return false;
    IrAttrValue to = {.kind = IR_ATTR_DTYPE, .i = dt};
    ir_node_set_attr(I->g, c, "to", &to);
    IrValueId cv = ir_node_result(I->g, c, 0);
    if (declared) ir_value_set_type(I->g, cv, declared);
    if (!nm_put(&nb->scope->vals, np->output[1], cv)) {
        imp_oom(I);
        return false;
    }
    return true;
}

static IrOp map_op(Imp *I, const NodeRef *ref, bool *upsample) {
    const Onnx__NodeProto *np = ref->np;
    const char *dom = S(np->domain), *t = S(np->op_type);
    *upsample = false;
    char buf[160];
    if (strcmp(dom, IR_ONNX_IRTOOL_DOMAIN) == 0) {
        snprintf(buf, sizeof buf, "irtool.%.140s", t);
        IrOp op = ir_op_from_name(buf, strlen(buf));
        if (op == IR_OP_NONE) node_error(I, ref, IR_EUNSUPPORTED, "op '%s' is not supported", buf);
        return op;
    }
    if (*dom && strcmp(dom, "ai.onnx") != 0) {
        /* ops of other domains are named "<domain>.<op>" in the op table */
        if (strchr(t, '.') == NULL && snprintf(buf, sizeof buf, "%s.%s", dom, t) < (int)sizeof buf) {
            IrOp op = ir_op_from_name(buf, strlen(buf));
            if (op != IR_OP_NONE) return op;
        }
        node_error(I, ref, IR_EUNSUPPORTED, "op '%s' of domain '%s' is not supported", t, dom);
        return IR_OP_NONE;
    }
    if (strncmp(t, "irtool.", 7) == 0) t = ""; /* irtool ops live in their own domain only */
    if (I->opset == 0) {
        node_error(I, ref, IR_ESYNTAX, "the model has no opset_import for the default domain");
        return IR_OP_NONE;
    }
    if (strcmp(t, "Upsample") == 0 && I->opset < 10) {
        *upsample = true;
        return IR_OP_RESIZE;
    }
    if (strcmp(t, "Scatter") == 0 && I->opset < 11) return IR_OP_SCATTER_ELEMENTS;
    IrOp op = *t ? ir_op_from_name(t, strlen(t)) : IR_OP_NONE;
    if (op != IR_OP_NONE) return op;
    node_error(I, ref, IR_EUNSUPPORTED, "op '%s' is not supported", S(np->op_type));
    return op;
}

static bool import_node(Imp *I, const Onnx__NodeProto *np, uint32_t index, IrRegionId r, Scope *scope,
                        const NameMap *types, Onnx__ValueInfoProto *const *infos) {
    NodeBuild nb = {.ref = {np, index}, .scope = scope, .region = r, .types = types, .infos = infos};
    bool upsample, ok = false;
    nb.op = map_op(I, &nb.ref, &upsample);
    if (nb.op == IR_OP_NONE) return false;
    nb.n_out = (uint32_t)np->n_output;
    nb.consumed = calloc(np->n_attribute + 1, sizeof *nb.consumed);
    if (!nb.consumed) {
        imp_oom(I);
        return false;
    }
    if (np->n_input > 0xFFFF || np->n_output > 0xFFFF) {
        node_error(I, &nb.ref, IR_EUNSUPPORTED, "too many inputs or outputs");
        goto out;
    }
    /* operands */
    for (size_t i = 0; i < np->n_input; i++) {
        const char *in = S(np->input[i]);
        IrValueId v = 0;
        if (*in) {
            uint32_t found = 0;
            bool have = false;
            for (Scope *s = scope; s && !have; s = s->up) have = nm_get(&s->vals, in, &found);
            if (!have) {
                node_error(I, &nb.ref, IR_ESYNTAX, "input '%s' is not defined (nodes must be in topological order)", in);
                goto out;
            }
            if (found == DROPPED_VALUE) {
                node_error(I, &nb.ref, IR_EUNSUPPORTED,
                           "input '%s' is a training-only output that opset 17 no longer has", in);
                goto out;
            }
            v = found;
        }
        if (!nb_set_operand(I, &nb, (uint32_t)i, v)) goto out;
    }
    if (!upgrade_node(I, &nb, upsample)) goto out;
    for (uint32_t i = nb.n_out; i < np->n_output; i++)
        if (np->output[i] && *np->output[i] && !nm_put(&scope->vals, np->output[i], DROPPED_VALUE)) {
            imp_oom(I);
            goto out;
        }
    IrNodeId n;
    bool old_softmax = I->opset < 13 && (nb.op == IR_OP_SOFTMAX || nb.op == IR_OP_LOG_SOFTMAX || nb.op == IR_OP_HARDMAX);
    if (old_softmax)
        n = import_old_softmax(I, &nb);
    else if (nb.op == IR_OP_SCAN && I->opset < 9)
        n = import_scan8(I, &nb);
    else
        n = make_node(I, &nb, nb.op, nb.n_ops, nb.ops, nb.n_out, (const char *const *)np->output);
    if (!n) goto out;
    if (nb.op == IR_OP_DROPOUT && I->opset < 10 && !old_dropout_mask(I, &nb, n)) goto out;
    /* attributes: upgrades' own, then the rest through the schema */
    for (uint32_t i = 0; i < nb.n_extra; i++) ir_node_set_attr(I->g, n, nb.extra[i].name, &nb.extra[i].v);
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        const char *an = S(a->name);
        int at = attr_type(a);
        if (nb.consumed[i]) continue;
        if (a->ref_attr_name && *a->ref_attr_name) {
            node_error(I, &nb.ref, IR_EUNSUPPORTED, "attribute '%s' refers to a function attribute", an);
            goto out;
        }
        if (at == AT(GRAPH) || at == AT(GRAPHS)) {
            uint32_t k = 0;
            char rn[64];
            while (ir_op_region_name(nb.op, k, rn, sizeof rn) && strcmp(rn, an) != 0) k++;
            if (k >= ir_op_num_regions(nb.op) || at == AT(GRAPHS) || !a->g) {
                node_error(I, &nb.ref, IR_EUNSUPPORTED, "graph attribute '%s' is not supported by %s", an,
                           ir_op_name(nb.op));
                goto out;
            }
            continue; /* regions are imported below, after every attribute is known good */
        }
        if (nb.op == IR_OP_OPTIONAL && at == AT(TYPE_PROTO) && strcmp(an, "type") == 0) {
            /* Optional's `type`: the content type, which our IR keeps as the result's type */
            IrTypeId et, rt;
            if (!type_from_proto(I, a->tp, NULL, "Optional's type attribute", &et)) goto out;
            if (ir_type_kind(I->g, et) == IR_TYPE_OPT) {
                node_error(I, &nb.ref, IR_EUNSUPPORTED, "an optional of an optional is not supported");
                goto out;
            }
            IrValueId res = ir_node_num_results(I->g, n) ? ir_node_result(I->g, n, 0) : 0;
            if (res && !ir_value_type(I->g, res) && et && (rt = ir_type_opt(I->g, et))) ir_value_set_type(I->g, res, rt);
            continue;
        }
        IrAttrSpec spec;
        if (!ir_op_attr_spec(nb.op, an, strlen(an), &spec)) {
            if (strcmp(an, "broadcast") == 0) continue; /* legacy (opset < 7), broadcasting is implicit */
            node_error(I, &nb.ref, IR_EUNSUPPORTED, "attribute '%s' is not supported by %s", an, ir_op_name(nb.op));
            goto out;
        }
        IrAttrValue v;
        void *t = NULL;
        bool converted = convert_attr(I, &nb, a, &spec, &v, &t);
        if (converted) ir_node_set_attr(I->g, n, an, &v); /* copies arrays into the graph */
        free(t);
        if (!converted) goto out;
    }
    /* regions, in the op's order */
    for (uint32_t k = 0; k < ir_op_num_regions(nb.op); k++) {
        char rn[64];
        ir_op_region_name(nb.op, k, rn, sizeof rn);
        const Onnx__AttributeProto *a = nb_attr(&nb, rn, false);
        if (!a || !a->g) {
            node_error(I, &nb.ref, IR_ESYNTAX, "subgraph '%s' is missing", rn);
            goto out;
        }
        if (I->subgraph_depth >= MAX_SUBGRAPH_DEPTH) {
            node_error(I, &nb.ref, IR_EUNSUPPORTED, "subgraph '%s' is nested more than %d deep (the importer's limit)", rn,
                       MAX_SUBGRAPH_DEPTH);
            goto out;
        }
        I->subgraph_depth++;
        bool sub_ok = import_graph(I, a->g, ir_node_region_at(I->g, n, k), scope, false);
        I->subgraph_depth--;
        if (!sub_ok) goto out;
    }
    if (np->name && *np->name) ir_node_set_name(I->g, n, np->name);
    apply_doc(I, n, np->doc_string);
    if (I->opset < 13) guess_types(I, n);
    ok = I->status == IR_OK;
out:
    free(nb.ops);
    free(nb.consumed);
    return ok;
}

/* ---- graphs -------------------------------------------------------------------------------- */

static bool import_graph(Imp *I, const Onnx__GraphProto *gp, IrRegionId r, Scope *up, bool root) {
    Scope scope = {up, {0}};
    NameMap types = {0}, inits = {0};
    bool ok = false;
    IrValueId *outs = NULL;
    Onnx__ValueInfoProto **infos = NULL;
    /* declared types of this graph's values: value_info, then outputs (which win) */
    for (size_t i = 0; i < gp->n_value_info; i++)
        if (gp->value_info[i]->name && !nm_put(&types, gp->value_info[i]->name, (uint32_t)i)) goto oom;
    infos = malloc((gp->n_value_info + gp->n_output + 1) * sizeof *infos);
    if (!infos) goto oom;
    for (size_t i = 0; i < gp->n_value_info; i++) infos[i] = gp->value_info[i];
    for (size_t i = 0; i < gp->n_output; i++) {
        infos[gp->n_value_info + i] = gp->output[i];
        if (gp->output[i]->name && !nm_put(&types, gp->output[i]->name, (uint32_t)(gp->n_value_info + i))) goto oom;
    }
    if (gp->n_sparse_initializer) {
        imp_error(I, IR_EUNSUPPORTED, "sparse initializers are not supported");
        goto out;
    }
    /* initializers become graph constants (every subgraph's too: the root scope sees them all) */
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        const char *nm = S(t->name);
        char what[320];
        snprintf(what, sizeof what, "initializer '%.300s'", nm);
        if (!*nm) {
            imp_error(I, IR_ESYNTAX, "initializer #%zu has no name", i + 1);
            goto out;
        }
        if (nm_get(&scope.vals, nm, NULL)) {
            imp_error(I, IR_ESYNTAX, "%s is defined more than once", what);
            goto out;
        }
        IrConstId c = tensor_to_const(I, t, what);
        if (!c) goto out;
        IrStrId irn = value_name(I, nm);
        IrValueId v = irn ? ir_graph_add_const_value(I->g, ir_str(I->g, irn), c) : 0;
        if (!v || !nm_put(&scope.vals, nm, v) || !nm_put(&inits, nm, 1)) goto oom;
    }
    /* inputs; an initializer listed as a graph input (old exporters) stays a constant */
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        const char *nm = S(vi->name);
        if (root && nm_get(&inits, nm, NULL)) continue;
        char what[320];
        snprintf(what, sizeof what, "input '%.300s'", nm);
        if (!*nm || nm_get(&scope.vals, nm, NULL)) {
            imp_error(I, IR_ESYNTAX, "%s is %s", what, *nm ? "defined more than once" : "unnamed");
            goto out;
        }
        IrTypeId t;
        if (!type_from_proto(I, vi->type, vi->doc_string, what, &t)) goto out;
        IrStrId irn = value_name(I, nm);
        IrValueId v = irn ? ir_region_add_arg(I->g, r, ir_str(I->g, irn), t) : 0;
        if (!v || !nm_put(&scope.vals, nm, v)) goto oom;
    }
    for (size_t i = 0; i < gp->n_node; i++)
        if (!import_node(I, gp->node[i], (uint32_t)i + 1, r, &scope, &types, infos)) goto out;
    outs = malloc((gp->n_output + 1) * sizeof *outs);
    if (!outs) goto oom;
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *nm = S(gp->output[i]->name);
        uint32_t v = 0;
        bool have = false;
        for (Scope *s = &scope; s && !have; s = s->up) have = nm_get(&s->vals, nm, &v);
        if (!have || v == DROPPED_VALUE) {
            imp_error(I, IR_ESYNTAX, "%s output '%s' is not defined", root ? "graph" : "subgraph", nm);
            goto out;
        }
        outs[i] = v;
    }
    ir_region_set_outputs(I->g, r, (uint32_t)gp->n_output, outs);
    ok = I->status == IR_OK;
    goto out;
oom:
    imp_oom(I);
out:
    free(outs);
    nm_free(&types);
    nm_free(&inits);
    nm_free(&scope.vals);
    free(infos);
    return ok;
}

/* ---- the model ----------------------------------------------------------------------------- */

static const char *model_meta(const Onnx__ModelProto *m, const char *key) {
    for (size_t i = 0; i < m->n_metadata_props; i++)
        if (strcmp(S(m->metadata_props[i]->key), key) == 0) return S(m->metadata_props[i]->value);
    return NULL;
}

static bool is_irtool_key(const char *k) {
    return strcmp(k, IR_ONNX_META_OPSETS) == 0 || strcmp(k, IR_ONNX_META_SYMBOLS) == 0 ||
           strcmp(k, IR_ONNX_META_CONSTRAINTS) == 0;
}

/* Opset of the default domain; records opset imports and metadata as graph meta. */
static bool import_header(Imp *I, const Onnx__ModelProto *m) {
    bool have_default = false;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = S(m->opset_import[i]->domain);
        if (*d && strcmp(d, "ai.onnx") != 0) continue;
        have_default = true;
        I->opset = m->opset_import[i]->version;
    }
    /* a model of other domains only (training ops, say) gets to name its first op */
    if (have_default && (I->opset < IR_ONNX_OPSET_MIN || I->opset > IR_ONNX_OPSET_MAX)) {
        imp_error(I, IR_EUNSUPPORTED, "opset %lld of the default domain is not supported (irtool reads opsets %d to %d)",
                  (long long)I->opset, IR_ONNX_OPSET_MIN, IR_ONNX_OPSET_MAX);
        return false;
    }
    const char *own = model_meta(m, IR_ONNX_META_OPSETS);
    if (own) {
        /* written by irtool: the graph's own opset list, `domain=version;...` */
        const char *p = own;
        while (*p) {
            const char *e = strchr(p, ';');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            char buf[256];
            if (n < sizeof buf) {
                memcpy(buf, p, n);
                buf[n] = 0;
                char *eq = strrchr(buf, '=');
                if (eq) {
                    *eq = 0;
                    ir_graph_set_opset(I->g, buf, strtoll(eq + 1, NULL, 10));
                }
            }
            p += n + (e ? 1 : 0);
        }
    } else {
        for (size_t i = 0; i < m->n_opset_import; i++) {
            const char *d = S(m->opset_import[i]->domain);
            ir_graph_set_opset(I->g, strcmp(d, "ai.onnx") == 0 ? "" : d, m->opset_import[i]->version);
        }
        if (m->producer_name && *m->producer_name)
            ir_graph_set_meta(I->g, IR_ONNX_META_PRODUCER_NAME, m->producer_name);
        if (m->producer_version && *m->producer_version)
            ir_graph_set_meta(I->g, IR_ONNX_META_PRODUCER_VERSION, m->producer_version);
    }
    for (size_t i = 0; i < m->n_metadata_props; i++) {
        const char *k = S(m->metadata_props[i]->key);
        if (!*k || is_irtool_key(k)) continue;
        ir_graph_set_meta(I->g, k, S(m->metadata_props[i]->value));
    }
    const char *syms = model_meta(m, IR_ONNX_META_SYMBOLS);
    for (const char *p = syms; p && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char *name = imp_strdup(I, p, n);
        IrSymId s = name && n ? ir_sym_declare(I->g, name) : 0;
        if (n && (!s || !nm_put(&I->syms, name, s))) {
            imp_oom(I);
            return false;
        }
        p += n + (e ? 1 : 0);
    }
    return true;
}

/* `range LO HI EXPR`, `divisible K EXPR`, `eq EXPR == EXPR`, one per line. */
static void import_constraints(Imp *I, const char *text) {
    char line[1024];
    for (const char *p = text; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        p += n + (e ? 1 : 0);
        if (n >= sizeof line) continue;
        memcpy(line, p - n - (e ? 1 : 0), n);
        line[n] = 0;
        IrConstraint c = {0};
        ExprReader E = {I->g, line, 0, false};
        if (strncmp(line, "range ", 6) == 0) {
            E.p += 6;
            if (!er_int(&E, &c.lo) || !er_int(&E, &c.hi)) continue;
            c.kind = IR_CONSTRAINT_RANGE;
            c.a = er_expr(&E);
        } else if (strncmp(line, "divisible ", 10) == 0) {
            E.p += 10;
            if (!er_int(&E, &c.lo)) continue;
            c.kind = IR_CONSTRAINT_DIVISIBLE;
            c.a = er_expr(&E);
        } else if (strncmp(line, "eq ", 3) == 0) {
            E.p += 3;
            c.kind = IR_CONSTRAINT_EQ;
            c.a = er_expr(&E);
            er_space(&E);
            if (strncmp(E.p, "==", 2) != 0) continue;
            E.p += 2;
            c.b = er_expr(&E);
            if (!c.b) continue;
        } else {
            continue;
        }
        er_space(&E);
        if (!c.a || E.bad || *E.p) continue;
        ir_graph_add_constraint(I->g, &c);
    }
}

IrStatus ir_onnx_import(const void *data, size_t len, const char *path, IrDiag *diag, IrGraph **out) {
    *out = NULL;
    Imp imp = {0}, *I = &imp;
    I->diag = diag;
    I->path = path;
    I->file = path ? path : "<input>";
    if (!data && len) return IR_EINVAL;
    const uint8_t *p = data;
    int depth = len ? wire_depth(p, p + len, 0, MAX_WIRE_DEPTH) : 0;
    if (depth < 0) {
        imp_error(I, IR_ESYNTAX, "not a valid ONNX model: the protobuf data is truncated or corrupt");
        return I->status;
    }
    if (depth > MAX_WIRE_DEPTH) {
        imp_error(I, IR_EUNSUPPORTED, "not a valid ONNX model: messages nest more than %d levels deep", MAX_WIRE_DEPTH);
        return I->status;
    }
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, p);
    if (!m) {
        imp_error(I, IR_ESYNTAX, "not a valid ONNX model: the protobuf data is truncated or corrupt");
        return I->status;
    }
    if (!m->graph) {
        imp_error(I, IR_ESYNTAX, "not a valid ONNX model: it has no graph");
        goto done;
    }
    if (ir_graph_create(&I->g) != IR_OK) {
        imp_oom(I);
        goto done;
    }
    ir_graph_set_source_file(I->g, path);
    if (m->graph->name && *m->graph->name) ir_graph_set_name(I->g, m->graph->name);
    if (!import_header(I, m)) goto done;
    prescan_graph(I, m->graph, 0);
    if (I->status) goto done;
    if (!import_graph(I, m->graph, IR_ROOT_REGION, NULL, true)) {
        if (!I->status) imp_oom(I);
        goto done;
    }
    import_constraints(I, model_meta(m, IR_ONNX_META_CONSTRAINTS));
    for (uint32_t i = 0; i < I->n_guessed; i++) ir_value_set_type(I->g, I->guessed[i], 0);
    if (ir_graph_status(I->g) != IR_OK) imp_oom(I);
done:
    if (I->status && I->g) {
        ir_graph_destroy(I->g);
        I->g = NULL;
    }
    *out = I->g;
    onnx__model_proto__free_unpacked(m, NULL);
    nm_free(&I->taken);
    nm_free(&I->syms);
    for (uint32_t i = 0; i < I->n_owned; i++) free(I->owned[i]);
    free(I->owned);
    free(I->guessed);
    free(I->dir);
    return I->status;
}

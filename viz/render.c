/* viz_render: builds a Graphviz graph from the IR with cgraph, lays it out with gvc ("dot") and
 * renders it. One box per drawn op; weights are folded into their consumers' labels; fused
 * groups and control-flow regions become clusters; large graphs are collapsed (fused groups and
 * control flow as single boxes, then runs of consecutive top-level ops as segment boxes).
 * Every id comes from IR names made unique in program order, so output is deterministic.
 */
#include "viz/viz_internal.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* One Graphviz context for the whole process, used under a lock. Graphviz 2.42's pango text
 * plugin keeps a static pointer to a font name owned by the context, so freeing a context
 * and laying out again with a new one reads freed memory; Graphviz is not reentrant either.
 * This is the one piece of process-wide state in irtool, forced by the library. */
static pthread_once_t gvc_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t gvc_lock = PTHREAD_MUTEX_INITIALIZER;
static GVC_t *gvc_shared;

static void gvc_init(void) { gvc_shared = gvContext(); }

#define DEFAULT_COLLAPSE_ABOVE 2000
#define DEFAULT_EDGE_LABEL_MAX 150
#define SEGMENT_TARGET 1000 /* about this many segment boxes, at most 4/3 of it (dot is ~quadratic) */
#define MAX_WEIGHT_LINES 4
#define VIZ_NCLASS 32 /* more than IrOpClass has values */

typedef struct Box {
    Agnode_t *an;
    IrNodeId node;      /* 0 for inputs, outputs, segments, the marker */
    const char *id;     /* pooled */
    IrStrBuf label;
    IrOpClass cls;
    bool fp8, is_op;
    bool has_err, first_div;
    VizNodeError err; /* the worst error among the nodes drawn in this box */
} Box;

typedef struct Ctx {
    const IrGraph *g;
    const VizOptions *opt;
    IrDiag *diag;
    Agraph_t *root;
    Agsym_t *a_label, *a_id, *a_tooltip, *a_fill, *a_color, *a_pen, *a_shape, *a_style,
        *a_fontcolor, *e_label, *e_style, *e_id;
    Box *boxes;
    uint32_t n_boxes, cap_boxes;
    int32_t *box_of; /* by IrNodeId; -1 = not a box (Constant, open fused group) */
    Agraph_t **cluster_of; /* by IrNodeId: the cluster of an open fused group, else NULL */
    int32_t *input_box; /* by root arg index */
    int32_t marker;
    bool collapse, failed;
    uint32_t op_boxes, elided, clusters, edges;
    IrOp op_constant;
    /* unique id set (open addressing) and a string pool */
    char **ids;
    uint32_t ids_cap, ids_len;
    char **pool;
    uint32_t pool_len, pool_cap;
    bool class_used[VIZ_NCLASS];
    bool any_fp8;
    double err_lo, err_hi; /* range of the drawn errors */
    uint32_t n_err;
} Ctx;

/* ---- deterministic object ids ----
 * cgraph's default id discipline uses the address of the interned name as a named object's id,
 * and orders subgraphs by id, so cluster order (and hence the SVG) would depend on the heap.
 * This discipline hands out ids from a counter instead; names live in cgraph's internal map. */

typedef struct IdState {
    IDTYPE next;
} IdState;

static void *id_open(Agraph_t *g, Agdisc_t *d) {
    (void)g;
    (void)d;
    IdState *s = calloc(1, sizeof *s);
    if (s) s->next = 1;
    return s;
}
static long id_map(void *state, int objtype, char *str, IDTYPE *id, int createflag) {
    (void)objtype;
    (void)createflag;
    IdState *s = state;
    if (str || !s) return 0; /* names go to the internal map, which asks for a fresh id */
    *id = s->next;
    s->next += 2; /* odd ids: cgraph's convention for ids it does not print itself */
    return 1;
}
static long id_alloc(void *state, int objtype, IDTYPE id) {
    (void)state;
    (void)objtype;
    (void)id;
    return 0;
}
static void id_free(void *state, int objtype, IDTYPE id) {
    (void)state;
    (void)objtype;
    (void)id;
}
static char *id_print(void *state, int objtype, IDTYPE id) {
    (void)state;
    (void)objtype;
    (void)id;
    return NULL;
}
static void id_close(void *state) { free(state); }
static void id_register(void *state, int objtype, void *obj) {
    (void)state;
    (void)objtype;
    (void)obj;
}
static Agiddisc_t viz_id_disc = {id_open, id_map, id_alloc, id_free, id_print, id_close, id_register};

/* ---- small helpers ---- */

static char *pool_add(Ctx *c, char *s) {
    if (!s) { c->failed = true; return NULL; }
    if (c->pool_len == c->pool_cap) {
        uint32_t nc = c->pool_cap ? c->pool_cap * 2 : 256;
        char **np = realloc(c->pool, nc * sizeof *np);
        if (!np) { free(s); c->failed = true; return NULL; }
        c->pool = np;
        c->pool_cap = nc;
    }
    c->pool[c->pool_len++] = s;
    return s;
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool ids_contains(const Ctx *c, const char *s) {
    if (!c->ids_cap) return false;
    for (uint32_t i = (uint32_t)(hash_str(s) & (c->ids_cap - 1));; i = (i + 1) & (c->ids_cap - 1)) {
        if (!c->ids[i]) return false;
        if (strcmp(c->ids[i], s) == 0) return true;
    }
}

static void ids_insert(Ctx *c, char *s) {
    if ((c->ids_len + 1) * 2 > c->ids_cap) {
        uint32_t nc = c->ids_cap ? c->ids_cap * 2 : 1024;
        char **n = calloc(nc, sizeof *n);
        if (!n) { c->failed = true; return; }
        for (uint32_t i = 0; i < c->ids_cap; i++) {
            if (!c->ids[i]) continue;
            uint32_t j = (uint32_t)(hash_str(c->ids[i]) & (nc - 1));
            while (n[j]) j = (j + 1) & (nc - 1);
            n[j] = c->ids[i];
        }
        free(c->ids);
        c->ids = n;
        c->ids_cap = nc;
    }
    uint32_t j = (uint32_t)(hash_str(s) & (c->ids_cap - 1));
    while (c->ids[j]) j = (j + 1) & (c->ids_cap - 1);
    c->ids[j] = s;
    c->ids_len++;
}

/* prefix + sanitized name ([A-Za-z0-9_-], others '_'), made unique with _2, _3, ... */
static const char *make_id(Ctx *c, const char *prefix, const char *name) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_strbuf_puts(&b, prefix);
    for (const char *p = name; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  ch == '_' || ch == '-';
        ir_strbuf_putc(&b, ok ? ch : '_');
    }
    if (b.failed) { ir_strbuf_free(&b); c->failed = true; return "x"; }
    size_t base = b.len;
    for (uint32_t k = 2; ids_contains(c, b.data); k++) {
        b.len = base;
        ir_strbuf_printf(&b, "_%u", k);
    }
    char *s = pool_add(c, strdup(b.data));
    ir_strbuf_free(&b);
    if (!s) return "x";
    ids_insert(c, s);
    return s;
}

/* Graphviz escString: a backslash must be doubled; newlines inside names become spaces. */
static void put_esc(IrStrBuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '\\') ir_strbuf_puts(b, "\\\\");
        else if (*s == '\n' || *s == '\r') ir_strbuf_putc(b, ' ');
        else ir_strbuf_putc(b, *s);
    }
}

static void put_type(const IrGraph *g, IrTypeId t, IrStrBuf *b) {
    if (!t) { ir_strbuf_puts(b, "?"); return; }
    IrStrBuf tb;
    ir_strbuf_init(&tb);
    ir_type_print(g, t, &tb);
    put_esc(b, tb.data ? tb.data : "?");
    ir_strbuf_free(&tb);
}

static void put_bytes(IrStrBuf *b, size_t n) {
    if (n < 1024) ir_strbuf_printf(b, "%zu B", n);
    else if (n < 1024 * 1024) ir_strbuf_printf(b, "%.1f KiB", n / 1024.0);
    else if (n < 1024ull * 1024 * 1024) ir_strbuf_printf(b, "%.1f MiB", n / (1024.0 * 1024));
    else ir_strbuf_printf(b, "%.2f GiB", n / (1024.0 * 1024 * 1024));
}

static bool is_fp8_dtype(IrDType d) { return d == IR_DTYPE_F8E4M3FN || d == IR_DTYPE_F8E5M2; }

static bool node_is_fp8(const IrGraph *g, IrNodeId n) {
    IrOp op = ir_node_op(g, n);
    if (op == IR_OP_QUANTIZE_FP8 || op == IR_OP_DEQUANTIZE_FP8 || op == IR_OP_FP8_MAT_MUL) return true;
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
        if (is_fp8_dtype(ir_type_dtype(g, ir_value_type(g, ir_node_result(g, n, i))))) return true;
    return false;
}

static const char *class_color(IrOpClass c) {
    switch (c) {
    case IR_CLASS_ELEMENTWISE: return "#cfe8fc";
    case IR_CLASS_REDUCTION: return "#fde2c4";
    case IR_CLASS_CONTRACTION: return "#f9c8c8";
    case IR_CLASS_DATA_MOVEMENT: return "#d9f2d0";
    case IR_CLASS_SHAPE: return "#eeeeee";
    case IR_CLASS_CONTROL_FLOW: return "#e6d6f5";
    case IR_CLASS_QUANTIZE: return "#fff3b0";
    case IR_CLASS_FUSED: return "#c9ece8";
    default: break;
    }
    return "#ffffff";
}

/* Heat scale by decade of the error (1 - cosine, or the report's number): FP8 layers sit
 * around 1e-4..1e-3, a broken node above 1e-2. */
#define HEAT_N 6
static const double heat_bounds[HEAT_N - 1] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2};
static const char *const heat_colors[HEAT_N] = {"#fff5eb", "#fee6ce", "#fdae6b", "#fd8d3c", "#d94801", "#7f2704"};
static const char *const heat_names[HEAT_N] = {"<= 1e-6", "1e-6 .. 1e-5", "1e-5 .. 1e-4", "1e-4 .. 1e-3",
                                               "1e-3 .. 1e-2", "> 1e-2"};
static int heat_bucket(double e) {
    int i = 0;
    while (i < HEAT_N - 1 && !(e <= heat_bounds[i])) i++;
    return i;
}

/* ---- weights ---- */

/* A folded weight: graph constant, Constant node result, or a region argument bound to one. */
static bool weight_of(const IrGraph *g, IrOp op_constant, IrValueId v, IrValueId *wv, size_t *bytes) {
    for (int depth = 0; v && depth < 64; depth++) {
        IrValueKind k = ir_value_kind(g, v);
        if (k == IR_VALUE_CONST) {
            *wv = v;
            *bytes = ir_const_nbytes(g, ir_value_const(g, v));
            return true;
        }
        if (k == IR_VALUE_RESULT) {
            IrNodeId d = ir_value_def_node(g, v);
            if (ir_node_op(g, d) != op_constant) return false;
            IrAttrValue a;
            *wv = v;
            *bytes = 0;
            if (ir_node_attr(g, d, "value", &a) && a.kind == IR_ATTR_TENSOR) *bytes = ir_const_nbytes(g, a.tensor);
            return true;
        }
        IrRegionId r = ir_value_def_region(g, v);
        if (r == IR_ROOT_REGION) return false;
        IrNodeId p = ir_region_parent(g, r);
        uint32_t i = ir_value_def_index(g, v);
        /* only a fused body's arguments are exactly its operands; loop-carried ones vary */
        if (ir_node_op(g, p) != IR_OP_FUSED || i >= ir_node_num_operands(g, p)) return false;
        v = ir_node_operand(g, p, i);
    }
    return false;
}

static void put_weight_lines(Ctx *c, IrNodeId n, IrStrBuf *b) {
    const IrGraph *g = c->g;
    uint32_t shown = 0, more = 0;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId w;
        size_t bytes;
        if (!weight_of(g, c->op_constant, ir_node_operand(g, n, i), &w, &bytes)) continue;
        if (shown == MAX_WEIGHT_LINES) { more++; continue; }
        ir_strbuf_puts(b, "\\n");
        put_esc(b, ir_value_name(g, w));
        ir_strbuf_puts(b, ": ");
        put_type(g, ir_value_type(g, w), b);
        ir_strbuf_puts(b, " ");
        put_bytes(b, bytes);
        shown++;
    }
    if (more) ir_strbuf_printf(b, "\\n+%u more weights", more);
}

/* ---- tooltips ---- */

static void put_attr_value(const IrGraph *g, const IrAttrValue *a, IrStrBuf *b) {
    uint32_t cap = a->count < 16 ? a->count : 16;
    switch (a->kind) {
    case IR_ATTR_INT: ir_strbuf_printf(b, "%lld", (long long)a->i); break;
    case IR_ATTR_FLOAT: ir_strbuf_printf(b, "%g", a->f); break;
    case IR_ATTR_STRING: ir_strbuf_puts(b, "\""); put_esc(b, ir_str(g, a->s)); ir_strbuf_puts(b, "\""); break;
    case IR_ATTR_DTYPE: ir_strbuf_puts(b, ir_dtype_name((IrDType)a->i)); break;
    case IR_ATTR_TENSOR:
        ir_strbuf_puts(b, "tensor ");
        put_type(g, ir_const_type(g, a->tensor), b);
        break;
    case IR_ATTR_INTS:
    case IR_ATTR_FLOATS:
    case IR_ATTR_STRINGS:
        ir_strbuf_puts(b, "[");
        for (uint32_t i = 0; i < cap; i++) {
            if (i) ir_strbuf_puts(b, ", ");
            if (a->kind == IR_ATTR_INTS) ir_strbuf_printf(b, "%lld", (long long)a->ints[i]);
            else if (a->kind == IR_ATTR_FLOATS) ir_strbuf_printf(b, "%g", a->floats[i]);
            else put_esc(b, ir_str(g, a->strs[i]));
        }
        if (cap < a->count) ir_strbuf_printf(b, ", ... (%u)", a->count);
        ir_strbuf_puts(b, "]");
        break;
    case IR_ATTR_NONE: break;
    }
}

static void put_tooltip(Ctx *c, IrNodeId n, IrStrBuf *b) {
    const IrGraph *g = c->g;
    ir_strbuf_puts(b, ir_op_name(ir_node_op(g, n)));
    if (*ir_node_name(g, n)) { ir_strbuf_puts(b, " "); put_esc(b, ir_node_name(g, n)); }
    ir_strbuf_printf(b, "\\nclass: %s", ir_op_class_name(ir_op_info(ir_node_op(g, n))->cls));
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId v = ir_node_result(g, n, i);
        ir_strbuf_puts(b, "\\nout %");
        put_esc(b, ir_value_name(g, v));
        ir_strbuf_puts(b, ": ");
        put_type(g, ir_value_type(g, v), b);
    }
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v) continue;
        ir_strbuf_puts(b, "\\nin %");
        put_esc(b, ir_value_name(g, v));
        ir_strbuf_puts(b, ": ");
        put_type(g, ir_value_type(g, v), b);
    }
    for (uint32_t i = 0; i < ir_node_num_attrs(g, n); i++) {
        IrAttrValue a = ir_node_attr_at(g, n, i);
        ir_strbuf_puts(b, "\\n");
        put_esc(b, ir_str(g, ir_node_attr_name(g, n, i)));
        ir_strbuf_puts(b, " = ");
        put_attr_value(g, &a, b);
    }
    IrLoc loc = ir_node_loc(g, n);
    uint32_t line = 0, col = 0;
    ir_node_text_pos(g, n, &line, &col);
    if (loc.file) {
        ir_strbuf_puts(b, "\\nloc: ");
        put_esc(b, ir_str(g, loc.file));
        ir_strbuf_printf(b, ":%u:%u", loc.line, loc.col);
    }
    if (line) {
        const char *src = ir_graph_source_file(g);
        ir_strbuf_puts(b, "\\nsource: ");
        put_esc(b, src ? src : "<input>");
        ir_strbuf_printf(b, ":%u:%u", line, col);
    }
    uint32_t np = ir_node_num_provenance(g, n);
    if (np) {
        ir_strbuf_puts(b, "\\nfrom:");
        for (uint32_t i = 0; i < np && i < 32; i++) {
            ir_strbuf_puts(b, i ? ", " : " ");
            put_esc(b, ir_str(g, ir_node_provenance(g, n, i)));
        }
        if (np > 32) ir_strbuf_printf(b, ", ... (%u)", np);
    }
}

/* ---- boxes ---- */

static int32_t box_new(Ctx *c, Agraph_t *sg, const char *prefix, const char *name) {
    if (c->n_boxes == c->cap_boxes) {
        uint32_t nc = c->cap_boxes ? c->cap_boxes * 2 : 256;
        Box *nb = realloc(c->boxes, nc * sizeof *nb);
        if (!nb) { c->failed = true; return -1; }
        c->boxes = nb;
        c->cap_boxes = nc;
    }
    Box *b = &c->boxes[c->n_boxes];
    memset(b, 0, sizeof *b);
    ir_strbuf_init(&b->label);
    b->id = make_id(c, prefix, name);
    b->cls = IR_CLASS_OTHER;
    b->an = agnode(sg, (char *)b->id, 1);
    if (!b->an) { c->failed = true; return -1; }
    agxset(b->an, c->a_id, (char *)b->id);
    return (int32_t)c->n_boxes++;
}

static const char *node_display_name(const IrGraph *g, IrNodeId n) {
    const char *name = ir_node_name(g, n);
    if (*name) return name;
    if (ir_node_num_results(g, n)) return ir_value_name(g, ir_node_result(g, n, 0));
    return "";
}

static void label_op(Ctx *c, Box *b, IrNodeId n) {
    const IrGraph *g = c->g;
    IrStrBuf *l = &b->label;
    ir_strbuf_puts(l, ir_op_name(ir_node_op(g, n)));
    if (b->fp8) ir_strbuf_puts(l, " [FP8]");
    if (*ir_node_name(g, n)) { ir_strbuf_puts(l, "\\n"); put_esc(l, ir_node_name(g, n)); }
    uint32_t nr = ir_node_num_results(g, n);
    for (uint32_t i = 0; i < nr && i < 3; i++) {
        ir_strbuf_puts(l, i ? ", " : "\\n");
        put_type(g, ir_value_type(g, ir_node_result(g, n, i)), l);
    }
    if (nr > 3) ir_strbuf_printf(l, ", +%u", nr - 3);
}

static uint32_t count_nested(const IrGraph *g, IrNodeId n) {
    uint32_t k = 0;
    for (uint32_t r = 0; r < ir_node_num_regions(g, n); r++)
        for (IrNodeId m = ir_region_first(g, ir_node_region_at(g, n, r)); m; m = ir_node_next(g, m))
            k += 1 + count_nested(g, m);
    return k;
}

static void map_nested(Ctx *c, IrNodeId n, int32_t box) {
    const IrGraph *g = c->g;
    for (uint32_t r = 0; r < ir_node_num_regions(g, n); r++)
        for (IrNodeId m = ir_region_first(g, ir_node_region_at(g, n, r)); m; m = ir_node_next(g, m)) {
            c->box_of[m] = ir_node_op(g, m) == c->op_constant ? -1 : box;
            map_nested(c, m, box);
        }
}

static bool max_reached(Ctx *c) { return c->opt->max_nodes && c->op_boxes >= c->opt->max_nodes; }

static void elide(Ctx *c, IrNodeId n) {
    if (c->marker < 0) {
        c->marker = box_new(c, c->root, "n_", "elided");
        if (c->marker < 0) return;
    }
    c->box_of[n] = c->marker;
    map_nested(c, n, c->marker);
    c->elided += 1 + count_nested(c->g, n);
}

/* One op box for node n (collapsed groups and control flow included). */
static int32_t op_box(Ctx *c, Agraph_t *sg, IrNodeId n) {
    const IrGraph *g = c->g;
    int32_t bi = box_new(c, sg, "n_", node_display_name(g, n));
    if (bi < 0) return -1;
    Box *b = &c->boxes[bi];
    b->node = n;
    b->is_op = true;
    b->cls = ir_op_info(ir_node_op(g, n))->cls;
    b->fp8 = node_is_fp8(g, n);
    label_op(c, b, n);
    if (ir_node_op(g, n) == IR_OP_FUSED || ir_node_num_regions(g, n)) {
        bool found;
        const char *kind = ir_node_attr_string(g, n, "kind", &found);
        if (ir_node_op(g, n) == IR_OP_FUSED && found) ir_strbuf_printf(&b->label, "\\nkind %s", kind);
        if (c->collapse) ir_strbuf_printf(&b->label, "\\n(%u nodes collapsed)", count_nested(g, n));
    }
    put_weight_lines(c, n, &b->label);
    c->op_boxes++;
    c->box_of[n] = bi;
    return bi;
}

static Agraph_t *cluster(Ctx *c, Agraph_t *parent, const char *name, const char *label, const char *style,
                         const char *fill) {
    const char *id = make_id(c, "cluster_", name);
    Agraph_t *sg = agsubg(parent, (char *)id, 1);
    if (!sg) { c->failed = true; return parent; }
    agsafeset(sg, "id", (char *)id, "");
    agsafeset(sg, "label", (char *)label, "");
    agsafeset(sg, "style", (char *)style, "");
    agsafeset(sg, "fillcolor", (char *)fill, "");
    c->clusters++;
    return sg;
}

static void draw_region(Ctx *c, IrRegionId r, Agraph_t *sg);

static void draw_node(Ctx *c, IrNodeId n, Agraph_t *sg) {
    const IrGraph *g = c->g;
    IrOp op = ir_node_op(g, n);
    if (op == c->op_constant) { c->box_of[n] = -1; return; }
    if (max_reached(c)) { elide(c, n); return; }
    uint32_t nreg = ir_node_num_regions(g, n);
    if (c->collapse || nreg == 0) {
        int32_t bi = op_box(c, sg, n);
        if (bi >= 0) map_nested(c, n, bi);
        return;
    }
    IrStrBuf l;
    ir_strbuf_init(&l);
    if (op == IR_OP_FUSED) {
        bool found;
        const char *kind = ir_node_attr_string(g, n, "kind", &found);
        put_esc(&l, node_display_name(g, n));
        ir_strbuf_printf(&l, " (%s, %u nodes)", found ? kind : "?", count_nested(g, n));
        Agraph_t *cl = cluster(c, sg, node_display_name(g, n), l.data ? l.data : "", "filled,rounded", "#eef8f7");
        c->box_of[n] = -1;
        c->cluster_of[n] = cl;
        draw_region(c, ir_node_region_at(g, n, 0), cl);
    } else {
        put_esc(&l, ir_op_name(op));
        ir_strbuf_puts(&l, " ");
        put_esc(&l, node_display_name(g, n));
        Agraph_t *cl = cluster(c, sg, node_display_name(g, n), l.data ? l.data : "", "dashed,rounded", "#ffffff");
        op_box(c, cl, n);
        for (uint32_t i = 0; i < nreg; i++) {
            char rname[64];
            if (!ir_op_region_name(op, i, rname, sizeof rname)) snprintf(rname, sizeof rname, "region%u", i);
            IrStrBuf cn;
            ir_strbuf_init(&cn);
            ir_strbuf_printf(&cn, "%s_%s", node_display_name(g, n), rname);
            Agraph_t *rc = cluster(c, cl, cn.data ? cn.data : rname, rname, "filled,rounded", "#f7f2fc");
            ir_strbuf_free(&cn);
            draw_region(c, ir_node_region_at(g, n, i), rc);
        }
    }
    ir_strbuf_free(&l);
}

static void draw_region(Ctx *c, IrRegionId r, Agraph_t *sg) {
    for (IrNodeId n = ir_region_first(c->g, r); n; n = ir_node_next(c->g, n)) draw_node(c, n, sg);
}

/* Name scope: the part of a node name before its last '/' ("block3/matmul" -> "block3"). */
static size_t scope_len(const char *name) {
    const char *slash = strrchr(name, '/');
    return slash ? (size_t)(slash - name) : 0;
}
static bool has_scope(const IrGraph *g, IrNodeId n) { return scope_len(ir_node_name(g, n)) > 0; }
static bool same_scope(const IrGraph *g, IrNodeId a, IrNodeId b) {
    const char *x = ir_node_name(g, a), *y = ir_node_name(g, b);
    size_t lx = scope_len(x), ly = scope_len(y);
    return lx == ly && memcmp(x, y, lx) == 0;
}

/* Tooltip of a segment: its node count per op, in first-seen order (at most 24 ops). */
static void segment_tooltip(Ctx *c, Box *b, IrNodeId first, IrNodeId last) {
    const IrGraph *g = c->g;
    IrOp ops[24];
    uint32_t counts[24], n = 0;
    for (IrNodeId m = first;; m = ir_node_next(g, m)) {
        IrOp op = ir_node_op(g, m);
        if (op != c->op_constant) {
            uint32_t k = 0;
            while (k < n && ops[k] != op) k++;
            if (k == n && n < 24) { ops[n] = op; counts[n++] = 0; }
            if (k < n) counts[k]++;
        }
        if (m == last) break;
    }
    IrStrBuf t;
    ir_strbuf_init(&t);
    ir_strbuf_puts(&t, "segment of consecutive top-level ops\\nfirst: ");
    put_esc(&t, node_display_name(g, first));
    ir_strbuf_puts(&t, "\\nlast: ");
    put_esc(&t, node_display_name(g, last));
    for (uint32_t k = 0; k < n; k++) ir_strbuf_printf(&t, "\\n%s x%u", ir_op_name(ops[k]), counts[k]);
    if (t.data) agxset(b->an, c->a_tooltip, t.data);
    ir_strbuf_free(&t);
}

/* Collapsed and still large: runs of consecutive top-level ops become segment boxes. */
static void draw_segments(Ctx *c, uint32_t items) {
    const IrGraph *g = c->g;
    uint32_t per = (items + SEGMENT_TARGET - 1) / SEGMENT_TARGET;
    IrNodeId n = ir_region_first(g, IR_ROOT_REGION);
    uint32_t seg = 0;
    while (n) {
        if (ir_node_op(g, n) == c->op_constant) { c->box_of[n] = -1; n = ir_node_next(g, n); continue; }
        if (max_reached(c)) { elide(c, n); n = ir_node_next(g, n); continue; }
        char nm[32];
        snprintf(nm, sizeof nm, "segment%u", ++seg);
        int32_t bi = box_new(c, c->root, "n_", nm);
        if (bi < 0) return;
        c->op_boxes++;
        uint32_t k = 0, total = 0, nclass[VIZ_NCLASS] = {0};
        size_t wbytes = 0;
        IrNodeId first = n, last = n;
        for (; n && k < 2 * per; n = ir_node_next(g, n)) {
            if (ir_node_op(g, n) == c->op_constant) { c->box_of[n] = -1; continue; }
            /* end at a name-scope boundary ("block3/..." -> "block4/...") once the segment
             * is 3/4 full, so segments follow the model's blocks; else at `per` nodes */
            if (k >= per && !has_scope(g, first)) break;
            if (k >= (per * 3 + 3) / 4 && has_scope(g, first) && !same_scope(g, first, n)) break;
            c->box_of[n] = bi;
            map_nested(c, n, bi);
            IrOpClass cl = ir_op_info(ir_node_op(g, n))->cls;
            if ((unsigned)cl < VIZ_NCLASS) nclass[cl]++;
            if (node_is_fp8(g, n)) c->boxes[bi].fp8 = true;
            for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
                IrValueId w;
                size_t bytes;
                if (weight_of(g, c->op_constant, ir_node_operand(g, n, i), &w, &bytes)) wbytes += bytes;
            }
            total += 1 + count_nested(g, n);
            last = n;
            k++;
        }
        Box *b = &c->boxes[bi];
        IrOpClass best = IR_CLASS_OTHER;
        for (int i = 0; i < VIZ_NCLASS; i++)
            if (nclass[i] > nclass[best]) best = (IrOpClass)i;
        b->cls = best;
        b->is_op = true;
        ir_strbuf_printf(&b->label, "segment %u: %u nodes", seg, total);
        if (b->fp8) ir_strbuf_puts(&b->label, " [FP8]");
        ir_strbuf_puts(&b->label, "\\n");
        put_esc(&b->label, node_display_name(g, first));
        ir_strbuf_puts(&b->label, " .. ");
        put_esc(&b->label, node_display_name(g, last));
        if (wbytes) { ir_strbuf_puts(&b->label, "\\nweights "); put_bytes(&b->label, wbytes); }
        segment_tooltip(c, b, first, last);
    }
}

/* ---- values to boxes, edges ---- */

static int32_t resolve(Ctx *c, IrValueId v) {
    const IrGraph *g = c->g;
    for (int depth = 0; v && depth < 256; depth++) {
        IrValueKind k = ir_value_kind(g, v);
        if (k == IR_VALUE_CONST) return -1;
        if (k == IR_VALUE_RESULT) {
            IrNodeId d = ir_value_def_node(g, v);
            if (ir_node_op(g, d) == c->op_constant) return -1;
            if (c->box_of[d] >= 0) return c->box_of[d];
            if (ir_node_op(g, d) == IR_OP_FUSED && ir_node_num_regions(g, d)) {
                IrRegionId body = ir_node_region_at(g, d, 0);
                uint32_t i = ir_value_def_index(g, v);
                if (i >= ir_region_num_outputs(g, body)) return -1;
                v = ir_region_output(g, body, i);
                continue;
            }
            return -1;
        }
        IrRegionId r = ir_value_def_region(g, v);
        uint32_t i = ir_value_def_index(g, v);
        if (r == IR_ROOT_REGION) return c->input_box[i];
        IrNodeId p = ir_region_parent(g, r);
        if (i >= ir_node_num_operands(g, p)) return -1;
        v = ir_node_operand(g, p, i);
    }
    return -1;
}

static void add_edge(Ctx *c, int32_t t, int32_t h, IrValueId v, bool dashed, bool labels) {
    if (t < 0 || h < 0 || t == h) return;
    Agnode_t *tn = c->boxes[t].an, *hn = c->boxes[h].an;
    if (agedge(c->root, tn, hn, NULL, 0)) return;
    Agedge_t *e = agedge(c->root, tn, hn, NULL, 1);
    if (!e) { c->failed = true; return; }
    char eid[512];
    snprintf(eid, sizeof eid, "e_%s__%s", c->boxes[t].id + (c->boxes[t].id[0] == 'n' ? 2 : 0),
             c->boxes[h].id + (c->boxes[h].id[0] == 'n' ? 2 : 0));
    agxset(e, c->e_id, eid);
    if (dashed) agxset(e, c->e_style, "dashed");
    if (labels && v) {
        IrStrBuf l;
        ir_strbuf_init(&l);
        put_type(c->g, ir_value_type(c->g, v), &l);
        if (l.data) agxset(e, c->e_label, l.data);
        ir_strbuf_free(&l);
    }
    c->edges++;
}

static void draw_edges(Ctx *c) {
    const IrGraph *g = c->g;
    uint32_t thr = c->opt->edge_label_max ? c->opt->edge_label_max : DEFAULT_EDGE_LABEL_MAX;
    bool labels = c->op_boxes < thr;
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        int32_t h = c->box_of[n];
        if (h < 0) continue;
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrValueId v = ir_node_operand(g, n, i);
            add_edge(c, resolve(c, v), h, v, false, labels);
        }
        /* region results flow back into an open control-flow node */
        if (c->boxes[h].node == n)
            for (uint32_t r = 0; r < ir_node_num_regions(g, n); r++) {
                IrRegionId rg = ir_node_region_at(g, n, r);
                for (uint32_t k = 0; k < ir_region_num_outputs(g, rg); k++)
                    add_edge(c, resolve(c, ir_region_output(g, rg, k)), h, 0, true, false);
            }
    }
}

static void draw_io(Ctx *c, bool inputs) {
    const IrGraph *g = c->g;
    uint32_t n = inputs ? ir_graph_num_inputs(g) : ir_graph_num_outputs(g);
    for (uint32_t i = 0; i < n; i++) {
        IrValueId v = inputs ? ir_graph_input(g, i) : ir_graph_output(g, i);
        int32_t bi = box_new(c, c->root, inputs ? "in_" : "out_", ir_value_name(g, v));
        if (bi < 0) return;
        Box *b = &c->boxes[bi];
        ir_strbuf_puts(&b->label, inputs ? "input " : "output ");
        put_esc(&b->label, ir_value_name(g, v));
        ir_strbuf_puts(&b->label, "\\n");
        put_type(g, ir_value_type(g, v), &b->label);
        agxset(b->an, c->a_shape, "oval");
        agxset(b->an, c->a_fill, "#ffffff");
        if (inputs) c->input_box[i] = bi;
        else add_edge(c, resolve(c, v), bi, v, false, false);
    }
}

/* ---- highlight, styles, legend ---- */

static bool node_err(Ctx *c, IrNodeId n, VizNodeError *err) {
    const IrGraph *g = c->g;
    const VizHighlight *h = c->opt->highlight;
    if (viz_highlight_lookup(h, ir_node_name(g, n), err)) return true;
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
        if (viz_highlight_lookup(h, ir_value_name(g, ir_node_result(g, n, i)), err)) return true;
    return false;
}

static bool node_is_named(const IrGraph *g, IrNodeId n, const char *name) {
    if (strcmp(ir_node_name(g, n), name) == 0) return true;
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
        if (strcmp(ir_value_name(g, ir_node_result(g, n, i)), name) == 0) return true;
    return false;
}

static void put_err_line(IrStrBuf *b, const VizNodeError *e) {
    ir_strbuf_printf(b, "\\n%s %.2e", e->by_cosine ? "1-cos" : "err", e->metric);
}

/* An open fused group: the cluster takes the heat colour and the divergence outline. */
static void mark_cluster(Agraph_t *cl, const VizNodeError *e, bool first_div) {
    IrStrBuf l;
    ir_strbuf_init(&l);
    const char *old = agget(cl, "label");
    ir_strbuf_puts(&l, old ? old : "");
    if (e) {
        put_err_line(&l, e);
        agsafeset(cl, "fillcolor", (char *)heat_colors[heat_bucket(e->metric)], "");
    }
    if (first_div) {
        ir_strbuf_puts(&l, "\\nFIRST DIVERGENCE");
        agsafeset(cl, "color", "#e00000", "");
        agsafeset(cl, "penwidth", "4", "");
        agsafeset(cl, "fontcolor", "#e00000", "");
    }
    if (l.data) agsafeset(cl, "label", l.data, "");
    ir_strbuf_free(&l);
}

/* Colours boxes and open groups from the report. A report none of whose names occur in the
 * graph was made for another model: that is an error, not an empty overlay. */
static IrStatus apply_highlight(Ctx *c) {
    const IrGraph *g = c->g;
    const VizHighlight *h = c->opt->highlight;
    const char *fd = viz_highlight_first_divergence(h);
    uint32_t matched = 0;
    bool fd_found = false;
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        VizNodeError e;
        bool has = node_err(c, n, &e);
        bool is_fd = fd && node_is_named(g, n, fd);
        if (has) matched++;
        if (is_fd) fd_found = true;
        if (has) {
            if (!c->n_err++ || e.metric < c->err_lo) c->err_lo = e.metric;
            if (c->n_err == 1 || e.metric > c->err_hi) c->err_hi = e.metric;
        }
        int32_t bi = c->box_of[n];
        if (bi < 0) {
            if (c->cluster_of[n] && (has || is_fd)) mark_cluster(c->cluster_of[n], has ? &e : NULL, is_fd);
            continue;
        }
        Box *b = &c->boxes[bi];
        if (has && (!b->has_err || e.metric > b->err.metric)) { b->err = e; b->has_err = true; }
        if (is_fd) b->first_div = true;
    }
    uint32_t listed = viz_highlight_num_nodes(h);
    if ((listed || fd) && !matched && !fd_found) {
        const char *file = c->opt->highlight_file ? c->opt->highlight_file : "the report";
        const char *example = listed ? viz_highlight_node_name(h, 0) : fd;
        ir_diag_error(c->diag,
                      "%s names %u node%s (e.g. '%s') but none of them is in this graph; was it made for "
                      "another model, or for the graph after a pipeline (pass the same -p to viz)?",
                      file, listed, listed == 1 ? "" : "s", example);
        return IR_ENOTFOUND;
    }
    if (!listed && viz_highlight_passed(h) >= 0) {
        IrStrBuf t;
        ir_strbuf_init(&t);
        uint32_t no = viz_highlight_num_outputs(h);
        if (viz_highlight_passed(h))
            ir_strbuf_printf(&t, "validation passed: %u output%s within tolerance, nothing to highlight", no,
                             no == 1 ? "" : "s");
        else
            ir_strbuf_puts(&t, "validation failed, but the report has no per-node errors to draw");
        if (t.data) {
            agsafeset(c->root, "label", t.data, "");
            agsafeset(c->root, "labelloc", "t", "");
            agsafeset(c->root, "fontsize", "16", "");
            agsafeset(c->root, "fontcolor", viz_highlight_passed(h) ? "#1a7f37" : "#b00000", "");
        }
        ir_strbuf_free(&t);
    }
    return IR_OK;
}

static void finish_boxes(Ctx *c) {
    bool hl = c->opt->highlight != NULL;
    for (uint32_t i = 0; i < c->n_boxes; i++) {
        Box *b = &c->boxes[i];
        if (!b->is_op && (int32_t)i != c->marker) {
            if (b->label.data) agxset(b->an, c->a_label, b->label.data);
            continue;
        }
        if ((int32_t)i == c->marker) {
            ir_strbuf_printf(&b->label, "... %u more nodes", c->elided);
            agxset(b->an, c->a_label, b->label.data ? b->label.data : "...");
            agxset(b->an, c->a_style, "dashed");
            agxset(b->an, c->a_fill, "#ffffff");
            continue;
        }
        if ((unsigned)b->cls < VIZ_NCLASS) c->class_used[b->cls] = true;
        const char *fill = class_color(b->cls);
        if (hl) {
            if (b->has_err) {
                int k = heat_bucket(b->err.metric);
                fill = heat_colors[k];
                if (k >= 4) agxset(b->an, c->a_fontcolor, "#ffffff");
                put_err_line(&b->label, &b->err);
            } else {
                fill = "#f4f4f4";
            }
        }
        if (b->first_div) {
            ir_strbuf_puts(&b->label, "\\nFIRST DIVERGENCE");
            agxset(b->an, c->a_color, "#e00000");
            agxset(b->an, c->a_pen, "4");
        } else if (b->fp8) {
            agxset(b->an, c->a_color, "#d4006a");
            agxset(b->an, c->a_pen, "3");
        }
        if (b->fp8) { c->any_fp8 = true; agxset(b->an, c->a_style, "filled,rounded,bold"); }
        agxset(b->an, c->a_fill, (char *)fill);
        agxset(b->an, c->a_label, b->label.data ? b->label.data : "");
        if (b->node) {
            IrStrBuf t;
            ir_strbuf_init(&t);
            put_tooltip(c, b->node, &t);
            if (b->has_err) {
                if (isfinite(b->err.cosine)) ir_strbuf_printf(&t, "\\ncosine: %.9g (1 - cosine %.3g)", b->err.cosine, b->err.metric);
                else ir_strbuf_printf(&t, "\\nerror: %g", b->err.metric);
                if (isfinite(b->err.max_abs_err)) ir_strbuf_printf(&t, "\\nmax_abs_err: %g", b->err.max_abs_err);
                if (isfinite(b->err.max_rel_err)) ir_strbuf_printf(&t, "\\nmax_rel_err: %g", b->err.max_rel_err);
            }
            if (b->first_div) ir_strbuf_puts(&t, "\\nfirst divergence");
            if (t.data) agxset(b->an, c->a_tooltip, t.data);
            ir_strbuf_free(&t);
        }
    }
}

static void legend_entry(Ctx *c, Agraph_t *lg, const char *name, const char *label, const char *fill,
                         const char *color) {
    Agnode_t *an = agnode(lg, (char *)make_id(c, "legend_", name), 1);
    if (!an) { c->failed = true; return; }
    agxset(an, c->a_id, agnameof(an));
    agxset(an, c->a_label, (char *)label);
    agxset(an, c->a_fill, (char *)fill);
    if (color) { agxset(an, c->a_color, (char *)color); agxset(an, c->a_pen, "3"); }
}

/* dot places the nodes of one rank right to left in creation order here, so entries are created
 * last first to read left to right. */
static void draw_legend(Ctx *c) {
    Agraph_t *lg = cluster(c, c->root, "legend", "legend: op class", "rounded", "#ffffff");
    if (c->any_fp8) legend_entry(c, lg, "fp8", "FP8", "#ffffff", "#d4006a");
    for (int k = VIZ_NCLASS - 1; k >= 0; k--)
        if (c->class_used[k])
            legend_entry(c, lg, ir_op_class_name((IrOpClass)k), (char *)ir_op_class_name((IrOpClass)k),
                         class_color((IrOpClass)k), NULL);
    if (c->opt->highlight) {
        const VizHighlight *h = c->opt->highlight;
        IrStrBuf t;
        ir_strbuf_init(&t);
        ir_strbuf_puts(&t, viz_highlight_by_cosine(h) ? "legend: error = 1 - cosine with the reference, per node"
                                                      : "legend: error as given in the report, per node");
        if (c->n_err) ir_strbuf_printf(&t, "\\nthis report: %.2e .. %.2e over %u nodes", c->err_lo, c->err_hi, c->n_err);
        Agraph_t *hg = cluster(c, c->root, "heat_legend", t.data ? t.data : "legend", "rounded", "#ffffff");
        ir_strbuf_free(&t);
        legend_entry(c, hg, "first_divergence", "first divergence", "#ffffff", "#e00000");
        legend_entry(c, hg, "not_compared", "not compared", "#f4f4f4", NULL);
        for (int k = HEAT_N - 1; k >= 0; k--) {
            char nm[16];
            snprintf(nm, sizeof nm, "heat%d", k);
            legend_entry(c, hg, nm, heat_names[k], heat_colors[k], NULL);
        }
    }
}

/* ---- driver ---- */

static void declare_attrs(Ctx *c, bool big) {
    Agraph_t *g = c->root;
    agattr(g, AGRAPH, "rankdir", "TB");
    agattr(g, AGRAPH, "fontname", "Helvetica");
    agattr(g, AGRAPH, "fontsize", "11");
    agattr(g, AGRAPH, "nodesep", "0.25");
    agattr(g, AGRAPH, "ranksep", "0.35");
    if (big) {
        /* fewer crossing-minimisation and network-simplex iterations on large graphs */
        agattr(g, AGRAPH, "mclimit", "0.3");
        agattr(g, AGRAPH, "nslimit", "2");
        agattr(g, AGRAPH, "nslimit1", "2");
        agattr(g, AGRAPH, "searchsize", "10");
    }
    agattr(g, AGRAPH, "id", "");
    agattr(g, AGRAPH, "label", "");
    agattr(g, AGRAPH, "style", "");
    agattr(g, AGRAPH, "fillcolor", "");
    c->a_label = agattr(g, AGNODE, "label", "");
    c->a_id = agattr(g, AGNODE, "id", "");
    c->a_tooltip = agattr(g, AGNODE, "tooltip", "");
    c->a_fill = agattr(g, AGNODE, "fillcolor", "#ffffff");
    c->a_color = agattr(g, AGNODE, "color", "#444444");
    c->a_pen = agattr(g, AGNODE, "penwidth", "1");
    c->a_shape = agattr(g, AGNODE, "shape", "box");
    c->a_style = agattr(g, AGNODE, "style", "filled,rounded");
    c->a_fontcolor = agattr(g, AGNODE, "fontcolor", "#000000");
    agattr(g, AGNODE, "fontname", "Helvetica");
    agattr(g, AGNODE, "fontsize", "10");
    agattr(g, AGNODE, "margin", "0.08,0.04");
    agattr(g, AGNODE, "height", "0.3");
    c->e_label = agattr(g, AGEDGE, "label", "");
    c->e_style = agattr(g, AGEDGE, "style", "solid");
    c->e_id = agattr(g, AGEDGE, "id", "");
    agattr(g, AGEDGE, "fontname", "Helvetica");
    agattr(g, AGEDGE, "fontsize", "8");
    agattr(g, AGEDGE, "color", "#666666");
    agattr(g, AGEDGE, "arrowsize", "0.6");
}

static uint32_t count_top_items(const Ctx *c) {
    uint32_t k = 0;
    for (IrNodeId n = ir_region_first(c->g, IR_ROOT_REGION); n; n = ir_node_next(c->g, n))
        if (ir_node_op(c->g, n) != c->op_constant) k++;
    return k;
}

static int cmp_css(const void *a, const void *b) {
    return strcmp(((const VizCssEntry *)a)->id, ((const VizCssEntry *)b)->id);
}

/* "op-" + the class name with '_' and ' ' as '-': "op-data-movement". */
static void css_class_name(IrOpClass k, char *buf, size_t cap) {
    snprintf(buf, cap, "op-%s", ir_op_class_name(k));
    for (char *p = buf; *p; p++)
        if (*p == '_' || *p == ' ') *p = '-';
}

/* ---- the HTML viewer's data: what its side panel and search show, per box and group ---- */

static json_t *jstr_type(const IrGraph *g, IrTypeId t) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    if (t) ir_type_print(g, t, &b);
    json_t *j = json_string(b.data && !b.failed ? b.data : "?");
    ir_strbuf_free(&b);
    return j;
}

static json_t *jerr(const VizNodeError *e) {
    json_t *o = json_object();
    json_object_set_new(o, "metric", json_real(e->metric));
    json_object_set_new(o, "by_cosine", json_boolean(e->by_cosine));
    if (isfinite(e->cosine)) json_object_set_new(o, "cosine", json_real(e->cosine));
    if (isfinite(e->max_abs_err)) json_object_set_new(o, "max_abs_err", json_real(e->max_abs_err));
    if (isfinite(e->max_rel_err)) json_object_set_new(o, "max_rel_err", json_real(e->max_rel_err));
    return o;
}

/* The innermost open fused group holding n, as its cluster id; NULL at top level. */
static const char *group_of(Ctx *c, IrNodeId n) {
    for (IrNodeId p = ir_region_parent(c->g, ir_node_region(c->g, n)); p; p = ir_region_parent(c->g, ir_node_region(c->g, p)))
        if (c->cluster_of[p]) return agget(c->cluster_of[p], "id");
    return NULL;
}

static json_t *node_data(Ctx *c, const Box *b) {
    const IrGraph *g = c->g;
    IrNodeId n = b->node;
    json_t *o = json_object();
    json_object_set_new(o, "op", json_string(ir_op_name(ir_node_op(g, n))));
    json_object_set_new(o, "name", json_string(node_display_name(g, n)));
    json_object_set_new(o, "class", json_string(ir_op_class_name(ir_op_info(ir_node_op(g, n))->cls)));
    bool found;
    const char *kind = ir_node_attr_string(g, n, "kind", &found);
    if (ir_node_op(g, n) == IR_OP_FUSED && found) json_object_set_new(o, "kind", json_string(kind));
    if (ir_node_num_regions(g, n)) json_object_set_new(o, "members", json_integer(count_nested(g, n)));
    const char *grp = group_of(c, n);
    if (grp) json_object_set_new(o, "group", json_string(grp));
    json_t *attrs = json_array(), *outs = json_array(), *ins = json_array(), *ws = json_array();
    for (uint32_t i = 0; i < ir_node_num_attrs(g, n); i++) {
        IrAttrValue a = ir_node_attr_at(g, n, i);
        IrStrBuf v;
        ir_strbuf_init(&v);
        put_attr_value(g, &a, &v);
        json_array_append_new(attrs, json_pack("[ss]", ir_str(g, ir_node_attr_name(g, n, i)), v.data ? v.data : ""));
        ir_strbuf_free(&v);
    }
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId v = ir_node_result(g, n, i);
        json_array_append_new(outs, json_pack("[so]", ir_value_name(g, v), jstr_type(g, ir_value_type(g, v))));
    }
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i), w;
        size_t bytes;
        if (!v) continue;
        if (weight_of(g, c->op_constant, v, &w, &bytes))
            json_array_append_new(ws, json_pack("[soI]", ir_value_name(g, w), jstr_type(g, ir_value_type(g, w)), (json_int_t)bytes));
        else
            json_array_append_new(ins, json_pack("[so]", ir_value_name(g, v), jstr_type(g, ir_value_type(g, v))));
    }
    json_object_set_new(o, "attrs", attrs);
    json_object_set_new(o, "outs", outs);
    json_object_set_new(o, "ins", ins);
    json_object_set_new(o, "weights", ws);
    IrLoc loc = ir_node_loc(g, n);
    if (loc.file) {
        char l[64];
        snprintf(l, sizeof l, ":%u:%u", loc.line, loc.col);
        IrStrBuf t;
        ir_strbuf_init(&t);
        ir_strbuf_puts(&t, ir_str(g, loc.file));
        ir_strbuf_puts(&t, l);
        if (t.data) json_object_set_new(o, "loc", json_string(t.data));
        ir_strbuf_free(&t);
    }
    return o;
}

/* {"boxes": {ID: {...}}, "groups": {CLUSTER_ID: {...}}, "report": {...}} as compact JSON
 * (jansson keeps insertion order, so the bytes are deterministic). */
static char *page_data(Ctx *c) {
    const IrGraph *g = c->g;
    json_t *root = json_object(), *boxes = json_object(), *groups = json_object();
    for (uint32_t i = 0; i < c->n_boxes; i++) {
        const Box *b = &c->boxes[i];
        json_t *o;
        if (b->node) {
            o = node_data(c, b);
        } else {
            o = json_object();
            const char *l = b->label.data ? b->label.data : "";
            json_object_set_new(o, "label", json_string(l));
            if (strncmp(b->id, "in_", 3) == 0) json_object_set_new(o, "io", json_string("input"));
            else if (strncmp(b->id, "out_", 4) == 0) json_object_set_new(o, "io", json_string("output"));
            else if ((int32_t)i != c->marker) json_object_set_new(o, "op", json_string("segment"));
        }
        if (b->has_err) json_object_set_new(o, "err", jerr(&b->err));
        if (b->first_div) json_object_set_new(o, "first_div", json_true());
        json_object_set_new(boxes, b->id, o);
    }
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        if (!c->cluster_of[n]) continue;
        json_t *o = node_data(c, &(Box){.node = n});
        VizNodeError e;
        if (c->opt->highlight && node_err(c, n, &e)) json_object_set_new(o, "err", jerr(&e));
        const char *fd = c->opt->highlight ? viz_highlight_first_divergence(c->opt->highlight) : NULL;
        if (fd && node_is_named(g, n, fd)) json_object_set_new(o, "first_div", json_true());
        json_object_set_new(groups, agget(c->cluster_of[n], "id"), o);
    }
    json_object_set_new(root, "boxes", boxes);
    json_object_set_new(root, "groups", groups);
    if (c->opt->highlight) {
        const VizHighlight *h = c->opt->highlight;
        json_t *r = json_object();
        json_object_set_new(r, "metric", json_string(viz_highlight_by_cosine(h) ? "1 - cosine" : "error"));
        if (viz_highlight_passed(h) >= 0) json_object_set_new(r, "pass", json_boolean(viz_highlight_passed(h)));
        if (viz_highlight_first_divergence(h)) json_object_set_new(r, "first_divergence", json_string(viz_highlight_first_divergence(h)));
        json_object_set_new(root, "report", r);
    }
    char *s = json_dumps(root, JSON_COMPACT | JSON_ESCAPE_SLASH | JSON_REAL_PRECISION(6));
    json_decref(root);
    return s;
}

static IrStatus emit(Ctx *c, GVC_t *gvc, IrStrBuf *out) {
    VizFormat f = c->opt->format;
    const char *gvfmt = f == VIZ_FORMAT_DOT ? "dot" : f == VIZ_FORMAT_PNG ? "png" : "svg";
    char *data = NULL;
    unsigned int len = 0;
    if (gvRenderData(gvc, c->root, gvfmt, &data, &len) != 0 || !data) {
        ir_diag_error(c->diag, "viz: Graphviz could not render format '%s'", gvfmt);
        return IR_EUNSUPPORTED;
    }
    IrStatus s = IR_OK;
    if (f == VIZ_FORMAT_DOT || f == VIZ_FORMAT_PNG) {
        ir_strbuf_append(out, data, len);
    } else {
        VizCssEntry *css = calloc(c->n_boxes + 1, sizeof *css);
        char **bufs = calloc(c->n_boxes + 1, sizeof *bufs);
        size_t n = 0;
        if (!css || !bufs) s = IR_ENOMEM;
        for (uint32_t i = 0; s == IR_OK && i < c->n_boxes; i++) {
            Box *b = &c->boxes[i];
            char cls[64];
            css_class_name(b->cls, cls, sizeof cls);
            const char *k = b->is_op ? cls : (int32_t)i == c->marker ? "elided" : "io";
            size_t need = strlen(k) + 32;
            bufs[n] = malloc(need);
            if (!bufs[n]) { s = IR_ENOMEM; break; }
            snprintf(bufs[n], need, "%s%s%s%s", k, b->fp8 ? " fp8" : "", b->first_div ? " first-divergence" : "",
                     b->has_err ? " has-error" : "");
            css[n].id = b->id;
            css[n].css = bufs[n];
            n++;
        }
        char *pd = s == IR_OK && f == VIZ_FORMAT_HTML ? page_data(c) : NULL;
        if (s == IR_OK && f == VIZ_FORMAT_HTML && !pd) s = IR_ENOMEM;
        if (s == IR_OK) {
            qsort(css, n, sizeof *css, cmp_css);
            s = viz_svg_postprocess(data, len, css, n, f == VIZ_FORMAT_HTML, pd, ir_graph_name(c->g), c->diag, out);
        } else {
            ir_diag_error(c->diag, "viz: out of memory");
        }
        free(pd);
        for (size_t i = 0; bufs && i < n; i++) free(bufs[i]);
        free(bufs);
        free(css);
    }
    gvFreeRenderData(data);
    if (s == IR_OK && out->failed) s = IR_ENOMEM;
    return s;
}

IrStatus viz_render(const IrGraph *g, const VizOptions *opt, IrDiag *diag, IrStrBuf *out, VizStats *stats) {
    if (!g || !opt || !out) return IR_EINVAL;
    if (opt->format == VIZ_FORMAT_UNKNOWN) {
        ir_diag_error(diag, "viz: unknown output format (use .svg, .dot, .png or .html)");
        return IR_EINVAL;
    }
    Ctx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.opt = opt;
    c.diag = diag;
    c.marker = -1;
    c.op_constant = ir_op_from_name("Constant", 8);
    uint32_t total = ir_graph_num_nodes(g);
    uint32_t above = opt->collapse_above ? opt->collapse_above : DEFAULT_COLLAPSE_ABOVE;
    c.collapse = opt->collapse == VIZ_COLLAPSE_ALWAYS || (opt->collapse == VIZ_COLLAPSE_AUTO && total > above);
    c.box_of = malloc((ir_graph_node_capacity(g) + 1) * sizeof *c.box_of);
    c.input_box = malloc((ir_graph_num_inputs(g) + 1) * sizeof *c.input_box);
    c.cluster_of = calloc(ir_graph_node_capacity(g) + 1, sizeof *c.cluster_of);
    pthread_once(&gvc_once, gvc_init);
    pthread_mutex_lock(&gvc_lock);
    GVC_t *gvc = gvc_shared;
    IrStatus s = IR_OK;
    if (!c.box_of || !c.input_box || !c.cluster_of || !gvc) { s = IR_ENOMEM; goto done; }
    for (uint32_t i = 0; i <= ir_graph_node_capacity(g); i++) c.box_of[i] = -1;
    const char *gname = ir_graph_name(g);
    Agdisc_t disc = {&AgMemDisc, &viz_id_disc, &AgIoDisc};
    c.root = agopen((char *)(gname && *gname ? gname : "graph"), Agdirected, &disc);
    if (!c.root) { s = IR_ENOMEM; goto done; }
    uint32_t top = count_top_items(&c);
    declare_attrs(&c, total > 500);
    draw_io(&c, true);
    if (c.collapse && top > above) draw_segments(&c, top);
    else draw_region(&c, IR_ROOT_REGION, c.root);
    draw_edges(&c);
    draw_io(&c, false);
    if (opt->highlight && (s = apply_highlight(&c)) != IR_OK) goto done;
    finish_boxes(&c);
    draw_legend(&c);
    if (c.failed) { ir_diag_error(diag, "viz: out of memory while building the graph"); s = IR_ENOMEM; goto done; }
    if (gvLayout(gvc, c.root, "dot") != 0) {
        ir_diag_error(diag, "viz: Graphviz layout failed");
        s = IR_EUNSUPPORTED;
        goto done;
    }
    s = emit(&c, gvc, out);
    gvFreeLayout(gvc, c.root);
    if (stats) {
        stats->boxes = c.op_boxes + (c.marker >= 0 ? 1 : 0);
        stats->io = ir_graph_num_inputs(g) + ir_graph_num_outputs(g);
        stats->clusters = c.clusters;
        stats->edges = c.edges;
        stats->elided = c.elided;
        stats->collapsed = c.collapse;
    }
done:
    if (s == IR_ENOMEM && diag && !diag->n_errors) ir_diag_error(diag, "viz: out of memory");
    if (c.root) agclose(c.root);
    pthread_mutex_unlock(&gvc_lock);
    for (uint32_t i = 0; i < c.n_boxes; i++) ir_strbuf_free(&c.boxes[i].label);
    free(c.boxes);
    for (uint32_t i = 0; i < c.pool_len; i++) free(c.pool[i]);
    free(c.pool);
    free(c.ids);
    free(c.box_of);
    free(c.cluster_of);
    free(c.input_box);
    return s;
}

VizFormat viz_format_from_path(const char *path) {
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot) return VIZ_FORMAT_UNKNOWN;
    if (strcmp(dot, ".svg") == 0) return VIZ_FORMAT_SVG;
    if (strcmp(dot, ".dot") == 0 || strcmp(dot, ".gv") == 0) return VIZ_FORMAT_DOT;
    if (strcmp(dot, ".png") == 0) return VIZ_FORMAT_PNG;
    if (strcmp(dot, ".html") == 0 || strcmp(dot, ".htm") == 0) return VIZ_FORMAT_HTML;
    return VIZ_FORMAT_UNKNOWN;
}

/* ONNX export: an IrGraph becomes a ModelProto (ir_version 8, default domain at opset 17, the
 * IR's semantics), written atomically.
 *
 * Graph constants become initializers (raw_data), regions become GRAPH attributes named after
 * the op's regions, irtool's own ops go to domain "irtool". What ONNX has no field for (node
 * locations and provenance, symbol order, constraints, dims that are expressions, the graph's
 * own opset list) travels in doc strings and metadata as onnx_internal.h documents, so the
 * importer gives back a graph that prints exactly like this one. The protobuf structs borrow
 * names and weight bytes from the graph; only glue is allocated, into one list freed at the end.
 */
#include "ir_internal.h"
#include "onnx_internal.h"

#include "onnx.pb-c.h"

typedef struct Ex {
    const IrGraph *g;
    IrDiag *diag;
    void **blocks;
    uint32_t n_blocks, cap_blocks;
    bool oom;
    bool irtool_ops;
    bool training_ops; /* ops of ai.onnx.preview.training */
    uint32_t *out_mark; /* per value: the region whose outputs list it (value_info skips it) */
} Ex;

static void *ex_alloc(Ex *E, size_t n) {
    if (E->oom) return NULL;
    if (E->n_blocks == E->cap_blocks) {
        uint32_t nc = E->cap_blocks ? E->cap_blocks * 2 : 256;
        void **p = realloc(E->blocks, nc * sizeof *p);
        if (!p) {
            E->oom = true;
            return NULL;
        }
        E->blocks = p;
        E->cap_blocks = nc;
    }
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        E->oom = true;
        return NULL;
    }
    E->blocks[E->n_blocks++] = p;
    return p;
}

static void *ex_init(Ex *E, size_t n, const void *init) {
    void *p = ex_alloc(E, n);
    if (p) memcpy(p, init, n);
    return p;
}

/* A protobuf-c message, initialized with its INIT macro. */
#define EX_NEW(E, T, INIT) ((T *)ex_init(E, sizeof(T), &(T)INIT))

static char *ex_strdup(Ex *E, const char *s, size_t n) {
    char *d = ex_alloc(E, n + 1);
    if (d) memcpy(d, s, n);
    return d;
}

static char *ex_buf(Ex *E, IrStrBuf *b) {
    char *s = b->failed ? NULL : ex_strdup(E, b->data ? b->data : "", b->len);
    if (b->failed) E->oom = true;
    ir_strbuf_free(b);
    return s;
}

/* Graph strings are stable while exporting (nothing is interned), so they are borrowed. */
static char *gstr(const char *s) { return (char *)s; }

/* `\` and newline escaped, for `key=value` doc lines. */
static void put_escaped(IrStrBuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '\\') ir_strbuf_puts(b, "\\\\");
        else if (*s == '\n') ir_strbuf_puts(b, "\\n");
        else ir_strbuf_putc(b, *s);
    }
}

/* ---- types and tensors --------------------------------------------------------------------- */

static Onnx__TypeProto *ex_type(Ex *E, IrTypeId t, bool *needs_text) {
    const IrGraph *g = E->g;
    *needs_text = false;
    if (!t) return NULL;
    IrTypeKind kind = ir_type_kind(g, t);
    if (kind != IR_TYPE_TENSOR) {
        /* sequence_type / optional_type around the element's TypeProto (an unknown element
         * leaves elem_type unset) */
        Onnx__TypeProto *tp = EX_NEW(E, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
        if (!tp) return NULL;
        Onnx__TypeProto *et = NULL;
        IrTypeId e = ir_type_elem(g, t);
        if (e && !(et = ex_type(E, e, needs_text))) return NULL;
        if (kind == IR_TYPE_SEQ) {
            Onnx__TypeProto__Sequence *sq = EX_NEW(E, Onnx__TypeProto__Sequence, ONNX__TYPE_PROTO__SEQUENCE__INIT);
            if (!sq) return NULL;
            sq->elem_type = et;
            tp->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE;
            tp->sequence_type = sq;
        } else {
            Onnx__TypeProto__Optional *op = EX_NEW(E, Onnx__TypeProto__Optional, ONNX__TYPE_PROTO__OPTIONAL__INIT);
            if (!op) return NULL;
            op->elem_type = et;
            tp->value_case = ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE;
            tp->optional_type = op;
        }
        return tp;
    }
    Onnx__TypeProto *tp = EX_NEW(E, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    Onnx__TypeProto__Tensor *tt = EX_NEW(E, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
    if (!tp || !tt) return NULL;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = ir_dtype_onnx(ir_type_dtype(g, t));
    uint32_t rank = ir_type_rank(g, t);
    if (rank == IR_RANK_UNKNOWN) return tp;
    Onnx__TensorShapeProto *sp = EX_NEW(E, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
    if (!sp) return NULL;
    tt->shape = sp;
    sp->n_dim = rank;
    sp->dim = ex_alloc(E, (rank ? rank : 1) * sizeof *sp->dim);
    if (!sp->dim) return NULL;
    const IrExprId *dims = ir_type_dims(g, t);
    for (uint32_t i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d =
            EX_NEW(E, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
        if (!d) return NULL;
        sp->dim[i] = d;
        int64_t v;
        IrExprKind k = ir_expr_kind(g, dims[i]);
        if (ir_expr_is_const(g, dims[i], &v) && v >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = v;
        } else if (k == IR_EXPR_SYM) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = gstr(ir_sym_name(g, ir_expr_sym_id(g, dims[i])));
        } else if (k != IR_EXPR_UNKNOWN) {
            *needs_text = true; /* an expression: ONNX can only leave the dim unknown */
        }
    }
    return tp;
}

static Onnx__ValueInfoProto *ex_value_info(Ex *E, IrValueId v) {
    Onnx__ValueInfoProto *vi = EX_NEW(E, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
    if (!vi) return NULL;
    vi->name = gstr(v ? ir_value_name(E->g, v) : "");
    bool text;
    IrTypeId t = v ? ir_value_type(E->g, v) : 0;
    vi->type = ex_type(E, t, &text);
    if (text) {
        IrStrBuf b;
        ir_strbuf_init(&b);
        ir_strbuf_puts(&b, IR_ONNX_DOC_TYPE);
        ir_type_print(E->g, t, &b);
        vi->doc_string = ex_buf(E, &b);
    }
    return vi;
}

static Onnx__TensorProto *ex_tensor(Ex *E, IrConstId c, const char *name) {
    const IrGraph *g = E->g;
    Onnx__TensorProto *tp = EX_NEW(E, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    if (!tp) return NULL;
    IrTypeId t = ir_const_type(g, c);
    uint32_t rank = ir_type_rank(g, t);
    if (rank == IR_RANK_UNKNOWN) rank = 0;
    tp->name = name ? gstr(name) : NULL;
    tp->has_data_type = 1;
    tp->data_type = ir_dtype_onnx(ir_type_dtype(g, t));
    tp->n_dims = rank;
    tp->dims = ex_alloc(E, (rank ? rank : 1) * sizeof *tp->dims);
    if (!tp->dims) return NULL;
    for (uint32_t i = 0; i < rank; i++) {
        int64_t v = 0;
        ir_expr_is_const(g, ir_type_dims(g, t)[i], &v);
        tp->dims[i] = v;
    }
    if (ir_type_dtype(g, t) == IR_DTYPE_STRING) { /* string_data: one entry per element */
        int64_t numel = 0;
        ir_type_numel(g, t, &numel);
        tp->n_string_data = (size_t)numel;
        tp->string_data = ex_alloc(E, ((size_t)numel + 1) * sizeof *tp->string_data);
        if (!tp->string_data) return NULL;
        for (int64_t i = 0; i < numel; i++) {
            IrStringElem e = ir_string_blob_at(ir_const_data(g, c), (size_t)numel, (size_t)i);
            tp->string_data[i].len = e.len;
            tp->string_data[i].data = (uint8_t *)e.data;
        }
        return tp;
    }
    tp->has_raw_data = 1;
    tp->raw_data.len = ir_const_nbytes(g, c);
    tp->raw_data.data = (uint8_t *)ir_const_data(g, c);
    return tp;
}

/* ---- nodes and graphs ---------------------------------------------------------------------- */

static Onnx__GraphProto *ex_graph(Ex *E, IrRegionId r, const char *name);

static bool ex_attr(Ex *E, IrNodeId n, uint32_t i, Onnx__AttributeProto *a) {
    const IrGraph *g = E->g;
    IrAttrValue v = ir_node_attr_at(g, n, i);
    a->name = gstr(ir_str(g, ir_node_attr_name(g, n, i)));
    a->has_type = 1;
    switch (v.kind) {
    case IR_ATTR_INT:
    case IR_ATTR_DTYPE:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a->has_i = 1;
        a->i = v.kind == IR_ATTR_DTYPE ? ir_dtype_onnx((IrDType)v.i) : v.i;
        break;
    case IR_ATTR_FLOAT:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
        a->has_f = 1;
        a->f = (float)v.f;
        break;
    case IR_ATTR_STRING: {
        const char *s = ir_str(g, v.s);
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        a->has_s = 1;
        a->s.len = strlen(s);
        a->s.data = (uint8_t *)s;
        break;
    }
    case IR_ATTR_INTS:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        a->n_ints = v.count;
        a->ints = (int64_t *)v.ints;
        break;
    case IR_ATTR_FLOATS:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
        a->n_floats = v.count;
        a->floats = ex_alloc(E, (v.count ? v.count : 1) * sizeof(float));
        if (!a->floats) return false;
        for (uint32_t k = 0; k < v.count; k++) a->floats[k] = (float)v.floats[k];
        break;
    case IR_ATTR_STRINGS:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
        a->n_strings = v.count;
        a->strings = ex_alloc(E, (v.count ? v.count : 1) * sizeof *a->strings);
        if (!a->strings) return false;
        for (uint32_t k = 0; k < v.count; k++) {
            const char *s = ir_str(g, v.strs[k]);
            a->strings[k].len = strlen(s);
            a->strings[k].data = (uint8_t *)s;
        }
        break;
    case IR_ATTR_TENSOR:
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
        a->t = ex_tensor(E, v.tensor, NULL);
        return a->t != NULL;
    default: return false;
    }
    return true;
}

/* irtool.loc / irtool.from lines, or NULL when the node has neither. */
static char *ex_node_doc(Ex *E, IrNodeId n) {
    const IrGraph *g = E->g;
    IrLoc loc = ir_node_loc(g, n);
    uint32_t np = ir_node_num_provenance(g, n);
    if (!loc.file && !np) return NULL;
    IrStrBuf b;
    ir_strbuf_init(&b);
    if (loc.file) {
        ir_strbuf_printf(&b, "%s%u:%u:", IR_ONNX_DOC_LOC, loc.line, loc.col);
        put_escaped(&b, ir_str(g, loc.file));
        ir_strbuf_putc(&b, '\n');
    }
    for (uint32_t i = 0; i < np; i++) {
        ir_strbuf_puts(&b, IR_ONNX_DOC_FROM);
        put_escaped(&b, ir_str(g, ir_node_provenance(g, n, i)));
        ir_strbuf_putc(&b, '\n');
    }
    return ex_buf(E, &b);
}

static Onnx__NodeProto *ex_node(Ex *E, IrNodeId n) {
    const IrGraph *g = E->g;
    Onnx__NodeProto *np = EX_NEW(E, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
    if (!np) return NULL;
    IrOp op = ir_node_op(g, n);
    const char *name = ir_op_name(op);
    if (strncmp(name, "irtool.", 7) == 0) {
        np->op_type = gstr(name + 7);
        np->domain = IR_ONNX_IRTOOL_DOMAIN;
        E->irtool_ops = true;
    } else if (strncmp(name, IR_ONNX_TRAINING_DOMAIN ".", sizeof IR_ONNX_TRAINING_DOMAIN) == 0) {
        np->op_type = gstr(name + sizeof IR_ONNX_TRAINING_DOMAIN);
        np->domain = IR_ONNX_TRAINING_DOMAIN;
        E->training_ops = true;
    } else {
        np->op_type = gstr(name);
    }
    if (*ir_node_name(g, n)) np->name = gstr(ir_node_name(g, n));
    np->n_input = ir_node_num_operands(g, n);
    np->input = ex_alloc(E, (np->n_input + 1) * sizeof *np->input);
    np->n_output = ir_node_num_results(g, n);
    np->output = ex_alloc(E, (np->n_output + 1) * sizeof *np->output);
    if (!np->input || !np->output) return NULL;
    for (size_t i = 0; i < np->n_input; i++) {
        IrValueId v = ir_node_operand(g, n, (uint32_t)i);
        np->input[i] = gstr(v ? ir_value_name(g, v) : "");
    }
    for (size_t i = 0; i < np->n_output; i++) {
        IrValueId v = ir_node_result(g, n, (uint32_t)i);
        np->output[i] = gstr(v ? ir_value_name(g, v) : "");
    }
    uint32_t na = ir_node_num_attrs(g, n), nr = ir_node_num_regions(g, n);
    /* an Optional without operand: ONNX's `type` attribute carries what our IR keeps as the
     * result's type */
    IrValueId opt_res = op == IR_OP_OPTIONAL && !(np->n_input && ir_node_operand(g, n, 0)) && np->n_output
                            ? ir_node_result(g, n, 0)
                            : 0;
    IrTypeId opt_elem = opt_res ? ir_type_elem(g, ir_value_type(g, opt_res)) : 0;
    np->n_attribute = na + nr + (opt_elem ? 1 : 0);
    np->attribute = ex_alloc(E, (na + nr + 2) * sizeof *np->attribute);
    if (!np->attribute) return NULL;
    if (opt_elem) {
        Onnx__AttributeProto *a = EX_NEW(E, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
        bool text;
        if (!a) return NULL;
        a->name = gstr("type");
        a->has_type = 1;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO;
        a->tp = ex_type(E, opt_elem, &text);
        if (!a->tp) return NULL;
        np->attribute[na + nr] = a;
    }
    for (uint32_t i = 0; i < na; i++) {
        Onnx__AttributeProto *a = EX_NEW(E, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
        if (!a || !ex_attr(E, n, i, a)) return NULL;
        np->attribute[i] = a;
    }
    for (uint32_t i = 0; i < nr; i++) {
        Onnx__AttributeProto *a = EX_NEW(E, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
        char rn[64];
        if (!a || !ir_op_region_name(op, i, rn, sizeof rn)) return NULL;
        a->name = ex_strdup(E, rn, strlen(rn));
        a->has_type = 1;
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
        a->g = ex_graph(E, ir_node_region_at(g, n, i), a->name);
        if (!a->name || !a->g) return NULL;
        np->attribute[na + i] = a;
    }
    np->doc_string = ex_node_doc(E, n);
    return E->oom ? NULL : np;
}

static Onnx__GraphProto *ex_graph(Ex *E, IrRegionId r, const char *name) {
    const IrGraph *g = E->g;
    Onnx__GraphProto *gp = EX_NEW(E, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
    if (!gp) return NULL;
    gp->name = name ? gstr(name) : NULL;
    size_t nn = 0, nvi = 0;
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n)) nn++;
    uint32_t nouts = ir_region_num_outputs(g, r);
    for (uint32_t i = 0; i < nouts; i++) E->out_mark[ir_region_output(g, r, i)] = r;
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n))
        for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
            IrValueId v = ir_node_result(g, n, i);
            if (v && ir_value_type(g, v) && E->out_mark[v] != r) nvi++;
        }
    gp->n_node = nn;
    gp->node = ex_alloc(E, (nn + 1) * sizeof *gp->node);
    gp->n_value_info = nvi;
    gp->value_info = ex_alloc(E, (nvi + 1) * sizeof *gp->value_info);
    gp->n_input = ir_region_num_args(g, r);
    gp->input = ex_alloc(E, (gp->n_input + 1) * sizeof *gp->input);
    gp->n_output = nouts;
    gp->output = ex_alloc(E, (nouts + 1) * sizeof *gp->output);
    if (!gp->node || !gp->value_info || !gp->input || !gp->output) return NULL;
    /* value_info first: nested regions reuse out_mark */
    size_t k = 0;
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n))
        for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
            IrValueId v = ir_node_result(g, n, i);
            if (v && ir_value_type(g, v) && E->out_mark[v] != r)
                if (!(gp->value_info[k++] = ex_value_info(E, v))) return NULL;
        }
    for (size_t i = 0; i < gp->n_input; i++)
        if (!(gp->input[i] = ex_value_info(E, ir_region_arg(g, r, (uint32_t)i)))) return NULL;
    for (uint32_t i = 0; i < nouts; i++)
        if (!(gp->output[i] = ex_value_info(E, ir_region_output(g, r, i)))) return NULL;
    k = 0;
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n))
        if (!(gp->node[k++] = ex_node(E, n))) return NULL;
    if (r == IR_ROOT_REGION) {
        uint32_t nc = ir_graph_num_const_values(g);
        gp->n_initializer = nc;
        gp->initializer = ex_alloc(E, (nc + 1) * sizeof *gp->initializer);
        if (!gp->initializer) return NULL;
        for (uint32_t i = 0; i < nc; i++) {
            IrValueId v = ir_graph_const_value(g, i);
            if (!(gp->initializer[i] = ex_tensor(E, ir_value_const(g, v), ir_value_name(g, v)))) return NULL;
        }
    }
    return gp;
}

/* ---- the model ----------------------------------------------------------------------------- */

static Onnx__StringStringEntryProto *ex_kv(Ex *E, const char *k, char *v) {
    Onnx__StringStringEntryProto *e = EX_NEW(E, Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
    if (e) {
        e->key = gstr(k);
        e->value = v;
    }
    return e;
}

static Onnx__OperatorSetIdProto *ex_opset(Ex *E, const char *domain, int64_t version) {
    Onnx__OperatorSetIdProto *o = EX_NEW(E, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
    if (o) {
        o->domain = gstr(domain);
        o->has_version = 1;
        o->version = version;
    }
    return o;
}

static bool ex_header(Ex *E, Onnx__ModelProto *m) {
    const IrGraph *g = E->g;
    uint32_t nops = ir_graph_num_opsets(g), nmeta = ir_graph_num_meta(g);
    /* opset_import: the default domain at 17 (the IR's semantics), others as recorded */
    m->opset_import = ex_alloc(E, (nops + 3) * sizeof *m->opset_import);
    if (!m->opset_import) return false;
    m->opset_import[m->n_opset_import++] = ex_opset(E, "", IR_ONNX_OPSET_MAX);
    bool have_irtool = false, have_training = false;
    IrStrBuf own;
    ir_strbuf_init(&own);
    for (uint32_t i = 0; i < nops; i++) {
        const char *d;
        int64_t v;
        ir_graph_opset_at(g, i, &d, &v);
        ir_strbuf_printf(&own, "%s%s=%lld", i ? ";" : "", d, (long long)v);
        if (!*d || strcmp(d, "ai.onnx") == 0) continue;
        have_irtool |= strcmp(d, IR_ONNX_IRTOOL_DOMAIN) == 0;
        have_training |= strcmp(d, IR_ONNX_TRAINING_DOMAIN) == 0;
        m->opset_import[m->n_opset_import++] = ex_opset(E, d, v);
    }
    if (E->irtool_ops && !have_irtool) m->opset_import[m->n_opset_import++] = ex_opset(E, IR_ONNX_IRTOOL_DOMAIN, 1);
    if (E->training_ops && !have_training) m->opset_import[m->n_opset_import++] = ex_opset(E, IR_ONNX_TRAINING_DOMAIN, 1);
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (!m->opset_import[i]) return false;
    /* metadata: the graph's meta in order, then irtool's keys */
    m->metadata_props = ex_alloc(E, (nmeta + 4) * sizeof *m->metadata_props);
    if (!m->metadata_props) return false;
    m->producer_name = "irtool";
    m->producer_version = IRTOOL_VERSION_STRING;
    for (uint32_t i = 0; i < nmeta; i++) {
        const char *k, *v;
        ir_graph_meta_at(g, i, &k, &v);
        if (strcmp(k, IR_ONNX_META_PRODUCER_NAME) == 0) m->producer_name = gstr(v);
        if (strcmp(k, IR_ONNX_META_PRODUCER_VERSION) == 0) m->producer_version = gstr(v);
        m->metadata_props[m->n_metadata_props++] = ex_kv(E, k, gstr(v));
    }
    m->metadata_props[m->n_metadata_props++] = ex_kv(E, IR_ONNX_META_OPSETS, ex_buf(E, &own));
    uint32_t nsyms = ir_graph_num_syms(g), ncon = ir_graph_num_constraints(g);
    if (nsyms) {
        IrStrBuf b;
        ir_strbuf_init(&b);
        for (uint32_t s = 1; s <= nsyms; s++) ir_strbuf_printf(&b, "%s%s", s > 1 ? "," : "", ir_sym_name(g, s));
        m->metadata_props[m->n_metadata_props++] = ex_kv(E, IR_ONNX_META_SYMBOLS, ex_buf(E, &b));
    }
    if (ncon) {
        IrStrBuf b;
        ir_strbuf_init(&b);
        for (uint32_t i = 0; i < ncon; i++) {
            IrConstraint c = ir_graph_constraint(g, i);
            switch (c.kind) {
            case IR_CONSTRAINT_RANGE: ir_strbuf_printf(&b, "range %lld %lld ", (long long)c.lo, (long long)c.hi); break;
            case IR_CONSTRAINT_DIVISIBLE: ir_strbuf_printf(&b, "divisible %lld ", (long long)c.lo); break;
            case IR_CONSTRAINT_EQ: ir_strbuf_puts(&b, "eq "); break;
            }
            ir_expr_print(g, c.a, &b);
            if (c.kind == IR_CONSTRAINT_EQ) {
                ir_strbuf_puts(&b, " == ");
                ir_expr_print(g, c.b, &b);
            }
            ir_strbuf_putc(&b, '\n');
        }
        m->metadata_props[m->n_metadata_props++] = ex_kv(E, IR_ONNX_META_CONSTRAINTS, ex_buf(E, &b));
    }
    for (size_t i = 0; i < m->n_metadata_props; i++)
        if (!m->metadata_props[i] || !m->metadata_props[i]->value) return false;
    return true;
}

IrStatus ir_onnx_export(const IrGraph *g, const char *path, IrDiag *diag) {
    if (ir_graph_status(g) != IR_OK) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "cannot export an incomplete graph: %s",
                       ir_status_name(ir_graph_status(g)));
        return ir_graph_status(g);
    }
    Ex E = {.g = g, .diag = diag};
    IrStatus s = IR_OK;
    uint8_t *buf = NULL;
    E.out_mark = calloc((size_t)ir_graph_num_values(g) + 1, sizeof *E.out_mark);
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.has_ir_version = 1;
    m.ir_version = 8;
    if (E.out_mark) {
        const char *name = ir_graph_name(g);
        m.graph = ex_graph(&E, IR_ROOT_REGION, *name ? name : "main");
    }
    if (!E.out_mark || !m.graph || !ex_header(&E, &m) || E.oom) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "out of memory while exporting to ONNX");
        s = IR_ENOMEM;
        goto out;
    }
    size_t size = onnx__model_proto__get_packed_size(&m);
    if (size > (size_t)INT32_MAX) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0,
                       "the model is %zu bytes; a single ONNX file is limited to 2 GiB", size);
        s = IR_EUNSUPPORTED;
        goto out;
    }
    buf = malloc(size ? size : 1);
    if (!buf) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "out of memory while exporting to ONNX");
        s = IR_ENOMEM;
        goto out;
    }
    onnx__model_proto__pack(&m, buf);
    s = ir_write_file_atomic(path, buf, size, diag);
out:
    free(buf);
    free(E.out_mark);
    for (uint32_t i = 0; i < E.n_blocks; i++) free(E.blocks[i]);
    free(E.blocks);
    return s;
}

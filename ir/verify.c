/* The verifier: structural and semantic checks over a whole graph.
 *
 * One pass in program order with a visibility mark per value implements SSA and region
 * scoping: a value is usable after its definition in its own region and in regions nested
 * below it, never outside. Every error is reported (up to a cap) at the node's location.
 */
#include "infer.h"

typedef struct Verifier {
    IrGraph *g;
    IrDiag *diag;
    uint8_t *visible; /* per value: 1 while in scope */
    uint8_t *defined; /* per value: ever defined (catches a second definition) */
    uint32_t errors, cap;
    bool check_types;
    bool truncated; /* errors past the cap were suppressed or checking stopped early */
} Verifier;

void ir_diag_at_node(IrDiag *d, const IrGraph *g, IrNodeId n, IrSeverity sev, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    uint32_t line = 0, col = 0;
    const char *file = NULL;
    const char *src = NULL;
    size_t src_len = 0;
    if (n) ir_node_text_pos(g, n, &line, &col);
    if (line) {
        file = g->source_file;
        /* point at the source line when the caller kept the text */
        if (g->source_text) {
            const char *p = g->source_text, *end = p + g->source_len;
            for (uint32_t l = 1; l < line && p < end; p++)
                if (*p == '\n') l++;
            const char *e = p;
            while (e < end && *e != '\n') e++;
            src = p;
            src_len = (size_t)(e - p);
        }
    } else if (n && ir_node_loc(g, n).file) {
        IrLoc loc = ir_node_loc(g, n);
        file = ir_str(g, loc.file);
        line = loc.line;
        col = loc.col;
    } else {
        file = g->source_file;
    }
    const char *nm = n ? ir_node_name(g, n) : "";
    if (n && *nm)
        ir_diag_report(d, sev, file, line, col, src, src_len, "%s (node '%s')", msg, nm);
    else
        ir_diag_report(d, sev, file, line, col, src, src_len, "%s", msg);
}

#define VERR(V, n, ...)                                                                        \
    do {                                                                                       \
        if ((V)->errors++ < (V)->cap)                                                          \
            ir_diag_at_node((V)->diag, (V)->g, (n), IR_SEV_ERROR, __VA_ARGS__);               \
        else                                                                                   \
            (V)->truncated = true;                                                             \
    } while (0)

static bool attr_kind_ok(IrAttrKind spec, IrAttrKind have) {
    return spec == have;
}

/* One pass over the op's schema matches every attribute to its spec; errors come in attribute
 * order (unknown names, wrong kinds), then the missing required ones in schema order. */
static void verify_attrs(Verifier *V, IrNodeId n) {
    IrGraph *g = V->g;
    IrOp op = ir_node_op(g, n);
    uint32_t na = ir_node_num_attrs(g, n);
    IrAttrKind small[32], *want = na <= 32 ? small : malloc(na * sizeof *want);
    if (!want) return;
    for (uint32_t i = 0; i < na; i++) want[i] = IR_ATTR_NONE;
    char missing[512];
    size_t nmissing = 0;
    missing[0] = 0;
    IrAttrSpecIter it;
    const char *sn;
    size_t sl;
    IrAttrSpec spec;
    ir_op_attr_spec_iter(op, &it);
    while (ir_op_attr_spec_next(&it, &sn, &sl, &spec)) {
        bool found = false;
        for (uint32_t i = 0; i < na && !found; i++) {
            const char *nm = ir_str(g, ir_node_attr_name(g, n, i));
            if (strncmp(nm, sn, sl) == 0 && nm[sl] == 0) {
                want[i] = spec.kind;
                found = true;
            }
        }
        if (!found && spec.required && nmissing + sl + 2 < sizeof missing) {
            memcpy(missing + nmissing, sn, sl);
            nmissing += sl;
            missing[nmissing++] = 0;
        }
    }
    for (uint32_t i = 0; i < na; i++) {
        const char *nm = ir_str(g, ir_node_attr_name(g, n, i));
        IrAttrValue a = ir_node_attr_at(g, n, i);
        if (want[i] == IR_ATTR_NONE) {
            VERR(V, n, "%s has no attribute '%s'", ir_op_name(op), nm);
            continue;
        }
        if (!attr_kind_ok(want[i], a.kind)) {
            VERR(V, n, "attribute '%s' of %s must be %s, got %s", nm, ir_op_name(op),
                 ir_attr_kind_name(want[i]), ir_attr_kind_name(a.kind));
            continue;
        }
        if (a.kind == IR_ATTR_DTYPE && (a.i <= IR_DTYPE_NONE || a.i >= IR_DTYPE_COUNT))
            VERR(V, n, "attribute '%s' is not a valid dtype", nm);
        if (a.kind == IR_ATTR_TENSOR && (a.tensor == 0 || a.tensor > ir_graph_num_consts(g)))
            VERR(V, n, "attribute '%s' refers to a missing tensor", nm);
    }
    for (size_t k = 0; k < nmissing; k += strlen(missing + k) + 1)
        VERR(V, n, "%s requires attribute '%s'", ir_op_name(op), missing + k);
    if (want != small) free(want);
}

static void describe_type(const IrGraph *g, IrTypeId t, char *buf, size_t cap) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_type_print(g, t, &b);
    snprintf(buf, cap, "%s", b.data ? b.data : "?");
    ir_strbuf_free(&b);
}

static void verify_types(Verifier *V, IrNodeId n) {
    IrGraph *g = V->g;
    uint32_t nr = ir_node_num_results(g, n);
    IrTypeId small[16], *inf = nr <= 16 ? small : malloc(nr * sizeof *inf);
    if (!inf) return;
    /* count errors from the rule through the same sink; past the cap, through a silent one */
    bool over = V->errors >= V->cap || !V->diag;
    IrDiag sub;
    if (over) ir_diag_init(&sub, NULL, NULL);
    else sub = *V->diag;
    uint32_t before = sub.n_errors;
    IrStatus s = ir__node_infer_types(g, n, &sub, inf, NULL, false);
    if (!over) V->diag->n_errors = sub.n_errors;
    if (s != IR_OK) {
        V->errors += sub.n_errors - before ? sub.n_errors - before : 1;
        if (over) V->truncated = true;
        goto out;
    }
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId v = ir_node_result(g, n, i);
        if (!v || !inf[i]) continue;
        IrTypeId decl = ir_value_type(g, v);
        if (!decl || decl == inf[i]) continue;
        bool bad = !ir_type_compatible(g, decl, inf[i]);
        if (bad) {
            char d1[256], d2[256];
            describe_type(g, decl, d1, sizeof d1);
            describe_type(g, inf[i], d2, sizeof d2);
            VERR(V, n, "result %%%s is declared %s but %s gives %s", ir_value_name(g, v), d1,
                 ir_op_name(ir_node_op(g, n)), d2);
        }
    }
out:
    if (inf != small) free(inf);
}

static void define(Verifier *V, IrNodeId at, IrValueId v) {
    if (V->defined[v]) {
        VERR(V, at, "value %%%s is defined more than once", ir_value_name(V->g, v));
        return;
    }
    V->defined[v] = 1;
    V->visible[v] = 1;
}

static void verify_region(Verifier *V, IrRegionId r);

static void count_range(char *buf, size_t cap, unsigned lo, unsigned hi) {
    if (hi == IR_VARIADIC)
        snprintf(buf, cap, "at least %u", lo);
    else if (lo == hi)
        snprintf(buf, cap, "%u", lo);
    else
        snprintf(buf, cap, "%u to %u", lo, hi);
}

static void verify_node(Verifier *V, IrNodeId n) {
    IrGraph *g = V->g;
    IrOp op = ir_node_op(g, n);
    const IrOpInfo *info = ir_op_info(op);
    if (op <= IR_OP_NONE || op >= IR_OP_COUNT) {
        VERR(V, n, "invalid op code %d", (int)op);
        return;
    }
    uint32_t no = ir_node_num_operands(g, n), nr = ir_node_num_results(g, n);
    if (no < info->min_inputs || (info->max_inputs != IR_VARIADIC && no > info->max_inputs)) {
        char range[48];
        count_range(range, sizeof range, info->min_inputs, info->max_inputs);
        VERR(V, n, "%s takes %s operands, got %u", info->name, range, no);
    }
    if (nr < info->min_outputs || (info->max_outputs != IR_VARIADIC && nr > info->max_outputs)) {
        char range[48];
        count_range(range, sizeof range, info->min_outputs, info->max_outputs);
        VERR(V, n, "%s has %s results, got %u", info->name, range, nr);
    }
    if (ir_node_num_regions(g, n) != ir_op_num_regions(op))
        VERR(V, n, "%s needs %u regions, has %u", info->name, ir_op_num_regions(op), ir_node_num_regions(g, n));
    for (uint32_t i = 0; i < no; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v) {
            if (i < info->min_inputs)
                VERR(V, n, "required operand %u of %s is missing", i, info->name);
            continue;
        }
        if (v > ir_graph_num_values(g)) {
            VERR(V, n, "operand %u refers to a value that does not exist", i);
            continue;
        }
        if (!V->visible[v])
            VERR(V, n, "operand %%%s is used before its definition or outside its scope",
                 ir_value_name(g, v));
    }
    uint32_t errors_before_attrs = V->errors;
    verify_attrs(V, n);
    /* type rules read attributes by their schema kind: never run one on mistyped attributes */
    bool attrs_ok = V->errors == errors_before_attrs;
    for (uint32_t i = 0; i < ir_node_num_regions(g, n); i++) {
        IrRegionId sub = ir_node_region_at(g, n, i);
        if (ir_region_parent(g, sub) != n) {
            VERR(V, n, "region %u does not belong to this node", i);
            continue;
        }
        verify_region(V, sub);
    }
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId v = ir_node_result(g, n, i);
        if (!v) continue;
        if (v > ir_graph_num_values(g) || ir_value_kind(g, v) != IR_VALUE_RESULT ||
            ir_value_def_node(g, v) != n || ir_value_def_index(g, v) != i) {
            VERR(V, n, "result %u is not linked to this node", i);
            continue;
        }
        define(V, n, v);
    }
    if (V->check_types && attrs_ok) verify_types(V, n);
}

static void hide_region(Verifier *V, IrRegionId r) {
    IrGraph *g = V->g;
    for (uint32_t i = 0; i < ir_region_num_args(g, r); i++) V->visible[ir_region_arg(g, r, i)] = 0;
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n))
        for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
            IrValueId v = ir_node_result(g, n, i);
            if (v && v <= ir_graph_num_values(g)) V->visible[v] = 0;
        }
}

static void verify_region(Verifier *V, IrRegionId r) {
    IrGraph *g = V->g;
    IrNodeId parent = ir_region_parent(g, r);
    for (uint32_t i = 0; i < ir_region_num_args(g, r); i++) {
        IrValueId v = ir_region_arg(g, r, i);
        if (ir_value_kind(g, v) != IR_VALUE_ARG || ir_value_def_region(g, v) != r) {
            VERR(V, parent, "region argument %u is not linked to its region", i);
            continue;
        }
        define(V, parent, v);
    }
    uint32_t count = 0;
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n)) {
        if (V->errors >= V->cap) {
            V->truncated = true;
            return;
        }
        if (ir_node_region(g, n) != r || !ir_node_alive(g, n)) {
            VERR(V, parent, "node list of a region is corrupt");
            return;
        }
        if (++count > ir_graph_node_capacity(g)) {
            VERR(V, parent, "node list of a region has a cycle");
            return;
        }
        verify_node(V, n);
    }
    for (uint32_t i = 0; i < ir_region_num_outputs(g, r); i++) {
        IrValueId v = ir_region_output(g, r, i);
        if (!v || v > ir_graph_num_values(g)) {
            VERR(V, parent, "%s output %u is not defined", parent ? "region" : "graph", i);
            continue;
        }
        if (!V->visible[v])
            VERR(V, parent, "%s output %%%s is not defined in scope", parent ? "region" : "graph",
                 ir_value_name(g, v));
    }
    if (parent) hide_region(V, r);
}

IrStatus ir_verify_ex(IrGraph *g, const IrVerifyOptions *opt, IrDiag *diag) {
    if (g->status) {
        ir_diag_error(diag, "graph is incomplete: %s", ir_status_name(g->status));
        return g->status;
    }
    Verifier V = {0};
    V.g = g;
    V.diag = diag;
    V.cap = opt && opt->max_errors ? opt->max_errors : 20;
    V.check_types = opt ? opt->check_types : true;
    uint32_t nv = ir_graph_num_values(g) + 1;
    V.visible = calloc(nv, 1);
    V.defined = calloc(nv, 1);
    if (!V.visible || !V.defined) {
        free(V.visible);
        free(V.defined);
        ir_diag_error(diag, "out of memory in verifier");
        return IR_ENOMEM;
    }
    for (uint32_t i = 0; i < ir_graph_num_const_values(g); i++) {
        IrValueId v = ir_graph_const_value(g, i);
        IrConstId c = ir_value_const(g, v);
        int64_t numel;
        IrTypeId t = ir_const_type(g, c);
        if (!ir_type_numel(g, t, &numel) ||
            !ir__const_size_ok(ir_type_dtype(g, t), numel, ir_const_data(g, c), ir_const_nbytes(g, c))) {
            V.errors++;
            ir_diag_report(diag, IR_SEV_ERROR, g->source_file, 0, 0, NULL, 0,
                           "constant %%%s: data size does not match its type", ir_value_name(g, v));
        }
        define(&V, 0, v);
    }
    verify_region(&V, IR_ROOT_REGION);
    if (ir_graph_num_outputs(g) == 0) {
        V.errors++;
        ir_diag_report(diag, IR_SEV_ERROR, g->source_file, 0, 0, NULL, 0, "graph has no outputs");
    }
    free(V.visible);
    free(V.defined);
    if (V.truncated || V.errors > V.cap)
        ir_diag_report(diag, IR_SEV_NOTE, g->source_file, 0, 0, NULL, 0,
                       "stopped after %u errors", V.cap);
    return V.errors ? IR_EVERIFY : IR_OK;
}

IrStatus ir_verify(IrGraph *g, IrDiag *diag) {
    IrVerifyOptions o = {0, true};
    return ir_verify_ex(g, &o, diag);
}

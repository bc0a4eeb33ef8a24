/* Helpers every kernel uses (declared in interp.h): error reporting located at the node,
 * output allocation, attributes with the op table's defaults, broadcasting and strides, and
 * the entry point for running a node's region. Kernels never touch InterpCtx directly.
 */
#include "validate/interp_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void interp_node_desc(const IrGraph *g, IrNodeId n, char *buf, size_t cap) {
    const char *name = ir_node_name(g, n);
    const char *op = ir_op_name(ir_node_op(g, n));
    if (name && *name) {
        snprintf(buf, cap, "node '%s' (op %s)", name, op);
        return;
    }
    /* unnamed nodes are identified by their first result, which is always named */
    IrValueId r = 0;
    for (uint32_t i = 0; i < ir_node_num_results(g, n) && !r; i++) r = ir_node_result(g, n, i);
    if (r) snprintf(buf, cap, "node producing '%%%s' (op %s)", ir_value_name(g, r), op);
    else snprintf(buf, cap, "node #%u (op %s)", n, op);
}

/* ir_diag_at_node locates the diagnostic (file:line:col, source line, caret) and appends
 * " (node 'name')"; our messages already begin with the node's name, so a proxy sink drops that
 * suffix before forwarding to the real sink. */
typedef struct NodeDiagProxy {
    IrDiag *real;
    const char *suffix;
} NodeDiagProxy;

static void node_diag_forward(void *user, const IrDiagnostic *d) {
    NodeDiagProxy *p = user;
    size_t n = strlen(d->message), k = p->suffix ? strlen(p->suffix) : 0;
    if (k && n >= k && strcmp(d->message + n - k, p->suffix) == 0) n -= k;
    ir_diag_report(p->real, d->severity, d->file, d->line, d->col, d->source_line, d->source_line_len,
                   "%.*s", (int)n, d->message);
}

void interp_diag_node(IrDiag *diag, const IrGraph *g, IrNodeId n, const char *fmt, ...) {
    char msg[1024], desc[256], suffix[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    interp_node_desc(g, n, desc, sizeof desc);
    const char *nm = ir_node_name(g, n);
    snprintf(suffix, sizeof suffix, " (node '%s')", nm ? nm : "");
    NodeDiagProxy p = {diag, (nm && *nm) ? suffix : NULL};
    IrDiag proxy;
    ir_diag_init(&proxy, node_diag_forward, &p);
    if (!diag) return;
    ir_diag_at_node(&proxy, g, n, IR_SEV_ERROR, "%s: %s", desc, msg);
}

IrStatus interp_error(KernelArgs *a, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    interp_diag_node(a->ctx->diag, a->g, a->node, "%s", msg);
    return IR_EVERIFY;
}

IrStatus interp_unsupported(KernelArgs *a, const char *what) {
    const char *op = ir_op_name(ir_node_op(a->g, a->node));
    if (what && *what)
        interp_diag_node(a->ctx->diag, a->g, a->node, "the reference interpreter does not support %s: %s", op, what);
    else
        interp_diag_node(a->ctx->diag, a->g, a->node, "the reference interpreter does not support %s", op);
    return IR_EUNSUPPORTED;
}

IrStatus interp_alloc_output(KernelArgs *a, uint32_t i, IrDType dt, uint32_t rank, const int64_t *dims) {
    if (i >= a->n_out) return interp_error(a, "internal: output %u out of range (%u results)", i, a->n_out);
    if (rank > IR_MAX_RANK) return interp_error(a, "result rank %u exceeds the maximum %d", rank, IR_MAX_RANK);
    if (dt <= IR_DTYPE_NONE || dt >= IR_DTYPE_COUNT) return interp_error(a, "internal: bad result dtype");
    for (uint32_t d = 0; d < rank; d++)
        if (dims[d] < 0) return interp_error(a, "result dim %u is negative (%lld)", d, (long long)dims[d]);
    ir_tensor_free(&a->out[i]);
    IrStatus s = ir_tensor_alloc(&a->out[i], dt, rank, dims);
    if (s)
        interp_diag_node(a->ctx->diag, a->g, a->node, "cannot allocate result %u (%s, rank %u)", i,
                         ir_dtype_name(dt), rank);
    return s;
}

/* ---- attributes ------------------------------------------------------------------------- */

int64_t interp_attr_int(KernelArgs *a, const char *name) {
    return ir_node_attr_int(a->g, a->node, name, NULL);
}

double interp_attr_float(KernelArgs *a, const char *name) {
    IrAttrValue v;
    if (ir_node_attr(a->g, a->node, name, &v) && v.kind == IR_ATTR_INT) return (double)v.i;
    return ir_node_attr_float(a->g, a->node, name, NULL);
}

/* Default string attributes as NUL-terminated copies of the op table's text, built once per
 * process and never changed afterwards. ir_node_attr_string would intern them into the graph,
 * which may move its string table and invalidate strings a kernel already holds. */
typedef struct StrDefault {
    const char *key; /* IrAttrSpec.default_text: points into the op table */
    char *text;
} StrDefault;

static StrDefault *str_defaults;
static size_t n_str_defaults;
static pthread_once_t str_defaults_once = PTHREAD_ONCE_INIT;

static void str_defaults_init(void) {
    size_t cap = 0;
    for (int op = 1; op < IR_OP_COUNT; op++) {
        char name[128];
        IrAttrSpec spec;
        for (uint32_t i = 0; ir_op_attr_spec_at((IrOp)op, i, name, sizeof name, &spec); i++) {
            if (spec.kind != IR_ATTR_STRING || !spec.has_default) continue;
            if (n_str_defaults == cap) {
                StrDefault *v = realloc(str_defaults, (cap = cap ? cap * 2 : 64) * sizeof *v);
                if (!v) return;
                str_defaults = v;
            }
            char *t = strndup(spec.default_text, spec.default_len);
            if (!t) return;
            str_defaults[n_str_defaults++] = (StrDefault){spec.default_text, t};
        }
    }
}

const char *interp_attr_string(KernelArgs *a, const char *name) {
    IrAttrValue v;
    if (ir_node_attr(a->g, a->node, name, &v)) return v.kind == IR_ATTR_STRING ? ir_str(a->g, v.s) : NULL;
    IrAttrSpec spec;
    if (!ir_op_attr_spec(ir_node_op(a->g, a->node), name, strlen(name), &spec) || !spec.has_default) return NULL;
    pthread_once(&str_defaults_once, str_defaults_init);
    for (size_t i = 0; i < n_str_defaults; i++)
        if (str_defaults[i].key == spec.default_text) return str_defaults[i].text;
    return NULL;
}

bool interp_has_attr(KernelArgs *a, const char *name) { return ir_node_attr(a->g, a->node, name, NULL); }

/* Parses a list default such as "[1, 2]" or "[]" from the op table; returns the count. */
static int parse_default_list(const char *p, size_t len, int64_t *ivals, double *fvals, int cap) {
    const char *end = p + len;
    int n = 0;
    while (p < end && (*p == '[' || *p == ' ')) p++;
    while (p < end && *p != ']') {
        char *e;
        double f = strtod(p, &e);
        if (e == p) break;
        if (n < cap) {
            if (ivals) ivals[n] = (int64_t)f;
            if (fvals) fvals[n] = f;
        }
        n++;
        p = e;
        while (p < end && (*p == ',' || *p == ' ')) p++;
    }
    return n;
}

int interp_attr_ints(KernelArgs *a, const char *name, int64_t *vals, int cap) {
    IrAttrValue v;
    if (ir_node_attr(a->g, a->node, name, &v)) {
        if (v.kind == IR_ATTR_INTS) {
            for (uint32_t i = 0; i < v.count && (int)i < cap; i++) vals[i] = v.ints[i];
            return (int)v.count;
        }
        if (v.kind == IR_ATTR_INT) {
            if (cap > 0) vals[0] = v.i;
            return 1;
        }
        return -1;
    }
    IrAttrSpec spec;
    IrOp op = ir_node_op(a->g, a->node);
    if (ir_op_attr_spec(op, name, strlen(name), &spec) && spec.has_default)
        return parse_default_list(spec.default_text, spec.default_len, vals, NULL, cap);
    return -1;
}

int interp_attr_floats(KernelArgs *a, const char *name, double *vals, int cap) {
    IrAttrValue v;
    if (ir_node_attr(a->g, a->node, name, &v)) {
        if (v.kind == IR_ATTR_FLOATS) {
            for (uint32_t i = 0; i < v.count && (int)i < cap; i++) vals[i] = v.floats[i];
            return (int)v.count;
        }
        if (v.kind == IR_ATTR_FLOAT) {
            if (cap > 0) vals[0] = v.f;
            return 1;
        }
        return -1;
    }
    IrAttrSpec spec;
    IrOp op = ir_node_op(a->g, a->node);
    if (ir_op_attr_spec(op, name, strlen(name), &spec) && spec.has_default)
        return parse_default_list(spec.default_text, spec.default_len, NULL, vals, cap);
    return -1;
}

bool interp_attr_tensor(KernelArgs *a, const char *name, IrTensor *view) {
    IrAttrValue v;
    if (!ir_node_attr(a->g, a->node, name, &v) || v.kind != IR_ATTR_TENSOR || !v.tensor) return false;
    IrTypeId t = ir_const_type(a->g, v.tensor);
    uint32_t rank = ir_type_rank(a->g, t);
    /* a string constant's data is a blob, not elements: no view (ir_tensor_from_const) */
    if (rank == IR_RANK_UNKNOWN || rank > IR_MAX_RANK || ir_type_dtype(a->g, t) == IR_DTYPE_STRING) return false;
    int64_t dims[IR_MAX_RANK];
    const IrExprId *d = ir_type_dims(a->g, t);
    for (uint32_t i = 0; i < rank; i++)
        if (!ir_expr_is_const(a->g, d[i], &dims[i])) return false;
    ir_tensor_view(view, ir_type_dtype(a->g, t), rank, dims, ir_const_data(a->g, v.tensor));
    return true;
}

/* ---- regions ------------------------------------------------------------------------------ */

IrStatus interp_run_region(KernelArgs *a, IrRegionId r, const IrTensor *args, uint32_t n_args, IrTensor *outs) {
    return interp_exec_region(a->ctx, a->node, r, args, n_args, outs);
}

/* ---- shapes ------------------------------------------------------------------------------- */

IrStatus interp_broadcast(KernelArgs *a, const IrTensor *const *ins, uint32_t n, uint32_t *rank, int64_t *dims) {
    uint32_t ranks[64];
    const int64_t *d[64];
    if (n > 64) return interp_unsupported(a, "more than 64 broadcast operands");
    for (uint32_t k = 0; k < n; k++) ranks[k] = ins[k]->rank, d[k] = ins[k]->dims;
    IrShapeBroadcastError e;
    if (ir_shape_broadcast(n, ranks, d, rank, dims, &e)) return IR_OK;
    char s0[96], s1[96], why[160];
    ir_tensor_shape_str(ins[e.other], s0, sizeof s0);
    ir_tensor_shape_str(ins[e.operand], s1, sizeof s1);
    ir_shape_broadcast_message(&e, why, sizeof why);
    return interp_error(a, "input %u shape %s does not broadcast with input %u shape %s (%s)", e.operand, s1,
                        e.other, s0, why);
}

/* ---- sliding windows ---------------------------------------------------------------------- */

void interp_window_pad3(InterpWindow *g) {
    uint32_t sh = 3 - g->r;
    for (int i = 2; i >= 0; i--) {
        if (i >= (int)sh) {
            uint32_t j = (uint32_t)i - sh;
            g->in[i] = g->in[j], g->k[i] = g->k[j], g->out[i] = g->out[j], g->s[i] = g->s[j];
            g->d[i] = g->d[j], g->pb[i] = g->pb[j], g->pe[i] = g->pe[j];
        }
    }
    for (uint32_t i = 0; i < sh; i++) g->in[i] = g->k[i] = g->out[i] = g->s[i] = g->d[i] = 1, g->pb[i] = g->pe[i] = 0;
}

IrStatus interp_window_finish(KernelArgs *a, InterpWindow *g, bool ceil_mode) {
    uint32_t r = g->r;
    int64_t v[6];
    int n;
    for (uint32_t i = 0; i < r; i++) g->s[i] = g->d[i] = 1, g->pb[i] = g->pe[i] = 0;
    if ((n = interp_attr_ints(a, "strides", v, 6)) > 0) {
        if (n != (int)r) return interp_error(a, "strides must have %u entries", r);
        for (uint32_t i = 0; i < r; i++) g->s[i] = v[i];
    }
    if ((n = interp_attr_ints(a, "dilations", v, 6)) > 0) {
        if (n != (int)r) return interp_error(a, "dilations must have %u entries", r);
        for (uint32_t i = 0; i < r; i++) g->d[i] = v[i];
    }
    for (uint32_t i = 0; i < r; i++)
        if (g->s[i] < 1 || g->d[i] < 1) return interp_error(a, "strides and dilations must be positive");
    const char *ap = interp_attr_string(a, "auto_pad");
    if (!ap || !*ap) ap = "NOTSET";
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    if (strcmp(ap, "NOTSET") == 0) {
        if ((n = interp_attr_ints(a, "pads", v, 6)) > 0) {
            if (n != 2 * (int)r) return interp_error(a, "pads must have %u entries", 2 * r);
            for (uint32_t i = 0; i < r; i++) g->pb[i] = v[i], g->pe[i] = v[r + i];
        }
    } else if (!same && strcmp(ap, "VALID") != 0) {
        return interp_error(a, "unknown auto_pad '%s'", ap);
    }
    for (uint32_t i = 0; i < r; i++) {
        int64_t ek = (g->k[i] - 1) * g->d[i] + 1;
        if (same) {
            g->out[i] = (g->in[i] + g->s[i] - 1) / g->s[i];
            int64_t total = (g->out[i] - 1) * g->s[i] + ek - g->in[i];
            if (total < 0) total = 0;
            bool upper = strcmp(ap, "SAME_UPPER") == 0;
            g->pb[i] = upper ? total / 2 : total - total / 2;
            g->pe[i] = total - g->pb[i];
        } else {
            int64_t span = g->in[i] + g->pb[i] + g->pe[i] - ek;
            if (span < 0) return interp_error(a, "kernel larger than padded input on spatial axis %u", i);
            g->out[i] = ceil_mode ? (span + g->s[i] - 1) / g->s[i] + 1 : span / g->s[i] + 1;
            /* the last window must start inside the input or the left padding */
            if (ceil_mode && (g->out[i] - 1) * g->s[i] >= g->in[i] + g->pb[i]) g->out[i]--;
        }
    }
    interp_window_pad3(g);
    return IR_OK;
}


/* Reads the parts of a validator JSON report (irtool validate --json) that the visualizer
 * draws: per-node errors ("nodes"), the first diverging node ("first_divergence") and whether
 * the run passed ("pass", "outputs"). Parsed with jansson; unknown keys are ignored. The drawn
 * error is scale-aware: 1 - cosine against the reference where the report gives a cosine, so
 * outputs near zero (ReLU) do not read as huge relative errors. Names are kept sorted.
 */
#include "viz/viz_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct HlEntry {
    char *name;
    VizNodeError e;
} HlEntry;

struct VizHighlight {
    HlEntry *e;
    uint32_t n, cap;
    char *first_div;
    int passed;          /* -1 unknown, 0 failed, 1 passed */
    uint32_t n_outputs;  /* outputs listed in the report */
    bool by_cosine;      /* every entry's metric is 1 - cosine */
};

static bool hl_add(VizHighlight *h, const char *name, const VizNodeError *e) {
    if (h->n == h->cap) {
        uint32_t nc = h->cap ? h->cap * 2 : 64;
        HlEntry *ne = realloc(h->e, nc * sizeof *ne);
        if (!ne) return false;
        h->e = ne;
        h->cap = nc;
    }
    char *copy = strdup(name);
    if (!copy) return false;
    h->e[h->n].name = copy;
    h->e[h->n].e = *e;
    h->n++;
    return true;
}

static double num_or(json_t *o, const char *key, double dflt) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* One node entry: {"node"|"name": NAME, "cosine": C, "max_rel_err": R, "max_abs_err": A}, or a
 * bare number (the error as given, for hand-written reports). */
static bool entry_error(json_t *v, VizNodeError *e) {
    memset(e, 0, sizeof *e);
    e->cosine = NAN;
    e->max_rel_err = NAN;
    e->max_abs_err = NAN;
    if (json_is_number(v)) {
        e->metric = json_number_value(v);
        return true;
    }
    if (!json_is_object(v)) return false;
    e->cosine = num_or(v, "cosine", NAN);
    e->max_rel_err = num_or(v, "max_rel_err", NAN);
    e->max_abs_err = num_or(v, "max_abs_err", NAN);
    json_t *p = json_object_get(v, "pass");
    e->failed = json_is_false(p);
    if (isfinite(e->cosine)) {
        e->metric = 1.0 - e->cosine;
        if (e->metric < 0) e->metric = 0;
        e->by_cosine = true;
    } else if (isfinite(e->max_rel_err)) {
        e->metric = e->max_rel_err;
    } else {
        return false;
    }
    return true;
}

static IrStatus bad(IrDiag *diag, const char *file, const char *what) {
    ir_diag_error(diag, "%s: not a validator report: %s (make one with `irtool validate ... --json FILE`)", file,
                  what);
    return IR_ESYNTAX;
}

static IrStatus read_nodes(VizHighlight *h, json_t *nodes, const char *file, IrDiag *diag) {
    if (json_is_array(nodes)) {
        size_t i;
        json_t *v;
        json_array_foreach(nodes, i, v) {
            json_t *nm = json_object_get(v, "node");
            if (!json_is_string(nm)) nm = json_object_get(v, "name");
            VizNodeError e;
            if (!json_is_string(nm) || !entry_error(v, &e)) {
                char m[96];
                snprintf(m, sizeof m, "nodes[%zu] has no \"node\" name or no \"cosine\"/\"max_rel_err\"", i);
                return bad(diag, file, m);
            }
            if (!hl_add(h, json_string_value(nm), &e)) return IR_ENOMEM;
        }
    } else if (json_is_object(nodes)) {
        const char *k;
        json_t *v;
        json_object_foreach(nodes, k, v) {
            VizNodeError e;
            if (!entry_error(v, &e)) {
                char m[160];
                snprintf(m, sizeof m, "nodes.\"%.100s\" is neither a number nor an object with an error", k);
                return bad(diag, file, m);
            }
            if (!hl_add(h, k, &e)) return IR_ENOMEM;
        }
    } else if (nodes && !json_is_null(nodes)) {
        return bad(diag, file, "\"nodes\" is neither a list nor an object");
    }
    return IR_OK;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const HlEntry *)a)->name, ((const HlEntry *)b)->name);
}

IrStatus viz_highlight_parse(const char *json, size_t len, const char *filename, IrDiag *diag, VizHighlight **out) {
    *out = NULL;
    const char *file = filename ? filename : "<report>";
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        ir_diag_error(diag, "%s:%d:%d: error in JSON: %s", file, je.line, je.column, je.text);
        return IR_ESYNTAX;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return bad(diag, file, "the top level is not a JSON object");
    }
    VizHighlight *h = calloc(1, sizeof *h);
    if (!h) { json_decref(root); return IR_ENOMEM; }
    h->passed = -1;
    IrStatus s = read_nodes(h, json_object_get(root, "nodes"), file, diag);
    json_t *fd = json_object_get(root, "first_divergence");
    if (s == IR_OK && json_is_object(fd)) fd = json_object_get(fd, "node");
    if (s == IR_OK && json_is_string(fd) && !(h->first_div = strdup(json_string_value(fd)))) s = IR_ENOMEM;
    json_t *p = json_object_get(root, "pass");
    if (json_is_boolean(p)) h->passed = json_is_true(p);
    json_t *outs = json_object_get(root, "outputs");
    if (json_is_array(outs)) h->n_outputs = (uint32_t)json_array_size(outs);
    if (s == IR_OK && !json_object_get(root, "nodes") && !json_is_boolean(p))
        s = bad(diag, file, "it has neither \"nodes\" nor \"pass\"");
    json_decref(root);
    if (s) {
        if (s == IR_ENOMEM) ir_diag_error(diag, "%s: out of memory", file);
        viz_highlight_destroy(h);
        return s;
    }
    h->by_cosine = h->n > 0;
    for (uint32_t i = 0; i < h->n; i++) h->by_cosine &= h->e[i].e.by_cosine;
    if (h->n) qsort(h->e, h->n, sizeof *h->e, cmp_entry);
    *out = h;
    return IR_OK;
}

IrStatus viz_highlight_load(const char *path, IrDiag *diag, VizHighlight **out) {
    char *data;
    size_t len;
    IrStatus s = ir_read_file(path, diag, &data, &len);
    if (s) return s;
    s = viz_highlight_parse(data, len, path, diag, out);
    free(data);
    return s;
}

void viz_highlight_destroy(VizHighlight *h) {
    if (!h) return;
    for (uint32_t i = 0; i < h->n; i++) free(h->e[i].name);
    free(h->e);
    free(h->first_div);
    free(h);
}

uint32_t viz_highlight_num_nodes(const VizHighlight *h) { return h ? h->n : 0; }
const char *viz_highlight_first_divergence(const VizHighlight *h) { return h ? h->first_div : NULL; }
int viz_highlight_passed(const VizHighlight *h) { return h ? h->passed : -1; }
uint32_t viz_highlight_num_outputs(const VizHighlight *h) { return h ? h->n_outputs : 0; }
bool viz_highlight_by_cosine(const VizHighlight *h) { return h && h->by_cosine; }
const char *viz_highlight_node_name(const VizHighlight *h, uint32_t i) { return h && i < h->n ? h->e[i].name : NULL; }

bool viz_highlight_lookup(const VizHighlight *h, const char *name, VizNodeError *err) {
    if (!h || !name || !*name) return false;
    uint32_t lo = 0, hi = h->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        int k = strcmp(h->e[mid].name, name);
        if (k == 0) { *err = h->e[mid].e; return true; }
        if (k < 0) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

/* Reads the parts of a validator JSON report that the visualizer draws: per-node error
 * magnitudes ("nodes") and the first diverging node ("first_divergence"). A small strict JSON
 * reader; unknown keys are skipped, so richer reports are accepted. Names are kept sorted for
 * binary search.
 */
#include "viz/viz_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct HlEntry {
    char *name;
    double err;
} HlEntry;

struct VizHighlight {
    HlEntry *e;
    uint32_t n, cap;
    char *first_div;
};

typedef struct J {
    const char *p, *end;
    bool err;
} J;

static void ws(J *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')) j->p++;
}

static bool eat(J *j, char c) {
    ws(j);
    if (j->p < j->end && *j->p == c) { j->p++; return true; }
    return false;
}

/* A string (escapes \" \\ \/ \n \t kept simple; \uXXXX as '?'); malloc'd. */
static char *jstring(J *j) {
    ws(j);
    if (j->p >= j->end || *j->p != '"') { j->err = true; return NULL; }
    j->p++;
    IrStrBuf b;
    ir_strbuf_init(&b);
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if (c == '\\' && j->p < j->end) {
            char e = *j->p++;
            if (e == 'n') c = '\n';
            else if (e == 't') c = '\t';
            else if (e == 'u') { c = '?'; j->p += (j->end - j->p >= 4) ? 4 : j->end - j->p; }
            else c = e;
        }
        ir_strbuf_putc(&b, c);
    }
    if (j->p >= j->end) { j->err = true; ir_strbuf_free(&b); return NULL; }
    j->p++;
    if (!b.data) ir_strbuf_puts(&b, "");
    return b.data;
}

static bool jnumber(J *j, double *out) {
    ws(j);
    char *e;
    double v = strtod(j->p, &e);
    if (e == j->p || e > j->end) return false;
    j->p = e;
    *out = v;
    return true;
}

static void jskip(J *j, int depth);

static void jskip_container(J *j, char close, bool obj, int depth) {
    if (eat(j, close)) return;
    do {
        if (obj) {
            free(jstring(j));
            if (!eat(j, ':')) { j->err = true; return; }
        }
        jskip(j, depth + 1);
    } while (!j->err && eat(j, ','));
    if (!eat(j, close)) j->err = true;
}

static void jskip(J *j, int depth) {
    ws(j);
    if (depth > 64 || j->p >= j->end) { j->err = true; return; }
    char c = *j->p;
    if (c == '"') { free(jstring(j)); return; }
    if (c == '{') { j->p++; jskip_container(j, '}', true, depth); return; }
    if (c == '[') { j->p++; jskip_container(j, ']', false, depth); return; }
    for (const char *lit = "true\0false\0null\0"; *lit; lit += strlen(lit) + 1) {
        size_t n = strlen(lit);
        if ((size_t)(j->end - j->p) >= n && memcmp(j->p, lit, n) == 0) { j->p += n; return; }
    }
    double d;
    if (!jnumber(j, &d)) j->err = true;
}

static void hl_add(VizHighlight *h, char *name, double err, J *j) {
    if (h->n == h->cap) {
        uint32_t nc = h->cap ? h->cap * 2 : 64;
        HlEntry *ne = realloc(h->e, nc * sizeof *ne);
        if (!ne) { free(name); j->err = true; return; }
        h->e = ne;
        h->cap = nc;
    }
    h->e[h->n].name = name;
    h->e[h->n].err = err;
    h->n++;
}

/* An object's fields: picks a name ("node"/"name") and an error ("max_rel_err", "rel_err",
 * "error", "max_abs_err" in that preference), skipping everything else. */
static void jnode_object(J *j, char **name, double *err, bool *has_err) {
    int best = 99;
    static const char *const keys[] = {"max_rel_err", "rel_err", "error", "max_abs_err"};
    if (eat(j, '}')) return;
    do {
        char *k = jstring(j);
        if (!k || !eat(j, ':')) { free(k); j->err = true; return; }
        int rank = 99;
        for (int i = 0; i < 4; i++)
            if (strcmp(k, keys[i]) == 0) rank = i;
        ws(j);
        if ((strcmp(k, "node") == 0 || strcmp(k, "name") == 0) && j->p < j->end && *j->p == '"') {
            free(*name);
            *name = jstring(j);
        } else if (rank < 99 && j->p < j->end && *j->p != '"' && *j->p != '{' && *j->p != '[' && *j->p != 'n') {
            double v;
            if (!jnumber(j, &v)) j->err = true;
            else if (rank < best) { best = rank; *err = v; *has_err = true; }
        } else {
            jskip(j, 1);
        }
        free(k);
    } while (!j->err && eat(j, ','));
    if (!eat(j, '}')) j->err = true;
}

static void jnodes(J *j, VizHighlight *h) {
    if (eat(j, '{')) {
        if (eat(j, '}')) return;
        do {
            char *name = jstring(j);
            if (!name || !eat(j, ':')) { free(name); j->err = true; return; }
            double v = 0;
            bool has = false;
            if (eat(j, '{')) {
                char *ignored = NULL;
                jnode_object(j, &ignored, &v, &has);
                free(ignored);
            } else {
                has = jnumber(j, &v);
                if (!has) jskip(j, 1);
            }
            if (has) hl_add(h, name, v, j);
            else free(name);
        } while (!j->err && eat(j, ','));
        if (!eat(j, '}')) j->err = true;
    } else if (eat(j, '[')) {
        if (eat(j, ']')) return;
        do {
            if (!eat(j, '{')) { j->err = true; return; }
            char *name = NULL;
            double v = 0;
            bool has = false;
            jnode_object(j, &name, &v, &has);
            if (name && has) hl_add(h, name, v, j);
            else free(name);
        } while (!j->err && eat(j, ','));
        if (!eat(j, ']')) j->err = true;
    } else {
        jskip(j, 1);
    }
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const HlEntry *)a)->name, ((const HlEntry *)b)->name);
}

IrStatus viz_highlight_parse(const char *json, size_t len, const char *filename, IrDiag *diag, VizHighlight **out) {
    *out = NULL;
    VizHighlight *h = calloc(1, sizeof *h);
    if (!h) return IR_ENOMEM;
    J j = {json, json + len, false};
    if (!eat(&j, '{')) j.err = true;
    if (!j.err && !eat(&j, '}')) {
        do {
            char *k = jstring(&j);
            if (!k || !eat(&j, ':')) { free(k); j.err = true; break; }
            if (strcmp(k, "nodes") == 0) {
                jnodes(&j, h);
            } else if (strcmp(k, "first_divergence") == 0) {
                ws(&j);
                if (j.p < j.end && *j.p == '{') {
                    j.p++;
                    char *name = NULL;
                    double v = 0;
                    bool has = false;
                    jnode_object(&j, &name, &v, &has);
                    free(h->first_div);
                    h->first_div = name;
                } else if (j.p < j.end && *j.p == '"') {
                    free(h->first_div);
                    h->first_div = jstring(&j);
                } else {
                    jskip(&j, 1);
                }
            } else {
                jskip(&j, 1);
            }
            free(k);
        } while (!j.err && eat(&j, ','));
        if (!j.err && !eat(&j, '}')) j.err = true;
    }
    if (j.err) {
        ir_diag_error(diag, "%s: not a valid report (JSON object expected) near offset %ld",
                      filename ? filename : "<report>", (long)(j.p - json));
        viz_highlight_destroy(h);
        return IR_ESYNTAX;
    }
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

bool viz_highlight_lookup(const VizHighlight *h, const char *name, double *err) {
    if (!h || !name) return false;
    uint32_t lo = 0, hi = h->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        int k = strcmp(h->e[mid].name, name);
        if (k == 0) { *err = h->e[mid].err; return true; }
        if (k < 0) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

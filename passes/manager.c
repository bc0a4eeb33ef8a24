/* The pass manager: pipeline parsing, running, verification between passes, timing, stats,
 * IR dumps and reproducers.
 *
 * A reproducer is the text IR of the graph as the failing pass received it, with a
 * `meta "irtool.pipeline"` line naming the rest of the pipeline, so `irtool opt FILE` (no -p)
 * replays exactly the failure. Only the pipeline's input is kept while running; on failure the
 * passes before the failing one are replayed on it (passes are deterministic).
 */
#include "passes/passes.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_STATS 32

typedef struct Entry {
    const IrPass *pass;
    uint32_t n_opts;
    char **names, **values; /* user options */
    char *text;             /* canonical text of this entry */
    /* report */
    double seconds;
    bool changed;
    uint32_t n_stats;
    const char *stat_names[MAX_STATS];
    int64_t stat_values[MAX_STATS];
} Entry;

struct IrPipeline {
    Entry *entries;
    uint32_t n;
    char *text;
    void (*on_pass)(void *user, uint32_t index, uint32_t count, const char *pass); /* may be NULL */
    void *on_pass_user;
};

void ir_pipeline_set_progress(IrPipeline *p, void (*fn)(void *user, uint32_t index, uint32_t count, const char *pass),
                              void *user) {
    p->on_pass = fn;
    p->on_pass_user = user;
}

struct IrPassContext {
    IrGraph *g;
    IrDiag *diag;
    Entry *e;
    bool failed;
};

/* ---- context API --------------------------------------------------------------------------- */

IrGraph *ir_pass_graph(IrPassContext *c) { return c->g; }
IrDiag *ir_pass_diag(IrPassContext *c) { return c->diag; }

const char *ir_pass_option(IrPassContext *c, const char *name) {
    for (uint32_t i = 0; i < c->e->n_opts; i++)
        if (strcmp(c->e->names[i], name) == 0) return c->e->values[i];
    for (const IrPassOption *o = c->e->pass->options; o && o->name; o++)
        if (strcmp(o->name, name) == 0) return o->default_value;
    return NULL;
}

int64_t ir_pass_option_int(IrPassContext *c, const char *name, int64_t fallback) {
    const char *v = ir_pass_option(c, name);
    if (!v) return fallback;
    char *end;
    long long x = strtoll(v, &end, 10);
    return *end ? fallback : x;
}

uint32_t ir_pass_num_options(IrPassContext *c) { return c->e->n_opts; }
void ir_pass_option_at(IrPassContext *c, uint32_t i, const char **name, const char **value) {
    *name = c->e->names[i];
    *value = c->e->values[i];
}

void ir_pass_stat(IrPassContext *c, const char *counter, int64_t delta) {
    Entry *e = c->e;
    for (uint32_t i = 0; i < e->n_stats; i++)
        if (strcmp(e->stat_names[i], counter) == 0) {
            e->stat_values[i] += delta;
            return;
        }
    if (e->n_stats == MAX_STATS) return;
    e->stat_names[e->n_stats] = counter;
    e->stat_values[e->n_stats++] = delta;
}

void ir_pass_changed(IrPassContext *c) { c->e->changed = true; }

void ir_pass_error(IrPassContext *c, IrNodeId n, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->failed = true;
    if (n)
        ir_diag_at_node(c->diag, c->g, n, IR_SEV_ERROR, "%s: %s", c->e->pass->name, msg);
    else
        ir_diag_report(c->diag, IR_SEV_ERROR, ir_graph_source_file(c->g), 0, 0, NULL, 0, "%s: %s",
                       c->e->pass->name, msg);
}

void ir_pass_inherit_provenance(IrGraph *g, IrNodeId dst, IrNodeId src) {
    uint32_t n = ir_node_num_provenance(g, src);
    if (n) {
        IrStrId small[16], *ids = n <= 16 ? small : malloc(n * sizeof *ids);
        if (!ids) return;
        for (uint32_t i = 0; i < n; i++) ids[i] = ir_node_provenance(g, src, i);
        ir_node_set_provenance(g, dst, n, ids);
        if (ids != small) free(ids);
    } else if (*ir_node_name(g, src)) {
        IrStrId s = ir_str_intern_cstr(g, ir_node_name(g, src));
        ir_node_set_provenance(g, dst, 1, &s);
    }
}

/* ---- parsing ------------------------------------------------------------------------------- */

static void pipeline_error(IrDiag *d, const char *text, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void pipeline_error(IrDiag *d, const char *text, size_t col, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ir_diag_report(d, IR_SEV_ERROR, "<pipeline>", 1, (uint32_t)col + 1, text, strlen(text), "%s", msg);
}

static char *dup_range(const char *s, size_t n) {
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    char *r = malloc(n + 1);
    if (r) {
        memcpy(r, s, n);
        r[n] = 0;
    }
    return r;
}

void ir_pipeline_destroy(IrPipeline *p) {
    if (!p) return;
    for (uint32_t i = 0; i < p->n; i++) {
        Entry *e = &p->entries[i];
        for (uint32_t k = 0; k < e->n_opts; k++) {
            free(e->names[k]);
            free(e->values[k]);
        }
        free(e->names);
        free(e->values);
        free(e->text);
    }
    free(p->entries);
    free(p->text);
    free(p);
}

static bool known_option(const IrPass *p, const char *name) {
    if (p->free_options) return true;
    for (const IrPassOption *o = p->options; o && o->name; o++)
        if (strcmp(o->name, name) == 0) return true;
    return false;
}

/* Parses text (already expanded) into p; `orig` is the user's text for error display. */
static IrStatus parse_into(IrPipeline *p, const char *text, IrDiag *diag, int depth) {
    const char *s = text;
    while (*s) {
        while (*s == ' ' || *s == ',') s++;
        if (!*s) break;
        const char *name = s;
        while (*s && *s != '{' && *s != ',') s++;
        char *nm = dup_range(name, (size_t)(s - name));
        if (!nm) return IR_ENOMEM;
        if (!*nm) {
            free(nm);
            pipeline_error(diag, text, (size_t)(name - text), "expected a pass name");
            return IR_EINVAL;
        }
        const char *named = ir_pipeline_named(nm);
        if (named && *s != '{') {
            free(nm);
            if (depth > 4) {
                pipeline_error(diag, text, (size_t)(name - text), "named pipelines nest too deeply");
                return IR_EINVAL;
            }
            IrStatus st = parse_into(p, named, diag, depth + 1);
            if (st) return st;
            continue;
        }
        const IrPass *pass = ir_pass_find(nm, strlen(nm));
        if (!pass) {
            const char *names[66];
            size_t nn = 0;
            for (uint32_t i = 0; i < ir_pass_count() && nn < 64; i++) names[nn++] = ir_pass_at(i)->name;
            for (uint32_t i = 0; ir_pipeline_named_at(i) && nn < 66; i++) names[nn++] = ir_pipeline_named_at(i);
            const char *sug = ir_suggest(nm, names, nn);
            if (sug)
                pipeline_error(diag, text, (size_t)(name - text), "unknown pass '%s' (did you mean '%s'? see 'irtool opt --list-passes')", nm, sug);
            else
                pipeline_error(diag, text, (size_t)(name - text), "unknown pass '%s' (see 'irtool opt --list-passes')", nm);
            free(nm);
            return IR_EINVAL;
        }
        free(nm);
        Entry *ne = realloc(p->entries, (p->n + 1) * sizeof *ne);
        if (!ne) return IR_ENOMEM;
        p->entries = ne;
        Entry *e = &p->entries[p->n++];
        memset(e, 0, sizeof *e);
        e->pass = pass;
        IrStrBuf t;
        ir_strbuf_init(&t);
        ir_strbuf_puts(&t, pass->name);
        if (*s == '{') {
            s++;
            ir_strbuf_putc(&t, '{');
            for (;;) {
                const char *k = s;
                while (*s && *s != '=' && *s != ',' && *s != '}') s++;
                if (*s != '=') {
                    pipeline_error(diag, text, (size_t)(s - text), "expected 'option=value' in options of %s", pass->name);
                    ir_strbuf_free(&t);
                    return IR_EINVAL;
                }
                char *key = dup_range(k, (size_t)(s - k));
                s++;
                const char *v = s;
                while (*s && *s != ',' && *s != '}') s++;
                char *val = dup_range(v, (size_t)(s - v));
                char **nn = realloc(e->names, (e->n_opts + 1) * sizeof *nn);
                if (nn) e->names = nn;
                char **nv = realloc(e->values, (e->n_opts + 1) * sizeof *nv);
                if (nv) e->values = nv;
                if (!key || !val || !nn || !nv) {
                    free(key);
                    free(val);
                    ir_strbuf_free(&t);
                    return IR_ENOMEM;
                }
                e->names[e->n_opts] = key;
                e->values[e->n_opts++] = val;
                if (!known_option(pass, key)) {
                    const char *names[32];
                    size_t nn = 0;
                    for (const IrPassOption *o = pass->options; o && o->name && nn < 32; o++) names[nn++] = o->name;
                    const char *sug = ir_suggest(key, names, nn);
                    if (sug)
                        pipeline_error(diag, text, (size_t)(k - text), "pass %s has no option '%s' (did you mean '%s'?)", pass->name, key, sug);
                    else if (nn)
                        pipeline_error(diag, text, (size_t)(k - text), "pass %s has no option '%s' (its options: see 'irtool opt --list-passes')", pass->name, key);
                    else
                        pipeline_error(diag, text, (size_t)(k - text), "pass %s has no option '%s' (it takes none)", pass->name, key);
                    ir_strbuf_free(&t);
                    return IR_EINVAL;
                }
                ir_strbuf_printf(&t, "%s%s=%s", e->n_opts > 1 ? "," : "", key, val);
                if (*s == '}') {
                    s++;
                    break;
                }
                if (!*s) {
                    pipeline_error(diag, text, (size_t)(s - text), "missing '}'");
                    ir_strbuf_free(&t);
                    return IR_EINVAL;
                }
                s++;
            }
            ir_strbuf_putc(&t, '}');
        }
        e->text = t.data ? t.data : strdup(pass->name);
        while (*s == ' ') s++;
        if (*s && *s != ',') {
            pipeline_error(diag, text, (size_t)(s - text), "expected ',' between passes");
            return IR_EINVAL;
        }
    }
    return IR_OK;
}

IrStatus ir_pipeline_parse(const char *text, IrDiag *diag, IrPipeline **out) {
    *out = NULL;
    IrPipeline *p = calloc(1, sizeof *p);
    if (!p) return IR_ENOMEM;
    IrStatus st = parse_into(p, text, diag, 0);
    if (st == IR_OK) {
        IrStrBuf t;
        ir_strbuf_init(&t);
        for (uint32_t i = 0; i < p->n; i++) {
            if (i) ir_strbuf_putc(&t, ',');
            ir_strbuf_puts(&t, p->entries[i].text);
        }
        p->text = t.data ? t.data : strdup("");
        if (!p->text) st = IR_ENOMEM;
    }
    if (st) {
        ir_pipeline_destroy(p);
        return st;
    }
    *out = p;
    return IR_OK;
}

const char *ir_pipeline_text(const IrPipeline *p) { return p->text; }
uint32_t ir_pipeline_num_reports(const IrPipeline *p) { return p->n; }

IrPassReport ir_pipeline_report(const IrPipeline *p, uint32_t i) {
    const Entry *e = &p->entries[i];
    IrPassReport r = {e->pass->name, e->seconds, e->changed, e->n_stats, e->stat_names, e->stat_values};
    return r;
}

/* ---- running ------------------------------------------------------------------------------- */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void dump_ir(FILE *f, const IrGraph *g, const char *title) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    if (ir_print_text(g, &b) == IR_OK) fprintf(f, "// -----// IR Dump After %s //----- //\n%s\n", title, b.data);
    ir_strbuf_free(&b);
}

static void write_reproducer(const char *path, const char *before, const IrPipeline *p, uint32_t from, IrDiag *diag) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_strbuf_puts(&b, "# irtool reproducer: the IR as the failing pass received it; re-run with\n");
    ir_strbuf_printf(&b, "#   irtool opt %s\n", path);
    ir_strbuf_puts(&b, "meta \"irtool.pipeline\" = \"");
    for (uint32_t i = from; i < p->n; i++) {
        if (i > from) ir_strbuf_putc(&b, ',');
        for (const char *c = p->entries[i].text; *c; c++) {
            if (*c == '"' || *c == '\\') ir_strbuf_putc(&b, '\\');
            ir_strbuf_putc(&b, *c);
        }
    }
    ir_strbuf_puts(&b, "\"\n");
    ir_strbuf_puts(&b, before);
    if (!b.failed && ir_write_file_atomic(path, b.data, b.len, diag) == IR_OK)
        ir_diag_report(diag, IR_SEV_NOTE, path, 0, 0, NULL, 0, "reproducer written; run 'irtool opt %s' to replay", path);
    ir_strbuf_free(&b);
}

/* The IR as pass `upto` received it: replays passes [0, upto) on the pipeline's input. Passes
 * are deterministic, so this reconstructs the exact input of the failing pass without keeping
 * a copy of the graph between every two passes. */
static bool ir_before_pass(IrPipeline *p, const char *initial, uint32_t upto, IrStrBuf *out) {
    IrGraph *h;
    if (ir_parse_text(initial, strlen(initial), "<reproducer>", NULL, &h) != IR_OK) return false;
    bool ok = true;
    for (uint32_t i = 0; i < upto && ok; i++) {
        Entry saved = p->entries[i];
        IrPassContext c = {h, NULL, &p->entries[i], false};
        ok = p->entries[i].pass->run(&c) == IR_OK && !c.failed;
        p->entries[i] = saved; /* keep the reports of the real run */
    }
    ok = ok && ir_print_text(h, out) == IR_OK;
    ir_graph_destroy(h);
    return ok;
}

IrStatus ir_pipeline_run(IrPipeline *p, IrGraph *g, const IrPipelineOptions *opt, IrDiag *diag) {
    IrPipelineOptions defaults = {true, IR_PRINT_NEVER, NULL, stderr, NULL};
    if (!opt) opt = &defaults;
    IrStrBuf initial;
    ir_strbuf_init(&initial);
    if (opt->reproducer && ir_print_text(g, &initial) != IR_OK) {
        ir_strbuf_free(&initial);
        return IR_ENOMEM;
    }
    IrStatus st = IR_OK;
    for (uint32_t i = 0; i < p->n && st == IR_OK; i++) {
        if (p->on_pass) p->on_pass(p->on_pass_user, i, p->n, p->entries[i].pass->name);
        Entry *e = &p->entries[i];
        e->seconds = 0;
        e->changed = false;
        e->n_stats = 0;
        IrPassContext c = {g, diag, e, false};
        uint32_t errors_before = diag ? diag->n_errors : 0;
        double t0 = now_seconds();
        st = e->pass->run(&c);
        e->seconds = now_seconds() - t0;
        if (st == IR_OK && (c.failed || ir_graph_status(g))) st = ir_graph_status(g) ? ir_graph_status(g) : IR_EVERIFY;
        if (st != IR_OK) {
            if (!diag || diag->n_errors == errors_before)
                ir_diag_error(diag, "pass %s failed: %s", e->pass->name, ir_status_name(st));
            else
                ir_diag_report(diag, IR_SEV_NOTE, NULL, 0, 0, NULL, 0, "while running pass %s", e->pass->name);
        } else if (opt->verify_each) {
            st = ir_verify(g, diag);
            if (st != IR_OK)
                ir_diag_error(diag, "pass %s left an invalid graph (the errors above)", e->pass->name);
        }
        if (st != IR_OK) {
            if (opt->reproducer) {
                IrStrBuf before;
                ir_strbuf_init(&before);
                if (ir_before_pass(p, initial.data, i, &before))
                    write_reproducer(opt->reproducer, before.data, p, i, diag);
                else
                    write_reproducer(opt->reproducer, initial.data, p, 0, diag);
                ir_strbuf_free(&before);
            }
            break;
        }
        bool print = opt->print_ir == IR_PRINT_AFTER_ALL ||
                     (opt->print_ir == IR_PRINT_AFTER_PASS && opt->print_ir_pass && strcmp(opt->print_ir_pass, e->pass->name) == 0) ||
                     (opt->print_ir == IR_PRINT_AFTER_CHANGE && e->changed);
        if (print) dump_ir(opt->print_to ? opt->print_to : stderr, g, e->text);
    }
    ir_strbuf_free(&initial);
    return st;
}

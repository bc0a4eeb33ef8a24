/* irtool validate: accuracy checks that say where a model broke. Compares a candidate model
 * with a reference (or a pipeline's output with its input) on given or generated inputs,
 * localizes the first diverging node, writes reproducers and reports, and runs a corpus of
 * such checks against a baseline. The library (validate/) compares; this file orchestrates:
 * it alone runs pipelines (passes/), prints and chooses exit codes (0 pass, 1 fail, 2 error).
 */
#include "backend/runtime/runtime.h"
#include "cli.h"
#include "ir/json.h"
#include "passes/passes.h"
#include "validate/validate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { EXIT_ERROR = 2 };

typedef struct ValArgs {
    const char *ref, *cand, *pipeline, *json, *junit, *reduce;
    const char **inputs;
    int n_inputs;
    int random_sets;
    uint64_t seed;
    IrValidateOptions opt;
    IrOutputTol *tols;
    uint32_t n_tols;
    /* corpus mode */
    const char *corpus, *baseline, *root;
    bool update_baseline;
    bool quiet; /* --quiet: no progress line */
    int jobs, shard_i, shard_n;
} ValArgs;

/* ---- arguments ----------------------------------------------------------------------------- */

static bool parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return *s && !*end && !errno;
}

/* "y=rtol:1e-3,atol:1e-5,cosine:0.99" */
static bool parse_tol(const char *s, IrOutputTol *t) {
    const char *eq = strchr(s, '=');
    if (!eq || eq == s) return false;
    char *name = strndup(s, (size_t)(eq - s));
    char *rest = strdup(eq + 1);
    if (!name || !rest) return false;
    t->output = name;
    t->tol.rtol = t->tol.atol = t->tol.min_cosine = -1;
    t->tol.by_cosine = false;
    bool ok = true;
    for (char *save = NULL, *tok = strtok_r(rest, ",", &save); ok && tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) ok = false;
        else {
            *colon = 0;
            double v;
            ok = parse_double(colon + 1, &v) && v >= 0;
            if (!strcmp(tok, "rtol")) t->tol.rtol = v;
            else if (!strcmp(tok, "atol")) t->tol.atol = v;
            else if (!strcmp(tok, "cosine") || !strcmp(tok, "min-cosine")) t->tol.min_cosine = v;
            else ok = false;
        }
    }
    free(rest);
    return ok;
}

static int parse_args(int argc, char **argv, ValArgs *a) {
    memset(a, 0, sizeof *a);
    ir_validate_options_init(&a->opt);
    a->inputs = calloc((size_t)argc, sizeof *a->inputs);
    a->tols = calloc((size_t)argc, sizeof *a->tols);
    a->jobs = 1;
    a->shard_n = 1;
    if (!a->inputs || !a->tols) return EXIT_ERROR;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                      \
    do {                                                                            \
        if (!v) return cli_usage_error("validate", "%s needs a value", s);          \
        i++;                                                                        \
    } while (0)
        double d;
        if (!strcmp(s, "--input") || !strcmp(s, "-i")) { NEED(); a->inputs[a->n_inputs++] = v; }
        else if (!strcmp(s, "-p") || !strcmp(s, "--pipeline")) { NEED(); a->pipeline = v; }
        else if (!strcmp(s, "--json")) { NEED(); a->json = v; }
        else if (!strcmp(s, "--junit")) { NEED(); a->junit = v; }
        else if (!strcmp(s, "--reduce")) { NEED(); a->reduce = v; }
        else if (!strcmp(s, "--corpus")) { NEED(); a->corpus = v; }
        else if (!strcmp(s, "--baseline")) { NEED(); a->baseline = v; }
        else if (!strcmp(s, "--root")) { NEED(); a->root = v; }
        else if (!strcmp(s, "--update-baseline")) a->update_baseline = true;
        else if (!strcmp(s, "--quiet") || !strcmp(s, "-q")) a->quiet = true;
        else if (!strcmp(s, "--random")) {
            NEED();
            a->random_sets = atoi(v);
            if (a->random_sets <= 0) return cli_usage_error("validate", "--random needs a count > 0");
        } else if (!strcmp(s, "--seed")) {
            NEED();
            a->seed = strtoull(v, NULL, 10);
        }
        else if (!strcmp(s, "--jobs") || !strcmp(s, "-j")) {
            NEED();
            a->jobs = atoi(v);
            if (a->jobs <= 0) return cli_usage_error("validate", "--jobs needs a count > 0");
        } else if (!strcmp(s, "--shard")) {
            NEED();
            if (sscanf(v, "%d/%d", &a->shard_i, &a->shard_n) != 2 || a->shard_n <= 0 || a->shard_i < 0 ||
                a->shard_i >= a->shard_n)
                return cli_usage_error("validate", "--shard needs I/N with 0 <= I < N");
        } else if (!strcmp(s, "--rtol") || !strcmp(s, "--atol") || !strcmp(s, "--min-cosine")) {
            NEED();
            if (!parse_double(v, &d) || d < 0) return cli_usage_error("validate", "%s needs a number >= 0", s);
            if (s[2] == 'r') a->opt.rtol = d;
            else if (s[2] == 'a') a->opt.atol = d;
            else a->opt.min_cosine = d;
        } else if (!strcmp(s, "--tol")) {
            NEED();
            if (!parse_tol(v, &a->tols[a->n_tols++]))
                return cli_usage_error("validate", "--tol needs OUTPUT=rtol:X,atol:Y,cosine:Z, got '%s'", v);
        } else if (s[0] == '-' && s[1]) return cli_usage_error("validate", "unknown option '%s'", s);
        else if (!a->ref) a->ref = s;
        else if (!a->cand) a->cand = s;
        else return cli_usage_error("validate", "too many models (REF and CAND at most)");
#undef NEED
    }
    a->opt.per_output = a->tols;
    a->opt.n_per_output = a->n_tols;
    if (a->corpus) {
        if (a->ref) return cli_usage_error("validate", "--corpus takes no model");
        if (!a->baseline) return cli_usage_error("validate", "--corpus needs --baseline FILE.json");
        if (a->update_baseline && a->shard_n > 1)
            return cli_usage_error("validate", "--update-baseline needs the whole corpus (no --shard)");
        return EXIT_OK;
    }
    if (!a->ref) return cli_usage_error("validate", "missing REF model");
    if (!a->cand && !a->pipeline) return cli_usage_error("validate", "give CAND, or MODEL -p PIPELINE");
    if (a->cand && a->pipeline) return cli_usage_error("validate", "give either CAND or -p PIPELINE, not both");
    if (a->n_inputs && a->random_sets) return cli_usage_error("validate", "--input and --random exclude each other");
    return EXIT_OK;
}

/* ---- models and inputs --------------------------------------------------------------------- */

/* Loads the reference and the candidate: CAND, or MODEL after the pipeline. */
static IrStatus load_pair(const char *ref_path, const char *cand_path, const char *pipeline, IrGraph **ref,
                          IrGraph **cand) {
    IrStatus s = cli_load(ref_path, true, ref);
    if (s) return s;
    s = cli_load(cand_path ? cand_path : ref_path, true, cand);
    if (s || !pipeline) {
        if (s) ir_graph_destroy(*ref);
        return s;
    }
    IrDiag d;
    cli_diag_init(&d);
    IrPipeline *p = NULL;
    s = ir_pipeline_parse(pipeline, &d, &p);
    if (!s) {
        IrPipelineOptions po = {.verify_each = true, .print_ir = IR_PRINT_NEVER, .print_to = stderr};
        s = ir_pipeline_run(p, *cand, &po, &d);
    }
    ir_pipeline_destroy(p);
    if (s) {
        ir_graph_destroy(*ref);
        ir_graph_destroy(*cand);
    }
    return s;
}


/* Reads the --input specs ([NAME=]FILE.npy, or FILE.pb: a TensorProto, or a SequenceProto /
 * OptionalProto for inputs of those types) into one value per input of g. */
static IrStatus read_inputs(const IrGraph *g, const char *const *specs, int n, IrTensor *out) {
    uint32_t ni = ir_graph_num_inputs(g);
    const char **files = calloc(ni + 1, sizeof *files);
    if (!files) return IR_ENOMEM;
    IrStatus s = cli_assign_graph_inputs("validate", g, specs, n, files) ? IR_EINVAL : IR_OK;
    for (uint32_t i = 0; i < ni && !s; i++)
        if (!files[i]) {
            fprintf(stderr, "irtool validate: missing input '%s' (give --input or --random N)\n",
                    ir_value_name(g, ir_graph_input(g, i)));
            s = IR_EINVAL;
        }
    IrDiag d;
    cli_diag_init(&d);
    for (uint32_t i = 0; i < ni && !s; i++) {
        /* sequence and optional inputs: ONNX SequenceProto / OptionalProto .pb files */
        size_t fl = strlen(files[i]);
        IrTypeKind form = ir_type_kind(g, ir_value_type(g, ir_graph_input(g, i)));
        if (fl > 3 && strcmp(files[i] + fl - 3, ".pb") == 0) s = ir_pb_value_read(files[i], form, &d, &out[i]);
        else s = cli_read_input(files[i], ir_value_name(g, ir_graph_input(g, i)), &d, &out[i]);
    }
    free(files);
    return s;
}

static void free_inputs(IrTensor *t, uint32_t n) {
    for (uint32_t i = 0; t && i < n; i++) ir_tensor_free(&t[i]);
    free(t);
}

static bool is_artifact(const char *p) {
    size_t n = p ? strlen(p) : 0;
    return n > 4 && strcmp(p + n - 4, ".irx") == 0;
}

/* Runs artifact art on inputs (in ref's input order; the artifact's are matched by name, else
 * by position) and compares its outputs with ref's through the interpreter. */
static IrStatus validate_artifact(const IrGraph *ref, const IrGraph *cand, IrtArtifact *art, const IrTensor *in,
                                  uint32_t ni, const IrValidateOptions *opt, IrValidateResult *res, IrDiag *d) {
    uint32_t na = irt_num_inputs(art), no = irt_num_outputs(art);
    if (na != ni) {
        ir_diag_error(d, "the reference takes %u inputs, the artifact %u", ni, na);
        return IR_EINVAL;
    }
    IrtTensor *rin = calloc(na + 1, sizeof *rin), *rout = calloc(no + 1, sizeof *rout);
    IrTensor *cout = calloc(no + 1, sizeof *cout);
    IrStatus s = rin && rout && cout ? IR_OK : IR_ENOMEM;
    for (uint32_t i = 0; !s && i < na; i++) {
        uint32_t k = i;
        for (uint32_t j = 0; j < ni; j++)
            if (strcmp(ir_value_name(ref, ir_graph_input(ref, j)), irt_input_name(art, i)) == 0) k = j;
        rin[i].dtype = irt_dtype_code(art, ir_dtype_name(in[k].dtype)); /* by name: codes are the manifest's */
        rin[i].rank = in[k].rank;
        for (uint32_t r = 0; r < in[k].rank && r < IRT_MAX_RANK; r++) rin[i].dims[r] = in[k].dims[r];
        rin[i].data = in[k].data;
    }
    char err[1024];
    bool ran = !s && irt_run(art, rin, rout, err, sizeof err) == 0;
    if (!s && !ran) {
        ir_diag_error(d, "the artifact's run failed: %s", err);
        s = IR_EINVAL;
    }
    for (uint32_t i = 0; ran && i < no; i++) {
        cli_tensor_of_irt(art, &rout[i], &cout[i]);
    }
    if (!s) s = ir_validate_outputs(ref, in, ni, cout, no, ir_graph_has_fp8(cand), opt, res, d);
    for (uint32_t i = 0; ran && i < no; i++) free(rout[i].data);
    free(rin), free(rout), free(cout);
    return s;
}

/* Runs one comparison: input set `set` (random) or the given files; with art, the candidate is
 * that compiled artifact (cand: the graph it was compiled from). */
static IrStatus validate_once(const IrGraph *ref, const IrGraph *cand, IrtArtifact *art, const char *const *specs,
                              int n_specs, bool random, uint64_t seed, const IrValidateOptions *opt, IrValidateResult *res) {
    uint32_t ni = ir_graph_num_inputs(ref);
    IrTensor *in = calloc(ni + 1, sizeof *in);
    if (!in) return IR_ENOMEM;
    IrDiag d;
    cli_diag_init(&d);
    IrStatus s = random ? ir_random_inputs(ref, seed, in, &d) : read_inputs(ref, specs, n_specs, in);
    if (!s) s = art ? validate_artifact(ref, cand, art, in, ni, opt, res, &d) : ir_validate_run(ref, cand, in, ni, opt, res, &d);
    free_inputs(in, ni);
    return s;
}

static bool write_text(const char *path, const IrStrBuf *b) {
    IrDiag d;
    cli_diag_init(&d);
    return ir_write_file_atomic(path, b->data ? b->data : "", b->len, &d) == IR_OK;
}

/* OUT.ir -> OUT.ref.ir */
static char *ref_sibling(const char *path) {
    size_t n = strlen(path);
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) dot = path + n;
    char *p = malloc(n + 8);
    if (p) snprintf(p, n + 8, "%.*s.ref%s", (int)(dot - path), path, dot);
    return p;
}

static int write_reduced(const IrGraph *ref, const IrGraph *cand, const IrValidateResult *r, const char *path) {
    IrDiag d;
    cli_diag_init(&d);
    IrGraph *rg = NULL, *cg = NULL;
    IrStatus s = ir_validate_reduce(ref, cand, r, &rg, &cg, &d);
    char *rp = s ? NULL : ref_sibling(path);
    if (!s) s = rp ? ir_save(cg, path, &d) : IR_ENOMEM;
    if (!s) s = ir_save(rg, rp, &d);
    if (!s) fprintf(stderr, "reduced: %s (candidate node), %s (reference); rerun: irtool validate %s %s\n", path, rp, rp, path);
    free(rp);
    ir_graph_destroy(rg);
    ir_graph_destroy(cg);
    return s ? EXIT_ERROR : EXIT_OK;
}

static int validate_pair(ValArgs *a) {
    IrGraph *ref = NULL, *cand = NULL;
    if (load_pair(a->ref, a->cand, a->pipeline, &ref, &cand)) return EXIT_ERROR;
    IrtArtifact *art = NULL; /* a compiled candidate runs its code; its IR (cand) tells FP8 */
    if (is_artifact(a->cand)) {
        char err[1024];
        art = irt_load(a->cand, err, sizeof err);
        if (!art) {
            fprintf(stderr, "irtool validate: %s: %s\n", a->cand, err);
            ir_graph_destroy(ref);
            ir_graph_destroy(cand);
            return EXIT_ERROR;
        }
    }
    IrValidateResult res;
    memset(&res, 0, sizeof res);
    IrStatus s = IR_OK;
    int sets = a->random_sets ? a->random_sets : 1;
    int used_set = 0;
    for (int k = 0; k < sets; k++) {
        if (k) ir_validate_result_free(&res);
        s = validate_once(ref, cand, art, a->inputs, a->n_inputs, a->random_sets > 0, a->seed + (uint64_t)k, &a->opt, &res);
        used_set = k;
        if (s || !res.pass) break;
    }
    int rc = EXIT_ERROR;
    for (uint32_t i = 0; !s && i < a->n_tols; i++) {
        bool known = false;
        for (uint32_t k = 0; k < res.n_outputs; k++) known |= !strcmp(res.outputs[k].name, a->tols[i].output);
        if (!known) fprintf(stderr, "irtool validate: warning: --tol names no output '%s'\n", a->tols[i].output);
    }
    if (!s) {
        IrStrBuf b;
        ir_strbuf_init(&b);
        if (a->random_sets) ir_strbuf_printf(&b, "random input set %d of %d (seed %llu)\n", used_set + 1, sets,
                                             (unsigned long long)(a->seed + (uint64_t)used_set));
        ir_validate_report_text(&res, &b);
        fputs(b.data ? b.data : "", stdout);
        ir_strbuf_free(&b);
        char label[512];
        snprintf(label, sizeof label, "%s%s%s", a->ref, a->pipeline ? " -p " : " vs ", a->pipeline ? a->pipeline : a->cand);
        rc = res.pass ? EXIT_OK : EXIT_INVALID;
        if (a->json) {
            ir_strbuf_init(&b);
            ir_validate_report_json(&res, label, &b);
            if (!write_text(a->json, &b)) rc = EXIT_ERROR;
            ir_strbuf_free(&b);
        }
        if (a->junit) {
            IrDiag d;
            cli_diag_init(&d);
            const char *labels[1] = {label};
            const IrValidateResult *rs[1] = {&res};
            if (ir_validate_report_junit(a->junit, "irtool.validate", 1, labels, rs, NULL, &d)) rc = EXIT_ERROR;
        }
        if (a->reduce) {
            if (!res.div.found) fprintf(stderr, "irtool validate: --reduce: no diverging node to reduce\n");
            else if (write_reduced(ref, cand, &res, a->reduce) != EXIT_OK) rc = EXIT_ERROR;
        }
    }
    ir_validate_result_free(&res);
    irt_free(art);
    ir_graph_destroy(ref);
    ir_graph_destroy(cand);
    return rc;
}

/* ---- corpus mode --------------------------------------------------------------------------- */

typedef struct Entry {
    char *name, *model, *inputs, *pipeline;
} Entry;

typedef struct Outcome {
    enum { OC_OK, OC_SKIP, OC_ERROR } kind;
    char *msg;
    IrValidateResult res; /* outputs and div (names only) */
} Outcome;

static char *resolve_path(const ValArgs *a, const char *p) {
    char buf[4096];
    if (!strncmp(p, "${SHARED}", 9)) {
        const char *sh = getenv("IRTOOL_SHARED_DIR");
        if (sh && *sh) snprintf(buf, sizeof buf, "%s%s", sh, p + 9);
        else snprintf(buf, sizeof buf, "%s/../shared%s", a->root ? a->root : ".", p + 9);
    } else if (p[0] == '/' || !a->root) snprintf(buf, sizeof buf, "%s", p);
    else snprintf(buf, sizeof buf, "%s/%s", a->root, p);
    return strdup(buf);
}

static Entry *read_manifest(const char *dir, size_t *count) {
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "irtool validate: cannot read %s: %s\n", path, strerror(errno));
        return NULL;
    }
    Entry *e = NULL;
    size_t n = 0, cap = 0;
    char line[4096];
    int lineno = 0;
    bool bad = false;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *h = strchr(line, '#');
        if (h) *h = 0;
        char *save = NULL, *f1 = strtok_r(line, " \t\r\n", &save);
        if (!f1) continue;
        char *f2 = strtok_r(NULL, " \t\r\n", &save), *f3 = strtok_r(NULL, " \t\r\n", &save);
        char *f4 = strtok_r(NULL, " \t\r\n", &save);
        if (!f2 || !f3 || !f4 || strtok_r(NULL, " \t\r\n", &save)) {
            fprintf(stderr, "%s:%d: error: expected 'NAME MODEL INPUTS PIPELINE'\n", path, lineno);
            bad = true;
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            Entry *ne = realloc(e, cap * sizeof *ne);
            if (!ne) break;
            e = ne;
        }
        e[n++] = (Entry){strdup(f1), strdup(f2), strdup(f3), strdup(f4)};
    }
    fclose(f);
    if (bad) {
        for (size_t i = 0; i < n; i++) free(e[i].name), free(e[i].model), free(e[i].inputs), free(e[i].pipeline);
        free(e);
        return NULL;
    }
    *count = n;
    if (!e) e = calloc(1, sizeof *e);
    return e;
}

/* Runs one entry (in a child process when --jobs > 1). */
static void run_entry(const ValArgs *a, const Entry *e, Outcome *o) {
    memset(o, 0, sizeof *o);
    char *model = resolve_path(a, e->model);
    struct stat st;
    if (!model || stat(model, &st) != 0) {
        o->kind = OC_SKIP;
        o->msg = strdup("model file not found");
        free(model);
        return;
    }
    IrGraph *ref = NULL, *cand = NULL;
    const char *pipe = strcmp(e->pipeline, "-") ? e->pipeline : NULL;
    if (load_pair(model, NULL, pipe, &ref, &cand)) {
        o->kind = OC_ERROR;
        o->msg = strdup("cannot load the model or run the pipeline");
        free(model);
        return;
    }
    const char *specs[16];
    int ns = 0;
    bool random = !strncmp(e->inputs, "random:", 7);
    char *copy = strdup(e->inputs);
    char *paths[16] = {0};
    if (!random && copy)
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && ns < 16; t = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(t, '=');
            if (eq) {
                *eq = 0;
                char *rp = resolve_path(a, eq + 1);
                size_t need = strlen(t) + (rp ? strlen(rp) : 0) + 2;
                paths[ns] = malloc(need);
                if (paths[ns] && rp) snprintf(paths[ns], need, "%s=%s", t, rp);
                free(rp);
            } else paths[ns] = resolve_path(a, t);
            specs[ns] = paths[ns];
            ns++;
        }
    uint64_t seed = random ? strtoull(e->inputs + 7, NULL, 10) : 0;
    IrStatus s = validate_once(ref, cand, NULL, specs, ns, random, seed, &a->opt, &o->res);
    if (s) {
        o->kind = OC_ERROR;
        o->msg = strdup(ir_status_name(s));
    }
    for (int i = 0; i < ns; i++) free(paths[i]);
    free(copy);
    free(model);
    ir_graph_destroy(ref);
    ir_graph_destroy(cand);
}

/* Results travel from child processes as text lines (hex floats, exact). */
static void outcome_write(FILE *f, size_t idx, const Outcome *o) {
    fprintf(f, "E\t%zu\t%d\t%s\n", idx, (int)o->kind, o->msg ? o->msg : "");
    for (uint32_t i = 0; i < o->res.n_outputs; i++) {
        const IrOutputResult *r = &o->res.outputs[i];
        const IrCompareMetrics *m = &r->m;
        fprintf(f, "O\t%zu\t%s\t%d\t%d\t%a\t%a\t%a\t%a\t%a\t%llu\t%a\t%a\t%a\t%a\t%a\t%d\n", idx, r->name, m->pass,
                m->comparable, m->max_abs_err, m->max_rel_err, m->mean_abs_err, m->rms_err, m->cosine,
                (unsigned long long)m->max_ulp, m->frac_within, m->min_rtol, m->min_atol, r->tol.min_cosine,
                m->argmax_agreement, r->tol.by_cosine);
    }
    const IrDivergence *d = &o->res.div;
    if (d->found)
        fprintf(f, "D\t%zu\t%s\t%s\t%s\t%s\n", idx, d->node_name[0] ? d->node_name : "-", d->op,
                d->location[0] ? d->location : "-", d->ref_nodes[0] ? d->ref_nodes : "-");
}

static char *field(char **save) { return strtok_r(NULL, "\t\n", save); }

static void outcome_read_line(char *line, Outcome *all, size_t n) {
    char *save = NULL, *tag = strtok_r(line, "\t\n", &save), *ix = field(&save);
    if (!tag || !ix) return;
    size_t idx = strtoull(ix, NULL, 10);
    if (idx >= n) return;
    Outcome *o = &all[idx];
    if (tag[0] == 'E') {
        char *k = field(&save), *msg = field(&save);
        o->kind = k ? atoi(k) : OC_ERROR;
        o->msg = msg && *msg ? strdup(msg) : NULL;
        o->res.pass = true;
    } else if (tag[0] == 'O') {
        IrOutputResult *no = realloc(o->res.outputs, (o->res.n_outputs + 1) * sizeof *no);
        if (!no) return;
        o->res.outputs = no;
        IrOutputResult *r = &no[o->res.n_outputs++];
        memset(r, 0, sizeof *r);
        char *f[15];
        for (int i = 0; i < 15; i++) f[i] = field(&save);
        if (!f[14]) return;
        r->name = strdup(f[0]);
        r->m.pass = atoi(f[1]);
        r->m.comparable = atoi(f[2]);
        r->m.max_abs_err = strtod(f[3], NULL);
        r->m.max_rel_err = strtod(f[4], NULL);
        r->m.mean_abs_err = strtod(f[5], NULL);
        r->m.rms_err = strtod(f[6], NULL);
        r->m.cosine = strtod(f[7], NULL);
        r->m.max_ulp = strtoull(f[8], NULL, 10);
        r->m.frac_within = strtod(f[9], NULL);
        r->m.min_rtol = strtod(f[10], NULL);
        r->m.min_atol = strtod(f[11], NULL);
        r->tol.min_cosine = strtod(f[12], NULL);
        r->m.argmax_agreement = strtod(f[13], NULL);
        r->tol.by_cosine = atoi(f[14]);
        if (!r->m.comparable) snprintf(r->m.reason, sizeof r->m.reason, "shapes differ");
        if (!r->m.pass) o->res.pass = false;
    } else if (tag[0] == 'D') {
        char *f[4];
        for (int i = 0; i < 4; i++) f[i] = field(&save);
        IrDivergence *d = &o->res.div;
        d->found = true;
        d->node_name = strdup(f[0] && strcmp(f[0], "-") ? f[0] : "");
        d->op = strdup(f[1] ? f[1] : "");
        d->location = strdup(f[2] && strcmp(f[2], "-") ? f[2] : "");
        d->ref_nodes = strdup(f[3] && strcmp(f[3], "-") ? f[3] : "");
        d->value = strdup("");
        d->note = strdup("");
    }
}

/* Runs the selected entries over `jobs` processes; outcomes come back in entry order. */
static bool run_entries(const ValArgs *a, const Entry *e, const size_t *sel, size_t n_sel, Outcome *all, size_t n) {
    int jobs = a->jobs < (int)n_sel ? a->jobs : (int)(n_sel ? n_sel : 1);
    FILE **tmp = calloc((size_t)jobs, sizeof *tmp);
    pid_t *pids = calloc((size_t)jobs, sizeof *pids);
    if (!tmp || !pids) return false;
    CliProgress prog; /* on a terminal: entries done of total (job 0 speaks for all), time */
    cli_progress_init(&prog, "irtool validate --corpus", a->quiet);
    fflush(stdout);
    fflush(stderr);
    for (int j = 0; j < jobs; j++) {
        tmp[j] = tmpfile();
        if (!tmp[j]) return false;
        pids[j] = fork();
        if (pids[j] < 0) return false;
        if (pids[j] == 0) {
            for (size_t k = (size_t)j; k < n_sel; k += (size_t)jobs) {
                Outcome o;
                run_entry(a, &e[sel[k]], &o);
                outcome_write(tmp[j], sel[k], &o);
                fflush(tmp[j]);
                if (jobs == 1 || j == 0) /* job 0 speaks for all; about k + 1 of every jobs entries are done */
                    cli_progress_stage(&prog, "about %zu of %zu entries done (%s)", (k + 1) < n_sel ? k + 1 : n_sel, n_sel,
                                       e[sel[k]].name);
                free(o.msg);
                ir_validate_result_free(&o.res);
            }
            free(tmp);
            free(pids);
            _exit(0);
        }
    }
    bool ok = true;
    for (int j = 0; j < jobs; j++) {
        int st = 0;
        if (waitpid(pids[j], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) ok = false;
        rewind(tmp[j]);
        char line[8192];
        while (fgets(line, sizeof line, tmp[j])) outcome_read_line(line, all, n);
        fclose(tmp[j]);
    }
    prog.drawn = prog.on; /* the children drew it */
    cli_progress_clear(&prog);
    free(tmp);
    free(pids);
    return ok;
}

typedef struct BaseRow {
    char *entry, *output;
    double max_abs, cosine;
} BaseRow;

/* One row of the baseline: {"entry": S, "output": S, "max_abs_err": N|null, "cosine": N|null}
 * (other members are ignored); null reads as NaN, which bounds nothing. */
static bool read_row(const json_t *r, const IrJsonAt *at, BaseRow *row) {
    if (!ir_json_check(r, IR_JSON_OBJECT, at)) return false;
    const json_t *en = ir_json_member(r, "entry", IR_JSON_STRING, true, at);
    const json_t *out = ir_json_member(r, "output", IR_JSON_STRING, true, at);
    const json_t *ma = ir_json_member(r, "max_abs_err", IR_JSON_NUMBER_OR_NULL, true, at);
    const json_t *co = ir_json_member(r, "cosine", IR_JSON_NUMBER_OR_NULL, true, at);
    if (!en || !out || !ma || !co) return false;
    *row = (BaseRow){strdup(json_string_value(en)), strdup(json_string_value(out)), ir_json_number_value(ma),
                     ir_json_number_value(co)};
    return row->entry && row->output;
}

/* The baseline file: {"entries": [row...]} with each (entry, output) once; any layout and member
 * order. IR_EIO when it cannot be read, IR_ESYNTAX (reported at the place) when it is not that
 * shape. */
static IrStatus read_baseline(const char *path, IrDiag *d, BaseRow **rows_out, size_t *n) {
    *rows_out = NULL;
    *n = 0;
    json_t *doc = NULL;
    IrStatus s = ir_json_load(path, d, &doc);
    if (s) return s;
    IrJsonAt at = {.file = path, .diag = d};
    const json_t *entries = ir_json_check(doc, IR_JSON_OBJECT, &at) ? ir_json_member(doc, "entries", IR_JSON_ARRAY, true, &at)
                                                                  : NULL;
    size_t m = entries ? json_array_size(entries) : 0;
    BaseRow *rows = calloc(m + 1, sizeof *rows);
    s = !entries ? IR_ESYNTAX : rows ? IR_OK : IR_ENOMEM;
    IrJsonAt eat = ir_json_at_key(&at, "entries");
    for (size_t i = 0; !s && i < m; i++) {
        IrJsonAt rat = ir_json_at_index(&eat, i);
        if (!read_row(json_array_get(entries, i), &rat, &rows[i])) s = IR_ESYNTAX;
        for (size_t j = 0; !s && j < i; j++)
            if (!strcmp(rows[i].entry, rows[j].entry) && !strcmp(rows[i].output, rows[j].output)) {
                ir_diag_report(d, IR_SEV_ERROR, path, 0, 0, NULL, 0, "%s: entry '%s' output '%s' again (first at entries[%zu])",
                               rat.path, rows[i].entry, rows[i].output, j);
                s = IR_ESYNTAX;
            }
        *n = i + 1;
    }
    json_decref(doc);
    if (s) {
        for (size_t i = 0; i < *n; i++) free(rows[i].entry), free(rows[i].output);
        free(rows);
        *n = 0;
        return s;
    }
    *rows_out = rows;
    *n = m;
    return IR_OK;
}

static json_t *baseline_row(const char *entry, const IrOutputResult *r) {
    json_t *o = json_object();
    bool ok = ir_json_set(o, "entry", ir_json_string(entry));
    ok &= ir_json_set(o, "output", ir_json_string(r->name));
    ok &= ir_json_set(o, "max_abs_err", ir_json_real(r->m.max_abs_err));
    ok &= ir_json_set(o, "cosine", ir_json_real(r->m.cosine));
    return ok ? o : (json_decref(o), NULL);
}

static const BaseRow *find_row(const BaseRow *rows, size_t n, const char *entry, const char *output) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].entry, entry) && !strcmp(rows[i].output, output)) return &rows[i];
    return NULL;
}

static void free_baseline(BaseRow *base, size_t nb) {
    for (size_t i = 0; i < nb; i++) free(base[i].entry), free(base[i].output);
    free(base);
}

static int validate_corpus(ValArgs *a) {
    /* the baseline first: a bad one is reported before the corpus runs */
    size_t nb = 0;
    BaseRow *base = NULL;
    if (!a->update_baseline) {
        IrDiag d;
        cli_diag_init(&d);
        IrStatus bs = read_baseline(a->baseline, &d, &base, &nb);
        if (bs == IR_EIO) fprintf(stderr, "irtool validate: cannot read baseline %s (create it with --update-baseline)\n", a->baseline);
        if (bs) return EXIT_ERROR;
    }
    size_t n = 0;
    Entry *e = read_manifest(a->corpus, &n);
    if (!e) {
        free_baseline(base, nb);
        return EXIT_ERROR;
    }
    size_t *sel = calloc(n + 1, sizeof *sel), n_sel = 0;
    Outcome *all = calloc(n + 1, sizeof *all);
    if (!sel || !all) return EXIT_ERROR;
    for (size_t i = 0; i < n; i++)
        if ((int)(i % (size_t)a->shard_n) == a->shard_i) sel[n_sel++] = i;
    if (!run_entries(a, e, sel, n_sel, all, n)) {
        fprintf(stderr, "irtool validate: a worker process failed\n");
        free_baseline(base, nb);
        return EXIT_ERROR;
    }
    int failed = 0, errors = 0, skipped = 0, passed = 0;
    const char **labels = calloc(n_sel + 1, sizeof *labels), **errs = calloc(n_sel + 1, sizeof *errs);
    const IrValidateResult **rs = calloc(n_sel + 1, sizeof *rs);
    json_t *nbase = json_object(), *nrows = json_array(); /* the baseline of this run */
    bool nb_ok = ir_json_set(nbase, "margin", json_string("max_abs_err <= 2 * baseline + 1e-7, cosine >= baseline - 1e-6"));
    nb_ok &= ir_json_set(nbase, "entries", json_incref(nrows));
    for (size_t k = 0; k < n_sel; k++) {
        size_t i = sel[k];
        Outcome *o = &all[i];
        labels[k] = e[i].name;
        if (o->kind == OC_SKIP) {
            printf("skip %s: %s (%s)\n", e[i].name, o->msg ? o->msg : "", e[i].model);
            skipped++;
            continue;
        }
        if (o->kind == OC_ERROR) {
            printf("error %s: %s\n", e[i].name, o->msg ? o->msg : "");
            errs[k] = o->msg ? o->msg : "error";
            errors++;
            continue;
        }
        rs[k] = &o->res;
        bool ok = true;
        for (uint32_t j = 0; j < o->res.n_outputs; j++) {
            IrOutputResult *r = &o->res.outputs[j];
            nb_ok &= ir_json_push(nrows, baseline_row(e[i].name, r));
            char why[256] = "";
            if (!r->m.pass) snprintf(why, sizeof why, "out of tolerance");
            if (!a->update_baseline) {
                const BaseRow *b = find_row(base, nb, e[i].name, r->name);
                if (!b) snprintf(why, sizeof why, "not in the baseline");
                else if (r->m.max_abs_err > 2 * b->max_abs + 1e-7)
                    snprintf(why, sizeof why, "max_abs_err %.6g > 2 x baseline %.6g + 1e-7", r->m.max_abs_err, b->max_abs);
                else if (isfinite(b->cosine) && r->m.cosine < b->cosine - 1e-6)
                    snprintf(why, sizeof why, "cosine %.9g < baseline %.9g - 1e-6", r->m.cosine, b->cosine);
            }
            if (why[0]) {
                ok = false;
                r->m.pass = false;
                size_t wl = strlen(why);
                if (wl >= sizeof r->m.reason) wl = sizeof r->m.reason - 1;
                memcpy(r->m.reason, why, wl); /* the reason field is shorter: keep its start */
                r->m.reason[wl] = 0;
                printf("fail %s %s: %s (max_abs_err=%.6g cosine=%.9g)", e[i].name, r->name, why, r->m.max_abs_err,
                       r->m.cosine);
                if (o->res.div.found)
                    printf("; first diverging node '%s' (%s)%s%s", o->res.div.node_name, o->res.div.op,
                           o->res.div.location[0] ? " at " : "", o->res.div.location);
                printf("\n");
            }
        }
        if (ok) printf("pass %s (%s, %s)\n", e[i].name, e[i].pipeline, e[i].inputs);
        ok ? passed++ : failed++;
    }
    printf("%d passed, %d failed, %d errors, %d skipped\n", passed, failed, errors, skipped);
    int rc = errors ? EXIT_ERROR : failed ? EXIT_INVALID : EXIT_OK;
    if (a->update_baseline) {
        IrDiag d;
        cli_diag_init(&d);
        if (!nb_ok || ir_json_write_file(nbase, IR_JSON_ROWS, a->baseline, &d)) rc = EXIT_ERROR;
        else printf("baseline written: %s\n", a->baseline);
        if (rc == EXIT_INVALID) rc = EXIT_OK; /* the new baseline records the current state */
    }
    if (a->junit) {
        IrDiag d;
        cli_diag_init(&d);
        if (ir_validate_report_junit(a->junit, "irtool.validate.corpus", (uint32_t)n_sel, labels, rs, errs, &d))
            rc = EXIT_ERROR;
    }
    json_decref(nrows);
    json_decref(nbase);
    free_baseline(base, nb);
    for (size_t i = 0; i < n; i++) {
        free(all[i].msg);
        ir_validate_result_free(&all[i].res);
        free(e[i].name), free(e[i].model), free(e[i].inputs), free(e[i].pipeline);
    }
    free(all), free(e), free(sel), free(labels), free(errs), free(rs);
    return rc;
}

int cmd_validate(int argc, char **argv) {
    ValArgs a;
    int rc = parse_args(argc, argv, &a);
    const char *outs[3] = {a.json, a.junit, a.reduce};
    for (int k = 0; k < 3 && rc == EXIT_OK; k++)
        if (cli_refuse_clobber("validate", outs[k], argc, argv)) rc = EXIT_ERROR;
    if (rc == EXIT_OK) rc = a.corpus ? validate_corpus(&a) : validate_pair(&a);
    for (uint32_t i = 0; i < a.n_tols; i++) free((char *)a.tols[i].output);
    free(a.tols);
    free(a.inputs);
    return rc;
}

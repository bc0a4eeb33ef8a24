/* irtool run: runs a model on .npy inputs with the reference interpreter, prints a summary of
 * each output and optionally writes outputs and every intermediate value as .npy files.
 * File names come from value names, sanitized to [A-Za-z0-9_.-] and disambiguated in value
 * order, so the same model always writes the same files. A sequence writes one file per
 * element (NAME_0.npy, NAME_1.npy, ...), an optional what it holds; their inputs are ONNX
 * SequenceProto / OptionalProto .pb files.
 */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "cli.h"
#include "validate/validate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- file names ---------------------------------------------------------------------------- */

typedef struct NameSet {
    char **names;
    size_t n, cap;
} NameSet;

static bool nameset_has(const NameSet *s, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return true;
    return false;
}

/* Sanitized, unique file stem for `name` (malloc'd, also recorded in s); NULL on OOM. */
static char *unique_stem(NameSet *s, const char *name) {
    size_t n = strlen(name);
    char *base = malloc(n + 2);
    if (!base) return NULL;
    size_t k = 0;
    if (n == 0 || name[0] == '.') base[k++] = '_'; /* never "", "." or ".." or a hidden file */
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '-';
        base[k++] = ok ? c : '_';
    }
    base[k] = 0;
    char *out = base;
    for (int i = 2; nameset_has(s, out); i++) {
        if (out != base) free(out);
        out = malloc(k + 24);
        if (!out) {
            free(base);
            return NULL;
        }
        snprintf(out, k + 24, "%s_%d", base, i);
    }
    if (out != base) free(base);
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        char **p = realloc(s->names, cap * sizeof *p);
        if (!p) {
            free(out);
            return NULL;
        }
        s->names = p;
        s->cap = cap;
    }
    s->names[s->n++] = out;
    return out;
}

static void nameset_free(NameSet *s) {
    for (size_t i = 0; i < s->n; i++) free(s->names[i]);
    free(s->names);
}

static bool mkdir_p(const char *dir) {
    char *p = strdup(dir);
    if (!p) return false;
    for (char *q = p + 1; *q; q++) {
        if (*q != '/') continue;
        *q = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            free(p);
            return false;
        }
        *q = '/';
    }
    bool ok = mkdir(p, 0777) == 0 || errno == EEXIST;
    free(p);
    struct stat st;
    return ok && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static char *path_join(const char *dir, const char *stem, const char *ext) {
    size_t n = strlen(dir) + strlen(stem) + strlen(ext) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s%s", dir, stem, ext);
    return p;
}

/* ---- summaries ----------------------------------------------------------------------------- */

static void print_summary(const char *name, const IrTensor *t) {
    char shape[256];
    ir_tensor_shape_str(t, shape, sizeof shape);
    int64_t n = ir_tensor_numel(t), nans = 0, finite = 0;
    if (t->dtype == IR_DTYPE_STRING) { /* the first few strings, quoted */
        printf("%s: %s", name, shape);
        const IrStringElem *el = t->data;
        for (int64_t i = 0; i < n && i < 4; i++)
            printf("%s\"%.*s\"", i ? ", " : " ", (int)(el[i].len > 40 ? 40 : el[i].len), el[i].len ? el[i].data : "");
        printf("%s\n", n > 4 ? ", ..." : n ? "" : " (empty)");
        return;
    }
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = ir_elem_get_f64(t->dtype, t->data, (size_t)i);
        if (isnan(v)) {
            nans++;
            continue;
        }
        if (v < mn) mn = v;
        if (v > mx) mx = v;
        sum += v;
        finite++;
    }
    printf("%s: %s", name, shape);
    if (finite) printf(" min=%.6g max=%.6g mean=%.6g", mn, mx, sum / (double)finite);
    else if (!n) printf(" (empty)");
    if (nans) printf(" nan=%lld", (long long)nans);
    printf("\n");
}

/* Sequences: a header line, then one summary line per element (`name[k]`); optionals: the
 * content's summary, or `(empty)`. */
static void print_value(const char *name, const IrTensor *t) {
    if (t->form == IR_TYPE_TENSOR) {
        print_summary(name, t);
        return;
    }
    char shape[256];
    ir_tensor_shape_str(t, shape, sizeof shape);
    printf("%s: %s\n", name, shape);
    for (uint32_t k = 0; k < t->n_items; k++) {
        char sub[512];
        if (t->form == IR_TYPE_SEQ) snprintf(sub, sizeof sub, "%s[%u]", name, k);
        else snprintf(sub, sizeof sub, "%s.value", name);
        print_value(sub, &t->items[k]);
    }
}

/* The command line, for cli_refuse_clobber: an output file never replaces an input. */
typedef struct Argv {
    int argc;
    char **argv;
} Argv;

/* Writes DIR/STEM.npy for a tensor; for a sequence DIR/STEM_0.npy, DIR/STEM_1.npy, ... (one
 * per element, none when empty); for an optional what it holds under the same stem (nothing
 * when empty). */
static bool write_value(const char *dir, const char *stem, const IrTensor *t, const Argv *av, IrDiag *d) {
    if (t->form == IR_TYPE_OPT) return !t->n_items || write_value(dir, stem, &t->items[0], av, d);
    if (t->form == IR_TYPE_SEQ) {
        for (uint32_t k = 0; k < t->n_items; k++) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s_%u", stem, k);
            if (!write_value(dir, sub, &t->items[k], av, d)) return false;
        }
        return true;
    }
    char *path = path_join(dir, stem, ".npy");
    bool ok = path && !cli_refuse_clobber("run", path, av->argc, av->argv) && !ir_npy_write(path, t, d);
    free(path);
    return ok;
}

/* ---- dumping intermediates ----------------------------------------------------------------- */

typedef struct Dump {
    const char *dir;
    const Argv *av;
    char **stems; /* by value id; NULL until first needed */
    NameSet names;
    IrDiag diag;
    bool failed;
} Dump;

static void dump_value(void *user, const IrGraph *g, IrValueId v, const IrTensor *t) {
    Dump *d = user;
    if (d->failed) return;
    if (!d->stems[v]) d->stems[v] = unique_stem(&d->names, ir_value_name(g, v));
    if (!d->stems[v] || !write_value(d->dir, d->stems[v], t, d->av, &d->diag)) d->failed = true;
}

/* ---- arguments ----------------------------------------------------------------------------- */

typedef struct RunArgs {
    const char *model, *out_dir, *dump_dir;
    bool llvm; /* --backend llvm: compile in memory with the LLVM backend */
    const char *winograd; /* --winograd 4|2|off (llvm backend) */
    const char **input_specs;
    int n_specs;
    Argv av;
} RunArgs;

static int parse_args(int argc, char **argv, RunArgs *ra) {
    memset(ra, 0, sizeof *ra);
    ra->av = (Argv){argc, argv};
    ra->input_specs = calloc((size_t)argc, sizeof *ra->input_specs);
    if (!ra->input_specs) return EXIT_INVALID;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **target = NULL;
        if (strcmp(a, "--input") == 0 || strcmp(a, "-i") == 0) {
            if (++i >= argc) return cli_usage_error("run", "--input needs NAME=FILE.npy or FILE.npy");
            ra->input_specs[ra->n_specs++] = argv[i];
            continue;
        }
        if (strncmp(a, "--input=", 8) == 0) {
            ra->input_specs[ra->n_specs++] = a + 8;
            continue;
        }
        if (strcmp(a, "--backend") == 0 || strncmp(a, "--backend=", 10) == 0) {
            const char *v = a[9] == '=' ? a + 10 : (++i < argc ? argv[i] : NULL);
            if (!v || (strcmp(v, "interp") != 0 && strcmp(v, "llvm") != 0))
                return cli_usage_error("run", "--backend takes interp or llvm");
            ra->llvm = strcmp(v, "llvm") == 0;
            continue;
        }
        if (strcmp(a, "--winograd") == 0 || strncmp(a, "--winograd=", 11) == 0) {
            int rc = cli_winograd_arg("run", a, argc, argv, &i, &ra->winograd);
            if (rc) return rc;
            continue;
        }
        if (strcmp(a, "--output-dir") == 0 || strcmp(a, "-o") == 0) target = &ra->out_dir;
        else if (strcmp(a, "--dump-intermediates") == 0) target = &ra->dump_dir;
        if (target) {
            if (++i >= argc) return cli_usage_error("run", "%s needs a directory", a);
            *target = argv[i];
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("run", "unknown option '%s'", a);
        } else if (ra->model) {
            return cli_usage_error("run", "only one MODEL is accepted (inputs go after --input)");
        } else {
            ra->model = a;
        }
    }
    if (!ra->model) return cli_usage_error("run", "missing MODEL");
    if (ra->winograd && !ra->llvm) return cli_usage_error("run", "--winograd needs --backend llvm");
    return EXIT_OK;
}


/* Assigns each --input to a graph input: by name, else the next unassigned position. */
static int assign_inputs(const IrGraph *g, const RunArgs *ra, const char **files) {
    uint32_t n = ir_graph_num_inputs(g);
    int rc = cli_assign_graph_inputs("run", g, (const char *const *)ra->input_specs, ra->n_specs, files);
    if (rc) return rc;
    for (uint32_t i = 0; i < n; i++)
        if (!files[i]) {
            char ty[256];
            IrStrBuf b;
            ir_strbuf_init(&b);
            ir_type_print(g, ir_value_type(g, ir_graph_input(g, i)), &b);
            snprintf(ty, sizeof ty, "%s", b.data ? b.data : "?");
            ir_strbuf_free(&b);
            return cli_usage_error("run", "missing input '%s' (%s): pass --input %s=FILE.npy",
                                   ir_value_name(g, ir_graph_input(g, i)), ty, ir_value_name(g, ir_graph_input(g, i)));
        }
    return EXIT_OK;
}

/* ---- the command --------------------------------------------------------------------------- */

static int write_outputs(const IrGraph *g, const IrTensor *outs, const char *dir, const Argv *av) {
    NameSet ns = {0};
    int rc = EXIT_OK;
    IrDiag d;
    cli_diag_init(&d);
    for (uint32_t i = 0; i < ir_graph_num_outputs(g) && rc == EXIT_OK; i++) {
        char *stem = unique_stem(&ns, ir_value_name(g, ir_graph_output(g, i)));
        if (!stem || !write_value(dir, stem, &outs[i], av, &d)) rc = EXIT_INVALID;
    }
    nameset_free(&ns);
    return rc;
}

static int run_loaded(IrGraph *g, const RunArgs *ra) {
    uint32_t n_in = ir_graph_num_inputs(g), n_out = ir_graph_num_outputs(g);
    const char **files = calloc(n_in + 1, sizeof *files);
    IrTensor *ins = calloc(n_in + 1, sizeof *ins), *outs = calloc(n_out + 1, sizeof *outs);
    Dump dump = {0};
    int rc = EXIT_OK;
    IrDiag d;
    cli_diag_init(&d);
    if (!files || !ins || !outs) {
        rc = EXIT_INVALID;
        goto out;
    }
    if ((rc = assign_inputs(g, ra, files))) goto out;
    for (uint32_t i = 0; i < n_in && !rc; i++) {
        /* sequences and optionals come as ONNX SequenceProto / OptionalProto .pb files */
        IrTypeKind form = ir_type_kind(g, ir_value_type(g, ir_graph_input(g, i)));
        size_t fl = strlen(files[i]);
        bool pb = fl > 3 && strcmp(files[i] + fl - 3, ".pb") == 0;
        if (form != IR_TYPE_TENSOR && !pb) {
            fprintf(stderr, "irtool run: input '%s' is %s: pass it as an ONNX %s .pb file\n",
                    ir_value_name(g, ir_graph_input(g, i)), form == IR_TYPE_SEQ ? "a sequence" : "an optional",
                    form == IR_TYPE_SEQ ? "SequenceProto" : "OptionalProto");
            rc = EXIT_INVALID;
        } else if (pb ? ir_pb_value_read(files[i], form, &d, &ins[i])
                      : cli_read_input(files[i], ir_value_name(g, ir_graph_input(g, i)), &d, &ins[i])) {
            rc = EXIT_INVALID;
        }
    }
    if (rc) goto out;
    const char *dirs[2] = {ra->out_dir, ra->dump_dir};
    for (int k = 0; k < 2; k++)
        if (dirs[k] && !mkdir_p(dirs[k])) {
            const char *dir = dirs[k];
            fprintf(stderr, "irtool run: cannot create directory '%s': %s\n", dir, strerror(errno));
            rc = EXIT_INVALID;
            goto out;
        }
    IrInterpOptions opt = {0};
    if (ra->dump_dir) {
        dump.dir = ra->dump_dir;
        dump.av = &ra->av;
        dump.stems = calloc(ir_graph_num_values(g) + 1, sizeof *dump.stems);
        if (!dump.stems) {
            rc = EXIT_INVALID;
            goto out;
        }
        cli_diag_init(&dump.diag);
        opt.on_value = dump_value;
        opt.user = &dump;
    }
    if (ra->llvm) {
        IrLlvmProgram *prog = NULL;
        if (ra->dump_dir) {
            rc = cli_usage_error("run", "--dump-intermediates needs --backend interp");
            goto out;
        }
        cli_apply_winograd(g, ra->winograd);
        IrStatus s = llvm_specialize_inputs(g, ins, n_in, &d);
        if (!s) s = llvm_program_create(g, &d, &prog);
        if (!s) s = llvm_program_run(prog, ins, n_in, outs, &d);
        llvm_program_destroy(prog);
        if (s) {
            rc = cli_exit_for(s);
            goto out;
        }
    } else if (ir_interp_run(g, ins, n_in, outs, &opt, &d)) {
        rc = EXIT_INVALID;
        goto out;
    }
    for (uint32_t i = 0; i < n_out; i++) print_value(ir_value_name(g, ir_graph_output(g, i)), &outs[i]);
    if (ra->out_dir) rc = write_outputs(g, outs, ra->out_dir, &ra->av);
    if (dump.failed) rc = EXIT_INVALID;
out:
    for (uint32_t i = 0; ins && i < n_in; i++) ir_tensor_free(&ins[i]);
    for (uint32_t i = 0; outs && i < n_out; i++) ir_tensor_free(&outs[i]);
    if (dump.stems) free(dump.stems); /* the strings belong to dump.names */
    nameset_free(&dump.names);
    free(files);
    free(ins);
    free(outs);
    return rc;
}

/* ---- artifacts (.irx, issue 8): run through libirtool-runtime -------------------------------- */

static int run_artifact(const RunArgs *ra) {
    char err[1024];
    if (ra->dump_dir) return cli_usage_error("run", "--dump-intermediates is not supported for .irx artifacts");
    IrtArtifact *a = irt_load(ra->model, err, sizeof err);
    if (!a) {
        fprintf(stderr, "irtool run: %s: %s\n", ra->model, err);
        return EXIT_INVALID;
    }
    uint32_t n_in = irt_num_inputs(a), n_out = irt_num_outputs(a);
    const char **files = calloc(n_in + 1, sizeof *files);
    IrTensor *ins = calloc(n_in + 1, sizeof *ins);
    IrtTensor *rins = calloc(n_in + 1, sizeof *rins), *outs = calloc(n_out + 1, sizeof *outs);
    int rc = files && ins && rins && outs ? EXIT_OK : EXIT_INVALID;
    bool ran = false;
    IrDiag d;
    cli_diag_init(&d);
    const char **names = calloc(n_in + 1, sizeof *names);
    if (!names) rc = EXIT_INVALID;
    for (uint32_t i = 0; !rc && i < n_in; i++) names[i] = irt_input_name(a, i);
    if (!rc) rc = cli_assign_inputs("run", names, n_in, (const char *const *)ra->input_specs, ra->n_specs, files);
    free(names);
    for (uint32_t i = 0; i < n_in && !rc; i++) {
        if (!files[i]) {
            rc = cli_usage_error("run", "missing input '%s': pass --input %s=FILE.npy", irt_input_name(a, i),
                                 irt_input_name(a, i));
            break;
        }
        if (cli_read_input(files[i], irt_input_name(a, i), &d, &ins[i])) { rc = EXIT_INVALID; break; }
        rins[i].dtype = irt_dtype_code(a, ir_dtype_name(ins[i].dtype)); /* by name: codes are the manifest's */
        rins[i].rank = ins[i].rank;
        for (uint32_t k = 0; k < ins[i].rank && k < IRT_MAX_RANK; k++) rins[i].dims[k] = ins[i].dims[k];
        rins[i].data = ins[i].data;
    }
    if (!rc) {
        if (irt_run(a, rins, outs, err, sizeof err)) {
            fprintf(stderr, "irtool run: %s\n", err);
            rc = EXIT_INVALID;
        } else ran = true;
    }
    if (!rc && ra->out_dir && !mkdir_p(ra->out_dir)) {
        fprintf(stderr, "irtool run: cannot create directory '%s': %s\n", ra->out_dir, strerror(errno));
        rc = EXIT_INVALID;
    }
    NameSet ns = {0};
    for (uint32_t i = 0; ran && i < n_out; i++) {
        const char *dn = irt_dtype_name(a, outs[i].dtype);
        IrTensor t;
        cli_tensor_of_irt(a, &outs[i], &t);
        if (!t.dtype || ir_dtype_size(t.dtype) != irt_dtype_size(a, outs[i].dtype)) { /* the loader checks it too */
            fprintf(stderr, "irtool run: %s: output '%s' has an unknown element type '%s'\n", ra->model, irt_output_name(a, i), dn);
            rc = EXIT_INVALID;
            break;
        }
        print_summary(irt_output_name(a, i), &t);
        if (!rc && ra->out_dir) {
            char *stem = unique_stem(&ns, irt_output_name(a, i));
            char *path = stem ? path_join(ra->out_dir, stem, ".npy") : NULL;
            if (!path || cli_refuse_clobber("run", path, ra->av.argc, ra->av.argv) || ir_npy_write(path, &t, &d)) rc = EXIT_INVALID;
            free(path);
        }
    }
    nameset_free(&ns);
    for (uint32_t i = 0; ran && i < n_out; i++) free(outs[i].data);
    for (uint32_t i = 0; ins && i < n_in; i++) ir_tensor_free(&ins[i]);
    free(files);
    free(ins);
    free(rins);
    free(outs);
    irt_free(a);
    return rc;
}

static bool is_artifact_path(const char *p) {
    size_t n = strlen(p);
    return n > 4 && strcmp(p + n - 4, ".irx") == 0;
}

CLI_COMMAND(cmd_run) {
    RunArgs ra;
    int rc = parse_args(argc, argv, &ra);
    if (rc == EXIT_OK && is_artifact_path(ra.model)) {
        rc = ra.llvm ? cli_usage_error("run", "--backend does not apply to a compiled .irx artifact") : run_artifact(&ra);
        free(ra.input_specs);
        return rc;
    }
    if (rc == EXIT_OK) {
        IrGraph *g;
        IrStatus s = cli_load(ra.model, true, &g);
        if (s) rc = EXIT_INVALID;
        else {
            rc = run_loaded(g, &ra);
            ir_graph_destroy(g);
        }
    }
    free(ra.input_specs);
    return rc;
}

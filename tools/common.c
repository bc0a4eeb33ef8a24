/* CLI helpers shared by the commands: diagnostics, exit codes, loading. */
#include "cli.h"
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "validate/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cli_diag_init(IrDiag *d) {
    ir_diag_init(d, ir_diag_print_fn, stderr);
    d->max_errors = 50;
}

bool cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int cli_winograd_arg(const char *cmd, const char *opt, int argc, char **argv, int *i, const char **out) {
    const char *v = strncmp(opt, "--winograd=", 11) == 0 ? opt + 11 : ++*i < argc ? argv[*i] : NULL;
    static const char *const ok[] = {"4", "2", "off"};
    for (size_t k = 0; v && k < sizeof ok / sizeof *ok; k++)
        if (strcmp(v, ok[k]) == 0) {
            *out = ok[k];
            return EXIT_OK;
        }
    return cli_usage_error(cmd, "--winograd takes 4, 2 or off");
}

void cli_apply_winograd(IrGraph *g, const char *value) {
    if (g && value) ir_graph_set_meta(g, IR_META_WINOGRAD, value);
}

int cli_exit_for(IrStatus s) {
    switch (s) {
    case IR_OK: return EXIT_OK;
    case IR_EINVAL: return EXIT_USAGE;
    default: return EXIT_INVALID;
    }
}

IrStatus cli_load(const char *path, bool verify, IrGraph **out) {
    IrDiag d;
    cli_diag_init(&d);
    IrStatus s = ir_load(path, &d, out);
    if (s) return s;
    if (verify) {
        s = ir_verify(*out, &d);
        if (s) {
            ir_graph_destroy(*out);
            *out = NULL;
        }
    }
    return s;
}

int cli_find_input(const IrGraph *g, const char *name, size_t n) {
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        const char *nm = ir_value_name(g, ir_graph_input(g, i));
        if (strlen(nm) == n && memcmp(nm, name, n) == 0) return (int)i;
    }
    return -1;
}

IrStatus cli_gen_input(const IrGraph *g, IrValueId v, IrTensor *t) { return cli_gen_input_batch(g, v, 0, t); }

IrStatus cli_gen_input_batch(const IrGraph *g, IrValueId v, int64_t batch, IrTensor *t) {
    IrTypeId ty = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, ty);
    int64_t d[IR_MAX_RANK];
    if (r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return IR_EUNSUPPORTED;
    for (uint32_t k = 0; k < r; k++)
        if (!ir_expr_is_const(g, ir_type_dims(g, ty)[k], &d[k])) {
            if (k != 0 || batch <= 0) return IR_EUNSUPPORTED;
            d[k] = batch;
        }
    IrStatus s = ir_tensor_alloc(t, ir_type_dtype(g, ty), r, d);
    if (s) return s;
    cli_fill_uniform(t, v);
    return IR_OK;
}

IrStatus cli_gen_input_syms(const IrGraph *g, IrValueId v, const int64_t *sym, IrTensor *t) {
    IrTypeId ty = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, ty);
    int64_t d[IR_MAX_RANK];
    if (r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return IR_EUNSUPPORTED;
    for (uint32_t k = 0; k < r; k++)
        if (!ir_expr_eval(g, ir_type_dims(g, ty)[k], sym, &d[k]) || d[k] < 0) return IR_EUNSUPPORTED;
    IrStatus s = ir_tensor_alloc(t, ir_type_dtype(g, ty), r, d);
    if (s) return s;
    cli_fill_uniform(t, v);
    return IR_OK;
}

void cli_fill_uniform(IrTensor *t, uint64_t seed) {
    uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
    for (int64_t i = 0; i < ir_tensor_numel(t); i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ir_elem_set_f64(t->dtype, t->data, (size_t)i, (double)(x >> 40) / (double)(1ull << 24));
    }
}

void cli_compare(const IrTensor *ref, const void *got, double rtol, double atol, CliCompare *out) {
    int64_t n = ir_tensor_numel(ref), bad = 0, worst = -1;
    double worst_x = 0, dot = 0, nr = 0, nc = 0, max_abs = 0;
    for (int64_t e = 0; e < n; e++) {
        double r = ir_elem_get_f64(ref->dtype, ref->data, (size_t)e);
        double c = ir_elem_get_f64(ref->dtype, got, (size_t)e);
        dot += r * c, nr += r * r, nc += c * c;
        if ((isnan(r) && isnan(c)) || r == c) continue; /* r == c: equal infinities too */
        double diff = fabs(r - c), lim = atol + rtol * fabs(r);
        if (diff > max_abs) max_abs = diff;
        if (!(diff <= lim)) {
            bad++;
            double x = isnan(diff) ? INFINITY : diff / lim;
            if (worst < 0 || x > worst_x) worst = e, worst_x = x;
        }
    }
    out->n = n;
    out->max_abs = max_abs;
    out->bad = bad;
    out->worst = worst;
    out->cosine = nr > 0 && nc > 0 ? dot / sqrt(nr * nc) : nr == nc ? 1.0 : 0.0;
}

/* ---- --input specs, the same for every command and model kind ---- */

static void list_names(const char *const *names, uint32_t n, IrStrBuf *b) {
    for (uint32_t i = 0; i < n; i++) ir_strbuf_printf(b, "%s'%s'", i ? ", " : "", names[i]);
    if (!n) ir_strbuf_puts(b, "none");
}

int cli_assign_inputs(const char *cmd, const char *const *names, uint32_t n, const char *const *specs, int n_specs,
                      const char **files) {
    for (uint32_t i = 0; i < n; i++) files[i] = NULL;
    bool *named = calloc((size_t)n_specs + 1, 1);
    if (!named) return EXIT_INVALID;
    int rc = EXIT_OK;
    for (int k = 0; k < n_specs && !rc; k++) {
        const char *spec = specs[k], *eq = strchr(spec, '=');
        if (!eq) continue;
        size_t len = (size_t)(eq - spec);
        int hit = -1;
        for (uint32_t i = 0; i < n && hit < 0; i++)
            if (strlen(names[i]) == len && memcmp(names[i], spec, len) == 0) hit = (int)i;
        struct stat st;
        if (hit < 0 && stat(spec, &st) == 0) continue; /* a file whose name holds '=' */
        if (hit < 0) {
            char want[256];
            snprintf(want, sizeof want, "%.*s", (int)(len < 255 ? len : 255), spec);
            IrStrBuf b;
            ir_strbuf_init(&b);
            list_names(names, n, &b);
            const char *sug = ir_suggest(want, names, n);
            if (sug)
                rc = cli_usage_error(cmd, "the model has no input '%s' (did you mean '%s'? its inputs: %s)", want, sug,
                                     b.data ? b.data : "");
            else
                rc = cli_usage_error(cmd, "the model has no input '%s' (its inputs: %s)", want, b.data ? b.data : "");
            ir_strbuf_free(&b);
        } else if (files[hit]) {
            rc = cli_usage_error(cmd, "input '%s' given twice", names[hit]);
        } else {
            files[hit] = eq + 1;
            named[k] = true;
        }
    }
    uint32_t next = 0;
    for (int k = 0; k < n_specs && !rc; k++) {
        if (named[k]) continue;
        while (next < n && files[next]) next++;
        if (next >= n) {
            IrStrBuf b;
            ir_strbuf_init(&b);
            list_names(names, n, &b);
            rc = cli_usage_error(cmd, "too many inputs: '%s' has no input left (the model's inputs: %s)", specs[k],
                                 b.data ? b.data : "");
            ir_strbuf_free(&b);
        } else {
            files[next++] = specs[k];
        }
    }
    free(named);
    return rc;
}

int cli_assign_graph_inputs(const char *cmd, const IrGraph *g, const char *const *specs, int n_specs,
                            const char **files) {
    uint32_t n = ir_graph_num_inputs(g);
    const char **names = calloc(n + 1, sizeof *names);
    if (!names) return EXIT_INVALID;
    for (uint32_t i = 0; i < n; i++) names[i] = ir_value_name(g, ir_graph_input(g, i));
    int rc = cli_assign_inputs(cmd, names, n, specs, n_specs, files);
    free(names);
    return rc;
}

IrStatus cli_read_input(const char *file, const char *name, IrDiag *d, IrTensor *out) {
    size_t fl = strlen(file);
    if (fl > 4 && strcmp(file + fl - 4, ".npz") == 0) return ir_npz_read(file, name, d, out);
    /* an .npz under another name still reads as one */
    FILE *f = fopen(file, "rb");
    unsigned char head[4] = {0};
    size_t got = f ? fread(head, 1, 4, f) : 0;
    if (f) fclose(f);
    if (ir_npz_is(head, got)) return ir_npz_read(file, name, d, out);
    return ir_npy_read(file, d, out);
}

/* Whether a names an existing file that is b (st) by device and inode. */
static bool same_file(const char *a, const struct stat *st) {
    struct stat sa;
    return a && *a && strcmp(a, "-") != 0 && stat(a, &sa) == 0 && sa.st_dev == st->st_dev && sa.st_ino == st->st_ino;
}

int cli_refuse_clobber(const char *cmd, const char *out, int argc, char **argv) {
    struct stat so;
    if (!out || strcmp(out, "-") == 0 || stat(out, &so) != 0) return EXIT_OK;
    for (int i = 1; i < argc; i++) {
        if (argv[i] == out) continue; /* the output's own argument */
        const char *eq = strchr(argv[i], '=');
        if (same_file(argv[i], &so) || (eq && same_file(eq + 1, &so))) {
            fprintf(stderr, "irtool %s: the output '%s' is the same file as '%s' on the command line; refusing to overwrite "
                            "it (choose another output)\n", cmd, out, eq && !same_file(argv[i], &so) ? eq + 1 : argv[i]);
            return EXIT_INVALID;
        }
    }
    return EXIT_OK;
}

void cli_tensor_of_irt(const IrtArtifact *a, const IrtTensor *t, IrTensor *out) {
    const char *dn = irt_dtype_name(a, t->dtype);
    *out = (IrTensor){.dtype = ir_dtype_from_name(dn, strlen(dn)), .rank = t->rank, .data = t->data};
    for (uint32_t r = 0; r < t->rank && r < IR_MAX_RANK; r++) out->dims[r] = t->dims[r];
}

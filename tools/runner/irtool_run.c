/* irtool-run: runs a compiled artifact (.irx) from the shell with libirtool-runtime alone, so a
 * serving host (or the GPU machine, which has no LLVM) starts in a few milliseconds:
 *   irtool-run MODEL.irx [--input NAME=FILE.npy | FILE.npy]... [-o DIR] [--threads N]
 * Prints one summary line per output, as `irtool run` does, and writes NAME.npy files with -o.
 * Its .npy reader and writer cover the numeric and bool dtypes (little-endian, C order). */
#include "backend/runtime/runtime.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EXIT_RUN 1   /* the model cannot run on these inputs, or a file cannot be read */
#define EXIT_USAGE 2 /* wrong arguments */

/* numpy's descr of each dtype name the runtime uses (little-endian). */
static const struct {
    const char *name, *descr;
} DESCRS[] = {{"f64", "<f8"}, {"f32", "<f4"}, {"f16", "<f2"}, {"i64", "<i8"}, {"i32", "<i4"}, {"i16", "<i2"},
              {"i8", "|i1"},  {"u64", "<u8"}, {"u32", "<u4"}, {"u16", "<u2"}, {"u8", "|u1"},  {"bool", "|b1"}};

static const char *descr_of(const char *name) {
    for (size_t i = 0; i < sizeof DESCRS / sizeof *DESCRS; i++)
        if (!strcmp(DESCRS[i].name, name)) return DESCRS[i].descr;
    return NULL;
}

static const char *name_of_descr(const char *d, size_t n) {
    for (size_t i = 0; i < sizeof DESCRS / sizeof *DESCRS; i++) {
        const char *x = DESCRS[i].descr;
        if (strlen(x) == n && !memcmp(x, d, n)) return DESCRS[i].name;
        if (n == 3 && d[0] == '=' && !memcmp(x + 1, d + 1, 2)) return DESCRS[i].name; /* native order */
    }
    return NULL;
}

static void *read_all(const char *path, size_t *len, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, cap, "%s: cannot open: %s", path, f ? "not a regular file" : strerror(errno));
        if (f) fclose(f);
        return NULL;
    }
    char *b = malloc((size_t)st.st_size + 1);
    size_t n = b ? fread(b, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (!b || n != (size_t)st.st_size) {
        free(b);
        snprintf(err, cap, "%s: cannot read", path);
        return NULL;
    }
    *len = n;
    return b;
}

/* The value of 'key' in a .npy header dict ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"). */
static const char *dict_value(const char *h, const char *key) {
    const char *p = strstr(h, key);
    if (!p) return NULL;
    p = strchr(p + strlen(key), ':');
    if (!p) return NULL;
    for (p++; *p == ' '; p++) {}
    return p;
}

/* Reads a .npy file into t (data malloc'd, dtype by name through the artifact's codes). */
static int npy_read(const IrtArtifact *a, const char *path, IrtTensor *t, char *err, size_t cap) {
    size_t len;
    unsigned char *b = read_all(path, &len, err, cap);
    if (!b) return -1;
    unsigned hl = 0, off = 0;
    if (len >= 10 && !memcmp(b, "\x93NUMPY", 6)) {
        if (b[6] == 1) hl = b[8] | b[9] << 8, off = 10;
        else if (len >= 12) hl = b[8] | b[9] << 8 | (unsigned)b[10] << 16 | (unsigned)b[11] << 24, off = 12;
    }
    if (!off || hl > len - off) {
        snprintf(err, cap, "%s: not a .npy file (bad magic or header)", path);
        free(b);
        return -1;
    }
    char *h = malloc(hl + 1);
    if (!h) {
        free(b);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    memcpy(h, b + off, hl);
    h[hl] = 0;
    const char *d = dict_value(h, "'descr'"), *fo = dict_value(h, "'fortran_order'"), *sh = dict_value(h, "'shape'");
    const char *dname = NULL;
    if (d && *d == '\'' && strchr(d + 1, '\'')) dname = name_of_descr(d + 1, (size_t)(strchr(d + 1, '\'') - d - 1));
    int rc = 0;
    memset(t, 0, sizeof *t);
    if (!dname || !fo || strncmp(fo, "False", 5) || !sh || *sh != '(') {
        snprintf(err, cap, "%s: unsupported .npy (irtool-run reads little-endian numeric and bool arrays in C order; "
                 "`irtool run` reads the rest)", path);
        rc = -1;
    }
    size_t count = 1;
    for (const char *p = sh ? sh + 1 : ""; !rc && *p && *p != ')';) {
        char *e;
        long long v = strtoll(p, &e, 10);
        if (e == p || v < 0 || t->rank == IRT_MAX_RANK || __builtin_mul_overflow(count, (size_t)v, &count)) {
            snprintf(err, cap, "%s: bad shape in the .npy header", path);
            rc = -1;
            break;
        }
        t->dims[t->rank++] = v;
        for (p = e; *p == ',' || *p == ' '; p++) {}
    }
    size_t es = rc ? 0 : irt_dtype_size(a, irt_dtype_code(a, dname));
    size_t nb = 0;
    if (!rc && (__builtin_mul_overflow(count, es, &nb) || nb > len - off - hl)) {
        snprintf(err, cap, "%s: the file holds fewer bytes than its shape says (truncated?)", path);
        rc = -1;
    }
    if (!rc) {
        t->dtype = irt_dtype_code(a, dname);
        t->data = malloc(nb ? nb : 1);
        if (t->data) memcpy(t->data, b + off + hl, nb);
        else snprintf(err, cap, "out of memory"), rc = -1;
    }
    free(h);
    free(b);
    return rc;
}

static int npy_write(const IrtArtifact *a, const char *path, const IrtTensor *t, size_t nb, char *err, size_t cap) {
    const char *descr = descr_of(irt_dtype_name(a, t->dtype));
    if (!descr) {
        snprintf(err, cap, "%.1024s: irtool-run does not write %s tensors", path, irt_dtype_name(a, t->dtype));
        return -1;
    }
    char h[512], shape[400] = "";
    size_t k = 0;
    for (uint32_t i = 0; i < t->rank && k < sizeof shape; i++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%lld%s", (long long)t->dims[i], t->rank == 1 ? "," : ", ");
    if (t->rank > 1) shape[k - 2] = 0;
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    int total = (10 + n + 1 + 63) / 64 * 64; /* header padded with spaces to 64 bytes, ending in \n */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    bool ok = f != NULL;
    if (ok) {
        unsigned hl = (unsigned)(total - 10);
        unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 255), (unsigned char)(hl >> 8)};
        ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, (size_t)n, f) == (size_t)n;
        for (int i = 10 + n; ok && i < total - 1; i++) ok = fputc(' ', f) != EOF;
        ok = ok && fputc('\n', f) != EOF && fwrite(t->data, 1, nb, f) == nb;
        ok = (fclose(f) == 0) && ok;
    }
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, cap, "%.1024s: cannot write: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

static double half_to_double(uint16_t h) {
    int e = h >> 10 & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h >> 15 ? -v : v;
}

/* Element i of t as a double (NAN for dtypes without a numeric summary). */
static double elem(const char *dt, const void *p, size_t i) {
    if (!strcmp(dt, "f32")) return ((const float *)p)[i];
    if (!strcmp(dt, "f64")) return ((const double *)p)[i];
    if (!strcmp(dt, "f16")) return half_to_double(((const uint16_t *)p)[i]);
    if (!strcmp(dt, "i64")) return (double)((const int64_t *)p)[i];
    if (!strcmp(dt, "i32")) return ((const int32_t *)p)[i];
    if (!strcmp(dt, "i16")) return ((const int16_t *)p)[i];
    if (!strcmp(dt, "i8")) return ((const int8_t *)p)[i];
    if (!strcmp(dt, "u64")) return (double)((const uint64_t *)p)[i];
    if (!strcmp(dt, "u32")) return ((const uint32_t *)p)[i];
    if (!strcmp(dt, "u16")) return ((const uint16_t *)p)[i];
    if (!strcmp(dt, "u8") || !strcmp(dt, "bool")) return ((const uint8_t *)p)[i];
    return NAN;
}

/* "y: f32[4, 16] min=-0.139 max=0.162 mean=0.0185", as irtool run prints it. */
static void print_summary(const IrtArtifact *a, const char *name, const IrtTensor *t, size_t count) {
    const char *dt = irt_dtype_name(a, t->dtype);
    printf("%s: %s[", name, dt);
    for (uint32_t i = 0; i < t->rank; i++) printf("%s%lld", i ? ", " : "", (long long)t->dims[i]);
    printf("]");
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    size_t finite = 0, nans = 0;
    for (size_t i = 0; i < count && descr_of(dt); i++) {
        double v = elem(dt, t->data, i);
        if (isnan(v)) {
            nans++;
            continue;
        }
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
        sum += v;
        finite++;
    }
    if (finite) printf(" min=%.6g max=%.6g mean=%.6g", mn, mx, sum / (double)finite);
    else if (!count) printf(" (empty)");
    if (nans) printf(" nan=%zu", nans);
    printf("\n");
}

static int usage(const char *msg, const char *arg) {
    fprintf(stderr, "irtool-run: ");
    fprintf(stderr, msg, arg);
    fprintf(stderr, "\nusage: irtool-run MODEL.irx [--input NAME=FILE.npy | FILE.npy]... [-o DIR] [--threads N]\n");
    return EXIT_USAGE;
}

typedef struct Args {
    const char *model, *out_dir;
    const char **specs;
    int n_specs, threads;
} Args;

static int parse_args(int argc, char **argv, Args *ar) {
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--input") || !strcmp(s, "-i")) {
            if (++i >= argc) return usage("%s needs NAME=FILE.npy or FILE.npy", s);
            ar->specs[ar->n_specs++] = argv[i];
        } else if (!strncmp(s, "--input=", 8)) {
            ar->specs[ar->n_specs++] = s + 8;
        } else if (!strcmp(s, "-o") || !strcmp(s, "--output-dir")) {
            if (++i >= argc) return usage("%s needs a directory", s);
            ar->out_dir = argv[i];
        } else if (!strcmp(s, "--threads")) {
            char *e;
            long n = ++i < argc ? strtol(argv[i], &e, 10) : -1;
            if (i >= argc || *e || n < 0 || n > 4096) return usage("--threads takes a count from 0 (all cores) to 4096%s", "");
            ar->threads = (int)n;
        } else if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            printf("usage: irtool-run MODEL.irx [--input NAME=FILE.npy | FILE.npy]... [-o DIR] [--threads N]\n");
            exit(0);
        } else if (s[0] == '-' && s[1]) {
            return usage("unknown option '%s'", s);
        } else if (ar->model) {
            return usage("only one MODEL is accepted (inputs go after --input): '%s'", s);
        } else {
            ar->model = s;
        }
    }
    return ar->model ? 0 : usage("missing MODEL.irx%s", "");
}

/* Which file feeds each input: NAME=FILE by name, plain FILEs in order into the inputs left. */
static int assign_files(const IrtArtifact *a, const Args *ar, const char **files, char *err, size_t cap) {
    uint32_t n_in = irt_num_inputs(a), next = 0;
    for (int k = 0; k < ar->n_specs; k++) {
        const char *spec = ar->specs[k], *eq = strchr(spec, '=');
        if (eq) {
            char name[1024];
            snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
            int i = irt_input_find(a, name, err, cap);
            if (i < 0) return -1;
            if (files[i]) {
                snprintf(err, cap, "input '%s' is given twice", name);
                return -1;
            }
            files[i] = eq + 1;
            continue;
        }
        while (next < n_in && files[next]) next++;
        if (next >= n_in) {
            snprintf(err, cap, "too many inputs: '%s' has no artifact input left (it takes %u)", spec, n_in);
            return -1;
        }
        files[next++] = spec;
    }
    for (uint32_t i = 0; i < n_in; i++)
        if (!files[i]) {
            snprintf(err, cap, "missing input '%s': pass --input %s=FILE.npy", irt_input_name(a, i), irt_input_name(a, i));
            return -1;
        }
    return 0;
}

static size_t tensor_count(const IrtTensor *t) {
    size_t n = 1;
    for (uint32_t k = 0; k < t->rank; k++) n *= (size_t)t->dims[k];
    return n;
}

static int run(const Args *ar) {
    char err[2048];
    if (ar->threads) irt_set_threads(ar->threads);
    IrtArtifact *a = irt_load(ar->model, err, sizeof err);
    if (!a) {
        fprintf(stderr, "irtool-run: %s: %s\n", ar->model, err);
        return EXIT_RUN;
    }
    uint32_t n_in = irt_num_inputs(a), n_out = irt_num_outputs(a);
    const char **files = calloc(n_in + 1, sizeof *files);
    IrtTensor *in = calloc(n_in + 1, sizeof *in), *out = calloc(n_out + 1, sizeof *out);
    int rc = files && in && out ? 0 : -1;
    if (rc) snprintf(err, sizeof err, "out of memory");
    if (!rc) rc = assign_files(a, ar, files, err, sizeof err);
    for (uint32_t i = 0; !rc && i < n_in; i++) rc = npy_read(a, files[i], &in[i], err, sizeof err);
    if (!rc) rc = irt_run_n(a, n_in, in, n_out, out, err, sizeof err);
    bool ran = !rc;
    if (ran && ar->out_dir && mkdir(ar->out_dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, sizeof err, "cannot create directory '%s': %s", ar->out_dir, strerror(errno));
        rc = -1;
    }
    for (uint32_t i = 0; ran && i < n_out; i++) {
        size_t count = tensor_count(&out[i]);
        print_summary(a, irt_output_name(a, i), &out[i], count);
        if (!rc && ar->out_dir) {
            char path[4096], stem[256];
            const char *nm = irt_output_name(a, i);
            bool changed = !*nm || nm[0] == '.';
            size_t k = 0;
            for (; nm[k] && k < 200; k++) { /* a file name: no '/', no hidden file */
                bool ok = (nm[k] >= 'a' && nm[k] <= 'z') || (nm[k] >= 'A' && nm[k] <= 'Z') || (nm[k] >= '0' && nm[k] <= '9') ||
                          strchr("_.-", nm[k]);
                stem[k] = ok ? nm[k] : '_';
                changed |= !ok;
            }
            changed |= nm[k] != 0;
            if (changed) snprintf(stem + k, sizeof stem - k, "_%u", i); /* kept apart from other outputs */
            else stem[k] = 0;
            snprintf(path, sizeof path, "%s/%s.npy", ar->out_dir, stem);
            rc = npy_write(a, path, &out[i], count * irt_dtype_size(a, out[i].dtype), err, sizeof err);
        }
    }
    if (rc) fprintf(stderr, "irtool-run: %s\n", err);
    for (uint32_t i = 0; ran && i < n_out; i++) irt_tensor_free(&out[i]);
    for (uint32_t i = 0; in && i < n_in; i++) free(in[i].data);
    free(files), free(in), free(out);
    irt_free(a);
    return rc ? EXIT_RUN : 0;
}

int main(int argc, char **argv) {
    Args ar = {.specs = calloc((size_t)argc + 1, sizeof(char *))};
    if (!ar.specs) return EXIT_RUN;
    int rc = parse_args(argc, argv, &ar);
    if (!rc) rc = run(&ar);
    free(ar.specs);
    return rc;
}

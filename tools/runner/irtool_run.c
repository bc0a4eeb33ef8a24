/* irtool-run: runs a compiled artifact (.irx) from the shell with libirtool-runtime alone, so a
 * serving host (or the GPU machine, which has no LLVM) starts in a few milliseconds:
 *   irtool-run MODEL.irx [--input NAME=FILE.npy | FILE.npy]... [-o DIR] [--threads N]
 *              [--expect NAME=FILE.npy | FILE.npy]... [--rtol R] [--atol A] [--cosine MIN] [--repeat N]
 * Prints one summary line per output, as `irtool run` does, and writes NAME.npy files with -o.
 * --expect compares outputs with expected arrays (|got - want| <= atol + rtol * |want|, NaN
 * equals NaN, integers exactly; or by cosine similarity), so a machine without irtool itself
 * (the GPU host: no LLVM) can check artifacts compiled elsewhere. --repeat times N more runs.
 * Its .npy reader and writer cover the numeric, bool, bf16 and FP8 dtypes (ml_dtypes names),
 * little-endian, C order. */
#include "backend/runtime/runtime.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define EXIT_RUN 1   /* the model cannot run on these inputs, or a file cannot be read */
#define EXIT_USAGE 2 /* wrong arguments */
#define EXIT_DIFFER 3 /* the model ran, and an output does not match its --expect file */

/* numpy's descr of each dtype name the runtime uses (little-endian). */
static const struct {
    const char *name, *descr;
} DESCRS[] = {{"f64", "<f8"}, {"f32", "<f4"}, {"f16", "<f2"}, {"i64", "<i8"}, {"i32", "<i4"}, {"i16", "<i2"},
              {"i8", "|i1"},  {"u64", "<u8"}, {"u32", "<u4"}, {"u16", "<u2"}, {"u8", "|u1"},  {"bool", "|b1"},
              {"bf16", "bfloat16"}, {"f8e4m3fn", "float8_e4m3fn"}, {"f8e5m2", "float8_e5m2"}};

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

static double e4m3_to_double(uint8_t b) {
    int e = b >> 3 & 15, m = b & 7;
    double v = (b & 127) == 127 ? NAN : e == 0 ? ldexp(m, -9) : ldexp(m + 8, e - 10);
    return b >> 7 ? -v : v;
}

/* Element i of t as a double (NAN for dtypes without a numeric summary). */
static double elem(const char *dt, const void *p, size_t i) {
    if (!strcmp(dt, "f32")) return ((const float *)p)[i];
    if (!strcmp(dt, "bf16")) {
        uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (!strcmp(dt, "f8e4m3fn")) return e4m3_to_double(((const uint8_t *)p)[i]);
    if (!strcmp(dt, "f8e5m2")) return half_to_double((uint16_t)(((const uint8_t *)p)[i] << 8));
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

#define USAGE                                                                                                      \
    "usage: irtool-run MODEL.irx [--input NAME=FILE.npy | FILE.npy]... [-o DIR] [--threads N]\n"                    \
    "                  [--expect NAME=FILE.npy | FILE.npy]... [--rtol R] [--atol A] [--cosine MIN] [--repeat N]\n"

static int usage(const char *msg, const char *arg) {
    fprintf(stderr, "irtool-run: ");
    fprintf(stderr, msg, arg);
    fprintf(stderr, "\n" USAGE);
    return EXIT_USAGE;
}

typedef struct Args {
    const char *model, *out_dir;
    const char **specs, **expects;
    int n_specs, n_expects, threads, repeat;
    double rtol, atol, cosine; /* cosine < 0: compare element by element */
} Args;

static int number_arg(int argc, char **argv, int *i, double lo, double hi, double *out) {
    const char *s = argv[*i];
    char *e = NULL;
    double v = ++*i < argc ? strtod(argv[*i], &e) : NAN;
    if (*i >= argc || !e || *e || !(v >= lo && v <= hi)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%%s takes a number from %g to %g", lo, hi);
        return usage(msg, s);
    }
    *out = v;
    return 0;
}

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
        } else if (!strcmp(s, "--expect")) {
            if (++i >= argc) return usage("%s needs NAME=FILE.npy or FILE.npy", s);
            ar->expects[ar->n_expects++] = argv[i];
        } else if (!strcmp(s, "--rtol") || !strcmp(s, "--atol") || !strcmp(s, "--cosine")) {
            double *dst = s[2] == 'r' ? &ar->rtol : s[2] == 'a' ? &ar->atol : &ar->cosine;
            if (number_arg(argc, argv, &i, s[2] == 'c' ? -1 : 0, s[2] == 'c' ? 1 : 1e30, dst)) return EXIT_USAGE;
        } else if (!strcmp(s, "--repeat")) {
            double v;
            if (number_arg(argc, argv, &i, 0, 1e6, &v)) return EXIT_USAGE;
            ar->repeat = (int)v;
        } else if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            printf(USAGE "\n"
                   "--expect: compare outputs with arrays (by output name, or in output order), rtol 1e-3 and\n"
                   "atol 1e-7 unless given, NaN equal to NaN, integers and bools exactly; --cosine MIN compares\n"
                   "float outputs by cosine similarity instead. Exit 3 when an output differs.\n"
                   "--repeat N: N more runs after the first, then the median and fastest whole call.\n");
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

/* Which file goes with each input (outputs: each --expect): NAME=FILE by name, plain FILEs in
 * order into those left. Every input needs one; outputs without one are not compared. */
static int assign_files(const IrtArtifact *a, const char **specs, int n_specs, bool outputs, const char **files,
                        char *err, size_t cap) {
    const char *what = outputs ? "output" : "input";
    uint32_t n = outputs ? irt_num_outputs(a) : irt_num_inputs(a), next = 0;
    for (int k = 0; k < n_specs; k++) {
        const char *spec = specs[k], *eq = strchr(spec, '=');
        if (eq) {
            char name[1024];
            snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
            int i = outputs ? irt_output_find(a, name, err, cap) : irt_input_find(a, name, err, cap);
            if (i < 0) return -1;
            if (files[i]) {
                snprintf(err, cap, "%s '%s' is given twice", what, name);
                return -1;
            }
            files[i] = eq + 1;
            continue;
        }
        while (next < n && files[next]) next++;
        if (next >= n) {
            snprintf(err, cap, "too many %ss: '%s' has no artifact %s left (it has %u)", what, spec, what, n);
            return -1;
        }
        files[next++] = spec;
    }
    for (uint32_t i = 0; !outputs && i < n; i++)
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

static void shape_text(const IrtArtifact *a, const IrtTensor *t, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "%s[", irt_dtype_name(a, t->dtype));
    for (uint32_t i = 0; i < t->rank && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* Output k against its expected array: one line, 0 when it matches, 1 when it differs. */
static int compare_output(const IrtArtifact *a, const Args *ar, uint32_t k, const IrtTensor *got, const IrtTensor *want) {
    const char *name = irt_output_name(a, k), *dt = irt_dtype_name(a, got->dtype);
    char gs[512], ws[512];
    shape_text(a, got, gs, sizeof gs);
    shape_text(a, want, ws, sizeof ws);
    if (strcmp(gs, ws) != 0) {
        printf("expect %s: differs: the output is %s, the expected array %s\n", name, gs, ws);
        return 1;
    }
    size_t n = tensor_count(got), es = irt_dtype_size(a, got->dtype);
    bool fl = dt[0] == 'f' || !strcmp(dt, "bf16");
    if (ar->cosine >= 0 && fl) {
        double dot = 0, na = 0, nb = 0;
        for (size_t i = 0; i < n; i++) {
            double x = elem(dt, got->data, i), y = elem(dt, want->data, i);
            dot += x * y, na += x * x, nb += y * y;
        }
        double c = na == 0 && nb == 0 ? 1 : dot / sqrt(na * nb); /* NaN (a NaN element) fails */
        printf("expect %s: %s (cosine similarity %.6f, minimum %g)\n", name, c >= ar->cosine ? "ok" : "differs", c,
               ar->cosine);
        return !(c >= ar->cosine);
    }
    size_t worst = SIZE_MAX;
    double worst_ratio = 0;
    for (size_t i = 0; i < n; i++) {
        double ratio;
        if (!fl) {
            ratio = memcmp((const char *)got->data + i * es, (const char *)want->data + i * es, es) ? INFINITY : 0;
        } else {
            double x = elem(dt, got->data, i), y = elem(dt, want->data, i);
            if (isnan(x) || isnan(y)) ratio = isnan(x) && isnan(y) ? 0 : INFINITY;
            else ratio = x == y ? 0 : fabs(x - y) / (ar->atol + ar->rtol * fabs(y));
        }
        if (ratio > 1 && ratio > worst_ratio) worst_ratio = ratio, worst = i;
        if (isinf(worst_ratio)) break;
    }
    if (worst == SIZE_MAX) {
        printf("expect %s: ok\n", name);
        return 0;
    }
    char idx[400] = "[";
    size_t rem = worst, kk = 1;
    int64_t at[IRT_MAX_RANK];
    for (uint32_t d = got->rank; d-- > 0;) {
        at[d] = got->dims[d] ? (int64_t)(rem % (size_t)got->dims[d]) : 0;
        rem = got->dims[d] ? rem / (size_t)got->dims[d] : 0;
    }
    for (uint32_t d = 0; d < got->rank && kk < sizeof idx; d++)
        kk += (size_t)snprintf(idx + kk, sizeof idx - kk, "%s%lld", d ? "," : "", (long long)at[d]);
    if (kk < sizeof idx) snprintf(idx + kk, sizeof idx - kk, "]");
    double x = elem(dt, got->data, worst), y = elem(dt, want->data, worst);
    printf("expect %s: differs at %s: got %.9g expected %.9g (abs err %.3g; rtol %g, atol %g)\n", name, idx, x, y,
           fabs(x - y), ar->rtol, ar->atol);
    return 1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* --repeat: n more runs on the same inputs, the whole call timed (for CUDA: copies in and out
 * included); prints the median and the fastest. */
static int time_runs(IrtArtifact *a, const Args *ar, uint32_t n_in, const IrtTensor *in, char *err, size_t cap) {
    uint32_t n_out = irt_num_outputs(a);
    IrtTensor *out = calloc(n_out + 1, sizeof *out);
    double *ms = calloc((size_t)ar->repeat + 1, sizeof *ms);
    int rc = out && ms ? 0 : -1;
    if (rc) snprintf(err, cap, "out of memory");
    for (int r = 0; !rc && r < ar->repeat; r++) {
        double t0 = now_ms();
        rc = irt_run_n(a, n_in, in, n_out, out, err, cap);
        ms[r] = now_ms() - t0;
        for (uint32_t i = 0; !rc && i < n_out; i++) irt_tensor_free(&out[i]);
    }
    if (!rc) {
        qsort(ms, (size_t)ar->repeat, sizeof *ms, cmp_double);
        printf("time: %d runs, median %.4f ms, fastest %.4f ms (whole call)\n", ar->repeat, ms[ar->repeat / 2], ms[0]);
    }
    free(out), free(ms);
    return rc;
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
    const char **files = calloc(n_in + 1, sizeof *files), **efiles = calloc(n_out + 1, sizeof *efiles);
    IrtTensor *in = calloc(n_in + 1, sizeof *in), *out = calloc(n_out + 1, sizeof *out);
    IrtTensor *want = calloc(n_out + 1, sizeof *want);
    int rc = files && efiles && in && out && want ? 0 : -1, differ = 0;
    if (rc) snprintf(err, sizeof err, "out of memory");
    if (!rc) rc = assign_files(a, ar->specs, ar->n_specs, false, files, err, sizeof err);
    if (!rc) rc = assign_files(a, ar->expects, ar->n_expects, true, efiles, err, sizeof err);
    for (uint32_t i = 0; !rc && i < n_in; i++) rc = npy_read(a, files[i], &in[i], err, sizeof err);
    for (uint32_t i = 0; !rc && i < n_out; i++)
        if (efiles[i]) rc = npy_read(a, efiles[i], &want[i], err, sizeof err);
    if (!rc) rc = irt_run_n(a, n_in, in, n_out, out, err, sizeof err);
    bool ran = !rc;
    for (uint32_t i = 0; ran && i < n_out; i++) print_summary(a, irt_output_name(a, i), &out[i], tensor_count(&out[i]));
    for (uint32_t i = 0; ran && i < n_out; i++)
        if (efiles[i]) differ |= compare_output(a, ar, i, &out[i], &want[i]);
    if (!rc && ar->repeat) rc = time_runs(a, ar, n_in, in, err, sizeof err);
    if (ran && ar->out_dir && mkdir(ar->out_dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, sizeof err, "cannot create directory '%s': %s", ar->out_dir, strerror(errno));
        rc = -1;
    }
    for (uint32_t i = 0; ran && i < n_out; i++) {
        size_t count = tensor_count(&out[i]);
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
    for (uint32_t i = 0; want && i < n_out; i++) free(want[i].data);
    free(files), free(efiles), free(in), free(out), free(want);
    irt_free(a);
    return rc ? EXIT_RUN : differ ? EXIT_DIFFER : 0;
}

int main(int argc, char **argv) {
    Args ar = {.specs = calloc((size_t)argc + 1, sizeof(char *)), .expects = calloc((size_t)argc + 1, sizeof(char *)),
               .rtol = 1e-3, .atol = 1e-7, .cosine = -1};
    if (!ar.specs || !ar.expects) return EXIT_RUN;
    int rc = parse_args(argc, argv, &ar);
    if (!rc) rc = run(&ar);
    free(ar.specs), free(ar.expects);
    return rc;
}

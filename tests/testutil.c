/* Helpers shared by the Criterion tests (see testutil.h). Plain POSIX: no shell is ever used
 * to run the binary, so arguments reach it exactly as written.
 */
#include "testutil.h"
#include "backend/backend.h"
#include "backend/runtime/runtime.h"

#include "passes/passes.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

char *tu_read_file(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(buf);
            buf = NULL;
            break;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (!buf) return NULL;
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

bool tu_write_file(const char *path, const void *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            close(fd);
            return false;
        }
        p += w;
        len -= (size_t)w;
    }
    return close(fd) == 0;
}

char *tu_path_join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *tu_source_path(const char *rel) { return tu_path_join(IRTOOL_SOURCE_DIR, rel); }

char *tu_corpus_read(const char *name, size_t *len) {
    char rel[512];
    snprintf(rel, sizeof rel, "corpus/%s", name);
    char *path = tu_source_path(rel);
    if (!path) return NULL;
    char *data = tu_read_file(path, len);
    free(path);
    return data;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char **tu_list_dir(const char *dir, const char *suffix, size_t *count) {
    char *path = tu_source_path(dir);
    DIR *d = path ? opendir(path) : NULL;
    free(path);
    if (!d) return NULL;
    size_t n = 0, cap = 16;
    char **list = malloc(cap * sizeof *list);
    struct dirent *e;
    size_t sl = strlen(suffix);
    while (list && (e = readdir(d))) {
        size_t nl = strlen(e->d_name);
        if (nl <= sl || strcmp(e->d_name + nl - sl, suffix) != 0) continue;
        if (n + 1 >= cap) {
            char **nlst = realloc(list, cap * 2 * sizeof *list);
            if (!nlst) break;
            list = nlst;
            cap *= 2;
        }
        list[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (!list) return NULL;
    qsort(list, n, sizeof *list, cmp_str);
    list[n] = NULL;
    if (count) *count = n;
    return list;
}

void tu_free_list(char **list) {
    if (!list) return;
    for (char **p = list; *p; p++) free(*p);
    free(list);
}

/* ---- diagnostics ---------------------------------------------------------------------------- */

void tu_diag_init(TuDiag *d) {
    ir_strbuf_init(&d->buf);
    ir_diag_init(&d->diag, ir_diag_buffer_fn, &d->buf);
}

void tu_diag_free(TuDiag *d) { ir_strbuf_free(&d->buf); }

const char *tu_diag_text(const TuDiag *d) { return d->buf.data ? d->buf.data : ""; }

void tu_diag_count_fn(void *user, const IrDiagnostic *d) {
    (void)user;
    (void)d;
}

IrGraph *tu_parse(const char *text, const char *filename, TuDiag *d) {
    IrGraph *g = NULL;
    if (ir_parse_text(text, strlen(text), filename, d ? &d->diag : NULL, &g) != IR_OK) return NULL;
    return g;
}

IrGraph *tu_load_corpus(const char *name, TuDiag *d) {
    size_t len;
    char *text = tu_corpus_read(name, &len);
    if (!text) return NULL;
    const char *base = strrchr(name, '/');
    IrGraph *g = NULL;
    IrStatus s = ir_parse_text(text, len, base ? base + 1 : name, d ? &d->diag : NULL, &g);
    free(text);
    return s == IR_OK ? g : NULL;
}

char *tu_print(const IrGraph *g) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    if (ir_print_text(g, &b) != IR_OK || !b.data) {
        ir_strbuf_free(&b);
        return NULL;
    }
    return b.data; /* ownership moves to the caller */
}

char *tu_canon(const char *text, const char *filename) {
    IrGraph *g = tu_parse(text, filename, NULL);
    if (!g) return NULL;
    char *s = tu_print(g);
    ir_graph_destroy(g);
    return s;
}

/* ---- running programs ------------------------------------------------------------------------- */

typedef struct Sink {
    char *data;
    size_t len, cap;
} Sink;

static void sink_add(Sink *s, const char *p, size_t n) {
    if (s->len + n + 1 > s->cap) {
        size_t nc = s->cap ? s->cap : 4096;
        while (nc < s->len + n + 1) nc *= 2;
        char *d = realloc(s->data, nc);
        if (!d) return;
        s->data = d;
        s->cap = nc;
    }
    memcpy(s->data + s->len, p, n);
    s->len += n;
    s->data[s->len] = 0;
}

bool tu_run(const char *prog, const char *const *args, const char *in, size_t in_len, const char *cwd,
            TuRun *r) {
    memset(r, 0, sizeof *r);
    r->status = -1;
    int pin[2], pout[2], perr[2];
    if (pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC)) return false;
    size_t argc = 0;
    while (args && args[argc]) argc++;
    char **argv = calloc(argc + 2, sizeof *argv);
    if (!argv) return false;
    argv[0] = (char *)prog;
    for (size_t i = 0; i < argc; i++) argv[i + 1] = (char *)args[i];
    pid_t pid = fork();
    if (pid < 0) {
        free(argv);
        return false;
    }
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        if (cwd && chdir(cwd) != 0) _exit(126);
        execv(prog, argv);
        _exit(127);
    }
    free(argv);
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    /* a closed stdin pipe must not kill us with SIGPIPE */
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    Sink out = {0}, err = {0};
    size_t in_off = 0;
    int fds_in = pin[1];
    if (!in || in_len == 0) {
        close(fds_in);
        fds_in = -1;
    }
    struct pollfd fds[3] = {{pout[0], POLLIN, 0}, {perr[0], POLLIN, 0}, {fds_in, POLLOUT, 0}};
    while (fds[0].fd >= 0 || fds[1].fd >= 0 || fds[2].fd >= 0) {
        int k = poll(fds, 3, 60000);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) { /* hung: kill it so the test fails instead of hanging */
            kill(pid, SIGKILL);
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !fds[i].revents) continue;
            char buf[8192];
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n > 0) {
                sink_add(i == 0 ? &out : &err, buf, (size_t)n);
            } else if (n == 0 || errno != EINTR) {
                close(fds[i].fd);
                fds[i].fd = -1;
            }
        }
        if (fds[2].fd >= 0 && fds[2].revents) {
            ssize_t w = (fds[2].revents & POLLOUT) ? write(fds[2].fd, in + in_off, in_len - in_off) : -1;
            if (w > 0) in_off += (size_t)w;
            if ((w < 0 && errno != EINTR && errno != EAGAIN) || in_off >= in_len) {
                close(fds[2].fd);
                fds[2].fd = -1;
            }
        }
    }
    for (int i = 0; i < 3; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    signal(SIGPIPE, old);
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(ws)) r->status = WEXITSTATUS(ws);
    else if (WIFSIGNALED(ws)) r->status = 128 + WTERMSIG(ws);
    sink_add(&out, "", 0);
    sink_add(&err, "", 0);
    r->out = out.data ? out.data : strdup("");
    r->err = err.data ? err.data : strdup("");
    r->out_len = out.len;
    r->err_len = err.len;
    return true;
}

bool tu_run_irtool(const char *const *args, const char *in, size_t in_len, const char *cwd, TuRun *r) {
    return tu_run(IRTOOL_BINARY, args, in, in_len, cwd, r);
}

char *tu_compile_cpu(const char *dir, const char *model, const char *input, const char *name, char *err, size_t cap) {
    char *out = tu_path_join(dir, name);
    const char *args[] = {"compile", model, "--target", "cpu", "-o", out, input ? "--input" : NULL, input, NULL};
    TuRun r;
    if (!out || !tu_run_irtool(args, NULL, 0, NULL, &r)) {
        snprintf(err, cap, "compile %s: irtool could not run", model);
        free(out);
        return NULL;
    }
    if (r.status != 0) {
        snprintf(err, cap, "compile %s failed: %s", model, r.err);
        free(out);
        out = NULL;
    }
    tu_run_free(&r);
    return out;
}

void tu_run_free(TuRun *r) {
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

/* ---- temporary directories ------------------------------------------------------------------ */

char *tu_mkdtemp(void) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char *p = tu_path_join(base, "irtool-test-XXXXXX");
    if (p && !mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

void tu_rmtree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char *c = tu_path_join(path, e->d_name);
            if (!c) continue;
            struct stat st;
            if (lstat(c, &st) == 0 && S_ISDIR(st.st_mode)) {
                chmod(c, 0700);
                tu_rmtree(c);
            } else {
                unlink(c);
            }
            free(c);
        }
        closedir(d);
    }
    rmdir(path);
}

int tu_dir_count(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* ---- PRNG ----------------------------------------------------------------------------------- */

void tu_rng_seed(TuRng *r, uint64_t seed) { r->s = seed ? seed * 0x9E3779B97F4A7C15ull : 0x1234567ull; }

uint64_t tu_rng_next(TuRng *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

uint64_t tu_rng_below(TuRng *r, uint64_t n) { return n ? tu_rng_next(r) % n : 0; }

/* ---- model inputs and outputs ------------------------------------------------------------ */

void tu_tensors_free(TuTensors *ts) {
    for (uint32_t i = 0; ts->t && i < ts->n; i++) ir_tensor_free(&ts->t[i]);
    free(ts->t);
    ts->t = NULL;
    ts->n = 0;
}

static int64_t sym_value(const char *name, int64_t other) {
    if (strcmp(name, "B") == 0) return 2;
    if (strcmp(name, "S") == 0) return 8;
    if (strcmp(name, "T") == 0) return 9;
    return other;
}

static void fill_random(IrTensor *t, TuRng *rng) {
    int64_t numel = ir_tensor_numel(t);
    for (int64_t k = 0; k < numel; k++) {
        uint64_t r = tu_rng_next(rng);
        if (ir_dtype_is_float(t->dtype))
            ir_elem_set_f64(t->dtype, t->data, (size_t)k, (double)((int64_t)(r % 2001) - 1000) / 1000.0);
        else if (t->dtype == IR_DTYPE_BOOL)
            ir_elem_set_i64(t->dtype, t->data, (size_t)k, (int64_t)(r & 1));
        else
            ir_elem_set_i64(t->dtype, t->data, (size_t)k, (int64_t)(r % 4));
    }
}

bool tu_make_inputs(const IrGraph *g, uint64_t seed, int64_t other_sym, TuTensors *out) {
    uint32_t n_syms = ir_graph_num_syms(g), n = ir_graph_num_inputs(g);
    int64_t *sym = malloc((n_syms + 1) * sizeof *sym);
    out->t = calloc(n ? n : 1, sizeof *out->t);
    out->n = n;
    if (!sym || !out->t) {
        free(sym);
        return false;
    }
    sym[0] = -1;
    for (uint32_t s = 1; s <= n_syms; s++) sym[s] = sym_value(ir_sym_name(g, s), other_sym);
    TuRng rng;
    tu_rng_seed(&rng, seed);
    bool ok = true;
    for (uint32_t i = 0; ok && i < n; i++) {
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        uint32_t rank = ir_type_rank(g, t);
        IrDType dt = ir_type_dtype(g, t);
        int64_t dims[IR_MAX_RANK];
        if (rank == IR_RANK_UNKNOWN || rank > IR_MAX_RANK || dt == IR_DTYPE_NONE) {
            ok = false;
            break;
        }
        for (uint32_t d = 0; ok && d < rank; d++) ok = ir_expr_eval(g, ir_type_dims(g, t)[d], sym, &dims[d]);
        if (!ok || ir_tensor_alloc(&out->t[i], dt, rank, dims) != IR_OK) {
            ok = false;
            break;
        }
        fill_random(&out->t[i], &rng);
    }
    free(sym);
    return ok;
}

IrStatus tu_interp(const IrGraph *g, const TuTensors *in, TuTensors *out, TuDiag *d) {
    out->n = ir_graph_num_outputs(g);
    out->t = calloc(out->n ? out->n : 1, sizeof *out->t);
    if (!out->t) return IR_ENOMEM;
    return ir_interp_run(g, in->t, in->n, out->t, NULL, &d->diag);
}

bool tu_outputs_close(const TuTensors *a, const TuTensors *b, double rtol, char *why, size_t cap) {
    if (a->n != b->n) {
        snprintf(why, cap, "%u outputs vs %u", a->n, b->n);
        return false;
    }
    for (uint32_t i = 0; i < a->n; i++) {
        const IrTensor *x = &a->t[i], *y = &b->t[i];
        char sx[128], sy[128];
        ir_tensor_shape_str(x, sx, sizeof sx);
        ir_tensor_shape_str(y, sy, sizeof sy);
        if (strcmp(sx, sy) != 0) {
            snprintf(why, cap, "output %u: %.100s vs %.100s", i, sx, sy);
            return false;
        }
        size_t nb = ir_tensor_nbytes(x);
        if (!nb || memcmp(x->data, y->data, nb) == 0) continue;
        if (rtol < 0) {
            snprintf(why, cap, "output %u differs bitwise", i);
            return false;
        }
        int64_t numel = ir_tensor_numel(x);
        for (int64_t k = 0; k < numel; k++) {
            double p = ir_elem_get_f64(x->dtype, x->data, (size_t)k), q = ir_elem_get_f64(y->dtype, y->data, (size_t)k);
            if ((isnan(p) && isnan(q)) || p == q) continue;
            if (!(fabs(p - q) <= rtol * fmax(fabs(p), fabs(q)) + 1e-30)) {
                snprintf(why, cap, "output %u element %lld: %.9g vs %.9g", i, (long long)k, p, q);
                return false;
            }
        }
    }
    return true;
}

IrStatus tu_run_pipeline(IrGraph *g, const char *pipeline, TuDiag *d, const char *stat, int64_t *stat_value) {
    IrPipeline *p;
    IrStatus s = ir_pipeline_parse(pipeline, &d->diag, &p);
    if (s) return s;
    IrPipelineOptions po = {true, IR_PRINT_NEVER, NULL, stderr, NULL};
    s = ir_pipeline_run(p, g, &po, &d->diag);
    if (stat && stat_value) {
        *stat_value = -1;
        for (uint32_t i = 0; i < ir_pipeline_num_reports(p); i++) {
            IrPassReport r = ir_pipeline_report(p, i);
            for (uint32_t k = 0; k < r.n_stats; k++)
                if (strcmp(r.stat_names[k], stat) == 0) *stat_value = r.stat_values[k];
        }
    }
    ir_pipeline_destroy(p);
    return s;
}

uint32_t tu_count_op(const IrGraph *g, IrOp op) {
    uint32_t n = 0;
    for (IrNodeId m = ir_graph_walk_next(g, 0); m; m = ir_graph_walk_next(g, m)) n += ir_node_op(g, m) == op;
    return n;
}

/* ---- asserting helpers ------------------------------------------------------------------------ */

IrGraph *tu_parse_ok(const char *text, const char *filename) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, filename, &d);
    cr_assert_not_null(g, "parse failed: %s", tu_diag_text(&d));
    IrStatus s = ir_verify(g, &d.diag);
    cr_assert_eq(s, IR_OK, "verify failed: %s", tu_diag_text(&d));
    tu_diag_free(&d);
    return g;
}

void tu_text_put(TuText *t, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        cr_assert(n >= 0);
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        cr_assert(t->s);
    }
}

void tu_text_const(TuText *t, TuRng *r, const char *name, const char *dims, int64_t n, double a) {
    tu_text_put(t, "  const %%%s: f32[%s] = [", name, dims);
    for (int64_t i = 0; i < n; i++)
        tu_text_put(t, "%s%.6f", i ? ", " : "", a * (2.0 * (double)tu_rng_below(r, 1u << 20) / (double)(1u << 20) - 1.0));
    tu_text_put(t, "]\n");
}

void tu_assert_output_close(const IrTensor *ref, uint32_t rank, const int64_t *dims, const void *data, const char *what) {
    cr_assert_eq(rank, ref->rank, "%s rank", what);
    for (uint32_t k = 0; k < rank; k++)
        cr_assert_eq(dims[k], ref->dims[k], "%s dim %u: %lld vs %lld", what, k, (long long)dims[k], (long long)ref->dims[k]);
    cr_assert(ref->dtype == IR_DTYPE_F32 || ref->dtype == IR_DTYPE_I64, "%s: f32 or i64 outputs only", what);
    for (int64_t i = 0; i < ir_tensor_numel(ref); i++) {
        if (ref->dtype == IR_DTYPE_I64) {
            cr_assert_eq(((const int64_t *)data)[i], ((const int64_t *)ref->data)[i], "%s element %lld", what, (long long)i);
            continue;
        }
        float e = ((const float *)ref->data)[i], v = ((const float *)data)[i];
        cr_assert(fabsf(e - v) <= 1e-5f + 1e-4f * fabsf(e), "%s element %lld: %g vs %g", what, (long long)i, v, e);
    }
}

void tu_check_llvm_text(const char *text, int threads) { tu_check_llvm_text_tol(text, threads, 30, 1e-5, 1e-4); }

void tu_check_llvm_text_tol(const char *text, int threads, uint64_t seed, double atol, double rtol) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "check.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s\n%s", tu_diag_text(&d), text);
    TuTensors in, ref = {0}, out = {0};
    cr_assert(tu_make_inputs(g, seed, 1, &in));
    cr_assert_eq(tu_interp(g, &in, &ref, &d), IR_OK, "%s", tu_diag_text(&d));
    out.n = ref.n;
    out.t = calloc(out.n, sizeof *out.t);
    cr_assert(out.t);
    cr_assert_eq(llvm_specialize_inputs(g, in.t, in.n, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    irt_set_threads(threads);
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s\n%s", tu_diag_text(&d), text);
    cr_assert_eq(llvm_program_run(p, in.t, in.n, out.t, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (uint32_t i = 0; i < ref.n; i++) {
        int64_t bad = 0, n = ir_tensor_numel(&ref.t[i]);
        double worst = 0;
        cr_assert_eq(ir_tensor_numel(&out.t[i]), n);
        for (int64_t e = 0; e < n; e++) {
            double a = ir_elem_get_f64(out.t[i].dtype, out.t[i].data, (size_t)e);
            double b = ir_elem_get_f64(ref.t[i].dtype, ref.t[i].data, (size_t)e);
            if (!(fabs(a - b) <= atol + rtol * fabs(b))) bad++, worst = fmax(worst, fabs(a - b));
        }
        cr_expect_eq(bad, 0, "%lld of %lld outside rtol %g atol %g (worst %g), threads %d\n%s", (long long)bad, (long long)n,
                     rtol, atol, worst, threads, text);
    }
    irt_set_threads(1);
    llvm_program_destroy(p);
    tu_tensors_free(&in);
    tu_tensors_free(&ref);
    tu_tensors_free(&out);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

TuRun tu_compile_unbound(const char *model, const char *out) {
    const char *args[] = {"compile", model, "--no-cache", "-o", out, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    return r;
}

IrtArtifact *tu_compile_symbolic_text(const char *dir, const char *text, char **model) {
    *model = tu_path_join(dir, "m.ir");
    cr_assert(tu_write_file(*model, text, strlen(text)));
    char *irx = tu_path_join(dir, "m.irx");
    const char *args[] = {"compile", *model, "--no-cache", "--no-validate", "--quiet", "-o", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "symbolic dims"), "%s", r.out);
    tu_run_free(&r);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    free(irx);
    return a;
}

void tu_fill_pm1(IrTensor *t, uint64_t seed) {
    uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
    for (int64_t i = 0; i < ir_tensor_numel(t); i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ((float *)t->data)[i] = (float)((double)(x >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
}

bool tu_have_ptxas(void) {
    const char *e = getenv("IRTOOL_PTXAS");
    if (e && *e) return access(e, X_OK) == 0;
    if (access("/usr/local/cuda/bin/ptxas", X_OK) == 0) return true;
    TuRun r;
    const char *args[] = {"--version", NULL};
    bool ok = tu_run("ptxas", args, NULL, 0, NULL, &r) && r.status == 0;
    if (r.out) tu_run_free(&r);
    return ok;
}

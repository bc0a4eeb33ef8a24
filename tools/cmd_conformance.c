/* irtool conformance: runs ONNX backend test folders (model.onnx + test_data_set_N/ with
 * input_K.pb / output_K.pb) through import, verification and the reference interpreter, and
 * compares outputs with ONNX's tolerances.
 *
 * With --backend llvm each data set is compiled by the LLVM backend (JIT, specialized to the
 * data set's input shapes) and its outputs compared the same way; light/ models are compared
 * with the interpreter's outputs on the same seeded inputs (rtol 1e-4, atol 1e-5).
 *
 * With --backend cuda each node test is compiled for cuda:sm_90 (the same specialization, then
 * NVPTX and ptxas): with a GPU the artifact runs and is compared the same way, without one the
 * test is reported `compiled` (ptxas accepted the kernels) or `unsupported: <reason>`.
 *
 * --pack DIR (with --backend cuda) also writes each compiled data set to DIR/<test>[/<set>]/:
 * model.irx, input_K.npy and expected_K.npy (the test's outputs), what the runtime-only runner
 * (irtool-run --expect) checks on a GPU machine that has no LLVM (bench/gpu/pack.sh).
 *
 * Each test runs in a forked child so that a crash or a hang in one kernel becomes a failed
 * test instead of ending the run; results are printed in test-name order whatever the number
 * of parallel jobs, so the output is the same for every -j.
 */
#include "backend/backend.h"
#include "backend/lower/lower.h"
#include "passes/passes.h"
#include "backend/runtime/runtime.h"
#include "cli.h"
#include "ir/shape.h"
#include "validate/validate.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <regex.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RTOL 1e-3
#define ATOL 1e-7
#define LLVM_RTOL 1e-4 /* compiled code against the interpreter (light/ models) */
#define LLVM_ATOL 1e-5
#define MSG_CAP 2048

typedef enum Outcome { OUT_PASS, OUT_PASS_SHAPE, OUT_FAIL, OUT_UNSUPPORTED, OUT_COMPILED } Outcome;

typedef struct Test {
    char *name;  /* test_abs, light_resnet50 */
    char *suite; /* the folder holding it (node, light) */
    char *dir;   /* the test folder (model.onnx layout) */
    char *model; /* light layout: the .onnx file; NULL otherwise */
    char *light_output;
    bool llvm;   /* --backend llvm */
    bool cuda;   /* --backend cuda */
    bool symbolic; /* --symbolic: compiled once with every input dim a bounded symbol */
    const char *pack; /* --pack DIR: where compiled CUDA tests are written; NULL = not packed */
    Outcome outcome;
    char msg[MSG_CAP];
} Test;

typedef struct TestList {
    Test *v;
    size_t n, cap;
} TestList;

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

static const char *base_name(const char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') n--;
    size_t i = n;
    while (i > 0 && p[i - 1] != '/') i--;
    static char buf[4096];
    snprintf(buf, sizeof buf, "%.*s", (int)(n - i), p + i);
    return buf;
}

static bool list_push(TestList *l, Test t) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        Test *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = t;
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted entry names of a directory (malloc'd array of malloc'd strings). */
static char **dir_entries(const char *dir, size_t *count) {
    DIR *d = opendir(dir);
    *count = 0;
    if (!d) return NULL;
    size_t cap = 64, n = 0;
    char **v = malloc(cap * sizeof *v);
    struct dirent *e;
    while (v && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) break;
            v = nv;
        }
        v[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (v) qsort(v, n, sizeof *v, cmp_str);
    *count = n;
    return v;
}

static void free_entries(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

static bool has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* Adds the tests under dir: itself when it holds model.onnx, else its test subfolders and
 * light_*.onnx files, descending `depth` more levels into plain folders. */
static void discover(const char *dir, int depth, TestList *l) {
    char *m = join(dir, "model.onnx");
    if (m && is_file(m)) {
        /* the suite is the name of the folder holding the test folder */
        char *parent = join(dir, "..");
        char *real = parent ? realpath(parent, NULL) : NULL;
        Test t = {.name = strdup(base_name(dir)), .suite = strdup(real ? base_name(real) : "."), .dir = strdup(dir)};
        free(parent);
        free(real);
        list_push(l, t);
        free(m);
        return;
    }
    free(m);
    size_t n;
    char **ents = dir_entries(dir, &n);
    for (size_t i = 0; i < n; i++) {
        char *p = join(dir, ents[i]);
        if (!p) continue;
        if (is_dir(p)) {
            char *mm = join(p, "model.onnx");
            if (mm && is_file(mm)) {
                Test t = {.name = strdup(ents[i]), .suite = strdup(base_name(dir)), .dir = strdup(p)};
                list_push(l, t);
            } else if (depth > 0) {
                discover(p, depth - 1, l);
            }
            free(mm);
        } else if (strncmp(ents[i], "light_", 6) == 0 && has_suffix(ents[i], ".onnx")) {
            size_t k = strlen(ents[i]) - 5;
            char out[4096];
            snprintf(out, sizeof out, "%s/%.*s_output_0.pb", dir, (int)k, ents[i]);
            if (is_file(out)) {
                Test t = {.name = strndup(ents[i], k), .suite = strdup(base_name(dir)), .dir = strdup(dir),
                          .model = strdup(p), .light_output = strdup(out)};
                list_push(l, t);
            }
        }
        free(p);
    }
    free_entries(ents, n);
}

static int cmp_test(const void *a, const void *b) {
    const Test *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->dir, y->dir);
}

/* ---- running one test (in the child) ------------------------------------------------------- */

typedef struct Result {
    Outcome outcome;
    char msg[MSG_CAP];
} Result;

static void result_set(Result *r, Outcome o, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void result_set(Result *r, Outcome o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    r->outcome = o;
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
}

/* The first diagnostic's message, without "file:line: error: " and without source lines. */
static void first_diag(const IrStrBuf *b, char *out, size_t cap) {
    const char *s = b->data ? b->data : "";
    const char *nl = strchr(s, '\n');
    size_t n = nl ? (size_t)(nl - s) : strlen(s);
    const char *e = NULL;
    for (const char *p = s; p + 7 <= s + n; p++)
        if (memcmp(p, "error: ", 7) == 0) {
            e = p + 7;
            break;
        }
    if (e) {
        n -= (size_t)(e - s);
        s = e;
    }
    if (!n) snprintf(out, cap, "(no diagnostic)");
    else snprintf(out, cap, "%.*s", (int)n, s);
}

static void fail_from(Result *r, IrStatus s, const IrStrBuf *diag, const char *what) {
    char m[MSG_CAP - 64];
    first_diag(diag, m, sizeof m);
    result_set(r, s == IR_EUNSUPPORTED ? OUT_UNSUPPORTED : OUT_FAIL, "%s%s", what, m);
}

static void index_text(const IrTensor *t, int64_t flat, char *buf, size_t cap) {
    int64_t idx[IR_MAX_RANK];
    ir_shape_unravel(flat, t->rank, t->dims, idx);
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (uint32_t i = 0; i < t->rank && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)idx[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* Compares got with want; false with a message on mismatch. */
static bool compare_tol(const IrTensor *got, const IrTensor *want, uint32_t k, double rtol, double atol, char *msg,
                        size_t cap) {
    char gs[256], ws[256];
    ir_tensor_shape_str(got, gs, sizeof gs);
    ir_tensor_shape_str(want, ws, sizeof ws);
    if (got->dtype != want->dtype || got->rank != want->rank ||
        memcmp(got->dims, want->dims, got->rank * sizeof got->dims[0]) != 0) {
        snprintf(msg, cap, "output %u is %s, expected %s", k, gs, ws);
        return false;
    }
    int64_t n = ir_tensor_numel(got), worst = -1;
    if (got->dtype == IR_DTYPE_STRING) { /* byte for byte */
        const IrStringElem *a = got->data, *b = want->data;
        for (int64_t i = 0; i < n; i++) {
            if (a[i].len == b[i].len && (!a[i].len || memcmp(a[i].data, b[i].data, a[i].len) == 0)) continue;
            char idx[256];
            index_text(got, i, idx, sizeof idx);
            snprintf(msg, cap, "output %u differs at %s: got \"%.*s\" expected \"%.*s\"", k, idx,
                     (int)(a[i].len > 60 ? 60 : a[i].len), a[i].len ? a[i].data : "",
                     (int)(b[i].len > 60 ? 60 : b[i].len), b[i].len ? b[i].data : "");
            return false;
        }
        return true;
    }
    double worst_ratio = 0;
    bool exact = !ir_dtype_is_float(got->dtype);
    for (int64_t i = 0; i < n; i++) {
        double ratio;
        if (exact) {
            int64_t a = ir_elem_get_i64(got->dtype, got->data, (size_t)i);
            int64_t b = ir_elem_get_i64(want->dtype, want->data, (size_t)i);
            if (got->dtype == IR_DTYPE_U64) {
                a = (int64_t)((const uint64_t *)got->data)[i];
                b = (int64_t)((const uint64_t *)want->data)[i];
            }
            ratio = a == b ? 0 : INFINITY;
        } else {
            double a = ir_elem_get_f64(got->dtype, got->data, (size_t)i);
            double b = ir_elem_get_f64(want->dtype, want->data, (size_t)i);
            if (isnan(a) || isnan(b)) ratio = isnan(a) && isnan(b) ? 0 : INFINITY;
            else if (a == b) ratio = 0;
            else ratio = fabs(a - b) / (atol + rtol * fabs(b));
        }
        if (ratio > 1 && ratio > worst_ratio) {
            worst_ratio = ratio;
            worst = i;
        }
        if (worst >= 0 && isinf(worst_ratio)) break;
    }
    if (worst < 0) return true;
    char idx[256];
    index_text(got, worst, idx, sizeof idx);
    if (exact) {
        snprintf(msg, cap, "output %u worst element at %s: got %lld expected %lld", k, idx,
                 (long long)ir_elem_get_i64(got->dtype, got->data, (size_t)worst),
                 (long long)ir_elem_get_i64(want->dtype, want->data, (size_t)worst));
    } else {
        double a = ir_elem_get_f64(got->dtype, got->data, (size_t)worst);
        double b = ir_elem_get_f64(want->dtype, want->data, (size_t)worst);
        double abs_err = fabs(a - b), rel = b != 0 ? abs_err / fabs(b) : INFINITY;
        snprintf(msg, cap, "output %u worst element at %s: got %.9g expected %.9g (abs err %.3g, rel err %.3g)", k,
                 idx, a, b, abs_err, rel);
    }
    return false;
}

static bool compare(const IrTensor *got, const IrTensor *want, uint32_t k, char *msg, size_t cap) {
    return compare_tol(got, want, k, RTOL, ATOL, msg, cap);
}

/* Sequences and optionals: same form and count, then element by element ("output 0 element 2
 * ..." in the message). */
static bool compare_value(const IrTensor *got, const IrTensor *want, uint32_t k, char *msg, size_t cap) {
    if (got->form == IR_TYPE_TENSOR && want->form == IR_TYPE_TENSOR) return compare(got, want, k, msg, cap);
    char gs[256], ws[256];
    ir_tensor_shape_str(got, gs, sizeof gs);
    ir_tensor_shape_str(want, ws, sizeof ws);
    if (got->form != want->form || got->n_items != want->n_items) {
        snprintf(msg, cap, "output %u is %s, expected %s", k, gs, ws);
        return false;
    }
    for (uint32_t i = 0; i < got->n_items; i++) {
        char inner[MSG_CAP - 400];
        if (compare_value(&got->items[i], &want->items[i], k, inner, sizeof inner)) continue;
        snprintf(msg, cap, "%s %u: %s", got->form == IR_TYPE_SEQ ? "element" : "content", i, inner);
        return false;
    }
    return true;
}

static IrStatus load_model(const char *path, IrDiag *d, IrGraph **g) {
    IrStatus s = ir_load(path, d, g);
    if (s) return s;
    s = ir_verify(*g, d);
    if (s) {
        ir_graph_destroy(*g);
        *g = NULL;
    }
    return s;
}

/* Outputs of graphs with random ops depend on the generator, not on the op's definition:
 * ONNX's own runner cannot compare them either, so only shapes and dtypes are checked. */
static bool graph_is_random(const IrGraph *g) {
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        if (ir_op_info(ir_node_op(g, n))->cls == IR_CLASS_RANDOM) return true;
    }
    return false;
}

/* Runs the model at path through the LLVM backend: a fresh copy of the graph specialized to
 * the inputs' shapes, compiled in memory and run once. */
/* Light models carry random weights, which can make a final Softmax's logits all but equal
 * (SqueezeNet's 1000 logits are one value, 1.05e10): its output then hangs on the last bit of
 * each logit, which the summation order decides, so it tells nothing about the backend. Each
 * graph output computed by a Softmax or LogSoftmax is compared through its logits instead. */
static void expose_softmax_logits(IrGraph *g) {
    uint32_t n = ir_graph_num_outputs(g);
    IrValueId *outs = calloc(n + 1, sizeof *outs);
    if (!outs) return;
    for (uint32_t i = 0; i < n; i++) {
        IrValueId v = ir_graph_output(g, i);
        IrOp op = ir_value_kind(g, v) == IR_VALUE_RESULT ? ir_node_op(g, ir_value_def_node(g, v)) : IR_OP_NONE;
        outs[i] = op == IR_OP_SOFTMAX || op == IR_OP_LOG_SOFTMAX ? ir_node_operand(g, ir_value_def_node(g, v), 0) : v;
    }
    ir_region_set_outputs(g, IR_ROOT_REGION, n, outs);
    free(outs);
}

static IrStatus run_llvm(const char *path, bool logits, const IrTensor *ins, uint32_t n_in, IrTensor *outs, IrDiag *d) {
    IrGraph *g = NULL;
    IrLlvmProgram *prog = NULL;
    IrStatus s = load_model(path, d, &g);
    if (!s && logits) expose_softmax_logits(g);
    if (!s) s = llvm_specialize_inputs(g, ins, n_in, d);
    if (!s) s = llvm_program_create(g, d, &prog);
    if (!s) s = llvm_program_run(prog, ins, n_in, outs, d);
    llvm_program_destroy(prog);
    ir_graph_destroy(g);
    return s;
}

/* Whether value v is read as a shape (Reshape's shape, Unsqueeze's axes, ...): the length of such
 * a list is the rank of a result, which a model's types fix, so it stays a constant under
 * --symbolic while its values stay run-time data. */
static bool read_as_shape(const IrGraph *g, IrValueId v) {
    bool any = false;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n))
        for (uint32_t k = 0; k < ir_node_num_operands(g, n); k++) {
            if (ir_node_operand(g, n, k) != v) continue;
            if (!lower_shape_operand(ir_node_op(g, n), k)) return false;
            any = true;
        }
    return any;
}

/* Whether dim k of rank-r value v decides the rank of a result it feeds (GatherND's tuple length:
 * lower_rank_dim): a model's types fix it as they fix a shape list's length, so it stays a
 * constant under --symbolic. */
static bool decides_rank(const IrGraph *g, IrValueId v, uint32_t r, uint32_t k) {
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n))
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++)
            if (ir_node_operand(g, n, i) == v && lower_rank_dim(ir_node_op(g, n), i, r, k)) return true;
    return false;
}

/* --symbolic: every dim of every tensor input becomes a symbol of its own ranged [lo, 2d + 8]
 * (lo 0 for an empty dim, else 1), except dims of 1, which broadcast, the length of a shape
 * list (read_as_shape) and GatherND's tuple length (decides_rank); the types after the inputs are forgotten and shape-infer
 * derives them again, so the code is compiled for shapes known at run time only; the artifact
 * then runs at the test's shapes through the runtime. */
static IrStatus symbolize_inputs(IrGraph *g, const IrTensor *ins, IrDiag *d) {
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        IrValueId v = ir_graph_input(g, i);
        IrTypeId t = ir_value_type(g, v);
        if (!t || ir_type_is_container(g, t) || ins[i].rank > IR_MAX_RANK) continue;
        bool shape_list = ins[i].rank == 1 && read_as_shape(g, v);
        IrExprId dims[IR_MAX_RANK];
        for (uint32_t k = 0; k < ins[i].rank; k++) {
            /* a broadcast dim (as a symbol, numpy broadcasting becomes a guess), a shape list's
             * length or GatherND's tuple length (they decide a rank) stays the test's */
            if (ins[i].dims[k] == 1 || shape_list || decides_rank(g, v, ins[i].rank, k)) {
                dims[k] = ir_expr_const(g, ins[i].dims[k]);
                continue;
            }
            char name[32];
            snprintf(name, sizeof name, "in%u_d%u", i, k);
            IrExprId e = ir_expr_sym(g, ir_sym_declare(g, name));
            IrConstraint c = {.kind = IR_CONSTRAINT_RANGE, .a = e, .lo = ins[i].dims[k] ? 1 : 0,
                              .hi = 2 * ins[i].dims[k] + 8, .origin = IR_CONSTRAINT_USER};
            ir_graph_add_constraint(g, &c);
            dims[k] = e;
        }
        ir_value_set_type(g, v, ir_type_tensor(g, ir_type_dtype(g, t), ins[i].rank, dims));
    }
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n))
        for (uint32_t k = 0; k < ir_node_num_results(g, n); k++)
            if (ir_node_result(g, n, k)) ir_value_set_type(g, ir_node_result(g, n, k), 0);
    ir_graph_clear_constraints(g, IR_CONSTRAINT_FACT);
    ir_graph_clear_constraints(g, IR_CONSTRAINT_GUARD);
    IrPipeline *pl = NULL;
    IrPipelineOptions po = {.verify_each = true};
    IrStatus s = ir_pipeline_parse("shape-infer", d, &pl);
    if (!s) s = ir_pipeline_run(pl, g, &po, d);
    ir_pipeline_destroy(pl);
    return s;
}

/* Runs an artifact (in memory) on ins; outs receives owned tensors. A CUDA artifact on a
 * machine without a GPU does not load: then *no_gpu is set (when given) and nothing is reported. */
static IrStatus run_artifact(const void *bytes, size_t len, const char *what, const IrGraph *g, const IrTensor *ins,
                             uint32_t n_in, IrTensor *outs, bool *no_gpu, IrDiag *d) {
    IrStatus s = IR_OK;
    char err[1024] = "";
    IrtArtifact *a = irt_load_memory(bytes, len, err, sizeof err);
    if (!a && no_gpu && strncmp(err, "no CUDA driver/GPU found", 24) == 0) {
        *no_gpu = true;
        return IR_OK;
    }
    uint32_t n_out = ir_graph_num_outputs(g);
    IrtTensor *rins = calloc(n_in + 1, sizeof *rins), *routs = calloc(n_out + 1, sizeof *routs);
    if (!a || !rins || !routs) {
        if (!a) ir_diag_error(d, "cannot load the %s artifact: %s", what, err);
        s = a ? IR_ENOMEM : IR_EUNSUPPORTED;
    }
    for (uint32_t i = 0; !s && i < n_in; i++) {
        rins[i] = (IrtTensor){.dtype = irt_dtype_code(a, ir_dtype_name(ins[i].dtype)), .rank = ins[i].rank, .data = ins[i].data};
        memcpy(rins[i].dims, ins[i].dims, sizeof ins[i].dims);
    }
    if (!s && irt_run(a, rins, routs, err, sizeof err) != 0) {
        ir_diag_error(d, "the %s artifact failed: %s", what, err);
        s = IR_EUNSUPPORTED;
    }
    for (uint32_t i = 0; !s && i < n_out; i++) {
        cli_tensor_of_irt(a, &routs[i], &outs[i]);
        /* a string output's IrtString elements (bytes in the same block) are IrStringElems */
        _Static_assert(sizeof(IrtString) == sizeof(IrStringElem), "string elements differ");
        if (outs[i].dtype == IR_DTYPE_NONE) {
            ir_diag_error(d, "output %u: %s outputs are not compared from a %s artifact", i, irt_dtype_name(a, routs[i].dtype), what);
            outs[i] = (IrTensor){0};
            s = IR_EUNSUPPORTED;
            break;
        }
        outs[i].owned = true; /* the runtime's buffer, taken over */
        routs[i].data = NULL;
    }
    for (uint32_t i = 0; i < n_out; i++) free(routs[i].data);
    free(rins), free(routs);
    if (a) irt_free(a);
    return s;
}

static IrStatus run_llvm_symbolic(const char *path, const IrTensor *ins, uint32_t n_in, IrTensor *outs, IrDiag *d) {
    IrGraph *g = NULL, *src = NULL;
    IrStatus s = load_model(path, d, &g);
    if (!s) s = symbolize_inputs(g, ins, d);
    if (!s) s = load_model(path, d, &src); /* the graph the artifact embeds: before specialization */
    if (!s) s = symbolize_inputs(src, ins, d);
    if (!s) s = llvm_specialize_inputs_for(g, NULL, n_in, false, d);
    IrSymPlan sp = {0};
    if (!s) s = ir_sym_plan(g, &sp, d);
    void *bytes = NULL;
    size_t len = 0;
    IrArtifactOptions opt = {.syms = sp.n || sp.n_def || sp.n_data ? &sp : NULL}; /* none: all inputs scalars */
    if (!s) s = ir_artifact_build(g, src, &opt, d, &bytes, &len);
    if (!s) s = run_artifact(bytes, len, "symbolic", g, ins, n_in, outs, NULL, d);
    free(bytes);
    ir_graph_destroy(src);
    ir_graph_destroy(g);
    return s;
}

/* --backend cuda: the graph specialized to the inputs as for --backend llvm (without the CPU's
 * own fusion), compiled for cuda:sm_90 (NVPTX, then ptxas), run on the GPU when there is one;
 * without one *compiled_only is set and outs stay empty. With --symbolic the inputs' dims are
 * symbols as for --backend llvm --symbolic (sizes from the symbols at launch). */
static IrStatus run_cuda(const char *path, bool symbolic, const IrTensor *ins, uint32_t n_in, IrTensor *outs,
                         bool *compiled_only, void **artifact, size_t *artifact_len, IrDiag *d) {
    IrGraph *g = NULL, *src = NULL;
    IrStatus s = load_model(path, d, &g);
    if (!s) s = load_model(path, d, &src); /* the graph the artifact embeds: before specialization */
    if (!s && symbolic) s = symbolize_inputs(g, ins, d);
    if (!s && symbolic) s = symbolize_inputs(src, ins, d);
    if (!s) s = llvm_specialize_inputs_for(g, symbolic ? NULL : ins, n_in, false, d);
    if (!s && symbolic) s = ir_cuda_inline_groups(g, d);
    IrSymPlan sp = {0};
    if (!s && symbolic) s = ir_sym_plan(g, &sp, d);
    void *bytes = NULL;
    size_t len = 0;
    IrCudaOptions opt = {.target = "cuda:sm_90", .syms = symbolic && (sp.n || sp.n_def) ? &sp : NULL};
    if (!s) s = ir_cuda_artifact_build(g, src, &opt, d, &bytes, &len);
    if (!s) s = run_artifact(bytes, len, "cuda", g, ins, n_in, outs, compiled_only, d);
    if (!s && artifact) *artifact = bytes, *artifact_len = len;
    else free(bytes);
    ir_graph_destroy(src);
    ir_graph_destroy(g);
    return s;
}

/* --pack: the compiled artifact, the inputs and the expected outputs of one data set, under
 * pack/<test>[/<set>]/. Tensors only: a test with sequence or optional values is not packed
 * (reported, the test stays `compiled`). */
static IrStatus pack_data_set(const Test *t, const IrGraph *g, const char *set_dir, const char *set_name, bool several,
                              const void *bytes, size_t len, const IrTensor *ins, uint32_t n_in, IrDiag *d) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", t->pack, t->name);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        ir_diag_error(d, "--pack: cannot create '%s': %s", dir, strerror(errno));
        return IR_EIO;
    }
    if (several) {
        size_t k = strlen(dir);
        snprintf(dir + k, sizeof dir - k, "/%s", set_name);
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            ir_diag_error(d, "--pack: cannot create '%s': %s", dir, strerror(errno));
            return IR_EIO;
        }
    }
    char p[4200];
    IrStatus s = IR_OK;
    for (uint32_t i = 0; !s && i < n_in; i++) {
        if (ins[i].form != IR_TYPE_TENSOR) {
            ir_diag_error(d, "--pack: input %u is a sequence or optional, which .npy cannot hold", i);
            return IR_EUNSUPPORTED;
        }
        snprintf(p, sizeof p, "%s/input_%u.npy", dir, i);
        s = ir_npy_write(p, &ins[i], d);
    }
    for (uint32_t i = 0; !s && i < ir_graph_num_outputs(g); i++) {
        char f[64];
        snprintf(f, sizeof f, "output_%u.pb", i);
        char *pb = join(set_dir, f);
        IrTensor want = {0};
        s = pb ? ir_pb_value_read(pb, ir_type_kind(g, ir_value_type(g, ir_graph_output(g, i))), d, &want) : IR_ENOMEM;
        free(pb);
        if (!s && want.form != IR_TYPE_TENSOR) {
            ir_diag_error(d, "--pack: output %u is a sequence or optional, which .npy cannot hold", i);
            s = IR_EUNSUPPORTED;
        }
        if (!s && want.dtype == IR_DTYPE_U16 && ir_type_dtype(g, ir_value_type(g, ir_graph_output(g, i))) == IR_DTYPE_BF16)
            want.dtype = IR_DTYPE_BF16;
        snprintf(p, sizeof p, "%s/expected_%u.npy", dir, i);
        if (!s) s = ir_npy_write(p, &want, d);
        ir_tensor_free(&want);
    }
    snprintf(p, sizeof p, "%s/model.irx", dir); /* last: a folder with model.irx is complete */
    if (!s) s = ir_write_file_atomic(p, bytes, len, d);
    return s;
}

static void run_data_set(const IrGraph *g, const char *model, const Test *t, const char *set_dir,
                         const char *set_name, bool several, Result *r) {
    bool llvm = t->llvm, symbolic = t->symbolic, compiled_only = false;
    bool shape_only = graph_is_random(g);
    void *artifact = NULL; /* --pack: the compiled CUDA artifact */
    size_t artifact_len = 0;
    uint32_t n_in = ir_graph_num_inputs(g), n_out = ir_graph_num_outputs(g);
    IrTensor *ins = calloc(n_in + 1, sizeof *ins), *outs = calloc(n_out + 1, sizeof *outs);
    IrStrBuf buf;
    ir_strbuf_init(&buf);
    IrDiag d;
    ir_diag_init(&d, ir_diag_buffer_fn, &buf);
    char prefix[300] = "";
    if (several) snprintf(prefix, sizeof prefix, "%s: ", set_name);
    uint32_t k = 0;
    for (;; k++) {
        char f[64];
        snprintf(f, sizeof f, "input_%u.pb", k);
        char *p = join(set_dir, f);
        bool exists = p && is_file(p);
        IrTypeKind form = k < n_in ? ir_type_kind(g, ir_value_type(g, ir_graph_input(g, k))) : IR_TYPE_TENSOR;
        if (exists && k < n_in && ir_pb_value_read(p, form, &d, &ins[k])) {
            free(p);
            fail_from(r, IR_ESYNTAX, &buf, prefix);
            goto out;
        }
        free(p);
        if (!exists) break;
        /* ONNX stores bfloat16 test data as uint16 bit patterns (NumPy has no bfloat16) */
        if (k < n_in && ins[k].dtype == IR_DTYPE_U16 &&
            ir_type_dtype(g, ir_value_type(g, ir_graph_input(g, k))) == IR_DTYPE_BF16)
            ins[k].dtype = IR_DTYPE_BF16;
    }
    if (k != n_in) {
        result_set(r, OUT_FAIL, "%sthe test data has %u input%s, the graph has %u", prefix, k, k == 1 ? "" : "s", n_in);
        goto out;
    }
    IrInterpOptions opt = {0};
    IrStatus s = t->cuda  ? run_cuda(model, symbolic, ins, n_in, outs, &compiled_only, t->pack ? &artifact : NULL,
                                     &artifact_len, &d)
                 : symbolic ? run_llvm_symbolic(model, ins, n_in, outs, &d)
                 : llvm     ? run_llvm(model, false, ins, n_in, outs, &d)
                            : ir_interp_run(g, ins, n_in, outs, &opt, &d);
    if (s) {
        fail_from(r, s, &buf, prefix);
        goto out;
    }
    if (artifact) {
        s = pack_data_set(t, g, set_dir, set_name, several, artifact, artifact_len, ins, n_in, &d);
        if (s) {
            fail_from(r, s, &buf, prefix);
            goto out;
        }
    }
    if (compiled_only) {
        result_set(r, OUT_COMPILED, "%s", "");
        goto out;
    }
    for (uint32_t i = 0; i < n_out; i++) {
        char f[64];
        snprintf(f, sizeof f, "output_%u.pb", i);
        char *p = join(set_dir, f);
        if (!p || !is_file(p)) {
            free(p);
            result_set(r, OUT_FAIL, "%sthe test data has no %s for graph output %u", prefix, f, i);
            goto out;
        }
        IrTensor want;
        s = ir_pb_value_read(p, ir_type_kind(g, ir_value_type(g, ir_graph_output(g, i))), &d, &want);
        free(p);
        if (s) {
            fail_from(r, s, &buf, prefix);
            goto out;
        }
        if (want.dtype == IR_DTYPE_U16 && outs[i].dtype == IR_DTYPE_BF16) want.dtype = IR_DTYPE_BF16;
        char m[MSG_CAP - 320];
        bool ok;
        if (shape_only) {
            char gs[256], ws[256];
            ir_tensor_shape_str(&outs[i], gs, sizeof gs);
            ir_tensor_shape_str(&want, ws, sizeof ws);
            ok = strcmp(gs, ws) == 0;
            if (!ok) snprintf(m, sizeof m, "output %u is %s, expected %s", i, gs, ws);
            else r->outcome = OUT_PASS_SHAPE;
        } else {
            ok = compare_value(&outs[i], &want, i, m, sizeof m);
        }
        ir_tensor_free(&want);
        if (!ok) {
            result_set(r, OUT_FAIL, "%s%s", prefix, m);
            goto out;
        }
    }
out:
    free(artifact);
    for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&ins[i]);
    for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outs[i]);
    free(ins);
    free(outs);
    ir_strbuf_free(&buf);
}

/* xorshift64*: the light/ inputs must be the same on every run */
static double rng_uniform(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * UINT64_C(2685821657736338717)) >> 11) / 9007199254740992.0;
}

static void run_light(const Test *t, Result *r) {
    IrStrBuf buf;
    ir_strbuf_init(&buf);
    IrDiag d;
    ir_diag_init(&d, ir_diag_buffer_fn, &buf);
    IrGraph *g = NULL;
    IrStatus s = load_model(t->model, &d, &g);
    if (s) {
        fail_from(r, s, &buf, "");
        ir_strbuf_free(&buf);
        return;
    }
    uint32_t n_in = ir_graph_num_inputs(g), n_out = ir_graph_num_outputs(g);
    IrTensor *ins = calloc(n_in + 1, sizeof *ins), *outs = calloc(n_out + 1, sizeof *outs);
    IrTensor *cmp = calloc(n_out + 1, sizeof *cmp);
    IrTensor want = {0};
    uint64_t seed = UINT64_C(0x9E3779B97F4A7C15);
    for (uint32_t i = 0; i < n_in; i++) {
        IrTypeId ty = ir_value_type(g, ir_graph_input(g, i));
        uint32_t rank = ir_type_rank(g, ty);
        int64_t dims[IR_MAX_RANK];
        if (rank == IR_RANK_UNKNOWN || rank > IR_MAX_RANK) {
            result_set(r, OUT_FAIL, "input %u has no known rank to generate data for", i);
            goto out;
        }
        for (uint32_t k = 0; k < rank; k++)
            if (!ir_expr_is_const(g, ir_type_dims(g, ty)[k], &dims[k]) || dims[k] < 0) dims[k] = 1;
        IrDType dt = ir_type_dtype(g, ty) ? ir_type_dtype(g, ty) : IR_DTYPE_F32;
        if (ir_tensor_alloc(&ins[i], dt, rank, dims)) {
            result_set(r, OUT_FAIL, "cannot allocate input %u", i);
            goto out;
        }
        for (int64_t e = 0; e < ir_tensor_numel(&ins[i]); e++)
            ir_elem_set_f64(dt, ins[i].data, (size_t)e, ir_dtype_is_float(dt) ? rng_uniform(&seed) : 0);
    }
    IrInterpOptions opt = {0};
    if (t->llvm) {
        /* compile first: an unsupported op is reported without paying for the interpreter */
        if ((s = run_llvm(t->model, true, ins, n_in, cmp, &d))) {
            fail_from(r, s, &buf, "");
            goto out;
        }
    }
    if (t->llvm) expose_softmax_logits(g);
    s = ir_interp_run(g, ins, n_in, outs, &opt, &d);
    if (s) {
        fail_from(r, s, &buf, "");
        goto out;
    }
    if (t->llvm) {
        char m[MSG_CAP - 64];
        for (uint32_t i = 0; i < n_out; i++)
            if (!compare_tol(&cmp[i], &outs[i], i, LLVM_RTOL, LLVM_ATOL, m, sizeof m)) {
                result_set(r, OUT_FAIL, "llvm vs interpreter: %s", m);
                goto out;
            }
    }
    if ((s = ir_pb_tensor_read(t->light_output, &d, &want, NULL))) {
        fail_from(r, s, &buf, "");
        goto out;
    }
    char gs[256], ws[256];
    ir_tensor_shape_str(&outs[0], gs, sizeof gs);
    ir_tensor_shape_str(&want, ws, sizeof ws);
    if (n_out < 1 || strcmp(gs, ws) != 0) result_set(r, OUT_FAIL, "output 0 is %s, expected %s", gs, ws);
    else if (t->llvm) result_set(r, OUT_PASS, "%s", "");
    else result_set(r, OUT_PASS_SHAPE, "shape only");
out:
    ir_tensor_free(&want);
    for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&ins[i]);
    for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outs[i]), ir_tensor_free(&cmp[i]);
    free(ins);
    free(outs);
    free(cmp);
    ir_graph_destroy(g);
    ir_strbuf_free(&buf);
}

static void run_test(const Test *t, Result *r) {
    result_set(r, OUT_PASS, "%s", "");
    if (t->model && t->cuda) {
        result_set(r, OUT_UNSUPPORTED, "light models are not run with --backend cuda");
        return;
    }
    if (t->model) {
        run_light(t, r);
        return;
    }
    IrStrBuf buf;
    ir_strbuf_init(&buf);
    IrDiag d;
    ir_diag_init(&d, ir_diag_buffer_fn, &buf);
    char *model = join(t->dir, "model.onnx");
    IrGraph *g = NULL;
    IrStatus s = load_model(model, &d, &g);
    if (s) {
        fail_from(r, s, &buf, "");
        ir_strbuf_free(&buf);
        free(model);
        return;
    }
    size_t n;
    char **ents = dir_entries(t->dir, &n);
    size_t sets = 0;
    for (size_t i = 0; i < n; i++) sets += strncmp(ents[i], "test_data_set_", 14) == 0;
    if (!sets) result_set(r, OUT_FAIL, "no test_data_set_* folder");
    for (size_t i = 0; i < n && (r->outcome == OUT_PASS || r->outcome == OUT_PASS_SHAPE); i++) {
        if (strncmp(ents[i], "test_data_set_", 14) != 0) continue;
        char *p = join(t->dir, ents[i]);
        if (p && is_dir(p)) run_data_set(g, model, t, p, ents[i], sets > 1, r);
        free(p);
    }
    free_entries(ents, n);
    ir_graph_destroy(g);
    ir_strbuf_free(&buf);
    free(model);
}

/* ---- the runner: forked children, results in order ----------------------------------------- */

typedef struct Slot {
    pid_t pid;
    int fd;
    size_t test;
    Result res;
    size_t got;
} Slot;

static void child_main(const Test *t, int fd, unsigned timeout) {
    if (timeout) alarm(timeout);
    irt_set_threads(1); /* the tests already run as parallel processes */
    Result r;
    memset(&r, 0, sizeof r);
    run_test(t, &r);
    const char *p = (const char *)&r;
    size_t left = sizeof r;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        p += w;
        left -= (size_t)w;
    }
    _exit(0);
}

static void finish_slot(Slot *s, Test *t, unsigned timeout) {
    int st = 0;
    while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR) {}
    close(s->fd);
    if (s->got == sizeof s->res && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        t->outcome = s->res.outcome;
        memcpy(t->msg, s->res.msg, sizeof t->msg);
        t->msg[sizeof t->msg - 1] = 0;
    } else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
        t->outcome = OUT_FAIL;
        snprintf(t->msg, sizeof t->msg, "timed out after %u s", timeout);
    } else if (WIFSIGNALED(st)) {
        t->outcome = OUT_FAIL;
        snprintf(t->msg, sizeof t->msg, "crashed (%s)", strsignal(WTERMSIG(st)));
    } else {
        t->outcome = OUT_FAIL;
        snprintf(t->msg, sizeof t->msg, "the test process exited with status %d", WEXITSTATUS(st));
    }
    s->pid = 0;
}

static void print_test(const Test *t, bool quiet) {
    switch (t->outcome) {
    case OUT_PASS:
        if (!quiet) printf("pass %s\n", t->name);
        break;
    case OUT_PASS_SHAPE:
        if (!quiet) printf("pass %s (shape only)\n", t->name);
        break;
    case OUT_FAIL: printf("fail %s: %s\n", t->name, t->msg); break;
    case OUT_UNSUPPORTED:
        if (!quiet) printf("unsupported %s: %s\n", t->name, t->msg);
        break;
    case OUT_COMPILED:
        if (!quiet) printf("compiled %s\n", t->name);
        break;
    }
    fflush(stdout);
}

static void run_all(Test *tests, size_t n, int jobs, unsigned timeout, bool quiet) {
    Slot *slots = calloc((size_t)jobs, sizeof *slots);
    bool *done = calloc(n + 1, 1);
    size_t next = 0, printed = 0, running = 0, n_done = 0, n_fail = 0;
    CliProgress prog; /* on a terminal: tests done of total, failures, time */
    cli_progress_init(&prog, "irtool conformance", quiet);
    fflush(stdout);
    fflush(stderr);
    while (printed < n) {
        /* start children while there is room */
        while (slots && running < (size_t)jobs && next < n) {
            int p[2];
            Slot *s = NULL;
            for (int j = 0; j < jobs; j++)
                if (!slots[j].pid) s = &slots[j];
            if (!s || pipe(p) != 0) break;
            pid_t pid = fork();
            if (pid == 0) {
                close(p[0]);
                child_main(&tests[next], p[1], timeout);
            }
            close(p[1]);
            if (pid < 0) {
                close(p[0]);
                break;
            }
            *s = (Slot){.pid = pid, .fd = p[0], .test = next, .got = 0};
            running++;
            next++;
        }
        if (!running) { /* could not fork: run in-process */
            Result r;
            run_test(&tests[next], &r);
            tests[next].outcome = r.outcome;
            memcpy(tests[next].msg, r.msg, sizeof r.msg);
            n_fail += r.outcome == OUT_FAIL;
            n_done++;
            done[next++] = true;
        } else {
            struct pollfd pf[64];
            int map[64], np = 0;
            for (int j = 0; j < jobs && np < 64; j++)
                if (slots[j].pid) {
                    pf[np] = (struct pollfd){.fd = slots[j].fd, .events = POLLIN};
                    map[np++] = j;
                }
            if (poll(pf, (nfds_t)np, -1) < 0 && errno != EINTR) break;
            for (int i = 0; i < np; i++) {
                if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
                Slot *s = &slots[map[i]];
                ssize_t r = read(s->fd, (char *)&s->res + s->got, sizeof s->res - s->got);
                if (r > 0) s->got += (size_t)r;
                if (r > 0 && s->got < sizeof s->res) continue;
                if (r < 0 && errno == EINTR) continue;
                finish_slot(s, &tests[s->test], timeout);
                n_fail += tests[s->test].outcome == OUT_FAIL;
                n_done++;
                done[s->test] = true;
                running--;
            }
        }
        if (printed < n && done[printed]) cli_progress_clear(&prog);
        while (printed < n && done[printed]) print_test(&tests[printed++], quiet);
        cli_progress_stage(&prog, "%zu of %zu tests done, %zu failed", n_done, n, n_fail);
    }
    cli_progress_clear(&prog);
    free(slots);
    free(done);
}

/* ---- reports ------------------------------------------------------------------------------- */

static void xml_escape(IrStrBuf *b, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': ir_strbuf_puts(b, "&amp;"); break;
        case '<': ir_strbuf_puts(b, "&lt;"); break;
        case '>': ir_strbuf_puts(b, "&gt;"); break;
        case '"': ir_strbuf_puts(b, "&quot;"); break;
        case '\'': ir_strbuf_puts(b, "&apos;"); break;
        default:
            if (*p < 0x20 && *p != '\t' && *p != '\n') ir_strbuf_putc(b, ' ');
            else ir_strbuf_putc(b, (char)*p);
        }
    }
}

static IrStatus write_junit(const char *path, const Test *tests, size_t n, size_t passed, size_t failed,
                            size_t skipped) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_strbuf_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    ir_strbuf_printf(&b, "<testsuites tests=\"%zu\" failures=\"%zu\" skipped=\"%zu\" errors=\"0\">\n", n, failed,
                     skipped);
    ir_strbuf_printf(&b,
                     "  <testsuite name=\"irtool-conformance\" tests=\"%zu\" failures=\"%zu\" skipped=\"%zu\" "
                     "errors=\"0\">\n",
                     n, failed, skipped);
    (void)passed;
    for (size_t i = 0; i < n; i++) {
        const Test *t = &tests[i];
        ir_strbuf_puts(&b, "    <testcase classname=\"");
        xml_escape(&b, t->suite);
        ir_strbuf_puts(&b, "\" name=\"");
        xml_escape(&b, t->name);
        if (t->outcome == OUT_PASS || t->outcome == OUT_PASS_SHAPE || t->outcome == OUT_COMPILED) {
            ir_strbuf_puts(&b, "\"/>\n");
            continue;
        }
        ir_strbuf_puts(&b, "\">\n      <");
        const char *tag = t->outcome == OUT_FAIL ? "failure" : "skipped";
        ir_strbuf_printf(&b, "%s message=\"", tag);
        xml_escape(&b, t->msg);
        ir_strbuf_puts(&b, "\"/>\n    </testcase>\n");
    }
    ir_strbuf_puts(&b, "  </testsuite>\n</testsuites>\n");
    IrStatus s = b.failed ? IR_ENOMEM : IR_OK;
    if (!s) {
        IrDiag d;
        cli_diag_init(&d);
        s = ir_write_file_atomic(path, b.data, b.len, &d);
    }
    ir_strbuf_free(&b);
    return s;
}

typedef struct Expect {
    char **names;
    size_t n;
} Expect;

static bool read_expect(const char *path, Expect *e) {
    IrDiag d;
    cli_diag_init(&d);
    char *data;
    size_t len;
    memset(e, 0, sizeof *e);
    if (ir_read_file(path, &d, &data, &len)) return false;
    size_t cap = 0;
    for (char *line = data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char *h = strchr(line, '#');
        if (h) *h = 0;
        while (*line == ' ' || *line == '\t' || *line == '\r') line++;
        size_t k = strlen(line);
        while (k && (line[k - 1] == ' ' || line[k - 1] == '\t' || line[k - 1] == '\r')) line[--k] = 0;
        if (k) {
            if (e->n == cap) {
                cap = cap ? cap * 2 : 64;
                char **v = realloc(e->names, cap * sizeof *v);
                if (!v) break;
                e->names = v;
            }
            e->names[e->n++] = strdup(line);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(data);
    qsort(e->names, e->n, sizeof *e->names, cmp_str);
    return true;
}

static bool expect_has(const Expect *e, const char *name) {
    return bsearch(&name, e->names, e->n, sizeof *e->names, cmp_str) != NULL;
}

static bool outcome_ok(Outcome o) { return o == OUT_PASS || o == OUT_PASS_SHAPE || o == OUT_COMPILED; }

/* Regressions (expected tests not passing, or not compiling where no GPU runs them) and newly
 * passing tests; returns the regressions. */
static size_t check_expect(const Expect *e, const Test *tests, size_t n, const regex_t *filter) {
    size_t regress = 0, fresh = 0;
    for (size_t i = 0; i < e->n; i++) {
        const Test *t = NULL;
        for (size_t k = 0; k < n && !t; k++)
            if (strcmp(tests[k].name, e->names[i]) == 0) t = &tests[k];
        if (!t) {
            if (filter && regexec(filter, e->names[i], 0, NULL, 0) != 0) continue; /* filtered out */
            printf("regression %s: expected to pass, but no such test was found\n", e->names[i]);
            regress++;
        } else if (!outcome_ok(t->outcome)) {
            printf("regression %s: expected to pass, %s\n", t->name,
                   t->outcome == OUT_FAIL ? "failed" : "now unsupported");
            regress++;
        }
    }
    for (size_t k = 0; k < n; k++)
        if (outcome_ok(tests[k].outcome) && !expect_has(e, tests[k].name)) {
            printf("newly %s %s\n", tests[k].outcome == OUT_COMPILED ? "compiling" : "passing", tests[k].name);
            fresh++;
        }
    printf("%zu regression%s, %zu newly passing\n", regress, regress == 1 ? "" : "s", fresh);
    return regress;
}

/* ---- the command --------------------------------------------------------------------------- */

CLI_COMMAND(cmd_conformance) {
    const char *junit = NULL, *filter_src = NULL, *expect_path = NULL, *backend = NULL, *pack = NULL;
    bool quiet = false, symbolic = false;
    int jobs = 1;
    unsigned timeout = 600;
    const char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
    size_t n_dirs = 0;
    if (!dirs) return EXIT_INVALID;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **target = NULL;
        if (strcmp(a, "--junit") == 0) target = &junit;
        else if (strcmp(a, "--filter") == 0) target = &filter_src;
        else if (strcmp(a, "--expect") == 0) target = &expect_path;
        else if (strcmp(a, "--backend") == 0) target = &backend;
        else if (strcmp(a, "--pack") == 0) target = &pack;
        else if (strncmp(a, "--backend=", 10) == 0) {
            backend = a + 10;
            continue;
        }
        if (target) {
            if (++i >= argc) {
                free(dirs);
                return cli_usage_error("conformance", "%s needs an argument", a);
            }
            *target = argv[i];
        } else if (strncmp(a, "-j", 2) == 0 && a[2] >= '1' && a[2] <= '9') {
            char *e;
            long v = strtol(a + 2, &e, 10);
            if (*e || v > 64) {
                free(dirs);
                return cli_usage_error("conformance", "-j needs a number (1-64)");
            }
            jobs = (int)v;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            quiet = true;
        } else if (strcmp(a, "--symbolic") == 0) {
            symbolic = true;
        } else if (strcmp(a, "-j") == 0 || strcmp(a, "--jobs") == 0 || strcmp(a, "--timeout") == 0) {
            char *e = NULL;
            long v = i + 1 < argc ? strtol(argv[i + 1], &e, 10) : -1;
            bool is_jobs = strcmp(a, "--timeout") != 0;
            if (!e || *e || v < (is_jobs ? 1 : 0) || v > (is_jobs ? 64 : 86400)) {
                free(dirs);
                return cli_usage_error("conformance", "%s needs a number (%s)", a,
                                       is_jobs ? "1-64" : "seconds, 0 = none");
            }
            i++;
            if (is_jobs) jobs = (int)v;
            else timeout = (unsigned)v;
        } else if (a[0] == '-' && a[1]) {
            free(dirs);
            return cli_usage_error("conformance", "unknown option '%s'", a);
        } else {
            dirs[n_dirs++] = a;
        }
    }
    if (!n_dirs) {
        free(dirs);
        return cli_usage_error("conformance", "missing DIR");
    }
    if (backend && strcmp(backend, "interp") != 0 && strcmp(backend, "llvm") != 0 && strcmp(backend, "cuda") != 0) {
        free(dirs);
        return cli_usage_error("conformance", "--backend takes interp, llvm or cuda");
    }
    if (cli_refuse_clobber("conformance", junit, argc, argv)) {
        free(dirs);
        return EXIT_INVALID;
    }
    bool use_llvm = backend && strcmp(backend, "llvm") == 0, use_cuda = backend && strcmp(backend, "cuda") == 0;
    if (symbolic && !use_llvm && !use_cuda) {
        free(dirs);
        return cli_usage_error("conformance", "--symbolic needs --backend llvm or cuda");
    }
    if (pack && !use_cuda) {
        free(dirs);
        return cli_usage_error("conformance", "--pack needs --backend cuda");
    }
    if (pack && mkdir(pack, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "irtool conformance: cannot create '%s': %s\n", pack, strerror(errno));
        free(dirs);
        return EXIT_INVALID;
    }
    regex_t filter;
    bool have_filter = false;
    if (filter_src) {
        if (regcomp(&filter, filter_src, REG_EXTENDED | REG_NOSUB) != 0) {
            free(dirs);
            return cli_usage_error("conformance", "bad --filter regex '%s'", filter_src);
        }
        have_filter = true;
    }
    Expect expect = {0};
    int rc = EXIT_OK;
    if (expect_path && !read_expect(expect_path, &expect)) {
        rc = EXIT_USAGE;
        goto out_early;
    }
    TestList l = {0};
    for (size_t i = 0; i < n_dirs; i++) {
        if (is_dir(dirs[i])) discover(dirs[i], 2, &l);
        else if (is_file(dirs[i])) fprintf(stderr, "irtool conformance: '%s' is not a folder; skipped\n", dirs[i]);
        else {
            rc = cli_usage_error("conformance", "no such folder '%s'", dirs[i]);
            goto out;
        }
    }
    qsort(l.v, l.n, sizeof *l.v, cmp_test);
    size_t kept = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (have_filter && regexec(&filter, l.v[i].name, 0, NULL, 0) != 0) {
            free(l.v[i].name), free(l.v[i].suite), free(l.v[i].dir), free(l.v[i].model), free(l.v[i].light_output);
            continue;
        }
        l.v[i].llvm = use_llvm;
        l.v[i].cuda = use_cuda;
        l.v[i].symbolic = symbolic;
        l.v[i].pack = pack;
        l.v[kept++] = l.v[i];
    }
    l.n = kept;
    run_all(l.v, l.n, jobs, timeout, quiet);
    size_t passed = 0, failed = 0, skipped = 0, compiled = 0;
    for (size_t i = 0; i < l.n; i++) {
        Outcome o = l.v[i].outcome;
        passed += o == OUT_PASS || o == OUT_PASS_SHAPE;
        failed += o == OUT_FAIL;
        skipped += o == OUT_UNSUPPORTED;
        compiled += o == OUT_COMPILED;
    }
    if (expect_path && check_expect(&expect, l.v, l.n, have_filter ? &filter : NULL)) rc = EXIT_INVALID;
    if (use_cuda && !passed) { /* no GPU: the CUDA code was generated and assembled, not run */
        printf("no GPU: the CUDA artifacts were compiled (ptxas accepted them), not run\n");
        printf("%zu compiled, %zu unsupported", compiled, skipped);
        if (failed) printf(", %zu failed", failed);
        printf("\n");
    } else {
        printf("%zu passed, %zu failed, %zu skipped\n", passed, failed, skipped);
    }
    if (junit && write_junit(junit, l.v, l.n, passed, failed, skipped)) rc = EXIT_INVALID;
out:
    for (size_t i = 0; i < l.n; i++)
        free(l.v[i].name), free(l.v[i].suite), free(l.v[i].dir), free(l.v[i].model), free(l.v[i].light_output);
    free(l.v);
out_early:
    for (size_t i = 0; i < expect.n; i++) free(expect.names[i]);
    free(expect.names);
    if (have_filter) regfree(&filter);
    free(dirs);
    return rc;
}

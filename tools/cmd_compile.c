/* irtool compile: specializes MODEL for the given (or generated) inputs, compiles it with the
 * LLVM backend for a CPU target into an .irx artifact (backend/artifact/artifact.c) and, unless
 * --no-validate, runs the artifact through the runtime against the reference interpreter
 * before writing it (atomically). */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "cli.h"
#include "passes/passes.h"
#include "validate/validate.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GATE_RTOL 1e-4
#define GATE_ATOL 1e-5

typedef struct CompileArgs {
    const char *model, *pipeline, *out, *cpu;
    const char *cuda; /* --target cuda:sm_XX (issue 9) */
    bool tf32;        /* --tf32: f32 GEMMs on TF32 tensor cores (cuda targets) */
    const char **specs;
    int n_specs;
    bool no_validate;
    const char *cache_dir; /* --cache-dir (NULL = the default) */
    bool no_cache;
    const char *winograd; /* --winograd 4|2|off (NULL: 4, falling back to 2 when the gate fails) */
    bool quiet;           /* --quiet: no progress line, no gate summary, no notes */
} CompileArgs;

/* What the gate checked, for the summary line: the worst |compiled - interpreter| and where. */
typedef struct GateLog {
    double worst;
    char worst_out[96];
    bool shape_only;
    char inputs[512];   /* "x=x.npy f32[2, 1, 28, 28]" or "random x f32[3, 1, 28, 28]" */
    char bindings[256]; /* symbolic: the second binding's shapes */
} GateLog;

static int parse_args(int argc, char **argv, CompileArgs *a) {
    memset(a, 0, sizeof *a);
    a->specs = calloc((size_t)argc + 1, sizeof *a->specs);
    if (!a->specs) return EXIT_INVALID;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--input") == 0 || strcmp(s, "-i") == 0) {
            if (++i >= argc) return cli_usage_error("compile", "--input needs NAME=FILE.npy or FILE.npy");
            a->specs[a->n_specs++] = argv[i];
        } else if (strcmp(s, "-p") == 0 || strcmp(s, "--pipeline") == 0) {
            if (++i >= argc) return cli_usage_error("compile", "%s needs a pipeline", s);
            a->pipeline = argv[i];
        } else if (strcmp(s, "-o") == 0) {
            if (++i >= argc) return cli_usage_error("compile", "-o needs a file");
            a->out = argv[i];
        } else if (strcmp(s, "--target") == 0) {
            if (++i >= argc) return cli_usage_error("compile", "--target needs cpu, cpu:NAME or cuda:SM");
            const char *t = argv[i];
            int sm;
            bool arch_a;
            a->cuda = NULL;
            if (strcmp(t, "cpu") == 0) a->cpu = NULL;
            else if (strncmp(t, "cpu:", 4) == 0 && t[4]) a->cpu = t + 4;
            else if (strncmp(t, "cuda:", 5) == 0 && ir_cuda_target_parse(t, &sm, &arch_a)) a->cuda = t;
            else {
                static const char *const known[] = {"cpu", "cuda:sm_80", "cuda:sm_89", "cuda:sm_90", "cuda:sm_90a"};
                const char *sug = ir_suggest(t, known, sizeof known / sizeof *known);
                char hint[64] = "";
                if (sug) snprintf(hint, sizeof hint, "did you mean '%s'? ", sug);
                return cli_usage_error("compile", "unknown target '%s' (%ssupported: cpu, cpu:NAME, cuda:sm_80, cuda:sm_89, "
                                       "cuda:sm_90, cuda:sm_90a)", t, hint);
            }
        } else if (strcmp(s, "--tf32") == 0) {
            a->tf32 = true;
        } else if (strcmp(s, "--no-validate") == 0) {
            a->no_validate = true;
        } else if (strcmp(s, "--cache-dir") == 0) {
            if (++i >= argc) return cli_usage_error("compile", "--cache-dir needs a folder");
            a->cache_dir = argv[i];
        } else if (strcmp(s, "--quiet") == 0 || strcmp(s, "-q") == 0) {
            a->quiet = true;
        } else if (strcmp(s, "--no-cache") == 0) {
            a->no_cache = true;
        } else if (strcmp(s, "--winograd") == 0 || strncmp(s, "--winograd=", 11) == 0) {
            int rc = cli_winograd_arg("compile", s, argc, argv, &i, &a->winograd);
            if (rc) return rc;
        } else if (s[0] == '-' && s[1]) {
            return cli_usage_error("compile", "unknown option '%s'", s);
        } else if (a->model) {
            return cli_usage_error("compile", "only one MODEL is accepted");
        } else {
            a->model = s;
        }
    }
    if (!a->model) return cli_usage_error("compile", "missing MODEL");
    if (!a->out) return cli_usage_error("compile", "missing -o OUT.irx");
    if (a->tf32 && !a->cuda) return cli_usage_error("compile", "--tf32 needs a cuda target");
    return EXIT_OK;
}



/* batch > 0: inputs without a file get the symbolic batch dim set to it (compile once for any
 * batch); 0: they must have static shapes. */
static int load_inputs(const IrGraph *g, const CompileArgs *a, IrTensor *ins, int64_t batch) {
    uint32_t n = ir_graph_num_inputs(g);
    const char **files = calloc(n + 1, sizeof *files);
    if (!files) return EXIT_INVALID;
    int rc = cli_assign_graph_inputs("compile", g, (const char *const *)a->specs, a->n_specs, files);
    IrDiag d;
    cli_diag_init(&d);
    for (uint32_t i = 0; i < n && !rc; i++) {
        IrValueId v = ir_graph_input(g, i);
        if (ir_type_is_container(g, ir_value_type(g, v))) {
            fprintf(stderr, "irtool compile: input '%s' is %s: the llvm backend supports tensors only (unsupported type)\n",
                    ir_value_name(g, v), ir_type_kind(g, ir_value_type(g, v)) == IR_TYPE_SEQ ? "a sequence" : "an optional");
            rc = EXIT_INVALID;
        } else if (files[i]) {
            if (cli_read_input(files[i], ir_value_name(g, v), &d, &ins[i])) rc = EXIT_INVALID;
        } else if (cli_gen_input_batch(g, v, batch, &ins[i]) != IR_OK) {
            rc = cli_usage_error("compile", "input '%s' has a symbolic shape: pass --input %s=FILE.npy to bind it",
                                 ir_value_name(g, v), ir_value_name(g, v));
        }
    }
    free(files);
    return rc;
}

static IrStatus load_model(const CompileArgs *a, IrGraph **g) {
    IrStatus s = cli_load(a->model, true, g);
    if (s || !a->pipeline) return s;
    IrDiag d;
    cli_diag_init(&d);
    IrPipeline *pl = NULL;
    s = ir_pipeline_parse(a->pipeline, &d, &pl);
    IrPipelineOptions po = {.verify_each = true};
    if (!s) s = ir_pipeline_run(pl, *g, &po, &d);
    ir_pipeline_destroy(pl);
    if (s) {
        ir_graph_destroy(*g);
        *g = NULL;
    }
    return s;
}

/* The gate: every output within GATE_RTOL/GATE_ATOL of the interpreter's, else a message. */
/* Random ops without a seed draw from a seed derived from their node, which the pipeline may
 * renumber: such graphs are held to their outputs' shapes and dtypes (as in conformance). */
static bool graph_draws_unseeded(const IrGraph *g) {
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        bool seeded;
        ir_node_attr_float(g, n, "seed", &seeded);
        if (ir_op_info(ir_node_op(g, n))->cls == IR_CLASS_RANDOM && !seeded) return true;
    }
    return false;
}

static bool gate(const IrtArtifact *art, const IrGraph *g, const IrTensor *ref, const IrtTensor *got, uint32_t n_out,
                 GateLog *log) {
    bool ok = true, shape_only = graph_draws_unseeded(g);
    log->shape_only = shape_only;
    for (uint32_t i = 0; i < n_out; i++) {
        const char *name = ir_value_name(g, ir_graph_output(g, i));
        int64_t n = ir_tensor_numel(&ref[i]);
        bool shape_ok = got[i].rank == ref[i].rank && got[i].dtype == irt_dtype_code(art, ir_dtype_name(ref[i].dtype));
        for (uint32_t k = 0; shape_ok && k < ref[i].rank; k++) shape_ok = got[i].dims[k] == ref[i].dims[k];
        if (!shape_ok) {
            fprintf(stderr, "irtool compile: validation failed: output '%s' has a different shape or dtype\n", name);
            ok = false;
            continue;
        }
        if (shape_only) continue;
        CliCompare cmp;
        cli_compare(&ref[i], got[i].data, GATE_RTOL, GATE_ATOL, &cmp);
        if (!(cmp.max_abs <= log->worst)) {
            log->worst = cmp.max_abs;
            snprintf(log->worst_out, sizeof log->worst_out, "%s", name);
        }
        int64_t bad = cmp.bad, worst = cmp.worst;
        if (bad) {
            double r = ir_elem_get_f64(ref[i].dtype, ref[i].data, (size_t)worst);
            double c = ir_elem_get_f64(ref[i].dtype, got[i].data, (size_t)worst);
            fprintf(stderr,
                    "irtool compile: validation failed: output '%s' differs from the interpreter at %lld of %lld "
                    "elements (rtol %g, atol %g); worst element %lld: compiled %.9g, interpreter %.9g (|diff| %.3g)\n",
                    name, (long long)bad, (long long)n, GATE_RTOL, GATE_ATOL, (long long)worst, c, r, fabs(c - r));
            ok = false;
        }
    }
    return ok;
}

/* The cache key of this compile (issue 8): over the binary IR of the model before the pipeline,
 * the pipeline, the target and the versions (backend/artifact/cache.c), and the inputs' shapes. */
static IrStatus cache_key(const CompileArgs *a, const IrGraph *src, const IrTensor *ins, uint32_t n_in,
                          char key[IR_CACHE_KEY_CHARS]) {
    IrGraph *raw = NULL;
    IrStatus s = IR_OK;
    if (a->pipeline) s = cli_load(a->model, true, &raw);
    if (s) return s;
    char path[] = "/tmp/irtool-key-XXXXXX.irb";
    int fd = mkstemps(path, 4);
    if (fd < 0) {
        ir_graph_destroy(raw);
        return IR_EIO;
    }
    close(fd);
    IrDiag d;
    cli_diag_init(&d);
    char *irb = NULL;
    size_t irb_len = 0;
    s = ir_write_binary(raw ? raw : src, path, &d);
    if (!s) s = ir_read_file(path, &d, &irb, &irb_len);
    unlink(path);
    ir_graph_destroy(raw);
    if (s) return s;
    char tgt[64], opts[32];
    snprintf(tgt, sizeof tgt, "%s%s", a->cuda ? a->cuda : "", a->tf32 ? "+tf32" : "");
    snprintf(opts, sizeof opts, "winograd=%s", a->winograd ? a->winograd : "");
    IrCacheKeyInfo ki = {.ir = irb, .ir_len = irb_len, .pipeline = a->pipeline, .cpu = a->cuda ? tgt : a->cpu,
                         .options = a->winograd ? opts : NULL,
                         .inputs = ins, .n_inputs = n_in};
    s = ir_cache_key(&ki, key);
    free(irb);
    return s;
}

/* An artifact of this size or more leaves the page cache once written (it is on disk, fsync'd):
 * the first irt_load then reads it through its MADV_HUGEPAGE mapping in 2 MiB folios, so the
 * weights stream through 2 MiB TLB entries, where the pages the write left behind are 4 KiB or
 * mixed, by how fragmented memory was (ResNet-50: byte-identical artifacts with 69 and 112 of
 * 113 MB in 2 MiB mappings ran 53.4-53.9 and 50.7-51.6 ms; a C microkernel streaming weights
 * from memory 136 GFLOP/s on 4 KiB pages, 163 on 2 MiB ones). The first load reads the file
 * (ResNet-50: 5 ms); small artifacts (tiny_mlp's cold start) are left alone. */
#define DROP_CACHED_BYTES (8u << 20)
static void drop_cached(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); /* advice: pages still mapped stay */
    close(fd);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool has_symbolic_inputs(const IrGraph *g) {
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        uint32_t r = ir_type_rank(g, t);
        int64_t c;
        for (uint32_t k = 0; t && r != IR_RANK_UNKNOWN && k < r; k++)
            if (!ir_expr_is_const(g, ir_type_dims(g, t)[k], &c)) return true;
    }
    return false;
}

/* Without --input, a model whose only symbol is a leading batch dim compiles once for any
 * batch (backend/lower/batch.c): plans it into bp and picks the batch the gate runs (3 when the
 * constraints allow, so the per-sample loop runs). Returns EXIT_OK (bp->sym 0: not that case). */
static int plan_batch(const CompileArgs *a, const IrGraph *g, IrBatchPlan *bp, char *name, size_t cap, int64_t *gate_b,
                      IrSymPlan *sp, IrGraph **sym_probe) {
    memset(bp, 0, sizeof *bp);
    *sym_probe = NULL;
    if (a->n_specs || !has_symbolic_inputs(g)) return EXIT_OK;
    IrGraph *probe = NULL;
    if (load_model(a, &probe)) return EXIT_INVALID;
    IrDiag d, quiet;
    cli_diag_init(&d);
    ir_diag_init(&quiet, NULL, NULL);
    /* CUDA: symbolic dims always (sizes from the symbols at launch), never per-sample batching */
    IrStatus s = a->cuda ? IR_EUNSUPPORTED : ir_batch_analyze(probe, bp, &quiet);
    if (s == IR_EUNSUPPORTED) { /* not a plain batch: dims evaluated at run time (backend/cpu/dyn.c) */
        ir_graph_destroy(probe);
        probe = NULL;
        if (load_model(a, &probe)) return EXIT_INVALID;
        s = llvm_specialize_inputs_for(probe, NULL, ir_graph_num_inputs(probe), false, &d);
        if (!s) s = ir_sym_plan(probe, sp, &d);
        if (s) ir_graph_destroy(probe);
        else *sym_probe = probe;
        return s ? cli_exit_for(s) : EXIT_OK;
    }
    if (!s && bp->sym) {
        snprintf(name, cap, "%s", ir_sym_name(probe, bp->sym));
        int64_t b = 3;
        if (b < bp->lo) b = bp->lo;
        b = (b + bp->div - 1) / bp->div * bp->div;
        if (bp->hi >= 0 && b > bp->hi) b = bp->hi / bp->div * bp->div;
        if (b < 1 || b < bp->lo || bp->lo > 1 || bp->div > 1) {
            fprintf(stderr, "irtool compile: cannot compile once for any %s: the code is compiled for %s = 1, which its "
                            "constraints exclude (bind it with --input)\n", name, name);
            ir_batch_plan_free(bp);
            s = IR_EUNSUPPORTED;
        }
        *gate_b = b;
    }
    ir_graph_destroy(probe);
    return s ? cli_exit_for(s) : EXIT_OK;
}

/* Symbolic dims: the gate runs two bindings (every symbol near these values, within its
 * constraints). */
#define GATE_PICK_1 5
#define GATE_PICK_2 17

/* Inputs for the binding with every symbol of sp near pick, made from probe's input types. */
static int sym_inputs(const IrGraph *probe, const IrSymPlan *sp, int64_t pick, IrTensor *ins) {
    int64_t *bind = malloc((ir_graph_num_syms(probe) + 1) * sizeof *bind);
    if (!bind) return EXIT_INVALID;
    ir_sym_binding(probe, sp, pick, bind);
    int rc = EXIT_OK;
    for (uint32_t i = 0; i < ir_graph_num_inputs(probe) && !rc; i++)
        if (cli_gen_input_syms(probe, ir_graph_input(probe, i), bind, &ins[i]) != IR_OK) {
            fprintf(stderr, "irtool compile: cannot make an input for '%s' under the gate's binding\n",
                    ir_value_name(probe, ir_graph_input(probe, i)));
            rc = EXIT_INVALID;
        }
    free(bind);
    return rc;
}

/* GATE_PICK_2, or the symbols' lower bounds (pick 1) when their ranges make it the same binding
 * as GATE_PICK_1. */
static int64_t second_pick(const IrGraph *probe, const IrSymPlan *sp) {
    uint32_t ns = ir_graph_num_syms(probe) + 1;
    int64_t *b1 = malloc(ns * sizeof *b1), *b2 = malloc(ns * sizeof *b2), pick = GATE_PICK_2;
    if (b1 && b2) {
        ir_sym_binding(probe, sp, GATE_PICK_1, b1);
        ir_sym_binding(probe, sp, GATE_PICK_2, b2);
        if (memcmp(b1, b2, ns * sizeof *b1) == 0) pick = 1;
    }
    free(b1), free(b2);
    return pick;
}

/* The gate at one more binding of the symbols: interpreter on src against the artifact. */
static void describe_inputs(const IrGraph *g, const IrTensor *ins, const char *const *files, char *buf, size_t cap);

static bool gate_binding(IrtArtifact *art, const IrGraph *probe, const IrGraph *src, const IrSymPlan *sp, int64_t pick,
                         GateLog *log) {
    uint32_t n_in = ir_graph_num_inputs(src), n_out = ir_graph_num_outputs(src);
    IrTensor *ins = calloc(n_in + 1, sizeof *ins), *ref = calloc(n_out + 1, sizeof *ref);
    IrtTensor *rins = calloc(n_in + 1, sizeof *rins), *got = calloc(n_out + 1, sizeof *got);
    IrDiag d;
    cli_diag_init(&d);
    IrInterpOptions io = {0};
    char err[1024] = "";
    bool ok = ins && ref && rins && got && !sym_inputs(probe, sp, pick, ins) && !ir_interp_run(src, ins, n_in, ref, &io, &d);
    for (uint32_t i = 0; ok && i < n_in; i++) {
        rins[i].dtype = irt_dtype_code(art, ir_dtype_name(ins[i].dtype));
        rins[i].rank = ins[i].rank;
        memcpy(rins[i].dims, ins[i].dims, sizeof ins[i].dims);
        rins[i].data = ins[i].data;
    }
    if (ok) describe_inputs(src, ins, NULL, log->bindings, sizeof log->bindings);
    bool ran = ok && !irt_run(art, rins, got, err, sizeof err);
    if (ok && !ran) fprintf(stderr, "irtool compile: validation run failed: %s\n", err);
    ok = ran && gate(art, src, ref, got, n_out, log);
    for (uint32_t i = 0; ran && i < n_out; i++) free(got[i].data);
    for (uint32_t i = 0; ins && i < n_in; i++) ir_tensor_free(&ins[i]);
    for (uint32_t i = 0; ref && i < n_out; i++) ir_tensor_free(&ref[i]);
    free(ins), free(ref), free(rins), free(got);
    return ok;
}

/* "x=x.npy f32[2, 1, 28, 28], mask f32[2, 10]": each input's file (or nothing: generated) and
 * the shape the gate ran. */
static void describe_inputs(const IrGraph *g, const IrTensor *ins, const char *const *files, char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < ir_graph_num_inputs(g) && k + 1 < cap; i++) {
        k += (size_t)snprintf(buf + k, cap - k, "%s%s%s%s %s[", i ? ", " : "", ir_value_name(g, ir_graph_input(g, i)),
                              files && files[i] ? "=" : "", files && files[i] ? files[i] : "", ir_dtype_name(ins[i].dtype));
        for (uint32_t d = 0; d < ins[i].rank && k + 1 < cap; d++)
            k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)ins[i].dims[d]);
        if (k + 1 < cap) k += (size_t)snprintf(buf + k, cap - k, "]");
    }
}

/* --input on a model with symbolic dims binds them: say so, and how to keep them. */
static void note_fixed_shape(const CompileArgs *a, const IrGraph *g, const IrTensor *ins) {
    char syms[256] = "", bounds[256] = "";
    size_t k = 0, kb = 0;
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        uint32_t r = ir_type_rank(g, t);
        for (uint32_t d = 0; t && r != IR_RANK_UNKNOWN && d < r && d < ins[i].rank && k + 1 < sizeof syms; d++) {
            int64_t c;
            if (ir_expr_is_const(g, ir_type_dims(g, t)[d], &c)) continue;
            IrStrBuf e;
            ir_strbuf_init(&e);
            ir_expr_print(g, ir_type_dims(g, t)[d], &e);
            if (e.data && !strstr(syms, e.data)) {
                k += (size_t)snprintf(syms + k, sizeof syms - k, "%s%s = %lld", k ? ", " : "", e.data, (long long)ins[i].dims[d]);
                if (kb + 1 < sizeof bounds)
                    kb += (size_t)snprintf(bounds + kb, sizeof bounds - kb, "%s%s=1:HI", kb ? "," : "", e.data);
            }
            ir_strbuf_free(&e);
        }
    }
    if (!*syms || a->quiet) return;
    fprintf(stderr, "irtool compile: note: --input fixes the model's symbolic dims to the files' shapes (%s); the "
                    "artifact runs at these shapes only. To keep them dynamic, compile without --input (a symbol "
                    "without an upper bound has its workspace sized per run; a bound, e.g. -p 'shape-infer{%s}', plans "
                    "it once)\n", syms, bounds);
}

static void kernel_progress(void *user, uint32_t done, uint32_t total) {
    cli_progress_count(user, "building kernels: node", done, total);
}

static int compile_model(const CompileArgs *a) {
    double t0 = now_s();
    CliProgress prog;
    cli_progress_init(&prog, "irtool compile", a->quiet);
    cli_progress_stage(&prog, "loading %s", a->model);
    GateLog log;
    memset(&log, 0, sizeof log);
    IrGraph *g = NULL, *src = NULL;
    if (load_model(a, &g) || load_model(a, &src)) {
        ir_graph_destroy(g);
        return EXIT_INVALID;
    }
    cli_apply_winograd(g, a->winograd);
    uint32_t n_in = ir_graph_num_inputs(g), n_out = ir_graph_num_outputs(g);
    IrTensor *ins = calloc(n_in + 1, sizeof *ins), *ref = calloc(n_out + 1, sizeof *ref);
    IrTensor *one = calloc(n_in + 1, sizeof *one); /* batch mode: the sample the code is compiled for */
    IrtTensor *rins = calloc(n_in + 1, sizeof *rins), *got = calloc(n_out + 1, sizeof *got);
    void *bytes = NULL;
    size_t len = 0;
    IrtArtifact *art = NULL;
    bool have_got = false;
    IrBatchPlan bp = {0};
    char bname[64] = "";
    int64_t gate_b = 0;
    uint32_t kcount[2] = {0, 0};
    char kinfo[96] = "";
    IrSymPlan sp = {0};
    IrGraph *probe = NULL; /* symbolic dims: the specialized graph the gate's inputs are made from */
    int rc = ins && ref && rins && got && one ? plan_batch(a, g, &bp, bname, sizeof bname, &gate_b, &sp, &probe)
                                              : EXIT_INVALID;
    if (!rc && probe) rc = sym_inputs(probe, &sp, GATE_PICK_1, ins);
    else if (!rc) rc = load_inputs(g, a, ins, bp.sym ? gate_b : 0);
    if (!rc && bp.sym) rc = load_inputs(g, a, one, 1);
    if (!rc) describe_inputs(g, ins, NULL, log.inputs, sizeof log.inputs);
    if (!rc && a->n_specs && has_symbolic_inputs(g)) note_fixed_shape(a, g, ins);
    IrDiag d;
    cli_diag_init_progress(&d, &prog);
    /* the compile cache: the perturbation test hook bypasses it (it must reach the gate) */
    const char *perturb = getenv("IRTOOL_TEST_PERTURB_OUTPUT");
    char *cdir = NULL, key[IR_CACHE_KEY_CHARS] = "";
    const char *cache_state = "cache off";
    bool hit = false;
    if (!rc && !a->no_cache && !(perturb && *perturb == '1')) {
        cdir = a->cache_dir ? strdup(a->cache_dir) : ir_cache_default_dir();
        /* batch mode: the key sees the batch dims as -1 (not the shape of a static compile) */
        IrTensor *kins = bp.sym ? one : ins;
        for (uint32_t i = 0; bp.sym && i < n_in; i++)
            if (bp.in_batched[i]) kins[i].dims[0] = -1;
        IrTensor *sins = probe ? calloc(n_in + 1, sizeof *sins) : NULL; /* symbolic dims: -1 too */
        for (uint32_t i = 0; sins && i < n_in; i++) {
            sins[i] = ins[i];
            IrTypeId t = ir_value_type(probe, ir_graph_input(probe, i));
            for (uint32_t k = 0; k < sins[i].rank; k++) {
                int64_t c;
                if (!ir_expr_is_const(probe, ir_type_dims(probe, t)[k], &c)) sins[i].dims[k] = -1;
            }
        }
        IrStatus ks = cdir && (!probe || sins) ? cache_key(a, src, sins ? sins : kins, n_in, key) : IR_EINVAL;
        free(sins);
        for (uint32_t i = 0; bp.sym && i < n_in; i++)
            if (bp.in_batched[i]) kins[i].dims[0] = 1;
        if (cdir && ks == IR_OK) {
            int k = ir_cache_lookup(cdir, key, &bytes, &len);
            hit = k == IR_CACHE_HIT;
            cache_state = hit ? "cache hit" : "cache miss";
            if (k == IR_CACHE_CORRUPT) {
                fprintf(stderr, "irtool compile: cache entry %s in %s failed its checksum; deleted it and rebuilding\n", key, cdir);
                cache_state = "cache miss (corrupt entry rebuilt)";
            } else if (k == IR_CACHE_FOREIGN) {
                fprintf(stderr, "irtool compile: cache entry %s in %s belongs to another key; deleted it and rebuilding\n", key,
                        cdir);
                cache_state = "cache miss (misplaced entry rebuilt)";
            } else if (k == IR_CACHE_STALE) {
                cache_state = "cache miss (entry of an older irtool rebuilt)";
            }
        } else {
            free(cdir);
            cdir = NULL;
        }
    }
    IrInterpOptions io = {0};
    cli_progress_stage(&prog, "reference run in the interpreter");
    if (!rc && !hit && !a->no_validate && ir_interp_run(g, ins, n_in, ref, &io, &d)) rc = EXIT_INVALID;
    cli_progress_stage(&prog, "building kernels");
    IrStatus s = IR_OK;
    char cuda_summary[1200] = "";
    if (!rc && !hit) {
        s = llvm_specialize_inputs_for(g, probe ? NULL : bp.sym ? one : ins, n_in, !a->cuda && !probe, &d);
        bool data = !s && ir_sym_plan_has_data(g); /* dims the data decides: symbols the kernels write */
        if (data && (bp.sym || a->cuda)) {
            fprintf(stderr, "irtool compile: dims decided by the data (NonZero, Compress) compile only for the CPU "
                            "with static input shapes (bind the batch with --input)\n");
            s = IR_EUNSUPPORTED;
        }
        if (!s && probe && a->cuda) s = ir_cuda_inline_groups(g, &d);
        if (!s && (probe || data)) s = ir_sym_plan(g, &sp, &d);
        IrArtifactOptions opt = {.cpu = a->cpu, .pipeline = a->pipeline, .batch = bp.sym ? &bp : NULL, .batch_name = bname,
                                 .syms = probe || data ? &sp : NULL,
                                 .cache_dir = a->no_validate ? NULL : cdir, /* kernels: validated only */
                                 .kernel_counts = kcount, .progress = kernel_progress, .progress_user = &prog};
        cli_progress_clear(&prog);
        if (!s && a->cuda) /* its own gate: CPU build and, with a GPU, the CUDA run (tools/compile_cuda.c) */
            rc = cli_cuda_compile(g, src, a->cuda, a->tf32, a->pipeline, probe ? &sp : NULL, ins, n_in, a->no_validate ? NULL : ref, &bytes, &len,
                                  cuda_summary, sizeof cuda_summary);
        else if (!s) s = ir_artifact_build(g, src, &opt, &d, &bytes, &len);
        cli_progress_clear(&prog);
        if (s) rc = cli_exit_for(s);
        /* the gate; with the default Winograd tile a failure is retried once with F(2x2, 3x3),
         * whose accuracy is the direct form's (backend/cpu/winograd.c) */
        bool wg_retried = false;
        while (!rc && !a->no_validate && !a->cuda) {
            char err[1024];
            art = irt_load_memory(bytes, len, err, sizeof err);
            for (uint32_t i = 0; art && i < n_in; i++) {
                rins[i].dtype = irt_dtype_code(art, ir_dtype_name(ins[i].dtype));
                rins[i].rank = ins[i].rank;
                memcpy(rins[i].dims, ins[i].dims, sizeof ins[i].dims);
                rins[i].data = ins[i].data;
            }
            bool ran = art && !irt_run(art, rins, got, err, sizeof err);
            if (!ran && kcount[1] && !opt.kernel_cache_refresh) {
                /* a cached kernel that does not load or run: every kernel compiled afresh */
                fprintf(stderr, "irtool compile: note: the artifact did not run with %u kernel%s from the cache (%s); "
                                "compiling %s again\n", kcount[1], kcount[1] == 1 ? "" : "s", err, kcount[1] == 1 ? "it" : "them");
                opt.kernel_cache_refresh = true;
                goto rebuild;
            }
            if (!art) { /* compiled for a CPU this host is not (or a broken build): the gate cannot run */
                fprintf(stderr, "irtool compile: cannot run the artifact here to validate it: %s (--no-validate writes it "
                                "unchecked)\n", err);
                rc = EXIT_INVALID;
                break;
            }
            if (!ran) {
                fprintf(stderr, "irtool compile: validation run failed: %s\n", err);
                rc = EXIT_INVALID;
                break;
            }
            have_got = true;
            /* test hook: IRTOOL_TEST_PERTURB_OUTPUT=1 shifts the first compiled output element so
             * tests can check that the gate refuses (no graph miscompiles on purpose) */
            if (perturb && *perturb == '1' && n_out && ir_tensor_numel(&ref[0]) > 0)
                ir_elem_set_f64(ref[0].dtype, got[0].data, 0, ir_elem_get_f64(ref[0].dtype, got[0].data, 0) + 1.0);
            bool ok = gate(art, g, ref, got, n_out, &log);
            if (ok && probe) ok = gate_binding(art, probe, src, &sp, second_pick(probe, &sp), &log); /* a second binding */
            if (ok) break;
            if (kcount[1] && !opt.kernel_cache_refresh) {
                /* cached kernels are trusted no further than the gate: every kernel is compiled
                 * afresh, and its entry replaced, before anything else is blamed */
                fprintf(stderr, "irtool compile: note: the artifact failed validation with %u kernel%s from the cache; "
                                "compiling %s again\n", kcount[1], kcount[1] == 1 ? "" : "s", kcount[1] == 1 ? "it" : "them");
                opt.kernel_cache_refresh = true;
            } else {
                uint32_t wg4 = !wg_retried && !a->winograd ? ir_llvm_winograd_nodes(g, a->cpu, 4) : 0;
                if (!wg4) {
                    fprintf(stderr, "irtool compile: not writing '%s' (use --no-validate to write it anyway)\n", a->out);
                    rc = EXIT_INVALID;
                    break;
                }
                fprintf(stderr, "irtool compile: note: %u Conv%s through Winograd F(4x4, 3x3); recompiling with F(2x2, 3x3) "
                                "(--winograd 2)\n", wg4, wg4 == 1 ? "" : "s");
                cli_apply_winograd(g, "2");
                wg_retried = true;
            }
        rebuild:
            for (uint32_t i = 0; i < n_out; i++) free(got[i].data);
            memset(got, 0, (n_out + 1) * sizeof *got);
            have_got = false;
            irt_free(art);
            art = NULL;
            free(bytes);
            bytes = NULL;
            kcount[0] = kcount[1] = 0;
            memset(&log, 0, sizeof log);
            describe_inputs(g, ins, NULL, log.inputs, sizeof log.inputs);
            s = ir_artifact_build(g, src, &opt, &d, &bytes, &len);
            cli_progress_clear(&prog);
            if (s) rc = cli_exit_for(s);
        }
    }
    /* only validated artifacts enter the cache; a failed store is a note, not an error */
    /* CUDA artifacts count as validated once they ran on a GPU (not just their CPU build) */
    bool cache_ok = !a->cuda || strstr(cuda_summary, "GPU run matches") != NULL;
    if (!rc && !hit && cdir && !a->no_validate && cache_ok && ir_cache_store(cdir, key, bytes, len, &d))
        fprintf(stderr, "irtool compile: note: could not write the cache entry in %s\n", cdir);
    if (!rc && ir_write_file_atomic(a->out, bytes, len, &d)) rc = EXIT_INVALID;
    if (!rc && strcmp(a->out, "-") != 0 && len >= DROP_CACHED_BYTES) drop_cached(a->out);
    char sym_names[256] = "";
    for (uint32_t i = 0; probe && i < sp.n; i++)
        snprintf(sym_names + strlen(sym_names), sizeof sym_names - strlen(sym_names), "%s%s", i ? ", " : "",
                 ir_sym_name(probe, sp.sym[i]));
    if (!rc) /* the artifact itself may have gone to stdout (-o -) */
        fprintf(strcmp(a->out, "-") == 0 ? stderr : stdout, "compiled %s -> %s (%zu bytes, %s, %s, %.2f s%s%s)\n", a->model,
                a->out, len,
                hit              ? "validated when cached"
                : a->no_validate ? "not validated"
                : *cuda_summary  ? cuda_summary
                                 : "validated against the interpreter",
                cache_state, now_s() - t0, bp.sym ? ", compiled once for any value of " : probe ? ", symbolic dims " : "", bp.sym ? bname : sym_names);
    char unbounded[256] = ""; /* symbols without an upper bound: the gate ran them at representative values */
    for (uint32_t i = 0; probe && i < sp.n; i++)
        if (sp.hi[i] < 0)
            snprintf(unbounded + strlen(unbounded), sizeof unbounded - strlen(unbounded), "%s%s", *unbounded ? ", " : "",
                     ir_sym_name(probe, sp.sym[i]));
    if (!rc && *unbounded && !a->quiet)
        fprintf(strcmp(a->out, "-") == 0 ? stderr : stdout,
                "no upper bound on %s: the artifact places the values they size per run and grows its workspace to the "
                "largest binding seen%s\n", unbounded,
                a->no_validate || hit ? "" : "; the gate bound them to representative values (below)");
    if (!rc && !hit && cdir && kcount[0]) /* the per-kernel cache (identical kernels of other models) */
        snprintf(kinfo, sizeof kinfo, "kernels: %u compiled, %u from the cache\n", kcount[0] - kcount[1], kcount[1]);
    if (*kinfo) fputs(kinfo, strcmp(a->out, "-") == 0 ? stderr : stdout);
    if (!rc && !hit && !a->no_validate && !a->cuda && !a->quiet) { /* what the gate checked */
        FILE *o = strcmp(a->out, "-") == 0 ? stderr : stdout;
        fprintf(o, "checked against the interpreter on %s: %s%s%s%s\n",
                a->n_specs ? "the --input files" : "generated inputs (uniform [0, 1), a fixed seed per input)", log.inputs,
                bp.sym ? " (the batch the code runs per sample)" : "", *log.bindings ? "; and " : "", log.bindings);
        if (log.shape_only)
            fprintf(o, "  outputs' shapes and dtypes only (the graph draws unseeded random numbers)\n");
        else
            fprintf(o, "  every output element within %g + %g x |interpreter|; worst |compiled - interpreter| %.3g%s%s%s\n",
                    GATE_ATOL, GATE_RTOL, log.worst, *log.worst_out ? " (output '" : "", log.worst_out,
                    *log.worst_out ? "')" : "");
    }
    free(cdir);
    for (uint32_t i = 0; have_got && i < n_out; i++) free(got[i].data);
    for (uint32_t i = 0; ins && i < n_in; i++) ir_tensor_free(&ins[i]);
    for (uint32_t i = 0; one && i < n_in; i++) ir_tensor_free(&one[i]);
    free(one);
    ir_batch_plan_free(&bp);
    ir_graph_destroy(probe);
    for (uint32_t i = 0; ref && i < n_out; i++) ir_tensor_free(&ref[i]);
    irt_free(art);
    free(bytes);
    free(ins);
    free(ref);
    free(rins);
    free(got);
    ir_graph_destroy(g);
    ir_graph_destroy(src);
    return rc;
}

CLI_COMMAND(cmd_compile) {
    CompileArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc == EXIT_OK) rc = cli_refuse_clobber("compile", a.out, argc, argv);
    if (rc == EXIT_OK) rc = compile_model(&a);
    free(a.specs);
    return rc;
}

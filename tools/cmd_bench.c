/* irtool bench: times in-process inference of a model with the reference interpreter or the
 * LLVM backend, or of a compiled .irx artifact through libirtool-runtime, after warm-up and
 * prints median, min and p90 milliseconds and peak memory.
 * Inputs come from .npy files (by name or position); inputs not given are generated
 * deterministically (uniform [0, 1), fixed seed) when their shape is static.
 */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "cli.h"
#include "validate/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU time of this thread: with --threads 1 the whole run, and unlike wall time it does not
 * grow when other processes share the cores. */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}



typedef struct BenchArgs {
    const char *model;
    const char **specs;
    int n_specs, iterations, warmup, threads;
    bool llvm, profile;
    const char *winograd; /* --winograd 4|2|off (llvm backend) */
} BenchArgs;

static bool is_artifact(const char *p);

static int parse_args(int argc, char **argv, BenchArgs *a) {
    memset(a, 0, sizeof *a);
    a->iterations = 20;
    a->warmup = 3;
    a->specs = calloc((size_t)argc, sizeof *a->specs);
    if (!a->specs) return EXIT_INVALID;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *v = NULL;
        if (strcmp(s, "--input") == 0 || strcmp(s, "-i") == 0) {
            if (++i >= argc) return cli_usage_error("bench", "--input needs NAME=FILE.npy or FILE.npy");
            a->specs[a->n_specs++] = argv[i];
        } else if (strncmp(s, "--input=", 8) == 0) {
            a->specs[a->n_specs++] = s + 8;
        } else if (strcmp(s, "--backend") == 0 || strncmp(s, "--backend=", 10) == 0) {
            v = s[9] == '=' ? s + 10 : (++i < argc ? argv[i] : NULL);
            if (!v || (strcmp(v, "interp") != 0 && strcmp(v, "llvm") != 0))
                return cli_usage_error("bench", "--backend takes interp or llvm");
            a->llvm = strcmp(v, "llvm") == 0;
        } else if (strcmp(s, "--threads") == 0 || strncmp(s, "--threads=", 10) == 0) {
            v = s[9] == '=' ? s + 10 : (++i < argc ? argv[i] : NULL);
            if (!v || atoi(v) < 1) return cli_usage_error("bench", "--threads needs a positive count");
            a->threads = atoi(v);
        } else if (strcmp(s, "--iterations") == 0 || strcmp(s, "-n") == 0 || strcmp(s, "--warmup") == 0) {
            if (++i >= argc || atoi(argv[i]) < (strcmp(s, "--warmup") == 0 ? 0 : 1))
                return cli_usage_error("bench", "%s needs a positive count", s);
            *(strcmp(s, "--warmup") == 0 ? &a->warmup : &a->iterations) = atoi(argv[i]);
        } else if (strcmp(s, "--profile") == 0) {
            a->profile = true;
        } else if (strcmp(s, "--winograd") == 0 || strncmp(s, "--winograd=", 11) == 0) {
            int rc = cli_winograd_arg("bench", s, argc, argv, &i, &a->winograd);
            if (rc) return rc;
        } else if (s[0] == '-' && s[1]) {
            return cli_usage_error("bench", "unknown option '%s'", s);
        } else if (a->model) {
            return cli_usage_error("bench", "only one MODEL is accepted");
        } else {
            a->model = s;
        }
    }
    if (!a->model) return cli_usage_error("bench", "missing MODEL");
    if (a->winograd && !a->llvm) return cli_usage_error("bench", "--winograd needs --backend llvm");
    if (a->profile && !is_artifact(a->model))
        return cli_usage_error("bench", "--profile times the kernels of a compiled .irx artifact (irtool compile first)");
    return EXIT_OK;
}

/* Reads the --input files into ins: NAME=FILE by name, FILE for the next input not named
 * (.npy or .npz); given[i] marks the inputs read. */
static int read_specs(const BenchArgs *a, const char *const *names, uint32_t n, IrTensor *ins, bool *given) {
    IrDiag d;
    cli_diag_init(&d);
    const char **files = calloc(n + 1, sizeof *files);
    if (!files) return EXIT_INVALID;
    int rc = cli_assign_inputs("bench", names, n, (const char *const *)a->specs, a->n_specs, files);
    for (uint32_t i = 0; i < n && !rc; i++) {
        if (!files[i]) continue;
        if (cli_read_input(files[i], names[i], &d, &ins[i])) rc = EXIT_INVALID;
        else given[i] = true;
    }
    free(files);
    return rc;
}

static int load_inputs(const IrGraph *g, const BenchArgs *a, IrTensor *ins) {
    uint32_t n = ir_graph_num_inputs(g);
    bool *given = calloc(n + 1, 1);
    const char **names = calloc(n + 1, sizeof *names);
    if (!given || !names) { free(given); free(names); return EXIT_INVALID; }
    for (uint32_t i = 0; i < n; i++) names[i] = ir_value_name(g, ir_graph_input(g, i));
    int rc = read_specs(a, names, n, ins, given);
    free(names);
    for (uint32_t i = 0; i < n && !rc; i++)
        if (ir_type_is_container(g, ir_value_type(g, ir_graph_input(g, i)))) {
            fprintf(stderr, "irtool bench: input '%s' is a sequence or an optional: the llvm backend supports tensors only "
                    "(unsupported type)\n", ir_value_name(g, ir_graph_input(g, i)));
            rc = EXIT_INVALID;
        } else if (!given[i] && cli_gen_input(g, ir_graph_input(g, i), &ins[i]))
            rc = cli_usage_error("bench", "input '%s' has a symbolic shape: pass --input %s=FILE.npy",
                                 ir_value_name(g, ir_graph_input(g, i)), ir_value_name(g, ir_graph_input(g, i)));
    free(given);
    return rc;
}

/* ---- artifacts: irt_load once, then irt_run per iteration (load time reported apart) ------ */

static bool is_artifact(const char *p) {
    size_t n = strlen(p);
    return n > 4 && strcmp(p + n - 4, ".irx") == 0;
}

/* Input i of the artifact: the file given for it (by name or position), else generated f32
 * uniform [0, 1) with a fixed seed when its compiled shape is static. */
static int artifact_inputs(IrtArtifact *art, const BenchArgs *a, IrTensor *ins, IrtTensor *rins) {
    uint32_t n = irt_num_inputs(art);
    bool *given = calloc(n + 1, 1);
    const char **names = calloc(n + 1, sizeof *names);
    if (!given || !names) { free(given); free(names); return EXIT_INVALID; }
    for (uint32_t i = 0; i < n; i++) names[i] = irt_input_name(art, i);
    int rc = read_specs(a, names, n, ins, given);
    free(names);
    for (uint32_t i = 0; i < n && !rc; i++) {
        IrtTensor info;
        irt_input_info(art, i, &info);
        if (!given[i]) {
            bool ok = strcmp(irt_dtype_name(art, info.dtype), "f32") == 0 && info.rank <= IR_MAX_RANK;
            for (uint32_t k = 0; k < info.rank && ok; k++) ok = info.dims[k] >= 0;
            if (!ok || ir_tensor_alloc(&ins[i], IR_DTYPE_F32, info.rank, info.dims)) {
                rc = cli_usage_error("bench", "input '%s' is not a static f32 tensor: pass --input %s=FILE.npy",
                                     irt_input_name(art, i), irt_input_name(art, i));
                break;
            }
            cli_fill_uniform(&ins[i], i + 1);
        }
        rins[i].dtype = irt_dtype_code(art, ir_dtype_name(ins[i].dtype)); /* by name: codes are the manifest's */
        rins[i].rank = ins[i].rank;
        for (uint32_t k = 0; k < ins[i].rank && k < IRT_MAX_RANK; k++) rins[i].dims[k] = ins[i].dims[k];
        rins[i].data = ins[i].data;
    }
    free(given);
    return rc;
}

typedef struct KTime {
    uint32_t k;
    double ms;
} KTime;

static int cmp_ktime(const void *x, const void *y) {
    double a = ((const KTime *)x)->ms, b = ((const KTime *)y)->ms;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* --profile: the mean time of every kernel over `iterations` more runs, slowest first, with the
 * node it computes and its share of the run. */
static int print_profile(IrtArtifact *art, const IrtTensor *rins, int iterations) {
    uint32_t nk = irt_num_kernels(art);
    double *ms = calloc(nk + 1, sizeof *ms);
    KTime *kt = calloc(nk + 1, sizeof *kt);
    char err[1024];
    int rc = ms && kt ? EXIT_OK : EXIT_INVALID;
    if (!rc && irt_profile(art, rins, (uint32_t)iterations, ms, err, sizeof err)) {
        fprintf(stderr, "irtool bench: --profile: %s\n", err);
        rc = EXIT_INVALID;
    }
    double total = 0;
    for (uint32_t k = 0; !rc && k < nk; k++) {
        kt[k] = (KTime){k, ms[k]};
        total += ms[k];
    }
    if (!rc) {
        qsort(kt, nk, sizeof *kt, cmp_ktime);
        printf("profile: %u kernels, %.3f ms per run in kernels (mean of %d traced runs), slowest first\n", nk, total,
               iterations);
        printf("%6s %10s %6s %6s  %-16s %s\n", "kernel", "ms", "%", "cum%", "op", "computes");
        double cum = 0;
        for (uint32_t i = 0; i < nk; i++) {
            cum += kt[i].ms;
            printf("%6u %10.4f %6.1f %6.1f  %-16s %s\n", kt[i].k, kt[i].ms, total > 0 ? 100 * kt[i].ms / total : 0,
                   total > 0 ? 100 * cum / total : 0, irt_kernel_op(art, kt[i].k), irt_kernel_name(art, kt[i].k));
        }
    }
    free(ms);
    free(kt);
    return rc;
}

static int bench_artifact(const BenchArgs *a, double *times) {
    char err[1024];
    if (a->llvm) return cli_usage_error("bench", "--backend does not apply to a compiled .irx artifact");
    if (a->threads) irt_set_threads(a->threads);
    double t0 = now_ms();
    IrtArtifact *art = irt_load(a->model, err, sizeof err);
    if (!art) {
        fprintf(stderr, "irtool bench: %s: %s\n", a->model, err);
        return EXIT_INVALID;
    }
    double load_ms = now_ms() - t0;
    uint32_t n_in = irt_num_inputs(art), n_out = irt_num_outputs(art);
    IrTensor *ins = calloc(n_in + 1, sizeof *ins);
    IrtTensor *rins = calloc(n_in + 1, sizeof *rins), *outs = calloc(n_out + 1, sizeof *outs);
    int rc = ins && rins && outs ? artifact_inputs(art, a, ins, rins) : EXIT_INVALID;
    for (int it = -a->warmup; it < a->iterations && !rc; it++) {
        double t = now_ms(), c = cpu_ms();
        if (irt_run(art, rins, outs, err, sizeof err)) {
            fprintf(stderr, "irtool bench: %s\n", err);
            rc = EXIT_INVALID;
            break;
        }
        if (it >= 0) {
            times[it] = now_ms() - t;
            times[a->iterations + it] = cpu_ms() - c;
        }
        for (uint32_t i = 0; i < n_out; i++) free(outs[i].data);
    }
    if (!rc) {
        qsort(times, (size_t)a->iterations, sizeof *times, cmp_double);
        qsort(times + a->iterations, (size_t)a->iterations, sizeof *times, cmp_double);
        int p90 = (int)((a->iterations - 1) * 0.9 + 0.5);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("backend=artifact iterations=%d warmup=%d threads=%d\n", a->iterations, a->warmup, a->threads);
        printf("median_ms=%.3f min_ms=%.3f p90_ms=%.3f median_cpu_ms=%.3f\n", times[a->iterations / 2], times[0],
               times[p90], times[a->iterations + a->iterations / 2]);
        printf("load_ms=%.2f\n", load_ms);
        printf("peak_rss_kb=%ld\n", ru.ru_maxrss);
    }
    if (!rc && a->profile) rc = print_profile(art, rins, a->iterations);
    for (uint32_t i = 0; ins && i < n_in; i++) ir_tensor_free(&ins[i]);
    free(ins);
    free(rins);
    free(outs);
    irt_free(art);
    return rc;
}

CLI_COMMAND(cmd_bench) {
    BenchArgs a;
    int rc = parse_args(argc, argv, &a);
    IrGraph *g = NULL;
    IrTensor *ins = NULL, *outs = NULL;
    double *times = NULL;
    IrLlvmProgram *prog = NULL;
    uint32_t n_in = 0, n_out = 0;
    if (rc) goto out;
    if (is_artifact(a.model)) {
        times = calloc(2 * (size_t)a.iterations, sizeof *times);
        rc = times ? bench_artifact(&a, times) : EXIT_INVALID;
        goto out;
    }
    if (cli_load(a.model, true, &g)) {
        rc = EXIT_INVALID;
        goto out;
    }
    n_in = ir_graph_num_inputs(g);
    n_out = ir_graph_num_outputs(g);
    ins = calloc(n_in + 1, sizeof *ins);
    outs = calloc(n_out + 1, sizeof *outs);
    times = calloc(2 * (size_t)a.iterations, sizeof *times);
    if (!ins || !outs || !times) {
        rc = EXIT_INVALID;
        goto out;
    }
    if ((rc = load_inputs(g, &a, ins))) goto out;
    IrDiag d;
    cli_diag_init(&d);
    if (a.threads) irt_set_threads(a.threads); /* GEMM threads (the interpreter runs on one) */
    double t0 = now_ms(), compile_ms = 0;
    if (a.llvm) {
        cli_apply_winograd(g, a.winograd);
        IrStatus s = llvm_specialize_inputs(g, ins, n_in, &d);
        if (!s) s = llvm_program_create(g, &d, &prog);
        if (s) {
            rc = cli_exit_for(s);
            goto out;
        }
        compile_ms = now_ms() - t0;
        /* steady state as a serving loop sees it: the outputs are allocated once and reused
         * (llvm_program_run_into), as with a peer runtime's preallocated output binding */
        if ((s = llvm_program_run(prog, ins, n_in, outs, &d))) {
            rc = cli_exit_for(s);
            goto out;
        }
    }
    for (int it = -a.warmup; it < a.iterations; it++) {
        double t = now_ms(), c = cpu_ms();
        bool per_run = !a.llvm || llvm_program_data_dims(prog); /* outputs allocated by each run */
        if (per_run && a.llvm)
            for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outs[i]);
        IrStatus s = !per_run ? llvm_program_run_into(prog, ins, n_in, outs, &d)
                     : a.llvm ? llvm_program_run(prog, ins, n_in, outs, &d)
                              : ir_interp_run(g, ins, n_in, outs, NULL, &d);
        if (s) {
            rc = cli_exit_for(s);
            goto out;
        }
        if (it >= 0) {
            times[it] = now_ms() - t;
            times[a.iterations + it] = cpu_ms() - c;
        }
        if (!a.llvm)
            for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outs[i]);
    }
    qsort(times, (size_t)a.iterations, sizeof *times, cmp_double);
    qsort(times + a.iterations, (size_t)a.iterations, sizeof *times, cmp_double);
    int p90 = (int)((a.iterations - 1) * 0.9 + 0.5);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("backend=%s iterations=%d warmup=%d threads=%d\n", a.llvm ? "llvm" : "interp", a.iterations, a.warmup,
           a.threads ? a.threads : 0);
    printf("median_ms=%.3f min_ms=%.3f p90_ms=%.3f median_cpu_ms=%.3f\n", times[a.iterations / 2], times[0], times[p90],
           times[a.iterations + a.iterations / 2]);
    if (a.llvm)
        printf("compile_ms=%.1f kernels=%u workspace_bytes=%zu (without reuse %zu)\n", compile_ms,
               llvm_program_num_kernels(prog), llvm_program_workspace_bytes(prog), llvm_program_unplanned_bytes(prog));
    printf("peak_rss_kb=%ld\n", ru.ru_maxrss);
out:
    llvm_program_destroy(prog);
    for (uint32_t i = 0; ins && i < n_in; i++) ir_tensor_free(&ins[i]);
    free(ins);
    for (uint32_t i = 0; outs && a.llvm && i < n_out; i++) ir_tensor_free(&outs[i]);
    free(outs);
    free(times);
    if (g) ir_graph_destroy(g);
    free(a.specs);
    return rc;
}

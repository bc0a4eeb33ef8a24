/* `irtool compile --target cuda:sm_XX`: the CUDA artifact and its validation gate. Before the
 * artifact is written, the optimized graph's CPU build (the LLVM backend over the same
 * specialized graph, same memory plan) must match the interpreter (rtol 1e-4, atol 1e-5); when
 * a GPU is present the CUDA artifact itself must match too (f32 graphs: the same tolerance;
 * graphs with FP8 GEMMs or --tf32: cosine similarity >= 0.99 per output). Without a GPU the summary says
 * that the CUDA code was assembled but not run. */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "cli.h"
#include "validate/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RTOL 1e-4
#define ATOL 1e-5
#define FP8_COSINE 0.99

static bool has_fp8_gemm(const IrGraph *g) {
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n))
        if (ir_node_op(g, n) == IR_OP_FP8_MAT_MUL) return true;
    return false;
}

/* Runs bytes on ref's inputs and compares; 0 ok, 1 mismatch (printed), -1 cannot run (err). */
static int run_and_compare(const char *what, const void *bytes, size_t len, const IrGraph *g, const IrTensor *ins,
                           uint32_t n_in, const IrTensor *ref, bool cosine, char *err, size_t cap) {
    IrtArtifact *art = irt_load_memory(bytes, len, err, cap);
    if (!art) return -1;
    uint32_t n_out = ir_graph_num_outputs(g);
    IrtTensor *rins = calloc(n_in + 1, sizeof *rins), *got = calloc(n_out + 1, sizeof *got);
    int rc = rins && got ? 0 : -1;
    if (rc) snprintf(err, cap, "out of memory");
    for (uint32_t i = 0; !rc && i < n_in; i++) {
        rins[i].dtype = irt_dtype_code(art, ir_dtype_name(ins[i].dtype));
        rins[i].rank = ins[i].rank;
        memcpy(rins[i].dims, ins[i].dims, sizeof ins[i].dims);
        rins[i].data = ins[i].data;
    }
    if (!rc && irt_run(art, rins, got, err, cap)) rc = -1;
    const char *p = getenv("IRTOOL_TEST_PERTURB_OUTPUT"); /* the same test hook as the CPU gate */
    if (!rc && p && *p == '1' && n_out && ir_tensor_numel(&ref[0]) > 0)
        ir_elem_set_f64(ref[0].dtype, got[0].data, 0, ir_elem_get_f64(ref[0].dtype, got[0].data, 0) + 1.0);
    for (uint32_t i = 0; !rc && i < n_out; i++) {
        const char *name = ir_value_name(g, ir_graph_output(g, i));
        CliCompare cmp;
        cli_compare(&ref[i], got[i].data, RTOL, ATOL, &cmp);
        int64_t n = cmp.n, bad = cmp.bad, worst = cmp.worst;
        if (cosine) {
            double cs = cmp.cosine;
            if (!(cs >= FP8_COSINE)) {
                fprintf(stderr, "irtool compile: validation failed: %s output '%s' has cosine similarity %.6f to the "
                        "interpreter's (needs >= %.2f)\n", what, name, cs, FP8_COSINE);
                rc = 1;
            }
        } else if (bad) {
            fprintf(stderr, "irtool compile: validation failed: %s output '%s' differs from the interpreter at %lld of %lld "
                    "elements (rtol %g, atol %g); worst element %lld: %.9g vs %.9g\n", what, name, (long long)bad,
                    (long long)n, RTOL, ATOL, (long long)worst,
                    ir_elem_get_f64(ref[i].dtype, got[i].data, (size_t)worst),
                    ir_elem_get_f64(ref[i].dtype, ref[i].data, (size_t)worst));
            rc = 1;
        }
    }
    for (uint32_t i = 0; got && i < n_out; i++) free(got[i].data);
    free(rins);
    free(got);
    irt_free(art);
    return rc;
}

int cli_cuda_compile(IrGraph *g, const IrGraph *src, const char *target, bool tf32, const char *pipeline, const IrSymPlan *syms,
                     const IrTensor *ins, uint32_t n_in, const IrTensor *ref, void **bytes, size_t *len, char *summary, size_t scap) {
    char err[1024];
    const char *cpu_state = "not validated";
    if (ref) { /* 1. the CPU build of the same optimized, specialized graph */
        IrStrBuf sb;
        ir_strbuf_init(&sb);
        IrDiag quiet;
        ir_diag_init(&quiet, ir_diag_buffer_fn, &sb);
        IrArtifactOptions co = {.cpu = NULL, .pipeline = pipeline, .syms = syms};
        void *cb = NULL;
        size_t cl = 0;
        IrStatus s = ir_artifact_build(g, src, &co, &quiet, &cb, &cl);
        if (s == IR_EUNSUPPORTED) {
            const char *msg = sb.data ? sb.data : "";
            const char *nl = strchr(msg, '\n');
            fprintf(stderr, "irtool compile: note: no CPU build to cross-check (%.*s)\n", nl ? (int)(nl - msg) : (int)strlen(msg),
                    msg);
            cpu_state = "interpreter only (no CPU build)";
        } else if (s) {
            fputs(sb.data ? sb.data : "", stderr);
            ir_strbuf_free(&sb);
            return cli_exit_for(s);
        } else {
            int k = run_and_compare("CPU build", cb, cl, g, ins, n_in, ref, false, err, sizeof err);
            if (k < 0) fprintf(stderr, "irtool compile: validation run of the CPU build failed: %s\n", err);
            if (k) {
                free(cb);
                ir_strbuf_free(&sb);
                return EXIT_INVALID;
            }
            cpu_state = "CPU build matches the interpreter";
        }
        free(cb);
        ir_strbuf_free(&sb);
    }
    /* 2. the CUDA artifact */
    IrDiag d;
    cli_diag_init(&d);
    IrCudaOptions opt = {.target = target, .pipeline = pipeline, .tf32 = tf32, .syms = syms};
    IrStatus s = ir_cuda_artifact_build(g, src, &opt, &d, bytes, len);
    if (s) return cli_exit_for(s);
    if (!ref) {
        snprintf(summary, scap, "not validated");
        return EXIT_OK;
    }
    /* 3. on the GPU, when there is one */
    int k = run_and_compare("CUDA artifact", *bytes, *len, g, ins, n_in, ref, tf32 || has_fp8_gemm(g), err, sizeof err);
    if (k > 0) return EXIT_INVALID;
    if (k < 0 && !strstr(err, "no CUDA driver/GPU found") && !strstr(err, "too old")) {
        fprintf(stderr, "irtool compile: validation run of the CUDA artifact failed: %s\n", err);
        return EXIT_INVALID;
    }
    if (k < 0) snprintf(summary, scap, "%s; not run on a GPU: %s", cpu_state, err);
    else snprintf(summary, scap, "%s; GPU run matches the interpreter", cpu_state);
    return EXIT_OK;
}

/* Internal interface between the artifact loader (load.c) and the CUDA part of the runtime
 * (cuda_rt.c). A CUDA artifact is recognized by its manifest's triple (nvptx64-*); the loader
 * parses the common manifest (inputs, outputs, slots, workspace, constants) and hands the
 * tables over. Not installed. */
#ifndef IRTOOL_CUDA_RT_H
#define IRTOOL_CUDA_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct IrtCuda IrtCuda;

/* Shared by load.c (which defines them) and cuda_rt.c. */
/* Formats a message into err[cap] (nothing when err is NULL or cap 0). */
void irt_set_err(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The value of `key` in a manifest (its first line "key ..."), copied into buf[cap] (truncated);
 * false (buf empty) when no line has it. */
bool irt_manifest_get(const char *m, const char *key, char *buf, size_t cap);

/* Whether the manifest is a CUDA artifact's. */
bool irt_cuda_manifest(const char *manifest);
/* One line on why the artifact cannot run here (no driver, no GPU, GPU or driver too old). */
int irt_cuda_preflight(const char *manifest, char *err, size_t cap);

typedef struct IrtCudaTables {
    uint32_t n_slots;
    const int64_t *ws_off;        /* by slot: workspace offset or -1 */
    const uint64_t *const_off;    /* by slot: offset into the constants + 1, or 0 */
    size_t workspace;
    const unsigned char *consts;  /* host copy of the constants section */
    uint64_t consts_len;
    const unsigned char *code;    /* code section: cubin then PTX (offsets in the manifest) */
    size_t code_len;
} IrtCudaTables;

IrtCuda *irt_cuda_load(const char *manifest, const IrtCudaTables *t, char *err, size_t cap);
/* Copies the inputs in, replays the steps on a new stream (repeat times; with step_ms, the mean
 * device time of one replay between CUDA events), copies the outputs back into the caller's host
 * buffers. 0 or -1 with a message. */
/* Symbolic shapes: bind (NULL for static artifacts) holds the run's symbol values (sym[0 .. n_sym),
 * copied to the device for the kernels), the blocks placed for them (run: offset and bytes per
 * fxrun block) and the workspace they need. */
typedef struct IrtCudaBind {
    const int64_t *sym;
    uint32_t n_sym;
    const int64_t *run;
    size_t workspace;
} IrtCudaBind;
int irt_cuda_run(IrtCuda *cu, uint32_t n_in, const uint32_t *in_slot, void *const *in_data, const size_t *in_bytes,
                 uint32_t n_out, const uint32_t *out_slot, void **out_data, const size_t *out_bytes, uint32_t repeat,
                 const IrtCudaBind *bind, double *step_ms, char *err, size_t cap);
/* What a CPU artifact's irt_shapes computes, from the formulas: defined symbols into sym, then
 * into out the outputs' dims, the workspace the binding needs (the static one = workspace, or
 * more with blocks placed per run), each equality's a - b, each placed block's offset and
 * bytes. The caller's counts (outputs and their ranks, equalities, blocks and their slots) must
 * be the formulas' (else a corrupt artifact). -1 when they differ or a formula does not evaluate
 * (division by zero, an unknown symbol). */
typedef struct IrtCudaShapeCounts {
    uint32_t n_out;
    const uint32_t *out_rank;
    uint32_t n_checks, n_run;
    const uint32_t *run_slot;
} IrtCudaShapeCounts;
int irt_cuda_shapes(const IrtCuda *cu, const IrtCudaShapeCounts *k, int64_t *sym, uint32_t n_sym, size_t workspace,
                    int64_t *out);
void irt_cuda_free(IrtCuda *cu);

#endif

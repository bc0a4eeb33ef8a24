/* libirtool-runtime, the public API: load a compiled artifact (.irx), ask its inputs and
 * outputs, run it, free it. Links libc, libm, pthread and dl only (OpenBLAS and CUDA are
 * dlopen'd when an artifact needs them). Every fallible call returns NULL or -1 and writes one
 * line saying why into the caller's err[cap]; no call aborts or prints. Installed as
 * <irtool/runtime.h>; the backend's side (function table, file layout) is in abi.h.
 */
#ifndef IRTOOL_RUNTIME_H
#define IRTOOL_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IRT_MAX_RANK 16

/* A tensor given to or returned by irt_run: row-major data of dtype (a code: irt_dtype_code) and
 * shape dims[0 .. rank). Inputs stay the caller's; outputs are the caller's to release with
 * irt_tensor_free (free(t->data) does the same). */
typedef struct IrtTensor {
    int32_t dtype;
    uint32_t rank;
    int64_t dims[IRT_MAX_RANK];
    void *data;
} IrtTensor;

/* An element of a string tensor (bytes, not NUL-terminated). A string output keeps its bytes in
 * the same block as its elements, so irt_tensor_free releases both. */
typedef struct IrtString {
    const char *data;
    size_t len;
} IrtString;

typedef struct IrtArtifact IrtArtifact;

/* Owned: release with irt_free. Checks the file first (format, target, CPU features): NULL and
 * the reason when it cannot run here. The file is mapped: replace it by renaming, not rewriting. */
IrtArtifact *irt_load(const char *path, char *err, size_t cap);
IrtArtifact *irt_load_memory(const void *data, size_t len, char *err, size_t cap); /* copies data */
void irt_free(IrtArtifact *a);

/* Threads for compiled code in this process (OpenBLAS's and the runtime's pool); 0 = all cores. */
void irt_set_threads(int n);

/* Inputs and outputs, in the order irt_run takes them. Names are borrowed from the artifact.
 * info: the compiled dtype and shape (data NULL); a symbolic dim is -1 and
 * irt_input_dim_symbol names it ("seq"; NULL for a fixed dim); irt_output_dim_symbol names an
 * output's batch dim (other output dims known only when it runs stay -1 and unnamed). */
uint32_t irt_num_inputs(const IrtArtifact *a);
uint32_t irt_num_outputs(const IrtArtifact *a);
const char *irt_input_name(const IrtArtifact *a, uint32_t i);
const char *irt_output_name(const IrtArtifact *a, uint32_t i);
void irt_input_info(const IrtArtifact *a, uint32_t i, IrtTensor *out);
void irt_output_info(const IrtArtifact *a, uint32_t i, IrtTensor *out);
const char *irt_input_dim_symbol(const IrtArtifact *a, uint32_t i, uint32_t dim);
const char *irt_output_dim_symbol(const IrtArtifact *a, uint32_t i, uint32_t dim);
/* The index of the input (output) called name, or -1 and "unknown input 'z'; ..." in err. */
int irt_input_find(const IrtArtifact *a, const char *name, char *err, size_t cap);
int irt_output_find(const IrtArtifact *a, const char *name, char *err, size_t cap);
/* The batch symbol's name when compiled for any batch (dim 0 of the batched inputs), else NULL. */
const char *irt_batch_symbol(const IrtArtifact *a);

/* Dtype codes and names ("f32", "i64", "bool", "string", ...): irt_dtype_code returns -1 for an
 * unknown name, irt_dtype_name "?" and irt_dtype_size 0 for an unknown code. */
int32_t irt_dtype_code(const IrtArtifact *a, const char *name);
const char *irt_dtype_name(const IrtArtifact *a, int32_t dtype);
size_t irt_dtype_size(const IrtArtifact *a, int32_t dtype);

/* Runs the artifact on inputs[0 .. irt_num_inputs) and fills outputs[0 .. irt_num_outputs)
 * (owned by the caller afterwards: irt_tensor_free). Every input's dtype, rank, dims, symbol
 * ranges and data pointer are checked first. Safe to call from several threads at once.
 * Returns 0, or -1 with the reason in err (outputs then untouched). irt_run_n is the same with
 * the caller's array lengths, which it checks. */
int irt_run(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, char *err, size_t cap);
int irt_run_n(IrtArtifact *a, uint32_t n_inputs, const IrtTensor *inputs, uint32_t n_outputs, IrtTensor *outputs,
              char *err, size_t cap);
void irt_tensor_free(IrtTensor *t); /* frees an output's data; t->data is NULL afterwards */

/* For benchmarks: irt_run with the code run `repeat` times on the same buffers, storing the mean
 * milliseconds of one run of the code (CUDA: between events, copies excluded) in compute_ms. */
int irt_run_timed(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, uint32_t repeat, double *compute_ms,
                  char *err, size_t cap);
/* Per-kernel profile (CPU artifacts compiled with a trace entry; otherwise 0 kernels): kernel k's
 * op and result name, and irt_profile's mean milliseconds per kernel over `repeat` runs. */
uint32_t irt_num_kernels(const IrtArtifact *a);
const char *irt_kernel_op(const IrtArtifact *a, uint32_t k);
const char *irt_kernel_name(const IrtArtifact *a, uint32_t k);
int irt_profile(IrtArtifact *a, const IrtTensor *inputs, uint32_t repeat, double *kernel_ms, char *err, size_t cap);

/* Inspection without loading the code: the manifest text (owned: free(); NULL when the file is
 * not an artifact or its checksum does not match), and whether it can run on this host (0, or
 * -1 with the reason). */
char *irt_read_manifest(const char *path, char *err, size_t cap);
int irt_preflight(const char *manifest, char *err, size_t cap);
/* Every check irt_load makes before it maps code (header, checksum, the manifest's fields against
 * each other and the sections, the code's ELF headers read as data), without the preflight and
 * without mapping, loading or running any of the artifact's code. 0, or -1 with the reason in
 * err; `info` (may be NULL) gets one line describing the code section. */
int irt_verify(const char *path, char *info, size_t info_cap, char *err, size_t cap);

#ifdef __cplusplus
}
#endif
#endif

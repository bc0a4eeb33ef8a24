/* libirtool-runtime: the helpers compiled code calls, and (later) the artifact loader.
 *
 * Generated code never refers to an external symbol by name for these helpers: it receives
 * a table of function pointers (IrtFnTable) as its second argument, so the same machine code
 * can run in the JIT today and from a relocated object file later without symbol lookup.
 * The runtime links only OpenBLAS, libm, pthread and dl; never LLVM, the passes or the parser.
 */
#ifndef IRTOOL_RUNTIME_H
#define IRTOOL_RUNTIME_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Row-major single-precision GEMM: C = alpha * op(A) * op(B) + beta * C (op = transpose when
 * the flag is nonzero). 64-bit sizes so generated code does not depend on BLAS's int width. */
void irt_sgemm(int64_t trans_a, int64_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
               int64_t ldc);

/* The function table generated code is called with. The order is an ABI: append only. */
typedef struct IrtFnTable {
    void (*sgemm)(int64_t, int64_t, int64_t, int64_t, int64_t, float, const float *, int64_t,
                  const float *, int64_t, float, float *, int64_t);
    float (*tanhf)(float);
    float (*erff)(float);
} IrtFnTable;

enum { IRT_FN_SGEMM = 0, IRT_FN_TANHF = 1, IRT_FN_ERFF = 2, IRT_FN_COUNT = 3 };

/* The process-wide table (constant after load; safe to share between threads). */
const IrtFnTable *irt_fn_table(void);

/* Entry point of a compiled graph: bufs[v] is the buffer of value v (inputs, weights, and
 * slices of the caller's workspace); fns is irt_fn_table(). Reentrant: no global state. */
typedef void (*IrtEntryFn)(void **bufs, const IrtFnTable *fns);

#ifdef __cplusplus
}
#endif
#endif

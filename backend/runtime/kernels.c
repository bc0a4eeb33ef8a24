/* Helpers generated code reaches through IrtFnTable: BLAS GEMM with 64-bit sizes and the libm
 * functions LLVM has no intrinsic for. Stateless, so concurrent runs may share them. */
#include "backend/runtime/runtime.h"

#include <cblas.h>
#include <math.h>

void irt_sgemm(int64_t trans_a, int64_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
               int64_t ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                (blasint)m, (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
                (blasint)ldc);
}

static float irt_tanhf(float x) { return tanhf(x); }
static float irt_erff(float x) { return erff(x); }

static const IrtFnTable irt_table = {irt_sgemm, irt_tanhf, irt_erff};

const IrtFnTable *irt_fn_table(void) { return &irt_table; }

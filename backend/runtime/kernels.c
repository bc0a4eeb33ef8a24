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

double irt_math1(int64_t code, double x) {
    switch (code) {
    case IRT_MATH_TAN: return tan(x);
    case IRT_MATH_ASIN: return asin(x);
    case IRT_MATH_ACOS: return acos(x);
    case IRT_MATH_ATAN: return atan(x);
    case IRT_MATH_SINH: return sinh(x);
    case IRT_MATH_COSH: return cosh(x);
    case IRT_MATH_ASINH: return asinh(x);
    case IRT_MATH_ACOSH: return acosh(x);
    case IRT_MATH_ATANH: return atanh(x);
    case IRT_MATH_TANH: return tanh(x);
    case IRT_MATH_ERF: return erf(x);
    case IRT_MATH_EXPM1: return expm1(x);
    case IRT_MATH_LOG1P: return log1p(x);
    case IRT_MATH_SIN: return sin(x);
    case IRT_MATH_COS: return cos(x);
    default: return NAN;
    }
}

static const IrtFnTable irt_table = {irt_sgemm, irt_tanhf, irt_erff, irt_math1};

const IrtFnTable *irt_fn_table(void) { return &irt_table; }

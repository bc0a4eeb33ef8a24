/* The subset of the CUDA driver API (cuda.h) and cuBLASLt (cublasLt.h, library_types.h) that
 * the runtime calls through dlopen: constants and the one semi-opaque struct it allocates,
 * with IRT_ names so tests can include the real headers next to it and check every value
 * (tests/cuda/test_cuda_codegen.c). The runtime is built without the toolkit. */
#ifndef IRTOOL_CUDA_API_H
#define IRTOOL_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

enum {
    IRT_CUDA_SUCCESS = 0,
    IRT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    IRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    IRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    IRT_CU_STREAM_NON_BLOCKING = 1,
};

typedef int IrtLtStatus; /* cublasStatus_t */
typedef struct {
    uint64_t data[8];
} IrtLtAlgo;
typedef struct {
    IrtLtAlgo algo;
    size_t workspaceSize;
    IrtLtStatus state;
    float wavesCount;
    int reserved[4];
} IrtLtHeuristic;
enum {
    IRT_CUBLAS_COMPUTE_32F = 68,
    IRT_CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
    IRT_CUDA_R_32F = 0,
    IRT_CUDA_R_16BF = 14,
    IRT_CUDA_R_8F_E4M3 = 28,
    IRT_CUBLAS_OP_N = 0,
    IRT_CUBLAS_OP_T = 1,
    IRT_LT_DESC_TRANSA = 3,
    IRT_LT_DESC_TRANSB = 4,
    IRT_LT_DESC_EPILOGUE = 7,
    IRT_LT_DESC_BIAS_POINTER = 8,
    IRT_LT_EPILOGUE_BIAS = 4,
    IRT_LT_DESC_A_SCALE_POINTER = 17,
    IRT_LT_DESC_B_SCALE_POINTER = 18,
    IRT_LT_LAYOUT_BATCH_COUNT = 5,
    IRT_LT_LAYOUT_STRIDED_BATCH_OFFSET = 6,
    IRT_LT_PREF_MAX_WORKSPACE_BYTES = 1,
    IRT_LT_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    IRT_LT_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    IRT_LT_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    IRT_LT_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

#endif

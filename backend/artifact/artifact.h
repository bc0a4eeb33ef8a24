/* The .irx container written by the CPU and CUDA artifact writers (backend/artifact): the
 * manifest lines every target has, the target's own lines, the code and the binary IR. */
#ifndef IRTOOL_ARTIFACT_H
#define IRTOOL_ARTIFACT_H

#include "backend/lower/lower.h"

/* The .irx container shared by the CPU and CUDA writers (artifact/artifact.c): the manifest lines every
 * target has (versions, hash, pipeline, inputs/outputs, nodes, memory plan, constants), the
 * target's own lines, the code section and the binary IR of `source`. tail_bytes > 0 adds one
 * slot (plan->n_slots) placed after the planned workspace; extra constants (data the target
 * derived at compile time, e.g. transposed weights) take the slots after it. */
typedef struct IrArtifactPack {
    const char *pipeline;
    const char *target_lines; /* "triple ...\n" first, then anything the target's loader reads */
    const char *extra_lines;  /* appended after the constants (kernels, steps) */
    const LowerMemPlan *plan;
    int64_t tail_bytes;
    const IrArtifactConst *extra;
    uint32_t n_extra;
    const IrValueId *omit; /* constants the code never reads (replaced by extra ones) */
    uint32_t n_omit;
    uint32_t n_kernels;
    const uint32_t *kernel_nodes; /* CPU: the node index of each kernel call (profiling), or NULL */
    bool uses_blas; /* CPU code calls the BLAS GEMM (the runtime loads OpenBLAS only then) */
    const IrBatchPlan *batch; /* symbolic batch (CPU): compiled for one sample, run once per sample */
    const char *batch_name;
    const IrSymPlan *syms; /* symbolic dims evaluated at run time (CPU) */
    const void *code;
    size_t code_len;
} IrArtifactPack;
IrStatus ir_artifact_pack(const IrGraph *g, const IrGraph *source, const IrArtifactPack *pk, IrDiag *diag, void **bytes,
                          size_t *len) IR_MUST_CHECK;

#endif

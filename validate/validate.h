/* validate/: the eager reference interpreter, tensor files (.npy, ONNX TensorProto .pb),
 * comparison and reports. The one public header of the module.
 *
 * The interpreter is the ground truth every optimized or compiled result is compared with:
 * obviously-correct kernels first, exact software emulation of f16/bf16/FP8, deterministic
 * results for any thread count.
 */
#ifndef IRTOOL_VALIDATE_H
#define IRTOOL_VALIDATE_H

#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IR_MAX_RANK 16

/* A dense tensor in C (row-major) order. */
typedef struct IrTensor {
    IrDType dtype;
    uint32_t rank;
    int64_t dims[IR_MAX_RANK];
    void *data;     /* numel * dtype size bytes (NULL when numel == 0) */
    bool owned;     /* data is malloc'd by and freed with the tensor */
} IrTensor;

int64_t ir_tensor_numel(const IrTensor *t);
size_t ir_tensor_nbytes(const IrTensor *t);
/* Allocates zeroed data for the given dtype and shape. */
IrStatus ir_tensor_alloc(IrTensor *t, IrDType dt, uint32_t rank, const int64_t *dims) IR_MUST_CHECK;
/* A tensor viewing memory it does not own. */
void ir_tensor_view(IrTensor *t, IrDType dt, uint32_t rank, const int64_t *dims, const void *data);
/* Deep copy. */
IrStatus ir_tensor_copy(IrTensor *dst, const IrTensor *src) IR_MUST_CHECK;
void ir_tensor_free(IrTensor *t);
/* "f32[2, 3]" */
void ir_tensor_shape_str(const IrTensor *t, char *buf, size_t cap);

/* ---- tensor files ---------------------------------------------------------------------- */

/* .npy v1/v2/v3, C order, any irtool dtype ('<f4', '<f2', '|b1', ...; bf16 and FP8 as the
 * ml_dtypes names 'bfloat16', 'float8_e4m3fn', 'float8_e5m2' in the descr). */
IrStatus ir_npy_read(const char *path, IrDiag *diag, IrTensor *out) IR_MUST_CHECK;
IrStatus ir_npy_read_mem(const void *data, size_t len, const char *name, IrDiag *diag,
                         IrTensor *out) IR_MUST_CHECK;
IrStatus ir_npy_write(const char *path, const IrTensor *t, IrDiag *diag) IR_MUST_CHECK;
/* ONNX TensorProto (.pb), typed fields or raw_data. *name receives the tensor's name (malloc'd,
 * may be NULL). */
IrStatus ir_pb_tensor_read(const char *path, IrDiag *diag, IrTensor *out, char **name) IR_MUST_CHECK;

/* ---- the interpreter ------------------------------------------------------------------- */

typedef struct IrInterpOptions {
    int threads;            /* 0 = 1 thread; results never depend on it */
    /* Called for every value computed (node results, region results inside loops each
     * iteration); may be NULL. Used by --dump-intermediates and the validator. */
    void (*on_value)(void *user, const IrGraph *g, IrValueId v, const IrTensor *t);
    void *user;
} IrInterpOptions;

/* Runs the graph on inputs (one per graph input, in order). outputs receives one tensor per
 * graph output (owned; free with ir_tensor_free). Symbolic dims are bound from the inputs and
 * checked against the graph's constraints. Errors name the node and op. */
IrStatus ir_interp_run(const IrGraph *g, const IrTensor *inputs, uint32_t n_inputs,
                       IrTensor *outputs, const IrInterpOptions *opt, IrDiag *diag) IR_MUST_CHECK;

/* Evaluates one node without regions on the given operand tensors (one per operand; NULL for
 * an absent optional operand) with the interpreter's kernels. outputs receives one owned tensor
 * per result (free with ir_tensor_free; an absent optional result is left empty). The results
 * are checked against the declared dtypes, ranks and constant dims. Errors name the node; a
 * node with regions is refused (IR_EINVAL). Used by const-fold. */
IrStatus ir_interp_eval_node(const IrGraph *g, IrNodeId n, const IrTensor *const *inputs, IrTensor *outputs,
                             IrDiag *diag) IR_MUST_CHECK;

#ifdef __cplusplus
}
#endif
#endif

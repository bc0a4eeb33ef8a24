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

/* A runtime value: a dense tensor in C (row-major) order, or (form IR_TYPE_SEQ / IR_TYPE_OPT)
 * a sequence of tensors or an optional holding nothing or one tensor or sequence. A zeroed
 * IrTensor is a tensor, so code that only knows tensors keeps working; containers have no
 * elements of their own (numel 0, data NULL) and keep their items in `items`. */
typedef struct IrTensor {
    IrDType dtype;  /* containers: the dtype of the tensors they hold (NONE if unknown) */
    uint32_t rank;  /* containers: 0 */
    int64_t dims[IR_MAX_RANK];
    void *data;     /* numel * dtype size bytes (NULL when numel == 0) */
    bool owned;     /* data (containers: items and everything in them) is freed with it */
    uint8_t form;   /* IrTypeKind: IR_TYPE_TENSOR, IR_TYPE_SEQ or IR_TYPE_OPT */
    uint32_t n_items;         /* SEQ: elements; OPT: 0 (empty) or 1 */
    struct IrTensor *items;   /* SEQ/OPT: n_items values (SEQ: tensors; OPT: a tensor or SEQ) */
} IrTensor;

int64_t ir_tensor_numel(const IrTensor *t);
size_t ir_tensor_nbytes(const IrTensor *t);
/* Allocates zeroed data for the given dtype and shape. */
IrStatus ir_tensor_alloc(IrTensor *t, IrDType dt, uint32_t rank, const int64_t *dims) IR_MUST_CHECK;
/* A tensor viewing memory it does not own. */
void ir_tensor_view(IrTensor *t, IrDType dt, uint32_t rank, const int64_t *dims, const void *data);
/* Deep copy (containers with all their items). */
IrStatus ir_tensor_copy(IrTensor *dst, const IrTensor *src) IR_MUST_CHECK;
/* A view of src (tensor or container) that owns nothing; valid while src is. */
void ir_tensor_borrow(IrTensor *dst, const IrTensor *src);
void ir_tensor_free(IrTensor *t);
/* String tensors (dtype string): data holds IrStringElem entries (ir.h). An owned string
 * tensor keeps the bytes in the same allocation, after the elements, so ir_tensor_free frees
 * everything and ir_tensor_copy copies the bytes; ir_tensor_alloc gives empty strings. A kernel
 * may copy elements by value from its operands (any data movement op does), leaving them
 * pointing into the operands; ir_tensor_own_strings then makes the result self-contained
 * (the interpreter calls it on every string result before operands can be freed). */
IrStatus ir_tensor_from_strings(IrTensor *t, uint32_t rank, const int64_t *dims,
                                const IrStringElem *elems) IR_MUST_CHECK;
IrStatus ir_tensor_own_strings(IrTensor *t) IR_MUST_CHECK;
/* An owned tensor from a graph constant's data: a view of it, except strings, whose blob is
 * unpacked (free with ir_tensor_free either way). */
IrStatus ir_tensor_from_const(IrTensor *t, const IrGraph *g, IrConstId c) IR_MUST_CHECK;
/* A graph constant holding t's data (strings as a blob); 0 after an allocation failure. */
IrConstId ir_tensor_to_const(IrGraph *g, IrTypeId type, const IrTensor *t);
/* "f32[2, 3]"; containers: "seq<f32>(2 elements)", "opt<f32>(empty)", "opt(f32[3])" */
void ir_tensor_shape_str(const IrTensor *t, char *buf, size_t cap);
/* An empty sequence / optional of tensors of dtype dt (NONE if unknown), owning its (no) items. */
void ir_tensor_seq_init(IrTensor *t, IrDType dt);
void ir_tensor_opt_init(IrTensor *t, IrDType dt);
/* Appends *item (taking it; it is zeroed) at position pos (0..n_items) of sequence or empty
 * optional t. */
IrStatus ir_tensor_seq_insert(IrTensor *t, uint32_t pos, IrTensor *item) IR_MUST_CHECK;
/* True when the value's form and dtype fit type ty of g (unknown parts fit anything; shapes
 * of container elements are not checked). */
bool ir_tensor_fits_type(const IrGraph *g, IrTypeId ty, const IrTensor *t);

/* ---- tensor files ---------------------------------------------------------------------- */

/* .npy v1/v2/v3, C order, any irtool dtype ('<f4', '<f2', '|b1', ...; bf16 and FP8 as the
 * ml_dtypes names 'bfloat16', 'float8_e4m3fn', 'float8_e5m2' in the descr). */
IrStatus ir_npy_read(const char *path, IrDiag *diag, IrTensor *out) IR_MUST_CHECK;
IrStatus ir_npy_read_mem(const void *data, size_t len, const char *name, IrDiag *diag,
                         IrTensor *out) IR_MUST_CHECK;
IrStatus ir_npy_write(const char *path, const IrTensor *t, IrDiag *diag) IR_MUST_CHECK;
/* .npz (numpy's zip of .npy files, stored or deflated): the array called name (member
 * "name.npy"), or the only array when name is NULL or the file holds just one; else an error
 * listing the arrays it holds. */
IrStatus ir_npz_read(const char *path, const char *name, IrDiag *diag, IrTensor *out) IR_MUST_CHECK;
/* Whether data starts like a zip file (an .npz). */
bool ir_npz_is(const void *data, size_t len);
/* ONNX TensorProto (.pb), typed fields or raw_data. *name receives the tensor's name (malloc'd,
 * may be NULL). */
IrStatus ir_pb_tensor_read(const char *path, IrDiag *diag, IrTensor *out, char **name) IR_MUST_CHECK;
/* A .pb file holding a value of kind `form`: a TensorProto (IR_TYPE_TENSOR), a SequenceProto
 * (IR_TYPE_SEQ) or an OptionalProto (IR_TYPE_OPT), as ONNX test folders store the data of
 * inputs and outputs of those types. The caller picks the form from the declared type. */
IrStatus ir_pb_value_read(const char *path, IrTypeKind form, IrDiag *diag, IrTensor *out) IR_MUST_CHECK;

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

/* ---- validation ---------------------------------------------------------------------------- */
/* Comparing a candidate model's results with a reference model's (validate/compare.c), finding
 * the first diverging node through provenance (validate/localize.c), generating inputs that fit
 * a graph's types and constraints, and writing reports (validate/report.c). */

typedef struct IrTolerance {
    double rtol, atol;
    double min_cosine;  /* judged by cosine >= min_cosine when by_cosine; else an extra check
                         * when > 0 */
    bool by_cosine;     /* FP8 candidates: judged by cosine alone */
} IrTolerance;

/* Defaults: f32/f64 rtol 1e-5 atol 1e-6; f16/bf16 1e-3/1e-3; FP8 dtypes or fp8 = true: cosine
 * >= 0.99; integers and bool exact. */
IrTolerance ir_tolerance_default(IrDType dt, bool fp8);
/* True when the graph holds an irtool FP8 op (quantize_fp8, dequantize_fp8, fp8_matmul),
 * nested regions included. */
bool ir_graph_has_fp8(const IrGraph *g);
/* Distance in units in the last place of dtype dt between a and b, both rounded to dt (ints:
 * |a - b|). 0 when both are NaN; UINT64_MAX when only one is NaN. */
uint64_t ir_ulp_distance(IrDType dt, double a, double b);

typedef struct IrCompareMetrics {
    bool comparable;       /* same shape; false: only `reason` is set */
    char reason[192];      /* why it failed when not comparable (callers may set it too) */
    int64_t numel;
    double max_abs_err, max_rel_err, mean_abs_err, rms_err, cosine;
    uint64_t max_ulp;
    double frac_within;    /* elements within rtol/atol */
    uint32_t rank;
    int64_t worst_index[IR_MAX_RANK]; /* the element furthest outside (or nearest to) tolerance */
    double worst_ref, worst_cand;
    double argmax_agreement; /* rank-2 outputs: fraction of rows whose argmax agrees; else -1 */
    double min_rtol;       /* smallest rtol that passes with the given atol (inf: none) */
    double min_atol;       /* smallest atol that passes with the given rtol */
    uint64_t nan_mismatch; /* elements where exactly one side is NaN */
    bool pass;
} IrCompareMetrics;

/* Compares cand with ref element by element (any dtypes, read as double). Sequences and
 * optionals must have the same form and length; their tensors are compared one by one and
 * the metrics combined (maxima, weighted means, smallest cosine; pass when all pass). */
void ir_compare_tensors(const IrTensor *ref, const IrTensor *cand, const IrTolerance *tol,
                        IrCompareMetrics *m);

/* Fills one tensor per graph input with deterministic pseudo-random data (uniform [-1, 1) for
 * floats, {0, 1} for integers and bool); a sequence input gets two elements, an optional one
 * holds a value (their element shapes must have a known rank). Symbolic dims get a value inside their constraints:
 * max(lo, min(hi, 4)) rounded up to a divisor constraint, equalities solved in order. inputs
 * has ir_graph_num_inputs(g) entries; free each with ir_tensor_free. */
IrStatus ir_random_inputs(const IrGraph *g, uint64_t seed, IrTensor *inputs, IrDiag *diag) IR_MUST_CHECK;

typedef struct IrOutputResult {
    char *name;            /* graph output value name (malloc'd) */
    IrTolerance tol;
    IrCompareMetrics m;
} IrOutputResult;

typedef struct IrDivergence {
    bool found;
    IrNodeId cand_node;    /* in the candidate graph */
    uint32_t result;       /* which result diverged */
    char *node_name, *op, *value, *location; /* malloc'd; location "file:line:col" or "" */
    char *ref_nodes;       /* the reference node names it maps to, comma-separated */
    IrValueId ref_value;   /* the reference value compared */
    char *note;            /* e.g. a reference node the candidate skips; may be "" */
    IrCompareMetrics m;
} IrDivergence;

/* Per-output tolerance override. */
typedef struct IrOutputTol {
    const char *output;
    IrTolerance tol;
} IrOutputTol;

typedef struct IrValidateOptions {
    /* Global overrides: negative = use the dtype default. */
    double rtol, atol, min_cosine;
    const IrOutputTol *per_output;
    uint32_t n_per_output;
    bool localize;         /* find the first diverging node when an output fails */
} IrValidateOptions;

void ir_validate_options_init(IrValidateOptions *o);

/* Error of one matched candidate node (its worst result), for --highlight style reports. */
typedef struct IrNodeError {
    char *name, *op; /* malloc'd */
    double max_abs_err, max_rel_err, cosine;
    bool pass;
} IrNodeError;

typedef struct IrValidateResult {
    uint32_t n_nodes;      /* matched candidate nodes with a name, in candidate order */
    IrNodeError *nodes;    /* filled when localization ran */
    uint32_t n_outputs;
    IrOutputResult *outputs;
    bool pass;
    IrDivergence div;
    /* Reference values captured during localization (by reference value id; for reduction). */
    IrTensor *ref_values;
    IrTensor *cand_values;
    uint32_t n_ref_values, n_cand_values;
} IrValidateResult;

/* Runs ref and cand on the same inputs (given in ref's input order; cand's inputs are matched
 * by name, else by position) and compares every output (by position). When an output fails
 * and opt->localize, intermediates are compared in candidate order through provenance. */
IrStatus ir_validate_run(const IrGraph *ref, const IrGraph *cand, const IrTensor *inputs, uint32_t n_inputs,
                         const IrValidateOptions *opt, IrValidateResult *res, IrDiag *diag) IR_MUST_CHECK;
/* The same against outputs the candidate computed elsewhere (a compiled artifact: cand_out in
 * ref's output order; cand_fp8 when its graph holds FP8 ops): ref runs on inputs and every
 * output is compared; nothing is localized (the candidate's intermediates are not seen). */
IrStatus ir_validate_outputs(const IrGraph *ref, const IrTensor *inputs, uint32_t n_inputs, const IrTensor *cand_out,
                             uint32_t n_cand, bool cand_fp8, const IrValidateOptions *opt, IrValidateResult *res,
                             IrDiag *diag) IR_MUST_CHECK;
void ir_validate_result_free(IrValidateResult *r);

/* Builds the reproducer of res->div: *cand_out holds the diverging candidate node alone, its
 * operands turned into constants with the values of the candidate run; *ref_out holds the
 * reference node(s) it maps to, their outside operands as constants from the reference run.
 * Both have no inputs and one output; a fused group keeps its body (regions are copied). */
IrStatus ir_validate_reduce(const IrGraph *ref, const IrGraph *cand, const IrValidateResult *res,
                            IrGraph **ref_out, IrGraph **cand_out, IrDiag *diag) IR_MUST_CHECK;

/* Reports. `label` names the model pair. JSON (ir/json.h) has stable keys, rows one per line,
 * reals in their shortest round-trip form and null for non-finite ones. */
void ir_validate_report_text(const IrValidateResult *r, IrStrBuf *out);
void ir_validate_report_json(const IrValidateResult *r, const char *label, IrStrBuf *out);
/* A JUnit document (libxml2) with one testcase per output; returns IR_EIO/IR_ENOMEM on
 * failure. Several results form one suite. */
IrStatus ir_validate_report_junit(const char *path, const char *suite, uint32_t n, const char *const *labels,
                                  const IrValidateResult *const *results, const char *const *errors,
                                  IrDiag *diag) IR_MUST_CHECK;

/* An RNN/GRU/LSTM activation named as ONNX spells it (any case): its kind (0 Sigmoid, 1 Tanh, 2 Relu,
 * 3 Affine, 4 LeakyRelu, 5 ThresholdedRelu, 6 ScaledTanh, 7 HardSigmoid, 8 Elu, 9 Softsign,
 * 10 Softplus: the order of the runtime's IrtAct), how many of activation_alpha/beta it takes
 * and their defaults; false for an unknown name. */
bool ir_rnn_activation(const char *name, int *kind, int *n_params, double *alpha, double *beta);

/* ---- Resize taps: the interpreter's kernel computes them at run time, the LLVM backend at
 * compile time (as constant tables), so both agree. ------------------------------------------ */
typedef struct IrResizeCfg {
    const char *mode, *ctm, *nearest; /* mode, coordinate_transformation_mode, nearest_mode */
    double A, extrap;                 /* cubic_coeff_a, extrapolation_value */
    bool exclude, antialias;
} IrResizeCfg;
/* Per output coordinate along one axis: the input indices and weights it combines. */
typedef struct IrResizeTaps {
    int n;                     /* taps per output coordinate */
    int64_t *idx;              /* out * n */
    double *w;                 /* out * n */
    bool *outside, any_outside; /* tf_crop_and_resize: this coordinate takes extrapolation_value */
} IrResizeTaps;
/* The taps of one axis of `in` -> `out` elements (reference: onnx/reference/ops/op_resize.py);
 * false when more than max_taps (> 0) taps per coordinate are needed or memory runs out. The
 * arrays are malloc'd (free with ir_resize_taps_free, also after a failure). */
bool ir_resize_axis_taps(const IrResizeCfg *cfg, int64_t in, int64_t out, double scale, double roi_lo, double roi_hi,
                         int max_taps, IrResizeTaps *t);
void ir_resize_taps_free(IrResizeTaps *t);

#ifdef __cplusplus
}
#endif
#endif

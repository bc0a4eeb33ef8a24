/* Type/shape rules named by the op table (ops.def). Internal to ir/.
 * Each rule reads operand types (and constant operands where the shape depends on data) and
 * sets result types; unknown stays 0. A violated rule reports through ir_infer_error.
 */
#ifndef IRTOOL_INFER_H
#define IRTOOL_INFER_H

#include "ir_internal.h"

struct IrInferCtx {
    IrGraph *g;
    IrNodeId n;
    IrDiag *diag;
    IrTypeId *out;
    uint32_t n_out;
    IrStatus status;
    IrShapeFacts *facts; /* may be NULL */
};

/* An operand's shape as the rules work on it: rank IR_RANK_UNKNOWN when unranked or unknown. */
#define IR_INFER_MAXR 64
typedef struct IrInferShape {
    IrDType dt;
    uint32_t rank;
    IrExprId d[IR_INFER_MAXR];
} IrInferShape;
/* Reads operand i's type into s; false when the operand's type is unknown. */
bool ir__infer_input_shape(IrInferCtx *c, uint32_t i, IrInferShape *s);

/* Conv and pool windows (ir/infer.c), shared by every Conv-like rule: the spatial output size of
 * input dim `in` under kernel k (a constant, or a weight's symbol), and the kernel dims of a node
 * with weight shape w (kernel_shape when given, requiring w's spatial dims to equal it). */
IrExprId ir__infer_window_out(IrInferCtx *c, IrExprId in, IrExprId k, int64_t stride, int64_t dil, int64_t pad_total,
                              bool ceil_mode, const char *auto_pad);
void ir__infer_conv_kernel(IrInferCtx *c, const IrInferShape *w, uint32_t nsp, const int64_t *attr_kernel,
                           IrExprId *kernel);

/* ir_node_infer_types_ex; check_attrs false skips the attribute-kind check (the verifier has
 * already checked the node's attributes). */
IrStatus ir__node_infer_types(IrGraph *g, IrNodeId n, IrDiag *diag, IrTypeId *inferred, IrShapeFacts *facts,
                              bool check_attrs);

/* ir/infer_str.c: strings, text features, training ops */
IrStatus ir_infer_string_normalizer(IrInferCtx *c);
IrStatus ir_infer_tfidf_vectorizer(IrInferCtx *c);
IrStatus ir_infer_optimizer(IrInferCtx *c);
IrStatus ir_infer_gradient(IrInferCtx *c);
/* Whether op accepts string operands (data movement, Cast, Equal, Identity, the string ops);
 * any other op given a string operand is a type error. */
bool ir__op_takes_strings(IrOp op);

IrStatus ir_infer_argreduce(IrInferCtx *c);
IrStatus ir_infer_broadcast(IrInferCtx *c);
IrStatus ir_infer_broadcast_lhs(IrInferCtx *c);
IrStatus ir_infer_cast(IrInferCtx *c);
IrStatus ir_infer_cast_like(IrInferCtx *c);
IrStatus ir_infer_col2im(IrInferCtx *c);
IrStatus ir_infer_compare(IrInferCtx *c);
IrStatus ir_infer_compress(IrInferCtx *c);
IrStatus ir_infer_concat(IrInferCtx *c);
IrStatus ir_infer_constant(IrInferCtx *c);
IrStatus ir_infer_constant_of_shape(IrInferCtx *c);
IrStatus ir_infer_conv(IrInferCtx *c);
IrStatus ir_infer_conv_integer(IrInferCtx *c);
IrStatus ir_infer_conv_transpose(IrInferCtx *c);
IrStatus ir_infer_depth_to_space(IrInferCtx *c);
IrStatus ir_infer_dequantize_fp8(IrInferCtx *c);
IrStatus ir_infer_dequantize_linear(IrInferCtx *c);
IrStatus ir_infer_det(IrInferCtx *c);
IrStatus ir_infer_dft(IrInferCtx *c);
IrStatus ir_infer_dropout(IrInferCtx *c);
IrStatus ir_infer_dynamic_quantize_linear(IrInferCtx *c);
IrStatus ir_infer_einsum(IrInferCtx *c);
IrStatus ir_infer_expand(IrInferCtx *c);
IrStatus ir_infer_eye_like(IrInferCtx *c);
IrStatus ir_infer_flatten(IrInferCtx *c);
IrStatus ir_infer_fp8_matmul(IrInferCtx *c);
IrStatus ir_infer_fused(IrInferCtx *c);
IrStatus ir_infer_gather(IrInferCtx *c);
IrStatus ir_infer_gather_nd(IrInferCtx *c);
IrStatus ir_infer_gemm(IrInferCtx *c);
IrStatus ir_infer_global_pool(IrInferCtx *c);
IrStatus ir_infer_grid_sample(IrInferCtx *c);
IrStatus ir_infer_gru(IrInferCtx *c);
IrStatus ir_infer_if(IrInferCtx *c);
IrStatus ir_infer_layer_norm(IrInferCtx *c);
IrStatus ir_infer_like_input1(IrInferCtx *c);
IrStatus ir_infer_loop(IrInferCtx *c);
IrStatus ir_infer_lstm(IrInferCtx *c);
IrStatus ir_infer_matmul(IrInferCtx *c);
IrStatus ir_infer_matmul_integer(IrInferCtx *c);
IrStatus ir_infer_max_roi_pool(IrInferCtx *c);
IrStatus ir_infer_max_unpool(IrInferCtx *c);
IrStatus ir_infer_mel_weight_matrix(IrInferCtx *c);
IrStatus ir_infer_multinomial(IrInferCtx *c);
IrStatus ir_infer_nll_loss(IrInferCtx *c);
IrStatus ir_infer_non_max_suppression(IrInferCtx *c);
IrStatus ir_infer_none(IrInferCtx *c);
IrStatus ir_infer_nonzero(IrInferCtx *c);
IrStatus ir_infer_one_hot(IrInferCtx *c);
IrStatus ir_infer_pad(IrInferCtx *c);
IrStatus ir_infer_pool(IrInferCtx *c);
IrStatus ir_infer_qlinear_conv(IrInferCtx *c);
IrStatus ir_infer_qlinear_matmul(IrInferCtx *c);
IrStatus ir_infer_quantize_fp8(IrInferCtx *c);
IrStatus ir_infer_quantize_linear(IrInferCtx *c);
IrStatus ir_infer_random(IrInferCtx *c);
IrStatus ir_infer_random_like(IrInferCtx *c);
IrStatus ir_infer_range(IrInferCtx *c);
IrStatus ir_infer_reduce(IrInferCtx *c);
IrStatus ir_infer_reduce_sum(IrInferCtx *c);
IrStatus ir_infer_reshape(IrInferCtx *c);
IrStatus ir_infer_resize(IrInferCtx *c);
IrStatus ir_infer_rnn(IrInferCtx *c);
IrStatus ir_infer_roi_align(IrInferCtx *c);
IrStatus ir_infer_scan(IrInferCtx *c);
IrStatus ir_infer_shape(IrInferCtx *c);
IrStatus ir_infer_size(IrInferCtx *c);
IrStatus ir_infer_slice(IrInferCtx *c);
IrStatus ir_infer_softmax_cross_entropy_loss(IrInferCtx *c);
IrStatus ir_infer_space_to_depth(IrInferCtx *c);
IrStatus ir_infer_split(IrInferCtx *c);
IrStatus ir_infer_squeeze(IrInferCtx *c);
IrStatus ir_infer_stft(IrInferCtx *c);
IrStatus ir_infer_tile(IrInferCtx *c);
IrStatus ir_infer_topk(IrInferCtx *c);
IrStatus ir_infer_transpose(IrInferCtx *c);
IrStatus ir_infer_unary(IrInferCtx *c);
IrStatus ir_infer_batchnorm(IrInferCtx *c);
IrStatus ir_infer_unary_bool(IrInferCtx *c);
IrStatus ir_infer_unique(IrInferCtx *c);
IrStatus ir_infer_unsqueeze(IrInferCtx *c);
IrStatus ir_infer_where(IrInferCtx *c);
IrStatus ir_infer_window(IrInferCtx *c);

/* sequences and optionals (ir/infer_seq.c) */
IrStatus ir_infer_sequence_construct(IrInferCtx *c);
IrStatus ir_infer_sequence_empty(IrInferCtx *c);
IrStatus ir_infer_sequence_at(IrInferCtx *c);
IrStatus ir_infer_sequence_insert(IrInferCtx *c);
IrStatus ir_infer_sequence_erase(IrInferCtx *c);
IrStatus ir_infer_sequence_length(IrInferCtx *c);
IrStatus ir_infer_split_to_sequence(IrInferCtx *c);
IrStatus ir_infer_concat_from_sequence(IrInferCtx *c);
IrStatus ir_infer_sequence_map(IrInferCtx *c);
IrStatus ir_infer_optional(IrInferCtx *c);
IrStatus ir_infer_optional_has_element(IrInferCtx *c);
IrStatus ir_infer_optional_get_element(IrInferCtx *c);

#endif

/* Dispatch between cpu/codegen.c and the op emitters of backend/cpu: which nodes the
 * latter compile (ops codegen has no emitter for, and elementwise ops on non-f32 dtypes) and
 * the call into the right file.
 */
#include "backend/cpu/cpu.h"

/* Ops of cpu/loss.c and cpu/resize.c. */
static bool is_loss(IrOp op) {
    return op == IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS || op == IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS || op == IR_OP_RESIZE;
}

static bool is_rnn(IrOp op) { return op == IR_OP_RNN || op == IR_OP_GRU || op == IR_OP_LSTM; }
static bool is_qmm(IrOp op) { return op == IR_OP_MAT_MUL_INTEGER || op == IR_OP_QLINEAR_MAT_MUL; }
static bool is_qconv(IrOp op) { return op == IR_OP_CONV_INTEGER || op == IR_OP_QLINEAR_CONV; }
static bool is_misc(IrOp op) {
    return op == IR_OP_DET || op == IR_OP_MAX_UNPOOL || op == IR_OP_ROI_ALIGN || op == IR_OP_ADAGRAD || op == IR_OP_ADAM ||
           op == IR_OP_MOMENTUM || op == IR_OP_RANDOM_UNIFORM || op == IR_OP_RANDOM_UNIFORM_LIKE ||
           op == IR_OP_RANDOM_NORMAL || op == IR_OP_RANDOM_NORMAL_LIKE || op == IR_OP_BERNOULLI;
}
static bool is_signal(IrOp op) { return llvm_ops_signal_claims(op); } /* cpu/signal.c */
static bool is_fp8(IrOp op) { return llvm_ops_fp8_claims(op); }       /* cpu/fp8.c */

bool llvm_ops_supported(IrOp op) {
    return llvm_ops_ew_supported(op) || llvm_ops_data_supported(op) || is_loss(op) || op == IR_OP_CONV_TRANSPOSE ||
           is_rnn(op) || is_qmm(op) || is_qconv(op) || is_misc(op) || is_signal(op) || is_fp8(op);
}

/* Whether every operand and result of n is f32 (absent ones aside). */
static bool all_f32(const IrGraph *g, IrNodeId n) {
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (v && ir_type_dtype(g, ir_value_type(g, v)) != IR_DTYPE_F32) return false;
    }
    for (uint32_t i = 0; i < ir_node_num_results(g, n); i++) {
        IrValueId v = ir_node_result(g, n, i);
        if (v && ir_type_dtype(g, ir_value_type(g, v)) != IR_DTYPE_F32) return false;
    }
    return true;
}

/* LayerNormalization cpu/codegen.c compiles: f32, one output, scale (and bias) of exactly the
 * normalized size; the rest comes to cpu/data.c. */
static bool codegen_layernorm(const IrGraph *g, IrNodeId n) {
    if (!all_f32(g, n)) return false;
    for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
        if (ir_node_result(g, n, i)) return false;
    uint32_t r, rs;
    int64_t d[IR_MAX_RANK], ds[IR_MAX_RANK];
    if (!lower_value_shape(g, ir_node_operand(g, n, 0), &r, d)) return true;
    bool found;
    int64_t axis = lower_norm_axis(ir_node_attr_int(g, n, "axis", &found), r);
    if (!found) axis = (int64_t)r - 1;
    if (axis < 0 || axis >= (int64_t)r) return true;
    int64_t inner = lower_numel(r - (uint32_t)axis, d + axis);
    for (uint32_t i = 1; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (v && (!lower_value_shape(g, v, &rs, ds) || lower_numel(rs, ds) != inner)) return false;
    }
    return true;
}

/* Reductions cpu/codegen.c compiles on f32 (over one block of adjacent constant axes); the
 * other dtypes, axes given at run time and non-adjacent axes come here. */
static bool is_codegen_reduce(IrOp op) {
    return op == IR_OP_REDUCE_SUM || op == IR_OP_REDUCE_MEAN || op == IR_OP_REDUCE_MAX || op == IR_OP_REDUCE_MIN;
}

bool llvm_ops_claims(const IrGraph *g, IrNodeId n, bool codegen_f32) {
    IrOp op = ir_node_op(g, n);
    if (llvm_ops_data_supported(op) || is_loss(op) || is_rnn(op) || is_qmm(op) || is_qconv(op) || is_misc(op) ||
        is_signal(op) || is_fp8(op) || llvm_ops_conv_claims(g, n))
        return true;
    if (is_codegen_reduce(op)) {
        LowerReduceShape rs;
        return !all_f32(g, n) || lower_reduce_shape(g, n, op, &rs) != NULL;
    }
    if (op == IR_OP_LAYER_NORMALIZATION) return !codegen_layernorm(g, n);
    if (op == IR_OP_BATCH_NORMALIZATION) { /* codegen: f32 inference, output 0 only */
        bool found;
        if (ir_node_attr_int(g, n, "training_mode", &found) != 0) return true;
        for (uint32_t i = 1; i < ir_node_num_results(g, n); i++)
            if (ir_node_result(g, n, i)) return true;
        return !all_f32(g, n);
    }
    if (op == IR_OP_IDENTITY || !llvm_ops_ew_supported(op)) return false; /* Identity: codegen copies bytes */
    if (!codegen_f32) return true;
    if (op == IR_OP_WHERE) return true;
    return !all_f32(g, n);
}

IrStatus llvm_ops_gen(LlvmEmit *e) {
    IrOp op = ir_node_op(e->g, e->node);
    if (llvm_ops_conv_claims(e->g, e->node)) return llvm_ops_conv_gen(e);
    if (op == IR_OP_RESIZE) return llvm_ops_resize_gen(e);
    if (is_rnn(op)) return llvm_ops_rnn_gen(e);
    if (is_qmm(op)) return llvm_ops_qmm_gen(e);
    if (is_qconv(op)) return llvm_ops_qconv_gen(e);
    if (is_misc(op)) return llvm_ops_misc_gen(e);
    if (is_signal(op)) return llvm_ops_signal_gen(e);
    if (is_fp8(op)) return llvm_ops_fp8_gen(e);
    if (is_loss(op)) return llvm_ops_loss_gen(e);
    if (llvm_ops_data_supported(op) || is_codegen_reduce(op) || op == IR_OP_LAYER_NORMALIZATION ||
        op == IR_OP_BATCH_NORMALIZATION)
        return llvm_ops_data_gen(e);
    return llvm_ops_ew_gen(e);
}

IrStatus llvm_ops_refuse(LlvmEmit *e, const char *why) {
    ir_diag_at_node(e->diag, e->g, e->node, IR_SEV_ERROR, "the llvm backend does not support %s %s yet",
                    ir_op_name(ir_node_op(e->g, e->node)), why);
    return IR_EUNSUPPORTED;
}

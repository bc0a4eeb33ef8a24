/* RNN, GRU and LSTM (f32, static shapes): the kernel passes the node's sizes, direction, layout,
 * clip and activations (as constant arrays) and its buffers to the runtime's irt_rnn, which runs
 * the recurrence step by step (as the interpreter does, in f32) in the node's planned scratch.
 */
#include "backend/llvm_ops.h"
#include "backend/runtime/runtime.h"
#include "validate/validate.h"

static IrStatus refuse(LlvmEmit *e, const char *why) {
    ir_diag_at_node(e->diag, e->g, e->node, IR_SEV_ERROR, "the llvm backend does not support %s %s yet",
                    ir_op_name(ir_node_op(e->g, e->node)), why);
    return IR_EUNSUPPORTED;
}

/* The node's parameters for irt_rnn (ip, fp), or a refusal. */
static IrStatus rnn_params(LlvmEmit *e, int64_t *ip, float *fp) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrOp op = ir_node_op(g, n);
    int64_t kind = op == IR_OP_RNN ? 0 : op == IR_OP_GRU ? 1 : 2, G = kind == 0 ? 1 : kind == 1 ? 3 : 4;
    int per = kind == 0 ? 1 : kind == 1 ? 2 : 3;
    uint32_t rx, rr, r;
    int64_t dx[IR_MAX_RANK], dr[IR_MAX_RANK], d[IR_MAX_RANK];
    if (!llvm_value_shape(g, ir_node_operand(g, n, 0), &rx, dx) || !llvm_value_shape(g, ir_node_operand(g, n, 2), &rr, dr) ||
        rx != 3 || rr != 3)
        return refuse(e, "with these shapes");
    for (uint32_t i = 0; i < ir_node_num_operands(g, n) + ir_node_num_results(g, n); i++) {
        uint32_t no = ir_node_num_operands(g, n);
        IrValueId v = i < no ? ir_node_operand(g, n, i) : ir_node_result(g, n, i - no);
        if (!v || (i < no && llvm_value_shape(g, v, &r, d) && lo_numel(r, d) == 0)) continue;
        IrDType want = i == 4 && i < no ? IR_DTYPE_I32 : IR_DTYPE_F32;
        if (llvm_value_dtype(g, v) != want) return refuse(e, "on this dtype (f32 tensors, i32 sequence_lens)");
    }
    bool bf = ir_node_attr_int(g, n, "layout", NULL) != 0, found;
    int64_t H = ir_node_attr_int(g, n, "hidden_size", &found);
    if (!found) H = dr[2];
    const char *dir = ir_node_attr_string(g, n, "direction", NULL);
    if (!dir) dir = "forward";
    int64_t dirs = !strcmp(dir, "bidirectional") ? 2 : 1, rev = !strcmp(dir, "reverse");
    if (dirs == 1 && !rev && strcmp(dir, "forward")) return refuse(e, "with this direction");
    if (dr[0] != dirs || dr[1] != G * H || dr[2] != H) return refuse(e, "with these shapes");
    /* the others as the interpreter checks them (irt_rnn trusts them) */
    int64_t N = bf ? dx[0] : dx[1], want[8] = {-1, dirs * G * H * dx[2], -1, dirs * 2 * G * H, N, dirs * N * H,
                                                 dirs * N * H, dirs * 3 * H};
    if (!llvm_value_shape(g, ir_node_operand(g, n, 1), &r, d) || r != 3 || d[0] != dirs || d[1] != G * H || d[2] != dx[2])
        return refuse(e, "with these shapes (W)");
    for (uint32_t i = 3; i < ir_node_num_operands(g, n) && i < 8; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v || (kind != 2 && i > 5)) continue;
        if (!llvm_value_shape(g, v, &r, d)) return refuse(e, "with these shapes");
        int64_t c = lo_numel(r, d);
        if (c != 0 && c != want[i]) return refuse(e, "with these shapes (B, sequence_lens, initial states or P)");
    }
    memset(ip, 0, IRT_RNN_IP * sizeof *ip);
    memset(fp, 0, IRT_RNN_FP * sizeof *fp);
    ip[0] = kind, ip[1] = bf ? dx[1] : dx[0], ip[2] = bf ? dx[0] : dx[1], ip[3] = dx[2], ip[4] = H, ip[5] = dirs;
    ip[6] = rev, ip[7] = bf, ip[8] = kind == 1 && ir_node_attr_int(g, n, "linear_before_reset", NULL) != 0;
    ip[9] = kind == 2 && ir_node_attr_int(g, n, "input_forget", NULL) != 0;
    IrAttrValue av;
    if (ir_node_attr(g, n, "clip", &av)) ip[10] = 1, fp[0] = (float)ir_node_attr_float(g, n, "clip", NULL);
    static const IrtAct dflt[3][3] = {{IRT_ACT_TANH}, {IRT_ACT_SIGMOID, IRT_ACT_TANH}, {IRT_ACT_SIGMOID, IRT_ACT_TANH, IRT_ACT_TANH}};
    IrAttrValue acts = {0}, al = {0}, be = {0};
    bool named = ir_node_attr(g, n, "activations", &acts) && acts.kind == IR_ATTR_STRINGS && acts.count > 0;
    if (named && (int64_t)acts.count != dirs * per) return refuse(e, "with this number of activations");
    bool has_al = ir_node_attr(g, n, "activation_alpha", &al) && al.kind == IR_ATTR_FLOATS;
    bool has_be = ir_node_attr(g, n, "activation_beta", &be) && be.kind == IR_ATTR_FLOATS;
    uint32_t ia = 0, ib = 0;
    for (int64_t i = 0; i < dirs * per; i++) {
        int np = 0, code = dflt[kind][i % per];
        double da = 0, db = 0; /* the interpreter's names, kinds (IrtAct's order) and defaults */
        if (named && !ir_rnn_activation(ir_str(g, acts.strs[i]), &code, &np, &da, &db))
            return refuse(e, "with this activation function");
        ip[11 + i] = code;
        fp[1 + i] = (float)(np >= 1 && has_al && ia < al.count ? al.floats[ia++] : da);
        fp[7 + i] = (float)(np >= 2 && has_be && ib < be.count ? be.floats[ib++] : db);
    }
    return IR_OK;
}

int64_t llvm_ops_rnn_scratch_bytes(const IrGraph *g, IrNodeId n) {
    IrOp op = ir_node_op(g, n);
    uint32_t rx, rr;
    int64_t dx[IR_MAX_RANK], dr[IR_MAX_RANK];
    if ((op != IR_OP_RNN && op != IR_OP_GRU && op != IR_OP_LSTM) || ir_node_num_operands(g, n) < 3 ||
        !llvm_value_shape(g, ir_node_operand(g, n, 0), &rx, dx) || !llvm_value_shape(g, ir_node_operand(g, n, 2), &rr, dr) ||
        rx != 3 || rr != 3)
        return 0;
    bool bf = ir_node_attr_int(g, n, "layout", NULL) != 0;
    return irt_rnn_scratch(bf ? dx[1] : dx[0], bf ? dx[0] : dx[1], dr[2], dr[1] / (dr[2] ? dr[2] : 1)) * 4;
}

static LLVMValueRef const_array(LlvmEmit *e, LLVMTypeRef t, LLVMValueRef *vals, unsigned n, const char *name) {
    LLVMValueRef init = LLVMConstArray2(t, vals, n);
    LLVMValueRef gv = LLVMAddGlobal(e->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMPrivateLinkage);
    return gv;
}

IrStatus llvm_ops_rnn_gen(LlvmEmit *e) {
    int64_t ip[IRT_RNN_IP];
    float fp[IRT_RNN_FP];
    IrStatus s = rnn_params(e, ip, fp);
    if (s) return s;
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LLVMValueRef iv[IRT_RNN_IP], fv[IRT_RNN_FP];
    for (int i = 0; i < IRT_RNN_IP; i++) iv[i] = lo_i64(e, ip[i]);
    for (int i = 0; i < IRT_RNN_FP; i++) fv[i] = LLVMConstReal(lo_f32_t(e), fp[i]);
    LLVMTypeRef ptr = lo_ptr_t(e);
    LLVMValueRef args[14] = {const_array(e, lo_i64_t(e), iv, IRT_RNN_IP, "rnn.ip"), const_array(e, lo_f32_t(e), fv, IRT_RNN_FP, "rnn.fp")};
    for (uint32_t i = 0; i < 8; i++) { /* x w r b seq_lens h0 c0 p: absent or empty ones as NULL */
        IrValueId v = i < ir_node_num_operands(g, n) ? ir_node_operand(g, n, i) : 0;
        uint32_t r;
        int64_t d[IR_MAX_RANK];
        bool empty = v && llvm_value_shape(g, v, &r, d) && lo_numel(r, d) == 0;
        args[2 + i] = v && !empty ? lo_buf(e, v) : LLVMConstPointerNull(ptr);
    }
    for (uint32_t i = 0; i < 3; i++) {
        IrValueId v = i < ir_node_num_results(g, n) ? ir_node_result(g, n, i) : 0;
        args[10 + i] = v ? lo_buf(e, v) : LLVMConstPointerNull(ptr);
    }
    args[13] = lo_buf(e, ir_graph_num_values(g) + 1 + e->index); /* the node's scratch */
    LLVMTypeRef ps[14];
    for (int i = 0; i < 14; i++) ps[i] = ptr;
    LLVMValueRef slot = lo_i64(e, IRT_FN_RNN);
    LLVMValueRef fn = LLVMBuildLoad2(e->b, ptr, LLVMBuildGEP2(e->b, ptr, e->fns, &slot, 1, ""), "");
    LLVMBuildCall2(e->b, LLVMFunctionType(LLVMVoidTypeInContext(e->ctx), ps, 14, 0), fn, args, 14, "");
    return IR_OK;
}

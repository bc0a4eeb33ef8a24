/* RNN, GRU and LSTM (f32; the sequence length and batch may be known at run time only): the kernel passes the node's sizes, direction, layout,
 * clip and activations (as constant arrays) and its buffers to the runtime's irt_rnn, which runs
 * the recurrence step by step (as the interpreter does, in f32) in the node's planned scratch.
 */
#include "backend/cpu/cpu.h"
#include "backend/runtime/abi.h"
#include "validate/validate.h"

/* Whether dim expression a is b (the same interned expression, or equal constants). */
static bool same_dim(const IrGraph *g, IrExprId a, int64_t c, IrExprId b) {
    int64_t v;
    if (b) return a == b;
    return ir_expr_is_const(g, a, &v) && v == c;
}

/* Whether dims a and b are equal on every run: the same expression, or an equality shape-infer
 * recorded between them (the runtime checks it before the kernels run). */
static bool dims_tied(const IrGraph *g, IrExprId a, IrExprId b) {
    if (a == b) return true;
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
        IrConstraint c = ir_graph_constraint(g, i);
        if (c.kind == IR_CONSTRAINT_EQ && ((c.a == a && c.b == b) || (c.a == b && c.b == a))) return true;
    }
    return false;
}

/* Operand i (B, sequence_lens, initial_h/c, P) against the interpreter's sizes: by element count
 * when the batch is known, else dim by dim ({dirs, N, H} in the layout's order for the states,
 * {N} for the lengths; the batch's expression where the batch goes). */
static bool rnn_operand_ok(const IrGraph *g, IrValueId v, uint32_t i, int64_t dirs, int64_t G, int64_t H, bool bf,
                           IrExprId n_ex) {
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!t || r == IR_RANK_UNKNOWN) return false;
    int64_t N = -1, c;
    bool n_const = ir_expr_is_const(g, n_ex, &N), all_const = true;
    int64_t numel = 1;
    for (uint32_t k = 0; k < r; k++) {
        if (!ir_expr_is_const(g, ir_type_dims(g, t)[k], &c)) all_const = false;
        else numel *= c;
    }
    if (all_const && numel == 0) return true; /* absent */
    if (i == 3) return all_const && numel == dirs * 2 * G * H;
    if (i == 7) return all_const && numel == dirs * 3 * H;
    if (n_const) return all_const && numel == (i == 4 ? N : dirs * N * H);
    const IrExprId *d = ir_type_dims(g, t);
    if (i == 4) return r == 1 && dims_tied(g, d[0], n_ex);
    return r == 3 && dims_tied(g, d[bf ? 0 : 1], n_ex) && same_dim(g, d[bf ? 1 : 0], dirs, 0) && same_dim(g, d[2], H, 0);
}

/* The node's parameters for irt_rnn (ip, fp), or a refusal. A sequence length, batch or input
 * size known at run time only is -1 in ip, its expression in *s_ex / *n_ex / *i_ex. */
static IrStatus rnn_params(LlvmEmit *e, int64_t *ip, float *fp, IrExprId *s_ex, IrExprId *n_ex, IrExprId *i_ex) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    IrOp op = ir_node_op(g, n);
    int64_t kind = op == IR_OP_RNN ? 0 : op == IR_OP_GRU ? 1 : 2, G = kind == 0 ? 1 : kind == 1 ? 3 : 4;
    int per = kind == 0 ? 1 : kind == 1 ? 2 : 3;
    uint32_t rr, r;
    int64_t dr[IR_MAX_RANK], d[IR_MAX_RANK], I = -1;
    IrTypeId tx = ir_value_type(g, ir_node_operand(g, n, 0));
    if (!tx || ir_type_rank(g, tx) != 3 || !lower_value_shape(g, ir_node_operand(g, n, 2), &rr, dr) || rr != 3)
        return llvm_ops_refuse(e, "with these shapes");
    *i_ex = ir_type_dims(g, tx)[2];
    ir_expr_is_const(g, *i_ex, &I);
    for (uint32_t i = 0; i < ir_node_num_operands(g, n) + ir_node_num_results(g, n); i++) {
        uint32_t no = ir_node_num_operands(g, n);
        IrValueId v = i < no ? ir_node_operand(g, n, i) : ir_node_result(g, n, i - no);
        if (!v || (i < no && lower_value_shape(g, v, &r, d) && ir_shape_numel(r, d) == 0)) continue;
        IrDType want = i == 4 && i < no ? IR_DTYPE_I32 : IR_DTYPE_F32;
        if (lower_value_dtype(g, v) != want) return llvm_ops_refuse(e, "on this dtype (f32 tensors, i32 sequence_lens)");
    }
    bool bf = ir_node_attr_int(g, n, "layout", NULL) != 0, found;
    *s_ex = ir_type_dims(g, tx)[bf ? 1 : 0];
    *n_ex = ir_type_dims(g, tx)[bf ? 0 : 1];
    int64_t H = ir_node_attr_int(g, n, "hidden_size", &found);
    if (!found) H = dr[2];
    const char *dir = ir_node_attr_string(g, n, "direction", NULL);
    if (!dir) dir = "forward";
    int64_t dirs = !strcmp(dir, "bidirectional") ? 2 : 1, rev = !strcmp(dir, "reverse");
    if (dirs == 1 && !rev && strcmp(dir, "forward")) return llvm_ops_refuse(e, "with this direction");
    if (dr[0] != dirs || dr[1] != G * H || dr[2] != H) return llvm_ops_refuse(e, "with these shapes");
    /* the others as the interpreter checks them (irt_rnn trusts them) */
    IrTypeId tw = ir_value_type(g, ir_node_operand(g, n, 1));
    const IrExprId *dwx = tw && ir_type_rank(g, tw) == 3 ? ir_type_dims(g, tw) : NULL;
    if (!dwx || !ir_expr_is_const(g, dwx[0], &d[0]) || !ir_expr_is_const(g, dwx[1], &d[1]) || d[0] != dirs ||
        d[1] != G * H || !(I >= 0 ? ir_expr_is_const(g, dwx[2], &d[2]) && d[2] == I : dims_tied(g, dwx[2], *i_ex)))
        return llvm_ops_refuse(e, "with these shapes (W)");
    for (uint32_t i = 3; i < ir_node_num_operands(g, n) && i < 8; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v || (kind != 2 && i > 5)) continue;
        if (!rnn_operand_ok(g, v, i, dirs, G, H, bf, *n_ex))
            return llvm_ops_refuse(e, "with these shapes (B, sequence_lens, initial states or P)");
    }
    int64_t S = -1, N = -1;
    ir_expr_is_const(g, *s_ex, &S);
    ir_expr_is_const(g, *n_ex, &N);
    memset(ip, 0, IRT_RNN_IP * sizeof *ip);
    memset(fp, 0, IRT_RNN_FP * sizeof *fp);
    ip[0] = kind, ip[1] = S, ip[2] = N, ip[3] = I, ip[4] = H, ip[5] = dirs;
    ip[6] = rev, ip[7] = bf, ip[8] = kind == 1 && ir_node_attr_int(g, n, "linear_before_reset", NULL) != 0;
    ip[9] = kind == 2 && ir_node_attr_int(g, n, "input_forget", NULL) != 0;
    IrAttrValue av;
    if (ir_node_attr(g, n, "clip", &av)) ip[10] = 1, fp[0] = (float)ir_node_attr_float(g, n, "clip", NULL);
    static const IrtAct dflt[3][3] = {{IRT_ACT_TANH}, {IRT_ACT_SIGMOID, IRT_ACT_TANH}, {IRT_ACT_SIGMOID, IRT_ACT_TANH, IRT_ACT_TANH}};
    IrAttrValue acts = {0}, al = {0}, be = {0};
    bool named = ir_node_attr(g, n, "activations", &acts) && acts.kind == IR_ATTR_STRINGS && acts.count > 0;
    if (named && (int64_t)acts.count != dirs * per) return llvm_ops_refuse(e, "with this number of activations");
    bool has_al = ir_node_attr(g, n, "activation_alpha", &al) && al.kind == IR_ATTR_FLOATS;
    bool has_be = ir_node_attr(g, n, "activation_beta", &be) && be.kind == IR_ATTR_FLOATS;
    uint32_t ia = 0, ib = 0;
    for (int64_t i = 0; i < dirs * per; i++) {
        int np = 0, code = dflt[kind][i % per];
        double da = 0, db = 0; /* the interpreter's names, kinds (IrtAct's order) and defaults */
        if (named && !ir_rnn_activation(ir_str(g, acts.strs[i]), &code, &np, &da, &db))
            return llvm_ops_refuse(e, "with this activation function");
        ip[11 + i] = code;
        fp[1 + i] = (float)(np >= 1 && has_al && ia < al.count ? al.floats[ia++] : da);
        fp[7 + i] = (float)(np >= 2 && has_be && ib < be.count ? be.floats[ib++] : db);
    }
    return IR_OK;
}

int64_t llvm_ops_rnn_scratch_bytes(const IrGraph *g, IrNodeId n, const int64_t *sym) {
    IrOp op = ir_node_op(g, n);
    uint32_t rr;
    int64_t dx[3], dr[IR_MAX_RANK];
    if ((op != IR_OP_RNN && op != IR_OP_GRU && op != IR_OP_LSTM) || ir_node_num_operands(g, n) < 3 ||
        !lower_value_shape(g, ir_node_operand(g, n, 2), &rr, dr) || rr != 3)
        return 0;
    IrTypeId tx = ir_value_type(g, ir_node_operand(g, n, 0));
    if (!tx || ir_type_rank(g, tx) != 3) return 0;
    for (uint32_t k = 0; k < 3; k++) /* constant dims, or the symbols at the binding */
        if (!ir_expr_is_const(g, ir_type_dims(g, tx)[k], &dx[k]) && (!sym || !ir_expr_eval(g, ir_type_dims(g, tx)[k], sym, &dx[k])))
            return 0;
    bool bf = ir_node_attr_int(g, n, "layout", NULL) != 0;
    return irt_rnn_scratch(bf ? dx[1] : dx[0], bf ? dx[0] : dx[1], dr[2], dr[1] / (dr[2] ? dr[2] : 1)) * 4;
}


/* A constant R packed here the way irt_rnn packs it per call (irt_rnn_pack_r, every direction),
 * as read-only data of the kernel; NULL when R is not a constant (or memory runs out). */
static LLVMValueRef rnn_packed_r(LlvmEmit *e, const int64_t *ip) {
    IrValueId r = ir_node_operand(e->g, e->node, 2);
    const float *rd = lower_value_const_data(e->g, r);
    int64_t kind = ip[0], H = ip[4], dirs = ip[5], G = kind == 0 ? 1 : kind == 1 ? 3 : 4, np = (G * H + 15) / 16;
    if (!rd || lo_dtype(e, r) != IR_DTYPE_F32 || H < 1) return NULL;
    size_t per = (size_t)(np * 16 * H), bytes = (size_t)dirs * per * sizeof(float);
    float *pk = malloc(bytes ? bytes : 1);
    if (!pk) return NULL;
    for (int64_t d = 0; d < dirs; d++) irt_rnn_pack_r(rd + d * G * H * H, G, H, pk + d * per);
    LLVMValueRef gv = lo_const_bytes(e, pk, bytes, "rnn.r_packed");
    free(pk);
    return gv;
}

/* The call of irt_rnn: ip as a constant array, or on the stack with the run-time S, N and I. */
static void rnn_call(LlvmEmit *e, const int64_t *ip, const float *fp, LLVMValueRef s, LLVMValueRef nb, LLVMValueRef in) {
    const IrGraph *g = e->g;
    IrNodeId n = e->node;
    LLVMValueRef iv[IRT_RNN_IP], fv[IRT_RNN_FP];
    LLVMValueRef packed_r = rnn_packed_r(e, ip);
    for (int i = 0; i < IRT_RNN_IP; i++) iv[i] = lo_i64(e, i == 7 && packed_r ? ip[7] | 2 : ip[i]);
    for (int i = 0; i < IRT_RNN_FP; i++) fv[i] = LLVMConstReal(lo_f32_t(e), fp[i]);
    LLVMTypeRef ptr = lo_ptr_t(e);
    LLVMValueRef ipv;
    if (s || nb || in) { /* on the stack with this run's sizes */
        ipv = LLVMBuildAlloca(e->ab, LLVMArrayType2(lo_i64_t(e), IRT_RNN_IP), "rnn.ip.run");
        for (int i = 0; i < IRT_RNN_IP; i++) {
            LLVMValueRef v = i == 1 && s ? s : i == 2 && nb ? nb : i == 3 && in ? in : iv[i], k = lo_i64(e, i);
            LLVMBuildStore(e->b, v, LLVMBuildGEP2(e->b, lo_i64_t(e), ipv, &k, 1, ""));
        }
    } else ipv = lo_const_array(e, lo_i64_t(e), iv, IRT_RNN_IP, "rnn.ip");
    LLVMValueRef args[14] = {ipv, lo_const_array(e, lo_f32_t(e), fv, IRT_RNN_FP, "rnn.fp")};
    for (uint32_t i = 0; i < 8; i++) { /* x w r b seq_lens h0 c0 p: absent or empty ones as NULL */
        IrValueId v = i < ir_node_num_operands(g, n) ? ir_node_operand(g, n, i) : 0;
        uint32_t r;
        int64_t d[IR_MAX_RANK];
        bool empty = v && lower_value_shape(g, v, &r, d) && ir_shape_numel(r, d) == 0;
        args[2 + i] = v && !empty ? lo_buf(e, v) : LLVMConstPointerNull(ptr);
    }
    if (packed_r) args[4] = packed_r;
    for (uint32_t i = 0; i < 3; i++) {
        IrValueId v = i < ir_node_num_results(g, n) ? ir_node_result(g, n, i) : 0;
        args[10 + i] = v ? lo_buf(e, v) : LLVMConstPointerNull(ptr);
    }
    args[13] = lo_buf(e, ir_graph_num_values(g) + 1 + e->index); /* the node's scratch */
    lo_call_runtime(e, IRT_FN_RNN, NULL, args, 14);
}

IrStatus llvm_ops_rnn_gen_at(LlvmEmit *e, LLVMValueRef (*dim)(void *ctx, IrExprId x), void *ctx) {
    int64_t ip[IRT_RNN_IP];
    float fp[IRT_RNN_FP];
    IrExprId s_ex = 0, n_ex = 0, i_ex = 0;
    IrStatus s = rnn_params(e, ip, fp, &s_ex, &n_ex, &i_ex);
    if (s) return s;
    LLVMValueRef sv = NULL, nv = NULL, iv = NULL;
    if (ip[1] < 0 && (!dim || !(sv = dim(ctx, s_ex)))) return llvm_ops_refuse(e, "with a sequence length known at run time only");
    if (ip[2] < 0 && (!dim || !(nv = dim(ctx, n_ex)))) return llvm_ops_refuse(e, "with a batch known at run time only");
    if (ip[3] < 0 && (!dim || !(iv = dim(ctx, i_ex)))) return llvm_ops_refuse(e, "with an input size known at run time only");
    rnn_call(e, ip, fp, sv, nv, iv);
    return IR_OK;
}

IrStatus llvm_ops_rnn_gen(LlvmEmit *e) { return llvm_ops_rnn_gen_at(e, NULL, NULL); }

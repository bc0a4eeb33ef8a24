/* Type rules of the string, text-feature and training ops (StringNormalizer, TfIdfVectorizer,
 * Adagrad/Adam/Momentum, Gradient), and the list of ops that accept string operands: data
 * movement copies elements of any dtype, while arithmetic, reductions, contractions and the
 * like have no meaning on strings, so the generic rule dispatcher (infer.c) refuses them.
 */
#include "infer.h"

#include <string.h>

bool ir__op_takes_strings(IrOp op) {
    switch (ir_op_info(op)->cls) {
    case IR_CLASS_DATA_MOVEMENT:
    case IR_CLASS_SHAPE:
    case IR_CLASS_CONTROL_FLOW:
        /* these read values, not only move them */
        return op != IR_OP_TOP_K && op != IR_OP_UNIQUE && op != IR_OP_NON_ZERO && op != IR_OP_ONE_HOT &&
               op != IR_OP_GRID_SAMPLE && op != IR_OP_COL2IM && op != IR_OP_MAX_UNPOOL && op != IR_OP_TRILU &&
               op != IR_OP_RANGE && op != IR_OP_EYE_LIKE && op != IR_OP_SCATTER_ELEMENTS &&
               op != IR_OP_SCATTER_ND && op != IR_OP_RESIZE && op != IR_OP_BLACKMAN_WINDOW &&
               op != IR_OP_HAMMING_WINDOW && op != IR_OP_HANN_WINDOW;
    default: break;
    }
    switch (op) {
    case IR_OP_IDENTITY:
    case IR_OP_CAST:
    case IR_OP_CAST_LIKE:
    case IR_OP_EQUAL:
    case IR_OP_WHERE:
    case IR_OP_STRING_NORMALIZER:
    case IR_OP_TF_IDF_VECTORIZER: return true;
    default: return false;
    }
}

static int64_t attr_i(IrInferCtx *c, const char *name) {
    return ir_node_attr_int(c->g, c->n, name, NULL);
}

IrStatus ir_infer_string_normalizer(IrInferCtx *c) {
    IrInferShape s;
    const char *act = ir_node_attr_string(c->g, c->n, "case_change_action", NULL);
    if (act && *act && strcmp(act, "NONE") != 0 && strcmp(act, "LOWER") != 0 && strcmp(act, "UPPER") != 0)
        return ir_infer_error(c, "case_change_action must be NONE, LOWER or UPPER, got '%s'", act);
    if (!ir__infer_input_shape(c, 0, &s)) return IR_OK;
    if (s.dt != IR_DTYPE_STRING) return ir_infer_error(c, "input must be a string tensor, got %s", ir_dtype_name(s.dt));
    if (s.rank == IR_RANK_UNKNOWN) {
        ir_infer_set_output(c, 0, ir_type_tensor(c->g, IR_DTYPE_STRING, IR_RANK_UNKNOWN, NULL));
        return IR_OK;
    }
    int64_t d0;
    if (s.rank != 1 && !(s.rank == 2 && (!ir_expr_is_const(c->g, s.d[0], &d0) || d0 == 1)))
        return ir_infer_error(c, "input must have shape [C] or [1, C]");
    /* stopwords are removed: the last dim depends on the data */
    IrExprId d[2] = {ir_expr_const(c->g, 1), ir_expr_unknown(c->g)};
    ir_infer_set_output(c, 0, ir_type_tensor(c->g, IR_DTYPE_STRING, s.rank, s.rank == 1 ? d + 1 : d));
    return IR_OK;
}

IrStatus ir_infer_tfidf_vectorizer(IrInferCtx *c) {
    IrAttrValue idx, cnt;
    const char *mode = ir_node_attr_string(c->g, c->n, "mode", NULL);
    if (mode && strcmp(mode, "TF") != 0 && strcmp(mode, "IDF") != 0 && strcmp(mode, "TFIDF") != 0)
        return ir_infer_error(c, "mode must be TF, IDF or TFIDF, got '%s'", mode);
    int64_t lo = attr_i(c, "min_gram_length"), hi = attr_i(c, "max_gram_length"), skip = attr_i(c, "max_skip_count");
    if (lo < 1 || hi < lo || skip < 0)
        return ir_infer_error(c, "needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
    if (!ir_node_attr(c->g, c->n, "ngram_indexes", &idx) || !ir_node_attr(c->g, c->n, "ngram_counts", &cnt))
        return IR_OK;
    int64_t width = 0;
    for (uint32_t i = 0; i < idx.count; i++) {
        if (idx.ints[i] < 0) return ir_infer_error(c, "ngram_indexes holds a negative index");
        if (idx.ints[i] + 1 > width) width = idx.ints[i] + 1;
    }
    IrInferShape s;
    if (!ir__infer_input_shape(c, 0, &s)) return IR_OK;
    if (s.dt != IR_DTYPE_STRING && s.dt != IR_DTYPE_I32 && s.dt != IR_DTYPE_I64)
        return ir_infer_error(c, "input must be string, i32 or i64, got %s", ir_dtype_name(s.dt));
    if (s.rank == IR_RANK_UNKNOWN) return IR_OK;
    if (s.rank != 1 && s.rank != 2) return ir_infer_error(c, "input must have shape [C] or [N, C]");
    IrExprId d[2] = {s.d[0], ir_expr_const(c->g, width)};
    ir_infer_set_output(c, 0, ir_type_tensor(c->g, IR_DTYPE_F32, s.rank, s.rank == 1 ? d + 1 : d));
    return IR_OK;
}

/* Adagrad (R, T, X.., G.., H..) -> (X.., H..); Momentum (R, T, X.., G.., V..) -> (X.., V..);
 * Adam (R, T, X.., G.., V.., H..) -> (X.., V.., H..). Each output has its state input's type. */
IrStatus ir_infer_optimizer(IrInferCtx *c) {
    IrOp op = ir_node_op(c->g, c->n);
    uint32_t groups = op == IR_OP_ADAM ? 4 : 3, nin = ir_infer_num_inputs(c), nout = c->n_out;
    if ((nin - 2) % groups != 0)
        return ir_infer_error(c, "takes R, T and %u lists of equal length; got %u inputs", groups, nin);
    uint32_t n = (nin - 2) / groups;
    if (nout != n * (groups - 1)) return ir_infer_error(c, "has %u results, %u expected", nout, n * (groups - 1));
    for (uint32_t k = 0; k < 2; k++) {
        IrInferShape s;
        if (ir__infer_input_shape(c, k, &s) && s.rank != IR_RANK_UNKNOWN && s.rank != 0)
            return ir_infer_error(c, "%s must be a scalar", k ? "T" : "R");
    }
    for (uint32_t i = 0; i < nout; i++) {
        uint32_t g = i / n, j = i % n; /* output group g mirrors input group 0 (X), then 2.. */
        uint32_t in = 2 + (g == 0 ? 0 : g + 1) * n + j;
        ir_infer_set_output(c, i, ir_infer_input_type(c, in));
    }
    return IR_OK;
}

/* Gradient: inputs are the values of xs then zs; output i is dy/dx_i, shaped like x_i. */
IrStatus ir_infer_gradient(IrInferCtx *c) {
    IrAttrValue xs, zs;
    if (!ir_node_attr(c->g, c->n, "xs", &xs)) return IR_OK;
    uint32_t nz = ir_node_attr(c->g, c->n, "zs", &zs) ? zs.count : 0;
    if (c->n_out != xs.count) return ir_infer_error(c, "has %u results, one per entry of xs (%u)", c->n_out, xs.count);
    if (ir_infer_num_inputs(c) != xs.count + nz)
        return ir_infer_error(c, "has %u inputs, one per entry of xs and zs (%u)", ir_infer_num_inputs(c), xs.count + nz);
    for (uint32_t i = 0; i < xs.count; i++) ir_infer_set_output(c, i, ir_infer_input_type(c, i));
    return IR_OK;
}

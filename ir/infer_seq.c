/* Type rules of the sequence and optional ops (the seq/opt block of ops.def).
 *
 * A sequence's element type is what all its elements share: rules that add tensors of other
 * shapes widen it (differing dims become `?`, differing ranks unranked); a dtype mismatch is an
 * error. Rules check operand kinds themselves, since these ops are exempt from the generic
 * "tensors only" check (ir_op_takes_containers).
 */
#include "infer.h"
#include "shape.h"

bool ir_op_takes_containers(IrOp op) {
    return op == IR_OP_IDENTITY || op == IR_OP_IF || op == IR_OP_LOOP ||
           (op >= IR_OP_SEQUENCE_CONSTRUCT && op <= IR_OP_OPTIONAL_GET_ELEMENT);
}

static const char *kind_word(IrTypeKind k) {
    return k == IR_TYPE_SEQ ? "a sequence" : k == IR_TYPE_OPT ? "an optional" : "a tensor";
}

/* Operand i must be of kind `want` (unknown types pass). */
static bool want_kind(IrInferCtx *c, uint32_t i, IrTypeKind want, const char *what) {
    IrTypeId t = ir_infer_input_type(c, i);
    if (!t || ir_type_kind(c->g, t) == want) return true;
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_type_print(c->g, t, &b);
    ir_infer_error(c, "%s must be %s, got %s", what, kind_word(want), b.data ? b.data : "?");
    ir_strbuf_free(&b);
    return false;
}

/* The element type of sequence operand i (0 when unknown). */
static IrTypeId seq_elem(IrInferCtx *c, uint32_t i) { return ir_type_elem(c->g, ir_infer_input_type(c, i)); }

/* Widens element type `acc` by tensor type t; false (after reporting) on a dtype mismatch. */
static bool widen(IrInferCtx *c, IrTypeId *acc, IrTypeId t, bool *unknown, const char *what) {
    if (!t) {
        *unknown = true;
        return true;
    }
    if (!*acc) {
        *acc = t;
        return true;
    }
    IrDType a = ir_type_dtype(c->g, *acc), b = ir_type_dtype(c->g, t);
    if (a != b) {
        ir_infer_error(c, "%s has dtype %s, the sequence holds %s", what, ir_dtype_name(b), ir_dtype_name(a));
        return false;
    }
    *acc = ir_type_join(c->g, *acc, t);
    return true;
}

/* An integer scalar (or one-element) position operand. */
static bool check_position(IrInferCtx *c, uint32_t i) {
    if (i >= ir_infer_num_inputs(c) || !ir_node_operand(c->g, c->n, i)) return true; /* absent: the default */
    if (!want_kind(c, i, IR_TYPE_TENSOR, "the position")) return false;
    IrTypeId t = ir_infer_input_type(c, i);
    IrDType dt = ir_type_dtype(c->g, t);
    if (t && dt != IR_DTYPE_I32 && dt != IR_DTYPE_I64) {
        ir_infer_error(c, "the position must be i32 or i64, got %s", ir_dtype_name(dt));
        return false;
    }
    uint32_t r = ir_type_rank(c->g, t);
    if (t && r != IR_RANK_UNKNOWN && r > 1) {
        ir_infer_error(c, "the position must be a scalar, got rank %u", r);
        return false;
    }
    return true;
}

IrStatus ir_infer_sequence_construct(IrInferCtx *c) {
    IrTypeId acc = 0;
    bool unknown = false;
    for (uint32_t i = 0; i < ir_infer_num_inputs(c); i++) {
        char what[32];
        snprintf(what, sizeof what, "operand %u", i);
        if (!want_kind(c, i, IR_TYPE_TENSOR, what)) return IR_EVERIFY;
        if (!widen(c, &acc, ir_infer_input_type(c, i), &unknown, what)) return IR_EVERIFY;
    }
    if (acc && unknown) acc = ir_type_tensor(c->g, ir_type_dtype(c->g, acc), IR_RANK_UNKNOWN, NULL);
    ir_infer_set_output(c, 0, ir_type_seq(c->g, acc));
    return IR_OK;
}

IrStatus ir_infer_sequence_empty(IrInferCtx *c) {
    bool found;
    int64_t dt = ir_node_attr_int(c->g, c->n, "dtype", &found);
    if (!found) dt = IR_DTYPE_F32; /* ONNX's default */
    IrTypeId e = ir_type_tensor(c->g, (IrDType)dt, IR_RANK_UNKNOWN, NULL);
    if (!e) return ir_infer_error(c, "invalid dtype");
    ir_infer_set_output(c, 0, ir_type_seq(c->g, e));
    return IR_OK;
}

IrStatus ir_infer_sequence_at(IrInferCtx *c) {
    if (!want_kind(c, 0, IR_TYPE_SEQ, "operand 0") || !check_position(c, 1)) return IR_EVERIFY;
    ir_infer_set_output(c, 0, seq_elem(c, 0));
    return IR_OK;
}

IrStatus ir_infer_sequence_insert(IrInferCtx *c) {
    if (!want_kind(c, 0, IR_TYPE_SEQ, "operand 0") || !want_kind(c, 1, IR_TYPE_TENSOR, "the inserted value") ||
        !check_position(c, 2))
        return IR_EVERIFY;
    IrTypeId s = ir_infer_input_type(c, 0);
    if (!s) return IR_OK;
    IrTypeId acc = seq_elem(c, 0);
    bool unknown = false;
    if (acc && !widen(c, &acc, ir_infer_input_type(c, 1), &unknown, "the inserted tensor")) return IR_EVERIFY;
    if (acc && unknown) acc = ir_type_tensor(c->g, ir_type_dtype(c->g, acc), IR_RANK_UNKNOWN, NULL);
    ir_infer_set_output(c, 0, ir_type_seq(c->g, acc));
    return IR_OK;
}

IrStatus ir_infer_sequence_erase(IrInferCtx *c) {
    if (!want_kind(c, 0, IR_TYPE_SEQ, "operand 0") || !check_position(c, 1)) return IR_EVERIFY;
    ir_infer_set_output(c, 0, ir_infer_input_type(c, 0));
    return IR_OK;
}

IrStatus ir_infer_sequence_length(IrInferCtx *c) {
    if (!want_kind(c, 0, IR_TYPE_SEQ, "operand 0")) return IR_EVERIFY;
    ir_infer_set_output(c, 0, ir_type_tensor(c->g, IR_DTYPE_I64, 0, NULL));
    return IR_OK;
}

IrStatus ir_infer_split_to_sequence(IrInferCtx *c) {
    if (!want_kind(c, 0, IR_TYPE_TENSOR, "operand 0") ||
        (ir_infer_num_inputs(c) > 1 && !want_kind(c, 1, IR_TYPE_TENSOR, "split")))
        return IR_EVERIFY;
    IrTypeId t = ir_infer_input_type(c, 0);
    if (!t) return IR_OK;
    IrGraph *g = c->g;
    IrDType dt = ir_type_dtype(g, t);
    uint32_t r = ir_type_rank(g, t);
    IrTypeId elem = ir_type_tensor(g, dt, IR_RANK_UNKNOWN, NULL);
    if (r != IR_RANK_UNKNOWN) {
        if (r == 0) return ir_infer_error(c, "the input must have rank >= 1");
        int64_t axis = ir_node_attr_int(g, c->n, "axis", NULL);
        int64_t a = axis;
        if (!ir_shape_axis_checked(&axis, r))
            return ir_infer_error(c, "axis %lld out of range for rank %u", (long long)a, r);
        bool has_split = ir_infer_num_inputs(c) > 1 && ir_node_operand(g, c->n, 1);
        bool keep = has_split || ir_node_attr_int(g, c->n, "keepdims", NULL) != 0;
        IrExprId d[IR_INFER_MAXR];
        uint32_t k = 0;
        if (r > IR_INFER_MAXR) goto out;
        for (uint32_t i = 0; i < r; i++) {
            if ((int64_t)i != axis) d[k++] = ir_type_dims(g, t)[i];
            else if (keep) d[k++] = has_split ? ir_expr_unknown(g) : ir_expr_const(g, 1);
        }
        elem = ir_type_tensor(g, dt, k, d);
    }
out:
    ir_infer_set_output(c, 0, ir_type_seq(g, elem));
    return IR_OK;
}

IrStatus ir_infer_concat_from_sequence(IrInferCtx *c) {
    if (!want_kind(c, 0, IR_TYPE_SEQ, "operand 0")) return IR_EVERIFY;
    IrGraph *g = c->g;
    IrTypeId e = seq_elem(c, 0);
    if (!e) return IR_OK;
    IrDType dt = ir_type_dtype(g, e);
    uint32_t r = ir_type_rank(g, e);
    bool new_axis = ir_node_attr_int(g, c->n, "new_axis", NULL) != 0;
    if (r == IR_RANK_UNKNOWN || r + 1 > IR_INFER_MAXR) {
        ir_infer_set_output(c, 0, ir_type_tensor(g, dt, IR_RANK_UNKNOWN, NULL));
        return IR_OK;
    }
    uint32_t out_rank = r + (new_axis ? 1 : 0);
    int64_t axis = ir_node_attr_int(g, c->n, "axis", NULL);
    int64_t a = axis;
    if (!ir_shape_axis_checked(&axis, out_rank))
        return ir_infer_error(c, "axis %lld out of range for rank %u", (long long)a, out_rank);
    IrExprId d[IR_INFER_MAXR];
    for (uint32_t i = 0, j = 0; i < out_rank; i++) {
        if ((int64_t)i == axis) {
            d[i] = ir_expr_unknown(g); /* depends on the number of elements */
            if (!new_axis) j++;
        } else {
            d[i] = ir_type_dims(g, e)[j++];
        }
    }
    ir_infer_set_output(c, 0, ir_type_tensor(g, dt, out_rank, d));
    return IR_OK;
}

IrStatus ir_infer_sequence_map(IrInferCtx *c) {
    IrGraph *g = c->g;
    IrRegionId body = ir_node_region_at(g, c->n, 0);
    uint32_t n_in = ir_infer_num_inputs(c);
    if (!want_kind(c, 0, IR_TYPE_SEQ, "operand 0")) return IR_EVERIFY;
    if (ir_region_num_args(g, body) != n_in)
        return ir_infer_error(c, "body takes %u arguments for %u operands", ir_region_num_args(g, body), n_in);
    if (ir_region_num_outputs(g, body) != c->n_out)
        return ir_infer_error(c, "body returns %u values for %u results", ir_region_num_outputs(g, body), c->n_out);
    for (uint32_t i = 0; i < n_in; i++) {
        IrTypeId t = ir_infer_input_type(c, i);
        if (ir_type_kind(g, t) == IR_TYPE_OPT) return ir_infer_error(c, "operand %u must be a sequence or a tensor", i);
        IrTypeId a = ir_value_type(g, ir_region_arg(g, body, i));
        if (ir_type_kind(g, a) != IR_TYPE_TENSOR)
            return ir_infer_error(c, "body argument %u must be a tensor (an element of operand %u)", i, i);
    }
    for (uint32_t i = 0; i < c->n_out; i++) {
        IrValueId v = ir_region_output(g, body, i);
        IrTypeId t = v ? ir_value_type(g, v) : 0;
        if (ir_type_kind(g, t) != IR_TYPE_TENSOR) return ir_infer_error(c, "body output %u must be a tensor", i);
        /* the body's types hold for every iteration, so for every element */
        ir_infer_set_output(c, i, ir_type_seq(g, t));
    }
    return IR_OK;
}

IrStatus ir_infer_optional(IrInferCtx *c) {
    if (ir_infer_num_inputs(c) == 0 || !ir_node_operand(c->g, c->n, 0)) return IR_OK; /* declared type */
    IrTypeId t = ir_infer_input_type(c, 0);
    if (ir_type_kind(c->g, t) == IR_TYPE_OPT) return ir_infer_error(c, "an optional cannot hold an optional");
    if (t) ir_infer_set_output(c, 0, ir_type_opt(c->g, t));
    return IR_OK;
}

IrStatus ir_infer_optional_has_element(IrInferCtx *c) {
    ir_infer_set_output(c, 0, ir_type_tensor(c->g, IR_DTYPE_BOOL, 0, NULL));
    return IR_OK;
}

IrStatus ir_infer_optional_get_element(IrInferCtx *c) {
    IrTypeId t = ir_infer_input_type(c, 0);
    /* opset 18 also accepts a plain tensor or sequence, returned as it is */
    ir_infer_set_output(c, 0, ir_type_kind(c->g, t) == IR_TYPE_OPT ? ir_type_elem(c->g, t) : t);
    return IR_OK;
}

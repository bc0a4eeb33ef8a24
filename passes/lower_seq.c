/* lower-seq: replaces sequence values whose structure is known at compile time by the tensors
 * they hold, so code generators that know only tensors can run the model. Walking the top level
 * forward, each sequence value gets its list of element values when that list is static:
 * SequenceEmpty, SequenceConstruct, SequenceInsert/SequenceErase at a constant (or absent)
 * position, SplitToSequence with a constant (or absent) split along a static dim (Slice per
 * piece, Squeeze without keepdims). Then SequenceAt at a constant position becomes an Identity of
 * the element, SequenceLength a Constant, ConcatFromSequence a Concat (of Unsqueezes with
 * new_axis). A SplitToSequence whose split sizes are computed still has a known length (the
 * split's element count). Sequence nodes left without uses are removed; what cannot be resolved
 * stays as it is (the interpreter runs it; the backends refuse it naming the op).
 */
#include "ir/shape.h"
#include "passes/passes.h"

#include <stdlib.h>
#include <string.h>

#define SEQ_MAX 4096 /* elements of one lowered sequence */

typedef struct Seq {
    bool known;   /* elements listed */
    int64_t len;  /* -1 = unknown */
    IrValueId *v; /* len elements when known */
} Seq;

typedef struct LowerSeq {
    IrPassContext *c;
    IrGraph *g;
    Seq *seqs; /* by value id (values of the pass's start) */
    uint32_t n_values;
    int64_t lowered;
} LowerSeq;

static Seq *seq_of(LowerSeq *s, IrValueId v) { return v && v <= s->n_values ? &s->seqs[v] : NULL; }

static bool set_list(LowerSeq *s, IrValueId r, const IrValueId *v, int64_t len) {
    Seq *q = seq_of(s, r);
    if (!q || len < 0 || len > SEQ_MAX) return false;
    q->v = malloc((size_t)(len ? len : 1) * sizeof *q->v);
    if (!q->v) return false;
    if (len) memcpy(q->v, v, (size_t)len * sizeof *v);
    q->known = true;
    q->len = len;
    return true;
}

/* A constant integer scalar (or one-element tensor) operand i of n; false when absent/other. */
static bool const_int(const IrGraph *g, IrNodeId n, uint32_t i, int64_t *out) {
    IrValueId v = i < ir_node_num_operands(g, n) ? ir_node_operand(g, n, i) : 0;
    IrConstId c;
    if (!v || !ir_pass_const_of(g, v, &c)) return false;
    IrTypeId t = ir_const_type(g, c);
    int64_t numel;
    IrDType dt = ir_type_dtype(g, t);
    if (!ir_dtype_is_int(dt) || !ir_type_numel(g, t, &numel) || numel != 1) return false;
    *out = ir_elem_get_i64(dt, ir_const_data(g, c), 0);
    return true;
}

static IrValueId tmp_const_i64(LowerSeq *s, const int64_t *vals, uint32_t n, bool scalar) {
    int64_t d = n;
    IrTypeId t = ir_type_tensor_i64(s->g, IR_DTYPE_I64, scalar ? 0 : 1, &d);
    IrConstId c = ir_const_create(s->g, t, vals, n * sizeof *vals);
    return c ? ir_graph_add_const_value(s->g, NULL, c) : 0; /* a generated name */
}

/* A node op(ops) before `before`, typed by its rule; its one result. */
static IrValueId build(LowerSeq *s, IrNodeId before, IrOp op, uint32_t n_ops, const IrValueId *ops, IrNodeId *out) {
    IrNodeId n = ir_node_create_before(s->g, before, op, n_ops, ops, 1, NULL, NULL);
    if (!n) return 0;
    ir_pass_inherit_provenance(s->g, n, before);
    if (out) *out = n;
    return ir_node_result(s->g, n, 0);
}

static IrStatus typed(LowerSeq *s, IrNodeId n) {
    IrDiag quiet;
    ir_diag_init(&quiet, NULL, NULL);
    IrTypeId t = 0;
    if (ir_node_infer_types(s->g, n, &quiet, &t) == IR_OK && t) ir_value_set_type(s->g, ir_node_result(s->g, n, 0), t);
    return IR_OK;
}

/* Node n's result replaced by v (a fresh value): uses rewired, n erased, v takes n's name. */
static IrStatus replace(LowerSeq *s, IrNodeId n, IrValueId v) {
    s->lowered++;
    return ir_pass_replace_node(s->g, n, v);
}

/* Elements of SplitToSequence n: one Slice per piece along a static axis (Squeezed without
 * keepdims), or only the count when the split sizes are computed at run time. */
static IrStatus split_to_sequence(LowerSeq *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrValueId x = ir_node_operand(g, n, 0), split = ir_node_num_operands(g, n) > 1 ? ir_node_operand(g, n, 1) : 0;
    IrTypeId tx = ir_value_type(g, x);
    uint32_t r = ir_type_rank(g, tx);
    Seq *q = seq_of(s, ir_node_result(g, n, 0));
    if (!q || r == IR_RANK_UNKNOWN || r == 0) return IR_OK;
    bool found;
    int64_t axis = ir_node_attr_int(g, n, "axis", &found), keep = ir_node_attr_int(g, n, "keepdims", &found);
    if (!found) keep = 1;
    if (!ir_shape_axis_checked(&axis, r)) return IR_OK;
    int64_t dim = -1, sizes[SEQ_MAX], n_pieces = 0;
    ir_expr_is_const(g, ir_type_dims(g, tx)[axis], &dim);
    IrConstId c;
    if (split && !ir_pass_const_of(g, split, &c)) { /* computed sizes: the count is the element count */
        int64_t cnt;
        IrTypeId ts = ir_value_type(g, split);
        if (ir_type_rank(g, ts) == 1 && ir_type_numel(g, ts, &cnt)) q->len = cnt;
        return IR_OK;
    }
    if (dim < 0) return IR_OK;
    if (!split) { /* pieces of 1 */
        if (dim > SEQ_MAX) return IR_OK;
        for (int64_t i = 0; i < dim; i++) sizes[n_pieces++] = 1;
    } else {
        IrTypeId ts = ir_const_type(g, c);
        IrDType dt = ir_type_dtype(g, ts);
        int64_t numel;
        if (!ir_dtype_is_int(dt) || !ir_type_numel(g, ts, &numel) || numel > SEQ_MAX) return IR_OK;
        if (ir_type_rank(g, ts) == 0) { /* equal pieces of that size, the last shorter */
            int64_t k = ir_elem_get_i64(dt, ir_const_data(g, c), 0);
            if (k <= 0 || dim / k >= SEQ_MAX) return IR_OK;
            for (int64_t at = 0; at < dim; at += k) sizes[n_pieces++] = at + k <= dim ? k : dim - at;
        } else {
            int64_t sum = 0;
            for (int64_t i = 0; i < numel; i++) sum += sizes[n_pieces++] = ir_elem_get_i64(dt, ir_const_data(g, c), (size_t)i);
            if (sum != dim) return IR_OK; /* the interpreter reports it */
        }
        keep = 1; /* keepdims applies to unsplit pieces of 1 only */
    }
    IrValueId *el = malloc((size_t)(n_pieces ? n_pieces : 1) * sizeof *el);
    if (!el) return IR_ENOMEM;
    IrValueId vax = tmp_const_i64(s, &axis, 1, false);
    int64_t at = 0;
    IrStatus st = vax ? IR_OK : IR_ENOMEM;
    for (int64_t i = 0; i < n_pieces && !st; i++) {
        int64_t b = at, e = at + sizes[i];
        at = e;
        IrValueId ops[4] = {x, tmp_const_i64(s, &b, 1, false), tmp_const_i64(s, &e, 1, false), vax};
        IrNodeId sl;
        el[i] = ops[1] && ops[2] ? build(s, n, IR_OP_SLICE, 4, ops, &sl) : 0;
        if (!el[i]) st = IR_ENOMEM;
        else st = typed(s, sl);
        if (!st && !keep) {
            IrValueId sq[2] = {el[i], vax};
            IrNodeId sn;
            el[i] = build(s, n, IR_OP_SQUEEZE, 2, sq, &sn);
            st = el[i] ? typed(s, sn) : IR_ENOMEM;
        }
    }
    if (!st && !set_list(s, ir_node_result(g, n, 0), el, n_pieces)) st = IR_ENOMEM;
    free(el);
    return st;
}

static IrStatus lower_node(LowerSeq *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrOp op = ir_node_op(g, n);
    uint32_t no = ir_node_num_operands(g, n);
    IrValueId r = ir_node_num_results(g, n) ? ir_node_result(g, n, 0) : 0;
    Seq *in = no ? seq_of(s, ir_node_operand(g, n, 0)) : NULL;
    int64_t pos;
    switch (op) {
    case IR_OP_SEQUENCE_EMPTY: return set_list(s, r, NULL, 0) ? IR_OK : IR_ENOMEM;
    case IR_OP_SEQUENCE_CONSTRUCT: {
        IrValueId v[SEQ_MAX];
        for (uint32_t i = 0; i < no && i < SEQ_MAX; i++) v[i] = ir_node_operand(g, n, i);
        return no <= SEQ_MAX && !set_list(s, r, v, no) ? IR_ENOMEM : IR_OK;
    }
    case IR_OP_SEQUENCE_INSERT: case IR_OP_SEQUENCE_ERASE: {
        if (!in || !in->known) return IR_OK;
        bool ins = op == IR_OP_SEQUENCE_INSERT;
        uint32_t pi = ins ? 2 : 1;
        bool has = pi < no && ir_node_operand(g, n, pi);
        if (!has) pos = ins ? in->len : in->len - 1;
        else if (!const_int(g, n, pi, &pos)) return IR_OK;
        if (pos < 0) pos += in->len;
        if (pos < 0 || pos > in->len - (ins ? 0 : 1) || in->len + 1 > SEQ_MAX) return IR_OK; /* the interpreter reports it */
        IrValueId *v = malloc((size_t)(in->len + 1) * sizeof *v);
        if (!v) return IR_ENOMEM;
        int64_t k = 0;
        for (int64_t i = 0; i <= in->len; i++) {
            if (i == pos && ins) v[k++] = ir_node_operand(g, n, 1);
            if (i < in->len && !(i == pos && !ins)) v[k++] = in->v[i];
        }
        bool ok = set_list(s, r, v, k);
        free(v);
        return ok ? IR_OK : IR_ENOMEM;
    }
    case IR_OP_SPLIT_TO_SEQUENCE: return split_to_sequence(s, n);
    case IR_OP_SEQUENCE_AT: {
        if (!in || !in->known || !const_int(g, n, 1, &pos)) return IR_OK;
        if (pos < 0) pos += in->len;
        if (pos < 0 || pos >= in->len) return IR_OK;
        IrValueId e = in->v[pos];
        IrValueId id = build(s, n, IR_OP_IDENTITY, 1, &e, NULL);
        if (!id) return IR_ENOMEM;
        ir_value_set_type(g, id, ir_value_type(g, e));
        return replace(s, n, id);
    }
    case IR_OP_SEQUENCE_LENGTH: {
        if (!in || in->len < 0) return IR_OK;
        IrTypeId t = ir_type_tensor_i64(g, IR_DTYPE_I64, 0, NULL);
        IrConstId c = ir_const_create(g, t, &in->len, sizeof in->len);
        IrNodeId cn;
        IrValueId v = c ? build(s, n, IR_OP_CONSTANT, 0, NULL, &cn) : 0;
        if (!v) return IR_ENOMEM;
        IrAttrValue av = {.kind = IR_ATTR_TENSOR, .tensor = c};
        ir_node_set_attr(g, cn, "value", &av);
        ir_value_set_type(g, v, t);
        return replace(s, n, v);
    }
    case IR_OP_CONCAT_FROM_SEQUENCE: {
        if (!in || !in->known || in->len == 0) return IR_OK;
        bool found;
        int64_t axis = ir_node_attr_int(g, n, "axis", &found), newax = ir_node_attr_int(g, n, "new_axis", &found);
        IrValueId *v = malloc((size_t)in->len * sizeof *v);
        if (!v) return IR_ENOMEM;
        IrStatus st = IR_OK;
        uint32_t er = ir_type_rank(g, ir_value_type(g, in->v[0]));
        if (er == IR_RANK_UNKNOWN) st = IR_EUNSUPPORTED;
        if (!st) axis = ir_shape_axis(axis, er + (newax ? 1 : 0));
        IrValueId vax = !st && newax ? tmp_const_i64(s, &axis, 1, false) : 0;
        for (int64_t i = 0; i < in->len && !st; i++) {
            v[i] = in->v[i];
            if (newax) {
                IrValueId ops[2] = {v[i], vax};
                IrNodeId un;
                v[i] = vax ? build(s, n, IR_OP_UNSQUEEZE, 2, ops, &un) : 0;
                st = v[i] ? typed(s, un) : IR_ENOMEM;
            }
        }
        IrNodeId cn = 0;
        IrValueId cv = !st ? build(s, n, IR_OP_CONCAT, (uint32_t)in->len, v, &cn) : 0;
        free(v);
        if (st == IR_EUNSUPPORTED) return IR_OK;
        if (st || !cv) return st ? st : IR_ENOMEM;
        IrAttrValue av = {.kind = IR_ATTR_INT, .i = axis};
        ir_node_set_attr(g, cn, "axis", &av);
        typed(s, cn);
        return replace(s, n, cv);
    }
    default: return IR_OK;
    }
}

/* Sequence-producing nodes nobody reads any more, last first. */
static void drop_dead(LowerSeq *s) {
    IrGraph *g = s->g;
    uint32_t *uses = calloc(ir_graph_num_values(g) + 1, sizeof *uses);
    if (!uses) return;
    for (bool again = true; again;) {
        again = false;
        memset(uses, 0, (ir_graph_num_values(g) + 1) * sizeof *uses);
        ir_graph_count_uses(g, uses);
        for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION), next; n; n = next) {
            next = ir_node_next(g, n);
            IrValueId r = ir_node_num_results(g, n) == 1 ? ir_node_result(g, n, 0) : 0;
            if (r && !uses[r] && ir_type_kind(g, ir_value_type(g, r)) == IR_TYPE_SEQ) {
                ir_node_erase(g, n);
                again = true;
            }
        }
    }
    free(uses);
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    LowerSeq s = {.c = c, .g = g, .n_values = ir_graph_num_values(g)};
    s.seqs = calloc((size_t)s.n_values + 1, sizeof *s.seqs);
    if (!s.seqs) return IR_ENOMEM;
    for (uint32_t v = 0; v <= s.n_values; v++) s.seqs[v].len = -1;
    IrStatus st = IR_OK;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION), next; n && !st; n = next) {
        next = ir_node_next(g, n);
        st = lower_node(&s, n);
    }
    if (!st && s.lowered) drop_dead(&s);
    for (uint32_t v = 0; v <= s.n_values; v++) free(s.seqs[v].v);
    free(s.seqs);
    if (s.lowered) ir_pass_changed(c);
    ir_pass_stat(c, "seq-ops-lowered", s.lowered);
    return st ? st : ir_graph_status(g);
}

const IrPass pass_lower_seq = {
    .name = "lower-seq",
    .summary = "replace sequences of a structure known at compile time by their tensors",
    .options = (const IrPassOption[]){{NULL, NULL, NULL}},
    .run = run,
};

/* const-fold: evaluates nodes whose operands are all constants (graph constants or Constant
 * nodes) with the reference interpreter's kernels and replaces their results by graph
 * constants. Shape and Size of a value whose type is static enough fold without the input.
 *
 * Not folded: nodes with regions, random ops, Dropout (canonicalize handles inference dropout),
 * shape guards, Constant nodes themselves, dequantizations (quantized weights stay quantized;
 * `dequantize=1` folds them), results over `max-elements` elements, and nodes whose
 * kernel fails or is missing (a failure is a note, never a pass failure). A folded result keeps
 * its name: the new constant takes it once the node is erased. A result that is a graph output
 * becomes a Constant node instead, so every graph output stays defined by a node.
 * Uses are rewritten while walking forward (definitions precede uses), so one walk folds whole
 * chains and the pass is linear in the graph plus the work of the kernels.
 */
#include "ir/shape.h"
#include "passes/passes.h"
#include "validate/validate.h"

#include <stdlib.h>
#include <string.h>

#define MAX_NOTES 8

typedef struct Fold {
    IrPassContext *c;
    IrGraph *g;
    IrValueId *repl; /* value -> replacement (0 = itself); values of the pass's start only */
    uint8_t *is_graph_output;
    uint32_t n_values; /* entries of repl / is_graph_output, less one */
    int64_t max_elements;
    bool dequantize; /* option dequantize=1: fold dequantizations of constants too */
    int64_t folded, bytes, failed;
    uint32_t notes;
} Fold;


static bool foldable_op(IrOp op, bool dequantize) {
    if (ir_op_info(op)->cls == IR_CLASS_RANDOM) return false;
    switch (op) {
    case IR_OP_DROPOUT:
    case IR_OP_SHAPE_GUARD:
    case IR_OP_CONSTANT: return false;
    /* dequantizing a constant would undo weight compression: quantized weights stay quantized,
     * unless asked (the CPU backend, which computes in f32 anyway) */
    case IR_OP_DEQUANTIZE_FP8:
    case IR_OP_DEQUANTIZE_LINEAR: return dequantize;
    default: return ir_op_num_regions(op) == 0;
    }
}

/* Static dims of a type into dims[]; false unless ranked, small enough and all constant. */
static bool static_dims(const IrGraph *g, IrTypeId t, uint32_t *rank, int64_t *dims) {
    uint32_t r = ir_type_rank(g, t);
    if (!t || r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return false;
    for (uint32_t i = 0; i < r; i++)
        if (!ir_expr_is_const(g, ir_type_dims(g, t)[i], &dims[i])) return false;
    *rank = r;
    return true;
}

/* ---- constant operands --------------------------------------------------------------------- */

/* Constant data as a tensor (freed by the caller with ir_tensor_free). */
static bool view_const(const IrGraph *g, IrConstId k, IrTensor *t) {
    uint32_t rank;
    int64_t dims[IR_MAX_RANK];
    if (!static_dims(g, ir_const_type(g, k), &rank, dims)) return false;
    (void)rank;
    return ir_tensor_from_const(t, g, k) == IR_OK; /* a view; strings unpacked (owned) */
}

/* Diagnostics of one evaluation, held back so the pass decides what to report. */
typedef struct Held {
    bool have;
    IrDiagnostic d;
    char msg[512];
} Held;

static void hold_fn(void *user, const IrDiagnostic *d) {
    Held *h = user;
    if (h->have) return;
    h->have = true;
    h->d = *d;
    snprintf(h->msg, sizeof h->msg, "%s", d->message);
    h->d.message = h->msg;
}

/* The tensor of a constant operand: a view of a graph constant or of a Constant node's `value`,
 * or (other Constant forms) the Constant kernel's owned result. */
static bool const_operand(Fold *s, IrValueId v, IrTensor *t) {
    IrGraph *g = s->g;
    IrConstId k = ir_value_const(g, v);
    if (k) return view_const(g, k, t);
    IrNodeId d = ir_value_def_node(g, v);
    if (!d || ir_node_op(g, d) != IR_OP_CONSTANT) return false;
    IrAttrValue a;
    if (ir_node_attr(g, d, "value", &a) && a.kind == IR_ATTR_TENSOR) return view_const(g, a.tensor, t);
    Held h = {0};
    IrDiag quiet;
    ir_diag_init(&quiet, hold_fn, &h);
    const IrTensor *none[1] = {NULL};
    return ir_interp_eval_node(g, d, none, t, &quiet) == IR_OK;
}

/* ---- replacing results --------------------------------------------------------------------- */

/* Replaces node n's present results by the given tensors: a graph constant per result (a
 * Constant node for a graph output), created under generated names, then renamed to the
 * results' names once n is gone. */
static IrStatus replace_results(Fold *s, IrNodeId n, const IrTensor *vals) {
    IrGraph *g = s->g;
    uint32_t nr = ir_node_num_results(g, n);
    IrValueId *nv = calloc(nr ? nr : 1, sizeof *nv);
    char **names = calloc(nr ? nr : 1, sizeof *names);
    IrStatus st = nv && names ? IR_OK : IR_ENOMEM;
    for (uint32_t i = 0; i < nr && st == IR_OK; i++) {
        IrValueId r = ir_node_result(g, n, i);
        if (!r) continue;
        const IrTensor *t = &vals[i];
        IrTypeId ty = ir_type_tensor_i64(g, t->dtype, t->rank, t->dims);
        IrConstId k = ir_tensor_to_const(g, ty, t);
        names[i] = strdup(ir_value_name(g, r));
        if (!k || !names[i]) {
            st = ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
            break;
        }
        if (r <= s->n_values && s->is_graph_output[r]) {
            IrNodeId cn = ir_node_create_before(g, n, IR_OP_CONSTANT, 0, NULL, 1, NULL, &ty);
            if (!cn) {
                st = ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
                break;
            }
            IrAttrValue a = {.kind = IR_ATTR_TENSOR, .tensor = k};
            ir_node_set_attr(g, cn, "value", &a);
            ir_pass_inherit_provenance(g, cn, n);
            nv[i] = ir_node_result(g, cn, 0);
        } else {
            nv[i] = ir_graph_add_const_value(g, NULL, k);
        }
        s->bytes += (int64_t)ir_tensor_nbytes(t);
        if (r <= s->n_values) s->repl[r] = nv[i];
    }
    if (st == IR_OK) {
        ir_node_erase(g, n);
        for (uint32_t i = 0; i < nr && st == IR_OK; i++)
            if (nv[i] && ir_value_rename(g, nv[i], names[i]) != IR_OK)
                st = ir_graph_status(g) ? ir_graph_status(g) : IR_EINVAL;
    }
    for (uint32_t i = 0; names && i < nr; i++) free(names[i]);
    free(names);
    free(nv);
    return st;
}

/* ---- folding one node ---------------------------------------------------------------------- */

/* Shape and Size whose answer the input's type already gives. */
static bool fold_static_shape(Fold *s, IrNodeId n, IrTensor *out) {
    IrGraph *g = s->g;
    IrOp op = ir_node_op(g, n);
    IrTypeId t = ir_value_type(g, ir_node_operand(g, n, 0));
    uint32_t rank = ir_type_rank(g, t);
    if (!t || rank == IR_RANK_UNKNOWN || !ir_node_result(g, n, 0)) return false;
    const IrExprId *dims = ir_type_dims(g, t);
    if (op == IR_OP_SIZE) {
        int64_t numel;
        if (!ir_type_numel(g, t, &numel) || ir_tensor_alloc(out, IR_DTYPE_I64, 0, NULL) != IR_OK) return false;
        *(int64_t *)out->data = numel;
        return true;
    }
    if (op != IR_OP_SHAPE) return false;
    int64_t r = rank, start = ir_node_attr_int(g, n, "start", NULL), end = r;
    bool has_end;
    int64_t e = ir_node_attr_int(g, n, "end", &has_end);
    if (has_end) end = e;
    start = ir_shape_axis(start, rank);
    end = ir_shape_axis(end, rank);
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t len = end > start ? end - start : 0;
    for (int64_t i = start; i < end; i++)
        if (!ir_expr_is_const(g, dims[i], NULL)) return false;
    if (ir_tensor_alloc(out, IR_DTYPE_I64, 1, &len) != IR_OK) return false;
    for (int64_t i = start; i < end; i++) ir_expr_is_const(g, dims[i], &((int64_t *)out->data)[i - start]);
    return true;
}

/* A result whose declared type is static and over the cap is not worth evaluating. */
static bool declared_too_big(Fold *s, IrNodeId n) {
    for (uint32_t i = 0; i < ir_node_num_results(s->g, n); i++) {
        int64_t numel;
        IrValueId r = ir_node_result(s->g, n, i);
        if (r && ir_type_numel(s->g, ir_value_type(s->g, r), &numel) && numel > s->max_elements) return true;
    }
    return false;
}

static void report_failure(Fold *s, const Held *h, IrStatus st) {
    if (st == IR_EUNSUPPORTED || !h->have) return; /* a missing kernel is no news */
    s->failed++;
    if (s->notes >= MAX_NOTES) return;
    if (++s->notes == MAX_NOTES) {
        ir_diag_report(ir_pass_diag(s->c), IR_SEV_NOTE, h->d.file, h->d.line, h->d.col, h->d.source_line,
                       h->d.source_line_len, "const-fold: not folded: %s (further notes suppressed)", h->d.message);
        return;
    }
    ir_diag_report(ir_pass_diag(s->c), IR_SEV_NOTE, h->d.file, h->d.line, h->d.col, h->d.source_line,
                   h->d.source_line_len, "const-fold: not folded: %s", h->d.message);
}

/* Evaluates n when every present operand is constant; fills outs (one per result). */
static bool eval_const_node(Fold *s, IrNodeId n, IrTensor *outs) {
    IrGraph *g = s->g;
    uint32_t no = ir_node_num_operands(g, n);
    IrTensor *ins = calloc(no ? no : 1, sizeof *ins);
    const IrTensor **ptrs = calloc(no ? no : 1, sizeof *ptrs);
    bool ok = ins && ptrs, any = false;
    for (uint32_t i = 0; ok && i < no; i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v) continue;
        ok = const_operand(s, v, &ins[i]);
        ptrs[i] = &ins[i];
        any = true;
    }
    if (ok && any) {
        Held h = {0};
        IrDiag held;
        ir_diag_init(&held, hold_fn, &h);
        IrStatus st = ir_interp_eval_node(g, n, ptrs, outs, &held);
        if (st) report_failure(s, &h, st);
        ok = st == IR_OK;
    } else {
        ok = false;
    }
    for (uint32_t i = 0; ins && i < no; i++) ir_tensor_free(&ins[i]);
    free(ins);
    free(ptrs);
    return ok;
}

static IrStatus try_fold(Fold *s, IrNodeId n) {
    IrGraph *g = s->g;
    IrOp op = ir_node_op(g, n);
    if (!foldable_op(op, s->dequantize) || declared_too_big(s, n)) return IR_OK;
    uint32_t nr = ir_node_num_results(g, n);
    if (!nr) return IR_OK;
    IrTensor small[4], *outs = nr <= 4 ? small : calloc(nr, sizeof *outs);
    if (!outs) return IR_ENOMEM;
    memset(outs, 0, nr * sizeof *outs);
    bool ok = ((op == IR_OP_SHAPE || op == IR_OP_SIZE) && fold_static_shape(s, n, &outs[0])) ||
              eval_const_node(s, n, outs);
    for (uint32_t i = 0; ok && i < nr; i++)
        if (ir_node_result(g, n, i) && ir_tensor_numel(&outs[i]) > s->max_elements) ok = false;
    /* sequences and optionals have no constant form: such results stay computed */
    for (uint32_t i = 0; ok && i < nr; i++)
        if (outs[i].form != IR_TYPE_TENSOR) ok = false;
    IrStatus st = IR_OK;
    if (ok) {
        st = replace_results(s, n, outs);
        s->folded++;
    }
    for (uint32_t i = 0; i < nr; i++) ir_tensor_free(&outs[i]);
    if (outs != small) free(outs);
    return st;
}

/* ---- the walk ------------------------------------------------------------------------------ */

static IrStatus fold_region(Fold *s, IrRegionId r) {
    IrGraph *g = s->g;
    IrStatus st = IR_OK;
    for (IrNodeId n = ir_region_first(g, r); n && st == IR_OK;) {
        IrNodeId next = ir_node_next(g, n);
        ir_pass_remap_operands(g, n, s->repl, s->n_values);
        for (uint32_t k = 0; k < ir_node_num_regions(g, n) && st == IR_OK; k++)
            st = fold_region(s, ir_node_region_at(g, n, k));
        if (st == IR_OK) st = try_fold(s, n);
        n = next;
    }
    if (st == IR_OK) st = ir_pass_remap_region_outputs(g, r, s->repl, s->n_values);
    return st;
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    uint32_t nv = ir_graph_num_values(g);
    Fold s = {c, g, calloc((size_t)nv + 1, sizeof(IrValueId)), calloc((size_t)nv + 1, 1), nv,
              ir_pass_option_int(c, "max-elements", 1048576), ir_pass_option_int(c, "dequantize", 0) != 0, 0, 0, 0, 0};
    if (!s.repl || !s.is_graph_output) {
        free(s.repl);
        free(s.is_graph_output);
        return IR_ENOMEM;
    }
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) s.is_graph_output[ir_graph_output(g, i)] = 1;
    IrStatus st = fold_region(&s, IR_ROOT_REGION);
    free(s.repl);
    free(s.is_graph_output);
    if (s.folded) ir_pass_changed(c);
    ir_pass_stat(c, "nodes-folded", s.folded);
    ir_pass_stat(c, "bytes-created", s.bytes);
    if (s.failed) ir_pass_stat(c, "kernel-errors", s.failed);
    return st ? st : ir_graph_status(g);
}

const IrPass pass_const_fold = {
    .name = "const-fold",
    .summary = "evaluate nodes whose operands are constants (and Shape/Size of static types) into constants",
    .options = (const IrPassOption[]){{"max-elements", "1048576", "largest result (elements) folded"},
                                      {"dequantize", "0", "1: fold DequantizeLinear/dequantize_fp8 of constants too"},
                                      {NULL, NULL, NULL}},
    .run = run,
};

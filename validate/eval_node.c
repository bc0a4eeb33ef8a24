/* Evaluating a single node with the interpreter's kernels, outside a whole-graph run (const-fold
 * uses it). The node gets a minimal execution context: the graph, the diagnostics sink, default
 * options and no bound symbols or values. Kernels never look inside the context except through
 * interp.h, and the only helper that needs a running executor (interp_run_region) is unreachable
 * because nodes with regions are refused.
 */
#include "validate/interp_internal.h"

#include <stdio.h>
#include <stdlib.h>

static void type_text(const IrGraph *g, IrTypeId t, char *buf, size_t cap) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_type_print(g, t, &b);
    snprintf(buf, cap, "%s", b.data ? b.data : "?");
    ir_strbuf_free(&b);
}

/* Every present result was produced, with the declared dtype, rank and constant dims. */
static IrStatus check_result(const IrGraph *g, IrNodeId n, uint32_t i, const IrTensor *t, IrDiag *diag) {
    IrValueId v = ir_node_result(g, n, i);
    if (t->dtype == IR_DTYPE_NONE && t->form == IR_TYPE_TENSOR) {
        interp_diag_node(diag, g, n, "internal error: the %s kernel did not produce result %u (%%%s)",
                         ir_op_name(ir_node_op(g, n)), i, ir_value_name(g, v));
        return IR_EVERIFY;
    }
    IrTypeId ty = ir_value_type(g, v);
    IrDType dt = ir_type_dtype(g, ty);
    uint32_t rank = ir_type_rank(g, ty);
    bool ok = ir_tensor_fits_type(g, ty, t) && (dt == IR_DTYPE_NONE || dt == t->dtype) &&
              (rank == IR_RANK_UNKNOWN || rank == t->rank);
    for (uint32_t d = 0; ok && rank != IR_RANK_UNKNOWN && d < rank; d++) {
        int64_t k;
        if (ir_expr_is_const(g, ir_type_dims(g, ty)[d], &k) && k != t->dims[d]) ok = false;
    }
    if (ok) return IR_OK;
    char want[256], got[256];
    type_text(g, ty, want, sizeof want);
    ir_tensor_shape_str(t, got, sizeof got);
    interp_diag_node(diag, g, n, "the %s kernel produced %s for result %u (%%%s), declared %s",
                     ir_op_name(ir_node_op(g, n)), got, i, ir_value_name(g, v), want);
    return IR_EVERIFY;
}

IrStatus ir_interp_eval_node(const IrGraph *g, IrNodeId n, const IrTensor *const *inputs, IrTensor *outputs,
                             IrDiag *diag) {
    uint32_t n_in = ir_node_num_operands(g, n), n_out = ir_node_num_results(g, n);
    for (uint32_t i = 0; i < n_out; i++) memset(&outputs[i], 0, sizeof outputs[i]);
    if (ir_node_num_regions(g, n)) {
        interp_diag_node(diag, g, n, "cannot evaluate a node with regions on its own");
        return IR_EINVAL;
    }
    IrOp op = ir_node_op(g, n);
    InterpKernel k = op > IR_OP_NONE && op < IR_OP_COUNT ? interp_kernels[op] : NULL;
    IrInterpOptions opt = {0};
    InterpCtx c;
    memset(&c, 0, sizeof c);
    c.g = g;
    c.diag = diag;
    c.opt = &opt;
    c.n_values = ir_graph_num_values(g);
    uint32_t n_syms = ir_graph_num_syms(g);
    c.sym = malloc((n_syms + 1) * sizeof *c.sym);
    if (!c.sym) {
        interp_diag_node(diag, g, n, "out of memory");
        return IR_ENOMEM;
    }
    for (uint32_t i = 0; i <= n_syms; i++) c.sym[i] = -1;
    KernelArgs a = {&c, g, n, inputs, n_in, outputs, n_out};
    uint32_t errs = diag ? diag->n_errors : 0;
    IrStatus s = k ? k(&a) : interp_unsupported(&a, NULL);
    if (s && diag && diag->n_errors == errs) interp_diag_node(diag, g, n, "failed (%s)", ir_status_name(s));
    for (uint32_t i = 0; i < n_out && !s; i++) {
        if (!ir_node_result(g, n, i)) {
            ir_tensor_free(&outputs[i]);
            continue;
        }
        s = check_result(g, n, i, &outputs[i], diag);
        if (!s && (s = ir_tensor_own_strings(&outputs[i]))) interp_diag_node(diag, g, n, "out of memory");
        if (!s && !outputs[i].owned && outputs[i].data) {
            /* a kernel returned a view: the caller is promised owned tensors */
            IrTensor copy;
            s = ir_tensor_copy(&copy, &outputs[i]);
            if (s) interp_diag_node(diag, g, n, "out of memory copying result %u", i);
            else outputs[i] = copy;
        }
    }
    if (s)
        for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outputs[i]);
    free(c.sym);
    return s;
}

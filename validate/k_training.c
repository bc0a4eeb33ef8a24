/* Kernels of ai.onnx.preview.training: the optimizers Adagrad, Adam and Momentum (formulas of
 * the ONNX spec, computed in double and rounded to each tensor's dtype) and Gradient.
 *
 * Gradient is an interpreter feature, not an IR rewrite: the kernel finds the nodes between the
 * named inputs (xs, zs, graph constants) and y, evaluates them forward with the interpreter's
 * own kernels (ir_interp_eval_node), then runs reverse-mode differentiation over them in double,
 * seeding dy = 1 for every element of y (the gradient of sum(y)). Keeping it out of the IR means
 * no pass must know about it and results match the forward kernels exactly. Differentiable ops:
 * Add, Sub, Mul, Div (with broadcasting reduced back onto each operand), Neg, Identity, Relu,
 * Sigmoid, Tanh, Exp, Log, Sum, MatMul (2-D, or batched with equal batch dims); any other op
 * on the path from xs to y is an error naming it. An irtool.fused group on the path is
 * differentiated through its body (its operands bound to the body's arguments), so Gradient
 * gives the same result before and after the fuse pass.
 */
#include "validate/interp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- optimizers ----------------------------------------------------------------------------- */

/* R and T as scalars; n = number of tensors optimized (the list length). */
static IrStatus opt_prologue(KernelArgs *a, uint32_t groups, uint32_t *n, double *r, int64_t *t) {
    if ((a->n_in - 2) % groups) return interp_error(a, "expects R, T and %u lists of equal length", groups);
    *n = (a->n_in - 2) / groups;
    for (uint32_t i = 0; i < a->n_in; i++)
        if (!a->in[i]) return interp_error(a, "input %u is missing", i);
    if (ir_tensor_numel(a->in[0]) != 1 || ir_tensor_numel(a->in[1]) != 1)
        return interp_error(a, "R and T must be scalars");
    *r = interp_get_f(a->in[0], 0);
    *t = interp_get_i(a->in[1], 0);
    for (uint32_t i = 0; i < *n; i++)
        for (uint32_t g = 1; g < groups; g++) {
            const IrTensor *x = a->in[2 + i], *o = a->in[2 + g * *n + i];
            if (ir_tensor_numel(o) != ir_tensor_numel(x))
                return interp_error(a, "input %u has %lld elements, its tensor X%u has %lld", 2 + g * *n + i,
                                    (long long)ir_tensor_numel(o), i, (long long)ir_tensor_numel(x));
        }
    return IR_OK;
}

static IrStatus alloc_like(KernelArgs *a, uint32_t out, const IrTensor *like) {
    if (out >= a->n_out) return interp_error(a, "has too few results");
    return interp_alloc_output(a, out, like->dtype, like->rank, like->dims);
}

IrStatus interp_ADAGRAD(KernelArgs *a) {
    uint32_t n;
    double r;
    int64_t t;
    IrStatus s = opt_prologue(a, 3, &n, &r, &t);
    if (s) return s;
    double decay = interp_attr_float(a, "decay_factor"), eps = interp_attr_float(a, "epsilon");
    double norm = interp_attr_float(a, "norm_coefficient");
    double lr = r / (1 + (double)t * decay);
    for (uint32_t i = 0; i < n; i++) {
        const IrTensor *x = a->in[2 + i], *g = a->in[2 + n + i], *h = a->in[2 + 2 * n + i];
        if ((s = alloc_like(a, i, x)) || (s = alloc_like(a, n + i, h))) return s;
        for (int64_t k = 0; k < ir_tensor_numel(x); k++) {
            double xv = interp_get_f(x, k), gr = norm * xv + interp_get_f(g, k);
            double hn = interp_get_f(h, k) + gr * gr;
            interp_set_f(&a->out[n + i], k, hn);
            interp_set_f(&a->out[i], k, xv - lr * gr / (sqrt(hn) + eps));
        }
    }
    return IR_OK;
}

IrStatus interp_ADAM(KernelArgs *a) {
    uint32_t n;
    double r;
    int64_t t;
    IrStatus s = opt_prologue(a, 4, &n, &r, &t);
    if (s) return s;
    double alpha = interp_attr_float(a, "alpha"), beta = interp_attr_float(a, "beta");
    double eps = interp_attr_float(a, "epsilon"), norm = interp_attr_float(a, "norm_coefficient");
    double post = interp_attr_float(a, "norm_coefficient_post");
    double lr = t > 0 ? r * sqrt(1 - pow(beta, (double)t)) / (1 - pow(alpha, (double)t)) : r;
    for (uint32_t i = 0; i < n; i++) {
        const IrTensor *x = a->in[2 + i], *g = a->in[2 + n + i], *v = a->in[2 + 2 * n + i], *h = a->in[2 + 3 * n + i];
        if ((s = alloc_like(a, i, x)) || (s = alloc_like(a, n + i, v)) || (s = alloc_like(a, 2 * n + i, h))) return s;
        for (int64_t k = 0; k < ir_tensor_numel(x); k++) {
            double xv = interp_get_f(x, k), gr = norm * xv + interp_get_f(g, k);
            double vn = alpha * interp_get_f(v, k) + (1 - alpha) * gr;
            double hn = beta * interp_get_f(h, k) + (1 - beta) * gr * gr;
            double xn = xv - lr * vn / (sqrt(hn) + eps);
            interp_set_f(&a->out[i], k, (1 - post) * xn);
            interp_set_f(&a->out[n + i], k, vn);
            interp_set_f(&a->out[2 * n + i], k, hn);
        }
    }
    return IR_OK;
}

IrStatus interp_MOMENTUM(KernelArgs *a) {
    uint32_t n;
    double r;
    int64_t t;
    IrStatus s = opt_prologue(a, 3, &n, &r, &t);
    if (s) return s;
    double alpha = interp_attr_float(a, "alpha"), beta = interp_attr_float(a, "beta");
    double norm = interp_attr_float(a, "norm_coefficient");
    const char *mode = interp_attr_string(a, "mode");
    bool nesterov = mode && strcmp(mode, "nesterov") == 0;
    if (!mode || (!nesterov && strcmp(mode, "standard") != 0))
        return interp_error(a, "mode must be 'standard' or 'nesterov'");
    double b = t > 0 ? beta : 1;
    for (uint32_t i = 0; i < n; i++) {
        const IrTensor *x = a->in[2 + i], *g = a->in[2 + n + i], *v = a->in[2 + 2 * n + i];
        if ((s = alloc_like(a, i, x)) || (s = alloc_like(a, n + i, v))) return s;
        for (int64_t k = 0; k < ir_tensor_numel(x); k++) {
            double xv = interp_get_f(x, k), gr = norm * xv + interp_get_f(g, k);
            double vn = alpha * interp_get_f(v, k) + b * gr;
            interp_set_f(&a->out[n + i], k, vn);
            interp_set_f(&a->out[i], k, nesterov ? xv - r * (gr + alpha * vn) : xv - r * vn);
        }
    }
    return IR_OK;
}

/* ---- Gradient ------------------------------------------------------------------------------- */

typedef struct Grad {
    KernelArgs *a;
    const IrGraph *g;
    uint32_t nv;
    IrTensor *val;  /* forward values by value id */
    bool *have;     /* val[v] bound */
    bool *leaf;     /* xs, zs or graph constant */
    double **grad;  /* dy/dv by value id (NULL: zero) */
    IrNodeId *order; /* nodes from the leaves to y, topological */
    uint32_t n_order;
    uint8_t *mark;  /* per node: 1 visiting, 2 done */
} Grad;

static bool differentiable(IrOp op) {
    switch (op) {
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: case IR_OP_NEG: case IR_OP_IDENTITY:
    case IR_OP_RELU: case IR_OP_SIGMOID: case IR_OP_TANH: case IR_OP_EXP: case IR_OP_LOG: case IR_OP_SUM:
    case IR_OP_MAT_MUL: return true;
    default: return false;
    }
}

/* The gradient buffer of v (zeroed on first use). */
static double *grad_of(Grad *G, IrValueId v) {
    if (!G->grad[v]) G->grad[v] = calloc((size_t)ir_tensor_numel(&G->val[v]) + 1, sizeof(double));
    return G->grad[v];
}

/* Steps of the forward order: a node, or the two ends of a fused group's body. */
#define STEP_NODE 0u
#define STEP_BIND_ARGS (1u << 30)    /* body arguments = the group's operands */
#define STEP_BIND_RESULTS (2u << 30) /* the group's results = the body's outputs */
#define STEP_KIND(e) ((e) & (3u << 30))
#define STEP_ID(e) ((e) & ~(3u << 30))

/* Depth-first from v towards the leaves, appending producer nodes in post-order (a fused
 * group as bind-arguments, its body nodes, bind-results). */
static IrStatus collect(Grad *G, IrValueId v, uint32_t depth) {
    const IrGraph *g = G->g;
    if (G->leaf[v]) return IR_OK;
    IrNodeId n = ir_value_kind(g, v) == IR_VALUE_RESULT ? ir_value_def_node(g, v) : 0;
    if (!n)
        return interp_error(G->a, "y depends on %%%s, which is neither in xs nor in zs nor a constant", ir_value_name(g, v));
    if (G->mark[n] == 2) return IR_OK;
    if (G->mark[n] == 1 || depth > 100000) return interp_error(G->a, "cycle through %%%s", ir_value_name(g, v));
    bool fused = ir_node_op(g, n) == IR_OP_FUSED;
    if (ir_node_num_regions(g, n) && !fused)
        return interp_error(G->a, "cannot differentiate through %s (a node with regions)", ir_op_name(ir_node_op(g, n)));
    G->mark[n] = 1;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId o = ir_node_operand(g, n, i);
        if (!o) continue;
        IrStatus s = collect(G, o, depth + 1);
        if (s) return s;
    }
    G->mark[n] = 2;
    if (!fused) {
        G->order[G->n_order++] = STEP_NODE | n;
        return IR_OK;
    }
    IrRegionId body = ir_node_region_at(g, n, 0);
    if (ir_region_num_args(g, body) != ir_node_num_operands(g, n) ||
        ir_region_num_outputs(g, body) != ir_node_num_results(g, n))
        return interp_error(G->a, "fused group producing %%%s: body and node disagree", ir_value_name(g, v));
    G->order[G->n_order++] = STEP_BIND_ARGS | n;
    for (IrNodeId b = ir_region_first(g, body); b; b = ir_node_next(g, b)) {
        if (ir_node_num_regions(g, b))
            return interp_error(G->a, "cannot differentiate through %s (a node with regions)", ir_op_name(ir_node_op(g, b)));
        G->order[G->n_order++] = STEP_NODE | b;
    }
    G->order[G->n_order++] = STEP_BIND_RESULTS | n;
    return IR_OK;
}

/* val[dst] = a view of val[src]. */
static void bind_view(Grad *G, IrValueId dst, IrValueId src) {
    if (!dst || !src || !G->have[src]) return;
    const IrTensor *t = &G->val[src];
    if (G->have[dst]) ir_tensor_free(&G->val[dst]);
    ir_tensor_view(&G->val[dst], t->dtype, t->rank, t->dims, t->data);
    G->have[dst] = true;
}

/* grad[dst] += grad[src] (same shapes: a binding of a fused group). */
static IrStatus pass_grad(Grad *G, IrValueId dst, IrValueId src) {
    if (!dst || !src || !G->grad[src] || !G->have[dst]) return IR_OK;
    double *d = grad_of(G, dst);
    if (!d) return IR_ENOMEM;
    for (int64_t i = 0; i < ir_tensor_numel(&G->val[dst]); i++) d[i] += G->grad[src][i];
    return IR_OK;
}

/* Runs the collected nodes forward with the interpreter's kernels. */
static IrStatus forward(Grad *G) {
    const IrGraph *g = G->g;
    for (uint32_t k = 0; k < G->n_order; k++) {
        IrNodeId n = STEP_ID(G->order[k]);
        if (STEP_KIND(G->order[k]) != STEP_NODE) {
            IrRegionId body = ir_node_region_at(g, n, 0);
            bool args = STEP_KIND(G->order[k]) == STEP_BIND_ARGS;
            uint32_t cnt = args ? ir_node_num_operands(g, n) : ir_node_num_results(g, n);
            for (uint32_t i = 0; i < cnt; i++) {
                if (args) bind_view(G, ir_region_arg(g, body, i), ir_node_operand(g, n, i));
                else bind_view(G, ir_node_result(g, n, i), ir_region_output(g, body, i));
            }
            continue;
        }
        uint32_t ni = ir_node_num_operands(g, n), no = ir_node_num_results(g, n);
        const IrTensor **in = calloc(ni + 1, sizeof *in);
        IrTensor *out = calloc(no + 1, sizeof *out);
        if (!in || !out) {
            free(in);
            free(out);
            return IR_ENOMEM;
        }
        for (uint32_t i = 0; i < ni; i++) {
            IrValueId o = ir_node_operand(g, n, i);
            in[i] = o ? &G->val[o] : NULL;
        }
        IrStrBuf msg;
        ir_strbuf_init(&msg);
        IrDiag d;
        ir_diag_init(&d, ir_diag_buffer_fn, &msg);
        IrStatus s = ir_interp_eval_node(g, n, in, out, &d);
        if (s) interp_error(G->a, "forward pass: %s", msg.data ? msg.data : ir_status_name(s));
        ir_strbuf_free(&msg);
        for (uint32_t i = 0; i < no; i++) {
            IrValueId r = ir_node_result(g, n, i);
            if (!s && r) {
                G->val[r] = out[i];
                G->have[r] = true;
            } else {
                ir_tensor_free(&out[i]);
            }
        }
        free(in);
        free(out);
        if (s) return s;
    }
    return IR_OK;
}


/* Elementwise ops with broadcasting: walks the result's indices, maps each to its operands'
 * elements, and accumulates into the operands' gradients (which sums over broadcast dims). */
static IrStatus back_elementwise(Grad *G, IrNodeId n, const double *gy) {
    const IrGraph *g = G->g;
    IrOp op = ir_node_op(g, n);
    IrValueId yv = ir_node_result(g, n, 0);
    const IrTensor *y = &G->val[yv];
    uint32_t ni = ir_node_num_operands(g, n);
    if (ni > 64) return interp_error(G->a, "too many operands");
    const IrTensor *x[64];
    double *gx[64];
    for (uint32_t i = 0; i < ni; i++) {
        IrValueId o = ir_node_operand(g, n, i);
        x[i] = &G->val[o];
        gx[i] = grad_of(G, o);
        if (!gx[i]) return IR_ENOMEM;
    }
    int64_t idx[IR_MAX_RANK] = {0};
    for (int64_t e = 0; e < ir_tensor_numel(y); e++) {
        int64_t ia = ir_shape_broadcast_offset(x[0]->rank, x[0]->dims, y->rank, idx);
        int64_t ib = ni > 1 ? ir_shape_broadcast_offset(x[1]->rank, x[1]->dims, y->rank, idx) : 0;
        double d = gy[e], av = interp_get_f(x[0], ia), out = interp_get_f(y, e);
        double bv = ni > 1 ? interp_get_f(x[1], ib) : 0;
        switch (op) {
        case IR_OP_ADD: gx[0][ia] += d, gx[1][ib] += d; break;
        case IR_OP_SUB: gx[0][ia] += d, gx[1][ib] -= d; break;
        case IR_OP_MUL: gx[0][ia] += d * bv, gx[1][ib] += d * av; break;
        case IR_OP_DIV: gx[0][ia] += d / bv, gx[1][ib] -= d * av / (bv * bv); break;
        case IR_OP_SUM:
            for (uint32_t i = 0; i < ni; i++) gx[i][ir_shape_broadcast_offset(x[i]->rank, x[i]->dims, y->rank, idx)] += d;
            break;
        case IR_OP_NEG: gx[0][ia] -= d; break;
        case IR_OP_IDENTITY: gx[0][ia] += d; break;
        case IR_OP_RELU: gx[0][ia] += av > 0 ? d : 0; break;
        case IR_OP_SIGMOID: gx[0][ia] += d * out * (1 - out); break;
        case IR_OP_TANH: gx[0][ia] += d * (1 - out * out); break;
        case IR_OP_EXP: gx[0][ia] += d * out; break;
        case IR_OP_LOG: gx[0][ia] += d / av; break;
        default: return interp_error(G->a, "internal: %s is not elementwise here", ir_op_name(op));
        }
        ir_shape_index_next(y->rank, y->dims, idx);
    }
    return IR_OK;
}

/* MatMul: dA = dY . B^T, dB = A^T . dY, per batch (2-D, or equal batch dims). */
static IrStatus back_matmul(Grad *G, IrNodeId n, const double *gy) {
    const IrGraph *g = G->g;
    IrValueId av = ir_node_operand(g, n, 0), bv = ir_node_operand(g, n, 1);
    const IrTensor *A = &G->val[av], *B = &G->val[bv];
    bool ok = A->rank >= 2 && A->rank == B->rank;
    for (uint32_t d = 0; ok && d + 2 < A->rank; d++) ok = A->dims[d] == B->dims[d];
    if (!ok) return interp_error(G->a, "MatMul gradient needs 2-D operands or equal batch dims");
    int64_t M = A->dims[A->rank - 2], K = A->dims[A->rank - 1], N = B->dims[B->rank - 1];
    int64_t batch = ir_tensor_numel(A) / (M * K > 0 ? M * K : 1);
    double *ga = grad_of(G, av), *gb = grad_of(G, bv);
    if (!ga || !gb) return IR_ENOMEM;
    for (int64_t p = 0; p < batch; p++) {
        const double *dy = gy + p * M * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++) {
                double acc = 0;
                for (int64_t j = 0; j < N; j++) acc += dy[i * N + j] * interp_get_f(B, p * K * N + k * N + j);
                ga[p * M * K + i * K + k] += acc;
            }
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t i = 0; i < M; i++) acc += interp_get_f(A, p * M * K + i * K + k) * dy[i * N + j];
                gb[p * K * N + k * N + j] += acc;
            }
    }
    return IR_OK;
}

static IrStatus backward(Grad *G, IrValueId y) {
    double *gy = grad_of(G, y);
    if (!gy) return IR_ENOMEM;
    for (int64_t i = 0; i < ir_tensor_numel(&G->val[y]); i++) gy[i] = 1;
    for (uint32_t k = G->n_order; k-- > 0;) {
        IrNodeId n = STEP_ID(G->order[k]);
        if (STEP_KIND(G->order[k]) != STEP_NODE) { /* gradients cross a fused group's boundary */
            IrRegionId body = ir_node_region_at(G->g, n, 0);
            bool args = STEP_KIND(G->order[k]) == STEP_BIND_ARGS;
            uint32_t cnt = args ? ir_node_num_operands(G->g, n) : ir_node_num_results(G->g, n);
            for (uint32_t i = 0; i < cnt; i++) {
                IrStatus s = args ? pass_grad(G, ir_node_operand(G->g, n, i), ir_region_arg(G->g, body, i))
                                  : pass_grad(G, ir_region_output(G->g, body, i), ir_node_result(G->g, n, i));
                if (s) return s;
            }
            continue;
        }
        IrValueId r = ir_node_result(G->g, n, 0);
        if (!r || !G->grad[r]) continue; /* y does not depend on this node's result */
        IrOp op = ir_node_op(G->g, n);
        if (!differentiable(op))
            return interp_error(G->a, "cannot differentiate %s (node producing %%%s); supported: Add Sub Mul Div Neg "
                                      "Identity Relu Sigmoid Tanh Exp Log Sum MatMul",
                                ir_op_name(op), ir_value_name(G->g, r));
        IrStatus s = op == IR_OP_MAT_MUL ? back_matmul(G, n, G->grad[r]) : back_elementwise(G, n, G->grad[r]);
        if (s) return s;
    }
    return IR_OK;
}

static IrValueId find_value(Grad *G, IrStrId name, IrStatus *s) {
    const char *nm = ir_str(G->g, name);
    IrValueId v = ir_value_find(G->g, nm, strlen(nm));
    if (!v) *s = interp_error(G->a, "no value named '%s' in the graph", nm);
    return v;
}

static void grad_free(Grad *G) {
    for (uint32_t v = 0; G->val && v <= G->nv; v++) {
        if (G->have && G->have[v]) ir_tensor_free(&G->val[v]);
        if (G->grad) free(G->grad[v]);
    }
    free(G->val);
    free(G->have);
    free(G->leaf);
    free(G->grad);
    free(G->order);
    free(G->mark);
}

IrStatus interp_GRADIENT(KernelArgs *a) {
    const IrGraph *g = a->g;
    IrAttrValue xs, y, zs = {0};
    if (!ir_node_attr(g, a->node, "xs", &xs) || !ir_node_attr(g, a->node, "y", &y))
        return interp_error(a, "needs the xs and y attributes");
    ir_node_attr(g, a->node, "zs", &zs);
    if (a->n_in != xs.count + zs.count) return interp_error(a, "needs one input per entry of xs and zs");
    Grad G = {.a = a, .g = g, .nv = ir_graph_num_values(g)};
    uint32_t cap = ir_graph_node_capacity(g) + 1;
    G.val = calloc(G.nv + 1, sizeof *G.val);
    G.have = calloc(G.nv + 1, sizeof *G.have);
    G.leaf = calloc(G.nv + 1, sizeof *G.leaf);
    G.grad = calloc(G.nv + 1, sizeof *G.grad);
    G.order = calloc(3 * (size_t)cap, sizeof *G.order);
    G.mark = calloc(cap, 1);
    IrStatus s = G.val && G.have && G.leaf && G.grad && G.order && G.mark ? IR_OK : IR_ENOMEM;
    IrValueId yv = s ? 0 : find_value(&G, y.s, &s);
    IrValueId *leaves = calloc(a->n_in + 1, sizeof *leaves);
    if (!leaves && !s) s = IR_ENOMEM;
    /* leaves: the inputs given for xs and zs, then the graph's constants */
    for (uint32_t i = 0; i < a->n_in && !s; i++) {
        IrValueId v = find_value(&G, i < xs.count ? xs.strs[i] : zs.strs[i - xs.count], &s);
        if (s) break;
        if (!a->in[i]) {
            s = interp_error(a, "input %u is missing", i);
            break;
        }
        leaves[i] = v;
        G.leaf[v] = true;
        if (G.have[v]) ir_tensor_free(&G.val[v]);
        ir_tensor_view(&G.val[v], a->in[i]->dtype, a->in[i]->rank, a->in[i]->dims, a->in[i]->data);
        G.have[v] = true;
    }
    for (uint32_t i = 0; i < ir_graph_num_const_values(g) && !s; i++) {
        IrValueId v = ir_graph_const_value(g, i);
        if (G.leaf[v]) continue;
        G.leaf[v] = true;
        s = ir_tensor_from_const(&G.val[v], g, ir_value_const(g, v));
        if (s) s = interp_error(a, "constant %%%s is unusable", ir_value_name(g, v));
        else G.have[v] = true;
    }
    if (!s) s = collect(&G, yv, 0);
    if (!s) s = forward(&G);
    if (!s && !ir_dtype_is_float(G.val[yv].dtype)) s = interp_error(a, "y must be a float tensor");
    if (!s) s = backward(&G, yv);
    for (uint32_t i = 0; i < xs.count && !s; i++) {
        const IrTensor *x = a->in[i];
        s = interp_alloc_output(a, i, x->dtype, x->rank, x->dims);
        const double *gx = G.grad[leaves[i]];
        for (int64_t k = 0; !s && gx && k < ir_tensor_numel(x); k++) interp_set_f(&a->out[i], k, gx[k]);
    }
    free(leaves);
    grad_free(&G);
    return s;
}

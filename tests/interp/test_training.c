/* ai.onnx.preview.training in the interpreter: Gradient checked against central finite
 * differences of the same graph (broadcasting, MatMul, the unary ops, shared operands), its
 * errors (an op it cannot differentiate, a value it cannot reach), and Adagrad, Adam and
 * Momentum (standard and Nesterov) against values computed by hand from the ONNX formulas.
 */
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static IrGraph *parse_ok(const char *text, TuDiag *d) {
    IrGraph *g = tu_parse(text, "t.ir", d);
    cr_assert(g, "%s", tu_diag_text(d));
    cr_assert_eq(ir_verify(g, &d->diag), IR_OK, "%s", tu_diag_text(d));
    return g;
}

static IrTensor f64_tensor(uint32_t rank, const int64_t *dims, const double *v) {
    IrTensor t;
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F64, rank, dims), IR_OK);
    memcpy(t.data, v, ir_tensor_nbytes(&t));
    return t;
}

/* sum(y) of the graph's first output for the given inputs. */
static double sum_y(const IrGraph *g, IrTensor *in, uint32_t n_in, TuDiag *d) {
    uint32_t n_out = ir_graph_num_outputs(g);
    IrTensor outs[8];
    cr_assert_eq(ir_interp_run(g, in, n_in, outs, NULL, &d->diag), IR_OK, "%s", tu_diag_text(d));
    double s = 0;
    for (int64_t i = 0; i < ir_tensor_numel(&outs[0]); i++) s += ((const double *)outs[0].data)[i];
    for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outs[i]);
    return s;
}

/* Runs the graph (output 0 = y, outputs 1.. = Gradient of y w.r.t. inputs 0..n_in-1) and
 * compares each gradient with central differences of sum(y). */
static void check_gradient(const char *text, IrTensor *in, uint32_t n_in) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = parse_ok(text, &d);
    uint32_t n_out = ir_graph_num_outputs(g);
    cr_assert_eq(n_out, n_in + 1);
    IrTensor outs[8];
    cr_assert_eq(ir_interp_run(g, in, n_in, outs, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    const double h = 1e-6;
    for (uint32_t k = 0; k < n_in; k++) {
        double *x = in[k].data;
        const double *grad = outs[1 + k].data;
        cr_assert_eq(ir_tensor_numel(&outs[1 + k]), ir_tensor_numel(&in[k]));
        for (int64_t i = 0; i < ir_tensor_numel(&in[k]); i++) {
            double keep = x[i];
            x[i] = keep + h;
            double up = sum_y(g, in, n_in, &d);
            x[i] = keep - h;
            double down = sum_y(g, in, n_in, &d);
            x[i] = keep;
            double fd = (up - down) / (2 * h);
            cr_assert(fabs(fd - grad[i]) <= 1e-5 * (1 + fabs(fd)), "d/dx%u[%lld]: finite difference %.9g, Gradient %.9g",
                      k, (long long)i, fd, grad[i]);
        }
    }
    for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outs[i]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(gradient, broadcasting_arithmetic_matches_finite_differences) {
    int64_t da[2] = {2, 3}, db[1] = {3};
    double va[6] = {0.5, -1.25, 2.0, 0.75, 1.5, -0.5}, vb[3] = {1.5, -2.0, 0.25};
    IrTensor in[2] = {f64_tensor(2, da, va), f64_tensor(1, db, vb)};
    check_gradient("graph @g(%a: f64[2, 3], %b: f64[3]) {\n"
                   "  %m = Mul(%a, %b) : f64[2, 3]\n"
                   "  %q = Div(%m, %b) : f64[2, 3]\n"
                   "  %s = Sub(%q, %b) : f64[2, 3]\n"
                   "  %n = Neg(%s) : f64[2, 3]\n"
                   "  %y = Sum(%n, %m, %b) : f64[2, 3]\n"
                   "  %da, %db = ai.onnx.preview.training.Gradient(%a, %b) {xs = [\"a\", \"b\"], y = \"y\"} : f64[2, 3], f64[3]\n"
                   "  return %y, %da, %db\n}\n",
                   in, 2);
    ir_tensor_free(&in[0]), ir_tensor_free(&in[1]);
}

Test(gradient, unary_ops_and_matmul_match_finite_differences) {
    int64_t dx[2] = {2, 3}, dw[2] = {3, 2};
    double vx[6] = {0.3, -0.7, 1.1, 0.9, -0.2, 0.4}, vw[6] = {0.5, -0.3, 0.8, 0.1, -0.6, 0.7};
    IrTensor in[2] = {f64_tensor(2, dx, vx), f64_tensor(2, dw, vw)};
    check_gradient("graph @g(%x: f64[2, 3], %w: f64[3, 2]) {\n"
                   "  %h = MatMul(%x, %w) : f64[2, 2]\n"
                   "  %t = Tanh(%h) : f64[2, 2]\n"
                   "  %s = Sigmoid(%h) : f64[2, 2]\n"
                   "  %r = Relu(%h) : f64[2, 2]\n"
                   "  %e = Exp(%t) : f64[2, 2]\n"
                   "  %l = Log(%e) : f64[2, 2]\n"
                   "  %p = Add(%l, %s) : f64[2, 2]\n"
                   "  %i = Identity(%r) : f64[2, 2]\n"
                   "  %y = Mul(%p, %i) : f64[2, 2]\n"
                   "  %dx, %dw = ai.onnx.preview.training.Gradient(%x, %w) {xs = [\"x\", \"w\"], y = \"y\"} : f64[2, 3], f64[3, 2]\n"
                   "  return %y, %dx, %dw\n}\n",
                   in, 2);
    ir_tensor_free(&in[0]), ir_tensor_free(&in[1]);
}

Test(gradient, zs_and_constants_are_not_differentiated) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = parse_ok("graph @g(%a: f32[2], %b: f32[2]) {\n"
                          "  const %k: f32[2] = [2, 3]\n"
                          "  %m = Mul(%a, %b) : f32[2]\n"
                          "  %y = Mul(%m, %k) : f32[2]\n"
                          "  %da = ai.onnx.preview.training.Gradient(%a, %b) {xs = [\"a\"], y = \"y\", zs = [\"b\"]} : f32[2]\n"
                          "  return %da\n}\n",
                          &d);
    int64_t two = 2;
    float va[2] = {1, 2}, vb[2] = {5, 7};
    IrTensor in[2], out;
    cr_assert_eq(ir_tensor_alloc(&in[0], IR_DTYPE_F32, 1, &two), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&in[1], IR_DTYPE_F32, 1, &two), IR_OK);
    memcpy(in[0].data, va, sizeof va), memcpy(in[1].data, vb, sizeof vb);
    cr_assert_eq(ir_interp_run(g, in, 2, &out, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    const float *da = out.data;
    cr_assert_eq(da[0], 10.0f, "b * k");
    cr_assert_eq(da[1], 21.0f);
    ir_tensor_free(&out), ir_tensor_free(&in[0]), ir_tensor_free(&in[1]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(gradient, errors_name_the_op_and_the_value) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = parse_ok("graph @g(%a: f32[2]) {\n"
                          "  %s = Sin(%a) : f32[2]\n"
                          "  %da = ai.onnx.preview.training.Gradient(%a) {xs = [\"a\"], y = \"s\"} : f32[2]\n"
                          "  return %da\n}\n",
                          &d);
    int64_t two = 2;
    IrTensor in, out;
    cr_assert_eq(ir_tensor_alloc(&in, IR_DTYPE_F32, 1, &two), IR_OK);
    cr_assert_neq(ir_interp_run(g, &in, 1, &out, NULL, &d.diag), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "cannot differentiate Sin (node producing %s)"), "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
    tu_diag_init(&d);
    g = parse_ok("graph @g(%a: f32[2], %b: f32[2]) {\n"
                 "  %y = Add(%a, %b) : f32[2]\n"
                 "  %da = ai.onnx.preview.training.Gradient(%a) {xs = [\"a\"], y = \"y\"} : f32[2]\n"
                 "  return %da\n}\n",
                 &d);
    IrTensor ins[2] = {in, in};
    cr_assert_neq(ir_interp_run(g, ins, 2, &out, NULL, &d.diag), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "y depends on %b, which is neither in xs nor in zs nor a constant"), "%s",
              tu_diag_text(&d));
    ir_tensor_free(&in);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* Runs one optimizer node on scalars-and-vectors given as text; returns outputs as doubles. */
static void run_opt(const char *text, double *got, uint32_t n_got) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = parse_ok(text, &d);
    uint32_t n_out = ir_graph_num_outputs(g);
    IrTensor outs[8];
    cr_assert_eq(ir_interp_run(g, NULL, 0, outs, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    uint32_t k = 0;
    for (uint32_t i = 0; i < n_out; i++) {
        for (int64_t j = 0; j < ir_tensor_numel(&outs[i]) && k < n_got; j++) got[k++] = ((const double *)outs[i].data)[j];
        ir_tensor_free(&outs[i]);
    }
    cr_assert_eq(k, n_got);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* Attributes are f32, as in ONNX: hand computations use their f32 values. */
#define F(v) ((double)(float)(v))

static void assert_close(const double *got, const double *want, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        cr_assert(fabs(got[i] - want[i]) <= 1e-12 * (1 + fabs(want[i])), "value %u: got %.17g, want %.17g", i, got[i],
                  want[i]);
}

Test(optimizers, adagrad_by_hand) {
    /* r = 0.1 / (1 + 3 * 0.1) ; g' = 0.01 * 1 + (-1) = -0.99 ; h' = 2 + 0.9801 ; x' = 1 - r g' / (sqrt(h') + 1e-3) */
    double got[2];
    run_opt("graph @o() {\n  const %r: f64[] = [0.1]\n  const %t: i64[] = [3]\n  const %x: f64[1] = [1]\n"
            "  const %g: f64[1] = [-1]\n  const %h: f64[1] = [2]\n"
            "  %x2, %h2 = ai.onnx.preview.training.Adagrad(%r, %t, %x, %g, %h) {decay_factor = 0.1, epsilon = 0.001, "
            "norm_coefficient = 0.01} : f64[1], f64[1]\n  return %x2, %h2\n}\n",
            got, 2);
    double r = 0.1 / (1 + 3 * F(0.1)), gr = F(0.01) - 1, h = 2 + gr * gr;
    double want[2] = {1 - r * gr / (sqrt(h) + F(1e-3)), h};
    assert_close(got, want, 2);
}

Test(optimizers, adam_by_hand) {
    double got[3];
    run_opt("graph @o() {\n  const %r: f64[] = [0.1]\n  const %t: i64[] = [2]\n  const %x: f64[1] = [1.5]\n"
            "  const %g: f64[1] = [-0.5]\n  const %v: f64[1] = [0.25]\n  const %h: f64[1] = [0.125]\n"
            "  %x2, %v2, %h2 = ai.onnx.preview.training.Adam(%r, %t, %x, %g, %v, %h) {alpha = 0.9, beta = 0.8, "
            "epsilon = 0.01, norm_coefficient = 0.02, norm_coefficient_post = 0.05} : f64[1], f64[1], f64[1]\n"
            "  return %x2, %v2, %h2\n}\n",
            got, 3);
    double a = F(0.9), b = F(0.8);
    double gr = F(0.02) * 1.5 - 0.5, v = a * 0.25 + (1 - a) * gr, h = b * 0.125 + (1 - b) * gr * gr;
    double r = 0.1 * sqrt(1 - b * b) / (1 - a * a);
    double x = 1.5 - r * v / (sqrt(h) + F(0.01));
    double want[3] = {(1 - F(0.05)) * x, v, h};
    assert_close(got, want, 3);
}

Test(optimizers, momentum_standard_and_nesterov_by_hand) {
    const char *fmt = "graph @o() {\n  const %%r: f64[] = [0.1]\n  const %%t: i64[] = [%d]\n  const %%x: f64[2] = [1, 2]\n"
                      "  const %%g: f64[2] = [-1, 0.5]\n  const %%v: f64[2] = [0.5, -0.25]\n"
                      "  %%x2, %%v2 = ai.onnx.preview.training.Momentum(%%r, %%t, %%x, %%g, %%v) {alpha = 0.9, beta = 0.7, "
                      "mode = \"%s\", norm_coefficient = 0.01} : f64[2], f64[2]\n  return %%x2, %%v2\n}\n";
    char text[1024];
    double xs[2] = {1, 2}, gs[2] = {-1, 0.5}, vs[2] = {0.5, -0.25};
    for (int nesterov = 0; nesterov < 2; nesterov++)
        for (int t = 0; t < 2; t++) { /* T = 0: beta is taken as 1 */
            snprintf(text, sizeof text, fmt, t, nesterov ? "nesterov" : "standard");
            double got[4], want[4];
            run_opt(text, got, 4);
            for (int i = 0; i < 2; i++) {
                double gr = F(0.01) * xs[i] + gs[i], v = F(0.9) * vs[i] + (t ? F(0.7) : 1.0) * gr;
                want[i] = nesterov ? xs[i] - 0.1 * (gr + F(0.9) * v) : xs[i] - 0.1 * v;
                want[2 + i] = v;
            }
            assert_close(got, want, 4);
        }
}

Test(optimizers, list_lengths_are_checked) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse("graph @o(%r: f32[], %t: i64[], %x: f32[1], %g: f32[1]) {\n"
                          "  %x2, %h2 = ai.onnx.preview.training.Adagrad(%r, %t, %x, %g, %g, %g) : f32[1], f32[1]\n"
                          "  return %x2\n}\n",
                          "o.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_neq(ir_verify(g, &d.diag), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "takes R, T and 3 lists of equal length; got 6 inputs"), "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(gradient, through_a_fused_group_as_before_fusion) {
    int64_t two = 2;
    double va[2] = {0.5, -1.5}, vb[2] = {2.0, 0.25};
    IrTensor in[2] = {f64_tensor(1, &two, va), f64_tensor(1, &two, vb)};
    check_gradient("graph @g(%a: f64[2], %b: f64[2]) {\n"
                   "  %d = irtool.fused(%a, %b) {kind = \"elementwise\"} : f64[2] {\n"
                   "    body(%a.arg: f64[2], %b.arg: f64[2]) {\n"
                   "      %c = Add(%a.arg, %b.arg) : f64[2]\n"
                   "      %e = Tanh(%c) : f64[2]\n"
                   "      %d.inner = Mul(%e, %a.arg) : f64[2]\n"
                   "      return %d.inner\n"
                   "    }\n"
                   "  }\n"
                   "  %da, %db = ai.onnx.preview.training.Gradient(%a, %b) {xs = [\"a\", \"b\"], y = \"d\"} : f64[2], f64[2]\n"
                   "  return %d, %da, %db\n}\n",
                   in, 2);
    ir_tensor_free(&in[0]), ir_tensor_free(&in[1]);
}

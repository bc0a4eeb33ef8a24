/* The LLVM backend's op emitters of backend/cpu against the reference interpreter:
 * elementwise ops on every dtype (integers, bool, f64, f16, bf16), activations and libm
 * functions, comparisons and logic, Cast, integer division that must not trap, data movement
 * (Expand, Tile, Split, Pad, Trilu, GatherElements, CumSum, ArgMax/ArgMin), LRN,
 * InstanceNormalization, every reduction, and N-d Conv, pools and ConvTranspose. Floats within
 * rtol 1e-4, atol 1e-5 (f16/bf16 within one unit in the last place), integers exactly. */
#include "backend/backend.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 32

static void fill(IrTensor *t, uint64_t seed) {
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (seed * 0x100000001B3ull);
    for (int64_t i = 0; i < ir_tensor_numel(t); i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(x >> 40) / (double)(1ull << 24);
        double v;
        if (t->dtype == IR_DTYPE_BOOL) v = u < 0.5;
        else if (ir_dtype_is_float(t->dtype)) v = 6.0 * u - 3.0;
        else if (ir_dtype_is_signed(t->dtype)) v = floor(41.0 * u) - 20.0;
        else v = floor(41.0 * u);
        ir_elem_set_f64(t->dtype, t->data, (size_t)i, v);
    }
}

static int64_t count_bad(const IrTensor *got, const IrTensor *want, double *worst) {
    int64_t bad = 0;
    bool low = want->dtype == IR_DTYPE_F16 || want->dtype == IR_DTYPE_BF16;
    double rtol = want->dtype == IR_DTYPE_BF16 ? 8e-3 : low ? 1e-3 : 1e-4;
    for (int64_t i = 0; i < ir_tensor_numel(want); i++) {
        if (!ir_dtype_is_float(want->dtype)) {
            if (ir_elem_get_i64(got->dtype, got->data, (size_t)i) != ir_elem_get_i64(want->dtype, want->data, (size_t)i))
                bad++, *worst = INFINITY;
            continue;
        }
        double a = ir_elem_get_f64(got->dtype, got->data, (size_t)i), b = ir_elem_get_f64(want->dtype, want->data, (size_t)i);
        if (isnan(a) && isnan(b)) continue;
        if (a == b) continue; /* infinities */
        double e = fabs(a - b);
        if (e > *worst || isnan(e)) *worst = e;
        if (!(e <= 1e-5 + rtol * fabs(b))) bad++;
    }
    return bad;
}

/* Interpreter and backend on deterministic inputs; the backend's status (errors in d). */
static IrStatus check_text(const char *text, TuDiag *d) {
    IrGraph *g = tu_parse(text, "t.ir", d);
    cr_assert(g, "%s", tu_diag_text(d));
    cr_assert_eq(ir_verify(g, &d->diag), IR_OK, "%s", tu_diag_text(d));
    uint32_t n_in = ir_graph_num_inputs(g), n_out = ir_graph_num_outputs(g);
    cr_assert(n_in <= MAX_IO && n_out <= MAX_IO);
    IrTensor ins[MAX_IO] = {{0}}, ref[MAX_IO] = {{0}}, out[MAX_IO] = {{0}};
    for (uint32_t i = 0; i < n_in; i++) {
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        int64_t dims[IR_MAX_RANK];
        uint32_t r = ir_type_rank(g, t);
        for (uint32_t k = 0; k < r; k++) cr_assert(ir_expr_is_const(g, ir_type_dims(g, t)[k], &dims[k]));
        cr_assert_eq(ir_tensor_alloc(&ins[i], ir_type_dtype(g, t), r, dims), IR_OK);
        fill(&ins[i], i + 1);
    }
    cr_assert_eq(ir_interp_run(g, ins, n_in, ref, NULL, &d->diag), IR_OK, "interp: %s", tu_diag_text(d));
    IrStatus s = llvm_specialize_inputs(g, ins, n_in, &d->diag);
    IrLlvmProgram *p = NULL;
    if (!s) s = llvm_program_create(g, &d->diag, &p);
    if (!s) {
        cr_assert_eq(llvm_program_run(p, ins, n_in, out, &d->diag), IR_OK, "%s", tu_diag_text(d));
        for (uint32_t i = 0; i < n_out; i++) {
            cr_assert_eq(out[i].dtype, ref[i].dtype, "output %u dtype", i);
            cr_assert_eq(out[i].rank, ref[i].rank, "output %u rank", i);
            for (uint32_t k = 0; k < ref[i].rank; k++) cr_assert_eq(out[i].dims[k], ref[i].dims[k]);
            double worst = 0;
            int64_t bad = count_bad(&out[i], &ref[i], &worst);
            cr_expect_eq(bad, 0, "output %u (%s): %lld elements differ (worst %g)", i,
                         ir_value_name(g, ir_graph_output(g, i)), (long long)bad, worst);
            ir_tensor_free(&out[i]);
        }
    }
    llvm_program_destroy(p);
    for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&ref[i]);
    for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&ins[i]);
    ir_graph_destroy(g);
    return s;
}

#define CHECK_OK(text) TU_CHECK_TEXT_OK(check_text, text)

Test(backend_typed, integers) {
    CHECK_OK("graph @t(%a: i32[3, 4], %b: i32[4], %c: i64[3, 1], %u: u8[3, 4], %s: u8[4]) {\n"
             "  %add = Add(%a, %b) : i32[3, 4]\n  %sub = Sub(%a, %b) : i32[3, 4]\n  %mul = Mul(%add, %sub) : i32[3, 4]\n"
             "  %neg = Neg(%a) : i32[3, 4]\n  %abs = Abs(%a) : i32[3, 4]\n  %sg = Sign(%a) : i32[3, 4]\n"
             "  %mx = Max(%a, %b) : i32[3, 4]\n  %mn = Min(%c, %c) : i64[3, 1]\n"
             "  %eq = Equal(%a, %b) : bool[3, 4]\n  %gt = Greater(%u, %s) : bool[3, 4]\n  %le = LessOrEqual(%a, %b) : bool[3, 4]\n"
             "  %sh = BitShift(%u, %s) {direction = \"LEFT\"} : u8[3, 4]\n  %shr = BitShift(%u, %s) {direction = \"RIGHT\"} : u8[3, 4]\n"
             "  %band = BitwiseAnd(%a, %b) : i32[3, 4]\n  %bnot = BitwiseNot(%u) : u8[3, 4]\n"
             "  %w = Where(%gt, %a, %neg) : i32[3, 4]\n  %cf = Cast(%c) {to = f32} : f32[3, 1]\n"
             "  %ci = Cast(%a) {to = u8} : u8[3, 4]\n  %cb = Cast(%a) {to = bool} : bool[3, 4]\n"
             "  %rm = ReduceMax(%u) {keepdims = 1} : u8[1, 1]\n"
             "  return %rm, %mul, %neg, %abs, %sg, %mx, %mn, %eq, %le, %sh, %shr, %band, %bnot, %w, %cf, %ci, %cb\n}\n");
    CHECK_OK("graph @t(%a: i32[3, 4]) {\n  const %c0: i32[] = [-5]\n  const %c1: i32[] = [7]\n"
             "  %cl = Clip(%a, %c0, %c1) : i32[3, 4]\n"
             "  const %one: i64[1] = [1]\n  %rs = ReduceSum(%a, %one) {keepdims = 0} : i32[3]\n  %rp = ReduceProd(%cl) {axes = [0], keepdims = 0} : i32[4]\n"
             "  %am = ArgMax(%a) {axis = 1} : i64[3, 1]\n  %an = ArgMin(%a) {axis = 0, keepdims = 0, select_last_index = 1} : i64[4]\n"
             "  return %cl, %rs, %rp, %am, %an\n}\n");
}

/* Division and remainder by zero and by -1 never trap (the interpreter refuses zero divisors,
 * so only -1 and ordinary divisors are compared here). */
Test(backend_typed, integer_division_and_mod) {
    CHECK_OK("graph @t(%a: i32[2, 4], %b: i64[2, 4]) {\n"
             "  const %d: i32[4] = [3, -1, 7, -4]\n  const %e: i64[4] = [2, -3, -1, 5]\n"
             "  %q = Div(%a, %d) : i32[2, 4]\n  %m = Mod(%a, %d) : i32[2, 4]\n  %f = Mod(%b, %e) {fmod = 1} : i64[2, 4]\n"
             "  %p = Pow(%a, %e) : i32[2, 4]\n  return %q, %m, %f, %p\n}\n");
}

Test(backend_typed, float_dtypes) {
    CHECK_OK("graph @t(%a: f64[3, 5], %b: f64[5], %h: f16[3, 5], %k: f16[5], %x: f32[3, 5]) {\n"
             "  %s = Add(%a, %b) : f64[3, 5]\n  %e = Exp(%s) : f64[3, 5]\n  %t = Tanh(%a) : f64[3, 5]\n"
             "  %sp = Softplus(%a) : f64[3, 5]\n  %r = Relu(%a) : f64[3, 5]\n  %mx = Max(%a, %b) : f64[3, 5]\n"
             "  %hs = Add(%h, %k) : f16[3, 5]\n  %hm = Mul(%h, %k) : f16[3, 5]\n  %hg = Sigmoid(%h) : f16[3, 5]\n"
             "  %hf = Cast(%h) {to = f32} : f32[3, 5]\n  %xh = Cast(%x) {to = f16} : f16[3, 5]\n"
             "  %xb = Cast(%x) {to = bf16} : bf16[3, 5]\n  %bs = Add(%xb, %xb) : bf16[3, 5]\n  %bf = Cast(%bs) {to = f64} : f64[3, 5]\n"
             "  %xi = Cast(%x) {to = i32} : i32[3, 5]\n  %xd = Cast(%x) {to = f64} : f64[3, 5]\n"
             "  %rs = ReduceMean(%a) {axes = [1], keepdims = 0} : f64[3]\n  %sm = ReduceSum(%h) {keepdims = 0} : f16[]\n"
             "  return %e, %t, %sp, %r, %mx, %hs, %hm, %hg, %hf, %xh, %xb, %bf, %xi, %xd, %rs, %sm\n}\n");
}

Test(backend_typed, activations_and_libm) {
    CHECK_OK("graph @t(%x: f32[4, 6], %s: f32[6]) {\n"
             "  %a = Elu(%x) {alpha = 0.7} : f32[4, 6]\n  %b = Selu(%x) : f32[4, 6]\n  %c = HardSigmoid(%x) : f32[4, 6]\n"
             "  %d = HardSwish(%x) : f32[4, 6]\n  %e = Softsign(%x) : f32[4, 6]\n  %f = Softplus(%x) : f32[4, 6]\n"
             "  %g = Sin(%x) : f32[4, 6]\n  %h = Cos(%x) : f32[4, 6]\n  %i = Tan(%x) : f32[4, 6]\n  %j = Atan(%x) : f32[4, 6]\n"
             "  %k = Round(%x) : f32[4, 6]\n  %l = Mish(%x) : f32[4, 6]\n  %m = Gelu(%x) : f32[4, 6]\n"
             "  %mt = Gelu(%x) {approximate = \"tanh\"} : f32[4, 6]\n  %n = ThresholdedRelu(%x) {alpha = 0.5} : f32[4, 6]\n"
             "  %o = Shrink(%x) {lambd = 1.0, bias = 0.5} : f32[4, 6]\n  %p = PRelu(%x, %s) : f32[4, 6]\n"
             "  %q = Mod(%x, %s) {fmod = 1} : f32[4, 6]\n  %r = Celu(%x) {alpha = 2.0} : f32[4, 6]\n"
             "  %u = Sinh(%x) : f32[4, 6]\n  %v = Asinh(%x) : f32[4, 6]\n  %w = Sign(%x) : f32[4, 6]\n"
             "  return %a, %b, %c, %d, %e, %f, %g, %h, %i, %j, %k, %l, %m, %mt, %n, %o, %p, %q, %r, %u, %v, %w\n}\n");
}

Test(backend_typed, logic_and_tests) {
    CHECK_OK("graph @t(%p: bool[2, 3], %q: bool[3], %x: f32[2, 3]) {\n"
             "  const %z: f32[3] = [inf, nan, -inf]\n"
             "  %a = And(%p, %q) : bool[2, 3]\n  %o = Or(%p, %q) : bool[2, 3]\n  %x2 = Xor(%p, %q) : bool[2, 3]\n"
             "  %n = Not(%p) : bool[2, 3]\n  %y = Add(%x, %z) : f32[2, 3]\n  %in = IsNaN(%y) : bool[2, 3]\n"
             "  %ii = IsInf(%y) {detect_negative = 0} : bool[2, 3]\n  %eq = Equal(%p, %q) : bool[2, 3]\n"
             "  %lt = Less(%x, %y) : bool[2, 3]\n  %w = Where(%a, %x, %y) : f32[2, 3]\n"
             "  return %a, %o, %x2, %n, %in, %ii, %eq, %lt, %w\n}\n");
}

Test(backend_data, movement) {
    CHECK_OK("graph @t(%a: f32[2, 3, 4], %b: i64[3, 1]) {\n"
             "  const %ix: i64[2, 2, 4] = [0, 1, 2, -1, -3, 2, 1, 0, 2, 2, -2, 0, 1, -1, 0, 1]\n"
             "  const %sh: i64[3] = [2, 3, 5]\n  const %rep: i64[3] = [2, 1, 3]\n  const %sp: i64[2] = [1, 3]\n"
             "  const %pads: i64[6] = [0, 1, 2, 1, 0, 1]\n  const %pv: f32[] = [9.5]\n  const %k: i64[] = [1]\n"
             "  const %ax: i64[] = [2]\n  const %eb: i64[2] = [3, 2]\n"
             "  %e = Expand(%b, %eb) : i64[3, 2]\n  %t = Tile(%a, %rep) : f32[4, 3, 12]\n"
             "  %s1, %s2 = Split(%a, %sp) {axis = 2} : f32[2, 3, 1], f32[2, 3, 3]\n"
             "  %pc = Pad(%a, %pads, %pv) : f32[3, 4, 7]\n  %pr = Pad(%a, %pads) {mode = \"reflect\"} : f32[3, 4, 7]\n"
             "  %pe = Pad(%a, %pads) {mode = \"edge\"} : f32[3, 4, 7]\n  %pw = Pad(%a, %pads) {mode = \"wrap\"} : f32[3, 4, 7]\n"
             "  %tu = Trilu(%a, %k) : f32[2, 3, 4]\n  %tl = Trilu(%a) {upper = 0} : f32[2, 3, 4]\n"
             "  %ge = GatherElements(%a, %ix) {axis = 1} : f32[2, 2, 4]\n"
             "  %cs = CumSum(%a, %ax) : f32[2, 3, 4]\n  %cr = CumSum(%a, %ax) {exclusive = 1, reverse = 1} : f32[2, 3, 4]\n"
             "  %am = ArgMax(%a) {axis = -1, keepdims = 0} : i64[2, 3]\n"
             "  return %e, %t, %s1, %s2, %pc, %pr, %pe, %pw, %tu, %tl, %ge, %cs, %cr, %am\n}\n");
}

Test(backend_data, scatter_one_hot_eye_like) {
    CHECK_OK("graph @t(%a: f32[3, 4], %u: f32[2, 4], %k: i32[2, 3], %x: f64[3, 5]) {\n"
             "  const %ix: i64[2, 4] = [0, 2, -1, 1, 2, 0, 1, -3]\n  const %depth: i64[] = [5]\n"
             "  const %vals: f32[2] = [-1.0, 3.0]\n"
             "  %s = ScatterElements(%a, %ix, %u) {axis = 0} : f32[3, 4]\n"
             "  %sa = ScatterElements(%a, %ix, %u) {axis = 0, reduction = \"add\"} : f32[3, 4]\n"
             "  %sm = ScatterElements(%a, %ix, %u) {axis = 0, reduction = \"max\"} : f32[3, 4]\n"
             "  const %five: i32[] = [5]\n  %km = Abs(%k) : i32[2, 3]\n  %kk = Mod(%km, %five) : i32[2, 3]\n"
             "  %o = OneHot(%kk, %depth, %vals) {axis = 1} : f32[2, 5, 3]\n"
             "  %e = EyeLike(%x) {k = 1} : f64[3, 5]\n  %ei = EyeLike(%x) {dtype = i32, k = -1} : i32[3, 5]\n"
             "  return %s, %sa, %sm, %o, %e, %ei\n}\n");
}

Test(backend_data, resize) {
    CHECK_OK("graph @t(%x: f32[1, 2, 4, 5]) {\n"
             "  const %sc: f32[4] = [1.0, 1.0, 0.6, 1.7]\n  const %up: f32[4] = [1.0, 1.0, 2.0, 2.0]\n"
             "  const %sz: i64[2] = [3, 7]\n  const %roi: f32[4] = [0.2, 0.1, 0.8, 0.9]\n"
             "  %n = Resize(%x, _, %sc) : f32[1, 2, 2, 8]\n"
             "  %l = Resize(%x, _, %sc) {mode = \"linear\"} : f32[1, 2, 2, 8]\n"
             "  %c = Resize(%x, _, %up) {mode = \"cubic\", coordinate_transformation_mode = \"align_corners\"} : f32[1, 2, 8, 10]\n"
             "  %a = Resize(%x, _, %sc) {mode = \"linear\", antialias = 1} : f32[1, 2, 2, 8]\n"
             "  %s = Resize(%x, _, _, %sz) {axes = [2, 3], nearest_mode = \"ceil\", coordinate_transformation_mode = \"asymmetric\"} : f32[1, 2, 3, 7]\n"
             "  %t = Resize(%x, %roi, _, %sz) {axes = [2, 3], mode = \"linear\", coordinate_transformation_mode = \"tf_crop_and_resize\", extrapolation_value = 5.0} : f32[1, 2, 3, 7]\n"
             "  return %n, %l, %c, %a, %s, %t\n}\n");
}

/* Runs the two-input graph text (x, then one f32 or i64 vector p) with p set to vals, compares
 * with the interpreter, or expects the run to fail with `fails` in its message. */
static void run_with_param(IrLlvmProgram *prog, IrGraph *g, IrTensor *in, const double *vals, const char *fails) {
    for (int64_t i = 0; i < ir_tensor_numel(&in[1]); i++) ir_elem_set_f64(in[1].dtype, in[1].data, (size_t)i, vals[i]);
    TuDiag rd;
    tu_diag_init(&rd);
    IrTensor out[4] = {{0}}, ref[4] = {{0}};
    IrStatus s = llvm_program_run(prog, in, 2, out, &rd.diag);
    uint32_t n_out = ir_graph_num_outputs(g);
    if (fails) {
        cr_assert_neq(s, IR_OK, "runs with %g", vals[0]);
        cr_assert(strstr(tu_diag_text(&rd), fails), "%s", tu_diag_text(&rd));
    } else {
        cr_assert_eq(s, IR_OK, "%s", tu_diag_text(&rd));
        cr_assert_eq(ir_interp_run(g, in, 2, ref, NULL, &rd.diag), IR_OK, "%s", tu_diag_text(&rd));
        for (uint32_t i = 0; i < n_out; i++) {
            double worst = 0;
            cr_expect_eq(count_bad(&out[i], &ref[i], &worst), 0, "output %u differs (worst %g)", i, worst);
            ir_tensor_free(&out[i]), ir_tensor_free(&ref[i]);
        }
    }
    tu_diag_free(&rd);
}

static IrLlvmProgram *compile_with_param(const char *text, IrGraph **g, IrTensor *in, IrDType pdt, int64_t pn) {
    TuDiag d;
    tu_diag_init(&d);
    *g = tu_parse(text, "t.ir", &d);
    cr_assert(*g, "%s", tu_diag_text(&d));
    IrTypeId t = ir_value_type(*g, ir_graph_input(*g, 0));
    int64_t dims[IR_MAX_RANK];
    for (uint32_t k = 0; k < ir_type_rank(*g, t); k++) cr_assert(ir_expr_is_const(*g, ir_type_dims(*g, t)[k], &dims[k]));
    cr_assert_eq(ir_tensor_alloc(&in[0], IR_DTYPE_F32, ir_type_rank(*g, t), dims), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&in[1], pdt, 1, &pn), IR_OK);
    fill(&in[0], 5);
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_specialize_inputs(*g, in, 2, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_create(*g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    return p;
}

/* Resize with scales, roi and sizes given at run time: taps computed per run (irt_resize_taps)
 * match the interpreter for every mode, antialias and exclude_outside included; scales whose
 * output size is not the compiled one, and other sizes, fail the run naming the node. */
Test(backend_data, resize_parameters_at_run_time) {
    IrGraph *g;
    IrTensor in[2] = {{0}};
    IrLlvmProgram *p = compile_with_param(
        "graph @t(%x: f32[1, 2, 6, 5], %s: f32[4]) {\n"
        "  %n = Resize(%x, _, %s) : f32[1, 2, 3, 8]\n"
        "  %l = Resize(%x, _, %s) {mode = \"linear\", antialias = 1} : f32[1, 2, 3, 8]\n"
        "  %c = Resize(%x, _, %s) {mode = \"cubic\", exclude_outside = 1, coordinate_transformation_mode = \"asymmetric\"} : f32[1, 2, 3, 8]\n"
        "  %a = Resize(%x, _, %s) {mode = \"cubic\", antialias = 1, coordinate_transformation_mode = \"half_pixel_symmetric\"} : f32[1, 2, 3, 8]\n"
        "  return %n, %l, %c, %a\n}\n",
        &g, in, IR_DTYPE_F32, 4);
    run_with_param(p, g, in, (double[]){1, 1, 0.5, 1.6}, NULL);
    run_with_param(p, g, in, (double[]){1, 1, 0.66, 1.79}, NULL); /* other scales, same sizes: other taps */
    run_with_param(p, g, in, (double[]){1, 1, 0.7, 1.6}, "Resize %n: the scales given at run time do not give the compiled output shape");
    run_with_param(p, g, in, (double[]){1, 1, -0.5, 1.6}, "do not give the compiled output shape");
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    for (int i = 0; i < 2; i++) ir_tensor_free(&in[i]);

    p = compile_with_param("graph @t(%x: f32[1, 1, 4, 5], %roi: f32[4]) {\n"
                           "  const %sz: i64[2] = [3, 7]\n"
                           "  %t = Resize(%x, %roi, _, %sz) {axes = [2, 3], mode = \"linear\", coordinate_transformation_mode = \"tf_crop_and_resize\", extrapolation_value = 5.0} : f32[1, 1, 3, 7]\n"
                           "  return %t\n}\n",
                           &g, in, IR_DTYPE_F32, 4);
    run_with_param(p, g, in, (double[]){0.2, 0.1, 0.8, 0.9}, NULL);
    run_with_param(p, g, in, (double[]){-0.3, 0.4, 1.2, 0.6}, NULL); /* partly outside: extrapolation_value */
    run_with_param(p, g, in, (double[]){NAN, 0.1, 1e30, 0.9}, NULL); /* NaN and huge: outside, never undefined */
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    for (int i = 0; i < 2; i++) ir_tensor_free(&in[i]);

    p = compile_with_param("graph @t(%x: f32[1, 1, 4, 5], %sz: i64[4]) {\n"
                           "  %y = Resize(%x, _, _, %sz) {mode = \"cubic\"} : f32[1, 1, 9, 2]\n  return %y\n}\n",
                           &g, in, IR_DTYPE_I64, 4);
    run_with_param(p, g, in, (double[]){1, 1, 9, 2}, NULL);
    run_with_param(p, g, in, (double[]){1, 1, 8, 2}, "Resize %y: the sizes given at run time do not give the compiled output shape");
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    for (int i = 0; i < 2; i++) ir_tensor_free(&in[i]);
}

Test(backend_data, norms_and_reductions) {
    CHECK_OK("graph @t(%x: f32[2, 5, 3, 3], %s: f32[5], %b: f32[5], %a: f32[3, 4, 5]) {\n"
             "  %l = LRN(%x) {size = 3, alpha = 0.001, beta = 0.75, bias = 1.5} : f32[2, 5, 3, 3]\n"
             "  %i = InstanceNormalization(%x, %s, %b) : f32[2, 5, 3, 3]\n"
             "  %p = ReduceProd(%a) {axes = [1]} : f32[3, 1, 5]\n  %l1 = ReduceL1(%a) {axes = [0, 2], keepdims = 0} : f32[4]\n"
             "  %l2 = ReduceL2(%a) {axes = [2]} : f32[3, 4, 1]\n  %ss = ReduceSumSquare(%a) {keepdims = 0} : f32[]\n"
             "  %ab = Abs(%a) : f32[3, 4, 5]\n  %ls = ReduceLogSum(%ab) {axes = [0, 2]} : f32[1, 4, 1]\n"
             "  %lse = ReduceLogSumExp(%a) {axes = [1]} : f32[3, 1, 5]\n  %gm = GlobalMaxPool(%x) : f32[2, 5, 1, 1]\n"
             "  %mv = MeanVarianceNormalization(%x) : f32[2, 5, 3, 3]\n"
             "  %mv1 = MeanVarianceNormalization(%a) {axes = [1]} : f32[3, 4, 5]\n"
             "  %hd = Cast(%a) {to = f64}\n  %mv2 = MeanVarianceNormalization(%hd) {axes = [0, 2]} : f64[3, 4, 5]\n"
             "  return %l, %i, %p, %l1, %l2, %ss, %ls, %lse, %gm, %mv, %mv1, %mv2\n}\n");
}

Test(backend_conv, nd_conv_pools_and_transpose) {
    CHECK_OK("graph @t(%x1: f32[2, 4, 11], %w1: f32[6, 2, 3], %b1: f32[6], %x3: f32[1, 2, 5, 6, 4], %w3: f32[3, 2, 2, 3, 2],\n"
             "          %x2: f32[1, 3, 7, 6], %w2: f32[4, 3, 3, 3], %wt: f32[3, 2, 3, 3], %bt: f32[2]) {\n"
             "  %c1 = Conv(%x1, %w1, %b1) {group = 2, pads = [2, 1], strides = [2], dilations = [2]} : f32[2, 6, 5]\n"
             "  %c3 = Conv(%x3, %w3) {pads = [1, 0, 1, 0, 1, 1]} : f32[1, 3, 5, 5, 5]\n"
             "  %cs = Conv(%x2, %w2) {auto_pad = \"SAME_UPPER\", strides = [2, 2]} : f32[1, 4, 4, 3]\n"
             "  %m1, %mi = MaxPool(%x1) {kernel_shape = [3], strides = [2], pads = [1, 1]} : f32[2, 4, 6], i64[2, 4, 6]\n"
             "  %a3 = AveragePool(%x3) {kernel_shape = [2, 2, 2], strides = [2, 2, 2], ceil_mode = 1} : f32[1, 2, 3, 3, 2]\n"
             "  %ap = AveragePool(%x2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2], count_include_pad = 1, ceil_mode = 1} : f32[1, 3, 4, 4]\n"
             "  %ct = ConvTranspose(%x2, %wt, %bt) {strides = [2, 2], pads = [1, 0, 1, 1], output_padding = [1, 1]} : f32[1, 2, 14, 13]\n"
             "  return %c1, %c3, %cs, %m1, %mi, %a3, %ap, %ct\n}\n");
}

/* RNN, GRU and LSTM through the runtime's irt_rnn: both directions, sequence lengths, initial
 * states, peepholes and clip; GRU reverse with linear_before_reset; RNN with a named activation
 * and its alpha. */
/* MaxPool on u8 and i8 (unsigned and signed order), with pads, strides and its Indices output. */
Test(backend_conv, max_pool_on_integers) {
    CHECK_OK("graph @t(%u: u8[1, 2, 5, 5], %s: i8[2, 1, 6]) {\n"
             "  %pu = MaxPool(%u) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]}\n"
             "  %ps, %pi = MaxPool(%s) {kernel_shape = [2], strides = [1]}\n"
             "  return %pu, %ps, %pi\n}\n");
}

Test(backend_rnn, lstm_gru_rnn) {
    CHECK_OK("graph @t(%x: f32[4, 2, 3], %w: f32[2, 20, 3], %r: f32[2, 20, 5], %b: f32[2, 40], %h0: f32[2, 2, 5],\n"
             "         %c0: f32[2, 2, 5], %p: f32[2, 15], %wg: f32[1, 15, 3], %rg: f32[1, 15, 5], %wr: f32[1, 5, 3],\n"
             "         %rr: f32[1, 5, 5]) {\n"
             "  const %sl: i32[2] = [3, 1]\n"
             "  %y, %yh, %yc = LSTM(%x, %w, %r, %b, %sl, %h0, %c0, %p) {hidden_size = 5, direction = \"bidirectional\", "
             "clip = 2.5}\n"
             "  %gy, %gh = GRU(%x, %wg, %rg) {hidden_size = 5, linear_before_reset = 1, direction = \"reverse\"}\n"
             "  %ry, %rh = RNN(%x, %wr, %rr) {hidden_size = 5, activations = [\"LeakyRelu\"], activation_alpha = [0.3]}\n"
             "  return %y, %yh, %yc, %gy, %gh, %ry, %rh\n}\n");
}

/* RNNs whose R is a constant: packed into irt_rnn's panels at compile time (every direction),
 * the results those of the interpreter. */
Test(backend_rnn, constant_recurrence_packed_at_compile_time) {
    CHECK_OK("graph @t(%x: f32[5, 2, 3], %w: f32[2, 8, 3], %wg: f32[1, 9, 3]) {\n"
             "  const %r: f32[2, 8, 2] = [-0.314, 0.053, -0.156, 0.125, 0.151, -0.521, -0.584, 0.405, -0.289, -0.319, 0.595, -0.036, 0.404, -0.028, 0.167, -0.419, 0.162, 0.442, 0.028, 0.290, 0.206, -0.523, 0.310, 0.109, -0.238, -0.563, 0.439, -0.033, 0.263, 0.455, 0.257, 0.505]\n"
             "  const %rg: f32[1, 9, 3] = [-0.126, 0.361, -0.066, 0.523, 0.455, -0.483, -0.437, -0.340, 0.559, -0.077, 0.152, -0.239, 0.009, -0.137, -0.179, 0.102, 0.101, 0.485, 0.218, 0.515, 0.428, 0.589, 0.206, -0.404, 0.433, 0.558, 0.486]\n"
             "  %y, %yh, %yc = LSTM(%x, %w, %r) {hidden_size = 2, direction = \"bidirectional\"}\n"
             "  %gy, %gh = GRU(%x, %wg, %rg) {hidden_size = 3}\n"
             "  return %y, %yh, %yc, %gy, %gh\n}\n");
}

/* TfIdfVectorizer on integers through the runtime's irt_tfidf: uni- and bigrams with skips, TF
 * and TFIDF with weights, one row and a batch. */
Test(backend_text, tfidf_vectorizer) {
    CHECK_OK("graph @t(%x: i64[2, 12], %v: i32[9]) {\n"
             "  %a = TfIdfVectorizer(%x) {mode = \"TFIDF\", min_gram_length = 1, max_gram_length = 2, max_skip_count = 3, "
             "ngram_counts = [0, 4], ngram_indexes = [0, 1, 2, 3, 4, 5, 1], pool_int64s = [-3, 0, 7, 11, 0, 7, 2, 2, -3, 5], "
             "weights = [0.5, 2.0, 1.5, 1.0, 3.0, 0.25, 4.0]}\n"
             "  %b = TfIdfVectorizer(%v) {mode = \"TF\", min_gram_length = 2, max_gram_length = 2, max_skip_count = 0, "
             "ngram_counts = [0, 0], ngram_indexes = [0, 1], pool_int64s = [1, 2, 3, 4]}\n"
             "  return %a, %b\n}\n");
}
/* Regression: an unrolled scan output (Concat of Unsqueezes whose inputs die there) computed in
 * place inside the Concat's output. The Unsqueezes must write their parts there, not alias their
 * inputs (which left the Concat's output unwritten). */
Test(backend_data, unsqueezed_parts_of_an_in_place_concat) {
    CHECK_OK("graph @t(%a: f32[2], %x: f32[1, 3, 2]) {\n"
             "  const %i0: i64[] = [0]\n  const %i1: i64[] = [1]\n  const %i2: i64[] = [2]\n  const %ax: i64[1] = [0]\n"
             "  %xb = Gather(%x, %i0) : f32[3, 2]\n"
             "  %x0 = Gather(%xb, %i0) : f32[2]\n  %s0 = Add(%a, %x0) : f32[2]\n  %o0 = Identity(%s0) : f32[2]\n"
             "  %x1 = Gather(%xb, %i1) : f32[2]\n  %s1 = Add(%s0, %x1) : f32[2]\n"
             "  %x2 = Gather(%xb, %i2) : f32[2]\n  %s2 = Add(%s1, %x2) : f32[2]\n"
             "  %u0 = Unsqueeze(%o0, %ax) : f32[1, 2]\n  %u1 = Unsqueeze(%s1, %ax) : f32[1, 2]\n"
             "  %u2 = Unsqueeze(%s2, %ax) : f32[1, 2]\n"
             "  %zz = Concat(%u0, %u1, %u2) {axis = 0} : f32[3, 2]\n  %zu = Unsqueeze(%zz, %ax) : f32[1, 3, 2]\n"
             "  %z = Concat(%zu) {axis = 0} : f32[1, 3, 2]\n  return %z\n}\n");
}

/* RoiAlign with rois given at run time: a roi so large that sampling_ratio 0 would take ~1e18
 * samples per bin fails the run (as the interpreter refuses it) instead of running for hours. */
Test(backend_data, roi_align_huge_roi_fails_the_run) {
    IrGraph *g;
    IrTensor in[2] = {{0}};
    IrLlvmProgram *p = compile_with_param("graph @t(%f: f32[1, 2, 6, 6], %ro: f32[4]) {\n"
                                          "  const %bi: i64[1] = [0]\n  const %sh: i64[2] = [1, 4]\n"
                                          "  %r2 = Reshape(%ro, %sh) : f32[1, 4]\n"
                                          "  %a = RoiAlign(%f, %r2, %bi) {output_height = 2, output_width = 2}\n"
                                          "  return %a\n}\n",
                                          &g, in, IR_DTYPE_F32, 4);
    run_with_param(p, g, in, (double[]){0.5, 1, 4, 5.5}, NULL);
    run_with_param(p, g, in, (double[]){0, 0, 3e9, 3e9}, "RoiAlign: a roi needs more than 2^20 samples per bin");
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    for (int i = 0; i < 2; i++) ir_tensor_free(&in[i]);
}

/* Regressions from differential fuzzing: LayerNormalization without a bias (it read the next
 * pool entry, its own result, as the bias: y = t * scale + old y), several rows of it (refused
 * before, for the same reason); an in-place Concat whose part is a copy op writing at an
 * unaligned offset of the Concat's output (the copy assumed 16-byte alignment: a fault); and
 * MaxPool over NaN (the first NaN of a window wins in every path, as in the interpreter). */
Test(backend_data, fuzz_regressions) {
    CHECK_OK("graph @t(%x: f32[16], %s: f32[8], %r: f32[3, 8]) {\n"
             "  const %i: i64[8] = [7, 6, 5, 4, 3, 2, 1, 0]\n  const %j: i64[8] = [0, 2, 4, 6, 8, 10, 12, 14]\n"
             "  %a = Gather(%x, %j) : f32[8]\n  %b = Gather(%a, %i) : f32[8]\n"
             "  %y = LayerNormalization(%b, %s) : f32[8]\n  %z = Gather(%y, %i) : f32[8]\n"
             "  %ly = LayerNormalization(%r, %s) : f32[3, 8]\n  return %z, %ly\n}\n");
    CHECK_OK("graph @t(%x: f32[7]) {\n  %r = Neg(%x) : f32[7]\n  %t = Tanh(%x) : f32[7]\n  %i = Identity(%t) : f32[7]\n"
             "  %c = Concat(%r, %i) {axis = 0} : f32[14]\n  %s = Sigmoid(%c) : f32[14]\n  return %s\n}\n");
    CHECK_OK("graph @t(%x: f32[1, 1, 3, 4], %v: f32[1, 2, 9]) {\n"
             "  const %m: f32[1, 1, 3, 4] = [nan, 0, 0, 0, 0, 0, nan, 0, 0, 0, 0, nan]\n"
             "  const %mv: f32[1, 2, 9] = [0, nan, 0, 0, 0, 0, 0, 0, nan, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n"
             "  %xn = Add(%x, %m) : f32[1, 1, 3, 4]\n  %vn = Add(%v, %mv) : f32[1, 2, 9]\n"
             "  %p = MaxPool(%xn) {kernel_shape = [2, 2], strides = [1, 1]}\n"
             "  %q, %qi = MaxPool(%xn) {kernel_shape = [2, 2], strides = [1, 1]}\n"
             "  %o, %oi = MaxPool(%vn) {kernel_shape = [3], strides = [2]}\n"
             "  return %p, %q, %qi, %o, %oi\n}\n");
    /* tanh near saturation: tanhf stays below 1 up to 9.01; the compiled tanh clamped at 7.9053
     * and gave 1.0, so Floor(Tanh(x)) was 1 compiled and 0 in the interpreter (found by fuzzing) */
    CHECK_OK("graph @t(%x: f32[10]) {\n"
             "  const %s: f32[10] = [7.905311, 7.95, 8.1, 8.4, 8.93, 9.0, 9.2, -8.2, -7.905311, 20.0]\n  const %zero: f32[] = [0.0]\n"
             "  %z = Mul(%x, %zero) : f32[10]\n  %a = Add(%z, %s) : f32[10]\n" /* s, but computed at run time */
             "  %t = Tanh(%a) : f32[10]\n  %f = Floor(%t) : f32[10]\n  %c = Ceil(%t) : f32[10]\n  return %f, %c\n}\n");
    /* Gelu's far negative tail: 1 + erf(x / sqrt 2) cancelled to 0 in f32 (compiled) and, below
     * -8, in the interpreter's f64 as well (it now uses erfc); both keep the tiny negative values,
     * subnormal ones included, so Less(Gelu(x), 0) agrees (found by fuzzing) */
    CHECK_OK("graph @t(%x: f32[10]) {\n"
             "  const %s: f32[10] = [-3.0, -4.9, -5.0, -5.5, -6.0, -8.2, -10.0, -13.0, -13.9, -14.2]\n  const %zero: f32[] = [0.0]\n"
             "  %z = Mul(%x, %zero) : f32[10]\n  %a = Add(%z, %s) : f32[10]\n"
             "  %g = Gelu(%a) : f32[10]\n  %l = Less(%g, %zero) : bool[10]\n  return %g, %l\n}\n");
}

/* BatchNormalization in training mode (batch statistics, running statistics blended with
 * momentum as outputs 1 and 2), its statistics outputs in inference mode, and f64. */
Test(backend_data, batchnorm_training_and_statistics) {
    CHECK_OK("graph @t(%x: f32[2, 3, 4, 5], %s: f32[3], %b: f32[3], %m: f32[3], %v0: f32[3], %h: f64[2, 3, 2]) {\n"
             "  %v = Abs(%v0) : f32[3]\n"
             "  %y, %rm, %rv = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0.01, momentum = 0.8, training_mode = 1}\n"
             "  %yi, %im, %iv = BatchNormalization(%x, %s, %b, %m, %v)\n"
             "  %hs = Cast(%s) {to = f64}\n  %hv = Cast(%v) {to = f64}\n  %hm = Cast(%m) {to = f64}\n"
             "  %yh, %hrm, %hrv = BatchNormalization(%h, %hs, %hs, %hm, %hv) {training_mode = 1}\n"
             "  %yo = BatchNormalization(%x, %s, %b, %m, %v) {training_mode = 1}\n" /* Y alone: batch statistics too */
             "  return %y, %rm, %rv, %yi, %im, %iv, %yh, %hrm, %hrv, %yo\n}\n");
}

/* f32 reductions over non-adjacent axes, and ReduceSum's noop_with_empty_axes, go through the
 * generic reduction kernel. */
Test(backend_data, reductions_over_non_adjacent_axes) {
    CHECK_OK("graph @t(%a: f32[3, 4, 5, 2]) {\n"
             "  const %ax: i64[2] = [0, 2]\n  const %no: i64[0] = []\n"
             "  %m = ReduceMean(%a) {axes = [1, 3]} : f32[3, 1, 5, 1]\n"
             "  %s = ReduceSum(%a, %ax) {keepdims = 0} : f32[4, 2]\n"
             "  %i = ReduceSum(%a, %no) {noop_with_empty_axes = 1} : f32[3, 4, 5, 2]\n"
             "  %mx = ReduceMax(%a) {axes = [0, 3], keepdims = 0} : f32[4, 5]\n"
             "  return %m, %s, %i, %mx\n}\n");
}

/* ReduceSum with its axes given at run time: the compiled output shape leaves axis 1 or 2
 * (keepdims = 0) and the run's axes choose; axes that give another shape, or are out of range,
 * fail the run naming the op. */
Test(backend_data, reduce_sum_axes_at_run_time) {
    IrGraph *g;
    IrTensor in[2] = {{0}};
    IrLlvmProgram *p = compile_with_param("graph @t(%x: f32[3, 2, 2], %ax: i64[1]) {\n"
                                          "  %y = ReduceSum(%x, %ax) {keepdims = 0} : f32[3, 2]\n"
                                          "  %k = ReduceSum(%x, %ax) : f32[3, 1, 2]\n  return %y, %k\n}\n",
                                          &g, in, IR_DTYPE_I64, 1);
    /* axis 1 (or -2) suits both outputs; axis 2 only the first: the second output then fails */
    const char *fails = "ReduceSum: the axes given at run time are out of range, repeated or do not give";
    run_with_param(p, g, in, (double[]){1}, NULL);
    run_with_param(p, g, in, (double[]){-2}, NULL);
    run_with_param(p, g, in, (double[]){2}, fails);
    run_with_param(p, g, in, (double[]){0}, fails);
    run_with_param(p, g, in, (double[]){3}, fails);
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    for (int i = 0; i < 2; i++) ir_tensor_free(&in[i]);
    /* two axes: [1, -1] is fine, [1, 1] repeats one (the interpreter refuses it) */
    IrGraph *g2;
    IrTensor in2[2] = {{0}};
    IrLlvmProgram *p2 = compile_with_param("graph @t(%x: f32[3, 2, 1], %ax: i64[2]) {\n"
                                           "  %y = ReduceSum(%x, %ax) : f32[3, 1, 1]\n  return %y\n}\n",
                                           &g2, in2, IR_DTYPE_I64, 2);
    run_with_param(p2, g2, in2, (double[]){1, -1}, NULL);
    run_with_param(p2, g2, in2, (double[]){1, 1}, "the axes given at run time are out of range, repeated");
    llvm_program_destroy(p2);
    ir_graph_destroy(g2);
    for (int i = 0; i < 2; i++) ir_tensor_free(&in2[i]);
    /* constant repeated axes: refused, as the interpreter refuses them */
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g3 = tu_parse("graph @t(%a: f32[3, 4]) {\n  %y = ReduceMean(%a) {axes = [1, -1]} : f32[3, 1]\n  return %y\n}\n",
                           "t.ir", &d);
    cr_assert(g3, "%s", tu_diag_text(&d));
    IrLlvmProgram *p3 = NULL;
    cr_assert_eq(llvm_program_create(g3, &d.diag, &p3), IR_EUNSUPPORTED, "%s", tu_diag_text(&d));
    cr_assert(strstr(tu_diag_text(&d), "ReduceMean with a repeated axis"), "%s", tu_diag_text(&d));
    ir_graph_destroy(g3);
    tu_diag_free(&d);
}


/* Dropout with training_mode and ratio given at run time: nothing dropped (inference, or ratio 0)
 * is a copy with an all-true mask; training with a ratio above 0 fails the run naming the node,
 * as the interpreter refuses it. */
Test(backend_data, dropout_training_mode_at_run_time) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse("graph @t(%x: f32[2, 3], %r: f32[], %t: bool[]) {\n"
                          "  %y, %m = Dropout(%x, %r, %t)\n  return %y, %m\n}\n", "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrTensor in[3] = {{0}}, out[2] = {{0}};
    cr_assert_eq(ir_tensor_alloc(&in[0], IR_DTYPE_F32, 2, (int64_t[]){2, 3}), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&in[1], IR_DTYPE_F32, 0, NULL), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&in[2], IR_DTYPE_BOOL, 0, NULL), IR_OK);
    fill(&in[0], 7);
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_specialize_inputs(g, in, 3, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    const struct {
        float ratio;
        uint8_t training;
        bool ok;
    } cases[] = {{0.5f, 0, true}, {0.0f, 1, true}, {0.5f, 1, false}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        *(float *)in[1].data = cases[c].ratio;
        *(uint8_t *)in[2].data = cases[c].training;
        TuDiag rd;
        tu_diag_init(&rd);
        IrStatus s = llvm_program_run(p, in, 3, out, &rd.diag);
        if (!cases[c].ok) {
            cr_assert_neq(s, IR_OK, "case %zu runs", c);
            cr_assert(strstr(tu_diag_text(&rd), "Dropout %y: training_mode with a ratio above 0"), "%s", tu_diag_text(&rd));
        } else {
            cr_assert_eq(s, IR_OK, "case %zu: %s", c, tu_diag_text(&rd));
            cr_assert(memcmp(out[0].data, in[0].data, 6 * sizeof(float)) == 0);
            for (int i = 0; i < 6; i++) cr_assert_eq(((uint8_t *)out[1].data)[i], 1);
            ir_tensor_free(&out[0]), ir_tensor_free(&out[1]);
        }
        tu_diag_free(&rd);
    }
    llvm_program_destroy(p);
    for (int i = 0; i < 3; i++) ir_tensor_free(&in[i]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* MatMulInteger and QLinearMatMul through the runtime's irt_qmatmul: u8 and i8, zero points per
 * tensor, per row and per column, batch dims broadcast, requantized with saturation. */
Test(backend_quant, integer_matmuls) {
    CHECK_OK("graph @t(%a: u8[2, 3, 4], %b: u8[4, 5], %c: i8[1, 3, 4], %d: i8[2, 4, 5]) {\n"
             "  const %az: u8[3] = [3, 250, 7]\n  const %bz: u8[5] = [0, 9, 128, 1, 255]\n"
             "  const %cz: i8[] = [-3]\n  const %dz: i8[] = [5]\n"
             "  const %as: f32[] = [0.02]\n  const %bs: f32[] = [0.05]\n  const %ys: f32[] = [0.7]\n"
             "  const %yz: u8[] = [100]\n  const %yzi: i8[] = [-10]\n"
             "  %m = MatMulInteger(%a, %b, %az, %bz)\n"
             "  %n = MatMulInteger(%c, %d, %cz, %dz)\n"
             "  %q = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz)\n"
             "  %qi = QLinearMatMul(%c, %as, %cz, %d, %bs, %dz, %ys, %yzi)\n"
             "  return %m, %n, %q, %qi\n}\n");
    /* large enough for the exact f64 GEMM path of irt_qmatmul (BLAS): batches, per-row and
     * per-column zero points */
    CHECK_OK("graph @t(%a: u8[3, 16, 40], %b: i8[40, 33]) {\n"
             "  const %az: u8[16] = [0, 1, 2, 3, 250, 255, 128, 127, 9, 8, 7, 6, 5, 4, 3, 200]\n  const %bz: i8[] = [-5]\n"
             "  const %as: f32[] = [0.02]\n  const %bs: f32[] = [0.05]\n  const %ys: f32[] = [0.9]\n  const %yz: u8[] = [77]\n"
             "  %m = MatMulInteger(%a, %b, %az, %bz)\n  %q = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ys, %yz)\n"
             "  return %m, %q\n}\n");
}

/* Zero points, scales and the bias of the integer Conv tests: per-channel weight zero points and
 * scales over 6 output channels, u8 and i8. */
#define QCONV_PARAMS                                                                                                   \
    "  const %xz: u8[] = [128]\n  const %wz: u8[6] = [0, 3, 200, 9, 128, 255]\n"                                       \
    "  const %xiz: i8[] = [-7]\n  const %wiz: i8[] = [2]\n"                                                            \
    "  const %xs: f32[] = [0.03]\n  const %ws: f32[6] = [0.01, 0.02, 0.005, 0.04, 0.015, 0.025]\n"                      \
    "  const %ys: f32[] = [0.9]\n  const %yz: u8[] = [120]\n  const %b: i32[6] = [100, -250, 0, 7, 1000, -3]\n"         \
    "  const %wis: f32[] = [0.02]\n  const %yiz: i8[] = [3]\n"

/* ConvInteger and QLinearConv through the runtime's irt_qconv: groups, strides, pads, dilation,
 * per-channel weight zero points and scales, an i32 bias, u8 and i8. */
Test(backend_quant, integer_convs) {
    CHECK_OK("graph @t(%x: u8[2, 4, 7, 6], %w: u8[6, 2, 3, 3], %xi: i8[1, 3, 5, 5], %wi: i8[4, 3, 2, 2]) {\n"
             QCONV_PARAMS
             "  %c = ConvInteger(%x, %w, %xz, %wz) {group = 2, pads = [1, 0, 1, 2], strides = [2, 1]}\n"
             "  %ci = ConvInteger(%xi, %wi, %xiz, %wiz) {dilations = [2, 2]}\n"
             "  %q = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz, %b) {group = 2, pads = [1, 1, 1, 1]}\n"
             "  %qi = QLinearConv(%xi, %xs, %xiz, %wi, %wis, %wiz, %ys, %yiz) {strides = [2, 2]}\n"
             "  return %c, %ci, %q, %qi\n}\n");
    /* large enough for the exact f64 GEMM path of irt_qconv (BLAS; the ones above take the
     * loops): groups, strides, asymmetric pads, per-channel weight zero points and scales */
    CHECK_OK("graph @t(%x: u8[2, 4, 20, 18], %w: u8[6, 2, 3, 3], %xi: i8[1, 8, 12, 12], %wi: i8[16, 8, 3, 3]) {\n"
             QCONV_PARAMS
             "  %c = ConvInteger(%x, %w, %xz, %wz) {group = 2, pads = [1, 0, 1, 2], strides = [2, 1]}\n"
             "  %q = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %ys, %yz, %b) {group = 2, pads = [1, 1, 1, 1]}\n"
             "  %qi = QLinearConv(%xi, %xs, %xiz, %wi, %wis, %wiz, %ys, %yiz) {pads = [1, 1, 1, 1]}\n"
             "  return %c, %q, %qi\n}\n");
}

/* Det (irt_det, LU in double) on f32 and f64 batches; MaxUnpool scattering into the unpooled
 * shape and into a larger output_shape (constant indices: random ones would be out of range);
 * RoiAlign averaging and taking the max (irt_roi_align). */
Test(backend_data, det_and_max_unpool) {
    CHECK_OK("graph @t(%a: f32[3, 4, 4], %b: f64[2, 3, 3], %x: f32[1, 2, 2, 2], %f: f32[2, 3, 6, 6], %ro: f32[3, 4]) {\n"
             "  const %i: i64[1, 2, 2, 2] = [0, 3, 9, 14, 1, 6, 8, 15]\n  const %os: i64[4] = [1, 2, 5, 5]\n"
             "  const %bi: i64[3] = [0, 1, 1]\n"
             "  %da = Det(%a)\n  %db = Det(%b)\n"
             "  %u = MaxUnpool(%x, %i) {kernel_shape = [2, 2], strides = [2, 2]}\n"
             "  %v = MaxUnpool(%x, %i, %os) {kernel_shape = [2, 2], strides = [2, 2]}\n"
             "  %ra = RoiAlign(%f, %ro, %bi) {output_height = 2, output_width = 3, sampling_ratio = 2, spatial_scale = 2.0}\n"
             "  %rm = RoiAlign(%f, %ro, %bi) {mode = \"max\", coordinate_transformation_mode = \"output_half_pixel\"}\n"
             "  return %da, %db, %u, %v, %ra, %rm\n}\n");
}

/* The training optimizers through the runtime's irt_optim: Adagrad, Adam with its post norm, and
 * standard and Nesterov Momentum over two tensors each. */
Test(backend_training, optimizers) {
    CHECK_OK("graph @t(%x1: f32[3], %x2: f32[2, 2], %g1: f32[3], %g2: f32[2, 2], %s1: f32[3], %s2: f32[2, 2],\n"
             "         %h1: f32[3], %h2: f32[2, 2]) {\n"
             "  const %r: f32[] = [0.1]\n  const %t: i64[] = [3]\n"
             "  %ax1, %ax2, %ah1, %ah2 = ai.onnx.preview.training.Adagrad(%r, %t, %x1, %x2, %g1, %g2, %h1, %h2) "
             "{decay_factor = 0.1, epsilon = 0.5, norm_coefficient = 0.01}\n"
             "  %dx1, %dx2, %dv1, %dv2, %dh1, %dh2 = ai.onnx.preview.training.Adam(%r, %t, %x1, %x2, %g1, %g2, %s1, %s2, "
             "%h1, %h2) {alpha = 0.8, beta = 0.9, epsilon = 0.5, norm_coefficient = 0.02, norm_coefficient_post = 0.1}\n"
             "  %mx1, %mx2, %mv1, %mv2 = ai.onnx.preview.training.Momentum(%r, %t, %x1, %x2, %g1, %g2, %s1, %s2) "
             "{alpha = 0.9, beta = 0.5, mode = \"standard\", norm_coefficient = 0.01}\n"
             "  %nx1, %nx2, %nv1, %nv2 = ai.onnx.preview.training.Momentum(%r, %t, %x1, %x2, %g1, %g2, %s1, %s2) "
             "{alpha = 0.9, beta = 0.5, mode = \"nesterov\", norm_coefficient = 0.0}\n"
             "  return %ax1, %ax2, %ah1, %ah2, %dx1, %dx2, %dv1, %dv2, %dh1, %dh2, %mx1, %mx2, %mv1, %mv2, %nx1, %nx2, %nv1, %nv2\n"
             "}\n");
}

/* Random ops draw with the interpreter's generator (ir/rng.h): seeded, compiled code gives the
 * interpreter's numbers exactly. */
Test(backend_data, seeded_random_ops_match_the_interpreter) {
    CHECK_OK("graph @t(%p: f32[3, 4], %d: f64[5]) {\n"
             "  %u = RandomUniform() {dtype = f32, high = 2.0, low = -1.0, seed = 3.0, shape = [2, 3]}\n"
             "  %n = RandomNormalLike(%d) {mean = 1.0, scale = 0.5, seed = 7.0}\n"
             "  %ul = RandomUniformLike(%p) {seed = 11.0}\n"
             "  %b = Bernoulli(%p) {seed = 5.0}\n  %bi = Bernoulli(%p) {dtype = i32, seed = 5.0}\n"
             "  return %u, %n, %ul, %b, %bi\n}\n");
}

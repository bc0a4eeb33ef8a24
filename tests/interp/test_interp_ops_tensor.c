/* Reference-interpreter kernels for elementwise, reduction, normalization, data movement and
 * shape ops: tiny text-IR graphs (constants in, results out) run through ir_interp_run and
 * checked against hand-computed values, covering each family and every tricky attribute
 * (broadcasting, wrap-around, rounding, negative axes and indices, clamping, tie order).
 */
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT 4

typedef struct Res {
    IrGraph *g;
    IrTensor out[MAX_OUT];
    uint32_t n_out;
    IrStatus status;
    TuDiag d;
} Res;

/* Parses `body` wrapped as a graph without inputs and runs it. */
static void run_ir(Res *r, const char *body) {
    memset(r, 0, sizeof *r);
    tu_diag_init(&r->d);
    char *text = malloc(strlen(body) + 64);
    cr_assert(text);
    sprintf(text, "graph @t() {\n%s\n}\n", body);
    r->g = tu_parse(text, "t.ir", &r->d);
    free(text);
    cr_assert(r->g, "parse failed: %s", tu_diag_text(&r->d));
    r->n_out = ir_graph_num_outputs(r->g);
    cr_assert(r->n_out <= MAX_OUT);
    r->status = ir_interp_run(r->g, NULL, 0, r->out, NULL, &r->d.diag);
}

static void res_free(Res *r) {
    if (r->status == IR_OK)
        for (uint32_t i = 0; i < r->n_out; i++) ir_tensor_free(&r->out[i]);
    ir_graph_destroy(r->g);
    tu_diag_free(&r->d);
}

/* Runs and requires success. */
static void run_ok(Res *r, const char *body) {
    run_ir(r, body);
    cr_assert_eq(r->status, IR_OK, "run failed: %s", tu_diag_text(&r->d));
}

/* Runs and requires failure with `needle` in the message. */
static void run_fails(const char *body, const char *needle) {
    Res r;
    run_ir(&r, body);
    cr_assert_neq(r.status, IR_OK, "expected a failure mentioning '%s'", needle);
    cr_assert(strstr(tu_diag_text(&r.d), needle), "message '%s' lacks '%s'", tu_diag_text(&r.d), needle);
    res_free(&r);
}

static void check_shape(const IrTensor *t, IrDType dt, uint32_t rank, const int64_t *dims) {
    char got[128];
    ir_tensor_shape_str(t, got, sizeof got);
    cr_assert_eq(t->dtype, dt, "dtype: got %s, want %s", got, ir_dtype_name(dt));
    cr_assert_eq(t->rank, rank, "rank: got %s, want %u", got, rank);
    for (uint32_t i = 0; i < rank; i++) cr_assert_eq(t->dims[i], dims[i], "dim %u: got %s", i, got);
}

static void check_f(const IrTensor *t, const double *want, int64_t n, double tol) {
    cr_assert_eq(ir_tensor_numel(t), n, "numel %lld, want %lld", (long long)ir_tensor_numel(t), (long long)n);
    for (int64_t i = 0; i < n; i++) {
        double v = ir_elem_get_f64(t->dtype, t->data, (size_t)i);
        if (isnan(want[i])) {
            cr_assert(isnan(v), "element %lld: got %.9g, want nan", (long long)i, v);
            continue;
        }
        if (isinf(want[i])) {
            cr_assert_eq(v, want[i], "element %lld: got %.9g, want %g", (long long)i, v, want[i]);
            continue;
        }
        cr_assert(fabs(v - want[i]) <= tol * (1 + fabs(want[i])), "element %lld: got %.9g, want %.9g",
                  (long long)i, v, want[i]);
    }
}

static void check_i(const IrTensor *t, const int64_t *want, int64_t n) {
    cr_assert_eq(ir_tensor_numel(t), n, "numel %lld, want %lld", (long long)ir_tensor_numel(t), (long long)n);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ir_elem_get_i64(t->dtype, t->data, (size_t)i);
        cr_assert_eq(v, want[i], "element %lld: got %lld, want %lld", (long long)i, (long long)v, (long long)want[i]);
    }
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define VALS(...) ((const double[]){__VA_ARGS__})
#define IVALS(...) ((const int64_t[]){__VA_ARGS__})
#define NV(...) (sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
#define NI(...) (sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define EXPECT_F(t, tol, ...) check_f((t), VALS(__VA_ARGS__), (int64_t)NV(__VA_ARGS__), (tol))
#define EXPECT_I(t, ...) check_i((t), IVALS(__VA_ARGS__), (int64_t)NI(__VA_ARGS__))

/* One-op graph over one f32 constant; returns the result in r. */
#define UNARY_F32(r, op_and_attrs, n, vals)                                                    \
    run_ok((r), "const %x: f32[" #n "] = " vals "\n %y = " op_and_attrs "\n return %y")

/* ---- elementwise unary ------------------------------------------------------------------ */

Test(k1_unary, relu_and_math) {
    Res r;
    UNARY_F32(&r, "Relu(%x)", 4, "[-1.5, 0, 2, -0.0]");
    EXPECT_F(&r.out[0], 0, 0, 0, 2, 0);
    res_free(&r);
    UNARY_F32(&r, "Exp(%x)", 3, "[0, 1, -1]");
    EXPECT_F(&r.out[0], 1e-7, 1, 2.718281828, 0.3678794412);
    res_free(&r);
    UNARY_F32(&r, "Sqrt(%x)", 3, "[4, 2, -1]");
    EXPECT_F(&r.out[0], 1e-7, 2, 1.414213562, NAN);
    res_free(&r);
    UNARY_F32(&r, "Sigmoid(%x)", 3, "[0, 100, -100]");
    EXPECT_F(&r.out[0], 1e-7, 0.5, 1, 3.720075976e-44);
    res_free(&r);
    UNARY_F32(&r, "Softplus(%x)", 3, "[0, 100, -100]");
    EXPECT_F(&r.out[0], 1e-7, 0.6931471806, 100, 3.720075976e-44);
    res_free(&r);
}

Test(k1_unary, round_half_to_even) {
    Res r;
    UNARY_F32(&r, "Round(%x)", 8, "[0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 3.5]");
    EXPECT_F(&r.out[0], 0, 0, 2, 2, 0, -2, 2, -3, 4);
    res_free(&r);
}

Test(k1_unary, activations_with_attributes) {
    Res r;
    UNARY_F32(&r, "LeakyRelu(%x) {alpha = 0.5}", 2, "[-2, 3]");
    EXPECT_F(&r.out[0], 0, -1, 3);
    res_free(&r);
    UNARY_F32(&r, "Elu(%x) {alpha = 2.0}", 2, "[-1, 3]");
    EXPECT_F(&r.out[0], 1e-7, 2 * (exp(-1) - 1), 3);
    res_free(&r);
    UNARY_F32(&r, "Selu(%x)", 2, "[-1, 1]");
    EXPECT_F(&r.out[0], 1e-6, 1.0507009873554805 * 1.6732632423543772 * (exp(-1) - 1), 1.0507009873554805);
    res_free(&r);
    UNARY_F32(&r, "HardSigmoid(%x)", 3, "[-10, 0, 1]");
    EXPECT_F(&r.out[0], 1e-7, 0, 0.5, 0.7);
    res_free(&r);
    UNARY_F32(&r, "HardSwish(%x)", 3, "[-4, 1, 4]");
    EXPECT_F(&r.out[0], 1e-7, 0, 1 * (1.0 / 6 + 0.5), 4);
    res_free(&r);
    UNARY_F32(&r, "ThresholdedRelu(%x) {alpha = 2.0}", 3, "[1, 2, 3]");
    EXPECT_F(&r.out[0], 0, 0, 0, 3);
    res_free(&r);
    UNARY_F32(&r, "Shrink(%x) {bias = 1.5, lambd = 1.0}", 4, "[-2, -1, 1, 2]");
    EXPECT_F(&r.out[0], 1e-7, -0.5, 0, 0, 0.5);
    res_free(&r);
    UNARY_F32(&r, "Celu(%x) {alpha = 2.0}", 2, "[-1, 1]");
    EXPECT_F(&r.out[0], 1e-7, 2 * (exp(-0.5) - 1), 1);
    res_free(&r);
}

Test(k1_unary, gelu_exact_and_tanh) {
    Res r;
    UNARY_F32(&r, "Gelu(%x)", 2, "[1, -1]");
    EXPECT_F(&r.out[0], 1e-6, 0.8413447461, -0.1586552539);
    res_free(&r);
    UNARY_F32(&r, "Gelu(%x) {approximate = \"tanh\"}", 1, "[1]");
    EXPECT_F(&r.out[0], 1e-6, 0.5 * (1 + tanh(sqrt(2 / M_PI) * (1 + 0.044715))));
    res_free(&r);
}

Test(k1_unary, integer_abs_neg_sign_wrap) {
    Res r;
    run_ok(&r, "const %x: i8[4] = [-128, -5, 0, 7]\n %a = Abs(%x)\n %n = Neg(%x)\n %s = Sign(%x)\n return %a, %n, %s");
    EXPECT_I(&r.out[0], -128, 5, 0, 7);
    EXPECT_I(&r.out[1], -128, 5, 0, -7);
    EXPECT_I(&r.out[2], -1, -1, 0, 1);
    check_shape(&r.out[0], IR_DTYPE_I8, 1, DIMS(4));
    res_free(&r);
}

Test(k1_unary, isinf_isnan_not_bitwise_not) {
    Res r;
    run_ok(&r, "const %x: f32[4] = [inf, -inf, nan, 1]\n"
               " %a = IsInf(%x) {detect_negative = 0}\n %b = IsNaN(%x)\n"
               " const %c: bool[2] = [true, false]\n %n = Not(%c)\n"
               " const %u: u8[2] = [0, 15]\n %w = BitwiseNot(%u)\n return %a, %b, %n, %w");
    check_shape(&r.out[0], IR_DTYPE_BOOL, 1, DIMS(4));
    EXPECT_I(&r.out[0], 1, 0, 0, 0);
    EXPECT_I(&r.out[1], 0, 0, 1, 0);
    EXPECT_I(&r.out[2], 0, 1);
    EXPECT_I(&r.out[3], 255, 240);
    res_free(&r);
}

Test(k1_unary, float_only_op_rejects_ints) {
    run_fails("const %x: i32[2] = [1, 2]\n %y = Exp(%x)\n return %y", "i32");
}

Test(k1_unary, clip_with_absent_bounds) {
    Res r;
    run_ok(&r, "const %x: f32[4] = [-3, -1, 1, 3]\n const %hi: f32[] = [2]\n const %lo: f32[] = [-2]\n"
               " %a = Clip(%x, _, %hi)\n %b = Clip(%x, %lo)\n %c = Clip(%x)\n return %a, %b, %c");
    EXPECT_F(&r.out[0], 0, -3, -1, 1, 2);
    EXPECT_F(&r.out[1], 0, -2, -1, 1, 3);
    EXPECT_F(&r.out[2], 0, -3, -1, 1, 3);
    res_free(&r);
    run_ok(&r, "const %x: i8[3] = [-100, 0, 100]\n const %lo: i8[] = [-5]\n const %hi: i8[] = [5]\n"
               " %y = Clip(%x, %lo, %hi)\n return %y");
    EXPECT_I(&r.out[0], -5, 0, 5);
    res_free(&r);
}

/* ---- Cast ------------------------------------------------------------------------------- */

Test(k1_cast, float_to_int_truncates_toward_zero) {
    Res r;
    run_ok(&r, "const %x: f32[5] = [-2.7, 2.7, nan, -0.5, 300]\n"
               " %a = Cast(%x) {to = i32}\n %b = Cast(%x) {to = u8}\n %c = Cast(%x) {to = bool}\n return %a, %b, %c");
    check_shape(&r.out[0], IR_DTYPE_I32, 1, DIMS(5));
    EXPECT_I(&r.out[0], -2, 2, 0, 0, 300);
    EXPECT_I(&r.out[1], 254, 2, 0, 0, 44);
    EXPECT_I(&r.out[2], 1, 1, 1, 1, 1);
    res_free(&r);
}

Test(k1_cast, to_half_and_bfloat_rounds_to_nearest_even) {
    Res r;
    /* 1 + 2^-11 is halfway between f16 1.0 and 1 + 2^-10: rounds to even (1.0) */
    run_ok(&r, "const %x: f32[3] = [1.00048828125, 65520, 1.00146484375]\n"
               " %h = Cast(%x) {to = f16}\n %b = Cast(%x) {to = bf16}\n return %h, %b");
    EXPECT_F(&r.out[0], 0, 1.0, INFINITY, 1.001953125);
    EXPECT_F(&r.out[1], 0, 1.0, 65536, 1.0);
    res_free(&r);
}

Test(k1_cast, fp8_saturate_attribute) {
    Res r;
    run_ok(&r, "const %x: f32[3] = [1000, -1000, 0.1]\n"
               " %a = Cast(%x) {to = f8e4m3fn}\n %b = Cast(%x) {saturate = 0, to = f8e4m3fn}\n"
               " %c = Cast(%x) {saturate = 0, to = f8e5m2}\n return %a, %b, %c");
    EXPECT_F(&r.out[0], 0, 448, -448, 0.1015625);
    EXPECT_F(&r.out[1], 0, NAN, NAN, 0.1015625);
    EXPECT_F(&r.out[2], 0, 1024, -1024, 0.09375);
    res_free(&r);
    run_ok(&r, "const %x: f32[1] = [100000]\n %c = Cast(%x) {saturate = 0, to = f8e5m2}\n"
               " %d = Cast(%x) {to = f8e5m2}\n return %c, %d");
    EXPECT_F(&r.out[0], 0, INFINITY);
    EXPECT_F(&r.out[1], 0, 57344);
    res_free(&r);
}

Test(k1_cast, int_wrap_bool_and_castlike) {
    Res r;
    run_ok(&r, "const %x: i64[3] = [300, -1, 0]\n const %like: f16[1] = [0]\n"
               " %a = Cast(%x) {to = u8}\n %b = Cast(%x) {to = bool}\n %c = CastLike(%x, %like)\n"
               " %d = Cast(%b) {to = f32}\n return %a, %b, %c, %d");
    EXPECT_I(&r.out[0], 44, 255, 0);
    EXPECT_I(&r.out[1], 1, 1, 0);
    check_shape(&r.out[2], IR_DTYPE_F16, 1, DIMS(3));
    EXPECT_F(&r.out[2], 0, 300, -1, 0);
    EXPECT_F(&r.out[3], 0, 1, 1, 0);
    res_free(&r);
}

Test(k1_cast, dropout_inference_is_identity) {
    Res r;
    run_ok(&r, "const %x: f32[3] = [1, 2, 3]\n %y, %m = Dropout(%x)\n return %y, %m");
    EXPECT_F(&r.out[0], 0, 1, 2, 3);
    check_shape(&r.out[1], IR_DTYPE_BOOL, 1, DIMS(3));
    EXPECT_I(&r.out[1], 1, 1, 1);
    res_free(&r);
    run_fails("const %x: f32[3] = [1, 2, 3]\n const %r: f32[] = [0.5]\n const %t: bool[] = [true]\n"
              " %y = Dropout(%x, %r, %t)\n return %y", "training_mode");
}

/* ---- binary ----------------------------------------------------------------------------- */

Test(k1_binary, add_broadcasting) {
    Res r;
    run_ok(&r, "const %a: f32[2, 3] = [1, 2, 3, 4, 5, 6]\n const %b: f32[3] = [10, 20, 30]\n"
               " const %c: f32[2, 1] = [100, 200]\n const %s: f32[] = [0.5]\n"
               " %x = Add(%a, %b)\n %y = Add(%b, %c)\n %z = Mul(%a, %s)\n return %x, %y, %z");
    check_shape(&r.out[0], IR_DTYPE_F32, 2, DIMS(2, 3));
    EXPECT_F(&r.out[0], 0, 11, 22, 33, 14, 25, 36);
    check_shape(&r.out[1], IR_DTYPE_F32, 2, DIMS(2, 3));
    EXPECT_F(&r.out[1], 0, 110, 120, 130, 210, 220, 230);
    EXPECT_F(&r.out[2], 0, 0.5, 1, 1.5, 2, 2.5, 3);
    res_free(&r);
}

Test(k1_binary, broadcast_mismatch_is_an_error) {
    run_fails("const %a: f32[2, 3] = [1, 2, 3, 4, 5, 6]\n const %b: f32[2] = [1, 2]\n"
              " %x = Add(%a, %b)\n return %x", "broadcast");
}

Test(k1_binary, broadcast_mismatch_names_the_inputs_and_axes) {
    run_fails("const %a: f32[2, 1] = [1, 2]\n const %b: f32[4, 2, 3] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,"
              " 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n const %c: f32[5] = [1, 2, 3, 4, 5]\n"
              " %x = Sum(%a, %b, %c)\n return %x",
              "input 2 shape f32[5] does not broadcast with input 1 shape f32[4, 2, 3] (operand 2 axis 0 has size 5 "
              "where operand 1 axis 2 has size 3)");
}

Test(k1_binary, f16_arithmetic_rounds_once) {
    Res r;
    run_ok(&r, "const %a: f16[2] = [1, 2048]\n const %b: f16[2] = [0.0004882813, 1]\n %x = Add(%a, %b)\n return %x");
    EXPECT_F(&r.out[0], 0, 1.0, 2048);
    res_free(&r);
}

Test(k1_binary, integer_div_and_mod_signs) {
    Res r;
    run_ok(&r, "const %a: i32[4] = [-7, 7, -7, 7]\n const %b: i32[4] = [2, -2, 3, -3]\n"
               " %d = Div(%a, %b)\n %m = Mod(%a, %b)\n %f = Mod(%a, %b) {fmod = 1}\n return %d, %m, %f");
    EXPECT_I(&r.out[0], -3, -3, -2, -2);
    EXPECT_I(&r.out[1], 1, -1, 2, -2);
    EXPECT_I(&r.out[2], -1, 1, -1, 1);
    res_free(&r);
    run_ok(&r, "const %a: f32[2] = [-7, 7.5]\n const %b: f32[2] = [3, -2]\n"
               " %f = Mod(%a, %b) {fmod = 1}\n %m = Mod(%a, %b)\n return %f, %m");
    EXPECT_F(&r.out[0], 0, -1, 1.5);
    EXPECT_F(&r.out[1], 0, 2, -0.5);
    res_free(&r);
    run_fails("const %a: i32[1] = [1]\n const %b: i32[1] = [0]\n %d = Div(%a, %b)\n return %d", "division by zero");
}

Test(k1_binary, integer_overflow_wraps) {
    Res r;
    run_ok(&r, "const %a: u8[2] = [250, 3]\n const %b: u8[2] = [10, 5]\n"
               " %s = Add(%a, %b)\n %d = Sub(%b, %a)\n %m = Mul(%a, %b)\n return %s, %d, %m");
    EXPECT_I(&r.out[0], 4, 8);
    EXPECT_I(&r.out[1], 16, 2);
    EXPECT_I(&r.out[2], 196, 15);
    res_free(&r);
}

Test(k1_binary, u64_compares_and_divides_unsigned) {
    Res r;
    run_ok(&r, "const %a: u64[1] = [18446744073709551614]\n const %b: u64[1] = [2]\n"
               " %d = Div(%a, %b)\n %g = Greater(%a, %b)\n %x = Max(%a, %b)\n return %d, %g, %x");
    cr_assert_eq(((uint64_t *)r.out[0].data)[0], 9223372036854775807ull);
    EXPECT_I(&r.out[1], 1);
    cr_assert_eq(((uint64_t *)r.out[2].data)[0], 18446744073709551614ull);
    res_free(&r);
}

Test(k1_binary, pow_prelu) {
    Res r;
    run_ok(&r, "const %a: f32[3] = [2, 4, -2]\n const %e: f32[3] = [3, 0.5, 2]\n %p = Pow(%a, %e)\n"
               " const %i: i32[3] = [2, 3, -2]\n const %ie: i64[1] = [3]\n %q = Pow(%i, %ie)\n"
               " const %fe: f32[] = [0.5]\n %s = Pow(%i, %fe)\n return %p, %q, %s");
    EXPECT_F(&r.out[0], 1e-7, 8, 2, 4);
    check_shape(&r.out[1], IR_DTYPE_I32, 1, DIMS(3));
    EXPECT_I(&r.out[1], 8, 27, -8);
    EXPECT_I(&r.out[2], 1, 1, 0); /* sqrt(-2) is NaN -> 0 */
    res_free(&r);
    run_ok(&r, "const %x: f32[2, 2] = [-1, 2, -3, 4]\n const %s: f32[2] = [0.5, 0.25]\n %y = PRelu(%x, %s)\n return %y");
    EXPECT_F(&r.out[0], 0, -0.5, 2, -1.5, 4);
    res_free(&r);
}

Test(k1_binary, bit_shift_and_bitwise) {
    Res r;
    run_ok(&r, "const %a: u8[3] = [1, 128, 255]\n const %b: u8[3] = [1, 1, 8]\n"
               " %l = BitShift(%a, %b) {direction = \"LEFT\"}\n %r = BitShift(%a, %b) {direction = \"RIGHT\"}\n"
               " %x = BitwiseXor(%a, %b)\n %o = BitwiseOr(%a, %b)\n %n = BitwiseAnd(%a, %b)\n return %l, %r, %x, %o");
    EXPECT_I(&r.out[0], 2, 0, 0);
    EXPECT_I(&r.out[1], 0, 64, 0);
    EXPECT_I(&r.out[2], 0, 129, 247);
    EXPECT_I(&r.out[3], 1, 129, 255);
    res_free(&r);
}

Test(k1_binary, logic_and_comparisons) {
    Res r;
    run_ok(&r, "const %p: bool[2, 2] = [true, true, false, false]\n const %q: bool[2] = [true, false]\n"
               " %a = And(%p, %q)\n %o = Or(%p, %q)\n %x = Xor(%p, %q)\n"
               " const %f: f32[3] = [1, nan, 3]\n const %g: f32[] = [1]\n"
               " %ge = GreaterOrEqual(%f, %g)\n return %a, %o, %x, %ge");
    EXPECT_I(&r.out[0], 1, 0, 0, 0);
    EXPECT_I(&r.out[1], 1, 1, 1, 0);
    EXPECT_I(&r.out[2], 0, 1, 1, 0);
    EXPECT_I(&r.out[3], 1, 0, 1);
    res_free(&r);
    run_ok(&r, "const %a: i16[3] = [-1, 0, 5]\n const %b: i16[3] = [-1, 1, 4]\n"
               " %e = Equal(%a, %b)\n %l = Less(%a, %b)\n %le = LessOrEqual(%a, %b)\n %g = Greater(%a, %b)\n"
               " return %e, %l, %le, %g");
    EXPECT_I(&r.out[0], 1, 0, 0);
    EXPECT_I(&r.out[1], 0, 1, 0);
    EXPECT_I(&r.out[2], 1, 1, 0);
    EXPECT_I(&r.out[3], 0, 0, 1);
    res_free(&r);
}

Test(k1_binary, variadic_max_min_sum_mean) {
    Res r;
    run_ok(&r, "const %a: f32[3] = [1, 5, nan]\n const %b: f32[] = [3]\n const %c: f32[2, 1] = [0, 10]\n"
               " %mx = Max(%a, %b, %c)\n %mn = Min(%a, %b)\n %s = Sum(%a, %b, %c)\n %m = Mean(%b, %c)\n"
               " return %mx, %mn, %s, %m");
    check_shape(&r.out[0], IR_DTYPE_F32, 2, DIMS(2, 3));
    EXPECT_F(&r.out[0], 0, 3, 5, NAN, 10, 10, NAN);
    EXPECT_F(&r.out[1], 0, 1, 3, NAN);
    EXPECT_F(&r.out[2], 0, 4, 8, NAN, 14, 18, NAN);
    EXPECT_F(&r.out[3], 0, 1.5, 6.5);
    res_free(&r);
    run_ok(&r, "const %a: i32[2] = [-4, 9]\n %m = Max(%a)\n return %m");
    EXPECT_I(&r.out[0], -4, 9);
    res_free(&r);
}

Test(k1_binary, where_broadcasts_three_ways) {
    Res r;
    run_ok(&r, "const %c: bool[2, 1] = [true, false]\n const %x: i64[3] = [1, 2, 3]\n const %y: i64[] = [-1]\n"
               " %w = Where(%c, %x, %y)\n return %w");
    check_shape(&r.out[0], IR_DTYPE_I64, 2, DIMS(2, 3));
    EXPECT_I(&r.out[0], 1, 2, 3, -1, -1, -1);
    res_free(&r);
}

/* ---- reductions ------------------------------------------------------------------------- */

Test(k1_reduce, sum_axes_input_keepdims_and_noop) {
    Res r;
    run_ok(&r, "const %x: f32[2, 3] = [1, 2, 3, 4, 5, 6]\n const %ax: i64[1] = [-1]\n const %none: i64[0] = []\n"
               " %a = ReduceSum(%x, %ax)\n %b = ReduceSum(%x, %ax) {keepdims = 0}\n"
               " %c = ReduceSum(%x, %none) {noop_with_empty_axes = 1}\n %d = ReduceSum(%x) {keepdims = 0}\n"
               " return %a, %b, %c, %d");
    check_shape(&r.out[0], IR_DTYPE_F32, 2, DIMS(2, 1));
    EXPECT_F(&r.out[0], 0, 6, 15);
    check_shape(&r.out[1], IR_DTYPE_F32, 1, DIMS(2));
    check_shape(&r.out[2], IR_DTYPE_F32, 2, DIMS(2, 3));
    EXPECT_F(&r.out[2], 0, 1, 2, 3, 4, 5, 6);
    check_shape(&r.out[3], IR_DTYPE_F32, 0, NULL);
    EXPECT_F(&r.out[3], 0, 21);
    res_free(&r);
}

Test(k1_reduce, every_reduction_over_axis_zero) {
    Res r;
    run_ok(&r, "const %x: f32[2, 2] = [1, -2, 3, 4]\n"
               " %a = ReduceMean(%x) {axes = [0]}\n %b = ReduceMax(%x) {axes = [0], keepdims = 0}\n"
               " %c = ReduceMin(%x) {axes = [0], keepdims = 0}\n %d = ReduceProd(%x) {axes = [0], keepdims = 0}\n"
               " return %a, %b, %c, %d");
    check_shape(&r.out[0], IR_DTYPE_F32, 2, DIMS(1, 2));
    EXPECT_F(&r.out[0], 0, 2, 1);
    EXPECT_F(&r.out[1], 0, 3, 4);
    EXPECT_F(&r.out[2], 0, 1, -2);
    EXPECT_F(&r.out[3], 0, 3, -8);
    res_free(&r);
    run_ok(&r, "const %x: f32[2, 2] = [1, -2, 3, 4]\n"
               " %a = ReduceL1(%x) {axes = [1], keepdims = 0}\n %b = ReduceL2(%x) {axes = [1], keepdims = 0}\n"
               " %c = ReduceSumSquare(%x) {axes = [1], keepdims = 0}\n %d = ReduceLogSumExp(%x) {axes = [1], keepdims = 0}\n"
               " return %a, %b, %c, %d");
    EXPECT_F(&r.out[0], 0, 3, 7);
    EXPECT_F(&r.out[1], 1e-7, sqrt(5), 5);
    EXPECT_F(&r.out[2], 0, 5, 25);
    EXPECT_F(&r.out[3], 1e-7, log(exp(1) + exp(-2)), log(exp(3) + exp(4)));
    res_free(&r);
    run_ok(&r, "const %x: f32[2] = [1000, 1000]\n %a = ReduceLogSumExp(%x) {keepdims = 0}\n"
               " %b = ReduceLogSum(%x) {keepdims = 0}\n return %a, %b");
    EXPECT_F(&r.out[0], 1e-7, 1000 + log(2));
    EXPECT_F(&r.out[1], 1e-7, log(2000));
    res_free(&r);
}

Test(k1_reduce, integer_reductions_are_exact) {
    Res r;
    run_ok(&r, "const %x: i64[3] = [9007199254740993, 1, -5]\n %s = ReduceSum(%x) {keepdims = 0}\n"
               " %m = ReduceMax(%x) {keepdims = 0}\n %n = ReduceMin(%x) {axes = [-1], keepdims = 0}\n return %s, %m, %n");
    EXPECT_I(&r.out[0], 9007199254740989);
    EXPECT_I(&r.out[1], 9007199254740993);
    EXPECT_I(&r.out[2], -5);
    res_free(&r);
}

Test(k1_reduce, bad_axis_is_reported) {
    run_fails("const %x: f32[2] = [1, 2]\n %y = ReduceMax(%x) {axes = [3]}\n return %y", "out of range");
}

Test(k1_reduce, argmax_argmin_ties) {
    Res r;
    run_ok(&r, "const %x: f32[2, 3] = [1, 5, 5, 7, 2, 2]\n"
               " %a = ArgMax(%x) {axis = 1}\n %b = ArgMax(%x) {axis = 1, select_last_index = 1}\n"
               " %c = ArgMin(%x) {axis = -1, keepdims = 0}\n %d = ArgMin(%x) {axis = 1, keepdims = 0, select_last_index = 1}\n"
               " return %a, %b, %c, %d");
    check_shape(&r.out[0], IR_DTYPE_I64, 2, DIMS(2, 1));
    EXPECT_I(&r.out[0], 1, 0);
    EXPECT_I(&r.out[1], 2, 0);
    check_shape(&r.out[2], IR_DTYPE_I64, 1, DIMS(2));
    EXPECT_I(&r.out[2], 0, 1);
    EXPECT_I(&r.out[3], 0, 2);
    res_free(&r);
}

Test(k1_reduce, softmax_logsoftmax_hardmax) {
    Res r;
    run_ok(&r, "const %x: f32[2, 2] = [0, 0, 1, 3]\n %s = Softmax(%x) {axis = 0}\n %l = LogSoftmax(%x)\n"
               " const %h: f32[2, 3] = [1, 3, 3, 0, 0, 0]\n %m = Hardmax(%h)\n return %s, %l, %m");
    double e = 1 / (1 + exp(1)), f = 1 / (1 + exp(3));
    EXPECT_F(&r.out[0], 1e-7, e, f, 1 - e, 1 - f);
    EXPECT_F(&r.out[1], 1e-7, -log(2), -log(2), -2 - log(1 + exp(-2)), -log(1 + exp(-2)));
    EXPECT_F(&r.out[2], 0, 0, 1, 0, 1, 0, 0);
    res_free(&r);
}

Test(k1_reduce, cumsum_exclusive_reverse) {
    Res r;
    run_ok(&r, "const %x: f32[4] = [1, 2, 3, 4]\n const %ax: i32[] = [0]\n"
               " %a = CumSum(%x, %ax)\n %b = CumSum(%x, %ax) {exclusive = 1}\n %c = CumSum(%x, %ax) {reverse = 1}\n"
               " %d = CumSum(%x, %ax) {exclusive = 1, reverse = 1}\n return %a, %b, %c, %d");
    EXPECT_F(&r.out[0], 0, 1, 3, 6, 10);
    EXPECT_F(&r.out[1], 0, 0, 1, 3, 6);
    EXPECT_F(&r.out[2], 0, 10, 9, 7, 4);
    EXPECT_F(&r.out[3], 0, 9, 7, 4, 0);
    res_free(&r);
    run_ok(&r, "const %x: i32[2, 2] = [1, 2, 3, 4]\n const %ax: i64[1] = [-1]\n %a = CumSum(%x, %ax)\n return %a");
    EXPECT_I(&r.out[0], 1, 3, 3, 7);
    res_free(&r);
}

/* ---- normalizations --------------------------------------------------------------------- */

Test(k1_norm, batchnorm_inference) {
    Res r;
    run_ok(&r, "const %x: f32[1, 2, 1, 2] = [1, 2, 3, 4]\n const %s: f32[2] = [1, 2]\n const %b: f32[2] = [0, 1]\n"
               " const %m: f32[2] = [1, 3]\n const %v: f32[2] = [4, 1]\n"
               " %y = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0}\n return %y");
    EXPECT_F(&r.out[0], 1e-7, 0, 0.5, 1, 3);
    res_free(&r);
}

Test(k1_norm, batchnorm_training_mode_outputs) {
    Res r;
    run_ok(&r, "const %x: f32[2, 1] = [1, 3]\n const %s: f32[1] = [1]\n const %b: f32[1] = [0]\n"
               " const %m: f32[1] = [0]\n const %v: f32[1] = [1]\n"
               " %y, %rm, %rv = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0, momentum = 0.5, training_mode = 1}\n"
               " return %y, %rm, %rv");
    EXPECT_F(&r.out[0], 1e-7, -1, 1);
    EXPECT_F(&r.out[1], 1e-7, 1);
    EXPECT_F(&r.out[2], 1e-7, 1);
    res_free(&r);
}

Test(k1_norm, instance_and_group_norm) {
    Res r;
    run_ok(&r, "const %x: f32[1, 2, 2] = [1, 3, 10, 20]\n const %s: f32[2] = [1, 2]\n const %b: f32[2] = [0, 5]\n"
               " %y = InstanceNormalization(%x, %s, %b) {epsilon = 0}\n return %y");
    EXPECT_F(&r.out[0], 1e-6, -1, 1, 3, 7);
    res_free(&r);
    run_ok(&r, "const %x: f32[1, 4, 1] = [1, 3, 10, 30]\n const %s: f32[2] = [1, 1]\n const %b: f32[2] = [0, 0]\n"
               " %y = GroupNormalization(%x, %s, %b) {epsilon = 0, num_groups = 2}\n return %y");
    EXPECT_F(&r.out[0], 1e-6, -1, 1, -1, 1);
    res_free(&r);
}

Test(k1_norm, layernorm_three_outputs) {
    Res r;
    run_ok(&r, "const %x: f32[2, 2] = [1, 3, 2, 6]\n const %s: f32[2] = [1, 2]\n const %b: f32[2] = [0.5, 0]\n"
               " %y, %m, %i = LayerNormalization(%x, %s, %b) {epsilon = 0}\n return %y, %m, %i");
    check_shape(&r.out[1], IR_DTYPE_F32, 2, DIMS(2, 1));
    EXPECT_F(&r.out[0], 1e-6, -0.5, 2, -0.5, 2);
    EXPECT_F(&r.out[1], 0, 2, 4);
    EXPECT_F(&r.out[2], 1e-7, 1, 0.5);
    res_free(&r);
    run_ok(&r, "const %x: f32[1, 2, 2] = [1, 3, 5, 7]\n const %s: f32[2, 2] = [1, 1, 1, 1]\n"
               " %y = LayerNormalization(%x, %s) {axis = 1, epsilon = 0}\n return %y");
    double k = 1 / sqrt(5);
    EXPECT_F(&r.out[0], 1e-6, -3 * k, -k, k, 3 * k);
    res_free(&r);
}

Test(k1_norm, lp_lrn_mvn) {
    Res r;
    run_ok(&r, "const %x: f32[2, 2] = [3, 4, 0, 0]\n %a = LpNormalization(%x)\n %b = LpNormalization(%x) {axis = 1, p = 1}\n"
               " return %a, %b");
    EXPECT_F(&r.out[0], 1e-7, 0.6, 0.8, 0, 0);
    EXPECT_F(&r.out[1], 1e-7, 3.0 / 7, 4.0 / 7, 0, 0);
    res_free(&r);
    run_ok(&r, "const %x: f32[1, 3, 1, 1] = [1, 2, 3]\n %y = LRN(%x) {alpha = 3.0, beta = 1.0, bias = 1.0, size = 2}\n return %y");
    /* window for c: [c, c+1] (size 2): sums 5, 13, 9 */
    EXPECT_F(&r.out[0], 1e-6, 1 / (1 + 1.5 * 5), 2 / (1 + 1.5 * 13), 3 / (1 + 1.5 * 9));
    res_free(&r);
    run_ok(&r, "const %x: f32[1, 1, 1, 2] = [1, 3]\n %y = MeanVarianceNormalization(%x)\n return %y");
    EXPECT_F(&r.out[0], 1e-6, -1, 1);
    res_free(&r);
}

/* ---- data movement ---------------------------------------------------------------------- */

Test(k1_move, concat_and_rank_error) {
    Res r;
    run_ok(&r, "const %a: i32[2, 1] = [1, 2]\n const %b: i32[2, 2] = [3, 4, 5, 6]\n const %e: i32[2, 0] = []\n"
               " %c = Concat(%a, %e, %b) {axis = -1}\n return %c");
    check_shape(&r.out[0], IR_DTYPE_I32, 2, DIMS(2, 3));
    EXPECT_I(&r.out[0], 1, 3, 4, 2, 5, 6);
    res_free(&r);
    run_fails("const %a: i32[2, 1] = [1, 2]\n const %b: i32[2] = [3, 4]\n %c = Concat(%a, %b) {axis = 0}\n return %c",
              "input 1 has rank 1, expected 2");
}

Test(k1_move, split_given_and_equal) {
    Res r;
    run_ok(&r, "const %x: f32[5] = [1, 2, 3, 4, 5]\n const %s: i64[2] = [2, 3]\n %a, %b = Split(%x, %s)\n"
               " %c, %d, %e = Split(%x)\n return %a, %b, %c, %e");
    EXPECT_F(&r.out[0], 0, 1, 2);
    EXPECT_F(&r.out[1], 0, 3, 4, 5);
    EXPECT_F(&r.out[2], 0, 1, 2);
    EXPECT_F(&r.out[3], 0, 5);
    res_free(&r);
}

Test(k1_move, slice_negative_steps_and_clamping) {
    Res r;
    run_ok(&r, "const %x: i64[2, 4] = [0, 1, 2, 3, 4, 5, 6, 7]\n"
               " const %s1: i64[1] = [-1]\n const %e1: i64[1] = [-9223372036854775807]\n const %a1: i64[1] = [1]\n"
               " const %st: i64[1] = [-2]\n %a = Slice(%x, %s1, %e1, %a1, %st)\n"
               " const %s2: i64[2] = [1, 1]\n const %e2: i64[2] = [1000, 3]\n %b = Slice(%x, %s2, %e2)\n"
               " const %s3: i64[1] = [10]\n const %e3: i64[1] = [20]\n %c = Slice(%x, %s3, %e3, %a1)\n"
               " return %a, %b, %c");
    check_shape(&r.out[0], IR_DTYPE_I64, 2, DIMS(2, 2));
    EXPECT_I(&r.out[0], 3, 1, 7, 5);
    check_shape(&r.out[1], IR_DTYPE_I64, 2, DIMS(1, 2));
    EXPECT_I(&r.out[1], 5, 6);
    check_shape(&r.out[2], IR_DTYPE_I64, 2, DIMS(2, 0));
    res_free(&r);
}

Test(k1_move, pad_modes) {
    Res r;
    run_ok(&r, "const %x: f32[3] = [1, 2, 3]\n const %p: i64[2] = [2, 1]\n const %v: f32[] = [9]\n"
               " %c = Pad(%x, %p, %v)\n %r = Pad(%x, %p) {mode = \"reflect\"}\n %e = Pad(%x, %p) {mode = \"edge\"}\n"
               " const %n: i64[2] = [-1, 1]\n %k = Pad(%x, %n)\n return %c, %r, %e, %k");
    EXPECT_F(&r.out[0], 0, 9, 9, 1, 2, 3, 9);
    EXPECT_F(&r.out[1], 0, 3, 2, 1, 2, 3, 2);
    EXPECT_F(&r.out[2], 0, 1, 1, 1, 2, 3, 3);
    EXPECT_F(&r.out[3], 0, 2, 3, 0);
    res_free(&r);
    run_ok(&r, "const %x: i32[2, 2] = [1, 2, 3, 4]\n const %p: i64[4] = [0, 1, 1, 0]\n %y = Pad(%x, %p)\n return %y");
    check_shape(&r.out[0], IR_DTYPE_I32, 2, DIMS(3, 3));
    EXPECT_I(&r.out[0], 0, 1, 2, 0, 3, 4, 0, 0, 0);
    res_free(&r);
}

Test(k1_move, reshape_flatten_squeeze_unsqueeze) {
    Res r;
    run_ok(&r, "const %s0: i64[3] = [2, 3, 4]\n %x = ConstantOfShape(%s0)\n"
               " const %s: i64[3] = [0, -1, 2]\n %a = Reshape(%x, %s)\n %b = Flatten(%x) {axis = 0}\n"
               " %c = Flatten(%x) {axis = -1}\n const %ax: i64[2] = [0, -1]\n %d = Unsqueeze(%x, %ax)\n return %a, %b, %c, %d");
    check_shape(&r.out[0], IR_DTYPE_F32, 3, DIMS(2, 6, 2));
    check_shape(&r.out[1], IR_DTYPE_F32, 2, DIMS(1, 24));
    check_shape(&r.out[2], IR_DTYPE_F32, 2, DIMS(6, 4));
    check_shape(&r.out[3], IR_DTYPE_F32, 5, DIMS(1, 2, 3, 4, 1));
    res_free(&r);
    run_ok(&r, "const %x: f32[1, 3, 1] = [1, 2, 3]\n %a = Squeeze(%x)\n const %ax: i64[1] = [-1]\n %b = Squeeze(%x, %ax)\n"
               " return %a, %b");
    check_shape(&r.out[0], IR_DTYPE_F32, 1, DIMS(3));
    check_shape(&r.out[1], IR_DTYPE_F32, 2, DIMS(1, 3));
    EXPECT_F(&r.out[1], 0, 1, 2, 3);
    res_free(&r);
    run_fails("const %x: f32[2, 3] = [1, 2, 3, 4, 5, 6]\n const %s: i64[1] = [4]\n %a = Reshape(%x, %s)\n return %a",
              "cannot reshape");
}

Test(k1_move, expand_tile_transpose) {
    Res r;
    run_ok(&r, "const %x: i32[2, 1] = [1, 2]\n const %s: i64[3] = [2, 1, 3]\n %e = Expand(%x, %s)\n"
               " const %rep: i64[2] = [2, 2]\n %t = Tile(%x, %rep)\n"
               " const %m: i32[2, 3] = [1, 2, 3, 4, 5, 6]\n %p = Transpose(%m)\n return %e, %t, %p");
    check_shape(&r.out[0], IR_DTYPE_I32, 3, DIMS(2, 2, 3));
    EXPECT_I(&r.out[0], 1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2);
    check_shape(&r.out[1], IR_DTYPE_I32, 2, DIMS(4, 2));
    EXPECT_I(&r.out[1], 1, 1, 2, 2, 1, 1, 2, 2);
    check_shape(&r.out[2], IR_DTYPE_I32, 2, DIMS(3, 2));
    EXPECT_I(&r.out[2], 1, 4, 2, 5, 3, 6);
    res_free(&r);
    run_ok(&r, "const %x: i32[2, 1, 3] = [1, 2, 3, 4, 5, 6]\n %p = Transpose(%x) {perm = [1, 2, 0]}\n return %p");
    check_shape(&r.out[0], IR_DTYPE_I32, 3, DIMS(1, 3, 2));
    EXPECT_I(&r.out[0], 1, 4, 2, 5, 3, 6);
    res_free(&r);
}

Test(k1_move, depth_to_space_and_back) {
    Res r;
    run_ok(&r, "const %x: i32[1, 4, 1, 1] = [0, 1, 2, 3]\n const %y: i32[1, 8, 1, 1] = [0, 1, 2, 3, 4, 5, 6, 7]\n"
               " %d = DepthToSpace(%x) {blocksize = 2}\n %c = DepthToSpace(%y) {blocksize = 2, mode = \"CRD\"}\n"
               " %e = DepthToSpace(%y) {blocksize = 2}\n %s = SpaceToDepth(%e) {blocksize = 2}\n return %d, %c, %e, %s");
    check_shape(&r.out[0], IR_DTYPE_I32, 4, DIMS(1, 1, 2, 2));
    EXPECT_I(&r.out[0], 0, 1, 2, 3);
    check_shape(&r.out[1], IR_DTYPE_I32, 4, DIMS(1, 2, 2, 2));
    EXPECT_I(&r.out[1], 0, 1, 2, 3, 4, 5, 6, 7);
    /* DCR: channel (i*2 + j)*2 + c */
    EXPECT_I(&r.out[2], 0, 2, 4, 6, 1, 3, 5, 7);
    EXPECT_I(&r.out[3], 0, 1, 2, 3, 4, 5, 6, 7);
    res_free(&r);
}

Test(k1_move, gather_family) {
    Res r;
    run_ok(&r, "const %x: f32[3, 2] = [1, 2, 3, 4, 5, 6]\n const %i: i64[2, 1] = [-1, 0]\n %g = Gather(%x, %i)\n"
               " const %j: i32[] = [1]\n %h = Gather(%x, %j) {axis = 1}\n"
               " const %e: i64[2, 2] = [1, 0, 2, -3]\n %ge = GatherElements(%x, %e)\n return %g, %h, %ge");
    check_shape(&r.out[0], IR_DTYPE_F32, 3, DIMS(2, 1, 2));
    EXPECT_F(&r.out[0], 0, 5, 6, 1, 2);
    check_shape(&r.out[1], IR_DTYPE_F32, 1, DIMS(3));
    EXPECT_F(&r.out[1], 0, 2, 4, 6);
    EXPECT_F(&r.out[2], 0, 3, 2, 5, 2);
    res_free(&r);
    run_ok(&r, "const %x: i32[2, 2, 2] = [0, 1, 2, 3, 4, 5, 6, 7]\n const %i: i64[2, 1] = [1, 0]\n"
               " %a = GatherND(%x, %i) {batch_dims = 1}\n const %k: i64[2, 2] = [0, 1, 1, 0]\n %b = GatherND(%x, %k)\n"
               " return %a, %b");
    check_shape(&r.out[0], IR_DTYPE_I32, 2, DIMS(2, 2));
    EXPECT_I(&r.out[0], 2, 3, 4, 5);
    check_shape(&r.out[1], IR_DTYPE_I32, 2, DIMS(2, 2));
    EXPECT_I(&r.out[1], 2, 3, 4, 5);
    res_free(&r);
    run_fails("const %x: f32[3] = [1, 2, 3]\n const %i: i64[1] = [3]\n %g = Gather(%x, %i)\n return %g", "out of range");
}

Test(k1_move, scatter_family) {
    Res r;
    run_ok(&r, "const %x: f32[2, 3] = [0, 0, 0, 0, 0, 0]\n const %i: i64[1, 2] = [1, -1]\n const %u: f32[1, 2] = [5, 7]\n"
               " %a = ScatterElements(%x, %i, %u) {axis = 1}\n"
               " const %k: i64[2, 2] = [0, 0, 0, 0]\n const %v: f32[2, 2] = [1, 2, 3, 4]\n"
               " %b = ScatterElements(%x, %k, %v) {reduction = \"add\"}\n"
               " const %n: i64[1, 1] = [1]\n const %w: f32[1, 3] = [7, 8, 9]\n %c = ScatterND(%x, %n, %w)\n"
               " return %a, %b, %c");
    EXPECT_F(&r.out[0], 0, 0, 5, 7, 0, 0, 0);
    EXPECT_F(&r.out[1], 0, 4, 6, 0, 0, 0, 0);
    EXPECT_F(&r.out[2], 0, 0, 0, 0, 7, 8, 9);
    res_free(&r);
}

Test(k1_move, reverse_sequence_trilu_compress) {
    Res r;
    run_ok(&r, "const %x: i32[3, 2] = [1, 10, 2, 20, 3, 30]\n const %l: i64[2] = [3, 2]\n"
               " %a = ReverseSequence(%x, %l)\n const %m: i32[3, 3] = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
               " const %k: i64[] = [-1]\n %t = Trilu(%m, %k) {upper = 0}\n %u = Trilu(%m)\n"
               " const %c: bool[2] = [false, true]\n %cp = Compress(%m, %c) {axis = 1}\n return %a, %t, %u, %cp");
    EXPECT_I(&r.out[0], 3, 20, 2, 10, 1, 30);
    EXPECT_I(&r.out[1], 0, 0, 0, 4, 0, 0, 7, 8, 0);
    EXPECT_I(&r.out[2], 1, 2, 3, 0, 5, 6, 0, 0, 9);
    check_shape(&r.out[3], IR_DTYPE_I32, 2, DIMS(3, 1));
    EXPECT_I(&r.out[3], 2, 5, 8);
    res_free(&r);
}

Test(k1_move, onehot_negative_indices) {
    Res r;
    run_ok(&r, "const %i: i64[3] = [0, -1, 5]\n const %d: f32[] = [3]\n const %v: f32[2] = [-1, 1]\n"
               " %y = OneHot(%i, %d, %v)\n %z = OneHot(%i, %d, %v) {axis = 0}\n return %y, %z");
    check_shape(&r.out[0], IR_DTYPE_F32, 2, DIMS(3, 3));
    EXPECT_F(&r.out[0], 0, 1, -1, -1, -1, -1, 1, -1, -1, -1);
    EXPECT_F(&r.out[1], 0, 1, -1, -1, -1, -1, -1, -1, 1, -1);
    res_free(&r);
}

Test(k1_move, topk_ties_lower_index_first) {
    Res r;
    run_ok(&r, "const %x: f32[2, 4] = [1, 3, 3, 2, 4, 4, 1, 1]\n const %k: i64[1] = [2]\n"
               " %v, %i = TopK(%x, %k)\n %sv, %si = TopK(%x, %k) {largest = 0}\n return %v, %i, %sv, %si");
    EXPECT_F(&r.out[0], 0, 3, 3, 4, 4);
    EXPECT_I(&r.out[1], 1, 2, 0, 1);
    EXPECT_F(&r.out[2], 0, 1, 2, 1, 1);
    EXPECT_I(&r.out[3], 0, 3, 2, 3);
    res_free(&r);
}

Test(k1_move, unique_sorted_and_unsorted) {
    Res r;
    run_ok(&r, "const %x: f32[6] = [2, 1, 1, 3, 4, 3]\n %y, %i, %inv, %c = Unique(%x)\n return %y, %i, %inv, %c");
    EXPECT_F(&r.out[0], 0, 1, 2, 3, 4);
    EXPECT_I(&r.out[1], 1, 0, 3, 4);
    EXPECT_I(&r.out[2], 1, 0, 0, 2, 3, 2);
    EXPECT_I(&r.out[3], 2, 1, 2, 1);
    res_free(&r);
    run_ok(&r, "const %x: f32[6] = [2, 1, 1, 3, 4, 3]\n %y, %i, %inv, %c = Unique(%x) {sorted = 0}\n return %y, %i, %inv, %c");
    EXPECT_F(&r.out[0], 0, 2, 1, 3, 4);
    EXPECT_I(&r.out[1], 0, 1, 3, 4);
    EXPECT_I(&r.out[2], 0, 1, 1, 2, 3, 2);
    EXPECT_I(&r.out[3], 1, 2, 2, 1);
    res_free(&r);
    run_ok(&r, "const %x: i32[3, 2] = [1, 0, 1, 0, 0, 5]\n %y, %i, %inv, %c = Unique(%x) {axis = 0}\n return %y, %i, %inv, %c");
    check_shape(&r.out[0], IR_DTYPE_I32, 2, DIMS(2, 2));
    EXPECT_I(&r.out[0], 0, 5, 1, 0);
    EXPECT_I(&r.out[1], 2, 0);
    EXPECT_I(&r.out[2], 1, 1, 0);
    EXPECT_I(&r.out[3], 1, 2);
    res_free(&r);
}

Test(k1_move, nonzero) {
    Res r;
    run_ok(&r, "const %x: f32[2, 2] = [1, 0, 0, 3]\n %y = NonZero(%x)\n return %y");
    check_shape(&r.out[0], IR_DTYPE_I64, 2, DIMS(2, 2));
    EXPECT_I(&r.out[0], 0, 1, 0, 1);
    res_free(&r);
}

/* ---- shape ops -------------------------------------------------------------------------- */

Test(k1_shape, shape_size_with_start_end) {
    Res r;
    run_ok(&r, "const %s0: i64[3] = [2, 3, 4]\n %x = ConstantOfShape(%s0)\n"
               " %a = Shape(%x)\n %b = Shape(%x) {end = -1, start = -10}\n %c = Shape(%x) {start = 1}\n %s = Size(%x)\n"
               " return %a, %b, %c, %s");
    EXPECT_I(&r.out[0], 2, 3, 4);
    EXPECT_I(&r.out[1], 2, 3);
    EXPECT_I(&r.out[2], 3, 4);
    check_shape(&r.out[3], IR_DTYPE_I64, 0, NULL);
    EXPECT_I(&r.out[3], 24);
    res_free(&r);
}

Test(k1_shape, constants) {
    Res r;
    run_ok(&r, "%a = Constant() {value = i32[2] [7, 8]}\n %b = Constant() {value_float = 1.5}\n"
               " %c = Constant() {value_ints = [1, 2, 3]}\n const %s: i64[2] = [2, 2]\n"
               " %d = ConstantOfShape(%s) {value = i8[1] [5]}\n return %a, %b, %c, %d");
    check_shape(&r.out[0], IR_DTYPE_I32, 1, DIMS(2));
    EXPECT_I(&r.out[0], 7, 8);
    check_shape(&r.out[1], IR_DTYPE_F32, 0, NULL);
    EXPECT_F(&r.out[1], 0, 1.5);
    check_shape(&r.out[2], IR_DTYPE_I64, 1, DIMS(3));
    EXPECT_I(&r.out[2], 1, 2, 3);
    check_shape(&r.out[3], IR_DTYPE_I8, 2, DIMS(2, 2));
    EXPECT_I(&r.out[3], 5, 5, 5, 5);
    res_free(&r);
    run_ok(&r, "const %s: i64[1] = [3]\n %d = ConstantOfShape(%s)\n return %d");
    check_shape(&r.out[0], IR_DTYPE_F32, 1, DIMS(3));
    EXPECT_F(&r.out[0], 0, 0, 0, 0);
    res_free(&r);
}

Test(k1_shape, eyelike_and_range) {
    Res r;
    run_ok(&r, "const %x: i32[2, 3] = [0, 0, 0, 0, 0, 0]\n %a = EyeLike(%x) {k = 1}\n %b = EyeLike(%x) {dtype = f32, k = -1}\n"
               " const %s: i32[] = [10]\n const %l: i32[] = [4]\n const %d: i32[] = [-3]\n %r = Range(%s, %l, %d)\n"
               " const %fs: f32[] = [0]\n const %fl: f32[] = [1]\n const %fd: f32[] = [0.3]\n %f = Range(%fs, %fl, %fd)\n"
               " return %a, %b, %r, %f");
    check_shape(&r.out[0], IR_DTYPE_I32, 2, DIMS(2, 3));
    EXPECT_I(&r.out[0], 0, 1, 0, 0, 0, 1);
    check_shape(&r.out[1], IR_DTYPE_F32, 2, DIMS(2, 3));
    EXPECT_F(&r.out[1], 0, 0, 0, 0, 1, 0, 0);
    EXPECT_I(&r.out[2], 10, 7);
    EXPECT_F(&r.out[3], 1e-6, 0, 0.3, 0.6, 0.9);
    res_free(&r);
}

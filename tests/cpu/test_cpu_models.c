/* The LLVM CPU backend against the reference interpreter: every corpus model and the torch
 * models (IRTOOL_SHARED_DIR) either compile in memory and match the interpreter within
 * rtol 1e-4, atol 1e-5, or are refused with an error naming the unsupported op. Small graphs
 * cover each supported op (broadcasting, batched MatMul, Gemm, reductions, data movement),
 * the memory plan's reuse, guards and concurrent runs. */
#include "backend/backend.h"
#include "passes/passes.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IO 8

static void fill(IrTensor *t, uint64_t seed) {
    uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
    for (int64_t i = 0; i < ir_tensor_numel(t); i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(x >> 40) / (double)(1ull << 24);
        if (t->dtype == IR_DTYPE_BOOL) ir_elem_set_f64(t->dtype, t->data, (size_t)i, u < 0.5);
        else ir_elem_set_f64(t->dtype, t->data, (size_t)i, 2.0 * u - 1.0);
    }
}

/* Inputs with symbols bound by name ("B=2,S=16"). */
static void make_inputs(IrGraph *g, const char *binds, IrTensor *ins) {
    int64_t sym[256];
    for (int i = 0; i < 256; i++) sym[i] = -1;
    for (const char *p = binds; p && *p;) {
        const char *eq = strchr(p, '=');
        IrSymId s = ir_sym_find(g, p, (size_t)(eq - p));
        cr_assert(s && s < 256, "no symbol near '%s'", p);
        sym[s] = strtoll(eq + 1, NULL, 10);
        p = strchr(eq, ',');
        p = p ? p + 1 : NULL;
    }
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        int64_t d[IR_MAX_RANK];
        uint32_t r = ir_type_rank(g, t);
        for (uint32_t k = 0; k < r; k++) cr_assert(ir_expr_eval(g, ir_type_dims(g, t)[k], sym, &d[k]));
        cr_assert_eq(ir_tensor_alloc(&ins[i], ir_type_dtype(g, t), r, d), IR_OK);
        fill(&ins[i], i + 1);
    }
}

static int64_t count_bad(const IrTensor *got, const IrTensor *want, double *worst) {
    int64_t bad = 0;
    for (int64_t i = 0; i < ir_tensor_numel(want); i++) {
        double a = ir_elem_get_f64(got->dtype, got->data, (size_t)i), b = ir_elem_get_f64(want->dtype, want->data, (size_t)i);
        double e = fabs(a - b);
        if (isnan(a) && isnan(b)) continue; /* NaN where the interpreter has NaN */
        if (e > *worst || isnan(e)) *worst = e;
        if (!(e <= 1e-5 + 1e-4 * fabs(b))) bad++;
    }
    return bad;
}

/* Runs g with the interpreter and the backend on ins; returns the backend's status (errors in
 * d), asserting agreement when it compiled. */
static IrStatus check_graph(IrGraph *g, IrTensor *ins, TuDiag *d) {
    uint32_t n_in = ir_graph_num_inputs(g), n_out = ir_graph_num_outputs(g);
    IrTensor ref[MAX_IO] = {{0}}, out[MAX_IO] = {{0}};
    cr_assert(n_out <= MAX_IO);
    cr_assert_eq(ir_interp_run(g, ins, n_in, ref, NULL, &d->diag), IR_OK, "interp: %s", tu_diag_text(d));
    IrStatus s = llvm_specialize_inputs(g, ins, n_in, &d->diag);
    IrLlvmProgram *p = NULL;
    if (!s) s = llvm_program_create(g, &d->diag, &p);
    if (!s) {
        cr_assert_eq(llvm_program_run(p, ins, n_in, out, &d->diag), IR_OK, "%s", tu_diag_text(d));
        for (uint32_t i = 0; i < n_out; i++) {
            cr_assert_eq(out[i].rank, ref[i].rank, "output %u rank", i);
            for (uint32_t k = 0; k < ref[i].rank; k++) cr_assert_eq(out[i].dims[k], ref[i].dims[k]);
            double worst = 0;
            int64_t bad = count_bad(&out[i], &ref[i], &worst);
            cr_expect_eq(bad, 0, "output %u: %lld elements outside rtol 1e-4 atol 1e-5 (worst %g)", i, (long long)bad, worst);
            ir_tensor_free(&out[i]);
        }
    }
    llvm_program_destroy(p);
    for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&ref[i]);
    return s;
}

static IrStatus check_corpus(const char *name, const char *binds, TuDiag *d) {
    IrGraph *g = tu_load_corpus(name, d);
    cr_assert(g, "%s: %s", name, tu_diag_text(d));
    IrTensor ins[MAX_IO] = {{0}};
    make_inputs(g, binds, ins);
    IrStatus s = check_graph(g, ins, d);
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) ir_tensor_free(&ins[i]);
    ir_graph_destroy(g);
    return s;
}

static void expect_unsupported(IrStatus s, TuDiag *d, const char *op) {
    char want[128];
    snprintf(want, sizeof want, "the llvm backend does not support %s", op);
    cr_assert_eq(s, IR_EUNSUPPORTED, "expected unsupported %s, got %d: %s", op, s, tu_diag_text(d));
    cr_assert(strstr(tu_diag_text(d), want), "error should name %s: %s", op, tu_diag_text(d));
}

Test(backend_corpus, mlp) {
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(check_corpus("mlp.ir", "B=3", &d), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
}
Test(backend_corpus, attention) {
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(check_corpus("attention.ir", "B=2,S=5", &d), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
}
Test(backend_corpus, symbolic) {
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(check_corpus("symbolic.ir", "B=2,S=16", &d), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
}
Test(backend_corpus, conv_block) {
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(check_corpus("conv_block.ir", "", &d), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
}
/* If on data becomes Where and the constant-trip Loop is unrolled (lower-cf) before codegen. */
Test(backend_corpus, control_flow) {
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(check_corpus("control_flow.ir", "", &d), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
}

static void run_pipeline(IrGraph *g, const char *text, TuDiag *d) {
    IrPipeline *p;
    cr_assert_eq(ir_pipeline_parse(text, &d->diag, &p), IR_OK, "%s", tu_diag_text(d));
    IrPipelineOptions o = {.verify_each = true};
    cr_assert_eq(ir_pipeline_run(p, g, &o, &d->diag), IR_OK, "%s", tu_diag_text(d));
    ir_pipeline_destroy(p);
}

/* A graph after `fuse` (groups with self-contained bodies) compiles and keeps output names. */
Test(backend_corpus, attention_after_fuse) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("attention.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    run_pipeline(g, "fuse", &d);
    uint32_t fused = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) fused += ir_node_op(g, n) == IR_OP_FUSED;
    cr_assert_gt(fused, 0, "fuse made no groups");
    IrTensor ins[MAX_IO] = {{0}};
    make_inputs(g, "B=2,S=4", ins);
    cr_assert_eq(check_graph(g, ins, &d), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_str_eq(ir_value_name(g, ir_graph_output(g, 0)), "y");
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) ir_tensor_free(&ins[i]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* Every corpus model after `fuse` still matches the interpreter (elementwise groups become one
 * kernel each, the others are compiled member by member). */
static IrStatus check_corpus_fused(const char *name, const char *binds, TuDiag *d) {
    IrGraph *g = tu_load_corpus(name, d);
    cr_assert(g, "%s: %s", name, tu_diag_text(d));
    run_pipeline(g, "fuse", d);
    IrTensor ins[MAX_IO] = {{0}};
    make_inputs(g, binds, ins);
    IrStatus s = check_graph(g, ins, d);
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) ir_tensor_free(&ins[i]);
    ir_graph_destroy(g);
    return s;
}

Test(backend_corpus, all_after_fuse) {
    static const char *const models[][2] = {
        {"mlp.ir", "B=3"}, {"attention.ir", "B=2,S=5"}, {"symbolic.ir", "B=2,S=16"}, {"conv_block.ir", ""}};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        TuDiag d;
        tu_diag_init(&d);
        cr_assert_eq(check_corpus_fused(models[i][0], models[i][1], &d), IR_OK, "%s: %s", models[i][0], tu_diag_text(&d));
        tu_diag_free(&d);
    }
}

/* A fused group of elementwise ops (with broadcasting inside: a member smaller than the result,
 * scalars, a row and a column) compiles to one kernel that matches the interpreter, and the
 * workspace holds only the group's results. */
static void check_fused_one_kernel(const char *text, uint32_t n_results, size_t result_bytes) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    run_pipeline(g, "fuse", &d);
    uint32_t fused = 0, nodes = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) {
        fused += ir_node_op(g, n) == IR_OP_FUSED;
        nodes++;
    }
    cr_assert_eq(fused, 1, "fuse made %u groups", fused);
    cr_assert_eq(nodes, 1, "fuse left %u top-level nodes", nodes);
    IrTensor ins[MAX_IO] = {{0}}, ref[MAX_IO] = {{0}}, out[MAX_IO] = {{0}};
    make_inputs(g, "", ins);
    uint32_t n_in = ir_graph_num_inputs(g), n_out = ir_graph_num_outputs(g);
    cr_assert_eq(n_out, n_results);
    cr_assert_eq(ir_interp_run(g, ins, n_in, ref, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_specialize_inputs(g, ins, n_in, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_num_kernels(p), 1);
    cr_assert_eq(llvm_program_unplanned_bytes(p), n_results * ((result_bytes + 63) / 64 * 64));
    cr_assert_eq(llvm_program_run(p, ins, n_in, out, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (uint32_t i = 0; i < n_out; i++) {
        cr_assert_eq(out[i].rank, ref[i].rank);
        for (uint32_t k = 0; k < ref[i].rank; k++) cr_assert_eq(out[i].dims[k], ref[i].dims[k]);
        /* the same float operations in the same order per element, exp and tanh as approximations
         * within a few ulp of libm's (llvm/emit.c): equal to 1e-6 relative */
        for (int64_t e = 0; e < ir_tensor_numel(&ref[i]); e++) {
            float a = ((float *)out[i].data)[e], b = ((float *)ref[i].data)[e];
            cr_assert(fabsf(a - b) <= 1e-6f * fabsf(b) + 1e-30f, "output %u element %lld: %.9g vs %.9g", i, (long long)e, a, b);
        }
        ir_tensor_free(&out[i]);
        ir_tensor_free(&ref[i]);
    }
    llvm_program_destroy(p);
    for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&ins[i]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(backend_fused, elementwise_group_is_one_kernel_with_broadcasting) {
    check_fused_one_kernel("graph @t(%a: f32[4, 5, 8], %b: f32[8], %c: f32[5, 1], %s: f32[]) {\n"
                           "  %t = Add(%b, %s) : f32[8]\n  %u = Mul(%a, %t) : f32[4, 5, 8]\n"
                           "  %v = Sub(%u, %c) : f32[4, 5, 8]\n  %w = Relu(%v) : f32[4, 5, 8]\n"
                           "  %x = Exp(%w) : f32[4, 5, 8]\n  %y = Div(%x, %c) : f32[4, 5, 8]\n"
                           "  %z = Tanh(%y) : f32[4, 5, 8]\n  %q = Max(%z, %t, %s) : f32[4, 5, 8]\n"
                           "  return %q, %v\n}\n",
                           2, 4 * 5 * 8 * 4);
}

Test(backend_fused, chain_with_graph_constants_is_one_kernel) {
    check_fused_one_kernel("graph @t(%x: f32[1000]) {\n  const %c0: f32[] = [1.5]\n  const %c1: f32[] = [0.25]\n"
                           "  %a = Add(%x, %c0) : f32[1000]\n  %b = Mul(%a, %c1) : f32[1000]\n"
                           "  %c = Neg(%b) : f32[1000]\n  %d = Relu(%c) : f32[1000]\n"
                           "  %e = Sub(%d, %c1) : f32[1000]\n  %f = LeakyRelu(%e) {alpha = 0.1} : f32[1000]\n"
                           "  return %f\n}\n",
                           1, 1000 * 4);
}

/* A group whose results differ in shape cannot be one loop nest: it is compiled member by member
 * and still matches; so is a group with symbolic shapes bound at specialization. */
Test(backend_fused, groups_that_do_not_fit_one_nest_fall_back) {
    const char *texts[] = {"graph @t(%a: f32[4, 8], %b: f32[8]) {\n  %t = Neg(%b) : f32[8]\n"
                           "  %u = Mul(%a, %t) : f32[4, 8]\n  %v = Exp(%u) : f32[4, 8]\n  return %v, %t\n}\n",
                           "symbol N\ngraph @t(%a: f32[N, 8], %b: f32[8]) {\n  %t = Neg(%b) : f32[8]\n"
                           "  %u = Mul(%a, %t) : f32[N, 8]\n  %v = Exp(%u) : f32[N, 8]\n  return %v\n}\n"};
    for (int i = 0; i < 2; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_parse(texts[i], "t.ir", &d);
        cr_assert(g, "%s", tu_diag_text(&d));
        run_pipeline(g, "fuse", &d);
        IrTensor ins[MAX_IO] = {{0}};
        make_inputs(g, i ? "N=3" : "", ins);
        cr_assert_eq(check_graph(g, ins, &d), IR_OK, "%s", tu_diag_text(&d));
        for (uint32_t k = 0; k < ir_graph_num_inputs(g); k++) ir_tensor_free(&ins[k]);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
}

/* ---- small graphs, one op family each ---- */

static IrStatus check_text(const char *text, TuDiag *d) {
    IrGraph *g = tu_parse(text, "t.ir", d);
    cr_assert(g, "%s", tu_diag_text(d));
    cr_assert_eq(ir_verify(g, &d->diag), IR_OK, "%s", tu_diag_text(d));
    IrTensor ins[MAX_IO] = {{0}};
    make_inputs(g, "", ins);
    IrStatus s = check_graph(g, ins, d);
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) ir_tensor_free(&ins[i]);
    ir_graph_destroy(g);
    return s;
}

#define CHECK_OK(text) TU_CHECK_TEXT_OK(check_text, text)

Test(backend_ops, elementwise_broadcast) {
    CHECK_OK("graph @t(%a: f32[2, 3, 4], %b: f32[3, 1], %c: f32[4]) {\n"
             "  %s = Add(%a, %b) : f32[2, 3, 4]\n  %m = Mul(%s, %c) : f32[2, 3, 4]\n"
             "  %d = Sub(%m, %b) : f32[2, 3, 4]\n  %q = Div(%d, %c) : f32[2, 3, 4]\n"
             "  %r = Relu(%q) : f32[2, 3, 4]\n  %g = Sigmoid(%q) : f32[2, 3, 4]\n"
             "  %t = Tanh(%q) : f32[2, 3, 4]\n  %e = Exp(%t) : f32[2, 3, 4]\n"
             "  %l = Log(%e) : f32[2, 3, 4]\n  %ab = Abs(%q) : f32[2, 3, 4]\n  %sq = Sqrt(%ab) : f32[2, 3, 4]\n"
             "  %n = Neg(%sq) : f32[2, 3, 4]\n  %er = Erf(%n) : f32[2, 3, 4]\n"
             "  %lr = LeakyRelu(%q) {alpha = 0.2} : f32[2, 3, 4]\n"
             "  %sum = Sum(%lr, %er, %c) : f32[2, 3, 4]\n  %mean = Mean(%sum, %b) : f32[2, 3, 4]\n"
             "  %mx = Max(%lr, %mean, %c) : f32[2, 3, 4]\n  %mn = Min(%mx, %b) : f32[2, 3, 4]\n"
             "  %p = Pow(%ab, %c) : f32[2, 3, 4]\n  %rc = Reciprocal(%e) : f32[2, 3, 4]\n"
             "  return %r, %g, %l, %mn, %p, %rc\n}\n");
}

Test(backend_ops, clip_where) {
    CHECK_OK("graph @t(%a: f32[5, 6], %c: bool[6], %lo: f32[], %hi: f32[]) {\n"
             "  %k = Clip(%a, %lo, %hi) : f32[5, 6]\n  %w = Where(%c, %a, %k) : f32[5, 6]\n  return %w\n}\n");
}

Test(backend_ops, matmul_batched_broadcast_and_vectors) {
    CHECK_OK("graph @t(%a: f32[2, 1, 3, 5], %b: f32[4, 5, 6], %v: f32[5], %m: f32[3, 5]) {\n"
             "  %y = MatMul(%a, %b) : f32[2, 4, 3, 6]\n  %z = MatMul(%m, %v) : f32[3]\n"
             "  %w = MatMul(%v, %b) : f32[4, 6]\n  return %y, %z, %w\n}\n");
}

Test(backend_ops, gemm_trans_bias) {
    CHECK_OK("graph @t(%a: f32[5, 3], %b: f32[4, 5], %c: f32[4]) {\n"
             "  %y = Gemm(%a, %b, %c) {transA = 1, transB = 1, alpha = 0.5, beta = 2.0} : f32[3, 4]\n"
             "  %z = Gemm(%y, %b) : f32[3, 5]\n  return %y, %z\n}\n");
}

Test(backend_ops, reductions_and_norms) {
    CHECK_OK("graph @t(%a: f32[2, 3, 7], %s: f32[7], %b: f32[7], %x: f32[2, 3, 4, 4]) {\n"
             "  %sm = Softmax(%a) {axis = -1} : f32[2, 3, 7]\n  %s1 = Softmax(%a) {axis = 1} : f32[2, 3, 7]\n"
             "  %ls = LogSoftmax(%a) {axis = 1} : f32[2, 3, 7]\n"
             "  %ln = LayerNormalization(%a, %s, %b) {axis = -1, epsilon = 1e-05} : f32[2, 3, 7]\n"
             "  %rm = ReduceMean(%a) {axes = [2], keepdims = 1} : f32[2, 3, 1]\n"
             "  %rx = ReduceMax(%a) {axes = [1, 2], keepdims = 0} : f32[2]\n"
             "  %gp = GlobalAveragePool(%x) : f32[2, 3, 1, 1]\n"
             "  %mid = ReduceMean(%x) {axes = [1, 2], keepdims = 0} : f32[2, 4]\n"
             "  return %sm, %s1, %ls, %ln, %rm, %rx, %gp, %mid\n}\n");
}

Test(backend_ops, data_movement) {
    CHECK_OK("graph @t(%a: f32[2, 3, 4], %b: f32[2, 1, 4], %i: i64[2, 2]) {\n"
             "  const %shape: i64[2] = [6, 4]\n"
             "  %t = Transpose(%a) {perm = [2, 0, 1]} : f32[4, 2, 3]\n"
             "  %c = Concat(%a, %b) {axis = 1} : f32[2, 4, 4]\n"
             "  %r = Reshape(%a, %shape) : f32[6, 4]\n  %f = Flatten(%c) {axis = 1} : f32[2, 16]\n"
             "  %g = Gather(%r, %i) {axis = 0} : f32[2, 2, 4]\n"
             "  const %st: i64[2] = [1, -1]\n  const %en: i64[2] = [3, -4]\n  const %ax: i64[2] = [1, 2]\n"
             "  const %sp: i64[2] = [1, -2]\n"
             "  %sl = Slice(%a, %st, %en, %ax, %sp) : f32[2, 2, 2]\n"
             "  return %t, %c, %f, %g, %sl\n}\n");
}

Test(backend_ops, conv_and_pools) {
    CHECK_OK("graph @t(%x: f32[2, 4, 9, 8], %w: f32[6, 2, 3, 3], %b: f32[6], %w1: f32[5, 4, 1, 1]) {\n"
             "  %c = Conv(%x, %w, %b) {group = 2, pads = [1, 0, 2, 1], strides = [2, 1], dilations = [1, 2]} : f32[2, 6, 5, 5]\n"
             "  %d = Conv(%x, %w1) : f32[2, 5, 9, 8]\n"
             "  %m = MaxPool(%x) {kernel_shape = [3, 2], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[2, 4, 5, 5]\n"
             "  %a = AveragePool(%x) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[2, 4, 9, 8]\n"
             "  %ai = AveragePool(%x) {kernel_shape = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1} : f32[2, 4, 10, 9]\n"
             "  return %c, %d, %m, %a, %ai\n}\n");
}

Test(backend_ops, constant_of_shape) {
    CHECK_OK("graph @t(%a: f32[2, 3]) {\n  const %sh: i64[2] = [2, 3]\n"
             "  %k = ConstantOfShape(%sh) {value = f32[1] [0.5]} : f32[2, 3]\n"
             "  %z = ConstantOfShape(%sh) : f32[2, 3]\n"
             "  %y = Add(%a, %k) : f32[2, 3]\n  %w = Sub(%y, %z) : f32[2, 3]\n  return %w\n}\n");
}

/* Operands the runtime helpers would trust are checked at compile time (each refusal names the
 * op and the reason): zero points of another dtype, an optimizer gradient of another size, a
 * training_mode that is not one bool. (A kernel_shape against the weight is shape-infer's:
 * kernel_shape_other_than_the_weights_is_a_shape_error.) */
/* kernel_shape ties the weight's spatial dims (a fact of shape-infer), so a weight of other dims
 * stops the compile there, naming the op and both shapes, before the kernel could trust it. */
Test(backend_ops, kernel_shape_other_than_the_weights_is_a_shape_error) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse("graph @t(%x: u8[1, 1, 3, 3], %w: u8[2, 1, 2, 2]) {\n  %y = ConvInteger(%x, %w) {kernel_shape = [1, 1]}\n"
                          "  return %y\n}\n",
                          "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrTensor in[2] = {{0}};
    int64_t dx[4] = {1, 1, 3, 3}, dw[4] = {2, 1, 2, 2};
    cr_assert_eq(ir_tensor_alloc(&in[0], IR_DTYPE_U8, 4, dx), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&in[1], IR_DTYPE_U8, 4, dw), IR_OK);
    IrStatus s = llvm_specialize_inputs(g, in, 2, &d.diag);
    cr_expect_eq(s, IR_EVERIFY, "%s", tu_diag_text(&d));
    cr_expect(strstr(tu_diag_text(&d), "ConvInteger needs"), "%s", tu_diag_text(&d));
    cr_expect(strstr(tu_diag_text(&d), "u8[2, 1, 2, 2]"), "%s", tu_diag_text(&d));
    ir_tensor_free(&in[0]), ir_tensor_free(&in[1]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(backend_ops, runtime_helper_operands_are_checked) {
    static const struct {
        const char *text, *op, *why;
    } cases[] = {
        {"graph @t(%x: u8[1, 1, 3, 3], %w: u8[2, 1, 2, 2]) {\n  const %xz: i8[] = [-1]\n"
         "  %y = ConvInteger(%x, %w, %xz)\n  return %y\n}\n", "ConvInteger", "zero points of another dtype"},
        {"graph @t(%x: f32[8], %g: f32[2], %h: f32[8]) {\n  const %r: f32[] = [0.1]\n  const %n: i64[] = [1]\n"
         "  %y, %hy = ai.onnx.preview.training.Adagrad(%r, %n, %x, %g, %h)\n  return %y, %hy\n}\n",
         "ai.onnx.preview.training.Adagrad", "a gradient or state of another size"},
        {"graph @t(%x: f32[2, 3], %t: f32[]) {\n  const %r: f32[] = [0.5]\n  %y = Dropout(%x, %r, %t)\n  return %y\n}\n",
         "Dropout", "a training_mode that is not one bool"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_parse(cases[i].text, "t.ir", &d);
        cr_assert(g, "case %zu: %s", i, tu_diag_text(&d));
        IrTensor in[3] = {{0}};
        uint32_t n_in = ir_graph_num_inputs(g);
        for (uint32_t k = 0; k < n_in; k++) {
            IrTypeId t = ir_value_type(g, ir_graph_input(g, k));
            int64_t dims[IR_MAX_RANK];
            for (uint32_t q = 0; q < ir_type_rank(g, t); q++) cr_assert(ir_expr_is_const(g, ir_type_dims(g, t)[q], &dims[q]));
            cr_assert_eq(ir_tensor_alloc(&in[k], ir_type_dtype(g, t), ir_type_rank(g, t), dims), IR_OK);
        }
        IrLlvmProgram *p = NULL;
        IrStatus s = llvm_specialize_inputs(g, in, n_in, &d.diag);
        if (!s) s = llvm_program_create(g, &d.diag, &p);
        expect_unsupported(s, &d, cases[i].op);
        cr_assert(strstr(tu_diag_text(&d), cases[i].why), "case %zu: %s", i, tu_diag_text(&d));
        llvm_program_destroy(p);
        for (uint32_t k = 0; k < n_in; k++) ir_tensor_free(&in[k]);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
}

Test(backend_ops, unsupported_op_is_named) {
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = check_text("graph @t(%a: f32[2, 5]) {\n  %y = Multinomial(%a) {sample_size = 3, seed = 1.0} : i32[2, 3]\n  return %y\n}\n", &d);
    expect_unsupported(s, &d, "Multinomial");
    tu_diag_free(&d);
}

Test(backend_ops, nan_propagates_like_the_interpreter) {
    CHECK_OK("graph @t(%a: f32[4]) {\n  const %n: f32[4] = [nan, 1.0, nan, -2.0]\n"
             "  %x = Max(%a, %n) : f32[4]\n  %y = Min(%n, %a) : f32[4]\n  %r = Relu(%n) : f32[4]\n"
             "  %s = ReduceMax(%n) {keepdims = 0} : f32[]\n  return %x, %y, %r, %s\n}\n");
}

Test(backend_ops, passthrough_outputs_and_unused_inputs) {
    CHECK_OK("graph @t(%a: f32[3], %b: f32[2, 2]) {\n  const %k: f32[2] = [1.5, -2]\n"
             "  %y = Neg(%a) : f32[3]\n  return %a, %k, %y, %y\n}\n");
}

Test(backend_ops, symbolic_shapes_need_binding) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse("symbol N\ngraph @t(%a: f32[N]) {\n  %y = Neg(%a) : f32[N]\n  return %y\n}\n", "t.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_EUNSUPPORTED);
    cr_assert(strstr(tu_diag_text(&d), "needs static shapes"), "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(backend_ops, unsupported_dtype_is_named) {
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = check_text("graph @t(%a: f8e4m3fn[2, 3]) {\n  %y = Relu(%a) : f8e4m3fn[2, 3]\n  return %y\n}\n", &d);
    expect_unsupported(s, &d, "Relu on f8e4m3fn");
    tu_diag_free(&d);
}

/* ---- memory plan, guards, threads ---- */

static const char *chain = "graph @t(%a: f32[64, 64]) {\n"
                           "  %b = Relu(%a) : f32[64, 64]\n  %c = Neg(%b) : f32[64, 64]\n"
                           "  %d = Exp(%c) : f32[64, 64]\n  %e = Abs(%d) : f32[64, 64]\n"
                           "  %f = Sqrt(%e) : f32[64, 64]\n  return %f\n}\n";

Test(backend_plan, chain_reuses_buffers) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(chain, "t.ir", &d);
    cr_assert(g);
    IrLlvmProgram *p;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_unplanned_bytes(p), 5 * 64 * 64 * 4);
    cr_assert_eq(llvm_program_workspace_bytes(p), 2 * 64 * 64 * 4, "peak %zu", llvm_program_workspace_bytes(p));
    /* a wrong input shape is refused by the guard */
    IrTensor bad = {0}, out = {0};
    int64_t dims[2] = {64, 32};
    cr_assert_eq(ir_tensor_alloc(&bad, IR_DTYPE_F32, 2, dims), IR_OK);
    cr_assert_eq(llvm_program_run(p, &bad, 1, &out, &d.diag), IR_EINVAL);
    cr_assert(strstr(tu_diag_text(&d), "guard failed: input 'a'"), "%s", tu_diag_text(&d));
    ir_tensor_free(&bad);
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

typedef struct ThreadArg {
    IrLlvmProgram *p;
    IrTensor in;
    IrTensor want;
    int64_t bad;
} ThreadArg;

static void *run_thread(void *u) {
    ThreadArg *a = u;
    IrDiag d;
    ir_diag_init(&d, NULL, NULL);
    for (int it = 0; it < 20; it++) {
        IrTensor out = {0};
        if (llvm_program_run(a->p, &a->in, 1, &out, &d)) {
            a->bad++;
            continue;
        }
        double w = 0;
        a->bad += count_bad(&out, &a->want, &w);
        ir_tensor_free(&out);
    }
    return NULL;
}

Test(backend_plan, concurrent_runs_on_one_program) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(chain, "t.ir", &d);
    cr_assert(g);
    IrLlvmProgram *p;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    ThreadArg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].p = p;
        make_inputs(g, "", &args[i].in);
        fill(&args[i].in, (uint64_t)i + 7);
        cr_assert_eq(ir_interp_run(g, &args[i].in, 1, &args[i].want, NULL, &d.diag), IR_OK);
    }
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, run_thread, &args[i]);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(args[i].bad, 0, "thread %d", i);
        ir_tensor_free(&args[i].in);
        ir_tensor_free(&args[i].want);
    }
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- torch models ---- */

static void check_torch(const char *name, const char *refused_op) {
    const char *s = getenv("IRTOOL_SHARED_DIR");
    if (!s) cr_skip_test("IRTOOL_SHARED_DIR is not set");
    char *dir = tu_path_join(s, "torch-models"), *dd = tu_path_join(dir, name);
    char *m = tu_path_join(dd, "model.onnx"), *x = tu_path_join(dd, "input_x.npy");
    if (tu_dir_count(dd) < 0) cr_skip_test("%s is absent", dd);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(m, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    IrTensor in = {0};
    cr_assert_eq(ir_npy_read(x, &d.diag, &in), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_graph_num_inputs(g), 1);
    IrStatus st = check_graph(g, &in, &d);
    if (refused_op) expect_unsupported(st, &d, refused_op);
    else cr_assert_eq(st, IR_OK, "%s: %s", name, tu_diag_text(&d));
    ir_tensor_free(&in);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    free(dir), free(dd), free(m), free(x);
}

Test(backend_torch, tiny_mlp) { check_torch("tiny_mlp", NULL); }
Test(backend_torch, encoder) { check_torch("encoder", NULL); }
Test(backend_torch, convnet) { check_torch("convnet", NULL); }
Test(backend_torch, branchy) { check_torch("branchy", NULL); }

/* ONNX "light" zoo models (weights generated by ConstantOfShape) on a deterministic input. */
/* logits: compare the Softmax's input instead of its output. The light models' synthetic
 * weights drive logits to ~1e9, where a softmax turns float rounding differences that are well
 * inside rtol 1e-4 into different one-hot outputs. */
static IrStatus check_light(const char *name, bool logits) {
    const char *s = getenv("IRTOOL_SHARED_DIR");
    if (!s) cr_skip_test("IRTOOL_SHARED_DIR is not set");
    char file[512];
    snprintf(file, sizeof file, "%s/onnx-tests/light/%s.onnx", s, name);
    FILE *f = fopen(file, "rb");
    if (!f) cr_skip_test("%s is absent", file);
    fclose(f);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(file, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    IrValueId out = ir_graph_output(g, 0);
    if (logits && ir_value_kind(g, out) == IR_VALUE_RESULT && ir_node_op(g, ir_value_def_node(g, out)) == IR_OP_SOFTMAX) {
        IrValueId pre = ir_node_operand(g, ir_value_def_node(g, out), 0);
        ir_region_set_outputs(g, IR_ROOT_REGION, 1, &pre);
    }
    IrTensor ins[MAX_IO] = {{0}};
    make_inputs(g, "", ins);
    IrStatus st = check_graph(g, ins, &d);
    if (st) {
        cr_assert_eq(st, IR_EUNSUPPORTED, "%s", tu_diag_text(&d));
        cr_assert(strstr(tu_diag_text(&d), "the llvm backend does not support "), "%s", tu_diag_text(&d));
        cr_log_info("%s: %s", name, tu_diag_text(&d));
    }
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) ir_tensor_free(&ins[i]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    return st;
}

Test(backend_light, resnet50, .timeout = 900) { cr_assert_eq(check_light("light_resnet50", false), IR_OK); }
Test(backend_light, squeezenet_logits, .timeout = 900) { cr_assert_eq(check_light("light_squeezenet", true), IR_OK); }
Test(backend_light, alexnet_logits, .timeout = 900) { cr_assert_eq(check_light("light_bvlc_alexnet", true), IR_OK); }

/* ---- the CLI ---- */

Test(backend_cli, run_llvm_prints_what_interp_prints) {
    char *model = tu_source_path("corpus/mlp.ir"), *x = tu_source_path("corpus/inputs/mlp_x.npy");
    const char *a1[] = {"run", model, "--input", x, NULL};
    const char *a2[] = {"run", model, "--input", x, "--backend", "llvm", NULL};
    TuRun r1, r2;
    cr_assert(tu_run_irtool(a1, NULL, 0, NULL, &r1));
    cr_assert(tu_run_irtool(a2, NULL, 0, NULL, &r2));
    cr_assert_eq(r1.status, 0, "%s", r1.err);
    cr_assert_eq(r2.status, 0, "%s", r2.err);
    cr_assert_str_eq(r2.out, r1.out);
    tu_run_free(&r1);
    tu_run_free(&r2);
    free(model);
    free(x);
}

Test(backend_cli, run_llvm_unsupported_op_names_it) {
    char dir[64], npy[64];
    snprintf(npy, sizeof npy, "/tmp/irtool_test_backend_%d.npy", (int)getpid());
    snprintf(dir, sizeof dir, "/tmp/irtool_test_backend_%d.ir", (int)getpid());
    FILE *f = fopen(dir, "w");
    cr_assert(f);
    fputs("graph @t(%x: f32[2, 5]) {\n  %y = Multinomial(%x) {sample_size = 3, seed = 1.0} : i32[2, 3]\n  return %y\n}\n", f);
    fclose(f);
    IrTensor t = {0};
    int64_t dims[2] = {2, 5};
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F32, 2, dims), IR_OK);
    IrDiag d;
    ir_diag_init(&d, NULL, NULL);
    cr_assert_eq(ir_npy_write(npy, &t, &d), IR_OK);
    const char *a[] = {"run", dir, "--backend=llvm", "--input", npy, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(a, NULL, 0, NULL, &r));
    remove(npy);
    remove(dir);
    cr_assert_eq(r.status, 1, "%s", r.err);
    cr_assert(strstr(r.err, "the llvm backend does not support Multinomial"), "%s", r.err);
    tu_run_free(&r);
    ir_tensor_free(&t);
}

Test(backend_cli, bench_prints_timings) {
    char *model = tu_source_path("corpus/conv_block.ir");
    const char *a[] = {"bench", model, "--backend", "llvm", "--iterations", "3", "--warmup", "1", NULL};
    TuRun r;
    cr_assert(tu_run_irtool(a, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "median_ms="), "%s", r.out);
    cr_assert(strstr(r.out, "p90_ms="), "%s", r.out);
    cr_assert(strstr(r.out, "workspace_bytes="), "%s", r.out);
    cr_assert(strstr(r.out, "peak_rss_kb="), "%s", r.out);
    tu_run_free(&r);
    free(model);
}

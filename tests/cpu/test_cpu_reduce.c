/* The reduction and statistics families (backend/cpu/reduce.c, backend/cpu/stats.c) against the
 * interpreter, one emitter for both kinds of shape: a model with every reduction, ArgMax, Hardmax,
 * CumSum, the GlobalPools, LRN, InstanceNorm, MVN and BatchNorm compiled once with symbolic dims
 * and run at bindings small and large (the large ones run in parts on the thread pool), and the
 * same ops with static shapes large enough to run in parts. rtol 1e-4, atol 1e-5; indices exact. */
#include "backend/backend.h"
#include "backend/runtime/abi.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT 20

/* One result per op of either family; x is [N, C, H, W] and the statistics [C]. */
#define OPS(N, C, H, W)                                                                                                   \
    "graph @r(%x: f32[" N ", " C ", " H ", " W "], %s: f32[" C "], %b: f32[" C "], %m: f32[" C "], %v0: f32[" C "]) {\n"   \
    "  const %ax: i64[1] = [3]\n  const %c1: i64[] = [1]\n  %v = Abs(%v0) : f32[" C "]\n"                                 \
    "  %l2 = ReduceL2(%x) {axes = [0, 2], keepdims = 0} : f32[" C ", " W "]\n"                                            \
    "  %mn = ReduceMean(%x) {axes = [1, 3]} : f32[" N ", 1, " H ", 1]\n"                                                  \
    "  %sm = ReduceSum(%x, %ax) {keepdims = 0} : f32[" N ", " C ", " H "]\n"                                              \
    "  %mx = ReduceMax(%x) {axes = [0, 1]} : f32[1, 1, " H ", " W "]\n"                                                   \
    "  %lse = ReduceLogSumExp(%x) {axes = [2]} : f32[" N ", " C ", 1, " W "]\n"                                           \
    "  %am = ArgMax(%x) {axis = 1} : i64[" N ", 1, " H ", " W "]\n"                                                       \
    "  %hm = Hardmax(%x) {axis = 2} : f32[" N ", " C ", " H ", " W "]\n"                                                  \
    "  %cs = CumSum(%x, %c1) {reverse = 1} : f32[" N ", " C ", " H ", " W "]\n"                                           \
    "  %gm = GlobalMaxPool(%x) : f32[" N ", " C ", 1, 1]\n  %ga = GlobalAveragePool(%x) : f32[" N ", " C ", 1, 1]\n"      \
    "  %lr = LRN(%x) {size = 3, alpha = 0.001, beta = 0.75, bias = 1.5} : f32[" N ", " C ", " H ", " W "]\n"              \
    "  %in = InstanceNormalization(%x, %s, %b) : f32[" N ", " C ", " H ", " W "]\n"                                       \
    "  %mv = MeanVarianceNormalization(%x) : f32[" N ", " C ", " H ", " W "]\n"                                           \
    "  %bn = BatchNormalization(%x, %s, %b, %m, %v) : f32[" N ", " C ", " H ", " W "]\n"                                  \
    "  %bt, %rm, %rv = BatchNormalization(%x, %s, %b, %m, %v) {training_mode = 1} : f32[" N ", " C ", " H ", " W "], "    \
    "f32[" C "], f32[" C "]\n"                                                                                            \
    "  return %l2, %mn, %sm, %mx, %lse, %am, %hm, %cs, %gm, %ga, %lr, %in, %mv, %bn, %bt, %rm, %rv\n}\n"

/* Inputs of model g for x of shape d (the statistics [d[1]]), deterministic in [-1, 1). */
static uint32_t make_inputs(const IrGraph *g, const int64_t *d, IrTensor *in) {
    uint32_t n = ir_graph_num_inputs(g);
    for (uint32_t i = 0; i < n; i++) {
        cr_assert_eq(ir_tensor_alloc(&in[i], IR_DTYPE_F32, i ? 1 : 4, i ? &d[1] : d), IR_OK);
        tu_fill_pm1(&in[i], i + 1);
    }
    return n;
}

/* Whether got matches the interpreter's want (indices exactly); the first difference in why. */
static bool matches(const IrTensor *got, const IrTensor *want, char *why, size_t cap) {
    if (got->dtype != want->dtype || got->rank != want->rank) return snprintf(why, cap, "dtype or rank"), false;
    for (uint32_t k = 0; k < want->rank; k++)
        if (got->dims[k] != want->dims[k]) return snprintf(why, cap, "dim %u", k), false;
    for (int64_t i = 0; i < ir_tensor_numel(want); i++) {
        double a = ir_elem_get_f64(got->dtype, got->data, (size_t)i), e = ir_elem_get_f64(want->dtype, want->data, (size_t)i);
        if (!(fabs(a - e) <= 1e-5 + 1e-4 * fabs(e))) return snprintf(why, cap, "element %lld: %g vs %g", (long long)i, a, e), false;
    }
    return true;
}

static IrGraph *parse(const char *text) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "r.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    return g;
}

/* Compiled once with symbolic dims, run at bindings from one element per dim to 8 x 32 x 40 x 40
 * (parts on the pool), each against the interpreter. */
Test(cpu_reduce, one_artifact_every_binding) {
    const char *text = "symbol N, C, H, W\nconstraint N in [1, 8]\nconstraint C in [1, 32]\n"
                       "constraint H in [1, 64]\nconstraint W in [1, 64]\n" OPS("N", "C", "H", "W");
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "r.ir"), *irx = tu_path_join(dir, "r.irx");
    cr_assert(tu_write_file(model, text, strlen(text)));
    TuRun r = tu_compile_unbound(model, irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "symbolic dims"), "%s", r.out);
    tu_run_free(&r);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    IrGraph *g = parse(text);
    const int64_t shapes[][4] = {{1, 1, 1, 1}, {2, 3, 5, 7}, {8, 32, 40, 40}, {3, 1, 64, 33}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        IrTensor in[5] = {{0}}, ref[MAX_OUT] = {{0}};
        uint32_t n_in = make_inputs(g, shapes[si], in), n_out = irt_num_outputs(a);
        cr_assert(n_out <= MAX_OUT);
        TuDiag d;
        tu_diag_init(&d);
        cr_assert_eq(ir_interp_run(g, in, n_in, ref, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
        tu_diag_free(&d);
        IrtTensor ri[5], out[MAX_OUT];
        for (uint32_t i = 0; i < n_in; i++) {
            IrtTensor info;
            irt_input_info(a, i, &info);
            ri[i] = (IrtTensor){.dtype = info.dtype, .rank = in[i].rank, .data = in[i].data};
            for (uint32_t k = 0; k < in[i].rank; k++) ri[i].dims[k] = in[i].dims[k];
        }
        cr_assert_eq(irt_run(a, ri, out, err, sizeof err), 0, "%s", err);
        for (uint32_t j = 0; j < n_out; j++) {
            IrTensor got = {.dtype = ref[j].dtype, .rank = out[j].rank, .data = out[j].data};
            for (uint32_t k = 0; k < out[j].rank; k++) got.dims[k] = out[j].dims[k];
            char why[160];
            cr_expect(matches(&got, &ref[j], why, sizeof why), "shape %zu, output %s: %s", si,
                      ir_value_name(g, ir_graph_output(g, j)), why);
            free(out[j].data);
            ir_tensor_free(&ref[j]);
        }
        for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&in[i]);
    }
    ir_graph_destroy(g);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(irx), free(dir);
}

/* Static shapes of 8 x 32 x 40 x 40: the reductions and BatchNorm run in parts on the pool. */
Test(cpu_reduce, static_shapes_in_parts) {
    IrGraph *g = parse(OPS("8", "32", "40", "40"));
    IrTensor in[5] = {{0}}, ref[MAX_OUT] = {{0}}, out[MAX_OUT] = {{0}};
    uint32_t n_in = make_inputs(g, (int64_t[]){8, 32, 40, 40}, in), n_out = ir_graph_num_outputs(g);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_interp_run(g, in, n_in, ref, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_program_create(g, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_run(p, in, n_in, out, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (uint32_t j = 0; j < n_out; j++) {
        char why[160];
        cr_expect(matches(&out[j], &ref[j], why, sizeof why), "output %s: %s", ir_value_name(g, ir_graph_output(g, j)), why);
        ir_tensor_free(&out[j]);
        ir_tensor_free(&ref[j]);
    }
    for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&in[i]);
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* Dims an operand's values decide (Slice starts/ends, TopK's K, Split sizes, ReduceSum and
 * Unsqueeze/Squeeze axes given as graph inputs): one artifact, compiled with `irtool compile`
 * and no --input (nor gate), runs at several deciding values and input shapes through libirtool-runtime
 * and matches the interpreter, output dims included; operands that give no valid shape fail the
 * run with a message, never a crash. */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* One input of a run: the given i64 values, the given f32 values, or f32 data from a seed. */
typedef struct In {
    uint32_t rank;
    int64_t dims[4];
    const int64_t *ints;
    const float *floats;
} In;


static void make_inputs(IrtArtifact *a, const In *ins, uint32_t n_in, IrTensor *t, IrtTensor *ri) {
    for (uint32_t i = 0; i < n_in; i++) {
        IrDType dt = ins[i].ints ? IR_DTYPE_I64 : IR_DTYPE_F32;
        cr_assert_eq(ir_tensor_alloc(&t[i], dt, ins[i].rank, ins[i].dims), IR_OK);
        if (ins[i].ints) memcpy(t[i].data, ins[i].ints, (size_t)ir_tensor_numel(&t[i]) * sizeof(int64_t));
        else if (ins[i].floats) memcpy(t[i].data, ins[i].floats, (size_t)ir_tensor_numel(&t[i]) * sizeof(float));
        else tu_fill_pm1(&t[i], i + 7);
        ri[i] = (IrtTensor){.dtype = irt_dtype_code(a, ir_dtype_name(dt)), .rank = ins[i].rank, .data = t[i].data};
        memcpy(ri[i].dims, ins[i].dims, sizeof ins[i].dims);
    }
}

/* Runs the artifact and the interpreter on the same inputs; every output's dims and elements
 * (f32 within 1e-5 + 1e-4 relative, i64 exactly) agree. */
static void check_run(const char *model, IrtArtifact *a, const In *ins, uint32_t n_in) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(model, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    uint32_t n_out = irt_num_outputs(a);
    cr_assert(n_in <= 8 && n_out <= 8);
    IrTensor in[8] = {0}, ref[8] = {0};
    IrtTensor ri[8], out[8];
    make_inputs(a, ins, n_in, in, ri);
    IrInterpOptions o = {0};
    cr_assert_eq(ir_interp_run(g, in, n_in, ref, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    char err[1024];
    cr_assert_eq(irt_run_n(a, n_in, ri, n_out, out, err, sizeof err), 0, "%s", err);
    for (uint32_t j = 0; j < n_out; j++) {
        char what[32];
        snprintf(what, sizeof what, "output %u", j);
        tu_assert_output_close(&ref[j], out[j].rank, out[j].dims, out[j].data, what);
        free(out[j].data);
        ir_tensor_free(&ref[j]);
    }
    for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&in[i]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* The run fails with a message containing want (and writes no outputs). */
static void check_fails(IrtArtifact *a, const In *ins, uint32_t n_in, const char *want) {
    IrTensor in[8] = {0};
    IrtTensor ri[8], out[8] = {0};
    make_inputs(a, ins, n_in, in, ri);
    char err[1024] = "";
    cr_assert_neq(irt_run_n(a, n_in, ri, irt_num_outputs(a), out, err, sizeof err), 0, "the run should fail");
    cr_assert(strstr(err, want), "%s", err);
    for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&in[i]);
}

#define X(n) {.rank = 2, .dims = {n, 6}}
#define INTS(...) {.rank = 1, .dims = {sizeof((int64_t[]){__VA_ARGS__}) / 8}, .ints = (const int64_t[]){__VA_ARGS__}}

static const char *slice_topk_model = "symbol N\nconstraint N in [1, 16]\n"
                                      "graph @v(%x: f32[N, 6], %starts: i64[1], %ends: i64[1], %k: i64[1]) {\n"
                                      "  %y = Slice(%x, %starts, %ends)\n"
                                      "  %r = Relu(%y)\n"
                                      "  %t, %ti = TopK(%x, %k) {axis = 1}\n"
                                      "  %e = Exp(%t)\n"
                                      "  return %r, %e, %ti\n}\n";

/* Slice's rows and TopK's K as inputs: the result dims follow the values at every run, the ops
 * after them (Relu, Exp) read the computed dims, and the output shapes come back. */
Test(cpu_value_dims, slice_and_topk_follow_their_inputs) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir, slice_topk_model, &model);
    IrtTensor info;
    irt_output_info(a, 0, &info);
    cr_assert(info.rank == 2 && info.dims[0] == -1 && info.dims[1] == 6, "the sliced dim is reported as -1: %u [%lld, %lld]", info.rank,
              (long long)info.dims[0], (long long)info.dims[1]);
    const In runs[][4] = {
        {X(5), INTS(1), INTS(4), INTS(2)},
        {X(9), INTS(-3), INTS(100), INTS(5)},
        {X(16), INTS(0), INTS(-1), INTS(6)},
        {X(3), INTS(2), INTS(1), INTS(0)}, /* an empty slice, K 0 */
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) check_run(model, a, runs[i], 4);
    const In big_k[4] = {X(4), INTS(0), INTS(2), INTS(7)};
    check_fails(a, big_k, 4, "TopK");
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

static const char *axes_model = "symbol N\nconstraint N in [1, 16]\n"
                                "graph @w(%x: f32[N, 6], %ax: i64[1], %sz: i64[2], %one: f32[1, N], %sq: i64[1]) {\n"
                                "  %u = Unsqueeze(%x, %ax)\n"
                                "  %s = ReduceSum(%x, %ax) {keepdims = 1}\n"
                                "  %d = ReduceSum(%x, %ax) {keepdims = 0}\n"
                                "  %a, %b = Split(%x, %sz) {axis = 1}\n"
                                "  %q = Squeeze(%one, %sq)\n"
                                "  %e = Exp(%b)\n"
                                "  return %u, %s, %d, %a, %e, %q\n}\n";

/* Axes and split sizes as inputs: Unsqueeze, Squeeze, ReduceSum with and without keepdims and
 * Split give the shapes the values say, at two axes and two batch sizes; invalid ones fail. */
Test(cpu_value_dims, axes_and_sizes_follow_their_inputs) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir, axes_model, &model);
#define ONE(n) {.rank = 2, .dims = {1, n}}
    const In runs[][5] = {
        {X(5), INTS(0), INTS(2, 4), ONE(5), INTS(0)},
        {X(11), INTS(-1), INTS(6, 0), ONE(11), INTS(-2)},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) check_run(model, a, runs[i], 5);
    const In bad_sizes[5] = {X(5), INTS(0), INTS(2, 3), ONE(5), INTS(0)};
    check_fails(a, bad_sizes, 5, "Split");
    const In bad_axis[5] = {X(5), INTS(3), INTS(2, 4), ONE(5), INTS(0)};
    check_fails(a, bad_axis, 5, "invalid");
    const In bad_squeeze[5] = {X(5), INTS(0), INTS(2, 4), ONE(5), INTS(1)}; /* that dim is 5, not 1 */
    check_fails(a, bad_squeeze, 5, "Squeeze");
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

static const char *tile_pad_model = "symbol N\n"
                                    "graph @t(%x: f32[N, 3], %reps: i64[2], %pads: i64[4], %shape: i64[2], %ind: i64[3],\n"
                                    "         %depth: f32[], %vals: f32[2]) {\n"
                                    "  %y = Tile(%x, %reps)\n"
                                    "  %r = Relu(%y)\n"
                                    "  %p = Pad(%r, %pads) {mode = \"reflect\"}\n"
                                    "  %e = Exp(%p)\n"
                                    "  %c = ConstantOfShape(%shape) {value = f32[1] [2.5]}\n"
                                    "  %h = OneHot(%ind, %depth, %vals) {axis = 0}\n"
                                    "  return %e, %c, %h\n}\n";

/* Tile's repeats, Pad's pads, ConstantOfShape's shape and OneHot's depth (f32) as graph inputs,
 * N without a bound:
 * symbols bound from the inputs' values size the results and the workspace per run, so one
 * artifact serves every repeat count; a negative entry is refused naming it. */
Test(cpu_value_dims, tile_pad_sizes_from_input_values) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir, tile_pad_model, &model);
#define F(...) {.rank = sizeof((float[]){__VA_ARGS__}) / 4 > 1, .dims = {sizeof((float[]){__VA_ARGS__}) / 4}, .floats = (const float[]){__VA_ARGS__}}
    const In runs[][7] = {
        {{.rank = 2, .dims = {2, 3}}, INTS(2, 1), INTS(1, 0, 0, 2), INTS(2, 3), INTS(0, 2, -1), F(3.0f), F(-1.0f, 4.0f)},
        {{.rank = 2, .dims = {5, 3}}, INTS(3, 4), INTS(0, 2, 3, 1), INTS(0, 7), INTS(1, 9, 4), F(10.7f), F(0.0f, 1.0f)},
        {{.rank = 2, .dims = {40, 3}}, INTS(20, 30), INTS(2, 2, 2, 2), INTS(64, 65), INTS(0, 0, 0), F(1.0f), F(2.0f, 3.0f)},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) check_run(model, a, runs[i], 7);
    const In negative[7] = {{.rank = 2, .dims = {2, 3}}, INTS(-1, 1), INTS(0, 0, 0, 0), INTS(1, 1), INTS(0, 0, 0), F(2.0f), F(0.0f, 1.0f)};
    check_fails(a, negative, 7, "entry 0 of input reps");
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

static const char *reshape_expand_model = "symbol N\nconstraint N in [1, 16]\n"
                                          "graph @r(%x: f32[N, 6], %shape: i64[3], %eshape: i64[3], %b: f32[N, 1]) {\n"
                                          "  %y = Reshape(%x, %shape)\n"
                                          "  %r = Relu(%y)\n"
                                          "  %z = Expand(%b, %eshape)\n"
                                          "  %e = Exp(%z)\n"
                                          "  return %r, %e\n}\n";

/* Reshape's and Expand's shapes as graph inputs: Reshape's dims (0 copies the input's, -1 is
 * inferred) are computed by its kernel, Expand's broadcast the input with the values; the ops
 * after them read those dims. A shape that does not hold the elements, or does not broadcast,
 * fails the run naming the op. */
Test(cpu_value_dims, reshape_and_expand_follow_their_inputs) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir, reshape_expand_model, &model);
#define B(n) {.rank = 2, .dims = {n, 1}}
    const In runs[][4] = {
        {X(4), INTS(2, -1, 3), INTS(2, 1, 5), B(4)},
        {X(10), INTS(0, 3, 2), INTS(1, 1, 7), B(10)},
        {X(16), INTS(-1, 1, 48), INTS(3, 16, 1), B(16)},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) check_run(model, a, runs[i], 4);
    const In bad_reshape[4] = {X(4), INTS(5, -1, 1), INTS(1, 1, 1), B(4)}; /* 24 elements in rows of 5 */
    check_fails(a, bad_reshape, 4, "Reshape");
    const In bad_expand[4] = {X(4), INTS(4, 6, 1), INTS(1, 3, 5), B(4)}; /* dim 4 against 3 */
    check_fails(a, bad_expand, 4, "Expand");
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* `irtool inspect` says which input entries bind which symbols: a value itself (Tile's repeats)
 * or the value times a dim, truncated (Resize's scales). */
Test(cpu_value_dims, inspect_names_value_bindings) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir,
                                              "symbol N\ngraph @t(%x: f32[N, 4], %sc: f32[2], %r: i64[2]) {\n"
                                              "  %y = Resize(%x, _, %sc) {mode = \"nearest\"}\n  %z = Tile(%x, %r)\n"
                                              "  return %y, %z\n}\n",
                                              &model);
    irt_free(a);
    char *irx = tu_path_join(dir, "m.irx");
    const char *args[] = {"inspect", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "input 1 entry 0 times N, truncated (read before the run), binds value1_0_mul_N\n"), "%s", r.out);
    cr_assert(strstr(r.out, "input 1 entry 1 times 4, truncated (read before the run), binds value1_1_mul4\n"), "%s", r.out);
    cr_assert(strstr(r.out, "input 2 entry 1 (its value, read before the run) binds value2_1\n"), "%s", r.out);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(irx), free(model), free(dir);
}

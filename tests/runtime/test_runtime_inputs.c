/* libirtool-runtime on a caller's mistakes: every wrong input to irt_run (dims left at -1, no
 * data, negative or overflowing dims, wrong rank or dtype, too few inputs, a wrong name) is one
 * clear error naming the input, the dtype and the symbol, never a crash or a -1 in the text.
 * Artifacts: corpus/attention.ir (symbols B in 1..16, S in 1..512) and corpus/mlp.ir (a
 * symbolic batch), compiled once per test. */
#include "backend/runtime/runtime.h"
#include "ir/ir.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

typedef struct Fixture {
    char *dir;
    IrtArtifact *a;
} Fixture;

static Fixture load(const char *corpus) {
    Fixture f = {.dir = tu_mkdtemp()};
    char *model = tu_source_path(corpus), *irx = tu_path_join(f.dir, "m.irx");
    TuRun r = tu_compile_unbound(model, irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char err[1024];
    f.a = irt_load(irx, err, sizeof err);
    cr_assert(f.a, "%s", err);
    free(model), free(irx);
    return f;
}

static void unload(Fixture *f) {
    irt_free(f->a);
    tu_rmtree(f->dir);
    free(f->dir);
}

/* attention's inputs x[B, S, 32], mask[B, S, S] for B = 2, S = 5, over caller-owned data. */
static float X[2 * 5 * 32], MASK[2 * 5 * 5];
static void attention_inputs(const IrtArtifact *a, IrtTensor in[2]) {
    int32_t f32 = irt_dtype_code(a, "f32");
    in[0] = (IrtTensor){.dtype = f32, .rank = 3, .dims = {2, 5, 32}, .data = X};
    in[1] = (IrtTensor){.dtype = f32, .rank = 3, .dims = {2, 5, 5}, .data = MASK};
}

/* Runs with in, expects failure with `want` in the message (and no "-1" or "dtype?"). */
static void expect_error(IrtArtifact *a, const IrtTensor *in, const char *want) {
    IrtTensor out[4];
    char err[1024] = "";
    cr_assert_eq(irt_run(a, in, out, err, sizeof err), -1, "expected an error: %s", want);
    cr_assert(strstr(err, want), "got '%s', wanted '%s'", err, want);
    cr_assert(!strstr(err, "dtype?"), "%s", err);
}

Test(runtime_inputs, info_passed_straight_back) {
    Fixture f = load("corpus/attention.ir");
    IrtTensor in[2];
    for (uint32_t i = 0; i < 2; i++) irt_input_info(f.a, i, &in[i]); /* dims -1, data NULL */
    expect_error(f.a, in, "input 'x' dim 0 is -1: pass the shape of the data, which binds B (compiled for f32[B, S, 32])");
    unload(&f);
    f = load("corpus/mlp.ir"); /* a symbolic batch */
    cr_assert_str_eq(irt_output_dim_symbol(f.a, 0, 0), "B");
    cr_assert_null(irt_output_dim_symbol(f.a, 0, 1));
    irt_input_info(f.a, 0, &in[0]);
    expect_error(f.a, in, "input 'x' dim 0 is -1: pass the shape of the data, which binds B (compiled for f32[B, 64])");
    unload(&f);
}

Test(runtime_inputs, null_data) {
    Fixture f = load("corpus/attention.ir");
    IrtTensor in[2];
    attention_inputs(f.a, in);
    in[1].data = NULL;
    expect_error(f.a, in, "input 'mask' has no data (NULL) for its 200 bytes");
    IrtTensor out[1];
    char err[256];
    cr_assert_eq(irt_run(f.a, NULL, out, err, sizeof err), -1);
    cr_assert(strstr(err, "no inputs given (NULL); the artifact takes 2"), "%s", err);
    attention_inputs(f.a, in);
    cr_assert_eq(irt_run(f.a, in, NULL, err, sizeof err), -1);
    cr_assert(strstr(err, "no room for the outputs"), "%s", err);
    unload(&f);
}

Test(runtime_inputs, negative_and_overflowing_dims) {
    Fixture f = load("corpus/attention.ir");
    IrtTensor in[2];
    attention_inputs(f.a, in);
    in[0].dims[1] = -7;
    expect_error(f.a, in, "input 'x' dim 1 is -7: pass the shape of the data, which binds S");
    attention_inputs(f.a, in);
    in[1].dims[0] = in[1].dims[1] = in[1].dims[2] = (int64_t)1 << 40;
    expect_error(f.a, in, "input 'mask' is too large: its dims overflow a byte count");
    attention_inputs(f.a, in);
    in[0].dims[2] = INT64_MAX;
    expect_error(f.a, in, "input 'x' dim 2 is 9223372036854775807, the artifact was compiled for 32 (f32[B, S, 32])");
    unload(&f);
}

Test(runtime_inputs, symbol_out_of_range_names_it) {
    Fixture f = load("corpus/attention.ir");
    IrtTensor in[2];
    attention_inputs(f.a, in);
    static float big_x[1 * 600 * 32];
    in[0] = (IrtTensor){.dtype = in[0].dtype, .rank = 3, .dims = {1, 600, 32}, .data = big_x};
    in[1] = (IrtTensor){.dtype = in[0].dtype, .rank = 3, .dims = {1, 600, 600}, .data = big_x}; /* never read */
    expect_error(f.a, in, "S = 600 is outside 1..512 (input 'x' dim 1)");
    attention_inputs(f.a, in);
    in[1].dims[1] = 4;
    expect_error(f.a, in, "input 'mask' dim 1 is 4 but S = 5 from an earlier input dim");
    unload(&f);
    f = load("corpus/mlp.ir");
    static float xs[100 * 64];
    in[0] = (IrtTensor){.dtype = irt_dtype_code(f.a, "f32"), .rank = 2, .dims = {100, 64}, .data = xs};
    expect_error(f.a, in, "B = 100 is outside 1..64 (input 'x' dim 0)");
    unload(&f);
}

Test(runtime_inputs, wrong_rank_and_dtype) {
    Fixture f = load("corpus/attention.ir");
    IrtTensor in[2];
    attention_inputs(f.a, in);
    in[0].rank = 2;
    expect_error(f.a, in, "input 'x' has rank 2, the artifact was compiled for rank 3 (f32[B, S, 32])");
    attention_inputs(f.a, in);
    in[0].rank = 40; /* past IRT_MAX_RANK: not read beyond dims[] */
    expect_error(f.a, in, "input 'x' has rank 40");
    attention_inputs(f.a, in);
    in[0].dtype = irt_dtype_code(f.a, "f64"); /* f64 is not in this artifact's manifest: still named */
    cr_assert_neq(in[0].dtype, -1);
    expect_error(f.a, in, "input 'x' has dtype f64, the artifact was compiled for f32 (f32[B, S, 32])");
    in[0].dtype = 99;
    expect_error(f.a, in, "input 'x' has dtype unknown code 99, the artifact was compiled for f32");
    unload(&f);
}

Test(runtime_inputs, counts_and_names) {
    Fixture f = load("corpus/attention.ir");
    IrtTensor in[2], out[4];
    attention_inputs(f.a, in);
    char err[512];
    cr_assert_eq(irt_run_n(f.a, 1, in, 4, out, err, sizeof err), -1);
    cr_assert(strstr(err, "1 input given, the artifact takes 2 ('x', 'mask')"), "%s", err);
    cr_assert_eq(irt_run_n(f.a, 2, in, 0, out, err, sizeof err), -1);
    cr_assert(strstr(err, "room for 0 outputs given, the artifact returns 1"), "%s", err);
    cr_assert_eq(irt_input_find(f.a, "mask", err, sizeof err), 1);
    cr_assert_eq(irt_input_find(f.a, "msk", err, sizeof err), -1);
    cr_assert(strstr(err, "unknown input 'msk' (did you mean 'mask'?); the artifact's inputs are 'x', 'mask'"), "%s", err);
    cr_assert_eq(irt_input_find(f.a, "input", err, sizeof err), -1);
    cr_assert(!strstr(err, "did you mean"), "%s", err);
    cr_assert_eq(irt_output_find(f.a, irt_output_name(f.a, 0), err, sizeof err), 0);
    cr_assert_eq(irt_run_n(f.a, 2, in, 4, out, err, sizeof err), 0, "%s", err);
    cr_assert_eq(out[0].rank, 3);
    cr_assert(out[0].dims[0] == 2 && out[0].dims[1] == 5 && out[0].dims[2] == 32);
    irt_tensor_free(&out[0]);
    cr_assert_null(out[0].data);
    unload(&f);
}

/* irt_input_dim_symbol names symbolic dims; the runtime's dtype names agree with ir/'s. */
Test(runtime_inputs, dim_symbols_and_dtype_names) {
    Fixture f = load("corpus/attention.ir");
    cr_assert_str_eq(irt_input_dim_symbol(f.a, 1, 0), "B");
    cr_assert_str_eq(irt_input_dim_symbol(f.a, 1, 2), "S");
    cr_assert_null(irt_input_dim_symbol(f.a, 0, 2));
    cr_assert_null(irt_input_dim_symbol(f.a, 5, 0));
    for (int d = IR_DTYPE_NONE + 1; d < IR_DTYPE_COUNT; d++) {
        cr_assert_str_eq(irt_dtype_name(f.a, d), ir_dtype_name((IrDType)d));
        cr_assert_eq(irt_dtype_code(f.a, ir_dtype_name((IrDType)d)), d);
        cr_assert_eq(irt_dtype_size(f.a, d), ir_dtype_size((IrDType)d), "%s", ir_dtype_name((IrDType)d));
    }
    cr_assert_str_eq(irt_dtype_name(f.a, 99), "?");
    cr_assert_eq(irt_dtype_code(f.a, "f31"), -1);
    unload(&f);
}

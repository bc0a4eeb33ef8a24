/* Signal ops with shapes known at run time only: one artifact (`irtool compile`, no --input) of
 * HannWindow and BlackmanWindow (size a scalar input), an inverse DFT over N, STFT (frame_step,
 * frame_length scalar inputs, signal length L) and MelWeightMatrix (scalar inputs), the DFT and
 * STFT inputs complex or real (C = 2 or 1), runs at two sets of sizes and matches the interpreter,
 * output dims included; scalars that give no valid shape fail the run with a message. Range
 * with a length from a dim likewise. */
#include "backend/backend.h"
#include "backend/runtime/runtime.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define N_IN 10

/* One input: an i64 scalar, an f32 scalar, or f32 data of the given dims from a seed. */
typedef struct In {
    uint32_t rank;
    int64_t dims[3];
    bool is_int, is_float;
    double v;
} In;

#define I(x) {.is_int = true, .v = (x)}
#define F(x) {.is_float = true, .v = (x)}

static const char *model_text = "symbol N\nsymbol L\nsymbol C\n"
                                "graph @s(%size: i64[], %x: f32[N, C], %sig: f32[1, L, C], %step: i64[], %flen: i64[],\n"
                                "         %nmel: i64[], %dft: i64[], %sr: i64[], %lo: f32[], %hi: f32[]) {\n"
                                "  %w = HannWindow(%size) {periodic = 0}\n"
                                "  %b = BlackmanWindow(%size)\n"
                                "  %y = DFT(%x) {axis = 0, inverse = 1}\n"
                                "  %s = STFT(%sig, %step, _, %flen) {onesided = 0}\n"
                                "  %m = MelWeightMatrix(%nmel, %dft, %sr, %lo, %hi)\n"
                                "  return %w, %b, %y, %s, %m\n}\n";

static void make_inputs(IrtArtifact *a, const In *ins, IrTensor *t, IrtTensor *ri) {
    for (uint32_t i = 0; i < N_IN; i++) {
        IrDType dt = ins[i].is_int ? IR_DTYPE_I64 : IR_DTYPE_F32;
        cr_assert_eq(ir_tensor_alloc(&t[i], dt, ins[i].rank, ins[i].dims), IR_OK);
        if (ins[i].is_int) ((int64_t *)t[i].data)[0] = (int64_t)ins[i].v;
        else if (ins[i].is_float) ((float *)t[i].data)[0] = (float)ins[i].v;
        else tu_fill_pm1(&t[i], i + 3);
        ri[i] = (IrtTensor){.dtype = irt_dtype_code(a, ir_dtype_name(dt)), .rank = ins[i].rank, .data = t[i].data};
        memcpy(ri[i].dims, ins[i].dims, sizeof ins[i].dims);
    }
}

/* The artifact and the interpreter agree on every output's dims and elements (within 1e-5 +
 * 1e-4 relative). */
static void check_run(const char *model, IrtArtifact *a, const In *ins) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(model, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    uint32_t n_out = irt_num_outputs(a);
    cr_assert_eq(n_out, 5);
    IrTensor in[N_IN] = {0}, ref[5] = {0};
    IrtTensor ri[N_IN], out[5];
    make_inputs(a, ins, in, ri);
    IrInterpOptions o = {0};
    cr_assert_eq(ir_interp_run(g, in, N_IN, ref, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    char err[1024];
    cr_assert_eq(irt_run_n(a, N_IN, ri, n_out, out, err, sizeof err), 0, "%s", err);
    for (uint32_t j = 0; j < n_out; j++) {
        char what[32];
        snprintf(what, sizeof what, "output %u", j);
        tu_assert_output_close(&ref[j], out[j].rank, out[j].dims, out[j].data, what);
        free(out[j].data);
        ir_tensor_free(&ref[j]);
    }
    for (uint32_t i = 0; i < N_IN; i++) ir_tensor_free(&in[i]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* The run fails with a message containing want. */
static void check_fails(IrtArtifact *a, const In *ins, const char *want) {
    IrTensor in[N_IN] = {0};
    IrtTensor ri[N_IN], out[5] = {0};
    make_inputs(a, ins, in, ri);
    char err[1024] = "";
    cr_assert_neq(irt_run_n(a, N_IN, ri, irt_num_outputs(a), out, err, sizeof err), 0, "the run should fail");
    cr_assert(strstr(err, want), "%s", err);
    for (uint32_t i = 0; i < N_IN; i++) ir_tensor_free(&in[i]);
}

Test(cpu_signal_shapes, one_artifact_two_sizes) {
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir, model_text, &model);
    const In runs[2][N_IN] = {
        {I(10), {.rank = 2, .dims = {8, 2}}, {.rank = 3, .dims = {1, 64, 2}}, I(8), I(16), I(8), I(16), I(8000), F(0), F(4000)},
        {I(33), {.rank = 2, .dims = {13, 1}}, {.rank = 3, .dims = {1, 100, 1}}, I(5), I(11), I(12), I(31), I(16000), F(50), F(7000)},
    };
    for (int i = 0; i < 2; i++) check_run(model, a, runs[i]);
    In bad[N_IN];
    memcpy(bad, runs[0], sizeof bad);
    bad[4] = (In)I(80); /* frame_length past the signal */
    check_fails(a, bad, "STFT %s: frame_length is 80, expected 1 to 64 (the signal length)");
    memcpy(bad, runs[0], sizeof bad);
    bad[3] = (In)I(0); /* frame_step */
    check_fails(a, bad, "STFT %s: frame_step is 0, expected a positive value");
    memcpy(bad, runs[0], sizeof bad);
    bad[1] = (In){.rank = 2, .dims = {8, 3}}; /* neither real nor complex */
    bad[2] = (In){.rank = 3, .dims = {1, 64, 3}};
    check_fails(a, bad, "DFT %y: the input's last dim is 3, expected 1 (real) or 2 (complex)");
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* Range whose limit is a dim (Range(2, S, 3): S/3 elements) runs on the same emitter as Range
 * with a static length; one artifact at S = 11 and S = 4. */
Test(cpu_signal_shapes, range_of_a_symbolic_length) {
    static const char *text = "symbol S\nconstraint S in [1, 64]\n"
                              "graph @r(%x: f32[S]) {\n"
                              "  %s = Shape(%x)\n"
                              "  %i = Constant() {value = i64[] [0]}\n"
                              "  %lim = Gather(%s, %i)\n"
                              "  %st = Constant() {value = i64[] [2]}\n"
                              "  %d = Constant() {value = i64[] [3]}\n"
                              "  %y = Range(%st, %lim, %d)\n"
                              "  return %y\n}\n";
    char *dir = tu_mkdtemp(), *model;
    IrtArtifact *a = tu_compile_symbolic_text(dir, text, &model);
    for (int64_t n = 4; n <= 11; n += 7) {
        IrTensor x;
        cr_assert_eq(ir_tensor_alloc(&x, IR_DTYPE_F32, 1, &n), IR_OK);
        IrtTensor rx = {.dtype = irt_dtype_code(a, "f32"), .rank = 1, .dims = {n}, .data = x.data}, out = {0};
        char err[1024];
        cr_assert_eq(irt_run_n(a, 1, &rx, 1, &out, err, sizeof err), 0, "%s", err);
        cr_assert_eq(out.rank, 1);
        cr_assert_eq(out.dims[0], n / 3, "S = %lld: %lld elements", (long long)n, (long long)out.dims[0]);
        for (int64_t i = 0; i < out.dims[0]; i++) cr_assert_eq(((int64_t *)out.data)[i], 2 + 3 * i);
        free(out.data);
        ir_tensor_free(&x);
    }
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* The LLVM backend's signal emitters (backend/cpu/signal.c) against the
 * reference interpreter: the three windows, DFT (real, complex, inverse,
 * onesided, dft_length constant or given at run time), STFT (window,
 * frame_length at run time, complex signal), MelWeightMatrix and Range with
 * inputs given at run time. Each model is compiled for its declared output
 * shape; scalars that give another shape fail the run naming the node and both
 * sizes, and what the backend cannot do is refused at compile time. Floats
 * within rtol 1e-4, atol 1e-5. */
#include "backend/backend.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IN 6

/* One input: a scalar of value v (rank 0), or a filled tensor of the given
 * dims. */
typedef struct In {
    IrDType dt;
    double v;
    uint32_t rank;
    int64_t dims[4];
} In;

static void make_input(IrTensor *t, const In *in, uint64_t seed) {
    cr_assert_eq(ir_tensor_alloc(t, in->dt, in->rank, in->dims), IR_OK);
    if (in->rank == 0) {
        ir_elem_set_f64(in->dt, t->data, 0, in->v);
        return;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (seed * 0x100000001B3ull);
    for (int64_t i = 0; i < ir_tensor_numel(t); i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ir_elem_set_f64(in->dt, t->data, (size_t)i, 4.0 * ((double)(x >> 40) / (double)(1ull << 24)) - 2.0);
    }
}

typedef struct Model {
    IrGraph *g;
    IrLlvmProgram *p;
    IrTensor in[MAX_IN];
    uint32_t n;
} Model;

/* Parses text and compiles it with the llvm backend (inputs made from ins); the
 * status. */
static IrStatus model_compile(Model *m, const char *text, const In *ins, uint32_t n, TuDiag *d) {
    memset(m, 0, sizeof *m);
    m->g = tu_parse(text, "t.ir", d);
    cr_assert(m->g, "%s", tu_diag_text(d));
    cr_assert_eq(ir_verify(m->g, &d->diag), IR_OK, "%s", tu_diag_text(d));
    cr_assert(n <= MAX_IN);
    m->n = n;
    for (uint32_t i = 0; i < n; i++) make_input(&m->in[i], &ins[i], i + 1);
    IrStatus s = llvm_specialize_inputs(m->g, m->in, n, &d->diag);
    return s ? s : llvm_program_create(m->g, &d->diag, &m->p);
}

static void model_free(Model *m) {
    llvm_program_destroy(m->p);
    for (uint32_t i = 0; i < m->n; i++) ir_tensor_free(&m->in[i]);
    ir_graph_destroy(m->g);
}

/* Sets scalar input i to v. */
static void model_set(Model *m, uint32_t i, double v) { ir_elem_set_f64(m->in[i].dtype, m->in[i].data, 0, v); }

/* Runs the program and the interpreter on the current inputs and compares every
 * output. */
static void model_check(Model *m) {
    TuDiag d;
    tu_diag_init(&d);
    uint32_t no = ir_graph_num_outputs(m->g);
    IrTensor got[4] = {{0}}, want[4] = {{0}};
    cr_assert(no <= 4);
    cr_assert_eq(ir_interp_run(m->g, m->in, m->n, want, NULL, &d.diag), IR_OK, "interp: %s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_run(m->p, m->in, m->n, got, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (uint32_t o = 0; o < no; o++) {
        cr_assert_eq(got[o].dtype, want[o].dtype, "output %u dtype", o);
        cr_assert_eq(ir_tensor_numel(&got[o]), ir_tensor_numel(&want[o]), "output %u size", o);
        int64_t bad = 0;
        double worst = 0;
        for (int64_t i = 0; i < ir_tensor_numel(&want[o]); i++) {
            double a = ir_elem_get_f64(got[o].dtype, got[o].data, (size_t)i);
            double b = ir_elem_get_f64(want[o].dtype, want[o].data, (size_t)i);
            if (a == b || (isnan(a) && isnan(b))) continue;
            double e = fabs(a - b), tol = ir_dtype_is_float(want[o].dtype) ? 1e-5 + 1e-4 * fabs(b) : 0;
            if (e > worst) worst = e;
            if (!(e <= tol)) bad++;
        }
        cr_expect_eq(bad, 0, "output %u: %lld elements differ (worst %g)", o, (long long)bad, worst);
        ir_tensor_free(&got[o]), ir_tensor_free(&want[o]);
    }
    tu_diag_free(&d);
}

/* Runs the program on the current inputs: the run must fail with want in its
 * message. */
static void model_fails(Model *m, const char *want) {
    TuDiag d;
    tu_diag_init(&d);
    IrTensor got[4] = {{0}};
    IrStatus s = llvm_program_run(m->p, m->in, m->n, got, &d.diag);
    cr_assert_neq(s, IR_OK, "the run should fail with '%s'", want);
    cr_assert(strstr(tu_diag_text(&d), want), "want '%s' in: %s", want, tu_diag_text(&d));
    for (int i = 0; i < 4; i++) ir_tensor_free(&got[i]);
    tu_diag_free(&d);
}

/* Compiles text with inputs ins and checks it against the interpreter. */
static void check(const char *text, const In *ins, uint32_t n) {
    TuDiag d;
    tu_diag_init(&d);
    Model m;
    cr_assert_eq(model_compile(&m, text, ins, n, &d), IR_OK, "%s", tu_diag_text(&d));
    model_check(&m);
    model_free(&m);
    tu_diag_free(&d);
}

/* Compiling text must be refused with why in the message. */
static void refused(const char *text, const In *ins, uint32_t n, const char *why) {
    TuDiag d;
    tu_diag_init(&d);
    Model m;
    cr_assert_eq(model_compile(&m, text, ins, n, &d), IR_EUNSUPPORTED, "should be refused: %s", tu_diag_text(&d));
    cr_assert(strstr(tu_diag_text(&d), why), "want '%s' in: %s", why, tu_diag_text(&d));
    model_free(&m);
    tu_diag_free(&d);
}

#define SCALAR(t, x)                                                                                                             \
    { .dt = IR_DTYPE_##t, .v = (x) }
#define TENSOR(t, ...)                                                                                                           \
    {                                                                                                                            \
        .dt = IR_DTYPE_##t, .rank = sizeof((int64_t[]){__VA_ARGS__}) / 8, .dims = { __VA_ARGS__ }                                \
    }

Test(backend_signal, windows) {
    In i32[] = {SCALAR(I32, 10)}, i64[] = {SCALAR(I64, 7)};
    check("graph @t(%x: i32[]) {\n  %h = HannWindow(%x) : f32[10]\n  %m = HammingWindow(%x) : f32[10]\n"
          "  %b = BlackmanWindow(%x) : f32[10]\n  return %h, %m, %b\n}\n",
          i32, 1);
    check("graph @t(%x: i64[]) {\n  %h = HannWindow(%x) {periodic = 0} : f32[7]\n"
          "  %m = HammingWindow(%x) {periodic = 0, output_datatype = f64} : f64[7]\n"
          "  %b = BlackmanWindow(%x) {periodic = 0, output_datatype = f16} : f16[7]\n  return %h, %m, %b\n}\n",
          i64, 1);
}

/* A size other than the compiled one fails the run naming the node and both
 * sizes. */
Test(backend_signal, window_size_mismatch) {
    TuDiag d;
    tu_diag_init(&d);
    Model m;
    In in[] = {SCALAR(I32, 10)};
    cr_assert_eq(model_compile(&m,
                               "graph @t(%x: i32[]) {\n  %y = HannWindow(%x) : f32[10]\n  return %y\n}\n",
                               in, 1, &d),
                 IR_OK, "%s", tu_diag_text(&d));
    model_check(&m);
    model_set(&m, 0, 12);
    model_fails(&m, "HannWindow %y: the window size is 12, expected 10 (the compiled output shape)");
    model_set(&m, 0, -3);
    model_fails(&m, "HannWindow %y: the window size is -3, expected 10");
    model_free(&m);
    tu_diag_free(&d);
}

Test(backend_signal, dft) {
    In real[] = {TENSOR(F32, 2, 6, 3, 1)}, cplx[] = {TENSOR(F32, 2, 6, 3, 2)}, f64[] = {TENSOR(F64, 5, 4, 2)};
    check("graph @t(%x: f32[2, 6, 3, 1]) {\n  %a = DFT(%x) {axis = 1} : f32[2, 6, 3, 2]\n"
          "  %b = DFT(%x) {axis = 2} : f32[2, 6, 3, 2]\n  %c = DFT(%x) {axis = 2, onesided = 1} : f32[2, 6, 2, 2]\n"
          "  %d = DFT(%x) {axis = 0} : f32[2, 6, 3, 2]\n  return %a, %b, %c, %d\n}\n",
          real, 1);
    check("graph @t(%x: f32[2, 6, 3, 2]) {\n  %a = DFT(%x) {axis = 1} : f32[2, 6, 3, 2]\n"
          "  %b = DFT(%x) {axis = 1, inverse = 1} : f32[2, 6, 3, 2]\n"
          "  %c = DFT(%x) {axis = 2, onesided = 1, inverse = 1} : f32[2, 6, 2, 2]\n  return %a, %b, %c\n}\n",
          cplx, 1);
    /* dft_length constant: zero padding and truncation */
    check("graph @t(%x: f64[5, 4, 2]) {\n  const %n9: i64[] = [9]\n  const %n3: i32[] = [3]\n"
          "  %a = DFT(%x, %n9) {axis = 1} : f64[5, 9, 2]\n  %b = DFT(%x, %n3) {axis = 0} : f64[3, 4, 2]\n"
          "  %c = DFT(%x, %n9) {axis = 1, onesided = 1} : f64[5, 5, 2]\n  return %a, %b, %c\n}\n",
          f64, 1);
}

/* dft_length given at run time: a onesided output of 5 bins comes from length 8
 * or 9 (both compiled; 9 pads the signal of 8 with a zero); another length
 * fails the run. */
Test(backend_signal, dft_length_at_run_time) {
    TuDiag d;
    tu_diag_init(&d);
    Model m;
    In in[] = {TENSOR(F32, 3, 8, 2), SCALAR(I64, 8)};
    cr_assert_eq(model_compile(&m,
                               "graph @t(%x: f32[3, 8, 2], %n: i64[]) {\n"
                               "  %y = DFT(%x, %n) {axis = 1, onesided = 1} : f32[3, 5, 2]\n  return %y\n}\n",
                               in, 2, &d),
                 IR_OK, "%s", tu_diag_text(&d));
    model_check(&m);
    model_set(&m, 1, 9);
    model_check(&m);
    model_set(&m, 1, 10);
    model_fails(&m, "DFT %y: dft_length is 10, expected 8 or 9 (the compiled output shape)");
    model_free(&m);
    In full[] = {TENSOR(F32, 6, 3, 1), SCALAR(I32, 6)};
    cr_assert_eq(model_compile(&m,
                               "graph @t(%x: f32[6, 3, 1], %n: i32[]) {\n"
                               "  %y = DFT(%x, %n) {axis = 0, inverse = 1} : f32[6, 3, 2]\n  return %y\n}\n",
                               full, 2, &d),
                 IR_OK, "%s", tu_diag_text(&d));
    model_check(&m);
    model_set(&m, 1, 5);
    model_fails(&m, "DFT %y: dft_length is 5, expected 6 (the compiled output shape)");
    model_free(&m);
    tu_diag_free(&d);
}

Test(backend_signal, stft) {
    In win[] = {TENSOR(F32, 2, 40, 1), SCALAR(I64, 6), TENSOR(F32, 10)};
    check("graph @t(%s: f32[2, 40, 1], %st: i64[], %w: f32[10]) {\n"
          "  %y = STFT(%s, %st, %w) : f32[2, 6, 6, 2]\n  %z = STFT(%s, %st, %w) {onesided = 0} : f32[2, 6, 10, 2]\n"
          "  return %y, %z\n}\n",
          win, 3);
    In cplx[] = {TENSOR(F64, 1, 33, 2), SCALAR(I32, 4)};
    check("graph @t(%s: f64[1, 33, 2], %st: i32[]) {\n  const %fl: i64[] = [8]\n"
          "  %y = STFT(%s, %st, _, %fl) {onesided = 0} : f64[1, 7, 8, 2]\n  return %y\n}\n",
          cplx, 2);
    /* a window longer than the frame length reads past the frame (zero past the
   * signal) */
    In longw[] = {TENSOR(F32, 1, 20, 1), SCALAR(I64, 3), TENSOR(F32, 9)};
    check("graph @t(%s: f32[1, 20, 1], %st: i64[], %w: f32[9]) {\n  const %fl: i64[] = [6]\n"
          "  %y = STFT(%s, %st, %w, %fl) : f32[1, 5, 4, 2]\n  return %y\n}\n",
          longw, 3);
}

/* frame_step and frame_length given at run time (the ONNX test's case): 9
 * onesided bins come from a frame length of 16 or 17; a step or length that
 * gives another frame count, or a step below 1, fails the run. */
Test(backend_signal, stft_at_run_time) {
    TuDiag d;
    tu_diag_init(&d);
    Model m;
    In in[] = {TENSOR(F32, 1, 128, 1), SCALAR(I64, 8), SCALAR(I64, 16)};
    cr_assert_eq(model_compile(&m,
                               "graph @t(%s: f32[1, 128, 1], %st: i64[], %fl: i64[]) {\n"
                               "  %out = STFT(%s, %st, _, %fl) : f32[1, 15, 9, 2]\n  return %out\n}\n",
                               in, 3, &d),
                 IR_OK, "%s", tu_diag_text(&d));
    model_check(&m);
    model_set(&m, 2, 17); /* 1 + (128 - 17) / 8 = 14 frames */
    model_fails(&m, "STFT %out: frame_step and frame_length give 14 frames, expected 15 (the compiled output shape)");
    model_set(&m, 1, 7), model_set(&m, 2, 30);
    model_fails(&m, "STFT %out: frame_length is 30, expected 16 or 17 (the compiled output shape)");
    model_set(&m, 1, 0), model_set(&m, 2, 16);
    model_fails(&m, "STFT %out: frame_step is 0, expected a positive value");
    model_set(&m, 1, 8);
    model_check(&m);
    model_free(&m);
    /* 5 bins from a frame length of 8 or 9, both giving 7 frames with a step of 5
   */
    In both[] = {TENSOR(F32, 2, 40, 2), SCALAR(I32, 5), SCALAR(I32, 8)};
    cr_assert_eq(model_compile(&m,
                               "graph @t(%s: f32[2, 40, 2], %st: i32[], %fl: i32[]) {\n"
                               "  %out = STFT(%s, %st, _, %fl) : f32[2, 7, 5, 2]\n  return %out\n}\n",
                               both, 3, &d),
                 IR_OK, "%s", tu_diag_text(&d));
    model_check(&m);
    model_set(&m, 2, 9);
    model_check(&m);
    model_free(&m);
    tu_diag_free(&d);
}

Test(backend_signal, mel_weight_matrix) {
    TuDiag d;
    tu_diag_init(&d);
    Model m;
    In in[] = {SCALAR(I32, 8), SCALAR(I32, 16), SCALAR(I32, 8192), SCALAR(F32, 0), SCALAR(F32, 4096)};
    const char *text = "graph @t(%nm: i32[], %dl: i32[], %sr: i32[], %lo: f32[], %hi: f32[]) {\n"
                       "  %w = MelWeightMatrix(%nm, %dl, %sr, %lo, %hi) : f32[9, 8]\n"
                       "  %v = MelWeightMatrix(%nm, %dl, %sr, %lo, %hi) {output_datatype = f64} : f64[9, 8]\n"
                       "  return %w, %v\n}\n";
    cr_assert_eq(model_compile(&m, text, in, 5, &d), IR_OK, "%s", tu_diag_text(&d));
    model_check(&m);
    /* other run-time values within the compiled shape: dft_length 17, other rate
   * and edges */
    model_set(&m, 1, 17), model_set(&m, 2, 16000), model_set(&m, 3, 100), model_set(&m, 4, 7000);
    model_check(&m);
    model_set(&m, 2, 300), model_set(&m, 3, 20), model_set(&m, 4, 150); /* narrow filters (flat ones) */
    model_check(&m);
    model_set(&m, 0, 6);
    model_fails(&m, "MelWeightMatrix %w: num_mel_bins is 6, expected 8 (the compiled output shape)");
    model_set(&m, 0, 8), model_set(&m, 1, 32);
    model_fails(&m, "MelWeightMatrix %w: dft_length is 32, expected 16 or 17 (the compiled output shape)");
    model_set(&m, 1, 16), model_set(&m, 2, 0);
    model_fails(&m, "MelWeightMatrix %w: sample_rate is 0, expected a positive value");
    model_free(&m);
    tu_diag_free(&d);
}

Test(backend_signal, range) {
    In f32[] = {SCALAR(F32, 1), SCALAR(F32, 5), SCALAR(F32, 0.3)};
    check("graph @t(%a: f32[], %b: f32[], %c: f32[]) {\n  %y = Range(%a, %b, %c) : f32[14]\n  return %y\n}\n",
          f32, 3);
    In f64[] = {SCALAR(F64, 2.5), SCALAR(F64, -4), SCALAR(F64, -1.25)};
    check("graph @t(%a: f64[], %b: f64[], %c: f64[]) {\n  %y = Range(%a, %b, %c) : f64[6]\n  return %y\n}\n",
          f64, 3);
    In i32[] = {SCALAR(I32, 10), SCALAR(I32, 6), SCALAR(I32, -3)};
    check("graph @t(%a: i32[], %b: i32[], %c: i32[]) {\n  %y = Range(%a, %b, %c) : i32[2]\n  return %y\n}\n",
          i32, 3);
    In i64[] = {SCALAR(I64, -7), SCALAR(I64, 30), SCALAR(I64, 4)};
    check("graph @t(%a: i64[], %b: i64[], %c: i64[]) {\n  %y = Range(%a, %b, %c) : i64[10]\n  return %y\n}\n",
          i64, 3);
    In i16[] = {SCALAR(I16, 3), SCALAR(I16, 3), SCALAR(I16, 1)};
    check("graph @t(%a: i16[], %b: i16[], %c: i16[]) {\n  %y = Range(%a, %b, %c) : i16[0]\n  return %y\n}\n",
          i16, 3);
}

/* A limit that gives another length, a zero delta or a non-finite bound fail
 * the run. */
Test(backend_signal, range_mismatch) {
    TuDiag d;
    tu_diag_init(&d);
    Model m;
    In i32[] = {SCALAR(I32, 10), SCALAR(I32, 6), SCALAR(I32, -3)};
    cr_assert_eq(model_compile(&m,
                               "graph @t(%a: i32[], %b: i32[], %c: i32[]) {\n  %out = Range(%a, %b, %c) : i32[2]\n  return %out\n}\n",
                               i32, 3, &d),
                 IR_OK, "%s", tu_diag_text(&d));
    model_set(&m, 1, -20);
    model_fails(&m, "Range %out: start, limit and delta give 10 elements, expected 2 (the compiled output shape)");
    model_set(&m, 1, 20);
    model_fails(&m, "Range %out: start, limit and delta give 0 elements, expected 2");
    model_set(&m, 2, 0);
    model_fails(&m, "Range %out: delta is zero");
    model_free(&m);
    In f32[] = {SCALAR(F32, 0), SCALAR(F32, 1), SCALAR(F32, 0.5)};
    cr_assert_eq(model_compile(&m,
                               "graph @t(%a: f32[], %b: f32[], %c: f32[]) {\n  %y = Range(%a, %b, %c) : f32[2]\n  return %y\n}\n",
                               f32, 3, &d),
                 IR_OK, "%s", tu_diag_text(&d));
    model_check(&m);
    model_set(&m, 1, 1.01);
    model_fails(&m, "Range %y: start, limit and delta give 3 elements, expected 2");
    model_set(&m, 1, INFINITY);
    model_fails(&m, "Range %y: start, limit and delta must be finite, delta nonzero");
    model_free(&m);
    tu_diag_free(&d);
}

/* What the emitters cannot do is refused at compile time, naming the op and the
 * reason. */
Test(backend_signal, refusals) {
    In u32[] = {SCALAR(U32, 1), SCALAR(U32, 5), SCALAR(U32, 1)};
    refused("graph @t(%a: u32[], %b: u32[], %c: u32[]) {\n  %y = Range(%a, %b, %c) : u32[4]\n  return %y\n}\n",
            u32, 3,
            "the llvm backend does not support Range on this dtype (floats, signed integers) yet");
    In mel[] = {SCALAR(I32, 8), SCALAR(I32, 16), SCALAR(I32, 8192), SCALAR(F32, 0), SCALAR(F32, 4096)};
    refused("graph @t(%nm: i32[], %dl: i32[], %sr: i32[], %lo: f32[], %hi: f32[]) {\n"
            "  %w = MelWeightMatrix(%nm, %dl, %sr, %lo, %hi) {output_datatype = i32} : i32[9, 8]\n  return %w\n}\n",
            mel, 5,
            "the llvm backend does not support MelWeightMatrix with a non-float output_datatype yet");
    In fsize[] = {SCALAR(F32, 10)};
    refused("graph @t(%x: f32[]) {\n  %y = HannWindow(%x) : f32[10]\n  return %y\n}\n",
            fsize, 1,
            "the llvm backend does not support HannWindow with a size that is not an integer scalar yet");
}

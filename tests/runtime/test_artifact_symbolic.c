/* Symbolic dims in compiled code: `irtool compile` without --input on a model with symbols other
 * than one leading batch compiles once, its kernels evaluating dims from the symbol values at
 * run time (backend/cpu/dyn.c). libirtool-runtime then runs the artifact at several bindings
 * with the interpreter's results (rtol 1e-4, atol 1e-5), binds the symbols from the input dims
 * with guards on every call, and models it cannot handle are refused with the reason. */
#include "backend/backend.h"
#include "backend/runtime/abi.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_text(const char *path, const char *text) { cr_assert(tu_write_file(path, text, strlen(text))); }

/* Runs artifact a and the interpreter on model with f32 inputs of the given shapes (dims[i],
 * rank from the artifact) and compares every output. */
static void check_shapes(const char *model, IrtArtifact *a, const int64_t (*dims)[4]) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(model, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    uint32_t n_in = irt_num_inputs(a), n_out = irt_num_outputs(a);
    cr_assert(n_in <= 4 && n_out <= 12);
    IrTensor in[4] = {0}, ref[12] = {0};
    IrtTensor ri[4], out[12];
    for (uint32_t i = 0; i < n_in; i++) {
        IrtTensor info;
        irt_input_info(a, i, &info);
        cr_assert_eq(ir_tensor_alloc(&in[i], IR_DTYPE_F32, info.rank, dims[i]), IR_OK);
        tu_fill_pm1(&in[i], i + 1);
        ri[i] = (IrtTensor){.dtype = info.dtype, .rank = info.rank, .data = in[i].data};
        memcpy(ri[i].dims, dims[i], sizeof dims[i]);
    }
    IrInterpOptions o = {0};
    cr_assert_eq(ir_interp_run(g, in, n_in, ref, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    char err[1024];
    cr_assert_eq(irt_run(a, ri, out, err, sizeof err), 0, "%s", err);
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

static IrtArtifact *compile_load(const char *model, char **dir) {
    *dir = tu_mkdtemp();
    char *irx = tu_path_join(*dir, "m.irx");
    TuRun r = tu_compile_unbound(model, irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "symbolic dims"), "%s", r.out);
    tu_run_free(&r);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    free(irx);
    return a;
}

/* `irtool inspect` of the artifact m.irx in dir (the caller frees it). */
static char *inspect_text(const char *dir) {
    char *irx = tu_path_join(dir, "m.irx");
    const char *args[] = {"inspect", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    char *out = strdup(r.out);
    tu_run_free(&r);
    free(irx);
    return out;
}

/* attention.ir: x[B, S, 32], mask[B, S, S]; B in [1, 16], S in [1, 512]. One artifact runs
 * every shape: the batch and the sequence both vary, the score matrix is S x S. */
Test(artifact_symbolic, attention_any_batch_and_sequence) {
    char *dir, *model = tu_source_path("corpus/attention.ir");
    IrtArtifact *a = compile_load(model, &dir);
    IrtTensor info;
    irt_input_info(a, 1, &info);
    cr_assert(info.dims[0] == -1 && info.dims[1] == -1 && info.dims[2] == -1, "symbolic dims are reported as -1");
    const int64_t shapes[][2][4] = {{{1, 1, 32}, {1, 1, 1}},
                                    {{2, 7, 32}, {2, 7, 7}},
                                    {{3, 64, 32}, {3, 64, 64}},
                                    {{16, 130, 32}, {16, 130, 130}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* symbolic.ir: S % 8 == 0, Reshape into S/8 blocks, Concat grows S by one, T == S + 1 is
 * computed by the code. Guards: symbols agree across inputs, ranges and divisors hold. */
Test(artifact_symbolic, derived_symbols_and_guards) {
    char *dir, *model = tu_source_path("corpus/symbolic.ir");
    IrtArtifact *a = compile_load(model, &dir);
    const int64_t shapes[][2][4] = {{{1, 8, 16}, {1, 1, 16}}, {{5, 24, 16}, {5, 1, 16}}, {{2, 256, 16}, {2, 1, 16}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    float buf[4 * 12 * 16] = {0}, cls[4 * 16] = {0};
    IrtTensor in[2] = {{.dtype = 2, .rank = 3, .dims = {2, 12, 16}, .data = buf}, {.dtype = 2, .rank = 3, .dims = {2, 1, 16}, .data = cls}};
    in[0].dtype = in[1].dtype = irt_dtype_code(a, "f32");
    IrtTensor out[2];
    char err[512];
    cr_assert_neq(irt_run(a, in, out, err, sizeof err), 0);
    cr_assert(strstr(err, "S = 12 is not a multiple of 8 (input 'x' dim 1)"), "%s", err);
    in[0].dims[1] = 8, in[1].dims[0] = 3;
    cr_assert_neq(irt_run(a, in, out, err, sizeof err), 0);
    cr_assert(strstr(err, "guard failed: input 'cls' dim 0 is 3 but B = 2"), "%s", err);
    irt_free(a);
    char *irx = tu_path_join(dir, "m.irx"); /* irtool inspect says it in words */
    const char *args[] = {"inspect", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "symbol S: 8 <= S <= 4096, a multiple of 8\n"), "%s", r.out);
    cr_assert(strstr(r.out, "symbol T: computed from the others\n"), "%s", r.out);
    cr_assert(strstr(r.out, "input 1 dim 0 binds B\n"), "%s", r.out);
    tu_run_free(&r);
    free(irx);
    tu_rmtree(dir);
    free(model), free(dir);
}

/* A reduction over the batch mixes samples (refused by the per-sample batch mode): with the dims
 * evaluated at run time it compiles once all the same. */
Test(artifact_symbolic, reduction_over_symbolic_dims) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "r.ir");
    write_text(model, "symbol N, M\nconstraint N in [1, 32]\nconstraint M in [1, 32]\n"
                         "graph @r(%a: f32[N, M], %b: f32[M]) {\n"
                         "  %s = Add(%a, %b) : f32[N, M]\n"
                         "  %t = Transpose(%s) {perm = [1, 0]} : f32[M, N]\n"
                         "  %m = ReduceMean(%t) {axes = [1], keepdims = 1} : f32[M, 1]\n"
                         "  %p = Softmax(%t) {axis = 0} : f32[M, N]\n"
                         "  %y = Mul(%p, %m) : f32[M, N]\n"
                         "  return %y\n}\n");
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t shapes[][2][4] = {{{1, 1}, {1}}, {{7, 3}, {3}}, {{32, 32}, {32}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* Dims the data decides: NonZero's count and the slices Compress keeps become symbols that their
 * kernels write at run time (ranged by the largest case), so the ops after them and the output
 * dims follow the data; with a symbolic batch on top, one artifact serves every B. */
Test(artifact_symbolic, data_dependent_dims) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "d.ir");
    write_text(model, "symbol B\nconstraint B in [1, 8]\n"
                      "graph @d(%x: f32[B, 6], %v: f32[6]) {\n"
                      "  const %zero: f32[] = [0.0]\n"
                      "  %r = Relu(%x)\n"
                      "  %i = NonZero(%r)\n"
                      "  %fi = Cast(%i) {to = f32}\n"
                      "  %c = Greater(%v, %zero)\n"
                      "  %k = Compress(%x, %c) {axis = 1}\n"
                      "  %e = Exp(%k)\n"
                      "  %flat = Compress(%x, %c)\n"
                      "  %t = Transpose(%fi) {perm = [1, 0]}\n"
                      "  const %two: f32[] = [2.0]\n"
                      "  %m = Mul(%x, %two)\n"
                      "  %fl = Floor(%m)\n"
                      "  %u, %ui, %uv, %uc = Unique(%fl) {axis = 1}\n"
                      "  %w, %wi, %wv, %wc = Unique(%fl) {sorted = 0}\n"
                      "  %uif = Cast(%ui) {to = f32}\n  %uvf = Cast(%uv) {to = f32}\n  %ucf = Cast(%uc) {to = f32}\n"
                      "  %wcf = Cast(%wc) {to = f32}\n"
                      "  return %fi, %e, %flat, %t, %u, %uif, %uvf, %ucf, %w, %wcf\n}\n");
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    IrtTensor info;
    irt_output_info(a, 0, &info);
    cr_assert(info.rank == 2 && info.dims[0] == 2 && info.dims[1] == -1, "the count is reported as -1");
    char *irx = tu_path_join(sub, "m.irx"); /* irtool inspect says it in words */
    const char *args[] = {"inspect", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert(strstr(r.out, "symbol nonzero1: decided by the data, written by its kernel (at most 48)\n"), "%s", r.out);
    tu_run_free(&r);
    free(irx);
    const int64_t shapes[][2][4] = {{{1, 6}, {6}}, {{5, 6}, {6}}, {{8, 6}, {6}}, {{3, 6}, {6}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    float zeros[6 * 8] = {0};
    IrtTensor in[2] = {{.dtype = irt_dtype_code(a, "f32"), .rank = 2, .dims = {8, 6}, .data = zeros},
                       {.dtype = irt_dtype_code(a, "f32"), .rank = 1, .dims = {6}, .data = zeros}};
    IrtTensor out[10];
    char err[512];
    cr_assert_eq(irt_run(a, in, out, err, sizeof err), 0, "%s", err);
    cr_assert(out[0].rank == 2 && out[0].dims[0] == 2 && out[0].dims[1] == 0, "no nonzero: [2, 0]");
    cr_assert(out[1].rank == 2 && out[1].dims[0] == 8 && out[1].dims[1] == 0, "nothing kept: [8, 0]");
    cr_assert(out[2].rank == 1 && out[2].dims[0] == 0);
    cr_assert(out[4].rank == 2 && out[4].dims[0] == 8 && out[4].dims[1] == 1, "one distinct column");
    cr_assert(out[8].rank == 1 && out[8].dims[0] == 1 && out[9].dims[0] == 1 && ((float *)out[9].data)[0] == 48.0f);
    for (int i = 0; i < 10; i++) free(out[i].data);
    irt_free(a);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* A data dim gets its own symbol whatever the model declares there: not the input's N (the count
 * is not N), not a K ranged below what the data can give. */
Test(artifact_symbolic, data_dims_ignore_declared_symbols) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "n.ir");
    write_text(model, "symbol N, K\nconstraint N in [1, 64]\nconstraint K in [0, 2]\n"
                      "graph @n(%x: f32[N]) {\n"
                      "  %y = NonZero(%x) : i64[1, N]\n  %z = NonZero(%x) : i64[1, K]\n  %r = Relu(%x) : f32[N]\n"
                      "  %fy = Cast(%y) {to = f32}\n  %fz = Cast(%z) {to = f32}\n"
                      "  return %fy, %fz, %r\n}\n");
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    float x[8] = {1, 0, 0, 2, 0, 3, 0, 4};
    IrtTensor in = {.dtype = irt_dtype_code(a, "f32"), .rank = 1, .dims = {8}, .data = x}, out[3];
    char err[512];
    cr_assert_eq(irt_run(a, &in, out, err, sizeof err), 0, "%s", err);
    cr_assert(out[0].dims[1] == 4 && out[1].dims[1] == 4 && out[2].dims[0] == 8);
    const float want[4] = {0, 3, 5, 7};
    cr_assert(memcmp(out[0].data, want, sizeof want) == 0 && memcmp(out[1].data, want, sizeof want) == 0);
    cr_assert(((float *)out[2].data)[7] == 4.0f, "N is still the input's");
    for (int i = 0; i < 3; i++) free(out[i].data);
    irt_free(a);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* A Compress condition longer than its axis, known only at run time, fails the run with the
 * node's name (the interpreter refuses it too); a shorter one keeps what it covers. */
Test(artifact_symbolic, compress_condition_checked_per_run) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "c.ir");
    write_text(model, "symbol B, C\nconstraint B in [1, 8]\nconstraint C in [1, 8]\n"
                      "graph @c(%x: f32[B, 3], %c: bool[C]) {\n  %y = Compress(%x, %c) {axis = 1}\n  return %y\n}\n");
    char *irx = tu_path_join(dir, "c.irx");
    const char *args[] = {"compile", model, "--no-cache", "--no-validate", "-o", irx, NULL}; /* the gate's inputs: C = 5 */
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char err[512];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    float x[6] = {1, 2, 3, 4, 5, 6};
    uint8_t c[5] = {1, 0, 1, 1, 1};
    IrtTensor in[2] = {{.dtype = irt_dtype_code(a, "f32"), .rank = 2, .dims = {2, 3}, .data = x},
                       {.dtype = irt_dtype_code(a, "bool"), .rank = 1, .dims = {5}, .data = c}}, out;
    cr_assert_neq(irt_run(a, in, &out, err, sizeof err), 0);
    cr_assert(strstr(err, "Compress %y: the condition is longer than the axis"), "%s", err);
    in[1].dims[0] = 2;
    cr_assert_eq(irt_run(a, in, &out, err, sizeof err), 0, "%s", err);
    cr_assert(out.rank == 2 && out.dims[0] == 2 && out.dims[1] == 1 && ((float *)out.data)[1] == 4.0f);
    free(out.data);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(dir), free(irx);
}

/* NonMaxSuppression compiles too: its kernel calls the runtime's irt_nms and writes the count of
 * selected boxes (ONNX's suppress_by_IOU example: boxes 3, 0 and 5 survive). */
Test(artifact_symbolic, non_max_suppression) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "n.ir"), *irx = tu_path_join(dir, "n.irx");
    write_text(model, "graph @n(%boxes: f32[1, 6, 4], %scores: f32[1, 1, 6]) {\n"
                      "  const %max: i64[1] = [3]\n  const %iou: f32[1] = [0.5]\n  const %thr: f32[1] = [0.0]\n"
                      "  %sel = NonMaxSuppression(%boxes, %scores, %max, %iou, %thr)\n"
                      "  return %sel\n}\n");
    TuRun r = tu_compile_unbound(model, irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char err[512];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    float boxes[24] = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f, 0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101};
    float scores[6] = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};
    IrtTensor in[2] = {{.dtype = irt_dtype_code(a, "f32"), .rank = 3, .dims = {1, 6, 4}, .data = boxes},
                       {.dtype = irt_dtype_code(a, "f32"), .rank = 3, .dims = {1, 1, 6}, .data = scores}};
    IrtTensor out;
    cr_assert_eq(irt_run(a, in, &out, err, sizeof err), 0, "%s", err);
    cr_assert(out.rank == 2 && out.dims[0] == 3 && out.dims[1] == 3, "%lld selected", (long long)out.dims[0]);
    const int64_t want[9] = {0, 0, 3, 0, 0, 0, 0, 0, 5};
    cr_assert(memcmp(out.data, want, sizeof want) == 0);
    free(out.data);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(irx), free(dir);
}

/* String tensors in compiled code: StringNormalizer (its count a data symbol, new bytes from the
 * run's memory) then a Reshape, in the JIT against the interpreter and in an artifact whose
 * string output is one block (elements, then bytes) released with free. */
Test(artifact_symbolic, strings_normalized) {
    static const char *text = "graph @s(%x: string[1, 5]) {\n"
                              "  const %shape: i64[1] = [-1]\n"
                              "  %n = StringNormalizer(%x) {case_change_action = \"UPPER\", stopwords = [\"b\", \"monday\"]}\n"
                              "  %y = Reshape(%n, %shape)\n"
                              "  return %y\n}\n";
    const char *words[5] = {"Monday", "a", "B", "xyz\xc3\xa9", ""};
    IrStringElem el[5];
    for (int i = 0; i < 5; i++) el[i] = (IrStringElem){words[i], strlen(words[i])};
    IrTensor x, ref = {0}, got = {0};
    cr_assert_eq(ir_tensor_from_strings(&x, 2, (int64_t[]){1, 5}, el), IR_OK);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "s.ir", &d), *h = tu_parse(text, "s.ir", &d);
    cr_assert(g && h, "%s", tu_diag_text(&d));
    IrInterpOptions o = {0};
    cr_assert_eq(ir_interp_run(g, &x, 1, &ref, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_specialize_inputs(h, &x, 1, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_create(h, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_run(p, &x, 1, &got, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    const char *want[3] = {"A", "XYZ\xc3\xa9", ""};
    cr_assert(ref.rank == 1 && ref.dims[0] == 3 && got.rank == 1 && got.dims[0] == 3, "%lld kept", (long long)got.dims[0]);
    for (int i = 0; i < 3; i++) {
        IrStringElem r = ((IrStringElem *)ref.data)[i], v = ((IrStringElem *)got.data)[i];
        cr_assert(r.len == strlen(want[i]) && (!r.len || !memcmp(r.data, want[i], r.len)));
        cr_assert(v.len == r.len && (!v.len || !memcmp(v.data, r.data, r.len)), "element %d", i);
    }
    ir_tensor_free(&got);
    llvm_program_destroy(p);
    /* the artifact */
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "s.ir"), *irx = tu_path_join(dir, "s.irx");
    write_text(model, text);
    TuRun r = tu_compile_unbound(model, irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char err[512];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    IrtTensor in = {.dtype = irt_dtype_code(a, "string"), .rank = 2, .dims = {1, 5}, .data = x.data}, out;
    cr_assert_eq(irt_run(a, &in, &out, err, sizeof err), 0, "%s", err);
    cr_assert(out.rank == 1 && out.dims[0] == 3);
    for (int i = 0; i < 3; i++) {
        IrtString v = ((IrtString *)out.data)[i];
        cr_assert(v.len == strlen(want[i]) && (!v.len || !memcmp(v.data, want[i], v.len)), "artifact element %d", i);
        cr_assert(!v.len || (v.data > (char *)out.data && v.data < (char *)out.data + 3 * sizeof(IrtString) + 8),
                  "bytes inside the output's block");
    }
    free(out.data);
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(irx), free(dir);
    ir_tensor_free(&ref);
    ir_tensor_free(&x);
    ir_graph_destroy(g);
    ir_graph_destroy(h);
    tu_diag_free(&d);
}

/* Cast between strings and numbers in compiled code (irt_cast_str, the interpreter's text rules
 * from ir/strconv.h): numbers parsed, floats written shortest-round-trip, and a string that is no
 * number fails the run. */
Test(artifact_symbolic, strings_cast_to_and_from_numbers) {
    static const char *text = "graph @c(%s: string[4], %f: f32[3]) {\n"
                              "  %n = Cast(%s) {to = f64}\n  %t = Cast(%f) {to = string}\n  %i = Cast(%s) {to = i32}\n"
                              "  return %n, %t, %i\n}\n";
    const char *words[4] = {"1.5", "-2e3", "INF", "7"};
    IrStringElem el[4];
    for (int i = 0; i < 4; i++) el[i] = (IrStringElem){words[i], strlen(words[i])};
    IrTensor in[2] = {{0}}, ref[3] = {{0}}, got[3] = {{0}};
    cr_assert_eq(ir_tensor_from_strings(&in[0], 1, (int64_t[]){4}, el), IR_OK);
    cr_assert_eq(ir_tensor_alloc(&in[1], IR_DTYPE_F32, 1, (int64_t[]){3}), IR_OK);
    float fv[3] = {0.1f, -3.0f, 1e-7f};
    memcpy(in[1].data, fv, sizeof fv);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "c.ir", &d), *h = tu_parse(text, "c.ir", &d);
    cr_assert(g && h, "%s", tu_diag_text(&d));
    IrInterpOptions o = {0};
    /* the i32 cast of "1.5" fails in both: checked below with numbers only */
    IrLlvmProgram *p = NULL;
    cr_assert_eq(llvm_specialize_inputs(h, in, 2, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_create(h, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    TuDiag rd;
    tu_diag_init(&rd);
    cr_assert_neq(llvm_program_run(p, in, 2, got, &rd.diag), IR_OK);
    cr_assert(strstr(tu_diag_text(&rd), "is not a number"), "%s", tu_diag_text(&rd));
    tu_diag_free(&rd);
    llvm_program_destroy(p);
    ir_graph_destroy(h);
    const char *ints[4] = {"1", "-2", "300", "7"}; /* now every element parses as i32 too */
    for (int i = 0; i < 4; i++) ((IrStringElem *)in[0].data)[i] = (IrStringElem){ints[i], strlen(ints[i])};
    h = tu_parse(text, "c.ir", &d);
    cr_assert_eq(ir_interp_run(g, in, 2, ref, &o, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_specialize_inputs(h, in, 2, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_create(h, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(llvm_program_run(p, in, 2, got, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    cr_assert(memcmp(got[0].data, ref[0].data, 4 * sizeof(double)) == 0);
    for (int i = 0; i < 3; i++) {
        IrStringElem r = ((IrStringElem *)ref[1].data)[i], v = ((IrStringElem *)got[1].data)[i];
        cr_assert(r.len == v.len && !memcmp(r.data, v.data, r.len), "element %d: %.*s vs %.*s", i, (int)v.len, v.data,
                  (int)r.len, r.data);
    }
    cr_assert(memcmp(got[2].data, ref[2].data, 4 * sizeof(int32_t)) == 0);
    for (int i = 0; i < 3; i++) ir_tensor_free(&got[i]), ir_tensor_free(&ref[i]);
    for (int i = 0; i < 2; i++) ir_tensor_free(&in[i]);
    llvm_program_destroy(p);
    ir_graph_destroy(g);
    ir_graph_destroy(h);
    tu_diag_free(&d);
}

/* Symbols without an upper bound: the values they size (the attention's scores, its scratch, a
 * Reshape in place) are placed per binding above the static part, and the runtime's workspace
 * grows when a larger binding arrives and is reused by smaller ones. Against the interpreter at
 * shapes that grow, shrink and grow again. */
Test(artifact_symbolic, unbounded_symbols_place_values_per_binding) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "att.ir");
    write_text(model, "symbol B, S\n"
                      "graph @att(%q: f32[B, 2, S, 8], %k: f32[B, 2, 8, S], %v: f32[B, 2, S, 12]) {\n"
                      "  const %sc: f32[] = [0.35]\n  const %shp: i64[3] = [0, 0, 24]\n"
                      "  %qs = Mul(%sc, %q) : f32[B, 2, S, 8]\n  %s = MatMul(%qs, %k) : f32[B, 2, S, S]\n"
                      "  %p = Softmax(%s) {axis = -1} : f32[B, 2, S, S]\n  %y = MatMul(%p, %v) : f32[B, 2, S, 12]\n"
                      "  %t = Transpose(%y) {perm = [0, 2, 1, 3]} : f32[B, S, 2, 12]\n"
                      "  %r = Reshape(%t, %shp) : f32[B, S, 24]\n  %z = Neg(%r) : f32[B, S, 24]\n"
                      "  return %z\n}\n");
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t shapes[][4][4] = {{{1, 2, 1, 8}, {1, 2, 8, 1}, {1, 2, 1, 12}},
                                    {{2, 2, 7, 8}, {2, 2, 8, 7}, {2, 2, 7, 12}},
                                    {{3, 2, 300, 8}, {3, 2, 8, 300}, {3, 2, 300, 12}},
                                    {{2, 2, 5, 8}, {2, 2, 8, 5}, {2, 2, 5, 12}},
                                    {{9, 2, 700, 8}, {9, 2, 8, 700}, {9, 2, 700, 12}},
                                    {{1, 2, 3, 8}, {1, 2, 8, 3}, {1, 2, 3, 12}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    char *out = inspect_text(sub);
    cr_assert(strstr(out, "symbol S: S >= 0, no upper bound"), "%s", out);
    cr_assert(strstr(out, "scratch@run") && strstr(out, "wsrun "), "%s", out);
    free(out);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* Refusals say why: a case without a run-time-shape kernel (named with its node). */
Test(artifact_symbolic, refusals) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "m.ir"), *irx = tu_path_join(dir, "m.irx");
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"symbol N\nconstraint N in [1, 4]\ngraph @t(%x: f32[N, 1, 4, 4], %sc: f32[4]) {\n"
         "  %y = Resize(%x, _, %sc) {mode = \"linear\", antialias = 1} name(\"rs1\")\n  return %y\n}\n",
         "does not support Resize with antialias and a scale known at run time only yet (node 'rs1')"},
        {"graph @t(%b: f32[1, 4, 4], %s: f32[1, 1, 2]) {\n  %y = NonMaxSuppression(%b, %s)\n  return %y\n}\n",
         "expects boxes [B, S, 4] and scores [B, C, S]"},
        {"graph @t(%x: f32[4], %c: f32[4]) {\n  %y = Compress(%x, %c)\n  return %y\n}\n", "a bool condition"},
        {"graph @t(%x: f32[1]) {\n  const %s: string[2] = [\"a\", \"b\"]\n  return %x, %s\n}\n",
         "a string constant as graph output 's'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text(model, cases[i].text);
        TuRun r = tu_compile_unbound(model, irx);
        cr_assert_neq(r.status, 0, "case %zu compiled", i);
        cr_assert(strstr(r.err, cases[i].want), "case %zu: %s", i, r.err);
        cr_assert(access(irx, F_OK) != 0, "nothing is written on a refusal");
        tu_run_free(&r);
    }
    tu_rmtree(dir);
    free(model), free(irx), free(dir);
}

/* Compiles corpus/torch/DIR/model.onnx once under pipeline and runs it at the PyTorch inputs
 * input_NAME.npy / input_NAME2.npy for every name, against output_y.npy / output_y2.npy. */
static void torch_dynamic(const char *dirname, const char *pipeline, const char *const *names, uint32_t n_in) {
    char *dir = tu_mkdtemp(), *irx = tu_path_join(dir, "m.irx"), rel[256];
    snprintf(rel, sizeof rel, "corpus/torch/%s/model.onnx", dirname);
    char *model = tu_source_path(rel);
    const char *args[] = {"compile", model, "-p", pipeline, "--no-cache", "-o", irx, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "symbolic dims B, S"), "%s", r.out);
    tu_run_free(&r);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    for (int p = 0; p < 2; p++) {
        TuDiag d;
        tu_diag_init(&d);
        IrTensor x[4] = {{0}}, y = {0};
        IrtTensor in[4], out;
        for (uint32_t i = 0; i < n_in; i++) {
            snprintf(rel, sizeof rel, "corpus/torch/%s/input_%s%s.npy", dirname, names[i], p ? "2" : "");
            char *px = tu_source_path(rel);
            cr_assert_eq(ir_npy_read(px, &d.diag, &x[i]), IR_OK, "%s", tu_diag_text(&d));
            free(px);
            in[i] = (IrtTensor){.dtype = irt_dtype_code(a, ir_dtype_name(x[i].dtype)), .rank = x[i].rank, .data = x[i].data};
            memcpy(in[i].dims, x[i].dims, sizeof in[i].dims);
        }
        snprintf(rel, sizeof rel, "corpus/torch/%s/output_y%s.npy", dirname, p ? "2" : "");
        char *py = tu_source_path(rel);
        cr_assert_eq(ir_npy_read(py, &d.diag, &y), IR_OK, "%s", tu_diag_text(&d));
        free(py);
        cr_assert_eq(irt_run(a, in, &out, err, sizeof err), 0, "%s", err);
        for (uint32_t k = 0; k < y.rank; k++) cr_assert_eq(out.dims[k], y.dims[k]);
        for (int64_t i = 0; i < ir_tensor_numel(&y); i++) {
            float e = ((float *)y.data)[i], v = ((float *)out.data)[i];
            cr_assert(fabsf(e - v) <= 1e-5f + 1e-4f * fabsf(e), "%s run %d element %lld: %g vs PyTorch %g", dirname, p,
                      (long long)i, v, e);
        }
        free(out.data);
        for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&x[i]);
        ir_tensor_free(&y);
        tu_diag_free(&d);
    }
    irt_free(a);
    tu_rmtree(dir);
    free(model), free(irx), free(dir);
}

/* A PyTorch TransformerEncoderLayer exported with dynamic batch and sequence (shapes computed by
 * Shape/Gather/Concat, Slice of the fused QKV projection, Gemm on [B*S, 32]): compiled once
 * with bounds given to shape-infer, it matches PyTorch eager at (2, 10) and (3, 7). */
Test(artifact_symbolic, torch_encoder_dynamic_matches_pytorch) {
    static const char *const names[] = {"x"};
    torch_dynamic("encoder_dynamic", "shape-infer{B=1:8,S=1:64}", names, 1);
}

/* A bidirectional LSTM and a GRU over its outputs (PyTorch, dynamic batch and sequence): irt_rnn
 * takes the run's sequence length and batch; one artifact matches PyTorch at (2, 5) and (3, 17). */
Test(artifact_symbolic, torch_rnn_dynamic_matches_pytorch) {
    static const char *const names[] = {"x"};
    torch_dynamic("rnn_dynamic", "shape-infer{B=1:8,S=1:64}", names, 1);
}

/* A BERT-like block: token and position embeddings (Gather of i64 ids, Range over S), a padding
 * mask turned additive (Cast, Sub, Mul), attention, LayerNorm, Where zeroing padded rows (its
 * zeros from ConstantOfShape of a run-time shape): one artifact, PyTorch at (2, 9) and (3, 20). */
Test(artifact_symbolic, torch_tiny_bert_dynamic_matches_pytorch) {
    static const char *const names[] = {"ids", "mask"};
    torch_dynamic("tiny_bert_dynamic", "shape-infer{B=1:8,S=1:64}", names, 2);
}

/* "  const %NAME: f32[DIMS] = [...]" with n deterministic values in [-scale, scale). */
static void append_const(char *t, size_t cap, const char *name, const char *dims, int n, double scale, uint64_t seed) {
    size_t len = strlen(t);
    len += (size_t)snprintf(t + len, cap - len, "  const %%%s: f32[%s] = [", name, dims);
    uint64_t x = 0x9E3779B97F4A7C15ull ^ seed;
    for (int i = 0; i < n && len < cap; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double v = ((double)(x >> 40) / (double)(1ull << 24) * 2.0 - 1.0) * scale;
        len += (size_t)snprintf(t + len, cap - len, "%s%.6f", i ? ", " : "", v);
    }
    snprintf(t + len, cap - len, "]\n");
}

/* A CNN with a symbolic batch and image size: Conv 3x3 with bias and padding, BatchNorm, Relu,
 * MaxPool, a grouped 1x1 Conv, a depthwise strided Conv, AveragePool without the padding
 * counted, GlobalAveragePool, Gemm. Compiled once (im2col into a scratch planned for the largest
 * image, then the BLAS GEMM), it matches the interpreter at three image sizes; the equalities
 * shape-infer derived between the dims are checked (and hold) on every run. */
Test(artifact_symbolic, cnn_with_symbolic_image_size) {
    static char t[32768];
    snprintf(t, sizeof t, "symbol N, H, W\nconstraint N in [1, 4]\nconstraint H in [4, 64]\nconstraint W in [4, 64]\n"
                          "constraint H %% 2 == 0\nconstraint W %% 2 == 0\ngraph @cnn(%%x: f32[N, 3, H, W]) {\n");
    append_const(t, sizeof t, "w1", "8, 3, 3, 3", 216, 0.3, 1);
    append_const(t, sizeof t, "b1", "8", 8, 0.3, 2);
    append_const(t, sizeof t, "s", "8", 8, 1.0, 3);
    append_const(t, sizeof t, "bb", "8", 8, 0.3, 4);
    append_const(t, sizeof t, "m", "8", 8, 0.3, 5);
    append_const(t, sizeof t, "w2", "6, 4, 1, 1", 24, 0.3, 6);
    append_const(t, sizeof t, "wd", "6, 1, 3, 3", 54, 0.3, 7);
    append_const(t, sizeof t, "w3", "5, 6", 30, 0.3, 8);
    append_const(t, sizeof t, "b3", "5", 5, 0.3, 9);
    snprintf(t + strlen(t), sizeof t - strlen(t),
             "  const %%v: f32[8] = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]\n"
             "  %%c1 = Conv(%%x, %%w1, %%b1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : f32[N, 8, H, W]\n"
             "  %%bn = BatchNormalization(%%c1, %%s, %%bb, %%m, %%v) : f32[N, 8, H, W]\n"
             "  %%r = Relu(%%bn) : f32[N, 8, H, W]\n"
             "  %%p = MaxPool(%%r) {kernel_shape = [2, 2], strides = [2, 2]} : f32[N, 8, H/2, W/2]\n"
             "  %%c2 = Conv(%%p, %%w2) {group = 2} : f32[N, 6, H/2, W/2]\n"
             "  %%dw = Conv(%%c2, %%wd) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2], group = 6} : "
             "f32[N, 6, (H/2 - 1)/2 + 1, (W/2 - 1)/2 + 1]\n"
             "  %%a = AveragePool(%%dw) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 0} : "
             "f32[N, 6, (H/2 - 1)/2 + 1, (W/2 - 1)/2 + 1]\n"
             "  %%g = GlobalAveragePool(%%a) : f32[N, 6, 1, 1]\n  %%f = Flatten(%%g) : f32[N, 6]\n"
             "  %%y = Gemm(%%f, %%w3, %%b3) {transB = 1} : f32[N, 5]\n  return %%y\n}\n");
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "cnn.ir");
    write_text(model, t);
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t shapes[][1][4] = {{{1, 3, 4, 4}}, {{2, 3, 30, 14}}, {{4, 3, 64, 64}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* An equality between two input symbols (Concat of [S, 4] and [T, 4] on axis 1 needs S == T):
 * compiled once, checked on every run with the values that broke it. */
Test(artifact_symbolic, equality_guard_between_inputs) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "eq.ir");
    write_text(model, "symbol S, T\nconstraint S in [1, 8]\nconstraint T in [1, 8]\n"
                      "graph @eq(%a: f32[S, 4], %b: f32[T, 4]) {\n  %y = Concat(%a, %b) {axis = 1} : f32[S, 8]\n  return %y\n}\n");
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t ok[][4] = {{3, 4}, {3, 4}};
    check_shapes(model, a, ok);
    float buf[64] = {0};
    IrtTensor in[2] = {{.rank = 2, .dims = {3, 4}, .data = buf}, {.rank = 2, .dims = {2, 4}, .data = buf}}, out[1];
    in[0].dtype = in[1].dtype = irt_dtype_code(a, "f32");
    char err[512];
    cr_assert_neq(irt_run(a, in, out, err, sizeof err), 0);
    cr_assert(strstr(err, "guard failed: S == T does not hold for S = 3, T = 2"), "%s", err);
    irt_free(a);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* Split with constant sizes, Expand to a shape computed by Shape, a broadcast Add, Softmax and
 * batched MatMuls over [B, S, S]: one artifact at (1, 1), (3, 17) and (8, 64). */
Test(artifact_symbolic, split_expand_softmax) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "es.ir");
    write_text(model, "symbol B, S\nconstraint B in [1, 8]\nconstraint S in [1, 64]\n"
                      "graph @es(%x: f32[B, S, 6], %m: f32[B, 1, S]) {\n  const %parts: i64[3] = [1, 2, 3]\n"
                      "  %a, %b, %c = Split(%x, %parts) {axis = 2} : f32[B, S, 1], f32[B, S, 2], f32[B, S, 3]\n"
                      "  %ct = Transpose(%c) {perm = [0, 2, 1]} : f32[B, 3, S]\n  %q = MatMul(%c, %ct) : f32[B, S, S]\n"
                      "  %shape = Shape(%q) : i64[3]\n  %e = Expand(%m, %shape) : f32[B, S, S]\n"
                      "  %w = Add(%q, %e) : f32[B, S, S]\n  %s = Softmax(%w) {axis = -1} : f32[B, S, S]\n"
                      "  %y = MatMul(%s, %c) : f32[B, S, 3]\n  %z = Mul(%y, %a) : f32[B, S, 3]\n  return %z, %b\n}\n");
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t shapes[][2][4] = {{{1, 1, 6}, {1, 1, 1}}, {{3, 17, 6}, {3, 1, 17}}, {{8, 64, 6}, {8, 1, 64}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* MatMuls with a symbolic dim and a small constant one run as generated loops (cpu/dyn.c):
 * B with few constant columns (1, 3, 8, 16, 64: rows of the result in registers, 8
 * accumulators over a run-time K that is or is not a multiple of 8, also under 8), A with few
 * constant columns (K = 1, 5, 16: 16 result columns at a time, the run-time rest masked), and
 * one with neither (the BLAS GEMM), against the interpreter at several bindings. */
Test(artifact_symbolic, skinny_matmuls) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "mm.ir");
    write_text(model, "symbol B, S\nconstraint B in [1, 4]\nconstraint S in [1, 300]\n"
                      "graph @mm(%a: f32[B, S, S], %x: f32[B, S, 64], %k: f32[B, S, 5]) {\n"
                      "  const %sx: i64[5] = [1, 3, 8, 16, 36]\n  const %sk: i64[2] = [1, 4]\n"
                      "  %kt = Transpose(%k) {perm = [0, 2, 1]} : f32[B, 5, S]\n"
                      "  %x1, %x3, %x8, %x16, %rest = Split(%x, %sx) {axis = 2} : "
                      "f32[B, S, 1], f32[B, S, 3], f32[B, S, 8], f32[B, S, 16], f32[B, S, 36]\n"
                      "  %y1 = MatMul(%a, %x1) : f32[B, S, 1]\n  %y3 = MatMul(%a, %x3) : f32[B, S, 3]\n"
                      "  %y8 = MatMul(%a, %x8) : f32[B, S, 8]\n  %y16 = MatMul(%a, %x16) : f32[B, S, 16]\n"
                      "  %y64 = MatMul(%a, %x) : f32[B, S, 64]\n"
                      "  %k1, %k4 = Split(%k, %sk) {axis = 2} : f32[B, S, 1], f32[B, S, 4]\n"
                      "  %k1t = Transpose(%k1) {perm = [0, 2, 1]} : f32[B, 1, S]\n"
                      "  %z1 = MatMul(%k1, %k1t) : f32[B, S, S]\n  %z5 = MatMul(%k, %kt) : f32[B, S, S]\n"
                      "  %x16t = Transpose(%x16) {perm = [0, 2, 1]} : f32[B, 16, S]\n"
                      "  %z16 = MatMul(%x16, %x16t) : f32[B, S, S]\n  %zz = MatMul(%z5, %a) : f32[B, S, S]\n"
                      "  return %y1, %y3, %y8, %y16, %y64, %z1, %z5, %z16, %zz\n}\n");
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t shapes[][3][4] = {{{1, 1, 1}, {1, 1, 64}, {1, 1, 5}},
                                    {{2, 7, 7}, {2, 7, 64}, {2, 7, 5}},
                                    {{1, 16, 16}, {1, 16, 64}, {1, 16, 5}},
                                    {{3, 33, 33}, {3, 33, 64}, {3, 33, 5}},
                                    {{2, 300, 300}, {2, 300, 64}, {2, 300, 5}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* Attention with symbolic batch and sequence compiles to one kernel (cpu/dyn.c): Q scaled (a
 * scalar times Q, both from outside the group) or the scores divided, a broadcast mask added on
 * either side, a head of 8 and values of 12 columns; a Where mask (not
 * taken by that kernel) runs op by op. Both against the interpreter at several bindings. */
static void dyn_attention(const char *q_members, const char *scores_members, const char *last, bool fused) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "att.ir"), text[2048];
    snprintf(text, sizeof text,
             "symbol B, S\nconstraint B in [1, 4]\nconstraint S in [1, 200]\n"
             "graph @att(%%q: f32[B, 2, S, 8], %%k: f32[B, 2, 8, S], %%v: f32[B, 2, S, 12], %%m: f32[B, 1, 1, S]) {\n"
             "  const %%sc: f32[] = [0.35]\n  const %%zero: f32[] = [0.0]\n  const %%big: f32[] = [-1e9]\n"
             "%s  %%s = MatMul(%%qs, %%k) : f32[B, 2, S, S]\n%s"
             "  %%p = Softmax(%%%s) {axis = -1} : f32[B, 2, S, S]\n  %%y = MatMul(%%p, %%v) : f32[B, 2, S, 12]\n"
             "  return %%y\n}\n",
             q_members, scores_members, last);
    write_text(model, text);
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t shapes[][4][4] = {{{1, 2, 1, 8}, {1, 2, 8, 1}, {1, 2, 1, 12}, {1, 1, 1, 1}},
                                    {{2, 2, 7, 8}, {2, 2, 8, 7}, {2, 2, 7, 12}, {2, 1, 1, 7}},
                                    {{3, 2, 33, 8}, {3, 2, 8, 33}, {3, 2, 33, 12}, {3, 1, 1, 33}},
                                    {{4, 2, 200, 8}, {4, 2, 8, 200}, {4, 2, 200, 12}, {4, 1, 1, 200}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    char *out = inspect_text(sub);
    cr_assert_eq(strstr(out, " irtool.fused ") != NULL, fused, "%s", out);
    free(out);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

Test(artifact_symbolic, attention_groups_with_runtime_shapes) {
    dyn_attention("  %qs = Mul(%sc, %q) : f32[B, 2, S, 8]\n", "  %s1 = Add(%s, %m) : f32[B, 2, S, S]\n", "s1", true);
    dyn_attention("  %qs = Identity(%q) : f32[B, 2, S, 8]\n",
                  "  %s0 = Div(%s, %sc) : f32[B, 2, S, S]\n  %s1 = Add(%m, %s0) : f32[B, 2, S, S]\n", "s1", true);
    dyn_attention("  %qs = Mul(%q, %sc) : f32[B, 2, S, 8]\n",
                  "  %c = Greater(%m, %zero) : bool[B, 1, 1, S]\n  %s1 = Where(%c, %s, %big) : f32[B, 2, S, S]\n", "s1", false);
}

/* A group the fuse pass does not form but a model may carry: Q through Relu, the scores
 * squashed (tanh(s * c)) and masked; the one attention kernel takes any chain of typed
 * elementwise members, at run-time shapes as at static ones. */
Test(artifact_symbolic, attention_group_with_unary_members) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "att.ir"), *sub;
    write_text(model, "symbol B, S\nconstraint B in [1, 4]\nconstraint S in [1, 200]\n"
                      "graph @att(%q: f32[B, 2, S, 8], %k: f32[B, 2, 8, S], %v: f32[B, 2, S, 12], %m: f32[B, 1, 1, S]) {\n"
                      "  const %sc: f32[] = [0.35]\n"
                      "  %y = irtool.fused(%q, %k, %v, %m, %sc) {kind = \"attention\"} : f32[B, 2, S, 12] {\n"
                      "    body(%q.a: f32[B, 2, S, 8], %k.a: f32[B, 2, 8, S], %v.a: f32[B, 2, S, 12], %m.a: f32[B, 1, 1, S], "
                      "%sc.a: f32[]) {\n"
                      "      %qs = Relu(%q.a) : f32[B, 2, S, 8]\n      %s = MatMul(%qs, %k.a) : f32[B, 2, S, S]\n"
                      "      %s0 = Mul(%s, %sc.a) : f32[B, 2, S, S]\n      %t = Tanh(%s0) : f32[B, 2, S, S]\n"
                      "      %s1 = Add(%t, %m.a) : f32[B, 2, S, S]\n"
                      "      %p = Softmax(%s1) {axis = -1} : f32[B, 2, S, S]\n      %y.i = MatMul(%p, %v.a) : f32[B, 2, S, 12]\n"
                      "      return %y.i\n    }\n  }\n  return %y\n}\n");
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t shapes[][4][4] = {{{1, 2, 1, 8}, {1, 2, 8, 1}, {1, 2, 1, 12}, {1, 1, 1, 1}},
                                    {{3, 2, 33, 8}, {3, 2, 8, 33}, {3, 2, 33, 12}, {3, 1, 1, 33}},
                                    {{4, 2, 200, 8}, {4, 2, 8, 200}, {4, 2, 200, 12}, {4, 1, 1, 200}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    char *out = inspect_text(sub);
    cr_assert(strstr(out, "kernels 1\n") && strstr(out, " irtool.fused "), "%s", out);
    free(out);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* Elementwise chains over run-time shapes fuse into one kernel each (cpu/dyn.c): GELU written
 * out (Erf), a bias broadcast along the last dim, a [B, S, 1] factor, a comparison feeding a
 * Where, two results of the group; compiled once, against the interpreter at four bindings. */
/* Compiles text once for its symbolic dims, runs it at the bindings shapes (f32 inputs, against
 * the interpreter), and expects n_out outputs computed by one kernel, a fused group. */
static void one_group_kernel(const char *text, uint32_t n_out, const int64_t (*shapes)[3][4], size_t n_shapes) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "g.ir"), *sub;
    write_text(model, text);
    IrtArtifact *a = compile_load(model, &sub);
    for (size_t i = 0; i < n_shapes; i++) check_shapes(model, a, shapes[i]);
    cr_assert_eq(irt_num_outputs(a), n_out);
    irt_free(a);
    char *out = inspect_text(sub);
    cr_assert(strstr(out, "kernels 1\n") && strstr(out, " irtool.fused "), "%s", out);
    free(out);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

Test(artifact_symbolic, elementwise_groups_with_runtime_shapes) {
    const int64_t shapes[][3][4] = {{{1, 1, 8}, {8}, {1, 1, 1}}, {{2, 7, 8}, {8}, {2, 7, 1}},
                                    {{3, 33, 8}, {8}, {3, 33, 1}}, {{8, 300, 8}, {8}, {8, 300, 1}}};
    one_group_kernel("symbol B, S\nconstraint B in [1, 8]\nconstraint S in [1, 300]\n"
                     "graph @ew(%x: f32[B, S, 8], %b: f32[8], %c: f32[B, S, 1]) {\n"
                     "  const %h: f32[] = [0.5]\n  const %k: f32[] = [0.70710678]\n  const %one: f32[] = [1.0]\n"
                     "  %a = Add(%x, %b) : f32[B, S, 8]\n  %t = Mul(%a, %k) : f32[B, S, 8]\n"
                     "  %e = Erf(%t) : f32[B, S, 8]\n  %u = Add(%e, %one) : f32[B, S, 8]\n"
                     "  %v = Mul(%a, %h) : f32[B, S, 8]\n  %g = Mul(%v, %u) : f32[B, S, 8]\n"
                     "  %z = Mul(%g, %c) : f32[B, S, 8]\n  %p = Greater(%z, %h) : bool[B, S, 8]\n"
                     "  %w = Where(%p, %z, %h) : f32[B, S, 8]\n  %y = Sub(%w, %a) : f32[B, S, 8]\n"
                     "  return %y, %a\n}\n",
                     2, shapes, sizeof shapes / sizeof shapes[0]);
}

/* Row groups over run-time rows (cpu/dyn.c): a residual Add into LayerNorm (the sum exported
 * too) and a scale and mask into Softmax, rows of 48 with B and S known at run time; against
 * the interpreter at four bindings, each group one kernel. */
Test(artifact_symbolic, row_groups_with_runtime_shapes) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "rg.ir"), text[4096];
    char g[40 * 48], bb[40 * 48];
    int n = snprintf(text, sizeof text, "symbol B, S\nconstraint B in [1, 8]\nconstraint S in [1, 300]\n"
                                        "graph @rg(%%x: f32[B, S, 48], %%r: f32[B, S, 48], %%m: f32[B, 1, 48]) {\n");
    size_t pg = 0, pb = 0;
    for (int i = 0; i < 48; i++) {
        pg += (size_t)snprintf(g + pg, sizeof g - pg, "%s%.3f", i ? ", " : "", 0.5 + (double)((i * 37) % 48) / 48.0);
        pb += (size_t)snprintf(bb + pb, sizeof bb - pb, "%s%.3f", i ? ", " : "", (double)((i * 11) % 48) / 48.0 - 0.5);
    }
    n += snprintf(text + n, sizeof text - (size_t)n,
                  "  const %%g: f32[48] = [%s]\n  const %%bb: f32[48] = [%s]\n  const %%sc: f32[] = [0.125]\n"
                  "  %%a = Add(%%x, %%r) : f32[B, S, 48]\n"
                  "  %%n = LayerNormalization(%%a, %%g, %%bb) {axis = -1, epsilon = 1e-05} : f32[B, S, 48]\n"
                  "  %%y = Relu(%%n) : f32[B, S, 48]\n  %%s = Mul(%%x, %%sc) : f32[B, S, 48]\n"
                  "  %%t = Add(%%s, %%m) : f32[B, S, 48]\n  %%p = Softmax(%%t) {axis = -1} : f32[B, S, 48]\n"
                  "  %%q = Mul(%%p, %%r) : f32[B, S, 48]\n  return %%y, %%a, %%q\n}\n",
                  g, bb);
    cr_assert(n > 0 && (size_t)n < sizeof text);
    write_text(model, text);
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t shapes[][3][4] = {{{1, 1, 48}, {1, 1, 48}, {1, 1, 48}}, {{2, 7, 48}, {2, 7, 48}, {2, 1, 48}},
                                    {{3, 33, 48}, {3, 33, 48}, {3, 1, 48}}, {{8, 300, 48}, {8, 300, 48}, {8, 1, 48}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    char *out = inspect_text(sub);
    cr_assert(strstr(out, "node 0 irtool.fused a\n") && strstr(out, " irtool.fused p\n"), "%s", out);
    cr_assert(!strstr(out, " LayerNormalization ") && !strstr(out, " Softmax "), "%s", out);
    free(out);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* Contraction epilogues over run-time shapes are one kernel each (cpu/dyn.c), as with static
 * shapes: a MatMul of 80 columns (the BLAS GEMM) with a bias, a residual and Relu, run in blocks
 * of rows for the largest binding (2400 rows); one of 16 columns (generated loops for small
 * products, the GEMM for large ones) whose residual broadcasts over the batch only (the epilogue
 * then over the whole result); a Gemm (A transposed) with its C and a Sigmoid. Against the interpreter at
 * several bindings. */
static void dyn_epilogue(const char *text, const int64_t (*shapes)[4][4], size_t n_shapes) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "e.ir"), *sub;
    write_text(model, text);
    IrtArtifact *a = compile_load(model, &sub);
    for (size_t i = 0; i < n_shapes; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    char *out = inspect_text(sub);
    cr_assert(strstr(out, "kernels 1\n") && strstr(out, " irtool.fused "), "%s", out);
    free(out);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

Test(artifact_symbolic, epilogue_groups_with_runtime_shapes) {
    const int64_t wide[][4][4] = {{{1, 1, 32}, {32, 80}, {80}, {1, 1, 80}},
                                  {{2, 7, 32}, {32, 80}, {80}, {2, 7, 80}},
                                  {{8, 300, 32}, {32, 80}, {80}, {8, 300, 80}}};
    dyn_epilogue("symbol B, S\nconstraint B in [1, 8]\nconstraint S in [1, 300]\n"
                 "graph @ew(%x: f32[B, S, 32], %w: f32[32, 80], %b: f32[80], %r: f32[B, S, 80]) {\n"
                 "  %m = MatMul(%x, %w) : f32[B, S, 80]\n  %a = Add(%m, %b) : f32[B, S, 80]\n"
                 "  %s = Add(%a, %r) : f32[B, S, 80]\n  %y = Relu(%s) : f32[B, S, 80]\n  return %y\n}\n",
                 wide, sizeof wide / sizeof wide[0]);
    const int64_t narrow[][4][4] = {{{1, 1, 48}, {48, 16}, {16}, {1, 16}},
                                    {{2, 7, 48}, {48, 16}, {16}, {7, 16}},
                                    {{8, 300, 48}, {48, 16}, {16}, {300, 16}}};
    dyn_epilogue("symbol B, S\nconstraint B in [1, 8]\nconstraint S in [1, 300]\n"
                 "graph @en(%x: f32[B, S, 48], %w: f32[48, 16], %b: f32[16], %r: f32[S, 16]) {\n"
                 "  %m = MatMul(%x, %w) : f32[B, S, 16]\n  %a = Add(%b, %m) : f32[B, S, 16]\n"
                 "  %s = Add(%a, %r) : f32[B, S, 16]\n  %y = Tanh(%s) : f32[B, S, 16]\n  return %y\n}\n",
                 narrow, sizeof narrow / sizeof narrow[0]);
    const int64_t gemm[][4][4] = {{{24, 1}, {40, 24}, {40}}, {{24, 9}, {40, 24}, {40}}, {{24, 700}, {40, 24}, {40}}};
    dyn_epilogue("symbol N\nconstraint N in [1, 700]\n"
                 "graph @eg(%x: f32[24, N], %w: f32[40, 24], %c: f32[40]) {\n"
                 "  %m = Gemm(%x, %w, %c) {transA = 1, transB = 1, alpha = 0.5} : f32[N, 40]\n"
                 "  %y = Sigmoid(%m) : f32[N, 40]\n  return %y\n}\n",
                 gemm, sizeof gemm / sizeof gemm[0]);
}

/* A group over run-time shapes mixing dtypes (llvm_ops_ew_member: int32 Mod/Div, bool logic, a
 * Cast to f64 and back, Where on the booleans): one kernel, passing the compile gate (the
 * interpreter on generated inputs), its boolean and integer intermediates also returned. */
Test(artifact_symbolic, typed_elementwise_group_runtime_shapes) {
    one_group_kernel("symbol N, M\nconstraint N in [1, 64]\nconstraint M in [1, 100]\n"
                     "graph @tg(%a: i32[N, M], %b: i32[M], %f: f64[N, 1], %x: f32[N, M]) {\n"
                     "  const %three: i32[] = [3]\n  const %seven: i32[] = [7]\n  const %h: f64[] = [0.25]\n"
                     "  %s = Add(%a, %b) : i32[N, M]\n  %m = Mod(%s, %seven) : i32[N, M]\n"
                     "  %p = Mul(%m, %three) : i32[N, M]\n  %q = Div(%p, %seven) : i32[N, M]\n"
                     "  %g = Greater(%q, %three) : bool[N, M]\n  %ng = Not(%g) : bool[N, M]\n"
                     "  %l = Less(%m, %three) : bool[N, M]\n  %o = Or(%ng, %l) : bool[N, M]\n"
                     "  %c = Cast(%q) {to = f64} : f64[N, M]\n  %d = Mul(%c, %f) : f64[N, M]\n"
                     "  %e = Sub(%d, %h) : f64[N, M]\n  %w = Where(%o, %e, %h) : f64[N, M]\n"
                     "  %cf = Cast(%w) {to = f32} : f32[N, M]\n  %y = Add(%cf, %x) : f32[N, M]\n"
                     "  %t = Tanh(%y) : f32[N, M]\n  return %t, %o, %q\n}\n",
                     3, NULL, 0);
}

/* A Conv whose kernel is larger than its input for some binding the constraint allows (S < 3):
 * the artifact refuses that binding with the output dim it would get, and the JIT, specializing
 * S, says which symbol value makes a dim negative (before: "out of memory" and no message).
 * Where the dim would be 0 (S = 2) both fail as the interpreter does (before: an empty result). */
Test(artifact_symbolic, window_larger_than_the_input_for_a_binding) {
    static const char model_text[] = "symbol B, S\nconstraint B in [1, 8]\nconstraint S in [1, 32]\n"
                                     "graph @g(%x: f32[B, 1, S, 8]) {\n"
                                     "  const %w: f32[2, 1, 3, 3] = [1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0]\n"
                                     "  %y = Conv(%x, %w) {kernel_shape = [3, 3]}\n  return %y\n}\n";
    char *mdir = tu_mkdtemp(), *model = tu_path_join(mdir, "conv.ir"), *dir, err[512];
    write_text(model, model_text);
    IrtArtifact *a = compile_load(model, &dir);
    float buf[2 * 5 * 8] = {0};
    IrtTensor in = {.dtype = irt_dtype_code(a, "f32"), .rank = 4, .dims = {2, 1, 5, 8}, .data = buf}, out;
    cr_assert_eq(irt_run(a, &in, &out, err, sizeof err), 0, "%s", err); /* S = 5: y [2, 2, 3, 6] */
    cr_assert_eq(out.dims[2], 3);
    free(out.data);
    in.dims[2] = 1;
    cr_assert_neq(irt_run(a, &in, &out, err, sizeof err), 0);
    cr_assert(strstr(err, "guard failed: output 'y' dim 2 is -1 for B = 2, S = 1"), "%s", err);
    in.dims[2] = 2; /* y's dim 2 would be 0: the interpreter's error, not an empty result */
    cr_assert_neq(irt_run(a, &in, &out, err, sizeof err), 0);
    cr_assert(strstr(err, "Conv %y: kernel 3x3 larger than the padded input for this binding"), "%s", err);
    irt_free(a);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(model_text, "conv.ir", &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_run_pipeline(g, "shape-infer", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d)); /* as `irtool run` loads it */
    IrTensor t;
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F32, 4, (int64_t[]){2, 1, 1, 8}), IR_OK);
    cr_assert_neq(llvm_specialize_inputs(g, &t, 1, &d.diag), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "S=1 makes a dim negative (-1)"), "%s", tu_diag_text(&d));
    ir_tensor_free(&t);
    tu_diag_free(&d);
    tu_diag_init(&d);
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F32, 4, (int64_t[]){2, 1, 2, 8}), IR_OK);
    cr_assert_neq(llvm_specialize_inputs(g, &t, 1, &d.diag), IR_OK);
    cr_assert(strstr(tu_diag_text(&d), "kernel larger than padded input on spatial axis 0"), "%s", tu_diag_text(&d));
    ir_tensor_free(&t);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    tu_rmtree(dir), tu_rmtree(mdir);
    free(model), free(dir), free(mdir);
}

/* corpus/mlp.ir quantized by quantize-fp8 (FP8 weights, activations quantized per tensor with a
 * scale computed at run time over the whole batch, so not per sample): one artifact for any
 * B in [1, 64], its FP8 ops on run-time shapes, as the interpreter at each batch. */
Test(artifact_symbolic, fp8_quantized_mlp_any_batch) {
    TuDiag d;
    tu_diag_init(&d);
    char *src = tu_source_path("corpus/mlp.ir"), *mdir = tu_mkdtemp(), *model = tu_path_join(mdir, "mlp_fp8.ir"), *dir;
    IrGraph *g;
    cr_assert_eq(ir_load(src, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_run_pipeline(g, "shape-infer,quantize-fp8", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    IrStrBuf t;
    ir_strbuf_init(&t);
    cr_assert_eq(ir_print_text(g, &t), IR_OK);
    cr_assert(strstr(t.data, "irtool.fp8_matmul"));
    write_text(model, t.data);
    ir_strbuf_free(&t);
    ir_graph_destroy(g);
    IrtArtifact *a = compile_load(model, &dir);
    static const int64_t dims[3][1][4] = {{{1, 64}}, {{7, 64}}, {{64, 64}}};
    for (int i = 0; i < 3; i++) check_shapes(model, a, dims[i]);
    irt_free(a);
    tu_diag_free(&d);
    tu_rmtree(dir), tu_rmtree(mdir);
    free(src), free(model), free(dir), free(mdir);
}

/* The row family (cpu/rows.c) on run-time shapes: LayerNormalization over the last axis with its
 * Mean and InvStdDev outputs, over the last two axes with a scale broadcast over S, LogSoftmax
 * over a middle axis (rows with a stride), and the vectorized f32 LayerNorm over a row of D, as
 * the interpreter at each binding. */
Test(artifact_symbolic, layernorm_statistics_and_softmax_any_shape) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "ln.ir");
    write_text(model, "symbol B, S, D\nconstraint B in [1, 4]\nconstraint S in [1, 32]\nconstraint D in [1, 64]\n"
                      "graph @ln(%x: f32[B, S, D], %s: f32[D], %b: f32[D]) {\n"
                      "  %y, %m, %r = LayerNormalization(%x, %s, %b) {axis = -1, epsilon = 0.001} : f32[B, S, D], f32[B, S, 1], f32[B, S, 1]\n"
                      "  %z = LayerNormalization(%y, %s) {axis = 1} : f32[B, S, D]\n"
                      "  %p = LogSoftmax(%z) {axis = 1} : f32[B, S, D]\n"
                      "  %f = LayerNormalization(%p, %s, %b) : f32[B, S, D]\n"
                      "  return %f, %m, %r\n}\n");
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    const int64_t shapes[][3][4] = {{{1, 1, 1}, {1}, {1}}, {{3, 5, 7}, {7}, {7}}, {{4, 32, 64}, {64}, {64}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* NegativeLogLikelihoodLoss with the target's length a symbol of its own: compiled once, the
 * loss at a binding where it is x's N, and the run refused with the reason where it is not. */
Test(artifact_symbolic, loss_target_dims_checked_at_run_time) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "nll.ir");
    write_text(model, "symbol N, C, M\nconstraint N in [1, 16]\nconstraint C in [1, 16]\nconstraint M in [1, 16]\n"
                      "graph @nll(%x: f32[N, C], %t: i64[M]) {\n"
                      "  %y = NegativeLogLikelihoodLoss(%x, %t) {reduction = \"sum\"}\n  return %y\n}\n");
    char *sub;
    IrtArtifact *a = compile_load(model, &sub);
    float x[3 * 4];
    for (int i = 0; i < 12; i++) x[i] = (float)i;
    int64_t t[3] = {1, 3, 0};
    IrtTensor in[2] = {{.dtype = irt_dtype_code(a, "f32"), .rank = 2, .dims = {3, 4}, .data = x},
                       {.dtype = irt_dtype_code(a, "i64"), .rank = 1, .dims = {3}, .data = t}},
              out[1];
    char err[512];
    cr_assert_eq(irt_run(a, in, out, err, sizeof err), 0, "%s", err);
    cr_assert_eq(out[0].rank, 0);
    cr_assert_float_eq(*(float *)out[0].data, -(1.0f + 7.0f + 8.0f), 1e-6);
    free(out[0].data);
    in[1].dims[0] = 2;
    cr_assert_neq(irt_run(a, in, out, err, sizeof err), 0);
    cr_assert(strstr(err, "NegativeLogLikelihoodLoss %y: the target's dims are not the input's N and spatial dims"), "%s", err);
    irt_free(a);
    tu_rmtree(sub);
    tu_rmtree(dir);
    free(model), free(dir), free(sub);
}

/* Data movement with run-time dims (backend/cpu/data.c's emitters, one for static and run-time
 * shapes): Tile, Pad, TopK, Einsum, GridSample, Quantize/DequantizeLinear per axis,
 * DepthToSpace, Expand, EyeLike, Split and the copy ops agree with the interpreter at several
 * bindings, dims of 1 at run time included. */
Test(artifact_symbolic, data_movement_any_shape) {
    static const char model_text[] =
        "symbol N, M\nconstraint N in [1, 8]\nconstraint M in [1, 12]\n"
        "graph @g(%a: f32[N, 4, M], %grid: f32[N, 3, 5, 2], %img: f32[N, 4, M, 4]) {\n"
        "  const %rep: i64[3] = [2, 1, 3]\n  const %pads: i64[6] = [0, 1, 2, 1, 0, 1]\n  const %k: i64[1] = [2]\n"
        "  const %sc: f32[4] = [0.5, 0.25, 2.0, 1.0]\n  const %zp: i8[4] = [1, -2, 3, 0]\n"
        "  const %eshape: i64[4] = [2, 1, 4, 1]\n"
        "  %t = Tile(%a, %rep)\n  %pr = Pad(%a, %pads) {mode = \"reflect\"}\n  %pw = Pad(%a, %pads) {mode = \"wrap\"}\n"
        "  %tv, %ti = TopK(%a, %k) {axis = 1}\n  %ein = Einsum(%a, %a) {equation = \"nij,nkj->nik\"}\n"
        "  %gs = GridSample(%img, %grid) {mode = \"bicubic\", padding_mode = \"reflection\"}\n"
        "  %q = QuantizeLinear(%a, %sc, %zp) {axis = 1}\n  %dq = DequantizeLinear(%q, %sc, %zp) {axis = 1}\n"
        "  %d2s = DepthToSpace(%img) {blocksize = 2, mode = \"CRD\"}\n  %ex = Expand(%a, %eshape)\n"
        "  %fl = Flatten(%a) {axis = 1}\n  %ey = EyeLike(%fl) {k = 1}\n  %s1, %s2 = Split(%a) {axis = 1, num_outputs = 2}\n"
        "  %dr = Dropout(%s2)\n"
        "  return %t, %pr, %pw, %tv, %ein, %gs, %dq, %d2s, %ex, %ey, %dr\n}\n";
    char *mdir = tu_mkdtemp(), *model = tu_path_join(mdir, "data.ir"), *dir;
    write_text(model, model_text);
    IrtArtifact *a = compile_load(model, &dir);
    const int64_t shapes[][4][4] = {{{1, 4, 1}, {1, 3, 5, 2}, {1, 4, 1, 4}},
                                    {{3, 4, 5}, {3, 3, 5, 2}, {3, 4, 5, 4}},
                                    {{8, 4, 12}, {8, 3, 5, 2}, {8, 4, 12, 4}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_shapes(model, a, shapes[i]);
    irt_free(a);
    tu_rmtree(dir), tu_rmtree(mdir);
    free(model), free(dir), free(mdir);
}

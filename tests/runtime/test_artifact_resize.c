/* Resize with run-time shapes (backend/cpu/resize.c, one emitter for static and run-time shapes):
 * an artifact compiled once with symbolic input dims and scales, sizes or roi given as graph
 * inputs binds the output dims before the run (trunc(dim * scale): manifest `insymmul`; the sizes:
 * `insymval`) and computes the taps per run. One artifact runs at several input shapes and
 * values and matches the interpreter; scales that give no valid dims fail the run by name. */
#include "backend/backend.h"
#include "backend/runtime/abi.h"
#include "backend/runtime/checksum.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* One input of a run: dims (rank r) and, for a parameter input, its values (NULL: random data). */
typedef struct In {
    uint32_t r;
    int64_t d[4];
    const double *vals;
} In;

static IrtArtifact *compile_text(const char *text, char **dir) {
    *dir = tu_mkdtemp();
    char *model = tu_path_join(*dir, "m.ir"), *irx = tu_path_join(*dir, "m.irx");
    cr_assert(tu_write_file(model, text, strlen(text)));
    TuRun r = tu_compile_unbound(model, irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char err[1024];
    IrtArtifact *a = irt_load(irx, err, sizeof err);
    cr_assert(a, "%s", err);
    free(model), free(irx);
    return a;
}

/* Runs artifact a and the interpreter on the model in dir with inputs `ins`; compares every
 * output (dims and values), or expects the artifact's run to fail with `fails` in its message. */
static void check_run(const char *dir, IrtArtifact *a, const In *ins, const char *fails) {
    TuDiag d;
    tu_diag_init(&d);
    char *model = tu_path_join(dir, "m.ir");
    IrGraph *g;
    cr_assert_eq(ir_load(model, &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    uint32_t n_in = irt_num_inputs(a), n_out = irt_num_outputs(a);
    cr_assert(n_in <= 4 && n_out <= 4);
    IrTensor in[4] = {0}, ref[4] = {0};
    IrtTensor ri[4], out[4];
    for (uint32_t i = 0; i < n_in; i++) {
        IrtTensor info;
        irt_input_info(a, i, &info);
        IrDType dt = ir_type_dtype(g, ir_value_type(g, ir_graph_input(g, i)));
        cr_assert_eq(ir_tensor_alloc(&in[i], dt, ins[i].r, ins[i].d), IR_OK);
        if (ins[i].vals)
            for (int64_t k = 0; k < ir_tensor_numel(&in[i]); k++) ir_elem_set_f64(dt, in[i].data, (size_t)k, ins[i].vals[k]);
        else tu_fill_pm1(&in[i], i + 7);
        ri[i] = (IrtTensor){.dtype = info.dtype, .rank = ins[i].r, .data = in[i].data};
        memcpy(ri[i].dims, ins[i].d, sizeof ins[i].d);
    }
    char err[1024] = "";
    int rc = irt_run(a, ri, out, err, sizeof err);
    if (fails) {
        cr_assert_neq(rc, 0, "the run with bad parameters succeeded");
        cr_assert(strstr(err, fails), "%s", err);
    } else {
        cr_assert_eq(rc, 0, "%s", err);
        cr_assert_eq(ir_interp_run(g, in, n_in, ref, &(IrInterpOptions){0}, &d.diag), IR_OK, "%s", tu_diag_text(&d));
        for (uint32_t j = 0; j < n_out; j++) {
            char what[32];
            snprintf(what, sizeof what, "output %u", j);
            tu_assert_output_close(&ref[j], out[j].rank, out[j].dims, out[j].data, what);
            free(out[j].data);
            ir_tensor_free(&ref[j]);
        }
    }
    for (uint32_t i = 0; i < n_in; i++) ir_tensor_free(&in[i]);
    ir_graph_destroy(g);
    free(model);
    tu_diag_free(&d);
}

/* Scales as a graph input: the output dims are trunc(dim * scale) of the run's dims and values;
 * nearest, linear (align_corners) and cubic (exclude_outside) up and down, at two shapes. */
Test(artifact_resize, scales_at_run_time_any_shape) {
    char *dir;
    IrtArtifact *a = compile_text(
        "symbol N, H, W\n"
        "graph @g(%x: f32[N, 3, H, W], %s: f32[4]) {\n"
        "  %n = Resize(%x, _, %s)\n"
        "  %l = Resize(%x, _, %s) {mode = \"linear\", coordinate_transformation_mode = \"align_corners\"}\n"
        "  %c = Resize(%x, _, %s) {mode = \"cubic\", exclude_outside = 1}\n"
        "  return %n, %l, %c\n}\n",
        &dir);
    check_run(dir, a, (In[]){{4, {1, 3, 4, 5}, NULL}, {1, {4}, (double[]){1, 1, 2, 1.5}}}, NULL);
    check_run(dir, a, (In[]){{4, {2, 3, 7, 3}, NULL}, {1, {4}, (double[]){1, 1, 0.6, 2.5}}}, NULL);
    check_run(dir, a, (In[]){{4, {1, 3, 9, 1}, NULL}, {1, {4}, (double[]){2, 1, 0.34, 3}}}, NULL);
    /* a negative scale gives no dim: refused before the run, naming the input */
    check_run(dir, a, (In[]){{4, {1, 3, 4, 5}, NULL}, {1, {4}, (double[]){1, 1, -2, 1}}}, "entry 2 of input s");
    irt_free(a);
    /* a manifest whose scaled binding reads a symbol bound only after it is refused as corrupt */
    char *irx = tu_path_join(dir, "m.irx");
    size_t len;
    char *d = tu_read_file(irx, &len);
    cr_assert(d);
    uint64_t mo, ml;
    memcpy(&mo, d + 16, 8), memcpy(&ml, d + 24, 8);
    char *m = d + mo, *l2 = memmem(m, ml, "insymmul 1 2 ", 13), *l3 = memmem(m, ml, "insymmul 1 3 ", 13);
    cr_assert(l2 && l3, "no scaled bindings in the manifest");
    unsigned id2, by2, id3;
    cr_assert_eq(sscanf(l2, "insymmul 1 2 %u %u", &id2, &by2), 2);
    cr_assert_eq(sscanf(l3, "insymmul 1 3 %u", &id3), 1);
    char was[64], now[64];
    snprintf(was, sizeof was, "insymmul 1 2 %u %u ", id2, by2);
    snprintf(now, sizeof now, "insymmul 1 2 %u %u ", id2, id3);
    cr_assert_eq(strlen(was), strlen(now));
    memcpy(l2, now, strlen(now));
    irt_artifact_put_checksum((unsigned char *)d, len);
    char err[1024] = "";
    IrtArtifact *bad = irt_load_memory(d, len, err, sizeof err);
    cr_assert_null(bad);
    cr_assert(strstr(err, "which no earlier line binds"), "%s", err);
    free(d), free(irx);
    tu_rmtree(dir);
    free(dir);
}

/* Sizes and roi as graph inputs (tf_crop_and_resize, extrapolation outside the roi): the sizes
 * are the output's dims; the roi changes the taps per run. */
Test(artifact_resize, sizes_and_roi_at_run_time_any_shape) {
    char *dir;
    IrtArtifact *a = compile_text(
        "symbol H, W\n"
        "graph @g(%x: f32[1, 2, H, W], %roi: f32[8], %sz: i64[4]) {\n"
        "  const %none: f32[0] = []\n"
        "  %t = Resize(%x, %roi, _, %sz) {mode = \"linear\", coordinate_transformation_mode = \"tf_crop_and_resize\", "
        "extrapolation_value = 5.0}\n"
        "  %n = Resize(%x, %none, %none, %sz) {nearest_mode = \"ceil\"}\n" /* empty roi and scales: the sizes decide */
        "  return %t, %n\n}\n",
        &dir);
    check_run(dir, a,
              (In[]){{4, {1, 2, 4, 4}, NULL}, {1, {8}, (double[]){0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8}}, {1, {4}, (double[]){1, 2, 3, 3}}},
              NULL);
    check_run(dir, a,
              (In[]){{4, {1, 2, 6, 3}, NULL}, {1, {8}, (double[]){0, 0, -0.2, 0.1, 1, 1, 1.3, 0.9}}, {1, {4}, (double[]){1, 2, 9, 2}}},
              NULL);
    check_run(dir, a, (In[]){{4, {1, 2, 2, 5}, NULL}, {1, {8}, (double[]){0, 0, 0, 0, 1, 1, 1, 1}}, {1, {4}, (double[]){1, 3, 1, 7}}},
              NULL); /* the channels resized too */
    /* a negative size: refused before the run, naming the input */
    check_run(dir, a, (In[]){{4, {1, 2, 4, 4}, NULL}, {1, {8}, (double[]){0, 0, 0, 0, 1, 1, 1, 1}}, {1, {4}, (double[]){1, 2, -3, 3}}},
              "entry 2 of input sz");
    irt_free(a);
    tu_rmtree(dir);
    free(dir);
}

/* Constant scales p / 2^k (0.5, 1.5) on symbolic dims: shape-infer gives floor(dim * p / 2^k)
 * (odd dims included), the taps are computed per run from the constant scale. */
Test(artifact_resize, constant_scales_symbolic_dims) {
    char *dir;
    IrtArtifact *a = compile_text(
        "symbol H, W\n"
        "graph @g(%x: f32[2, 3, H, W]) {\n"
        "  const %s: f32[4] = [1.0, 1.0, 0.5, 1.5]\n"
        "  %l = Resize(%x, _, %s) {mode = \"linear\"}\n"
        "  %n = Resize(%x, _, %s) {nearest_mode = \"floor\", coordinate_transformation_mode = \"asymmetric\"}\n"
        "  return %l, %n\n}\n",
        &dir);
    check_run(dir, a, (In[]){{4, {2, 3, 4, 5}, NULL}}, NULL);
    check_run(dir, a, (In[]){{4, {2, 3, 7, 3}, NULL}}, NULL);
    irt_free(a);
    tu_rmtree(dir);
    free(dir);
}

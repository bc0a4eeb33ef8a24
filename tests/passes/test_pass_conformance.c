/* Passes preserve results on models nobody here wrote: every model of ONNX's simple/,
 * pytorch-converted/ and pytorch-operator/ folders that imports is run through the reference
 * interpreter before and after each pipeline below, on its own test inputs. Structural passes
 * must give bit-identical outputs; fusion must stay within 1e-5 relative (it folds BatchNorm
 * into Conv weights, which rounds differently). Skipped when ../shared is absent. */
#include "passes/passes.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IO 16

static const struct {
    const char *pipeline;
    double rel_tol; /* 0 = bitwise */
} pipelines[] = {
    {"canonicalize", 0}, {"cse", 0},  {"dce", 0},           {"lower-cf", 0},
    {"const-fold", 0},   {"default", 0}, {"shape-infer,fuse", 1e-5},
};

static bool run_graph(IrGraph *g, IrTensor *in, uint32_t n_in, IrTensor *out) {
    IrInterpOptions o = {0};
    return ir_interp_run(g, in, n_in, out, &o, NULL) == IR_OK;
}

static bool same(const IrTensor *a, const IrTensor *b, double rel_tol, char *why, size_t cap) {
    if (a->dtype != b->dtype || a->rank != b->rank) {
        snprintf(why, cap, "dtype or rank differs");
        return false;
    }
    for (uint32_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) {
            snprintf(why, cap, "dim %u differs", i);
            return false;
        }
    size_t nb = ir_tensor_nbytes(a);
    if (a->dtype == IR_DTYPE_STRING) { /* elements point at bytes: compare the bytes */
        const IrStringElem *x = a->data, *y = b->data;
        for (int64_t i = 0; i < ir_tensor_numel(a); i++)
            if (x[i].len != y[i].len || (x[i].len && memcmp(x[i].data, y[i].data, x[i].len) != 0)) {
                snprintf(why, cap, "string element %lld differs", (long long)i);
                return false;
            }
        return true;
    }
    if (rel_tol == 0) {
        if (nb && memcmp(a->data, b->data, nb) != 0) {
            snprintf(why, cap, "outputs are not bit-identical");
            return false;
        }
        return true;
    }
    double amax = 0;
    int64_t n = ir_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs(ir_elem_get_f64(a->dtype, a->data, (size_t)i)));
    for (int64_t i = 0; i < n; i++) {
        double x = ir_elem_get_f64(a->dtype, a->data, (size_t)i), y = ir_elem_get_f64(b->dtype, b->data, (size_t)i);
        if (isnan(x) && isnan(y)) continue;
        if (!(fabs(x - y) <= rel_tol * fmax(amax, 1e-30))) {
            snprintf(why, cap, "element %lld: %g vs %g (largest magnitude %g)", (long long)i, x, y, amax);
            return false;
        }
    }
    return true;
}

static void check_folder(const char *folder) {
    const char *shared = getenv("IRTOOL_SHARED_DIR");
    char *root = shared ? tu_path_join(shared, "onnx-tests") : NULL;
    char *dir = root ? tu_path_join(root, folder) : NULL;
    if (!dir || tu_dir_count(dir) < 0) {
        free(root), free(dir);
        cr_skip_test("../shared/onnx-tests/%s is absent", folder);
    }
    DIR *dh = opendir(dir);
    cr_assert(dh);
    uint32_t models = 0, checks = 0;
    struct dirent *de;
    while ((de = readdir(dh))) {
        if (de->d_name[0] == '.') continue;
        char *tdir = tu_path_join(dir, de->d_name), *model = tu_path_join(tdir, "model.onnx");
        char *ds = tu_path_join(tdir, "test_data_set_0");
        IrGraph *g = NULL;
        IrTensor in[MAX_IO] = {{0}}, ref[MAX_IO] = {{0}};
        uint32_t n_in = 0;
        bool ok = ir_load(model, NULL, &g) == IR_OK && ir_verify(g, NULL) == IR_OK &&
                  ir_graph_num_inputs(g) <= MAX_IO && ir_graph_num_outputs(g) <= MAX_IO;
        for (n_in = 0; ok && n_in < ir_graph_num_inputs(g); n_in++) {
            char name[32];
            snprintf(name, sizeof name, "input_%u.pb", n_in);
            char *pb = tu_path_join(ds, name);
            ok = ir_pb_tensor_read(pb, NULL, &in[n_in], NULL) == IR_OK;
            free(pb);
        }
        ok = ok && run_graph(g, in, n_in, ref);
        if (ok) {
            models++;
            for (size_t p = 0; p < sizeof pipelines / sizeof pipelines[0]; p++) {
                IrGraph *h;
                cr_assert_eq(ir_load(model, NULL, &h), IR_OK);
                TuDiag d;
                tu_diag_init(&d);
                IrPipeline *pl;
                cr_assert_eq(ir_pipeline_parse(pipelines[p].pipeline, &d.diag, &pl), IR_OK);
                IrPipelineOptions o = {true, IR_PRINT_NEVER, NULL, NULL, NULL};
                IrStatus s = ir_pipeline_run(pl, h, &o, &d.diag);
                cr_expect_eq(s, IR_OK, "%s/%s: %s failed: %s", folder, de->d_name, pipelines[p].pipeline, tu_diag_text(&d));
                IrTensor out[MAX_IO] = {{0}};
                if (s == IR_OK) {
                    bool ran = run_graph(h, in, n_in, out);
                    cr_expect(ran, "%s/%s: the graph after %s does not run", folder, de->d_name, pipelines[p].pipeline);
                    for (uint32_t k = 0; ran && k < ir_graph_num_outputs(g); k++) {
                        char why[256];
                        cr_expect(same(&ref[k], &out[k], pipelines[p].rel_tol, why, sizeof why), "%s/%s after %s, output %u: %s",
                                  folder, de->d_name, pipelines[p].pipeline, k, why);
                    }
                    checks++;
                }
                for (uint32_t k = 0; k < MAX_IO; k++) ir_tensor_free(&out[k]);
                ir_pipeline_destroy(pl);
                tu_diag_free(&d);
                ir_graph_destroy(h);
            }
        }
        for (uint32_t k = 0; k < MAX_IO; k++) ir_tensor_free(&in[k]), ir_tensor_free(&ref[k]);
        ir_graph_destroy(g);
        free(tdir), free(model), free(ds);
    }
    closedir(dh);
    cr_log_info("%s: %u models, %u pipeline runs compared", folder, models, checks);
    cr_expect_gt(models, 0);
    free(root), free(dir);
}

Test(pass_conformance, simple, .timeout = 600) { check_folder("simple"); }
Test(pass_conformance, pytorch_converted, .timeout = 600) { check_folder("pytorch-converted"); }
Test(pass_conformance, pytorch_operator, .timeout = 600) { check_folder("pytorch-operator"); }

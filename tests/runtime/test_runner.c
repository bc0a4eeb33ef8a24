/* irtool-run, the runtime-only runner: runs an artifact from the shell with the same summary
 * lines as `irtool run`, writes outputs as .npy, and reports a caller's mistakes (a wrong input
 * name, dtype or count) with the runtime's messages and exit 1; bad arguments exit 2. The
 * binary sits beside irtool in the build tree. */
#include "ir/ir.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

static char *runner_path(void) {
    char *bin = strdup(IRTOOL_BINARY);
    char *p = tu_path_join(dirname(bin), "irtool-run");
    free(bin);
    return p;
}

/* mlp.ir compiled for any batch, and a [3, 64] f32 input in dir. */
static void setup(char **dir, char **irx, char **x) {
    *dir = tu_mkdtemp();
    char *model = tu_source_path("corpus/mlp.ir");
    *irx = tu_path_join(*dir, "m.irx");
    TuRun r = tu_compile_unbound(model, *irx);
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    IrTensor t = {0};
    int64_t dims[2] = {3, 64};
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F32, 2, dims), IR_OK);
    tu_fill_pm1(&t, 7);
    *x = tu_path_join(*dir, "x.npy");
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_npy_write(*x, &t, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    ir_tensor_free(&t);
    free(model);
}

Test(runner, same_summary_as_irtool_run_and_npy_outputs) {
    char *dir, *irx, *x, *runner = runner_path(), *outdir;
    setup(&dir, &irx, &x);
    outdir = tu_path_join(dir, "out");
    const char *args[] = {irx, "--input", x, "-o", outdir, NULL};
    TuRun r;
    cr_assert(tu_run(runner, args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *cargs[] = {"run", irx, "--input", x, NULL};
    TuRun c;
    cr_assert(tu_run_irtool(cargs, NULL, 0, NULL, &c));
    cr_assert_eq(c.status, 0, "%s", c.err);
    cr_assert_str_eq(r.out, c.out);
    cr_assert(strstr(r.out, "f32[3, 10]"), "%s", r.out);
    char *y = tu_path_join(outdir, "y.npy");
    IrTensor t = {0};
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_npy_read(y, &d.diag, &t), IR_OK, "%s", tu_diag_text(&d));
    cr_assert(t.dtype == IR_DTYPE_F32 && t.rank == 2 && t.dims[0] == 3 && t.dims[1] == 10);
    ir_tensor_free(&t);
    tu_diag_free(&d);
    tu_run_free(&r), tu_run_free(&c);
    tu_rmtree(dir);
    free(dir), free(irx), free(x), free(runner), free(outdir), free(y);
}

Test(runner, mistakes_are_clear_errors) {
    char *dir, *irx, *x, *runner = runner_path();
    setup(&dir, &irx, &x);
    char spec[4096];
    snprintf(spec, sizeof spec, "input=%s", x);
    const char *wrong_name[] = {irx, "--input", spec, NULL};
    TuRun r;
    cr_assert(tu_run(runner, wrong_name, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "unknown input 'input'; the artifact's inputs are 'x'"), "%s", r.err);
    tu_run_free(&r);
    const char *cwrong[] = {"run", irx, "--input", spec, NULL}; /* irtool run: its one --input matcher */
    cr_assert(tu_run_irtool(cwrong, NULL, 0, NULL, &r));
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "the model has no input 'input' (its inputs: 'x')"), "%s", r.err);
    tu_run_free(&r);
    const char *missing[] = {irx, NULL};
    cr_assert(tu_run(runner, missing, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "missing input 'x': pass --input x=FILE.npy"), "%s", r.err);
    tu_run_free(&r);
    const char *too_many[] = {irx, x, x, NULL};
    cr_assert(tu_run(runner, too_many, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2, "%s", r.err); /* a second MODEL */
    tu_run_free(&r);
    /* an f64 array: named as f64 although the model never uses f64 */
    IrTensor t = {0};
    int64_t dims[2] = {3, 64};
    cr_assert_eq(ir_tensor_alloc(&t, IR_DTYPE_F64, 2, dims), IR_OK);
    char *x64 = tu_path_join(dir, "x64.npy");
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_npy_write(x64, &t, &d.diag), IR_OK);
    const char *f64[] = {irx, "--input", x64, NULL};
    cr_assert(tu_run(runner, f64, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "input 'x' has dtype f64, the artifact was compiled for f32 (f32[B, 64])"), "%s", r.err);
    tu_run_free(&r);
    const char *notirx[] = {x, "--input", x, NULL};
    cr_assert(tu_run(runner, notirx, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "not an irtool artifact"), "%s", r.err);
    tu_run_free(&r);
    const char *badopt[] = {irx, "--frobnicate", NULL};
    cr_assert(tu_run(runner, badopt, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "unknown option '--frobnicate'"), "%s", r.err);
    tu_run_free(&r);
    ir_tensor_free(&t);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir), free(irx), free(x), free(x64), free(runner);
}

/* --expect: outputs compared with arrays (exit 0 / 3), by cosine similarity, with shapes and
 * names checked; --repeat prints the timing line. */
Test(runner, expect_compares_outputs_and_repeat_times_runs) {
    char *dir, *irx, *x, *runner = runner_path(), *outdir;
    setup(&dir, &irx, &x);
    outdir = tu_path_join(dir, "out");
    const char *make[] = {irx, "--input", x, "-o", outdir, NULL};
    TuRun r;
    cr_assert(tu_run(runner, make, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    char *y = tu_path_join(outdir, "y.npy"), *bad = tu_path_join(dir, "bad.npy"), spec[4200];
    snprintf(spec, sizeof spec, "y=%s", y);
    const char *same[] = {irx, "--input", x, "--expect", spec, "--repeat", "3", NULL};
    cr_assert(tu_run(runner, same, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "expect y: ok\n"), "%s", r.out);
    cr_assert(strstr(r.out, "time: 3 runs, median "), "%s", r.out);
    tu_run_free(&r);

    /* one element off by 1e-2 relative: outside rtol 1e-3, inside a cosine of 0.999 */
    IrTensor t = {0};
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_npy_read(y, &d.diag, &t), IR_OK, "%s", tu_diag_text(&d));
    float *v = t.data;
    v[13] = v[13] * 1.01f + (v[13] == 0 ? 1e-3f : 0);
    cr_assert_eq(ir_npy_write(bad, &t, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    ir_tensor_free(&t);
    tu_diag_free(&d);
    const char *differs[] = {irx, "--input", x, "--expect", bad, NULL};
    cr_assert(tu_run(runner, differs, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 3, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "expect y: differs at [1,3]: got "), "%s", r.out);
    tu_run_free(&r);
    const char *cosine[] = {irx, "--input", x, "--expect", bad, "--cosine", "0.999", NULL};
    cr_assert(tu_run(runner, cosine, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "expect y: ok (cosine similarity 0.99"), "%s", r.out);
    tu_run_free(&r);
    const char *loose[] = {irx, "--input", x, "--expect", bad, "--rtol", "0.05", NULL};
    cr_assert(tu_run(runner, loose, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    tu_run_free(&r);

    const char *shape[] = {irx, "--input", x, "--expect", x, NULL}; /* [3, 64] against [3, 10] */
    cr_assert(tu_run(runner, shape, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 3, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "expect y: differs: the output is f32[3, 10], the expected array f32[3, 64]"), "%s", r.out);
    tu_run_free(&r);
    snprintf(spec, sizeof spec, "z=%s", y);
    const char *name[] = {irx, "--input", x, "--expect", spec, NULL};
    cr_assert(tu_run(runner, name, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "unknown output 'z'"), "%s", r.err);
    tu_run_free(&r);
    const char *nums[] = {irx, "--input", x, "--rtol", "-1", NULL};
    cr_assert(tu_run(runner, nums, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2, "%s%s", r.out, r.err);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(irx), free(x), free(runner), free(outdir), free(y), free(bad);
}

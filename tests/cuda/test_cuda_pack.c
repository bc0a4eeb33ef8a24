/* The GPU pack's build side: `irtool conformance --backend cuda --pack DIR` writes each compiled
 * node test as model.irx with its inputs and expected outputs in .npy, the form irtool-run
 * --expect checks on a GPU machine without LLVM. Without a GPU the packed CUDA artifact refuses
 * to run with a clear error. Needs ptxas and ../shared/onnx-tests/node; skips otherwise. */
#include "ir/ir.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *node_test(const char *name) {
    const char *shared = getenv("IRTOOL_SHARED_DIR");
    char p[1200];
    snprintf(p, sizeof p, "%s/onnx-tests/node/%s", shared ? shared : IRTOOL_SOURCE_DIR "/../shared", name);
    return access(p, R_OK) == 0 ? strdup(p) : NULL;
}

/* The .npy at path equals the ONNX TensorProto at pb, byte for byte. */
static void assert_same_tensor(const char *npy, const char *pb) {
    TuDiag d;
    tu_diag_init(&d);
    IrTensor a = {0}, b = {0};
    cr_assert_eq(ir_npy_read(npy, &d.diag, &a), IR_OK, "%s: %s", npy, tu_diag_text(&d));
    cr_assert_eq(ir_pb_value_read(pb, IR_TYPE_TENSOR, &d.diag, &b), IR_OK, "%s: %s", pb, tu_diag_text(&d));
    cr_assert(a.dtype == b.dtype && a.rank == b.rank, "%s", npy);
    cr_assert_eq(memcmp(a.dims, b.dims, a.rank * sizeof a.dims[0]), 0);
    cr_assert_eq(memcmp(a.data, b.data, (size_t)ir_tensor_numel(&a) * ir_dtype_size(a.dtype)), 0, "%s", npy);
    ir_tensor_free(&a), ir_tensor_free(&b);
    tu_diag_free(&d);
}

Test(cuda_pack, conformance_pack_writes_artifacts_inputs_and_expected_outputs, .timeout = 180) {
    if (!tu_have_ptxas()) cr_skip_test("no CUDA toolkit (ptxas) here: packing CUDA tests needs one");
    char *add = node_test("test_add"), *str = node_test("test_cast_FLOAT_to_STRING");
    if (!add || !str) {
        free(add), free(str);
        cr_skip_test("no ../shared/onnx-tests/node here");
    }
    char *dir = tu_mkdtemp(), *pack = tu_path_join(dir, "pack");
    const char *args[] = {"conformance", add, str, "--backend", "cuda", "--pack", pack, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    tu_run_free(&r);
    cr_assert_eq(tu_dir_count(pack), 1, "only the compiled test is packed");
    char *t = tu_path_join(pack, "test_add"), f[1400], pb[1400];
    cr_assert_eq(tu_dir_count(t), 4, "model.irx, input_0.npy, input_1.npy, expected_0.npy");
    for (int i = 0; i < 2; i++) {
        snprintf(f, sizeof f, "%s/input_%d.npy", t, i);
        snprintf(pb, sizeof pb, "%s/test_data_set_0/input_%d.pb", add, i);
        assert_same_tensor(f, pb);
    }
    snprintf(f, sizeof f, "%s/expected_0.npy", t);
    snprintf(pb, sizeof pb, "%s/test_data_set_0/output_0.pb", add);
    assert_same_tensor(f, pb);

    /* the packed artifact is a CUDA one (inspect's preflight fails without a GPU: not checked) */
    snprintf(f, sizeof f, "%s/model.irx", t);
    const char *ins[] = {"inspect", f, NULL};
    cr_assert(tu_run_irtool(ins, NULL, 0, NULL, &r));
    cr_assert(strstr(r.out, "triple nvptx64-nvidia-cuda\ntarget cuda:sm_90\n"), "%s", r.out);
    tu_run_free(&r);
    char *bin = strdup(IRTOOL_BINARY), *runner = tu_path_join(dirname(bin), "irtool-run"), in0[1400], in1[1400], ex[1400];
    snprintf(in0, sizeof in0, "%s/input_0.npy", t);
    snprintf(in1, sizeof in1, "%s/input_1.npy", t);
    snprintf(ex, sizeof ex, "%s/expected_0.npy", t);
    const char *run[] = {f, "--input", in0, "--input", in1, "--expect", ex, NULL};
    cr_assert(tu_run(runner, run, NULL, 0, NULL, &r));
    if (access("/dev/nvidiactl", F_OK) != 0) {
        cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
        cr_assert(strstr(r.err, "no CUDA driver/GPU found"), "%s", r.err);
    } else {
        cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
        cr_assert(strstr(r.out, "ok"), "%s", r.out);
    }
    tu_run_free(&r);

    const char *bad[] = {"conformance", add, "--pack", pack, NULL};
    cr_assert(tu_run_irtool(bad, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "--pack needs --backend cuda"), "%s", r.err);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(pack), free(t), free(bin), free(runner), free(add), free(str);
}

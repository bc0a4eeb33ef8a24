/* The backends' op tables against ir/ops.def: every op has a CPU row and a CUDA row that either
 * name an emitter or say why there is none, an op without one is refused with a message naming
 * it, and the rows send ops to the family that computes them.
 */
#include "backend/cpu/cpu.h"
#include "backend/cuda/cuda.h"
#include "testutil.h"

#include <criterion/criterion.h>
#include <string.h>

Test(op_tables, every_op_has_a_cpu_row) {
    for (int op = 1; op < IR_OP_COUNT; op++) {
        const CpuOpRow *r = cpu_op_row((IrOp)op);
        bool kernel = r->emit || r->emit_dyn || r->emit_str || (r->flags & CPU_ONCE);
        bool why = r->none && *r->none;
        cr_expect(kernel != why, "%s: the CPU row must name an emitter or say why it has none (and not both)",
                  ir_op_name((IrOp)op));
    }
    cr_expect(cpu_op_row(IR_OP_NONE)->none, "ids outside the table have a reason");
    cr_expect(cpu_op_row(IR_OP_COUNT)->none, "ids outside the table have a reason");
}

Test(op_tables, every_op_has_a_cuda_row) {
    for (int op = 1; op < IR_OP_COUNT; op++) {
        const CudaOpRow *r = cuda_op_row((IrOp)op);
        cr_expect((r->emit != NULL) != (r->none && *r->none), "%s: the CUDA row must name an emitter or say why not",
                  ir_op_name((IrOp)op));
    }
}

/* The CUDA backend compiles a subset of what the CPU backend does: an op with a CUDA emitter has
 * a CPU one too (the CPU build is the CUDA compile's gate). */
Test(op_tables, cuda_ops_are_cpu_ops) {
    for (int op = 1; op < IR_OP_COUNT; op++)
        if (cuda_op_row((IrOp)op)->emit)
            cr_expect(llvm_op_supported((IrOp)op), "%s has a CUDA emitter but no CPU one", ir_op_name((IrOp)op));
}

/* Rows by family: the elementwise ops share one static and one run-time-shape emitter, which
 * also decides which ops the typed elementwise family takes. */
Test(op_tables, families) {
    const IrOp ew[] = {IR_OP_ADD, IR_OP_MUL, IR_OP_EXP, IR_OP_CAST, IR_OP_WHERE, IR_OP_BITWISE_XOR};
    for (size_t i = 0; i < sizeof ew / sizeof ew[0]; i++) {
        cr_expect(cpu_op_row(ew[i])->emit == cpu_emit_ew, "%s", ir_op_name(ew[i]));
        cr_expect(llvm_ops_ew_supported(ew[i]), "%s", ir_op_name(ew[i]));
        cr_expect(cpu_op_row(ew[i])->flags & CPU_DYN_NEST, "%s runs in parts with run-time shapes", ir_op_name(ew[i]));
    }
    cr_expect(cpu_op_row(IR_OP_IDENTITY)->emit == cpu_data_copy);
    cr_expect(!llvm_ops_ew_supported(IR_OP_SOFTMAX));
    cr_expect(cpu_op_row(IR_OP_CONSTANT)->flags & CPU_ONCE);
    cr_expect(cpu_op_row(IR_OP_LSTM)->flags & CPU_BLAS);
    cr_expect(cpu_op_row(IR_OP_TF_IDF_VECTORIZER)->flags & CPU_STR_ALWAYS);
    cr_expect(cpu_op_row(IR_OP_IF)->none && strstr(cpu_op_row(IR_OP_IF)->none, "lower-cf"));
}

/* The elementwise families' own tables (backend/cpu/ew_ops.def, backend/cuda/ew_ops.def) have a
 * row for every op the target table sends to them: an op without one would be refused. */
static const bool cpu_ew_row[IR_OP_COUNT] = {
#define EW_OP(ID, fl, in, point, kinds, fold) [IR_OP_##ID] = true,
#include "backend/cpu/ew_ops.def"
#undef EW_OP
};
static const bool cuda_ew_row[IR_OP_COUNT] = {
#define CU_EW(ID, fl, in, point) [IR_OP_##ID] = true,
#include "backend/cuda/ew_ops.def"
#undef CU_EW
};
static const char *const cuda_emit_name[IR_OP_COUNT] = {
#define CUDA_OP(ID, emit) [IR_OP_##ID] = #emit,
#define CUDA_NONE(ID, why) [IR_OP_##ID] = NULL,
#include "backend/cuda/cuda_ops.def"
#undef CUDA_OP
#undef CUDA_NONE
};

Test(op_tables, elementwise_family_tables_cover_their_ops) {
    int n_cpu = 0, n_cuda = 0;
    for (int op = 1; op < IR_OP_COUNT; op++) {
        if (cpu_op_row((IrOp)op)->emit == cpu_emit_ew) {
            cr_expect(cpu_ew_row[op], "%s: cpu_ops.def names cpu_emit_ew but ew_ops.def has no row", ir_op_name((IrOp)op));
            n_cpu++;
        }
        const char *e = cuda_emit_name[op];
        if (e && (strcmp(e, "cuda_emit_ew") == 0 || strcmp(e, "cuda_emit_cmp") == 0)) {
            cr_expect(cuda_ew_row[op], "%s: cuda_ops.def names %s but cuda/ew_ops.def has no row", ir_op_name((IrOp)op), e);
            n_cuda++;
        }
    }
    cr_expect_gt(n_cpu, 60);
    cr_expect_gt(n_cuda, 60);
}

/* An op whose row has no emitter is refused by name, with a non-zero exit. */
Test(op_tables, refused_op_names_itself) {
    char *dir = tu_mkdtemp(), *model = tu_path_join(dir, "m.ir"), *out = tu_path_join(dir, "m.irx");
    const char *full = "graph @g(%x: f32[2, 4, 3], %s: f32[4], %b: f32[4]) {\n"
                       "  %y = GroupNormalization(%x, %s, %b) {num_groups = 2} : f32[2, 4, 3]\n"
                       "  return %y\n}\n";
    cr_assert(tu_write_file(model, full, strlen(full)));
    const char *args[] = {"compile", model, "--no-cache", "-o", out, NULL};
    TuRun r;
    cr_assert(tu_run_irtool(args, NULL, 0, NULL, &r));
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "does not support GroupNormalization"), "%s", r.err);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir), free(model), free(out);
}

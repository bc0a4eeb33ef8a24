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

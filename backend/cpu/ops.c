/* The CPU op table: backend/cpu/cpu_ops.def expanded into one row per op id, so which emitter
 * compiles an op, with static or run-time shapes or on strings, is looked up, never switched on. */
#include "backend/cpu/cpu.h"

#define NONE NULL
static const CpuOpRow cpu_ops[IR_OP_COUNT] = {
#define CPU_OP(id, emit, parts, dyn, str, flags) [IR_OP_##id] = {emit, parts, dyn, str, flags, NULL},
#define CPU_NONE(id, why) [IR_OP_##id] = {NULL, NULL, NULL, NULL, 0, why},
#include "backend/cpu/cpu_ops.def"
#undef CPU_OP
#undef CPU_NONE
};

/* one row per op of ir/ops.def (with no duplicate, which the initializer refuses): counted here */
enum {
    CPU_ROWS = 0
#define CPU_OP(id, emit, parts, dyn, str, flags) +1
#define CPU_NONE(id, why) +1
#include "backend/cpu/cpu_ops.def"
#undef CPU_OP
#undef CPU_NONE
};
_Static_assert(CPU_ROWS == IR_OP_COUNT - 1, "backend/cpu/cpu_ops.def needs exactly one row per op of ir/ops.def");

const CpuOpRow *cpu_op_row(IrOp op) {
    static const CpuOpRow none = {NULL, NULL, NULL, NULL, 0, "not an op"};
    return op > IR_OP_NONE && op < IR_OP_COUNT ? &cpu_ops[op] : &none;
}

bool llvm_op_supported(IrOp op) {
    const CpuOpRow *r = cpu_op_row(op);
    return r->emit || (r->flags & CPU_ONCE);
}

IrStatus llvm_ops_refuse(LlvmEmit *e, const char *why) {
    ir_diag_at_node(e->diag, e->g, e->node, IR_SEV_ERROR, "the llvm backend does not support %s %s yet",
                    ir_op_name(ir_node_op(e->g, e->node)), why);
    return IR_EUNSUPPORTED;
}

/* The interpreter's dispatch table: ir/ops.def expanded into one kernel pointer per op, in op
 * table order, so interp_kernels[op] is the kernel of op. Every op has a kernel function
 * interp_<ID> (validate/k_*.c); a missing one is a link error.
 */
#include "validate/interp.h"

const InterpKernel interp_kernels[IR_OP_COUNT] = {
    [IR_OP_NONE] = NULL,
#define IR_OP(id, name, cls, min_in, max_in, min_out, max_out, regions, attrs, infer)          \
    [IR_OP_##id] = interp_##id,
#include "ir/ops.def"
#undef IR_OP
};

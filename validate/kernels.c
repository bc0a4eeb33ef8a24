/* The interpreter's dispatch table: ir/ops.def expanded into one kernel pointer per op, in op
 * table order, so interp_kernels[op] is the kernel of op. Every op has a kernel function
 * interp_<ID> (validate/k_*.c).
 *
 * Transitional: while the kernel files are being written, each kernel also has a weak
 * fallback here reporting the op as unsupported, so the tree links. Remove the fallback block
 * once every kernel exists; a missing kernel then becomes a link error again.
 */
#include "validate/interp.h"

/* ---- weak fallbacks (to be removed once all kernels exist) ----------------------------- */
#define IR_OP(id, name, cls, min_in, max_in, min_out, max_out, regions, attrs, infer)          \
    __attribute__((weak)) IrStatus interp_##id(KernelArgs *a) { return interp_unsupported(a, NULL); }
#include "ir/ops.def"
#undef IR_OP

/* ---- the table --------------------------------------------------------------------------- */
const InterpKernel interp_kernels[IR_OP_COUNT] = {
    [IR_OP_NONE] = NULL,
#define IR_OP(id, name, cls, min_in, max_in, min_out, max_out, regions, attrs, infer)          \
    [IR_OP_##id] = interp_##id,
#include "ir/ops.def"
#undef IR_OP
};

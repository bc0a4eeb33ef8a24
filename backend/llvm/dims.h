/* Shapes as LLVM values, the same for static and run-time shapes: a dim is an i64 constant when
 * the graph knows it (so LLVM folds every product, stride and trip count as before) and is
 * evaluated from the run's symbol array (slot lower_sym_slot: int64 values by symbol id) when it
 * is a symbol expression (S, B*S, S+1). An emitter written on these serves both kinds of kernel;
 * the loop nest shares its outermost loop out when the kernel runs in parts on the thread pool.
 */
#ifndef IRTOOL_LLVM_DIMS_H
#define IRTOOL_LLVM_DIMS_H

#include "backend/llvm/emit.h"

#define LLVM_NEST_MAX_OPS 32

/* Shape of a value: dims as i64 values, cd[k] the constant dim or -1 when symbolic, ex[k] the
 * graph's expression. */
typedef struct LlvmDims {
    uint32_t rank;
    LLVMValueRef dim[IR_MAX_RANK];
    int64_t cd[IR_MAX_RANK];
    IrExprId ex[IR_MAX_RANK];
} LlvmDims;

/* The run's symbol array (loaded once in the kernel's entry block). */
LLVMValueRef llvm_syms(LlvmEmit *e);
/* The value of dim expression x at builder e->b (NULL for an unknown dim `?`). */
LLVMValueRef llvm_dim_expr(LlvmEmit *e, IrExprId x);
/* Shape of v; false when its rank or a dim is unknown. */
bool llvm_dims_of(LlvmEmit *e, IrValueId v, LlvmDims *s);
/* Whether every dim of s is a constant. */
bool llvm_dims_static(const LlvmDims *s);
/* Product of dims [from, to) as a value (constant 1 for none), and as a constant (-1 when one
 * of them is symbolic). */
LLVMValueRef llvm_dims_prod(LlvmEmit *e, const LlvmDims *s, uint32_t from, uint32_t to);
int64_t llvm_dims_cprod(const LlvmDims *s, uint32_t from, uint32_t to);
/* Row-major strides of s (st[k] for dim k). */
void llvm_dims_strides(LlvmEmit *e, const LlvmDims *s, LLVMValueRef *st);
/* Strides of operand s read at the points of output `out` (numpy broadcasting): a dim that is
 * the constant 1 gets stride NULL (0); one that is another expression than the output's (S + 1
 * against T) is broadcast when it is 1 at run time. */
void llvm_dims_bcast_strides(LlvmEmit *e, const LlvmDims *s, const LlvmDims *out, LLVMValueRef *st);
/* Normalised axis of a rank-r value (negative counts from the end); -1 when out of range. */
static inline int64_t llvm_axis(int64_t axis, uint32_t r) {
    if (axis < 0) axis += r;
    return axis >= 0 && axis < (int64_t)r ? axis : -1;
}

/* A loop of n trips (an i64 value, 0 allowed): a positive constant count keeps the counted
 * loop of static shapes; closed by llvm_loop_end. */
void llvm_loop_n(LlvmEmit *e, LlvmLoop *l, LLVMValueRef n);

/* Loop nest over shape s: offs[j] = base[j] + sum_k i_k * st[j][k] (a NULL stride is 0), idx[k]
 * = i_k (constant 0 for a dim that is the constant 1). Nothing runs for an empty shape. In a
 * kernel in parts (e->part set), the first nest of the kernel shares its outermost loop out, or
 * part 0 runs it whole when it has none. */
typedef void (*LlvmNestBody)(LlvmEmit *e, LLVMValueRef *offs, LLVMValueRef *idx, void *user);
void llvm_nest(LlvmEmit *e, const LlvmDims *s, uint32_t n_ops, LLVMValueRef (*st)[IR_MAX_RANK],
               const LLVMValueRef *base, LlvmNestBody body, void *user);

#endif

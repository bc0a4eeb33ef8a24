/* Private header of the CUDA generator's family files (the .c files of backend/cuda): the per-module
 * emitter context Cu, the kernel kit of kernel.c (kernels, launch steps, grid-stride loops and
 * nests, block reductions, scalar math) and one emitter per row of cuda_ops.def. Small helpers
 * are static inline here; everything exported is prefixed cu_ (or cuda_emit_ for table rows).
 */
#ifndef IRTOOL_CUDA_CU_H
#define IRTOOL_CUDA_CU_H

#include "backend/cuda/cuda.h"

#include <llvm-c/Core.h>

typedef struct Cu {
    const IrGraph *g;
    IrDiag *diag;
    IrNodeId node;
    uint32_t index, nv;
    int sm;
    const char *target;
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef i1, i8, i16, i32, i64, f32, f64, gptr, vd, it; /* it: index type (i32 when everything fits) */
    LLVMValueRef fn, smem, f8tab;
    uint32_t n_params, param_slot[CU_MAX_ARGS];
    LLVMValueRef param[CU_MAX_ARGS];
    CuModule *m;
    uint32_t cur_kernel;
    LLVMValueRef syms; /* symbolic shapes: the current kernel's symbol array (i64 by symbol id) */
} Cu;

/* i = start; while (i < n) { body; i += step }  (the test first, so n may be smaller than start) */
typedef struct Loop {
    LLVMValueRef iv, step, n;
    LLVMBasicBlockRef head, body, exit;
} Loop;

/* Loop nest over dims as one grid-stride loop: offs[j] = base[j] + sum_k coord_k * strides[j][k]. */
typedef void (*NestBody)(Cu *c, LLVMValueRef *offs, void *user);

enum { RED_SUM, RED_MAX, RED_MIN };

/* ---- small helpers -------------------------------------------------------------------------- */

static inline LLVMValueRef ci(Cu *c, int64_t v) { return LLVMConstInt(c->it, (unsigned long long)v, 1); }
static inline LLVMValueRef c32(Cu *c, int64_t v) { return LLVMConstInt(c->i32, (unsigned long long)v, 1); }
static inline LLVMValueRef cf(Cu *c, double v) { return LLVMConstReal(c->f32, v); }
static inline LLVMValueRef gep(Cu *c, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildGEP2(c->b, t, base, &off, 1, "");
}
static inline LLVMValueRef ld(Cu *c, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off) {
    return LLVMBuildLoad2(c->b, t, gep(c, t, base, off), "");
}
static inline void st(Cu *c, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef off, LLVMValueRef v) {
    LLVMBuildStore(c->b, v, gep(c, t, base, off));
}
static inline LLVMValueRef sel(Cu *c, LLVMValueRef k, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(c->b, k, a, b, "");
}
static inline LLVMValueRef fcmp(Cu *c, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildFCmp(c->b, p, a, b, "");
}
static inline LLVMTypeRef int_type(Cu *c, size_t bytes) { return LLVMIntTypeInContext(c->ctx, (unsigned)(8 * bytes)); }
/* the kernel parameter of a slot (NULL when the kernel does not take it) */
static inline LLVMValueRef pslot(Cu *c, uint32_t slot) {
    for (uint32_t j = 0; j < c->n_params; j++)
        if (c->param_slot[j] == slot) return c->param[j];
    return NULL;
}

/* ---- the kernel kit (kernel.c) ---------------------------------------------------------------- */

/* Refuses the current node: "the cuda backend (<target>) does not support <Op> <what>". */
IrStatus cu_unsupported(Cu *c, const char *what);
IrStatus cu_push_step(Cu *c, const CuStep *s);
LLVMValueRef cu_intr(Cu *c, const char *name, LLVMTypeRef *over, unsigned n_over, LLVMValueRef *args, unsigned n);
LLVMValueRef cu_sreg(Cu *c, const char *name);
/* A variable of type t in private memory, allocated in the kernel's entry block (SROA promotes it
 * to registers) and set to init here: for loops that carry more than one value. */
LLVMValueRef cu_var(Cu *c, LLVMTypeRef t, LLVMValueRef init);
LLVMValueRef cu_f32_intr(Cu *c, const char *name, LLVMValueRef x);
/* Starts kernel whose parameters are the buffers of `slots` (deduplicated, in order). */
IrStatus cu_kbegin(Cu *c, const uint32_t *slots, uint32_t n, uint32_t block, bool rows);
/* Ends the kernel and adds a launch step over `work` items (or rows) with the slots at offsets. */
IrStatus cu_kend(Cu *c, int64_t work, const int64_t *offs);
/* Ends the kernel as one launch in which thread 0 of block 0 alone runs one(c, user, i) for i in
 * [0, total), in order: for the updates whose order the result depends on, as the interpreter. */
IrStatus cu_kend_serial(Cu *c, int64_t total, void (*one)(Cu *c, void *user, LLVMValueRef i), void *user);
IrStatus cu_relaunch(Cu *c, int64_t work, const int64_t *offs);
void cu_loop_begin_acc(Cu *c, Loop *l, LLVMValueRef start, LLVMValueRef n, LLVMValueRef step, LLVMValueRef init,
                       LLVMValueRef *acc);
void cu_loop_begin(Cu *c, Loop *l, LLVMValueRef start, LLVMValueRef n, LLVMValueRef step);
void cu_loop_acc_next(Cu *c, LLVMValueRef acc, LLVMValueRef next);
void cu_loop_end(Cu *c, Loop *l);
void cu_grid_begin(Cu *c, Loop *l, int64_t work);
void cu_nest_offsets(Cu *c, uint32_t rank, const int64_t *dims, uint32_t n_ops, int64_t (*strides)[IR_MAX_RANK],
                     const int64_t *base, LLVMValueRef flat, LLVMValueRef *offs);
void cu_emit_nest(Cu *c, uint32_t rank, const int64_t *dims, uint32_t n_ops, int64_t (*strides)[IR_MAX_RANK],
                  const int64_t *base, NestBody body, void *user);
LLVMValueRef cu_nan_max(Cu *c, LLVMValueRef x, LLVMValueRef y, bool max);
LLVMValueRef cu_red_op(Cu *c, int kind, LLVMValueRef a, LLVMValueRef x);
LLVMValueRef cu_warp_reduce(Cu *c, int kind, LLVMValueRef v);
LLVMValueRef cu_block_reduce(Cu *c, int kind, LLVMValueRef v, uint32_t block);
LLVMValueRef cu_exp(Cu *c, LLVMValueRef x);
LLVMValueRef cu_log(Cu *c, LLVMValueRef x);
LLVMValueRef cu_pow(Cu *c, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cu_tanh(Cu *c, LLVMValueRef x);
LLVMValueRef cu_erf(Cu *c, LLVMValueRef x);

/* ---- symbolic shapes (sym.c): dims as values in kernels, sizes as host formulas --------------- */

/* Shape of a value: dim k as a value of the index type (a constant when static), cd[k] the
 * constant or -1, ex[k] the graph's expression. */
typedef struct CuDims {
    uint32_t rank;
    LLVMValueRef d[IR_MAX_RANK];
    int64_t cd[IR_MAX_RANK];
    IrExprId ex[IR_MAX_RANK];
} CuDims;
/* Whether v's shape is static (false for symbolic or unknown dims). */
bool cu_static(const IrGraph *g, IrValueId v);
/* lower_value_shape with a symbolic dim given as -1 (false for an unknown rank or dim). */
bool cu_value_shape(Cu *c, IrValueId v, uint32_t *rank, int64_t *dims);
LLVMValueRef cu_dim(Cu *c, IrExprId x);
bool cu_dims_of(Cu *c, IrValueId v, CuDims *s);
LLVMValueRef cu_dims_prod(Cu *c, const CuDims *s, uint32_t from, uint32_t to);
/* The product of v's dims [from, to) times scale, for a step: the constant when they are static,
 * else CU_FX(formula); 0 when out of memory (CuModule.fx_failed then fails the build; gen_node
 * refuses unknown dims before). */
int64_t cu_fx_prod(Cu *c, IrValueId v, uint32_t from, uint32_t to, int64_t scale);
/* A step size times a constant (a formula stays one). */
int64_t cu_fx_scale(Cu *c, int64_t x, int64_t scale);
/* Grid-stride loop over [0, n) with n a value. */
void cu_grid_begin_v(Cu *c, Loop *l, LLVMValueRef n);
/* Loop nest over shape s as one grid-stride loop: offs[j] = sum_k coord_k * st[j][k] (NULL = 0). */
void cu_nest_v(Cu *c, const CuDims *s, uint32_t n_ops, LLVMValueRef (*st)[IR_MAX_RANK], NestBody body, void *user);
/* Row-major strides of s, and those of operand s read at the points of out (broadcast). */
void cu_dims_strides(Cu *c, const CuDims *s, LLVMValueRef *st);
void cu_dims_bcast(Cu *c, const CuDims *s, const CuDims *out, LLVMValueRef *st);
/* The node has a symbolic shape: its emitter for run-time sizes, or a refusal naming it. */
IrStatus cu_gen_symbolic(Cu *c);
/* f32 elementwise value of op (elementwise.c), for the ops cu_ew_f32_op names */
bool cu_ew_f32_op(IrOp op);
/* The f32 values of a fused group's members in order (body 0: the single node c->node), each
 * from vals[] of its operands into vals[] of its result (elementwise.c). */
void cu_ew_eval_members(Cu *c, IrRegionId body, LLVMValueRef *vals);
LLVMValueRef cu_ew_value(Cu *c, IrOp op, uint32_t n_in, LLVMValueRef *x, double alpha);

/* ---- typed elements (typed.c): floats as double, integers and bool as i64 ------------------- */

typedef enum CuKind { CU_KF, CU_KS, CU_KU, CU_KB } CuKind;
CuKind cu_kind(IrDType t);
/* the dtypes the typed kit loads and stores (not FP8, not strings) */
bool cu_typed_ok(IrDType t);
IrStatus cu_unsupported_dtype(Cu *c, IrDType t);
LLVMTypeRef cu_mem_type(Cu *c, IrDType t);
LLVMTypeRef cu_value_type(Cu *c, IrDType t); /* double or i64 */
LLVMValueRef cu_load_typed(Cu *c, IrDType t, LLVMValueRef base, LLVMValueRef off);
/* A scatter's reduction of update u into x (values as cu_load_typed gives them): red 1 add,
 * 2 mul, 3 max, 4 min, as the interpreter. */
LLVMValueRef cu_scatter_combine(Cu *c, int red, IrDType t, LLVMValueRef x, LLVMValueRef u);
/* The node's `reduction` attribute as cu_scatter_combine's red (0: none); refused naming why. */
IrStatus cu_scatter_reduction(Cu *c, IrDType dt, int *red);
/* Update u stored at y[dst], combined with the value there when red is set. */
void cu_scatter_store(Cu *c, int red, IrDType dt, LLVMValueRef y, LLVMValueRef dst, LLVMValueRef u);
/* A scatter's steps: y = copy of x, then one(c, user, i) for each of `total` updates, in parallel
 * without a reduction, in index order by one thread with one (cu_kend_serial). */
IrStatus cu_scatter_launch(Cu *c, IrValueId y, IrValueId x, IrValueId idx, IrValueId upd, int red, int64_t total,
                           void (*one)(Cu *c, void *user, LLVMValueRef i), void *user);
void cu_store_typed(Cu *c, IrDType t, LLVMValueRef base, LLVMValueRef off, LLVMValueRef v);
/* a value of dtype `from`'s domain converted as Cast does to dtype `to`'s domain */
LLVMValueRef cu_convert(Cu *c, LLVMValueRef v, IrDType from, IrDType to);
/* libdevice's double functions (__nv_exp, __nv_pow, ...) */
LLVMValueRef cu_libm(Cu *c, const char *name, LLVMValueRef *args, unsigned n);
LLVMValueRef cu_libm1(Cu *c, const char *name, LLVMValueRef x);

/* elementwise ops on every typed dtype (ew_typed.c) */
IrStatus cu_gen_ew_typed(Cu *c);

/* reductions over any axes, one thread per output (reduce.c) */
IrStatus cu_gen_reduce_any(Cu *c);
IrStatus cu_gen_line(Cu *c);

/* LayerNormalization on every float dtype, with Mean and InvStdDev (norm.c) */
IrStatus cu_gen_layernorm_typed(Cu *c);

/* The CUDA-only scratch after the planned workspace (slot c->m->tail_slot): a node's kernels
 * use it between their own steps only, so it is sized for the largest need. */
void cu_tail_need(Cu *c, int64_t bytes);

/* Gather on an axis other than 0 (index.c) */
IrStatus cu_gen_gather_axis(Cu *c);

/* parameters read on the device while the output shape is static (runtime_args.c) */
IrStatus cu_gen_slice_rt(Cu *c);
IrStatus cu_gen_pad_rt(Cu *c, int mode);
IrStatus cu_gen_cumsum_rt(Cu *c);

/* MaxPool/AveragePool over 1-3 spatial axes, every float dtype, Indices (pool.c) */
IrStatus cu_gen_pool_nd(Cu *c);

/* Dropout with training_mode at run time or true: random masks (misc.c) */
IrStatus cu_gen_dropout_train(Cu *c);

/* shared by families: norm.c, conv.c, data.c */
IrStatus cu_bias_kernel(Cu *c, uint32_t y, uint32_t bias, double beta, uint32_t rank, const int64_t *dims,
                        int64_t (*s)[IR_MAX_RANK]);
IrStatus cu_push_gemm(Cu *c, const CuGemm *gm);
IrStatus cu_copy_kernel(Cu *c, uint32_t dst, uint32_t src, size_t esize, uint32_t rank, const int64_t *dims,
                        int64_t (*s)[IR_MAX_RANK], const int64_t *base);
IrStatus cu_copy_bytes(Cu *c);

/* ---- one emitter per row of cuda_ops.def ------------------------------------------------------ */

#define CUDA_OP(id, emit) IrStatus emit(Cu *c);
#define CUDA_NONE(id, why)
#include "backend/cuda/cuda_ops.def"
#undef CUDA_OP
#undef CUDA_NONE

#endif

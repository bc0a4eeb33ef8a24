/* NVPTX code generation for the CUDA backend: every top-level node of a specialized graph becomes
 * kernels (grid-stride loops over its output, 128-bit vector accesses for same-shape elementwise
 * groups, one block per row with warp shuffles for softmax/layer norm/reductions) or runtime
 * steps (device copies, cuBLASLt GEMMs; Conv = im2col kernel + GEMM). Kernels take one global
 * pointer per buffer they touch (the step lists the slots). Symbolic shapes: every kernel also takes
 * the run's symbol array and nodes with run-time sizes go to sym.c; what it lacks is refused
 * naming the op and the target. Transcendentals use ex2/lg2.approx (max rel. err ~2^-22).
 */
#include "backend/cuda/cu.h"

#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the op table (backend/cuda/cuda_ops.def) ----------------------------------------------- */

IrStatus cuda_emit_none(Cu *c) { return (void)c, IR_OK; } /* constants section */

static const CudaOpRow cuda_ops[IR_OP_COUNT] = {
#define CUDA_OP(id, emit) [IR_OP_##id] = {emit, NULL},
#define CUDA_NONE(id, why) [IR_OP_##id] = {NULL, why},
#include "backend/cuda/cuda_ops.def"
#undef CUDA_OP
#undef CUDA_NONE
};

/* one row per op of ir/ops.def (with no duplicate, which the initializer refuses): counted here */
enum {
    CUDA_ROWS = 0
#define CUDA_OP(id, emit) +1
#define CUDA_NONE(id, why) +1
#include "backend/cuda/cuda_ops.def"
#undef CUDA_OP
#undef CUDA_NONE
};
_Static_assert(CUDA_ROWS == IR_OP_COUNT - 1, "backend/cuda/cuda_ops.def needs exactly one row per op of ir/ops.def");

const CudaOpRow *cuda_op_row(IrOp op) {
    static const CudaOpRow none = {NULL, "not an op"};
    return op > IR_OP_NONE && op < IR_OP_COUNT ? &cuda_ops[op] : &none;
}

static IrStatus gen_node(Cu *c) {
    const IrGraph *g = c->g;
    IrNodeId n = c->node;
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    for (uint32_t i = 0; i < ir_node_num_operands(g, n) + ir_node_num_results(g, n); i++) {
        bool res = i >= ir_node_num_operands(g, n);
        IrValueId v = res ? ir_node_result(g, n, i - ir_node_num_operands(g, n)) : ir_node_operand(g, n, i);
        if (v && !lower_value_shape(g, v, &r, d)) {
            if (c->m->symbolic && cu_value_shape(c, v, &r, d)) continue; /* sizes from the run's symbols (sym.c) */
            ir_diag_at_node(c->diag, g, n, IR_SEV_ERROR,
                            "the cuda backend needs static shapes, but '%s' of %s has a symbolic or unknown shape",
                            ir_value_name(g, v), ir_op_name(ir_node_op(g, n)));
            return IR_EUNSUPPORTED;
        }
    }
    for (uint32_t i = 0; c->m->symbolic && i < ir_node_num_operands(g, n) + ir_node_num_results(g, n); i++) {
        bool res = i >= ir_node_num_operands(g, n);
        IrValueId v = res ? ir_node_result(g, n, i - ir_node_num_operands(g, n)) : ir_node_operand(g, n, i);
        if (v && !lower_value_shape(g, v, &r, d)) return cu_gen_symbolic(c);
    }
    const CudaOpRow *row = cuda_op_row(ir_node_op(g, n));
    return row->emit ? row->emit(c) : cu_unsupported(c, NULL);
}

int64_t cuda_plan_scratch(const IrGraph *g, IrNodeId n, const int64_t *sym, void *user) {
    (void)sym, (void)user;
    return ir_node_op(g, n) == IR_OP_CONV && !lower_conv_pointwise(g, n) ? lower_conv_im2col_bytes(g, n) : 0;
}

void cuda_module_free(CuModule *m) {
    for (uint32_t i = 0; i < m->n_fx; i++) free(m->fx[i]);
    free(m->fx);
    for (uint32_t i = 0; i < m->n_extra; i++) free((void *)m->extra[i].data);
    free(m->extra);
    free(m->extra_of);
    free(m->k);
    free(m->s);
    memset(m, 0, sizeof *m);
}

IrStatus cuda_build_module(const IrGraph *g, int sm, const char *target_name, LLVMContextRef ctx, IrDiag *diag,
                           LLVMModuleRef *mod, CuModule *out) {
    memset(out, 0, sizeof *out);
    Cu c = {.g = g, .diag = diag, .ctx = ctx, .sm = sm, .target = target_name, .m = out, .nv = ir_graph_num_values(g)};
    uint32_t nn = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) nn++;
    out->tail_slot = c.nv + 1 + nn; /* = lower_plan_memory's n_slots */
    /* symbolic shapes: the symbol array takes the tail's slot (the artifact's symslot) */
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && !out->symbolic; n = ir_node_next(g, n)) {
        uint32_t no = ir_node_num_operands(g, n);
        for (uint32_t i = 0; i < no + ir_node_num_results(g, n) && !out->symbolic; i++) {
            IrValueId v = i < no ? ir_node_operand(g, n, i) : ir_node_result(g, n, i - no);
            IrTypeId t = v ? ir_value_type(g, v) : 0;
            /* a dim that is a symbol expression (an unknown `?` or rank stays refused per node) */
            uint32_t r = t && !ir_type_is_container(g, t) ? ir_type_rank(g, t) : IR_RANK_UNKNOWN;
            for (uint32_t k = 0; r != IR_RANK_UNKNOWN && k < r && !out->symbolic; k++) {
                IrExprId x = ir_type_dims(g, t)[k];
                int64_t cv;
                out->symbolic = !ir_expr_is_const(g, x, &cv) && ir_expr_kind(g, x) != IR_EXPR_UNKNOWN;
            }
        }
    }
    out->sym_slot = out->tail_slot;
    c.mod = LLVMModuleCreateWithNameInContext("irtool_cuda", ctx);
    c.b = LLVMCreateBuilderInContext(ctx);
    c.i1 = LLVMInt1TypeInContext(ctx);
    c.i8 = LLVMInt8TypeInContext(ctx);
    c.i16 = LLVMInt16TypeInContext(ctx);
    c.i32 = LLVMInt32TypeInContext(ctx);
    c.i64 = LLVMInt64TypeInContext(ctx);
    c.f32 = LLVMFloatTypeInContext(ctx);
    c.f64 = LLVMDoubleTypeInContext(ctx);
    c.gptr = LLVMPointerTypeInContext(ctx, 1);
    c.vd = LLVMVoidTypeInContext(ctx);
    /* 32-bit index arithmetic when every buffer (and the scratch) has fewer than 2^31 elements */
    bool small = true;
    for (uint32_t v = 1; v <= c.nv && small; v++) small = lower_value_nbytes(g, v) < (1ull << 31);
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && small; n = ir_node_next(g, n))
        small = cuda_plan_scratch(g, n, NULL, NULL) < (1ll << 31);
    c.it = small && !out->symbolic ? c.i32 : c.i64; /* run-time sizes have no bound known here */
    c.smem = LLVMAddGlobalInAddressSpace(c.mod, LLVMArrayType2(c.f32, 32), "irt_red_smem", 3);
    LLVMSetInitializer(c.smem, LLVMGetUndef(LLVMArrayType2(c.f32, 32)));
    LLVMSetLinkage(c.smem, LLVMInternalLinkage);
    LLVMSetAlignment(c.smem, 4);
    IrStatus s = IR_OK;
    uint32_t index = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && !s; n = ir_node_next(g, n), index++) {
        c.node = n;
        c.index = index;
        s = gen_node(&c);
    }
    if (!s && out->fx_failed) s = IR_ENOMEM; /* a formula that could not be recorded */
    if (!s) {
        char *msg = NULL;
        if (LLVMVerifyModule(c.mod, LLVMReturnStatusAction, &msg)) {
            ir_diag_error(diag, "cuda backend: internal error, generated module is invalid: %s", msg ? msg : "?");
            s = IR_EINVAL;
        }
        LLVMDisposeMessage(msg);
    }
    LLVMDisposeBuilder(c.b);
    if (s) {
        LLVMDisposeModule(c.mod);
        cuda_module_free(out);
        return s;
    }
    *mod = c.mod;
    return IR_OK;
}

/* The ops whose CUDA row names an emitter (some configurations of them are still refused at
 * compile time, naming the node); irtool ops lists them. */
bool cuda_op_supported(IrOp op) { return cuda_op_row(op)->emit != NULL; }

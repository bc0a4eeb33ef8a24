/* Target-independent facts the code generators share (no LLVM header): value shapes, sizes and
 * constant data; operand geometry of windows, Conv, MatMul, Gemm, reductions and strided copies;
 * the bodies of fused groups and which groups are elementwise; the buffer-slot layout; dims the
 * data decides; the workspace memory plan. Functions returning `const char *` give NULL or the
 * reason a case is not supported. */
#ifndef IRTOOL_LOWER_H
#define IRTOOL_LOWER_H

#include "backend/backend.h"
#include "ir/shape.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- shapes and values ----------------------------------------------------------------------- */

/* Static shape of v (false when unranked, symbolic or unknown). */
bool lower_value_shape(const IrGraph *g, IrValueId v, uint32_t *rank, int64_t *dims);
/* Bytes of v (0 when not static). */
size_t lower_value_nbytes(const IrGraph *g, IrValueId v);
/* Dims of v with the symbols at sym (values by symbol id; NULL: constant dims only). */
bool lower_value_dims_at(const IrGraph *g, IrValueId v, const int64_t *sym, uint32_t *rank, int64_t *dims);
/* A ConstantOfShape result with a static shape: made once per program, not in the workspace. */
bool lower_value_filled_const(const IrGraph *g, IrValueId v);
/* Whether v lives in the workspace (a node result that is neither constant nor filled once). */
bool lower_in_workspace(const IrGraph *g, IrValueId v);
/* Whether (r, d) broadcasts (numpy rules) to (orank, od). */
bool lower_bcast_to(uint32_t r, const int64_t *d, uint32_t orank, const int64_t *od);
/* Data of a graph constant or of a Constant node's `value` tensor; NULL otherwise. */
const void *lower_value_const_data(const IrGraph *g, IrValueId v);

static inline IrDType lower_value_dtype(const IrGraph *g, IrValueId v) { return ir_type_dtype(g, ir_value_type(g, v)); }

/* Reads a small constant integer operand (graph constant or Constant node); false otherwise. */
bool lower_const_ints(const IrGraph *g, IrValueId v, int64_t *vals, uint32_t *n, uint32_t cap);


/* ---- operand geometry ------------------------------------------------------------------------- */
/* ---- 2-D (NCHW) windows of Conv and pooling ------------------------------------------------ */
typedef struct LowerWin {
    int64_t n, c, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
} LowerWin;
/* Window geometry of node n (input x, output y, kernel kh x kw) from its attributes. */
const char *lower_win_read(const IrGraph *g, IrNodeId n, IrValueId x, IrValueId y, int64_t kh, int64_t kw,
                          LowerWin *wn);
/* Strides, dilations and leading pads of a 2-D window op (sh, sw, dh, dw, pt, pl into a[0..5];
 * auto_pad NOTSET or VALID), or the reason it is not supported. */
const char *lower_win_attrs(const IrGraph *g, IrNodeId n, int64_t *a);
/* Conv (f32, 2-D, grouped): the window, groups, output channels, channels per group (cg), output
 * channels per group (ocg), rows of the im2col matrix (k = cg * kh * kw) and output plane size. */
typedef struct LowerConvGeom {
    LowerWin w;
    int64_t groups, oc, cg, ocg, k, ohw;
} LowerConvGeom;
const char *lower_conv_read(const IrGraph *g, IrNodeId n, LowerConvGeom *cv);
/* Conv cn with a 1x1 kernel, stride 1 and no padding: its output plane is its input plane (the
 * input is the GEMM's B as it is, no im2col). */
bool lower_conv_pointwise(const IrGraph *g, IrNodeId cn);
/* Bytes of Conv cn's explicit im2col matrix (f32, one image; 0 when shapes are not static 2-D). */
int64_t lower_conv_im2col_bytes(const IrGraph *g, IrNodeId cn);

/* MatMul operand shapes: 1-D operands promoted to 2-D (da, db), the broadcast batch dims bd
 * (rank br, nb batches; A's batch rank ra - 2, B's rb - 2) and Y[batch][m, n] = A[m, k] @ B[k, n]. */
typedef struct LowerMatMulShape {
    uint32_t ra, rb, ry, br;
    int64_t da[IR_MAX_RANK + 1], db[IR_MAX_RANK + 1], dy[IR_MAX_RANK], bd[IR_MAX_RANK];
    int64_t m, k, n, nb;
} LowerMatMulShape;
const char *lower_matmul_shape(const IrGraph *g, IrNodeId n, LowerMatMulShape *ms);

/* Gemm (f32, 2-D): Y[m, n] = alpha * op(A)[m, k] @ op(B)[k, n] + beta * C; C's shape in (rc, dc)
 * (rc = 0 without C). */
typedef struct LowerGemmShape {
    bool ta, tb;
    double alpha, beta;
    int64_t m, n, k, lda, ldb;
    uint32_t rc;
    int64_t dy[2], dc[IR_MAX_RANK];
} LowerGemmShape;
const char *lower_gemm_shape(const IrGraph *g, IrNodeId n, LowerGemmShape *gs);

/* Reduction over adjacent axes (ReduceX with an `axes` attribute or constant operand, all axes
 * when none; GlobalAveragePool over the spatial axes) viewed as [outer, len, inner]. */
typedef struct LowerReduceShape {
    int64_t outer, len, inner;
} LowerReduceShape;
const char *lower_reduce_shape(const IrGraph *g, IrNodeId n, IrOp op, LowerReduceShape *rs);

/* ---- data movement as strided copies ---------------------------------------------------------
 * y[base[0] + sum i_k * s[0][k]] = x[base[1] + sum i_k * s[1][k]] over dims (rank). */
typedef struct LowerCopyPlan {
    uint32_t rank;
    int64_t dims[IR_MAX_RANK];
    int64_t s[2][IR_MAX_RANK];
    int64_t base[2];
} LowerCopyPlan;
const char *lower_transpose_plan(const IrGraph *g, IrNodeId n, LowerCopyPlan *p);
/* Slice with constant starts/ends/axes/steps. */
const char *lower_slice_plan(const IrGraph *g, IrNodeId n, LowerCopyPlan *p);
/* Operand i of Concat placed at *pos along the axis; *pos is advanced past it. */
const char *lower_concat_part(const IrGraph *g, IrNodeId n, uint32_t i, int64_t *pos, LowerCopyPlan *p);


/* ---- fused groups -------------------------------------------------------------------------- */
/* Fused groups' bodies: whether v is defined in body (a member's result or
 * one of its arguments), whether it is a member's result, and the value a member reads as v
 * (the group's operand for a body argument, else v itself). */
bool lower_in_region(const IrGraph *g, IrValueId v, IrRegionId body);
bool lower_member_result(const IrGraph *g, IrValueId v, IrRegionId body);
IrValueId lower_outer_value(const IrGraph *g, IrNodeId group, IrValueId v);
/* Whether fused group n is an elementwise group every target compiles as one kernel: every
 * member one of the core f32 elementwise ops (lower/groups.c)
 * fed only by the group's operands, graph constants and earlier members. With need_static, also
 * that shapes are static, every result has one shape and every member value broadcasts to it. */
bool lower_fused_ew_group(const IrGraph *g, IrNodeId n, bool need_static);
/* Replaces fused group n (top level) by its members, so a target compiles them op by op; the
 * members' results take the group's result names. IR_ENOMEM or a clone error; n is gone on success. */
IrStatus lower_inline_group(IrGraph *g, IrNodeId n);
/* Flags of an op's row in backend/lower/lower_ops.def (0 for an op without a row). */
enum {
    LOWER_SHAPE_MATH = 1u << 0,
    LOWER_CORE_EW = 1u << 1,
    LOWER_COPY = 1u << 2,
    LOWER_VALUE_DIMS = 1u << 3,        /* result dims an operand's values decide (starts, sizes, K, axes) */
    LOWER_VALUE_DIMS_ANY = 1u << 4,    /* ... and such a dim may be any input dim, not its own position's */
    LOWER_VALUE_DIMS_UNKEPT = 1u << 5, /* ... the same when keepdims = 0 */
    LOWER_VALUE_DIMS_PROD = 1u << 6,   /* ... and such a dim may be the product of the input dims (Reshape) */
    LOWER_INDEX_TUPLES = 1u << 7,      /* operand 1's last dim is the length of index tuples (GatherND) */
};
#define LOWER_FROM1 0xFFFFFFFEu
uint32_t lower_op_flags(IrOp op);
/* Whether operand i of op takes a shape, not data (lower_ops.def's shape_args: Reshape's shape,
 * Expand's shape, Unsqueeze's axes, ConstantOfShape's input, Slice's starts/ends/axes/steps). */
bool lower_shape_operand(IrOp op, uint32_t i);
/* Whether dim k of operand i (of rank r) decides the rank of op's result, as GatherND's tuple
 * length does (LOWER_INDEX_TUPLES): a model's types fix such a dim, so it is no symbol. */
bool lower_rank_dim(IrOp op, uint32_t i, uint32_t r, uint32_t k);
/* The f32 elementwise ops every target computes inside a fused elementwise group. */
bool lower_core_ew_op(IrOp op);
/* lower_core_ew_op and elementwise in the op table: what may be a member of such a group. */
bool lower_fused_member_ok(IrOp op);
/* Operands plus results a fused elementwise group may have. */
#define LOWER_GROUP_MAX_OPS 32


/* ---- buffer slots, data-decided dims, the memory plan ---------------------------------------- */
/* Buffer slots of a compiled graph: values by id (1 .. num_values), then one scratch slot per
 * top-level node; lower_sym_slot(g) holds the run's symbol values, the next one the run context,
 * and derived constants follow. */
uint32_t lower_sym_slot(const IrGraph *g);
/* The value whose size v has: for a copy's data result (LOWER_COPY: Reshape, Squeeze, ...) its
 * input's (recursively), whatever dims the operands' values give it (a Reshape to a shape given
 * at run time has a data symbol per dim, each bounded by the element count, whose product would
 * overstate it); else v. Memory plans size values by it. */
IrValueId lower_size_source(const IrGraph *g, IrValueId v);
/* Data-dependent dims (lower/batch.c): the result dim k of node n that its data decides (NonZero,
 * Compress) and the largest value it can take (-1 if unbounded); lower_data_symbols gives each
 * such dim a symbol ranged [0, hi] (kernels write its value at run time). */
bool lower_data_dim(const IrGraph *g, IrNodeId n, uint32_t *k, int64_t *hi);
IrStatus lower_data_symbols(IrGraph *g, bool *added, IrDiag *diag) IR_MUST_CHECK;
/* The data symbol lower_data_symbols gave node n's result (0 if none). */
IrSymId lower_data_sym(const IrGraph *g, IrNodeId n);
/* Dims an operand's values decide (Slice starts, Split sizes, TopK's K, ReduceSum's axes,
 * Squeeze/Unsqueeze axes, given at run time): the largest value result dim k of node n can take
 * (-1: not such a node, or unbounded); lower_data_symbols gives each `?` there a data symbol
 * ranged [0, hi], and lower_value_dim_syms lists them (result, dim, symbol, bound; the count,
 * of which the first max are written). Kernels compute them first (cpu/data.c). */
typedef struct LowerValueDim {
    IrSymId sym;
    int64_t hi;
    uint32_t result, dim;
} LowerValueDim;
int64_t lower_value_dim_hi(const IrGraph *g, IrNodeId n, uint32_t k);
/* Whether symbol s is bound from entry k of graph input `in`'s values (Tile repeats, Pad pads,
 * ConstantOfShape's shape, Resize's sizes given as a graph input: lower_data_symbols makes them),
 * or from trunc(entry * D) with D symbol `by`'s value (by != 0) or the constant c (c >= 0):
 * Resize's output dims from scales given as a graph input. */
typedef struct LowerValueBind {
    uint32_t in, k;
    IrSymId by;
    int64_t c;
} LowerValueBind;
bool lower_value_input_sym(const IrGraph *g, IrSymId s, LowerValueBind *b);
uint32_t lower_value_dim_syms(const IrGraph *g, IrNodeId n, LowerValueDim *out, uint32_t max);

/* Node n's scratch when its size follows symbols without an upper bound: the sum over its terms
 * of c times the product of dims[0 .. n_dims), dim expressions of g evaluated under the run's
 * binding. */
#define LOWER_SCRATCH_DIMS 4
#define LOWER_SCRATCH_TERMS 9 /* Resize: a term per resized axis (up to 8) and a constant */
typedef struct LowerScratchTerm {
    int64_t c;
    uint32_t n_dims;
    IrExprId dims[LOWER_SCRATCH_DIMS];
} LowerScratchTerm;
typedef struct LowerScratchForm {
    uint32_t n_terms;
    LowerScratchTerm term[LOWER_SCRATCH_TERMS];
} LowerScratchForm;
/* The bytes of form f under the binding sym (false when a dim does not evaluate). */
bool lower_scratch_form_eval(const IrGraph *g, const LowerScratchForm *f, const int64_t *sym, int64_t *bytes);

/* The memory plan asks the target how much scratch node n needs (0 for none) at the binding sym
 * (NULL: static shapes), and whether Concats may be computed in place (a CPU target). With syms
 * (a symbol plan where some symbol has no upper bound), scratch_form gives a node's scratch as a
 * LowerScratchForm (false: not of that form); diag receives the plan's refusals (may be NULL). */
typedef struct LowerPlanHooks {
    int64_t (*scratch)(const IrGraph *g, IrNodeId n, const int64_t *sym, void *user);
    void *user;
    bool concat_in_place;
    const IrSymPlan *syms;
    bool (*scratch_form)(const IrGraph *g, IrNodeId n, LowerScratchForm *f);
    IrDiag *diag;
} LowerPlanHooks;

/* Offset of a slot placed at run time (LowerMemPlan.dyn). */
#define LOWER_OFF_DYN (-2)
/* A workspace block placed at run time: a value whose size mentions a symbol with no upper bound,
 * or such a node's scratch. It starts at the end of the furthest of its preds (blocks placed
 * before it and alive with it), 64-byte aligned, the first ones at the end of the static plan
 * (peak); or, with alias >= 0, at block alias's offset (a copy computed in place). */
typedef struct LowerDynBlock {
    uint32_t slot;
    int32_t alias;
    uint32_t n_pred, *pred;
    LowerScratchForm scratch; /* a scratch slot's bytes (no terms for a value: its type gives them) */
} LowerDynBlock;

/* The workspace plan: offset of every node result in one buffer (-1 = not in it). */
typedef struct LowerMemPlan {
    int64_t *offset; /* by value id, then num_values + 1 + node index for scratch */
    int64_t *bytes;  /* by slot: the bytes at offset (where offset >= 0; the artifact records them) */
    uint32_t n_slots;
    size_t peak, unplanned;
    uint32_t n_dyn; /* blocks placed at run time, in placement order (offset LOWER_OFF_DYN) */
    LowerDynBlock *dyn;
} LowerMemPlan;
/* The plan for static shapes (sym NULL) or with symbolic sizes evaluated under sym (values by
 * symbol id: the constraints' upper bounds, so the plan holds every binding up to them). Values
 * whose size mentions a symbol of h->syms with no upper bound are placed at run time instead
 * (plan->dyn); the rest keep constant offsets. */
IrStatus lower_plan_memory(const IrGraph *g, const LowerPlanHooks *h, const int64_t *sym, LowerMemPlan *plan) IR_MUST_CHECK;
/* The binding the plan evaluates sizes under: every symbol of sp at its upper bound, those
 * without one at pick (within their lower bound and divisor), data symbols at their largest,
 * defined symbols computed; vals by symbol id (0 .. ir_graph_num_syms(g)). */
void lower_plan_binding(const IrGraph *g, const IrSymPlan *sp, int64_t pick, int64_t *vals);
/* The one binding both start from (batch.c): each symbol of sp at pick within [lo, hi] (at_hi:
 * at hi where it has one), rounded down to its divisor but not below lo; data symbols at their
 * largest; defined symbols computed; the others -1. ir_sym_binding is at_hi false. */
void lower_sym_binding(const IrGraph *g, const IrSymPlan *sp, int64_t pick, bool at_hi, int64_t *vals);
/* Flags by symbol id (0 .. ir_graph_num_syms(g)): the symbols of sp with no upper bound and the
 * symbols defined over them. Whether any is set. */
bool lower_sym_unbounded(const IrGraph *g, const IrSymPlan *sp, uint8_t *flags);
/* Whether dim expression e mentions a symbol flagged in flags. */
bool lower_expr_mentions(const IrGraph *g, IrExprId e, const uint8_t *flags);
/* Whether Concat n is computed in place (its inputs placed inside its output by the plan when
 * the target allows it; the kernel then copies nothing). uses: ir_graph_count_uses. */
bool lower_concat_in_place(const IrGraph *g, IrNodeId n, const uint32_t *uses);
void lower_plan_free(LowerMemPlan *plan);

/* Data a target derives from constants at compile time (transposed or packed weights), bound to
 * buffer slot `slot` (after the plan's slots) by the artifact and the JIT. */
typedef struct IrArtifactConst {
    uint32_t slot; /* > plan->n_slots */
    const void *data;
    size_t len;
} IrArtifactConst;

#endif

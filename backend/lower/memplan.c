/* The workspace memory plan (greedy first fit by value lifetime over the top-level node order,
 * copies and Concats in place where the target allows it) and the value facts it needs: sizes,
 * dims under a binding of the symbols, constant data. Target-independent: a target says how much
 * scratch each node needs through LowerPlanHooks. */
#include "backend/lower/lower.h"

#include <stdlib.h>
#include <string.h>

#define WS_ALIGN 64

/* Dims of v with the symbols at sym (NULL: constant dims only). */
bool lower_value_dims_at(const IrGraph *g, IrValueId v, const int64_t *sym, uint32_t *rank, int64_t *dims) {
    if (!sym) return lower_value_shape(g, v, rank, dims);
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!t || r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return false;
    for (uint32_t k = 0; k < r; k++)
        if (!ir_expr_eval(g, ir_type_dims(g, t)[k], sym, &dims[k]) || dims[k] < 0) return false;
    *rank = r;
    return true;
}

size_t lower_value_nbytes(const IrGraph *g, IrValueId v) {
    uint32_t r;
    int64_t d[IR_MAX_RANK], n = 1;
    if (!lower_value_shape(g, v, &r, d)) return 0;
    for (uint32_t i = 0; i < r; i++) n *= d[i];
    return (size_t)n * ir_dtype_size(ir_type_dtype(g, ir_value_type(g, v)));
}

const void *lower_value_const_data(const IrGraph *g, IrValueId v) {
    if (ir_value_kind(g, v) == IR_VALUE_CONST) return ir_const_data(g, ir_value_const(g, v));
    if (ir_value_kind(g, v) != IR_VALUE_RESULT) return NULL;
    IrNodeId n = ir_value_def_node(g, v);
    IrAttrValue av;
    if (ir_node_op(g, n) == IR_OP_CONSTANT && ir_node_attr(g, n, "value", &av) && av.kind == IR_ATTR_TENSOR)
        return ir_const_data(g, av.tensor);
    return NULL;
}

/* ---- memory plan --------------------------------------------------------------------------- */

typedef struct Block {
    int64_t off, size;
    uint32_t last;
} Block;

/* A ConstantOfShape result made once per program; with a run-time shape it is computed per run
 * in the workspace instead (cpu/dyn.c). */
bool lower_value_filled_const(const IrGraph *g, IrValueId v) {
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    return ir_value_kind(g, v) == IR_VALUE_RESULT && ir_node_op(g, ir_value_def_node(g, v)) == IR_OP_CONSTANT_OF_SHAPE &&
           lower_value_shape(g, v, &r, d);
}

bool lower_in_workspace(const IrGraph *g, IrValueId v) {
    return v && ir_value_kind(g, v) == IR_VALUE_RESULT && !lower_value_const_data(g, v) && !lower_value_filled_const(g, v);
}

static bool is_graph_output(const IrGraph *g, IrValueId v) {
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++)
        if (ir_graph_output(g, i) == v) return true;
    return false;
}

/* A Concat whose inputs can be computed in place: every input a contiguous block of the output
 * (the dims before the axis are all 1), produced in the workspace by a node other than a Concat,
 * used by this Concat only, and neither it nor its output a graph output. The memory plan then
 * places each input inside the output and the Concat copies nothing. uses: ir_graph_count_uses. */
bool lower_concat_in_place(const IrGraph *g, IrNodeId n, const uint32_t *uses) {
    if (ir_node_op(g, n) != IR_OP_CONCAT || ir_node_region(g, n) != IR_ROOT_REGION) return false;
    IrValueId y = ir_node_result(g, n, 0);
    uint32_t ry;
    int64_t dy[IR_MAX_RANK];
    if (!lower_in_workspace(g, y) || !lower_value_shape(g, y, &ry, dy) || ry == 0) return false;
    bool found;
    int64_t axis = ir_shape_axis(ir_node_attr_int(g, n, "axis", &found), ry);
    if (axis < 0 || axis >= (int64_t)ry || ir_shape_numel((uint32_t)axis, dy) != 1 || is_graph_output(g, y)) return false;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v || !lower_in_workspace(g, v) || uses[v] != 1 || !lower_value_shape(g, v, &ry, dy)) return false;
        if (ir_type_dtype(g, ir_value_type(g, v)) != ir_type_dtype(g, ir_value_type(g, y))) return false;
        IrNodeId p = ir_value_def_node(g, v);
        if (ir_node_region(g, p) != IR_ROOT_REGION || ir_node_op(g, p) == IR_OP_CONCAT || is_graph_output(g, v)) return false;
    }
    return true;
}

/* A copy node (Identity, Reshape, Flatten, Squeeze, Unsqueeze, Dropout: its data result) whose
 * result may take its input's place: the input is a workspace value that dies at this node,
 * neither is a graph output (those may be redirected into the caller's tensors). The kernel
 * then copies nothing (it compares the two pointers). */
static bool copy_in_place(const IrGraph *g, IrNodeId n, const uint32_t *last, uint32_t t) {
    switch (ir_node_op(g, n)) {
    case IR_OP_IDENTITY: case IR_OP_RESHAPE: case IR_OP_FLATTEN: case IR_OP_SQUEEZE: case IR_OP_UNSQUEEZE: case IR_OP_DROPOUT:
        break;
    default: return false;
    }
    IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
    return x && y && lower_in_workspace(g, x) && lower_in_workspace(g, y) && last[x] == t && !is_graph_output(g, x) &&
           !is_graph_output(g, y) && ir_type_dtype(g, ir_value_type(g, x)) == ir_type_dtype(g, ir_value_type(g, y));
}

/* Bytes of v, its dims evaluated under sym (symbol values by id) when they are symbolic. */
static size_t value_bytes_at(const IrGraph *g, IrValueId v, const int64_t *sym) {
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!sym || !t || r == IR_RANK_UNKNOWN) return lower_value_nbytes(g, v);
    int64_t n = 1, d;
    for (uint32_t k = 0; k < r; k++) {
        if (!ir_expr_eval(g, ir_type_dims(g, t)[k], sym, &d) || d < 0) return 0;
        n *= d;
    }
    return (size_t)n * ir_dtype_size(ir_type_dtype(g, t));
}

/* The 128-byte phase for the result of root node n (bytes long) when n is a contraction group
 * whose epilogue reads a placed operand of that size (a residual): 64 bytes off that operand's
 * phase, else -1. A GEMM epilogue reading the residual and storing the output at the same
 * (row, column) ran a 56x56 layer (64 -> 256 channels, rows of 12544 bytes, a multiple of 128)
 * 10-20% slower with the two at the same phase (a C model: 0.69 against 0.625 ms, whatever the
 * phase of its input; rows of 12480 bytes, alternating phase, ran fast either way). In
 * ResNet-50 the three such layers at 56x56 0.83-0.95 -> 0.69-0.79 ms. */
static int64_t residual_phase(const IrGraph *g, IrNodeId n, const int64_t *offset, int64_t bytes) {
    if (ir_node_op(g, n) != IR_OP_FUSED || ir_node_num_regions(g, n) < 1) return -1;
    IrOp a = ir_node_op(g, ir_region_first(g, ir_node_region_at(g, n, 0)));
    if (a != IR_OP_CONV && a != IR_OP_GEMM && a != IR_OP_MAT_MUL) return -1;
    for (uint32_t i = 1; i < ir_node_num_operands(g, n); i++) {
        IrValueId u = ir_node_operand(g, n, i);
        if (u && lower_in_workspace(g, u) && offset[u] >= 0 && (int64_t)lower_value_nbytes(g, u) == bytes) return (offset[u] + 64) % 128;
    }
    return -1;
}

IrStatus lower_plan_memory(const IrGraph *g, const LowerPlanHooks *h, const int64_t *sym, LowerMemPlan *plan) {
    uint32_t nv = ir_graph_num_values(g), nn = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) nn++;
    memset(plan, 0, sizeof *plan);
    plan->n_slots = nv + 1 + nn;
    plan->offset = malloc(plan->n_slots * sizeof *plan->offset);
    plan->bytes = calloc(plan->n_slots, sizeof *plan->bytes);
    uint32_t *last = calloc(nv + 1, sizeof *last);
    Block *live = malloc((nv + 1) * sizeof *live);
    if (!plan->offset || !plan->bytes || !last || !live) {
        free(last);
        free(live);
        lower_plan_free(plan);
        return IR_ENOMEM;
    }
    for (uint32_t v = 0; v < plan->n_slots; v++) plan->offset[v] = -1;
    uint32_t t = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n), t++)
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) last[ir_node_operand(g, n, i)] = t;
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) last[ir_graph_output(g, i)] = UINT32_MAX;
    /* in-place Concats (CPU): each input's place inside the output, taken when the first input
     * is produced; owner[v] is the Concat node of input v */
    uint32_t *uses = calloc(nv + 1, sizeof *uses);
    IrNodeId *owner = calloc(nv + 1, sizeof *owner);
    int64_t *part = calloc(nv + 1, sizeof *part);
    if (!uses || !owner || !part) {
        free(uses), free(owner), free(part), free(last), free(live);
        lower_plan_free(plan);
        return IR_ENOMEM;
    }
    if (h->concat_in_place) ir_graph_count_uses(g, uses);
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && h->concat_in_place; n = ir_node_next(g, n)) {
        if (!lower_concat_in_place(g, n, uses)) continue;
        int64_t pos = 0;
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
            IrValueId v = ir_node_operand(g, n, i);
            owner[v] = n;
            part[v] = pos;
            pos += (int64_t)value_bytes_at(g, v, sym);
        }
    }
    uint32_t n_live = 0;
    t = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n), t++) {
        uint32_t k = 0; /* drop blocks whose value died before this node */
        for (uint32_t j = 0; j < n_live; j++)
            if (live[j].last >= t) live[k++] = live[j];
        n_live = k;
        /* (not when the copy is an in-place Concat's part: that has its place inside the Concat's
         * output, where the copy must write it) */
        if (copy_in_place(g, n, last, t) && plan->offset[ir_node_operand(g, n, 0)] >= 0 && !owner[ir_node_result(g, n, 0)]) {
            IrValueId x = ir_node_operand(g, n, 0), y = ir_node_result(g, n, 0);
            plan->offset[y] = plan->offset[x];
            plan->bytes[y] = (int64_t)value_bytes_at(g, y, sym);
            for (uint32_t j = 0; j < n_live; j++) /* x's block now lives as long as y */
                if (live[j].off <= plan->offset[x] && plan->offset[x] < live[j].off + live[j].size && last[y] > live[j].last)
                    live[j].last = last[y];
            continue;
        }
        int64_t scratch = h->scratch ? h->scratch(g, n, sym, h->user) : 0;
        for (uint32_t i = 0; i <= ir_node_num_results(g, n); i++) {
            bool is_scratch = i == ir_node_num_results(g, n);
            uint32_t v = is_scratch ? nv + 1 + t : ir_node_result(g, n, i);
            if (is_scratch ? scratch == 0 : !lower_in_workspace(g, v)) continue;
            if (!is_scratch && plan->offset[v] >= 0) continue; /* an in-place Concat's output, placed already */
            IrValueId whole = 0;
            if (!is_scratch && owner[v]) { /* place the Concat's output now, v inside it */
                whole = ir_node_result(g, owner[v], 0);
                if (plan->offset[whole] >= 0) {
                    plan->offset[v] = plan->offset[whole] + part[v];
                    plan->bytes[v] = (int64_t)value_bytes_at(g, v, sym);
                    continue;
                }
                v = whole;
            }
            int64_t bytes = is_scratch ? scratch : (int64_t)value_bytes_at(g, v, sym);
            int64_t size = (bytes + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
            if (size == 0) size = WS_ALIGN;
            /* blocks of 64 KiB and more hold 64 bytes more: the value sits at the block's start
             * or 64 bytes in, at the 128-byte phase residual_phase asks for (a contraction's
             * output against its residual), without moving to another gap (a fresh region is
             * memory no earlier kernel of the run touched, slower to write than the phase gains) */
            int64_t slack = size >= (64 << 10) ? 64 : 0;
            size += slack;
            plan->unplanned += (size_t)size;
            int64_t phase = is_scratch || whole || !slack ? -1 : residual_phase(g, n, plan->offset, bytes);
            /* live is sorted by offset: take the first gap that fits */
            int64_t off = 0;
            uint32_t pos = 0;
            for (; pos < n_live; pos++) {
                if (live[pos].off - off >= size) break;
                if (live[pos].off + live[pos].size > off) off = live[pos].off + live[pos].size;
            }
            int64_t shift = phase >= 0 && off % 128 != phase ? 64 : 0;
            memmove(&live[pos + 1], &live[pos], (n_live - pos) * sizeof *live);
            live[pos] = (Block){off, size, is_scratch ? t : last[v] > t ? last[v] : t};
            n_live++;
            plan->offset[v] = off + shift;
            plan->bytes[v] = bytes;
            if (whole) {
                IrValueId r = ir_node_result(g, n, i);
                plan->offset[r] = off + part[r];
                plan->bytes[r] = (int64_t)value_bytes_at(g, r, sym);
            }
            if ((size_t)(off + size) > plan->peak) plan->peak = (size_t)(off + size);
        }
    }
    free(uses);
    free(owner);
    free(part);
    free(last);
    free(live);
    return IR_OK;
}

void lower_plan_free(LowerMemPlan *plan) {
    free(plan->offset);
    free(plan->bytes);
    plan->offset = NULL;
    plan->bytes = NULL;
}

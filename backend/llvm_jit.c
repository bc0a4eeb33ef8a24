/* The in-process CPU program: specialization of symbols from the inputs, the liveness-based
 * memory plan (greedy first fit by value lifetime over the top-level node order), O3 for the
 * host CPU and an ORC LLJIT. A run allocates its own workspace and pointer table, so runs on one
 * program may proceed concurrently. */
#include "backend/llvm_common.h"
#include "passes/passes.h"

#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define WS_ALIGN 64
#define WS_POOL 4

struct IrLlvmProgram {
    const IrGraph *g;
    LLVMOrcLLJITRef jit;
    IrtEntryFn entry;
    LlvmMemPlan plan;
    uint32_t n_values, n_kernels;
    void **filled; /* by value id: ConstantOfShape data owned by the program */
    pthread_mutex_t pool_mu; /* guards the workspaces kept between runs */
    char *pool[WS_POOL];
    uint32_t n_pool;
    int64_t *sym_hi; /* data-dependent dims: every symbol at its largest value (by id), else NULL */
    LlvmDerived *derived; /* the kernels' compile-time data, each bound to buffer slot .slot */
    uint32_t n_derived;
};

/* Dims of v with the symbols at sym (NULL: constant dims only). */
static bool value_dims_at(const IrGraph *g, IrValueId v, const int64_t *sym, uint32_t *rank, int64_t *dims) {
    if (!sym) return llvm_value_shape(g, v, rank, dims);
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!t || r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return false;
    for (uint32_t k = 0; k < r; k++)
        if (!ir_expr_eval(g, ir_type_dims(g, t)[k], sym, &dims[k]) || dims[k] < 0) return false;
    *rank = r;
    return true;
}

size_t llvm_value_nbytes(const IrGraph *g, IrValueId v) {
    uint32_t r;
    int64_t d[IR_MAX_RANK], n = 1;
    if (!llvm_value_shape(g, v, &r, d)) return 0;
    for (uint32_t i = 0; i < r; i++) n *= d[i];
    return (size_t)n * ir_dtype_size(ir_type_dtype(g, ir_value_type(g, v)));
}

const void *llvm_value_const_data(const IrGraph *g, IrValueId v) {
    if (ir_value_kind(g, v) == IR_VALUE_CONST) return ir_const_data(g, ir_value_const(g, v));
    if (ir_value_kind(g, v) != IR_VALUE_RESULT) return NULL;
    IrNodeId n = ir_value_def_node(g, v);
    IrAttrValue av;
    if (ir_node_op(g, n) == IR_OP_CONSTANT && ir_node_attr(g, n, "value", &av) && av.kind == IR_ATTR_TENSOR)
        return ir_const_data(g, av.tensor);
    return NULL;
}

/* ---- specialization ------------------------------------------------------------------------ */

/* Fused groups of elementwise members, contraction epilogues and (keep_rows: CPU) row
 * reductions with their elementwise neighbours are kept and compiled as one kernel each
 * (llvm_fused_ew_group, llvm_fused_epilogue_group, llvm_fused_row_group); the others are
 * compiled op by op: their bodies are inlined into the top level (outputs keep the group's result
 * names), which keeps results identical to the interpreter's. keep_static: keep only groups
 * whose shapes qualify (after specialization). */
static IrStatus inline_fused(IrGraph *g, bool keep_static, bool keep_rows, bool keep_dyn, bool *inlined) {
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION), next; n; n = next) {
        next = ir_node_next(g, n);
        if (ir_node_op(g, n) != IR_OP_FUSED) continue;
        if (llvm_fused_ew_group(g, n, keep_static) || llvm_fused_epilogue_group(g, n, keep_static)) continue;
        if (keep_rows && (llvm_fused_row_group(g, n) || llvm_fused_attention_group(g, n))) continue;
        if (keep_dyn && (llvm_dyn_attention_group(g, n) || llvm_dyn_ew_group(g, n) || llvm_dyn_row_group(g, n))) continue;
        if (inlined) *inlined = true;
        IrRegionId body = ir_node_region_at(g, n, 0);
        uint32_t nv = ir_graph_num_values(g), nr = ir_node_num_results(g, n);
        IrValueId *map = calloc(nv + 1, sizeof *map), *outs = calloc(nr + 1, sizeof *outs);
        char **names = calloc(nr + 1, sizeof *names);
        IrStatus s = map && outs && names ? IR_OK : IR_ENOMEM;
        for (uint32_t i = 0; !s && i < ir_region_num_args(g, body) && i < ir_node_num_operands(g, n); i++)
            map[ir_region_arg(g, body, i)] = ir_node_operand(g, n, i);
        if (!s) s = ir_region_clone_into(g, body, IR_ROOT_REGION, n, map, outs);
        for (uint32_t i = 0; !s && i < nr; i++) {
            IrValueId r = ir_node_result(g, n, i);
            if (!r) continue;
            names[i] = strdup(ir_value_name(g, r));
            ir_graph_replace_uses(g, r, outs[i]);
        }
        if (!s) {
            ir_node_erase(g, n);
            for (uint32_t i = 0; i < nr; i++) { /* fresh results take the group's names back */
                if (!names[i] || outs[i] <= nv || ir_value_kind(g, outs[i]) != IR_VALUE_RESULT) continue;
                IrStatus rs = ir_value_rename(g, outs[i], names[i]); /* free now: the group is erased */
                (void)rs;
            }
        }
        for (uint32_t i = 0; names && i < nr; i++) free(names[i]);
        free(names);
        free(map);
        free(outs);
        if (s) return s;
    }
    return IR_OK;
}

/* Parses and runs pipeline spec on g, verifying after each pass. */
static IrStatus run_pipeline(IrGraph *g, const char *spec, IrDiag *diag) {
    IrPipeline *pl = NULL;
    IrPipelineOptions po = {.verify_each = true};
    IrStatus s = ir_pipeline_parse(spec, diag, &pl);
    if (!s) s = ir_pipeline_run(pl, g, &po, diag);
    ir_pipeline_destroy(pl);
    return s;
}

IrStatus llvm_specialize_inputs(IrGraph *g, const IrTensor *inputs, uint32_t n_inputs, IrDiag *diag) {
    return llvm_specialize_inputs_for(g, inputs, n_inputs, true, diag);
}

IrStatus llvm_specialize_inputs_for(IrGraph *g, const IrTensor *inputs, uint32_t n_inputs, bool cpu_fusion,
                                    IrDiag *diag) {
    bool dyn = !inputs && !cpu_fusion; /* symbols stay: attention groups with run-time shapes (llvm_dyn.c) */
    IrStatus fs = inline_fused(g, false, cpu_fusion, dyn, NULL);
    if (fs) {
        ir_diag_error(diag, "llvm backend: cannot expand fused groups (%s)", ir_status_name(fs));
        return fs;
    }
    if (n_inputs != ir_graph_num_inputs(g)) {
        ir_diag_error(diag, "the graph has %u inputs, %u given", ir_graph_num_inputs(g), n_inputs);
        return IR_EINVAL;
    }
    for (uint32_t i = 0; inputs && i < n_inputs; i++) { /* no inputs: symbols stay (llvm_dyn.c) */
        IrValueId v = ir_graph_input(g, i);
        IrTypeId t = ir_value_type(g, v);
        uint32_t r = ir_type_rank(g, t);
        if (r == IR_RANK_UNKNOWN) continue;
        if (r != inputs[i].rank) {
            ir_diag_error(diag, "input '%s' has rank %u, the graph expects %u", ir_value_name(g, v), inputs[i].rank, r);
            return IR_EINVAL;
        }
        for (uint32_t k = 0; k < r; k++) {
            IrExprId e = ir_type_dims(g, ir_value_type(g, v))[k]; /* re-read: specializing re-interns types */
            if (ir_expr_kind(g, e) != IR_EXPR_SYM) continue;
            IrStatus s = ir_graph_specialize_symbol(g, ir_expr_sym_id(g, e), inputs[i].dims[k], diag);
            if (s) return s;
        }
    }
    /* Symbols tied to bound ones by an equality (T == S + 1) become constant too. */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t i = 0; i < ir_graph_num_constraints(g) && !changed; i++) {
            IrConstraint c = ir_graph_constraint(g, i);
            if (c.kind != IR_CONSTRAINT_EQ) continue;
            for (int side = 0; side < 2 && !changed; side++) {
                IrExprId a = side ? c.b : c.a, b = side ? c.a : c.b;
                int64_t val;
                if (ir_expr_kind(g, a) != IR_EXPR_SYM || !ir_expr_is_const(g, b, &val)) continue;
                IrStatus s = ir_graph_specialize_symbol(g, ir_expr_sym_id(g, a), val, diag);
                if (s) return s;
                changed = true;
            }
        }
    }
    /* Imported models often carry no intermediate types and compute shapes at run time (Shape,
     * Gather, Concat): infer types now that inputs are fixed, then fold those computations. If on
     * data becomes Where and constant-trip Loops are unrolled by lower-cf, sequences of a static
     * structure become their tensors (lower-seq), Gradient nodes the ops computing them
     * (lower-grad). Input-independent tensors are folded up to 16M elements (64 MiB of f32; the
     * pass's default stops at 1M): what a run would recompute every time is computed once here
     * and mapped from the artifact. On the CPU (not for CUDA) that includes weights dequantized
     * from FP8 or int8 for a Conv: the CPU computes in f32 anyway, and as constants they fold
     * BatchNorm, take the packed GEMM and Winograd (a quantize-fp8 ResNet-50 ran in 56 ms
     * against 35 for f32 when its 53 Conv weights were decoded on every run). */
    const char *fold = cpu_fusion || dyn ? "const-fold{max-elements=16777216,dequantize=1}" : "const-fold{max-elements=16777216}";
    char spec[256];
    snprintf(spec, sizeof spec, "shape-infer,%s,lower-cf,lower-seq,lower-grad,%s,dce,shape-infer", fold, fold);
    IrStatus s = run_pipeline(g, spec, diag);
    /* dims the data decides (NonZero's count) become symbols that their kernels write; the
     * types after them are inferred again from those */
    bool data = false;
    if (!s) s = llvm_data_symbols(g, &data, diag);
    if (!s && data) s = run_pipeline(g, "shape-infer", diag);
    /* Then the backend's own fusion: BatchNorm folded into Conv weights, contraction epilogues
     * (bias, activation, residual Add: one kernel with the GEMM) and elementwise chains; with
     * run-time shapes, attention groups. */
    if (!s && (cpu_fusion || dyn))
        s = run_pipeline(g, cpu_fusion ? "fuse{kinds=bn+convsum+attention+epilogue+reduction+elementwise},shape-infer"
                                       : "fuse{kinds=attention+reduction+elementwise},shape-infer",
                         diag);
    /* Kept groups whose shapes turn out not to fit one loop nest are compiled op by op after all. */
    bool inlined = false;
    if (!s && (fs = inline_fused(g, true, cpu_fusion, dyn, &inlined))) {
        ir_diag_error(diag, "llvm backend: cannot expand fused groups (%s)", ir_status_name(fs));
        return fs;
    }
    if (!s && inlined) s = run_pipeline(g, "shape-infer", diag);
    return s;
}

/* ---- memory plan --------------------------------------------------------------------------- */

typedef struct Block {
    int64_t off, size;
    uint32_t last;
} Block;

/* A ConstantOfShape result made once per program; with a run-time shape it is computed per run
 * in the workspace instead (llvm_dyn.c). */
static bool is_filled_const(const IrGraph *g, IrValueId v) {
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    return ir_value_kind(g, v) == IR_VALUE_RESULT && ir_node_op(g, ir_value_def_node(g, v)) == IR_OP_CONSTANT_OF_SHAPE &&
           llvm_value_shape(g, v, &r, d);
}

static bool in_workspace(const IrGraph *g, IrValueId v) {
    return v && ir_value_kind(g, v) == IR_VALUE_RESULT && !llvm_value_const_data(g, v) && !is_filled_const(g, v);
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
bool llvm_concat_in_place(const IrGraph *g, IrNodeId n, const uint32_t *uses) {
    if (ir_node_op(g, n) != IR_OP_CONCAT || ir_node_region(g, n) != IR_ROOT_REGION) return false;
    IrValueId y = ir_node_result(g, n, 0);
    uint32_t ry;
    int64_t dy[IR_MAX_RANK];
    if (!in_workspace(g, y) || !llvm_value_shape(g, y, &ry, dy) || ry == 0) return false;
    bool found;
    int64_t axis = lo_norm_axis(ir_node_attr_int(g, n, "axis", &found), ry);
    if (axis < 0 || axis >= (int64_t)ry || lo_numel((uint32_t)axis, dy) != 1 || is_graph_output(g, y)) return false;
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (!v || !in_workspace(g, v) || uses[v] != 1 || !llvm_value_shape(g, v, &ry, dy)) return false;
        if (ir_type_dtype(g, ir_value_type(g, v)) != ir_type_dtype(g, ir_value_type(g, y))) return false;
        IrNodeId p = ir_value_def_node(g, v);
        if (ir_node_region(g, p) != IR_ROOT_REGION || ir_node_op(g, p) == IR_OP_CONCAT || is_graph_output(g, v)) return false;
    }
    return true;
}

/* ConstantOfShape results with static shapes are made once per program, not per run. */
static IrStatus fill_constants(IrLlvmProgram *p, IrDiag *diag) {
    const IrGraph *g = p->g;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) {
        if (ir_node_op(g, n) != IR_OP_CONSTANT_OF_SHAPE || !is_filled_const(g, ir_node_result(g, n, 0))) continue;
        IrValueId v = ir_node_result(g, n, 0);
        size_t es = ir_dtype_size(ir_type_dtype(g, ir_value_type(g, v))), nb = llvm_value_nbytes(g, v);
        unsigned char val[16] = {0};
        IrAttrValue av;
        if (ir_node_attr(g, n, "value", &av) && av.kind == IR_ATTR_TENSOR) {
            if (ir_const_nbytes(g, av.tensor) != es) {
                ir_diag_at_node(diag, g, n, IR_SEV_ERROR, "the llvm backend does not support ConstantOfShape with this value yet");
                return IR_EUNSUPPORTED;
            }
            memcpy(val, ir_const_data(g, av.tensor), es);
        }
        unsigned char *data = malloc(nb ? nb : 1);
        if (!data) return IR_ENOMEM;
        for (size_t i = 0; i < nb; i += es) memcpy(data + i, val, es);
        p->filled[v] = data;
    }
    return IR_OK;
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
    return x && y && in_workspace(g, x) && in_workspace(g, y) && last[x] == t && !is_graph_output(g, x) &&
           !is_graph_output(g, y) && ir_type_dtype(g, ir_value_type(g, x)) == ir_type_dtype(g, ir_value_type(g, y));
}

/* Bytes of v, its dims evaluated under sym (symbol values by id) when they are symbolic. */
static size_t value_bytes_at(const IrGraph *g, IrValueId v, const int64_t *sym) {
    IrTypeId t = ir_value_type(g, v);
    uint32_t r = ir_type_rank(g, t);
    if (!sym || !t || r == IR_RANK_UNKNOWN) return llvm_value_nbytes(g, v);
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
        if (u && in_workspace(g, u) && offset[u] >= 0 && (int64_t)llvm_value_nbytes(g, u) == bytes) return (offset[u] + 64) % 128;
    }
    return -1;
}

IrStatus llvm_plan_memory(const IrGraph *g, unsigned simd_bits, LlvmMemPlan *plan) {
    return llvm_plan_memory_at(g, simd_bits, NULL, plan);
}

IrStatus llvm_plan_memory_at(const IrGraph *g, unsigned simd_bits, const int64_t *sym, LlvmMemPlan *plan) {
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
        llvm_plan_free(plan);
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
        llvm_plan_free(plan);
        return IR_ENOMEM;
    }
    if (simd_bits) ir_graph_count_uses(g, uses);
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && simd_bits; n = ir_node_next(g, n)) {
        if (!llvm_concat_in_place(g, n, uses)) continue;
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
        int64_t scratch = sym && llvm_dyn_node(g, n) ? llvm_dyn_scratch_bytes(g, n, sym) : llvm_node_scratch_bytes(g, n, simd_bits);
        for (uint32_t i = 0; i <= ir_node_num_results(g, n); i++) {
            bool is_scratch = i == ir_node_num_results(g, n);
            uint32_t v = is_scratch ? nv + 1 + t : ir_node_result(g, n, i);
            if (is_scratch ? scratch == 0 : !in_workspace(g, v)) continue;
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

void llvm_plan_free(LlvmMemPlan *plan) {
    free(plan->offset);
    free(plan->bytes);
    plan->offset = NULL;
    plan->bytes = NULL;
}

/* ---- JIT ------------------------------------------------------------------------------------ */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_llvm(void) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
}

static IrStatus llvm_fail(IrDiag *diag, LLVMErrorRef err, const char *what) {
    char *msg = LLVMGetErrorMessage(err);
    ir_diag_error(diag, "llvm backend: %s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return IR_EUNSUPPORTED;
}

static IrStatus optimize(LLVMModuleRef mod, IrDiag *diag) {
    char *triple = LLVMGetDefaultTargetTriple(), *err = NULL;
    LLVMTargetRef target;
    IrStatus s = IR_OK;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        ir_diag_error(diag, "llvm backend: no target for %s: %s", triple, err);
        LLVMDisposeMessage(err);
        LLVMDisposeMessage(triple);
        return IR_EUNSUPPORTED;
    }
    char *cpu = LLVMGetHostCPUName(), *features = llvm_host_features();
    if (!features) {
        LLVMDisposeMessage(cpu);
        LLVMDisposeMessage(triple);
        return IR_ENOMEM;
    }
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, features, LLVMCodeGenLevelAggressive,
                                                      LLVMRelocDefault, LLVMCodeModelJITDefault);
    LLVMSetTarget(mod, triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, dl);
    /* host CPU attributes on every function so the vectorizer sees the real vector width */
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        if (LLVMIsDeclaration(f)) continue;
        LLVMContextRef ctx = LLVMGetModuleContext(mod);
        LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(ctx, "target-cpu", 10, cpu, (unsigned)strlen(cpu)));
        LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(ctx, "target-features", 15, features, (unsigned)strlen(features)));
    }
    s = llvm_run_o3(mod, tm, "llvm backend: optimization failed", diag);
    LLVMDisposeTargetData(dl);
    LLVMDisposeTargetMachine(tm);
    LLVMDisposeMessage(cpu);
    free(features);
    LLVMDisposeMessage(triple);
    return s;
}

/* Graph inputs and outputs need static shapes too (an unused input is not seen by codegen). */
static IrStatus check_io_static(const IrGraph *g, const int64_t *sym, IrDiag *diag) {
    for (uint32_t k = 0; k < ir_graph_num_inputs(g) + ir_graph_num_outputs(g); k++) {
        bool in = k < ir_graph_num_inputs(g);
        IrValueId v = in ? ir_graph_input(g, k) : ir_graph_output(g, k - ir_graph_num_inputs(g));
        uint32_t r;
        int64_t d[IR_MAX_RANK];
        if (ir_type_is_container(g, ir_value_type(g, v))) {
            ir_diag_error(diag, "the llvm backend does not support graph %s '%s': unsupported type (a %s)",
                          in ? "input" : "output", ir_value_name(g, v),
                          ir_type_kind(g, ir_value_type(g, v)) == IR_TYPE_SEQ ? "sequence" : "optional");
            return IR_EUNSUPPORTED;
        }
        if (!in && ir_value_kind(g, v) == IR_VALUE_CONST && ir_type_dtype(g, ir_value_type(g, v)) == IR_DTYPE_STRING) {
            ir_diag_error(diag, "the llvm backend does not support a string constant as graph output '%s'",
                          ir_value_name(g, v));
            return IR_EUNSUPPORTED;
        }
        if (!(in ? llvm_value_shape(g, v, &r, d) : value_dims_at(g, v, sym, &r, d))) {
            ir_diag_error(diag, "the llvm backend needs static shapes, but graph %s '%s' has a symbolic or unknown shape",
                          in ? "input" : "output", ir_value_name(g, v));
            return IR_EUNSUPPORTED;
        }
    }
    return IR_OK;
}

IrStatus llvm_program_create(const IrGraph *g, IrDiag *diag, IrLlvmProgram **out) {
    *out = NULL;
    pthread_once(&init_once, init_llvm);
    IrLlvmProgram *p = calloc(1, sizeof *p);
    if (!p) return IR_ENOMEM;
    pthread_mutex_init(&p->pool_mu, NULL);
    p->g = g;
    p->n_values = ir_graph_num_values(g);
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMModuleRef mod = NULL;
    char *hcpu = LLVMGetHostCPUName(), *hfeat = llvm_host_features(); /* AMX off when the tile state is refused */
    unsigned simd = llvm_simd_bits(hcpu, hfeat);
    LLVMDisposeMessage(hcpu);
    free(hfeat);
    IrStatus s = IR_OK;
    if (ir_sym_plan_has_data(g)) { /* dims the data decides: symbols the kernels write, planned at their largest */
        IrSymPlan sp;
        s = ir_sym_plan(g, &sp, diag);
        if (!s && sp.n) {
            ir_diag_error(diag, "the llvm backend needs static input shapes here ('%s' is symbolic)",
                          ir_sym_name(g, sp.sym[0]));
            s = IR_EUNSUPPORTED;
        }
        if (!s && !(p->sym_hi = malloc((ir_graph_num_syms(g) + 1) * sizeof *p->sym_hi))) s = IR_ENOMEM;
        if (!s) ir_sym_binding(g, &sp, INT64_MAX, p->sym_hi);
    }
    if (!s)
        s = llvm_build_module(g, LLVMOrcThreadSafeContextGetContext(tsc), simd, diag, &mod, &p->n_kernels, &p->derived,
                              &p->n_derived);
    if (!s) s = check_io_static(g, p->sym_hi, diag);
    if (!s && llvm_module_uses_blas(mod)) {
        char why[256];
        if (irt_blas_require(why, sizeof why)) {
            ir_diag_error(diag, "llvm backend: %s", why);
            s = IR_EUNSUPPORTED;
        }
    }
    if (!s) s = optimize(mod, diag);
    if (!s) s = llvm_plan_memory_at(g, simd, p->sym_hi, &p->plan);
    if (!s) s = (p->filled = calloc(p->n_values + 1, sizeof *p->filled)) ? fill_constants(p, diag) : IR_ENOMEM;
    LLVMErrorRef e = NULL;
    if (!s && (e = LLVMOrcCreateLLJIT(&p->jit, NULL))) s = llvm_fail(diag, e, "cannot create the JIT");
    if (!s) {
        LLVMOrcDefinitionGeneratorRef gen;
        if ((e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(p->jit), NULL,
                                                                      NULL)))
            s = llvm_fail(diag, e, "cannot search the process for libm");
        else LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(p->jit), gen);
    }
    if (!s) {
        LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(mod, tsc);
        mod = NULL;
        if ((e = LLVMOrcLLJITAddLLVMIRModule(p->jit, LLVMOrcLLJITGetMainJITDylib(p->jit), tsm))) {
            LLVMOrcDisposeThreadSafeModule(tsm);
            s = llvm_fail(diag, e, "cannot add the module");
        }
    }
    if (!s) {
        LLVMOrcExecutorAddress addr = 0;
        if ((e = LLVMOrcLLJITLookup(p->jit, &addr, "irt_entry"))) s = llvm_fail(diag, e, "cannot materialize the code");
        else p->entry = (IrtEntryFn)(uintptr_t)addr;
    }
    if (mod) LLVMDisposeModule(mod);
    LLVMOrcDisposeThreadSafeContext(tsc);
    if (s) {
        llvm_program_destroy(p);
        return s;
    }
    *out = p;
    return IR_OK;
}

void llvm_program_destroy(IrLlvmProgram *p) {
    if (!p) return;
    if (p->jit) LLVMOrcDisposeLLJIT(p->jit);
    llvm_plan_free(&p->plan);
    for (uint32_t v = 0; p->filled && v <= p->n_values; v++) free(p->filled[v]);
    free(p->filled);
    for (uint32_t i = 0; i < p->n_pool; i++) free(p->pool[i]);
    pthread_mutex_destroy(&p->pool_mu);
    free(p->sym_hi);
    for (uint32_t i = 0; i < p->n_derived; i++) free(p->derived[i].data);
    free(p->derived);
    free(p);
}

size_t llvm_program_workspace_bytes(const IrLlvmProgram *p) { return p->plan.peak; }
size_t llvm_program_unplanned_bytes(const IrLlvmProgram *p) { return p->plan.unplanned; }
uint32_t llvm_program_num_kernels(const IrLlvmProgram *p) { return p->n_kernels; }
bool llvm_program_data_dims(const IrLlvmProgram *p) { return p->sym_hi != NULL; }

/* Generated code reaches BLAS and libm through the runtime's helper table (irt_fn_table). */

/* ---- running ---------------------------------------------------------------------------------- */

static IrStatus check_input(const IrGraph *g, uint32_t i, const IrTensor *t, IrDiag *diag) {
    IrValueId v = ir_graph_input(g, i);
    uint32_t r;
    int64_t d[IR_MAX_RANK];
    llvm_value_shape(g, v, &r, d);
    bool ok = t->dtype == ir_type_dtype(g, ir_value_type(g, v)) && t->rank == r;
    for (uint32_t k = 0; ok && k < r; k++) ok = t->dims[k] == d[k];
    if (!ok) {
        char have[256];
        IrStrBuf b;
        ir_strbuf_init(&b);
        ir_type_print(g, ir_value_type(g, v), &b);
        ir_tensor_shape_str(t, have, sizeof have);
        ir_diag_error(diag, "guard failed: input '%s' is %s but the program was compiled for %s", ir_value_name(g, v),
                      have, b.data ? b.data : "?");
        ir_strbuf_free(&b);
        return IR_EINVAL;
    }
    return IR_OK;
}

/* Workspaces are kept by the program between runs (a run takes one from the pool or makes a new
 * one), so steady-state runs touch memory that is already mapped instead of faulting in fresh
 * pages; concurrent runs each hold their own. At most WS_POOL are kept. */
static char *ws_take(IrLlvmProgram *p) {
    if (!p->plan.peak) return NULL;
    char *ws = NULL;
    pthread_mutex_lock(&p->pool_mu);
    if (p->n_pool) ws = p->pool[--p->n_pool];
    pthread_mutex_unlock(&p->pool_mu);
    return ws ? ws : irt_workspace_alloc((size_t)p->plan.peak);
}

static void ws_give(IrLlvmProgram *p, char *ws) {
    if (!ws) return;
    pthread_mutex_lock(&p->pool_mu);
    if (p->n_pool < WS_POOL) {
        p->pool[p->n_pool++] = ws;
        ws = NULL;
    }
    pthread_mutex_unlock(&p->pool_mu);
    free(ws);
}

/* Runs into outputs whose data is allocated with the compiled shapes (checked). */
static IrStatus run_core(IrLlvmProgram *p, const IrTensor *inputs, uint32_t n_inputs, IrTensor *outputs, IrDiag *diag) {
    const IrGraph *g = p->g;
    uint32_t n_out = ir_graph_num_outputs(g);
    if (n_inputs != ir_graph_num_inputs(g)) {
        ir_diag_error(diag, "the graph has %u inputs, %u given", ir_graph_num_inputs(g), n_inputs);
        return IR_EINVAL;
    }
    for (uint32_t i = 0; i < n_inputs; i++) {
        IrStatus s = check_input(g, i, &inputs[i], diag);
        if (s) return s;
    }
    /* + the symbols, the run's context and the derived data */
    void **bufs = calloc(p->plan.n_slots + 2 + p->n_derived, sizeof *bufs);
    char *ws = ws_take(p);
    bool *direct = calloc(n_out + 1, sizeof *direct);
    size_t ns = ir_graph_num_syms(g) + 1;
    int64_t *sym = p->sym_hi ? malloc(ns * sizeof *sym) : NULL; /* the kernels write the data symbols */
    if (!bufs || !direct || (p->plan.peak && !ws) || (p->sym_hi && !sym)) {
        free(bufs);
        free(direct);
        free(sym);
        ws_give(p, ws);
        return IR_ENOMEM;
    }
    if (sym) {
        memcpy(sym, p->sym_hi, ns * sizeof *sym);
        bufs[llvm_sym_slot(g)] = sym;
    }
    IrtRunCtx rc = {0}; /* bytes a run makes (strings), a helper's error */
    bufs[llvm_sym_slot(g) + 1] = &rc;
    for (uint32_t i = 0; i < p->n_derived; i++) bufs[p->derived[i].slot] = p->derived[i].data;
    for (uint32_t i = 0; i < n_inputs; i++) bufs[ir_graph_input(g, i)] = inputs[i].data;
    for (uint32_t v = 1; v < p->plan.n_slots; v++) {
        if (p->plan.offset[v] >= 0) bufs[v] = ws + p->plan.offset[v];
        else if (v <= p->n_values && !bufs[v])
            bufs[v] = p->filled[v] ? p->filled[v] : (void *)llvm_value_const_data(g, v);
    }
    /* A workspace value returned as an output is computed straight into its tensor (it then
     * shares no memory with other values, which is always safe), so the run neither touches that
     * part of the workspace nor copies it. */
    for (uint32_t i = 0; i < n_out; i++) {
        IrValueId v = ir_graph_output(g, i);
        if (!ir_tensor_nbytes(&outputs[i]) || p->plan.offset[v] < 0) continue;
        bool taken = false; /* the same value returned twice: the later ones are copies */
        for (uint32_t j = 0; j < i && !taken; j++) taken = direct[j] && ir_graph_output(g, j) == v;
        if (taken) continue;
        bufs[v] = outputs[i].data;
        direct[i] = true;
    }
    p->entry(bufs, irt_fn_table());
    for (uint32_t i = 0; i < n_out; i++) {
        if (sym) { /* the dims the data decided (a prefix of the largest case, row-major) */
            uint32_t r;
            value_dims_at(g, ir_graph_output(g, i), sym, &r, outputs[i].dims);
        }
        size_t nb = ir_tensor_nbytes(&outputs[i]);
        if (!direct[i] && nb) memcpy(outputs[i].data, bufs[ir_graph_output(g, i)], nb);
    }
    IrStatus st = IR_OK;
    if (rc.failed) {
        ir_diag_error(diag, "run failed: %s", rc.err);
        st = IR_EINVAL;
    }
    for (uint32_t i = 0; i < n_out && !st; i++) /* string outputs: their bytes into their own block */
        if (outputs[i].dtype == IR_DTYPE_STRING) st = ir_tensor_own_strings(&outputs[i]);
    irt_run_ctx_free(&rc);
    free(sym);
    free(direct);
    ws_give(p, ws);
    free(bufs);
    return st;
}

IrStatus llvm_program_run_into(IrLlvmProgram *p, const IrTensor *inputs, uint32_t n_inputs, IrTensor *outputs,
                               IrDiag *diag) {
    const IrGraph *g = p->g;
    if (p->sym_hi) {
        ir_diag_error(diag, "outputs whose dims the data decides (NonZero, Compress) cannot be run into given tensors: "
                            "run the program with its outputs allocated per run");
        return IR_EUNSUPPORTED;
    }
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) {
        IrValueId v = ir_graph_output(g, i);
        uint32_t r;
        int64_t d[IR_MAX_RANK];
        value_dims_at(g, v, p->sym_hi, &r, d); /* data-dependent dims: the largest case */
        const IrTensor *t = &outputs[i];
        bool ok = t->dtype == ir_type_dtype(g, ir_value_type(g, v)) && t->rank == r && (t->data || !ir_tensor_nbytes(t));
        for (uint32_t k = 0; ok && k < r; k++) ok = t->dims[k] == d[k];
        if (!ok) {
            ir_diag_error(diag, "output %u ('%s') given to run into does not have the compiled dtype and shape", i,
                          ir_value_name(g, v));
            return IR_EINVAL;
        }
    }
    return run_core(p, inputs, n_inputs, outputs, diag);
}

IrStatus llvm_program_run(IrLlvmProgram *p, const IrTensor *inputs, uint32_t n_inputs, IrTensor *outputs,
                          IrDiag *diag) {
    const IrGraph *g = p->g;
    uint32_t n_out = ir_graph_num_outputs(g);
    IrStatus s = IR_OK;
    for (uint32_t i = 0; i < n_out; i++) memset(&outputs[i], 0, sizeof outputs[i]);
    for (uint32_t i = 0; i < n_out && !s; i++) {
        IrValueId v = ir_graph_output(g, i);
        uint32_t r;
        int64_t d[IR_MAX_RANK];
        value_dims_at(g, v, p->sym_hi, &r, d);
        s = ir_tensor_alloc(&outputs[i], ir_type_dtype(g, ir_value_type(g, v)), r, d);
    }
    if (!s) s = run_core(p, inputs, n_inputs, outputs, diag);
    if (s)
        for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outputs[i]);
    return s;
}

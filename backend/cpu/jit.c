/* The in-process CPU program: specialization of symbols from the inputs, the liveness-based
 * memory plan (greedy first fit by value lifetime over the top-level node order), O3 for the
 * host CPU and an ORC LLJIT. A run allocates its own workspace and pointer table, so runs on one
 * program may proceed concurrently. */
#include "backend/cpu/cpu.h"
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

#define WS_POOL 4

struct IrLlvmProgram {
    const IrGraph *g;
    LLVMOrcLLJITRef jit;
    IrtEntryFn entry;
    LowerMemPlan plan;
    uint32_t n_values, n_kernels;
    void **filled; /* by value id: ConstantOfShape data owned by the program */
    pthread_mutex_t pool_mu; /* guards the workspaces kept between runs */
    char *pool[WS_POOL];
    uint32_t n_pool;
    int64_t *sym_hi; /* data-dependent dims: every symbol at its largest value (by id), else NULL */
    LlvmDerived *derived; /* the kernels' compile-time data, each bound to buffer slot .slot */
    uint32_t n_derived;
};



/* ---- specialization ------------------------------------------------------------------------ */

/* Fused groups of elementwise members, contraction epilogues and (keep_rows: CPU) row
 * reductions with their elementwise neighbours are kept and compiled as one kernel each
 * (lower_fused_ew_group, llvm_fused_epilogue_group, llvm_fused_row_group); the others are
 * compiled op by op: their bodies are inlined into the top level (outputs keep the group's result
 * names), which keeps results identical to the interpreter's. keep_static: keep only groups
 * whose shapes qualify (after specialization). */
static IrStatus inline_fused(IrGraph *g, bool keep_static, bool keep_rows, bool keep_dyn, bool *inlined) {
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION), next; n; n = next) {
        next = ir_node_next(g, n);
        if (ir_node_op(g, n) != IR_OP_FUSED) continue;
        if (lower_fused_ew_group(g, n, keep_static) || llvm_fused_epilogue_group(g, n, keep_static)) continue;
        if (keep_rows && (llvm_fused_row_group(g, n) || llvm_fused_attention_group(g, n))) continue;
        if (keep_dyn && (llvm_dyn_attention_group(g, n) || llvm_dyn_epilogue_group(g, n) || llvm_dyn_ew_group(g, n) ||
                         llvm_dyn_row_group(g, n)))
            continue;
        if (inlined) *inlined = true;
        IrStatus s = lower_inline_group(g, n);
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
    bool dyn = !inputs && !cpu_fusion; /* symbols stay: attention groups with run-time shapes (cpu/dyn.c) */
    IrStatus fs = inline_fused(g, false, cpu_fusion, dyn, NULL);
    if (fs) {
        ir_diag_error(diag, "llvm backend: cannot expand fused groups (%s)", ir_status_name(fs));
        return fs;
    }
    if (n_inputs != ir_graph_num_inputs(g)) {
        ir_diag_error(diag, "the graph has %u inputs, %u given", ir_graph_num_inputs(g), n_inputs);
        return IR_EINVAL;
    }
    for (uint32_t i = 0; inputs && i < n_inputs; i++) { /* no inputs: symbols stay (cpu/dyn.c) */
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
    /* dims the data decides (NonZero's count, Slice by starts given at run time) become symbols
     * that their kernels (or the runtime, from input values) write; the types after them are
     * inferred again from those, which may give the next such node its operand's shape */
    bool data = false;
    if (!s) s = lower_data_symbols(g, &data, diag);
    for (int round = 0; !s && data && round < 64; round++) {
        s = run_pipeline(g, "shape-infer", diag);
        if (!s) s = lower_data_symbols(g, &data, diag);
    }
    /* Then the backend's own fusion: BatchNorm folded into Conv weights, contraction epilogues
     * (bias, activation, residual Add: one kernel with the GEMM) and elementwise chains; with
     * run-time shapes, attention groups and MatMul/Gemm epilogues too. */
    if (!s && (cpu_fusion || dyn))
        s = run_pipeline(g, cpu_fusion ? "fuse{kinds=bn+convsum+attention+attention-kt+epilogue+reduction+elementwise},shape-infer"
                                       : "fuse{kinds=attention+epilogue+reduction+elementwise},shape-infer",
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

/* ---- constants made once per program ------------------------------------------------------- */

/* ConstantOfShape results with static shapes are made once per program, not per run. */
static IrStatus fill_constants(IrLlvmProgram *p, IrDiag *diag) {
    const IrGraph *g = p->g;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) {
        if (ir_node_op(g, n) != IR_OP_CONSTANT_OF_SHAPE || !lower_value_filled_const(g, ir_node_result(g, n, 0))) continue;
        IrValueId v = ir_node_result(g, n, 0);
        size_t es = ir_dtype_size(ir_type_dtype(g, ir_value_type(g, v))), nb = lower_value_nbytes(g, v);
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
        if (!(in ? lower_value_shape(g, v, &r, d) : lower_value_dims_at(g, v, sym, &r, d))) {
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
    LowerPlanHooks hooks = llvm_plan_hooks(&simd);
    if (!s) s = lower_plan_memory(g, &hooks, p->sym_hi, &p->plan);
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
    lower_plan_free(&p->plan);
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
    lower_value_shape(g, v, &r, d);
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
        bufs[lower_sym_slot(g)] = sym;
    }
    IrtRunCtx rc = {0}; /* bytes a run makes (strings), a helper's error */
    bufs[lower_sym_slot(g) + 1] = &rc;
    for (uint32_t i = 0; i < p->n_derived; i++) bufs[p->derived[i].slot] = p->derived[i].data;
    for (uint32_t i = 0; i < n_inputs; i++) bufs[ir_graph_input(g, i)] = inputs[i].data;
    for (uint32_t v = 1; v < p->plan.n_slots; v++) {
        if (p->plan.offset[v] >= 0) bufs[v] = ws + p->plan.offset[v];
        else if (v <= p->n_values && !bufs[v])
            bufs[v] = p->filled[v] ? p->filled[v] : (void *)lower_value_const_data(g, v);
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
            lower_value_dims_at(g, ir_graph_output(g, i), sym, &r, outputs[i].dims);
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
        lower_value_dims_at(g, v, p->sym_hi, &r, d); /* data-dependent dims: the largest case */
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
        lower_value_dims_at(g, v, p->sym_hi, &r, d);
        s = ir_tensor_alloc(&outputs[i], ir_type_dtype(g, ir_value_type(g, v)), r, d);
    }
    if (!s) s = run_core(p, inputs, n_inputs, outputs, diag);
    if (s)
        for (uint32_t i = 0; i < n_out; i++) ir_tensor_free(&outputs[i]);
    return s;
}

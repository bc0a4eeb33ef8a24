/* The CUDA artifact writer: the NVPTX module of cuda/codegen.c is optimized at O3 and printed as
 * PTX (ISA 8.0) by LLVM's NVPTX target, assembled to a cubin by the toolkit's ptxas (its -v
 * report gives registers, shared memory and stack per kernel), and packed by ir_artifact_pack
 * with the CPU backend's memory plan: code section = cubin, then the PTX (NUL-terminated) so a
 * newer GPU can JIT it. Manifest lines added here are read by backend/runtime/cuda_rt.c. */
#include "backend/cuda/cuda.h"
#include "backend/artifact/artifact.h"

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* PTX ISA 8.0 (CUDA 12.0 drivers); sm_89's cvt.*.e4m3x2 needs 8.1 */
static const char *ptx_isa(int sm) { return sm == 89 ? "8.1" : "8.0"; }
static const char *ptx_feature(int sm) { return sm == 89 ? "+ptx81" : "+ptx80"; }

static pthread_once_t nvptx_once = PTHREAD_ONCE_INIT;
static void nvptx_init(void) {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
}

bool ir_cuda_target_parse(const char *t, int *sm, bool *arch_specific) {
    if (!t) return false;
    if (strncmp(t, "cuda:", 5) == 0) t += 5;
    static const struct { const char *name; int sm; bool a; } known[] = {
        {"sm_80", 80, false}, {"sm_89", 89, false}, {"sm_90", 90, false}, {"sm_90a", 90, true}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(t, known[i].name) == 0) {
            *sm = known[i].sm;
            *arch_specific = known[i].a;
            return true;
        }
    return false;
}

IrStatus ir_cuda_inline_groups(IrGraph *g, IrDiag *diag) {
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION), next; n; n = next) {
        next = ir_node_next(g, n);
        if (ir_node_op(g, n) != IR_OP_FUSED || lower_fused_ew_group(g, n, false)) continue;
        IrStatus s = lower_inline_group(g, n);
        if (s) {
            ir_diag_error(diag, "cuda backend: cannot inline a fused group (%s)", ir_status_name(s));
            return s;
        }
    }
    return IR_OK;
}

/* ---- libdevice ----------------------------------------------------------------------------------- */

static const char *ptxas_path(void);

/* The toolkit's libdevice: $IRTOOL_LIBDEVICE, else nvvm/libdevice/libdevice.10.bc next to the
 * bin/ folder of the ptxas in use (found on PATH when it is a bare name). */
static bool libdevice_path(char *out, size_t cap) {
    const char *p = getenv("IRTOOL_LIBDEVICE");
    if (p && *p) return snprintf(out, cap, "%s", p) < (int)cap;
    const char *tool = ptxas_path();
    char dir[4096] = "";
    if (strchr(tool, '/')) snprintf(dir, sizeof dir, "%s", tool);
    else {
        const char *path = getenv("PATH");
        for (const char *q = path; q && *q && !*dir;) {
            size_t n = strcspn(q, ":");
            char cand[4096];
            snprintf(cand, sizeof cand, "%.*s/%s", (int)n, q, tool);
            if (access(cand, X_OK) == 0) snprintf(dir, sizeof dir, "%s", cand);
            q += n + (q[n] == ':');
        }
    }
    char *slash = strrchr(dir, '/');
    if (!slash) return false;
    *slash = 0; /* .../bin */
    slash = strrchr(dir, '/');
    if (slash) *slash = 0; else snprintf(dir, sizeof dir, ".");
    return snprintf(out, cap, "%s/nvvm/libdevice/libdevice.10.bc", dir) < (int)cap && access(out, R_OK) == 0;
}

/* Kernels that call libdevice's math (__nv_acos, __nv_pow, ...) get it linked in; its functions
 * become internal so O3 keeps only those called. */
static IrStatus link_libdevice(LLVMContextRef ctx, LLVMModuleRef mod, IrDiag *diag) {
    bool needed = false;
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f && !needed; f = LLVMGetNextFunction(f)) {
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        needed = LLVMIsDeclaration(f) && n > 5 && strncmp(name, "__nv_", 5) == 0;
    }
    if (!needed) return IR_OK;
    char path[4096];
    if (!libdevice_path(path, sizeof path)) {
        ir_diag_error(diag, "irtool compile: these kernels need the CUDA toolkit's libdevice (nvvm/libdevice/libdevice.10.bc), "
                      "which was not found next to ptxas: set IRTOOL_LIBDEVICE=/path/to/libdevice.10.bc");
        return IR_EUNSUPPORTED;
    }
    LLVMMemoryBufferRef buf = NULL;
    char *err = NULL;
    if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &err)) {
        ir_diag_error(diag, "irtool compile: cannot read libdevice '%s': %s", path, err ? err : "?");
        LLVMDisposeMessage(err);
        return IR_EIO;
    }
    LLVMModuleRef lib = NULL;
    bool bad = LLVMParseBitcodeInContext2(ctx, buf, &lib);
    LLVMDisposeMemoryBuffer(buf);
    if (bad) {
        ir_diag_error(diag, "irtool compile: libdevice '%s' is not LLVM bitcode this LLVM reads", path);
        return IR_EUNSUPPORTED;
    }
    /* keep only what the kernels call, and what that calls: unused functions are deleted until
     * none is left, so the link and O3 see a handful of functions instead of all of libdevice */
    for (bool more = true; more;) {
        more = false;
        for (LLVMValueRef f = LLVMGetFirstFunction(lib), next; f; f = next) {
            next = LLVMGetNextFunction(f);
            size_t n;
            const char *name = LLVMGetValueName2(f, &n);
            LLVMValueRef mine = LLVMGetNamedFunction(mod, name);
            if (LLVMGetFirstUse(f) || (mine && LLVMIsDeclaration(mine))) continue;
            LLVMDeleteFunction(f);
            more = true;
        }
    }
    LLVMSetTarget(lib, LLVMGetTarget(mod));
    LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(mod));
    if (LLVMLinkModules2(mod, lib)) {
        ir_diag_error(diag, "irtool compile: cannot link libdevice '%s'", path);
        return IR_EUNSUPPORTED;
    }
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        size_t n;
        const char *name = LLVMGetValueName2(f, &n);
        if (!LLVMIsDeclaration(f) && n > 5 && strncmp(name, "__nv_", 5) == 0) LLVMSetLinkage(f, LLVMInternalLinkage);
    }
    /* libdevice asks __nvvm_reflect("__CUDA_FTZ"): no flush to zero, as the other kernels */
    LLVMAddModuleFlag(mod, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                      LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(ctx), 0, 0)));
    return IR_OK;
}

/* ---- PTX ------------------------------------------------------------------------------------------ */

static IrStatus emit_ptx(const IrGraph *g, int sm, bool arch_a, const char *tname, IrDiag *diag, CuModule *cm,
                         char **ptx, size_t *ptx_len) {
    pthread_once(&nvptx_once, nvptx_init);
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = NULL;
    IrStatus s = cuda_build_module(g, sm, tname, ctx, diag, &mod, cm);
    if (s) {
        LLVMContextDispose(ctx);
        return s;
    }
    const char *triple = "nvptx64-nvidia-cuda";
    char cpu[16], *err = NULL;
    snprintf(cpu, sizeof cpu, "sm_%d%s", sm, arch_a ? "a" : "");
    LLVMTargetRef target;
    LLVMTargetMachineRef tm = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        ir_diag_error(diag, "irtool compile: this LLVM has no NVPTX target: %s", err);
        LLVMDisposeMessage(err);
        s = IR_EUNSUPPORTED;
    }
    if (!s) {
        tm = LLVMCreateTargetMachine(target, triple, cpu, ptx_feature(sm), LLVMCodeGenLevelAggressive, LLVMRelocDefault,
                                     LLVMCodeModelDefault);
        LLVMSetTarget(mod, triple);
        LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
        LLVMSetModuleDataLayout(mod, dl);
        LLVMDisposeTargetData(dl);
        s = link_libdevice(ctx, mod, diag);
        if (!s) s = llvm_run_o3(mod, tm, "irtool compile: NVPTX optimization failed", diag);
    }
    LLVMMemoryBufferRef buf = NULL;
    if (!s && LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &err, &buf)) {
        ir_diag_error(diag, "irtool compile: cannot emit PTX: %s", err);
        LLVMDisposeMessage(err);
        s = IR_EUNSUPPORTED;
    }
    if (!s) {
        size_t n = LLVMGetBufferSize(buf);
        *ptx = malloc(n + 1);
        if (!*ptx) s = IR_ENOMEM;
        else {
            memcpy(*ptx, LLVMGetBufferStart(buf), n);
            (*ptx)[n] = 0;
            *ptx_len = strlen(*ptx); /* the buffer may carry a trailing NUL */
        }
    }
    if (buf) LLVMDisposeMemoryBuffer(buf);
    if (tm) LLVMDisposeTargetMachine(tm);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    if (s) cuda_module_free(cm);
    return s;
}

/* ---- ptxas --------------------------------------------------------------------------------------- */

static const char *ptxas_path(void) {
    const char *p = getenv("IRTOOL_PTXAS");
    if (p && *p) return p;
#ifdef IRTOOL_CUDA_PTXAS
    if (access(IRTOOL_CUDA_PTXAS, X_OK) == 0) return IRTOOL_CUDA_PTXAS;
#endif
    return "ptxas";
}

/* Runs argv with stdout+stderr into log_path; 0 = exited 0, -1 = cannot run, 1 = failed. */
static int run_tool(char **argv, const char *log_path, int *spawn_err) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ), st = 0;
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        *spawn_err = rc;
        return -1;
    }
    if (waitpid(pid, &st, 0) < 0) return 1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) { /* exec failed in the child (glibc reports it so) */
        *spawn_err = ENOENT;
        return -1;
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static void no_ptxas(IrDiag *diag, const char *path, int err) {
#ifdef IRTOOL_CUDA_PTXAS
    const char *built = "";
#else
    const char *built = "irtool was built without a CUDA toolkit and ";
#endif
    ir_diag_error(diag, "irtool compile for a cuda target needs the CUDA toolkit's ptxas to assemble the kernels, but %s"
                  "'%s' cannot be run (%s): install the CUDA toolkit or set IRTOOL_PTXAS=/path/to/ptxas",
                  built, path, strerror(err));
}

/* "Cuda compilation tools, release 13.0, V13.0.88" -> "13.0" */
static void toolkit_version(const char *log, char *out, size_t cap) {
    const char *r = log ? strstr(log, "release ") : NULL;
    snprintf(out, cap, "unknown");
    if (!r) return;
    r += 8;
    size_t n = strspn(r, "0123456789.");
    if (n && n < cap) {
        memcpy(out, r, n);
        out[n] = 0;
    }
}

/* ptxas -v: "Compiling entry function 'NAME'", "N bytes stack frame", "Used N registers, ... N bytes smem" */
static void parse_ptxas_info(const char *log, CuModule *cm) {
    CuKernel *cur = NULL;
    for (const char *l = log; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[512];
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, l, len);
        line[len] = 0;
        const char *p;
        if ((p = strstr(line, "entry function '")) || (p = strstr(line, "Function properties for "))) {
            p = strchr(p, '\'') ? strchr(p, '\'') + 1 : p + strlen("Function properties for ");
            char name[64];
            size_t k = strcspn(p, "' \t");
            if (k >= sizeof name) k = sizeof name - 1;
            memcpy(name, p, k);
            name[k] = 0;
            cur = NULL;
            for (uint32_t i = 0; i < cm->n_k; i++)
                if (strcmp(cm->k[i].name, name) == 0) cur = &cm->k[i];
        } else if (cur && (p = strstr(line, "bytes stack frame"))) {
            const char *q = p;
            while (q > line && (q[-1] == ' ' || (q[-1] >= '0' && q[-1] <= '9'))) q--;
            cur->stack = atoi(q);
        } else if (cur && (p = strstr(line, "Used "))) {
            cur->regs = atoi(p + 5);
            const char *sm = strstr(line, " bytes smem");
            if (sm) {
                const char *q = sm;
                while (q > line && q[-1] >= '0' && q[-1] <= '9') q--;
                cur->smem = atoi(q);
            } else cur->smem = 0;
        }
    }
}

static IrStatus read_all(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return IR_EIO;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    for (size_t k; b && (k = fread(b + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) {
            char *nb = realloc(b, (cap *= 2) + 1);
            if (!nb) free(b);
            b = nb;
        }
    }
    fclose(f);
    if (!b) return IR_ENOMEM;
    b[n] = 0;
    *out = b;
    *len = n;
    return IR_OK;
}

static IrStatus assemble(const char *ptx, size_t ptx_len, const char *arch, CuModule *cm, IrDiag *diag, char **cubin,
                         size_t *cubin_len, char *toolkit, size_t tk_cap) {
    char dir[] = "/tmp/irtool-ptxas-XXXXXX";
    if (!mkdtemp(dir)) {
        ir_diag_error(diag, "irtool compile: cannot create a temporary directory: %s", strerror(errno));
        return IR_EIO;
    }
    char ptx_path[64], cubin_path[64], log_path[64];
    snprintf(ptx_path, sizeof ptx_path, "%s/k.ptx", dir);
    snprintf(cubin_path, sizeof cubin_path, "%s/k.cubin", dir);
    snprintf(log_path, sizeof log_path, "%s/log", dir);
    IrStatus s = ir_write_file_atomic(ptx_path, ptx, ptx_len, diag);
    const char *tool = ptxas_path();
    char *log = NULL;
    size_t log_len = 0;
    int err = 0;
    if (!s) {
        char *vargv[] = {(char *)tool, "--version", NULL};
        if (run_tool(vargv, log_path, &err) < 0) {
            no_ptxas(diag, tool, err);
            s = IR_EUNSUPPORTED;
        } else if (read_all(log_path, &log, &log_len) == IR_OK) {
            toolkit_version(log, toolkit, tk_cap);
            free(log);
            log = NULL;
        }
    }
    if (!s) {
        char archarg[32];
        snprintf(archarg, sizeof archarg, "-arch=%s", arch);
        char *argv[] = {(char *)tool, archarg, "-O3", "-v", "-o", cubin_path, ptx_path, NULL};
        int rc = run_tool(argv, log_path, &err);
        read_all(log_path, &log, &log_len) == IR_OK ? (void)0 : (void)(log = NULL);
        if (rc < 0) {
            no_ptxas(diag, tool, err);
            s = IR_EUNSUPPORTED;
        } else if (rc > 0) {
            ir_diag_error(diag, "irtool compile: ptxas rejected the generated PTX for %s:\n%s", arch, log ? log : "(no output)");
            s = IR_EUNSUPPORTED;
        } else {
            parse_ptxas_info(log, cm);
            s = read_all(cubin_path, cubin, cubin_len);
            if (s) ir_diag_error(diag, "irtool compile: ptxas wrote no cubin");
        }
    }
    free(log);
    unlink(ptx_path);
    unlink(cubin_path);
    unlink(log_path);
    rmdir(dir);
    return s;
}

/* ---- manifest ------------------------------------------------------------------------------------ */

/* Operand uses of v in region r and the regions nested in it (and as a region output). */
static uint32_t count_uses(const IrGraph *g, IrRegionId r, IrValueId v) {
    uint32_t k = 0;
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n)) {
        for (uint32_t o = 0; o < ir_node_num_operands(g, n); o++) k += ir_node_operand(g, n, o) == v;
        for (uint32_t i = 0; i < ir_node_num_regions(g, n); i++) {
            IrRegionId b = ir_node_region_at(g, n, i);
            k += count_uses(g, b, v);
            for (uint32_t j = 0; j < ir_region_num_outputs(g, b); j++) k += ir_region_output(g, b, j) == v;
        }
    }
    return k;
}

static void arg_str(IrStrBuf *s, const CuArg *a) { ir_strbuf_printf(s, " %u:%lld", a->slot, (long long)a->off); }

/* A step size: the number, or =K for formula K (CU_FX). */
static void num_str(IrStrBuf *s, int64_t v) {
    if (v < 0) ir_strbuf_printf(s, " =%lld", (long long)(-1 - v));
    else ir_strbuf_printf(s, " %lld", (long long)v);
}

/* A dim expression as a step size (constant or a formula added to cm); false for `?`. */
static bool expr_num(const IrGraph *g, CuModule *cm, IrExprId x, int64_t *v) {
    if (ir_expr_is_const(g, x, v)) return true;
    IrStrBuf b = {0};
    bool ok = cuda_fx_text(g, x, &b) && !b.failed;
    int64_t k = ok ? cuda_fx_add(cm, b.data) : -1;
    ir_strbuf_free(&b);
    *v = CU_FX(k);
    return k >= 0;
}

/* Symbolic shapes: what the runtime evaluates per binding besides the steps' formulas, after the
 * symbols are bound from the inputs (insym) and checked against their ranges (symbol):
 *   fxdef SYM SIZE         a symbol defined over the bound ones (evaluated first)
 *   fxcheck SIZE SIZE      an equality the binding must satisfy (shape-infer's facts)
 *   fxout I SIZE...        output I's dims
 *   fxrun K SLOT ALIAS BYTES NPRED PRED...  workspace block K placed per run (load.c's wsrun K):
 *                          at block ALIAS's offset when ALIAS >= 0, else 64-byte aligned after the
 *                          furthest of its preds, the first after the static workspace
 *   fx K TOKEN...          formula K, postfix (written last: the lines above add formulas) */
static IrStatus sym_lines(const IrGraph *g, const IrSymPlan *sp, const LowerMemPlan *plan, CuModule *cm, IrStrBuf *s,
                          IrDiag *diag) {
    int64_t v, w;
    for (uint32_t i = 0; i < sp->n_def; i++) {
        if (!expr_num(g, cm, sp->def_expr[i], &v)) goto unknown;
        ir_strbuf_printf(s, "fxdef %u", (unsigned)sp->def_sym[i]);
        num_str(s, v);
        ir_strbuf_printf(s, "\n");
    }
    for (uint32_t i = 0; i < sp->n_eq; i++) {
        if (!expr_num(g, cm, sp->eq_a[i], &v) || !expr_num(g, cm, sp->eq_b[i], &w)) goto unknown;
        ir_strbuf_printf(s, "fxcheck");
        num_str(s, v);
        num_str(s, w);
        ir_strbuf_printf(s, "\n");
    }
    for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) {
        IrTypeId t = ir_value_type(g, ir_graph_output(g, i));
        ir_strbuf_printf(s, "fxout %u", i);
        for (uint32_t k = 0; k < ir_type_rank(g, t); k++) {
            if (!expr_num(g, cm, ir_type_dims(g, t)[k], &v)) goto unknown;
            num_str(s, v);
        }
        ir_strbuf_printf(s, "\n");
    }
    for (uint32_t k = 0; k < plan->n_dyn; k++) {
        const LowerDynBlock *bk = &plan->dyn[k];
        if (bk->slot > ir_graph_num_values(g)) {
            ir_diag_error(diag, "cuda backend: a node's scratch follows a symbol without an upper bound (bind it, or bound it "
                                "with -p 'shape-infer{SYM=1:HI}')");
            return IR_EUNSUPPORTED;
        }
        IrTypeId t = ir_value_type(g, bk->slot);
        int64_t nb = (int64_t)ir_dtype_size(ir_type_dtype(g, t));
        /* bytes: the product of the dims as one formula */
        IrStrBuf f = {0};
        uint32_t terms = 0;
        for (uint32_t d = 0; d < ir_type_rank(g, t); d++) {
            if (ir_expr_is_const(g, ir_type_dims(g, t)[d], &v)) {
                nb *= v;
                continue;
            }
            if (!cuda_fx_text(g, ir_type_dims(g, t)[d], &f)) {
                ir_strbuf_free(&f);
                goto unknown;
            }
            if (terms++) ir_strbuf_printf(&f, " *");
        }
        if (terms) ir_strbuf_printf(&f, " %lld *", (long long)nb);
        int64_t id = terms ? (f.failed ? -1 : cuda_fx_add(cm, f.data)) : 0;
        ir_strbuf_free(&f);
        if (id < 0) return IR_ENOMEM;
        ir_strbuf_printf(s, "fxrun %u %u %d", k, bk->slot, (int)bk->alias);
        num_str(s, terms ? CU_FX(id) : nb);
        ir_strbuf_printf(s, " %u", bk->n_pred);
        for (uint32_t j = 0; j < bk->n_pred; j++) ir_strbuf_printf(s, " %u", bk->pred[j]);
        ir_strbuf_printf(s, "\n");
    }
    return IR_OK;
unknown:
    ir_diag_error(diag, "cuda backend: an output or a symbol's definition has an unknown dim");
    return IR_EUNSUPPORTED;
}

static void steps_text(const CuModule *cm, bool tf32, IrStrBuf *s) {
    for (uint32_t i = 0; i < cm->n_k; i++) {
        const CuKernel *k = &cm->k[i];
        ir_strbuf_printf(s, "kernel %s node %u block %u %s params %u regs %d smem %d stack %d\n", k->name, k->node, k->block,
                 k->rows ? "rows" : "stride", k->n_params, k->regs, k->smem, k->stack);
    }
    for (uint32_t i = 0; i < cm->n_s; i++) {
        const CuStep *st = &cm->s[i];
        switch (st->kind) {
        case CU_STEP_KERNEL:
            ir_strbuf_printf(s, "step %u kernel %s", st->node, cm->k[st->kernel].name);
            num_str(s, st->work);
            for (uint32_t a = 0; a < st->n_args; a++) arg_str(s, &st->arg[a]);
            break;
        case CU_STEP_COPY:
            ir_strbuf_printf(s, "step %u copy", st->node);
            arg_str(s, &st->arg[0]);
            arg_str(s, &st->arg[1]);
            num_str(s, st->bytes);
            break;
        case CU_STEP_MEMSET:
            ir_strbuf_printf(s, "step %u memset", st->node);
            arg_str(s, &st->arg[0]);
            ir_strbuf_printf(s, " %d", st->value);
            num_str(s, st->bytes);
            break;
        case CU_STEP_GEMM: {
            const CuGemm *gm = &st->gemm;
            ir_strbuf_printf(s, "step %u gemm %s %d %d", st->node, tf32 && !strcmp(gm->dt, "f32") ? "tf32" : gm->dt, gm->ta,
                             gm->tb);
            const int64_t f[10] = {gm->m, gm->n, gm->k, gm->lda, gm->ldb, gm->ldc, gm->batch, gm->sa, gm->sb, gm->sc};
            for (int q = 0; q < 10; q++) num_str(s, f[q]);
            ir_strbuf_printf(s, " %.17g", gm->alpha);
            arg_str(s, &gm->a);
            arg_str(s, &gm->b);
            arg_str(s, &gm->c);
            ir_strbuf_printf(s, " %u %u %u", gm->as_slot, gm->bs_slot, gm->bias_slot);
            break;
        }
        }
        ir_strbuf_printf(s, "\n");
    }
    for (uint32_t i = 0; i < cm->n_fx; i++) ir_strbuf_printf(s, "fx %u %s\n", i, cm->fx[i]);
}

IrStatus ir_cuda_artifact_build(const IrGraph *g, const IrGraph *source, const IrCudaOptions *opt, IrDiag *diag,
                                void **bytes, size_t *len) {
    *bytes = NULL;
    *len = 0;
    int sm;
    bool arch_a;
    if (!opt || !ir_cuda_target_parse(opt->target, &sm, &arch_a)) {
        ir_diag_error(diag, "irtool compile: unknown CUDA target '%s' (supported: cuda:sm_80, cuda:sm_89, cuda:sm_90, "
                      "cuda:sm_90a)", opt && opt->target ? opt->target : "");
        return IR_EINVAL;
    }
    char arch[16], tname[24];
    snprintf(arch, sizeof arch, "sm_%d%s", sm, arch_a ? "a" : "");
    snprintf(tname, sizeof tname, "cuda:%s", arch);
    CuModule cm;
    char *ptx = NULL, *cubin = NULL, toolkit[32] = "unknown";
    size_t ptx_len = 0, cubin_len = 0;
    LowerMemPlan plan = {0};
    IrStatus s = emit_ptx(g, sm, arch_a, tname, diag, &cm, &ptx, &ptx_len);
    if (s) return s;
    s = assemble(ptx, ptx_len, arch, &cm, diag, &cubin, &cubin_len, toolkit, sizeof toolkit);
    /* CUDA convs use the im2col scratch; symbolic dims: the plan holds every binding up to the
     * symbols' upper bounds, values sized by unbounded ones are placed per run (fxrun) */
    LowerPlanHooks hooks = {.scratch = cuda_plan_scratch, .syms = opt->syms, .diag = diag};
    int64_t *hi = opt->syms ? malloc((ir_graph_num_syms(g) + 1) * sizeof *hi) : NULL;
    if (!s && opt->syms && !hi) s = IR_ENOMEM;
    if (hi) lower_plan_binding(g, opt->syms, 1, hi);
    if (!s) s = lower_plan_memory(g, &hooks, hi, &plan);
    free(hi);
    if (!s && cm.symbolic && !opt->syms) {
        ir_diag_error(diag, "cuda backend: symbolic shapes need the symbol plan (internal error)");
        s = IR_EINVAL;
    }
    if (!s && cm.symbolic && cm.tail_bytes) {
        ir_diag_error(diag, "irtool compile: this graph needs the CUDA-only scratch (FP8, losses) and has symbolic shapes: "
                            "bind the symbols with --input");
        s = IR_EUNSUPPORTED;
    }
    if (!s && plan.n_slots != cm.tail_slot) {
        ir_diag_error(diag, "cuda backend: internal error, slot count mismatch with the memory plan");
        s = IR_EINVAL;
    }
    IrStrBuf tl = {0}, ex = {0};
    char *code = NULL;
    size_t code_len = 0;
    if (!s) {
        /* code: cubin, padded to 64 bytes, then the PTX with its NUL */
        size_t ptx_off = (cubin_len + 63) / 64 * 64;
        code = calloc(1, ptx_off + ptx_len + 1);
        if (!code) s = IR_ENOMEM;
        else {
            memcpy(code, cubin, cubin_len);
            memcpy(code + ptx_off, ptx, ptx_len + 1);
            code_len = ptx_off + ptx_len + 1;
        }
        int major = atoi(toolkit);
        bool gemm = false;
        for (uint32_t i = 0; i < cm.n_s; i++) gemm |= cm.s[i].kind == CU_STEP_GEMM;
        ir_strbuf_printf(&tl, "triple nvptx64-nvidia-cuda\ntarget %s\nsm %d%s\narch %s\nptx_isa %s\ncuda_toolkit %s\n", tname, sm,
                 arch_a ? "a" : "", arch, ptx_isa(sm), toolkit);
        /* cubins of toolkit N load on drivers of CUDA N.0 and later (and cuBLASLt N needs it too) */
        ir_strbuf_printf(&tl, "min_driver %d\ncublaslt %d\nfp8_ptx %d\ncubin 0 %zu\nptx %zu %zu\n", major > 0 ? major * 1000 : 12000,
                 gemm ? major > 0 ? major : 13 : 0, cm.uses_fp8_ptx ? 1 : 0, cubin_len, ptx_off, ptx_len);
        if (opt->syms) s = sym_lines(g, opt->syms, &plan, &cm, &ex, diag);
        steps_text(&cm, opt->tf32, &ex);
        if (!s && (tl.failed || ex.failed)) s = IR_ENOMEM;
    }
    /* originals of transposed weights are left out when nothing else reads them */
    IrValueId *omit = NULL;
    uint32_t n_omit = 0;
    if (!s && cm.n_extra && (omit = malloc(cm.n_extra * sizeof *omit))) {
        for (uint32_t i = 0; i < cm.n_extra; i++) {
            IrValueId v = cm.extra_of[i];
            uint32_t uses = count_uses(g, IR_ROOT_REGION, v), served = 0;
            for (uint32_t j = 0; j < cm.n_extra; j++) served += cm.extra_of[j] == v;
            bool dup = false;
            for (uint32_t j = 0; j < n_omit; j++) dup |= omit[j] == v;
            if (uses == served && !dup) omit[n_omit++] = v;
        }
    }
    if (!s) {
        IrArtifactPack pk = {.omit = omit, .n_omit = n_omit, .pipeline = opt->pipeline, .target_lines = tl.data, .extra_lines = ex.data, .plan = &plan,
                             .tail_bytes = cm.tail_bytes, .extra = cm.extra, .syms = opt->syms, .n_extra = cm.n_extra, .n_kernels = cm.n_k,
                             .code = code, .code_len = code_len};
        s = ir_artifact_pack(g, source, &pk, diag, bytes, len);
    }
    free(omit);
    lower_plan_free(&plan);
    cuda_module_free(&cm);
    free(code);
    ir_strbuf_free(&tl);
    ir_strbuf_free(&ex);
    free(ptx);
    free(cubin);
    return s;
}

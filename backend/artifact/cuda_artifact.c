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
            ir_strbuf_printf(s, "step %u kernel %s %lld", st->node, cm->k[st->kernel].name, (long long)st->work);
            for (uint32_t a = 0; a < st->n_args; a++) arg_str(s, &st->arg[a]);
            break;
        case CU_STEP_COPY:
            ir_strbuf_printf(s, "step %u copy", st->node);
            arg_str(s, &st->arg[0]);
            arg_str(s, &st->arg[1]);
            ir_strbuf_printf(s, " %lld", (long long)st->bytes);
            break;
        case CU_STEP_MEMSET:
            ir_strbuf_printf(s, "step %u memset", st->node);
            arg_str(s, &st->arg[0]);
            ir_strbuf_printf(s, " %d %lld", st->value, (long long)st->bytes);
            break;
        case CU_STEP_GEMM: {
            const CuGemm *gm = &st->gemm;
            ir_strbuf_printf(s, "step %u gemm %s %d %d %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %.17g", st->node,
                     tf32 && !strcmp(gm->dt, "f32") ? "tf32" : gm->dt,
                     gm->ta, gm->tb, (long long)gm->m, (long long)gm->n, (long long)gm->k, (long long)gm->lda,
                     (long long)gm->ldb, (long long)gm->ldc, (long long)gm->batch, (long long)gm->sa, (long long)gm->sb,
                     (long long)gm->sc, gm->alpha);
            arg_str(s, &gm->a);
            arg_str(s, &gm->b);
            arg_str(s, &gm->c);
            ir_strbuf_printf(s, " %u %u %u", gm->as_slot, gm->bs_slot, gm->bias_slot);
            break;
        }
        }
        ir_strbuf_printf(s, "\n");
    }
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
    LowerPlanHooks hooks = {.scratch = cuda_plan_scratch}; /* CUDA convs use the im2col scratch */
    if (!s) s = lower_plan_memory(g, &hooks, NULL, &plan);
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
        steps_text(&cm, opt->tf32, &ex);
        if (tl.failed || ex.failed) s = IR_ENOMEM;
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
                             .tail_bytes = cm.tail_bytes, .extra = cm.extra, .n_extra = cm.n_extra, .n_kernels = cm.n_k,
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

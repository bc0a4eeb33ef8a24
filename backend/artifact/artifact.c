/* The artifact writer: the same module as the in-memory LLVM backend, emitted as a PIC object
 * for the target, linked into a shared object by the system linker (the code refers to no
 * helper by name: helpers come through IrtFnTable), and packed with a text manifest, the
 * constant data and the binary IR into an .irx file (layout in backend/runtime/runtime.h). */
#include "backend/artifact/artifact.h"
#include "backend/cpu/cpu.h"
#include "backend/runtime/checksum.h"

#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <elf.h>
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

_Static_assert(IRT_MAX_RANK == IR_MAX_RANK, "IrtTensor and IrTensor ranks differ");

#if defined(__x86_64__)
#define ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define ELF_MACHINE EM_AARCH64
#else
#error "kernel objects: ELF machine of this host unknown"
#endif

#define ALIGN 64

static pthread_once_t art_once = PTHREAD_ONCE_INIT;
static void art_init(void) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
}

/* ---- the sections are built in IrStrBuf (ir/ir.h): bytes, not only text ---------------------- */

static void buf_put(IrStrBuf *b, const void *p, size_t n) {
    if (n) ir_strbuf_append(b, p, n);
}

static void buf_pad(IrStrBuf *b) {
    static const char zeros[ALIGN];
    buf_put(b, zeros, (ALIGN - b->len % ALIGN) % ALIGN);
}

/* name with bytes outside '!'..'~' and '%' written as %XX (the manifest is space-separated) */
static void buf_name(IrStrBuf *b, const char *s) {
    if (!*s) ir_strbuf_printf(b, "%%00");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= ' ' || c >= 0x7f || c == '%') ir_strbuf_printf(b, "%%%02X", c);
        else buf_put(b, s, 1);
    }
}

/* ---- code generation --------------------------------------------------------------------- */

/* Objects of one artifact: the entry's and one per distinct kernel (malloc'd bytes). */
typedef struct Objs {
    char **d;
    size_t *len;
    uint32_t n, cap;
    uint32_t n_kernels, n_cached; /* kernels compiled, of which taken from the cache */
    char (*cached)[IR_CACHE_KEY_CHARS]; /* the cache keys of those n_cached */
} Objs;

static IrStatus objs_add(Objs *o, const void *d, size_t len) {
    if (o->n == o->cap) {
        uint32_t cap = o->cap ? 2 * o->cap : 16;
        char **nd = realloc(o->d, cap * sizeof *nd);
        if (nd) o->d = nd;
        size_t *nl = realloc(o->len, cap * sizeof *nl);
        if (nl) o->len = nl;
        if (!nd || !nl) return IR_ENOMEM;
        o->cap = cap;
    }
    char *c = malloc(len ? len : 1);
    if (!c) return IR_ENOMEM;
    memcpy(c, d, len);
    o->d[o->n] = c;
    o->len[o->n++] = len;
    return IR_OK;
}

static void objs_free(Objs *o) {
    for (uint32_t i = 0; i < o->n; i++) free(o->d[i]);
    free(o->d);
    free(o->len);
    free(o->cached);
}

/* A cached kernel object taken as the object of key (cache entry bytes e, n): kept in objs when
 * it looks like a relocatable ELF object for this machine, whose section table lies inside it. */
static IrStatus objs_add_cached(Objs *o, const char *key, const char *e, size_t n, bool *taken) {
    *taken = false;
    const char *obj = e + IRT_HEADER_SIZE;
    size_t len = n - IRT_HEADER_SIZE;
    Elf64_Ehdr h;
    if (len < sizeof h) return IR_OK;
    memcpy(&h, obj, sizeof h);
    if (memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_type != ET_REL ||
        h.e_machine != ELF_MACHINE || h.e_shentsize != sizeof(Elf64_Shdr) || h.e_shoff > len ||
        (len - h.e_shoff) / sizeof(Elf64_Shdr) < h.e_shnum)
        return IR_OK;
    char(*nk)[IR_CACHE_KEY_CHARS] = realloc(o->cached, (o->n_cached + 1) * sizeof *nk);
    if (!nk) return IR_ENOMEM;
    o->cached = nk;
    memcpy(o->cached[o->n_cached], key, IR_CACHE_KEY_CHARS);
    IrStatus s = objs_add(o, obj, len);
    if (!s) o->n_cached++, *taken = true;
    return s;
}

typedef struct Target {
    LLVMTargetMachineRef tm;
    char *triple, *cpu, *feat;
} Target;

/* The CPU and features code is generated for (malloc'd): the host's with its features when
 * cpu_opt is NULL or names the host, else cpu_opt with its defaults (""). */
static void target_cpu(const char *cpu_opt, char **cpu, char **feat) {
    char *host = LLVMGetHostCPUName();
    bool is_host = !cpu_opt || strcmp(cpu_opt, host) == 0;
    char *features = is_host ? llvm_host_features() : NULL;
    *cpu = strdup(is_host ? host : cpu_opt);
    *feat = strdup(features ? features : "");
    free(features);
    LLVMDisposeMessage(host);
}

static IrStatus target_open(const char *cpu_opt, IrDiag *diag, Target *t) {
    char *triple = LLVMGetDefaultTargetTriple(), *err = NULL;
    target_cpu(cpu_opt, &t->cpu, &t->feat);
    t->triple = strdup(triple);
    LLVMTargetRef target;
    IrStatus s = IR_OK;
    if (!t->cpu || !t->feat || !t->triple) s = IR_ENOMEM;
    else if (LLVMGetTargetFromTriple(triple, &target, &err)) {
        ir_diag_error(diag, "irtool compile: no LLVM target for %s: %s", triple, err);
        LLVMDisposeMessage(err);
        s = IR_EUNSUPPORTED;
    } else {
        t->tm = LLVMCreateTargetMachine(target, triple, t->cpu, t->feat, LLVMCodeGenLevelAggressive, LLVMRelocPIC,
                                        LLVMCodeModelDefault);
    }
    LLVMDisposeMessage(triple);
    return s;
}

static void target_close(Target *t) {
    if (t->tm) LLVMDisposeTargetMachine(t->tm);
    free(t->triple);
    free(t->cpu);
    free(t->feat);
}

uint32_t ir_llvm_winograd_nodes(const IrGraph *g, const char *cpu, int tile) {
    char *name, *feat;
    target_cpu(cpu, &name, &feat);
    unsigned simd = name && feat ? llvm_simd_bits(name, feat) : 0;
    free(name);
    free(feat);
    uint32_t count = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) count += llvm_node_winograd_tile(g, n, simd) == tile;
    return count;
}

/* O3 for the target and an object file of mod (consumed). */
static IrStatus emit_module(const Target *t, LLVMModuleRef mod, IrDiag *diag, LLVMMemoryBufferRef *obj) {
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    char *err = NULL;
    IrStatus s = IR_OK;
    LLVMSetTarget(mod, t->triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(t->tm);
    LLVMSetModuleDataLayout(mod, dl);
    LLVMDisposeTargetData(dl);
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
        if (LLVMIsDeclaration(f)) continue;
        LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(ctx, "target-cpu", 10, t->cpu, (unsigned)strlen(t->cpu)));
        if (*t->feat)
            LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                                    LLVMCreateStringAttribute(ctx, "target-features", 15, t->feat, (unsigned)strlen(t->feat)));
    }
    s = llvm_run_o3(mod, t->tm, "irtool compile: optimization failed", diag);
    if (!s && LLVMTargetMachineEmitToMemoryBuffer(t->tm, mod, LLVMObjectFile, &err, obj)) {
        ir_diag_error(diag, "irtool compile: cannot emit an object file: %s", err);
        LLVMDisposeMessage(err);
        s = IR_EUNSUPPORTED;
    }
    LLVMDisposeModule(mod);
    return s;
}

#define KOBJ_TAG "irtool kernel object" /* at offset 16 of a kernel's cache entry */

/* Every kernel is its own module and object, named irk_<key> with key a hash of its LLVM IR
 * (before optimization; buffers are the kernel's own slots, so the IR does not depend on the
 * model) and the target and versions: identical kernels of different models are one entry of
 * the compile cache (cache_dir), and identical kernels of one model one object. The entry
 * calling them is compiled per model. */
static IrStatus emit_objects(const IrGraph *g, const IrArtifactOptions *opt, bool read_cache, IrDiag *diag, Objs *objs,
                             Target *t, uint32_t *n_kernels, bool *uses_blas, LowerMemPlan *plan, uint32_t **kernel_nodes,
                             bool *read, LlvmDerived **derived) {
    *uses_blas = false;
    pthread_once(&art_once, art_init);
    IrStatus s = target_open(opt ? opt->cpu : NULL, diag, t);
    if (s) return s;
    /* symbolic dims: the plan holds the largest binding (every symbol at its upper bound); the
     * values that symbols without one size are placed at run time (irt_shapes) */
    int64_t *hi = opt && opt->syms ? malloc((ir_graph_num_syms(g) + 1) * sizeof *hi) : NULL;
    if (hi) lower_plan_binding(g, opt->syms, 1, hi);
    if (opt && opt->syms && !hi) return IR_ENOMEM;
    unsigned simd = llvm_simd_bits(t->cpu, t->feat);
    LowerPlanHooks hooks = llvm_plan_hooks(&simd);
    hooks.syms = opt ? opt->syms : NULL;
    hooks.scratch_form = llvm_dyn_scratch_form;
    hooks.diag = diag;
    s = lower_plan_memory(g, &hooks, hi, plan);
    free(hi);
    if (s) return s;
    char kdir[4096], *cdir = NULL;
    if (opt && opt->cache_dir && (size_t)snprintf(kdir, sizeof kdir, "%s/kernels", opt->cache_dir) < sizeof kdir)
        cdir = kdir;
    LLVMContextRef ctx = LLVMContextCreate();
    uint32_t nn = 0, nk = 0, index = 0;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n)) nn++;
    char **names = calloc(nn + 1, sizeof *names);
    LlvmSlots *slots = calloc(nn + 1, sizeof *slots);
    uint32_t *knode = calloc(nn + 1, sizeof *knode); /* node index of each kernel call */
    *kernel_nodes = knode;
    /* kernel call i's compile-time data (packed weights) in slot n_slots + 2 + i: after the
     * tail/symbol slot and the run's context (runslot) */
    LlvmDerived *der = calloc(nn + 1, sizeof *der);
    *derived = der;
    if (!names || !slots || !knode || !der) s = IR_ENOMEM;
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n && !s; n = ir_node_next(g, n), index++) {
        if (opt && opt->progress) opt->progress(opt->progress_user, index, nn);
        LLVMModuleRef km = NULL;
        s = llvm_build_kernel(g, ctx, llvm_simd_bits(t->cpu, t->feat), n, index, "irk", diag, &km, &slots[nk], plan->n_slots + 2 + nk,
                              &der[nk]);
        if (s || !km) continue;
        knode[nk] = index;
        if (llvm_module_uses_blas(km)) *uses_blas = true; /* known before the cache is asked */
        char *text = LLVMPrintModuleToString(km);
        char key[IR_CACHE_KEY_CHARS] = "";
        IrCacheKeyInfo ki = {.ir = text, .ir_len = strlen(text), .pipeline = "llvm-kernel", .cpu = opt ? opt->cpu : NULL};
        s = ir_cache_key(&ki, key);
        LLVMDisposeMessage(text);
        char name[8 + IR_CACHE_KEY_CHARS];
        snprintf(name, sizeof name, "irk_%s", key);
        names[nk] = strdup(name);
        if (!names[nk]) s = IR_ENOMEM;
        bool dup = false;
        for (uint32_t i = 0; i < nk && !s && !dup; i++) dup = strcmp(names[i], name) == 0;
        if (s || dup) { /* the same kernel earlier in this model: one object for both */
            LLVMDisposeModule(km);
            nk += !s;
            continue;
        }
        objs->n_kernels++;
        void *cached = NULL;
        size_t clen = 0;
        bool taken = false;
        if (cdir && read_cache && ir_cache_lookup(cdir, key, &cached, &clen) == IR_CACHE_HIT && clen >= IRT_HEADER_SIZE &&
            memcmp((char *)cached + 16, KOBJ_TAG, sizeof KOBJ_TAG) == 0)
            s = objs_add_cached(objs, key, cached, clen, &taken);
        free(cached);
        if (taken || s) { /* not taken: compiled below, and its entry replaced */
            LLVMDisposeModule(km);
            nk += !s;
            continue;
        }
        LLVMSetValueName2(LLVMGetNamedFunction(km, "irk"), name, strlen(name));
        LLVMMemoryBufferRef ob = NULL;
        s = emit_module(t, km, diag, &ob);
        if (!s) s = objs_add(objs, LLVMGetBufferStart(ob), LLVMGetBufferSize(ob));
        /* a failed store only costs a rebuild next time */
        if (!s && cdir) {
            /* cache entries carry the artifact magic; a kernel's object follows a tagged header */
            size_t ol = LLVMGetBufferSize(ob);
            unsigned char *e = calloc(1, IRT_HEADER_SIZE + ol);
            if (e) {
                memcpy(e, IRT_MAGIC, 8);
                memcpy(e + 16, KOBJ_TAG, sizeof KOBJ_TAG);
                memcpy(e + IRT_HEADER_SIZE, LLVMGetBufferStart(ob), ol);
                IrDiag quiet;
                ir_diag_init(&quiet, NULL, NULL);
                if (ir_cache_store(cdir, key, e, IRT_HEADER_SIZE + ol, &quiet)) {}
                free(e);
            }
        }
        if (ob) LLVMDisposeMemoryBuffer(ob);
        nk++;
    }
    if (!s && opt && opt->progress) opt->progress(opt->progress_user, nn, nn);
    if (!s) {
        LLVMModuleRef em = LLVMModuleCreateWithNameInContext("irtool-entry", ctx);
        s = llvm_build_entry(em, nk, names, slots, diag);
        if (!s && opt && opt->syms) s = llvm_build_shapes(em, g, opt->syms, plan, diag);
        LLVMMemoryBufferRef ob = NULL;
        if (!s) s = emit_module(t, em, diag, &ob);
        else LLVMDisposeModule(em);
        if (!s) s = objs_add(objs, LLVMGetBufferStart(ob), LLVMGetBufferSize(ob));
        if (ob) LLVMDisposeMemoryBuffer(ob);
    }
    /* the buffers some kernel reads (read: one flag per value, or NULL) */
    for (uint32_t i = 0; read && slots && i < nk; i++)
        for (uint32_t j = 0; j < slots[i].n; j++)
            if (slots[i].v[j] <= ir_graph_num_values(g)) read[slots[i].v[j]] = true;
    for (uint32_t i = 0; names && slots && i <= nn; i++) free(names[i]), free(slots[i].v);
    free(names);
    free(slots);
    LLVMContextDispose(ctx);
    *n_kernels = nk;
    return s;
}

/* Links the objects into a shared object with the system linker; returns its bytes. */
/* quiet: the linker's messages go to /dev/null and its failure is IR_EVERIFY without a report
 * (a link of cached kernel objects, repeated with fresh ones when it fails). */
static IrStatus link_shared(const Objs *objs, bool quiet, IrDiag *diag, char **so, size_t *so_len) {
    char dir[] = "/tmp/irtool-compile-XXXXXX";
    if (!mkdtemp(dir)) {
        ir_diag_error(diag, "irtool compile: cannot create a temporary directory: %s", strerror(errno));
        return IR_EIO;
    }
    char so_path[64];
    snprintf(so_path, sizeof so_path, "%s/code.so", dir);
    char **argv = calloc(objs->n + 8, sizeof *argv), **paths = calloc(objs->n + 1, sizeof *paths);
    IrStatus s = argv && paths ? IR_OK : IR_ENOMEM;
    const char *cc = getenv("CC");
    if (!cc || !*cc) cc = "cc";
    uint32_t k = 0;
    if (!s) {
        argv[k++] = (char *)cc, argv[k++] = "-shared", argv[k++] = "-Wl,-z,noexecstack", argv[k++] = "-o";
        argv[k++] = so_path;
    }
    for (uint32_t i = 0; !s && i < objs->n; i++) {
        paths[i] = malloc(64);
        if (!paths[i]) {
            s = IR_ENOMEM;
            break;
        }
        snprintf(paths[i], 64, "%s/o%u.o", dir, i);
        s = ir_write_file_atomic(paths[i], objs->d[i], objs->len[i], diag);
        argv[k++] = paths[i];
    }
    if (!s) {
        argv[k++] = "-lm";
        argv[k] = NULL;
        pid_t pid;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        if (quiet) posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        int rc = posix_spawnp(&pid, cc, &fa, NULL, argv, environ), st = 0;
        posix_spawn_file_actions_destroy(&fa);
        if (rc) {
            ir_diag_error(diag, "irtool compile needs a system linker to build the artifact's code, but '%s' cannot be run: %s "
                          "(install a C compiler or set CC)", cc, strerror(rc));
            s = IR_EUNSUPPORTED;
        } else if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            if (!quiet) ir_diag_error(diag, "irtool compile: the system linker '%s' failed to link the artifact's code", cc);
            s = quiet ? IR_EVERIFY : IR_EUNSUPPORTED;
        }
    }
    if (!s) s = ir_read_file(so_path, diag, so, so_len);
    for (uint32_t i = 0; paths && i < objs->n; i++) {
        if (paths[i]) unlink(paths[i]);
        free(paths[i]);
    }
    free(paths);
    free(argv);
    unlink(so_path);
    rmdir(dir);
    return s;
}

static IrStatus binary_ir(const IrGraph *g, IrDiag *diag, char **data, size_t *len) {
    char path[] = "/tmp/irtool-ir-XXXXXX.irb";
    int fd = mkstemps(path, 4);
    if (fd < 0) {
        ir_diag_error(diag, "irtool compile: cannot create a temporary file: %s", strerror(errno));
        return IR_EIO;
    }
    close(fd);
    IrStatus s = ir_write_binary(g, path, diag);
    if (!s) s = ir_read_file(path, diag, data, len);
    unlink(path);
    return s;
}

static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void io_line(IrStrBuf *m, const IrGraph *g, const char *kind, uint32_t i, IrValueId v) {
    uint32_t r = ir_type_rank(g, ir_value_type(g, v));
    int64_t d[IR_MAX_RANK];
    if (r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) r = 0;
    for (uint32_t k = 0; k < r; k++) /* a symbolic dim (bound at run time) as -1 */
        if (!ir_expr_is_const(g, ir_type_dims(g, ir_value_type(g, v))[k], &d[k])) d[k] = -1;
    ir_strbuf_printf(m, "%s %u ", kind, i);
    buf_name(m, ir_value_name(g, v));
    ir_strbuf_printf(m, " %d %u", (int)ir_type_dtype(g, ir_value_type(g, v)), r);
    for (uint32_t k = 0; k < r; k++) ir_strbuf_printf(m, " %lld", (long long)d[k]);
    ir_strbuf_printf(m, " %u\n", v);
}

/* Static shapes on every graph input and output (what every target's artifact records). */
static IrStatus check_io_static(const IrGraph *g, IrDiag *diag) {
    for (uint32_t k = 0; k < ir_graph_num_inputs(g) + ir_graph_num_outputs(g); k++) {
        bool in = k < ir_graph_num_inputs(g);
        IrValueId v = in ? ir_graph_input(g, k) : ir_graph_output(g, k - ir_graph_num_inputs(g));
        uint32_t r;
        int64_t d[IR_MAX_RANK];
        if (ir_type_is_container(g, ir_value_type(g, v))) {
            ir_diag_error(diag, "irtool compile does not support graph %s '%s': unsupported type (a %s)",
                          in ? "input" : "output", ir_value_name(g, v),
                          ir_type_kind(g, ir_value_type(g, v)) == IR_TYPE_SEQ ? "sequence" : "optional");
            return IR_EUNSUPPORTED;
        }
        if (!lower_value_shape(g, v, &r, d)) {
            ir_diag_error(diag, "irtool compile needs static shapes, but graph %s '%s' has a symbolic or unknown shape "
                          "(give --input files to bind it)", in ? "input" : "output", ir_value_name(g, v));
            return IR_EUNSUPPORTED;
        }
    }
    return IR_OK;
}

/* One build; read_cache: kernel objects may come from the cache. When the link of cached objects
 * fails, their entries are evicted and *retry set (nothing reported): the caller builds again
 * without them, so a bad entry costs one rebuild, never a failing compile. */
static IrStatus build(const IrGraph *g, const IrGraph *source, const IrArtifactOptions *opt, bool read_cache, IrDiag *diag,
                      void **bytes, size_t *len, bool *retry) {
    *bytes = NULL;
    *len = 0;
    *retry = false;
    IrStatus s = opt && opt->syms ? IR_OK : check_io_static(g, diag);
    for (uint32_t i = 0; i < ir_graph_num_outputs(g) && !s; i++) { /* its data is a blob, not elements */
        IrValueId v = ir_graph_output(g, i);
        if (ir_value_kind(g, v) == IR_VALUE_CONST && ir_type_dtype(g, ir_value_type(g, v)) == IR_DTYPE_STRING) {
            ir_diag_error(diag, "irtool compile does not support a string constant as graph output '%s'", ir_value_name(g, v));
            s = IR_EUNSUPPORTED;
        }
    }
    if (s) return s;
    Objs objs = {0};
    Target tg = {0};
    char *so = NULL;
    size_t so_len = 0;
    uint32_t n_kernels = 0;
    bool uses_blas = false;
    LowerMemPlan plan = {0};
    uint32_t *knode = NULL;
    LlvmDerived *der = NULL;
    /* Constants no kernel reads are left out: Conv weights that the code holds packed or
     * transformed (stored instead as their kernels' derived data). Not with run-time shapes or a batch loop, whose
     * extra code reads buffers outside the kernels' slot lists. */
    bool plain = !(opt && (opt->syms || opt->batch));
    uint32_t nv = ir_graph_num_values(g);
    bool *read = plain ? calloc(nv + 1, sizeof *read) : NULL;
    IrValueId *omit = plain ? malloc((nv + 1) * sizeof *omit) : NULL;
    uint32_t n_omit = 0;
    if (plain && (!read || !omit)) s = IR_ENOMEM;
    if (!s) s = emit_objects(g, opt, read_cache, diag, &objs, &tg, &n_kernels, &uses_blas, &plan, &knode, read, &der);
    /* the kernels' compile-time data, stored and mapped like the weights */
    IrArtifactConst *extra = der ? calloc(n_kernels + 1, sizeof *extra) : NULL;
    uint32_t n_extra = 0;
    if (der && !extra) s = IR_ENOMEM;
    for (uint32_t i = 0; !s && i < n_kernels; i++)
        if (der[i].data) extra[n_extra++] = (IrArtifactConst){der[i].slot, der[i].data, der[i].len};
    for (uint32_t v = 1; !s && read && v <= nv; v++)
        if (!read[v] && plan.offset[v] < 0 && lower_value_const_data(g, v)) omit[n_omit++] = v;
    if (!s) s = link_shared(&objs, objs.n_cached > 0, diag, &so, &so_len);
    if (s == IR_EVERIFY && objs.n_cached) { /* n_cached: opt->cache_dir is set */
        char kdir[4096];
        snprintf(kdir, sizeof kdir, "%s/kernels", opt->cache_dir);
        for (uint32_t i = 0; i < objs.n_cached; i++) ir_cache_evict(kdir, objs.cached[i]);
        *retry = true;
    }
    if (!s && opt && opt->kernel_counts) opt->kernel_counts[0] = objs.n_kernels, opt->kernel_counts[1] = objs.n_cached;
    if (!s) {
        IrStrBuf t = {0};
        const char *feat = *tg.feat ? tg.feat : llvm_cpu_implied_features(tg.cpu);
        ir_strbuf_printf(&t, "triple %s\ncpu %s\nfeatures %s\n", tg.triple, tg.cpu, *feat ? feat : "-");
        buf_put(&t, "", 1); /* NUL: the pack reads it as a string */
        IrArtifactPack pk = {.pipeline = opt ? opt->pipeline : NULL, .target_lines = t.data, .plan = &plan,
                             .n_kernels = n_kernels, .uses_blas = uses_blas, .code = so, .code_len = so_len,
                             .batch = opt ? opt->batch : NULL, .batch_name = opt ? opt->batch_name : NULL,
                             .syms = opt ? opt->syms : NULL, .kernel_nodes = knode, .omit = omit, .n_omit = n_omit,
                             .extra = extra, .n_extra = n_extra};
        s = t.failed ? IR_ENOMEM : ir_artifact_pack(g, source, &pk, diag, bytes, len);
        free(t.data);
    }
    lower_plan_free(&plan);
    free(knode);
    free(read);
    free(omit);
    free(extra);
    for (uint32_t i = 0; der && i <= n_kernels; i++) free(der[i].data);
    free(der);
    free(so);
    objs_free(&objs);
    target_close(&tg);
    return s;
}

IrStatus ir_artifact_build(const IrGraph *g, const IrGraph *source, const IrArtifactOptions *opt, IrDiag *diag,
                           void **bytes, size_t *len) {
    bool retry = false;
    IrStatus s = build(g, source, opt, !(opt && opt->kernel_cache_refresh), diag, bytes, len, &retry);
    if (retry) {
        ir_diag_report(diag, IR_SEV_NOTE, NULL, 0, 0, NULL, 0,
                       "cached kernel objects did not link; evicted them from %s/kernels and compiled them again",
                       opt->cache_dir);
        s = build(g, source, opt, false, diag, bytes, len, &retry);
    }
    return s;
}

/* Values read by the nodes of region r and of the regions nested in them. */
static void mark_used(const IrGraph *g, IrRegionId r, bool *used) {
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n)) {
        for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) used[ir_node_operand(g, n, i)] = true;
        for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++) {
            IrRegionId b = ir_node_region_at(g, n, k);
            mark_used(g, b, used);
            for (uint32_t i = 0; i < ir_region_num_outputs(g, b); i++) used[ir_region_output(g, b, i)] = true;
        }
    }
}

IrStatus ir_artifact_pack(const IrGraph *g, const IrGraph *source, const IrArtifactPack *pk, IrDiag *diag, void **bytes,
                          size_t *len) {
    *bytes = NULL;
    *len = 0;
    IrStatus s = pk->syms ? IR_OK : check_io_static(g, diag);
    if (s) return s;
    const LowerMemPlan *pl = pk->plan;
    char *irb = NULL;
    size_t irb_len = 0;
    s = binary_ir(source ? source : g, diag, &irb, &irb_len);
    IrStrBuf m = {0}, c = {0}, f = {0};
    if (!s) {
        unsigned maj, min, pat;
        LLVMGetVersion(&maj, &min, &pat);
        ir_strbuf_printf(&m, "format %u\nirtool_version %s\nllvm_version %u.%u.%u\n", IRT_FORMAT_VERSION,
                   IRTOOL_VERSION_STRING, maj, min, pat);
        char addr[IR_CONTENT_ADDRESS_CHARS];
        ir_content_address(irb, irb_len, addr);
        ir_strbuf_printf(&m, "ir_hash %s\npipeline ", addr);
        buf_name(&m, pk->pipeline && *pk->pipeline ? pk->pipeline : "-");
        ir_strbuf_printf(&m, "\n%s", pk->target_lines ? pk->target_lines : "");
        /* the target's extra scratch goes after the planned workspace, as one more slot */
        size_t peak = (pl->peak + ALIGN - 1) / ALIGN * ALIGN;
        bool tail = pk->tail_bytes > 0;
        uint32_t slots = pl->n_slots + (tail || pk->n_extra || pk->syms ? 1 : 0); /* syms: the symbol values */
        for (uint32_t i = 0; i < pk->n_extra; i++)
            if (pk->extra[i].slot + 1 > slots) slots = pk->extra[i].slot + 1;
        /* CPU kernels reach the run's context (string bytes, errors) in slot runslot; CUDA code
         * has none and puts its derived constants there */
        bool strs = true;
        for (uint32_t i = 0; i < pk->n_extra; i++) strs &= pk->extra[i].slot != pl->n_slots + 1;
        if (slots < pl->n_slots + 2) slots = pl->n_slots + 2;
        ir_strbuf_printf(&m, "workspace %zu\nunplanned %zu\nslots %u\n", tail ? peak + (size_t)pk->tail_bytes : pl->peak,
                   pl->unplanned, slots);
        /* every slot an input, the workspace, a constant or the run binds: listed again at the
         * end (`bound`), so the loader can tell a binding line that changed from one that did not */
        bool *bound = calloc(slots + 1, sizeof *bound);
        if (!bound) s = IR_ENOMEM;
        ir_strbuf_printf(&m, "inputs %u\noutputs %u\n", ir_graph_num_inputs(g), ir_graph_num_outputs(g));
        bool seen[64] = {0};
        for (uint32_t k = 0; k < ir_graph_num_inputs(g) + ir_graph_num_outputs(g); k++) {
            bool in = k < ir_graph_num_inputs(g);
            IrValueId v = in ? ir_graph_input(g, k) : ir_graph_output(g, k - ir_graph_num_inputs(g));
            IrDType dt = ir_type_dtype(g, ir_value_type(g, v));
            if ((unsigned)dt < 64 && !seen[dt]) {
                seen[dt] = true;
                ir_strbuf_printf(&m, "dtype %d %s %zu\n", (int)dt, ir_dtype_name(dt), ir_dtype_size(dt));
            }
        }
        for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) io_line(&m, g, "input", i, ir_graph_input(g, i));
        for (uint32_t i = 0; bound && i < ir_graph_num_inputs(g); i++) bound[ir_graph_input(g, i)] = true;
        for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) io_line(&m, g, "output", i, ir_graph_output(g, i));
        const IrBatchPlan *bp = pk->batch;
        if (bp && bp->sym) { /* symbolic batch: compiled for one sample, run once per sample */
            ir_strbuf_printf(&m, "batch ");
            buf_name(&m, pk->batch_name ? pk->batch_name : "B");
            ir_strbuf_printf(&m, " %lld %lld %lld\n", (long long)bp->lo, (long long)bp->hi, (long long)bp->div);
            for (uint32_t i = 0; i < bp->n_in; i++)
                if (bp->in_batched[i]) ir_strbuf_printf(&m, "batched input %u\n", i);
            for (uint32_t i = 0; i < bp->n_out; i++)
                if (bp->out_batched[i]) ir_strbuf_printf(&m, "batched output %u\n", i);
        }
        if (strs) ir_strbuf_printf(&m, "runslot %u\n", pl->n_slots + 1);
        if (strs && bound) bound[pl->n_slots + 1] = true;
        const IrSymPlan *sp = pk->syms;
        if (sp) { /* symbolic dims: the symbol values go to slot symslot; bound from input dims */
            ir_strbuf_printf(&m, "symslot %u\n", pl->n_slots);
            if (bound) bound[pl->n_slots] = true;
            for (uint32_t i = 0; i < sp->n; i++) {
                ir_strbuf_printf(&m, "symbol %u ", sp->sym[i]);
                buf_name(&m, ir_sym_name(g, sp->sym[i]));
                ir_strbuf_printf(&m, " %lld %lld %lld\n", (long long)sp->lo[i], (long long)sp->hi[i], (long long)sp->div[i]);
            }
            for (uint32_t i = 0; i < sp->n_eq; i++) { /* checked through irt_shapes */
                IrConstraint c = {.kind = IR_CONSTRAINT_EQ, .a = sp->eq_a[i], .b = sp->eq_b[i]};
                IrStrBuf t = {0};
                ir_constraint_print(g, &c, &t);
                ir_strbuf_printf(&m, "symcheck %u ", i);
                buf_name(&m, t.data ? t.data : "?");
                ir_strbuf_printf(&m, "\n");
                free(t.data);
            }
            for (uint32_t i = 0; i < sp->n_data; i++) { /* written by the kernel that counts them */
                ir_strbuf_printf(&m, "symdata %u %lld ", sp->data_sym[i], (long long)sp->data_hi[i]);
                buf_name(&m, ir_sym_name(g, sp->data_sym[i]));
                ir_strbuf_printf(&m, "\n");
            }
            for (uint32_t i = 0; i < sp->n_def; i++) { /* computed by irt_shapes */
                ir_strbuf_printf(&m, "symdef %u ", sp->def_sym[i]);
                buf_name(&m, ir_sym_name(g, sp->def_sym[i]));
                ir_strbuf_printf(&m, "\n");
            }
            for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) { /* every input dim that is a symbol */
                IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
                for (uint32_t k = 0; k < ir_type_rank(g, t) && k < IR_MAX_RANK; k++)
                    if (ir_expr_kind(g, ir_type_dims(g, t)[k]) == IR_EXPR_SYM)
                        ir_strbuf_printf(&m, "insym %u %u %u\n", i, k, ir_expr_sym_id(g, ir_type_dims(g, t)[k]));
            }
            for (uint32_t i = 0; i < sp->n; i++) { /* symbols an input's values bind (Tile repeats, ...) */
                if (!sp->by_value[i]) continue;
                if (sp->mul_sym[i] || sp->mul_const[i] >= 0) /* trunc(entry * D): after D's own binding line */
                    ir_strbuf_printf(&m, "insymmul %u %u %u %u %lld\n", sp->in[i], sp->dim[i], sp->sym[i], sp->mul_sym[i],
                                     (long long)(sp->mul_sym[i] ? 0 : sp->mul_const[i]));
                else ir_strbuf_printf(&m, "insymval %u %u %u\n", sp->in[i], sp->dim[i], sp->sym[i]);
            }
        }
        ir_strbuf_printf(&m, "kernels %u\nblas %d\n", pk->n_kernels, pk->uses_blas ? 1 : 0);
        uint32_t t = 0, nv = ir_graph_num_values(g);
        for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n), t++) {
            IrValueId r = ir_node_num_results(g, n) ? ir_node_result(g, n, 0) : 0;
            ir_strbuf_printf(&m, "node %u %s ", t, ir_op_name(ir_node_op(g, n)));
            buf_name(&m, r ? ir_value_name(g, r) : ir_node_name(g, n));
            if (pl->offset[nv + 1 + t] >= 0)
                ir_strbuf_printf(&m, " scratch@%lld", (long long)pl->offset[nv + 1 + t]);
            else if (pl->offset[nv + 1 + t] == LOWER_OFF_DYN)
                ir_strbuf_printf(&m, " scratch@run");
            ir_strbuf_printf(&m, "\n");
        }
        for (uint32_t i = 0; pk->kernel_nodes && i < pk->n_kernels; i++) /* kernel call i computes node k */
            ir_strbuf_printf(&m, "kcall %u %u\n", i, pk->kernel_nodes[i]);
        /* ws SLOT OFFSET BYTES: the loader checks each against the workspace and the outputs'
         * sizes against their slots */
        uint32_t n_ws = 0, n_const = 0;
        for (uint32_t v = 1; v < pl->n_slots; v++)
            if (pl->offset[v] >= 0) {
                ir_strbuf_printf(&m, "ws %u %lld %lld\n", v, (long long)pl->offset[v], (long long)pl->bytes[v]), n_ws++;
                if (bound) bound[v] = true;
            }
        if (tail) ir_strbuf_printf(&m, "ws %u %zu %lld\n", pl->n_slots, peak, (long long)pk->tail_bytes), n_ws++;
        if (tail && bound) bound[pl->n_slots] = true;
        ir_strbuf_printf(&m, "wss %u\n", n_ws);
        /* wsrun K SLOT: block K of those placed at run time (irt_shapes gives its offset and bytes) */
        for (uint32_t k = 0; k < pl->n_dyn; k++) {
            ir_strbuf_printf(&m, "wsrun %u %u\n", k, pl->dyn[k].slot);
            if (bound) bound[pl->dyn[k].slot] = true;
        }
        if (pl->n_dyn) ir_strbuf_printf(&m, "wsruns %u\n", pl->n_dyn);
        /* constants: weights, Constant nodes, and ConstantOfShape results filled now; only those
         * some node (or a graph output) reads: folding leaves the originals of folded weights */
        bool *used = calloc(nv + 1, sizeof *used);
        if (!used) s = IR_ENOMEM;
        if (used) {
            mark_used(g, IR_ROOT_REGION, used);
            for (uint32_t i = 0; i < pk->n_omit; i++)
                if (pk->omit[i] <= nv) used[pk->omit[i]] = false;
            for (uint32_t i = 0; i < ir_graph_num_outputs(g); i++) used[ir_graph_output(g, i)] = true;
        }
        for (uint32_t v = 1; v <= nv && !s; v++) {
            if (pl->offset[v] >= 0 || pl->offset[v] == LOWER_OFF_DYN || !used[v]) continue;
            const void *data = lower_value_const_data(g, v);
            size_t nb = lower_value_nbytes(g, v);
            unsigned char *filled = NULL;
            if (!data && ir_value_kind(g, v) == IR_VALUE_RESULT &&
                ir_node_op(g, ir_value_def_node(g, v)) == IR_OP_CONSTANT_OF_SHAPE) {
                IrNodeId n = ir_value_def_node(g, v);
                size_t es = ir_dtype_size(ir_type_dtype(g, ir_value_type(g, v)));
                unsigned char val[16] = {0};
                IrAttrValue av;
                if (ir_node_attr(g, n, "value", &av) && av.kind == IR_ATTR_TENSOR) {
                    if (ir_const_nbytes(g, av.tensor) != es || es > sizeof val) {
                        ir_diag_at_node(diag, g, n, IR_SEV_ERROR,
                                        "the llvm backend does not support ConstantOfShape with this value yet");
                        s = IR_EUNSUPPORTED;
                        break;
                    }
                    memcpy(val, ir_const_data(g, av.tensor), es);
                }
                filled = malloc(nb ? nb : 1);
                if (!filled) {
                    s = IR_ENOMEM;
                    break;
                }
                for (size_t i = 0; i + es <= nb; i += es) memcpy(filled + i, val, es);
                data = filled;
            }
            if (!data) continue;
            buf_pad(&c);
            ir_strbuf_printf(&m, "const %u %zu %zu\n", v, c.len, nb);
            n_const++;
            if (bound && v <= slots) bound[v] = true;
            buf_put(&c, data, nb);
            free(filled);
        }
        free(used);
        for (uint32_t i = 0; i < pk->n_extra && !s; i++) {
            buf_pad(&c);
            ir_strbuf_printf(&m, "const %u %zu %zu\n", pk->extra[i].slot, c.len, pk->extra[i].len);
            n_const++;
            if (bound && pk->extra[i].slot <= slots) bound[pk->extra[i].slot] = true;
            buf_put(&c, pk->extra[i].data, pk->extra[i].len);
        }
        ir_strbuf_printf(&m, "consts %u\nbound", n_const);
        for (uint32_t v = 0; bound && v <= slots; v++)
            if (bound[v]) ir_strbuf_printf(&m, " %u", v);
        ir_strbuf_printf(&m, "\n");
        free(bound);
        if (pk->extra_lines) ir_strbuf_printf(&m, "%s", pk->extra_lines);
        buf_pad(&c);
        if (m.failed || c.failed) s = IR_ENOMEM;
    }
    if (!s) {
        unsigned char hdr[IRT_HEADER_SIZE] = {0};
        memcpy(hdr, IRT_MAGIC, 8);
        hdr[8] = IRT_FORMAT_VERSION & 0xff;
        hdr[12] = IRT_HEADER_SIZE;
        uint64_t off = IRT_HEADER_SIZE, lens[4] = {m.len, c.len, pk->code_len, irb_len};
        uint64_t offs[4];
        for (int i = 0; i < 4; i++) {
            off = (off + ALIGN - 1) / ALIGN * ALIGN;
            offs[i] = off;
            put64(hdr + 16 + 16 * i, off);
            put64(hdr + 24 + 16 * i, lens[i]);
            off += lens[i];
        }
        buf_put(&f, hdr, sizeof hdr);
        const void *secs[4] = {m.data, c.data, pk->code, irb};
        for (int i = 0; i < 4; i++) {
            buf_pad(&f);
            buf_put(&f, secs[i], lens[i]);
            if (!f.failed && f.len != offs[i] + lens[i]) s = IR_EINVAL;
        }
        if (f.failed) s = IR_ENOMEM;
        else if (!s) irt_artifact_put_checksum((unsigned char *)f.data, f.len);
    }
    free(m.data);
    free(c.data);
    free(irb);
    if (s) {
        free(f.data);
        return s;
    }
    *bytes = f.data;
    *len = f.len;
    return IR_OK;
}

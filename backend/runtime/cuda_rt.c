/* The CUDA part of libirtool-runtime: loads the driver (libcuda.so.1) and cuBLASLt with dlopen,
 * so the runtime links nothing CUDA and starts on machines without a GPU, where it says so in
 * one line. Load: primary context of device 0, cuModuleLoadData (cubin; the PTX is JIT-compiled
 * when the cubin does not fit the GPU), constants copied to device memory once, cuBLASLt
 * descriptors and algorithms chosen once per GEMM step. Run: a stream per call, one device
 * allocation per call (workspace planned like the CPU's, inputs, cuBLASLt workspace), the steps
 * replayed in order, outputs copied back, the stream synchronized. The declarations below are
 * the subset of cuda.h / cublasLt.h used (checked against the headers by tests/cuda/test_cuda_codegen.c).
 *
 * Manifest lines of CUDA artifacts (besides load.c's; SLOT:OFF = buffer and byte offset):
 *   triple nvptx64-nvidia-cuda | target cuda:sm_90 | sm 90 (90a) | arch | ptx_isa | cuda_toolkit
 *   min_driver 13000 (cuDriverGetVersion) | cublaslt MAJOR (0 = none) | fp8_ptx 0/1
 *   cubin OFF LEN | ptx OFF LEN            (inside the code section; the PTX ends with a NUL)
 *   kernel NAME node I block B rows|stride params P regs R smem S stack K
 *   step I kernel NAME WORK SLOT:OFF...    (stride: WORK items, grid capped at 32 blocks/SM;
 *                                           rows: one block per row, WORK rows)
 *   step I copy DST SRC BYTES | step I memset DST VALUE BYTES
 *   step I gemm DT TA TB M N K LDA LDB LDC BATCH SA SB SC ALPHA A B C ASCALE BSCALE BIAS
 *        (row-major, DT f32|tf32|bf16|e4m3, strides in elements, slots 0 = none)
 * Steps run in file order on the call's stream.
 * Symbolic shapes (load.c binds the symbols from the inputs and checks them): a size written =K
 * is formula K, evaluated per run from the symbol values:
 *   fx K TOKEN...   postfix: integers, sN (symbol N), + - * / % and < > (min, max)
 *   fxdef SYM SIZE | fxcheck SIZE SIZE | fxout I SIZE... | fxrun K SLOT ALIAS BYTES NPRED PRED...
 * irt_cuda_shapes gives load.c what a CPU artifact's irt_shapes does; every kernel then also
 * takes the symbol array (copied to the device per run) in slot `symslot`.
 */
#include "backend/runtime/cuda_api.h"
#include "backend/runtime/cuda_rt.h"

#include <dlfcn.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- driver API subset (cuda.h) --------------------------------------------------------------- */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;
typedef struct CUevent_st *CUevent;

/* ---- cuBLASLt subset (cublasLt.h, library_types.h) ------------------------------------------------ */
typedef IrtLtStatus cublasStatus_t;
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque *cublasLtMatmulPreference_t;
#define LT_WORKSPACE (32u << 20)

typedef struct Drv {
    void *dl;
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **, void **);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
} Drv;

typedef struct Lt {
    void *dl;
    cublasStatus_t (*Create)(cublasLtHandle_t *);
    cublasStatus_t (*Destroy)(cublasLtHandle_t);
    cublasStatus_t (*DescCreate)(cublasLtMatmulDesc_t *, int, int);
    cublasStatus_t (*DescSet)(cublasLtMatmulDesc_t, int, const void *, size_t);
    cublasStatus_t (*DescDestroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*LayoutCreate)(cublasLtMatrixLayout_t *, int, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*LayoutSet)(cublasLtMatrixLayout_t, int, const void *, size_t);
    cublasStatus_t (*LayoutDestroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*PrefCreate)(cublasLtMatmulPreference_t *);
    cublasStatus_t (*PrefSet)(cublasLtMatmulPreference_t, int, const void *, size_t);
    cublasStatus_t (*PrefDestroy)(cublasLtMatmulPreference_t);
    cublasStatus_t (*Heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                IrtLtHeuristic *, int *);
    cublasStatus_t (*Matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t,
                             const void *, cublasLtMatrixLayout_t, const void *, const void *, cublasLtMatrixLayout_t,
                             void *, cublasLtMatrixLayout_t, const IrtLtAlgo *, void *, size_t, CUstream);
} Lt;

typedef struct Arg {
    uint32_t slot;
    int64_t off;
} Arg;

/* A formula: postfix tokens (op 'c' a constant v, 's' symbol v, else the operator). */
typedef struct FxTok {
    char op;
    int64_t v;
} FxTok;
typedef struct Fx {
    uint32_t n;
    FxTok *t;
} Fx;
#define FX_STACK 64

typedef struct Gemm {
    int dt; /* 0 f32, 1 bf16, 2 e4m3, 3 f32 with TF32 tensor cores */
    int ta, tb;
    long long m, n, k, lda, ldb, ldc, batch, sa, sb, sc;
    float alpha;
    Arg a, b, c;
    uint32_t as_slot, bs_slot, bias_slot;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t l1, l2, ld;
    IrtLtAlgo algo;
} Gemm;

enum { ST_KERNEL, ST_COPY, ST_MEMSET, ST_GEMM };

typedef struct Step {
    int kind;
    uint32_t kernel, n_args;
    Arg *args;
    long long work, bytes;
    int value;
    Gemm *gemm;
} Step; /* sizes below 0: formula -1 - size (symbolic shapes) */

typedef struct Run {
    uint32_t slot;
    int32_t alias;
    long long bytes;
    uint32_t n_pred, *pred;
} Run;

typedef struct Kern {
    char name[64];
    unsigned block, n_params;
    int rows;
    CUfunction fn;
} Kern;

struct IrtCuda {
    Drv d;
    Lt lt;
    bool have_lt;
    cublasLtHandle_t lth;
    CUdevice dev;
    CUcontext ctx;
    bool ctx_retained;
    CUmodule mod;
    CUdeviceptr consts;
    int sms;
    uint32_t n_slots;
    int64_t *ws_off;
    uint64_t *const_off;
    size_t workspace;
    Kern *k;
    uint32_t n_k;
    Step *s;
    uint32_t n_s;
    pthread_mutex_t fp8_lock; /* GEMMs bind this run's scale/bias addresses into a shared descriptor */
    bool lock_init;
    /* symbolic shapes */
    Fx *fx;
    uint32_t n_fx;
    bool symbolic;
    uint32_t symslot, n_def, n_check, n_out, n_run;
    uint32_t def_sym[64];
    long long def_val[64], check[64][2];
    uint32_t out_rank[64];
    long long out_dim[64][8];
    Run *run;
};

bool irt_cuda_manifest(const char *m) {
    char t[128];
    return irt_manifest_get(m, "triple", t, sizeof t) && strncmp(t, "nvptx", 5) == 0;
}

/* ---- dlopen ------------------------------------------------------------------------------------------ */

#define SYM(lib, field, name)                                                                                      \
    do {                                                                                                           \
        void *p_ = dlsym((lib)->dl, name);                                                                         \
        if (!p_) {                                                                                                 \
            irt_set_err(err, cap, "the CUDA library lacks %s (too old?)", name);                                   \
            return -1;                                                                                             \
        }                                                                                                          \
        memcpy(&(lib)->field, &p_, sizeof p_);                                                                     \
    } while (0)

static int drv_open(Drv *d, char *err, size_t cap) {
    memset(d, 0, sizeof *d);
    const char *name = getenv("IRTOOL_LIBCUDA");
    if (!name || !*name) name = "libcuda.so.1";
    d->dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!d->dl) {
        const char *why = dlerror();
        irt_set_err(err, cap, "no CUDA driver/GPU found: %s cannot be loaded (%s); this artifact needs an NVIDIA GPU and its driver",
                name, why ? why : "?");
        return -1;
    }
    SYM(d, Init, "cuInit");
    SYM(d, DriverGetVersion, "cuDriverGetVersion");
    SYM(d, DeviceGetCount, "cuDeviceGetCount");
    SYM(d, DeviceGet, "cuDeviceGet");
    SYM(d, DeviceGetAttribute, "cuDeviceGetAttribute");
    SYM(d, DeviceGetName, "cuDeviceGetName");
    SYM(d, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(d, DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SYM(d, CtxSetCurrent, "cuCtxSetCurrent");
    SYM(d, ModuleLoadData, "cuModuleLoadData");
    SYM(d, ModuleUnload, "cuModuleUnload");
    SYM(d, ModuleGetFunction, "cuModuleGetFunction");
    SYM(d, MemAlloc, "cuMemAlloc_v2");
    SYM(d, MemFree, "cuMemFree_v2");
    SYM(d, MemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(d, MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    SYM(d, MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
    SYM(d, MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
    SYM(d, MemsetD8Async, "cuMemsetD8Async");
    SYM(d, StreamCreate, "cuStreamCreate");
    SYM(d, StreamDestroy, "cuStreamDestroy_v2");
    SYM(d, StreamSynchronize, "cuStreamSynchronize");
    SYM(d, LaunchKernel, "cuLaunchKernel");
    SYM(d, GetErrorName, "cuGetErrorName");
    SYM(d, EventCreate, "cuEventCreate");
    SYM(d, EventRecord, "cuEventRecord");
    SYM(d, EventSynchronize, "cuEventSynchronize");
    SYM(d, EventDestroy, "cuEventDestroy_v2");
    if (dlsym(d->dl, "cuEventElapsedTime_v2")) SYM(d, EventElapsedTime, "cuEventElapsedTime_v2");
    else SYM(d, EventElapsedTime, "cuEventElapsedTime");
    return 0;
}

/* dlopen of one candidate path; the path is added to the list of tried ones. */
static void *lt_try(const char *path, char *tried, size_t tcap) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    size_t k = strlen(tried);
    if (!h && k + 1 < tcap) snprintf(tried + k, tcap - k, "%s%s", k ? ", " : "", path);
    return h;
}

/* The cuBLASLt library, searched in this order: IRTOOL_CUBLASLT (a path; IRTOOL_LIBCUBLASLT is
 * the older name) alone when set; else for the major version the artifact was built against,
 * then 13, then 12: the loader's search path, the toolkit's lib64 ($CUDA_HOME, /usr/local/cuda),
 * then the nvidia/cublas/lib (nvidia/cu13/lib for CUDA 13 wheels) folder of a Python
 * environment: $VIRTUAL_ENV, $CONDA_PREFIX, the prefix of each python3 on $PATH, ~/.local and
 * the system's site- and dist-packages. GPU hosts often have cuBLAS only inside PyTorch's
 * environment. */
static void *lt_search(int major, char *tried, size_t tcap) {
    const char *env = getenv("IRTOOL_CUBLASLT");
    if (!env || !*env) env = getenv("IRTOOL_LIBCUBLASLT");
    if (env && *env) return lt_try(env, tried, tcap);
    int majors[3] = {major, 13, 12};
    char prefixes[8][1024];
    int np = 0;
    const char *ve = getenv("VIRTUAL_ENV"), *cp = getenv("CONDA_PREFIX"), *home = getenv("HOME");
    if (ve && *ve && np < 8) snprintf(prefixes[np++], sizeof prefixes[0], "%s", ve);
    if (cp && *cp && np < 8) snprintf(prefixes[np++], sizeof prefixes[0], "%s", cp);
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p && np < 6;) { /* the prefix of each python3 on $PATH */
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char py[1100];
        snprintf(py, sizeof py, "%.*s/python3", (int)n, p);
        if (n && n < 1000 && access(py, X_OK) == 0) {
            snprintf(prefixes[np], sizeof prefixes[0], "%.*s/..", (int)n, p);
            np++;
        }
        p = e ? e + 1 : p + n;
    }
    if (home && *home && np < 8) snprintf(prefixes[np++], sizeof prefixes[0], "%s/.local", home);
    if (np < 8) snprintf(prefixes[np++], sizeof prefixes[0], "/usr/local");
    if (np < 8) snprintf(prefixes[np++], sizeof prefixes[0], "/usr");
    for (int m = 0; m < 3; m++) {
        if (majors[m] <= 0 || (m > 0 && majors[m] == majors[0]) || (m == 2 && majors[2] == majors[1])) continue;
        char name[64], p[1400];
        snprintf(name, sizeof name, "libcublasLt.so.%d", majors[m]);
        void *h = lt_try(name, tried, tcap);
        const char *ch = getenv("CUDA_HOME");
        if (!h && ch && *ch && strcmp(ch, "/usr/local/cuda") != 0 && (snprintf(p, sizeof p, "%s/lib64/%s", ch, name), 1))
            h = lt_try(p, tried, tcap);
        if (!h && (snprintf(p, sizeof p, "/usr/local/cuda/lib64/%s", name), 1)) h = lt_try(p, tried, tcap);
        for (int i = 0; !h && i < np; i++) {
            char pat[1400];
            snprintf(pat, sizeof pat, "%.1000s/lib/python3*/*-packages/nvidia/{cublas,cu%d}/lib/%s", prefixes[i], majors[m], name);
            glob_t gl;
            if (glob(pat, GLOB_BRACE | GLOB_NOSORT, NULL, &gl) == 0)
                for (size_t k = 0; !h && k < gl.gl_pathc; k++) h = lt_try(gl.gl_pathv[k], tried, tcap);
            else if (strlen(tried) + 1 < tcap) /* nothing there: the pattern is what was searched */
                snprintf(tried + strlen(tried), tcap - strlen(tried), "%s%s", *tried ? ", " : "", pat);
            globfree(&gl);
        }
        if (h) return h;
    }
    return NULL;
}

static int lt_open(Lt *l, int major, char *err, size_t cap) {
    memset(l, 0, sizeof *l);
    char tried[2048] = "";
    l->dl = lt_search(major, tried, sizeof tried);
    if (!l->dl) {
        irt_set_err(err, cap, "this artifact's GEMMs need cuBLASLt (libcublasLt.so.%d, or 13/12), which was not found; "
                    "set IRTOOL_CUBLASLT to its path. Tried: %s", major, tried);
        return -1;
    }
    SYM(l, Create, "cublasLtCreate");
    SYM(l, Destroy, "cublasLtDestroy");
    SYM(l, DescCreate, "cublasLtMatmulDescCreate");
    SYM(l, DescSet, "cublasLtMatmulDescSetAttribute");
    SYM(l, DescDestroy, "cublasLtMatmulDescDestroy");
    SYM(l, LayoutCreate, "cublasLtMatrixLayoutCreate");
    SYM(l, LayoutSet, "cublasLtMatrixLayoutSetAttribute");
    SYM(l, LayoutDestroy, "cublasLtMatrixLayoutDestroy");
    SYM(l, PrefCreate, "cublasLtMatmulPreferenceCreate");
    SYM(l, PrefSet, "cublasLtMatmulPreferenceSetAttribute");
    SYM(l, PrefDestroy, "cublasLtMatmulPreferenceDestroy");
    SYM(l, Heuristic, "cublasLtMatmulAlgoGetHeuristic");
    SYM(l, Matmul, "cublasLtMatmul");
    return 0;
}

static const char *cu_name(const Drv *d, CUresult r) {
    const char *s = NULL;
    if (d->GetErrorName && d->GetErrorName(r, &s) == IRT_CUDA_SUCCESS && s) return s;
    return "unknown CUDA error";
}

#define CK(call, what)                                                                                             \
    do {                                                                                                           \
        CUresult r_ = (call);                                                                                      \
        if (r_ != IRT_CUDA_SUCCESS) {                                                                              \
            irt_set_err(err, cap, "%s failed: %s (%d)", what, cu_name(&cu->d, r_), r_);                            \
            goto fail;                                                                                             \
        }                                                                                                          \
    } while (0)

/* ---- preflight ------------------------------------------------------------------------------------- */

/* Device 0's compute capability (major*10+minor) and name; -1 with a reason. */
static int device_info(Drv *d, int *cc, char *name, size_t ncap, char *err, size_t cap) {
    CUresult r = d->Init(0);
    if (r != IRT_CUDA_SUCCESS) {
        irt_set_err(err, cap, "no CUDA driver/GPU found: cuInit failed with %s (%d)", cu_name(d, r), r);
        return -1;
    }
    int n = 0;
    if (d->DeviceGetCount(&n) != IRT_CUDA_SUCCESS || n < 1) {
        irt_set_err(err, cap, "no CUDA driver/GPU found: the driver reports no GPU");
        return -1;
    }
    CUdevice dev;
    int maj = 0, min = 0;
    if (d->DeviceGet(&dev, 0) || d->DeviceGetAttribute(&maj, IRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
        d->DeviceGetAttribute(&min, IRT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)) {
        irt_set_err(err, cap, "no CUDA driver/GPU found: cannot query GPU 0");
        return -1;
    }
    if (d->DeviceGetName(name, (int)ncap, dev) != IRT_CUDA_SUCCESS) snprintf(name, ncap, "GPU 0");
    *cc = maj * 10 + min;
    return 0;
}

static int check_target(Drv *d, const char *m, char *err, size_t cap) {
    char buf[64], name[128];
    int cc;
    if (device_info(d, &cc, name, sizeof name, err, cap)) return -1;
    int ver = 0, need = 0;
    if (irt_manifest_get(m, "min_driver", buf, sizeof buf)) need = atoi(buf);
    d->DriverGetVersion(&ver);
    if (ver < need) {
        irt_set_err(err, cap, "the CUDA driver is too old: it supports CUDA %d.%d, the artifact needs %d.%d (update the NVIDIA driver)",
                ver / 1000, ver % 1000 / 10, need / 1000, need % 1000 / 10);
        return -1;
    }
    irt_manifest_get(m, "sm", buf, sizeof buf);
    int sm = atoi(buf);
    bool arch_a = strchr(buf, 'a') != NULL;
    if (cc < sm || (arch_a && cc != sm)) {
        irt_set_err(err, cap, "the GPU is too old for this artifact: %s is sm_%d, the artifact was compiled for sm_%s%s", name, cc, buf,
                arch_a ? " (arch-specific: that GPU only)" : "");
        return -1;
    }
    return 0;
}

int irt_cuda_preflight(const char *m, char *err, size_t cap) {
    Drv d;
    int rc = drv_open(&d, err, cap);
    if (!rc) rc = check_target(&d, m, err, cap);
    char buf[16];
    if (!rc && irt_manifest_get(m, "cublaslt", buf, sizeof buf) && atoi(buf) > 0) {
        Lt l;
        rc = lt_open(&l, atoi(buf), err, cap);
        if (l.dl) dlclose(l.dl);
    }
    if (d.dl) dlclose(d.dl);
    return rc;
}

/* ---- manifest: kernels and steps ------------------------------------------------------------------- */

static int parse_arg(const char **p, Arg *a) {
    char *e;
    a->slot = (uint32_t)strtoul(*p, &e, 10);
    if (e == *p || *e != ':') return -1;
    const char *q = e + 1;
    a->off = strtoll(q, &e, 10);
    if (e == q || a->off < 0) return -1;
    *p = e;
    return 0;
}

/* A size: a number >= 0, or =K (formula K, stored as -1 - K). */
static int parse_num(const IrtCuda *cu, const char **p, long long *v) {
    while (**p == ' ') (*p)++;
    char *e;
    if (**p == '=') {
        unsigned long long k = strtoull(*p + 1, &e, 10);
        if (e == *p + 1 || k >= cu->n_fx) return -1;
        *v = -1 - (long long)k;
    } else {
        *v = strtoll(*p, &e, 10);
        if (e == *p || *v < 0) return -1;
    }
    *p = e;
    return 0;
}

static long long fx_val(const long long *fxv, long long x) { return x >= 0 ? x : fxv[-1 - x]; }

/* Formula f under the symbol values sym[0 .. n_sym); -1 on a bad one (division by zero, an
 * unknown symbol, a stack out of bounds). */
static int fx_eval(const Fx *f, const int64_t *sym, uint32_t n_sym, long long *out) {
    long long st[FX_STACK];
    uint32_t sp = 0;
    for (uint32_t i = 0; i < f->n; i++) {
        const FxTok *t = &f->t[i];
        if (t->op == 'c' || t->op == 's') {
            if (sp == FX_STACK || (t->op == 's' && (uint64_t)t->v >= n_sym)) return -1;
            st[sp++] = t->op == 'c' ? t->v : sym[t->v];
            continue;
        }
        if (sp < 2) return -1;
        long long b = st[--sp], a = st[sp - 1], r;
        switch (t->op) {
        case '+': r = a + b; break;
        case '-': r = a - b; break;
        case '*': r = a * b; break;
        case '/': if (!b) return -1; r = a / b; break;
        case '%': if (!b) return -1; r = a % b; break;
        case '<': r = a < b ? a : b; break;
        case '>': r = a > b ? a : b; break;
        default: return -1;
        }
        st[sp - 1] = r;
    }
    if (sp != 1) return -1;
    *out = st[0];
    return 0;
}

static int parse_fx(Fx *f, const char *p) {
    f->t = calloc(strlen(p) / 2 + 2, sizeof *f->t);
    if (!f->t) return -1;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        char *e;
        FxTok *t = &f->t[f->n];
        if ((*p >= '0' && *p <= '9') || (*p == '-' && p[1] >= '0' && p[1] <= '9')) {
            t->op = 'c';
            t->v = strtoll(p, &e, 10);
        } else if (*p == 's') {
            t->op = 's';
            t->v = (long long)strtoull(p + 1, &e, 10);
            if (e == p + 1) return -1;
        } else if (strchr("+-*/%<>", *p) && (p[1] == ' ' || !p[1])) {
            t->op = *p;
            e = (char *)p + 1;
        } else return -1;
        f->n++;
        p = e;
    }
    return f->n ? 0 : -1;
}

static int find_kernel(const IrtCuda *cu, const char *name) {
    for (uint32_t i = 0; i < cu->n_k; i++)
        if (strcmp(cu->k[i].name, name) == 0) return (int)i;
    return -1;
}

static int parse_step(IrtCuda *cu, const char *l, Step *s) {
    unsigned node;
    char kind[16];
    int pos = 0;
    if (sscanf(l, "step %u %15s%n", &node, kind, &pos) != 2) return -1;
    const char *p = l + pos;
    char *e;
    if (strcmp(kind, "kernel") == 0) {
        char name[64];
        int k = 0;
        if (sscanf(p, " %63s%n", name, &k) != 1) return -1;
        p += k;
        int ki = find_kernel(cu, name);
        if (ki < 0 || parse_num(cu, &p, &s->work)) return -1;
        s->kind = ST_KERNEL;
        s->kernel = (uint32_t)ki;
        s->args = calloc(32, sizeof *s->args);
        if (!s->args) return -1;
        while (*p == ' ' && s->n_args < 32) {
            p++;
            if (parse_arg(&p, &s->args[s->n_args++])) return -1;
        }
        return 0;
    }
    if (strcmp(kind, "copy") == 0 || strcmp(kind, "memset") == 0) {
        bool copy = kind[0] == 'c';
        s->kind = copy ? ST_COPY : ST_MEMSET;
        s->n_args = copy ? 2 : 1;
        s->args = calloc(2, sizeof *s->args);
        if (!s->args) return -1;
        for (uint32_t i = 0; i < s->n_args; i++) {
            if (*p++ != ' ' || parse_arg(&p, &s->args[i])) return -1;
        }
        if (!copy) {
            s->value = (int)strtol(p, &e, 10);
            if (e == p) return -1;
            p = e;
        }
        return parse_num(cu, &p, &s->bytes);
    }
    if (strcmp(kind, "gemm") == 0) {
        Gemm *g = calloc(1, sizeof *g);
        if (!g) return -1;
        s->kind = ST_GEMM;
        s->gemm = g;
        char dt[8];
        double alpha;
        int k = 0;
        if (sscanf(p, " %7s %d %d%n", dt, &g->ta, &g->tb, &k) != 3) return -1;
        p += k;
        long long *f[10] = {&g->m, &g->n, &g->k, &g->lda, &g->ldb, &g->ldc, &g->batch, &g->sa, &g->sb, &g->sc};
        for (int q = 0; q < 10; q++)
            if (parse_num(cu, &p, f[q])) return -1;
        if (sscanf(p, " %lg%n", &alpha, &k) != 1) return -1;
        g->alpha = (float)alpha;
        g->dt = !strcmp(dt, "f32") ? 0 : !strcmp(dt, "bf16") ? 1 : !strcmp(dt, "e4m3") ? 2 : !strcmp(dt, "tf32") ? 3 : -1;
        /* formulas are checked per run (a binding with a zero dim skips the GEMM) */
        if (g->dt < 0 || (g->m >= 0 && g->m < 1) || (g->n >= 0 && g->n < 1) || (g->k >= 0 && g->k < 1) ||
            (g->batch >= 0 && g->batch < 1))
            return -1;
        p += k;
        Arg *abc[3] = {&g->a, &g->b, &g->c};
        for (int i = 0; i < 3; i++)
            if (*p++ != ' ' || parse_arg(&p, abc[i])) return -1;
        unsigned as, bs, bias;
        if (sscanf(p, " %u %u %u", &as, &bs, &bias) != 3 || (bias && g->dt == 2)) return -1;
        g->as_slot = as;
        g->bs_slot = bs;
        g->bias_slot = bias;
        return 0;
    }
    return -1;
}

/* The manifest's line starting at l, NUL-terminated in line[cap]; false when it does not fit. */
static bool line_at(const char *l, char *line, size_t cap) {
    const char *e = strchr(l, '\n');
    size_t n = e ? (size_t)(e - l) : strlen(l);
    if (n >= cap) return false;
    memcpy(line, l, n);
    line[n] = 0;
    return true;
}

/* Symbolic shapes: the formulas (fx, first: the other lines name them), then what they size. */
static int parse_symbolic(IrtCuda *cu, const char *m, char *err, size_t cap) {
    char buf[64], line[4096];
    cu->symbolic = irt_manifest_get(m, "symslot", buf, sizeof buf);
    if (cu->symbolic && (sscanf(buf, "%u", &cu->symslot) != 1 || cu->symslot >= cu->n_slots)) goto bad;
    for (const char *l = m; *l; l++)
        if ((l == m || l[-1] == '\n') && !strncmp(l, "fx ", 3)) cu->n_fx++;
    if (cu->n_fx && !cu->symbolic) goto bad;
    cu->fx = calloc(cu->n_fx + 1, sizeof *cu->fx);
    if (!cu->fx) {
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    uint32_t seen = 0;
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, "fx ", 3)) {
            unsigned k;
            int pos = 0;
            if (!line_at(l, line, sizeof line) || sscanf(line, "fx %u%n", &k, &pos) != 1 || k != seen ||
                parse_fx(&cu->fx[seen], line + pos))
                goto bad;
            seen++;
        }
    }
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "fx", 2) || l[2] == ' ') continue;
        if (!line_at(l, line, sizeof line)) goto bad;
        const char *p = line;
        unsigned a, b;
        int pos = 0, alias;
        if (sscanf(line, "fxdef %u%n", &a, &pos) == 1) {
            p += pos;
            if (cu->n_def == 64 || parse_num(cu, &p, &cu->def_val[cu->n_def])) goto bad;
            cu->def_sym[cu->n_def++] = a;
        } else if (!strncmp(line, "fxcheck ", 8)) {
            p += 7;
            if (cu->n_check == 64 || parse_num(cu, &p, &cu->check[cu->n_check][0]) || parse_num(cu, &p, &cu->check[cu->n_check][1]))
                goto bad;
            cu->n_check++;
        } else if (sscanf(line, "fxout %u%n", &a, &pos) == 1) {
            p += pos;
            if (a != cu->n_out || a >= 64) goto bad;
            while (*p == ' ' && cu->out_rank[a] < 8)
                if (parse_num(cu, &p, &cu->out_dim[a][cu->out_rank[a]++])) goto bad;
            if (*p) goto bad;
            cu->n_out++;
        } else if (sscanf(line, "fxrun %u %u %d%n", &a, &b, &alias, &pos) == 3) {
            Run *r = realloc(cu->run, (cu->n_run + 1) * sizeof *r);
            if (!r) goto bad;
            cu->run = r;
            r = &cu->run[cu->n_run];
            memset(r, 0, sizeof *r);
            p += pos;
            r->slot = b;
            r->alias = alias;
            unsigned np;
            int q = 0;
            if (a != cu->n_run || b >= cu->n_slots || r->alias >= (int32_t)a || parse_num(cu, &p, &r->bytes) ||
                sscanf(p, " %u%n", &np, &q) != 1 || np > a)
                goto bad;
            cu->n_run++;
            p += q;
            r->pred = calloc(np + 1, sizeof *r->pred);
            if (!r->pred) goto bad;
            for (; r->n_pred < np; r->n_pred++) {
                char *e;
                unsigned long v = strtoul(p, &e, 10);
                if (e == p || v >= a) goto bad;
                r->pred[r->n_pred] = (uint32_t)v;
                p = e;
            }
        } else goto bad;
    }
    return 0;
bad:
    irt_set_err(err, cap, "corrupt artifact (bad symbolic-shape line in a CUDA manifest)");
    return -1;
}

int irt_cuda_shapes(const IrtCuda *cu, const IrtCudaShapeCounts *kc, int64_t *sym, uint32_t n_sym, size_t workspace,
                    int64_t *out) {
    long long v, w;
    if (kc->n_out != cu->n_out || kc->n_checks != cu->n_check || kc->n_run != cu->n_run) return -1;
    for (uint32_t i = 0; i < cu->n_out; i++)
        if (kc->out_rank[i] != cu->out_rank[i]) return -1;
    for (uint32_t k = 0; k < cu->n_run; k++)
        if (kc->run_slot[k] != cu->run[k].slot) return -1;
    for (uint32_t i = 0; i < cu->n_def; i++) { /* defined symbols first: the rest may read them */
        if (cu->def_sym[i] >= n_sym) return -1;
        if (cu->def_val[i] >= 0) v = cu->def_val[i];
        else if (fx_eval(&cu->fx[-1 - cu->def_val[i]], sym, n_sym, &v)) return -1;
        sym[cu->def_sym[i]] = v;
    }
#define VAL(x, r) ((x) >= 0 ? ((r) = (x), 0) : fx_eval(&cu->fx[-1 - (x)], sym, n_sym, &(r)))
    uint32_t pos = 0;
    for (uint32_t i = 0; i < cu->n_out; i++)
        for (uint32_t k = 0; k < cu->out_rank[i]; k++) {
            if (VAL(cu->out_dim[i][k], v)) return -1;
            out[pos++] = v;
        }
    /* the workspace: the static plan (sized for the symbols' upper bounds), then the blocks
     * placed per run, each 64-byte aligned after the furthest of its preds */
    long long base = (long long)(workspace + 63) / 64 * 64, ext = (long long)workspace;
    long long *off = calloc(2 * (size_t)cu->n_run + 1, sizeof *off), *len = off + cu->n_run;
    if (!off) return -1;
    for (uint32_t k = 0; k < cu->n_run; k++) {
        const Run *r = &cu->run[k];
        if (VAL(r->bytes, len[k])) {
            free(off);
            return -1;
        }
        long long at = base;
        for (uint32_t j = 0; j < r->n_pred; j++)
            if (off[r->pred[j]] + len[r->pred[j]] > at) at = off[r->pred[j]] + len[r->pred[j]];
        off[k] = r->alias >= 0 ? off[r->alias] : (at + 63) / 64 * 64;
        if (off[k] + len[k] > ext) ext = off[k] + len[k];
    }
    out[pos++] = ext;
    for (uint32_t i = 0; i < cu->n_check; i++) {
        if (VAL(cu->check[i][0], v) || VAL(cu->check[i][1], w)) {
            free(off);
            return -1;
        }
        out[pos++] = v - w;
    }
#undef VAL
    for (uint32_t k = 0; k < cu->n_run; k++) out[pos++] = off[k], out[pos++] = len[k];
    free(off);
    return 0;
}

static int parse_program(IrtCuda *cu, const char *m, char *err, size_t cap) {
    if (parse_symbolic(cu, m, err, cap)) return -1;
    for (const char *l = m; *l; l++)
        if (l == m || l[-1] == '\n') {
            if (!strncmp(l, "kernel ", 7)) cu->n_k++;
            if (!strncmp(l, "step ", 5)) cu->n_s++;
        }
    cu->k = calloc(cu->n_k + 1, sizeof *cu->k);
    cu->s = calloc(cu->n_s + 1, sizeof *cu->s);
    if (!cu->k || !cu->s) {
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    uint32_t ki = 0, si = 0;
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        char line[4096];
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        if (n >= sizeof line) {
            if (!strncmp(l, "step ", 5) || !strncmp(l, "kernel ", 7)) goto bad;
            continue;
        }
        memcpy(line, l, n);
        line[n] = 0;
        if (!strncmp(line, "kernel ", 7)) {
            Kern *k = &cu->k[ki];
            char mode[16];
            unsigned node;
            if (sscanf(line, "kernel %63s node %u block %u %15s params %u", k->name, &node, &k->block, mode, &k->n_params) != 5 ||
                k->block == 0 || k->block > 1024 || k->block % 32 || k->n_params > 32)
                goto bad;
            for (uint32_t j = 0; j < ki; j++)
                if (!strcmp(cu->k[j].name, k->name)) goto bad;
            k->rows = strcmp(mode, "rows") == 0;
            ki++;
        } else if (!strncmp(line, "step ", 5)) {
            if (parse_step(cu, line, &cu->s[si]) ||
                (cu->s[si].kind == ST_KERNEL && cu->s[si].n_args != cu->k[cu->s[si].kernel].n_params))
                goto bad;
            si++;
        }
        continue;
    bad:
        irt_set_err(err, cap, "corrupt artifact (bad manifest line '%.*s')", (int)(n < 60 ? n : 60), l);
        return -1;
    }
    /* every slot a step names must be one the loader knows */
    for (uint32_t i = 0; i < cu->n_s; i++) {
        Step *s = &cu->s[i];
        bool ok = true;
        for (uint32_t a = 0; a < s->n_args; a++) ok &= s->args[a].slot < cu->n_slots;
        if (s->gemm)
            ok &= s->gemm->a.slot < cu->n_slots && s->gemm->b.slot < cu->n_slots && s->gemm->c.slot < cu->n_slots &&
                  s->gemm->as_slot < cu->n_slots && s->gemm->bs_slot < cu->n_slots && s->gemm->bias_slot < cu->n_slots;
        if (!ok) {
            irt_set_err(err, cap, "corrupt artifact (a step names an unknown buffer)");
            return -1;
        }
    }
    return 0;
}

/* ---- cuBLASLt ---------------------------------------------------------------------------------------- */

/* Byte alignment (up to 256) every run gives the operand: device allocations are 256-aligned,
 * workspace and constant offsets 64-aligned, then the step's offset and the batch stride. */
static uint32_t operand_align(const IrtCuda *cu, const Arg *a, long long stride_bytes) {
    uint64_t off = (uint64_t)a->off;
    if (cu->ws_off[a->slot] >= 0) off += (uint64_t)cu->ws_off[a->slot];
    else if (cu->const_off[a->slot]) off += cu->const_off[a->slot] - 1;
    uint64_t al = 256;
    for (uint32_t k = 0; k < cu->n_run; k++) /* placed per run: 64-byte aligned */
        if (cu->run[k].slot == a->slot) al = 64;
    while (al > 1 && ((off % al) || (stride_bytes && (uint64_t)stride_bytes % al))) al /= 2;
    return (uint32_t)al;
}

/* Row-major Y = op(A) op(B) as column-major Y^T = op(B)^T op(A)^T: cuBLASLt's "A" is our B. */
static int gemm_prepare(IrtCuda *cu, Gemm *g, char *err, size_t cap) {
    Lt *l = &cu->lt;
    int in_t = g->dt == 1 ? IRT_CUDA_R_16BF : g->dt == 2 ? IRT_CUDA_R_8F_E4M3 : IRT_CUDA_R_32F;
    int out_t = g->dt == 1 ? IRT_CUDA_R_16BF : IRT_CUDA_R_32F;
    int op1 = g->tb ? IRT_CUBLAS_OP_T : IRT_CUBLAS_OP_N, op2 = g->ta ? IRT_CUBLAS_OP_T : IRT_CUBLAS_OP_N;
    cublasStatus_t st = l->DescCreate(&g->desc, g->dt == 3 ? IRT_CUBLAS_COMPUTE_32F_FAST_TF32 : IRT_CUBLAS_COMPUTE_32F,
                                      IRT_CUDA_R_32F);
    if (!st) st = l->DescSet(g->desc, IRT_LT_DESC_TRANSA, &op1, sizeof op1);
    if (!st) st = l->DescSet(g->desc, IRT_LT_DESC_TRANSB, &op2, sizeof op2);
    if (!st && g->bias_slot) { /* bias per row of cuBLASLt's D = per column of ours; pointer bound per run */
        int32_t epi = IRT_LT_EPILOGUE_BIAS;
        st = l->DescSet(g->desc, IRT_LT_DESC_EPILOGUE, &epi, sizeof epi);
    }
    if (!st) st = l->LayoutCreate(&g->l1, in_t, (uint64_t)(g->tb ? g->k : g->n), (uint64_t)(g->tb ? g->n : g->k), g->ldb);
    if (!st) st = l->LayoutCreate(&g->l2, in_t, (uint64_t)(g->ta ? g->m : g->k), (uint64_t)(g->ta ? g->k : g->m), g->lda);
    if (!st) st = l->LayoutCreate(&g->ld, out_t, (uint64_t)g->n, (uint64_t)g->m, g->ldc);
    if (!st && g->batch > 1) {
        int32_t bc = (int32_t)g->batch;
        int64_t s1 = g->sb, s2 = g->sa, s3 = g->sc;
        cublasLtMatrixLayout_t ls[3] = {g->l1, g->l2, g->ld};
        int64_t ss[3] = {s1, s2, s3};
        for (int i = 0; i < 3 && !st; i++) {
            st = l->LayoutSet(ls[i], IRT_LT_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
            if (!st) st = l->LayoutSet(ls[i], IRT_LT_LAYOUT_STRIDED_BATCH_OFFSET, &ss[i], sizeof ss[i]);
        }
    }
    if (st) {
        irt_set_err(err, cap, "cuBLASLt: cannot describe a %lldx%lldx%lld GEMM (status %d)", g->m, g->n, g->k, st);
        return -1;
    }
    /* scale pointers are bound per run (they are device addresses of this run's buffers) */
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t wsb = LT_WORKSPACE;
    IrtLtHeuristic h;
    int got = 0;
    st = l->PrefCreate(&pref);
    if (!st) st = l->PrefSet(pref, IRT_LT_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    long long in_es = g->dt == 1 ? 2 : g->dt == 2 ? 1 : 4, out_es = g->dt == 1 ? 2 : 4;
    uint32_t al[4] = {operand_align(cu, &g->b, g->batch > 1 ? g->sb * in_es : 0),
                      operand_align(cu, &g->a, g->batch > 1 ? g->sa * in_es : 0),
                      operand_align(cu, &g->c, g->batch > 1 ? g->sc * out_es : 0), 0};
    al[3] = al[2];
    static const int attr[4] = {IRT_LT_PREF_MIN_ALIGNMENT_A_BYTES, IRT_LT_PREF_MIN_ALIGNMENT_B_BYTES,
                                IRT_LT_PREF_MIN_ALIGNMENT_C_BYTES, IRT_LT_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && !st; i++) st = l->PrefSet(pref, attr[i], &al[i], sizeof al[i]);
    if (!st) st = l->Heuristic(cu->lth, g->desc, g->l1, g->l2, g->ld, g->ld, pref, 1, &h, &got);
    if (pref) l->PrefDestroy(pref);
    if (st || got < 1) {
        irt_set_err(err, cap, "cuBLASLt has no algorithm for the %s GEMM %lldx%lldx%lld (batch %lld) on this GPU (status %d)",
                g->dt == 0 ? "f32" : g->dt == 1 ? "bf16" : g->dt == 2 ? "fp8 e4m3" : "tf32", g->m, g->n, g->k, g->batch, st);
        return -1;
    }
    g->algo = h.algo;
    return 0;
}

static bool gemm_symbolic(const Gemm *g) {
    const long long f[10] = {g->m, g->n, g->k, g->lda, g->ldb, g->ldc, g->batch, g->sa, g->sb, g->sc};
    for (int q = 0; q < 10; q++)
        if (f[q] < 0) return true;
    return false;
}

static void gemm_release(Lt *l, Gemm *g) {
    if (g->desc) l->DescDestroy(g->desc);
    if (g->l1) l->LayoutDestroy(g->l1);
    if (g->l2) l->LayoutDestroy(g->l2);
    if (g->ld) l->LayoutDestroy(g->ld);
}

/* ---- load ---------------------------------------------------------------------------------------------- */

IrtCuda *irt_cuda_load(const char *m, const IrtCudaTables *t, char *err, size_t cap) {
    IrtCuda *cu = calloc(1, sizeof *cu);
    if (!cu) {
        irt_set_err(err, cap, "out of memory");
        return NULL;
    }
    char buf[128];
    pthread_mutex_init(&cu->fp8_lock, NULL);
    cu->lock_init = true;
    cu->n_slots = t->n_slots;
    cu->workspace = t->workspace;
    cu->ws_off = malloc((t->n_slots + 1) * sizeof *cu->ws_off);
    cu->const_off = malloc((t->n_slots + 1) * sizeof *cu->const_off);
    if (!cu->ws_off || !cu->const_off) {
        irt_set_err(err, cap, "out of memory");
        goto fail;
    }
    memcpy(cu->ws_off, t->ws_off, t->n_slots * sizeof *cu->ws_off);
    memcpy(cu->const_off, t->const_off, t->n_slots * sizeof *cu->const_off);
    unsigned long long cub_off = 0, cub_len = 0, ptx_off = 0, ptx_len = 0;
    if (!irt_manifest_get(m, "cubin", buf, sizeof buf) || sscanf(buf, "%llu %llu", &cub_off, &cub_len) != 2 ||
        !irt_manifest_get(m, "ptx", buf, sizeof buf) || sscanf(buf, "%llu %llu", &ptx_off, &ptx_len) != 2 || cub_off > t->code_len ||
        cub_len > t->code_len - cub_off || ptx_off > t->code_len || ptx_len >= t->code_len - ptx_off ||
        t->code[ptx_off + ptx_len] != 0) {
        irt_set_err(err, cap, "corrupt artifact (bad cubin/ptx section)");
        goto fail;
    }
    /* the manifest first: a corrupt artifact says so on any machine, with or without a GPU */
    if (parse_program(cu, m, err, cap) || drv_open(&cu->d, err, cap) || check_target(&cu->d, m, err, cap)) goto fail;
    CK(cu->d.DeviceGet(&cu->dev, 0), "cuDeviceGet");
    CK(cu->d.DevicePrimaryCtxRetain(&cu->ctx, cu->dev), "cuDevicePrimaryCtxRetain");
    cu->ctx_retained = true;
    CK(cu->d.CtxSetCurrent(cu->ctx), "cuCtxSetCurrent");
    CK(cu->d.DeviceGetAttribute(&cu->sms, IRT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, cu->dev), "cuDeviceGetAttribute");
    /* the cubin when it fits this GPU, else the PTX through the driver's JIT */
    if (cu->d.ModuleLoadData(&cu->mod, t->code + cub_off) != IRT_CUDA_SUCCESS) {
        cu->mod = NULL;
        CK(cu->d.ModuleLoadData(&cu->mod, t->code + ptx_off), "cuModuleLoadData (cubin, then PTX JIT)");
    }
    for (uint32_t i = 0; i < cu->n_k; i++) {
        char what[96];
        snprintf(what, sizeof what, "cuModuleGetFunction(%s)", cu->k[i].name);
        CK(cu->d.ModuleGetFunction(&cu->k[i].fn, cu->mod, cu->k[i].name), what);
    }
    if (t->consts_len) {
        CK(cu->d.MemAlloc(&cu->consts, t->consts_len), "cuMemAlloc (constants)");
        CK(cu->d.MemcpyHtoD(cu->consts, t->consts, t->consts_len), "cuMemcpyHtoD (constants)");
    }
    bool any_gemm = false;
    for (uint32_t i = 0; i < cu->n_s; i++) any_gemm |= cu->s[i].kind == ST_GEMM;
    if (any_gemm) {
        irt_manifest_get(m, "cublaslt", buf, sizeof buf);
        if (lt_open(&cu->lt, atoi(buf) > 0 ? atoi(buf) : 13, err, cap)) goto fail;
        if (cu->lt.Create(&cu->lth)) {
            irt_set_err(err, cap, "cublasLtCreate failed");
            goto fail;
        }
        cu->have_lt = true;
        for (uint32_t i = 0; i < cu->n_s; i++) /* GEMMs sized by formulas are described per run */
            if (cu->s[i].kind == ST_GEMM && !gemm_symbolic(cu->s[i].gemm) && gemm_prepare(cu, cu->s[i].gemm, err, cap)) goto fail;
    }
    return cu;
fail:
    irt_cuda_free(cu);
    return NULL;
}

void irt_cuda_free(IrtCuda *cu) {
    if (!cu) return;
    if (cu->ctx && cu->d.CtxSetCurrent) cu->d.CtxSetCurrent(cu->ctx);
    for (uint32_t i = 0; cu->s && i < cu->n_s; i++) {
        if (cu->s[i].gemm && cu->have_lt) gemm_release(&cu->lt, cu->s[i].gemm);
        free(cu->s[i].gemm);
        free(cu->s[i].args);
    }
    if (cu->lth) cu->lt.Destroy(cu->lth);
    if (cu->consts) cu->d.MemFree(cu->consts);
    if (cu->mod) cu->d.ModuleUnload(cu->mod);
    if (cu->ctx_retained) cu->d.DevicePrimaryCtxRelease(cu->dev);
    if (cu->lt.dl) dlclose(cu->lt.dl);
    if (cu->d.dl) dlclose(cu->d.dl);
    for (uint32_t i = 0; cu->fx && i < cu->n_fx; i++) free(cu->fx[i].t);
    free(cu->fx);
    for (uint32_t i = 0; cu->run && i < cu->n_run; i++) free(cu->run[i].pred);
    free(cu->run);
    free(cu->k);
    free(cu->s);
    free(cu->ws_off);
    free(cu->const_off);
    if (cu->lock_init) pthread_mutex_destroy(&cu->fp8_lock);
    free(cu);
}

/* ---- run ------------------------------------------------------------------------------------------------ */

#define DEV_ALIGN 256

int irt_cuda_run(IrtCuda *cu, uint32_t n_in, const uint32_t *in_slot, void *const *in_data, const size_t *in_bytes,
                 uint32_t n_out, const uint32_t *out_slot, void **out_data, const size_t *out_bytes, uint32_t repeat,
                 const IrtCudaBind *bind, double *step_ms, char *err, size_t cap) {
    CUstream stream = NULL;
    CUevent ev[2] = {NULL, NULL};
    CUdeviceptr mem = 0;
    CUdeviceptr *addr = calloc(cu->n_slots + 1, sizeof *addr);
    long long *fxv = calloc(cu->n_fx + 1, sizeof *fxv); /* the formulas under this run's symbols */
    Gemm lg; /* a GEMM sized by formulas: described for this run */
    memset(&lg, 0, sizeof lg);
    int rc = -1;
    if (!addr || !fxv) {
        free(addr), free(fxv);
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    if (cu->symbolic && !bind) {
        free(addr), free(fxv);
        irt_set_err(err, cap, "this CUDA artifact has symbolic dims: the run needs their binding");
        return -1;
    }
    for (uint32_t i = 0; i < cu->n_fx; i++)
        if (fx_eval(&cu->fx[i], bind->sym, bind->n_sym, &fxv[i]) || fxv[i] < 0) {
            free(addr), free(fxv);
            irt_set_err(err, cap, "formula %u of this artifact's sizes does not evaluate for this binding", i);
            return -1;
        }
    bool any_gemm = cu->have_lt;
    size_t ws = ((bind ? bind->workspace : cu->workspace) + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN, total = ws;
    size_t sym_off = total, sym_bytes = bind ? bind->n_sym * sizeof(int64_t) : 0;
    total += (sym_bytes + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN;
    for (uint32_t i = 0; i < n_in; i++) total += (in_bytes[i] + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN;
    size_t lt_off = total;
    if (any_gemm) total += LT_WORKSPACE;
    CK(cu->d.CtxSetCurrent(cu->ctx), "cuCtxSetCurrent");
    CK(cu->d.StreamCreate(&stream, IRT_CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    if (total) CK(cu->d.MemAlloc(&mem, total), "cuMemAlloc (workspace)");
    for (uint32_t s = 0; s < cu->n_slots; s++) {
        if (cu->ws_off[s] >= 0) addr[s] = mem + (CUdeviceptr)cu->ws_off[s];
        else if (cu->const_off[s]) addr[s] = cu->consts + (CUdeviceptr)(cu->const_off[s] - 1);
    }
    for (uint32_t k = 0; bind && k < cu->n_run; k++) addr[cu->run[k].slot] = mem + (CUdeviceptr)bind->run[2 * k];
    if (sym_bytes) { /* the kernels' symbol array */
        addr[cu->symslot] = mem + sym_off;
        CK(cu->d.MemcpyHtoDAsync(mem + sym_off, bind->sym, sym_bytes, stream), "cuMemcpyHtoDAsync (symbols)");
    }
    size_t off = sym_off + (sym_bytes + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN;
    for (uint32_t i = 0; i < n_in; i++) {
        addr[in_slot[i]] = mem + off;
        if (in_bytes[i]) CK(cu->d.MemcpyHtoDAsync(mem + off, in_data[i], in_bytes[i], stream), "cuMemcpyHtoDAsync (input)");
        off += (in_bytes[i] + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN;
    }
    if (step_ms) {
        CK(cu->d.EventCreate(&ev[0], 0), "cuEventCreate");
        CK(cu->d.EventCreate(&ev[1], 0), "cuEventCreate");
        CK(cu->d.EventRecord(ev[0], stream), "cuEventRecord");
    }
    if (repeat < 1) repeat = 1;
    for (uint32_t it = 0, i = 0; it < repeat; it++, i = 0)
    for (; i < cu->n_s; i++) {
        Step *s = &cu->s[i];
        CUdeviceptr av[32];
        for (uint32_t a = 0; a < s->n_args; a++) {
            if (!addr[s->args[a].slot]) {
                irt_set_err(err, cap, "corrupt artifact (step %u uses buffer %u, which has no memory)", i, s->args[a].slot);
                goto fail;
            }
            av[a] = addr[s->args[a].slot] + (CUdeviceptr)s->args[a].off;
        }
        if (s->kind == ST_KERNEL) {
            Kern *k = &cu->k[s->kernel];
            void *pp[32];
            for (uint32_t a = 0; a < s->n_args; a++) pp[a] = &av[a];
            long long work = fx_val(fxv, s->work);
            long long grid = k->rows ? work : (work + k->block - 1) / k->block;
            long long cap_grid = (long long)(cu->sms > 0 ? cu->sms : 1) * 32;
            if (!k->rows && grid > cap_grid) grid = cap_grid; /* grid-stride: the rest loops */
            if (grid > 0x7fffffff) grid = 0x7fffffff;
            if (grid > 0) CK(cu->d.LaunchKernel(k->fn, (unsigned)grid, 1, 1, k->block, 1, 1, 0, stream, pp, NULL), k->name);
        } else if (s->kind == ST_COPY) {
            if (fx_val(fxv, s->bytes)) CK(cu->d.MemcpyDtoDAsync(av[0], av[1], (size_t)fx_val(fxv, s->bytes), stream), "cuMemcpyDtoDAsync");
        } else if (s->kind == ST_MEMSET) {
            if (fx_val(fxv, s->bytes))
                CK(cu->d.MemsetD8Async(av[0], (unsigned char)s->value, (size_t)fx_val(fxv, s->bytes), stream), "cuMemsetD8Async");
        } else {
            Gemm *g = s->gemm;
            if (gemm_symbolic(g)) { /* this run's sizes: a descriptor and an algorithm for them */
                if (lg.desc) gemm_release(&cu->lt, &lg);
                lg = *g;
                lg.desc = NULL, lg.l1 = lg.l2 = lg.ld = NULL;
                long long *f[10] = {&lg.m, &lg.n, &lg.k, &lg.lda, &lg.ldb, &lg.ldc, &lg.batch, &lg.sa, &lg.sb, &lg.sc};
                for (int q = 0; q < 10; q++) *f[q] = fx_val(fxv, *f[q]);
                if (lg.m == 0 || lg.n == 0 || lg.batch == 0) continue;
                if (lg.k == 0) {
                    irt_set_err(err, cap, "step %u: a GEMM with K = 0 for this binding", i);
                    goto fail;
                }
                if (gemm_prepare(cu, &lg, err, cap)) goto fail;
                g = &lg;
            }
            CUdeviceptr pa = addr[g->a.slot] + (CUdeviceptr)g->a.off, pb = addr[g->b.slot] + (CUdeviceptr)g->b.off;
            CUdeviceptr pc = addr[g->c.slot] + (CUdeviceptr)g->c.off;
            if (!addr[g->a.slot] || !addr[g->b.slot] || !addr[g->c.slot]) {
                irt_set_err(err, cap, "corrupt artifact (a GEMM operand has no memory)");
                goto fail;
            }
            float alpha = g->alpha, beta = 0.0f;
            bool fp8 = g->dt == 2, locked = fp8 || g->bias_slot;
            if (locked) pthread_mutex_lock(&cu->fp8_lock);
            if (g->bias_slot) {
                void *pbias = (void *)(uintptr_t)addr[g->bias_slot];
                if (!pbias || cu->lt.DescSet(g->desc, IRT_LT_DESC_BIAS_POINTER, &pbias, sizeof pbias)) {
                    pthread_mutex_unlock(&cu->fp8_lock);
                    goto lt_fail;
                }
            }
            if (fp8) { /* cuBLASLt's A is our B: swap the scales accordingly */
                CUdeviceptr sa = g->bs_slot ? addr[g->bs_slot] : 0, sb = g->as_slot ? addr[g->as_slot] : 0;
                void *psa = (void *)(uintptr_t)sa, *psb = (void *)(uintptr_t)sb;
                if ((sa && cu->lt.DescSet(g->desc, IRT_LT_DESC_A_SCALE_POINTER, &psa, sizeof psa)) ||
                    (sb && cu->lt.DescSet(g->desc, IRT_LT_DESC_B_SCALE_POINTER, &psb, sizeof psb))) {
                    pthread_mutex_unlock(&cu->fp8_lock);
                    goto lt_fail;
                }
            }
            cublasStatus_t st = cu->lt.Matmul(cu->lth, g->desc, &alpha, (const void *)(uintptr_t)pb, g->l1,
                                              (const void *)(uintptr_t)pa, g->l2, &beta, (const void *)(uintptr_t)pc, g->ld,
                                              (void *)(uintptr_t)pc, g->ld, &g->algo, (void *)(uintptr_t)(mem + lt_off),
                                              LT_WORKSPACE, stream);
            if (locked) pthread_mutex_unlock(&cu->fp8_lock);
            if (st) {
                irt_set_err(err, cap, "cublasLtMatmul failed (status %d) for the %lldx%lldx%lld GEMM of step %u", st, g->m, g->n,
                        g->k, i);
                goto fail;
            }
            continue;
        lt_fail:
            irt_set_err(err, cap, "cuBLASLt: cannot bind the bias or FP8 scales of step %u", i);
            goto fail;
        }
    }
    if (step_ms) {
        float ms = 0;
        CK(cu->d.EventRecord(ev[1], stream), "cuEventRecord");
        CK(cu->d.EventSynchronize(ev[1]), "running the kernels (cuEventSynchronize)");
        CK(cu->d.EventElapsedTime(&ms, ev[0], ev[1]), "cuEventElapsedTime");
        *step_ms = ms / repeat;
    }
    for (uint32_t i = 0; i < n_out; i++) {
        if (!out_bytes[i]) continue;
        if (!addr[out_slot[i]]) {
            irt_set_err(err, cap, "corrupt artifact (output %u has no memory)", i);
            goto fail;
        }
        CK(cu->d.MemcpyDtoHAsync(out_data[i], addr[out_slot[i]], out_bytes[i], stream), "cuMemcpyDtoHAsync (output)");
    }
    CK(cu->d.StreamSynchronize(stream), "running the kernels (cuStreamSynchronize)");
    rc = 0;
fail:
    if (stream) {
        if (rc) cu->d.StreamSynchronize(stream);
        cu->d.StreamDestroy(stream);
    }
    for (int e = 0; e < 2; e++)
        if (ev[e]) cu->d.EventDestroy(ev[e]);
    if (mem) cu->d.MemFree(mem);
    if (lg.desc || lg.l1 || lg.l2 || lg.ld) gemm_release(&cu->lt, &lg);
    free(addr);
    free(fxv);
    return rc;
}

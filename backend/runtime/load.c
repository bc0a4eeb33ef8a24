/* The artifact loader of libirtool-runtime: checks an .irx file (layout in abi.h): checksum,
 * every manifest field against the others, the code's ELF headers as data, then the preflight;
 * only then loads its code from a memfd with dlopen, and runs it over a per-call workspace. libc,
 * libdl and pthread only. Manifest lines used (names %XX-escaped): format triple cpu features
 * workspace slots kernels; inputs/outputs/wss/consts N; dtype CODE NAME ESIZE; input|output I NAME
 * DTYPE RANK D.. SLOT; ws SLOT OFF BYTES; wsrun K SLOT (placed per binding by irt_shapes);
 * const SLOT OFF BYTES; bound SLOTS..; blas 0|1; symbol/insym/insymval/insymmul/symdata/symdef. */
#include "backend/runtime/abi.h"
#include "backend/runtime/checksum.h"
#include "backend/runtime/cuda_rt.h"
#include "ir/ir.h" /* IR_DTYPE_LIST only: the dtype names and sizes a manifest may list */

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#endif

#define WS_ALIGN 64
#define WS_POOL 4

typedef struct IrtIo {
    char *name;
    IrtTensor t; /* data unused */
    uint32_t slot;
    bool batched; /* dim 0 is the symbolic batch (compiled for 1) */
} IrtIo;

typedef struct IrtDtype {
    int32_t code;
    size_t size;
    char name[16];
} IrtDtype;

/* A symbol an input's values bind: entry `dim` of input `in`, or (mul) trunc(entry * D) with D
 * symbol `by`'s value when by != 0, else the constant c. */
typedef struct IrtValueBind {
    uint32_t in, dim, id, by;
    int64_t c;
    bool mul;
} IrtValueBind;

struct IrtArtifact {
    unsigned char *file; /* the whole file (constants point into it) */
    size_t file_len;
    bool mapped;         /* file is a read-only private mapping (irt_load), else malloc'd */
    const unsigned char *consts;
    uint64_t consts_len;
    uint32_t n_slots, n_in, n_out, n_dtypes;
    size_t workspace;
    IrtIo *in, *out;
    int64_t *ws_off;          /* by slot; -1 = not in the workspace */
    int64_t *ws_bytes;        /* by slot: the bytes at ws_off */
    /* workspace blocks placed per binding (symbols without an upper bound): irt_shapes gives
     * block k's offset and bytes; run_of by slot (-1: none), run_slot by block */
    uint32_t n_run;
    int32_t *run_of;
    uint32_t *run_slot;
    uint64_t *const_len;      /* by slot: the bytes at const_ptr */
    const void **const_ptr;   /* by slot */
    IrtDtype dtypes[32];
    bool batch;                  /* compiled for one sample of a symbolic batch */
    char batch_name[64];
    int64_t batch_lo, batch_hi, batch_div;
    /* symbolic dims evaluated by the code (cpu/dyn.c): the symbol values go to slot symslot,
     * bound from the input dims listed in insym; irt_shapes gives output dims and workspace use */
    uint32_t n_syms, n_insym, symslot, max_sym;
    bool has_runslot; /* string kernels: the run's IrtRunCtx goes to slot runslot */
    int32_t string_code; /* the dtype code of strings (outputs packed after a run), -1 if none */
    uint32_t runslot;
    struct {
        uint32_t id;
        int64_t lo, hi, div;
        char name[64];
    } syms[16];
    struct {
        uint32_t in, dim, id;
    } insym[64];
    uint32_t n_insymval; /* symbols bound from an input's values */
    IrtValueBind insymval[16];
    uint32_t n_data; /* data symbols: dims the kernels count (NonZero), bound at hi until they do */
    struct {
        uint32_t id;
        int64_t hi;
    } data[16];
    void (*shapes)(int64_t *syms, int64_t *out);
    uint32_t n_checks;  /* equalities over the symbols irt_shapes evaluates (a - b) */
    char *checks[16];
    /* profiling: irt_entry_trace and, per kernel call, its node's op and name (kcall lines) */
    void (*entry_trace)(void **bufs, const IrtFnTable *fns, void (*hook)(void *u, uint32_t k), void *u);
    uint32_t n_kcalls;
    char **kop, **kname;
    void *dl;
    int fd;
    IrtEntryFn entry;
    IrtCuda *cuda; /* CUDA artifacts (cuda_rt.c): the code runs there */
    pthread_mutex_t pool_mu; /* guards the workspaces kept between runs */
    char *pool[WS_POOL];
    size_t pool_len[WS_POOL];
    uint32_t n_pool;
};

void irt_set_err(char *err, size_t cap, const char *fmt, ...) {
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

static uint64_t rd64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* Header check: magic, version, the sections in order inside the file, then the checksum over
 * all of it (before any byte of it is used). On success sec holds the section table. */
static int check_header(const unsigned char *d, size_t len, uint64_t sec[4][2], char *err, size_t cap) {
    if (len < 12 || memcmp(d, IRT_MAGIC, 8) != 0) {
        irt_set_err(err, cap, "not an irtool artifact (bad magic)");
        return -1;
    }
    uint32_t ver = rd32(d + 8);
    if (ver > IRT_FORMAT_VERSION) {
        irt_set_err(err, cap, "artifact format version %u is newer than this runtime supports (%u): rebuild it or update irtool",
                ver, IRT_FORMAT_VERSION);
        return -1;
    }
    if (ver < IRT_FORMAT_VERSION) {
        irt_set_err(err, cap, "artifact format version %u is older than this runtime reads (%u): rebuild it with irtool compile",
                    ver, IRT_FORMAT_VERSION);
        return -1;
    }
    if (len < IRT_HEADER_SIZE || rd32(d + 12) != IRT_HEADER_SIZE || rd64(d + IRT_CHECKSUM_OFFSET + 8) != 0) {
        irt_set_err(err, cap, "corrupt artifact (bad header%s)", len < IRT_HEADER_SIZE ? ": truncated" : "");
        return -1;
    }
    uint64_t end = IRT_HEADER_SIZE;
    for (int i = 0; i < 4; i++) {
        sec[i][0] = rd64(d + 16 + 16 * i);
        sec[i][1] = rd64(d + 24 + 16 * i);
        if (sec[i][0] < end || sec[i][0] > len || sec[i][1] > len - sec[i][0]) {
            irt_set_err(err, cap, "corrupt artifact (section %d out of place or out of the file; truncated?)", i);
            return -1;
        }
        end = sec[i][0] + sec[i][1];
    }
    if (rd64(d + IRT_CHECKSUM_OFFSET) != irt_artifact_checksum(d)) {
        irt_set_err(err, cap, "corrupt artifact (checksum mismatch: changed or truncated after it was written; rebuild it)");
        return -1;
    }
    return 0;
}

static char *dup_manifest(const unsigned char *d, const uint64_t sec[4][2]) {
    char *m = malloc(sec[0][1] + 1);
    if (!m) return NULL;
    memcpy(m, d + sec[0][0], sec[0][1]);
    m[sec[0][1]] = 0;
    return m;
}

static int read_whole(const char *path, unsigned char **data, size_t *len, char *err, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO would block the open */
    struct stat sb;
    FILE *f = NULL;
    bool reg = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    if (!reg || !(f = fdopen(fd, "rb"))) {
        if (fd >= 0 && !reg) irt_set_err(err, cap, "'%s' is not a regular file", path);
        else irt_set_err(err, cap, "cannot open '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    size_t n = 0, c = 1 << 16;
    unsigned char *b = malloc(c);
    for (size_t k; b && (k = fread(b + n, 1, c - n, f)) > 0;) {
        n += k;
        if (n == c) {
            unsigned char *nb = realloc(b, c *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        free(b);
        irt_set_err(err, cap, "cannot read '%s'", path);
        return -1;
    }
    *data = b;
    *len = n;
    return 0;
}

char *irt_read_manifest(const char *path, char *err, size_t cap) {
    unsigned char *d;
    size_t len;
    uint64_t sec[4][2];
    if (read_whole(path, &d, &len, err, cap)) return NULL;
    char *m = check_header(d, len, sec, err, cap) ? NULL : dup_manifest(d, sec);
    free(d);
    return m;
}

/* ---- manifest lines ------------------------------------------------------------------------- */

bool irt_manifest_get(const char *m, const char *key, char *buf, size_t cap) {
    size_t kl = strlen(key);
    for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, key, kl) != 0 || l[kl] != ' ') continue;
        const char *v = l + kl + 1, *e = strchr(v, '\n');
        size_t n = e ? (size_t)(e - v) : strlen(v);
        if (n >= cap) n = cap - 1;
        memcpy(buf, v, n);
        buf[n] = 0;
        return true;
    }
    buf[0] = 0;
    return false;
}

static void unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        unsigned v;
        if (*s == '%' && sscanf(s + 1, "%2x", &v) == 1) {
            *o++ = (char)v;
            s += 2;
        } else *o++ = *s;
    }
    *o = 0;
}

/* ---- preflight ------------------------------------------------------------------------------ */

static const char *host_arch(void) {
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__aarch64__)
    return "aarch64";
#else
    return "unknown";
#endif
}

/* Whether this CPU has LLVM feature `f`; -1 when the runtime cannot tell (not checked). */
static int host_has(const char *f) {
#if defined(__x86_64__)
    __builtin_cpu_init();
#define F(n, b) if (strcmp(f, n) == 0) return __builtin_cpu_supports(b) ? 1 : 0
    F("sse2", "sse2"); F("sse3", "sse3"); F("ssse3", "ssse3"); F("sse4.1", "sse4.1"); F("sse4.2", "sse4.2");
    F("popcnt", "popcnt"); F("avx", "avx"); F("avx2", "avx2"); F("fma", "fma"); F("bmi", "bmi");
    F("bmi2", "bmi2"); F("avx512f", "avx512f"); F("avx512bw", "avx512bw"); F("avx512dq", "avx512dq");
    F("avx512vl", "avx512vl"); F("avx512cd", "avx512cd"); F("avx512vnni", "avx512vnni");
    F("avx512bf16", "avx512bf16"); F("avx512fp16", "avx512fp16"); F("avx512vbmi", "avx512vbmi");
    F("avx512ifma", "avx512ifma"); F("avxvnni", "avxvnni"); F("f16c", "f16c"); F("aes", "aes");
    F("pclmul", "pclmul"); F("vpclmulqdq", "vpclmulqdq"); F("gfni", "gfni"); F("sha", "sha");
#undef F
    if (strcmp(f, "amx-tile") == 0 || strcmp(f, "amx-bf16") == 0) { /* CPUID leaf 7: EDX bits 24, 22 */
        unsigned a = 7, b, c = 0, d;
        __asm__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
        return (d >> (strcmp(f, "amx-tile") == 0 ? 24 : 22)) & 1;
    }
#endif
    (void)f;
    return -1;
}

int irt_cpu_amx_enable(char *err, size_t cap) {
#if defined(__linux__) && defined(__x86_64__)
    /* ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA (18) */
    if (syscall(SYS_arch_prctl, 0x1023, 18) == 0) return 0;
    irt_set_err(err, cap, "this system does not grant AMX tile state to the process (arch_prctl: %s); recompile with "
                "--target cpu:NAME for a CPU without AMX", strerror(errno));
#else
    irt_set_err(err, cap, "AMX tile state is only requested on x86-64 Linux");
#endif
    return -1;
}

/* Whether the manifest's feature list enables f ("+amx-tile"). */
static bool manifest_feature(const char *m, const char *f) {
    char buf[8192];
    irt_manifest_get(m, "features", buf, sizeof buf);
    size_t n = strlen(f);
    for (const char *s = strstr(buf, f); s; s = strstr(s + 1, f))
        if ((s == buf || s[-1] == ',') && (s[n] == ',' || s[n] == 0)) return true;
    return false;
}

int irt_preflight(const char *m, char *err, size_t cap) {
    char buf[8192];
    if (irt_manifest_get(m, "format", buf, sizeof buf) && strtoul(buf, NULL, 10) > IRT_FORMAT_VERSION) {
        irt_set_err(err, cap, "artifact format version %s is newer than this runtime supports (%u)", buf, IRT_FORMAT_VERSION);
        return -1;
    }
    if (irt_cuda_manifest(m)) return irt_cuda_preflight(m, err, cap);
    irt_manifest_get(m, "triple", buf, sizeof buf);
    size_t al = strlen(host_arch());
    if (strncmp(buf, host_arch(), al) != 0 || buf[al] != '-' || !strstr(buf, "-linux")) {
        irt_set_err(err, cap, "artifact was compiled for target triple '%s' but this host is %s-*-linux", buf, host_arch());
        return -1;
    }
    char cpu[128];
    irt_manifest_get(m, "cpu", cpu, sizeof cpu);
    irt_manifest_get(m, "features", buf, sizeof buf);
    char missing[1024] = "";
    size_t nm = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (tok[0] != '+') continue;
        if (host_has(tok + 1) == 0 && nm + strlen(tok) + 2 < sizeof missing)
            nm += (size_t)snprintf(missing + nm, sizeof missing - nm, "%s%s", nm ? " " : "", tok + 1);
    }
    if (nm) {
        irt_set_err(err, cap, "this CPU lacks features the artifact was compiled for (cpu %s): %s; recompile with --target cpu:NAME",
                cpu, missing);
        return -1;
    }
    return 0;
}

/* ---- loading -------------------------------------------------------------------------------- */

#define MAX_SLOTS (1u << 24)          /* more than any graph has values and nodes */
#define MAX_WORKSPACE (1ull << 44)    /* bytes */
#define MAX_TENSOR_BYTES (1ull << 44)

/* "input I NAME DTYPE RANK D0 .. SLOT"; idx is I. */
static int parse_io(char *line, IrtIo *io, unsigned *idx) {
    char name[4096];
    int pos = 0;
    unsigned rank;
    int dt;
    if (sscanf(line, "%*s %u %4095s %d %u%n", idx, name, &dt, &rank, &pos) != 4 || rank > IRT_MAX_RANK) return -1;
    io->t.dtype = dt;
    io->t.rank = rank;
    char *p = line + pos;
    for (unsigned k = 0; k < rank; k++) {
        char *e;
        errno = 0;
        io->t.dims[k] = strtoll(p, &e, 10);
        if (e == p || errno) return -1;
        p = e;
    }
    char *e;
    errno = 0;
    unsigned long slot = strtoul(p, &e, 10);
    if (e == p || errno || slot > UINT32_MAX || *e) return -1;
    io->slot = (uint32_t)slot;
    unescape(name);
    io->name = strdup(name);
    return io->name ? 0 : -1;
}

/* The element types a manifest may list, with their sizes (ir/ir.h's table; strings are held
 * as IrtString elements). */
static size_t known_dtype_size(const char *name) {
#define X(e, nm, sz, ox) if (strcmp(name, nm) == 0) return sz;
    IR_DTYPE_LIST(X)
#undef X
    return 0;
}
_Static_assert(sizeof(IrtString) == 16, "IrtString is the string dtype's element");

/* Bytes of a tensor with these dims, its dims -1 (bound at run time) taken as 0; false when a
 * dim is below -1 or the size overflows the limit. */
static bool tensor_bytes(const IrtTensor *t, size_t es, uint64_t *out) {
    uint64_t n = es;
    for (uint32_t k = 0; k < t->rank; k++) {
        if (t->dims[k] < -1) return false;
        if (__builtin_mul_overflow(n, (uint64_t)(t->dims[k] < 0 ? 0 : t->dims[k]), &n)) return false;
    }
    *out = n;
    return n <= MAX_TENSOR_BYTES;
}

/* What the manifest said, beyond the artifact's own fields: line counts and per-slot facts the
 * checks after the parse compare. */
typedef struct Parsed {
    uint32_t n_inputs, n_outputs, n_ws, n_consts, n_kernels; /* the counted lines' values */
    bool have_inputs, have_outputs, have_ws, have_consts, have_kernels, have_symslot, have_runs;
    uint32_t seen_ws, seen_consts, n_symdef, n_runs;
    unsigned char *bound; /* by slot: listed on the `bound` line */
} Parsed;

static int bad_line(const char *l, char *err, size_t cap) {
    irt_set_err(err, cap, "corrupt artifact (bad manifest line '%.60s')", l);
    return -1;
}

static int parse_count(const char *l, const char *key, uint32_t *v, bool *have) {
    unsigned x;
    char tail;
    if (*have || sscanf(l + strlen(key), " %u%c", &x, &tail) != 1 || x > MAX_SLOTS) return -1;
    *v = x;
    *have = true;
    return 0;
}

static int parse_manifest(IrtArtifact *a, char *m, Parsed *p, char *err, size_t cap) {
    char buf[64], *e;
    if (!irt_manifest_get(m, "slots", buf, sizeof buf)) buf[0] = 0;
    errno = 0;
    unsigned long long v = strtoull(buf, &e, 10);
    if (e == buf || *e || errno || v == 0 || v > MAX_SLOTS) {
        irt_set_err(err, cap, "corrupt artifact (no valid slot count in the manifest)");
        return -1;
    }
    a->n_slots = (uint32_t)v;
    if (!irt_manifest_get(m, "workspace", buf, sizeof buf)) buf[0] = 0;
    errno = 0;
    v = strtoull(buf, &e, 10);
    if (e == buf || *e || errno || v > MAX_WORKSPACE) {
        irt_set_err(err, cap, "corrupt artifact (no valid workspace size in the manifest)");
        return -1;
    }
    a->workspace = (size_t)(v + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN;
    if (!irt_manifest_get(m, "format", buf, sizeof buf) || strtoul(buf, NULL, 10) != IRT_FORMAT_VERSION) {
        irt_set_err(err, cap, "corrupt artifact (the manifest's format line does not match the header's %u)", IRT_FORMAT_VERSION);
        return -1;
    }
    for (char *l = m; *l; l++)
        if (l == m || l[-1] == '\n') {
            if (!strncmp(l, "input ", 6)) a->n_in++;
            if (!strncmp(l, "output ", 7)) a->n_out++;
        }
    a->in = calloc(a->n_in + 1, sizeof *a->in);
    a->out = calloc(a->n_out + 1, sizeof *a->out);
    a->ws_off = malloc((a->n_slots + 1) * sizeof *a->ws_off);
    a->const_ptr = calloc(a->n_slots + 1, sizeof *a->const_ptr);
    a->ws_bytes = calloc(a->n_slots + 1, sizeof *a->ws_bytes);
    a->const_len = calloc(a->n_slots + 1, sizeof *a->const_len);
    a->run_of = malloc((a->n_slots + 1) * sizeof *a->run_of);
    if (!a->in || !a->out || !a->ws_off || !a->const_ptr || !a->ws_bytes || !a->const_len || !a->run_of) {
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    for (uint32_t s = 0; s <= a->n_slots; s++) a->ws_off[s] = -1, a->run_of[s] = -1;
    uint32_t ki = 0, ko = 0, n_nodes = 0;
    char **node_op = NULL, **node_name = NULL; /* "node" lines, for the kernel calls' names */
    int rc = 0;
    for (char *l = m, *next; l && *l && !rc; l = next) {
        next = strchr(l, '\n');
        if (next) *next++ = 0;
        int bad = 0;
        unsigned idx;
        if (!strncmp(l, "input ", 6)) bad = parse_io(l, &a->in[ki], &idx) || idx != ki || a->in[ki].slot >= a->n_slots, ki++;
        else if (!strncmp(l, "output ", 7)) bad = parse_io(l, &a->out[ko], &idx) || idx != ko || a->out[ko].slot >= a->n_slots, ko++;
        else if (!strncmp(l, "inputs ", 7)) bad = parse_count(l, "inputs", &p->n_inputs, &p->have_inputs);
        else if (!strncmp(l, "outputs ", 8)) bad = parse_count(l, "outputs", &p->n_outputs, &p->have_outputs);
        else if (!strncmp(l, "wss ", 4)) bad = parse_count(l, "wss", &p->n_ws, &p->have_ws);
        else if (!strncmp(l, "consts ", 7)) bad = parse_count(l, "consts", &p->n_consts, &p->have_consts);
        else if (!strncmp(l, "kernels ", 8)) bad = parse_count(l, "kernels", &p->n_kernels, &p->have_kernels);
        else if (!strncmp(l, "bound", 5) && (l[5] == ' ' || !l[5])) { /* "bound S1 S2 ...", ascending */
            bad = p->bound != NULL || !(p->bound = calloc(a->n_slots + 1, 1));
            long long last = -1;
            for (char *q = l + 5, *e; !bad && *q; q = e) {
                errno = 0;
                unsigned long long v = strtoull(q, &e, 10);
                bad = e == q || errno || *q != ' ' || v >= a->n_slots || (long long)v <= last;
                if (!bad) p->bound[v] = 1, last = (long long)v;
            }
        }
        else if (!strncmp(l, "ws ", 3)) {
            unsigned s;
            long long off, nb;
            bad = strchr(l, '-') || sscanf(l, "ws %u %lld %lld", &s, &off, &nb) != 3 || s >= a->n_slots || off < 0 || nb < 0 ||
                  (uint64_t)off > a->workspace || (uint64_t)nb > a->workspace - (uint64_t)off || a->ws_off[s] >= 0 ||
                  a->const_ptr[s] || a->run_of[s] >= 0;
            if (!bad) a->ws_off[s] = off, a->ws_bytes[s] = nb, p->seen_ws++;
        } else if (!strncmp(l, "wsrun ", 6)) {
            unsigned k, s;
            bad = strchr(l, '-') || sscanf(l, "wsrun %u %u", &k, &s) != 2 || k != a->n_run || s >= a->n_slots ||
                  a->ws_off[s] >= 0 || a->const_ptr[s] || a->run_of[s] >= 0;
            uint32_t *rs = bad ? NULL : realloc(a->run_slot, (k + 1) * sizeof *rs);
            if (rs) a->run_slot = rs, rs[k] = s, a->run_of[s] = (int32_t)k, a->n_run++;
            else bad = 1;
        } else if (!strncmp(l, "wsruns ", 7)) {
            bad = parse_count(l, "wsruns", &p->n_runs, &p->have_runs);
        } else if (!strncmp(l, "const ", 6)) {
            unsigned s;
            unsigned long long off, nb;
            /* (no '-': scanf's %u would take "-1" for 4294967295, "-2^63" for 0) */
            bad = strchr(l, '-') || sscanf(l, "const %u %llu %llu", &s, &off, &nb) != 3 || s >= a->n_slots || off > a->consts_len ||
                  nb > a->consts_len - off || off % WS_ALIGN || a->const_ptr[s] || a->ws_off[s] >= 0 || a->run_of[s] >= 0;
            if (!bad) a->const_ptr[s] = a->consts + off, a->const_len[s] = nb, p->seen_consts++;
        } else if (!strncmp(l, "batch ", 6)) {
            long long lo, hi, dv;
            bad = a->batch || sscanf(l, "batch %63s %lld %lld %lld", a->batch_name, &lo, &hi, &dv) != 4 || dv < 1 || lo < 0 ||
                  (hi >= 0 && hi < lo) || hi < -1;
            if (!bad) {
                unescape(a->batch_name);
                a->batch = true, a->batch_lo = lo, a->batch_hi = hi, a->batch_div = dv;
            }
        } else if (!strncmp(l, "runslot ", 8)) {
            bad = a->has_runslot || strchr(l, '-') || sscanf(l, "runslot %u", &a->runslot) != 1 || a->runslot >= a->n_slots;
            a->has_runslot = !bad;
        } else if (!strncmp(l, "symslot ", 8)) {
            bad = p->have_symslot || strchr(l, '-') || sscanf(l, "symslot %u", &a->symslot) != 1 || a->symslot >= a->n_slots;
            p->have_symslot = !bad;
        } else if (!strncmp(l, "symbol ", 7)) {
            long long lo, hi, dv;
            unsigned id;
            bad = a->n_syms == 16;
            if (!bad) bad = sscanf(l, "symbol %u %63s %lld %lld %lld", &id, a->syms[a->n_syms].name, &lo, &hi, &dv) != 5 ||
                            dv < 1 || lo < 0 || (hi < lo && hi != -1) || id > 4096; /* hi -1: no upper bound */
            for (uint32_t q = 0; !bad && q < a->n_syms; q++) bad = a->syms[q].id == id;
            if (!bad) {
                unescape(a->syms[a->n_syms].name);
                a->syms[a->n_syms].id = id, a->syms[a->n_syms].lo = lo, a->syms[a->n_syms].hi = hi;
                a->syms[a->n_syms].div = dv;
                if (id > a->max_sym) a->max_sym = id;
                a->n_syms++;
            }
        } else if (!strncmp(l, "symcheck ", 9)) {
            unsigned i;
            char text[1024];
            bad = sscanf(l, "symcheck %u %1023s", &i, text) != 2 || i != a->n_checks || i >= 16;
            if (!bad) {
                unescape(text);
                bad = !(a->checks[a->n_checks++] = strdup(text));
            }
        } else if (!strncmp(l, "symdef ", 7)) { /* a symbol irt_shapes computes: room in the array */
            unsigned id;
            bad = sscanf(l, "symdef %u", &id) != 1 || id > 4096;
            if (!bad && id > a->max_sym) a->max_sym = id;
            p->n_symdef += !bad;
        } else if (!strncmp(l, "symdata ", 8)) { /* a symbol a kernel writes, with its largest value */
            unsigned id;
            long long hi;
            bad = a->n_data == 16 || sscanf(l, "symdata %u %lld", &id, &hi) != 2 || id > 4096 || hi < 0 || hi > (1ll << 40);
            for (uint32_t q = 0; !bad && q < a->n_syms; q++) bad = a->syms[q].id == id; /* not an input's symbol */
            if (!bad) {
                a->data[a->n_data].id = id, a->data[a->n_data++].hi = hi;
                if (id > a->max_sym) a->max_sym = id;
            }
        } else if (!strncmp(l, "insym ", 6)) {
            unsigned i, k, id;
            bad = a->n_insym == 64 || strchr(l, '-') || sscanf(l, "insym %u %u %u", &i, &k, &id) != 3 || i >= ki || k >= a->in[i].t.rank ||
                  a->in[i].t.dims[k] != -1;
            if (!bad) a->insym[a->n_insym].in = i, a->insym[a->n_insym].dim = k, a->insym[a->n_insym++].id = id;
        } else if (!strncmp(l, "insymval ", 9) || !strncmp(l, "insymmul ", 9)) { /* an i32/i64/f32/f64 input of a static count at most 16 */
            unsigned i, k, id, by = 0;
            long long c = 0;
            bool mul = l[5] == 'm';
            bad = a->n_insymval == 16 || strchr(l, '-') ||
                  (mul ? sscanf(l, "insymmul %u %u %u %u %lld", &i, &k, &id, &by, &c) != 5 || c > (1ll << 40) || by == id
                       : sscanf(l, "insymval %u %u %u", &i, &k, &id) != 3) ||
                  i >= ki;
            int32_t dt = bad ? 0 : a->in[i].t.dtype;
            bad = bad || a->in[i].t.rank > 1 || (dt != IR_DTYPE_I64 && dt != IR_DTYPE_I32 && dt != IR_DTYPE_F32 && dt != IR_DTYPE_F64) ||
                  k >= (a->in[i].t.rank ? (uint64_t)a->in[i].t.dims[0] : 1) || (a->in[i].t.rank && (a->in[i].t.dims[0] < 0 || a->in[i].t.dims[0] > 16));
            if (!bad) a->insymval[a->n_insymval++] = (IrtValueBind){.in = i, .dim = k, .id = id, .by = by, .c = c, .mul = mul};
        } else if (!strncmp(l, "kcall ", 6)) {
            unsigned i, node;
            bad = strchr(l, '-') || sscanf(l, "kcall %u %u", &i, &node) != 2 || i != a->n_kcalls || node >= n_nodes;
            if (!bad) {
                char **op = realloc(a->kop, (i + 1) * sizeof *op), **nm = op ? realloc(a->kname, (i + 1) * sizeof *nm) : NULL;
                if (op) a->kop = op;
                if (nm) a->kname = nm;
                bad = !op || !nm || !(a->kop[i] = strdup(node_op[node])) || !(a->kname[i] = strdup(node_name[node]));
                if (!bad) a->n_kcalls++;
            }
        } else if (!strncmp(l, "node ", 5)) { /* "node T OP NAME [scratch@OFF]" */
            char op[64], name[4096];
            unsigned t;
            bad = n_nodes >= MAX_SLOTS;
            char **o2 = bad ? NULL : realloc(node_op, (n_nodes + 1) * sizeof *o2);
            if (o2) node_op = o2;
            char **n2 = o2 ? realloc(node_name, (n_nodes + 1) * sizeof *n2) : NULL;
            if (n2) node_name = n2;
            bad = !o2 || !n2 || sscanf(l, "node %u %63s %4095s", &t, op, name) != 3 || t != n_nodes;
            if (!bad) {
                unescape(name);
                node_op[n_nodes] = strdup(op);
                node_name[n_nodes] = strdup(name);
                bad = !node_op[n_nodes] || !node_name[n_nodes];
                n_nodes++;
            }
        } else if (!strncmp(l, "batched ", 8)) {
            unsigned i;
            char kind[16];
            bad = sscanf(l, "batched %15s %u", kind, &i) != 2;
            if (!bad && !strcmp(kind, "input") && i < ki && a->in[i].t.rank) a->in[i].batched = true;
            else if (!bad && !strcmp(kind, "output") && i < ko && a->out[i].t.rank) a->out[i].batched = true;
            else bad = 1;
        } else if (!strncmp(l, "dtype ", 6)) {
            IrtDtype *d = &a->dtypes[a->n_dtypes];
            int code;
            unsigned long sz;
            bad = a->n_dtypes == 32 || sscanf(l, "dtype %d %15s %lu", &code, d->name, &sz) != 3 || sz != known_dtype_size(d->name);
            for (uint32_t q = 0; !bad && q < a->n_dtypes; q++)
                bad = a->dtypes[q].code == code || !strcmp(a->dtypes[q].name, d->name);
            if (!bad) {
                d->code = code;
                d->size = sz;
                a->n_dtypes++;
            }
        }
        if (bad) rc = bad_line(l, err, cap);
    }
    for (uint32_t i = 0; i < n_nodes; i++) free(node_op[i]), free(node_name[i]);
    free(node_op);
    free(node_name);
    a->string_code = irt_dtype_code(a, "string");
    return rc;
}

/* The slot a tensor is read from or written to, and what holds it. */
static const char *slot_kind(const IrtArtifact *a, uint32_t s) {
    return a->ws_off[s] >= 0 || a->run_of[s] >= 0 ? "workspace" : a->const_ptr[s] ? "constant" : "caller";
}

/* Every field against the others, after the parse: counts, dtypes, dims against the slots'
 * sizes, the special slots apart from the data ones. */
static int check_manifest(IrtArtifact *a, const Parsed *p, bool cuda, char *err, size_t cap) {
    if (!p->have_inputs || !p->have_outputs || !p->have_ws || !p->have_consts || !p->have_kernels) {
        irt_set_err(err, cap, "corrupt artifact (the manifest lacks a count line: inputs, outputs, wss, consts or kernels)");
        return -1;
    }
    if (p->n_inputs != a->n_in || p->n_outputs != a->n_out || p->n_ws != p->seen_ws || p->n_consts != p->seen_consts) {
        irt_set_err(err, cap, "corrupt artifact (the manifest says %u inputs, %u outputs, %u workspace and %u constant slots "
                    "but lists %u, %u, %u and %u)", p->n_inputs, p->n_outputs, p->n_ws, p->n_consts, a->n_in, a->n_out,
                    p->seen_ws, p->seen_consts);
        return -1;
    }
    if (a->n_kcalls && a->n_kcalls != p->n_kernels) {
        irt_set_err(err, cap, "corrupt artifact (%u kernel calls traced, %u kernels)", a->n_kcalls, p->n_kernels);
        return -1;
    }
    bool symbolic = a->n_syms || a->n_data || p->n_symdef;
    if (symbolic != p->have_symslot || (a->n_insym && !a->n_syms)) {
        irt_set_err(err, cap, "corrupt artifact (symbolic dims without their symbol slot, or the reverse)");
        return -1;
    }
    bool unbounded = false;
    for (uint32_t q = 0; q < a->n_syms; q++) unbounded |= a->syms[q].hi < 0;
    if (p->have_runs != (a->n_run > 0) || (p->have_runs && p->n_runs != a->n_run) || (a->n_run && !unbounded)) {
        irt_set_err(err, cap, "corrupt artifact (%u workspace blocks placed per run, %u counted, %s)", a->n_run, p->n_runs,
                    unbounded ? "a symbol without an upper bound" : "no symbol without an upper bound");
        return -1;
    }
    if (cuda && (a->batch || a->n_data)) { /* symbolic dims: sizes from cuda_rt.c's formulas */
        irt_set_err(err, cap, "corrupt artifact (a CUDA artifact with a per-sample batch or data symbols)");
        return -1;
    }
    uint32_t special[2] = {p->have_symslot ? a->symslot : UINT32_MAX, a->has_runslot ? a->runslot : UINT32_MAX};
    if (special[0] == special[1] && special[0] != UINT32_MAX) {
        irt_set_err(err, cap, "corrupt artifact (the symbol and run slots are one)");
        return -1;
    }
    for (int k = 0; k < 2; k++)
        if (special[k] != UINT32_MAX && (a->ws_off[special[k]] >= 0 || a->const_ptr[special[k]] || a->run_of[special[k]] >= 0)) {
            irt_set_err(err, cap, "corrupt artifact (slot %u is both data and the run's %s)", special[k], k ? "context" : "symbols");
            return -1;
        }
    for (uint32_t q = 0; q < a->n_insym + a->n_insymval; q++) {
        bool known = false, val = q >= a->n_insym;
        uint32_t id = val ? a->insymval[q - a->n_insym].id : a->insym[q].id;
        for (uint32_t j = 0; j < a->n_syms; j++) known |= a->syms[j].id == id;
        if (!known) {
            irt_set_err(err, cap, "corrupt artifact (input %u %s %u binds an unlisted symbol)",
                        val ? a->insymval[q - a->n_insym].in : a->insym[q].in, val ? "value" : "dim",
                        val ? a->insymval[q - a->n_insym].dim : a->insym[q].dim);
            return -1;
        }
    }
    for (uint32_t j = 0; j < a->n_insymval; j++) { /* the D of trunc(entry * D) is bound before it */
        const IrtValueBind *vb = &a->insymval[j];
        bool before = !vb->by;
        for (uint32_t q = 0; q < a->n_insym && !before; q++) before = a->insym[q].id == vb->by;
        for (uint32_t q = 0; q < j && !before; q++) before = a->insymval[q].id == vb->by;
        if (!before) {
            irt_set_err(err, cap, "corrupt artifact (input %u value %u is scaled by symbol %u, which no earlier line binds)",
                        vb->in, vb->dim, vb->by);
            return -1;
        }
    }
    for (uint32_t k = 0; k < a->n_in + a->n_out; k++) {
        bool in = k < a->n_in;
        const IrtIo *io = in ? &a->in[k] : &a->out[k - a->n_in];
        const IrtDtype *d = NULL;
        for (uint32_t q = 0; q < a->n_dtypes; q++)
            if (a->dtypes[q].code == io->t.dtype) d = &a->dtypes[q];
        uint64_t nb;
        const char *what = in ? "input" : "output";
        if (!d) {
            irt_set_err(err, cap, "corrupt artifact (%s '%s' has dtype %d, which the manifest does not list)", what, io->name,
                        io->t.dtype);
            return -1;
        }
        if (!tensor_bytes(&io->t, d->size, &nb)) {
            irt_set_err(err, cap, "corrupt artifact (%s '%s' has a negative dim or is too large)", what, io->name);
            return -1;
        }
        bool unbound = false;
        for (uint32_t j = 0; j < io->t.rank; j++) unbound |= io->t.dims[j] < 0;
        if (unbound && !symbolic) {
            irt_set_err(err, cap, "corrupt artifact (%s '%s' has a dim -1 but the artifact has no symbolic dims)", what, io->name);
            return -1;
        }
        if (io->batched && io->t.dims[0] != 1) {
            irt_set_err(err, cap, "corrupt artifact (batched %s '%s' is not compiled for one sample)", what, io->name);
            return -1;
        }
        uint32_t s = io->slot;
        if (s == special[0] || s == special[1]) {
            irt_set_err(err, cap, "corrupt artifact (%s '%s' is in the run's own slot %u)", what, io->name, s);
            return -1;
        }
        if (in) {
            if (a->ws_off[s] >= 0 || a->const_ptr[s] || a->run_of[s] >= 0) {
                irt_set_err(err, cap, "corrupt artifact (input '%s' has %s slot %u)", io->name, slot_kind(a, s), s);
                return -1;
            }
            for (uint32_t j = 0; j < k; j++)
                if (a->in[j].slot == s) {
                    irt_set_err(err, cap, "corrupt artifact (inputs '%s' and '%s' share slot %u)", a->in[j].name, io->name, s);
                    return -1;
                }
            continue;
        }
        /* an output is read from the workspace, a constant or an input, and holds what it reads
         * (a block placed per binding: checked on each run) */
        if (a->run_of[s] >= 0) continue;
        uint64_t have = a->ws_off[s] >= 0 ? (uint64_t)a->ws_bytes[s] : a->const_ptr[s] ? a->const_len[s] : 0;
        const IrtIo *src = NULL;
        for (uint32_t j = 0; j < a->n_in && a->ws_off[s] < 0 && !a->const_ptr[s]; j++)
            if (a->in[j].slot == s) src = &a->in[j];
        if (src) {
            bool same = src->t.dtype == io->t.dtype && src->t.rank == io->t.rank && src->batched == io->batched;
            for (uint32_t j = 0; same && j < io->t.rank; j++) same = src->t.dims[j] == io->t.dims[j];
            if (!same) {
                irt_set_err(err, cap, "corrupt artifact (output '%s' reads input '%s' but has another type)", io->name, src->name);
                return -1;
            }
            continue;
        }
        if (a->ws_off[s] < 0 && !a->const_ptr[s]) {
            irt_set_err(err, cap, "corrupt artifact (output '%s' reads slot %u, which nothing holds)", io->name, s);
            return -1;
        }
        if (nb > have || (!unbound && nb != have)) { /* dims bound at run time are checked then */
            irt_set_err(err, cap, "corrupt artifact (output '%s' has %llu bytes, its %s slot %u holds %llu)", io->name,
                        (unsigned long long)nb, slot_kind(a, s), s, (unsigned long long)have);
            return -1;
        }
    }
    if (!p->bound) {
        irt_set_err(err, cap, "corrupt artifact (the manifest lacks its bound line)");
        return -1;
    }
    /* the workspace is what its slots span (blocks rounded to 64 bytes, 64 more for large
     * ones): a larger one would only make runs allocate memory nothing uses */
    uint64_t span = 0;
    for (uint32_t s = 0; s < a->n_slots; s++)
        if (a->ws_off[s] >= 0 && (uint64_t)a->ws_off[s] + (uint64_t)a->ws_bytes[s] > span)
            span = (uint64_t)a->ws_off[s] + (uint64_t)a->ws_bytes[s];
    if (a->workspace > (span + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN + 2 * WS_ALIGN) {
        irt_set_err(err, cap, "corrupt artifact (a workspace of %zu bytes, its slots span %llu)", a->workspace,
                    (unsigned long long)span);
        return -1;
    }
    /* the slots the binding lines bind, against the list the writer made of them */
    for (uint32_t s = 0; s < a->n_slots; s++) {
        bool b = a->ws_off[s] >= 0 || a->const_ptr[s] || a->run_of[s] >= 0 || (p->have_symslot && s == a->symslot) ||
                 (a->has_runslot && s == a->runslot);
        for (uint32_t i = 0; i < a->n_in && !b; i++) b = a->in[i].slot == s;
        if (b != (p->bound[s] != 0)) {
            irt_set_err(err, cap, "corrupt artifact (slot %u is %s by the manifest's lines but %s on its bound line)", s,
                        b ? "bound" : "not bound", b ? "not listed" : "listed");
            return -1;
        }
    }
    return 0;
}

/* ---- the code section, read as data ------------------------------------------------------ */

static uint16_t host_machine(void) {
#if defined(__x86_64__)
    return EM_X86_64;
#elif defined(__aarch64__)
    return EM_AARCH64;
#else
    return EM_NONE;
#endif
}

/* Whether [off, off + n * size) lies inside len bytes. */
static bool in_range(uint64_t off, uint64_t n, uint64_t size, uint64_t len) {
    uint64_t bytes;
    return !__builtin_mul_overflow(n, size, &bytes) && off <= len && bytes <= len - off;
}

/* The CPU code: a 64-bit little-endian shared object for this machine whose program and section
 * headers and dynamic symbols lie inside it, exporting irt_entry (and irt_shapes when the
 * manifest has symbolic dims). Checked from the bytes alone: nothing is mapped or run. info gets
 * one line about it. */
static int check_elf(const IrtArtifact *a, const unsigned char *c, size_t len, char *info, size_t icap, char *err,
                     size_t cap) {
    Elf64_Ehdr h;
    if (len < sizeof h || memcmp(c, ELFMAG, SELFMAG) != 0) {
        irt_set_err(err, cap, "corrupt artifact (the code section is not an ELF object)");
        return -1;
    }
    memcpy(&h, c, sizeof h);
    if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB || h.e_type != ET_DYN ||
        h.e_machine != host_machine() || h.e_ehsize != sizeof h || h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum == 0 ||
        !in_range(h.e_phoff, h.e_phnum, sizeof(Elf64_Phdr), len) || h.e_shentsize != sizeof(Elf64_Shdr) ||
        !in_range(h.e_shoff, h.e_shnum, sizeof(Elf64_Shdr), len)) {
        irt_set_err(err, cap, "corrupt artifact (the code is not a 64-bit shared object for this machine with its headers "
                    "inside it)");
        return -1;
    }
    uint32_t loads = 0;
    for (uint32_t i = 0; i < h.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, c + h.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if (ph.p_type != PT_LOAD) continue;
        loads++;
        if (!in_range(ph.p_offset, 1, ph.p_filesz, len) || ph.p_filesz > ph.p_memsz) {
            irt_set_err(err, cap, "corrupt artifact (the code's segment %u lies outside it)", i);
            return -1;
        }
    }
    const char *need[3] = {"irt_entry", a->n_syms || a->n_data ? "irt_shapes" : NULL, "irt_entry_trace"};
    bool have[3] = {false, false, false};
    uint32_t n_dynsym = 0;
    for (uint32_t i = 0; i < h.e_shnum; i++) {
        Elf64_Shdr sh, st;
        memcpy(&sh, c + h.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_DYNSYM) continue;
        n_dynsym++;
        if (sh.sh_entsize != sizeof(Elf64_Sym) || !in_range(sh.sh_offset, 1, sh.sh_size, len) || sh.sh_link >= h.e_shnum) {
            irt_set_err(err, cap, "corrupt artifact (the code's dynamic symbols lie outside it)");
            return -1;
        }
        memcpy(&st, c + h.e_shoff + (uint64_t)sh.sh_link * sizeof st, sizeof st);
        if (st.sh_type != SHT_STRTAB || !in_range(st.sh_offset, 1, st.sh_size, len) || st.sh_size == 0 ||
            c[st.sh_offset + st.sh_size - 1] != 0) {
            irt_set_err(err, cap, "corrupt artifact (the code's symbol names lie outside it)");
            return -1;
        }
        for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym sym;
            memcpy(&sym, c + sh.sh_offset + k * sizeof sym, sizeof sym);
            if (sym.st_name >= st.sh_size) {
                irt_set_err(err, cap, "corrupt artifact (a symbol name of the code lies outside it)");
                return -1;
            }
            const char *name = (const char *)c + st.sh_offset + sym.st_name;
            for (int q = 0; q < 3; q++)
                if (need[q] && sym.st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym.st_info) == STT_FUNC && !strcmp(name, need[q]))
                    have[q] = true;
        }
    }
    for (int q = 0; q < 2; q++)
        if (need[q] && !have[q]) {
            irt_set_err(err, cap, "corrupt artifact (the code does not export %s)", need[q]);
            return -1;
        }
    if (!n_dynsym || !loads) {
        irt_set_err(err, cap, "corrupt artifact (the code has no %s)", loads ? "dynamic symbols" : "loadable segment");
        return -1;
    }
    irt_set_err(info, icap, "code: ELF64 shared object for %s, %zu bytes, %u loadable segments, exports irt_entry%s%s",
                host_arch(), len, loads, have[2] ? " irt_entry_trace" : "", have[1] ? " irt_shapes" : "");
    return 0;
}

/* The CUDA code section: a cubin (an ELF object for the GPU) and the PTX text after it, both
 * where the manifest says. */
static int check_cuda_code(const char *m, const unsigned char *c, size_t len, char *info, size_t icap, char *err,
                           size_t cap) {
    char buf[128];
    unsigned long long cub_off, cub_len, ptx_off, ptx_len;
    if (!irt_manifest_get(m, "cubin", buf, sizeof buf) || sscanf(buf, "%llu %llu", &cub_off, &cub_len) != 2 ||
        !irt_manifest_get(m, "ptx", buf, sizeof buf) || sscanf(buf, "%llu %llu", &ptx_off, &ptx_len) != 2 ||
        !in_range(cub_off, 1, cub_len, len) || !in_range(ptx_off, 1, ptx_len, len) || ptx_len >= len - ptx_off ||
        c[ptx_off + ptx_len] != 0 || cub_len < sizeof(Elf64_Ehdr) || memcmp(c + cub_off, ELFMAG, SELFMAG) != 0 ||
        c[cub_off + EI_CLASS] != ELFCLASS64) {
        irt_set_err(err, cap, "corrupt artifact (bad cubin/ptx section)");
        return -1;
    }
    irt_set_err(info, icap, "code: cubin %llu bytes, PTX %llu bytes", cub_len, ptx_len);
    return 0;
}

static int load_code(IrtArtifact *a, const unsigned char *code, size_t len, char *err, size_t cap) {
    a->fd = memfd_create("irtool-artifact", MFD_CLOEXEC);
    if (a->fd < 0) {
        irt_set_err(err, cap, "cannot create a memfd for the code: %s", strerror(errno));
        return -1;
    }
    for (size_t done = 0; done < len;) {
        ssize_t k = write(a->fd, code + done, len - done);
        if (k <= 0) {
            irt_set_err(err, cap, "cannot write the code to a memfd: %s", strerror(errno));
            return -1;
        }
        done += (size_t)k;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", a->fd);
    a->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->dl) {
        irt_set_err(err, cap, "cannot load the artifact's code: %s", dlerror());
        return -1;
    }
    void *sym = dlsym(a->dl, "irt_entry");
    if (!sym) {
        irt_set_err(err, cap, "corrupt artifact (the code has no irt_entry)");
        return -1;
    }
    memcpy(&a->entry, &sym, sizeof sym);
    sym = dlsym(a->dl, "irt_entry_trace"); /* optional: artifacts before it have none */
    if (sym) memcpy(&a->entry_trace, &sym, sizeof sym);
    if (a->n_syms || a->n_data) {
        sym = dlsym(a->dl, "irt_shapes");
        if (!sym) {
            irt_set_err(err, cap, "corrupt artifact (symbolic dims but the code has no irt_shapes)");
            return -1;
        }
        memcpy(&a->shapes, &sym, sizeof sym);
    }
    return 0;
}

/* CUDA artifacts: the parsed tables go to cuda_rt.c, which owns the device side. */
static int load_cuda(IrtArtifact *a, const char *m, const uint64_t sec[4][2], char *err, size_t cap) {
    uint64_t *coff = calloc(a->n_slots + 1, sizeof *coff);
    if (!coff) {
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    for (uint32_t s = 0; s < a->n_slots; s++)
        if (a->const_ptr[s]) coff[s] = (uint64_t)((const unsigned char *)a->const_ptr[s] - a->consts) + 1;
    IrtCudaTables t = {a->n_slots, a->ws_off, coff, a->workspace, a->consts, a->consts_len, a->file + sec[2][0], sec[2][1]};
    a->cuda = irt_cuda_load(m, &t, err, cap);
    free(coff);
    return a->cuda ? 0 : -1;
}

/* irt_run for CUDA artifacts: the guards have passed; outputs are malloc'd here. */
static int run_cuda(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, uint32_t repeat, double *ms,
                    const IrtTensor *osh, const IrtCudaBind *bind, char *err, size_t cap);

/* A new artifact over file bytes it takes over (a mapping when mapped, else malloc'd). */
static IrtArtifact *artifact_new(unsigned char *file, size_t len, bool mapped, char *err, size_t cap) {
    IrtArtifact *a = calloc(1, sizeof *a);
    if (!a) {
        if (mapped) munmap(file, len);
        else free(file);
        irt_set_err(err, cap, "out of memory");
        return NULL;
    }
    a->fd = -1;
    pthread_mutex_init(&a->pool_mu, NULL);
    a->file = file;
    a->file_len = len;
    a->mapped = mapped;
    return a;
}

/* Everything checked before any code is touched: header, checksum, the manifest's fields against
 * each other and the sections, and the code section's headers as data. On success *m is the
 * manifest text (malloc'd) and a's tables are set. */
static int open_checked(IrtArtifact *a, uint64_t sec[4][2], char **m, bool *cuda, char *info, size_t icap, char *err,
                        size_t cap) {
    *m = NULL;
    if (check_header(a->file, a->file_len, sec, err, cap)) return -1;
    if (!(*m = dup_manifest(a->file, sec))) {
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    if (strlen(*m) != sec[0][1]) {
        irt_set_err(err, cap, "corrupt artifact (a NUL byte in the manifest)");
        return -1;
    }
    *cuda = irt_cuda_manifest(*m);
    a->consts = a->file + sec[1][0];
    a->consts_len = sec[1][1];
    char *lines = strdup(*m); /* parse_manifest splits it */
    Parsed p = {0};
    int rc = lines ? parse_manifest(a, lines, &p, err, cap) : -1;
    if (!lines) irt_set_err(err, cap, "out of memory");
    if (!rc) rc = check_manifest(a, &p, *cuda, err, cap);
    free(p.bound);
    free(lines);
    const unsigned char *code = a->file + sec[2][0];
    if (!rc) rc = *cuda ? check_cuda_code(*m, code, sec[2][1], info, icap, err, cap)
                        : check_elf(a, code, sec[2][1], info, icap, err, cap);
    return rc;
}

static IrtArtifact *load_owned(unsigned char *file, size_t len, bool mapped, char *err, size_t cap) {
    IrtArtifact *a = artifact_new(file, len, mapped, err, cap);
    if (!a) return NULL;
    uint64_t sec[4][2];
    char *m = NULL;
    bool cuda = false;
    int rc = open_checked(a, sec, &m, &cuda, NULL, 0, err, cap);
    if (!rc && !cuda) rc = irt_preflight(m, err, cap); /* CUDA: its preflight follows the steps' parse */
    if (!rc && !cuda && manifest_feature(m, "+amx-tile")) rc = irt_cpu_amx_enable(err, cap);
    char blas_flag[16] = "";
    if (!rc && !cuda) irt_manifest_get(m, "blas", blas_flag, sizeof blas_flag);
    if (!rc && !cuda && strcmp(blas_flag, "0") != 0 && irt_blas_require(err, cap)) rc = -1;
    if (!rc) rc = cuda ? load_cuda(a, m, sec, err, cap) : load_code(a, a->file + sec[2][0], sec[2][1], err, cap);
    free(m);
    if (rc) {
        irt_free(a);
        return NULL;
    }
    return a;
}

IrtArtifact *irt_load_memory(const void *data, size_t len, char *err, size_t cap) {
    /* the constants are used in place: keep them 64-byte aligned in memory too */
    unsigned char *file = aligned_alloc(WS_ALIGN, (len + WS_ALIGN) / WS_ALIGN * WS_ALIGN);
    if (!file) {
        irt_set_err(err, cap, "out of memory");
        return NULL;
    }
    memcpy(file, data, len);
    return load_owned(file, len, false, err, cap);
}

/* The file mapped (read-only, private): no copy. Falls back to reading it when it cannot be
 * mapped. How fast the weights stream depends on how the page cache holds the file: a freshly
 * written artifact is mostly in 2 MiB folios, a copy made with cp(1) in small ones (the same
 * ResNet-50 3-5% slower). Only regular files: a FIFO or a device would block or never end. */
static int map_file(const char *path, unsigned char **data, size_t *len, bool *mapped, char *err, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        irt_set_err(err, cap, "cannot open '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        irt_set_err(err, cap, "'%s' is not a regular file", path);
        close(fd);
        return -1;
    }
    if (sb.st_size >= (off_t)IRT_HEADER_SIZE) {
        void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        /* pages not in the page cache yet come in as 2 MiB folios mapped by one TLB entry each
         * (kernels with large folios for the file system: ResNet-50's weights all in 2 MiB
         * mappings instead of 64 of 113 MB, load 12-14 -> 4-5 ms from disk, runs 1-3% faster);
         * a hint only, so its failure is ignored */
        if (map != MAP_FAILED) {
            close(fd);
            (void)madvise(map, (size_t)sb.st_size, MADV_HUGEPAGE);
            *data = map, *len = (size_t)sb.st_size, *mapped = true;
            return 0;
        }
    }
    close(fd);
    unsigned char *d;
    if (read_whole(path, &d, len, err, cap)) return -1;
    *data = aligned_alloc(WS_ALIGN, (*len + WS_ALIGN) / WS_ALIGN * WS_ALIGN);
    if (*data) memcpy(*data, d, *len);
    free(d);
    if (!*data) irt_set_err(err, cap, "out of memory");
    *mapped = false;
    return *data ? 0 : -1;
}

IrtArtifact *irt_load(const char *path, char *err, size_t cap) {
    unsigned char *d;
    size_t len;
    bool mapped;
    return map_file(path, &d, &len, &mapped, err, cap) ? NULL : load_owned(d, len, mapped, err, cap);
}

int irt_verify(const char *path, char *info, size_t info_cap, char *err, size_t cap) {
    unsigned char *d;
    size_t len;
    bool mapped;
    if (info && info_cap) info[0] = 0;
    if (map_file(path, &d, &len, &mapped, err, cap)) return -1;
    IrtArtifact *a = artifact_new(d, len, mapped, err, cap);
    if (!a) return -1;
    uint64_t sec[4][2];
    char *m = NULL;
    bool cuda = false;
    int rc = open_checked(a, sec, &m, &cuda, info, info_cap, err, cap);
    free(m);
    irt_free(a);
    return rc;
}

void irt_free(IrtArtifact *a) {
    if (!a) return;
    irt_cuda_free(a->cuda);
    if (a->dl) dlclose(a->dl);
    if (a->fd >= 0) close(a->fd);
    for (uint32_t i = 0; a->in && i < a->n_in; i++) free(a->in[i].name);
    for (uint32_t i = 0; a->out && i < a->n_out; i++) free(a->out[i].name);
    free(a->in);
    free(a->out);
    free(a->ws_off);
    free(a->ws_bytes);
    free(a->run_of);
    free(a->run_slot);
    free(a->const_len);
    free(a->const_ptr);
    for (uint32_t i = 0; i < a->n_kcalls; i++) free(a->kop[i]), free(a->kname[i]);
    for (uint32_t i = 0; i < a->n_checks; i++) free(a->checks[i]);
    free(a->kop);
    free(a->kname);
    if (a->mapped) munmap(a->file, a->file_len);
    else free(a->file);
    for (uint32_t i = 0; i < a->n_pool; i++) free(a->pool[i]);
    pthread_mutex_destroy(&a->pool_mu);
    free(a);
}

uint32_t irt_num_inputs(const IrtArtifact *a) { return a->n_in; }
uint32_t irt_num_outputs(const IrtArtifact *a) { return a->n_out; }
const char *irt_input_name(const IrtArtifact *a, uint32_t i) { return a->in[i].name; }
const char *irt_output_name(const IrtArtifact *a, uint32_t i) { return a->out[i].name; }
void irt_input_info(const IrtArtifact *a, uint32_t i, IrtTensor *out) {
    *out = a->in[i].t;
    if (a->in[i].batched) out->dims[0] = -1;
}
void irt_output_info(const IrtArtifact *a, uint32_t i, IrtTensor *out) {
    *out = a->out[i].t;
    if (a->out[i].batched) out->dims[0] = -1;
}

const char *irt_batch_symbol(const IrtArtifact *a) { return a->batch ? a->batch_name : NULL; }

/* The codes irtool writes (IrDType of ir/ir.h, pinned there): names for codes an artifact does
 * not list, so a caller's f64 is reported as f64 even when the model never uses f64. */
static const IrtDtype STD_DTYPES[] = {
    {1, 8, "f64"}, {2, 4, "f32"}, {3, 2, "f16"}, {4, 2, "bf16"}, {5, 1, "f8e4m3fn"}, {6, 1, "f8e5m2"},
    {7, 8, "i64"}, {8, 4, "i32"}, {9, 2, "i16"}, {10, 1, "i8"}, {11, 8, "u64"}, {12, 4, "u32"},
    {13, 2, "u16"}, {14, 1, "u8"}, {15, 1, "bool"}, {16, sizeof(IrtString), "string"},
};

static const IrtDtype *find_dtype(const IrtArtifact *a, int32_t code) {
    for (uint32_t i = 0; i < a->n_dtypes; i++)
        if (a->dtypes[i].code == code) return &a->dtypes[i];
    for (size_t i = 0; i < sizeof STD_DTYPES / sizeof *STD_DTYPES; i++)
        if (STD_DTYPES[i].code == code) return &STD_DTYPES[i];
    return NULL;
}

size_t irt_dtype_size(const IrtArtifact *a, int32_t dtype) {
    const IrtDtype *d = find_dtype(a, dtype);
    return d ? d->size : 0;
}

const char *irt_dtype_name(const IrtArtifact *a, int32_t dtype) {
    const IrtDtype *d = find_dtype(a, dtype);
    return d ? d->name : "?";
}

int32_t irt_dtype_code(const IrtArtifact *a, const char *name) {
    for (uint32_t i = 0; i < a->n_dtypes; i++)
        if (strcmp(a->dtypes[i].name, name) == 0) return a->dtypes[i].code;
    for (size_t i = 0; i < sizeof STD_DTYPES / sizeof *STD_DTYPES; i++)
        if (strcmp(STD_DTYPES[i].name, name) == 0) return STD_DTYPES[i].code;
    return -1;
}

/* The symbol of input i's dim k (the batch symbol, or one bound from it), else NULL. */
const char *irt_input_dim_symbol(const IrtArtifact *a, uint32_t i, uint32_t k) {
    if (i >= a->n_in || k >= a->in[i].t.rank) return NULL;
    if (k == 0 && a->in[i].batched) return a->batch_name;
    for (uint32_t j = 0; j < a->n_insym; j++)
        if (a->insym[j].in == i && a->insym[j].dim == k)
            for (uint32_t q = 0; q < a->n_syms; q++)
                if (a->syms[q].id == a->insym[j].id) return a->syms[q].name;
    return NULL;
}

/* The batch symbol for dim 0 of a batched output, else NULL (other output dims are computed). */
const char *irt_output_dim_symbol(const IrtArtifact *a, uint32_t i, uint32_t k) {
    return i < a->n_out && k == 0 && a->out[i].batched ? a->batch_name : NULL;
}

/* "f32[B, S, 64]": the dtype, and each dim as its symbol when it has one (the compiled shape). */
static void shape_str(const IrtArtifact *a, const IrtTensor *t, int in, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "%s[", irt_dtype_name(a, t->dtype));
    for (uint32_t i = 0; i < t->rank && i < IRT_MAX_RANK && k < cap; i++) {
        const char *sym = in >= 0 ? irt_input_dim_symbol(a, (uint32_t)in, i) : NULL;
        if (sym) k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", sym);
        else k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    }
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* Edit distance of two short names (for "did you mean"); capped at 32 characters. */
static size_t name_distance(const char *x, const char *y) {
    size_t nx = strlen(x), ny = strlen(y), row[33];
    if (nx > 32 || ny > 32) return (size_t)-1;
    for (size_t j = 0; j <= ny; j++) row[j] = j;
    for (size_t i = 1; i <= nx; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= ny; j++) {
            size_t up = row[j], best = diag + (x[i - 1] != y[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[ny];
}

static int io_find(const IrtIo *io, uint32_t n, const char *kind, const char *name, char *err, size_t cap) {
    for (uint32_t i = 0; name && i < n; i++)
        if (strcmp(io[i].name, name) == 0) return (int)i;
    char list[512] = "";
    size_t best = 3, at = 0; /* suggest a name at most 2 edits away */
    const char *near = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (at < sizeof list) at += (size_t)snprintf(list + at, sizeof list - at, "%s'%s'", i ? ", " : "", io[i].name);
        size_t d = name ? name_distance(name, io[i].name) : (size_t)-1;
        size_t longer = name && strlen(name) > strlen(io[i].name) ? strlen(name) : strlen(io[i].name);
        if (d < best && d < longer) best = d, near = io[i].name; /* not a rewrite of the whole name */
    }
    char hint[160] = "";
    if (near) snprintf(hint, sizeof hint, " (did you mean '%s'?)", near);
    irt_set_err(err, cap, "unknown %s '%s'%s; the artifact's %ss are %s", kind, name ? name : "(null)", hint, kind,
                n ? list : "none");
    return -1;
}

int irt_input_find(const IrtArtifact *a, const char *name, char *err, size_t cap) {
    return io_find(a->in, a->n_in, "input", name, err, cap);
}
int irt_output_find(const IrtArtifact *a, const char *name, char *err, size_t cap) {
    return io_find(a->out, a->n_out, "output", name, err, cap);
}

void irt_tensor_free(IrtTensor *t) {
    if (!t) return;
    free(t->data);
    t->data = NULL;
}

/* Bytes of t (its dims checked non-negative by check_inputs or computed by the code), or
 * SIZE_MAX when the count overflows. */
static size_t nbytes(const IrtArtifact *a, const IrtTensor *t) {
    size_t n = irt_dtype_size(a, t->dtype);
    for (uint32_t i = 0; i < t->rank && i < IRT_MAX_RANK; i++)
        if (t->dims[i] < 0 || __builtin_mul_overflow(n, (size_t)t->dims[i], &n)) return SIZE_MAX;
    return n;
}

/* Workspaces are kept between runs (at most WS_POOL), so a steady stream of runs reuses mapped
 * memory instead of faulting in a fresh workspace each time; concurrent runs each hold one. A
 * binding that needs more (blocks placed per binding) replaces the one it takes by a larger one,
 * which then stays in the pool: the workspace grows to the largest binding seen. *len: its size. */
static char *ws_take(IrtArtifact *a, size_t need, size_t *len) {
    *len = 0;
    if (!need) return NULL;
    char *ws = NULL;
    pthread_mutex_lock(&a->pool_mu);
    if (a->n_pool) --a->n_pool, ws = a->pool[a->n_pool], *len = a->pool_len[a->n_pool];
    pthread_mutex_unlock(&a->pool_mu);
    if (ws && *len >= need) return ws;
    free(ws);
    *len = need;
    return irt_workspace_alloc(need);
}

static void ws_give(IrtArtifact *a, char *ws, size_t len) {
    if (!ws) return;
    pthread_mutex_lock(&a->pool_mu);
    if (a->n_pool < WS_POOL) {
        a->pool_len[a->n_pool] = len;
        a->pool[a->n_pool++] = ws;
        ws = NULL;
    }
    pthread_mutex_unlock(&a->pool_mu);
    free(ws);
}

/* "S = 12 is outside 8..4096 (input 'x' dim 1)": a symbol's value against its compiled range
 * (hi < 0: unbounded) and divisor; 0 when it holds. */
static int range_err(const char *sym, int64_t v, int64_t lo, int64_t hi, int64_t div, const char *in, uint32_t dim,
                     char *err, size_t cap) {
    char where[320];
    snprintf(where, sizeof where, in[0] == '\'' ? "input %s dim %u" : "%s", in, dim);
    if (v < lo || (hi >= 0 && v > hi)) {
        if (hi >= 0) irt_set_err(err, cap, "%s = %lld is outside %lld..%lld (%s)", sym, (long long)v, (long long)lo,
                                 (long long)hi, where);
        else irt_set_err(err, cap, "%s = %lld is below its minimum %lld (%s)", sym, (long long)v, (long long)lo, where);
        return -1;
    }
    if (div > 1 && v % div != 0) {
        irt_set_err(err, cap, "%s = %lld is not a multiple of %lld (%s)", sym, (long long)v, (long long)div, where);
        return -1;
    }
    return 0;
}

/* The batch of a symbolic-batch artifact from its inputs (guards checked), else 1. */
static int batch_of(const IrtArtifact *a, const IrtTensor *inputs, int64_t *batch, char *err, size_t cap) {
    *batch = 1;
    if (!a->batch) return 0;
    int64_t b = -1;
    int first = -1; /* the batched input b comes from */
    for (uint32_t i = 0; i < a->n_in; i++) {
        if (!a->in[i].batched || inputs[i].rank == 0) continue;
        if (b < 0) first = (int)i;
        if (b >= 0 && inputs[i].dims[0] != b) {
            irt_set_err(err, cap, "guard failed: input '%s' has %s = %lld but an earlier input has %lld", a->in[i].name,
                    a->batch_name, (long long)inputs[i].dims[0], (long long)b);
            return -1;
        }
        b = inputs[i].dims[0];
    }
    if (b < 0) b = 1;
    if (b < a->batch_lo || (a->batch_hi >= 0 && b > a->batch_hi) || (a->batch_div > 1 && b % a->batch_div)) {
        char in[300] = "no batched input";
        if (first >= 0) snprintf(in, sizeof in, "'%s'", a->in[first].name);
        (void)range_err(a->batch_name, b, a->batch_lo, a->batch_hi, a->batch_div, in, 0, err, cap);
        return -1;
    }
    *batch = b;
    return 0;
}

/* Symbolic dims: binds every symbol from the input dims (sym by id; guards checked), then
 * asks the code for the output dims (osh) and checks the workspace holds the binding. */
/* "B = 2, S = 7": the symbols' values in a binding, for error messages. */
static void binding_str(const IrtArtifact *a, const int64_t *sym, char *out, size_t cap) {
    out[0] = 0;
    for (uint32_t q = 0; q < a->n_syms; q++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s = %lld", q ? ", " : "", a->syms[q].name, (long long)sym[a->syms[q].id]);
}

/* run: each block placed per binding, its offset and bytes (2 * n_run); *need: the workspace
 * bytes this binding needs. */
static int bind_syms(const IrtArtifact *a, const IrtTensor *inputs, int64_t *sym, IrtTensor *osh, int64_t *run, size_t *need,
                     char *err, size_t cap) {
    for (uint32_t s = 0; s <= a->max_sym; s++) sym[s] = -1;
    for (uint32_t j = 0; j < a->n_insym; j++) {
        uint32_t i = a->insym[j].in, k = a->insym[j].dim, id = a->insym[j].id;
        if (inputs[i].rank != a->in[i].t.rank || id > a->max_sym) continue; /* check_inputs reports the rank */
        int64_t v = inputs[i].dims[k];
        const char *name = "?";
        for (uint32_t q = 0; q < a->n_syms; q++)
            if (a->syms[q].id == id) name = a->syms[q].name;
        if (sym[id] >= 0 && sym[id] != v) {
            irt_set_err(err, cap, "guard failed: input '%s' dim %u is %lld but %s = %lld from an earlier input dim",
                        a->in[i].name, k, (long long)v, name, (long long)sym[id]);
            return -1;
        }
        sym[id] = v;
    }
    for (uint32_t j = 0; j < a->n_insymval; j++) { /* entries of an input (its shape was checked) */
        const IrtValueBind *vb = &a->insymval[j];
        uint32_t i = vb->in, k = vb->dim, id = vb->id;
        if (id > a->max_sym || vb->by > a->max_sym) continue;
        int32_t dt = a->in[i].t.dtype;
        bool fl = dt == IR_DTYPE_F32 || dt == IR_DTYPE_F64;
        int64_t e = dt == IR_DTYPE_I64 ? ((const int64_t *)inputs[i].data)[k] : dt == IR_DTYPE_I32 ? ((const int32_t *)inputs[i].data)[k] : 0;
        double f = dt == IR_DTYPE_F32 ? ((const float *)inputs[i].data)[k] : dt == IR_DTYPE_F64 ? ((const double *)inputs[i].data)[k] : (double)e;
        if (vb->mul) /* Resize's out = trunc(in * scale), as the interpreter computes it */
            f *= (double)(vb->by ? sym[vb->by] : vb->c), fl = true;
        if (fl) /* truncated, as OneHot's depth; NaN and the huge: -1, refused below */
            sym[id] = f == f && f > -1e15 && f < 1e15 ? (int64_t)f : -1;
        else sym[id] = e;
    }
    for (uint32_t q = 0; q < a->n_data; q++) sym[a->data[q].id] = a->data[q].hi; /* outputs sized for the most */
    for (uint32_t q = 0; q < a->n_syms; q++) {
        int64_t v = sym[a->syms[q].id];
        if (v >= a->syms[q].lo && (a->syms[q].hi < 0 || v <= a->syms[q].hi) && (a->syms[q].div <= 1 || v % a->syms[q].div == 0))
            continue;
        char in[300] = "no input dim";
        uint32_t dim = 0;
        for (uint32_t j = a->n_insym; j-- > 0;) /* the first input dim that binds it */
            if (a->insym[j].id == a->syms[q].id) {
                snprintf(in, sizeof in, "'%s'", a->in[a->insym[j].in].name);
                dim = a->insym[j].dim;
            }
        for (uint32_t j = 0; j < a->n_insymval; j++) /* or the input entry: it sizes a result */
            if (a->insymval[j].id == a->syms[q].id)
                snprintf(in, sizeof in, "entry %u of input %s, which gives a result's dims", a->insymval[j].dim,
                         a->in[a->insymval[j].in].name);
        if (range_err(a->syms[q].name, sym[a->syms[q].id], a->syms[q].lo, a->syms[q].hi, a->syms[q].div, in, dim, err, cap))
            return -1;
    }
    uint32_t nd = 0;
    for (uint32_t i = 0; i < a->n_out; i++) nd += a->out[i].t.rank;
    int64_t *d = malloc((nd + 1 + a->n_checks + 2 * (size_t)a->n_run) * sizeof *d);
    if (!d) {
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    uint32_t *ranks = a->cuda ? calloc(a->n_out + 1, sizeof *ranks) : NULL;
    for (uint32_t i = 0; ranks && i < a->n_out; i++) ranks[i] = a->out[i].t.rank;
    IrtCudaShapeCounts kc = {a->n_out, ranks, a->n_checks, a->n_run, a->run_slot};
    int bad = a->cuda ? (ranks ? irt_cuda_shapes(a->cuda, &kc, sym, a->max_sym + 1, a->workspace, d) : -1) : (a->shapes(sym, d), 0);
    free(ranks);
    if (bad) { /* CUDA: the formulas (cuda_rt.c) instead of the code's irt_shapes */
        char vals[256];
        binding_str(a, sym, vals, sizeof vals);
        irt_set_err(err, cap, "the artifact's sizes do not evaluate for %s (a corrupt artifact, or a division by zero)", vals);
        free(d);
        return -1;
    }
    uint32_t pos = 0;
    for (uint32_t i = 0; i < a->n_out; i++) {
        osh[i] = a->out[i].t;
        for (uint32_t k = 0; k < osh[i].rank; k++) osh[i].dims[k] = d[pos++];
    }
    int64_t ext = d[pos];
    for (uint32_t i = 0; i < a->n_out; i++)
        for (uint32_t k = 0; k < osh[i].rank; k++)
            if (osh[i].dims[k] < 0) { /* e.g. a Conv or pool window larger than its input for this binding */
                char vals[256];
                binding_str(a, sym, vals, sizeof vals);
                irt_set_err(err, cap, "guard failed: output '%s' dim %u is %lld for %s (an op's window larger than its input?)",
                            a->out[i].name, k, (long long)osh[i].dims[k], vals);
                free(d);
                return -1;
            }
    for (uint32_t i = 0; i < a->n_checks; i++)
        if (d[pos + 1 + i] != 0) {
            char vals[256];
            binding_str(a, sym, vals, sizeof vals);
            irt_set_err(err, cap, "guard failed: %s does not hold for %s", a->checks[i], vals);
            free(d);
            return -1;
        }
    memcpy(run, d + pos + 1 + a->n_checks, 2 * (size_t)a->n_run * sizeof *run);
    free(d);
    if (ext < 0 || (!a->n_run && (size_t)ext > a->workspace)) {
        irt_set_err(err, cap, "the binding needs %lld workspace bytes, the artifact planned %zu", (long long)ext, a->workspace);
        return -1;
    }
    if ((uint64_t)ext > MAX_WORKSPACE) {
        char vals[256];
        binding_str(a, sym, vals, sizeof vals);
        irt_set_err(err, cap, "%s needs %lld workspace bytes, more than the runtime allocates (%llu)", vals, (long long)ext,
                    (unsigned long long)MAX_WORKSPACE);
        return -1;
    }
    /* the code's blocks lie above the static part and inside what it asks for */
    for (uint32_t k = 0; k < a->n_run; k++) {
        int64_t off = run[2 * k], nb = run[2 * k + 1];
        if (off < (int64_t)a->workspace || off % WS_ALIGN || nb < 0 || nb > ext || off > ext - nb) {
            irt_set_err(err, cap, "corrupt artifact (workspace block %u at %lld, %lld bytes, outside the %lld the binding needs)", k,
                        (long long)off, (long long)nb, (long long)ext);
            return -1;
        }
    }
    *need = (size_t)ext > a->workspace ? (size_t)ext : a->workspace;
    return 0;
}

/* Outputs whose dims the code computed for this run: each must fit the slot it is read from
 * (the loader checked the static ones). */
static uint64_t slot_bytes(const IrtArtifact *a, uint32_t s, const int64_t *run) {
    uint64_t have = a->ws_off[s] >= 0 ? (uint64_t)a->ws_bytes[s] : a->const_ptr[s] ? a->const_len[s] : UINT64_MAX;
    return a->run_of[s] >= 0 ? (uint64_t)run[2 * a->run_of[s] + 1] : have;
}

/* With data symbols (at their bounds before the run) an output's dims are bounds: a Reshape to a
 * shape given at run time has one per dim, each at most the element count, so their product may
 * overstate it; such an output is taken at its slot's size and its real dims checked against that
 * after the run. */
static int check_output_slots(const IrtArtifact *a, const IrtTensor *osh, const int64_t *run, char *err, size_t cap) {
    for (uint32_t i = 0; i < a->n_out; i++) {
        uint64_t nb, have = slot_bytes(a, a->out[i].slot, run);
        bool bounds = a->n_data && have != UINT64_MAX; /* dims that may be bounds: checked after the run */
        for (uint32_t k = 0; bounds && k < osh[i].rank; k++) bounds = osh[i].dims[k] >= 0;
        if (bounds) continue;
        if (!tensor_bytes(&osh[i], irt_dtype_size(a, osh[i].dtype), &nb) || nb > have) {
            irt_set_err(err, cap, "corrupt artifact (output '%s' does not fit its slot for these input dims)", a->out[i].name);
            return -1;
        }
    }
    return 0;
}

typedef struct Trace {
    void (*hook)(void *u, uint32_t k);
    void *u;
} Trace;
static int run_cpu(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, uint32_t repeat, double *compute_ms,
                   int64_t batch, int64_t *sym, const IrtTensor *osh, const int64_t *run, size_t need, const Trace *tr, char *err,
                   size_t cap);

int irt_run(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, char *err, size_t cap) {
    return irt_run_timed(a, inputs, outputs, 1, NULL, err, cap);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Checks every input against the compiled one before anything reads it: a caller's mistake
 * (a wrong dtype or rank, a dim left at -1, no data) is an error naming the input and the
 * symbol, never a crash. Symbol ranges are checked where they are bound (batch_of, bind_syms). */
static int check_inputs(const IrtArtifact *a, const IrtTensor *inputs, char *err, size_t cap) {
    if (a->n_in && !inputs) {
        irt_set_err(err, cap, "no inputs given (NULL); the artifact takes %u", a->n_in);
        return -1;
    }
    for (uint32_t i = 0; i < a->n_in; i++) {
        const IrtTensor *t = &inputs[i], *c = &a->in[i].t;
        const char *nm = a->in[i].name;
        char want[512]; /* the compiled shape, written only for an error */
        if (t->dtype != c->dtype) {
            shape_str(a, c, (int)i, want, sizeof want);
            char have[48];
            if (find_dtype(a, t->dtype)) snprintf(have, sizeof have, "%s", irt_dtype_name(a, t->dtype));
            else snprintf(have, sizeof have, "unknown code %d", (int)t->dtype);
            irt_set_err(err, cap, "input '%s' has dtype %s, the artifact was compiled for %s (%s)", nm, have,
                        irt_dtype_name(a, c->dtype), want);
            return -1;
        }
        if (t->rank != c->rank) {
            shape_str(a, c, (int)i, want, sizeof want);
            irt_set_err(err, cap, "input '%s' has rank %u, the artifact was compiled for rank %u (%s)", nm, t->rank, c->rank,
                        want);
            return -1;
        }
        for (uint32_t k = 0; k < c->rank; k++) {
            const char *sym = irt_input_dim_symbol(a, i, k);
            bool free_dim = sym || c->dims[k] < 0;
            if (t->dims[k] < 0) {
                shape_str(a, c, (int)i, want, sizeof want);
                irt_set_err(err, cap, "input '%s' dim %u is %lld: pass the shape of the data%s%s (compiled for %s)", nm, k,
                            (long long)t->dims[k], sym ? ", which binds " : "", sym ? sym : "", want);
                return -1;
            }
            if (!free_dim && t->dims[k] != c->dims[k]) {
                shape_str(a, c, (int)i, want, sizeof want);
                irt_set_err(err, cap, "input '%s' dim %u is %lld, the artifact was compiled for %lld (%s)", nm, k,
                            (long long)t->dims[k], (long long)c->dims[k], want);
                return -1;
            }
        }
        size_t nb = nbytes(a, t);
        if (nb == SIZE_MAX || nb > (size_t)PTRDIFF_MAX) {
            irt_set_err(err, cap, "input '%s' is too large: its dims overflow a byte count", nm);
            return -1;
        }
        if (nb && !t->data) {
            irt_set_err(err, cap, "input '%s' has no data (NULL) for its %zu bytes", nm, nb);
            return -1;
        }
    }
    return 0;
}

int irt_run_n(IrtArtifact *a, uint32_t n_inputs, const IrtTensor *inputs, uint32_t n_outputs, IrtTensor *outputs,
              char *err, size_t cap) {
    if (n_inputs != a->n_in) {
        char list[512] = "";
        for (uint32_t i = 0, at = 0; i < a->n_in && at < sizeof list; i++)
            at += (uint32_t)snprintf(list + at, sizeof list - at, "%s'%s'", i ? ", " : "", a->in[i].name);
        irt_set_err(err, cap, "%u input%s given, the artifact takes %u (%s)", n_inputs, n_inputs == 1 ? "" : "s", a->n_in,
                    a->n_in ? list : "none");
        return -1;
    }
    if (n_outputs < a->n_out || (a->n_out && !outputs)) {
        irt_set_err(err, cap, "room for %u output%s given, the artifact returns %u", outputs ? n_outputs : 0,
                    n_outputs == 1 ? "" : "s", a->n_out);
        return -1;
    }
    return irt_run(a, inputs, outputs, err, cap);
}

static int run_traced(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, uint32_t repeat, double *compute_ms,
                      const Trace *tr, char *err, size_t cap);

int irt_run_timed(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, uint32_t repeat, double *compute_ms,
                  char *err, size_t cap) {
    return run_traced(a, inputs, outputs, repeat, compute_ms, NULL, err, cap);
}

uint32_t irt_num_kernels(const IrtArtifact *a) { return a->entry_trace ? a->n_kcalls : 0; }

const char *irt_kernel_op(const IrtArtifact *a, uint32_t k) { return k < a->n_kcalls ? a->kop[k] : "?"; }
const char *irt_kernel_name(const IrtArtifact *a, uint32_t k) { return k < a->n_kcalls ? a->kname[k] : "?"; }

typedef struct Prof {
    double last, *ms;
} Prof;

static void prof_hook(void *u, uint32_t k) {
    Prof *p = u;
    double t = now_ms();
    if (k > 0) p->ms[k - 1] += t - p->last;
    p->last = now_ms(); /* the hook's own time is not charged to the next kernel */
}

int irt_profile(IrtArtifact *a, const IrtTensor *inputs, uint32_t repeat, double *kernel_ms, char *err, size_t cap) {
    uint32_t nk = irt_num_kernels(a);
    if (!nk || a->cuda) {
        irt_set_err(err, cap, "this artifact has no per-kernel trace (%s)", a->cuda ? "a CUDA artifact" : "compiled by an older irtool");
        return -1;
    }
    for (uint32_t k = 0; k < nk; k++) kernel_ms[k] = 0;
    IrtTensor *outs = calloc(a->n_out + 1, sizeof *outs);
    if (!outs) {
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    Prof p = {.ms = kernel_ms};
    Trace tr = {prof_hook, &p};
    int rc = run_traced(a, inputs, outs, repeat ? repeat : 1, NULL, &tr, err, cap);
    for (uint32_t i = 0; !rc && i < a->n_out; i++) free(outs[i].data);
    free(outs);
    for (uint32_t k = 0; !rc && k < nk; k++) kernel_ms[k] /= repeat ? repeat : 1;
    return rc;
}

static int run_traced(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, uint32_t repeat, double *compute_ms,
                      const Trace *tr, char *err, size_t cap) {
    int64_t batch;
    if (check_inputs(a, inputs, err, cap) || batch_of(a, inputs, &batch, err, cap)) return -1;
    if (a->n_out && !outputs) {
        irt_set_err(err, cap, "no room for the outputs given (NULL)");
        return -1;
    }
    IrtTensor *osh = calloc(a->n_out + 1, sizeof *osh); /* the outputs' shapes for this run */
    int64_t *sym = calloc(a->max_sym + 1, sizeof *sym);
    int64_t *run = calloc(2 * (size_t)a->n_run + 1, sizeof *run); /* blocks placed for this binding */
    size_t need = a->workspace;
    if (!osh || !sym || !run) {
        free(osh), free(sym), free(run);
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < a->n_out; i++) osh[i] = a->out[i].t;
    if ((a->n_syms || a->n_data) &&
        (bind_syms(a, inputs, sym, osh, run, &need, err, cap) || check_output_slots(a, osh, run, err, cap))) {
        free(osh), free(sym), free(run);
        return -1;
    }
    IrtCudaBind cb = {sym, a->max_sym + 1, run, need};
    int rc = a->cuda ? run_cuda(a, inputs, outputs, repeat, compute_ms, osh, a->n_syms ? &cb : NULL, err, cap)
                     : run_cpu(a, inputs, outputs, repeat, compute_ms, batch, sym, osh, run, need, tr, err, cap);
    free(osh);
    free(sym);
    free(run);
    return rc;
}

static int run_cpu(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, uint32_t repeat, double *compute_ms,
                   int64_t batch, int64_t *sym, const IrtTensor *osh, const int64_t *run, size_t need, const Trace *tr, char *err,
                   size_t cap) {
    void **bufs = calloc(a->n_slots + 1, sizeof *bufs);
    size_t ws_len;
    char *ws = ws_take(a, need, &ws_len);
    void **outd = calloc(a->n_out + 1, sizeof *outd);
    bool *direct = calloc(a->n_out + 1, sizeof *direct);
    bool oom = !bufs || !outd || !direct || (need && !ws);
    size_t *took = calloc(a->n_out + 1, sizeof *took); /* bytes of one sample's output tensor */
    oom |= !took;
    for (uint32_t i = 0; !oom && i < a->n_out; i++) {
        size_t nb = nbytes(a, &osh[i]);
        uint64_t have = slot_bytes(a, a->out[i].slot, run);
        if (a->n_data && nb > have) nb = (size_t)have; /* dims at their bounds: check_output_slots */
        took[i] = nb;
        if (nb == SIZE_MAX || __builtin_mul_overflow(nb, (size_t)(a->out[i].batched ? batch : 1), &nb)) nb = SIZE_MAX;
        oom = nb > (size_t)PTRDIFF_MAX || !(outd[i] = malloc(nb ? nb : 1));
    }
    if (oom) {
        for (uint32_t i = 0; outd && i < a->n_out; i++) free(outd[i]);
        free(outd);
        free(direct);
        free(bufs);
        free(took);
        ws_give(a, ws, ws_len);
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    for (uint32_t s = 0; s < a->n_slots; s++) {
        if (a->ws_off[s] >= 0) bufs[s] = ws + a->ws_off[s];
        else if (a->const_ptr[s]) bufs[s] = (void *)a->const_ptr[s];
    }
    for (uint32_t k = 0; k < a->n_run; k++) bufs[a->run_slot[k]] = ws + run[2 * k];
    if (a->n_syms || a->n_data) bufs[a->symslot] = sym;
    IrtRunCtx rc = {0}; /* bytes the run makes (strings) and a helper's error */
    if (a->has_runslot) bufs[a->runslot] = &rc;
    /* data symbols: the dims after the kernels counted, from irt_shapes into dd */
    uint32_t nd = 0;
    for (uint32_t i = 0; i < a->n_out; i++) nd += a->out[i].t.rank;
    IrtTensor *dsh = a->n_data ? malloc(a->n_out * sizeof *dsh + 1) : NULL;
    int64_t *dd = a->n_data ? malloc((nd + 1 + a->n_checks + 2 * (size_t)a->n_run) * sizeof *dd) : NULL;
    if (a->n_data && (!dsh || !dd)) {
        free(dsh), free(dd);
        for (uint32_t i = 0; i < a->n_out; i++) free(outd[i]);
        free(outd), free(direct), free(bufs), free(took);
        ws_give(a, ws, ws_len);
        irt_set_err(err, cap, "out of memory");
        return -1;
    }
    /* an output computed in the workspace is computed straight into its tensor instead (it then
     * shares memory with no other value); the same value returned twice is copied the second
     * time. A symbolic batch runs one sample at a time (no node mixes samples: checked at
     * compile), so there outputs are copied per sample. */
    for (uint32_t i = 0; !a->batch && i < a->n_out; i++) {
        uint32_t s = a->out[i].slot;
        bool taken = false;
        for (uint32_t j = 0; j < i && !taken; j++) taken = direct[j] && a->out[j].slot == s;
        if (taken || (a->ws_off[s] < 0 && a->run_of[s] < 0) || !nbytes(a, &osh[i])) continue;
        bufs[s] = outd[i];
        direct[i] = true;
    }
    double t0 = now_ms();
    for (uint32_t it = 0; it < (repeat ? repeat : 1); it++) {
        irt_run_ctx_free(&rc); /* bytes of an earlier repeat are not referenced any more */
        for (int64_t b = 0; b < batch; b++) {
            for (uint32_t i = 0; i < a->n_in; i++)
                bufs[a->in[i].slot] = (char *)inputs[i].data + (a->in[i].batched ? (size_t)b * nbytes(a, &a->in[i].t) : 0);
            if (tr) a->entry_trace(bufs, irt_fn_table(), tr->hook, tr->u);
            else a->entry(bufs, irt_fn_table());
            if (dsh) { /* data symbols: irt_shapes again, now with the counts the kernels wrote */
                uint32_t pos = 0;
                a->shapes(sym, dd);
                for (uint32_t i = 0; i < a->n_out; i++) {
                    dsh[i] = osh[i];
                    for (uint32_t k = 0; k < dsh[i].rank; k++) dsh[i].dims[k] = dd[pos++];
                    size_t nb = nbytes(a, &dsh[i]);
                    if (!rc.failed && (nb == SIZE_MAX || nb > took[i])) {
                        rc.failed = 1;
                        snprintf(rc.err, sizeof rc.err, "corrupt artifact (output '%s' does not fit its slot after the run)", a->out[i].name);
                    }
                }
                osh = dsh; /* a prefix of the largest case, row-major */
            }
            for (uint32_t i = 0; i < a->n_out && !rc.failed; i++) {
                size_t nb = nbytes(a, &osh[i]);
                if (direct[i] || (!a->out[i].batched && b > 0)) continue;
                if (nb && bufs[a->out[i].slot])
                    memcpy((char *)outd[i] + (a->out[i].batched ? (size_t)b * nb : 0), bufs[a->out[i].slot], nb);
            }
        }
    }
    if (compute_ms) *compute_ms = (now_ms() - t0) / (repeat ? repeat : 1);
    for (uint32_t i = 0; i < a->n_out && !rc.failed; i++) { /* strings: elements, then their bytes, one block */
        if (a->string_code < 0 || osh[i].dtype != a->string_code) continue;
        size_t n = nbytes(a, &osh[i]) / sizeof(IrtString), total = 0;
        const IrtString *el = outd[i];
        for (size_t k = 0; k < n; k++) total += el[k].len;
        IrtString *blk = malloc(n * sizeof *blk + total + 1);
        if (!blk) {
            rc.failed = 1;
            snprintf(rc.err, sizeof rc.err, "out of memory");
            break;
        }
        char *at = (char *)(blk + n);
        for (size_t k = 0; k < n; k++) {
            if (el[k].len) memcpy(at, el[k].data, el[k].len);
            blk[k] = (IrtString){el[k].len ? at : NULL, el[k].len};
            at += el[k].len;
        }
        free(outd[i]);
        outd[i] = blk;
    }
    irt_run_ctx_free(&rc);
    if (rc.failed) {
        irt_set_err(err, cap, "run failed: %s", rc.err);
        for (uint32_t i = 0; i < a->n_out; i++) free(outd[i]);
        free(dsh), free(dd), free(direct), free(outd), free(bufs), free(took);
        ws_give(a, ws, ws_len);
        return -1;
    }
    for (uint32_t i = 0; i < a->n_out; i++) {
        outputs[i] = osh[i];
        if (a->out[i].batched) outputs[i].dims[0] = batch;
        outputs[i].data = outd[i];
    }
    free(dsh);
    free(dd);
    free(direct);
    free(outd);
    free(bufs);
    free(took);
    ws_give(a, ws, ws_len);
    return 0;
}

static int run_cuda(IrtArtifact *a, const IrtTensor *inputs, IrtTensor *outputs, uint32_t repeat, double *ms,
                    const IrtTensor *osh, const IrtCudaBind *bind, char *err, size_t cap) {
    uint32_t n = a->n_in + a->n_out + 1;
    uint32_t *slot = calloc(n, sizeof *slot);
    size_t *bytes = calloc(n, sizeof *bytes);
    void **data = calloc(n, sizeof *data);
    int rc = slot && bytes && data ? 0 : -1;
    for (uint32_t i = 0; !rc && i < a->n_in; i++) {
        slot[i] = a->in[i].slot;
        bytes[i] = nbytes(a, &inputs[i]); /* this run's dims (symbolic ones vary) */
        data[i] = inputs[i].data;
    }
    for (uint32_t i = 0; !rc && i < a->n_out; i++) {
        uint32_t k = a->n_in + i;
        slot[k] = a->out[i].slot;
        bytes[k] = nbytes(a, &osh[i]);
        if (!(data[k] = malloc(bytes[k] ? bytes[k] : 1))) rc = -1;
    }
    if (rc) irt_set_err(err, cap, "out of memory");
    else rc = irt_cuda_run(a->cuda, a->n_in, slot, data, bytes, a->n_out, slot + a->n_in, data + a->n_in, bytes + a->n_in,
                           repeat, bind, ms, err, cap);
    for (uint32_t i = 0; i < a->n_out; i++) {
        if (!rc) {
            outputs[i] = osh[i];
            outputs[i].data = data[a->n_in + i];
        } else if (data) free(data[a->n_in + i]);
    }
    free(slot);
    free(bytes);
    free(data);
    return rc;
}

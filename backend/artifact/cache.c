/* The compile cache of `irtool compile` (issue 8): content-addressed .irx entries keyed by
 * everything that determines the artifact, each bound to its key by a sidecar checked on use.
 * Layout: DIR/v<irtool version>/<first 2 hex of key>/<key>.irx and <key>.sum; the sum names its
 * key and the entry's BLAKE2b-256 and length (entry_sum), so an entry that is damaged, from an
 * older format, or placed under another key is dropped and rebuilt, never served; the key holds
 * the compiler's build id too, so a rebuilt irtool never serves what an older build made. Writes go
 * through a temp file and rename (the .sum first, then the .irx); a reader never sees half. */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "backend/runtime/abi.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SUM_HEADER "irtool-cache-entry 2\n"

char *ir_cache_default_dir(void) {
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    char buf[4096];
    if (x && *x) snprintf(buf, sizeof buf, "%s/irtool", x);
    else if (h && *h) snprintf(buf, sizeof buf, "%s/.cache/irtool", h);
    else return NULL;
    return strdup(buf);
}

/* The GNU build id of the object holding this code (irtool, libirtool, the Python module): the
 * linker's hash of its contents, so a rebuild that changes the compiler changes the key even
 * when the version string stays ("-" when the object has none). */
typedef struct BuildId {
    const void *addr; /* an address inside the object */
    char hex[2 * 64 + 1];
} BuildId;

static int find_build_id(struct dl_phdr_info *info, size_t size, void *user) {
    (void)size;
    BuildId *b = user;
    uintptr_t a = (uintptr_t)b->addr;
    bool inside = false;
    for (int i = 0; i < info->dlpi_phnum && !inside; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + p->p_vaddr;
        inside = p->p_type == PT_LOAD && a >= lo && a < lo + p->p_memsz;
    }
    if (!inside) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_NOTE) continue;
        const unsigned char *n = (const unsigned char *)(info->dlpi_addr + p->p_vaddr), *end = n + p->p_memsz;
        while (n + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *h = (const ElfW(Nhdr) *)n;
            const unsigned char *name = n + sizeof *h, *desc = name + ((h->n_namesz + 3) & ~3u);
            if (desc + h->n_descsz > end) break;
            if (h->n_type == NT_GNU_BUILD_ID && h->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 && h->n_descsz <= 64) {
                for (uint32_t k = 0; k < h->n_descsz; k++) snprintf(b->hex + 2 * k, 3, "%02x", desc[k]);
                return 1;
            }
            n = desc + ((h->n_descsz + 3) & ~3u);
        }
    }
    return 1; /* the object, without a build id */
}

IrStatus ir_cache_key(const IrCacheKeyInfo *info, char key_hex[IR_CACHE_KEY_CHARS]) {
    IrStrBuf s = {0}; /* the key text */
    /* the target as artifact/artifact.c resolves it: host CPU with its features, or NAME with defaults */
    char *triple = LLVMGetDefaultTargetTriple(), *host = LLVMGetHostCPUName();
    bool is_host = !info->cpu || strcmp(info->cpu, host) == 0;
    char *features = is_host ? llvm_host_features() : NULL;
    unsigned maj, min, pat;
    LLVMGetVersion(&maj, &min, &pat);
    char ir_addr[IR_CONTENT_ADDRESS_CHARS];
    ir_content_address(info->ir, info->ir_len, ir_addr);
    ir_strbuf_printf(&s, "irtool-cache-key 2\nir %s %zu\npipeline %s\n", ir_addr, info->ir_len,
               info->pipeline && *info->pipeline ? info->pipeline : "-");
    ir_strbuf_printf(&s, "triple %s\ncpu %s\nfeatures %s\n", triple, is_host ? host : info->cpu,
               features && *features ? features : "-");
    BuildId bid = {.addr = (const void *)ir_cache_key, .hex = "-"};
    dl_iterate_phdr(find_build_id, &bid);
    ir_strbuf_printf(&s, "irtool %s\nbuild %s\nllvm %u.%u.%u\nformat %u\n", IRTOOL_VERSION_STRING, bid.hex, maj, min, pat,
               IRT_FORMAT_VERSION);
    if (info->options && *info->options) ir_strbuf_printf(&s, "options %s\n", info->options);
    for (uint32_t i = 0; i < info->n_inputs; i++) {
        const IrTensor *t = &info->inputs[i];
        ir_strbuf_printf(&s, "input %u %s %u", i, ir_dtype_name(t->dtype), t->rank);
        for (uint32_t k = 0; k < t->rank; k++) ir_strbuf_printf(&s, " %lld", (long long)t->dims[k]);
        ir_strbuf_printf(&s, "\n");
    }
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(host);
    free(features);
    if (s.failed || !s.data) {
        ir_strbuf_free(&s);
        return IR_ENOMEM;
    }
    /* the key is the text's BLAKE2b-256, without the algorithm prefix (it names files) */
    char addr[IR_CONTENT_ADDRESS_CHARS];
    ir_content_address(s.data, s.len, addr);
    memcpy(key_hex, addr + sizeof IR_CONTENT_ADDRESS_ALGO, IR_CACHE_KEY_CHARS);
    ir_strbuf_free(&s);
    return IR_OK;
}

static bool valid_key(const char *k) {
    if (strlen(k) != IR_CACHE_KEY_CHARS - 1) return false;
    for (const char *p = k; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

/* DIR/v<version>/<2 hex>/<key><ext> */
static void entry_path(char *out, size_t cap, const char *dir, const char *key, const char *ext) {
    snprintf(out, cap, "%s/v%s/%.2s/%s%s", dir, IRTOOL_VERSION_STRING, key, key, ext);
}

static bool read_all(const char *path, char **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char *d = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            char *nd = realloc(d, cap + 1);
            if (!nd) {
                ok = false;
                break;
            }
            d = nd;
        }
        size_t r = fread(d + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            ok = !ferror(f);
            break;
        }
    }
    fclose(f);
    if (!ok) {
        free(d);
        return false;
    }
    d[n] = 0;
    *data = d;
    *len = n;
    return true;
}

/* The sidecar of an entry: its format, its key, and the entry's content address and length. */
static void entry_sum(const char *key, const void *bytes, size_t len, char *out, size_t cap) {
    char addr[IR_CONTENT_ADDRESS_CHARS];
    ir_content_address(bytes, len, addr);
    snprintf(out, cap, SUM_HEADER "key %s\n%s %zu\n", key, addr, len);
}

int ir_cache_lookup(const char *dir, const char *key, void **bytes, size_t *len) {
    *bytes = NULL;
    *len = 0;
    if (!valid_key(key)) return IR_CACHE_MISS;
    char irx[4096], sum[4096];
    entry_path(irx, sizeof irx, dir, key, ".irx");
    entry_path(sum, sizeof sum, dir, key, ".sum");
    char *data = NULL, *sd = NULL;
    size_t n = 0, sn = 0;
    if (!read_all(irx, &data, &n)) return IR_CACHE_MISS;
    int k = IR_CACHE_CORRUPT; /* a missing sum: the entry cannot be checked */
    if (read_all(sum, &sd, &sn)) {
        char want[256], keyline[128];
        snprintf(keyline, sizeof keyline, SUM_HEADER "key %s\n", key);
        if (strncmp(sd, SUM_HEADER, sizeof SUM_HEADER - 1) != 0) k = IR_CACHE_STALE; /* an older irtool's entry */
        else if (strncmp(sd, keyline, strlen(keyline)) != 0) k = IR_CACHE_FOREIGN;   /* another key's entry */
        else {
            entry_sum(key, data, n, want, sizeof want);
            if (strcmp(sd, want) == 0 && n >= IRT_HEADER_SIZE && memcmp(data, IRT_MAGIC, 8) == 0) k = IR_CACHE_HIT;
        }
        free(sd);
    }
    if (k != IR_CACHE_HIT) { /* drop the entry: the caller rebuilds it */
        free(data);
        ir_cache_evict(dir, key);
        return k;
    }
    *bytes = data;
    *len = n;
    return IR_CACHE_HIT;
}

void ir_cache_evict(const char *dir, const char *key) {
    if (!valid_key(key)) return;
    char irx[4096], sum[4096];
    entry_path(irx, sizeof irx, dir, key, ".irx");
    entry_path(sum, sizeof sum, dir, key, ".sum");
    unlink(irx);
    unlink(sum);
}

static IrStatus mkdir_p(char *path, IrDiag *diag) {
    for (char *p = path + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            int r = mkdir(path, 0777);
            int e = errno;
            *p = c;
            if (r != 0 && e != EEXIST) {
                ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "cannot create cache folder: %s", strerror(e));
                return IR_EIO;
            }
            if (!c) return IR_OK;
        }
    }
}

IrStatus ir_cache_store(const char *dir, const char *key, const void *bytes, size_t len, IrDiag *diag) {
    if (!valid_key(key)) return IR_EINVAL;
    char irx[4096], sum[4096], sub[4096], line[256];
    snprintf(sub, sizeof sub, "%s/v%s/%.2s", dir, IRTOOL_VERSION_STRING, key);
    IrStatus s = mkdir_p(sub, diag);
    if (s) return s;
    entry_path(irx, sizeof irx, dir, key, ".irx");
    entry_path(sum, sizeof sum, dir, key, ".sum");
    entry_sum(key, bytes, len, line, sizeof line);
    s = ir_write_file_atomic(sum, line, strlen(line), diag);
    if (!s) s = ir_write_file_atomic(irx, bytes, len, diag);
    return s;
}

/* out = a/b; false when it does not fit */
static bool join(char *out, size_t cap, const char *a, const char *b) {
    int k = snprintf(out, cap, "%s/%s", a, b);
    return k >= 0 && (size_t)k < cap;
}

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* One DIR/vX/YY folder: counts .irx entries; with clear, removes .irx, .sum and leftover
 * temp files, then the folder if empty. */
static void scan_leaf(const char *path, bool clear, uint64_t *entries, uint64_t *bytes) {
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    char f[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        struct stat st;
        if (!join(f, sizeof f, path, e->d_name) || lstat(f, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        bool irx = has_suffix(e->d_name, ".irx");
        if (irx) {
            (*entries)++;
            *bytes += (uint64_t)st.st_size;
        }
        if (clear && (irx || has_suffix(e->d_name, ".sum") || strstr(e->d_name, ".tmp."))) unlink(f);
    }
    closedir(d);
    if (clear) rmdir(path);
}

IrStatus ir_cache_scan(const char *dir, bool clear, IrCacheStats *st) {
    memset(st, 0, sizeof *st);
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? IR_OK : IR_EIO;
    struct dirent *e;
    char vp[4096], lp[4096];
    while ((e = readdir(d))) {
        if (e->d_name[0] != 'v') continue;
        DIR *v = join(vp, sizeof vp, dir, e->d_name) ? opendir(vp) : NULL;
        if (!v) continue;
        uint64_t ne = 0, nb = 0;
        struct dirent *s;
        while ((s = readdir(v))) {
            if (strlen(s->d_name) != 2 || s->d_name[0] == '.') continue;
            if (join(lp, sizeof lp, vp, s->d_name)) scan_leaf(lp, clear, &ne, &nb);
        }
        closedir(v);
        if (clear) rmdir(vp);
        st->entries += ne;
        st->bytes += nb;
        if (st->n_versions < sizeof st->versions / sizeof st->versions[0]) {
            size_t nl = strlen(e->d_name);
            if (nl >= sizeof st->versions[0].name) nl = sizeof st->versions[0].name - 1;
            memcpy(st->versions[st->n_versions].name, e->d_name, nl);
            st->versions[st->n_versions].name[nl] = 0;
            st->versions[st->n_versions].entries = ne;
            st->versions[st->n_versions].bytes = nb;
            st->n_versions++;
        }
    }
    closedir(d);
    /* the kernel-object cache below it (one level only) */
    size_t dl = strlen(dir);
    if (!(dl >= 8 && strcmp(dir + dl - 8, "/kernels") == 0) && join(vp, sizeof vp, dir, "kernels")) {
        IrCacheStats ks;
        if (ir_cache_scan(vp, clear, &ks) == IR_OK) {
            st->kernel_entries = ks.entries;
            st->kernel_bytes = ks.bytes;
            if (clear) rmdir(vp);
        }
    }
    return IR_OK;
}

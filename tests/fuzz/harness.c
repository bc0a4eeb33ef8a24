/* What each reader's fuzz target does with one input, shared by the libFuzzer entry points
 * (tests/fuzz/fuzz_*.c) and the corpus replay in CI (tests/test_fuzz_replay.c). A finding is a
 * crash or sanitizer report, an error without a diagnostic, or, for artifacts, one that loads
 * and runs with outputs other than the original's; each function returns 0 or FUZZ_FINDING.
 */
#include "tests/fuzz/harness.h"

#include "backend/backend.h"
#include "backend/runtime/checksum.h"
#include "backend/runtime/abi.h"
#include "validate/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void ignore(void *user, const IrDiagnostic *d) {
    (void)user;
    (void)d;
}

/* After a graph was read: verify, print, walk; a failure must come with a diagnostic. */
static int check_graph(IrGraph *g, IrDiag *d) {
    int rc = 0;
    if (ir_verify(g, d) != IR_OK && d->n_errors == 0) rc = FUZZ_FINDING;
    IrStrBuf b;
    ir_strbuf_init(&b);
    if (ir_print_text(g, &b) != IR_OK) rc = FUZZ_FINDING;
    ir_strbuf_free(&b);
    uint32_t n = 0;
    for (IrNodeId x = ir_graph_walk_next(g, 0); x; x = ir_graph_walk_next(g, x))
        if (++n > ir_graph_node_capacity(g)) return FUZZ_FINDING; /* the walk must end */
    return rc;
}

int fuzz_text_one(const uint8_t *data, size_t size) {
    IrDiag d;
    ir_diag_init(&d, ignore, NULL);
    IrGraph *g = NULL;
    /* `external` weights resolve against the working directory: the parser keeps them inside it */
    if (ir_parse_text((const char *)data, size, "fuzz.ir", &d, &g) != IR_OK) return g || d.n_errors == 0 ? FUZZ_FINDING : 0;
    int rc = check_graph(g, &d);
    /* the canonical form must parse and print back to itself */
    IrStrBuf a, b;
    ir_strbuf_init(&a);
    ir_strbuf_init(&b);
    IrGraph *g2 = NULL;
    IrDiag d2;
    ir_diag_init(&d2, ignore, NULL);
    if (ir_print_text(g, &a) != IR_OK || !a.data || ir_parse_text(a.data, a.len, "fuzz.ir", &d2, &g2) != IR_OK ||
        ir_print_text(g2, &b) != IR_OK || b.len != a.len || memcmp(a.data, b.data, a.len) != 0)
        rc = FUZZ_FINDING;
    ir_strbuf_free(&a);
    ir_strbuf_free(&b);
    ir_graph_destroy(g2);
    ir_graph_destroy(g);
    return rc;
}

int fuzz_binary_one(const uint8_t *data, size_t size) {
    IrDiag d;
    ir_diag_init(&d, ignore, NULL);
    IrGraph *g = NULL;
    if (ir_read_binary_mem(data, size, "fuzz.irb", &d, &g) != IR_OK) return g || d.n_errors == 0 ? FUZZ_FINDING : 0;
    int rc = check_graph(g, &d);
    ir_graph_destroy(g);
    return rc;
}

int fuzz_onnx_one(const uint8_t *data, size_t size) {
    IrDiag d;
    ir_diag_init(&d, ignore, NULL);
    IrGraph *g = NULL;
    /* no path: external data is refused, so the fuzzer cannot map files */
    if (ir_onnx_import(data, size, NULL, &d, &g) != IR_OK) return g || d.n_errors == 0 ? FUZZ_FINDING : 0;
    int rc = check_graph(g, &d);
    ir_graph_destroy(g);
    return rc;
}

int fuzz_npy_one(const uint8_t *data, size_t size) {
    IrDiag d;
    ir_diag_init(&d, ignore, NULL);
    IrTensor t;
    if (ir_npy_read_mem(data, size, "fuzz.npy", &d, &t) != IR_OK) return d.n_errors == 0 ? FUZZ_FINDING : 0;
    int64_t n = ir_tensor_numel(&t);
    double sum = 0;
    for (int64_t i = 0; i < n && t.dtype != IR_DTYPE_STRING; i++) sum += ir_elem_get_f64(t.dtype, t.data, (size_t)i);
    (void)sum;
    ir_tensor_free(&t);
    return 0;
}

/* The bytes as a file only this process sees (the .pb and .irx readers take paths). */
static int as_file(const uint8_t *data, size_t size, char *path, size_t cap) {
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0) return -1;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return -1;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

int fuzz_pb_one(const uint8_t *data, size_t size) {
    char path[64];
    int fd = as_file(data, size, path, sizeof path);
    if (fd < 0) return 0;
    int rc = 0;
    for (int form = 0; form < 3 && !rc; form++) {
        IrDiag d;
        ir_diag_init(&d, ignore, NULL);
        IrTensor t;
        IrTypeKind k = form == 0 ? IR_TYPE_TENSOR : form == 1 ? IR_TYPE_SEQ : IR_TYPE_OPT;
        if (ir_pb_value_read(path, k, &d, &t) != IR_OK) rc = d.n_errors == 0 ? FUZZ_FINDING : 0;
        else ir_tensor_free(&t);
    }
    close(fd);
    return rc;
}

/* ---- artifacts ---------------------------------------------------------------------------- */

/* The artifact the .irx target starts from: a small model compiled for this host once per
 * process, with its outputs on fixed inputs. */
static const char *seed_model = "graph @seed(%x: f32[2, 8]) {\n"
                                "  const %w: f32[8, 4] = [0.5, -1, 2, 0.25, 1, 1, -0.5, 3, 0, 0.5, 1, -2, 4, 1, 0.75, -1,\n"
                                "                         0.5, -1, 2, 0.25, 1, 1, -0.5, 3, 0, 0.5, 1, -2, 4, 1, 0.75, -1]\n"
                                "  const %b: f32[4] = [0.1, -0.2, 0.3, -0.4]\n"
                                "  %m = MatMul(%x, %w) : f32[2, 4]\n"
                                "  %a = Add(%m, %b) : f32[2, 4]\n"
                                "  %y = Relu(%a) : f32[2, 4]\n"
                                "  %s = Softmax(%a) {axis = 1} : f32[2, 4]\n"
                                "  return %y, %s\n"
                                "}\n";

static struct {
    bool tried;
    void *bytes;
    size_t len;
    IrtTensor out[2];
    uint32_t n_out;
    float x[16];
} seed;

uint64_t fuzz_irx_manifest_wrong; /* manifest mutants that ran with other outputs (not findings) */
uint64_t fuzz_irx_ran;            /* inputs that loaded and ran with the seed's outputs */

static void seed_init(void) {
    if (seed.tried) return;
    seed.tried = true;
    for (int i = 0; i < 16; i++) seed.x[i] = (float)(i % 5) * 0.25f - 0.5f;
    IrDiag d;
    ir_diag_init(&d, ignore, NULL);
    IrGraph *g = NULL;
    char err[512];
    if (ir_parse_text(seed_model, strlen(seed_model), "seed.ir", &d, &g) || ir_artifact_build(g, g, NULL, &d, &seed.bytes, &seed.len)) {
        fprintf(stderr, "fuzz_irx: cannot build the seed artifact (%u errors)\n", d.n_errors);
        ir_graph_destroy(g);
        return;
    }
    ir_graph_destroy(g);
    IrtArtifact *a = irt_load_memory(seed.bytes, seed.len, err, sizeof err);
    IrtTensor in = {.rank = 2, .dims = {2, 8}, .data = seed.x};
    if (a) in.dtype = irt_dtype_code(a, "f32");
    if (!a || irt_run(a, &in, seed.out, err, sizeof err)) {
        fprintf(stderr, "fuzz_irx: the seed artifact does not run: %s\n", err);
        free(seed.bytes);
        seed.bytes = NULL;
    } else {
        seed.n_out = irt_num_outputs(a);
    }
    irt_free(a);
    /* the campaign's seeds: the artifact and its manifest alone (tests/fuzz/campaign.sh) */
    const char *out = getenv("IRTOOL_FUZZ_IRX_SEED_OUT");
    if (out && seed.bytes) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed.irx", out);
        FILE *f = fopen(path, "wb");
        if (f) fwrite(seed.bytes, 1, seed.len, f), fclose(f);
        snprintf(path, sizeof path, "%s/seed.manifest", out);
        const unsigned char *s = seed.bytes;
        uint64_t mo = 0, ml = 0;
        for (int k = 7; k >= 0; k--) mo = mo << 8 | s[16 + k], ml = ml << 8 | s[24 + k];
        if ((f = fopen(path, "wb"))) fwrite(s + mo, 1, ml, f), fclose(f);
    }
}

const void *fuzz_irx_seed(size_t *len) {
    seed_init();
    *len = seed.len;
    return seed.bytes;
}

/* Whether outs are the seed's outputs (shape, dtype and bytes). */
static bool same_outputs(const IrtTensor *outs, uint32_t n) {
    if (n != seed.n_out) return false;
    for (uint32_t i = 0; i < n; i++) {
        const IrtTensor *a = &outs[i], *b = &seed.out[i];
        if (a->dtype != b->dtype || a->rank != b->rank || memcmp(a->dims, b->dims, a->rank * sizeof *a->dims)) return false;
        size_t nb = 4;
        for (uint32_t k = 0; k < a->rank; k++) nb *= (size_t)a->dims[k];
        if (memcmp(a->data, b->data, nb)) return false;
    }
    return true;
}

/* Loads, inspects (as `irtool inspect` does) and, when it loads, runs the artifact on the seed's
 * input: 1 = ran with the seed's outputs, 2 = ran with others, 0 = refused. */
static int load_and_run(const uint8_t *data, size_t size) {
    char path[64], err[1024], info[512];
    int fd = as_file(data, size, path, sizeof path);
    if (fd >= 0) {
        char *m = irt_read_manifest(path, err, sizeof err);
        if (m && !irt_verify(path, info, sizeof info, err, sizeof err)) (void)irt_preflight(m, err, sizeof err);
        free(m);
        close(fd);
    }
    IrtArtifact *a = irt_load_memory(data, size, err, sizeof err);
    if (!a) return 0;
    int rc = 0;
    uint32_t ni = irt_num_inputs(a), no = irt_num_outputs(a);
    if (ni == 1 && no <= 8) {
        IrtTensor in = {.dtype = irt_dtype_code(a, "f32"), .rank = 2, .dims = {2, 8}, .data = seed.x}, outs[8];
        if (!irt_run(a, &in, outs, err, sizeof err)) {
            rc = same_outputs(outs, no) ? 1 : 2;
            for (uint32_t i = 0; i < no; i++) free(outs[i].data);
        }
    }
    irt_free(a);
    return rc;
}

int fuzz_irx_one(const uint8_t *data, size_t size) {
    seed_init();
    if (size >= 7 && memcmp(data, IRT_MAGIC, 7) == 0) {
        /* a whole file (the seed, changed): refused, or run with the seed's outputs */
        int r = load_and_run(data, size);
        fuzz_irx_ran += r == 1;
        return r == 2 ? FUZZ_FINDING : 0;
    }
    if (!seed.bytes || seed.len < IRT_HEADER_SIZE) return 0;
    /* otherwise a manifest for the seed's sections, checksum made to match: the manifest's checks
     * alone stand between it and the code (no crash, no hang; a consistent but different
     * manifest may run with other outputs, counted apart) */
    const unsigned char *s = seed.bytes;
    uint64_t off[4], len[4], total = IRT_HEADER_SIZE + size + 4 * 64;
    for (int i = 0; i < 4; i++) {
        off[i] = len[i] = 0;
        for (int k = 7; k >= 0; k--) off[i] = off[i] << 8 | s[16 + 16 * i + k], len[i] = len[i] << 8 | s[24 + 16 * i + k];
        total += len[i];
    }
    unsigned char *f = calloc(1, total);
    if (!f) return 0;
    memcpy(f, s, IRT_HEADER_SIZE);
    uint64_t at = IRT_HEADER_SIZE;
    for (int i = 0; i < 4; i++) {
        at = (at + 63) / 64 * 64;
        uint64_t n = i ? len[i] : size;
        memcpy(f + at, i ? s + off[i] : data, n);
        for (int k = 0; k < 8; k++) f[16 + 16 * i + k] = (unsigned char)(at >> (8 * k)), f[24 + 16 * i + k] = (unsigned char)(n >> (8 * k));
        at += n;
    }
    irt_artifact_put_checksum(f, at);
    int r = load_and_run(f, at);
    fuzz_irx_manifest_wrong += r == 2;
    if (r == 2 && getenv("IRTOOL_FUZZ_VERBOSE")) fprintf(stderr, "fuzz_irx: a manifest ran with other outputs:\n%.*s\n", (int)size, (const char *)data);
    fuzz_irx_ran += r == 1;
    free(f);
    return 0;
}

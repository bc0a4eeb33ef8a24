/* Loading and saving models by file extension (or, for stdin and unknown extensions, by
 * content): .ir text, .irb binary, .onnx, and the graph inside an .irx artifact. Writes are
 * atomic.
 */
#include "ir_internal.h"

#include <blake2.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int ir__open_beside(const char *dir, const char *rel, struct stat *st, const char **why) {
    if (!*rel || rel[0] == '/') {
        *why = "the path must be relative to the model's folder";
        return -1;
    }
    char *base = realpath(dir && *dir ? dir : ".", NULL);
    if (!base) {
        *why = strerror(errno);
        return -1;
    }
    size_t bl = strlen(base);
    char *full = malloc(bl + strlen(rel) + 2), *res = NULL;
    if (full) {
        sprintf(full, "%s/%s", base, rel);
        res = realpath(full, NULL);
    }
    int fd = -1;
    *why = full ? strerror(errno) : "out of memory";
    /* after resolving '..' and symlinks the file must still be inside the model's folder */
    if (res && !(strcmp(base, "/") == 0 || (strncmp(res, base, bl) == 0 && res[bl] == '/'))) {
        *why = "the path leads out of the model's folder";
        fd = -2;
    }
    else if (res && (fd = open(res, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0) /* O_NONBLOCK: a FIFO would block here */
        *why = strerror(errno);
    else if (res && (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))) {
        *why = "not a regular file";
        close(fd);
        fd = -1;
    }
    free(res);
    free(full);
    free(base);
    return fd;
}

static IrFormat sniff(const char *data, size_t len) {
    if (ir_is_binary(data, len)) return IR_FORMAT_BINARY;
    /* an ONNX ModelProto starts with field 1 (ir_version, varint) */
    if (len > 0 && (unsigned char)data[0] == 0x08) return IR_FORMAT_ONNX;
    return IR_FORMAT_TEXT;
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

void ir_content_address(const void *p, size_t n, char out[IR_CONTENT_ADDRESS_CHARS]) {
    uint8_t h[32];
    blake2b(h, p, NULL, sizeof h, n, 0);
    memcpy(out, IR_CONTENT_ADDRESS_ALGO ":", sizeof IR_CONTENT_ADDRESS_ALGO);
    char *o = out + sizeof IR_CONTENT_ADDRESS_ALGO;
    for (size_t i = 0; i < sizeof h; i++) o += sprintf(o, "%02x", h[i]);
}

/* Whether the manifest's `ir_hash` line is the content address of these IR bytes (the
 * artifact's checksum stops before the IR section, which only this reader uses). */
static bool ir_hash_ok(const char *m, size_t ml, const char *ir, size_t n) {
    static const char key[] = "\nir_hash ";
    char want[IR_CONTENT_ADDRESS_CHARS];
    ir_content_address(ir, n, want);
    const char *p = memmem(m, ml, key, sizeof key - 1);
    size_t len = strlen(want);
    return p && (size_t)(m + ml - p) >= sizeof key - 1 + len && memcmp(p + sizeof key - 1, want, len) == 0;
}

/* The graph an .irx artifact was compiled from: its IR section, binary IR. The header (see
 * backend/runtime/abi.h, which ir/ does not include): "IRTOOLX\0", u32 format version,
 * u32 header size, then (u64 offset, u64 length) of the manifest, constants, code and IR. */
static IrStatus load_artifact_ir(const char *path, IrDiag *diag, IrGraph **out) {
    char *data;
    size_t len;
    IrStatus s = ir_read_file(path, diag, &data, &len);
    if (s) return s;
    const unsigned char *u = (const unsigned char *)data;
    uint64_t off = len >= 80 ? le64(u + 64) : 0, n = len >= 80 ? le64(u + 72) : 0;
    uint64_t moff = len >= 80 ? le64(u + 16) : 0, mn = len >= 80 ? le64(u + 24) : 0;
    if (len < 80 || memcmp(data, "IRTOOLX", 8) != 0 || off > len || n > len - off || n == 0 || moff > len || mn > len - moff) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "not an irtool artifact, or one without its IR section");
        free(data);
        return IR_ESYNTAX;
    }
    if (!ir_hash_ok(data + moff, (size_t)mn, data + off, (size_t)n)) {
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0,
                       "corrupt artifact: its IR section does not match the manifest's ir_hash (rebuild it)");
        free(data);
        return IR_ESYNTAX;
    }
    s = ir_read_binary_mem(data + off, (size_t)n, path, diag, out);
    free(data);
    return s;
}

IrStatus ir_load(const char *path, IrDiag *diag, IrGraph **out) {
    *out = NULL;
    IrFormat f = strcmp(path, "-") == 0 ? IR_FORMAT_UNKNOWN : ir_format_from_path(path);
    if (f == IR_FORMAT_BINARY) return ir_read_binary(path, diag, out);
    if (f == IR_FORMAT_ARTIFACT) return load_artifact_ir(path, diag, out);
    char *data;
    size_t len;
    IrStatus s = ir_read_file(path, diag, &data, &len);
    if (s) return s;
    if (f == IR_FORMAT_UNKNOWN) f = sniff(data, len);
    const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
    switch (f) {
    case IR_FORMAT_BINARY: s = ir_read_binary_mem(data, len, name, diag, out); break;
    case IR_FORMAT_ONNX: s = ir_onnx_import(data, len, strcmp(path, "-") == 0 ? NULL : path, diag, out); break;
    default:
        s = ir_parse_text(data, len, name, diag, out);
        if (s == IR_OK) {
            ir__graph_take_source_text(*out, data, len);
            return IR_OK;
        }
        break;
    }
    free(data);
    return s;
}

IrStatus ir_save(const IrGraph *g, const char *path, IrDiag *diag) {
    IrFormat f = strcmp(path, "-") == 0 ? IR_FORMAT_TEXT : ir_format_from_path(path);
    switch (f) {
    case IR_FORMAT_BINARY: return ir_write_binary(g, path, diag);
    case IR_FORMAT_ONNX: return ir_onnx_export(g, path, diag);
    case IR_FORMAT_TEXT: {
        IrStrBuf b;
        ir_strbuf_init(&b);
        IrStatus s = ir_print_text(g, &b);
        if (s == IR_OK) s = ir_write_file_atomic(path, b.data ? b.data : "", b.len, diag);
        else ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "cannot print graph: %s", ir_status_name(s));
        ir_strbuf_free(&b);
        return s;
    }
    default:
        ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0,
                       "unknown output format (use .ir, .irb or .onnx)");
        return IR_EINVAL;
    }
}

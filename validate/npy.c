/* .npy tensor files (NumPy format versions 1.0, 2.0 and 3.0), C order only.
 *
 * Reading never trusts the header: the dict is parsed with a small tokenizer tolerant of any
 * whitespace, every size is bounds-checked against the file, and big-endian data is
 * byte-swapped. bf16 and FP8 use the ml_dtypes names ('bfloat16', 'float8_e4m3fn',
 * 'float8_e5m2') as their descr. Writing produces version 1.0 with the header padded to 64
 * bytes, written atomically.
 */
#include "validate/validate.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char NPY_MAGIC[6] = {(char)0x93, 'N', 'U', 'M', 'P', 'Y'};

typedef struct NpyDescr {
    const char *code; /* without the byte-order character */
    IrDType dt;
} NpyDescr;

static const NpyDescr DESCRS[] = {
    {"f8", IR_DTYPE_F64},   {"f4", IR_DTYPE_F32},  {"f2", IR_DTYPE_F16},  {"i8", IR_DTYPE_I64},
    {"i4", IR_DTYPE_I32},   {"i2", IR_DTYPE_I16},  {"i1", IR_DTYPE_I8},   {"u8", IR_DTYPE_U64},
    {"u4", IR_DTYPE_U32},   {"u2", IR_DTYPE_U16},  {"u1", IR_DTYPE_U8},   {"b1", IR_DTYPE_BOOL},
    {"bfloat16", IR_DTYPE_BF16}, {"float8_e4m3fn", IR_DTYPE_F8E4M3FN}, {"float8_e5m2", IR_DTYPE_F8E5M2},
};

static IrStatus npy_err(IrDiag *diag, const char *name, IrStatus s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static IrStatus npy_err(IrDiag *diag, const char *name, IrStatus s, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ir_diag_report(diag, IR_SEV_ERROR, name, 0, 0, NULL, 0, "%s", msg);
    return s;
}

/* ---- header dict parsing --------------------------------------------------------------- */

typedef struct Hdr {
    const char *p, *end;
} Hdr;

static void skip_ws(Hdr *h) {
    while (h->p < h->end && isspace((unsigned char)*h->p)) h->p++;
}

static bool eat(Hdr *h, char c) {
    skip_ws(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return true;
    }
    return false;
}

/* A quoted Python string literal (no escapes needed in npy headers). */
static bool parse_str(Hdr *h, const char **s, size_t *n) {
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return false;
    char q = *h->p++;
    const char *start = h->p;
    while (h->p < h->end && *h->p != q) h->p++;
    if (h->p >= h->end) return false;
    *s = start;
    *n = (size_t)(h->p - start);
    h->p++;
    return true;
}

static bool parse_shape(Hdr *h, uint32_t *rank, int64_t *dims, const char **why) {
    *rank = 0;
    if (!eat(h, '(')) return (*why = "'shape' must be a tuple"), false;
    for (;;) {
        if (eat(h, ')')) return true;
        skip_ws(h);
        if (h->p >= h->end || !isdigit((unsigned char)*h->p)) return (*why = "bad 'shape' tuple"), false;
        int64_t v = 0;
        while (h->p < h->end && isdigit((unsigned char)*h->p)) {
            if (v > (INT64_MAX - 9) / 10) return (*why = "'shape' dimension too large"), false;
            v = v * 10 + (*h->p++ - '0');
        }
        if (h->p < h->end && (*h->p == 'L' || *h->p == 'l')) h->p++; /* Python 2 long */
        if (*rank >= IR_MAX_RANK) return (*why = "'shape' has more than 16 dimensions"), false;
        dims[(*rank)++] = v;
        if (eat(h, ',')) continue;
        if (eat(h, ')')) return true;
        return (*why = "bad 'shape' tuple"), false;
    }
}

typedef struct NpyHeader {
    const char *descr;
    size_t descr_len;
    bool have_descr, have_fortran, have_shape, fortran;
    uint32_t rank;
    int64_t dims[IR_MAX_RANK];
} NpyHeader;

static bool parse_dict(const char *text, size_t len, NpyHeader *hd, const char **why) {
    Hdr h = {text, text + len};
    memset(hd, 0, sizeof *hd);
    if (!eat(&h, '{')) return (*why = "header is not a dict"), false;
    for (;;) {
        if (eat(&h, '}')) break;
        const char *key;
        size_t kn;
        if (!parse_str(&h, &key, &kn)) return (*why = "bad key in header dict"), false;
        if (!eat(&h, ':')) return (*why = "missing ':' in header dict"), false;
        if (kn == 5 && memcmp(key, "descr", 5) == 0) {
            skip_ws(&h);
            if (h.p < h.end && *h.p == '[') return (*why = "structured dtypes are not supported"), false;
            if (!parse_str(&h, &hd->descr, &hd->descr_len)) return (*why = "'descr' must be a string"), false;
            hd->have_descr = true;
        } else if (kn == 13 && memcmp(key, "fortran_order", 13) == 0) {
            skip_ws(&h);
            if ((size_t)(h.end - h.p) >= 4 && memcmp(h.p, "True", 4) == 0) hd->fortran = true, h.p += 4;
            else if ((size_t)(h.end - h.p) >= 5 && memcmp(h.p, "False", 5) == 0) hd->fortran = false, h.p += 5;
            else return (*why = "'fortran_order' must be True or False"), false;
            hd->have_fortran = true;
        } else if (kn == 5 && memcmp(key, "shape", 5) == 0) {
            if (!parse_shape(&h, &hd->rank, hd->dims, why)) return false;
            hd->have_shape = true;
        } else {
            return (*why = "unknown key in header dict"), false;
        }
        if (eat(&h, ',')) continue;
        if (eat(&h, '}')) break;
        return (*why = "expected ',' or '}' in header dict"), false;
    }
    if (!hd->have_descr) return (*why = "header has no 'descr'"), false;
    if (!hd->have_fortran) return (*why = "header has no 'fortran_order'"), false;
    if (!hd->have_shape) return (*why = "header has no 'shape'"), false;
    return true;
}

/* Maps a descr to a dtype; *swap set for big-endian multi-byte data. */
static IrDType descr_dtype(const char *d, size_t n, bool *swap) {
    *swap = false;
    char order = 0;
    if (n && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
        order = d[0];
        d++;
        n--;
    }
    for (size_t i = 0; i < sizeof DESCRS / sizeof DESCRS[0]; i++)
        if (strlen(DESCRS[i].code) == n && memcmp(DESCRS[i].code, d, n) == 0) {
            *swap = order == '>' && ir_dtype_size(DESCRS[i].dt) > 1;
            return DESCRS[i].dt;
        }
    /* NumPy also spells booleans and bytes as '?' and 'b'/'B' */
    if (n == 1 && d[0] == '?') return IR_DTYPE_BOOL;
    return IR_DTYPE_NONE;
}

static void byteswap(void *data, size_t count, size_t size) {
    unsigned char *p = data;
    for (size_t i = 0; i < count; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

IrStatus ir_npy_read_mem(const void *data, size_t len, const char *name, IrDiag *diag, IrTensor *out) {
    const unsigned char *b = data;
    memset(out, 0, sizeof *out);
    if (!name) name = "<npy>";
    if (len < 8 && memcmp(b, NPY_MAGIC, len < 6 ? len : 6) == 0)
        return npy_err(diag, name, IR_ESYNTAX, "truncated .npy file (%zu bytes)", len);
    if (len < 8 || memcmp(b, NPY_MAGIC, 6) != 0)
        return npy_err(diag, name, IR_ESYNTAX, "not a .npy file (bad magic; expected \\x93NUMPY)");
    unsigned major = b[6], minor = b[7];
    size_t hlen, hstart;
    if (major == 1) {
        if (len < 10) return npy_err(diag, name, IR_ESYNTAX, "truncated .npy header (file is %zu bytes)", len);
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return npy_err(diag, name, IR_ESYNTAX, "truncated .npy header (file is %zu bytes)", len);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hstart = 12;
    } else {
        return npy_err(diag, name, IR_EUNSUPPORTED, "unsupported .npy format version %u.%u (1.0, 2.0, 3.0 are)", major,
                       minor);
    }
    if (hlen > len - hstart)
        return npy_err(diag, name, IR_ESYNTAX, "truncated .npy header: it declares %zu bytes, the file has %zu", hlen,
                       len - hstart);
    NpyHeader hd;
    const char *why = "malformed header";
    if (!parse_dict((const char *)b + hstart, hlen, &hd, &why))
        return npy_err(diag, name, IR_ESYNTAX, "bad .npy header: %s", why);
    bool swap;
    IrDType dt = descr_dtype(hd.descr, hd.descr_len, &swap);
    if (dt == IR_DTYPE_NONE)
        return npy_err(diag, name, IR_EUNSUPPORTED,
                       "unsupported .npy dtype '%.*s' (supported: f8 f4 f2 i8 i4 i2 i1 u8 u4 u2 u1 b1, bfloat16, "
                       "float8_e4m3fn, float8_e5m2)",
                       (int)hd.descr_len, hd.descr);
    if (hd.fortran)
        return npy_err(diag, name, IR_EUNSUPPORTED,
                       "Fortran-order .npy arrays are not supported (save with np.ascontiguousarray)");
    size_t esize = ir_dtype_size(dt), avail = len - hstart - hlen, need = esize;
    for (uint32_t i = 0; i < hd.rank; i++) {
        if (hd.dims[i] && need > avail / (size_t)hd.dims[i]) {
            need = SIZE_MAX;
            break;
        }
        need *= (size_t)hd.dims[i];
    }
    if (need != avail) {
        char shape[256];
        IrTensor tmp = {.dtype = dt, .rank = hd.rank};
        memcpy(tmp.dims, hd.dims, sizeof hd.dims);
        ir_tensor_shape_str(&tmp, shape, sizeof shape);
        if (need == SIZE_MAX)
            return npy_err(diag, name, IR_ESYNTAX, "truncated .npy data: %s needs more than the %zu bytes the file has",
                           shape, avail);
        if (need > avail)
            return npy_err(diag, name, IR_ESYNTAX, "truncated .npy data: %s needs %zu bytes, the file has %zu", shape,
                           need, avail);
        return npy_err(diag, name, IR_ESYNTAX, "%zu unexpected bytes after the .npy data for %s", avail - need, shape);
    }
    IrStatus s = ir_tensor_alloc(out, dt, hd.rank, hd.dims);
    if (s) return npy_err(diag, name, s, "cannot allocate %zu bytes for the .npy data", need);
    if (need) {
        memcpy(out->data, b + hstart + hlen, need);
        if (swap) byteswap(out->data, need / esize, esize);
    }
    return IR_OK;
}

IrStatus ir_npy_read(const char *path, IrDiag *diag, IrTensor *out) {
    char *data;
    size_t len;
    memset(out, 0, sizeof *out);
    IrStatus s = ir_read_file(path, diag, &data, &len);
    if (s) return s;
    s = ir_npy_read_mem(data, len, path, diag, out);
    free(data);
    return s;
}

/* ---- writing ------------------------------------------------------------------------------- */

static const char *dtype_descr(IrDType dt) {
    switch (dt) {
    case IR_DTYPE_F64: return "<f8";
    case IR_DTYPE_F32: return "<f4";
    case IR_DTYPE_F16: return "<f2";
    case IR_DTYPE_BF16: return "bfloat16";
    case IR_DTYPE_F8E4M3FN: return "float8_e4m3fn";
    case IR_DTYPE_F8E5M2: return "float8_e5m2";
    case IR_DTYPE_I64: return "<i8";
    case IR_DTYPE_I32: return "<i4";
    case IR_DTYPE_I16: return "<i2";
    case IR_DTYPE_I8: return "|i1";
    case IR_DTYPE_U64: return "<u8";
    case IR_DTYPE_U32: return "<u4";
    case IR_DTYPE_U16: return "<u2";
    case IR_DTYPE_U8: return "|u1";
    case IR_DTYPE_BOOL: return "|b1";
    default: return NULL;
    }
}

IrStatus ir_npy_write(const char *path, const IrTensor *t, IrDiag *diag) {
    const char *descr = dtype_descr(t->dtype);
    if (!descr) return npy_err(diag, path, IR_EINVAL, "cannot write dtype %s as .npy", ir_dtype_name(t->dtype));
    if (t->rank > IR_MAX_RANK) return npy_err(diag, path, IR_EINVAL, "rank %u too large", t->rank);
    char dict[1024];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (uint32_t i = 0; i < t->rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld%s", (long long)t->dims[i],
                      t->rank == 1 ? "," : i + 1 < t->rank ? ", " : "");
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* pad with spaces so that magic + version + length + header is a multiple of 64 */
    size_t hlen = (size_t)n + 1, total = 10 + hlen;
    hlen += (64 - total % 64) % 64;
    size_t nbytes = ir_tensor_nbytes(t);
    unsigned char *buf = malloc(10 + hlen + nbytes);
    if (!buf) return npy_err(diag, path, IR_ENOMEM, "out of memory writing .npy");
    memcpy(buf, NPY_MAGIC, 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memset(buf + 10, ' ', hlen);
    memcpy(buf + 10, dict, (size_t)n);
    buf[10 + hlen - 1] = '\n';
    if (nbytes) memcpy(buf + 10 + hlen, t->data, nbytes);
    IrStatus s = ir_write_file_atomic(path, buf, 10 + hlen + nbytes, diag);
    free(buf);
    return s;
}

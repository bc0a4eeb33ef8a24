/* .npy tensor files (NumPy format versions 1.0, 2.0 and 3.0), C order only.
 *
 * Reading never trusts the header: the dict is parsed with a small tokenizer tolerant of any
 * whitespace, every size is bounds-checked against the file, and big-endian data is
 * byte-swapped. bf16 and FP8 use the ml_dtypes names ('bfloat16', 'float8_e4m3fn',
 * 'float8_e5m2') as their descr. String tensors read from fixed-width unicode ('<U') and bytes
 * ('|S') arrays (trailing NULs dropped, as numpy does) and are written as '<U' (UTF-8 decoded);
 * object arrays are refused with a hint. Writing produces version 1.0 with the header padded
 * to 64 bytes, written atomically.
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

/* ---- strings: fixed-width unicode ('<U8': UTF-32 code points) and bytes ('|S8') ---------- */

/* Appends code point c as UTF-8; false for a surrogate or a value past U+10FFFF. */
static bool put_utf8(IrStrBuf *b, uint32_t c) {
    char u[4];
    if (c < 0x80) u[0] = (char)c, ir_strbuf_append(b, u, 1);
    else if (c < 0x800) u[0] = (char)(0xC0 | c >> 6), u[1] = (char)(0x80 | (c & 0x3F)), ir_strbuf_append(b, u, 2);
    else if (c < 0x10000) {
        if (c >= 0xD800 && c < 0xE000) return false;
        u[0] = (char)(0xE0 | c >> 12), u[1] = (char)(0x80 | ((c >> 6) & 0x3F)), u[2] = (char)(0x80 | (c & 0x3F));
        ir_strbuf_append(b, u, 3);
    } else if (c < 0x110000) {
        u[0] = (char)(0xF0 | c >> 18), u[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((c >> 6) & 0x3F)), u[3] = (char)(0x80 | (c & 0x3F));
        ir_strbuf_append(b, u, 4);
    } else {
        return false;
    }
    return true;
}

/* Decodes one UTF-8 code point at s[*i]; false when malformed. */
static bool get_utf8(const unsigned char *s, size_t n, size_t *i, uint32_t *c) {
    unsigned char x = s[*i];
    int extra = x < 0x80 ? 0 : (x & 0xE0) == 0xC0 ? 1 : (x & 0xF0) == 0xE0 ? 2 : (x & 0xF8) == 0xF0 ? 3 : -1;
    if (extra < 0 || *i + (size_t)extra >= n + (extra ? 0 : 1)) return false;
    uint32_t v = extra ? x & (0x3F >> extra) : x;
    for (int k = 1; k <= extra; k++) {
        if ((s[*i + (size_t)k] & 0xC0) != 0x80) return false;
        v = v << 6 | (s[*i + (size_t)k] & 0x3F);
    }
    static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
    if (v < min[extra] || v > 0x10FFFF || (v >= 0xD800 && v < 0xE000)) return false;
    *i += (size_t)extra + 1;
    *c = v;
    return true;
}

static IrStatus read_text(const NpyHeader *hd, const unsigned char *data, size_t avail, const char *name, IrDiag *diag,
                          IrTensor *out) {
    const char *d = hd->descr;
    size_t n = hd->descr_len;
    char order = '|';
    if (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=') order = *d++, n--;
    bool unicode = d[0] == 'U';
    uint64_t width = 0;
    for (size_t i = 1; i < n; i++) {
        if (d[i] < '0' || d[i] > '9' || width > (UINT64_C(1) << 32))
            return npy_err(diag, name, IR_ESYNTAX, "bad .npy string dtype '%.*s'", (int)hd->descr_len, hd->descr);
        width = width * 10 + (uint64_t)(d[i] - '0');
    }
    if (n < 2 || width == 0) /* numpy writes at least U1/S1 */
        return npy_err(diag, name, IR_ESYNTAX, "bad .npy string dtype '%.*s'", (int)hd->descr_len, hd->descr);
    uint64_t esize = unicode ? width * 4 : width, numel = 1;
    for (uint32_t i = 0; i < hd->rank; i++) {
        if (hd->dims[i] && numel > (UINT64_C(1) << 40) / (uint64_t)hd->dims[i])
            return npy_err(diag, name, IR_ESYNTAX, "truncated .npy data");
        numel *= (uint64_t)hd->dims[i];
    }
    if ((esize && numel > avail / esize) || numel * esize != avail)
        return npy_err(diag, name, IR_ESYNTAX, "the .npy data holds %zu bytes, %llu strings of %llu bytes need %llu",
                       avail, (unsigned long long)numel, (unsigned long long)esize,
                       (unsigned long long)(numel * esize));
    IrStrBuf bytes;
    ir_strbuf_init(&bytes);
    size_t *ends = malloc(((size_t)numel + 1) * sizeof *ends);
    IrStringElem *el = malloc(((size_t)numel + 1) * sizeof *el);
    IrStatus s = ends && el ? IR_OK : IR_ENOMEM;
    for (uint64_t i = 0; i < numel && !s; i++) {
        const unsigned char *e = data + i * esize;
        uint64_t len = width; /* numpy drops trailing NULs */
        if (unicode) {
            while (len) {
                const unsigned char *q = e + (len - 1) * 4;
                if (q[0] | q[1] | q[2] | q[3]) break;
                len--;
            }
            for (uint64_t k = 0; k < len && !s; k++) {
                const unsigned char *q = e + k * 4;
                uint32_t c = order == '>' ? (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3]
                                          : (uint32_t)q[3] << 24 | (uint32_t)q[2] << 16 | (uint32_t)q[1] << 8 | q[0];
                if (!put_utf8(&bytes, c))
                    s = npy_err(diag, name, IR_ESYNTAX, "string %llu holds an invalid code point U+%X",
                                (unsigned long long)i, c);
            }
        } else {
            while (len && !e[len - 1]) len--;
            ir_strbuf_append(&bytes, (const char *)e, (size_t)len);
        }
        ends[i] = bytes.len;
    }
    if (!s && bytes.failed) s = IR_ENOMEM;
    for (uint64_t i = 0; i < numel && !s; i++) {
        size_t a = i ? ends[i - 1] : 0;
        el[i] = (IrStringElem){bytes.data ? bytes.data + a : NULL, ends[i] - a};
    }
    if (!s) s = ir_tensor_from_strings(out, hd->rank, hd->dims, el);
    if (s == IR_ENOMEM) npy_err(diag, name, s, "out of memory reading .npy strings");
    free(ends);
    free(el);
    ir_strbuf_free(&bytes);
    return s;
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
    if (hd.descr_len >= 2 && (hd.descr[hd.descr_len - 1] == 'O' || hd.descr[0] == 'O'))
        return npy_err(diag, name, IR_EUNSUPPORTED,
                       "object arrays (dtype=object) hold Python objects, not data; save strings as a fixed-width "
                       "unicode array (arr.astype(str))");
    if (hd.descr_len >= 2 && (hd.descr[1] == 'U' || hd.descr[1] == 'S' || hd.descr[0] == 'U' || hd.descr[0] == 'S')) {
        if (hd.fortran) return npy_err(diag, name, IR_EUNSUPPORTED, "Fortran-order .npy arrays are not supported");
        return read_text(&hd, b + hstart + hlen, len - hstart - hlen, name, diag, out);
    }
    IrDType dt = descr_dtype(hd.descr, hd.descr_len, &swap);
    if (dt == IR_DTYPE_NONE)
        return npy_err(diag, name, IR_EUNSUPPORTED,
                       "unsupported .npy dtype '%.*s' (supported: f8 f4 f2 i8 i4 i2 i1 u8 u4 u2 u1 b1, bfloat16, "
                       "float8_e4m3fn, float8_e5m2, U<n> and S<n> strings)",
                       (int)hd.descr_len, hd.descr);
    if (hd.fortran)
        return npy_err(diag, name, IR_EUNSUPPORTED,
                       "Fortran-order .npy arrays are not supported (save with np.ascontiguousarray)");
    size_t esize = ir_dtype_size(dt), avail = len - hstart - hlen, need = esize;
    for (uint32_t i = 0; i < hd.rank; i++)
        if (hd.dims[i] == 0) need = 0; /* an empty array holds no data */
    for (uint32_t i = 0; i < hd.rank && need; i++) {
        if (need > avail / (size_t)hd.dims[i]) {
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

/* Strings as '<U<width>': UTF-8 decoded to UTF-32, padded with NULs to the longest element. */
static IrStatus text_payload(const IrTensor *t, const char *path, IrDiag *diag, unsigned char **out, size_t *nbytes,
                             char *descr, size_t cap) {
    const IrStringElem *el = t->data;
    int64_t n = ir_tensor_numel(t);
    size_t width = 1;
    for (int64_t i = 0; i < n; i++) {
        size_t cps = 0;
        for (size_t k = 0; k < el[i].len; cps++) {
            uint32_t c;
            if (!get_utf8((const unsigned char *)el[i].data, el[i].len, &k, &c))
                return npy_err(diag, path, IR_EINVAL,
                               "string %lld is not valid UTF-8 (.npy stores unicode text, '<U' arrays)", (long long)i);
        }
        if (cps > width) width = cps;
    }
    if ((size_t)n > SIZE_MAX / 8 / width) return npy_err(diag, path, IR_ENOMEM, "strings too large for .npy");
    *nbytes = (size_t)n * width * 4;
    *out = calloc(*nbytes + 1, 1);
    if (!*out) return npy_err(diag, path, IR_ENOMEM, "out of memory writing .npy");
    for (int64_t i = 0; i < n; i++) {
        unsigned char *q = *out + (size_t)i * width * 4;
        uint32_t c;
        for (size_t k = 0; k < el[i].len; q += 4) {
            get_utf8((const unsigned char *)el[i].data, el[i].len, &k, &c);
            q[0] = (unsigned char)c, q[1] = (unsigned char)(c >> 8), q[2] = (unsigned char)(c >> 16), q[3] = 0;
        }
    }
    snprintf(descr, cap, "<U%zu", width);
    return IR_OK;
}

IrStatus ir_npy_write(const char *path, const IrTensor *t, IrDiag *diag) {
    char text_descr[32];
    unsigned char *text = NULL;
    size_t text_bytes = 0;
    if (t->dtype == IR_DTYPE_STRING) {
        IrStatus s = text_payload(t, path, diag, &text, &text_bytes, text_descr, sizeof text_descr);
        if (s) return s;
    }
    const char *descr = text ? text_descr : dtype_descr(t->dtype);
    if (!descr) return npy_err(diag, path, IR_EINVAL, "cannot write dtype %s as .npy", ir_dtype_name(t->dtype));
    if (t->rank > IR_MAX_RANK) {
        free(text);
        return npy_err(diag, path, IR_EINVAL, "rank %u too large", t->rank);
    }
    char dict[1024];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (uint32_t i = 0; i < t->rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld%s", (long long)t->dims[i],
                      t->rank == 1 ? "," : i + 1 < t->rank ? ", " : "");
    n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
    /* pad with spaces so that magic + version + length + header is a multiple of 64 */
    size_t hlen = (size_t)n + 1, total = 10 + hlen;
    hlen += (64 - total % 64) % 64;
    size_t nbytes = text ? text_bytes : ir_tensor_nbytes(t);
    unsigned char *buf = malloc(10 + hlen + nbytes);
    if (!buf) {
        free(text);
        return npy_err(diag, path, IR_ENOMEM, "out of memory writing .npy");
    }
    memcpy(buf, NPY_MAGIC, 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memset(buf + 10, ' ', hlen);
    memcpy(buf + 10, dict, (size_t)n);
    buf[10 + hlen - 1] = '\n';
    if (nbytes) memcpy(buf + 10 + hlen, text ? text : t->data, nbytes);
    free(text);
    IrStatus s = ir_write_file_atomic(path, buf, 10 + hlen + nbytes, diag);
    free(buf);
    return s;
}

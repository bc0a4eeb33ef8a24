/* Kernels on string tensors: StringNormalizer, TfIdfVectorizer (strings or integers), Cast
 * between strings and numbers (called from Cast/CastLike), Equal on strings (called from the
 * binary kernel). Results are built with ir_tensor_from_strings, so each owns its bytes.
 * Case mapping is ASCII only (bytes >= 0x80, UTF-8 included, pass through unchanged); the
 * `locale` attribute is accepted and not interpreted.
 */
#include "validate/interp.h"
#include "ir/strconv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool str_eq(IrStringElem a, IrStringElem b) {
    return a.len == b.len && (!a.len || memcmp(a.data, b.data, a.len) == 0);
}

static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }
static char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c; }

static bool str_eq_nocase(IrStringElem a, IrStringElem b) {
    if (a.len != b.len) return false;
    for (size_t i = 0; i < a.len; i++)
        if (ascii_lower(a.data[i]) != ascii_lower(b.data[i])) return false;
    return true;
}

/* ---- Equal ---------------------------------------------------------------------------------- */

IrStatus interp_equal_strings(KernelArgs *a) {
    const IrTensor *x = a->in[0], *y = a->in[1];
    if (x->dtype != IR_DTYPE_STRING || y->dtype != IR_DTYPE_STRING)
        return interp_error(a, "cannot compare %s with %s", ir_dtype_name(x->dtype), ir_dtype_name(y->dtype));
    uint32_t rank;
    int64_t dims[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
    IrStatus s = interp_broadcast(a, a->in, 2, &rank, dims);
    if (s || (s = interp_alloc_output(a, 0, IR_DTYPE_BOOL, rank, dims))) return s;
    int64_t n = ir_tensor_numel(&a->out[0]);
    const IrStringElem *xs = x->data, *ys = y->data;
    uint8_t *o = a->out[0].data;
    for (int64_t i = 0; i < n; i++) {
        o[i] = str_eq(xs[ir_shape_broadcast_offset(x->rank, x->dims, rank, idx)],
                      ys[ir_shape_broadcast_offset(y->rank, y->dims, rank, idx)]);
        ir_shape_index_next(rank, dims, idx);
    }
    return IR_OK;
}

/* ---- Cast ----------------------------------------------------------------------------------- */

static IrStatus cast_to_strings(KernelArgs *a, const IrTensor *x) {
    int64_t n = ir_tensor_numel(x);
    IrStringElem *el = malloc(((size_t)n + 1) * sizeof *el);
    size_t *ends = malloc(((size_t)n + 1) * sizeof *ends);
    IrStrBuf b;
    ir_strbuf_init(&b);
    IrStatus s = el && ends ? IR_OK : IR_ENOMEM;
    for (int64_t i = 0; i < n && !s; i++) {
        char buf[64];
        IrDType dt = x->dtype;
        if (ir_dtype_is_float(dt))
            ir_format_float(interp_get_f(x, i), dt != IR_DTYPE_F64, buf, sizeof buf);
        else if (dt == IR_DTYPE_BOOL)
            snprintf(buf, sizeof buf, "%s", interp_get_i(x, i) ? "True" : "False");
        else if (dt == IR_DTYPE_U64)
            snprintf(buf, sizeof buf, "%llu", (unsigned long long)((const uint64_t *)x->data)[i]);
        else
            snprintf(buf, sizeof buf, "%lld", (long long)interp_get_i(x, i));
        ir_strbuf_puts(&b, buf);
        ends[i] = b.len;
    }
    if (!s && b.failed) s = IR_ENOMEM;
    for (int64_t i = 0; i < n && !s; i++) {
        size_t start = i ? ends[i - 1] : 0;
        el[i] = (IrStringElem){b.data + start, ends[i] - start};
    }
    if (!s) s = ir_tensor_from_strings(&a->out[0], x->rank, x->dims, el);
    free(el);
    free(ends);
    ir_strbuf_free(&b);
    return s;
}

/* Parses one string as a number of dtype `to` into element i of out. */
static IrStatus parse_number(KernelArgs *a, IrStringElem e, IrTensor *out, int64_t i, char *buf, size_t cap) {
    if (e.len >= cap) return interp_error(a, "string element %lld is too long to be a number", (long long)i);
    if (e.len) memcpy(buf, e.data, e.len);
    buf[e.len] = 0;
    if (e.len && memchr(buf, 0, e.len)) return interp_error(a, "string element %lld holds a NUL byte", (long long)i);
    IrDType to = out->dtype;
    double d = 0;
    long long ll = 0;
    unsigned long long ull = 0;
    int kind = to == IR_DTYPE_BOOL ? IR_PARSE_BOOL : ir_dtype_is_float(to) ? IR_PARSE_FLOAT
               : to == IR_DTYPE_U64                                      ? IR_PARSE_U64
                                                                         : IR_PARSE_I64;
    if (!ir_parse_number(buf, kind, &d, &ll, &ull)) goto bad;
    if (kind == IR_PARSE_BOOL) ((uint8_t *)out->data)[i] = d != 0;
    else if (kind == IR_PARSE_FLOAT) interp_set_f(out, i, d);
    else if (kind == IR_PARSE_U64) ((uint64_t *)out->data)[i] = ull;
    else interp_set_i(out, i, ll);
    return IR_OK;
bad:
    return interp_error(a, "string element %lld (\"%s\") is not a %s number", (long long)i, buf, ir_dtype_name(to));
}

IrStatus interp_cast_strings(KernelArgs *a, const IrTensor *x, IrDType to) {
    if (x->dtype != IR_DTYPE_STRING) return cast_to_strings(a, x);
    if (to == IR_DTYPE_STRING) {
        IrStatus s = interp_alloc_output(a, 0, to, x->rank, x->dims);
        if (!s && ir_tensor_numel(x)) memcpy(a->out[0].data, x->data, ir_tensor_nbytes(x));
        return s;
    }
    IrStatus s = interp_alloc_output(a, 0, to, x->rank, x->dims);
    if (s) return s;
    const IrStringElem *el = x->data;
    char buf[512];
    for (int64_t i = 0; i < ir_tensor_numel(x) && !s; i++) s = parse_number(a, el[i], &a->out[0], i, buf, sizeof buf);
    return s;
}

/* ---- StringNormalizer ----------------------------------------------------------------------- */

IrStatus interp_STRING_NORMALIZER(KernelArgs *a) {
    const IrTensor *x = a->in[0];
    if (!x || x->dtype != IR_DTYPE_STRING) return interp_error(a, "input must be a string tensor");
    if (!(x->rank == 1 || (x->rank == 2 && x->dims[0] == 1)))
        return interp_error(a, "input must have shape [C] or [1, C]");
    const char *act = interp_attr_string(a, "case_change_action");
    int mode = !act || !*act || strcmp(act, "NONE") == 0 ? 0 : strcmp(act, "LOWER") == 0 ? 1 : strcmp(act, "UPPER") == 0 ? 2 : -1;
    if (mode < 0) return interp_error(a, "case_change_action must be NONE, LOWER or UPPER, got '%s'", act);
    bool sensitive = interp_attr_int(a, "is_case_sensitive") != 0;
    IrAttrValue sw = {0};
    bool have_sw = ir_node_attr(a->g, a->node, "stopwords", &sw) && sw.kind == IR_ATTR_STRINGS;
    int64_t n = ir_tensor_numel(x), kept = 0;
    const IrStringElem *in = x->data;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += in[i].len;
    IrStringElem *el = malloc(((size_t)n + 1) * sizeof *el);
    char *bytes = malloc(total + 1);
    if (!el || !bytes) {
        free(el);
        free(bytes);
        return IR_ENOMEM;
    }
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        bool stop = false;
        for (uint32_t k = 0; have_sw && k < sw.count && !stop; k++) {
            const char *w = ir_str(a->g, sw.strs[k]);
            IrStringElem we = {w, strlen(w)};
            stop = sensitive ? str_eq(in[i], we) : str_eq_nocase(in[i], we);
        }
        if (stop) continue;
        char *o = bytes + at;
        for (size_t j = 0; j < in[i].len; j++) {
            char c = in[i].data[j];
            o[j] = mode == 1 ? ascii_lower(c) : mode == 2 ? ascii_upper(c) : c;
        }
        el[kept++] = (IrStringElem){o, in[i].len};
        at += in[i].len;
    }
    /* every element removed: a single empty string, as ONNX specifies */
    if (kept == 0) el[kept++] = (IrStringElem){NULL, 0};
    int64_t dims[2] = {1, kept};
    IrStatus s = ir_tensor_from_strings(&a->out[0], x->rank, x->rank == 1 ? dims + 1 : dims, el);
    free(el);
    free(bytes);
    return s;
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------------ */

/* The n-gram pool: pool entries (strings or integers) grouped by length; ngram_counts[k] is the
 * start of the (k+1)-grams. An n-gram of the input matches pool n-gram j when every item is
 * equal; its output slot is ngram_indexes[j]. */
typedef struct TfIdf {
    const IrTensor *x;
    bool strings;
    int64_t *ints;      /* pool_int64s */
    const IrStrId *strs; /* pool_strings */
    int64_t pool_len;
    int64_t counts[64];
    int n_counts;
    int64_t *indexes;
    int64_t n_indexes;
} TfIdf;

static bool item_eq(const TfIdf *t, const KernelArgs *a, int64_t xi, int64_t pi) {
    if (t->strings) {
        const char *p = ir_str(a->g, t->strs[pi]);
        return str_eq(((const IrStringElem *)t->x->data)[xi], (IrStringElem){p, strlen(p)});
    }
    return interp_get_i(t->x, xi) == t->ints[pi];
}

/* Counts, in one row of C items starting at `base`, every n-gram (n in [lo, hi], item gap up
 * to `skip`) present in the pool, adding into counts[slot]. */
static void count_row(const TfIdf *t, const KernelArgs *a, int64_t base, int64_t c, int64_t lo, int64_t hi,
                      int64_t skip, double *counts) {
    for (int64_t n = lo; n <= hi; n++) {
        if (n > t->n_counts) break;
        int64_t start = t->counts[n - 1];
        int64_t end = n < t->n_counts ? t->counts[n] : t->pool_len;
        int64_t n_grams = (end - start) / n;
        for (int64_t gap = 0; gap <= (n == 1 ? 0 : skip); gap++) {
            int64_t span = (n - 1) * (gap + 1);
            for (int64_t i = 0; i + span < c; i++) {
                for (int64_t j = 0; j < n_grams; j++) {
                    int64_t p = start + j * n;
                    bool hit = true;
                    for (int64_t k = 0; k < n && hit; k++) hit = item_eq(t, a, base + i + k * (gap + 1), p + k);
                    if (!hit) continue;
                    int64_t ord = 0; /* index of this n-gram among all pool n-grams */
                    for (int64_t m = 1; m < n; m++) {
                        int64_t ms = t->counts[m - 1], me = m < t->n_counts ? t->counts[m] : t->pool_len;
                        ord += (me - ms) / m;
                    }
                    ord += j;
                    if (ord < t->n_indexes) counts[t->indexes[ord]] += 1;
                    break;
                }
            }
        }
    }
}

IrStatus interp_TF_IDF_VECTORIZER(KernelArgs *a) {
    const IrTensor *x = a->in[0];
    if (!x) return interp_error(a, "missing input");
    if (x->rank != 1 && x->rank != 2) return interp_error(a, "input must have shape [C] or [N, C]");
    TfIdf t = {.x = x, .strings = x->dtype == IR_DTYPE_STRING};
    if (!t.strings && x->dtype != IR_DTYPE_I32 && x->dtype != IR_DTYPE_I64)
        return interp_error(a, "input must be string, i32 or i64");
    int64_t lo = interp_attr_int(a, "min_gram_length"), hi = interp_attr_int(a, "max_gram_length");
    int64_t skip = interp_attr_int(a, "max_skip_count");
    const char *mode = interp_attr_string(a, "mode");
    int m = !mode ? -1 : strcmp(mode, "TF") == 0 ? 0 : strcmp(mode, "IDF") == 0 ? 1 : strcmp(mode, "TFIDF") == 0 ? 2 : -1;
    if (m < 0) return interp_error(a, "mode must be TF, IDF or TFIDF");
    if (lo < 1 || hi < lo || skip < 0) return interp_error(a, "bad n-gram lengths or skip count");
    IrAttrValue pool, cnt, idx, w;
    bool have_pool = t.strings ? ir_node_attr(a->g, a->node, "pool_strings", &pool)
                               : ir_node_attr(a->g, a->node, "pool_int64s", &pool);
    if (!have_pool)
        return interp_error(a, "a %s input needs the %s attribute", t.strings ? "string" : "integer",
                            t.strings ? "pool_strings" : "pool_int64s");
    if (!ir_node_attr(a->g, a->node, "ngram_counts", &cnt) || !ir_node_attr(a->g, a->node, "ngram_indexes", &idx))
        return interp_error(a, "needs ngram_counts and ngram_indexes");
    if (cnt.count == 0 || cnt.count > 64) return interp_error(a, "ngram_counts must have 1 to 64 entries");
    t.pool_len = pool.count;
    t.ints = (int64_t *)pool.ints;
    t.strs = pool.strs;
    t.n_counts = (int)cnt.count;
    int64_t total_grams = 0;
    for (uint32_t i = 0; i < cnt.count; i++) {
        t.counts[i] = cnt.ints[i];
        int64_t end = i + 1 < cnt.count ? cnt.ints[i + 1] : t.pool_len;
        if (cnt.ints[i] < 0 || end < cnt.ints[i] || end > t.pool_len || (end - cnt.ints[i]) % (int64_t)(i + 1))
            return interp_error(a, "ngram_counts does not split the pool into whole n-grams");
        total_grams += (end - cnt.ints[i]) / (int64_t)(i + 1);
    }
    t.indexes = (int64_t *)idx.ints;
    t.n_indexes = idx.count;
    if (t.n_indexes != total_grams)
        return interp_error(a, "ngram_indexes has %lld entries, the pool holds %lld n-grams", (long long)t.n_indexes,
                            (long long)total_grams);
    int64_t width = 0;
    for (int64_t i = 0; i < t.n_indexes; i++) {
        if (t.indexes[i] < 0) return interp_error(a, "negative entry in ngram_indexes");
        if (t.indexes[i] + 1 > width) width = t.indexes[i] + 1;
    }
    bool have_w = ir_node_attr(a->g, a->node, "weights", &w) && w.count;
    if (have_w && (int64_t)w.count != t.n_indexes)
        return interp_error(a, "weights has %u entries, ngram_indexes %lld", w.count, (long long)t.n_indexes);
    int64_t rows = x->rank == 2 ? x->dims[0] : 1, c = x->dims[x->rank - 1];
    int64_t dims[2] = {rows, width};
    IrStatus s = interp_alloc_output(a, 0, IR_DTYPE_F32, x->rank, x->rank == 2 ? dims : dims + 1);
    if (s) return s;
    double *counts = calloc((size_t)width + 1, sizeof *counts);
    if (!counts) return IR_ENOMEM;
    float *out = a->out[0].data;
    for (int64_t r = 0; r < rows; r++) {
        memset(counts, 0, (size_t)width * sizeof *counts);
        count_row(&t, a, r * c, c, lo, hi, skip, counts);
        for (int64_t j = 0; j < width; j++) {
            double v = counts[j];
            if (m == 1) v = v > 0 ? 1 : 0;
            out[r * width + j] = (float)v;
        }
        /* IDF and TFIDF scale by the weight of each pool n-gram (1 without weights) */
        if (m != 0 && have_w)
            for (int64_t k = 0; k < t.n_indexes; k++) out[r * width + t.indexes[k]] *= (float)w.floats[k];
    }
    free(counts);
    return IR_OK;
}

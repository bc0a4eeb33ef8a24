/* Robustness: thousands of deterministic mutations of every corpus model, in text and in
 * binary form, fed to the readers (then, when a reader accepts, to the verifier, the printer
 * and the use counter). Every case must end in IR_OK or a clean error with at least one
 * diagnostic: no crash, no leak, no hang (the sanitizer build turns the first two into
 * failures). Mutations are seeded per file, so a failure reproduces exactly; the case number
 * and mutation are in the assertion message.
 *
 * Text mutations: truncation, byte flips, deleting / duplicating / swapping tokens and lines,
 * inserting punctuation or keywords, extreme numbers. Binary mutations: byte flips,
 * truncations (with and without a consistent header), header fields set to edge values, and
 * protobuf-level edits of the metadata (keys, length prefixes, array elements, dropped,
 * duplicated and deleted fields) re-wrapped in a consistent container so they reach the
 * table checks.
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef MUTATIONS_PER_FILE
#define MUTATIONS_PER_FILE 10000
#endif

typedef struct Buf {
    unsigned char *p;
    size_t n, cap;
} Buf;

static void buf_reserve(Buf *b, size_t n) {
    if (n <= b->cap) return;
    size_t c = b->cap ? b->cap : 256;
    while (c < n) c *= 2;
    b->p = realloc(b->p, c);
    cr_assert_not_null(b->p);
    b->cap = c;
}
static void buf_set(Buf *b, const void *p, size_t n) {
    buf_reserve(b, n + 1);
    memcpy(b->p, p, n);
    b->n = n;
}
static void buf_insert(Buf *b, size_t at, const void *p, size_t n) {
    buf_reserve(b, b->n + n + 1);
    memmove(b->p + at + n, b->p + at, b->n - at);
    memcpy(b->p + at, p, n);
    b->n += n;
}
static void buf_erase(Buf *b, size_t at, size_t n) {
    memmove(b->p + at, b->p + at + n, b->n - at - n);
    b->n -= n;
}

/* ---- running one case ------------------------------------------------------------------------- */

static uint64_t n_ok, n_err;

static void exercise(IrGraph *g, const char *what, unsigned k) {
    IrDiag d;
    ir_diag_init(&d, tu_diag_count_fn, NULL);
    IrStatus s = ir_verify(g, &d);
    cr_assert(s == IR_OK || d.n_errors > 0, "%s case %u: verify failed (%s) without a diagnostic", what, k,
              ir_status_name(s));
    IrStrBuf b;
    ir_strbuf_init(&b);
    IrStatus ps = ir_print_text(g, &b);
    cr_assert_eq(ps, IR_OK, "%s case %u: print failed", what, k);
    ir_strbuf_free(&b);
    uint32_t *counts = calloc(ir_graph_num_values(g) + 1, sizeof *counts);
    ir_graph_count_uses(g, counts);
    free(counts);
    uint32_t walked = 0;
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n))
        cr_assert_leq(++walked, ir_graph_node_capacity(g), "%s case %u: walk does not end", what, k);
}

/* The reader gets an exact-size copy without a terminating NUL, so ASan catches over-reads. */
static void check_text(const unsigned char *p, size_t n, const char *what, unsigned k) {
    char *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    IrDiag d;
    ir_diag_init(&d, tu_diag_count_fn, NULL);
    IrGraph *g = NULL;
    IrStatus s = ir_parse_text(copy, n, "m.ir", &d, &g);
    if (s == IR_OK) {
        cr_assert_not_null(g);
        exercise(g, what, k);
        ir_graph_destroy(g);
        n_ok++;
    } else {
        cr_assert(s == IR_ESYNTAX || s == IR_ENOMEM, "%s case %u: status %s", what, k, ir_status_name(s));
        cr_assert_null(g, "%s case %u: graph returned with an error", what, k);
        cr_assert_gt(d.n_errors, 0, "%s case %u: error %s without a diagnostic", what, k, ir_status_name(s));
        n_err++;
    }
    free(copy);
}

static void check_binary(const unsigned char *p, size_t n, const char *what, unsigned k) {
    unsigned char *copy = malloc(n ? n : 1);
    memcpy(copy, p, n);
    IrDiag d;
    ir_diag_init(&d, tu_diag_count_fn, NULL);
    IrGraph *g = NULL;
    IrStatus s = ir_read_binary_mem(copy, n, "m.irb", &d, &g);
    free(copy); /* the graph must not refer to the input */
    if (s == IR_OK) {
        cr_assert_not_null(g);
        exercise(g, what, k);
        ir_graph_destroy(g);
        n_ok++;
    } else {
        cr_assert(s == IR_ESYNTAX || s == IR_EUNSUPPORTED || s == IR_ENOMEM, "%s case %u: status %s", what, k,
                  ir_status_name(s));
        cr_assert_null(g);
        cr_assert_gt(d.n_errors, 0, "%s case %u: error %s without a diagnostic", what, k, ir_status_name(s));
        n_err++;
    }
}

/* ---- text mutations ------------------------------------------------------------------------------ */

typedef struct Span {
    size_t at, n;
} Span;

static bool tok_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '%' || c == '@' || c >= 0x80;
}

/* Tokens: identifier-ish runs, whole strings, or single punctuation characters. */
static Span *tokenize(const Buf *b, size_t *count) {
    size_t cap = 256, n = 0;
    Span *t = malloc(cap * sizeof *t);
    for (size_t i = 0; i < b->n;) {
        unsigned char c = b->p[i];
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            i++;
            continue;
        }
        size_t s = i;
        if (c == '"') {
            for (i++; i < b->n && b->p[i] != '"' && b->p[i] != '\n'; i++)
                if (b->p[i] == '\\') i++;
            if (i < b->n) i++;
        } else if (tok_char(c)) {
            while (i < b->n && tok_char(b->p[i])) i++;
        } else {
            i++;
        }
        if (i > b->n) i = b->n;
        if (n == cap) t = realloc(t, (cap *= 2) * sizeof *t);
        t[n++] = (Span){s, i - s};
    }
    *count = n;
    return t;
}

static Span *split_lines(const Buf *b, size_t *count) {
    size_t cap = 64, n = 0, s = 0;
    Span *l = malloc(cap * sizeof *l);
    for (size_t i = 0; i <= b->n; i++)
        if (i == b->n || b->p[i] == '\n') {
            if (n == cap) l = realloc(l, (cap *= 2) * sizeof *l);
            l[n++] = (Span){s, i - s + (i < b->n)};
            s = i + 1;
        }
    *count = n;
    return l;
}

static const char *const inserts[] = {
    "(", ")", "{", "}", "[", "]", ",", ":", "=", "*", "?", "+", "-", "/", "%", "\"", "#", "@", "_", "->",
    "==", " %x ", " %\"q\" ", " If ", " then_branch() { ", " return ", " const ", " base64 ", " external ",
    " offset ", " symbol ", " graph ", " f32[", " bool[] ", " i64[*] ", " 0 ", " -1 ", " 1e-05 ", " nan ",
    " inf ", " 99999999999999999999 ", " -9223372036854775808 ", " \"\\x00\" ", " \"\\q\" ", "\xff", "\t",
    "\r\n", " name(\"n\") ", " loc(\"f\":1:2) ", " from(\"a\") ", " {axis = 1} ", " : ? ", " B ", " S/0 ",
};
#define N_INSERTS (sizeof inserts / sizeof inserts[0])

static const char *const numbers[] = {"0", "-1", "1", "65535", "4294967296", "-9223372036854775809",
                                      "18446744073709551616", "1e309", "-0.0", "nan", "3.5", "2147483648"};
#define N_NUMBERS (sizeof numbers / sizeof numbers[0])

static const char *mutate_text(Buf *b, TuRng *r) {
    size_t nt, nl;
    switch (tu_rng_below(r, 12)) {
    case 0: /* truncate */
        b->n = (size_t)tu_rng_below(r, b->n + 1);
        return "truncate";
    case 1: { /* byte flips */
        int k = 1 + (int)tu_rng_below(r, 4);
        for (int i = 0; i < k && b->n; i++) b->p[tu_rng_below(r, b->n)] = (unsigned char)tu_rng_next(r);
        return "flip bytes";
    }
    case 2: { /* flip one bit */
        if (b->n) b->p[tu_rng_below(r, b->n)] ^= (unsigned char)(1u << tu_rng_below(r, 8));
        return "flip bit";
    }
    case 3:
    case 4:
    case 5: { /* token edits */
        Span *t = tokenize(b, &nt);
        const char *what = "token";
        if (nt) {
            Span a = t[tu_rng_below(r, nt)];
            int op = (int)tu_rng_below(r, 3);
            if (op == 0) {
                buf_erase(b, a.at, a.n);
                what = "delete token";
            } else if (op == 1) {
                unsigned char tmp[4096];
                size_t n = a.n < sizeof tmp ? a.n : sizeof tmp;
                memcpy(tmp, b->p + a.at, n);
                buf_insert(b, a.at, " ", 1);
                buf_insert(b, a.at, tmp, n);
                what = "duplicate token";
            } else {
                Span c = t[tu_rng_below(r, nt)];
                if (c.at < a.at) {
                    Span s = a;
                    a = c;
                    c = s;
                }
                if (a.at + a.n <= c.at) { /* swap a and c (a first) */
                    size_t total = c.at + c.n - a.at;
                    unsigned char *tmp = malloc(total);
                    size_t mid = c.at - (a.at + a.n);
                    memcpy(tmp, b->p + c.at, c.n);
                    memcpy(tmp + c.n, b->p + a.at + a.n, mid);
                    memcpy(tmp + c.n + mid, b->p + a.at, a.n);
                    memcpy(b->p + a.at, tmp, total);
                    free(tmp);
                }
                what = "swap tokens";
            }
        }
        free(t);
        return what;
    }
    case 6:
    case 7: { /* line edits */
        Span *l = split_lines(b, &nl);
        Span a = l[tu_rng_below(r, nl)];
        int op = (int)tu_rng_below(r, 3);
        const char *what;
        if (op == 0) {
            buf_erase(b, a.at, a.n);
            what = "delete line";
        } else if (op == 1) {
            unsigned char *tmp = malloc(a.n + 1);
            memcpy(tmp, b->p + a.at, a.n);
            buf_insert(b, a.at, tmp, a.n);
            free(tmp);
            what = "duplicate line";
        } else {
            Span c = l[tu_rng_below(r, nl)];
            /* move line a to the start of line c */
            unsigned char *tmp = malloc(a.n + 1);
            memcpy(tmp, b->p + a.at, a.n);
            buf_erase(b, a.at, a.n);
            size_t at = c.at > a.at ? (c.at >= a.at + a.n ? c.at - a.n : a.at) : c.at;
            if (at > b->n) at = b->n;
            buf_insert(b, at, tmp, a.n);
            free(tmp);
            what = "move line";
        }
        free(l);
        return what;
    }
    case 8:
    case 9: { /* insert punctuation / keywords */
        const char *s = inserts[tu_rng_below(r, N_INSERTS)];
        buf_insert(b, (size_t)tu_rng_below(r, b->n + 1), s, strlen(s));
        return "insert";
    }
    case 10: { /* replace a number-like token by an extreme number */
        Span *t = tokenize(b, &nt);
        for (int tries = 0; tries < 20 && nt; tries++) {
            Span a = t[tu_rng_below(r, nt)];
            unsigned char c = b->p[a.at];
            if ((c >= '0' && c <= '9') || tries == 19) {
                const char *s = numbers[tu_rng_below(r, N_NUMBERS)];
                buf_erase(b, a.at, a.n);
                buf_insert(b, a.at, s, strlen(s));
                break;
            }
        }
        free(t);
        return "number";
    }
    default: { /* several small edits at once */
        for (int i = 0; i < 3; i++) {
            const char *s = inserts[tu_rng_below(r, N_INSERTS)];
            if (b->n && tu_rng_below(r, 2)) buf_erase(b, (size_t)tu_rng_below(r, b->n), 1);
            buf_insert(b, (size_t)tu_rng_below(r, b->n + 1), s, strlen(s));
        }
        return "multi";
    }
    }
}

/* ---- binary mutations ---------------------------------------------------------------------------- */

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static size_t put_varint(unsigned char *p, uint64_t v) {
    size_t n = 0;
    do {
        unsigned char c = v & 0x7F;
        v >>= 7;
        p[n++] = (unsigned char)(c | (v ? 0x80 : 0));
    } while (v);
    return n;
}
static bool get_varint(const unsigned char *p, size_t n, size_t *at, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && *at < n; s += 7) {
        unsigned char c = p[(*at)++];
        *v |= (uint64_t)(c & 0x7F) << s;
        if (!(c & 0x80)) return true;
    }
    return false;
}

typedef struct Field {
    size_t at, key_n, len_n; /* start, size of the key varint, size of the length varint (wire 2) */
    size_t payload, payload_n;
    uint32_t num, wire;
} Field;

static Field *parse_fields(const unsigned char *p, size_t n, size_t *count) {
    size_t cap = 64, k = 0, at = 0;
    Field *f = malloc(cap * sizeof *f);
    while (at < n) {
        Field x = {.at = at};
        uint64_t key;
        if (!get_varint(p, n, &at, &key)) break;
        x.key_n = at - x.at;
        x.num = (uint32_t)(key >> 3);
        x.wire = key & 7;
        size_t ps = at;
        uint64_t len = 0;
        switch (x.wire) {
        case 0:
            if (!get_varint(p, n, &at, &len)) goto done;
            break;
        case 1: at += 8; break;
        case 5: at += 4; break;
        case 2:
            if (!get_varint(p, n, &at, &len) || len > n - at) goto done;
            x.len_n = at - ps;
            ps = at;
            at += len;
            break;
        default: goto done;
        }
        if (at > n) break;
        x.payload = ps;
        x.payload_n = at - ps;
        if (k == cap) f = realloc(f, (cap *= 2) * sizeof *f);
        f[k++] = x;
    }
done:
    *count = k;
    return f;
}

/* A consistent container around new metadata: what ir_write_binary would produce. */
static void wrap(Buf *out, const unsigned char *orig, size_t orig_n, const unsigned char *meta, size_t meta_n) {
    uint64_t w_off = get_u64(orig + 32), w_size = get_u64(orig + 40);
    uint64_t nw = (64 + meta_n + 4095) / 4096 * 4096;
    size_t total = (size_t)(nw + w_size);
    buf_reserve(out, total + 1);
    memset(out->p, 0, total);
    memcpy(out->p, orig, 16);
    put_u64(out->p + 16, 64);
    put_u64(out->p + 24, meta_n);
    put_u64(out->p + 32, nw);
    put_u64(out->p + 40, w_size);
    put_u64(out->p + 48, total);
    memcpy(out->p + 64, meta, meta_n);
    if (w_size && w_off + w_size <= orig_n) memcpy(out->p + nw, orig + w_off, (size_t)w_size);
    out->n = total;
}

static uint64_t interesting(TuRng *r, uint64_t cur, uint64_t scale) {
    switch (tu_rng_below(r, 10)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return cur + 1;
    case 3: return cur ? cur - 1 : 0;
    case 4: return scale;
    case 5: return scale + 1;
    case 6: return 0xFFFFFFFFu;
    case 7: return 0x7FFFFFFFu;
    case 8: return UINT64_MAX;
    default: return tu_rng_below(r, scale * 2 + 2);
    }
}

/* Edits the protobuf metadata of a valid file and re-wraps it; returns a description. */
static const char *mutate_meta(Buf *out, const unsigned char *orig, size_t orig_n, TuRng *r) {
    uint64_t m_off = get_u64(orig + 16), m_size = get_u64(orig + 24);
    const unsigned char *meta = orig + m_off;
    size_t nf;
    Field *f = parse_fields(meta, (size_t)m_size, &nf);
    cr_assert_gt(nf, 0);
    Buf m = {0};
    buf_set(&m, meta, (size_t)m_size);
    Field x = f[tu_rng_below(r, nf)];
    unsigned char vb[10];
    const char *what;
    switch (tu_rng_below(r, 7)) {
    case 0: { /* an element of a packed fixed-width column, or a varint value */
        if (x.wire == 2 && x.payload_n >= 4 && x.num != 2 && x.num != 4 && x.num != 67) {
            bool wide = x.num == 9 || x.num == 40 || x.num == 49 || x.num == 50 || x.num == 52 || x.num == 58 ||
                        x.num == 59 || x.num == 61 || x.num == 62;
            size_t esz = wide && x.payload_n % 8 == 0 ? 8 : 4;
            size_t cnt = x.payload_n / esz;
            size_t i = (size_t)tu_rng_below(r, cnt);
            unsigned char *e = m.p + x.payload + i * esz;
            uint64_t cur = 0;
            for (size_t b = 0; b < esz; b++) cur |= (uint64_t)e[b] << (8 * b);
            uint64_t v = interesting(r, cur, cnt);
            for (size_t b = 0; b < esz; b++) e[b] = (unsigned char)(v >> (8 * b));
            what = "column element";
        } else if (x.wire == 0) {
            size_t n = put_varint(vb, interesting(r, 1, 4));
            buf_erase(&m, x.payload, x.payload_n);
            buf_insert(&m, x.payload, vb, n);
            what = "varint value";
        } else if (x.payload_n) {
            m.p[x.payload + tu_rng_below(r, x.payload_n)] = (unsigned char)tu_rng_next(r);
            what = "payload byte";
        } else {
            what = "nothing";
        }
        break;
    }
    case 1: { /* the length prefix */
        if (x.wire != 2) {
            what = "nothing";
            break;
        }
        uint64_t len = x.payload_n;
        uint64_t nl = tu_rng_below(r, 2) ? len + (uint64_t)tu_rng_below(r, 9) - 4 : interesting(r, len, len);
        size_t n = put_varint(vb, nl);
        buf_erase(&m, x.at + x.key_n, x.len_n);
        buf_insert(&m, x.at + x.key_n, vb, n);
        what = "length prefix";
        break;
    }
    case 2: { /* the key: another field number or wire type */
        uint64_t key = tu_rng_below(r, 2) ? ((uint64_t)(1 + tu_rng_below(r, 75)) << 3 | x.wire)
                                          : ((uint64_t)x.num << 3 | tu_rng_below(r, 8));
        size_t n = put_varint(vb, key);
        buf_erase(&m, x.at, x.key_n);
        buf_insert(&m, x.at, vb, n);
        what = "key";
        break;
    }
    case 3: { /* drop the last element of a column (the tables disagree in length) */
        if (x.wire != 2 || x.payload_n < 4) {
            what = "nothing";
            break;
        }
        size_t drop = x.payload_n % 8 == 0 && tu_rng_below(r, 2) ? 8 : 4;
        if (drop > x.payload_n) drop = 4;
        size_t n = put_varint(vb, x.payload_n - drop);
        buf_erase(&m, x.payload + x.payload_n - drop, drop);
        buf_erase(&m, x.at + x.key_n, x.len_n);
        buf_insert(&m, x.at + x.key_n, vb, n);
        what = "drop element";
        break;
    }
    case 4: /* delete the field */
        buf_erase(&m, x.at, x.payload + x.payload_n - x.at);
        what = "delete field";
        break;
    case 5: { /* duplicate the field (repeated fields concatenate) */
        size_t n = x.payload + x.payload_n - x.at;
        unsigned char *tmp = malloc(n);
        memcpy(tmp, m.p + x.at, n);
        buf_insert(&m, m.n, tmp, n);
        free(tmp);
        what = "duplicate field";
        break;
    }
    default: { /* a random byte anywhere in the metadata */
        if (m.n) m.p[tu_rng_below(r, m.n)] = (unsigned char)tu_rng_next(r);
        what = "meta byte";
        break;
    }
    }
    wrap(out, orig, orig_n, m.p, m.n);
    free(m.p);
    free(f);
    return what;
}

static const char *mutate_binary(Buf *b, const unsigned char *orig, size_t orig_n, TuRng *r) {
    buf_set(b, orig, orig_n);
    switch (tu_rng_below(r, 8)) {
    case 0: { /* byte flips anywhere in the header and metadata (weights are opaque) */
        size_t limit = (size_t)(get_u64(orig + 16) + get_u64(orig + 24));
        int k = 1 + (int)tu_rng_below(r, 4);
        for (int i = 0; i < k; i++) b->p[tu_rng_below(r, limit)] = (unsigned char)tu_rng_next(r);
        return "flip bytes";
    }
    case 1: /* truncate */
        b->n = (size_t)tu_rng_below(r, orig_n);
        return "truncate";
    case 2: { /* truncate with a header that agrees */
        b->n = 64 + (size_t)tu_rng_below(r, orig_n - 64);
        put_u64(b->p + 48, b->n);
        if (get_u64(b->p + 32) + get_u64(b->p + 40) > b->n && tu_rng_below(r, 2)) {
            uint64_t mo = get_u64(b->p + 16);
            uint64_t ms = b->n - mo;
            put_u64(b->p + 24, ms);
            put_u64(b->p + 32, b->n);
            put_u64(b->p + 40, 0);
        }
        return "consistent truncate";
    }
    case 3: { /* header fields */
        static const size_t offs[] = {8, 12, 16, 24, 32, 40, 48};
        size_t at = offs[tu_rng_below(r, 7)];
        uint64_t cur = at < 16 ? (get_u64(b->p + 8) >> (at == 12 ? 32 : 0)) & 0xFFFFFFFFu : get_u64(b->p + at);
        uint64_t v = interesting(r, cur, orig_n);
        if (at < 16)
            for (int i = 0; i < 4; i++) b->p[at + i] = (unsigned char)(v >> (8 * i));
        else
            put_u64(b->p + at, v);
        return "header field";
    }
    default:
        return mutate_meta(b, orig, orig_n, r);
    }
}

/* ---- the tests ----------------------------------------------------------------------------------- */

static char **files;
static size_t n_files;

static void load_list(void) {
    files = tu_list_dir("corpus", ".ir", &n_files);
    cr_assert_not_null(files);
    cr_assert_geq(n_files, 5);
}
static void free_list(void) { tu_free_list(files); }

static uint64_t seed_of(const char *s, uint64_t salt) {
    uint64_t h = 1469598103934665603ull ^ salt;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

#define MAX_FILES 8

ParameterizedTestParameters(mutation, text) {
    static int idx[MAX_FILES] = {0, 1, 2, 3, 4, 5, 6, 7};
    return cr_make_param_array(int, idx, MAX_FILES);
}

ParameterizedTest(int *i, mutation, text, .init = load_list, .fini = free_list) {
    if ((size_t)*i >= n_files) return;
    const char *name = files[*i];
    size_t len;
    char *orig = tu_corpus_read(name, &len);
    cr_assert_not_null(orig);
    check_text((const unsigned char *)orig, len, name, 0);
    TuRng r;
    tu_rng_seed(&r, seed_of(name, 1));
    Buf b = {0};
    clock_t t0 = clock();
    n_ok = n_err = 0;
    for (unsigned k = 1; k <= MUTATIONS_PER_FILE; k++) {
        buf_set(&b, orig, len);
        const char *what = mutate_text(&b, &r);
        /* stack a second mutation sometimes */
        if (tu_rng_below(&r, 4) == 0) mutate_text(&b, &r);
        char desc[128];
        snprintf(desc, sizeof desc, "%s text (%s)", name, what);
        check_text(b.p, b.n, desc, k);
    }
    cr_log_info("%s: %d text mutations, %llu parsed, %llu rejected, %.2f s cpu", name, MUTATIONS_PER_FILE,
                (unsigned long long)n_ok, (unsigned long long)n_err, (double)(clock() - t0) / CLOCKS_PER_SEC);
    cr_assert_gt(n_err, MUTATIONS_PER_FILE / 4, "most mutations must be rejected");
    free(b.p);
    free(orig);
}

ParameterizedTestParameters(mutation, binary) {
    static int idx[MAX_FILES] = {0, 1, 2, 3, 4, 5, 6, 7};
    return cr_make_param_array(int, idx, MAX_FILES);
}

ParameterizedTest(int *i, mutation, binary, .init = load_list, .fini = free_list) {
    if ((size_t)*i >= n_files) return;
    const char *name = files[*i];
    IrGraph *g = tu_load_corpus(name, NULL);
    cr_assert_not_null(g);
    char *dir = tu_mkdtemp();
    char *path = tu_path_join(dir, "m.irb");
    IrDiag d;
    ir_diag_init(&d, tu_diag_count_fn, NULL);
    cr_assert_eq(ir_write_binary(g, path, &d), IR_OK);
    ir_graph_destroy(g);
    size_t len;
    unsigned char *orig = (unsigned char *)tu_read_file(path, &len);
    tu_rmtree(dir);
    free(path);
    free(dir);
    cr_assert_not_null(orig);
    check_binary(orig, len, name, 0);
    /* a re-wrap of the unmodified metadata must be accepted: the container builder is right */
    Buf b = {0};
    wrap(&b, orig, len, orig + 64, (size_t)get_u64(orig + 24));
    cr_assert_eq(b.n, len);
    cr_assert_eq(memcmp(b.p, orig, len), 0, "%s: wrap() reproduces the writer's container", name);
    TuRng r;
    tu_rng_seed(&r, seed_of(name, 2));
    clock_t t0 = clock();
    n_ok = n_err = 0;
    for (unsigned k = 1; k <= MUTATIONS_PER_FILE; k++) {
        const char *what = mutate_binary(&b, orig, len, &r);
        char desc[128];
        snprintf(desc, sizeof desc, "%s binary (%s)", name, what);
        check_binary(b.p, b.n, desc, k);
    }
    cr_log_info("%s: %d binary mutations, %llu loaded, %llu rejected, %.2f s cpu", name, MUTATIONS_PER_FILE,
                (unsigned long long)n_ok, (unsigned long long)n_err, (double)(clock() - t0) / CLOCKS_PER_SEC);
    cr_assert_gt(n_err, MUTATIONS_PER_FILE / 4, "most mutations must be rejected");
    free(b.p);
    free(orig);
}

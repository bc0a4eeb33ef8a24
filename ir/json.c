/* JSON through jansson: building helpers, the writer and shape-checked reading (ir/json.h).
 * jansson parses, escapes strings and prints integers; the writer here only chooses the layout
 * and prints reals, because jansson prints them with one fixed precision per document (%.17g by
 * default: 0.1 as 0.10000000000000001) where reports want the shortest text that reads back to
 * the same double. */
#include "ir/json.h"
#include "ir/strconv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- building -------------------------------------------------------------------------------- */

json_t *ir_json_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* Length of the well-formed UTF-8 sequence at s (n bytes left), 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!k || k > n) return 0;
    unsigned cp = k == 1 ? c : k == 2 ? c & 0x1f : k == 3 ? c & 0x0f : c & 0x07;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000}; /* no overlong forms */
    if (cp < least[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return k;
}

json_t *ir_json_string(const char *s) {
    if (!s) s = "";
    json_t *v = json_string(s);
    if (v) return v;
    /* not UTF-8 (or out of memory): replace each bad byte by U+FFFD */
    size_t n = strlen(s);
    char *t = malloc(3 * n + 1), *o = t;
    if (!t) return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k) {
            memcpy(o, s + i, k);
            o += k, i += k;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3, i++;
        }
    }
    *o = 0;
    v = json_string(t);
    free(t);
    return v;
}

bool ir_json_set(json_t *obj, const char *key, json_t *v) {
    if (!obj || !v) {
        json_decref(v);
        return false;
    }
    return json_object_set_new(obj, key, v) == 0;
}

bool ir_json_push(json_t *arr, json_t *v) {
    if (!arr || !v) {
        json_decref(v);
        return false;
    }
    return json_array_append_new(arr, v) == 0;
}

/* ---- writing --------------------------------------------------------------------------------- */

/* A scalar as jansson writes it (strings escaped, integers in full); reals shortest. */
static void write_scalar(const json_t *v, IrStrBuf *out) {
    if (json_is_real(v)) {
        char buf[40];
        ir_format_float(json_real_value(v), 0, buf, sizeof buf);
        ir_strbuf_puts(out, buf);
        return;
    }
    char small[64];
    size_t n = json_dumpb(v, small, sizeof small, JSON_ENCODE_ANY);
    if (n == 0) {
        out->failed = true;
        return;
    }
    if (n <= sizeof small) {
        ir_strbuf_append(out, small, n);
        return;
    }
    char *big = malloc(n);
    if (!big || json_dumpb(v, big, n, JSON_ENCODE_ANY) != n) out->failed = true;
    else ir_strbuf_append(out, big, n);
    free(big);
}

static void write_key(const char *key, IrStrBuf *out) {
    json_t *k = json_string(key); /* keys in a jansson object are valid UTF-8 */
    if (!k) {
        out->failed = true;
        return;
    }
    write_scalar(k, out);
    json_decref(k);
    ir_strbuf_puts(out, ": ");
}

static void indent(IrStrBuf *out, int n) {
    ir_strbuf_putc(out, '\n');
    for (int i = 0; i < n; i++) ir_strbuf_putc(out, ' ');
}

/* v at nesting depth `depth`: with ROWS, containers at depth 0 and arrays at depth 1 put each
 * item on its own line (indented 2 per level); all else stays on the line. */
static void write_value(const json_t *v, IrJsonLayout layout, int depth, IrStrBuf *out) {
    bool obj = json_is_object(v);
    if (!obj && !json_is_array(v)) {
        write_scalar(v, out);
        return;
    }
    size_t n = obj ? json_object_size(v) : json_array_size(v);
    bool rows = layout == IR_JSON_ROWS && n > 0 && (depth == 0 || (depth == 1 && !obj));
    ir_strbuf_putc(out, obj ? '{' : '[');
    if (obj) {
        const char *key;
        const json_t *m;
        size_t i = 0;
        json_object_foreach((json_t *)v, key, m) {
            if (rows) indent(out, 2 * (depth + 1));
            else if (i) ir_strbuf_puts(out, ", ");
            write_key(key, out);
            write_value(m, layout, depth + 1, out);
            if (rows && i + 1 < n) ir_strbuf_putc(out, ',');
            i++;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            if (rows) indent(out, 2 * (depth + 1));
            else if (i) ir_strbuf_puts(out, ", ");
            write_value(json_array_get(v, i), layout, depth + 1, out);
            if (rows && i + 1 < n) ir_strbuf_putc(out, ',');
        }
    }
    if (rows) indent(out, 2 * depth);
    ir_strbuf_putc(out, obj ? '}' : ']');
}

void ir_json_write(const json_t *v, IrJsonLayout layout, IrStrBuf *out) {
    if (!v) {
        out->failed = true;
        return;
    }
    write_value(v, layout, 0, out);
    ir_strbuf_putc(out, '\n');
}

IrStatus ir_json_write_file(const json_t *v, IrJsonLayout layout, const char *path, IrDiag *diag) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_json_write(v, layout, &b);
    IrStatus s = b.failed || !b.data ? IR_ENOMEM : ir_write_file_atomic(path, b.data, b.len, diag);
    if (s == IR_ENOMEM) ir_diag_report(diag, IR_SEV_ERROR, path, 0, 0, NULL, 0, "out of memory writing JSON");
    ir_strbuf_free(&b);
    return s;
}

/* ---- reading --------------------------------------------------------------------------------- */

IrStatus ir_json_parse(const char *text, size_t len, const char *name, IrDiag *diag, json_t **out) {
    json_error_t e;
    *out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (*out) return IR_OK;
    if (e.line < 1) {
        ir_diag_report(diag, IR_SEV_ERROR, name, 0, 0, NULL, 0, "%s", e.text);
        return IR_ESYNTAX;
    }
    /* the source line of the error, for the caret */
    const char *ls = text, *end = text + len;
    for (int l = 1; l < e.line && ls < end; l++) {
        const char *nl = memchr(ls, '\n', (size_t)(end - ls));
        ls = nl ? nl + 1 : end;
    }
    const char *le = memchr(ls, '\n', (size_t)(end - ls));
    ir_diag_report(diag, IR_SEV_ERROR, name, (uint32_t)e.line, e.column > 0 ? (uint32_t)e.column : 0, ls,
                   (size_t)((le ? le : end) - ls), "%s", e.text);
    return IR_ESYNTAX;
}

IrStatus ir_json_load(const char *path, IrDiag *diag, json_t **out) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    IrStatus s = ir_read_file(path, diag, &text, &len);
    if (!s) s = ir_json_parse(text, len, path, diag, out);
    free(text);
    return s;
}

static const char *kind_text(IrJsonKind k) {
    switch (k) {
    case IR_JSON_OBJECT: return "an object";
    case IR_JSON_ARRAY: return "an array";
    case IR_JSON_STRING: return "a string";
    case IR_JSON_NUMBER: return "a number";
    case IR_JSON_NUMBER_OR_NULL: return "a number or null";
    case IR_JSON_INTEGER: return "an integer";
    case IR_JSON_BOOL: return "true or false";
    }
    return "?";
}

static bool kind_ok(const json_t *v, IrJsonKind k) {
    switch (k) {
    case IR_JSON_OBJECT: return json_is_object(v);
    case IR_JSON_ARRAY: return json_is_array(v);
    case IR_JSON_STRING: return json_is_string(v);
    case IR_JSON_NUMBER: return json_is_number(v);
    case IR_JSON_NUMBER_OR_NULL: return json_is_number(v) || json_is_null(v);
    case IR_JSON_INTEGER: return json_is_integer(v);
    case IR_JSON_BOOL: return json_is_boolean(v);
    }
    return false;
}

/* "PATH: " before a message, nothing at the top */
static void report(const IrJsonAt *at, const char *what) {
    ir_diag_report(at->diag, IR_SEV_ERROR, at->file, 0, 0, NULL, 0, "%s%s%s", at->path, *at->path ? ": " : "", what);
}

bool ir_json_check(const json_t *v, IrJsonKind kind, const IrJsonAt *at) {
    if (kind_ok(v, kind)) return true;
    char msg[64];
    snprintf(msg, sizeof msg, "expected %s", kind_text(kind));
    report(at, msg);
    return false;
}

const json_t *ir_json_member(const json_t *obj, const char *key, IrJsonKind kind, bool required, const IrJsonAt *at) {
    const json_t *v = json_object_get(obj, key);
    IrJsonAt sub = ir_json_at_key(at, key);
    if (!v) {
        if (required) report(&sub, "missing");
        return NULL;
    }
    return ir_json_check(v, kind, &sub) ? v : NULL;
}

IrJsonAt ir_json_at_key(const IrJsonAt *at, const char *key) {
    IrJsonAt r = *at;
    size_t n = strlen(r.path);
    snprintf(r.path + n, sizeof r.path - n, "%s%s", n ? "." : "", key);
    return r;
}

IrJsonAt ir_json_at_index(const IrJsonAt *at, size_t i) {
    IrJsonAt r = *at;
    size_t n = strlen(r.path);
    snprintf(r.path + n, sizeof r.path - n, "[%zu]", i);
    return r;
}

double ir_json_number_value(const json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

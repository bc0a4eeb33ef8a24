/* Text format reader (.ir); the grammar is documented in ir/FORMAT.md.
 *
 * A hand-written lexer and recursive-descent parser with all state in one Parser struct. The
 * first error is reported as `file:line:col: error: ...` with the source line and a caret, and
 * parsing stops (no recovery: a half-understood graph is worse than none). Nesting depth, token
 * sizes and element counts are bounded, so hostile input cannot exhaust the stack or memory.
 */
#include "ir_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 64
#define MAX_TYPE_DEPTH 4 /* seq<...> / opt<...> nesting; a valid type needs at most 2 */
#define MAX_RANK 1024

typedef enum Tok {
    T_EOF,
    T_IDENT,  /* name, keyword, op, dtype */
    T_VALUE,  /* %name or %"name" */
    T_GLOBAL, /* @name or @"name" */
    T_STRING,
    T_INT,
    T_FLOAT,
    T_PUNCT, /* single character in tok.c; "->" and "==" as c = 'A' / 'E' */
} Tok;

typedef struct Token {
    Tok kind;
    const char *p; /* start in text (for idents, ints, floats: the lexeme) */
    size_t n;
    char c;             /* punctuation */
    uint32_t line, col; /* position */
    bool quoted;        /* VALUE/GLOBAL written with quotes: text in p,n is the raw quoted body */
} Token;

typedef struct OpCache {
    const char *p;
    size_t n;
    IrOp op;
} OpCache;

/* A type parsed from the exact source text p[0..n) at region depth `depth`. */
typedef struct TypeCache {
    const char *p;
    uint32_t n;
    int depth;
    IrTypeId t;
} TypeCache;

typedef struct Parser {
    const char *text, *end, *cur;
    uint32_t line;
    const char *line_start;
    const char *file;
    IrDiag *diag;
    IrGraph *g;
    Token tok;
    bool failed;
    int depth;
    int type_depth; /* containers open in the type being parsed */
    IrStrId recent[8]; /* names of the last values defined: most operands refer to them */
    uint64_t recent_hash[8];
    uint32_t recent_pos;
    uint32_t expr_terms; /* terms in the current type or constraint (bounded) */
    IrStrBuf scratch; /* unescaped strings */
    OpCache ops[256];
    TypeCache types[256];
    char *dir; /* directory of the file, for external weights */
} Parser;

/* ---- errors -------------------------------------------------------------------------------- */

static const char *line_start_of(const Parser *P, uint32_t line, size_t *len) {
    /* the current line is cached; other lines are found by scanning (errors only) */
    const char *p = P->text;
    for (uint32_t l = 1; l < line && p < P->end; p++)
        if (*p == '\n') l++;
    const char *e = p;
    while (e < P->end && *e != '\n') e++;
    *len = (size_t)(e - p);
    return p;
}

static void error_at(Parser *P, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void error_at(Parser *P, uint32_t line, uint32_t col, const char *fmt, ...) {
    if (P->failed) return;
    P->failed = true;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len;
    const char *src = line_start_of(P, line, &len);
    ir_diag_report(P->diag, IR_SEV_ERROR, P->file, line, col, src, len, "%s", msg);
}

static void describe_tok(const Token *t, char *buf, size_t cap) {
    switch (t->kind) {
    case T_EOF: snprintf(buf, cap, "end of file"); break;
    case T_PUNCT:
        if (t->c == 'A') snprintf(buf, cap, "'->'");
        else if (t->c == 'E') snprintf(buf, cap, "'=='");
        else snprintf(buf, cap, "'%c'", t->c);
        break;
    default: {
        size_t n = t->n > 40 ? 40 : t->n;
        const char *pre = t->kind == T_VALUE ? "%" : t->kind == T_GLOBAL ? "@" : "";
        if (t->kind == T_STRING) snprintf(buf, cap, "string");
        else snprintf(buf, cap, "'%s%.*s%s'", pre, (int)n, t->p, t->n > 40 ? "..." : "");
    }
    }
}

#define ERR(P, ...) error_at((P), (P)->tok.line, (P)->tok.col, __VA_ARGS__)

static void expected(Parser *P, const char *what) {
    char got[64];
    describe_tok(&P->tok, got, sizeof got);
    ERR(P, "expected %s, found %s", what, got);
}

/* ---- lexer --------------------------------------------------------------------------------- */

static bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c) || c == '.'; }
static bool is_name_char(char c) { return is_ident_char(c); }
static bool is_punct_char(char c) {
    switch (c) {
    case '(': case ')': case '{': case '}': case '[': case ']': case ',': case ':': case '=':
    case '*': case '?': case '+': case '-': case '/': case '%': case '<': case '>': return true;
    default: return false;
    }
}

static void skip_space(Parser *P) {
    const char *p = P->cur, *end = P->end;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
        if (p < end && *p == '\n') {
            P->line++;
            P->line_start = ++p;
            continue;
        }
        if (p < end && *p == '#') {
            while (p < end && *p != '\n') p++;
            continue;
        }
        P->cur = p;
        return;
    }
}

/* Scans a "..." string starting at P->cur (on the quote). Returns false on error. */
static bool scan_string(Parser *P, Token *t) {
    const char *s = ++P->cur;
    /* fast path for long strings (base64 weights): no escape and no newline before the quote */
    const char *q = memchr(s, '"', (size_t)(P->end - s));
    if (q && !memchr(s, '\\', (size_t)(q - s)) && !memchr(s, '\n', (size_t)(q - s))) {
        t->p = s;
        t->n = (size_t)(q - s);
        P->cur = q + 1;
        return true;
    }
    while (P->cur < P->end && *P->cur != '"') {
        if (*P->cur == '\n') {
            error_at(P, t->line, t->col, "unterminated string");
            return false;
        }
        if (*P->cur == '\\') {
            P->cur++;
            if (P->cur >= P->end) break;
        }
        P->cur++;
    }
    if (P->cur >= P->end) {
        error_at(P, t->line, t->col, "unterminated string");
        return false;
    }
    t->p = s;
    t->n = (size_t)(P->cur - s);
    P->cur++;
    return true;
}

static void next(Parser *P) {
    if (P->failed) {
        P->tok.kind = T_EOF;
        return;
    }
    skip_space(P);
    Token *t = &P->tok;
    memset(t, 0, sizeof *t);
    t->line = P->line;
    t->col = (uint32_t)(P->cur - P->line_start) + 1;
    if (P->cur >= P->end) {
        t->kind = T_EOF;
        return;
    }
    char c = *P->cur;
    if (c == 0) {
        error_at(P, t->line, t->col, "unexpected NUL byte");
        t->kind = T_EOF;
        return;
    }
    if (is_ident_start(c)) {
        const char *s = P->cur;
        while (P->cur < P->end && is_ident_char(*P->cur)) P->cur++;
        t->kind = T_IDENT;
        t->p = s;
        t->n = (size_t)(P->cur - s);
        return;
    }
    if ((c == '%' || c == '@') && P->cur + 1 < P->end && (is_name_char(P->cur[1]) || P->cur[1] == '"')) {
        t->kind = c == '%' ? T_VALUE : T_GLOBAL;
        P->cur++;
        if (P->cur < P->end && *P->cur == '"') {
            t->quoted = true;
            if (!scan_string(P, t)) t->kind = T_EOF;
            return;
        }
        const char *s = P->cur;
        while (P->cur < P->end && is_name_char(*P->cur)) P->cur++;
        if (P->cur == s) {
            error_at(P, t->line, t->col, "expected a name after '%c'", c);
            t->kind = T_EOF;
            return;
        }
        t->p = s;
        t->n = (size_t)(P->cur - s);
        return;
    }
    if (c == '"') {
        t->kind = T_STRING;
        if (!scan_string(P, t)) t->kind = T_EOF;
        return;
    }
    if (is_digit(c) || (c == '.' && P->cur + 1 < P->end && is_digit(P->cur[1]))) {
        const char *s = P->cur;
        bool is_float = false;
        while (P->cur < P->end && is_digit(*P->cur)) P->cur++;
        if (P->cur < P->end && *P->cur == '.') {
            is_float = true;
            P->cur++;
            while (P->cur < P->end && is_digit(*P->cur)) P->cur++;
        }
        if (P->cur < P->end && (*P->cur == 'e' || *P->cur == 'E')) {
            const char *save = P->cur;
            P->cur++;
            if (P->cur < P->end && (*P->cur == '+' || *P->cur == '-')) P->cur++;
            if (P->cur < P->end && is_digit(*P->cur)) {
                is_float = true;
                while (P->cur < P->end && is_digit(*P->cur)) P->cur++;
            } else {
                P->cur = save;
            }
        }
        if (P->cur < P->end && is_ident_start(*P->cur)) {
            error_at(P, t->line, t->col, "malformed number");
            t->kind = T_EOF;
            return;
        }
        t->kind = is_float ? T_FLOAT : T_INT;
        t->p = s;
        t->n = (size_t)(P->cur - s);
        if (t->n > 64) {
            error_at(P, t->line, t->col, "number too long");
            t->kind = T_EOF;
        }
        return;
    }
    t->kind = T_PUNCT;
    P->cur++;
    if (c == '-' && P->cur < P->end && *P->cur == '>') {
        P->cur++;
        t->c = 'A';
        return;
    }
    if (c == '=' && P->cur < P->end && *P->cur == '=') {
        P->cur++;
        t->c = 'E';
        return;
    }
    if (is_punct_char(c)) {
        t->c = c;
        return;
    }
    if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
        error_at(P, t->line, t->col, "unexpected byte 0x%02x", (unsigned char)c);
    else
        error_at(P, t->line, t->col, "unexpected character '%c'", c);
    t->kind = T_EOF;
}

static bool is_punct(Parser *P, char c) { return P->tok.kind == T_PUNCT && P->tok.c == c; }
static bool is_kw(Parser *P, const char *kw) {
    return P->tok.kind == T_IDENT && P->tok.n == strlen(kw) && memcmp(P->tok.p, kw, P->tok.n) == 0;
}

static bool accept(Parser *P, char c) {
    if (is_punct(P, c)) {
        next(P);
        return true;
    }
    return false;
}

static bool expect(Parser *P, char c) {
    if (accept(P, c)) return true;
    char what[16];
    snprintf(what, sizeof what, c == 'A' ? "'->'" : c == 'E' ? "'=='" : "'%c'", c);
    expected(P, what);
    return false;
}

static bool expect_kw(Parser *P, const char *kw) {
    if (is_kw(P, kw)) {
        next(P);
        return true;
    }
    char what[64];
    snprintf(what, sizeof what, "'%s'", kw);
    expected(P, what);
    return false;
}

/* Unescapes the current string token into P->scratch (NUL-terminated); \x00 is accepted only
 * with allow_nul (string tensor elements, which are byte strings of any content). */
static bool unescape_ex(Parser *P, const Token *t, bool allow_nul) {
    P->scratch.len = 0;
    if (P->scratch.data) P->scratch.data[0] = 0;
    for (size_t i = 0; i < t->n; i++) {
        char c = t->p[i];
        if (c != '\\') {
            ir_strbuf_putc(&P->scratch, c);
            continue;
        }
        if (++i >= t->n) break;
        switch (t->p[i]) {
        case 'n': ir_strbuf_putc(&P->scratch, '\n'); break;
        case 't': ir_strbuf_putc(&P->scratch, '\t'); break;
        case 'r': ir_strbuf_putc(&P->scratch, '\r'); break;
        case '"': ir_strbuf_putc(&P->scratch, '"'); break;
        case '\\': ir_strbuf_putc(&P->scratch, '\\'); break;
        case 'x': {
            int v = 0;
            for (int k = 0; k < 2; k++) {
                char h = ++i < t->n ? t->p[i] : 0;
                int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (d < 0) {
                    error_at(P, t->line, t->col, "bad \\x escape in string");
                    return false;
                }
                v = v * 16 + d;
            }
            if (v == 0 && !allow_nul) {
                error_at(P, t->line, t->col, "strings cannot contain NUL");
                return false;
            }
            ir_strbuf_putc(&P->scratch, (char)v);
            break;
        }
        default: error_at(P, t->line, t->col, "unknown escape '\\%c' in string", t->p[i]); return false;
        }
    }
    if (P->scratch.failed) {
        error_at(P, t->line, t->col, "out of memory");
        return false;
    }
    if (!P->scratch.data) ir_strbuf_putc(&P->scratch, 0), P->scratch.len = 0;
    return true;
}

static bool unescape(Parser *P, const Token *t) { return unescape_ex(P, t, false); }

/* Interns the name in a VALUE/GLOBAL/STRING token. */
static IrStrId tok_str(Parser *P, const Token *t) {
    if ((t->kind == T_STRING || t->quoted) && memchr(t->p, '\\', t->n)) {
        if (!unescape(P, t)) return 0;
        if (P->scratch.len == 0) return 0;
        return ir_str_intern(P->g, P->scratch.data, P->scratch.len);
    }
    return ir_str_intern(P->g, t->p, t->n);
}

/* Copies the current token's text, after a '-' when neg, into buf (NUL-terminated, truncated
 * to fit; number tokens are at most 64 bytes). */
static void tok_text(const Parser *P, bool neg, char *buf, size_t cap) {
    size_t k = 0;
    if (neg) buf[k++] = '-';
    size_t n = P->tok.n < cap - 1 - k ? P->tok.n : cap - 1 - k;
    memcpy(buf + k, P->tok.p, n);
    buf[k + n] = 0;
}

static bool parse_int_tok(Parser *P, int64_t *out, bool neg) {
    if (P->tok.kind != T_INT) {
        expected(P, "an integer");
        return false;
    }
    errno = 0;
    char buf[72];
    tok_text(P, neg, buf, sizeof buf);
    char *e;
    long long v = strtoll(buf, &e, 10);
    if (errno == ERANGE) {
        ERR(P, "integer out of range");
        return false;
    }
    *out = v;
    next(P);
    return true;
}

/* Signed integer literal. */
static bool parse_int(Parser *P, int64_t *out) {
    bool neg = accept(P, '-');
    return parse_int_tok(P, out, neg);
}

/* A number of any kind: returns its text (with sign) in buf and whether it is an int. */
static bool parse_number_text(Parser *P, char *buf, size_t cap, bool *is_int) {
    bool neg = accept(P, '-');
    if (P->tok.kind == T_INT || P->tok.kind == T_FLOAT) {
        *is_int = P->tok.kind == T_INT;
        tok_text(P, neg, buf, cap);
        next(P);
        return true;
    }
    if (is_kw(P, "inf") || is_kw(P, "nan")) {
        *is_int = false;
        tok_text(P, neg, buf, cap);
        next(P);
        return true;
    }
    expected(P, "a number");
    return false;
}

static double text_to_double(const char *s) { return strtod(s, NULL); }
/* Exact decimal -> float: the Clinger fast path in double, then one rounding to float. A
 * double q = RN(D * 10^k) rounds to the same float as the exact value unless q is itself a
 * midpoint between two floats (no midpoint can lie strictly between the value and its nearest
 * double), so that case, and anything outside the fast path, goes to strtof. */
static float text_to_float(const char *s) {
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                   1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *p = s;
    bool neg = *p == '-';
    if (*p == '-' || *p == '+') p++;
    uint64_t d = 0;
    int digits = 0, frac = 0, e = 0;
    while (is_digit(*p)) {
        if (d || *p != '0') digits++;
        d = d * 10 + (uint64_t)(*p++ - '0');
        if (digits > 15) return strtof(s, NULL);
    }
    if (*p == '.') {
        p++;
        while (is_digit(*p)) {
            if (d || *p != '0') digits++;
            d = d * 10 + (uint64_t)(*p++ - '0');
            frac++;
            if (digits > 15) return strtof(s, NULL);
        }
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        bool eneg = *p == '-';
        if (*p == '-' || *p == '+') p++;
        if (!is_digit(*p)) return strtof(s, NULL);
        while (is_digit(*p) && e < 1000) e = e * 10 + (*p++ - '0');
        if (eneg) e = -e;
    }
    if (*p) return strtof(s, NULL); /* inf, nan, or anything unusual */
    int k = e - frac;
    if (k < -22 || k > 22) return strtof(s, NULL);
    double q = k < 0 ? (double)d / pow10[-k] : (double)d * pow10[k];
    if (d && (q < 1.2e-38 || q > 3.4e38)) return strtof(s, NULL); /* float subnormal/overflow */
    uint64_t bits;
    memcpy(&bits, &q, 8);
    if ((bits & ((1ull << 29) - 1)) == (1ull << 28)) return strtof(s, NULL); /* a float midpoint */
    float f = (float)q;
    return neg ? -f : f;
}

/* ---- types and expressions ----------------------------------------------------------------- */

static IrExprId parse_expr(Parser *P);

static IrExprId parse_factor(Parser *P) {
    if (++P->depth > MAX_DEPTH || ++P->expr_terms > 4096) {
        ERR(P, "dimension expression too deep or too long (the parser's limits: %d levels, 4096 terms)", MAX_DEPTH);
        return 0;
    }
    IrExprId e = 0;
    if (P->tok.kind == T_INT) {
        int64_t v;
        if (parse_int_tok(P, &v, false)) e = ir_expr_const(P->g, v);
    } else if (is_punct(P, '-')) {
        next(P);
        int64_t v;
        if (parse_int_tok(P, &v, true)) e = ir_expr_const(P->g, v);
    } else if (accept(P, '?')) {
        e = ir_expr_unknown(P->g);
    } else if (P->tok.kind == T_IDENT && P->tok.n == 3 && (!memcmp(P->tok.p, "min", 3) || !memcmp(P->tok.p, "max", 3)) &&
               !ir_sym_find(P->g, P->tok.p, P->tok.n)) {
        /* min(a, b) / max(a, b) (a symbol may not take these names and be called) */
        IrExprKind k = P->tok.p[1] == 'i' ? IR_EXPR_MIN : IR_EXPR_MAX;
        next(P);
        if (expect(P, '(')) {
            IrExprId a = parse_expr(P), b = 0;
            if (a && expect(P, ',')) b = parse_expr(P);
            if (b && expect(P, ')')) e = ir_expr_binary(P->g, k, a, b);
        }
    } else if (P->tok.kind == T_IDENT) {
        IrSymId s = ir_sym_find(P->g, P->tok.p, P->tok.n);
        if (!s) {
            ERR(P, "undeclared symbol '%.*s' (declare it with 'symbol')", (int)P->tok.n, P->tok.p);
        } else {
            e = ir_expr_sym(P->g, s);
            next(P);
        }
    } else if (accept(P, '(')) {
        e = parse_expr(P);
        if (!expect(P, ')')) e = 0;
    } else {
        expected(P, "a dimension");
    }
    P->depth--;
    return P->failed ? 0 : e;
}

static IrExprId parse_term(Parser *P) {
    IrExprId e = parse_factor(P);
    for (;;) {
        if (!e) return 0;
        uint32_t line = P->tok.line, col = P->tok.col;
        char op;
        IrExprId r;
        if (is_punct(P, '*') || is_punct(P, '/') || is_punct(P, '%')) {
            op = P->tok.c;
            next(P);
            r = parse_factor(P);
        } else if (P->tok.kind == T_VALUE && !P->tok.quoted && P->tok.n && is_digit(P->tok.p[0])) {
            /* `S %8` lexes as a value name; in a dimension it means modulo */
            Token t = P->tok;
            P->tok.kind = T_INT;
            P->tok.p = t.p;
            P->tok.n = t.n;
            for (size_t i = 0; i < t.n; i++)
                if (!is_digit(t.p[i])) {
                    ERR(P, "invalid dimension expression");
                    return 0;
                }
            op = '%';
            r = parse_factor(P);
        } else {
            break;
        }
        if (!r) return 0;
        IrExprKind k = op == '*' ? IR_EXPR_MUL : op == '/' ? IR_EXPR_DIV : IR_EXPR_MOD;
        int64_t rv;
        if (k != IR_EXPR_MUL && ir_expr_is_const(P->g, r, &rv) && rv == 0) {
            error_at(P, line, col, "division by zero in dimension");
            return 0;
        }
        e = ir_expr_binary(P->g, k, e, r);
    }
    return e;
}

static IrExprId parse_expr(Parser *P) {
    IrExprId e = parse_term(P);
    while (e && (is_punct(P, '+') || is_punct(P, '-'))) {
        char op = P->tok.c;
        next(P);
        IrExprId r = parse_term(P);
        if (!r) return 0;
        e = ir_expr_binary(P->g, op == '+' ? IR_EXPR_ADD : IR_EXPR_SUB, e, r);
    }
    if (!e && !P->failed) ERR(P, "invalid dimension expression");
    return e;
}

static bool parse_type(Parser *P, IrTypeId *t);

static bool parse_container_rest(Parser *P, bool seq, uint32_t line, uint32_t col, IrTypeId *t);

/* container := ('seq' | 'opt') '<' (type | DTYPE) '>' ; a bare DTYPE is an unranked tensor */
static bool parse_container_type(Parser *P, IrTypeId *t) {
    bool seq = P->tok.p[0] == 's';
    uint32_t line = P->tok.line, col = P->tok.col;
    next(P);
    if (!expect(P, '<')) return false;
    if (++P->type_depth > MAX_TYPE_DEPTH) {
        error_at(P, line, col, "type nested too deeply: seq<...>/opt<...> more than %d levels (the parser's limit; a valid type needs 2 at most)",
                 MAX_TYPE_DEPTH);
        return false;
    }
    bool ok = parse_container_rest(P, seq, line, col, t);
    P->type_depth--;
    return ok;
}

static bool parse_container_rest(Parser *P, bool seq, uint32_t line, uint32_t col, IrTypeId *t) {
    IrTypeId e = 0;
    if (P->tok.kind == T_IDENT && !is_kw(P, "seq") && !is_kw(P, "opt") &&
        !(P->cur < P->end && *P->cur == '[')) {
        IrDType dt = ir_dtype_from_name(P->tok.p, P->tok.n);
        if (dt == IR_DTYPE_NONE) {
            ERR(P, "unknown dtype '%.*s'", (int)P->tok.n, P->tok.p);
            return false;
        }
        next(P);
        e = ir_type_tensor(P->g, dt, IR_RANK_UNKNOWN, NULL);
    } else if (!parse_type(P, &e)) {
        return false;
    }
    if (!expect(P, '>')) return false;
    IrTypeKind ek = ir_type_kind(P->g, e);
    if (seq && ek != IR_TYPE_TENSOR) {
        error_at(P, line, col, "a sequence holds tensors, not %s", ek == IR_TYPE_SEQ ? "sequences" : "optionals");
        return false;
    }
    if (!seq && ek == IR_TYPE_OPT) {
        error_at(P, line, col, "an optional cannot hold an optional");
        return false;
    }
    *t = seq ? ir_type_seq(P->g, e) : ir_type_opt(P->g, e);
    if (!*t) ERR(P, "out of memory");
    return *t != 0;
}

/* type := '?' | DTYPE '[' ('*' | dims?) ']' | container ; returns false on error, *t = 0 for
 * '?' */
static bool parse_type_text(Parser *P, IrTypeId *t) {
    *t = 0;
    if (accept(P, '?')) return true;
    if (P->tok.kind != T_IDENT) {
        expected(P, "a type");
        return false;
    }
    if ((is_kw(P, "seq") || is_kw(P, "opt")) && P->cur < P->end && *P->cur == '<')
        return parse_container_type(P, t);
    IrDType dt = ir_dtype_from_name(P->tok.p, P->tok.n);
    if (dt == IR_DTYPE_NONE) {
        ERR(P, "unknown dtype '%.*s'", (int)P->tok.n, P->tok.p);
        return false;
    }
    next(P);
    if (!expect(P, '[')) return false;
    P->expr_terms = 0;
    if (accept(P, '*')) {
        if (!expect(P, ']')) return false;
        *t = ir_type_tensor(P->g, dt, IR_RANK_UNKNOWN, NULL);
        return *t != 0;
    }
    IrExprId dims[MAX_RANK];
    uint32_t rank = 0;
    if (!is_punct(P, ']')) {
        do {
            if (rank == MAX_RANK) {
                ERR(P, "rank exceeds %d", MAX_RANK);
                return false;
            }
            uint32_t line = P->tok.line, col = P->tok.col;
            IrExprId e = parse_expr(P);
            if (!e) return false;
            int64_t v;
            if (ir_expr_is_const(P->g, e, &v) && v < 0) {
                error_at(P, line, col, "negative dimension %lld", (long long)v);
                return false;
            }
            dims[rank++] = e;
        } while (accept(P, ','));
    }
    if (!expect(P, ']')) return false;
    *t = ir_type_tensor(P->g, dt, rank, dims);
    if (!*t) ERR(P, "out of memory");
    return *t != 0;
}

/* Characters a one-line type can hold besides its closing ']': dtype, dims, expressions. */
static bool is_type_char(char c) {
    switch (c) {
    case ' ': case ',': case '[': case '*': case '?': case '+': case '-': case '/': case '%': case '(': case ')':
        return true;
    default: return is_ident_char(c);
    }
}

/* Length of the type text starting at the current (dtype) token through its ']', or 0 when
 * it holds anything but plain type characters on one line (no comments, strings or newlines),
 * so that equal text always parses to the same type. */
static size_t type_span(const Parser *P) {
    const char *s = P->tok.p;
    for (const char *p = P->cur; p < P->end && p - s < 256; p++) {
        char c = *p;
        if (c == ']') return (size_t)(p + 1 - s);
        if (!is_type_char(c)) return 0;
    }
    return 0;
}

/* Types repeat from node to node: one parsed from the same text at the same depth is taken
 * from a small cache instead of being lexed and interned again. */
static bool parse_type(Parser *P, IrTypeId *t) {
    size_t n = P->tok.kind == T_IDENT ? type_span(P) : 0;
    if (!n) return parse_type_text(P, t);
    const char *s = P->tok.p;
    TypeCache *c = &P->types[ir_hash_bytes(s, n, 5) & 255];
    if (c->p && c->n == n && c->depth == P->depth && memcmp(c->p, s, n) == 0) {
        *t = c->t;
        P->cur = s + n;
        next(P);
        return true;
    }
    if (!parse_type_text(P, t)) return false;
    *c = (TypeCache){s, (uint32_t)n, P->depth, *t};
    return true;
}

/* ---- tensor literals ----------------------------------------------------------------------- */

/* Each base64 digit's value plus one; 0 marks bytes that are not digits. A table, because
 * weights are mostly base64 and a chain of range tests per byte was a visible cost. */
static const uint8_t b64_digits[256] = {
    ['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8,
    ['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16,
    ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24,
    ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32,
    ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40,
    ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48,
    ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
    ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
};

static int b64_val(unsigned char c) { return b64_digits[c] - 1; }

static bool b64_decode(const char *s, size_t n, unsigned char *out, size_t want) {
    if (n % 4 != 0 || n / 4 * 3 < want || n / 4 * 3 > want + 2) return false;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)s[i + k];
            v[k] = c == '=' ? -2 : b64_val(c);
            if (v[k] == -1) return false;
            if (v[k] == -2 && i + 4 != n) return false;
        }
        if (v[0] < 0 || v[1] < 0 || (v[2] == -2 && v[3] != -2)) return false;
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)(v[2] < 0 ? 0 : v[2]) << 6 |
                     (uint32_t)(v[3] < 0 ? 0 : v[3]);
        unsigned char b[3] = {(unsigned char)(w >> 16), (unsigned char)(w >> 8), (unsigned char)w};
        int nb = v[2] == -2 ? 1 : v[3] == -2 ? 2 : 3;
        for (int k = 0; k < nb; k++) {
            if (o < want) out[o] = b[k];
            o++;
        }
    }
    return o == want;
}

static bool store_number(Parser *P, IrDType dt, void *data, size_t i, const char *txt, bool is_int,
                         uint32_t line, uint32_t col) {
    if (dt == IR_DTYPE_BOOL) {
        if (!is_int || (strcmp(txt, "0") != 0 && strcmp(txt, "1") != 0)) {
            error_at(P, line, col, "bool element must be true, false, 0 or 1");
            return false;
        }
        ((uint8_t *)data)[i] = txt[0] == '1';
        return true;
    }
    if (ir_dtype_is_int(dt)) {
        if (!is_int) {
            error_at(P, line, col, "%s element must be an integer", ir_dtype_name(dt));
            return false;
        }
        errno = 0;
        if (dt == IR_DTYPE_U64) {
            if (txt[0] == '-') {
                error_at(P, line, col, "u64 element is negative");
                return false;
            }
            unsigned long long u = strtoull(txt, NULL, 10);
            if (errno == ERANGE) {
                error_at(P, line, col, "integer out of range for u64");
                return false;
            }
            ((uint64_t *)data)[i] = u;
            return true;
        }
        long long v = strtoll(txt, NULL, 10);
        int64_t lo, hi;
        switch (dt) {
        case IR_DTYPE_I8: lo = INT8_MIN, hi = INT8_MAX; break;
        case IR_DTYPE_I16: lo = INT16_MIN, hi = INT16_MAX; break;
        case IR_DTYPE_I32: lo = INT32_MIN, hi = INT32_MAX; break;
        case IR_DTYPE_U8: lo = 0, hi = UINT8_MAX; break;
        case IR_DTYPE_U16: lo = 0, hi = UINT16_MAX; break;
        case IR_DTYPE_U32: lo = 0, hi = UINT32_MAX; break;
        default: lo = INT64_MIN, hi = INT64_MAX; break;
        }
        if (errno == ERANGE || v < lo || v > hi) {
            error_at(P, line, col, "integer %s out of range for %s", txt, ir_dtype_name(dt));
            return false;
        }
        ir_elem_set_i64(dt, data, i, v);
        return true;
    }
    switch (dt) {
    case IR_DTYPE_F64: ((double *)data)[i] = text_to_double(txt); break;
    case IR_DTYPE_F32: ((float *)data)[i] = text_to_float(txt); break;
    case IR_DTYPE_F16: ((uint16_t *)data)[i] = ir_f32_to_f16(text_to_float(txt)); break;
    case IR_DTYPE_BF16: ((uint16_t *)data)[i] = ir_f32_to_bf16(text_to_float(txt)); break;
    case IR_DTYPE_F8E4M3FN: ((uint8_t *)data)[i] = ir_f32_to_f8e4m3fn(text_to_float(txt), true); break;
    case IR_DTYPE_F8E5M2: ((uint8_t *)data)[i] = ir_f32_to_f8e5m2(text_to_float(txt), false); break;
    default: return false;
    }
    return true;
}

static bool map_external(Parser *P, const char *rel, uint64_t offset, size_t nbytes, const void **data,
                         uint32_t line, uint32_t col) {
    if (rel[0] == '/' || strstr(rel, "..")) {
        error_at(P, line, col, "external weight path must be relative and stay beside the model");
        return false;
    }
    /* confined like ONNX external data: symlinks may not lead out of the model's folder */
    struct stat st;
    const char *why;
    int fd = ir__open_beside(P->dir, rel, &st, &why);
    if (fd == -2) {
        error_at(P, line, col, "external weights '%s' lead out of the model's folder (through a symlink)", rel);
        return false;
    }
    if (fd < 0) {
        error_at(P, line, col, "cannot open external weights '%s': %s", rel, why);
        return false;
    }
    if ((uint64_t)st.st_size < offset || (uint64_t)st.st_size - offset < nbytes) {
        error_at(P, line, col, "external weights '%s' are shorter than offset %llu + %zu bytes", rel,
                 (unsigned long long)offset, nbytes);
        close(fd);
        return false;
    }
    if (nbytes == 0) {
        close(fd);
        *data = NULL;
        return true;
    }
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t base = offset - offset % (uint64_t)pg;
    size_t len = nbytes + (size_t)(offset - base);
    void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, (off_t)base);
    close(fd);
    if (m == MAP_FAILED) {
        error_at(P, line, col, "cannot map external weights: %s", strerror(errno));
        return false;
    }
    if (ir_graph_adopt_mapping(P->g, m, len) != IR_OK) {
        munmap(m, len);
        return false;
    }
    *data = (const char *)m + (offset - base);
    return true;
}

/* string tensor_lit := '[' STRING (',' STRING)* ']': elements are collected as offsets into one
 * growing buffer, then written as the constant's blob (ir.h). */
static IrConstId parse_string_lit(Parser *P, IrTypeId type, int64_t numel, uint32_t line, uint32_t col) {
    if (!is_punct(P, '[')) {
        expected(P, "'[' (string constants are written as a list of quoted strings)");
        return 0;
    }
    if ((uint64_t)numel > (uint64_t)(P->end - P->cur)) {
        error_at(P, line, col, "constant type needs %lld elements, more than the rest of the text holds",
                 (long long)numel);
        return 0;
    }
    next(P);
    IrStrBuf bytes;
    ir_strbuf_init(&bytes);
    size_t *ends = calloc((size_t)numel + 1, sizeof *ends);
    IrStringElem *el = calloc((size_t)numel + 1, sizeof *el);
    IrConstId c = 0;
    int64_t i = 0;
    if (!ends || !el) {
        ERR(P, "out of memory");
        goto out;
    }
    if (!is_punct(P, ']')) {
        do {
            if (P->tok.kind != T_STRING) {
                expected(P, "a quoted string");
                goto out;
            }
            if (i >= numel) {
                ERR(P, "too many elements: %s has %lld", "type", (long long)numel);
                goto out;
            }
            if (memchr(P->tok.p, '\\', P->tok.n)) {
                if (!unescape_ex(P, &P->tok, true)) goto out;
                ir_strbuf_append(&bytes, P->scratch.data, P->scratch.len);
            } else {
                ir_strbuf_append(&bytes, P->tok.p, P->tok.n);
            }
            ends[i++] = bytes.len;
            next(P);
        } while (accept(P, ','));
    }
    if (!expect(P, ']')) goto out;
    if (i != numel) {
        error_at(P, line, col, "constant has %lld elements but its type needs %lld", (long long)i, (long long)numel);
        goto out;
    }
    if (bytes.failed) {
        ERR(P, "out of memory");
        goto out;
    }
    for (int64_t k = 0; k < numel; k++) {
        size_t a = k ? ends[k - 1] : 0;
        el[k] = (IrStringElem){bytes.data ? bytes.data + a : NULL, ends[k] - a};
    }
    c = ir_const_create_strings(P->g, type, el, (size_t)numel);
    if (!c) ERR(P, "out of memory");
out:
    free(ends);
    free(el);
    ir_strbuf_free(&bytes);
    return c;
}

/* tensor_lit := '[' numbers ']' | '[' strings ']' | 'base64' STRING | 'external' STRING 'offset' INT */
static IrConstId parse_tensor_lit(Parser *P, IrTypeId type) {
    IrGraph *g = P->g;
    int64_t numel;
    uint32_t line = P->tok.line, col = P->tok.col;
    if (!type || !ir_type_numel(g, type, &numel)) {
        ERR(P, "constant type must have known, constant dimensions");
        return 0;
    }
    IrDType dt = ir_type_dtype(g, type);
    if (dt == IR_DTYPE_STRING) return parse_string_lit(P, type, numel, line, col);
    size_t esz = ir_dtype_size(dt);
    if ((uint64_t)numel > (SIZE_MAX / 2) / esz) {
        ERR(P, "constant too large");
        return 0;
    }
    size_t nbytes = (size_t)numel * esz;
    if (is_kw(P, "external")) {
        next(P);
        if (P->tok.kind != T_STRING) {
            expected(P, "a file name string");
            return 0;
        }
        Token ft = P->tok;
        IrStrId path = tok_str(P, &ft);
        if (!path) {
            if (!P->failed) ERR(P, "empty file name");
            return 0;
        }
        next(P);
        int64_t off;
        if (!expect_kw(P, "offset") || !parse_int(P, &off)) return 0;
        if (off < 0) {
            ERR(P, "negative offset");
            return 0;
        }
        const void *data;
        if (!map_external(P, ir_str(g, path), (uint64_t)off, nbytes, &data, ft.line, ft.col)) return 0;
        IrConstId c = ir_const_create_borrowed(g, type, data, nbytes);
        if (c) ir_const_set_external(g, c, path, (uint64_t)off);
        return c;
    }
    if (is_kw(P, "base64")) {
        next(P);
        if (P->tok.kind != T_STRING) {
            expected(P, "a base64 string");
            return 0;
        }
        /* check the size before allocating: a small file must not make us allocate gigabytes */
        size_t bn = P->tok.n;
        bool size_ok = bn % 4 == 0 && bn / 4 * 3 >= nbytes && bn / 4 * 3 <= nbytes + 2;
        IrConstId c = size_ok ? ir_const_create(g, type, NULL, nbytes) : 0;
        if (size_ok && !c) {
            ERR(P, "out of memory");
            return 0;
        }
        if (!size_ok || !b64_decode(P->tok.p, P->tok.n, (unsigned char *)ir_const_data(g, c), nbytes)) {
            ERR(P, "base64 data is malformed or does not hold %zu bytes for %s", nbytes,
                ir_dtype_name(dt));
            return 0;
        }
        next(P);
        return c;
    }
    if (!is_punct(P, '[')) {
        expected(P, "'[', 'base64' or 'external'");
        return 0;
    }
    /* every element takes at least one byte of text: refuse before allocating */
    if ((uint64_t)numel > (uint64_t)(P->end - P->cur)) {
        error_at(P, line, col, "constant type needs %lld elements, more than the rest of the text holds",
                 (long long)numel);
        return 0;
    }
    next(P);
    IrConstId c = ir_const_create(g, type, NULL, nbytes);
    if (!c) {
        ERR(P, "out of memory");
        return 0;
    }
    void *data = (void *)ir_const_data(g, c);
    int64_t i = 0;
    if (!is_punct(P, ']')) {
        do {
            uint32_t el = P->tok.line, ec = P->tok.col;
            if (i >= numel) {
                error_at(P, el, ec, "too many elements: %s has %lld", "type", (long long)numel);
                return 0;
            }
            char txt[80];
            bool is_int;
            if (dt == IR_DTYPE_BOOL && (is_kw(P, "true") || is_kw(P, "false"))) {
                ((uint8_t *)data)[i] = is_kw(P, "true");
                next(P);
            } else {
                if (!parse_number_text(P, txt, sizeof txt, &is_int)) return 0;
                if (!store_number(P, dt, data, (size_t)i, txt, is_int, el, ec)) return 0;
            }
            i++;
        } while (accept(P, ','));
    }
    if (!expect(P, ']')) return 0;
    if (i != numel) {
        error_at(P, line, col, "constant has %lld elements but its type needs %lld", (long long)i, (long long)numel);
        return 0;
    }
    return c;
}

/* ---- attributes ---------------------------------------------------------------------------- */

typedef struct AttrBuf {
    int64_t *ints;
    double *floats;
    IrStrId *strs;
    uint32_t n, cap;
} AttrBuf;

static bool attrbuf_push(AttrBuf *b, int64_t i, double f, IrStrId s) {
    if (b->n == b->cap) {
        uint32_t nc = b->cap ? b->cap * 2 : 16;
        int64_t *ni = realloc(b->ints, nc * sizeof *ni);
        if (ni) b->ints = ni;
        double *nf = realloc(b->floats, nc * sizeof *nf);
        if (nf) b->floats = nf;
        IrStrId *ns = realloc(b->strs, nc * sizeof *ns);
        if (ns) b->strs = ns;
        if (!ni || !nf || !ns) return false;
        b->cap = nc;
    }
    b->ints[b->n] = i;
    b->floats[b->n] = f;
    b->strs[b->n] = s;
    b->n++;
    return true;
}

static void attrbuf_free(AttrBuf *b) {
    free(b->ints);
    free(b->floats);
    free(b->strs);
}

/* attr := IDENT '=' value; `want` is the schema kind (NONE if the op has no such attribute). */
static bool parse_attr_value(Parser *P, IrAttrKind want, IrAttrValue *v, AttrBuf *buf) {
    memset(v, 0, sizeof *v);
    if (P->tok.kind == T_STRING) {
        v->kind = IR_ATTR_STRING;
        Token t = P->tok;
        v->s = tok_str(P, &t);
        next(P);
        return !P->failed;
    }
    if (P->tok.kind == T_IDENT && !is_kw(P, "inf") && !is_kw(P, "nan")) {
        IrDType dt = ir_dtype_from_name(P->tok.p, P->tok.n);
        if (dt == IR_DTYPE_NONE) {
            ERR(P, "unknown dtype '%.*s' in attribute value", (int)P->tok.n, P->tok.p);
            return false;
        }
        /* DTYPE[...] followed by a literal is a tensor; a bare dtype is a dtype */
        const char *save = P->cur;
        uint32_t sl = P->line;
        const char *sls = P->line_start;
        Token st = P->tok;
        next(P);
        if (!is_punct(P, '[')) {
            v->kind = IR_ATTR_DTYPE;
            v->i = dt;
            return true;
        }
        P->cur = save;
        P->line = sl;
        P->line_start = sls;
        P->tok = st;
        IrTypeId t;
        if (!parse_type(P, &t)) return false;
        v->kind = IR_ATTR_TENSOR;
        v->tensor = parse_tensor_lit(P, t);
        return v->tensor != 0;
    }
    if (is_punct(P, '[')) {
        next(P);
        buf->n = 0;
        IrAttrKind k = want == IR_ATTR_FLOATS || want == IR_ATTR_STRINGS ? want : IR_ATTR_INTS;
        bool any_float = false, any_str = false, any_num = false;
        if (!is_punct(P, ']')) {
            do {
                if (P->tok.kind == T_STRING) {
                    Token t = P->tok;
                    IrStrId s = tok_str(P, &t);
                    if (P->failed) return false;
                    next(P);
                    any_str = true;
                    if (!attrbuf_push(buf, 0, 0, s)) goto oom;
                } else {
                    char txt[80];
                    bool is_int;
                    if (!parse_number_text(P, txt, sizeof txt, &is_int)) return false;
                    any_num = true;
                    if (!is_int) any_float = true;
                    errno = 0;
                    int64_t iv = is_int ? strtoll(txt, NULL, 10) : 0;
                    if (errno == ERANGE) {
                        ERR(P, "integer out of range");
                        return false;
                    }
                    if (!attrbuf_push(buf, iv, (double)text_to_float(txt), 0)) goto oom;
                }
            } while (accept(P, ','));
        }
        if (!expect(P, ']')) return false;
        if (any_str && any_num) {
            ERR(P, "list mixes strings and numbers");
            return false;
        }
        if (any_str) k = IR_ATTR_STRINGS;
        else if (any_float) k = IR_ATTR_FLOATS;
        if (k == IR_ATTR_STRINGS && any_num) {
            ERR(P, "expected a list of strings");
            return false;
        }
        if (k == IR_ATTR_INTS && want == IR_ATTR_FLOATS) k = IR_ATTR_FLOATS;
        v->kind = k;
        v->count = buf->n;
        v->ints = buf->ints;
        v->floats = buf->floats;
        v->strs = buf->strs;
        return true;
    }
    char txt[80];
    bool is_int;
    if (!parse_number_text(P, txt, sizeof txt, &is_int)) return false;
    if (is_int && want != IR_ATTR_FLOAT) {
        errno = 0;
        v->kind = IR_ATTR_INT;
        v->i = strtoll(txt, NULL, 10);
        if (errno == ERANGE) {
            ERR(P, "integer out of range");
            return false;
        }
    } else {
        v->kind = IR_ATTR_FLOAT;
        v->f = text_to_float(txt);
    }
    return true;
oom:
    ERR(P, "out of memory");
    return false;
}

static bool node_has_attr(const IrGraph *g, IrNodeId n, IrStrId name) {
    for (uint32_t i = 0; i < ir_node_num_attrs(g, n); i++)
        if (ir_node_attr_name(g, n, i) == name) return true;
    return false;
}

static bool parse_attrs(Parser *P, IrNodeId n, IrOp op) {
    AttrBuf buf = {0};
    bool ok = false;
    do {
        if (P->tok.kind != T_IDENT) {
            expected(P, "an attribute name");
            goto out;
        }
        Token nt = P->tok;
        IrStrId name = ir_str_intern(P->g, nt.p, nt.n);
        if (node_has_attr(P->g, n, name)) {
            ERR(P, "attribute '%.*s' given twice", (int)nt.n, nt.p);
            goto out;
        }
        next(P);
        if (!expect(P, '=')) goto out;
        IrAttrSpec spec = {0};
        if (!ir_op_attr_spec(op, nt.p, nt.n, &spec)) spec.kind = IR_ATTR_NONE;
        IrAttrValue v;
        if (!parse_attr_value(P, spec.kind, &v, &buf)) goto out;
        ir_node_set_attr_id(P->g, n, name, &v);
    } while (accept(P, ','));
    ok = expect(P, '}');
out:
    attrbuf_free(&buf);
    return ok;
}

/* ---- graph structure ----------------------------------------------------------------------- */

static IrOp lookup_op(Parser *P, const char *p, size_t n) {
    uint64_t h = ir_hash_bytes(p, n, 3) & 255;
    OpCache *e = &P->ops[h];
    if (e->p && e->n == n && memcmp(e->p, p, n) == 0) return e->op;
    IrOp op = ir_op_from_name(p, n);
    e->p = p;
    e->n = n;
    e->op = op;
    return op;
}

static IrValueId lookup_value(Parser *P) {
    Token t = P->tok;
    IrValueId v;
    if (t.quoted) {
        IrStrId s = tok_str(P, &t);
        v = s ? ir_value_find(P->g, ir_str(P->g, s), strlen(ir_str(P->g, s))) : 0;
    } else {
        v = 0;
        uint64_t hv = ir_hash_bytes(t.p, t.n, 0);
        for (uint32_t k = 0; k < 8 && !v; k++) {
            uint32_t slot = (P->recent_pos - 1 - k) & 7;
            IrStrId r = P->recent[slot];
            if (!r) break;
            if (P->recent_hash[slot] != hv) continue;
            const char *nm = ir_str(P->g, r);
            if (strncmp(nm, t.p, t.n) == 0 && nm[t.n] == 0) v = ir__value_by_name(P->g, r);
        }
        if (!v) {
            IrStrId s = ir__str_find_hashed(P->g, t.p, t.n, hv);
            v = s ? ir__value_by_name(P->g, s) : 0;
        }
    }
    if (!v && !P->failed) {
        char d[64];
        describe_tok(&t, d, sizeof d);
        ERR(P, "use of undefined value %s", d);
        return 0;
    }
    next(P);
    return v;
}

/* Checks that a value name is free; returns its interned id. */
static IrStrId new_value_name(Parser *P, const Token *t) {
    bool plain = !t->quoted;
    uint64_t hv = plain ? ir_hash_bytes(t->p, t->n, 0) : 0;
    IrStrId s = plain ? ir__str_intern_hashed(P->g, t->p, t->n, hv) : tok_str(P, t);
    if (!s) {
        if (!P->failed) error_at(P, t->line, t->col, "empty value name");
        return 0;
    }
    if (ir__value_by_name(P->g, s)) {
        error_at(P, t->line, t->col, "redefinition of value %%%s", ir_str(P->g, s));
        return 0;
    }
    if (!plain) {
        const char *nm = ir_str(P->g, s);
        hv = ir_hash_bytes(nm, strlen(nm), 0);
    }
    P->recent_hash[P->recent_pos & 7] = hv;
    P->recent[P->recent_pos++ & 7] = s;
    return s;
}

/* args := '(' (VALUE ':' type (',' VALUE ':' type)*)? ')' */
static bool parse_args(Parser *P, IrRegionId r) {
    if (!expect(P, '(')) return false;
    if (!is_punct(P, ')')) {
        do {
            if (P->tok.kind != T_VALUE) {
                expected(P, "an argument like %x");
                return false;
            }
            Token t = P->tok;
            IrStrId s = new_value_name(P, &t);
            if (!s) return false;
            next(P);
            IrTypeId ty;
            if (!expect(P, ':') || !parse_type(P, &ty)) return false;
            if (!ir_region_add_arg(P->g, r, ir_str(P->g, s), ty)) {
                error_at(P, t.line, t.col, "out of memory");
                return false;
            }
        } while (accept(P, ','));
    }
    return expect(P, ')');
}

static bool parse_body(Parser *P, IrRegionId r);

/* With the current token '{': true when what follows is a region list (`name(` ...) rather
 * than attributes (`name =` ...), which a node without attributes and result types shows. */
static bool region_list_follows(const Parser *P) {
    const char *p = P->cur, *end = P->end;
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    if (p == end || !is_ident_start(*p)) return false;
    while (p < end && is_ident_char(*p)) p++;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    return p < end && *p == '(';
}

/* regions := '{' (IDENT args '{' body '}')* '}' in the op's region order */
static bool parse_regions(Parser *P, IrNodeId n, IrOp op) {
    uint32_t nreg = ir_op_num_regions(op);
    if (!expect(P, '{')) return false;
    for (uint32_t i = 0; i < nreg; i++) {
        char name[64];
        ir_op_region_name(op, i, name, sizeof name);
        if (!is_kw(P, name)) {
            char what[96];
            snprintf(what, sizeof what, "region '%s' of %s", name, ir_op_name(op));
            expected(P, what);
            return false;
        }
        next(P);
        IrRegionId r = ir_node_region_at(P->g, n, i);
        if (!parse_args(P, r)) return false;
        if (!expect(P, '{')) return false;
        if (++P->depth > MAX_DEPTH) {
            ERR(P, "regions nested too deeply (the parser's limit: %d levels)", MAX_DEPTH);
            return false;
        }
        if (!parse_body(P, r)) return false;
        P->depth--;
        if (!expect(P, '}')) return false;
    }
    return expect(P, '}');
}

/* meta := 'name' '(' STRING ')' | 'loc' '(' STRING ':' INT ':' INT ')' | 'from' '(' STRING,* ')' */
static bool parse_node_meta(Parser *P, IrNodeId n) {
    for (;;) {
        if (is_kw(P, "name")) {
            next(P);
            if (!expect(P, '(')) return false;
            if (P->tok.kind != T_STRING) {
                expected(P, "a string");
                return false;
            }
            Token t = P->tok;
            IrStrId s;
            if (memchr(t.p, '\\', t.n)) {
                if (!unescape(P, &t)) return false;
                s = ir__str_append(P->g, P->scratch.data, P->scratch.len);
            } else {
                s = ir__str_append(P->g, t.p, t.n); /* node names are stored, not interned */
            }
            if (P->failed) return false;
            ir__node(P->g, n)->name = s;
            next(P);
            if (!expect(P, ')')) return false;
        } else if (is_kw(P, "loc")) {
            next(P);
            if (!expect(P, '(')) return false;
            if (P->tok.kind != T_STRING) {
                expected(P, "a file name string");
                return false;
            }
            Token t = P->tok;
            IrLoc loc = {tok_str(P, &t), 0, 0};
            if (P->failed) return false;
            next(P);
            int64_t line, col;
            if (!expect(P, ':') || !parse_int(P, &line) || !expect(P, ':') || !parse_int(P, &col)) return false;
            if (line < 0 || col < 0 || line > UINT32_MAX || col > UINT32_MAX) {
                ERR(P, "location out of range");
                return false;
            }
            loc.line = (uint32_t)line;
            loc.col = (uint32_t)col;
            ir_node_set_loc(P->g, n, loc);
            if (!expect(P, ')')) return false;
        } else if (is_kw(P, "from")) {
            next(P);
            if (!expect(P, '(')) return false;
            AttrBuf b = {0};
            do {
                if (P->tok.kind != T_STRING) {
                    expected(P, "a node name string");
                    attrbuf_free(&b);
                    return false;
                }
                Token t = P->tok;
                IrStrId s = tok_str(P, &t);
                if (P->failed || !attrbuf_push(&b, 0, 0, s)) {
                    attrbuf_free(&b);
                    if (!P->failed) ERR(P, "out of memory");
                    return false;
                }
                next(P);
            } while (accept(P, ','));
            ir_node_set_provenance(P->g, n, b.n, b.strs);
            attrbuf_free(&b);
            if (!expect(P, ')')) return false;
        } else {
            return true;
        }
    }
}

/* node := (results '=')? OP '(' operands ')' attrs? (':' types)? meta* regions? */
static bool parse_node(Parser *P, IrRegionId r) {
    IrGraph *g = P->g;
    uint32_t line = P->tok.line, col = P->tok.col;
    IrStrId names_small[16];
    IrStrId *names = names_small;
    uint32_t nres = 0, cap = 16;
    bool ok = false;
    IrValueId ops_small[16], *opv = ops_small;
    uint32_t nops = 0, ocap = 16;
    IrTypeId types_small[16], *types = types_small;
    Token rtok[16]; /* result names not interned yet (names[k] == 0) */
    if (P->tok.kind == T_VALUE || (P->tok.kind == T_IDENT && P->tok.n == 1 && P->tok.p[0] == '_')) {
        do {
            if (nres == cap) {
                IrStrId *nn = malloc(cap * 2 * sizeof *nn);
                if (!nn) goto oom;
                memcpy(nn, names, nres * sizeof *nn);
                if (names != names_small) free(names);
                names = nn;
                cap *= 2;
            }
            if (nres >= 0xFFFF) {
                ERR(P, "too many results");
                goto out;
            }
            if (P->tok.kind == T_IDENT && P->tok.n == 1 && P->tok.p[0] == '_') {
                names[nres++] = IR_ABSENT_NAME; /* absent result */
                next(P);
                continue;
            }
            if (P->tok.kind != T_VALUE) {
                expected(P, "a result like %x or _");
                goto out;
            }
            /* the name is interned after the operands are read: its hash slot is prefetched
             * now, so the cache miss of inserting a new name overlaps with that work */
            if (nres < 16) {
                rtok[nres] = P->tok;
                if (!P->tok.quoted) ir__str_prefetch(g, ir_hash_bytes(P->tok.p, P->tok.n, 0));
                names[nres++] = 0;
            } else {
                Token t = P->tok;
                IrStrId s = new_value_name(P, &t);
                if (!s) goto out;
                names[nres++] = s;
            }
            next(P);
        } while (accept(P, ','));
        if (!expect(P, '=')) goto out;
    }
    if (P->tok.kind != T_IDENT) {
        expected(P, "an op name");
        goto out;
    }
    Token opt = P->tok;
    IrOp op = lookup_op(P, opt.p, opt.n);
    if (op == IR_OP_NONE) {
        ERR(P, "unknown op '%.*s'", (int)opt.n, opt.p);
        goto out;
    }
    next(P);
    if (!expect(P, '(')) goto out;
    if (!is_punct(P, ')')) {
        do {
            if (nops == ocap) {
                IrValueId *nv = malloc(ocap * 2 * sizeof *nv);
                if (!nv) goto oom;
                memcpy(nv, opv, nops * sizeof *nv);
                if (opv != ops_small) free(opv);
                opv = nv;
                ocap *= 2;
            }
            if (nops >= 0xFFFF) {
                ERR(P, "too many operands");
                goto out;
            }
            if (P->tok.kind == T_IDENT && P->tok.n == 1 && P->tok.p[0] == '_') {
                opv[nops++] = 0;
                next(P);
                continue;
            }
            if (P->tok.kind != T_VALUE) {
                expected(P, "an operand like %x or _");
                goto out;
            }
            IrValueId v = lookup_value(P);
            if (!v) goto out;
            opv[nops++] = v;
        } while (accept(P, ','));
    }
    if (!expect(P, ')')) goto out;
    for (uint32_t i = 0; i < nres; i++) {
        if (names[i]) continue;
        IrStrId s = new_value_name(P, &rtok[i]);
        if (!s) goto out;
        for (uint32_t k = 0; k < i; k++)
            if (names[k] == s) {
                error_at(P, rtok[i].line, rtok[i].col, "redefinition of value %%%s", ir_str(g, s));
                goto out;
            }
        names[i] = s;
    }
    /* create the node now so attributes can be attached */
    IrStrId create_names_small[16], *cn = nres <= 16 ? create_names_small : malloc(nres * sizeof *cn);
    if (!cn) goto oom;
    for (uint32_t i = 0; i < nres; i++) cn[i] = names[i];
    IrNodeId n = ir__node_create(g, r, 0, op, nops, opv, nres, cn, NULL);
    if (cn != create_names_small) free(cn);
    if (!n) goto oom;
    ir_node_set_text_pos(g, n, line, col);
    if (is_punct(P, '{') && !(ir_op_num_regions(op) && region_list_follows(P))) {
        next(P);
        if (!parse_attrs(P, n, op)) goto out;
    }
    if (accept(P, ':')) {
        uint32_t present = 0;
        for (uint32_t i = 0; i < nres; i++) present += names[i] != IR_ABSENT_NAME;
        if (present > 16) {
            types = malloc(present * sizeof *types);
            if (!types) goto oom;
        }
        uint32_t nt = 0;
        do {
            if (nt == present) {
                ERR(P, "more types than results (%u)", present);
                goto out;
            }
            if (!parse_type(P, &types[nt])) goto out;
            nt++;
        } while (accept(P, ','));
        if (nt != present) {
            ERR(P, "%u types given for %u results", nt, present);
            goto out;
        }
        for (uint32_t i = 0, k = 0; i < nres; i++)
            if (names[i] != IR_ABSENT_NAME) ir_value_set_type(g, ir_node_result(g, n, i), types[k++]);
    }
    if (!parse_node_meta(P, n)) goto out;
    if (ir_op_num_regions(op)) {
        if (!parse_regions(P, n, op)) goto out;
    } else if (is_punct(P, '{')) {
        ERR(P, "%s has no regions", ir_op_name(op));
        goto out;
    }
    ok = !P->failed;
    goto out;
oom:
    ERR(P, "out of memory");
out:
    if (names != names_small) free(names);
    if (opv != ops_small) free(opv);
    if (types != types_small) free(types);
    return ok;
}

/* const_decl := 'const' VALUE ':' type '=' tensor_lit */
static bool parse_const(Parser *P, IrRegionId r) {
    if (r != IR_ROOT_REGION) {
        ERR(P, "'const' is only allowed in the graph body (use a Constant op in regions)");
        return false;
    }
    next(P);
    if (P->tok.kind != T_VALUE) {
        expected(P, "a constant name like %w");
        return false;
    }
    Token t = P->tok;
    IrStrId s = new_value_name(P, &t);
    if (!s) return false;
    next(P);
    IrTypeId ty;
    if (!expect(P, ':') || !parse_type(P, &ty) || !expect(P, '=')) return false;
    IrConstId c = parse_tensor_lit(P, ty);
    if (!c) return false;
    if (!ir_graph_add_const_value(P->g, ir_str(P->g, s), c)) {
        error_at(P, t.line, t.col, "out of memory");
        return false;
    }
    return true;
}

/* body := (const_decl | node)* 'return' (VALUE (',' VALUE)*)? */
static bool parse_body(Parser *P, IrRegionId r) {
    while (!P->failed) {
        if (is_kw(P, "return")) {
            next(P);
            IrValueId small[16], *outs = small;
            uint32_t n = 0, cap = 16;
            bool ok = true;
            if (P->tok.kind == T_VALUE) {
                do {
                    if (n == cap) {
                        IrValueId *nv = malloc(cap * 2 * sizeof *nv);
                        if (!nv) {
                            ok = false;
                            break;
                        }
                        memcpy(nv, outs, n * sizeof *nv);
                        if (outs != small) free(outs);
                        outs = nv;
                        cap *= 2;
                    }
                    if (P->tok.kind != T_VALUE) {
                        expected(P, "a value");
                        ok = false;
                        break;
                    }
                    IrValueId v = lookup_value(P);
                    if (!v) {
                        ok = false;
                        break;
                    }
                    outs[n++] = v;
                } while (accept(P, ','));
            }
            if (ok) ir_region_set_outputs(P->g, r, n, outs);
            if (outs != small) free(outs);
            return ok && !P->failed;
        }
        if (is_kw(P, "const")) {
            if (!parse_const(P, r)) return false;
            continue;
        }
        if (is_punct(P, '}') || P->tok.kind == T_EOF) {
            expected(P, "'return'");
            return false;
        }
        if (!parse_node(P, r)) return false;
    }
    return false;
}

/* module := header* 'graph' GLOBAL args '{' body '}' */
static bool parse_module(Parser *P) {
    IrGraph *g = P->g;
    for (;;) {
        if (is_kw(P, "symbol")) {
            next(P);
            do {
                if (P->tok.kind != T_IDENT || ir_dtype_from_name(P->tok.p, P->tok.n) != IR_DTYPE_NONE) {
                    expected(P, "a symbol name");
                    return false;
                }
                if (ir_sym_find(g, P->tok.p, P->tok.n)) {
                    ERR(P, "symbol '%.*s' declared twice", (int)P->tok.n, P->tok.p);
                    return false;
                }
                char nm[256];
                if (P->tok.n >= sizeof nm) {
                    ERR(P, "symbol name too long");
                    return false;
                }
                memcpy(nm, P->tok.p, P->tok.n);
                nm[P->tok.n] = 0;
                if (!ir_sym_declare(g, nm)) {
                    ERR(P, "out of memory");
                    return false;
                }
                next(P);
            } while (accept(P, ','));
        } else if (is_kw(P, "constraint") || is_kw(P, "fact") || is_kw(P, "guard")) {
            IrConstraintOrigin origin = is_kw(P, "fact") ? IR_CONSTRAINT_FACT : is_kw(P, "guard") ? IR_CONSTRAINT_GUARD : IR_CONSTRAINT_USER;
            next(P);
            P->expr_terms = 0;
            IrExprId a = parse_expr(P);
            if (!a) return false;
            IrConstraint c = {0};
            c.a = a;
            c.origin = origin;
            if (is_kw(P, "in")) {
                next(P);
                if (!expect(P, '[') || !parse_int(P, &c.lo) || !expect(P, ',') || !parse_int(P, &c.hi) ||
                    !expect(P, ']'))
                    return false;
                if (c.lo > c.hi) {
                    ERR(P, "empty range [%lld, %lld]", (long long)c.lo, (long long)c.hi);
                    return false;
                }
                c.kind = IR_CONSTRAINT_RANGE;
            } else if (is_punct(P, 'E')) {
                next(P);
                IrExprId b = parse_expr(P);
                if (!b) return false;
                int64_t zero, k;
                if (ir_expr_kind(g, a) == IR_EXPR_MOD && ir_expr_is_const(g, b, &zero) && zero == 0 &&
                    ir_expr_is_const(g, ir_expr_rhs(g, a), &k)) {
                    c.kind = IR_CONSTRAINT_DIVISIBLE;
                    c.a = ir_expr_lhs(g, a);
                    c.lo = k;
                } else {
                    c.kind = IR_CONSTRAINT_EQ;
                    c.b = b;
                }
            } else {
                expected(P, "'in' or '=='");
                return false;
            }
            if (is_kw(P, "from")) {
                if (origin == IR_CONSTRAINT_USER) {
                    ERR(P, "only facts and guards carry from(...)");
                    return false;
                }
                next(P);
                if (!expect(P, '(')) return false;
                if (P->tok.kind != T_STRING) {
                    expected(P, "a node name string");
                    return false;
                }
                Token t = P->tok;
                c.note = tok_str(P, &t);
                if (P->failed) return false;
                next(P);
                if (!expect(P, ')')) return false;
            }
            ir_graph_add_constraint(g, &c);
        } else if (is_kw(P, "opset")) {
            next(P);
            if (P->tok.kind != T_STRING) {
                expected(P, "a domain string");
                return false;
            }
            Token t = P->tok;
            IrStrId d = tok_str(P, &t);
            if (P->failed) return false;
            next(P);
            int64_t v;
            if (!parse_int(P, &v)) return false;
            if (v < 0 || v > UINT32_MAX) {
                ERR(P, "opset version out of range");
                return false;
            }
            ir_graph_set_opset(g, ir_str(g, d), v);
        } else if (is_kw(P, "meta")) {
            next(P);
            if (P->tok.kind != T_STRING) {
                expected(P, "a key string");
                return false;
            }
            Token kt = P->tok;
            IrStrId k = tok_str(P, &kt);
            if (P->failed) return false;
            if (!k) {
                ERR(P, "empty meta key");
                return false;
            }
            next(P);
            if (!expect(P, '=')) return false;
            if (P->tok.kind != T_STRING) {
                expected(P, "a value string");
                return false;
            }
            Token vt = P->tok;
            IrStrId v = tok_str(P, &vt);
            if (P->failed) return false;
            next(P);
            ir_graph_set_meta(g, ir_str(g, k), ir_str(g, v));
        } else {
            break;
        }
    }
    if (!expect_kw(P, "graph")) return false;
    if (P->tok.kind != T_GLOBAL) {
        expected(P, "a graph name like @main");
        return false;
    }
    Token nt = P->tok;
    IrStrId name = tok_str(P, &nt);
    if (P->failed) return false;
    g->name = name;
    next(P);
    if (!parse_args(P, IR_ROOT_REGION)) return false;
    if (!expect(P, '{')) return false;
    if (!parse_body(P, IR_ROOT_REGION)) return false;
    if (!expect(P, '}')) return false;
    if (P->tok.kind != T_EOF) {
        expected(P, "end of file after the graph");
        return false;
    }
    return !P->failed;
}

IrStatus ir_parse_text(const char *text, size_t len, const char *filename, IrDiag *diag, IrGraph **out) {
    *out = NULL;
    Parser P;
    memset(&P, 0, sizeof P);
    P.text = P.cur = P.line_start = text;
    P.end = text + len;
    P.line = 1;
    P.file = filename ? filename : "<input>";
    P.diag = diag;
    ir_strbuf_init(&P.scratch);
    if (filename && strcmp(filename, "-") != 0) {
        const char *slash = strrchr(filename, '/');
        if (slash) {
            P.dir = strndup(filename, (size_t)(slash - filename));
            if (!P.dir) return IR_ENOMEM;
        }
    }
    IrStatus st = ir_graph_create(&P.g);
    if (st == IR_OK && len > (1u << 20)) {
        uint32_t lines = 0;
        for (const char *q = text; (q = memchr(q, '\n', (size_t)(text + len - q))) != NULL; q++) lines++;
        ir__graph_reserve(P.g, lines);
    }
    if (st) {
        free(P.dir);
        return st;
    }
    ir_graph_set_source_file(P.g, P.file);
    next(&P);
    bool ok = parse_module(&P);
    if (!ok && !P.failed) ERR(&P, "invalid input");
    if (ok && P.g->status) {
        ir_diag_report(diag, IR_SEV_ERROR, P.file, 0, 0, NULL, 0, "out of memory while parsing");
        ok = false;
    }
    ir_strbuf_free(&P.scratch);
    free(P.dir);
    if (!ok) {
        IrStatus s = P.g->status == IR_ENOMEM ? IR_ENOMEM : IR_ESYNTAX;
        ir_graph_destroy(P.g);
        return s;
    }
    *out = P.g;
    return IR_OK;
}

/* Text of numbers as Cast between strings and numbers reads and writes it, shared by the
 * interpreter and the runtime (header-only: the runtime links nothing of ir/). */
#ifndef IRTOOL_IR_STRCONV_H
#define IRTOOL_IR_STRCONV_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shortest text that reads back to the same value at the given precision, written as Python and
 * numpy print floats: positional for 1e-4 <= |v| < 1e16 (with ".0" on integers), else
 * scientific ("1e-05"); NaN and infinities as ONNX spells them ("NaN", "INF", "-INF"). */
static inline void ir_format_float(double v, int single, char *buf, size_t cap) {
    if (isnan(v)) {
        snprintf(buf, cap, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, v > 0 ? "INF" : "-INF");
        return;
    }
    char digits[40];
    int p = 1;
    for (; p <= 17; p++) {
        snprintf(digits, sizeof digits, "%.*e", p - 1, v);
        if (single ? strtof(digits, NULL) == (float)v : strtod(digits, NULL) == v) break;
    }
    if (p > 17) p = 17;
    /* digits is d.ddde[+-]XX: exponent decides the form */
    char *e = strchr(digits, 'e');
    int exp10 = e ? atoi(e + 1) : 0;
    double av = fabs(v);
    if (v == 0 || (av >= 1e-4 && exp10 < 16)) {
        int frac = p - 1 - exp10;
        if (frac < 1) frac = 1;
        snprintf(buf, cap, "%.*f", frac, v);
        /* trim zeros beyond the shortest digits, keeping one after the point */
        size_t n = strlen(buf);
        char *dot = strchr(buf, '.');
        while (dot && n > (size_t)(dot - buf) + 2 && buf[n - 1] == '0') buf[--n] = 0;
        return;
    }
    /* scientific: mantissa without trailing zeros, exponent with at least two digits */
    *e = 0;
    size_t n = strlen(digits);
    while (n > 1 && digits[n - 1] == '0') digits[--n] = 0;
    if (n && digits[n - 1] == '.') digits[--n] = 0;
    snprintf(buf, cap, "%se%c%02d", digits, exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
}

enum { IR_PARSE_FLOAT, IR_PARSE_BOOL, IR_PARSE_I64, IR_PARSE_U64 };

/* Parses the whole NUL-terminated buf: floats (and bool, which also takes True/true/False/false)
 * into *d with strtod, integers with strtoll or strtoull into *ll or *ull; 0 when it is not a number. */
static inline int ir_parse_number(const char *buf, int kind, double *d, long long *ll, unsigned long long *ull) {
    char *end = NULL;
    if (kind == IR_PARSE_BOOL && (!strcmp(buf, "True") || !strcmp(buf, "true") || !strcmp(buf, "False") || !strcmp(buf, "false"))) {
        *d = buf[0] == 'T' || buf[0] == 't';
        return 1;
    }
    if (kind == IR_PARSE_FLOAT || kind == IR_PARSE_BOOL) *d = strtod(buf, &end);
    else if (kind == IR_PARSE_U64) *ull = strtoull(buf, &end, 10);
    else *ll = strtoll(buf, &end, 10);
    return end != buf && !*end;
}

#endif

/* Text format writer (.ir): canonical and deterministic.
 *
 * The same graph always prints the same bytes: attributes are kept sorted, numbers use the
 * shortest form that reads back to the same bits, constants above a small size print as base64
 * (or keep their `external` file reference), and nothing depends on ids or addresses.
 */
#include "ir_internal.h"

#include <math.h>

#define INLINE_MAX_ELEMS 16

/* ---- numbers ------------------------------------------------------------------------------- */

static void ensure_float_look(IrStrBuf *b, size_t start) {
    for (size_t i = start; i < b->len; i++) {
        char c = b->data[i];
        if (c == '.' || c == 'e' || c == 'n' || c == 'i') return; /* has '.', exponent, inf/nan */
    }
    ir_strbuf_puts(b, ".0");
}

void ir__fmt_float(IrStrBuf *b, float v) {
    if (isnan(v)) {
        ir_strbuf_puts(b, signbit(v) ? "-nan" : "nan");
        return;
    }
    if (isinf(v)) {
        ir_strbuf_puts(b, v < 0 ? "-inf" : "inf");
        return;
    }
    char buf[48];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    size_t start = b->len;
    ir_strbuf_puts(b, buf);
    ensure_float_look(b, start);
}

void ir__fmt_double(IrStrBuf *b, double v) {
    if (isnan(v)) {
        ir_strbuf_puts(b, signbit(v) ? "-nan" : "nan");
        return;
    }
    if (isinf(v)) {
        ir_strbuf_puts(b, v < 0 ? "-inf" : "inf");
        return;
    }
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    size_t start = b->len;
    ir_strbuf_puts(b, buf);
    ensure_float_look(b, start);
}

/* ---- names and strings --------------------------------------------------------------------- */

static void put_quoted(IrStrBuf *b, const char *s) {
    ir_strbuf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': ir_strbuf_puts(b, "\\\""); break;
        case '\\': ir_strbuf_puts(b, "\\\\"); break;
        case '\n': ir_strbuf_puts(b, "\\n"); break;
        case '\t': ir_strbuf_puts(b, "\\t"); break;
        case '\r': ir_strbuf_puts(b, "\\r"); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                ir_strbuf_printf(b, "\\x%02x", *p);
            else
                ir_strbuf_putc(b, (char)*p);
        }
    }
    ir_strbuf_putc(b, '"');
}

/* A string tensor element: any bytes; NUL and control bytes escaped, others (UTF-8) kept. */
static void put_quoted_bytes(IrStrBuf *b, const char *s, size_t n) {
    ir_strbuf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': ir_strbuf_puts(b, "\\\""); break;
        case '\\': ir_strbuf_puts(b, "\\\\"); break;
        case '\n': ir_strbuf_puts(b, "\\n"); break;
        case '\t': ir_strbuf_puts(b, "\\t"); break;
        case '\r': ir_strbuf_puts(b, "\\r"); break;
        default:
            if (c < 0x20 || c == 0x7f)
                ir_strbuf_printf(b, "\\x%02x", c);
            else
                ir_strbuf_putc(b, (char)c);
        }
    }
    ir_strbuf_putc(b, '"');
}

static bool plain_name(const char *s) {
    if (!*s) return false;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
            return false;
    }
    return true;
}

static void put_sigil_name(IrStrBuf *b, char sigil, const char *s) {
    ir_strbuf_putc(b, sigil);
    if (plain_name(s))
        ir_strbuf_puts(b, s);
    else
        put_quoted(b, s);
}

static void put_value(IrStrBuf *b, const IrGraph *g, IrValueId v) {
    if (!v)
        ir_strbuf_putc(b, '_');
    else
        put_sigil_name(b, '%', ir_value_name(g, v));
}

/* ---- constants ----------------------------------------------------------------------------- */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void put_base64(IrStrBuf *b, const unsigned char *p, size_t n) {
    ir_strbuf_putc(b, '"');
    char quad[4];
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16;
        if (i + 1 < n) w |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n) w |= p[i + 2];
        quad[0] = b64chars[(w >> 18) & 63];
        quad[1] = b64chars[(w >> 12) & 63];
        quad[2] = i + 1 < n ? b64chars[(w >> 6) & 63] : '=';
        quad[3] = i + 2 < n ? b64chars[w & 63] : '=';
        ir_strbuf_append(b, quad, 4);
    }
    ir_strbuf_putc(b, '"');
}

static void put_element(IrStrBuf *b, IrDType dt, const void *data, size_t i) {
    switch (dt) {
    case IR_DTYPE_F64: ir__fmt_double(b, ((const double *)data)[i]); break;
    case IR_DTYPE_F32: ir__fmt_float(b, ((const float *)data)[i]); break;
    case IR_DTYPE_F16:
    case IR_DTYPE_BF16:
    case IR_DTYPE_F8E4M3FN:
    case IR_DTYPE_F8E5M2: ir__fmt_float(b, (float)ir_elem_get_f64(dt, data, i)); break;
    case IR_DTYPE_BOOL: ir_strbuf_puts(b, ((const uint8_t *)data)[i] ? "true" : "false"); break;
    case IR_DTYPE_U64: ir_strbuf_printf(b, "%llu", (unsigned long long)((const uint64_t *)data)[i]); break;
    default: ir_strbuf_printf(b, "%lld", (long long)ir_elem_get_i64(dt, data, i)); break;
    }
}

/* Inline lists are used only when every element reads back to the same bits. */
static bool inline_exact(const IrGraph *g, IrConstId c, int64_t numel) {
    IrDType dt = ir_type_dtype(g, ir_const_type(g, c));
    const void *data = ir_const_data(g, c);
    if (dt == IR_DTYPE_BOOL) {
        for (int64_t i = 0; i < numel; i++)
            if (((const uint8_t *)data)[i] > 1) return false;
        return true;
    }
    if (!ir_dtype_is_float(dt)) return true;
    size_t esz = ir_dtype_size(dt);
    for (int64_t i = 0; i < numel; i++) {
        double v = ir_elem_get_f64(dt, data, (size_t)i);
        if (isnan(v)) return false; /* NaN payloads and signs only survive as bytes */
        if (dt == IR_DTYPE_F8E5M2) {
            if (ir_f32_to_f8e5m2((float)v, false) != ((const uint8_t *)data)[i]) return false;
        } else if (esz < 4) {
            unsigned char tmp[8];
            ir_elem_set_f64(dt, tmp, 0, v);
            if (memcmp(tmp, (const char *)data + (size_t)i * esz, esz) != 0) return false;
        }
    }
    return true;
}

static void put_tensor_lit(IrStrBuf *b, const IrGraph *g, IrConstId c) {
    IrStrId path;
    uint64_t off;
    if (ir_const_external(g, c, &path, &off)) {
        ir_strbuf_puts(b, "external ");
        put_quoted(b, ir_str(g, path));
        ir_strbuf_printf(b, " offset %llu", (unsigned long long)off);
        return;
    }
    IrTypeId t = ir_const_type(g, c);
    IrDType dt = ir_type_dtype(g, t);
    int64_t numel = 0;
    ir_type_numel(g, t, &numel);
    const void *data = ir_const_data(g, c);
    if (dt == IR_DTYPE_STRING) { /* always inline: the text format has no other string form */
        ir_strbuf_putc(b, '[');
        for (int64_t i = 0; i < numel; i++) {
            if (i) ir_strbuf_puts(b, ", ");
            IrStringElem e = ir_string_blob_at(data, (size_t)numel, (size_t)i);
            put_quoted_bytes(b, e.data, e.len);
        }
        ir_strbuf_putc(b, ']');
        return;
    }
    if (numel <= INLINE_MAX_ELEMS && inline_exact(g, c, numel)) {
        ir_strbuf_putc(b, '[');
        for (int64_t i = 0; i < numel; i++) {
            if (i) ir_strbuf_puts(b, ", ");
            put_element(b, dt, data, (size_t)i);
        }
        ir_strbuf_putc(b, ']');
        return;
    }
    ir_strbuf_puts(b, "base64 ");
    put_base64(b, data, ir_const_nbytes(g, c));
}

/* ---- attributes ---------------------------------------------------------------------------- */

static void put_attr(IrStrBuf *b, const IrGraph *g, IrAttrValue v) {
    switch (v.kind) {
    case IR_ATTR_INT: ir_strbuf_printf(b, "%lld", (long long)v.i); break;
    case IR_ATTR_FLOAT: ir__fmt_float(b, (float)v.f); break;
    case IR_ATTR_STRING: put_quoted(b, ir_str(g, v.s)); break;
    case IR_ATTR_DTYPE: ir_strbuf_puts(b, ir_dtype_name((IrDType)v.i)); break;
    case IR_ATTR_TENSOR:
        ir_type_print(g, ir_const_type(g, v.tensor), b);
        ir_strbuf_putc(b, ' ');
        put_tensor_lit(b, g, v.tensor);
        break;
    case IR_ATTR_INTS:
    case IR_ATTR_FLOATS:
    case IR_ATTR_STRINGS:
        ir_strbuf_putc(b, '[');
        for (uint32_t i = 0; i < v.count; i++) {
            if (i) ir_strbuf_puts(b, ", ");
            if (v.kind == IR_ATTR_INTS)
                ir_strbuf_printf(b, "%lld", (long long)v.ints[i]);
            else if (v.kind == IR_ATTR_FLOATS)
                ir__fmt_float(b, (float)v.floats[i]);
            else
                put_quoted(b, ir_str(g, v.strs[i]));
        }
        ir_strbuf_putc(b, ']');
        break;
    default: ir_strbuf_puts(b, "?"); break;
    }
}

/* ---- structure ----------------------------------------------------------------------------- */

static void indent(IrStrBuf *b, int depth) {
    static const char sp[] = "                                                                ";
    int n = depth * 2;
    while (n > 0) {
        int k = n > 64 ? 64 : n;
        ir_strbuf_append(b, sp, (size_t)k);
        n -= k;
    }
}

static void put_args(IrStrBuf *b, const IrGraph *g, IrRegionId r) {
    ir_strbuf_putc(b, '(');
    for (uint32_t i = 0; i < ir_region_num_args(g, r); i++) {
        if (i) ir_strbuf_puts(b, ", ");
        IrValueId v = ir_region_arg(g, r, i);
        put_value(b, g, v);
        ir_strbuf_puts(b, ": ");
        ir_type_print(g, ir_value_type(g, v), b);
    }
    ir_strbuf_putc(b, ')');
}

static void put_body(IrStrBuf *b, const IrGraph *g, IrRegionId r, int depth);

static void put_node(IrStrBuf *b, const IrGraph *g, IrNodeId n, int depth) {
    indent(b, depth);
    uint32_t nr = ir_node_num_results(g, n);
    bool any_type = false;
    for (uint32_t i = 0; i < nr; i++) {
        IrValueId v = ir_node_result(g, n, i);
        if (i) ir_strbuf_puts(b, ", ");
        put_value(b, g, v);
        if (v && ir_value_type(g, v)) any_type = true;
    }
    if (nr) ir_strbuf_puts(b, " = ");
    ir_strbuf_puts(b, ir_op_name(ir_node_op(g, n)));
    ir_strbuf_putc(b, '(');
    for (uint32_t i = 0; i < ir_node_num_operands(g, n); i++) {
        if (i) ir_strbuf_puts(b, ", ");
        put_value(b, g, ir_node_operand(g, n, i));
    }
    ir_strbuf_putc(b, ')');
    uint32_t na = ir_node_num_attrs(g, n);
    if (na) {
        ir_strbuf_puts(b, " {");
        for (uint32_t i = 0; i < na; i++) {
            if (i) ir_strbuf_puts(b, ", ");
            ir_strbuf_puts(b, ir_str(g, ir_node_attr_name(g, n, i)));
            ir_strbuf_puts(b, " = ");
            put_attr(b, g, ir_node_attr_at(g, n, i));
        }
        ir_strbuf_putc(b, '}');
    }
    if (any_type) {
        ir_strbuf_puts(b, " : ");
        bool first = true;
        for (uint32_t i = 0; i < nr; i++) {
            IrValueId v = ir_node_result(g, n, i);
            if (!v) continue;
            if (!first) ir_strbuf_puts(b, ", ");
            first = false;
            ir_type_print(g, ir_value_type(g, v), b);
        }
    }
    const char *nm = ir_node_name(g, n);
    if (*nm) {
        ir_strbuf_puts(b, " name(");
        put_quoted(b, nm);
        ir_strbuf_putc(b, ')');
    }
    IrLoc loc = ir_node_loc(g, n);
    if (loc.file) {
        ir_strbuf_puts(b, " loc(");
        put_quoted(b, ir_str(g, loc.file));
        ir_strbuf_printf(b, ":%u:%u)", loc.line, loc.col);
    }
    uint32_t np = ir_node_num_provenance(g, n);
    if (np) {
        ir_strbuf_puts(b, " from(");
        for (uint32_t i = 0; i < np; i++) {
            if (i) ir_strbuf_puts(b, ", ");
            put_quoted(b, ir_str(g, ir_node_provenance(g, n, i)));
        }
        ir_strbuf_putc(b, ')');
    }
    uint32_t nreg = ir_node_num_regions(g, n);
    if (nreg) {
        ir_strbuf_puts(b, " {\n");
        for (uint32_t i = 0; i < nreg; i++) {
            char rname[64];
            IrRegionId r = ir_node_region_at(g, n, i);
            ir_op_region_name(ir_node_op(g, n), i, rname, sizeof rname);
            indent(b, depth + 1);
            ir_strbuf_puts(b, rname);
            put_args(b, g, r);
            ir_strbuf_puts(b, " {\n");
            put_body(b, g, r, depth + 2);
            indent(b, depth + 1);
            ir_strbuf_puts(b, "}\n");
        }
        indent(b, depth);
        ir_strbuf_putc(b, '}');
    }
    ir_strbuf_putc(b, '\n');
}

static void put_body(IrStrBuf *b, const IrGraph *g, IrRegionId r, int depth) {
    if (r == IR_ROOT_REGION) {
        for (uint32_t i = 0; i < ir_graph_num_const_values(g); i++) {
            IrValueId v = ir_graph_const_value(g, i);
            IrConstId c = ir_value_const(g, v);
            indent(b, depth);
            ir_strbuf_puts(b, "const ");
            put_value(b, g, v);
            ir_strbuf_puts(b, ": ");
            ir_type_print(g, ir_const_type(g, c), b);
            ir_strbuf_puts(b, " = ");
            put_tensor_lit(b, g, c);
            ir_strbuf_putc(b, '\n');
        }
    }
    for (IrNodeId n = ir_region_first(g, r); n; n = ir_node_next(g, n)) put_node(b, g, n, depth);
    indent(b, depth);
    ir_strbuf_puts(b, "return");
    for (uint32_t i = 0; i < ir_region_num_outputs(g, r); i++) {
        ir_strbuf_puts(b, i ? ", " : " ");
        put_value(b, g, ir_region_output(g, r, i));
    }
    ir_strbuf_putc(b, '\n');
}

static void put_constraint(IrStrBuf *b, const IrGraph *g, IrConstraint c) {
    static const char *kw[] = {"constraint ", "fact ", "guard "};
    ir_strbuf_puts(b, kw[c.origin <= IR_CONSTRAINT_GUARD ? c.origin : 0]);
    ir_constraint_print(g, &c, b);
    if (c.note) {
        ir_strbuf_puts(b, " from(");
        put_quoted(b, ir_str(g, c.note));
        ir_strbuf_putc(b, ')');
    }
    ir_strbuf_putc(b, '\n');
}

IrStatus ir_print_text(const IrGraph *g, IrStrBuf *b) {
    if (g->status) return g->status;
    bool header = false;
    bool any = false;
    for (uint32_t s = 1; s <= ir_graph_num_syms(g); s++) {
        if (ir_sym_specialized(g, s)) continue;
        ir_strbuf_puts(b, any ? ", " : "symbol ");
        ir_strbuf_puts(b, ir_sym_name(g, s));
        any = true;
    }
    if (any) {
        ir_strbuf_putc(b, '\n');
        header = true;
    }
    for (uint32_t i = 0; i < ir_graph_num_constraints(g); i++) {
        put_constraint(b, g, ir_graph_constraint(g, i));
        header = true;
    }
    for (uint32_t i = 0; i < ir_graph_num_opsets(g); i++) {
        const char *d;
        int64_t v;
        ir_graph_opset_at(g, i, &d, &v);
        ir_strbuf_puts(b, "opset ");
        put_quoted(b, d);
        ir_strbuf_printf(b, " %lld\n", (long long)v);
        header = true;
    }
    for (uint32_t i = 0; i < ir_graph_num_meta(g); i++) {
        const char *k, *v;
        ir_graph_meta_at(g, i, &k, &v);
        ir_strbuf_puts(b, "meta ");
        put_quoted(b, k);
        ir_strbuf_puts(b, " = ");
        put_quoted(b, v);
        ir_strbuf_putc(b, '\n');
        header = true;
    }
    if (header) ir_strbuf_putc(b, '\n');
    ir_strbuf_puts(b, "graph ");
    const char *name = ir_graph_name(g);
    put_sigil_name(b, '@', *name ? name : "main");
    put_args(b, g, IR_ROOT_REGION);
    ir_strbuf_puts(b, " {\n");
    put_body(b, g, IR_ROOT_REGION, 1);
    ir_strbuf_puts(b, "}\n");
    return b->failed ? IR_ENOMEM : IR_OK;
}

/* The op table, expanded from ops.def, and readers of its attribute and region schemas.
 *
 * The table is const: lookups scan it (callers that look up many names, like the parser, keep
 * their own cache), and the attribute schema strings are parsed on demand.
 */
#include "infer.h"

#define IR_OP(id, name, cls, min_in, max_in, min_out, max_out, regions, attrs, infer)          \
    [IR_OP_##id] = {name, cls, min_in, max_in, min_out, max_out, regions, attrs, infer},
static const IrOpInfo op_table[IR_OP_COUNT] = {
    [IR_OP_NONE] = {"<none>", IR_CLASS_OTHER, 0, 0, 0, 0, "", "", NULL},
#include "ops.def"
};
#undef IR_OP

const IrOpInfo *ir_op_info(IrOp op) {
    return op > IR_OP_NONE && op < IR_OP_COUNT ? &op_table[op] : &op_table[IR_OP_NONE];
}

const char *ir_op_name(IrOp op) { return ir_op_info(op)->name; }

IrOp ir_op_from_name(const char *name, size_t n) {
    for (int op = 1; op < IR_OP_COUNT; op++)
        if (strncmp(op_table[op].name, name, n) == 0 && op_table[op].name[n] == 0) return (IrOp)op;
    return IR_OP_NONE;
}

const char *ir_op_class_name(IrOpClass c) {
    switch (c) {
    case IR_CLASS_ELEMENTWISE: return "elementwise";
    case IR_CLASS_REDUCTION: return "reduction";
    case IR_CLASS_CONTRACTION: return "contraction";
    case IR_CLASS_DATA_MOVEMENT: return "data-movement";
    case IR_CLASS_SHAPE: return "shape";
    case IR_CLASS_CONTROL_FLOW: return "control-flow";
    case IR_CLASS_QUANTIZE: return "quantize";
    case IR_CLASS_FUSED: return "fused";
    case IR_CLASS_RANDOM: return "random";
    case IR_CLASS_OTHER: return "other";
    }
    return "other";
}

/* Iterates space-separated words of s; returns false at the end. */
static bool next_word(const char **s, const char **w, size_t *n) {
    const char *p = *s;
    while (*p == ' ') p++;
    if (!*p) return false;
    const char *e = p;
    while (*e && *e != ' ') e++;
    *w = p;
    *n = (size_t)(e - p);
    *s = e;
    return true;
}

uint32_t ir_op_num_regions(IrOp op) {
    const char *s = ir_op_info(op)->regions, *w;
    size_t n;
    uint32_t count = 0;
    while (next_word(&s, &w, &n)) count++;
    return count;
}

bool ir_op_region_name(IrOp op, uint32_t i, char *buf, size_t cap) {
    const char *s = ir_op_info(op)->regions, *w;
    size_t n;
    for (uint32_t k = 0; next_word(&s, &w, &n); k++) {
        if (k != i) continue;
        if (n + 1 > cap) return false;
        memcpy(buf, w, n);
        buf[n] = 0;
        return true;
    }
    return false;
}

const char *ir_attr_kind_name(IrAttrKind k) {
    switch (k) {
    case IR_ATTR_INT: return "int";
    case IR_ATTR_FLOAT: return "float";
    case IR_ATTR_STRING: return "string";
    case IR_ATTR_INTS: return "ints";
    case IR_ATTR_FLOATS: return "floats";
    case IR_ATTR_STRINGS: return "strings";
    case IR_ATTR_TENSOR: return "tensor";
    case IR_ATTR_DTYPE: return "dtype";
    default: return "none";
    }
}

bool ir__attr_kind_from_code(const char *s, size_t n, IrAttrKind *k) {
    static const struct {
        const char *code;
        IrAttrKind kind;
    } codes[] = {{"i", IR_ATTR_INT},     {"f", IR_ATTR_FLOAT},   {"s", IR_ATTR_STRING},
                 {"is", IR_ATTR_INTS},   {"fs", IR_ATTR_FLOATS}, {"ss", IR_ATTR_STRINGS},
                 {"t", IR_ATTR_TENSOR},  {"dt", IR_ATTR_DTYPE}};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (strlen(codes[i].code) == n && memcmp(codes[i].code, s, n) == 0) {
            *k = codes[i].kind;
            return true;
        }
    return false;
}

/* Parses one schema word `name:kind(=default|!|?)`. */
static bool parse_spec_word(const char *w, size_t n, const char **name, size_t *name_len,
                            IrAttrSpec *out) {
    const char *colon = memchr(w, ':', n);
    if (!colon) return false;
    *name = w;
    *name_len = (size_t)(colon - w);
    const char *k = colon + 1, *end = w + n;
    const char *ke = k;
    while (ke < end && *ke != '=' && *ke != '!' && *ke != '?') ke++;
    memset(out, 0, sizeof *out);
    if (!ir__attr_kind_from_code(k, (size_t)(ke - k), &out->kind)) return false;
    if (ke < end && *ke == '!') out->required = true;
    if (ke < end && *ke == '=') {
        out->has_default = true;
        out->default_text = ke + 1;
        out->default_len = (size_t)(end - ke - 1);
    }
    return true;
}

bool ir_op_attr_spec(IrOp op, const char *name, size_t n, IrAttrSpec *out) {
    const char *s = ir_op_info(op)->attrs, *w, *nm;
    size_t wn, nn;
    while (next_word(&s, &w, &wn)) {
        IrAttrSpec spec;
        if (!parse_spec_word(w, wn, &nm, &nn, &spec)) continue;
        if (nn == n && memcmp(nm, name, n) == 0) {
            if (out) *out = spec;
            return true;
        }
    }
    return false;
}

bool ir_op_attr_spec_at(IrOp op, uint32_t i, char *name_buf, size_t cap, IrAttrSpec *out) {
    const char *s = ir_op_info(op)->attrs, *w, *nm;
    size_t wn, nn;
    for (uint32_t k = 0; next_word(&s, &w, &wn); k++) {
        if (k != i) continue;
        IrAttrSpec spec;
        if (!parse_spec_word(w, wn, &nm, &nn, &spec) || nn + 1 > cap) return false;
        memcpy(name_buf, nm, nn);
        name_buf[nn] = 0;
        if (out) *out = spec;
        return true;
    }
    return false;
}

void ir_op_attr_spec_iter(IrOp op, IrAttrSpecIter *it) { it->p = ir_op_info(op)->attrs; }

bool ir_op_attr_spec_next(IrAttrSpecIter *it, const char **name, size_t *name_len, IrAttrSpec *out) {
    const char *w;
    size_t wn;
    while (next_word(&it->p, &w, &wn))
        if (parse_spec_word(w, wn, name, name_len, out)) return true;
    return false;
}

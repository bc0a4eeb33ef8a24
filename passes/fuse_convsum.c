/* fuse: the sum of two Convs over the same output geometry as one Conv over their inputs'
 * channels side by side (the fuse pass's `convsum` kind, after BatchNorm folding):
 *
 *   Add(Conv(x1, W1, b1), Conv(x2, W2, b2))  ->  Conv(Concat(x1, x2, axis 1), [W1 | W2], b1 + b2)
 *
 * when both Convs have one group, the same kernel, strides, pads, dilations and auto_pad, each
 * result feeds only the Add (or two-operand Sum), the weights and biases are f32 constants and
 * x1 and x2 agree in batch and spatial dims. Each output is then one dot product over C1 + C2
 * channels instead of two (ResNet's projection shortcut: the 1x1 downsample Conv and the last
 * Conv of the block's first bottleneck, which added the downsample's output as its residual).
 * The new weights are a graph constant (the old ones are dropped when nothing else uses them).
 * A rewrite, not a group: the epilogue matcher then takes the new Conv with what follows. */
#include "ir/shape.h"
#include "passes/fuse_internal.h"

#include <stdlib.h>
#include <string.h>

/* The Conv attribute `name` with its ONNX default: kernel_shape has none (taken from the
 * weights: the same here when the weights' dims agree), strides and dilations 1, pads 0. */
static uint32_t conv_ints(const IrGraph *g, IrNodeId n, const char *name, int64_t def, uint32_t count, int64_t *out) {
    IrAttrValue a;
    if (ir_node_attr(g, n, name, &a) && a.kind == IR_ATTR_INTS) {
        uint32_t k = a.count < 8 ? a.count : 8;
        memcpy(out, a.ints, k * sizeof *out);
        return k;
    }
    for (uint32_t i = 0; i < count; i++) out[i] = def;
    return count;
}

static bool same_geometry(const IrGraph *g, IrNodeId a, IrNodeId b, uint32_t spatial) {
    static const struct {
        const char *name;
        int64_t def;
        uint32_t mul;
    } attrs[] = {{"strides", 1, 1}, {"dilations", 1, 1}, {"pads", 0, 2}};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        int64_t va[8], vb[8];
        uint32_t na = conv_ints(g, a, attrs[i].name, attrs[i].def, spatial * attrs[i].mul, va);
        uint32_t nb = conv_ints(g, b, attrs[i].name, attrs[i].def, spatial * attrs[i].mul, vb);
        if (na != nb || memcmp(va, vb, na * sizeof *va) != 0) return false;
    }
    bool fa, fb;
    const char *pa = ir_node_attr_string(g, a, "auto_pad", &fa), *pb = ir_node_attr_string(g, b, "auto_pad", &fb);
    if (!fa) pa = "NOTSET";
    if (!fb) pb = "NOTSET";
    if (strcmp(pa, pb) != 0) return false;
    bool ga, gb;
    int64_t groups_a = ir_node_attr_int(g, a, "group", &ga), groups_b = ir_node_attr_int(g, b, "group", &gb);
    return (!ga || groups_a == 1) && (!gb || groups_b == 1);
}

/* Static dims of value v (f32, rank r), or false. */
static bool static_dims(const IrGraph *g, IrValueId v, uint32_t r, int64_t *dims) {
    IrTypeId t = ir_value_type(g, v);
    if (!t || ir_type_dtype(g, t) != IR_DTYPE_F32 || ir_type_rank(g, t) != r) return false;
    for (uint32_t k = 0; k < r; k++)
        if (!ir_expr_is_const(g, ir_type_dims(g, t)[k], &dims[k])) return false;
    return true;
}

typedef struct ConvSide {
    IrNodeId conv;
    IrValueId x, w, b;
    FuseConst wk, bk;
    int64_t xd[8];
} ConvSide;

static bool conv_side(const Fuse *f, IrNodeId s, IrValueId v, ConvSide *c) {
    const IrGraph *g = f->g;
    if (!v || v > f->nval || f->uses[v] != 1 || ir_value_kind(g, v) != IR_VALUE_RESULT) return false;
    c->conv = ir_value_def_node(g, v);
    if (ir_node_op(g, c->conv) != IR_OP_CONV || ir_node_region(g, c->conv) != ir_node_region(g, s) ||
        ir_node_num_results(g, c->conv) != 1 || ir_node_num_operands(g, c->conv) < 2)
        return false;
    c->x = ir_node_operand(g, c->conv, 0);
    c->w = ir_node_operand(g, c->conv, 1);
    c->b = ir_node_num_operands(g, c->conv) > 2 ? ir_node_operand(g, c->conv, 2) : 0;
    if (!c->x || !fuse_const_view(g, c->w, &c->wk) || c->wk.dt != IR_DTYPE_F32 || c->wk.rank < 3 || c->wk.rank > 5) return false;
    if (c->b && (!fuse_const_view(g, c->b, &c->bk) || c->bk.dt != IR_DTYPE_F32 || c->bk.numel != c->wk.dims[0])) return false;
    return static_dims(g, c->x, c->wk.rank, c->xd);
}

static bool merge_one(Fuse *f, IrNodeId s, uint8_t *orphan) {
    IrGraph *g = f->g;
    if (ir_node_num_operands(g, s) != 2 || ir_node_num_results(g, s) != 1) return false;
    ConvSide p, q;
    if (!conv_side(f, s, ir_node_operand(g, s, 0), &p) || !conv_side(f, s, ir_node_operand(g, s, 1), &q) || p.conv == q.conv)
        return false;
    uint32_t r = p.wk.rank;
    if (q.wk.rank != r || p.wk.dims[0] != q.wk.dims[0] || p.xd[0] != q.xd[0]) return false;
    for (uint32_t k = 2; k < r; k++)
        if (p.wk.dims[k] != q.wk.dims[k] || p.xd[k] != q.xd[k]) return false;
    if (p.xd[1] != p.wk.dims[1] || q.xd[1] != q.wk.dims[1] || !same_geometry(g, p.conv, q.conv, r - 2)) return false;
    IrValueId out = ir_node_result(g, s, 0);
    IrTypeId ot = ir_value_type(g, out), pt = ir_value_type(g, ir_node_result(g, p.conv, 0));
    if (!ot || ot != pt || ot != ir_value_type(g, ir_node_result(g, q.conv, 0))) return false;

    /* [W1 | W2] along the input channels, b1 + b2 (in double) */
    int64_t m = p.wk.dims[0], c1 = p.wk.dims[1], c2 = q.wk.dims[1], taps = ir_shape_numel(r - 2, p.wk.dims + 2);
    float *w = malloc((size_t)(m * (c1 + c2) * taps) * sizeof *w), *bias = malloc((size_t)m * sizeof *bias);
    if (!w || !bias) {
        free(w), free(bias);
        f->status = IR_ENOMEM;
        return false;
    }
    for (int64_t o = 0; o < m; o++) {
        for (int64_t i = 0; i < c1 * taps; i++) w[(o * (c1 + c2)) * taps + i] = (float)fuse_const_at(&p.wk, o * c1 * taps + i);
        for (int64_t i = 0; i < c2 * taps; i++) w[(o * (c1 + c2) + c1) * taps + i] = (float)fuse_const_at(&q.wk, o * c2 * taps + i);
        bias[o] = (float)((p.b ? fuse_const_at(&p.bk, o) : 0.0) + (q.b ? fuse_const_at(&q.bk, o) : 0.0));
    }
    int64_t wd[5], xd[5];
    memcpy(wd, p.wk.dims, r * sizeof *wd);
    memcpy(xd, p.xd, r * sizeof *xd);
    wd[1] = xd[1] = c1 + c2;
    IrConstId wc = ir_const_create(g, ir_type_tensor_i64(g, IR_DTYPE_F32, r, wd), w, (size_t)(m * (c1 + c2) * taps) * sizeof *w);
    IrConstId bc = ir_const_create(g, ir_type_tensor_i64(g, IR_DTYPE_F32, 1, &m), bias, (size_t)m * sizeof *bias);
    free(w), free(bias);
    char *wname = fuse_fresh_name(g, ir_value_name(g, p.w), ".convsum"), *bname = fuse_fresh_name(g, ir_value_name(g, p.w), ".convsum_bias");
    IrValueId wv = wc && wname ? ir_graph_add_const_value(g, wname, wc) : 0;
    IrValueId bv = bc && bname ? ir_graph_add_const_value(g, bname, bc) : 0;
    free(wname), free(bname);
    if (!wv || !bv) return false;

    IrValueId xs[2] = {p.x, q.x};
    IrTypeId xt = ir_type_tensor_i64(g, IR_DTYPE_F32, r, xd);
    IrNodeId cat = ir_node_create_before(g, s, IR_OP_CONCAT, 2, xs, 1, NULL, &xt);
    if (!cat) return false;
    IrAttrValue axis = {.kind = IR_ATTR_INT, .i = 1};
    ir_node_set_attr(g, cat, "axis", &axis);
    ir_pass_inherit_provenance(g, cat, s);
    IrValueId ops[3] = {ir_node_result(g, cat, 0), wv, bv};
    IrNodeId conv = ir_node_create_before(g, s, IR_OP_CONV, 3, ops, 1, NULL, &ot);
    if (!conv) return false;
    fuse_copy_attrs(g, p.conv, conv);
    fuse_merge_provenance(g, conv, p.conv, q.conv);
    ir_node_set_loc(g, conv, ir_node_loc(g, s));
    IrValueId nout = ir_node_result(g, conv, 0);
    char *keep = strdup(ir_value_name(g, out)); /* the Add's name stays with its value */
    ir_graph_replace_uses(g, out, nout);
    ir_node_erase(g, s);
    ir_node_erase(g, p.conv);
    ir_node_erase(g, q.conv);
    if (keep && ir_value_rename(g, nout, keep) != IR_OK) {
        /* the name stays as generated; nothing depends on it */
    }
    free(keep);
    IrValueId old[4] = {p.w, q.w, p.b, q.b};
    for (int i = 0; i < 4; i++) fuse_mark_orphan(g, f->nval, orphan, old[i]);
    f->convsums++;
    ir_pass_changed(f->c);
    return true;
}

static void convsum_region(Fuse *f, IrRegionId r, uint8_t *orphan) {
    IrGraph *g = f->g;
    for (IrNodeId n = ir_region_first(g, r), next; n && !f->status; n = next) {
        next = ir_node_next(g, n);
        for (uint32_t k = 0; k < ir_node_num_regions(g, n); k++) convsum_region(f, ir_node_region_at(g, n, k), orphan);
        IrOp op = ir_node_op(g, n);
        if (op == IR_OP_ADD || op == IR_OP_SUM) merge_one(f, n, orphan);
    }
}

IrStatus fuse_merge_conv_sums(Fuse *f) {
    IrGraph *g = f->g;
    f->nval = ir_graph_num_values(g);
    f->uses = calloc((size_t)f->nval + 1, sizeof *f->uses);
    uint8_t *orphan = calloc((size_t)f->nval + 1, 1);
    if (!f->uses || !orphan) {
        free(f->uses), free(orphan);
        f->uses = NULL;
        return IR_ENOMEM;
    }
    ir_graph_count_uses(g, f->uses);
    int64_t before = f->convsums;
    convsum_region(f, IR_ROOT_REGION, orphan);
    uint32_t nval = f->nval;
    free(f->uses);
    f->uses = NULL;
    if (!f->status && f->convsums > before) fuse_drop_orphans(g, nval, orphan);
    free(orphan);
    return f->status ? f->status : ir_graph_status(g);
}

/* Shape rules for the less common ops: index gathering, space/depth shuffles, resizing,
 * recurrent layers, signal processing, random generators, losses, quantized contractions and
 * Scan. Same conventions as infer.c: unknown stays unknown, never guessed.
 */
#include "infer.h"
#include "shape.h"

#include <math.h>

#define MAXR 64

typedef IrInferShape Sh;

static bool in_shape(IrInferCtx *c, uint32_t i, Sh *s) { return ir__infer_input_shape(c, i, s); }

static bool has_in(IrInferCtx *c, uint32_t i) {
    return i < ir_node_num_operands(c->g, c->n) && ir_node_operand(c->g, c->n, i) != 0;
}

static void out(IrInferCtx *c, uint32_t i, IrDType dt, uint32_t rank, const IrExprId *d) {
    if (dt != IR_DTYPE_NONE) ir_infer_set_output(c, i, ir_type_tensor(c->g, dt, rank, d));
}

static IrExprId K(IrInferCtx *c, int64_t v) { return ir_expr_const(c->g, v); }
static IrExprId U(IrInferCtx *c) { return ir_expr_unknown(c->g); }
static IrExprId op2(IrInferCtx *c, IrExprKind k, IrExprId a, IrExprId b) { return ir_expr_binary(c->g, k, a, b); }
static int64_t ai(IrInferCtx *c, const char *n) { return ir_node_attr_int(c->g, c->n, n, NULL); }
static IrDType attr_dtype(IrInferCtx *c, const char *n, IrDType fallback) {
    bool found;
    int64_t v = ir_node_attr_int(c->g, c->n, n, &found);
    return found && v > IR_DTYPE_NONE && v < IR_DTYPE_COUNT ? (IrDType)v : fallback;
}

static bool values(IrInferCtx *c, uint32_t i, IrExprId *v, uint32_t *n) {
    return ir_infer_input_values(c, i, v, n, MAXR);
}

static bool scalar_value(IrInferCtx *c, uint32_t i, int64_t *v) {
    IrExprId e[MAXR];
    uint32_t n;
    return values(c, i, e, &n) && n == 1 && ir_expr_is_const(c->g, e[0], v);
}

/* ---- indexing -------------------------------------------------------------------------------- */

IrStatus ir_infer_gather_nd(IrInferCtx *c) {
    Sh x, idx;
    if (!in_shape(c, 0, &x) || !in_shape(c, 1, &idx)) return IR_OK;
    int64_t b = ai(c, "batch_dims"), last;
    if (x.rank == IR_RANK_UNKNOWN || idx.rank == IR_RANK_UNKNOWN || idx.rank == 0 ||
        !ir_expr_is_const(c->g, idx.d[idx.rank - 1], &last)) {
        out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    if (b < 0 || b + last > (int64_t)x.rank) return ir_infer_error(c, "indices last dim %lld and batch_dims %lld exceed data rank %u", (long long)last, (long long)b, x.rank);
    IrExprId d[MAXR];
    uint32_t r = 0;
    for (uint32_t i = 0; i + 1 < idx.rank && r < MAXR; i++) d[r++] = idx.d[i];
    for (uint32_t i = (uint32_t)(b + last); i < x.rank && r < MAXR; i++) d[r++] = x.d[i];
    out(c, 0, x.dt, r, d);
    return IR_OK;
}

IrStatus ir_infer_compress(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    bool found;
    int64_t axis = ir_node_attr_int(c->g, c->n, "axis", &found);
    if (!found || x.rank == IR_RANK_UNKNOWN) {
        IrExprId d = U(c);
        out(c, 0, x.dt, 1, &d);
        return IR_OK;
    }
    if (!ir_shape_axis_checked(&axis, x.rank)) return ir_infer_error(c, "axis out of range for rank %u", x.rank);
    x.d[axis] = U(c); /* depends on the condition's values */
    out(c, 0, x.dt, x.rank, x.d);
    return IR_OK;
}

IrStatus ir_infer_one_hot(IrInferCtx *c) {
    Sh idx, vals;
    if (!in_shape(c, 0, &idx) || !in_shape(c, 2, &vals)) return IR_OK;
    if (idx.rank == IR_RANK_UNKNOWN || idx.rank + 1 > MAXR) {
        out(c, 0, vals.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    int64_t depth, axis = ai(c, "axis");
    IrExprId dd = scalar_value(c, 1, &depth) ? K(c, depth) : U(c);
    uint32_t r = idx.rank + 1;
    if (!ir_shape_axis_checked(&axis, r)) return ir_infer_error(c, "axis out of range for rank %u", r);
    IrExprId d[MAXR];
    for (uint32_t i = 0, k = 0; i < r; i++) d[i] = (int64_t)i == axis ? dd : idx.d[k++];
    out(c, 0, vals.dt, r, d);
    return IR_OK;
}

IrStatus ir_infer_unique(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    bool found;
    int64_t axis = ir_node_attr_int(c->g, c->n, "axis", &found);
    IrExprId u = U(c);
    if (!found || x.rank == IR_RANK_UNKNOWN) {
        out(c, 0, x.dt, 1, &u);
    } else {
        if (!ir_shape_axis_checked(&axis, x.rank)) return ir_infer_error(c, "axis out of range for rank %u", x.rank);
        x.d[axis] = u;
        out(c, 0, x.dt, x.rank, x.d);
    }
    out(c, 1, IR_DTYPE_I64, 1, &u);
    IrExprId n = U(c);
    if (x.rank != IR_RANK_UNKNOWN) {
        if (!found) {
            n = K(c, 1);
            for (uint32_t i = 0; i < x.rank; i++) n = op2(c, IR_EXPR_MUL, n, ir_type_dims(c->g, ir_infer_input_type(c, 0))[i]);
        } else {
            n = ir_type_dims(c->g, ir_infer_input_type(c, 0))[axis];
        }
    }
    out(c, 2, IR_DTYPE_I64, 1, &n);
    out(c, 3, IR_DTYPE_I64, 1, &u);
    return IR_OK;
}

/* ---- space/depth, resizing, sampling --------------------------------------------------------- */

static IrStatus depth_space(IrInferCtx *c, bool to_space) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    if (x.rank != 4) return ir_infer_error(c, "input must be rank 4 (NCHW), got %u", x.rank);
    int64_t b = ai(c, "blocksize");
    if (b <= 0) return ir_infer_error(c, "blocksize must be positive");
    IrExprId bb = K(c, b * b), bk = K(c, b);
    if (to_space) {
        ir_infer_require_divisible(c, x.d[1], b * b);
        x.d[1] = op2(c, IR_EXPR_DIV, x.d[1], bb);
        x.d[2] = op2(c, IR_EXPR_MUL, x.d[2], bk);
        x.d[3] = op2(c, IR_EXPR_MUL, x.d[3], bk);
    } else {
        ir_infer_require_divisible(c, x.d[2], b);
        ir_infer_require_divisible(c, x.d[3], b);
        x.d[1] = op2(c, IR_EXPR_MUL, x.d[1], bb);
        x.d[2] = op2(c, IR_EXPR_DIV, x.d[2], bk);
        x.d[3] = op2(c, IR_EXPR_DIV, x.d[3], bk);
    }
    out(c, 0, x.dt, 4, x.d);
    return IR_OK;
}

IrStatus ir_infer_depth_to_space(IrInferCtx *c) { return depth_space(c, true); }
IrStatus ir_infer_space_to_depth(IrInferCtx *c) { return depth_space(c, false); }

IrStatus ir_infer_resize(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    int64_t axes[MAXR];
    IrAttrValue a;
    uint32_t na = x.rank;
    if (ir_node_attr(c->g, c->n, "axes", &a) && a.count <= MAXR) {
        na = a.count;
        for (uint32_t i = 0; i < na; i++) {
            axes[i] = a.ints[i];
            if (!ir_shape_axis_checked(&axes[i], x.rank)) return ir_infer_error(c, "axes out of range");
        }
    } else {
        for (uint32_t i = 0; i < na; i++) axes[i] = i;
    }
    IrExprId sizes[MAXR];
    uint32_t ns;
    const char *policy = ir_node_attr_string(c->g, c->n, "keep_aspect_ratio_policy", NULL);
    if (has_in(c, 3) && values(c, 3, sizes, &ns) && ns == na && policy && strcmp(policy, "stretch") == 0) {
        for (uint32_t i = 0; i < na; i++) x.d[axes[i]] = sizes[i];
        out(c, 0, x.dt, x.rank, x.d);
        return IR_OK;
    }
    /* scales: output = floor(input * scale) */
    IrTypeId st;
    const void *sd = has_in(c, 2) ? ir_infer_input_const(c, 2, &st) : NULL;
    int64_t n;
    if (sd && ir_dtype_is_float(ir_type_dtype(c->g, st)) && ir_type_numel(c->g, st, &n) && n == na) {
        for (uint32_t i = 0; i < na; i++) {
            double sc = ir_elem_get_f64(ir_type_dtype(c->g, st), sd, i);
            int64_t in;
            /* a scale p / 2^k (2, 0.5, 0.75, 1.5) gives floor(in * p / 2^k) exactly: in * scale
             * is exact in f64 there */
            double p = sc;
            int k = 0;
            while (k < 8 && p != floor(p)) p *= 2, k++;
            if (ir_expr_is_const(c->g, x.d[axes[i]], &in))
                x.d[axes[i]] = K(c, (int64_t)floor((double)in * sc));
            else if (p == floor(p) && p >= 1 && p < 65536)
                x.d[axes[i]] = k ? op2(c, IR_EXPR_DIV, op2(c, IR_EXPR_MUL, x.d[axes[i]], K(c, (int64_t)p)), K(c, (int64_t)1 << k))
                                 : op2(c, IR_EXPR_MUL, x.d[axes[i]], K(c, (int64_t)p));
            else
                x.d[axes[i]] = U(c);
        }
        out(c, 0, x.dt, x.rank, x.d);
        return IR_OK;
    }
    for (uint32_t i = 0; i < na; i++) x.d[axes[i]] = U(c);
    out(c, 0, x.dt, x.rank, x.d);
    return IR_OK;
}

IrStatus ir_infer_grid_sample(IrInferCtx *c) {
    Sh x, grid;
    if (!in_shape(c, 0, &x) || !in_shape(c, 1, &grid)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN || grid.rank == IR_RANK_UNKNOWN) {
        out(c, 0, x.dt, x.rank, x.d);
        return IR_OK;
    }
    if (grid.rank != x.rank) return ir_infer_error(c, "grid rank %u must equal input rank %u", grid.rank, x.rank);
    IrExprId d[MAXR];
    d[0] = x.d[0];
    d[1] = x.d[1];
    for (uint32_t i = 2; i < x.rank; i++) d[i] = grid.d[i - 1];
    out(c, 0, x.dt, x.rank, d);
    return IR_OK;
}

IrStatus ir_infer_col2im(IrInferCtx *c) {
    Sh x;
    IrExprId img[MAXR], blk[MAXR];
    uint32_t ni, nb;
    if (!in_shape(c, 0, &x)) return IR_OK;
    if (x.rank != 3 || !values(c, 1, img, &ni) || !values(c, 2, blk, &nb) || ni != nb) {
        out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    IrExprId d[MAXR], prod = K(c, 1);
    for (uint32_t i = 0; i < nb; i++) prod = op2(c, IR_EXPR_MUL, prod, blk[i]);
    d[0] = x.d[0];
    d[1] = op2(c, IR_EXPR_DIV, x.d[1], prod);
    for (uint32_t i = 0; i < ni && i + 2 < MAXR; i++) d[2 + i] = img[i];
    out(c, 0, x.dt, 2 + ni, d);
    return IR_OK;
}

/* ---- pooling over regions, unpooling ---------------------------------------------------------- */

IrStatus ir_infer_max_roi_pool(IrInferCtx *c) {
    Sh x, rois;
    if (!in_shape(c, 0, &x) || !in_shape(c, 1, &rois)) return IR_OK;
    IrAttrValue ps;
    if (x.rank != 4 || rois.rank != 2 || !ir_node_attr(c->g, c->n, "pooled_shape", &ps) || ps.count != 2) {
        out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    IrExprId d[4] = {rois.d[0], x.d[1], K(c, ps.ints[0]), K(c, ps.ints[1])};
    out(c, 0, x.dt, 4, d);
    return IR_OK;
}

IrStatus ir_infer_roi_align(IrInferCtx *c) {
    Sh x, rois;
    if (!in_shape(c, 0, &x) || !in_shape(c, 1, &rois)) return IR_OK;
    if (x.rank != 4 || rois.rank != 2) {
        out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    IrExprId d[4] = {rois.d[0], x.d[1], K(c, ai(c, "output_height")), K(c, ai(c, "output_width"))};
    out(c, 0, x.dt, 4, d);
    return IR_OK;
}

IrStatus ir_infer_max_unpool(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    IrExprId os[MAXR];
    uint32_t n;
    if (has_in(c, 2)) {
        /* an explicit output shape decides; unknown values give unknown dims */
        if (values(c, 2, os, &n)) {
            out(c, 0, x.dt, n, os);
        } else if (x.rank != IR_RANK_UNKNOWN) {
            for (uint32_t i = 0; i < x.rank; i++) os[i] = U(c);
            out(c, 0, x.dt, x.rank, os);
        }
        return IR_OK;
    }
    if (x.rank == IR_RANK_UNKNOWN || x.rank < 3) {
        out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    IrAttrValue k, st, pads;
    uint32_t nsp = x.rank - 2;
    if (!ir_node_attr(c->g, c->n, "kernel_shape", &k) || k.count != nsp) return ir_infer_error(c, "kernel_shape must have %u entries", nsp);
    bool has_st = ir_node_attr(c->g, c->n, "strides", &st) && st.count == nsp;
    bool has_p = ir_node_attr(c->g, c->n, "pads", &pads) && pads.count == 2 * nsp;
    for (uint32_t i = 0; i < nsp; i++) {
        int64_t s = has_st ? st.ints[i] : 1, p = has_p ? pads.ints[i] + pads.ints[i + nsp] : 0;
        /* (in - 1) * stride + kernel - pads */
        x.d[2 + i] = op2(c, IR_EXPR_ADD, op2(c, IR_EXPR_MUL, op2(c, IR_EXPR_SUB, x.d[2 + i], K(c, 1)), K(c, s)), K(c, k.ints[i] - p));
    }
    out(c, 0, x.dt, x.rank, x.d);
    return IR_OK;
}

IrStatus ir_infer_non_max_suppression(IrInferCtx *c) {
    /* boxes [B, S, 4] and scores [B, C, S]: symbols that must agree are guarded (constants that
     * disagree are the kernels' error) */
    Sh b, s;
    if (in_shape(c, 0, &b) && in_shape(c, 1, &s) && b.rank == 3 && s.rank == 3) {
        IrExprId pair[3][2] = {{b.d[0], s.d[0]}, {b.d[1], s.d[2]}, {b.d[2], K(c, 4)}};
        for (int k = 0; k < 3; k++)
            if (!ir_expr_is_const(c->g, pair[k][0], NULL) || !ir_expr_is_const(c->g, pair[k][1], NULL))
                ir_infer_require_equal(c, pair[k][0], pair[k][1]);
    }
    IrExprId d[2] = {U(c), K(c, 3)};
    out(c, 0, IR_DTYPE_I64, 2, d);
    return IR_OK;
}

/* ---- quantized and special contractions -------------------------------------------------------- */

static IrStatus matmul_like(IrInferCtx *c, uint32_t ia, uint32_t ib, IrDType dt) {
    Sh a, b;
    if (!in_shape(c, ia, &a) || !in_shape(c, ib, &b) || dt == IR_DTYPE_NONE) return IR_OK;
    if (a.rank == IR_RANK_UNKNOWN || b.rank == IR_RANK_UNKNOWN || a.rank < 2 || b.rank < 2) {
        out(c, 0, dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    /* batch dims broadcast as numpy does (a dim of 1 takes the other's) */
    IrExprId d[MAXR];
    uint32_t r = a.rank >= b.rank ? a.rank : b.rank;
    for (uint32_t i = 0; i + 2 < r; i++) {
        int64_t ca = -1, cb = -1;
        bool ha = i + a.rank >= r, hb = i + b.rank >= r;
        IrExprId xa = ha ? a.d[i + a.rank - r] : 0, xb = hb ? b.d[i + b.rank - r] : 0;
        if (ha) ir_expr_is_const(c->g, xa, &ca);
        if (hb) ir_expr_is_const(c->g, xb, &cb);
        if (!ha || ca == 1) d[i] = hb ? xb : xa;
        else if (!hb || cb == 1) d[i] = xa;
        else {
            ir_infer_require_equal(c, xa, xb);
            d[i] = xa;
        }
    }
    d[r - 2] = a.d[a.rank - 2];
    d[r - 1] = b.d[b.rank - 1];
    ir_infer_require_equal(c, a.d[a.rank - 1], b.d[b.rank - 2]);
    out(c, 0, dt, r, d);
    return IR_OK;
}

IrStatus ir_infer_qlinear_matmul(IrInferCtx *c) {
    return matmul_like(c, 0, 3, ir_type_dtype(c->g, ir_infer_input_type(c, 7)));
}

static IrStatus conv_like_integer(IrInferCtx *c, uint32_t ix, uint32_t iw, IrDType dt) {
    Sh x, w;
    if (!in_shape(c, ix, &x) || !in_shape(c, iw, &w) || dt == IR_DTYPE_NONE) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN || w.rank == IR_RANK_UNKNOWN || x.rank < 3 || w.rank != x.rank) {
        out(c, 0, dt, x.rank, x.d);
        return IR_OK;
    }
    uint32_t nsp = x.rank - 2;
    IrAttrValue ks, st, dl, pd;
    bool hk = ir_node_attr(c->g, c->n, "kernel_shape", &ks) && ks.count == nsp;
    bool hs = ir_node_attr(c->g, c->n, "strides", &st) && st.count == nsp;
    bool hd = ir_node_attr(c->g, c->n, "dilations", &dl) && dl.count == nsp;
    bool hp = ir_node_attr(c->g, c->n, "pads", &pd) && pd.count == 2 * nsp;
    const char *ap = ir_node_attr_string(c->g, c->n, "auto_pad", NULL);
    IrExprId d[MAXR], kernel[MAXR];
    ir__infer_conv_kernel(c, &w, nsp, hk ? ks.ints : NULL, kernel);
    d[0] = x.d[0];
    d[1] = w.d[0];
    for (uint32_t i = 0; i < nsp; i++) {
        int64_t s = hs ? st.ints[i] : 1, dil = hd ? dl.ints[i] : 1, p = hp ? pd.ints[i] + pd.ints[i + nsp] : 0;
        if (s <= 0 || dil <= 0) return ir_infer_error(c, "non-positive stride or dilation");
        d[2 + i] = ir__infer_window_out(c, x.d[2 + i], kernel[i], s, dil, p, false, ap ? ap : "NOTSET");
    }
    out(c, 0, dt, x.rank, d);
    return IR_OK;
}

IrStatus ir_infer_conv_integer(IrInferCtx *c) { return conv_like_integer(c, 0, 1, IR_DTYPE_I32); }
IrStatus ir_infer_qlinear_conv(IrInferCtx *c) {
    return conv_like_integer(c, 0, 3, ir_type_dtype(c->g, ir_infer_input_type(c, 7)));
}

IrStatus ir_infer_det(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN) {
        out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    if (x.rank < 2) return ir_infer_error(c, "input must have rank >= 2");
    ir_infer_require_equal(c, x.d[x.rank - 2], x.d[x.rank - 1]);
    out(c, 0, x.dt, x.rank - 2, x.d);
    return IR_OK;
}

/* Einsum: labels of the output (explicit after `->`, else the implicit alphabetical order of
 * labels that appear once) take the dims of the inputs that carry them. */
IrStatus ir_infer_einsum(IrInferCtx *c) {
    const char *eq = ir_node_attr_string(c->g, c->n, "equation", NULL);
    if (!eq) return ir_infer_error(c, "missing equation");
    IrExprId label_dim[128];
    int count[128] = {0};
    for (int i = 0; i < 128; i++) label_dim[i] = 0;
    IrDType dt = IR_DTYPE_NONE;
    uint32_t operand = 0;
    const char *p = eq;
    IrExprId ell[MAXR];
    int n_ell = -1;
    while (*p && !(p[0] == '-' && p[1] == '>')) {
        Sh s;
        bool known = in_shape(c, operand, &s) && s.rank != IR_RANK_UNKNOWN;
        if (operand == 0) dt = s.dt;
        /* count labels of this term */
        const char *q = p;
        int nlab = 0;
        bool has_ell = false;
        while (*q && *q != ',' && !(q[0] == '-' && q[1] == '>')) {
            if (q[0] == '.' && q[1] == '.' && q[2] == '.') {
                has_ell = true;
                q += 3;
                continue;
            }
            if (*q != ' ') nlab++;
            q++;
        }
        int ell_rank = known ? (int)s.rank - nlab : 0;
        if (known && (ell_rank < 0 || (!has_ell && ell_rank != 0)))
            return ir_infer_error(c, "term %u of '%s' does not match operand rank %u", operand, eq, s.rank);
        uint32_t dim = 0;
        while (*p && *p != ',' && !(p[0] == '-' && p[1] == '>')) {
            if (p[0] == '.' && p[1] == '.' && p[2] == '.') {
                if (known) { /* ellipsis dims broadcast right-aligned across operands, 1 giving way */
                    int nn = ell_rank > n_ell ? ell_rank : n_ell;
                    IrExprId merged[MAXR];
                    for (int k = 0; k < nn && k < MAXR; k++) {
                        int ia = k - (nn - n_ell), ib = k - (nn - ell_rank);
                        IrExprId a = ia >= 0 ? ell[ia] : 0, b = ib >= 0 ? s.d[dim + (uint32_t)ib] : 0;
                        int64_t one;
                        merged[k] = !a ? b : !b ? a : (ir_expr_is_const(c->g, a, &one) && one == 1) ? b : a;
                    }
                    n_ell = nn < MAXR ? nn : MAXR;
                    memcpy(ell, merged, (size_t)n_ell * sizeof *ell);
                }
                dim += known ? (uint32_t)ell_rank : 0;
                p += 3;
                continue;
            }
            unsigned char ch = (unsigned char)*p++;
            if (ch == ' ') continue;
            if (ch >= 128) return ir_infer_error(c, "bad label in '%s'", eq);
            count[ch]++;
            if (known && dim < s.rank) {
                IrExprId d = s.d[dim];
                int64_t one;
                if (!label_dim[ch] || ir_expr_kind(c->g, label_dim[ch]) == IR_EXPR_UNKNOWN ||
                    (ir_expr_is_const(c->g, label_dim[ch], &one) && one == 1))
                    label_dim[ch] = d;
                else {
                    int64_t va, vb;
                    bool ca = ir_expr_is_const(c->g, label_dim[ch], &va), cb = ir_expr_is_const(c->g, d, &vb);
                    if (ca && cb && va != vb && va != 1 && vb != 1)
                        return ir_infer_error(c, "label '%c' has sizes %lld and %lld", ch, (long long)va, (long long)vb);
                }
            }
            dim++;
        }
        if (*p == ',') p++;
        operand++;
    }
    IrExprId d[MAXR];
    uint32_t r = 0;
    if (p[0] == '-' && p[1] == '>') {
        p += 2;
        while (*p && r < MAXR) {
            if (p[0] == '.' && p[1] == '.' && p[2] == '.') {
                for (int k = 0; k < n_ell && r < MAXR; k++) d[r++] = ell[k];
                p += 3;
                continue;
            }
            unsigned char ch = (unsigned char)*p++;
            if (ch == ' ') continue;
            if (ch >= 128 || !count[ch]) return ir_infer_error(c, "output label '%c' is not in any input", ch);
            d[r++] = label_dim[ch] ? label_dim[ch] : U(c);
        }
    } else {
        for (int k = 0; k < n_ell && r < MAXR; k++) d[r++] = ell[k];
        for (int ch = 0; ch < 128 && r < MAXR; ch++)
            if (count[ch] == 1) d[r++] = label_dim[ch] ? label_dim[ch] : U(c);
    }
    out(c, 0, dt, r, d);
    return IR_OK;
}

/* ---- recurrent layers ------------------------------------------------------------------------- */

static IrStatus recurrent(IrInferCtx *c, uint32_t n_state_outputs) {
    Sh x, w;
    if (!in_shape(c, 0, &x) || !in_shape(c, 1, &w)) return IR_OK;
    bool found;
    int64_t hidden = ir_node_attr_int(c->g, c->n, "hidden_size", &found);
    IrExprId h = found ? K(c, hidden) : U(c);
    const char *dir = ir_node_attr_string(c->g, c->n, "direction", NULL);
    int64_t dirs = dir && strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    int64_t layout = ai(c, "layout");
    if (x.rank == IR_RANK_UNKNOWN) {
        for (uint32_t i = 0; i < 1 + n_state_outputs; i++) out(c, i, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    if (x.rank != 3) return ir_infer_error(c, "input must be rank 3, got %u", x.rank);
    IrExprId seq = layout ? x.d[1] : x.d[0], batch = layout ? x.d[0] : x.d[1];
    /* W [dirs, G*H, I] and R [dirs, G*H, H]: facts, so weight dims given as symbols (a model
     * whose weights are inputs) become the constants the attributes say */
    Sh r;
    IrOp op = ir_node_op(c->g, c->n);
    int64_t G = op == IR_OP_LSTM ? 4 : op == IR_OP_GRU ? 3 : 1;
    if (!found && in_shape(c, 2, &r) && r.rank == 3) h = r.d[2];
    if (w.rank == 3) {
        ir_infer_require_equal(c, w.d[0], K(c, dirs));
        ir_infer_require_equal(c, w.d[1], op2(c, IR_EXPR_MUL, h, K(c, G)));
        ir_infer_require_equal(c, w.d[2], x.d[2]);
    }
    if (in_shape(c, 2, &r) && r.rank == 3) {
        ir_infer_require_equal(c, r.d[0], K(c, dirs));
        ir_infer_require_equal(c, r.d[1], op2(c, IR_EXPR_MUL, h, K(c, G)));
        ir_infer_require_equal(c, r.d[2], h);
    }
    /* B [dirs, 2*G*H], sequence_lens [N], initial_h/c [dirs, N, H] (layout 1: [N, dirs, H]),
     * P [dirs, 3*H]; absent ones (empty tensors) are skipped */
    Sh o;
    int64_t zero;
    for (uint32_t i = 3; i < 8; i++) {
        if (!has_in(c, i) || !in_shape(c, i, &o) || o.rank == IR_RANK_UNKNOWN) continue;
        bool empty = false;
        for (uint32_t k = 0; k < o.rank; k++) empty |= ir_expr_is_const(c->g, o.d[k], &zero) && zero == 0;
        if (empty) continue;
        if (i == 3 && o.rank == 2) {
            ir_infer_require_equal(c, o.d[0], K(c, dirs));
            ir_infer_require_equal(c, o.d[1], op2(c, IR_EXPR_MUL, h, K(c, 2 * G)));
        } else if (i == 4 && o.rank == 1) {
            ir_infer_require_equal(c, o.d[0], batch);
        } else if ((i == 5 || i == 6) && o.rank == 3) {
            ir_infer_require_equal(c, o.d[layout ? 1 : 0], K(c, dirs));
            ir_infer_require_equal(c, o.d[layout ? 0 : 1], batch);
            ir_infer_require_equal(c, o.d[2], h);
        } else if (i == 7 && o.rank == 2) {
            ir_infer_require_equal(c, o.d[0], K(c, dirs));
            ir_infer_require_equal(c, o.d[1], op2(c, IR_EXPR_MUL, h, K(c, 3)));
        }
    }
    IrExprId y[4] = {seq, K(c, dirs), batch, h}, st[3] = {K(c, dirs), batch, h};
    if (layout) {
        IrExprId y1[4] = {batch, seq, K(c, dirs), h}, st1[3] = {batch, K(c, dirs), h};
        memcpy(y, y1, sizeof y);
        memcpy(st, st1, sizeof st);
    }
    out(c, 0, x.dt, 4, y);
    for (uint32_t i = 1; i <= n_state_outputs; i++) out(c, i, x.dt, 3, st);
    return IR_OK;
}

IrStatus ir_infer_rnn(IrInferCtx *c) { return recurrent(c, 1); }
IrStatus ir_infer_gru(IrInferCtx *c) { return recurrent(c, 1); }
IrStatus ir_infer_lstm(IrInferCtx *c) { return recurrent(c, 2); }

/* ---- signal processing ------------------------------------------------------------------------- */

IrStatus ir_infer_window(IrInferCtx *c) {
    int64_t n;
    IrExprId d = scalar_value(c, 0, &n) ? K(c, n) : U(c);
    out(c, 0, attr_dtype(c, "output_datatype", IR_DTYPE_F32), 1, &d);
    return IR_OK;
}

IrStatus ir_infer_dft(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    if (x.rank == IR_RANK_UNKNOWN || x.rank < 2) {
        out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        return IR_OK;
    }
    /* axis counts from the back over the whole rank; the last dim (real/imaginary) is no axis */
    int64_t axis = ai(c, "axis"), len;
    if (!ir_shape_axis_checked(&axis, x.rank) || axis >= (int64_t)x.rank - 1) return ir_infer_error(c, "axis out of range");
    if (has_in(c, 1)) {
        Sh l;
        int64_t nl = -1;
        bool empty = in_shape(c, 1, &l) && l.rank == 1 && ir_expr_is_const(c->g, l.d[0], &nl) && nl == 0;
        if (scalar_value(c, 1, &len)) x.d[axis] = K(c, len);
        else if (!empty) x.d[axis] = U(c); /* a dft_length given at run time (an empty one means none) */
    }
    if (ai(c, "onesided")) x.d[axis] = op2(c, IR_EXPR_ADD, op2(c, IR_EXPR_DIV, x.d[axis], K(c, 2)), K(c, 1));
    x.d[x.rank - 1] = K(c, 2); /* complex as (real, imaginary) */
    out(c, 0, x.dt, x.rank, x.d);
    return IR_OK;
}

IrStatus ir_infer_stft(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    int64_t step, flen = -1;
    IrExprId d[4] = {x.rank != IR_RANK_UNKNOWN && x.rank >= 1 ? x.d[0] : U(c), U(c), U(c), K(c, 2)};
    if (has_in(c, 3)) scalar_value(c, 3, &flen);
    else {
        Sh w;
        if (has_in(c, 2) && in_shape(c, 2, &w) && w.rank == 1) ir_expr_is_const(c->g, w.d[0], &flen);
    }
    int64_t slen;
    if (flen > 0 && scalar_value(c, 1, &step) && step > 0 && x.rank != IR_RANK_UNKNOWN && x.rank >= 2 &&
        ir_expr_is_const(c->g, x.d[1], &slen))
        d[1] = K(c, (slen - flen) / step + 1);
    if (flen > 0) d[2] = K(c, ai(c, "onesided") ? flen / 2 + 1 : flen);
    out(c, 0, x.dt, 4, d);
    return IR_OK;
}

IrStatus ir_infer_mel_weight_matrix(IrInferCtx *c) {
    int64_t bins, dft;
    IrExprId d[2] = {scalar_value(c, 1, &dft) ? K(c, dft / 2 + 1) : U(c), scalar_value(c, 0, &bins) ? K(c, bins) : U(c)};
    out(c, 0, attr_dtype(c, "output_datatype", IR_DTYPE_F32), 2, d);
    return IR_OK;
}

/* ---- random generators --------------------------------------------------------------------------- */

IrStatus ir_infer_random(IrInferCtx *c) {
    IrAttrValue a;
    if (!ir_node_attr(c->g, c->n, "shape", &a) || a.count > MAXR) return IR_OK;
    IrExprId d[MAXR];
    for (uint32_t i = 0; i < a.count; i++) d[i] = K(c, a.ints[i]);
    out(c, 0, attr_dtype(c, "dtype", IR_DTYPE_F32), a.count, d);
    return IR_OK;
}

IrStatus ir_infer_random_like(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    out(c, 0, attr_dtype(c, "dtype", x.dt), x.rank, x.d);
    return IR_OK;
}

IrStatus ir_infer_multinomial(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    IrExprId d[2] = {x.rank == 2 ? x.d[0] : U(c), K(c, ai(c, "sample_size"))};
    out(c, 0, attr_dtype(c, "dtype", IR_DTYPE_I32), 2, d);
    return IR_OK;
}

/* ---- quantization and losses ------------------------------------------------------------------- */

IrStatus ir_infer_dynamic_quantize_linear(IrInferCtx *c) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    out(c, 0, IR_DTYPE_U8, x.rank, x.d);
    out(c, 1, IR_DTYPE_F32, 0, NULL);
    out(c, 2, IR_DTYPE_U8, 0, NULL);
    return IR_OK;
}

static IrStatus loss(IrInferCtx *c, bool log_prob_output) {
    Sh x;
    if (!in_shape(c, 0, &x)) return IR_OK;
    const char *red = ir_node_attr_string(c->g, c->n, "reduction", NULL);
    if (red && strcmp(red, "none") == 0) {
        if (x.rank == IR_RANK_UNKNOWN || x.rank < 2) {
            out(c, 0, x.dt, IR_RANK_UNKNOWN, NULL);
        } else {
            IrExprId d[MAXR];
            uint32_t r = 0;
            for (uint32_t i = 0; i < x.rank; i++)
                if (i != 1) d[r++] = x.d[i];
            out(c, 0, x.dt, r, d);
        }
    } else {
        out(c, 0, x.dt, 0, NULL);
    }
    if (log_prob_output) out(c, 1, x.dt, x.rank, x.d);
    return IR_OK;
}

IrStatus ir_infer_softmax_cross_entropy_loss(IrInferCtx *c) { return loss(c, true); }
IrStatus ir_infer_nll_loss(IrInferCtx *c) { return loss(c, false); }

/* ---- Scan ---------------------------------------------------------------------------------------- */

/* Results: N final states (types of the body's state outputs), then K scan outputs (body
 * output types with the scan axis inserted, its length the scanned inputs' length). */
IrStatus ir_infer_scan(IrInferCtx *c) {
    IrGraph *g = c->g;
    IrRegionId body = ir_node_region_at(g, c->n, 0);
    int64_t m = ai(c, "num_scan_inputs");
    uint32_t nin = ir_infer_num_inputs(c);
    if (m < 1 || (uint32_t)m > nin) return ir_infer_error(c, "num_scan_inputs %lld does not fit %u operands", (long long)m, nin);
    uint32_t n_state = nin - (uint32_t)m;
    if (ir_region_num_args(g, body) != nin)
        return ir_infer_error(c, "body takes %u arguments, expected %u", ir_region_num_args(g, body), nin);
    if (ir_region_num_outputs(g, body) != c->n_out)
        return ir_infer_error(c, "body returns %u values for %u results", ir_region_num_outputs(g, body), c->n_out);
    /* the scan length: first scanned input's dim along its scan axis */
    IrExprId len = U(c);
    Sh s0;
    IrAttrValue in_axes;
    int64_t ax0 = ir_node_attr(g, c->n, "scan_input_axes", &in_axes) && in_axes.count ? in_axes.ints[0] : 0;
    if (in_shape(c, n_state, &s0) && s0.rank != IR_RANK_UNKNOWN && ir_shape_axis_checked(&ax0, s0.rank)) len = s0.d[ax0];
    IrAttrValue out_axes;
    bool has_out_axes = ir_node_attr(g, c->n, "scan_output_axes", &out_axes);
    for (uint32_t i = 0; i < c->n_out; i++) {
        IrValueId bo = ir_region_output(g, body, i);
        IrTypeId t = bo ? ir_value_type(g, bo) : 0;
        if (!t) continue;
        if (i < n_state) {
            ir_infer_set_output(c, i, t);
            continue;
        }
        uint32_t r = ir_type_rank(g, t);
        if (r == IR_RANK_UNKNOWN || r + 1 > MAXR) {
            out(c, i, ir_type_dtype(g, t), IR_RANK_UNKNOWN, NULL);
            continue;
        }
        int64_t ax = has_out_axes && i - n_state < out_axes.count ? out_axes.ints[i - n_state] : 0;
        if (!ir_shape_axis_checked(&ax, r + 1)) return ir_infer_error(c, "scan_output_axes out of range");
        IrExprId d[MAXR];
        for (uint32_t k = 0, j = 0; k < r + 1; k++) d[k] = (int64_t)k == ax ? len : ir_type_dims(g, t)[j++];
        out(c, i, ir_type_dtype(g, t), r + 1, d);
    }
    return IR_OK;
}

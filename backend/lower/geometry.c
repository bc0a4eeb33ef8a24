/* Operand geometry both code generators read from the graph: small constant integer operands,
 * 2-D windows, Conv, MatMul, Gemm and reduction shapes, and Transpose/Slice/Concat as strided-copy
 * plans (declared in lower/lower.h). No LLVM: emitters turn these into index math. */
#include "backend/lower/lower.h"

#include <stdlib.h>
#include <string.h>

#include <string.h>

/* "on non-f32 tensors" when operand 0, 1 or (if present) 2 of n is not f32 (Conv, Gemm). */
static const char *first_three_f32(const IrGraph *g, IrNodeId n) {
    for (uint32_t i = 0; i < 3 && i < ir_node_num_operands(g, n); i++) {
        IrValueId v = ir_node_operand(g, n, i);
        if (v && lower_value_dtype(g, v) != IR_DTYPE_F32) return "on non-f32 tensors";
    }
    return NULL;
}

bool lower_const_ints(const IrGraph *g, IrValueId v, int64_t *vals, uint32_t *n, uint32_t cap) {
    const void *data = v ? lower_value_const_data(g, v) : NULL;
    if (!data) return false;
    IrTypeId t = ir_value_type(g, v);
    int64_t cnt;
    if (!ir_type_numel(g, t, &cnt) || cnt > (int64_t)cap) return false;
    for (int64_t i = 0; i < cnt; i++) vals[i] = ir_elem_get_i64(ir_type_dtype(g, t), data, (size_t)i);
    *n = (uint32_t)cnt;
    return true;
}

/* ---- windows -------------------------------------------------------------------------------- */

const char *lower_win_read(const IrGraph *g, IrNodeId n, IrValueId x, IrValueId y, int64_t kh, int64_t kw,
                          LowerWin *wn) {
    uint32_t r, ry;
    int64_t d[IR_MAX_RANK], dy[IR_MAX_RANK];
    lower_value_shape(g, x, &r, d);
    lower_value_shape(g, y, &ry, dy);
    if (r != 4 || ry != 4) return "other than 2-D (NCHW)";
    int64_t a[6];
    const char *why = lower_win_attrs(g, n, a);
    *wn = (LowerWin){d[0], d[1], d[2], d[3], dy[2], dy[3], kh, kw, a[0], a[1], a[2], a[3], a[4], a[5]};
    return why;
}

const char *lower_win_attrs(const IrGraph *g, IrNodeId n, int64_t *a) {
    bool found;
    const char *ap = ir_node_attr_string(g, n, "auto_pad", &found);
    if (ap && strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0) return "with auto_pad SAME_*";
    a[0] = a[1] = a[2] = a[3] = 1, a[4] = a[5] = 0;
    IrAttrValue av;
    if (ir_node_attr(g, n, "strides", &av) && av.count == 2) a[0] = av.ints[0], a[1] = av.ints[1];
    if (ir_node_attr(g, n, "dilations", &av) && av.count == 2) a[2] = av.ints[0], a[3] = av.ints[1];
    if (ir_node_attr(g, n, "pads", &av) && av.count == 4 && !(ap && strcmp(ap, "VALID") == 0)) a[4] = av.ints[0], a[5] = av.ints[1];
    return NULL;
}
const char *lower_conv_read(const IrGraph *g, IrNodeId n, LowerConvGeom *cv) {
    IrValueId x = ir_node_operand(g, n, 0), w = ir_node_operand(g, n, 1), y = ir_node_result(g, n, 0);
    const char *why = first_three_f32(g, n);
    if (why) return why;
    uint32_t rw;
    int64_t dw[IR_MAX_RANK];
    lower_value_shape(g, w, &rw, dw);
    if (rw != 4) return "other than 2-D (NCHW)";
    why = lower_win_read(g, n, x, y, dw[2], dw[3], &cv->w);
    if (why) return why;
    bool found;
    cv->groups = ir_node_attr_int(g, n, "group", &found);
    if (!found) cv->groups = 1;
    cv->oc = dw[0];
    if (cv->groups < 1 || cv->w.c % cv->groups || cv->oc % cv->groups || dw[1] != cv->w.c / cv->groups)
        return "with these groups";
    cv->cg = cv->w.c / cv->groups;
    cv->ocg = cv->oc / cv->groups;
    cv->k = cv->cg * dw[2] * dw[3];
    cv->ohw = cv->w.oh * cv->w.ow;
    if (cv->ohw == 0 || cv->k == 0 || cv->oc == 0 || cv->w.n == 0) return "on empty tensors";
    return NULL;
}

const char *lower_matmul_shape(const IrGraph *g, IrNodeId n, LowerMatMulShape *ms) {
    lower_value_shape(g, ir_node_operand(g, n, 0), &ms->ra, ms->da);
    lower_value_shape(g, ir_node_operand(g, n, 1), &ms->rb, ms->db);
    lower_value_shape(g, ir_node_result(g, n, 0), &ms->ry, ms->dy);
    if (ms->ra == 0 || ms->rb == 0) return "on scalars";
    if (ms->ra == 1) {
        ms->da[1] = ms->da[0];
        ms->da[0] = 1;
        ms->ra = 2;
    }
    if (ms->rb == 1) {
        ms->db[1] = 1;
        ms->rb = 2;
    }
    ms->m = ms->da[ms->ra - 2];
    ms->k = ms->da[ms->ra - 1];
    ms->n = ms->db[ms->rb - 1];
    uint32_t bra = ms->ra - 2, brb = ms->rb - 2;
    ms->br = bra > brb ? bra : brb;
    for (uint32_t q = 0; q < ms->br; q++) {
        int32_t ia = (int32_t)q - (int32_t)(ms->br - bra), ib = (int32_t)q - (int32_t)(ms->br - brb);
        int64_t a = ia >= 0 ? ms->da[ia] : 1, b = ib >= 0 ? ms->db[ib] : 1;
        ms->bd[q] = a == 1 ? b : a;
    }
    ms->nb = ir_shape_numel(ms->br, ms->bd);
    if (ms->nb * ms->m * ms->n != ir_shape_numel(ms->ry, ms->dy)) return "with these shapes";
    if (ms->k == 0) return "with K = 0";
    return NULL;
}

const char *lower_gemm_shape(const IrGraph *g, IrNodeId n, LowerGemmShape *gs) {
    IrValueId va = ir_node_operand(g, n, 0), vb = ir_node_operand(g, n, 1), vy = ir_node_result(g, n, 0);
    IrValueId vc = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    const char *why = first_three_f32(g, n);
    if (why) return why;
    uint32_t ra, rb, ry;
    int64_t da[IR_MAX_RANK], db[IR_MAX_RANK], dy[IR_MAX_RANK];
    lower_value_shape(g, va, &ra, da);
    lower_value_shape(g, vb, &rb, db);
    lower_value_shape(g, vy, &ry, dy);
    if (ra != 2 || rb != 2 || ry != 2) return "with non-2D operands";
    bool found;
    gs->ta = ir_node_attr_int(g, n, "transA", &found) != 0;
    gs->tb = ir_node_attr_int(g, n, "transB", &found) != 0;
    gs->alpha = ir_node_attr_float(g, n, "alpha", &found);
    if (!found) gs->alpha = 1.0;
    gs->beta = ir_node_attr_float(g, n, "beta", &found);
    if (!found) gs->beta = 1.0;
    gs->dy[0] = gs->m = dy[0];
    gs->dy[1] = gs->n = dy[1];
    gs->k = gs->ta ? da[0] : da[1];
    gs->lda = da[1];
    gs->ldb = db[1];
    gs->rc = 0;
    if (vc) lower_value_shape(g, vc, &gs->rc, gs->dc);
    return NULL;
}

const char *lower_reduce_shape(const IrGraph *g, IrNodeId n, IrOp op, LowerReduceShape *rs) {
    uint32_t r, na = 0;
    int64_t d[IR_MAX_RANK], axes[IR_MAX_RANK];
    lower_value_shape(g, ir_node_operand(g, n, 0), &r, d);
    bool found;
    if (op == IR_OP_GLOBAL_AVERAGE_POOL) {
        if (r < 3) return "with rank < 3";
        for (uint32_t k = 2; k < r; k++) axes[na++] = k;
    } else {
        IrAttrValue av;
        if (ir_node_attr(g, n, "axes", &av) && av.kind == IR_ATTR_INTS) {
            if (av.count > IR_MAX_RANK) return "with these axes";
            for (uint32_t i = 0; i < av.count; i++) axes[na++] = av.ints[i];
        } else if (ir_node_num_operands(g, n) > 1 && ir_node_operand(g, n, 1)) {
            if (!lower_const_ints(g, ir_node_operand(g, n, 1), axes, &na, IR_MAX_RANK)) return "with non-constant axes";
        }
        if (na == 0) {
            if (ir_node_attr_int(g, n, "noop_with_empty_axes", &found)) return "with noop_with_empty_axes";
            for (uint32_t k = 0; k < r; k++) axes[na++] = k;
        }
    }
    bool red[IR_MAX_RANK] = {0};
    for (uint32_t i = 0; i < na; i++) {
        int64_t a = ir_shape_axis(axes[i], r);
        if (a < 0 || a >= (int64_t)r) return "with these axes";
        if (red[a]) return "with a repeated axis";
        red[a] = true;
    }
    uint32_t first = r, end = 0;
    for (uint32_t k = 0; k < r; k++)
        if (red[k]) {
            if (first == r) first = k;
            end = k + 1;
        }
    for (uint32_t k = first; k < end; k++)
        if (!red[k]) return "over non-adjacent axes";
    rs->inner = ir_shape_numel(r - end, d + end);
    rs->outer = ir_shape_numel(first, d);
    rs->len = ir_shape_numel(end - first, d + first);
    if (rs->len == 0) return "over empty axes";
    return NULL;
}

/* ---- strided copies ------------------------------------------------------------------------- */

const char *lower_transpose_plan(const IrGraph *g, IrNodeId n, LowerCopyPlan *p) {
    uint32_t r, ry;
    int64_t d[IR_MAX_RANK], sx[IR_MAX_RANK], perm[IR_MAX_RANK];
    lower_value_shape(g, ir_node_operand(g, n, 0), &r, d);
    lower_value_shape(g, ir_node_result(g, n, 0), &ry, p->dims);
    p->rank = r;
    p->base[0] = p->base[1] = 0;
    IrAttrValue av;
    if (ir_node_attr(g, n, "perm", &av) && av.kind == IR_ATTR_INTS && av.count == r) {
        for (uint32_t k = 0; k < r; k++) perm[k] = ir_shape_axis(av.ints[k], r);
    } else {
        for (uint32_t k = 0; k < r; k++) perm[k] = r - 1 - k;
    }
    ir_shape_strides(r, d, sx);
    ir_shape_strides(r, p->dims, p->s[0]);
    for (uint32_t k = 0; k < r; k++) {
        if (perm[k] < 0 || perm[k] >= (int64_t)r) return "with this perm";
        p->s[1][k] = sx[perm[k]];
    }
    return NULL;
}

const char *lower_slice_plan(const IrGraph *g, IrNodeId n, LowerCopyPlan *p) {
    uint32_t r, ry, ns = 0, ne = 0, na = 0, nst = 0;
    int64_t d[IR_MAX_RANK], sx[IR_MAX_RANK] = {0};
    int64_t starts[IR_MAX_RANK], ends[IR_MAX_RANK], axes[IR_MAX_RANK], steps[IR_MAX_RANK];
    lower_value_shape(g, ir_node_operand(g, n, 0), &r, d);
    lower_value_shape(g, ir_node_result(g, n, 0), &ry, p->dims);
    uint32_t nops = ir_node_num_operands(g, n);
    if (nops < 3 || !lower_const_ints(g, ir_node_operand(g, n, 1), starts, &ns, IR_MAX_RANK) ||
        !lower_const_ints(g, ir_node_operand(g, n, 2), ends, &ne, IR_MAX_RANK) || ns != ne)
        return "with non-constant starts or ends";
    if (nops > 3 && ir_node_operand(g, n, 3)) {
        if (!lower_const_ints(g, ir_node_operand(g, n, 3), axes, &na, IR_MAX_RANK) || na != ns)
            return "with non-constant axes";
    } else {
        for (uint32_t i = 0; i < ns; i++) axes[i] = i;
    }
    if (nops > 4 && ir_node_operand(g, n, 4)) {
        if (!lower_const_ints(g, ir_node_operand(g, n, 4), steps, &nst, IR_MAX_RANK) || nst != ns)
            return "with non-constant steps";
    } else {
        for (uint32_t i = 0; i < ns; i++) steps[i] = 1;
    }
    if (ry != r) return "with these shapes";
    p->rank = r;
    ir_shape_strides(r, d, sx);
    ir_shape_strides(r, p->dims, p->s[0]);
    memcpy(p->s[1], sx, sizeof sx);
    p->base[0] = p->base[1] = 0;
    for (uint32_t i = 0; i < ns; i++) {
        int64_t a = ir_shape_axis(axes[i], r), st = steps[i], dim;
        if (a < 0 || a >= (int64_t)r || st == 0) return "with these axes or steps";
        dim = d[a];
        int64_t b = starts[i] < 0 ? starts[i] + dim : starts[i];
        if (st > 0) b = b < 0 ? 0 : b > dim ? dim : b;
        else b = b < 0 ? -1 : b > dim - 1 ? dim - 1 : b;
        p->base[1] += b * sx[a];
        p->s[1][a] = sx[a] * st;
    }
    return NULL;
}

const char *lower_concat_part(const IrGraph *g, IrNodeId n, uint32_t i, int64_t *pos, LowerCopyPlan *p) {
    uint32_t ry;
    int64_t dy[IR_MAX_RANK];
    lower_value_shape(g, ir_node_result(g, n, 0), &ry, dy);
    ir_shape_strides(ry, dy, p->s[0]);
    bool found;
    int64_t axis = ir_shape_axis(ir_node_attr_int(g, n, "axis", &found), ry);
    if (axis < 0 || axis >= (int64_t)ry) return "with this axis";
    lower_value_shape(g, ir_node_operand(g, n, i), &p->rank, p->dims);
    ir_shape_strides(p->rank, p->dims, p->s[1]);
    p->base[0] = *pos * p->s[0][axis];
    p->base[1] = 0;
    *pos += p->dims[axis];
    return NULL;
}

bool lower_conv_pointwise(const IrGraph *g, IrNodeId cn) {
    uint32_t r, rw, ry;
    int64_t d[IR_MAX_RANK], dw[IR_MAX_RANK], dy[IR_MAX_RANK];
    if (!lower_value_shape(g, ir_node_operand(g, cn, 0), &r, d) || !lower_value_shape(g, ir_node_operand(g, cn, 1), &rw, dw) ||
        !lower_value_shape(g, ir_node_result(g, cn, 0), &ry, dy) || r != 4 || rw != 4 || ry != 4)
        return false;
    IrAttrValue av;
    if (ir_node_attr(g, cn, "strides", &av) && av.kind == IR_ATTR_INTS)
        for (uint32_t i = 0; i < av.count; i++)
            if (av.ints[i] != 1) return false;
    if (ir_node_attr(g, cn, "pads", &av) && av.kind == IR_ATTR_INTS)
        for (uint32_t i = 0; i < av.count; i++)
            if (av.ints[i] != 0) return false;
    return dw[2] == 1 && dw[3] == 1 && dy[2] == d[2] && dy[3] == d[3];
}

int64_t lower_conv_im2col_bytes(const IrGraph *g, IrNodeId cn) {
    uint32_t r, rw;
    int64_t dw[IR_MAX_RANK], dy[IR_MAX_RANK];
    if (!lower_value_shape(g, ir_node_operand(g, cn, 1), &rw, dw) || !lower_value_shape(g, ir_node_result(g, cn, 0), &r, dy) ||
        rw != 4 || r != 4)
        return 0;
    return dw[1] * dw[2] * dw[3] * dy[2] * dy[3] * 4;
}

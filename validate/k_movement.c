/* Data movement kernels: Concat, Split, Slice, Pad, Reshape, Flatten, Squeeze, Unsqueeze,
 * Expand, Tile, Transpose, DepthToSpace, SpaceToDepth, Gather*, Scatter*, ReverseSequence,
 * Trilu, Compress, OneHot, TopK, Unique, NonZero.
 *
 * Most of these only move bytes: the output is described as a strided view of the input
 * (per-output-dim source strides, 0 for repeated dims) and copied element by element in
 * row-major output order, so every kernel is dtype-agnostic and deterministic. Index inputs
 * accept any integer dtype and negative values count from the end, as ONNX specifies.
 */
#include "validate/interp.h"

#include <math.h>
#include <stdlib.h>

#define MAXR IR_MAX_RANK

static IrStatus need_input(KernelArgs *a, uint32_t i) {
    if (i < a->n_in && a->in[i]) return IR_OK;
    return interp_error(a, "input %u is missing", i);
}

static const IrTensor *opt_input(KernelArgs *a, uint32_t i) { return i < a->n_in ? a->in[i] : NULL; }

static IrStatus axis_error(KernelArgs *a, int64_t axis, uint32_t rank) {
    return interp_error(a, "axis %lld is out of range for rank %u", (long long)axis, rank);
}

/* Reads a 0-D/1-D integer tensor into vals (at most cap); returns the count or -1 after
 * reporting an error. */
static int read_ints(KernelArgs *a, const IrTensor *t, int64_t *vals, int cap, const char *what) {
    if (!ir_dtype_is_int(t->dtype)) {
        interp_error(a, "%s must be an integer tensor, not %s", what, ir_dtype_name(t->dtype));
        return -1;
    }
    if (t->rank > 1) {
        interp_error(a, "%s must be 1-D, has rank %u", what, t->rank);
        return -1;
    }
    int64_t n = ir_tensor_numel(t);
    if (n > cap) {
        interp_error(a, "%s has %lld entries, at most %d supported", what, (long long)n, cap);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) vals[i] = interp_get_i(t, i);
    return (int)n;
}

static bool same_dims(uint32_t r, const int64_t *x, const int64_t *y) {
    for (uint32_t i = 0; i < r; i++)
        if (x[i] != y[i]) return false;
    return true;
}

static void elem_copy(void *dst, int64_t di, const void *src, int64_t si, size_t es) {
    memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es, es);
}

/* Copies a strided view of src into contiguous dst: dst in row-major order over dims, element
 * at multi-index i comes from src[base + sum i[d] * st[d]]. rank may reach 2 * MAXR. */
static void strided_copy(void *dst, const void *src, size_t es, uint32_t rank, const int64_t *dims,
                         const int64_t *st, int64_t base) {
    int64_t n = ir_shape_numel(rank, dims);
    if (n == 0) return;
    if (rank == 0) {
        elem_copy(dst, 0, src, base, es);
        return;
    }
    int64_t idx[2 * MAXR] = {0};
    int64_t inner = dims[rank - 1], ist = st[rank - 1], off = base;
    char *o = dst;
    const char *s = src;
    for (int64_t done = 0; done < n; done += inner) {
        switch (es) {
        case 1: for (int64_t i = 0; i < inner; i++) ((uint8_t *)o)[i] = ((const uint8_t *)s)[off + i * ist]; break;
        case 2: for (int64_t i = 0; i < inner; i++) ((uint16_t *)o)[i] = ((const uint16_t *)s)[off + i * ist]; break;
        case 4: for (int64_t i = 0; i < inner; i++) ((uint32_t *)o)[i] = ((const uint32_t *)s)[off + i * ist]; break;
        case 8: for (int64_t i = 0; i < inner; i++) ((uint64_t *)o)[i] = ((const uint64_t *)s)[off + i * ist]; break;
        default: for (int64_t i = 0; i < inner; i++) memcpy(o + i * es, s + (off + i * ist) * es, es);
        }
        o += inner * es;
        for (int d = (int)rank - 2; d >= 0; d--) {
            off += st[d];
            if (++idx[d] < dims[d]) break;
            off -= st[d] * dims[d];
            idx[d] = 0;
        }
    }
}

/* Output 0 = x's data with a new shape. */
static IrStatus reshaped_copy(KernelArgs *a, const IrTensor *x, uint32_t rank, const int64_t *dims) {
    IrStatus s = interp_alloc_output(a, 0, x->dtype, rank, dims);
    if (s) return s;
    if (ir_tensor_numel(x)) memcpy(a->out[0].data, x->data, ir_tensor_nbytes(x));
    return IR_OK;
}

/* ---- Concat / Split --------------------------------------------------------------------- */

IrStatus interp_CONCAT(KernelArgs *a) {
    if (a->n_in == 0) return interp_error(a, "needs at least one input");
    for (uint32_t k = 0; k < a->n_in; k++) {
        IrStatus s = need_input(a, k);
        if (s) return s;
    }
    const IrTensor *x0 = a->in[0];
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, x0->rank)) return axis_error(a, interp_attr_int(a, "axis"), x0->rank);
    int64_t dims[MAXR];
    memcpy(dims, x0->dims, sizeof dims[0] * x0->rank);
    dims[axis] = 0;
    for (uint32_t k = 0; k < a->n_in; k++) {
        const IrTensor *t = a->in[k];
        if (t->dtype != x0->dtype)
            return interp_error(a, "input %u is %s, expected %s", k, ir_dtype_name(t->dtype), ir_dtype_name(x0->dtype));
        if (t->rank != x0->rank) return interp_error(a, "input %u has rank %u, expected %u", k, t->rank, x0->rank);
        for (uint32_t d = 0; d < t->rank; d++)
            if (d != axis && t->dims[d] != x0->dims[d])
                return interp_error(a, "input %u has dim %u = %lld, expected %lld", k, d,
                                    (long long)t->dims[d], (long long)x0->dims[d]);
        dims[axis] += t->dims[axis];
    }
    IrStatus s = interp_alloc_output(a, 0, x0->dtype, x0->rank, dims);
    if (s) return s;
    int64_t outer, inner;
    ir_shape_split(x0->rank, dims, (uint32_t)axis, &outer, NULL, &inner);
    size_t es = ir_dtype_size(x0->dtype);
    char *o = a->out[0].data;
    if (!o) return IR_OK;
    for (int64_t i = 0; i < outer; i++)
        for (uint32_t k = 0; k < a->n_in; k++) {
            size_t chunk = (size_t)(a->in[k]->dims[axis] * inner) * es;
            if (!chunk) continue;
            memcpy(o, (const char *)a->in[k]->data + (size_t)i * chunk, chunk);
            o += chunk;
        }
    return IR_OK;
}

IrStatus interp_SPLIT(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0], *sp = opt_input(a, 1);
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, x->rank)) return axis_error(a, interp_attr_int(a, "axis"), x->rank);
    uint32_t n = a->n_out;
    if (n == 0) return interp_error(a, "has no outputs");
    int64_t *sizes = malloc(n * sizeof *sizes), dim = x->dims[axis];
    if (!sizes) return interp_error(a, "out of memory");
    if (sp) {
        int64_t m = ir_tensor_numel(sp);
        if (m != (int64_t)n) {
            free(sizes);
            return interp_error(a, "split has %lld entries for %u outputs", (long long)m, n);
        }
        int64_t total = 0;
        for (uint32_t i = 0; i < n; i++) {
            sizes[i] = interp_get_i(sp, i);
            if (sizes[i] < 0) {
                free(sizes);
                return interp_error(a, "split entry %u is negative", i);
            }
            total += sizes[i];
        }
        if (total != dim) {
            free(sizes);
            return interp_error(a, "split sums to %lld, but axis %lld has size %lld", (long long)total,
                                (long long)axis, (long long)dim);
        }
    } else {
        /* equal parts; when uneven the last part is smaller (opset 18 num_outputs) */
        int64_t chunk = (dim + n - 1) / n, left = dim;
        for (uint32_t i = 0; i < n; i++) {
            sizes[i] = left < chunk ? left : chunk;
            left -= sizes[i];
        }
    }
    int64_t outer, inner, start = 0;
    ir_shape_split(x->rank, x->dims, (uint32_t)axis, &outer, NULL, &inner);
    size_t es = ir_dtype_size(x->dtype);
    for (uint32_t i = 0; i < n; i++) {
        int64_t dims[MAXR];
        memcpy(dims, x->dims, sizeof dims[0] * x->rank);
        dims[axis] = sizes[i];
        if ((s = interp_alloc_output(a, i, x->dtype, x->rank, dims))) break;
        size_t chunk = (size_t)(sizes[i] * inner) * es;
        for (int64_t o = 0; o < outer && chunk; o++)
            memcpy((char *)a->out[i].data + (size_t)o * chunk,
                   (const char *)x->data + ((size_t)(o * dim + start) * (size_t)inner) * es, chunk);
        start += sizes[i];
    }
    free(sizes);
    return s;
}

/* ---- Slice ------------------------------------------------------------------------------ */

IrStatus interp_SLICE(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1)) || (s = need_input(a, 2))) return s;
    const IrTensor *x = a->in[0];
    int64_t starts[MAXR], ends[MAXR], axes[MAXR], steps[MAXR];
    int n = read_ints(a, a->in[1], starts, MAXR, "starts");
    if (n < 0) return IR_EVERIFY;
    if (read_ints(a, a->in[2], ends, MAXR, "ends") != n)
        return interp_error(a, "starts and ends differ in length");
    const IrTensor *ta = opt_input(a, 3), *ts = opt_input(a, 4);
    if (ta) {
        if (read_ints(a, ta, axes, MAXR, "axes") != n) return interp_error(a, "axes and starts differ in length");
    } else {
        for (int i = 0; i < n; i++) axes[i] = i;
    }
    if (ts) {
        if (read_ints(a, ts, steps, MAXR, "steps") != n) return interp_error(a, "steps and starts differ in length");
    } else {
        for (int i = 0; i < n; i++) steps[i] = 1;
    }
    int64_t begin[MAXR], step[MAXR], dims[MAXR];
    bool seen[MAXR] = {0};
    for (uint32_t d = 0; d < x->rank; d++) {
        begin[d] = 0;
        step[d] = 1;
        dims[d] = x->dims[d];
    }
    for (int i = 0; i < n; i++) {
        int64_t ax = axes[i];
        if (!ir_shape_axis_checked(&ax, x->rank)) return axis_error(a, axes[i], x->rank);
        if (seen[ax]) return interp_error(a, "axis %lld is repeated", (long long)axes[i]);
        seen[ax] = true;
        int64_t dim = x->dims[ax], st = steps[i], b = starts[i], e = ends[i];
        if (st == 0) return interp_error(a, "step for axis %lld is 0", (long long)axes[i]);
        if (b < 0) b += dim;
        if (e < 0) e += dim;
        if (st > 0) {
            b = b < 0 ? 0 : b > dim ? dim : b;
            e = e < 0 ? 0 : e > dim ? dim : e;
        } else {
            b = b < 0 ? 0 : b;
            b = b > dim - 1 ? dim - 1 : b;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
        }
        int64_t len = st > 0 ? (e - b + st - 1) / st : (b - e + (-st) - 1) / (-st);
        if (len < 0) len = 0;
        begin[ax] = b;
        step[ax] = st;
        dims[ax] = len;
    }
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, dims))) return s;
    int64_t xs[MAXR], st[MAXR], base = 0;
    ir_shape_strides(x->rank, x->dims, xs);
    for (uint32_t d = 0; d < x->rank; d++) {
        st[d] = xs[d] * step[d];
        if (dims[d]) base += begin[d] * xs[d];
    }
    strided_copy(a->out[0].data, x->data, ir_dtype_size(x->dtype), x->rank, dims, st, base);
    return IR_OK;
}

/* ---- Pad -------------------------------------------------------------------------------- */

static int64_t pad_src(int64_t o, int64_t n, int mode) {
    if (o >= 0 && o < n) return o;
    if (mode == 0 || n == 0) return -1;               /* constant */
    if (mode == 1) return o < 0 ? 0 : n - 1;          /* edge */
    if (mode == 3) return ((o % n) + n) % n;          /* wrap */
    if (n == 1) return 0;                             /* reflect */
    int64_t p = 2 * (n - 1), r = ((o % p) + p) % p;
    return r < n ? r : p - r;
}

IrStatus interp_PAD(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *cv = opt_input(a, 2), *ta = opt_input(a, 3);
    const char *ms = interp_attr_string(a, "mode");
    int mode;
    if (!ms || strcmp(ms, "constant") == 0) mode = 0;
    else if (strcmp(ms, "edge") == 0) mode = 1;
    else if (strcmp(ms, "reflect") == 0) mode = 2;
    else if (strcmp(ms, "wrap") == 0) mode = 3;
    else return interp_error(a, "unknown mode '%s'", ms);
    int64_t pads[2 * MAXR], axes[MAXR];
    int np = read_ints(a, a->in[1], pads, 2 * MAXR, "pads");
    if (np < 0) return IR_EVERIFY;
    int nax = (int)x->rank;
    if (ta) {
        if ((nax = read_ints(a, ta, axes, MAXR, "axes")) < 0) return IR_EVERIFY;
    } else {
        for (int i = 0; i < nax; i++) axes[i] = i;
    }
    if (np != 2 * nax) return interp_error(a, "pads has %d entries, expected %d", np, 2 * nax);
    int64_t lo[MAXR] = {0}, dims[MAXR];
    for (uint32_t d = 0; d < x->rank; d++) dims[d] = x->dims[d];
    for (int i = 0; i < nax; i++) {
        int64_t ax = axes[i];
        if (!ir_shape_axis_checked(&ax, x->rank)) return axis_error(a, axes[i], x->rank);
        lo[ax] = pads[i];
        dims[ax] += pads[i] + pads[i + nax];
        if (dims[ax] < 0) return interp_error(a, "pads make dim %lld negative", (long long)ax);
    }
    if (mode != 0)
        for (uint32_t d = 0; d < x->rank; d++)
            if (x->dims[d] == 0 && dims[d] > 0)
                return interp_error(a, "cannot %s-pad an empty dim %u", ms, d);
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, dims))) return s;
    IrTensor *y = &a->out[0];
    int64_t n = ir_tensor_numel(y);
    if (n == 0) return IR_OK;
    size_t es = ir_dtype_size(x->dtype);
    /* the fill value in the output dtype */
    IrTensor fill;
    int64_t one = 1;
    union {
        double d;
        uint8_t b[8];
    } fb = {0};
    uint8_t *fbuf = fb.b;
    ir_tensor_view(&fill, x->dtype, 1, &one, fbuf);
    if (cv && ir_tensor_numel(cv) > 0) {
        if (ir_dtype_is_float(x->dtype)) interp_set_f(&fill, 0, interp_get_f(cv, 0));
        else interp_set_i(&fill, 0, interp_get_i(cv, 0));
    }
    int64_t xs[MAXR], idx[MAXR] = {0};
    ir_shape_strides(x->rank, x->dims, xs);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        bool inside = true;
        for (uint32_t d = 0; d < x->rank && inside; d++) {
            int64_t c = pad_src(idx[d] - lo[d], x->dims[d], mode);
            if (c < 0) inside = false;
            else off += c * xs[d];
        }
        if (inside) elem_copy(y->data, i, x->data, off, es);
        else memcpy((char *)y->data + (size_t)i * es, fbuf, es);
        ir_shape_index_next(x->rank, dims, idx);
    }
    return IR_OK;
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze ----------------------------------------------- */

IrStatus interp_RESHAPE(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0];
    int64_t dims[MAXR];
    int n = read_ints(a, a->in[1], dims, MAXR, "shape");
    if (n < 0) return IR_EVERIFY;
    bool allowzero = interp_attr_int(a, "allowzero") != 0;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < n; i++) {
        if (dims[i] == 0 && !allowzero) {
            if (i >= (int)x->rank) return interp_error(a, "shape entry %d is 0 but the input has rank %u", i, x->rank);
            dims[i] = x->dims[i];
        }
        if (dims[i] == -1) {
            if (infer >= 0) return interp_error(a, "shape has more than one -1");
            infer = i;
            continue;
        }
        if (dims[i] < 0) return interp_error(a, "shape entry %d is %lld", i, (long long)dims[i]);
        known *= dims[i];
    }
    int64_t numel = ir_tensor_numel(x);
    if (infer >= 0) {
        if (known == 0 || numel % known)
            return interp_error(a, "cannot infer the -1 dim: %lld elements into blocks of %lld",
                                (long long)numel, (long long)known);
        dims[infer] = numel / known;
    } else if (known != numel) {
        char xs[128];
        ir_tensor_shape_str(x, xs, sizeof xs);
        return interp_error(a, "cannot reshape %s (%lld elements) into %lld elements", xs,
                            (long long)numel, (long long)known);
    }
    return reshaped_copy(a, x, (uint32_t)n, dims);
}

IrStatus interp_FLATTEN(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    int64_t axis = interp_attr_int(a, "axis");
    axis = ir_shape_axis(axis, x->rank); /* Flatten's axis may equal the rank */
    if (axis < 0 || axis > (int64_t)x->rank) return axis_error(a, interp_attr_int(a, "axis"), x->rank);
    int64_t dims[2] = {1, 1};
    for (uint32_t d = 0; d < x->rank; d++) dims[d < axis ? 0 : 1] *= x->dims[d];
    return reshaped_copy(a, x, 2, dims);
}

IrStatus interp_SQUEEZE(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0], *ta = opt_input(a, 1);
    bool drop[MAXR] = {0};
    if (ta && ir_tensor_numel(ta) > 0) {
        int64_t axes[MAXR];
        int n = read_ints(a, ta, axes, MAXR, "axes");
        if (n < 0) return IR_EVERIFY;
        for (int i = 0; i < n; i++) {
            int64_t ax = axes[i];
            if (!ir_shape_axis_checked(&ax, x->rank)) return axis_error(a, axes[i], x->rank);
            if (x->dims[ax] != 1)
                return interp_error(a, "cannot squeeze axis %lld of size %lld", (long long)axes[i], (long long)x->dims[ax]);
            drop[ax] = true;
        }
    } else {
        for (uint32_t d = 0; d < x->rank; d++) drop[d] = x->dims[d] == 1;
    }
    int64_t dims[MAXR];
    uint32_t r = 0;
    for (uint32_t d = 0; d < x->rank; d++)
        if (!drop[d]) dims[r++] = x->dims[d];
    return reshaped_copy(a, x, r, dims);
}

IrStatus interp_UNSQUEEZE(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0];
    int64_t axes[MAXR];
    int n = read_ints(a, a->in[1], axes, MAXR, "axes");
    if (n < 0) return IR_EVERIFY;
    uint32_t r = x->rank + (uint32_t)n;
    if (r > MAXR) return interp_error(a, "result rank %u exceeds %d", r, MAXR);
    bool ins[MAXR] = {0};
    for (int i = 0; i < n; i++) {
        int64_t ax = axes[i];
        if (!ir_shape_axis_checked(&ax, r)) return axis_error(a, axes[i], r);
        if (ins[ax]) return interp_error(a, "axis %lld is repeated", (long long)axes[i]);
        ins[ax] = true;
    }
    int64_t dims[MAXR];
    for (uint32_t d = 0, k = 0; d < r; d++) dims[d] = ins[d] ? 1 : x->dims[k++];
    return reshaped_copy(a, x, r, dims);
}

/* ---- Expand, Tile, Transpose ------------------------------------------------------------ */

IrStatus interp_EXPAND(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0];
    int64_t shape[MAXR], dims[MAXR], st[MAXR];
    int n = read_ints(a, a->in[1], shape, MAXR, "shape");
    if (n < 0) return IR_EVERIFY;
    uint32_t r;
    IrShapeBroadcastError e;
    if (!ir_shape_broadcast2(x->rank, x->dims, (uint32_t)n, shape, &r, dims, &e)) {
        bool in_x = e.operand == 0; /* operand 0 is the input, 1 the shape */
        return interp_error(a, "input dim %lld does not broadcast to shape dim %lld (input axis %u, shape entry %u)",
                            (long long)(in_x ? e.dim : e.other_dim), (long long)(in_x ? e.other_dim : e.dim),
                            in_x ? e.axis : e.other_axis, in_x ? e.other_axis : e.axis);
    }
    ir_shape_broadcast_strides(x->rank, x->dims, r, NULL, st);
    if ((s = interp_alloc_output(a, 0, x->dtype, r, dims))) return s;
    strided_copy(a->out[0].data, x->data, ir_dtype_size(x->dtype), r, dims, st, 0);
    return IR_OK;
}

IrStatus interp_TILE(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0];
    int64_t rep[MAXR], dims[MAXR], xs[MAXR];
    int n = read_ints(a, a->in[1], rep, MAXR, "repeats");
    if (n < 0) return IR_EVERIFY;
    if (n != (int)x->rank) return interp_error(a, "repeats has %d entries for rank %u", n, x->rank);
    /* the output viewed as [rep0, d0, rep1, d1, ...] with stride 0 on the repeat dims */
    int64_t vd[2 * MAXR], vs[2 * MAXR];
    ir_shape_strides(x->rank, x->dims, xs);
    for (uint32_t d = 0; d < x->rank; d++) {
        if (rep[d] < 0) return interp_error(a, "repeats entry %u is negative", d);
        dims[d] = x->dims[d] * rep[d];
        vd[2 * d] = rep[d];
        vs[2 * d] = 0;
        vd[2 * d + 1] = x->dims[d];
        vs[2 * d + 1] = xs[d];
    }
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, dims))) return s;
    strided_copy(a->out[0].data, x->data, ir_dtype_size(x->dtype), 2 * x->rank, vd, vs, 0);
    return IR_OK;
}

IrStatus interp_TRANSPOSE(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    int64_t perm[MAXR], dims[MAXR], st[MAXR], xs[MAXR];
    int n = interp_attr_ints(a, "perm", perm, MAXR);
    if (n < 0) {
        n = (int)x->rank;
        for (int i = 0; i < n; i++) perm[i] = n - 1 - i;
    }
    if (n != (int)x->rank) return interp_error(a, "perm has %d entries for rank %u", n, x->rank);
    bool used[MAXR] = {0};
    ir_shape_strides(x->rank, x->dims, xs);
    for (int i = 0; i < n; i++) {
        int64_t p = perm[i];
        if (!ir_shape_axis_checked(&p, x->rank) || used[p]) return interp_error(a, "perm is not a permutation");
        used[p] = true;
        dims[i] = x->dims[p];
        st[i] = xs[p];
    }
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, dims))) return s;
    strided_copy(a->out[0].data, x->data, ir_dtype_size(x->dtype), x->rank, dims, st, 0);
    return IR_OK;
}

/* ---- DepthToSpace / SpaceToDepth -------------------------------------------------------- */

IrStatus interp_DEPTH_TO_SPACE(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (x->rank != 4) return interp_error(a, "input has rank %u, expected 4", x->rank);
    int64_t b = interp_attr_int(a, "blocksize"), N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    const char *mode = interp_attr_string(a, "mode");
    bool crd = mode && strcmp(mode, "CRD") == 0;
    if (mode && !crd && strcmp(mode, "DCR") != 0) return interp_error(a, "unknown mode '%s'", mode);
    if (b <= 0 || C % (b * b)) return interp_error(a, "channels %lld are not divisible by blocksize^2 (%lld)", (long long)C, (long long)(b * b));
    int64_t c2 = C / (b * b);
    int64_t dims[4] = {N, c2, H * b, W * b};
    if ((s = interp_alloc_output(a, 0, x->dtype, 4, dims))) return s;
    /* output viewed as [N, c2, H, b(i), W, b(j)]; source channel = (i*b+j)*c2 + c (DCR) or
     * c*b*b + i*b + j (CRD) */
    int64_t HW = H * W;
    int64_t vd[6] = {N, c2, H, b, W, b};
    int64_t vs[6] = {C * HW, crd ? b * b * HW : HW, W, crd ? b * HW : b * c2 * HW, 1, crd ? HW : c2 * HW};
    strided_copy(a->out[0].data, x->data, ir_dtype_size(x->dtype), 6, vd, vs, 0);
    return IR_OK;
}

IrStatus interp_SPACE_TO_DEPTH(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (x->rank != 4) return interp_error(a, "input has rank %u, expected 4", x->rank);
    int64_t b = interp_attr_int(a, "blocksize"), N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    if (b <= 0 || H % b || W % b)
        return interp_error(a, "spatial dims %lldx%lld are not divisible by blocksize %lld", (long long)H, (long long)W, (long long)b);
    int64_t dims[4] = {N, C * b * b, H / b, W / b};
    if ((s = interp_alloc_output(a, 0, x->dtype, 4, dims))) return s;
    /* output viewed as [N, b(i), b(j), C, H/b, W/b] reading x[n, c, h*b+i, w*b+j] */
    int64_t vd[6] = {N, b, b, C, H / b, W / b};
    int64_t vs[6] = {C * H * W, W, 1, H * W, b * W, b};
    strided_copy(a->out[0].data, x->data, ir_dtype_size(x->dtype), 6, vd, vs, 0);
    return IR_OK;
}

/* ---- Gather family ---------------------------------------------------------------------- */

/* Normalizes index v against dim n; false when out of range. */
static bool fix_index(int64_t *v, int64_t n) {
    if (*v < 0) *v += n;
    return *v >= 0 && *v < n;
}

IrStatus interp_GATHER(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *ind = a->in[1];
    if (!ir_dtype_is_int(ind->dtype)) return interp_error(a, "indices must be integers, not %s", ir_dtype_name(ind->dtype));
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, x->rank)) return axis_error(a, interp_attr_int(a, "axis"), x->rank);
    uint32_t r = x->rank - 1 + ind->rank;
    if (r > MAXR) return interp_error(a, "result rank %u exceeds %d", r, MAXR);
    int64_t dims[MAXR];
    uint32_t k = 0;
    for (int64_t d = 0; d < axis; d++) dims[k++] = x->dims[d];
    for (uint32_t d = 0; d < ind->rank; d++) dims[k++] = ind->dims[d];
    for (uint32_t d = (uint32_t)axis + 1; d < x->rank; d++) dims[k++] = x->dims[d];
    if ((s = interp_alloc_output(a, 0, x->dtype, r, dims))) return s;
    int64_t outer, inner, n, ni = ir_tensor_numel(ind);
    ir_shape_split(x->rank, x->dims, (uint32_t)axis, &outer, &n, &inner);
    size_t es = ir_dtype_size(x->dtype), chunk = (size_t)inner * es;
    char *o = a->out[0].data;
    for (int64_t j = 0; j < ni; j++) {
        int64_t v = interp_get_i(ind, j);
        if (!fix_index(&v, n))
            return interp_error(a, "index %lld is out of range for axis size %lld", (long long)interp_get_i(ind, j), (long long)n);
    }
    if (!o || !chunk) return IR_OK;
    for (int64_t i = 0; i < outer; i++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t v = interp_get_i(ind, j);
            fix_index(&v, n);
            memcpy(o, (const char *)x->data + ((size_t)(i * n + v) * (size_t)inner) * es, chunk);
            o += chunk;
        }
    return IR_OK;
}

IrStatus interp_GATHER_ELEMENTS(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *ind = a->in[1];
    if (!ir_dtype_is_int(ind->dtype)) return interp_error(a, "indices must be integers, not %s", ir_dtype_name(ind->dtype));
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, x->rank)) return axis_error(a, interp_attr_int(a, "axis"), x->rank);
    if (ind->rank != x->rank) return interp_error(a, "indices have rank %u, expected %u", ind->rank, x->rank);
    if ((s = interp_alloc_output(a, 0, x->dtype, ind->rank, ind->dims))) return s;
    int64_t xs[MAXR], idx[MAXR] = {0}, n = ir_tensor_numel(ind);
    ir_shape_strides(x->rank, x->dims, xs);
    size_t es = ir_dtype_size(x->dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (uint32_t d = 0; d < x->rank; d++) {
            int64_t c = idx[d];
            if (d == axis) {
                c = interp_get_i(ind, i);
                if (!fix_index(&c, x->dims[d]))
                    return interp_error(a, "index %lld is out of range for axis size %lld", (long long)interp_get_i(ind, i), (long long)x->dims[d]);
            } else if (c >= x->dims[d]) {
                return interp_error(a, "indices dim %u (%lld) exceeds the data dim (%lld)", d, (long long)ind->dims[d], (long long)x->dims[d]);
            }
            off += c * xs[d];
        }
        elem_copy(a->out[0].data, i, x->data, off, es);
        ir_shape_index_next(ind->rank, ind->dims, idx);
    }
    return IR_OK;
}

IrStatus interp_GATHER_ND(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *ind = a->in[1];
    if (!ir_dtype_is_int(ind->dtype)) return interp_error(a, "indices must be integers, not %s", ir_dtype_name(ind->dtype));
    int64_t bd = interp_attr_int(a, "batch_dims");
    if (ind->rank < 1) return interp_error(a, "indices must have rank >= 1");
    int64_t k = ind->dims[ind->rank - 1];
    if (bd < 0 || bd >= (int64_t)ind->rank || bd + k > (int64_t)x->rank)
        return interp_error(a, "batch_dims %lld and index length %lld do not fit data rank %u", (long long)bd, (long long)k, x->rank);
    for (int64_t d = 0; d < bd; d++)
        if (x->dims[d] != ind->dims[d]) return interp_error(a, "batch dim %lld differs between data and indices", (long long)d);
    int64_t dims[MAXR];
    uint32_t r = 0;
    for (uint32_t d = 0; d + 1 < ind->rank; d++) dims[r++] = ind->dims[d];
    for (uint32_t d = (uint32_t)(bd + k); d < x->rank; d++) {
        if (r >= MAXR) return interp_error(a, "result rank exceeds %d", MAXR);
        dims[r++] = x->dims[d];
    }
    if ((s = interp_alloc_output(a, 0, x->dtype, r, dims))) return s;
    int64_t B = ir_shape_numel((uint32_t)bd, x->dims), xs[MAXR];
    int64_t per_batch = ir_shape_numel(ind->rank - 1 - (uint32_t)bd, ind->dims + bd);
    int64_t slice = ir_shape_numel(x->rank - (uint32_t)(bd + k), x->dims + bd + k);
    ir_shape_strides(x->rank, x->dims, xs);
    int64_t batch_stride = bd > 0 ? xs[bd - 1] : 0;
    size_t es = ir_dtype_size(x->dtype);
    char *o = a->out[0].data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < per_batch; j++) {
            int64_t tup = (b * per_batch + j) * k, off = b * batch_stride;
            for (int64_t q = 0; q < k; q++) {
                int64_t v = interp_get_i(ind, tup + q);
                if (!fix_index(&v, x->dims[bd + q]))
                    return interp_error(a, "index %lld is out of range for dim %lld of size %lld",
                                        (long long)interp_get_i(ind, tup + q), (long long)(bd + q), (long long)x->dims[bd + q]);
                off += v * xs[bd + q];
            }
            if (slice && o) {
                memcpy(o, (const char *)x->data + (size_t)off * es, (size_t)slice * es);
                o += (size_t)slice * es;
            }
        }
    return IR_OK;
}

/* ---- Scatter family --------------------------------------------------------------------- */

typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } Reduction;

static IrStatus parse_reduction(KernelArgs *a, Reduction *r) {
    const char *s = interp_attr_string(a, "reduction");
    if (!s || strcmp(s, "none") == 0) *r = RED_NONE;
    else if (strcmp(s, "add") == 0) *r = RED_ADD;
    else if (strcmp(s, "mul") == 0) *r = RED_MUL;
    else if (strcmp(s, "max") == 0) *r = RED_MAX;
    else if (strcmp(s, "min") == 0) *r = RED_MIN;
    else return interp_error(a, "unknown reduction '%s'", s);
    return IR_OK;
}

/* out[o] = reduce(out[o], upd[u]) */
static void scatter_one(IrTensor *out, int64_t o, const IrTensor *upd, int64_t u, Reduction r) {
    size_t es = ir_dtype_size(out->dtype);
    if (r == RED_NONE) {
        elem_copy(out->data, o, upd->data, u, es);
    } else if (ir_dtype_is_float(out->dtype)) {
        double x = interp_get_f(out, o), y = interp_get_f(upd, u);
        double v = r == RED_ADD ? x + y : r == RED_MUL ? x * y : r == RED_MAX ? fmax(x, y) : fmin(x, y);
        interp_set_f(out, o, v);
    } else {
        int64_t x = interp_get_i(out, o), y = interp_get_i(upd, u);
        bool uns = !ir_dtype_is_signed(out->dtype);
        int64_t v;
        if (r == RED_ADD) v = (int64_t)((uint64_t)x + (uint64_t)y);
        else if (r == RED_MUL) v = (int64_t)((uint64_t)x * (uint64_t)y);
        else {
            bool gt = uns ? (uint64_t)y > (uint64_t)x : y > x;
            v = (r == RED_MAX) == gt ? y : x;
        }
        interp_set_i(out, o, v);
    }
}

static IrStatus scatter_prepare(KernelArgs *a, Reduction *r) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1)) || (s = need_input(a, 2))) return s;
    const IrTensor *x = a->in[0], *ind = a->in[1], *upd = a->in[2];
    if (!ir_dtype_is_int(ind->dtype)) return interp_error(a, "indices must be integers, not %s", ir_dtype_name(ind->dtype));
    if (upd->dtype != x->dtype)
        return interp_error(a, "updates are %s but data is %s", ir_dtype_name(upd->dtype), ir_dtype_name(x->dtype));
    if ((s = parse_reduction(a, r))) return s;
    if (*r != RED_NONE && x->dtype == IR_DTYPE_BOOL) return interp_unsupported(a, "reductions on bool");
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
    if (ir_tensor_numel(x)) memcpy(a->out[0].data, x->data, ir_tensor_nbytes(x));
    return IR_OK;
}

IrStatus interp_SCATTER_ELEMENTS(KernelArgs *a) {
    Reduction red;
    IrStatus s = scatter_prepare(a, &red);
    if (s) return s;
    const IrTensor *x = a->in[0], *ind = a->in[1], *upd = a->in[2];
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, x->rank)) return axis_error(a, interp_attr_int(a, "axis"), x->rank);
    if (ind->rank != x->rank || !same_dims(ind->rank, ind->dims, upd->dims) || upd->rank != ind->rank)
        return interp_error(a, "indices and updates must have the same shape and the data's rank");
    int64_t xs[MAXR], idx[MAXR] = {0}, n = ir_tensor_numel(ind);
    ir_shape_strides(x->rank, x->dims, xs);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (uint32_t d = 0; d < x->rank; d++) {
            int64_t c = idx[d];
            if (d == axis) {
                c = interp_get_i(ind, i);
                if (!fix_index(&c, x->dims[d]))
                    return interp_error(a, "index %lld is out of range for axis size %lld", (long long)interp_get_i(ind, i), (long long)x->dims[d]);
            } else if (c >= x->dims[d]) {
                return interp_error(a, "indices dim %u exceeds the data dim", d);
            }
            off += c * xs[d];
        }
        scatter_one(&a->out[0], off, upd, i, red);
        ir_shape_index_next(ind->rank, ind->dims, idx);
    }
    return IR_OK;
}

IrStatus interp_SCATTER_ND(KernelArgs *a) {
    Reduction red;
    IrStatus s = scatter_prepare(a, &red);
    if (s) return s;
    const IrTensor *x = a->in[0], *ind = a->in[1], *upd = a->in[2];
    if (ind->rank < 1) return interp_error(a, "indices must have rank >= 1");
    int64_t k = ind->dims[ind->rank - 1];
    if (k > (int64_t)x->rank) return interp_error(a, "index tuples of length %lld exceed data rank %u", (long long)k, x->rank);
    /* updates shape = indices.shape[:-1] + data.shape[k:] */
    uint32_t ur = ind->rank - 1 + x->rank - (uint32_t)k;
    bool ok = upd->rank == ur;
    for (uint32_t d = 0; ok && d + 1 < ind->rank; d++) ok = upd->dims[d] == ind->dims[d];
    for (uint32_t d = (uint32_t)k; ok && d < x->rank; d++) ok = upd->dims[ind->rank - 1 + d - k] == x->dims[d];
    if (!ok) return interp_error(a, "updates shape does not match indices.shape[:-1] + data.shape[k:]");
    int64_t xs[MAXR], slice = ir_shape_numel(x->rank - (uint32_t)k, x->dims + k), nt = ir_shape_numel(ind->rank - 1, ind->dims);
    ir_shape_strides(x->rank, x->dims, xs);
    for (int64_t t = 0; t < nt; t++) {
        int64_t off = 0;
        for (int64_t q = 0; q < k; q++) {
            int64_t v = interp_get_i(ind, t * k + q);
            if (!fix_index(&v, x->dims[q]))
                return interp_error(a, "index %lld is out of range for dim %lld of size %lld",
                                    (long long)interp_get_i(ind, t * k + q), (long long)q, (long long)x->dims[q]);
            off += v * xs[q];
        }
        for (int64_t j = 0; j < slice; j++) scatter_one(&a->out[0], off + j, upd, t * slice + j, red);
    }
    return IR_OK;
}

/* ---- ReverseSequence, Trilu, Compress --------------------------------------------------- */

IrStatus interp_REVERSE_SEQUENCE(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *lens = a->in[1];
    int64_t ba = interp_attr_int(a, "batch_axis"), ta = interp_attr_int(a, "time_axis");
    if (x->rank < 2) return interp_error(a, "input has rank %u, expected at least 2", x->rank);
    if (!ir_shape_axis_checked(&ba, x->rank) || !ir_shape_axis_checked(&ta, x->rank) || ba == ta || ba > 1 || ta > 1)
        return interp_error(a, "batch_axis and time_axis must be 0 and 1 in some order");
    int64_t B = x->dims[ba], T = x->dims[ta];
    if (ir_tensor_numel(lens) != B) return interp_error(a, "sequence_lens has %lld entries for batch %lld", (long long)ir_tensor_numel(lens), (long long)B);
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
    int64_t xs[MAXR], inner = ir_shape_numel(x->rank - 2, x->dims + 2);
    ir_shape_strides(x->rank, x->dims, xs);
    size_t es = ir_dtype_size(x->dtype);
    if (ir_tensor_numel(x) == 0) return IR_OK;
    for (int64_t b = 0; b < B; b++) {
        int64_t len = interp_get_i(lens, b);
        if (len < 0 || len > T) return interp_error(a, "sequence length %lld is out of range [0, %lld]", (long long)len, (long long)T);
        for (int64_t t = 0; t < T; t++) {
            int64_t src = t < len ? len - 1 - t : t;
            int64_t oo = b * xs[ba] + t * xs[ta], so = b * xs[ba] + src * xs[ta];
            memcpy((char *)a->out[0].data + (size_t)oo * es, (const char *)x->data + (size_t)so * es, (size_t)inner * es);
        }
    }
    return IR_OK;
}

IrStatus interp_TRILU(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0], *tk = opt_input(a, 1);
    if (x->rank < 2) return interp_error(a, "input has rank %u, expected at least 2", x->rank);
    int64_t k = tk && ir_tensor_numel(tk) ? interp_get_i(tk, 0) : 0;
    bool upper = interp_attr_int(a, "upper") != 0;
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, x->dims))) return s;
    int64_t N = x->dims[x->rank - 2], M = x->dims[x->rank - 1], n = ir_tensor_numel(x);
    size_t es = ir_dtype_size(x->dtype);
    for (int64_t p = 0; p < n; p++) {
        int64_t j = p % M, i = (p / M) % N;
        bool keep = upper ? j - i >= k : j - i <= k;
        if (keep) elem_copy(a->out[0].data, p, x->data, p, es);
    }
    return IR_OK;
}

IrStatus interp_COMPRESS(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *cond = a->in[1];
    if (cond->rank != 1) return interp_error(a, "condition must be 1-D, has rank %u", cond->rank);
    bool has_axis = interp_has_attr(a, "axis");
    int64_t axis = has_axis ? interp_attr_int(a, "axis") : 0;
    int64_t outer = 1, n, inner = 1;
    if (has_axis) {
        if (!ir_shape_axis_checked(&axis, x->rank)) return axis_error(a, interp_attr_int(a, "axis"), x->rank);
        ir_shape_split(x->rank, x->dims, (uint32_t)axis, &outer, &n, &inner);
    } else {
        n = ir_tensor_numel(x);
    }
    int64_t nc = ir_tensor_numel(cond), kept = 0;
    if (nc > n) return interp_error(a, "condition has %lld entries for axis size %lld", (long long)nc, (long long)n);
    for (int64_t i = 0; i < nc; i++) kept += interp_get_i(cond, i) != 0;
    int64_t dims[MAXR];
    uint32_t r = 1;
    if (has_axis) {
        memcpy(dims, x->dims, sizeof dims[0] * x->rank);
        dims[axis] = kept;
        r = x->rank;
    } else {
        dims[0] = kept;
    }
    if ((s = interp_alloc_output(a, 0, x->dtype, r, dims))) return s;
    size_t es = ir_dtype_size(x->dtype), chunk = (size_t)inner * es;
    char *o = a->out[0].data;
    if (!o || !chunk) return IR_OK;
    for (int64_t i = 0; i < outer; i++)
        for (int64_t j = 0; j < nc; j++)
            if (interp_get_i(cond, j)) {
                memcpy(o, (const char *)x->data + (size_t)(i * n + j) * chunk, chunk);
                o += chunk;
            }
    return IR_OK;
}

/* ---- OneHot ----------------------------------------------------------------------------- */

IrStatus interp_ONE_HOT(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1)) || (s = need_input(a, 2))) return s;
    const IrTensor *ind = a->in[0], *dep = a->in[1], *vals = a->in[2];
    if (ir_tensor_numel(dep) != 1) return interp_error(a, "depth must hold one value");
    if (ir_tensor_numel(vals) != 2) return interp_error(a, "values must hold [off, on]");
    if (ind->dtype == IR_DTYPE_BOOL) return interp_error(a, "indices must be numeric");
    int64_t depth = (int64_t)interp_get_f(dep, 0);
    if (depth < 0) return interp_error(a, "depth %lld is negative", (long long)depth);
    uint32_t r = ind->rank + 1;
    if (r > MAXR) return interp_error(a, "result rank %u exceeds %d", r, MAXR);
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, r)) return axis_error(a, interp_attr_int(a, "axis"), r);
    int64_t dims[MAXR], outer, inner;
    for (uint32_t d = 0, k = 0; d < r; d++) dims[d] = d == axis ? depth : ind->dims[k++];
    ir_shape_split(r, dims, (uint32_t)axis, &outer, NULL, &inner);
    if ((s = interp_alloc_output(a, 0, vals->dtype, r, dims))) return s;
    IrTensor *y = &a->out[0];
    size_t es = ir_dtype_size(vals->dtype);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < depth; c++)
            for (int64_t i = 0; i < inner; i++) {
                double fv = interp_get_f(ind, o * inner + i);
                int64_t v = (int64_t)fv;
                if (v < 0) v += depth;
                elem_copy(y->data, (o * depth + c) * inner + i, vals->data, v == c ? 1 : 0, es);
            }
    return IR_OK;
}

/* ---- sorting helpers: TopK and Unique --------------------------------------------------- */

/* Three-way compare of elements i and j of t by value (NaN sorts above everything). */
static int cmp_elems(const IrTensor *t, int64_t i, int64_t j) {
    if (ir_dtype_is_float(t->dtype)) {
        double x = interp_get_f(t, i), y = interp_get_f(t, j);
        bool xn = x != x, yn = y != y;
        if (xn || yn) return xn == yn ? 0 : xn ? 1 : -1;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (ir_dtype_is_int(t->dtype) && !ir_dtype_is_signed(t->dtype)) {
        uint64_t x = (uint64_t)interp_get_i(t, i), y = (uint64_t)interp_get_i(t, j);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = interp_get_i(t, i), y = interp_get_i(t, j);
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Stable merge sort of idx[0..n) with a comparator over an opaque context. */
typedef int (*IdxCmp)(const void *ctx, int64_t x, int64_t y);

static void merge_sort(int64_t *idx, int64_t *tmp, int64_t n, IdxCmp cmp, const void *ctx) {
    if (n < 2) return;
    int64_t h = n / 2;
    merge_sort(idx, tmp, h, cmp, ctx);
    merge_sort(idx + h, tmp, n - h, cmp, ctx);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp(ctx, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

typedef struct TopKCtx {
    const IrTensor *x;
    int64_t base, stride;
    bool largest;
} TopKCtx;

static int topk_cmp(const void *c, int64_t p, int64_t q) {
    const TopKCtx *t = c;
    int r = cmp_elems(t->x, t->base + p * t->stride, t->base + q * t->stride);
    return t->largest ? -r : r;
}

IrStatus interp_TOP_K(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1))) return s;
    const IrTensor *x = a->in[0], *tk = a->in[1];
    if (ir_tensor_numel(tk) != 1 || !ir_dtype_is_int(tk->dtype)) return interp_error(a, "K must be one integer");
    int64_t axis = interp_attr_int(a, "axis"), k = interp_get_i(tk, 0);
    if (!ir_shape_axis_checked(&axis, x->rank)) return axis_error(a, interp_attr_int(a, "axis"), x->rank);
    int64_t n = x->dims[axis];
    if (k < 0 || k > n) return interp_error(a, "K = %lld is out of range for axis size %lld", (long long)k, (long long)n);
    TopKCtx ctx = {x, 0, 1, interp_attr_int(a, "largest") != 0};
    int64_t dims[MAXR], outer, inner;
    memcpy(dims, x->dims, sizeof dims[0] * x->rank);
    dims[axis] = k;
    ir_shape_split(x->rank, x->dims, (uint32_t)axis, &outer, NULL, &inner);
    if ((s = interp_alloc_output(a, 0, x->dtype, x->rank, dims))) return s;
    if (a->n_out > 1 && (s = interp_alloc_output(a, 1, IR_DTYPE_I64, x->rank, dims))) return s;
    int64_t *idx = malloc((size_t)(n ? 2 * n : 1) * sizeof *idx);
    if (!idx) return interp_error(a, "out of memory");
    size_t es = ir_dtype_size(x->dtype);
    ctx.stride = inner;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            ctx.base = o * n * inner + i;
            for (int64_t j = 0; j < n; j++) idx[j] = j;
            merge_sort(idx, idx + n, n, topk_cmp, &ctx); /* stable: ties keep lower index first */
            for (int64_t j = 0; j < k; j++) {
                int64_t op = (o * k + j) * inner + i;
                elem_copy(a->out[0].data, op, x->data, ctx.base + idx[j] * inner, es);
                if (a->n_out > 1) ((int64_t *)a->out[1].data)[op] = idx[j];
            }
        }
    free(idx);
    return IR_OK;
}

/* Unique items are elements (no axis) or slices along the axis, compared lexicographically. */
typedef struct UniqCtx {
    const IrTensor *x;
    int64_t n, inner, outer; /* item p covers x[o*n*inner + p*inner + i] for all o, i */
} UniqCtx;

static int uniq_cmp(const void *c, int64_t p, int64_t q) {
    const UniqCtx *u = c;
    for (int64_t o = 0; o < u->outer; o++)
        for (int64_t i = 0; i < u->inner; i++) {
            int r = cmp_elems(u->x, (o * u->n + p) * u->inner + i, (o * u->n + q) * u->inner + i);
            if (r) return r;
        }
    return 0;
}

IrStatus interp_UNIQUE(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    bool has_axis = interp_has_attr(a, "axis"), sorted = interp_attr_int(a, "sorted") != 0;
    int64_t axis = has_axis ? interp_attr_int(a, "axis") : 0;
    UniqCtx u = {x, ir_tensor_numel(x), 1, 1};
    if (has_axis) {
        if (!ir_shape_axis_checked(&axis, x->rank)) return axis_error(a, interp_attr_int(a, "axis"), x->rank);
        ir_shape_split(x->rank, x->dims, (uint32_t)axis, &u.outer, &u.n, &u.inner);
    }
    int64_t n = u.n;
    int64_t *buf = malloc((size_t)(n ? n : 1) * 5 * sizeof *buf);
    if (!buf) return interp_error(a, "out of memory");
    int64_t *order = buf, *tmp = buf + n, *group = buf + 2 * n, *first = buf + 3 * n, *count = buf + 4 * n;
    for (int64_t j = 0; j < n; j++) order[j] = j;
    merge_sort(order, tmp, n, uniq_cmp, &u);
    /* groups in sorted order; first occurrence is the first member (the sort is stable) */
    int64_t ng = 0;
    for (int64_t j = 0; j < n; j++) {
        if (j == 0 || uniq_cmp(&u, order[j - 1], order[j]) != 0) {
            first[ng] = order[j];
            count[ng] = 0;
            ng++;
        }
        group[order[j]] = ng - 1;
        count[ng - 1]++;
    }
    /* rank[g]: position of group g in the output (sorted order, or order of first occurrence) */
    int64_t *rank = tmp;
    if (sorted) {
        for (int64_t g = 0; g < ng; g++) rank[g] = g;
    } else {
        int64_t next = 0;
        for (int64_t g = 0; g < ng; g++) rank[g] = -1;
        for (int64_t j = 0; j < n; j++)
            if (rank[group[j]] < 0) rank[group[j]] = next++;
    }
    int64_t dims[MAXR];
    uint32_t r = 1;
    if (has_axis) {
        memcpy(dims, x->dims, sizeof dims[0] * x->rank);
        dims[axis] = ng;
        r = x->rank;
    } else {
        dims[0] = ng;
    }
    if ((s = interp_alloc_output(a, 0, x->dtype, r, dims))) goto out;
    int64_t one[1] = {ng}, nn[1] = {n};
    for (uint32_t i = 1; i < a->n_out && i < 4; i++)
        if (ir_node_result(a->g, a->node, i) && (s = interp_alloc_output(a, i, IR_DTYPE_I64, 1, i == 2 ? nn : one))) goto out;
    size_t es = ir_dtype_size(x->dtype);
    for (int64_t g = 0; g < ng; g++) {
        int64_t at = rank[g], src = first[g];
        for (int64_t o = 0; o < u.outer; o++)
            for (int64_t i = 0; i < u.inner; i++)
                elem_copy(a->out[0].data, (o * ng + at) * u.inner + i, x->data, (o * n + src) * u.inner + i, es);
        if (a->n_out > 1 && a->out[1].data) ((int64_t *)a->out[1].data)[at] = src;
        if (a->n_out > 3 && a->out[3].data) ((int64_t *)a->out[3].data)[at] = count[g];
    }
    if (a->n_out > 2 && a->out[2].data)
        for (int64_t j = 0; j < n; j++) ((int64_t *)a->out[2].data)[j] = rank[group[j]];
out:
    free(buf);
    return s;
}

/* ---- NonZero ---------------------------------------------------------------------------- */

IrStatus interp_NON_ZERO(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    int64_t n = ir_tensor_numel(x), nz = 0;
    bool fl = ir_dtype_is_float(x->dtype);
    for (int64_t i = 0; i < n; i++) nz += fl ? interp_get_f(x, i) != 0 : interp_get_i(x, i) != 0;
    int64_t dims[2] = {x->rank, nz};
    if ((s = interp_alloc_output(a, 0, IR_DTYPE_I64, 2, dims))) return s;
    int64_t *y = a->out[0].data, idx[MAXR] = {0}, k = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fl ? interp_get_f(x, i) != 0 : interp_get_i(x, i) != 0) {
            for (uint32_t d = 0; d < x->rank; d++) y[d * nz + k] = idx[d];
            k++;
        }
        ir_shape_index_next(x->rank, x->dims, idx);
    }
    return IR_OK;
}

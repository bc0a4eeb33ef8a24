/* Shape and constant kernels: Shape, Size, Constant, ConstantOfShape, EyeLike, Range.
 *
 * These produce metadata or fresh constant tensors; none reads its input's data except Range
 * (its three scalars) and ConstantOfShape (the shape vector). String and sparse constants have
 * no irtool dtype and are reported as unsupported.
 */
#include "validate/interp.h"

#include <math.h>
#include <stdlib.h>

#define MAXR IR_MAX_RANK

static IrStatus need_input(KernelArgs *a, uint32_t i) {
    if (i < a->n_in && a->in[i]) return IR_OK;
    return interp_error(a, "input %u is missing", i);
}

IrStatus interp_SHAPE(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    int64_t r = x->rank, start = interp_attr_int(a, "start"), end = r;
    if (interp_has_attr(a, "end")) end = interp_attr_int(a, "end");
    start = ir_shape_axis(start, x->rank);
    end = ir_shape_axis(end, x->rank);
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t n = end > start ? end - start : 0;
    if ((s = interp_alloc_output(a, 0, IR_DTYPE_I64, 1, &n))) return s;
    for (int64_t i = 0; i < n; i++) ((int64_t *)a->out[0].data)[i] = x->dims[start + i];
    return IR_OK;
}

IrStatus interp_SIZE(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    if ((s = interp_alloc_output(a, 0, IR_DTYPE_I64, 0, NULL))) return s;
    *(int64_t *)a->out[0].data = ir_tensor_numel(a->in[0]);
    return IR_OK;
}

/* A Constant of strings: value (a string tensor) or value_string(s) (attribute strings). */
static IrStatus constant_strings(KernelArgs *a) {
    IrAttrValue av;
    if (ir_node_attr(a->g, a->node, "value", &av) && av.kind == IR_ATTR_TENSOR && av.tensor) {
        IrStatus s = ir_tensor_from_const(&a->out[0], a->g, av.tensor);
        return s == IR_EINVAL ? interp_error(a, "malformed string constant") : s;
    }
    bool one = ir_node_attr(a->g, a->node, "value_string", &av);
    if (!one && !ir_node_attr(a->g, a->node, "value_strings", &av)) return interp_error(a, "no value attribute");
    uint32_t n = one ? 1 : av.count;
    IrStringElem *el = malloc((n + 1) * sizeof *el);
    if (!el) return IR_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        const char *str = ir_str(a->g, one ? av.s : av.strs[i]);
        el[i] = (IrStringElem){str, strlen(str)};
    }
    int64_t dim = n;
    IrStatus s = ir_tensor_from_strings(&a->out[0], one ? 0 : 1, &dim, el);
    free(el);
    return s;
}

IrStatus interp_CONSTANT(KernelArgs *a) {
    IrStatus s;
    IrTensor v;
    IrAttrValue sv;
    if ((ir_node_attr(a->g, a->node, "value", &sv) && sv.kind == IR_ATTR_TENSOR && sv.tensor &&
         ir_type_dtype(a->g, ir_const_type(a->g, sv.tensor)) == IR_DTYPE_STRING) ||
        interp_has_attr(a, "value_string") || interp_has_attr(a, "value_strings"))
        return constant_strings(a);
    if (interp_attr_tensor(a, "value", &v)) {
        if ((s = interp_alloc_output(a, 0, v.dtype, v.rank, v.dims))) return s;
        if (ir_tensor_numel(&v)) memcpy(a->out[0].data, v.data, ir_tensor_nbytes(&v));
        return IR_OK;
    }
    IrAttrValue av;
    if (ir_node_attr(a->g, a->node, "value_float", &av)) {
        if ((s = interp_alloc_output(a, 0, IR_DTYPE_F32, 0, NULL))) return s;
        *(float *)a->out[0].data = (float)interp_attr_float(a, "value_float");
        return IR_OK;
    }
    if (ir_node_attr(a->g, a->node, "value_int", &av)) {
        if ((s = interp_alloc_output(a, 0, IR_DTYPE_I64, 0, NULL))) return s;
        *(int64_t *)a->out[0].data = interp_attr_int(a, "value_int");
        return IR_OK;
    }
    if (ir_node_attr(a->g, a->node, "value_floats", &av) || ir_node_attr(a->g, a->node, "value_ints", &av)) {
        bool fl = av.kind == IR_ATTR_FLOATS;
        int64_t n = av.count;
        if ((s = interp_alloc_output(a, 0, fl ? IR_DTYPE_F32 : IR_DTYPE_I64, 1, &n))) return s;
        for (int64_t i = 0; i < n; i++) {
            if (fl) ((float *)a->out[0].data)[i] = (float)av.floats[i];
            else if (av.kind == IR_ATTR_INTS) ((int64_t *)a->out[0].data)[i] = av.ints[i];
        }
        return IR_OK;
    }
    if (interp_has_attr(a, "sparse_value")) return interp_unsupported(a, "sparse constants");
    return interp_error(a, "no value attribute");
}

IrStatus interp_CONSTANT_OF_SHAPE(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *shp = a->in[0];
    if (!ir_dtype_is_int(shp->dtype) || shp->rank > 1) return interp_error(a, "input must be a 1-D integer shape");
    int64_t n = ir_tensor_numel(shp), dims[MAXR];
    if (n > MAXR) return interp_error(a, "shape has %lld entries, at most %d supported", (long long)n, MAXR);
    for (int64_t i = 0; i < n; i++) {
        dims[i] = interp_get_i(shp, i);
        if (dims[i] < 0) return interp_error(a, "shape entry %lld is negative", (long long)i);
    }
    IrTensor v;
    float zero = 0;
    int64_t one = 1;
    if (!interp_attr_tensor(a, "value", &v)) ir_tensor_view(&v, IR_DTYPE_F32, 1, &one, &zero);
    if (ir_tensor_numel(&v) != 1) return interp_error(a, "value must hold exactly one element");
    if ((s = interp_alloc_output(a, 0, v.dtype, (uint32_t)n, dims))) return s;
    size_t es = ir_dtype_size(v.dtype);
    size_t total = (size_t)ir_tensor_numel(&a->out[0]) * es, done = total ? es : 0;
    char *o = a->out[0].data;
    if (total) memcpy(o, v.data, es);
    while (done < total) { /* doubling fill */
        size_t k = done < total - done ? done : total - done;
        memcpy(o + done, o, k);
        done += k;
    }
    return IR_OK;
}

IrStatus interp_EYE_LIKE(KernelArgs *a) {
    IrStatus s = need_input(a, 0);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (x->rank != 2) return interp_error(a, "input has rank %u, expected 2", x->rank);
    IrDType dt = interp_has_attr(a, "dtype") ? (IrDType)interp_attr_int(a, "dtype") : x->dtype;
    if (dt <= IR_DTYPE_NONE || dt >= IR_DTYPE_COUNT) return interp_error(a, "dtype attribute is not a dtype");
    int64_t k = interp_attr_int(a, "k");
    if ((s = interp_alloc_output(a, 0, dt, 2, x->dims))) return s;
    IrTensor *y = &a->out[0];
    for (int64_t i = 0; i < x->dims[0]; i++) {
        int64_t j = i + k;
        if (j >= 0 && j < x->dims[1]) interp_set_i(y, i * x->dims[1] + j, 1);
    }
    return IR_OK;
}

IrStatus interp_RANGE(KernelArgs *a) {
    IrStatus s;
    if ((s = need_input(a, 0)) || (s = need_input(a, 1)) || (s = need_input(a, 2))) return s;
    const IrTensor *ts = a->in[0], *tl = a->in[1], *td = a->in[2];
    if (ir_tensor_numel(ts) != 1 || ir_tensor_numel(tl) != 1 || ir_tensor_numel(td) != 1)
        return interp_error(a, "start, limit and delta must be scalars");
    IrDType dt = ts->dtype;
    if (tl->dtype != dt || td->dtype != dt) return interp_error(a, "start, limit and delta differ in dtype");
    if (dt == IR_DTYPE_BOOL) return interp_unsupported(a, "dtype bool");
    int64_t n;
    if (ir_dtype_is_float(dt)) {
        double start = interp_get_f(ts, 0), limit = interp_get_f(tl, 0), delta = interp_get_f(td, 0);
        if (delta == 0 || !isfinite(delta) || !isfinite(start) || !isfinite(limit))
            return interp_error(a, "start, limit and delta must be finite, delta nonzero");
        double c = ceil((limit - start) / delta);
        if (c > 1e12) return interp_error(a, "range of %g elements is too large", c);
        n = c > 0 ? (int64_t)c : 0;
        if ((s = interp_alloc_output(a, 0, dt, 1, &n))) return s;
        for (int64_t i = 0; i < n; i++) interp_set_f(&a->out[0], i, start + (double)i * delta);
        return IR_OK;
    }
    int64_t start = interp_get_i(ts, 0), limit = interp_get_i(tl, 0), delta = interp_get_i(td, 0);
    if (delta == 0) return interp_error(a, "delta is zero");
    if (!ir_dtype_is_signed(dt) && (start > limit)) n = 0;
    else if (delta > 0) n = limit > start ? (int64_t)(((uint64_t)limit - (uint64_t)start + (uint64_t)delta - 1) / (uint64_t)delta) : 0;
    else n = start > limit ? (int64_t)(((uint64_t)start - (uint64_t)limit + (uint64_t)(-delta) - 1) / (uint64_t)(-delta)) : 0;
    if ((s = interp_alloc_output(a, 0, dt, 1, &n))) return s;
    for (int64_t i = 0; i < n; i++) interp_set_i(&a->out[0], i, (int64_t)((uint64_t)start + (uint64_t)i * (uint64_t)delta));
    return IR_OK;
}

/* Kernels of the sequence and optional ops (the seq/opt block of ir/ops.def).
 *
 * Values are IrTensors of form SEQ (items: the element tensors) or OPT (0 or 1 item). Every
 * result owns its items: elements are deep-copied in and out, so a sequence never shares
 * memory with another value and the executor may free operands as soon as their last use ends.
 * Positions follow ONNX: negative counts from the back, out of range is an error.
 */
#include "validate/interp.h"

#include <stdlib.h>

static IrStatus oom(KernelArgs *a) {
    interp_error(a, "out of memory");
    return IR_ENOMEM;
}

static const char *form_word(const IrTensor *t) {
    return t->form == IR_TYPE_SEQ ? "a sequence" : t->form == IR_TYPE_OPT ? "an optional" : "a tensor";
}

/* Operand i must be present and of form `form`. */
static IrStatus need(KernelArgs *a, uint32_t i, IrTypeKind form) {
    if (i >= a->n_in || !a->in[i]) return interp_error(a, "operand %u is missing", i);
    if (a->in[i]->form != form)
        return interp_error(a, "operand %u must be %s, got %s", i,
                            form == IR_TYPE_SEQ ? "a sequence" : form == IR_TYPE_OPT ? "an optional" : "a tensor",
                            form_word(a->in[i]));
    return IR_OK;
}

/* The dtype a result's declared type holds (NONE if unknown). */
static IrDType result_dtype(KernelArgs *a, uint32_t i) {
    IrValueId v = ir_node_result(a->g, a->node, i);
    return v ? ir_type_elem_dtype(a->g, ir_value_type(a->g, v)) : IR_DTYPE_NONE;
}

/* Reads a position operand (scalar or one element, i32/i64) and checks it against [lo, hi]
 * after adding n to a negative value. */
static IrStatus position(KernelArgs *a, uint32_t i, int64_t n, int64_t lo, int64_t hi, int64_t *out) {
    const IrTensor *p = a->in[i];
    if (p->form != IR_TYPE_TENSOR || ir_tensor_numel(p) != 1 || (p->dtype != IR_DTYPE_I32 && p->dtype != IR_DTYPE_I64))
        return interp_error(a, "the position must be one i32 or i64 value");
    int64_t v = interp_get_i(p, 0), orig = v;
    if (v < 0) v += n;
    if (v < lo || v > hi)
        return interp_error(a, "position %lld is out of range for a sequence of %lld elements", (long long)orig,
                            (long long)n);
    *out = v;
    return IR_OK;
}

/* Inserts a copy of tensor t into sequence s at pos. */
static IrStatus insert_copy(KernelArgs *a, IrTensor *s, uint32_t pos, const IrTensor *t) {
    if (s->dtype != IR_DTYPE_NONE && t->dtype != s->dtype)
        return interp_error(a, "cannot put a %s tensor into a sequence of %s", ir_dtype_name(t->dtype),
                            ir_dtype_name(s->dtype));
    IrTensor c;
    if (ir_tensor_copy(&c, t)) return oom(a);
    if (ir_tensor_seq_insert(s, pos, &c)) {
        ir_tensor_free(&c);
        return oom(a);
    }
    if (s->dtype == IR_DTYPE_NONE) s->dtype = t->dtype;
    return IR_OK;
}

IrStatus interp_SEQUENCE_CONSTRUCT(KernelArgs *a) {
    IrTensor *o = &a->out[0];
    ir_tensor_seq_init(o, a->in[0] ? a->in[0]->dtype : result_dtype(a, 0));
    for (uint32_t i = 0; i < a->n_in; i++) {
        IrStatus s = need(a, i, IR_TYPE_TENSOR);
        if (!s) s = insert_copy(a, o, o->n_items, a->in[i]);
        if (s) return s;
    }
    return IR_OK;
}

IrStatus interp_SEQUENCE_EMPTY(KernelArgs *a) {
    IrDType dt = interp_has_attr(a, "dtype") ? (IrDType)interp_attr_int(a, "dtype") : IR_DTYPE_F32;
    ir_tensor_seq_init(&a->out[0], dt);
    return IR_OK;
}

IrStatus interp_SEQUENCE_AT(KernelArgs *a) {
    IrStatus s = need(a, 0, IR_TYPE_SEQ);
    if (!s) s = need(a, 1, IR_TYPE_TENSOR);
    if (s) return s;
    const IrTensor *q = a->in[0];
    int64_t pos;
    if ((s = position(a, 1, q->n_items, 0, (int64_t)q->n_items - 1, &pos))) return s;
    return ir_tensor_copy(&a->out[0], &q->items[pos]) ? oom(a) : IR_OK;
}

IrStatus interp_SEQUENCE_INSERT(KernelArgs *a) {
    IrStatus s = need(a, 0, IR_TYPE_SEQ);
    if (!s) s = need(a, 1, IR_TYPE_TENSOR);
    if (s) return s;
    const IrTensor *q = a->in[0];
    int64_t pos = q->n_items;
    if (a->n_in > 2 && a->in[2] && (s = position(a, 2, q->n_items, 0, q->n_items, &pos))) return s;
    if (ir_tensor_copy(&a->out[0], q)) return oom(a);
    return insert_copy(a, &a->out[0], (uint32_t)pos, a->in[1]);
}

IrStatus interp_SEQUENCE_ERASE(KernelArgs *a) {
    IrStatus s = need(a, 0, IR_TYPE_SEQ);
    if (s) return s;
    const IrTensor *q = a->in[0];
    int64_t pos = (int64_t)q->n_items - 1;
    if (q->n_items == 0) return interp_error(a, "cannot erase from an empty sequence");
    if (a->n_in > 1 && a->in[1] && (s = position(a, 1, q->n_items, 0, (int64_t)q->n_items - 1, &pos))) return s;
    IrTensor *o = &a->out[0];
    ir_tensor_seq_init(o, q->dtype);
    for (uint32_t i = 0; i < q->n_items; i++)
        if ((int64_t)i != pos && (s = insert_copy(a, o, o->n_items, &q->items[i]))) return s;
    return IR_OK;
}

IrStatus interp_SEQUENCE_LENGTH(KernelArgs *a) {
    IrStatus s = need(a, 0, IR_TYPE_SEQ);
    if (!s) s = interp_alloc_output(a, 0, IR_DTYPE_I64, 0, NULL);
    if (s) return s;
    ((int64_t *)a->out[0].data)[0] = a->in[0]->n_items;
    return IR_OK;
}

/* Copies [start, start + len) of x along axis into *out (keeping the axis unless drop). */
static bool slice_along(const IrTensor *x, uint32_t axis, int64_t start, int64_t len, bool drop, IrTensor *out) {
    int64_t dims[IR_MAX_RANK];
    uint32_t r = 0;
    for (uint32_t i = 0; i < x->rank; i++) {
        if (i != axis) dims[r++] = x->dims[i];
        else if (!drop) dims[r++] = len;
    }
    if (ir_tensor_alloc(out, x->dtype, r, dims)) return false;
    size_t es = ir_dtype_size(x->dtype);
    int64_t outer, inner, full;
    ir_shape_split(x->rank, x->dims, axis, &outer, &full, &inner);
    size_t chunk = (size_t)(len * inner) * es;
    for (int64_t o = 0; o < outer && chunk; o++)
        memcpy((char *)out->data + (size_t)o * chunk, (const char *)x->data + ((size_t)(o * full + start) * (size_t)inner) * es,
               chunk);
    return true;
}

IrStatus interp_SPLIT_TO_SEQUENCE(KernelArgs *a) {
    IrStatus s = need(a, 0, IR_TYPE_TENSOR);
    if (s) return s;
    const IrTensor *x = a->in[0];
    if (x->rank == 0) return interp_error(a, "the input must have rank >= 1");
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, x->rank))
        return interp_error(a, "axis %lld out of range for rank %u", (long long)interp_attr_int(a, "axis"), x->rank);
    int64_t dim = x->dims[axis];
    const IrTensor *sp = a->n_in > 1 ? a->in[1] : NULL;
    bool drop = !sp && interp_attr_int(a, "keepdims") == 0;
    int64_t *sizes = NULL, n = 0;
    if (!sp) {
        n = dim;
        sizes = malloc((size_t)(n ? n : 1) * sizeof *sizes);
        if (!sizes) return oom(a);
        for (int64_t i = 0; i < n; i++) sizes[i] = 1;
    } else if (sp->form != IR_TYPE_TENSOR || !ir_dtype_is_int(sp->dtype) || sp->rank > 1) {
        return interp_error(a, "split must be an integer scalar or 1-D tensor");
    } else if (sp->rank == 0) {
        int64_t k = interp_get_i(sp, 0);
        if (k <= 0) return interp_error(a, "split size must be positive, got %lld", (long long)k);
        n = dim ? (dim + k - 1) / k : 0;
        sizes = malloc((size_t)(n ? n : 1) * sizeof *sizes);
        if (!sizes) return oom(a);
        for (int64_t i = 0; i < n; i++) sizes[i] = i == n - 1 ? dim - k * (n - 1) : k;
    } else {
        n = sp->dims[0];
        sizes = malloc((size_t)(n ? n : 1) * sizeof *sizes);
        if (!sizes) return oom(a);
        int64_t total = 0;
        for (int64_t i = 0; i < n; i++) {
            sizes[i] = interp_get_i(sp, i);
            if (sizes[i] < 0 || __builtin_add_overflow(total, sizes[i], &total)) total = -1;
            if (total < 0) break;
        }
        if (total != dim) {
            free(sizes);
            return interp_error(a, "split sizes must be non-negative and sum to %lld (axis %lld)", (long long)dim,
                                (long long)axis);
        }
    }
    IrTensor *o = &a->out[0];
    ir_tensor_seq_init(o, x->dtype);
    int64_t start = 0;
    for (int64_t i = 0; i < n && !s; i++) {
        IrTensor part;
        if (!slice_along(x, (uint32_t)axis, start, sizes[i], drop, &part)) {
            s = oom(a);
            break;
        }
        if (ir_tensor_seq_insert(o, o->n_items, &part)) {
            ir_tensor_free(&part);
            s = oom(a);
        }
        start += sizes[i];
    }
    free(sizes);
    return s;
}

IrStatus interp_CONCAT_FROM_SEQUENCE(KernelArgs *a) {
    IrStatus s = need(a, 0, IR_TYPE_SEQ);
    if (s) return s;
    const IrTensor *q = a->in[0];
    if (q->n_items == 0) return interp_error(a, "cannot concatenate an empty sequence");
    bool new_axis = interp_attr_int(a, "new_axis") != 0;
    const IrTensor *e0 = &q->items[0];
    uint32_t out_rank = e0->rank + (new_axis ? 1 : 0);
    if (out_rank == 0 || out_rank > IR_MAX_RANK) return interp_error(a, "elements of rank %u cannot be concatenated", e0->rank);
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, out_rank))
        return interp_error(a, "axis %lld out of range for rank %u", (long long)interp_attr_int(a, "axis"), out_rank);
    /* every element viewed with the new axis as a dim of 1 */
    int64_t total = 0;
    for (uint32_t k = 0; k < q->n_items; k++) {
        const IrTensor *e = &q->items[k];
        bool same = e->dtype == e0->dtype && e->rank == e0->rank;
        for (uint32_t i = 0; same && i < e0->rank; i++)
            same = e->dims[i] == e0->dims[i] || (!new_axis && (int64_t)i == axis);
        if (!same) {
            char s0[128], sk[128];
            ir_tensor_shape_str(e0, s0, sizeof s0);
            ir_tensor_shape_str(e, sk, sizeof sk);
            return interp_error(a, "element %u is %s, element 0 is %s: they differ off the axis", k, sk, s0);
        }
        total += new_axis ? 1 : e->dims[axis];
    }
    int64_t dims[IR_MAX_RANK];
    for (uint32_t i = 0, j = 0; i < out_rank; i++) {
        if ((int64_t)i == axis) {
            dims[i] = total;
            if (!new_axis) j++;
        } else {
            dims[i] = e0->dims[j++];
        }
    }
    if ((s = interp_alloc_output(a, 0, e0->dtype, out_rank, dims))) return s;
    size_t es = ir_dtype_size(e0->dtype);
    int64_t outer, inner;
    ir_shape_split(out_rank, dims, (uint32_t)axis, &outer, NULL, &inner);
    char *dst = a->out[0].data;
    for (int64_t o = 0, off = 0; o < outer; o++)
        for (uint32_t k = 0; k < q->n_items; k++) {
            const IrTensor *e = &q->items[k];
            int64_t len = new_axis ? 1 : e->dims[axis];
            size_t chunk = (size_t)(len * inner) * es;
            if (chunk) memcpy(dst + off, (const char *)e->data + (size_t)o * chunk, chunk);
            off += (int64_t)chunk;
        }
    return IR_OK;
}

IrStatus interp_SEQUENCE_MAP(KernelArgs *a) {
    IrStatus s = need(a, 0, IR_TYPE_SEQ);
    if (s) return s;
    IrRegionId body = ir_node_region_at(a->g, a->node, 0);
    uint32_t n_res = ir_region_num_outputs(a->g, body);
    if (n_res != a->n_out) return interp_error(a, "body returns %u values for %u results", n_res, a->n_out);
    uint32_t len = a->in[0]->n_items;
    for (uint32_t i = 0; i < a->n_in; i++) {
        if (!a->in[i]) return interp_error(a, "operand %u is missing", i);
        if (a->in[i]->form == IR_TYPE_OPT) return interp_error(a, "operand %u must be a sequence or a tensor", i);
        if (a->in[i]->form == IR_TYPE_SEQ && a->in[i]->n_items != len)
            return interp_error(a, "sequence operand %u has %u elements, operand 0 has %u", i, a->in[i]->n_items, len);
    }
    for (uint32_t i = 0; i < a->n_out; i++) ir_tensor_seq_init(&a->out[i], result_dtype(a, i));
    IrTensor *args = calloc(a->n_in, sizeof *args), *outs = calloc(n_res ? n_res : 1, sizeof *outs);
    if (!args || !outs) {
        free(args), free(outs);
        return oom(a);
    }
    for (uint32_t k = 0; k < len && !s; k++) {
        for (uint32_t i = 0; i < a->n_in; i++)
            ir_tensor_borrow(&args[i], a->in[i]->form == IR_TYPE_SEQ ? &a->in[i]->items[k] : a->in[i]);
        if ((s = interp_run_region(a, body, args, a->n_in, outs))) break;
        for (uint32_t i = 0; i < n_res && !s; i++) {
            if (outs[i].form != IR_TYPE_TENSOR) {
                s = interp_error(a, "body output %u is not a tensor", i);
                break;
            }
            IrTensor *o = &a->out[i];
            if (o->dtype != IR_DTYPE_NONE && outs[i].dtype != o->dtype) {
                s = interp_error(a, "body output %u is %s, the result holds %s", i, ir_dtype_name(outs[i].dtype),
                                 ir_dtype_name(o->dtype));
                break;
            }
            if (o->dtype == IR_DTYPE_NONE) o->dtype = outs[i].dtype;
            if (ir_tensor_seq_insert(o, o->n_items, &outs[i])) s = oom(a);
        }
        for (uint32_t i = 0; i < n_res; i++) ir_tensor_free(&outs[i]);
    }
    free(args);
    free(outs);
    return s;
}

IrStatus interp_OPTIONAL(KernelArgs *a) {
    IrTensor *o = &a->out[0];
    const IrTensor *x = a->n_in ? a->in[0] : NULL;
    if (!x) {
        ir_tensor_opt_init(o, result_dtype(a, 0));
        return IR_OK;
    }
    if (x->form == IR_TYPE_OPT) return interp_error(a, "an optional cannot hold an optional");
    ir_tensor_opt_init(o, x->dtype);
    IrTensor c;
    if (ir_tensor_copy(&c, x)) return oom(a);
    if (ir_tensor_seq_insert(o, 0, &c)) {
        ir_tensor_free(&c);
        return oom(a);
    }
    return IR_OK;
}

IrStatus interp_OPTIONAL_HAS_ELEMENT(KernelArgs *a) {
    const IrTensor *x = a->n_in ? a->in[0] : NULL;
    IrStatus s = interp_alloc_output(a, 0, IR_DTYPE_BOOL, 0, NULL);
    if (s) return s;
    /* an absent operand is empty; a plain tensor or sequence (opset 18) always has one */
    ((uint8_t *)a->out[0].data)[0] = x && (x->form != IR_TYPE_OPT || x->n_items > 0);
    return IR_OK;
}

IrStatus interp_OPTIONAL_GET_ELEMENT(KernelArgs *a) {
    const IrTensor *x = a->in[0];
    if (!x) return interp_error(a, "operand 0 is missing");
    if (x->form != IR_TYPE_OPT) return ir_tensor_copy(&a->out[0], x) ? oom(a) : IR_OK;
    if (!x->n_items) return interp_error(a, "the optional is empty");
    return ir_tensor_copy(&a->out[0], &x->items[0]) ? oom(a) : IR_OK;
}

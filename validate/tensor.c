/* IrTensor: a dense row-major tensor that either owns its data (malloc'd, freed with the
 * tensor) or views memory it does not own (graph constants, mapped files). A tensor with zero
 * elements has data == NULL. Sequences and optionals (form SEQ/OPT) hold their items in an
 * array that an owning container frees with everything in it; a borrowed container shares
 * them.
 */
#include "ir/shape.h"
#include "validate/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t ir_tensor_numel(const IrTensor *t) {
    return t->form == IR_TYPE_TENSOR ? ir_shape_numel(t->rank, t->dims) : 0;
}

size_t ir_tensor_nbytes(const IrTensor *t) { return (size_t)ir_tensor_numel(t) * ir_dtype_size(t->dtype); }

/* Element count with overflow and sanity checks; false when the shape is unusable. */
static bool checked_nbytes(IrDType dt, uint32_t rank, const int64_t *dims, size_t *out) {
    if (rank > IR_MAX_RANK || dt <= IR_DTYPE_NONE || dt >= IR_DTYPE_COUNT) return false;
    uint64_t n = ir_dtype_size(dt);
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] < 0) return false;
        if (dims[i] && n > (UINT64_C(1) << 46) / (uint64_t)dims[i]) return false;
        n *= (uint64_t)dims[i];
    }
    *out = (size_t)n;
    return true;
}

IrStatus ir_tensor_alloc(IrTensor *t, IrDType dt, uint32_t rank, const int64_t *dims) {
    memset(t, 0, sizeof *t);
    size_t nbytes;
    if (!checked_nbytes(dt, rank, dims, &nbytes))
        return rank > IR_MAX_RANK || dt <= IR_DTYPE_NONE || dt >= IR_DTYPE_COUNT ? IR_EINVAL : IR_ENOMEM;
    t->dtype = dt;
    t->rank = rank;
    if (rank) memcpy(t->dims, dims, rank * sizeof *dims);
    if (nbytes) {
        t->data = calloc(1, nbytes);
        if (!t->data) {
            memset(t, 0, sizeof *t);
            return IR_ENOMEM;
        }
        t->owned = true;
    }
    return IR_OK;
}

void ir_tensor_view(IrTensor *t, IrDType dt, uint32_t rank, const int64_t *dims, const void *data) {
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->rank = rank > IR_MAX_RANK ? IR_MAX_RANK : rank;
    if (t->rank) memcpy(t->dims, dims, t->rank * sizeof *dims);
    t->data = ir_tensor_numel(t) ? (void *)data : NULL;
    t->owned = false;
}

IrStatus ir_tensor_copy(IrTensor *dst, const IrTensor *src) {
    if (src->form != IR_TYPE_TENSOR) {
        memset(dst, 0, sizeof *dst);
        dst->form = src->form;
        dst->dtype = src->dtype;
        dst->owned = true;
        if (!src->n_items) return IR_OK;
        dst->items = calloc(src->n_items, sizeof *dst->items);
        if (!dst->items) {
            memset(dst, 0, sizeof *dst);
            return IR_ENOMEM;
        }
        for (uint32_t i = 0; i < src->n_items; i++) {
            IrStatus s = ir_tensor_copy(&dst->items[i], &src->items[i]);
            if (s) {
                ir_tensor_free(dst);
                return s;
            }
            dst->n_items = i + 1;
        }
        return IR_OK;
    }
    if (src->dtype == IR_DTYPE_STRING) return ir_tensor_from_strings(dst, src->rank, src->dims, src->data);
    IrStatus s = ir_tensor_alloc(dst, src->dtype, src->rank, src->dims);
    if (s) return s;
    size_t n = ir_tensor_nbytes(src);
    if (n && src->data) memcpy(dst->data, src->data, n);
    return IR_OK;
}

void ir_tensor_borrow(IrTensor *dst, const IrTensor *src) {
    *dst = *src;
    dst->owned = false;
}

void ir_tensor_free(IrTensor *t) {
    if (!t) return;
    if (t->owned) {
        for (uint32_t i = 0; i < t->n_items; i++) ir_tensor_free(&t->items[i]);
        free(t->items);
        free(t->data);
    }
    memset(t, 0, sizeof *t);
}

void ir_tensor_seq_init(IrTensor *t, IrDType dt) {
    memset(t, 0, sizeof *t);
    t->form = IR_TYPE_SEQ;
    t->dtype = dt;
    t->owned = true;
}

void ir_tensor_opt_init(IrTensor *t, IrDType dt) {
    ir_tensor_seq_init(t, dt);
    t->form = IR_TYPE_OPT;
}

IrStatus ir_tensor_seq_insert(IrTensor *t, uint32_t pos, IrTensor *item) {
    if (t->form == IR_TYPE_TENSOR || !t->owned || pos > t->n_items || (t->form == IR_TYPE_OPT && t->n_items) ||
        t->n_items >= UINT32_MAX / 2)
        return IR_EINVAL;
    IrTensor *ni = realloc(t->items, (size_t)(t->n_items + 1) * sizeof *ni);
    if (!ni) return IR_ENOMEM;
    t->items = ni;
    memmove(&ni[pos + 1], &ni[pos], (size_t)(t->n_items - pos) * sizeof *ni);
    ni[pos] = *item;
    if (!ni[pos].owned && (ni[pos].data || ni[pos].items)) {
        /* a view: the container owns what it holds */
        IrStatus s = ir_tensor_copy(&ni[pos], item);
        if (s) {
            memmove(&ni[pos], &ni[pos + 1], (size_t)(t->n_items - pos) * sizeof *ni);
            return s;
        }
    }
    memset(item, 0, sizeof *item);
    t->n_items++;
    return IR_OK;
}

bool ir_tensor_fits_type(const IrGraph *g, IrTypeId ty, const IrTensor *t) {
    if (!ty) return true;
    IrTypeKind k = ir_type_kind(g, ty);
    if (k != (IrTypeKind)t->form) return false;
    if (k == IR_TYPE_TENSOR) {
        IrDType dt = ir_type_dtype(g, ty);
        uint32_t r = ir_type_rank(g, ty);
        return (dt == IR_DTYPE_NONE || dt == t->dtype) && (r == IR_RANK_UNKNOWN || r == t->rank);
    }
    /* elements: form and dtype only (ONNX models often declare element shapes loosely) */
    IrTypeId e = ir_type_elem(g, ty);
    for (uint32_t i = 0; i < t->n_items; i++) {
        const IrTensor *it = &t->items[i];
        if (e && ((IrTypeKind)it->form != ir_type_kind(g, e) ||
                  (ir_type_elem_dtype(g, e) && it->dtype && it->dtype != ir_type_elem_dtype(g, e))))
            return false;
    }
    IrDType dt = ir_type_elem_dtype(g, ty);
    return dt == IR_DTYPE_NONE || t->dtype == IR_DTYPE_NONE || dt == t->dtype;
}

void ir_tensor_shape_str(const IrTensor *t, char *buf, size_t cap) {
    if (!cap) return;
    if (t->form == IR_TYPE_SEQ) {
        snprintf(buf, cap, "seq<%s>(%u element%s)", ir_dtype_name(t->dtype), t->n_items, t->n_items == 1 ? "" : "s");
        return;
    }
    if (t->form == IR_TYPE_OPT) {
        if (!t->n_items) {
            snprintf(buf, cap, "opt(empty)");
            return;
        }
        char inner[200];
        ir_tensor_shape_str(&t->items[0], inner, sizeof inner);
        snprintf(buf, cap, "opt(%s)", inner);
        return;
    }
    size_t n = (size_t)snprintf(buf, cap, "%s[", ir_dtype_name(t->dtype));
    for (uint32_t i = 0; i < t->rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* ---- string tensors ------------------------------------------------------------------------ */

IrStatus ir_tensor_from_strings(IrTensor *t, uint32_t rank, const int64_t *dims, const IrStringElem *elems) {
    size_t head;
    memset(t, 0, sizeof *t);
    if (!checked_nbytes(IR_DTYPE_STRING, rank, dims, &head)) return rank > IR_MAX_RANK ? IR_EINVAL : IR_ENOMEM;
    size_t n = head / sizeof(IrStringElem), total = head;
    for (size_t i = 0; i < n; i++) {
        if (elems[i].len > SIZE_MAX / 4 - total) return IR_ENOMEM;
        total += elems[i].len;
    }
    t->dtype = IR_DTYPE_STRING;
    t->rank = rank;
    if (rank) memcpy(t->dims, dims, rank * sizeof *dims);
    if (!n) return IR_OK;
    char *block = malloc(total ? total : 1);
    if (!block) {
        memset(t, 0, sizeof *t);
        return IR_ENOMEM;
    }
    IrStringElem *out = (IrStringElem *)(void *)block;
    char *bytes = block + head;
    for (size_t i = 0; i < n; i++) {
        size_t len = elems[i].len;
        if (len) memcpy(bytes, elems[i].data, len);
        out[i] = (IrStringElem){len ? bytes : NULL, len};
        bytes += len;
    }
    t->data = block;
    t->owned = true;
    return IR_OK;
}

IrStatus ir_tensor_own_strings(IrTensor *t) {
    if (t->dtype != IR_DTYPE_STRING || !t->data) return IR_OK;
    const IrStringElem *el = t->data;
    size_t n = (size_t)ir_tensor_numel(t);
    /* already self-contained when every element points into the tensor's own block */
    if (t->owned) {
        const char *lo = (const char *)t->data + n * sizeof *el;
        size_t room = 0;
        bool inside = true;
        for (size_t i = 0; i < n && inside; i++) room += el[i].len;
        for (size_t i = 0; i < n && inside; i++)
            inside = !el[i].len || (el[i].data >= lo && el[i].data + el[i].len <= lo + room);
        if (inside) return IR_OK;
    }
    IrTensor fresh;
    IrStatus s = ir_tensor_from_strings(&fresh, t->rank, t->dims, el);
    if (s) return s;
    ir_tensor_free(t);
    *t = fresh;
    return IR_OK;
}

IrStatus ir_tensor_from_const(IrTensor *t, const IrGraph *g, IrConstId c) {
    memset(t, 0, sizeof *t);
    IrTypeId type = ir_const_type(g, c);
    IrDType dt = ir_type_dtype(g, type);
    uint32_t rank = ir_type_rank(g, type);
    int64_t dims[IR_MAX_RANK];
    if (rank == IR_RANK_UNKNOWN || rank > IR_MAX_RANK) return IR_EINVAL;
    for (uint32_t d = 0; d < rank; d++)
        if (!ir_expr_is_const(g, ir_type_dims(g, type)[d], &dims[d])) return IR_EINVAL;
    int64_t numel = ir_shape_numel(rank, dims);
    if (dt != IR_DTYPE_STRING) {
        ir_tensor_view(t, dt, rank, dims, ir_const_data(g, c));
        return ir_tensor_nbytes(t) > ir_const_nbytes(g, c) ? IR_EINVAL : IR_OK;
    }
    const void *blob = ir_const_data(g, c);
    if (!ir_string_blob_valid(blob, ir_const_nbytes(g, c), (size_t)numel)) return IR_EINVAL;
    IrStringElem *el = malloc(((size_t)numel + 1) * sizeof *el);
    if (!el) return IR_ENOMEM;
    for (int64_t i = 0; i < numel; i++) el[i] = ir_string_blob_at(blob, (size_t)numel, (size_t)i);
    IrStatus s = ir_tensor_from_strings(t, rank, dims, el);
    free(el);
    return s;
}

IrConstId ir_tensor_to_const(IrGraph *g, IrTypeId type, const IrTensor *t) {
    if (t->dtype == IR_DTYPE_STRING)
        return ir_const_create_strings(g, type, t->data, (size_t)ir_tensor_numel(t));
    return ir_const_create(g, type, t->data, ir_tensor_nbytes(t));
}

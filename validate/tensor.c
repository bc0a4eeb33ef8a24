/* IrTensor: a dense row-major tensor that either owns its data (malloc'd, freed with the
 * tensor) or views memory it does not own (graph constants, mapped files). A tensor with zero
 * elements has data == NULL.
 */
#include "validate/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t ir_tensor_numel(const IrTensor *t) {
    int64_t n = 1;
    for (uint32_t i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
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
    if (src->dtype == IR_DTYPE_STRING) return ir_tensor_from_strings(dst, src->rank, src->dims, src->data);
    IrStatus s = ir_tensor_alloc(dst, src->dtype, src->rank, src->dims);
    if (s) return s;
    size_t n = ir_tensor_nbytes(src);
    if (n && src->data) memcpy(dst->data, src->data, n);
    return IR_OK;
}

void ir_tensor_free(IrTensor *t) {
    if (!t) return;
    if (t->owned) free(t->data);
    memset(t, 0, sizeof *t);
}

void ir_tensor_shape_str(const IrTensor *t, char *buf, size_t cap) {
    if (!cap) return;
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
    int64_t numel = 1;
    for (uint32_t d = 0; d < rank; d++) numel *= dims[d];
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

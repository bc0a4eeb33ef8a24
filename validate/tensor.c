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

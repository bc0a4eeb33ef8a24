/* Shape arithmetic on concrete shapes (rank, int64 dims): element counts, row-major strides,
 * axis normalisation, numpy broadcasting (shape, per-operand strides and offsets) and walking
 * multi-indices. The one copy for shape inference, the interpreter, the passes and the backends;
 * symbolic dims stay with shape inference, which calls these for its constant dims.
 * Header-only (static inline, libc only): the interpreter's per-element loops inline it, and
 * code that links nothing of ir/ (the runtime) may include it. Dims are >= 0 unless a name says.
 */
#ifndef IRTOOL_IR_SHAPE_H
#define IRTOOL_IR_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- counts and strides ------------------------------------------------------------------- */

/* Product of dims (1 for rank 0). For shapes already known to fit in int64 (allocated
 * tensors); use ir_shape_numel_checked on shapes from a file or a user. */
static inline int64_t ir_shape_numel(uint32_t rank, const int64_t *dims) {
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; i++) n *= dims[i];
    return n;
}

/* Product of dims into *out; false when a dim is negative or the product of the nonzero dims
 * overflows int64. A zero dim gives 0, but only once the other dims fit together, so every
 * partial product (strides, outer and inner counts) of an accepted shape fits too. */
static inline bool ir_shape_numel_checked(uint32_t rank, const int64_t *dims, int64_t *out) {
    int64_t n = 1;
    bool zero = false;
    for (uint32_t i = 0; i < rank; i++) {
        if (dims[i] < 0) return false;
        if (dims[i] == 0) zero = true;
        else if (__builtin_mul_overflow(n, dims[i], &n)) return false;
    }
    *out = zero ? 0 : n;
    return true;
}

/* Dense row-major strides in elements: strides[rank-1] = 1, strides[i] = strides[i+1] * dims[i+1]. */
static inline void ir_shape_strides(uint32_t rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (uint32_t i = rank; i-- > 0;) {
        strides[i] = s;
        s *= dims[i];
    }
}

/* The shape seen as [outer, len, inner] around axis (< rank): outer = product of the dims
 * before it, len = dims[axis] (len may be NULL), inner = product of the dims after it. */
static inline void ir_shape_split(uint32_t rank, const int64_t *dims, uint32_t axis, int64_t *outer,
                                  int64_t *len, int64_t *inner) {
    *outer = ir_shape_numel(axis, dims);
    if (len) *len = dims[axis];
    *inner = ir_shape_numel(rank - axis - 1, dims + axis + 1);
}

/* ---- axes --------------------------------------------------------------------------------- */

/* A negative axis counted from the end (axis + rank); others unchanged. For axes already checked. */
static inline int64_t ir_shape_axis(int64_t axis, uint32_t rank) { return axis < 0 ? axis + (int64_t)rank : axis; }

/* Normalises *axis in place; false (and *axis left as the sum) when the axis is outside
 * [-rank, rank). Callers that insert axes (Unsqueeze) pass the result rank. */
static inline bool ir_shape_axis_checked(int64_t *axis, uint32_t rank) {
    *axis = ir_shape_axis(*axis, rank);
    return *axis >= 0 && *axis < (int64_t)rank;
}

/* ---- multi-indices ------------------------------------------------------------------------ */

/* Row-major multi-index of flat element `flat`. A zero dim counts as 1, so this never divides
 * by zero; flat must be below the element count for the index to mean anything. */
static inline void ir_shape_unravel(int64_t flat, uint32_t rank, const int64_t *dims, int64_t *idx) {
    for (uint32_t i = rank; i-- > 0;) {
        int64_t d = dims[i] ? dims[i] : 1;
        idx[i] = flat % d;
        flat /= d;
    }
}

/* Steps idx to the next multi-index in row-major order (the last axis fastest); false when it
 * wrapped around to all zeros (the walk is over). */
static inline bool ir_shape_index_next(uint32_t rank, const int64_t *dims, int64_t *idx) {
    for (uint32_t i = rank; i-- > 0;) {
        if (++idx[i] < dims[i]) return true;
        idx[i] = 0;
    }
    return false;
}

/* ---- numpy broadcasting ------------------------------------------------------------------- */

/* Two sizes of one broadcast axis: equal, or one of them 1 (which gives way, so 1 and 0 give
 * 0). False when neither holds. */
static inline bool ir_shape_broadcast_dim(int64_t a, int64_t b, int64_t *out) {
    if (a == b || b == 1) *out = a;
    else if (a == 1) *out = b;
    else return false;
    return true;
}

/* Why shapes do not broadcast: operand `operand`'s axis `axis` has size `dim`, while the
 * earlier operand `other` set that output axis (`out_axis`) to `other_dim` on its axis
 * `other_axis`. Operands are numbered from 0 in the order given; axes are each operand's own. */
typedef struct IrShapeBroadcastError {
    uint32_t operand, axis;
    int64_t dim;
    uint32_t other, other_axis;
    int64_t other_dim;
    uint32_t out_axis;
} IrShapeBroadcastError;

/* The numpy broadcast of n shapes (ranks[k], dims[k]), aligned at the right: out_rank is the
 * largest rank and out_dims (room for it) the combined sizes. False when two sizes of one axis
 * differ and neither is 1; then *err (may be NULL) names both operands and axes. */
static inline bool ir_shape_broadcast(uint32_t n, const uint32_t *ranks, const int64_t *const *dims,
                                      uint32_t *out_rank, int64_t *out_dims, IrShapeBroadcastError *err) {
    uint32_t r = 0;
    for (uint32_t k = 0; k < n; k++)
        if (ranks[k] > r) r = ranks[k];
    for (uint32_t i = 0; i < r; i++) out_dims[i] = 1;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t lead = r - ranks[k];
        for (uint32_t j = 0; j < ranks[k]; j++) {
            int64_t *o = &out_dims[lead + j];
            if (ir_shape_broadcast_dim(*o, dims[k][j], o)) continue;
            if (err) {
                /* the first earlier operand with a size other than 1 on this axis set it */
                uint32_t m = 0;
                while (ranks[m] + j < ranks[k] || dims[m][ranks[m] + j - ranks[k]] == 1) m++;
                *err = (IrShapeBroadcastError){k, j, dims[k][j], m, ranks[m] + j - ranks[k], *o, lead + j};
            }
            return false;
        }
    }
    *out_rank = r;
    return true;
}

/* ir_shape_broadcast of two shapes. */
static inline bool ir_shape_broadcast2(uint32_t rank_a, const int64_t *dims_a, uint32_t rank_b,
                                       const int64_t *dims_b, uint32_t *out_rank, int64_t *out_dims,
                                       IrShapeBroadcastError *err) {
    const uint32_t ranks[2] = {rank_a, rank_b};
    const int64_t *const dims[2] = {dims_a, dims_b};
    return ir_shape_broadcast(2, ranks, dims, out_rank, out_dims, err);
}

/* "operand 1 axis 0 has size 4 where operand 0 axis 1 has size 3" into buf (snprintf's
 * return value). */
static inline int ir_shape_broadcast_message(const IrShapeBroadcastError *e, char *buf, size_t cap) {
    return snprintf(buf, cap, "operand %u axis %u has size %lld where operand %u axis %u has size %lld",
                    e->operand, e->axis, (long long)e->dim, e->other, e->other_axis, (long long)e->other_dim);
}

/* Strides (elements) of a dense operand (rank, dims) read as the broadcast output shape
 * (out_rank, out_dims): 0 on the output axes it lacks or has size 1 on, else its row-major
 * stride. False when it does not broadcast to that shape (an axis of another size that is not
 * 1, or more axes than the output whose extra sizes are not 1). out_dims may be NULL when
 * the caller knows the operand fits; only the rank is used then. */
static inline bool ir_shape_broadcast_strides(uint32_t rank, const int64_t *dims, uint32_t out_rank,
                                              const int64_t *out_dims, int64_t *strides) {
    for (uint32_t j = 0; j + out_rank < rank; j++)
        if (dims[j] != 1) return false;
    int64_t s = 1;
    for (uint32_t i = out_rank; i-- > 0;) {
        uint32_t back = out_rank - i; /* 1 for the last axis */
        int64_t d = back <= rank ? dims[rank - back] : 1;
        if (out_dims && d != 1 && d != out_dims[i]) return false;
        strides[i] = d == 1 ? 0 : s;
        s *= d;
    }
    return true;
}

/* Element offset in a dense operand (rank <= out_rank, dims) broadcast to an output of rank
 * out_rank, for the output multi-index idx. */
static inline int64_t ir_shape_broadcast_offset(uint32_t rank, const int64_t *dims, uint32_t out_rank,
                                                const int64_t *idx) {
    int64_t off = 0;
    uint32_t lead = out_rank - rank;
    for (uint32_t i = 0; i < rank; i++) off = off * dims[i] + (dims[i] == 1 ? 0 : idx[lead + i]);
    return off;
}

#endif

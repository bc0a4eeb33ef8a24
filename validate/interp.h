/* Internal interface between the interpreter core (validate/interp.c) and its kernels
 * (validate/k_*.c). Every op in ir/ops.def has exactly one kernel function named
 * interp_<ID> (e.g. interp_CONV); validate/kernels.c expands the op table into the dispatch
 * table, so a missing kernel is a link error. An op the interpreter does not support yet still
 * has its function, which reports a clear error naming the op (interp_unsupported).
 */
#ifndef IRTOOL_INTERP_H
#define IRTOOL_INTERP_H

#include "ir/shape.h"
#include "validate/validate.h"

#include <string.h>

typedef struct InterpCtx InterpCtx;

/* A kernel call: inputs[i] is NULL for an absent optional operand. The kernel fills
 * outputs[0..n_out) (each zero-initialized by the caller) with owned tensors, using
 * interp_alloc_output. Absent optional results (ir_node_result == 0) may be left empty. */
typedef struct KernelArgs {
    InterpCtx *ctx;
    const IrGraph *g;
    IrNodeId node;
    const IrTensor *const *in;
    uint32_t n_in;
    IrTensor *out;
    uint32_t n_out;
} KernelArgs;

typedef IrStatus (*InterpKernel)(KernelArgs *a);

#define IR_OP(id, name, cls, min_in, max_in, min_out, max_out, regions, attrs, infer)          \
    IrStatus interp_##id(KernelArgs *a);
#include "ir/ops.def"
#undef IR_OP

/* String helpers (k_string.c) used by the generic Cast/CastLike and Equal kernels. */
IrStatus interp_cast_strings(KernelArgs *a, const IrTensor *x, IrDType to);
IrStatus interp_equal_strings(KernelArgs *a);

/* Reports an error located at the kernel's node ("Conv: ..."); returns IR_EVERIFY for data
 * errors (bad shapes, values out of range). */
IrStatus interp_error(KernelArgs *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reports that the op (or this configuration of it) is not supported; returns IR_EUNSUPPORTED. */
IrStatus interp_unsupported(KernelArgs *a, const char *what);

IrStatus interp_alloc_output(KernelArgs *a, uint32_t i, IrDType dt, uint32_t rank,
                             const int64_t *dims) IR_MUST_CHECK;

/* Attributes with the op table's defaults. */
int64_t interp_attr_int(KernelArgs *a, const char *name);
double interp_attr_float(KernelArgs *a, const char *name);
const char *interp_attr_string(KernelArgs *a, const char *name); /* NULL if absent */
/* INTS attribute: returns count (-1 if absent); copies up to cap values. */
int interp_attr_ints(KernelArgs *a, const char *name, int64_t *vals, int cap);

/* Geometry of a sliding-window op (Conv, ConvTranspose, pools) over 1-3 spatial axes. */
typedef struct InterpWindow {
    int64_t N, C, M, G; /* batch, input channels; output channels and groups (conv only) */
    uint32_t r;         /* spatial rank 1..3 */
    int64_t in[3], k[3], out[3], s[3], d[3], pb[3], pe[3];
} InterpWindow;
/* With r, in[] and k[] set: reads strides, dilations, pads and auto_pad, computes out[] (floor
 * or ceil mode), then pads every array to 3 spatial axes (leading axes of size 1) so kernels
 * loop over 3-D windows only. */
IrStatus interp_window_finish(KernelArgs *a, InterpWindow *g, bool ceil_mode);
/* Pads the arrays of a window with r spatial axes to 3 (leading axes of size 1). */
void interp_window_pad3(InterpWindow *g);
int interp_attr_floats(KernelArgs *a, const char *name, double *vals, int cap);
bool interp_attr_tensor(KernelArgs *a, const char *name, IrTensor *view); /* a view; not owned */
bool interp_has_attr(KernelArgs *a, const char *name);

/* Runs region r of the kernel's node with the given argument tensors; results (owned) go to
 * outs (ir_region_num_outputs entries). Values from enclosing scopes are visible. */
IrStatus interp_run_region(KernelArgs *a, IrRegionId r, const IrTensor *args, uint32_t n_args,
                           IrTensor *outs) IR_MUST_CHECK;

/* The numpy broadcast shape of ins[0..n) into rank/dims (room for IR_MAX_RANK); on a mismatch
 * reports which axes of which inputs clash (and their shapes) and returns IR_EVERIFY. The rest
 * of the shape arithmetic (strides, offsets, axes) is ir/shape.h's. */
IrStatus interp_broadcast(KernelArgs *a, const IrTensor *const *ins, uint32_t n, uint32_t *rank,
                          int64_t *dims) IR_MUST_CHECK;
/* Reads element i of any tensor as double / int64 (exact for every dtype we have). */
static inline double interp_get_f(const IrTensor *t, int64_t i) { return ir_elem_get_f64(t->dtype, t->data, (size_t)i); }
static inline int64_t interp_get_i(const IrTensor *t, int64_t i) { return ir_elem_get_i64(t->dtype, t->data, (size_t)i); }
static inline void interp_set_f(IrTensor *t, int64_t i, double v) { ir_elem_set_f64(t->dtype, t->data, (size_t)i, v); }
static inline void interp_set_i(IrTensor *t, int64_t i, int64_t v) { ir_elem_set_i64(t->dtype, t->data, (size_t)i, v); }

#endif

/* Control flow and region kernels: If, Loop, Scan (ONNX opset 9+ form), irtool.fused and
 * irtool.shape_guard.
 *
 * Regions run through interp_run_region; their results come back owned and are moved into the
 * node's results (or into the next iteration's arguments, then freed). Scan outputs of every
 * iteration are kept until the loop ends and then stacked along their axis.
 */
#include "validate/interp.h"

#include <stdlib.h>

static IrStatus oom(KernelArgs *a) {
    interp_error(a, "out of memory");
    return IR_ENOMEM;
}

static void free_all(IrTensor *t, size_t n) {
    for (size_t i = 0; i < n; i++) ir_tensor_free(&t[i]);
}

/* Moves a region result into node result i. */
static void take(KernelArgs *a, uint32_t i, IrTensor *t) {
    ir_tensor_free(&a->out[i]);
    a->out[i] = *t;
    memset(t, 0, sizeof *t);
}

static bool truthy(const IrTensor *t) {
    return t && ir_tensor_numel(t) > 0 && interp_get_i(t, 0) != 0;
}

/* Stacks `count` tensors of equal shape along a new axis `axis` (reversed order if `rev`) into
 * node result `oi`. With no parts, the shape comes from the result's declared type. */
static IrStatus stack_into(KernelArgs *a, uint32_t oi, IrTensor *const *parts, int64_t count, int64_t axis, bool rev) {
    int64_t dims[IR_MAX_RANK];
    if (count == 0) {
        IrValueId v = ir_node_result(a->g, a->node, oi);
        IrTypeId t = v ? ir_value_type(a->g, v) : 0;
        uint32_t rank = ir_type_rank(a->g, t);
        IrDType dt = ir_type_dtype(a->g, t);
        if (dt == IR_DTYPE_NONE) dt = IR_DTYPE_F32;
        if (rank == IR_RANK_UNKNOWN || rank == 0) {
            dims[0] = 0;
            return interp_alloc_output(a, oi, dt, 1, dims);
        }
        const IrExprId *d = ir_type_dims(a->g, t);
        for (uint32_t i = 0; i < rank; i++)
            if (!ir_expr_is_const(a->g, d[i], &dims[i])) dims[i] = 0;
        if (axis < 0 || axis >= (int64_t)rank) axis = 0;
        dims[axis] = 0;
        return interp_alloc_output(a, oi, dt, rank, dims);
    }
    const IrTensor *p0 = parts[0];
    if (p0->rank + 1 > IR_MAX_RANK) return interp_error(a, "scan output rank too large");
    if (!ir_shape_axis_checked(&axis, p0->rank + 1)) return interp_error(a, "scan output axis out of range");
    for (int64_t k = 1; k < count; k++) {
        const IrTensor *p = parts[k];
        if (p->dtype != p0->dtype || p->rank != p0->rank || memcmp(p->dims, p0->dims, p0->rank * sizeof(int64_t)) != 0)
            return interp_error(a, "scan output %u changes shape between iterations", oi);
    }
    uint32_t r = 0;
    for (uint32_t i = 0; i <= p0->rank; i++) {
        if ((int64_t)i == axis) dims[r++] = count;
        if (i < p0->rank) dims[r++] = p0->dims[i];
    }
    IrStatus st = interp_alloc_output(a, oi, p0->dtype, r, dims);
    if (st) return st;
    size_t es = ir_dtype_size(p0->dtype);
    int64_t outer = ir_shape_numel((uint32_t)axis, p0->dims), inner = ir_shape_numel(p0->rank - (uint32_t)axis, p0->dims + axis);
    size_t chunk = (size_t)inner * es;
    char *dst = a->out[oi].data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < count; k++) {
            const IrTensor *p = parts[rev ? count - 1 - k : k];
            if (chunk) memcpy(dst + ((size_t)o * (size_t)count + (size_t)k) * chunk, (const char *)p->data + (size_t)o * chunk, chunk);
        }
    /* string elements point into the parts, which the caller frees next: copy the bytes now */
    return ir_tensor_own_strings(&a->out[oi]);
}

/* ---- If ------------------------------------------------------------------------------------- */

IrStatus interp_IF(KernelArgs *a) {
    if (!a->in[0] || ir_tensor_numel(a->in[0]) != 1) return interp_error(a, "condition must be a single bool");
    IrRegionId r = ir_node_region_at(a->g, a->node, truthy(a->in[0]) ? 0 : 1);
    uint32_t n = ir_region_num_outputs(a->g, r);
    if (n != a->n_out) return interp_error(a, "branch returns %u values, the node has %u results", n, a->n_out);
    IrTensor *outs = calloc(n ? n : 1, sizeof *outs);
    if (!outs) return oom(a);
    IrStatus st = interp_run_region(a, r, NULL, 0, outs);
    if (!st)
        for (uint32_t i = 0; i < n; i++) take(a, i, &outs[i]);
    free_all(outs, n);
    free(outs);
    return st;
}

/* ---- Loop ----------------------------------------------------------------------------------- */

/* A growable list of tensors (scan outputs per iteration). */
typedef struct TList {
    IrTensor **v;
    int64_t n, cap;
} TList;

static bool tlist_push(TList *l, IrTensor *t) {
    if (l->n == l->cap) {
        int64_t nc = l->cap ? l->cap * 2 : 16;
        IrTensor **nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) return false;
        l->v = nv, l->cap = nc;
    }
    IrTensor *c = malloc(sizeof *c);
    if (!c) return false;
    *c = *t;
    memset(t, 0, sizeof *t);
    l->v[l->n++] = c;
    return true;
}

static void tlist_free(TList *l) {
    for (int64_t i = 0; i < l->n; i++) {
        ir_tensor_free(l->v[i]);
        free(l->v[i]);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

IrStatus interp_LOOP(KernelArgs *a) {
    const IrTensor *M = a->in[0], *C = a->n_in > 1 ? a->in[1] : NULL;
    if (M && ir_tensor_numel(M) != 1) return interp_error(a, "trip count must be a scalar");
    if (C && ir_tensor_numel(C) != 1) return interp_error(a, "condition must be a scalar");
    if (!M && !C) return interp_error(a, "a Loop with neither trip count nor condition never ends");
    IrRegionId body = ir_node_region_at(a->g, a->node, 0);
    uint32_t nc = a->n_in - 2; /* loop-carried values */
    uint32_t nout = ir_region_num_outputs(a->g, body);
    if (ir_region_num_args(a->g, body) != nc + 2) return interp_error(a, "body takes %u arguments, expected %u", ir_region_num_args(a->g, body), nc + 2);
    if (nout < nc + 1 || a->n_out != nout - 1) return interp_error(a, "body returns %u values; expected 1 + %u carried + scan outputs matching %u results", nout, nc, a->n_out);
    uint32_t ns = nout - 1 - nc;
    int64_t trip = M ? interp_get_i(M, 0) : INT64_MAX;
    bool cond = C ? truthy(C) : true;
    IrTensor *args = calloc(nc + 2, sizeof *args), *outs = calloc(nout, sizeof *outs);
    TList *scans = calloc(ns ? ns : 1, sizeof *scans);
    if (!args || !outs || !scans) {
        free(args), free(outs), free(scans);
        return oom(a);
    }
    IrStatus st = IR_OK;
    int64_t zero = 0;
    if (ir_tensor_alloc(&args[0], IR_DTYPE_I64, 0, &zero) || ir_tensor_alloc(&args[1], IR_DTYPE_BOOL, 0, &zero)) st = oom(a);
    for (uint32_t i = 0; i < nc && !st; i++)
        if (ir_tensor_copy(&args[2 + i], a->in[2 + i])) st = oom(a);
    for (int64_t it = 0; !st && it < trip && cond; it++) {
        ((int64_t *)args[0].data)[0] = it;
        ((uint8_t *)args[1].data)[0] = 1;
        if ((st = interp_run_region(a, body, args, nc + 2, outs))) break;
        if (C) cond = truthy(&outs[0]); /* without a condition input the body's is ignored */
        ir_tensor_free(&outs[0]);
        for (uint32_t i = 0; i < nc; i++) {
            ir_tensor_free(&args[2 + i]);
            args[2 + i] = outs[1 + i];
            memset(&outs[1 + i], 0, sizeof outs[1 + i]);
        }
        for (uint32_t i = 0; i < ns && !st; i++)
            if (!tlist_push(&scans[i], &outs[1 + nc + i])) st = oom(a);
        free_all(outs, nout);
    }
    for (uint32_t i = 0; i < nc && !st; i++) take(a, i, &args[2 + i]);
    for (uint32_t i = 0; i < ns && !st; i++) st = stack_into(a, nc + i, scans[i].v, scans[i].n, 0, false);
    for (uint32_t i = 0; i < ns; i++) tlist_free(&scans[i]);
    free_all(args, nc + 2);
    free_all(outs, nout);
    free(args), free(outs), free(scans);
    return st;
}

/* ---- Scan ----------------------------------------------------------------------------------- */

/* Copies slice t of X along axis into *out (a new tensor without that axis). */
static bool slice_axis(const IrTensor *X, int64_t axis, int64_t t, IrTensor *out) {
    int64_t dims[IR_MAX_RANK];
    uint32_t r = 0;
    for (uint32_t i = 0; i < X->rank; i++)
        if ((int64_t)i != axis) dims[r++] = X->dims[i];
    if (ir_tensor_alloc(out, X->dtype, r, dims)) return false;
    size_t es = ir_dtype_size(X->dtype);
    int64_t outer, inner, len;
    ir_shape_split(X->rank, X->dims, (uint32_t)axis, &outer, &len, &inner);
    size_t chunk = (size_t)inner * es;
    for (int64_t o = 0; o < outer; o++)
        if (chunk) memcpy((char *)out->data + (size_t)o * chunk, (const char *)X->data + ((size_t)o * (size_t)len + (size_t)t) * chunk, chunk);
    return true;
}

IrStatus interp_SCAN(KernelArgs *a) {
    int64_t nsi = interp_attr_int(a, "num_scan_inputs");
    if (nsi < 1 || nsi > (int64_t)a->n_in) return interp_error(a, "num_scan_inputs %lld out of range", (long long)nsi);
    uint32_t nst = a->n_in - (uint32_t)nsi; /* state variables */
    IrRegionId body = ir_node_region_at(a->g, a->node, 0);
    uint32_t nout = ir_region_num_outputs(a->g, body);
    if (ir_region_num_args(a->g, body) != a->n_in) return interp_error(a, "body takes %u arguments, expected %u", ir_region_num_args(a->g, body), a->n_in);
    if (nout < nst || nout != a->n_out) return interp_error(a, "body returns %u values; the node has %u results", nout, a->n_out);
    uint32_t nso = nout - nst;
    int64_t in_axes[IR_MAX_RANK * 4], in_dirs[IR_MAX_RANK * 4], out_axes[IR_MAX_RANK * 4], out_dirs[IR_MAX_RANK * 4];
    int cap = IR_MAX_RANK * 4;
    if (nsi > cap || nso > (uint32_t)cap) return interp_unsupported(a, "more than 64 scan inputs or outputs");
    for (int i = 0; i < cap; i++) in_axes[i] = in_dirs[i] = out_axes[i] = out_dirs[i] = 0;
    interp_attr_ints(a, "scan_input_axes", in_axes, cap);
    interp_attr_ints(a, "scan_input_directions", in_dirs, cap);
    interp_attr_ints(a, "scan_output_axes", out_axes, cap);
    interp_attr_ints(a, "scan_output_directions", out_dirs, cap);
    int64_t len = -1;
    for (int64_t i = 0; i < nsi; i++) {
        const IrTensor *X = a->in[nst + i];
        if (!X) return interp_error(a, "scan input %lld is missing", (long long)i);
        if (in_axes[i] < 0) in_axes[i] += X->rank;
        if (in_axes[i] < 0 || in_axes[i] >= (int64_t)X->rank) return interp_error(a, "scan input axis out of range");
        int64_t l = X->dims[in_axes[i]];
        if (len >= 0 && l != len) return interp_error(a, "scan inputs have different lengths (%lld vs %lld)", (long long)len, (long long)l);
        len = l;
    }
    IrTensor *args = calloc(a->n_in, sizeof *args), *outs = calloc(nout ? nout : 1, sizeof *outs);
    TList *scans = calloc(nso ? nso : 1, sizeof *scans);
    if (!args || !outs || !scans) {
        free(args), free(outs), free(scans);
        return oom(a);
    }
    IrStatus st = IR_OK;
    for (uint32_t i = 0; i < nst && !st; i++)
        if (ir_tensor_copy(&args[i], a->in[i])) st = oom(a);
    for (int64_t t = 0; !st && t < len; t++) {
        for (int64_t i = 0; i < nsi && !st; i++) {
            const IrTensor *X = a->in[nst + i];
            ir_tensor_free(&args[nst + i]);
            if (!slice_axis(X, in_axes[i], in_dirs[i] ? len - 1 - t : t, &args[nst + i])) st = oom(a);
        }
        if (st || (st = interp_run_region(a, body, args, a->n_in, outs))) break;
        for (uint32_t i = 0; i < nst; i++) {
            ir_tensor_free(&args[i]);
            args[i] = outs[i];
            memset(&outs[i], 0, sizeof outs[i]);
        }
        for (uint32_t i = 0; i < nso && !st; i++)
            if (!tlist_push(&scans[i], &outs[nst + i])) st = oom(a);
        free_all(outs, nout);
    }
    for (uint32_t i = 0; i < nst && !st; i++) take(a, i, &args[i]);
    for (uint32_t i = 0; i < nso && !st; i++) st = stack_into(a, nst + i, scans[i].v, scans[i].n, out_axes[i], out_dirs[i] != 0);
    for (uint32_t i = 0; i < nso; i++) tlist_free(&scans[i]);
    free_all(args, a->n_in);
    free_all(outs, nout);
    free(args), free(outs), free(scans);
    return st;
}

/* ---- irtool.fused and irtool.shape_guard ------------------------------------------------------ */

/* A fused group runs its body with the node's operands as arguments; the body's results are the
 * node's results. */
IrStatus interp_FUSED(KernelArgs *a) {
    IrRegionId body = ir_node_region_at(a->g, a->node, 0);
    uint32_t nout = ir_region_num_outputs(a->g, body);
    if (ir_region_num_args(a->g, body) != a->n_in) return interp_error(a, "body takes %u arguments, the node has %u operands", ir_region_num_args(a->g, body), a->n_in);
    if (nout != a->n_out) return interp_error(a, "body returns %u values, the node has %u results", nout, a->n_out);
    IrTensor *args = calloc(a->n_in ? a->n_in : 1, sizeof *args), *outs = calloc(nout ? nout : 1, sizeof *outs);
    if (!args || !outs) {
        free(args), free(outs);
        return oom(a);
    }
    for (uint32_t i = 0; i < a->n_in; i++)
        if (a->in[i]) ir_tensor_view(&args[i], a->in[i]->dtype, a->in[i]->rank, a->in[i]->dims, a->in[i]->data);
    IrStatus st = interp_run_region(a, body, args, a->n_in, outs);
    if (!st)
        for (uint32_t i = 0; i < nout; i++) take(a, i, &outs[i]);
    free_all(outs, nout);
    free(args), free(outs);
    return st;
}

/* Shape guards are checked when inputs are bound (symbolic dims against the graph's
 * constraints), so evaluating the node itself has nothing left to do. */
IrStatus interp_SHAPE_GUARD(KernelArgs *a) {
    (void)a;
    return IR_OK;
}

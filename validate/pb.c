/* ONNX TensorProto files (.pb), as stored in ONNX test folders (input_0.pb, output_0.pb).
 *
 * Data comes from raw_data (little-endian, fixed width) or from the typed field the ONNX spec
 * assigns to the dtype: int32_data carries every narrow type as bit patterns (f16/bf16 as
 * uint16, FP8 as uint8, bool/int8/uint8/int16/uint16 as values), uint64_data carries uint32 and
 * uint64, string_data the strings. Counts are checked against the shape; complex and external
 * data are rejected with a clear message.
 */
#include "validate/validate.h"

#include "onnx.pb-c.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static IrStatus pb_err(IrDiag *diag, const char *name, IrStatus s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static IrStatus pb_err(IrDiag *diag, const char *name, IrStatus s, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ir_diag_report(diag, IR_SEV_ERROR, name, 0, 0, NULL, 0, "%s", msg);
    return s;
}

static IrStatus count_check(IrDiag *diag, const char *path, const char *field, size_t have, int64_t numel) {
    if ((int64_t)have == numel) return IR_OK;
    return pb_err(diag, path, IR_ESYNTAX, "TensorProto has %zu values in %s, its shape needs %lld", have, field,
                  (long long)numel);
}

/* Fills t (allocated) from the typed fields. */
static IrStatus fill_typed(const Onnx__TensorProto *tp, IrTensor *t, const char *path, IrDiag *diag) {
    int64_t n = ir_tensor_numel(t);
    IrStatus s;
    switch (t->dtype) {
    case IR_DTYPE_F32:
        if ((s = count_check(diag, path, "float_data", tp->n_float_data, n))) return s;
        if (n) memcpy(t->data, tp->float_data, (size_t)n * 4);
        return IR_OK;
    case IR_DTYPE_F64:
        if ((s = count_check(diag, path, "double_data", tp->n_double_data, n))) return s;
        if (n) memcpy(t->data, tp->double_data, (size_t)n * 8);
        return IR_OK;
    case IR_DTYPE_I64:
        if ((s = count_check(diag, path, "int64_data", tp->n_int64_data, n))) return s;
        if (n) memcpy(t->data, tp->int64_data, (size_t)n * 8);
        return IR_OK;
    case IR_DTYPE_U32:
    case IR_DTYPE_U64:
        if ((s = count_check(diag, path, "uint64_data", tp->n_uint64_data, n))) return s;
        for (int64_t i = 0; i < n; i++) {
            if (t->dtype == IR_DTYPE_U32) ((uint32_t *)t->data)[i] = (uint32_t)tp->uint64_data[i];
            else ((uint64_t *)t->data)[i] = tp->uint64_data[i];
        }
        return IR_OK;
    default:
        break;
    }
    /* everything else travels in int32_data */
    if ((s = count_check(diag, path, "int32_data", tp->n_int32_data, n))) return s;
    for (int64_t i = 0; i < n; i++) {
        int32_t v = tp->int32_data[i];
        switch (t->dtype) {
        case IR_DTYPE_F16:
        case IR_DTYPE_BF16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
        case IR_DTYPE_F8E4M3FN:
        case IR_DTYPE_F8E5M2: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
        case IR_DTYPE_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
        default: ir_elem_set_i64(t->dtype, t->data, (size_t)i, v); break;
        }
    }
    return IR_OK;
}

/* Strings travel in string_data, one bytes entry per element. */
static IrStatus strings_from_pb(const Onnx__TensorProto *tp, const int64_t *dims, const char *path, IrDiag *diag,
                                IrTensor *out) {
    if (tp->has_raw_data) return pb_err(diag, path, IR_ESYNTAX, "string TensorProto with raw_data");
    int64_t n = 1;
    for (size_t i = 0; i < tp->n_dims; i++)
        if (__builtin_mul_overflow(n, dims[i], &n)) return pb_err(diag, path, IR_ESYNTAX, "TensorProto too large");
    IrStatus s = count_check(diag, path, "string_data", tp->n_string_data, n);
    if (s) return s;
    IrStringElem *el = malloc(((size_t)n + 1) * sizeof *el);
    if (!el) return pb_err(diag, path, IR_ENOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) el[i] = (IrStringElem){(const char *)tp->string_data[i].data, tp->string_data[i].len};
    s = ir_tensor_from_strings(out, (uint32_t)tp->n_dims, dims, el);
    free(el);
    return s ? pb_err(diag, path, s, "TensorProto too large to allocate") : IR_OK;
}

static IrStatus convert(const Onnx__TensorProto *tp, const char *path, IrDiag *diag, IrTensor *out) {
    int code = tp->has_data_type ? tp->data_type : 0;
    if (code == ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64 || code == ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128)
        return pb_err(diag, path, IR_EUNSUPPORTED, "complex tensors are not supported");
    IrDType dt = ir_dtype_from_onnx(code);
    if (dt == IR_DTYPE_NONE)
        return pb_err(diag, path, IR_EUNSUPPORTED, "unsupported TensorProto data_type %d", code);
    if ((tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
        tp->n_external_data)
        return pb_err(diag, path, IR_EUNSUPPORTED, "TensorProto with external data is not supported here");
    if (tp->n_dims > IR_MAX_RANK)
        return pb_err(diag, path, IR_EUNSUPPORTED, "TensorProto rank %zu exceeds %d", tp->n_dims, IR_MAX_RANK);
    if (tp->segment) return pb_err(diag, path, IR_EUNSUPPORTED, "segmented TensorProto is not supported");
    int64_t dims[IR_MAX_RANK];
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0)
            return pb_err(diag, path, IR_ESYNTAX, "TensorProto dim %zu is negative (%lld)", i, (long long)tp->dims[i]);
        dims[i] = tp->dims[i];
    }
    if (dt == IR_DTYPE_STRING) return strings_from_pb(tp, dims, path, diag, out);
    IrStatus s = ir_tensor_alloc(out, dt, (uint32_t)tp->n_dims, dims);
    if (s) return pb_err(diag, path, s, "TensorProto too large to allocate");
    if (tp->has_raw_data) {
        size_t need = ir_tensor_nbytes(out);
        if (tp->raw_data.len != need) {
            ir_tensor_free(out);
            return pb_err(diag, path, IR_ESYNTAX, "TensorProto raw_data has %zu bytes, %s[%zu dims] needs %zu",
                          tp->raw_data.len, ir_dtype_name(dt), tp->n_dims, need);
        }
        if (need) memcpy(out->data, tp->raw_data.data, need);
        return IR_OK;
    }
    s = fill_typed(tp, out, path, diag);
    if (s) ir_tensor_free(out);
    return s;
}

IrStatus ir_pb_tensor_read(const char *path, IrDiag *diag, IrTensor *out, char **name) {
    memset(out, 0, sizeof *out);
    if (name) *name = NULL;
    char *data;
    size_t len;
    IrStatus s = ir_read_file(path, diag, &data, &len);
    if (s) return s;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, (const uint8_t *)data);
    free(data);
    if (!tp) return pb_err(diag, path, IR_ESYNTAX, "not a valid ONNX TensorProto");
    s = convert(tp, path, diag, out);
    if (!s && name && tp->name && *tp->name) {
        *name = strdup(tp->name);
        if (!*name) {
            ir_tensor_free(out);
            s = pb_err(diag, path, IR_ENOMEM, "out of memory");
        }
    }
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return s;
}

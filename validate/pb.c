/* ONNX TensorProto files (.pb), as stored in ONNX test folders (input_0.pb, output_0.pb).
 *
 * Data comes from raw_data (little-endian, fixed width) or from the typed field the ONNX spec
 * assigns to the dtype: int32_data carries every narrow type as bit patterns (f16/bf16 as
 * uint16, FP8 as uint8, bool/int8/uint8/int16/uint16 as values), uint64_data carries uint32 and
 * uint64, string_data the strings. Counts are checked against the shape; complex and external
 * data are rejected with a clear message. SequenceProto and OptionalProto files (the test data
 * of sequence and optional inputs and outputs) are read from the wire, their tensors as above.
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

/* ---- SequenceProto / OptionalProto ---------------------------------------------------------- */
/* onnx-data.proto is not compiled in: its two messages are read straight from the wire
 * (fields: 1 name, 2 elem_type, 3 tensor(s), 4 sparse, 5 sequence(s), 6 map(s), 7 optional(s)),
 * and each TensorProto inside goes through protobuf-c and convert() above. */

enum { PB_ELEM_TENSOR = 1, PB_ELEM_SEQUENCE = 3 };

typedef struct Wire {
    const uint8_t *p, *end;
} Wire;

static bool wire_varint(Wire *w, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; w->p < w->end && shift < 64; shift += 7) {
        uint8_t b = *w->p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* Next field: number, wire type, and for length-delimited ones the payload. */
static bool wire_field(Wire *w, uint32_t *field, uint32_t *wt, uint64_t *ival, const uint8_t **pay, size_t *len) {
    uint64_t key;
    if (!wire_varint(w, &key)) return false;
    *field = (uint32_t)(key >> 3);
    *wt = (uint32_t)(key & 7);
    switch (*wt) {
    case 0: return wire_varint(w, ival);
    case 1:
        if (w->end - w->p < 8) return false;
        w->p += 8;
        return true;
    case 5:
        if (w->end - w->p < 4) return false;
        w->p += 4;
        return true;
    case 2: {
        uint64_t n;
        if (!wire_varint(w, &n) || n > (uint64_t)(w->end - w->p)) return false;
        *pay = w->p;
        *len = (size_t)n;
        w->p += n;
        return true;
    }
    default: return false;
    }
}

static IrStatus tensor_from_wire(const uint8_t *p, size_t n, const char *path, IrDiag *diag, IrTensor *out) {
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, n, p);
    if (!tp) return pb_err(diag, path, IR_ESYNTAX, "not a valid ONNX TensorProto inside the sequence/optional");
    IrStatus s = convert(tp, path, diag, out);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return s;
}

static IrStatus seq_from_wire(const uint8_t *p, size_t n, const char *path, IrDiag *diag, IrTensor *out);

static IrStatus opt_from_wire(const uint8_t *p, size_t n, const char *path, IrDiag *diag, IrTensor *out) {
    Wire w = {p, p + n};
    uint64_t elem = 0;
    const uint8_t *val = NULL;
    size_t val_len = 0;
    uint32_t val_field = 0;
    while (w.p < w.end) {
        uint32_t f, wt;
        uint64_t iv = 0;
        const uint8_t *pay = NULL;
        size_t len = 0;
        if (!wire_field(&w, &f, &wt, &iv, &pay, &len)) return pb_err(diag, path, IR_ESYNTAX, "not a valid ONNX OptionalProto");
        if (f == 2 && wt == 0) elem = iv;
        else if (f >= 3 && f <= 7 && wt == 2) val = pay, val_len = len, val_field = f;
    }
    ir_tensor_opt_init(out, IR_DTYPE_NONE);
    if (!val) return IR_OK; /* empty */
    if (val_field != 3 && val_field != 5)
        return pb_err(diag, path, IR_EUNSUPPORTED, "OptionalProto holding a %s is not supported",
                      val_field == 4 ? "sparse tensor" : val_field == 6 ? "map" : "optional");
    if ((elem == PB_ELEM_TENSOR && val_field != 3) || (elem == PB_ELEM_SEQUENCE && val_field != 5))
        return pb_err(diag, path, IR_ESYNTAX, "OptionalProto elem_type %llu does not match its value", (unsigned long long)elem);
    IrTensor item;
    IrStatus s = val_field == 3 ? tensor_from_wire(val, val_len, path, diag, &item)
                                : seq_from_wire(val, val_len, path, diag, &item);
    if (s) return s;
    out->dtype = item.dtype;
    if (ir_tensor_seq_insert(out, 0, &item)) {
        ir_tensor_free(&item);
        return pb_err(diag, path, IR_ENOMEM, "out of memory");
    }
    return IR_OK;
}

static IrStatus seq_from_wire(const uint8_t *p, size_t n, const char *path, IrDiag *diag, IrTensor *out) {
    Wire w = {p, p + n};
    ir_tensor_seq_init(out, IR_DTYPE_NONE);
    while (w.p < w.end) {
        uint32_t f, wt;
        uint64_t iv = 0;
        const uint8_t *pay = NULL;
        size_t len = 0;
        if (!wire_field(&w, &f, &wt, &iv, &pay, &len)) {
            ir_tensor_free(out);
            return pb_err(diag, path, IR_ESYNTAX, "not a valid ONNX SequenceProto");
        }
        if (f == 2 && wt == 0 && iv != PB_ELEM_TENSOR && iv != 0) {
            ir_tensor_free(out);
            return pb_err(diag, path, IR_EUNSUPPORTED, "SequenceProto elem_type %llu: only sequences of tensors are supported",
                          (unsigned long long)iv);
        }
        if (f >= 4 && f <= 7 && wt == 2) {
            ir_tensor_free(out);
            return pb_err(diag, path, IR_EUNSUPPORTED, "SequenceProto holding non-tensor values is not supported");
        }
        if (f != 3 || wt != 2) continue;
        IrTensor item;
        IrStatus s = tensor_from_wire(pay, len, path, diag, &item);
        if (!s && out->dtype != IR_DTYPE_NONE && item.dtype != out->dtype) {
            s = pb_err(diag, path, IR_ESYNTAX, "SequenceProto mixes %s and %s tensors", ir_dtype_name(out->dtype),
                       ir_dtype_name(item.dtype));
            ir_tensor_free(&item);
        }
        if (!s && ir_tensor_seq_insert(out, out->n_items, &item)) {
            ir_tensor_free(&item);
            s = pb_err(diag, path, IR_ENOMEM, "out of memory");
        }
        if (s) {
            ir_tensor_free(out);
            return s;
        }
        out->dtype = out->items[out->n_items - 1].dtype;
    }
    return IR_OK;
}

IrStatus ir_pb_value_read(const char *path, IrTypeKind form, IrDiag *diag, IrTensor *out) {
    memset(out, 0, sizeof *out);
    if (form == IR_TYPE_TENSOR) return ir_pb_tensor_read(path, diag, out, NULL);
    char *data;
    size_t len;
    IrStatus s = ir_read_file(path, diag, &data, &len);
    if (s) return s;
    s = form == IR_TYPE_SEQ ? seq_from_wire((const uint8_t *)data, len, path, diag, out)
                            : opt_from_wire((const uint8_t *)data, len, path, diag, out);
    free(data);
    return s;
}

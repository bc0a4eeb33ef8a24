/* Element types: names, sizes, ONNX codes and exact software conversions.
 *
 * f16 and bf16 round to nearest even. FP8 (E4M3FN, E5M2) follows the OCP 8-bit floating point
 * specification: round to nearest even, NaN kept (E4M3FN has no infinity), and with
 * `saturate` values beyond the largest finite one (and infinities) clamp to it (448, 57344).
 * The FP8 rounding works on the double's bits exactly as the CUDA toolkit's host conversion
 * does, so results are bit-identical to it.
 */
#include "ir_internal.h"

#include <math.h>

static const struct {
    const char *name;
    uint8_t size;
    uint8_t onnx;
} dtypes[IR_DTYPE_COUNT] = {
    [IR_DTYPE_NONE] = {"?", 0, 0},
#define X(e, nm, sz, ox) [IR_DTYPE_##e] = {nm, sz, ox},
    IR_DTYPE_LIST(X)
#undef X
};

const char *ir_dtype_name(IrDType t) {
    return t > IR_DTYPE_NONE && t < IR_DTYPE_COUNT ? dtypes[t].name : "?";
}

IrDType ir_dtype_from_name(const char *s, size_t n) {
    for (int t = 1; t < IR_DTYPE_COUNT; t++)
        if (strlen(dtypes[t].name) == n && memcmp(dtypes[t].name, s, n) == 0) return (IrDType)t;
    return IR_DTYPE_NONE;
}

size_t ir_dtype_size(IrDType t) { return t > IR_DTYPE_NONE && t < IR_DTYPE_COUNT ? dtypes[t].size : 0; }
int ir_dtype_onnx(IrDType t) { return t > IR_DTYPE_NONE && t < IR_DTYPE_COUNT ? dtypes[t].onnx : 0; }

IrDType ir_dtype_from_onnx(int code) {
    for (int t = 1; t < IR_DTYPE_COUNT; t++)
        if (dtypes[t].onnx == code) return (IrDType)t;
    return IR_DTYPE_NONE;
}

bool ir_dtype_is_float(IrDType t) {
    return t == IR_DTYPE_F64 || t == IR_DTYPE_F32 || t == IR_DTYPE_F16 || t == IR_DTYPE_BF16 ||
           t == IR_DTYPE_F8E4M3FN || t == IR_DTYPE_F8E5M2;
}
bool ir_dtype_is_signed(IrDType t) {
    return t == IR_DTYPE_I64 || t == IR_DTYPE_I32 || t == IR_DTYPE_I16 || t == IR_DTYPE_I8;
}
bool ir_dtype_is_int(IrDType t) {
    return ir_dtype_is_signed(t) || t == IR_DTYPE_U64 || t == IR_DTYPE_U32 ||
           t == IR_DTYPE_U16 || t == IR_DTYPE_U8;
}

/* ---- f16 / bf16 ---------------------------------------------------------------------------- */

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float ir_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    if (exp == 0x1F) return u2f(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return u2f(sign);
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t ir_f32_to_f16(float f) {
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00 | ((ax >> 13) & 0x3FF)); /* NaN */
    if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00); /* overflow (>= 65520) -> inf */
    if (ax < 0x38800000u) {
        /* subnormal or zero: value / 2^-24, rounded to nearest even */
        if (ax < 0x33000000u) return sign; /* < 2^-25 rounds to zero */
        uint32_t e = ax >> 23, m = (ax & 0x7FFFFF) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 + ... */
        uint32_t res = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (res & 1))) res++;
        return (uint16_t)(sign | res);
    }
    uint32_t res = ((ax >> 13) - (112u << 10));
    uint32_t rem = ax & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (res & 1))) res++;
    return (uint16_t)(sign | res);
}

float ir_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t ir_f32_to_bf16(float f) {
    uint32_t x = f2u(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    uint32_t lsb = (x >> 16) & 1;
    x += 0x7FFF + lsb;
    return (uint16_t)(x >> 16);
}

/* ---- FP8 ----------------------------------------------------------------------------------- */

typedef IrFp8Format Fp8Fmt;

static const Fp8Fmt E4M3 = {7, 4, 0x7, 0x3F50000000000000ull, 0x407D000000000000ull,
                            0x3F90000000000000ull, 0x7E, true};
static const Fp8Fmt E5M2 = {15, 3, 0x3, 0x3EE0000000000000ull, 0x40EE000000000000ull - 1,
                            0x3F10000000000000ull, 0x7B, false};

const IrFp8Format *ir_fp8_format(IrDType dt) {
    return dt == IR_DTYPE_F8E4M3FN ? &E4M3 : dt == IR_DTYPE_F8E5M2 ? &E5M2 : NULL;
}

static uint8_t fp8_from_double(double x, bool saturate, const Fp8Fmt *F) {
    uint64_t xb;
    memcpy(&xb, &x, 8);
    const uint64_t half_ulp = 1ull << (53 - F->sig_bits - 1);
    uint8_t sign = (uint8_t)((xb >> 63) << 7);
    uint8_t exp = (uint8_t)((((xb >> 52) & 0x7FF)) - 1023 + F->bias);
    uint8_t man = (uint8_t)((xb >> (53 - F->sig_bits)) & F->man_mask);
    uint64_t ax = xb & 0x7FFFFFFFFFFFFFFFull;
    uint8_t res;
    if (ax <= F->mindenorm_o2) {
        res = 0;
    } else if (ax > 0x7FF0000000000000ull) {
        res = F->e4m3 ? 0x7F : (uint8_t)(0x7E | man);
    } else if (ax > F->overflow) {
        res = saturate ? F->maxnorm : (F->e4m3 ? 0x7F : 0x7C);
    } else if (ax >= F->minnorm) {
        res = (uint8_t)((exp << (F->sig_bits - 1)) | man);
        uint64_t round = xb & ((half_ulp << 1) - 1);
        if (round > half_ulp || (round == half_ulp && (man & 1))) res++;
    } else {
        uint8_t shift = (uint8_t)(1 - exp);
        man |= (uint8_t)(1u << (F->sig_bits - 1));
        res = (uint8_t)(man >> shift);
        uint64_t round = (xb | (1ull << 52)) & ((half_ulp << (shift + 1)) - 1);
        if (round > (half_ulp << shift) || (round == (half_ulp << shift) && (res & 1))) res++;
    }
    return (uint8_t)(res | sign);
}

static uint8_t fp8_from_float(float f, bool saturate, const Fp8Fmt *F) {
    uint32_t x = f2u(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) x = 0x7FFFFFFFu; /* canonical NaN */
    return fp8_from_double((double)u2f(x), saturate, F);
}

uint8_t ir_f32_to_f8e4m3fn(float f, bool saturate) { return fp8_from_float(f, saturate, &E4M3); }
uint8_t ir_f32_to_f8e5m2(float f, bool saturate) { return fp8_from_float(f, saturate, &E5M2); }

float ir_f8e4m3fn_to_f32(uint8_t v) {
    float s = (v & 0x80) ? -1.0f : 1.0f;
    unsigned e = (v >> 3) & 0xF, m = v & 0x7;
    if (e == 0xF && m == 0x7) return NAN;
    if (e == 0) return s * ldexpf((float)m, -9); /* m/8 * 2^-6 */
    return s * ldexpf(1.0f + (float)m / 8.0f, (int)e - 7);
}

float ir_f8e5m2_to_f32(uint8_t v) {
    /* E5M2 is the top byte of an f16 */
    return ir_f16_to_f32((uint16_t)(v << 8));
}

/* ---- element access ------------------------------------------------------------------------ */

double ir_elem_get_f64(IrDType t, const void *data, size_t i) {
    switch (t) {
    case IR_DTYPE_F64: return ((const double *)data)[i];
    case IR_DTYPE_F32: return ((const float *)data)[i];
    case IR_DTYPE_F16: return ir_f16_to_f32(((const uint16_t *)data)[i]);
    case IR_DTYPE_BF16: return ir_bf16_to_f32(((const uint16_t *)data)[i]);
    case IR_DTYPE_F8E4M3FN: return ir_f8e4m3fn_to_f32(((const uint8_t *)data)[i]);
    case IR_DTYPE_F8E5M2: return ir_f8e5m2_to_f32(((const uint8_t *)data)[i]);
    case IR_DTYPE_I64: return (double)((const int64_t *)data)[i];
    case IR_DTYPE_I32: return ((const int32_t *)data)[i];
    case IR_DTYPE_I16: return ((const int16_t *)data)[i];
    case IR_DTYPE_I8: return ((const int8_t *)data)[i];
    case IR_DTYPE_U64: return (double)((const uint64_t *)data)[i];
    case IR_DTYPE_U32: return ((const uint32_t *)data)[i];
    case IR_DTYPE_U16: return ((const uint16_t *)data)[i];
    case IR_DTYPE_U8: return ((const uint8_t *)data)[i];
    case IR_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    default: return 0;
    }
}

int64_t ir_elem_get_i64(IrDType t, const void *data, size_t i) {
    switch (t) {
    case IR_DTYPE_I64: return ((const int64_t *)data)[i];
    case IR_DTYPE_I32: return ((const int32_t *)data)[i];
    case IR_DTYPE_I16: return ((const int16_t *)data)[i];
    case IR_DTYPE_I8: return ((const int8_t *)data)[i];
    case IR_DTYPE_U64: return (int64_t)((const uint64_t *)data)[i];
    case IR_DTYPE_U32: return ((const uint32_t *)data)[i];
    case IR_DTYPE_U16: return ((const uint16_t *)data)[i];
    case IR_DTYPE_U8: return ((const uint8_t *)data)[i];
    case IR_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    case IR_DTYPE_STRING: return 0;
    default: {
        double d = ir_elem_get_f64(t, data, i);
        if (!(d == d)) return 0;
        if (d >= 9.2233720368547758e18) return INT64_MAX;
        if (d <= -9.2233720368547758e18) return INT64_MIN;
        return (int64_t)d;
    }
    }
}

void ir_elem_set_f64(IrDType t, void *data, size_t i, double v) {
    switch (t) {
    case IR_DTYPE_F64: ((double *)data)[i] = v; return;
    case IR_DTYPE_F32: ((float *)data)[i] = (float)v; return;
    case IR_DTYPE_F16: ((uint16_t *)data)[i] = ir_f32_to_f16((float)v); return;
    case IR_DTYPE_BF16: ((uint16_t *)data)[i] = ir_f32_to_bf16((float)v); return;
    case IR_DTYPE_F8E4M3FN: ((uint8_t *)data)[i] = fp8_from_double(v, true, &E4M3); return;
    case IR_DTYPE_F8E5M2: ((uint8_t *)data)[i] = fp8_from_double(v, true, &E5M2); return;
    case IR_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; return;
    case IR_DTYPE_STRING: return; /* not a number: the verifier keeps strings from math */
    default: {
        int64_t x;
        if (!(v == v))
            x = 0;
        else if (v >= 9.2233720368547758e18)
            x = INT64_MAX;
        else if (v <= -9.2233720368547758e18)
            x = INT64_MIN;
        else
            x = (int64_t)v;
        ir_elem_set_i64(t, data, i, x);
        return;
    }
    }
}

void ir_elem_set_i64(IrDType t, void *data, size_t i, int64_t v) {
    switch (t) {
    case IR_DTYPE_I64: ((int64_t *)data)[i] = v; return;
    case IR_DTYPE_I32: ((int32_t *)data)[i] = (int32_t)v; return;
    case IR_DTYPE_I16: ((int16_t *)data)[i] = (int16_t)v; return;
    case IR_DTYPE_I8: ((int8_t *)data)[i] = (int8_t)v; return;
    case IR_DTYPE_U64: ((uint64_t *)data)[i] = (uint64_t)v; return;
    case IR_DTYPE_U32: ((uint32_t *)data)[i] = (uint32_t)v; return;
    case IR_DTYPE_U16: ((uint16_t *)data)[i] = (uint16_t)v; return;
    case IR_DTYPE_U8: ((uint8_t *)data)[i] = (uint8_t)v; return;
    case IR_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; return;
    case IR_DTYPE_STRING: return;
    default: ir_elem_set_f64(t, data, i, (double)v); return;
    }
}

/* ---- string blobs (constant data of dtype string) ------------------------------------------ */

/* IR_DTYPE_LIST gives string elements 16 bytes: one {pointer, size_t} pair on 64-bit hosts. */
_Static_assert(sizeof(IrStringElem) == 16, "IrStringElem must match its size in IR_DTYPE_LIST");

static uint64_t blob_off(const void *data, size_t i) {
    const unsigned char *p = (const unsigned char *)data + i * 8;
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = v << 8 | p[k];
    return v;
}

size_t ir_string_blob_size(const IrStringElem *elems, size_t n) {
    size_t total = (n + 1) * 8;
    for (size_t i = 0; i < n; i++) total += elems[i].len;
    return total;
}

void ir_string_blob_write(const IrStringElem *elems, size_t n, void *dst) {
    unsigned char *hdr = dst, *bytes = hdr + (n + 1) * 8;
    uint64_t off = 0;
    for (size_t i = 0; i <= n; i++) {
        for (int k = 0; k < 8; k++) hdr[i * 8 + (size_t)k] = (unsigned char)(off >> (8 * k));
        if (i < n) {
            if (elems[i].len) memcpy(bytes + off, elems[i].data, elems[i].len);
            off += elems[i].len;
        }
    }
}

bool ir_string_blob_valid(const void *data, size_t nbytes, size_t n) {
    if (n >= SIZE_MAX / 8 - 1 || nbytes < (n + 1) * 8 || !data) return false;
    size_t room = nbytes - (n + 1) * 8;
    uint64_t prev = 0;
    if (blob_off(data, 0) != 0) return false;
    for (size_t i = 1; i <= n; i++) {
        uint64_t o = blob_off(data, i);
        if (o < prev || o > room) return false;
        prev = o;
    }
    return prev == room;
}

IrStringElem ir_string_blob_at(const void *data, size_t n, size_t i) {
    uint64_t a = blob_off(data, i), b = blob_off(data, i + 1);
    const char *bytes = (const char *)data + (n + 1) * 8;
    return (IrStringElem){b > a ? bytes + a : NULL, (size_t)(b - a)};
}

bool ir__const_size_ok(IrDType dt, int64_t numel, const void *data, size_t nbytes) {
    if (numel < 0) return false;
    if (dt != IR_DTYPE_STRING) return (uint64_t)numel * ir_dtype_size(dt) == nbytes;
    if ((uint64_t)numel >= SIZE_MAX / 8 - 1) return false;
    if (!data) return nbytes >= ((size_t)numel + 1) * 8;
    return ir_string_blob_valid(data, nbytes, (size_t)numel);
}

bool ir_dtype_quant_range(IrDType dt, double *lo, double *hi) {
    switch (dt) {
    case IR_DTYPE_U8: *lo = 0, *hi = 255; return true;
    case IR_DTYPE_I8: *lo = -128, *hi = 127; return true;
    case IR_DTYPE_U16: *lo = 0, *hi = 65535; return true;
    case IR_DTYPE_I16: *lo = -32768, *hi = 32767; return true;
    case IR_DTYPE_I32: *lo = -2147483648.0, *hi = 2147483647.0; return true;
    case IR_DTYPE_U32: *lo = 0, *hi = 4294967295.0; return true;
    default: return false;
    }
}

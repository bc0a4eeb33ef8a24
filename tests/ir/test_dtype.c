/* Element types: names, sizes, ONNX codes and the exact software float conversions (f16,
 * bf16 round to nearest even; FP8 E4M3FN and E5M2 per the OCP 8-bit FP spec). The FP8
 * reference values are computed here from the spec's formulas, independently of ir/dtype.c.
 */
#include "testutil.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

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

/* ---- names, sizes, codes ---------------------------------------------------------------------- */

Test(dtype, names_sizes_and_onnx_codes_round_trip) {
    static const struct {
        IrDType t;
        const char *name;
        size_t size;
        int onnx;
    } expect[] = {
        {IR_DTYPE_F64, "f64", 8, 11},      {IR_DTYPE_F32, "f32", 4, 1},     {IR_DTYPE_F16, "f16", 2, 10},
        {IR_DTYPE_BF16, "bf16", 2, 16},    {IR_DTYPE_F8E4M3FN, "f8e4m3fn", 1, 17},
        {IR_DTYPE_F8E5M2, "f8e5m2", 1, 19}, {IR_DTYPE_I64, "i64", 8, 7},     {IR_DTYPE_I32, "i32", 4, 6},
        {IR_DTYPE_I16, "i16", 2, 5},       {IR_DTYPE_I8, "i8", 1, 3},       {IR_DTYPE_U64, "u64", 8, 13},
        {IR_DTYPE_U32, "u32", 4, 12},      {IR_DTYPE_U16, "u16", 2, 4},     {IR_DTYPE_U8, "u8", 1, 2},
        {IR_DTYPE_BOOL, "bool", 1, 9},     {IR_DTYPE_STRING, "string", sizeof(IrStringElem), 8},
    };
    cr_assert_eq(sizeof expect / sizeof expect[0], (size_t)IR_DTYPE_COUNT - 1, "every dtype is listed");
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        IrDType t = expect[i].t;
        cr_assert_str_eq(ir_dtype_name(t), expect[i].name);
        cr_assert_eq(ir_dtype_from_name(expect[i].name, strlen(expect[i].name)), t, "%s", expect[i].name);
        cr_assert_eq(ir_dtype_size(t), expect[i].size, "%s", expect[i].name);
        cr_assert_eq(ir_dtype_onnx(t), expect[i].onnx, "%s", expect[i].name);
        cr_assert_eq(ir_dtype_from_onnx(expect[i].onnx), t, "%s", expect[i].name);
    }
    cr_assert_str_eq(ir_dtype_name(IR_DTYPE_NONE), "?");
    cr_assert_str_eq(ir_dtype_name((IrDType)200), "?");
    cr_assert_eq(ir_dtype_size(IR_DTYPE_NONE), 0);
    cr_assert_eq(ir_dtype_from_name("f3", 2), IR_DTYPE_NONE);
    cr_assert_eq(ir_dtype_from_name("f32x", 4), IR_DTYPE_NONE);
    cr_assert_eq(ir_dtype_from_name("f32x", 3), IR_DTYPE_F32, "length-bounded lookup");
    cr_assert_eq(ir_dtype_from_onnx(0), IR_DTYPE_NONE);
    cr_assert_eq(ir_dtype_from_onnx(18), IR_DTYPE_NONE, "ONNX FLOAT8E4M3FNUZ is unsupported");
}

Test(dtype, classification) {
    for (int t = 1; t < IR_DTYPE_COUNT; t++) {
        bool f = ir_dtype_is_float((IrDType)t), i = ir_dtype_is_int((IrDType)t);
        cr_assert(!(f && i), "%s cannot be both", ir_dtype_name((IrDType)t));
        if (t == IR_DTYPE_BOOL || t == IR_DTYPE_STRING) cr_assert(!f && !i, "bool and string are neither float nor int");
        else cr_assert(f || i, "%s", ir_dtype_name((IrDType)t));
    }
    cr_assert(ir_dtype_is_float(IR_DTYPE_F8E5M2));
    cr_assert(ir_dtype_is_signed(IR_DTYPE_I8));
    cr_assert(!ir_dtype_is_signed(IR_DTYPE_U8));
    cr_assert(ir_dtype_is_int(IR_DTYPE_U64));
    cr_assert(!ir_dtype_is_signed(IR_DTYPE_F32));
}

/* ---- f16 ---------------------------------------------------------------------------------------- */

/* Reference decode straight from the IEEE binary16 definition. */
static double f16_ref(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

Test(dtype, f16_exhaustive_decode_and_round_trip) {
    for (uint32_t c = 0; c < 65536; c++) {
        uint16_t h = (uint16_t)c;
        float f = ir_f16_to_f32(h);
        double ref = f16_ref(h);
        bool nan = ((h >> 10) & 31) == 31 && (h & 1023);
        if (nan) {
            cr_assert(isnan(f), "code 0x%04x decodes to NaN", h);
            cr_assert_eq(!!signbit(f), h >> 15, "NaN sign kept for 0x%04x", h);
            uint16_t back = ir_f32_to_f16(f);
            /* payload kept, quiet bit set: the only canonicalization allowed */
            cr_assert_eq(back, (uint16_t)(h | 0x0200), "NaN 0x%04x -> 0x%04x", h, back);
            continue;
        }
        cr_assert_eq((double)f, ref, "code 0x%04x: %a vs %a", h, (double)f, ref);
        cr_assert_eq(!!signbit(f), h >> 15, "sign of 0x%04x", h);
        cr_assert_eq(ir_f32_to_f16(f), h, "0x%04x does not round trip", h);
    }
}

Test(dtype, f16_round_to_nearest_even) {
    /* between 1 (0x3C00) and the next f16 (1 + 2^-10): the midpoint ties to even (1) */
    cr_assert_eq(ir_f32_to_f16(1.0f + 0x1p-11f), 0x3C00);
    cr_assert_eq(ir_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01, "above the midpoint rounds up");
    /* midpoint between 0x3C01 and 0x3C02 ties to the even 0x3C02 */
    cr_assert_eq(ir_f32_to_f16(1.0f + 0x1p-10f + 0x1p-11f), 0x3C02);
    /* every midpoint of every finite positive code, exhaustively */
    for (uint32_t c = 0; c < 0x7BFF; c++) {
        double lo = f16_ref((uint16_t)c), hi = f16_ref((uint16_t)(c + 1));
        float mid = (float)((lo + hi) / 2); /* exact in f32 */
        cr_assert_eq((double)mid, (lo + hi) / 2);
        uint16_t want = (c & 1) ? (uint16_t)(c + 1) : (uint16_t)c;
        cr_assert_eq(ir_f32_to_f16(mid), want, "midpoint after 0x%04x", c);
        cr_assert_eq(ir_f32_to_f16(-mid), (uint16_t)(want | 0x8000));
        cr_assert_eq(ir_f32_to_f16(nextafterf(mid, 0)), (uint16_t)c);
        cr_assert_eq(ir_f32_to_f16(nextafterf(mid, INFINITY)), (uint16_t)(c + 1));
    }
    /* overflow: 65504 is max; the midpoint to 65536 (= 65520) rounds to inf */
    cr_assert_eq(ir_f32_to_f16(65504.0f), 0x7BFF);
    cr_assert_eq(ir_f32_to_f16(65519.996f), 0x7BFF);
    cr_assert_eq(ir_f32_to_f16(65520.0f), 0x7C00);
    cr_assert_eq(ir_f32_to_f16(1e10f), 0x7C00);
    cr_assert_eq(ir_f32_to_f16(-INFINITY), 0xFC00);
    /* underflow: half the smallest subnormal ties to zero, a bit more rounds up */
    cr_assert_eq(ir_f32_to_f16(0x1p-25f), 0x0000);
    cr_assert_eq(ir_f32_to_f16(0x1.000002p-25f), 0x0001);
    cr_assert_eq(ir_f32_to_f16(-0x1p-30f), 0x8000);
    cr_assert_eq(ir_f32_to_f16(0x1.8p-24f), 0x0002, "1.5 subnormal ulps tie to even 2");
}

/* ---- bf16 --------------------------------------------------------------------------------------- */

Test(dtype, bf16_exhaustive_and_rne) {
    for (uint32_t c = 0; c < 65536; c++) {
        uint16_t h = (uint16_t)c;
        float f = ir_bf16_to_f32(h);
        cr_assert_eq(f2u(f), (uint32_t)h << 16, "bf16 is the top half of f32");
        if (isnan(f))
            cr_assert_eq(ir_f32_to_bf16(f), (uint16_t)(h | 0x40), "NaN 0x%04x quieted", h);
        else
            cr_assert_eq(ir_f32_to_bf16(f), h, "0x%04x", h);
    }
    cr_assert_eq(ir_f32_to_bf16(u2f(0x3F808000u)), 0x3F80, "tie to even (down)");
    cr_assert_eq(ir_f32_to_bf16(u2f(0x3F818000u)), 0x3F82, "tie to even (up)");
    cr_assert_eq(ir_f32_to_bf16(u2f(0x3F808001u)), 0x3F81, "above midpoint");
    cr_assert_eq(ir_f32_to_bf16(u2f(0x7F7FFFFFu)), 0x7F80, "max f32 rounds to inf");
    uint16_t n = ir_f32_to_bf16(u2f(0x7F800001u));
    cr_assert(isnan(ir_bf16_to_f32(n)), "a NaN with only low payload bits stays NaN (0x%04x)", n);
}

/* ---- FP8 ---------------------------------------------------------------------------------------- */

/* OCP E4M3FN: bias 7, no infinities, S.1111.111 is NaN. */
static double e4m3_ref(uint8_t v) {
    int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
    double r = e == 15 && m == 7 ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return s ? -r : r;
}
/* OCP E5M2: bias 15, IEEE-like with infinities and NaNs. */
static double e5m2_ref(uint8_t v) {
    int s = v >> 7, e = (v >> 2) & 31, m = v & 3;
    double r = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -16) : ldexp(4 + m, e - 17);
    return s ? -r : r;
}

Test(dtype, e4m3fn_all_codes_decode_and_round_trip) {
    int nans = 0;
    for (int c = 0; c < 256; c++) {
        float f = ir_f8e4m3fn_to_f32((uint8_t)c);
        double ref = e4m3_ref((uint8_t)c);
        if (isnan(ref)) {
            nans++;
            cr_assert(isnan(f), "0x%02x is NaN", c);
            cr_assert(isnan(ir_f8e4m3fn_to_f32(ir_f32_to_f8e4m3fn(f, false))));
            continue;
        }
        cr_assert_eq((double)f, ref, "0x%02x: %g vs %g", c, (double)f, ref);
        cr_assert_eq(ir_f32_to_f8e4m3fn(f, false), c, "0x%02x round trips (no saturate)", c);
        cr_assert_eq(ir_f32_to_f8e4m3fn(f, true), c, "0x%02x round trips (saturate)", c);
    }
    cr_assert_eq(nans, 2, "only 0x7F and 0xFF are NaN");
    cr_assert(isnan(ir_f8e4m3fn_to_f32(0x7F)));
    cr_assert(isnan(ir_f8e4m3fn_to_f32(0xFF)));
    cr_assert_eq(ir_f8e4m3fn_to_f32(0x7E), 448.0f);
    cr_assert_eq(ir_f8e4m3fn_to_f32(0xFE), -448.0f);
    cr_assert_eq(ir_f8e4m3fn_to_f32(0x78), 256.0f, "S.1111.000 is finite in E4M3FN");
    cr_assert_eq(ir_f8e4m3fn_to_f32(0x01), 0x1p-9f, "smallest subnormal is 2^-9");
    cr_assert_eq(ir_f8e4m3fn_to_f32(0x07), 7 * 0x1p-9f);
    cr_assert_eq(ir_f8e4m3fn_to_f32(0x08), 0x1p-6f, "smallest normal is 2^-6");
    cr_assert(signbit(ir_f8e4m3fn_to_f32(0x80)) && ir_f8e4m3fn_to_f32(0x80) == 0.0f, "0x80 is -0");
    for (int m = 0; m < 8; m++)
        cr_assert_eq(ir_f8e4m3fn_to_f32((uint8_t)m), (float)m * 0x1p-9f, "subnormals are 2^-9 multiples");
}

Test(dtype, e4m3fn_saturation_and_nan) {
    cr_assert_eq(ir_f32_to_f8e4m3fn(449.0f, false), 0x7E, "449 rounds to 448");
    cr_assert_eq(ir_f32_to_f8e4m3fn(449.0f, true), 0x7E);
    cr_assert_eq(ir_f32_to_f8e4m3fn(464.0f, false), 0x7E, "464 is the 448/480 midpoint: ties to even");
    cr_assert_eq(ir_f32_to_f8e4m3fn(464.5f, false), 0x7F, "beyond the midpoint without saturate: NaN");
    cr_assert_eq(ir_f32_to_f8e4m3fn(1e9f, true), 0x7E, "1e9 saturates to 448");
    cr_assert_eq(ir_f32_to_f8e4m3fn(-1e9f, true), 0xFE);
    cr_assert_eq(ir_f32_to_f8e4m3fn(1e9f, false) & 0x7F, 0x7F, "1e9 without saturate is NaN");
    cr_assert_eq(ir_f32_to_f8e4m3fn(INFINITY, true), 0x7E, "inf saturates");
    cr_assert_eq(ir_f32_to_f8e4m3fn(INFINITY, false), 0x7F, "inf without saturate is NaN");
    cr_assert_eq(ir_f32_to_f8e4m3fn(NAN, true) & 0x7F, 0x7F, "NaN stays NaN even when saturating");
    cr_assert_eq(ir_f32_to_f8e4m3fn(-NAN, false) & 0x7F, 0x7F, "-NaN is NaN (sign may be canonicalized)");
    cr_assert_eq(ir_f32_to_f8e4m3fn(0x1p-10f, false), 0x00, "half the min subnormal ties to 0");
    cr_assert_eq(ir_f32_to_f8e4m3fn(0x1.01p-10f, false), 0x01);
    cr_assert_eq(ir_f32_to_f8e4m3fn(-0.0f, false), 0x80);
}

Test(dtype, e5m2_all_codes_decode_and_round_trip) {
    int nans = 0;
    for (int c = 0; c < 256; c++) {
        float f = ir_f8e5m2_to_f32((uint8_t)c);
        double ref = e5m2_ref((uint8_t)c);
        if (isnan(ref)) {
            nans++;
            cr_assert(isnan(f), "0x%02x is NaN", c);
            uint8_t back = ir_f32_to_f8e5m2(f, false);
            cr_assert(((back >> 2) & 31) == 31 && (back & 3), "NaN 0x%02x stays NaN (0x%02x)", c, back);
            continue;
        }
        cr_assert_eq((double)f, ref, "0x%02x: %g vs %g", c, (double)f, ref);
        cr_assert_eq(ir_f32_to_f8e5m2(f, false), c, "0x%02x round trips", c);
    }
    cr_assert_eq(nans, 6);
    cr_assert_eq(ir_f8e5m2_to_f32(0x7B), 57344.0f, "max finite");
    cr_assert(isinf(ir_f8e5m2_to_f32(0x7C)) && ir_f8e5m2_to_f32(0x7C) > 0, "0x7C is +inf");
    cr_assert(isinf(ir_f8e5m2_to_f32(0xFC)) && ir_f8e5m2_to_f32(0xFC) < 0, "0xFC is -inf");
    cr_assert(isnan(ir_f8e5m2_to_f32(0x7D)) && isnan(ir_f8e5m2_to_f32(0x7E)) && isnan(ir_f8e5m2_to_f32(0x7F)));
    cr_assert_eq(ir_f8e5m2_to_f32(0x01), 0x1p-16f, "smallest subnormal");
    cr_assert_eq(ir_f8e5m2_to_f32(0x04), 0x1p-14f, "smallest normal");
}

Test(dtype, e5m2_saturation_and_overflow) {
    cr_assert_eq(ir_f32_to_f8e5m2(57344.0f, false), 0x7B);
    cr_assert_eq(ir_f32_to_f8e5m2(60000.0f, false), 0x7B, "below the 57344/65536 midpoint");
    cr_assert_eq(ir_f32_to_f8e5m2(61440.0f, false), 0x7C, "midpoint ties to even = inf");
    cr_assert_eq(ir_f32_to_f8e5m2(1e9f, false), 0x7C, "overflow without saturate is inf");
    cr_assert_eq(ir_f32_to_f8e5m2(-1e9f, false), 0xFC);
    cr_assert_eq(ir_f32_to_f8e5m2(1e9f, true), 0x7B, "saturate clamps to 57344");
    cr_assert_eq(ir_f32_to_f8e5m2(INFINITY, true), 0x7B);
    cr_assert_eq(ir_f32_to_f8e5m2(INFINITY, false), 0x7C);
    cr_assert_eq(ir_f32_to_f8e5m2(-INFINITY, true), 0xFB);
    uint8_t n = ir_f32_to_f8e5m2(NAN, true);
    cr_assert(((n >> 2) & 31) == 31 && (n & 3), "NaN kept when saturating (0x%02x)", n);
}

/* Midpoints between consecutive finite codes round to the even code, for both formats. */
static void check_midpoints(double (*ref)(uint8_t), uint8_t (*enc)(float, bool), uint8_t max_code) {
    for (int c = 0; c < max_code; c++) {
        double lo = ref((uint8_t)c), hi = ref((uint8_t)(c + 1));
        float mid = (float)((lo + hi) / 2);
        cr_assert_eq((double)mid, (lo + hi) / 2, "midpoint is exact in f32");
        uint8_t want = (c & 1) ? (uint8_t)(c + 1) : (uint8_t)c;
        cr_assert_eq(enc(mid, false), want, "midpoint 0x%02x/0x%02x -> 0x%02x, got 0x%02x", c, c + 1, want,
                     enc(mid, false));
        cr_assert_eq(enc(-mid, false), (uint8_t)(want | 0x80));
        cr_assert_eq(enc(nextafterf(mid, 0), false), c, "just below midpoint after 0x%02x", c);
        cr_assert_eq(enc(nextafterf(mid, INFINITY), false), c + 1, "just above midpoint after 0x%02x", c);
    }
}

Test(dtype, fp8_ties_to_even_at_every_midpoint) {
    check_midpoints(e4m3_ref, ir_f32_to_f8e4m3fn, 0x7E);
    check_midpoints(e5m2_ref, ir_f32_to_f8e5m2, 0x7B);
    /* a couple spelled out: 1.0 = 0x38, next 1.125 = 0x39; 1.0625 ties to 0x38 */
    cr_assert_eq(ir_f32_to_f8e4m3fn(1.0625f, false), 0x38);
    cr_assert_eq(ir_f32_to_f8e4m3fn(1.1875f, false), 0x3A, "1.1875 between 0x39 and 0x3A ties to even 0x3A");
    cr_assert_eq(ir_f32_to_f8e5m2(1.125f, false), 0x3C, "e5m2: 1.0=0x3C, 1.25=0x3D, midpoint to even");
}

/* ---- element access ----------------------------------------------------------------------------- */

Test(dtype, element_get_set) {
    unsigned char buf[64];
    for (int t = 1; t < IR_DTYPE_COUNT; t++) {
        if (t == IR_DTYPE_STRING) continue; /* not numbers: test_strings.c */
        memset(buf, 0, sizeof buf);
        double two = t == IR_DTYPE_BOOL ? 1.0 : 2.0;
        ir_elem_set_f64((IrDType)t, buf, 3, 2.0);
        cr_assert_eq(ir_elem_get_f64((IrDType)t, buf, 3), two, "%s", ir_dtype_name((IrDType)t));
        cr_assert_eq(ir_elem_get_i64((IrDType)t, buf, 3), (int64_t)two, "%s", ir_dtype_name((IrDType)t));
        cr_assert_eq(ir_elem_get_f64((IrDType)t, buf, 2), 0.0, "neighbour untouched");
        ir_elem_set_i64((IrDType)t, buf, 1, 1);
        cr_assert_eq(ir_elem_get_i64((IrDType)t, buf, 1), 1);
    }
    ir_elem_set_f64(IR_DTYPE_I32, buf, 0, -2.9);
    cr_assert_eq(ir_elem_get_i64(IR_DTYPE_I32, buf, 0), -2, "ints truncate toward zero");
    ir_elem_set_f64(IR_DTYPE_F8E4M3FN, buf, 0, 1e6);
    cr_assert_eq(buf[0], 0x7E, "element stores saturate FP8");
    ir_elem_set_f64(IR_DTYPE_F16, buf, 0, 0.1);
    cr_assert_eq(((uint16_t *)buf)[0], 0x2E66);
    ir_elem_set_i64(IR_DTYPE_U64, buf, 0, -1);
    cr_assert_eq(((uint64_t *)buf)[0], UINT64_MAX);
    ir_elem_set_f64(IR_DTYPE_BOOL, buf, 0, 0.5);
    cr_assert_eq(buf[0], 1);
    ir_elem_set_f64(IR_DTYPE_I64, buf, 0, NAN);
    cr_assert_eq(ir_elem_get_i64(IR_DTYPE_I64, buf, 0), 0, "NaN stores as 0 in ints");
}

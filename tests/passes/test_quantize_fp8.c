/* FP8 conversions and the quantize-fp8 pass.
 *
 * Conversions: all 256 codes of E4M3FN and E5M2 decoded against a decoder written here from
 * the OCP 8-bit FP spec, decode -> encode identity, spot values; then edge cases (every code,
 * every midpoint between neighbours, one f32 ulp either side, the overflow boundary, zeros,
 * infinities, NaNs) and 10 million more f32 values per format checked, in both saturate modes,
 * against a straightforward reference (nearest code by exhaustive table search, ties to the
 * even code, overflow past the largest finite value) that shares no code with ir/dtype.c.
 * Pass: corpus/mlp.ir and the shared torch models (when present and importable) keep cosine
 * similarity >= 0.99 with >= 70% fewer weight bytes; a constructed layer with a huge weight
 * outlier is kept in f32 by `budget`; Gemm attribute variants; option errors; text round trip.
 */
#include "passes/passes.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- the reference ------------------------------------------------------------------------- */

typedef struct RefFmt {
    const char *name;
    bool e4m3;
    int n_finite;       /* codes 0 .. n_finite-1 are finite (non-negative) */
    double mag[129];    /* mag[n_finite] is the first value past the largest (virtual code) */
    uint8_t max_code, overflow_code; /* overflow without saturation: NaN (e4m3fn) or inf (e5m2) */
} RefFmt;

/* Straight from the spec: E4M3FN bias 7, no infinities, S.1111.111 is NaN; E5M2 bias 15, IEEE-like. */
static double ref_decode(bool e4m3, uint8_t v) {
    int s = v >> 7;
    int e = e4m3 ? (v >> 3) & 0xF : (v >> 2) & 0x1F;
    int m = e4m3 ? v & 0x7 : v & 0x3;
    int mb = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
    double mag;
    if (e4m3 && e == 15 && m == 7) return NAN;
    if (!e4m3 && e == 31) return m ? NAN : (s ? -INFINITY : INFINITY);
    if (e == 0) mag = ldexp((double)m, 1 - bias - mb);
    else mag = ldexp(1.0 + (double)m / (1 << mb), e - bias);
    return s ? -mag : mag;
}

static void ref_init(RefFmt *f, bool e4m3) {
    f->name = e4m3 ? "e4m3fn" : "e5m2";
    f->e4m3 = e4m3;
    f->n_finite = e4m3 ? 0x7F : 0x7C;
    for (int c = 0; c < f->n_finite; c++) f->mag[c] = ref_decode(e4m3, (uint8_t)c);
    /* the code after the largest, as if the exponent range went on */
    f->mag[f->n_finite] = e4m3 ? 480.0 : 65536.0;
    f->max_code = (uint8_t)(f->n_finite - 1);
    f->overflow_code = e4m3 ? 0x7F : 0x7C;
}

static uint8_t ref_encode(const RefFmt *f, float x, bool sat) {
    if (isnan(x)) return 0x7F;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    double a = fabs((double)x);
    int code;
    if (a >= f->mag[f->n_finite]) {
        code = f->n_finite;
    } else {
        int lo = 0, hi = f->n_finite; /* mag[lo] <= a < mag[hi] */
        while (hi - lo > 1) {
            int mid = (lo + hi) / 2;
            if (f->mag[mid] <= a) lo = mid;
            else hi = mid;
        }
        double dl = a - f->mag[lo], dh = f->mag[hi] - a;
        code = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
    }
    if (code == f->n_finite) return sign | (sat ? f->max_code : f->overflow_code);
    return (uint8_t)(sign | code);
}

static uint8_t sut_encode(bool e4m3, float x, bool sat) {
    return e4m3 ? ir_f32_to_f8e4m3fn(x, sat) : ir_f32_to_f8e5m2(x, sat);
}

static float sut_decode(bool e4m3, uint8_t v) { return e4m3 ? ir_f8e4m3fn_to_f32(v) : ir_f8e5m2_to_f32(v); }

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- codes --------------------------------------------------------------------------------- */

static void check_codes(bool e4m3) {
    int nan_codes = 0;
    for (int v = 0; v < 256; v++) {
        double want = ref_decode(e4m3, (uint8_t)v);
        float got = sut_decode(e4m3, (uint8_t)v);
        if (isnan(want)) {
            cr_assert(isnan(got), "%s 0x%02x: want NaN, got %g", e4m3 ? "e4m3fn" : "e5m2", v, got);
            nan_codes++;
            continue;
        }
        cr_assert((double)got == want && !signbit(got) == !signbit(want), "%s 0x%02x: want %.10g, got %.10g",
                  e4m3 ? "e4m3fn" : "e5m2", v, want, got);
        /* decode -> encode is the identity (infinities only without saturation) */
        cr_assert_eq(sut_encode(e4m3, got, false), v, "%s 0x%02x does not round-trip", e4m3 ? "e4m3fn" : "e5m2", v);
        if (!isinf(got)) cr_assert_eq(sut_encode(e4m3, got, true), v);
    }
    cr_assert_eq(nan_codes, e4m3 ? 2 : 6);
}

Test(fp8_codes, e4m3fn) {
    check_codes(true);
    cr_assert_eq(ir_f8e4m3fn_to_f32(0x7E), 448.0f);
    cr_assert_eq(ir_f8e4m3fn_to_f32(0xFE), -448.0f);
    cr_assert_eq(ir_f8e4m3fn_to_f32(0x01), ldexpf(1, -9));
    cr_assert_eq(ir_f8e4m3fn_to_f32(0x08), ldexpf(1, -6));
    cr_assert_eq(ir_f8e4m3fn_to_f32(0x38), 1.0f);
    cr_assert(isnan(ir_f8e4m3fn_to_f32(0x7F)) && isnan(ir_f8e4m3fn_to_f32(0xFF)));
    cr_assert_eq(ir_f32_to_f8e4m3fn(1e9f, true), 0x7E);
    cr_assert_eq(ir_f32_to_f8e4m3fn(-1e9f, false), 0xFF);
    cr_assert_eq(ir_f32_to_f8e4m3fn(464.0f, false), 0x7E); /* tie with the virtual 480: even */
    cr_assert_eq(ir_f32_to_f8e4m3fn(nextafterf(464.0f, 1e9f), false), 0x7F);
    cr_assert_eq(ir_f32_to_f8e4m3fn(ldexpf(1, -10), true), 0x00); /* tie to zero */
    cr_assert_eq(ir_f32_to_f8e4m3fn(-ldexpf(1, -10), true), 0x80);
    cr_assert_eq(ir_f32_to_f8e4m3fn(ldexpf(3, -10), true), 0x02); /* tie 1.5 ulp: even */
}

Test(fp8_codes, e5m2) {
    check_codes(false);
    cr_assert_eq(ir_f8e5m2_to_f32(0x7B), 57344.0f);
    cr_assert_eq(ir_f8e5m2_to_f32(0x7C), INFINITY);
    cr_assert_eq(ir_f8e5m2_to_f32(0xFC), -INFINITY);
    cr_assert_eq(ir_f8e5m2_to_f32(0x01), ldexpf(1, -16));
    cr_assert_eq(ir_f8e5m2_to_f32(0x04), ldexpf(1, -14));
    cr_assert_eq(ir_f8e5m2_to_f32(0x3C), 1.0f);
    cr_assert(isnan(ir_f8e5m2_to_f32(0x7D)) && isnan(ir_f8e5m2_to_f32(0x7F)));
    cr_assert_eq(ir_f32_to_f8e5m2(INFINITY, false), 0x7C);
    cr_assert_eq(ir_f32_to_f8e5m2(INFINITY, true), 0x7B);
    cr_assert_eq(ir_f32_to_f8e5m2(61440.0f, false), 0x7C); /* tie with 65536: even = overflow */
    cr_assert_eq(ir_f32_to_f8e5m2(nextafterf(61440.0f, 0), false), 0x7B);
    cr_assert_eq(ir_f32_to_f8e5m2(61440.0f, true), 0x7B);
}

/* ---- 10 million values ---------------------------------------------------------------------- */

typedef struct Vals {
    float *v;
    size_t n, cap;
} Vals;

static void push(Vals *s, float x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        cr_assert_not_null(s->v);
    }
    s->v[s->n++] = x;
}

static void push_around(Vals *s, float x) {
    float sx[3] = {nextafterf(x, -INFINITY), x, nextafterf(x, INFINITY)};
    for (int i = 0; i < 3; i++) {
        push(s, sx[i]);
        push(s, -sx[i]);
    }
}

/* Every code, every midpoint (exact ties) and one ulp either side, for both formats. */
static void edge_cases(Vals *s) {
    for (int e = 0; e < 2; e++) {
        RefFmt f;
        ref_init(&f, e == 0);
        for (int c = 0; c <= f.n_finite; c++) push_around(s, (float)f.mag[c]);
        for (int c = 0; c < f.n_finite; c++) {
            double mid = (f.mag[c] + f.mag[c + 1]) / 2;
            cr_assert_eq((double)(float)mid, mid, "midpoint not exact in f32");
            push_around(s, (float)mid);
        }
    }
    static const float extra[] = {0.0f, FLT_MIN, FLT_TRUE_MIN, FLT_MAX, 1e30f, 1e-30f, 448.0f, 464.0f, 480.0f,
                                  57344.0f, 61440.0f, 65536.0f, 1.0f, 3.0f};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) push_around(s, extra[i]);
    push(s, INFINITY);
    push(s, -INFINITY);
    static const uint32_t nans[] = {0x7FC00000u, 0x7F800001u, 0x7FFFFFFFu, 0xFFC00000u, 0xFF800001u, 0xFFFFFFFFu, 0x7FA00000u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) push(s, bits_f(nans[i]));
    /* every f32 subnormal boundary region and the smallest normal */
    for (uint32_t u = 0; u < 64; u++) {
        push(s, bits_f(u));
        push(s, bits_f(0x00800000u - u));
        push(s, bits_f(0x80000000u | u));
    }
}

/* 10M more: half uniformly random bit patterns, half in and around the FP8 ranges. */
static void random_values(Vals *s, uint64_t seed, size_t n) {
    TuRng r;
    tu_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        uint64_t x = tu_rng_next(&r);
        uint32_t u;
        if (i % 2 == 0) {
            u = (uint32_t)(x >> 16);
        } else {
            int e = (int)((x >> 40) % 46) - 24; /* 2^-24 .. 2^21 */
            u = (uint32_t)((x & 1) << 31) | (uint32_t)(127 + e) << 23 | (uint32_t)((x >> 1) & 0x7FFFFF);
            if ((x >> 60) == 0) u &= ~0xFFFFu; /* few mantissa bits: many exact ties */
        }
        push(s, bits_f(u));
    }
}

static void check_conversions(bool e4m3, bool sat) {
    RefFmt f;
    ref_init(&f, e4m3);
    Vals s = {0};
    edge_cases(&s);
    size_t n_edge = s.n;
    random_values(&s, e4m3 ? 0xE4 : 0xE5, 10000000);
    size_t bad = 0;
    for (size_t i = 0; i < s.n; i++) {
        uint8_t want = ref_encode(&f, s.v[i], sat), got = sut_encode(e4m3, s.v[i], sat);
        if (want != got && bad++ < 8) {
            uint32_t u;
            memcpy(&u, &s.v[i], 4);
            cr_log_error("%s sat=%d: f32 0x%08x (%.9g): want 0x%02x, got 0x%02x", f.name, sat, u, s.v[i], want, got);
        }
    }
    cr_log_info("%s saturate=%d: %zu values (%zu edge cases), %zu mismatches", f.name, sat, s.n, n_edge, bad);
    free(s.v);
    cr_assert_eq(bad, 0);
}

Test(fp8_convert, e4m3fn_saturate, .timeout = 120) { check_conversions(true, true); }
Test(fp8_convert, e4m3fn_no_saturate, .timeout = 120) { check_conversions(true, false); }
Test(fp8_convert, e5m2_saturate, .timeout = 120) { check_conversions(false, true); }
Test(fp8_convert, e5m2_no_saturate, .timeout = 120) { check_conversions(false, false); }

/* The interpreter's quantize/dequantize kernels use the same conversions: y = fp8(x / s). */
Test(fp8_convert, kernels_match) {
    const char *text = "graph @q(%x: f32[6]) {\n"
                       "  const %s: f32[] = [0.5]\n"
                       "  %q = irtool.quantize_fp8(%x, %s) {format = \"e5m2\", saturate = 0} : f8e5m2[6]\n"
                       "  %y = irtool.dequantize_fp8(%q, %s) : f32[6]\n"
                       "  return %q, %y\n}\n";
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "q.ir", &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    float xs[6] = {1.0f, 30720.0f, 30719.0f, -1e-9f, 0.3f, NAN};
    IrTensor in, out[2] = {0};
    ir_tensor_view(&in, IR_DTYPE_F32, 1, (int64_t[]){6}, xs);
    cr_assert_eq(ir_interp_run(g, &in, 1, out, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    for (int i = 0; i < 6; i++) {
        uint8_t q = ((uint8_t *)out[0].data)[i];
        cr_assert_eq(q, ir_f32_to_f8e5m2(xs[i] / 0.5f, false));
        float y = ((float *)out[1].data)[i];
        float want = ir_f8e5m2_to_f32(q) * 0.5f;
        cr_assert(y == want || (isnan(y) && isnan(want)));
    }
    ir_tensor_free(&out[0]);
    ir_tensor_free(&out[1]);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- pass helpers ------------------------------------------------------------------------------ */

typedef struct Outs {
    IrTensor t[8];
    uint32_t n;
} Outs;

static void outs_free(Outs *o) {
    for (uint32_t i = 0; i < o->n; i++) ir_tensor_free(&o->t[i]);
    o->n = 0;
}

static void run_graph(IrGraph *g, const IrTensor *in, Outs *o) {
    TuDiag d;
    tu_diag_init(&d);
    o->n = ir_graph_num_outputs(g);
    cr_assert(o->n <= 8);
    memset(o->t, 0, sizeof o->t);
    IrStatus st = ir_interp_run(g, in, ir_graph_num_inputs(g), o->t, NULL, &d.diag);
    cr_assert_eq(st, IR_OK, "interpreter: %s", tu_diag_text(&d));
    tu_diag_free(&d);
}

static double cosine(const Outs *a, const Outs *b) {
    double ab = 0, aa = 0, bb = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        int64_t n = ir_tensor_numel(&a->t[i]);
        cr_assert_eq(n, ir_tensor_numel(&b->t[i]));
        for (int64_t j = 0; j < n; j++) {
            double x = ir_elem_get_f64(a->t[i].dtype, a->t[i].data, (size_t)j);
            double y = ir_elem_get_f64(b->t[i].dtype, b->t[i].data, (size_t)j);
            ab += x * y, aa += x * x, bb += y * y;
        }
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1 : 0);
}

/* Rows whose argmax agree, for rank-2 outputs ([batch, classes]); -1 when none is rank 2. */
static double argmax_agreement(const Outs *a, const Outs *b) {
    int64_t rows = 0, same = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        const IrTensor *x = &a->t[i], *y = &b->t[i];
        if (x->rank != 2) continue;
        for (int64_t r = 0; r < x->dims[0]; r++) {
            int64_t bx = 0, by = 0, C = x->dims[1];
            for (int64_t c = 1; c < C; c++) {
                if (ir_elem_get_f64(x->dtype, x->data, (size_t)(r * C + c)) > ir_elem_get_f64(x->dtype, x->data, (size_t)(r * C + bx))) bx = c;
                if (ir_elem_get_f64(y->dtype, y->data, (size_t)(r * C + c)) > ir_elem_get_f64(y->dtype, y->data, (size_t)(r * C + by))) by = c;
            }
            rows++;
            same += bx == by;
        }
    }
    return rows ? (double)same / (double)rows : -1;
}

typedef struct PassRun {
    IrStatus status;
    int64_t quantized, kept, skipped, before, after;
    char *diag;
} PassRun;

static int64_t stat_of(const IrPipeline *p, const char *name) {
    for (uint32_t i = 0; i < ir_pipeline_num_reports(p); i++) {
        IrPassReport r = ir_pipeline_report(p, i);
        for (uint32_t k = 0; k < r.n_stats; k++)
            if (strcmp(r.stat_names[k], name) == 0) return r.stat_values[k];
    }
    return -1;
}

static PassRun run_pass(IrGraph *g, const char *pipeline) {
    PassRun pr = {0};
    TuDiag d;
    tu_diag_init(&d);
    IrPipeline *p;
    cr_assert_eq(ir_pipeline_parse(pipeline, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    IrPipelineOptions po = {true, IR_PRINT_NEVER, NULL, NULL, NULL};
    pr.status = ir_pipeline_run(p, g, &po, &d.diag);
    pr.quantized = stat_of(p, "layers-quantized");
    pr.kept = stat_of(p, "layers-kept");
    pr.skipped = stat_of(p, "layers-skipped");
    pr.before = stat_of(p, "weight-bytes-before");
    pr.after = stat_of(p, "weight-bytes-after");
    pr.diag = strdup(tu_diag_text(&d));
    ir_pipeline_destroy(p);
    tu_diag_free(&d);
    return pr;
}

static void write_npy(const char *dir, const char *name, const IrTensor *t) {
    char *p = tu_path_join(dir, name);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_npy_write(p, t, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    free(p);
}

static IrGraph *clone_graph(const IrGraph *g) {
    char *text = tu_print(g);
    cr_assert_not_null(text);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *c = tu_parse(text, ir_graph_source_file(g), &d);
    cr_assert_not_null(c, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    free(text);
    return c;
}

/* Quantizes a copy of g with `opts` and checks verify, cosine, bytes; returns the cosine. */
static double check_model(const char *label, const IrGraph *g, const IrTensor *in, const Outs *ref,
                          const char *opts, bool is_classifier) {
    IrGraph *q = clone_graph(g);
    char pipe[1024];
    snprintf(pipe, sizeof pipe, "quantize-fp8%s", opts);
    PassRun pr = run_pass(q, pipe);
    cr_assert_eq(pr.status, IR_OK, "%s %s: %s", label, pipe, pr.diag);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(ir_verify(q, &d.diag), IR_OK, "%s: %s", label, tu_diag_text(&d));
    tu_diag_free(&d);
    Outs o;
    run_graph(q, in, &o);
    double cs = cosine(&o, ref), am = argmax_agreement(&o, ref);
    double saved = pr.before > 0 ? 1.0 - (double)pr.after / (double)pr.before : 0;
    cr_log_info("%s %s: %lld layers fp8, weight bytes %lld -> %lld (-%.1f%%), cosine %.6f%s", label, pipe,
                (long long)pr.quantized, (long long)pr.before, (long long)pr.after, 100 * saved, cs,
                am >= 0 ? "" : " (no rank-2 output)");
    if (am >= 0) cr_log_info("%s %s: argmax agreement %.1f%%%s", label, pipe, 100 * am, is_classifier ? " (classifier)" : "");
    cr_assert_gt(pr.quantized, 0, "%s: nothing quantized", label);
    cr_assert_geq(saved, 0.70, "%s: weight bytes %lld -> %lld", label, (long long)pr.before, (long long)pr.after);
    cr_assert_geq(cs, 0.99, "%s %s: cosine %.6f", label, pipe, cs);
    /* every fp8 constant survives printing and parsing: same results bit for bit */
    IrGraph *rt = clone_graph(q);
    Outs o2;
    run_graph(rt, in, &o2);
    for (uint32_t i = 0; i < o.n; i++)
        cr_assert_eq(memcmp(o.t[i].data, o2.t[i].data, ir_tensor_nbytes(&o.t[i])), 0, "%s: text round trip differs", label);
    outs_free(&o2);
    ir_graph_destroy(rt);
    outs_free(&o);
    free(pr.diag);
    ir_graph_destroy(q);
    return cs;
}

/* ---- corpus/mlp.ir ---------------------------------------------------------------------------- */

static void random_tensor(IrTensor *t, uint32_t rank, const int64_t *dims, uint64_t seed) {
    cr_assert_eq(ir_tensor_alloc(t, IR_DTYPE_F32, rank, dims), IR_OK);
    TuRng r;
    tu_rng_seed(&r, seed);
    float *p = t->data;
    for (int64_t i = 0; i < ir_tensor_numel(t); i++) {
        double a = (double)tu_rng_below(&r, 1u << 30) / (1u << 30), b = (double)tu_rng_below(&r, 1u << 30) / (1u << 30);
        p[i] = (float)(sqrt(-2 * log(a + 1e-12)) * cos(2 * M_PI * b)); /* N(0, 1) */
    }
}

Test(quantize_fp8, mlp_corpus, .timeout = 120) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    char *dir = tu_mkdtemp();
    cr_assert_not_null(dir);
    IrTensor x;
    for (int k = 0; k < 4; k++) {
        IrTensor s;
        random_tensor(&s, 2, (int64_t[]){8, 64}, 100 + k);
        char name[32];
        snprintf(name, sizeof name, "x_%d.npy", k);
        write_npy(dir, name, &s);
        ir_tensor_free(&s);
    }
    random_tensor(&x, 2, (int64_t[]){16, 64}, 7);
    Outs ref;
    run_graph(g, &x, &ref);
    static const char *const calibs[] = {"max", "percentile:99.9", "mse"};
    char opts[1024];
    for (int i = 0; i < 3; i++) {
        snprintf(opts, sizeof opts, "{samples=%s,calib=%s}", dir, calibs[i]);
        check_model("mlp.ir", g, &x, &ref, opts, true);
    }
    check_model("mlp.ir", g, &x, &ref, "", true); /* dynamic */
    check_model("mlp.ir", g, &x, &ref, "{format=e5m2}", true);
    snprintf(opts, sizeof opts, "{samples=%s,granularity=tensor}", dir);
    check_model("mlp.ir", g, &x, &ref, opts, true);
    outs_free(&ref);
    ir_tensor_free(&x);
    tu_rmtree(dir);
    free(dir);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* The dynamic scale is built from ordinary ops; the static one is a constant. */
Test(quantize_fp8, structure) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert_not_null(g);
    PassRun pr = run_pass(g, "quantize-fp8");
    cr_assert_eq(pr.status, IR_OK, "%s", pr.diag);
    cr_assert_eq(pr.quantized, 2);
    cr_assert_eq(pr.before, (64 * 32 + 32 * 10) * 4);
    cr_assert_eq(pr.after, 64 * 32 + 32 * 4 + 32 * 10 + 10 * 4);
    int counts[IR_OP_COUNT] = {0};
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) counts[ir_node_op(g, n)]++;
    cr_assert_eq(counts[IR_OP_MAT_MUL], 0);
    cr_assert_eq(counts[IR_OP_FP8_MAT_MUL], 2);
    cr_assert_eq(counts[IR_OP_QUANTIZE_FP8], 2);
    cr_assert_eq(counts[IR_OP_REDUCE_MAX], 2);
    cr_assert_eq(ir_value_find(g, "w1", 2), 0, "the f32 weight should be gone");
    IrValueId wq = ir_value_find(g, "w1.fp8", 6);
    cr_assert_neq(wq, 0);
    cr_assert_eq(ir_type_dtype(g, ir_value_type(g, wq)), IR_DTYPE_F8E4M3FN);
    cr_assert_neq(ir_value_find(g, "h0", 2), 0, "results keep their names");
    free(pr.diag);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(quantize_fp8, option_errors) {
    static const char *const bad[] = {"quantize-fp8{calib=max}", "quantize-fp8{budget=0.1}",
                                      "quantize-fp8{format=e3m4}", "quantize-fp8{granularity=row}",
                                      "quantize-fp8{samples=/nonexistent-dir-q,calib=percentile:101}",
                                      "quantize-fp8{samples=/nonexistent-dir-q}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_load_corpus("mlp.ir", &d);
        cr_assert_not_null(g);
        PassRun pr = run_pass(g, bad[i]);
        cr_assert_neq(pr.status, IR_OK, "%s should fail", bad[i]);
        cr_assert(strstr(pr.diag, "quantize-fp8"), "%s: %s", bad[i], pr.diag);
        free(pr.diag);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
}

/* ---- Gemm variants ---------------------------------------------------------------------------- */

static void fmt_floats(IrStrBuf *b, int64_t n, uint64_t seed, double scale) {
    IrTensor t;
    random_tensor(&t, 1, &n, seed);
    ir_strbuf_putc(b, '[');
    for (int64_t i = 0; i < n; i++) ir_strbuf_printf(b, "%s%.9g", i ? ", " : "", scale * ((float *)t.data)[i]);
    ir_strbuf_putc(b, ']');
    ir_tensor_free(&t);
}

Test(quantize_fp8, gemm_variants, .timeout = 60) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    ir_strbuf_puts(&b, "graph @g(%x: f32[6, 8], %xt: f32[8, 6], %c: f32[6, 5]) {\n  const %w: f32[8, 5] = ");
    fmt_floats(&b, 40, 1, 0.3);
    ir_strbuf_puts(&b, "\n  const %wt: f32[5, 8] = ");
    fmt_floats(&b, 40, 2, 0.3);
    ir_strbuf_puts(&b, "\n  const %bn: f32[5] = ");
    fmt_floats(&b, 5, 3, 1);
    ir_strbuf_puts(&b, "\n  const %bmn: f32[6, 5] = ");
    fmt_floats(&b, 30, 4, 1);
    ir_strbuf_puts(&b, "\n"
                       "  %y1 = Gemm(%x, %w, %bn) : f32[6, 5] name(\"plain\")\n"
                       "  %y2 = Gemm(%x, %wt, %bmn) {transB = 1, alpha = 0.5, beta = 2.0} : f32[6, 5] name(\"transb_alpha_beta\")\n"
                       "  %y3 = Gemm(%xt, %w) {transA = 1} : f32[6, 5] name(\"transa\")\n"
                       "  %y4 = Gemm(%x, %w, %c) : f32[6, 5] name(\"dyn_c\")\n"
                       "  %y5 = Gemm(%x, %w, %c) {beta = 3.0} : f32[6, 5] name(\"dyn_c_beta\")\n"
                       "  return %y1, %y2, %y3, %y4, %y5\n}\n");
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(b.data, "gemm.ir", &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    IrTensor in[3];
    random_tensor(&in[0], 2, (int64_t[]){6, 8}, 11);
    random_tensor(&in[1], 2, (int64_t[]){8, 6}, 12);
    random_tensor(&in[2], 2, (int64_t[]){6, 5}, 13);
    Outs ref, got;
    run_graph(g, in, &ref);
    PassRun pr = run_pass(g, "quantize-fp8");
    cr_assert_eq(pr.status, IR_OK, "%s", pr.diag);
    cr_assert_eq(pr.quantized, 4);
    cr_assert_eq(pr.skipped, 1, "beta != 1 with a dynamic C stays f32");
    cr_assert(strstr(pr.diag, "dyn_c_beta"), "a note names the skipped layer: %s", pr.diag);
    run_graph(g, in, &got);
    for (uint32_t i = 0; i < 5; i++) {
        Outs a = {.n = 1}, c = {.n = 1};
        a.t[0] = got.t[i], c.t[0] = ref.t[i];
        double cs = cosine(&a, &c);
        cr_assert_geq(cs, 0.99, "output %u: cosine %.5f", i, cs);
    }
    outs_free(&ref);
    outs_free(&got);
    for (int i = 0; i < 3; i++) ir_tensor_free(&in[i]);
    free(pr.diag);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    ir_strbuf_free(&b);
}

/* ---- sensitivity ------------------------------------------------------------------------------ */

/* fc1's weight has an outlier (1e6) on an input channel the samples never use: per tensor, every
 * other weight flushes to zero in FP8, so fc1 must stay f32 under a budget. */
static IrGraph *outlier_graph(void) {
    IrStrBuf b;
    ir_strbuf_init(&b);
    IrTensor w1;
    random_tensor(&w1, 2, (int64_t[]){16, 16}, 21);
    ((float *)w1.data)[3] = 1e6f; /* row 0 = input channel 0 */
    ir_strbuf_puts(&b, "graph @outlier(%x: f32[4, 16]) {\n  const %w1: f32[16, 16] = [");
    for (int i = 0; i < 256; i++) ir_strbuf_printf(&b, "%s%.9g", i ? ", " : "", ((float *)w1.data)[i] * (i == 3 ? 1 : 0.3));
    ir_strbuf_puts(&b, "]\n  const %w2: f32[16, 8] = ");
    fmt_floats(&b, 128, 22, 0.3);
    ir_strbuf_puts(&b, "\n  %h0 = MatMul(%x, %w1) : f32[4, 16] name(\"fc1\")\n"
                       "  %h = Relu(%h0) : f32[4, 16] name(\"relu\")\n"
                       "  %y = MatMul(%h, %w2) : f32[4, 8] name(\"fc2\")\n"
                       "  return %y\n}\n");
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(b.data, "outlier.ir", &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    ir_strbuf_free(&b);
    ir_tensor_free(&w1);
    return g;
}

static void outlier_input(IrTensor *t, uint64_t seed) {
    random_tensor(t, 2, (int64_t[]){4, 16}, seed);
    for (int r = 0; r < 4; r++) ((float *)t->data)[r * 16] = 0;
}

Test(quantize_fp8, budget_keeps_sensitive_layer, .timeout = 60) {
    char *dir = tu_mkdtemp();
    for (int k = 0; k < 4; k++) {
        IrTensor s;
        outlier_input(&s, 300 + k);
        char name[32];
        snprintf(name, sizeof name, "x_%d.npy", k);
        write_npy(dir, name, &s);
        ir_tensor_free(&s);
    }
    IrTensor x;
    outlier_input(&x, 399);
    IrGraph *g = outlier_graph();
    Outs ref, o;
    run_graph(g, &x, &ref);
    char pipe[1024], *report = tu_path_join(dir, "report.json");

    /* without a budget the outlier ruins fc1 */
    IrGraph *q = clone_graph(g);
    snprintf(pipe, sizeof pipe, "quantize-fp8{samples=%s,granularity=tensor}", dir);
    PassRun pr = run_pass(q, pipe);
    cr_assert_eq(pr.status, IR_OK, "%s", pr.diag);
    cr_assert_eq(pr.quantized, 2);
    run_graph(q, &x, &o);
    double bad = cosine(&o, &ref);
    cr_log_info("outlier layer quantized per tensor: cosine %.4f", bad);
    cr_assert_lt(bad, 0.9);
    outs_free(&o);
    free(pr.diag);
    ir_graph_destroy(q);

    /* with one, fc1 stays f32, fc2 is fp8, and the report says so */
    q = clone_graph(g);
    snprintf(pipe, sizeof pipe, "quantize-fp8{samples=%s,granularity=tensor,budget=0.05,report=%s}", dir, report);
    pr = run_pass(q, pipe);
    cr_assert_eq(pr.status, IR_OK, "%s", pr.diag);
    cr_assert_eq(pr.quantized, 1);
    cr_assert_eq(pr.kept, 1);
    cr_assert(strstr(pr.diag, "'fc1' kept in f32"), "%s", pr.diag);
    int mm = 0, fp8 = 0;
    for (IrNodeId n = ir_graph_walk_next(q, 0); n; n = ir_graph_walk_next(q, n)) {
        mm += ir_node_op(q, n) == IR_OP_MAT_MUL && strcmp(ir_node_name(q, n), "fc1") == 0;
        fp8 += ir_node_op(q, n) == IR_OP_FP8_MAT_MUL && strcmp(ir_node_name(q, n), "fc2") == 0;
    }
    cr_assert(mm == 1 && fp8 == 1);
    run_graph(q, &x, &o);
    double good = cosine(&o, &ref);
    cr_log_info("with budget=0.05: cosine %.6f", good);
    cr_assert_geq(good, 0.99);
    size_t len;
    char *json = tu_read_file(report, &len);
    cr_assert_not_null(json);
    cr_assert(strstr(json, "{\"name\": \"fc1\", \"op\": \"MatMul\", \"weight\": \"w1\""), "%s", json);
    cr_assert(strstr(json, "\"decision\": \"kept\", \"reason\": \"error over budget\", \"bytes_before\": 1024, \"bytes_after\": 1024"), "%s", json);
    cr_assert(strstr(json, "\"decision\": \"quantized\", \"reason\": null, \"bytes_before\": 512, \"bytes_after\": 132"), "%s", json);
    cr_assert(strstr(json, "\"layers_quantized\": 1, \"layers_kept\": 1"), "%s", json);
    cr_log_info("report: %s", json);
    free(json);
    outs_free(&o);
    free(pr.diag);
    ir_graph_destroy(q);

    outs_free(&ref);
    ir_tensor_free(&x);
    ir_graph_destroy(g);
    free(report);
    tu_rmtree(dir);
    free(dir);
}

/* ---- shared torch models ---------------------------------------------------------------------- */

static char *shared_path(const char *rel) {
    const char *s = getenv("IRTOOL_SHARED_DIR");
    char buf[4096];
    if (s && *s) snprintf(buf, sizeof buf, "%s/%s", s, rel);
    else snprintf(buf, sizeof buf, "%s/../shared/%s", IRTOOL_SOURCE_DIR, rel);
    return strdup(buf);
}

static void check_torch(const char *name, bool classifier) {
    char rel[256];
    snprintf(rel, sizeof rel, "torch-models/%s/model.onnx", name);
    char *mp = shared_path(rel);
    snprintf(rel, sizeof rel, "torch-models/%s/input_x.npy", name);
    char *ip = shared_path(rel);
    struct stat st;
    if (stat(mp, &st) != 0 || stat(ip, &st) != 0) {
        free(mp);
        free(ip);
        cr_skip_test("%s: shared model absent", name);
    }
    IrDiag quiet;
    ir_diag_init(&quiet, NULL, NULL);
    IrGraph *g = NULL;
    IrTensor x;
    if (ir_load(mp, &quiet, &g) != IR_OK || ir_npy_read(ip, &quiet, &x) != IR_OK || ir_graph_num_inputs(g) != 1) {
        ir_graph_destroy(g);
        free(mp);
        free(ip);
        cr_skip_test("%s: ONNX import not available for this model", name);
    }
    Outs ref;
    run_graph(g, &x, &ref);
    char *dir = tu_mkdtemp();
    char fname[512];
    snprintf(fname, sizeof fname, "%s.npy", ir_value_name(g, ir_graph_input(g, 0)));
    write_npy(dir, fname, &x);
    char opts[1024];
    char label[128];
    snprintf(label, sizeof label, "torch/%s", name);
    snprintf(opts, sizeof opts, "{samples=%s}", dir);
    check_model(label, g, &x, &ref, opts, classifier);
    snprintf(opts, sizeof opts, "{samples=%s,calib=mse}", dir);
    check_model(label, g, &x, &ref, opts, classifier);
    check_model(label, g, &x, &ref, "", classifier);
    outs_free(&ref);
    ir_tensor_free(&x);
    ir_graph_destroy(g);
    tu_rmtree(dir);
    free(dir);
    free(mp);
    free(ip);
}

Test(quantize_fp8_torch, tiny_mlp, .timeout = 120) { check_torch("tiny_mlp", false); }
Test(quantize_fp8_torch, convnet, .timeout = 120) { check_torch("convnet", true); }
Test(quantize_fp8_torch, encoder, .timeout = 120) { check_torch("encoder", false); }

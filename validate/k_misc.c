/* Signal, random and loss kernels: Blackman/Hamming/Hann windows, DFT, STFT, MelWeightMatrix,
 * the random generators (Bernoulli, RandomNormal[Like], RandomUniform[Like], Multinomial),
 * SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
 *
 * Randomness is deterministic: every random op draws from its own xoshiro256** stream seeded by
 * splitmix64 from the bits of its `seed` attribute, or, without one, from a fixed default seed
 * (0x1d0c5eed) mixed with the node id, so a graph gives the same values on every run and
 * thread count (but not the values of any other ONNX runtime).
 */
#include "validate/interp.h"
#include "ir/kernels_shared.h"
#include "ir/rng.h"

#include <math.h>
#include <stdlib.h>

static int64_t numel(const IrTensor *t) { return ir_tensor_numel(t); }

static IrStatus oom(KernelArgs *a) {
    interp_error(a, "out of memory");
    return IR_ENOMEM;
}

static IrDType attr_dtype(KernelArgs *a, const char *name, IrDType dflt) {
    if (!interp_has_attr(a, name)) return dflt;
    int64_t v = interp_attr_int(a, name);
    return v > IR_DTYPE_NONE && v < IR_DTYPE_COUNT ? (IrDType)v : dflt;
}

/* ---- windows --------------------------------------------------------------------------------- */

typedef enum WinKind { WIN_BLACKMAN, WIN_HAMMING, WIN_HANN } WinKind; /* ir_window_value's kinds */

static IrStatus window_run(KernelArgs *a, WinKind kind) {
    const IrTensor *S = a->in[0];
    if (numel(S) != 1) return interp_error(a, "size must be a scalar");
    int64_t n = interp_get_i(S, 0);
    if (n < 0) return interp_error(a, "size must be non-negative");
    IrDType dt = (IrDType)interp_attr_int(a, "output_datatype");
    if (dt <= IR_DTYPE_NONE || dt >= IR_DTYPE_COUNT) dt = IR_DTYPE_F32;
    IrStatus st = interp_alloc_output(a, 0, dt, 1, &n);
    if (st) return st;
    double N = interp_attr_int(a, "periodic") != 0 ? (double)n : (double)(n - 1);
    for (int64_t i = 0; i < n; i++) interp_set_f(&a->out[0], i, ir_window_value((int)kind, i, N));
    return IR_OK;
}

IrStatus interp_BLACKMAN_WINDOW(KernelArgs *a) { return window_run(a, WIN_BLACKMAN); }
IrStatus interp_HAMMING_WINDOW(KernelArgs *a) { return window_run(a, WIN_HAMMING); }
IrStatus interp_HANN_WINDOW(KernelArgs *a) { return window_run(a, WIN_HANN); }

/* ---- DFT / STFT ------------------------------------------------------------------------------ */

/* Naive DFT of one complex sequence (re/im with stride), length n_in read (zero-padded or
 * truncated to n), writing `bins` outputs. Twiddles use (k*t mod n) for accuracy. */
static void dft1(const double *re, const double *im, int64_t stride, int64_t n_in, int64_t n, int64_t bins,
                 bool inverse, double *ore, double *oim) {
    int64_t m = n_in < n ? n_in : n;
    for (int64_t k = 0; k < bins; k++) {
        double sr = 0, si = 0;
        for (int64_t t = 0; t < m; t++) {
            double ang = 2 * M_PI * (double)((k * t) % n) / (double)n;
            if (!inverse) ang = -ang;
            double c = cos(ang), s = sin(ang);
            double xr = re[t * stride], xi = im ? im[t * stride] : 0;
            sr += xr * c - xi * s;
            si += xr * s + xi * c;
        }
        if (inverse) sr /= (double)n, si /= (double)n;
        ore[k] = sr, oim[k] = si;
    }
}

IrStatus interp_DFT(KernelArgs *a) {
    const IrTensor *X = a->in[0], *L = a->n_in > 1 ? a->in[1] : NULL;
    if (X->rank < 2) return interp_error(a, "input must have rank >= 2 ([..., signal, 1|2])");
    int64_t cplx = X->dims[X->rank - 1];
    if (cplx != 1 && cplx != 2) return interp_error(a, "the last dim must be 1 (real) or 2 (complex)");
    int64_t axis = interp_attr_int(a, "axis");
    if (!ir_shape_axis_checked(&axis, X->rank) || axis == (int64_t)X->rank - 1) return interp_error(a, "axis out of range");
    bool inverse = interp_attr_int(a, "inverse") != 0, onesided = interp_attr_int(a, "onesided") != 0;
    int64_t n_in = X->dims[axis];
    int64_t n = L && numel(L) ? interp_get_i(L, 0) : n_in;
    if (n < 1) return interp_error(a, "dft_length must be positive");
    int64_t bins = onesided ? n / 2 + 1 : n;
    int64_t od[IR_MAX_RANK];
    for (uint32_t i = 0; i < X->rank; i++) od[i] = X->dims[i];
    od[axis] = bins;
    od[X->rank - 1] = 2;
    IrStatus st = interp_alloc_output(a, 0, X->dtype, X->rank, od);
    if (st) return st;
    int64_t outer, inner; /* inner leaves out the last dim, the real/imaginary pair */
    ir_shape_split(X->rank - 1, X->dims, (uint32_t)axis, &outer, NULL, &inner);
    double *re = malloc((size_t)(n_in > 0 ? n_in : 1) * sizeof(double)), *im = malloc((size_t)(n_in > 0 ? n_in : 1) * sizeof(double));
    double *ore = malloc((size_t)bins * sizeof(double)), *oim = malloc((size_t)bins * sizeof(double));
    if (!re || !im || !ore || !oim) {
        free(re), free(im), free(ore), free(oim);
        return oom(a);
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < inner; q++) {
            for (int64_t t = 0; t < n_in; t++) {
                int64_t base = ((o * n_in + t) * inner + q) * cplx;
                re[t] = interp_get_f(X, base);
                im[t] = cplx == 2 ? interp_get_f(X, base + 1) : 0;
            }
            dft1(re, im, 1, n_in, n, bins, inverse, ore, oim);
            for (int64_t k = 0; k < bins; k++) {
                int64_t base = ((o * bins + k) * inner + q) * 2;
                interp_set_f(&a->out[0], base, ore[k]);
                interp_set_f(&a->out[0], base + 1, oim[k]);
            }
        }
    free(re), free(im), free(ore), free(oim);
    return IR_OK;
}

IrStatus interp_STFT(KernelArgs *a) {
    const IrTensor *X = a->in[0], *FS = a->in[1];
    const IrTensor *W = a->n_in > 2 ? a->in[2] : NULL, *FL = a->n_in > 3 ? a->in[3] : NULL;
    if (W && numel(W) == 0) W = NULL;
    if (X->rank != 3 || (X->dims[2] != 1 && X->dims[2] != 2)) return interp_error(a, "signal must be [batch, length, 1|2]");
    if (!FS || numel(FS) != 1) return interp_error(a, "frame_step must be a scalar");
    int64_t step = interp_get_i(FS, 0);
    int64_t len = X->dims[1], cplx = X->dims[2];
    int64_t fl = FL && numel(FL) ? interp_get_i(FL, 0) : W ? numel(W) : len;
    int64_t wl = W ? numel(W) : fl;
    if (step < 1 || fl < 1 || fl > len) return interp_error(a, "bad frame_step or frame_length");
    bool onesided = interp_attr_int(a, "onesided") != 0;
    int64_t frames = 1 + (len - fl) / step, bins = onesided ? fl / 2 + 1 : fl;
    int64_t od[4] = {X->dims[0], frames, bins, 2};
    IrStatus st = interp_alloc_output(a, 0, X->dtype, 4, od);
    if (st) return st;
    double *re = calloc((size_t)wl, sizeof(double)), *im = calloc((size_t)wl, sizeof(double));
    double *ore = malloc((size_t)bins * sizeof(double)), *oim = malloc((size_t)bins * sizeof(double));
    if (!re || !im || !ore || !oim) {
        free(re), free(im), free(ore), free(oim);
        return oom(a);
    }
    for (int64_t b = 0; b < X->dims[0]; b++)
        for (int64_t f = 0; f < frames; f++) {
            for (int64_t t = 0; t < wl; t++) {
                int64_t pos = f * step + t;
                double w = W ? interp_get_f(W, t) : 1.0;
                bool in = pos < len;
                re[t] = in ? interp_get_f(X, (b * len + pos) * cplx) * w : 0;
                im[t] = in && cplx == 2 ? interp_get_f(X, (b * len + pos) * cplx + 1) * w : 0;
            }
            dft1(re, im, 1, wl, fl, bins, false, ore, oim);
            for (int64_t k = 0; k < bins; k++) {
                int64_t base = ((b * frames + f) * bins + k) * 2;
                interp_set_f(&a->out[0], base, ore[k]);
                interp_set_f(&a->out[0], base + 1, oim[k]);
            }
        }
    free(re), free(im), free(ore), free(oim);
    return IR_OK;
}

/* Triangular mel filters exactly as the ONNX reference builds them (integer bin edges). */
IrStatus interp_MEL_WEIGHT_MATRIX(KernelArgs *a) {
    for (int i = 0; i < 5; i++)
        if (!a->in[i] || numel(a->in[i]) != 1) return interp_error(a, "all inputs must be scalars");
    int64_t nmel = interp_get_i(a->in[0], 0), dft = interp_get_i(a->in[1], 0), sr = interp_get_i(a->in[2], 0);
    float lo = (float)interp_get_f(a->in[3], 0), hi = (float)interp_get_f(a->in[4], 0);
    if (nmel < 1 || dft < 1 || sr < 1) return interp_error(a, "num_mel_bins, dft_length and sample_rate must be positive");
    int64_t nspec = dft / 2 + 1;
    IrDType dt = (IrDType)interp_attr_int(a, "output_datatype");
    if (dt <= IR_DTYPE_NONE || dt >= IR_DTYPE_COUNT) dt = IR_DTYPE_F32;
    int64_t od[2] = {nspec, nmel};
    IrStatus st = interp_alloc_output(a, 0, dt, 2, od);
    if (st) return st;
    float lo_mel = 2595.0f * log10f(1.0f + lo / 700.0f), hi_mel = 2595.0f * log10f(1.0f + hi / 700.0f);
    float step = (hi_mel - lo_mel) / (float)(nmel + 2);
    int64_t *bins = malloc((size_t)(nmel + 2) * sizeof(int64_t));
    double *w = calloc((size_t)(nspec * nmel), sizeof(double));
    if (!bins || !w) {
        free(bins), free(w);
        return oom(a);
    }
    for (int64_t i = 0; i < nmel + 2; i++) {
        double f = (double)i * (double)step + (double)lo_mel;
        f = 700.0 * (pow(10.0, f / 2595.0) - 1.0);
        bins[i] = (int64_t)floor((double)(dft + 1) * f / (double)sr);
    }
    for (int64_t i = 0; i < nmel; i++) {
        int64_t l = bins[i], c = bins[i + 1], h = bins[i + 2];
        if (c - l == 0) {
            if (c >= 0 && c < nspec) w[c * nmel + i] = 1;
        } else {
            for (int64_t j = l; j <= c; j++)
                if (j >= 0 && j < nspec) w[j * nmel + i] = (double)(j - l) / (double)(c - l);
        }
        if (h - c > 0)
            for (int64_t j = c; j < h; j++)
                if (j >= 0 && j < nspec) w[j * nmel + i] = (double)(h - j) / (double)(h - c);
    }
    for (int64_t i = 0; i < nspec * nmel; i++) interp_set_f(&a->out[0], i, w[i]);
    free(bins), free(w);
    return IR_OK;
}

/* ---- random ---------------------------------------------------------------------------------- */

typedef IrRng Rng;

static void rng_init(KernelArgs *a, Rng *r) {
    bool has = interp_has_attr(a, "seed");
    ir_rng_init(r, ir_rng_seed(has, has ? interp_attr_float(a, "seed") : 0, (uint64_t)a->node));
}

static double rng_uniform(Rng *r) { return ir_rng_uniform(r); }
static double rng_normal(Rng *r) { return ir_rng_normal(r); }

static IrStatus random_fill(KernelArgs *a, bool normal, const IrTensor *like) {
    IrDType dt = attr_dtype(a, "dtype", like ? like->dtype : IR_DTYPE_F32);
    if (!ir_dtype_is_float(dt)) return interp_error(a, "dtype must be floating point");
    int64_t dims[IR_MAX_RANK];
    uint32_t rank;
    if (like) {
        rank = like->rank;
        memcpy(dims, like->dims, rank * sizeof(int64_t));
    } else {
        int n = interp_attr_ints(a, "shape", dims, IR_MAX_RANK);
        if (n < 0 || n > IR_MAX_RANK) return interp_error(a, "shape is required (rank <= %d)", IR_MAX_RANK);
        rank = (uint32_t)n;
    }
    IrStatus st = interp_alloc_output(a, 0, dt, rank, dims);
    if (st) return st;
    Rng r;
    rng_init(a, &r);
    double p0 = interp_attr_float(a, normal ? "mean" : "low"), p1 = interp_attr_float(a, normal ? "scale" : "high");
    for (int64_t i = 0; i < numel(&a->out[0]); i++) {
        double v = normal ? p0 + p1 * rng_normal(&r) : p0 + (p1 - p0) * rng_uniform(&r);
        interp_set_f(&a->out[0], i, v);
    }
    return IR_OK;
}

IrStatus interp_RANDOM_NORMAL(KernelArgs *a) { return random_fill(a, true, NULL); }
IrStatus interp_RANDOM_NORMAL_LIKE(KernelArgs *a) { return random_fill(a, true, a->in[0]); }
IrStatus interp_RANDOM_UNIFORM(KernelArgs *a) { return random_fill(a, false, NULL); }
IrStatus interp_RANDOM_UNIFORM_LIKE(KernelArgs *a) { return random_fill(a, false, a->in[0]); }

IrStatus interp_BERNOULLI(KernelArgs *a) {
    const IrTensor *P = a->in[0];
    IrDType dt = attr_dtype(a, "dtype", P->dtype);
    IrStatus st = interp_alloc_output(a, 0, dt, P->rank, P->dims);
    if (st) return st;
    Rng r;
    rng_init(a, &r);
    for (int64_t i = 0; i < numel(P); i++) interp_set_f(&a->out[0], i, rng_uniform(&r) < interp_get_f(P, i) ? 1.0 : 0.0);
    return IR_OK;
}

/* Samples class indices from softmax(input) per batch row (input [batch, classes] holds
 * unnormalized log-probabilities). */
IrStatus interp_MULTINOMIAL(KernelArgs *a) {
    const IrTensor *X = a->in[0];
    if (X->rank != 2) return interp_error(a, "input must be [batch, classes]");
    int64_t ns = interp_attr_int(a, "sample_size");
    IrDType dt = attr_dtype(a, "dtype", IR_DTYPE_I32);
    if (dt != IR_DTYPE_I32 && dt != IR_DTYPE_I64) return interp_error(a, "dtype must be i32 or i64");
    int64_t od[2] = {X->dims[0], ns}, C = X->dims[1];
    IrStatus st = interp_alloc_output(a, 0, dt, 2, od);
    if (st) return st;
    double *cum = malloc((size_t)(C > 0 ? C : 1) * sizeof(double));
    if (!cum) return oom(a);
    Rng r;
    rng_init(a, &r);
    for (int64_t b = 0; b < X->dims[0]; b++) {
        double mx = -INFINITY, tot = 0;
        for (int64_t c = 0; c < C; c++) mx = fmax(mx, interp_get_f(X, b * C + c));
        for (int64_t c = 0; c < C; c++) cum[c] = (tot += exp(interp_get_f(X, b * C + c) - mx));
        for (int64_t s = 0; s < ns; s++) {
            double u = rng_uniform(&r) * tot;
            int64_t c = 0;
            while (c < C - 1 && cum[c] <= u) c++;
            interp_set_i(&a->out[0], b * ns + s, c);
        }
    }
    free(cum);
    return IR_OK;
}

/* ---- losses ---------------------------------------------------------------------------------- */

/* NLL over log-probabilities lp [N, C, D] (D = product of the trailing dims), target [N, D]:
 * loss[n, d] = -lp[n, t, d] * w[t] (0 where t == ignore_index); `mean` divides by the summed
 * weights of the counted elements (by N*D with neither weights nor ignore_index), as the ONNX
 * reference does. */
static IrStatus nll_core(KernelArgs *a, const double *lp, const IrTensor *X, const IrTensor *T, const IrTensor *W) {
    int64_t N = X->dims[0], C = X->dims[1], D = ir_shape_numel(X->rank - 2, X->dims + 2);
    if (T->rank != X->rank - 1 || T->dims[0] != N) return interp_error(a, "target must be [N, d1, ...]");
    for (uint32_t i = 1; i < T->rank; i++)
        if (T->dims[i] != X->dims[i + 1]) return interp_error(a, "target dims do not match the input");
    if (W && numel(W) != C) return interp_error(a, "weight must have C entries");
    bool has_ii = interp_has_attr(a, "ignore_index");
    int64_t ii = has_ii ? interp_attr_int(a, "ignore_index") : 0;
    const char *red = interp_attr_string(a, "reduction");
    if (!red) red = "mean";
    int mode = strcmp(red, "none") == 0 ? 0 : strcmp(red, "sum") == 0 ? 1 : strcmp(red, "mean") == 0 ? 2 : -1;
    if (mode < 0) return interp_error(a, "unknown reduction '%s'", red);
    IrStatus st = mode == 0 ? interp_alloc_output(a, 0, X->dtype, T->rank, T->dims) : interp_alloc_output(a, 0, X->dtype, 0, NULL);
    if (st) return st;
    double sum = 0, wsum = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            int64_t t = interp_get_i(T, n * D + d);
            double w = 1, l = 0;
            if (has_ii && t == ii) {
                w = 0;
            } else {
                if (t < 0 || t >= C) return interp_error(a, "target %lld out of range [0, %lld)", (long long)t, (long long)C);
                if (W) w = interp_get_f(W, t);
                l = -lp[(n * C + t) * D + d] * w;
            }
            if (mode == 0) interp_set_f(&a->out[0], n * D + d, l);
            sum += l;
            wsum += w;
        }
    if (mode == 1) interp_set_f(&a->out[0], 0, sum);
    if (mode == 2) interp_set_f(&a->out[0], 0, (W || has_ii) ? sum / wsum : sum / (double)(N * D));
    return IR_OK;
}

IrStatus interp_NEGATIVE_LOG_LIKELIHOOD_LOSS(KernelArgs *a) {
    const IrTensor *X = a->in[0], *T = a->in[1], *W = a->n_in > 2 ? a->in[2] : NULL;
    if (X->rank < 2) return interp_error(a, "input must be [N, C, ...]");
    double *lp = malloc((size_t)(numel(X) > 0 ? numel(X) : 1) * sizeof(double));
    if (!lp) return oom(a);
    for (int64_t i = 0; i < numel(X); i++) lp[i] = interp_get_f(X, i);
    IrStatus st = nll_core(a, lp, X, T, W);
    free(lp);
    return st;
}

IrStatus interp_SOFTMAX_CROSS_ENTROPY_LOSS(KernelArgs *a) {
    const IrTensor *X = a->in[0], *T = a->in[1], *W = a->n_in > 2 ? a->in[2] : NULL;
    if (X->rank < 2) return interp_error(a, "scores must be [N, C, ...]");
    int64_t N = X->dims[0], C = X->dims[1], D = ir_shape_numel(X->rank - 2, X->dims + 2);
    double *lp = malloc((size_t)(numel(X) > 0 ? numel(X) : 1) * sizeof(double));
    if (!lp) return oom(a);
    for (int64_t n = 0; n < N; n++)
        for (int64_t d = 0; d < D; d++) {
            double mx = -INFINITY, s = 0;
            for (int64_t c = 0; c < C; c++) mx = fmax(mx, interp_get_f(X, (n * C + c) * D + d));
            for (int64_t c = 0; c < C; c++) s += exp(interp_get_f(X, (n * C + c) * D + d) - mx);
            for (int64_t c = 0; c < C; c++) lp[(n * C + c) * D + d] = interp_get_f(X, (n * C + c) * D + d) - mx - log(s);
        }
    IrStatus st = nll_core(a, lp, X, T, W);
    if (!st && a->n_out > 1 && ir_node_result(a->g, a->node, 1)) {
        st = interp_alloc_output(a, 1, X->dtype, X->rank, X->dims);
        for (int64_t i = 0; !st && i < numel(X); i++) interp_set_f(&a->out[1], i, lp[i]);
    }
    free(lp);
    return st;
}

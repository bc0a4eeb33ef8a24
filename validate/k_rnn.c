/* Recurrent kernels: RNN, GRU and LSTM (ONNX opset 14+ form with `layout`).
 *
 * Forward, reverse and bidirectional; the default and all named activation functions with
 * activation_alpha/beta consumed in order by the functions that take them; clip on gate
 * pre-activations; sequence_lens (steps past a sequence's length leave the state unchanged and
 * Y zero; the reverse direction starts at each sequence's last valid step); initial states;
 * LSTM peepholes and input_forget; GRU linear_before_reset. Math in double, one rounding into
 * the output dtype.
 */
#include "validate/interp.h"

#include <math.h>
#include <stdlib.h>

static int64_t numel(const IrTensor *t) { return ir_tensor_numel(t); }

static IrStatus oom(KernelArgs *a) {
    interp_error(a, "out of memory");
    return IR_ENOMEM;
}

typedef enum ActKind { ACT_SIGMOID, ACT_TANH, ACT_RELU, ACT_AFFINE, ACT_LEAKY, ACT_THRESH, ACT_SCALED_TANH, ACT_HARD_SIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS } ActKind;

typedef struct Act {
    ActKind k;
    double alpha, beta;
} Act;

static double act_apply(const Act *f, double x) {
    switch (f->k) {
    case ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ACT_TANH: return tanh(x);
    case ACT_RELU: return x > 0 ? x : 0;
    case ACT_AFFINE: return f->alpha * x + f->beta;
    case ACT_LEAKY: return x >= 0 ? x : f->alpha * x;
    case ACT_THRESH: return x > f->alpha ? x : 0;
    case ACT_SCALED_TANH: return f->alpha * tanh(f->beta * x);
    case ACT_HARD_SIGMOID: return fmax(0, fmin(1, f->alpha * x + f->beta));
    case ACT_ELU: return x >= 0 ? x : f->alpha * (exp(x) - 1);
    case ACT_SOFTSIGN: return x / (1 + fabs(x));
    case ACT_SOFTPLUS: return log1p(exp(x));
    }
    return x;
}

bool ir_rnn_activation(const char *s, int *kind, int *nparams, double *da, double *db) {
    static const struct {
        const char *name;
        ActKind k;
        int np;
        double a, b;
    } tab[] = {
        {"sigmoid", ACT_SIGMOID, 0, 0, 0}, {"tanh", ACT_TANH, 0, 0, 0}, {"relu", ACT_RELU, 0, 0, 0},
        {"affine", ACT_AFFINE, 2, 1.0, 0.0}, {"leakyrelu", ACT_LEAKY, 1, 0.01, 0},
        {"thresholdedrelu", ACT_THRESH, 1, 1.0, 0}, {"scaledtanh", ACT_SCALED_TANH, 2, 1.0, 1.0},
        {"hardsigmoid", ACT_HARD_SIGMOID, 2, 0.2, 0.5}, {"elu", ACT_ELU, 1, 1.0, 0},
        {"softsign", ACT_SOFTSIGN, 0, 0, 0}, {"softplus", ACT_SOFTPLUS, 0, 0, 0},
    };
    char low[32];
    size_t n = strlen(s);
    if (n >= sizeof low) return false;
    for (size_t i = 0; i <= n; i++) low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(low, tab[i].name) == 0) {
            *kind = (int)tab[i].k;
            *nparams = tab[i].np;
            *da = tab[i].a, *db = tab[i].b;
            return true;
        }
    return false;
}

typedef enum RnnKind { K_RNN, K_GRU, K_LSTM } RnnKind;

/* Reads `activations` (or the defaults) for `dirs` directions of `per` functions each. */
static IrStatus rnn_acts(KernelArgs *a, int dirs, int per, const ActKind *dflt, Act *acts) {
    IrAttrValue v;
    int n = dirs * per;
    if (!ir_node_attr(a->g, a->node, "activations", &v) || v.kind != IR_ATTR_STRINGS || v.count == 0) {
        for (int i = 0; i < n; i++) acts[i].k = dflt[i % per], acts[i].alpha = acts[i].beta = 0;
        return IR_OK;
    }
    if ((int)v.count != n) return interp_error(a, "activations must list %d functions", n);
    double al[16], be[16];
    int na = interp_attr_floats(a, "activation_alpha", al, 16), nb = interp_attr_floats(a, "activation_beta", be, 16);
    int ia = 0, ib = 0;
    for (int i = 0; i < n; i++) {
        const char *s = ir_str(a->g, v.strs[i]);
        int np;
        double da, db;
        int k;
        if (!ir_rnn_activation(s, &k, &np, &da, &db)) return interp_unsupported(a, s);
        acts[i].k = (ActKind)k;
        acts[i].alpha = da, acts[i].beta = db;
        if (np >= 1) acts[i].alpha = ia < na ? al[ia++] : da;
        if (np >= 2) acts[i].beta = ib < nb ? be[ib++] : db;
    }
    return IR_OK;
}

static double *load(const IrTensor *t) {
    if (!t || numel(t) == 0) return NULL;
    double *d = malloc((size_t)numel(t) * sizeof *d);
    if (!d) return NULL;
    for (int64_t i = 0; i < numel(t); i++) d[i] = interp_get_f(t, i);
    return d;
}

static IrStatus rnn_run(KernelArgs *a, RnnKind kind) {
    const int G = kind == K_RNN ? 1 : kind == K_GRU ? 3 : 4;
    const IrTensor *X = a->in[0], *W = a->in[1], *R = a->in[2];
    const IrTensor *B = a->n_in > 3 ? a->in[3] : NULL, *SL = a->n_in > 4 ? a->in[4] : NULL;
    const IrTensor *H0 = a->n_in > 5 ? a->in[5] : NULL, *C0 = kind == K_LSTM && a->n_in > 6 ? a->in[6] : NULL;
    const IrTensor *P = kind == K_LSTM && a->n_in > 7 ? a->in[7] : NULL;
    if (B && numel(B) == 0) B = NULL;
    if (SL && numel(SL) == 0) SL = NULL;
    if (H0 && numel(H0) == 0) H0 = NULL;
    if (C0 && numel(C0) == 0) C0 = NULL;
    if (P && numel(P) == 0) P = NULL;
    if (X->rank != 3 || W->rank != 3 || R->rank != 3) return interp_error(a, "X, W and R must have rank 3");
    bool bf = interp_attr_int(a, "layout") != 0;
    int64_t S = bf ? X->dims[1] : X->dims[0], Nb = bf ? X->dims[0] : X->dims[1], I = X->dims[2];
    int64_t H = interp_has_attr(a, "hidden_size") ? interp_attr_int(a, "hidden_size") : R->dims[2];
    const char *dir = interp_attr_string(a, "direction");
    if (!dir) dir = "forward";
    int dirs = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    bool rev_only = strcmp(dir, "reverse") == 0;
    if (dirs == 1 && !rev_only && strcmp(dir, "forward") != 0) return interp_error(a, "unknown direction '%s'", dir);
    if (W->dims[0] != dirs || W->dims[1] != G * H || W->dims[2] != I) return interp_error(a, "W must be [%d, %lld, %lld]", dirs, (long long)(G * H), (long long)I);
    if (R->dims[0] != dirs || R->dims[1] != G * H || R->dims[2] != H) return interp_error(a, "R must be [%d, %lld, %lld]", dirs, (long long)(G * H), (long long)H);
    if (B && numel(B) != dirs * 2 * G * H) return interp_error(a, "B must be [%d, %lld]", dirs, (long long)(2 * G * H));
    if (H0 && numel(H0) != dirs * Nb * H) return interp_error(a, "initial_h has the wrong size");
    if (C0 && numel(C0) != dirs * Nb * H) return interp_error(a, "initial_c has the wrong size");
    if (P && numel(P) != dirs * 3 * H) return interp_error(a, "P must be [%d, %lld]", dirs, (long long)(3 * H));
    if (SL && numel(SL) != Nb) return interp_error(a, "sequence_lens must have batch_size entries");
    static const ActKind d_rnn[] = {ACT_TANH}, d_gru[] = {ACT_SIGMOID, ACT_TANH}, d_lstm[] = {ACT_SIGMOID, ACT_TANH, ACT_TANH};
    int per = kind == K_RNN ? 1 : kind == K_GRU ? 2 : 3;
    Act acts[6];
    IrStatus st = rnn_acts(a, dirs, per, kind == K_RNN ? d_rnn : kind == K_GRU ? d_gru : d_lstm, acts);
    if (st) return st;
    bool has_clip = interp_has_attr(a, "clip");
    double clip = has_clip ? interp_attr_float(a, "clip") : 0;
    bool lbr = kind == K_GRU && interp_attr_int(a, "linear_before_reset") != 0;
    bool coupled = kind == K_LSTM && interp_attr_int(a, "input_forget") != 0;

    /* outputs */
    int64_t yd[4], hd[3];
    if (bf) yd[0] = Nb, yd[1] = S, yd[2] = dirs, yd[3] = H, hd[0] = Nb, hd[1] = dirs, hd[2] = H;
    else yd[0] = S, yd[1] = dirs, yd[2] = Nb, yd[3] = H, hd[0] = dirs, hd[1] = Nb, hd[2] = H;
    bool want[3];
    for (uint32_t i = 0; i < 3; i++) {
        want[i] = i < a->n_out && ir_node_result(a->g, a->node, i) != 0;
        if (want[i] && (st = interp_alloc_output(a, i, X->dtype, i == 0 ? 4 : 3, i == 0 ? yd : hd))) return st;
    }
    double *x = load(X), *w = load(W), *r = load(R), *b = load(B), *h0 = load(H0), *c0 = load(C0), *p = load(P);
    double *h = calloc((size_t)(Nb * H), sizeof(double)), *c = calloc((size_t)(Nb * H), sizeof(double));
    double *gates = malloc((size_t)(G * H) * sizeof(double)), *hn = malloc((size_t)H * sizeof(double));
    double *rh = malloc((size_t)H * sizeof(double));
    bool ok = x && w && r && (!B || b) && (!H0 || h0) && (!C0 || c0) && (!P || p) && h && c && gates && hn && rh;
    for (int d = 0; ok && d < dirs; d++) {
        bool reverse = rev_only || d == 1;
        const Act *f = &acts[d * per];
        const double *wd = w + d * G * H * I, *rd = r + d * G * H * H;
        const double *wb = b ? b + d * 2 * G * H : NULL, *rb = b ? wb + G * H : NULL;
        const double *pd = p ? p + d * 3 * H : NULL;
        for (int64_t i = 0; i < Nb * H; i++) {
            int64_t bi = i / H, j = i % H;
            int64_t hi = bf ? (bi * dirs + d) * H + j : (d * Nb + bi) * H + j;
            h[i] = h0 ? h0[hi] : 0;
            c[i] = c0 ? c0[hi] : 0;
        }
        for (int64_t bi = 0; bi < Nb; bi++) {
            int64_t len = SL ? interp_get_i(a->in[4], bi) : S;
            if (len < 0 || len > S) len = S;
            double *hb = h + bi * H, *cb = c + bi * H;
            for (int64_t s = 0; s < len; s++) {
                int64_t t = reverse ? len - 1 - s : s;
                const double *xt = x + (bf ? (bi * S + t) : (t * Nb + bi)) * I;
                /* pre-activations: x W^T + h R^T + biases (GRU's candidate gets h R^T later) */
                for (int64_t q = 0; q < G * H; q++) {
                    double acc = 0;
                    for (int64_t k = 0; k < I; k++) acc += xt[k] * wd[q * I + k];
                    if (wb) acc += wb[q];
                    bool cand = kind == K_GRU && q >= 2 * H;
                    if (!cand) {
                        for (int64_t k = 0; k < H; k++) acc += hb[k] * rd[q * H + k];
                        if (rb) acc += rb[q];
                    }
                    gates[q] = acc;
                }
                if (kind == K_RNN) {
                    for (int64_t j = 0; j < H; j++) {
                        double v = gates[j];
                        if (has_clip) v = fmax(-clip, fmin(clip, v));
                        hn[j] = act_apply(&f[0], v);
                    }
                } else if (kind == K_GRU) {
                    double *z = gates, *rr = gates + H, *hh = gates + 2 * H;
                    for (int64_t j = 0; j < 2 * H; j++) {
                        double v = gates[j];
                        if (has_clip) v = fmax(-clip, fmin(clip, v));
                        gates[j] = act_apply(&f[0], v);
                    }
                    for (int64_t j = 0; j < H; j++) {
                        const double *row = rd + (2 * H + j) * H;
                        double acc = 0;
                        if (lbr) {
                            for (int64_t k = 0; k < H; k++) acc += hb[k] * row[k];
                            if (rb) acc += rb[2 * H + j];
                            acc *= rr[j];
                        } else {
                            for (int64_t k = 0; k < H; k++) acc += rr[k] * hb[k] * row[k];
                            if (rb) acc += rb[2 * H + j];
                        }
                        double v = hh[j] + acc;
                        if (has_clip) v = fmax(-clip, fmin(clip, v));
                        rh[j] = act_apply(&f[1], v);
                    }
                    for (int64_t j = 0; j < H; j++) hn[j] = (1 - z[j]) * rh[j] + z[j] * hb[j];
                } else {
                    double *gi = gates, *go = gates + H, *gf = gates + 2 * H, *gc = gates + 3 * H;
                    for (int64_t j = 0; j < H; j++) {
                        double vi = gi[j] + (pd ? pd[j] * cb[j] : 0);
                        double vf = gf[j] + (pd ? pd[2 * H + j] * cb[j] : 0);
                        double vc = gc[j];
                        if (has_clip) vi = fmax(-clip, fmin(clip, vi)), vf = fmax(-clip, fmin(clip, vf)), vc = fmax(-clip, fmin(clip, vc));
                        double it = act_apply(&f[0], vi);
                        double ft = coupled ? 1 - it : act_apply(&f[0], vf);
                        double ct = act_apply(&f[1], vc);
                        double cn = ft * cb[j] + it * ct;
                        double vo = go[j] + (pd ? pd[H + j] * cn : 0);
                        if (has_clip) vo = fmax(-clip, fmin(clip, vo));
                        double ot = act_apply(&f[0], vo);
                        cb[j] = cn;
                        hn[j] = ot * act_apply(&f[2], cn);
                    }
                }
                memcpy(hb, hn, (size_t)H * sizeof(double));
                if (want[0])
                    for (int64_t j = 0; j < H; j++) {
                        int64_t yi = bf ? ((bi * S + t) * dirs + d) * H + j : ((t * dirs + d) * Nb + bi) * H + j;
                        interp_set_f(&a->out[0], yi, hb[j]);
                    }
            }
        }
        for (int64_t i = 0; i < Nb * H; i++) {
            int64_t bi = i / H, j = i % H;
            int64_t hi = bf ? (bi * dirs + d) * H + j : (d * Nb + bi) * H + j;
            if (want[1]) interp_set_f(&a->out[1], hi, h[i]);
            if (want[2]) interp_set_f(&a->out[2], hi, c[i]);
        }
    }
    free(x), free(w), free(r), free(b), free(h0), free(c0), free(p);
    free(h), free(c), free(gates), free(hn), free(rh);
    return ok ? IR_OK : oom(a);
}

IrStatus interp_RNN(KernelArgs *a) { return rnn_run(a, K_RNN); }
IrStatus interp_GRU(KernelArgs *a) { return rnn_run(a, K_GRU); }
IrStatus interp_LSTM(KernelArgs *a) { return rnn_run(a, K_LSTM); }

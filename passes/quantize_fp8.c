/* quantize-fp8: stores contraction weights as FP8 (OCP E4M3FN or E5M2) with f32 scales.
 *
 * MatMul and Gemm with a constant f32 weight become irtool.fp8_matmul: the weight is an fp8
 * constant [K, N] (Gemm's transB is applied at compile time) with a per-output-channel [N] or
 * per-tensor scale; the activation is quantized per tensor by irtool.quantize_fp8 with a static
 * scale (calibrated on sample inputs with the reference interpreter) or a dynamic one computed
 * by existing ops (Max(ReduceMax(Abs(x)) / fmt_max, FLT_MIN)). Conv keeps f32 activations: its
 * weight is an fp8 constant dequantized by irtool.dequantize_fp8 (axis 0) right before the Conv
 * (weight-only; there is no fp8 convolution op). With `budget`, each layer is quantized alone on
 * a copy of the graph and kept in f32 when the relative L2 error of the model outputs over the
 * samples exceeds the budget. Every fp8 op is one the interpreter executes exactly.
 */
#include "ir/shape.h"
#include "passes/passes.h"
#include "validate/validate.h"
#include "ir/json.h"

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STAT_CAP (1u << 22) /* |x| values kept per calibrated activation (then decimated) */
#define MSE_CANDIDATES 17   /* amax * 2^(-k/4), k = 0..16 */

/* ---- options --------------------------------------------------------------------------------- */

typedef struct Fp8Format {
    const char *name;
    IrDType dt;
    float max;
} Fp8Format;

static const Fp8Format FORMATS[] = {{"e4m3fn", IR_DTYPE_F8E4M3FN, 448.0f}, {"e5m2", IR_DTYPE_F8E5M2, 57344.0f}};

typedef enum CalibKind { CALIB_DYNAMIC, CALIB_MAX, CALIB_PERCENTILE, CALIB_MSE } CalibKind;

typedef struct Opts {
    const Fp8Format *fmt;
    bool per_channel;
    CalibKind calib;
    double percentile;
    const char *calib_text, *samples, *report;
    bool has_budget;
    double budget;
} Opts;

static uint8_t fp8_encode(const Fp8Format *f, float x) {
    return f->dt == IR_DTYPE_F8E4M3FN ? ir_f32_to_f8e4m3fn(x, true) : ir_f32_to_f8e5m2(x, true);
}

static float fp8_decode(const Fp8Format *f, uint8_t v) {
    return f->dt == IR_DTYPE_F8E4M3FN ? ir_f8e4m3fn_to_f32(v) : ir_f8e5m2_to_f32(v);
}

static bool parse_double(const char *s, double *out) {
    char *end;
    if (!s || !*s) return false;
    *out = strtod(s, &end);
    return *end == 0 && isfinite(*out);
}

static IrStatus parse_opts(IrPassContext *c, Opts *o) {
    memset(o, 0, sizeof *o);
    const char *fmt = ir_pass_option(c, "format"), *gran = ir_pass_option(c, "granularity");
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; i++)
        if (fmt && strcmp(fmt, FORMATS[i].name) == 0) o->fmt = &FORMATS[i];
    if (!o->fmt) {
        ir_pass_error(c, 0, "format must be e4m3fn or e5m2, got '%s'", fmt ? fmt : "");
        return IR_EINVAL;
    }
    if (!gran || (strcmp(gran, "channel") != 0 && strcmp(gran, "tensor") != 0)) {
        ir_pass_error(c, 0, "granularity must be channel or tensor, got '%s'", gran ? gran : "");
        return IR_EINVAL;
    }
    o->per_channel = strcmp(gran, "channel") == 0;
    o->samples = ir_pass_option(c, "samples");
    o->report = ir_pass_option(c, "report");
    if (o->samples && !*o->samples) o->samples = NULL;
    if (o->report && !*o->report) o->report = NULL;
    const char *cal = ir_pass_option(c, "calib");
    if (!cal || !*cal) cal = o->samples ? "max" : "dynamic";
    o->calib_text = cal;
    if (strcmp(cal, "dynamic") == 0) {
        o->calib = CALIB_DYNAMIC;
    } else if (strcmp(cal, "max") == 0) {
        o->calib = CALIB_MAX;
    } else if (strcmp(cal, "mse") == 0) {
        o->calib = CALIB_MSE;
    } else if (strncmp(cal, "percentile:", 11) == 0 && parse_double(cal + 11, &o->percentile) &&
               o->percentile > 0 && o->percentile <= 100) {
        o->calib = CALIB_PERCENTILE;
    } else {
        ir_pass_error(c, 0, "calib must be max, percentile:P (0 < P <= 100), mse or dynamic, got '%s'", cal);
        return IR_EINVAL;
    }
    const char *b = ir_pass_option(c, "budget");
    if (b && *b) {
        if (!parse_double(b, &o->budget) || o->budget < 0) {
            ir_pass_error(c, 0, "budget must be a non-negative number, got '%s'", b);
            return IR_EINVAL;
        }
        o->has_budget = true;
    }
    if (!o->samples && (o->calib != CALIB_DYNAMIC || o->has_budget)) {
        ir_pass_error(c, 0, "%s needs samples=DIR", o->has_budget ? "budget" : "static calibration");
        return IR_EINVAL;
    }
    return IR_OK;
}

/* ---- layers ---------------------------------------------------------------------------------- */

typedef enum Decision { DEC_QUANTIZE, DEC_KEEP, DEC_SKIP } Decision;

/* A contraction with a constant weight, in walk order (the same order in a reparsed copy). */
typedef struct Layer {
    IrNodeId node;
    IrOp op;
    IrValueId act, weight;   /* as found (the activation is re-read when rewriting) */
    char *name;              /* node name, else result name */
    const char *skip_reason; /* static text; NULL when quantizable */
    bool act_static;
    float act_scale;
    bool measured;
    double error;
    Decision decision;
    int64_t bytes_before, bytes_after;
} Layer;

typedef struct Layers {
    Layer *v;
    uint32_t n;
} Layers;

static void layers_free(Layers *ls) {
    for (uint32_t i = 0; i < ls->n; i++) free(ls->v[i].name);
    free(ls->v);
    ls->v = NULL;
    ls->n = 0;
}

/* Static dims of a value's type; false unless ranked and all constant. */
static bool static_dims(const IrGraph *g, IrTypeId t, uint32_t *rank, int64_t *dims) {
    uint32_t r = ir_type_rank(g, t);
    if (!t || r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return false;
    for (uint32_t i = 0; i < r; i++)
        if (!ir_expr_is_const(g, ir_type_dims(g, t)[i], &dims[i])) return false;
    *rank = r;
    return true;
}

/* A graph constant (not a Constant node) with static dims, or 0. */
static IrConstId graph_const(const IrGraph *g, IrValueId v) {
    if (!v || ir_value_kind(g, v) != IR_VALUE_CONST) return 0;
    return ir_value_const(g, v);
}

static const char *skip_reason(const IrGraph *g, IrNodeId n, IrOp op, IrValueId w) {
    IrConstId k = graph_const(g, w);
    uint32_t rank;
    int64_t dims[IR_MAX_RANK];
    if (!static_dims(g, ir_const_type(g, k), &rank, dims)) return "weight shape is not static";
    if (ir_type_dtype(g, ir_const_type(g, k)) != IR_DTYPE_F32) return "weight is not f32";
    IrDType adt = ir_type_dtype(g, ir_value_type(g, ir_node_operand(g, n, 0)));
    if (adt != IR_DTYPE_NONE && adt != IR_DTYPE_F32) return "activation is not f32";
    if (op == IR_OP_CONV) return rank >= 3 ? NULL : "weight rank below 3";
    if (rank != 2) return "weight is not a matrix";
    if (op == IR_OP_GEMM && ir_node_num_operands(g, n) > 2) {
        IrValueId cv = ir_node_operand(g, n, 2);
        double beta = ir_node_attr_float(g, n, "beta", NULL);
        if (cv && !graph_const(g, cv) && beta != 1.0) return "beta != 1 with a non-constant C (kept unquantized)";
        if (cv && graph_const(g, cv) && ir_type_dtype(g, ir_const_type(g, graph_const(g, cv))) != IR_DTYPE_F32)
            return "C is not f32";
    }
    return NULL;
}

static IrStatus find_layers(const IrGraph *g, Layers *out) {
    out->v = NULL;
    out->n = 0;
    uint32_t cap = 0;
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        IrOp op = ir_node_op(g, n);
        if (op != IR_OP_MAT_MUL && op != IR_OP_GEMM && op != IR_OP_CONV) continue;
        IrValueId x = ir_node_operand(g, n, 0), w = ir_node_operand(g, n, 1);
        if (!w || !graph_const(g, w) || !x || graph_const(g, x)) continue; /* not a layer */
        if (out->n == cap) {
            cap = cap ? 2 * cap : 16;
            Layer *nv = realloc(out->v, cap * sizeof *nv);
            if (!nv) return IR_ENOMEM;
            out->v = nv;
        }
        Layer *L = &out->v[out->n];
        memset(L, 0, sizeof *L);
        const char *nm = ir_node_name(g, n);
        L->name = strdup(*nm ? nm : ir_value_name(g, ir_node_result(g, n, 0)));
        if (!L->name) return IR_ENOMEM;
        out->n++;
        L->node = n;
        L->op = op;
        L->act = x;
        L->weight = w;
        L->skip_reason = skip_reason(g, n, op, w);
        L->decision = L->skip_reason ? DEC_SKIP : DEC_QUANTIZE;
        L->bytes_before = L->bytes_after = (int64_t)ir_const_nbytes(g, ir_value_const(g, w));
    }
    return IR_OK;
}

/* ---- samples and calibration ----------------------------------------------------------------- */

typedef struct Samples {
    uint32_t n_inputs, n; /* tensors: n sets of n_inputs */
    IrTensor *t;
    IrTensor *ref;    /* reference outputs: n sets of n_outputs */
    uint32_t n_outputs;
} Samples;

static void samples_free(Samples *s) {
    for (uint32_t i = 0; s->t && i < s->n * s->n_inputs; i++) ir_tensor_free(&s->t[i]);
    for (uint32_t i = 0; s->ref && i < s->n * s->n_outputs; i++) ir_tensor_free(&s->ref[i]);
    free(s->t);
    free(s->ref);
    memset(s, 0, sizeof *s);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The sample indices k of files `<name>_<k>.npy` in dir, sorted; count 0 when none. */
static IrStatus sample_indices(const char *dir, const char *name, int64_t **ks, uint32_t *count) {
    *ks = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) return IR_EIO;
    size_t nl = strlen(name), cap = 0;
    struct dirent *e;
    IrStatus st = IR_OK;
    while ((e = readdir(d))) {
        const char *f = e->d_name;
        size_t fl = strlen(f);
        if (fl < nl + 6 || strncmp(f, name, nl) != 0 || f[nl] != '_' || strcmp(f + fl - 4, ".npy") != 0) continue;
        int64_t k = 0;
        size_t i = nl + 1;
        for (; i < fl - 4 && f[i] >= '0' && f[i] <= '9' && k < 100000000; i++) k = k * 10 + (f[i] - '0');
        if (i != fl - 4) continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *nk = realloc(*ks, cap * sizeof *nk);
            if (!nk) {
                st = IR_ENOMEM;
                break;
            }
            *ks = nk;
        }
        (*ks)[(*count)++] = k;
    }
    closedir(d);
    if (*count) qsort(*ks, *count, sizeof **ks, cmp_i64);
    return st;
}

/* Reads samples=DIR: per graph input `<name>.npy` (one sample) or `<name>_<k>.npy` (k sorted). */
static IrStatus load_samples(IrPassContext *c, const IrGraph *g, const char *dir, Samples *s) {
    memset(s, 0, sizeof *s);
    s->n_inputs = ir_graph_num_inputs(g);
    if (!s->n_inputs) {
        ir_pass_error(c, 0, "samples: the graph has no inputs");
        return IR_EINVAL;
    }
    IrStatus st = IR_OK;
    char path[4096];
    for (uint32_t i = 0; i < s->n_inputs && !st; i++) {
        const char *name = ir_value_name(g, ir_graph_input(g, i));
        int64_t *ks;
        uint32_t cnt;
        if ((st = sample_indices(dir, name, &ks, &cnt))) {
            ir_pass_error(c, 0, "samples: cannot read directory '%s'", dir);
            break;
        }
        uint32_t n = cnt ? cnt : 1;
        if (i == 0) {
            s->n = n;
            s->t = calloc((size_t)n * s->n_inputs, sizeof *s->t);
            if (!s->t) st = IR_ENOMEM;
        } else if (n != s->n) {
            ir_pass_error(c, 0, "samples: input '%s' has %u samples, '%s' has %u", name, n,
                          ir_value_name(g, ir_graph_input(g, 0)), s->n);
            st = IR_EINVAL;
        }
        for (uint32_t k = 0; k < n && !st; k++) {
            if (cnt) snprintf(path, sizeof path, "%s/%s_%lld.npy", dir, name, (long long)ks[k]);
            else snprintf(path, sizeof path, "%s/%s.npy", dir, name);
            st = ir_npy_read(path, ir_pass_diag(c), &s->t[(size_t)k * s->n_inputs + i]);
            if (st) ir_pass_error(c, 0, "samples: cannot read '%s'", path);
        }
        free(ks);
    }
    if (st) samples_free(s);
    return st;
}

typedef struct Stat {
    bool seen;
    float amax;
    float *vals; /* |x| values, every `stride`-th one observed */
    size_t n, stride, count;
} Stat;

typedef struct Calib {
    int32_t *slot; /* value id -> stat index, -1 none */
    uint32_t n_values;
    Stat *stats;
    uint32_t n_stats;
    bool keep_values;
    bool failed;
} Calib;

static void stat_observe(Calib *cb, Stat *s, const IrTensor *t) {
    if (!ir_dtype_is_float(t->dtype)) return;
    int64_t n = ir_tensor_numel(t);
    s->seen = true;
    for (int64_t i = 0; i < n; i++) {
        float a = fabsf((float)ir_elem_get_f64(t->dtype, t->data, (size_t)i));
        if (a > s->amax && a <= FLT_MAX) s->amax = a; /* NaN and inf do not set the range */
        if (!cb->keep_values || isnan(a)) continue;
        if (s->count++ % s->stride) continue;
        if (!s->vals) {
            s->vals = malloc(STAT_CAP * sizeof(float));
            if (!s->vals) {
                cb->failed = true;
                return;
            }
        }
        if (s->n == STAT_CAP) { /* keep every other value, observe half as often */
            for (size_t j = 0; j < STAT_CAP / 2; j++) s->vals[j] = s->vals[2 * j];
            s->n = STAT_CAP / 2;
            s->stride *= 2;
            s->count = 1;
        }
        s->vals[s->n++] = a;
    }
}

static void calib_on_value(void *user, const IrGraph *g, IrValueId v, const IrTensor *t) {
    (void)g;
    Calib *cb = user;
    if (v <= cb->n_values && cb->slot[v] >= 0) stat_observe(cb, &cb->stats[cb->slot[v]], t);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Mean squared error of fp8 round trips of vals at scale s (in f32, as the kernels compute). */
static double mse_at(const Fp8Format *f, const float *vals, size_t n, float s) {
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        float dq = fp8_decode(f, fp8_encode(f, vals[i] / s)) * s;
        double d = (double)vals[i] - (double)dq;
        e += d * d;
    }
    return n ? e / (double)n : 0;
}

/* The activation scale from a stat; false when nothing was observed (stay dynamic). */
static bool stat_scale(const Opts *o, Stat *s, float *scale) {
    if (!s->seen) return false;
    float clip = s->amax;
    if (o->calib == CALIB_PERCENTILE && s->n) {
        qsort(s->vals, s->n, sizeof *s->vals, cmp_float);
        double pos = o->percentile / 100.0 * (double)(s->n - 1); /* numpy's linear rule */
        size_t lo = (size_t)floor(pos), hi = lo + 1 < s->n ? lo + 1 : lo;
        double fr = pos - (double)lo;
        float p = (float)((double)s->vals[lo] + fr * ((double)s->vals[hi] - (double)s->vals[lo]));
        if (p > 0) clip = p;
    }
    float sc = clip / o->fmt->max;
    if (o->calib == CALIB_MSE && s->n && s->amax > 0) {
        double best = INFINITY;
        for (int k = 0; k < MSE_CANDIDATES; k++) {
            float cand = (float)((double)s->amax * exp2(-k / 4.0) / (double)o->fmt->max);
            if (!(cand > 0)) break;
            double e = mse_at(o->fmt, s->vals, s->n, cand);
            if (e < best) best = e, sc = cand;
        }
    }
    *scale = sc > 0 && isfinite(sc) ? sc : 1.0f;
    return true;
}

static void calib_free(Calib *cb) {
    for (uint32_t i = 0; cb->stats && i < cb->n_stats; i++) free(cb->stats[i].vals);
    free(cb->stats);
    free(cb->slot);
    memset(cb, 0, sizeof *cb);
}

/* Runs the samples through the interpreter, observing each layer's activation; keeps the
 * reference outputs; sets act_static/act_scale of every quantizable layer. */
static IrStatus calibrate(IrPassContext *c, const Opts *o, const IrGraph *g, Layers *ls, Samples *s) {
    Calib cb = {0};
    cb.n_values = ir_graph_num_values(g);
    cb.slot = malloc(((size_t)cb.n_values + 1) * sizeof *cb.slot);
    cb.stats = calloc(ls->n ? ls->n : 1, sizeof *cb.stats);
    cb.keep_values = o->calib == CALIB_PERCENTILE || o->calib == CALIB_MSE;
    s->n_outputs = ir_graph_num_outputs(g);
    s->ref = calloc((size_t)s->n * (s->n_outputs ? s->n_outputs : 1), sizeof *s->ref);
    if (!cb.slot || !cb.stats || !s->ref) {
        calib_free(&cb);
        return IR_ENOMEM;
    }
    for (uint32_t v = 0; v <= cb.n_values; v++) cb.slot[v] = -1;
    for (uint32_t i = 0; i < ls->n; i++) {
        if (ls->v[i].decision == DEC_SKIP || cb.slot[ls->v[i].act] >= 0) continue;
        cb.stats[cb.n_stats].stride = 1;
        cb.slot[ls->v[i].act] = (int32_t)cb.n_stats++;
    }
    IrInterpOptions io = {0, calib_on_value, &cb};
    IrStatus st = IR_OK;
    for (uint32_t k = 0; k < s->n && !st; k++) {
        const IrTensor *in = &s->t[(size_t)k * s->n_inputs];
        for (uint32_t i = 0; i < s->n_inputs; i++) { /* graph inputs are not reported by on_value */
            IrValueId a = ir_graph_input(g, i);
            if (cb.slot[a] >= 0) stat_observe(&cb, &cb.stats[cb.slot[a]], &in[i]);
        }
        st = ir_interp_run(g, in, s->n_inputs, &s->ref[(size_t)k * s->n_outputs], &io, ir_pass_diag(c));
        if (st) ir_pass_error(c, 0, "calibration: the interpreter failed on sample %u", k);
        if (!st && cb.failed) st = IR_ENOMEM;
    }
    for (uint32_t i = 0; i < ls->n && !st; i++) {
        Layer *L = &ls->v[i];
        if (L->decision != DEC_SKIP && o->calib != CALIB_DYNAMIC)
            L->act_static = stat_scale(o, &cb.stats[cb.slot[L->act]], &L->act_scale);
    }
    calib_free(&cb);
    return st;
}

/* Relative L2 error of g's outputs against the reference over all samples. */
static IrStatus sample_error(IrPassContext *c, const IrGraph *g, const Samples *s, double *err) {
    uint32_t no = ir_graph_num_outputs(g);
    if (no != s->n_outputs) return IR_EINVAL;
    IrTensor *outs = calloc(no ? no : 1, sizeof *outs);
    if (!outs) return IR_ENOMEM;
    double num = 0, den = 0;
    IrStatus st = IR_OK;
    for (uint32_t k = 0; k < s->n && !st; k++) {
        st = ir_interp_run(g, &s->t[(size_t)k * s->n_inputs], s->n_inputs, outs, NULL, ir_pass_diag(c));
        for (uint32_t i = 0; i < no && !st; i++) {
            const IrTensor *r = &s->ref[(size_t)k * no + i];
            int64_t n = ir_tensor_numel(r);
            if (ir_tensor_numel(&outs[i]) != n) st = IR_EVERIFY;
            for (int64_t j = 0; j < n && !st; j++) {
                double a = ir_elem_get_f64(outs[i].dtype, outs[i].data, (size_t)j);
                double b = ir_elem_get_f64(r->dtype, r->data, (size_t)j);
                num += (a - b) * (a - b);
                den += b * b;
            }
        }
        for (uint32_t i = 0; i < no; i++) ir_tensor_free(&outs[i]);
    }
    free(outs);
    *err = den > 0 ? sqrt(num / den) : sqrt(num);
    if (isnan(*err)) *err = INFINITY;
    return st;
}

/* ---- rewriting ------------------------------------------------------------------------------- */

typedef struct WEntry {
    IrValueId w;
    bool trans;
    float alpha;
    IrValueId wq, ws;
} WEntry;

typedef struct AEntry {
    IrValueId x;
    IrRegionId region;
    IrValueId xq, xs;
} AEntry;

typedef struct Rewriter {
    IrGraph *g;
    const Opts *o;
    WEntry *w;
    uint32_t nw;
    AEntry *a;
    uint32_t na;
    IrValueId c_fmax, c_tiny; /* dynamic scale constants */
    int64_t created_bytes;     /* fp8 weights and their scales */
} Rewriter;

static void rewriter_free(Rewriter *rw) {
    free(rw->w);
    free(rw->a);
}

/* `base` + `suffix`, made unique among value names. */
static void unique_name(const IrGraph *g, const char *base, const char *suffix, char *buf, size_t cap) {
    /* the base is cut at 400 bytes so the counter always fits */
    snprintf(buf, cap, "%.400s%s", base, suffix);
    for (unsigned i = 1; ir_value_find(g, buf, strlen(buf)); i++) snprintf(buf, cap, "%.400s%s_%u", base, suffix, i);
}

static IrValueId add_const(IrGraph *g, const char *base, const char *suffix, IrDType dt, uint32_t rank,
                           const int64_t *dims, const void *data, size_t nbytes) {
    char name[512];
    unique_name(g, base, suffix, name, sizeof name);
    IrConstId k = ir_const_create(g, ir_type_tensor_i64(g, dt, rank, dims), data, nbytes);
    return k ? ir_graph_add_const_value(g, name, k) : 0;
}

static IrValueId add_scalar(IrGraph *g, const char *base, const char *suffix, float v) {
    return add_const(g, base, suffix, IR_DTYPE_F32, 0, NULL, &v, sizeof v);
}

static void set_int(IrGraph *g, IrNodeId n, const char *name, int64_t v) {
    IrAttrValue a = {.kind = IR_ATTR_INT, .i = v};
    ir_node_set_attr(g, n, name, &a);
}

/* A new node before `before`, named "<layer>/<what>", with the layer's provenance. */
static IrNodeId new_node(IrGraph *g, IrNodeId before, IrOp op, uint32_t n_ops, const IrValueId *ops,
                         const char *result_name, IrTypeId type, const char *layer, const char *what) {
    char rn[512], nn[512];
    const char *names[1] = {NULL};
    if (result_name) {
        unique_name(g, result_name, "", rn, sizeof rn);
        names[0] = rn;
    }
    IrNodeId n = ir_node_create_before(g, before, op, n_ops, ops, 1, names, type ? &type : NULL);
    if (!n) return 0;
    snprintf(nn, sizeof nn, "%s/%s", layer, what);
    ir_node_set_name(g, n, nn);
    ir_pass_inherit_provenance(g, n, before);
    return n;
}

/* The fp8 constant and scale of weight w: `trans` stores w^T ([N, K] -> [K, N]); channels are
 * the last dim for matrices, dim 0 for conv weights; alpha multiplies the scale afterwards. */
static IrStatus weight_fp8(Rewriter *rw, IrValueId w, bool conv, bool trans, float alpha, IrValueId *wq,
                           IrValueId *ws) {
    IrGraph *g = rw->g;
    for (uint32_t i = 0; i < rw->nw; i++)
        if (rw->w[i].w == w && rw->w[i].trans == trans && rw->w[i].alpha == alpha) {
            *wq = rw->w[i].wq, *ws = rw->w[i].ws;
            return IR_OK;
        }
    IrConstId k = ir_value_const(g, w);
    uint32_t rank;
    int64_t dims[IR_MAX_RANK];
    if (!static_dims(g, ir_const_type(g, k), &rank, dims)) return IR_EINVAL;
    int64_t n = ir_shape_numel(rank, dims);
    const float *src = ir_const_data(g, k);
    float *tbuf = NULL;
    if (trans) {
        tbuf = malloc((size_t)(n ? n : 1) * sizeof *tbuf);
        if (!tbuf) return IR_ENOMEM;
        for (int64_t r = 0; r < dims[0]; r++)
            for (int64_t c = 0; c < dims[1]; c++) tbuf[c * dims[0] + r] = src[r * dims[1] + c];
        int64_t t = dims[0];
        dims[0] = dims[1], dims[1] = t;
        src = tbuf;
    }
    int64_t ch = 1, inner = 1;
    if (rw->o->per_channel) {
        ch = conv ? dims[0] : dims[rank - 1];
        inner = conv && ch ? n / ch : 1;
    }
    float *scale = calloc((size_t)(ch ? ch : 1), sizeof *scale);
    uint8_t *q = malloc((size_t)(n ? n : 1));
    IrStatus st = scale && q ? IR_OK : IR_ENOMEM;
    for (int64_t i = 0; i < n && !st; i++) {
        float a = fabsf(src[i]);
        int64_t c = (i / inner) % ch;
        if (a > scale[c] && a <= FLT_MAX) scale[c] = a;
    }
    for (int64_t c = 0; c < ch && !st; c++) {
        float s = scale[c] / rw->o->fmt->max;
        scale[c] = s > 0 && isfinite(s) ? s : 1.0f;
    }
    for (int64_t i = 0; i < n && !st; i++) q[i] = fp8_encode(rw->o->fmt, src[i] / scale[(i / inner) % ch]);
    for (int64_t c = 0; c < ch && !st; c++) scale[c] *= alpha;
    if (!st) {
        const char *wn = ir_value_name(g, w);
        char base[400];
        snprintf(base, sizeof base, "%s%s", wn, trans ? ".T" : "");
        *wq = add_const(g, base, ".fp8", rw->o->fmt->dt, rank, dims, q, (size_t)n);
        *ws = add_const(g, base, ".scale", IR_DTYPE_F32, rw->o->per_channel ? 1 : 0, &ch, scale,
                        (size_t)ch * sizeof(float));
        st = *wq && *ws ? IR_OK : ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
    }
    if (!st) {
        rw->created_bytes += n + ch * (int64_t)sizeof(float);
        WEntry *nw = realloc(rw->w, (rw->nw + 1) * sizeof *nw);
        if (!nw) st = IR_ENOMEM;
        else rw->w = nw, rw->w[rw->nw++] = (WEntry){w, trans, alpha, *wq, *ws};
    }
    free(tbuf);
    free(scale);
    free(q);
    return st;
}

/* The fp8 activation and its scale, quantized before `before` (shared per value and region). */
static IrStatus act_fp8(Rewriter *rw, const Layer *L, IrNodeId before, IrValueId x, IrValueId *xq, IrValueId *xs) {
    IrGraph *g = rw->g;
    IrRegionId r = ir_node_region(g, before);
    for (uint32_t i = 0; i < rw->na; i++)
        if (rw->a[i].x == x && rw->a[i].region == r) {
            *xq = rw->a[i].xq, *xs = rw->a[i].xs;
            return IR_OK;
        }
    const char *xn = ir_value_name(g, x);
    char base[400];
    snprintf(base, sizeof base, "%s", xn);
    if (L->act_static) {
        *xs = add_scalar(g, base, ".fp8_scale", L->act_scale);
    } else {
        if (!rw->c_fmax) rw->c_fmax = add_scalar(g, "fp8", rw->o->fmt->dt == IR_DTYPE_F8E4M3FN ? ".e4m3fn_max" : ".e5m2_max", rw->o->fmt->max);
        if (!rw->c_tiny) rw->c_tiny = add_scalar(g, "fp8", ".min_scale", FLT_MIN);
        IrTypeId scalar = ir_type_tensor_i64(g, IR_DTYPE_F32, 0, NULL);
        char rn1[420], rn2[420], rn3[420], rn4[420];
        snprintf(rn1, sizeof rn1, "%s.abs", base);
        snprintf(rn2, sizeof rn2, "%s.amax", base);
        snprintf(rn3, sizeof rn3, "%s.amax_scaled", base);
        snprintf(rn4, sizeof rn4, "%s.fp8_scale", base);
        IrNodeId n1 = new_node(g, before, IR_OP_ABS, 1, &x, rn1, 0, L->name, "abs_x");
        IrValueId v1 = n1 ? ir_node_result(g, n1, 0) : 0;
        IrNodeId n2 = v1 ? new_node(g, before, IR_OP_REDUCE_MAX, 1, &v1, rn2, scalar, L->name, "amax_x") : 0;
        if (n2) set_int(g, n2, "keepdims", 0);
        IrValueId d[2] = {n2 ? ir_node_result(g, n2, 0) : 0, rw->c_fmax};
        IrNodeId n3 = d[0] ? new_node(g, before, IR_OP_DIV, 2, d, rn3, scalar, L->name, "scale_x") : 0;
        IrValueId m[2] = {n3 ? ir_node_result(g, n3, 0) : 0, rw->c_tiny};
        IrNodeId n4 = m[0] ? new_node(g, before, IR_OP_MAX, 2, m, rn4, scalar, L->name, "scale_x_nz") : 0;
        *xs = n4 ? ir_node_result(g, n4, 0) : 0;
    }
    if (!*xs) return ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
    IrValueId ops[2] = {x, *xs};
    char rn[420];
    snprintf(rn, sizeof rn, "%s.fp8", base);
    IrNodeId qn = new_node(g, before, IR_OP_QUANTIZE_FP8, 2, ops, rn, 0, L->name, "quantize_x");
    if (!qn) return ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
    IrAttrValue fa = {.kind = IR_ATTR_STRING, .s = ir_str_intern_cstr(g, rw->o->fmt->name)};
    ir_node_set_attr(g, qn, "format", &fa);
    set_int(g, qn, "saturate", 1);
    *xq = ir_node_result(g, qn, 0);
    AEntry *na = realloc(rw->a, (rw->na + 1) * sizeof *na);
    if (!na) return IR_ENOMEM;
    rw->a = na;
    rw->a[rw->na++] = (AEntry){x, r, *xq, *xs};
    return IR_OK;
}

/* Gemm's C as an fp8_matmul bias ([N] or [1, N] or one element) or as a later Add. */
static IrStatus gemm_bias(Rewriter *rw, const Layer *L, IrNodeId n, int64_t N, IrValueId *bias, IrValueId *add) {
    IrGraph *g = rw->g;
    *bias = *add = 0;
    IrValueId cv = ir_node_num_operands(g, n) > 2 ? ir_node_operand(g, n, 2) : 0;
    if (!cv) return IR_OK;
    float beta = (float)ir_node_attr_float(g, n, "beta", NULL);
    IrConstId k = graph_const(g, cv);
    if (!k) { /* beta == 1 here (skip_reason) */
        *add = cv;
        return IR_OK;
    }
    uint32_t rank;
    int64_t dims[IR_MAX_RANK];
    if (!static_dims(g, ir_const_type(g, k), &rank, dims)) return IR_EINVAL;
    int64_t numel = ir_shape_numel(rank, dims);
    IrValueId c2 = cv;
    if (beta != 1.0f) {
        const float *src = ir_const_data(g, k);
        float *b = malloc((size_t)(numel ? numel : 1) * sizeof *b);
        if (!b) return IR_ENOMEM;
        for (int64_t i = 0; i < numel; i++) b[i] = beta * src[i];
        c2 = add_const(g, L->name, ".beta_c", IR_DTYPE_F32, rank, dims, b, (size_t)numel * sizeof *b);
        free(b);
        if (!c2) return ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
    }
    bool row = numel == 1 || (numel == N && (rank == 1 || (rank == 2 && dims[0] == 1)));
    if (row) *bias = c2;
    else *add = c2;
    return IR_OK;
}

static IrStatus rewrite_contraction(Rewriter *rw, Layer *L) {
    IrGraph *g = rw->g;
    IrNodeId n = L->node;
    IrValueId x = ir_node_operand(g, n, 0), w = ir_node_operand(g, n, 1);
    bool gemm = L->op == IR_OP_GEMM;
    bool trans = gemm && ir_node_attr_int(g, n, "transB", NULL) != 0;
    float alpha = gemm ? (float)ir_node_attr_float(g, n, "alpha", NULL) : 1.0f;
    if (gemm && ir_node_attr_int(g, n, "transA", NULL) != 0) {
        IrNodeId t = new_node(g, n, IR_OP_TRANSPOSE, 1, &x, NULL, 0, L->name, "transpose_a");
        if (!t) return ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
        IrAttrValue perm = {.kind = IR_ATTR_INTS, .count = 2, .ints = (const int64_t[]){1, 0}};
        ir_node_set_attr(g, t, "perm", &perm);
        x = ir_node_result(g, t, 0);
    }
    IrValueId xq = 0, xs = 0, wq = 0, ws = 0, bias = 0, add = 0;
    IrStatus st = act_fp8(rw, L, n, x, &xq, &xs);
    if (!st) st = weight_fp8(rw, w, false, trans, alpha, &wq, &ws);
    if (st) return st;
    L->bytes_after = (int64_t)(ir_const_nbytes(g, ir_value_const(g, wq)) + ir_const_nbytes(g, ir_value_const(g, ws)));
    if (gemm) {
        const IrExprId *d = ir_type_dims(g, ir_value_type(g, wq));
        int64_t N = -1;
        (void)ir_expr_is_const(g, d[1], &N);
        if ((st = gemm_bias(rw, L, n, N, &bias, &add))) return st;
    }
    IrValueId ops[5] = {xq, wq, xs, ws, bias};
    IrTypeId rt = ir_value_type(g, ir_node_result(g, n, 0));
    IrNodeId mm = ir_node_create_before(g, n, IR_OP_FP8_MAT_MUL, bias ? 5 : 4, ops, 1, NULL, add ? NULL : &rt);
    if (!mm) return ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
    ir_node_set_name(g, mm, ir_node_name(g, n));
    ir_pass_inherit_provenance(g, mm, n);
    IrAttrValue od = {.kind = IR_ATTR_DTYPE, .i = IR_DTYPE_F32};
    ir_node_set_attr(g, mm, "out_dtype", &od);
    IrValueId y = ir_node_result(g, mm, 0);
    if (add) {
        IrValueId ao[2] = {y, add};
        IrNodeId an = new_node(g, n, IR_OP_ADD, 2, ao, NULL, rt, L->name, "add_c");
        if (!an) return ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
        y = ir_node_result(g, an, 0);
    }
    return ir_pass_replace_node(g, n, y);
}

static IrStatus rewrite_conv(Rewriter *rw, Layer *L) {
    IrGraph *g = rw->g;
    IrNodeId n = L->node;
    IrValueId w = ir_node_operand(g, n, 1), wq = 0, ws = 0;
    IrStatus st = weight_fp8(rw, w, true, false, 1.0f, &wq, &ws);
    if (st) return st;
    L->bytes_after = (int64_t)(ir_const_nbytes(g, ir_value_const(g, wq)) + ir_const_nbytes(g, ir_value_const(g, ws)));
    IrValueId ops[2] = {wq, ws};
    char rn[420];
    snprintf(rn, sizeof rn, "%s.dq", ir_value_name(g, w));
    IrNodeId d = new_node(g, n, IR_OP_DEQUANTIZE_FP8, 2, ops, rn, ir_value_type(g, w), L->name, "dequantize_w");
    if (!d) return ir_graph_status(g) ? ir_graph_status(g) : IR_ENOMEM;
    if (rw->o->per_channel) set_int(g, d, "axis", 0);
    IrAttrValue to = {.kind = IR_ATTR_DTYPE, .i = IR_DTYPE_F32};
    ir_node_set_attr(g, d, "to", &to);
    ir_node_set_operand(g, n, 1, ir_node_result(g, d, 0));
    return IR_OK;
}

static IrStatus rewrite_layer(Rewriter *rw, Layer *L) {
    return L->op == IR_OP_CONV ? rewrite_conv(rw, L) : rewrite_contraction(rw, L);
}

/* ---- sensitivity ----------------------------------------------------------------------------- */

/* Quantizes layer i alone on a reparsed copy of g and measures the model's output error. */
static IrStatus layer_error(IrPassContext *c, const Opts *o, const char *text, size_t len, const IrGraph *g,
                            const Layers *ls, uint32_t i, const Samples *s, double *err) {
    IrGraph *cg;
    IrStatus st = ir_parse_text(text, len, ir_graph_source_file(g), ir_pass_diag(c), &cg);
    if (st) return st;
    Layers cl;
    st = find_layers(cg, &cl);
    if (!st && (cl.n != ls->n || cl.v[i].op != ls->v[i].op)) st = IR_EVERIFY;
    if (!st) {
        Layer *L = &cl.v[i];
        L->act_static = ls->v[i].act_static;
        L->act_scale = ls->v[i].act_scale;
        Rewriter rw = {.g = cg, .o = o};
        st = rewrite_layer(&rw, L);
        rewriter_free(&rw);
    }
    if (!st) st = sample_error(c, cg, s, err);
    layers_free(&cl);
    ir_graph_destroy(cg);
    return st;
}

static IrStatus measure_layers(IrPassContext *c, const Opts *o, IrGraph *g, Layers *ls, const Samples *s) {
    IrStrBuf text;
    ir_strbuf_init(&text);
    IrStatus st = ir_print_text(g, &text);
    for (uint32_t i = 0; i < ls->n && !st; i++) {
        Layer *L = &ls->v[i];
        if (L->decision == DEC_SKIP) continue;
        st = layer_error(c, o, text.data, text.len, g, ls, i, s, &L->error);
        if (st) {
            ir_pass_error(c, L->node, "sensitivity: quantizing layer '%s' alone failed", L->name);
            break;
        }
        L->measured = true;
        if (!(L->error <= o->budget)) {
            L->decision = DEC_KEEP;
            ir_diag_at_node(ir_pass_diag(c), g, L->node, IR_SEV_NOTE,
                            "quantize-fp8: layer '%s' kept in f32: output error %.4g over budget %.4g", L->name,
                            L->error, o->budget);
        }
    }
    ir_strbuf_free(&text);
    return st;
}

/* ---- report ---------------------------------------------------------------------------------- */

static json_t *json_num(bool have, double v) { return have ? ir_json_real(v) : json_null(); }

typedef struct Totals {
    int64_t quantized, kept, skipped, before, after;
    bool have_error;
    double model_error;
} Totals;

static const char *decision_name(Decision d) {
    return d == DEC_QUANTIZE ? "quantized" : d == DEC_KEEP ? "kept" : "skipped";
}

static json_t *layer_json(const IrGraph *g, const Layer *L) {
    json_t *o = json_object();
    bool ok = ir_json_set(o, "name", ir_json_string(L->name));
    ok &= ir_json_set(o, "op", ir_json_string(ir_op_name(L->op)));
    ok &= ir_json_set(o, "weight", ir_json_string(ir_value_name(g, L->weight)));
    ok &= ir_json_set(o, "act_scale", L->decision == DEC_SKIP || L->op == IR_OP_CONV ? json_null()
                                      : L->act_static                               ? ir_json_real(L->act_scale)
                                                                                    : json_string("dynamic"));
    ok &= ir_json_set(o, "error", json_num(L->measured, L->error));
    ok &= ir_json_set(o, "decision", json_string(decision_name(L->decision)));
    ok &= ir_json_set(o, "reason", L->skip_reason               ? ir_json_string(L->skip_reason)
                                   : L->decision == DEC_KEEP ? json_string("error over budget")
                                                             : json_null());
    ok &= ir_json_set(o, "bytes_before", json_integer(L->bytes_before));
    ok &= ir_json_set(o, "bytes_after", json_integer(L->bytes_after));
    return ok ? o : (json_decref(o), NULL);
}

static IrStatus write_report(IrPassContext *c, const Opts *o, const IrGraph *g, const Layers *ls, uint32_t n_samples,
                             const Totals *t) {
    json_t *r = json_object(), *layers = json_array(), *tot = json_object();
    bool ok = ir_json_set(r, "pass", json_string("quantize-fp8"));
    ok &= ir_json_set(r, "format", ir_json_string(o->fmt->name));
    ok &= ir_json_set(r, "granularity", json_string(o->per_channel ? "channel" : "tensor"));
    ok &= ir_json_set(r, "calib", ir_json_string(o->calib_text));
    ok &= ir_json_set(r, "samples", json_integer(n_samples));
    ok &= ir_json_set(r, "budget", json_num(o->has_budget, o->budget));
    for (uint32_t i = 0; i < ls->n; i++) ok &= ir_json_push(layers, layer_json(g, &ls->v[i]));
    ok &= ir_json_set(r, "layers", layers);
    ok &= ir_json_set(tot, "layers_quantized", json_integer(t->quantized));
    ok &= ir_json_set(tot, "layers_kept", json_integer(t->kept));
    ok &= ir_json_set(tot, "layers_skipped", json_integer(t->skipped));
    ok &= ir_json_set(tot, "weight_bytes_before", json_integer(t->before));
    ok &= ir_json_set(tot, "weight_bytes_after", json_integer(t->after));
    ok &= ir_json_set(tot, "model_error", json_num(t->have_error, t->model_error));
    ok &= ir_json_set(r, "totals", tot);
    IrStatus st = ok ? ir_json_write_file(r, IR_JSON_ROWS, o->report, ir_pass_diag(c)) : IR_ENOMEM;
    if (st) ir_pass_error(c, 0, "cannot write report '%s'", o->report);
    json_decref(r);
    return st;
}

/* ---- the pass -------------------------------------------------------------------------------- */

/* Removes the original weights no longer used; totals over distinct weights. */
static IrStatus finish(IrGraph *g, Layers *ls, Rewriter *rw, Totals *t) {
    uint32_t nv = ir_graph_num_values(g);
    uint32_t *uses = calloc((size_t)nv + 1, sizeof *uses);
    uint8_t *seen = calloc((size_t)nv + 1, 1);
    if (!uses || !seen) {
        free(uses);
        free(seen);
        return IR_ENOMEM;
    }
    ir_graph_count_uses(g, uses);
    t->after = rw->created_bytes;
    for (uint32_t i = 0; i < ls->n; i++) {
        Layer *L = &ls->v[i];
        t->quantized += L->decision == DEC_QUANTIZE;
        t->kept += L->decision == DEC_KEEP;
        t->skipped += L->decision == DEC_SKIP;
        if (seen[L->weight]) continue;
        seen[L->weight] = 1;
        int64_t nb = (int64_t)ir_const_nbytes(g, ir_value_const(g, L->weight));
        t->before += nb;
        if (uses[L->weight]) t->after += nb;
    }
    /* only the replaced weights may go: every other constant counts as used */
    for (uint32_t i = 0; i < ir_graph_num_const_values(g); i++) {
        IrValueId v = ir_graph_const_value(g, i);
        if (!seen[v] && !uses[v]) uses[v] = 1;
    }
    ir_graph_remove_unused_consts(g, uses);
    free(uses);
    free(seen);
    return ir_graph_status(g);
}

static IrStatus run(IrPassContext *c) {
    IrGraph *g = ir_pass_graph(c);
    Opts o;
    IrStatus st = parse_opts(c, &o);
    if (st) return st;
    Layers ls;
    Samples s = {0};
    Rewriter rw = {.g = g, .o = &o};
    Totals t = {0};
    if ((st = find_layers(g, &ls))) goto done;
    for (uint32_t i = 0; i < ls.n; i++)
        if (ls.v[i].skip_reason)
            ir_diag_at_node(ir_pass_diag(c), g, ls.v[i].node, IR_SEV_NOTE, "quantize-fp8: layer '%s' not quantized: %s",
                            ls.v[i].name, ls.v[i].skip_reason);
    if (o.samples) {
        if ((st = load_samples(c, g, o.samples, &s))) goto done;
        if ((st = calibrate(c, &o, g, &ls, &s))) goto done;
    }
    if (o.has_budget && (st = measure_layers(c, &o, g, &ls, &s))) goto done;
    for (uint32_t i = 0; i < ls.n && !st; i++)
        if (ls.v[i].decision == DEC_QUANTIZE) {
            st = rewrite_layer(&rw, &ls.v[i]);
            if (st) ir_pass_error(c, 0, "rewriting layer '%s' failed (%s)", ls.v[i].name, ir_status_name(st));
        }
    if (st || (st = finish(g, &ls, &rw, &t))) goto done;
    if (t.quantized) ir_pass_changed(c);
    if (o.samples && t.quantized) {
        if ((st = sample_error(c, g, &s, &t.model_error))) {
            ir_pass_error(c, 0, "the quantized model failed in the interpreter");
            goto done;
        }
        t.have_error = true;
    }
    ir_pass_stat(c, "layers-quantized", t.quantized);
    ir_pass_stat(c, "layers-kept", t.kept);
    ir_pass_stat(c, "layers-skipped", t.skipped);
    ir_pass_stat(c, "weight-bytes-before", t.before);
    ir_pass_stat(c, "weight-bytes-after", t.after);
    if (t.have_error) ir_pass_stat(c, "model-error-ppm", (int64_t)llround(fmin(t.model_error, 1e6) * 1e6));
    if (o.report) st = write_report(c, &o, g, &ls, s.n, &t);
done:
    rewriter_free(&rw);
    samples_free(&s);
    layers_free(&ls);
    return st;
}

const IrPass pass_quantize_fp8 = {
    .name = "quantize-fp8",
    .summary = "FP8 weights (and activations for MatMul/Gemm) with per-channel or per-tensor scales",
    .options = (const IrPassOption[]){
        {"format", "e4m3fn", "e4m3fn | e5m2 (weights and activations)"},
        {"granularity", "channel", "weight scales: channel (per output channel) | tensor"},
        {"calib", NULL, "activation scales: max | percentile:P | mse | dynamic (default: max with samples, else dynamic)"},
        {"samples", NULL, "directory of .npy inputs: NAME.npy or NAME_<k>.npy per graph input"},
        {"budget", NULL, "keep a layer in f32 when quantizing it alone gives a larger relative L2 output error"},
        {"report", NULL, "write a per-layer JSON report to this file"},
        {NULL, NULL, NULL}},
    .run = run,
};

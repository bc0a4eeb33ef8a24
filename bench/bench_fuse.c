/* Fusion and FP8 benchmark (issue 5): per model, nodes before and after `fuse`, the kernel
 * count (top-level nodes that compute, i.e. not Constant), fused groups, intermediate bytes no
 * longer written to memory, and for `quantize-fp8`: weight bytes before and after and the
 * accuracy against the f32 model in the reference interpreter (cosine similarity of the
 * outputs, argmax agreement for rank-2 outputs), plus the fused graph's worst relative error.
 *   usage: bench_fuse MODEL[:INPUT.npy]...
 * Models without an input file get a deterministic uniform [0, 1) input (symbols bound to 2).
 */
#include "passes/passes.h"
#include "validate/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static IrStatus run_pipeline(IrGraph *g, const char *text, int64_t *stat, const char *stat_name) {
    IrDiag d;
    ir_diag_init(&d, ir_diag_print_fn, stderr);
    IrPipeline *p;
    IrStatus s = ir_pipeline_parse(text, &d, &p);
    if (s) return s;
    IrPipelineOptions o = {true, IR_PRINT_NEVER, NULL, NULL, NULL};
    s = ir_pipeline_run(p, g, &o, &d);
    for (uint32_t i = 0; s == IR_OK && stat && i < ir_pipeline_num_reports(p); i++) {
        IrPassReport r = ir_pipeline_report(p, i);
        for (uint32_t k = 0; k < r.n_stats; k++)
            if (!strcmp(r.stat_names[k], stat_name)) *stat += r.stat_values[k];
    }
    ir_pipeline_destroy(p);
    return s;
}

static uint32_t kernels(const IrGraph *g) {
    uint32_t n = 0;
    for (IrNodeId m = ir_region_first(g, IR_ROOT_REGION); m; m = ir_node_next(g, m))
        if (ir_node_op(g, m) != IR_OP_CONSTANT) n++;
    return n;
}

static uint64_t weight_bytes(const IrGraph *g) {
    uint64_t b = 0;
    for (uint32_t i = 0; i < ir_graph_num_const_values(g); i++)
        b += ir_const_nbytes(g, ir_value_const(g, ir_graph_const_value(g, i)));
    return b;
}

/* Inputs: the given .npy for input 0, else uniform [0,1) of the input's shape (symbols = 2). */
static bool make_inputs(const IrGraph *g, const char *npy, IrTensor *in) {
    IrDiag d;
    ir_diag_init(&d, ir_diag_print_fn, stderr);
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < ir_graph_num_inputs(g); i++) {
        if (i == 0 && npy) {
            if (ir_npy_read(npy, &d, &in[0]) != IR_OK) return false;
            continue;
        }
        IrTypeId t = ir_value_type(g, ir_graph_input(g, i));
        uint32_t r = ir_type_rank(g, t);
        if (r == IR_RANK_UNKNOWN || r > IR_MAX_RANK) return false;
        int64_t dims[IR_MAX_RANK];
        for (uint32_t k = 0; k < r; k++)
            if (!ir_expr_is_const(g, ir_type_dims(g, t)[k], &dims[k])) dims[k] = 2;
        if (ir_tensor_alloc(&in[i], ir_type_dtype(g, t), r, dims) != IR_OK) return false;
        for (int64_t k = 0; k < ir_tensor_numel(&in[i]); k++) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            ir_elem_set_f64(in[i].dtype, in[i].data, (size_t)k, (double)(state >> 11) / 9007199254740992.0);
        }
    }
    return true;
}

static bool run(const IrGraph *g, const IrTensor *in, IrTensor *out) {
    IrDiag d;
    ir_diag_init(&d, ir_diag_print_fn, stderr);
    IrInterpOptions o = {0};
    return ir_interp_run(g, in, ir_graph_num_inputs(g), out, &o, &d) == IR_OK;
}

typedef struct Cmp {
    double cosine, max_rel;
    int64_t argmax_rows, argmax_same;
} Cmp;

static Cmp compare(const IrTensor *a, const IrTensor *b) {
    Cmp c = {1, 0, 0, 0};
    double dot = 0, na = 0, nb = 0, amax = 0;
    int64_t n = ir_tensor_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = ir_elem_get_f64(a->dtype, a->data, (size_t)i), y = ir_elem_get_f64(b->dtype, b->data, (size_t)i);
        dot += x * y, na += x * x, nb += y * y;
        if (fabs(x) > amax) amax = fabs(x);
    }
    for (int64_t i = 0; i < n; i++) {
        double x = ir_elem_get_f64(a->dtype, a->data, (size_t)i), y = ir_elem_get_f64(b->dtype, b->data, (size_t)i);
        double rel = fabs(x - y) / (amax > 0 ? amax : 1);
        if (rel > c.max_rel) c.max_rel = rel;
    }
    c.cosine = na > 0 && nb > 0 ? dot / sqrt(na * nb) : 1;
    if (a->rank == 2) {
        int64_t rows = a->dims[0], cols = a->dims[1];
        for (int64_t r = 0; r < rows; r++) {
            int64_t ia = 0, ib = 0;
            for (int64_t k = 1; k < cols; k++) {
                if (ir_elem_get_f64(a->dtype, a->data, (size_t)(r * cols + k)) > ir_elem_get_f64(a->dtype, a->data, (size_t)(r * cols + ia))) ia = k;
                if (ir_elem_get_f64(b->dtype, b->data, (size_t)(r * cols + k)) > ir_elem_get_f64(b->dtype, b->data, (size_t)(r * cols + ib))) ib = k;
            }
            c.argmax_rows++;
            c.argmax_same += ia == ib;
        }
    }
    return c;
}

int main(int argc, char **argv) {
    printf("| model | nodes | kernels before | kernels after fuse | groups | intermediate MB saved | "
           "fused max rel err | weight bytes f32 | weight bytes fp8 | reduction | fp8 cosine | argmax agree |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int a = 1; a < argc; a++) {
        char *spec = strdup(argv[a]), *colon = strchr(spec, ':');
        const char *npy = NULL;
        if (colon) *colon = 0, npy = colon + 1;
        IrDiag d;
        ir_diag_init(&d, ir_diag_print_fn, stderr);
        IrGraph *ref, *fused, *quant;
        if (ir_load(spec, &d, &ref) != IR_OK || ir_load(spec, &d, &fused) != IR_OK || ir_load(spec, &d, &quant) != IR_OK) return 1;
        if (run_pipeline(ref, "shape-infer", NULL, NULL) || run_pipeline(quant, "shape-infer", NULL, NULL)) return 1;
        uint32_t nodes = ir_graph_num_nodes(ref), k0 = kernels(ref);
        int64_t groups = 0, saved = 0, wb0 = 0, wb1 = 0;
        if (run_pipeline(fused, "shape-infer,fuse", &groups, "groups-formed")) return 1;
        {
            IrGraph *tmp;
            if (ir_load(spec, &d, &tmp) != IR_OK || run_pipeline(tmp, "shape-infer,fuse", &saved, "intermediate-bytes-saved")) return 1;
            ir_graph_destroy(tmp);
        }
        uint32_t k1 = kernels(fused);
        wb0 = (int64_t)weight_bytes(quant);
        if (run_pipeline(quant, "quantize-fp8", NULL, NULL)) return 1;
        wb1 = (int64_t)weight_bytes(quant);
        IrTensor in[16] = {0}, o_ref[16] = {0}, o_fused[16] = {0}, o_q[16] = {0};
        char cos_txt[32] = "-", arg_txt[32] = "-", err_txt[32] = "-";
        if (ir_graph_num_inputs(ref) <= 16 && ir_graph_num_outputs(ref) <= 16 && make_inputs(ref, npy, in) &&
            run(ref, in, o_ref) && run(fused, in, o_fused) && run(quant, in, o_q)) {
            Cmp f = compare(&o_ref[0], &o_fused[0]), q = compare(&o_ref[0], &o_q[0]);
            snprintf(err_txt, sizeof err_txt, "%.1e", f.max_rel);
            snprintf(cos_txt, sizeof cos_txt, "%.5f", q.cosine);
            if (q.argmax_rows) snprintf(arg_txt, sizeof arg_txt, "%lld/%lld", (long long)q.argmax_same, (long long)q.argmax_rows);
        }
        for (uint32_t i = 0; i < 16; i++) ir_tensor_free(&in[i]), ir_tensor_free(&o_ref[i]), ir_tensor_free(&o_fused[i]), ir_tensor_free(&o_q[i]);
        const char *base = strrchr(spec, '/');
        char label[256];
        snprintf(label, sizeof label, "%s", base ? base + 1 : spec);
        if (!strcmp(label, "model.onnx") && base) { /* name the folder instead */
            const char *q = base;
            while (q > spec && q[-1] != '/') q--;
            snprintf(label, sizeof label, "%.*s", (int)(base - q), q);
        }
        printf("| %s | %u | %u | %u | %lld | %.2f | %s | %lld | %lld | %.1f%% | %s | %s |\n", label, nodes, k0, k1,
               (long long)groups, saved / 1e6, err_txt, (long long)wb0, (long long)wb1,
               wb0 ? 100.0 * (1.0 - (double)wb1 / (double)wb0) : 0.0, cos_txt, arg_txt);
        fflush(stdout);
        ir_graph_destroy(ref);
        ir_graph_destroy(fused);
        ir_graph_destroy(quant);
        free(spec);
    }
    return 0;
}

/* Passes preserve results: every corpus model (and, when IRTOOL_SHARED_DIR is set and the ONNX
 * importer works, the shared torch models and a handful of ONNX test folders) runs through the
 * reference interpreter before and after each cleanup pass, const-fold, lower-cf and the
 * default pipeline; structural passes must give bitwise-equal outputs, the others equal within
 * 1e-6 relative. Plus targeted tests of cloning, single-node evaluation, const-fold, lower-cf
 * and the pass manager's reproducer.
 */
#include "passes/passes.h"
#include "testutil.h"
#include "validate/validate.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- helpers ---------------------------------------------------------------------------------- */








static IrGraph *parse_ok(const char *text) { return tu_parse_ok(text, "test.ir"); }

static void verify_ok(IrGraph *g) {
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = ir_verify(g, &d.diag);
    char *text = s ? tu_print(g) : NULL;
    cr_assert_eq(s, IR_OK, "verify failed: %s\n%s", tu_diag_text(&d), text ? text : "");
    free(text);
    tu_diag_free(&d);
}

/* ---- preservation over models ------------------------------------------------------------- */

/* Where a model comes from: a loader plus its inputs. */
typedef struct Model {
    char *label;
    char *corpus_name; /* corpus/<name>, or */
    char *path;        /* a file ir_load reads */
    TuTensors inputs;    /* given inputs (files); empty: generated */
} Model;

static IrGraph *model_load(const Model *m, TuDiag *d) {
    if (m->corpus_name) return tu_load_corpus(m->corpus_name, d);
    IrGraph *g = NULL;
    return ir_load(m->path, &d->diag, &g) == IR_OK ? g : NULL;
}

/* Runs `pipeline` on a fresh copy of the model and compares with the untransformed run.
 * Returns 1 when compared, 0 when the interpreter cannot run the model (not a failure). */
static int check_preserved(const Model *m, const char *pipeline, bool exact) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = model_load(m, &d);
    cr_assert_not_null(g, "%s: cannot load: %s", m->label, tu_diag_text(&d));
    TuTensors in = {0}, before = {0}, after = {0};
    bool own_inputs = m->inputs.n == 0 && ir_graph_num_inputs(g) > 0;
    if (own_inputs) {
        if (!tu_make_inputs(g, 42, 4, &in)) {
            cr_log_warn("%s: cannot make inputs; skipped", m->label);
            tu_tensors_free(&in);
            ir_graph_destroy(g);
            tu_diag_free(&d);
            return 0;
        }
    } else {
        in = m->inputs;
    }
    int compared = 0;
    if (tu_interp(g, &in, &before, &d) != IR_OK) {
        cr_log_info("%s: the interpreter cannot run it yet; only checking that %s succeeds: %s", m->label, pipeline,
                    tu_diag_text(&d));
    } else {
        compared = 1;
    }
    TuDiag pd;
    tu_diag_init(&pd);
    IrStatus s = tu_run_pipeline(g, pipeline, &pd, NULL, NULL);
    cr_assert_eq(s, IR_OK, "%s: pipeline %s failed: %s", m->label, pipeline, tu_diag_text(&pd));
    tu_diag_free(&pd);
    verify_ok(g);
    if (compared) {
        TuDiag ad;
        tu_diag_init(&ad);
        s = tu_interp(g, &in, &after, &ad);
        char *text = s ? tu_print(g) : NULL;
        cr_assert_eq(s, IR_OK, "%s: interpreter fails after %s: %s\n%s", m->label, pipeline, tu_diag_text(&ad),
                     text ? text : "");
        free(text);
        tu_diag_free(&ad);
        char why[256];
        cr_assert(tu_outputs_close(&before, &after, exact ? -1.0 : 1e-6, why, sizeof why), "%s: %s changes results: %s", m->label,
                  pipeline, why);
    }
    tu_tensors_free(&before);
    tu_tensors_free(&after);
    if (own_inputs) tu_tensors_free(&in);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    return compared;
}

static void corpus_models(Model **out, size_t *n) {
    size_t count = 0;
    char **names = tu_list_dir("corpus", ".ir", &count);
    cr_assert_not_null(names);
    *out = calloc(count + 1, sizeof **out);
    for (size_t i = 0; i < count; i++) {
        (*out)[i].label = strdup(names[i]);
        (*out)[i].corpus_name = strdup(names[i]);
    }
    *n = count;
    tu_free_list(names);
}

static void models_free(Model *m, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(m[i].label);
        free(m[i].corpus_name);
        free(m[i].path);
        tu_tensors_free(&m[i].inputs);
    }
    free(m);
}

static void check_corpus(const char *pipeline, bool exact) {
    Model *models;
    size_t n;
    corpus_models(&models, &n);
    cr_assert_gt(n, 0);
    int compared = 0;
    for (size_t i = 0; i < n; i++) compared += check_preserved(&models[i], pipeline, exact);
    cr_log_info("%s: compared %d of %zu corpus models", pipeline, compared, n);
    models_free(models, n);
}

Test(preserve_corpus, canonicalize) { check_corpus("canonicalize", true); }
Test(preserve_corpus, cse) { check_corpus("cse", true); }
Test(preserve_corpus, dce) { check_corpus("dce", true); }
Test(preserve_corpus, const_fold) { check_corpus("const-fold", false); }
Test(preserve_corpus, lower_cf) { check_corpus("lower-cf", false); }
Test(preserve_corpus, default_pipeline) { check_corpus("default", false); }

/* ---- shared ONNX models --------------------------------------------------------------------- */

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    cr_assert_not_null(s);
    snprintf(s, n, "%s/%s", a, b);
    return s;
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted subdirectory names of dir (NULL-terminated; free with tu_free_list). */
static char **subdirs(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    size_t n = 0, cap = 16;
    char **list = malloc(cap * sizeof *list);
    struct dirent *e;
    while (list && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = join(dir, e->d_name);
        struct stat st;
        bool isdir = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
        free(p);
        if (!isdir) continue;
        if (n + 1 >= cap) {
            cap *= 2;
            char **nl = realloc(list, cap * sizeof *list);
            cr_assert_not_null(nl);
            list = nl;
        }
        list[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (!list) return NULL;
    qsort(list, n, sizeof *list, cmp_str);
    list[n] = NULL;
    return list;
}

/* True when the model loads (the importer has landed and handles it). */
static bool loads(const char *path) {
    IrDiag quiet;
    ir_diag_init(&quiet, NULL, NULL);
    IrGraph *g = NULL;
    if (ir_load(path, &quiet, &g) != IR_OK) return false;
    ir_graph_destroy(g);
    return true;
}

/* torch-models/NAME/model.onnx with input_<graph input name>.npy (or input_x.npy for one
 * input); onnx-tests/SUITE/NAME/model.onnx with test_data_set_0/input_<i>.pb. */
static bool model_inputs(Model *m, const char *dir, bool npy) {
    IrDiag quiet;
    ir_diag_init(&quiet, NULL, NULL);
    IrGraph *g = NULL;
    if (ir_load(m->path, &quiet, &g) != IR_OK) return false;
    uint32_t n = ir_graph_num_inputs(g);
    m->inputs.t = calloc(n ? n : 1, sizeof *m->inputs.t);
    m->inputs.n = n;
    bool ok = m->inputs.t != NULL;
    for (uint32_t i = 0; ok && i < n; i++) {
        char name[512];
        char *p;
        if (npy) {
            snprintf(name, sizeof name, "input_%s.npy", ir_value_name(g, ir_graph_input(g, i)));
            p = join(dir, name);
            if (!is_file(p) && n == 1) {
                free(p);
                p = join(dir, "input_x.npy");
            }
            ok = ir_npy_read(p, &quiet, &m->inputs.t[i]) == IR_OK;
        } else {
            snprintf(name, sizeof name, "test_data_set_0/input_%u.pb", i);
            p = join(dir, name);
            ok = ir_pb_tensor_read(p, &quiet, &m->inputs.t[i], NULL) == IR_OK;
        }
        free(p);
    }
    ir_graph_destroy(g);
    if (!ok) tu_tensors_free(&m->inputs);
    return ok;
}

/* Models from the shared directory that load; at most `cap` per onnx-tests suite. */
static size_t shared_models(Model **out) {
    const char *shared = getenv("IRTOOL_SHARED_DIR");
    *out = calloc(64, sizeof **out);
    cr_assert_not_null(*out);
    size_t n = 0;
    if (!shared || !*shared) return 0;
    char *torch = join(shared, "torch-models");
    char **names = subdirs(torch);
    for (char **p = names; p && *p && n < 16; p++) {
        char *dir = join(torch, *p);
        Model m = {0};
        m.path = join(dir, "model.onnx");
        size_t ll = strlen(*p) + 8;
        m.label = malloc(ll);
        snprintf(m.label, ll, "torch/%s", *p);
        if (is_file(m.path) && loads(m.path) && model_inputs(&m, dir, true)) {
            (*out)[n++] = m;
        } else {
            free(m.label);
            free(m.path);
        }
        free(dir);
    }
    tu_free_list(names);
    free(torch);
    static const char *const suites[] = {"simple", "pytorch-operator"};
    for (size_t s = 0; s < 2; s++) {
        char *sdir = join(shared, "onnx-tests");
        char *suite = join(sdir, suites[s]);
        names = subdirs(suite);
        int taken = 0;
        for (char **p = names; p && *p && taken < 6 && n < 60; p++) {
            char *dir = join(suite, *p);
            Model m = {0};
            m.path = join(dir, "model.onnx");
            size_t ll = strlen(*p) + strlen(suites[s]) + 2;
            m.label = malloc(ll);
            snprintf(m.label, ll, "%s/%s", suites[s], *p);
            if (is_file(m.path) && loads(m.path) && model_inputs(&m, dir, false)) {
                (*out)[n++] = m;
                taken++;
            } else {
                free(m.label);
                free(m.path);
            }
            free(dir);
        }
        tu_free_list(names);
        free(suite);
        free(sdir);
    }
    return n;
}

static void check_shared(const char *pipeline, bool exact) {
    Model *models;
    size_t n = shared_models(&models);
    if (n == 0) {
        free(models);
        cr_log_info("no shared ONNX models (IRTOOL_SHARED_DIR unset or the importer not ready)");
        return;
    }
    int compared = 0;
    for (size_t i = 0; i < n; i++) compared += check_preserved(&models[i], pipeline, exact);
    cr_log_info("%s: compared %d of %zu shared models", pipeline, compared, n);
    models_free(models, n);
}

Test(preserve_shared, canonicalize, .timeout = 120) { check_shared("canonicalize", true); }
Test(preserve_shared, cse, .timeout = 120) { check_shared("cse", true); }
Test(preserve_shared, dce, .timeout = 120) { check_shared("dce", true); }
Test(preserve_shared, const_fold, .timeout = 120) { check_shared("const-fold", false); }
Test(preserve_shared, lower_cf, .timeout = 120) { check_shared("lower-cf", false); }
Test(preserve_shared, default_pipeline, .timeout = 120) { check_shared("default", false); }
/* Imported models carry few types until shape inference runs; lower-cf needs them. */
Test(preserve_shared, shape_infer_then_default, .timeout = 120) {
    if (!ir_pass_find("shape-infer", 11)) cr_skip_test("no shape-infer pass");
    check_shared("shape-infer,default", false);
}

/* ---- cloning -------------------------------------------------------------------------------- */

static const char *IF_TEXT =
    "graph @g(%x: f32[4], %p: bool[]) {\n"
    "  %y = If(%p) : f32[4] name(\"sel\") from(\"orig_sel\") {\n"
    "    then_branch() {\n"
    "      %t = Relu(%x) : f32[4] name(\"r\")\n"
    "      return %t\n"
    "    }\n"
    "    else_branch() {\n"
    "      %e = LeakyRelu(%x) {alpha = 0.5} : f32[4]\n"
    "      return %e\n"
    "    }\n"
    "  }\n"
    "  return %y\n"
    "}\n";

static IrValueId *new_map(const IrGraph *g) {
    IrValueId *m = calloc((size_t)ir_graph_num_values(g) + 1, sizeof *m);
    cr_assert_not_null(m);
    return m;
}

Test(clone, node_with_regions) {
    IrGraph *g = parse_ok(IF_TEXT);
    IrValueId y = ir_value_find(g, "y", 1), x = ir_value_find(g, "x", 1);
    IrNodeId n = ir_value_def_node(g, y);
    uint32_t nodes = ir_graph_num_nodes(g);
    IrValueId *map = new_map(g);
    IrNodeId c = ir_node_clone(g, n, IR_ROOT_REGION, n, map);
    cr_assert_neq(c, 0);
    cr_assert_eq(ir_graph_num_nodes(g), nodes + 3, "the If and one node per branch");
    cr_assert_eq(ir_node_next(g, c), n, "placed before the original");
    cr_assert_eq(ir_node_op(g, c), IR_OP_IF);
    cr_assert_str_eq(ir_node_name(g, c), "sel");
    cr_assert_eq(ir_node_num_provenance(g, c), 1);
    cr_assert_str_eq(ir_str(g, ir_node_provenance(g, c, 0)), "orig_sel");
    cr_assert_str_eq(ir_value_name(g, ir_node_result(g, c, 0)), "y_u1");
    cr_assert_eq(map[y], ir_node_result(g, c, 0));
    cr_assert_eq(ir_value_type(g, ir_node_result(g, c, 0)), ir_value_type(g, y));
    cr_assert_eq(ir_node_operand(g, c, 0), ir_value_find(g, "p", 1), "unmapped operands are kept");
    IrNodeId t = ir_region_first(g, ir_node_region_at(g, c, 0));
    cr_assert_eq(ir_node_op(g, t), IR_OP_RELU);
    cr_assert_str_eq(ir_value_name(g, ir_node_result(g, t, 0)), "t_u1");
    cr_assert_eq(ir_node_operand(g, t, 0), x);
    cr_assert_str_eq(ir_str(g, ir_node_provenance(g, t, 0)), "r", "provenance from the name");
    cr_assert_eq(ir_region_output(g, ir_node_region_at(g, c, 0), 0), ir_node_result(g, t, 0));
    IrNodeId e = ir_region_first(g, ir_node_region_at(g, c, 1));
    cr_assert_float_eq(ir_node_attr_float(g, e, "alpha", NULL), 0.5, 1e-9);
    verify_ok(g);
    /* a clone of the clone restarts from the stem */
    free(map);
    map = new_map(g);
    IrNodeId c2 = ir_node_clone(g, c, IR_ROOT_REGION, 0, map);
    cr_assert_neq(c2, 0);
    cr_assert_str_eq(ir_value_name(g, ir_node_result(g, c2, 0)), "y_u2");
    cr_assert_eq(ir_region_last(g, IR_ROOT_REGION), c2, "appended at the end");
    verify_ok(g);
    free(map);
    ir_graph_destroy(g);
}

Test(clone, region_inline_and_remap) {
    IrGraph *g = parse_ok(IF_TEXT);
    IrValueId y = ir_value_find(g, "y", 1), x = ir_value_find(g, "x", 1);
    IrNodeId n = ir_value_def_node(g, y);
    /* a Neg of x, then the else branch cloned with x remapped to it */
    IrTypeId t4 = ir_value_type(g, x);
    IrNodeId neg = ir_node_create_before(g, n, IR_OP_NEG, 1, &x, 1, NULL, &t4);
    IrValueId *map = new_map(g);
    map[x] = ir_node_result(g, neg, 0);
    IrValueId out = 0;
    cr_assert_eq(ir_region_clone_into(g, ir_node_region_at(g, n, 1), IR_ROOT_REGION, n, map, &out), IR_OK);
    IrNodeId lr = ir_value_def_node(g, out);
    cr_assert_eq(ir_node_op(g, lr), IR_OP_LEAKY_RELU);
    cr_assert_eq(ir_node_operand(g, lr, 0), ir_node_result(g, neg, 0));
    cr_assert_eq(ir_node_region(g, lr), IR_ROOT_REGION);
    cr_assert_str_eq(ir_value_name(g, out), "e_u1");
    cr_assert_eq(ir_region_clone_into(g, IR_ROOT_REGION, IR_ROOT_REGION, 0, map, NULL), IR_EINVAL,
                 "a region into itself needs a position");
    verify_ok(g);
    free(map);
    ir_graph_destroy(g);
}

/* ---- evaluating one node ------------------------------------------------------------------- */

Test(eval_node, add) {
    IrGraph *g = parse_ok("graph @g(%a: f32[2], %b: f32[]) {\n  %y = Add(%a, %b) : f32[2]\n  return %y\n}\n");
    IrNodeId n = ir_value_def_node(g, ir_value_find(g, "y", 1));
    float a[2] = {1.5f, -2.0f}, b = 0.25f;
    int64_t d2 = 2;
    IrTensor ta, tb, out;
    ir_tensor_view(&ta, IR_DTYPE_F32, 1, &d2, a);
    ir_tensor_view(&tb, IR_DTYPE_F32, 0, NULL, &b);
    const IrTensor *ins[2] = {&ta, &tb};
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = ir_interp_eval_node(g, n, ins, &out, &d.diag);
    cr_assert_eq(s, IR_OK, "%s", tu_diag_text(&d));
    cr_assert(out.owned);
    cr_assert_eq(out.rank, 1);
    cr_assert_eq(((float *)out.data)[0], 1.75f);
    cr_assert_eq(((float *)out.data)[1], -1.75f);
    ir_tensor_free(&out);
    /* nodes with regions are refused */
    IrGraph *h = parse_ok(IF_TEXT);
    IrNodeId f = ir_value_def_node(h, ir_value_find(h, "y", 1));
    const IrTensor *two[2] = {&ta, &tb};
    IrTensor o2;
    cr_assert_eq(ir_interp_eval_node(h, f, two, &o2, &d.diag), IR_EINVAL);
    tu_diag_free(&d);
    ir_graph_destroy(h);
    ir_graph_destroy(g);
}

/* ---- const-fold ------------------------------------------------------------------------------ */

static const char *CHAIN_TEXT =
    "graph @g(%x: f32[2]) {\n"
    "  const %one: f32[] = [1.0]\n"
    "  const %two: f32[] = [2.0]\n"
    "  %c = Constant() {value = f32[2] [1.0, 2.0]} : f32[2]\n"
    "  %a = Add(%c, %one) : f32[2]\n"
    "  %m = Mul(%a, %two) : f32[2]\n"
    "  %y = Add(%x, %m) : f32[2]\n"
    "  return %y\n"
    "}\n";

Test(const_fold, chain_becomes_one_constant) {
    IrGraph *g = parse_ok(CHAIN_TEXT);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_run_pipeline(g, "const-fold,dce", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_graph_num_nodes(g), 1, "only the Add of the input is left");
    cr_assert_eq(ir_graph_num_const_values(g), 1, "one constant holds the chain");
    IrNodeId n = ir_region_first(g, IR_ROOT_REGION);
    cr_assert_eq(ir_node_op(g, n), IR_OP_ADD);
    IrValueId m = ir_node_operand(g, n, 1);
    cr_assert_eq(ir_value_kind(g, m), IR_VALUE_CONST);
    cr_assert_str_eq(ir_value_name(g, m), "m", "the folded value keeps its name");
    const float *v = ir_const_data(g, ir_value_const(g, m));
    cr_assert_eq(v[0], 4.0f);
    cr_assert_eq(v[1], 6.0f);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

Test(const_fold, graph_output_stays_a_node_and_stats) {
    const char *text =
        "graph @g(%x: f32[2]) {\n"
        "  const %one: f32[] = [1.0]\n"
        "  const %c: f32[2] = [1.0, 2.0]\n"
        "  %a = Add(%c, %one) : f32[2] name(\"plus\")\n"
        "  %y = Add(%x, %a) : f32[2]\n"
        "  return %y, %a\n"
        "}\n";
    IrGraph *g = parse_ok(text);
    TuDiag d;
    tu_diag_init(&d);
    IrPipeline *p;
    cr_assert_eq(ir_pipeline_parse("const-fold", &d.diag, &p), IR_OK);
    cr_assert_eq(ir_pipeline_run(p, g, NULL, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    IrPassReport r = ir_pipeline_report(p, 0);
    int64_t folded = -1, bytes = -1;
    for (uint32_t i = 0; i < r.n_stats; i++) {
        if (strcmp(r.stat_names[i], "nodes-folded") == 0) folded = r.stat_values[i];
        if (strcmp(r.stat_names[i], "bytes-created") == 0) bytes = r.stat_values[i];
    }
    cr_assert_eq(folded, 1);
    cr_assert_eq(bytes, 8);
    cr_assert(r.changed);
    ir_pipeline_destroy(p);
    IrValueId a = ir_graph_output(g, 1);
    cr_assert_str_eq(ir_value_name(g, a), "a");
    IrNodeId k = ir_value_def_node(g, a);
    cr_assert_eq(ir_node_op(g, k), IR_OP_CONSTANT, "a graph output stays defined by a node");
    cr_assert_str_eq(ir_str(g, ir_node_provenance(g, k, 0)), "plus");
    cr_assert_eq(ir_node_operand(g, ir_value_def_node(g, ir_graph_output(g, 0)), 1), a);
    verify_ok(g);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

Test(const_fold, max_elements_caps_results) {
    IrGraph *g = parse_ok(CHAIN_TEXT);
    TuDiag d;
    tu_diag_init(&d);
    uint32_t nodes = ir_graph_num_nodes(g);
    cr_assert_eq(tu_run_pipeline(g, "const-fold{max-elements=1}", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_graph_num_nodes(g), nodes, "2-element results are over the cap");
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

Test(const_fold, static_shapes_fold_without_the_input) {
    const char *text =
        "symbol B\n"
        "graph @g(%x: f32[B, 16]) {\n"
        "  %s = Shape(%x) {start = 1} : i64[1]\n"
        "  %n = Shape(%x) : i64[2]\n"
        "  %k = Size(%x) : i64[]\n"
        "  %w = Cast(%s) {to = f32} : f32[1]\n"
        "  %z = Mul(%x, %w) : f32[B, 16]\n"
        "  return %z, %n, %k\n"
        "}\n";
    IrGraph *g = parse_ok(text);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_run_pipeline(g, "const-fold,dce", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_count_op(g, IR_OP_SHAPE), 1, "Shape of the symbolic dim stays");
    cr_assert_eq(tu_count_op(g, IR_OP_SIZE), 1, "Size of a symbolic shape stays");
    IrNodeId mul = ir_value_def_node(g, ir_graph_output(g, 0));
    IrValueId w = ir_node_operand(g, mul, 1);
    cr_assert_eq(ir_value_kind(g, w), IR_VALUE_CONST, "Shape -> Cast folded into a constant");
    cr_assert_eq(((const float *)ir_const_data(g, ir_value_const(g, w)))[0], 16.0f);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

Test(const_fold, kernel_error_is_not_a_failure) {
    const char *text =
        "graph @g(%x: f32[]) {\n"
        "  const %data: f32[3] = [1.0, 2.0, 3.0]\n"
        "  const %idx: i64[] = [7]\n"
        "  %v = Gather(%data, %idx) : f32[]\n"
        "  %y = Add(%x, %v) : f32[]\n"
        "  return %y\n"
        "}\n";
    IrGraph *g = parse_ok(text);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_run_pipeline(g, "const-fold", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_count_op(g, IR_OP_GATHER), 1, "the failing node stays");
    cr_assert_eq(d.diag.n_errors, 0, "reported as a note at most: %s", tu_diag_text(&d));
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

/* ---- lower-cf ------------------------------------------------------------------------------- */

static void run_one(const IrGraph *g, const float *x, uint32_t n, TuTensors *out) {
    int64_t dim = n;
    TuTensors in = {calloc(1, sizeof(IrTensor)), 1};
    cr_assert_not_null(in.t);
    ir_tensor_view(&in.t[0], IR_DTYPE_F32, 1, &dim, x);
    TuDiag d;
    tu_diag_init(&d);
    IrStatus s = tu_interp(g, &in, out, &d);
    cr_assert_eq(s, IR_OK, "interpreter: %s", tu_diag_text(&d));
    tu_diag_free(&d);
    free(in.t);
}

/* Runs the interpreter on g before and after `pipeline` for each input and compares. Returns
 * false (and checks only the pass) when the interpreter cannot run the structured graph. */
static bool compare_around(IrGraph *g, const char *pipeline, const float *const *xs, uint32_t n_x, uint32_t len,
                           bool exact, TuTensors *after_out) {
    TuTensors before[4] = {{0}};
    bool can = true;
    for (uint32_t i = 0; i < n_x; i++) {
        int64_t dim = len;
        TuTensors in = {calloc(1, sizeof(IrTensor)), 1};
        ir_tensor_view(&in.t[0], IR_DTYPE_F32, 1, &dim, xs[i]);
        TuDiag d;
        tu_diag_init(&d);
        if (tu_interp(g, &in, &before[i], &d) != IR_OK) {
            cr_log_info("structured run unavailable: %s", tu_diag_text(&d));
            can = false;
        }
        tu_diag_free(&d);
        free(in.t);
    }
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_run_pipeline(g, pipeline, &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    verify_ok(g);
    for (uint32_t i = 0; i < n_x; i++) {
        TuTensors after = {0};
        run_one(g, xs[i], len, &after);
        char why[256];
        if (can) cr_assert(tu_outputs_close(&before[i], &after, exact ? -1.0 : 1e-6, why, sizeof why), "input %u: %s", i, why);
        if (after_out && i == 0) after_out[0] = after;
        else tu_tensors_free(&after);
        tu_tensors_free(&before[i]);
    }
    return can;
}

Test(lower_cf, constant_predicate_inlines_the_taken_branch) {
    const char *text =
        "graph @g(%x: f32[4]) {\n"
        "  const %p: bool[] = [false]\n"
        "  %y = If(%p) : f32[4] name(\"sel\") {\n"
        "    then_branch() {\n"
        "      %t = Relu(%x) : f32[4]\n"
        "      return %t\n"
        "    }\n"
        "    else_branch() {\n"
        "      %e1 = Neg(%x) : f32[4] name(\"neg\")\n"
        "      %e = Abs(%e1) : f32[4] name(\"abs\")\n"
        "      return %e\n"
        "    }\n"
        "  }\n"
        "  %z = Mul(%y, %y) : f32[4]\n"
        "  return %z, %y\n"
        "}\n";
    IrGraph *g = parse_ok(text);
    uint32_t nodes = ir_graph_num_nodes(g);
    float x[4] = {1.5f, -2.0f, 0.0f, 3.25f};
    const float *xs[1] = {x};
    compare_around(g, "lower-cf", xs, 1, 4, true, NULL);
    cr_assert_eq(tu_count_op(g, IR_OP_IF), 0);
    cr_assert_lt(ir_graph_num_nodes(g), nodes);
    cr_assert_eq(ir_graph_num_nodes(g), 3, "Neg, Abs, Mul");
    IrValueId y = ir_graph_output(g, 1);
    cr_assert_str_eq(ir_value_name(g, y), "y", "the inlined value takes the If's result name");
    cr_assert_eq(ir_node_op(g, ir_value_def_node(g, y)), IR_OP_ABS);
    cr_assert_str_eq(ir_str(g, ir_node_provenance(g, ir_value_def_node(g, y), 0)), "abs");
    ir_graph_destroy(g);
}

Test(lower_cf, constant_predicate_returning_an_outer_value) {
    const char *text =
        "graph @g(%x: f32[4]) {\n"
        "  %p = Constant() {value = bool[] [true]} : bool[]\n"
        "  %y = If(%p) : f32[4] {\n"
        "    then_branch() {\n"
        "      return %x\n"
        "    }\n"
        "    else_branch() {\n"
        "      %e = Neg(%x) : f32[4]\n"
        "      return %e\n"
        "    }\n"
        "  }\n"
        "  return %y\n"
        "}\n";
    IrGraph *g = parse_ok(text);
    float x[4] = {1.5f, -2.0f, 0.0f, 3.25f};
    const float *xs[1] = {x};
    compare_around(g, "lower-cf,dce", xs, 1, 4, true, NULL);
    cr_assert_eq(tu_count_op(g, IR_OP_IF), 0);
    IrValueId y = ir_graph_output(g, 0);
    cr_assert_str_eq(ir_value_name(g, y), "y");
    cr_assert_eq(ir_node_op(g, ir_value_def_node(g, y)), IR_OP_IDENTITY, "an Identity keeps the output's name");
    ir_graph_destroy(g);
}

static const char *SELECT_TEXT =
    "graph @g(%x: f32[4]) {\n"
    "  const %zero: f32[] = [0.0]\n"
    "  %s = ReduceSum(%x) {keepdims = 0} : f32[]\n"
    "  %pos = Greater(%s, %zero) : bool[]\n"
    "  %y = If(%pos) : f32[4] name(\"branch\") {\n"
    "    then_branch() {\n"
    "      %t = Relu(%x) : f32[4]\n"
    "      return %t\n"
    "    }\n"
    "    else_branch() {\n"
    "      %e = Neg(%x) : f32[4]\n"
    "      %e2 = Mul(%e, %x) : f32[4]\n"
    "      return %e2\n"
    "    }\n"
    "  }\n"
    "  return %y\n"
    "}\n";

Test(lower_cf, data_dependent_if_becomes_where) {
    IrGraph *g = parse_ok(SELECT_TEXT);
    float pos[4] = {1.0f, 2.0f, -0.5f, 3.0f}, neg[4] = {-1.0f, -2.0f, 0.5f, -3.0f};
    const float *xs[2] = {pos, neg};
    TuTensors after;
    compare_around(g, "lower-cf", xs, 2, 4, true, &after);
    cr_assert_eq(tu_count_op(g, IR_OP_IF), 0);
    cr_assert_eq(tu_count_op(g, IR_OP_WHERE), 1);
    IrValueId y = ir_graph_output(g, 0);
    cr_assert_str_eq(ir_value_name(g, y), "y");
    cr_assert_eq(ir_node_op(g, ir_value_def_node(g, y)), IR_OP_WHERE);
    /* then branch (sum > 0): Relu */
    const float *r = after.t[0].data;
    cr_assert_eq(r[0], 1.0f);
    cr_assert_eq(r[2], 0.0f);
    tu_tensors_free(&after);
    TuTensors other;
    run_one(g, neg, 4, &other);
    const float *q = other.t[0].data;
    cr_assert_eq(q[0], -1.0f, "else branch: -x * x");
    cr_assert_eq(q[2], -0.25f);
    tu_tensors_free(&other);
    ir_graph_destroy(g);
}

static const char *SYMBOLIC_SELECT_TEXT =
    "symbol B\n"
    "graph @g(%x: f32[DIM, 4]) {\n"
    "  const %zero: f32[] = [0.0]\n"
    "  %s = ReduceSum(%x) {keepdims = 0} : f32[]\n"
    "  %pos = Greater(%s, %zero) : bool[]\n"
    "  %y = If(%pos) : f32[DIM, 4] {\n"
    "    then_branch() {\n"
    "      %t = Relu(%x) : f32[DIM, 4]\n"
    "      return %t\n"
    "    }\n"
    "    else_branch() {\n"
    "      %e = Neg(%x) : f32[DIM, 4]\n"
    "      return %e\n"
    "    }\n"
    "  }\n"
    "  return %y\n"
    "}\n";

static IrGraph *parse_with_dim(const char *dim) {
    char text[2048];
    const char *src = SYMBOLIC_SELECT_TEXT;
    size_t n = 0;
    for (const char *p = src; *p && n + 8 < sizeof text; p++) {
        if (strncmp(p, "DIM", 3) == 0) {
            n += (size_t)snprintf(text + n, sizeof text - n, "%s", dim);
            p += 2;
        } else {
            text[n++] = *p;
        }
    }
    text[n] = 0;
    return parse_ok(text);
}

Test(lower_cf, symbolic_shapes_select_but_unknown_dims_do_not) {
    IrGraph *g = parse_with_dim("B");
    TuTensors in = {0}, before = {0}, after = {0};
    cr_assert(tu_make_inputs(g, 7, 4, &in));
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_interp(g, &in, &before, &d), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_run_pipeline(g, "lower-cf", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_count_op(g, IR_OP_WHERE), 1, "f32[B, 4] in both branches is the same shape");
    cr_assert_eq(tu_interp(g, &in, &after, &d), IR_OK, "%s", tu_diag_text(&d));
    char why[256];
    cr_assert(tu_outputs_close(&before, &after, -1.0, why, sizeof why), "%s", why);
    tu_tensors_free(&in);
    tu_tensors_free(&before);
    tu_tensors_free(&after);
    ir_graph_destroy(g);
    g = parse_with_dim("?");
    cr_assert_eq(tu_run_pipeline(g, "lower-cf", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_count_op(g, IR_OP_IF), 1, "two ? dims need not agree");
    cr_assert_not_null(strstr(tu_diag_text(&d), "fully known type"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

Test(lower_cf, expensive_if_stays_structured_with_a_note) {
    IrGraph *g = parse_ok(SELECT_TEXT);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_run_pipeline(g, "lower-cf{max-cost=2}", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_count_op(g, IR_OP_IF), 1);
    cr_assert_not_null(strstr(tu_diag_text(&d), "stays structured"), "%s", tu_diag_text(&d));
    cr_assert_not_null(strstr(tu_diag_text(&d), "max-cost=2"), "%s", tu_diag_text(&d));
    cr_assert_eq(d.diag.n_errors, 0);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

static const char *LOOP_TEXT =
    "graph @g(%x: f32[4]) {\n"
    "  const %trips: i64[] = [3]\n"
    "  const %go: bool[] = [true]\n"
    "  const %two: f32[] = [2.0]\n"
    "  %final, %steps = Loop(%trips, %go, %x) : f32[4], f32[?, 4] name(\"loop\") {\n"
    "    body(%i: i64[], %cond: bool[], %acc: f32[4]) {\n"
    "      %fi = Cast(%i) {to = f32} : f32[]\n"
    "      %m = Mul(%acc, %two) : f32[4]\n"
    "      %next = Add(%m, %fi) : f32[4]\n"
    "      %keep = Identity(%cond) : bool[]\n"
    "      return %keep, %next, %next\n"
    "    }\n"
    "  }\n"
    "  return %final, %steps\n"
    "}\n";

Test(lower_cf, loop_with_three_trips_unrolls) {
    IrGraph *g = parse_ok(LOOP_TEXT);
    float x[4] = {1.0f, -2.0f, 0.5f, 0.0f};
    const float *xs[1] = {x};
    TuTensors after;
    compare_around(g, "lower-cf", xs, 1, 4, true, &after);
    cr_assert_eq(tu_count_op(g, IR_OP_LOOP), 0);
    cr_assert_eq(tu_count_op(g, IR_OP_CONCAT), 1);
    cr_assert_eq(tu_count_op(g, IR_OP_UNSQUEEZE), 3);
    cr_assert_str_eq(ir_value_name(g, ir_graph_output(g, 0)), "final");
    cr_assert_str_eq(ir_value_name(g, ir_graph_output(g, 1)), "steps");
    /* acc1 = 2x, acc2 = 2 acc1 + 1, acc3 = 2 acc2 + 2 */
    cr_assert_eq(after.n, 2);
    cr_assert_eq(after.t[1].rank, 2);
    cr_assert_eq(after.t[1].dims[0], 3);
    cr_assert_eq(after.t[1].dims[1], 4);
    const float *fin = after.t[0].data, *steps = after.t[1].data;
    for (int k = 0; k < 4; k++) {
        float a1 = 2 * x[k], a2 = 2 * a1 + 1, a3 = 2 * a2 + 2;
        cr_assert_eq(steps[k], a1);
        cr_assert_eq(steps[4 + k], a2);
        cr_assert_eq(steps[8 + k], a3);
        cr_assert_eq(fin[k], a3);
    }
    tu_tensors_free(&after);
    ir_graph_destroy(g);
}

Test(lower_cf, long_loop_stays_structured) {
    IrGraph *g = parse_ok(LOOP_TEXT);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_run_pipeline(g, "lower-cf{max-trip=2}", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_count_op(g, IR_OP_LOOP), 1);
    cr_assert_not_null(strstr(tu_diag_text(&d), "exceeds max-trip=2"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

/* A Scan over the columns of a constant, last column first, with a state and two scan outputs:
 * one stacked on axis 0, one on the last axis in reverse order. */
static const char *SCAN_TEXT =
    "graph @g(%x: f32[4]) {\n"
    "  const %seq: f32[4, 3] = [1.0, 2.0, 3.0, -1.0, 0.5, 4.0, 2.0, -3.0, 1.5, 0.25, 8.0, -2.0]\n"
    "  const %half: f32[] = [0.5]\n"
    "  %final, %ys, %cs = Scan(%x, %seq) {num_scan_inputs = 1, scan_input_axes = [1], scan_input_directions = [1],\n"
    "                                     scan_output_axes = [0, -1], scan_output_directions = [0, 1]} : f32[4], f32[3, 4], f32[4, 3] {\n"
    "    body(%acc: f32[4], %col: f32[4]) {\n"
    "      %m = Mul(%acc, %half) : f32[4]\n"
    "      %next = Add(%m, %col) : f32[4]\n"
    "      return %next, %next, %col\n"
    "    }\n"
    "  }\n"
    "  return %final, %ys, %cs\n"
    "}\n";

Test(lower_cf, scan_unrolls_with_axes_and_directions) {
    IrGraph *g = parse_ok(SCAN_TEXT);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_run_pipeline(g, "shape-infer", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    float x[4] = {1.0f, -2.0f, 0.5f, 0.0f};
    const float *xs[1] = {x};
    TuTensors after;
    compare_around(g, "lower-cf", xs, 1, 4, true, &after);
    cr_assert_eq(tu_count_op(g, IR_OP_SCAN), 0);
    cr_assert_eq(tu_count_op(g, IR_OP_GATHER), 3);
    cr_assert_eq(tu_count_op(g, IR_OP_UNSQUEEZE), 6);
    cr_assert_eq(tu_count_op(g, IR_OP_CONCAT), 2);
    cr_assert_str_eq(ir_value_name(g, ir_graph_output(g, 1)), "ys");
    /* columns taken last first: c2, c1, c0; acc_t = acc_{t-1} / 2 + column */
    static const float seq[4][3] = {{1, 2, 3}, {-1, 0.5f, 4}, {2, -3, 1.5f}, {0.25f, 8, -2}};
    const float *fin = after.t[0].data, *ys = after.t[1].data, *cs = after.t[2].data;
    cr_assert_eq(after.t[2].dims[0], 4);
    cr_assert_eq(after.t[2].dims[1], 3);
    for (int k = 0; k < 4; k++) {
        float acc = x[k];
        for (int t = 0; t < 3; t++) {
            acc = acc * 0.5f + seq[k][2 - t];
            cr_assert_eq(ys[t * 4 + k], acc, "step %d lane %d", t, k);
            /* cs reversed: step t's column lands at position 2 - t of the last axis */
            cr_assert_eq(cs[k * 3 + (2 - t)], seq[k][2 - t]);
        }
        cr_assert_eq(fin[k], acc);
    }
    tu_tensors_free(&after);
    ir_graph_destroy(g);
}

Test(lower_cf, long_scan_stays_structured) {
    IrGraph *g = parse_ok(SCAN_TEXT);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_run_pipeline(g, "shape-infer,lower-cf{max-trip=2}", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_count_op(g, IR_OP_SCAN), 1);
    cr_assert_not_null(strstr(tu_diag_text(&d), "the scan length 3 exceeds max-trip=2"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

/* An If on data and an If on a constant inside a Loop body; carried values passed through. */
static const char *NESTED_TEXT =
    "graph @g(%x: f32[4]) {\n"
    "  const %trips: i64[] = [2]\n"
    "  const %zero: f32[] = [0.0]\n"
    "  const %yes: bool[] = [true]\n"
    "  %final, %same, %steps = Loop(%trips, %yes, %x, %x) : f32[4], f32[4], f32[?, 4] name(\"outer\") {\n"
    "    body(%i: i64[], %cond: bool[], %acc: f32[4], %keep: f32[4]) {\n"
    "      %s = ReduceSum(%acc) {keepdims = 0} : f32[]\n"
    "      %pos = Greater(%s, %zero) : bool[]\n"
    "      %v = If(%pos) : f32[4] {\n"
    "        then_branch() {\n"
    "          %a = Sub(%acc, %x) : f32[4]\n"
    "          return %a\n"
    "        }\n"
    "        else_branch() {\n"
    "          %b = Add(%acc, %x) : f32[4]\n"
    "          return %b\n"
    "        }\n"
    "      }\n"
    "      %w = If(%yes) : f32[4] {\n"
    "        then_branch() {\n"
    "          %c = Neg(%v) : f32[4]\n"
    "          return %c\n"
    "        }\n"
    "        else_branch() {\n"
    "          return %v\n"
    "        }\n"
    "      }\n"
    "      %t = Constant() {value = bool[] [true]} : bool[]\n"
    "      return %t, %w, %keep, %v\n"
    "    }\n"
    "  }\n"
    "  return %final, %same, %steps\n"
    "}\n";

Test(lower_cf, nested_control_flow) {
    IrGraph *g = parse_ok(NESTED_TEXT);
    float a[4] = {1.0f, -2.0f, 0.5f, 3.0f}, b[4] = {-1.0f, -2.0f, 0.5f, -3.0f};
    const float *xs[2] = {a, b};
    compare_around(g, "lower-cf", xs, 2, 4, true, NULL);
    cr_assert_eq(tu_count_op(g, IR_OP_IF) + tu_count_op(g, IR_OP_LOOP), 0);
    cr_assert_eq(tu_count_op(g, IR_OP_WHERE), 2, "one select per iteration");
    cr_assert_eq(ir_node_op(g, ir_value_def_node(g, ir_graph_output(g, 1))), IR_OP_IDENTITY,
                 "a passed-through carried value that is a graph output keeps its name through an Identity");
    /* running it again changes nothing */
    char *once = tu_print(g);
    TuDiag d;
    tu_diag_init(&d);
    cr_assert_eq(tu_run_pipeline(g, "lower-cf", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    char *twice = tu_print(g);
    cr_assert_str_eq(once, twice);
    free(once);
    free(twice);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

Test(lower_cf, corpus_control_flow_becomes_straight_line) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("control_flow.ir", &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_run_pipeline(g, "default", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_count_op(g, IR_OP_IF) + tu_count_op(g, IR_OP_LOOP), 0);
    verify_ok(g);
    tu_diag_free(&d);
    ir_graph_destroy(g);
}

/* ---- the pass manager's reproducer ---------------------------------------------------------- */

Test(pipeline, reproducer_on_failure) {
    /* the declared result type contradicts the rule, so verification after the first pass
     * fails; the reproducer holds the IR as that pass received it */
    const char *text = "graph @bad(%x: f32[4]) {\n  %y = Relu(%x) : f32[3]\n  return %y\n}\n";
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, "bad.ir", &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    char *dir = tu_mkdtemp();
    cr_assert_not_null(dir);
    char *path = tu_path_join(dir, "repro.ir");
    IrPipeline *p;
    cr_assert_eq(ir_pipeline_parse("canonicalize,cse", &d.diag, &p), IR_OK);
    IrPipelineOptions po = {true, IR_PRINT_NEVER, NULL, stderr, path};
    cr_assert_eq(ir_pipeline_run(p, g, &po, &d.diag), IR_EVERIFY);
    cr_assert_not_null(strstr(tu_diag_text(&d), "pass canonicalize left an invalid graph"), "%s", tu_diag_text(&d));
    ir_pipeline_destroy(p);
    size_t len;
    char *repro = tu_read_file(path, &len);
    cr_assert_not_null(repro, "no reproducer at %s", path);
    cr_assert_not_null(strstr(repro, "meta \"irtool.pipeline\" = \"canonicalize,cse\""), "%s", repro);
    TuDiag pd;
    tu_diag_init(&pd);
    IrGraph *r = tu_parse(repro, "repro.ir", &pd);
    cr_assert_not_null(r, "the reproducer does not parse: %s", tu_diag_text(&pd));
    const char *pipeline = NULL;
    for (uint32_t i = 0; i < ir_graph_num_meta(r); i++) {
        const char *k, *v;
        ir_graph_meta_at(r, i, &k, &v);
        if (strcmp(k, "irtool.pipeline") == 0) pipeline = v;
    }
    cr_assert_not_null(pipeline);
    cr_assert_str_eq(pipeline, "canonicalize,cse");
    cr_assert_eq(ir_graph_num_nodes(r), 1);
    ir_graph_destroy(r);
    tu_diag_free(&pd);
    free(repro);
    free(path);
    tu_rmtree(dir);
    free(dir);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- lower-seq ------------------------------------------------------------------------------ */

static bool has_sequences(const IrGraph *g) {
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n))
        for (uint32_t i = 0; i < ir_node_num_results(g, n); i++)
            if (ir_node_result(g, n, i) && ir_type_kind(g, ir_value_type(g, ir_node_result(g, n, i))) == IR_TYPE_SEQ)
                return true;
    return false;
}

/* Sequences of a static structure become their tensors: Construct/Insert/Erase/At, Length,
 * ConcatFromSequence with and without new_axis, SplitToSequence without keepdims; outputs
 * bit-identical, no sequence value left. */
Test(lower_seq, static_sequences_become_tensors) {
    const char *text = "graph @s(%a: f32[2, 3], %b: f32[2, 3]) {\n"
                       "  const %one: i64[] = [1]\n  const %first: i64[] = [0]\n"
                       "  %q = SequenceConstruct(%a, %b) : seq<f32[2, 3]>\n"
                       "  %r = SequenceInsert(%q, %a, %first) : seq<f32[2, 3]>\n"
                       "  %t = SequenceErase(%r, %one) : seq<f32[2, 3]>\n"
                       "  %e = SequenceAt(%t, %one) : f32[2, 3]\n"
                       "  %c = ConcatFromSequence(%t) {axis = -1, new_axis = 1} : f32[2, 3, 2]\n"
                       "  %p = SplitToSequence(%b) {axis = 1, keepdims = 0} : seq<f32[2]>\n"
                       "  %n = SequenceLength(%p) : i64[]\n"
                       "  %z = SequenceAt(%p, %one) : f32[2]\n"
                       "  return %e, %c, %n, %z\n}\n";
    Model m = {.label = "lower_seq", .path = NULL};
    char *dir = tu_mkdtemp(), *path = tu_path_join(dir, "s.ir");
    cr_assert(tu_write_file(path, text, strlen(text)));
    m.path = path;
    cr_assert_eq(check_preserved(&m, "shape-infer,lower-seq,dce", true), 1);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = model_load(&m, &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert(has_sequences(g));
    cr_assert_eq(tu_run_pipeline(g, "shape-infer,lower-seq,dce", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    char *out = tu_print(g);
    cr_assert(!has_sequences(g), "%s", out);
    free(out);
    ir_graph_destroy(g);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir), free(path);
}

/* ONNX's simple/test_sequence_model1..8 (when ../shared is present): lowered completely, the
 * same outputs on their own test data. */
Test(lower_seq, onnx_sequence_models, .timeout = 60) {
    const char *shared = getenv("IRTOOL_SHARED_DIR");
    if (!shared || !*shared) cr_skip_test("IRTOOL_SHARED_DIR not set");
    for (int i = 1; i <= 8; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "%s/onnx-tests/simple/test_sequence_model%d", shared, i);
        Model m = {0};
        m.path = join(rel, "model.onnx");
        m.label = strdup(rel);
        if (!is_file(m.path)) {
            free(m.path), free(m.label);
            cr_skip_test("%s missing", rel);
        }
        cr_assert(model_inputs(&m, rel, false), "%s: no test data", rel);
        check_preserved(&m, "shape-infer,lower-seq,dce", true);
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = model_load(&m, &d);
        cr_assert(g, "%s", tu_diag_text(&d));
        cr_assert_eq(tu_run_pipeline(g, "shape-infer,lower-seq,dce", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
        cr_assert(!has_sequences(g), "%s still has sequences", rel);
        ir_graph_destroy(g);
        tu_diag_free(&d);
        tu_tensors_free(&m.inputs);
        free(m.path), free(m.label);
    }
}

/* ---- lower-grad ----------------------------------------------------------------------------- */

/* Gradient written out as ops: through Add, Sub, Mul, Div with broadcasting (summed back to
 * the operand's shape), Relu, Sigmoid, Tanh, Exp, Log and a 2-D MatMul, with a zs value held
 * constant and an x y does not depend on (zeros): the same gradients as the interpreter's
 * Gradient (which computes in f64) within 1e-6, and no Gradient node left. */
Test(lower_grad, gradients_become_ops) {
    const char *text =
        "graph @g(%a: f32[3, 4], %b: f32[4], %w: f32[4, 2], %z: f32[3, 1], %u: f32[2]) {\n"
        "  %s = Add(%a, %b) : f32[3, 4]\n  %t = Sub(%s, %z) : f32[3, 4]\n  %m = Mul(%t, %b) : f32[3, 4]\n"
        "  %r = Relu(%m) : f32[3, 4]\n  %q = Sigmoid(%r) : f32[3, 4]\n  %h = Tanh(%q) : f32[3, 4]\n"
        "  %e = Exp(%h) : f32[3, 4]\n  %l = Log(%e) : f32[3, 4]\n  %d = Div(%l, %b) : f32[3, 4]\n"
        "  %y = MatMul(%d, %w) : f32[3, 2]\n"
        "  %ga, %gb, %gw, %gu = ai.onnx.preview.training.Gradient(%a, %b, %w, %u, %z) "
        "{xs = [\"a\", \"b\", \"w\", \"u\"], y = \"y\", zs = [\"z\"]} : f32[3, 4], f32[4], f32[4, 2], f32[2]\n"
        "  return %y, %ga, %gb, %gw, %gu\n}\n";
    char *dir = tu_mkdtemp(), *path = tu_path_join(dir, "g.ir");
    cr_assert(tu_write_file(path, text, strlen(text)));
    Model m = {.label = "lower_grad", .path = path};
    cr_assert_eq(check_preserved(&m, "shape-infer,lower-grad,dce", false), 1);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = model_load(&m, &d);
    cr_assert(g, "%s", tu_diag_text(&d));
    cr_assert_eq(tu_run_pipeline(g, "shape-infer,lower-grad,dce", &d, NULL, NULL), IR_OK, "%s", tu_diag_text(&d));
    for (IrNodeId n = ir_region_first(g, IR_ROOT_REGION); n; n = ir_node_next(g, n))
        cr_assert_neq(ir_node_op(g, n), IR_OP_GRADIENT, "a Gradient node is left");
    ir_graph_destroy(g);
    tu_diag_free(&d);
    tu_rmtree(dir);
    free(dir), free(path);
}

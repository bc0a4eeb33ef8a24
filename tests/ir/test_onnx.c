/* ONNX import and export: every corpus model survives export and import with the same text;
 * locations, provenance, symbols, constraints, opsets and every attribute kind survive too;
 * older opset forms are upgraded to the op table's opset-17 forms; real ONNX files from
 * /work/shared import and verify; truncated, corrupt or hostile protobufs and unsafe external
 * data paths fail with an error (never a crash); unsupported ops are named exactly.
 * Models for the importer are built here with protobuf-c, so each test says what it feeds in.
 */
#include "testutil.h"

#include "onnx.pb-c.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- building ModelProtos ------------------------------------------------------------------ */

/* Every allocation of a model under construction, freed together. */
typedef struct Mb {
    void *blocks[4096];
    size_t n;
} Mb;

static void *mb_alloc(Mb *m, size_t n) {
    cr_assert_lt(m->n, sizeof m->blocks / sizeof m->blocks[0]);
    void *p = calloc(1, n ? n : 1);
    cr_assert_not_null(p);
    m->blocks[m->n++] = p;
    return p;
}

static void mb_free(Mb *m) {
    for (size_t i = 0; i < m->n; i++) free(m->blocks[i]);
    m->n = 0;
}

static void *mb_init(Mb *m, size_t n, const void *init) { return memcpy(mb_alloc(m, n), init, n); }
#define MB_NEW(m, T, INIT) ((T *)mb_init(m, sizeof(T), &(T)INIT))

static char *mb_str(Mb *m, const char *s) { return strcpy(mb_alloc(m, strlen(s) + 1), s); }

/* Splits "a,b,,c" into strings ("" kept for absent optional inputs). */
static char **mb_names(Mb *m, const char *csv, size_t *n) {
    *n = 0;
    if (!*csv) return NULL;
    size_t count = 1;
    for (const char *p = csv; *p; p++) count += *p == ',';
    char **v = mb_alloc(m, count * sizeof *v);
    const char *p = csv;
    for (size_t i = 0; i < count; i++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        v[i] = mb_alloc(m, len + 1);
        memcpy(v[i], p, len);
        p += len + 1;
    }
    *n = count;
    return v;
}

typedef struct MbModel {
    Mb mb;
    Onnx__ModelProto model;
    Onnx__GraphProto *graph;
} MbModel;

static void mm_init(MbModel *mm, int64_t opset) {
    memset(mm, 0, sizeof *mm);
    Onnx__ModelProto init = ONNX__MODEL_PROTO__INIT;
    mm->model = init;
    mm->model.has_ir_version = 1;
    mm->model.ir_version = 7;
    mm->graph = MB_NEW(&mm->mb, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
    mm->graph->name = "test";
    mm->model.graph = mm->graph;
    Onnx__OperatorSetIdProto *o = MB_NEW(&mm->mb, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
    o->domain = "";
    o->has_version = 1;
    o->version = opset;
    mm->model.n_opset_import = 1;
    mm->model.opset_import = mb_alloc(&mm->mb, sizeof(void *));
    mm->model.opset_import[0] = o;
}

/* Appends p to a protobuf-c repeated pointer field (arrays are reallocated into the arena). */
static void **grow(Mb *m, void **arr, size_t *n, void *p) {
    void **na = mb_alloc(m, (*n + 1) * sizeof *na);
    if (*n) memcpy(na, arr, *n * sizeof *na);
    na[(*n)++] = p;
    return na;
}

/* A tensor type; dims: -1 = unknown, -2 = the symbol "N"; rank -1 = no shape. */
static Onnx__TypeProto *mm_type(MbModel *mm, int elem, int rank, const int64_t *dims) {
    Onnx__TypeProto *tp = MB_NEW(&mm->mb, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    Onnx__TypeProto__Tensor *tt = MB_NEW(&mm->mb, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    if (rank < 0) return tp;
    tt->shape = MB_NEW(&mm->mb, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
    tt->shape->n_dim = (size_t)rank;
    tt->shape->dim = mb_alloc(&mm->mb, (size_t)(rank + 1) * sizeof(void *));
    for (int i = 0; i < rank; i++) {
        Onnx__TensorShapeProto__Dimension *d =
            MB_NEW(&mm->mb, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
        if (dims[i] >= 0) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = dims[i];
        } else if (dims[i] == -2) {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = "N";
        }
        tt->shape->dim[i] = d;
    }
    return tp;
}

static Onnx__ValueInfoProto *mm_vi(MbModel *mm, const char *name, int elem, int rank, const int64_t *dims) {
    Onnx__ValueInfoProto *vi = MB_NEW(&mm->mb, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
    vi->name = mb_str(&mm->mb, name);
    if (elem) vi->type = mm_type(mm, elem, rank, dims);
    return vi;
}

static void mm_input(MbModel *mm, const char *name, int elem, int rank, const int64_t *dims) {
    Onnx__GraphProto *g = mm->graph;
    g->input = (Onnx__ValueInfoProto **)grow(&mm->mb, (void **)g->input, &g->n_input, mm_vi(mm, name, elem, rank, dims));
}

static void mm_output(MbModel *mm, const char *name, int elem, int rank, const int64_t *dims) {
    Onnx__GraphProto *g = mm->graph;
    g->output = (Onnx__ValueInfoProto **)grow(&mm->mb, (void **)g->output, &g->n_output, mm_vi(mm, name, elem, rank, dims));
}

static Onnx__TensorProto *mm_tensor_f32(MbModel *mm, const char *name, int rank, const int64_t *dims,
                                         const float *vals, size_t n) {
    Onnx__TensorProto *t = MB_NEW(&mm->mb, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    t->name = name ? mb_str(&mm->mb, name) : NULL;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_dims = (size_t)rank;
    t->dims = mb_alloc(&mm->mb, (size_t)(rank + 1) * sizeof(int64_t));
    memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
    t->n_float_data = n;
    t->float_data = mb_alloc(&mm->mb, (n + 1) * sizeof(float));
    memcpy(t->float_data, vals, n * sizeof(float));
    return t;
}

static void mm_init_tensor(MbModel *mm, Onnx__TensorProto *t) {
    Onnx__GraphProto *g = mm->graph;
    g->initializer = (Onnx__TensorProto **)grow(&mm->mb, (void **)g->initializer, &g->n_initializer, t);
}

static Onnx__NodeProto *mm_node(MbModel *mm, const char *op, const char *ins, const char *outs, const char *name) {
    Onnx__NodeProto *n = MB_NEW(&mm->mb, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
    n->op_type = mb_str(&mm->mb, op);
    n->input = mb_names(&mm->mb, ins, &n->n_input);
    n->output = mb_names(&mm->mb, outs, &n->n_output);
    n->name = name ? mb_str(&mm->mb, name) : NULL;
    Onnx__GraphProto *g = mm->graph;
    g->node = (Onnx__NodeProto **)grow(&mm->mb, (void **)g->node, &g->n_node, n);
    return n;
}

static Onnx__AttributeProto *mm_attr(MbModel *mm, Onnx__NodeProto *n, const char *name, int type) {
    Onnx__AttributeProto *a = MB_NEW(&mm->mb, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
    a->name = mb_str(&mm->mb, name);
    a->has_type = 1;
    a->type = type;
    n->attribute = (Onnx__AttributeProto **)grow(&mm->mb, (void **)n->attribute, &n->n_attribute, a);
    return a;
}

static void attr_int(MbModel *mm, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = mm_attr(mm, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void attr_float(MbModel *mm, Onnx__NodeProto *n, const char *name, float v) {
    Onnx__AttributeProto *a = mm_attr(mm, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static void attr_ints(MbModel *mm, Onnx__NodeProto *n, const char *name, size_t count, const int64_t *v) {
    Onnx__AttributeProto *a = mm_attr(mm, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = count;
    a->ints = mb_alloc(&mm->mb, (count + 1) * sizeof *v);
    memcpy(a->ints, v, count * sizeof *v);
}

static void attr_floats(MbModel *mm, Onnx__NodeProto *n, const char *name, size_t count, const float *v) {
    Onnx__AttributeProto *a = mm_attr(mm, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    a->n_floats = count;
    a->floats = mb_alloc(&mm->mb, (count + 1) * sizeof *v);
    memcpy(a->floats, v, count * sizeof *v);
}

static void attr_str(MbModel *mm, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = mm_attr(mm, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)mb_str(&mm->mb, v);
}

static uint8_t *mm_pack(MbModel *mm, size_t *len) {
    *len = onnx__model_proto__get_packed_size(&mm->model);
    uint8_t *buf = malloc(*len + 1);
    cr_assert_not_null(buf);
    onnx__model_proto__pack(&mm->model, buf);
    return buf;
}

/* Imports the model; returns the graph (NULL on failure) and the diagnostics in *text. */
static IrGraph *mm_import(MbModel *mm, const char *path, char **text) {
    size_t len;
    uint8_t *buf = mm_pack(mm, &len);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    IrStatus s = ir_onnx_import(buf, len, path, &d.diag, &g);
    cr_assert((s == IR_OK) == (g != NULL));
    if (text) *text = strdup(tu_diag_text(&d));
    tu_diag_free(&d);
    free(buf);
    return g;
}

/* Imports, expects success and a verified graph; returns the printed text. */
static char *mm_import_text(MbModel *mm) {
    char *diag;
    IrGraph *g = mm_import(mm, "model.onnx", &diag);
    cr_assert_not_null(g, "import failed:\n%s", diag);
    free(diag);
    TuDiag d;
    tu_diag_init(&d);
    char *text = tu_print(g);
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s\n%s", tu_diag_text(&d), text);
    tu_diag_free(&d);
    ir_graph_destroy(g);
    return text;
}

/* ---- export then import -------------------------------------------------------------------- */

/* print(import(export(parse(text)))) must equal print(parse(text)). */
static void check_round_trip(const char *text, const char *what) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(text, what, &d);
    cr_assert_not_null(g, "%s: %s", what, tu_diag_text(&d));
    char *p1 = tu_print(g);
    char *dir = tu_mkdtemp();
    cr_assert(p1 && dir);
    char *path = tu_path_join(dir, "model.onnx");
    cr_assert_eq(ir_onnx_export(g, path, &d.diag), IR_OK, "%s: %s", what, tu_diag_text(&d));
    size_t len;
    char *bytes = tu_read_file(path, &len);
    cr_assert_not_null(bytes);
    IrGraph *g2 = NULL;
    cr_assert_eq(ir_onnx_import(bytes, len, path, &d.diag, &g2), IR_OK, "%s: %s", what, tu_diag_text(&d));
    char *p2 = tu_print(g2);
    cr_assert_not_null(p2);
    cr_assert_str_eq(p2, p1, "%s: import(export(x)) prints differently", what);
    /* exporting is deterministic: the imported graph exports to the same bytes */
    char *path2 = tu_path_join(dir, "again.onnx");
    cr_assert_eq(ir_onnx_export(g2, path2, &d.diag), IR_OK);
    size_t len2;
    char *bytes2 = tu_read_file(path2, &len2);
    cr_assert(bytes2 && len2 == len && memcmp(bytes, bytes2, len) == 0, "%s: export is not deterministic", what);
    free(bytes2);
    free(path2);
    ir_graph_destroy(g2);
    free(bytes);
    tu_rmtree(dir);
    free(path);
    free(dir);
    free(p1);
    free(p2);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(onnx, every_corpus_model_round_trips) {
    size_t n;
    char **files = tu_list_dir("corpus", ".ir", &n);
    cr_assert_not_null(files);
    cr_assert_geq(n, 5);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        char *text = tu_corpus_read(files[i], &len);
        cr_assert_not_null(text);
        check_round_trip(text, files[i]);
        free(text);
    }
    tu_free_list(files);
}

/* Everything ONNX has no field for, and every attribute kind. */
static const char features_ir[] =
    "symbol N, M, Unused\n"
    "constraint N in [1, 64]\n"
    "constraint N % 4 == 0\n"
    "constraint M == N * 2 + 1\n"
    "constraint N % 3 == 1\n"
    "opset \"\" 13\n"
    "opset \"com.example\" 2\n"
    "meta \"producer\" = \"hand-written\"\n"
    "meta \"note\" = \"a=b;c\\nline 2\"\n"
    "graph @\"features graph\"(%x: f32[N, 4], %u: f32[*], %\"odd name\": i64[], %q: f32[?, M]) {\n"
    "  const %w: f16[4] = [1.0, 2.0, 0.5, -1.5]\n"
    "  const %flag: bool[] = [true]\n"
    "  const %big: f32[20] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]\n"
    "  const %shape: i64[1] = [-1]\n"
    "  %k = Constant() {value = i64[2] [3, 4]} : i64[2] name(\"const k\") loc(\"dir/a:b\\\\c.py\":3:7) from(\"orig\\n1\", \"x,y\")\n"
    "  %h = Cast(%x) {saturate = 0, to = f16} : f16[N, 4] loc(\"m.py\":1:0)\n"
    "  %y, _ = MaxPool(%x) {auto_pad = \"SAME_UPPER\", kernel_shape = [2], strides = [1]} : f32[N, 4]\n"
    "  %c = Clip(%x, _, %x) : f32[N, 4] from(\"a\")\n"
    "  %f = irtool.fused(%x, %y) {kind = \"elementwise\"} : f32[N, 4] name(\"fused_1\") {\n"
    "    body(%a: f32[N, 4], %b: f32[N, 4]) {\n"
    "      %t = Add(%a, %b) : f32[N, 4]\n"
    "      %t2 = Relu(%t)\n"
    "      return %t2\n"
    "    }\n"
    "  }\n"
    "  %flat = Reshape(%f, %shape) : f32[N*4]\n"
    "  %rnn_y, %rnn_h = RNN(%x, %x, %x) {activation_alpha = [0.5, 0.25], activations = [\"Tanh\", \"\"], hidden_size = 2}\n"
    "  %lrn = LRN(%x) {alpha = 0.1, size = 3} : f32[N, 4]\n"
    "  %r = Resize(%u, _, %big) {cubic_coeff_a = -0.5, mode = \"linear\"} : f32[*]\n"
    "  %e = EyeLike(%x) {dtype = bf16, k = -1} : bf16[N, 4]\n"
    "  %cos = ConstantOfShape(%shape) {value = f64[1] [2.5]} : f64[?]\n"
    "  %sel = If(%flag) : f32[N, 4] {\n"
    "    then_branch() {\n"
    "      return %x\n"
    "    }\n"
    "    else_branch() {\n"
    "      %neg = Neg(%x) : f32[N, 4]\n"
    "      return %neg\n"
    "    }\n"
    "  }\n"
    "  %sum = Add(%q, %q) : f32[?, N*2+1]\n"
    "  irtool.shape_guard(%x) {message = \"rows\"}\n"
    "  return %flat, %k, %h, %c, %rnn_y, %lrn, %r, %e, %cos, %sel, %sum, %\"odd name\", %w\n"
    "}\n";

Test(onnx, locations_provenance_symbols_constraints_and_attribute_kinds_round_trip) {
    check_round_trip(features_ir, "features.ir");
}

Test(onnx, export_writes_opset_17_and_the_irtool_domain) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_parse(features_ir, "features.ir", &d);
    cr_assert_not_null(g, "%s", tu_diag_text(&d));
    char *dir = tu_mkdtemp();
    char *path = tu_path_join(dir, "m.onnx");
    cr_assert_eq(ir_onnx_export(g, path, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    size_t len;
    uint8_t *bytes = (uint8_t *)tu_read_file(path, &len);
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, bytes);
    cr_assert_not_null(m);
    cr_assert_eq(m->ir_version, 8);
    bool def17 = false, irtool1 = false, example2 = false;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *dm = m->opset_import[i]->domain ? m->opset_import[i]->domain : "";
        int64_t v = m->opset_import[i]->version;
        def17 |= !*dm && v == 17;
        irtool1 |= strcmp(dm, "irtool") == 0 && v == 1;
        example2 |= strcmp(dm, "com.example") == 0 && v == 2;
    }
    cr_assert(def17 && irtool1 && example2);
    cr_assert_str_eq(m->graph->name, "features graph");
    cr_assert_eq(m->graph->n_initializer, 4);
    cr_assert(m->graph->initializer[0]->has_raw_data);
    bool fused = false;
    for (size_t i = 0; i < m->graph->n_node; i++) {
        Onnx__NodeProto *np = m->graph->node[i];
        if (strcmp(np->op_type, "fused") == 0) {
            fused = true;
            cr_assert_str_eq(np->domain, "irtool");
            cr_assert_str_eq(np->name, "fused_1");
        }
    }
    cr_assert(fused);
    /* inputs: symbols as dim_param, unknown dims empty, unranked without a shape */
    Onnx__TypeProto__Tensor *x = m->graph->input[0]->type->tensor_type;
    cr_assert_str_eq(x->shape->dim[0]->dim_param, "N");
    cr_assert_eq(x->shape->dim[1]->dim_value, 4);
    cr_assert_null(m->graph->input[1]->type->tensor_type->shape);
    cr_assert_eq(m->graph->input[3]->type->tensor_type->shape->dim[0]->value_case,
                 ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET);
    onnx__model_proto__free_unpacked(m, NULL);
    free(bytes);
    tu_rmtree(dir);
    free(dir);
    free(path);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* ---- upgrades of older opsets -------------------------------------------------------------- */

static const int64_t d2x3[] = {2, 3}, d4[] = {4}, d2x3x4[] = {2, 3, 4}, d1x1x2x2[] = {1, 1, 2, 2},
                     d1x1x4x4[] = {1, 1, 4, 4}, dN3[] = {-2, 3};
#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

static char *import_error(MbModel *mm);

static void assert_has(const char *text, const char *needle) {
    cr_assert_not_null(strstr(text, needle), "expected `%s` in:\n%s", needle, text);
}

Test(onnx, opset_11_split_squeeze_unsqueeze_reducesum_attributes_become_inputs) {
    MbModel mm;
    mm_init(&mm, 11);
    mm_input(&mm, "x", F32, 2, d2x3);
    Onnx__NodeProto *n = mm_node(&mm, "Split", "x", "a,b", "split0");
    attr_int(&mm, n, "axis", 1);
    attr_ints(&mm, n, "split", 2, (int64_t[]){1, 2});
    n = mm_node(&mm, "Unsqueeze", "a", "u", NULL);
    attr_ints(&mm, n, "axes", 1, (int64_t[]){0});
    n = mm_node(&mm, "Squeeze", "u", "s", NULL);
    attr_ints(&mm, n, "axes", 1, (int64_t[]){0});
    n = mm_node(&mm, "ReduceSum", "b", "r", NULL);
    attr_ints(&mm, n, "axes", 1, (int64_t[]){1});
    attr_int(&mm, n, "keepdims", 0);
    mm_output(&mm, "s", F32, 2, (int64_t[]){2, 1});
    mm_output(&mm, "r", F32, 1, (int64_t[]){2});
    char *t = mm_import_text(&mm);
    assert_has(t, "const %a_split: i64[2] = [1, 2]");
    assert_has(t, "%a, %b = Split(%x, %a_split) {axis = 1}");
    assert_has(t, "%u = Unsqueeze(%a, %u_axes)");
    assert_has(t, "%s = Squeeze(%u, %s_axes) : f32[2, 1]");
    assert_has(t, "%r = ReduceSum(%b, %r_axes) {keepdims = 0} : f32[2]");
    assert_has(t, "opset \"\" 11");
    free(t);
    mb_free(&mm.mb);
}

Test(onnx, opset_9_clip_pad_slice_topk_dropout_batchnorm_cast_upgrade) {
    MbModel mm;
    mm_init(&mm, 9);
    mm_input(&mm, "x", F32, 2, d2x3);
    Onnx__NodeProto *n = mm_node(&mm, "Clip", "x", "c", NULL);
    attr_float(&mm, n, "min", -1.0f);
    attr_float(&mm, n, "max", 1.0f);
    n = mm_node(&mm, "Pad", "c", "p", NULL);
    attr_ints(&mm, n, "pads", 4, (int64_t[]){0, 1, 0, 1});
    attr_float(&mm, n, "value", 0.5f);
    n = mm_node(&mm, "Slice", "p", "sl", NULL);
    attr_ints(&mm, n, "starts", 1, (int64_t[]){1});
    attr_ints(&mm, n, "ends", 1, (int64_t[]){4});
    attr_ints(&mm, n, "axes", 1, (int64_t[]){1});
    n = mm_node(&mm, "TopK", "sl", "tv,ti", NULL);
    attr_int(&mm, n, "k", 2);
    n = mm_node(&mm, "Dropout", "tv", "dr", NULL);
    attr_float(&mm, n, "ratio", 0.25f);
    n = mm_node(&mm, "Cast", "ti", "ci", NULL);
    attr_int(&mm, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT32);
    mm_output(&mm, "dr", F32, 2, (int64_t[]){2, 2});
    mm_output(&mm, "ci", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 2, (int64_t[]){2, 2});
    char *t = mm_import_text(&mm);
    assert_has(t, "const %c_min: f32[] = [-1.0]");
    assert_has(t, "%c = Clip(%x, %c_min, %c_max)");
    assert_has(t, "const %p_pads: i64[4] = [0, 1, 0, 1]");
    assert_has(t, "%p = Pad(%c, %p_pads, %p_value)");
    assert_has(t, "%sl = Slice(%p, %sl_starts, %sl_ends, %sl_axes)");
    assert_has(t, "%tv, %ti = TopK(%sl, %tv_k)");
    assert_has(t, "%dr = Dropout(%tv, %dr_ratio) : f32[2, 2]");
    assert_has(t, "%ci = Cast(%ti) {to = i32} : i32[2, 2]");
    free(t);
    mb_free(&mm.mb);

    /* BatchNormalization-7: spatial and is_test go, training outputs are dropped */
    mm_init(&mm, 7);
    mm_input(&mm, "x", F32, 4, d1x1x2x2);
    static const float one[] = {1.0f};
    const char *names[] = {"s", "b", "m", "v"};
    for (int i = 0; i < 4; i++) mm_init_tensor(&mm, mm_tensor_f32(&mm, names[i], 1, (int64_t[]){1}, one, 1));
    n = mm_node(&mm, "BatchNormalization", "x,s,b,m,v", "y", "bn");
    attr_int(&mm, n, "spatial", 1);
    attr_int(&mm, n, "is_test", 1);
    attr_float(&mm, n, "epsilon", 1e-3f);
    mm_output(&mm, "y", F32, 4, d1x1x2x2);
    t = mm_import_text(&mm);
    assert_has(t, "%y = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0.001} : f32[1, 1, 2, 2] name(\"bn\")");
    free(t);
    mb_free(&mm.mb);
}

Test(onnx, upsample_becomes_resize_with_asymmetric_coordinates) {
    MbModel mm;
    mm_init(&mm, 7);
    mm_input(&mm, "x", F32, 4, d1x1x2x2);
    Onnx__NodeProto *n = mm_node(&mm, "Upsample", "x", "y", NULL);
    attr_floats(&mm, n, "scales", 4, (float[]){1, 1, 2, 2});
    attr_str(&mm, n, "mode", "nearest");
    mm_output(&mm, "y", F32, 4, d1x1x4x4);
    char *t = mm_import_text(&mm);
    assert_has(t, "const %y_scales: f32[4] = [1.0, 1.0, 2.0, 2.0]");
    assert_has(t, "%y = Resize(%x, _, %y_scales) {coordinate_transformation_mode = \"asymmetric\", "
                  "mode = \"nearest\", nearest_mode = \"floor\"} : f32[1, 1, 4, 4]");
    free(t);
    mb_free(&mm.mb);

    mm_init(&mm, 9);
    mm_input(&mm, "x", F32, 4, d1x1x2x2);
    mm_input(&mm, "sc", F32, 1, d4);
    n = mm_node(&mm, "Upsample", "x,sc", "y", NULL);
    attr_str(&mm, n, "mode", "linear");
    mm_output(&mm, "y", F32, 4, d1x1x4x4);
    t = mm_import_text(&mm);
    assert_has(t, "%y = Resize(%x, _, %sc) {coordinate_transformation_mode = \"asymmetric\", mode = \"linear\"}");
    free(t);
    mb_free(&mm.mb);
}

Test(onnx, softmax_before_opset_13_keeps_its_flattening_semantics) {
    MbModel mm;
    mm_init(&mm, 11);
    mm_input(&mm, "x", F32, 3, d2x3x4);
    Onnx__NodeProto *n = mm_node(&mm, "Softmax", "x", "last", "sm_last");
    attr_int(&mm, n, "axis", 2);
    mm_node(&mm, "LogSoftmax", "x", "mid", "sm_mid"); /* default axis 1: flatten to [2, 12] */
    mm_output(&mm, "last", F32, 3, d2x3x4);
    mm_output(&mm, "mid", F32, 3, d2x3x4);
    char *t = mm_import_text(&mm);
    assert_has(t, "%last = Softmax(%x) {axis = 2} : f32[2, 3, 4] name(\"sm_last\")");
    assert_has(t, "%mid_shape = Shape(%x) name(\"sm_mid/shape\")");
    assert_has(t, "%mid_2d = Flatten(%x) {axis = 1} name(\"sm_mid/flatten\")");
    assert_has(t, "%mid_flat = LogSoftmax(%mid_2d) {axis = -1} name(\"sm_mid\")");
    assert_has(t, "%mid = Reshape(%mid_flat, %mid_shape) : f32[2, 3, 4] name(\"sm_mid/reshape\")");
    free(t);
    mb_free(&mm.mb);
}

Test(onnx, opset_6_axis_broadcast_and_per_channel_prelu_become_unsqueezes) {
    MbModel mm;
    mm_init(&mm, 6);
    mm_input(&mm, "x", F32, 3, d2x3x4);
    mm_input(&mm, "b", F32, 1, (int64_t[]){3});
    mm_input(&mm, "c", F32, 1, d4);
    Onnx__NodeProto *n = mm_node(&mm, "Add", "x,b", "s", "add");
    attr_int(&mm, n, "broadcast", 1);
    attr_int(&mm, n, "axis", 1); /* b runs along dim 1: [3] -> [3, 1] */
    n = mm_node(&mm, "Mul", "s,c", "m", NULL);
    attr_int(&mm, n, "broadcast", 1);
    attr_int(&mm, n, "axis", -1); /* already the trailing dims: unchanged */
    n = mm_node(&mm, "PRelu", "m,b", "p", NULL);
    attr_ints(&mm, n, "consumed_inputs", 2, (int64_t[]){0, 0});
    mm_output(&mm, "p", F32, 3, d2x3x4);
    char *t = mm_import_text(&mm);
    assert_has(t, "const %s_axes: i64[1] = [1]");
    assert_has(t, "%s_unsqueezed = Unsqueeze(%b, %s_axes) name(\"add/unsqueeze\")");
    assert_has(t, "%s = Add(%x, %s_unsqueezed) name(\"add\")");
    assert_has(t, "%m = Mul(%s, %c)\n");
    assert_has(t, "const %p_axes: i64[1] = [1]");
    assert_has(t, "%p_unsqueezed = Unsqueeze(%b, %p_axes)");
    assert_has(t, "%p = PRelu(%m, %p_unsqueezed) : f32[2, 3, 4]");
    free(t);
    mb_free(&mm.mb);

    /* an axis that does not fit, and an operand of unknown rank */
    mm_init(&mm, 6);
    mm_input(&mm, "x", F32, 2, d2x3);
    mm_input(&mm, "b", F32, 1, (int64_t[]){3});
    n = mm_node(&mm, "Sub", "x,b", "y", NULL);
    attr_int(&mm, n, "broadcast", 1);
    attr_int(&mm, n, "axis", 2);
    mm_output(&mm, "y", F32, 2, d2x3);
    char *e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node #1 (op Sub): broadcast axis 2 does not fit operands of rank 2 and 1\n");
    free(e);
    mm.graph->input[1]->type->tensor_type->shape = NULL;
    e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node #1 (op Sub): broadcast at axis 2 needs the ranks of both operands, "
                        "and they are unknown\n");
    free(e);
    mb_free(&mm.mb);
}

Test(onnx, opsets_1_to_5_concat_reshape_cast_lppool_upsample_forms) {
    MbModel mm;
    mm_init(&mm, 3);
    mm_input(&mm, "x", F32, 2, d2x3);
    mm_node(&mm, "Concat", "x,x", "c", NULL); /* no axis before opset 4: 1 */
    Onnx__NodeProto *n = mm_node(&mm, "Reshape", "c", "r", NULL);
    attr_ints(&mm, n, "shape", 2, (int64_t[]){3, 4});
    n = mm_node(&mm, "Cast", "r", "k", NULL);
    attr_str(&mm, n, "to", "INT64");
    mm_output(&mm, "k", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, (int64_t[]){3, 4});
    char *t = mm_import_text(&mm);
    assert_has(t, "%c = Concat(%x, %x) {axis = 1}");
    assert_has(t, "const %r_shape: i64[2] = [3, 4]");
    assert_has(t, "%r = Reshape(%c, %r_shape)");
    assert_has(t, "%k = Cast(%r) {to = i64} : i64[3, 4]");
    free(t);
    mb_free(&mm.mb);

    mm_init(&mm, 1);
    mm_input(&mm, "x", F32, 4, d1x1x2x2);
    n = mm_node(&mm, "LpPool", "x", "p", NULL);
    attr_float(&mm, n, "p", 3.0f);
    attr_ints(&mm, n, "kernel_shape", 2, (int64_t[]){1, 1});
    n = mm_node(&mm, "Upsample", "p", "u", NULL);
    attr_float(&mm, n, "height_scale", 2.0f);
    attr_float(&mm, n, "width_scale", 2.0f);
    attr_str(&mm, n, "mode", "bilinear");
    mm_output(&mm, "u", F32, 4, d1x1x4x4);
    t = mm_import_text(&mm);
    assert_has(t, "%p = LpPool(%x) {kernel_shape = [1, 1], p = 3}");
    assert_has(t, "const %u_scales: f32[4] = [1.0, 1.0, 2.0, 2.0]");
    assert_has(t, "%u = Resize(%p, _, %u_scales) {coordinate_transformation_mode = \"asymmetric\", mode = \"linear\"}");
    free(t);
    mb_free(&mm.mb);

    /* an unknown dtype name, and Tile-1 */
    mm_init(&mm, 5);
    mm_input(&mm, "x", F32, 2, d2x3);
    attr_str(&mm, mm_node(&mm, "Cast", "x", "y", NULL), "to", "FLOAT128");
    mm_output(&mm, "y", F32, 2, d2x3);
    char *e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node #1 (op Cast): attribute 'to': dtype 'FLOAT128' is not supported\n");
    free(e);
    mb_free(&mm.mb);
    mm_init(&mm, 5);
    mm_input(&mm, "x", F32, 2, d2x3);
    mm_input(&mm, "n", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL);
    mm_node(&mm, "Tile", "x,n,n", "y", NULL);
    mm_output(&mm, "y", F32, -1, NULL);
    e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node #1 (op Tile): Tile before opset 6 (tiles and axis inputs) is not supported\n");
    free(e);
    mb_free(&mm.mb);
}

Test(onnx, dropout_mask_before_opset_10_is_cast_to_the_data_dtype) {
    MbModel mm;
    mm_init(&mm, 6);
    mm_input(&mm, "x", F32, 2, d2x3);
    Onnx__NodeProto *n = mm_node(&mm, "Dropout", "x", "y,mask", "drop");
    attr_int(&mm, n, "is_test", 1);
    attr_float(&mm, n, "ratio", 0.5f);
    mm_output(&mm, "y", F32, 2, d2x3);
    mm_output(&mm, "mask", F32, 2, d2x3);
    char *t = mm_import_text(&mm);
    assert_has(t, "%y, %mask = Dropout(%x, %y_ratio) : f32[2, 3], ? name(\"drop\")");
    assert_has(t, "%y_cast = Cast(%mask) {to = f32} : f32[2, 3] name(\"drop/mask_cast\")");
    assert_has(t, "return %y, %y_cast");
    free(t);
    mb_free(&mm.mb);
}

Test(onnx, scan_8_becomes_a_loop_over_the_batch) {
    MbModel mm;
    mm_init(&mm, 8);
    mm_input(&mm, "init", F32, 2, (int64_t[]){1, 2});
    mm_input(&mm, "x", F32, 3, (int64_t[]){1, 3, 2});
    Onnx__NodeProto *n = mm_node(&mm, "Scan", ",init,x", "y,z", "scan");
    attr_int(&mm, n, "num_scan_inputs", 1);
    attr_ints(&mm, n, "directions", 1, (int64_t[]){0});
    /* the body: sum_out = sum_in + next, scan_out = sum_out */
    Onnx__GraphProto *outer = mm.graph;
    Onnx__GraphProto *body = MB_NEW(&mm.mb, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
    body->name = "body";
    mm.graph = body;
    mm_input(&mm, "sum_in", F32, 1, (int64_t[]){2});
    mm_input(&mm, "next", F32, 1, (int64_t[]){2});
    mm_node(&mm, "Add", "sum_in,next", "sum_out", NULL);
    mm_node(&mm, "Identity", "sum_out", "scan_out", NULL);
    mm_output(&mm, "sum_out", F32, 1, (int64_t[]){2});
    mm_output(&mm, "scan_out", F32, 1, (int64_t[]){2});
    mm.graph = outer;
    mm_attr(&mm, n, "body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g = body;
    mm_output(&mm, "y", F32, 2, (int64_t[]){1, 2});
    mm_output(&mm, "z", F32, 3, (int64_t[]){1, 3, 2});
    char *t = mm_import_text(&mm);
    assert_has(t, "%y_shape = Shape(%init) {end = 1} name(\"scan/batch_shape\")");
    assert_has(t, "%y_batch = Squeeze(%y_shape, %y_axes) name(\"scan/batch\")");
    assert_has(t, "%y, %z = Loop(%y_batch, %y_true) : f32[1, 2], f32[1, 3, 2] name(\"scan/batch_loop\") {");
    assert_has(t, "body(%y_batch_index: i64[], %y_cond: bool[]) {");
    assert_has(t, "%y_batch_item = Gather(%init, %y_batch_index)");
    assert_has(t, "%y_batch_item_1 = Gather(%x, %y_batch_index)");
    assert_has(t, "%y_batch_result, %y_batch_result_1 = Scan(%y_batch_item, %y_batch_item_1) "
                  "{num_scan_inputs = 1, scan_input_directions = [0]} name(\"scan\") {");
    assert_has(t, "return %y_cond, %y_batch_result, %y_batch_result_1");
    free(t);
    /* with sequence_lens: no equivalent */
    mm_input(&mm, "lens", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 1, (int64_t[]){1});
    n->input[0] = "lens";
    char *e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node 'scan' (op Scan): Scan-8 with sequence_lens is not supported\n");
    free(e);
    mb_free(&mm.mb);
}

/* Sequence ops import; the sequence value between them is typed by the rules. */
Test(onnx, sequence_ops_import) {
    MbModel mm;
    mm_init(&mm, 11);
    mm_input(&mm, "x", F32, 2, d2x3);
    mm_node(&mm, "SplitToSequence", "x", "s", NULL);
    Onnx__NodeProto *c = mm_node(&mm, "ConcatFromSequence", "s", "y", NULL);
    mm_output(&mm, "y", F32, 2, d2x3);
    attr_int(&mm, c, "axis", 0);
    char *t = mm_import_text(&mm);
    assert_has(t, "%s = SplitToSequence(%x)");
    assert_has(t, "%y = ConcatFromSequence(%s) {axis = 0} : f32[2, 3]");
    free(t);
    mb_free(&mm.mb);
}

/* Optional's `type` attribute (a TypeProto) becomes the result's type. */
Test(onnx, optional_type_attribute_types_the_result) {
    MbModel mm;
    mm_init(&mm, 16);
    mm_input(&mm, "x", F32, 2, d2x3);
    Onnx__NodeProto *n = mm_node(&mm, "Optional", "", "o", NULL);
    Onnx__TypeProto *tp = MB_NEW(&mm.mb, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    Onnx__TypeProto__Tensor *tt = MB_NEW(&mm.mb, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
    tt->has_elem_type = 1;
    tt->elem_type = F32;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    mm_attr(&mm, n, "type", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO)->tp = tp;
    mm_node(&mm, "OptionalHasElement", "o", "y", NULL);
    mm_output(&mm, "y", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL);
    char *t = mm_import_text(&mm);
    assert_has(t, "%o = Optional() : opt<f32>");
    assert_has(t, "%y = OptionalHasElement(%o) : bool[]");
    free(t);
    mb_free(&mm.mb);
}

Test(onnx, dim_params_become_sanitized_unique_symbols) {
    MbModel mm;
    mm_init(&mm, 17);
    mm_input(&mm, "x", F32, 2, dN3);
    Onnx__TypeProto__Tensor *tt = mm.graph->input[0]->type->tensor_type;
    tt->shape->dim[1]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    tt->shape->dim[1]->dim_param = "2*seq len";
    mm_input(&mm, "z", F32, 2, dN3);
    tt = mm.graph->input[1]->type->tensor_type;
    tt->shape->dim[0]->dim_param = "N!"; /* sanitizes to N_ */
    tt->shape->dim[1]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    tt->shape->dim[1]->dim_param = "N?"; /* also N_: must become a different symbol */
    mm_node(&mm, "Relu", "x", "y", NULL);
    mm_output(&mm, "y", F32, -1, NULL);
    char *t = mm_import_text(&mm);
    assert_has(t, "symbol N, _2_seq_len, N_, N__2\n");
    assert_has(t, "(%x: f32[N, _2_seq_len], %z: f32[N_, N__2])");
    assert_has(t, "%y = Relu(%x) : f32[*]");
    free(t);
    mb_free(&mm.mb);
}

/* ---- errors -------------------------------------------------------------------------------- */

static char *import_error(MbModel *mm) {
    char *text;
    IrGraph *g = mm_import(mm, "model.onnx", &text);
    cr_assert_null(g, "import should fail");
    return text;
}

Test(onnx, unsupported_op_is_named_exactly) {
    MbModel mm;
    mm_init(&mm, 13);
    mm_input(&mm, "x", F32, 2, d2x3);
    mm_node(&mm, "Relu", "x", "r", "Relu_1");
    mm_node(&mm, "Foo", "r", "y", "Conv_3");
    mm_output(&mm, "y", F32, 2, d2x3);
    char *e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node 'Conv_3' (op Foo): op 'Foo' is not supported\n");
    free(e);
    mb_free(&mm.mb);
}

Test(onnx, other_errors_name_node_op_and_what) {
    MbModel mm;
    /* an attribute the op table does not list */
    mm_init(&mm, 13);
    mm_input(&mm, "x", F32, 2, d2x3);
    attr_int(&mm, mm_node(&mm, "Relu", "x", "y", "r1"), "alpha", 1);
    mm_output(&mm, "y", F32, 2, d2x3);
    char *e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node 'r1' (op Relu): attribute 'alpha' is not supported by Relu\n");
    free(e);
    mb_free(&mm.mb);
    /* an attribute of the wrong kind */
    mm_init(&mm, 13);
    mm_input(&mm, "x", F32, 2, d2x3);
    attr_str(&mm, mm_node(&mm, "Softmax", "x", "y", NULL), "axis", "one");
    mm_output(&mm, "y", F32, 2, d2x3);
    e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node #1 (op Softmax): attribute 'axis' must be int, got string\n");
    free(e);
    mb_free(&mm.mb);
    /* a foreign domain */
    mm_init(&mm, 13);
    mm_input(&mm, "x", F32, 2, d2x3);
    mm_node(&mm, "FusedGemm", "x", "y", "g")->domain = "com.microsoft";
    mm_output(&mm, "y", F32, 2, d2x3);
    e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node 'g' (op FusedGemm): op 'FusedGemm' of domain 'com.microsoft' is not supported\n");
    free(e);
    mb_free(&mm.mb);
    /* an unsupported dtype */
    mm_init(&mm, 13);
    mm_input(&mm, "x", ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, 1, d4);
    mm_node(&mm, "Identity", "x", "y", NULL);
    mm_output(&mm, "y", F32, 1, d4);
    e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: input 'x': dtype complex64 is not supported\n");
    free(e);
    mb_free(&mm.mb);
    /* an opset outside 1..17, and an undefined input */
    mm_init(&mm, 18);
    mm_input(&mm, "x", F32, 1, d4);
    mm_node(&mm, "Relu", "x", "y", NULL);
    mm_output(&mm, "y", F32, 1, d4);
    e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: opset 18 of the default domain is not supported (irtool reads opsets 1 to 17)\n");
    free(e);
    mm.model.opset_import[0]->version = 17;
    mm.graph->node[0]->input[0] = "nope";
    e = import_error(&mm);
    cr_assert_str_eq(e, "model.onnx: error: node #1 (op Relu): input 'nope' is not defined (nodes must be in topological order)\n");
    free(e);
    mb_free(&mm.mb);
}

/* A small valid model whose every proper prefix is invalid: the graph is followed by the
 * opset import and nothing else, so no prefix ends on a complete, usable model. */
static uint8_t *small_model(size_t *len) {
    MbModel mm;
    mm_init(&mm, 13);
    mm_input(&mm, "x", F32, 2, d2x3);
    static const float w[] = {1, 2, 3, 4, 5, 6};
    mm_init_tensor(&mm, mm_tensor_f32(&mm, "w", 2, d2x3, w, 6));
    mm_node(&mm, "Add", "x,w", "s", "add");
    mm_node(&mm, "Relu", "s", "y", "relu");
    mm_output(&mm, "y", F32, 2, d2x3);
    uint8_t *buf = mm_pack(&mm, len);
    mb_free(&mm.mb);
    return buf;
}

Test(onnx, every_truncation_of_a_model_is_an_error_not_a_crash) {
    size_t len;
    uint8_t *full = small_model(&len);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    cr_assert_eq(ir_onnx_import(full, len, "small.onnx", &d.diag, &g), IR_OK, "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n + 1); /* exact size, so a sanitizer sees any overread */
        memcpy(copy, full, n);
        g = NULL;
        IrStatus s = ir_onnx_import(copy, n, "small.onnx", &d.diag, &g);
        cr_assert_neq(s, IR_OK, "a model truncated to %zu of %zu bytes imported", n, len);
        cr_assert_null(g);
        free(copy);
    }
    cr_assert_not_null(strstr(tu_diag_text(&d), "small.onnx: error: not a valid ONNX model: "));
    tu_diag_free(&d);
    free(full);
}

Test(onnx, corrupt_bytes_never_crash) {
    size_t len;
    uint8_t *full = small_model(&len);
    TuRng rng;
    tu_rng_seed(&rng, 42);
    static const uint8_t nasty[] = {0x00, 0xff, 0x80, 0x7f, 0x0a, 0x12, 0x3a, 0x08};
    for (size_t i = 0; i < len; i++)
        for (size_t k = 0; k < sizeof nasty + 2; k++) {
            uint8_t *copy = malloc(len);
            memcpy(copy, full, len);
            copy[i] = k < sizeof nasty ? nasty[k] : (uint8_t)tu_rng_below(&rng, 256);
            IrGraph *g = NULL;
            IrStatus s = ir_onnx_import(copy, len, "c.onnx", NULL, &g);
            cr_assert((s == IR_OK) == (g != NULL));
            if (g) {
                IrDiag d;
                ir_diag_init(&d, NULL, NULL);
                IrStatus vs = ir_verify(g, &d);
                cr_assert(vs == IR_OK || vs == IR_EVERIFY);
                ir_graph_destroy(g);
            }
            free(copy);
        }
    free(full);
}

Test(onnx, deeply_nested_messages_are_refused_before_decoding) {
    /* Graph{node: Node{attribute: Attribute{g: Graph{...}}}} nested 20000 levels deep, enough
     * to overflow the stack of a recursive decoder. Built inside out, from the buffer's end. */
    enum { LEVELS = 20000 };
    size_t cap = (size_t)LEVELS * 3 * 6 + 64, pos = cap;
    uint8_t *buf = malloc(cap);
    cr_assert_not_null(buf);
    static const uint8_t tags[] = {5 << 3 | 2, 1 << 3 | 2, 6 << 3 | 2}; /* Node.attribute, Graph.node, Attribute.g */
    for (int i = 0; i < LEVELS * 3 - 1; i++) {
        uint8_t hdr[12];
        size_t h = 0, l = cap - pos;
        hdr[h++] = tags[i % 3];
        do {
            hdr[h++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
            l >>= 7;
        } while (l);
        pos -= h;
        memcpy(buf + pos, hdr, h);
    }
    /* the outermost message is a Graph: ModelProto.graph (field 7) */
    uint8_t hdr[12];
    size_t h = 0, l = cap - pos;
    hdr[h++] = 7 << 3 | 2;
    do {
        hdr[h++] = (uint8_t)((l & 0x7f) | (l > 0x7f ? 0x80 : 0));
        l >>= 7;
    } while (l);
    pos -= h;
    memcpy(buf + pos, hdr, h);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    cr_assert_neq(ir_onnx_import(buf + pos, cap - pos, "deep.onnx", &d.diag, &g), IR_OK);
    cr_assert_not_null(strstr(tu_diag_text(&d), "nest more than"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    free(buf);
}

/* ---- external data ------------------------------------------------------------------------- */

/* A model whose initializer "w" (f32[4]) lives in `location` at `offset`. */
static void write_external_model(const char *dir, const char *location, uint64_t offset) {
    MbModel mm;
    mm_init(&mm, 13);
    mm_input(&mm, "x", F32, 1, d4);
    Onnx__TensorProto *t = MB_NEW(&mm.mb, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    t->name = "w";
    t->has_data_type = 1;
    t->data_type = F32;
    t->n_dims = 1;
    t->dims = (int64_t *)d4;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    char off[32];
    snprintf(off, sizeof off, "%llu", (unsigned long long)offset);
    const char *keys[] = {"location", "offset", "length"}, *vals[] = {location, off, "16"};
    t->n_external_data = 3;
    t->external_data = mb_alloc(&mm.mb, 3 * sizeof(void *));
    for (int i = 0; i < 3; i++) {
        Onnx__StringStringEntryProto *e = MB_NEW(&mm.mb, Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
        e->key = (char *)keys[i];
        e->value = mb_str(&mm.mb, vals[i]);
        t->external_data[i] = e;
    }
    mm_init_tensor(&mm, t);
    mm_node(&mm, "Add", "x,w", "y", NULL);
    mm_output(&mm, "y", F32, 1, d4);
    size_t len;
    uint8_t *buf = mm_pack(&mm, &len);
    char *path = tu_path_join(dir, "model.onnx");
    cr_assert(tu_write_file(path, buf, len));
    free(path);
    free(buf);
    mb_free(&mm.mb);
}

static IrStatus load_in(const char *dir, TuDiag *d, IrGraph **g) {
    char *path = tu_path_join(dir, "model.onnx");
    IrStatus s = ir_load(path, &d->diag, g);
    free(path);
    return s;
}

Test(onnx, external_data_is_read_beside_the_model) {
    char *dir = tu_mkdtemp();
    char *sub = tu_path_join(dir, "weights");
    cr_assert_eq(mkdir(sub, 0700), 0);
    const float w[4] = {1.5f, -2.0f, 3.25f, 0.0f};
    unsigned char file[8 + sizeof w];
    memset(file, 0xAB, 8);
    memcpy(file + 8, w, sizeof w);
    char *wpath = tu_path_join(sub, "w.bin");
    cr_assert(tu_write_file(wpath, file, sizeof file));
    write_external_model(dir, "weights/w.bin", 8);
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = NULL;
    cr_assert_eq(load_in(dir, &d, &g), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(ir_graph_num_const_values(g), 1);
    IrValueId v = ir_graph_const_value(g, 0);
    cr_assert_str_eq(ir_value_name(g, v), "w");
    IrConstId c = ir_value_const(g, v);
    cr_assert_eq(ir_const_nbytes(g, c), sizeof w);
    cr_assert_eq(memcmp(ir_const_data(g, c), w, sizeof w), 0);
    cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    ir_graph_destroy(g);
    /* a file too short for offset + length */
    write_external_model(dir, "weights/w.bin", 16);
    g = NULL;
    cr_assert_neq(load_in(dir, &d, &g), IR_OK);
    cr_assert_not_null(strstr(tu_diag_text(&d), "is shorter than offset 16 + 16 bytes"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    /* without a path (stdin) external data cannot be found */
    write_external_model(dir, "weights/w.bin", 8);
    char *mpath = tu_path_join(dir, "model.onnx");
    size_t len;
    char *bytes = tu_read_file(mpath, &len);
    tu_diag_init(&d);
    cr_assert_neq(ir_onnx_import(bytes, len, NULL, &d.diag, &g), IR_OK);
    cr_assert_not_null(strstr(tu_diag_text(&d), "the model was not read from a file"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    free(bytes);
    free(mpath);
    free(wpath);
    free(sub);
    tu_rmtree(dir);
    free(dir);
}

Test(onnx, external_data_outside_the_model_folder_is_refused) {
    char *top = tu_mkdtemp();
    char *dir = tu_path_join(top, "model");
    cr_assert_eq(mkdir(dir, 0700), 0);
    char *outside = tu_path_join(top, "secret.bin");
    char zeros[64] = {0};
    cr_assert(tu_write_file(outside, zeros, sizeof zeros));
    struct {
        const char *location, *expect;
    } cases[] = {
        {"../secret.bin", "external data path '../secret.bin' escapes the model's folder"},
        {"sub/../../secret.bin", "cannot open external data 'sub/../../secret.bin'"}, /* sub/ does not exist */
        {"link.bin", "external data path 'link.bin' escapes the model's folder"},
        {"/etc/passwd", "external data path '/etc/passwd' is absolute"},
        {"missing.bin", "cannot open external data 'missing.bin'"},
        {"fifo.bin", "cannot open external data 'fifo.bin': not a regular file"}, /* would block: issue 29 */
        {"dir.bin", "cannot open external data 'dir.bin': not a regular file"},
    };
    char *link = tu_path_join(dir, "link.bin"), *fifo = tu_path_join(dir, "fifo.bin"), *sub = tu_path_join(dir, "dir.bin");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(mkdir(sub, 0700), 0);
    free(fifo), free(sub);
    cr_assert_eq(symlink(outside, link), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_external_model(dir, cases[i].location, 0);
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = NULL;
        cr_assert_neq(load_in(dir, &d, &g), IR_OK, "%s was accepted", cases[i].location);
        cr_assert_null(g);
        cr_assert_not_null(strstr(tu_diag_text(&d), cases[i].expect), "%s: %s", cases[i].location, tu_diag_text(&d));
        cr_assert_not_null(strstr(tu_diag_text(&d), "initializer 'w'"), "%s", tu_diag_text(&d));
        tu_diag_free(&d);
    }
    free(link);
    free(outside);
    free(dir);
    tu_rmtree(top);
    free(top);
}

/* ---- real models --------------------------------------------------------------------------- */

static char *shared_dir(void) {
    const char *env = getenv("IRTOOL_SHARED_DIR");
    char *dir = env ? strdup(env) : tu_source_path("../shared");
    if (dir && access(dir, R_OK) != 0) {
        free(dir);
        dir = NULL;
    }
    return dir;
}

Test(onnx, real_models_from_shared_import_and_verify) {
    char *shared = shared_dir();
    if (!shared) cr_skip_test("no shared test data (set IRTOOL_SHARED_DIR)");
    static const char *models[] = {
        "torch-models/encoder/model.onnx",        "torch-models/convnet/model.onnx",
        "torch-models/branchy/model.onnx",        "torch-models/tiny_mlp/model.onnx",
        "onnx-tests/light/light_resnet50.onnx",   "onnx-tests/light/light_squeezenet.onnx",
        "onnx-tests/light/light_bvlc_alexnet.onnx", "onnx-tests/node/test_loop11/model.onnx",
        "onnx-tests/node/test_if/model.onnx",     "onnx-tests/node/test_upsample_nearest/model.onnx",
        "onnx-tests/node/test_gru_defaults/model.onnx", "onnx-tests/node/test_cast_FLOAT_to_FLOAT16/model.onnx",
        "onnx-tests/node/test_constantofshape_int_zeros/model.onnx",
        /* opsets 1 to 8, upgraded */
        "onnx-tests/node/test_scan_sum/model.onnx",   "onnx-tests/node/test_softsign/model.onnx",
        "onnx-tests/pytorch-converted/test_PReLU_2d_multiparam/model.onnx",
        "onnx-tests/pytorch-converted/test_BatchNorm2d_eval/model.onnx",
        "onnx-tests/pytorch-operator/test_operator_add_broadcast/model.onnx",
    };
    size_t found = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char *path = tu_path_join(shared, models[i]);
        if (access(path, R_OK) != 0) {
            free(path);
            continue;
        }
        found++;
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = NULL;
        cr_assert_eq(ir_load(path, &d.diag, &g), IR_OK, "%s: %s", models[i], tu_diag_text(&d));
        cr_assert_eq(ir_verify(g, &d.diag), IR_OK, "%s: %s", models[i], tu_diag_text(&d));
        cr_assert_gt(ir_graph_num_nodes(g), 0);
        /* and the imported graph survives its own export */
        char *text = tu_print(g);
        cr_assert_not_null(text);
        check_round_trip(text, models[i]);
        free(text);
        ir_graph_destroy(g);
        tu_diag_free(&d);
        free(path);
    }
    cr_assert_gt(found, 0, "no model found under %s", shared);
    free(shared);
}

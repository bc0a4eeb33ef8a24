/* viz/: renders corpus models (and, with IRTOOL_SHARED_DIR, the torch models and the light
 * ResNet-50 after `fuse`), parses the SVG with libxml2 and checks it against the graph:
 *  - op boxes: one `g.node` with id "n_..." per op that is not a Constant and not an open fused
 *    group (a fused group is a cluster of its body), or per collapsed group / segment / marker;
 *  - `in_...` / `out_...` nodes: graph inputs and outputs;
 *  - `g.cluster`: one per open fused group, one per control-flow node plus one per region of it,
 *    plus the legend (and the heat legend with --highlight);
 *  - `g.edge`: the renderer's deduplicated edge count;
 * and that output is deterministic (render twice, same bytes) and tooltips carry attributes.
 */
#include "passes/passes.h"
#include "testutil.h"
#include "viz/viz.h"

#include <criterion/criterion.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

typedef struct SvgCounts {
    uint32_t boxes, io, legend, clusters, edges, tooltips;
    bool any_tooltip_has_attr; /* some tooltip contains " = " (an attribute) */
    bool tooltip_missing;      /* an op box without a tooltip */
} SvgCounts;

static bool has_prefix(const xmlChar *s, const char *p) { return s && strncmp((const char *)s, p, strlen(p)) == 0; }

static const xmlChar *tooltip_in(xmlNodePtr n) {
    for (xmlNodePtr k = n->children; k; k = k->next) {
        if (k->type != XML_ELEMENT_NODE) continue;
        if (xmlStrcmp(k->name, BAD_CAST "a") == 0) {
            for (xmlAttrPtr a = k->properties; a; a = a->next)
                if (xmlStrcmp(a->name, BAD_CAST "title") == 0 && a->children) return a->children->content;
        }
        const xmlChar *t = tooltip_in(k);
        if (t) return t;
    }
    return NULL;
}

static void count_walk(xmlNodePtr n, SvgCounts *c) {
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE) continue;
        if (xmlStrcmp(n->name, BAD_CAST "g") == 0) {
            xmlChar *cls = xmlGetProp(n, BAD_CAST "class");
            xmlChar *id = xmlGetProp(n, BAD_CAST "id");
            if (cls && has_prefix(cls, "node")) {
                if (has_prefix(id, "n_")) {
                    c->boxes++;
                    const xmlChar *t = tooltip_in(n);
                    if (t) {
                        c->tooltips++;
                        if (strstr((const char *)t, " = ")) c->any_tooltip_has_attr = true;
                    }
                } else if (has_prefix(id, "in_") || has_prefix(id, "out_")) {
                    c->io++;
                } else if (has_prefix(id, "legend_")) {
                    c->legend++;
                }
            } else if (cls && xmlStrcmp(cls, BAD_CAST "cluster") == 0) {
                c->clusters++;
            } else if (cls && xmlStrcmp(cls, BAD_CAST "edge") == 0) {
                c->edges++;
            }
            xmlFree(cls);
            xmlFree(id);
        }
        count_walk(n->children, c);
    }
}

static SvgCounts parse_svg(const char *svg, size_t len) {
    SvgCounts c;
    memset(&c, 0, sizeof c);
    xmlDocPtr doc = xmlReadMemory(svg, (int)len, "t.svg", NULL, XML_PARSE_NONET | XML_PARSE_HUGE);
    cr_assert(doc, "SVG is not well-formed");
    count_walk(xmlDocGetRootElement(doc), &c);
    xmlFreeDoc(doc);
    return c;
}

/* Expected counts from the graph itself (open rendering: nothing collapsed). */
static void expected_open(const IrGraph *g, uint32_t *boxes, uint32_t *clusters) {
    IrOp constant = ir_op_from_name("Constant", 8);
    *boxes = 0;
    *clusters = 1; /* legend */
    for (IrNodeId n = ir_graph_walk_next(g, 0); n; n = ir_graph_walk_next(g, n)) {
        IrOp op = ir_node_op(g, n);
        if (op == constant) continue;
        if (op == IR_OP_FUSED) { (*clusters)++; continue; }
        (*boxes)++;
        if (ir_node_num_regions(g, n)) *clusters += 1 + ir_node_num_regions(g, n);
    }
}

static void run_pipeline(IrGraph *g, const char *pipeline) {
    TuDiag d;
    tu_diag_init(&d);
    IrPipeline *p;
    cr_assert_eq(ir_pipeline_parse(pipeline, &d.diag, &p), IR_OK, "%s", tu_diag_text(&d));
    IrPipelineOptions po = {true, IR_PRINT_NEVER, NULL, stderr, NULL};
    cr_assert_eq(ir_pipeline_run(p, g, &po, &d.diag), IR_OK, "%s", tu_diag_text(&d));
    ir_pipeline_destroy(p);
    tu_diag_free(&d);
}

static char *render(const IrGraph *g, const VizOptions *o, size_t *len, VizStats *st) {
    TuDiag d;
    tu_diag_init(&d);
    IrStrBuf b;
    ir_strbuf_init(&b);
    cr_assert_eq(viz_render(g, o, &d.diag, &b, st), IR_OK, "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    *len = b.len;
    return b.data;
}

/* Renders g open as SVG twice, checks determinism and every count. */
static void check_open(const IrGraph *g, const char *what) {
    VizOptions o = {.format = VIZ_FORMAT_SVG, .collapse = VIZ_COLLAPSE_NEVER};
    VizStats st;
    size_t l1, l2;
    char *a = render(g, &o, &l1, &st);
    char *b = render(g, &o, &l2, NULL);
    if (!(l1 == l2 && memcmp(a, b, l1) == 0) && getenv("VIZ_TEST_DUMP")) {
        tu_write_file("/tmp/viz_r1.svg", a, l1);
        tu_write_file("/tmp/viz_r2.svg", b, l2);
    }
    cr_assert(l1 == l2 && memcmp(a, b, l1) == 0, "%s: two renders differ", what);
    SvgCounts c = parse_svg(a, l1);
    uint32_t boxes, clusters;
    expected_open(g, &boxes, &clusters);
    cr_assert_eq(c.boxes, boxes, "%s: %u op boxes, graph has %u", what, c.boxes, boxes);
    cr_assert_eq(st.boxes, boxes, "%s", what);
    cr_assert_eq(c.io, ir_graph_num_inputs(g) + ir_graph_num_outputs(g), "%s: io nodes", what);
    cr_assert_eq(c.clusters, clusters, "%s: %u clusters, expected %u", what, c.clusters, clusters);
    cr_assert_eq(st.clusters, clusters, "%s", what);
    cr_assert_eq(c.edges, st.edges, "%s: %u edges drawn, renderer counted %u", what, c.edges, st.edges);
    cr_assert(boxes == 0 || c.edges > 0, "%s: no edges", what);
    cr_assert_eq(c.tooltips, c.boxes, "%s: every op box has a tooltip", what);
    cr_assert(c.legend > 0, "%s: legend", what);
    free(a);
    free(b);
}

Test(viz, corpus_models_open_and_fused) {
    size_t n;
    char **names = tu_list_dir("corpus", ".ir", &n);
    cr_assert(names && n > 0);
    for (size_t i = 0; i < n; i++) {
        TuDiag d;
        tu_diag_init(&d);
        IrGraph *g = tu_load_corpus(names[i], &d);
        cr_assert(g, "%s: %s", names[i], tu_diag_text(&d));
        check_open(g, names[i]);
        run_pipeline(g, "shape-infer,fuse");
        check_open(g, names[i]);
        ir_graph_destroy(g);
        tu_diag_free(&d);
    }
    tu_free_list(names);
}

Test(viz, attention_fused_clusters_and_tooltips) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("attention.ir", &d);
    cr_assert(g);
    run_pipeline(g, "shape-infer,fuse");
    VizOptions o = {.format = VIZ_FORMAT_SVG};
    size_t len;
    VizStats st;
    char *svg = render(g, &o, &len, &st);
    SvgCounts c = parse_svg(svg, len);
    cr_assert_eq(c.clusters, 3, "two fused groups and the legend");
    cr_assert(strstr(svg, "id=\"cluster_fused_softmax\""));
    cr_assert(strstr(svg, "fused_softmax (attention, 5 nodes)"));
    cr_assert(c.any_tooltip_has_attr, "tooltips list attributes");
    cr_assert(strstr(svg, "axis = -1"), "Softmax's axis in its tooltip");
    cr_assert(strstr(svg, "source: "), "source location in tooltips");
    cr_assert(strstr(svg, "class=\"node op-contraction\""), "CSS class per op class");
    cr_assert(strstr(svg, "wq: f32[32, 32] 4.0 KiB"), "weights folded into the consumer's label");
    cr_assert(strstr(svg, "f32[B, S, 32]"), "symbolic dims by name");
    free(svg);
    /* collapsed: each fused group is one box */
    o.collapse = VIZ_COLLAPSE_ALWAYS;
    svg = render(g, &o, &len, &st);
    c = parse_svg(svg, len);
    cr_assert_eq(c.clusters, 1, "only the legend");
    cr_assert_eq(c.boxes, 7, "q, k, v, k_t, two groups, ln");
    cr_assert(st.collapsed);
    cr_assert(strstr(svg, "class=\"node op-fused\""));
    free(svg);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(viz, control_flow_nested_clusters) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("control_flow.ir", &d);
    cr_assert(g);
    VizOptions o = {.format = VIZ_FORMAT_SVG};
    size_t len;
    char *svg = render(g, &o, &len, NULL);
    SvgCounts c = parse_svg(svg, len);
    cr_assert_eq(c.clusters, 6, "If + 2 branches, Loop + body, legend");
    cr_assert(strstr(svg, "id=\"cluster_if_positive_then_branch\""));
    cr_assert(strstr(svg, "id=\"cluster_double_loop_body\""));
    free(svg);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(viz, highlight_and_max_nodes) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    static const char rep[] = "{\"model\": \"m\", \"nodes\": {\"fc1\": 1e-7, \"relu1\": {\"max_rel_err\": 0.5}, "
                              "\"softmax\": 2.0}, \"first_divergence\": {\"node\": \"relu1\", \"metrics\": {}}}";
    VizHighlight *h;
    cr_assert_eq(viz_highlight_parse(rep, sizeof rep - 1, "r.json", &d.diag, &h), IR_OK, "%s", tu_diag_text(&d));
    cr_assert_eq(viz_highlight_num_nodes(h), 3);
    cr_assert_str_eq(viz_highlight_first_divergence(h), "relu1");
    VizOptions o = {.format = VIZ_FORMAT_SVG, .highlight = h};
    size_t len;
    char *svg = render(g, &o, &len, NULL);
    SvgCounts c = parse_svg(svg, len);
    cr_assert_eq(c.clusters, 2, "class legend and heat legend");
    cr_assert(strstr(svg, "first-divergence has-error"));
    cr_assert(strstr(svg, "FIRST DIVERGENCE"));
    free(svg);
    VizHighlight *bad;
    cr_assert_neq(viz_highlight_parse("{\"nodes\": [", 11, "bad.json", &d.diag, &bad), IR_OK);
    viz_highlight_destroy(h);

    VizOptions m = {.format = VIZ_FORMAT_SVG, .max_nodes = 2};
    VizStats st;
    svg = render(g, &m, &len, &st);
    c = parse_svg(svg, len);
    cr_assert_eq(c.boxes, 3, "two ops and the marker");
    cr_assert_eq(st.elided, 4);
    cr_assert(strstr(svg, "... 4 more nodes"));
    free(svg);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(viz, formats) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    size_t len;
    VizOptions o = {.format = VIZ_FORMAT_DOT};
    char *s = render(g, &o, &len, NULL);
    cr_assert(strncmp(s, "digraph", 7) == 0);
    free(s);
    o.format = VIZ_FORMAT_HTML;
    s = render(g, &o, &len, NULL);
    cr_assert(strstr(s, "<svg") && strstr(s, "<script>") && strstr(s, "id=\"q\""));
    cr_assert_null(strstr(s, "src=\"http"), "self-contained");
    free(s);
    o.format = VIZ_FORMAT_PNG;
    s = render(g, &o, &len, NULL);
    cr_assert(len > 8 && memcmp(s, "\x89PNG", 4) == 0);
    free(s);
    cr_assert_eq(viz_format_from_path("a/b.html"), VIZ_FORMAT_HTML);
    cr_assert_eq(viz_format_from_path("x.pdf"), VIZ_FORMAT_UNKNOWN);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* A chain of 3000 Relu: above the default threshold it is drawn collapsed, as segments. */
Test(viz, large_graph_auto_collapses) {
    IrGraph *g;
    cr_assert_eq(ir_graph_create(&g), IR_OK);
    int64_t dims[1] = {4};
    IrTypeId t = ir_type_tensor_i64(g, IR_DTYPE_F32, 1, dims);
    IrValueId v = ir_region_add_arg(g, IR_ROOT_REGION, "x", t);
    for (int i = 0; i < 3000; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "r%d", i);
        const char *names[1] = {nm};
        IrNodeId n = ir_node_create(g, IR_ROOT_REGION, IR_OP_RELU, 1, &v, 1, names, &t);
        ir_node_set_name(g, n, nm);
        v = ir_node_result(g, n, 0);
    }
    ir_region_set_outputs(g, IR_ROOT_REGION, 1, &v);
    VizOptions o = {.format = VIZ_FORMAT_SVG};
    VizStats st;
    size_t len;
    char *svg = render(g, &o, &len, &st);
    SvgCounts c = parse_svg(svg, len);
    cr_assert(st.collapsed);
    cr_assert(c.boxes > 0 && c.boxes <= 1400, "%u segment boxes", c.boxes);
    cr_assert_eq(c.boxes, st.boxes);
    cr_assert_eq(c.edges, st.edges);
    cr_assert(strstr(svg, "segment 1: "));
    free(svg);
    ir_graph_destroy(g);
}

static void check_shared_model(const char *path, const char *pipeline) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g;
    cr_assert_eq(ir_load(path, &d.diag, &g), IR_OK, "%s: %s", path, tu_diag_text(&d));
    run_pipeline(g, pipeline);
    check_open(g, path);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(viz, shared_torch_models_and_resnet50, .timeout = 300) {
    const char *shared = getenv("IRTOOL_SHARED_DIR");
    if (!shared) cr_skip_test("IRTOOL_SHARED_DIR not set");
    static const char *const models[] = {"tiny_mlp", "convnet", "branchy", "encoder"};
    char path[4096];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        snprintf(path, sizeof path, "%s/torch-models/%s/model.onnx", shared, models[i]);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fclose(f);
        check_shared_model(path, "shape-infer,fuse");
    }
    snprintf(path, sizeof path, "%s/onnx-tests/light/light_resnet50.onnx", shared);
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fclose(f);
    check_shared_model(path, "shape-infer,fuse");
}

/* The real binary: formats by extension, the pipeline, --highlight, and usage errors. */
Test(viz, cli) {
    char *dir = tu_mkdtemp();
    cr_assert(dir);
    char *model = tu_source_path("corpus/attention.ir");
    char *html = tu_path_join(dir, "a.html"), *svg = tu_path_join(dir, "a.svg"), *svg2 = tu_path_join(dir, "b.svg");
    char *rep = tu_path_join(dir, "r.json");
    static const char report[] = "{\"nodes\": {\"qk\": 0.2}, \"first_divergence\": {\"node\": \"qk\"}}";
    cr_assert(tu_write_file(rep, report, sizeof report - 1));
    TuRun r;
    const char *a1[] = {"viz", model, "-p", "shape-infer,fuse", "-o", html, NULL};
    cr_assert(tu_run_irtool(a1, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    const char *a2[] = {"viz", model, "-p", "shape-infer,fuse", "--highlight", rep, "-o", svg, NULL};
    cr_assert(tu_run_irtool(a2, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 0, "%s", r.err);
    tu_run_free(&r);
    const char *a3[] = {"viz", model, "-p", "shape-infer,fuse", "--highlight", rep, "-o", svg2, NULL};
    cr_assert(tu_run_irtool(a3, NULL, 0, NULL, &r));
    tu_run_free(&r);
    size_t l1, l2, lh;
    char *s1 = tu_read_file(svg, &l1), *s2 = tu_read_file(svg2, &l2), *h = tu_read_file(html, &lh);
    cr_assert(s1 && s2 && h);
    cr_assert(l1 == l2 && memcmp(s1, s2, l1) == 0, "same input, same bytes across runs");
    cr_assert(strstr(s1, "first-divergence"));
    cr_assert(strstr(h, "<!DOCTYPE html>") && strstr(h, "cluster_fused_softmax"));
    free(s1);
    free(s2);
    free(h);
    const char *bad1[] = {"viz", model, "-o", "x.pdf", NULL};
    cr_assert(tu_run_irtool(bad1, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2);
    tu_run_free(&r);
    const char *bad2[] = {"viz", model, NULL};
    cr_assert(tu_run_irtool(bad2, NULL, 0, NULL, &r));
    cr_assert_eq(r.status, 2);
    tu_run_free(&r);
    tu_rmtree(dir);
    free(dir);
    free(model);
    free(html);
    free(svg);
    free(svg2);
    free(rep);
}

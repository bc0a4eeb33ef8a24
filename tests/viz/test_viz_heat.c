/* Error heat maps (viz --highlight) and the HTML viewer's page: the drawn error is 1 - cosine
 * (a ReLU's huge relative error does not colour it), fused groups are coloured as clusters and
 * as collapsed boxes, the first divergence is outlined and labelled in every mode, the legend
 * states the metric and the report's range, a report for another graph is an error, a passing
 * report says so on the picture, and the HTML page carries the panel's data and no network.
 */
#include "passes/passes.h"
#include "testutil.h"
#include "viz/viz.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static VizHighlight *parse_report(const char *json, TuDiag *d) {
    VizHighlight *h = NULL;
    cr_assert_eq(viz_highlight_parse(json, strlen(json), "r.json", &d->diag, &h), IR_OK, "%s", tu_diag_text(d));
    return h;
}

static char *draw(const IrGraph *g, const VizHighlight *h, VizFormat f, VizCollapse c, TuDiag *d, IrStatus *st) {
    VizOptions o = {.format = f, .collapse = c, .highlight = h, .highlight_file = "r.json"};
    IrStrBuf b;
    ir_strbuf_init(&b);
    *st = viz_render(g, &o, &d->diag, &b, NULL);
    if (*st != IR_OK) { ir_strbuf_free(&b); return NULL; }
    return b.data;
}

static IrGraph *attention_fused(TuDiag *d) {
    IrGraph *g = tu_load_corpus("attention.ir", d);
    cr_assert(g);
    cr_assert_eq(tu_run_pipeline(g, "shape-infer,fuse", d, NULL, NULL), IR_OK, "%s", tu_diag_text(d));
    return g;
}

/* A ReLU whose relative error is 1e300 (a zero reference) but whose cosine is 1 is drawn as
 * no error; the legend names the metric and the report's range. */
Test(viz_heat, cosine_metric_and_legend) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    VizHighlight *h = parse_report(
        "{\"pass\": false, \"nodes\": ["
        "{\"node\": \"fc1\", \"op\": \"MatMul\", \"max_rel_err\": 0.01, \"max_abs_err\": 0.002, \"cosine\": 0.99999},"
        "{\"node\": \"relu1\", \"op\": \"Relu\", \"max_rel_err\": 1e300, \"max_abs_err\": 1e-7, \"cosine\": 1},"
        "{\"node\": \"softmax\", \"op\": \"Softmax\", \"max_rel_err\": 3, \"max_abs_err\": 0.2, \"cosine\": 0.95}],"
        "\"first_divergence\": {\"node\": \"softmax\"}}",
        &d);
    cr_assert(viz_highlight_by_cosine(h));
    IrStatus st;
    char *svg = draw(g, h, VIZ_FORMAT_SVG, VIZ_COLLAPSE_NEVER, &d, &st);
    cr_assert_eq(st, IR_OK, "%s", tu_diag_text(&d));
    cr_assert(strstr(svg, "1-cos 0.00e+00"), "the ReLU is drawn by cosine, not by its relative error");
    cr_assert(!strstr(svg, "err 1.00e+300") && !strstr(svg, "1-cos 1.00e+300"), "no 1e300 on a box");
    cr_assert(strstr(svg, "1-cos 1.00e-05"), "fc1: 1 - 0.99999");
    cr_assert(strstr(svg, "1-cos 5.00e-02"), "softmax: 1 - 0.95");
    cr_assert(strstr(svg, "legend: error = 1 - cosine with the reference"), "the legend names the metric");
    cr_assert(strstr(svg, "this report: 0.00e+00 .. 5.00e-02 over 3 nodes"), "and the range");
    cr_assert(strstr(svg, "FIRST DIVERGENCE"));
    cr_assert(strstr(svg, "first-divergence has-error"));
    free(svg);
    viz_highlight_destroy(h);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* An open fused group takes its colour and the outline on its cluster; collapsed, its box. */
Test(viz_heat, fused_groups_in_every_mode) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = attention_fused(&d);
    VizHighlight *h = parse_report("{\"nodes\": [{\"node\": \"fused_softmax\", \"cosine\": 0.9},"
                                   "{\"node\": \"fused_out_proj\", \"cosine\": 0.999}],"
                                   "\"first_divergence\": {\"node\": \"fused_softmax\"}}",
                                   &d);
    IrStatus st;
    char *open = draw(g, h, VIZ_FORMAT_DOT, VIZ_COLLAPSE_NEVER, &d, &st);
    cr_assert_eq(st, IR_OK, "%s", tu_diag_text(&d));
    const char *cl = strstr(open, "subgraph cluster_fused_softmax");
    cr_assert(cl, "the group is a cluster");
    const char *end = strstr(cl, "subgraph");
    end = end ? strstr(end + 8, "subgraph") : NULL;
    size_t n = end ? (size_t)(end - cl) : strlen(cl);
    char *part = strndup(cl, n);
    cr_assert(strstr(part, "FIRST DIVERGENCE"), "the cluster is labelled: %s", part);
    cr_assert(strstr(part, "#e00000"), "and outlined red");
    cr_assert(strstr(part, "#7f2704"), "and filled with the top heat colour (1 - 0.9 > 1e-2)");
    free(part);
    cr_assert(strstr(open, "1-cos 1.00e-03"), "the other group carries its error");
    free(open);
    char *col = draw(g, h, VIZ_FORMAT_SVG, VIZ_COLLAPSE_ALWAYS, &d, &st);
    cr_assert_eq(st, IR_OK, "%s", tu_diag_text(&d));
    cr_assert(strstr(col, "FIRST DIVERGENCE"), "collapsed: the group's box is labelled");
    cr_assert(strstr(col, "first-divergence"), "and classed");
    free(col);
    viz_highlight_destroy(h);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

/* A member of a collapsed group, named as the divergence: the group's box carries it. */
Test(viz_heat, divergence_inside_collapsed_group) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = attention_fused(&d);
    VizHighlight *h = parse_report("{\"nodes\": {\"qk\": {\"cosine\": 0.5}}, \"first_divergence\": {\"node\": \"qk\"}}", &d);
    IrStatus st;
    char *svg = draw(g, h, VIZ_FORMAT_SVG, VIZ_COLLAPSE_ALWAYS, &d, &st);
    cr_assert_eq(st, IR_OK, "%s", tu_diag_text(&d));
    cr_assert(strstr(svg, "FIRST DIVERGENCE"));
    free(svg);
    viz_highlight_destroy(h);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(viz_heat, report_for_another_graph_is_an_error) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    VizHighlight *h = parse_report("{\"nodes\": [{\"node\": \"/conv1/Conv\", \"cosine\": 0.9}],"
                                   "\"first_divergence\": {\"node\": \"/conv1/Conv\"}}",
                                   &d);
    IrStatus st;
    char *svg = draw(g, h, VIZ_FORMAT_SVG, VIZ_COLLAPSE_AUTO, &d, &st);
    cr_assert_null(svg);
    cr_assert_eq(st, IR_ENOTFOUND);
    cr_assert(strstr(tu_diag_text(&d), "r.json names 1 node (e.g. '/conv1/Conv') but none of them is in this graph"),
              "%s", tu_diag_text(&d));
    viz_highlight_destroy(h);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(viz_heat, passing_report_says_so) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = tu_load_corpus("mlp.ir", &d);
    cr_assert(g);
    VizHighlight *h = parse_report("{\"model\": \"m\", \"pass\": true, \"outputs\": [{\"name\": \"y\"}], \"nodes\": [],"
                                   "\"first_divergence\": null}",
                                   &d);
    cr_assert_eq(viz_highlight_passed(h), 1);
    IrStatus st;
    char *svg = draw(g, h, VIZ_FORMAT_SVG, VIZ_COLLAPSE_AUTO, &d, &st);
    cr_assert_eq(st, IR_OK, "%s", tu_diag_text(&d));
    cr_assert(strstr(svg, "validation passed: 1 output within tolerance, nothing to highlight"));
    free(svg);
    viz_highlight_destroy(h);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

Test(viz_heat, bad_reports_are_located) {
    TuDiag d;
    tu_diag_init(&d);
    VizHighlight *h = NULL;
    static const char broken[] = "{\"nodes\": [\n  {\"node\": \"a\", \"cosine\": }\n]}";
    cr_assert_eq(viz_highlight_parse(broken, sizeof broken - 1, "r.json", &d.diag, &h), IR_ESYNTAX);
    cr_assert(strstr(tu_diag_text(&d), "r.json:2:"), "line and column: %s", tu_diag_text(&d));
    tu_diag_free(&d);
    tu_diag_init(&d);
    static const char no_name[] = "{\"nodes\": [{\"cosine\": 0.5}]}";
    cr_assert_eq(viz_highlight_parse(no_name, sizeof no_name - 1, "r.json", &d.diag, &h), IR_ESYNTAX);
    cr_assert(strstr(tu_diag_text(&d), "nodes[0] has no \"node\" name"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
    tu_diag_init(&d);
    static const char other[] = "{\"layers\": 3}";
    cr_assert_eq(viz_highlight_parse(other, sizeof other - 1, "r.json", &d.diag, &h), IR_ESYNTAX);
    cr_assert(strstr(tu_diag_text(&d), "not a validator report"), "%s", tu_diag_text(&d));
    tu_diag_free(&d);
}

/* The HTML page: one file, the viewer's script, the panel's data for every box and group. */
Test(viz_heat, html_page_carries_panel_data) {
    TuDiag d;
    tu_diag_init(&d);
    IrGraph *g = attention_fused(&d);
    VizHighlight *h = parse_report("{\"nodes\": [{\"node\": \"fused_softmax\", \"cosine\": 0.9, \"max_abs_err\": 0.5}],"
                                   "\"first_divergence\": {\"node\": \"fused_softmax\"}}",
                                   &d);
    IrStatus st;
    char *html = draw(g, h, VIZ_FORMAT_HTML, VIZ_COLLAPSE_NEVER, &d, &st);
    cr_assert_eq(st, IR_OK, "%s", tu_diag_text(&d));
    cr_assert(strstr(html, "<script type=\"application/json\" id=\"irdata\">{\"boxes\":{"));
    cr_assert(strstr(html, "\"groups\":{\"cluster_fused_softmax\":{\"op\":\"irtool.fused\""), "groups listed");
    cr_assert(strstr(html, "\"kind\":\"attention\""), "with their kind");
    cr_assert(strstr(html, "\"first_div\":true"), "the divergence marked");
    cr_assert(strstr(html, "\"attrs\":[") && strstr(html, "\"outs\":[[\""), "attributes and outputs for the panel");
    cr_assert(strstr(html, "\"group\":\"cluster_fused_softmax\""), "members know their group");
    cr_assert(strstr(html, "id=\"mini\"") && strstr(html, "id=\"panel\""), "minimap and panel");
    cr_assert(!strstr(html, "src=\"http") && !strstr(html, "href=\"http"), "no network");
    cr_assert(!strstr(html, "</script>\n<script>\n</script>"), "the script is embedded");
    free(html);
    viz_highlight_destroy(h);
    ir_graph_destroy(g);
    tu_diag_free(&d);
}

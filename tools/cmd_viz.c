/* irtool viz: optionally runs a pass pipeline, then draws the graph (viz/) to SVG, DOT, PNG or
 * HTML. Running the pipeline is this command's job; viz/ only reads the result.
 */
#include "cli.h"
#include "passes/passes.h"
#include "viz/viz.h"

#include <stdlib.h>
#include <string.h>

static bool parse_u32(const char *s, uint32_t *out) {
    char *e;
    unsigned long v = strtoul(s, &e, 10);
    if (!*s || *e || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

CLI_COMMAND(cmd_viz) {
    const char *file = NULL, *out = NULL, *pipeline = NULL, *report = NULL;
    VizOptions vo;
    memset(&vo, 0, sizeof vo);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-p") == 0 || strcmp(a, "--pipeline") == 0) {
            if (++i >= argc) return cli_usage_error("viz", "%s needs a pipeline", a);
            pipeline = argv[i];
        } else if (strncmp(a, "--pipeline=", 11) == 0) {
            pipeline = a + 11;
        } else if (strcmp(a, "-o") == 0) {
            if (++i >= argc) return cli_usage_error("viz", "-o needs a file");
            out = argv[i];
        } else if (strcmp(a, "--highlight") == 0) {
            if (++i >= argc) return cli_usage_error("viz", "--highlight needs a report file");
            report = argv[i];
        } else if (strcmp(a, "--collapse") == 0) {
            vo.collapse = VIZ_COLLAPSE_ALWAYS;
        } else if (strcmp(a, "--no-collapse") == 0) {
            vo.collapse = VIZ_COLLAPSE_NEVER;
        } else if (strcmp(a, "--max-nodes") == 0 || strcmp(a, "--collapse-above") == 0) {
            uint32_t *dst = a[2] == 'm' ? &vo.max_nodes : &vo.collapse_above;
            if (++i >= argc || !parse_u32(argv[i], dst)) return cli_usage_error("viz", "%s needs a count", a);
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("viz", "unknown option '%s'", a);
        } else if (file) {
            return cli_usage_error("viz", "only one model is accepted");
        } else {
            file = a;
        }
    }
    if (!file) return cli_usage_error("viz", "missing MODEL");
    if (!out) return cli_usage_error("viz", "missing -o OUT (.svg, .dot, .png or .html)");
    if (cli_refuse_clobber("viz", out, argc, argv)) return EXIT_INVALID;
    vo.format = viz_format_from_path(out);
    if (vo.format == VIZ_FORMAT_UNKNOWN)
        return cli_usage_error("viz", "cannot tell the format of '%s' (use .svg, .dot, .png or .html)", out);
    IrDiag d;
    cli_diag_init(&d);
    VizHighlight *hl = NULL;
    IrStatus s;
    if (report) {
        s = viz_highlight_load(report, &d, &hl);
        if (s) return cli_exit_for(s);
        vo.highlight = hl;
    }
    IrGraph *g;
    s = cli_load(file, true, &g);
    if (s) { viz_highlight_destroy(hl); return cli_exit_for(s); }
    if (pipeline) {
        IrPipeline *p;
        s = ir_pipeline_parse(pipeline, &d, &p);
        if (s) {
            ir_graph_destroy(g);
            viz_highlight_destroy(hl);
            return s == IR_EINVAL ? EXIT_USAGE : EXIT_INVALID;
        }
        IrPipelineOptions po = {true, IR_PRINT_NEVER, NULL, stderr, NULL};
        s = ir_pipeline_run(p, g, &po, &d);
        ir_pipeline_destroy(p);
    }
    IrStrBuf buf;
    ir_strbuf_init(&buf);
    if (s == IR_OK) s = viz_render(g, &vo, &d, &buf, NULL);
    if (s == IR_OK) s = ir_write_file_atomic(out, buf.data, buf.len, &d);
    ir_strbuf_free(&buf);
    ir_graph_destroy(g);
    viz_highlight_destroy(hl);
    return cli_exit_for(s);
}

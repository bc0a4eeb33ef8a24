/* irtool viz: infers shapes, optionally runs a pass pipeline, then draws the graph (viz/) to
 * SVG, DOT, PNG or HTML. Running passes is this command's job; viz/ only reads the result.
 * Shape inference is cheap and makes every box show its shape, so it runs unless refused; if
 * it fails (a contradiction in the model), the graph is drawn as read, with a warning.
 */
#include "cli.h"
#include "passes/passes.h"
#include "viz/viz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_u32(const char *s, uint32_t *out) {
    char *e;
    unsigned long v = strtoul(s, &e, 10);
    if (!*s || *e || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

/* shape-infer on *g; on failure a warning, and the graph reloaded as read (file) or kept as
 * the pipeline left it (file NULL). */
static IrStatus infer_shapes(const char *file, IrGraph **g) {
    IrStrBuf msgs;
    ir_strbuf_init(&msgs);
    IrDiag quiet;
    ir_diag_init(&quiet, ir_diag_buffer_fn, &msgs);
    IrPipeline *p;
    IrStatus s = ir_pipeline_parse("shape-infer", &quiet, &p);
    if (s == IR_OK) {
        IrPipelineOptions po = {true, IR_PRINT_NEVER, NULL, NULL, NULL};
        s = ir_pipeline_run(p, *g, &po, &quiet);
        ir_pipeline_destroy(p);
    }
    if (s != IR_OK) {
        fprintf(stderr, "irtool viz: warning: shape inference failed, drawing the graph as read "
                        "(shapes it does not declare show as '?'):\n%s", msgs.data ? msgs.data : "");
        s = IR_OK;
        if (file) {
            ir_graph_destroy(*g);
            *g = NULL;
            s = cli_load(file, true, g);
        }
    }
    ir_strbuf_free(&msgs);
    return s;
}

CLI_COMMAND(cmd_viz) {
    const char *file = NULL, *out = NULL, *pipeline = NULL, *report = NULL;
    VizOptions vo;
    memset(&vo, 0, sizeof vo);
    bool infer = true;
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
        } else if (strcmp(a, "--no-shape-infer") == 0) {
            infer = false;
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
        vo.highlight_file = report;
    }
    IrGraph *g;
    s = cli_load(file, true, &g);
    if (s) { viz_highlight_destroy(hl); return cli_exit_for(s); }
    if (infer && (s = infer_shapes(file, &g)) != IR_OK) {
        viz_highlight_destroy(hl);
        return cli_exit_for(s);
    }
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
        /* nodes the pipeline added (quantize-fp8's scales) get their shapes too */
        if (s == IR_OK && infer) s = infer_shapes(NULL, &g);
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

/* irtool opt: run a pass pipeline over a model. */
#include "cli.h"
#include "passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void list_passes(void) {
    printf("passes:\n");
    for (uint32_t i = 0; i < ir_pass_count(); i++) {
        const IrPass *p = ir_pass_at(i);
        printf("  %-14s %s\n", p->name, p->summary);
        for (const IrPassOption *o = p->options; o && o->name; o++)
            printf("      %s=%s  %s\n", o->name, o->default_value ? o->default_value : "", o->help ? o->help : "");
        if (p->free_options) printf("      SYMBOL=VALUE  (any symbol of the graph)\n");
    }
    printf("named pipelines:\n  default        %s\n", ir_pipeline_named("default"));
}

static void print_timing(const IrPipeline *p) {
    double total = 0;
    for (uint32_t i = 0; i < ir_pipeline_num_reports(p); i++) total += ir_pipeline_report(p, i).seconds;
    fprintf(stderr, "===-------------------------------------------------------------------------===\n"
                    "                         ... Pass execution timing report ...\n"
                    "===-------------------------------------------------------------------------===\n"
                    "  Total Execution Time: %.4f seconds\n\n  ----Wall Time----  ----Name----\n", total);
    for (uint32_t i = 0; i < ir_pipeline_num_reports(p); i++) {
        IrPassReport r = ir_pipeline_report(p, i);
        fprintf(stderr, "    %.4f (%5.1f%%)  %s\n", r.seconds, total > 0 ? 100.0 * r.seconds / total : 0.0, r.pass);
    }
    fprintf(stderr, "    %.4f (100.0%%)  Total\n", total);
}

static void print_stats(const IrPipeline *p) {
    fprintf(stderr, "===-------------------------------------------------------------------------===\n"
                    "                         ... Pass statistics report ...\n"
                    "===-------------------------------------------------------------------------===\n");
    for (uint32_t i = 0; i < ir_pipeline_num_reports(p); i++) {
        IrPassReport r = ir_pipeline_report(p, i);
        fprintf(stderr, "%s%s\n", r.pass, r.changed ? "" : " (no change)");
        for (uint32_t k = 0; k < r.n_stats; k++)
            fprintf(stderr, "  (S) %8lld %s\n", (long long)r.stat_values[k], r.stat_names[k]);
    }
}

static void on_pass(void *user, uint32_t i, uint32_t n, const char *pass) {
    cli_progress_stage(user, "pass %u of %u: %s", i + 1, n, pass);
}

CLI_COMMAND(cmd_opt) {
    const char *file = NULL, *out = "-", *pipeline = NULL, *repro = NULL;
    IrPipelineOptions po = {true, IR_PRINT_NEVER, NULL, stderr, NULL};
    bool timing = false, stats = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-p") == 0 || strcmp(a, "--pipeline") == 0) {
            if (++i >= argc) return cli_usage_error("opt", "%s needs a pipeline", a);
            pipeline = argv[i];
        } else if (strncmp(a, "--pipeline=", 11) == 0) {
            pipeline = a + 11;
        } else if (strcmp(a, "-o") == 0) {
            if (++i >= argc) return cli_usage_error("opt", "-o needs a file");
            out = argv[i];
        } else if (strcmp(a, "--list-passes") == 0) {
            list_passes();
            return EXIT_OK;
        } else if (strcmp(a, "--verify-each") == 0) {
            po.verify_each = true;
        } else if (strcmp(a, "--no-verify-each") == 0) {
            po.verify_each = false;
        } else if (strncmp(a, "--print-ir-after=", 17) == 0) {
            const char *w = a + 17;
            if (strcmp(w, "all") == 0) {
                po.print_ir = IR_PRINT_AFTER_ALL;
            } else {
                if (!ir_pass_find(w, strlen(w))) {
                    const char *names[64];
                    uint32_t n = 0;
                    for (uint32_t k = 0; k < ir_pass_count() && n < 64; k++) names[n++] = ir_pass_at(k)->name;
                    const char *sug = ir_suggest(w, names, n);
                    if (sug) return cli_usage_error("opt", "unknown pass '%s' in %s (did you mean '%s'?)", w, a, sug);
                    return cli_usage_error("opt", "unknown pass '%s' in %s (see --list-passes)", w, a);
                }
                po.print_ir = IR_PRINT_AFTER_PASS;
                po.print_ir_pass = w;
            }
        } else if (strcmp(a, "--print-ir-after-change") == 0) {
            po.print_ir = IR_PRINT_AFTER_CHANGE;
        } else if (strcmp(a, "--pass-timing") == 0) {
            timing = true;
        } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
            quiet = true;
        } else if (strcmp(a, "--pass-stats") == 0) {
            stats = true;
        } else if (strcmp(a, "--reproducer") == 0) {
            if (++i >= argc) return cli_usage_error("opt", "--reproducer needs a file");
            repro = argv[i];
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("opt", "unknown option '%s'", a);
        } else if (file) {
            return cli_usage_error("opt", "only one model is accepted");
        } else {
            file = a;
        }
    }
    if (!file) return cli_usage_error("opt", "missing MODEL");
    if (cli_refuse_clobber("opt", out, argc, argv) || cli_refuse_clobber("opt", repro, argc, argv)) return EXIT_INVALID;
    IrGraph *g;
    IrStatus s = cli_load(file, true, &g);
    if (s) return cli_exit_for(s);
    if (!pipeline) {
        /* a reproducer carries its pipeline */
        for (uint32_t i = 0; i < ir_graph_num_meta(g) && !pipeline; i++) {
            const char *k, *v;
            ir_graph_meta_at(g, i, &k, &v);
            if (strcmp(k, "irtool.pipeline") == 0) pipeline = v;
        }
        if (!pipeline) pipeline = "default";
    }
    CliProgress prog; /* on a terminal: the pass running, and the time (not while IR is printed) */
    cli_progress_init(&prog, "irtool opt", quiet || po.print_ir != IR_PRINT_NEVER);
    IrDiag d;
    cli_diag_init_progress(&d, &prog);
    IrPipeline *p;
    s = ir_pipeline_parse(pipeline, &d, &p);
    if (s) {
        ir_graph_destroy(g);
        return s == IR_EINVAL ? EXIT_USAGE : EXIT_INVALID;
    }
    char repro_buf[4096];
    if (!repro) {
        snprintf(repro_buf, sizeof repro_buf, "%s.repro.ir", strcmp(out, "-") == 0 ? "irtool-opt" : out);
        repro = repro_buf;
    }
    po.reproducer = repro;
    ir_pipeline_set_progress(p, on_pass, &prog);
    s = ir_pipeline_run(p, g, &po, &d);
    if (s == IR_OK && strcmp(out, "-") != 0) cli_progress_stage(&prog, "writing %s", out);
    cli_progress_clear(&prog);
    if (timing) print_timing(p);
    if (stats) print_stats(p);
    if (s == IR_OK) s = ir_save(g, out, &d);
    ir_pipeline_destroy(p);
    ir_graph_destroy(g);
    return cli_exit_for(s);
}

/* passes/: the pass manager and the passes. The one public header of the module.
 *
 * Each pass is one file exporting one IrPass value; passes/registry.c holds the one list of all
 * passes. A pipeline is text: `name{opt=value,...},name,...`, or a named pipeline (`default`).
 * The manager runs passes in order, verifies between them (on by default), times them, collects
 * the counters each pass reports, prints IR after passes on request, and on failure writes a
 * reproducer (the IR before the failing pass, carrying the pipeline) that `irtool opt` re-runs.
 */
#ifndef IRTOOL_PASSES_H
#define IRTOOL_PASSES_H

#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct IrPassContext IrPassContext;

typedef struct IrPassOption {
    const char *name;
    const char *default_value; /* text; NULL = no default */
    const char *help;
} IrPassOption;

typedef struct IrPass {
    const char *name;
    const char *summary;
    const IrPassOption *options; /* terminated by {NULL} */
    IrStatus (*run)(IrPassContext *ctx);
    /* Options not listed in `options` are accepted when true (shape-infer takes symbol names). */
    bool free_options;
} IrPass;

/* ---- registry ---- */
uint32_t ir_pass_count(void);
const IrPass *ir_pass_at(uint32_t i);
const IrPass *ir_pass_find(const char *name, size_t n);
/* Expansion of a named pipeline ("default", ...) or NULL. */
const char *ir_pipeline_named(const char *name);
/* The i-th named pipeline's name, NULL past the end. */
const char *ir_pipeline_named_at(uint32_t i);

/* ---- what a pass sees ---- */
IrGraph *ir_pass_graph(IrPassContext *c);
IrDiag *ir_pass_diag(IrPassContext *c);
/* The option's text value (the user's, else the default, else NULL). */
const char *ir_pass_option(IrPassContext *c, const char *name);
int64_t ir_pass_option_int(IrPassContext *c, const char *name, int64_t fallback);
/* Number of user-given options and access by index (for free-form options). */
uint32_t ir_pass_num_options(IrPassContext *c);
void ir_pass_option_at(IrPassContext *c, uint32_t i, const char **name, const char **value);
/* Adds to a named counter shown by --pass-stats ("nodes-removed", ...). */
void ir_pass_stat(IrPassContext *c, const char *counter, int64_t delta);
/* Marks that the pass changed the graph (for --print-ir-after-change). */
void ir_pass_changed(IrPassContext *c);
/* Error located at a node, naming the pass. */
void ir_pass_error(IrPassContext *c, IrNodeId n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Provenance helper: records on `dst` the provenance of `src` (its own provenance list, or its
 * name when it has none). */
void ir_pass_inherit_provenance(IrGraph *g, IrNodeId dst, IrNodeId src);

/* ---- helpers for passes (passes/util.c) ---- */

/* A forward-walking pass that replaces values keeps repl[old] = new (0 = not replaced) for
 * value ids 1..n, and rewrites each later use as it goes. */
IrValueId ir_pass_resolve(const IrValueId *repl, uint32_t n, IrValueId v);
void ir_pass_remap_operands(IrGraph *g, IrNodeId node, const IrValueId *repl, uint32_t n);
IrStatus ir_pass_remap_region_outputs(IrGraph *g, IrRegionId r, const IrValueId *repl, uint32_t n) IR_MUST_CHECK;
/* The constant tensor behind a value: a graph constant or a Constant node's `value`. */
bool ir_pass_const_of(const IrGraph *g, IrValueId v, IrConstId *out);
/* Moves every use of old's (first) result to v, erases old and gives v the old result's name. */
IrStatus ir_pass_replace_node(IrGraph *g, IrNodeId old, IrValueId v) IR_MUST_CHECK;

/* ---- pipelines ---- */
typedef struct IrPipeline IrPipeline;

/* Parses pipeline text; errors (unknown pass or option, syntax) go to diag with the column. */
IrStatus ir_pipeline_parse(const char *text, IrDiag *diag, IrPipeline **out) IR_MUST_CHECK;
void ir_pipeline_destroy(IrPipeline *p);
/* Canonical text of the pipeline (as parsed, named pipelines expanded). */
const char *ir_pipeline_text(const IrPipeline *p);

typedef enum IrPrintIrWhen { IR_PRINT_NEVER, IR_PRINT_AFTER_ALL, IR_PRINT_AFTER_PASS, IR_PRINT_AFTER_CHANGE } IrPrintIrWhen;

typedef struct IrPipelineOptions {
    bool verify_each;          /* verify after each pass (default true) */
    IrPrintIrWhen print_ir;
    const char *print_ir_pass; /* with IR_PRINT_AFTER_PASS */
    FILE *print_to;            /* where IR dumps go (tools pass stderr) */
    const char *reproducer;    /* path for the reproducer file on failure; NULL = none */
} IrPipelineOptions;
/* Called before pass index (of count) runs, for a progress display; fn NULL turns it off. */
void ir_pipeline_set_progress(IrPipeline *p, void (*fn)(void *user, uint32_t index, uint32_t count, const char *pass),
                              void *user);

typedef struct IrPassReport {
    const char *pass;
    double seconds;
    bool changed;
    uint32_t n_stats;
    const char *const *stat_names;
    const int64_t *stat_values;
} IrPassReport;

/* Runs the pipeline on g. On failure the error names the pass, and the reproducer is written
 * when requested. Reports (timing, stats) stay valid until the pipeline is destroyed or run
 * again. */
IrStatus ir_pipeline_run(IrPipeline *p, IrGraph *g, const IrPipelineOptions *opt, IrDiag *diag) IR_MUST_CHECK;
uint32_t ir_pipeline_num_reports(const IrPipeline *p);
IrPassReport ir_pipeline_report(const IrPipeline *p, uint32_t i);

#ifdef __cplusplus
}
#endif
#endif

/* viz/: draws a graph with Graphviz (cgraph + gvc) as SVG, DOT, PNG or a self-contained HTML page.
 * The one public header of the module.
 *
 * viz/ only reads: a graph (already transformed by whatever pipeline the caller ran) and, for
 * highlighting, a validator report as data. It never runs passes or the interpreter. Output is
 * deterministic: ids come from node and value names (sanitized, made unique in program order),
 * never from pointers, so the same graph gives the same bytes.
 */
#ifndef IRTOOL_VIZ_H
#define IRTOOL_VIZ_H

#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum VizFormat {
    VIZ_FORMAT_UNKNOWN = 0,
    VIZ_FORMAT_SVG,
    VIZ_FORMAT_DOT,
    VIZ_FORMAT_PNG,
    VIZ_FORMAT_HTML,
} VizFormat;

/* By extension: .svg, .dot/.gv, .png, .html/.htm. */
VizFormat viz_format_from_path(const char *path);

/* Per-node errors from a validator report (irtool validate --json). Accepted JSON (extra keys
 * are ignored):
 *   {"pass": BOOL, "outputs": [...],
 *    "nodes": [{"node"|"name": NAME, "cosine": C, "max_rel_err": R, "max_abs_err": A}, ...]
 *             (or {"NAME": {...}} or {"NAME": ERROR}),
 *    "first_divergence": {"node": NAME, ...}}
 * NAME is a node name (or a result value name). The error drawn is 1 - cosine where the report
 * gives a cosine, else the number given. */
typedef struct VizHighlight VizHighlight;
IrStatus viz_highlight_parse(const char *json, size_t len, const char *filename, IrDiag *diag,
                             VizHighlight **out) IR_MUST_CHECK;
IrStatus viz_highlight_load(const char *path, IrDiag *diag, VizHighlight **out) IR_MUST_CHECK;
void viz_highlight_destroy(VizHighlight *h);
uint32_t viz_highlight_num_nodes(const VizHighlight *h);
const char *viz_highlight_node_name(const VizHighlight *h, uint32_t i); /* sorted by name */
const char *viz_highlight_first_divergence(const VizHighlight *h); /* NULL if none */
int viz_highlight_passed(const VizHighlight *h);        /* 1 passed, 0 failed, -1 not stated */
uint32_t viz_highlight_num_outputs(const VizHighlight *h);
bool viz_highlight_by_cosine(const VizHighlight *h);    /* every node's error is 1 - cosine */

typedef enum VizCollapse {
    VIZ_COLLAPSE_AUTO = 0, /* collapse when the graph has more than collapse_above nodes */
    VIZ_COLLAPSE_NEVER,
    VIZ_COLLAPSE_ALWAYS,
} VizCollapse;

typedef struct VizOptions {
    VizFormat format;
    VizCollapse collapse;
    uint32_t collapse_above;  /* 0 = default (2000) */
    uint32_t max_nodes;       /* 0 = all; else draw at most this many op boxes, then a marker */
    uint32_t edge_label_max;  /* label edges with shapes below this many boxes; 0 = default (150) */
    const VizHighlight *highlight; /* may be NULL */
    const char *highlight_file;    /* its file name, for messages; may be NULL */
} VizOptions;

/* What was drawn, as counted by the renderer (tests compare it with the SVG):
 *  - boxes: one per drawn op (a `g.node` whose id starts with "n_"), collapsed groups and
 *    segments included; Constant nodes are never boxes (folded into their consumers); fused
 *    nodes are a box only when collapsed (else a cluster of their body).
 *  - io: graph inputs ("in_...") and outputs ("out_...").
 *  - clusters: fused groups drawn open, one per control-flow node and one per region of it
 *    (ids "cluster_..."), plus the legend cluster(s).
 *  - edges: drawn edges (`g.edge`), deduplicated per (tail, head) pair. */
typedef struct VizStats {
    uint32_t boxes, io, clusters, edges;
    uint32_t elided; /* op nodes hidden by max_nodes (0 = no marker) */
    bool collapsed;
} VizStats;

/* Renders g into out (bytes of the chosen format). stats may be NULL. A highlight report none
 * of whose node names (nor first divergence) occur in g is refused (IR_ENOTFOUND): it was made
 * for another model. */
IrStatus viz_render(const IrGraph *g, const VizOptions *opt, IrDiag *diag, IrStrBuf *out,
                    VizStats *stats) IR_MUST_CHECK;

#ifdef __cplusplus
}
#endif
#endif

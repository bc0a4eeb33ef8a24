/* viz/ internals shared by the renderer (render.c), the SVG/HTML post-processor (svg.c) and the
 * report reader (highlight.c). Nothing here is public.
 */
#ifndef IRTOOL_VIZ_INTERNAL_H
#define IRTOOL_VIZ_INTERNAL_H

#include "viz/viz.h"

/* A drawn box's SVG id and the CSS classes the post-processor puts on its group. */
typedef struct VizCssEntry {
    const char *id;  /* owned by the renderer's string pool */
    const char *css; /* "op-contraction fp8", ... */
} VizCssEntry;

/* Checks the SVG is well-formed, adds CSS classes to node groups (entries sorted by id) and a
 * <style> element; writes the result (as a standalone SVG, or wrapped in the HTML viewer with
 * page_data, the JSON its panel and search read, inline). */
IrStatus viz_svg_postprocess(const char *svg, size_t len, const VizCssEntry *css, size_t n_css,
                             bool html, const char *page_data, const char *title, IrDiag *diag,
                             IrStrBuf *out) IR_MUST_CHECK;

/* One node's errors from a report. metric: what the heat map draws (1 - cosine when by_cosine,
 * else the report's number); NaN fields were not given. */
typedef struct VizNodeError {
    double metric, cosine, max_rel_err, max_abs_err;
    bool by_cosine, failed;
} VizNodeError;

/* The errors for a node or value name; false if the report does not mention it. */
bool viz_highlight_lookup(const VizHighlight *h, const char *name, VizNodeError *err);

#endif

/* bench_viz: render time of viz_render (SVG) against node count, collapsed and not.
 *
 * usage: bench_viz [--open-max N] FILE.ir...
 * For each model: the default mode (auto-collapse above 2000 nodes), --collapse, and the open
 * drawing (no collapsing) for models of at most N nodes (default 12000; dot is roughly
 * quadratic there). Prints one markdown table row per run: the best of 3 renders (the machine
 * may be shared), load time not included.
 */
#include "ir.h"
#include "viz/viz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int run(const char *file, const IrGraph *g, VizCollapse mode, const char *name) {
    VizOptions o = {.format = VIZ_FORMAT_SVG, .collapse = mode};
    IrDiag d;
    ir_diag_init(&d, ir_diag_print_fn, stderr);
    IrStrBuf b;
    ir_strbuf_init(&b);
    VizStats st;
    double t = 1e30;
    IrStatus s = IR_OK;
    for (int rep = 0; rep < 3 && s == IR_OK; rep++) {
        b.len = 0;
        double t0 = now();
        s = viz_render(g, &o, &d, &b, &st);
        double dt = now() - t0;
        if (dt < t) t = dt;
    }
    if (s) {
        fprintf(stderr, "bench_viz: %s: %s\n", file, ir_status_name(s));
        ir_strbuf_free(&b);
        return 1;
    }
    const char *base = strrchr(file, '/');
    printf("| %s | %u | %s | %u | %u | %u | %.1f | %.3f |\n", base ? base + 1 : file, ir_graph_num_nodes(g), name,
           st.boxes, st.edges, st.clusters, b.len / 1024.0, t);
    fflush(stdout);
    ir_strbuf_free(&b);
    return 0;
}

int main(int argc, char **argv) {
    uint32_t open_max = 12000;
    int rc = 0;
    printf("| model | nodes | mode | boxes | edges | clusters | SVG KiB | render s |\n");
    printf("|---|---:|---|---:|---:|---:|---:|---:|\n");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--open-max") == 0 && i + 1 < argc) {
            open_max = (uint32_t)strtoul(argv[++i], NULL, 10);
            continue;
        }
        IrDiag d;
        ir_diag_init(&d, ir_diag_print_fn, stderr);
        IrGraph *g;
        if (ir_load(argv[i], &d, &g)) { rc = 1; continue; }
        rc |= run(argv[i], g, VIZ_COLLAPSE_AUTO, "default");
        rc |= run(argv[i], g, VIZ_COLLAPSE_ALWAYS, "--collapse");
        if (ir_graph_num_nodes(g) <= open_max) rc |= run(argv[i], g, VIZ_COLLAPSE_NEVER, "--no-collapse");
        ir_graph_destroy(g);
    }
    return rc;
}

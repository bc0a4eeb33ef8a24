/* Pass pipeline benchmark (issue 4): times `canonicalize,cse,dce,shape-infer` (or -p PIPELINE)
 * on text graphs of increasing size and reports wall time per pass, total, and time per node,
 * so linearity shows as a flat per-node column. Best of N runs; each run re-parses the graph
 * (parsing is not timed) and runs without verification between passes.
 *   usage: bench_passes [-p PIPELINE] [--reps N] GRAPH.ir...
 */
#include "passes/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PASSES 16

int main(int argc, char **argv) {
    const char *pipeline = "canonicalize,cse,dce,shape-infer";
    int reps = 3;
    int first = 1;
    while (first < argc && argv[first][0] == '-') {
        if (!strcmp(argv[first], "-p") && first + 1 < argc) {
            pipeline = argv[first + 1];
            first += 2;
        } else if (!strcmp(argv[first], "--reps") && first + 1 < argc) {
            reps = atoi(argv[first + 1]);
            first += 2;
        } else {
            fprintf(stderr, "usage: bench_passes [-p PIPELINE] [--reps N] GRAPH.ir...\n");
            return 2;
        }
    }
    IrDiag diag;
    ir_diag_init(&diag, ir_diag_print_fn, stderr);
    IrPipeline *p;
    if (ir_pipeline_parse(pipeline, &diag, &p) != IR_OK) return 2;
    uint32_t np = ir_pipeline_num_reports(p);
    printf("pipeline `%s`, best of %d runs, wall clock\n\n| nodes |", pipeline, reps);
    for (uint32_t i = 0; i < np; i++) printf(" %s ms |", ir_pipeline_report(p, i).pass);
    printf(" total ms | us/node |\n|---:|");
    for (uint32_t i = 0; i <= np + 1; i++) printf("---:|");
    printf("\n");
    double base_per_node = 0;
    for (int f = first; f < argc; f++) {
        char *text;
        size_t len;
        if (ir_read_file(argv[f], &diag, &text, &len) != IR_OK) return 1;
        double best_total = 1e30, best[MAX_PASSES] = {0};
        uint32_t nodes = 0;
        for (int r = 0; r < reps; r++) {
            IrGraph *g;
            if (ir_parse_text(text, len, argv[f], &diag, &g) != IR_OK) return 1;
            nodes = ir_graph_num_nodes(g);
            IrPipelineOptions o = {false, IR_PRINT_NEVER, NULL, NULL, NULL};
            if (ir_pipeline_run(p, g, &o, &diag) != IR_OK) return 1;
            double total = 0;
            for (uint32_t i = 0; i < np; i++) total += ir_pipeline_report(p, i).seconds;
            if (total < best_total) {
                best_total = total;
                for (uint32_t i = 0; i < np && i < MAX_PASSES; i++) best[i] = ir_pipeline_report(p, i).seconds;
            }
            ir_graph_destroy(g);
        }
        free(text);
        double per_node = best_total * 1e6 / nodes;
        if (f == first) base_per_node = per_node;
        printf("| %u |", nodes);
        for (uint32_t i = 0; i < np && i < MAX_PASSES; i++) printf(" %.1f |", best[i] * 1e3);
        printf(" %.1f | %.3f (%.2fx) |\n", best_total * 1e3, per_node, per_node / base_per_node);
    }
    ir_pipeline_destroy(p);
    return 0;
}

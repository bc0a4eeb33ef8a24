/* A consumer of the installed toolkit (<irtool/ir.h>, libirtool): loads and verifies the model
 * in argv[1] and prints its node count. Built by .ci/consumers.sh through find_package(irtool). */
#include <irtool/ir.h>

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: verify_model MODEL\n");
        return 2;
    }
    IrDiag diag;
    ir_diag_init(&diag, ir_diag_print_fn, stderr);
    IrGraph *g = NULL;
    if (ir_load(argv[1], &diag, &g) != IR_OK || ir_verify(g, &diag) != IR_OK) {
        ir_graph_destroy(g);
        return 1;
    }
    printf("%u nodes\n", ir_graph_num_nodes(g));
    ir_graph_destroy(g);
    return 0;
}

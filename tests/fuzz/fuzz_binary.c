/* libFuzzer target for the binary reader (.irb): decode from memory and, when that succeeds,
 * verify, print, and count uses. A crash, leak or sanitizer report is a finding; so is an
 * error without a diagnostic.
 *   cmake -DIRTOOL_FUZZ=ON -DCMAKE_C_COMPILER=clang ...; ./fuzz_binary seeds/
 * Seed it with .irb files (irtool convert corpus/x.ir -o seeds/x.irb).
 */
#include "ir/ir.h"

#include <stdlib.h>
#include <string.h>

static void ignore(void *user, const IrDiagnostic *d) {
    (void)user;
    (void)d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    IrDiag d;
    ir_diag_init(&d, ignore, NULL);
    IrGraph *g = NULL;
    if (ir_read_binary_mem(data, size, "fuzz.irb", &d, &g) != IR_OK) {
        if (g || d.n_errors == 0) abort();
        return 0;
    }
    if (ir_verify(g, &d) != IR_OK && d.n_errors == 0) abort();
    IrStrBuf b;
    ir_strbuf_init(&b);
    if (ir_print_text(g, &b) != IR_OK) abort();
    ir_strbuf_free(&b);
    uint32_t *counts = calloc(ir_graph_num_values(g) + 1, sizeof *counts);
    if (counts) ir_graph_count_uses(g, counts);
    free(counts);
    uint32_t n = 0;
    for (IrNodeId x = ir_graph_walk_next(g, 0); x; x = ir_graph_walk_next(g, x))
        if (++n > ir_graph_node_capacity(g)) abort(); /* the walk must end */
    ir_graph_destroy(g);
    return 0;
}

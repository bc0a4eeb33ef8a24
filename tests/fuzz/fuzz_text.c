/* libFuzzer target for the text reader: parse, and when that succeeds, verify, print, parse
 * the print again and check the canonical form is a fixed point. Any crash, leak, sanitizer
 * report or broken fixed point is a finding.
 *   cmake -DIRTOOL_FUZZ=ON -DCMAKE_C_COMPILER=clang ...; ./fuzz_text -max_len=65536 corpus/
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
    /* no filename: `external` weights resolve against the working directory; the parser
     * refuses absolute paths and '..', so the fuzzer cannot map arbitrary files */
    if (ir_parse_text((const char *)data, size, "fuzz.ir", &d, &g) != IR_OK) {
        if (g || d.n_errors == 0) abort(); /* errors must come with a diagnostic and no graph */
        return 0;
    }
    IrStatus vs = ir_verify(g, &d);
    if (vs != IR_OK && d.n_errors == 0) abort();
    IrStrBuf a;
    ir_strbuf_init(&a);
    if (ir_print_text(g, &a) != IR_OK) abort();
    /* the canonical form must parse and print back to itself */
    IrGraph *g2 = NULL;
    IrDiag d2;
    ir_diag_init(&d2, ignore, NULL);
    if (a.data && ir_parse_text(a.data, a.len, "fuzz.ir", &d2, &g2) == IR_OK) {
        IrStrBuf b;
        ir_strbuf_init(&b);
        if (ir_print_text(g2, &b) != IR_OK) abort();
        if (b.len != a.len || memcmp(a.data, b.data, a.len) != 0) abort();
        ir_strbuf_free(&b);
        ir_graph_destroy(g2);
    } else if (a.data) {
        abort(); /* printed text that does not parse */
    }
    ir_strbuf_free(&a);
    ir_graph_destroy(g);
    return 0;
}

/* CLI helpers shared by the commands: diagnostics, exit codes, loading. */
#include "cli.h"

#include <string.h>

void cli_diag_init(IrDiag *d) {
    ir_diag_init(d, ir_diag_print_fn, stderr);
    d->max_errors = 50;
}

bool cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

int cli_exit_for(IrStatus s) {
    switch (s) {
    case IR_OK: return EXIT_OK;
    case IR_EINVAL: return EXIT_USAGE;
    default: return EXIT_INVALID;
    }
}

IrStatus cli_load(const char *path, bool verify, IrGraph **out) {
    IrDiag d;
    cli_diag_init(&d);
    IrStatus s = ir_load(path, &d, out);
    if (s) return s;
    if (verify) {
        s = ir_verify(*out, &d);
        if (s) {
            ir_graph_destroy(*out);
            *out = NULL;
        }
    }
    return s;
}

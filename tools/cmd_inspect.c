/* irtool inspect: prints an .irx artifact's manifest (versions, target, inputs and outputs,
 * kernels, memory plan) and whether it can run on this host (the runtime's preflight). */
#include "backend/runtime/runtime.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CLI_COMMAND(cmd_inspect) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1]) return cli_usage_error("inspect", "unknown option '%s'", argv[i]);
        if (path) return cli_usage_error("inspect", "only one ARTIFACT is accepted");
        path = argv[i];
    }
    if (!path) return cli_usage_error("inspect", "missing ARTIFACT.irx");
    char err[1024];
    char *m = irt_read_manifest(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "irtool inspect: %s: %s\n", path, err);
        return EXIT_INVALID;
    }
    printf("artifact %s\n", path);
    fputs(m, stdout);
    if (*m && m[strlen(m) - 1] != '\n') putchar('\n');
    int pre = irt_preflight(m, err, sizeof err);
    IrtArtifact *a = pre ? NULL : irt_load(path, err, sizeof err);
    if (a) printf("preflight ok: can run on this host\n");
    else printf("preflight FAILED: %s\n", err);
    irt_free(a);
    free(m);
    return a ? EXIT_OK : EXIT_INVALID;
}

/* irtool inspect: prints an .irx artifact's manifest (versions, target, inputs and outputs,
 * kernels, memory plan), its symbols in words when it was compiled with symbolic dims, what its
 * code section is, and whether it can run on this host (the runtime's preflight). It never maps,
 * loads or runs the artifact's code: the checks read the file as data (irt_verify). */
#include "backend/runtime/runtime.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "%XX" escapes of manifest names back to bytes, in place. */
static void unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        unsigned v;
        if (*s == '%' && sscanf(s + 1, "%2x", &v) == 1) *o++ = (char)v, s += 2;
        else *o++ = *s;
    }
    *o = 0;
}

/* Artifacts compiled with symbolic dims: the symbols, their ranges and the checked equalities in
 * words (the manifest's symbol/symcheck lines), and which input dims bind them. */
static void print_symbols(const char *m) {
    char line[2048], name[1024], names[64][64] = {{0}};
    for (int pass = 0; pass < 2; pass++) /* names by id first, for the input dims */
        for (const char *l = m; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
            size_t n = strcspn(l, "\n");
            if (n >= sizeof line) continue;
            memcpy(line, l, n);
            line[n] = 0;
            unsigned id, i, k, by;
            long long lo, hi, dv;
            if (pass == 0) {
                if ((sscanf(line, "symbol %u %1023s", &id, name) == 2 || sscanf(line, "symdef %u %1023s", &id, name) == 2) &&
                    id < 64) {
                    unescape(name);
                    snprintf(names[id], sizeof names[id], "%.63s", name);
                }
            } else if (sscanf(line, "symbol %u %1023s %lld %lld %lld", &id, name, &lo, &hi, &dv) == 5) {
                unescape(name);
                if (hi >= 0) printf("symbol %s: %lld <= %s <= %lld", name, lo, name, hi);
                else printf("symbol %s: %s >= %lld, no upper bound (the workspace grows with it)", name, name, lo);
                if (dv > 1) printf(", a multiple of %lld", dv);
                putchar('\n');
            } else if (sscanf(line, "symcheck %u %1023s", &i, name) == 2) {
                unescape(name);
                printf("guard %s (checked on every run)\n", name);
            } else if (sscanf(line, "symdef %u %1023s", &id, name) == 2) {
                unescape(name);
                printf("symbol %s: computed from the others\n", name);
            } else if (sscanf(line, "symdata %u %lld %1023s", &id, &hi, name) == 3) {
                unescape(name);
                printf("symbol %s: decided by the data, written by its kernel (at most %lld)\n", name, hi);
            } else if (sscanf(line, "insym %u %u %u", &i, &k, &id) == 3) {
                printf("input %u dim %u binds %s\n", i, k, id < 64 && names[id][0] ? names[id] : "a symbol");
            } else if (sscanf(line, "insymval %u %u %u", &i, &k, &id) == 3) {
                printf("input %u entry %u (its value, read before the run) binds %s\n", i, k,
                       id < 64 && names[id][0] ? names[id] : "a symbol");
            } else if (sscanf(line, "insymmul %u %u %u %u %lld", &i, &k, &id, &by, &dv) == 5) {
                char d[96];
                if (by) snprintf(d, sizeof d, "%s", by < 64 && names[by][0] ? names[by] : "a symbol");
                else snprintf(d, sizeof d, "%lld", dv);
                printf("input %u entry %u times %s, truncated (read before the run), binds %s\n", i, k, d,
                       id < 64 && names[id][0] ? names[id] : "a symbol");
            }
        }
}

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
    print_symbols(m);
    char info[512];
    if (irt_verify(path, info, sizeof info, err, sizeof err)) {
        free(m);
        fprintf(stderr, "irtool inspect: %s: %s\n", path, err);
        return EXIT_INVALID;
    }
    printf("%s\n", info);
    int pre = irt_preflight(m, err, sizeof err);
    if (!pre) printf("preflight ok: can run on this host\n");
    else printf("preflight FAILED: %s\n", err);
    free(m);
    return pre ? EXIT_INVALID : EXIT_OK;
}

/* irtool cache stats|clear [--cache-dir DIR]: the compile cache of `irtool compile` (issue 8;
 * backend/artifact/cache.c). */
#include "backend/backend.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

CLI_COMMAND(cmd_cache) {
    const char *sub = NULL, *dir_opt = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cache-dir") == 0) {
            if (++i >= argc) return cli_usage_error("cache", "--cache-dir needs a folder");
            dir_opt = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("cache", "unknown option '%s'", argv[i]);
        } else if (sub) {
            return cli_usage_error("cache", "only one subcommand is accepted");
        } else {
            sub = argv[i];
        }
    }
    if (!sub) return cli_usage_error("cache", "missing subcommand (stats or clear)");
    bool clear = strcmp(sub, "clear") == 0;
    if (!clear && strcmp(sub, "stats") != 0) return cli_usage_error("cache", "unknown subcommand '%s' (stats, clear)", sub);
    char *dir = dir_opt ? strdup(dir_opt) : ir_cache_default_dir();
    if (!dir) return cli_usage_error("cache", "no cache folder: set --cache-dir, XDG_CACHE_HOME or HOME");
    IrCacheStats *st = calloc(1, sizeof *st);
    if (!st || ir_cache_scan(dir, clear, st)) {
        fprintf(stderr, "irtool cache: cannot read %s\n", dir);
        free(st);
        free(dir);
        return EXIT_INVALID;
    }
    if (clear) {
        printf("removed %llu entries (%llu bytes) from %s", (unsigned long long)st->entries,
               (unsigned long long)st->bytes, dir);
        if (st->kernel_entries)
            printf(", and %llu kernel objects (%llu bytes)", (unsigned long long)st->kernel_entries,
                   (unsigned long long)st->kernel_bytes);
        printf("\n");
    } else {
        printf("cache %s\nentries %llu\nbytes %llu\n", dir, (unsigned long long)st->entries, (unsigned long long)st->bytes);
        for (uint32_t i = 0; i < st->n_versions; i++)
            printf("version %s entries %llu bytes %llu\n", st->versions[i].name + 1,
                   (unsigned long long)st->versions[i].entries, (unsigned long long)st->versions[i].bytes);
        printf("kernel objects %llu bytes %llu\n", (unsigned long long)st->kernel_entries,
               (unsigned long long)st->kernel_bytes);
    }
    free(st);
    free(dir);
    return EXIT_OK;
}

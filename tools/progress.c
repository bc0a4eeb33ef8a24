/* Progress lines for long commands (compile, conformance, validate --corpus, opt): one line on
 * stderr, redrawn in place at most ten times a second, with the stage, a count and the elapsed
 * time. Drawn only when stderr is a terminal and --quiet was not given (IRTOOL_PROGRESS=1
 * forces it, for tests); the line is cleared before anything else is printed.
 */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_init(CliProgress *p, const char *cmd, bool quiet) {
    memset(p, 0, sizeof *p);
    const char *force = getenv("IRTOOL_PROGRESS");
    p->on = !quiet && ((force && strcmp(force, "1") == 0) || isatty(STDERR_FILENO));
    p->cmd = cmd;
    p->t0 = mono_s();
    p->last = -1;
}

static void draw(CliProgress *p, const char *text, bool force) {
    double now = mono_s();
    if (!force && p->last >= 0 && now - p->last < 0.1) return;
    p->last = now;
    fprintf(stderr, "\r\033[K%s: %s (%.1f s)", p->cmd, text, now - p->t0);
    fflush(stderr);
    p->drawn = true;
}

void cli_progress_stage(CliProgress *p, const char *fmt, ...) {
    if (!p || !p->on) return;
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    draw(p, text, true);
}

void cli_progress_count(CliProgress *p, const char *what, uint64_t done, uint64_t total) {
    if (!p || !p->on) return;
    char text[256];
    snprintf(text, sizeof text, "%s %llu of %llu", what, (unsigned long long)done, (unsigned long long)total);
    draw(p, text, done == total);
}

void cli_progress_clear(CliProgress *p) {
    if (!p || !p->on || !p->drawn) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->drawn = false;
}

static void progress_diag_fn(void *user, const IrDiagnostic *d) {
    cli_progress_clear(user);
    ir_diag_print_fn(stderr, d);
}

void cli_diag_init_progress(IrDiag *d, CliProgress *p) {
    ir_diag_init(d, progress_diag_fn, p);
    d->max_errors = 50;
}

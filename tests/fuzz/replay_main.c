/* Runs mutated files through one reader's fuzz harness (tests/fuzz/harness.c) with a 10 s limit
 * each and counts the outcomes, for the ordinary sanitizer build and file mutants
 * (tests/fuzz/mutate.py, campaign.sh). In this process (a crash or hang ends the run, after
 * "hang: FILE" or the sanitizer's report), or with FUZZ_REPLAY_FORK=1 each in its own child.
 *   fuzz_replay READER FILE...    READER: ir irb onnx npy pb irx
 * Prints "READER: N inputs, C crashes, H hangs, F findings"; exits 1 when there was any. */
#include "tests/fuzz/harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int run_one(int (*one)(const uint8_t *, size_t), const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    for (size_t k; b && (k = fread(b + n, 1, cap - n, f)) > 0;)
        if ((n += k) == cap) b = realloc(b, cap *= 2);
    fclose(f);
    int rc = b ? one(b, n) : 0;
    free(b);
    return rc;
}

static const char *current;

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "hang: ";
    if (write(1, msg, sizeof msg - 1) < 0 || write(1, current, strlen(current)) < 0 || write(1, "\n", 1) < 0) _exit(124);
    _exit(124);
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*one)(const uint8_t *, size_t);
    } readers[] = {{"ir", fuzz_text_one}, {"irb", fuzz_binary_one}, {"onnx", fuzz_onnx_one},
                   {"npy", fuzz_npy_one}, {"pb", fuzz_pb_one},      {"irx", fuzz_irx_one}};
    int (*one)(const uint8_t *, size_t) = NULL;
    for (size_t i = 0; argc > 1 && i < sizeof readers / sizeof *readers; i++)
        if (!strcmp(argv[1], readers[i].name)) one = readers[i].one;
    if (!one) {
        fprintf(stderr, "usage: fuzz_replay ir|irb|onnx|npy|pb|irx FILE...\n");
        return 2;
    }
    size_t seed_len;
    if (!strcmp(argv[1], "irx")) (void)fuzz_irx_seed(&seed_len); /* once, before the children */
    unsigned inputs = 0, crashes = 0, hangs = 0, findings = 0, wrong = 0, ran = 0;
    if (!getenv("FUZZ_REPLAY_FORK")) { /* in this process: faster; a crash or hang ends the run */
        signal(SIGALRM, on_alarm);
        for (int i = 2; i < argc; i++) {
            current = argv[i];
            alarm(10);
            if (run_one(one, argv[i])) printf("finding: %s\n", argv[i]), findings++;
            inputs++;
        }
        alarm(0);
        wrong = (unsigned)fuzz_irx_manifest_wrong;
        ran = (unsigned)fuzz_irx_ran;
        argc = 0;
    }
    for (int i = 2; i < argc; i++) {
        fflush(NULL);
        int fds[2];
        if (pipe(fds)) return 2;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            alarm(10);
            int rc = run_one(one, argv[i]);
            uint64_t w[2] = {fuzz_irx_manifest_wrong, fuzz_irx_ran};
            if (write(fds[1], w, sizeof w) != sizeof w) _exit(3);
            _exit(rc ? 1 : 0);
        }
        close(fds[1]);
        uint64_t w[2] = {0, 0};
        if (read(fds[0], w, sizeof w) == sizeof w) wrong += (unsigned)w[0], ran += (unsigned)w[1];
        close(fds[0]);
        int st = 0;
        waitpid(pid, &st, 0);
        inputs++;
        const char *what = NULL;
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) what = "hang", hangs++;
        else if (WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) > 1)) what = "crash", crashes++;
        else if (WEXITSTATUS(st) == 1) what = "finding", findings++;
        if (what) printf("%s: %s\n", what, argv[i]);
    }
    printf("%s: %u inputs, %u crashes, %u hangs, %u findings", argv[1], inputs, crashes, hangs, findings);
    if (!strcmp(argv[1], "irx")) printf(", %u manifest mutants ran with other outputs, %u ran with the original's", wrong, ran);
    printf("\n");
    return crashes || hangs || findings ? 1 : 0;
}

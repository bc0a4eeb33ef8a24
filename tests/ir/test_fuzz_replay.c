/* Corpus replay (issue 29): every file under tests/fuzz/corpus/<reader>/ goes through that
 * reader's fuzz harness (tests/fuzz/harness.c) in this sanitizer build, so the mutated inputs a
 * campaign kept (and the cases) stay fixed without clang or libFuzzer. A crash or
 * sanitizer report fails the test as much as a finding the harness returns. */
#include "testutil.h"
#include "tests/fuzz/harness.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static void replay(const char *reader, int (*one)(const uint8_t *, size_t), size_t at_least) {
    char rel[64];
    snprintf(rel, sizeof rel, "tests/fuzz/corpus/%s", reader);
    size_t n = 0;
    char **names = tu_list_dir(rel, "", &n);
    cr_assert(names, "cannot list %s", rel);
    cr_assert_geq(n, at_least, "%s holds %zu inputs", rel, n);
    for (size_t i = 0; i < n; i++) {
        if (names[i][0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", rel, names[i]);
        char *full = tu_source_path(path);
        size_t len;
        char *data = tu_read_file(full, &len);
        cr_assert(data, "cannot read %s", full);
        cr_assert_eq(one((const uint8_t *)data, len), 0, "finding on %s", path);
        free(data);
        free(full);
    }
    tu_free_list(names);
}

TestSuite(fuzz_replay, .timeout = 120);

Test(fuzz_replay, text) { replay("ir", fuzz_text_one, 20); }
Test(fuzz_replay, binary) { replay("irb", fuzz_binary_one, 20); }
Test(fuzz_replay, onnx) { replay("onnx", fuzz_onnx_one, 20); }
Test(fuzz_replay, npy) { replay("npy", fuzz_npy_one, 20); }
Test(fuzz_replay, pb) { replay("pb", fuzz_pb_one, 20); }

Test(fuzz_replay, irx) {
    size_t len;
    if (!fuzz_irx_seed(&len)) cr_skip_test("no seed artifact (a system linker is needed to build one)");
    replay("irx", fuzz_irx_one, 20);
    cr_log_info("manifest mutants that ran with other outputs: %llu", (unsigned long long)fuzz_irx_manifest_wrong);
}

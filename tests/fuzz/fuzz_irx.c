/* libFuzzer target for artifacts (.irx): a whole file is read as `irtool inspect` reads it, loaded and run;
 * any other input is a manifest packed with a seed artifact's sections (checksum made to match)
 * (tests/fuzz/harness.c).
 *   cmake -DIRTOOL_FUZZ=ON -DCMAKE_C_COMPILER=clang-19 ...; ./fuzz_irx tests/fuzz/corpus/irx
 */
#include "tests/fuzz/harness.h"

#include <stdio.h>
#include <stdlib.h>

static void report(void) {
    fprintf(stderr, "fuzz_irx: manifest mutants that loaded and ran with other outputs: %llu\n",
            (unsigned long long)fuzz_irx_manifest_wrong);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    size_t n;
    (void)fuzz_irx_seed(&n); /* built (and written for the campaign's seeds) before the first input */
    atexit(report);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_irx_one(data, size)) abort();
    return 0;
}

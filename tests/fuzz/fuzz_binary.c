/* libFuzzer target for the binary reader (.irb): decode from memory and, when that succeeds, verify, print and
 * walk
 * (tests/fuzz/harness.c).
 *   cmake -DIRTOOL_FUZZ=ON -DCMAKE_C_COMPILER=clang-19 ...; ./fuzz_binary tests/fuzz/corpus/irb
 */
#include "tests/fuzz/harness.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_binary_one(data, size)) abort();
    return 0;
}

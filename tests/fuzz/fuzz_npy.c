/* libFuzzer target for the .npy reader: decode from memory and sum the elements
 * (tests/fuzz/harness.c).
 *   cmake -DIRTOOL_FUZZ=ON -DCMAKE_C_COMPILER=clang-19 ...; ./fuzz_npy tests/fuzz/corpus/npy
 */
#include "tests/fuzz/harness.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_npy_one(data, size)) abort();
    return 0;
}

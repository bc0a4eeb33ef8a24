/* libFuzzer target for the text reader (.ir): parse, and when that succeeds verify, print, parse
 * the print again and check the canonical form is a fixed point (tests/fuzz/harness.c).
 *   cmake -DIRTOOL_FUZZ=ON -DCMAKE_C_COMPILER=clang-19 ...; ./fuzz_text -max_len=65536 tests/fuzz/corpus/ir
 */
#include "tests/fuzz/harness.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_text_one(data, size)) abort();
    return 0;
}

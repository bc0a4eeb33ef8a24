/* libFuzzer target for the ONNX importer (.onnx, no path: external data refused): import and, when that
 * succeeds, verify, print and walk
 * (tests/fuzz/harness.c).
 *   cmake -DIRTOOL_FUZZ=ON -DCMAKE_C_COMPILER=clang-19 ...; ./fuzz_onnx tests/fuzz/corpus/onnx
 */
#include "tests/fuzz/harness.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_onnx_one(data, size)) abort();
    return 0;
}

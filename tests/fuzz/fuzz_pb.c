/* libFuzzer target for the ONNX .pb value reader: the bytes as a TensorProto, a SequenceProto and an
 * OptionalProto
 * (tests/fuzz/harness.c).
 *   cmake -DIRTOOL_FUZZ=ON -DCMAKE_C_COMPILER=clang-19 ...; ./fuzz_pb tests/fuzz/corpus/pb
 */
#include "tests/fuzz/harness.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fuzz_pb_one(data, size)) abort();
    return 0;
}

/* One input through one reader, as the fuzz targets and the corpus replay test run it: 0, or
 * FUZZ_FINDING (an error without a diagnostic, a broken round trip, an artifact that runs with
 * outputs other than its original's). Crashes and sanitizer reports speak for themselves. */
#ifndef IRTOOL_FUZZ_HARNESS_H
#define IRTOOL_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_FINDING 1

int fuzz_text_one(const uint8_t *data, size_t size);   /* .ir */
int fuzz_binary_one(const uint8_t *data, size_t size); /* .irb */
int fuzz_onnx_one(const uint8_t *data, size_t size);   /* .onnx */
int fuzz_npy_one(const uint8_t *data, size_t size);    /* .npy */
int fuzz_pb_one(const uint8_t *data, size_t size);     /* .pb: TensorProto, SequenceProto, OptionalProto */
/* .irx: an input starting with the magic is a whole artifact (load, inspect, run); any other is
 * a manifest packed with the sections of a seed artifact compiled for this host (checksum made
 * to match), so the manifest's own checks are what is exercised. */
int fuzz_irx_one(const uint8_t *data, size_t size);
/* The seed artifact (NULL when it cannot be built here: no linker); its manifest mutants that
 * loaded and ran with other outputs (consistent but different manifests). */
const void *fuzz_irx_seed(size_t *len);
extern uint64_t fuzz_irx_manifest_wrong, fuzz_irx_ran;

#endif

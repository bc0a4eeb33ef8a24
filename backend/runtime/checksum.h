/* The artifact checksum (format 6): XXH3-64 over the whole file with its own 8-byte field (at
 * IRT_CHECKSUM_OFFSET) left out, so header, manifest, constants, code and IR are all covered.
 * Header-only (xxhash.h with XXH_INLINE_ALL): libirtool-runtime links nothing new. It detects
 * corruption and truncation, not tampering by someone who can rewrite the file (no key).
 */
#ifndef IRTOOL_RUNTIME_CHECKSUM_H
#define IRTOOL_RUNTIME_CHECKSUM_H

#include "backend/runtime/runtime.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Callers make sure len >= IRT_HEADER_SIZE. */
static inline uint64_t irt_artifact_checksum(const unsigned char *d, size_t len) {
    uint64_t head = XXH3_64bits(d, IRT_CHECKSUM_OFFSET);
    return XXH3_64bits_withSeed(d + IRT_CHECKSUM_OFFSET + 8, len - IRT_CHECKSUM_OFFSET - 8, head);
}

static inline void irt_artifact_put_checksum(unsigned char *d, size_t len) {
    uint64_t h = irt_artifact_checksum(d, len);
    for (int i = 0; i < 8; i++) d[IRT_CHECKSUM_OFFSET + i] = (unsigned char)(h >> (8 * i));
}

#endif

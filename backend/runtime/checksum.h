/* The artifact checksum (format 6): XXH3-64 of the file from its start to the end of the code
 * section, its own 8-byte field (at IRT_CHECKSUM_OFFSET) left out: header, manifest, constants
 * and code. The IR section after them, which the runtime never reads, has its own hash in the
 * manifest (ir_hash). Header-only (xxhash.h, XXH_INLINE_ALL): the runtime links nothing new. It
 * detects corruption and truncation, not tampering by whoever can rewrite the file (no key).
 */
#ifndef IRTOOL_RUNTIME_CHECKSUM_H
#define IRTOOL_RUNTIME_CHECKSUM_H

#include "backend/runtime/abi.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

/* The bytes covered: up to the end of the code section (section 2 in the header's table, which
 * callers have checked lies inside the file and after the header). */
static inline size_t irt_artifact_checked_len(const unsigned char *d) {
    uint64_t off = 0, len = 0;
    for (int i = 7; i >= 0; i--) off = off << 8 | d[48 + i], len = len << 8 | d[56 + i];
    return (size_t)(off + len);
}

/* Callers make sure the file holds irt_artifact_checked_len(d) >= IRT_HEADER_SIZE bytes. */
static inline uint64_t irt_artifact_checksum(const unsigned char *d) {
    uint64_t head = XXH3_64bits(d, IRT_CHECKSUM_OFFSET);
    return XXH3_64bits_withSeed(d + IRT_CHECKSUM_OFFSET + 8, irt_artifact_checked_len(d) - IRT_CHECKSUM_OFFSET - 8, head);
}

/* Writers and tests that rewrote an artifact: its checksum made to match again. */
static inline void irt_artifact_put_checksum(unsigned char *d, size_t len) {
    (void)len;
    uint64_t h = irt_artifact_checksum(d);
    for (int i = 0; i < 8; i++) d[IRT_CHECKSUM_OFFSET + i] = (unsigned char)(h >> (8 * i));
}

#endif

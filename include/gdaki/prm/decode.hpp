// Human-readable decoding of mlx5 WQEs and CQEs: opcode, fields, syndrome. Used in test
// failure messages, error dumps and `gdaki dump`. Host-only (allocates strings).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/wqe.hpp"

namespace gdaki::prm {

const char* to_string(send_opcode op);
const char* to_string(cqe_opcode op);
const char* to_string(syndrome s);

// Decodes the send WQE at WQEBB index `wqebb` of a ring of `ring_wqebbs` WQEBBs starting
// at `ring` (segments are followed across the ring end). One line per segment.
std::string decode_wqe(const void* ring, uint32_t ring_wqebbs, uint32_t wqebb);

// Decodes a WQE held in a flat buffer of `len` bytes (as `gdaki dump` reads from hex).
std::string decode_wqe(const void* wqe, size_t len);

// Decodes one 64-byte CQE (normal or error layout).
std::string decode_cqe(const void* cqe);

// Hex dump of `len` bytes, 16 per line.
std::string hex_dump(const void* data, size_t len);

}  // namespace gdaki::prm

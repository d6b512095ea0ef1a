// The Toeplitz hash that NICs use for receive-side scaling (RSS): a 32-bit window slides
// over the key, one bit per input bit, and the window is XORed into the result wherever
// the input bit is set. The input is the flow's fields in packet byte order: source
// address, destination address, then source and destination port when the hash covers L4.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace gdaki::eth {

// RSS keys are 40 bytes on most NICs (enough for IPv6 + ports: 36 input bytes need
// 36 * 8 + 32 key bits).
inline constexpr size_t rss_key_bytes = 40;
using rss_key = std::array<uint8_t, rss_key_bytes>;

// The key Microsoft publishes with its RSS verification suite; also the default of many
// drivers. Used when a port is not given a key of its own.
inline constexpr rss_key default_rss_key = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

// Hash of `input` under `key`. Precondition: input.size() + 4 <= key.size() (the window
// must stay inside the key); longer inputs return 0. Returns the 32-bit hash.
uint32_t toeplitz_hash(std::span<const uint8_t> key, std::span<const uint8_t> input);

}  // namespace gdaki::eth

// Definitions for gdaki/device/ring.hpp: the ring-counter arithmetic.
// Internal: not to be included directly; include gdaki/device/ring.hpp, which includes
// this file at its end. Declarations, contracts and default arguments live there.
#pragma once

#include <cstdint>

namespace gdaki::dev {

template <unsigned bits>
GDAKI_HD constexpr bool ring_before(uint64_t a, uint64_t b) {
  static_assert(bits >= 1 && bits <= 64, "counter width must be 1..64 bits");
  if constexpr (bits == 64) {
    return static_cast<int64_t>(a - b) < 0;
  } else {
    const uint64_t mask = (uint64_t{1} << bits) - 1;
    const uint64_t d = (a - b) & mask;
    return d != 0 && d >= (uint64_t{1} << (bits - 1));
  }
}

GDAKI_HD constexpr uint16_t wrap16_distance(uint64_t a, uint64_t b) { return static_cast<uint16_t>(a - b); }

GDAKI_HD constexpr uint64_t widen16(uint64_t reference, uint16_t value) {
  return reference - static_cast<uint16_t>(static_cast<uint16_t>(reference) - value);
}

}  // namespace gdaki::dev

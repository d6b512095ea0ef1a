// Ring-counter arithmetic. gdaki keeps every ring position as a free-running 64-bit
// counter and masks it only at the subscript. The NIC sees narrower copies: 16 bits for
// WQE indexes, DBR words and CQE wqe_counter, 24 bits for the CQ consumer index. These
// helpers are the only place those widths are handled.
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"

namespace gdaki::dev {

// True when a precedes b on a ring whose counters are `bits` wide (wrap-safe, valid while
// the two are less than half the counter range apart).
template <unsigned bits>
GDAKI_HD constexpr bool ring_before(uint64_t a, uint64_t b);

// Distance from b forward to a on a 16-bit ring.
GDAKI_HD constexpr uint16_t wrap16_distance(uint64_t a, uint64_t b);

// Rebuilds the full counter that a 16-bit value names, given a full counter `reference`
// that is at or after it and fewer than 65536 steps ahead.
GDAKI_HD constexpr uint64_t widen16(uint64_t reference, uint16_t value);

}  // namespace gdaki::dev

#include "gdaki/device/impl/ring.hpp"  // the definitions of the functions declared above

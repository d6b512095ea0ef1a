// Big-endian field types. Every multi-byte PRM field (WQE, CQE, doorbell record) is
// big-endian on the wire; giving those fields their own types means a missing byte swap
// does not compile. Conversion happens only through to_be*/from_be below.
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"

namespace gdaki::prm {

GDAKI_HD constexpr uint16_t bswap16(uint16_t v) { return static_cast<uint16_t>((v >> 8) | (v << 8)); }
GDAKI_HD constexpr uint32_t bswap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0x0000ff00u) | ((v << 8) & 0x00ff0000u) | (v << 24);
}
GDAKI_HD constexpr uint64_t bswap64(uint64_t v) {
  return (static_cast<uint64_t>(bswap32(static_cast<uint32_t>(v))) << 32) |
         bswap32(static_cast<uint32_t>(v >> 32));
}

// The raw member holds the bytes exactly as they sit in memory. Hosts and GPUs are
// little-endian (checked below), so a big-endian value is the byte-swapped host value.
struct be16 {
  uint16_t raw;
};
struct be32 {
  uint32_t raw;
};
struct be64 {
  uint64_t raw;
};

GDAKI_HD constexpr be16 to_be16(uint16_t v) { return be16{bswap16(v)}; }
GDAKI_HD constexpr be32 to_be32(uint32_t v) { return be32{bswap32(v)}; }
GDAKI_HD constexpr be64 to_be64(uint64_t v) { return be64{bswap64(v)}; }
GDAKI_HD constexpr uint16_t from_be(be16 v) { return bswap16(v.raw); }
GDAKI_HD constexpr uint32_t from_be(be32 v) { return bswap32(v.raw); }
GDAKI_HD constexpr uint64_t from_be(be64 v) { return bswap64(v.raw); }

static_assert(sizeof(be16) == 2 && sizeof(be32) == 4 && sizeof(be64) == 8,
              "big-endian wrappers must have the size of the field they hold");
static_assert(alignof(be32) == 4 && alignof(be64) == 8,
              "big-endian wrappers must keep the natural alignment the PRM layouts rely on");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gdaki assumes a little-endian host, as every supported CPU and GPU is"
#endif

}  // namespace gdaki::prm

// Expected-byte helpers of the PRM mailbox tests (mlx5_prm_cmd_test.cpp,
// mlx5_prm_eth_test.cpp): a zeroed mailbox, big-endian stores at a byte offset, and a
// whole-buffer compare that reports the first differing byte (which names the misplaced
// field).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace prm_bytes {

inline std::vector<uint8_t> zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

inline void put_be16(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  b[at] = static_cast<uint8_t>(v >> 8);
  b[at + 1] = static_cast<uint8_t>(v);
}
inline void put_be24(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  b[at] = static_cast<uint8_t>(v >> 16);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
  b[at + 2] = static_cast<uint8_t>(v);
}
inline void put_be32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  put_be16(b, at, v >> 16);
  put_be16(b, at + 2, v & 0xffff);
}
inline void put_be64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  put_be32(b, at, static_cast<uint32_t>(v >> 32));
  put_be32(b, at + 4, static_cast<uint32_t>(v));
}

inline void expect_same(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << "byte " << i << " (bit 0x" << std::hex << i * 8 << ")";
  }
}

}  // namespace prm_bytes

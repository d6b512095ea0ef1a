// internal: SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), enough for the wire's
// challenge-response (wire_auth.hpp). Written here rather than linked from a crypto
// library so the core library keeps no such dependency; checked against the published
// test vectors (tests/security/sha256_test.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace gdaki::soft::wire {

using digest = std::array<uint8_t, 32>;

class sha256 {
 public:
  sha256();
  void update(const void* data, size_t len);
  digest finish();  // the object is spent afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t fill_ = 0;
  uint64_t total_ = 0;
};

digest sha256_of(const void* data, size_t len);

// HMAC-SHA-256 of the concatenation of `parts` (pointer, length pairs) under key.
struct byte_span {
  const void* p;
  size_t n;
};
digest hmac_sha256(const void* key, size_t key_len, const byte_span* parts, size_t n_parts);

}  // namespace gdaki::soft::wire

// SHA-256 and HMAC-SHA-256, which the wire's challenge-response rests on, against the
// published test vectors: FIPS 180-2 appendix B (and the empty message) and RFC 4231.
// Any slip in the round function, padding or key handling changes every digest (e.g. drop
// the length block in sha256::finish() and all four SHA-256 cases fail).
#include <gtest/gtest.h>

#include <string>

#include "../../src/providers/soft/wire/sha256.hpp"

namespace {

using gdaki::soft::wire::byte_span;
using gdaki::soft::wire::digest;

std::string hex(const digest& d) {
  static const char* x = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += x[b >> 4];
    s += x[b & 15];
  }
  return s;
}

std::string sha(const std::string& m) { return hex(gdaki::soft::wire::sha256_of(m.data(), m.size())); }

std::string hmac(const std::string& key, const std::string& m) {
  const byte_span part{m.data(), m.size()};
  return hex(gdaki::soft::wire::hmac_sha256(key.data(), key.size(), &part, 1));
}

TEST(sha256, fips_180_2_vectors) {
  EXPECT_EQ(sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(sha256, split_updates_give_the_same_digest) {
  // Block boundaries inside update(): 1 + 63 + 64 + 72 bytes in pieces vs at once.
  const std::string m(200, 'q');
  gdaki::soft::wire::sha256 s;
  s.update(m.data(), 1);
  s.update(m.data() + 1, 63);
  s.update(m.data() + 64, 64);
  s.update(m.data() + 128, 72);
  EXPECT_EQ(hex(s.finish()), sha(m));
}

TEST(hmac_sha256, rfc_4231_vectors) {
  EXPECT_EQ(hmac(std::string(20, '\x0b'), "Hi There"), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hmac("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block is hashed first (test case 6).
  EXPECT_EQ(hmac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(hmac_sha256, parts_are_concatenated) {
  const std::string a = "what do ya ", b = "want for nothing?";
  const byte_span parts[] = {{a.data(), a.size()}, {b.data(), b.size()}};
  EXPECT_EQ(hex(gdaki::soft::wire::hmac_sha256("Jefe", 4, parts, 2)), hmac("Jefe", a + b));
}

}  // namespace

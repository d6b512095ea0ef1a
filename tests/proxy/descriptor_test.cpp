// The 64-byte proxy descriptor checks itself: every byte but the check is covered, and
// sequences, opcodes and lengths are validated.
#include <gtest/gtest.h>

#include <cstring>

#include "gdaki/proxy/descriptor.hpp"

using namespace gdaki::proxy;

namespace {

// Takes the 64-byte-aligned descriptor by reference: passed by value, GCC notes that the
// ABI for such parameters changed in GCC 4.6 (a note in every clean build).
descriptor sealed(const descriptor& in, uint32_t position) {
  descriptor d = in;
  d.seq_head = position;
  d.seq_tail = position;
  d.check = 0;
  d.check = descriptor_check(d);
  return d;
}

descriptor sample() {
  return make_put_signal(3, 0x7f0000001000, 5, 0x7f0000802000, 6, 4096, 0x7f0000003000, 7, false, 1, 9);
}

}  // namespace

TEST(proxy_descriptor, sealed_descriptor_validates) {
  EXPECT_EQ(validate(sealed(sample(), 42), 42), descriptor_fault::none);
}

TEST(proxy_descriptor, every_changed_byte_fails_the_check) {
  const descriptor good = sealed(sample(), 42);
  for (size_t byte = 0; byte < sizeof(descriptor); ++byte) {
    if (byte == offsetof(descriptor, check) || byte == offsetof(descriptor, check) + 1) continue;
    for (int bit = 0; bit < 8; ++bit) {
      descriptor bad = good;
      reinterpret_cast<unsigned char*>(&bad)[byte] ^= static_cast<unsigned char>(1u << bit);
      EXPECT_NE(validate(bad, 42), descriptor_fault::none) << "byte " << byte << " bit " << bit;
    }
  }
}

TEST(proxy_descriptor, zeroed_slot_never_validates) {
  const descriptor zero{};
  EXPECT_NE(validate(zero, 0), descriptor_fault::none);
}

TEST(proxy_descriptor, slot_from_previous_lap_is_a_sequence_fault) {
  const descriptor old = sealed(sample(), 42);
  EXPECT_EQ(validate(old, 42 + 1024), descriptor_fault::sequence);
  descriptor half = sealed(sample(), 42 + 1024);
  half.seq_head = 42;  // new tail over an old head: the body is from the previous lap
  EXPECT_EQ(validate(half, 42 + 1024), descriptor_fault::sequence);
}

TEST(proxy_descriptor, unknown_opcode_or_flags_are_rejected) {
  descriptor d = sample();
  d.op = static_cast<opcode>(opcode_count);
  EXPECT_EQ(validate(sealed(d, 1), 1), descriptor_fault::opcode);
  d = sample();
  d.flags = 0x80;
  EXPECT_EQ(validate(sealed(d, 1), 1), descriptor_fault::opcode);
  d = sample();
  d.op = opcode::invalid;
  EXPECT_EQ(validate(sealed(d, 1), 1), descriptor_fault::opcode);
}

TEST(proxy_descriptor, oversized_lengths_are_rejected) {
  descriptor d = make_put_inline(0, 0x1000, 1, 1, 2, max_inline_bytes + 1, 0);
  EXPECT_EQ(validate(sealed(d, 1), 1), descriptor_fault::length);
  d = make_put(0, 0x1000, 1, 0x2000, 2, max_descriptor_bytes + 1, 0);
  EXPECT_EQ(validate(sealed(d, 1), 1), descriptor_fault::length);
}

// CQ polling (gdaki/device/cq.hpp) against a test NIC that writes CQEs by hand per spec
// 5.1-5.5: owner bit per lap, 0xF1 initialisation, 24-bit BE set_ci, 1-entry CQs, and
// the field decoding of REQ and RESP CQEs.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "gdaki/device/cq.hpp"
#include "gdaki/prm/decode.hpp"
#include "unit/unit_support.hpp"

namespace {

using gdaki::status;
using gdaki::dev::completion;
using gdaki_test::nic_cqe;
using gdaki_test::nic_write_cqe;
using gdaki_test::test_cq;

// set_ci as the NIC reads it: BE32 at DBR offset 0.
uint32_t set_ci_word(const test_cq& cq) { return gdaki_test::get_be32(cq.dbrec.data()); }

std::string dump_slot(const test_cq& cq, uint64_t pos) {
  return gdaki::prm::decode_cqe(cq.ring.data() + (pos & (cq.entries() - 1)) * 64);
}

TEST(cq_poll, fresh_cq_initialised_to_f1_has_nothing_ready) {
  test_cq cq(2);
  completion c{};
  EXPECT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::again);
  EXPECT_EQ(cq.handle.ci, 0u);
}

// Spec 5.4 example: N = 4, three laps; owner written 0,1,0 per lap; the poller never takes
// the previous lap's entry, and set_ci follows the consumer index.
TEST(cq_poll, cq_owner_bit_flips_each_lap) {
  test_cq cq(2);
  for (uint64_t p = 0; p < 16; ++p) {
    SCOPED_TRACE(::testing::Message() << "CQE #" << p);
    completion c{};
    // Before CQE p is written its slot holds CQE p-4 (owner of the previous lap) or 0xF1.
    ASSERT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::again) << dump_slot(cq, p);
    nic_cqe f;
    f.opcode = 0;  // REQ
    f.wqe_counter = static_cast<uint16_t>(0x100 + p);
    f.wqe_opcode = 0x08;
    f.byte_cnt = static_cast<uint32_t>(1000 + p);
    nic_write_cqe(cq.ring.data(), 2, p, f);
    EXPECT_EQ(cq.ring.data()[(p & 3) * 64 + 63] & 1, (p >> 2) & 1) << "test NIC owner bit";
    ASSERT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::ok) << dump_slot(cq, p);
    EXPECT_EQ(c.opcode, gdaki::prm::cqe_opcode::req);
    EXPECT_TRUE(c.ok());
    EXPECT_EQ(c.wqe_counter, 0x100 + p);
    EXPECT_EQ(c.wqe_opcode, 0x08);
    EXPECT_EQ(c.qpn, gdaki_test::test_qp::qpn);
    EXPECT_EQ(c.byte_cnt, 1000 + p);
    EXPECT_EQ(cq.handle.ci, p + 1);
    EXPECT_EQ(set_ci_word(cq), p + 1);
    // A second poll must not take the same entry again.
    EXPECT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::again);
  }
}

// A slot holding opcode INVALID is not ready even when its owner bit matches the lap
// (0xF1 carries owner 1, which lap 1 expects).
TEST(cq_poll, invalid_opcode_is_not_ready_even_with_matching_owner) {
  test_cq cq(2);
  for (uint64_t p = 0; p < 4; ++p) {
    nic_write_cqe(cq.ring.data(), 2, p, nic_cqe{});
    completion c{};
    ASSERT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::ok);
  }
  cq.ring.data()[63] = 0xf1;  // slot 0 re-initialised; ci = 4 expects owner 1
  completion c{};
  EXPECT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::again);
  nic_write_cqe(cq.ring.data(), 2, 4, nic_cqe{});
  EXPECT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::ok);
}

// A CQE of the next lap in a slot the poller has not reached yet is not mistaken for the
// current one: the stale lap-1 entry in slot 0 (owner 1) is not ready for ci = 8 (owner 0).
TEST(cq_poll, stale_entry_from_previous_lap_is_not_new) {
  test_cq cq(2);
  completion c{};
  for (uint64_t p = 0; p < 8; ++p) {
    nic_cqe f;
    f.wqe_counter = static_cast<uint16_t>(p);
    nic_write_cqe(cq.ring.data(), 2, p, f);
    ASSERT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::ok);
  }
  EXPECT_EQ(cq.ring.data()[63], 0x01) << "slot 0 holds lap 1's REQ CQE (owner 1)";
  EXPECT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::again);
  EXPECT_EQ(cq.handle.ci, 8u);
}

// set_ci is the consumer index masked to 24 bits, big-endian (spec 5.5).
TEST(cq_poll, set_ci_is_big_endian_and_24_bits_wide) {
  test_cq cq(2);
  const uint64_t first = 0xfffffe;
  cq.start_at(first);
  for (uint64_t p = first; p < first + 4; ++p) {
    nic_write_cqe(cq.ring.data(), 2, p, nic_cqe{});
    completion c{};
    ASSERT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::ok) << dump_slot(cq, p);
  }
  // ci = 0x1000002 -> set_ci 0x000002, stored as bytes 00 00 00 02.
  const uint8_t* d = cq.dbrec.data();
  EXPECT_EQ(d[0], 0x00);
  EXPECT_EQ(d[1], 0x00);
  EXPECT_EQ(d[2], 0x00);
  EXPECT_EQ(d[3], 0x02);
  EXPECT_EQ(cq.handle.ci, first + 4);

  // And a value using all three low bytes: ci = 0xabcdef -> bytes 00 ab cd ef.
  test_cq cq2(0);
  cq2.start_at(0xabcdee);
  nic_write_cqe(cq2.ring.data(), 0, 0xabcdee, nic_cqe{});
  completion c{};
  ASSERT_EQ(gdaki::dev::cq_poll_one(cq2.handle, &c), status::ok);
  const uint8_t* d2 = cq2.dbrec.data();
  EXPECT_EQ(d2[0], 0x00);
  EXPECT_EQ(d2[1], 0xab);
  EXPECT_EQ(d2[2], 0xcd);
  EXPECT_EQ(d2[3], 0xef);
}

// N = 1: every CQE lands in slot 0 and the owner bit toggles on every CQE (spec 5.6).
TEST(cq_poll, single_entry_cq_toggles_owner_every_cqe) {
  test_cq cq(0);
  for (uint64_t p = 0; p < 9; ++p) {
    SCOPED_TRACE(::testing::Message() << "CQE #" << p);
    completion c{};
    ASSERT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::again) << dump_slot(cq, p);
    nic_cqe f;
    f.wqe_counter = static_cast<uint16_t>(7 * p);
    nic_write_cqe(cq.ring.data(), 0, p, f);
    EXPECT_EQ(cq.ring.data()[63] & 1, p & 1);
    ASSERT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::ok) << dump_slot(cq, p);
    EXPECT_EQ(c.wqe_counter, 7 * p);
    EXPECT_EQ(set_ci_word(cq), p + 1);
  }
}

// RESP CQE fields (spec 4, 5.1): byte count, immediate as raw wire bytes, remote QPN,
// solicited flag.
TEST(cq_poll, responder_cqe_fields_are_decoded) {
  test_cq cq(2);
  nic_cqe f;
  f.opcode = 3;  // RESP_SEND_IMM
  f.wqe_counter = 0xbeef;
  f.byte_cnt = 0x12345;
  f.src_qpn = 0x456789;
  f.qpn = 0xabc;
  f.imm[0] = 0xca;
  f.imm[1] = 0xfe;
  f.imm[2] = 0xba;
  f.imm[3] = 0xbe;
  f.se = true;
  nic_write_cqe(cq.ring.data(), 2, 0, f);
  completion c{};
  ASSERT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::ok);
  EXPECT_EQ(c.opcode, gdaki::prm::cqe_opcode::resp_send_imm);
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.wqe_counter, 0xbeef);
  EXPECT_EQ(c.byte_cnt, 0x12345u);
  EXPECT_EQ(c.src_qpn, 0x456789u);
  EXPECT_EQ(c.qpn, 0xabcu);
  EXPECT_TRUE(c.solicited);
  uint8_t imm[4];
  std::memcpy(imm, &c.imm_raw, 4);
  EXPECT_EQ(imm[0], 0xca);
  EXPECT_EQ(imm[1], 0xfe);
  EXPECT_EQ(imm[2], 0xba);
  EXPECT_EQ(imm[3], 0xbe);
}

TEST(cq_poll, error_cqe_fields_are_decoded) {
  test_cq cq(2);
  nic_cqe f;
  f.opcode = 13;  // REQ_ERR
  f.wqe_counter = 0x0042;
  f.wqe_opcode = 0x10;
  f.syndrome = 0x13;
  f.vendor_syndrome = 0x88;
  f.qpn = 0x123456;
  nic_write_cqe(cq.ring.data(), 2, 0, f);
  completion c{};
  ASSERT_EQ(gdaki::dev::cq_poll_one(cq.handle, &c), status::ok);
  EXPECT_EQ(c.opcode, gdaki::prm::cqe_opcode::req_err);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.syndrome, gdaki::prm::syndrome::remote_access);
  EXPECT_EQ(c.vendor_syndrome, 0x88);
  EXPECT_EQ(c.wqe_opcode, 0x10);
  EXPECT_EQ(c.qpn, 0x123456u);
  EXPECT_EQ(c.wqe_counter, 0x0042);
}

}  // namespace

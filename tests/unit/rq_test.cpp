// Receive queue (gdaki/device/sq.hpp rq_post / rq_poll) against spec section 4: receive
// WQEs are lists of data segments ended by the {0, BE 0x100, 0} terminator when shorter
// than the stride, the DBR rcv word is BE(posted & 0xffff), and a full RQ says again.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gdaki/device/sq.hpp"
#include "gdaki/prm/decode.hpp"
#include "unit/unit_support.hpp"

namespace {

using bytes = std::vector<uint8_t>;
using gdaki::status;
using gdaki::dev::completion;
using gdaki::dev::sge;
using gdaki_test::nic_cqe;
using gdaki_test::test_qp;

// Receive WQE j of the default test RQ (4 WQEs, stride 64).
bytes rq_wqe(const test_qp& qp, uint32_t j) {
  const uint8_t* p = qp.rq.data() + (j & 3) * 64;
  return bytes(p, p + 64);
}
uint32_t dbr_rcv(const test_qp& qp) { return gdaki_test::get_be32(qp.dbrec.data()); }

const sge kSgl[5] = {{0x0000100000002000, 0x100, 0x11}, {0x0000100000003000, 0x200, 0x22},
                     {0x0000100000004000, 0x300, 0x33}, {0x0000100000005000, 0x400, 0x44},
                     {0x0000100000006000, 0x500, 0x55}};

TEST(rq, short_list_is_followed_by_invalid_lkey_terminator) {
  test_qp qp(3, 3);
  ASSERT_EQ(gdaki::dev::rq_post(qp.handle, kSgl, 2), status::ok);
  const bytes want = {
      0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x20, 0x00,
      0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x22, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x30, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // terminator
      0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc,  // untouched
  };
  EXPECT_EQ(rq_wqe(qp, 0), want) << gdaki::prm::hex_dump(qp.rq.data(), 64);
  EXPECT_EQ(dbr_rcv(qp), 1u);
  EXPECT_EQ(qp.dbrec.data()[3], 0x01) << "DBR rcv is big-endian";
}

TEST(rq, full_list_has_no_terminator) {
  test_qp qp(3, 3);
  ASSERT_EQ(gdaki::dev::rq_post(qp.handle, kSgl, 4), status::ok);
  const bytes want = {
      0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x20, 0x00,
      0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x22, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x30, 0x00,
      0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x40, 0x00,
      0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x44, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x50, 0x00,
  };
  EXPECT_EQ(rq_wqe(qp, 0), want) << gdaki::prm::hex_dump(qp.rq.data(), 64);
  EXPECT_EQ(rq_wqe(qp, 1), bytes(64, 0xcc)) << "the next receive WQE must be untouched";
}

TEST(rq, empty_list_is_a_zero_capacity_terminator) {
  test_qp qp(3, 3);
  ASSERT_EQ(gdaki::dev::rq_post(qp.handle, nullptr, 0), status::ok);
  bytes want(64, 0xcc);
  for (int i = 0; i < 16; ++i) want[i] = 0;
  want[6] = 0x01;  // lkey BE 0x00000100
  EXPECT_EQ(rq_wqe(qp, 0), want);
}

TEST(rq, more_entries_than_the_stride_holds_is_invalid) {
  test_qp qp(3, 3);
  EXPECT_EQ(gdaki::dev::rq_post(qp.handle, kSgl, 5), status::invalid);
  EXPECT_EQ(qp.handle.rq_reserved, 0u);
  EXPECT_EQ(dbr_rcv(qp), 0u);
  EXPECT_EQ(rq_wqe(qp, 0), bytes(64, 0xcc));
}

TEST(rq, full_rq_returns_again_until_a_receive_completes) {
  test_qp qp(3, 3);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(gdaki::dev::rq_post(qp.handle, &kSgl[i], 1), status::ok);
  EXPECT_EQ(dbr_rcv(qp), 4u);
  EXPECT_EQ(gdaki::dev::rq_post(qp.handle, &kSgl[4], 1), status::again);
  EXPECT_EQ(gdaki::dev::rq_post(qp.handle, &kSgl[4], 1), status::again) << "still full";
  EXPECT_EQ(dbr_rcv(qp), 4u);

  completion c{};
  EXPECT_EQ(gdaki::dev::rq_poll(qp.handle, &c), status::again);
  nic_cqe f;
  f.opcode = 2;  // RESP_SEND
  f.wqe_counter = 0;
  f.byte_cnt = 77;
  f.src_qpn = 0x321;
  gdaki_test::nic_write_cqe(qp.recv_cq.ring.data(), qp.recv_cq.handle.log_cqe_cnt, 0, f);
  ASSERT_EQ(gdaki::dev::rq_poll(qp.handle, &c), status::ok);
  EXPECT_EQ(c.opcode, gdaki::prm::cqe_opcode::resp_send);
  EXPECT_EQ(c.byte_cnt, 77u);
  EXPECT_EQ(c.src_qpn, 0x321u);
  EXPECT_EQ(c.wqe_counter, 0);
  EXPECT_EQ(qp.handle.rq_completed, 1u);

  // One slot free again: the fifth WQE lands in slot 0.
  ASSERT_EQ(gdaki::dev::rq_post(qp.handle, &kSgl[4], 1), status::ok);
  EXPECT_EQ(dbr_rcv(qp), 5u);
  const bytes want_head = {0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x55,
                           0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x60, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  const bytes got = rq_wqe(qp, 4);
  EXPECT_EQ(bytes(got.begin(), got.begin() + 32), want_head);
  EXPECT_EQ(gdaki::dev::rq_post(qp.handle, &kSgl[0], 1), status::again);
}

// DBR rcv carries the low 16 bits of the posted count; receive CQEs name RQ indexes with
// 16 bits and rq_poll widens them across the wrap.
TEST(rq, dbr_and_completions_wrap_at_16_bits) {
  test_qp qp(3, 3);
  auto& h = qp.handle;
  h.rq_reserved = h.rq_ready = h.rq_completed = 0xfffe;
  for (uint32_t i = 0; i < 3; ++i) ASSERT_EQ(gdaki::dev::rq_post(h, &kSgl[i], 1), status::ok);
  const uint8_t* d = qp.dbrec.data();
  EXPECT_EQ(d[0], 0x00);
  EXPECT_EQ(d[1], 0x00);
  EXPECT_EQ(d[2], 0x00);
  EXPECT_EQ(d[3], 0x01);  // 0x10001 & 0xffff
  const uint16_t counters[3] = {0xfffe, 0xffff, 0x0000};
  for (uint32_t i = 0; i < 3; ++i) {
    nic_cqe f;
    f.opcode = 2;
    f.wqe_counter = counters[i];
    gdaki_test::nic_write_cqe(qp.recv_cq.ring.data(), qp.recv_cq.handle.log_cqe_cnt, i, f);
    completion c{};
    ASSERT_EQ(gdaki::dev::rq_poll(h, &c), status::ok);
    EXPECT_EQ(h.rq_completed, 0xffffu + i);
  }
}

}  // namespace

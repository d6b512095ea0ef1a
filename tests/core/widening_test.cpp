// Hazard 4 of the posting core: a send CQE carries the 16-bit index of the WQE it
// completes, and the poller widens it to a free-running WQEBB count against a counter that
// must already cover every WQE the NIC can have run.
//
// How it failed before the fix: the poller widened against sq_rung, which the submitter
// stores only AFTER the doorbell record. A submitter descheduled between the two leaves
// rung behind a batch the NIC may already execute; the CQE of the batch's second WQE then
// widened to 65,536 WQEBBs earlier (as a huge unsigned count), and sq_completed jumped to
// ~2^64: every ticket of the QP settled as complete while nothing had run
// (core_widening.a_cqe_past_sq_rung_...: sq_completed read 18446744073709486083, not 3).
#include <gtest/gtest.h>

#include "gdaki/device/sq.hpp"
#include "unit/unit_support.hpp"

namespace {

using gdaki::status;
using gdaki_test::nic_cqe;
using gdaki_test::nic_write_cqe;
using gdaki_test::test_qp;
namespace dev = gdaki::dev;

// The state of a QP whose submitter stored the doorbell record for `ready` WQEBBs and was
// descheduled before its store of sq_rung (`rung`): what a NIC and a poller can see.
void publish_without_rung(test_qp& q, uint64_t rung, uint64_t ready) {
  for (uint64_t i = rung; i < ready; ++i) dev::prepare_nop(q.handle, i, 0);
  q.handle.sq_reserved = ready;
  q.handle.sq_ready = ready;
  q.handle.sq_rung = rung;
  q.handle.sq_completed = rung;
}

TEST(core_widening, a_cqe_past_sq_rung_settles_exactly_its_own_wqes) {
  test_qp q(6, 6);
  publish_without_rung(q, 0, 3);
  // The NIC ran all three NOPs and reports the last one (first WQEBB 2).
  nic_write_cqe(q.send_cq.ring.data(), 6, 0, nic_cqe{.opcode = 0, .wqe_counter = 2, .wqe_opcode = 0});
  dev::completion c{};
  ASSERT_EQ(dev::sq_poll(q.handle, &c), status::ok);
  EXPECT_EQ(q.handle.sq_completed, 3u) << "the CQE names the WQE at WQEBB 2, which ends at 3";
  EXPECT_EQ(dev::sq_test(q.handle, 3), status::ok);
  EXPECT_EQ(dev::sq_test(q.handle, 4), status::again) << "nothing past the batch is complete";
}

TEST(core_widening, the_same_across_a_16_bit_wrap_of_the_wqe_index) {
  // Free-running counters just below 2^16 * k: the CQE's 16-bit index has wrapped past
  // the rung value's low bits.
  test_qp q(6, 6);
  const uint64_t rung = 3 * 65536 - 2;
  publish_without_rung(q, rung, rung + 5);
  q.send_cq.start_at(0);
  const uint64_t last = rung + 4;  // the fifth NOP: index 0x0002 after the wrap
  nic_write_cqe(q.send_cq.ring.data(), 6, 0,
                nic_cqe{.opcode = 0, .wqe_counter = static_cast<uint16_t>(last), .wqe_opcode = 0});
  dev::completion c{};
  ASSERT_EQ(dev::sq_poll(q.handle, &c), status::ok);
  EXPECT_EQ(q.handle.sq_completed, rung + 5);
  EXPECT_EQ(dev::sq_test(q.handle, rung + 6), status::again);
}

}  // namespace

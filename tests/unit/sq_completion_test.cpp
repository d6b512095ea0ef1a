// Send-queue completion tracking (gdaki/device/sq.hpp, ring.hpp): the 16-bit wqe_counter
// wrap, tickets and sq_wait across it, unsignalled WQEs completed by a later CQE, error
// CQEs latching the first failure, timeouts and argument checks. The NIC side is the
// hand-written test NIC of unit_support.hpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "gdaki/device/ring.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/device/sq.hpp"
#include "gdaki/prm/decode.hpp"
#include "unit/unit_support.hpp"

namespace {

using gdaki::status;
using gdaki::dev::completion;
using gdaki::dev::ring_before;
using gdaki::dev::sge;
using gdaki::dev::widen16;
using gdaki_test::nic_cqe;
using gdaki_test::test_nic;
using gdaki_test::test_qp;
namespace flags = gdaki::prm::ctrl_flags;

constexpr uint64_t five_s = 5'000'000'000ull;

void run_nic(void* ctx) { static_cast<test_nic*>(ctx)->run(); }

// DBR snd as the NIC reads it (BE32 at offset 4).
uint32_t dbr_snd(const test_qp& qp) { return gdaki_test::get_be32(qp.dbrec.data() + 4); }

TEST(ring_counters, widen16_rebuilds_full_counter_across_wrap) {
  EXPECT_EQ(widen16(0x10002, 0xfffe), 0xfffeu);
  EXPECT_EQ(widen16(0x10002, 0x0001), 0x10001u);
  EXPECT_EQ(widen16(0x10002, 0x0002), 0x10002u);
  EXPECT_EQ(widen16(0x10000, 0x0000), 0x10000u);
  EXPECT_EQ(widen16(0x10000, 0xffff), 0xffffu);
  EXPECT_EQ(widen16(0x5ffff, 0x0001), 0x50001u);
  EXPECT_EQ(widen16(0x123456789, 0x6789), 0x123456789u);
  EXPECT_EQ(widen16(0x123456789, 0x678a), 0x12345678au - 0x10000u);
}

TEST(ring_counters, ring_before_16_is_wrap_safe) {
  EXPECT_TRUE(ring_before<16>(0xffff, 0x10000));
  EXPECT_FALSE(ring_before<16>(0x10000, 0xffff));
  EXPECT_TRUE(ring_before<16>(0xfff0, 0x0005));  // 16-bit values, 0x15 apart across the wrap
  EXPECT_FALSE(ring_before<16>(0x0005, 0xfff0));
  EXPECT_FALSE(ring_before<16>(5, 5));
  EXPECT_FALSE(ring_before<16>(0x15, 0x10015));  // equal in 16 bits
  EXPECT_TRUE(ring_before<16>(0, 0x7fff));
  EXPECT_FALSE(ring_before<16>(0, 0x8001));  // more than half the range: reads as after
  EXPECT_TRUE(ring_before<24>(0xfffffe, 0x1000001));
  EXPECT_TRUE(ring_before<64>(~uint64_t{0}, 0));
  EXPECT_FALSE(ring_before<64>(0, ~uint64_t{0}));
  EXPECT_EQ(gdaki::dev::wrap16_distance(0x10003, 0xfffe), 5);
}

// Drives more than 65536 WQEBBs through a 64-WQEBB SQ with 1- and 2-WQEBB WQEs, every third
// one signalled. The NIC runs on the ringing thread (host doorbell hook) and names each
// completed WQE by wqe_counter = first WQEBB & 0xffff. Tickets, sq_completed and sq_wait
// must stay exact across the 16-bit wrap, including a WQE that straddles it.
TEST(sq_completion, tickets_and_sq_wait_survive_wqe_counter_wrap) {
  test_qp qp(6, 6);
  test_nic nic = gdaki_test::make_nic(qp);
  qp.handle.host_doorbell_hook = run_nic;
  qp.handle.host_hook_ctx = &nic;
  auto& h = qp.handle;

  const uint8_t payload[44] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                               23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44};
  sge sgl[5];
  for (uint32_t i = 0; i < 5; ++i) sgl[i] = sge{0x1000u * (i + 1), 64, 7};

  uint64_t pc = 0, last_signalled = 0, straddled = 0;
  for (uint64_t n = 0; pc < 70000; ++n) {
    uint32_t kind = static_cast<uint32_t>(n % 5);
    if (pc == 0xffff || pc % 64 == 63) kind = 3;  // a 2-WQEBB WQE across the 16-bit wrap / ring end
    const uint32_t nbb = kind == 2 || kind == 3 ? 2u : 1u;
    const bool signalled = n % 3 == 0 || pc == 0xffff;
    const uint8_t f = signalled ? flags::cq_update : flags::ce_error_only;
    uint64_t start = 0;
    ASSERT_EQ(gdaki::dev::sq_acquire(h, nbb, &start, five_s), status::ok) << "pc " << pc;
    ASSERT_EQ(start, pc);
    uint32_t built = 0;
    switch (kind) {
      case 0: built = gdaki::dev::prepare_nop(h, start, f); break;
      case 1: built = gdaki::dev::prepare_write_inline(h, start, 0x9000, 3, payload, 20, f); break;
      case 2: built = gdaki::dev::prepare_write_inline(h, start, 0x9000, 3, payload, 44, f); break;
      case 3: built = gdaki::dev::prepare_write(h, start, 0x9000, 3, sgl, 5, f); break;
      default: built = gdaki::dev::prepare_send(h, start, sgl, 1, f); break;
    }
    ASSERT_EQ(built, nbb);
    if (pc == 0xffff) straddled = n;

    // Every ~thousandth WQE, and around the wrap, the NIC runs late so the waiting side
    // is seen too.
    const bool late_nic = n % 997 == 0 || (pc >= 0xfff0 && pc <= 0x10010);
    if (late_nic) h.host_doorbell_hook = nullptr;
    const uint64_t ticket = gdaki::dev::sq_commit(h, start, nbb);
    ASSERT_EQ(ticket, pc + nbb);
    ASSERT_EQ(dbr_snd(qp), ticket & 0xffff) << "DBR snd must carry pc & 0xffff";
    if (late_nic) {
      EXPECT_EQ(gdaki::dev::sq_test(h, ticket), status::again) << "pc " << pc;
      nic.run();
      h.host_doorbell_hook = run_nic;
    }
    ASSERT_TRUE(nic.error.empty()) << nic.error << " at pc " << pc << "\n"
                                   << gdaki::prm::decode_wqe(qp.sq.data(), 64, static_cast<uint32_t>(pc % 64));
    ASSERT_EQ(nic.sq_ci, ticket);

    if (signalled) {
      if (late_nic) {
        // Look at the CQE itself: it names the WQE's first WQEBB, 16 bits wide.
        completion c{};
        ASSERT_EQ(gdaki::dev::sq_poll(h, &c), status::ok);
        EXPECT_EQ(c.wqe_counter, static_cast<uint16_t>(start));
        EXPECT_TRUE(c.ok());
      }
      ASSERT_EQ(gdaki::dev::sq_wait(h, ticket, five_s), status::ok) << "pc " << pc;
      ASSERT_EQ(h.sq_completed, ticket) << "pc " << pc;
      // Earlier tickets (unsignalled ones included) are complete too.
      EXPECT_EQ(gdaki::dev::sq_test(h, last_signalled), status::ok);
      EXPECT_EQ(gdaki::dev::sq_test(h, ticket - nbb), status::ok);
      last_signalled = ticket;
    } else {
      // Unsignalled: nothing names it yet, so its ticket is still pending.
      EXPECT_EQ(gdaki::dev::sq_test(h, ticket), status::again) << "pc " << pc;
      EXPECT_EQ(h.sq_completed, last_signalled);
    }
    pc = ticket;
  }
  EXPECT_GT(pc, 65536u);
  EXPECT_NE(straddled, 0u) << "a WQE must have started at WQEBB 0xffff";
  EXPECT_EQ(gdaki::dev::err_index_of(h.err_state), gdaki::dev::no_error_index);
  EXPECT_EQ(h.send_cq->ci, nic.cq_pi);
}

// sq_test polls only as far as its ticket: with two signalled WQEs completed, testing the
// first consumes its CQE and leaves the second's in the CQ (it used to drain the CQ, one
// more look and a call into the NIC's poll hook per test). The next test takes it.
TEST(sq_completion, sq_test_stops_polling_once_its_ticket_is_settled) {
  test_qp qp(6, 6);
  test_nic nic = gdaki_test::make_nic(qp);
  auto& h = qp.handle;
  uint64_t a = 0, b = 0;
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 1, &a, five_s), status::ok);
  gdaki::dev::prepare_nop(h, a, flags::cq_update);
  const uint64_t ta = gdaki::dev::sq_commit(h, a, 1);
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 1, &b, five_s), status::ok);
  gdaki::dev::prepare_nop(h, b, flags::cq_update);
  const uint64_t tb = gdaki::dev::sq_commit(h, b, 1);
  nic.run();
  ASSERT_TRUE(nic.error.empty()) << nic.error;
  ASSERT_EQ(nic.cq_pi, 2u);
  EXPECT_EQ(gdaki::dev::sq_test(h, ta), status::ok);
  EXPECT_EQ(h.sq_completed, ta) << "the second CQE was consumed too";
  EXPECT_EQ(h.send_cq->ci, 1u);
  EXPECT_EQ(gdaki::dev::sq_test(h, tb), status::ok);
  EXPECT_EQ(h.sq_completed, tb);
  EXPECT_EQ(h.send_cq->ci, 2u);
}

// Spec 5.7 / 6.6: the error CQE names the failing WQE; WQEs before it completed, it and
// every later one fail. err_state latches the first failure only (index and syndrome together).
TEST(sq_errors, error_cqe_fails_tickets_at_and_after_the_failing_wqe) {
  test_qp qp(3, 3);
  auto& h = qp.handle;
  test_nic nic = gdaki_test::make_nic(qp);
  sge sgl[5];
  for (uint32_t i = 0; i < 5; ++i) sgl[i] = sge{0x1000u * (i + 1), 64, 7};
  const uint8_t payload[12] = {};

  uint64_t s0, s1, s2, s3;
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 1, &s0), status::ok);
  gdaki::dev::prepare_nop(h, s0, flags::cq_update);
  const uint64_t t0 = gdaki::dev::sq_commit(h, s0, 1);
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 2, &s1), status::ok);
  gdaki::dev::prepare_write(h, s1, 0x8000, 9, sgl, 5, flags::ce_error_only);  // unsignalled
  const uint64_t t1 = gdaki::dev::sq_commit(h, s1, 2);
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 1, &s2), status::ok);
  gdaki::dev::prepare_write_inline(h, s2, 0x8000, 9, payload, 12, flags::cq_update);  // fails
  const uint64_t t2 = gdaki::dev::sq_commit(h, s2, 1);
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 1, &s3), status::ok);
  gdaki::dev::prepare_nop(h, s3, flags::cq_update);
  const uint64_t t3 = gdaki::dev::sq_commit(h, s3, 1);
  ASSERT_EQ(s2, 3u);
  ASSERT_EQ(t3, 5u);

  // The NIC: W0 succeeds (REQ), W1 succeeds silently, W2 fails with REMOTE_ACCESS_ERR.
  gdaki_test::nic_wqe_view v;
  ASSERT_TRUE(nic.read_wqe(nic.pending(), &v));
  nic.complete(v);
  ASSERT_TRUE(nic.read_wqe(nic.pending(), &v));
  nic.complete(v);
  ASSERT_TRUE(nic.read_wqe(nic.pending(), &v));
  ASSERT_EQ(v.wqe_index, 3);
  nic_cqe e;
  e.opcode = 13;  // REQ_ERR
  e.wqe_counter = v.wqe_index;
  e.wqe_opcode = v.opcode;
  e.syndrome = 0x13;
  e.vendor_syndrome = 0x88;
  gdaki_test::nic_write_cqe(nic.cq_ring, nic.log_cq, nic.cq_pi++, e);
  nic.sq_ci += 1;

  completion c{};
  ASSERT_EQ(gdaki::dev::sq_poll(h, &c), status::ok);
  EXPECT_EQ(c.opcode, gdaki::prm::cqe_opcode::req);
  EXPECT_EQ(c.wqe_counter, 0);
  ASSERT_EQ(gdaki::dev::sq_poll(h, &c), status::ok);
  EXPECT_EQ(c.opcode, gdaki::prm::cqe_opcode::req_err);
  EXPECT_EQ(c.syndrome, gdaki::prm::syndrome::remote_access) << gdaki::prm::to_string(c.syndrome);
  EXPECT_EQ(c.wqe_counter, 3);
  EXPECT_EQ(c.wqe_opcode, 0x08);

  EXPECT_EQ(gdaki::dev::err_index_of(h.err_state), 3u);
  EXPECT_EQ(static_cast<uint32_t>(gdaki::dev::err_syndrome_of(h.err_state)), 0x13u);
  EXPECT_EQ(h.err_vendor_syndrome, 0x88u);
  EXPECT_EQ(h.sq_completed, 4u);
  EXPECT_EQ(gdaki::dev::sq_wait(h, t0, five_s), status::ok);
  EXPECT_EQ(gdaki::dev::sq_wait(h, t1, five_s), status::ok);
  EXPECT_EQ(gdaki::dev::sq_wait(h, t2, five_s), status::io_error);
  // W3 is not flushed yet, but a ticket behind the failure is already settled as failed.
  EXPECT_EQ(gdaki::dev::sq_test(h, t3), status::io_error);
  EXPECT_EQ(gdaki::dev::sq_wait(h, t3, five_s), status::io_error);

  // The flush CQE for W3 (WR_FLUSH_ERR) must not replace the first failure.
  ASSERT_TRUE(nic.read_wqe(nic.pending(), &v));
  e.wqe_counter = v.wqe_index;
  e.wqe_opcode = v.opcode;
  e.syndrome = 0x05;
  e.vendor_syndrome = 0;
  gdaki_test::nic_write_cqe(nic.cq_ring, nic.log_cq, nic.cq_pi++, e);
  EXPECT_EQ(gdaki::dev::sq_progress(h), 1u);
  EXPECT_EQ(h.sq_completed, 5u);
  EXPECT_EQ(gdaki::dev::err_index_of(h.err_state), 3u);
  EXPECT_EQ(static_cast<uint32_t>(gdaki::dev::err_syndrome_of(h.err_state)), 0x13u);
  EXPECT_EQ(h.err_vendor_syndrome, 0x88u);
  EXPECT_EQ(gdaki::dev::sq_wait(h, t3, five_s), status::io_error);
  EXPECT_EQ(gdaki::dev::sq_wait(h, t1, five_s), status::ok);
}

TEST(sq_errors, sq_wait_times_out_when_nothing_completes) {
  test_qp qp(3, 3);
  uint64_t s;
  ASSERT_EQ(gdaki::dev::sq_acquire(qp.handle, 1, &s), status::ok);
  gdaki::dev::prepare_nop(qp.handle, s, flags::cq_update);
  const uint64_t t = gdaki::dev::sq_commit(qp.handle, s, 1);
  EXPECT_EQ(gdaki::dev::sq_wait(qp.handle, t, 2'000'000), status::timeout);
  // A zero bound tries once and times out (the bound counts from the first try that
  // found nothing: poll_until reads no clock before it).
  EXPECT_EQ(gdaki::dev::sq_wait(qp.handle, t, 0), status::timeout);
  EXPECT_EQ(gdaki::dev::sq_test(qp.handle, t), status::again);
}

// Flow control: with a full ring and no completion, sq_acquire times out instead of
// handing out a slot the NIC may still be reading.
TEST(sq_errors, sq_acquire_times_out_on_full_ring) {
  test_qp qp(3, 3);
  uint64_t s;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(gdaki::dev::sq_acquire(qp.handle, 1, &s, 1'000'000), status::ok);
    gdaki::dev::prepare_nop(qp.handle, s, flags::ce_error_only);
    gdaki::dev::sq_commit(qp.handle, s, 1);
  }
  EXPECT_EQ(gdaki::dev::sq_acquire(qp.handle, 1, &s, 2'000'000), status::timeout);
}

TEST(sq_errors, sq_acquire_rejects_bad_sizes) {
  test_qp qp(3, 3);
  qp.handle.max_send_wqebbs = 4;
  uint64_t s = 1234;
  EXPECT_EQ(gdaki::dev::sq_acquire(qp.handle, 0, &s), status::invalid);
  EXPECT_EQ(gdaki::dev::sq_acquire(qp.handle, 5, &s), status::invalid);
  EXPECT_EQ(qp.handle.sq_reserved, 0u) << "a rejected acquire must not reserve";
}

// The latch packs the failing WQE and its syndrome into one word, so they are claimed
// together; a later failure that a concurrent poller latched first gives way to an
// earlier one, syndrome included.
TEST(sq_errors, err_state_packs_index_and_syndrome_and_none_reads_as_no_error) {
  using gdaki::prm::syndrome;
  const uint64_t st = gdaki::dev::err_pack(0x123456789aull, syndrome::remote_access);
  EXPECT_EQ(gdaki::dev::err_index_of(st), 0x123456789aull);
  EXPECT_EQ(gdaki::dev::err_syndrome_of(st), syndrome::remote_access);
  EXPECT_EQ(gdaki::dev::err_index_of(gdaki::dev::no_error_state), gdaki::dev::no_error_index);
  EXPECT_EQ(gdaki::dev::err_syndrome_of(gdaki::dev::no_error_state), syndrome::none);
  // Index 0 with syndrome none is a real latch (not "no error").
  EXPECT_EQ(gdaki::dev::err_index_of(gdaki::dev::err_pack(0, syndrome::none)), 0u);
}

TEST(sq_errors, an_earlier_failure_replaces_a_later_one_latched_first_with_its_own_syndrome) {
  test_qp qp(3, 3);
  auto& h = qp.handle;
  test_nic nic = gdaki_test::make_nic(qp);
  uint64_t s0;
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 1, &s0), status::ok);
  gdaki::dev::prepare_nop(h, s0, flags::cq_update);
  gdaki::dev::sq_commit(h, s0, 1);
  // As if another poller had already latched the flush of WQEBB 7.
  h.err_state = gdaki::dev::err_pack(7, gdaki::prm::syndrome::wr_flush);
  gdaki_test::nic_wqe_view v;
  ASSERT_TRUE(nic.read_wqe(nic.pending(), &v));
  nic_cqe e;
  e.opcode = 13;  // REQ_ERR
  e.wqe_counter = v.wqe_index;
  e.wqe_opcode = v.opcode;
  e.syndrome = 0x13;
  gdaki_test::nic_write_cqe(nic.cq_ring, nic.log_cq, nic.cq_pi++, e);
  completion c{};
  ASSERT_EQ(gdaki::dev::sq_poll(h, &c), status::ok);
  EXPECT_EQ(gdaki::dev::err_index_of(h.err_state), 0u);
  EXPECT_EQ(gdaki::dev::err_syndrome_of(h.err_state), gdaki::prm::syndrome::remote_access);
  const gdaki::dev::op_error le = gdaki::dev::last_error(h);
  EXPECT_EQ(le.wqe_index, 0u);
  EXPECT_EQ(le.syndrome, gdaki::prm::syndrome::remote_access);
}

}  // namespace

// Publishing posted WQEs (gdaki/device/sq.hpp sq_submit): the DBR snd word, the 8-byte
// UAR doorbell word of spec 3.2 (wqe_index = new pc, opcode 0, DS 0, QPN), BlueFlame
// copies, CPU-assisted mode and the host doorbell hook. Expected bytes are hand-written.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gdaki/device/sq.hpp"
#include "unit/unit_support.hpp"

namespace {

using bytes = std::vector<uint8_t>;
using gdaki::status;
using gdaki_test::test_qp;
namespace flags = gdaki::prm::ctrl_flags;

bytes uar_bytes(const test_qp& qp) { return bytes(qp.uar.data(), qp.uar.data() + 8); }
bytes dbr_snd_bytes(const test_qp& qp) { return bytes(qp.dbrec.data() + 4, qp.dbrec.data() + 8); }

uint64_t post_nop(test_qp& qp) {
  uint64_t s = 0;
  EXPECT_EQ(gdaki::dev::sq_acquire(qp.handle, 1, &s), status::ok);
  gdaki::dev::prepare_nop(qp.handle, s, flags::cq_update);
  return gdaki::dev::sq_commit(qp.handle, s, 1);
}

TEST(sq_doorbell, doorbell_word_carries_new_pc_and_qpn_with_opcode_and_ds_zero) {
  test_qp qp(3, 3);
  post_nop(qp);
  EXPECT_EQ(dbr_snd_bytes(qp), (bytes{0x00, 0x00, 0x00, 0x01}));
  EXPECT_EQ(uar_bytes(qp), (bytes{0x00, 0x00, 0x01, 0x00, 0x00, 0x0a, 0xbc, 0x00}));
  // A later pc with a non-zero high byte: 0x1234.
  auto& h = qp.handle;
  h.sq_reserved = h.sq_ready = h.sq_rung = h.sq_completed = 0x1233;
  post_nop(qp);
  EXPECT_EQ(dbr_snd_bytes(qp), (bytes{0x00, 0x00, 0x12, 0x34}));
  EXPECT_EQ(uar_bytes(qp), (bytes{0x00, 0x12, 0x34, 0x00, 0x00, 0x0a, 0xbc, 0x00}));
}

TEST(sq_doorbell, submit_without_new_wqes_rings_nothing) {
  test_qp qp(3, 3);
  post_nop(qp);
  std::memset(qp.uar.data(), 0xee, 8);
  gdaki::dev::sq_submit(qp.handle);
  EXPECT_EQ(uar_bytes(qp), bytes(8, 0xee));
  EXPECT_EQ(dbr_snd_bytes(qp), (bytes{0x00, 0x00, 0x00, 0x01}));
}

// Ready advances in reservation order: a WQE marked ready before an earlier one is not
// exposed until the earlier one is marked too.
TEST(sq_doorbell, dbr_covers_only_wqes_marked_ready_in_order) {
  test_qp qp(3, 3);
  auto& h = qp.handle;
  uint64_t a = 0, b = 0;
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 1, &a), status::ok);
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 2, &b), status::ok);
  gdaki::dev::prepare_nop(h, a, flags::cq_update);
  gdaki::dev::sq_mark_ready(h, a, 1);
  gdaki::dev::sq_submit(h);
  EXPECT_EQ(dbr_snd_bytes(qp), (bytes{0x00, 0x00, 0x00, 0x01}));
  const uint8_t payload[44] = {};
  gdaki::dev::prepare_write_inline(h, b, 0x10, 1, payload, 44, flags::cq_update);
  EXPECT_EQ(gdaki::dev::sq_commit(h, b, 2), 3u);
  EXPECT_EQ(dbr_snd_bytes(qp), (bytes{0x00, 0x00, 0x00, 0x03}));
}

TEST(sq_doorbell, cpu_assisted_mode_updates_dbr_but_not_the_uar) {
  test_qp qp(3, 3);
  qp.handle.db_mode = gdaki::dev::doorbell_mode::cpu_assisted;
  std::memset(qp.uar.data(), 0xee, 8);
  post_nop(qp);
  EXPECT_EQ(dbr_snd_bytes(qp), (bytes{0x00, 0x00, 0x00, 0x01}));
  EXPECT_EQ(uar_bytes(qp), bytes(8, 0xee));
}

// Spec 3.4: one WQE per doorbell is copied whole (64-byte chunks, wrapping at the ring end)
// into the BlueFlame register; the WQE stays in the ring too.
TEST(sq_doorbell, blueflame_copies_a_single_wqe_across_the_ring_end) {
  test_qp qp(3, 3);
  auto& h = qp.handle;
  gdaki_test::aligned_bytes bf(256, 0xee);
  h.db_mode = gdaki::dev::doorbell_mode::blueflame;
  h.bf_reg = bf.data();
  h.bf_size = 256;
  h.sq_reserved = h.sq_ready = h.sq_rung = h.sq_completed = 7;  // next WQE starts at the last slot
  std::memset(qp.uar.data(), 0xee, 8);
  uint64_t s = 0;
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 2, &s), status::ok);
  uint8_t payload[44];
  for (uint32_t i = 0; i < 44; ++i) payload[i] = static_cast<uint8_t>(i);
  gdaki::dev::prepare_write_inline(h, s, 0x10, 1, payload, 44, flags::cq_update);
  gdaki::dev::sq_commit(h, s, 2);
  EXPECT_EQ(bytes(bf.data(), bf.data() + 64), bytes(qp.sq.data() + 7 * 64, qp.sq.data() + 8 * 64));
  EXPECT_EQ(bytes(bf.data() + 64, bf.data() + 128), bytes(qp.sq.data(), qp.sq.data() + 64));
  EXPECT_EQ(bytes(bf.data() + 128, bf.data() + 256), bytes(128, 0xee)) << "only the WQE's WQEBBs are copied";
  EXPECT_EQ(bf.data()[3], 0x08);  // ctrl opcode byte of the copied WQE
  EXPECT_EQ(uar_bytes(qp), bytes(8, 0xee)) << "BlueFlame replaces the 8-byte doorbell";
  EXPECT_EQ(dbr_snd_bytes(qp), (bytes{0x00, 0x00, 0x00, 0x09}));
}

TEST(sq_doorbell, blueflame_falls_back_to_doorbell_for_several_wqes) {
  test_qp qp(3, 3);
  auto& h = qp.handle;
  gdaki_test::aligned_bytes bf(256, 0xee);
  h.db_mode = gdaki::dev::doorbell_mode::blueflame;
  h.bf_reg = bf.data();
  h.bf_size = 256;
  uint64_t a = 0, b = 0;
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 1, &a), status::ok);
  ASSERT_EQ(gdaki::dev::sq_acquire(h, 1, &b), status::ok);
  gdaki::dev::prepare_nop(h, a, flags::cq_update);
  gdaki::dev::prepare_nop(h, b, flags::cq_update);
  gdaki::dev::sq_mark_ready(h, a, 1);
  gdaki::dev::sq_mark_ready(h, b, 1);
  gdaki::dev::sq_submit(h);
  EXPECT_EQ(bytes(bf.data(), bf.data() + 256), bytes(256, 0xee));
  EXPECT_EQ(uar_bytes(qp), (bytes{0x00, 0x00, 0x02, 0x00, 0x00, 0x0a, 0xbc, 0x00}));
}

TEST(sq_doorbell, host_hook_runs_once_per_submit_that_publishes) {
  test_qp qp(3, 3);
  int calls = 0;
  qp.handle.host_doorbell_hook = [](void* ctx) { ++*static_cast<int*>(ctx); };
  qp.handle.host_hook_ctx = &calls;
  post_nop(qp);
  EXPECT_EQ(calls, 1);
  gdaki::dev::sq_submit(qp.handle);  // nothing new
  EXPECT_EQ(calls, 1);
  post_nop(qp);
  EXPECT_EQ(calls, 2);
}

}  // namespace

// The DMA queue (verbs::dma_queue + dev::dma_memcpy) against the soft NIC: each copy's
// effect (exactly its bytes, nothing around them) and its completion (one REQ CQE naming
// the WRITE), copies from many threads at once, and the failures as a ConnectX reports a
// loopback WRITE's: bad or short source -> LOCAL_PROT, bad, short or read-only destination
// -> REMOTE_ACCESS, nothing written, the queue in ERR and later copies flushed; a full
// queue -> timeout with nothing posted.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "dma/dma_kernels.hpp"
#include "gdaki/device/dma.hpp"
#include "gdaki/device/host_grid.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/dma_queue.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "support/patterned_region.hpp"

namespace {

namespace verbs = gdaki::verbs;
namespace prm = gdaki::prm;
namespace dev = gdaki::dev;
using gdaki::status;

constexpr uint64_t bound = 5'000'000'000ull;  // 5 s: never reached when things work

using region = test_support::patterned_region;

struct env {
  verbs::device dev = verbs::device::open("soft0");
  verbs::pd pd{dev};
  verbs::dma_queue q;
  region src, dst;
  explicit env(const verbs::dma_queue_init& init = {}, size_t bytes = 1 << 20,
               uint32_t dst_access = verbs::access::local_write | verbs::access::remote_write)
      : q(dev, pd, init), src(pd, bytes, verbs::access::local_write, 0x11), dst(pd, bytes, dst_access, 0xc3) {}
  dev::qp_handle& h() { return q.handle(); }
  // The CQE at free-running position pos of the queue's send CQ.
  const prm::cqe64& cqe(uint64_t pos) {
    const dev::cq_handle& cq = *h().send_cq;
    return cq.cqes[pos & (dev::cqe_count(cq) - 1)];
  }
};

// The destination equals the source over [off, off + n) and still holds its own seed
// pattern everywhere else.
::testing::AssertionResult copied_exactly(const env& e, uint64_t dst_off, uint64_t src_off, uint64_t n) {
  const region untouched(e.pd, e.dst.bytes, verbs::access::local_write, 0xc3);
  for (uint64_t i = 0; i < e.dst.bytes; ++i) {
    const bool inside = i >= dst_off && i < dst_off + n;
    const uint8_t want = inside ? e.src.data()[src_off + (i - dst_off)] : untouched.data()[i];
    if (e.dst.data()[i] != want) {
      return ::testing::AssertionFailure() << "byte " << i << (inside ? " (copied)" : " (outside the copy)") << " is "
                                           << int(e.dst.data()[i]) << ", want " << int(want);
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(dma_queue, a_copy_places_exactly_its_bytes_and_completes_with_one_write_cqe) {
  env e;
  uint64_t t = 0;
  ASSERT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(100), e.dst.mr.rkey(), e.src.addr(7), e.src.mr.lkey(), 5000, &t),
            status::ok);
  EXPECT_EQ(t, 1u) << "one copy below 1 GiB is one 1-WQEBB RDMA WRITE";
  ASSERT_EQ(dev::dma_wait(e.h(), t, bound), status::ok);
  EXPECT_TRUE(copied_exactly(e, 100, 7, 5000));
  EXPECT_EQ(e.h().send_cq->ci, 1u) << "one signalled copy, one CQE";
  const prm::cqe64& c = e.cqe(0);
  EXPECT_EQ(prm::cqe_opcode_of(c.op_own), prm::cqe_opcode::req);
  EXPECT_EQ(prm::from_be(c.sop_drop_qpn), (uint32_t{0x08} << 24) | e.q.qpn()) << "REQ CQE of an RDMA WRITE";
  EXPECT_EQ(prm::from_be(c.byte_cnt), 5000u);
  EXPECT_EQ(prm::from_be(c.wqe_counter), 0u);
  EXPECT_EQ(dev::dma_test(e.h(), t), status::ok) << "a settled ticket stays settled";
}

TEST(dma_queue, copies_of_every_size_land_in_order_and_the_last_ticket_settles_them_all) {
  env e({}, 4 << 20);
  const uint64_t sizes[] = {1, 7, 8, 63, 64, 4095, 4096, 65537, 1 << 20, 3 << 20};
  uint64_t dst_off = 0, src_off = 3, last = 0;
  struct placed { uint64_t dst, src, n; };
  std::vector<placed> done;
  for (uint64_t n : sizes) {
    if (dst_off + n > e.dst.bytes) dst_off = 0;
    ASSERT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(dst_off), e.dst.mr.rkey(), e.src.addr(src_off % 4096),
                              e.src.mr.lkey(), n, &last),
              status::ok)
        << n;
    ASSERT_EQ(dev::dma_wait(e.h(), last, bound), status::ok) << n;
    EXPECT_TRUE(copied_exactly(e, dst_off, src_off % 4096, n)) << n << " bytes";
    // Put the destination back for the next size's exact check.
    const region fresh(e.pd, e.dst.bytes, verbs::access::local_write, 0xc3);
    std::memcpy(e.dst.data(), fresh.data(), e.dst.bytes);
    src_off += 17;
    dst_off += 4096 + 5;
  }
  EXPECT_EQ(e.h().send_cq->ci, std::size(sizes));
  // Unwaited: several copies, then only the last ticket.
  uint64_t t[4];
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(i * 8192), e.dst.mr.rkey(), e.src.addr(i * 100), e.src.mr.lkey(),
                              8000, &t[i]),
              status::ok);
  }
  EXPECT_LT(t[0], t[3]) << "tickets are ordered";
  ASSERT_EQ(dev::dma_wait(e.h(), t[3], bound), status::ok);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(dev::dma_test(e.h(), t[i]), status::ok) << "waiting for the last ticket settles every earlier one";
    EXPECT_EQ(std::memcmp(e.dst.data() + i * 8192, e.src.data() + i * 100, 8000), 0) << i;
  }
}

TEST(dma_queue, a_zero_byte_copy_completes_and_touches_nothing) {
  env e;
  uint64_t t = 0;
  ASSERT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(64), e.dst.mr.rkey(), e.src.addr(), e.src.mr.lkey(), 0, &t), status::ok);
  ASSERT_EQ(dev::dma_wait(e.h(), t, bound), status::ok);
  EXPECT_TRUE(copied_exactly(e, 64, 0, 0));
  EXPECT_EQ(prm::from_be(e.cqe(0).byte_cnt), 0u);
}

TEST(dma_queue, unsignalled_copies_complete_by_quiet_with_one_cqe) {
  env e;
  uint64_t t = 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(i * 1000), e.dst.mr.rkey(), e.src.addr(i * 1000), e.src.mr.lkey(), 1000,
                              &t, dev::op_flags::unsignaled),
              status::ok);
  }
  ASSERT_EQ(dev::dma_quiet(e.h(), bound), status::ok);
  EXPECT_TRUE(copied_exactly(e, 0, 0, 8000));
  EXPECT_EQ(e.h().send_cq->ci, 1u) << "only quiet's NOP asked for a CQE";
  EXPECT_EQ(prm::from_be(e.cqe(0).sop_drop_qpn) >> 24, 0u) << "the CQE is the NOP's";
}

// 2 blocks x 48 threads (a full and a partial warp per block) copy their own 256-byte
// slices through one grid-shared queue, at each scope.
template <typename Scope>
void copies_from_a_grid(uint32_t depth) {
  verbs::dma_queue_init init;
  init.depth = depth;
  env e(init);
  constexpr uint32_t blocks = 2, threads = 48, slice = 256;
  std::vector<uint64_t> log(2 * blocks * threads, ~0ull);
  dma_test::slices_args a{&e.h(), e.dst.addr(), e.src.addr(), e.dst.mr.rkey(), e.src.mr.lkey(), slice, log.data()};
  dev::host::launch(blocks, threads, [&] { dma_test::copy_slices_kernel<Scope>(a); });
  for (uint32_t t = 0; t < blocks * threads; ++t) {
    EXPECT_EQ(static_cast<status>(log[2 * t]), status::ok) << "post of thread " << t;
    EXPECT_EQ(static_cast<status>(log[2 * t + 1]), status::ok) << "wait of thread " << t;
  }
  EXPECT_TRUE(copied_exactly(e, 0, 0, uint64_t{blocks} * threads * slice));
  ASSERT_EQ(dev::dma_quiet(e.h(), bound), status::ok);
  EXPECT_EQ(e.h().sq_completed, e.h().sq_reserved) << "every WQEBB posted came back";
}

TEST(dma_queue, threads_of_a_grid_copy_through_one_shared_queue_at_thread_scope) {
  copies_from_a_grid<dev::scope_thread>(16);  // a ring much smaller than the 96 copies: wraps
}
TEST(dma_queue, threads_of_a_grid_copy_through_one_shared_queue_at_warp_scope) {
  copies_from_a_grid<dev::scope_warp>(64);
}
TEST(dma_queue, threads_of_a_grid_copy_through_one_shared_queue_at_block_scope) {
  copies_from_a_grid<dev::scope_block>(64);
}

// A copy that the NIC refuses: io_error with the syndrome, nothing written, the queue in
// ERR, and a copy posted after it flushed (WR_FLUSH_ERR) without landing either.
void copy_fails(env& e, uint64_t dst, uint32_t dst_key, uint64_t src, uint32_t src_key, uint64_t n,
                prm::syndrome want) {
  uint64_t t = 0;
  ASSERT_EQ(dev::dma_memcpy(e.h(), dst, dst_key, src, src_key, n, &t), status::ok) << "the post itself succeeds";
  EXPECT_EQ(dev::dma_wait(e.h(), t, bound), status::io_error);
  EXPECT_EQ(dev::dma_last_error(e.h()).syndrome, want);
  EXPECT_EQ(dev::dma_last_error(e.h()).wqe_index, 0u);
  const auto& err = reinterpret_cast<const prm::err_cqe&>(e.cqe(0));
  EXPECT_EQ(prm::cqe_opcode_of(err.op_own), prm::cqe_opcode::req_err);
  EXPECT_EQ(err.syndrome, static_cast<uint8_t>(want));
  EXPECT_EQ(prm::from_be(err.s_wqe_opcode_qpn), (uint32_t{0x08} << 24) | e.q.qpn());
  EXPECT_TRUE(copied_exactly(e, 0, 0, 0)) << "a refused copy writes nothing";
  EXPECT_EQ(e.q.queue_pair().state(), verbs::qp_state::err);
  uint64_t t2 = 0;
  ASSERT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(), e.dst.mr.rkey(), e.src.addr(), e.src.mr.lkey(), 64, &t2), status::ok);
  EXPECT_EQ(dev::dma_wait(e.h(), t2, bound), status::io_error);
  const auto& flush = reinterpret_cast<const prm::err_cqe&>(e.cqe(1));
  EXPECT_EQ(flush.syndrome, static_cast<uint8_t>(prm::syndrome::wr_flush));
  EXPECT_EQ(prm::from_be(flush.wqe_counter), 1u);
  EXPECT_TRUE(copied_exactly(e, 0, 0, 0)) << "a flushed copy writes nothing";
}

TEST(dma_queue, a_bad_destination_key_is_remote_access_and_writes_nothing) {
  env e;
  copy_fails(e, e.dst.addr(), e.dst.mr.rkey() + 0x100, e.src.addr(), e.src.mr.lkey(), 256, prm::syndrome::remote_access);
}

TEST(dma_queue, a_bad_source_key_is_local_protection_and_writes_nothing) {
  env e;
  copy_fails(e, e.dst.addr(), e.dst.mr.rkey(), e.src.addr(), e.src.mr.lkey() + 0x100, 256, prm::syndrome::local_prot);
}

TEST(dma_queue, a_copy_running_past_the_destination_region_is_remote_access) {
  env e({}, 8192);
  copy_fails(e, e.dst.addr(4096), e.dst.mr.rkey(), e.src.addr(), e.src.mr.lkey(), 4097, prm::syndrome::remote_access);
}

TEST(dma_queue, a_copy_reading_past_the_source_region_is_local_protection) {
  env e({}, 8192);
  copy_fails(e, e.dst.addr(), e.dst.mr.rkey(), e.src.addr(8191), e.src.mr.lkey(), 2, prm::syndrome::local_prot);
}

TEST(dma_queue, a_destination_registered_without_remote_write_is_remote_access) {
  env e({}, 1 << 20, verbs::access::local_write);
  copy_fails(e, e.dst.addr(), e.dst.mr.rkey(), e.src.addr(), e.src.mr.lkey(), 64, prm::syndrome::remote_access);
}

TEST(dma_queue, keys_of_another_protection_domain_are_refused) {
  env e;
  verbs::pd other(e.dev);
  const region foreign(other, 4096, verbs::access::local_write | verbs::access::remote_write, 0x55);
  copy_fails(e, foreign.addr(), foreign.mr.rkey(), e.src.addr(), e.src.mr.lkey(), 64, prm::syndrome::remote_access);
  EXPECT_EQ(foreign.data()[0], 0x55) << "the other PD's memory is unchanged";
}

TEST(dma_queue, restart_after_a_failure_makes_the_queue_copy_again) {
  env e;
  uint64_t t = 0;
  ASSERT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(), 0xdead00u, e.src.addr(), e.src.mr.lkey(), 64, &t), status::ok);
  ASSERT_EQ(dev::dma_wait(e.h(), t, bound), status::io_error);
  e.q.restart();
  EXPECT_EQ(e.q.queue_pair().state(), verbs::qp_state::rts);
  EXPECT_EQ(dev::dma_last_error(e.h()).syndrome, prm::syndrome::none) << "a fresh handle has no latched error";
  ASSERT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(), e.dst.mr.rkey(), e.src.addr(), e.src.mr.lkey(), 3000, &t), status::ok);
  ASSERT_EQ(dev::dma_wait(e.h(), t, bound), status::ok);
  EXPECT_TRUE(copied_exactly(e, 0, 0, 3000));
}

// A queue whose doorbells nobody rings (exported cpu_assisted with no doorbell service:
// the soft NIC, like a ConnectX, acts only on rung doorbells) never drains, so once its
// ring is full a bounded copy returns timeout and reserves nothing.
TEST(dma_queue, a_full_queue_times_out_and_posts_nothing) {
  verbs::dma_queue_init init;
  init.depth = 8;
  init.export_options.db_mode = dev::doorbell_mode::cpu_assisted;
  env e(init);
  uint64_t t = 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(i * 64), e.dst.mr.rkey(), e.src.addr(), e.src.mr.lkey(), 64, &t,
                              dev::op_flags::none, 1'000'000),
              status::ok)
        << i;
  }
  const uint64_t t0 = gdaki::dev::arch::clock_ns();
  EXPECT_EQ(dev::dma_memcpy(e.h(), e.dst.addr(), e.dst.mr.rkey(), e.src.addr(), e.src.mr.lkey(), 64, &t,
                            dev::op_flags::none, 20'000'000),
            status::timeout);
  EXPECT_GE(gdaki::dev::arch::clock_ns() - t0, 20'000'000u) << "it waited its bound";
  EXPECT_EQ(e.h().sq_reserved, 8u) << "the timed-out copy reserved nothing";
  EXPECT_TRUE(copied_exactly(e, 0, 0, 0)) << "nothing rang, so nothing ran";
  EXPECT_EQ(dev::dma_test(e.h(), 1), status::again);
}

}  // namespace

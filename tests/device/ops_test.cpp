// Each device-API operation, called from one CPU thread against the soft NIC: its remote
// effect, its local result and its exact status.
#include <cstring>

#include "device/device_fixture.hpp"
#include "gdaki/prm/decode.hpp"

using namespace device_test;
using gdaki::status;
namespace d = gdaki::dev;

namespace {

constexpr uint64_t bound = 5'000'000'000ull;  // 5 s: never reached when things work

struct env {
  world w;
  reg_buffer src, res, dst;
  qp_handle* qp = nullptr;   // what the calls post on (a proxy handle in proxy builds)
  qp_handle* nic = nullptr;  // the QP's direct handle: its counters, CQ and WQEs
  explicit env(pair_options o = {}) {
    w.make_pairs(1, o);
    qp = &w.handles[0];
    nic = &w.nic(0);
    src = reg_buffer(w.pda, 1 << 16, verbs::access::local_write);
    res = reg_buffer(w.pda, 4096, verbs::access::local_write);
    dst = reg_buffer(w.pdb, 1 << 16, verbs::access::all);
  }
};

TEST(device_ops, put_places_the_bytes_at_the_peer_and_its_ticket_settles_ok) {
  env e;
  fill(e.src.buf.addr(), 1, 0, 3000);
  uint64_t t = 0;
  ASSERT_EQ(d::put(*e.qp, e.dst.remote(100), e.src.local(), 3000, &t), status::ok);
  if (wqe_tickets) {
    EXPECT_EQ(t, 1u) << "a 3000-byte put is one 1-WQEBB RDMA WRITE";
  }
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(mismatches(e.dst.buf.addr() + 100, 1, 0, 3000), 0u);
  EXPECT_EQ(e.dst.data()[99], 0);
  EXPECT_EQ(e.dst.data()[3100], 0);
  EXPECT_EQ(d::test(*e.qp, t), status::ok) << "a settled ticket stays settled";
  EXPECT_EQ(e.nic->send_cq->ci, 1u) << "one signalled WQE, one CQE";
}

TEST(device_ops, zero_length_put_posts_one_write_and_touches_nothing) {
  env e;
  uint64_t t = 0;
  ASSERT_EQ(d::put(*e.qp, e.dst.remote(), e.src.local(), 0, &t), status::ok);
  EXPECT_EQ(t, 1u) << "one WQEBB, or one descriptor";
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(e.dst.data()[i], 0);
}

TEST(device_ops, p_copies_the_value_into_the_wqe_so_it_may_be_reused_on_return) {
  env e;
  uint8_t v[40];
  for (int i = 0; i < 40; ++i) v[i] = static_cast<uint8_t>(i + 1);
  uint64_t t = 0;
  ASSERT_EQ(d::p(*e.qp, e.dst.remote(8), v, 40, &t), status::ok);
  EXPECT_EQ(t, wqe_tickets ? 2u : 3u) << "40 inline bytes need 2 WQEBBs, or 3 16-byte descriptors";
  std::memset(v, 0xee, sizeof v);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(e.dst.data()[8 + i], i + 1) << i;
  EXPECT_EQ(e.dst.data()[48], 0);
}

TEST(device_ops, p_longer_than_max_inline_is_invalid_and_posts_nothing) {
  env e;
  uint8_t v[128] = {};
  uint64_t t = 77;
  EXPECT_EQ(d::p(*e.qp, e.dst.remote(), v, e.qp->max_inline + 1, &t), status::invalid);
  EXPECT_EQ(e.nic->sq_reserved, 0u);
  EXPECT_EQ(d::p(*e.qp, e.dst.remote(), v, e.qp->max_inline, &t), status::ok);
  EXPECT_EQ(d::wait(*e.qp, t, bound), status::ok);
}

TEST(device_ops, signal_add_adds_to_the_remote_word_and_set_overwrites_it) {
  env e;
  e.dst.words()[0] = 40;
  uint64_t t = 0;
  ASSERT_EQ(d::signal(*e.qp, e.dst.remote(0), d::signal_op::add, 2, &t), status::ok);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(e.dst.words()[0], 42u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(e.qp->scratch_addr), 40u) << "the discarded old value lands in scratch";
  ASSERT_EQ(d::signal(*e.qp, e.dst.remote(0), d::signal_op::set, 0x1122334455667788ull, &t), status::ok);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(e.dst.words()[0], 0x1122334455667788ull);
}

TEST(device_ops, signal_add_without_a_scratch_buffer_is_invalid) {
  env e;
  e.qp->scratch_addr = 0;
  e.qp->scratch_lkey = 0;
  uint64_t t = 0;
  EXPECT_EQ(d::signal(*e.qp, e.dst.remote(0), d::signal_op::add, 1, &t), status::invalid);
  EXPECT_EQ(d::put_signal(*e.qp, e.dst.remote(64), e.src.local(), 8, e.dst.remote(0), d::signal_op::add, 1, &t),
            status::invalid);
  EXPECT_EQ(e.nic->sq_reserved, 0u);
  EXPECT_EQ(d::signal(*e.qp, e.dst.remote(0), d::signal_op::set, 5, &t), status::ok) << "set needs no scratch";
  EXPECT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(e.dst.words()[0], 5u);
}

TEST(device_ops, put_signal_places_data_and_signal_with_one_cqe) {
  env e;
  fill(e.src.buf.addr(), 3, 4, 4096);
  uint64_t t = 0;
  ASSERT_EQ(d::put_signal(*e.qp, e.dst.remote(1024), e.src.local(), 4096, e.dst.remote(0), d::signal_op::add, 3, &t),
            status::ok);
  EXPECT_EQ(t, wqe_tickets ? 2u : 1u) << "one WRITE WQEBB + one signal WQEBB, or one descriptor";
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(mismatches(e.dst.buf.addr() + 1024, 3, 4, 4096), 0u);
  EXPECT_EQ(e.dst.words()[0], 3u);
  EXPECT_EQ(e.nic->send_cq->ci, 1u) << "the data WQE is unsignalled; only the signal completes";
  EXPECT_EQ(e.nic->sq_completed, 2u);
}

TEST(device_ops, get_reads_the_remote_bytes_into_local_memory) {
  env e;
  fill(e.dst.buf.addr() + 512, 9, 9, 2000);
  uint64_t t = 0;
  ASSERT_EQ(d::get(*e.qp, e.res.local(16), e.dst.remote(512), 2000, &t), status::ok);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(mismatches(e.res.buf.addr() + 16, 9, 9, 2000), 0u);
  EXPECT_EQ(e.res.data()[15], 0);
}

TEST(device_ops, atomic_fetch_add_returns_the_old_value_and_adds) {
  env e;
  e.dst.words()[2] = 1000;
  uint64_t t = 0;
  ASSERT_EQ(d::atomic_fetch_add(*e.qp, e.dst.remote(16), 5, e.res.local(0), &t), status::ok);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(e.res.words()[0], 1000u);
  EXPECT_EQ(e.dst.words()[2], 1005u);
  uint64_t old = 0;
  ASSERT_EQ(d::atomic_fetch_add_wait(*e.qp, e.dst.remote(16), ~0ull, e.res.local(8), &old, bound), status::ok);
  EXPECT_EQ(old, 1005u);
  EXPECT_EQ(e.dst.words()[2], 1004u) << "adding 2^64 - 1 wraps: minus one";
}

TEST(device_ops, atomic_compare_swap_swaps_only_on_a_match_and_returns_the_old_value) {
  env e;
  e.dst.words()[3] = 7;
  uint64_t t = 0;
  ASSERT_EQ(d::atomic_compare_swap(*e.qp, e.dst.remote(24), 7, 99, e.res.local(0), &t), status::ok);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(e.res.words()[0], 7u);
  EXPECT_EQ(e.dst.words()[3], 99u);
  uint64_t old = 0;
  ASSERT_EQ(d::atomic_compare_swap_wait(*e.qp, e.dst.remote(24), 7, 1, e.res.local(8), &old, bound), status::ok);
  EXPECT_EQ(old, 99u);
  EXPECT_EQ(e.dst.words()[3], 99u) << "compare failed: unchanged";
}

TEST(device_ops, fence_posts_a_fenced_unsignalled_nop_and_later_ops_still_complete) {
  env e;
  e.dst.words()[0] = 11;
  uint64_t t = 0;
  ASSERT_EQ(d::atomic_fetch_add(*e.qp, e.dst.remote(0), 1, e.res.local(0), &t, d::op_flags::unsignaled), status::ok);
  ASSERT_EQ(d::fence(*e.qp), status::ok);
  if (wqe_tickets) {  // the proxy's fence is a descriptor the service honours, not a NOP
    const uint8_t* nop = e.qp->sq_buf + 64;  // WQEBB 1
    const std::string text = prm::decode_wqe(e.qp->sq_buf, d::sq_wqebbs(*e.qp), 1);
    EXPECT_NE(text.find("WQE NOP"), std::string::npos) << text;
    EXPECT_NE(text.find("unsignalled"), std::string::npos) << text;
    EXPECT_EQ(nop[11] & prm::ctrl_flags::fence_mask, prm::ctrl_flags::fence) << text;
  }
  // A put of the atomic's result after the fence: it carries the updated local value.
  ASSERT_EQ(d::put(*e.qp, e.dst.remote(64), e.res.local(0), 8, &t), status::ok);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  EXPECT_EQ(e.dst.words()[8], 11u);
  EXPECT_EQ(e.dst.words()[0], 12u);
  // The proxy's poster signals every WQE it posts: that is how it learns completions.
  EXPECT_EQ(e.nic->send_cq->ci, wqe_tickets ? 1u : 2u) << "only the put was signalled";
}

TEST(device_ops, quiet_settles_unsignalled_puts) {
  env e;
  fill(e.src.buf.addr(), 5, 5, 8192);
  uint64_t t = 0;
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(d::put(*e.qp, e.dst.remote(1024ull * i), e.src.local(1024ull * i), 1024, &t, d::op_flags::unsignaled),
              status::ok);
  }
  ASSERT_EQ(d::quiet(*e.qp, bound), status::ok);
  EXPECT_EQ(mismatches(e.dst.buf.addr(), 5, 5, 8192), 0u);
  EXPECT_EQ(e.nic->send_cq->ci, wqe_tickets ? 1u : 8u) << "only quiet's NOP produced a CQE (proxy: every put)";
  EXPECT_EQ(e.nic->sq_completed, wqe_tickets ? 9u : 8u) << "the proxy's quiet is no WQE";
  EXPECT_EQ(d::test(*e.qp, t), status::ok);
}

// A quiet after a signalled operation whose CQE has come posts nothing: polling shows the
// whole ring completed. After an unsignalled one it still posts its NOP (above).
TEST(device_ops, quiet_after_a_completed_signalled_operation_posts_no_nop) {
  env e;
  if (!wqe_tickets) GTEST_SKIP() << "proxy: its quiet is a descriptor count, no WQE either way";
  fill(e.src.buf.addr(), 7, 7, 64);
  uint64_t t = 0;
  ASSERT_EQ(d::put(*e.qp, e.dst.remote(), e.src.local(), 64, &t), status::ok);
  ASSERT_EQ(d::wait(*e.qp, t, bound), status::ok);
  const uint64_t reserved = e.nic->sq_reserved, cqes = e.nic->send_cq->ci;
  ASSERT_EQ(d::quiet(*e.qp, bound), status::ok);
  EXPECT_EQ(e.nic->sq_reserved, reserved) << "quiet posted a NOP";
  EXPECT_EQ(e.nic->send_cq->ci, cqes);
  EXPECT_EQ(mismatches(e.dst.buf.addr(), 7, 7, 64), 0u);
  // A put that is not yet complete when quiet starts is still waited for.
  ASSERT_EQ(d::put(*e.qp, e.dst.remote(64), e.src.local(), 64, &t, d::op_flags::unsignaled), status::ok);
  ASSERT_EQ(d::quiet(*e.qp, bound), status::ok);
  EXPECT_EQ(e.nic->sq_reserved, reserved + 2) << "the unsignalled put, then quiet's NOP";
  EXPECT_EQ(mismatches(e.dst.buf.addr() + 64, 7, 7, 64), 0u);
}

TEST(device_ops, test_returns_again_while_the_qp_has_not_reached_rts) {
  pair_options o;
  o.connect_a = false;
  env e(o);
  uint64_t t = 0;
  ASSERT_EQ(d::put(*e.qp, e.dst.remote(), e.src.local(), 8, &t), status::ok);
  EXPECT_EQ(d::test(*e.qp, t), status::again);
  EXPECT_EQ(d::wait(*e.qp, t, 1'000'000), status::timeout);
}

TEST(device_ops, bad_rkey_completes_with_io_error_and_latches_remote_access) {
  env e;
  uint64_t t1 = 0, t2 = 0;
  ASSERT_EQ(d::put(*e.qp, {e.dst.buf.addr(), e.dst.mr.rkey() ^ 0x5a5a00}, e.src.local(), 8, &t1), status::ok);
  ASSERT_EQ(d::put(*e.qp, e.dst.remote(), e.src.local(), 8, &t2), status::ok);
  EXPECT_EQ(d::wait(*e.qp, t1, bound), status::io_error);
  EXPECT_EQ(d::wait(*e.qp, t2, bound), status::io_error) << "everything after the failure is flushed";
  const d::op_error err = d::last_error(*e.nic);
  EXPECT_EQ(err.syndrome, prm::syndrome::remote_access);
  EXPECT_EQ(err.wqe_index, 0u);
  EXPECT_EQ(d::last_error(*e.qp).wqe_index, 0u) << "the first WQE, or the first descriptor, failed";
  EXPECT_EQ(d::quiet(*e.qp, bound), status::io_error);
}

// A warp-scope p where one lane's length is above max_inline: that lane alone gets invalid
// and the other 31 lanes post and complete (regression: the lane used to return before
// the warp exchange and hang the rest of the warp).
TEST(device_ops, warp_p_with_one_bad_lane_fails_only_that_lane) {
  env e;
  std::vector<uint64_t> out(64, ~0ull);
  d::host::launch(1, 32, [&] { bad_inline_lane_kernel(e.qp, e.dst.remote(), 9, out.data()); });
  for (uint32_t lane = 0; lane < 32; ++lane) {
    if (lane == 9) {
      EXPECT_EQ(st(out[2 * lane]), status::invalid);
      EXPECT_EQ(e.dst.words()[lane], 0u);
    } else {
      EXPECT_EQ(st(out[2 * lane]), status::ok) << lane;
      EXPECT_EQ(st(out[2 * lane + 1]), status::ok) << lane;
      EXPECT_EQ(e.dst.words()[lane], 0x0101010101010101ull * (lane + 1)) << lane;
    }
  }
  EXPECT_EQ(e.nic->sq_completed, 31u);
}

// Lanes of one warp (or threads of one block) that pass two different QPs: every lane
// gets invalid and neither QP gets a WQE, whether half the lanes disagree or a single
// skipping lane does (regression: the leader reserved in its QP, the other lanes wrote
// their WQEs into the other QP's ring, and the leader's QP executed the holes).
template <typename Scope>
void check_disagreeing_qps(uint32_t threads, bool only_a_skipper) {
  world w;
  w.make_pairs(2);
  reg_buffer dst(w.pdb, 8 * 64, verbs::access::all);
  std::vector<uint64_t> out(threads, ~0ull);
  d::host::launch(1, threads,
                  [&] { disagreeing_qp_kernel<Scope>(w.handles.data(), dst.remote(), only_a_skipper, out.data()); });
  for (uint32_t t = 0; t < threads; ++t) {
    EXPECT_EQ(st(out[t]), status::invalid) << "lane " << t;
    EXPECT_EQ(dst.words()[t], 0u) << "lane " << t << "'s value landed";
  }
  for (uint32_t q = 0; q < 2; ++q) {
    EXPECT_EQ(d::quiet(w.handles[q], bound), status::ok) << "qp " << q;
    if (wqe_tickets) {
      EXPECT_EQ(w.nic(q).sq_reserved, 0u) << "qp " << q << " took a WQE (a quiet with nothing posted posts nothing)";
    }
  }
}

TEST(device_ops, warp_lanes_passing_different_qps_all_get_invalid_and_nothing_is_posted) {
  check_disagreeing_qps<d::scope_warp>(32, false);
}

TEST(device_ops, one_skipping_lane_with_another_qp_makes_the_warp_call_invalid) {
  check_disagreeing_qps<d::scope_warp>(32, true);
}

TEST(device_ops, block_threads_passing_different_qps_all_get_invalid_and_nothing_is_posted) {
  check_disagreeing_qps<d::scope_block>(48, false);
}

}  // namespace

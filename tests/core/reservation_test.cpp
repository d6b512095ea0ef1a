// Hazard 1 of the posting core: a bounded post that times out must not leave a reserved,
// never-written hole in the send queue.
//
// How it failed before the fix: posting reserved its WQEBBs with a fetch_add and only
// then waited for room, so a wait that timed out left them reserved and unwritten. After
// the stall ended no later post completed, on an exclusive QP (its publication jumped over
// the hole and the NIC met the stale slots) and on a grid-shared one (every later post
// spun in sq_mark_ready waiting for the hole): both tests ended by their watchdog, "the
// posts after the stall did not finish within 60s".
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

#include "core/core_scale.hpp"
#include "gdaki/device/ops.hpp"
#include "soft/soft_fixture.hpp"

namespace {

using gdaki::status;
using namespace soft_test;

constexpr uint64_t second = 1'000'000'000;

// Retries a receiver-not-ready NAK forever (rnr_retry 7): a SEND to a peer with no
// receive posted stalls the SQ, with every WQE behind it, until a receive arrives.
verbs::qp_attr stalling_attr() {
  verbs::qp_attr a = fast_attr();
  a.rnr_retry = 7;
  return a;
}

// Runs f on its own thread and fails the whole program if it does not return within
// `limit` (a hang in the data path cannot be unwound from the outside).
template <typename F>
void within(std::chrono::seconds limit, const char* what, F f) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "core_reservation: %s did not finish within %llds (a post hangs)\n", what,
                 static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::_Exit(1);
  }
  done.get();
}

template <dev::sharing S>
void timed_out_posts_leave_no_hole(uint32_t threads) {
  endpoint_options o;
  o.auto_signal = 0;  // the data path's default: ring space comes back without our CQEs
  pair p(o, o, true, stalling_attr());
  dev::qp_handle& h = *p.a.h;
  const uint32_t ring = dev::sq_wqebbs(h);
  const uint32_t later_per_thread = 3 * ring;
  // [0] the victim only timed-out posts aim at, [1] the ring filler, then the later puts.
  std::vector<uint64_t> mem(2 + threads * later_per_thread, 0);
  verbs::mr m(p.pd, mem.data(), mem.size() * 8, verbs::access::all);
  const uint32_t rkey = m.rkey();
  alignas(8) uint64_t send_src = 7, recv_dst = 0;
  verbs::mr ms(p.pd, &send_src, 8, verbs::access::all), mrv(p.pd, &recv_dst, 8, verbs::access::all);

  // 1. The stall: a signalled SEND that b cannot take, then the ring filled behind it.
  const dev::sge s = sg(&send_src, 8, ms.lkey());
  const uint64_t send_ticket = post_send(h, &s, 1, prm::ctrl_flags::cq_update);
  const uint64_t fill = 0xf111;
  uint32_t filled = 0;
  for (;;) {
    uint64_t t = 0;
    const status st = dev::p<dev::scope_thread, S>(h, {addr(&mem[1]), rkey}, &fill, 8, &t, dev::op_flags::unsignaled, 0);
    if (st == status::timeout) break;
    ASSERT_EQ(st, status::ok);
    ASSERT_LT(++filled, ring) << "the ring never filled: the SEND did not stall";
  }

  // 2. 10,000 bounded posts while the peer is stalled: each times out.
  const uint64_t rounds = core_test::scaled(10000);
  std::atomic<uint64_t> not_timed_out{0};
  within(std::chrono::seconds(120), "the timed-out posts", [&] {
    std::vector<std::thread> ts;
    for (uint32_t k = 0; k < threads; ++k) {
      ts.emplace_back([&, k] {
        for (uint64_t i = k; i < rounds; i += threads) {
          const uint64_t v = i + 1;
          uint64_t t = 0;
          if (dev::p<dev::scope_thread, S>(h, {addr(&mem[0]), rkey}, &v, 8, &t, dev::op_flags::none, 2000) !=
              status::timeout) {
            not_timed_out.fetch_add(1);
          }
        }
      });
    }
    for (auto& t : ts) t.join();
  });
  EXPECT_EQ(not_timed_out.load(), 0u) << "every post into the stalled, full ring reports timeout";

  // 3. The stall ends: b posts a receive; the SEND and the fillers complete.
  const dev::sge r = sg(&recv_dst, 8, mrv.lkey());
  post_recv(*p.b.h, &r, 1);

  // 4. Every later post completes, in full, with no error.
  std::atomic<uint64_t> later_failures{0};
  within(std::chrono::seconds(60), "the posts after the stall", [&] {
    std::vector<std::thread> ts;
    for (uint32_t k = 0; k < threads; ++k) {
      ts.emplace_back([&, k] {
        for (uint32_t i = 0; i < later_per_thread; ++i) {
          const uint64_t slot = 2 + uint64_t{k} * later_per_thread + i;
          const uint64_t v = slot;
          uint64_t t = 0;
          if (dev::p<dev::scope_thread, S>(h, {addr(&mem[slot]), rkey}, &v, 8, &t, dev::op_flags::unsignaled,
                                           10 * second) != status::ok) {
            later_failures.fetch_add(1);
          }
        }
      });
    }
    for (auto& t : ts) t.join();
    if (dev::quiet<dev::scope_thread, S>(h, 10 * second) != status::ok) later_failures.fetch_add(1);
  });
  EXPECT_EQ(later_failures.load(), 0u);
  EXPECT_EQ(dev::sq_test(h, send_ticket), status::ok) << "the stalled SEND completed";
  const dev::op_error e = dev::last_error(h);
  EXPECT_EQ(e.syndrome, prm::syndrome::none) << "no stale WQE ran: " << prm::to_string(e.syndrome);
  EXPECT_EQ(recv_dst, send_src);
  EXPECT_EQ(mem[0], 0u) << "no timed-out post was executed";
  EXPECT_EQ(mem[1], fill);
  for (uint64_t slot = 2; slot < mem.size(); ++slot) ASSERT_EQ(mem[slot], slot) << "later put " << slot;
  EXPECT_EQ(h.sq_ready, h.sq_reserved) << "no reserved WQEBB was left unwritten";
}

TEST(core_reservation, exclusive_qp_timed_out_posts_leave_no_hole) {
  timed_out_posts_leave_no_hole<dev::sharing::exclusive>(1);
}

TEST(core_reservation, grid_shared_qp_timed_out_posts_leave_no_hole) {
  timed_out_posts_leave_no_hole<dev::sharing::grid>(4);
}

}  // namespace

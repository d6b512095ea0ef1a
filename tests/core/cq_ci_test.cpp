// Hazard 5 of the posting core: the CQ doorbell record's consumer index (set_ci) must
// never move backwards. A NIC without overrun-ignore compares it with its producer index;
// on a ConnectX a smaller value reads as "no room" and the next CQE overruns the CQ.
//
// How it failed before the fix: cq_poll_one stored set_ci with a plain store after
// claiming a CQE, so a poller descheduled between its claim and its store wrote an older
// value over a newer one (core_cq_ci.a_late_publisher_...: set_ci read 6 after 7), and the
// soft NIC did not notice a consumer index going backwards (core_cq_ci.the_soft_nic_...:
// the CQ stayed out of error). The fix was then a forward-only CAS on the record; it is
// now a combining try-lock beside ci and a plain store (cq_publish_ci says why).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/core_scale.hpp"
#include "gdaki/device/ops.hpp"
#include "soft/soft_fixture.hpp"
#include "unit/unit_support.hpp"

namespace {

using gdaki::status;
using namespace soft_test;

uint32_t set_ci_of(const dev::cq_handle& cq) {
  return prm::from_be(prm::be32{dev::arch::load_acquire(&cq.dbrec->set_ci.raw)}) & prm::cq_ci_mask;
}

// Pollers publish the count claimed so far, never their own position: a poller that
// claimed CQE 5 and publishes after another claimed CQE 6 and published 7 stores 7 again.
TEST(core_cq_ci, a_late_publisher_never_moves_set_ci_back) {
  gdaki_test::test_cq cq(4);
  cq.handle.ci = 7;  // A claimed 5 and was descheduled; B claimed 6 and published
  dev::cq_publish_ci(cq.handle);
  EXPECT_EQ(set_ci_of(cq.handle), 7u);
  dev::cq_publish_ci(cq.handle);  // A, late
  EXPECT_EQ(set_ci_of(cq.handle), 7u);
  cq.handle.ci = 8;
  dev::cq_publish_ci(cq.handle);
  EXPECT_EQ(set_ci_of(cq.handle), 8u);
}

TEST(core_cq_ci, set_ci_moves_forward_across_the_24_bit_wrap) {
  gdaki_test::test_cq cq(4);
  cq.start_at(0xfffffe);
  cq.handle.ci = 0x1000001;  // 0x000001 after the wrap: forward
  dev::cq_publish_ci(cq.handle);
  EXPECT_EQ(set_ci_of(cq.handle), 1u);
}

// A poller that finds another one publishing does not store; it waits, and its claim is
// published by the holder (or by itself once the lock is free): the holder's steps are
// run one by one around the claimer's call. (Without the holder's re-read after unlocking,
// a claim made meanwhile would wait for the next poller that came by; without the wait,
// the claimer's caller would free SQ slots that set_ci does not cover yet, test below.)
TEST(core_cq_ci, a_claim_made_while_another_poller_publishes_waits_until_it_is_published) {
  gdaki_test::test_cq cq(4);
  cq.start_at(3);
  ASSERT_TRUE(dev::arch::local::compare_swap(&cq.handle.publish_lock, 0u, 1u));  // holder locks
  const uint64_t stored = dev::detail::cq_store_claimed(cq.handle);              // and stores 3
  cq.handle.ci = 4;                                                               // a claim
  std::atomic<bool> returned{false};
  std::thread claimer([&] {
    dev::cq_publish_ci(cq.handle);  // finds the lock taken
    returned = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(returned.load()) << "the claimer must wait while its claim is not in set_ci";
  EXPECT_EQ(set_ci_of(cq.handle), 3u) << "the lock was taken: the claimer must not store";
  EXPECT_TRUE(dev::detail::cq_unlock_and_recheck(cq.handle, stored)) << "the holder must see the claim";
  // The holder goes round again, unless the waiting claimer took the lock first: either
  // way the claim is published, by one of them.
  if (dev::arch::local::compare_swap(&cq.handle.publish_lock, 0u, 1u)) {
    EXPECT_EQ(dev::detail::cq_store_claimed(cq.handle), 4u);
    EXPECT_FALSE(dev::detail::cq_unlock_and_recheck(cq.handle, 4));
  }
  claimer.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(set_ci_of(cq.handle), 4u);
}

// The soft NIC, like a ConnectX without overrun-ignore, reads set_ci before each CQE. A
// consumer index that went back is an overrun there: the CQ goes to error and the QP that
// tried moves to ERR, as hardware would report it.
TEST(core_cq_ci, the_soft_nic_reports_a_consumer_index_that_went_back_as_an_overrun) {
  pair p({.ignore_overrun = false}, {});
  alignas(8) uint64_t dst = 0;
  verbs::mr m(p.pd, &dst, 8, verbs::access::all);
  const uint64_t v = 1;
  // Two CQEs written and consumed: the NIC read set_ci = 1 before writing the second.
  for (int i = 0; i < 2; ++i) {
    post_write_inline(*p.a.h, addr(&dst), m.rkey(), &v, 8, prm::ctrl_flags::cq_update);
    ASSERT_TRUE(wait_cqe(p.a, false).ok);
  }
  ASSERT_EQ(set_ci_of(*p.a.hs), 2u);
  ASSERT_FALSE(p.a.scq.in_error());
  // A late poller's plain store (the code before the fix) puts set_ci back to 0.
  dev::arch::store_release(&p.a.hs->dbrec->set_ci.raw, prm::to_be32(0).raw);
  post_write_inline(*p.a.h, addr(&dst), m.rkey(), &v, 8, prm::ctrl_flags::cq_update);
  const auto t0 = std::chrono::steady_clock::now();
  while (!p.a.scq.in_error() && std::chrono::steady_clock::now() - t0 < 5s) std::this_thread::yield();
  EXPECT_TRUE(p.a.scq.in_error()) << "a consumer index that moved back is an overrun";
}

// Many pollers on one send CQ whose NIC checks set_ci (no overrun-ignore), the CQ exactly
// as deep as the SQ: every post and wait ends ok and the CQ never sees set_ci move back.
TEST(core_cq_ci, concurrent_pollers_keep_set_ci_monotone_under_a_checking_nic) {
  constexpr uint32_t threads = 4;
  const uint64_t per_thread = core_test::scaled(20000);
  pair p({.sq_wqebbs = 64, .cq_depth = 64, .ignore_overrun = false, .auto_signal = 0}, {});
  std::vector<uint64_t> dst(threads, 0);
  verbs::mr m(p.pd, dst.data(), dst.size() * 8, verbs::access::all);
  std::atomic<uint32_t> failures{0};
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      const dev::remote_ptr r{addr(&dst[t]), m.rkey()};
      for (uint64_t k = 1; k <= per_thread; ++k) {
        uint64_t ticket = 0;
        const uint32_t flags = (k % 8 == 0) ? dev::op_flags::none : dev::op_flags::unsignaled;
        if (dev::p<dev::scope_thread, dev::sharing::grid>(*p.a.h, r, &k, 8, &ticket, flags, 5'000'000'000) !=
                status::ok ||
            (k % 8 == 0 && dev::wait(*p.a.h, ticket, 5'000'000'000) != status::ok)) {
          failures.fetch_add(1);
          return;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_EQ(dev::quiet(*p.a.h, 5'000'000'000), status::ok);
  EXPECT_FALSE(p.a.scq.in_error());
  // Every claim was published: a hand-off that lost one (a poller leaving while the holder
  // had already re-read ci) leaves set_ci behind the claims.
  EXPECT_EQ(set_ci_of(*p.a.hs), static_cast<uint32_t>(p.a.hs->ci) & prm::cq_ci_mask);
  for (uint32_t t = 0; t < threads; ++t) EXPECT_EQ(dst[t], per_thread) << "thread " << t;
}

// A publisher can stall holding the lock (a descheduled CPU thread). Pollers that claim
// meanwhile must not free their SQ slots before their claims reach set_ci: the SQ is as
// deep as the CQ, so a poster that ran ahead on unpublished claims would have the checking
// NIC write more CQEs than set_ci leaves room for. Failed before the fix (claimers left at
// once): the CQ overran while the lock was held (seen under qemu-user on aarch64, where a
// holder is often descheduled: concurrent_pollers_... above, 4 failures, CQ in error).
TEST(core_cq_ci, a_poller_returns_only_once_its_claim_is_published_so_a_stalled_publisher_causes_no_overrun) {
  pair p({.sq_wqebbs = 64, .cq_depth = 64, .ignore_overrun = false, .auto_signal = 0}, {});
  alignas(8) uint64_t dst = 0;
  verbs::mr m(p.pd, &dst, 8, verbs::access::all);
  constexpr uint64_t posts = 256;  // four times the CQ: it would overrun four times over
  ASSERT_TRUE(dev::arch::local::compare_swap(&p.a.hs->publish_lock, 0u, 1u));  // the stalled publisher
  std::atomic<uint64_t> done{0};
  std::atomic<bool> failed{false};
  std::thread poster([&] {
    const dev::remote_ptr r{addr(&dst), m.rkey()};
    for (uint64_t k = 1; k <= posts; ++k) {
      uint64_t ticket = 0;
      if (dev::p<dev::scope_thread, dev::sharing::grid>(*p.a.h, r, &k, 8, &ticket, dev::op_flags::none, 5'000'000'000) !=
              status::ok ||
          dev::wait(*p.a.h, ticket, 5'000'000'000) != status::ok) {
        failed = true;
        return;
      }
      done = k;
    }
  });
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(p.a.scq.in_error()) << "claims ran ahead of set_ci while the publisher stalled: the CQ overran";
  EXPECT_LT(done.load(), posts) << "the poller must wait for its claim to be published";
  dev::arch::local::store_release(&p.a.hs->publish_lock, 0u);  // the publisher goes on
  poster.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(done.load(), posts);
  EXPECT_FALSE(p.a.scq.in_error());
  EXPECT_EQ(set_ci_of(*p.a.hs), static_cast<uint32_t>(p.a.hs->ci) & prm::cq_ci_mask);
  EXPECT_EQ(dst, posts);
}

}  // namespace

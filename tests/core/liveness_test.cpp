// Hazard 6 of the posting core: liveness must not depend on the caller's signalling, and
// an export must refuse CQ set-ups the data path cannot serve.
//
// How it failed before the fix: ring space comes back only through CQEs, so a stream of
// unsignalled puts filled the ring and every later post waited for room that never came
// (core_liveness.a_million_...: with auto-signal off, a post timed out after 5 s once
// the ring was full, and quiet failed); a send CQ
// smaller than the SQ and a send CQ shared by two exported QPs were exported silently
// (core_export.*: no error thrown).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/core_scale.hpp"
#include "gdaki/device/ops.hpp"
#include "soft/soft_fixture.hpp"

namespace {

using gdaki::status;
using namespace soft_test;

constexpr uint64_t second = 1'000'000'000;

// The data path's default: auto-signal on (endpoint_options{.auto_signal = 0}).
endpoint_options defaults() {
  endpoint_options o;
  o.auto_signal = 0;
  return o;
}

template <dev::sharing S>
void unsignalled_stream_completes(uint32_t threads, uint64_t total) {
  pair p(defaults(), defaults());
  dev::qp_handle& h = *p.a.h;
  EXPECT_EQ(h.auto_signal_wqebbs, dev::sq_wqebbs(h) / 2u) << "the default period is half the ring";
  std::vector<uint64_t> dst(threads, 0);
  verbs::mr m(p.pd, dst.data(), dst.size() * 8, verbs::access::all);
  std::atomic<uint64_t> failures{0};
  std::vector<std::thread> ts;
  const uint64_t per_thread = total / threads;
  for (uint32_t k = 0; k < threads; ++k) {
    ts.emplace_back([&, k] {
      const dev::remote_ptr r{addr(&dst[k]), m.rkey()};
      for (uint64_t v = 1; v <= per_thread; ++v) {
        uint64_t t = 0;
        if (dev::p<dev::scope_thread, S>(h, r, &v, 8, &t, dev::op_flags::unsignaled, 5 * second) != status::ok) {
          failures.fetch_add(1);
          return;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0u) << "no post waited in vain for ring space";
  EXPECT_EQ((dev::quiet<dev::scope_thread, S>(h, 5 * second)), status::ok);
  for (uint32_t k = 0; k < threads; ++k) EXPECT_EQ(dst[k], per_thread) << "thread " << k;
  EXPECT_EQ(dev::last_error(h).syndrome, prm::syndrome::none);
}

TEST(core_liveness, a_million_unsignalled_puts_complete_and_quiet_returns_ok) {
  unsignalled_stream_completes<dev::sharing::exclusive>(1, core_test::scaled(1'000'000));
}

TEST(core_liveness, the_same_from_four_threads_on_a_grid_shared_qp) {
  unsignalled_stream_completes<dev::sharing::grid>(4, core_test::scaled(200'000));
}

TEST(core_liveness, auto_signal_marks_exactly_the_wqe_covering_each_periods_last_wqebb) {
  using w = dev::wqe_writer;
  EXPECT_FALSE(w::auto_signals(0, 1, 4));
  EXPECT_TRUE(w::auto_signals(3, 1, 4));   // covers WQEBB 3
  EXPECT_TRUE(w::auto_signals(2, 2, 4));   // covers 2..3
  EXPECT_FALSE(w::auto_signals(4, 3, 4));  // 4..6
  EXPECT_TRUE(w::auto_signals(6, 4, 4));   // 6..9 covers 7
  EXPECT_FALSE(w::auto_signals(3, 1, 0)) << "0 = off";
}

// ---- export checks ---------------------------------------------------------------------

verbs::cq_init cq_of(uint32_t depth) {
  verbs::cq_init c;
  c.depth = depth;
  return c;
}
verbs::qp_init qp_of(const verbs::cq& s, const verbs::cq& r, uint32_t sq_wqebbs) {
  verbs::qp_init q;
  q.send_cq = &s;
  q.recv_cq = &r;
  q.sq_wqebbs = sq_wqebbs;
  return q;
}
verbs::qp_export_options period(uint32_t wqebbs) {
  verbs::qp_export_options o;
  o.auto_signal_wqebbs = wqebbs;
  return o;
}

struct bare {
  verbs::device dev = verbs::device::open("soft0");
  verbs::pd pd{dev};
};

std::string export_error(const verbs::qp& q, dev::cq_handle* s, dev::cq_handle* r, verbs::qp_export_options o = {}) {
  try {
    (void)q.export_handle(s, r, o);
  } catch (const gdaki::error& e) {
    return e.what();
  }
  return "";
}

TEST(core_export, a_send_cq_smaller_than_the_sq_is_refused_naming_both_sizes) {
  bare b;
  verbs::cq scq(b.dev, cq_of(32)), rcq(b.dev, cq_of(32));
  verbs::qp q(b.pd, qp_of(scq, rcq, 64));
  dev::cq_handle hs = scq.export_handle(), hr = rcq.export_handle();
  const std::string e = export_error(q, &hs, &hr);
  EXPECT_NE(e.find("holds 32 CQEs"), std::string::npos) << e;
  EXPECT_NE(e.find("64 signalled WQEs"), std::string::npos) << e;
}

TEST(core_export, two_exported_qps_on_one_send_cq_are_refused_naming_both) {
  bare b;
  verbs::cq scq(b.dev, cq_of(64)), r1(b.dev, cq_of(64)), r2(b.dev, cq_of(64));
  verbs::qp q1(b.pd, qp_of(scq, r1, 64));
  verbs::qp q2(b.pd, qp_of(scq, r2, 64));
  dev::cq_handle hs = scq.export_handle(), h1 = r1.export_handle(), h2 = r2.export_handle();
  EXPECT_EQ(export_error(q1, &hs, &h1), "");
  EXPECT_EQ(export_error(q1, &hs, &h1), "") << "the same QP may be exported again";
  const std::string e = export_error(q2, &hs, &h2);
  char q1_name[32];
  std::snprintf(q1_name, sizeof q1_name, "qp 0x%06x", q1.qpn());
  EXPECT_NE(e.find(q1_name), std::string::npos) << e;
  EXPECT_NE(e.find("already serves"), std::string::npos) << e;
  // Once q1 is gone its send CQ may serve another exported QP.
  q1 = verbs::qp{};
  EXPECT_EQ(export_error(q2, &hs, &h2), "");
}

TEST(core_export, an_auto_signal_period_above_half_the_ring_or_not_a_power_of_two_is_refused) {
  bare b;
  verbs::cq scq(b.dev, cq_of(64)), rcq(b.dev, cq_of(64));
  verbs::qp q(b.pd, qp_of(scq, rcq, 64));
  dev::cq_handle hs = scq.export_handle(), hr = rcq.export_handle();
  EXPECT_NE(export_error(q, &hs, &hr, period(64)).find("power of two <= 32"), std::string::npos);
  EXPECT_NE(export_error(q, &hs, &hr, period(12)).find("power of two"), std::string::npos);
  EXPECT_EQ(export_error(q, &hs, &hr, period(8)), "");
}

}  // namespace

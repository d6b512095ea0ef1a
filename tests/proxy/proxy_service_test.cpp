// The proxy service in-process, against a recording poster: completions become counter
// updates exactly once, torn slots are rejected and never executed, fence/quiet wait for
// earlier operations, a full poster is retried, stop() closes the ring.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <thread>
#include <vector>

#include "gdaki/proxy/host_ring.hpp"
#include "gdaki/proxy/proxy_service.hpp"

using namespace gdaki;
using namespace gdaki::proxy;

namespace {

class recording_poster final : public poster {
 public:
  status post(const descriptor& d, uint64_t cookie) override {
    if (refuse > 0) {
      --refuse;
      return status::again;
    }
    if (d.op == opcode::fence || d.op == opcode::quiet) ++barriers_seen;
    posted.push_back(d);
    pending.push_back(completion{cookie, d.remote_key == 666 ? status::io_error : status::ok});
    return status::ok;
  }
  size_t poll(completion* out, size_t max) override {
    size_t n = 0;
    while (!hold && n < max && !pending.empty()) {
      out[n++] = pending.front();
      pending.pop_front();
    }
    return n;
  }
  const char* name() const override { return "recording"; }

  std::vector<descriptor> posted;
  std::deque<completion> pending;
  bool hold = false;   // completions stay pending while set
  int refuse = 0;      // answer again to the next posts
  int barriers_seen = 0;
};

descriptor put_to(uint64_t addr, uint16_t counter) { return make_put(0, addr, 1, 0x5000, 2, 8, counter); }

void run_until_idle(proxy_service& s) {
  for (int i = 0; i < 100; ++i) s.progress();
}

}  // namespace

TEST(proxy_service, completions_become_counter_updates_exactly_once) {
  host_ring ring;
  ASSERT_EQ(ring.init(4, 2), status::ok);
  recording_poster p;
  proxy_service s(ring.handle(), p);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(ring_push(ring.handle(), put_to(0x1000 + i, i % 2), 0), status::ok);
  run_until_idle(s);
  ASSERT_EQ(p.posted.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p.posted[i].remote_addr, 0x1000u + i) << "in ring order";
  EXPECT_EQ(ring_counter(ring.handle(), 0), 5u);
  EXPECT_EQ(ring_counter(ring.handle(), 1), 5u);
  const proxy_stats st = s.stats();
  EXPECT_EQ(st.consumed, 10u);
  EXPECT_EQ(st.posted, 10u);
  EXPECT_EQ(st.completed, 10u);
  EXPECT_EQ(st.failed, 0u);
}

TEST(proxy_service, torn_slot_is_rejected_and_never_executed) {
  host_ring ring;
  ASSERT_EQ(ring.init(4, 1), status::ok);
  ring_handle& r = ring.handle();
  recording_poster p;
  proxy_options o;
  o.torn_grace_ns = 1'000'000;
  proxy_service s(r, p, o);
  ASSERT_EQ(ring_push(r, put_to(0xa, 0), 0), status::ok);
  uint32_t torn = 0;
  ASSERT_EQ(ring_acquire(r, 1, &torn, 0), status::ok);
  ring_write(r, torn, put_to(0xb, 0));
  r.slots[torn & r.mask].remote_addr = 0xbad;  // half of the body never landed
  ASSERT_EQ(ring_push(r, put_to(0xc, 0), 0), status::ok);

  s.progress();  // executes 0xa, then sees the torn slot and starts its grace period
  EXPECT_EQ(p.posted.size(), 1u);
  EXPECT_EQ(s.stats().rejected, 0u) << "not rejected before the grace period ends";
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  run_until_idle(s);
  ASSERT_EQ(p.posted.size(), 2u);
  EXPECT_EQ(p.posted[0].remote_addr, 0xau);
  EXPECT_EQ(p.posted[1].remote_addr, 0xcu) << "the ring goes on after the torn slot";
  for (const auto& d : p.posted) EXPECT_NE(d.remote_addr, 0xbadu) << "torn descriptor executed";
  EXPECT_EQ(s.stats().rejected, 1u);
  uint32_t where = 0;
  EXPECT_EQ(ring_error(r, &where), status::io_error);
  EXPECT_EQ(where, torn);
  EXPECT_EQ(r.ctl->faults, 1u);
  EXPECT_EQ(ring_wait_counter(r, 0, 3, 0), status::io_error) << "waiters learn the count will not arrive";
}

TEST(proxy_service, slot_that_turns_valid_within_grace_is_executed) {
  host_ring ring;
  ASSERT_EQ(ring.init(4, 1), status::ok);
  ring_handle& r = ring.handle();
  recording_poster p;
  proxy_service s(r, p);
  uint32_t pos = 0;
  ASSERT_EQ(ring_acquire(r, 1, &pos, 0), status::ok);
  ring_write(r, pos, put_to(0xb, 0));
  const uint64_t good = r.slots[pos & r.mask].remote_addr;
  r.slots[pos & r.mask].remote_addr = 0xbad;  // the late store ...
  s.progress();
  EXPECT_TRUE(p.posted.empty());
  r.slots[pos & r.mask].remote_addr = good;  // ... lands
  run_until_idle(s);
  ASSERT_EQ(p.posted.size(), 1u);
  EXPECT_EQ(s.stats().rejected, 0u);
  EXPECT_EQ(ring_error(r), status::ok);
}

TEST(proxy_service, quiet_completes_only_after_earlier_operations) {
  host_ring ring;
  ASSERT_EQ(ring.init(4, 2), status::ok);
  ring_handle& r = ring.handle();
  recording_poster p;
  proxy_service s(r, p);
  p.hold = true;
  ASSERT_EQ(ring_push(r, put_to(0x1, 0), 0), status::ok);
  ASSERT_EQ(ring_push(r, put_to(0x2, 0), 0), status::ok);
  ASSERT_EQ(ring_push(r, make_barrier(true, 1), 0), status::ok);
  ASSERT_EQ(ring_push(r, put_to(0x3, 0), 0), status::ok);
  run_until_idle(s);
  EXPECT_EQ(p.posted.size(), 2u) << "nothing after the quiet starts before it";
  EXPECT_EQ(ring_counter(r, 1), 0u);
  p.hold = false;
  run_until_idle(s);
  EXPECT_EQ(ring_counter(r, 1), 1u);
  EXPECT_EQ(ring_counter(r, 0), 3u);
  EXPECT_EQ(p.posted.size(), 3u);
  EXPECT_EQ(p.barriers_seen, 0) << "fence and quiet are never handed to the poster";
}

TEST(proxy_service, fenced_descriptor_waits_for_earlier_completions) {
  host_ring ring;
  ASSERT_EQ(ring.init(4, 1), status::ok);
  ring_handle& r = ring.handle();
  recording_poster p;
  proxy_service s(r, p);
  p.hold = true;
  ASSERT_EQ(ring_push(r, put_to(0x1, 0), 0), status::ok);
  ASSERT_EQ(ring_push(r, make_put(0, 0x2, 1, 0x5000, 2, 8, 0, desc_flags::fence), 0), status::ok);
  run_until_idle(s);
  EXPECT_EQ(p.posted.size(), 1u);
  p.hold = false;
  run_until_idle(s);
  EXPECT_EQ(p.posted.size(), 2u);
  EXPECT_EQ(ring_counter(r, 0), 2u);
}

TEST(proxy_service, full_poster_is_retried_without_losing_the_descriptor) {
  host_ring ring;
  ASSERT_EQ(ring.init(4, 1), status::ok);
  ring_handle& r = ring.handle();
  recording_poster p;
  proxy_service s(r, p);
  p.refuse = 3;
  for (int i = 0; i < 4; ++i) ASSERT_EQ(ring_push(r, put_to(0x10 + i, 0), 0), status::ok);
  run_until_idle(s);
  ASSERT_EQ(p.posted.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(p.posted[i].remote_addr, 0x10u + i);
  EXPECT_EQ(ring_counter(r, 0), 4u);
}

TEST(proxy_service, inflight_limit_holds_back_the_ring) {
  host_ring ring;
  ASSERT_EQ(ring.init(4, 1), status::ok);
  ring_handle& r = ring.handle();
  recording_poster p;
  proxy_options o;
  o.max_inflight = 2;
  proxy_service s(r, p, o);
  p.hold = true;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(ring_push(r, put_to(0x10 + i, 0), 0), status::ok);
  run_until_idle(s);
  EXPECT_EQ(p.posted.size(), 2u);
  p.hold = false;
  run_until_idle(s);
  EXPECT_EQ(p.posted.size(), 5u);
  EXPECT_EQ(ring_counter(r, 0), 5u);
}

TEST(proxy_service, failed_operation_latches_the_error_and_skips_its_counter) {
  host_ring ring;
  ASSERT_EQ(ring.init(4, 1), status::ok);
  ring_handle& r = ring.handle();
  recording_poster p;
  proxy_service s(r, p);
  ASSERT_EQ(ring_push(r, make_put(0, 0x1, 666, 0x5000, 2, 8, 0), 0), status::ok);
  ASSERT_EQ(ring_push(r, put_to(0x2, 0), 0), status::ok);
  run_until_idle(s);
  EXPECT_EQ(ring_counter(r, 0), 1u);
  EXPECT_EQ(s.stats().failed, 1u);
  EXPECT_EQ(ring_error(r), status::io_error);
}

TEST(proxy_service, thread_drains_the_ring_and_stop_closes_it) {
  host_ring ring;
  ASSERT_EQ(ring.init(3, 1), status::ok);
  ring_handle& r = ring.handle();
  recording_poster p;
  proxy_service s(r, p);
  ASSERT_EQ(s.start(), status::ok);
  EXPECT_EQ(s.start(), status::busy);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(ring_push(r, put_to(0x10, 0), wait_forever), status::ok);
  EXPECT_EQ(ring_wait_counter(r, 0, 1000, 10'000'000'000ull), status::ok);
  s.stop();
  EXPECT_EQ(p.posted.size(), 1000u);
  EXPECT_EQ(ring_push(r, put_to(0x10, 0), 0), status::ok) << "free slots remain usable";
  for (int i = 0; i < 8; ++i) (void)ring_push(r, put_to(0x10, 0), 0);
  EXPECT_EQ(ring_push(r, put_to(0x10, 0), wait_forever), status::closed);
}

// Proxy ring behaviours, one per test: publication, half-written and torn slots,
// back-pressure and bounded waits, close, completion counters, 32-bit wrap.
#include <gtest/gtest.h>

#include <thread>

#include "gdaki/device/arch.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/proxy/host_ring.hpp"
#include "gdaki/proxy/ring.hpp"

using namespace gdaki;
using namespace gdaki::proxy;

namespace {

descriptor body(uint64_t tag) { return make_put(1, 0x1000 + tag, 2, 0x2000 + tag, 3, 64, 0); }

// Consumes the slot at `position` if it is valid; returns the peek status.
status take(ring_handle& r, uint32_t position, descriptor* out) {
  descriptor_fault f{};
  const status st = ring_peek(r, position, out, &f);
  if (st == status::ok) ring_release(r, position + 1, 1);
  return st;
}

}  // namespace

TEST(proxy_ring, init_rejects_bad_sizes) {
  host_ring ring;
  EXPECT_EQ(ring.init(0, 4), status::invalid);
  EXPECT_EQ(ring.init(ring_max_log2 + 1, 4), status::invalid);
  EXPECT_EQ(ring.init(4, 4), status::ok);
  EXPECT_EQ(ring.init(4, 4), status::busy);
}

TEST(proxy_ring, pushed_descriptor_is_peeked_once_in_position_order) {
  host_ring ring;
  ASSERT_EQ(ring.init(3, 1), status::ok);
  ring_handle& r = ring.handle();
  uint32_t p0 = 99, p1 = 99;
  ASSERT_EQ(ring_push(r, body(1), 0, &p0), status::ok);
  ASSERT_EQ(ring_push(r, body(2), 0, &p1), status::ok);
  EXPECT_EQ(p0, 0u);
  EXPECT_EQ(p1, 1u);
  descriptor d;
  ASSERT_EQ(take(r, 0, &d), status::ok);
  EXPECT_EQ(d.remote_addr, 0x1001u);
  ASSERT_EQ(take(r, 1, &d), status::ok);
  EXPECT_EQ(d.remote_addr, 0x1002u);
  EXPECT_EQ(take(r, 2, &d), status::again);
}

TEST(proxy_ring, half_written_slot_is_not_consumed_until_published) {
  host_ring ring;
  ASSERT_EQ(ring.init(3, 1), status::ok);
  ring_handle& r = ring.handle();
  uint32_t pos = 0;
  ASSERT_EQ(ring_acquire(r, 1, &pos, 0), status::ok);
  // The producer is half way: body fields written, tail not yet.
  descriptor& s = r.slots[pos & r.mask];
  s.seq_head = pos;
  s.op = opcode::put;
  s.remote_addr = 0xdead;
  descriptor d;
  descriptor_fault f{};
  EXPECT_EQ(ring_peek(r, pos, &d, &f), status::again);
  ring_write(r, pos, body(7));
  ASSERT_EQ(ring_peek(r, pos, &d, &f), status::ok);
  EXPECT_EQ(d.remote_addr, 0x1007u);
}

TEST(proxy_ring, torn_slot_is_detected_by_peek) {
  host_ring ring;
  ASSERT_EQ(ring.init(3, 1), status::ok);
  ring_handle& r = ring.handle();
  uint32_t pos = 0;
  ASSERT_EQ(ring_acquire(r, 1, &pos, 0), status::ok);
  ring_write(r, pos, body(7));
  // A body store that "lands late": the slot says published, the bytes disagree.
  r.slots[pos & r.mask].length = 4096;
  descriptor d;
  descriptor_fault f{};
  EXPECT_EQ(ring_peek(r, pos, &d, &f), status::io_error);
  EXPECT_EQ(f, descriptor_fault::check);
}

TEST(proxy_ring, full_ring_try_push_times_out_without_reserving) {
  host_ring ring;
  ASSERT_EQ(ring.init(2, 1), status::ok);
  ring_handle& r = ring.handle();
  for (int i = 0; i < 4; ++i) ASSERT_EQ(ring_push(r, body(i), 0), status::ok);
  EXPECT_EQ(ring_push(r, body(4), 0), status::timeout);
  EXPECT_EQ(r.ctl->reserved, 4u) << "a failed push must not leave a reserved hole";
  EXPECT_EQ(r.prod->taken, 4u) << "a failed push undoes the credit it tried";
}

TEST(proxy_ring, full_ring_bounded_wait_returns_timeout_after_the_limit) {
  host_ring ring;
  ASSERT_EQ(ring.init(1, 1), status::ok);
  ring_handle& r = ring.handle();
  ASSERT_EQ(ring_push(r, body(0), 0), status::ok);
  ASSERT_EQ(ring_push(r, body(1), 0), status::ok);
  const uint64_t t0 = dev::arch::clock_ns();
  EXPECT_EQ(ring_push(r, body(2), 2'000'000), status::timeout);
  EXPECT_GE(dev::arch::clock_ns() - t0, 2'000'000u);
  EXPECT_EQ(r.ctl->reserved, 2u);
}

TEST(proxy_ring, blocked_producer_resumes_when_consumer_frees_a_slot) {
  host_ring ring;
  ASSERT_EQ(ring.init(1, 1), status::ok);
  ring_handle& r = ring.handle();
  ASSERT_EQ(ring_push(r, body(0), 0), status::ok);
  ASSERT_EQ(ring_push(r, body(1), 0), status::ok);
  status pushed = status::again;
  uint32_t where = 0;
  std::thread producer([&] { pushed = ring_push(r, body(2), wait_forever, &where); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  descriptor d;
  ASSERT_EQ(take(r, 0, &d), status::ok);
  producer.join();
  EXPECT_EQ(pushed, status::ok);
  EXPECT_EQ(where, 2u);
  ASSERT_EQ(take(r, 1, &d), status::ok);
  ASSERT_EQ(take(r, 2, &d), status::ok);
  EXPECT_EQ(d.remote_addr, 0x1002u);
}

TEST(proxy_ring, closed_ring_releases_waiting_producers) {
  host_ring ring;
  ASSERT_EQ(ring.init(1, 1), status::ok);
  ring_handle& r = ring.handle();
  ASSERT_EQ(ring_push(r, body(0), 0), status::ok);
  ASSERT_EQ(ring_push(r, body(1), 0), status::ok);
  status pushed = status::again;
  std::thread producer([&] { pushed = ring_push(r, body(2), wait_forever); });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ring_close(r);
  producer.join();
  EXPECT_EQ(pushed, status::closed);
  EXPECT_EQ(ring_wait_counter(r, 0, 1, wait_forever), status::closed);
}

TEST(proxy_ring, counter_wait_times_out_then_sees_completion) {
  host_ring ring;
  ASSERT_EQ(ring.init(2, 4), status::ok);
  ring_handle& r = ring.handle();
  EXPECT_EQ(ring_wait_counter(r, 2, 1, 1'000'000), status::timeout);
  EXPECT_EQ(ring_wait_counter(r, 4, 1, 0), status::invalid);
  ring_complete(r, 2);
  EXPECT_EQ(ring_wait_counter(r, 2, 1, 0), status::ok);
  EXPECT_EQ(ring_counter(r, 2), 1u);
  EXPECT_EQ(ring_counter(r, 1), 0u);
}

TEST(proxy_ring, latched_fault_fails_counter_waits_but_not_pushes) {
  host_ring ring;
  ASSERT_EQ(ring.init(2, 1), status::ok);
  ring_handle& r = ring.handle();
  ring_record_fault(r, status::io_error, 5);
  ring_record_fault(r, status::access, 6);  // the first fault stays latched
  uint32_t where = 0;
  EXPECT_EQ(ring_error(r, &where), status::io_error);
  EXPECT_EQ(where, 5u);
  EXPECT_EQ(r.ctl->faults, 2u);
  EXPECT_EQ(ring_wait_counter(r, 0, 1, wait_forever), status::io_error);
  EXPECT_EQ(ring_push(r, body(0), 0), status::ok);
}

TEST(proxy_ring, positions_wrap_past_two_to_the_32) {
  // Start the free-running counters just below the wrap (ring_init marks the slots as
  // the lap before).
  const uint32_t base = 0xfffffff6u;
  host_ring ring;
  ASSERT_EQ(ring.init(2, 1, base), status::ok);
  ring_handle& r = ring.handle();
  uint32_t next = base;
  for (uint32_t i = 0; i < 40; ++i) {
    uint32_t pos = 0;
    ASSERT_EQ(ring_push(r, body(i), 0, &pos), status::ok) << i;
    ASSERT_EQ(pos, base + i);
    if (i % 3 == 2 || r.prod->taken - r.ctl->consumed == ring_capacity(r)) {
      descriptor d;
      while (next != pos + 1) {
        ASSERT_EQ(take(r, next, &d), status::ok) << next;
        ++next;
      }
    }
  }
  descriptor d;
  while (next != base + 40) ASSERT_EQ(take(r, next++, &d), status::ok);
  EXPECT_EQ(take(r, next, &d), status::again);
  EXPECT_EQ(r.ctl->reserved, base + 40);  // wrapped through zero
  EXPECT_EQ(r.ctl->consumed, base + 40);
}

// A producer reads the completion counter after publishing, so the proxy may already have
// run its descriptor and later ones: the count can be behind, at or past the end position,
// and the ticket must be that position's full count in every case (also across 2^32).
TEST(proxy_ring, ticket_widening_is_exact_when_the_count_is_behind_at_or_past_the_end) {
  using dev::detail::proxy_ticket_of;
  EXPECT_EQ(proxy_ticket_of(0, 1), 1u);
  EXPECT_EQ(proxy_ticket_of(990, 1000), 1000u);   // behind: the usual case
  EXPECT_EQ(proxy_ticket_of(1000, 1000), 1000u);  // just completed
  EXPECT_EQ(proxy_ticket_of(1300, 1000), 1000u);  // completed, and 300 more after it
  const uint64_t lap = uint64_t{5} << 32;
  EXPECT_EQ(proxy_ticket_of(lap - 3, 2), lap + 2);           // count below the wrap, end after it
  EXPECT_EQ(proxy_ticket_of(lap + 7, 0xfffffffcu), lap - 4);  // count past the wrap, end before it
  // The settle that the old unsigned widening broke: a count past the end must satisfy
  // the ticket at once, not 2^32 descriptors later.
  const uint64_t t = proxy_ticket_of(1300, 1000);
  EXPECT_FALSE(dev::ring_before<64>(1300, t));
}

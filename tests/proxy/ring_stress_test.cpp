// Many producers, one consumer: over 10,000,000 descriptors (GDAKI_PROXY_RING_DESCRIPTORS
// overrides, e.g. fewer under TSan) no descriptor is lost, duplicated or torn.
// Producers run as a host grid (8 blocks x 8 threads), the same code a kernel would run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gdaki/device/host_grid.hpp"
#include "gdaki/proxy/host_ring.hpp"
#include "gdaki/proxy/ring.hpp"

using namespace gdaki;
using namespace gdaki::proxy;

namespace {

uint64_t descriptors_to_run() {
  if (const char* e = std::getenv("GDAKI_PROXY_RING_DESCRIPTORS")) return std::strtoull(e, nullptr, 10);
  return 10'000'000;
}

// Fields derived from (producer, index), so the consumer can check the whole body, not
// only the check word.
uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  return x ^ (x >> 27);
}

descriptor make(uint32_t producer, uint64_t index) {
  const uint64_t tag = (uint64_t{producer} << 40) | index;
  descriptor d = make_compare_swap(static_cast<uint16_t>(producer), mix(tag), static_cast<uint32_t>(index),
                                   tag, mix(tag + 1), mix(tag + 2), static_cast<uint32_t>(mix(tag + 3)),
                                   static_cast<uint16_t>(producer));
  return d;
}

bool body_matches(const descriptor& d, uint32_t producer, uint64_t index) {
  const descriptor e = make(producer, index);
  return d.op == e.op && d.peer == e.peer && d.remote_addr == e.remote_addr && d.remote_key == e.remote_key &&
         d.operand0 == e.operand0 && d.operand1 == e.operand1 && d.local_addr == e.local_addr &&
         d.local_key == e.local_key && d.counter == e.counter && d.length == e.length;
}

}  // namespace

TEST(proxy_ring_stress, many_producers_one_consumer_lose_duplicate_or_tear_nothing) {
  constexpr uint32_t blocks = 8, threads = 8, producers = blocks * threads;
  const uint64_t total = descriptors_to_run();
  ASSERT_GE(total, producers);
  host_ring ring;
  ASSERT_EQ(ring.init(10, producers), status::ok);
  ring_handle r = ring.handle();

  std::vector<uint64_t> quota(producers, total / producers);
  for (uint64_t i = 0; i < total % producers; ++i) ++quota[i];

  // The consumer: takes positions in order, checks each copy, counts per producer.
  std::vector<uint64_t> next_index(producers, 0);
  uint64_t consumed = 0, torn = 0, out_of_order = 0, bad_body = 0;
  std::string first_problem;
  std::thread consumer([&] {
    uint32_t pos = 0, released = 0;
    uint32_t idle = 0;
    while (consumed < total) {
      descriptor d;
      descriptor_fault f{};
      const status st = ring_peek(r, pos, &d, &f);
      if (st == status::again) {
        if (pos != released) {  // hand back what we hold before waiting
          ring_release(r, pos, pos - released);
          released = pos;
        }
        dev::arch::spin_pause(idle++);
        continue;
      }
      idle = 0;
      if (st != status::ok) {
        if (torn++ == 0) first_problem = std::string("torn at ") + std::to_string(pos) + ": " + to_string(f);
      } else {
        const uint32_t p = d.peer;
        const uint64_t index = d.operand0 & ((uint64_t{1} << 40) - 1);
        if (p >= producers || index != next_index[p] || (d.operand0 >> 40) != p) {
          if (out_of_order++ == 0)
            first_problem = "producer " + std::to_string(p) + " index " + std::to_string(index) + " expected " +
                            (p < producers ? std::to_string(next_index[p]) : std::string("?"));
        } else if (!body_matches(d, p, index)) {
          if (bad_body++ == 0) first_problem = "body mismatch at " + std::to_string(pos);
        }
        if (p < producers) next_index[p] = index + 1;
      }
      ++pos;
      ++consumed;
      if (pos - released >= 32) {  // return credits in batches, as the proxy does
        ring_release(r, pos, pos - released);
        released = pos;
      }
    }
    ring_release(r, pos, pos - released);
  });

  std::vector<uint64_t> pushed(producers, 0);
  std::vector<int> failures(producers, 0);
  dev::host::launch(blocks, threads, [&] {
    const uint32_t me = dev::arch::block_rank_in_grid() * threads + dev::arch::thread_rank_in_block();
    for (uint64_t i = 0; i < quota[me]; ++i) {
      if (ring_push(r, make(me, i), wait_forever) != status::ok) {
        ++failures[me];
        return;
      }
      ++pushed[me];
    }
  });
  consumer.join();

  for (uint32_t p = 0; p < producers; ++p) {
    EXPECT_EQ(failures[p], 0) << "producer " << p;
    EXPECT_EQ(pushed[p], quota[p]) << "producer " << p;
    EXPECT_EQ(next_index[p], quota[p]) << "producer " << p << ": lost or duplicated descriptors";
  }
  EXPECT_EQ(consumed, total);
  EXPECT_EQ(torn, 0u) << first_problem;
  EXPECT_EQ(out_of_order, 0u) << first_problem;
  EXPECT_EQ(bad_body, 0u) << first_problem;
  EXPECT_EQ(r.ctl->reserved, static_cast<uint32_t>(total));
  EXPECT_EQ(r.ctl->credits, ring_capacity(r)) << "every credit came back";
}

// The Ethernet and semaphore device API on CPU threads (the host grid launcher emulates
// warps and blocks), against a NIC model without a network (fake_eth_nic.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "eth/eth_kernels.hpp"
#include "eth/fake_eth_nic.hpp"
#include "gdaki/device/host_grid.hpp"
#include "gdaki/eth/host_semaphore.hpp"

using namespace eth_test;
using gdaki::status;
namespace {

TEST(eth_rxq, a_zero_timeout_receive_takes_what_is_there_and_bad_sizes_are_invalid) {
  test_rxq q(8, 64);
  uint64_t first = 99;
  uint32_t n = 99;
  EXPECT_EQ(dev::eth_rxq_receive(q.h, 0, 0, &first, &n), status::invalid);
  EXPECT_EQ(dev::eth_rxq_receive(q.h, 9, 0, &first, &n), status::invalid);
  ASSERT_EQ(dev::eth_rxq_receive(q.h, 4, 0, &first, &n), status::ok);
  EXPECT_EQ(n, 0u);
  ASSERT_TRUE(q.place(11));
  ASSERT_TRUE(q.place(12));
  ASSERT_EQ(dev::eth_rxq_receive(q.h, 4, 0, &first, &n), status::ok);
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(n, 2u);
  uint32_t bytes = 0, rule = 0;
  EXPECT_EQ(dev::eth_rxq_frame(q.h, 1, &bytes, &rule)[0], 12);
  EXPECT_EQ(bytes, 64u);
  EXPECT_EQ(rule, 7u);
  ASSERT_EQ(dev::eth_rxq_receive(q.h, 4, 0, &first, &n), status::ok);
  EXPECT_EQ(first, 2u) << "the next receive starts after what was handed out";
  EXPECT_EQ(n, 0u);
}

TEST(eth_rxq, a_receive_waits_for_max_frames_or_returns_the_partial_batch_at_the_timeout) {
  test_rxq q(8, 64);
  ASSERT_TRUE(q.place(1));
  uint64_t first = 0;
  uint32_t n = 0;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(dev::eth_rxq_receive(q.h, 4, 20'000'000, &first, &n), status::ok);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(20));
  EXPECT_EQ(n, 1u);
  std::thread nic([&] {
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      q.place(2 + i);
    }
  });
  ASSERT_EQ(dev::eth_rxq_receive(q.h, 4, dev::wait_forever, &first, &n), status::ok);
  nic.join();
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(n, 4u) << "waited for all four";
}

TEST(eth_rxq, a_full_queue_refuses_frames_until_the_receiver_releases_them) {
  test_rxq q(4, 64);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.place(i));
  EXPECT_FALSE(q.place(4)) << "no slot is free";
  uint64_t first = 0;
  uint32_t n = 0;
  ASSERT_EQ(dev::eth_rxq_receive(q.h, 4, 0, &first, &n), status::ok);
  ASSERT_EQ(n, 4u);
  EXPECT_FALSE(q.place(4)) << "received but not released: still not free";
  ASSERT_EQ(dev::eth_rxq_release(q.h, first, 2), status::ok);
  EXPECT_TRUE(q.place(4));
  EXPECT_TRUE(q.place(5));
  EXPECT_FALSE(q.place(6));
}

// Four receivers share one queue (grid sharing) while the NIC places 20,000 frames:
// every frame is handed to exactly one of them, and releases complete in order.
TEST(eth_rxq, grid_shared_receivers_get_disjoint_ranges_that_cover_every_frame) {
  test_rxq q(256, 64);
  constexpr uint64_t frames = 200000;
  std::vector<std::atomic<int>> seen(frames);
  std::atomic<uint64_t> total{0};
  std::thread nic([&] {
    for (uint64_t v = 0; v < frames;) {
      if (q.place(v)) {
        ++v;
      } else {
        std::this_thread::yield();
      }
    }
  });
  std::atomic<int> errors{0};
  gdaki::dev::host::launch(4, 1, [&] {
    while (total.load() < frames) {
      uint64_t first = 0;
      uint32_t n = 0;
      if (dev::eth_rxq_receive<dev::scope_thread, dev::sharing::grid>(q.h, 16, 0, &first, &n) != status::ok) ++errors;
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t bytes = 0;
        uint64_t v = 0;
        std::memcpy(&v, dev::eth_rxq_frame(q.h, first + i, &bytes), 8);
        if (v != first + i || v >= frames) {
          ++errors;
        } else {
          seen[v].fetch_add(1);
        }
      }
      if (dev::eth_rxq_release<dev::sharing::grid>(q.h, first, n, 5'000'000'000ull) != status::ok) ++errors;
      total.fetch_add(n);
      if (n == 0) std::this_thread::yield();
    }
  });
  nic.join();
  EXPECT_EQ(errors.load(), 0);
  uint64_t once = 0;
  for (auto& s : seen) once += s.load() == 1;
  EXPECT_EQ(once, frames);
}

// A receive kernel (warp or block scope) hands batches to a CPU thread through the
// semaphore; the CPU thread checks that the batches tile the queue in order and that the
// lanes summed each batch's frames, then releases the frames and frees the slot.
template <typename Scope>
void receive_kernel_feeds_a_cpu_thread(uint32_t threads) {
  test_rxq q(128, 64);
  gdaki::eth::host_semaphore sem;
  ASSERT_EQ(sem.create(4, sizeof(batch_note)), status::ok);
  constexpr uint64_t frames = 5000;
  rx_pipeline_args a{&q.h, sem.handle(), frames};
  std::atomic<bool> nic_stop{false};
  std::thread nic([&] {
    for (uint64_t v = 0; v < frames && !nic_stop.load();) {
      if (q.place(v * 1000 + 7)) {
        ++v;
      } else {
        std::this_thread::yield();
      }
    }
  });
  uint64_t next = 0, batches = 0, bad = 0;
  std::thread consumer([&] {
    for (uint32_t b = 0; next < frames; ++b) {
      const uint32_t slot = b % sem.handle().count;
      if (dev::semaphore_wait_status(sem.handle(), slot, dev::semaphore_status::ready, 10'000'000'000ull) !=
          status::ok) {
        ++bad;
        break;
      }
      const batch_note note = *static_cast<const batch_note*>(dev::semaphore_payload(sem.handle(), slot));
      uint64_t want = 0;
      for (uint64_t p = note.first; p < note.first + note.count; ++p) want += p * 1000 + 7;
      if (note.first != next || note.count == 0 || note.count > 32 || note.value_sum != want) ++bad;
      next = note.first + note.count;
      ++batches;
      (void)dev::eth_rxq_release(q.h, note.first, note.count);
      (void)dev::semaphore_set_status(sem.handle(), slot, dev::semaphore_status::free);
    }
  });
  gdaki::dev::host::launch(1, threads, [&] { rx_pipeline_kernel<Scope>(a); });
  consumer.join();
  nic_stop.store(true);
  nic.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(next, frames);
  EXPECT_GE(batches, frames / 32);
}

TEST(eth_pipeline, a_warp_receive_kernel_hands_batches_to_a_cpu_thread_through_a_semaphore) {
  receive_kernel_feeds_a_cpu_thread<dev::scope_warp>(32);
}

TEST(eth_pipeline, a_block_receive_kernel_hands_batches_to_a_cpu_thread_through_a_semaphore) {
  receive_kernel_feeds_a_cpu_thread<dev::scope_block>(64);
}

// Senders at each scope from two blocks: one descriptor per non-skipping lane, each
// frame exactly once, everything committed.
template <typename Scope>
void every_lane_sends_its_frame_once(uint32_t blocks, uint32_t threads) {
  test_txq q(512);
  constexpr uint32_t frames = 300;
  std::vector<uint64_t> addrs(frames);
  for (uint32_t i = 0; i < frames; ++i) addrs[i] = 0x10000 + i * 64;
  tx_args a{&q.h, addrs.data(), frames, 60};
  std::atomic<int> errors{0};
  gdaki::dev::host::launch(blocks, threads, [&] {
    const uint32_t rank = dev::arch::block_rank_in_grid() * dev::arch::threads_in_block() +
                          dev::arch::thread_rank_in_block();
    status st = status::ok;
    tx_kernel<Scope>(a, rank, blocks * threads, &st);
    if (st != status::ok) ++errors;
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(dev::arch::load_acquire(&q.h.committed), frames);
  std::set<uint64_t> sent;
  for (uint32_t i = 0; i < frames; ++i) {
    EXPECT_EQ(q.ring[i].bytes, 60u);
    sent.insert(q.ring[i].addr);
  }
  EXPECT_EQ(sent.size(), frames);
  EXPECT_EQ(*sent.begin(), 0x10000u);
  EXPECT_EQ(*sent.rbegin(), 0x10000u + (frames - 1) * 64);
}

TEST(eth_txq, thread_scope_senders_write_one_descriptor_each) { every_lane_sends_its_frame_once<dev::scope_thread>(2, 8); }
TEST(eth_txq, warp_scope_senders_write_one_descriptor_per_lane_that_does_not_skip) {
  every_lane_sends_its_frame_once<dev::scope_warp>(2, 64);
}
TEST(eth_txq, block_scope_senders_write_one_descriptor_per_thread_that_does_not_skip) {
  every_lane_sends_its_frame_once<dev::scope_block>(2, 96);
}

TEST(eth_txq, nothing_reaches_the_nic_before_commit_and_a_notified_send_completes) {
  test_txq q(8);
  uint64_t done = 0, pos = 0;
  ASSERT_EQ(dev::eth_txq_send(q.h, 0x1000, 60, dev::eth_send_flags::none, &pos), status::ok);
  ASSERT_EQ(dev::eth_txq_send(q.h, 0x2000, 60, dev::eth_send_flags::notify, &pos), status::ok);
  EXPECT_EQ(pos, 2u);
  EXPECT_EQ(q.complete_committed(&done), 0u) << "not committed: the NIC sees nothing";
  EXPECT_EQ(dev::eth_txq_test(q.h, pos), status::again);
  ASSERT_EQ(dev::eth_txq_commit(q.h), status::ok);
  EXPECT_EQ(q.complete_committed(&done), 2u);
  EXPECT_EQ(dev::eth_txq_test(q.h, pos), status::ok);
  EXPECT_EQ(dev::eth_txq_wait(q.h, pos, 0), status::ok);
  EXPECT_EQ(dev::eth_txq_send(q.h, 0x3000, 0, dev::eth_send_flags::none, &pos), status::invalid);
}

TEST(eth_txq, a_full_ring_times_out_reserving_nothing_and_period_ends_always_notify) {
  test_txq q(8);
  uint64_t pos = 0, done = 0;
  for (uint32_t i = 0; i < 8; ++i) ASSERT_EQ(dev::eth_txq_send(q.h, 0x1000 + i, 60, 0, &pos, 0), status::ok);
  for (uint32_t i = 0; i < 8; ++i) {
    EXPECT_EQ((q.ring[i].flags & dev::eth_send_flags::notify) != 0, (i + 1) % 4 == 0) << "descriptor " << i;
  }
  EXPECT_EQ(dev::eth_txq_send(q.h, 0x2000, 60, 0, &pos, 1'000'000), status::timeout);
  EXPECT_EQ(q.h.reserved, 8u) << "a timed-out send reserved nothing";
  (void)dev::eth_txq_commit(q.h);
  q.complete_committed(&done);
  EXPECT_EQ(q.h.completed, 8u) << "the liveness notify freed the ring without any caller asking";
  EXPECT_EQ(dev::eth_txq_send(q.h, 0x2000, 60, 0, &pos, 0), status::ok);
}

TEST(semaphore, the_status_publishes_the_payload_written_before_it) {
  gdaki::eth::host_semaphore sem;
  ASSERT_EQ(sem.create(2, 24), status::ok);
  EXPECT_EQ(sem.create(2, 24), status::invalid) << "created once";
  const dev::semaphore_handle s = sem.handle();
  EXPECT_EQ(s.stride, 64u);
  constexpr uint64_t rounds = 20000;
  uint64_t bad = 0;
  std::thread consumer([&] {
    for (uint64_t r = 0; r < rounds; ++r) {
      const uint32_t slot = static_cast<uint32_t>(r % 2);
      (void)dev::semaphore_wait_status(s, slot, dev::semaphore_status::ready);
      const auto* p = static_cast<const uint64_t*>(dev::semaphore_payload(s, slot));
      if (p[0] != r || p[1] != ~r || p[2] != r * 3) ++bad;
      (void)dev::semaphore_set_status(s, slot, dev::semaphore_status::free);
    }
  });
  for (uint64_t r = 0; r < rounds; ++r) {
    const uint32_t slot = static_cast<uint32_t>(r % 2);
    ASSERT_EQ(dev::semaphore_wait_status(s, slot, dev::semaphore_status::free, 10'000'000'000ull), status::ok);
    auto* p = static_cast<uint64_t*>(dev::semaphore_payload(s, slot));
    p[0] = r;
    p[1] = ~r;
    p[2] = r * 3;
    ASSERT_EQ(dev::semaphore_set_status(s, slot, dev::semaphore_status::ready), status::ok);
  }
  consumer.join();
  EXPECT_EQ(bad, 0u);
}

TEST(semaphore, one_of_several_consumers_claims_each_ready_slot) {
  gdaki::eth::host_semaphore sem;
  ASSERT_EQ(sem.create(64, 8), status::ok);
  const dev::semaphore_handle s = sem.handle();
  for (uint32_t i = 0; i < 64; ++i) ASSERT_EQ(dev::semaphore_set_status(s, i, dev::semaphore_status::ready), status::ok);
  std::vector<std::atomic<int>> claims(64);
  gdaki::dev::host::launch(1, 4, [&] {
    for (uint32_t i = 0; i < 64; ++i) {
      if (dev::semaphore_transition(s, i, dev::semaphore_status::ready, dev::semaphore_status::hold) == status::ok) {
        claims[i].fetch_add(1);
      }
    }
  });
  for (auto& c : claims) EXPECT_EQ(c.load(), 1);
  EXPECT_EQ(dev::semaphore_get_status(s, 5), dev::semaphore_status::hold);
}

TEST(semaphore, a_bounded_wait_times_out_and_a_slot_out_of_range_is_invalid) {
  gdaki::eth::host_semaphore sem;
  EXPECT_EQ(sem.create(0, 8), status::invalid);
  ASSERT_EQ(sem.create(2, 8), status::ok);
  EXPECT_EQ(dev::semaphore_wait_status(sem.handle(), 0, dev::semaphore_status::ready, 1'000'000), status::timeout);
  EXPECT_EQ(dev::semaphore_wait_status(sem.handle(), 2, dev::semaphore_status::free, 0), status::invalid);
  EXPECT_EQ(dev::semaphore_set_status(sem.handle(), 2, dev::semaphore_status::ready), status::invalid);
  EXPECT_EQ(dev::semaphore_transition(sem.handle(), 1, dev::semaphore_status::ready, dev::semaphore_status::hold),
            status::again);
}

}  // namespace

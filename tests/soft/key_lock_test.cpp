// The key table's reader-writer lock (src/providers/soft/key_lock.hpp): readers on many
// threads never overlap a writer, a writer gets in between readers, and readers are
// preferred: a reader that holds the lock and waits for a second reader is never stuck
// behind a waiting writer (the executor's same-process wait, key_lock.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "../../src/providers/soft/key_lock.hpp"

namespace {

using gdaki::soft::key_lock;
using namespace std::chrono_literals;

TEST(key_lock, readers_never_see_a_writer_inside_and_every_writer_gets_in) {
  key_lock l;
  uint64_t guarded_a = 0, guarded_b = 0;  // a writer keeps them equal; a reader checks it
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> torn{0}, reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 6; ++t) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        {
          std::shared_lock g(l);
          if (guarded_a != guarded_b) torn.fetch_add(1, std::memory_order_relaxed);
          reads.fetch_add(1, std::memory_order_relaxed);
        }
        // Readers come and go (an executor holds it for one WQE): a writer needs a moment
        // with none inside, which readers that never leave would not give it.
        std::this_thread::yield();
      }
    });
  }
  constexpr uint64_t writes = 500;
  std::thread writer([&] {
    for (uint64_t i = 0; i < writes; ++i) {
      std::unique_lock g(l);
      ++guarded_a;
      std::this_thread::yield();  // widen the window a reader would have to see half of it
      ++guarded_b;
    }
  });
  writer.join();
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(torn.load(), 0u) << "a reader was inside while a writer was";
  EXPECT_EQ(guarded_a, writes);
  EXPECT_EQ(guarded_b, writes);
  EXPECT_GT(reads.load(), 0u);
}

TEST(key_lock, a_reader_waiting_for_another_reader_is_not_held_off_by_a_waiting_writer) {
  key_lock l;
  std::atomic<bool> first_in{false}, writer_waiting{false}, second_done{false}, writer_done{false};
  std::thread first([&] {
    std::shared_lock g(l);
    first_in = true;
    // Holds the lock until a second reader got in, as an executor holds it while its
    // same-process peer's reply, which needs it shared too, is produced.
    while (!second_done) std::this_thread::sleep_for(1ms);
  });
  while (!first_in) std::this_thread::sleep_for(1ms);
  std::thread writer([&] {
    writer_waiting = true;
    std::unique_lock g(l);
    writer_done = true;
  });
  while (!writer_waiting) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);  // the writer is now spinning on the lock
  EXPECT_FALSE(writer_done) << "the writer went in while a reader held the lock";
  std::thread second([&] {
    std::shared_lock g(l);
    second_done = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  while (!second_done && std::chrono::steady_clock::now() - t0 < 5s) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(second_done.load()) << "the second reader was held off by the waiting writer: the first never lets go";
  second_done = true;  // release the first reader either way, so the test ends
  second.join();
  first.join();
  writer.join();
  EXPECT_TRUE(writer_done.load());
}

}  // namespace

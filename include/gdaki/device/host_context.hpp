// State behind the host half of arch.hpp: which grid/block/warp/lane a CPU thread plays
// when it runs device code through the host grid launcher (host_grid.hpp). A thread that
// is not inside a launch has no context and behaves as a lone lane of a one-thread block.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace gdaki::dev::host {

struct dim3_t {
  uint32_t x = 1, y = 1, z = 1;
  constexpr uint32_t count() const { return x * y * z; }
};

// A reusable barrier for a fixed set of CPU threads. Spins briefly, then yields, then
// sleeps in the kernel (futex through std::atomic::wait): emulated warps run many more
// threads than a 2-core machine has, so pure spinning would starve the lanes it waits for.
class thread_barrier {
 public:
  explicit thread_barrier(uint32_t count) : count_(count) {}
  thread_barrier(const thread_barrier&) = delete;
  thread_barrier& operator=(const thread_barrier&) = delete;

  void arrive_and_wait() {
    if (count_ <= 1) return;
    const uint32_t phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) {
      arrived_.store(0, std::memory_order_relaxed);
      phase_.store(phase + 1, std::memory_order_release);
      phase_.notify_all();
      return;
    }
    for (int i = 0; i < 256; ++i) {
      if (phase_.load(std::memory_order_acquire) != phase) return;
      if (i >= 32) std::this_thread::yield();
    }
    while (phase_.load(std::memory_order_acquire) == phase) phase_.wait(phase, std::memory_order_acquire);
  }

 private:
  const uint32_t count_;
  std::atomic<uint32_t> arrived_{0};
  std::atomic<uint32_t> phase_{0};
};

// One emulated warp: its lanes exchange values through slots between two barriers.
struct warp_state {
  explicit warp_state(uint32_t lanes) : nlanes(lanes), barrier(lanes) {}
  uint32_t nlanes;
  thread_barrier barrier;
  uint64_t slots[32] = {};
};

struct block_state {
  explicit block_state(uint32_t threads) : barrier(threads) {}
  thread_barrier barrier;
  uint64_t slots[1024] = {};  // exchange space for block-wide scans and broadcasts
};

struct thread_context {
  dim3_t thread_idx, block_idx, block_dim, grid_dim;
  uint32_t lane = 0;
  warp_state* warp = nullptr;
  block_state* block = nullptr;
};

// The context of the calling CPU thread, or nullptr outside a launch.
inline thread_local thread_context* current_context = nullptr;

}  // namespace gdaki::dev::host

// internal: the lock that makes one thread at a time the executor of a QP's send queue.
// Every doorbell and engine pass takes it with try_lock (whoever comes first executes, the
// other leaves the work to it), so the uncontended try and the release are on every WQE's
// path: an atomic exchange and a plain release store, no library call and no futex word
// to check on unlock. lock() (modify, destroy: rare) spins, then yields, while an
// executor finishes; executors never sleep holding it for longer than a wire wait.
#pragma once

#include <atomic>
#include <cstdint>

#include "gdaki/device/arch.hpp"

namespace gdaki::soft {

class exec_lock {
 public:
  exec_lock() = default;
  exec_lock(const exec_lock&) = delete;
  exec_lock& operator=(const exec_lock&) = delete;

  bool try_lock() noexcept {
    // Look before the exchange, so a held lock is not hammered with read-for-ownership.
    return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
  }
  void lock() noexcept {
    for (uint32_t i = 0; !try_lock(); ++i) dev::arch::spin_pause(i);  // pauses, then yields
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

}  // namespace gdaki::soft

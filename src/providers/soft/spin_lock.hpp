// internal: a lock whose uncontended take and release are an atomic exchange and a plain
// release store: no library call, and no futex word to check on unlock. For the soft NIC's
// locks that sit on every WQE's or CQE's path and are held for a few hundred
// instructions:
// - soft_qp::exec_mu makes one thread at a time the executor of a QP's send queue. Every
//   doorbell and engine pass takes it with try_lock (whoever comes first executes, the
//   other leaves the work to it). lock() (modify, destroy: rare) spins, then yields, while
//   an executor finishes; executors never sleep holding it for longer than a wire wait.
// - soft_cq::mu serialises the CQE writers of QPs that share a CQ. A std::mutex there
//   cost ~60 of the ~175 instructions of writing one CQE (callgrind, write_bw -Q 1).
#pragma once

#include <atomic>
#include <cstdint>

#include "gdaki/device/arch.hpp"

namespace gdaki::soft {

class spin_lock {
 public:
  spin_lock() = default;
  spin_lock(const spin_lock&) = delete;
  spin_lock& operator=(const spin_lock&) = delete;

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

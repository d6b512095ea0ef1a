// internal: the key table's reader-writer lock. Every WQE the soft NIC executes holds it
// shared while it touches registered memory, and deregistration takes it exclusively so
// that once it returns no access to the range is in flight. Readers are the hot side: one
// atomic add to take it and one to release it, inline. Writers (registration,
// deregistration) are rare and wait until no reader is inside. Like glibc's default
// rwlock, readers are preferred: a reader gets in while a writer waits, because a reader
// may already hold it and wait for another thread that needs it shared (an executor
// blocked on a same-process peer's reply, say); writer-preference would deadlock there.
// Readers hold it for one WQE's work (the executor releases it before it waits on a
// response), so both sides wait by spinning, then yielding.
#pragma once

#include <atomic>
#include <cstdint>

#include "gdaki/device/arch.hpp"

namespace gdaki::soft {

class key_lock {
 public:
  key_lock() = default;
  key_lock(const key_lock&) = delete;
  key_lock& operator=(const key_lock&) = delete;

  void lock_shared() noexcept {
    for (uint32_t i = 0;; ++i) {
      // Acquire: pairs with the writer's release in unlock(), so its update is seen.
      if ((word_.fetch_add(1, std::memory_order_acquire) & writer) == 0) return;
      word_.fetch_sub(1, std::memory_order_relaxed);  // a writer is inside: step back
      while ((word_.load(std::memory_order_relaxed) & writer) != 0) dev::arch::spin_pause(i++);
    }
  }
  void unlock_shared() noexcept { word_.fetch_sub(1, std::memory_order_release); }

  void lock() noexcept {
    for (uint32_t i = 0;; ++i) {
      uint32_t idle = 0;
      // Acquire: every reader's release (unlock_shared) happens before we go on.
      if (word_.load(std::memory_order_relaxed) == 0 &&
          word_.compare_exchange_weak(idle, writer, std::memory_order_acquire, std::memory_order_relaxed)) {
        return;
      }
      dev::arch::spin_pause(i);
    }
  }
  void unlock() noexcept { word_.fetch_sub(writer, std::memory_order_release); }

 private:
  static constexpr uint32_t writer = 1u << 31;
  std::atomic<uint32_t> word_{0};  // writer bit | readers inside (or stepping back)
};

}  // namespace gdaki::soft

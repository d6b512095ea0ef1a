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
//
// Announced readers: the mapped short path (executor.cpp, run_keys), where the two atomic
// adds cost a fifth of the 8-byte WRITE rate (write_bw -s 8 over shm, 18.3 -> 22.4 Mpps
// without them) and the one shared word moves between the cores of every thread that
// rings, reads under a word of its own instead (key_reader_slot, one per QP, written by
// its executor only): a plain store to announce, a load of the writer bit, a store to
// leave. The writer sets its bit and then makes every
// thread of the process execute a full barrier (membarrier(2), PRIVATE_EXPEDITED) before
// it looks at the announcements, so either it sees a reader's announcement and waits for
// it, or that reader sees the bit and takes the lock the counted way: the Dekker pattern
// with the costly fence on the rare side (as liburcu's membarrier flavour). Where the
// kernel does not offer that command, nobody announces and every reader counts.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "gdaki/device/arch.hpp"

namespace gdaki::soft {

class key_lock;

// A word where one reader at a time (a QP's executor, under its exec_mu) announces that
// it reads under the key table; registered with the lock for its whole life.
class key_reader_slot {
 public:
  explicit key_reader_slot(key_lock& l);
  ~key_reader_slot();
  key_reader_slot(const key_reader_slot&) = delete;
  key_reader_slot& operator=(const key_reader_slot&) = delete;

 private:
  friend class key_lock;
  key_lock& lock_;
  std::atomic<uint32_t> inside_{0};
};

class key_lock {
 public:
  constexpr key_lock() = default;
  ~key_lock();  // leaves the fork handlers' list (key_lock.cpp)
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
  // Takes it shared unless a writer is inside; never waits.
  bool try_lock_shared() noexcept {
    if ((word_.fetch_add(1, std::memory_order_acquire) & writer) == 0) return true;
    word_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  void unlock_shared() noexcept { word_.fetch_sub(1, std::memory_order_release); }

  // Enters as an announced reader (the header says how): false if a writer is inside or
  // this process cannot announce, and the caller then takes the lock shared. Never waits.
  bool try_enter_announced(key_reader_slot& r) noexcept {
    // Acquire: pairs with add()'s release, so a writer that came before it is seen below.
    if (!announcing_.load(std::memory_order_acquire)) return false;
    r.inside_.store(1, std::memory_order_relaxed);
    // The compiler keeps the store before the load; the CPU is made to by the writer's
    // membarrier, which also orders the load after it.
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // Acquire: pairs with the last writer's release (unlock), so its table update is seen.
    if ((word_.load(std::memory_order_acquire) & writer) == 0) return true;
    r.inside_.store(0, std::memory_order_release);
    return false;
  }
  // Release: our reads of registered memory before a writer's acquire of the 0.
  void leave_announced(key_reader_slot& r) noexcept { r.inside_.store(0, std::memory_order_release); }

  void lock() noexcept {
    for (uint32_t i = 0;; ++i) {
      uint32_t idle = 0;
      // Acquire: every reader's release (unlock_shared) happens before we go on.
      if (word_.load(std::memory_order_relaxed) == 0 &&
          word_.compare_exchange_weak(idle, writer, std::memory_order_acquire, std::memory_order_relaxed)) {
        break;
      }
      dev::arch::spin_pause(i);
    }
    wait_for_announced();
  }
  void unlock() noexcept { word_.fetch_sub(writer, std::memory_order_release); }

 private:
  friend class key_reader_slot;
  void add(key_reader_slot* r);
  void remove(key_reader_slot* r);
  // fork(2) handlers (key_lock.cpp says why), installed with the first reader slot.
  void watch_forks();
  static void fork_prepare();
  static void fork_parent();
  static void fork_child();
  // The writer's side of announcing (key_lock.cpp), out of line: writers are rare. When
  // readers announce: the barrier, then every slot read 0.
  void wait_for_announced() noexcept;

  static constexpr uint32_t writer = 1u << 31;
  std::atomic<uint32_t> word_{0};  // writer bit | readers inside (or stepping back)
  // Set once the kernel has registered this process for membarrier's expedited command,
  // at the first reader slot (stored under slots_mu_); a fork's child registers again or
  // stops announcing (fork_child).
  std::atomic<bool> announcing_{false};
  std::mutex slots_mu_;  // the writer holds it while it reads the slots
  std::vector<key_reader_slot*> slots_;
};

inline key_reader_slot::key_reader_slot(key_lock& l) : lock_(l) { l.add(this); }
inline key_reader_slot::~key_reader_slot() { lock_.remove(this); }

}  // namespace gdaki::soft

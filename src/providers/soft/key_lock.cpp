// The key table lock's announced readers: registration with the kernel, the slot list, and
// the writer's wait (key_lock.hpp says why they exist and why they are safe).
#include "key_lock.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <thread>

namespace gdaki::soft {

namespace {

long membarrier(int cmd) { return ::syscall(__NR_membarrier, cmd, 0u, 0); }

// Whether this process may use the expedited private barrier: the command is offered and
// the registration (per address space: a fork's child is not registered) succeeded.
bool register_expedited() {
  const long offered = membarrier(MEMBARRIER_CMD_QUERY);
  if (offered < 0 || (offered & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

// Whether this process is registered for the expedited private barrier. Registering a
// process that already runs several threads makes the kernel wait for an RCU grace period
// (synchronize_rcu), which on a loaded machine took more than 12 s (a process stuck in D
// state in key_lock::add: the security flood test's honest peers, started while the
// machine was flooded). With one thread it is immediate. So it is asked once, when the
// library is loaded, and only while the process still has one thread (a program starts
// so; one that loads the library later, threads running, keeps counted readers); a
// fork's child, one thread again, asks again (fork_child).
std::atomic<bool> g_expedited{false};

bool single_threaded() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return false;
  char line[256];
  long threads = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "Threads: %ld", &threads) == 1) break;
  }
  std::fclose(f);
  return threads == 1;
}

[[gnu::constructor]] void register_at_load() {
  g_expedited.store(single_threaded() && register_expedited(), std::memory_order_relaxed);
}

// Every key_lock with reader slots (in practice the one key table), for the fork handlers.
// Never destroyed: the key table, constant-initialized, outlives every other static and
// takes itself out of the list in its destructor.
std::mutex& g_locks_mu = *new std::mutex;
std::vector<key_lock*>& g_locks = *new std::vector<key_lock*>;

}  // namespace

// fork(2) copies this lock as it is at that instant, and only the forking thread lives on
// in the child: a writer caught between its bit and its unlock (with a membarrier call in
// between, milliseconds on a busy machine) would leave the child's table half-updated
// and its bit set for good, so the child's every executor would spin forever; a reader
// caught inside would leave a count no writer in the child ever sees leave; slots_mu_
// caught held would stop the child's first QP. (Found by the security flood test, which
// forks honest peers from a process that registers and deregisters all along: "oob: timed
// out waiting to accept", 4 runs in 5.) So a fork waits until it can hold the lock
// exclusively, and both processes release it afterwards, the child with nobody inside.
void key_lock::fork_prepare() {
  g_locks_mu.lock();
  for (key_lock* l : g_locks) {
    l->lock();
    l->slots_mu_.lock();
  }
}

void key_lock::fork_parent() {
  for (key_lock* l : g_locks) {
    l->slots_mu_.unlock();
    l->unlock();
  }
  g_locks_mu.unlock();
}

void key_lock::fork_child() {
  // The child's address space is not registered for membarrier: register it again, or stop
  // announcing.
  const bool registered = register_expedited();
  g_expedited.store(registered, std::memory_order_relaxed);
  for (key_lock* l : g_locks) {
    for (key_reader_slot* s : l->slots_) s->inside_.store(0, std::memory_order_relaxed);
    l->announcing_.store(registered && l->announcing_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    l->slots_mu_.unlock();
    l->unlock();
  }
  g_locks_mu.unlock();
}

void key_lock::watch_forks() {
  static std::once_flag handlers;
  std::call_once(handlers, [] { ::pthread_atfork(fork_prepare, fork_parent, fork_child); });
  std::lock_guard g(g_locks_mu);
  if (std::find(g_locks.begin(), g_locks.end(), this) == g_locks.end()) g_locks.push_back(this);
}

key_lock::~key_lock() {
  std::lock_guard g(g_locks_mu);
  g_locks.erase(std::remove(g_locks.begin(), g_locks.end(), this), g_locks.end());
}

void key_lock::add(key_reader_slot* r) {
  watch_forks();  // before slots_mu_: the fork handlers take g_locks_mu, then slots_mu_
  std::lock_guard lk(slots_mu_);
  if (slots_.empty() && !announcing_.load(std::memory_order_relaxed) && g_expedited.load(std::memory_order_relaxed)) {
    announcing_.store(true, std::memory_order_release);
  }
  slots_.push_back(r);
}

void key_lock::remove(key_reader_slot* r) {
  std::lock_guard lk(slots_mu_);
  slots_.erase(std::remove(slots_.begin(), slots_.end(), r), slots_.end());
}

void key_lock::wait_for_announced() noexcept {
  // Our writer bit is set (the exchange in lock()). Read under slots_mu_, where add()
  // stores it: a reader can announce only after that store, and then sees our bit.
  std::lock_guard lk(slots_mu_);
  if (!announcing_.load(std::memory_order_relaxed)) return;
  // After the barrier every thread of the process has executed a full fence: a reader
  // that announced before it shows below, and one that announces after it reads our bit
  // and counts instead.
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    // Refused after a successful registration (a kernel that withdrew it): readers stop
    // announcing, and those that did are waited out once their stores have long left the
    // store buffers (a preempted thread's leave at its context switch).
    announcing_.store(false, std::memory_order_relaxed);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (key_reader_slot* s : slots_) {
    for (uint32_t i = 0; s->inside_.load(std::memory_order_acquire) != 0; ++i) dev::arch::spin_pause(i);
  }
}

}  // namespace gdaki::soft

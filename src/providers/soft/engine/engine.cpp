// The soft NIC's progress engine: polling, fairness, back-off and wake-ups.
#include "engine.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "../soft_objects.hpp"
#include "executor.hpp"
#include "gdaki/device/arch.hpp"

namespace gdaki::soft {

namespace {
// How soon the engine looks again at a doorbell it left to the ringing thread (pass()).
constexpr uint64_t recheck_ns = 2000;
// The longest idle sleep while every QP is rung through the host hook (each ring wakes a
// sleeper, so the sleep could be endless). A safety net, not a latency figure: were a
// doorbell ever to move without the hook, it would wait this long, never forever. At
// max_sleep_us (2 ms) 4 idle devices took 4.4-4.8% of a core, nearly all of it in the
// kernel's context switches (perf: finish_task_switch); at 100 ms, well under 0.5%
// (tests/soft/idle_cpu_test.cpp, docs/soft-nic.md "Measured").
constexpr uint32_t hooked_sleep_us = 100000;
}  // namespace

engine::engine(const config& cfg) : cfg_(cfg) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  for (uint32_t i = 0; i < cfg_.engine_threads; ++i) threads_.emplace_back([this, i] { run(i); });
}

engine::~engine() {
  stop_.store(true);
  {
    std::lock_guard lk(wake_mu_);
    wake_seq_.fetch_add(1);
  }
  wake_cv_.notify_all();
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  for (auto& t : threads_) t.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void engine::add(const std::shared_ptr<soft_qp>& qp) {
  std::lock_guard lk(list_mu_);
  list_.push_back(qp);
  list_version_.fetch_add(1);
}

void engine::remove(const soft_qp* qp) {
  std::lock_guard lk(list_mu_);
  list_.erase(std::remove_if(list_.begin(), list_.end(), [qp](const auto& p) { return p.get() == qp; }), list_.end());
  list_version_.fetch_add(1);
}

void engine::note_hookless_ringer() {
  hookless_ringers_.store(true);
  wake();  // a sleeper in a long hooked sleep starts polling at max_sleep_us now
}

void engine::wake() {
  // Pairs with run(): a sleeper reads wake_seq before its last pass, so either that pass
  // sees our doorbell record or the sleeper's predicate sees the new sequence number.
  wake_seq_.fetch_add(1);
  if (sleepers_.load() != 0) {
    std::lock_guard lk(wake_mu_);
    wake_cv_.notify_all();
  }
  if (wire_waiters_.load() != 0 && wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
}

void engine::wait_wire(const std::vector<int>& fds, uint32_t wait_us) {
  std::vector<pollfd> p;
  p.reserve(fds.size() + 1);
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  if (wake_fd_ >= 0) p.push_back({wake_fd_, POLLIN, 0});
  const timespec ts{static_cast<time_t>(wait_us / 1000000), static_cast<long>(wait_us % 1000000) * 1000};
  (void)::ppoll(p.data(), p.size(), &ts, nullptr);
  if (wake_fd_ >= 0) {
    uint64_t v = 0;
    (void)!::read(wake_fd_, &v, sizeof(v));
  }
}

void engine::on_doorbell(soft_qp& qp) {
  if (!cfg_.inline_exec) {
    wake();
    return;
  }
  // From now on the engine leaves this QP's doorbells to the threads that ring (pass()).
  // Stored once: the line is read by the engine on every pass.
  if (!qp.host_rings.load(std::memory_order_relaxed)) qp.host_rings.store(true, std::memory_order_relaxed);
  // Execute on the ringing thread. If another executor holds the QP it will re-check the
  // doorbell record after its batch (the engine always does; an inline executor loops
  // below), but wake the engine too in case that executor has just finished.
  for (;;) {
    std::unique_lock lk(qp.exec_mu, std::try_to_lock);
    if (!lk.owns_lock()) {
      wake();
      return;
    }
    const progress_result r = progress_qp(qp, ~uint32_t{0}, wire_wait::window);
    lk.unlock();
    // Only responses are outstanding, and a CPU thread polls this QP's CQ: it collects
    // them (on_poll). Waking the engine for each doorbell would cost a futex call and a
    // context switch per WQE.
    if (r.wait_fd >= 0 && r.deadline == 0 && qp.host_polled_ns.load(std::memory_order_relaxed) != 0) return;
    if (r.deadline != 0 || r.pending) {  // a stall to retry later: the engine owns timers
      wake();
      return;
    }
    // Nothing arrived while we worked? (now = 0: no clock read on the posting path; timed
    // conditions, stalls and the wire's host-driven test, are the engine's.)
    uint64_t deadline = 0;
    if (!has_work(qp, 0, &deadline)) return;
  }
}

void engine::on_poll(soft_qp& qp) {
  // Only the wire needs the poller: a local QP's WQEs complete without it. A remote QP's
  // poller collects its responses itself and, while it does, the engine leaves the QP
  // alone (has_work): on a machine with few cores, a third thread waking on every
  // response would take the CPU from the two that move the bytes.
  if (!cfg_.inline_exec || !qp.wire_busy.load(std::memory_order_acquire)) return;  // busy: remote
  // Every 8th poll reads the clock: enough for has_work's 1 ms, and a poller spinning on
  // an empty CQ does not spend its time in clock_gettime.
  if ((qp.host_polls.fetch_add(1, std::memory_order_relaxed) & 7) == 0) {
    qp.host_polled_ns.store(now_ns(), std::memory_order_relaxed);
  }
  std::unique_lock lk(qp.exec_mu, std::try_to_lock);
  if (!lk.owns_lock()) return;  // the engine or another thread is at it
  const progress_result r = progress_qp(qp, ~uint32_t{0}, wire_wait::response);
  lk.unlock();
  if (r.deadline != 0 && r.wait_fd < 0) wake();  // a stall: the engine owns timers
}

namespace {

// The short path's lease on peer mappings (mapped_pin.hpp) goes back lease_ns after this
// engine first saw it held, whether the QP is idle or busy (a busy one takes it again at
// its next doorbell: one count in and out per lease instead of per doorbell), so a peer's
// deregistration never waits longer for a QP that has stopped.
constexpr uint64_t lease_retry_ns = 50'000;  // not so soon that a sleeping engine spins
void sweep_lease(soft_qp& qp, uint64_t now, uint64_t* deadline) {
  uint64_t due = qp.lease_sweep_ns.load(std::memory_order_relaxed);
  if (due == 0) {
    due = now + wire::mapped_pin::lease_ns;
    qp.lease_sweep_ns.store(due, std::memory_order_relaxed);
  }
  if (now >= due) {
    std::unique_lock lk(qp.exec_mu, std::try_to_lock);
    if (lk.owns_lock()) {
      qp.release_short_pin();
      qp.lease_sweep_ns.store(0, std::memory_order_relaxed);
      return;
    }
    due = now + lease_retry_ns;  // its executor is at work: look again soon
  }
  *deadline = std::min(*deadline, due);
}

}  // namespace

bool engine::pass(uint32_t index, std::vector<std::shared_ptr<soft_qp>>& mine, uint64_t* deadline, std::vector<int>* wire_fds) {
  bool worked = false;
  const uint64_t now = now_ns();
  for (size_t i = 0; i < mine.size(); ++i) {
    if (i % cfg_.engine_threads != index) continue;
    soft_qp& qp = *mine[i];
    if (qp.dead.load(std::memory_order_acquire)) continue;
    if (qp.short_pin_held.load(std::memory_order_relaxed)) sweep_lease(qp, now, deadline);
    uint64_t dl = 0;
    if (!has_work(qp, now, &dl)) {
      if (dl != 0) *deadline = std::min(*deadline, dl);
      continue;
    }
    const bool host_rings = qp.host_rings.load(std::memory_order_relaxed);
    const bool remote = qp.remote.load(std::memory_order_relaxed);
    const bool wire_idle = !remote || !qp.wire_busy.load(std::memory_order_acquire);
    if (cfg_.inline_exec && wire_idle && (remote || host_rings)) {
      // A doorbell waits and nothing is in flight. A CPU thread that rings executes its
      // WQEs itself within nanoseconds (on_doorbell), and on a mapped stream each WQE is a
      // copy: were the engine to race it for them, every copy would move the target's and
      // the QP's cache lines between two cores (a quarter of a small WRITE's rate). So
      // the engine takes a doorbell only once it has waited with the CI unmoved: a pass
      // for a QP no CPU thread rang (a GPU rings without a hook), recheck_ns for one a
      // CPU thread rings (host_rings; a spinning engine passes every ~100 ns, so one pass
      // could still land inside the ringing thread's own execution). A local QP is left
      // to its ringers only once it has one: before that the engine is its only executor.
      // (In loopback the engine used to race the ringing thread on every WQE, won some,
      // so never backed off: a third spinning thread sharing two cores with the ping and
      // the pong; 8 B write_lat 0.9 us in one process against 0.3 us across two.)
      const uint64_t ci = qp.sq_ci_seen.load(std::memory_order_acquire);
      if (ci != qp.engine_seen_ci.load(std::memory_order_relaxed)) {
        qp.engine_seen_ci.store(ci, std::memory_order_relaxed);
        qp.engine_seen_ns.store(now, std::memory_order_relaxed);
        *deadline = std::min(*deadline, now + recheck_ns);
        continue;
      }
      const uint64_t since = qp.engine_seen_ns.load(std::memory_order_relaxed);
      if (host_rings && now - since < recheck_ns) {
        *deadline = std::min(*deadline, since + recheck_ns);
        continue;
      }
    }
    std::unique_lock lk(qp.exec_mu, std::try_to_lock);
    if (!lk.owns_lock()) continue;  // an inline executor has it and re-checks when done
    const progress_result r = progress_qp(qp, cfg_.budget);
    worked = worked || r.worked;
    if (r.deadline != 0) *deadline = std::min(*deadline, r.deadline);
    if (r.wait_fd >= 0 && wire_fds != nullptr) wire_fds->push_back(r.wait_fd);
  }
  return worked;
}

void engine::run(uint32_t index) {
  std::vector<std::shared_ptr<soft_qp>> mine;
  uint64_t seen_version = ~uint64_t{0};
  uint64_t last_work = now_ns();
  uint32_t sleep_us = cfg_.min_sleep_us;
  uint32_t spins = 0;
  std::vector<int> wire_fds;
  uint64_t seen_wake = wake_seq_.load();
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint64_t v = list_version_.load();
    if (v != seen_version) {
      std::lock_guard lk(list_mu_);
      mine = list_;
      seen_version = list_version_.load();
    }
    uint64_t deadline = ~uint64_t{0};
    wire_fds.clear();
    if (pass(index, mine, &deadline, &wire_fds)) {
      last_work = now_ns();
      sleep_us = cfg_.min_sleep_us;
      spins = 0;
      continue;
    }
    const uint64_t now = now_ns();
    const uint64_t idle_ns = now - last_work;
    if (deadline <= now) continue;  // a stall just expired
    if (!wire_fds.empty()) {
      // Requests are in flight: sleep until a response (or a doorbell) comes, at most
      // until the next stall expires and never past max_sleep_us, so the wire's
      // unanswered-request timeout is still checked in time.
      uint64_t wait_ns = uint64_t{cfg_.max_sleep_us} * 1000;
      if (deadline != ~uint64_t{0}) wait_ns = std::min(wait_ns, deadline - now);
      wire_waiters_.fetch_add(1);
      const uint64_t seq = wake_seq_.load();
      if (seq == seen_wake) wait_wire(wire_fds, static_cast<uint32_t>(wait_ns / 1000) + 1);
      seen_wake = seq;
      wire_waiters_.fetch_sub(1);
      continue;
    }
    if (idle_ns < uint64_t{cfg_.spin_us} * 1000) {
      dev::arch::spin_pause(spins < 63 ? spins++ : 0);  // pause, never yield, while spinning
      continue;
    }
    if (idle_ns < uint64_t{cfg_.spin_us + cfg_.yield_us} * 1000) {
      std::this_thread::yield();
      continue;
    }
    // Sleep. Read the wake sequence before the last pass (see wake()).
    const uint64_t seq = wake_seq_.load();
    sleepers_.fetch_add(1);
    uint64_t dl2 = deadline;
    const bool found = pass(index, mine, &dl2, nullptr);
    if (!found) {
      uint64_t wait_ns = uint64_t{sleep_us} * 1000;
      if (dl2 != ~uint64_t{0}) wait_ns = std::min(wait_ns, dl2 > now ? dl2 - now : 0);
      std::unique_lock lk(wake_mu_);
      wake_cv_.wait_for(lk, std::chrono::nanoseconds(wait_ns),
                        [&] { return stop_.load() || wake_seq_.load() != seq || list_version_.load() != seen_version; });
      const uint32_t cap = hookless_ringers_.load(std::memory_order_relaxed)
                               ? cfg_.max_sleep_us
                               : std::max(cfg_.max_sleep_us, hooked_sleep_us);
      sleep_us = std::min(sleep_us * 2, cap);
    }
    sleepers_.fetch_sub(1);
    if (found || wake_seq_.load() != seq) {
      last_work = now_ns();  // a doorbell: poll hard again
      sleep_us = cfg_.min_sleep_us;
    }
  }
}

void host_doorbell_hook(void* ctx) {
  auto* qp = static_cast<soft_qp*>(ctx);
  if (qp->dev->cfg.inline_exec && short_doorbell(*qp)) return;
  qp->dev->eng->on_doorbell(*qp);
}

void host_poll_hook(void* ctx) {
  auto* qp = static_cast<soft_qp*>(ctx);
  qp->dev->eng->on_poll(*qp);
}

}  // namespace gdaki::soft

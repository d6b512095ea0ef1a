// The soft NIC's progress engine: polling, fairness, back-off and wake-ups.
#include "engine.hpp"

#include <algorithm>
#include <chrono>

#include "../soft_objects.hpp"
#include "executor.hpp"
#include "gdaki/device/arch.hpp"

namespace gdaki::soft {

engine::engine(const config& cfg) : cfg_(cfg) {
  for (uint32_t i = 0; i < cfg_.engine_threads; ++i) threads_.emplace_back([this, i] { run(i); });
}

engine::~engine() {
  stop_.store(true);
  {
    std::lock_guard lk(wake_mu_);
    wake_seq_.fetch_add(1);
  }
  wake_cv_.notify_all();
  for (auto& t : threads_) t.join();
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

void engine::wake() {
  // Pairs with run(): a sleeper reads wake_seq before its last pass, so either that pass
  // sees our doorbell record or the sleeper's predicate sees the new sequence number.
  wake_seq_.fetch_add(1);
  if (sleepers_.load() != 0) {
    std::lock_guard lk(wake_mu_);
    wake_cv_.notify_all();
  }
}

void engine::on_doorbell(soft_qp& qp) {
  if (!cfg_.inline_exec) {
    wake();
    return;
  }
  // Execute on the ringing thread. If another executor holds the QP it will re-check the
  // doorbell record after its batch (the engine always does; an inline executor loops
  // below), but wake the engine too in case that executor has just finished.
  for (;;) {
    std::unique_lock lk(qp.exec_mu, std::try_to_lock);
    if (!lk.owns_lock()) {
      wake();
      return;
    }
    const progress_result r = progress_qp(qp, ~uint32_t{0});
    lk.unlock();
    if (r.deadline != 0 || r.pending) {  // a stall to retry later: the engine owns timers
      wake();
      return;
    }
    uint64_t deadline = 0;
    if (!has_work(qp, now_ns(), &deadline)) return;  // nothing arrived while we worked
  }
}

bool engine::pass(uint32_t index, std::vector<std::shared_ptr<soft_qp>>& mine, uint64_t* deadline) {
  bool worked = false;
  const uint64_t now = now_ns();
  for (size_t i = 0; i < mine.size(); ++i) {
    if (i % cfg_.engine_threads != index) continue;
    soft_qp& qp = *mine[i];
    if (qp.dead.load(std::memory_order_acquire)) continue;
    uint64_t dl = 0;
    if (!has_work(qp, now, &dl)) {
      if (dl != 0) *deadline = std::min(*deadline, dl);
      continue;
    }
    std::unique_lock lk(qp.exec_mu, std::try_to_lock);
    if (!lk.owns_lock()) continue;  // an inline executor has it and re-checks when done
    const progress_result r = progress_qp(qp, cfg_.budget);
    worked = worked || r.worked;
    if (r.deadline != 0) *deadline = std::min(*deadline, r.deadline);
  }
  return worked;
}

void engine::run(uint32_t index) {
  std::vector<std::shared_ptr<soft_qp>> mine;
  uint64_t seen_version = ~uint64_t{0};
  uint64_t last_work = now_ns();
  uint32_t sleep_us = cfg_.min_sleep_us;
  uint32_t spins = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint64_t v = list_version_.load();
    if (v != seen_version) {
      std::lock_guard lk(list_mu_);
      mine = list_;
      seen_version = list_version_.load();
    }
    uint64_t deadline = ~uint64_t{0};
    if (pass(index, mine, &deadline)) {
      last_work = now_ns();
      sleep_us = cfg_.min_sleep_us;
      spins = 0;
      continue;
    }
    const uint64_t now = now_ns();
    const uint64_t idle_ns = now - last_work;
    if (deadline <= now) continue;  // a stall just expired
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
    const bool found = pass(index, mine, &dl2);
    if (!found) {
      uint64_t wait_ns = uint64_t{sleep_us} * 1000;
      if (dl2 != ~uint64_t{0}) wait_ns = std::min(wait_ns, dl2 > now ? dl2 - now : 0);
      std::unique_lock lk(wake_mu_);
      wake_cv_.wait_for(lk, std::chrono::nanoseconds(wait_ns),
                        [&] { return stop_.load() || wake_seq_.load() != seq || list_version_.load() != seen_version; });
      sleep_us = std::min(sleep_us * 2, cfg_.max_sleep_us);
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
  qp->dev->eng->on_doorbell(*qp);
}

}  // namespace gdaki::soft

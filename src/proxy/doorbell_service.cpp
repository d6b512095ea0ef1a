// The CPU doorbell service. See proxy/doorbell_service.hpp and docs/proxy.md
// ("CPU-assisted doorbells").
#include "gdaki/proxy/doorbell_service.hpp"

#include <algorithm>
#include <chrono>

#include "gdaki/device/arch.hpp"
#include "gdaki/device/sq.hpp"
#include "gdaki/prm/endian.hpp"

namespace gdaki::proxy {

doorbell_service::doorbell_service(doorbell_options options) : options_(options) {
  if (options_.max_sleep_us == 0) options_.max_sleep_us = 1;
}

doorbell_service::~doorbell_service() { stop(); }

status doorbell_service::add(const dev::qp_handle& qp) {
  if (qp.backend != dev::qp_backend::direct || qp.db_mode != dev::doorbell_mode::cpu_assisted ||
      qp.dbrec == nullptr || qp.uar_db == nullptr) {
    return status::invalid;
  }
  std::lock_guard lk(mu_);
  // rung starts at 0, the DBR of a QP fresh from RESET. A QP registered later is simply
  // rung once for whatever its DBR says: ringing an index the NIC already has is harmless.
  qps_.push_back(watched{qp.dbrec, qp.uar_db, qp.qpn, 0, qp.host_doorbell_hook, qp.host_hook_ctx});
  return status::ok;
}

status doorbell_service::remove(const dev::qp_handle& qp) {
  std::lock_guard lk(mu_);
  const auto it = std::find_if(qps_.begin(), qps_.end(), [&](const watched& w) { return w.uar_db == qp.uar_db; });
  if (it == qps_.end()) return status::invalid;
  qps_.erase(it);
  return status::ok;
}

status doorbell_service::start() {
  if (running_.exchange(true, std::memory_order_acq_rel)) return status::busy;
  thread_ = std::thread([this] { run(); });
  return status::ok;
}

void doorbell_service::stop() {
  running_.store(false, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

doorbell_stats doorbell_service::stats() const {
  return doorbell_stats{passes_.load(std::memory_order_relaxed), rung_.load(std::memory_order_relaxed)};
}

size_t doorbell_service::progress() {
  size_t n = 0;
  {
    std::lock_guard lk(mu_);
    for (watched& w : qps_) {
      // Acquire: pairs with sq_submit's release of the DBR, which the posters' WQE stores
      // (fenced with fence_to_device) precede; we ring only for WQEs that are complete.
      const uint32_t pc = prm::from_be(prm::be32{dev::arch::load_acquire(&w.dbrec->snd.raw)}) & 0xffff;
      if (pc == w.rung) continue;
      // The DBR value we read reaches memory before the doorbell: a NIC woken by the
      // doorbell may read the DBR (the direct path's order (2) in sq_submit, on our side).
      dev::arch::fence_before_mmio();
      dev::arch::doorbell_store64(w.uar_db, dev::detail::doorbell_word(w.qpn, pc));
      w.rung = pc;
      ++n;
      // A provider that executes on the ringing thread (the soft NIC) does so here, as it
      // would on a poster's thread in db_store mode.
      if (w.hook != nullptr) w.hook(w.hook_ctx);
    }
  }
  passes_.store(passes_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (n != 0) rung_.store(rung_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  return n;
}

void doorbell_service::run() {
  uint32_t idle = 0;
  uint32_t sleep_us = 1;
  while (running_.load(std::memory_order_acquire)) {
    if (progress() != 0) {
      idle = 0;
      sleep_us = 1;
      continue;
    }
    // Adaptive back-off: pause while work is likely to follow (the first doorbell after a
    // burst costs one pass), then sleep with doubling intervals so an idle service leaves
    // a small machine's cores to the posters and the NIC engine.
    if (++idle < options_.spin_passes) {
      dev::arch::spin_pause(idle);
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    sleep_us = std::min(sleep_us * 2, options_.max_sleep_us);
  }
}

}  // namespace gdaki::proxy

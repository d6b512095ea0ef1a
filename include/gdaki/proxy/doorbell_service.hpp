// The CPU doorbell service of CPU-assisted doorbells (doorbell_mode::cpu_assisted): device
// threads build WQEs and update the doorbell record (DBR) but never store to the doorbell
// register; this service notices a DBR that moved past the last value it rang and rings
// the doorbell on their behalf. It runs on a library-owned thread (start/stop) or step by
// step on a thread the application drives (progress). Host-only. docs/proxy.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "gdaki/device/handles.hpp"
#include "gdaki/status.hpp"

namespace gdaki::proxy {

struct doorbell_options {
  uint32_t spin_passes = 2048;  // idle passes that only pause before the thread sleeps
  uint32_t max_sleep_us = 50;   // longest sleep of an idle thread (sleeps double from 1 us);
                                // bounds the added latency of the first doorbell after idling
};

struct doorbell_stats {
  uint64_t passes = 0;  // progress passes over the registered QPs
  uint64_t rung = 0;    // doorbells written
};

class doorbell_service {
 public:
  explicit doorbell_service(doorbell_options options = {});
  doorbell_service(const doorbell_service&) = delete;
  doorbell_service& operator=(const doorbell_service&) = delete;
  ~doorbell_service();  // stop()

  // Watches the QP of handle qp from now on. Only the handle's read-only fields are copied
  // (dbrec, uar_db, qpn, host hook), so qp itself may live in GPU memory afterwards; the
  // DBR and the doorbell register must be CPU-reachable. Register before posting, or at
  // least before the QP's DBR passes 2^15 WQEBBs. Returns ok, or invalid (not a
  // cpu_assisted direct handle, or no DBR / doorbell register). Thread-safe.
  status add(const dev::qp_handle& qp);

  // Stops watching the QP whose doorbell register qp names (do it before destroying the
  // QP). Returns ok, or invalid (not registered). Thread-safe.
  status remove(const dev::qp_handle& qp);

  // Starts the service thread. Returns ok, or busy when already running.
  status start();

  // Stops the thread after its current pass. Idempotent.
  void stop();

  // One pass on the caller's thread (only while the thread is not running): rings every
  // registered QP whose DBR moved. Returns the number of doorbells written (0 = idle).
  size_t progress();

  // Counters so far (relaxed snapshot, any thread).
  doorbell_stats stats() const;

 private:
  struct watched {
    prm::qp_dbrec* dbrec;
    uint64_t* uar_db;
    uint32_t qpn;
    uint32_t rung;  // 16-bit wqe_index of the last doorbell we wrote
    dev::host_doorbell_hook_fn hook;
    void* hook_ctx;
  };
  void run();

  doorbell_options options_;
  mutable std::mutex mu_;  // guards qps_ (held for a pass; add/remove are rare)
  std::vector<watched> qps_;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::atomic<uint64_t> passes_{0}, rung_{0};
};

}  // namespace gdaki::proxy

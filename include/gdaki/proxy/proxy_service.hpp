// The CPU proxy service: drains one proxy ring (proxy/ring.hpp) and executes each
// validated descriptor through a poster (proxy/poster.hpp), turning the poster's
// completions into completion-counter updates that producers poll. Runs on its own
// thread (start/stop) or step by step on the caller's (progress). Host-only.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gdaki/proxy/poster.hpp"
#include "gdaki/proxy/ring.hpp"
#include "gdaki/status.hpp"

namespace gdaki::proxy {

struct proxy_options {
  uint32_t batch = 64;              // most descriptors taken per progress step
  uint32_t max_inflight = 256;      // most operations started and not yet completed
  uint64_t torn_grace_ns = 1000000; // how long a published-but-invalid slot may still
                                    // turn valid (a writer whose stores land out of order)
                                    // before it is rejected
};

struct proxy_stats {
  uint64_t consumed = 0;   // descriptors taken out of the ring (executed or rejected)
  uint64_t posted = 0;     // operations handed to the poster
  uint64_t completed = 0;  // operations the poster reported finished (any result)
  uint64_t failed = 0;     // operations that finished in error or could not be posted
  uint64_t rejected = 0;   // descriptors that failed validation (never executed)
};

class proxy_service {
 public:
  // ring and p must outlive the service. p is used only by the service's thread (or by
  // the caller of progress) from now on.
  proxy_service(const ring_handle& ring, poster& p, proxy_options options = {});
  proxy_service(const proxy_service&) = delete;
  proxy_service& operator=(const proxy_service&) = delete;
  ~proxy_service();  // stop()

  // Starts the proxy thread. Returns ok, or busy when already running.
  status start();

  // Stops the proxy thread (after finishing the progress step in hand) and closes the
  // ring: producers waiting for credits or counters then get status::closed. Idempotent.
  void stop();

  // One step on the caller's thread (only while the thread is not running): collects
  // completions, then takes up to batch descriptors. Returns the number of descriptors
  // taken plus completions collected (0 = idle).
  size_t progress();

  // Counters so far. Safe from any thread (relaxed snapshot).
  proxy_stats stats() const;

 private:
  struct inflight {
    uint16_t counter;
    uint32_t position;
    bool busy;
  };
  size_t collect();
  size_t consume();
  void run();
  // Statistics have one writer (the proxy); readers only want a snapshot.
  static void count(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  ring_handle ring_;
  poster& poster_;
  proxy_options options_;
  uint32_t next_ = 0;              // consumer position (mirrors ring_.ctl->consumed)
  std::vector<inflight> table_;    // cookie -> operation
  std::vector<uint32_t> free_;     // free table entries
  std::vector<completion> done_;   // scratch for poster::poll
  uint32_t busy_ = 0;              // operations in flight
  bool torn_pending_ = false;      // the slot at next_ is invalid; waiting out the grace
  uint64_t torn_since_ = 0;
  std::atomic<bool> running_{false};
  std::thread thread_;
  std::atomic<uint64_t> consumed_{0}, posted_{0}, completed_{0}, failed_{0}, rejected_{0};
};

}  // namespace gdaki::proxy

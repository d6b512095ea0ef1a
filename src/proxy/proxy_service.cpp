// The CPU proxy service: ring consumer + poster driver. See proxy/proxy_service.hpp and
// docs/proxy.md ("The proxy thread").
#include "gdaki/proxy/proxy_service.hpp"

#include <chrono>
#include <thread>

#include "gdaki/device/arch.hpp"

namespace gdaki::proxy {

proxy_service::proxy_service(const ring_handle& ring, poster& p, proxy_options options)
    : ring_(ring), poster_(p), options_(options) {
  if (options_.batch == 0) options_.batch = 1;
  if (options_.max_inflight == 0) options_.max_inflight = 1;
  table_.assign(options_.max_inflight, inflight{no_counter, 0, false});
  free_.reserve(options_.max_inflight);
  for (uint32_t i = options_.max_inflight; i-- > 0;) free_.push_back(i);
  done_.resize(options_.max_inflight < 64 ? options_.max_inflight : 64);
  // Resume where an earlier consumer of this ring stopped (normally 0).
  next_ = dev::arch::load_acquire(&ring_.ctl->consumed);
}

proxy_service::~proxy_service() { stop(); }

status proxy_service::start() {
  if (running_.exchange(true, std::memory_order_acq_rel)) return status::busy;
  thread_ = std::thread([this] { run(); });
  return status::ok;
}

void proxy_service::stop() {
  running_.store(false, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
  ring_close(ring_);
}

proxy_stats proxy_service::stats() const {
  proxy_stats s;
  s.consumed = consumed_.load(std::memory_order_relaxed);
  s.posted = posted_.load(std::memory_order_relaxed);
  s.completed = completed_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  return s;
}

size_t proxy_service::progress() { return collect() + consume(); }

size_t proxy_service::collect() {
  if (busy_ == 0) return 0;
  const size_t n = poster_.poll(done_.data(), done_.size());
  for (size_t i = 0; i < n; ++i) {
    const completion& c = done_[i];
    if (c.cookie >= table_.size() || !table_[c.cookie].busy) {
      // A cookie we did not hand out, or one reported twice: a poster bug. Latch it so
      // waiters fail loudly instead of counting a completion twice.
      ring_record_fault(ring_, status::io_error, next_);
      count(failed_);
      continue;
    }
    inflight& e = table_[c.cookie];
    if (c.result == status::ok) {
      ring_complete(ring_, e.counter);
    } else {
      ring_record_fault(ring_, c.result, e.position);
      count(failed_);
    }
    e.busy = false;
    free_.push_back(static_cast<uint32_t>(c.cookie));
    --busy_;
    count(completed_);
  }
  return n;
}

size_t proxy_service::consume() {
  const uint32_t first = next_;
  size_t taken = 0;
  while (taken < options_.batch) {
    descriptor d;
    descriptor_fault fault = descriptor_fault::none;
    const status peek = ring_peek(ring_, next_, &d, &fault);
    if (peek == status::again) break;
    if (peek != status::ok) {
      // Published but invalid. A writer whose body stores reach us after its tail store
      // (a broken fence, a PCIe path that reorders) would look like this for a moment:
      // give it the grace period, then reject the slot without executing it.
      const uint64_t now = dev::arch::clock_ns();
      if (!torn_pending_) {
        torn_pending_ = true;
        torn_since_ = now;
        break;
      }
      if (now - torn_since_ < options_.torn_grace_ns) break;
      torn_pending_ = false;
      ring_record_fault(ring_, status::io_error, next_);
      count(rejected_);
      ++next_;
      ++taken;
      continue;
    }
    torn_pending_ = false;
    const bool barrier = d.op == opcode::fence || d.op == opcode::quiet || (d.flags & desc_flags::fence) != 0;
    // Fence and quiet: nothing after them starts before everything before them is done.
    if (barrier && busy_ != 0) break;
    if (d.op == opcode::fence || d.op == opcode::quiet) {
      ring_complete(ring_, d.counter);
    } else {
      if (free_.empty()) break;
      const uint32_t cookie = free_.back();
      const status st = poster_.post(d, cookie);
      if (st == status::again) break;  // the poster is full: collect, then retry this slot
      if (st == status::ok) {
        free_.pop_back();
        table_[cookie] = inflight{d.counter, next_, true};
        ++busy_;
        count(posted_);
      } else {
        ring_record_fault(ring_, st, next_);
        count(failed_);
      }
    }
    ++next_;
    ++taken;
  }
  if (taken != 0) {
    // The copies are private now: the slots go back to the producers.
    ring_release(ring_, next_, next_ - first);
    count(consumed_, taken);
  }
  return taken;
}

void proxy_service::run() {
  uint32_t idle = 0;
  while (running_.load(std::memory_order_acquire)) {
    if (progress() != 0) {
      idle = 0;
      continue;
    }
    // Idle: pause, then yield (arch::spin_pause), then sleep briefly, so an idle proxy
    // leaves the core to the producers on a small machine.
    if (++idle < 1024) {
      dev::arch::spin_pause(idle);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

}  // namespace gdaki::proxy

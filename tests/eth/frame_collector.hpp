// The receiving side of the eth traffic tests: a CPU thread that drains every receive
// queue of a port through the device API and records, for each test frame (kind, seq),
// the queue it landed in. Frames are UDP/IPv4 shaped like `shape` (same payload offset).
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "eth/eth_netns_fixture.hpp"

namespace eth_test {

class frame_collector {
 public:
  static constexpr uint8_t nowhere = 0xff;

  // kinds x seqs_per_kind slots; queues of `port` 0 .. queues-1 are drained.
  frame_collector(geth::packet_port& port, uint32_t queues, frame_spec shape, uint32_t kinds, uint64_t seqs_per_kind)
      : port_(port), queues_(queues), shape_(shape), seqs_(seqs_per_kind),
        landed_(kinds, std::vector<uint8_t>(seqs_per_kind, nowhere)), received_(kinds) {
    for (auto& r : received_) r = std::make_unique<std::atomic<uint64_t>>(0);
  }
  ~frame_collector() { stop(); }

  void start() {
    thread_ = std::thread([this] { drain(); });
  }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // Frames of `kind` received so far (each (kind, seq) counted once).
  uint64_t received(uint32_t kind) const { return received_[kind]->load(std::memory_order_acquire); }
  // Waits until `kind` has `n` frames; false after `seconds`.
  bool wait_for(uint32_t kind, uint64_t n, double seconds = 20) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (uint32_t it = 0; received(kind) < n; ++it) {
      if (std::chrono::steady_clock::now() > until) return false;
      dev::arch::spin_pause(it);
    }
    return true;
  }
  uint8_t landed(uint32_t kind, uint64_t seq) const { return landed_[kind][seq]; }
  uint64_t duplicates() const { return duplicates_.load(); }
  uint64_t strangers() const { return strangers_.load(); }  // tagged frames with a bad kind/seq

 private:
  void drain() {
    while (!stop_.load(std::memory_order_relaxed)) {
      uint32_t got = 0;
      for (uint32_t q = 0; q < queues_; ++q) {
        dev::eth_rxq_handle& h = port_.rxq(q);
        uint64_t first = 0;
        uint32_t n = 0;
        if (dev::eth_rxq_receive(h, 64, 0, &first, &n) != gdaki::status::ok) continue;
        for (uint32_t i = 0; i < n; ++i) {
          uint32_t bytes = 0;
          const uint8_t* f = dev::eth_rxq_frame(h, first + i, &bytes);
          frame_tag t{};
          if (!read_tag(f, bytes, shape_, &t)) continue;
          if (t.kind >= landed_.size() || t.seq >= seqs_) {
            ++strangers_;
            continue;
          }
          uint8_t& where = landed_[t.kind][t.seq];
          if (where != nowhere) {
            ++duplicates_;
            continue;
          }
          where = static_cast<uint8_t>(q);
          received_[t.kind]->fetch_add(1, std::memory_order_release);
        }
        (void)dev::eth_rxq_release(h, first, n);
        got += n;
      }
      if (got == 0) std::this_thread::yield();  // two cores: leave one to the port thread and the sender
    }
  }

  geth::packet_port& port_;
  uint32_t queues_;
  frame_spec shape_;
  uint64_t seqs_;
  std::vector<std::vector<uint8_t>> landed_;
  std::vector<std::unique_ptr<std::atomic<uint64_t>>> received_;
  std::atomic<uint64_t> duplicates_{0}, strangers_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A sender of one kind: `window` frames in flight at most (sent minus received by the
// collector), buffers reused round-robin once the port reports the frame that last used
// the buffer as sent (every send asks for a completion).
class paced_sender {
 public:
  paced_sender(dev::eth_txq_handle& q, const frame_collector& c, frame_spec s, uint32_t kind, uint32_t window)
      : q_(q), c_(c), kind_(kind), window_(window), buffers_(2 * window), pos_(2 * window, 0) {
    for (auto& b : buffers_) {
      frame_pool one;
      one.add(s, kind, 0);
      b = one.at(0);
    }
    tag_at_ = payload_offset(s);
  }
  // Sends frames seq = 0 .. n-1 (each committed in groups of 32). Returns false if the
  // receiver stalled for `stall_seconds`.
  bool send(uint64_t n, const std::atomic<bool>* stop = nullptr, double stall_seconds = 20) {
    for (uint64_t seq = 0; seq < n; ++seq) {
      if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
        sent_ = seq;
        return settle_all();
      }
      if (seq >= window_ && !c_.wait_for(kind_, seq - window_ + 1, stall_seconds)) return false;
      const size_t slot = seq % buffers_.size();
      if (pos_[slot] != 0 && dev::eth_txq_wait(q_, pos_[slot], 10'000'000'000ull) != gdaki::status::ok) return false;
      std::vector<uint8_t>& b = buffers_[slot];
      const frame_tag t{frame_marker, kind_, seq};
      std::memcpy(b.data() + tag_at_, &t, sizeof(t));
      uint64_t pos = 0;
      if (dev::eth_txq_send<dev::scope_thread, dev::sharing::grid>(q_, reinterpret_cast<uint64_t>(b.data()),
                                                                   static_cast<uint32_t>(b.size()),
                                                                   dev::eth_send_flags::notify, &pos) != gdaki::status::ok) {
        return false;
      }
      pos_[slot] = pos;
      if ((seq + 1) % 32 == 0 || seq + 1 == n) dev::eth_txq_commit(q_);
    }
    sent_ = n;
    return settle_all();
  }
  uint64_t sent() const { return sent_; }
  ~paced_sender() { (void)settle_all(); }

 private:
  dev::eth_txq_handle& q_;
  const frame_collector& c_;
  uint32_t kind_, window_;
  // Commits, then waits until the port sent every frame of ours (our buffers are free).
  bool settle_all() {
    dev::eth_txq_commit(q_);
    for (uint64_t p : pos_) {
      if (p != 0 && dev::eth_txq_wait(q_, p, 10'000'000'000ull) != gdaki::status::ok) return false;
    }
    return true;
  }

  std::vector<std::vector<uint8_t>> buffers_;
  std::vector<uint64_t> pos_;  // position of the last send from each buffer (0: none)
  size_t tag_at_ = 0;
  uint64_t sent_ = 0;
};

}  // namespace eth_test

// The soft port's state, shared by its files: the socket and capture ring
// (packet_port.cpp), the receive side (port_receive.cpp) and the transmit side
// (port_transmit.cpp). Only the port thread touches the ring and the queues' NIC-side
// words; stats() reads the atomics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gdaki/device/eth_handles.hpp"
#include "gdaki/eth/packet_port.hpp"
#include "gdaki/eth/steering.hpp"

namespace gdaki::eth {

// Anonymous, page-aligned, zeroed and populated memory for queue buffers and rings.
class mapped_bytes {
 public:
  mapped_bytes() = default;
  explicit mapped_bytes(size_t bytes);
  mapped_bytes(mapped_bytes&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  mapped_bytes& operator=(mapped_bytes&& o) noexcept;
  ~mapped_bytes();
  uint8_t* data() const { return p_; }
  bool ok() const { return p_ != nullptr; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

struct rx_queue {
  dev::eth_rxq_handle h;
  mapped_bytes buffers, completions;
};

struct packet_port::impl {
  port_config cfg;
  int fd = -1;
  uint8_t* ring = nullptr;  // the kernel's TPACKET_V3 receive ring
  size_t ring_bytes = 0;
  uint32_t next_block = 0;
  // Where the receive side stopped inside the current block (null: at a block boundary),
  // the frames of it still to read, and the rule list it is classified with.
  uint8_t* block_cursor = nullptr;
  uint32_t block_left = 0;
  std::shared_ptr<const steering_table::snapshot> block_snapshot;
  std::array<uint8_t, 6> mac{};
  std::unique_ptr<steering_table> steering;
  std::vector<std::unique_ptr<rx_queue>> rx;
  std::unique_ptr<dev::eth_txq_handle> tx;
  mapped_bytes tx_ring;
  std::atomic<uint64_t> tx_done{0};  // descriptors sent so far (written under tx_busy)

  // Who runs each side now: the port thread, or an initiator's CPU thread through the
  // handles' host hooks. A try-lock: whoever finds it taken leaves the work to the holder.
  std::atomic_flag rx_busy = ATOMIC_FLAG_INIT, tx_busy = ATOMIC_FLAG_INIT;
  // When a CPU initiator last ran each side through a hook (arch::clock_ns); the port
  // thread leaves a side alone for a while after that.
  std::atomic<uint64_t> rx_driven_at{0}, tx_driven_at{0};

  std::atomic<bool> stop{false};
  std::thread thread;
  std::atomic<uint64_t> frames_seen{0}, rule_drops{0}, placed{0};
  std::mutex kernel_stats_lock;
  uint64_t kernel_drops = 0;  // under kernel_stats_lock

  explicit impl(const port_config& c) : cfg(c) {}
  ~impl();

  // Receive: takes up to `budget` frames from the blocks the kernel handed over. Returns
  // frames taken. Caller holds rx_busy.
  size_t receive_blocks(size_t budget);
  // Transmit: sends every committed descriptor. Returns frames sent. Caller holds tx_busy.
  size_t transmit_committed();
  // The same under their try-locks, for the port thread and the host hooks; the transmit
  // side looks again after unlocking, so a commit made while it held the lock is not left
  // to the port thread's next wake-up.
  size_t try_receive(size_t budget);
  size_t try_transmit();
  void run();
};

}  // namespace gdaki::eth

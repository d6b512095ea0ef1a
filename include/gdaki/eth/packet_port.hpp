// The soft NIC's Ethernet port: Ethernet receive and transmit queues bound to a Linux
// interface through an AF_PACKET socket with a TPACKET_V3 receive ring. One port thread
// takes frames from the ring, classifies them with the port's steering table and places
// each into its receive queue (packet buffer + completion entry), and sends what
// initiators committed on the transmit queue. Initiators (GPU threads or CPU threads)
// drive the queues through the device API, gdaki/device/eth.hpp.
//
// Needs CAP_NET_RAW (the packet socket). Host-only control path.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "gdaki/device/eth_handles.hpp"
#include "gdaki/eth/steering.hpp"
#include "gdaki/status.hpp"

namespace gdaki::eth {

struct port_config {
  std::string interface;               // Linux interface name, in the caller's network namespace
  uint32_t rx_queues = 1;              // receive queues (steering targets 0 .. rx_queues-1)
  uint32_t rx_slots = 4096;            // frames per receive queue (power of two)
  uint32_t slot_bytes = 2048;          // bytes per receive slot: the longest frame a queue takes
  uint32_t tx_slots = 4096;            // transmit descriptors (power of two)
  uint32_t capture_block_bytes = 1u << 20;  // TPACKET_V3 block size (power of two, >= page)
  uint32_t capture_blocks = 64;        // blocks in the kernel's receive ring
  uint32_t block_timeout_ms = 1;       // a partly filled block is handed over after this long
  uint32_t default_queue = 0;          // where frames no rule matches go
  // CPU-thread initiators run the port's work themselves: a receive that finds too few
  // frames takes the kernel's finished blocks, a commit sends (no hop to the port thread,
  // which keeps running for GPU initiators and idle periods). Device code never does.
  bool initiators_drive_port = true;
  rss_key key = default_rss_key;
};

// Counters of the port since it opened.
struct port_stats {
  uint64_t frames_seen = 0;       // frames taken from the capture ring
  uint64_t kernel_drops = 0;      // frames the kernel dropped because the capture ring was full
  uint64_t rule_drops = 0;        // frames a drop rule dropped
  uint64_t queue_full_drops = 0;  // frames dropped because their queue had no free slot (all queues)
  uint64_t oversize_drops = 0;    // frames longer than slot_bytes (all queues)
  uint64_t placed = 0;            // frames placed into receive queues (all queues)
  uint64_t tx_sent = 0;           // frames handed to the interface
  uint64_t tx_errors = 0;         // frames the interface refused
};

class packet_port {
 public:
  // Opens the port on c.interface and starts its thread. On failure *why says what is
  // missing (no CAP_NET_RAW, no such interface, ring refused). Returns ok, invalid (a bad
  // config), access (no permission for a packet socket), not_found (no interface), or
  // io_error.
  static status open(const port_config& c, std::unique_ptr<packet_port>* out, std::string* why);
  ~packet_port();  // stops the thread and frees the queues
  packet_port(const packet_port&) = delete;
  packet_port& operator=(const packet_port&) = delete;

  // Receive queue i's handle (i < rx_queues) and the transmit queue's handle. Plain data in
  // host memory; CPU-thread initiators use them as they are.
  dev::eth_rxq_handle& rxq(uint32_t i);
  dev::eth_txq_handle& txq();
  steering_table& steering();
  // The interface's MAC address.
  std::array<uint8_t, 6> mac() const;
  // The counters so far (the kernel's drop count is read and accumulated on each call).
  port_stats stats();

 private:
  struct impl;
  explicit packet_port(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace gdaki::eth

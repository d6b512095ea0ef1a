// Two soft Ethernet ports on the two ends of a veth pair, each in its own network
// namespace: `tx_port` (ns1) sends through its transmit queue, `rx_port` (ns2) receives
// into its steered queues. Frames carry a marker, a kind and a sequence number, so the
// receiving side can tell test frames from the stray ones the kernel sends on a new link
// (IPv6 neighbour discovery) and account for every frame. SKIPs with the reason when the
// machine lacks namespaces or packet sockets.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "eth/frame_builder.hpp"
#include "gdaki/device/eth.hpp"
#include "gdaki/eth/packet_port.hpp"
#include "wire/netns.hpp"

namespace eth_test {

namespace dev = gdaki::dev;
namespace geth = gdaki::eth;

inline constexpr uint32_t frame_marker = 0x6764616b;  // "gdak"

// What a test frame carries after its L4 header.
struct frame_tag {
  uint32_t marker;
  uint32_t kind;
  uint64_t seq;
};

// Reads the tag of a received frame built from a spec shaped like `s` (same header
// layout); false for frames without the marker.
inline bool read_tag(const uint8_t* frame, uint32_t bytes, const frame_spec& s, frame_tag* t) {
  const size_t at = payload_offset(s);
  if (bytes < at + sizeof(frame_tag)) return false;
  std::memcpy(t, frame + at, sizeof(frame_tag));
  return t->marker == frame_marker;
}

// A pool of frames to send: one buffer per frame, kept until the port has sent it.
class frame_pool {
 public:
  // Appends a frame built from `s` with tag (kind, seq); returns its index.
  size_t add(frame_spec s, uint32_t kind, uint64_t seq) {
    std::vector<uint8_t> f = build(s);
    const frame_tag t{frame_marker, kind, seq};
    const size_t at = payload_offset(s);
    if (f.size() < at + sizeof(t)) f.resize(at + sizeof(t));
    std::memcpy(f.data() + at, &t, sizeof(t));
    frames_.push_back(std::move(f));
    return frames_.size() - 1;
  }
  const std::vector<uint8_t>& at(size_t i) const { return frames_[i]; }
  size_t size() const { return frames_.size(); }

 private:
  std::vector<std::vector<uint8_t>> frames_;
};

class eth_netns : public ::testing::Test {
 protected:
  // Creates the namespaces and opens both ports; rx gets `rx_cfg` (interface filled in).
  void open_ports(geth::port_config rx_cfg, geth::port_config tx_cfg = {}) {
    std::string why;
    if (!pair_.create(&why)) GTEST_SKIP() << "two network namespaces joined by a veth pair: " << why;
    tx_cfg.interface = pair_.if1;
    rx_cfg.interface = pair_.if2;
    {
      netns::scoped_enter in(pair_.ns1);
      ASSERT_TRUE(in.ok());
      const gdaki::status st = geth::packet_port::open(tx_cfg, &tx_port, &why);
      if (st == gdaki::status::access || st == gdaki::status::not_supported) GTEST_SKIP() << "AF_PACKET: " << why;
      ASSERT_EQ(st, gdaki::status::ok) << why;
    }
    {
      netns::scoped_enter in(pair_.ns2);
      ASSERT_TRUE(in.ok());
      ASSERT_EQ(geth::packet_port::open(rx_cfg, &rx_port, &why), gdaki::status::ok) << why;
    }
  }

  // A UDP/IPv4 frame spec from tx_port's MAC to rx_port's.
  frame_spec udp(uint16_t sport, uint16_t dport) const {
    frame_spec s;
    s.src_mac = tx_port->mac();
    s.dst_mac = rx_port->mac();
    s.src = v4(10, 9, 0, 1);
    s.dst = v4(10, 9, 0, 2);
    s.src_port = sport;
    s.dst_port = dport;
    return s;
  }

  // Sends frame `i` of `pool` on tx_port's queue from the calling CPU thread, through the
  // device API (grid sharing: several test threads may send at once), asking for a
  // completion; commits when asked. Returns the position to settle (see settle) before
  // the pool's buffers go away.
  uint64_t send(const frame_pool& pool, size_t i, bool commit) {
    uint64_t pos = 0;
    const auto& f = pool.at(i);
    EXPECT_EQ((dev::eth_txq_send<dev::scope_thread, dev::sharing::grid>(
                  tx_port->txq(), reinterpret_cast<uint64_t>(f.data()), static_cast<uint32_t>(f.size()),
                  dev::eth_send_flags::notify, &pos)),
              gdaki::status::ok);
    if (commit) dev::eth_txq_commit(tx_port->txq());
    return pos;
  }
  // Waits until the port sent everything up to `pos`: only then may the frames' buffers be
  // reused or freed (arriving at the far end is no proof the sender's port is done with them).
  void settle(uint64_t pos) {
    dev::eth_txq_commit(tx_port->txq());
    EXPECT_EQ(dev::eth_txq_wait(tx_port->txq(), pos, 10'000'000'000ull), gdaki::status::ok);
  }

  // Waits (up to `seconds`) until rx_port took at least `frames` frames off its ring.
  bool wait_seen(uint64_t frames, double seconds = 20) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (rx_port->stats().frames_seen < frames) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return true;
  }

  netns::veth_pair pair_;
  std::unique_ptr<geth::packet_port> tx_port, rx_port;
};

}  // namespace eth_test

// A flow rule: a match on header fields and the action taken for frames that match.
// Every field of flow_match is optional; an absent field matches anything, and a rule
// with no field set matches every frame. Host-only (the soft NIC classifies on its
// receive thread; a ConnectX would hold the same rules in its flow tables).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gdaki/eth/frame_fields.hpp"

namespace gdaki::eth {

// A field value compared under a mask: matches when (field & mask) == (value & mask).
template <typename T>
struct masked {
  T value{};
  T mask = static_cast<T>(~T{});  // exact by default
};

// An IP prefix: version 4 or 6, the address, and how many leading bits must match
// (0..32 for IPv4, 0..128 for IPv6). A prefix also requires the frame's IP version.
struct ip_prefix {
  uint8_t version = 4;
  ip_address addr{};
  uint8_t prefix_bits = 32;
};

struct flow_match {
  std::optional<masked<uint16_t>> ethertype;  // after VLAN tags (0x0800, 0x86dd, ...)
  std::optional<masked<uint16_t>> vlan_id;    // 12-bit VID; also requires a tag
  std::optional<uint8_t> ip_version;          // 4 or 6
  std::optional<ip_prefix> src_ip, dst_ip;
  std::optional<uint8_t> ip_proto;            // ip_proto_udp, ip_proto_tcp, ...
  std::optional<masked<uint16_t>> src_port;   // requires a TCP/UDP header
  std::optional<masked<uint16_t>> dst_port;
};

// Which fields an RSS action hashes: the IP addresses only, or addresses and ports
// (frames without ports then hash their addresses; non-IP frames hash to 0).
enum class rss_fields : uint8_t { ip, ip_and_ports };

enum class flow_verb : uint8_t { to_queue, rss, drop };

struct flow_action {
  flow_verb verb = flow_verb::to_queue;
  uint32_t queue = 0;                  // to_queue: the receive queue
  std::vector<uint32_t> rss_queues;    // rss: the group; spread through a 128-entry table
  rss_fields hash_fields = rss_fields::ip_and_ports;
};

struct flow_rule {
  uint32_t priority = 0;  // lower first; equal priorities keep the order they were added in
  flow_match match;
  flow_action action;
};

// True when `f` satisfies every field `m` sets. Returns the result.
bool matches(const flow_match& m, const frame_fields& f);

// Convenience: an IPv4 prefix from four octets and a prefix length.
ip_prefix ipv4_prefix(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t bits = 32);

}  // namespace gdaki::eth

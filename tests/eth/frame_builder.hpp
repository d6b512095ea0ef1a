// Builds Ethernet frames for the eth tests: optional 802.1Q tag, IPv4 or IPv6, UDP or
// TCP, a payload of a chosen size. Checksums are left zero: nothing on the test path
// verifies them (AF_PACKET hands frames over raw, and no socket receives them).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "gdaki/eth/frame_fields.hpp"

namespace eth_test {

using gdaki::eth::ip_address;

struct frame_spec {
  std::array<uint8_t, 6> dst_mac{0x02, 0, 0, 0, 0, 2};
  std::array<uint8_t, 6> src_mac{0x02, 0, 0, 0, 0, 1};
  std::optional<uint16_t> vlan_id;
  uint16_t ethertype = gdaki::eth::ethertype_ipv4;  // of the payload (IPv4, IPv6, other)
  ip_address src{}, dst{};
  uint8_t ip_proto = gdaki::eth::ip_proto_udp;
  uint16_t src_port = 0, dst_port = 0;
  size_t frame_bytes = 64;  // total length (grown if the headers need more)
};

inline ip_address v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) { return ip_address{a, b, c, d}; }

inline void put16(std::vector<uint8_t>& f, size_t at, uint16_t v) {
  f[at] = static_cast<uint8_t>(v >> 8);
  f[at + 1] = static_cast<uint8_t>(v);
}

inline std::vector<uint8_t> build(const frame_spec& s) {
  const size_t l2 = s.vlan_id ? 18 : 14;
  const bool v4 = s.ethertype == gdaki::eth::ethertype_ipv4, v6 = s.ethertype == gdaki::eth::ethertype_ipv6;
  const size_t l3 = v4 ? 20 : v6 ? 40 : 0;
  const size_t l4 = (v4 || v6) ? (s.ip_proto == gdaki::eth::ip_proto_tcp ? 20 : 8) : 0;
  std::vector<uint8_t> f(std::max(s.frame_bytes, l2 + l3 + l4), 0);
  std::copy(s.dst_mac.begin(), s.dst_mac.end(), f.begin());
  std::copy(s.src_mac.begin(), s.src_mac.end(), f.begin() + 6);
  if (s.vlan_id) {
    put16(f, 12, gdaki::eth::ethertype_vlan);
    put16(f, 14, *s.vlan_id);
  }
  put16(f, l2 - 2, s.ethertype);
  const size_t ip = l2;
  if (v4) {
    f[ip] = 0x45;
    put16(f, ip + 2, static_cast<uint16_t>(f.size() - l2));
    f[ip + 8] = 64;
    f[ip + 9] = s.ip_proto;
    std::copy_n(s.src.begin(), 4, f.begin() + ip + 12);
    std::copy_n(s.dst.begin(), 4, f.begin() + ip + 16);
  } else if (v6) {
    f[ip] = 0x60;
    put16(f, ip + 4, static_cast<uint16_t>(f.size() - l2 - 40));
    f[ip + 6] = s.ip_proto;
    f[ip + 7] = 64;
    std::copy_n(s.src.begin(), 16, f.begin() + ip + 8);
    std::copy_n(s.dst.begin(), 16, f.begin() + ip + 24);
  }
  if (l4 != 0) {
    put16(f, ip + l3, s.src_port);
    put16(f, ip + l3 + 2, s.dst_port);
    if (s.ip_proto == gdaki::eth::ip_proto_udp) put16(f, ip + l3 + 4, static_cast<uint16_t>(f.size() - l2 - l3));
    if (s.ip_proto == gdaki::eth::ip_proto_tcp) f[ip + l3 + 12] = 0x50;
  }
  return f;
}

// Where a frame built from `s` keeps its payload (after the L4 header).
inline size_t payload_offset(const frame_spec& s) {
  const bool v4 = s.ethertype == gdaki::eth::ethertype_ipv4, v6 = s.ethertype == gdaki::eth::ethertype_ipv6;
  return (s.vlan_id ? 18u : 14u) + (v4 ? 20u : v6 ? 40u : 0u) +
         ((v4 || v6) ? (s.ip_proto == gdaki::eth::ip_proto_tcp ? 20u : 8u) : 0u);
}

}  // namespace eth_test

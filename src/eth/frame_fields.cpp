// Header parsing for flow steering. Reads only what the rules can match, and never past
// the frame: a truncated header leaves the deeper fields unset, so a rule that needs them
// cannot match a garbage value.
#include "gdaki/eth/frame_fields.hpp"

#include <algorithm>

namespace gdaki::eth {
namespace {

uint16_t be16_at(std::span<const uint8_t> b, size_t at) { return static_cast<uint16_t>((b[at] << 8) | b[at + 1]); }

void parse_l4(std::span<const uint8_t> l4, frame_fields* f) {
  if ((f->ip_proto != ip_proto_tcp && f->ip_proto != ip_proto_udp) || l4.size() < 4) return;
  f->has_ports = true;
  f->src_port = be16_at(l4, 0);
  f->dst_port = be16_at(l4, 2);
}

void parse_ipv4(std::span<const uint8_t> ip, frame_fields* f) {
  if (ip.size() < 20 || (ip[0] >> 4) != 4) return;
  const size_t header = size_t{ip[0] & 0x0fu} * 4;
  if (header < 20 || header > ip.size()) return;
  f->ip_version = 4;
  f->ip_proto = ip[9];
  std::copy_n(ip.begin() + 12, 4, f->src.begin());
  std::copy_n(ip.begin() + 16, 4, f->dst.begin());
  // Only the first fragment carries the ports (fragment offset 0).
  if ((be16_at(ip, 6) & 0x1fffu) != 0) return;
  parse_l4(ip.subspan(header), f);
}

void parse_ipv6(std::span<const uint8_t> ip, frame_fields* f) {
  if (ip.size() < 40 || (ip[0] >> 4) != 6) return;
  f->ip_version = 6;
  f->ip_proto = ip[6];
  std::copy_n(ip.begin() + 8, 16, f->src.begin());
  std::copy_n(ip.begin() + 24, 16, f->dst.begin());
  parse_l4(ip.subspan(40), f);
}

}  // namespace

frame_fields parse_frame(std::span<const uint8_t> frame, std::optional<uint16_t> stripped_vlan_tci) {
  frame_fields f;
  if (frame.size() < 14) return f;
  size_t at = 12;
  uint16_t type = be16_at(frame, at);
  if (stripped_vlan_tci) {
    f.has_vlan = true;
    f.vlan_id = *stripped_vlan_tci & 0x0fffu;
  }
  // Tags still in the bytes: the outermost one gives the VID (unless one was stripped).
  while ((type == ethertype_vlan || type == ethertype_qinq) && frame.size() >= at + 6) {
    if (!f.has_vlan) {
      f.has_vlan = true;
      f.vlan_id = be16_at(frame, at + 2) & 0x0fffu;
    }
    at += 4;
    type = be16_at(frame, at);
  }
  if (type == ethertype_vlan || type == ethertype_qinq) return f;  // truncated tag
  f.ethertype = type;
  const std::span<const uint8_t> l3 = frame.subspan(at + 2);
  if (type == ethertype_ipv4) parse_ipv4(l3, &f);
  if (type == ethertype_ipv6) parse_ipv6(l3, &f);
  return f;
}

}  // namespace gdaki::eth

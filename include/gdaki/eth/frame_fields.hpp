// The header fields of an Ethernet frame that flow rules match on, parsed once per frame
// by the receive path (and by tests that build frames). Host-only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace gdaki::eth {

inline constexpr uint16_t ethertype_ipv4 = 0x0800;
inline constexpr uint16_t ethertype_ipv6 = 0x86dd;
inline constexpr uint16_t ethertype_vlan = 0x8100;
inline constexpr uint16_t ethertype_qinq = 0x88a8;
inline constexpr uint8_t ip_proto_tcp = 6;
inline constexpr uint8_t ip_proto_udp = 17;

// An IPv4 address sits in the first 4 bytes of a 16-byte address; ip_version says which.
using ip_address = std::array<uint8_t, 16>;

struct frame_fields {
  uint16_t ethertype = 0;       // after any VLAN tag: the payload's type
  bool has_vlan = false;        // an 802.1Q (or 802.1ad outer) tag was present
  uint16_t vlan_id = 0;         // 12-bit VID of the outermost tag
  uint8_t ip_version = 0;       // 4, 6, or 0 when the frame is not IP (or truncated)
  ip_address src{}, dst{};      // valid when ip_version != 0
  uint8_t ip_proto = 0;         // IPv4 protocol / IPv6 next header (no extension headers)
  bool has_ports = false;       // TCP or UDP header present (and not a later fragment)
  uint16_t src_port = 0, dst_port = 0;
};

// Parses `frame` (starting at the destination MAC). `stripped_vlan_tci`: the tag that the
// capture layer removed from the frame (AF_PACKET reports a veth or NIC-stripped tag in
// metadata, not in the bytes), or nullopt. Fields a short frame lacks stay at their
// defaults. Returns the fields.
frame_fields parse_frame(std::span<const uint8_t> frame, std::optional<uint16_t> stripped_vlan_tci = std::nullopt);

}  // namespace gdaki::eth

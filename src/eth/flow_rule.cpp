// Rule matching: each field a rule sets is one comparison; the first that fails decides.
#include "gdaki/eth/flow_rule.hpp"

namespace gdaki::eth {
namespace {

template <typename T>
bool masked_equal(const masked<T>& m, T field) {
  return static_cast<T>(field & m.mask) == static_cast<T>(m.value & m.mask);
}

bool prefix_contains(const ip_prefix& p, uint8_t version, const ip_address& addr) {
  if (version != p.version) return false;
  const unsigned max_bits = p.version == 4 ? 32 : 128;
  const unsigned bits = p.prefix_bits > max_bits ? max_bits : p.prefix_bits;
  const unsigned whole = bits / 8, rest = bits % 8;
  for (unsigned i = 0; i < whole; ++i) {
    if (addr[i] != p.addr[i]) return false;
  }
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xffu << (8 - rest));
  return (addr[whole] & mask) == (p.addr[whole] & mask);
}

}  // namespace

bool matches(const flow_match& m, const frame_fields& f) {
  if (m.ethertype && !masked_equal(*m.ethertype, f.ethertype)) return false;
  if (m.vlan_id && (!f.has_vlan || !masked_equal(*m.vlan_id, f.vlan_id))) return false;
  if (m.ip_version && f.ip_version != *m.ip_version) return false;
  if (m.src_ip && !prefix_contains(*m.src_ip, f.ip_version, f.src)) return false;
  if (m.dst_ip && !prefix_contains(*m.dst_ip, f.ip_version, f.dst)) return false;
  if (m.ip_proto && (f.ip_version == 0 || f.ip_proto != *m.ip_proto)) return false;
  if (m.src_port && (!f.has_ports || !masked_equal(*m.src_port, f.src_port))) return false;
  if (m.dst_port && (!f.has_ports || !masked_equal(*m.dst_port, f.dst_port))) return false;
  return true;
}

ip_prefix ipv4_prefix(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t bits) {
  ip_prefix p;
  p.version = 4;
  p.addr = {a, b, c, d};
  p.prefix_bits = bits;
  return p;
}

}  // namespace gdaki::eth

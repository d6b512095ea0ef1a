// See bench_path.hpp.
#include "bench_path.hpp"

#include <cstring>

namespace gdaki::tool {

port_address address_of(const verbs::port_attr& p) {
  port_address a;
  a.lid = p.lid;
  std::memcpy(a.gid, p.gid, sizeof(a.gid));
  a.ethernet = p.layer == verbs::link_layer::ethernet;
  return a;
}

verbs::qp_attr path_to(const port_address& peer, uint8_t port_num, uint8_t sgid_index) {
  verbs::qp_attr attr;
  attr.port_num = port_num;
  attr.av.port_num = port_num;
  if (peer.ethernet) {
    // RoCE has no LIDs: every packet carries a GRH to the peer's GID. GID index 0's value
    // is the port's link-local address, which the RoCE v2 entries share (show_gids).
    attr.av.is_global = true;
    std::memcpy(attr.av.dgid, peer.gid, sizeof(attr.av.dgid));
    attr.av.sgid_index = sgid_index;
  } else {
    attr.av.dlid = peer.lid;
  }
  return attr;
}

}  // namespace gdaki::tool

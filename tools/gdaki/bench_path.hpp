// The path a bench QP's RTR step names on a hardware provider: its own port (loopback) or
// the peer's (across processes), by LID on InfiniBand and by GID on RoCE, which also needs
// the source GID index (perftest -x). The soft NIC needs none of this: in-process QPs find
// each other by QPN and its wires carry their own address.
#pragma once

#include <cstdint>

#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/qp.hpp"

namespace gdaki::tool {

// What one side tells its peer about its port (from query_port).
struct port_address {
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  bool ethernet = false;
};

port_address address_of(const verbs::port_attr& p);

// RTR attributes reaching `peer` from a port of the same link layer, through `port_num`
// and (RoCE) source GID index `sgid_index`.
verbs::qp_attr path_to(const port_address& peer, uint8_t port_num, uint8_t sgid_index);

}  // namespace gdaki::tool

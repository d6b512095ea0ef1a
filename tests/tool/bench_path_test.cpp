// The RTR path gdaki bench names on hardware providers (tools/gdaki/bench_path.hpp): LID on
// InfiniBand, GRH to the peer's GID with the chosen source GID index on RoCE.
#include <gtest/gtest.h>

#include <cstring>

#include "../../tools/gdaki/bench_path.hpp"

namespace {

using gdaki::tool::address_of;
using gdaki::tool::path_to;
namespace verbs = gdaki::verbs;

TEST(bench_path, infiniband_ports_are_reached_by_lid_without_a_grh) {
  verbs::port_attr p;
  p.layer = verbs::link_layer::infiniband;
  p.lid = 0x1234;
  const verbs::qp_attr a = path_to(address_of(p), 1, 3);
  EXPECT_FALSE(a.av.is_global);
  EXPECT_EQ(a.av.dlid, 0x1234);
  EXPECT_EQ(a.av.port_num, 1);
  EXPECT_EQ(a.port_num, 1);
}

TEST(bench_path, roce_ports_are_reached_by_gid_with_the_requested_source_index) {
  verbs::port_attr p;
  p.layer = verbs::link_layer::ethernet;
  for (int i = 0; i < 16; ++i) p.gid[i] = static_cast<uint8_t>(0xf0 + i);
  const gdaki::tool::port_address addr = address_of(p);
  EXPECT_TRUE(addr.ethernet);
  const verbs::qp_attr a = path_to(addr, 2, 3);
  EXPECT_TRUE(a.av.is_global);
  EXPECT_EQ(std::memcmp(a.av.dgid, p.gid, 16), 0);
  EXPECT_EQ(a.av.sgid_index, 3);
  EXPECT_EQ(a.av.dlid, 0);
  EXPECT_EQ(a.av.port_num, 2);
}

}  // namespace

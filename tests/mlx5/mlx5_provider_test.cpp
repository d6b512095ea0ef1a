// The mlx5 provider inside libgdaki: registered next to the soft provider, listing only
// mlx5 devices, and saying plainly why it serves none on a machine without them; on a
// machine with a ConnectX, a loopback RC WRITE through the DEVX objects.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gdaki/device/ops.hpp"
#include "gdaki/error.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"
#include "gdaki/verbs/provider.hpp"
#include "providers/mlx5/mlx5_ops.hpp"

using gdaki::status;

namespace {

const gdaki::verbs::provider_ops* mlx5_table() {
  for (const auto* p : gdaki::verbs::providers()) {
    if (std::string(p->name) == "mlx5") return p;
  }
  return nullptr;
}

bool have_mlx5_device() { return gdaki::mlx5::unavailable_reason().empty(); }

}  // namespace

TEST(mlx5_provider, is_registered_as_a_builtin_provider) {
  ASSERT_NE(mlx5_table(), nullptr);
}

TEST(mlx5_provider, lists_nothing_and_explains_why_without_an_mlx5_device) {
  if (have_mlx5_device()) GTEST_SKIP() << "this machine has an mlx5 device";
  for (const auto& d : gdaki::verbs::device::list()) EXPECT_NE(d.provider, "mlx5") << d.name;
  const std::string why = gdaki::mlx5::unavailable_reason();
  EXPECT_NE(why.find("the mlx5 provider is unavailable"), std::string::npos) << why;
}

TEST(mlx5_provider, open_without_an_mlx5_device_fails_with_the_scan_reason) {
  if (have_mlx5_device()) GTEST_SKIP() << "this machine has an mlx5 device";
  const auto* ops = mlx5_table();
  ASSERT_NE(ops, nullptr);
  gdaki::verbs::provider_object* obj = nullptr;
  std::string why;
  const status s = ops->open_device("mlx5_0", &obj, &why);
  EXPECT_TRUE(s == status::not_found || s == status::not_supported) << gdaki::to_string(s);
  EXPECT_EQ(obj, nullptr);
  EXPECT_TRUE(why.find("no RDMA devices found") != std::string::npos ||
              why.find("libibverbs.so.1") != std::string::npos || why.find("libmlx5.so.1") != std::string::npos)
      << why;
  try {
    (void)gdaki::verbs::device::open("mlx5_0");
    ADD_FAILURE() << "opening mlx5_0 must fail on a machine without it";
  } catch (const gdaki::error& e) {
    EXPECT_EQ(e.code(), status::not_found) << e.what();
  }
}

TEST(mlx5_provider, opens_and_queries_the_first_mlx5_device) {
  if (!have_mlx5_device()) GTEST_SKIP() << "no mlx5 device present: " << gdaki::mlx5::unavailable_reason();
  std::string name;
  for (const auto& d : gdaki::verbs::device::list()) {
    if (d.provider == "mlx5") {
      name = d.name;
      break;
    }
  }
  ASSERT_FALSE(name.empty());
  auto dev = gdaki::verbs::device::open(name);
  const auto attr = dev.query();
  EXPECT_EQ(attr.provider, "mlx5");
  EXPECT_EQ(attr.vendor_id, 0x02c9u);  // Mellanox / NVIDIA networking
  EXPECT_GE(attr.phys_port_cnt, 1u);
  const auto port = dev.query_port(1);
  EXPECT_GE(static_cast<int>(port.active_mtu), 1);
  EXPECT_THROW((void)dev.query_port(0), gdaki::error);
}

// The first hardware check of the DEVX control path and the data path together: a
// loopback RC QP on port 1 of the first mlx5 device (connected to itself), an RDMA WRITE
// posted by this CPU thread through the exported handle, completion through quiet().
TEST(mlx5_provider, loopback_rc_write_through_devx_objects_on_hardware) {
  if (!have_mlx5_device()) GTEST_SKIP() << "no mlx5 device present: " << gdaki::mlx5::unavailable_reason();
  namespace verbs = gdaki::verbs;
  std::string name;
  for (const auto& d : verbs::device::list()) {
    if (d.provider == "mlx5") {
      name = d.name;
      break;
    }
  }
  ASSERT_FALSE(name.empty());
  auto dev = verbs::device::open(name);
  const auto port = dev.query_port(1);
  if (port.state != verbs::port_state::active) GTEST_SKIP() << name << " port 1 is not ACTIVE";
  verbs::pd pd(dev);
  std::vector<uint8_t> src(4096, 0x5a), dst(4096, 0);
  verbs::mr src_mr(pd, src.data(), src.size(), verbs::access::all);
  verbs::mr dst_mr(pd, dst.data(), dst.size(), verbs::access::all);
  verbs::cq scq(dev, verbs::cq_init{});
  verbs::cq rcq(dev, verbs::cq_init{});
  verbs::qp_init init;
  init.send_cq = &scq;
  init.recv_cq = &rcq;
  verbs::qp qp(pd, init);
  verbs::qp_attr a;
  a.mtu = port.active_mtu;
  a.av.port_num = 1;
  if (port.layer == verbs::link_layer::ethernet) {
    a.av.is_global = true;
    a.av.sgid_index = 0;  // [unverified] GID 0 (loopback needs no routable RoCE v2 GID)
    std::memcpy(a.av.dgid, port.gid, 16);
  } else {
    a.av.dlid = port.lid;
  }
  verbs::connect_rc(qp, qp.qpn(), verbs::access::all, a);
  EXPECT_EQ(qp.state(), verbs::qp_state::rts);
  auto sh = scq.export_handle();
  auto rh = rcq.export_handle();
  auto h = qp.export_handle(&sh, &rh);
  EXPECT_EQ(h.qpn, qp.qpn());
  ASSERT_NE(h.uar_db, nullptr);
  uint64_t t = 0;
  ASSERT_EQ(gdaki::dev::put(h, {reinterpret_cast<uint64_t>(dst.data()), dst_mr.rkey()},
                            {reinterpret_cast<uint64_t>(src.data()), src_mr.lkey()}, 4096, &t),
            status::ok);
  ASSERT_EQ(gdaki::dev::quiet(h, 5'000'000'000ull), status::ok) << "no completion within 5 s";
  EXPECT_EQ(dst, src);
  qp.to_err();
  EXPECT_EQ(qp.state(), verbs::qp_state::err);
}

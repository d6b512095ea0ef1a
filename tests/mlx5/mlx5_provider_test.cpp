// The mlx5 provider inside libgdaki: registered next to the soft provider, listing only
// mlx5 devices, and saying plainly why it serves none on a machine without them.
#include <gtest/gtest.h>

#include <string>

#include "gdaki/error.hpp"
#include "gdaki/verbs/device.hpp"
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

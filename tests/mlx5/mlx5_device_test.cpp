// Checks that need a real mlx5 device: open it through the run-time loaders, query device
// and ports, choose a GID, allocate a PD and a DEVX UAR. Skipped (never passed) without one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "providers/mlx5/mlx5_devices.hpp"
#include "providers/mlx5/mlx5_loader.hpp"
#include "providers/mlx5/mlx5_translate.hpp"

using gdaki::status;
using namespace gdaki::mlx5;

namespace {

class mlx5_device : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    ibv_ = ibverbs(&why);
    if (ibv_ == nullptr) GTEST_SKIP() << "no mlx5 device present: " << why;
    dv_ = mlx5dv(&why);
    if (dv_ == nullptr) GTEST_SKIP() << "no mlx5 device present: " << why;
    const rdma_device_scan scan = scan_devices(*ibv_, dv_);
    if (scan.mlx5_count() == 0) GTEST_SKIP() << "no mlx5 device present: " << scan.message;
    int n = 0;
    list_ = ibv_->get_device_list(&n);
    for (int i = 0; i < n && dev_ == nullptr; ++i) {
      if (dv_->is_supported(list_[i])) dev_ = list_[i];
    }
    ASSERT_NE(dev_, nullptr);
    ctx_ = ibv_->open_device(dev_);
    ASSERT_NE(ctx_, nullptr) << "ibv_open_device(" << ibv_->get_device_name(dev_) << ") failed";
  }
  void TearDown() override {
    if (ctx_ != nullptr) ibv_->close_device(ctx_);
    if (list_ != nullptr) ibv_->free_device_list(list_);
  }

  const ibverbs_api* ibv_ = nullptr;
  const mlx5dv_api* dv_ = nullptr;
  ibv_device** list_ = nullptr;
  ibv_device* dev_ = nullptr;
  ibv_context* ctx_ = nullptr;
};

}  // namespace

TEST_F(mlx5_device, ports_report_a_known_link_layer_and_mtu) {
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_->query_device(ctx_, &attr), 0);
  ASSERT_GE(attr.phys_port_cnt, 1);
  for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
    ibv_port_attr pa{};
    ASSERT_EQ(query_port(*ibv_, ctx_, port, &pa), 0) << "port " << int(port);
    EXPECT_TRUE(link_from_ibv(pa.link_layer)) << "port " << int(port);
    EXPECT_TRUE(mtu_from_ibv(pa.active_mtu)) << "port " << int(port);
    EXPECT_TRUE(mtu_from_ibv(pa.max_mtu)) << "port " << int(port);
  }
}

TEST_F(mlx5_device, an_active_roce_port_has_a_roce_v2_gid) {
  ibv_port_attr pa{};
  ASSERT_EQ(query_port(*ibv_, ctx_, 1, &pa), 0);
  if (pa.link_layer != IBV_LINK_LAYER_ETHERNET) GTEST_SKIP() << "port 1 is not RoCE";
  if (pa.state != IBV_PORT_ACTIVE) GTEST_SKIP() << "port 1 is not active";
  if (ibv_->query_gid_ex == nullptr) GTEST_SKIP() << ibv_->missing.front();
  std::vector<gid_entry> table;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_->query_gid_ex(ctx_, 1, static_cast<uint32_t>(i), &e, 0, sizeof e) != 0) continue;
    gid_entry g;
    g.index = e.gid_index;
    std::copy(std::begin(e.gid.raw), std::end(e.gid.raw), g.gid.begin());
    const auto t = gid_type_from_ibv(e.gid_type);
    if (!t) continue;
    g.type = t.value;
    table.push_back(g);
  }
  const auto pick = select_gid_index(link_kind::ethernet, table);
  EXPECT_TRUE(pick) << pick.reason;
}

TEST_F(mlx5_device, pd_and_devx_uar_can_be_allocated) {
  ibv_pd* pd = ibv_->alloc_pd(ctx_);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(ibv_->dealloc_pd(pd), 0);
  // DEVX needs the context opened with mlx5dv_open_device(DEVX); this plain context may
  // refuse, which is itself informative on hardware.
  mlx5dv_context_attr ca{};
  ca.flags = MLX5DV_CONTEXT_FLAGS_DEVX;
  ibv_context* devx = dv_->open_device(dev_, &ca);
  if (devx == nullptr) GTEST_SKIP() << "mlx5dv_open_device(DEVX) failed: DEVX unavailable to this user";
  mlx5dv_devx_uar* uar = dv_->devx_alloc_uar(devx, MLX5DV_UAR_ALLOC_TYPE_NC);
  if (uar == nullptr) uar = dv_->devx_alloc_uar(devx, MLX5DV_UAR_ALLOC_TYPE_BF);
  ASSERT_NE(uar, nullptr);
  EXPECT_NE(uar->reg_addr, nullptr);
  dv_->devx_free_uar(uar);
  ibv_->close_device(devx);
}

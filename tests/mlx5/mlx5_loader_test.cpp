// Run-time loading of rdma-core (libibverbs, libmlx5) and the RDMA device scan: missing
// libraries and symbols fail with messages naming them; the real libraries load; a machine
// without RDMA devices says so plainly.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "env_guard.hpp"
#include "providers/mlx5/mlx5_devices.hpp"
#include "providers/mlx5/mlx5_loader.hpp"

using gdaki::status;
using gdaki_test::env_guard;
using namespace gdaki::mlx5;

namespace {
constexpr const char* missing_path = "/nonexistent/gdaki-test/libmissing.so";
}

TEST(mlx5_loader, missing_libibverbs_names_it_and_says_how_to_install_it) {
  env_guard g("GDAKI_LIBIBVERBS", missing_path);
  ibverbs_api api{};
  std::string msg;
  EXPECT_EQ(load_ibverbs(api, msg), status::not_found);
  EXPECT_NE(msg.find("libibverbs.so.1 not found at " + std::string(missing_path)), std::string::npos) << msg;
  EXPECT_NE(msg.find("(set by GDAKI_LIBIBVERBS)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the mlx5 provider is unavailable"), std::string::npos) << msg;
  EXPECT_NE(msg.find("install rdma-core (apt-get install libibverbs1 ibverbs-providers)"), std::string::npos)
      << msg;
}

TEST(mlx5_loader, missing_libmlx5_names_it) {
  env_guard g("GDAKI_LIBMLX5", missing_path);
  mlx5dv_api api{};
  std::string msg;
  EXPECT_EQ(load_mlx5dv(api, msg), status::not_found);
  EXPECT_NE(msg.find("libmlx5.so.1 not found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ibverbs-providers"), std::string::npos) << msg;
}

TEST(mlx5_loader, library_without_verbs_symbols_is_not_supported_and_names_the_symbol) {
  env_guard g("GDAKI_LIBIBVERBS", "libdl.so.2");
  ibverbs_api api{};
  std::string msg;
  EXPECT_EQ(load_ibverbs(api, msg), status::not_supported);
  EXPECT_NE(msg.find("libibverbs.so.1 (libdl.so.2) lacks symbol ibv_get_device_list"), std::string::npos)
      << msg;
}

TEST(mlx5_loader, real_libibverbs_loads_with_the_1_1_abi) {
  env_guard g("GDAKI_LIBIBVERBS", nullptr);
  ibverbs_api api{};
  std::string msg;
  const status s = load_ibverbs(api, msg);
  if (s == status::not_found) GTEST_SKIP() << msg;
  ASSERT_EQ(s, status::ok) << msg;
  EXPECT_EQ(api.path, "libibverbs.so.1");
  // The table must hold the IBVERBS_1.1 entry points verbs.h is written against, not the
  // 1.0 compatibility ones that share their names.
  void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(reinterpret_cast<void*>(api.get_device_list), dlvsym(h, "ibv_get_device_list", "IBVERBS_1.1"));
  EXPECT_EQ(reinterpret_cast<void*>(api.query_port_compat), dlvsym(h, "ibv_query_port", "IBVERBS_1.1"));
  EXPECT_EQ(reinterpret_cast<void*>(api.reg_mr), dlvsym(h, "ibv_reg_mr", "IBVERBS_1.1"));
  dlclose(h);
}

TEST(mlx5_loader, real_rdma_core_44_has_the_dma_buf_entry_points) {
  ibverbs_api ibv{};
  mlx5dv_api dv{};
  std::string msg;
  if (load_ibverbs(ibv, msg) != status::ok) GTEST_SKIP() << msg;
  if (load_mlx5dv(dv, msg) != status::ok) GTEST_SKIP() << msg;
  if (ibv.reg_dmabuf_mr == nullptr || dv.devx_umem_reg_ex == nullptr) {
    GTEST_SKIP() << "rdma-core older than 40 here: " << (ibv.missing.empty() ? "" : ibv.missing[0]);
  }
  EXPECT_TRUE(ibv.missing.empty()) << ibv.missing[0];
  EXPECT_TRUE(dv.missing.empty()) << dv.missing[0];
  EXPECT_NE(ibv.query_gid_ex, nullptr);
}

TEST(mlx5_loader, process_wide_loader_reports_the_same_outcome_every_call) {
  std::string a, b;
  const ibverbs_api* p1 = ibverbs(&a);
  const ibverbs_api* p2 = ibverbs(&b);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(a, b);
  if (p1 == nullptr) {
    EXPECT_NE(a.find("libibverbs.so.1"), std::string::npos) << a;
  }
}

TEST(mlx5_device_scan, machine_without_rdma_devices_reports_no_rdma_devices) {
  ibverbs_api ibv{};
  mlx5dv_api dv{};
  std::string msg;
  if (load_ibverbs(ibv, msg) != status::ok) GTEST_SKIP() << msg;
  const bool have_dv = load_mlx5dv(dv, msg) == status::ok;
  const rdma_device_scan scan = scan_devices(ibv, have_dv ? &dv : nullptr);
  if (!scan.devices.empty()) GTEST_SKIP() << "this machine has RDMA devices: " << scan.message;
  EXPECT_EQ(scan.code, status::not_found);
  EXPECT_EQ(scan.mlx5_count(), 0u);
  EXPECT_NE(scan.message.find("no RDMA devices found"), std::string::npos) << scan.message;
  EXPECT_NE(scan.message.find("the mlx5 provider is unavailable"), std::string::npos) << scan.message;
}

TEST(mlx5_device_scan, process_wide_scan_never_crashes_and_always_explains) {
  const rdma_device_scan scan = scan_devices();
  EXPECT_FALSE(scan.message.empty());
  if (scan.code == status::ok) {
    EXPECT_GT(scan.mlx5_count(), 0u);
  }
}

// ---- the scan's logic, over a fake libibverbs ---------------------------------------------

namespace {

ibv_device fake_devices[3];
ibv_device* fake_list[4];
int fake_count = 0;
int fake_errno = 0;
bool fake_freed = false;

ibv_device** fake_get_device_list(int* n) {
  if (fake_count < 0) {
    errno = fake_errno;
    if (n != nullptr) *n = 0;
    return nullptr;
  }
  for (int i = 0; i < fake_count; ++i) fake_list[i] = &fake_devices[i];
  fake_list[fake_count] = nullptr;
  if (n != nullptr) *n = fake_count;
  return fake_list;
}
void fake_free_device_list(ibv_device**) { fake_freed = true; }
const char* fake_get_device_name(ibv_device* d) { return d->name; }
bool fake_is_supported(ibv_device* d) { return std::strncmp(d->name, "mlx5_", 5) == 0; }

struct fake_rdma_core {
  ibverbs_api ibv{};
  mlx5dv_api dv{};
  fake_rdma_core(int count, const char* const* names) {
    fake_count = count;
    fake_freed = false;
    for (int i = 0; i < count && i < 3; ++i) std::snprintf(fake_devices[i].name, sizeof fake_devices[i].name, "%s", names[i]);
    ibv.get_device_list = fake_get_device_list;
    ibv.free_device_list = fake_free_device_list;
    ibv.get_device_name = fake_get_device_name;
    dv.is_supported = fake_is_supported;
  }
};

}  // namespace

TEST(mlx5_device_scan, mlx5_devices_are_told_apart_from_other_rdma_devices) {
  const char* names[] = {"rxe0", "mlx5_0", "mlx5_1"};
  fake_rdma_core f(3, names);
  const rdma_device_scan scan = scan_devices(f.ibv, &f.dv);
  EXPECT_EQ(scan.code, status::ok);
  ASSERT_EQ(scan.devices.size(), 3u);
  EXPECT_EQ(scan.mlx5_count(), 2u);
  EXPECT_FALSE(scan.devices[0].mlx5);
  EXPECT_EQ(scan.devices[2].name, "mlx5_1");
  EXPECT_EQ(scan.message, "2 mlx5 device(s) of 3 RDMA device(s)");
  EXPECT_TRUE(fake_freed);
}

TEST(mlx5_device_scan, only_non_mlx5_devices_is_not_found_and_says_so) {
  const char* names[] = {"rxe0"};
  fake_rdma_core f(1, names);
  const rdma_device_scan scan = scan_devices(f.ibv, &f.dv);
  EXPECT_EQ(scan.code, status::not_found);
  EXPECT_NE(scan.message.find("none of them mlx5"), std::string::npos) << scan.message;
  const rdma_device_scan blind = scan_devices(f.ibv, nullptr);
  EXPECT_NE(blind.message.find("libmlx5.so.1 is not loaded"), std::string::npos) << blind.message;
}

TEST(mlx5_device_scan, kernel_without_rdma_stack_is_explained) {
  fake_rdma_core f(0, nullptr);
  fake_count = -1;
  fake_errno = ENOSYS;
  const rdma_device_scan scan = scan_devices(f.ibv, &f.dv);
  EXPECT_EQ(scan.code, status::not_found);
  EXPECT_NE(scan.message.find("no RDMA devices found"), std::string::npos) << scan.message;
  EXPECT_NE(scan.message.find("kernel RDMA stack is not loaded"), std::string::npos) << scan.message;
}

TEST(mlx5_device_scan, empty_device_list_is_freed_and_reported) {
  fake_rdma_core f(0, nullptr);
  const rdma_device_scan scan = scan_devices(f.ibv, &f.dv);
  EXPECT_EQ(scan.code, status::not_found);
  EXPECT_NE(scan.message.find("no RDMA devices found"), std::string::npos) << scan.message;
  EXPECT_TRUE(fake_freed);
}

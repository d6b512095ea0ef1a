// Run-time loading of the CUDA driver and GDRCopy: a missing library or symbol fails with a
// message that names the library and what it disables; a present one loads.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>

#include "env_guard.hpp"
#include "gpu/cuda_driver.hpp"
#include "gpu/gdrcopy.hpp"

using gdaki::status;
using gdaki_test::env_guard;

namespace {

constexpr const char* missing_path = "/nonexistent/gdaki-test/libmissing.so";

bool file_exists(const char* p) {
  struct stat st {};
  return ::stat(p, &st) == 0;
}

}  // namespace

TEST(cuda_driver_loader, missing_library_names_libcuda_and_what_it_disables) {
  env_guard g("GDAKI_LIBCUDA", missing_path);
  gdaki::gpu::cuda_driver_api api{};
  std::string msg;
  EXPECT_EQ(gdaki::gpu::load_cuda_driver(api, msg), status::not_found);
  EXPECT_NE(msg.find("libcuda.so.1 not found"), std::string::npos) << msg;
  EXPECT_NE(msg.find(missing_path), std::string::npos) << msg;
  EXPECT_NE(msg.find("GDAKI_LIBCUDA"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GPU initiators"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NVIDIA driver"), std::string::npos) << msg;
}

TEST(cuda_driver_loader, library_without_cuda_symbols_is_not_supported_and_names_the_symbol) {
  // Any real library that lacks cuInit exercises the missing-symbol path.
  env_guard g("GDAKI_LIBCUDA", "libdl.so.2");
  gdaki::gpu::cuda_driver_api api{};
  std::string msg;
  EXPECT_EQ(gdaki::gpu::load_cuda_driver(api, msg), status::not_supported);
  EXPECT_NE(msg.find("libcuda.so.1 (libdl.so.2) lacks symbol cuInit"), std::string::npos) << msg;
}

TEST(cuda_driver_loader, toolkit_stub_loads_and_cuinit_reports_stub_library) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!file_exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  env_guard g("GDAKI_LIBCUDA", stub);
  gdaki::gpu::cuda_driver_api api{};
  std::string msg;
  ASSERT_EQ(gdaki::gpu::load_cuda_driver(api, msg), status::ok) << msg;
  EXPECT_EQ(api.path, stub);
  EXPECT_NE(api.mem_get_handle_for_address_range, nullptr);
  EXPECT_EQ(api.init(0), gdaki::gpu::cu::error_stub_library);
}

TEST(cuda_driver_loader, real_driver_initialises_when_present) {
  gdaki::gpu::cuda_driver_api api{};
  std::string msg;
  if (gdaki::gpu::load_cuda_driver(api, msg) != status::ok) GTEST_SKIP() << msg;
  const gdaki::gpu::cu::result r = api.init(0);
  if (r == gdaki::gpu::cu::error_stub_library || r == gdaki::gpu::cu::error_no_device) {
    GTEST_SKIP() << "no GPU: " << gdaki::gpu::describe(&api, r);
  }
  ASSERT_EQ(r, gdaki::gpu::cu::success) << gdaki::gpu::describe(&api, r);
  int n = 0;
  EXPECT_EQ(api.device_get_count(&n), gdaki::gpu::cu::success);
  EXPECT_GT(n, 0);
}

TEST(gdrcopy_loader, missing_library_names_libgdrapi_and_what_it_disables) {
  env_guard g("GDAKI_LIBGDRAPI", missing_path);
  gdaki::gpu::gdrcopy_api api{};
  std::string msg;
  EXPECT_EQ(gdaki::gpu::load_gdrcopy(api, msg), status::not_found);
  EXPECT_NE(msg.find("libgdrapi.so.2 not found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GDAKI_LIBGDRAPI"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GDRCopy mappings are unavailable"), std::string::npos) << msg;
  EXPECT_NE(msg.find("install GDRCopy"), std::string::npos) << msg;
}

TEST(gdrcopy_loader, library_without_gdr_symbols_is_not_supported_and_names_the_symbol) {
  env_guard g("GDAKI_LIBGDRAPI", "libdl.so.2");
  gdaki::gpu::gdrcopy_api api{};
  std::string msg;
  EXPECT_EQ(gdaki::gpu::load_gdrcopy(api, msg), status::not_supported);
  EXPECT_NE(msg.find("lacks symbol gdr_open"), std::string::npos) << msg;
}

TEST(gdrcopy_loader, stub_library_loads_with_optional_version_entry_missing) {
  env_guard g("GDAKI_LIBGDRAPI", GDAKI_TEST_GDRAPI_STUB);
  gdaki::gpu::gdrcopy_api api{};
  std::string msg;
  ASSERT_EQ(gdaki::gpu::load_gdrcopy(api, msg), status::ok) << msg;
  EXPECT_EQ(api.runtime_get_version, nullptr);
  ASSERT_EQ(api.missing.size(), 1u);
  EXPECT_NE(api.missing[0].find("gdr_runtime_get_version"), std::string::npos) << api.missing[0];
  // The stub behaves like GDRCopy without its kernel module.
  EXPECT_EQ(api.open(), nullptr);
}

TEST(gdrcopy_loader, empty_override_falls_back_to_the_default_name) {
  env_guard g("GDAKI_LIBGDRAPI", "");
  gdaki::gpu::gdrcopy_api api{};
  std::string msg;
  const status s = gdaki::gpu::load_gdrcopy(api, msg);
  if (s == status::ok) {
    EXPECT_EQ(api.path, "libgdrapi.so.2");
  } else {
    EXPECT_EQ(s, status::not_found);
    EXPECT_EQ(msg.find(" at "), std::string::npos) << "no override path expected: " << msg;
    EXPECT_NE(msg.find("libgdrapi.so.2 not found"), std::string::npos) << msg;
  }
}

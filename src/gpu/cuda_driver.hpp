// internal: the CUDA driver API (libcuda.so.1), loaded at run time. The driver ships with
// the NVIDIA kernel driver, not with the CUDA toolkit, so gdaki neither links it nor needs
// cuda.h to build: the few types and constants used are declared here and, when cuda.h
// is available at build time, checked against it (cuda_driver.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dynlib.hpp"
#include "gdaki/status.hpp"

namespace gdaki::gpu {

// Minimal CUDA driver declarations (values from the CUDA driver API reference).
namespace cu {
using result = int;  // CUresult
using device = int;  // CUdevice
using deviceptr = unsigned long long;  // CUdeviceptr (64-bit hosts only)
struct ctx_st;
using context = ctx_st*;  // CUcontext

inline constexpr result success = 0;
inline constexpr result error_not_initialized = 3;
inline constexpr result error_stub_library = 34;  // the toolkit's link stub, not a driver
inline constexpr result error_no_device = 100;
inline constexpr result error_not_supported = 801;

// CUdevice_attribute values gdaki reads.
inline constexpr int attr_pci_bus_id = 33;
inline constexpr int attr_pci_device_id = 34;
inline constexpr int attr_pci_domain_id = 50;
inline constexpr int attr_compute_capability_major = 75;
inline constexpr int attr_compute_capability_minor = 76;
inline constexpr int attr_host_register_supported = 99;
inline constexpr int attr_gpu_direct_rdma_supported = 116;
inline constexpr int attr_dma_buf_supported = 124;

// cuMemHostRegister flags.
inline constexpr unsigned host_register_portable = 0x01;
inline constexpr unsigned host_register_devicemap = 0x02;
inline constexpr unsigned host_register_iomemory = 0x04;  // MMIO, e.g. a NIC's UAR page

inline constexpr int mem_range_handle_type_dma_buf_fd = 1;  // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
inline constexpr int pointer_attribute_memory_type = 2;     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
inline constexpr unsigned memorytype_device = 2;             // CU_MEMORYTYPE_DEVICE
}  // namespace cu

// The entry points gdaki uses. Required ones are never null in a loaded table; optional
// ones are null when the driver predates them (see `missing`).
struct cuda_driver_api {
  cu::result (*init)(unsigned flags);
  cu::result (*driver_get_version)(int* version);
  cu::result (*device_get_count)(int* count);
  cu::result (*device_get)(cu::device* dev, int ordinal);
  cu::result (*device_get_attribute)(int* value, int attribute, cu::device dev);
  cu::result (*device_get_name)(char* name, int len, cu::device dev);
  cu::result (*get_error_string)(cu::result error, const char** text);
  cu::result (*primary_ctx_retain)(cu::context* ctx, cu::device dev);
  cu::result (*primary_ctx_release)(cu::device dev);
  cu::result (*ctx_set_current)(cu::context ctx);
  cu::result (*mem_alloc)(cu::deviceptr* ptr, size_t bytes);
  cu::result (*mem_free)(cu::deviceptr ptr);
  cu::result (*mem_host_alloc)(void** ptr, size_t bytes, unsigned flags);
  cu::result (*mem_free_host)(void* ptr);
  cu::result (*mem_host_register)(void* ptr, size_t bytes, unsigned flags);
  cu::result (*mem_host_unregister)(void* ptr);
  cu::result (*mem_host_get_device_pointer)(cu::deviceptr* dptr, void* ptr, unsigned flags);
  cu::result (*pointer_get_attribute)(void* data, int attribute, cu::deviceptr ptr);
  // cuMemsetD8_v2: initialises GPU-resident CQ rings (every op_own to 0xF1) without a CPU
  // store into GPU memory.
  cu::result (*memset_d8)(cu::deviceptr ptr, unsigned char value, size_t count);
  // cuMemcpyHtoD_v2 / cuMemcpyDtoH_v2: an exported QP handle for GPU initiators lives in
  // GPU memory (export.hpp); the host writes it once and reads it back for inspection.
  cu::result (*memcpy_htod)(cu::deviceptr dst, const void* src, size_t bytes);
  cu::result (*memcpy_dtoh)(void* dst, cu::deviceptr src, size_t bytes);
  // Optional: CUDA 11.7+ drivers. Null means GPU memory cannot be exported as a dma-buf.
  cu::result (*mem_get_handle_for_address_range)(void* handle, cu::deviceptr ptr, size_t bytes,
                                                  int handle_type, unsigned long long flags);

  std::string path;                  // where libcuda was loaded from
  std::vector<std::string> missing;  // one line per absent optional entry point
};

// What libcuda is and what its absence costs.
const detail::library_spec& cuda_driver_spec();

// Loads libcuda.so.1 (or the path in GDAKI_LIBCUDA) into `out`, reading the environment on
// every call; the process-wide instance below uses it once. Does not call cuInit. Returns
// ok; not_found when the library cannot be opened; not_supported when it lacks a required
// entry point. On failure `message` names the library and what is disabled.
status load_cuda_driver(cuda_driver_api& out, std::string& message);

// The process-wide driver table, loaded on first use (thread-safe). Returns nullptr when
// unavailable, with the reason in *message when message is not null.
const cuda_driver_api* cuda_driver(std::string* message = nullptr);

// Returns "CUDA_ERROR_... (n): text" for a driver result, using the driver's own strings
// when it is loaded.
std::string describe(const cuda_driver_api* api, cu::result r);

}  // namespace gdaki::gpu

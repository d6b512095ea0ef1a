#include "cuda_driver.hpp"

#include <mutex>

// When the toolkit headers are present at build time, prove the hand-written declarations
// match them; without the toolkit the build still works on the declarations alone.
#if __has_include(<cuda.h>)
#include <cuda.h>
#include <type_traits>
static_assert(std::is_same_v<gdaki::gpu::cu::deviceptr, CUdeviceptr>, "CUdeviceptr is 64-bit");
static_assert(std::is_same_v<gdaki::gpu::cu::device, CUdevice>, "CUdevice is an int");
static_assert(sizeof(CUresult) == sizeof(gdaki::gpu::cu::result), "CUresult is int-sized");
static_assert(gdaki::gpu::cu::error_stub_library == CUDA_ERROR_STUB_LIBRARY &&
                  gdaki::gpu::cu::error_no_device == CUDA_ERROR_NO_DEVICE &&
                  gdaki::gpu::cu::error_not_supported == CUDA_ERROR_NOT_SUPPORTED &&
                  gdaki::gpu::cu::error_not_initialized == CUDA_ERROR_NOT_INITIALIZED,
              "CUresult values");
static_assert(gdaki::gpu::cu::attr_dma_buf_supported == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED &&
                  gdaki::gpu::cu::attr_gpu_direct_rdma_supported ==
                      CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED &&
                  gdaki::gpu::cu::attr_host_register_supported ==
                      CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED &&
                  gdaki::gpu::cu::attr_pci_bus_id == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID &&
                  gdaki::gpu::cu::attr_pci_device_id == CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID &&
                  gdaki::gpu::cu::attr_pci_domain_id == CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID &&
                  gdaki::gpu::cu::attr_compute_capability_major ==
                      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR &&
                  gdaki::gpu::cu::attr_compute_capability_minor ==
                      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
              "CUdevice_attribute values");
static_assert(gdaki::gpu::cu::host_register_iomemory == CU_MEMHOSTREGISTER_IOMEMORY &&
                  gdaki::gpu::cu::host_register_devicemap == CU_MEMHOSTREGISTER_DEVICEMAP &&
                  gdaki::gpu::cu::host_register_portable == CU_MEMHOSTREGISTER_PORTABLE,
              "cuMemHostRegister flags");
static_assert(gdaki::gpu::cu::mem_range_handle_type_dma_buf_fd ==
                      CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD &&
                  gdaki::gpu::cu::pointer_attribute_memory_type ==
                      CU_POINTER_ATTRIBUTE_MEMORY_TYPE &&
                  gdaki::gpu::cu::memorytype_device == CU_MEMORYTYPE_DEVICE,
              "dma-buf handle type and pointer attributes");
#endif

namespace gdaki::gpu {

const detail::library_spec& cuda_driver_spec() {
  static const detail::library_spec spec{
      "libcuda.so.1", "GDAKI_LIBCUDA",
      "GPU initiators and GPU-memory placement are unavailable (CPU initiators still work)",
      "install the NVIDIA driver, which provides libcuda.so.1 (the CUDA toolkit alone does not)"};
  return spec;
}

status load_cuda_driver(cuda_driver_api& out, std::string& message) {
  const auto& spec = cuda_driver_spec();
  detail::dynlib lib;
  if (status s = detail::dynlib::open(spec, lib, message); s != status::ok) return s;

  cuda_driver_api api{};
  std::vector<std::string> missing_required;
  const char* core = "the CUDA driver cannot be used";
  using detail::resolve;
  // Versioned names (_v2) are what cuda.h maps the plain names to; the unversioned
  // symbols keep old 32-bit-size ABIs.
  resolve(spec, lib, api.init, "cuInit", missing_required, core);
  resolve(spec, lib, api.driver_get_version, "cuDriverGetVersion", missing_required, core);
  resolve(spec, lib, api.device_get_count, "cuDeviceGetCount", missing_required, core);
  resolve(spec, lib, api.device_get, "cuDeviceGet", missing_required, core);
  resolve(spec, lib, api.device_get_attribute, "cuDeviceGetAttribute", missing_required, core);
  resolve(spec, lib, api.device_get_name, "cuDeviceGetName", missing_required, core);
  resolve(spec, lib, api.get_error_string, "cuGetErrorString", missing_required, core);
  resolve(spec, lib, api.primary_ctx_retain, "cuDevicePrimaryCtxRetain", missing_required, core);
  resolve(spec, lib, api.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", missing_required,
          core);
  resolve(spec, lib, api.ctx_set_current, "cuCtxSetCurrent", missing_required, core);
  resolve(spec, lib, api.mem_alloc, "cuMemAlloc_v2", missing_required, core);
  resolve(spec, lib, api.mem_free, "cuMemFree_v2", missing_required, core);
  resolve(spec, lib, api.mem_host_alloc, "cuMemHostAlloc", missing_required, core);
  resolve(spec, lib, api.mem_free_host, "cuMemFreeHost", missing_required, core);
  resolve(spec, lib, api.mem_host_register, "cuMemHostRegister_v2", missing_required, core);
  resolve(spec, lib, api.mem_host_unregister, "cuMemHostUnregister", missing_required, core);
  resolve(spec, lib, api.mem_host_get_device_pointer, "cuMemHostGetDevicePointer_v2",
          missing_required, core);
  resolve(spec, lib, api.pointer_get_attribute, "cuPointerGetAttribute", missing_required, core);
  resolve(spec, lib, api.memset_d8, "cuMemsetD8_v2", missing_required, core);
  resolve(spec, lib, api.memcpy_htod, "cuMemcpyHtoD_v2", missing_required, core);
  resolve(spec, lib, api.memcpy_dtoh, "cuMemcpyDtoH_v2", missing_required, core);
  if (!missing_required.empty()) {
    message = missing_required.front() + "; " + spec.disables + "; " + spec.remedy;
    return status::not_supported;
  }
  resolve(spec, lib, api.mem_get_handle_for_address_range, "cuMemGetHandleForAddressRange",
          api.missing,
          "GPU memory cannot be exported as a dma-buf (needs an NVIDIA driver with CUDA 11.7 or "
          "later); GPU memory registration falls back to nvidia-peermem");
  api.path = lib.path();
  out = std::move(api);
  message.clear();
  return status::ok;
}

const cuda_driver_api* cuda_driver(std::string* message) {
  // Loaded once: the environment is read on first use, like the dynamic linker does.
  static std::once_flag once;
  static cuda_driver_api api;
  static std::string why;
  static bool ok = false;
  std::call_once(once, [] { ok = load_cuda_driver(api, why) == status::ok; });
  if (!ok && message != nullptr) *message = why;
  return ok ? &api : nullptr;
}

std::string describe(const cuda_driver_api* api, cu::result r) {
  std::string text = "CUDA error " + std::to_string(r);
  if (r == cu::error_stub_library) {
    // The stub cannot describe itself: its cuGetErrorString fails too.
    return text + ": CUDA_ERROR_STUB_LIBRARY (libcuda.so.1 is the toolkit's link stub, not a driver)";
  }
  const char* s = nullptr;
  if (api != nullptr && api->get_error_string != nullptr &&
      api->get_error_string(r, &s) == cu::success && s != nullptr) {
    text += ": ";
    text += s;
  }
  return text;
}

}  // namespace gdaki::gpu

// doca_gpu_*: the GPU handle and GPU-visible memory. gdaki serves them without CUDA: a
// handle is host-only and "GPU" memory is host memory in soft::alloc_shared blocks (so a
// soft peer in another process on this host maps it and moves data with one memcpy), which
// is what CPU initiators on the host grid launcher need. With a real GPU this is not what
// DOCA does (GPU memory from cudaMalloc); that path is not written (docs/doca-compat.md).
#include <cstdlib>
#include <cstring>
#include <new>

#include "doca/doca_objects.hpp"
#include "gdaki/providers/soft.hpp"

namespace {
using gdaki::doca::fail;
using gdaki::doca::guarded;
}  // namespace

extern "C" doca_error_t doca_gpu_create(const char* gpu_bus_id, doca_gpu_t** gpu_dev) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_create, gpu_bus_id, gpu_dev);
  if (gpu_bus_id == nullptr || gpu_dev == nullptr) {
    return fail(DOCA_ERROR_INVALID_VALUE, "doca_gpu_create", "gpu_bus_id and gpu_dev must not be NULL");
  }
  return guarded("doca_gpu_create", [&] {
    auto* g = new doca_gpu_t{};
    g->type = DOCA_GPU_LIB_TYPE_OPEN;
    g->open = new doca_gpu_open{};
    g->open->bus_id = gpu_bus_id;
    DOCA_GPUNETIO_LOG(INFO,
                      "GPU %s: gdaki serves this handle with host memory for CPU initiators (host grid launcher); "
                      "CUDA GPU memory is not used",
                      gpu_bus_id);
    *gpu_dev = g;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_gpu_destroy(doca_gpu_t* gpu_dev) {
  GDAKI_DOCA_SDK_FORWARD_DESTROY(doca_gpu_destroy, gpu_dev);
  doca_gpu_open* g = gdaki::doca::open_of(gpu_dev);
  if (g == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, "doca_gpu_destroy", "gpu_dev is NULL or not gdaki's");
  {
    std::lock_guard<std::mutex> lock(g->mutex);
    if (!g->allocations.empty()) {
      return fail(DOCA_ERROR_IN_USE, "doca_gpu_destroy",
                  "GPU " + g->bus_id + " still has " + std::to_string(g->allocations.size()) +
                      " allocations: free them first");
    }
  }
  delete g;
  delete gpu_dev;
  return DOCA_SUCCESS;
}

extern "C" doca_error_t doca_gpu_mem_alloc(doca_gpu_t* gpu_dev, size_t size, size_t alignment,
                                           enum doca_gpu_mem_type mtype, void** memptr_gpu, void** memptr_cpu) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_mem_alloc, gpu_dev, size, alignment, mtype, memptr_gpu, memptr_cpu);
  static constexpr const char* call = "doca_gpu_mem_alloc";
  doca_gpu_open* g = gdaki::doca::open_of(gpu_dev);
  if (g == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, call, "gpu_dev is NULL or not gdaki's");
  if (memptr_gpu == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, call, "memptr_gpu is NULL");
  if (size == 0) return fail(DOCA_ERROR_INVALID_VALUE, call, "size is 0");
  if (alignment != 0 && (alignment & (alignment - 1)) != 0) {
    return fail(DOCA_ERROR_INVALID_VALUE, call, "alignment " + std::to_string(alignment) + " is not a power of two");
  }
  if (alignment > 4096) {
    return fail(DOCA_ERROR_NOT_SUPPORTED, call,
                "alignment " + std::to_string(alignment) + " above a page: gdaki's blocks are page-aligned");
  }
  if (mtype != DOCA_GPU_MEM_TYPE_GPU && memptr_cpu == nullptr) {
    return fail(DOCA_ERROR_INVALID_VALUE, call, "memptr_cpu is NULL for a memory type with a CPU pointer");
  }
  if (mtype > DOCA_GPU_MEM_TYPE_GPU_CPU_DATA_DIRECT) {
    return fail(DOCA_ERROR_INVALID_VALUE, call, "mtype " + std::to_string(static_cast<int>(mtype)) + " is unknown");
  }
  return guarded(call, [&] {
    void* p = gdaki::soft::alloc_shared(size);  // page-aligned, zero-filled, mappable by soft peers
    {
      std::lock_guard<std::mutex> lock(g->mutex);
      g->allocations.emplace(p, size);
    }
    *memptr_gpu = p;
    if (memptr_cpu != nullptr) *memptr_cpu = mtype == DOCA_GPU_MEM_TYPE_GPU ? nullptr : p;
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_gpu_mem_free(doca_gpu_t* gpu_dev, void* memptr_gpu) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_mem_free, gpu_dev, memptr_gpu);
  static constexpr const char* call = "doca_gpu_mem_free";
  doca_gpu_open* g = gdaki::doca::open_of(gpu_dev);
  if (g == nullptr) return fail(DOCA_ERROR_INVALID_VALUE, call, "gpu_dev is NULL or not gdaki's");
  {
    std::lock_guard<std::mutex> lock(g->mutex);
    if (g->allocations.erase(memptr_gpu) == 0) {
      return fail(DOCA_ERROR_INVALID_VALUE, call, "the pointer was not allocated by doca_gpu_mem_alloc on this GPU");
    }
  }
  return guarded(call, [&] {
    gdaki::soft::free_shared(memptr_gpu);
    return DOCA_SUCCESS;
  });
}

extern "C" doca_error_t doca_gpu_get_dmabuf_fd(doca_gpu_t* gpu_dev, void* memptr_gpu, size_t size, int* dmabuf_fd) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_get_dmabuf_fd, gpu_dev, memptr_gpu, size, dmabuf_fd);
  (void)gpu_dev;
  (void)memptr_gpu;
  (void)size;
  (void)dmabuf_fd;
  return fail(DOCA_ERROR_NOT_SUPPORTED, "doca_gpu_get_dmabuf_fd",
              "gdaki's DOCA layer allocates host memory (no CUDA), which has no dmabuf; the soft NIC registers it "
              "directly");
}

extern "C" doca_error_t doca_gpu_verbs_check_host_version(uint32_t version) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_check_host_version, version);
  if ((version >> 16) != DOCA_GPUNETIO_VERSION_MAJOR) {
    return gdaki::doca::fail(DOCA_ERROR_UNSUPPORTED_VERSION, "doca_gpu_verbs_check_host_version",
                             "host code built for major version " + std::to_string(version >> 16) +
                                 ", gdaki serves " + std::to_string(DOCA_GPUNETIO_VERSION_MAJOR));
  }
  return DOCA_SUCCESS;
}

extern "C" doca_error_t doca_gpu_verbs_check_device_version(uint32_t version) {
  GDAKI_DOCA_SDK_FORWARD(doca_gpu_verbs_check_device_version, version);
  if ((version >> 16) != DOCA_GPUNETIO_VERSION_MAJOR) {
    return gdaki::doca::fail(DOCA_ERROR_UNSUPPORTED_VERSION, "doca_gpu_verbs_check_device_version",
                             "device code built for major version " + std::to_string(version >> 16) +
                                 ", gdaki serves " + std::to_string(DOCA_GPUNETIO_VERSION_MAJOR));
  }
  return DOCA_SUCCESS;
}

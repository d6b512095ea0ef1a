// A stand-in for the CUDA driver (libcuda.so.1), loaded through GDAKI_LIBCUDA by tests that
// exercise the GPU-initiator export on machines without a GPU. It implements the entry
// points gdaki resolves (src/gpu/cuda_driver.cpp) over host memory, and remembers which
// ranges it handed out as "GPU memory" (cuMemAlloc) and as host-pinned memory
// (cuMemHostAlloc), so cuPointerGetAttribute answers as the real driver would. CPU threads
// then play the GPU's part: they can reach both kinds, which a real GPU's host cannot, so
// tests check *where* things were placed through stand_in_cuda_memory_type() rather than
// by faulting.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace {

using result = int;
constexpr result success = 0;
constexpr result invalid_value = 1;      // CUDA_ERROR_INVALID_VALUE
constexpr result out_of_memory = 2;      // CUDA_ERROR_OUT_OF_MEMORY
constexpr int attr_memory_type = 2;      // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned memorytype_host = 1;  // CU_MEMORYTYPE_HOST
constexpr unsigned memorytype_device = 2;

struct allocation {
  size_t bytes;
  unsigned type;
};

std::mutex mu;
std::map<uintptr_t, allocation> allocations;  // by start address

void* remember(size_t bytes, unsigned type) {
  void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (p == nullptr) return nullptr;
  std::lock_guard lk(mu);
  allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, type};
  return p;
}

bool forget(const void* p, unsigned type) {
  std::lock_guard lk(mu);
  const auto it = allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == allocations.end() || it->second.type != type) return false;
  allocations.erase(it);
  std::free(const_cast<void*>(p));
  return true;
}

// The type of the allocation holding p; 0 when the stand-in never handed it out.
unsigned type_of(uintptr_t p) {
  std::lock_guard lk(mu);
  auto it = allocations.upper_bound(p);
  if (it == allocations.begin()) return 0;
  --it;
  return p < it->first + it->second.bytes ? it->second.type : 0;
}

}  // namespace

extern "C" {

// Test-only: 2 for "GPU memory", 1 for host-pinned memory, 0 for memory the stand-in did
// not allocate.
unsigned stand_in_cuda_memory_type(const void* p) { return type_of(reinterpret_cast<uintptr_t>(p)); }

result cuInit(unsigned) { return success; }
result cuDriverGetVersion(int* v) {
  *v = 13000;
  return success;
}
result cuDeviceGetCount(int* n) {
  *n = 1;
  return success;
}
result cuDeviceGet(int* dev, int ordinal) {
  if (ordinal != 0) return invalid_value;
  *dev = 0;
  return success;
}
result cuDeviceGetAttribute(int* value, int, int) {
  *value = 0;
  return success;
}
result cuDeviceGetName(char* name, int len, int) {
  std::strncpy(name, "gdaki stand-in GPU", static_cast<size_t>(len));
  if (len > 0) name[len - 1] = '\0';
  return success;
}
result cuGetErrorString(result, const char** text) {
  *text = "stand-in driver error";
  return success;
}
result cuDevicePrimaryCtxRetain(void** ctx, int) {
  static int the_context;
  *ctx = &the_context;
  return success;
}
result cuDevicePrimaryCtxRelease_v2(int) { return success; }
result cuCtxSetCurrent(void*) { return success; }
result cuMemAlloc_v2(unsigned long long* ptr, size_t bytes) {
  void* p = remember(bytes, memorytype_device);
  if (p == nullptr) return out_of_memory;
  *ptr = reinterpret_cast<uintptr_t>(p);
  return success;
}
result cuMemFree_v2(unsigned long long ptr) {
  return forget(reinterpret_cast<void*>(static_cast<uintptr_t>(ptr)), memorytype_device) ? success : invalid_value;
}
result cuMemHostAlloc(void** ptr, size_t bytes, unsigned) {
  *ptr = remember(bytes, memorytype_host);
  return *ptr != nullptr ? success : out_of_memory;
}
result cuMemFreeHost(void* p) { return forget(p, memorytype_host) ? success : invalid_value; }
result cuMemHostRegister_v2(void*, size_t, unsigned) { return success; }
result cuMemHostUnregister(void*) { return success; }
result cuMemHostGetDevicePointer_v2(unsigned long long* dptr, void* p, unsigned) {
  *dptr = reinterpret_cast<uintptr_t>(p);
  return success;
}
result cuPointerGetAttribute(void* data, int attribute, unsigned long long ptr) {
  if (attribute != attr_memory_type) return invalid_value;
  const unsigned type = type_of(static_cast<uintptr_t>(ptr));
  if (type == 0) return invalid_value;  // as the driver answers for memory it does not know
  *static_cast<unsigned*>(data) = type;
  return success;
}
result cuMemsetD8_v2(unsigned long long ptr, unsigned char value, size_t count) {
  if (type_of(static_cast<uintptr_t>(ptr)) != memorytype_device) return invalid_value;
  std::memset(reinterpret_cast<void*>(static_cast<uintptr_t>(ptr)), value, count);
  return success;
}
result cuMemcpyHtoD_v2(unsigned long long dst, const void* src, size_t bytes) {
  if (type_of(static_cast<uintptr_t>(dst)) != memorytype_device) return invalid_value;
  std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(dst)), src, bytes);
  return success;
}
result cuMemcpyDtoH_v2(void* dst, unsigned long long src, size_t bytes) {
  if (type_of(static_cast<uintptr_t>(src)) != memorytype_device) return invalid_value;
  std::memcpy(dst, reinterpret_cast<const void*>(static_cast<uintptr_t>(src)), bytes);
  return success;
}

}  // extern "C"

// Semaphore memory: one anonymous mapping, zeroed by the kernel (status 0 is free).
#include "gdaki/eth/host_semaphore.hpp"

#include <sys/mman.h>

namespace gdaki::eth {

host_semaphore::~host_semaphore() {
  if (h_.slots != nullptr) ::munmap(h_.slots, bytes_);
}

status host_semaphore::create(uint32_t count, uint32_t payload_bytes) {
  if (count == 0 || payload_bytes == 0 || h_.slots != nullptr) return status::invalid;
  const uint32_t stride = dev::semaphore_stride(payload_bytes);
  bytes_ = size_t{count} * stride;
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return status::no_memory;
  h_.slots = static_cast<uint8_t*>(p);
  h_.count = count;
  h_.stride = stride;
  h_.payload_bytes = payload_bytes;
  return status::ok;
}

}  // namespace gdaki::eth

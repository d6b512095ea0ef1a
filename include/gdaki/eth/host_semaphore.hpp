// Owns the memory of a GPU-CPU semaphore (gdaki/device/semaphore.hpp) in host memory, for
// CPU-thread initiators and consumers. A GPU producer needs the same layout in
// host-pinned mapped memory (cuMemHostRegister of data(), then the device pointer in the
// handle); that path is not exercised without a GPU. Host-only.
#pragma once

#include <cstdint>

#include "gdaki/device/semaphore.hpp"
#include "gdaki/status.hpp"

namespace gdaki::eth {

class host_semaphore {
 public:
  host_semaphore() = default;
  host_semaphore(const host_semaphore&) = delete;
  host_semaphore& operator=(const host_semaphore&) = delete;
  ~host_semaphore();

  // Allocates `count` slots of `payload_bytes` each, every status free. Returns ok,
  // invalid (count or payload_bytes zero, or a second create), or no_memory.
  status create(uint32_t count, uint32_t payload_bytes);
  // The handle to pass to producers and consumers (plain data).
  const dev::semaphore_handle& handle() const { return h_; }

 private:
  dev::semaphore_handle h_;
  size_t bytes_ = 0;
};

}  // namespace gdaki::eth

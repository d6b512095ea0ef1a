// The proxy's CPU-side poster interface: whatever actually moves the bytes for a
// validated descriptor (libfabric RMA/atomics, our mlx5 WQE writer on soft or mlx5 QPs).
// This is control-side host code, so it is an abstract class (the device side never
// calls it; device dispatch stays a compile-time switch). Host-only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gdaki/proxy/descriptor.hpp"
#include "gdaki/status.hpp"

namespace gdaki::proxy {

// One finished operation, as reported by poster::poll.
struct completion {
  uint64_t cookie;  // the value given to poster::post
  status result;    // ok, or io_error / access for an operation that failed
};

class poster {
 public:
  virtual ~poster() = default;

  // Starts the operation of validated descriptor d. Never called with fence or quiet
  // (the proxy service implements those by waiting for completions). cookie comes back,
  // exactly once, in the operation's completion. Returns ok (started), again (no room
  // now: poll, then retry the same descriptor), invalid (unknown peer or key, range
  // outside a region), not_supported (opcode this poster lacks) or io_error.
  virtual status post(const descriptor& d, uint64_t cookie) = 0;

  // Drives progress and collects up to max finished operations into out. Returns the
  // number written (0 = none yet).
  virtual size_t poll(completion* out, size_t max) = 0;

  // A short name for logs and benchmark output ("libfabric:shm", ...).
  virtual const char* name() const = 0;
};

}  // namespace gdaki::proxy

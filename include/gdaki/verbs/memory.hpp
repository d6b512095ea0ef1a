// Where the control path places rings and doorbell records (CQ rings, SQ/RQ rings). The
// data path reads and writes them, so they must be reachable by the initiator: plain host
// memory for CPU threads, host-pinned (mapped) or GPU memory for GPU threads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gdaki::verbs {

enum class memory_kind : uint32_t {
  host = 0,         // ordinary host memory (CPU initiators)
  host_pinned = 1,  // page-locked host memory mapped for the GPU
  device = 2,       // GPU memory
};

// Placement of one ring. With buffer == nullptr the provider allocates memory of `kind`
// and frees it with the object; otherwise it uses [buffer, buffer + size), which the caller
// keeps alive (and reachable by the NIC) until the object is destroyed.
struct placement {
  memory_kind kind = memory_kind::host;
  void* buffer = nullptr;  // caller-owned memory, or nullptr to let the provider allocate
  size_t size = 0;         // bytes at buffer (checked against what the ring needs)
};

const char* to_string(memory_kind k);

}  // namespace gdaki::verbs

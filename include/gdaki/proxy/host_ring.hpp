// A proxy ring in plain host memory, owned by the caller: allocation and layout for CPU
// producers, tests and benchmarks. (GPU producers need the ring in host-pinned mapped
// memory; that allocation belongs to the GPU loader, which lays it out with ring_init.)
// Host-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "gdaki/proxy/ring.hpp"
#include "gdaki/status.hpp"

namespace gdaki::proxy {

class host_ring {
 public:
  host_ring() = default;
  host_ring(const host_ring&) = delete;
  host_ring& operator=(const host_ring&) = delete;
  ~host_ring() { std::free(mem_); }

  // Allocates and lays out 2^log2_slots slots and num_counters counters, positions
  // starting at first_position (tests start near 2^32 to cross the wrap). Returns ok,
  // invalid (sizes out of range; see ring_init), busy (already initialised) or no_memory.
  status init(uint32_t log2_slots, uint32_t num_counters, uint32_t first_position = 0) {
    if (mem_ != nullptr) return status::busy;
    if (log2_slots < ring_min_log2 || log2_slots > ring_max_log2 || num_counters > ring_max_counters)
      return status::invalid;
    const size_t bytes = ring_bytes(log2_slots, num_counters);  // a multiple of 64
    mem_ = std::aligned_alloc(64, bytes);
    if (mem_ == nullptr) return status::no_memory;
    return ring_init(mem_, bytes, log2_slots, num_counters, &handle_, first_position);
  }

  // The handle producers and the consumer share (valid after a successful init).
  ring_handle& handle() { return handle_; }

 private:
  void* mem_ = nullptr;
  ring_handle handle_{};
};

}  // namespace gdaki::proxy

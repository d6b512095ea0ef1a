// GPU-CPU semaphores: an array of slots, each a status word and a small payload, through
// which one stage of a pipeline (a receive kernel) hands work to the next (a CPU thread or
// another kernel), DOCA GPUNetIO's doca_gpu_semaphore in gdaki's vocabulary. The producer
// writes the payload, then sets the status with release; the consumer acquires the status,
// then reads the payload. Header-only; compiles as CUDA device code, nvcc host code and
// g++ host code; the memory must be reachable by both sides (host-pinned mapped memory
// for a GPU-CPU pair, any memory for CPU threads).
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/sq.hpp"
#include "gdaki/status.hpp"

namespace gdaki::dev {

// A slot's state. The usual cycle: free -> (producer fills) ready -> (consumer claims)
// hold -> (consumer finished) done or free. The values are the contract between the two
// sides, not enforced: any status may be set at any time.
enum class semaphore_status : uint32_t { free = 0, ready = 1, hold = 2, done = 3, error = 4 };

struct semaphore_handle {
  uint8_t* slots = nullptr;    // count * stride bytes; slot i at i * stride
  uint32_t count = 0;          // slots
  uint32_t stride = 0;         // bytes per slot: the 8-byte header, then the payload (multiple of 64)
  uint32_t payload_bytes = 0;  // usable payload bytes per slot
  uint32_t reserved0 = 0;
};

// Bytes a slot needs for `payload_bytes` of payload: header plus payload, rounded up to a
// cache line so neighbouring slots never share one (producer and consumer of different
// slots would otherwise contend).
GDAKI_HD constexpr uint32_t semaphore_stride(uint32_t payload_bytes);

// The payload of slot `i` (payload_bytes long, 8-byte aligned). Returns the pointer.
GDAKI_HD inline void* semaphore_payload(const semaphore_handle& s, uint32_t i);

// Sets slot i's status. Release: every store to the payload before this call is visible
// to the side that reads the status with semaphore_get_status. Returns ok, or invalid
// for i out of range.
GDAKI_HD inline status semaphore_set_status(const semaphore_handle& s, uint32_t i, semaphore_status st);

// Slot i's status (acquire: the payload the setter wrote is visible after it). i must be
// below s.count. Returns the status.
GDAKI_HD inline semaphore_status semaphore_get_status(const semaphore_handle& s, uint32_t i);

// Moves slot i from `expected` to `desired` atomically, so that one of several consumers
// (or producers) wins a slot. Returns ok, again (the status was not `expected`), or
// invalid for i out of range.
GDAKI_HD inline status semaphore_transition(const semaphore_handle& s, uint32_t i, semaphore_status expected,
                                            semaphore_status desired);

// Waits until slot i's status is `want` (up to timeout_ns; wait_forever = no limit).
// Returns ok, timeout, or invalid for i out of range.
GDAKI_HD inline status semaphore_wait_status(const semaphore_handle& s, uint32_t i, semaphore_status want,
                                             uint64_t timeout_ns = wait_forever);

}  // namespace gdaki::dev

#include "gdaki/device/impl/semaphore.hpp"  // the definitions of the functions declared above

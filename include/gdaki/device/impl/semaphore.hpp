// Definitions for gdaki/device/semaphore.hpp: the slot accessors and waits.
// Internal: not to be included directly; include gdaki/device/semaphore.hpp, which includes
// this file at its end. Declarations, contracts and default arguments live there.
#pragma once

#include <cstdint>

namespace gdaki::dev {

GDAKI_HD constexpr uint32_t semaphore_stride(uint32_t payload_bytes) { return (8 + payload_bytes + 63) / 64 * 64; }

GDAKI_HD inline void* semaphore_payload(const semaphore_handle& s, uint32_t i) {
  return s.slots + static_cast<uint64_t>(i) * s.stride + 8;
}

GDAKI_HD inline status semaphore_set_status(const semaphore_handle& s, uint32_t i, semaphore_status st) {
  if (i >= s.count) return status::invalid;
  arch::store_release(reinterpret_cast<uint32_t*>(s.slots + static_cast<uint64_t>(i) * s.stride),
                      static_cast<uint32_t>(st));
  return status::ok;
}

GDAKI_HD inline semaphore_status semaphore_get_status(const semaphore_handle& s, uint32_t i) {
  return static_cast<semaphore_status>(
      arch::load_acquire(reinterpret_cast<const uint32_t*>(s.slots + static_cast<uint64_t>(i) * s.stride)));
}

GDAKI_HD inline status semaphore_transition(const semaphore_handle& s, uint32_t i, semaphore_status expected,
                                            semaphore_status desired) {
  if (i >= s.count) return status::invalid;
  auto* word = reinterpret_cast<uint32_t*>(s.slots + static_cast<uint64_t>(i) * s.stride);
  return arch::compare_swap(word, static_cast<uint32_t>(expected), static_cast<uint32_t>(desired)) ? status::ok
                                                                                                  : status::again;
}

GDAKI_HD inline status semaphore_wait_status(const semaphore_handle& s, uint32_t i, semaphore_status want,
                                             uint64_t timeout_ns) {
  if (i >= s.count) return status::invalid;
  const uint64_t start = timeout_ns == wait_forever ? 0 : arch::clock_ns();
  for (uint32_t it = 0; semaphore_get_status(s, i) != want; ++it) {
    if (timeout_ns != wait_forever && arch::clock_ns() - start >= timeout_ns) return status::timeout;
    arch::spin_pause(it);
  }
  return status::ok;
}

}  // namespace gdaki::dev

// How much work the core tests do: the full counts in release builds, a tenth under a
// sanitizer (ThreadSanitizer runs these loops 5-15x slower; the interleavings that matter
// still occur thousands of times).
#pragma once

#include <cstdint>

namespace core_test {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr uint64_t scale_divisor = 10;
#else
inline constexpr uint64_t scale_divisor = 1;
#endif
constexpr uint64_t scaled(uint64_t n) { return n / scale_divisor; }
}  // namespace core_test

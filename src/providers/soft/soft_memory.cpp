// Ring memory for the soft provider.
#include "soft_memory.hpp"

#include <cstdlib>
#include <cstring>

namespace gdaki::soft {

status ring_memory::allocate(size_t bytes, std::string* why) {
  release();
  const size_t rounded = (bytes + 4095) & ~size_t{4095};
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) {
    *why = "out of memory allocating " + std::to_string(rounded) + " bytes";
    return status::no_memory;
  }
  std::memset(p, 0, rounded);
  p_ = static_cast<uint8_t*>(p);
  n_ = rounded;
  owned_ = true;
  return status::ok;
}

status ring_memory::place(const verbs::placement& pl, size_t bytes, const char* what, std::string* why) {
  if (pl.kind == verbs::memory_kind::device) {
    *why = std::string(what) + ": the soft NIC is a CPU and cannot read GPU memory; use host or host_pinned";
    return status::not_supported;
  }
  if (pl.buffer == nullptr) {
    if (pl.kind == verbs::memory_kind::host_pinned) {
      *why = std::string(what) +
             ": the soft provider allocates plain host memory only; pass a caller buffer (e.g. cudaHostAlloc) "
             "for host_pinned";
      return status::not_supported;
    }
    return allocate(bytes, why);
  }
  if (pl.size < bytes) {
    *why = std::string(what) + ": caller buffer of " + std::to_string(pl.size) + " bytes, need " + std::to_string(bytes);
    return status::invalid;
  }
  if (reinterpret_cast<uintptr_t>(pl.buffer) % 64 != 0) {
    *why = std::string(what) + ": caller buffer must be 64-byte aligned";
    return status::invalid;
  }
  release();
  p_ = static_cast<uint8_t*>(pl.buffer);
  n_ = bytes;
  owned_ = false;
  std::memset(p_, 0, bytes);
  return status::ok;
}

void ring_memory::release() {
  if (owned_) std::free(p_);
  p_ = nullptr;
  n_ = 0;
  owned_ = false;
}

}  // namespace gdaki::soft

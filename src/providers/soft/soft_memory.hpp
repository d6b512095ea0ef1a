// internal: ring memory of the soft provider: provider-allocated (zeroed, page aligned) or
// a caller buffer described by a verbs::placement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gdaki/status.hpp"
#include "gdaki/verbs/memory.hpp"

namespace gdaki::soft {

class ring_memory {
 public:
  ring_memory() = default;
  ring_memory(const ring_memory&) = delete;
  ring_memory& operator=(const ring_memory&) = delete;
  ~ring_memory() { release(); }

  // Allocates `bytes` of zeroed host memory (page aligned). Returns ok or no_memory.
  status allocate(size_t bytes, std::string* why);
  // Uses the placement: its buffer if it has one (checked for size and kind), else a
  // provider allocation. Returns ok, invalid, not_supported or no_memory.
  status place(const verbs::placement& p, size_t bytes, const char* what, std::string* why);
  void release();

  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }
  bool owned() const { return owned_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
  bool owned_ = false;
};

}  // namespace gdaki::soft

// Page-aligned host memory filled with a pattern derived from a seed and registered on a
// PD: the source and target of data-path tests that compare bytes with memcmp (two
// regions with different seeds differ in almost every byte).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "gdaki/device/handles.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"

namespace test_support {

struct patterned_region {
  struct deleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, deleter> mem;
  size_t bytes;
  gdaki::verbs::mr mr;
  patterned_region(const gdaki::verbs::pd& pd, size_t n, uint32_t access, uint8_t seed)
      : mem(static_cast<uint8_t*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))), bytes(n) {
    for (size_t i = 0; i < n; ++i) mem.get()[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 9));
    mr = gdaki::verbs::mr(pd, mem.get(), n, access);
  }
  uint8_t* data() const { return mem.get(); }
  uint64_t addr(uint64_t off = 0) const { return reinterpret_cast<uint64_t>(mem.get()) + off; }
  // A local pointer into the region; key_delta corrupts the lkey for error tests.
  gdaki::dev::local_ptr at(uint64_t off = 0, uint32_t key_delta = 0) const {
    return {addr(off), mr.lkey() + key_delta};
  }
};

}  // namespace test_support

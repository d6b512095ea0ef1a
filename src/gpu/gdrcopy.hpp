// internal: GDRCopy (libgdrapi.so.2), loaded at run time. GDRCopy maps GPU memory into the
// CPU's address space through the GPU's BAR1, so a CPU thread can read or write a
// GPU-resident ring or doorbell record with plain loads and stores while a kernel runs,
// without going through CUDA streams. gdaki uses it for CPU-side access to GPU-resident
// objects (CPU-assisted doorbells, error dumps); the data path never needs it. It needs
// both this library and the gdrdrv kernel module (/dev/gdrdrv).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dynlib.hpp"
#include "gdaki/status.hpp"

namespace gdaki::gpu {

// Minimal GDRCopy declarations (gdrapi.h, API version 2).
namespace gdr {
struct state;
using handle = state*;  // gdr_t
struct mh {             // gdr_mh_t: passed by value
  unsigned long h;
};
}  // namespace gdr

struct gdrcopy_api {
  gdr::handle (*open)();
  int (*close)(gdr::handle g);
  int (*pin_buffer)(gdr::handle g, unsigned long addr, size_t size, uint64_t p2p_token,
                    uint32_t va_space, gdr::mh* mh);
  int (*unpin_buffer)(gdr::handle g, gdr::mh mh);
  int (*map)(gdr::handle g, gdr::mh mh, void** va, size_t size);
  int (*unmap)(gdr::handle g, gdr::mh mh, void* va, size_t size);
  // Optional (GDRCopy 2.1+): null on older libraries.
  void (*runtime_get_version)(int* major, int* minor);

  std::string path;
  std::vector<std::string> missing;
};

const detail::library_spec& gdrcopy_spec();

// Loads libgdrapi.so.2 (or the path in GDAKI_LIBGDRAPI) into `out`, reading the
// environment on every call. Does not open /dev/gdrdrv. Returns ok; not_found when the
// library cannot be opened; not_supported when it lacks a required entry point.
status load_gdrcopy(gdrcopy_api& out, std::string& message);

// The process-wide table, loaded once (thread-safe); nullptr with *message when unavailable.
const gdrcopy_api* gdrcopy(std::string* message = nullptr);

}  // namespace gdaki::gpu

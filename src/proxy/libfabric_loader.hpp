// internal: the few libfabric entry points that are real exported functions, resolved
// from libfabric.so.1 at run time. Everything else in libfabric's API (fi_domain,
// fi_write, fi_cq_read, ...) is a static inline call through the objects' ops tables,
// so these five are the whole link surface.
#pragma once

#include <cstdint>
#include <string>

struct fi_info;
struct fi_fabric_attr;
struct fid_fabric;

namespace gdaki::proxy::ofi {

struct api {
  int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags, const fi_info* hints,
                 fi_info** info);
  void (*freeinfo)(fi_info* info);
  fi_info* (*dupinfo)(const fi_info* info);
  int (*fabric)(fi_fabric_attr* attr, fid_fabric** fabric, void* context);
  const char* (*strerror)(int errnum);
};

// The loaded table, or nullptr with *why set (library or symbol missing). Loads once per
// process; the library stays loaded.
const api* load(std::string* why);

}  // namespace gdaki::proxy::ofi

// Lookup of the real rdma-core functions (real_verbs.hpp).
#include "real_verbs.hpp"

#include <cstdio>
#include <cstring>

namespace gdaki::ibverbs {

void* real_symbol(const char* lib, const char* name, const char* version) {
  // RTLD_NOLOAD first: the program's own copy when it linked the library; else load it.
  void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return nullptr;
  return dlvsym(h, name, version);
}

}  // namespace gdaki::ibverbs

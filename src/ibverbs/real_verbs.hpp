// internal: the real rdma-core functions, for every object that is not the soft device's.
// Looked up once by name and symbol version (dlvsym) in libibverbs.so.1 / libmlx5.so.1,
// opened by name so the interposer works whether or not the program linked them. Where
// rdma-core is not installed the lookup fails and the verb reports ENOSYS, as a library
// with no devices would.
#pragma once

#include <dlfcn.h>

namespace gdaki::ibverbs {

void* real_symbol(const char* lib, const char* name, const char* version);

template <typename Fn>
Fn real_verbs(const char* name, const char* version) {
  return reinterpret_cast<Fn>(real_symbol("libibverbs.so.1", name, version));
}

template <typename Fn>
Fn real_mlx5(const char* name, const char* version) {
  return reinterpret_cast<Fn>(real_symbol("libmlx5.so.1", name, version));
}

}  // namespace gdaki::ibverbs

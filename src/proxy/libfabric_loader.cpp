// internal: run-time loading of libfabric (see libfabric_loader.hpp). Loaded rather than
// linked so the gdaki library keeps lean dependencies: a machine without libfabric still
// runs everything else, and the proxy says exactly what is missing.
#include "libfabric_loader.hpp"

#include <dlfcn.h>


namespace gdaki::proxy::ofi {

namespace {

struct loaded {
  api table{};
  bool ok = false;
  std::string error;
};

template <typename Fn>
bool resolve(void* lib, const char* symbol, Fn* out, std::string* error) {
  void* p = dlsym(lib, symbol);
  if (p == nullptr) {
    *error = std::string("libfabric.so.1 lacks ") + symbol;
    return false;
  }
  *out = reinterpret_cast<Fn>(p);
  return true;
}

loaded load_once() {
  loaded l;
  // RTLD_LOCAL: libfabric's symbols stay out of the global namespace of the process.
  void* lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    l.error = std::string("cannot load libfabric.so.1 (install libfabric1 / libfabric-dev): ") + (e ? e : "unknown");
    return l;
  }
  l.ok = resolve(lib, "fi_getinfo", &l.table.getinfo, &l.error) &&
         resolve(lib, "fi_freeinfo", &l.table.freeinfo, &l.error) &&
         resolve(lib, "fi_dupinfo", &l.table.dupinfo, &l.error) &&
         resolve(lib, "fi_fabric", &l.table.fabric, &l.error) &&
         resolve(lib, "fi_strerror", &l.table.strerror, &l.error);
  return l;  // never dlclose: provider threads and atexit handlers may still live in it
}

}  // namespace

const api* load(std::string* why) {
  static const loaded l = load_once();  // thread-safe one-time initialisation
  if (!l.ok) {
    if (why != nullptr) *why = l.error;
    return nullptr;
  }
  return &l.table;
}

}  // namespace gdaki::proxy::ofi

#include "dynlib.hpp"

#include <dlfcn.h>

#include <cstdlib>

#include "core/env_config.hpp"

namespace gdaki::detail {

status dynlib::open(const library_spec& spec, dynlib& out, std::string& message) {
  // Read through the GDAKI_* table (src/core/env_config.cpp), which lists every override.
  const std::string override_path = spec.env_var != nullptr ? env::read_text(spec.env_var, "") : "";
  if (!override_path.empty()) return open_path(spec, override_path, out, message);
  return open_path(spec, spec.soname, out, message);
}

status dynlib::open_path(const library_spec& spec, const std::string& path, dynlib& out,
                         std::string& message) {
  // RTLD_NOW: a library missing one of its own dependencies fails here, with dlerror()
  // naming it, instead of at the first call. RTLD_LOCAL: its symbols must not satisfy
  // anyone else's lookups (a test stub must not shadow the real library elsewhere).
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    message = std::string(spec.soname) + " not found";
    if (path != spec.soname) {
      message += " at " + path;
      const char* env = spec.env_var != nullptr ? std::getenv(spec.env_var) : nullptr;
      if (env != nullptr && path == env) message += std::string(" (set by ") + spec.env_var + ")";
    }
    message += std::string(": ") + spec.disables + "; " + spec.remedy;
    if (why != nullptr) message += std::string(" (dlopen: ") + why + ")";
    return status::not_found;
  }
  out.handle_ = h;
  out.path_ = path;
  message.clear();
  return status::ok;
}

void* dynlib::symbol(const char* name) const {
  return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

void* dynlib::symbol(const char* name, const char* version) const {
  return handle_ != nullptr ? dlvsym(handle_, name, version) : nullptr;
}

std::string missing_symbol_message(const library_spec& spec, const dynlib& lib, const char* symbol,
                                   const char* disables) {
  std::string m = std::string(spec.soname);
  if (lib.path() != spec.soname) m += " (" + lib.path() + ")";
  m += std::string(" lacks symbol ") + symbol + ": " + disables;
  return m;
}

}  // namespace gdaki::detail

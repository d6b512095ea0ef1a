// internal: run-time loading of optional system libraries (libibverbs, libmlx5, libcuda,
// libgdrapi). gdaki never links them: a machine without them still runs the library (the
// soft provider, CPU initiators), and every loader says which library is missing, what
// that disables and how to get it.
#pragma once

#include <string>
#include <vector>

#include "gdaki/status.hpp"

namespace gdaki::detail {

// What a run-time-loaded library is and what its absence costs; used to build messages.
struct library_spec {
  const char* soname;    // the name the dynamic linker searches for, e.g. "libibverbs.so.1"
  const char* env_var;   // names a path that replaces the search, e.g. "GDAKI_LIBIBVERBS"
  const char* disables;  // what does not work without it, e.g. "the mlx5 provider is unavailable"
  const char* remedy;    // how to get it, e.g. "install rdma-core (apt-get install ...)"
};

// An opened library. Loaded libraries stay mapped for the life of the process: libibverbs
// (which dlopens its own providers) and libcuda are not written to be unloaded, and the
// dynamic linker reference-counts repeated opens, so there is nothing to close.
class dynlib {
 public:
  // Opens spec.soname, or the path in the environment variable spec.env_var when that is
  // set and not empty. Returns ok, or not_found with `message` naming the library (and
  // the override path when one was used), what is disabled, the remedy and dlerror().
  static status open(const library_spec& spec, dynlib& out, std::string& message);

  // Opens exactly `path` (a file path or a bare soname), reporting failures as open() does.
  static status open_path(const library_spec& spec, const std::string& path, dynlib& out,
                          std::string& message);

  // Returns the address of `name` (its default version), or nullptr.
  void* symbol(const char* name) const;
  // Returns the address of `name` at symbol version `version` (dlvsym), or nullptr. Used
  // where a library exports several ABI versions of one name (libibverbs does).
  void* symbol(const char* name, const char* version) const;

  bool loaded() const { return handle_ != nullptr; }
  // The path or name the library was opened from.
  const std::string& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

// The message for a library that opened but lacks a symbol: names the library, its path,
// the symbol and what is disabled.
std::string missing_symbol_message(const library_spec& spec, const dynlib& lib, const char* symbol,
                                   const char* disables);

// Resolves `name` (optionally at `version`) into `slot`. When the symbol is absent, leaves
// slot null and appends missing_symbol_message(...) to `missing`. Returns whether it was found.
template <class Fn>
bool resolve(const library_spec& spec, const dynlib& lib, Fn& slot, const char* name,
             std::vector<std::string>& missing, const char* disables,
             const char* version = nullptr) {
  void* p = version != nullptr ? lib.symbol(name, version) : nullptr;
  if (p == nullptr) p = lib.symbol(name);
  // POSIX guarantees a data pointer from dlsym converts to a function pointer.
  slot = reinterpret_cast<Fn>(p);
  if (p == nullptr) missing.push_back(missing_symbol_message(spec, lib, name, disables));
  return p != nullptr;
}

}  // namespace gdaki::detail

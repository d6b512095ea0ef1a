// SDK mode (sdk_mode.hpp): finding NVIDIA's DOCA libraries under DOCA_SDK_LIB_PATH and
// their symbols, and the log lines that say why a call stays with gdaki.
#include "doca/sdk_mode.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "doca_gpunetio_host.h"

namespace gdaki::doca::sdk {
namespace {

// The DOCA libraries, in load order: verbs needs common, gpunetio needs both.
enum class library { common, verbs, gpunetio, count };
constexpr const char* library_files[] = {"libdoca_common.so", "libdoca_verbs.so", "libdoca_gpunetio.so"};

// Which library exports a DOCA call, by its prefix.
library library_of(std::string_view name) {
  if (name.starts_with("doca_verbs_")) return library::verbs;
  if (name.starts_with("doca_gpu")) return library::gpunetio;
  return library::common;
}

// Loading flags: RTLD_DEEPBIND makes an SDK library bind its calls to other DOCA functions
// (libdoca_gpunetio calling doca_verbs_*) to the SDK's own definitions rather than to
// gdaki's exports of the same names, which come first in the process's global scope. The
// sanitizer runtimes refuse RTLD_DEEPBIND (they must intercept every library's calls), so
// sanitizer builds load without it; they only ever load the test's stand-in, which calls
// nothing.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int load_flags = RTLD_NOW | RTLD_LOCAL;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr int load_flags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr int load_flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif
#else
constexpr int load_flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

struct sdk_libraries {
  std::string dir;                                    // empty: SDK mode off
  void* handles[static_cast<int>(library::count)]{};  // nullptr: not loaded (logged)
};

// Reads DOCA_SDK_LIB_PATH and loads what it holds, once per process; each failure is one
// log line. The handles stay open for the life of the process.
const sdk_libraries& libraries() {
  static const sdk_libraries libs = [] {
    sdk_libraries l;
    const char* dir = std::getenv("DOCA_SDK_LIB_PATH");
    if (dir == nullptr || *dir == '\0') return l;
    struct stat st {};
    const int rc = ::stat(dir, &st);
    if (rc != 0 || !S_ISDIR(st.st_mode)) {
      const std::string why = rc != 0 ? std::strerror(errno) : "not a directory";
      DOCA_GPUNETIO_LOG(WARNING,
                        "SDK mode: DOCA_SDK_LIB_PATH=%s cannot be used (%s); gdaki serves every DOCA host call", dir,
                        why.c_str());
      return l;
    }
    l.dir = dir;
    for (int i = 0; i < static_cast<int>(library::count); ++i) {
      const std::string path = l.dir + "/" + library_files[i];
      l.handles[i] = ::dlopen(path.c_str(), load_flags);
      if (l.handles[i] == nullptr) {
        const char* err = ::dlerror();
        DOCA_GPUNETIO_LOG(WARNING,
                          "SDK mode: DOCA_SDK_LIB_PATH=%s: cannot load %s (%s); gdaki serves the calls it holds", dir,
                          library_files[i], err != nullptr ? err : "unknown dlopen error");
      } else {
        DOCA_GPUNETIO_LOG(INFO, "SDK mode: DOCA_SDK_LIB_PATH=%s: %s loaded; its calls are forwarded to it", dir,
                          library_files[i]);
      }
    }
    return l;
  }();
  return libs;
}

}  // namespace

void* resolve(symbol& s) {
  std::call_once(s.once, [&s] {
    const sdk_libraries& libs = libraries();
    if (libs.dir.empty()) return;
    const int lib = static_cast<int>(library_of(s.name));
    void* h = libs.handles[lib];
    if (h == nullptr) return;  // the library's line already said why
    ::dlerror();
    s.fn = ::dlsym(h, s.name);
    if (s.fn == nullptr) {
      DOCA_GPUNETIO_LOG(WARNING, "SDK mode: DOCA_SDK_LIB_PATH=%s: %s has no symbol %s; gdaki serves this call",
                        libs.dir.c_str(), library_files[lib], s.name);
    }
  });
  return s.fn;
}

void tell_gdaki_handle(symbol& s) {
  if (!s.told_gdaki_handle.exchange(true)) {
    DOCA_GPUNETIO_LOG(WARNING,
                      "SDK mode: %s was given a handle gdaki made (its maker is not in the SDK directory); gdaki "
                      "serves this call",
                      s.name);
  }
}

}  // namespace gdaki::doca::sdk

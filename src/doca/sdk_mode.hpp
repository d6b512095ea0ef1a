// SDK mode: when DOCA_SDK_LIB_PATH names a directory holding NVIDIA's DOCA libraries, a
// DOCA host call that finds its symbol there is forwarded to it; otherwise gdaki serves it.
// Each entry point opens with GDAKI_DOCA_SDK_FORWARD(itself, its arguments...).
//
// Per symbol, decided once, at the call's first use:
//   - DOCA_SDK_LIB_PATH unset or empty: gdaki serves every call, silently.
//   - the directory, the call's library (libdoca_common.so for doca_error_*,
//     libdoca_verbs.so for doca_verbs_*, libdoca_gpunetio.so for doca_gpu_*), or the symbol
//     in it is missing: one log line names the directory / library / symbol and the cause
//     (the directory and library lines once per process, the symbol line once per symbol),
//     and gdaki serves the call.
//   - found: the call goes to the SDK. DOCA handles (the {type, sdk | open} structs of
//     doca_gpunetio_host.h and doca_verbs.h) are unwrapped into the SDK's own pointer on the
//     way in and handles the SDK makes are wrapped (type SDK) on the way out; a destroy call
//     frees the wrapper. Every other argument passes unchanged.
// Per call: a found symbol given a handle gdaki made is served by gdaki (the SDK cannot use
// it; logged once per symbol). A gdaki-served call given an SDK handle refuses it as not
// gdaki's (open_of in doca_objects.hpp). Internal to libgdaki_doca (docs/doca-compat.md,
// SDK mode).
#pragma once

#include <atomic>
#include <concepts>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>

#include "doca_error.h"

namespace gdaki::doca::sdk {

// One forwarded entry point: its name and, once resolved, the SDK's function (or none).
struct symbol {
  const char* name;
  std::once_flag once{};
  void* fn = nullptr;
  std::atomic<bool> told_gdaki_handle{false};
};

// Looks name up in its DOCA library under DOCA_SDK_LIB_PATH, loading the libraries on the
// first call; logs why not, once. Returns the function, or nullptr when gdaki serves it.
void* resolve(symbol& s);
// Logs, once per symbol, that a call found in the SDK was given a handle gdaki made.
void tell_gdaki_handle(symbol& s);

// A DOCA handle: a library type (0 = gdaki, "open"; 1 = the SDK) and the implementation's
// object in a union.
template <typename T>
concept handle = std::is_class_v<T> && requires(T& h) {
  h.type;
  h.sdk;
};

// How one argument crosses to the SDK. Default: unchanged.
template <typename A>
struct arg {
  A a;
  A get() const { return a; }
  bool made_by_gdaki() const { return false; }
  void commit() {}
  void release() {}
};

// A handle the call reads or destroys: the SDK's object goes in its place.
template <typename H>
  requires handle<std::remove_const_t<H>>
struct arg<H*> {
  H* h;
  using sdk_ptr = std::conditional_t<std::is_const_v<H>, const void*, void*>;
  sdk_ptr get() const { return h != nullptr ? h->sdk : nullptr; }
  bool made_by_gdaki() const { return h != nullptr && h->type == 0; }
  void commit() {}
  void release() {
    if constexpr (!std::is_const_v<H>) delete h;  // the wrapper; the SDK freed its object
  }
};

// A handle the call makes: the SDK writes its pointer here, gdaki wraps it.
template <handle H>
struct arg<H**> {
  H** out;
  void* made = nullptr;
  void** get() { return out != nullptr ? &made : nullptr; }
  bool made_by_gdaki() const { return false; }
  void commit() {
    if (out == nullptr) return;
    H* w = new H{};
    w->type = static_cast<decltype(w->type)>(1);  // DOCA_*_LIB_TYPE_SDK
    w->sdk = made;
    *out = w;
  }
  void release() {}
};

template <typename A>
using sdk_arg_t = decltype(std::declval<arg<A>&>().get());

// Calls the SDK's version of F when it has one and may take these arguments; returns
// nothing when gdaki must serve the call. Release: a destroy call (wrappers freed after the
// SDK succeeds).
template <bool Release = false, typename R, typename... Args>
std::optional<R> forward(symbol& s, R (*)(Args...), std::type_identity_t<Args>... args) {
  void* fn = resolve(s);
  if (fn == nullptr) return std::nullopt;
  std::tuple<arg<Args>...> crossing{arg<Args>{args}...};
  const bool gdaki_handle = std::apply([](const auto&... a) { return (a.made_by_gdaki() || ...); }, crossing);
  if (gdaki_handle) {
    tell_gdaki_handle(s);
    return std::nullopt;
  }
  using sdk_fn = R (*)(sdk_arg_t<Args>...);
  const auto call = reinterpret_cast<sdk_fn>(fn);
  R r = std::apply([call](auto&... a) { return call(a.get()...); }, crossing);
  if constexpr (std::is_same_v<R, doca_error_t>) {
    if (r == DOCA_SUCCESS) {
      std::apply([](auto&... a) { (a.commit(), ...); }, crossing);
      if constexpr (Release) std::apply([](auto&... a) { (a.release(), ...); }, crossing);
    }
  }
  return r;
}

}  // namespace gdaki::doca::sdk

// The first statement of a DOCA host entry point: forwards the call to the SDK when SDK
// mode has it (and returns the SDK's result), otherwise falls through to gdaki's body.
#define GDAKI_DOCA_SDK_FORWARD(call, ...)                                                          \
  do {                                                                                             \
    static gdaki::doca::sdk::symbol gdaki_sdk_symbol_{#call};                                      \
    if (auto gdaki_sdk_r_ = gdaki::doca::sdk::forward(gdaki_sdk_symbol_, &call, __VA_ARGS__)) {    \
      return *gdaki_sdk_r_;                                                                        \
    }                                                                                              \
  } while (0)
// The same for a call that destroys the handles it is given.
#define GDAKI_DOCA_SDK_FORWARD_DESTROY(call, ...)                                                  \
  do {                                                                                             \
    static gdaki::doca::sdk::symbol gdaki_sdk_symbol_{#call};                                      \
    if (auto gdaki_sdk_r_ = gdaki::doca::sdk::forward<true>(gdaki_sdk_symbol_, &call, __VA_ARGS__)) { \
      return *gdaki_sdk_r_;                                                                        \
    }                                                                                              \
  } while (0)

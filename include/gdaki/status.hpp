// The closed status vocabulary of gdaki. Every public function, host or device, reports
// its outcome as one of these values (control-path errors also carry a message that names
// the object and the cause; see gdaki/error.hpp).
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"

namespace gdaki {

enum class status : int32_t {
  ok = 0,
  again,          // nothing to do right now (no completion yet, ring full); try again
  in_progress,    // accepted, not finished
  not_supported,  // the provider, device or build lacks the feature
  invalid,        // a bad argument or an object in the wrong state
  access,         // a protection or permission check failed
  io_error,       // the operation completed in error (see its syndrome)
  timeout,        // a bounded wait ran out
  no_memory,      // an allocation or a fixed-size table is exhausted
  not_found,      // no such device, key or object
  busy,           // the resource is in use (port in use, object still referenced)
  closed,         // the peer or connection went away
};

GDAKI_HD constexpr const char* to_string(status s) {
  switch (s) {
    case status::ok: return "ok";
    case status::again: return "again";
    case status::in_progress: return "in_progress";
    case status::not_supported: return "not_supported";
    case status::invalid: return "invalid";
    case status::access: return "access";
    case status::io_error: return "io_error";
    case status::timeout: return "timeout";
    case status::no_memory: return "no_memory";
    case status::not_found: return "not_found";
    case status::busy: return "busy";
    case status::closed: return "closed";
  }
  return "unknown";
}

}  // namespace gdaki

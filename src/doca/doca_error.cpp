// doca_error_t's names and descriptions, DOCA_GPUNETIO_LOG, and the shared error helpers of
// libgdaki_doca (doca_objects.hpp).
#include <cstdarg>
#include <cstdio>

#include "doca/doca_objects.hpp"
#include "doca_error.h"

namespace {

struct error_text {
  const char* name;
  const char* descr;
};

// Indexed by the enum's value (0 .. DOCA_ERROR_DEVICE_FATAL_ERROR).
constexpr error_text error_texts[] = {
    {"DOCA_SUCCESS", "Success"},
    {"DOCA_ERROR_UNKNOWN", "Unknown error"},
    {"DOCA_ERROR_NOT_PERMITTED", "Operation not permitted"},
    {"DOCA_ERROR_IN_USE", "Resource already in use"},
    {"DOCA_ERROR_NOT_SUPPORTED", "Operation not supported"},
    {"DOCA_ERROR_AGAIN", "Resource temporarily unavailable, try again"},
    {"DOCA_ERROR_INVALID_VALUE", "Invalid input"},
    {"DOCA_ERROR_NO_MEMORY", "Memory allocation failure"},
    {"DOCA_ERROR_INITIALIZATION", "Resource initialization failure"},
    {"DOCA_ERROR_TIME_OUT", "Timer expired waiting for resource"},
    {"DOCA_ERROR_SHUTDOWN", "Shut down in process or completed"},
    {"DOCA_ERROR_CONNECTION_RESET", "Connection reset by peer"},
    {"DOCA_ERROR_CONNECTION_ABORTED", "Connection aborted"},
    {"DOCA_ERROR_CONNECTION_INPROGRESS", "Connection in progress"},
    {"DOCA_ERROR_NOT_CONNECTED", "Not connected"},
    {"DOCA_ERROR_NO_LOCK", "Unable to acquire required lock"},
    {"DOCA_ERROR_NOT_FOUND", "Resource not found"},
    {"DOCA_ERROR_IO_FAILED", "Input/output operation failed"},
    {"DOCA_ERROR_BAD_STATE", "Bad state"},
    {"DOCA_ERROR_UNSUPPORTED_VERSION", "Unsupported version"},
    {"DOCA_ERROR_OPERATING_SYSTEM", "Operating system call failure"},
    {"DOCA_ERROR_DRIVER", "Driver or library call failure"},
    {"DOCA_ERROR_UNEXPECTED", "An unexpected scenario was detected"},
    {"DOCA_ERROR_ALREADY_EXIST", "Resource already exists"},
    {"DOCA_ERROR_FULL", "No more space in resource"},
    {"DOCA_ERROR_EMPTY", "No entry is available in resource"},
    {"DOCA_ERROR_IN_PROGRESS", "Operation is in progress"},
    {"DOCA_ERROR_TOO_BIG", "Requested operation too big to be contained"},
    {"DOCA_ERROR_AUTHENTICATION", "Authentication failure"},
    {"DOCA_ERROR_BAD_CONFIG", "Configuration is not valid"},
    {"DOCA_ERROR_SKIPPED", "Result is valid, but some previous output data was dropped"},
    {"DOCA_ERROR_DEVICE_FATAL_ERROR", "Device experienced a fatal error"},
};
constexpr int error_count = static_cast<int>(sizeof(error_texts) / sizeof(error_texts[0]));
static_assert(error_count == DOCA_ERROR_DEVICE_FATAL_ERROR + 1, "one text per doca_error_t value");

const char* level_name(int level) {
  switch (level) {
    case DOCA_GPUNETIO_LOG_LEVEL_ERROR: return "ERROR";
    case DOCA_GPUNETIO_LOG_LEVEL_WARNING: return "WARNING";
    case DOCA_GPUNETIO_LOG_LEVEL_INFO: return "INFO";
    default: return "DEBUG";
  }
}

// gdaki's name for a code, also in SDK mode (gdaki's own log lines name gdaki's codes).
const char* gdaki_error_name(doca_error_t error) {
  const int e = static_cast<int>(error);
  return e >= 0 && e < error_count ? error_texts[e].name : "DOCA_ERROR_UNKNOWN_CODE";
}

}  // namespace

extern "C" const char* doca_error_get_name(doca_error_t error) {
  GDAKI_DOCA_SDK_FORWARD(doca_error_get_name, error);
  return gdaki_error_name(error);
}

extern "C" const char* doca_error_get_descr(doca_error_t error) {
  GDAKI_DOCA_SDK_FORWARD(doca_error_get_descr, error);
  const int e = static_cast<int>(error);
  return e >= 0 && e < error_count ? error_texts[e].descr : "Not a doca_error_t value";
}

extern "C" void doca_gpunetio_log(int level, const char* file, int line, const char* fmt, ...) {
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[gdaki-doca %s] %s:%d: %s\n", level_name(level), file, line, text);
}

namespace gdaki::doca {

doca_error_t fail(doca_error_t err, const char* call, const std::string& why) {
  std::fprintf(stderr, "[gdaki-doca ERROR] %s: %s (%s)\n", call, why.c_str(), gdaki_error_name(err));
  return err;
}

doca_error_t to_doca(gdaki::status s) {
  switch (s) {
    case gdaki::status::ok: return DOCA_SUCCESS;
    case gdaki::status::again: return DOCA_ERROR_AGAIN;
    case gdaki::status::in_progress: return DOCA_ERROR_IN_PROGRESS;
    case gdaki::status::not_supported: return DOCA_ERROR_NOT_SUPPORTED;
    case gdaki::status::invalid: return DOCA_ERROR_INVALID_VALUE;
    case gdaki::status::access: return DOCA_ERROR_NOT_PERMITTED;
    case gdaki::status::io_error: return DOCA_ERROR_IO_FAILED;
    case gdaki::status::timeout: return DOCA_ERROR_TIME_OUT;
    case gdaki::status::no_memory: return DOCA_ERROR_NO_MEMORY;
    case gdaki::status::not_found: return DOCA_ERROR_NOT_FOUND;
    case gdaki::status::busy: return DOCA_ERROR_IN_USE;
    case gdaki::status::closed: return DOCA_ERROR_CONNECTION_RESET;
  }
  return DOCA_ERROR_UNKNOWN;
}

}  // namespace gdaki::doca

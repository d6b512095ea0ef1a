// The GDAKI_* table and its strict readers (env_config.hpp).
#include "core/env_config.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>

#include "gdaki/error.hpp"

namespace gdaki::env {

namespace {

constexpr uint64_t u32_max = std::numeric_limits<uint32_t>::max();

// Defaults here are the ones the code uses (soft::config's member initialisers, the
// loaders' search); env_config_test checks the soft ones against soft::config{}.
constexpr variable vars[] = {
    {"GDAKI_SOFT_DEVICES", kind::count, "1", 1, 256, "", "soft devices listed (soft0, soft1, ...)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_ENGINE_THREADS", kind::count, "1", 1, 64, "", "progress threads per open soft device",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_INLINE", kind::boolean, "1", 0, 0, "",
     "a CPU thread that rings a doorbell executes the new WQEs itself instead of waiting for an engine thread",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_SPIN_US", kind::count, "50", 0, u32_max, "", "engine busy-polls this long after the last work (us)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_YIELD_US", kind::count, "200", 0, u32_max, "", "then polls with sched_yield this long (us)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_MIN_SLEEP_US", kind::count, "50", 1, u32_max, "", "first sleep between idle polls (us)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_MAX_SLEEP_US", kind::count, "2000", 1, u32_max, "",
     "idle sleeps double up to this (us; raised to GDAKI_SOFT_MIN_SLEEP_US if below)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_BUDGET", kind::count, "64", 1, u32_max, "", "WQEs per QP per engine pass (fairness)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_TIMEOUT_CAP_US", kind::count, "0", 0, u32_max, "",
     "caps one transport-retry wait (us); 0 = no cap", "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_WIRE", kind::choice, "auto", 0, 0, "auto,tcp,shm",
     "wire to soft devices in other processes: auto (same host: shm, else TCP), tcp, shm (same host only)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_LISTEN", kind::text, "127.0.0.1", 0, 0, "", "IPv4 address the wire listens on (0.0.0.0 = all)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_LISTEN_PORT", kind::count, "0", 0, 65535, "", "TCP port the wire listens on; 0 = any free port",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_WIRE_TIMEOUT_MS", kind::count, "2000", 1, u32_max, "",
     "a peer silent this long (ms) fails the WQE with TRANSPORT_RETRY_EXC", "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_SHM_SINGLE_COPY_MIN", kind::count, "16384", 0, u32_max, "",
     "shm wire: messages of at least this many bytes move by one cross-process copy",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_SHM_STREAM_MIN", kind::count, "32768", 0, u32_max, "",
     "shm wire: mapped WRITE copies of at least this many bytes may use streaming stores (0 = never)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_WIRE_WINDOW", kind::count, "256", 1, u32_max, "",
     "requests one wire connection keeps in flight (1 = stop-and-wait)", "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_WIRE_WINDOW_BYTES", kind::count, "262144", 0, u32_max, "",
     "payload bytes one wire connection keeps in flight (two requests always may be)",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_SHM_MAP", kind::boolean, "1", 0, 0, "",
     "shm wire: map a peer's alloc_shared() MRs and move WRITE/READ data with one memcpy",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_SECRET", kind::text, "", 0, 0, "",
     "the job's wire secret, 64 hex digits (never zero); unset: GDAKI_SOFT_SECRET_FILE, else one random per process",
     "src/providers/soft/wire/wire_auth.cpp"},
    {"GDAKI_SOFT_SECRET_FILE", kind::text, "", 0, 0, "",
     "file holding the wire secret; refused unless owned by this user and unreadable to group and others",
     "src/providers/soft/soft_config.cpp"},
    {"GDAKI_SOFT_ALLOW_OTHER_USERS", kind::boolean, "0", 0, 0, "",
     "accept unix-socket peers of another user id (that still prove the secret)", "src/providers/soft/soft_config.cpp"},
    {"GDAKI_VERBS_LOG_ERRORS", kind::boolean, "0", 0, 0, "",
     "libgdaki_verbs.so prints every error completion it hands to ibv_poll_cq", "src/ibverbs/verbs_cq.cpp"},
    {"GDAKI_LIBCUDA", kind::text, "", 0, 0, "", "path of libcuda.so.1, replacing the loader's search",
     "src/gpu/dynlib.cpp (src/gpu/cuda_driver.cpp)"},
    {"GDAKI_LIBGDRAPI", kind::text, "", 0, 0, "", "path of libgdrapi.so.2, replacing the loader's search",
     "src/gpu/dynlib.cpp (src/gpu/gdrcopy.cpp)"},
    {"GDAKI_LIBIBVERBS", kind::text, "", 0, 0, "", "path of libibverbs.so.1, replacing the loader's search",
     "src/gpu/dynlib.cpp (src/providers/mlx5/mlx5_loader.cpp)"},
    {"GDAKI_LIBMLX5", kind::text, "", 0, 0, "", "path of libmlx5.so.1, replacing the loader's search",
     "src/gpu/dynlib.cpp (src/providers/mlx5/mlx5_loader.cpp)"},
};

const char* raw(const char* name) {
  const char* v = std::getenv(name);
  return (v == nullptr || *v == '\0') ? nullptr : v;
}

[[noreturn]] void malformed(const variable& v, const std::string& value) {
  throw error(status::invalid, std::string(v.name) + "='" + value + "': expected " + accepted(v));
}

// Parses `text` for `v`; returns "" when it is accepted, else the error message.
std::string check(const variable& v, const std::string& text) {
  try {
    switch (v.type) {
      case kind::count: {
        if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos) {
          malformed(v, text);
        }
        const unsigned long long x = std::strtoull(text.c_str(), nullptr, 10);
        if (x < v.min || x > v.max) malformed(v, text);
        break;
      }
      case kind::boolean:
        if (!(text == "1" || text == "0" || text == "on" || text == "off" || text == "true" || text == "false" ||
              text == "yes" || text == "no")) {
          malformed(v, text);
        }
        break;
      case kind::choice: {
        const std::string list = std::string(",") + v.choices + ",";
        if (text.empty() || text.find(',') != std::string::npos || list.find("," + text + ",") == std::string::npos) {
          malformed(v, text);
        }
        break;
      }
      case kind::text:
        break;
    }
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

// The environment's value of a variable of `type`, checked; nullptr when unset or empty.
const char* checked(const char* name, kind type) {
  const variable& v = find(name);
  if (v.type != type) throw error(status::invalid, std::string(name) + ": read as the wrong kind (a gdaki bug)");
  const char* text = raw(name);
  if (text != nullptr) {
    const std::string why = check(v, text);
    if (!why.empty()) throw error(status::invalid, why);
  }
  return text;
}

}  // namespace

std::span<const variable> table() { return vars; }

const variable& find(const std::string& name) {
  for (const variable& v : vars) {
    if (name == v.name) return v;
  }
  throw error(status::invalid, name + ": not in the GDAKI_* table (src/core/env_config.cpp)");
}

std::string accepted(const variable& v) {
  switch (v.type) {
    case kind::count: return "an integer " + std::to_string(v.min) + ".." + std::to_string(v.max);
    case kind::boolean: return "1/0, on/off, true/false or yes/no";
    case kind::choice: {
      std::string c = v.choices;
      for (size_t i = 0; (i = c.find(',', i)) != std::string::npos; i += 2) c.replace(i, 1, ", ");
      return "one of " + c;
    }
    case kind::text: return "any text";
  }
  return "";
}

uint32_t read_u32(const char* name, uint32_t fallback) {
  const char* text = checked(name, kind::count);
  return text == nullptr ? fallback : static_cast<uint32_t>(std::strtoull(text, nullptr, 10));
}

bool read_bool(const char* name, bool fallback) {
  const char* text = checked(name, kind::boolean);
  if (text == nullptr) return fallback;
  return std::strcmp(text, "1") == 0 || std::strcmp(text, "on") == 0 || std::strcmp(text, "true") == 0 ||
         std::strcmp(text, "yes") == 0;
}

std::string read_choice(const char* name, const std::string& fallback) {
  const char* text = checked(name, kind::choice);
  return text == nullptr ? fallback : std::string(text);
}

std::string read_text(const char* name, const std::string& fallback) {
  const char* text = checked(name, kind::text);
  return text == nullptr ? fallback : std::string(text);
}

std::vector<setting> current() {
  std::vector<setting> out;
  for (const variable& v : vars) {
    setting s{&v, v.default_value, "default", ""};
    if (const char* text = raw(v.name); text != nullptr) {
      s.value = text;
      s.source = "environment";
      s.error = check(v, text);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gdaki::env

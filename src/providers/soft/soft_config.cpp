// The soft provider's knobs (gdaki/providers/soft.hpp) and their environment variables.
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gdaki/providers/soft.hpp"

namespace gdaki::soft {

namespace {
uint32_t env_u32(const char* name, uint32_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const unsigned long x = std::strtoul(v, &end, 10);
  return (end != nullptr && *end == '\0') ? static_cast<uint32_t>(x) : fallback;
}
bool env_bool(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0 || std::strcmp(v, "false") == 0);
}

std::mutex& cfg_mu() {
  static std::mutex m;
  return m;
}
config& current() {
  static config c = config_from_env();
  return c;
}
}  // namespace

config config_from_env() {
  config c;
  c.devices = env_u32("GDAKI_SOFT_DEVICES", c.devices);
  c.engine_threads = env_u32("GDAKI_SOFT_ENGINE_THREADS", c.engine_threads);
  c.inline_exec = env_bool("GDAKI_SOFT_INLINE", c.inline_exec);
  c.spin_us = env_u32("GDAKI_SOFT_SPIN_US", c.spin_us);
  c.yield_us = env_u32("GDAKI_SOFT_YIELD_US", c.yield_us);
  c.min_sleep_us = env_u32("GDAKI_SOFT_MIN_SLEEP_US", c.min_sleep_us);
  c.max_sleep_us = env_u32("GDAKI_SOFT_MAX_SLEEP_US", c.max_sleep_us);
  c.budget = env_u32("GDAKI_SOFT_BUDGET", c.budget);
  c.timeout_cap_us = env_u32("GDAKI_SOFT_TIMEOUT_CAP_US", c.timeout_cap_us);
  if (const char* w = std::getenv("GDAKI_SOFT_WIRE"); w != nullptr && *w != '\0') c.wire = w;
  if (const char* l = std::getenv("GDAKI_SOFT_LISTEN"); l != nullptr && *l != '\0') c.listen_addr = l;
  c.listen_port = env_u32("GDAKI_SOFT_LISTEN_PORT", c.listen_port);
  c.wire_timeout_ms = env_u32("GDAKI_SOFT_WIRE_TIMEOUT_MS", c.wire_timeout_ms);
  c.shm_single_copy_min = env_u32("GDAKI_SOFT_SHM_SINGLE_COPY_MIN", c.shm_single_copy_min);
  c.wire_window = env_u32("GDAKI_SOFT_WIRE_WINDOW", c.wire_window);
  c.wire_window_bytes = env_u32("GDAKI_SOFT_WIRE_WINDOW_BYTES", c.wire_window_bytes);
  c.shm_map = env_bool("GDAKI_SOFT_SHM_MAP", c.shm_map);
  if (const char* f = std::getenv("GDAKI_SOFT_SECRET_FILE"); f != nullptr) c.secret_file = f;
  c.allow_other_users = env_bool("GDAKI_SOFT_ALLOW_OTHER_USERS", c.allow_other_users);
  if (c.wire_timeout_ms == 0) c.wire_timeout_ms = 1;
  if (c.wire_window == 0) c.wire_window = 1;
  if (c.devices == 0) c.devices = 1;
  if (c.engine_threads == 0) c.engine_threads = 1;
  if (c.budget == 0) c.budget = 1;
  if (c.min_sleep_us == 0) c.min_sleep_us = 1;
  if (c.max_sleep_us < c.min_sleep_us) c.max_sleep_us = c.min_sleep_us;
  return c;
}

config get_config() {
  std::lock_guard lk(cfg_mu());
  return current();
}

void set_config(const config& c) {
  std::lock_guard lk(cfg_mu());
  current() = c;
  if (current().engine_threads == 0) current().engine_threads = 1;
  if (current().budget == 0) current().budget = 1;
  if (current().devices == 0) current().devices = 1;
  if (current().min_sleep_us == 0) current().min_sleep_us = 1;
  if (current().max_sleep_us < current().min_sleep_us) current().max_sleep_us = current().min_sleep_us;
}

}  // namespace gdaki::soft

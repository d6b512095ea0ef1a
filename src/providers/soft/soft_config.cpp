// The soft provider's knobs (gdaki/providers/soft.hpp) and their environment variables,
// read through the GDAKI_* table (src/core/env_config.cpp): a malformed value throws.
#include <mutex>

#include "core/env_config.hpp"
#include "gdaki/providers/soft.hpp"

namespace gdaki::soft {

namespace {

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
  c.devices = env::read_u32("GDAKI_SOFT_DEVICES", c.devices);
  c.engine_threads = env::read_u32("GDAKI_SOFT_ENGINE_THREADS", c.engine_threads);
  c.inline_exec = env::read_bool("GDAKI_SOFT_INLINE", c.inline_exec);
  c.spin_us = env::read_u32("GDAKI_SOFT_SPIN_US", c.spin_us);
  c.yield_us = env::read_u32("GDAKI_SOFT_YIELD_US", c.yield_us);
  c.min_sleep_us = env::read_u32("GDAKI_SOFT_MIN_SLEEP_US", c.min_sleep_us);
  c.max_sleep_us = env::read_u32("GDAKI_SOFT_MAX_SLEEP_US", c.max_sleep_us);
  c.budget = env::read_u32("GDAKI_SOFT_BUDGET", c.budget);
  c.timeout_cap_us = env::read_u32("GDAKI_SOFT_TIMEOUT_CAP_US", c.timeout_cap_us);
  c.wire = env::read_choice("GDAKI_SOFT_WIRE", c.wire);
  c.listen_addr = env::read_text("GDAKI_SOFT_LISTEN", c.listen_addr);
  c.listen_port = env::read_u32("GDAKI_SOFT_LISTEN_PORT", c.listen_port);
  c.wire_timeout_ms = env::read_u32("GDAKI_SOFT_WIRE_TIMEOUT_MS", c.wire_timeout_ms);
  c.shm_single_copy_min = env::read_u32("GDAKI_SOFT_SHM_SINGLE_COPY_MIN", c.shm_single_copy_min);
  c.shm_stream_min = env::read_u32("GDAKI_SOFT_SHM_STREAM_MIN", c.shm_stream_min);
  c.wire_window = env::read_u32("GDAKI_SOFT_WIRE_WINDOW", c.wire_window);
  c.wire_window_bytes = env::read_u32("GDAKI_SOFT_WIRE_WINDOW_BYTES", c.wire_window_bytes);
  c.shm_map = env::read_bool("GDAKI_SOFT_SHM_MAP", c.shm_map);
  c.secret_file = env::read_text("GDAKI_SOFT_SECRET_FILE", c.secret_file);
  c.allow_other_users = env::read_bool("GDAKI_SOFT_ALLOW_OTHER_USERS", c.allow_other_users);
  // The table's ranges keep the rest at least 1; the sleeps are related to each other.
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

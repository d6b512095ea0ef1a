// The soft provider's knobs: a software NIC that executes mlx5 WQEs from the SQ rings and
// writes mlx5 CQEs (docs/soft-nic.md). Devices opened after set_config() use the new
// values; each knob also has an environment variable, read when the provider first loads.
#pragma once

#include <cstdint>

namespace gdaki::soft {

struct config {
  uint32_t devices = 1;         // GDAKI_SOFT_DEVICES: devices listed (soft0, soft1, ...)
  uint32_t engine_threads = 1;  // GDAKI_SOFT_ENGINE_THREADS: progress threads per open device
  // GDAKI_SOFT_INLINE: a CPU thread that rings a doorbell executes the new WQEs itself
  // (under a per-QP try-lock) instead of waiting for an engine thread.
  bool inline_exec = true;
  uint32_t spin_us = 50;        // GDAKI_SOFT_SPIN_US: busy-poll this long after the last work
  uint32_t yield_us = 200;      // GDAKI_SOFT_YIELD_US: then poll with sched_yield this long
  uint32_t min_sleep_us = 50;   // GDAKI_SOFT_MIN_SLEEP_US: first sleep between polls
  uint32_t max_sleep_us = 2000; // GDAKI_SOFT_MAX_SLEEP_US: sleeps double up to this
  uint32_t budget = 64;         // GDAKI_SOFT_BUDGET: WQEs per QP per engine pass (fairness)
  // GDAKI_SOFT_TIMEOUT_CAP_US: caps one transport-retry wait (4.096 us * 2^timeout); 0 = no
  // cap. Keeps "peer gone" tests short without lying about the retry count.
  uint32_t timeout_cap_us = 0;
};

// Returns the configuration devices opened now would use.
config get_config();
// Replaces it (for devices opened afterwards).
void set_config(const config& c);
// Returns the defaults above overridden by the GDAKI_SOFT_* environment variables.
config config_from_env();

}  // namespace gdaki::soft

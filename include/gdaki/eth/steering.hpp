// The flow steering table of one port: rules in priority order, a default queue for
// frames no rule matches, an RSS key, and a hit counter per rule.
//
// Concurrency: one or more threads classify while others add and remove rules. Writers
// build a new immutable snapshot of the rule list and publish it by swapping one pointer under a mutex held only for the swap;
// a classifier works on the snapshot it loaded (RCU-style), so it never sees a half-made
// list and waits at most for a pointer copy, never for a writer's rebuild. Guarantee: a classify call that starts after
// add_rule returned sees the rule; one that starts after remove_rule returned does not.
// Hit counters live in the rule, shared by every snapshot holding it, so no hit is lost
// when the list is republished.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "gdaki/eth/flow_rule.hpp"
#include "gdaki/eth/toeplitz.hpp"
#include "gdaki/status.hpp"

namespace gdaki::eth {

inline constexpr uint32_t no_rule = 0xffffffffu;     // the verdict's rule for the default queue
inline constexpr uint32_t rss_table_entries = 128;   // indirection table size (low 7 hash bits)

// What the table decided for one frame.
struct verdict {
  bool drop = false;
  uint32_t queue = 0;        // valid when !drop
  uint32_t rule = no_rule;   // the matching rule's id, or no_rule (default queue)
  uint32_t hash = 0;         // the RSS hash when the rule's action was rss, else 0
};

class steering_table {
 public:
  // `queues`: how many receive queues the port has; actions naming others are refused.
  explicit steering_table(uint32_t queues, uint32_t default_queue = 0, const rss_key& key = default_rss_key);
  steering_table(const steering_table&) = delete;
  steering_table& operator=(const steering_table&) = delete;

  // Installs `rule`; *id receives its id (ids are never reused). Returns ok, or invalid
  // when the action names a queue the port lacks or an empty RSS group.
  status add_rule(const flow_rule& rule, uint32_t* id);
  // Removes rule `id`. Returns ok, or not_found.
  status remove_rule(uint32_t id);
  // Frames no rule matches go to `queue`. Returns ok, or invalid for a queue the port lacks.
  status set_default_queue(uint32_t queue);
  // Replaces the RSS key (applies to the next snapshot's classifications). Returns ok.
  status set_rss_key(const rss_key& key);

  // Classifies one frame (fields parsed by parse_frame) and counts the hit. Returns the verdict.
  verdict classify(const frame_fields& f) const;

  // A pinned snapshot, for a receive loop that classifies a batch without reloading the
  // list per frame. Rules added or removed meanwhile apply from the next snapshot.
  class snapshot;
  std::shared_ptr<const snapshot> current() const;
  static verdict classify(const snapshot& s, const frame_fields& f);

  // Hits of rule `id` so far, into *hits. Returns ok, or not_found for an unknown or
  // removed rule.
  status hits(uint32_t id, uint64_t* hits) const;
  // Frames that went to the default queue.
  uint64_t default_hits() const;
  uint32_t queue_count() const { return queues_; }

 private:
  struct installed;
  void publish(std::shared_ptr<const snapshot> next);

  const uint32_t queues_;
  std::mutex writers_;  // serialises add/remove/set (they copy, edit, then publish)
  // The published list. Guarded by a mutex held only to copy the pointer, not by
  // std::atomic<std::shared_ptr>: libstdc++ 12 implements that with a lock bit TSan cannot
  // see, and the TSan pass reported every publish against every load (CI, 2026-12-06).
  mutable std::mutex current_mu_;
  std::shared_ptr<const snapshot> current_;
  std::atomic<uint32_t> next_id_{0};
  std::shared_ptr<std::atomic<uint64_t>> default_hits_;
};

}  // namespace gdaki::eth

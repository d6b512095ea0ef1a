// Flow steering: priority-ordered match-action rules over immutable snapshots.
#include "gdaki/eth/steering.hpp"

#include <utility>

#include <algorithm>

namespace gdaki::eth {

// A rule as installed: the rule, its id, its RSS indirection table, and the hit counter
// every snapshot holding it shares.
struct steering_table::installed {
  flow_rule rule;
  uint32_t id = 0;
  std::array<uint32_t, rss_table_entries> rss_table{};
  mutable std::atomic<uint64_t> hits{0};
};

class steering_table::snapshot {
 public:
  std::vector<std::shared_ptr<const installed>> rules;  // sorted: priority, then id
  uint32_t default_queue = 0;
  rss_key key{};
  std::shared_ptr<std::atomic<uint64_t>> default_hits;
};

namespace {

uint32_t rss_hash(const rss_key& key, const frame_fields& f, rss_fields which) {
  if (f.ip_version == 0) return 0;
  // Input as the RSS definition orders it: source address, destination address, then
  // source port and destination port, all in network byte order.
  std::array<uint8_t, 36> in{};
  const size_t addr = f.ip_version == 4 ? 4 : 16;
  std::copy_n(f.src.begin(), addr, in.begin());
  std::copy_n(f.dst.begin(), addr, in.begin() + addr);
  size_t n = 2 * addr;
  if (which == rss_fields::ip_and_ports && f.has_ports) {
    in[n++] = static_cast<uint8_t>(f.src_port >> 8);
    in[n++] = static_cast<uint8_t>(f.src_port);
    in[n++] = static_cast<uint8_t>(f.dst_port >> 8);
    in[n++] = static_cast<uint8_t>(f.dst_port);
  }
  return toeplitz_hash(key, std::span<const uint8_t>(in.data(), n));
}

}  // namespace

steering_table::steering_table(uint32_t queues, uint32_t default_queue, const rss_key& key)
    : queues_(queues), default_hits_(std::make_shared<std::atomic<uint64_t>>(0)) {
  auto s = std::make_shared<snapshot>();
  s->default_queue = default_queue < queues ? default_queue : 0;
  s->key = key;
  s->default_hits = default_hits_;
  std::lock_guard lk(current_mu_);
  current_ = std::move(s);
}

std::shared_ptr<const steering_table::snapshot> steering_table::current() const {
  std::lock_guard lk(current_mu_);
  return current_;
}

void steering_table::publish(std::shared_ptr<const snapshot> next) {
  // Release: a classifier that loads `next` sees the rules' contents fully built.
  // The old list is released after the lock (a classifier may still hold it).
  std::shared_ptr<const snapshot> old;
  {
    std::lock_guard lk(current_mu_);
    old = std::exchange(current_, std::move(next));
  }
}

status steering_table::add_rule(const flow_rule& rule, uint32_t* id) {
  const flow_action& a = rule.action;
  if (a.verb == flow_verb::to_queue && a.queue >= queues_) return status::invalid;
  if (a.verb == flow_verb::rss) {
    if (a.rss_queues.empty()) return status::invalid;
    for (uint32_t q : a.rss_queues) {
      if (q >= queues_) return status::invalid;
    }
  }
  auto r = std::make_shared<installed>();
  r->rule = rule;
  r->id = next_id_.fetch_add(1, std::memory_order_relaxed);
  if (a.verb == flow_verb::rss) {
    // Round-robin fill, as drivers fill a NIC's indirection table by default.
    for (uint32_t i = 0; i < rss_table_entries; ++i) r->rss_table[i] = a.rss_queues[i % a.rss_queues.size()];
  }
  std::lock_guard<std::mutex> g(writers_);
  auto next = std::make_shared<snapshot>(*current());
  const auto before = [](const std::shared_ptr<const installed>& x, const std::shared_ptr<const installed>& y) {
    return x->rule.priority != y->rule.priority ? x->rule.priority < y->rule.priority : x->id < y->id;
  };
  next->rules.insert(std::upper_bound(next->rules.begin(), next->rules.end(), r, before), r);
  *id = r->id;
  publish(std::move(next));
  return status::ok;
}

status steering_table::remove_rule(uint32_t id) {
  std::lock_guard<std::mutex> g(writers_);
  auto next = std::make_shared<snapshot>(*current());
  const auto it = std::find_if(next->rules.begin(), next->rules.end(), [id](const auto& r) { return r->id == id; });
  if (it == next->rules.end()) return status::not_found;
  next->rules.erase(it);
  publish(std::move(next));
  return status::ok;
}

status steering_table::set_default_queue(uint32_t queue) {
  if (queue >= queues_) return status::invalid;
  std::lock_guard<std::mutex> g(writers_);
  auto next = std::make_shared<snapshot>(*current());
  next->default_queue = queue;
  publish(std::move(next));
  return status::ok;
}

status steering_table::set_rss_key(const rss_key& key) {
  std::lock_guard<std::mutex> g(writers_);
  auto next = std::make_shared<snapshot>(*current());
  next->key = key;
  publish(std::move(next));
  return status::ok;
}

verdict steering_table::classify(const snapshot& s, const frame_fields& f) {
  verdict v;
  for (const auto& r : s.rules) {
    if (!matches(r->rule.match, f)) continue;
    r->hits.fetch_add(1, std::memory_order_relaxed);
    v.rule = r->id;
    switch (r->rule.action.verb) {
      case flow_verb::drop: v.drop = true; break;
      case flow_verb::to_queue: v.queue = r->rule.action.queue; break;
      case flow_verb::rss:
        v.hash = rss_hash(s.key, f, r->rule.action.hash_fields);
        v.queue = r->rss_table[v.hash % rss_table_entries];
        break;
    }
    return v;
  }
  s.default_hits->fetch_add(1, std::memory_order_relaxed);
  v.queue = s.default_queue;
  return v;
}

verdict steering_table::classify(const frame_fields& f) const { return classify(*current(), f); }

status steering_table::hits(uint32_t id, uint64_t* out) const {
  const auto s = current();
  for (const auto& r : s->rules) {
    if (r->id == id) {
      *out = r->hits.load(std::memory_order_relaxed);
      return status::ok;
    }
  }
  return status::not_found;
}

uint64_t steering_table::default_hits() const { return default_hits_->load(std::memory_order_relaxed); }

}  // namespace gdaki::eth

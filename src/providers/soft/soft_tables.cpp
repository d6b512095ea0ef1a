// The soft NIC's process-wide tables.
#include "soft_tables.hpp"

#include <atomic>

#include "gdaki/verbs/mr.hpp"
#include "soft_objects.hpp"
#include "wire/shm_map.hpp"
#include "wire/wire_auth.hpp"

namespace gdaki::soft {

namespace {
// A random byte different from the given ones (the slot's previous tags, or the other key's).
uint8_t fresh_tag(uint8_t a, uint8_t b, uint8_t c) {
  for (;;) {
    const uint32_t r = wire::auth::random_u32();
    for (int i = 0; i < 4; ++i) {
      const auto t = static_cast<uint8_t>(r >> (8 * i));
      if (t != a && t != b && t != c) return t;
    }
  }
}
}  // namespace

uint32_t key_table::add(uint64_t addr, uint64_t length, uint32_t access, uint32_t pdn, uint32_t* rkey) {
  std::unique_lock lk(mu_);
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    if (slots_.size() >= (1u << 23) - 2) return 0;  // keys are 32 bits: slot fits in 24 minus the bias
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  mr_entry& e = slots_[slot];
  e.addr = addr;
  e.length = length;
  e.access = access;
  e.pdn = pdn;
  const uint8_t old_l = e.ltag, old_r = e.rtag;
  e.ltag = fresh_tag(old_l, old_r, old_l);
  e.rtag = fresh_tag(old_l, old_r, e.ltag);
  e.live = true;
  *rkey = ((slot + 2) << 8) | e.rtag;
  // Same-host peers may map it: it gets its own memfd now, while no NIC access to the
  // range can be in flight (we hold the lock exclusively).
  shm::adopt_registration(*rkey, addr, length, access);
  return ((slot + 2) << 8) | e.ltag;
}

void key_table::remove(uint32_t lkey) {
  std::unique_lock lk(mu_);
  const uint32_t slot = (lkey >> 8) - 2;
  if (slot >= slots_.size() || !slots_[slot].live) return;
  slots_[slot].live = false;
  generation_.fetch_add(1, std::memory_order_relaxed);  // the exclusive lock orders it
  // Peers that mapped this MR (the shared-memory wire's mapped path) lose it too, and any
  // copy of theirs in progress ends before we return, as a NIC's access would.
  const uint32_t rkey = ((slot + 2) << 8) | slots_[slot].rtag;
  shm::revoke(rkey, shm::revoke_wait_ms);
  // And a peer that ignores the revocation keeps a mapping of a file that is no longer
  // our memory: its writes change nothing here.
  shm::release_registration(rkey);
  free_.push_back(slot);
}

const mr_entry* key_table::find(uint32_t key, bool remote) const {
  const uint32_t hi = key >> 8;
  if (hi < 2) return nullptr;
  const uint32_t slot = hi - 2;
  if (slot >= slots_.size()) return nullptr;
  const mr_entry& e = slots_[slot];
  if (!e.live || (key & 0xff) != (remote ? e.rtag : e.ltag)) return nullptr;
  return &e;
}

bool key_table::local_range_ok(uint32_t lkey, uint32_t pdn, uint64_t addr, uint64_t len, bool need_write) const {
  const mr_entry* e = find(lkey, false);
  if (e == nullptr || e->pdn != pdn) return false;
  if (need_write && !(e->access & verbs::access::local_write)) return false;
  return addr >= e->addr && len <= e->length && addr - e->addr <= e->length - len;
}

uint32_t qp_table::add(std::shared_ptr<soft_qp> qp) {
  std::lock_guard lk(mu_);
  // 0x000000 .. 0x0000ff are left out (QP0/QP1 and small numbers code may treat as
  // special), and 0xffffff (the multicast QPN).
  constexpr uint32_t lo = 0x000100, span = 0xffffff - lo;
  if (map_.size() >= span) return 0;
  uint32_t qpn;
  do {
    qpn = lo + wire::auth::random_u32() % span;
  } while (map_.count(qpn) != 0);
  qp->qpn = qpn;
  map_.emplace(qpn, std::move(qp));
  return qpn;
}

void qp_table::remove(uint32_t qpn) {
  std::shared_ptr<soft_qp> last;  // released outside the lock
  std::lock_guard lk(mu_);
  auto it = map_.find(qpn);
  if (it == map_.end()) return;
  last = std::move(it->second);
  map_.erase(it);
}

std::shared_ptr<soft_qp> qp_table::find(uint32_t qpn) {
  std::lock_guard lk(mu_);
  auto it = map_.find(qpn);
  return it == map_.end() ? nullptr : it->second;
}

constinit key_table g_key_table;
qp_table& qps() {
  static qp_table t;
  return t;
}
uint32_t next_pdn() {
  static std::atomic<uint32_t> n{1};
  return n.fetch_add(1, std::memory_order_relaxed);
}
uint32_t next_cqn() {
  static std::atomic<uint32_t> n{1};
  return n.fetch_add(1, std::memory_order_relaxed) & 0xffffff;
}

}  // namespace gdaki::soft

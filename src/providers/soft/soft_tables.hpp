// internal: the soft NIC's process-wide tables. One key space for every soft device (keys
// are still unique per device, which is all verbs promises), one QP-number space so QPs on
// different soft devices of this process can connect, and the id counters.
//
// Memory keys: lkey = ((slot + 2) << 8) | tag, rkey = lkey | 0x80. The tag changes when a
// slot is reused, so a stale key fails; lkey != rkey, so using one for the other fails.
// Keys never equal MLX5_INVALID_LKEY (0x100).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "key_lock.hpp"

namespace gdaki::soft {

struct soft_qp;

struct mr_entry {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t pdn = 0;
  uint8_t tag = 0;  // 1..127
  bool live = false;
};

class key_table {
 public:
  // Holding this shared lock keeps every MR looked up under it registered: deregistration
  // takes it exclusively, so once it returns no NIC access to the range is in flight.
  key_lock& lock() { return mu_; }

  // Registers an MR; returns its lkey (rkey = lkey | 0x80), or 0 when the table is full.
  uint32_t add(uint64_t addr, uint64_t length, uint32_t access, uint32_t pdn);
  void remove(uint32_t lkey);
  // Caller holds lock() (shared). Returns the live entry the key names, or nullptr.
  const mr_entry* find(uint32_t key, bool remote) const;
  // Caller holds lock() (shared). True if lkey is live, belongs to PD pdn, covers
  // [addr, addr + len) and, if need_write, grants LOCAL_WRITE.
  bool local_range_ok(uint32_t lkey, uint32_t pdn, uint64_t addr, uint64_t len, bool need_write) const;

 private:
  key_lock mu_;
  std::vector<mr_entry> slots_;
  std::vector<uint32_t> free_;
};

class qp_table {
 public:
  uint32_t add(std::shared_ptr<soft_qp> qp);  // assigns and returns the QPN
  void remove(uint32_t qpn);
  std::shared_ptr<soft_qp> find(uint32_t qpn);

 private:
  std::mutex mu_;
  std::unordered_map<uint32_t, std::shared_ptr<soft_qp>> map_;
  uint32_t next_ = 0x000100;
};

key_table& keys();
qp_table& qps();
uint32_t next_pdn();
uint32_t next_cqn();

}  // namespace gdaki::soft

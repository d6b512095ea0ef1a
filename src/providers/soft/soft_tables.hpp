// internal: the soft NIC's process-wide tables. One key space for every soft device (keys
// are still unique per device, which is all verbs promises), one QP-number space so QPs on
// different soft devices of this process can connect, and the id counters.
//
// Memory keys, as mlx5 lays them out: index << 8 | variant byte. lkey = ((slot + 2) << 8) |
// ltag, rkey = ((slot + 2) << 8) | rtag, with both tags drawn at random (getrandom) on every
// registration: a peer that saw no key cannot predict one (1 in 256 per guess and index;
// docs/soft-nic.md, Security); ltag != rtag, so using one key for the other fails; a new
// registration's tags differ from the slot's previous ones, so the last stale key fails.
// Keys never equal MLX5_INVALID_LKEY (0x100). QP numbers are random 24-bit values
// (0x100 .. 0xfffffe), unique among the live QPs of the process.
#pragma once

#include <atomic>
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
  uint8_t ltag = 0, rtag = 0;  // the keys' variant bytes (random)
  bool live = false;
};

class key_table {
 public:
  // Holding this shared lock keeps every MR looked up under it registered: deregistration
  // takes it exclusively, so once it returns no NIC access to the range is in flight.
  key_lock& lock() { return mu_; }

  // Registers an MR; returns its lkey and sets *rkey, or returns 0 when the table is full.
  uint32_t add(uint64_t addr, uint64_t length, uint32_t access, uint32_t pdn, uint32_t* rkey);
  void remove(uint32_t lkey);
  // Caller holds lock() (shared). Returns the live entry the key names, or nullptr.
  const mr_entry* find(uint32_t key, bool remote) const;
  // Caller holds lock() (shared). True if lkey is live, belongs to PD pdn, covers
  // [addr, addr + len) and, if need_write, grants LOCAL_WRITE.
  bool local_range_ok(uint32_t lkey, uint32_t pdn, uint64_t addr, uint64_t len, bool need_write) const;
  // Moves on at every deregistration (under the exclusive lock), so a key check a short
  // path cached (soft_qp::local_key) holds while this reads the same. Read under lock().
  uint64_t generation() const { return generation_.load(std::memory_order_relaxed); }

 private:
  key_lock mu_;
  std::atomic<uint64_t> generation_{0};
  std::vector<mr_entry> slots_;
  std::vector<uint32_t> free_;
};

class qp_table {
 public:
  // Assigns a random unused QPN (a peer cannot guess its neighbours') and returns it; 0
  // when all are taken.
  uint32_t add(std::shared_ptr<soft_qp> qp);
  void remove(uint32_t qpn);
  std::shared_ptr<soft_qp> find(uint32_t qpn);

 private:
  std::mutex mu_;
  std::unordered_map<uint32_t, std::shared_ptr<soft_qp>> map_;
};

// The process's key table: constant-initialized (no guard to test on every WQE), so it
// is also destroyed after every object that was built at run time.
extern key_table g_key_table;
inline key_table& keys() { return g_key_table; }
qp_table& qps();
uint32_t next_pdn();
uint32_t next_cqn();

}  // namespace gdaki::soft

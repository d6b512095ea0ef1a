// internal: the shared-memory wire's mapped path (docs/soft-nic.md, Wires). Memory from
// soft::alloc_shared() lives in a memfd; a peer process on this host that is granted an
// MR inside it maps that memfd and moves RDMA WRITE and READ data with one memcpy of its
// own, no syscall. A revocation table (one more memfd, shared with every peer) lets
// deregistration take the grant back: {key, users} per key-table slot; a peer copies
// only while it holds a user count and sees the key still there, and deregistration
// clears the key and waits for the users to leave (seq_cst on both sides, Dekker style).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gdaki::soft::shm {

// ---- the side that owns the memory ---------------------------------------------------

// A registered range inside one alloc_shared() block: a descriptor of its memfd (the
// caller closes it; read-only unless `writable`) and the range's offset in that file.
// False if the range is not inside one. The memfd's size is sealed: a peer cannot shrink
// it under us.
bool find_shared(uint64_t addr, uint64_t length, bool writable, int* fd, uint64_t* file_off);

struct revocation_slot {
  std::atomic<uint32_t> key;    // the rkey granted for this key-table slot; 0 = none
  std::atomic<uint32_t> users;  // peers copying under that grant right now
};
static_assert(sizeof(revocation_slot) == 8 && std::atomic<uint32_t>::is_always_lock_free,
              "the table is shared by processes: plain lock-free 32-bit words");

inline constexpr uint32_t table_slots = 1u << 20;  // key-table slots a grant can name

// The table's memfd (a dup for the caller to send and close), created on first use; -1
// if it cannot be made.
int table_fd();
// Records a grant of rkey for its slot. Caller holds the key table's shared lock (the MR
// stays registered meanwhile). False if the slot is beyond the table.
bool grant(uint32_t rkey);
// Takes back the grant of `key` (the rkey), if its slot holds one, and waits
// (at most wait_ms) until no peer copies under it. Called by deregistration (under the
// key table's exclusive lock) and when the responder QP a grant was made through stops
// taking requests (under its resp_mu).
void revoke(uint32_t key, uint32_t wait_ms);
inline constexpr uint32_t revoke_wait_ms = 2000;  // only a peer stopped mid-copy holds it

// ---- the side that copies ---------------------------------------------------------------

// A peer's MR mapped into this process.
struct mapping {
  uint8_t* base = nullptr;     // the MR's first byte here
  void* map_addr = nullptr;    // what to munmap
  size_t map_len = 0;
  uint64_t remote_addr = 0;    // the MR's first byte in the owner's address space
  uint64_t length = 0;
  uint32_t access = 0;         // verbs::access bits the grant allows (MR and QP)
  uint32_t rkey = 0;
  revocation_slot* slot = nullptr;
  ~mapping();
};

// Maps `len` bytes of memfd `fd` from `file_off` (any alignment), read-only unless
// `writable`. Null on failure.
void* map_file(int fd, uint64_t file_off, uint64_t len, bool writable, void** map_addr, size_t* map_len);

}  // namespace gdaki::soft::shm

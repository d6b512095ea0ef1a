// internal: the shared-memory wire's mapped path (docs/soft-nic.md, Wires). Memory from
// soft::alloc_shared() lives in a memfd; a registration inside it gets a memfd of its own
// (below), and a peer process on this host that is granted that MR maps it and moves RDMA
// WRITE and READ data with one memcpy of its own, no syscall. A revocation table (one more memfd, shared with every peer) lets
// deregistration take the grant back: {key, users, epoch} per key-table slot; a peer
// copies only while it holds a user count and sees the key and the epoch of its grant
// still there, and deregistration clears the key, moves the epoch on and waits for the
// users to leave (seq_cst on both sides, Dekker style).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "stream_copy.hpp"

namespace gdaki::soft::shm {

// ---- the side that owns the memory ---------------------------------------------------

// One memfd per registration (docs/design.md 19). A registration with remote rights whose
// range starts on a page and ends on a page (or at the end of the alloc_shared() block)
// gets its own memfd, of exactly its pages: the owner's pages of that range are moved into
// it at registration (a copy, then mmap MAP_FIXED over the range) and moved back to the
// block at deregistration, so after dereg_mr the peer's mapping (and any descriptor it
// kept) names a file the owner no longer uses: its writes change no byte of ours. A
// registration without remote write seals its file against writable mappings
// (F_SEAL_FUTURE_WRITE), so a peer cannot get write access even by reopening it.
// Called by the key table with its lock held exclusively (no NIC access to the range is in
// flight). The owner's own stores to the range must not race reg_mr or dereg_mr of it
// (they may land in the copy that is being replaced). A range that overlaps another
// registration's file, or is not page-bounded, gets none: peers then use requests.
void adopt_registration(uint32_t rkey, uint64_t addr, uint64_t length, uint32_t access);
// Moves the registration's pages back into the block and closes its file (no-op if it
// has none, or its block was freed).
void release_registration(uint32_t rkey);

// The registration's file, for a grant: a descriptor the caller sends and closes
// (read-only unless `writable`) and the registration's offset in it. False if the
// registration has none.
bool registration_file(uint32_t rkey, bool writable, int* fd, uint64_t* file_off);

struct revocation_slot {
  std::atomic<uint32_t> key;    // the rkey granted for this key-table slot; 0 = none
  std::atomic<uint32_t> users;  // peers copying under that grant right now
  // Moves on at every revoke of the slot. The key alone cannot tell grants apart: a slot's
  // tag differs from its previous one only, so the registration after next may get the
  // very rkey of an old one, and a peer still holding the old mapping (its file no longer
  // the owner's memory) would pass a key check and write where nobody reads. Found by the
  // communicator's multi-process scenarios: a put's data lost while its signal arrived.
  std::atomic<uint32_t> epoch;
  uint32_t reserved;
};
static_assert(sizeof(revocation_slot) == 16 && std::atomic<uint32_t>::is_always_lock_free,
              "the table is shared by processes: plain lock-free 32-bit words");

inline constexpr uint32_t table_slots = 1u << 20;  // key-table slots a grant can name

// The table's memfd (a dup for the caller to send and close), created on first use; -1
// if it cannot be made.
int table_fd();
// Records a grant of rkey for its slot and gives the slot's epoch, which the peer keeps
// with its mapping. Caller holds the key table's shared lock (the MR stays registered
// meanwhile). False if the slot is beyond the table.
bool grant(uint32_t rkey, uint32_t* epoch);
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
  uint32_t epoch = 0;          // the slot's epoch at the grant (revocation_slot::epoch)
  revocation_slot* slot = nullptr;
  // Plain or streaming stores for large WRITE copies into this MR (stream_copy.hpp).
  store_chooser stores;
  ~mapping();
};

// Maps `len` bytes of memfd `fd` from `file_off` (any alignment), read-only unless
// `writable`. Null on failure.
void* map_file(int fd, uint64_t file_off, uint64_t len, bool writable, void** map_addr, size_t* map_len);

}  // namespace gdaki::soft::shm

// internal: moving message bytes (gather -> scatter, inline bytes read from the WQE) and
// executing atomics on the target word. Every check has passed before these run.
#pragma once

#include <cstdint>
#include <cstring>

#include "gdaki/device/arch.hpp"
#include "wqe_parse.hpp"

namespace gdaki::soft {

struct dst_piece {
  uint8_t* ptr;
  uint64_t length;
};

// Copies the message described by src[0..ns) (pointer or inline entries) into the
// concatenation of dst[0..nd), in address order. Total lengths must match or dst be longer.
void copy_message(const wqe_reader& r, const gather_entry* src, uint32_t ns, const dst_piece* dst, uint32_t nd);

// Places n bytes as copy_message does for one piece: an aligned 4- or 8-byte piece (a flag
// or signal word a poller acquires) with one release store, the rest with memcpy. For the
// short paths that place one piece without a gather list (fast_write.cpp, the wire's
// write_mapped_short).
inline void place_piece(uint8_t* to, const uint8_t* from, uint32_t n) {
  if (n == 8 && (reinterpret_cast<uintptr_t>(to) & 7) == 0) {
    uint64_t v;
    std::memcpy(&v, from, 8);
    dev::arch::store_release(reinterpret_cast<uint64_t*>(to), v);
  } else if (n == 4 && (reinterpret_cast<uintptr_t>(to) & 3) == 0) {
    uint32_t v;
    std::memcpy(&v, from, 4);
    dev::arch::store_release(reinterpret_cast<uint32_t*>(to), v);
  } else {
    std::memcpy(to, from, n);
  }
}

// Copies `length` bytes from `from` into dst[0..nd).
void copy_scatter(const uint8_t* from, uint64_t length, const dst_piece* dst, uint32_t nd);

// An 8-byte fetch-and-add and compare-and-swap on a target word, each one read-modify-write
// instruction; they return the word's value before. Why not a compare-and-swap loop that
// reads the word first: when another core holds the line (a receiver spinning on its
// signal word), the read brings it in shared and the swap must then take it exclusive, two
// transfers where one does. Still atomic against every other soft-NIC atomic on the word
// (the masked ones stay CAS loops): each is one atomic instruction on it.
inline uint64_t fetch_add_word(uint64_t* target, uint64_t add) {
  return __atomic_fetch_add(target, add, __ATOMIC_ACQ_REL);
}
inline uint64_t compare_swap_word(uint64_t* target, uint64_t compare, uint64_t swap) {
  uint64_t seen = compare;
  __atomic_compare_exchange_n(target, &seen, swap, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  return seen;  // compare when it swapped, the differing value when not
}

// Executes the atomic of w on the word at target (aligned to w.atomic_size); returns the
// original value (host order). Atomic against every other soft-NIC atomic on the word.
uint64_t execute_atomic(const parsed_wqe& w, void* target);

// Orders the placement of one message before the placement of the next (ConnectX places
// the messages of one QP in order, so "data, then flag" is observed in that order). The
// soft NIC plays the device here: a release fence so this message's stores are ordered
// before the next message's (and before the CQE, which is a release anyway). Inline: on
// x86-64 it is no instruction, and a call per WQE was not free.
inline void placement_done() { dev::arch::fence_to_device(); }

}  // namespace gdaki::soft

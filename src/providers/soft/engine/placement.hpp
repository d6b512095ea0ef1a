// internal: moving message bytes (gather -> scatter, inline bytes read from the WQE) and
// executing atomics on the target word. Every check has passed before these run.
#pragma once

#include <cstdint>

#include "wqe_parse.hpp"

namespace gdaki::soft {

struct dst_piece {
  uint8_t* ptr;
  uint64_t length;
};

// Copies the message described by src[0..ns) (pointer or inline entries) into the
// concatenation of dst[0..nd), in address order. Total lengths must match or dst be longer.
void copy_message(const wqe_reader& r, const gather_entry* src, uint32_t ns, const dst_piece* dst, uint32_t nd);

// Copies `length` bytes from `from` into dst[0..nd).
void copy_scatter(const uint8_t* from, uint64_t length, const dst_piece* dst, uint32_t nd);

// Executes the atomic of w on the word at target (aligned to w.atomic_size); returns the
// original value (host order). Atomic against every other soft-NIC atomic on the word.
uint64_t execute_atomic(const parsed_wqe& w, void* target);

// Orders the placement of one message before the placement of the next (ConnectX places
// the messages of one QP in order, so "data, then flag" is observed in that order).
void placement_done();

}  // namespace gdaki::soft

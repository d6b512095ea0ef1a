// The proxy descriptor: one 64-byte work request that a device (or CPU) thread places in
// the proxy ring (proxy/ring.hpp) and the CPU proxy thread executes through a poster.
// Shared by host and device code, so it is plain data with fixed offsets, and it checks
// itself: the sequence number sits at both ends and a 16-bit check covers every other
// byte, so a descriptor that was torn or only partly written is detected and never
// executed. Every byte of a slot has one writer, the producer holding its position: the
// proxy only reads slots (it never clears or marks one; the next lap's position number
// is what tells laps apart). Format and rules: docs/proxy.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gdaki/config.hpp"

namespace gdaki::proxy {

// What the proxy does with a descriptor. 0 is never valid, so zeroed memory never
// validates as work. Values are part of the shared format: append only.
enum class opcode : uint8_t {
  invalid = 0,
  put = 1,                // RDMA write: length bytes, local -> remote
  put_inline = 2,         // write of length <= 16 bytes carried in operand0/operand1
  get = 3,                // RDMA read: length bytes, remote -> local
  signal_add = 4,         // remote u64 += operand0
  signal_set = 5,         // remote u64 = operand0
  put_signal_add = 6,     // put, then (never visible before the data) signal += operand0
  put_signal_set = 7,     // put, then signal = operand0
  atomic_fetch_add = 8,   // remote u64 += operand0; old value into local (8 bytes)
  atomic_compare_swap = 9,// if remote u64 == operand0 then = operand1; old value into local
  fence = 10,             // later descriptors start after every earlier one completed
  quiet = 11,             // completes once every earlier descriptor has completed
};
inline constexpr uint8_t opcode_count = 12;

namespace desc_flags {
inline constexpr uint8_t none = 0;
inline constexpr uint8_t fence = 1u << 0;  // start only after every earlier descriptor completed
inline constexpr uint8_t all = fence;      // bits outside this set make a descriptor invalid
}  // namespace desc_flags

// No completion counter: the operation's completion is learned through a later quiet.
inline constexpr uint16_t no_counter = 0xffff;
// The most bytes one put/get/put_signal descriptor moves (the issuer splits larger ones).
inline constexpr uint32_t max_descriptor_bytes = uint32_t{1} << 30;
// The most bytes a put_inline descriptor carries (operand0 then operand1, little end first).
inline constexpr uint32_t max_inline_bytes = 16;

// Keys: local_key / remote_key / signal_key are the proxy poster's registration handles
// (small indexes it translates to the fabric's own, possibly 64-bit, keys), not fabric keys.
struct alignas(64) descriptor {
  uint32_t seq_head;     //  0 ring position, written with the body
  opcode op;             //  4
  uint8_t flags;         //  5 desc_flags
  uint16_t peer;         //  6 destination peer (QP / fabric address) index
  uint64_t local_addr;   //  8 source of put, destination of get, atomic result buffer
  uint64_t remote_addr;  // 16 target address (or offset, as the poster's region says)
  uint32_t local_key;    // 24
  uint32_t remote_key;   // 28
  uint64_t operand0;     // 32 add value / compare / signal value / inline bytes 0..7
  uint64_t operand1;     // 40 swap / signal remote address / inline bytes 8..15
  uint32_t length;       // 48 bytes to move (put, get, put_signal, put_inline)
  uint32_t signal_key;   // 52 remote key of the signal word (put_signal_*)
  uint16_t counter;      // 56 completion counter bumped when done (no_counter = none)
  uint16_t check;        // 58 descriptor_check() of everything else
  uint32_t seq_tail;     // 60 ring position again; stored last, with release: publishes
};

// The format is shared with device code and other processes: pin every offset.
static_assert(sizeof(descriptor) == 64, "one descriptor is one 64-byte slot (one cache line, one PCIe burst)");
static_assert(alignof(descriptor) == 64, "slots are cache-line aligned so no two producers share a line");
static_assert(offsetof(descriptor, seq_head) == 0, "the head copy of the sequence opens the slot");
static_assert(offsetof(descriptor, local_addr) == 8 && offsetof(descriptor, remote_addr) == 16,
              "addresses are naturally aligned 8-byte words");
static_assert(offsetof(descriptor, operand0) == 32 && offsetof(descriptor, operand1) == 40,
              "operands are naturally aligned 8-byte words");
static_assert(offsetof(descriptor, length) == 48 && offsetof(descriptor, counter) == 56,
              "length and counter sit in the last 16 bytes");
static_assert(offsetof(descriptor, check) == 58, "the check sits just before the tail word");
static_assert(offsetof(descriptor, seq_tail) == 60,
              "the publishing word is the last 4 bytes, so it is written after the rest");

// The 16-bit check over every field except check itself, the sequence included (so a
// slot left over from the previous lap, or filled for another position, fails). A
// multiply-xorshift mix per 8-byte word: cheap on a GPU thread, and any single changed
// bit changes the result. The seed makes an all-zero slot fail (asserted below).
GDAKI_HD constexpr uint16_t descriptor_check(const descriptor& d) {
  const uint64_t words[8] = {
      uint64_t{d.seq_head} | (uint64_t{static_cast<uint8_t>(d.op)} << 32) | (uint64_t{d.flags} << 40) |
          (uint64_t{d.peer} << 48),
      d.local_addr,
      d.remote_addr,
      uint64_t{d.local_key} | (uint64_t{d.remote_key} << 32),
      d.operand0,
      d.operand1,
      uint64_t{d.length} | (uint64_t{d.signal_key} << 32),
      uint64_t{d.counter} | (uint64_t{d.seq_tail} << 32),
  };
  uint64_t h = 0x6a09e667f3bcc909ull;
  for (uint64_t w : words) {
    h ^= w;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 29;
  return static_cast<uint16_t>(h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48));
}

static_assert(descriptor_check(descriptor{}) != 0, "an all-zero slot must not validate");

// Why a descriptor was rejected (validation result).
enum class descriptor_fault : uint8_t {
  none = 0,
  sequence,  // head and tail copies disagree with each other or with the ring position
  check,     // the check does not match the body: torn or partly written
  opcode,    // unknown opcode or flag bits
  length,    // length out of range for the opcode
};

// Validates a copy of a slot expected at ring position `position`.
GDAKI_HD constexpr descriptor_fault validate(const descriptor& d, uint32_t position) {
  if (d.seq_tail != position || d.seq_head != position) return descriptor_fault::sequence;
  if (d.check != descriptor_check(d)) return descriptor_fault::check;
  const auto op = static_cast<uint8_t>(d.op);
  if (op == 0 || op >= opcode_count || (d.flags & ~desc_flags::all) != 0) return descriptor_fault::opcode;
  switch (d.op) {
    case opcode::put_inline:
      if (d.length > max_inline_bytes) return descriptor_fault::length;
      break;
    case opcode::put:
    case opcode::get:
    case opcode::put_signal_add:
    case opcode::put_signal_set:
      if (d.length > max_descriptor_bytes) return descriptor_fault::length;
      break;
    default:
      break;
  }
  return descriptor_fault::none;
}

GDAKI_HD constexpr const char* to_string(descriptor_fault f) {
  switch (f) {
    case descriptor_fault::none: return "none";
    case descriptor_fault::sequence: return "sequence";
    case descriptor_fault::check: return "check";
    case descriptor_fault::opcode: return "opcode";
    case descriptor_fault::length: return "length";
  }
  return "unknown";
}

GDAKI_HD constexpr const char* to_string(opcode op) {
  switch (op) {
    case opcode::invalid: return "invalid";
    case opcode::put: return "put";
    case opcode::put_inline: return "put_inline";
    case opcode::get: return "get";
    case opcode::signal_add: return "signal_add";
    case opcode::signal_set: return "signal_set";
    case opcode::put_signal_add: return "put_signal_add";
    case opcode::put_signal_set: return "put_signal_set";
    case opcode::atomic_fetch_add: return "atomic_fetch_add";
    case opcode::atomic_compare_swap: return "atomic_compare_swap";
    case opcode::fence: return "fence";
    case opcode::quiet: return "quiet";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------
// Builders: fill the body; the ring (ring_write) fills seq_head, seq_tail and check.
// ---------------------------------------------------------------------------------------

GDAKI_HD constexpr descriptor make_put(uint16_t peer, uint64_t raddr, uint32_t rkey, uint64_t laddr, uint32_t lkey,
                                       uint32_t bytes, uint16_t counter, uint8_t flags = desc_flags::none) {
  descriptor d{};
  d.op = opcode::put;
  d.flags = flags;
  d.peer = peer;
  d.local_addr = laddr;
  d.local_key = lkey;
  d.remote_addr = raddr;
  d.remote_key = rkey;
  d.length = bytes;
  d.counter = counter;
  return d;
}

// value: len (<= max_inline_bytes) bytes, little end of operand0 first.
GDAKI_HD constexpr descriptor make_put_inline(uint16_t peer, uint64_t raddr, uint32_t rkey, uint64_t lo, uint64_t hi,
                                              uint32_t len, uint16_t counter, uint8_t flags = desc_flags::none) {
  descriptor d{};
  d.op = opcode::put_inline;
  d.flags = flags;
  d.peer = peer;
  d.remote_addr = raddr;
  d.remote_key = rkey;
  d.operand0 = lo;
  d.operand1 = hi;
  d.length = len;
  d.counter = counter;
  return d;
}

GDAKI_HD constexpr descriptor make_get(uint16_t peer, uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey,
                                       uint32_t bytes, uint16_t counter, uint8_t flags = desc_flags::none) {
  descriptor d = make_put(peer, raddr, rkey, laddr, lkey, bytes, counter, flags);
  d.op = opcode::get;
  return d;
}

GDAKI_HD constexpr descriptor make_signal(uint16_t peer, uint64_t sig_addr, uint32_t sig_key, bool set, uint64_t value,
                                          uint16_t counter, uint8_t flags = desc_flags::none) {
  descriptor d{};
  d.op = set ? opcode::signal_set : opcode::signal_add;
  d.flags = flags;
  d.peer = peer;
  d.remote_addr = sig_addr;
  d.remote_key = sig_key;
  d.operand0 = value;
  d.counter = counter;
  return d;
}

GDAKI_HD constexpr descriptor make_put_signal(uint16_t peer, uint64_t raddr, uint32_t rkey, uint64_t laddr,
                                              uint32_t lkey, uint32_t bytes, uint64_t sig_addr, uint32_t sig_key,
                                              bool set, uint64_t value, uint16_t counter,
                                              uint8_t flags = desc_flags::none) {
  descriptor d = make_put(peer, raddr, rkey, laddr, lkey, bytes, counter, flags);
  d.op = set ? opcode::put_signal_set : opcode::put_signal_add;
  d.operand0 = value;
  d.operand1 = sig_addr;
  d.signal_key = sig_key;
  return d;
}

GDAKI_HD constexpr descriptor make_fetch_add(uint16_t peer, uint64_t raddr, uint32_t rkey, uint64_t add,
                                             uint64_t result_addr, uint32_t result_key, uint16_t counter,
                                             uint8_t flags = desc_flags::none) {
  descriptor d{};
  d.op = opcode::atomic_fetch_add;
  d.flags = flags;
  d.peer = peer;
  d.remote_addr = raddr;
  d.remote_key = rkey;
  d.local_addr = result_addr;
  d.local_key = result_key;
  d.operand0 = add;
  d.length = 8;
  d.counter = counter;
  return d;
}

GDAKI_HD constexpr descriptor make_compare_swap(uint16_t peer, uint64_t raddr, uint32_t rkey, uint64_t compare,
                                                uint64_t swap, uint64_t result_addr, uint32_t result_key,
                                                uint16_t counter, uint8_t flags = desc_flags::none) {
  descriptor d = make_fetch_add(peer, raddr, rkey, compare, result_addr, result_key, counter, flags);
  d.op = opcode::atomic_compare_swap;
  d.operand1 = swap;
  return d;
}

// fence (op = fence) or quiet (op = quiet); peer is ignored: both cover every peer.
GDAKI_HD constexpr descriptor make_barrier(bool quiet, uint16_t counter) {
  descriptor d{};
  d.op = quiet ? opcode::quiet : opcode::fence;
  d.counter = counter;
  return d;
}

}  // namespace gdaki::proxy

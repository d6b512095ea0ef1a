// Ethernet queue handles shared by the NIC (the soft port's threads, or a ConnectX) and the
// initiators (GPU threads or CPU threads). Plain data, placed where the initiator reaches
// it. Each counter is a free-running 64-bit position, masked at the subscript; counters on
// their own cache line where different parties write them.
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"

namespace gdaki::dev {

// Host-only hook (never called in device code): lets a NIC modelled on CPU threads do its
// work on the initiator's own thread, as the soft QP's doorbell and poll hooks do
// (design.md 5): a receive that finds too few frames runs the port's receive side, a
// commit runs its transmit side. Null when the NIC needs no CPU help.
using eth_host_hook_fn = void (*)(void* ctx);

// One completion entry per received frame, written by the NIC into the slot's index.
// `seq` is the frame's position + 1 (low 32 bits), stored last with release: the entry
// is valid when seq matches, like the owner bit of an mlx5 CQE (never 0 when valid, so a
// zeroed ring reads as empty).
struct eth_rx_completion {
  uint32_t bytes;  // frame length in the slot's buffer
  uint32_t hash;   // RSS hash when an rss rule steered the frame, else 0
  uint32_t rule;   // id of the steering rule that matched, or 0xffffffff (default queue)
  uint32_t seq;    // position + 1, published last
};
static_assert(sizeof(eth_rx_completion) == 16, "four 32-bit words: one aligned 16-byte entry");

// A receive queue: `slots` packet buffers of `slot_bytes` each, one completion per slot.
struct eth_rxq_handle {
  uint8_t* buffers = nullptr;                  // slots * slot_bytes, frame i at (i & (slots-1)) * slot_bytes
  eth_rx_completion* completions = nullptr;    // slots entries
  uint32_t slots = 0;                          // power of two
  uint32_t slot_bytes = 0;                     // longest frame a slot holds (longer ones are dropped, counted)
  uint32_t queue = 0;                          // this queue's index on its port
  uint32_t reserved0 = 0;
  eth_host_hook_fn host_poll_hook = nullptr;   // CPU receivers: run the NIC's receive side
  void* host_hook_ctx = nullptr;
  alignas(64) uint64_t claimed = 0;            // initiators only: next frame a receive call hands out
  alignas(64) uint64_t released = 0;           // initiators write, NIC reads: slots below this are free
  alignas(64) uint64_t produced = 0;           // NIC writes: frames placed so far
  uint64_t dropped_full = 0;                   // NIC writes: frames dropped, queue full (receiver behind)
  uint64_t dropped_oversize = 0;               // NIC writes: frames longer than slot_bytes
};

// One transmit descriptor: a frame in memory the NIC reads.
struct eth_tx_descriptor {
  uint64_t addr;   // frame bytes (starting at the destination MAC)
  uint32_t bytes;  // frame length
  uint32_t flags;  // eth_send_flags
};
static_assert(sizeof(eth_tx_descriptor) == 16, "two descriptors per 32 bytes, no padding");

namespace eth_send_flags {
inline constexpr uint32_t none = 0;
inline constexpr uint32_t notify = 1u << 0;  // advance `completed` past this frame once sent
inline constexpr uint32_t skip = 1u << 1;    // collective call: this lane sends nothing
}  // namespace eth_send_flags

// A transmit queue: a ring of descriptors the initiators fill and commit.
struct eth_txq_handle {
  eth_tx_descriptor* ring = nullptr;
  uint32_t slots = 0;          // power of two
  uint32_t notify_period = 0;  // descriptors at k * period - 1 always notify (liveness, as a QP's auto-signal)
  eth_host_hook_fn host_commit_hook = nullptr;  // CPU committers: run the NIC's transmit side
  void* host_hook_ctx = nullptr;
  alignas(64) uint64_t reserved = 0;   // initiators only: descriptors handed out
  alignas(64) uint64_t ready = 0;      // initiators only: descriptors written, in order
  alignas(64) uint64_t committed = 0;  // initiators write (commit), NIC reads: the doorbell
  alignas(64) uint64_t completed = 0;  // NIC writes: position past the last notified frame sent
  uint64_t sent = 0;                   // NIC writes: frames handed to the wire
  uint64_t send_errors = 0;            // NIC writes: frames the wire refused (still completed)
};

}  // namespace gdaki::dev

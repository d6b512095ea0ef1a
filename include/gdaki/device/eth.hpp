// The Ethernet device API: receive frames from a receive queue and send frames on a
// transmit queue, from GPU threads or CPU threads (DOCA GPUNetIO's eth_rxq_receive /
// eth_txq_send / eth_txq_commit shape, in gdaki's scope and sharing vocabulary, ops.hpp).
// Header-only; compiles as CUDA device code (sm_90), nvcc host code and g++ host code.
// Never allocates, throws, logs or calls a runtime.
//
// Receive: eth_rxq_receive hands out up to `max` frames that the NIC placed, as a range
// [first, first + count) of positions; eth_rxq_frame gives a position's bytes; when done
// with a range, eth_rxq_release returns its slots to the NIC. A queue whose slots are all
// unreleased makes the NIC drop (counted in dropped_full), as a NIC whose receive ring
// is empty does.
// Send: eth_txq_send writes one descriptor per calling thread (warp/block: one
// reservation for the group), eth_txq_commit publishes everything written so far to the
// NIC (the doorbell). A descriptor sent with eth_send_flags::notify advances `completed`
// past it once the frame left; eth_txq_test/wait settle a position against that. The
// frame's buffer may be reused once its position is settled.
#pragma once

#include <cstdint>

#include "gdaki/config.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/eth_handles.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/status.hpp"

namespace gdaki::dev {

// ---------------------------------------------------------------------------------------
// Receive
// ---------------------------------------------------------------------------------------

// Receives up to `max` frames (max >= 1, at most q.slots). Waits until `max` frames are
// there or `timeout_ns` passed (0: take what is there now; wait_forever: no limit).
// *first and *count receive the range of positions handed to the caller (count may be 0).
//   scope_thread: each calling thread receives its own range.
//   scope_warp / scope_block: every lane/thread calls; lane 0 / thread 0 receives and
//     every caller gets the same range (lane i may then take frame first + i).
// Sharing: exclusive when only this thread/warp/block receives from q; block or grid
// when several do (they then get disjoint ranges). Returns ok, or invalid for max == 0
// or max > q.slots.
template <typename Scope = scope_thread, sharing S = sharing::exclusive>
GDAKI_HD inline status eth_rxq_receive(eth_rxq_handle& q, uint32_t max, uint64_t timeout_ns, uint64_t* first,
                                       uint32_t* count);

// The frame at position `pos` (handed out by a receive and not yet released): *bytes
// receives its length, and the result points at its first byte (destination MAC).
// *rule receives the steering rule that matched it (optional). Returns the pointer.
GDAKI_HD inline uint8_t* eth_rxq_frame(const eth_rxq_handle& q, uint64_t pos, uint32_t* bytes,
                                       uint32_t* rule = nullptr);

// Returns the slots of [first, first + count) to the NIC, once their frames are consumed.
// One thread per received range calls it. Ranges are released in position order: with a
// shared queue, a caller whose range is not next waits (up to timeout_ns) for the ranges
// before it. Returns ok, or timeout.
template <sharing S = sharing::exclusive>
GDAKI_HD inline status eth_rxq_release(eth_rxq_handle& q, uint64_t first, uint32_t count,
                                       uint64_t timeout_ns = wait_forever);

// ---------------------------------------------------------------------------------------
// Send
// ---------------------------------------------------------------------------------------

// Writes one send descriptor for the frame at `addr` (`bytes` long) per calling thread.
//   scope_thread: each caller reserves and writes its own descriptor.
//   scope_warp / scope_block: every lane/thread calls; the group reserves once, each
//     non-skipping member writes its own descriptor (flags & eth_send_flags::skip: none).
// flags: eth_send_flags::notify asks for a completion (see eth_txq_test). *pos receives
// the position just past the caller's descriptor. Nothing is sent before eth_txq_commit.
// Returns ok, invalid (bytes == 0), or timeout (no room within timeout_ns; nothing was
// written, for every member of a group).
template <typename Scope = scope_thread, sharing S = sharing::exclusive>
GDAKI_HD inline status eth_txq_send(eth_txq_handle& q, uint64_t addr, uint32_t bytes, uint32_t flags, uint64_t* pos,
                                    uint64_t timeout_ns = wait_forever);

// Hands every descriptor written so far to the NIC (the doorbell). Any thread may call
// it; concurrent commits only ever raise the doorbell. Returns ok.
GDAKI_HD inline status eth_txq_commit(eth_txq_handle& q);

// ok when the frame before `pos` (and every earlier one) was sent, again if not yet.
// Only notified descriptors (and the liveness ones) move the count, so test a position
// sent with eth_send_flags::notify. Returns ok or again.
GDAKI_HD inline status eth_txq_test(const eth_txq_handle& q, uint64_t pos);

// Waits for eth_txq_test(q, pos) to be ok. Returns ok or timeout.
GDAKI_HD inline status eth_txq_wait(const eth_txq_handle& q, uint64_t pos, uint64_t timeout_ns = wait_forever);

}  // namespace gdaki::dev

#include "gdaki/device/impl/eth.hpp"  // the definitions of the functions declared above

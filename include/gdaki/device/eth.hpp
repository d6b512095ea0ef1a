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

namespace detail {

// Frames ready at positions [from, from + n): counts valid completions, stopping at max.
GDAKI_HD inline uint32_t eth_rx_ready(const eth_rxq_handle& q, uint64_t from, uint32_t max) {
  uint32_t n = 0;
  const uint64_t mask = q.slots - 1;
  while (n < max) {
    const uint64_t pos = from + n;
    // Acquire pairs with the NIC's release store of seq: the entry's other words and the
    // frame bytes are visible once seq names this position.
    if (arch::load_acquire(&q.completions[pos & mask].seq) != static_cast<uint32_t>(pos + 1)) break;
    ++n;
  }
  return n;
}

// The receive of one thread: waits until `max` frames are ready or the timeout passes,
// then claims what is there. Shared queues claim by compare-and-swap on `claimed`.
template <sharing S>
GDAKI_HD inline void eth_rx_take(eth_rxq_handle& q, uint32_t max, uint64_t timeout_ns, uint64_t* first,
                                 uint32_t* count) {
  const bool bounded = timeout_ns != 0 && timeout_ns != wait_forever;
  const uint64_t start = bounded ? arch::clock_ns() : 0;
  for (uint32_t it = 0;; ++it) {
    const uint64_t c = arch::local::load_acquire(&q.claimed);
    uint32_t n = eth_rx_ready(q, c, max);
#if !GDAKI_DEVICE_PASS
    if (n < max && q.host_poll_hook != nullptr) {
      q.host_poll_hook(q.host_hook_ctx);  // a CPU receiver drives the NIC: no thread hop
      n = eth_rx_ready(q, c, max);
    }
#endif
    const bool expired = timeout_ns == 0 || (bounded && arch::clock_ns() - start >= timeout_ns);
    if (n == max || expired) {
      if (n != 0) {
        if constexpr (S == sharing::exclusive) {
          arch::local::store_release(&q.claimed, c + n);
        } else if (!arch::local::compare_swap(&q.claimed, c, c + n)) {
          continue;  // another receiver took frames first: look again from its end
        }
      }
      *first = c;
      *count = n;
      return;
    }
    arch::spin_pause(it);
  }
}

}  // namespace detail

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
                                       uint32_t* count) {
  if (max == 0 || max > q.slots) return status::invalid;
  if constexpr (std::is_same_v<Scope, scope_thread>) {
    detail::eth_rx_take<S>(q, max, timeout_ns, first, count);
  } else if constexpr (std::is_same_v<Scope, scope_warp>) {
    uint64_t f = 0;
    uint32_t n = 0;
    if (arch::lane_id() == 0) detail::eth_rx_take<S>(q, max, timeout_ns, &f, &n);
    *first = arch::warp_shfl(f, 0);
    *count = static_cast<uint32_t>(arch::warp_shfl(n, 0));
  } else {
    static_assert(std::is_same_v<Scope, scope_block>, "scope_thread, scope_warp or scope_block");
    uint64_t f = 0;
    uint32_t n = 0;
    if (arch::thread_rank_in_block() == 0) detail::eth_rx_take<S>(q, max, timeout_ns, &f, &n);
    *first = arch::block_broadcast(f, 0);
    *count = static_cast<uint32_t>(arch::block_broadcast(n, 0));
  }
  return status::ok;
}

// The frame at position `pos` (handed out by a receive and not yet released): *bytes
// receives its length, and the result points at its first byte (destination MAC).
// *rule receives the steering rule that matched it (optional). Returns the pointer.
GDAKI_HD inline uint8_t* eth_rxq_frame(const eth_rxq_handle& q, uint64_t pos, uint32_t* bytes,
                                       uint32_t* rule = nullptr) {
  const eth_rx_completion& c = q.completions[pos & (q.slots - 1)];
  *bytes = c.bytes;
  if (rule != nullptr) *rule = c.rule;
  return q.buffers + (pos & (q.slots - 1)) * static_cast<uint64_t>(q.slot_bytes);
}

// Returns the slots of [first, first + count) to the NIC, once their frames are consumed.
// One thread per received range calls it. Ranges are released in position order: with a
// shared queue, a caller whose range is not next waits (up to timeout_ns) for the ranges
// before it. Returns ok, or timeout.
template <sharing S = sharing::exclusive>
GDAKI_HD inline status eth_rxq_release(eth_rxq_handle& q, uint64_t first, uint32_t count,
                                       uint64_t timeout_ns = wait_forever) {
  if (count == 0) return status::ok;
  if constexpr (S != sharing::exclusive) {
    const uint64_t start = arch::clock_ns();
    for (uint32_t it = 0; arch::load_acquire(&q.released) != first; ++it) {
      if (timeout_ns != wait_forever && arch::clock_ns() - start >= timeout_ns) return status::timeout;
      arch::spin_pause(it);
    }
  }
  // Release: the caller's reads of the frames happen before the NIC may overwrite the
  // slots (the NIC acquires `released` before placing a frame there).
  arch::store_release(&q.released, first + count);
  return status::ok;
}

// ---------------------------------------------------------------------------------------
// Send
// ---------------------------------------------------------------------------------------

namespace detail {

// Takes n descriptors once the ring has room for them (room: the NIC's completed count);
// a bounded wait that times out has taken nothing (reservation by CAS, design.md 15).
template <sharing S>
GDAKI_HD inline status eth_tx_reserve(eth_txq_handle& q, uint32_t n, uint64_t* start, uint64_t timeout_ns) {
  const uint64_t t0 = timeout_ns == 0 || timeout_ns == wait_forever ? 0 : arch::clock_ns();
  for (uint32_t it = 0;; ++it) {
    const uint64_t r = arch::local::load_acquire(&q.reserved);
    if (r + n - arch::load_acquire(&q.completed) <= q.slots) {
      if constexpr (S == sharing::exclusive) {
        arch::local::store_relaxed(&q.reserved, r + n);
        *start = r;
        return status::ok;
      } else {
        if (arch::local::compare_swap(&q.reserved, r, r + n)) {
          *start = r;
          return status::ok;
        }
        continue;
      }
    }
    if (timeout_ns == 0 || (timeout_ns != wait_forever && arch::clock_ns() - t0 >= timeout_ns)) {
      return status::timeout;
    }
    arch::spin_pause(it);
  }
}

GDAKI_HD inline void eth_tx_write(eth_txq_handle& q, uint64_t pos, uint64_t addr, uint32_t bytes, uint32_t flags) {
  eth_tx_descriptor& d = q.ring[pos & (q.slots - 1)];
  // Liveness: a descriptor at the end of each period notifies even if the caller did not
  // ask, so `completed` advances and the ring frees up for senders that never notify.
  const bool period_end = q.notify_period != 0 && (pos + 1) % q.notify_period == 0;
  d.addr = addr;
  d.bytes = bytes;
  d.flags = (flags & eth_send_flags::notify) | (period_end ? eth_send_flags::notify : 0u);
}

// Publishes [start, start + n) as written, in reservation order.
template <sharing S>
GDAKI_HD inline void eth_tx_mark_ready(eth_txq_handle& q, uint64_t start, uint32_t n) {
  if constexpr (S != sharing::exclusive) {
    for (uint32_t it = 0; arch::local::load_acquire(&q.ready) != start; ++it) arch::spin_pause(it);
  }
  // Release: the descriptor words before `ready`, for the committer that acquires it.
  arch::local::store_release(&q.ready, start + n);
}

}  // namespace detail

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
                                    uint64_t timeout_ns = wait_forever) {
  const bool skip = (flags & eth_send_flags::skip) != 0;
  if constexpr (std::is_same_v<Scope, scope_thread>) {
    if (skip) return status::ok;
    if (bytes == 0) return status::invalid;
    uint64_t start = 0;
    const status st = detail::eth_tx_reserve<S>(q, 1, &start, timeout_ns);
    if (st != status::ok) return st;
    detail::eth_tx_write(q, start, addr, bytes, flags);
    detail::eth_tx_mark_ready<S>(q, start, 1);
    *pos = start + 1;
    return status::ok;
  } else {
    constexpr bool warp = std::is_same_v<Scope, scope_warp>;
    static_assert(warp || std::is_same_v<Scope, scope_block>, "scope_thread, scope_warp or scope_block");
    const bool mine = !skip && bytes != 0;
    uint32_t total = 0;
    const uint32_t offset = warp ? arch::warp_exclusive_sum(mine ? 1u : 0u, &total)
                                 : arch::block_exclusive_sum(mine ? 1u : 0u, &total);
    const bool leader = warp ? arch::lane_id() == 0 : arch::thread_rank_in_block() == 0;
    uint64_t start = 0;
    uint64_t st = static_cast<uint64_t>(status::ok);
    if (leader && total != 0) st = static_cast<uint64_t>(detail::eth_tx_reserve<S>(q, total, &start, timeout_ns));
    start = warp ? arch::warp_shfl(start, 0) : arch::block_broadcast(start, 0);
    st = warp ? arch::warp_shfl(st, 0) : arch::block_broadcast(st, 0);
    if (static_cast<status>(st) != status::ok) return static_cast<status>(st);
    if (mine) {
      detail::eth_tx_write(q, start + offset, addr, bytes, flags);
      *pos = start + offset + 1;
    }
    // Every member's descriptor is written before the leader publishes the batch.
    if (warp) {
      arch::warp_sync();
    } else {
      arch::block_sync();
    }
    if (leader && total != 0) detail::eth_tx_mark_ready<S>(q, start, total);
    if (!skip && bytes == 0) return status::invalid;
    return status::ok;
  }
}

// Hands every descriptor written so far to the NIC (the doorbell). Any thread may call
// it; concurrent commits only ever raise the doorbell. Returns ok.
GDAKI_HD inline status eth_txq_commit(eth_txq_handle& q) {
  const uint64_t ready = arch::local::load_acquire(&q.ready);
  // Order: descriptor stores (acquired through `ready`) before the doorbell the NIC
  // acquires; fetch_max is acq_rel at system scope, so it carries them.
  arch::fence_to_device();
  arch::fetch_max(&q.committed, ready);
#if !GDAKI_DEVICE_PASS
  if (q.host_commit_hook != nullptr) q.host_commit_hook(q.host_hook_ctx);  // send on this CPU thread
#endif
  return status::ok;
}

// ok when the frame before `pos` (and every earlier one) was sent, again if not yet.
// Only notified descriptors (and the liveness ones) move the count, so test a position
// sent with eth_send_flags::notify. Returns ok or again.
GDAKI_HD inline status eth_txq_test(const eth_txq_handle& q, uint64_t pos) {
  return arch::load_acquire(&q.completed) >= pos ? status::ok : status::again;
}

// Waits for eth_txq_test(q, pos) to be ok. Returns ok or timeout.
GDAKI_HD inline status eth_txq_wait(const eth_txq_handle& q, uint64_t pos, uint64_t timeout_ns = wait_forever) {
  const uint64_t start = arch::clock_ns();
  for (uint32_t it = 0; eth_txq_test(q, pos) != status::ok; ++it) {
    if (timeout_ns != wait_forever && arch::clock_ns() - start >= timeout_ns) return status::timeout;
    arch::spin_pause(it);
  }
  return status::ok;
}

}  // namespace gdaki::dev

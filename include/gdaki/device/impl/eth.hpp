// Definitions for gdaki/device/eth.hpp: the receive claim, the send reservation,
// descriptor writes and in-order publication, and the calls declared there.
// Internal: not to be included directly; include gdaki/device/eth.hpp, which includes
// this file at its end. Declarations, contracts and default arguments live there.
#pragma once

#include <cstdint>
#include <type_traits>

namespace gdaki::dev {

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

template <typename Scope, sharing S>
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

GDAKI_HD inline uint8_t* eth_rxq_frame(const eth_rxq_handle& q, uint64_t pos, uint32_t* bytes, uint32_t* rule) {
  const eth_rx_completion& c = q.completions[pos & (q.slots - 1)];
  *bytes = c.bytes;
  if (rule != nullptr) *rule = c.rule;
  return q.buffers + (pos & (q.slots - 1)) * static_cast<uint64_t>(q.slot_bytes);
}

template <sharing S>
GDAKI_HD inline status eth_rxq_release(eth_rxq_handle& q, uint64_t first, uint32_t count, uint64_t timeout_ns) {
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

template <typename Scope, sharing S>
GDAKI_HD inline status eth_txq_send(eth_txq_handle& q, uint64_t addr, uint32_t bytes, uint32_t flags, uint64_t* pos,
                                    uint64_t timeout_ns) {
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

GDAKI_HD inline status eth_txq_test(const eth_txq_handle& q, uint64_t pos) {
  return arch::load_acquire(&q.completed) >= pos ? status::ok : status::again;
}

GDAKI_HD inline status eth_txq_wait(const eth_txq_handle& q, uint64_t pos, uint64_t timeout_ns) {
  const uint64_t start = arch::clock_ns();
  for (uint32_t it = 0; eth_txq_test(q, pos) != status::ok; ++it) {
    if (timeout_ns != wait_forever && arch::clock_ns() - start >= timeout_ns) return status::timeout;
    arch::spin_pause(it);
  }
  return status::ok;
}

}  // namespace gdaki::dev

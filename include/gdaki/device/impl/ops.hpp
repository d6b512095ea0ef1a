// Definitions for gdaki/device/ops.hpp: the posting engine (detail::post and the
// builders, one per operation) and the bodies of the calls declared there.
// Internal: not to be included directly; include gdaki/device/ops.hpp, which includes
// this file at its end. Declarations, contracts and default arguments live there.
#pragma once

#include <cstdint>
#include <type_traits>

namespace gdaki::dev {

namespace detail {

// Descriptor flags for a WQE control byte: only the fence survives (the proxy settles
// every descriptor through its counter, so "unsignalled" has nothing to drop).
GDAKI_HD constexpr uint8_t desc_flags_of(uint8_t ctrl) {
  return (ctrl & prm::ctrl_flags::fence_mask) == prm::ctrl_flags::fence ? proxy::desc_flags::fence
                                                                         : proxy::desc_flags::none;
}

GDAKI_HD constexpr uint8_t ctrl_byte(uint32_t flags) {
  return static_cast<uint8_t>(((flags & op_flags::unsignaled) ? prm::ctrl_flags::ce_error_only
                                                                : prm::ctrl_flags::cq_update) |
                              ((flags & op_flags::fence) ? prm::ctrl_flags::fence : 0));
}

// Takes nbb WQEBBs once they are free; a bounded wait that times out has reserved
// nothing (sq_reserve_space). The sole poster skips the atomic read-modify-write.
template <sharing S>
GDAKI_HD GDAKI_FORCEINLINE status reserve(qp_handle& qp, uint32_t nbb, uint64_t* start, uint64_t timeout_ns) {
  if constexpr (S == sharing::exclusive) return reserve_exclusive(qp, nbb, start, timeout_ns);
  return sq_reserve_space<false>(qp, nbb, start, timeout_ns);
}

// Marks [start, start + nbb) ready and, unless the post was deferred (op_flags::defer),
// rings for everything ready.
template <sharing S>
GDAKI_HD inline uint64_t publish(qp_handle& qp, uint64_t start, uint32_t nbb, bool ring) {
  if constexpr (S == sharing::exclusive) {
    // Sole poster: ready is ours alone, no ordering wait. The release still carries the
    // WQE bytes to whichever thread reads ready (sq_submit acquires it).
    arch::local::store_release(&qp.sq_ready, start + nbb);
    if (ring) sq_submit<false>(qp);
  } else {
    sq_mark_ready(qp, start, nbb);
    if (ring) sq_submit<true>(qp);
  }
  return start + nbb;
}

GDAKI_HD constexpr bool rings(uint32_t flags) { return (flags & op_flags::defer) == 0; }

// Posts one collective batch: each participant needs `nbb` WQEBBs (0 = nothing) and
// `build(first_wqebb)` writes its WQEs there. Returns the caller's ticket in *ticket.
template <typename Scope, sharing S, typename Build>
GDAKI_HD inline status post_direct(qp_handle& qp, uint32_t nbb, Build& build, uint64_t* ticket, uint64_t timeout_ns,
                                   bool ring) {
  if constexpr (std::is_same_v<Scope, scope_thread>) {
    if (nbb == 0) {
      *ticket = arch::local::load_acquire(&qp.sq_ready);
      return status::ok;
    }
    if (nbb > sq_wqebbs(qp)) return status::invalid;
    uint64_t start = 0;
    const status st = reserve<S>(qp, nbb, &start, timeout_ns);
    if (st != status::ok) return st;
    build(start);
    *ticket = publish<S>(qp, start, nbb, ring);
    return status::ok;
  } else {
    constexpr bool warp = std::is_same_v<Scope, scope_warp>;
    static_assert(warp || std::is_same_v<Scope, scope_block>, "scope must be scope_thread, scope_warp or scope_block");
    uint32_t total = 0;
    const uint32_t offset = warp ? arch::warp_exclusive_sum(nbb, &total) : arch::block_exclusive_sum(nbb, &total);
    const bool leader = warp ? arch::lane_id() == 0 : arch::thread_rank_in_block() == 0;
    uint64_t base = 0;
    uint32_t st = static_cast<uint32_t>(status::ok);
    if (leader && total != 0) {
      if (total > sq_wqebbs(qp)) {
        st = static_cast<uint32_t>(status::invalid);
      } else {
        st = static_cast<uint32_t>(reserve<S>(qp, total, &base, timeout_ns));
      }
    }
    // One exchange carries both the base (low 56 bits are plenty) and the status.
    const uint64_t packed = warp ? arch::warp_shfl((base << 8) | st, 0) : arch::block_broadcast((base << 8) | st, 0);
    base = packed >> 8;
    const auto result = static_cast<status>(packed & 0xff);
    if (total == 0) {
      *ticket = arch::local::load_acquire(&qp.sq_ready);
      return status::ok;
    }
    if (result != status::ok) return result;
    if (nbb != 0) build(base + offset);
    if (warp) {
      arch::warp_sync();
    } else {
      arch::block_sync();
    }
    if (leader) publish<S>(qp, base, total, ring);
    *ticket = base + offset + nbb;
    return status::ok;
  }
}

// The 64-bit ticket of the descriptor that ends just before ring position `end`: positions
// are 32-bit, the counter 64-bit, and every descriptor of the ring bumps the counter once,
// so the ticket is the counter value whose low 32 bits equal `end`. `done` is a counter
// value read no earlier than the reservation of `end`; it may already be PAST `end`
// (the proxy can run this descriptor and later ones before the poster reads the counter),
// so the 32-bit distance is signed. Exact while |done - end| < 2^31: the count trails the
// reserved positions by at most the ring capacity plus the operations in flight (< 2^25),
// and a poster would have to sleep through 2^31 descriptors to run that far ahead.
// (Fix: an unsigned distance turned a count past `end` into a ticket 2^32 too large, and a
// settle on it waited until its timeout: device_shared_qp_stress over the proxy, in CI.)
GDAKI_HD constexpr uint64_t proxy_ticket_of(uint64_t done, uint32_t end) {
  return done + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(end - static_cast<uint32_t>(done))));
}

GDAKI_HD inline uint64_t proxy_ticket(const qp_handle& qp, uint32_t end) {
  return proxy_ticket_of(arch::load_relaxed(&qp.proxy_ring->counters[qp.proxy_counter]), end);
}

// Proxy backend: the caller's n descriptors (consecutive positions, so a split operation
// stays in order) from build.descriptor(i, peer, counter). No collective exchange: each
// lane or thread takes its own positions, and the ring orders them. n == 0 (a skipping
// lane) gets a ticket covering everything pushed so far, as a direct skip does.
template <typename Build>
GDAKI_HD inline status post_proxy(qp_handle& qp, uint32_t n, Build& build, uint64_t* ticket, uint64_t timeout_ns) {
  proxy::ring_handle& r = *qp.proxy_ring;
  if (n == 0) {
    *ticket = proxy_ticket(qp, proxy::ring_reserved(r));
    return status::ok;
  }
  uint32_t first = 0;
  const status st = proxy::ring_acquire(r, n, &first, timeout_ns);
  // closed: the proxy stopped and nothing will ever run this; report it as a QP in error does.
  if (st != status::ok) return st == status::closed ? status::io_error : st;
  for (uint32_t i = 0; i < n; ++i) proxy::ring_write(r, first + i, build.descriptor(i, qp.proxy_peer, qp.proxy_counter));
  *ticket = proxy_ticket(qp, first + n);
  return status::ok;
}

// In a warp or block call every lane passes the same QP handle, skipping lanes too: the
// leader reserves the group's WQEBBs in its QP, every lane writes its WQEs there and waits
// there, and every lane must take the same backend branch below to meet the others in the
// exchanges. A lane with another QP would write WQEs into a ring where nothing was
// reserved for them (and the leader's QP would execute the holes), so the call posts
// nothing and every lane gets invalid. The handle's address is the identity: handles are
// used in place, never copied. Costs a shuffle and a vote on a warp; a broadcast and a
// __syncthreads_or on a block. (Fix: lanes of one warp passing two QPs corrupted both.)
template <typename Scope>
GDAKI_HD inline bool group_shares_the_qp(const qp_handle& qp) {
  const auto mine = reinterpret_cast<uintptr_t>(&qp);
  if constexpr (std::is_same_v<Scope, scope_warp>) {
    return !arch::warp_any(mine != arch::warp_shfl(mine, 0));
  } else {
    return !arch::block_any(mine != arch::block_broadcast(mine, 0));
  }
}

// The one data-path dispatch on the backend for posting (STYLE rule 2: a switch, no
// function pointers). nbb == 0 means "nothing to post" for both backends.
template <typename Scope, sharing S, typename Build>
GDAKI_HD inline status post(qp_handle& qp, uint32_t nbb, Build& build, uint64_t* ticket, uint64_t timeout_ns,
                            bool ring = true) {
  if constexpr (!std::is_same_v<Scope, scope_thread>) {
    if (!group_shares_the_qp<Scope>(qp)) return status::invalid;
  }
  switch (qp.backend) {
    case qp_backend::direct:
      return post_direct<Scope, S>(qp, nbb, build, ticket, timeout_ns, ring);
    case qp_backend::proxy:
      return post_proxy(qp, nbb == 0 ? 0u : build.descriptors(), build, ticket, timeout_ns);
  }
  return status::invalid;  // not a backend this header knows: post nothing
}

// A caller whose own arguments are invalid. In a warp or block call it must still take
// part in the collective exchange (as a skipping lane), or the lanes that did not fail
// would wait for it forever in post(); only then does it return invalid.
// (Fix: p/signal/put_signal used to return invalid before the exchange, which hung every
// other lane of a warp/block call in which a single lane passed a bad length.)
template <typename Scope, sharing S, typename Build>
GDAKI_HD inline status reject(qp_handle& qp, Build& build, uint64_t* ticket, uint64_t timeout_ns) {
  if constexpr (!std::is_same_v<Scope, scope_thread>) {
    (void)post<Scope, S>(qp, 0, build, ticket, timeout_ns);
  }
  return status::invalid;
}

// Builders, one per operation, capturing the caller's arguments. Each builds WQEs for the
// direct backend (operator()) and descriptors for the proxy backend (descriptors() says
// how many, descriptor(i, peer, counter) builds the i-th).
GDAKI_HD constexpr uint32_t chunks_of(uint64_t bytes) {
  return bytes == 0 ? 1u : static_cast<uint32_t>((bytes + max_message_bytes - 1) / max_message_bytes);
}
// The i-th max_message_bytes piece of a bytes-long put or get: its offset and length.
struct chunk {
  uint64_t offset;
  uint32_t length;
};
GDAKI_HD constexpr chunk chunk_of(uint64_t bytes, uint32_t i) {
  const uint64_t offset = uint64_t{i} * max_message_bytes;
  return {offset, static_cast<uint32_t>(bytes - offset < max_message_bytes ? bytes - offset : max_message_bytes)};
}
// A put (WRITE) or a get (READ) of `bytes`: one WQE, or one proxy descriptor, per
// max_message_bytes chunk; a zero-byte transfer is one WQE without a data segment.
template <bool Read>
struct transfer_builder {
  const qp_handle* qp;
  remote_ptr remote;
  local_ptr local;
  uint64_t bytes;
  uint8_t ctrl;
  GDAKI_HD void operator()(uint64_t start) const {
    for (uint32_t i = 0, at = 0, n = chunks_of(bytes); i < n; ++i) {
      const chunk c = chunk_of(bytes, i);
      const sge g{local.addr + c.offset, c.length, local.lkey};
      const uint32_t num_sge = c.length != 0 ? 1u : 0u;
      const uint64_t raddr = remote.addr + c.offset;
      at += Read ? prepare_read(*qp, start + at, raddr, remote.rkey, &g, num_sge, ctrl)
                 : prepare_write(*qp, start + at, raddr, remote.rkey, &g, num_sge, ctrl);
    }
  }
  GDAKI_HD uint32_t descriptors() const { return chunks_of(bytes); }
  GDAKI_HD proxy::descriptor descriptor(uint32_t i, uint16_t peer, uint16_t counter) const {
    const chunk c = chunk_of(bytes, i);
    // The fence, like the direct path's fenced first WQE, holds the whole operation back.
    const uint8_t first = i == 0 ? desc_flags_of(ctrl) : proxy::desc_flags::none;
    return Read ? proxy::make_get(peer, local.addr + c.offset, local.lkey, remote.addr + c.offset, remote.rkey,
                                  c.length, counter, first)
                : proxy::make_put(peer, remote.addr + c.offset, remote.rkey, local.addr + c.offset, local.lkey,
                                  c.length, counter, first);
  }
};
using put_builder = transfer_builder<false>;
using get_builder = transfer_builder<true>;

struct inline_builder {
  const qp_handle* qp;
  remote_ptr dst;
  const void* value;
  uint32_t len;
  uint8_t ctrl;
  GDAKI_HD void operator()(uint64_t start) const { prepare_write_inline(*qp, start, dst.addr, dst.rkey, value, len, ctrl); }
  // A descriptor carries 16 inline bytes; longer values take several, each copied out of
  // `value` now, so the caller may reuse it on return exactly as with the direct path.
  GDAKI_HD uint32_t descriptors() const {
    return len == 0 ? 1u : (len + proxy::max_inline_bytes - 1) / proxy::max_inline_bytes;
  }
  GDAKI_HD proxy::descriptor descriptor(uint32_t i, uint16_t peer, uint16_t counter) const {
    const uint32_t off = i * proxy::max_inline_bytes;
    const uint32_t n = len - off < proxy::max_inline_bytes ? len - off : proxy::max_inline_bytes;
    const auto* b = static_cast<const uint8_t*>(value) + off;
    uint64_t word[2] = {0, 0};
    for (uint32_t k = 0; k < n; ++k) word[k / 8] |= uint64_t{b[k]} << (8 * (k % 8));  // little end first
    return proxy::make_put_inline(peer, dst.addr + off, dst.rkey, word[0], word[1], n, counter,
                                  i == 0 ? desc_flags_of(ctrl) : proxy::desc_flags::none);
  }
};

struct signal_builder {
  const qp_handle* qp;
  remote_ptr sig;
  signal_op op;
  uint64_t value;
  uint8_t ctrl;
  GDAKI_HD uint32_t build(uint64_t at) const {
    if (op == signal_op::add) {
      const sge result{qp->scratch_addr, 8, qp->scratch_lkey};
      return prepare_atomic_fa(*qp, at, sig.addr, sig.rkey, value, result, ctrl);
    }
    return prepare_write_inline(*qp, at, sig.addr, sig.rkey, &value, 8, ctrl);
  }
  GDAKI_HD void operator()(uint64_t start) const { build(start); }
  GDAKI_HD uint32_t descriptors() const { return 1; }
  GDAKI_HD proxy::descriptor descriptor(uint32_t, uint16_t peer, uint16_t counter) const {
    return proxy::make_signal(peer, sig.addr, sig.rkey, op == signal_op::set, value, counter, desc_flags_of(ctrl));
  }
};

struct put_signal_builder {
  put_builder data;
  signal_builder sig;
  GDAKI_HD void operator()(uint64_t start) const {
    data(start);
    // The signal follows the data WQE(s) on the same QP: the responder executes them in
    // order, so a reader that sees the signal sees the data (PRM 6.2).
    sig.build(start + put_chunks(data.bytes));
  }
  GDAKI_HD static uint64_t put_chunks(uint64_t bytes) {
    return bytes == 0 ? 1 : (bytes + max_message_bytes - 1) / max_message_bytes;
  }
  // Every chunk but the last is a plain put; the last carries the signal, which the
  // poster issues after its data on one QP (never visible before it).
  GDAKI_HD uint32_t descriptors() const { return data.descriptors(); }
  GDAKI_HD proxy::descriptor descriptor(uint32_t i, uint16_t peer, uint16_t counter) const {
    proxy::descriptor d = data.descriptor(i, peer, counter);
    if (i + 1 == descriptors()) {
      d = proxy::make_put_signal(peer, d.remote_addr, d.remote_key, d.local_addr, d.local_key, d.length, sig.sig.addr,
                                 sig.sig.rkey, sig.op == signal_op::set, sig.value, counter, d.flags);
    }
    return d;
  }
};

struct atomic_builder {
  const qp_handle* qp;
  remote_ptr dst;
  local_ptr result;
  uint64_t a;  // FA: addend; CS: compare
  uint64_t b;  // CS: swap
  bool cas;
  uint8_t ctrl;
  GDAKI_HD void operator()(uint64_t start) const {
    const sge r{result.addr, 8, result.lkey};
    if (cas) {
      prepare_atomic_cs(*qp, start, dst.addr, dst.rkey, a, b, r, ctrl);
    } else {
      prepare_atomic_fa(*qp, start, dst.addr, dst.rkey, a, r, ctrl);
    }
  }
  GDAKI_HD uint32_t descriptors() const { return 1; }
  GDAKI_HD proxy::descriptor descriptor(uint32_t, uint16_t peer, uint16_t counter) const {
    return cas ? proxy::make_compare_swap(peer, dst.addr, dst.rkey, a, b, result.addr, result.lkey, counter,
                                          desc_flags_of(ctrl))
               : proxy::make_fetch_add(peer, dst.addr, dst.rkey, a, result.addr, result.lkey, counter,
                                       desc_flags_of(ctrl));
  }
};

struct nop_builder {
  const qp_handle* qp;
  uint8_t ctrl;
  GDAKI_HD void operator()(uint64_t start) const { prepare_nop(*qp, start, ctrl); }
  // The fenced NOP of fence() is a fence descriptor, the signalled NOP of quiet() a quiet
  // one: the proxy starts nothing after either before everything before it completed.
  GDAKI_HD uint32_t descriptors() const { return 1; }
  GDAKI_HD proxy::descriptor descriptor(uint32_t, uint16_t, uint16_t counter) const {
    return proxy::make_barrier(desc_flags_of(ctrl) == proxy::desc_flags::none, counter);
  }
};

}  // namespace detail

// ---- Put, inline put, signals, get, atomics (posting) ----------------------------------

template <typename Scope, sharing S>
GDAKI_HD inline status put(qp_handle& qp, remote_ptr dst, local_ptr src, uint64_t bytes, uint64_t* ticket,
                           uint32_t flags, uint64_t timeout_ns) {
  detail::put_builder b{&qp, dst, src, bytes, detail::ctrl_byte(flags)};
  const uint32_t nbb = (flags & op_flags::skip) ? 0 : detail::chunks_of(bytes) * wqebbs_rdma(1);
  return detail::post<Scope, S>(qp, nbb, b, ticket, timeout_ns, detail::rings(flags));
}

template <typename Scope, sharing S>
GDAKI_HD inline status p(qp_handle& qp, remote_ptr dst, const void* value, uint32_t len, uint64_t* ticket,
                         uint32_t flags, uint64_t timeout_ns) {
  detail::inline_builder b{&qp, dst, value, len, detail::ctrl_byte(flags)};
  if (!(flags & op_flags::skip) && len > qp.max_inline) return detail::reject<Scope, S>(qp, b, ticket, timeout_ns);
  const uint32_t nbb = (flags & op_flags::skip) ? 0 : wqebbs_write_inline(len);
  return detail::post<Scope, S>(qp, nbb, b, ticket, timeout_ns, detail::rings(flags));
}

template <typename Scope, sharing S>
GDAKI_HD inline status signal(qp_handle& qp, remote_ptr sig, signal_op op, uint64_t value, uint64_t* ticket,
                              uint32_t flags, uint64_t timeout_ns) {
  detail::signal_builder b{&qp, sig, op, value, detail::ctrl_byte(flags)};
  if (!(flags & op_flags::skip) && op == signal_op::add && qp.scratch_addr == 0) {
    return detail::reject<Scope, S>(qp, b, ticket, timeout_ns);
  }
  const uint32_t nbb = (flags & op_flags::skip) ? 0 : 1;
  return detail::post<Scope, S>(qp, nbb, b, ticket, timeout_ns, detail::rings(flags));
}

template <typename Scope, sharing S>
GDAKI_HD inline status put_signal(qp_handle& qp, remote_ptr dst, local_ptr src, uint64_t bytes, remote_ptr sig,
                                  signal_op op, uint64_t value, uint64_t* ticket, uint32_t flags, uint64_t timeout_ns) {
  detail::put_signal_builder b{{&qp, dst, src, bytes, detail::ctrl_byte(flags | op_flags::unsignaled)},
                               {&qp, sig, op, value, detail::ctrl_byte(flags & ~op_flags::fence)}};
  if (!(flags & op_flags::skip) && op == signal_op::add && qp.scratch_addr == 0) {
    return detail::reject<Scope, S>(qp, b, ticket, timeout_ns);
  }
  const uint32_t nbb = (flags & op_flags::skip) ? 0 : detail::chunks_of(bytes) * wqebbs_rdma(1) + 1;
  return detail::post<Scope, S>(qp, nbb, b, ticket, timeout_ns, detail::rings(flags));
}

template <typename Scope, sharing S>
GDAKI_HD inline status get(qp_handle& qp, local_ptr dst, remote_ptr src, uint64_t bytes, uint64_t* ticket,
                           uint32_t flags, uint64_t timeout_ns) {
  detail::get_builder b{&qp, src, dst, bytes, detail::ctrl_byte(flags)};
  const uint32_t nbb = (flags & op_flags::skip) ? 0 : detail::chunks_of(bytes) * wqebbs_rdma(1);
  return detail::post<Scope, S>(qp, nbb, b, ticket, timeout_ns, detail::rings(flags));
}

template <typename Scope, sharing S>
GDAKI_HD inline status atomic_fetch_add(qp_handle& qp, remote_ptr dst, uint64_t add, local_ptr result, uint64_t* ticket,
                                        uint32_t flags, uint64_t timeout_ns) {
  detail::atomic_builder b{&qp, dst, result, add, 0, false, detail::ctrl_byte(flags)};
  const uint32_t nbb = (flags & op_flags::skip) ? 0 : wqebbs_atomic();
  return detail::post<Scope, S>(qp, nbb, b, ticket, timeout_ns, detail::rings(flags));
}

template <typename Scope, sharing S>
GDAKI_HD inline status atomic_compare_swap(qp_handle& qp, remote_ptr dst, uint64_t compare, uint64_t swap,
                                           local_ptr result, uint64_t* ticket, uint32_t flags, uint64_t timeout_ns) {
  detail::atomic_builder b{&qp, dst, result, compare, swap, true, detail::ctrl_byte(flags)};
  const uint32_t nbb = (flags & op_flags::skip) ? 0 : wqebbs_atomic();
  return detail::post<Scope, S>(qp, nbb, b, ticket, timeout_ns, detail::rings(flags));
}

namespace detail {
// Proxy backend: the ticket is settled once the ring's counter reaches it. A failed
// descriptor never bumps the counter and latches the ring's error with its position, so
// tickets at or after it settle as io_error (like flushed WQEs behind a failed one).
GDAKI_HD inline status test_proxy(const qp_handle& qp, uint64_t ticket) {
  const proxy::ring_handle& r = *qp.proxy_ring;
  if (!ring_before<64>(proxy::ring_counter(r, qp.proxy_counter), ticket)) return status::ok;
  uint32_t pos = 0;
  if (proxy::ring_error(r, &pos) != status::ok && ring_before<32>(pos, static_cast<uint32_t>(ticket))) {
    return status::io_error;
  }
  // A stopped proxy completes nothing more: settle as failed rather than wait forever.
  return arch::load_acquire(&r.ctl->closed) != 0 ? status::io_error : status::again;
}
}  // namespace detail

// ---- Completion ------------------------------------------------------------------------

// test: the one data-path dispatch on the backend for settling.
GDAKI_HD inline status test(qp_handle& qp, uint64_t ticket) {
  switch (qp.backend) {
    case qp_backend::direct:
      return sq_test(qp, ticket);
    case qp_backend::proxy:
      return detail::test_proxy(qp, ticket);
  }
  return status::invalid;
}

GDAKI_HD inline status wait(qp_handle& qp, uint64_t ticket, uint64_t timeout_ns) {
  if (qp.backend == qp_backend::direct) return sq_wait(qp, ticket, timeout_ns);  // unchanged direct path
  return detail::poll_until([&] { return test(qp, ticket); }, timeout_ns);
}

// ---- Doorbell ---------------------------------------------------------------------------

template <typename Scope, sharing S>
GDAKI_HD inline void submit(qp_handle& qp) {
  if (qp.backend != qp_backend::direct) return;
  const bool leader = std::is_same_v<Scope, scope_thread> ||
                      (std::is_same_v<Scope, scope_warp> ? arch::lane_id() == 0 : arch::thread_rank_in_block() == 0);
  if (leader) sq_submit<S != sharing::exclusive>(qp);
}

// ---- Atomics that wait -----------------------------------------------------------------

template <typename Scope, sharing S>
GDAKI_HD inline status atomic_fetch_add_wait(qp_handle& qp, remote_ptr dst, uint64_t add, local_ptr result,
                                             uint64_t* old, uint64_t timeout_ns) {
  uint64_t t;
  status st = atomic_fetch_add<Scope, S>(qp, dst, add, result, &t, op_flags::none, timeout_ns);
  if (st == status::ok) st = wait(qp, t, timeout_ns);
  if (st == status::ok) *old = arch::load_acquire(reinterpret_cast<const uint64_t*>(result.addr));
  return st;
}

template <typename Scope, sharing S>
GDAKI_HD inline status atomic_compare_swap_wait(qp_handle& qp, remote_ptr dst, uint64_t compare, uint64_t swap,
                                                local_ptr result, uint64_t* old, uint64_t timeout_ns) {
  uint64_t t;
  status st = atomic_compare_swap<Scope, S>(qp, dst, compare, swap, result, &t, op_flags::none, timeout_ns);
  if (st == status::ok) st = wait(qp, t, timeout_ns);
  if (st == status::ok) *old = arch::load_acquire(reinterpret_cast<const uint64_t*>(result.addr));
  return st;
}

// ---- Ordering --------------------------------------------------------------------------

template <typename Scope, sharing S>
GDAKI_HD inline status fence(qp_handle& qp, uint64_t timeout_ns) {
  detail::nop_builder b{&qp, detail::ctrl_byte(op_flags::fence | op_flags::unsignaled)};
  uint64_t t;
  const bool poster = std::is_same_v<Scope, scope_thread> ||
                      (std::is_same_v<Scope, scope_warp> ? arch::lane_id() == 0 : arch::thread_rank_in_block() == 0);
  return detail::post<Scope, S>(qp, poster ? 1u : 0u, b, &t, timeout_ns);
}

template <typename Scope, sharing S>
GDAKI_HD inline status quiet(qp_handle& qp, uint64_t timeout_ns) {
  detail::nop_builder b{&qp, detail::ctrl_byte(op_flags::none)};
  const bool poster = std::is_same_v<Scope, scope_thread> ||
                      (std::is_same_v<Scope, scope_warp> ? arch::lane_id() == 0 : arch::thread_rank_in_block() == 0);
  if (qp.backend == qp_backend::direct) {
    // A reservation made before this load but not yet completed (ours, or another
    // thread's still being written) keeps sq_test at again: the NOP path then covers it.
    status done = status::again;
    if (poster) done = sq_test(qp, arch::local::load_acquire(&qp.sq_reserved));
    if constexpr (!std::is_same_v<Scope, scope_thread>) {
      const uint64_t v = static_cast<uint64_t>(done);
      done = static_cast<status>(std::is_same_v<Scope, scope_warp> ? arch::warp_shfl(v, 0) : arch::block_broadcast(v, 0));
    }
    if (done != status::again) return done;
  }
  uint64_t t;
  status st = detail::post<Scope, S>(qp, poster ? 1u : 0u, b, &t, timeout_ns);
  if (st != status::ok) return st;
  if constexpr (!std::is_same_v<Scope, scope_thread>) {
    // Everyone waits for the leader's NOP: its ticket is the batch end.
    t = std::is_same_v<Scope, scope_warp> ? arch::warp_shfl(t, 0) : arch::block_broadcast(t, 0);
  }
  return wait(qp, t, timeout_ns);
}

// ---- Errors ----------------------------------------------------------------------------

GDAKI_HD inline op_error last_error(const qp_handle& qp) {
  if (qp.backend == qp_backend::proxy) {
    uint32_t pos = 0;
    if (proxy::ring_error(*qp.proxy_ring, &pos) == status::ok) return op_error{prm::syndrome::none, no_error_index};
    return op_error{prm::syndrome::local_qp_op, pos};
  }
  const uint64_t st = arch::local::load_acquire(&qp.err_state);
  return op_error{err_syndrome_of(st), err_index_of(st)};
}

}  // namespace gdaki::dev

// The communicator's device API: one-sided operations between ranks addressed as (team,
// peer, window, offset), signals, counters and barriers, in the shape of NCCL's GIN
// (ncclGin) and NVSHMEM. Written on top of the QP device API (device/ops.hpp): every
// operation is WQEs on the RC QP of (context, peer), except those to this rank itself
// where dev_comm::self_direct allows ("Operations to this rank" below). Compiles as CUDA
// device code, nvcc host code and g++ host code; on CPU threads it runs through the host
// grid launcher. docs/communicator.md has the semantics and the mapping table.
//
// Scope (template parameter, as in ops.hpp):
//   scope_thread  the calling thread acts alone
//   scope_warp    every lane of the warp calls. Data calls (put, put_value, get, signal):
//                 each lane posts its own operation (a lane with nothing to do passes
//                 comm::skip), one reservation and one doorbell per distinct QP (lanes
//                 addressing the same peer on the same context share them; see per_qp). Waiting calls
//                 (flush, wait_signal, wait_counter, barrier): lane 0 works, every lane
//                 returns its status.
//   scope_block   the same for every thread of the block.
// Every call returns a gdaki::status: ok, invalid (bad arguments: the first is latched in
// the communicator's diagnostic record, which communicator::describe_error() puts into
// words naming window, offset, size, peer or signal), timeout (a bounded wait ran out:
// the record names the peer and the signal or barrier), io_error (an operation to a peer
// failed, e.g. the peer died: the record names the peer).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gdaki/comm/device_comm.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/ops.hpp"
#include "gdaki/device/ring.hpp"

namespace gdaki::comm {

using dev::scope_block;
using dev::scope_thread;
using dev::scope_warp;

// Flag for data calls in warp/block scope: this lane posts nothing.
inline constexpr uint32_t skip = dev::op_flags::skip;

// What happens at the peer once a put's data has landed (NCCL's RemoteAction).
struct remote_action {
  enum class kind : uint32_t { none = 0, add = 1, set = 2 } op = kind::none;
  signal_t signal = 0;
  uint64_t value = 0;
};
GDAKI_HD constexpr remote_action no_signal() { return {}; }
GDAKI_HD constexpr remote_action signal_inc(signal_t s) { return {remote_action::kind::add, s, 1}; }
GDAKI_HD constexpr remote_action signal_add(signal_t s, uint64_t v) { return {remote_action::kind::add, s, v}; }
GDAKI_HD constexpr remote_action signal_set(signal_t s, uint64_t v) { return {remote_action::kind::set, s, v}; }

// What happens here once the operation completed locally (NCCL's LocalAction): counter
// `counter` goes up by one. none: nothing.
struct local_action {
  bool inc = false;
  counter_t counter = 0;
};
GDAKI_HD constexpr local_action no_counter() { return {}; }
GDAKI_HD constexpr local_action counter_inc(counter_t c) { return {true, c}; }

// Wrap-safe "a <= b" over the low `bits` bits (NCCL's rolling compare): true when b is at
// most half the range ahead of a. bits in 1..64.
GDAKI_HD constexpr bool rolling_less_equal(uint64_t a, uint64_t b, uint32_t bits) {
  const uint64_t m = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  return ((b - a) & m) <= (m >> 1);
}

// ---- ABI, teams, escape hatch --------------------------------------------------------

// A kernel's first call: ok when c was filled in by a library with this header's layout;
// invalid (and nothing else may be called) for a null pointer or another ABI.
GDAKI_HD inline status check_abi(const dev_comm* c) {
  if (c == nullptr) return status::invalid;
  if (c->abi_version != abi_version || c->abi_size != sizeof(dev_comm)) return status::invalid;
  return status::ok;
}

GDAKI_HD inline const dev_team& world(const dev_comm& c) { return c.world; }

// World rank of team rank r (no check; see is_member).
GDAKI_HD inline int32_t team_to_world(const dev_team& t, int32_t r) {
  return t.members != nullptr ? t.members[r] : static_cast<int32_t>(t.start + static_cast<uint32_t>(r) * t.stride);
}
// Team rank of world rank w, or -1 when w is not a member.
GDAKI_HD inline int32_t world_to_team(const dev_team& t, int32_t w) {
  if (t.members != nullptr) {
    for (uint32_t i = 0; i < t.size; ++i)
      if (t.members[i] == w) return static_cast<int32_t>(i);
    return -1;
  }
  if (w < static_cast<int32_t>(t.start)) return -1;
  const uint32_t d = static_cast<uint32_t>(w) - t.start;
  if (t.stride == 0 || d % t.stride != 0 || d / t.stride >= t.size) return -1;
  return static_cast<int32_t>(d / t.stride);
}

// The raw RC QP of (context, world peer), for calls of device/ops.hpp the communicator
// does not wrap. nullptr when ctx or peer is out of range. Post with sharing::grid: every
// thread of every kernel shares it.
GDAKI_HD inline dev::qp_handle* raw_qp(const dev_comm& c, uint32_t ctx, int32_t world_peer) {
  if (ctx >= c.ncontexts || world_peer < 0 || static_cast<uint32_t>(world_peer) >= c.nranks) return nullptr;
  return c.qps[ctx * c.nranks + static_cast<uint32_t>(world_peer)];
}

namespace detail {

template <typename Scope>
GDAKI_HD inline bool leader() {
  if constexpr (std::is_same_v<Scope, scope_thread>) {
    return true;
  } else if constexpr (std::is_same_v<Scope, scope_warp>) {
    return dev::arch::lane_id() == 0;
  } else {
    return dev::arch::thread_rank_in_block() == 0;
  }
}

// The leader's value, handed to every member of the scope.
template <typename Scope>
GDAKI_HD inline uint64_t share(uint64_t v) {
  if constexpr (std::is_same_v<Scope, scope_thread>) {
    return v;
  } else if constexpr (std::is_same_v<Scope, scope_warp>) {
    return dev::arch::warp_shfl(v, 0);
  } else {
    return dev::arch::block_broadcast(v, 0);
  }
}

template <typename Scope>
GDAKI_HD inline uint32_t rank_in_group() {
  if constexpr (std::is_same_v<Scope, scope_warp>) {
    return dev::arch::lane_id();
  } else {
    return dev::arch::thread_rank_in_block();
  }
}

template <typename Scope>
GDAKI_HD inline uint32_t exclusive_sum(uint32_t v, uint32_t* total) {
  if constexpr (std::is_same_v<Scope, scope_warp>) {
    return dev::arch::warp_exclusive_sum(v, total);
  } else {
    return dev::arch::block_exclusive_sum(v, total);
  }
}

template <typename Scope>
GDAKI_HD inline uint64_t share_from(uint64_t v, uint32_t src) {
  if constexpr (std::is_same_v<Scope, scope_warp>) {
    return dev::arch::warp_shfl(v, src);
  } else {
    return dev::arch::block_broadcast(v, src);
  }
}

inline constexpr uint32_t no_qp = ~uint32_t{0};

// A collective post of ops.hpp takes ONE reservation on ONE QP for the whole warp or
// block, but here every lane may address another peer. So the group posts in rounds: each
// round picks the QP of the first lane still pending, the lanes with that QP post (one
// reservation, one doorbell) and the others take part as skipping lanes. `post(qp, flags)`
// posts the caller's operation(s) with the given flags (skip or 0). q == no_qp: this lane
// posts nothing. Returns the lane's own status (ok for a lane with nothing to post).
template <typename Scope, typename Post>
GDAKI_HD inline status per_qp(const dev_comm& c, uint32_t q, Post&& post) {
  if constexpr (std::is_same_v<Scope, scope_thread>) {
    return q == no_qp ? status::ok : post(*c.qps[q], 0u);
  } else {
    bool done = q == no_qp;
    status mine = status::ok;
    for (;;) {
      uint32_t pending = 0;
      const uint32_t before = exclusive_sum<Scope>(done ? 0u : 1u, &pending);
      if (pending == 0) break;
      uint32_t first_plus_one = 0;
      (void)exclusive_sum<Scope>(!done && before == 0 ? rank_in_group<Scope>() + 1 : 0u, &first_plus_one);
      const auto cur = static_cast<uint32_t>(share_from<Scope>(q, first_plus_one - 1));
      const bool in = !done && q == cur;
      const status st = post(*c.qps[cur], in ? 0u : dev::op_flags::skip);
      if (in) {
        mine = st;
        done = true;
      }
    }
    return mine;
  }
}

// Latches the first diagnostic of the communicator (later ones are dropped: the first
// failure is the cause, the rest its echoes).
GDAKI_HD inline void report(const dev_comm& c, diag_kind k, int32_t peer, int32_t window, int32_t sig, status st,
                            uint64_t offset = 0, uint64_t bytes = 0, uint64_t size = 0, uint64_t expected = 0,
                            uint64_t seen = 0) {
  comm_diag* d = c.diag;
  if (d == nullptr || !dev::arch::compare_swap(&d->latched, 0u, 1u)) return;
  d->kind = k;
  d->peer = peer;
  d->window = window;
  d->signal = sig;
  d->st = static_cast<int32_t>(st);
  d->offset = offset;
  d->bytes = bytes;
  d->size = size;
  d->expected = expected;
  d->seen = seen;
  // Publishes the fields before the host, which reads kind with acquire, sees them.
  dev::arch::store_release(reinterpret_cast<uint32_t*>(&d->kind), static_cast<uint32_t>(k));
}

// Resolves (team, peer) to a world rank; -1 (and a report) when peer is not in the team.
GDAKI_HD inline int32_t peer_world(const dev_comm& c, const dev_team& t, int32_t peer) {
  if (peer < 0 || static_cast<uint32_t>(peer) >= t.size) {
    report(c, diag_kind::bad_peer, peer, -1, -1, status::invalid);
    return -1;
  }
  const int32_t w = team_to_world(t, peer);
  if (w < 0 || static_cast<uint32_t>(w) >= c.nranks) {
    report(c, diag_kind::bad_peer, w, -1, -1, status::invalid);
    return -1;
  }
  return w;
}

// True when [offset, offset + bytes) lies in live window w; otherwise reports why.
GDAKI_HD inline bool window_range_ok(const dev_comm& c, window_t w, uint64_t offset, uint64_t bytes) {
  if (w >= max_windows || c.windows[w].live == 0) {
    report(c, diag_kind::bad_window, -1, static_cast<int32_t>(w), -1, status::invalid);
    return false;
  }
  const uint64_t size = c.windows[w].size;
  if (offset > size || bytes > size - offset) {
    report(c, diag_kind::range, -1, static_cast<int32_t>(w), -1, status::invalid, offset, bytes, size);
    return false;
  }
  return true;
}

GDAKI_HD inline bool signal_ok(const dev_comm& c, const remote_action& ra) {
  if (ra.op == remote_action::kind::none || ra.signal < c.nsignals) return true;
  report(c, diag_kind::bad_signal, -1, -1, static_cast<int32_t>(ra.signal), status::invalid);
  return false;
}

GDAKI_HD inline bool counter_ok(const dev_comm& c, const local_action& la) {
  if (!la.inc || la.counter < c.ncounters) return true;
  report(c, diag_kind::bad_signal, -1, -1, static_cast<int32_t>(la.counter), status::invalid);
  return false;
}

GDAKI_HD inline dev::remote_ptr signal_word(const dev_comm& c, int32_t world_peer, uint32_t slot) {
  return {c.signals.peer_base[world_peer] + uint64_t{slot} * 8, c.signals.peer_rkey[world_peer]};
}

GDAKI_HD inline uint64_t* local_signal(const dev_comm& c, uint32_t slot) {
  return reinterpret_cast<uint64_t*>(c.signals.local_base) + slot;
}

// ---- Operations to this rank itself -------------------------------------------------
// With dev_comm::self_direct, a put, put_value, get or signal whose peer is this rank, and
// this rank's own barrier slot, are done by the calling thread in its own memory: the copy,
// then the signal's atomic (release), then the counter. They have completed when the call
// returns, so every guarantee of the QP path holds (a signal follows its put's data and
// every earlier put to this rank; a flush covers them; a counter counts them), and they
// cost a copy instead of WQEs, a doorbell and the NIC model's execution of each.
// (Measured: docs/performance.md, "Operations to this rank without the loopback QP".)
// Only their order against operations posted to this rank through raw_qp is not kept.

GDAKI_HD inline bool to_self(const dev_comm& c, int32_t world_peer) {
  return c.self_direct != 0 && world_peer == c.rank;
}

// As the soft NIC's WRITE: an aligned 8- or 4-byte piece is one store, so a thread that
// polls that word never sees half of it; anything else is a memmove (a put from a window
// into an overlapping range of itself moves what the source held).
GDAKI_HD inline void copy_to_self(uint64_t dst, uint64_t src, uint64_t bytes) {
  if (bytes == 8 && (dst | src) % 8 == 0) {
    dev::arch::store_release(reinterpret_cast<uint64_t*>(dst), *reinterpret_cast<const uint64_t*>(src));
  } else if (bytes == 4 && (dst | src) % 4 == 0) {
    dev::arch::store_release(reinterpret_cast<uint32_t*>(dst), *reinterpret_cast<const uint32_t*>(src));
  } else if (bytes != 0) {
#if GDAKI_DEVICE_PASS
    // No memmove in device code: bytes, backwards when the destination starts inside the
    // source. (Unreached today: self_direct is set for CPU initiators only.)
    auto* d = reinterpret_cast<uint8_t*>(dst);
    const auto* s = reinterpret_cast<const uint8_t*>(src);
    if (d <= s || d >= s + bytes) {
      for (uint64_t i = 0; i < bytes; ++i) d[i] = s[i];
    } else {
      for (uint64_t i = bytes; i-- > 0;) d[i] = s[i];
    }
#else
    memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
#endif
  }
}

// The remote action at this rank: ordered after the copies before it (release).
GDAKI_HD inline void signal_self(const dev_comm& c, const remote_action& ra) {
  if (ra.op == remote_action::kind::none) return;
  uint64_t* s = local_signal(c, ra.signal);
  if (ra.op == remote_action::kind::set) {
    dev::arch::store_release(s, ra.value);
  } else {
    (void)dev::arch::fetch_add(s, ra.value);
  }
}

// A counted operation to this rank has completed. The completed count goes up before the
// issued one: read_counter raises completed to a snapshot of issued, and a snapshot that
// includes this operation must not be followed by this increment (the value would run
// ahead of the truth).
GDAKI_HD inline void count_done(const dev_comm& c, const local_action& la) {
  if (!la.inc) return;
  (void)dev::arch::fetch_add(&c.counter_completed[la.counter], uint64_t{1});
  (void)dev::arch::fetch_add(&c.counter_issued[la.counter], uint64_t{1});
}

// A counted operation was posted with `ticket` on QP index q: record the ticket first,
// then the count, so whoever sees the count also sees a ticket that covers it.
GDAKI_HD inline void count_posted(const dev_comm& c, const local_action& la, uint32_t q, uint64_t ticket) {
  if (!la.inc) return;
  dev::arch::fetch_max(&c.counter_ticket[q], ticket);
  dev::arch::fetch_add(&c.counter_issued[la.counter], 1);
}

GDAKI_HD inline status posted(const dev_comm& c, status st, int32_t world_peer) {
  if (st != status::ok) report(c, diag_kind::op_failed, world_peer, -1, -1, st);
  return st;
}

}  // namespace detail

// ---- data movement ---------------------------------------------------------------------

// Copies `bytes` from this rank's window `src` at src_offset to `peer`'s (a rank of team t)
// window `dst` at dst_offset, on context ctx. With a remote action, the peer's signal
// changes only after this put's data and the data of every earlier put on this context to
// that peer have landed (RC order on one QP). With counter_inc(k), counter k goes up once
// this put completed locally (the source may be reused). Returns ok, invalid, timeout (no
// ring space within the communicator's timeout) or io_error.
template <typename Scope = scope_thread>
GDAKI_HD inline status put(const dev_comm& c, uint32_t ctx, const dev_team& t, int32_t peer, window_t dst,
                           uint64_t dst_offset, window_t src, uint64_t src_offset, uint64_t bytes,
                           remote_action ra = {}, local_action la = {}, uint32_t flags = 0) {
  bool ok = true;
  int32_t w = 0;
  if (!(flags & skip)) {
    w = ctx < c.ncontexts ? detail::peer_world(c, t, peer) : -1;
    ok = w >= 0 && detail::window_range_ok(c, dst, dst_offset, bytes) &&
         detail::window_range_ok(c, src, src_offset, bytes) && detail::signal_ok(c, ra) && detail::counter_ok(c, la);
  }
  // A lane with bad arguments still takes part in the collective post, as a skipping one.
  const bool posts = ok && !(flags & skip);
  const bool self = posts && detail::to_self(c, w);  // a lane to itself posts nothing either
  const uint32_t q = posts && !self ? ctx * c.nranks + static_cast<uint32_t>(w) : detail::no_qp;
  dev::remote_ptr to{}, sig{};
  dev::local_ptr from{};
  if (posts && !self) {
    const dev_window& dw = c.windows[dst];
    const dev_window& sw = c.windows[src];
    to = {dw.peer_base[w] + dst_offset, dw.peer_rkey[w]};
    from = {sw.local_base + src_offset, sw.lkey};
    if (ra.op != remote_action::kind::none) sig = detail::signal_word(c, w, ra.signal);
  }
  uint64_t ticket = 0;
  const dev::signal_op op = ra.op == remote_action::kind::set ? dev::signal_op::set : dev::signal_op::add;
  // Lanes with and without a signal may share a round: both post through put_signal's
  // shape only when this lane has a signal; a round is one collective call per kind.
  const bool with_sig = ra.op != remote_action::kind::none;
  const status st = detail::per_qp<Scope>(c, q, [&](dev::qp_handle& qp, uint32_t f) {
    uint64_t t_put = 0, t_sig = 0;
    const status a = dev::put<Scope, dev::sharing::grid>(qp, to, from, bytes, &t_put, (f || with_sig) ? skip : 0u,
                                                         c.timeout_ns);
    const status b = dev::put_signal<Scope, dev::sharing::grid>(qp, to, from, bytes, sig, op, ra.value, &t_sig,
                                                                (f || !with_sig) ? skip : 0u, c.timeout_ns);
    ticket = with_sig ? t_sig : t_put;
    return with_sig ? b : a;
  });
  if (!ok) return status::invalid;
  if (!posts) return st;
  if (self) {
    detail::copy_to_self(c.windows[dst].local_base + dst_offset, c.windows[src].local_base + src_offset, bytes);
    detail::signal_self(c, ra);
    detail::count_done(c, la);
    return status::ok;
  }
  if (st == status::ok) detail::count_posted(c, la, q, ticket);
  return detail::posted(c, st, w);
}

// Writes `value` (sizeof(T) <= 8 bytes, carried inline in the WQE: no source window) to
// peer's window dst at dst_offset, then the remote action, in that order on one QP.
template <typename Scope = scope_thread, typename T>
GDAKI_HD inline status put_value(const dev_comm& c, uint32_t ctx, const dev_team& t, int32_t peer, window_t dst,
                                 uint64_t dst_offset, T value, remote_action ra = {}, uint32_t flags = 0) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "put_value carries at most 8 bytes inline");
  bool ok = true;
  int32_t w = 0;
  if (!(flags & skip)) {
    w = ctx < c.ncontexts ? detail::peer_world(c, t, peer) : -1;
    ok = w >= 0 && detail::window_range_ok(c, dst, dst_offset, sizeof(T)) && detail::signal_ok(c, ra);
  }
  const bool posts = ok && !(flags & skip);
  const bool self = posts && detail::to_self(c, w);
  const uint32_t q = posts && !self ? ctx * c.nranks + static_cast<uint32_t>(w) : detail::no_qp;
  dev::remote_ptr to{};
  if (posts && !self) to = {c.windows[dst].peer_base[w] + dst_offset, c.windows[dst].peer_rkey[w]};
  const bool has_sig = posts && !self && ra.op != remote_action::kind::none;
  const dev::remote_ptr sig = has_sig ? detail::signal_word(c, w, ra.signal) : dev::remote_ptr{};
  const dev::signal_op op = ra.op == remote_action::kind::set ? dev::signal_op::set : dev::signal_op::add;
  uint64_t ticket = 0;
  const status st = detail::per_qp<Scope>(c, q, [&](dev::qp_handle& qp, uint32_t f) {
    status a = dev::p<Scope, dev::sharing::grid>(qp, to, &value, sizeof(T), &ticket, f, c.timeout_ns);
    // The signal is a second WQE behind the inline write on the same QP; every lane of
    // the round takes part (skipping when it has no signal) because the post is collective.
    if (std::is_same_v<Scope, scope_thread> ? has_sig : true) {
      const status b = dev::signal<Scope, dev::sharing::grid>(qp, sig, op, ra.value, &ticket,
                                                              (f || !has_sig) ? skip : 0u, c.timeout_ns);
      if (a == status::ok) a = b;
    }
    return a;
  });
  if (!ok) return status::invalid;
  if (!posts) return st;
  if (self) {
    detail::copy_to_self(c.windows[dst].local_base + dst_offset, reinterpret_cast<uint64_t>(&value), sizeof(T));
    detail::signal_self(c, ra);
    return status::ok;
  }
  return detail::posted(c, st, w);
}

// Copies `bytes` from peer's window `src` at src_offset into this rank's window `dst` at
// dst_offset. The data is there once a later flush returns ok, or once counter k (with
// counter_inc(k)) has counted it.
template <typename Scope = scope_thread>
GDAKI_HD inline status get(const dev_comm& c, uint32_t ctx, const dev_team& t, int32_t peer, window_t dst,
                           uint64_t dst_offset, window_t src, uint64_t src_offset, uint64_t bytes,
                           local_action la = {}, uint32_t flags = 0) {
  bool ok = true;
  int32_t w = 0;
  if (!(flags & skip)) {
    w = ctx < c.ncontexts ? detail::peer_world(c, t, peer) : -1;
    ok = w >= 0 && detail::window_range_ok(c, dst, dst_offset, bytes) &&
         detail::window_range_ok(c, src, src_offset, bytes) && detail::counter_ok(c, la);
  }
  const bool posts = ok && !(flags & skip);
  const bool self = posts && detail::to_self(c, w);
  const uint32_t q = posts && !self ? ctx * c.nranks + static_cast<uint32_t>(w) : detail::no_qp;
  dev::local_ptr to{};
  dev::remote_ptr from{};
  if (posts && !self) {
    to = {c.windows[dst].local_base + dst_offset, c.windows[dst].lkey};
    from = {c.windows[src].peer_base[w] + src_offset, c.windows[src].peer_rkey[w]};
  }
  uint64_t ticket = 0;
  const status st = detail::per_qp<Scope>(c, q, [&](dev::qp_handle& qp, uint32_t f) {
    return dev::get<Scope, dev::sharing::grid>(qp, to, from, bytes, &ticket, f, c.timeout_ns);
  });
  if (!ok) return status::invalid;
  if (!posts) return st;
  if (self) {
    detail::copy_to_self(c.windows[dst].local_base + dst_offset, c.windows[src].local_base + src_offset, bytes);
    detail::count_done(c, la);
    return status::ok;
  }
  if (st == status::ok) detail::count_posted(c, la, q, ticket);
  return detail::posted(c, st, w);
}

// The remote action alone (no data): peer's signal += value (add, inc) or = value (set),
// after every earlier put on this context to that peer.
template <typename Scope = scope_thread>
GDAKI_HD inline status signal(const dev_comm& c, uint32_t ctx, const dev_team& t, int32_t peer, remote_action ra,
                              uint32_t flags = 0) {
  bool ok = true;
  int32_t w = 0;
  if (!(flags & skip)) {
    w = ctx < c.ncontexts ? detail::peer_world(c, t, peer) : -1;
    ok = w >= 0 && ra.op != remote_action::kind::none && detail::signal_ok(c, ra);
    if (w >= 0 && ra.op == remote_action::kind::none) detail::report(c, diag_kind::bad_signal, w, -1, -1, status::invalid);
  }
  const bool posts = ok && !(flags & skip);
  const bool self = posts && detail::to_self(c, w);
  const uint32_t q = posts && !self ? ctx * c.nranks + static_cast<uint32_t>(w) : detail::no_qp;
  const dev::remote_ptr sig = posts && !self ? detail::signal_word(c, w, ra.signal) : dev::remote_ptr{};
  const dev::signal_op op = ra.op == remote_action::kind::set ? dev::signal_op::set : dev::signal_op::add;
  uint64_t ticket = 0;
  const status st = detail::per_qp<Scope>(c, q, [&](dev::qp_handle& qp, uint32_t f) {
    return dev::signal<Scope, dev::sharing::grid>(qp, sig, op, ra.value, &ticket, f, c.timeout_ns);
  });
  if (!ok) return status::invalid;
  if (!posts) return st;
  if (self) {
    detail::signal_self(c, ra);
    return status::ok;
  }
  return detail::posted(c, st, w);
}

// ---- completion ------------------------------------------------------------------------

// Every operation posted so far on context ctx, by any thread, has completed locally: its
// source may be reused and, because an RC WRITE completes only once the peer acknowledged
// it, its data has been placed at the peer (get data is here). One signalled NOP per peer
// and a wait on each. Returns ok, io_error (naming the peer) or timeout.
template <typename Scope = scope_thread>
GDAKI_HD inline status flush(const dev_comm& c, uint32_t ctx, uint64_t timeout_ns) {
  if (ctx >= c.ncontexts) return status::invalid;
  status first = status::ok;
  for (uint32_t p = 0; p < c.nranks; ++p) {
    const status st = dev::quiet<Scope, dev::sharing::grid>(*c.qps[ctx * c.nranks + p], timeout_ns);
    if (st != status::ok && first == status::ok) {
      first = st;
      if (detail::leader<Scope>()) detail::report(c, diag_kind::op_failed, static_cast<int32_t>(p), -1, -1, st);
    }
  }
  return first;
}
template <typename Scope = scope_thread>
GDAKI_HD inline status flush(const dev_comm& c, uint32_t ctx) {
  return flush<Scope>(c, ctx, c.timeout_ns);
}
// NVSHMEM's name for the same guarantee (remote completion of earlier puts).
template <typename Scope = scope_thread>
GDAKI_HD inline status quiet(const dev_comm& c, uint32_t ctx) {
  return flush<Scope>(c, ctx, c.timeout_ns);
}

// The asynchronous flush: take a request now (thread scope, no WQE posted), test it later.
// It covers what this context had posted when it was taken. Up to 64 ranks.
struct flush_request {
  uint32_t ctx;
  uint32_t nranks;
  uint64_t tickets[64];
};
GDAKI_HD inline status flush_async(const dev_comm& c, uint32_t ctx, flush_request* req) {
  if (ctx >= c.ncontexts || c.nranks > 64) return status::invalid;
  req->ctx = ctx;
  req->nranks = c.nranks;
  for (uint32_t p = 0; p < c.nranks; ++p) {
    // A skipping post posts nothing and returns the ticket of everything posted so far.
    (void)dev::put<scope_thread, dev::sharing::grid>(*c.qps[ctx * c.nranks + p], {}, {}, 0, &req->tickets[p], skip);
  }
  return status::ok;
}
// ok once everything the request covers has completed, again before, io_error on failure.
GDAKI_HD inline status test(const dev_comm& c, const flush_request& req) {
  status result = status::ok;
  for (uint32_t p = 0; p < req.nranks; ++p) {
    const status st = dev::test(*c.qps[req.ctx * c.nranks + p], req.tickets[p]);
    if (st == status::io_error) return detail::posted(c, st, static_cast<int32_t>(p));
    if (st != status::ok) result = st;
  }
  return result;
}

// ---- signals ---------------------------------------------------------------------------

// This rank's signal s, masked to its low `bits` bits (acquire: what the signal follows is
// visible once the value is seen). Out-of-range s reads 0 and reports.
GDAKI_HD inline uint64_t read_signal(const dev_comm& c, signal_t s, uint32_t bits = 64) {
  if (s >= c.nsignals) {
    detail::report(c, diag_kind::bad_signal, -1, -1, static_cast<int32_t>(s), status::invalid);
    return 0;
  }
  const uint64_t v = dev::arch::load_acquire(detail::local_signal(c, s));
  return bits >= 64 ? v : v & ((uint64_t{1} << bits) - 1);
}

// Waits until rolling_less_equal(least, signal s, bits). Returns ok, invalid or timeout
// (the record names the signal, the value waited for and the last value seen).
template <typename Scope = scope_thread>
GDAKI_HD inline status wait_signal(const dev_comm& c, signal_t s, uint64_t least, uint32_t bits, uint64_t timeout_ns) {
  uint64_t st = static_cast<uint64_t>(status::ok);
  if (detail::leader<Scope>()) {
    if (s >= c.nsignals) {
      detail::report(c, diag_kind::bad_signal, -1, -1, static_cast<int32_t>(s), status::invalid);
      st = static_cast<uint64_t>(status::invalid);
    } else {
      // The clock is read from the first look that finds the signal short (as poll_until).
      uint64_t t0 = 0;
      for (uint32_t i = 0;; ++i) {
        const uint64_t v = read_signal(c, s, bits);
        if (rolling_less_equal(least, v, bits)) break;
        const uint64_t now = timeout_ns != dev::wait_forever ? dev::arch::clock_ns() : 0;
        if (i == 0) t0 = now;
        if (timeout_ns != dev::wait_forever && now - t0 >= timeout_ns) {
          detail::report(c, diag_kind::wait_timeout, -1, -1, static_cast<int32_t>(s), status::timeout, 0, 0, 0, least,
                         v);
          st = static_cast<uint64_t>(status::timeout);
          break;
        }
        dev::arch::spin_pause(i);
      }
    }
  }
  return static_cast<status>(detail::share<Scope>(st));
}
template <typename Scope = scope_thread>
GDAKI_HD inline status wait_signal(const dev_comm& c, signal_t s, uint64_t least, uint32_t bits = 64) {
  return wait_signal<Scope>(c, s, least, bits, c.timeout_ns);
}

// Sets signal s to zero. Must not race with operations that change it.
GDAKI_HD inline status reset_signal(const dev_comm& c, signal_t s) {
  if (s >= c.nsignals) return status::invalid;
  dev::arch::store_release(detail::local_signal(c, s), 0);
  return status::ok;
}

// ---- counters --------------------------------------------------------------------------

// Counter k: how many operations marked counter_inc(k) have completed locally, masked to
// `bits` bits (at most 56, as NCCL's). Settles what it can without waiting: the count of
// issued operations is taken first, then every QP that carried a counted operation is
// tested up to its highest counted ticket; when all are done, that count is complete.
// A value never runs ahead of the truth; it may lag until the next read.
GDAKI_HD inline uint64_t read_counter(const dev_comm& c, counter_t k, uint32_t bits = 56, status* failed = nullptr) {
  if (k >= c.ncounters) {
    detail::report(c, diag_kind::bad_signal, -1, -1, static_cast<int32_t>(k), status::invalid);
    if (failed) *failed = status::invalid;
    return 0;
  }
  const uint64_t issued = dev::arch::load_acquire(&c.counter_issued[k]);
  bool all = true;
  for (uint32_t q = 0; q < c.ncontexts * c.nranks && all; ++q) {
    const uint64_t t = dev::arch::load_acquire(&c.counter_ticket[q]);
    if (t == 0) continue;
    const status st = dev::test(*c.qps[q], t);
    if (st == status::io_error) {
      detail::report(c, diag_kind::op_failed, static_cast<int32_t>(q % c.nranks), -1, static_cast<int32_t>(k), st);
      if (failed) *failed = st;
    }
    all = st == status::ok;
  }
  if (all) dev::arch::fetch_max(&c.counter_completed[k], issued);
  const uint64_t v = dev::arch::load_acquire(&c.counter_completed[k]);
  return bits >= 64 ? v : v & ((uint64_t{1} << bits) - 1);
}

// Waits until rolling_less_equal(least, counter k, bits). ok, invalid, io_error or timeout.
template <typename Scope = scope_thread>
GDAKI_HD inline status wait_counter(const dev_comm& c, counter_t k, uint64_t least, uint32_t bits,
                                    uint64_t timeout_ns) {
  uint64_t st = static_cast<uint64_t>(status::ok);
  if (detail::leader<Scope>()) {
    const uint64_t t0 = dev::arch::clock_ns();
    for (uint32_t i = 0;; ++i) {
      status failed = status::ok;
      const uint64_t v = read_counter(c, k, bits, &failed);
      if (failed != status::ok) {
        st = static_cast<uint64_t>(failed);
        break;
      }
      if (rolling_less_equal(least, v, bits)) break;
      if (timeout_ns != dev::wait_forever && dev::arch::clock_ns() - t0 >= timeout_ns) {
        detail::report(c, diag_kind::wait_timeout, -1, -1, static_cast<int32_t>(k), status::timeout, 0, 0, 0, least, v);
        st = static_cast<uint64_t>(status::timeout);
        break;
      }
      dev::arch::spin_pause(i);
    }
  }
  return static_cast<status>(detail::share<Scope>(st));
}
template <typename Scope = scope_thread>
GDAKI_HD inline status wait_counter(const dev_comm& c, counter_t k, uint64_t least, uint32_t bits = 56) {
  return wait_counter<Scope>(c, k, least, bits, c.timeout_ns);
}

// Sets counter k to zero. Must not race with counted operations in flight.
GDAKI_HD inline status reset_counter(const dev_comm& c, counter_t k) {
  if (k >= c.ncounters) return status::invalid;
  dev::arch::store_release(&c.counter_issued[k], 0);
  dev::arch::store_release(&c.counter_completed[k], 0);
  return status::ok;
}

// ---- barrier ---------------------------------------------------------------------------

// Every member of team t has entered this barrier (GIN style, over signals): the caller
// sets its barrier slot at every member to a new generation, on context ctx, and waits for
// theirs. Puts this rank posted on ctx before the barrier are visible at each member
// before that member leaves (each slot write follows them on the same QP). The caller is
// a member too: its own slot travels its loopback QP behind its puts to itself, which an
// engine may still be executing when the caller enters (a team of one still waits); with
// self_direct those puts are done, and the slot is a store. One
// caller (thread, warp or block) per team at a time on each rank. Returns ok, io_error or
// timeout (the record names the first member that did not arrive, and the team).
template <typename Scope = scope_thread>
GDAKI_HD inline status barrier(const dev_comm& c, uint32_t ctx, const dev_team& t, uint64_t timeout_ns) {
  uint64_t st = static_cast<uint64_t>(status::ok);
  if (detail::leader<Scope>()) {
    if (ctx >= c.ncontexts || t.rank < 0 || t.barrier_id >= max_teams) {
      st = static_cast<uint64_t>(status::invalid);
    } else {
      const uint64_t epoch = ++c.barrier_epoch[t.barrier_id];
      const uint32_t base = c.nsignals + t.barrier_id * c.nranks;
      const uint32_t me = static_cast<uint32_t>(c.rank);
      for (uint32_t r = 0; r < t.size && st == static_cast<uint64_t>(status::ok); ++r) {
        const int32_t w = team_to_world(t, static_cast<int32_t>(r));
        if (detail::to_self(c, w)) {
          dev::arch::store_release(detail::local_signal(c, base + me), epoch);
          continue;
        }
        uint64_t ticket = 0;
        const status s = dev::signal<scope_thread, dev::sharing::grid>(
            *c.qps[ctx * c.nranks + static_cast<uint32_t>(w)], detail::signal_word(c, w, base + me),
            dev::signal_op::set, epoch, &ticket, dev::op_flags::none, timeout_ns);
        if (s != status::ok) {
          detail::report(c, diag_kind::op_failed, w, -1, static_cast<int32_t>(t.barrier_id), s);
          st = static_cast<uint64_t>(s);
        }
      }
      const uint64_t t0 = dev::arch::clock_ns();
      for (uint32_t r = 0; r < t.size && st == static_cast<uint64_t>(status::ok); ++r) {
        const int32_t w = team_to_world(t, static_cast<int32_t>(r));
        const uint64_t* slot = detail::local_signal(c, base + static_cast<uint32_t>(w));
        for (uint32_t i = 0;; ++i) {
          const uint64_t v = dev::arch::load_acquire(slot);
          if (rolling_less_equal(epoch, v, 64)) break;
          if (timeout_ns != dev::wait_forever && dev::arch::clock_ns() - t0 >= timeout_ns) {
            detail::report(c, diag_kind::wait_timeout, w, -1, -1 - static_cast<int32_t>(t.barrier_id),
                           status::timeout, 0, 0, 0, epoch, v);
            st = static_cast<uint64_t>(status::timeout);
            break;
          }
          dev::arch::spin_pause(i);
        }
      }
    }
  }
  const status result = static_cast<status>(detail::share<Scope>(st));
  if constexpr (std::is_same_v<Scope, scope_warp>) {
    dev::arch::warp_sync();
  } else if constexpr (std::is_same_v<Scope, scope_block>) {
    dev::arch::block_sync();
  }
  return result;
}
template <typename Scope = scope_thread>
GDAKI_HD inline status barrier(const dev_comm& c, uint32_t ctx, const dev_team& t) {
  return barrier<Scope>(c, ctx, t, c.timeout_ns);
}

}  // namespace gdaki::comm

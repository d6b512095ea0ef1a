// The kernel bodies of examples/moe_alltoall.cpp in a header of their own, so that
// tests/comm/comm_kernels_check.cu compiles exactly these bodies for sm_90 while the
// example runs them on host-grid CPU threads.
//
// MoE dispatch/combine as an all-to-all of variable-size chunks: lane p of one warp owns
// peer p (so up to 32 ranks). Dispatch: this rank writes how many bytes it sends to p into
// p's `counts` window (put_value), then the bytes into p's `recv` window at this rank's
// slot with signal `me` += 1 (the signal follows both on one QP). Receivers wait on the
// signal of every sender, then read its count. Combine sends each chunk back, processed
// (here: unchanged) into the origin's `back` window with signal nranks + me.
#pragma once

#include <cstdint>

#include "gdaki/comm/device.hpp"

namespace moe {

namespace comm = gdaki::comm;

struct args {
  const comm::dev_comm* c;
  comm::window_t send, recv, back, counts;
  uint64_t slot_bytes;        // room per peer in send / recv / back
  const uint64_t* bytes_to;   // [nranks] bytes this rank dispatches to each peer this round
  uint64_t round;             // 1, 2, ...: signals count rounds
  uint64_t timeout_ns;
};

// Dispatch then wait for every sender's chunk. Every lane of one warp calls it. Returns
// the lane's status (ok, or what its peer's put / wait returned).
template <typename Scope = comm::scope_warp>
GDAKI_HD inline gdaki::status dispatch(const args& a) {
  const comm::dev_comm& c = *a.c;
  const uint32_t p = gdaki::dev::arch::lane_id();
  const bool mine = p < c.nranks;
  const uint32_t flags = mine ? 0u : comm::skip;
  const int32_t peer = mine ? static_cast<int32_t>(p) : 0;
  const uint64_t bytes = mine ? a.bytes_to[p] : 0;
  const uint64_t me = static_cast<uint64_t>(c.rank);
  gdaki::status st = comm::put_value<Scope>(c, 0, c.world, peer, a.counts, 8 * me, bytes, comm::no_signal(), flags);
  const gdaki::status s2 = comm::put<Scope>(c, 0, c.world, peer, a.recv, me * a.slot_bytes, a.send, p * a.slot_bytes,
                                            bytes, comm::signal_inc(c.rank), comm::no_counter(), flags);
  if (st == gdaki::status::ok) st = s2;
  if (mine && st == gdaki::status::ok) st = comm::wait_signal<comm::scope_thread>(c, p, a.round, 64, a.timeout_ns);
  return st;
}

// Sends every received chunk back to its origin and waits for all of its own to return.
template <typename Scope = comm::scope_warp>
GDAKI_HD inline gdaki::status combine(const args& a) {
  const comm::dev_comm& c = *a.c;
  const uint32_t p = gdaki::dev::arch::lane_id();
  const bool mine = p < c.nranks;
  const uint32_t flags = mine ? 0u : comm::skip;
  const int32_t peer = mine ? static_cast<int32_t>(p) : 0;
  const uint64_t me = static_cast<uint64_t>(c.rank);
  // How much p sent us: its count word, visible since its dispatch signal was seen.
  const uint64_t got = mine ? gdaki::dev::arch::load_acquire(reinterpret_cast<const uint64_t*>(
                                  c.windows[a.counts].local_base + 8 * uint64_t{p}))
                            : 0;
  gdaki::status st = comm::put<Scope>(c, 0, c.world, peer, a.back, me * a.slot_bytes, a.recv, p * a.slot_bytes, got,
                                      comm::signal_inc(c.nranks + me), comm::no_counter(), flags);
  if (mine && st == gdaki::status::ok) st = comm::wait_signal<comm::scope_thread>(c, c.nranks + p, a.round, 64, a.timeout_ns);
  return st;
}

}  // namespace moe

// The communicator's behaviours as collective scenarios: every rank calls the same
// function on its own communicator and gets "" (ok) or what went wrong. The in-process
// tests run them on one thread per rank; gdaki_comm_rank runs them in separate processes
// (through the unique-id / environment path and under mpirun), so every path checks the
// same facts.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gdaki/comm/communicator.hpp"
#include "gdaki/comm/device.hpp"
#include "gdaki/device/host_grid.hpp"

namespace comm_test {

namespace comm = gdaki::comm;
using gdaki::status;

constexpr uint64_t sec = 1'000'000'000ull;

inline std::string hex(uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), digits[v & 15]);
    v >>= 4;
  } while (v != 0);
  return s;
}

inline std::string fail(const comm::communicator& c, const std::string& what) {
  return "rank " + std::to_string(c.rank()) + ": " + what + (c.describe_error().empty() ? "" : " [" + c.describe_error() + "]");
}
#define COMM_CHECK(cond, c, what)                                     \
  do {                                                                 \
    if (!(cond)) return comm_test::fail(c, std::string(what) + " (" #cond ")"); \
  } while (0)
#define COMM_OK(expr, c)                                                                           \
  do {                                                                                             \
    const gdaki::status st_ = (expr);                                                              \
    if (st_ != gdaki::status::ok) return comm_test::fail(c, std::string(#expr) + " -> " + gdaki::to_string(st_)); \
  } while (0)

inline uint64_t word(int from, int to, uint64_t i) { return (uint64_t(from) << 48) ^ (uint64_t(to) << 32) ^ (i * 0x9e3779b9ull); }

// put (with signal inc) from every rank to every rank (self included), put_value with
// signal set, get with a counter, standalone signals (add, inc, set), flush, flush_async,
// counters, resets.
inline std::string every_operation(comm::communicator& c) {
  const comm::dev_comm& d = c.device();
  const int n = c.size(), me = c.rank();
  const auto& w = d.world;
  constexpr uint64_t block = 4096;
  const comm::window_t src = c.alloc_window(block * n);
  const comm::window_t dst = c.alloc_window(block * n);
  auto* s = static_cast<uint64_t*>(c.window_base(src));
  auto* t = static_cast<uint64_t*>(c.window_base(dst));
  for (int p = 0; p < n; ++p)
    for (uint64_t i = 0; i < block / 8; ++i) s[p * block / 8 + i] = word(me, p, i);
  c.barrier();
  // 1. put with signal inc: signal 0 counts arrivals.
  for (int p = 0; p < n; ++p)
    COMM_OK(comm::put(d, 0, w, p, dst, me * block, src, p * block, block, comm::signal_inc(0), comm::counter_inc(0)), c);
  COMM_OK(comm::wait_signal(d, 0, n, 64, 10 * sec), c);
  for (int p = 0; p < n; ++p)
    for (uint64_t i = 0; i < block / 8; ++i)
      COMM_CHECK(t[p * block / 8 + i] == word(p, me, i), c, "put data from rank " + std::to_string(p));
  COMM_OK(comm::wait_counter(d, 0, n, 56, 10 * sec), c);
  COMM_CHECK(comm::read_counter(d, 0) == uint64_t(n), c, "counter 0 counts every put once");
  c.barrier();
  // 2. put_value with signal set: signal 1 at the peer becomes 1000 + sender.
  COMM_OK(comm::put_value(d, 0, w, (me + 1) % n, dst, 8 * me, uint64_t{0xabc0000ull + me}, comm::signal_set(1, 1000 + me)),
          c);
  const int from = (me + n - 1) % n;
  COMM_OK(comm::wait_signal(d, 1, 1000 + from, 64, 10 * sec), c);
  COMM_CHECK(comm::read_signal(d, 1) == uint64_t(1000 + from), c, "signal set value");
  COMM_CHECK(t[from] == 0xabc0000ull + from, c, "put_value lands before its signal");
  c.barrier();
  // 3. standalone signals: every rank adds 5 then incs signal 2 at every rank; sets 3.
  for (int p = 0; p < n; ++p) {
    COMM_OK(comm::signal(d, 0, w, p, comm::signal_add(2, 5)), c);
    COMM_OK(comm::signal(d, 0, w, p, comm::signal_inc(2)), c);
  }
  COMM_OK(comm::signal(d, 0, w, (me + 1) % n, comm::signal_set(3, 77)), c);
  COMM_OK(comm::wait_signal(d, 2, 6ull * n, 64, 10 * sec), c);
  COMM_OK(comm::wait_signal(d, 3, 77, 64, 10 * sec), c);
  COMM_CHECK(comm::read_signal(d, 2) == 6ull * n, c, "add 5 + inc from every rank");
  COMM_CHECK(comm::read_signal(d, 2, 2) == (6ull * n) % 4, c, "read_signal masks to the bit width");
  COMM_OK(comm::flush(d, 0), c);
  c.barrier();
  // 4. get with a counter: read the peer's source block meant for me.
  std::memset(t, 0, block * n);
  const uint64_t before = comm::read_counter(d, 1);
  for (int p = 0; p < n; ++p) COMM_OK(comm::get(d, 0, w, p, dst, p * block, src, me * block, block, comm::counter_inc(1)), c);
  COMM_OK(comm::wait_counter(d, 1, before + n, 56, 10 * sec), c);
  for (int p = 0; p < n; ++p)
    for (uint64_t i = 0; i < block / 8; ++i) COMM_CHECK(t[p * block / 8 + i] == word(p, me, i), c, "get data");
  c.barrier();  // every rank has checked its get data before puts overwrite that region
  // 5. flush_async covers what was posted when it was taken.
  for (int p = 0; p < n; ++p) COMM_OK(comm::put(d, 0, w, p, dst, me * block, src, p * block, block), c);
  comm::flush_request req{};
  COMM_OK(comm::flush_async(d, 0, &req), c);
  status st = status::again;
  for (int i = 0; i < 10'000'000 && st == status::again; ++i) st = comm::test(d, req);
  COMM_CHECK(st == status::ok, c, "flush_async completes");
  c.barrier();
  // 6. resets.
  COMM_OK(comm::reset_signal(d, 2), c);
  COMM_CHECK(comm::read_signal(d, 2) == 0, c, "reset_signal");
  COMM_OK(comm::reset_counter(d, 0), c);
  COMM_CHECK(comm::read_counter(d, 0) == 0, c, "reset_counter");
  for (comm::signal_t k = 0; k < 4; ++k) COMM_OK(comm::reset_signal(d, k), c);
  c.barrier();
  c.free_window(dst);
  c.free_window(src);
  return "";
}

// The device barrier `iters` times: every rank bumps a counter at rank 0 (a remote signal
// add) before each barrier, and after it rank 0's signal must already hold every bump.
inline std::string barrier_many(comm::communicator& c, int iters) {
  const comm::dev_comm& d = c.device();
  const int n = c.size();
  for (int i = 0; i < iters; ++i) {
    COMM_OK(comm::signal(d, 0, d.world, 0, comm::signal_inc(5)), c);
    COMM_OK(comm::barrier(d, 0, d.world, 10 * sec), c);
    if (c.rank() == 0)
      COMM_CHECK(comm::read_signal(d, 5) >= uint64_t(n) * (i + 1), c,
                 "after barrier " + std::to_string(i) + " every rank's earlier signal is visible");
  }
  COMM_OK(comm::barrier(d, 0, d.world, 10 * sec), c);
  if (c.rank() == 0) COMM_CHECK(comm::read_signal(d, 5) == uint64_t(n) * iters, c, "signal total");
  c.barrier();
  COMM_OK(comm::reset_signal(d, 5), c);
  c.barrier();
  return "";
}

// put with signal, `iters` times from rank 0 to rank size-1 (or itself when alone): the
// receiver, whenever it sees signal value s, checks that the payload of put s-1 is fully
// there: the signal never overtakes its data or any earlier put's. It acknowledges s
// (signal 11 at the sender), and the sender reuses a slot only after its ack, so no put
// lands where the receiver is reading.
inline std::string put_signal_ordering(comm::communicator& c, int iters) {
  const comm::dev_comm& d = c.device();
  constexpr uint64_t slots = 16, words = 32;  // 256-byte payloads
  const comm::window_t win = c.alloc_window(slots * words * 8);
  const comm::window_t src = c.alloc_window(slots * words * 8);
  auto* mine = static_cast<uint64_t*>(c.window_base(win));
  auto* s = static_cast<uint64_t*>(c.window_base(src));
  const int sender = 0, receiver = c.size() - 1;
  c.barrier();
  std::string result;
  if (c.rank() == sender) {
    for (int i = 0; i < iters && result.empty(); ++i) {
      const uint64_t slot = i % slots;
      // Reuse of a source slot: only after the put that read it completed (counter 2).
      if (i >= int(slots)) {
        const status st = comm::wait_counter(d, 2, uint64_t(i - slots + 1), 56, 10 * sec);
        if (st != status::ok) result = fail(c, "wait_counter before reusing a source slot");
        // ... and only once the receiver has read that slot (its ack, signal 11), so no
        // put ever lands in a slot the receiver is reading.
        const status sa = comm::wait_signal(d, 11, uint64_t(i - slots + 1), 64, 60 * sec);
        if (sa != status::ok) result = fail(c, "wait for the receiver's ack");
      }
      for (uint64_t k = 0; k < words; ++k) s[slot * words + k] = uint64_t(i);
      const status st = comm::put(d, 0, d.world, receiver, win, slot * words * 8, src, slot * words * 8, words * 8,
                                  comm::signal_inc(4), comm::counter_inc(2));
      if (st != status::ok) result = fail(c, "put with signal " + std::to_string(i));
    }
  }
  if (c.rank() == receiver) {
    uint64_t seen = 0;
    uint64_t bad = 0;
    const uint64_t t0 = gdaki::dev::arch::clock_ns();
    uint32_t idle = 0;
    while (seen < uint64_t(iters)) {
      const uint64_t sig = comm::read_signal(d, 4);
      if (sig == seen) {
        if (gdaki::dev::arch::clock_ns() - t0 > 120 * sec) {
          result = fail(c, "signal stuck at " + std::to_string(sig));
          break;
        }
        // Yield after a short spin: on 2 cores this thread must not starve the engine
        // (this process's, or the peer's) that delivers the puts it waits for.
        gdaki::dev::arch::spin_pause(idle++);
        continue;
      }
      idle = 0;
      // Put sig-1 has landed (and, under the ack protocol, no later put to its slot).
      const uint64_t want = sig - 1, slot = want % slots;
      for (uint64_t k = 0; k < words; ++k) bad += mine[slot * words + k] != want;
      seen = sig;
      if (comm::signal(d, 0, d.world, sender, comm::signal_set(11, seen)) != status::ok) {
        result = fail(c, "ack");
        break;
      }
    }
    if (bad != 0 && result.empty()) result = fail(c, std::to_string(bad) + " payload words older than their signal");
  }
  c.barrier();
  COMM_OK(comm::flush(d, 0), c);
  c.barrier();
  COMM_OK(comm::reset_signal(d, 4), c);
  COMM_OK(comm::reset_signal(d, 11), c);
  COMM_OK(comm::reset_counter(d, 2), c);
  c.free_window(src);
  c.free_window(win);
  return result;
}

// Teams: even ranks by stride, and a colour split (rank % 2) ordered by descending key;
// rank translation both ways, a put addressed by team rank and a team barrier.
inline std::string teams(comm::communicator& c) {
  const comm::dev_comm& d = c.device();
  const int n = c.size(), me = c.rank();
  const comm::dev_team even = c.split_stride(0, 2, (n + 1) / 2);
  const comm::dev_team parity = c.split_colour(me % 2, -me);
  COMM_CHECK(even.rank == (me % 2 == 0 ? me / 2 : -1), c, "stride team rank");
  for (uint32_t r = 0; r < even.size; ++r) {
    COMM_CHECK(comm::team_to_world(even, int(r)) == int(2 * r), c, "stride team to world");
    COMM_CHECK(comm::world_to_team(even, int(2 * r)) == int(r), c, "world to stride team");
  }
  int members = 0;
  for (int r = 0; r < n; ++r) members += r % 2 == me % 2;
  COMM_CHECK(int(parity.size) == members, c, "colour team size");
  // Descending key = descending world rank: team rank 0 is the highest rank of my colour.
  int expect_rank = 0;
  for (int r = n - 1; r > me; --r) expect_rank += r % 2 == me % 2;
  COMM_CHECK(parity.rank == expect_rank, c, "colour team rank ordered by key");
  COMM_CHECK(comm::team_to_world(parity, parity.rank) == me, c, "colour team to world");
  COMM_CHECK(comm::world_to_team(parity, me) == parity.rank, c, "world to colour team");
  if (n > 1) COMM_CHECK(comm::world_to_team(parity, me % 2 == 0 ? 1 : 0) == -1, c, "a rank of the other colour is not a member");
  // A put to team rank 0 of my colour team, with a signal: it counts its members.
  const comm::window_t win = c.alloc_window(4096);
  COMM_OK(comm::put_value(d, 0, parity, 0, win, 8 * uint64_t(me), uint64_t(me + 1), comm::signal_inc(6)), c);
  COMM_OK(comm::barrier(d, 0, parity, 10 * sec), c);
  if (parity.rank == 0) COMM_CHECK(comm::read_signal(d, 6) == uint64_t(members), c, "team put reached team rank 0");
  if (even.rank >= 0) {
    for (int i = 0; i < 100; ++i) COMM_OK(comm::barrier(d, 0, even, 10 * sec), c);
  }
  c.barrier();
  COMM_OK(comm::reset_signal(d, 6), c);
  c.free_window(win);
  return "";
}

// A barrier makes this rank's own puts to itself visible too: a rank is a member of its
// team, and a put to self travels its loopback QP like any other (or, with self_direct,
// is done by the call itself). Large puts (256 KiB, so on the loopback QP the engine is
// still copying when the barrier is entered), to self, followed by a
// barrier of the world team and of a team of one (each rank alone in its colour), then
// every byte is read back at once.
inline std::string barrier_covers_puts_to_self(comm::communicator& c) {
  const comm::dev_comm& d = c.device();
  const int me = c.rank();
  const comm::dev_team alone = c.split_colour(me, 0);
  COMM_CHECK(alone.size == 1 && alone.rank == 0, c, "a colour of its own is a team of one");
  constexpr uint64_t half = 256 * 1024;
  const comm::window_t win = c.alloc_window(2 * half);
  auto* base = static_cast<uint8_t*>(c.window_base(win));
  for (int round = 0; round < 4; ++round) {
    const comm::dev_team& team = round % 2 == 0 ? d.world : alone;
    const uint8_t fill = static_cast<uint8_t>(0x10 * (round + 1) + me);
    std::memset(base, fill, half);
    std::memset(base + half, 0, half);
    c.barrier();
    COMM_OK(comm::put(d, 0, team, team.rank, win, half, win, 0, half), c);
    COMM_OK(comm::barrier(d, 0, team, 10 * sec), c);
    uint64_t stale = 0;
    for (uint64_t i = 0; i < half; ++i) stale += base[half + i] != fill;
    COMM_CHECK(stale == 0, c, std::to_string(stale) + " bytes of a put to self not yet landed after the " +
                                  (round % 2 == 0 ? "world" : "one-rank team") + " barrier");
    COMM_OK(comm::flush(d, 0), c);
  }
  c.barrier();
  c.free_window(win);
  return "";
}

// The ABI check, range and id errors (named in describe_error), the timeout form of a wait,
// and the raw QP escape hatch.
inline std::string errors_and_escape_hatch(comm::communicator& c) {
  comm::dev_comm& d = c.device();
  const auto& w = d.world;
  COMM_OK(comm::check_abi(&d), c);
  comm::dev_comm other = d;
  other.abi_version = comm::abi_version + 1;
  COMM_CHECK(comm::check_abi(&other) == status::invalid, c, "another ABI version is refused");
  other = d;
  other.abi_size = sizeof(comm::dev_comm) - 8;
  COMM_CHECK(comm::check_abi(&other) == status::invalid, c, "another ABI size is refused");
  COMM_CHECK(comm::check_abi(nullptr) == status::invalid, c, "null is refused");

  const comm::window_t win = c.alloc_window(8192);
  c.clear_error();
  COMM_CHECK(comm::put(d, 0, w, 0, win, 8000, win, 0, 200) == status::invalid, c, "a put past the window's end");
  std::string e = c.describe_error();
  COMM_CHECK(e.find("window " + std::to_string(win)) != std::string::npos && e.find("offset 8000") != std::string::npos &&
                 e.find("8192 bytes") != std::string::npos,
             c, "the range error names window, offset and size: '" + e + "'");
  c.clear_error();
  COMM_CHECK(comm::get(d, 0, w, 0, win, 0, win, uint64_t{1} << 40, 8) == status::invalid, c, "a get past the end");
  COMM_CHECK(comm::put(d, 0, w, c.size(), win, 0, win, 0, 8) == status::invalid, c, "peer out of range");
  c.clear_error();
  COMM_CHECK(comm::put(d, 0, w, 0, comm::max_windows - 1, 0, win, 0, 8) == status::invalid, c, "unregistered window");
  COMM_CHECK(c.describe_error().find("not registered") != std::string::npos, c, "names the unregistered window");
  c.clear_error();
  COMM_CHECK(comm::signal(d, 0, w, 0, comm::signal_inc(d.nsignals)) == status::invalid, c, "signal out of range");
  COMM_CHECK(comm::put(d, d.ncontexts, w, 0, win, 0, win, 0, 8) == status::invalid, c, "context out of range");
  c.clear_error();
  const uint64_t t0 = gdaki::dev::arch::clock_ns();
  COMM_CHECK(comm::wait_signal(d, 7, 1, 64, 50'000'000ull) == status::timeout, c, "a wait nobody satisfies times out");
  COMM_CHECK(gdaki::dev::arch::clock_ns() - t0 < 5 * sec, c, "within its bound");
  e = c.describe_error();
  COMM_CHECK(e.find("signal/counter 7") != std::string::npos && e.find("wanted 1") != std::string::npos, c,
             "the timeout names the signal and the value: '" + e + "'");
  c.clear_error();
  // Escape hatch: the raw QP to the next rank carries a plain ops.hpp put.
  const int to = (c.rank() + 1) % c.size();
  gdaki::dev::qp_handle* qp = comm::raw_qp(d, 0, to);
  COMM_CHECK(qp != nullptr && comm::raw_qp(d, d.ncontexts, 0) == nullptr, c, "raw_qp");
  auto* base = static_cast<uint64_t*>(c.window_base(win));
  base[0] = 0x5157ull + c.rank();
  c.barrier();
  uint64_t ticket = 0;
  const comm::dev_window& dw = d.windows[win];
  COMM_OK(gdaki::dev::put(*qp, {dw.peer_base[to] + 4096, dw.peer_rkey[to]}, {dw.local_base, dw.lkey}, 8, &ticket), c);
  COMM_OK(gdaki::dev::wait(*qp, ticket, 10 * sec), c);
  c.barrier();
  const int prev = (c.rank() + c.size() - 1) % c.size();
  COMM_CHECK(base[4096 / 8] == 0x5157ull + prev, c, "raw QP put landed");
  c.free_window(win);
  return "";
}

// Warp and block scope on host-grid threads: one block of 64 threads per rank; each
// thread puts its own word to the next rank (warp scope), the block bumps a signal once
// per thread (block scope signal, every thread its own), and the block barriers.
inline std::string scopes_on_host_grid(comm::communicator& c) {
  const comm::dev_comm& d = c.device();
  const int to = (c.rank() + 1) % c.size(), prev = (c.rank() + c.size() - 1) % c.size();
  const comm::window_t win = c.alloc_window(4096);
  const comm::window_t src = c.alloc_window(4096);
  auto* s = static_cast<uint64_t*>(c.window_base(src));
  for (int i = 0; i < 64; ++i) s[i] = (uint64_t(c.rank()) << 32) | uint64_t(i);
  c.barrier();
  std::vector<int> bad(64, 0);
  gdaki::dev::host::launch(1, 64, [&] {
    const uint32_t t = gdaki::dev::arch::thread_rank_in_block();
    // Odd lanes skip, to prove skipping lanes take part without posting.
    const uint32_t flags = t % 2 ? comm::skip : 0;
    if (comm::put<comm::scope_warp>(d, 0, d.world, to, win, 8 * t, src, 8 * t, 8, comm::no_signal(), comm::no_counter(),
                                    flags) != status::ok)
      bad[t] = 1;
    if (comm::signal<comm::scope_block>(d, 0, d.world, to, comm::signal_inc(8)) != status::ok) bad[t] = 2;
    if (comm::flush<comm::scope_block>(d, 0) != status::ok) bad[t] = 3;
    if (comm::barrier<comm::scope_block>(d, 0, d.world, 10 * sec) != status::ok) bad[t] = 4;
    if (comm::wait_signal<comm::scope_warp>(d, 8, 64, 64, 10 * sec) != status::ok) bad[t] = 5;
  });
  for (int t = 0; t < 64; ++t) COMM_CHECK(bad[t] == 0, c, "thread " + std::to_string(t) + " step " + std::to_string(bad[t]));
  const auto* got = static_cast<const uint64_t*>(c.window_base(win));
  for (int t = 0; t < 64; ++t) {
    const uint64_t want = t % 2 ? 0 : ((uint64_t(prev) << 32) | uint64_t(t));
    COMM_CHECK(got[t] == want, c, "warp-scope put of thread " + std::to_string(t));
  }
  COMM_CHECK(comm::read_signal(d, 8) == 64, c, "64 block-scope signal incs");
  c.barrier();
  // Lanes of one warp addressing different peers: thread t puts to rank t % n (the
  // collective post must split by QP, or words land on the wrong rank or fail).
  const int n = c.size(), me = c.rank();
  gdaki::dev::host::launch(1, 64, [&] {
    const uint32_t t = gdaki::dev::arch::thread_rank_in_block();
    if (comm::put<comm::scope_warp>(d, 0, d.world, int(t) % n, win, 8 * (64 + 64 * uint64_t(me) + t), src, 8 * t, 8,
                                    comm::signal_inc(10)) != status::ok)
      bad[t] = 6;
  });
  int mine_count = 0;
  for (int t = 0; t < 64; ++t) mine_count += t % n == me;
  COMM_OK(comm::wait_signal(d, 10, uint64_t(mine_count) * n, 64, 10 * sec), c);
  for (int t = 0; t < 64; ++t) COMM_CHECK(bad[t] == 0, c, "mixed-peer warp put of thread " + std::to_string(t));
  for (int r = 0; r < n; ++r)
    for (int t = 0; t < 64; ++t)
      if (t % n == me)
        COMM_CHECK(got[64 + 64 * r + t] == ((uint64_t(r) << 32) | uint64_t(t)), c,
                   "mixed-peer warp put from rank " + std::to_string(r) + " thread " + std::to_string(t) + " (read 0x" +
                       hex(got[64 + 64 * r + t]) + ", signal 10 = " + std::to_string(comm::read_signal(d, 10)) + ")");
  COMM_OK(comm::flush(d, 0), c);
  c.barrier();
  COMM_OK(comm::reset_signal(d, 10), c);
  COMM_OK(comm::reset_signal(d, 8), c);
  c.free_window(src);
  c.free_window(win);
  return "";
}

// The symmetric heap: same offsets everywhere, put into a heap allocation, free and reuse.
inline std::string heap(comm::communicator& c) {
  const comm::dev_comm& d = c.device();
  const comm::sym_ptr a = c.heap_alloc(100);
  const comm::sym_ptr b = c.heap_alloc(5000);
  COMM_CHECK(a.offset == 0 && b.offset == 128, c, "heap offsets are deterministic and 64-byte aligned");
  auto* bl = static_cast<uint64_t*>(c.local(b));
  bl[0] = 0;
  auto* al = static_cast<uint64_t*>(c.local(a));
  al[0] = 0x4ea9ull + c.rank();
  c.barrier();
  const int to = (c.rank() + 1) % c.size();
  COMM_OK(comm::put(d, 0, d.world, to, b.window, b.offset, a.window, a.offset, 8, comm::signal_inc(9)), c);
  COMM_OK(comm::wait_signal(d, 9, 1, 64, 10 * sec), c);
  COMM_CHECK(bl[0] == 0x4ea9ull + (c.rank() + c.size() - 1) % c.size(), c, "heap put");
  c.barrier();
  c.heap_free(a);
  const comm::sym_ptr a2 = c.heap_alloc(64);
  COMM_CHECK(a2.offset == 0, c, "a freed block is reused");
  c.heap_free(a2);
  c.heap_free(b);
  COMM_OK(comm::reset_signal(d, 9), c);
  c.barrier();
  return "";
}

}  // namespace comm_test

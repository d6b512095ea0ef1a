// Kernel bodies of the device-API tests: the functions every thread of a launch runs.
// They are plain GDAKI_HD functions over plain-data argument structs, so the same source
// runs on CPU threads through gdaki::dev::host::launch against the soft NIC (the device
// tests) and compiles inside __global__ kernels with nvcc (device_kernels_check.cu).
// Kernels never assert: they record statuses, old values and mismatch counts in
// host-visible logs, and the host side of each test checks them exactly.
#pragma once

#include <cstdint>

#include "gdaki/device/ops.hpp"

namespace device_test {

using gdaki::status;
using gdaki::dev::local_ptr;
using gdaki::dev::qp_handle;
using gdaki::dev::remote_ptr;
using gdaki::dev::sharing;
namespace arch = gdaki::dev::arch;
namespace dev = gdaki::dev;

// ---------------------------------------------------------------------------------------
// Shared helpers (host and device)
// ---------------------------------------------------------------------------------------

GDAKI_HD inline uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The byte a thread writes at offset i of the buffer of its op `op` (never 0 for i == 0,
// so a missing first byte is always visible).
GDAKI_HD inline uint8_t pattern(uint32_t thread, uint32_t op, uint64_t i) {
  return static_cast<uint8_t>((thread * 131u + op * 29u + static_cast<uint32_t>(i) * 7u + (static_cast<uint32_t>(i) >> 8)) | (i == 0 ? 1u : 0u));
}

// The bytes the host pre-fills in the peer's "known" region (read back by gets).
GDAKI_HD inline uint8_t known_byte(uint64_t off) { return static_cast<uint8_t>(off * 13u + (off >> 8) * 7u + 1u); }

GDAKI_HD inline uint32_t global_thread() {
  return arch::block_rank_in_grid() * arch::threads_in_block() + arch::thread_rank_in_block();
}
GDAKI_HD inline uint32_t warps_per_block() { return (arch::threads_in_block() + arch::warp_size - 1) / arch::warp_size; }
GDAKI_HD inline uint32_t global_warp() {
  return arch::block_rank_in_grid() * warps_per_block() + arch::thread_rank_in_block() / arch::warp_size;
}

GDAKI_HD inline void fill(uint64_t addr, uint32_t thread, uint32_t op, uint64_t bytes) {
  auto* p = reinterpret_cast<uint8_t*>(addr);
  for (uint64_t i = 0; i < bytes; ++i) p[i] = pattern(thread, op, i);
}
// Number of bytes of [addr, addr + bytes) that differ from pattern(thread, op, .).
GDAKI_HD inline uint32_t mismatches(uint64_t addr, uint32_t thread, uint32_t op, uint64_t bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(addr);
  uint32_t bad = 0;
  for (uint64_t i = 0; i < bytes; ++i) bad += p[i] != pattern(thread, op, i) ? 1u : 0u;
  return bad;
}

// Which QP a thread posts on, for a scope x sharing combination: exclusive sharing gives
// every poster (thread, warp or block) its own QP; block sharing one QP per block; grid
// sharing one QP for the whole grid.
template <typename Scope, sharing S>
GDAKI_HD inline uint32_t qp_index() {
  if constexpr (S == sharing::grid) {
    return 0;
  } else if constexpr (S == sharing::block) {
    return arch::block_rank_in_grid();
  } else if constexpr (std::is_same_v<Scope, dev::scope_thread>) {
    return global_thread();
  } else if constexpr (std::is_same_v<Scope, dev::scope_warp>) {
    return global_warp();
  } else {
    return arch::block_rank_in_grid();
  }
}

// ---------------------------------------------------------------------------------------
// 1. Every operation at one scope x sharing combination
// ---------------------------------------------------------------------------------------

// Peer words of the matrix kernel (8 bytes each, in the peer's registered memory).
namespace matrix_word {
inline constexpr uint32_t fa_counter = 0;    // every thread fetch-adds (thread + 1)
inline constexpr uint32_t signal_add = 1;    // every non-skipping thread signal-adds 1
inline constexpr uint32_t ps_counter = 2;    // every thread's put_signal adds 1
inline constexpr uint32_t per_thread = 8;    // then 4 words per thread: set signal, CAS, FA, spare
}  // namespace matrix_word

// Steps of the matrix kernel, in the order they run; each records its status.
namespace matrix_step {
enum : uint32_t {
  put_post, put_wait, p_post, p_wait, get_post, get_wait, get_bad,  // get_bad: mismatching bytes
  fa_post, fa_wait, cas_post, cas_wait, cas_fail_wait, fa_wait_call, signal_add_post, signal_set_post,
  put_signal_post, put_signal_wait, fence_call, quiet_call, test_after_quiet, count
};
}
// Per-thread values the host checks besides the statuses.
namespace matrix_value {
enum : uint32_t { fa_old, cas_old, cas_fail_old, fa_wait_old, skipped_signal, count };
}

struct matrix_args {
  qp_handle* qps;        // the QPs (indexed by qp_index<Scope, S>())
  local_ptr src;         // per thread: region_bytes of source data
  local_ptr got;         // per thread: region_bytes receiving the get
  local_ptr results;     // per thread: 4 result words (8 bytes each, LOCAL_WRITE)
  remote_ptr dst;        // peer: per thread region_bytes (put at 0, p at 1024, put_signal at 2048)
  remote_ptr words;      // peer: matrix_word layout
  uint32_t region_bytes;
  uint64_t* steps;       // per thread matrix_step::count statuses
  uint64_t* values;      // per thread matrix_value::count values
  uint64_t timeout_ns;
};

GDAKI_HD inline uint32_t matrix_put_bytes(uint32_t thread) { return 8u + (thread * 40u) % 1000u; }

template <typename Scope, sharing S>
GDAKI_HD inline void matrix_kernel(const matrix_args& a) {
  using namespace gdaki::dev;
  const uint32_t t = global_thread();
  qp_handle& qp = a.qps[qp_index<Scope, S>()];
  uint64_t* st = a.steps + static_cast<uint64_t>(t) * matrix_step::count;
  uint64_t* val = a.values + static_cast<uint64_t>(t) * matrix_value::count;
  const uint64_t region = static_cast<uint64_t>(t) * a.region_bytes;
  const uint32_t bytes = matrix_put_bytes(t);
  const local_ptr src{a.src.addr + region, a.src.lkey};
  const local_ptr got{a.got.addr + region, a.got.lkey};
  const remote_ptr dst{a.dst.addr + region, a.dst.rkey};
  auto word = [&](uint32_t i) { return remote_ptr{a.words.addr + 8ull * i, a.words.rkey}; };
  auto mine = [&](uint32_t i) { return word(matrix_word::per_thread + 4 * t + i); };
  auto result = [&](uint32_t i) { return local_ptr{a.results.addr + 32ull * t + 8ull * i, a.results.lkey}; };
  auto result_value = [&](uint32_t i) { return arch::load_acquire(reinterpret_cast<const uint64_t*>(result(i).addr)); };
  uint64_t tk = 0;

  fill(src.addr, t, 0, bytes);
  st[matrix_step::put_post] = static_cast<uint64_t>(put<Scope, S>(qp, dst, src, bytes, &tk));
  st[matrix_step::put_wait] = static_cast<uint64_t>(wait(qp, tk, a.timeout_ns));

  // Inline: the value lives on the stack and is overwritten right after p returns.
  uint64_t v = 0x5050000000000000ull | t;
  st[matrix_step::p_post] = static_cast<uint64_t>(p<Scope, S>(qp, {dst.addr + 1024, dst.rkey}, &v, 8, &tk));
  v = 0;
  st[matrix_step::p_wait] = static_cast<uint64_t>(wait(qp, tk, a.timeout_ns));

  // Read back what our put placed.
  st[matrix_step::get_post] = static_cast<uint64_t>(get<Scope, S>(qp, got, dst, bytes, &tk));
  st[matrix_step::get_wait] = static_cast<uint64_t>(wait(qp, tk, a.timeout_ns));
  st[matrix_step::get_bad] = mismatches(got.addr, t, 0, bytes);

  st[matrix_step::fa_post] =
      static_cast<uint64_t>(atomic_fetch_add<Scope, S>(qp, word(matrix_word::fa_counter), t + 1, result(0), &tk));
  st[matrix_step::fa_wait] = static_cast<uint64_t>(wait(qp, tk, a.timeout_ns));
  val[matrix_value::fa_old] = result_value(0);

  // CAS on our own word (0 -> t + 1 succeeds), then a failing CAS (compare 0 again).
  st[matrix_step::cas_post] =
      static_cast<uint64_t>(atomic_compare_swap<Scope, S>(qp, mine(1), 0, t + 1, result(1), &tk));
  st[matrix_step::cas_wait] = static_cast<uint64_t>(wait(qp, tk, a.timeout_ns));
  val[matrix_value::cas_old] = result_value(1);
  uint64_t old = ~0ull;
  st[matrix_step::cas_fail_wait] = static_cast<uint64_t>(
      atomic_compare_swap_wait<Scope, S>(qp, mine(1), 0, 7, result(2), &old, a.timeout_ns));
  val[matrix_value::cas_fail_old] = old;
  old = ~0ull;
  st[matrix_step::fa_wait_call] =
      static_cast<uint64_t>(atomic_fetch_add_wait<Scope, S>(qp, mine(2), 1000 + t, result(3), &old, a.timeout_ns));
  val[matrix_value::fa_wait_old] = old;

  // Signals: collective scopes let every 7th thread skip (it still takes part).
  const bool skip = !std::is_same_v<Scope, scope_thread> && t % 7 == 5;
  val[matrix_value::skipped_signal] = skip ? 1 : 0;
  st[matrix_step::signal_add_post] = static_cast<uint64_t>(signal<Scope, S>(
      qp, word(matrix_word::signal_add), signal_op::add, 1, &tk, skip ? op_flags::skip : op_flags::none));
  st[matrix_step::signal_set_post] =
      static_cast<uint64_t>(signal<Scope, S>(qp, mine(0), signal_op::set, 0xabc0000000000000ull | t, &tk));

  fill(src.addr + 2048, t, 1, bytes);
  st[matrix_step::put_signal_post] = static_cast<uint64_t>(put_signal<Scope, S>(
      qp, {dst.addr + 2048, dst.rkey}, {src.addr + 2048, src.lkey}, bytes, word(matrix_word::ps_counter),
      signal_op::add, 1, &tk));
  st[matrix_step::put_signal_wait] = static_cast<uint64_t>(wait(qp, tk, a.timeout_ns));

  st[matrix_step::fence_call] = static_cast<uint64_t>(fence<Scope, S>(qp));
  st[matrix_step::quiet_call] = static_cast<uint64_t>(quiet<Scope, S>(qp, a.timeout_ns));
  st[matrix_step::test_after_quiet] = static_cast<uint64_t>(test(qp, tk));
}

// ---------------------------------------------------------------------------------------
// 2. put_signal ordering: a reader that sees the signal sees the data
// ---------------------------------------------------------------------------------------

struct ordering_args {
  qp_handle* qp;
  local_ptr src;          // slots * slot_bytes of source data (writer's side)
  remote_ptr dst;         // slots * slot_bytes at the peer
  remote_ptr sig;         // the peer's signal word: iterations published so far
  uint64_t* ack;          // reader -> writer: iterations checked so far (flow control)
  uint32_t iterations;
  uint32_t slots;         // iteration i uses slot i % slots
  uint32_t slot_bytes;    // >= 1024, multiple of 8
  uint64_t* report;       // [0] post errors, [1] first bad iteration + 1, [2] bad iterations,
                          // [3] quiet status, [4] reads of the signal word by the reader
  uint64_t timeout_ns;
};

// The 8-byte words of iteration i's data: word 0 is i itself, the rest depend on i and w.
GDAKI_HD inline uint64_t ordering_word(uint64_t i, uint64_t w) { return w == 0 ? i : mix64(i * 4096 + w); }
// Iteration i sends 8 << (i % 8) bytes (8 .. 1024).
GDAKI_HD inline uint32_t ordering_bytes(uint64_t i) { return 8u << (i % 8); }

// Thread 0 writes, thread 1 reads (launch one block of two threads).
GDAKI_HD inline void ordering_kernel(const ordering_args& a) {
  using namespace gdaki::dev;
  const uint32_t t = arch::thread_rank_in_block();
  if (t == 0) {
    uint64_t errors = 0;
    for (uint32_t i = 0; i < a.iterations; ++i) {
      // Flow control: slot i % slots is free once the reader checked iteration i - slots.
      for (uint32_t n = 0; arch::load_acquire(a.ack) + a.slots <= i; ++n) arch::spin_pause(n);
      const uint64_t off = static_cast<uint64_t>(i % a.slots) * a.slot_bytes;
      auto* words = reinterpret_cast<uint64_t*>(a.src.addr + off);
      const uint32_t bytes = ordering_bytes(i);
      for (uint32_t w = 0; w < bytes / 8; ++w) words[w] = ordering_word(i, w);
      // Odd iterations add 1, even ones set i + 1: either way the word reads i + 1 after.
      uint64_t tk;
      const status s = (i & 1) ? put_signal<scope_thread, sharing::exclusive>(
                                     *a.qp, {a.dst.addr + off, a.dst.rkey}, {a.src.addr + off, a.src.lkey}, bytes,
                                     a.sig, signal_op::add, 1, &tk, op_flags::none, a.timeout_ns)
                               : put_signal<scope_thread, sharing::exclusive>(
                                     *a.qp, {a.dst.addr + off, a.dst.rkey}, {a.src.addr + off, a.src.lkey}, bytes,
                                     a.sig, signal_op::set, i + 1ull, &tk, op_flags::none, a.timeout_ns);
      if (s != status::ok) {
        ++errors;
        break;
      }
    }
    a.report[0] = errors;
    a.report[3] = static_cast<uint64_t>(quiet<scope_thread, sharing::exclusive>(*a.qp, a.timeout_ns));
  } else if (t == 1) {
    const auto* sig = reinterpret_cast<const uint64_t*>(a.sig.addr);
    uint64_t next = 0, bad = 0, first_bad = 0, reads = 0;
    uint64_t t0 = arch::clock_ns();
    for (uint32_t n = 0; next < a.iterations;) {
      const uint64_t s = arch::load_acquire(sig);
      ++reads;
      if (s <= next) {
        // Poll hard right after an ack (the signal is due), then back off to yielding.
        if ((n & 1023) == 1023 && arch::clock_ns() - t0 > a.timeout_ns) break;  // writer failed
        arch::spin_pause(n++);
        continue;
      }
      n = 0;
      t0 = arch::clock_ns();
      // Newest first: the iteration just signalled is the one a reordering would hit.
      for (uint64_t j = s; j-- > next;) {
        const auto* words = reinterpret_cast<const uint64_t*>(a.dst.addr + (j % a.slots) * a.slot_bytes);
        bool ok = true;
        for (uint32_t w = 0; w < ordering_bytes(j) / 8; ++w) ok = ok && words[w] == ordering_word(j, w);
        if (!ok) {
          ++bad;
          if (first_bad == 0) first_bad = j + 1;
        }
      }
      next = s;
      arch::store_release(a.ack, next);
    }
    a.report[1] = first_bad;
    a.report[2] = bad + (a.iterations - next);  // iterations never seen count as bad
    a.report[4] = reads;
  }
}

// ---------------------------------------------------------------------------------------
// 3. Random operations from every thread of the grid on one grid-shared QP
// ---------------------------------------------------------------------------------------

namespace stress_kind {
enum : uint32_t { put, p, get, fetch_add, cas, signal_add, signal_set, put_signal_add, put_signal_set, skip, count };
}
namespace stress_scope {
enum : uint32_t { thread, warp, block };
}

// What one (thread, op) did; the host checks every field.
struct stress_record {
  uint32_t kind;      // stress_kind
  uint32_t scope;     // stress_scope
  uint32_t size;      // bytes (put, p, get, put_signal)
  uint32_t bad;       // get: mismatching bytes after the wait
  uint32_t post;      // status of the posting call
  uint32_t settle;    // status of the wait that settled its ticket
  uint32_t signaled;  // signalled WQEs it posted (CQEs it produces)
  uint32_t word;      // fetch_add: which counter
  uint64_t a;         // fetch_add: addend; cas: compare; signal: value; get: source offset
  uint64_t b;         // cas: swap
  uint64_t old;       // fetch_add / cas: the old value returned
};

// Peer words of the stress kernel.
namespace stress_word {
inline constexpr uint32_t fa_counters = 0;  // 4 counters
inline constexpr uint32_t fa_counter_count = 4;
inline constexpr uint32_t cas = 4;
inline constexpr uint32_t signal_add = 5;
inline constexpr uint32_t ps_add = 6;
inline constexpr uint32_t per_thread = 8;  // one "set" word per thread
}  // namespace stress_word

struct stress_args {
  qp_handle* qp;
  uint32_t ops;         // operations per thread
  uint32_t slot_bytes;  // per (thread, op) slot in src, got, dst
  local_ptr src;        // threads * ops slots
  local_ptr got;        // threads * ops slots
  local_ptr results;    // threads * ops result words
  remote_ptr dst;       // threads * ops slots
  remote_ptr known;     // known_bytes of known_byte(offset)
  uint64_t known_bytes;
  remote_ptr words;     // stress_word layout
  stress_record* log;   // threads * ops
  uint32_t* final_quiet;  // per thread: status of its closing quiet
  uint64_t seed;
  uint64_t timeout_ns;
};

// Operation sizes: puts and gets up to a slot, inline puts up to max_inline (2..4 WQEBBs).
GDAKI_HD inline uint32_t stress_size(uint64_t r, uint32_t kind, uint32_t slot_bytes, uint32_t max_inline, bool collective) {
  if (kind == stress_kind::p) {
    const uint32_t cap = collective ? 60u : max_inline;  // collective batches stay <= half the ring
    return 1u + static_cast<uint32_t>(r % cap);
  }
  switch (r % 6) {
    case 0: return 0;  // a zero-length WRITE / READ
    case 1: return 1;
    case 2: return 8;
    case 3: return 64;
    case 4: return 100 + static_cast<uint32_t>((r >> 8) % 200);
    default: return slot_bytes;
  }
}

GDAKI_HD inline void stress_kernel(const stress_args& a) {
  using namespace gdaki::dev;
  qp_handle& qp = *a.qp;
  const uint32_t t = global_thread();
  constexpr uint32_t window = 4;
  uint64_t pending_ticket[window];
  uint32_t pending_op[window];
  uint32_t npending = 0;
  uint64_t cas_guess = 0;
  auto slot = [&](uint32_t k) { return (static_cast<uint64_t>(t) * a.ops + k) * a.slot_bytes; };
  auto settle = [&](uint32_t k, uint64_t ticket) {
    stress_record& r = a.log[static_cast<uint64_t>(t) * a.ops + k];
    if (r.kind == stress_kind::put && r.scope == stress_scope::thread && r.signaled == 0) {
      // An unsignalled put is settled with quiet, as device-api.md says: its ticket
      // completes only once a later CQE covers it, and a straggler whose unsignalled put
      // is the QP's last WQE would wait for one that never comes (seen in CI: one thread
      // of 512, the others done, waited out its 60 s). The quiet's NOP asks for the CQE.
      r.settle = static_cast<uint32_t>(quiet<scope_thread, sharing::grid>(qp, a.timeout_ns));
      r.signaled = 1;
    } else {
      r.settle = static_cast<uint32_t>(wait(qp, ticket, a.timeout_ns));
    }
    const uint64_t res = a.results.addr + (static_cast<uint64_t>(t) * a.ops + k) * 8;
    if (r.kind == stress_kind::get) {
      const auto* g = reinterpret_cast<const uint8_t*>(a.got.addr + slot(k));
      uint32_t bad = 0;
      for (uint32_t i = 0; i < r.size; ++i) bad += g[i] != known_byte(r.a + i) ? 1u : 0u;
      r.bad = bad;
    } else if (r.kind == stress_kind::fetch_add || r.kind == stress_kind::cas) {
      r.old = arch::load_acquire(reinterpret_cast<const uint64_t*>(res));
      if (r.kind == stress_kind::cas) cas_guess = r.old == r.a ? r.b : r.old;
    }
  };

  for (uint32_t k = 0; k < a.ops; ++k) {
    // The scope is uniform over the grid for a given k (collective calls need every lane /
    // thread); the op kind is uniform over the warp or block for collective scopes.
    const uint32_t scope = k % 16 == 13 ? stress_scope::block : k % 8 == 5 ? stress_scope::warp : stress_scope::thread;
    const uint64_t rt = mix64(a.seed ^ (uint64_t{t} << 32) ^ k);
    const uint64_t ru = mix64(a.seed ^ 0x5eed ^ (scope == stress_scope::block ? uint64_t{arch::block_rank_in_grid()} << 40
                                                                             : uint64_t{global_warp()} << 40) ^ k);
    uint32_t kind = static_cast<uint32_t>((scope == stress_scope::thread ? rt : ru) % (stress_kind::count - 1));
    if (scope == stress_scope::block && (kind == stress_kind::p || kind == stress_kind::put_signal_add ||
                                         kind == stress_kind::put_signal_set)) {
      kind = stress_kind::get;  // block batches: 1-WQEBB ops only, so 64 threads fit half the ring
    }
    const bool collective = scope != stress_scope::thread;
    const bool skip = collective && (rt >> 40) % 6 == 0;
    stress_record& r = a.log[static_cast<uint64_t>(t) * a.ops + k];
    r = stress_record{};
    r.kind = skip ? static_cast<uint32_t>(stress_kind::skip) : kind;
    r.scope = scope;
    const uint32_t max_inline = qp.max_inline < 200 ? qp.max_inline : 200;
    r.size = stress_size(rt >> 8, kind, a.slot_bytes, max_inline, collective);
    const uint32_t flags = (skip ? op_flags::skip : 0) |
                           (scope == stress_scope::thread && kind == stress_kind::put && (rt >> 50) % 8 == 0
                                ? op_flags::unsignaled
                                : 0) |
                           ((rt >> 53) % 16 == 0 ? op_flags::fence : 0);
    const remote_ptr dst{a.dst.addr + slot(k), a.dst.rkey};
    const local_ptr src{a.src.addr + slot(k), a.src.lkey};
    const local_ptr res{a.results.addr + (static_cast<uint64_t>(t) * a.ops + k) * 8, a.results.lkey};
    auto word = [&](uint32_t i) { return remote_ptr{a.words.addr + 8ull * i, a.words.rkey}; };
    uint8_t inline_buf[256];
    uint64_t tk = 0;
    status ps = status::ok;
    // One call per kind; for collective scopes every lane makes the same call.
    auto post_kind = [&](auto scope_tag) {
      using Scope = decltype(scope_tag);
      switch (kind) {
        case stress_kind::put:
          if (!skip) fill(src.addr, t, k, r.size);
          r.signaled = (skip || (flags & op_flags::unsignaled)) ? 0 : 1;
          ps = put<Scope, sharing::grid>(qp, dst, src, r.size, &tk, flags, a.timeout_ns);
          break;
        case stress_kind::p:
          for (uint32_t i = 0; i < r.size; ++i) inline_buf[i] = pattern(t, k, i);
          r.signaled = skip ? 0 : 1;
          ps = p<Scope, sharing::grid>(qp, dst, inline_buf, r.size, &tk, flags, a.timeout_ns);
          for (uint32_t i = 0; i < r.size; ++i) inline_buf[i] = 0;  // p copied it into the WQE
          break;
        case stress_kind::get:
          r.a = (rt >> 20) % (a.known_bytes - a.slot_bytes);
          r.signaled = skip ? 0 : 1;
          ps = get<Scope, sharing::grid>(qp, {a.got.addr + slot(k), a.got.lkey}, {a.known.addr + r.a, a.known.rkey},
                                         r.size, &tk, flags, a.timeout_ns);
          break;
        case stress_kind::fetch_add:
          r.word = static_cast<uint32_t>((rt >> 30) % stress_word::fa_counter_count);
          r.a = 1 + (rt >> 33) % 1000;
          r.signaled = skip ? 0 : 1;
          ps = atomic_fetch_add<Scope, sharing::grid>(qp, word(stress_word::fa_counters + r.word), r.a, res, &tk, flags,
                                                      a.timeout_ns);
          break;
        case stress_kind::cas:
          r.a = cas_guess;
          r.b = (uint64_t{t + 1} << 32) | (k + 1);  // unique, never 0
          r.signaled = skip ? 0 : 1;
          ps = atomic_compare_swap<Scope, sharing::grid>(qp, word(stress_word::cas), r.a, r.b, res, &tk, flags,
                                                         a.timeout_ns);
          break;
        case stress_kind::signal_add:
          r.a = 1 + (rt >> 33) % 100;
          r.signaled = skip ? 0 : 1;
          ps = signal<Scope, sharing::grid>(qp, word(stress_word::signal_add), signal_op::add, r.a, &tk, flags,
                                            a.timeout_ns);
          break;
        case stress_kind::signal_set:
          r.a = (uint64_t{t + 1} << 32) | (k + 1);
          r.signaled = skip ? 0 : 1;
          ps = signal<Scope, sharing::grid>(qp, word(stress_word::per_thread + t), signal_op::set, r.a, &tk, flags,
                                            a.timeout_ns);
          break;
        case stress_kind::put_signal_add:
        case stress_kind::put_signal_set: {
          const bool add = kind == stress_kind::put_signal_add;
          if (!skip) fill(src.addr, t, k, r.size);
          r.a = add ? 1 + (rt >> 33) % 100 : (uint64_t{t + 1} << 32) | (k + 1);
          r.signaled = skip ? 0 : 1;
          ps = put_signal<Scope, sharing::grid>(qp, dst, src, r.size,
                                                word(add ? stress_word::ps_add : stress_word::per_thread + t),
                                                add ? signal_op::add : signal_op::set, r.a, &tk, flags, a.timeout_ns);
          break;
        }
        default:
          break;
      }
    };
    if (scope == stress_scope::thread) {
      post_kind(scope_thread{});
    } else if (scope == stress_scope::warp) {
      post_kind(scope_warp{});
    } else {
      post_kind(scope_block{});
    }
    r.post = static_cast<uint32_t>(ps);
    if (ps != status::ok) {
      r.settle = static_cast<uint32_t>(status::invalid);
      continue;
    }
    // Results are needed now for gets and atomics half of the time; otherwise the ticket
    // joins a small window settled later (oldest first).
    const bool now = (kind == stress_kind::cas) || ((rt >> 58) & 1);
    if (now) {
      settle(k, tk);
      continue;
    }
    if (npending == window) {
      settle(pending_op[0], pending_ticket[0]);
      for (uint32_t i = 1; i < window; ++i) {
        pending_op[i - 1] = pending_op[i];
        pending_ticket[i - 1] = pending_ticket[i];
      }
      --npending;
    }
    pending_op[npending] = k;
    pending_ticket[npending] = tk;
    ++npending;
  }
  for (uint32_t i = 0; i < npending; ++i) settle(pending_op[i], pending_ticket[i]);
  a.final_quiet[t] = static_cast<uint32_t>(quiet<scope_thread, sharing::grid>(qp, a.timeout_ns));
}

// ---------------------------------------------------------------------------------------
// 4. Operations that never complete, and an inline put with a bad length in a warp call
// ---------------------------------------------------------------------------------------

struct stuck_args {
  qp_handle* qp;
  local_ptr src;
  remote_ptr dst;
  remote_ptr sig;
  uint64_t bytes;
  uint64_t timeout_ns;
  uint64_t* out;  // [0] post status, [1] wait status, [2] elapsed ns, [3] ticket
};

// put_signal, then a bounded wait on its ticket (thread 0 of a one-thread launch).
GDAKI_HD inline void stuck_kernel(const stuck_args& a) {
  using namespace gdaki::dev;
  uint64_t tk = 0;
  a.out[0] = static_cast<uint64_t>(put_signal<scope_thread, sharing::grid>(*a.qp, a.dst, a.src, a.bytes, a.sig,
                                                                           signal_op::set, 1, &tk));
  a.out[3] = tk;
  const uint64_t t0 = arch::clock_ns();
  a.out[1] = static_cast<uint64_t>(wait(*a.qp, tk, a.timeout_ns));
  a.out[2] = arch::clock_ns() - t0;
}

// Every lane of a warp calls p; lane `bad_lane` passes a length above max_inline. Only it
// gets invalid; the others post (the collective exchange must not hang on it).
GDAKI_HD inline void bad_inline_lane_kernel(qp_handle* qp, remote_ptr dst, uint32_t bad_lane, uint64_t* out) {
  using namespace gdaki::dev;
  const uint32_t lane = arch::lane_id();
  uint8_t buf[64] = {};
  for (uint32_t i = 0; i < 8; ++i) buf[i] = static_cast<uint8_t>(lane + 1);
  const uint32_t len = lane == bad_lane ? qp->max_inline + 1 : 8;
  uint64_t tk = 0;
  const status s = p<scope_warp, sharing::exclusive>(*qp, {dst.addr + 8ull * lane, dst.rkey}, buf, len, &tk);
  out[2 * lane] = static_cast<uint64_t>(s);
  out[2 * lane + 1] = s == status::ok ? static_cast<uint64_t>(wait(*qp, tk, 5'000'000'000ull)) : 0;
}

// A warp or block call whose lanes pass two different QP handles: odd lanes pass qps[1]
// (or, with only_a_skipper, lane 5 alone does, and skips). Each lane records its status.
template <typename Scope>
GDAKI_HD inline void disagreeing_qp_kernel(qp_handle* qps, remote_ptr dst, bool only_a_skipper, uint64_t* out) {
  using namespace gdaki::dev;
  const uint32_t me = std::is_same_v<Scope, scope_warp> ? arch::lane_id() : arch::thread_rank_in_block();
  const bool other = only_a_skipper ? me == 5 : (me & 1) != 0;
  const uint32_t flags = only_a_skipper && me == 5 ? op_flags::skip : op_flags::none;
  const uint64_t value = 0x7700000000000000ull | me;
  uint64_t tk = 0;
  out[me] = static_cast<uint64_t>(p<Scope, sharing::grid>(qps[other ? 1 : 0], {dst.addr + 8ull * me, dst.rkey}, &value,
                                                          8, &tk, flags, 5'000'000'000ull));
}

// ---------------------------------------------------------------------------------------
// Deferred doorbells (op_flags::defer, submit)
// ---------------------------------------------------------------------------------------

struct deferred_args {
  qp_handle* qp;
  remote_ptr dst;     // slot_bytes per (thread, op), thread-major
  local_ptr src;      // the same layout, filled by the host with pattern(thread, op, .)
  uint32_t ops;       // puts per thread, every one deferred
  uint32_t slot_bytes;
  bool submit;        // each caller submits after its puts (else the host does)
  uint64_t* out;      // per global thread: the first failing post status (ok if none)
};

// Every thread (lane) posts `ops` deferred puts of its own slots, then, when asked,
// submits at its scope; no doorbell is rung before that, except by a post that finds the
// ring full.
template <typename Scope, sharing S>
GDAKI_HD inline void deferred_put_kernel(const deferred_args& a) {
  using namespace gdaki::dev;
  const uint32_t me = global_thread();
  status first = status::ok;
  for (uint32_t op = 0; op < a.ops; ++op) {
    const uint64_t off = (static_cast<uint64_t>(me) * a.ops + op) * a.slot_bytes;
    uint64_t tk = 0;
    const status s = put<Scope, S>(*a.qp, {a.dst.addr + off, a.dst.rkey}, {a.src.addr + off, a.src.lkey},
                                   a.slot_bytes, &tk, op_flags::defer | op_flags::unsignaled, 5'000'000'000ull);
    if (s != status::ok) {
      first = s;
      break;
    }
  }
  if (a.submit) submit<Scope, S>(*a.qp);
  a.out[me] = static_cast<uint64_t>(first);
}

}  // namespace device_test

// The proxy ring: a lock-free multi-producer / single-consumer ring of 2^k descriptors
// (proxy/descriptor.hpp) in memory that producers (GPU or CPU threads) and the CPU proxy
// thread can both reach, plus the completion counters the proxy bumps for them.
//
// One writer per word (docs/proxy.md, "Who writes which word"): a GPU atomic across PCIe
// is not atomic with a CPU atomic on the same word, so no word is modified by both sides.
//
//   producers  own `reserved` and `taken` (the producer words; only producers write or
//              even read them, so they may live in GPU memory). A producer takes credits
//              by adding to `taken` and checking it against the proxy's published
//              `consumed` (undone when short), then reserves positions (fetch_add on the
//              free-running 32-bit `reserved`), writes the slot body and publishes it by
//              a release store of its tail sequence word. Slots are published
//              independently: no producer waits for another.
//   consumer   owns `consumed`, the error words, `closed` and the completion counters. It
//              reads slots in position order (never writes them); a slot is ready when
//              its tail word equals the position (acquire); the copy is validated
//              (descriptor.hpp) before use; then it publishes `consumed` (release): that
//              store is how credits come back.
//   completion the consumer adds to counters[id] (release, single writer); producers
//              poll it (acquire) with a wrap-safe 64-bit compare.
//
// Every counter is free-running and masked only at the slot subscript. Why credits apart
// from positions: a producer that reserved a position must fill it (the consumer waits
// for it in order), so a bounded wait that gives up must give up before reserving.
// Taking a credit first makes "room for me" a fact before the reservation, and the
// reservation then never waits. Memory-ordering details: docs/proxy.md.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gdaki/config.hpp"
#include "gdaki/device/arch.hpp"
#include "gdaki/device/ring.hpp"
#include "gdaki/device/sq.hpp"
#include "gdaki/proxy/descriptor.hpp"
#include "gdaki/status.hpp"

namespace gdaki::proxy {

using dev::wait_forever;

// Ring capacity bounds: at least 2 slots; at most 2^24 so that every distance between
// live 32-bit positions stays far below half the counter range (wrap-safe compares).
inline constexpr uint32_t ring_min_log2 = 1;
inline constexpr uint32_t ring_max_log2 = 24;
// Completion counters per ring (ids 0 .. count-1; no_counter is reserved).
inline constexpr uint32_t ring_max_counters = 0xfffe;

// The control words, one cache line per writer. A ring uses line 0 (producers) of the
// block its handle's `prod` points at and line 1 (the proxy) of the block `ctl` points
// at; in the default layout both are the same block. The type is shared so a producer
// block can be placed on its own (GPU memory for GPU producers: ring_parts) without a
// second layout to keep in step.
struct alignas(64) ring_control {
  // Line 0, written by producers only (never by the proxy, which never reads it either).
  uint32_t reserved;  // next position to hand out (free-running 32-bit)
  uint32_t taken;     // credits taken: positions granted plus takes not yet undone
  uint32_t pad0[14];
  // Line 1, written by the proxy only (producers read it).
  uint32_t consumed;        // every position below this has been taken out of the ring;
                            // publishing it is how the proxy returns credits
  uint32_t error;           // 0, or the gdaki::status of the first fault (latched)
  uint32_t error_position;  // ring position of that fault
  uint32_t faults;          // descriptors rejected by validation (never executed)
  uint32_t closed;          // 1 once the proxy stopped consuming (credits never return)
  uint32_t pad1[11];
};
// The ownership rule, kept by the layout: no cache line holds words of both writers (a
// line is the unit a CPU and a PCIe write contend on), and producer words form their own
// line so the whole line can live in GPU memory.
static_assert(sizeof(ring_control) == 128, "two cache lines: producers' and the proxy's");
static_assert(offsetof(ring_control, reserved) / 64 == 0 && offsetof(ring_control, taken) / 64 == 0,
              "producer-written words sit in line 0");
static_assert(offsetof(ring_control, consumed) / 64 == 1 && offsetof(ring_control, error) / 64 == 1 &&
                  offsetof(ring_control, error_position) / 64 == 1 && offsetof(ring_control, faults) / 64 == 1 &&
                  offsetof(ring_control, closed) / 64 == 1,
              "proxy-written words sit in line 1");
// Slots are written by producers only; counters by the proxy only. A slot is one whole
// line, and the counters start on a line of their own (ring_bytes rounds), so neither
// shares a line with the other side's words.
static_assert(sizeof(descriptor) == 64 && alignof(descriptor) == 64, "a slot is exactly one cache line");

// The plain-data handle producers and the consumer use (copy it into kernel arguments).
struct ring_handle {
  ring_control* ctl;   // line 1 (the proxy's words): memory both sides reach
  descriptor* slots;   // 2^log2 slots, 64-byte aligned, memory both sides reach
  uint64_t* counters;  // num_counters completion counters, memory both sides reach
  uint32_t mask;       // slots - 1
  uint32_t num_counters;
  ring_control* prod;  // line 0 (producer words): only producers touch it (== ctl by default)
};

// Bytes of one ring's memory: control, slots, counters (in that order, 64-byte aligned).
GDAKI_HD constexpr size_t ring_bytes(uint32_t log2_slots, uint32_t num_counters) {
  return sizeof(ring_control) + (size_t{1} << log2_slots) * sizeof(descriptor) +
         ((size_t{num_counters} * sizeof(uint64_t) + 63) / 64) * 64;
}

// The producer words a ring starting at first_position begins with. ring_init stores it
// when it lays out the producer block; a caller that places that block where the CPU
// cannot store (GPU memory) copies this value there itself (cudaMemcpy) before any
// producer runs.
GDAKI_HD constexpr ring_control ring_initial_producer_words(uint32_t first_position = 0) {
  ring_control c{};
  c.reserved = first_position;
  c.taken = first_position;
  return c;
}

// Where each part of a ring lives, for layouts other than one contiguous block.
struct ring_parts {
  ring_control* proxy_words;     // line 1 used; both sides reach it; 64-byte aligned
  ring_control* producer_words;  // line 0 used; producers only; nullptr = proxy_words.
                                 // ring_init_parts does not store to it when it is apart
                                 // (see ring_initial_producer_words)
  descriptor* slots;             // 2^log2 slots; both sides reach them
  uint64_t* counters;            // num_counters words, 64-byte aligned; both sides reach them
};

// Lays a ring out in the given parts (not yet shared with any producer or consumer).
// first_position is where the free-running positions start (0 normally; tests start
// near 2^32 to cross the wrap). Returns ok, or invalid for a bad size, alignment or count.
GDAKI_HD inline status ring_init_parts(const ring_parts& parts, uint32_t log2_slots, uint32_t num_counters,
                                       ring_handle* out, uint32_t first_position = 0) {
  const auto misaligned = [](const void* p) { return p == nullptr || (reinterpret_cast<uintptr_t>(p) & 63) != 0; };
  if (misaligned(parts.proxy_words) || misaligned(parts.slots)) return status::invalid;
  if (parts.producer_words != nullptr && misaligned(parts.producer_words)) return status::invalid;
  if (num_counters != 0 && misaligned(parts.counters)) return status::invalid;
  if (log2_slots < ring_min_log2 || log2_slots > ring_max_log2) return status::invalid;
  if (num_counters > ring_max_counters) return status::invalid;
  ring_handle r{};
  r.ctl = parts.proxy_words;
  r.prod = parts.producer_words != nullptr ? parts.producer_words : parts.proxy_words;
  r.slots = parts.slots;
  r.counters = parts.counters;
  r.mask = (uint32_t{1} << log2_slots) - 1;
  r.num_counters = num_counters;
  const uint32_t cap = r.mask + 1;
  *r.ctl = ring_control{};
  r.ctl->consumed = first_position;
  if (parts.producer_words == nullptr) {
    const ring_control p = ring_initial_producer_words(first_position);
    r.ctl->reserved = p.reserved;
    r.ctl->taken = p.taken;
  }
  for (uint32_t i = 0; i < cap; ++i) {
    descriptor& s = r.slots[i];
    s = descriptor{};
    // The first position that uses slot i; mark the slot as holding the lap before it,
    // which can never equal a position the consumer waits for in this lap.
    const uint32_t first_here = first_position + ((i - first_position) & r.mask);
    s.seq_tail = first_here - cap;
    s.seq_head = s.seq_tail;
  }
  for (uint32_t c = 0; c < num_counters; ++c) r.counters[c] = 0;
  // The handle is handed to producers/consumer through a thread start or a kernel launch,
  // both of which order these plain initialising stores before their first use.
  *out = r;
  return status::ok;
}

// Lays a ring out in one block `mem` (64-byte aligned, ring_bytes() long): control,
// slots, counters. Returns ok, or invalid for a bad size, alignment or count.
GDAKI_HD inline status ring_init(void* mem, size_t bytes, uint32_t log2_slots, uint32_t num_counters,
                                 ring_handle* out, uint32_t first_position = 0) {
  if (mem == nullptr || (reinterpret_cast<uintptr_t>(mem) & 63) != 0) return status::invalid;
  if (log2_slots < ring_min_log2 || log2_slots > ring_max_log2) return status::invalid;
  if (num_counters > ring_max_counters || bytes < ring_bytes(log2_slots, num_counters)) return status::invalid;
  auto* base = static_cast<unsigned char*>(mem);
  ring_parts parts{};
  parts.proxy_words = reinterpret_cast<ring_control*>(base);
  parts.producer_words = nullptr;
  parts.slots = reinterpret_cast<descriptor*>(base + sizeof(ring_control));
  parts.counters =
      reinterpret_cast<uint64_t*>(base + sizeof(ring_control) + (size_t{1} << log2_slots) * sizeof(descriptor));
  return ring_init_parts(parts, log2_slots, num_counters, out, first_position);
}

GDAKI_HD constexpr uint32_t ring_capacity(const ring_handle& r) { return r.mask + 1; }

// ---------------------------------------------------------------------------------------
// Producer side
// ---------------------------------------------------------------------------------------

// Reserves n consecutive positions (n <= capacity); *first receives the first. Waits for
// credits with back-off up to timeout_ns (0 = try once, wait_forever = no limit).
// Returns ok, timeout (no room in time; nothing reserved), invalid (n out of range), or
// closed (the proxy stopped; nothing reserved).
//
// Credits without a shared credit word: free = capacity - (taken - consumed), where
// `taken` is the producers' own count (RMW among producers only) and `consumed` the
// proxy's published count (a plain load here). The proxy never writes `taken`, producers
// never write `consumed`, so no word sees atomics from both sides of PCIe.
GDAKI_HD inline status ring_acquire(ring_handle& r, uint32_t n, uint32_t* first, uint64_t timeout_ns = wait_forever) {
  if (n == 0 || n > ring_capacity(r)) return status::invalid;
  const uint32_t cap = ring_capacity(r);
  uint64_t t0 = 0;
  for (uint32_t spin = 0;; ++spin) {
    // Acquire: a credit is ours only if the proxy has released enough positions, and
    // this load makes its reads of those slots happen before our (or a later reserver's)
    // overwrite of them (docs/proxy.md, "why the slot is free"). One load per attempt:
    // from a GPU it is a read across PCIe. `consumed` only grows, so checking our take
    // against this (possibly older) value is conservative.
    const uint32_t consumed = dev::arch::load_acquire(&r.ctl->consumed);
    // Cheap look first, so a full ring is not hammered with take-and-undo RMWs.
    if (static_cast<int32_t>(consumed + cap - dev::arch::local::load_relaxed(&r.prod->taken)) >= static_cast<int32_t>(n)) {
      const uint32_t before = dev::arch::local::fetch_add(&r.prod->taken, n);
      if (static_cast<int32_t>(consumed + cap - (before + n)) >= 0) break;
      dev::arch::local::fetch_add(&r.prod->taken, 0u - n);  // short: undo our take
    }
    // A stopped proxy never returns credits: do not wait for them. (A rejected
    // descriptor latches io_error but the ring keeps running; waiters on counters see it.)
    if (dev::arch::load_acquire(&r.ctl->closed) != 0) return status::closed;
    if (timeout_ns == 0) return status::timeout;
    if (timeout_ns != wait_forever) {
      if (t0 == 0) t0 = dev::arch::clock_ns();
      else if (dev::arch::clock_ns() - t0 >= timeout_ns) return status::timeout;
    }
    dev::arch::spin_pause(spin);
  }
  // acq_rel: reservations form one RMW chain, so we also happen-after every earlier
  // reserver's credit check, the fact that guarantees our slot's previous lap was read.
  *first = dev::arch::local::fetch_add(&r.prod->reserved, n);
  return status::ok;
}

// The next position a producer will be handed: everything below it is reserved (not
// necessarily published). Producer side only (the proxy cannot read producer words).
GDAKI_HD inline uint32_t ring_reserved(const ring_handle& r) { return dev::arch::local::load_acquire(&r.prod->reserved); }

// Whether the proxy has stopped consuming (ring_close).
GDAKI_HD inline bool ring_closed(const ring_handle& r) { return dev::arch::load_acquire(&r.ctl->closed) != 0; }

// Writes body `d` into the slot of `position` (reserved by ring_acquire) and publishes
// it. The slot's sequence copies and check are filled here; every other field is d's.
GDAKI_HD inline void ring_write(ring_handle& r, uint32_t position, const descriptor& d) {
  descriptor body = d;
  body.seq_head = position;
  body.seq_tail = position;
  body.check = 0;
  body.check = descriptor_check(body);
  descriptor& s = r.slots[position & r.mask];
  s.seq_head = body.seq_head;
  s.op = body.op;
  s.flags = body.flags;
  s.peer = body.peer;
  s.local_addr = body.local_addr;
  s.remote_addr = body.remote_addr;
  s.local_key = body.local_key;
  s.remote_key = body.remote_key;
  s.operand0 = body.operand0;
  s.operand1 = body.operand1;
  s.length = body.length;
  s.signal_key = body.signal_key;
  s.counter = body.counter;
  s.check = body.check;
  // Release: every body store above is visible before the tail says "position is here".
  // Pairs with the consumer's load_acquire of seq_tail in ring_peek.
  dev::arch::store_release(&s.seq_tail, position);
}

// One descriptor: acquire a position, write, publish. *position (optional) receives it.
// Returns as ring_acquire.
GDAKI_HD inline status ring_push(ring_handle& r, const descriptor& d, uint64_t timeout_ns = wait_forever,
                                 uint32_t* position = nullptr) {
  uint32_t pos = 0;
  const status st = ring_acquire(r, 1, &pos, timeout_ns);
  if (st != status::ok) return st;
  ring_write(r, pos, d);
  if (position != nullptr) *position = pos;
  return status::ok;
}

// Completed-operation count of counter id (acquire: results the proxy placed before
// bumping it, e.g. get data or atomic old values, are visible after this load).
GDAKI_HD inline uint64_t ring_counter(const ring_handle& r, uint16_t id) {
  return dev::arch::load_acquire(&r.counters[id]);
}

// Waits until counter id reaches target (wrap-safe). Returns ok, timeout, invalid (bad
// id), or the latched ring error (a descriptor was rejected or the proxy stopped: the
// count may never arrive).
GDAKI_HD inline status ring_wait_counter(const ring_handle& r, uint16_t id, uint64_t target,
                                         uint64_t timeout_ns = wait_forever) {
  if (id >= r.num_counters) return status::invalid;
  uint64_t t0 = 0;
  for (uint32_t spin = 0;; ++spin) {
    if (!dev::ring_before<64>(ring_counter(r, id), target)) return status::ok;
    const uint32_t err = dev::arch::load_acquire(&r.ctl->error);
    if (err != 0) return static_cast<status>(err);
    if (dev::arch::load_acquire(&r.ctl->closed) != 0) return status::closed;
    if (timeout_ns == 0) return status::timeout;
    if (timeout_ns != wait_forever) {
      if (t0 == 0) t0 = dev::arch::clock_ns();
      else if (dev::arch::clock_ns() - t0 >= timeout_ns) return status::timeout;
    }
    dev::arch::spin_pause(spin);
  }
}

// The latched error (0 = none) and the position it names.
GDAKI_HD inline status ring_error(const ring_handle& r, uint32_t* position = nullptr) {
  const uint32_t e = dev::arch::load_acquire(&r.ctl->error);
  if (position != nullptr) *position = dev::arch::load_relaxed(&r.ctl->error_position);
  return static_cast<status>(e);
}

// ---------------------------------------------------------------------------------------
// Consumer side (one thread)
// ---------------------------------------------------------------------------------------

// Looks at the slot of `position` (the consumer's next position). Returns again (not
// published yet: a producer may be half way through it), ok (*out is a validated copy),
// or io_error (published but invalid: *fault says why; the copy must not be executed).
GDAKI_HD inline status ring_peek(const ring_handle& r, uint32_t position, descriptor* out, descriptor_fault* fault) {
  const descriptor& s = r.slots[position & r.mask];
  // Acquire: pairs with ring_write's release of seq_tail; the body reads below see the
  // producer's stores.
  if (dev::arch::load_acquire(&s.seq_tail) != position) return status::again;
  *out = s;  // validate and execute a private copy: what was checked is what runs
  *fault = validate(*out, position);
  return *fault == descriptor_fault::none ? status::ok : status::io_error;
}

// Hands slots back after the consumer has finished reading them: publishes `consumed`
// = new_consumed. That store is the credit return (producers compute their credits from
// it); n is how many positions it advances by (kept for callers that count batches).
GDAKI_HD inline void ring_release(ring_handle& r, uint32_t new_consumed, uint32_t n) {
  (void)n;
  // Release: our reads of the slots below new_consumed happen before any producer whose
  // acquire of `consumed` sees this value overwrites them.
  dev::arch::store_release(&r.ctl->consumed, new_consumed);
}

// Adds n to counter id (the consumer is its only writer). Release: results written for
// the operation (get data, atomic old values) are visible before the new count.
GDAKI_HD inline void ring_complete(ring_handle& r, uint16_t id, uint64_t n = 1) {
  if (id >= r.num_counters) return;
  dev::arch::store_release(&r.counters[id], dev::arch::load_relaxed(&r.counters[id]) + n);
}

// Records a rejected descriptor; the first error is latched for producers to see.
GDAKI_HD inline void ring_record_fault(ring_handle& r, status err, uint32_t position) {
  dev::arch::store_relaxed(&r.ctl->faults, dev::arch::load_relaxed(&r.ctl->faults) + 1);
  if (dev::arch::load_relaxed(&r.ctl->error) == 0) {
    dev::arch::store_relaxed(&r.ctl->error_position, position);
    // Release: error_position is visible to whoever acquires error.
    dev::arch::store_release(&r.ctl->error, static_cast<uint32_t>(err));
  }
}

// Marks the ring as no longer consumed: producers waiting for credits and waiters on
// counters return closed instead of waiting for a proxy that is gone.
GDAKI_HD inline void ring_close(ring_handle& r) { dev::arch::store_release(&r.ctl->closed, 1u); }

}  // namespace gdaki::proxy

// internal: copies into memory the copying thread does not read again: streaming
// (non-temporal) stores where the CPU has them (x86-64: SSE2 movntdq, then sfence), memcpy
// elsewhere; and, per destination, the choice between them by what each has cost there.
//
// Why: a mapped WRITE copies into a peer process's buffer. When the peer reads what
// arrives (an all-to-all's receiver does), the buffer's lines sit in the peer's core
// cache, and a plain store first reads each line for ownership, pulling it from that core
// only to overwrite all of it; a streaming store writes whole lines without the read. On
// the development VM that made a 2-rank all-to-all 1.5-2x faster from 32 KiB per peer
// whenever the two processes ran on distant cores (docs/performance.md, "Large puts with
// streaming stores"). When nobody reads the target (perftest-style write_bw rewriting one
// buffer), the lines stay in the writer's cache and plain stores are faster (1 MiB: 27-33
// against 18-19 GB/s). Neither is right for every destination, so each mapping measures
// both (store_chooser). glibc's memcpy streams only above a threshold derived from the
// cache size the CPU reports, which on the development VM is 256 MiB of L3: never.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace gdaki::soft {

inline void stream_copy(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  // Up to the first 64-byte boundary of the destination by memcpy, whole lines streamed,
  // the rest by memcpy.
  const size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
  if (n < head + 64) {
    std::memcpy(d, s, n);
    return;
  }
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, n);
  // Streaming stores are weakly ordered: all of them are globally visible before any later
  // store (the CQE, a signal's atomic) is.
  _mm_sfence();
#else
  std::memcpy(dst, src, n);
#endif
}

// Which stores a destination's large copies use. Each kind leaves the destination's lines
// in a state that favours itself (plain stores leave them in this core's cache, streaming
// stores in memory), so one copy of the other kind is always measured at a disadvantage:
// the other kind is tried for `probe` copies in a row at the start of every epoch, and
// only copies after the first `warm` of a run of one kind are measured. The kind with the
// lower moving-average cost (ns per KiB) when the epoch starts takes the rest of it; until
// both are measured, plain stores. Shared by the QPs that copy to the destination: relaxed
// atomics, since a stale figure only costs some copies a worse choice.
class store_chooser {
 public:
  // The first epoch is short, so a destination gets its kind after a few dozen copies;
  // later ones are long, so the probes cost about 1% where the other kind is much slower
  // (each probe run also leaves the lines where the incumbent does not want them).
  static constexpr uint32_t first_epoch = 32, epoch = 1024, probe = 8, warm = 4;

  struct choice {
    bool streaming;
    bool measure;
  };

  choice pick() {
    const uint64_t n = picks_.fetch_add(1, std::memory_order_relaxed);
    const auto k = static_cast<uint32_t>(n < first_epoch ? n : (n - first_epoch) % epoch);
    if (k == 0) {  // the epoch's kind: decided once, so a run of one kind is never cut short
      const uint32_t plain = cost_[0].load(std::memory_order_relaxed);
      const uint32_t streamed = cost_[1].load(std::memory_order_relaxed);
      stream_wins_.store(streamed != 0 && plain != 0 && streamed < plain, std::memory_order_relaxed);
    }
    const bool stream_wins = stream_wins_.load(std::memory_order_relaxed);
    if (k < probe) return {!stream_wins, k >= warm};
    return {stream_wins, k >= probe + warm};
  }

  void record(bool streaming, uint64_t ns, uint64_t bytes) {
    if (bytes == 0) return;
    const uint64_t c64 = ns * 1024 / bytes + 1;  // + 1: 0 means "not measured"
    const auto c = static_cast<uint32_t>(c64 > 0xffffffffu ? 0xffffffffu : c64);
    std::atomic<uint32_t>& slot = cost_[streaming ? 1 : 0];
    const uint32_t old = slot.load(std::memory_order_relaxed);
    slot.store(old == 0 ? c : old - old / 4 + c / 4, std::memory_order_relaxed);
  }

  uint32_t cost(bool streaming) const { return cost_[streaming ? 1 : 0].load(std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> cost_[2] = {0, 0};
  std::atomic<uint64_t> picks_{0};
  std::atomic<bool> stream_wins_{false};
};

// A large copy to a destination with its chooser, timed when the chooser says so.
inline void chosen_copy(store_chooser& ch, void* dst, const void* src, size_t n) {
  const store_chooser::choice c = ch.pick();
  auto copy = [&] {
    if (c.streaming) {
      stream_copy(dst, src, n);
    } else {
      std::memcpy(dst, src, n);
    }
  };
  if (!c.measure) {
    copy();  // the clock is read only around the copies the chooser measures
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  copy();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  ch.record(c.streaming, static_cast<uint64_t>(ns), n);
}

}  // namespace gdaki::soft

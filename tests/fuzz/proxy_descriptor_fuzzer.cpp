// libFuzzer harness: proxy descriptors from a hostile or broken producer, through the
// descriptor validation (descriptor.hpp validate) and the consumer (proxy_service) into a
// recording poster.
//
// Input: byte 0 picks the ring size and the service's batch / in-flight limits, then a
// script of commands, each one byte plus, for the slot writes, 64 bytes of slot:
//   0 sealed  ring_acquire + ring_write of the bytes (sequence and check made right, so
//             only the opcode, flags and length can be wrong)
//   1 torn    as sealed, then one byte of the published slot changed (a body store that
//             landed after the tail store)
//   2 raw     the 64 bytes as they are, published at the position (anything at all)
//   3 step    one proxy_service::progress()
//   4 finish  the poster completes its oldest operation, ok or failed
//   5 mode    the poster answers the next posts with ok / again / invalid / io_error
//   6 bogus   the poster reports a cookie it never handed out (a poster bug)
// A slot is written only when ring_acquire gives a position (never over an unread one).
//
// Checks: the poster is only ever handed descriptors that validate (never fence/quiet,
// known opcode and flags, length in range), each cookie it holds is unique; the service's
// statistics add up; nothing crashes, leaks or loops.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>

#include "gdaki/proxy/host_ring.hpp"
#include "gdaki/proxy/poster.hpp"
#include "gdaki/proxy/proxy_service.hpp"

namespace {

namespace proxy = gdaki::proxy;
using gdaki::status;

#define FUZZ_CHECK(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "proxy_descriptor_fuzzer: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

// Records what the service asks of it and completes on the script's command.
class recording_poster final : public proxy::poster {
 public:
  status answer = status::ok;
  std::deque<uint64_t> inflight;  // cookies in posting order
  std::set<uint64_t> held;
  std::deque<proxy::completion> ready;
  uint64_t posts_ok = 0;

  status post(const proxy::descriptor& d, uint64_t cookie) override {
    const auto op = static_cast<uint8_t>(d.op);
    // Only validated descriptors reach a poster, and never a fence or quiet.
    FUZZ_CHECK(op != 0 && op < proxy::opcode_count);
    FUZZ_CHECK(d.op != proxy::opcode::fence && d.op != proxy::opcode::quiet);
    FUZZ_CHECK((d.flags & ~proxy::desc_flags::all) == 0);
    FUZZ_CHECK(d.op != proxy::opcode::put_inline || d.length <= proxy::max_inline_bytes);
    FUZZ_CHECK(d.length <= proxy::max_descriptor_bytes || d.op == proxy::opcode::signal_add ||
               d.op == proxy::opcode::signal_set || d.op == proxy::opcode::atomic_fetch_add ||
               d.op == proxy::opcode::atomic_compare_swap);
    FUZZ_CHECK(d.check == proxy::descriptor_check(d));
    if (answer != status::ok) return answer;
    FUZZ_CHECK(held.insert(cookie).second);  // a cookie is never handed out twice at once
    inflight.push_back(cookie);
    ++posts_ok;
    return status::ok;
  }
  size_t poll(proxy::completion* out, size_t max) override {
    size_t n = 0;
    while (n < max && !ready.empty()) {
      out[n++] = ready.front();
      ready.pop_front();
    }
    return n;
  }
  const char* name() const override { return "fuzz:recording"; }

  void finish_oldest(status result) {
    if (inflight.empty()) return;
    const uint64_t c = inflight.front();
    inflight.pop_front();
    held.erase(c);
    ready.push_back({c, result});
  }
};

constexpr status answers[4] = {status::ok, status::again, status::invalid, status::io_error};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t cfg = data[0];
  proxy::host_ring ring;
  const uint32_t log2 = 1 + (cfg & 3);  // 2..16 slots
  if (ring.init(log2, 4) != status::ok) return 0;
  proxy::ring_handle& r = ring.handle();
  recording_poster poster;
  proxy::proxy_options opt;
  opt.batch = 1 + ((cfg >> 2) & 7);
  opt.max_inflight = 1 + ((cfg >> 5) & 3);
  opt.torn_grace_ns = 0;  // reject a torn slot on the next step: no clock in the loop
  uint64_t written = 0;
  {
    proxy::proxy_service svc(r, poster, opt);
    size_t i = 1;
    while (i < size) {
      const uint8_t cmd = data[i++];
      switch (cmd % 7) {
        case 0:
        case 1:
        case 2: {
          if (size - i < 64) {
            i = size;
            break;
          }
          proxy::descriptor d;
          std::memcpy(&d, data + i, 64);
          i += 64;
          uint32_t pos = 0;
          if (proxy::ring_acquire(r, 1, &pos, 0) != status::ok) break;  // full (or closed)
          ++written;
          if (cmd % 7 == 2) {
            proxy::descriptor& s = r.slots[pos & r.mask];
            std::memcpy(&s, &d, 60);
            gdaki::dev::arch::store_release(&s.seq_tail, pos);
            break;
          }
          proxy::ring_write(r, pos, d);
          if (cmd % 7 == 1) {
            // One body byte (0..59) changes after publication; which and how from cmd.
            auto* bytes = reinterpret_cast<uint8_t*>(&r.slots[pos & r.mask]);
            bytes[(cmd >> 3) % 60] ^= static_cast<uint8_t>(1u << (cmd & 7));
          }
          break;
        }
        case 3:
          svc.progress();
          break;
        case 4:
          poster.finish_oldest((cmd & 8) ? status::io_error : status::ok);
          break;
        case 5:
          poster.answer = answers[(cmd >> 3) & 3];
          break;
        default:  // 6
          // A cookie never handed out. (A cookie reported twice is only detectable while
          // it is not in use again; once the service has reused it, a late duplicate is
          // indistinguishable from the new operation's completion, so it is not scripted.)
          poster.ready.push_back({1000u + cmd, (cmd & 8) ? status::io_error : status::ok});
          break;
      }
    }
    // Drain: complete everything, step until idle (bounded: a service that keeps finding
    // work forever is a bug).
    poster.answer = status::ok;
    for (uint32_t round = 0;; ++round) {
      FUZZ_CHECK(round < 100000);
      while (!poster.inflight.empty()) poster.finish_oldest(status::ok);
      // Idle with nothing in flight. (Bogus reports may stay unread: with nothing in
      // flight the service does not poll, which is fine.)
      if (svc.progress() == 0 && poster.inflight.empty()) break;
    }
    const proxy::proxy_stats st = svc.stats();
    FUZZ_CHECK(st.posted == poster.posts_ok);
    FUZZ_CHECK(st.consumed <= written);
    FUZZ_CHECK(st.rejected <= st.consumed);
    FUZZ_CHECK(st.completed == st.posted);  // bogus reports are counted as failed, never completed
    FUZZ_CHECK(r.ctl->consumed == static_cast<uint32_t>(st.consumed));
    FUZZ_CHECK(r.prod->taken == r.prod->reserved);  // no credit take left undone
  }
  // stop() closed the ring, so producers waiting for credits give up.
  FUZZ_CHECK(r.ctl->closed == 1);
  return 0;
}

// Several CPU threads post through the device API (the calls a CUDA kernel makes) on ONE
// grid-shared QP against the soft NIC in this process: each thread puts a block, writes an
// inline word with p, and put_signals a second block with signal add 1, a few times over,
// then quiets. The main thread then checks every byte and the signal total, and prints a
// summary. Exit status 0 only if everything landed and every call returned ok.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "gdaki/device/ops.hpp"
#include "gdaki/error.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace dev = gdaki::dev;
namespace verbs = gdaki::verbs;

namespace {

constexpr uint32_t threads = 4;
constexpr uint32_t rounds = 50;
constexpr uint32_t block_bytes = 1024;
// Per thread and round, at the peer: a put block, a put_signal block and one p word.
constexpr uint64_t slot_bytes = 2 * block_bytes + 8;
constexpr uint64_t region_bytes = uint64_t{threads} * rounds * slot_bytes;

uint8_t pattern(uint32_t t, uint32_t r, uint32_t half, uint64_t i) {
  return static_cast<uint8_t>(t * 61 + r * 17 + half * 101 + i * 7 + 1);
}
uint64_t p_word(uint32_t t, uint32_t r) { return 0x5eed000000000000ull | (uint64_t{t} << 16) | r; }

}  // namespace

int main() try {
  verbs::device d = verbs::device::open("soft0");
  verbs::pd pd(d);
  // QP a (the initiator; its handle is what the threads post on) -> QP b (the peer). The
  // send CQ has as many CQEs as the SQ has WQEBBs, as export requires (device-api.md).
  verbs::cq_init ci;
  ci.depth = 256;
  verbs::cq a_scq(d, ci), a_rcq(d, ci), b_scq(d, ci), b_rcq(d, ci);
  verbs::qp_init qi;
  qi.sq_wqebbs = 256;
  qi.send_cq = &a_scq;
  qi.recv_cq = &a_rcq;
  verbs::qp a(pd, qi);
  qi.send_cq = &b_scq;
  qi.recv_cq = &b_rcq;
  verbs::qp b(pd, qi);
  verbs::connect_rc(a, b.qpn(), verbs::access::all);
  verbs::connect_rc(b, a.qpn(), verbs::access::all);

  // Buffers: what the threads send (local), where it lands (remote), the signal word, and
  // the 8-byte scratch buffer signal add needs for the old value nobody reads.
  std::vector<uint8_t> src(region_bytes), dst(region_bytes);
  alignas(8) static uint64_t signal_word = 0, scratch = 0;
  verbs::mr msrc(pd, src.data(), src.size(), verbs::access::local_write);
  verbs::mr mdst(pd, dst.data(), dst.size(), verbs::access::all);
  verbs::mr msig(pd, &signal_word, 8, verbs::access::all);
  verbs::mr mscratch(pd, &scratch, 8, verbs::access::local_write);
  const auto at = [](const void* p) { return reinterpret_cast<uint64_t>(p); };

  dev::cq_handle hs = a_scq.export_handle(), hr = a_rcq.export_handle();
  dev::qp_handle qp = a.export_handle(&hs, &hr);
  qp.scratch_addr = at(&scratch);  // the soft export leaves the scratch buffer to us
  qp.scratch_lkey = mscratch.lkey();

  // Each thread posts at thread scope with grid sharing (the defaults): any thread may post
  // on the QP at any time; reservation is atomic and the doorbell shared.
  std::vector<uint32_t> failures(threads, 0);
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (uint32_t r = 0; r < rounds; ++r) {
        const uint64_t off = (uint64_t{t} * rounds + r) * slot_bytes;
        for (uint64_t i = 0; i < block_bytes; ++i) {
          src[off + i] = pattern(t, r, 0, i);
          src[off + block_bytes + i] = pattern(t, r, 1, i);
        }
        uint64_t ticket = 0;
        if (dev::put(qp, {at(&dst[off]), mdst.rkey()}, {at(&src[off]), msrc.lkey()}, block_bytes, &ticket) !=
            gdaki::status::ok)
          ++failures[t];
        // Inline: the value is copied into the WQE, so a stack variable is fine.
        const uint64_t v = p_word(t, r);
        if (dev::p(qp, {at(&dst[off + 2 * block_bytes]), mdst.rkey()}, &v, 8, &ticket) != gdaki::status::ok)
          ++failures[t];
        if (dev::put_signal(qp, {at(&dst[off + block_bytes]), mdst.rkey()},
                            {at(&src[off + block_bytes]), msrc.lkey()}, block_bytes, {at(&signal_word), msig.rkey()},
                            dev::signal_op::add, 1, &ticket) != gdaki::status::ok)
          ++failures[t];
      }
      // Everything this QP carried so far, from every thread, is complete (bounded: 10 s).
      if (dev::quiet(qp, 10'000'000'000ull) != gdaki::status::ok) ++failures[t];
    });
  }
  for (std::thread& th : pool) th.join();

  uint64_t bad_bytes = 0, bad_words = 0, failed_calls = 0;
  for (uint32_t t = 0; t < threads; ++t) {
    failed_calls += failures[t];
    for (uint32_t r = 0; r < rounds; ++r) {
      const uint64_t off = (uint64_t{t} * rounds + r) * slot_bytes;
      for (uint64_t i = 0; i < block_bytes; ++i) {
        bad_bytes += dst[off + i] != pattern(t, r, 0, i);
        bad_bytes += dst[off + block_bytes + i] != pattern(t, r, 1, i);
      }
      uint64_t w = 0;
      std::memcpy(&w, &dst[off + 2 * block_bytes], 8);
      bad_words += w != p_word(t, r);
    }
  }
  const uint64_t want_signal = uint64_t{threads} * rounds;
  const bool ok = failed_calls == 0 && bad_bytes == 0 && bad_words == 0 && signal_word == want_signal &&
                  dev::last_error(qp).syndrome == gdaki::prm::syndrome::none;
  std::printf("%u CPU threads x %u rounds of put + p + put_signal on one grid-shared QP\n", threads, rounds);
  std::printf("  calls not ok: %llu\n  wrong bytes:  %llu of %llu\n  wrong p words: %llu of %llu\n",
              static_cast<unsigned long long>(failed_calls), static_cast<unsigned long long>(bad_bytes),
              static_cast<unsigned long long>(uint64_t{threads} * rounds * 2 * block_bytes),
              static_cast<unsigned long long>(bad_words), static_cast<unsigned long long>(want_signal));
  std::printf("  signal word: %llu (want %llu)\n%s\n", static_cast<unsigned long long>(signal_word),
              static_cast<unsigned long long>(want_signal), ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
} catch (const gdaki::error& e) {
  std::fprintf(stderr, "cpu_threads_device_api: %s\n", e.what());
  return 1;
}

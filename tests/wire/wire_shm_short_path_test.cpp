// The shared-memory wire's mapped short path (executor.cpp, run_mapped_short): the WQEs
// small messages are made of (a one-segment WRITE of at most 4 KiB, pointer or inline; an
// 8-byte fetch-and-add or compare-and-swap; a NOP) go through a peer MR's mapping without
// the general parse. (1) A mix of them rung with one doorbell completes exactly as the
// general path would (CQE opcode, index and byte count, the bytes and words at the
// target, the atomics' original values), and the short path took every one of them but
// the WRITE over 4 KiB; puts with signal alternate between two windows' mappings and
// leave neither pinned. (2) What the general path refuses, the short path leaves to it, so
// the error is the usual one and the target is unchanged: a local key deregistered after
// the short path cached it, a source outside its MR, an atomic's result into an MR without
// local write, a misaligned atomic, a WRITE past the grant, a source that lies in the other
// MR the local key cache holds. (3) Deregistering a source MR waits for the executor that
// has checked its key and is about to read it. (4) The QP's lease on a peer mapping spans
// doorbells and never holds the owner's deregistration up.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "providers/soft/wire/wire_test_hooks.hpp"
#include "wire_fixture.hpp"

using namespace wire_test;
using prm::send_opcode;
using prm::syndrome;

namespace {

constexpr size_t target_bytes = 1u << 20;

// The target (shared_target, whose "hash" and "word" look at its buffer) with a second,
// 4 KiB window of 8-byte words (a communicator's signals live in one of their own),
// registered with every right too. Also: "sig" answers that window's address and rkey,
// "sigword I" its I-th word, "dereg_both" deregisters both windows and answers how long
// that took in ms (deregistration waits for peers that hold a mapping in use).
int target_main(uint16_t port) {
  use_wire("shm");
  shared_target tg(target_bytes);
  auto* sig = static_cast<uint64_t*>(gdaki::soft::alloc_shared(4096));
  std::memset(sig, 0, 4096);
  auto sig_mr = std::make_unique<verbs::mr>(tg.pd, sig, 4096, verbs::access::all);
  tg.serve(port, [&](const std::string& cmd, oob::tcp_exchange& x) {
    if (cmd == "sig") {
      x.send(text(std::to_string(reinterpret_cast<uint64_t>(sig)) + " " + std::to_string(sig_mr->rkey())));
    } else if (cmd == "dereg_both") {
      const auto t0 = std::chrono::steady_clock::now();
      sig_mr.reset();
      tg.mr.reset();
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
      x.send(text(std::to_string(ms)));
    } else if (cmd.rfind("sigword ", 0) == 0) {
      x.send(text(std::to_string(sig[std::stoul(cmd.substr(8))])));
    }
  });
  sig_mr.reset();
  gdaki::soft::free_shared(sig);
  return 0;
}

struct initiator : forked_initiator {
  initiator() {
    fork_target([](uint16_t port) { return target_main(port); });
    use_wire("shm");
    meet(target_bytes, [](size_t i) { return static_cast<uint8_t>(i * 31 + 5); });
  }
  std::string hash(size_t off, size_t len) { return ask("hash " + std::to_string(off) + " " + std::to_string(len)); }
  std::string word(size_t off) { return ask("word " + std::to_string(off)); }
  // The target's signal window: its address and rkey.
  std::pair<uint64_t, uint32_t> signal_window() {
    const std::string sig = ask("sig");
    const size_t gap = sig.find(' ');
    return {std::stoull(sig.substr(0, gap)), static_cast<uint32_t>(std::stoul(sig.substr(gap + 1)))};
  }
  // `puts` puts with signal behind one doorbell, as a communicator makes them: put i
  // WRITEs source bytes 8i..8i+7 to the target at 1024 + 8i, then adds 1 to the word at
  // sig_word, its original value into results[i] (an MR of key res_lkey). Checks every
  // signal's CQE and original value (the word starts at 0).
  void puts_with_signal(uint32_t puts, uint64_t sig_word, uint32_t sig_rkey, uint64_t* results, uint32_t res_lkey) {
    dev::qp_handle& h = *s->ep.h;
    for (uint32_t i = 0; i < puts; ++i) {
      const dev::sge g = sg(s->buf.data() + 8 * i, 8, s->mr.lkey());
      uint64_t at = acquire(h, 1);
      dev::prepare_write(h, at, t.buf + 1024 + 8 * i, t.rkey, &g, 1, prm::ctrl_flags::ce_error_only);
      dev::sq_mark_ready(h, at, 1);
      at = acquire(h, 1);
      dev::prepare_atomic_fa(h, at, sig_word, sig_rkey, 1, sg(results + i, 8, res_lkey), prm::ctrl_flags::cq_update);
      dev::sq_mark_ready(h, at, 1);
    }
    dev::sq_submit(h);
    for (uint32_t i = 0; i < puts; ++i) {
      const got c = wait_cqe(s->ep, false);
      ASSERT_TRUE(c.ok && c.c.ok()) << "signal " << i;
      EXPECT_EQ(results[i], i) << "signal " << i << "'s original value";
    }
  }
  // The first WRITE to the target asks for the grant over the frame path; after it the
  // target's MR is mapped and the short path can take WQEs.
  void prime() {
    const dev::sge g = sg(s->buf.data(), 64, s->mr.lkey());
    post_write(*s->ep.h, t.buf, t.rkey, &g, 1);
    const got c = wait_cqe(s->ep, false);
    ASSERT_TRUE(c.ok && c.c.ok()) << "the priming WRITE failed";
  }
};

uint64_t short_path_wqes() { return gdaki::soft::wire::test_hooks::short_path_wqes.load(); }

TEST(wire_shm_short_path, small_writes_atomics_and_a_nop_rung_at_once_complete_exactly_through_it) {
  initiator in;
  ASSERT_NO_FATAL_FAILURE(in.prime());
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t qpn = in.s->ep.qp.qpn();
  const uint32_t lkey = in.s->mr.lkey(), rkey = in.t.rkey;
  const uint8_t* src = in.s->buf.data();
  auto* res = reinterpret_cast<uint64_t*>(in.s->buf.data() + 65536);  // three atomic results
  res[0] = res[1] = res[2] = ~uint64_t{0};
  const uint8_t inline8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t inline20[20];
  for (uint32_t i = 0; i < sizeof(inline20); ++i) inline20[i] = static_cast<uint8_t>(0xa0 + i);
  struct want {
    send_opcode op;
    uint32_t bytes;
    uint16_t index;
  };
  std::vector<want> wants;
  // Each WQE is written and marked ready; one doorbell at the end publishes them all.
  auto stage = [&](send_opcode op, uint32_t bytes, uint32_t nbb, auto&& prepare) {
    const uint64_t at = acquire(h, nbb);
    ASSERT_EQ(prepare(at), nbb);
    dev::sq_mark_ready(h, at, nbb);
    wants.push_back({op, bytes, static_cast<uint16_t>(at)});
  };
  const dev::sge w8 = sg(src + 200, 8, lkey), w4k = sg(src + 4096, 4096, lkey), w4k1 = sg(src + 12288, 4097, lkey);
  const dev::sge r0 = sg(&res[0], 8, lkey), r1 = sg(&res[1], 8, lkey), r2 = sg(&res[2], 8, lkey);
  constexpr uint8_t sig = prm::ctrl_flags::cq_update;
  const uint64_t before = short_path_wqes();
  stage(send_opcode::rdma_write, 8, dev::wqebbs_rdma(1),
        [&](uint64_t at) { return dev::prepare_write(h, at, in.t.buf + 1000, rkey, &w8, 1, sig); });
  stage(send_opcode::rdma_write, 8, dev::wqebbs_write_inline(8),
        [&](uint64_t at) { return dev::prepare_write_inline(h, at, in.t.buf + 1008, rkey, inline8, 8, sig); });
  stage(send_opcode::rdma_write, 20, dev::wqebbs_write_inline(20),
        [&](uint64_t at) { return dev::prepare_write_inline(h, at, in.t.buf + 1101, rkey, inline20, 20, sig); });
  stage(send_opcode::rdma_write, 4096, dev::wqebbs_rdma(1),
        [&](uint64_t at) { return dev::prepare_write(h, at, in.t.buf + 4096, rkey, &w4k, 1, sig); });
  stage(send_opcode::atomic_fa, 8, dev::wqebbs_atomic(),
        [&](uint64_t at) { return dev::prepare_atomic_fa(h, at, in.t.buf + 8192, rkey, 5, r0, sig); });
  stage(send_opcode::atomic_cs, 8, dev::wqebbs_atomic(),
        [&](uint64_t at) { return dev::prepare_atomic_cs(h, at, in.t.buf + 8192, rkey, 5, 42, r1, sig); });
  stage(send_opcode::atomic_cs, 8, dev::wqebbs_atomic(),  // compares 5 against 42: no swap
        [&](uint64_t at) { return dev::prepare_atomic_cs(h, at, in.t.buf + 8192, rkey, 5, 77, r2, sig); });
  stage(send_opcode::nop, 0, 1, [&](uint64_t at) { return dev::prepare_nop(h, at, sig); });
  // Over the short path's 4 KiB: the general loop takes it, between two short runs.
  stage(send_opcode::rdma_write, 4097, dev::wqebbs_rdma(1),
        [&](uint64_t at) { return dev::prepare_write(h, at, in.t.buf + 16384, rkey, &w4k1, 1, sig); });
  stage(send_opcode::rdma_write, 8, dev::wqebbs_rdma(1),
        [&](uint64_t at) { return dev::prepare_write(h, at, in.t.buf + 24576, rkey, &w8, 1, sig); });
  dev::sq_submit(h);
  for (const want& w : wants) {
    const got c = wait_cqe(in.s->ep, false);
    ASSERT_TRUE(c.ok) << "no CQE for the WQE at " << w.index;
    expect_req_cqe(c, *in.s->ep.hs, w.op, qpn, w.index, w.bytes);
  }
  EXPECT_EQ(short_path_wqes() - before, wants.size() - 1) << "every WQE but the 4097-byte WRITE takes the short path";
  EXPECT_EQ(in.hash(1000, 8), std::to_string(fnv(src + 200, 8)));
  EXPECT_EQ(in.hash(1008, 8), std::to_string(fnv(inline8, 8)));
  EXPECT_EQ(in.hash(1101, 20), std::to_string(fnv(inline20, 20)));
  EXPECT_EQ(in.hash(4096, 4096), std::to_string(fnv(src + 4096, 4096)));
  EXPECT_EQ(in.hash(16384, 4097), std::to_string(fnv(src + 12288, 4097)));
  EXPECT_EQ(in.hash(24576, 8), std::to_string(fnv(src + 200, 8)));
  EXPECT_EQ(in.hash(1016, 85), std::to_string(fnv(std::vector<uint8_t>(85).data(), 85))) << "bytes between the WRITEs";
  EXPECT_EQ(res[0], 0u) << "the FA's original value";
  EXPECT_EQ(res[1], 5u) << "the first CS's original value";
  EXPECT_EQ(res[2], 42u) << "the second CS's original value";
  EXPECT_EQ(in.word(8192), "42");
  EXPECT_EQ(in.finish(), 0);
}

// Puts with signal, as a communicator makes them: a WRITE into the data window, then a
// fetch-and-add on a word of the signal window (another MR, another mapping), repeated
// behind one doorbell. The short path keeps both mappings pinned through the run, and
// every WRITE and signal lands.
TEST(wire_shm_short_path, puts_with_signals_to_two_windows_alternate_through_it) {
  initiator in;
  ASSERT_NO_FATAL_FAILURE(in.prime());
  const auto [sig_addr, sig_rkey] = in.signal_window();
  const uint32_t lkey = in.s->mr.lkey();
  auto* res = reinterpret_cast<uint64_t*>(in.s->buf.data() + 65536);
  // The first FA asks for the signal window's grant over the frame path.
  post_fa(*in.s->ep.h, sig_addr, sig_rkey, 1, sg(res, 8, lkey));
  ASSERT_TRUE(wait_cqe(in.s->ep, false).c.ok());
  constexpr uint32_t puts = 20;
  const uint64_t before = short_path_wqes();
  ASSERT_NO_FATAL_FAILURE(in.puts_with_signal(puts, sig_addr + 8, sig_rkey, res + 1, lkey));
  EXPECT_EQ(short_path_wqes() - before, 2 * puts);
  EXPECT_EQ(in.hash(1024, 8 * puts), std::to_string(fnv(in.s->buf.data(), 8 * puts)));
  EXPECT_EQ(in.ask("sigword 1"), std::to_string(puts));
  EXPECT_EQ(in.ask("sigword 0"), "1");
  // The leases go back within a millisecond of the last doorbell (the engine's sweep): the
  // owner's deregistrations do not wait for us (a lease left held: revoke_wait_ms, 2 s).
  EXPECT_LT(std::stol(in.ask("dereg_both")), 1000) << "a window's mapping was left in use";
  EXPECT_EQ(in.finish(), 0);
}

// A communicator's put with signal: the WRITE's source and the signal's result buffer are
// two MRs, so the short path alternates two local keys; its cache holds both, so 20 such
// puts look each up once (a one-key cache looked one up for every WQE: 40), and every
// WQE still lands where it should.
TEST(wire_shm_short_path, puts_with_signals_from_two_local_mrs_look_each_key_up_once) {
  initiator in;
  ASSERT_NO_FATAL_FAILURE(in.prime());
  const auto [sig_addr, sig_rkey] = in.signal_window();
  std::vector<uint64_t> res(64, ~uint64_t{0});
  verbs::mr res_mr(in.s->pd, res.data(), res.size() * 8, verbs::access::local_write);
  post_fa(*in.s->ep.h, sig_addr, sig_rkey, 1, sg(res.data(), 8, res_mr.lkey()));  // maps the signal window
  ASSERT_TRUE(wait_cqe(in.s->ep, false).c.ok());
  constexpr uint32_t puts = 20;
  const uint64_t wqes_before = short_path_wqes();
  const uint64_t lookups_before = gdaki::soft::wire::test_hooks::short_path_key_lookups.load();
  ASSERT_NO_FATAL_FAILURE(in.puts_with_signal(puts, sig_addr + 16, sig_rkey, &res[1], res_mr.lkey()));
  EXPECT_EQ(short_path_wqes() - wqes_before, 2 * puts);
  EXPECT_LE(gdaki::soft::wire::test_hooks::short_path_key_lookups.load() - lookups_before, 2u)
      << "the cache did not keep both local keys";
  EXPECT_EQ(in.hash(1024, 8 * puts), std::to_string(fnv(in.s->buf.data(), 8 * puts)));
  EXPECT_EQ(in.ask("sigword 2"), std::to_string(puts));
  EXPECT_EQ(in.finish(), 0);
}

// The short path keeps its count in a peer grant's revocation slot across doorbells (a
// lease, mapped_pin.hpp): 200 WRITEs rung one by one take it once, not 200 times. It
// goes back once the QP has stopped (the engine's sweep), so the owner's deregistration,
// which waits for every count, returns at once; and while the QP streams, it sees the
// grant revoked (at its next run's start, or at the liveness look of every 256th copy)
// and gives the count back, so deregistration does not wait for the stream to end, and
// no WRITE after it lands through the old mapping: the stream fails. (Without the sweep
// the first test waits 2 s; without all three ways back, the second: both seen.)
TEST(wire_shm_short_path, a_lease_on_a_peer_mapping_spans_doorbells_and_never_holds_up_a_deregistration) {
  namespace hooks = gdaki::soft::wire::test_hooks;
  initiator in;
  ASSERT_NO_FATAL_FAILURE(in.prime());
  dev::qp_handle& h = *in.s->ep.h;
  const uint64_t leases = hooks::short_path_leases.load(), before = short_path_wqes();
  for (uint32_t i = 0; i < 200; ++i) {
    const uint64_t v = 1000 + i;
    post_write_inline(h, in.t.buf + 256, in.t.rkey, &v, 8);
    ASSERT_TRUE(wait_cqe(in.s->ep, false).c.ok()) << "WRITE " << i;
  }
  EXPECT_EQ(short_path_wqes() - before, 200u);
  EXPECT_LE(hooks::short_path_leases.load() - leases, 2u) << "a count per doorbell, not a lease";
  EXPECT_EQ(in.word(256), "1199");
  // Idle now: the owner's deregistration must not wait for us (2 s if it did).
  EXPECT_LT(std::stol(in.ask("dereg_both")), 1000) << "an idle QP's lease held the owner up";
  EXPECT_EQ(in.finish(), 0);
}

TEST(wire_shm_short_path, a_streaming_qp_gives_its_lease_back_when_the_owner_deregisters) {
  initiator in;
  ASSERT_NO_FATAL_FAILURE(in.prime());
  dev::qp_handle& h = *in.s->ep.h;
  std::atomic<bool> started{false};
  std::atomic<uint32_t> writes{0};
  syndrome failed = syndrome::none;
  std::thread stream([&] {
    for (uint64_t v = 1;; ++v) {
      post_write_inline(h, in.t.buf + 512, in.t.rkey, &v, 8);
      const got c = wait_cqe(in.s->ep, false);
      if (!c.ok) return;  // no CQE: the test fails below
      if (!c.c.ok()) {
        failed = c.c.syndrome;
        return;
      }
      writes.fetch_add(1);
      started = true;
    }
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const long ms = std::stol(in.ask("dereg_both"));
  stream.join();
  EXPECT_LT(ms, 1000) << "the deregistration waited for the stream's lease";
  EXPECT_EQ(failed, syndrome::remote_access) << "a WRITE after the deregistration must fail, not land";
  EXPECT_GT(writes.load(), 0u);
  EXPECT_EQ(in.finish(), 0);
}

// Deregistering the MR a WRITE reads from while the executor that has checked its key is
// still to read it (the short path reads under an announcement, not the key table's
// count: key_lock.hpp): deregistration returns only after that read, so memory a program
// takes back as soon as dereg_mr returns is never read again. The executor is held there
// by a test hook; a deregistration that did not wait would return at once, the page is
// then made unreadable, and the late read kills the test.
TEST(wire_shm_short_path, deregistering_a_source_waits_for_the_executor_about_to_read_it) {
  namespace hooks = gdaki::soft::wire::test_hooks;
  initiator in;
  ASSERT_NO_FATAL_FAILURE(in.prime());
  dev::qp_handle& h = *in.s->ep.h;
  const long page = ::sysconf(_SC_PAGESIZE);
  auto* src = static_cast<uint8_t*>(::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(src, MAP_FAILED);
  for (int i = 0; i < 8; ++i) src[i] = static_cast<uint8_t>(0x70 + i);
  auto src_mr = std::make_unique<verbs::mr>(in.s->pd, src, page, verbs::access::local_write);
  const dev::sge g = sg(src, 8, src_mr->lkey());
  constexpr uint32_t pause_us = 300000;
  const uint32_t pauses = hooks::short_path_source_pauses.load();
  const uint64_t before = short_path_wqes();
  hooks::short_path_source_pause_us.store(pause_us);
  std::thread poster([&] { post_write(h, in.t.buf + 4096, in.t.rkey, &g, 1); });  // its doorbell runs it
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (hooks::short_path_source_pauses.load() == pauses && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool paused = hooks::short_path_source_pauses.load() != pauses;
  const auto t0 = std::chrono::steady_clock::now();
  src_mr.reset();
  const auto took = std::chrono::steady_clock::now() - t0;
  if (paused) ::mprotect(src, page, PROT_NONE);  // a read from now on faults
  poster.join();
  hooks::short_path_source_pause_us.store(0);
  ::mprotect(src, page, PROT_READ | PROT_WRITE);
  ASSERT_TRUE(paused) << "the WRITE never reached the short path's source read";
  EXPECT_GE(took, std::chrono::microseconds(pause_us / 3)) << "deregistration returned before the read it must wait for";
  const got c = wait_cqe(in.s->ep, false);
  ASSERT_TRUE(c.ok && c.c.ok()) << "the WRITE whose key was live when it was checked completes";
  EXPECT_EQ(short_path_wqes() - before, 1u);
  EXPECT_EQ(in.hash(4096, 8), std::to_string(fnv(src, 8)));
  ::munmap(src, page);
  EXPECT_EQ(in.finish(), 0);
}

// One bad WQE after a good one of the same kind (which fills the short path's caches):
// it fails with `expect`, the target's memory stays as the good one left it, and the QP
// flushes what follows.
void run_bad(const std::string& which, syndrome expect) {
  initiator in;
  ASSERT_NO_FATAL_FAILURE(in.prime());
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t lkey = in.s->mr.lkey(), rkey = in.t.rkey;
  uint8_t* src = in.s->buf.data();
  std::vector<uint8_t> zeros(8192);
  // A good WRITE and FA first: the short path caches the local key and pins the grant.
  const dev::sge good = sg(src + 100, 8, lkey);
  post_write(h, in.t.buf + 512, rkey, &good, 1);
  ASSERT_TRUE(wait_cqe(in.s->ep, false).c.ok());
  auto* res = reinterpret_cast<uint64_t*>(src + 65536);
  post_fa(h, in.t.buf + 520, rkey, 9, sg(res, 8, lkey));
  ASSERT_TRUE(wait_cqe(in.s->ep, false).c.ok());
  const std::string good_bytes = in.hash(0, 8192);
  const uint64_t before = short_path_wqes();
  std::vector<uint8_t> other(4096, 0x5c);
  std::unique_ptr<verbs::mr> other_mr;
  if (which == "deregistered_lkey") {
    // A second MR, used once (the short path caches its key), then deregistered.
    other_mr = std::make_unique<verbs::mr>(in.s->pd, other.data(), other.size(), verbs::access::all);
    const uint32_t old_lkey = other_mr->lkey();
    const dev::sge g = sg(other.data(), 8, old_lkey);
    post_write(h, in.t.buf + 2048, rkey, &g, 1);
    ASSERT_TRUE(wait_cqe(in.s->ep, false).c.ok());
    ASSERT_EQ(short_path_wqes() - before, 1u) << "the WRITE from the second MR took the short path";
    zeros.assign(8192, 0);
    other_mr.reset();
    const dev::sge stale = sg(other.data(), 8, old_lkey);
    post_write(h, in.t.buf + 3072, rkey, &stale, 1);
  } else if (which == "source_in_the_other_cached_mr") {
    // Both of the cache's entries filled (the good WRITE's key, then a second MR's), then a
    // WRITE that names the first key and a source inside the second MR only.
    other_mr = std::make_unique<verbs::mr>(in.s->pd, other.data(), other.size(), verbs::access::all);
    const dev::sge g = sg(other.data(), 8, other_mr->lkey());
    post_write(h, in.t.buf + 2048, rkey, &g, 1);
    ASSERT_TRUE(wait_cqe(in.s->ep, false).c.ok());
    ASSERT_EQ(short_path_wqes() - before, 1u) << "the WRITE from the second MR took the short path";
    const dev::sge wrong = sg(other.data() + 8, 8, lkey);
    post_write(h, in.t.buf + 3072, rkey, &wrong, 1);
  } else if (which == "source_outside_its_mr") {
    const dev::sge g = sg(src + in.s->buf.size() - 4, 8, lkey);
    post_write(h, in.t.buf + 3072, rkey, &g, 1);
  } else if (which == "atomic_result_without_local_write") {
    other_mr = std::make_unique<verbs::mr>(in.s->pd, other.data(), other.size(), verbs::access::remote_read);
    post_fa(h, in.t.buf + 3072, rkey, 1, sg(other.data(), 8, other_mr->lkey()));
  } else if (which == "misaligned_atomic") {
    post_fa(h, in.t.buf + 3076, rkey, 1, sg(res, 8, lkey));
  } else if (which == "write_past_the_grant") {
    const dev::sge g = sg(src, 16, lkey);
    post_write(h, in.t.buf + target_bytes - 8, rkey, &g, 1);
  }
  const got e = wait_cqe(in.s->ep, false);
  ASSERT_TRUE(e.ok) << "no CQE for the bad WQE";
  EXPECT_EQ(e.c.syndrome, expect);
  if (which == "deregistered_lkey" || which == "source_in_the_other_cached_mr") {
    // The WRITE from the second MR landed at 2048 (before it was deregistered).
    EXPECT_EQ(in.hash(2048, 8), std::to_string(fnv(other.data(), 8)));
    EXPECT_EQ(in.hash(3072, 8), std::to_string(fnv(zeros.data(), 8))) << "the stale key's WRITE landed";
  } else {
    EXPECT_EQ(in.hash(0, 8192), good_bytes) << "the refused WQE changed the target's memory";
  }
  EXPECT_EQ(in.hash(target_bytes - 8, 8), std::to_string(fnv(zeros.data(), 8)));
  post_nop(h);
  const got f = wait_cqe(in.s->ep, false);
  ASSERT_TRUE(f.ok);
  EXPECT_EQ(f.c.syndrome, syndrome::wr_flush);
  EXPECT_EQ(in.finish(), 0);
}

}  // namespace

TEST(wire_shm_short_path, a_local_key_deregistered_after_the_short_path_cached_it_fails_with_local_protection) {
  run_bad("deregistered_lkey", syndrome::local_prot);
}
TEST(wire_shm_short_path, a_source_in_the_other_cached_mr_fails_with_local_protection) {
  run_bad("source_in_the_other_cached_mr", syndrome::local_prot);
}
TEST(wire_shm_short_path, a_source_outside_its_mr_fails_with_local_protection) {
  run_bad("source_outside_its_mr", syndrome::local_prot);
}
TEST(wire_shm_short_path, an_atomic_result_into_an_mr_without_local_write_fails_with_local_protection) {
  run_bad("atomic_result_without_local_write", syndrome::local_prot);
}
TEST(wire_shm_short_path, a_misaligned_atomic_is_refused_by_the_responder) {
  run_bad("misaligned_atomic", syndrome::remote_inval_req);
}
TEST(wire_shm_short_path, a_write_past_the_grant_is_refused_by_the_responder) {
  run_bad("write_past_the_grant", syndrome::remote_access);
}

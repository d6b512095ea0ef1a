// The shared-memory wire's mapped path: a target MR in soft::alloc_shared() memory is
// mapped by the initiator, which moves RDMA WRITE and READ data with its own memcpy.
// (1) Data lands and reads back, with the target process stopped (SIGSTOP) meanwhile:
// only the mapped path can complete then; with the path turned off the same WRITE times
// out. (2) Deregistration revokes the mapping: a later WRITE fails with a remote access
// error and the target's memory is unchanged; so does moving the target QP to ERR (the
// WRITE then fails as to any QP that takes no requests). (3) kill -9 of the target in the middle of a
// mapped stream still ends in TRANSPORT_RETRY_EXC, then flushes. (4) Atomics go through
// the mapping too (a communicator's signals): they complete with the target stopped, need
// the MR's right to atomics, and deregistration revokes them like WRITEs.
#include <dirent.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "providers/soft/wire/shm_map.hpp"
#include "wire_fixture.hpp"

using namespace wire_test;
using prm::send_opcode;
using prm::syndrome;

namespace {

constexpr size_t target_bytes = 1u << 20;

uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 31 + 5); }

// The target (shared_target: "word N" and "hash OFF LEN" look at its buffer), until "bye".
// "dereg" deregisters the MR; "check N" verifies that the first N bytes are pattern(i)
// and the rest are still zero; "qp_err" moves its QP to ERR; "reg_no_atomic" registers
// the buffer again without remote atomic and answers the new rkey.
int target_main(uint16_t port) {
  use_wire("shm");
  shared_target tg(target_bytes);
  tg.serve(port, [&](const std::string& cmd, oob::tcp_exchange& x) {
    if (cmd == "dereg") {
      tg.mr.reset();
      x.send(text("ok"));
    } else if (cmd == "qp_err") {
      tg.ep.qp.to_err();
      x.send(text("ok"));
    } else if (cmd == "reg_no_atomic") {
      // The same memory registered again without remote atomic; answers the new rkey.
      tg.mr.reset();
      tg.mr = std::make_unique<verbs::mr>(tg.pd, tg.buf, target_bytes, verbs::access::local_write |
                                                                       verbs::access::remote_write |
                                                                       verbs::access::remote_read);
      x.send(text(std::to_string(tg.mr->rkey())));
    } else if (cmd.rfind("check ", 0) == 0) {
      const size_t n = std::stoul(cmd.substr(6));
      bool ok = true;
      for (size_t i = 0; i < target_bytes && ok; ++i) ok = tg.buf[i] == (i < n ? pattern(i) : 0);
      x.send(text(ok ? "ok" : "bad"));
    }
  });
  return 0;
}

struct initiator : forked_initiator {
  explicit initiator(bool shm_map, uint32_t timeout_ms = 2000) {
    fork_target([](uint16_t port) { return target_main(port); });
    use_wire("shm", timeout_ms);
    gdaki::soft::config c = gdaki::soft::get_config();
    c.shm_map = shm_map;
    gdaki::soft::set_config(c);
    meet(target_bytes, pattern);
  }
  ~initiator() {
    gdaki::soft::config c = gdaki::soft::get_config();
    c.shm_map = true;
    gdaki::soft::set_config(c);
  }
};

// kill(SIGSTOP) returns before the threads have stopped: wait until every thread of the
// process shows state T in /proc, so nothing of the target runs after this returns.
bool stop_and_wait(pid_t pid) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (int tries = 0; tries < 2000; ++tries) {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return false;
    bool all = true, any = false;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream f(dir + "/" + e->d_name + "/stat");
      std::string line;
      std::getline(f, line);
      const size_t close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size()) continue;
      any = true;
      const char st = line[close + 2];
      all = all && (st == 'T' || st == 't');
    }
    ::closedir(d);
    if (any && all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

void write_then_read_while_stopped(bool shm_map) {
  initiator in(shm_map, 500);
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t qpn = in.s->ep.qp.qpn();
  // A first WRITE while the target runs (the mapping is granted on first use).
  uint16_t at = static_cast<uint16_t>(h.sq_reserved);
  const dev::sge first = sg(in.s->buf.data(), 4096, in.s->mr.lkey());
  post_write(h, in.t.buf, in.t.rkey, &first, 1);
  expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::rdma_write, qpn, at, 4096);
  ASSERT_TRUE(stop_and_wait(in.child)) << "the target did not stop";
  at = static_cast<uint16_t>(h.sq_reserved);
  const dev::sge g = sg(in.s->buf.data() + 4096, 64 * 1024 - 4096, in.s->mr.lkey());
  post_write(h, in.t.buf + 4096, in.t.rkey, &g, 1);
  const got w = wait_cqe(in.s->ep, false, std::chrono::milliseconds(3000));
  ASSERT_TRUE(w.ok) << "no CQE";
  if (shm_map) {
    expect_req_cqe(w, *in.s->ep.hs, send_opcode::rdma_write, qpn, at, 64 * 1024 - 4096);
    // READ it back, still through the mapping.
    std::vector<uint8_t> back(64 * 1024);
    verbs::mr mb(in.s->pd, back.data(), back.size(), verbs::access::all);
    at = static_cast<uint16_t>(h.sq_reserved);
    const dev::sge r = sg(back.data(), 64 * 1024, mb.lkey());
    post_read(h, in.t.buf, in.t.rkey, &r, 1);
    expect_req_cqe(wait_cqe(in.s->ep, false, std::chrono::milliseconds(3000)), *in.s->ep.hs, send_opcode::rdma_read, qpn,
                   at, 64 * 1024);
    EXPECT_EQ(std::memcmp(back.data(), in.s->buf.data(), back.size()), 0);
  } else {
    // The frame path needs the stopped process: the wire timeout fails the WQE.
    EXPECT_EQ(w.c.syndrome, syndrome::transport_retry_exc);
  }
  ASSERT_EQ(::kill(in.child, SIGCONT), 0);
  if (shm_map) {
    EXPECT_EQ(in.ask("check 65536"), "ok");
  }
  EXPECT_EQ(in.finish(), 0);
}

}  // namespace

TEST(wire_shm_map, writes_and_reads_complete_through_the_mapping_while_the_target_is_stopped) {
  write_then_read_while_stopped(true);
}

TEST(wire_shm_map, without_the_mapped_path_the_same_write_needs_the_target) { write_then_read_while_stopped(false); }

// WRITEs of GDAKI_SOFT_SHM_STREAM_MIN (32 KiB) or more through the mapping go with plain or
// streaming stores (stream_copy.hpp: the first epoch of the mapping's chooser runs both),
// each with new bytes and at another alignment of both ends: every one lands exactly.
TEST(wire_shm_map, large_mapped_writes_land_exactly_whichever_stores_copy_them) {
  initiator in(true);
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t qpn = in.s->ep.qp.qpn();
  for (uint32_t i = 0; i < 2 * gdaki::soft::store_chooser::first_epoch; ++i) {
    const size_t src_off = (i * 7) % 64, dst_off = (i * 61) % 64, len = 32768 + i * 997 + 3;
    uint8_t* src = in.s->buf.data() + src_off;
    for (size_t k = 0; k < len; ++k) src[k] = static_cast<uint8_t>(k * 13 + i);
    const uint16_t at = static_cast<uint16_t>(h.sq_reserved);
    const dev::sge g = sg(src, static_cast<uint32_t>(len), in.s->mr.lkey());
    post_write(h, in.t.buf + dst_off, in.t.rkey, &g, 1);
    expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::rdma_write, qpn, at,
                   static_cast<uint32_t>(len));
    ASSERT_EQ(in.ask("hash " + std::to_string(dst_off) + " " + std::to_string(len)), std::to_string(fnv(src, len)))
        << "WRITE " << i << ": " << len << " bytes from offset " << src_off << " to offset " << dst_off;
  }
  EXPECT_EQ(in.finish(), 0);
}

// Atomics through the mapping: the first one (no WRITE before it, as a communicator's
// signal window sees only atomics) asks for the grant; with the target stopped, FA and CS
// still complete with the right original values, and the word holds the result after.
// Without mapped atomics the second FA timed out (TRANSPORT_RETRY_EXC) like any frame.
TEST(wire_shm_map, atomics_complete_through_the_mapping_while_the_target_is_stopped) {
  initiator in(true, 500);
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t qpn = in.s->ep.qp.qpn();
  const uint64_t word = in.t.buf + 8192;
  auto* res = reinterpret_cast<uint64_t*>(in.s->buf.data() + 16384);
  const dev::sge r = sg(res, 8, in.s->mr.lkey());
  uint16_t at = static_cast<uint16_t>(h.sq_reserved);
  post_fa(h, word, in.t.rkey, 7, r);
  expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::atomic_fa, qpn, at, 8);
  EXPECT_EQ(*res, 0u);
  ASSERT_TRUE(stop_and_wait(in.child)) << "the target did not stop";
  at = static_cast<uint16_t>(h.sq_reserved);
  post_fa(h, word, in.t.rkey, 5, r);
  const got fa = wait_cqe(in.s->ep, false, std::chrono::milliseconds(3000));
  ASSERT_TRUE(fa.ok) << "no CQE";
  expect_req_cqe(fa, *in.s->ep.hs, send_opcode::atomic_fa, qpn, at, 8);
  EXPECT_EQ(*res, 7u);
  at = static_cast<uint16_t>(h.sq_reserved);
  post_cs(h, word, in.t.rkey, 12, 100, r);
  const got cs = wait_cqe(in.s->ep, false, std::chrono::milliseconds(3000));
  ASSERT_TRUE(cs.ok) << "no CQE";
  expect_req_cqe(cs, *in.s->ep.hs, send_opcode::atomic_cs, qpn, at, 8);
  EXPECT_EQ(*res, 12u);
  ASSERT_EQ(::kill(in.child, SIGCONT), 0);
  EXPECT_EQ(in.ask("word 8192"), "100");
  EXPECT_EQ(in.finish(), 0);
}

// A grant carries remote atomic only where the MR (and QP) allow it: an MR registered with
// remote write but not remote atomic is mapped for WRITEs, and an atomic to it still fails
// with a remote access error at the responder, leaving the word alone.
TEST(wire_shm_map, a_mapped_atomic_needs_the_mrs_right_to_atomics) {
  initiator in(true);
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t rkey = static_cast<uint32_t>(std::stoul(in.ask("reg_no_atomic")));
  const dev::sge g = sg(in.s->buf.data(), 4096, in.s->mr.lkey());
  post_write(h, in.t.buf, rkey, &g, 1);
  ASSERT_TRUE(wait_cqe(in.s->ep, false).c.ok());
  auto* res = reinterpret_cast<uint64_t*>(in.s->buf.data() + 16384);
  post_fa(h, in.t.buf + 8, rkey, 1, sg(res, 8, in.s->mr.lkey()));
  const got e = wait_cqe(in.s->ep, false);
  ASSERT_TRUE(e.ok) << "no CQE";
  EXPECT_EQ(e.c.syndrome, syndrome::remote_access);
  EXPECT_EQ(in.ask("check 4096"), "ok") << "the refused atomic changed the target's memory";
  EXPECT_EQ(in.finish(), 0);
}

// A mapped atomic, then deregistration: the next atomic fails with a remote access error
// and the word keeps the first atomic's result.
TEST(wire_shm_map, deregistration_revokes_mapped_atomics) {
  initiator in(true);
  dev::qp_handle& h = *in.s->ep.h;
  auto* res = reinterpret_cast<uint64_t*>(in.s->buf.data() + 16384);
  const dev::sge r = sg(res, 8, in.s->mr.lkey());
  post_fa(h, in.t.buf + 64, in.t.rkey, 3, r);
  ASSERT_TRUE(wait_cqe(in.s->ep, false).c.ok());
  EXPECT_EQ(in.ask("dereg"), "ok");
  post_fa(h, in.t.buf + 64, in.t.rkey, 3, r);
  const got e = wait_cqe(in.s->ep, false);
  ASSERT_TRUE(e.ok) << "no CQE";
  EXPECT_EQ(e.c.syndrome, syndrome::remote_access);
  EXPECT_EQ(in.ask("word 64"), "3") << "an atomic after deregistration changed the target's memory";
  EXPECT_EQ(in.finish(), 0);
}

// A mapped WRITE, then `cmd` at the target, then a WRITE that must fail with `expect`
// and leave the target's memory as the first WRITE left it.
static void revoked_by(const std::string& cmd, syndrome expect) {
  initiator in(true);
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t qpn = in.s->ep.qp.qpn();
  const uint16_t at = static_cast<uint16_t>(h.sq_reserved);
  const dev::sge g = sg(in.s->buf.data(), 1000, in.s->mr.lkey());
  post_write(h, in.t.buf, in.t.rkey, &g, 1);
  expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::rdma_write, qpn, at, 1000);
  EXPECT_EQ(in.ask(cmd), "ok");
  const dev::sge more = sg(in.s->buf.data() + 1000, 5000, in.s->mr.lkey());
  post_write(h, in.t.buf + 1000, in.t.rkey, &more, 1);
  const got e = wait_cqe(in.s->ep, false);
  ASSERT_TRUE(e.ok) << "no CQE";
  EXPECT_EQ(e.c.syndrome, expect);
  EXPECT_EQ(in.ask("check 1000"), "ok") << "a WRITE after '" << cmd << "' changed the target's memory";
  EXPECT_EQ(in.finish(), 0);
}

TEST(wire_shm_map, deregistration_revokes_the_mapping_and_later_writes_fail) {
  revoked_by("dereg", syndrome::remote_access);
}

// The WRITE then fails as to any QP that takes no requests.
TEST(wire_shm_map, a_target_qp_in_err_takes_no_more_mapped_writes) { revoked_by("qp_err", syndrome::transport_retry_exc); }

TEST(wire_shm_map, a_killed_target_ends_a_mapped_stream_in_retry_exceeded_then_flush) {
  constexpr uint32_t timeout_ms = 500;
  initiator in(true, timeout_ms);
  dev::qp_handle& h = *in.s->ep.h;
  const dev::sge g = sg(in.s->buf.data(), 4096, in.s->mr.lkey());
  auto write_one = [&] {
    post_write(h, in.t.buf, in.t.rkey, &g, 1);
    return wait_cqe(in.s->ep, false, std::chrono::milliseconds(4 * timeout_ms));
  };
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(write_one().c.ok());
  ::kill(in.child, SIGKILL);
  EXPECT_NE(reap(in.child), 0);
  const auto t0 = std::chrono::steady_clock::now();
  syndrome first = syndrome::none;
  for (int i = 0; i < 2000 && first == syndrome::none; ++i) {
    const got c = write_one();
    ASSERT_TRUE(c.ok) << "no CQE after the kill";
    first = c.c.syndrome;
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(first, syndrome::transport_retry_exc);
  EXPECT_LE(ms, timeout_ms + 1000) << "the error came " << ms << " ms after the kill";
  const got f = write_one();
  ASSERT_TRUE(f.ok);
  EXPECT_EQ(f.c.syndrome, syndrome::wr_flush);
}

// The revocation table tells grants apart by epoch, not by key alone. A key-table slot's
// tag differs only from its previous one, so the registration after next may get the very
// rkey of an old one; a peer still holding the old registration's mapping (whose file the
// owner no longer uses) would then pass a key-only check once anyone is granted the new
// registration, and its writes would land where nobody reads. That is how the
// communicator's multi-process scenario lost a put's data while its signal arrived
// (comm_procs under a loaded ctest). The owner's side: every revoke moves the slot's epoch
// on, so the same rkey granted again carries another epoch; the peer's copy compares both.
TEST(wire_shm_map, a_grant_of_a_reused_rkey_carries_a_new_epoch) {
  namespace shm = gdaki::soft::shm;
  const uint32_t rkey = ((shm::table_slots - 7 + 2) << 8) | 0x5a;  // a slot no MR here uses
  uint32_t first = 0, again = 0, third = 0;
  ASSERT_TRUE(shm::grant(rkey, &first));
  shm::revoke(rkey, 10);
  ASSERT_TRUE(shm::grant(rkey, &again));
  EXPECT_NE(again, first) << "the same rkey granted after a revoke must not look like the old grant";
  ASSERT_TRUE(shm::grant(rkey, &third));
  EXPECT_EQ(third, again) << "granting again without a revoke keeps the epoch";
  shm::revoke(rkey, 10);
}

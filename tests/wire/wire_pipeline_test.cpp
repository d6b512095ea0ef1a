// The wire pipelines requests (config::wire_window of them per connection): these tests
// prove that what RC promises still holds with many requests in flight, over the
// shared-memory wire and over TCP. (1) A burst of WRITEs, atomics and a READ posted
// without waiting executes in order at the responder and completes in order. (2) A
// request behind one that drew an RNR NAK is not executed before it: the responder drops
// requests out of PSN sequence until the requester sends the refused one again.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <memory>
#include <thread>

#include "../../src/providers/soft/wire/wire_test_hooks.hpp"
#include "wire_fixture.hpp"

using namespace wire_test;
using prm::send_opcode;

namespace {

constexpr size_t target_bytes = 1u << 20;
constexpr uint32_t slot_bytes = 4096;
constexpr int burst = 16;

// The target: connects (receive WQEs only when asked), then serves until "bye". With
// `rnr_probe` it first reports whether word `probe_off` is still zero 100 ms after the
// initiator says its SEND and the WRITE behind it are posted, and only then posts the
// receive WQE the SEND needs.
int target_main(uint16_t port, const char* wire, bool rnr_probe, uint64_t probe_off) {
  use_wire(wire);
  side t(target_bytes);
  oob::tcp_exchange x = oob::tcp_exchange::connect("127.0.0.1", port);
  const setup_blob peer = from_bytes(x.recv());
  verbs::qp_attr a = remote_attr(peer, peer.token);
  a.rnr_retry = 7;  // retry forever: the initiator's SEND waits for our receive WQE
  verbs::connect_rc(t.ep.qp, peer.qpn, verbs::access::all, a);
  t.ep.export_handles(true);
  x.send(to_bytes(t.blob(peer.token)));
  if (rnr_probe) {
    (void)x.recv();  // "posted"
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Nothing may have touched the word: the WRITE waits behind the refused SEND.
    uint64_t v = 0;
    std::memcpy(&v, t.buf.data() + probe_off, 8);
    const dev::sge r = sg(t.buf.data() + target_bytes / 2, 256, t.mr.lkey());
    if (dev::rq_post(*t.ep.h, &r, 1) != gdaki::status::ok) return 3;
    x.send(text(v == 0 ? "untouched" : "written early"));
    const got g = wait_cqe(t.ep, true);
    if (!g.ok || !g.c.ok()) return 4;
  }
  (void)x.recv();  // "bye"
  return 0;
}

struct initiator {
  oob::tcp_exchange srv = oob::tcp_exchange::listen("127.0.0.1");
  pid_t child = -1;
  std::unique_ptr<side> s;
  setup_blob t{};
  std::vector<uint8_t> back = std::vector<uint8_t>(target_bytes);
  verbs::mr mback;

  initiator(const char* wire, bool rnr_probe, uint64_t probe_off, uint32_t rnr_retry) {
    child = fork_peer(srv.port(), [=](uint16_t port) { return target_main(port, wire, rnr_probe, probe_off); });
    use_wire(wire);
    endpoint_options o;
    o.sq_wqebbs = 256;
    o.cq_depth = 256;
    s = std::make_unique<side>(target_bytes, o);
    for (size_t i = 0; i < s->buf.size(); ++i) s->buf[i] = static_cast<uint8_t>(i * 29 + 3);
    mback = verbs::mr(s->pd, back.data(), back.size(), verbs::access::all);
    srv.accept();
    const auto token = random_token();
    srv.send(to_bytes(s->blob(token.data())));
    t = from_bytes(srv.recv());
    verbs::qp_attr a = remote_attr(t, token.data());
    a.rnr_retry = rnr_retry;
    verbs::connect_rc(s->ep.qp, t.qpn, verbs::access::all, a);
    s->ep.export_handles(true);
  }
  int finish() {
    srv.send(text("bye"));
    return reap(child);
  }
};

void run_in_order_burst(const char* wire) {
  initiator in(wire, false, 0, 3);
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t qpn = in.s->ep.qp.qpn();
  const uint64_t word = in.t.buf, counter = in.t.buf + 64, slots = in.t.buf + 4096;
  uint64_t* results = reinterpret_cast<uint64_t*>(in.back.data());
  struct posted {
    send_opcode op;
    uint16_t index;
    uint32_t len;
  };
  std::vector<posted> order;
  auto note = [&](send_opcode op, uint32_t len) { order.push_back({op, static_cast<uint16_t>(h.sq_reserved), len}); };
  // All of it goes out before any response is read: 3 * 16 + 2 requests in flight.
  for (uint64_t i = 1; i <= burst; ++i) {
    note(send_opcode::rdma_write, 8);
    post_write_inline(h, word, in.t.rkey, &i, 8);
    note(send_opcode::rdma_write, slot_bytes);
    const dev::sge g = sg(in.s->buf.data() + i * 100, slot_bytes, in.s->mr.lkey());
    post_write(h, slots + (i - 1) * slot_bytes, in.t.rkey, &g, 1);
    note(send_opcode::atomic_fa, 8);
    post_fa(h, counter, in.t.rkey, 1, sg(&results[8 + i], 8, in.mback.lkey()));
  }
  note(send_opcode::rdma_read, 8);
  const dev::sge rw = sg(&results[0], 8, in.mback.lkey());
  post_read(h, word, in.t.rkey, &rw, 1);
  note(send_opcode::rdma_read, 8);
  const dev::sge rc = sg(&results[1], 8, in.mback.lkey());
  post_read(h, counter, in.t.rkey, &rc, 1);
  for (const posted& p : order) {
    expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, p.op, qpn, p.index, p.len);
  }
  // Each request saw every one before it: the READs the last value and the full count,
  // each fetch-add the count of the ones before it.
  EXPECT_EQ(results[0], uint64_t{burst}) << "READ behind the WRITEs of one word";
  EXPECT_EQ(results[1], uint64_t{burst}) << "READ behind the fetch-adds";
  for (uint64_t i = 1; i <= burst; ++i) EXPECT_EQ(results[8 + i], i - 1) << "fetch-add " << i;
  // And the WRITEs' payloads all landed where they were sent.
  const dev::sge all = sg(in.back.data() + 8192, burst * slot_bytes, in.mback.lkey());
  const uint16_t at = static_cast<uint16_t>(h.sq_reserved);
  post_read(h, slots, in.t.rkey, &all, 1);
  expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::rdma_read, qpn, at, burst * slot_bytes);
  for (uint64_t i = 1; i <= burst; ++i) {
    EXPECT_EQ(std::memcmp(in.back.data() + 8192 + (i - 1) * slot_bytes, in.s->buf.data() + i * 100, slot_bytes), 0)
        << "slot " << i;
  }
  EXPECT_EQ(in.finish(), 0);
}

void run_rnr_holds_back(const char* wire) {
  constexpr uint64_t probe_off = 128;
  initiator in(wire, true, probe_off, 7);
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t qpn = in.s->ep.qp.qpn();
  const uint16_t send_at = static_cast<uint16_t>(h.sq_reserved);
  const dev::sge g = sg(in.s->buf.data(), 64, in.s->mr.lkey());
  post_send(h, &g, 1);  // no receive WQE at the target yet: RNR NAK, retried forever
  const uint16_t write_at = static_cast<uint16_t>(h.sq_reserved);
  const uint64_t one = 1;
  post_write_inline(h, in.t.buf + probe_off, in.t.rkey, &one, 8);
  in.srv.send(text("posted"));
  EXPECT_EQ(text(in.srv.recv()), "untouched") << "a WRITE behind an RNR-refused SEND executed before it";
  expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::send, qpn, send_at, 64);
  expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::rdma_write, qpn, write_at, 8);
  // Once the SEND went through, the WRITE did too (read back over the wire, in order).
  uint64_t v = 0;
  const dev::sge r = sg(in.back.data(), 8, in.mback.lkey());
  const uint16_t read_at = static_cast<uint16_t>(h.sq_reserved);
  post_read(h, in.t.buf + probe_off, in.t.rkey, &r, 1);
  expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::rdma_read, qpn, read_at, 8);
  std::memcpy(&v, in.back.data(), 8);
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(in.finish(), 0);
}

// Small WRITEs posted while earlier ones' answers are due leave together: with the target
// stopped (SIGSTOP) nothing is answered, so the first few WRITEs go alone (up to
// hold_behind_sent = 4 unanswered, wire_requester.cpp) and the rest wait in the
// connection's queue until those answers come; then they go in one send
// (client_conn::tx). Each one still lands, in order, and completes once. One send per
// WQE (before) fails the count.
void run_small_writes_leave_together(const char* wire) {
  constexpr uint64_t small_burst = 200;
  initiator in(wire, false, 0, 3);
  dev::qp_handle& h = *in.s->ep.h;
  const uint32_t qpn = in.s->ep.qp.qpn();
  // Bound first (the bind waits for its reply, which a stopped target never sends).
  const uint64_t zero = 0;
  const uint16_t first_at = static_cast<uint16_t>(h.sq_reserved);
  post_write_inline(h, in.t.buf, in.t.rkey, &zero, 8);
  expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::rdma_write, qpn, first_at, 8);
  ASSERT_EQ(::kill(in.child, SIGSTOP), 0);
  // kill() returns before every thread of the target has stopped; waitpid reports the
  // stop once the whole process has.
  int st = 0;
  ASSERT_EQ(::waitpid(in.child, &st, WUNTRACED), in.child);
  ASSERT_TRUE(WIFSTOPPED(st));
  const uint64_t sends_before = gdaki::soft::wire::test_hooks::request_sends.load();
  std::vector<uint16_t> at;
  for (uint64_t i = 1; i <= small_burst; ++i) {
    at.push_back(static_cast<uint16_t>(h.sq_reserved));
    const uint64_t v = i * 0x9e3779b97f4a7c15ull;
    post_write_inline(h, in.t.buf + 8 * i, in.t.rkey, &v, 8);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the engine had its chance to send
  const uint64_t sends_stopped = gdaki::soft::wire::test_hooks::request_sends.load() - sends_before;
  ASSERT_EQ(::kill(in.child, SIGCONT), 0);
  for (uint16_t index : at) expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::rdma_write, qpn, index, 8);
  const uint64_t sends = gdaki::soft::wire::test_hooks::request_sends.load() - sends_before;
  EXPECT_LE(sends_stopped, 4u) << "while no answer came, only the first 4 WRITEs may have been sent";
  EXPECT_LE(sends, 5u) << small_burst << " small WRITEs took " << sends << " sends";
  const dev::sge back = sg(in.back.data(), 8 * (small_burst + 1), in.mback.lkey());
  const uint16_t read_at = static_cast<uint16_t>(h.sq_reserved);
  post_read(h, in.t.buf, in.t.rkey, &back, 1);
  expect_req_cqe(wait_cqe(in.s->ep, false), *in.s->ep.hs, send_opcode::rdma_read, qpn, read_at, 8 * (small_burst + 1));
  for (uint64_t i = 1; i <= small_burst; ++i) {
    uint64_t v = 0;
    std::memcpy(&v, in.back.data() + 8 * i, 8);
    EXPECT_EQ(v, i * 0x9e3779b97f4a7c15ull) << "WRITE " << i;
  }
  EXPECT_EQ(in.finish(), 0);
}

}  // namespace

TEST(wire_tcp, small_writes_posted_while_an_answer_is_due_leave_in_one_send) {
  run_small_writes_leave_together("tcp");
}
TEST(wire_shm, small_writes_posted_while_an_answer_is_due_leave_in_one_send) {
  run_small_writes_leave_together("shm");
}
TEST(wire_tcp, a_pipelined_burst_executes_and_completes_in_order) { run_in_order_burst("tcp"); }
TEST(wire_shm, a_pipelined_burst_executes_and_completes_in_order) { run_in_order_burst("shm"); }
TEST(wire_tcp, a_request_behind_an_rnr_refused_one_waits_for_it) { run_rnr_holds_back("tcp"); }
TEST(wire_shm, a_request_behind_an_rnr_refused_one_waits_for_it) { run_rnr_holds_back("shm"); }

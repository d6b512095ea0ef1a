// Failures on the wire: a peer killed in the middle of a stream, and a rogue client.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <string>
#include <thread>

#include "../../src/providers/soft/wire/wire_test_hooks.hpp"
#include "rogue_client.hpp"
#include "wire_fixture.hpp"

using namespace wire_test;
using prm::send_opcode;
namespace wp = gdaki::soft::wire;

namespace {

constexpr uint32_t timeout_ms = 500;  // the configured bound for these tests

// A target that connects its QP to the initiator and serves until told "bye" (or killed).
// Asked "word OFF", it answers the 8 bytes of its buffer at OFF, in decimal.
int serving_target(uint16_t port, const char* wire) {
  use_wire(wire, timeout_ms);
  side t(1u << 20);
  oob::tcp_exchange x = oob::tcp_exchange::connect("127.0.0.1", port);
  const setup_blob peer = from_bytes(x.recv());
  t.connect(peer, peer.token);
  x.send(to_bytes(t.blob(peer.token)));
  for (;;) {
    const std::string cmd = text(x.recv(60000));
    if (cmd.rfind("word ", 0) != 0) return 0;  // "bye"
    uint64_t v = 0;
    std::memcpy(&v, t.buf.data() + std::stoul(cmd.substr(5)), 8);
    x.send(text(std::to_string(v)));
  }
}

struct initiator_link {
  oob::tcp_exchange srv;
  pid_t child = -1;
  setup_blob t{};
};

initiator_link start_target(side& s, const std::array<uint8_t, 16>& token, const char* wire,
                            const verbs::qp_attr& attr = fast_attr()) {
  initiator_link l;
  l.srv = oob::tcp_exchange::listen("127.0.0.1");
  l.child = spawn_peer("serving_target", l.srv.port(), wire);
  l.srv.accept();
  l.srv.send(to_bytes(s.blob(token.data())));
  l.t = from_bytes(l.srv.recv());
  s.connect(l.t, token.data(), attr);
  return l;
}

void peer_killed_mid_stream_fails_within_the_bound_then_a_new_qp_works(const char* wire) {
  use_wire(wire, timeout_ms);
  side s(1u << 20);
  for (size_t i = 0; i < s.buf.size(); ++i) s.buf[i] = static_cast<uint8_t>(i);
  const auto token = random_token();
  initiator_link l = start_target(s, token, wire);
  dev::qp_handle& h = *s.ep.h;
  const dev::sge g = sg(s.buf.data(), 65536, s.mr.lkey());
  for (int i = 0; i < 20; ++i) {
    post_write(h, l.t.buf, l.t.rkey, &g, 1);
    ASSERT_TRUE(wait_cqe(s.ep, false).c.ok());
  }
  // Kill the peer with WRITEs outstanding and keep posting.
  for (int i = 0; i < 4; ++i) post_write(h, l.t.buf, l.t.rkey, &g, 1);
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(l.child, SIGKILL);
  EXPECT_EQ(reap(l.child), 128 + SIGKILL);
  for (int i = 0; i < 4; ++i) post_write(h, l.t.buf, l.t.rkey, &g, 1);
  // Some of the first four may have completed before the kill; then one error, then flushes.
  got first;
  int ok_before = 0;
  for (;;) {
    first = wait_cqe(s.ep, false, std::chrono::milliseconds(timeout_ms * 4));
    ASSERT_TRUE(first.ok) << "no CQE after the peer died";
    if (!first.c.ok()) break;
    ++ok_before;
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LE(ok_before, 4);
  EXPECT_EQ(first.c.syndrome, prm::syndrome::transport_retry_exc);
  EXPECT_LE(took, std::chrono::milliseconds(timeout_ms + 500)) << "the error CQE came late";
  for (int i = ok_before + 1; i < 8; ++i) {
    const got f = wait_cqe(s.ep, false);
    ASSERT_TRUE(f.ok);
    EXPECT_EQ(f.c.syndrome, prm::syndrome::wr_flush);
  }
  EXPECT_EQ(s.ep.qp.state(), verbs::qp_state::err);

  // A restarted peer: a new QP on the same device connects and works.
  side s2(1u << 20);
  for (size_t i = 0; i < s2.buf.size(); ++i) s2.buf[i] = static_cast<uint8_t>(i * 3);
  const auto token2 = random_token();
  initiator_link l2 = start_target(s2, token2, wire);
  const dev::sge g2 = sg(s2.buf.data(), 4096, s2.mr.lkey());
  post_write(*s2.ep.h, l2.t.buf, l2.t.rkey, &g2, 1);
  EXPECT_TRUE(wait_cqe(s2.ep, false).c.ok());
  const dev::sge r2 = sg(s2.buf.data() + 8192, 4096, s2.mr.lkey());
  post_read(*s2.ep.h, l2.t.buf, l2.t.rkey, &r2, 1);
  EXPECT_TRUE(wait_cqe(s2.ep, false).c.ok());
  EXPECT_EQ(std::memcmp(s2.buf.data(), s2.buf.data() + 8192, 4096), 0);
  l2.srv.send(text("bye"));
  EXPECT_EQ(reap(l2.child), 0);
}

TEST(wire_failures, tcp_peer_killed_mid_stream_gives_retry_exceeded_then_flush_and_a_new_qp_connects) {
  peer_killed_mid_stream_fails_within_the_bound_then_a_new_qp_works("tcp");
}

TEST(wire_failures, shm_peer_killed_mid_stream_gives_retry_exceeded_then_flush_and_a_new_qp_connects) {
  peer_killed_mid_stream_fails_within_the_bound_then_a_new_qp_works("shm");
}

// A peer answers three WRITEs and then closes its end (it exits) before we have read the
// answers; our next WRITE's send then finds the connection broken. The three had their
// ACKs in our socket: they complete, and only the one the peer never saw fails, once the
// QP's transport timer has run out, as a NIC that retries it reports it. (A NIC has the
// ACKs that arrived before its peer went. Failing everything in flight at the broken send
// lost them, and failing the last one at once came before a NIC would:
// rdma-core's ibv_srq_pingpong, whose server exits as soon as it has its counts, once saw a
// SEND complete with TRANSPORT_RETRY_EXC in the middle of its last poll.)
// Over TCP the send after the peer's close still succeeds (the peer's kernel answers it
// with a reset), so no send breaks: the requester's next look reads the answers, then the
// end of the stream, and the outcome must be the same. There the test lets the looks read
// again once the fourth WRITE is posted (the reset has come or is on its way).
void answers_before_the_peer_closed_complete_and_the_lost_write_fails_after_the_timer(const char* wire) {
  use_wire(wire, timeout_ms);  // frames: the target's buffer is not mappable
  side s(1u << 20);
  for (size_t i = 0; i < s.buf.size(); ++i) s.buf[i] = static_cast<uint8_t>(i * 7 + 1);
  const auto token = random_token();
  verbs::qp_attr timers = fast_attr();
  timers.timeout = 13;  // 4.096 us * 2^13 = 33.6 ms per try
  timers.retry_cnt = 3;
  const auto transport_timer = std::chrono::microseconds(4 * (4096 << 13) / 1000);  // 134 ms, under timeout_ms
  initiator_link l = start_target(s, token, wire, timers);
  dev::qp_handle& h = *s.ep.h;
  const dev::sge first = sg(s.buf.data(), 4096, s.mr.lkey());
  post_write(h, l.t.buf, l.t.rkey, &first, 1);
  ASSERT_TRUE(wait_cqe(s.ep, false).c.ok());  // connected and bound

  // Our looks leave the answers unread from here on, as if they came between two looks;
  // only the read after the broken send takes them.
  struct hold {
    hold() { gdaki::soft::wire::test_hooks::hold_responses.store(true); }
    ~hold() { release(); }
    void release() const { gdaki::soft::wire::test_hooks::hold_responses.store(false); }
  } const held;
  for (uint32_t i = 1; i <= 3; ++i) {
    const dev::sge g = sg(s.buf.data() + 4096 * i, 4096, s.mr.lkey());
    post_write(h, l.t.buf + 4096 * i, l.t.rkey, &g, 1);
  }
  // The third WRITE has landed at the target (so its ACK is on its way), then it exits.
  uint64_t want = 0;
  std::memcpy(&want, s.buf.data() + 3 * 4096, 8);
  const auto word_at_target = [&l] {
    l.srv.send(text("word 12288"));
    return std::stoull(text(l.srv.recv()));
  };
  const auto t0 = std::chrono::steady_clock::now();
  while (word_at_target() != want) {
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(timeout_ms)) << "the WRITEs did not land";
  }
  l.srv.send(text("bye"));
  ASSERT_EQ(reap(l.child), 0);

  const dev::sge g = sg(s.buf.data() + 4 * 4096, 4096, s.mr.lkey());
  const auto posted = std::chrono::steady_clock::now();
  post_write(h, l.t.buf + 4 * 4096, l.t.rkey, &g, 1);
  if (std::string(wire) == "tcp") {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    held.release();
  }
  for (int i = 1; i <= 3; ++i) {
    const got c = wait_cqe(s.ep, false);
    ASSERT_TRUE(c.ok) << "no CQE for WRITE " << i;
    EXPECT_TRUE(c.c.ok()) << "WRITE " << i << ", answered before the peer went: " << prm::to_string(c.c.syndrome);
  }
  const got last = wait_cqe(s.ep, false);
  const auto failed_after = std::chrono::steady_clock::now() - posted;
  ASSERT_TRUE(last.ok) << "no CQE for the WRITE the peer never saw";
  EXPECT_EQ(last.c.syndrome, prm::syndrome::transport_retry_exc);
  EXPECT_EQ(s.ep.qp.state(), verbs::qp_state::err);
  // The send time is kept in milliseconds: the timer may run out up to one early.
  EXPECT_GE(failed_after, transport_timer - std::chrono::milliseconds(1)) << "reported before the QP's timer ran out";
  EXPECT_LE(failed_after, transport_timer + std::chrono::milliseconds(timeout_ms)) << "reported late";
}

TEST(wire_failures, answers_that_came_before_the_peer_closed_complete_and_the_lost_write_fails_after_the_qps_timer) {
  answers_before_the_peer_closed_complete_and_the_lost_write_fails_after_the_timer("shm");
}

TEST(wire_failures, tcp_answers_that_came_before_the_peer_closed_complete_and_the_lost_write_fails_after_the_qps_timer) {
  answers_before_the_peer_closed_complete_and_the_lost_write_fails_after_the_timer("tcp");
}

// ---- the rogue client -------------------------------------------------------------------

using rogue::dial;
using rogue::hdr;
using rogue::send_all;
using rogue::server_closes;

// An authenticated connection (the rogue knows the job's secret but no QP token).
int hello(const uint8_t* address) { return rogue::authenticated(address); }

// The legitimate initiator (a child process): WRITEs 4 KiB of 0x11 at the target's offset
// 0, READs it back and reports.
int honest_initiator(uint16_t port) {
  use_wire("tcp", timeout_ms);
  side s(8192);
  std::memset(s.buf.data(), 0x11, 4096);
  oob::tcp_exchange x = oob::tcp_exchange::connect("127.0.0.1", port);
  const setup_blob t = from_bytes(x.recv());
  s.connect(t, t.token);
  x.send(to_bytes(s.blob(t.token)));
  (void)x.recv();  // go
  const dev::sge g = sg(s.buf.data(), 4096, s.mr.lkey());
  post_write(*s.ep.h, t.buf, t.rkey, &g, 1);
  const bool w_ok = wait_cqe(s.ep, false).c.ok();
  const dev::sge r = sg(s.buf.data() + 4096, 4096, s.mr.lkey());
  post_read(*s.ep.h, t.buf, t.rkey, &r, 1);
  const bool r_ok = wait_cqe(s.ep, false).c.ok();
  const bool same = std::memcmp(s.buf.data(), s.buf.data() + 4096, 4096) == 0;
  x.send(text(w_ok && r_ok && same ? "ok" : "failed"));
  (void)x.recv();
  return 0;
}

// Started by spawn_peer: run a peer role instead of the tests.
const bool g_is_peer = run_as_peer([](const std::string& role, uint16_t port, const std::string& arg) {
  if (role == "serving_target") return serving_target(port, arg.c_str());
  if (role == "honest_initiator") return honest_initiator(port);
  return 3;
});

TEST(wire_failures, rogue_clients_are_refused_memory_is_unchanged_and_the_real_peer_is_served) {
  use_wire("tcp", timeout_ms);
  side t(1u << 20);
  std::memset(t.buf.data(), 0x5a, t.buf.size());
  const auto token = random_token();
  oob::tcp_exchange srv = oob::tcp_exchange::listen("127.0.0.1");
  const pid_t child = spawn_peer("honest_initiator", srv.port(), "");
  srv.accept();
  const setup_blob mine = t.blob(token.data());
  srv.send(to_bytes(mine));
  const setup_blob peer = from_bytes(srv.recv());
  t.connect(peer, token.data());
  const uint8_t* a = mine.address;
  const uint32_t qpn = t.ep.qp.qpn();

  // 1. A wrong token for a real QP pair.
  {
    const int fd = hello(a);
    const wp::frame_hdr h = hdr(wp::ftype::bind, sizeof(wp::bind_body), peer.qpn, qpn);
    wp::bind_body b{};
    std::memcpy(b.token, token.data(), 16);
    b.token[7] ^= 1;
    send_all(fd, &h, sizeof(h));
    send_all(fd, &b, sizeof(b));
    EXPECT_TRUE(server_closes(fd)) << "wrong token";
  }
  // 2. Random bytes.
  {
    const int fd = dial(a);
    std::vector<uint8_t> junk(4096);
    std::mt19937 rng(42);
    for (auto& c : junk) c = static_cast<uint8_t>(rng());
    send_all(fd, junk.data(), junk.size());
    EXPECT_TRUE(server_closes(fd)) << "random bytes";
  }
  // 3. A request before any bind (a WRITE of 16 bytes into the real buffer).
  {
    const int fd = hello(a);
    wp::frame_hdr h = hdr(wp::ftype::request, sizeof(wp::request_body) + 16, peer.qpn, qpn);
    h.opcode = static_cast<uint8_t>(send_opcode::rdma_write);
    wp::request_body b{};
    b.raddr = mine.buf;
    b.rkey = mine.rkey;
    b.msg_len = 16;
    const uint8_t payload[16] = {};
    send_all(fd, &h, sizeof(h));
    send_all(fd, &b, sizeof(b));
    send_all(fd, payload, 16);
    EXPECT_TRUE(server_closes(fd)) << "request without the token";
  }
  // 4. A truncated frame: a header announcing more than is sent.
  {
    const int fd = hello(a);
    const wp::frame_hdr h = hdr(wp::ftype::bind, sizeof(wp::bind_body), peer.qpn, qpn);
    send_all(fd, &h, sizeof(h));
    send_all(fd, token.data(), 5);
    EXPECT_TRUE(server_closes(fd)) << "truncated frame";
  }
  // 5. An oversized length.
  {
    const int fd = hello(a);
    const wp::frame_hdr h = hdr(wp::ftype::request, 0xfffffff0u, peer.qpn, qpn);
    send_all(fd, &h, sizeof(h));
    EXPECT_TRUE(server_closes(fd)) << "oversized frame";
  }
  // Nothing landed, and the QP is healthy.
  for (size_t i = 0; i < t.buf.size(); ++i) {
    if (t.buf[i] != 0x5a) {
      ADD_FAILURE() << "byte " << i << " changed";
      break;
    }
  }
  EXPECT_EQ(t.ep.qp.state(), verbs::qp_state::rts);
  // The real peer is still served.
  srv.send(text("go"));
  EXPECT_EQ(text(srv.recv()), "ok");
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(t.buf[i], 0x11) << i;
  for (size_t i = 4096; i < t.buf.size(); ++i) ASSERT_EQ(t.buf[i], 0x5a) << i;
  srv.send(text("bye"));
  EXPECT_EQ(reap(child), 0);
}

}  // namespace

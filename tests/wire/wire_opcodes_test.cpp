// Every opcode between two processes on one host, over the shared-memory wire and over
// TCP, and between two "hosts" (network namespaces joined by a veth pair): the data placed
// (read back over the wire and checked by the target process) and every field of the
// requester and responder CQEs.
#include "netns.hpp"
#include "wire_fixture.hpp"

using namespace wire_test;
using prm::send_opcode;

namespace {

constexpr size_t target_bytes = 4u << 20;
constexpr uint32_t recv_bytes = 64 * 1024;

uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 13 + 7); }

// Where each side lives: one host (loopback), or two network namespaces.
struct placement {
  const char* wire = "tcp";
  std::string initiator_ip = "127.0.0.1";  // the initiator's wire listens here; OOB server too
  std::string target_ip = "127.0.0.1";     // the target's wire listens here
  std::string target_netns;                // the target process enters it first ("" = stay)
};

void listen_on(const std::string& ip) {
  gdaki::soft::config c = gdaki::soft::get_config();
  c.listen_addr = ip;
  gdaki::soft::set_config(c);
}

// The target process: posts three receive WQEs, connects, then checks the responder CQEs
// and the received bytes when told to, and reports "ok" or what was wrong.
int target_main(uint16_t port, const placement& where) {
  if (!where.target_netns.empty() && !netns::enter(where.target_netns)) return 4;
  use_wire(where.wire);
  listen_on(where.target_ip);
  side t(target_bytes + 3 * recv_bytes);
  uint8_t* rb = t.buf.data() + target_bytes;
  oob::tcp_exchange x = oob::tcp_exchange::connect(where.initiator_ip, port);
  const setup_blob peer = from_bytes(x.recv());
  t.connect(peer, peer.token);
  for (int i = 0; i < 3; ++i) {
    const dev::sge s = sg(rb + i * recv_bytes, recv_bytes, t.mr.lkey());
    if (dev::rq_post(*t.ep.h, &s, 1) != gdaki::status::ok) return 3;
  }
  x.send(to_bytes(t.blob(peer.token)));
  (void)x.recv();  // "check"
  std::string report;
  auto expect = [&](bool c, const std::string& what) {
    if (!c) report += what + "; ";
  };
  struct want {
    prm::cqe_opcode op;
    uint32_t bytes;
    uint32_t imm;
    bool se;
  };
  const want w[3] = {{prm::cqe_opcode::resp_wr_imm, 256, 0x11223344, false},
                     {prm::cqe_opcode::resp_send, 20000, 0, true},
                     {prm::cqe_opcode::resp_send_imm, 100, 0xa1b2c3d4, false}};
  for (uint16_t i = 0; i < 3; ++i) {
    const got g = wait_cqe(t.ep, true);
    if (!g.ok) {
      report += "no responder CQE " + std::to_string(i) + "; ";
      break;
    }
    const auto& c = g.raw;
    const std::string n = "cqe" + std::to_string(i) + " ";
    expect((c.op_own >> 4) == static_cast<uint8_t>(w[i].op), n + "opcode " + prm::decode_cqe(&c));
    expect(prm::from_be(c.byte_cnt) == w[i].bytes, n + "byte_cnt");
    expect(prm::from_be(c.flags_rqpn) == peer.qpn, n + "flags_rqpn (source QPN)");
    expect(prm::from_be(c.sop_drop_qpn) == t.ep.qp.qpn(), n + "qpn");
    expect(prm::from_be(c.wqe_counter) == i, n + "wqe_counter");
    expect(c.imm_inval_pkey == w[i].imm, n + "immediate");
    expect(((c.op_own >> 1) & 1) == (w[i].se ? 1 : 0), n + "solicited");
  }
  for (size_t i = 0; i < 20000; ++i) expect(rb[recv_bytes + i] == pattern(i + 5), i == 0 ? "SEND data" : "");
  expect(std::memcmp(rb + 2 * recv_bytes, "send-imm payload", 16) == 0, "SEND_IMM data");
  if (report.find_first_not_of("; ") == std::string::npos) report = "ok";
  x.send(text(report));
  (void)x.recv();  // "bye": keep serving until the initiator is done
  return 0;
}

void run_every_opcode(const placement& where) {
  oob::tcp_exchange srv = oob::tcp_exchange::listen(where.initiator_ip);
  const pid_t child = fork_peer(srv.port(), [&where](uint16_t port) { return target_main(port, where); });
  ASSERT_GT(child, 0);
  use_wire(where.wire);
  listen_on(where.initiator_ip);
  {
    side s(4u << 20);
    for (size_t i = 0; i < s.buf.size(); ++i) s.buf[i] = pattern(i);
    std::vector<uint8_t> back(2u << 20);
    verbs::mr mback(s.pd, back.data(), back.size(), verbs::access::all);
    srv.accept();
    const auto token = random_token();
    srv.send(to_bytes(s.blob(token.data())));
    const setup_blob t = from_bytes(srv.recv());
    s.connect(t, token.data());
    dev::qp_handle& h = *s.ep.h;
    const uint32_t qpn = s.ep.qp.qpn();
    uint16_t idx = 0;
    auto read_back = [&](uint64_t off, uint32_t len) {
      const dev::sge r = sg(back.data(), len, mback.lkey());
      const uint16_t at = static_cast<uint16_t>(h.sq_reserved);
      post_read(h, t.buf + off, t.rkey, &r, 1);
      expect_req_cqe(wait_cqe(s.ep, false), *s.ep.hs, send_opcode::rdma_read, qpn, at, len);
    };
    auto cqe = [&](send_opcode op, uint32_t len) {
      expect_req_cqe(wait_cqe(s.ep, false), *s.ep.hs, op, qpn, idx, len);
    };

    // WRITE, one pointer segment, 64 KiB and 1 MiB (the large one moves by single copy on shm).
    for (uint32_t len : {64u * 1024, 1u << 20}) {
      idx = static_cast<uint16_t>(h.sq_reserved);
      const dev::sge g = sg(s.buf.data(), len, s.mr.lkey());
      post_write(h, t.buf, t.rkey, &g, 1);
      cqe(send_opcode::rdma_write, len);
      read_back(0, len);
      EXPECT_EQ(std::memcmp(back.data(), s.buf.data(), len), 0) << len << "-byte WRITE then READ";
    }
    // WRITE inline.
    idx = static_cast<uint16_t>(h.sq_reserved);
    const char msg[] = "inline payload over the wire, 40 bytes.";
    post_write_inline(h, t.buf + 3000000, t.rkey, msg, 40);
    cqe(send_opcode::rdma_write, 40);
    read_back(3000000, 40);
    EXPECT_EQ(std::memcmp(back.data(), msg, 40), 0);
    // WRITE gathering three segments.
    idx = static_cast<uint16_t>(h.sq_reserved);
    const dev::sge three[3] = {sg(s.buf.data() + 100, 10, s.mr.lkey()), sg(s.buf.data(), 300, s.mr.lkey()),
                               sg(s.buf.data() + 900, 7, s.mr.lkey())};
    post_write(h, t.buf + 3100000, t.rkey, three, 3);
    cqe(send_opcode::rdma_write, 317);
    read_back(3100000, 317);
    EXPECT_EQ(std::memcmp(back.data(), s.buf.data() + 100, 10), 0);
    EXPECT_EQ(std::memcmp(back.data() + 10, s.buf.data(), 300), 0);
    EXPECT_EQ(std::memcmp(back.data() + 310, s.buf.data() + 900, 7), 0);
    // READ scattering into two local segments.
    idx = static_cast<uint16_t>(h.sq_reserved);
    std::memset(back.data(), 0, 4096);
    const dev::sge two[2] = {sg(back.data(), 100, mback.lkey()), sg(back.data() + 1000, 217, mback.lkey())};
    post_read(h, t.buf + 3100000, t.rkey, two, 2);
    cqe(send_opcode::rdma_read, 317);
    EXPECT_EQ(std::memcmp(back.data(), s.buf.data() + 100, 10), 0);
    EXPECT_EQ(std::memcmp(back.data() + 1000, s.buf.data() + 90, 210), 0);  // target bytes 100..309
    EXPECT_EQ(std::memcmp(back.data() + 1210, s.buf.data() + 900, 7), 0);
    // WRITE_IMM, SEND (20000 bytes, solicited), SEND_IMM (inline-free, 16 bytes of text).
    idx = static_cast<uint16_t>(h.sq_reserved);
    const dev::sge wi = sg(s.buf.data(), 256, s.mr.lkey());
    post_write_imm(h, t.buf + 3200000, t.rkey, &wi, 1, 0x11223344);
    cqe(send_opcode::rdma_write_imm, 256);
    idx = static_cast<uint16_t>(h.sq_reserved);
    const dev::sge se = sg(s.buf.data() + 5, 20000, s.mr.lkey());
    post_send(h, &se, 1, prm::ctrl_flags::cq_update | prm::ctrl_flags::solicited);
    cqe(send_opcode::send, 20000);
    idx = static_cast<uint16_t>(h.sq_reserved);
    std::memcpy(s.buf.data() + 3000000, "send-imm payload", 16);
    const dev::sge si = sg(s.buf.data() + 3000000, 100, s.mr.lkey());
    {
      const uint64_t st = acquire(h, dev::wqebbs_send(1));
      dev::sq_commit(h, st, dev::prepare_send_imm(h, st, &si, 1, 0xa1b2c3d4, prm::ctrl_flags::cq_update));
    }
    cqe(send_opcode::send_imm, 100);
    // Atomics: set a word, FA, CS, masked CS and masked FA; originals land locally.
    uint64_t* res = reinterpret_cast<uint64_t*>(back.data() + 8192);
    const uint64_t word = t.buf + 3300000;
    const uint64_t start = 100;
    idx = static_cast<uint16_t>(h.sq_reserved);
    post_write_inline(h, word, t.rkey, &start, 8);
    cqe(send_opcode::rdma_write, 8);
    idx = static_cast<uint16_t>(h.sq_reserved);
    post_fa(h, word, t.rkey, 5, sg(res, 8, mback.lkey()));
    cqe(send_opcode::atomic_fa, 8);
    EXPECT_EQ(*res, 100u);
    idx = static_cast<uint16_t>(h.sq_reserved);
    post_cs(h, word, t.rkey, 105, 0x7700, sg(res, 8, mback.lkey()));
    cqe(send_opcode::atomic_cs, 8);
    EXPECT_EQ(*res, 105u);
    idx = static_cast<uint16_t>(h.sq_reserved);
    {
      const uint64_t st = acquire(h, dev::wqebbs_masked_cs(8));
      dev::sq_commit(h, st,
                     dev::prepare_masked_cs(h, st, word, t.rkey, 8, 0x7700, 0xff00, 0x0011, 0x00ff,
                                            sg(res, 8, mback.lkey()), prm::ctrl_flags::cq_update));
    }
    cqe(send_opcode::atomic_masked_cs, 8);
    EXPECT_EQ(*res, 0x7700u);
    idx = static_cast<uint16_t>(h.sq_reserved);
    {
      const uint64_t st = acquire(h, dev::wqebbs_masked_cs(4));
      dev::sq_commit(h, st,
                     dev::prepare_masked_fa(h, st, word, t.rkey, 4, 0x0101, 0x0080, sg(res, 4, mback.lkey()),
                                            prm::ctrl_flags::cq_update));
    }
    cqe(send_opcode::atomic_masked_fa, 4);
    EXPECT_EQ(static_cast<uint32_t>(*res & 0xffffffff), 0x7711u);
    read_back(3300000, 8);
    uint64_t final_word = 0;
    std::memcpy(&final_word, back.data(), 8);
    // 0x7711 + 0x0101 with a field boundary at bit 7: low byte 0x11+0x01, high 0x77+0x01.
    EXPECT_EQ(final_word, 0x7812u);
    // The target checks its responder CQEs and the received bytes.
    srv.send(text("check"));
    EXPECT_EQ(text(srv.recv()), "ok");
    srv.send(text("bye"));
  }
  EXPECT_EQ(reap(child), 0);
}

placement on_one_host(const char* wire) {
  placement p;
  p.wire = wire;
  return p;
}

TEST(wire_tcp, every_opcode_between_two_processes_places_data_and_completes) { run_every_opcode(on_one_host("tcp")); }

TEST(wire_shm, every_opcode_between_two_processes_places_data_and_completes) { run_every_opcode(on_one_host("shm")); }

// Two hosts: namespaces h1 (initiator, this process) and h2 (target) joined by a veth
// pair, nothing else between them. Over TCP; then with the automatic wire choice, which
// must notice that the peer's same-host socket is not reachable (abstract unix sockets are
// per network namespace) and fall back to TCP.
void run_across_namespaces(const char* wire) {
  netns::veth_pair pair;
  std::string why;
  if (!pair.create(&why)) GTEST_SKIP() << "two network namespaces joined by a veth pair: " << why;
  netns::scoped_enter in_h1(pair.ns1);
  ASSERT_TRUE(in_h1.ok()) << "entering " << pair.ns1;
  placement where;
  where.wire = wire;
  where.initiator_ip = pair.ip1;
  where.target_ip = pair.ip2;
  where.target_netns = pair.ns2;
  run_every_opcode(where);
}

TEST(wire_netns, every_opcode_between_two_namespaces_joined_by_veth_over_tcp) { run_across_namespaces("tcp"); }

TEST(wire_netns, the_automatic_wire_falls_back_to_tcp_across_namespaces) { run_across_namespaces("auto"); }

}  // namespace

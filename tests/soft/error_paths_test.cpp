// Error paths: the exact syndrome in the error CQE (even for an unsignaled WQE), target
// memory unchanged byte for byte, WR_FLUSH CQEs for every later WQE, the QP in ERR; and
// what the responder does (PRM 6.5, 6.6).
#include <vector>

#include "soft_fixture.hpp"

using namespace soft_test;
using prm::send_opcode;
using prm::syndrome;

namespace {

struct region {
  std::vector<uint8_t> bytes, before;
  explicit region(size_t n) : bytes(n) {
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(0xa5 ^ i);
    before = bytes;
  }
  bool unchanged() const { return bytes == before; }
};

// The failing WQE was the first posted. Posts two signaled and one unsignaled WQE after it
// and expects one WR_FLUSH CQE for each, in order, then ERR.
void expect_flushes_after(endpoint& e, uint16_t next_counter) {
  const uint32_t qpn = e.qp.qpn();
  post_nop(*e.h);
  post_nop(*e.h, 0);
  post_nop(*e.h);
  for (uint16_t i = 0; i < 3; ++i) {
    expect_err_cqe(wait_cqe(e, false), *e.hs, prm::cqe_opcode::req_err, syndrome::wr_flush,
                   static_cast<uint8_t>(send_opcode::nop), qpn, static_cast<uint16_t>(next_counter + i));
  }
  EXPECT_EQ(e.qp.state(), verbs::qp_state::err);
}

// Runs one failing WRITE from a to b and checks the requester side.
void write_fails(pair& p, uint64_t raddr, uint32_t rkey, const dev::sge& s, syndrome want, region& target,
                 uint8_t flags = prm::ctrl_flags::cq_update) {
  post_write(*p.a.h, raddr, rkey, &s, 1, flags);
  expect_err_cqe(wait_cqe(p.a, false), *p.a.hs, prm::cqe_opcode::req_err, want,
                 static_cast<uint8_t>(send_opcode::rdma_write), p.a.qp.qpn(), 0);
  EXPECT_TRUE(target.unchanged()) << "a failed WRITE must not land a byte";
  expect_flushes_after(p.a, 1);
}

TEST(soft_errors, bad_lkey_is_local_protection_and_writes_nothing) {
  pair p;
  region src(256), dst(256);
  verbs::mr ms(p.pd, src.bytes.data(), 256, verbs::access::all), md(p.pd, dst.bytes.data(), 256, verbs::access::all);
  write_fails(p, addr(dst.bytes.data()), md.rkey(), sg(src.bytes.data(), 256, ms.lkey() + 0x10000), syndrome::local_prot,
              dst);
  EXPECT_EQ(p.b.qp.state(), verbs::qp_state::rts) << "nothing reached the responder";
}

TEST(soft_errors, lkey_range_out_of_bounds_is_local_protection) {
  pair p;
  region src(256), dst(256);
  verbs::mr ms(p.pd, src.bytes.data(), 128, verbs::access::all), md(p.pd, dst.bytes.data(), 256, verbs::access::all);
  write_fails(p, addr(dst.bytes.data()), md.rkey(), sg(src.bytes.data() + 64, 65, ms.lkey()), syndrome::local_prot, dst);
}

TEST(soft_errors, read_into_memory_without_local_write_is_local_protection) {
  pair p;
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::remote_read);
  verbs::mr md(p.pd, dst.bytes.data(), 64, verbs::access::remote_read);  // no local_write
  const dev::sge s = sg(dst.bytes.data(), 64, md.lkey());
  post_read(*p.a.h, addr(src.bytes.data()), ms.rkey(), &s, 1);
  expect_err_cqe(wait_cqe(p.a, false), *p.a.hs, prm::cqe_opcode::req_err, syndrome::local_prot,
                 static_cast<uint8_t>(send_opcode::rdma_read), p.a.qp.qpn(), 0);
  EXPECT_TRUE(dst.unchanged());
  expect_flushes_after(p.a, 1);
}

TEST(soft_errors, bad_rkey_is_remote_access_and_moves_the_responder_to_err) {
  pair p;
  region src(256), dst(256);
  verbs::mr ms(p.pd, src.bytes.data(), 256, verbs::access::all), md(p.pd, dst.bytes.data(), 256, verbs::access::all);
  write_fails(p, addr(dst.bytes.data()), md.rkey() ^ 0x100, sg(src.bytes.data(), 256, ms.lkey()), syndrome::remote_access,
              dst);
  EXPECT_EQ(p.b.qp.state(), verbs::qp_state::err);
}

TEST(soft_errors, an_lkey_used_as_rkey_is_remote_access) {
  pair p;
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all), md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  write_fails(p, addr(dst.bytes.data()), md.lkey(), sg(src.bytes.data(), 64, ms.lkey()), syndrome::remote_access, dst);
}

TEST(soft_errors, rkey_range_out_of_bounds_is_remote_access) {
  pair p;
  region src(256), dst(256);
  verbs::mr ms(p.pd, src.bytes.data(), 256, verbs::access::all), md(p.pd, dst.bytes.data(), 200, verbs::access::all);
  write_fails(p, addr(dst.bytes.data() + 100), md.rkey(), sg(src.bytes.data(), 101, ms.lkey()), syndrome::remote_access,
              dst);
}

TEST(soft_errors, mr_without_remote_write_is_remote_access) {
  pair p;
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all);
  verbs::mr md(p.pd, dst.bytes.data(), 64, verbs::access::local_write | verbs::access::remote_read);
  write_fails(p, addr(dst.bytes.data()), md.rkey(), sg(src.bytes.data(), 64, ms.lkey()), syndrome::remote_access, dst);
}

TEST(soft_errors, rkey_of_another_pd_is_remote_access) {
  pair p;
  verbs::pd other(p.dev);
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all), md(other, dst.bytes.data(), 64, verbs::access::all);
  write_fails(p, addr(dst.bytes.data()), md.rkey(), sg(src.bytes.data(), 64, ms.lkey()), syndrome::remote_access, dst);
}

TEST(soft_errors, qp_without_remote_write_access_is_remote_invalid_request) {
  pair p({}, {.access = verbs::access::remote_read});
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all), md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  write_fails(p, addr(dst.bytes.data()), md.rkey(), sg(src.bytes.data(), 64, ms.lkey()), syndrome::remote_inval_req, dst);
  EXPECT_EQ(p.b.qp.state(), verbs::qp_state::err);
}

TEST(soft_errors, qp_without_remote_atomic_access_rejects_atomics) {
  pair p({}, {.access = verbs::access::remote_write});
  alignas(8) uint64_t t = 5, res = 0;
  verbs::mr mt(p.pd, &t, 8, verbs::access::all), mr(p.pd, &res, 8, verbs::access::all);
  post_fa(*p.a.h, addr(&t), mt.rkey(), 1, sg(&res, 8, mr.lkey()));
  expect_err_cqe(wait_cqe(p.a, false), *p.a.hs, prm::cqe_opcode::req_err, syndrome::remote_inval_req,
                 static_cast<uint8_t>(send_opcode::atomic_fa), p.a.qp.qpn(), 0);
  EXPECT_EQ(t, 5u);
  EXPECT_EQ(res, 0u);
  expect_flushes_after(p.a, 1);
}

TEST(soft_errors, misaligned_atomic_is_remote_invalid_request) {
  pair p;
  alignas(8) uint8_t t[16] = {};
  alignas(8) uint64_t res = 0;
  verbs::mr mt(p.pd, t, 16, verbs::access::all), mr(p.pd, &res, 8, verbs::access::all);
  post_cs(*p.a.h, addr(t + 4), mt.rkey(), 0, 1, sg(&res, 8, mr.lkey()));
  expect_err_cqe(wait_cqe(p.a, false), *p.a.hs, prm::cqe_opcode::req_err, syndrome::remote_inval_req,
                 static_cast<uint8_t>(send_opcode::atomic_cs), p.a.qp.qpn(), 0);
  EXPECT_TRUE(all_zero(t, 16));
  expect_flushes_after(p.a, 1);
}

TEST(soft_errors, send_longer_than_the_receive_is_local_length_at_the_responder) {
  pair p;
  region src(256), dst(256);
  verbs::mr ms(p.pd, src.bytes.data(), 256, verbs::access::all), md(p.pd, dst.bytes.data(), 256, verbs::access::all);
  const dev::sge r = sg(dst.bytes.data(), 100, md.lkey());
  post_recv(*p.b.h, &r, 1);
  post_recv(*p.b.h, &r, 1);  // flushed when b goes to ERR
  const dev::sge s = sg(src.bytes.data(), 101, ms.lkey());
  post_send(*p.a.h, &s, 1);
  expect_err_cqe(wait_cqe(p.a, false), *p.a.hs, prm::cqe_opcode::req_err, syndrome::remote_inval_req,
                 static_cast<uint8_t>(send_opcode::send), p.a.qp.qpn(), 0);
  expect_err_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_err, syndrome::local_length, 0, p.b.qp.qpn(), 0);
  expect_err_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_err, syndrome::wr_flush, 0, p.b.qp.qpn(), 1);
  EXPECT_TRUE(dst.unchanged());
  EXPECT_EQ(p.b.qp.state(), verbs::qp_state::err);
  expect_flushes_after(p.a, 1);
}

TEST(soft_errors, receive_with_a_bad_lkey_is_remote_operation_error) {
  pair p;
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all), md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  const dev::sge r = sg(dst.bytes.data(), 64, md.lkey() + 0x100);
  post_recv(*p.b.h, &r, 1);
  const dev::sge s = sg(src.bytes.data(), 64, ms.lkey());
  post_send(*p.a.h, &s, 1);
  expect_err_cqe(wait_cqe(p.a, false), *p.a.hs, prm::cqe_opcode::req_err, syndrome::remote_op,
                 static_cast<uint8_t>(send_opcode::send), p.a.qp.qpn(), 0);
  expect_err_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_err, syndrome::local_prot, 0, p.b.qp.qpn(), 0);
  EXPECT_TRUE(dst.unchanged());
  expect_flushes_after(p.a, 1);
}

TEST(soft_errors, no_receive_in_time_is_rnr_retry_exceeded_and_the_responder_stays_healthy) {
  pair p;
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all), md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  const dev::sge s = sg(src.bytes.data(), 64, ms.lkey());
  post_write_imm(*p.a.h, addr(dst.bytes.data()), md.rkey(), &s, 1, 7);
  expect_err_cqe(wait_cqe(p.a, false), *p.a.hs, prm::cqe_opcode::req_err, syndrome::rnr_retry_exc,
                 static_cast<uint8_t>(send_opcode::rdma_write_imm), p.a.qp.qpn(), 0);
  EXPECT_TRUE(dst.unchanged());
  EXPECT_EQ(p.b.qp.state(), verbs::qp_state::rts);
  expect_flushes_after(p.a, 1);
}

TEST(soft_errors, a_receive_posted_during_rnr_backoff_completes_the_send) {
  verbs::qp_attr at = fast_attr();
  at.rnr_retry = 7;  // forever
  pair p({}, {}, true, at);
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all), md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  const dev::sge s = sg(src.bytes.data(), 64, ms.lkey());
  post_send(*p.a.h, &s, 1);
  EXPECT_TRUE(stays_empty(p.a, false, 30ms));
  const dev::sge r = sg(dst.bytes.data(), 64, md.lkey());
  post_recv(*p.b.h, &r, 1);
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::send, p.a.qp.qpn(), 0, 64);
  EXPECT_EQ(dst.bytes, src.bytes);
}

TEST(soft_errors, peer_not_ready_is_transport_retry_exceeded) {
  pair p({}, {}, false);
  verbs::connect_rc(p.a.qp, p.b.qp.qpn(), verbs::access::all, fast_attr());
  p.b.qp.to_init(verbs::access::all);  // b never reaches RTR
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all), md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  write_fails(p, addr(dst.bytes.data()), md.rkey(), sg(src.bytes.data(), 64, ms.lkey()), syndrome::transport_retry_exc,
              dst);
}

TEST(soft_errors, peer_destroyed_is_transport_retry_exceeded) {
  pair p;
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all), md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  p.b.qp = verbs::qp();  // destroy the responder
  write_fails(p, addr(dst.bytes.data()), md.rkey(), sg(src.bytes.data(), 64, ms.lkey()), syndrome::transport_retry_exc,
              dst);
}

TEST(soft_errors, unknown_opcode_is_local_qp_operation_error) {
  pair p;
  const uint64_t s = acquire(*p.a.h, 1);
  dev::wqe_writer w(*p.a.h, s);
  dev::sq_commit(*p.a.h, s, w.finish(static_cast<send_opcode>(0x25), prm::ctrl_flags::cq_update));  // UMR
  expect_err_cqe(wait_cqe(p.a, false), *p.a.hs, prm::cqe_opcode::req_err, syndrome::local_qp_op, 0x25, p.a.qp.qpn(), 0);
  expect_flushes_after(p.a, 1);
}

TEST(soft_errors, inline_longer_than_max_inline_is_local_qp_operation_error) {
  pair p({.max_inline = 16});
  region dst(64);
  verbs::mr md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  const uint8_t payload[40] = {1, 2, 3};
  const uint64_t s = acquire(*p.a.h, dev::wqebbs_write_inline(40));
  dev::sq_commit(*p.a.h, s, dev::prepare_write_inline(*p.a.h, s, addr(dst.bytes.data()), md.rkey(), payload, 40,
                                                      prm::ctrl_flags::cq_update));
  expect_err_cqe(wait_cqe(p.a, false), *p.a.hs, prm::cqe_opcode::req_err, syndrome::local_qp_op,
                 static_cast<uint8_t>(send_opcode::rdma_write), p.a.qp.qpn(), 0);
  EXPECT_TRUE(dst.unchanged());
}

TEST(soft_errors, an_unsignaled_failing_wqe_still_produces_its_error_cqe) {
  pair p;
  region src(64), dst(64);
  verbs::mr ms(p.pd, src.bytes.data(), 64, verbs::access::all), md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  write_fails(p, addr(dst.bytes.data()), md.rkey() + 0x1000, sg(src.bytes.data(), 64, ms.lkey()), syndrome::remote_access,
              dst, prm::ctrl_flags::ce_error_only);
}

TEST(soft_errors, moving_to_err_flushes_posted_and_later_receives) {
  pair p;
  region dst(64);
  verbs::mr md(p.pd, dst.bytes.data(), 64, verbs::access::all);
  const dev::sge r = sg(dst.bytes.data(), 64, md.lkey());
  post_recv(*p.b.h, &r, 1);
  post_recv(*p.b.h, &r, 1);
  p.b.qp.to_err();
  expect_err_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_err, syndrome::wr_flush, 0, p.b.qp.qpn(), 0);
  expect_err_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_err, syndrome::wr_flush, 0, p.b.qp.qpn(), 1);
  post_recv(*p.b.h, &r, 1);
  expect_err_cqe(wait_cqe(p.b, true), *p.b.hr, prm::cqe_opcode::resp_err, syndrome::wr_flush, 0, p.b.qp.qpn(), 2);
  expect_flushes_after(p.b, 0);
  EXPECT_TRUE(dst.unchanged());
}

TEST(soft_errors, cq_overrun_without_ignore_overrun_moves_cq_and_qp_to_error) {
  pair p({.cq_depth = 4, .ignore_overrun = false, .check_cq_depth = false});
  // Post 6 signaled NOPs without polling: CQEs 0..3 fit, the 5th overruns.
  for (int i = 0; i < 6; ++i) post_nop(*p.a.h);
  const auto t0 = std::chrono::steady_clock::now();
  while (!p.a.scq.in_error() && std::chrono::steady_clock::now() - t0 < 5s) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(p.a.scq.in_error());
  EXPECT_EQ(p.a.qp.state(), verbs::qp_state::err);
  EXPECT_EQ(p.a.hs->ci, 0u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(wait_cqe(p.a, false).c.ok());
  EXPECT_TRUE(stays_empty(p.a, false));
}

}  // namespace

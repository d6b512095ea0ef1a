// Shared receive queues on the soft NIC: several QPs take receives from one SRQ, each WQE
// once; an empty SRQ answers RNR; a QP going to ERR leaves the SRQ alone; a bad key in an
// SRQ WQE fails the receive as it does in an RQ; the control path's refusals.
#include <set>
#include <vector>

#include "gdaki/verbs/srq.hpp"
#include "soft_fixture.hpp"

namespace {

using namespace soft_test;
using gdaki::status;
using prm::send_opcode;
using prm::syndrome;

// Senders a[i] connected to receivers b[i]; every b[i] receives from one SRQ.
struct srq_setup {
  verbs::device dev;
  verbs::pd pd;
  verbs::srq srq;
  std::vector<std::unique_ptr<endpoint>> a, b;

  srq_setup(uint32_t nqp, uint32_t max_wr, verbs::qp_attr attr = fast_attr()) {
    dev = verbs::device::open("soft0");
    pd = verbs::pd(dev);
    verbs::srq_init si;
    si.max_wr = max_wr;
    si.max_sge = 2;
    srq = verbs::srq(pd, si);
    for (uint32_t i = 0; i < nqp; ++i) {
      a.push_back(std::make_unique<endpoint>());
      a.back()->create(dev, pd, {});
      b.push_back(std::make_unique<endpoint>());
      make_receiver(*b.back());
      verbs::connect_rc(a.back()->qp, b.back()->qp.qpn(), verbs::access::all, attr);
      verbs::connect_rc(b.back()->qp, a.back()->qp.qpn(), verbs::access::all, attr);
      a.back()->export_handles(true);
      export_receiver(*b.back());
    }
  }

  void make_receiver(endpoint& e) {
    verbs::cq_init ci;
    ci.depth = 128;
    e.scq = verbs::cq(dev, ci);
    e.rcq = verbs::cq(dev, ci);
    verbs::qp_init qi;
    qi.send_cq = &e.scq;
    qi.recv_cq = &e.rcq;
    qi.srq = &srq;
    qi.sq_wqebbs = 64;
    e.qp = verbs::qp(pd, qi);
  }

  void export_receiver(endpoint& e) {
    e.hs = std::make_unique<dev::cq_handle>(e.scq.export_handle());
    e.hr = std::make_unique<dev::cq_handle>(e.rcq.export_handle());
    verbs::qp_export_options eo;
    eo.auto_signal_wqebbs = verbs::qp_export_options::no_auto_signal;
    eo.srq = srq.host_handle();
    e.h = std::make_unique<dev::qp_handle>(e.qp.export_handle(e.hs.get(), e.hr.get(), eo));
  }

  uint32_t post(const dev::sge& s) {
    uint32_t idx = ~0u;
    EXPECT_EQ(srq.post_recv(&s, 1, &idx), status::ok);
    return idx;
  }
};

struct msg {
  uint32_t qp, seq, pad[2];
};

TEST(soft_srq, several_qps_share_one_srq_and_each_receive_is_consumed_once) {
  verbs::qp_attr at = fast_attr();
  at.rnr_retry = 7;  // the SRQ runs dry between reposts: wait for it
  constexpr uint32_t nqp = 3, per_qp = 20;
  srq_setup s(nqp, 8, at);
  const uint32_t ring = s.srq.caps().wqes;
  ASSERT_EQ(s.srq.caps().max_wr, ring - 1);
  ASSERT_LT(ring, nqp * per_qp) << "the free list must be reused, out of order";
  // Receive buffers, one per SRQ WQE at a time; which buffer each WQE holds.
  std::vector<msg> rbuf(ring);
  std::vector<msg> sbuf(nqp * per_qp);
  verbs::mr mr_r(s.pd, rbuf.data(), rbuf.size() * sizeof(msg), verbs::access::all);
  verbs::mr mr_s(s.pd, sbuf.data(), sbuf.size() * sizeof(msg), verbs::access::all);
  std::vector<int> buf_of(ring, -1);
  std::set<uint32_t> outstanding;
  auto post_buf = [&](uint32_t k) {
    rbuf[k] = msg{~0u, ~0u, {0, 0}};
    const uint32_t idx = s.post(sg(&rbuf[k], sizeof(msg), mr_r.lkey()));
    ASSERT_LT(idx, ring);
    ASSERT_TRUE(outstanding.insert(idx).second) << "WQE " << idx << " posted while still outstanding";
    buf_of[idx] = static_cast<int>(k);
  };
  for (uint32_t k = 0; k < ring - 1; ++k) post_buf(k);
  uint32_t spare = ring - 1;  // the buffer not on the SRQ
  EXPECT_EQ(s.srq.post_recv(nullptr, 0), status::again) << "max_wr receives are outstanding";
  for (uint32_t j = 0; j < per_qp; ++j) {
    for (uint32_t i = 0; i < nqp; ++i) {
      msg& m = sbuf[i * per_qp + j];
      m = msg{i, j, {0, 0}};
      const dev::sge g = sg(&m, sizeof(msg), mr_s.lkey());
      post_send(*s.a[i]->h, &g, 1);
    }
  }
  std::vector<uint32_t> next_seq(nqp, 0);
  uint32_t received = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (received < nqp * per_qp && std::chrono::steady_clock::now() - t0 < 10s) {
    for (uint32_t i = 0; i < nqp; ++i) {
      endpoint& e = *s.b[i];
      uint32_t tail = 0;
      if (!dev::cqe_ready(*e.hr, e.hr->ci, &tail)) continue;
      got g = wait_cqe(e, true);
      const uint16_t idx = prm::from_be(g.raw.wqe_counter);
      expect_resp_cqe(g, *e.hr, prm::cqe_opcode::resp_send, e.qp.qpn(), s.a[i]->qp.qpn(), idx, sizeof(msg), 0,
                      false, s.srq.srqn());
      ASSERT_EQ(outstanding.erase(idx), 1u) << "CQE names WQE " << idx << ", which was not outstanding";
      const msg got_msg = rbuf[buf_of[idx]];
      EXPECT_EQ(got_msg.qp, i) << "a message of QP " << got_msg.qp << " completed on QP " << i;
      EXPECT_EQ(got_msg.seq, next_seq[i]) << "RC delivers in order";
      next_seq[i] = got_msg.seq + 1;
      ++received;
      // Repost through the spare buffer; the freed WQE's buffer becomes the spare.
      post_buf(spare);
      spare = static_cast<uint32_t>(buf_of[idx]);
    }
  }
  EXPECT_EQ(received, nqp * per_qp);
  for (uint32_t i = 0; i < nqp; ++i) {
    EXPECT_EQ(next_seq[i], per_qp);
    for (uint32_t j = 0; j < per_qp; ++j) EXPECT_TRUE(wait_cqe(*s.a[i], false).c.ok());
    EXPECT_TRUE(stays_empty(*s.b[i], true, 5ms)) << "one CQE per message";
  }
}

TEST(soft_srq, empty_srq_answers_rnr_and_a_post_completes_the_send) {
  verbs::qp_attr at = fast_attr();
  at.rnr_retry = 7;
  srq_setup s(1, 4, at);
  std::vector<uint8_t> src(64, 0x5a), dst(64, 0);
  verbs::mr ms(s.pd, src.data(), 64, verbs::access::all), md(s.pd, dst.data(), 64, verbs::access::all);
  const dev::sge g = sg(src.data(), 64, ms.lkey());
  post_send(*s.a[0]->h, &g, 1);
  EXPECT_TRUE(stays_empty(*s.a[0], false, 30ms)) << "RNR: the send waits";
  EXPECT_TRUE(stays_empty(*s.b[0], true, 1ms));
  EXPECT_EQ(s.post(sg(dst.data(), 64, md.lkey())), 0u);
  expect_req_cqe(wait_cqe(*s.a[0], false), *s.a[0]->hs, send_opcode::send, s.a[0]->qp.qpn(), 0, 64);
  expect_resp_cqe(wait_cqe(*s.b[0], true), *s.b[0]->hr, prm::cqe_opcode::resp_send, s.b[0]->qp.qpn(),
                  s.a[0]->qp.qpn(), 0, 64, 0, false, s.srq.srqn());
  EXPECT_EQ(dst, src);
}

TEST(soft_srq, empty_srq_runs_the_sender_out_of_rnr_retries_and_the_receiver_stays_healthy) {
  srq_setup s(1, 4);  // rnr_retry 3
  std::vector<uint8_t> src(64, 1);
  verbs::mr ms(s.pd, src.data(), 64, verbs::access::all);
  const dev::sge g = sg(src.data(), 64, ms.lkey());
  post_send(*s.a[0]->h, &g, 1);
  expect_err_cqe(wait_cqe(*s.a[0], false), *s.a[0]->hs, prm::cqe_opcode::req_err, syndrome::rnr_retry_exc,
                 static_cast<uint8_t>(send_opcode::send), s.a[0]->qp.qpn(), 0);
  EXPECT_EQ(s.b[0]->qp.state(), verbs::qp_state::rts);
  EXPECT_TRUE(stays_empty(*s.b[0], true, 5ms));
}

TEST(soft_srq, a_qp_going_to_err_does_not_flush_the_srq) {
  srq_setup s(2, 8);
  std::vector<uint8_t> src(4 * 32), dst(4 * 32, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i);
  verbs::mr ms(s.pd, src.data(), src.size(), verbs::access::all), md(s.pd, dst.data(), dst.size(), verbs::access::all);
  for (uint32_t k = 0; k < 4; ++k) EXPECT_EQ(s.post(sg(dst.data() + 32 * k, 32, md.lkey())), k);
  s.b[0]->qp.to_err();
  EXPECT_TRUE(stays_empty(*s.b[0], true, 30ms)) << "the SRQ's WQEs are not the failed QP's to flush";
  for (uint32_t k = 0; k < 4; ++k) {
    const dev::sge g = sg(src.data() + 32 * k, 32, ms.lkey());
    post_send(*s.a[1]->h, &g, 1);
  }
  for (uint16_t k = 0; k < 4; ++k) {
    expect_resp_cqe(wait_cqe(*s.b[1], true), *s.b[1]->hr, prm::cqe_opcode::resp_send, s.b[1]->qp.qpn(),
                    s.a[1]->qp.qpn(), k, 32, 0, false, s.srq.srqn());
  }
  EXPECT_EQ(dst, src);
}

// A QP reset or destroyed with receive CQEs unpolled gives their SRQ WQEs back, as
// rdma-core's cq clean does: every one of max_wr can be posted again. (Before: the CQEs
// stayed in the CQ and each kept its WQE from the free list.)
TEST(soft_srq, reset_and_destroy_of_a_qp_return_the_wqes_of_its_unpolled_receives) {
  for (const bool destroy : {false, true}) {
    SCOPED_TRACE(destroy ? "destroy" : "reset");
    srq_setup s(1, 8);
    const uint32_t max_wr = s.srq.caps().max_wr;
    std::vector<uint8_t> src(32, 5), dst(max_wr * 32, 0);
    verbs::mr ms(s.pd, src.data(), src.size(), verbs::access::all);
    verbs::mr md(s.pd, dst.data(), dst.size(), verbs::access::all);
    for (uint32_t k = 0; k < max_wr; ++k) s.post(sg(dst.data() + 32 * k, 32, md.lkey()));
    const dev::sge g = sg(src.data(), 32, ms.lkey());
    for (int k = 0; k < 3; ++k) post_send(*s.a[0]->h, &g, 1);
    for (uint32_t k = 0; k < 3; ++k) {
      uint32_t tail = 0;
      const auto t0 = std::chrono::steady_clock::now();
      while (!dev::cqe_ready(*s.b[0]->hr, k, &tail) && std::chrono::steady_clock::now() - t0 < 5s) {
      }
      ASSERT_TRUE(dev::cqe_ready(*s.b[0]->hr, k, &tail)) << "receive " << k;
    }
    EXPECT_EQ(s.srq.post_recv(nullptr, 0), status::again) << "3 WQEs are held by unpolled CQEs";
    if (destroy) {
      s.b[0]->qp = verbs::qp{};
    } else {
      s.b[0]->qp.to_reset();
    }
    EXPECT_EQ(s.srq.host_handle()->freed, 3u);
    for (uint32_t k = 0; k < 3; ++k) EXPECT_EQ(s.srq.post_recv(nullptr, 0), status::ok) << k;
    EXPECT_EQ(s.srq.post_recv(nullptr, 0), status::again) << "max_wr outstanding again";
  }
}

TEST(soft_srq, bad_lkey_in_an_srq_wqe_is_local_protection_at_the_receiver_only) {
  srq_setup s(2, 8);
  std::vector<uint8_t> src(64, 7), dst(64, 0), dst2(64, 0);
  verbs::mr ms(s.pd, src.data(), 64, verbs::access::all), md(s.pd, dst.data(), 64, verbs::access::all);
  verbs::mr md2(s.pd, dst2.data(), 64, verbs::access::all);
  EXPECT_EQ(s.post(sg(dst.data(), 64, md.lkey() + 0x10000)), 0u);
  EXPECT_EQ(s.post(sg(dst2.data(), 64, md2.lkey())), 1u);
  const dev::sge g = sg(src.data(), 64, ms.lkey());
  post_send(*s.a[0]->h, &g, 1);
  expect_err_cqe(wait_cqe(*s.a[0], false), *s.a[0]->hs, prm::cqe_opcode::req_err, syndrome::remote_op,
                 static_cast<uint8_t>(send_opcode::send), s.a[0]->qp.qpn(), 0);
  expect_err_cqe(wait_cqe(*s.b[0], true), *s.b[0]->hr, prm::cqe_opcode::resp_err, syndrome::local_prot, 0,
                 s.b[0]->qp.qpn(), 0, s.srq.srqn());
  EXPECT_EQ(dst, std::vector<uint8_t>(64, 0)) << "nothing lands in a receive that fails its key check";
  EXPECT_EQ(s.b[0]->qp.state(), verbs::qp_state::err);
  EXPECT_TRUE(stays_empty(*s.b[0], true, 10ms)) << "no flush of the SRQ's other WQE";
  // The next WQE is still there for the other QP.
  post_send(*s.a[1]->h, &g, 1);
  expect_resp_cqe(wait_cqe(*s.b[1], true), *s.b[1]->hr, prm::cqe_opcode::resp_send, s.b[1]->qp.qpn(),
                  s.a[1]->qp.qpn(), 1, 64, 0, false, s.srq.srqn());
  EXPECT_EQ(dst2, src);
}

TEST(soft_srq, destroy_is_refused_while_a_qp_receives_from_it) {
  srq_setup s(1, 4);
  try {
    s.srq.destroy();
    FAIL() << "destroy succeeded with a QP on the SRQ";
  } catch (const gdaki::error& e) {
    EXPECT_EQ(e.code(), status::busy) << e.what();
  }
  EXPECT_TRUE(s.srq);
  s.b[0].reset();
  s.srq.destroy();
  EXPECT_FALSE(s.srq);
}

TEST(soft_srq, a_qp_on_an_srq_has_no_receive_queue_of_its_own) {
  srq_setup s(1, 4);
  EXPECT_EQ(s.b[0]->qp.caps().rq_wqes, 0u);
  std::vector<uint8_t> buf(16);
  verbs::mr m(s.pd, buf.data(), 16, verbs::access::all);
  const dev::sge g = sg(buf.data(), 16, m.lkey());
  EXPECT_EQ(dev::rq_post(*s.b[0]->h, &g, 1), status::invalid);
  verbs::qp_export_options eo;
  EXPECT_THROW((void)s.b[0]->qp.export_handle(s.b[0]->hs.get(), s.b[0]->hr.get(), eo), gdaki::error)
      << "export needs the SRQ's placed handle";
  const uint32_t n = s.srq.caps().max_sge + 1;
  std::vector<dev::sge> list(n, g);
  EXPECT_EQ(s.srq.post_recv(list.data(), n), status::invalid) << "more entries than max_sge";
}

}  // namespace

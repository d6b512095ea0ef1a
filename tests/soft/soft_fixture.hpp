// Shared harness of the soft tier: a soft device with two connected RC QPs (a -> b),
// exported handles in host memory, posting helpers that go through the real data path
// (sq_acquire + prepare_* + sq_commit, rq_post), and CQE waiters that keep the raw bytes
// so tests can check every field.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "gdaki/device/datapath.hpp"
#include "gdaki/error.hpp"
#include "gdaki/prm/decode.hpp"
#include "gdaki/verbs/cq.hpp"
#include "gdaki/verbs/device.hpp"
#include "gdaki/verbs/mr.hpp"
#include "gdaki/verbs/pd.hpp"
#include "gdaki/verbs/qp.hpp"

namespace soft_test {

namespace dev = gdaki::dev;
namespace prm = gdaki::prm;
namespace verbs = gdaki::verbs;
using namespace std::chrono_literals;

struct endpoint_options {
  uint32_t sq_wqebbs = 64;
  uint32_t rq_wqes = 64;
  uint32_t cq_depth = 128;
  uint32_t max_inline = 64;
  uint32_t max_send_sge = 4;
  uint32_t max_recv_sge = 4;
  uint32_t access = verbs::access::all;  // incoming ops this QP accepts
  bool host_hook = true;                 // false: only the engine thread executes
  bool ignore_overrun = true;
  uint32_t user_index = 0;
  // These tests check the NIC's CQEs WQE by WQE, so the data path's auto-signal (a CQE
  // every ring/2 WQEBBs whatever the caller asked) is off unless a test turns it on.
  uint32_t auto_signal = verbs::qp_export_options::no_auto_signal;
  bool check_cq_depth = true;  // false: CQ overrun tests, which want a small CQ
};

struct endpoint {
  verbs::cq scq, rcq;
  verbs::qp qp;
  std::unique_ptr<dev::cq_handle> hs, hr;
  std::unique_ptr<dev::qp_handle> h;
  uint64_t send_pos = 0, recv_pos = 0;  // CQE positions consumed so far

  void create(const verbs::device& d, const verbs::pd& p, const endpoint_options& o) {
    opts = o;
    verbs::cq_init ci;
    ci.depth = o.cq_depth;
    ci.ignore_overrun = o.ignore_overrun;
    scq = verbs::cq(d, ci);
    rcq = verbs::cq(d, ci);
    verbs::qp_init qi;
    qi.send_cq = &scq;
    qi.recv_cq = &rcq;
    qi.sq_wqebbs = o.sq_wqebbs;
    qi.rq_wqes = o.rq_wqes;
    qi.max_inline = o.max_inline;
    qi.max_send_sge = o.max_send_sge;
    qi.max_recv_sge = o.max_recv_sge;
    qi.user_index = o.user_index;
    qp = verbs::qp(p, qi);
  }
  endpoint_options opts;
  void export_handles(bool host_hook) {
    hs = std::make_unique<dev::cq_handle>(scq.export_handle());
    hr = std::make_unique<dev::cq_handle>(rcq.export_handle());
    verbs::qp_export_options eo;
    eo.host_hook = host_hook;
    eo.auto_signal_wqebbs = opts.auto_signal;
    eo.check_cq_depth = opts.check_cq_depth;
    h = std::make_unique<dev::qp_handle>(qp.export_handle(hs.get(), hr.get(), eo));
    send_pos = recv_pos = 0;
  }
};

// Fast RNR / transport timers so error tests finish quickly.
inline verbs::qp_attr fast_attr() {
  verbs::qp_attr a;
  a.min_rnr_timer = 1;  // 10 us
  a.rnr_retry = 3;
  a.timeout = 8;  // ~1 ms per try
  a.retry_cnt = 2;
  return a;
}

struct pair {
  verbs::device dev;
  verbs::pd pd;
  endpoint a, b;
  endpoint_options oa, ob;

  explicit pair(endpoint_options opt_a = {}, endpoint_options opt_b = {}, bool connect = true,
                verbs::qp_attr attr = fast_attr())
      : oa(opt_a), ob(opt_b) {
    dev = verbs::device::open("soft0");
    pd = verbs::pd(dev);
    a.create(dev, pd, oa);
    b.create(dev, pd, ob);
    if (connect) {
      verbs::connect_rc(a.qp, b.qp.qpn(), oa.access, attr);
      verbs::connect_rc(b.qp, a.qp.qpn(), ob.access, attr);
    }
    a.export_handles(oa.host_hook);
    b.export_handles(ob.host_hook);
  }
};

// ---- posting through the data path --------------------------------------------------

inline uint64_t acquire(dev::qp_handle& h, uint32_t nbb) {
  uint64_t s = 0;
  EXPECT_EQ(dev::sq_acquire(h, nbb, &s, 5'000'000'000ull), gdaki::status::ok);
  return s;
}

inline uint64_t post_write(dev::qp_handle& h, uint64_t raddr, uint32_t rkey, const dev::sge* sgl, uint32_t n,
                           uint8_t flags = prm::ctrl_flags::cq_update) {
  const uint64_t s = acquire(h, dev::wqebbs_rdma(n));
  return dev::sq_commit(h, s, dev::prepare_write(h, s, raddr, rkey, sgl, n, flags));
}
inline uint64_t post_write_imm(dev::qp_handle& h, uint64_t raddr, uint32_t rkey, const dev::sge* sgl, uint32_t n,
                               uint32_t imm, uint8_t flags = prm::ctrl_flags::cq_update) {
  const uint64_t s = acquire(h, dev::wqebbs_rdma(n));
  return dev::sq_commit(h, s, dev::prepare_write_imm(h, s, raddr, rkey, sgl, n, imm, flags));
}
inline uint64_t post_write_inline(dev::qp_handle& h, uint64_t raddr, uint32_t rkey, const void* data, uint32_t len,
                                  uint8_t flags = prm::ctrl_flags::cq_update) {
  const uint64_t s = acquire(h, dev::wqebbs_write_inline(len));
  return dev::sq_commit(h, s, dev::prepare_write_inline(h, s, raddr, rkey, data, len, flags));
}
inline uint64_t post_read(dev::qp_handle& h, uint64_t raddr, uint32_t rkey, const dev::sge* sgl, uint32_t n,
                          uint8_t flags = prm::ctrl_flags::cq_update) {
  const uint64_t s = acquire(h, dev::wqebbs_rdma(n));
  return dev::sq_commit(h, s, dev::prepare_read(h, s, raddr, rkey, sgl, n, flags));
}
inline uint64_t post_send(dev::qp_handle& h, const dev::sge* sgl, uint32_t n,
                          uint8_t flags = prm::ctrl_flags::cq_update) {
  const uint64_t s = acquire(h, dev::wqebbs_send(n));
  return dev::sq_commit(h, s, dev::prepare_send(h, s, sgl, n, flags));
}
inline uint64_t post_fa(dev::qp_handle& h, uint64_t raddr, uint32_t rkey, uint64_t add, const dev::sge& res,
                        uint8_t flags = prm::ctrl_flags::cq_update) {
  const uint64_t s = acquire(h, dev::wqebbs_atomic());
  return dev::sq_commit(h, s, dev::prepare_atomic_fa(h, s, raddr, rkey, add, res, flags));
}
inline uint64_t post_cs(dev::qp_handle& h, uint64_t raddr, uint32_t rkey, uint64_t cmp, uint64_t swap,
                        const dev::sge& res, uint8_t flags = prm::ctrl_flags::cq_update) {
  const uint64_t s = acquire(h, dev::wqebbs_atomic());
  return dev::sq_commit(h, s, dev::prepare_atomic_cs(h, s, raddr, rkey, cmp, swap, res, flags));
}
inline uint64_t post_nop(dev::qp_handle& h, uint8_t flags = prm::ctrl_flags::cq_update) {
  const uint64_t s = acquire(h, 1);
  return dev::sq_commit(h, s, dev::prepare_nop(h, s, flags));
}
inline void post_recv(dev::qp_handle& h, const dev::sge* sgl, uint32_t n) {
  ASSERT_EQ(dev::rq_post(h, sgl, n), gdaki::status::ok);
}

inline dev::sge sg(const void* p, uint32_t len, uint32_t lkey) { return {reinterpret_cast<uint64_t>(p), len, lkey}; }
inline uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

// ---- completions -----------------------------------------------------------------------

struct got {
  prm::cqe64 raw{};
  dev::completion c{};
  uint64_t pos = 0;  // free-running CQE position (the owner bit is (pos >> log) & 1)
  bool ok = false;
};

// Waits for the next CQE on the send CQ (recv = false) or receive CQ and consumes it with
// sq_poll / rq_poll, keeping a copy of its 64 bytes.
inline got wait_cqe(endpoint& e, bool recv, std::chrono::milliseconds timeout = 5000ms) {
  got g;
  dev::cq_handle& cq = recv ? *e.hr : *e.hs;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t i = 0;; ++i) {
    uint32_t tail = 0;
    const uint64_t ci = cq.ci;
    if (dev::cqe_ready(cq, ci, &tail)) {
      dev::arch::fence_from_device();
      std::memcpy(&g.raw, cq.cqes + (ci & (dev::cqe_count(cq) - 1)), 64);
      const gdaki::status st = recv ? dev::rq_poll(*e.h, &g.c) : dev::sq_poll(*e.h, &g.c);
      EXPECT_EQ(st, gdaki::status::ok);
      g.pos = ci;
      g.ok = true;
      return g;
    }
    if (std::chrono::steady_clock::now() - t0 > timeout) return g;
    dev::arch::spin_pause(i);
  }
}

// True if no CQE arrives on the CQ within `wait`.
inline bool stays_empty(endpoint& e, bool recv, std::chrono::milliseconds wait = 20ms) {
  dev::cq_handle& cq = recv ? *e.hr : *e.hs;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < wait) {
    uint32_t tail;
    if (dev::cqe_ready(cq, cq.ci, &tail)) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

inline bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != 0) return false;
  return true;
}

inline uint8_t owner_of(const got& g, const dev::cq_handle& cq) { return static_cast<uint8_t>((g.pos >> cq.log_cqe_cnt) & 1); }

// Every field of a successful requester CQE (PRM 5.1).
inline void expect_req_cqe(const got& g, const dev::cq_handle& cq, prm::send_opcode op, uint32_t qpn,
                           uint16_t wqe_counter, uint32_t byte_cnt, uint32_t user_index = 0) {
  ASSERT_TRUE(g.ok) << "no CQE";
  const auto& c = g.raw;
  SCOPED_TRACE(prm::decode_cqe(&c));
  EXPECT_TRUE(all_zero(&c, 24)) << "bytes 0..23";
  EXPECT_EQ(prm::from_be(c.flags_rqpn), 0u);
  EXPECT_TRUE(all_zero(reinterpret_cast<const uint8_t*>(&c) + 28, 4)) << "bytes 28..31";
  EXPECT_EQ(prm::from_be(c.srqn_uidx), user_index);
  EXPECT_EQ(c.imm_inval_pkey, 0u);
  EXPECT_TRUE(all_zero(reinterpret_cast<const uint8_t*>(&c) + 40, 4)) << "bytes 40..43";
  EXPECT_EQ(prm::from_be(c.byte_cnt), byte_cnt);
  EXPECT_EQ(prm::from_be(c.timestamp), 0u);
  EXPECT_EQ(prm::from_be(c.sop_drop_qpn), (static_cast<uint32_t>(op) << 24) | qpn);
  EXPECT_EQ(prm::from_be(c.wqe_counter), wqe_counter);
  EXPECT_EQ(c.signature, 0);
  EXPECT_EQ(c.op_own, static_cast<uint8_t>((static_cast<uint8_t>(prm::cqe_opcode::req) << 4) | owner_of(g, cq)));
  EXPECT_TRUE(g.c.ok());
}

// Every field of a successful responder CQE.
inline void expect_resp_cqe(const got& g, const dev::cq_handle& cq, prm::cqe_opcode op, uint32_t qpn,
                            uint32_t src_qpn, uint16_t wqe_counter, uint32_t byte_cnt, uint32_t imm_raw,
                            bool solicited, uint32_t user_index = 0) {
  ASSERT_TRUE(g.ok) << "no CQE";
  const auto& c = g.raw;
  SCOPED_TRACE(prm::decode_cqe(&c));
  EXPECT_TRUE(all_zero(&c, 24));
  EXPECT_EQ(prm::from_be(c.flags_rqpn), src_qpn);
  EXPECT_TRUE(all_zero(reinterpret_cast<const uint8_t*>(&c) + 28, 4));
  EXPECT_EQ(prm::from_be(c.srqn_uidx), user_index);
  EXPECT_EQ(c.imm_inval_pkey, imm_raw);
  EXPECT_TRUE(all_zero(reinterpret_cast<const uint8_t*>(&c) + 40, 4));
  EXPECT_EQ(prm::from_be(c.byte_cnt), byte_cnt);
  EXPECT_EQ(prm::from_be(c.timestamp), 0u);
  EXPECT_EQ(prm::from_be(c.sop_drop_qpn), qpn);
  EXPECT_EQ(prm::from_be(c.wqe_counter), wqe_counter);
  EXPECT_EQ(c.signature, 0);
  EXPECT_EQ(c.op_own, static_cast<uint8_t>((static_cast<uint8_t>(op) << 4) | (solicited ? 2 : 0) | owner_of(g, cq)));
}

// Every field of an error CQE (PRM 5.3).
inline void expect_err_cqe(const got& g, const dev::cq_handle& cq, prm::cqe_opcode op, prm::syndrome s,
                           uint8_t wqe_opcode, uint32_t qpn, uint16_t wqe_counter, uint32_t user_index = 0) {
  ASSERT_TRUE(g.ok) << "no CQE";
  const auto* e = reinterpret_cast<const prm::err_cqe*>(&g.raw);
  SCOPED_TRACE(prm::decode_cqe(&g.raw));
  EXPECT_TRUE(all_zero(e, 32));
  EXPECT_EQ(prm::from_be(e->srqn), user_index);
  EXPECT_TRUE(all_zero(e->rsvd1, 16));
  EXPECT_EQ(e->hw_err_synd, 0);
  EXPECT_EQ(e->hw_synd_type, 0);
  EXPECT_EQ(e->vendor_err_synd, 0);
  EXPECT_EQ(e->syndrome, static_cast<uint8_t>(s));
  EXPECT_EQ(prm::from_be(e->s_wqe_opcode_qpn), (static_cast<uint32_t>(wqe_opcode) << 24) | qpn);
  EXPECT_EQ(prm::from_be(e->wqe_counter), wqe_counter);
  EXPECT_EQ(e->signature, 0);
  EXPECT_EQ(e->op_own, static_cast<uint8_t>((static_cast<uint8_t>(op) << 4) | owner_of(g, cq)));
  EXPECT_EQ(g.c.syndrome, s);
}

}  // namespace soft_test

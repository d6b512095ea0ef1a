// Doorbell robustness (PRM 3.3, 3.5) with the engine thread as the only executor (no host
// hook, as for a GPU initiator), and the CQ's initial state and owner-bit laps (PRM 5.4).
#include <vector>

#include "soft_fixture.hpp"

using namespace soft_test;
using prm::send_opcode;

namespace {

endpoint_options engine_only() {
  endpoint_options o;
  o.host_hook = false;
  return o;
}

TEST(soft_doorbells, the_engine_executes_wqes_without_a_host_hook) {
  pair p(engine_only(), engine_only());
  alignas(8) uint64_t v = 0, res = 0;
  verbs::mr mv(p.pd, &v, 8, verbs::access::all), mr(p.pd, &res, 8, verbs::access::all);
  post_fa(*p.a.h, addr(&v), mv.rkey(), 3, sg(&res, 8, mr.lkey()));
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::atomic_fa, p.a.qp.qpn(), 0, 8);
  EXPECT_EQ(v, 3u);
}

TEST(soft_doorbells, a_doorbell_rung_before_the_record_moves_waits_for_the_record) {
  pair p(engine_only(), engine_only());
  dev::qp_handle& h = *p.a.h;
  const uint64_t s = acquire(h, 1);
  dev::prepare_nop(h, s, prm::ctrl_flags::cq_update);
  dev::sq_mark_ready(h, s, 1);
  // Ring first (DOCA's early ring), record later.
  dev::arch::doorbell_store64(h.uar_db, dev::detail::doorbell_word(h.qpn, s + 1));
  EXPECT_TRUE(stays_empty(p.a, false, 30ms)) << "the doorbell word is only a hint";
  dev::arch::fence_to_device();
  dev::arch::store_release(&h.dbrec->snd.raw, prm::to_be32(static_cast<uint32_t>(s + 1)).raw);
  h.sq_rung = s + 1;
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::nop, p.a.qp.qpn(), 0, 0);
}

TEST(soft_doorbells, the_same_doorbell_rung_twice_executes_once) {
  pair p(engine_only(), engine_only());
  dev::qp_handle& h = *p.a.h;
  post_nop(h);
  dev::arch::doorbell_store64(h.uar_db, dev::detail::doorbell_word(h.qpn, 1));  // the second ring
  dev::sq_submit(h);                                                            // and a no-op submit
  expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::nop, p.a.qp.qpn(), 0, 0);
  EXPECT_TRUE(stays_empty(p.a, false, 30ms));
}

TEST(soft_doorbells, one_doorbell_covers_many_wqes) {
  for (bool hook : {false, true}) {
    endpoint_options o;
    o.host_hook = hook;
    pair p(o, o);
    std::vector<uint8_t> src(640), dst(640);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i);
    verbs::mr ms(p.pd, src.data(), src.size(), verbs::access::all), md(p.pd, dst.data(), dst.size(), verbs::access::all);
    dev::qp_handle& h = *p.a.h;
    for (uint32_t i = 0; i < 10; ++i) {
      const uint64_t s = acquire(h, 1);
      const dev::sge g = sg(src.data() + i * 64, 64, ms.lkey());
      dev::prepare_write(h, s, addr(dst.data() + i * 64), md.rkey(), &g, 1, i % 3 == 2 ? 0 : prm::ctrl_flags::cq_update);
      dev::sq_mark_ready(h, s, 1);
    }
    dev::sq_submit(h);  // one DBR update and one doorbell for all ten
    uint16_t expect = 0;
    for (uint32_t i = 0; i < 10; ++i) {
      if (i % 3 == 2) continue;
      expect_req_cqe(wait_cqe(p.a, false), *p.a.hs, send_opcode::rdma_write, p.a.qp.qpn(), static_cast<uint16_t>(i), 64);
      ++expect;
    }
    EXPECT_EQ(expect, 7);
    EXPECT_EQ(dst, src);
  }
}

TEST(soft_doorbells, cq_starts_invalid_with_owner_one_and_owner_flips_every_lap) {
  pair p({.cq_depth = 4, .host_hook = false, .check_cq_depth = false}, engine_only());
  const dev::cq_handle& cq = *p.a.hs;
  ASSERT_EQ(cq.log_cqe_cnt, 2u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(cq.cqes[i].op_own, 0xf1) << "slot " << i;
  for (uint32_t i = 0; i < 10; ++i) {
    post_nop(*p.a.h);
    // Owner-only poller (DOCA on sm_90+): waits for owner == (ci >> 2) & 1 on slot ci & 3.
    const uint64_t ci = p.a.hs->ci;
    const auto* slot = reinterpret_cast<const uint8_t*>(cq.cqes + (ci & 3));
    const auto t0 = std::chrono::steady_clock::now();
    while ((dev::arch::load_acquire(reinterpret_cast<const uint32_t*>(slot + 60)) >> 24 & 1) != ((ci >> 2) & 1)) {
      ASSERT_LT(std::chrono::steady_clock::now() - t0, 5s);
    }
    // wqe_counter poller (UCX / pre-sm_90 DOCA): the same word carries the index.
    const uint32_t tail = dev::arch::load_acquire(reinterpret_cast<const uint32_t*>(slot + 60));
    EXPECT_EQ(prm::from_be(prm::be16{static_cast<uint16_t>(tail & 0xffff)}), i);
    const got g = wait_cqe(p.a, false);
    expect_req_cqe(g, cq, send_opcode::nop, p.a.qp.qpn(), static_cast<uint16_t>(i), 0);
    EXPECT_EQ(g.raw.op_own & 1, (i >> 2) & 1);
  }
}

}  // namespace

// The control path: devices, registry, attributes, the RC state machine and its errors.
#include <infiniband/verbs.h>

#include <vector>

#include "gdaki/verbs/provider.hpp"
#include "soft_fixture.hpp"

using namespace soft_test;

namespace {

template <typename Fn>
std::string error_of(Fn&& fn, gdaki::status want) {
  try {
    fn();
  } catch (const gdaki::error& e) {
    EXPECT_EQ(e.code(), want) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no gdaki::error thrown";
  return {};
}

TEST(soft_control, soft0_is_listed_and_opens) {
  bool found = false;
  for (const auto& d : verbs::device::list()) found = found || (d.name == "soft0" && d.provider == "soft");
  EXPECT_TRUE(found);
  verbs::device d = verbs::device::open("soft0");
  EXPECT_EQ(d.name(), "soft0");
  EXPECT_EQ(d.provider_name(), "soft");
  const verbs::device_attr a = d.query();
  EXPECT_EQ(a.name, "soft0");
  EXPECT_TRUE(a.masked_atomics);
  EXPECT_GE(a.max_qp_wr, 1u << 15);
  const verbs::port_attr pa = d.query_port(1);
  EXPECT_EQ(pa.state, verbs::port_state::active);
  EXPECT_NE(error_of([&] { (void)d.query_port(2); }, gdaki::status::invalid).find("port 2"), std::string::npos);
}

TEST(soft_control, opening_an_unknown_device_names_it_in_the_error) {
  const std::string m = error_of([] { (void)verbs::device::open("nosuch7"); }, gdaki::status::not_found);
  EXPECT_NE(m.find("nosuch7"), std::string::npos) << m;
}

TEST(soft_control, empty_provider_slots_default_to_not_supported) {
  const verbs::provider_ops bare = verbs::with_defaults({.name = "bare"});
  std::string why;
  verbs::provider_object* out = nullptr;
  EXPECT_EQ(bare.open_device("x", &out, &why), gdaki::status::not_supported);
  EXPECT_EQ(bare.modify_qp(nullptr, {}, 0, &why), gdaki::status::not_supported);
  EXPECT_EQ(verbs::register_provider(&bare), gdaki::status::ok);
  const auto ps = verbs::providers();
  EXPECT_STREQ(ps.front()->name, "soft") << "built-in providers come first";
}

TEST(soft_control, memory_registration_checks_its_flags) {
  verbs::device d = verbs::device::open("soft0");
  verbs::pd pd(d);
  std::vector<uint8_t> buf(64);
  const std::string m =
      error_of([&] { verbs::mr(pd, buf.data(), 64, verbs::access::remote_write); }, gdaki::status::invalid);
  EXPECT_NE(m.find("local write"), std::string::npos) << m;
  error_of([&] { verbs::mr(pd, nullptr, 64, verbs::access::all); }, gdaki::status::invalid);
  verbs::mr ok(pd, buf.data(), 64, verbs::access::all);
  EXPECT_NE(ok.lkey(), ok.rkey()) << "lkey and rkey are distinct keys";
}

TEST(soft_control, illegal_transitions_and_missing_attributes_are_named) {
  pair p({}, {}, false);
  std::string m = error_of([&] { p.a.qp.to_rts(); }, gdaki::status::invalid);
  EXPECT_NE(m.find("RESET->RTS"), std::string::npos) << m;
  EXPECT_NE(m.find("qp 0x"), std::string::npos) << m;
  p.a.qp.to_init(verbs::access::all);
  verbs::qp_attr a;
  a.state = verbs::qp_state::rtr;
  m = error_of([&] { p.a.qp.modify(a, verbs::qp_attr_mask::init_to_rtr & ~verbs::qp_attr_mask::dest_qpn); },
               gdaki::status::invalid);
  EXPECT_NE(m.find("missing attribute dest_qp_num"), std::string::npos) << m;
  EXPECT_EQ(p.a.qp.state(), verbs::qp_state::init);
}

// The one state machine (src/verbs/qp_transitions.cpp) checked against rdma-core's own
// constants and ibv_modify_qp(3)'s RC table, written out here independently of it.
TEST(soft_control, qp_states_and_attribute_bits_are_rdma_core_s) {
  EXPECT_EQ(static_cast<uint32_t>(verbs::qp_state::reset), uint32_t{IBV_QPS_RESET});
  EXPECT_EQ(static_cast<uint32_t>(verbs::qp_state::init), uint32_t{IBV_QPS_INIT});
  EXPECT_EQ(static_cast<uint32_t>(verbs::qp_state::rtr), uint32_t{IBV_QPS_RTR});
  EXPECT_EQ(static_cast<uint32_t>(verbs::qp_state::rts), uint32_t{IBV_QPS_RTS});
  EXPECT_EQ(static_cast<uint32_t>(verbs::qp_state::sqd), uint32_t{IBV_QPS_SQD});
  EXPECT_EQ(static_cast<uint32_t>(verbs::qp_state::sqe), uint32_t{IBV_QPS_SQE});
  EXPECT_EQ(static_cast<uint32_t>(verbs::qp_state::err), uint32_t{IBV_QPS_ERR});
  namespace m = verbs::qp_attr_mask;
  const std::pair<uint32_t, int> bits[] = {
      {m::state, IBV_QP_STATE},         {m::cur_state, IBV_QP_CUR_STATE},
      {m::en_sqd_async_notify, IBV_QP_EN_SQD_ASYNC_NOTIFY},
      {m::access_flags, IBV_QP_ACCESS_FLAGS}, {m::pkey_index, IBV_QP_PKEY_INDEX},
      {m::port, IBV_QP_PORT},           {m::qkey, IBV_QP_QKEY},
      {m::av, IBV_QP_AV},               {m::path_mtu, IBV_QP_PATH_MTU},
      {m::timeout, IBV_QP_TIMEOUT},     {m::retry_cnt, IBV_QP_RETRY_CNT},
      {m::rnr_retry, IBV_QP_RNR_RETRY}, {m::rq_psn, IBV_QP_RQ_PSN},
      {m::max_qp_rd_atomic, IBV_QP_MAX_QP_RD_ATOMIC}, {m::alt_path, IBV_QP_ALT_PATH},
      {m::min_rnr_timer, IBV_QP_MIN_RNR_TIMER}, {m::sq_psn, IBV_QP_SQ_PSN},
      {m::max_dest_rd_atomic, IBV_QP_MAX_DEST_RD_ATOMIC}, {m::path_mig_state, IBV_QP_PATH_MIG_STATE},
      {m::cap, IBV_QP_CAP},             {m::dest_qpn, IBV_QP_DEST_QPN}};
  for (const auto& [ours, theirs] : bits) EXPECT_EQ(ours, static_cast<uint32_t>(theirs));
  EXPECT_EQ(m::reset_to_init, uint32_t{IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS});
  EXPECT_EQ(m::init_to_rtr, uint32_t{IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER});
  EXPECT_EQ(m::rtr_to_rts, uint32_t{IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC});
}

// Every transition out of every state a QP can be driven to, with the attributes
// ibv_modify_qp(3) requires: legal and modelled ones happen, IBA-illegal ones are invalid,
// legal ones into SQD (which no provider models) are not_supported; each refusal names
// the transition and leaves the QP where it was.
TEST(soft_control, every_transition_follows_the_ibv_modify_qp_table) {
  using S = verbs::qp_state;
  const S all[] = {S::reset, S::init, S::rtr, S::rts, S::sqd, S::sqe, S::err};
  const auto iba_legal = [](S f, S t) {
    if (t == S::err || t == S::reset) return true;
    return (f == S::reset && t == S::init) || (f == S::init && t == S::init) || (f == S::init && t == S::rtr) ||
           (f == S::rtr && t == S::rts) || (f == S::rts && t == S::rts) || (f == S::rts && t == S::sqd) ||
           (f == S::sqd && t == S::sqd) || (f == S::sqd && t == S::rts) || (f == S::sqe && t == S::rts);
  };
  const auto required = [](S f, S t) -> uint32_t {
    if (f == S::reset && t == S::init) return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    if (f == S::init && t == S::rtr)
      return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    if (f == S::rtr && t == S::rts)
      return IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
             IBV_QP_MAX_QP_RD_ATOMIC;
    return IBV_QP_STATE;
  };
  for (S from : {S::reset, S::init, S::rtr, S::rts, S::err}) {
    for (S to : all) {
      pair p({}, {}, false);
      verbs::qp& q = p.a.qp;
      if (from != S::reset) q.to_init(verbs::access::all);
      if (from == S::rtr || from == S::rts) q.to_rtr(p.b.qp.qpn(), fast_attr());
      if (from == S::rts) q.to_rts(fast_attr());
      if (from == S::err) q.to_err();
      ASSERT_EQ(q.state(), from);
      verbs::qp_attr a = fast_attr();
      a.state = to;
      a.dest_qp_num = p.b.qp.qpn();
      a.access_flags = verbs::access::all;
      const std::string name = std::string(verbs::to_string(from)) + "->" + verbs::to_string(to);
      if (!iba_legal(from, to) || to == S::sqd) {
        const std::string m = error_of([&] { q.modify(a, required(from, to)); },
                                       iba_legal(from, to) ? gdaki::status::not_supported : gdaki::status::invalid);
        EXPECT_NE(m.find(name), std::string::npos) << m;
        EXPECT_EQ(q.state(), from) << name;
        continue;
      }
      q.modify(a, required(from, to));
      EXPECT_EQ(q.state(), to) << name;
    }
  }
}

TEST(soft_control, attributes_outside_a_transition_and_attributes_without_a_field_are_named) {
  pair p({}, {}, false);
  verbs::qp_attr a = fast_attr();
  a.state = verbs::qp_state::init;
  a.access_flags = verbs::access::all;
  std::string m = error_of([&] { p.a.qp.modify(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_SQ_PSN); },
                           gdaki::status::invalid);
  EXPECT_NE(m.find("attribute sq_psn not allowed"), std::string::npos) << m;
  p.a.qp.to_init(verbs::access::all);
  a.state = verbs::qp_state::rtr;
  a.dest_qp_num = p.b.qp.qpn();
  // Legal in INIT->RTR by IBA, but qp_attr has no alternate path to give.
  m = error_of([&] { p.a.qp.modify(a, verbs::qp_attr_mask::init_to_rtr | IBV_QP_ALT_PATH); },
               gdaki::status::not_supported);
  EXPECT_NE(m.find("alt_path"), std::string::npos) << m;
  EXPECT_EQ(p.a.qp.state(), verbs::qp_state::init);
  // Two missing at once are both named.
  m = error_of([&] { p.a.qp.modify(a, verbs::qp_attr_mask::init_to_rtr & ~(IBV_QP_DEST_QPN | IBV_QP_RQ_PSN)); },
               gdaki::status::invalid);
  EXPECT_NE(m.find("rq_psn|dest_qp_num"), std::string::npos) << m;
}

TEST(soft_control, wqes_posted_before_rts_wait_and_then_execute) {
  pair p({}, {}, false);
  alignas(8) uint64_t v = 0, res = 0;
  verbs::mr mv(p.pd, &v, 8, verbs::access::all), mr(p.pd, &res, 8, verbs::access::all);
  p.a.qp.to_init(verbs::access::all);
  post_fa(*p.a.h, addr(&v), mv.rkey(), 1, sg(&res, 8, mr.lkey()));
  EXPECT_TRUE(stays_empty(p.a, false, 20ms));
  p.b.qp.to_init(verbs::access::all);
  p.b.qp.to_rtr(p.a.qp.qpn(), fast_attr());  // the responder only needs RTR
  p.a.qp.to_rtr(p.b.qp.qpn(), fast_attr());
  EXPECT_TRUE(stays_empty(p.a, false, 20ms));
  p.a.qp.to_rts(fast_attr());
  EXPECT_TRUE(wait_cqe(p.a, false).c.ok());
  EXPECT_EQ(v, 1u);
}

TEST(soft_control, a_qp_in_err_returns_to_reset_and_reconnects) {
  pair p;
  p.a.qp.to_err();
  EXPECT_EQ(p.a.qp.state(), verbs::qp_state::err);
  p.a.qp.to_reset();
  EXPECT_EQ(p.a.qp.state(), verbs::qp_state::reset);
  verbs::connect_rc(p.a.qp, p.b.qp.qpn(), verbs::access::all, fast_attr());
  p.a.export_handles(true);  // counters restart with the ring
  alignas(8) uint64_t v = 10, res = 0;
  verbs::mr mv(p.pd, &v, 8, verbs::access::all), mr(p.pd, &res, 8, verbs::access::all);
  post_fa(*p.a.h, addr(&v), mv.rkey(), 5, sg(&res, 8, mr.lkey()));
  const got g = wait_cqe(p.a, false);
  EXPECT_TRUE(g.c.ok());
  EXPECT_EQ(g.c.wqe_counter, 0);
  EXPECT_EQ(v, 15u);
  const verbs::qp_attr q = p.a.qp.query();
  EXPECT_EQ(q.dest_qp_num, p.b.qp.qpn());
  EXPECT_EQ(q.state, verbs::qp_state::rts);
}

// Waits until the CQE at free-running position `pos` of cq is written (not consumed).
bool cqe_written(const dev::cq_handle& cq, uint64_t pos) {
  const auto t0 = std::chrono::steady_clock::now();
  uint32_t tail = 0;
  while (!dev::cqe_ready(cq, pos, &tail)) {
    if (std::chrono::steady_clock::now() - t0 > 5s) return false;
  }
  return true;
}

// As rdma-core's mlx5 provider (and gdaki's): RESET drops the QP's unpolled CQEs, and a CQ
// exported again starts past them. (Before: the soft CQs kept them and a re-export
// started at 0, so the polled CQE and the two stale ones came back.)
TEST(soft_control, reset_discards_the_qps_cqes_and_its_cqs_export_again_past_them) {
  pair p;
  alignas(8) uint64_t v = 0, res[3] = {};
  verbs::mr mv(p.pd, &v, 8, verbs::access::all), mr(p.pd, res, sizeof res, verbs::access::all);
  for (uint64_t& r : res) post_fa(*p.a.h, addr(&v), mv.rkey(), 1, sg(&r, 8, mr.lkey()));
  EXPECT_TRUE(wait_cqe(p.a, false).c.ok());  // the first is polled; two stay in the CQ
  ASSERT_TRUE(cqe_written(*p.a.hs, 2));
  p.a.qp.to_reset();
  verbs::connect_rc(p.a.qp, p.b.qp.qpn(), verbs::access::all, fast_attr());
  p.a.export_handles(true);
  EXPECT_EQ(p.a.hs->ci, 3u) << "past the polled CQE and the two discarded";
  uint32_t tail = 0;
  EXPECT_FALSE(dev::cqe_ready(*p.a.hs, p.a.hs->ci, &tail)) << "a CQE from before the RESET";
  post_fa(*p.a.h, addr(&v), mv.rkey(), 10, sg(&res[0], 8, mr.lkey()));
  const got g = wait_cqe(p.a, false);
  EXPECT_TRUE(g.c.ok());
  EXPECT_EQ(g.c.wqe_counter, 0);
  EXPECT_EQ(g.pos, 3u);
  EXPECT_EQ(res[0], 3u);
  EXPECT_EQ(v, 13u);
}

// Destroy drops the QP's unpolled CQEs from a CQ that outlives it; another QP's CQEs on a
// shared receive CQ stay, in order.
TEST(soft_control, destroy_discards_the_qps_cqes_and_keeps_the_other_qps_in_order) {
  // Receivers d and e share one receive CQ (d's); c sends to d, f to e.
  pair p(endpoint_options{}, endpoint_options{}, false);
  endpoint c, d, e, f;
  c.create(p.dev, p.pd, {});
  f.create(p.dev, p.pd, {});
  d.scq = verbs::cq(p.dev, verbs::cq_init{.depth = 16});
  d.rcq = verbs::cq(p.dev, verbs::cq_init{.depth = 16});
  verbs::qp_init qi;
  qi.send_cq = &d.scq;
  qi.recv_cq = &d.rcq;
  qi.sq_wqebbs = 16;
  qi.rq_wqes = 16;
  d.qp = verbs::qp(p.pd, qi);
  e.scq = verbs::cq(p.dev, verbs::cq_init{.depth = 16});
  verbs::qp_init qe = qi;
  qe.send_cq = &e.scq;
  e.qp = verbs::qp(p.pd, qe);
  verbs::connect_rc(c.qp, d.qp.qpn(), verbs::access::all, fast_attr());
  verbs::connect_rc(d.qp, c.qp.qpn(), verbs::access::all, fast_attr());
  verbs::connect_rc(f.qp, e.qp.qpn(), verbs::access::all, fast_attr());
  verbs::connect_rc(e.qp, f.qp.qpn(), verbs::access::all, fast_attr());
  c.export_handles(true);
  f.export_handles(true);
  dev::cq_handle rh = d.rcq.export_handle();
  dev::cq_handle ds = d.scq.export_handle(), es = e.scq.export_handle();
  dev::qp_handle dh = d.qp.export_handle(&ds, &rh, {}), eh = e.qp.export_handle(&es, &rh, {});
  alignas(8) uint32_t buf[8] = {};
  verbs::mr mb(p.pd, buf, sizeof buf, verbs::access::all);
  for (uint32_t i = 0; i < 4; ++i) {
    dev::qp_handle& r = i % 2 ? eh : dh;
    const dev::sge g = sg(&buf[i], 4, mb.lkey());
    ASSERT_EQ(dev::rq_post(r, &g, 1), gdaki::status::ok);
  }
  alignas(8) uint32_t msg[4] = {10, 11, 12, 13};
  verbs::mr mm(p.pd, msg, sizeof msg, verbs::access::all);
  // Sends alternate between d (from c) and e (from f) into the shared receive CQ: d, e, d, e.
  for (uint32_t i = 0; i < 4; ++i) {
    const dev::sge g = sg(&msg[i], 4, mm.lkey());
    post_send(i % 2 ? *f.h : *c.h, &g, 1);
    ASSERT_TRUE(cqe_written(rh, i));
  }
  d.qp = verbs::qp{};  // destroyed with two receive CQEs unpolled
  dev::cq_handle again = d.rcq.export_handle();
  EXPECT_EQ(again.ci, 2u) << "d's two CQEs dropped";
  for (uint32_t i = 0; i < 2; ++i) {
    dev::completion cq{};
    ASSERT_EQ(dev::cq_poll_one(again, &cq), gdaki::status::ok) << i;
    EXPECT_EQ(cq.qpn, e.qp.qpn()) << i;
    EXPECT_EQ(cq.byte_cnt, 4u);
  }
  dev::completion none{};
  EXPECT_EQ(dev::cq_poll_one(again, &none), gdaki::status::again);
  EXPECT_EQ(buf[1], 11u);
  EXPECT_EQ(buf[3], 13u);
}

TEST(soft_control, exported_handles_carry_geometry_and_zero_counters) {
  pair p({.sq_wqebbs = 100, .rq_wqes = 10, .max_inline = 28, .max_recv_sge = 3});
  const dev::qp_handle& h = *p.a.h;
  EXPECT_EQ(h.log_sq_wqebbs, 7u);
  EXPECT_EQ(h.log_rq_wqes, 4u);
  EXPECT_EQ(h.log_rq_stride, 6u);
  EXPECT_EQ(h.max_inline, 28u);
  EXPECT_EQ(h.max_send_wqebbs, 2u);
  EXPECT_EQ(gdaki::dev::err_index_of(h.err_state), dev::no_error_index);
  EXPECT_EQ(h.sq_reserved + h.sq_ready + h.sq_rung + h.sq_completed + h.rq_reserved + h.rq_ready + h.rq_completed, 0u);
  EXPECT_EQ(h.db_mode, dev::doorbell_mode::db_store);
  EXPECT_EQ(h.qpn, p.a.qp.qpn());
  EXPECT_EQ(h.send_cq, p.a.hs.get());
  EXPECT_EQ(p.a.hs->ci, 0u);
  EXPECT_EQ(p.a.qp.caps().rq_stride, 64u);
}

}  // namespace

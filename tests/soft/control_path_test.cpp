// The control path: devices, registry, attributes, the RC state machine and its errors.
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

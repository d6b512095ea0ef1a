// The mlx5 provider's control path (PD, MR, DEVX CQ and QP, the QP state machine, export)
// driven through its ops table against fake libibverbs / libmlx5 tables
// (mlx5_devx_fakes.hpp): the fakes record every call and command mailbox and answer with
// programmed object numbers, states and failures. This proves which commands go out, in
// which order, with which fields, how failures read, and what the exported handles hold.
// It does not prove that a ConnectX accepts the commands: that needs hardware
// (docs/mlx5.md, checklist).
#include "mlx5_devx_fakes.hpp"

#include "gdaki/device/cq.hpp"
#include "gdaki/prm/cqe.hpp"
#include "gpu/cuda_driver.hpp"

TEST_F(mlx5_devx_fake, pd_reads_its_number_and_mr_translates_access_and_keys) {
  auto* pd = make_pd();
  std::vector<uint8_t> buf(4096);
  verbs::provider_object* mr = nullptr;
  verbs::mr_keys keys;
  std::string why;
  ASSERT_EQ(ops.reg_mr(pd, buf.data(), buf.size(), verbs::access::all, &mr, &keys, &why), status::ok) << why;
  EXPECT_EQ(r.last_mr_access,
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  EXPECT_EQ(keys.lkey, 0x1111u);
  EXPECT_EQ(keys.rkey, 0x2222u);
  EXPECT_EQ(ops.dereg_mr(mr), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_devx_fake, mr_refuses_remote_write_without_local_write_before_calling_rdma_core) {
  auto* pd = make_pd();
  std::vector<uint8_t> buf(64);
  verbs::provider_object* mr = nullptr;
  verbs::mr_keys keys;
  std::string why;
  EXPECT_EQ(ops.reg_mr(pd, buf.data(), buf.size(), verbs::access::remote_write, &mr, &keys, &why), status::invalid);
  EXPECT_NE(why.find("remote_write requires local_write"), std::string::npos) << why;
  EXPECT_EQ(r.last_mr_access, -1);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_devx_fake, create_cq_initialises_the_ring_to_0xf1_then_registers_umems_then_sends_create_cq) {
  verbs::cq_init ci;
  ci.depth = 100;  // rounded up to 128
  verbs::provider_object* cq = nullptr;
  uint32_t cqn = 0, n = 0;
  std::string why;
  ASSERT_EQ(ops.create_cq(dev, ci, &cq, &cqn, &n, &why), status::ok) << why;
  EXPECT_EQ(n, 128u);
  EXPECT_EQ(cqn, 0x40u);
  const std::vector<std::string> order = {"umem_reg", "umem_reg", "alloc_uar(NC)", "CREATE_CQ"};
  EXPECT_EQ(r.calls, order);
  const auto in = last_command(pc::op::create_cq);
  ASSERT_EQ(in.size(), pc::size::create_cq_in);
  EXPECT_EQ(pc::get_bits(in, 0x80 + 0x08, 3), 0u);     // cqe_sz: 64-byte CQEs
  EXPECT_EQ(pc::get_bits(in, 0x80 + 0x0e, 1), 1u);     // oi: overrun ignore, the default
  EXPECT_EQ(pc::get_bits(in, 0x80 + 0x63, 5), 7u);     // log_cq_size
  EXPECT_EQ(pc::get_bits(in, 0x80 + 0x68, 24), 0x77u); // uar_page
  EXPECT_EQ(pc::get_bits(in, 0x80 + 0xa0, 32), 9u);    // c_eqn from devx_query_eqn
  EXPECT_EQ(pc::get_bits(in, 0x2c0, 32), 0x100u);      // cq_umem_id: the ring (first umem)
  EXPECT_EQ(pc::get_bits(in, 0x2e0, 1), 1u);           // cq_umem_valid
  EXPECT_EQ(pc::get_bits(in, 0x80 + 0x06, 1), 1u);     // dbr_umem_valid
  EXPECT_EQ(pc::get_bits(in, 0x80 + 0x20, 32), 0x101u);// dbr_umem_id
  // The ring umem covers 128 * 64 bytes, every op_own reads 0xF1.
  ASSERT_EQ(r.umem_ranges.size(), 2u);
  EXPECT_EQ(r.umem_ranges[0].second, 128u * 64);
  gdaki::dev::cq_handle h{};
  ASSERT_EQ(ops.export_cq(cq, &h, &why), status::ok) << why;
  EXPECT_EQ(static_cast<void*>(h.cqes), r.umem_ranges[0].first);
  EXPECT_EQ(static_cast<void*>(h.dbrec), r.umem_ranges[1].first);
  EXPECT_EQ(h.log_cqe_cnt, 7u);
  EXPECT_EQ(h.cqn, 0x40u);
  EXPECT_EQ(h.ci, 0u);
  for (uint32_t i = 0; i < 128; ++i) ASSERT_EQ(h.cqes[i].op_own, gdaki::prm::cqe_op_own_init) << i;
  EXPECT_EQ(ops.destroy_cq(cq), status::ok);
}

TEST_F(mlx5_devx_fake, create_cq_without_overrun_ignore_clears_oi) {
  verbs::cq_init ci;
  ci.depth = 1;
  ci.ignore_overrun = false;
  verbs::provider_object* cq = nullptr;
  uint32_t cqn = 0, n = 0;
  std::string why;
  ASSERT_EQ(ops.create_cq(dev, ci, &cq, &cqn, &n, &why), status::ok) << why;
  EXPECT_EQ(n, 1u);
  const auto in = last_command(pc::op::create_cq);
  EXPECT_EQ(pc::get_bits(in, 0x80 + 0x0e, 1), 0u);
  EXPECT_EQ(pc::get_bits(in, 0x80 + 0x63, 5), 0u);
  EXPECT_EQ(ops.destroy_cq(cq), status::ok);
}

TEST_F(mlx5_devx_fake, create_cq_failure_names_the_command_status_and_syndrome_and_releases_everything) {
  r.fail[pc::op::create_cq] = {0x03, 0xdeadbeef};
  verbs::cq_init ci;
  verbs::provider_object* cq = nullptr;
  uint32_t cqn = 0, n = 0;
  std::string why;
  EXPECT_EQ(ops.create_cq(dev, ci, &cq, &cqn, &n, &why), status::io_error);
  EXPECT_EQ(cq, nullptr);
  EXPECT_NE(why.find("CREATE_CQ failed: status BAD_PARAM (0x3), syndrome 0xdeadbeef"), std::string::npos) << why;
  EXPECT_NE(why.find("mlx5dv_devx_obj_create"), std::string::npos) << why;
  EXPECT_EQ(r.umems, 0);  // both umems deregistered (TearDown checks the rest)
}

TEST_F(mlx5_devx_fake, cq_and_qp_need_devx) {
  auto* nodevx = make_device_for_test("mlx5_nodevx", &ibv, &dv, &ctx, false);
  verbs::cq_init ci;
  verbs::provider_object* cq = nullptr;
  uint32_t cqn = 0, n = 0;
  std::string why;
  EXPECT_EQ(ops.create_cq(nodevx, ci, &cq, &cqn, &n, &why), status::not_supported);
  EXPECT_NE(why.find("needs DEVX"), std::string::npos) << why;
  EXPECT_TRUE(r.calls.empty());
  ops.close_device(nodevx);
}

TEST_F(mlx5_devx_fake, create_qp_sends_create_qp_with_pd_cqs_uar_umems_and_geometry) {
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  r.calls.clear();
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  auto* qp = make_qp(pd, scq, rcq, &qpn, &caps);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qpn, 0x1000u);
  const std::vector<std::string> order = {"umem_reg", "umem_reg", "alloc_uar(NC)", "CREATE_QP"};
  EXPECT_EQ(r.calls, order);
  EXPECT_EQ(caps.sq_wqebbs, 64u);
  EXPECT_EQ(caps.rq_wqes, 32u);
  EXPECT_EQ(caps.rq_stride, 64u);
  const auto in = last_command(pc::op::create_qp);
  ASSERT_EQ(in.size(), pc::size::create_qp_in);
  const uint32_t q = 0xc0;
  EXPECT_EQ(pc::get_bits(in, q + 0x08, 8), 0u);         // st: RC
  EXPECT_EQ(pc::get_bits(in, q + 0x13, 2), 3u);         // pm_state: MIGRATED
  EXPECT_EQ(pc::get_bits(in, q + 0x28, 24), 0x42u);     // pd
  EXPECT_EQ(pc::get_bits(in, q + 0x49, 4), 5u);         // log_rq_size: 32
  EXPECT_EQ(pc::get_bits(in, q + 0x4d, 3), 2u);         // log_rq_stride: 64 B -> 6 - 4
  EXPECT_EQ(pc::get_bits(in, q + 0x51, 4), 6u);         // log_sq_size: 64
  EXPECT_EQ(pc::get_bits(in, q + 0x68, 24), 0x77u);     // uar_page
  EXPECT_EQ(pc::get_bits(in, q + 0x88, 24), 0x55u);     // user_index
  EXPECT_EQ(pc::get_bits(in, q + 0x3e8, 24), 0x40u);    // cqn_snd
  EXPECT_EQ(pc::get_bits(in, q + 0x4e8, 24), 0x41u);    // cqn_rcv
  EXPECT_EQ(pc::get_bits(in, q + 0x630, 16), 0u);       // cs_req, cs_res: no scatter to CQE
  EXPECT_EQ(pc::get_bits(in, q + 0x683, 1), 1u);        // dbr_umem_valid
  EXPECT_EQ(pc::get_bits(in, 0x840, 32), 0x104u);       // wq_umem_id (after two CQs' umems)
  EXPECT_EQ(pc::get_bits(in, q + 0x720, 32), 0x105u);   // dbr_umem_id
  EXPECT_EQ(pc::get_bits(in, 0x860, 1), 1u);            // wq_umem_valid
  // One WQ umem: RQ (32 x 64 B) then SQ (64 x 64 B), 6 KiB registered as whole 4 KiB pages.
  ASSERT_GE(r.umem_ranges.size(), 6u);
  EXPECT_EQ(r.umem_ranges[4].second, 8192u);

  gdaki::dev::qp_handle h{};
  std::string why;
  verbs::qp_export_options opt;
  ASSERT_EQ(ops.export_qp(qp, opt, &h, &why), status::ok) << why;
  auto* wq = static_cast<uint8_t*>(r.umem_ranges[4].first);
  EXPECT_EQ(h.rq_buf, wq);
  EXPECT_EQ(h.sq_buf, wq + 32 * 64);
  EXPECT_EQ(h.log_sq_wqebbs, 6u);
  EXPECT_EQ(h.log_rq_wqes, 5u);
  EXPECT_EQ(h.log_rq_stride, 6u);
  EXPECT_EQ(h.qpn, 0x1000u);
  EXPECT_EQ(static_cast<void*>(h.dbrec), r.umem_ranges[5].first);
  EXPECT_EQ(static_cast<void*>(h.uar_db), static_cast<void*>(r.uar_page + 0x800));  // host rings: CPU mapping
  EXPECT_EQ(h.bf_reg, nullptr);
  EXPECT_EQ(h.db_mode, gdaki::dev::doorbell_mode::db_store);
  EXPECT_EQ(h.host_doorbell_hook, nullptr);  // the NIC sees doorbells by itself
  EXPECT_EQ(h.host_poll_hook, nullptr);      // and progresses without the poller
  EXPECT_EQ(h.max_inline, 64u);
  EXPECT_EQ(h.max_send_wqebbs, caps.max_send_wqebbs);
  EXPECT_EQ(gdaki::dev::err_index_of(h.err_state), gdaki::dev::no_error_index);

  opt.db_mode = gdaki::dev::doorbell_mode::blueflame;
  EXPECT_EQ(ops.export_qp(qp, opt, &h, &why), status::not_supported);
  EXPECT_NE(why.find("BlueFlame"), std::string::npos) << why;

  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_devx_fake, create_qp_refuses_a_separate_rq_buffer) {
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  alignas(4096) static uint8_t other[4096];
  verbs::qp_init in;
  in.rq_ring.buffer = other;
  in.rq_ring.size = sizeof other;
  verbs::qp_create_args a;
  a.init = &in;
  a.send_cq = scq;
  a.recv_cq = rcq;
  verbs::provider_object* qp = nullptr;
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  std::string why;
  EXPECT_EQ(ops.create_qp(pd, a, &qp, &qpn, &caps, &why), status::invalid);
  EXPECT_NE(why.find("one buffer (RQ first)"), std::string::npos) << why;
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_devx_fake, create_qp_failure_names_create_qp_and_releases_umems_and_uar) {
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  r.fail[pc::op::create_qp] = {0x0f, 0x0badc0de};
  verbs::qp_init in;
  verbs::qp_create_args a;
  a.init = &in;
  a.send_cq = scq;
  a.recv_cq = rcq;
  verbs::provider_object* qp = nullptr;
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  std::string why;
  EXPECT_EQ(ops.create_qp(pd, a, &qp, &qpn, &caps, &why), status::io_error);
  EXPECT_NE(why.find("CREATE_QP failed: status NO_RESOURCES (0xf), syndrome 0x0badc0de"), std::string::npos) << why;
  EXPECT_EQ(r.umems, 4);  // only the two CQs' umems remain
  EXPECT_EQ(r.uars, 1);   // only the CQs' shared UAR remains
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_devx_fake, infiniband_connect_sends_rst2init_init2rtr_rtr2rts_in_order_with_lid_path) {
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  auto* qp = make_qp(pd, scq, rcq, &qpn, &caps);
  r.calls.clear();
  namespace m = verbs::qp_attr_mask;
  std::string why;
  verbs::qp_attr a;
  a.state = verbs::qp_state::init;
  a.access_flags = verbs::access::all;
  a.port_num = 1;
  ASSERT_EQ(ops.modify_qp(qp, a, m::reset_to_init, &why), status::ok) << why;
  a.state = verbs::qp_state::rtr;
  a.dest_qp_num = 0x2345;
  a.rq_psn = 0x10;
  a.mtu = verbs::path_mtu::mtu_2048;
  a.av.dlid = 0x22;
  a.av.sl = 2;
  ASSERT_EQ(ops.modify_qp(qp, a, m::init_to_rtr, &why), status::ok) << why;
  a.state = verbs::qp_state::rts;
  a.sq_psn = 0x20;
  a.timeout = 18;
  a.retry_cnt = 5;
  a.rnr_retry = 7;
  ASSERT_EQ(ops.modify_qp(qp, a, m::rtr_to_rts, &why), status::ok) << why;
  const std::vector<std::string> order = {"RST2INIT_QP", "INIT2RTR_QP", "RTR2RTS_QP"};
  EXPECT_EQ(r.calls, order);

  const uint32_t q = 0xc0, path = 0xc0 + 0xc0;
  const auto init = last_command(pc::op::rst2init_qp);
  EXPECT_EQ(pc::get_bits(init, 0x48, 24), qpn);
  EXPECT_EQ(pc::get_bits(init, path + 0x128, 8), 1u);   // vhca_port_num
  EXPECT_EQ(pc::get_bits(init, q + 0x490, 3), 7u);      // rre, rwe, rae
  EXPECT_EQ(pc::get_bits(init, q + 0x48c, 4), 3u);      // atomic_mode: up to 8 bytes
  const auto rtr = last_command(pc::op::init2rtr_qp);
  EXPECT_EQ(pc::get_bits(rtr, q + 0x40, 3), 4u);        // mtu 2048
  EXPECT_EQ(pc::get_bits(rtr, q + 0xa8, 24), 0x2345u);  // remote_qpn
  EXPECT_EQ(pc::get_bits(rtr, q + 0x4a8, 24), 0x10u);   // next_rcv_psn
  EXPECT_EQ(pc::get_bits(rtr, path + 0x28, 1), 0u);     // no GRH
  EXPECT_EQ(pc::get_bits(rtr, path + 0x30, 16), 0x22u); // rlid
  EXPECT_EQ(pc::get_bits(rtr, path + 0x124, 4), 2u);    // sl
  EXPECT_EQ(pc::get_bits(rtr, path + 0x130, 48), 0u);   // no rmac on InfiniBand
  const auto rts = last_command(pc::op::rtr2rts_qp);
  EXPECT_EQ(pc::get_bits(rts, path + 0x40, 5), 18u);    // ack_timeout
  EXPECT_EQ(pc::get_bits(rts, q + 0x38d, 3), 5u);       // retry_count
  EXPECT_EQ(pc::get_bits(rts, q + 0x390, 3), 7u);       // rnr_retry
  EXPECT_EQ(pc::get_bits(rts, q + 0x3c8, 24), 0x20u);   // next_send_psn

  verbs::qp_attr got;
  ASSERT_EQ(ops.query_qp(qp, &got, &why), status::ok) << why;
  EXPECT_EQ(got.state, verbs::qp_state::rts);
  EXPECT_EQ(got.dest_qp_num, 0x2345u);

  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_devx_fake, roce_init2rtr_resolves_the_mac_through_an_ah_and_sets_gid_and_udp_sport) {
  r.link_layer = IBV_LINK_LAYER_ETHERNET;
  const uint8_t mac[6] = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
  std::memcpy(r.av.rmac, mac, 6);
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  auto* qp = make_qp(pd, scq, rcq, &qpn, &caps);
  namespace m = verbs::qp_attr_mask;
  std::string why;
  verbs::qp_attr a;
  a.state = verbs::qp_state::init;
  ASSERT_EQ(ops.modify_qp(qp, a, m::reset_to_init, &why), status::ok) << why;
  a.state = verbs::qp_state::rtr;
  a.dest_qp_num = 0x777;
  // Without a GRH a RoCE path cannot be built.
  EXPECT_EQ(ops.modify_qp(qp, a, m::init_to_rtr, &why), status::invalid);
  EXPECT_NE(why.find("RoCE addressing needs a GRH"), std::string::npos) << why;
  a.av.is_global = true;
  a.av.sgid_index = 3;
  a.av.hop_limit = 64;
  a.av.sl = 5;
  for (int i = 0; i < 16; ++i) a.av.dgid[i] = static_cast<uint8_t>(i + 1);
  r.calls.clear();
  ASSERT_EQ(ops.modify_qp(qp, a, m::init_to_rtr, &why), status::ok) << why;
  const std::vector<std::string> order = {"create_ah", "destroy_ah", "INIT2RTR_QP"};
  EXPECT_EQ(r.calls, order);
  EXPECT_EQ(r.last_ah.is_global, 1);
  EXPECT_EQ(r.last_ah.grh.sgid_index, 3);
  EXPECT_EQ(r.last_ah.grh.dgid.raw[15], 16);
  const uint32_t path = 0xc0 + 0xc0;
  const auto rtr = last_command(pc::op::init2rtr_qp);
  EXPECT_EQ(pc::get_bits(rtr, path + 0x28, 1), 1u);                // grh
  EXPECT_EQ(pc::get_bits(rtr, path + 0x48, 8), 3u);                // src_addr_index
  EXPECT_EQ(pc::get_bits(rtr, path + 0x58, 8), 64u);               // hop_limit
  EXPECT_EQ(pc::get_bits(rtr, path + 0x80, 8), 1u);                // rgid byte 0
  EXPECT_EQ(pc::get_bits(rtr, path + 0x80 + 15 * 8, 8), 16u);      // rgid byte 15
  EXPECT_EQ(pc::get_bits(rtr, path + 0x130, 48), 0x02aabbccddeeull);  // rmac
  EXPECT_EQ(pc::get_bits(rtr, path + 0x121, 3), 5u);               // eth_prio from sl
  const uint16_t sport = pc::udp_sport_from_flow_label(pc::flow_label_from_qpns(qpn, 0x777));
  EXPECT_EQ(pc::get_bits(rtr, path + 0x110, 16), sport);           // udp_sport
  EXPECT_GE(sport, 0xc000);

  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_devx_fake, a_failed_transition_names_the_command_and_keeps_the_state) {
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  auto* qp = make_qp(pd, scq, rcq, &qpn, &caps);
  namespace m = verbs::qp_attr_mask;
  std::string why;
  verbs::qp_attr a;
  a.state = verbs::qp_state::init;
  ASSERT_EQ(ops.modify_qp(qp, a, m::reset_to_init, &why), status::ok) << why;
  r.fail[pc::op::init2rtr_qp] = {0x10, 0x00c0ffee};
  a.state = verbs::qp_state::rtr;
  a.av.dlid = 1;
  EXPECT_EQ(ops.modify_qp(qp, a, m::init_to_rtr, &why), status::io_error);
  EXPECT_NE(why.find("INIT2RTR_QP failed: status BAD_QP_STATE (0x10), syndrome 0x00c0ffee"), std::string::npos)
      << why;
  verbs::qp_attr got;
  ASSERT_EQ(ops.query_qp(qp, &got, &why), status::ok) << why;
  EXPECT_EQ(got.state, verbs::qp_state::init);
  // Transitions the provider does not implement say so.
  a.state = verbs::qp_state::rts;
  EXPECT_EQ(ops.modify_qp(qp, a, m::rtr_to_rts, &why), status::not_supported);
  EXPECT_NE(why.find("not INIT->RTS"), std::string::npos) << why;
  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_devx_fake, to_err_and_to_reset_send_2err_and_2rst_and_query_reads_the_nic_state) {
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  auto* qp = make_qp(pd, scq, rcq, &qpn, &caps);
  r.calls.clear();
  std::string why;
  verbs::qp_attr a;
  a.state = verbs::qp_state::err;
  ASSERT_EQ(ops.modify_qp(qp, a, verbs::qp_attr_mask::state, &why), status::ok) << why;
  verbs::qp_attr got;
  ASSERT_EQ(ops.query_qp(qp, &got, &why), status::ok) << why;
  EXPECT_EQ(got.state, verbs::qp_state::err);
  a.state = verbs::qp_state::reset;
  ASSERT_EQ(ops.modify_qp(qp, a, verbs::qp_attr_mask::state, &why), status::ok) << why;
  ASSERT_EQ(ops.query_qp(qp, &got, &why), status::ok) << why;
  EXPECT_EQ(got.state, verbs::qp_state::reset);
  const std::vector<std::string> order = {"2ERR_QP", "2RST_QP"};
  EXPECT_EQ(r.calls, order);
  EXPECT_EQ(pc::get_bits(last_command(pc::op::to_err_qp), 0x48, 24), qpn);
  // A failed QUERY_QP is reported, not papered over with the remembered state.
  r.fail[pc::op::query_qp] = {0x05, 0x1};
  EXPECT_EQ(ops.query_qp(qp, &got, &why), status::io_error);
  EXPECT_NE(why.find("QUERY_QP failed: status BAD_RESOURCE (0x5)"), std::string::npos) << why;
  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_devx_fake, gpu_placement_without_a_cuda_driver_is_not_supported_and_names_libcuda) {
  std::string msg;
  if (gdaki::gpu::cuda_driver(&msg) != nullptr) GTEST_SKIP() << "a CUDA driver is present on this machine";
  verbs::cq_init ci;
  ci.ring.kind = verbs::memory_kind::device;
  verbs::provider_object* cq = nullptr;
  uint32_t cqn = 0, n = 0;
  std::string why;
  EXPECT_EQ(ops.create_cq(dev, ci, &cq, &cqn, &n, &why), status::not_supported);
  EXPECT_NE(why.find("cq ring: device memory needs the CUDA driver"), std::string::npos) << why;
  EXPECT_NE(why.find("libcuda.so.1"), std::string::npos) << why;
  EXPECT_TRUE(r.calls.empty());
}

TEST_F(mlx5_devx_fake, caller_placed_cq_ring_is_registered_as_given_and_must_be_page_aligned) {
  void* mem = nullptr;
  ASSERT_EQ(posix_memalign(&mem, 4096, 8192), 0);
  verbs::cq_init ci;
  ci.depth = 16;  // 1 KiB of CQEs in a caller buffer of exactly 1 KiB
  ci.ring.buffer = mem;
  ci.ring.size = 16 * 64;
  verbs::provider_object* cq = nullptr;
  uint32_t cqn = 0, n = 0;
  std::string why;
  ASSERT_EQ(ops.create_cq(dev, ci, &cq, &cqn, &n, &why), status::ok) << why;
  ASSERT_FALSE(r.umem_ranges.empty());
  EXPECT_EQ(r.umem_ranges[0].first, mem);
  EXPECT_EQ(r.umem_ranges[0].second, 16u * 64);  // never beyond the caller's buffer
  EXPECT_EQ(static_cast<uint8_t*>(mem)[16 * 64 - 1], gdaki::prm::cqe_op_own_init);
  EXPECT_EQ(ops.destroy_cq(cq), status::ok);
  ci.ring.buffer = static_cast<uint8_t*>(mem) + 64;
  EXPECT_EQ(ops.create_cq(dev, ci, &cq, &cqn, &n, &why), status::invalid);
  EXPECT_NE(why.find("4096-byte aligned"), std::string::npos) << why;
  std::free(mem);
}

TEST_F(mlx5_devx_fake, cq_in_error_reads_the_cq_context_status) {
  auto* cq = make_cq();
  bool err = true;
  ASSERT_EQ(ops.cq_in_error(cq, &err), status::ok);
  EXPECT_FALSE(err);
  EXPECT_EQ(pc::get_bits(last_command(pc::op::query_cq), 0x48, 24), 0x40u);
  r.cq_status = pc::cq_status_overflow;
  ASSERT_EQ(ops.cq_in_error(cq, &err), status::ok);
  EXPECT_TRUE(err);
  r.fail[pc::op::query_cq] = {0x02, 0};
  EXPECT_EQ(ops.cq_in_error(cq, &err), status::io_error);
  EXPECT_EQ(ops.destroy_cq(cq), status::ok);
}

TEST_F(mlx5_devx_fake, query_device_takes_endianness_and_masked_atomics_from_the_atomic_caps) {
  verbs::device_attr a;
  std::string why;
  ASSERT_EQ(ops.query_device(dev, &a, &why), status::ok) << why;
  EXPECT_TRUE(a.atomic_host_endian);
  EXPECT_TRUE(a.masked_atomics);
  EXPECT_EQ(pc::get_bits(last_command(pc::op::query_hca_cap), 0x30, 16), 0x7u);  // atomic caps, current
  // Big-endian responses and no masked fetch-add.
  r.endian_mode = 0;
  r.atomic_ops = 0x7;
  ASSERT_EQ(ops.query_device(dev, &a, &why), status::ok) << why;
  EXPECT_FALSE(a.atomic_host_endian);
  EXPECT_FALSE(a.masked_atomics);
  // Masked ops, but no 8-byte operands on QPs.
  r.atomic_ops = 0xf;
  r.atomic_size_qp = 0x4;
  ASSERT_EQ(ops.query_device(dev, &a, &why), status::ok) << why;
  EXPECT_FALSE(a.masked_atomics);
  // When the caps query fails, the verbs answer (IBV_ATOMIC_HCA) stands and masked atomics
  // are not claimed.
  r.fail[pc::op::query_hca_cap] = {0x02, 0};
  ASSERT_EQ(ops.query_device(dev, &a, &why), status::ok) << why;
  EXPECT_TRUE(a.atomic_host_endian);
  EXPECT_FALSE(a.masked_atomics);
}

// ---- RESET and destroy clean up as rdma-core's mlx5 provider does ---------------------------

namespace {

// Writes the CQE the NIC would write at free-running position `pos` of a 2^log_n ring: a
// requester (or, with an error, requester-error) completion of `qpn`, owner bit of pos's lap.
void nic_writes_cqe(gdaki::dev::cq_handle& cq, uint32_t pos, uint32_t qpn, uint16_t wqe_counter, bool error = false) {
  gdaki::prm::cqe64& c = cq.cqes[pos & ((1u << cq.log_cqe_cnt) - 1)];
  std::memset(&c, 0, sizeof c);
  c.sop_drop_qpn = gdaki::prm::to_be32(qpn);
  c.wqe_counter = gdaki::prm::to_be16(wqe_counter);
  const auto op = error ? gdaki::prm::cqe_opcode::req_err : gdaki::prm::cqe_opcode::req;
  c.op_own = static_cast<uint8_t>((static_cast<uint8_t>(op) << 4) | ((pos >> cq.log_cqe_cnt) & 1));
}

gdaki::dev::cq_handle export_cq_handle(verbs::provider_object* cq) {
  gdaki::dev::cq_handle h{};
  std::string why;
  EXPECT_EQ(ops.export_cq(cq, &h, &why), status::ok) << why;
  return h;
}

// What a poller at position `pos` would accept: (qpn, wqe_counter), or (0, 0) when the slot
// is not a completion of this lap.
std::pair<uint32_t, uint16_t> polled_at(const gdaki::dev::cq_handle& cq, uint64_t pos) {
  uint32_t tail = 0;
  if (!gdaki::dev::cqe_ready(cq, pos, &tail)) return {0, 0};
  gdaki::dev::completion c{};
  gdaki::dev::decode_cqe(cq.cqes + (pos & (gdaki::dev::cqe_count(cq) - 1)), tail, &c);
  return {c.qpn, c.wqe_counter};
}

}  // namespace

// Before this clean-up existed, 2RST left the doorbell record at (5, 7) and the CQs
// untouched: a re-exported send CQ handle started at ci 0 and read the reset QP's old
// completions (this test failed on every assertion after the modify).
TEST_F(mlx5_devx_fake, reset_zeroes_the_doorbell_record_and_discards_the_qps_cqes_keeping_others_in_order) {
  auto* pd = make_pd();
  auto* scq = make_cq(8);
  auto* rcq = make_cq(8);
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  auto* qp = make_qp(pd, scq, rcq, &qpn, &caps);
  std::string why;
  gdaki::dev::qp_handle h{};
  verbs::qp_export_options opt;
  ASSERT_EQ(ops.export_qp(qp, opt, &h, &why), status::ok) << why;
  h.dbrec->rcv = gdaki::prm::to_be32(5);
  h.dbrec->snd = gdaki::prm::to_be32(7);

  // Send CQ: three completions of this QP, none consumed.
  gdaki::dev::cq_handle s = export_cq_handle(scq);
  for (uint32_t p = 0; p < 3; ++p) nic_writes_cqe(s, p, qpn, static_cast<uint16_t>(p * 2), p == 2);
  // Receive CQ, shared with other QPs: 6 consumed, then six CQEs that wrap the 8-entry ring
  // (positions 6..11: slots 6, 7 on lap 0, slots 0..3 on lap 1), three of them this QP's.
  gdaki::dev::cq_handle rc = export_cq_handle(rcq);
  rc.dbrec->set_ci = gdaki::prm::to_be32(6);
  const uint32_t other[3] = {0x2001, 0x2002, 0x2003};
  nic_writes_cqe(rc, 6, qpn, 1);
  nic_writes_cqe(rc, 7, other[0], 11);
  nic_writes_cqe(rc, 8, qpn, 2);
  nic_writes_cqe(rc, 9, other[1], 12);
  nic_writes_cqe(rc, 10, qpn, 3);
  nic_writes_cqe(rc, 11, other[2], 13);

  verbs::qp_attr a;
  a.state = verbs::qp_state::reset;
  ASSERT_EQ(ops.modify_qp(qp, a, verbs::qp_attr_mask::state, &why), status::ok) << why;
  EXPECT_EQ(gdaki::prm::from_be(h.dbrec->rcv), 0u);
  EXPECT_EQ(gdaki::prm::from_be(h.dbrec->snd), 0u);

  // Send CQ: all three dropped; a handle exported now starts past them, at an empty slot.
  const gdaki::dev::cq_handle s2 = export_cq_handle(scq);
  EXPECT_EQ(s2.ci, 3u);
  EXPECT_EQ(gdaki::prm::from_be(s2.dbrec->set_ci), 3u);
  EXPECT_EQ(polled_at(s2, s2.ci).first, 0u);
  // Receive CQ: the other QPs' three, in their order, at 9..11 (across the ring's end,
  // with the owner bit of lap 1), then nothing.
  const gdaki::dev::cq_handle r2 = export_cq_handle(rcq);
  ASSERT_EQ(r2.ci, 9u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(polled_at(r2, r2.ci + i), std::make_pair(other[i], static_cast<uint16_t>(11 + i))) << "position " << 9 + i;
  }
  EXPECT_EQ(polled_at(r2, r2.ci + 3).first, 0u);
  // A second RESET finds nothing more to drop.
  ASSERT_EQ(ops.modify_qp(qp, a, verbs::qp_attr_mask::state, &why), status::ok) << why;
  EXPECT_EQ(export_cq_handle(rcq).ci, 9u);
  // A re-exported QP handle starts from zero counters and no error.
  ASSERT_EQ(ops.export_qp(qp, opt, &h, &why), status::ok) << why;
  EXPECT_EQ(h.sq_reserved + h.sq_ready + h.sq_rung + h.sq_completed + h.rq_reserved + h.rq_ready + h.rq_completed, 0u);
  EXPECT_EQ(h.err_state, gdaki::dev::no_error_state);

  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

// Destroying a QP drops its CQEs from a receive CQ that outlives it (before: they stayed,
// and the next QP on that CQ polled completions of a QP that no longer exists).
TEST_F(mlx5_devx_fake, destroy_discards_the_qps_cqes_from_a_cq_that_outlives_it) {
  auto* pd = make_pd();
  auto* scq = make_cq(16);
  auto* rcq = make_cq(16);
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  auto* qp = make_qp(pd, scq, rcq, &qpn, &caps);
  gdaki::dev::cq_handle rc = export_cq_handle(rcq);
  nic_writes_cqe(rc, 0, 0x3003, 1);
  nic_writes_cqe(rc, 1, qpn, 2);
  nic_writes_cqe(rc, 2, qpn, 3);
  nic_writes_cqe(rc, 3, 0x3003, 4);
  r.calls.clear();
  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  ASSERT_FALSE(r.calls.empty());
  EXPECT_EQ(r.calls.front(), "destroy QP") << "the QP object goes before its CQEs are discarded";
  const gdaki::dev::cq_handle r2 = export_cq_handle(rcq);
  EXPECT_EQ(r2.ci, 2u);
  EXPECT_EQ(polled_at(r2, 2), std::make_pair(0x3003u, uint16_t{1}));
  EXPECT_EQ(polled_at(r2, 3), std::make_pair(0x3003u, uint16_t{4}));
  EXPECT_EQ(polled_at(r2, 4).first, 0u);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

// GPU-memory rings keep their doorbell record in host-pinned memory, which the CPU doorbell
// service of a cpu-assisted export reads (before: GPU memory, and the service dereferenced a
// device pointer). Needs a working CUDA driver for the ring allocation; skips without one.
TEST_F(mlx5_devx_fake, gpu_memory_rings_get_a_doorbell_record_the_cpu_doorbell_service_can_read) {
  std::string msg;
  const gdaki::gpu::cuda_driver_api* cu = gdaki::gpu::cuda_driver(&msg);
  if (cu == nullptr) GTEST_SKIP() << "no CUDA driver: " << msg;
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  verbs::qp_init in;
  in.sq_wqebbs = 64;
  in.rq_wqes = 32;
  in.sq_ring.kind = verbs::memory_kind::device;
  verbs::qp_create_args a;
  a.init = &in;
  a.send_cq = scq;
  a.recv_cq = rcq;
  verbs::provider_object* qp = nullptr;
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  std::string why;
  const status st = ops.create_qp(pd, a, &qp, &qpn, &caps, &why);
  if (st == status::not_supported) {
    EXPECT_EQ(ops.destroy_cq(scq), status::ok);
    EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
    EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
    GTEST_SKIP() << "GPU memory not available: " << why;
  }
  ASSERT_EQ(st, status::ok) << why;
  gdaki::dev::qp_handle h{};
  verbs::qp_export_options opt;
  opt.db_mode = gdaki::dev::doorbell_mode::cpu_assisted;
  ASSERT_EQ(ops.export_qp(qp, opt, &h, &why), status::ok) << why;
  constexpr int memory_type_attribute = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
  constexpr unsigned memory_type_host = 1, memory_type_device = 2;
  unsigned type = 0;
  ASSERT_EQ(cu->pointer_get_attribute(&type, memory_type_attribute, reinterpret_cast<uintptr_t>(h.dbrec)), 0);
  EXPECT_EQ(type, memory_type_host) << "the doorbell record must be host(-pinned) memory";
  ASSERT_EQ(cu->pointer_get_attribute(&type, memory_type_attribute, reinterpret_cast<uintptr_t>(h.sq_buf)), 0);
  EXPECT_EQ(type, memory_type_device) << "the rings stay in GPU memory";
  EXPECT_EQ(gdaki::prm::from_be(h.dbrec->snd), 0u);  // a CPU read, as the doorbell service makes
  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

// The data path returns fetch-add / compare-swap results as host words, right only when the
// NIC writes them in host order. Before this check, a NIC in big-endian mode (endianness
// mode 0) exported like any other and every atomic result came back byte-swapped (the
// big-endian case below failed: the export returned ok).
TEST_F(mlx5_devx_fake, export_honours_the_atomic_result_byte_order_capability) {
  auto* pd = make_pd();
  auto* scq = make_cq();
  auto* rcq = make_cq();
  uint32_t qpn = 0;
  verbs::qp_caps caps;
  auto* qp = make_qp(pd, scq, rcq, &qpn, &caps);
  verbs::qp_export_options opt;
  gdaki::dev::qp_handle h{};
  std::string why;
  // Host endianness (mode 1): exported; the caps were asked for (atomic caps, current).
  r.endian_mode = 1;
  r.calls.clear();
  ASSERT_EQ(ops.export_qp(qp, opt, &h, &why), status::ok) << why;
  EXPECT_EQ(r.calls, std::vector<std::string>{"QUERY_HCA_CAP"});
  EXPECT_EQ(pc::get_bits(last_command(pc::op::query_hca_cap), 0x30, 16), 0x7u);
  // Big-endian results (mode 0): refused, naming the device, the capability and the cause.
  r.endian_mode = 0;
  EXPECT_EQ(ops.export_qp(qp, opt, &h, &why), status::not_supported);
  EXPECT_NE(why.find("device mlx5_fake"), std::string::npos) << why;
  EXPECT_NE(why.find("req_8B_endianness_mode 0"), std::string::npos) << why;
  EXPECT_NE(why.find("byte-swapped"), std::string::npos) << why;
  // Reserved modes are not taken for host order.
  r.endian_mode = 2;
  EXPECT_EQ(ops.export_qp(qp, opt, &h, &why), status::not_supported);
  // No 8-byte compare-swap / fetch-add at all: no result to misread (the NIC fails such a
  // WQE with an error CQE), so puts and gets still export.
  r.atomic_ops = 0;
  EXPECT_EQ(ops.export_qp(qp, opt, &h, &why), status::ok) << why;
  r.atomic_ops = 0xf;
  r.atomic_size_qp = 0x4;  // 4-byte atomics only
  EXPECT_EQ(ops.export_qp(qp, opt, &h, &why), status::ok) << why;
  // When the caps cannot be read the order is unknown: refused, saying so.
  r.atomic_size_qp = 0xc;
  r.fail[pc::op::query_hca_cap] = {0x02, 0};
  EXPECT_EQ(ops.export_qp(qp, opt, &h, &why), status::io_error);
  EXPECT_NE(why.find("cannot tell in which byte order"), std::string::npos) << why;
  r.fail.clear();
  EXPECT_EQ(ops.destroy_qp(qp), status::ok);
  EXPECT_EQ(ops.destroy_cq(scq), status::ok);
  EXPECT_EQ(ops.destroy_cq(rcq), status::ok);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

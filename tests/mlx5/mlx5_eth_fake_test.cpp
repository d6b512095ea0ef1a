// The mlx5 provider's raw-packet Ethernet queues (mlx5_eth.cpp) against the fake
// rdma-core (mlx5_devx_fakes.hpp): which commands are sent and in what order, the fields
// that tie the objects together (CQ, TIS, RQ, TIR, table, group and counter numbers),
// that each failed command is reported naming the object and leaves nothing behind, and
// that destroy releases everything in the reverse order. No ConnectX has run this.
#include "mlx5_devx_fakes.hpp"

#include <algorithm>

#include "providers/mlx5/mlx5_eth.hpp"
#include "providers/mlx5/mlx5_prm_eth.hpp"

namespace {

// Object commands and destroys, in order (umem, UAR and PD calls left out).
std::vector<std::string> object_calls(const recorder& r) {
  std::vector<std::string> v;
  for (const auto& c : r.calls) {
    const bool command = !c.empty() && c[0] >= 'A' && c[0] <= 'Z';
    if (command || c.rfind("destroy ", 0) == 0) v.push_back(c);
  }
  return v;
}

// A UDP rule (ethertype, IP protocol, destination port) and a drop rule for one VLAN.
std::vector<eth_rule> two_rules() {
  eth_rule udp;
  udp.match.mask.ethertype = 0xffff;
  udp.match.mask.ip_protocol = 0xff;
  udp.match.mask.udp_dport = 0xffff;
  udp.match.value.ethertype = 0x0800;
  udp.match.value.ip_protocol = 17;
  udp.match.value.udp_dport = 4791;
  udp.count = true;
  eth_rule vlan;
  vlan.match.mask.cvlan_tag = true;
  vlan.match.mask.first_vid = 0xfff;
  vlan.match.value.cvlan_tag = true;
  vlan.match.value.first_vid = 100;
  vlan.drop = true;
  return {udp, vlan};
}

class mlx5_eth_fake : public mlx5_devx_fake {
 protected:
  // The n-th command of `opcode` sent (0 = first).
  std::vector<uint8_t> nth_command(uint16_t opcode, size_t n) const {
    for (const auto& c : r.commands) {
      if (pc::get_bits(c, 0, 16) == opcode && n-- == 0) return c;
    }
    ADD_FAILURE() << "fewer " << pc::opcode_name(opcode) << " commands than asked for";
    return std::vector<uint8_t>(2048, 0);
  }
};

constexpr uint32_t ctx_bit = 0x100;  // create_{tis,sq,rq,tir,rqt}_in: the context's bit offset

}  // namespace

TEST_F(mlx5_eth_fake, creates_each_object_in_dependency_order_and_destroys_in_reverse) {
  auto* pd = make_pd();
  eth_queues_init in;
  in.sq_wqebbs = 64;
  in.rq_wqes = 128;
  in.rules = two_rules();
  eth_queues* q = nullptr;
  std::string why;
  ASSERT_EQ(create_eth_queues(pd, in, &q, &why), status::ok) << why;
  const std::vector<std::string> made = {
      "ALLOC_TRANSPORT_DOMAIN", "CREATE_TIS",
      "CREATE_CQ",              "CREATE_SQ",         "MODIFY_SQ",           // send CQ, SQ to RDY
      "CREATE_CQ",              "CREATE_RQ",         "MODIFY_RQ",           // receive CQ, RQ to RDY
      "CREATE_TIR",             "CREATE_FLOW_TABLE",
      "CREATE_FLOW_GROUP",      "ALLOC_FLOW_COUNTER", "SET_FLOW_TABLE_ENTRY",  // rule 0, counted
      "CREATE_FLOW_GROUP",      "SET_FLOW_TABLE_ENTRY"};                       // rule 1, drop
  EXPECT_EQ(object_calls(r), made);
  EXPECT_EQ(r.objs, 13);
  EXPECT_EQ(r.umems, 2 + 2 + 2 + 2);  // two CQs, SQ and RQ: ring + doorbell record each
  r.calls.clear();
  destroy_eth_queues(q);
  const std::vector<std::string> gone = {
      "destroy flow entry", "destroy flow group",                        // rule 1
      "destroy flow entry", "destroy flow counter", "destroy flow group",  // rule 0
      "destroy flow table", "destroy TIR",
      "destroy RQ",         "destroy CQ",
      "destroy SQ",         "destroy CQ",
      "destroy TIS",        "destroy TD"};
  EXPECT_EQ(object_calls(r), gone);
  EXPECT_EQ(r.objs, 0);
  EXPECT_EQ(r.umems, 0);
  EXPECT_EQ(std::count(r.calls.begin(), r.calls.end(), "free_uar"), 1);  // the SQ's; the CQs' stays with the device
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_eth_fake, objects_name_each_other_by_the_numbers_the_nic_returned) {
  auto* pd = make_pd();
  eth_queues_init in;
  in.sq_wqebbs = 100;  // rounded up to 128
  in.rq_wqes = 256;
  in.rq_sges = 2;      // 32-byte receive WQEs
  in.min_inline = pc::inline_mode::ip;
  in.rules = two_rules();
  eth_queues* q = nullptr;
  std::string why;
  ASSERT_EQ(create_eth_queues(pd, in, &q, &why), status::ok) << why;
  const uint32_t send_cqn = 0x40, recv_cqn = 0x41;  // the fake's CQ numbers, in order

  const auto tis = nth_command(pc::op::create_tis, 0);
  EXPECT_EQ(pc::get_bits(tis, ctx_bit + 0x128, 24), q->tdn);  // tisc.transport_domain
  EXPECT_EQ(pc::get_bits(tis, ctx_bit + 0x168, 24), 0x42u);   // tisc.pd

  const auto sq = nth_command(pc::op::create_sq, 0);
  EXPECT_EQ(pc::get_bits(sq, ctx_bit + 0x05, 3), 2u);          // min_wqe_inline_mode IP
  EXPECT_EQ(pc::get_bits(sq, ctx_bit + 0x48, 24), send_cqn);   // cqn
  EXPECT_EQ(pc::get_bits(sq, ctx_bit + 0x168, 24), q->tisn);   // tis_num_0
  EXPECT_EQ(pc::get_bits(sq, ctx_bit + 0x180 + 0x68, 24), 0x77u);  // wq.uar_page: the SQ's UAR
  EXPECT_EQ(pc::get_bits(sq, ctx_bit + 0x180 + 0x11b, 5), 7u);     // log_wq_sz: 128 WQEBBs
  EXPECT_EQ(pc::get_bits(sq, ctx_bit + 0x180 + 0x160, 32), q->sq_ring_umem->umem_id);
  EXPECT_EQ(pc::get_bits(sq, ctx_bit + 0x180 + 0x140, 32), q->sq_dbr_umem->umem_id);
  EXPECT_EQ(q->sq_ring.size(), 128u * 64);

  const auto msq = nth_command(pc::op::modify_sq, 0);
  EXPECT_EQ(pc::get_bits(msq, 0x48, 24), q->sqn);
  EXPECT_EQ(pc::get_bits(msq, 0x40, 4), 0u);        // from RST
  EXPECT_EQ(pc::get_bits(msq, ctx_bit + 0x08, 4), 1u);  // to RDY

  const auto rq = nth_command(pc::op::create_rq, 0);
  EXPECT_EQ(pc::get_bits(rq, ctx_bit + 0x48, 24), recv_cqn);
  EXPECT_EQ(pc::get_bits(rq, ctx_bit + 0x180 + 0x48, 24), 0x42u);  // wq.pd
  EXPECT_EQ(pc::get_bits(rq, ctx_bit + 0x180 + 0x10c, 4), 5u);     // log_wq_stride: 32 bytes
  EXPECT_EQ(pc::get_bits(rq, ctx_bit + 0x180 + 0x11b, 5), 8u);     // 256 WQEs
  EXPECT_EQ(pc::get_bits(rq, ctx_bit + 0x180 + 0x160, 32), q->rqs[0]->ring_umem->umem_id);
  EXPECT_EQ(q->rqs[0]->ring.size(), 256u * 32);
  EXPECT_EQ(pc::get_bits(nth_command(pc::op::modify_rq, 0), 0x48, 24), q->rqs[0]->rqn);

  const auto tir = nth_command(pc::op::create_tir, 0);
  EXPECT_EQ(pc::get_bits(tir, ctx_bit + 0x20, 4), 0u);                 // direct
  EXPECT_EQ(pc::get_bits(tir, ctx_bit + 0xe8, 24), q->rqs[0]->rqn);    // inline_rqn
  EXPECT_EQ(pc::get_bits(tir, ctx_bit + 0x128, 24), q->tdn);

  const auto ft = nth_command(pc::op::create_flow_table, 0);
  EXPECT_EQ(pc::get_bits(ft, 0x80, 8), 0u);        // NIC RX
  EXPECT_EQ(pc::get_bits(ft, 0xc0 + 0x08, 8), 1u); // level
  EXPECT_EQ(pc::get_bits(ft, 0xc0 + 0x18, 8), 1u); // log_size: 2 rules

  const auto g0 = nth_command(pc::op::create_flow_group, 0);
  EXPECT_EQ(pc::get_bits(g0, 0xa8, 24), q->table_id);
  EXPECT_EQ(pc::get_bits(g0, 0x1f8, 8), 1u);                 // outer headers
  EXPECT_EQ(pc::get_bits(g0, 0x200 + 0xf0, 16), 0xffffu);    // udp_dport mask
  const auto g1 = nth_command(pc::op::create_flow_group, 1);
  EXPECT_EQ(pc::get_bits(g1, 0xe0, 32), 1u);                 // start_flow_index
  EXPECT_EQ(pc::get_bits(g1, 0x200 + 0x74, 12), 0xfffu);     // first_vid mask

  const auto e0 = nth_command(pc::op::set_flow_table_entry, 0);
  EXPECT_EQ(pc::get_bits(e0, 0xa8, 24), q->table_id);
  EXPECT_EQ(pc::get_bits(e0, 0x100, 32), 0u);                          // flow_index
  EXPECT_EQ(pc::get_bits(e0, 0x200 + 0x20, 32), q->flows[0].group_id);  // group_id
  EXPECT_EQ(pc::get_bits(e0, 0x200 + 0x70, 16), 0x4u | 0x8u);          // FWD_DEST | COUNT
  EXPECT_EQ(pc::get_bits(e0, 0x400 + 0xf0, 16), 4791u);                // udp_dport value
  EXPECT_EQ(pc::get_bits(e0, 0x1a00, 8), 2u);                          // destination TIR
  EXPECT_EQ(pc::get_bits(e0, 0x1a08, 24), q->tirn);
  EXPECT_EQ(pc::get_bits(e0, 0x1a40, 32), q->flows[0].counter_id);     // the counter
  EXPECT_NE(q->flows[0].counter_id, 0u);
  const auto e1 = nth_command(pc::op::set_flow_table_entry, 1);
  EXPECT_EQ(pc::get_bits(e1, 0x100, 32), 1u);
  EXPECT_EQ(pc::get_bits(e1, 0x200 + 0x70, 16), 0x2u);                 // DROP
  EXPECT_EQ(pc::get_bits(e1, 0x200 + 0x20, 32), q->flows[1].group_id);
  EXPECT_EQ(pc::get_bits(e1, 0x400 + 0x74, 12), 100u);                 // VLAN 100
  EXPECT_EQ(e1.size(), pc::size::set_fte_in_base);                     // no destination
  destroy_eth_queues(q);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_eth_fake, several_receive_queues_sit_behind_an_rq_table_and_an_rss_tir) {
  auto* pd = make_pd();
  eth_queues_init in;
  in.rx_queues = 4;
  for (size_t i = 0; i < in.rss_key.size(); ++i) in.rss_key[i] = static_cast<uint8_t>(i * 7 + 1);
  in.rss_udp = true;
  in.rss_fields = pc::hash_field::src_ip | pc::hash_field::dst_ip | pc::hash_field::l4_sport | pc::hash_field::l4_dport;
  eth_queues* q = nullptr;
  std::string why;
  ASSERT_EQ(create_eth_queues(pd, in, &q, &why), status::ok) << why;
  ASSERT_EQ(q->rqs.size(), 4u);
  const auto rqt = nth_command(pc::op::create_rqt, 0);
  EXPECT_EQ(pc::get_bits(rqt, ctx_bit + 0xd0, 16), 4u);  // rqt_actual_size
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(pc::get_bits(rqt, ctx_bit + 0x780 + 32 * i + 8, 24), q->rqs[i]->rqn) << "rq_num[" << i << "]";
    // Each RQ completes to its own CQ: the send CQ is 0x40, the receive CQs follow.
    EXPECT_EQ(pc::get_bits(nth_command(pc::op::create_rq, i), ctx_bit + 0x48, 24), 0x41u + i);
  }
  const auto tir = nth_command(pc::op::create_tir, 0);
  EXPECT_EQ(pc::get_bits(tir, ctx_bit + 0x20, 4), 1u);             // indirect
  EXPECT_EQ(pc::get_bits(tir, ctx_bit + 0x108, 24), q->rqtn);      // indirect_table
  EXPECT_EQ(pc::get_bits(tir, ctx_bit + 0x120, 4), 2u);            // Toeplitz
  for (uint32_t i = 0; i < 40; ++i) EXPECT_EQ(pc::get_bits(tir, ctx_bit + 0x140 + 8 * i, 8), (i * 7 + 1) & 0xff) << "key " << i;
  EXPECT_EQ(pc::get_bits(tir, ctx_bit + 0x281, 1), 1u);            // l4 UDP
  EXPECT_EQ(pc::get_bits(tir, ctx_bit + 0x282, 30), 0xfu);         // the four fields
  EXPECT_EQ(r.objs, 2 + 2 + 2 * 4 + 1 + 1 + 1);                // TD TIS, CQ SQ, 4 x (CQ RQ), RQT TIR table
  destroy_eth_queues(q);
  EXPECT_EQ(r.objs, 0);
  EXPECT_EQ(r.umems, 0);
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_eth_fake, a_failed_command_names_the_object_and_the_firmware_status_and_leaves_nothing) {
  auto* pd = make_pd();
  eth_queues_init in;
  in.rx_queues = 2;
  in.rules = two_rules();
  const std::vector<std::pair<uint16_t, std::string>> cases = {
      {pc::op::alloc_transport_domain, "transport domain: ALLOC_TRANSPORT_DOMAIN failed"},
      {pc::op::create_tis, "transmit interface send (TIS): CREATE_TIS failed"},
      {pc::op::create_cq, "send CQ: CREATE_CQ failed"},
      {pc::op::create_sq, "send queue (SQ): CREATE_SQ failed"},
      {pc::op::modify_sq, "send queue (SQ) to RDY: MODIFY_SQ failed"},
      {pc::op::create_rq, "receive queue 0: receive queue (RQ): CREATE_RQ failed"},
      {pc::op::modify_rq, "receive queue 0: receive queue (RQ) to RDY: MODIFY_RQ failed"},
      {pc::op::create_rqt, "RQ table (RQT): CREATE_RQT failed"},
      {pc::op::create_tir, "RSS TIR: CREATE_TIR failed"},
      {pc::op::create_flow_table, "NIC RX flow table: CREATE_FLOW_TABLE failed"},
      {pc::op::create_flow_group, "rule 0: flow group: CREATE_FLOW_GROUP failed"},
      {pc::op::alloc_flow_counter, "rule 0: flow counter: ALLOC_FLOW_COUNTER failed"},
      {pc::op::set_flow_table_entry, "rule 0: flow table entry: SET_FLOW_TABLE_ENTRY failed"},
  };
  for (const auto& [opcode, what] : cases) {
    r.fail.clear();
    r.fail[opcode] = {0x03, 0x00c0ffee};
    eth_queues* q = nullptr;
    std::string why;
    EXPECT_EQ(create_eth_queues(pd, in, &q, &why), status::io_error) << pc::opcode_name(opcode);
    EXPECT_EQ(q, nullptr);
    const std::string want = "raw-packet Ethernet queues on mlx5_fake: " + what +
                             ": status BAD_PARAM (0x3), syndrome 0x00c0ffee";
    EXPECT_EQ(why.rfind(want, 0), 0u) << why;
    EXPECT_EQ(r.objs, 0) << pc::opcode_name(opcode);
    EXPECT_EQ(r.umems, 0) << pc::opcode_name(opcode);
  }
  r.fail.clear();
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);
}

TEST_F(mlx5_eth_fake, a_device_without_devx_or_a_zero_size_is_refused_before_any_command) {
  auto* pd = make_pd();
  eth_queues* q = nullptr;
  std::string why;
  eth_queues_init zero;
  zero.rx_queues = 0;
  EXPECT_EQ(create_eth_queues(pd, zero, &q, &why), status::invalid);
  EXPECT_NE(why.find("rx_queues"), std::string::npos) << why;
  EXPECT_EQ(ops.dealloc_pd(pd), status::ok);

  ibv_context ctx2{};
  provider_object* plain = make_device_for_test("mlx5_nodevx", &ibv, &dv, &ctx2, false);
  provider_object* pd2 = nullptr;
  uint32_t pdn = 0;
  ASSERT_EQ(ops.alloc_pd(plain, &pd2, &pdn, &why), status::ok) << why;
  r.calls.clear();
  EXPECT_EQ(create_eth_queues(pd2, eth_queues_init{}, &q, &why), status::not_supported);
  EXPECT_NE(why.find("mlx5_nodevx"), std::string::npos) << why;
  EXPECT_NE(why.find("DEVX"), std::string::npos) << why;
  EXPECT_TRUE(object_calls(r).empty());
  EXPECT_EQ(ops.dealloc_pd(pd2), status::ok);
  ops.close_device(plain);
}

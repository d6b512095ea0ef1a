// Raw-packet Ethernet and flow-steering PRM mailboxes, checked byte by byte against layouts
// worked out by hand from the PRM bit offsets (mlx5_ifc.h *_bits structs), the way
// mlx5_prm_cmd_test.cpp does: each expected byte names the field and its bit offset; byte =
// offset / 8, and a field ending inside a byte sits in that byte's low bits. A whole-buffer
// compare, so a field written anywhere else (or a stray bit) fails the test. Nothing here
// has been checked against a device's firmware (docs/mlx5.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mlx5/prm_bytes.hpp"
#include "providers/mlx5/mlx5_prm_eth.hpp"

using namespace gdaki::mlx5::prm_cmd;

namespace {

using namespace prm_bytes;

// An object command of 16 bytes: opcode, then the object number at bits 0x48..0x5f.
std::vector<uint8_t> simple(uint16_t opcode, uint32_t num) {
  auto w = zeros(16);
  put_be16(w, 0, opcode);
  put_be24(w, 9, num);
  return w;
}

std::vector<uint8_t> out_with_num(uint32_t num) {
  auto o = zeros(16);
  put_be24(o, 9, num);
  return o;
}

}  // namespace

TEST(mlx5_prm_eth, transport_domain_alloc_and_dealloc) {
  auto want = zeros(16);
  put_be16(want, 0, 0x816);  // ALLOC_TRANSPORT_DOMAIN; the rest reserved
  expect_same(build_alloc_transport_domain(), want);
  expect_same(build_dealloc_transport_domain(0xabcdef), simple(0x817, 0xabcdef));
  EXPECT_EQ(parse_transport_domain(out_with_num(0x123456)), 0x123456u);  // out.transport_domain 0x48
}

TEST(mlx5_prm_eth, create_tis_places_every_field_at_its_prm_offset) {
  tis_params p;
  p.transport_domain = 0x0a0b0c;
  p.pdn = 0x112233;
  p.prio = 5;
  auto want = zeros(192);        // create_tis_in: 0x100 + tisc 0x500 bits
  put_be16(want, 0, 0x912);      // CREATE_TIS
  // tisc at bit 0x100 = byte 32:
  want[33] = 5;                  //   prio, tisc 0x0c..0x0f
  put_be24(want, 69, 0x0a0b0c);  //   transport_domain, tisc 0x128..0x13f
  put_be24(want, 77, 0x112233);  //   pd, tisc 0x168..0x17f
  expect_same(build_create_tis(p), want);
  expect_same(build_destroy_tis(0x42), simple(0x914, 0x42));
  EXPECT_EQ(parse_tisn(out_with_num(0x77)), 0x77u);
}

TEST(mlx5_prm_eth, create_sq_places_every_field_at_its_prm_offset) {
  sq_params p;
  p.cqn = 0x000401;
  p.tisn = 0x000902;
  p.pdn = 0xa1b2c3;
  p.uar_page = 0x000777;
  p.user_index = 0x00abcd;
  p.min_inline = inline_mode::l2;
  p.log_wq_size = 10;
  p.log_page_size = 0;
  p.ts_format = 1;
  p.wq_umem_id = 0x0000aa01;
  p.wq_umem_offset = 0x1000;
  p.dbr_umem_id = 0x0000aa02;
  p.dbr_offset = 0x40;
  auto want = zeros(272);        // create_sq_in: 0x100 + sqc 0x780 bits
  put_be16(want, 0, 0x904);      // CREATE_SQ
  // sqc at byte 32:
  want[32] = 0x11;               //   flush_in_error_en (sqc bit 0x03), min_wqe_inline_mode L2 (0x05..0x07)
                                 //   state RST = 0 at 0x08..0x0b
  want[35] = 0x10;               //   ts_format 1, sqc 0x1a..0x1b
  put_be24(want, 37, 0x00abcd);  //   user_index, sqc 0x28..0x3f
  put_be24(want, 41, 0x000401);  //   cqn, sqc 0x48..0x5f
  put_be16(want, 64, 1);         //   tis_lst_sz, sqc 0x100..0x10f
  put_be24(want, 77, 0x000902);  //   tis_num_0, sqc 0x168..0x17f
  // wq at sqc 0x180 = byte 80:
  want[80] = 0x10;               //     wq_type cyclic (1), wq 0x00..0x03
  put_be24(want, 89, 0xa1b2c3);  //     pd, wq 0x48
  put_be24(want, 93, 0x000777);  //     uar_page, wq 0x68
  put_be64(want, 96, 0x40);      //     dbr_addr, wq 0x80
  want[113] = 6;                 //     log_wq_stride 6 (64-byte WQEBBs), wq 0x10c..0x10f
  want[114] = 0;                 //     log_wq_pg_sz, wq 0x113..0x117
  want[115] = 10;                //     log_wq_sz, wq 0x11b..0x11f
  want[116] = 0xc0;              //     dbr_umem_valid (0x120), wq_umem_valid (0x121)
  put_be32(want, 120, 0xaa02);   //     dbr_umem_id, wq 0x140
  put_be32(want, 124, 0xaa01);   //     wq_umem_id, wq 0x160
  put_be64(want, 128, 0x1000);   //     wq_umem_offset, wq 0x180
  expect_same(build_create_sq(p), want);
  EXPECT_EQ(parse_sqn(out_with_num(0x1234)), 0x1234u);
}

TEST(mlx5_prm_eth, sq_inline_modes_are_the_three_bit_prm_values) {
  sq_params p;
  p.min_inline = inline_mode::none;
  EXPECT_EQ(build_create_sq(p)[32], 0x10);
  p.min_inline = inline_mode::ip;
  EXPECT_EQ(build_create_sq(p)[32], 0x12);
  p.min_inline = inline_mode::tcp_udp;
  EXPECT_EQ(build_create_sq(p)[32], 0x13);
}

TEST(mlx5_prm_eth, modify_sq_names_the_current_state_in_the_header_and_the_next_in_the_context) {
  auto want = zeros(272);
  put_be16(want, 0, 0x905);      // MODIFY_SQ
  want[8] = 0x00;                // sq_state RST, bits 0x40..0x43
  put_be24(want, 9, 0x00beef);   // sqn, 0x48
  want[33] = 0x10;               // sq_context (byte 32).state RDY, sqc 0x08..0x0b
  expect_same(build_modify_sq(0xbeef, wq_state::rst, wq_state::rdy), want);
  const auto back = build_modify_sq(0xbeef, wq_state::rdy, wq_state::err);
  EXPECT_EQ(back[8], 0x10);
  EXPECT_EQ(back[33], 0x30);
  expect_same(build_destroy_sq(0xbeef), simple(0x906, 0xbeef));
}

TEST(mlx5_prm_eth, create_rq_places_every_field_at_its_prm_offset) {
  rq_params p;
  p.cqn = 0x000405;
  p.pdn = 0x000012;
  p.user_index = 0x000033;
  p.log_wq_size = 9;
  p.log_wq_stride = 4;
  p.log_page_size = 1;
  p.wq_umem_id = 0xbb01;
  p.wq_umem_offset = 0;
  p.dbr_umem_id = 0xbb02;
  p.dbr_offset = 0x80;
  auto want = zeros(272);        // create_rq_in: 0x100 + rqc 0x780 bits
  put_be16(want, 0, 0x908);      // CREATE_RQ
  // rqc at byte 32:
  want[32] = 0x10;               //   vsd (rqc bit 0x03); mem_rq_type 0 (0x04..0x07)
  want[33] = 0x04;               //   state RST (0x08..0x0b), flush_in_error_en (0x0d)
  put_be24(want, 37, 0x000033);  //   user_index, rqc 0x28
  put_be24(want, 41, 0x000405);  //   cqn, rqc 0x48
  // wq at rqc 0x180 = byte 80:
  want[80] = 0x10;               //     wq_type cyclic
  put_be24(want, 89, 0x000012);  //     pd
  put_be64(want, 96, 0x80);      //     dbr_addr
  want[113] = 4;                 //     log_wq_stride
  want[114] = 1;                 //     log_wq_pg_sz
  want[115] = 9;                 //     log_wq_sz
  want[116] = 0xc0;              //     dbr_umem_valid, wq_umem_valid
  put_be32(want, 120, 0xbb02);   //     dbr_umem_id
  put_be32(want, 124, 0xbb01);   //     wq_umem_id
  expect_same(build_create_rq(p), want);
  p.vlan_strip_disable = false;
  EXPECT_EQ(build_create_rq(p)[32], 0x00);
  EXPECT_EQ(parse_rqn(out_with_num(0x99)), 0x99u);
}

TEST(mlx5_prm_eth, modify_rq_and_destroy_rq) {
  auto want = zeros(272);
  put_be16(want, 0, 0x909);      // MODIFY_RQ
  put_be24(want, 9, 0x000123);   // rq_state RST (0x40) and rqn (0x48)
  want[33] = 0x10;               // ctx.state RDY
  expect_same(build_modify_rq(0x123, wq_state::rst, wq_state::rdy), want);
  expect_same(build_destroy_rq(0x123), simple(0x90a, 0x123));
}

TEST(mlx5_prm_eth, create_rqt_lists_the_queues_after_the_context) {
  const uint32_t rqns[] = {0x000101, 0x000102, 0x000103, 0x000104};
  auto want = zeros(272 + 16);   // create_rqt_in: 0x100 + rqtc 0x780, then rq_num[4]
  put_be16(want, 0, 0x916);      // CREATE_RQT
  put_be16(want, 54, 4);         // rqt_max_size, rqtc 0xb0 (byte 32 + 22)
  put_be16(want, 58, 4);         // rqt_actual_size, rqtc 0xd0
  for (size_t i = 0; i < 4; ++i) put_be24(want, 272 + 4 * i + 1, rqns[i]);  // rq_num[i] low 24 bits
  expect_same(build_create_rqt(rqns), want);
  expect_same(build_destroy_rqt(0x55), simple(0x918, 0x55));
  EXPECT_EQ(parse_rqtn(out_with_num(0x56)), 0x56u);
}

TEST(mlx5_prm_eth, direct_tir_sends_everything_to_its_inline_rq) {
  tir_params p;
  p.transport_domain = 0x000777;
  p.inline_rqn = 0x000abc;
  auto want = zeros(272);        // create_tir_in: 0x100 + tirc 0x780
  put_be16(want, 0, 0x900);      // CREATE_TIR
  // tirc at byte 32: disp_type DIRECT = 0 (0x20), no hash
  put_be24(want, 61, 0x000abc);  // inline_rqn, tirc 0xe8
  put_be24(want, 69, 0x000777);  // transport_domain, tirc 0x128
  expect_same(build_create_tir(p), want);
  expect_same(build_destroy_tir(0x31), simple(0x902, 0x31));
  EXPECT_EQ(parse_tirn(out_with_num(0x32)), 0x32u);
}

TEST(mlx5_prm_eth, rss_tir_hashes_with_toeplitz_over_the_selected_fields) {
  tir_params p;
  p.transport_domain = 0x000777;
  p.rss = true;
  p.rqtn = 0x000def;
  for (size_t i = 0; i < toeplitz_key_bytes; ++i) p.toeplitz_key[i] = static_cast<uint8_t>(0xa0 + i);
  p.ipv6 = false;
  p.udp = true;
  p.fields = hash_field::src_ip | hash_field::dst_ip | hash_field::l4_sport | hash_field::l4_dport;
  p.symmetric = true;
  auto want = zeros(272);
  put_be16(want, 0, 0x900);
  want[36] = 0x10;               // disp_type INDIRECT (1), tirc 0x20..0x23
  want[64] = 0x80;               // rx_hash_symmetric, tirc 0x100
  put_be24(want, 65, 0x000def);  // indirect_table, tirc 0x108
  want[68] = 0x20;               // rx_hash_fn TOEPLITZ (2), tirc 0x120..0x123
  put_be24(want, 69, 0x000777);  // transport_domain, tirc 0x128
  for (size_t i = 0; i < 40; ++i) want[72 + i] = static_cast<uint8_t>(0xa0 + i);  // key, tirc 0x140, in order
  put_be32(want, 112, (0u << 31) | (1u << 30) | 0xf);  // rx_hash_field_selector_outer, tirc 0x280:
                                                       // l3 IPv4, l4 UDP, src/dst IP + ports
  expect_same(build_create_tir(p), want);
  p.ipv6 = true;
  p.udp = false;
  p.fields = hash_field::src_ip | hash_field::dst_ip;
  EXPECT_EQ(build_create_tir(p)[112], 0x80);  // l3_prot_type IPv6, l4 TCP
  EXPECT_EQ(build_create_tir(p)[115], 0x03);
}

TEST(mlx5_prm_eth, flow_table_create_and_destroy) {
  flow_table_params p;
  p.level = 2;
  p.log_size = 6;
  auto want = zeros(64);         // create_flow_table_in: 0x200 bits
  put_be16(want, 0, 0x930);      // CREATE_FLOW_TABLE
  want[16] = 0;                  // table_type NIC_RX, 0x80
  want[25] = 2;                  // flow_table_context (0xc0).level, +0x08
  want[27] = 6;                  // log_size, +0x18
  expect_same(build_create_flow_table(p), want);
  auto d = zeros(64);
  put_be16(d, 0, 0x931);         // DESTROY_FLOW_TABLE
  put_be24(d, 21, 0x000044);     // table_id, 0xa8
  expect_same(build_destroy_flow_table(table_type_nic_rx, 0x44), d);
  EXPECT_EQ(parse_flow_table_id(out_with_num(0x45)), 0x45u);
}

namespace {
// A 5-tuple-with-VLAN mask / value pair, every outer field used at least once.
outer_match full_mask() {
  outer_match m;
  m.ethertype = 0xffff;
  m.cvlan_tag = true;
  m.first_vid = 0xfff;
  m.ip_version = 0xf;
  m.ip_protocol = 0xff;
  m.src_ip = ipv4_field(0xffffffff);
  m.dst_ip = ipv4_field(0xffffff00);  // a /24
  m.udp_sport = 0xffff;
  m.udp_dport = 0xffff;
  m.tcp_sport = 0xffff;
  m.tcp_dport = 0xffff;
  return m;
}
// Expected outer_headers bytes at `at` for a match written from `m`'s values as listed.
void put_outer(std::vector<uint8_t>& w, size_t at, uint16_t ethertype, bool cvlan, uint16_t vid, uint8_t ipver,
               uint8_t proto, uint32_t src4, uint32_t dst4, uint16_t tsp, uint16_t tdp, uint16_t usp, uint16_t udp) {
  put_be16(w, at + 6, ethertype);                    // ethertype 0x30..0x3f
  w[at + 14] = static_cast<uint8_t>((vid >> 8) & 0xf);  // first_vid 0x74..0x7f (prio/cfi 0)
  w[at + 15] = static_cast<uint8_t>(vid);
  w[at + 16] = proto;                                // ip_protocol 0x80
  w[at + 18] = static_cast<uint8_t>((cvlan ? 0x80 : 0) | (ipver << 1));  // cvlan_tag 0x90, ip_version 0x93..0x96
  put_be16(w, at + 20, tsp);                         // tcp_sport 0xa0
  put_be16(w, at + 22, tdp);                         // tcp_dport 0xb0
  put_be16(w, at + 28, usp);                         // udp_sport 0xe0
  put_be16(w, at + 30, udp);                         // udp_dport 0xf0
  put_be32(w, at + 44, src4);                        // src ipv4: last 0x20 of 0x100..0x17f
  put_be32(w, at + 60, dst4);                        // dst ipv4: last 0x20 of 0x180..0x1ff
}
}  // namespace

TEST(mlx5_prm_eth, flow_group_carries_the_mask_as_outer_header_criteria) {
  flow_group_params p;
  p.table_id = 0x000044;
  p.start_index = 3;
  p.end_index = 7;
  p.criteria = full_mask();
  auto want = zeros(1024);       // create_flow_group_in: 0x2000 bits
  put_be16(want, 0, 0x933);      // CREATE_FLOW_GROUP
  put_be24(want, 21, 0x000044);  // table_id 0xa8
  put_be32(want, 28, 3);         // start_flow_index 0xe0
  put_be32(want, 36, 7);         // end_flow_index 0x120
  want[63] = 0x01;               // match_criteria_enable: outer headers, 0x1f8
  // match_criteria at 0x200 = byte 64, outer_headers first:
  put_outer(want, 64, 0xffff, true, 0xfff, 0xf, 0xff, 0xffffffff, 0xffffff00, 0xffff, 0xffff, 0xffff, 0xffff);
  expect_same(build_create_flow_group(p), want);
  // No criteria: a catch-all group, match_criteria_enable 0.
  flow_group_params any;
  EXPECT_EQ(build_create_flow_group(any)[63], 0x00);
  auto d = zeros(64);
  put_be16(d, 0, 0x934);         // DESTROY_FLOW_GROUP
  put_be24(d, 21, 0x000044);
  put_be32(d, 24, 0x9);          // group_id 0xc0
  expect_same(build_destroy_flow_group(table_type_nic_rx, 0x44, 9), d);
  EXPECT_EQ(parse_flow_group_id(out_with_num(0x9)), 0x9u);
}

TEST(mlx5_prm_eth, flow_entry_to_a_tir_with_a_counter_writes_value_under_mask) {
  fte_params p;
  p.table_id = 0x000044;
  p.flow_index = 5;
  p.group_id = 9;
  p.match.mask = full_mask();
  p.match.value.ethertype = 0x0800;
  p.match.value.cvlan_tag = true;
  p.match.value.first_vid = 0x123;
  p.match.value.ip_version = 4;
  p.match.value.ip_protocol = 17;
  p.match.value.src_ip = ipv4_field(0x0a000001);
  p.match.value.dst_ip = ipv4_field(0x0a0000ff);  // masked to 10.0.0.0/24
  p.match.value.udp_sport = 0x1234;
  p.match.value.udp_dport = 4791;
  p.tirn = 0x000abc;
  p.counted = true;
  p.counter_id = 0x01020304;
  auto want = zeros(832 + 16);   // set_fte_in: destinations at 0x1a00, one TIR + one counter
  put_be16(want, 0, 0x936);      // SET_FLOW_TABLE_ENTRY, op_mod 0
  put_be24(want, 21, 0x000044);  // table_id 0xa8
  put_be32(want, 32, 5);         // flow_index 0x100
  // flow_context at 0x200 = byte 64:
  put_be32(want, 68, 9);         //   group_id, fc 0x20
  put_be16(want, 78, 0x4 | 0x8); //   action FWD_DEST | COUNT, fc 0x70
  put_be24(want, 81, 1);         //   destination_list_size, fc 0x88
  put_be24(want, 85, 1);         //   flow_counter_list_size, fc 0xa8
  //   match_value at fc 0x200 = byte 128:
  put_outer(want, 128, 0x0800, true, 0x123, 4, 17, 0x0a000001, 0x0a000000, 0, 0, 0x1234, 4791);
  //   destination[0] at fc 0x1800 = byte 832: type TIR (2), id
  want[832] = 0x02;
  put_be24(want, 833, 0x000abc);
  put_be32(want, 840, 0x01020304);  // destination[1]: flow_counter_id
  expect_same(build_set_fte(p), want);
}

TEST(mlx5_prm_eth, flow_entry_that_drops_has_no_destination) {
  fte_params p;
  p.table_id = 0x44;
  p.group_id = 2;
  p.drop = true;
  const auto in = build_set_fte(p);
  ASSERT_EQ(in.size(), 832u);
  EXPECT_EQ(in[78], 0x00);
  EXPECT_EQ(in[79], 0x02);       // action DROP
  EXPECT_EQ(get_bits(in, 0x200 + 0x88, 24), 0u);
  EXPECT_EQ(get_bits(in, 0x200 + 0xa8, 24), 0u);
  auto d = zeros(64);
  put_be16(d, 0, 0x938);         // DELETE_FLOW_TABLE_ENTRY
  put_be24(d, 21, 0x44);
  put_be32(d, 32, 5);            // flow_index 0x100
  expect_same(build_delete_fte(table_type_nic_rx, 0x44, 5), d);
}

TEST(mlx5_prm_eth, flow_counter_alloc_and_dealloc) {
  auto want = zeros(16);
  put_be16(want, 0, 0x939);
  expect_same(build_alloc_flow_counter(), want);
  auto out = zeros(16);
  put_be32(out, 8, 0x00c0ffee);  // alloc_flow_counter_out.flow_counter_id, 0x40..0x5f
  EXPECT_EQ(parse_flow_counter_id(out), 0x00c0ffeeu);
  auto d = zeros(16);
  put_be16(d, 0, 0x93a);
  put_be32(d, 8, 0x00c0ffee);    // dealloc_flow_counter_in.flow_counter_id, 0x40
  expect_same(build_dealloc_flow_counter(0x00c0ffee), d);
}

TEST(mlx5_prm_eth, failures_name_the_ethernet_commands) {
  cmd_result r;
  r.status = 0x03;
  r.syndrome = 0x1;
  EXPECT_EQ(describe_failure(op::create_tir, r).rfind("CREATE_TIR failed: status BAD_PARAM", 0), 0u);
  EXPECT_EQ(opcode_name(op::set_flow_table_entry), "SET_FLOW_TABLE_ENTRY");
  EXPECT_EQ(opcode_name(op::alloc_transport_domain), "ALLOC_TRANSPORT_DOMAIN");
  EXPECT_EQ(opcode_name(op::modify_sq), "MODIFY_SQ");
}

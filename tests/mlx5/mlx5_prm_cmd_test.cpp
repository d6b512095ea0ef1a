// PRM command mailboxes, checked byte by byte against layouts worked out by hand from the
// PRM bit offsets (mlx5_ifc.h *_bits structs). Each expected byte names the field and
// its bit offset: byte = offset / 8, and a field ending inside a byte sits in that byte's
// low bits. Nothing here has been checked against a device's firmware (docs/mlx5.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mlx5/prm_bytes.hpp"
#include "providers/mlx5/mlx5_prm_cmd.hpp"

using namespace gdaki::mlx5::prm_cmd;

namespace {

using namespace prm_bytes;

}  // namespace

TEST(mlx5_prm_bits, fields_are_big_endian_from_the_msb_of_byte_0) {
  std::vector<uint8_t> b(8, 0);
  // A 5-bit field at bit 0x3 of byte 0 ends at bit 7: the value lands in the low 5 bits.
  ASSERT_TRUE(set_bits(b, 0x3, 5, 0x15));
  EXPECT_EQ(b[0], 0x15);
  // A 24-bit field at 0x28 (bytes 5..7), most significant byte first.
  ASSERT_TRUE(set_bits(b, 0x28, 24, 0xabcdef));
  EXPECT_EQ(b[5], 0xab);
  EXPECT_EQ(b[6], 0xcd);
  EXPECT_EQ(b[7], 0xef);
  EXPECT_EQ(get_bits(b, 0x28, 24), 0xabcdefu);
  EXPECT_EQ(get_bits(b, 0x3, 5), 0x15u);
  // Writing a field clears the bits the value leaves at zero, and only those.
  ASSERT_TRUE(set_bits(b, 0x0, 3, 0x7));
  ASSERT_TRUE(set_bits(b, 0x3, 5, 0));
  EXPECT_EQ(b[0], 0xe0);
}

TEST(mlx5_prm_bits, out_of_range_fields_are_refused_not_written) {
  std::vector<uint8_t> b(4, 0);
  EXPECT_FALSE(set_bits(b, 30, 8, 0xff));
  EXPECT_FALSE(set_bits(b, 0, 0, 1));
  EXPECT_EQ(b, std::vector<uint8_t>(4, 0));
  EXPECT_EQ(get_bits(b, 30, 8), 0u);
}

TEST(mlx5_prm_cmd, create_cq_places_every_field_at_its_prm_offset) {
  cq_params p;
  p.log_cq_size = 10;
  p.uar_page = 0x123456;
  p.eqn = 7;
  p.log_page_size = 0;
  p.overrun_ignore = true;
  p.cq_umem_id = 0x11223344;
  p.cq_umem_offset = 0;
  p.dbr_umem_id = 0x55667788;
  p.dbr_offset = 0x40;
  auto want = zeros(272);                 // create_cq_in: 0x880 bits up to pas[]
  want[0] = 0x04;                         // opcode 0x400, bits 0x00..0x0f
  // cq_context (cqc) at bit 0x80 = byte 16:
  want[16] = 0x02;                        //   dbr_umem_valid, cqc bit 0x06
  want[17] = 0x02;                        //   oi, cqc bit 0x0e (cqe_sz 0x08..0x0a = 0: 64 B; cc 0x0b = 0)
  put_be32(want, 20, 0x55667788);         //   dbr_umem_id, cqc 0x20..0x3f
  want[28] = 10;                          //   log_cq_size, cqc 0x63..0x67
  put_be24(want, 29, 0x123456);           //   uar_page, cqc 0x68..0x7f
  put_be32(want, 36, 7);                  //   c_eqn, cqc 0xa0..0xbf
  put_be64(want, 72, 0x40);               //   dbr_addr, cqc 0x1c0..0x1ff
  put_be64(want, 80, 0);                  // cq_umem_offset, 0x280..0x2bf
  put_be32(want, 88, 0x11223344);         // cq_umem_id, 0x2c0..0x2df
  want[92] = 0x80;                        // cq_umem_valid, 0x2e0
  expect_same(build_create_cq(p), want);
}

TEST(mlx5_prm_cmd, create_cq_sets_collapsed_and_clears_overrun_ignore_on_request) {
  cq_params p;
  p.overrun_ignore = false;
  p.collapsed = true;
  const auto in = build_create_cq(p);
  EXPECT_EQ(in[17], 0x10);  // cc = cqc bit 0x0b, oi (0x0e) clear
}

TEST(mlx5_prm_cmd, create_qp_places_every_field_at_its_prm_offset) {
  qp_params p;
  p.pdn = 0xa1b2c3;
  p.uar_page = 0x000777;
  p.user_index = 0x00abcd;
  p.log_sq_size = 10;
  p.log_rq_size = 8;
  p.log_rq_stride = 6;  // 64-byte receive WQEs: written as 6 - 4 = 2
  p.cqn_snd = 0x000401;
  p.cqn_rcv = 0x000402;
  p.wq_umem_id = 0x0000aa01;
  p.dbr_umem_id = 0x0000aa02;
  p.dbr_offset = 0;
  auto want = zeros(464);         // create_qp_in: 0xe80 bits, qpc_data_extension included
  want[0] = 0x05;                 // opcode 0x500
  // qpc at bit 0xc0 = byte 24:
  want[26] = 0x18;                //   pm_state = 3 (MIGRATED), qpc 0x13..0x14; st (0x08..0x0f) = 0: RC
  put_be24(want, 29, 0xa1b2c3);   //   pd, qpc 0x28..0x3f
  want[33] = (8 << 3) | 2;        //   log_rq_size qpc 0x49..0x4c, log_rq_stride 0x4d..0x4f
  want[34] = 10 << 3;             //   no_sq qpc 0x50 = 0, log_sq_size 0x51..0x54
  put_be24(want, 37, 0x000777);   //   uar_page, qpc 0x68..0x7f
  put_be24(want, 41, 0x00abcd);   //   user_index, qpc 0x88..0x9f
  put_be24(want, 149, 0x000401);  //   cqn_snd, qpc 0x3e8..0x3ff
  put_be24(want, 181, 0x000402);  //   cqn_rcv, qpc 0x4e8..0x4ff
  //                                   dbr_addr qpc 0x500..0x53f = 0; cs_req / cs_res 0x630..0x63f = 0
  want[232] = 0x10;               //   dbr_umem_valid, qpc 0x683
  put_be32(want, 252, 0x0000aa02);//   dbr_umem_id, qpc 0x720..0x73f
  //                                 wq_umem_offset 0x800..0x83f = 0
  put_be32(want, 264, 0x0000aa01);// wq_umem_id, 0x840..0x85f
  want[268] = 0x80;               // wq_umem_valid, 0x860
  expect_same(build_create_qp(p), want);
}

TEST(mlx5_prm_cmd, create_qp_with_responder_scatter_to_cqe_sets_cs_res_to_data32_and_nothing_else) {
  qp_params p;
  const auto off = build_create_qp(p);
  p.cs_res = 1;  // MLX5_RES_SCAT_DATA32_CQE (qp_init::scatter_to_cqe, 64-byte CQEs)
  auto want = off;
  want[24 + 0x638 / 8] = 0x01;  // cs_res, qpc 0x638..0x63f; cs_req (0x630..0x637) stays 0
  expect_same(build_create_qp(p), want);
}

TEST(mlx5_prm_cmd, rst2init_sets_port_pkey_and_remote_access) {
  rst2init_params p;
  p.qpn = 0x000123;
  p.port = 1;
  p.pkey_index = 2;
  p.remote_read = true;
  p.remote_write = true;
  p.remote_atomic = true;
  auto want = zeros(272);        // rst2init_qp_in: 0x880 bits
  want[0] = 0x05;
  want[1] = 0x02;                // opcode 0x502
  put_be24(want, 9, 0x000123);   // qpn, 0x48..0x5f
  // qpc at byte 24, primary_address_path (ads) at qpc 0xc0 = byte 48:
  want[51] = 2;                  //   pkey_index, ads 0x10..0x1f
  want[85] = 1;                  //   vhca_port_num, ads 0x128..0x12f
  want[169] = 0x03;              // atomic_mode = 3 (up to 8 B), qpc 0x48c..0x48f
  want[170] = 0xe0;              // rre 0x490, rwe 0x491, rae 0x492
  expect_same(build_rst2init(p), want);
}

TEST(mlx5_prm_cmd, rst2init_without_remote_atomic_leaves_atomic_mode_zero) {
  rst2init_params p;
  p.remote_write = true;
  const auto in = build_rst2init(p);
  EXPECT_EQ(in[169], 0x00);
  EXPECT_EQ(in[170], 0x40);
}

TEST(mlx5_prm_cmd, init2rtr_infiniband_uses_the_lid_path) {
  init2rtr_params p;
  p.qpn = 0x000124;
  p.mtu = 5;
  p.log_msg_max = 30;
  p.remote_qpn = 0x000456;
  p.next_rcv_psn = 0x00abcd;
  p.max_dest_rd_atomic = 16;
  p.min_rnr_nak = 12;
  p.path.vhca_port_num = 1;
  p.path.rlid = 0x0017;
  p.path.sl = 3;
  auto want = zeros(272);
  want[0] = 0x05;
  want[1] = 0x03;                 // opcode 0x503
  put_be24(want, 9, 0x000124);    // qpn
  want[32] = (5 << 5) | 30;       // mtu qpc 0x40..0x42, log_msg_max 0x43..0x47
  put_be24(want, 45, 0x000456);   // remote_qpn, qpc 0xa8..0xbf
  // ads at byte 48: grh (0x28) clear, rlid 0x30..0x3f, sl 0x124..0x127, vhca_port_num 0x128
  want[54] = 0x00;
  want[55] = 0x17;
  want[84] = 3;
  want[85] = 1;
  want[169] = 4 << 5;             // log_rra_max = log2(16), qpc 0x488..0x48a
  want[172] = 12;                 // min_rnr_nak, qpc 0x4a3..0x4a7
  put_be24(want, 173, 0x00abcd);  // next_rcv_psn, qpc 0x4a8..0x4bf
  expect_same(build_init2rtr(p), want);
}

TEST(mlx5_prm_cmd, init2rtr_roce_writes_gid_mac_udp_sport_and_dscp) {
  init2rtr_params p;
  p.qpn = 0x000125;
  p.mtu = 3;
  p.log_msg_max = 30;
  p.remote_qpn = 0x000789;
  p.max_dest_rd_atomic = 1;
  p.min_rnr_nak = 1;
  address_path& a = p.path;
  a.roce = true;
  a.vhca_port_num = 1;
  a.src_addr_index = 3;
  a.hop_limit = 64;
  a.tclass = 0x68;          // DSCP 26
  a.flow_label = 0xabcde;
  for (int i = 0; i < 16; ++i) a.rgid[i] = static_cast<uint8_t>(0xf0 + i);
  a.rmac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  a.udp_sport = 0xc123;
  a.eth_prio = 5;
  auto want = zeros(272);
  want[0] = 0x05;
  want[1] = 0x03;
  put_be24(want, 9, 0x000125);
  want[32] = (3 << 5) | 30;
  put_be24(want, 45, 0x000789);
  want[53] = 0x80;          // grh, ads 0x28
  want[57] = 3;             // src_addr_index, ads 0x48..0x4f
  want[59] = 64;            // hop_limit, ads 0x58..0x5f
  want[60] = 0x06;          // tclass ads 0x64..0x6b: high nibble here ...
  want[61] = 0x8a;          // ... low nibble, then flow_label ads 0x6c..0x7f bits 19..16
  want[62] = 0xbc;
  want[63] = 0xde;
  for (int i = 0; i < 16; ++i) want[64 + i] = static_cast<uint8_t>(0xf0 + i);  // rgid_rip, ads 0x80..0xff
  want[81] = 26;            // dscp, ads 0x10a..0x10f
  want[82] = 0xc1;          // udp_sport, ads 0x110..0x11f
  want[83] = 0x23;
  want[84] = 5 << 4;        // eth_prio ads 0x121..0x123 (sl 0x124..0x127 unused on RoCE)
  want[85] = 1;             // vhca_port_num
  want[86] = 0x02;          // rmac_47_32, ads 0x130..0x13f
  want[87] = 0x11;
  put_be32(want, 88, 0x22334455);  // rmac_31_0, ads 0x140..0x15f
  want[172] = 1;            // min_rnr_nak (log_rra_max = log2(1) = 0)
  expect_same(build_init2rtr(p), want);
}

TEST(mlx5_prm_cmd, rtr2rts_sets_timeout_retries_psn_and_sra) {
  rtr2rts_params p;
  p.qpn = 0x000126;
  p.next_send_psn = 0x112233;
  p.ack_timeout = 14;
  p.retry_count = 7;
  p.rnr_retry = 6;
  p.max_rd_atomic = 8;
  auto want = zeros(272);
  want[0] = 0x05;
  want[1] = 0x04;                 // opcode 0x504
  put_be24(want, 9, 0x000126);
  want[56] = 14 << 3;             // ack_timeout, ads 0x40..0x44 (ads at byte 48)
  want[137] = (3 << 5) | 7;       // log_sra_max qpc 0x388..0x38a, retry_count 0x38d..0x38f
  want[138] = 6 << 5;             // rnr_retry, qpc 0x390..0x392
  put_be24(want, 145, 0x112233);  // next_send_psn, qpc 0x3c8..0x3df
  expect_same(build_rtr2rts(p), want);
}

TEST(mlx5_prm_cmd, simple_qp_commands_carry_opcode_and_qpn_only) {
  auto want = zeros(16);
  put_be24(want, 9, 0xfedcba);
  want[0] = 0x05;
  want[1] = 0x07;
  expect_same(build_2err(0xfedcba), want);  // 2ERR_QP 0x507
  want[1] = 0x0a;
  expect_same(build_2rst(0xfedcba), want);  // 2RST_QP 0x50a
  want[1] = 0x0b;
  expect_same(build_query_qp(0xfedcba), want);  // QUERY_QP 0x50b
  want[1] = 0x01;
  expect_same(build_destroy_qp(0xfedcba), want);  // DESTROY_QP 0x501
  want[0] = 0x04;
  expect_same(build_destroy_cq(0xfedcba), want);  // DESTROY_CQ 0x401
  want[1] = 0x02;
  expect_same(build_query_cq(0xfedcba), want);  // QUERY_CQ 0x402
}

TEST(mlx5_prm_cmd, query_cq_status_is_the_first_nibble_of_the_cq_context) {
  std::vector<uint8_t> out(size::query_cq_out, 0);
  EXPECT_EQ(parse_query_cq_status(out), cq_status_ok);
  out[16] = 0x90;  // cq_context at bit 0x80 = byte 16, status in cqc bits 0x0..0x3
  EXPECT_EQ(parse_query_cq_status(out), cq_status_overflow);
}

TEST(mlx5_prm_cmd, output_mailbox_status_syndrome_and_object_numbers) {
  std::vector<uint8_t> out(272, 0);
  out[0] = 0x03;                    // status BAD_PARAM, bits 0x00..0x07
  put_be32(out, 4, 0x12345678);     // syndrome, 0x20..0x3f
  put_be24(out, 9, 0x000abc);       // cqn / qpn, 0x48..0x5f
  out[24] = 0x60;                   // query_qp_out.qpc.state = 6 (ERR), qpc at 0xc0
  const auto r = read_result(out);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status, 0x03);
  EXPECT_EQ(r.syndrome, 0x12345678u);
  EXPECT_EQ(parse_cqn(out), 0xabcu);
  EXPECT_EQ(parse_qpn(out), 0xabcu);
  EXPECT_EQ(parse_query_qp_state(out), qpc_state::err);
  EXPECT_EQ(describe_failure(op::create_qp, r), "CREATE_QP failed: status BAD_PARAM (0x3), syndrome 0x12345678");
  EXPECT_STREQ(status_name(0x10), "BAD_QP_STATE");
  EXPECT_STREQ(status_name(0x77), "UNKNOWN");
  EXPECT_EQ(opcode_name(0x999), "0x999");
}

TEST(mlx5_prm_cmd, rd_atomic_counts_become_3_bit_logs) {
  EXPECT_EQ(log_rd_atomic(0), 0u);
  EXPECT_EQ(log_rd_atomic(1), 0u);
  EXPECT_EQ(log_rd_atomic(2), 1u);
  EXPECT_EQ(log_rd_atomic(3), 2u);
  EXPECT_EQ(log_rd_atomic(16), 4u);
  EXPECT_EQ(log_rd_atomic(255), 7u);  // clamped to the field
}

TEST(mlx5_prm_cmd, roce_udp_sport_follows_the_kernel_flow_label_rule) {
  // 0x1234 * 0x5678 = 0x6260060; ^ (>> 20 = 0x62) = 0x6260002; & 0xfffff = 0x60002.
  EXPECT_EQ(flow_label_from_qpns(0x1234, 0x5678), 0x60002u);
  // low 14 bits 0x0002 ^ (bits 19..14 = 0x18) = 0x1a, in the 0xC000 range.
  EXPECT_EQ(udp_sport_from_flow_label(0x60002), 0xc01a);
  EXPECT_EQ(udp_sport_from_flow_label(0), 0xc000);
  EXPECT_GE(udp_sport_from_flow_label(0xfffff), 0xc000);
}

TEST(mlx5_prm_cmd, query_hca_cap_asks_for_current_values_of_the_cap_type) {
  auto want = zeros(16);
  want[0] = 0x01;  // opcode 0x100
  want[7] = 0x01;  // op_mod = (0 << 1) | 1: general caps, current
  expect_same(build_query_hca_cap(cap_type::general), want);
  want[7] = 0x07;  // op_mod = (3 << 1) | 1: atomic caps, current
  expect_same(build_query_hca_cap(cap_type::atomic), want);
}

TEST(mlx5_prm_cmd, general_caps_are_read_from_their_offsets) {
  std::vector<uint8_t> out(size::query_hca_cap_out, 0);
  // capability at bit 0x80 = byte 16.
  out[16 + 0x11] = 15;    // log_max_qp_sz, cap 0x88..0x8f
  out[16 + 0x19] = 22;    // log_max_cq_sz, cap 0xc8..0xcf
  out[16 + 0x38] = 30;    // log_max_msg, cap 0x1c3..0x1c7
  out[16 + 0x43] = 0x06;  // roce 0x21d, atomic 0x21e
  out[16 + 0x44] = 0x80;  // cq_oi 0x220
  out[16 + 0x47] = 0x01;  // rc 0x23f
  const auto c = parse_general_caps(out);
  EXPECT_EQ(c.log_max_qp_sz, 15u);
  EXPECT_EQ(c.log_max_cq_sz, 22u);
  EXPECT_EQ(c.log_max_msg, 30u);
  EXPECT_TRUE(c.roce);
  EXPECT_TRUE(c.atomic);
  EXPECT_TRUE(c.cq_oi);
  EXPECT_TRUE(c.rc);
  out[16 + 0x43] = 0x02;
  EXPECT_FALSE(parse_general_caps(out).roce);
}

TEST(mlx5_prm_cmd, atomic_caps_give_endianness_mode_and_masked_ops) {
  std::vector<uint8_t> out(size::query_hca_cap_out, 0);
  out[16 + 8] = 0x40;     // atomic_req_8B_endianness_mode = 1, cap 0x40..0x41
  out[16 + 19] = 0x0d;    // atomic_operations 0x90..0x9f: CAS, masked CAS, masked FA
  out[16 + 23] = 0x0c;    // atomic_size_qp 0xb0..0xbf: 4 and 8 bytes
  const auto a = parse_atomic_caps(out);
  EXPECT_EQ(a.req_8B_endianness_mode, 1u);
  EXPECT_TRUE(a.cmp_swap);
  EXPECT_FALSE(a.fetch_add);
  EXPECT_TRUE(a.masked_cmp_swap);
  EXPECT_TRUE(a.masked_fetch_add);
  EXPECT_EQ(a.atomic_size_qp, 0x0cu);
}

// ---- shared receive queues: RMPs and the QP bound to one ----------------------------------
// create_rmp_in (mlx5_ifc.h): ctx (struct rmpc) at bit 0x100 = byte 32, after
// reserved_at_40[0xc0]; rmpc.state[0x4] at rmpc 0x08; rmpc.wq (struct wq) at rmpc 0x180,
// so the wq starts at bit 0x280 = byte 80. The wq offsets below are struct wq's.

TEST(mlx5_prm_cmd, create_rmp_places_every_field_at_its_prm_offset) {
  rmp_params p;
  p.pdn = 0xa1b2c3;
  p.log_wq_size = 9;            // 512 WQEs
  p.log_wq_stride = 6;          // 64-byte WQEs
  p.log_page_size = 0;
  p.wq_umem_id = 0x0000bb01;
  p.wq_umem_offset = 0x1000;
  p.dbr_umem_id = 0x0000bb02;
  p.dbr_offset = 0x40;
  auto want = zeros(272);       // create_rmp_in: 0x880 bits
  want[0] = 0x09;               // opcode 0x90c, bits 0x00..0x0f
  want[1] = 0x0c;
  want[33] = 0x10;              // rmpc.state = 1 (RDY), rmpc 0x08..0x0b = bit 0x108
  //                               wq (byte 80): wq_type 0x00..0x03 = 0 (linked list),
  //                               page_offset 0x2b..0x2f = 0, lwm 0x30..0x3f = 0
  put_be24(want, 89, 0xa1b2c3); //   pd, wq 0x48..0x5f
  put_be64(want, 96, 0x40);     //   dbr_addr, wq 0x80..0xbf
  want[113] = 6;                //   log_wq_stride, wq 0x10c..0x10f
  //                               log_wq_pg_sz wq 0x113..0x117 = 0 (byte 114)
  want[115] = 9;                //   log_wq_sz, wq 0x11b..0x11f
  want[116] = 0xc0;             //   dbr_umem_valid wq 0x120, wq_umem_valid wq 0x121
  put_be32(want, 120, 0xbb02);  //   dbr_umem_id, wq 0x140..0x15f
  put_be32(want, 124, 0xbb01);  //   wq_umem_id, wq 0x160..0x17f
  put_be64(want, 128, 0x1000);  //   wq_umem_offset, wq 0x180..0x1bf
  expect_same(build_create_rmp(p), want);
}

TEST(mlx5_prm_cmd, destroy_and_query_rmp_carry_opcode_and_rmpn_only) {
  auto want = zeros(16);
  want[0] = 0x09;
  want[1] = 0x0e;
  put_be24(want, 9, 0x00c0de);  // rmpn, 0x48..0x5f
  expect_same(build_destroy_rmp(0x00c0de), want);  // DESTROY_RMP 0x90e
  want[1] = 0x0f;
  expect_same(build_query_rmp(0x00c0de), want);  // QUERY_RMP 0x90f
}

TEST(mlx5_prm_cmd, rmp_output_gives_its_number_and_state) {
  std::vector<uint8_t> out(size::query_rmp_out, 0);
  put_be24(out, 9, 0x000301);   // create_rmp_out.rmpn, 0x48..0x5f
  EXPECT_EQ(parse_rmpn(out), 0x301u);
  out[33] = 0x10;               // query_rmp_out.rmp_context (bit 0x100) .state at rmpc 0x08
  EXPECT_EQ(parse_query_rmp_state(out), rmp_state::rdy);
  out[33] = 0x30;
  EXPECT_EQ(parse_query_rmp_state(out), rmp_state::err);
  cmd_result r;
  r.status = 0x05;
  r.syndrome = 0x1;
  EXPECT_EQ(describe_failure(op::create_rmp, r), "CREATE_RMP failed: status BAD_RESOURCE (0x5), syndrome 0x00000001");
  EXPECT_EQ(opcode_name(op::destroy_rmp), "DESTROY_RMP");
  EXPECT_EQ(opcode_name(op::query_rmp), "QUERY_RMP");
}

TEST(mlx5_prm_cmd, create_qp_on_an_srq_sets_rq_type_srq_and_the_rmpn_and_no_rq_size) {
  qp_params p;
  p.pdn = 0xa1b2c3;
  p.log_sq_size = 10;
  p.log_rq_size = 8;            // ignored on an SRQ: the QP has no RQ
  p.log_rq_stride = 6;
  p.on_srq = true;
  p.srqn = 0x00c0de;
  auto want = zeros(464);
  want[0] = 0x05;               // opcode 0x500
  want[26] = 0x18;              // qpc (byte 24): pm_state MIGRATED, qpc 0x13..0x14
  put_be24(want, 29, 0xa1b2c3); //   pd, qpc 0x28..0x3f
  //                               byte 33: log_rq_size qpc 0x49..0x4c and log_rq_stride
  //                               0x4d..0x4f stay 0
  want[34] = 10 << 3;           //   log_sq_size, qpc 0x51..0x54
  want[196] = 0x01;             //   rq_type = 1 (SRQ), qpc 0x565..0x567 = bit 0x625
  put_be24(want, 197, 0x00c0de);//   srqn_rmpn_xrqn, qpc 0x568..0x57f = bit 0x628
  want[232] = 0x10;             //   dbr_umem_valid, qpc 0x683
  want[268] = 0x80;             // wq_umem_valid, 0x860
  expect_same(build_create_qp(p), want);
}

// Raw-packet Ethernet and flow-steering PRM mailboxes. Bit offsets are the PRM's (MSB of
// byte 0 is bit 0), named after the mlx5_ifc.h *_bits struct and field (Linux, rdma-core
// and UCX spell them alike) so that each number can be checked against those headers.
#include "mlx5_prm_eth.hpp"

namespace gdaki::mlx5::prm_cmd {

namespace {

// Every *_in: opcode[0x10] at 0x00, op_mod[0x10] at 0x30 (command_header). Object commands carry the object
// number [0x18] at 0x48 (destroy_*_in.sqn / rqn / tisn / tirn / rqtn, dealloc td), and the
// create_*_out / alloc_*_out return it there too.
constexpr uint32_t obj_num = 0x48;

// create_{tis,sq,rq,tir,rqt}_in: reserved_at_40[0xc0], then the context at 0x100.
constexpr uint32_t ctx = 0x100;

// tisc.
constexpr uint32_t tisc_prio = 0x0c;               // [0x4]
constexpr uint32_t tisc_transport_domain = 0x128;  // [0x18]
constexpr uint32_t tisc_pd = 0x168;                // [0x18]

// sqc.
constexpr uint32_t sqc_flush_in_error_en = 0x03;   // [0x1]
constexpr uint32_t sqc_min_wqe_inline_mode = 0x05; // [0x3]
constexpr uint32_t sqc_state = 0x08;               // [0x4]
constexpr uint32_t sqc_ts_format = 0x1a;           // [0x2]
constexpr uint32_t sqc_user_index = 0x28;          // [0x18]
constexpr uint32_t sqc_cqn = 0x48;                 // [0x18]
constexpr uint32_t sqc_tis_lst_sz = 0x100;         // [0x10]
constexpr uint32_t sqc_tis_num_0 = 0x168;          // [0x18]
constexpr uint32_t sqc_wq = 0x180;

// rqc.
constexpr uint32_t rqc_vsd = 0x03;                 // [0x1] VLAN strip disable
constexpr uint32_t rqc_mem_rq_type = 0x04;         // [0x4]: 0 = memory RQ inline
constexpr uint32_t rqc_state = 0x08;               // [0x4]
constexpr uint32_t rqc_flush_in_error_en = 0x0d;   // [0x1]
constexpr uint32_t rqc_ts_format = 0x1a;           // [0x2]
constexpr uint32_t rqc_user_index = 0x28;          // [0x18]
constexpr uint32_t rqc_cqn = 0x48;                 // [0x18]
constexpr uint32_t rqc_wq = 0x180;

constexpr uint32_t log_wqebb_bytes = 6;            // send WQ stride: one 64-byte WQEBB

// modify_{sq,rq}_in: sq_state / rq_state[0x4] at 0x40, sqn / rqn at 0x48,
// modify_bitmask[0x40] at 0x80, the context at 0x100.
constexpr uint32_t modify_cur_state = 0x40;

// rqtc: rqt_max_size[0x10] at 0xb0, rqt_actual_size[0x10] at 0xd0, rq_num[] at 0x780,
// each entry reserved[0x8] + rq_num[0x18].
constexpr uint32_t rqtc_max_size = 0xb0;
constexpr uint32_t rqtc_actual_size = 0xd0;
constexpr uint32_t rqtc_rq_num = 0x780;

// tirc.
constexpr uint32_t tirc_disp_type = 0x20;          // [0x4]: 0 direct, 1 indirect
constexpr uint32_t tirc_inline_rqn = 0xe8;         // [0x18]
constexpr uint32_t tirc_rx_hash_symmetric = 0x100; // [0x1]
constexpr uint32_t tirc_indirect_table = 0x108;    // [0x18]
constexpr uint32_t tirc_rx_hash_fn = 0x120;        // [0x4]: 2 = Toeplitz
constexpr uint32_t tirc_transport_domain = 0x128;  // [0x18]
constexpr uint32_t tirc_toeplitz_key = 0x140;      // [10][0x20]: 40 bytes, in key order
constexpr uint32_t tirc_hash_outer = 0x280;        // rx_hash_field_select: l3[1], l4[1], fields[0x1e]
constexpr uint32_t rx_hash_fn_toeplitz = 2;

// Flow steering commands: table_type[0x8] at 0x80, table_id[0x18] at 0xa8.
constexpr uint32_t ft_table_type = 0x80, ft_table_id = 0xa8;
// create_flow_table_in: flow_table_context at 0xc0: level[0x8] at +0x08, log_size[0x8] +0x18.
constexpr uint32_t ftc = 0xc0, ftc_level = 0x08, ftc_log_size = 0x18;
// create_flow_group_in.
constexpr uint32_t fg_start_flow_index = 0xe0;     // [0x20]
constexpr uint32_t fg_end_flow_index = 0x120;      // [0x20]
constexpr uint32_t fg_match_criteria_enable = 0x1f8;  // [0x8]: bit 0 = outer headers
constexpr uint32_t fg_match_criteria = 0x200;      // fte_match_param, outer_headers first
// destroy_flow_group_in.group_id[0x20] at 0xc0.
constexpr uint32_t dfg_group_id = 0xc0;
// set_fte_in / delete_fte_in: flow_index[0x20] at 0x100; set_fte_in.flow_context at 0x200.
constexpr uint32_t fte_flow_index = 0x100;
constexpr uint32_t fte_flow_context = 0x200;
// flow_context.
constexpr uint32_t fc_group_id = 0x20;             // [0x20]
constexpr uint32_t fc_action = 0x70;               // [0x10]
constexpr uint32_t fc_dest_list_size = 0x88;       // [0x18]
constexpr uint32_t fc_counter_list_size = 0xa8;    // [0x18]
constexpr uint32_t fc_match_value = 0x200;         // fte_match_param
constexpr uint32_t fc_destination = 0x1800;        // after execute_aso[4] and reserved_at_1300
// dest_format: destination_type[0x8] at 0, destination_id[0x18] at 0x8; flow_counter_list:
// flow_counter_id[0x20] at 0.
constexpr uint32_t dest_entry_bits = 0x40;

// fte_match_set_lyr_2_4 (outer_headers, at fte_match_param bit 0).
constexpr uint32_t m_ethertype = 0x30;             // [0x10]
constexpr uint32_t m_first_vid = 0x74;             // [0xc]
constexpr uint32_t m_ip_protocol = 0x80;           // [0x8]
constexpr uint32_t m_cvlan_tag = 0x90;             // [0x1]
constexpr uint32_t m_ip_version = 0x93;            // [0x4]
constexpr uint32_t m_tcp_sport = 0xa0, m_tcp_dport = 0xb0;  // [0x10]
constexpr uint32_t m_udp_sport = 0xe0, m_udp_dport = 0xf0;  // [0x10]
constexpr uint32_t m_src_ip = 0x100, m_dst_ip = 0x180;      // [0x80]; IPv4 in the last 0x20

// alloc_flow_counter_out / dealloc_flow_counter_in: flow_counter_id[0x20] at 0x40.
constexpr uint32_t flow_counter_id = 0x40;

std::vector<uint8_t> simple(uint16_t opcode, uint32_t num) {
  auto in = command_header(size::eth_obj_simple_in, opcode);
  set_bits(in, obj_num, 24, num);
  return in;
}

uint32_t out_num(std::span<const uint8_t> out) { return static_cast<uint32_t>(get_bits(out, obj_num, 24)); }


void set_bytes(std::span<uint8_t> in, uint32_t bit_off, std::span<const uint8_t> bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) set_bits(in, bit_off + static_cast<uint32_t>(8 * i), 8, bytes[i]);
}

void set_outer(std::span<uint8_t> in, uint32_t base, const outer_match& m) {
  set_bits(in, base + m_ethertype, 16, m.ethertype);
  set_bits(in, base + m_first_vid, 12, m.first_vid);
  set_bits(in, base + m_ip_protocol, 8, m.ip_protocol);
  set_bits(in, base + m_cvlan_tag, 1, m.cvlan_tag ? 1 : 0);
  set_bits(in, base + m_ip_version, 4, m.ip_version);
  set_bits(in, base + m_tcp_sport, 16, m.tcp_sport);
  set_bits(in, base + m_tcp_dport, 16, m.tcp_dport);
  set_bits(in, base + m_udp_sport, 16, m.udp_sport);
  set_bits(in, base + m_udp_dport, 16, m.udp_dport);
  set_bytes(in, base + m_src_ip, m.src_ip);
  set_bytes(in, base + m_dst_ip, m.dst_ip);
}

outer_match masked(const outer_match& v, const outer_match& m) {
  outer_match r;
  r.ethertype = static_cast<uint16_t>(v.ethertype & m.ethertype);
  r.cvlan_tag = v.cvlan_tag && m.cvlan_tag;
  r.first_vid = static_cast<uint16_t>(v.first_vid & m.first_vid & 0xfff);
  r.ip_version = static_cast<uint8_t>(v.ip_version & m.ip_version & 0xf);
  r.ip_protocol = static_cast<uint8_t>(v.ip_protocol & m.ip_protocol);
  for (size_t i = 0; i < 16; ++i) {
    r.src_ip[i] = static_cast<uint8_t>(v.src_ip[i] & m.src_ip[i]);
    r.dst_ip[i] = static_cast<uint8_t>(v.dst_ip[i] & m.dst_ip[i]);
  }
  r.tcp_sport = static_cast<uint16_t>(v.tcp_sport & m.tcp_sport);
  r.tcp_dport = static_cast<uint16_t>(v.tcp_dport & m.tcp_dport);
  r.udp_sport = static_cast<uint16_t>(v.udp_sport & m.udp_sport);
  r.udp_dport = static_cast<uint16_t>(v.udp_dport & m.udp_dport);
  return r;
}

}  // namespace

// ---- transport domain and TIS ------------------------------------------------------------

std::vector<uint8_t> build_alloc_transport_domain() {
  return command_header(size::alloc_td_in, op::alloc_transport_domain);
}
uint32_t parse_transport_domain(std::span<const uint8_t> out) { return out_num(out); }
std::vector<uint8_t> build_dealloc_transport_domain(uint32_t td) {
  return simple(op::dealloc_transport_domain, td);  // dealloc_transport_domain_in.transport_domain
}

std::vector<uint8_t> build_create_tis(const tis_params& p) {
  auto in = command_header(size::create_tis_in, op::create_tis);
  set_bits(in, ctx + tisc_prio, 4, p.prio);
  set_bits(in, ctx + tisc_transport_domain, 24, p.transport_domain);
  set_bits(in, ctx + tisc_pd, 24, p.pdn);
  return in;
}
uint32_t parse_tisn(std::span<const uint8_t> out) { return out_num(out); }
std::vector<uint8_t> build_destroy_tis(uint32_t tisn) { return simple(op::destroy_tis, tisn); }

// ---- SQ / RQ -----------------------------------------------------------------------------

std::vector<uint8_t> build_create_sq(const sq_params& p) {
  auto in = command_header(size::create_sq_in, op::create_sq);
  set_bits(in, ctx + sqc_flush_in_error_en, 1, 1);
  set_bits(in, ctx + sqc_min_wqe_inline_mode, 3, static_cast<uint32_t>(p.min_inline));
  set_bits(in, ctx + sqc_state, 4, static_cast<uint32_t>(wq_state::rst));
  set_bits(in, ctx + sqc_ts_format, 2, p.ts_format);
  set_bits(in, ctx + sqc_user_index, 24, p.user_index);
  set_bits(in, ctx + sqc_cqn, 24, p.cqn);
  set_bits(in, ctx + sqc_tis_lst_sz, 16, 1);
  set_bits(in, ctx + sqc_tis_num_0, 24, p.tisn);
  set_wq(in, ctx + sqc_wq,
         {wq_type_cyclic, p.pdn, p.uar_page, log_wqebb_bytes, p.log_page_size, p.log_wq_size, p.wq_umem_id,
          p.wq_umem_offset, p.dbr_umem_id, p.dbr_offset});
  return in;
}
uint32_t parse_sqn(std::span<const uint8_t> out) { return out_num(out); }

std::vector<uint8_t> build_modify_sq(uint32_t sqn, wq_state from, wq_state to) {
  auto in = command_header(size::modify_sq_in, op::modify_sq);
  set_bits(in, modify_cur_state, 4, static_cast<uint32_t>(from));
  set_bits(in, obj_num, 24, sqn);
  set_bits(in, ctx + sqc_state, 4, static_cast<uint32_t>(to));
  return in;
}
std::vector<uint8_t> build_destroy_sq(uint32_t sqn) { return simple(op::destroy_sq, sqn); }

std::vector<uint8_t> build_create_rq(const rq_params& p) {
  auto in = command_header(size::create_rq_in, op::create_rq);
  set_bits(in, ctx + rqc_vsd, 1, p.vlan_strip_disable ? 1 : 0);
  set_bits(in, ctx + rqc_mem_rq_type, 4, 0);
  set_bits(in, ctx + rqc_state, 4, static_cast<uint32_t>(wq_state::rst));
  set_bits(in, ctx + rqc_flush_in_error_en, 1, 1);
  set_bits(in, ctx + rqc_ts_format, 2, p.ts_format);
  set_bits(in, ctx + rqc_user_index, 24, p.user_index);
  set_bits(in, ctx + rqc_cqn, 24, p.cqn);
  // A receive WQ needs no UAR: posting only writes its doorbell record.
  set_wq(in, ctx + rqc_wq,
         {wq_type_cyclic, p.pdn, 0, p.log_wq_stride, p.log_page_size, p.log_wq_size, p.wq_umem_id,
          p.wq_umem_offset, p.dbr_umem_id, p.dbr_offset});
  return in;
}
uint32_t parse_rqn(std::span<const uint8_t> out) { return out_num(out); }

std::vector<uint8_t> build_modify_rq(uint32_t rqn, wq_state from, wq_state to) {
  auto in = command_header(size::modify_rq_in, op::modify_rq);
  set_bits(in, modify_cur_state, 4, static_cast<uint32_t>(from));
  set_bits(in, obj_num, 24, rqn);
  set_bits(in, ctx + rqc_state, 4, static_cast<uint32_t>(to));
  return in;
}
std::vector<uint8_t> build_destroy_rq(uint32_t rqn) { return simple(op::destroy_rq, rqn); }

// ---- RQT / TIR ---------------------------------------------------------------------------

std::vector<uint8_t> build_create_rqt(std::span<const uint32_t> rqns) {
  auto in = command_header(size::create_rqt_in_base + 4 * rqns.size(), op::create_rqt);
  const auto n = static_cast<uint32_t>(rqns.size());
  set_bits(in, ctx + rqtc_max_size, 16, n);
  set_bits(in, ctx + rqtc_actual_size, 16, n);
  for (uint32_t i = 0; i < n; ++i) set_bits(in, ctx + rqtc_rq_num + 32 * i + 8, 24, rqns[i]);
  return in;
}
uint32_t parse_rqtn(std::span<const uint8_t> out) { return out_num(out); }
std::vector<uint8_t> build_destroy_rqt(uint32_t rqtn) { return simple(op::destroy_rqt, rqtn); }

std::vector<uint8_t> build_create_tir(const tir_params& p) {
  auto in = command_header(size::create_tir_in, op::create_tir);
  set_bits(in, ctx + tirc_transport_domain, 24, p.transport_domain);
  if (!p.rss) {
    set_bits(in, ctx + tirc_disp_type, 4, 0);
    set_bits(in, ctx + tirc_inline_rqn, 24, p.inline_rqn);
    return in;
  }
  set_bits(in, ctx + tirc_disp_type, 4, 1);
  set_bits(in, ctx + tirc_rx_hash_symmetric, 1, p.symmetric ? 1 : 0);
  set_bits(in, ctx + tirc_indirect_table, 24, p.rqtn);
  set_bits(in, ctx + tirc_rx_hash_fn, 4, rx_hash_fn_toeplitz);
  set_bytes(in, ctx + tirc_toeplitz_key, p.toeplitz_key);
  set_bits(in, ctx + tirc_hash_outer, 1, p.ipv6 ? 1 : 0);
  set_bits(in, ctx + tirc_hash_outer + 1, 1, p.udp ? 1 : 0);
  set_bits(in, ctx + tirc_hash_outer + 2, 30, p.fields);
  return in;
}
uint32_t parse_tirn(std::span<const uint8_t> out) { return out_num(out); }
std::vector<uint8_t> build_destroy_tir(uint32_t tirn) { return simple(op::destroy_tir, tirn); }

// ---- flow steering -----------------------------------------------------------------------

std::array<uint8_t, 16> ipv4_field(uint32_t addr) {
  std::array<uint8_t, 16> f{};
  f[12] = static_cast<uint8_t>(addr >> 24);
  f[13] = static_cast<uint8_t>(addr >> 16);
  f[14] = static_cast<uint8_t>(addr >> 8);
  f[15] = static_cast<uint8_t>(addr);
  return f;
}

bool match_is_empty(const outer_match& m) {
  bool ip = false;
  for (size_t i = 0; i < 16; ++i) ip = ip || m.src_ip[i] != 0 || m.dst_ip[i] != 0;
  return !ip && m.ethertype == 0 && !m.cvlan_tag && m.first_vid == 0 && m.ip_version == 0 &&
         m.ip_protocol == 0 && m.tcp_sport == 0 && m.tcp_dport == 0 && m.udp_sport == 0 && m.udp_dport == 0;
}

std::vector<uint8_t> build_create_flow_table(const flow_table_params& p) {
  auto in = command_header(size::create_flow_table_in, op::create_flow_table);
  set_bits(in, ft_table_type, 8, p.table_type);
  set_bits(in, ftc + ftc_level, 8, p.level);
  set_bits(in, ftc + ftc_log_size, 8, p.log_size);
  return in;
}
uint32_t parse_flow_table_id(std::span<const uint8_t> out) { return out_num(out); }

std::vector<uint8_t> build_destroy_flow_table(uint8_t table_type, uint32_t table_id) {
  auto in = command_header(size::destroy_flow_table_in, op::destroy_flow_table);
  set_bits(in, ft_table_type, 8, table_type);
  set_bits(in, ft_table_id, 24, table_id);
  return in;
}

std::vector<uint8_t> build_create_flow_group(const flow_group_params& p) {
  auto in = command_header(size::create_flow_group_in, op::create_flow_group);
  set_bits(in, ft_table_type, 8, p.table_type);
  set_bits(in, ft_table_id, 24, p.table_id);
  set_bits(in, fg_start_flow_index, 32, p.start_index);
  set_bits(in, fg_end_flow_index, 32, p.end_index);
  set_bits(in, fg_match_criteria_enable, 8, match_is_empty(p.criteria) ? 0 : 1);
  set_outer(in, fg_match_criteria, p.criteria);
  return in;
}
uint32_t parse_flow_group_id(std::span<const uint8_t> out) { return out_num(out); }

std::vector<uint8_t> build_destroy_flow_group(uint8_t table_type, uint32_t table_id, uint32_t group_id) {
  auto in = command_header(size::destroy_flow_group_in, op::destroy_flow_group);
  set_bits(in, ft_table_type, 8, table_type);
  set_bits(in, ft_table_id, 24, table_id);
  set_bits(in, dfg_group_id, 32, group_id);
  return in;
}

std::vector<uint8_t> build_set_fte(const fte_params& p) {
  const uint32_t dests = p.drop ? 0 : 1;
  const uint32_t counters = p.counted ? 1 : 0;
  auto in = command_header(size::set_fte_in_base + size::flow_dest_entry * (dests + counters), op::set_flow_table_entry);
  set_bits(in, ft_table_type, 8, p.table_type);
  set_bits(in, ft_table_id, 24, p.table_id);
  set_bits(in, fte_flow_index, 32, p.flow_index);
  const uint32_t fc = fte_flow_context;
  set_bits(in, fc + fc_group_id, 32, p.group_id);
  uint16_t action = p.drop ? flow_action::drop : flow_action::fwd_dest;
  if (p.counted) action = static_cast<uint16_t>(action | flow_action::count);
  set_bits(in, fc + fc_action, 16, action);
  set_bits(in, fc + fc_dest_list_size, 24, dests);
  set_bits(in, fc + fc_counter_list_size, 24, counters);
  set_outer(in, fc + fc_match_value, masked(p.match.value, p.match.mask));
  uint32_t d = fc + fc_destination;
  if (!p.drop) {
    set_bits(in, d, 8, flow_dest_type_tir);
    set_bits(in, d + 8, 24, p.tirn);
    d += dest_entry_bits;
  }
  if (p.counted) set_bits(in, d, 32, p.counter_id);
  return in;
}

std::vector<uint8_t> build_delete_fte(uint8_t table_type, uint32_t table_id, uint32_t flow_index) {
  auto in = command_header(size::delete_fte_in, op::delete_flow_table_entry);
  set_bits(in, ft_table_type, 8, table_type);
  set_bits(in, ft_table_id, 24, table_id);
  set_bits(in, fte_flow_index, 32, flow_index);
  return in;
}

std::vector<uint8_t> build_alloc_flow_counter() { return command_header(size::alloc_td_in, op::alloc_flow_counter); }
uint32_t parse_flow_counter_id(std::span<const uint8_t> out) {
  return static_cast<uint32_t>(get_bits(out, flow_counter_id, 32));
}
std::vector<uint8_t> build_dealloc_flow_counter(uint32_t counter_id) {
  auto in = command_header(size::alloc_td_in, op::dealloc_flow_counter);
  set_bits(in, flow_counter_id, 32, counter_id);
  return in;
}

}  // namespace gdaki::mlx5::prm_cmd

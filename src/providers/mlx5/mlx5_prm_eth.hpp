// internal: PRM command mailboxes for the mlx5 provider's raw-packet Ethernet queues and
// NIC receive steering: ALLOC_TRANSPORT_DOMAIN, CREATE_TIS, CREATE_SQ / MODIFY_SQ,
// CREATE_RQ / MODIFY_RQ, CREATE_RQT, CREATE_TIR (direct or RSS), CREATE_FLOW_TABLE,
// CREATE_FLOW_GROUP, SET_FLOW_TABLE_ENTRY and ALLOC_FLOW_COUNTER, with their destroys.
// Pure functions over byte buffers, written with mlx5_prm_cmd's set_bits (PRM bit
// numbering: bit 0 is the MSB of byte 0). Every offset is listed next to its field in
// mlx5_prm_eth.cpp, named after the mlx5_ifc.h *_bits struct and field it comes from, and
// checked byte by byte by tests/mlx5/mlx5_prm_eth_test.cpp.
//
// Nothing here has been sent to a ConnectX yet (docs/mlx5.md, "Raw-packet Ethernet queues").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "mlx5_prm_cmd.hpp"

namespace gdaki::mlx5::prm_cmd {

namespace size {
inline constexpr size_t alloc_td_in = 16;            // alloc/dealloc_transport_domain_in: 0x80 bits
inline constexpr size_t create_tis_in = 192;         // 0x100 header + tisc 0x500
inline constexpr size_t create_sq_in = 272;          // 0x100 header + sqc 0x780 (wq at sqc 0x180)
inline constexpr size_t modify_sq_in = 272;          // same context, state and bitmask in the header
inline constexpr size_t create_rq_in = 272;          // 0x100 header + rqc 0x780 (wq at rqc 0x180)
inline constexpr size_t modify_rq_in = 272;
inline constexpr size_t create_tir_in = 272;         // 0x100 header + tirc 0x780
inline constexpr size_t create_rqt_in_base = 272;    // 0x100 header + rqtc 0x780, then rq_num[]
inline constexpr size_t eth_obj_simple_in = 16;      // destroy_{sq,rq,tis,tir,rqt}_in, dealloc_*
inline constexpr size_t create_flow_table_in = 64;   // 0xc0 header + flow_table_context 0x140
inline constexpr size_t destroy_flow_table_in = 64;
inline constexpr size_t create_flow_group_in = 1024; // 0x2000 bits
inline constexpr size_t destroy_flow_group_in = 64;
inline constexpr size_t set_fte_in_base = 832;       // destination list at bit 0x1a00
inline constexpr size_t delete_fte_in = 64;
inline constexpr size_t flow_dest_entry = 8;         // dest_format / flow_counter_list: 0x40 bits
}  // namespace size

// ---- transport domain and transmit interface send (TIS) ----------------------------------
std::vector<uint8_t> build_alloc_transport_domain();
uint32_t parse_transport_domain(std::span<const uint8_t> out);  // out bits 0x48..0x5f
std::vector<uint8_t> build_dealloc_transport_domain(uint32_t td);

struct tis_params {
  uint32_t transport_domain = 0;
  uint32_t pdn = 0;   // tisc.pd
  uint8_t prio = 0;   // tisc.prio, 4 bits
};
std::vector<uint8_t> build_create_tis(const tis_params& p);
uint32_t parse_tisn(std::span<const uint8_t> out);
std::vector<uint8_t> build_destroy_tis(uint32_t tisn);

// ---- send and receive work queues --------------------------------------------------------
// SQ / RQ states (sqc.state, rqc.state; MLX5_SQC_STATE_* / MLX5_RQC_STATE_*).
enum class wq_state : uint8_t { rst = 0, rdy = 1, err = 3 };

// sqc.min_wqe_inline_mode: how many header bytes each send WQE's Ethernet segment must
// carry inline (the NIC reads them from the WQE, not from memory). MLX5_INLINE_MODE_*.
enum class inline_mode : uint8_t { none = 0, l2 = 1, ip = 2, tcp_udp = 3 };

struct sq_params {
  uint32_t cqn = 0;
  uint32_t tisn = 0;             // tis_num_0, tis_lst_sz = 1
  uint32_t pdn = 0;              // wq.pd
  uint32_t uar_page = 0;         // wq.uar_page: the doorbell's UAR
  uint32_t user_index = 0;       // 24 bits
  inline_mode min_inline = inline_mode::l2;
  uint32_t log_wq_size = 0;      // log2 of the WQEBB count (5 bits)
  uint32_t log_page_size = 0;    // log2(umem page bytes) - 12
  uint32_t ts_format = 0;        // sqc.ts_format [unverified per device: must match the cap]
  uint32_t wq_umem_id = 0;
  uint64_t wq_umem_offset = 0;
  uint32_t dbr_umem_id = 0;
  uint64_t dbr_offset = 0;
};
// CREATE_SQ in RST: cyclic WQ of 64-byte WQEBBs (log_wq_stride 6), flush_in_error_en set,
// one TIS, umem-backed ring and doorbell record.
std::vector<uint8_t> build_create_sq(const sq_params& p);
uint32_t parse_sqn(std::span<const uint8_t> out);
// MODIFY_SQ: modify_sq_in.sq_state = `from`, sq_context.state = `to`; bitmask 0.
std::vector<uint8_t> build_modify_sq(uint32_t sqn, wq_state from, wq_state to);
std::vector<uint8_t> build_destroy_sq(uint32_t sqn);

struct rq_params {
  uint32_t cqn = 0;
  uint32_t pdn = 0;
  uint32_t user_index = 0;
  uint32_t log_wq_size = 0;      // log2 of the WQE count (5 bits)
  uint32_t log_wq_stride = 4;    // log2 of the WQE bytes: 4 = one 16-byte data segment
  uint32_t log_page_size = 0;
  uint32_t ts_format = 0;        // [unverified per device]
  bool vlan_strip_disable = true;  // rqc.vsd: keep VLAN tags in the packet, as AF_PACKET does
  uint32_t wq_umem_id = 0;
  uint64_t wq_umem_offset = 0;
  uint32_t dbr_umem_id = 0;
  uint64_t dbr_offset = 0;
};
// CREATE_RQ in RST: memory RQ (mem_rq_type 0), cyclic WQ, flush_in_error_en set.
std::vector<uint8_t> build_create_rq(const rq_params& p);
uint32_t parse_rqn(std::span<const uint8_t> out);
std::vector<uint8_t> build_modify_rq(uint32_t rqn, wq_state from, wq_state to);
std::vector<uint8_t> build_destroy_rq(uint32_t rqn);

// ---- receive steering: RQ table and transport interface receive (TIR) --------------------
std::vector<uint8_t> build_create_rqt(std::span<const uint32_t> rqns);  // max = actual = size
uint32_t parse_rqtn(std::span<const uint8_t> out);
std::vector<uint8_t> build_destroy_rqt(uint32_t rqtn);

// rx_hash_field_select.selected_fields bits (MLX5_HASH_FIELD_SEL_*).
namespace hash_field {
inline constexpr uint32_t src_ip = 1u << 0;
inline constexpr uint32_t dst_ip = 1u << 1;
inline constexpr uint32_t l4_sport = 1u << 2;
inline constexpr uint32_t l4_dport = 1u << 3;
}  // namespace hash_field

inline constexpr size_t toeplitz_key_bytes = 40;

struct tir_params {
  uint32_t transport_domain = 0;
  // Direct: every packet the TIR gets goes to inline_rqn. RSS: hashed (Toeplitz) over the
  // selected fields to one of the RQ table's queues.
  bool rss = false;
  uint32_t inline_rqn = 0;   // direct only
  uint32_t rqtn = 0;         // rss only: indirect_table
  std::array<uint8_t, toeplitz_key_bytes> toeplitz_key{};
  bool ipv6 = false;         // rx_hash_field_selector_outer.l3_prot_type: 0 IPv4, 1 IPv6
  bool udp = false;          // l4_prot_type: 0 TCP, 1 UDP (only with L4 fields selected)
  uint32_t fields = 0;       // hash_field bits
  bool symmetric = false;    // rx_hash_symmetric
};
std::vector<uint8_t> build_create_tir(const tir_params& p);
uint32_t parse_tirn(std::span<const uint8_t> out);
std::vector<uint8_t> build_destroy_tir(uint32_t tirn);

// ---- flow steering -----------------------------------------------------------------------
inline constexpr uint8_t table_type_nic_rx = 0x0;  // MLX5_FLOW_TABLE_TYPE_NIC_RX

struct flow_table_params {
  uint8_t table_type = table_type_nic_rx;
  uint8_t level = 0;         // flow_table_context.level
  uint8_t log_size = 0;      // log2 of the entry count
};
std::vector<uint8_t> build_create_flow_table(const flow_table_params& p);
uint32_t parse_flow_table_id(std::span<const uint8_t> out);
std::vector<uint8_t> build_destroy_flow_table(uint8_t table_type, uint32_t table_id);

// The outer-header fields (fte_match_set_lyr_2_4) a rule may match. The same struct is a
// mask (in a group: which bits the group's entries match) or a value (in an entry).
struct outer_match {
  uint16_t ethertype = 0;
  bool cvlan_tag = false;           // the frame has an 802.1Q tag
  uint16_t first_vid = 0;           // 12 bits
  uint8_t ip_version = 0;           // 4 bits: 4 or 6
  uint8_t ip_protocol = 0;
  std::array<uint8_t, 16> src_ip{};  // IPv6, or IPv4 in bytes 12..15 (network order)
  std::array<uint8_t, 16> dst_ip{};
  uint16_t tcp_sport = 0, tcp_dport = 0;
  uint16_t udp_sport = 0, udp_dport = 0;
};
// An IPv4 address (network byte order, a.b.c.d = 0xaabbccdd) placed as outer_match keeps it.
std::array<uint8_t, 16> ipv4_field(uint32_t addr);
bool match_is_empty(const outer_match& m);

struct match_spec {
  outer_match value;
  outer_match mask;
};

struct flow_group_params {
  uint8_t table_type = table_type_nic_rx;
  uint32_t table_id = 0;
  uint32_t start_index = 0, end_index = 0;  // inclusive
  outer_match criteria;                    // the mask; match_criteria_enable = outer if any
};
std::vector<uint8_t> build_create_flow_group(const flow_group_params& p);
uint32_t parse_flow_group_id(std::span<const uint8_t> out);
std::vector<uint8_t> build_destroy_flow_group(uint8_t table_type, uint32_t table_id, uint32_t group_id);

// flow_context.action bits (MLX5_FLOW_CONTEXT_ACTION_*).
namespace flow_action {
inline constexpr uint16_t allow = 0x1;
inline constexpr uint16_t drop = 0x2;
inline constexpr uint16_t fwd_dest = 0x4;
inline constexpr uint16_t count = 0x8;
}  // namespace flow_action
inline constexpr uint8_t flow_dest_type_tir = 0x2;  // dest_format.destination_type

struct fte_params {
  uint8_t table_type = table_type_nic_rx;
  uint32_t table_id = 0;
  uint32_t flow_index = 0;
  uint32_t group_id = 0;
  match_spec match;           // written as value & mask
  bool drop = false;          // DROP, else forward to tirn
  uint32_t tirn = 0;
  bool counted = false;       // COUNT into counter_id
  uint32_t counter_id = 0;
};
// SET_FLOW_TABLE_ENTRY (op_mod 0: a new entry): action FWD_DEST with one TIR destination,
// or DROP; COUNT adds one flow-counter entry after the destinations.
std::vector<uint8_t> build_set_fte(const fte_params& p);
std::vector<uint8_t> build_delete_fte(uint8_t table_type, uint32_t table_id, uint32_t flow_index);

std::vector<uint8_t> build_alloc_flow_counter();
uint32_t parse_flow_counter_id(std::span<const uint8_t> out);  // out bits 0x40..0x5f
std::vector<uint8_t> build_dealloc_flow_counter(uint32_t counter_id);

}  // namespace gdaki::mlx5::prm_cmd

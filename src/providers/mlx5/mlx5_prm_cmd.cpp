// PRM command mailboxes. Bit offsets are the PRM's (MSB of byte 0 is bit 0), as the
// mlx5_ifc.h *_bits structs of Linux, rdma-core and UCX spell them; the comments name the
// struct and field so that every number can be checked against those headers.
#include "mlx5_prm_cmd.hpp"

#include <bit>
#include <cstdio>

namespace gdaki::mlx5::prm_cmd {

bool set_bits(std::span<uint8_t> buf, uint32_t bit_off, uint32_t width, uint64_t value) {
  if (width == 0 || width > 64 || uint64_t{bit_off} + width > uint64_t{buf.size()} * 8) return false;
  for (uint32_t i = 0; i < width; ++i) {
    const uint32_t pos = bit_off + i;  // bit i of the field, counted from its MSB
    const bool on = ((value >> (width - 1 - i)) & 1) != 0;
    const auto mask = static_cast<uint8_t>(0x80u >> (pos % 8));
    if (on) {
      buf[pos / 8] = static_cast<uint8_t>(buf[pos / 8] | mask);
    } else {
      buf[pos / 8] = static_cast<uint8_t>(buf[pos / 8] & ~mask);
    }
  }
  return true;
}

uint64_t get_bits(std::span<const uint8_t> buf, uint32_t bit_off, uint32_t width) {
  if (width == 0 || width > 64 || uint64_t{bit_off} + width > uint64_t{buf.size()} * 8) return 0;
  uint64_t v = 0;
  for (uint32_t i = 0; i < width; ++i) {
    const uint32_t pos = bit_off + i;
    v = (v << 1) | ((buf[pos / 8] >> (7 - pos % 8)) & 1u);
  }
  return v;
}

namespace {

// Command input header (every *_in struct): opcode[0x10] at 0x00, uid[0x10] at 0x10,
// op_mod[0x10] at 0x30. The object number of QP/CQ commands: qpn / cqn [0x18] at 0x48.
constexpr uint32_t in_opcode = 0x00, in_op_mod = 0x30, in_obj_num = 0x48;
// Output header: status[0x8] at 0x00, syndrome[0x20] at 0x20; create_*_out's cqn / qpn
// [0x18] at 0x48.
constexpr uint32_t out_status = 0x00, out_syndrome = 0x20, out_obj_num = 0x48;

// create_cq_in and query_cq_out: cq_context (struct cqc, 0x200 bits) at 0x80. create_cq_in: cq_umem_offset[0x40] at
// 0x280, cq_umem_id[0x20] at 0x2c0, cq_umem_valid[0x1] at 0x2e0.
constexpr uint32_t cq_cqc = 0x80;
constexpr uint32_t cq_umem_offset = 0x280, cq_umem_id = 0x2c0, cq_umem_valid = 0x2e0;
// cqc fields (offsets inside cqc).
constexpr uint32_t cqc_dbr_umem_valid = 0x06;  // [0x1]
constexpr uint32_t cqc_cqe_sz = 0x08;          // [0x3]: 0 = 64-byte CQEs
constexpr uint32_t cqc_cc = 0x0b;              // [0x1]: collapsed
constexpr uint32_t cqc_oi = 0x0e;              // [0x1]: overrun ignore
constexpr uint32_t cqc_dbr_umem_id = 0x20;     // [0x20]
constexpr uint32_t cqc_log_cq_size = 0x63;     // [0x5]
constexpr uint32_t cqc_uar_page = 0x68;        // [0x18]
constexpr uint32_t cqc_c_eqn = 0xa0;           // [0x20] c_eqn_or_apu_element (UCX: c_eqn[0x8] at 0xb8)
constexpr uint32_t cqc_log_page_size = 0xc3;   // [0x5]
constexpr uint32_t cqc_dbr_addr = 0x1c0;       // [0x40]: offset in the DBR umem

// QP commands: create_qp_in, rst2init/init2rtr/rtr2rts_qp_in and query_qp_out all carry
// the QP context (struct qpc, 0x740 bits) at 0xc0, after opt_param_mask[0x20] at 0x80.
constexpr uint32_t qp_qpc = 0xc0;
constexpr uint32_t qp_opt_param_mask = 0x80;
// create_qp_in after the qpc: wq_umem_offset[0x40] at 0x800 (UCX names it reserved),
// wq_umem_id[0x20] at 0x840, wq_umem_valid[0x1] at 0x860.
constexpr uint32_t qp_wq_umem_offset = 0x800, qp_wq_umem_id = 0x840, qp_wq_umem_valid = 0x860;
// qpc fields (offsets inside qpc).
constexpr uint32_t qpc_state_bits = 0x00;      // [0x4]
constexpr uint32_t qpc_st = 0x08;              // [0x8]: service type, RC = 0
constexpr uint32_t qpc_pm_state = 0x13;        // [0x2]: 3 = MIGRATED
constexpr uint32_t qpc_pd = 0x28;              // [0x18]
constexpr uint32_t qpc_mtu = 0x40;             // [0x3]
constexpr uint32_t qpc_log_msg_max = 0x43;     // [0x5]
constexpr uint32_t qpc_log_rq_size = 0x49;     // [0x4]
constexpr uint32_t qpc_log_rq_stride = 0x4d;   // [0x3]: log2(stride) - 4
constexpr uint32_t qpc_no_sq = 0x50;           // [0x1]
constexpr uint32_t qpc_log_sq_size = 0x51;     // [0x4]
constexpr uint32_t qpc_ts_format = 0x58;       // [0x2]
constexpr uint32_t qpc_uar_page = 0x68;        // [0x18]
constexpr uint32_t qpc_user_index = 0x88;      // [0x18]
constexpr uint32_t qpc_log_page_size = 0xa3;   // [0x5]
constexpr uint32_t qpc_remote_qpn = 0xa8;      // [0x18]
constexpr uint32_t qpc_primary_path = 0xc0;    // struct ads, 0x160 bits
constexpr uint32_t qpc_log_sra_max = 0x388;    // [0x3]
constexpr uint32_t qpc_retry_count = 0x38d;    // [0x3]
constexpr uint32_t qpc_rnr_retry = 0x390;      // [0x3]
constexpr uint32_t qpc_next_send_psn = 0x3c8;  // [0x18]
constexpr uint32_t qpc_cqn_snd = 0x3e8;        // [0x18]
constexpr uint32_t qpc_log_rra_max = 0x488;    // [0x3]
constexpr uint32_t qpc_atomic_mode = 0x48c;    // [0x4]
constexpr uint32_t qpc_rre = 0x490, qpc_rwe = 0x491, qpc_rae = 0x492;  // [0x1] each
constexpr uint32_t qpc_min_rnr_nak = 0x4a3;    // [0x5]
constexpr uint32_t qpc_next_rcv_psn = 0x4a8;   // [0x18]
constexpr uint32_t qpc_cqn_rcv = 0x4e8;        // [0x18]
constexpr uint32_t qpc_dbr_addr = 0x500;       // [0x40]: offset in the DBR umem
constexpr uint32_t qpc_rq_type = 0x565;        // [0x3]: 0 = regular RQ, 1 = SRQ (MLX5_SRQ_RQ)
constexpr uint32_t qpc_srqn_rmpn_xrqn = 0x568; // [0x18]
constexpr uint32_t qpc_cs_req = 0x630;         // [0x8]: 0 = no scatter to CQE (requester)
constexpr uint32_t qpc_cs_res = 0x638;         // [0x8]: 0 = no scatter to CQE (responder)
constexpr uint32_t qpc_dbr_umem_valid = 0x683; // [0x1]
constexpr uint32_t qpc_dbr_umem_id = 0x720;    // [0x20]
// ads fields (offsets inside struct ads).
constexpr uint32_t ads_pkey_index = 0x10;      // [0x10]
constexpr uint32_t ads_grh = 0x28;             // [0x1]
constexpr uint32_t ads_rlid = 0x30;            // [0x10]
constexpr uint32_t ads_ack_timeout = 0x40;     // [0x5]
constexpr uint32_t ads_src_addr_index = 0x48;  // [0x8]
constexpr uint32_t ads_hop_limit = 0x58;       // [0x8]
constexpr uint32_t ads_tclass = 0x64;          // [0x8]
constexpr uint32_t ads_flow_label = 0x6c;      // [0x14]
constexpr uint32_t ads_rgid_rip = 0x80;        // [16][0x8]
constexpr uint32_t ads_dscp = 0x10a;           // [0x6]
constexpr uint32_t ads_udp_sport = 0x110;      // [0x10]
constexpr uint32_t ads_eth_prio = 0x121;       // [0x3]
constexpr uint32_t ads_sl = 0x124;             // [0x4]
constexpr uint32_t ads_vhca_port_num = 0x128;  // [0x8]
constexpr uint32_t ads_rmac_47_32 = 0x130;     // [0x10]
constexpr uint32_t ads_rmac_31_0 = 0x140;      // [0x20]

// qpc.atomic_mode: 3 = "up to 8 bytes" (standard and masked 8-byte atomics), as UCX's
// DEVX RC QPs use. [unverified] on hardware.
constexpr uint32_t atomic_mode_up_to_8b = 3;

// qpc.rq_type values (Linux's MLX5_NON_ZERO_RQ / MLX5_SRQ_RQ, shifted down from bit 24).
constexpr uint32_t rq_type_regular = 0, rq_type_srq = 1;

// create_rmp_in: ctx (struct rmpc, 0x780 bits) at 0x100, after reserved_at_40[0xc0];
// query_rmp_out: rmp_context at 0x100 too. rmpc: state[0x4] at 0x08, basic_cyclic_rcv_wqe
// at 0x20, the wq (struct wq) at 0x180.
constexpr uint32_t rmp_rmpc = 0x100;
constexpr uint32_t rmpc_state = 0x08;          // [0x4]: 1 = RDY, 3 = ERR
constexpr uint32_t rmpc_wq = 0x180;
// wq fields (offsets inside struct wq).
constexpr uint32_t wq_type = 0x00;             // [0x4]: 0 = linked list, 1 = cyclic
constexpr uint32_t wq_page_offset = 0x2b;      // [0x5]
constexpr uint32_t wq_lwm = 0x30;              // [0x10]: limit event watermark (0: none)
constexpr uint32_t wq_pd = 0x48;               // [0x18]
constexpr uint32_t wq_dbr_addr = 0x80;         // [0x40]: offset in the DBR umem
constexpr uint32_t wq_log_wq_stride = 0x10c;   // [0x4]: log2 of the stride in bytes
constexpr uint32_t wq_log_wq_pg_sz = 0x113;    // [0x5]: log2(page bytes) - 12
constexpr uint32_t wq_log_wq_sz = 0x11b;       // [0x5]: log2 of the WQE count
constexpr uint32_t wq_dbr_umem_valid = 0x120;  // [0x1]
constexpr uint32_t wq_wq_umem_valid = 0x121;   // [0x1]
constexpr uint32_t wq_dbr_umem_id = 0x140;     // [0x20]
constexpr uint32_t wq_wq_umem_id = 0x160;      // [0x20]
constexpr uint32_t wq_wq_umem_offset = 0x180;  // [0x40]
constexpr uint32_t wq_uar_page = 0x68;         // [0x18]
constexpr uint32_t rmp_state_rdy = 1;

// query_hca_cap_out: capability (a 0x8000-bit union) at 0x80.
constexpr uint32_t cap_base = 0x80;


void set_path(std::span<uint8_t> in, uint32_t base, const address_path& a) {
  set_bits(in, base + ads_vhca_port_num, 8, a.vhca_port_num);
  set_bits(in, base + ads_pkey_index, 16, a.pkey_index);
  set_bits(in, base + ads_grh, 1, a.grh || a.roce ? 1 : 0);
  if (!a.roce) {
    set_bits(in, base + ads_rlid, 16, a.rlid);
    set_bits(in, base + ads_sl, 4, a.sl);
  }
  if (a.grh || a.roce) {
    set_bits(in, base + ads_src_addr_index, 8, a.src_addr_index);
    set_bits(in, base + ads_hop_limit, 8, a.hop_limit);
    set_bits(in, base + ads_tclass, 8, a.tclass);
    set_bits(in, base + ads_flow_label, 20, a.flow_label);
    for (uint32_t i = 0; i < 16; ++i) set_bits(in, base + ads_rgid_rip + 8 * i, 8, a.rgid[i]);
  }
  if (a.roce) {
    const uint64_t mac = (uint64_t{a.rmac[0]} << 40) | (uint64_t{a.rmac[1]} << 32) | (uint64_t{a.rmac[2]} << 24) |
                         (uint64_t{a.rmac[3]} << 16) | (uint64_t{a.rmac[4]} << 8) | a.rmac[5];
    set_bits(in, base + ads_rmac_47_32, 16, mac >> 32);
    set_bits(in, base + ads_rmac_31_0, 32, mac & 0xffffffffu);
    set_bits(in, base + ads_udp_sport, 16, a.udp_sport);
    set_bits(in, base + ads_eth_prio, 3, a.eth_prio);
    set_bits(in, base + ads_dscp, 6, a.tclass >> 2);  // DSCP is the upper 6 bits of the traffic class
  }
}

}  // namespace

// Every command's input starts with its opcode and op_mod (in_opcode, in_op_mod above).
std::vector<uint8_t> command_header(size_t bytes, uint16_t opcode, uint16_t op_mod) {
  std::vector<uint8_t> in(bytes, 0);
  set_bits(in, in_opcode, 16, opcode);
  set_bits(in, in_op_mod, 16, op_mod);
  return in;
}

cmd_result read_result(std::span<const uint8_t> out) {
  cmd_result r;
  r.status = static_cast<uint8_t>(get_bits(out, out_status, 8));
  r.syndrome = static_cast<uint32_t>(get_bits(out, out_syndrome, 32));
  return r;
}

const char* status_name(uint8_t s) {
  switch (s) {
    case 0x00: return "OK";
    case 0x01: return "INTERNAL_ERR";
    case 0x02: return "BAD_OP";
    case 0x03: return "BAD_PARAM";
    case 0x04: return "BAD_SYS_STATE";
    case 0x05: return "BAD_RESOURCE";
    case 0x06: return "RESOURCE_BUSY";
    case 0x08: return "EXCEED_LIM";
    case 0x09: return "BAD_RES_STATE";
    case 0x0a: return "BAD_INDEX";
    case 0x0f: return "NO_RESOURCES";
    case 0x10: return "BAD_QP_STATE";
    case 0x30: return "BAD_PKT";
    case 0x40: return "BAD_SIZE_OUTS_CQES";
    case 0x50: return "BAD_INPUT_LEN";
    case 0x51: return "BAD_OUTPUT_LEN";
  }
  return "UNKNOWN";
}

std::string opcode_name(uint16_t opcode) {
  switch (opcode) {
    case op::query_hca_cap: return "QUERY_HCA_CAP";
    case op::create_cq: return "CREATE_CQ";
    case op::destroy_cq: return "DESTROY_CQ";
    case op::query_cq: return "QUERY_CQ";
    case op::create_qp: return "CREATE_QP";
    case op::destroy_qp: return "DESTROY_QP";
    case op::rst2init_qp: return "RST2INIT_QP";
    case op::init2rtr_qp: return "INIT2RTR_QP";
    case op::rtr2rts_qp: return "RTR2RTS_QP";
    case op::to_err_qp: return "2ERR_QP";
    case op::to_rst_qp: return "2RST_QP";
    case op::query_qp: return "QUERY_QP";
    case op::create_rmp: return "CREATE_RMP";
    case op::destroy_rmp: return "DESTROY_RMP";
    case op::query_rmp: return "QUERY_RMP";
    case op::alloc_transport_domain: return "ALLOC_TRANSPORT_DOMAIN";
    case op::dealloc_transport_domain: return "DEALLOC_TRANSPORT_DOMAIN";
    case op::create_tir: return "CREATE_TIR";
    case op::destroy_tir: return "DESTROY_TIR";
    case op::create_sq: return "CREATE_SQ";
    case op::modify_sq: return "MODIFY_SQ";
    case op::destroy_sq: return "DESTROY_SQ";
    case op::create_rq: return "CREATE_RQ";
    case op::modify_rq: return "MODIFY_RQ";
    case op::destroy_rq: return "DESTROY_RQ";
    case op::create_tis: return "CREATE_TIS";
    case op::destroy_tis: return "DESTROY_TIS";
    case op::create_rqt: return "CREATE_RQT";
    case op::destroy_rqt: return "DESTROY_RQT";
    case op::create_flow_table: return "CREATE_FLOW_TABLE";
    case op::destroy_flow_table: return "DESTROY_FLOW_TABLE";
    case op::create_flow_group: return "CREATE_FLOW_GROUP";
    case op::destroy_flow_group: return "DESTROY_FLOW_GROUP";
    case op::set_flow_table_entry: return "SET_FLOW_TABLE_ENTRY";
    case op::delete_flow_table_entry: return "DELETE_FLOW_TABLE_ENTRY";
    case op::alloc_flow_counter: return "ALLOC_FLOW_COUNTER";
    case op::dealloc_flow_counter: return "DEALLOC_FLOW_COUNTER";
  }
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", opcode);
  return b;
}

std::string describe_failure(uint16_t opcode, const cmd_result& r) {
  char b[96];
  std::snprintf(b, sizeof b, " failed: status %s (0x%x), syndrome 0x%08x", status_name(r.status), r.status,
                r.syndrome);
  return opcode_name(opcode) + b;
}

// ---- CQ ----------------------------------------------------------------------------------

std::vector<uint8_t> build_create_cq(const cq_params& p) {
  auto in = command_header(size::create_cq_in, op::create_cq);
  const uint32_t c = cq_cqc;
  set_bits(in, c + cqc_cqe_sz, 3, 0);  // 64-byte CQEs: the data path's cqe64
  set_bits(in, c + cqc_cc, 1, p.collapsed ? 1 : 0);
  set_bits(in, c + cqc_oi, 1, p.overrun_ignore ? 1 : 0);
  set_bits(in, c + cqc_log_cq_size, 5, p.log_cq_size);
  set_bits(in, c + cqc_uar_page, 24, p.uar_page);
  set_bits(in, c + cqc_c_eqn, 32, p.eqn);
  set_bits(in, c + cqc_log_page_size, 5, p.log_page_size);
  set_bits(in, c + cqc_dbr_umem_valid, 1, 1);
  set_bits(in, c + cqc_dbr_umem_id, 32, p.dbr_umem_id);
  set_bits(in, c + cqc_dbr_addr, 64, p.dbr_offset);
  set_bits(in, cq_umem_offset, 64, p.cq_umem_offset);
  set_bits(in, cq_umem_id, 32, p.cq_umem_id);
  set_bits(in, cq_umem_valid, 1, 1);
  return in;
}

uint32_t parse_cqn(std::span<const uint8_t> out) { return static_cast<uint32_t>(get_bits(out, out_obj_num, 24)); }

std::vector<uint8_t> build_destroy_cq(uint32_t cqn) {
  auto in = command_header(size::destroy_in, op::destroy_cq);
  set_bits(in, in_obj_num, 24, cqn);
  return in;
}

std::vector<uint8_t> build_query_cq(uint32_t cqn) {
  auto in = command_header(size::destroy_in, op::query_cq);
  set_bits(in, in_obj_num, 24, cqn);
  return in;
}

uint8_t parse_query_cq_status(std::span<const uint8_t> out) {
  return static_cast<uint8_t>(get_bits(out, cq_cqc, 4));  // query_cq_out.cq_context.status
}

// ---- QP ----------------------------------------------------------------------------------

std::vector<uint8_t> build_create_qp(const qp_params& p) {
  auto in = command_header(size::create_qp_in, op::create_qp);
  const uint32_t q = qp_qpc;
  set_bits(in, q + qpc_st, 8, 0);        // RC
  set_bits(in, q + qpc_pm_state, 2, 3);  // MIGRATED: no alternate path
  set_bits(in, q + qpc_pd, 24, p.pdn);
  // A QP on an SRQ has no RQ: the sizes stay 0 and the NIC takes receives from the RMP.
  if (!p.on_srq) {
    set_bits(in, q + qpc_log_rq_size, 4, p.log_rq_size);
    set_bits(in, q + qpc_log_rq_stride, 3, p.log_rq_stride >= 4 ? p.log_rq_stride - 4 : 0);
  }
  set_bits(in, q + qpc_no_sq, 1, 0);
  set_bits(in, q + qpc_log_sq_size, 4, p.log_sq_size);
  set_bits(in, q + qpc_ts_format, 2, p.ts_format);
  set_bits(in, q + qpc_uar_page, 24, p.uar_page);
  set_bits(in, q + qpc_user_index, 24, p.user_index);
  set_bits(in, q + qpc_log_page_size, 5, p.log_page_size);
  set_bits(in, q + qpc_cqn_snd, 24, p.cqn_snd);
  set_bits(in, q + qpc_cqn_rcv, 24, p.cqn_rcv);
  set_bits(in, q + qpc_rq_type, 3, p.on_srq ? rq_type_srq : rq_type_regular);
  if (p.on_srq) set_bits(in, q + qpc_srqn_rmpn_xrqn, 24, p.srqn);
  // Scatter-to-CQE off for the requester (spec 7.11): READ and atomic results always land
  // in their buffers. The responder's only when asked (qp_init::scatter_to_cqe).
  set_bits(in, q + qpc_cs_req, 8, 0);
  set_bits(in, q + qpc_cs_res, 8, p.cs_res);
  set_bits(in, q + qpc_dbr_umem_valid, 1, 1);
  set_bits(in, q + qpc_dbr_umem_id, 32, p.dbr_umem_id);
  set_bits(in, q + qpc_dbr_addr, 64, p.dbr_offset);
  set_bits(in, qp_wq_umem_offset, 64, p.wq_umem_offset);
  set_bits(in, qp_wq_umem_id, 32, p.wq_umem_id);
  set_bits(in, qp_wq_umem_valid, 1, 1);
  return in;
}

uint32_t parse_qpn(std::span<const uint8_t> out) { return static_cast<uint32_t>(get_bits(out, out_obj_num, 24)); }

std::vector<uint8_t> build_destroy_qp(uint32_t qpn) {
  auto in = command_header(size::destroy_in, op::destroy_qp);
  set_bits(in, in_obj_num, 24, qpn);
  return in;
}

uint32_t log_rd_atomic(uint32_t n) {
  if (n <= 1) return 0;
  const auto l = static_cast<uint32_t>(std::countr_zero(std::bit_ceil(n)));
  return l > 7 ? 7 : l;
}

std::vector<uint8_t> build_rst2init(const rst2init_params& p) {
  auto in = command_header(size::modify_qp_in, op::rst2init_qp);
  set_bits(in, in_obj_num, 24, p.qpn);
  set_bits(in, qp_opt_param_mask, 32, 0);
  const uint32_t q = qp_qpc;
  set_bits(in, q + qpc_primary_path + ads_vhca_port_num, 8, p.port);
  set_bits(in, q + qpc_primary_path + ads_pkey_index, 16, p.pkey_index);
  set_bits(in, q + qpc_rre, 1, p.remote_read ? 1 : 0);
  set_bits(in, q + qpc_rwe, 1, p.remote_write ? 1 : 0);
  set_bits(in, q + qpc_rae, 1, p.remote_atomic ? 1 : 0);
  if (p.remote_atomic) set_bits(in, q + qpc_atomic_mode, 4, atomic_mode_up_to_8b);
  return in;
}

std::vector<uint8_t> build_init2rtr(const init2rtr_params& p) {
  auto in = command_header(size::modify_qp_in, op::init2rtr_qp);
  set_bits(in, in_obj_num, 24, p.qpn);
  set_bits(in, qp_opt_param_mask, 32, 0);
  const uint32_t q = qp_qpc;
  set_bits(in, q + qpc_mtu, 3, p.mtu);
  set_bits(in, q + qpc_log_msg_max, 5, p.log_msg_max);
  set_bits(in, q + qpc_remote_qpn, 24, p.remote_qpn);
  set_bits(in, q + qpc_next_rcv_psn, 24, p.next_rcv_psn);
  set_bits(in, q + qpc_log_rra_max, 3, log_rd_atomic(p.max_dest_rd_atomic));
  set_bits(in, q + qpc_min_rnr_nak, 5, p.min_rnr_nak);
  set_path(in, q + qpc_primary_path, p.path);
  return in;
}

std::vector<uint8_t> build_rtr2rts(const rtr2rts_params& p) {
  auto in = command_header(size::modify_qp_in, op::rtr2rts_qp);
  set_bits(in, in_obj_num, 24, p.qpn);
  set_bits(in, qp_opt_param_mask, 32, 0);
  const uint32_t q = qp_qpc;
  set_bits(in, q + qpc_primary_path + ads_ack_timeout, 5, p.ack_timeout);
  set_bits(in, q + qpc_retry_count, 3, p.retry_count);
  set_bits(in, q + qpc_rnr_retry, 3, p.rnr_retry);
  set_bits(in, q + qpc_next_send_psn, 24, p.next_send_psn);
  set_bits(in, q + qpc_log_sra_max, 3, log_rd_atomic(p.max_rd_atomic));
  return in;
}

std::vector<uint8_t> build_2err(uint32_t qpn) {
  auto in = command_header(size::qp_simple_in, op::to_err_qp);
  set_bits(in, in_obj_num, 24, qpn);
  return in;
}

std::vector<uint8_t> build_2rst(uint32_t qpn) {
  auto in = command_header(size::qp_simple_in, op::to_rst_qp);
  set_bits(in, in_obj_num, 24, qpn);
  return in;
}

std::vector<uint8_t> build_query_qp(uint32_t qpn) {
  auto in = command_header(size::qp_simple_in, op::query_qp);
  set_bits(in, in_obj_num, 24, qpn);
  return in;
}

qpc_state parse_query_qp_state(std::span<const uint8_t> out) {
  return static_cast<qpc_state>(get_bits(out, qp_qpc + qpc_state_bits, 4));
}

// ---- struct wq ---------------------------------------------------------------------------

void set_wq(std::span<uint8_t> in, uint32_t w, const wq_fields& f) {
  set_bits(in, w + wq_type, 4, f.type);
  set_bits(in, w + wq_page_offset, 5, 0);
  set_bits(in, w + wq_lwm, 16, 0);  // no limit event
  set_bits(in, w + wq_pd, 24, f.pdn);
  set_bits(in, w + wq_uar_page, 24, f.uar_page);
  set_bits(in, w + wq_dbr_addr, 64, f.dbr_offset);
  set_bits(in, w + wq_log_wq_stride, 4, f.log_stride);
  set_bits(in, w + wq_log_wq_pg_sz, 5, f.log_page_size);
  set_bits(in, w + wq_log_wq_sz, 5, f.log_size);
  set_bits(in, w + wq_dbr_umem_valid, 1, 1);
  set_bits(in, w + wq_wq_umem_valid, 1, 1);
  set_bits(in, w + wq_dbr_umem_id, 32, f.dbr_umem_id);
  set_bits(in, w + wq_wq_umem_id, 32, f.wq_umem_id);
  set_bits(in, w + wq_wq_umem_offset, 64, f.wq_umem_offset);
}

// ---- shared receive queue (RMP) ----------------------------------------------------------

std::vector<uint8_t> build_create_rmp(const rmp_params& p) {
  auto in = command_header(size::create_rmp_in, op::create_rmp);
  set_bits(in, rmp_rmpc + rmpc_state, 4, rmp_state_rdy);
  set_wq(in, rmp_rmpc + rmpc_wq,
         {wq_type_linked_list, p.pdn, 0, p.log_wq_stride, p.log_page_size, p.log_wq_size, p.wq_umem_id,
          p.wq_umem_offset, p.dbr_umem_id, p.dbr_offset});
  return in;
}

uint32_t parse_rmpn(std::span<const uint8_t> out) { return static_cast<uint32_t>(get_bits(out, out_obj_num, 24)); }

std::vector<uint8_t> build_destroy_rmp(uint32_t rmpn) {
  auto in = command_header(size::rmp_simple_in, op::destroy_rmp);
  set_bits(in, in_obj_num, 24, rmpn);  // destroy_rmp_in.rmpn [0x18] at 0x48
  return in;
}

std::vector<uint8_t> build_query_rmp(uint32_t rmpn) {
  auto in = command_header(size::rmp_simple_in, op::query_rmp);
  set_bits(in, in_obj_num, 24, rmpn);  // query_rmp_in.rmpn [0x18] at 0x48
  return in;
}

rmp_state parse_query_rmp_state(std::span<const uint8_t> out) {
  return static_cast<rmp_state>(get_bits(out, rmp_rmpc + rmpc_state, 4));
}

// ---- RoCE v2 UDP source port --------------------------------------------------------------

uint32_t flow_label_from_qpns(uint32_t lqpn, uint32_t rqpn) {
  uint64_t v = uint64_t{lqpn} * rqpn;
  v ^= v >> 20;
  v ^= v >> 40;
  return static_cast<uint32_t>(v & 0xfffff);
}

uint16_t udp_sport_from_flow_label(uint32_t fl) {
  const uint32_t low = (fl & 0x3fff) ^ ((fl & 0xfc000) >> 14);
  return static_cast<uint16_t>(low | 0xc000);
}

// ---- HCA capabilities ------------------------------------------------------------------------

std::vector<uint8_t> build_query_hca_cap(cap_type type) {
  return command_header(size::query_hca_cap_in, op::query_hca_cap,
                static_cast<uint16_t>((static_cast<uint16_t>(type) << 1) | 1));
}

general_caps parse_general_caps(std::span<const uint8_t> out) {
  general_caps c;
  c.log_max_qp_sz = static_cast<uint32_t>(get_bits(out, cap_base + 0x88, 8));
  c.log_max_cq_sz = static_cast<uint32_t>(get_bits(out, cap_base + 0xc8, 8));
  c.log_max_msg = static_cast<uint32_t>(get_bits(out, cap_base + 0x1c3, 5));
  c.roce = get_bits(out, cap_base + 0x21d, 1) != 0;
  c.atomic = get_bits(out, cap_base + 0x21e, 1) != 0;
  c.cq_oi = get_bits(out, cap_base + 0x220, 1) != 0;
  c.rc = get_bits(out, cap_base + 0x23f, 1) != 0;
  return c;
}

atomic_caps parse_atomic_caps(std::span<const uint8_t> out) {
  atomic_caps c;
  c.req_8B_endianness_mode = static_cast<uint32_t>(get_bits(out, cap_base + 0x40, 2));
  const auto ops = static_cast<uint32_t>(get_bits(out, cap_base + 0x90, 16));
  c.cmp_swap = (ops & 1u) != 0;
  c.fetch_add = (ops & 2u) != 0;
  c.masked_cmp_swap = (ops & 4u) != 0;
  c.masked_fetch_add = (ops & 8u) != 0;
  c.atomic_size_qp = static_cast<uint32_t>(get_bits(out, cap_base + 0xb0, 16));
  return c;
}

}  // namespace gdaki::mlx5::prm_cmd

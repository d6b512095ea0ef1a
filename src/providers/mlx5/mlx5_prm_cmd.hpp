// internal: PRM command mailboxes for the DEVX objects of the mlx5 provider (CREATE_CQ,
// CREATE_QP, the QP state transitions, QUERY_QP, CREATE_RMP for shared receive queues,
// QUERY_HCA_CAP), built and parsed as byte
// buffers by pure functions. No rdma-core header is needed: every field is written
// big-endian at its PRM bit offset, bit 0 being the most significant bit of byte 0, as
// the PRM (and the *_bits structs of mlx5_ifc.h) number them. The offsets are listed next
// to each field in mlx5_prm_cmd.cpp and checked by tests/mlx5/mlx5_prm_cmd_test.cpp
// against bytes worked out by hand.
//
// Nothing here has been sent to a real device yet (docs/mlx5.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gdaki::mlx5::prm_cmd {

// ---- bit fields --------------------------------------------------------------------------
// Writes the low `width` bits of `value` (1..64) at PRM bit offset `bit_off`, big-endian.
// The buffer must hold the field (checked: out-of-range writes are dropped and return
// false).
bool set_bits(std::span<uint8_t> buf, uint32_t bit_off, uint32_t width, uint64_t value);
// A command's input mailbox of `bytes` zero bytes with its opcode and op_mod written.
std::vector<uint8_t> command_header(size_t bytes, uint16_t opcode, uint16_t op_mod = 0);
// Reads `width` bits (1..64) at `bit_off`; 0 for a field outside the buffer.
uint64_t get_bits(std::span<const uint8_t> buf, uint32_t bit_off, uint32_t width);

// ---- opcodes (PRM "command opcodes", mlx5_ifc.h MLX5_CMD_OP_*) ------------------------
namespace op {
inline constexpr uint16_t query_hca_cap = 0x100;
inline constexpr uint16_t create_cq = 0x400;
inline constexpr uint16_t destroy_cq = 0x401;
inline constexpr uint16_t query_cq = 0x402;
inline constexpr uint16_t create_qp = 0x500;
inline constexpr uint16_t destroy_qp = 0x501;
inline constexpr uint16_t rst2init_qp = 0x502;
inline constexpr uint16_t init2rtr_qp = 0x503;
inline constexpr uint16_t rtr2rts_qp = 0x504;
inline constexpr uint16_t to_err_qp = 0x507;  // 2ERR_QP
inline constexpr uint16_t to_rst_qp = 0x50a;  // 2RST_QP
inline constexpr uint16_t query_qp = 0x50b;
// Shared receive queues are RMPs (receive memory pools): CREATE_SRQ (0x700) describes its
// ring only by a physical address list, which a process cannot give, while the RMP's WQ
// context takes umem ids (docs/mlx5.md, "Shared receive queues").
inline constexpr uint16_t create_rmp = 0x90c;
inline constexpr uint16_t destroy_rmp = 0x90e;
inline constexpr uint16_t query_rmp = 0x90f;
// Raw-packet Ethernet queues and NIC receive steering (mlx5_prm_eth.hpp builds them).
inline constexpr uint16_t alloc_transport_domain = 0x816;
inline constexpr uint16_t dealloc_transport_domain = 0x817;
inline constexpr uint16_t create_tir = 0x900;
inline constexpr uint16_t destroy_tir = 0x902;
inline constexpr uint16_t create_sq = 0x904;
inline constexpr uint16_t modify_sq = 0x905;
inline constexpr uint16_t destroy_sq = 0x906;
inline constexpr uint16_t create_rq = 0x908;
inline constexpr uint16_t modify_rq = 0x909;
inline constexpr uint16_t destroy_rq = 0x90a;
inline constexpr uint16_t create_tis = 0x912;
inline constexpr uint16_t destroy_tis = 0x914;
inline constexpr uint16_t create_rqt = 0x916;
inline constexpr uint16_t destroy_rqt = 0x918;
inline constexpr uint16_t create_flow_table = 0x930;
inline constexpr uint16_t destroy_flow_table = 0x931;
inline constexpr uint16_t create_flow_group = 0x933;
inline constexpr uint16_t destroy_flow_group = 0x934;
inline constexpr uint16_t set_flow_table_entry = 0x936;
inline constexpr uint16_t delete_flow_table_entry = 0x938;
inline constexpr uint16_t alloc_flow_counter = 0x939;
inline constexpr uint16_t dealloc_flow_counter = 0x93a;
}  // namespace op

// Mailbox sizes in bytes (the *_in / *_out structs without trailing PAS lists: the rings
// are described by umems, never by physical address lists).
namespace size {
inline constexpr size_t out_header = 16;          // status, syndrome, 8 command-specific bytes
inline constexpr size_t create_cq_in = 272;       // 0x880 bits
inline constexpr size_t create_cq_out = 16;
inline constexpr size_t destroy_in = 16;          // destroy_cq_in / destroy_qp_in / query_cq_in
inline constexpr size_t query_cq_out = 16 + 64;   // cq_context at byte 16, no PAS
inline constexpr size_t create_qp_in = 464;       // 0xe80 bits, qpc_data_extension included
inline constexpr size_t create_qp_out = 16;
inline constexpr size_t modify_qp_in = 272;       // rst2init / init2rtr / rtr2rts: 0x880 bits
inline constexpr size_t modify_qp_out = 16;
inline constexpr size_t qp_simple_in = 16;        // 2err / 2rst / query_qp
inline constexpr size_t query_qp_out = 272;       // qpc at byte 24, no PAS
inline constexpr size_t create_rmp_in = 272;       // 0x880 bits: rmpc at 0x100, its wq at 0x280
inline constexpr size_t create_rmp_out = 16;
inline constexpr size_t rmp_simple_in = 16;       // destroy_rmp_in / query_rmp_in
inline constexpr size_t query_rmp_out = 272;      // rmp_context at byte 32, no PAS
inline constexpr size_t query_hca_cap_in = 16;
inline constexpr size_t query_hca_cap_out = 16 + 4096;
}  // namespace size

// ---- output mailbox ----------------------------------------------------------------------
struct cmd_result {
  uint8_t status = 0;     // out.status, bits 0x00..0x07; 0 = OK
  uint32_t syndrome = 0;  // out.syndrome, bits 0x20..0x3f: firmware's detailed reason
  bool ok() const { return status == 0; }
};
cmd_result read_result(std::span<const uint8_t> out);
// PRM command status name ("BAD_PARAM"), or "UNKNOWN".
const char* status_name(uint8_t status);
// "CREATE_QP" for op::create_qp, or "0x...".
std::string opcode_name(uint16_t opcode);
// "CREATE_CQ failed: status BAD_PARAM (0x3), syndrome 0x12345678", for error messages.
std::string describe_failure(uint16_t opcode, const cmd_result& r);

// ---- CQ ----------------------------------------------------------------------------------
struct cq_params {
  uint32_t log_cq_size = 0;     // log2 of the CQE count (0..31; 5-bit field)
  uint32_t uar_page = 0;        // mlx5dv_devx_uar.page_id
  uint32_t eqn = 0;             // completion EQ (mlx5dv_devx_query_eqn)
  uint32_t log_page_size = 0;   // log2(umem page bytes) - 12
  bool overrun_ignore = true;   // cqc.oi
  bool collapsed = false;       // cqc.cc: every CQE written to entry 0
  uint32_t cq_umem_id = 0;      // the CQE ring's umem
  uint64_t cq_umem_offset = 0;  // ring start inside it
  uint32_t dbr_umem_id = 0;     // the doorbell record's umem
  uint64_t dbr_offset = 0;      // doorbell record offset inside it (cqc.dbr_addr)
};
// CREATE_CQ with 64-byte CQEs (cqe_sz 0), umem-backed ring and doorbell record.
std::vector<uint8_t> build_create_cq(const cq_params& p);
uint32_t parse_cqn(std::span<const uint8_t> out);  // create_cq_out.cqn, bits 0x48..0x5f
std::vector<uint8_t> build_destroy_cq(uint32_t cqn);
std::vector<uint8_t> build_query_cq(uint32_t cqn);
// query_cq_out.cq_context.status (cqc at bit 0x80, status in its first 4 bits): 0 OK,
// 9 CQ_OVERFLOW, 0xa CQ_WRITE_FAIL.
uint8_t parse_query_cq_status(std::span<const uint8_t> out);
inline constexpr uint8_t cq_status_ok = 0x0, cq_status_overflow = 0x9, cq_status_write_fail = 0xa;

// ---- QP ----------------------------------------------------------------------------------
struct qp_params {
  uint32_t pdn = 0;
  uint32_t uar_page = 0;
  uint32_t user_index = 0;      // 24 bits, reported in CQE srqn_uidx
  uint32_t log_sq_size = 0;     // log2 of SQ WQEBBs (4-bit field)
  uint32_t log_rq_size = 0;     // log2 of RQ WQEs (4-bit field)
  uint32_t log_rq_stride = 4;   // log2 of the RQ stride in bytes (>= 4); written as - 4
  uint32_t cqn_snd = 0, cqn_rcv = 0;
  uint32_t log_page_size = 0;   // log2(umem page bytes) - 12
  uint32_t ts_format = 0;       // 0 FREE_RUNNING, 1 DEFAULT, 2 REAL_TIME [unverified per device]
  uint32_t wq_umem_id = 0;      // RQ at offset 0, SQ right after it (rq size << stride)
  uint64_t wq_umem_offset = 0;
  uint32_t dbr_umem_id = 0;
  uint64_t dbr_offset = 0;
  uint32_t cs_res = 0;          // responder scatter-to-CQE: 0 off, 1 = 32 B in a 64 B CQE
  bool on_srq = false;          // receives come from the RMP `srqn`: rq_type SRQ, no RQ
  uint32_t srqn = 0;            // qpc.srqn_rmpn_xrqn (24 bits), only with on_srq
};
// CREATE_QP for an RC QP in RESET: st RC, pm_state MIGRATED, requester scatter-to-CQE off
// (cs_req = 0; cs_res from qp_params), umem-backed WQ and doorbell record; a regular RQ,
// or with on_srq rq_type SRQ, srqn_rmpn_xrqn = srqn and log_rq_size / log_rq_stride 0 (the
// work queue then holds the SQ only).
std::vector<uint8_t> build_create_qp(const qp_params& p);
uint32_t parse_qpn(std::span<const uint8_t> out);  // create_qp_out.qpn, bits 0x48..0x5f
std::vector<uint8_t> build_destroy_qp(uint32_t qpn);

// PRM QP states (qpc.state).
enum class qpc_state : uint8_t { rst = 0, init = 1, rtr = 2, rts = 3, sqer = 4, err = 6, sqd = 7 };

// The address path (struct ads, 44 bytes) of an RC QP.
struct address_path {
  uint8_t vhca_port_num = 1;
  uint16_t pkey_index = 0;
  bool grh = false;              // IB: set for GRH routing; RoCE: always set
  uint16_t rlid = 0;             // IB only
  uint8_t sl = 0;                // IB service level
  uint8_t src_addr_index = 0;    // source GID index
  uint8_t hop_limit = 0;
  uint8_t tclass = 0;
  uint32_t flow_label = 0;       // 20 bits
  std::array<uint8_t, 16> rgid{};
  bool roce = false;             // Ethernet: rmac, udp_sport, eth_prio and dscp are written
  std::array<uint8_t, 6> rmac{};
  uint16_t udp_sport = 0;
  uint8_t eth_prio = 0;          // 3 bits (RoCE priority: the verbs SL)
};

struct rst2init_params {
  uint32_t qpn = 0;
  uint8_t port = 1;
  uint16_t pkey_index = 0;
  bool remote_read = false, remote_write = false, remote_atomic = false;
};
std::vector<uint8_t> build_rst2init(const rst2init_params& p);

struct init2rtr_params {
  uint32_t qpn = 0;
  uint32_t mtu = 5;              // ibv_mtu numbering: 1 = 256 ... 5 = 4096 (PRM uses the same)
  uint32_t log_msg_max = 30;     // log2 of the largest message (HCA cap log_max_msg)
  uint32_t remote_qpn = 0;
  uint32_t next_rcv_psn = 0;
  uint32_t max_dest_rd_atomic = 16;  // written as log_rra_max = ceil(log2)
  uint8_t min_rnr_nak = 1;
  address_path path;
};
std::vector<uint8_t> build_init2rtr(const init2rtr_params& p);

struct rtr2rts_params {
  uint32_t qpn = 0;
  uint32_t next_send_psn = 0;
  uint8_t ack_timeout = 14;
  uint8_t retry_count = 7;
  uint8_t rnr_retry = 7;
  uint32_t max_rd_atomic = 16;  // written as log_sra_max = ceil(log2)
};
std::vector<uint8_t> build_rtr2rts(const rtr2rts_params& p);

std::vector<uint8_t> build_2err(uint32_t qpn);
std::vector<uint8_t> build_2rst(uint32_t qpn);
std::vector<uint8_t> build_query_qp(uint32_t qpn);
// query_qp_out.qpc.state (qpc at bit 0xc0, state in its first 4 bits).
qpc_state parse_query_qp_state(std::span<const uint8_t> out);

// log2 rounded up, clamped to 3 bits (log_rra_max / log_sra_max): 0 -> 0, 16 -> 4.
uint32_t log_rd_atomic(uint32_t n);

// ---- shared receive queue (RMP) ----------------------------------------------------------
// ---- struct wq (inside rmpc, sqc and rqc) ----------------------------------------------
// The work-queue fields every WQ-backed object shares, with a umem-backed ring and
// doorbell record. One writer for all of them (RMP here, raw-packet SQ / RQ in
// mlx5_prm_eth.cpp), at the bit offset of the context's wq.
inline constexpr uint32_t wq_type_linked_list = 0, wq_type_cyclic = 1;
struct wq_fields {
  uint32_t type = wq_type_cyclic;
  uint32_t pdn = 0;
  uint32_t uar_page = 0;        // a send WQ's doorbell page; 0 for receive WQs
  uint32_t log_stride = 0;      // log2 of the stride in bytes
  uint32_t log_page_size = 0;   // log2(umem page bytes) - 12
  uint32_t log_size = 0;        // log2 of the WQE count
  uint32_t wq_umem_id = 0;
  uint64_t wq_umem_offset = 0;
  uint32_t dbr_umem_id = 0;
  uint64_t dbr_offset = 0;      // wq.dbr_addr: the record's offset inside its umem
};
void set_wq(std::span<uint8_t> in, uint32_t wq_bit_off, const wq_fields& f);

struct rmp_params {
  uint32_t pdn = 0;
  uint32_t log_wq_size = 0;     // log2 of the WQE count (5-bit field)
  uint32_t log_wq_stride = 5;   // log2 of the WQE stride in bytes (4-bit field; 16 B next
                                // segment + data segments, so >= 5)
  uint32_t log_page_size = 0;   // log2(umem page bytes) - 12
  uint32_t wq_umem_id = 0;      // the WQE ring's umem
  uint64_t wq_umem_offset = 0;  // ring start inside it
  uint32_t dbr_umem_id = 0;     // the doorbell record's umem
  uint64_t dbr_offset = 0;      // doorbell record offset inside it (wq.dbr_addr)
};
// CREATE_RMP in state RDY with a linked-list WQ (wq_type 0: the NIC follows each WQE's
// next_wqe_index, prm::srq_next_seg), umem-backed ring and doorbell record; no CQ (each
// QP on it names its receive CQ) and no UAR (posting only updates the doorbell record).
std::vector<uint8_t> build_create_rmp(const rmp_params& p);
uint32_t parse_rmpn(std::span<const uint8_t> out);  // create_rmp_out.rmpn, bits 0x48..0x5f
std::vector<uint8_t> build_destroy_rmp(uint32_t rmpn);
std::vector<uint8_t> build_query_rmp(uint32_t rmpn);
// query_rmp_out.rmp_context.state (rmpc at bit 0x100, state at its bits 0x08..0x0b).
enum class rmp_state : uint8_t { rdy = 1, err = 3 };
rmp_state parse_query_rmp_state(std::span<const uint8_t> out);

// ---- RoCE v2 UDP source port --------------------------------------------------------------
// The flow label the kernel derives for an RC connection without one (lqpn * rqpn folded
// to 20 bits), and the UDP source port derived from a flow label (folded to 14 bits, in
// the 0xC000..0xFFFF range RoCE v2 reserves for it).
uint32_t flow_label_from_qpns(uint32_t lqpn, uint32_t rqpn);
uint16_t udp_sport_from_flow_label(uint32_t flow_label);

// ---- HCA capabilities ------------------------------------------------------------------------
enum class cap_type : uint16_t { general = 0x0, atomic = 0x3 };
// QUERY_HCA_CAP with op_mod = (type << 1) | 1 (current values).
std::vector<uint8_t> build_query_hca_cap(cap_type type);

struct general_caps {
  uint32_t log_max_qp_sz = 0;  // cmd_hca_cap bits 0x88..0x8f: log2 max WQEs per queue
  uint32_t log_max_cq_sz = 0;  // bits 0xc8..0xcf
  uint32_t log_max_msg = 0;    // bits 0x1c3..0x1c7
  bool roce = false;           // bit 0x21d
  bool atomic = false;         // bit 0x21e
  bool cq_oi = false;          // bit 0x220: overrun-ignore CQs
  bool rc = false;             // bit 0x23f
};
// Parses query_hca_cap_out (capability at byte 16) for cap_type::general.
general_caps parse_general_caps(std::span<const uint8_t> out);

struct atomic_caps {
  // atomic_caps bits 0x40..0x41: 0 = responses big-endian, 1 = host endianness
  // (verbs IBV_ATOMIC_HCA; what the data path's atomic results assume, spec 6.4).
  uint32_t req_8B_endianness_mode = 0;
  bool cmp_swap = false, fetch_add = false;                // atomic_operations bits 0, 1
  bool masked_cmp_swap = false, masked_fetch_add = false;  // bits 2, 3 (field at 0x90)
  uint32_t atomic_size_qp = 0;  // bits 0xb0..0xbf: bit n set = 2^n-byte atomics on QPs
};
atomic_caps parse_atomic_caps(std::span<const uint8_t> out);

}  // namespace gdaki::mlx5::prm_cmd

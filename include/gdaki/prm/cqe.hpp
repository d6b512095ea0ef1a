// mlx5 completion-queue entry formats: CQE64, the error CQE, CQE opcodes and syndromes
// (ConnectX PRM; rdma-core mlx5dv.h). Checked against mlx5dv.h by prm_layout_test.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gdaki/prm/endian.hpp"

namespace gdaki::prm {

inline constexpr uint32_t cqe_bytes = 64;

// CQE opcodes, op_own >> 4 (MLX5_CQE_*).
enum class cqe_opcode : uint8_t {
  req = 0,
  resp_wr_imm = 1,
  resp_send = 2,
  resp_send_imm = 3,
  resp_send_inv = 4,
  resize_cq = 5,
  no_packet = 6,
  sig_err = 12,
  req_err = 13,
  resp_err = 14,
  invalid = 15,
};

// Error syndromes (MLX5_CQE_SYNDROME_*), err_cqe byte 55.
enum class syndrome : uint8_t {
  none = 0x00,  // not a PRM value: gdaki's "no error"
  local_length = 0x01,
  local_qp_op = 0x02,
  local_prot = 0x04,
  wr_flush = 0x05,
  mw_bind = 0x06,
  bad_resp = 0x10,
  local_access = 0x11,
  remote_inval_req = 0x12,
  remote_access = 0x13,
  remote_op = 0x14,
  transport_retry_exc = 0x15,
  rnr_retry_exc = 0x16,
  remote_aborted = 0x22,
};

// The value every op_own byte is initialised to: opcode INVALID, owner 1. Neither an
// owner-only poller nor an opcode-checking poller mistakes it for a CQE on lap 0.
inline constexpr uint8_t cqe_op_own_init = 0xf1;
inline constexpr uint8_t cqe_owner_mask = 0x01;
inline constexpr uint8_t cqe_se_mask = 0x02;
inline constexpr uint8_t cqe_format_mask = 0x0c;
// Format 1 (MLX5_INLINE_SCATTER_32): a received payload of at most 32 bytes is in CQE
// bytes 0..31 (QPs created with responder scatter-to-CQE, QPC cs_res = 1).
inline constexpr uint8_t cqe_inline_scatter_32 = 0x04;
inline constexpr uint32_t cqe_inline_scatter_max = 32;

// 5.1 The 64-byte CQE.
struct cqe64 {
  uint8_t rsvd0[2];
  be16 wqe_id;
  uint8_t rsvd4[13];
  uint8_t ml_path;
  uint8_t rsvd18[4];
  be16 slid;
  be32 flags_rqpn;  // [23:0] source QPN (responder)
  uint8_t hds_ip_ext;
  uint8_t l4_hdr_type_etc;
  be16 vlan_info;
  be32 srqn_uidx;
  uint32_t imm_inval_pkey;  // raw immediate bytes as on the wire; BE rkey for SEND_INVAL
  uint8_t app;
  uint8_t app_op;
  be16 app_info;
  be32 byte_cnt;
  be64 timestamp;
  be32 sop_drop_qpn;  // REQ: [31:24] WQE opcode, [23:0] QPN
  be16 wqe_counter;
  uint8_t signature;
  uint8_t op_own;  // [7:4] CQE opcode, [3:2] format, [1] SE, [0] owner
};

// 5.3 Error CQE, overlaying the same 64 bytes.
struct err_cqe {
  uint8_t rsvd0[32];
  be32 srqn;
  uint8_t rsvd1[16];
  uint8_t hw_err_synd;
  uint8_t hw_synd_type;
  uint8_t vendor_err_synd;
  uint8_t syndrome;
  be32 s_wqe_opcode_qpn;  // [31:24] failing WQE opcode, [23:0] QPN
  be16 wqe_counter;
  uint8_t signature;
  uint8_t op_own;
};

static_assert(sizeof(cqe64) == 64 && sizeof(err_cqe) == 64, "CQEs are 64 bytes");
static_assert(offsetof(cqe64, flags_rqpn) == 24 && offsetof(cqe64, srqn_uidx) == 32 &&
                  offsetof(cqe64, imm_inval_pkey) == 36 && offsetof(cqe64, byte_cnt) == 44 &&
                  offsetof(cqe64, timestamp) == 48 && offsetof(cqe64, sop_drop_qpn) == 56 &&
                  offsetof(cqe64, wqe_counter) == 60 && offsetof(cqe64, op_own) == 63,
              "CQE64 field offsets follow PRM 5.1");
static_assert(offsetof(err_cqe, srqn) == 32 && offsetof(err_cqe, vendor_err_synd) == 54 &&
                  offsetof(err_cqe, syndrome) == 55 && offsetof(err_cqe, s_wqe_opcode_qpn) == 56 &&
                  offsetof(err_cqe, wqe_counter) == 60,
              "error CQE field offsets follow PRM 5.3");

GDAKI_HD constexpr cqe_opcode cqe_opcode_of(uint8_t op_own) {
  return static_cast<cqe_opcode>(op_own >> 4);
}
GDAKI_HD constexpr bool cqe_is_error(cqe_opcode op) {
  return op == cqe_opcode::req_err || op == cqe_opcode::resp_err;
}

}  // namespace gdaki::prm

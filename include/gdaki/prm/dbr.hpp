// Doorbell-record layouts (PRM 3.1, 5.5) and UAR page offsets (PRM 3.2).
#pragma once

#include <cstdint>

#include "gdaki/prm/endian.hpp"

namespace gdaki::prm {

// QP doorbell record: two BE32 words; only the low 16 bits of each carry a counter.
struct qp_dbrec {
  be32 rcv;  // MLX5_RCV_DBR = 0: receive WQEs ever posted, mod 2^16
  be32 snd;  // MLX5_SND_DBR = 1: next free send WQEBB (pc), mod 2^16
};
inline constexpr uint32_t qp_dbr_rcv_index = 0;
inline constexpr uint32_t qp_dbr_snd_index = 1;

// CQ doorbell record: the consumer index and the arm word.
struct cq_dbrec {
  be32 set_ci;  // MLX5_CQ_SET_CI = 0: 24-bit consumer index
  be32 arm_db;  // MLX5_CQ_ARM_DB = 1: (arm_sn & 3) << 28 | cmd | ci
};
inline constexpr uint32_t cq_dbr_set_ci_index = 0;
inline constexpr uint32_t cq_dbr_arm_index = 1;
inline constexpr uint32_t cq_ci_mask = 0xffffff;
inline constexpr uint32_t cq_arm_solicited = 1u << 24;

// UAR page offsets.
inline constexpr uint32_t uar_bf_offset = 0x800;     // MLX5_BF_OFFSET
inline constexpr uint32_t uar_cq_doorbell = 0x20;    // MLX5_CQ_DOORBELL

static_assert(sizeof(qp_dbrec) == 8 && sizeof(cq_dbrec) == 8, "doorbell records are 8 bytes");

}  // namespace gdaki::prm

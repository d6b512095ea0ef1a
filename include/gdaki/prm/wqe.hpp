// mlx5 send and receive work-queue entry formats (ConnectX PRM; rdma-core mlx5dv.h).
// See docs/ and the project's mlx5-datapath spec, sections 1, 2 and 4. Every layout here
// is checked against rdma-core's infiniband/mlx5dv.h by tests/unit/prm_layout_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gdaki/prm/endian.hpp"

namespace gdaki::prm {

// A send WQE is built from 64-byte basic blocks (WQEBBs) and measured in 16-byte units (DS).
inline constexpr uint32_t wqebb_bytes = 64;
inline constexpr uint32_t wqebb_shift = 6;
inline constexpr uint32_t ds_bytes = 16;
inline constexpr uint32_t max_ds = 63;             // 6-bit field
inline constexpr uint32_t max_wqebbs_per_wqe = 16;  // MLX5_SEND_WQE_MAX_WQEBBS
inline constexpr uint32_t inline_flag = 0x80000000u;  // MLX5_INLINE_SEG, in the BE byte count
inline constexpr uint32_t invalid_lkey = 0x100;       // MLX5_INVALID_LKEY: receive list terminator

// Send opcodes (MLX5_OPCODE_*), ctrl byte 3.
enum class send_opcode : uint8_t {
  nop = 0x00,
  send_inval = 0x01,
  rdma_write = 0x08,
  rdma_write_imm = 0x09,
  send = 0x0a,
  send_imm = 0x0b,
  wait = 0x0f,
  rdma_read = 0x10,
  atomic_cs = 0x11,
  atomic_fa = 0x12,
  atomic_masked_cs = 0x14,
  atomic_masked_fa = 0x15,
};

// opmod for masked (extended) atomics: 0x08 | (log2(size) - 2).
inline constexpr uint8_t opmod_ext_atomic_4b = 0x08;
inline constexpr uint8_t opmod_ext_atomic_8b = 0x09;

// fm_ce_se byte (ctrl byte 11): fence mode [7:5], completion mode [3:2], solicited [1].
namespace ctrl_flags {
inline constexpr uint8_t fence_none = 0x00;
inline constexpr uint8_t fence_initiator_small = 0x20;  // MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE
inline constexpr uint8_t fence_ordering = 0x40;         // FM 2
inline constexpr uint8_t fence_strong_ordering = 0x60;  // FM 3
inline constexpr uint8_t fence = 0x80;                  // MLX5_WQE_CTRL_FENCE (FM 4)
inline constexpr uint8_t fence_mask = 0xe0;
inline constexpr uint8_t ce_error_only = 0x00;
inline constexpr uint8_t ce_first_error = 0x04;
inline constexpr uint8_t cq_update = 0x08;  // MLX5_WQE_CTRL_CQ_UPDATE: always a CQE
inline constexpr uint8_t cq_update_event = 0x0c;
inline constexpr uint8_t ce_mask = 0x0c;
inline constexpr uint8_t solicited = 0x02;  // MLX5_WQE_CTRL_SOLICITED
}  // namespace ctrl_flags

// 2.1 Control segment, always first.
struct ctrl_seg {
  be32 opmod_idx_opcode;  // [31:24] opmod, [23:8] wqe_index, [7:0] opcode
  be32 qpn_ds;            // [31:8] QPN, [5:0] DS
  uint8_t signature;
  uint8_t dci_stream_channel_id[2];
  uint8_t fm_ce_se;
  uint32_t imm;  // raw wire bytes: immediate data (already big-endian) or rkey for SEND_INVAL
};

// 2.2 Remote address segment.
struct raddr_seg {
  be64 raddr;
  be32 rkey;
  uint32_t reserved;
};

// 2.3 Data (pointer) segment: gather, READ scatter, atomic result, receive scatter.
struct data_seg {
  be32 byte_count;  // bit 31 must be clear (it is the inline flag)
  be32 lkey;
  be64 addr;
};

// Shared receive queue WQE header (mlx5_wqe_srq_next_seg): the SRQ's WQEs form a linked
// list through next_wqe_index, so receives freed out of order (several QPs complete them)
// go back to its tail and the NIC follows the links, not the ring order. Data segments
// (data_seg, terminated by invalid_lkey when short) follow at byte 16.
struct srq_next_seg {
  uint8_t rsvd0[2];
  be16 next_wqe_index;  // the WQE the NIC takes after this one
  uint8_t signature;
  uint8_t rsvd1[11];
};

// A new SRQ's free list: every WQE of the ring in ring order, i -> i + 1 and the last back
// to 0 (rdma-core's mlx5 SRQ creation links them the same way). The data path then starts
// with head 0 and tail at the last WQE, whose link the first srq_free rewrites. Both
// providers link their rings with it before the NIC sees them.
inline void link_srq_ring(uint8_t* ring, uint32_t wqes, uint32_t log_stride) {
  for (uint32_t i = 0; i < wqes; ++i) {
    auto* next = reinterpret_cast<srq_next_seg*>(ring + (static_cast<size_t>(i) << log_stride));
    next->next_wqe_index = to_be16(static_cast<uint16_t>((i + 1) & (wqes - 1)));
  }
}

// 2.4 Inline data segment header; the payload follows at byte 4, unswapped.
struct inline_seg {
  be32 byte_count;  // inline_flag | length
};

// 2.5 Atomic segment (CS: swap_add = new value, compare = expected; FA: swap_add = addend).
struct atomic_seg {
  be64 swap_add;
  be64 compare;
};

// 2.6 Masked atomics.
struct masked_cs32_seg {
  be32 swap;
  be32 compare;
  be32 swap_mask;
  be32 compare_mask;
};
struct masked_cs64_seg {
  be64 swap;
  be64 compare;
  be64 swap_mask;
  be64 compare_mask;
};
struct masked_fa32_seg {
  be32 add;
  be32 field_boundary;
  uint32_t reserved[2];
};
struct masked_fa64_seg {
  be64 add;
  be64 field_boundary;
};

// WAIT (DOCA cross-QP wait) segment.
struct wait_seg {
  uint8_t reserved[8];
  be32 max_index;
  be32 qpn_cqn;
};

static_assert(sizeof(ctrl_seg) == 16 && offsetof(ctrl_seg, fm_ce_se) == 11 &&
                  offsetof(ctrl_seg, imm) == 12,
              "ctrl segment is 16 bytes with fm_ce_se at 11 and imm at 12 (PRM 2.1)");
static_assert(sizeof(raddr_seg) == 16 && offsetof(raddr_seg, rkey) == 8,
              "remote address segment is 16 bytes with rkey at 8 (PRM 2.2)");
static_assert(sizeof(data_seg) == 16 && offsetof(data_seg, lkey) == 4 &&
                  offsetof(data_seg, addr) == 8,
              "data segment is 16 bytes: byte_count, lkey, addr (PRM 2.3)");
static_assert(sizeof(srq_next_seg) == 16 && offsetof(srq_next_seg, next_wqe_index) == 2 &&
                  offsetof(srq_next_seg, signature) == 4,
              "mlx5_wqe_srq_next_seg: rdma-core's mlx5_post_srq_recv follows next_wqe_index at byte 2");
static_assert(sizeof(atomic_seg) == 16 && offsetof(atomic_seg, compare) == 8,
              "atomic segment is swap_add then compare (PRM 2.5)");
static_assert(sizeof(masked_cs32_seg) == 16 && sizeof(masked_cs64_seg) == 32 &&
                  sizeof(masked_fa32_seg) == 16 && sizeof(masked_fa64_seg) == 16,
              "masked atomic segments have the PRM 2.6 sizes");
static_assert(sizeof(wait_seg) == 16 && offsetof(wait_seg, max_index) == 8,
              "wait segment: 8 reserved bytes, max_index, qpn_cqn");

// Packs ctrl word 0: opmod, 16-bit WQE index, opcode.
GDAKI_HD constexpr uint32_t ctrl_word0(uint8_t opmod, uint16_t wqe_index, send_opcode op) {
  return (static_cast<uint32_t>(opmod) << 24) | (static_cast<uint32_t>(wqe_index) << 8) |
         static_cast<uint32_t>(op);
}
// Packs ctrl word 1: 24-bit QPN and 6-bit DS.
GDAKI_HD constexpr uint32_t ctrl_word1(uint32_t qpn, uint32_t ds) {
  return (qpn << 8) | (ds & 0x3f);
}
// WQEBBs a WQE of ds 16-byte units occupies.
GDAKI_HD constexpr uint32_t wqebbs_for_ds(uint32_t ds) { return (ds + 3) / 4; }
// 16-byte units an inline segment of len payload bytes occupies.
GDAKI_HD constexpr uint32_t inline_ds(uint32_t len) { return (4 + len + 15) / 16; }

}  // namespace gdaki::prm

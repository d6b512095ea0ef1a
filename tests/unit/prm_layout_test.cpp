// gdaki's PRM formats (gdaki/prm/*.hpp) against rdma-core's public mlx5 header
// <infiniband/mlx5dv.h> (Debian libibverbs-dev): sizes, field offsets and constants.
// Header-only use: nothing from libibverbs/libmlx5 is linked. Constants that only live in
// rdma-core's private provider headers (MLX5_CQ_SET_CI, MLX5_CQ_ARM_DB, MLX5_BF_OFFSET,
// mlx5_wqe_masked_atomic_seg, MLX5_SEND_WQE_MAX_WQEBBS) are not checked here.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>

#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/dbr.hpp"
#include "gdaki/prm/eth.hpp"
#include "gdaki/prm/wqe.hpp"

#if defined(GDAKI_HAVE_MLX5DV_H)
#include <infiniband/mlx5dv.h>

namespace {

namespace prm = gdaki::prm;

#define EXPECT_SAME_OFFSET(ours, field_ours, theirs, field_theirs) \
  EXPECT_EQ(offsetof(ours, field_ours), offsetof(theirs, field_theirs)) << #ours "." #field_ours

TEST(prm_layout, ctrl_segment_matches_mlx5_wqe_ctrl_seg) {
  EXPECT_EQ(sizeof(prm::ctrl_seg), sizeof(mlx5_wqe_ctrl_seg));
  EXPECT_SAME_OFFSET(prm::ctrl_seg, opmod_idx_opcode, mlx5_wqe_ctrl_seg, opmod_idx_opcode);
  EXPECT_SAME_OFFSET(prm::ctrl_seg, qpn_ds, mlx5_wqe_ctrl_seg, qpn_ds);
  EXPECT_SAME_OFFSET(prm::ctrl_seg, signature, mlx5_wqe_ctrl_seg, signature);
  EXPECT_SAME_OFFSET(prm::ctrl_seg, dci_stream_channel_id, mlx5_wqe_ctrl_seg, dci_stream_channel_id);
  EXPECT_SAME_OFFSET(prm::ctrl_seg, fm_ce_se, mlx5_wqe_ctrl_seg, fm_ce_se);
  EXPECT_SAME_OFFSET(prm::ctrl_seg, imm, mlx5_wqe_ctrl_seg, imm);
  EXPECT_EQ(sizeof(prm::ctrl_seg::dci_stream_channel_id), sizeof(mlx5_wqe_ctrl_seg::dci_stream_channel_id));
}

TEST(prm_layout, raddr_data_inline_and_atomic_segments_match) {
  EXPECT_EQ(sizeof(prm::raddr_seg), sizeof(mlx5_wqe_raddr_seg));
  EXPECT_SAME_OFFSET(prm::raddr_seg, raddr, mlx5_wqe_raddr_seg, raddr);
  EXPECT_SAME_OFFSET(prm::raddr_seg, rkey, mlx5_wqe_raddr_seg, rkey);
  EXPECT_SAME_OFFSET(prm::raddr_seg, reserved, mlx5_wqe_raddr_seg, reserved);

  EXPECT_EQ(sizeof(prm::data_seg), sizeof(mlx5_wqe_data_seg));
  EXPECT_SAME_OFFSET(prm::data_seg, byte_count, mlx5_wqe_data_seg, byte_count);
  EXPECT_SAME_OFFSET(prm::data_seg, lkey, mlx5_wqe_data_seg, lkey);
  EXPECT_SAME_OFFSET(prm::data_seg, addr, mlx5_wqe_data_seg, addr);

  EXPECT_EQ(sizeof(prm::inline_seg), sizeof(mlx5_wqe_inl_data_seg));
  EXPECT_SAME_OFFSET(prm::inline_seg, byte_count, mlx5_wqe_inl_data_seg, byte_count);

  EXPECT_EQ(sizeof(prm::atomic_seg), sizeof(mlx5_wqe_atomic_seg));
  EXPECT_SAME_OFFSET(prm::atomic_seg, swap_add, mlx5_wqe_atomic_seg, swap_add);
  EXPECT_SAME_OFFSET(prm::atomic_seg, compare, mlx5_wqe_atomic_seg, compare);
}

TEST(prm_layout, cqe64_matches_mlx5_cqe64) {
  EXPECT_EQ(sizeof(prm::cqe64), sizeof(mlx5_cqe64));
  EXPECT_SAME_OFFSET(prm::cqe64, wqe_id, mlx5_cqe64, wqe_id);
  EXPECT_SAME_OFFSET(prm::cqe64, ml_path, mlx5_cqe64, ml_path);
  EXPECT_SAME_OFFSET(prm::cqe64, slid, mlx5_cqe64, slid);
  EXPECT_SAME_OFFSET(prm::cqe64, flags_rqpn, mlx5_cqe64, flags_rqpn);
  EXPECT_SAME_OFFSET(prm::cqe64, hds_ip_ext, mlx5_cqe64, hds_ip_ext);
  EXPECT_SAME_OFFSET(prm::cqe64, l4_hdr_type_etc, mlx5_cqe64, l4_hdr_type_etc);
  EXPECT_SAME_OFFSET(prm::cqe64, vlan_info, mlx5_cqe64, vlan_info);
  EXPECT_SAME_OFFSET(prm::cqe64, srqn_uidx, mlx5_cqe64, srqn_uidx);
  EXPECT_SAME_OFFSET(prm::cqe64, imm_inval_pkey, mlx5_cqe64, imm_inval_pkey);
  EXPECT_SAME_OFFSET(prm::cqe64, app, mlx5_cqe64, app);
  EXPECT_SAME_OFFSET(prm::cqe64, app_op, mlx5_cqe64, app_op);
  EXPECT_SAME_OFFSET(prm::cqe64, app_info, mlx5_cqe64, app_info);
  EXPECT_SAME_OFFSET(prm::cqe64, byte_cnt, mlx5_cqe64, byte_cnt);
  EXPECT_SAME_OFFSET(prm::cqe64, timestamp, mlx5_cqe64, timestamp);
  EXPECT_SAME_OFFSET(prm::cqe64, sop_drop_qpn, mlx5_cqe64, sop_drop_qpn);
  EXPECT_SAME_OFFSET(prm::cqe64, wqe_counter, mlx5_cqe64, wqe_counter);
  EXPECT_SAME_OFFSET(prm::cqe64, signature, mlx5_cqe64, signature);
  EXPECT_SAME_OFFSET(prm::cqe64, op_own, mlx5_cqe64, op_own);
}

TEST(prm_layout, err_cqe_matches_mlx5_err_cqe) {
  EXPECT_EQ(sizeof(prm::err_cqe), sizeof(mlx5_err_cqe));
  EXPECT_SAME_OFFSET(prm::err_cqe, srqn, mlx5_err_cqe, srqn);
  EXPECT_SAME_OFFSET(prm::err_cqe, vendor_err_synd, mlx5_err_cqe, vendor_err_synd);
  EXPECT_SAME_OFFSET(prm::err_cqe, syndrome, mlx5_err_cqe, syndrome);
  EXPECT_SAME_OFFSET(prm::err_cqe, s_wqe_opcode_qpn, mlx5_err_cqe, s_wqe_opcode_qpn);
  EXPECT_SAME_OFFSET(prm::err_cqe, wqe_counter, mlx5_err_cqe, wqe_counter);
  EXPECT_SAME_OFFSET(prm::err_cqe, signature, mlx5_err_cqe, signature);
  EXPECT_SAME_OFFSET(prm::err_cqe, op_own, mlx5_err_cqe, op_own);
  // DOCA's extended layout names two bytes rdma-core keeps reserved (rsvd1 covers 36..53).
  EXPECT_EQ(offsetof(prm::err_cqe, hw_err_synd), offsetof(mlx5_err_cqe, rsvd1) + 16);
  EXPECT_EQ(offsetof(prm::err_cqe, hw_synd_type), offsetof(mlx5_err_cqe, rsvd1) + 17);
}

TEST(prm_layout, send_opcodes_match_mlx5_opcode_values) {
  using op = prm::send_opcode;
  EXPECT_EQ(static_cast<int>(op::nop), MLX5_OPCODE_NOP);
  EXPECT_EQ(static_cast<int>(op::send_inval), MLX5_OPCODE_SEND_INVAL);
  EXPECT_EQ(static_cast<int>(op::rdma_write), MLX5_OPCODE_RDMA_WRITE);
  EXPECT_EQ(static_cast<int>(op::rdma_write_imm), MLX5_OPCODE_RDMA_WRITE_IMM);
  EXPECT_EQ(static_cast<int>(op::send), MLX5_OPCODE_SEND);
  EXPECT_EQ(static_cast<int>(op::send_imm), MLX5_OPCODE_SEND_IMM);
  EXPECT_EQ(static_cast<int>(op::rdma_read), MLX5_OPCODE_RDMA_READ);
  EXPECT_EQ(static_cast<int>(op::atomic_cs), MLX5_OPCODE_ATOMIC_CS);
  EXPECT_EQ(static_cast<int>(op::atomic_fa), MLX5_OPCODE_ATOMIC_FA);
  EXPECT_EQ(static_cast<int>(op::atomic_masked_cs), MLX5_OPCODE_ATOMIC_MASKED_CS);
  EXPECT_EQ(static_cast<int>(op::atomic_masked_fa), MLX5_OPCODE_ATOMIC_MASKED_FA);
  // WAIT (0x0f) is DOCA's and not in mlx5dv.h; it must not collide with an rdma-core opcode.
  EXPECT_NE(static_cast<int>(op::wait), MLX5_OPCODE_TSO);
}

TEST(prm_layout, cqe_opcodes_and_owner_bits_match) {
  using op = prm::cqe_opcode;
  EXPECT_EQ(static_cast<int>(op::req), MLX5_CQE_REQ);
  EXPECT_EQ(static_cast<int>(op::resp_wr_imm), MLX5_CQE_RESP_WR_IMM);
  EXPECT_EQ(static_cast<int>(op::resp_send), MLX5_CQE_RESP_SEND);
  EXPECT_EQ(static_cast<int>(op::resp_send_imm), MLX5_CQE_RESP_SEND_IMM);
  EXPECT_EQ(static_cast<int>(op::resp_send_inv), MLX5_CQE_RESP_SEND_INV);
  EXPECT_EQ(static_cast<int>(op::resize_cq), MLX5_CQE_RESIZE_CQ);
  EXPECT_EQ(static_cast<int>(op::no_packet), MLX5_CQE_NO_PACKET);
  EXPECT_EQ(static_cast<int>(op::sig_err), MLX5_CQE_SIG_ERR);
  EXPECT_EQ(static_cast<int>(op::req_err), MLX5_CQE_REQ_ERR);
  EXPECT_EQ(static_cast<int>(op::resp_err), MLX5_CQE_RESP_ERR);
  EXPECT_EQ(static_cast<int>(op::invalid), MLX5_CQE_INVALID);
  EXPECT_EQ(prm::cqe_owner_mask, MLX5_CQE_OWNER_MASK);
  EXPECT_EQ(prm::cqe_format_mask, MLX5_INLINE_SCATTER_32 | MLX5_INLINE_SCATTER_64);
  EXPECT_EQ(prm::cqe_op_own_init >> 4, MLX5_CQE_INVALID);
}

TEST(prm_layout, syndromes_match_mlx5_cqe_syndrome_values) {
  using s = prm::syndrome;
  EXPECT_EQ(static_cast<int>(s::local_length), MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
  EXPECT_EQ(static_cast<int>(s::local_qp_op), MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
  EXPECT_EQ(static_cast<int>(s::local_prot), MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
  EXPECT_EQ(static_cast<int>(s::wr_flush), MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
  EXPECT_EQ(static_cast<int>(s::mw_bind), MLX5_CQE_SYNDROME_MW_BIND_ERR);
  EXPECT_EQ(static_cast<int>(s::bad_resp), MLX5_CQE_SYNDROME_BAD_RESP_ERR);
  EXPECT_EQ(static_cast<int>(s::local_access), MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR);
  EXPECT_EQ(static_cast<int>(s::remote_inval_req), MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
  EXPECT_EQ(static_cast<int>(s::remote_access), MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
  EXPECT_EQ(static_cast<int>(s::remote_op), MLX5_CQE_SYNDROME_REMOTE_OP_ERR);
  EXPECT_EQ(static_cast<int>(s::transport_retry_exc), MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
  EXPECT_EQ(static_cast<int>(s::rnr_retry_exc), MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(static_cast<int>(s::remote_aborted), MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR);
}

TEST(prm_layout, ctrl_flags_and_wqe_constants_match) {
  EXPECT_EQ(prm::ctrl_flags::cq_update, MLX5_WQE_CTRL_CQ_UPDATE);
  EXPECT_EQ(prm::ctrl_flags::solicited, MLX5_WQE_CTRL_SOLICITED);
  EXPECT_EQ(prm::ctrl_flags::fence, MLX5_WQE_CTRL_FENCE);
  EXPECT_EQ(prm::ctrl_flags::fence_initiator_small, MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
  EXPECT_EQ(prm::inline_flag, static_cast<uint32_t>(MLX5_INLINE_SEG));
  EXPECT_EQ(prm::wqebb_bytes, static_cast<uint32_t>(MLX5_SEND_WQE_BB));
  EXPECT_EQ(prm::wqebb_shift, static_cast<uint32_t>(MLX5_SEND_WQE_SHIFT));
  EXPECT_EQ(prm::invalid_lkey, static_cast<uint32_t>(MLX5_INVALID_LKEY));
}

TEST(prm_layout, doorbell_record_indexes_and_uar_offsets_match) {
  EXPECT_EQ(prm::qp_dbr_rcv_index, static_cast<uint32_t>(MLX5_RCV_DBR));
  EXPECT_EQ(prm::qp_dbr_snd_index, static_cast<uint32_t>(MLX5_SND_DBR));
  EXPECT_EQ(offsetof(prm::qp_dbrec, rcv), MLX5_RCV_DBR * sizeof(uint32_t));
  EXPECT_EQ(offsetof(prm::qp_dbrec, snd), MLX5_SND_DBR * sizeof(uint32_t));
  EXPECT_EQ(prm::uar_cq_doorbell, static_cast<uint32_t>(MLX5_CQ_DOORBELL));
  EXPECT_EQ(prm::cq_arm_solicited, static_cast<uint32_t>(MLX5_CQ_DB_REQ_NOT_SOL));
}

TEST(prm_layout, eth_segment_matches_mlx5_wqe_eth_seg) {
  EXPECT_EQ(sizeof(prm::eth_seg), sizeof(mlx5_wqe_eth_seg));
  EXPECT_SAME_OFFSET(prm::eth_seg, rsvd0, mlx5_wqe_eth_seg, rsvd0);
  EXPECT_SAME_OFFSET(prm::eth_seg, cs_flags, mlx5_wqe_eth_seg, cs_flags);
  EXPECT_SAME_OFFSET(prm::eth_seg, mss, mlx5_wqe_eth_seg, mss);
  EXPECT_SAME_OFFSET(prm::eth_seg, rsvd2, mlx5_wqe_eth_seg, rsvd2);
  EXPECT_SAME_OFFSET(prm::eth_seg, inline_hdr_sz, mlx5_wqe_eth_seg, inline_hdr_sz);
  EXPECT_SAME_OFFSET(prm::eth_seg, inline_hdr_start, mlx5_wqe_eth_seg, inline_hdr_start);
  EXPECT_SAME_OFFSET(prm::eth_seg, inline_hdr, mlx5_wqe_eth_seg, inline_hdr);
  EXPECT_EQ(prm::eth_cs::l3, MLX5_ETH_WQE_L3_CSUM);
  EXPECT_EQ(prm::eth_cs::l4, MLX5_ETH_WQE_L4_CSUM);
}

// mlx5dv.h names byte count, WQE counter and op_own; the RSS hash result and type sit in
// its reserved rsvd4[13] (bytes 4..16), where Linux's mlx5_cqe64 names them (bytes 12, 16).
TEST(prm_layout, eth_rx_cqe_overlays_mlx5_cqe64) {
  EXPECT_EQ(sizeof(prm::eth_rx_cqe), sizeof(mlx5_cqe64));
  EXPECT_SAME_OFFSET(prm::eth_rx_cqe, byte_cnt, mlx5_cqe64, byte_cnt);
  EXPECT_SAME_OFFSET(prm::eth_rx_cqe, wqe_counter, mlx5_cqe64, wqe_counter);
  EXPECT_SAME_OFFSET(prm::eth_rx_cqe, signature, mlx5_cqe64, signature);
  EXPECT_SAME_OFFSET(prm::eth_rx_cqe, op_own, mlx5_cqe64, op_own);
  EXPECT_EQ(offsetof(prm::eth_rx_cqe, rss_hash_result), offsetof(mlx5_cqe64, rsvd4) + 8);
  EXPECT_EQ(offsetof(prm::eth_rx_cqe, rss_hash_type), offsetof(mlx5_cqe64, rsvd4) + 12);
  EXPECT_EQ(static_cast<int>(prm::cqe_opcode::resp_send), MLX5_CQE_RESP_SEND);
}

}  // namespace

#else  // !GDAKI_HAVE_MLX5DV_H

TEST(prm_layout, matches_rdma_core_mlx5dv_h) {
  GTEST_SKIP() << "infiniband/mlx5dv.h not installed (apt-get install libibverbs-dev)";
}

#endif

// Direct verbs on the soft device: mlx5dv_init_obj hands out the soft NIC's own SQ ring,
// doorbell record, doorbell register and CQE ring; a WQE written here by hand with
// rdma-core's mlx5dv.h helpers, published by doorbell record and doorbell, is executed by
// the soft NIC, which writes the mlx5 CQE we poll by its owner bit.
#include <infiniband/mlx5dv.h>

#include <atomic>
#include <chrono>

#include "verbs_fixture.hpp"

namespace gdaki_verbs_test {
namespace {

using verbs_mlx5dv = verbs_pair;

TEST_F(verbs_mlx5dv, a_hand_written_wqe_and_doorbell_are_executed_by_the_soft_nic) {
  mlx5dv_context dvc{};
  ASSERT_EQ(mlx5dv_query_device(ctx_, &dvc), 0);
  mlx5dv_qp dq{};
  mlx5dv_cq dc{};
  mlx5dv_obj obj{};
  obj.qp.in = a_.qp;
  obj.qp.out = &dq;
  obj.cq.in = a_.scq;
  obj.cq.out = &dc;
  ASSERT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ), 0);
  ASSERT_NE(dq.sq.buf, nullptr);
  ASSERT_EQ(dq.sq.stride, 64u);
  ASSERT_NE(dq.bf.reg, nullptr);
  ASSERT_EQ(dc.cqe_size, 64u);

  for (int i = 0; i < 256; ++i) buf_a_[i] = static_cast<uint8_t>(i ^ 0xa5);
  // WQE 0: ctrl + raddr + one data segment (DS 3), asking for a CQE.
  auto* wqe = static_cast<uint8_t*>(dq.sq.buf);
  auto* ctrl = reinterpret_cast<mlx5_wqe_ctrl_seg*>(wqe);
  auto* raddr = reinterpret_cast<mlx5_wqe_raddr_seg*>(wqe + sizeof(mlx5_wqe_ctrl_seg));
  auto* data = reinterpret_cast<mlx5_wqe_data_seg*>(wqe + sizeof(mlx5_wqe_ctrl_seg) + sizeof(mlx5_wqe_raddr_seg));
  mlx5dv_set_ctrl_seg(ctrl, 0, MLX5_OPCODE_RDMA_WRITE, 0, a_.qp->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0);
  raddr->raddr = htobe64(reinterpret_cast<uintptr_t>(buf_b_.data()));
  raddr->rkey = htobe32(mr_b_->rkey);
  raddr->reserved = 0;
  mlx5dv_set_data_seg(data, 256, mr_a_->lkey, reinterpret_cast<uintptr_t>(buf_a_.data()));
  // WQE before the doorbell record, the record before the doorbell (rdma-core's
  // udma_to_device_barrier and mmio_wc_start; release fences on x86 and Arm hosts).
  std::atomic_thread_fence(std::memory_order_release);
  dq.dbrec[MLX5_SND_DBR] = htobe32(1);
  std::atomic_thread_fence(std::memory_order_release);
  uint64_t db;
  std::memcpy(&db, ctrl, sizeof db);
  *static_cast<volatile uint64_t*>(dq.bf.reg) = db;

  auto* cqe = static_cast<mlx5_cqe64*>(dc.buf);
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const uint8_t op_own = reinterpret_cast<std::atomic<uint8_t>*>(&cqe->op_own)->load(std::memory_order_acquire);
    if ((op_own >> 4) != MLX5_CQE_INVALID && (op_own & MLX5_CQE_OWNER_MASK) == 0) break;
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << "no CQE from the soft NIC";
  }
  EXPECT_EQ(mlx5dv_get_cqe_opcode(cqe), MLX5_CQE_REQ);
  EXPECT_EQ(be16toh(cqe->wqe_counter), 0u);
  EXPECT_EQ(be32toh(cqe->sop_drop_qpn) & 0xffffff, a_.qp->qp_num);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(buf_b_[i], static_cast<uint8_t>(i ^ 0xa5)) << "byte " << i;
}

TEST_F(verbs_mlx5dv, a_cq_serving_no_qp_is_refused_by_name) {
  ibv_cq* lone = ibv_create_cq(ctx_, 8, nullptr, nullptr, 0);
  ASSERT_NE(lone, nullptr);
  mlx5dv_cq dc{};
  mlx5dv_obj obj{};
  obj.cq.in = lone;
  obj.cq.out = &dc;
  EXPECT_EQ(mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ), EINVAL);
  EXPECT_EQ(ibv_destroy_cq(lone), 0);
}

}  // namespace
}  // namespace gdaki_verbs_test

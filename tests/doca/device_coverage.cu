// Coverage of the device API: a call to every DOCA GPUNetIO device function, at every
// execution scope and sharing mode, from __global__ kernels. Compiled with nvcc for sm_90
// (compile only: no GPU here) and, as device_coverage_host.cpp, with g++ (where the
// kernels are ordinary functions). Also compiles the three samples' kernels for sm_90.
#include "doca_gpunetio_device.h"

template <doca_gpu_dev_verbs_resource_sharing_mode M, doca_gpu_dev_verbs_exec_scope S>
__global__ void every_call(doca_gpu_dev_verbs_qp* qp, doca_gpu_dev_verbs_qp* companion, doca_gpu_dev_verbs_addr r,
                           doca_gpu_dev_verbs_addr l, int* out) {
  constexpr doca_gpu_dev_verbs_nic_handler H = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO;
  doca_gpu_dev_verbs_ticket_t t = 0;
  int acc = 0;
  doca_gpu_dev_verbs_put<M, H, S>(qp, r, l, 64, &t);
  doca_gpu_dev_verbs_put<M, H, S>(qp, r, l, 64);
  doca_gpu_dev_verbs_p<uint64_t, M, H, S>(qp, r, 1ull, &t);
  doca_gpu_dev_verbs_p<uint32_t, M, H, S>(qp, r, 1u);
  doca_gpu_dev_verbs_put_signal<DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, M, H, S>(qp, r, l, 64, r, l, 1, &t);
  doca_gpu_dev_verbs_put_signal<DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, M, H, S>(qp, r, l, 64, r, l, 1);
  doca_gpu_dev_verbs_p_signal<uint64_t, DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, S, M, H>(qp, r, 2ull, r, l, 1, &t);
  doca_gpu_dev_verbs_signal<DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, M, H, S>(qp, r, l, 1, &t);
  doca_gpu_dev_verbs_get<M, H, S>(qp, r, l, 64, &t);
  acc += doca_gpu_dev_verbs_get_wait<M, H, S>(qp, r, l, 64);
  gdaki_doca_dev_verbs_atomic_fetch_add<M, H, S>(qp, r, l, 1, &t);
  gdaki_doca_dev_verbs_atomic_compare_swap<M, H, S>(qp, r, l, 0, 1, &t);
  gdaki_doca_dev_verbs_fence<M>(qp);
  acc += doca_gpu_dev_verbs_wait<M, H>(qp, t);
  acc += doca_gpu_dev_verbs_wait<M, H>(qp);
  acc += doca_gpu_dev_verbs_poll_one_cq_at<M>(qp, t);
  acc += doca_gpu_dev_verbs_poll_cq_at<M>(qp, t);
  doca_gpu_dev_verbs_cq* cq = doca_gpu_dev_verbs_qp_get_cq_sq(qp);
  acc += doca_gpu_dev_verbs_poll_one_cq_device_at<M>(cq, t) + doca_gpu_dev_verbs_poll_cq_device_at<M>(cq, t);
  acc += static_cast<int>(doca_gpu_dev_verbs_poll_cq<M>(doca_gpu_dev_verbs_qp_get_cq<DOCA_GPUNETIO_VERBS_QP_SQ>(qp)));
  acc += static_cast<int>(doca_gpu_dev_verbs_cq_get_cqn(cq) + doca_gpu_dev_verbs_cqe_idx_inc_mask(1, 1));
  if (S == DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD) {
    doca_gpu_dev_verbs_put_counter<M, H>(qp, r, l, 64, companion, r, l, 1, &t);
    doca_gpu_dev_verbs_signal_counter<DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, M, H>(qp, r, l, 1, companion, r, l, 1, &t);
    const uint64_t base = doca_gpu_dev_verbs_reserve_wq_slots<M>(qp, 5);
    doca_gpu_dev_verbs_wqe_prepare_write(qp, doca_gpu_dev_verbs_get_wqe_ptr(qp, base), base,
                                         DOCA_GPUNETIO_IB_MLX5_OPCODE_RDMA_WRITE, DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_UPDATE,
                                         0, r.addr, r.key, l.addr, l.key, 64);
    const uint64_t v = 7;
    doca_gpu_dev_verbs_wqe_prepare_write_inl(qp, doca_gpu_dev_verbs_get_wqe_ptr(qp, base + 1), base + 1,
                                             DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_UPDATE, r.addr, r.key, &v, 8);
    doca_gpu_dev_verbs_wqe_prepare_read(qp, doca_gpu_dev_verbs_get_wqe_ptr(qp, base + 2), base + 2,
                                        DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_UPDATE, r.addr, r.key, l.addr, l.key, 64);
    doca_gpu_dev_verbs_wqe_prepare_atomic(qp, doca_gpu_dev_verbs_get_wqe_ptr(qp, base + 3), base + 3,
                                          DOCA_GPUNETIO_IB_MLX5_OPCODE_ATOMIC_FA,
                                          DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_UPDATE, r.addr, r.key, l.addr, l.key, 8, 1,
                                          0);
    doca_gpu_dev_verbs_wqe_prepare_nop(qp, doca_gpu_dev_verbs_get_wqe_ptr(qp, base + 4), base + 4,
                                       DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_CQ_UPDATE);
    doca_gpu_dev_verbs_mark_wqes_ready<M>(qp, base, base + 4);
    doca_gpu_dev_verbs_submit<M, DOCA_GPUNETIO_VERBS_SYNC_SCOPE_GPU, H>(qp, base + 5);
  }
  doca_gpu_dev_verbs_fence_release<DOCA_GPUNETIO_VERBS_SYNC_SCOPE_SYS>();
  doca_gpu_dev_verbs_fence_acquire<DOCA_GPUNETIO_VERBS_SYNC_SCOPE_CTA>();
  acc += static_cast<int>(doca_gpu_dev_verbs_get_lane_id() + doca_gpu_dev_verbs_query_globaltimer());
  acc += static_cast<int>(doca_gpu_dev_verbs_qp_get_qpn(qp) + doca_gpu_dev_verbs_qp_get_sq_wqe_num(qp) +
                          doca_gpu_dev_verbs_qp_get_sq_wqe_pi(qp));
  acc += static_cast<int>(gdaki_doca_thread_index() + gdaki_doca_block_index() + gdaki_doca_threads_per_block() +
                          gdaki_doca_blocks());
  *out = acc;
}

#define GDAKI_DOCA_COVER(M, S)                                                                             \
  template __global__ void every_call<M, S>(doca_gpu_dev_verbs_qp*, doca_gpu_dev_verbs_qp*, doca_gpu_dev_verbs_addr, \
                                            doca_gpu_dev_verbs_addr, int*);
GDAKI_DOCA_COVER(DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD)
GDAKI_DOCA_COVER(DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_CTA, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD)
GDAKI_DOCA_COVER(DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD)
GDAKI_DOCA_COVER(DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP)
GDAKI_DOCA_COVER(DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_CTA, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP)
GDAKI_DOCA_COVER(DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP)

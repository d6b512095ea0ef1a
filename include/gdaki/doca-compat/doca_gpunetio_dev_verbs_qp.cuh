/*
 * doca_gpunetio_dev_verbs_qp.cuh: DOCA GPUNetIO's QP building blocks (reserve WQE slots,
 * find a slot, prepare a WQE in it, mark WQEs ready, submit) and QP getters, over gdaki's
 * posting core (gdaki/device/sq.hpp, wqe.hpp). Follows the public DOCA GPUNetIO
 * documentation and the open rebuild's doca_gpunetio_dev_verbs_qp.cuh (names, template
 * parameters, argument order); written anew for gdaki.
 *
 * Indexes are free-running 64-bit WQEBB counts (DOCA's WQE indexes: every WQE the
 * one-sided calls build is one 64-byte WQEBB). Keys passed here are big-endian, as in the
 * doca_gpu_dev_verbs_addr of the one-sided calls. ctrl_flags is the WQE's fm_ce_se byte
 * (DOCA_GPUNETIO_IB_MLX5_WQE_CTRL_*).
 */
#ifndef GDAKI_DOCA_GPUNETIO_DEV_VERBS_QP_CUH
#define GDAKI_DOCA_GPUNETIO_DEV_VERBS_QP_CUH

#include "doca_gpunetio_dev_verbs_common.cuh"
#include "gdaki/device/sq.hpp"
#include "gdaki/device/wqe.hpp"

GDAKI_DOCA_DEV inline uint32_t doca_gpu_dev_verbs_qp_get_qpn(const struct doca_gpu_dev_verbs_qp *qp) {
  return qp->qp->qpn;
}
GDAKI_DOCA_DEV inline uint32_t doca_gpu_dev_verbs_qp_get_sq_wqe_num(const struct doca_gpu_dev_verbs_qp *qp) {
  return qp->sq_wqe_num;
}
/* Index of the next WQE slot not yet handed out. */
GDAKI_DOCA_DEV inline uint64_t doca_gpu_dev_verbs_qp_get_sq_wqe_pi(const struct doca_gpu_dev_verbs_qp *qp) {
  return gdaki::dev::arch::load_relaxed(&qp->qp->sq_reserved);
}

/* Hands out count consecutive WQE slots, waiting until the NIC has finished with them.
 * Returns the first slot's index. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>
GDAKI_DOCA_DEV inline uint64_t doca_gpu_dev_verbs_reserve_wq_slots(struct doca_gpu_dev_verbs_qp *qp, uint32_t count) {
  uint64_t start = 0;
  (void)gdaki::dev::sq_reserve_space<resource_sharing_mode == DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE>(
      *qp->qp, count, &start, gdaki::dev::wait_forever);  // an unbounded wait cannot time out
  return start;
}

GDAKI_DOCA_DEV inline struct doca_gpu_dev_verbs_wqe *doca_gpu_dev_verbs_get_wqe_ptr(struct doca_gpu_dev_verbs_qp *qp,
                                                                                   uint64_t wqe_idx) {
  const uint64_t slot = wqe_idx & (gdaki::dev::sq_wqebbs(*qp->qp) - 1);
  return reinterpret_cast<struct doca_gpu_dev_verbs_wqe *>(qp->qp->sq_buf + slot * 64);
}

/* RDMA WRITE (opcode RDMA_WRITE) or WRITE with immediate (RDMA_WRITE_IMM, imm in wire order)
 * of size bytes from laddr/lkey to raddr/rkey. wqe_ptr must be get_wqe_ptr(qp, wqe_idx). */
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_wqe_prepare_write(struct doca_gpu_dev_verbs_qp *qp,
                                                                struct doca_gpu_dev_verbs_wqe *wqe_ptr, uint64_t wqe_idx,
                                                                uint32_t opcode, uint32_t ctrl_flags, uint32_t imm,
                                                                uint64_t raddr, uint32_t rkey, uint64_t laddr,
                                                                uint32_t lkey, uint32_t size) {
  (void)wqe_ptr;  // gdaki's builders address the slot by index
  namespace d = gdaki_doca_detail;
  const gdaki::dev::sge g{laddr, size, d::bswap32(lkey)};
  const uint8_t flags = static_cast<uint8_t>(ctrl_flags);
  if (opcode == DOCA_GPUNETIO_IB_MLX5_OPCODE_RDMA_WRITE_IMM) {
    gdaki::dev::prepare_write_imm(*qp->qp, wqe_idx, raddr, d::bswap32(rkey), &g, 1, imm, flags);  // imm as the caller laid it out (wire order)
  } else {
    gdaki::dev::prepare_write(*qp->qp, wqe_idx, raddr, d::bswap32(rkey), &g, size != 0 ? 1u : 0u, flags);
  }
}

/* Inline RDMA WRITE of size <= DOCA_GPUNETIO_VERBS_MAX_INLINE_SIZE bytes copied from data
 * into the WQE (one WQEBB). */
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_wqe_prepare_write_inl(struct doca_gpu_dev_verbs_qp *qp,
                                                                    struct doca_gpu_dev_verbs_wqe *wqe_ptr,
                                                                    uint64_t wqe_idx, uint32_t ctrl_flags,
                                                                    uint64_t raddr, uint32_t rkey, const void *data,
                                                                    uint32_t size) {
  (void)wqe_ptr;
  gdaki::dev::prepare_write_inline(*qp->qp, wqe_idx, raddr, gdaki_doca_detail::bswap32(rkey), data, size,
                                   static_cast<uint8_t>(ctrl_flags));
}

GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_wqe_prepare_read(struct doca_gpu_dev_verbs_qp *qp,
                                                               struct doca_gpu_dev_verbs_wqe *wqe_ptr, uint64_t wqe_idx,
                                                               uint32_t ctrl_flags, uint64_t raddr, uint32_t rkey,
                                                               uint64_t laddr, uint32_t lkey, uint32_t size) {
  (void)wqe_ptr;
  namespace d = gdaki_doca_detail;
  const gdaki::dev::sge g{laddr, size, d::bswap32(lkey)};
  gdaki::dev::prepare_read(*qp->qp, wqe_idx, raddr, d::bswap32(rkey), &g, size != 0 ? 1u : 0u,
                           static_cast<uint8_t>(ctrl_flags));
}

/* 8-byte ATOMIC_FA (add = add_or_swap) or ATOMIC_CS (swap = add_or_swap, compare); the old
 * remote value lands at laddr. size must be 8. */
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_wqe_prepare_atomic(struct doca_gpu_dev_verbs_qp *qp,
                                                                 struct doca_gpu_dev_verbs_wqe *wqe_ptr,
                                                                 uint64_t wqe_idx, uint32_t opcode, uint32_t ctrl_flags,
                                                                 uint64_t raddr, uint32_t rkey, uint64_t laddr,
                                                                 uint32_t lkey, uint32_t size, uint64_t add_or_swap,
                                                                 uint64_t compare) {
  (void)wqe_ptr;
  namespace d = gdaki_doca_detail;
  const gdaki::dev::sge g{laddr, size, d::bswap32(lkey)};
  const uint8_t flags = static_cast<uint8_t>(ctrl_flags);
  if (opcode == DOCA_GPUNETIO_IB_MLX5_OPCODE_ATOMIC_CS) {
    gdaki::dev::prepare_atomic_cs(*qp->qp, wqe_idx, raddr, d::bswap32(rkey), compare, add_or_swap, g, flags);
  } else {
    gdaki::dev::prepare_atomic_fa(*qp->qp, wqe_idx, raddr, d::bswap32(rkey), add_or_swap, g, flags);
  }
}

GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_wqe_prepare_nop(struct doca_gpu_dev_verbs_qp *qp,
                                                              struct doca_gpu_dev_verbs_wqe *wqe_ptr, uint64_t wqe_idx,
                                                              uint32_t ctrl_flags) {
  (void)wqe_ptr;
  gdaki::dev::prepare_nop(*qp->qp, wqe_idx, static_cast<uint8_t>(ctrl_flags));
}

/* Declares WQEs from_idx..to_idx (inclusive) written. Shared modes publish in reservation
 * order (waiting for earlier reservations to be marked first). */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_mark_wqes_ready(struct doca_gpu_dev_verbs_qp *qp, uint64_t from_idx,
                                                              uint64_t to_idx) {
  const uint32_t n = static_cast<uint32_t>(to_idx - from_idx + 1);
  if constexpr (resource_sharing_mode == DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE) {
    gdaki::dev::arch::store_release(&qp->qp->sq_ready, from_idx + n);  // sole poster: ready is ours alone
  } else {
    gdaki::dev::sq_mark_ready(*qp->qp, from_idx, n);
  }
}

/* Rings the doorbell for every WQE marked ready (gdaki rings up to the ready count, which
 * covers prod_index). The NIC handler is the one chosen at export. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_sync_scope sync_scope = DOCA_GPUNETIO_VERBS_SYNC_SCOPE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_submit(struct doca_gpu_dev_verbs_qp *qp, uint64_t prod_index) {
  (void)prod_index;
  gdaki::dev::sq_submit<resource_sharing_mode != DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE>(*qp->qp);
}

#endif /* GDAKI_DOCA_GPUNETIO_DEV_VERBS_QP_CUH */

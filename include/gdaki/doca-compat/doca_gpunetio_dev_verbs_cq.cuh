/*
 * doca_gpunetio_dev_verbs_cq.cuh: DOCA GPUNetIO's completion calls (poll one index, poll
 * and wait, wait for a ticket or for everything) over gdaki's send-CQ poller
 * (gdaki/device/sq.hpp). Follows the public DOCA GPUNetIO documentation and the open
 * rebuild's doca_gpunetio_dev_verbs_cq.cuh (names, template parameters, return values);
 * written anew for gdaki.
 *
 * Results: 0 when the WQE at the index (and every earlier one) completed, EBUSY when it
 * has not yet, a negative errno (-EIO) when it or an earlier WQE of the QP completed in
 * error (the QP is then in ERR; doca_gpu_verbs_query_last_error gives the syndrome).
 * gdaki completes in order: an index is done once every WQE up to it is.
 */
#ifndef GDAKI_DOCA_GPUNETIO_DEV_VERBS_CQ_CUH
#define GDAKI_DOCA_GPUNETIO_DEV_VERBS_CQ_CUH

#include "doca_gpunetio_dev_verbs_common.cuh"
#include "gdaki/device/ops.hpp"

GDAKI_DOCA_DEV inline struct doca_gpu_dev_verbs_cq *doca_gpu_dev_verbs_qp_get_cq_sq(struct doca_gpu_dev_verbs_qp *qp) {
  return &qp->cq_sq;
}
template <enum doca_gpu_dev_verbs_qp_type qp_type = DOCA_GPUNETIO_VERBS_QP_SQ>
GDAKI_DOCA_DEV inline struct doca_gpu_dev_verbs_cq *doca_gpu_dev_verbs_qp_get_cq(struct doca_gpu_dev_verbs_qp *qp) {
  static_assert(qp_type == DOCA_GPUNETIO_VERBS_QP_SQ, "only the send CQ is polled from the device");
  return &qp->cq_sq;
}
GDAKI_DOCA_DEV inline uint32_t doca_gpu_dev_verbs_cq_get_cqn(const struct doca_gpu_dev_verbs_cq *cq) {
  return cq->cq->cqn;
}
GDAKI_DOCA_DEV inline uint32_t doca_gpu_dev_verbs_cqe_idx_inc_mask(uint32_t cqe_idx, uint32_t increment) {
  return (cqe_idx + increment) & DOCA_GPUNETIO_VERBS_CQE_CI_MASK;
}

/* Non-blocking: has the WQE at cons_index completed? 0, EBUSY or a negative errno. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>
GDAKI_DOCA_DEV inline int doca_gpu_dev_verbs_poll_one_cq_device_at(struct doca_gpu_dev_verbs_cq *cq,
                                                                   uint64_t cons_index) {
  const int r = gdaki_doca_detail::poll_result(gdaki::dev::test(*cq->qp, gdaki_doca_detail::gdaki_ticket(cons_index)));
  gdaki_doca_detail::after_poll(r == EBUSY);
  return r;
}
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_qp_type qp_type = DOCA_GPUNETIO_VERBS_QP_SQ,
          enum doca_gpu_dev_verbs_cq_type cq_type = DOCA_GPUNETIO_VERBS_CQ_UNKNOWN>
GDAKI_DOCA_DEV inline int doca_gpu_dev_verbs_poll_one_cq_at(struct doca_gpu_dev_verbs_qp *qp, uint64_t cons_index) {
  return doca_gpu_dev_verbs_poll_one_cq_device_at<resource_sharing_mode>(doca_gpu_dev_verbs_qp_get_cq<qp_type>(qp),
                                                                         cons_index);
}

/* Blocking: waits until the WQE at cons_index completed. 0 or a negative errno. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>
GDAKI_DOCA_DEV inline int doca_gpu_dev_verbs_poll_cq_device_at(struct doca_gpu_dev_verbs_cq *cq, uint64_t cons_index) {
  return gdaki_doca_detail::poll_result(gdaki::dev::wait(*cq->qp, gdaki_doca_detail::gdaki_ticket(cons_index)));
}
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_qp_type qp_type = DOCA_GPUNETIO_VERBS_QP_SQ,
          enum doca_gpu_dev_verbs_cq_type cq_type = DOCA_GPUNETIO_VERBS_CQ_UNKNOWN>
GDAKI_DOCA_DEV inline int doca_gpu_dev_verbs_poll_cq_at(struct doca_gpu_dev_verbs_qp *qp, uint64_t cons_index) {
  return doca_gpu_dev_verbs_poll_cq_device_at<resource_sharing_mode>(doca_gpu_dev_verbs_qp_get_cq<qp_type>(qp),
                                                                     cons_index);
}

/* Non-blocking drain: consumes every CQE waiting on qp's send CQ; returns how many. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>
GDAKI_DOCA_DEV inline uint32_t doca_gpu_dev_verbs_poll_cq(struct doca_gpu_dev_verbs_cq *cq) {
  return gdaki::dev::sq_progress(*cq->qp);
}

/* Waits for the operation whose ticket is given (0, or a negative errno). */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO>
GDAKI_DOCA_DEV inline int doca_gpu_dev_verbs_wait(struct doca_gpu_dev_verbs_qp *qp, doca_gpu_dev_verbs_ticket_t ticket) {
  return doca_gpu_dev_verbs_poll_cq_at<resource_sharing_mode>(qp, ticket);
}
/* Waits for everything posted on qp so far (a signalled NOP, then its completion). */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO>
GDAKI_DOCA_DEV inline int doca_gpu_dev_verbs_wait(struct doca_gpu_dev_verbs_qp *qp) {
  return gdaki_doca_detail::poll_result(
      gdaki::dev::quiet<gdaki::dev::scope_thread, gdaki_doca_detail::sharing_of<resource_sharing_mode>>(*qp->qp));
}

#endif /* GDAKI_DOCA_GPUNETIO_DEV_VERBS_CQ_CUH */

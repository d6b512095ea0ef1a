/*
 * doca_gpunetio_dev_verbs_counter.cuh: DOCA GPUNetIO's counter calls (put_counter,
 * signal_counter): an operation on the main QP, then a fetch-add on a counter through the
 * companion QP once that operation has completed locally. Follows the public DOCA GPUNetIO
 * documentation (names, arguments, the main + companion QP pair); written anew for gdaki.
 *
 * Behavioural difference: DOCA has the NIC order the counter after the operation (a WAIT
 * WQE on the companion QP), so the call returns at once; gdaki's soft NIC has no
 * cross-QP WAIT, so the calling thread waits for the operation's completion and then
 * posts the counter update. The result seen by the peer is the same: the counter moves
 * only after the data was placed. docs/doca-compat.md.
 */
#ifndef GDAKI_DOCA_GPUNETIO_DEV_VERBS_COUNTER_CUH
#define GDAKI_DOCA_GPUNETIO_DEV_VERBS_COUNTER_CUH

#include "doca_gpunetio_dev_verbs_onesided.cuh"

/* Put on qp; when it completed, counter_raddr += counter_val through companion_qp (old
 * value to counter_laddr). *out_ticket: the counter update's ticket on companion_qp. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_put_counter(
    struct doca_gpu_dev_verbs_qp *qp, struct doca_gpu_dev_verbs_addr raddr, struct doca_gpu_dev_verbs_addr laddr,
    size_t size, struct doca_gpu_dev_verbs_qp *companion_qp, struct doca_gpu_dev_verbs_addr counter_raddr,
    struct doca_gpu_dev_verbs_addr counter_laddr, uint64_t counter_val, doca_gpu_dev_verbs_ticket_t *out_ticket) {
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_put<resource_sharing_mode, nic_handler>(qp, raddr, laddr, size, &t);
  if (doca_gpu_dev_verbs_poll_cq_at<resource_sharing_mode>(qp, t) != 0) {
    *out_ticket = t;  // the put failed: no counter update (query_last_error says why)
    return;
  }
  gdaki_doca_dev_verbs_atomic_fetch_add<resource_sharing_mode, nic_handler>(companion_qp, counter_raddr, counter_laddr,
                                                                            counter_val, out_ticket);
}

/* Signal (fetch-add sig_val at sig_raddr) on qp; when it completed, the counter update
 * through companion_qp. */
template <enum doca_gpu_dev_verbs_signal_op sig_op,
          enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_signal_counter(
    struct doca_gpu_dev_verbs_qp *qp, struct doca_gpu_dev_verbs_addr sig_raddr,
    struct doca_gpu_dev_verbs_addr sig_laddr, uint64_t sig_val, struct doca_gpu_dev_verbs_qp *companion_qp,
    struct doca_gpu_dev_verbs_addr counter_raddr, struct doca_gpu_dev_verbs_addr counter_laddr, uint64_t counter_val,
    doca_gpu_dev_verbs_ticket_t *out_ticket) {
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_signal<sig_op, resource_sharing_mode, nic_handler>(qp, sig_raddr, sig_laddr, sig_val, &t);
  if (doca_gpu_dev_verbs_poll_cq_at<resource_sharing_mode>(qp, t) != 0) {
    *out_ticket = t;
    return;
  }
  gdaki_doca_dev_verbs_atomic_fetch_add<resource_sharing_mode, nic_handler>(companion_qp, counter_raddr, counter_laddr,
                                                                            counter_val, out_ticket);
}

#endif /* GDAKI_DOCA_GPUNETIO_DEV_VERBS_COUNTER_CUH */

/*
 * doca_gpunetio_dev_verbs_onesided.cuh: DOCA GPUNetIO's one-sided calls (put, p,
 * put_signal, p_signal, signal, get, get_wait) over gdaki's device API
 * (gdaki/device/ops.hpp), plus the atomics gdaki adds under gdaki_ names. Follows the
 * public DOCA GPUNetIO documentation and the open rebuild's
 * doca_gpunetio_dev_verbs_onesided.cuh (names, template parameters and their order,
 * argument lists, ticket semantics); written anew for gdaki.
 *
 * Template parameters: the resource-sharing mode (EXCLUSIVE: one thread, or one warp in
 * WARP scope, posts on the QP; CTA: threads of one block; GPU: any thread), the NIC
 * handler (fixed when the QP was exported; the parameter is accepted and the export's
 * choice is used) and the execution scope (THREAD: each thread posts its own operation;
 * WARP: every lane of the warp calls, convergent, each lane's operation in one
 * reservation, one doorbell).
 * Tickets: *out_ticket is the index of the operation's last WQE (DOCA's rule), to pass to
 * doca_gpu_dev_verbs_wait / poll_cq_at / poll_one_cq_at. Completions are in order, so a
 * ticket also covers every earlier operation of the QP.
 * Keys in doca_gpu_dev_verbs_addr are big-endian (htobe32), as in DOCA.
 */
#ifndef GDAKI_DOCA_GPUNETIO_DEV_VERBS_ONESIDED_CUH
#define GDAKI_DOCA_GPUNETIO_DEV_VERBS_ONESIDED_CUH

#include "doca_gpunetio_dev_verbs_common.cuh"
#include "doca_gpunetio_dev_verbs_cq.cuh"
#include "doca_gpunetio_dev_verbs_qp.cuh"

namespace gdaki_doca_detail {
// A call that could not post (a bad size: gdaki checks what DOCA only asserts) leaves a
// ticket that is already settled, so waiting on it returns at once.
GDAKI_HD inline void set_ticket(const gdaki::dev::qp_handle &qp, gdaki::status st, uint64_t t,
                                doca_gpu_dev_verbs_ticket_t *out) {
  if (out != nullptr) *out = doca_ticket(st == gdaki::status::ok ? t : gdaki::dev::arch::load_acquire(&qp.sq_ready));
}
GDAKI_HD constexpr uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
}  // namespace gdaki_doca_detail

#define GDAKI_DOCA_SHARING(m) gdaki_doca_detail::sharing_of<m>
#define GDAKI_DOCA_SCOPE(s) typename gdaki_doca_detail::scope_of<s>::type

/* ---- put: RDMA WRITE of size bytes (split every 1 GiB) ---------------------------------- */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_put(struct doca_gpu_dev_verbs_qp *qp, struct doca_gpu_dev_verbs_addr raddr,
                                                  struct doca_gpu_dev_verbs_addr laddr, size_t size,
                                                  doca_gpu_dev_verbs_ticket_t *out_ticket) {
  namespace d = gdaki_doca_detail;
  uint64_t t = 0;
  const gdaki::status st = gdaki::dev::put<GDAKI_DOCA_SCOPE(exec_scope), GDAKI_DOCA_SHARING(resource_sharing_mode)>(
      *qp->qp, d::remote(raddr), d::local(laddr), size, &t);
  d::set_ticket(*qp->qp, st, t, out_ticket);
}
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_put(struct doca_gpu_dev_verbs_qp *qp, struct doca_gpu_dev_verbs_addr raddr,
                                                  struct doca_gpu_dev_verbs_addr laddr, size_t size) {
  doca_gpu_dev_verbs_ticket_t t;
  doca_gpu_dev_verbs_put<resource_sharing_mode, nic_handler, exec_scope>(qp, raddr, laddr, size, &t);
}

/* ---- p: inline RDMA WRITE of one value (sizeof(T) <= the QP's inline limit) ------------- */
template <typename T,
          enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_p(struct doca_gpu_dev_verbs_qp *qp, struct doca_gpu_dev_verbs_addr raddr,
                                                T value, doca_gpu_dev_verbs_ticket_t *out_ticket) {
  namespace d = gdaki_doca_detail;
  uint64_t t = 0;
  const gdaki::status st = gdaki::dev::p<GDAKI_DOCA_SCOPE(exec_scope), GDAKI_DOCA_SHARING(resource_sharing_mode)>(
      *qp->qp, d::remote(raddr), &value, static_cast<uint32_t>(sizeof(T)), &t);
  d::set_ticket(*qp->qp, st, t, out_ticket);
}
template <typename T,
          enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_p(struct doca_gpu_dev_verbs_qp *qp, struct doca_gpu_dev_verbs_addr raddr,
                                                T value) {
  doca_gpu_dev_verbs_ticket_t t;
  doca_gpu_dev_verbs_p<T, resource_sharing_mode, nic_handler, exec_scope>(qp, raddr, value, &t);
}

/* ---- signal: 8-byte fetch-add of sig_val at sig_raddr; the old value lands at sig_laddr -- */
template <enum doca_gpu_dev_verbs_signal_op sig_op,
          enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_signal(struct doca_gpu_dev_verbs_qp *qp,
                                                     struct doca_gpu_dev_verbs_addr sig_raddr,
                                                     struct doca_gpu_dev_verbs_addr sig_laddr, uint64_t sig_val,
                                                     doca_gpu_dev_verbs_ticket_t *out_ticket) {
  static_assert(sig_op == DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, "DOCA defines one signal operation: add");
  namespace d = gdaki_doca_detail;
  uint64_t t = 0;
  const gdaki::status st =
      gdaki::dev::atomic_fetch_add<GDAKI_DOCA_SCOPE(exec_scope), GDAKI_DOCA_SHARING(resource_sharing_mode)>(
          *qp->qp, d::remote(sig_raddr), sig_val, d::local(sig_laddr), &t);
  d::set_ticket(*qp->qp, st, t, out_ticket);
}

/* ---- put_signal: the put, then the signal on the same QP (never visible before the data:
 * the responder executes one QP's WQEs in order). WARP scope: every lane's put, then one
 * signal from lane 0, as in DOCA. ----------------------------------------------------------- */
template <enum doca_gpu_dev_verbs_signal_op sig_op,
          enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_put_signal(struct doca_gpu_dev_verbs_qp *qp,
                                                         struct doca_gpu_dev_verbs_addr raddr,
                                                         struct doca_gpu_dev_verbs_addr laddr, size_t size,
                                                         struct doca_gpu_dev_verbs_addr sig_raddr,
                                                         struct doca_gpu_dev_verbs_addr sig_laddr, uint64_t sig_val,
                                                         doca_gpu_dev_verbs_ticket_t *out_ticket) {
  static_assert(sig_op == DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, "DOCA defines one signal operation: add");
  namespace d = gdaki_doca_detail;
  using scope = GDAKI_DOCA_SCOPE(exec_scope);
  constexpr gdaki::dev::sharing S = GDAKI_DOCA_SHARING(resource_sharing_mode);
  uint64_t tp = 0, ts = 0;
  gdaki::status st = gdaki::dev::put<scope, S>(*qp->qp, d::remote(raddr), d::local(laddr), size, &tp);
  // In a warp every lane takes part in the signal's collective post; only lane 0 posts one.
  const bool signaller = exec_scope == DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD || gdaki::dev::arch::lane_id() == 0;
  const uint32_t flags = signaller && st == gdaki::status::ok ? gdaki::dev::op_flags::none : gdaki::dev::op_flags::skip;
  const gdaki::status ss =
      gdaki::dev::atomic_fetch_add<scope, S>(*qp->qp, d::remote(sig_raddr), sig_val, d::local(sig_laddr), &ts, flags);
  if (st == gdaki::status::ok) st = ss;
  d::set_ticket(*qp->qp, st, d::max_u64(tp, ts), out_ticket);
}
template <enum doca_gpu_dev_verbs_signal_op sig_op,
          enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_put_signal(struct doca_gpu_dev_verbs_qp *qp,
                                                         struct doca_gpu_dev_verbs_addr raddr,
                                                         struct doca_gpu_dev_verbs_addr laddr, size_t size,
                                                         struct doca_gpu_dev_verbs_addr sig_raddr,
                                                         struct doca_gpu_dev_verbs_addr sig_laddr, uint64_t sig_val) {
  doca_gpu_dev_verbs_ticket_t t;
  doca_gpu_dev_verbs_put_signal<sig_op, resource_sharing_mode, nic_handler, exec_scope>(qp, raddr, laddr, size,
                                                                                        sig_raddr, sig_laddr, sig_val, &t);
}

/* ---- p_signal: inline put of one value, then the signal (DOCA's parameter order: the
 * execution scope comes before the sharing mode here) ----------------------------------------- */
template <typename T, enum doca_gpu_dev_verbs_signal_op sig_op,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD,
          enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_p_signal(struct doca_gpu_dev_verbs_qp *qp,
                                                       struct doca_gpu_dev_verbs_addr raddr, T value,
                                                       struct doca_gpu_dev_verbs_addr sig_raddr,
                                                       struct doca_gpu_dev_verbs_addr sig_laddr, uint64_t sig_val,
                                                       doca_gpu_dev_verbs_ticket_t *out_ticket) {
  static_assert(sig_op == DOCA_GPUNETIO_VERBS_SIGNAL_OP_ADD, "DOCA defines one signal operation: add");
  namespace d = gdaki_doca_detail;
  using scope = GDAKI_DOCA_SCOPE(exec_scope);
  constexpr gdaki::dev::sharing S = GDAKI_DOCA_SHARING(resource_sharing_mode);
  uint64_t tp = 0, ts = 0;
  gdaki::status st =
      gdaki::dev::p<scope, S>(*qp->qp, d::remote(raddr), &value, static_cast<uint32_t>(sizeof(T)), &tp);
  const bool signaller = exec_scope == DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD || gdaki::dev::arch::lane_id() == 0;
  const uint32_t flags = signaller && st == gdaki::status::ok ? gdaki::dev::op_flags::none : gdaki::dev::op_flags::skip;
  const gdaki::status ss =
      gdaki::dev::atomic_fetch_add<scope, S>(*qp->qp, d::remote(sig_raddr), sig_val, d::local(sig_laddr), &ts, flags);
  if (st == gdaki::status::ok) st = ss;
  d::set_ticket(*qp->qp, st, d::max_u64(tp, ts), out_ticket);
}

/* ---- get: RDMA READ of size bytes from raddr into laddr ---------------------------------- */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void doca_gpu_dev_verbs_get(struct doca_gpu_dev_verbs_qp *qp, struct doca_gpu_dev_verbs_addr raddr,
                                                  struct doca_gpu_dev_verbs_addr laddr, size_t size,
                                                  doca_gpu_dev_verbs_ticket_t *out_ticket) {
  namespace d = gdaki_doca_detail;
  uint64_t t = 0;
  const gdaki::status st = gdaki::dev::get<GDAKI_DOCA_SCOPE(exec_scope), GDAKI_DOCA_SHARING(resource_sharing_mode)>(
      *qp->qp, d::local(laddr), d::remote(raddr), size, &t);
  d::set_ticket(*qp->qp, st, t, out_ticket);
}
/* The get, then a wait for it: the data is in laddr on return. 0 or a negative errno. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline int doca_gpu_dev_verbs_get_wait(struct doca_gpu_dev_verbs_qp *qp,
                                                      struct doca_gpu_dev_verbs_addr raddr,
                                                      struct doca_gpu_dev_verbs_addr laddr, size_t size) {
  doca_gpu_dev_verbs_ticket_t t = 0;
  doca_gpu_dev_verbs_get<resource_sharing_mode, nic_handler, exec_scope>(qp, raddr, laddr, size, &t);
  return doca_gpu_dev_verbs_poll_cq_at<resource_sharing_mode>(qp, t);
}

/* ---- gdaki extensions -------------------------------------------------------------------- */
/* A fenced NOP: later operations of the QP start only after earlier READs and atomics
 * completed. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>
GDAKI_DOCA_DEV inline void gdaki_doca_dev_verbs_fence(struct doca_gpu_dev_verbs_qp *qp) {
  (void)gdaki::dev::fence<gdaki::dev::scope_thread, GDAKI_DOCA_SHARING(resource_sharing_mode)>(*qp->qp);
}
/* 8-byte fetch-add: the old value of raddr lands at laddr when the ticket completes. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void gdaki_doca_dev_verbs_atomic_fetch_add(struct doca_gpu_dev_verbs_qp *qp,
                                                                 struct doca_gpu_dev_verbs_addr raddr,
                                                                 struct doca_gpu_dev_verbs_addr laddr, uint64_t add,
                                                                 doca_gpu_dev_verbs_ticket_t *out_ticket) {
  namespace d = gdaki_doca_detail;
  uint64_t t = 0;
  const gdaki::status st =
      gdaki::dev::atomic_fetch_add<GDAKI_DOCA_SCOPE(exec_scope), GDAKI_DOCA_SHARING(resource_sharing_mode)>(
          *qp->qp, d::remote(raddr), add, d::local(laddr), &t);
  d::set_ticket(*qp->qp, st, t, out_ticket);
}
/* 8-byte compare-and-swap: swap is stored when raddr holds compare; the old value lands at
 * laddr when the ticket completes. */
template <enum doca_gpu_dev_verbs_resource_sharing_mode resource_sharing_mode =
              DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU,
          enum doca_gpu_dev_verbs_nic_handler nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_AUTO,
          enum doca_gpu_dev_verbs_exec_scope exec_scope = DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>
GDAKI_DOCA_DEV inline void gdaki_doca_dev_verbs_atomic_compare_swap(struct doca_gpu_dev_verbs_qp *qp,
                                                                    struct doca_gpu_dev_verbs_addr raddr,
                                                                    struct doca_gpu_dev_verbs_addr laddr,
                                                                    uint64_t compare, uint64_t swap,
                                                                    doca_gpu_dev_verbs_ticket_t *out_ticket) {
  namespace d = gdaki_doca_detail;
  uint64_t t = 0;
  const gdaki::status st =
      gdaki::dev::atomic_compare_swap<GDAKI_DOCA_SCOPE(exec_scope), GDAKI_DOCA_SHARING(resource_sharing_mode)>(
          *qp->qp, d::remote(raddr), compare, swap, d::local(laddr), &t);
  d::set_ticket(*qp->qp, st, t, out_ticket);
}

#undef GDAKI_DOCA_SHARING
#undef GDAKI_DOCA_SCOPE

#endif /* GDAKI_DOCA_GPUNETIO_DEV_VERBS_ONESIDED_CUH */

// Direct verbs for the soft device: mlx5dv_query_device and mlx5dv_init_obj hand out the
// soft NIC's real rings (the same ones post_send writes through the data path): the SQ
// and RQ buffers, the QP doorbell record, the doorbell register (UAR offset 0x800, the
// BlueFlame register), the CQE ring and the CQ doorbell record. A program that writes its
// own mlx5 WQEs (the GDAKI way) then runs on the soft NIC unchanged: the NIC reads the
// doorbell record, executes the WQEs and writes CQEs into the CQ ring (docs/soft-nic.md).
//
// Limits (docs/verbs.md): an ibv_cq is a view over per-QP CQs, so mlx5dv_init_obj on a CQ
// needs it to serve exactly one side of one QP (create the QP first); and a QP driven
// directly must not also be posted to with ibv_post_send (the two posters would each
// think they own the ring).
#include <infiniband/mlx5dv.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "real_verbs.hpp"
#include "soft_verbs.hpp"

using namespace gdaki::ibverbs;

namespace {

int init_qp(ibv_qp* in, mlx5dv_qp* out) {
  qp_state* st = qp_of(in)->st;
  std::lock_guard<std::mutex> lock(st->send_mu);
  const gdaki::dev::qp_handle& h = *st->h;
  // The program rings this QP's doorbell itself from now on, not through the host hook:
  // exporting it once more without the hook tells the soft NIC to keep polling it while
  // idle (engine::note_hookless_ringer). The handle itself is the one post_send uses.
  gdaki::verbs::qp_export_options eo;
  eo.srq = st->srq != nullptr ? st->srq->obj.host_handle() : nullptr;
  eo.host_hook = false;
  try {
    (void)st->q.export_handle(st->hs.get(), st->hr.get(), eo);
  } catch (const gdaki::error& e) {
    return soft_fail("mlx5dv_init_obj", e.code(), e.what());
  }
  std::memset(out, 0, sizeof *out);
  out->dbrec = reinterpret_cast<__be32*>(h.dbrec);
  out->sq.buf = h.sq_buf;
  out->sq.wqe_cnt = gdaki::dev::sq_wqebbs(h);
  out->sq.stride = 64;
  out->rq.buf = h.rq_buf;
  out->rq.wqe_cnt = gdaki::dev::rq_wqes(h);
  out->rq.stride = 1u << h.log_rq_stride;
  // The 8-byte doorbell register; the soft NIC reads WQEs from the ring, so a BlueFlame
  // copy there is accepted and ignored.
  out->bf.reg = h.uar_db;
  out->bf.size = h.bf_size;
  out->sqn = h.qpn;
  out->rqn = h.qpn;
  return 0;
}

int init_cq(ibv_cq* in, mlx5dv_cq* out) {
  cq_state* cq = cq_of(in)->st;
  std::lock_guard<std::mutex> lock(cq->mu);
  if (cq->members.size() != 1) {
    return soft_fail("mlx5dv_init_obj", gdaki::status::invalid,
                     "cq " + std::to_string(in->handle) + " serves " + std::to_string(cq->members.size()) +
                         " QP sides; on the soft device a CQ given to mlx5dv must serve exactly one side of one "
                         "QP, created before this call");
  }
  const cq_member& m = cq->members[0];
  const gdaki::dev::cq_handle& h = m.send ? *m.qp->hs : *m.qp->hr;
  std::memset(out, 0, sizeof *out);
  out->buf = h.cqes;
  out->dbrec = reinterpret_cast<__be32*>(h.dbrec);
  out->cqe_cnt = gdaki::dev::cqe_count(h);
  out->cqe_size = 64;
  out->cq_uar = nullptr;  // no arming: the soft NIC has no CQ events (docs/soft-nic.md)
  out->cqn = h.cqn;
  return 0;
}

}  // namespace

extern "C" {

int mlx5dv_query_device(ibv_context* c, mlx5dv_context* out) {
  if (is_soft(c)) {
    // Only the base fields: no compression, striding RQ, tunnels, DC, crypto, ... (their
    // comp_mask bits are cleared, which is how a device says it lacks them).
    out->version = 0;
    out->flags = MLX5DV_CONTEXT_FLAGS_CQE_V1;
    out->comp_mask = 0;
    return 0;
  }
  static const auto real_fn = real_mlx5<int (*)(ibv_context*, mlx5dv_context*)>("mlx5dv_query_device", "MLX5_1.0");
  if (real_fn == nullptr) return EOPNOTSUPP;
  return real_fn(c, out);
}

int mlx5dv_init_obj(mlx5dv_obj* obj, uint64_t type) {
  const bool ours = ((type & MLX5DV_OBJ_QP) && is_soft(obj->qp.in->context)) ||
                    ((type & MLX5DV_OBJ_CQ) && is_soft(obj->cq.in->context));
  if (!ours) {
    static const auto real_fn = real_mlx5<int (*)(mlx5dv_obj*, uint64_t)>("mlx5dv_init_obj", "MLX5_1.2");
    if (real_fn == nullptr) return EOPNOTSUPP;
    return real_fn(obj, type);
  }
  if (type & ~static_cast<uint64_t>(MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ)) {
    return soft_not_supported("mlx5dv_init_obj for SRQ, RWQ, DM, AH or PD objects");
  }
  if (type & MLX5DV_OBJ_QP) {
    if (const int rc = init_qp(obj->qp.in, obj->qp.out); rc != 0) return rc;
  }
  if (type & MLX5DV_OBJ_CQ) {
    if (const int rc = init_cq(obj->cq.in, obj->cq.out); rc != 0) return rc;
  }
  return 0;
}

}  // extern "C"

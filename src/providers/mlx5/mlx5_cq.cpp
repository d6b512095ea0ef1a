// Completion queues of the mlx5 provider as DEVX objects: the CQE ring and the doorbell
// record live in memory gdaki places and initialises itself (every op_own 0xF1 before the
// NIC sees the ring), registered as umems, then CREATE_CQ with 64-byte CQEs and
// overrun-ignore as the cq_init asks.
#include <bit>
#include <cerrno>

#include "core/cq_clean.hpp"
#include "gdaki/prm/cqe.hpp"
#include "mlx5_objects.hpp"
#include "mlx5_ops.hpp"
#include "mlx5_prm_cmd.hpp"

namespace gdaki::mlx5 {

namespace {

void release_cq(cq_obj* c) {
  const mlx5dv_api* dv = c->dev->dv;
  if (c->obj != nullptr) dv->devx_obj_destroy(c->obj);
  if (c->ring_umem != nullptr) dv->devx_umem_dereg(c->ring_umem);
  if (c->dbr_umem != nullptr) dv->devx_umem_dereg(c->dbr_umem);
  delete c;
}

status need_devx(device_obj* d, const char* what, std::string* why) {
  if (d->devx) return status::ok;
  *why = std::string(what) + " needs DEVX, which this device context does not allow (mlx5dv_open_device with "
                             "MLX5DV_CONTEXT_FLAGS_DEVX failed: old kernel, or a container without it)";
  return status::not_supported;
}

}  // namespace

status create_cq(provider_object* dev, const verbs::cq_init& init, provider_object** out, uint32_t* cqn,
                 uint32_t* depth, std::string* why) {
  auto* d = static_cast<device_obj*>(dev);
  if (status s = need_devx(d, "a CQ in caller-placed memory", why); s != status::ok) return s;
  if (init.depth > (1u << 22)) {
    *why = "depth " + std::to_string(init.depth) + " exceeds 4194304 CQEs";
    return status::invalid;
  }
  const uint32_t n = std::bit_ceil(init.depth);
  auto* c = new cq_obj;
  c->ops = &ops;
  c->dev = d;
  c->log_n = static_cast<uint32_t>(std::countr_zero(n));
  uint32_t uar_page = 0, eqn = 0;
  status st = c->ring.place(init.ring, size_t{n} * prm::cqe_bytes, "cq ring", why);
  // The doorbell record sits with the ring (same kind of memory), in its own page.
  if (st == status::ok) st = c->dbr.allocate(init.ring.kind, 64, "cq doorbell record", why);
  // Every CQE starts INVALID with owner 1 (spec 5.4): 0xF1 in every byte is what DOCA
  // writes, and it leaves op_own = 0xF1 in each entry.
  if (st == status::ok) st = c->ring.fill(prm::cqe_op_own_init, why);
  if (st == status::ok) st = register_umem(d, c->ring, "cq ring", &c->ring_umem, why);
  if (st == status::ok) st = register_umem(d, c->dbr, "cq doorbell record", &c->dbr_umem, why);
  if (st == status::ok) st = cq_resources(d, &uar_page, &eqn, why);
  if (st != status::ok) {
    release_cq(c);
    return st;
  }
  prm_cmd::cq_params p;
  p.log_cq_size = c->log_n;
  p.uar_page = uar_page;
  p.eqn = eqn;
  p.log_page_size = 0;  // 4 KiB umem pages
  p.overrun_ignore = init.ignore_overrun;
  p.cq_umem_id = c->ring_umem->umem_id;
  p.dbr_umem_id = c->dbr_umem->umem_id;
  const auto in = prm_cmd::build_create_cq(p);
  uint8_t outbuf[prm_cmd::size::create_cq_out] = {};
  errno = 0;
  c->obj = d->dv->devx_obj_create(d->ctx, in.data(), in.size(), outbuf, sizeof outbuf);
  st = check_cmd(prm_cmd::op::create_cq, c->obj == nullptr ? (errno != 0 ? errno : EIO) : 0, outbuf, sizeof outbuf,
                 "mlx5dv_devx_obj_create", why);
  if (st != status::ok) {
    release_cq(c);
    return st;
  }
  c->cqn = prm_cmd::parse_cqn(outbuf);
  *cqn = c->cqn;
  *depth = n;
  *out = c;
  return status::ok;
}

status destroy_cq(provider_object* cq) {
  release_cq(static_cast<cq_obj*>(cq));
  return status::ok;
}

status export_cq(provider_object* cq, dev::cq_handle* out, std::string*) {
  auto* c = static_cast<cq_obj*>(cq);
  *out = dev::cq_handle{};
  out->cqes = reinterpret_cast<prm::cqe64*>(c->ring.data());
  out->dbrec = reinterpret_cast<prm::cq_dbrec*>(c->dbr.data());
  out->log_cqe_cnt = c->log_n;
  out->cqn = c->cqn;
  // The consumer index the NIC knows: 0 for a fresh CQ, else where the pollers (and any
  // discard of a reset QP's CQEs) left it, so a handle exported again after a QP's RESET
  // starts past the discarded CQEs. 24 bits give the slot and the owner lap (depth <= 2^22).
  // A GPU-memory record is not CPU-readable; such a CQ is only exported fresh (its QPs'
  // RESET is refused, see discard_qp_completions).
  out->ci = c->dbr.kind() == verbs::memory_kind::device
                ? 0
                : prm::cq_dbrec_ci(*reinterpret_cast<const prm::cq_dbrec*>(c->dbr.data()));
  return status::ok;
}

status discard_qp_completions(cq_obj* c, uint32_t qpn, dev::srq_handle* srq, std::string* why) {
  if (c->ring.kind() == verbs::memory_kind::device || c->dbr.kind() == verbs::memory_kind::device) {
    *why = "cq " + std::to_string(c->cqn) + ": discarding the CQEs of qp " + std::to_string(qpn) +
           " needs its ring and doorbell record CPU-reachable; they are in GPU memory (place the CQ in host-pinned "
           "memory to reset or destroy its QPs while the CQ lives)";
    return status::not_supported;
  }
  auto* dbr = reinterpret_cast<prm::cq_dbrec*>(c->dbr.data());
  const uint32_t ci = prm::cq_dbrec_ci(*dbr);
  const uint32_t dropped = prm::cq_discard_qp_cqes(reinterpret_cast<prm::cqe64*>(c->ring.data()), c->log_n, ci, qpn,
                                                   prm::srq_wqe_returner(srq));
  prm::cq_clean_publish(dbr, ci, dropped);
  return status::ok;
}

status cq_in_error(provider_object* cq, bool* out) {
  auto* c = static_cast<cq_obj*>(cq);
  // QUERY_CQ's cq_context.status: the NIC sets it on overrun (without oi) or a failed CQE
  // write. [unverified] on hardware.
  const auto in = prm_cmd::build_query_cq(c->cqn);
  uint8_t outbuf[prm_cmd::size::query_cq_out] = {};
  const int rc = c->dev->dv->devx_obj_query(c->obj, in.data(), in.size(), outbuf, sizeof outbuf);
  std::string why;
  if (status s = check_cmd(prm_cmd::op::query_cq, rc, outbuf, sizeof outbuf, "mlx5dv_devx_obj_query", &why);
      s != status::ok) {
    return s;
  }
  *out = prm_cmd::parse_query_cq_status(outbuf) != prm_cmd::cq_status_ok;
  return status::ok;
}

}  // namespace gdaki::mlx5

// Shared receive queues of the mlx5 provider as DEVX RMPs (docs/mlx5.md, "Shared receive
// queues"): the WQE ring and its doorbell record live in memory gdaki places, the ring's
// free list is linked WQE i -> i + 1 (the last back to 0) before the NIC sees it, as
// rdma-core's mlx5 SRQ creation does, both are registered as umems, then CREATE_RMP with a
// linked-list WQ. The export gives the data path the same geometry the soft provider
// gives, so dev::srq_post / dev::srq_free run unchanged against it.
#include <algorithm>
#include <bit>
#include <cerrno>

#include "gdaki/prm/endian.hpp"
#include "gdaki/prm/wqe.hpp"
#include "mlx5_objects.hpp"
#include "mlx5_ops.hpp"
#include "mlx5_prm_cmd.hpp"

namespace gdaki::mlx5 {

namespace {

uint32_t srq_log2_ceil(uint32_t v) { return static_cast<uint32_t>(std::countr_zero(std::bit_ceil(v))); }

void release_srq(srq_obj* s) {
  const mlx5dv_api* dv = s->pd->dev->dv;
  if (s->obj != nullptr) dv->devx_obj_destroy(s->obj);
  if (s->ring_umem != nullptr) dv->devx_umem_dereg(s->ring_umem);
  if (s->dbr_umem != nullptr) dv->devx_umem_dereg(s->dbr_umem);
  delete s;
}

}  // namespace

status create_srq(provider_object* pdo, const verbs::srq_init& in, provider_object** out, uint32_t* srqn,
                  verbs::srq_caps* caps, std::string* why) {
  auto* pd = static_cast<pd_obj*>(pdo);
  device_obj* d = pd->dev;
  if (!d->devx) {
    *why = "a shared receive queue in caller-placed memory needs DEVX, which this device context does not allow";
    return status::not_supported;
  }
  if (in.ring.kind == verbs::memory_kind::device) {
    *why = "shared receive queue: the CPU links the ring's free list at creation, so the ring must be in host or "
           "host_pinned memory, not device memory";
    return status::not_supported;
  }
  auto* s = new srq_obj;
  s->ops = &ops;
  s->pd = pd;
  // The soft provider's geometry: max_wr + 1 WQEs (the free list keeps one, as rdma-core
  // sizes its SRQs), a 16-byte next segment and max_sge data segments per WQE.
  s->log_n = srq_log2_ceil(in.max_wr + 1);
  s->log_stride = std::max(5u, srq_log2_ceil(16 * (1 + in.max_sge)));
  s->max_sge = (1u << s->log_stride) / 16 - 1;
  const uint32_t n = 1u << s->log_n;
  status st = s->ring.place(in.ring, size_t{n} << s->log_stride, "srq ring", why);
  // The doorbell record sits with the ring (same kind of memory), in its own zeroed page:
  // its receive word counts posted WQEs, and the NIC reads it from WQE 0 on.
  if (st == status::ok) st = s->dbr.allocate(in.ring.kind, 64, "srq doorbell record", why);
  if (st == status::ok) st = s->ring.fill(0, why);
  if (st == status::ok) prm::link_srq_ring(s->ring.data(), n, s->log_stride);
  if (st == status::ok) st = register_umem(d, s->ring, "srq ring", &s->ring_umem, why);
  if (st == status::ok) st = register_umem(d, s->dbr, "srq doorbell record", &s->dbr_umem, why);
  if (st != status::ok) {
    release_srq(s);
    return st;
  }
  prm_cmd::rmp_params p;
  p.pdn = pd->pdn;
  p.log_wq_size = s->log_n;
  p.log_wq_stride = s->log_stride;
  p.log_page_size = 0;  // 4 KiB umem pages
  p.wq_umem_id = s->ring_umem->umem_id;
  p.dbr_umem_id = s->dbr_umem->umem_id;
  const auto cmd = prm_cmd::build_create_rmp(p);
  uint8_t outbuf[prm_cmd::size::create_rmp_out] = {};
  errno = 0;
  s->obj = d->dv->devx_obj_create(d->ctx, cmd.data(), cmd.size(), outbuf, sizeof outbuf);
  st = check_cmd(prm_cmd::op::create_rmp, s->obj == nullptr ? (errno != 0 ? errno : EIO) : 0, outbuf, sizeof outbuf,
                 "mlx5dv_devx_obj_create", why);
  if (st != status::ok) {
    *why = "shared receive queue (an RMP on " + d->name + "): " + *why;
    release_srq(s);
    return st;
  }
  s->srqn = prm_cmd::parse_rmpn(outbuf);
  *srqn = s->srqn;
  *caps = verbs::srq_caps::of_ring(n, s->log_stride, s->max_sge);
  *out = s;
  return status::ok;
}

status destroy_srq(provider_object* so) {
  auto* s = static_cast<srq_obj*>(so);
  // verbs::srq::destroy refuses while a QP holds the SRQ (every QP created on it keeps a
  // reference), so this is a second guard for callers of the ops table: the NIC may still
  // take WQEs from the ring for a QP that names the RMP.
  if (s->qps.load(std::memory_order_acquire) != 0) return status::busy;
  release_srq(s);
  return status::ok;
}

status set_srq_free_list(provider_object* so, dev::srq_handle* list) {
  static_cast<srq_obj*>(so)->free_list.store(list, std::memory_order_release);
  return status::ok;
}

status export_srq(provider_object* so, dev::srq_handle* out, std::string*) {
  auto* s = static_cast<srq_obj*>(so);
  *out = dev::srq_handle{};
  out->buf = s->ring.data();
  out->log_wqes = s->log_n;
  out->log_stride = s->log_stride;
  out->dbrec = reinterpret_cast<prm::qp_dbrec*>(s->dbr.data());
  out->srqn = s->srqn;
  out->max_sge = s->max_sge;
  return status::ok;
}

}  // namespace gdaki::mlx5

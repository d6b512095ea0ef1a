// Shared receive queues of the soft provider: the WQE ring (placed as RQ rings are), its
// doorbell record, and the links of the initial free list.
#include <algorithm>
#include <atomic>
#include <bit>

#include "gdaki/prm/endian.hpp"
#include "gdaki/prm/wqe.hpp"
#include "soft_objects.hpp"
#include "soft_ops.hpp"

namespace gdaki::soft {

namespace {
uint32_t srq_log2_ceil(uint32_t v) { return static_cast<uint32_t>(std::countr_zero(std::bit_ceil(v))); }

uint32_t next_srqn() {
  static std::atomic<uint32_t> n{1};
  return n.fetch_add(1, std::memory_order_relaxed) & 0xffffff;
}
}  // namespace

status create_srq(provider_object* pdo, const verbs::srq_init& in, provider_object** out, uint32_t* srqn,
                  verbs::srq_caps* caps, std::string* why) {
  auto* p = static_cast<soft_pd*>(pdo);
  auto s = std::make_unique<soft_srq>();
  s->ops = &ops;
  s->dev = p->dev;
  s->pd = p;
  // One WQE more than asked: the free list always keeps one (srq_handle), as rdma-core's
  // mlx5 provider sizes its SRQs (max_wr + 1).
  s->log_n = srq_log2_ceil(in.max_wr + 1);
  s->log_stride = std::max(5u, srq_log2_ceil(16 * (1 + in.max_sge)));
  s->max_sge = (1u << s->log_stride) / 16 - 1;
  status st = s->ring.place(in.ring, size_t{1} << (s->log_n + s->log_stride), "srq ring", why);
  if (st == status::ok) st = s->dbr_mem.allocate(64, why);
  if (st != status::ok) return st;
  s->wqes = s->ring.data();
  s->dbrec = reinterpret_cast<prm::qp_dbrec*>(s->dbr_mem.data());
  // The initial free list is the ring in order (WQE i links to i + 1, the last to 0);
  // the data path's handles start with head 0 and tail at the last WQE.
  const uint32_t n = 1u << s->log_n;
  prm::link_srq_ring(s->wqes, n, s->log_stride);
  s->srqn = next_srqn();
  *srqn = s->srqn;
  *caps = verbs::srq_caps::of_ring(n, s->log_stride, s->max_sge);
  *out = s.release();
  return status::ok;
}

status destroy_srq(provider_object* so) {
  // The control path destroys an SRQ only after every QP that used it (their references
  // keep it alive), and a destroyed QP's responder no longer runs.
  delete static_cast<soft_srq*>(so);
  return status::ok;
}

status set_srq_free_list(provider_object* so, dev::srq_handle* list) {
  static_cast<soft_srq*>(so)->free_list.store(list, std::memory_order_release);
  return status::ok;
}

status export_srq(provider_object* so, dev::srq_handle* out, std::string*) {
  auto* s = static_cast<soft_srq*>(so);
  *out = dev::srq_handle{};
  out->buf = s->wqes;
  out->log_wqes = s->log_n;
  out->log_stride = s->log_stride;
  out->dbrec = s->dbrec;
  out->srqn = s->srqn;
  out->max_sge = s->max_sge;
  return status::ok;
}

}  // namespace gdaki::soft

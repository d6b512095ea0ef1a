// Completion queues of the soft provider.
#include <bit>
#include <cstring>

#include "core/cq_clean.hpp"
#include "engine/engine.hpp"
#include "soft_objects.hpp"
#include "soft_ops.hpp"
#include "soft_tables.hpp"

namespace gdaki::soft {

status create_cq(provider_object* dev, const verbs::cq_init& init, provider_object** out, uint32_t* cqn,
                 uint32_t* depth, std::string* why) {
  if (init.depth > (1u << 22)) {
    *why = "depth " + std::to_string(init.depth) + " exceeds max_cqe 4194304";
    return status::invalid;
  }
  auto c = std::make_unique<soft_cq>();
  c->ops = &ops;
  c->dev = static_cast<soft_device*>(dev);
  const uint32_t n = std::bit_ceil(init.depth);
  c->log_n = static_cast<uint32_t>(std::countr_zero(n));
  c->ignore_overrun = init.ignore_overrun;
  status st = c->ring.place(init.ring, size_t{n} * prm::cqe_bytes, "cq ring", why);
  if (st != status::ok) return st;
  st = c->dbr_mem.allocate(64, why);
  if (st != status::ok) return st;
  c->cqes = reinterpret_cast<prm::cqe64*>(c->ring.data());
  c->dbrec = reinterpret_cast<prm::cq_dbrec*>(c->dbr_mem.data());
  // Every entry starts as INVALID with owner 1 (PRM 5.4): neither an owner-only poller
  // nor an opcode-checking one sees a CQE on lap 0 before the NIC writes it.
  for (uint32_t i = 0; i < n; ++i) c->cqes[i].op_own = prm::cqe_op_own_init;
  c->cqn = next_cqn();
  *cqn = c->cqn;
  *depth = n;
  *out = c.release();
  return status::ok;
}

status destroy_cq(provider_object* cq) {
  auto* c = static_cast<soft_cq*>(cq);
  // QPs are destroyed before their CQs (the control path holds references), so no writer
  // can still reach this CQ; take the lock anyway so a late writer would see `dead`.
  {
    std::lock_guard lk(c->mu);
    c->dead = true;
  }
  delete c;
  return status::ok;
}

status export_cq(provider_object* cq, dev::cq_handle* out, std::string*) {
  auto* c = static_cast<soft_cq*>(cq);
  *out = dev::cq_handle{};
  out->cqes = c->cqes;
  out->dbrec = c->dbrec;
  out->log_cqe_cnt = c->log_n;
  out->cqn = c->cqn;
  // Where the pollers (and any discard of a reset QP's CQEs) left the consumer index: 0
  // for a fresh CQ; after a QP's RESET the handle exported again starts past what was
  // discarded, as on mlx5 (24 bits give the slot and the owner lap: depth <= 2^22).
  out->ci = prm::cq_dbrec_ci(*c->dbrec);
  return status::ok;
}

void discard_qp_cqes(soft_cq& cq, uint32_t qpn, dev::srq_handle* srq) {
  // Under the producer lock: no CQE is written meanwhile, for this QP or another.
  std::lock_guard lk(cq.mu);
  if (cq.dead) return;
  const uint32_t ci = prm::cq_dbrec_ci(*cq.dbrec);
  const uint32_t dropped = prm::cq_discard_qp_cqes(cq.cqes, cq.log_n, ci, qpn, prm::srq_wqe_returner(srq));
  prm::cq_clean_publish(cq.dbrec, ci, dropped);
}

status cq_in_error(provider_object* cq, bool* out) {
  *out = static_cast<soft_cq*>(cq)->error.load();
  return status::ok;
}

}  // namespace gdaki::soft

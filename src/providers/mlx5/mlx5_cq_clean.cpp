// Discarding a QP's CQEs from a CQ ring (see mlx5_cq_clean.hpp). The facts come from
// rdma-core's providers/mlx5 (its cq clean: walk from the newest software-owned CQE back
// to the consumer index, drop the QP's, copy the others forward by the number dropped,
// keep each destination's owner bit, advance the consumer index); the code is ours.
#include "mlx5_cq_clean.hpp"

#include <atomic>
#include <cstring>

namespace gdaki::mlx5 {

namespace {

constexpr size_t qpn_offset = 56;  // sop_drop_qpn / s_wqe_opcode_qpn (PRM 5.3)

// Written by the NIC and not yet consumed: the opcode is not INVALID and the owner bit
// is the lap's (PRM 5.4), the test cq.hpp's pollers make.
bool software_owned(const prm::cqe64& cqe, uint32_t log_n, uint32_t pos) {
  const uint8_t op_own = cqe.op_own;
  return prm::cqe_opcode_of(op_own) != prm::cqe_opcode::invalid &&
         (op_own & prm::cqe_owner_mask) == ((pos >> log_n) & 1u);
}

}  // namespace

uint32_t cqe_qpn(const prm::cqe64& cqe) {
  uint32_t raw = 0;
  std::memcpy(&raw, reinterpret_cast<const uint8_t*>(&cqe) + qpn_offset, sizeof raw);
  return prm::from_be(prm::be32{raw}) & 0xffffff;
}

uint32_t cq_dbrec_ci(const prm::cq_dbrec& dbr) { return prm::from_be(dbr.set_ci) & prm::cq_ci_mask; }

uint32_t cq_discard_qp_cqes(prm::cqe64* ring, uint32_t log_n, uint32_t ci, uint32_t qpn) {
  const uint32_t n = 1u << log_n;
  const uint32_t mask = n - 1;
  // The producer end: the first slot the NIC has not written for this lap (at most a
  // full ring past ci).
  uint32_t producer = ci;
  while (producer - ci < n && software_owned(ring[producer & mask], log_n, producer)) ++producer;
  // The CQE bodies are read only after their owner bytes said the NIC finished them.
  std::atomic_thread_fence(std::memory_order_acquire);
  uint32_t dropped = 0;
  for (uint32_t pos = producer; pos != ci;) {
    --pos;
    prm::cqe64& cqe = ring[pos & mask];
    if (cqe_qpn(cqe) == (qpn & 0xffffff)) {
      ++dropped;
    } else if (dropped != 0) {
      // The destination lies in [pos, producer), so it is software-owned too and its
      // owner bit is the one its slot needs on this lap; the source's may differ when the
      // move crosses the ring's end.
      prm::cqe64& dest = ring[(pos + dropped) & mask];
      const uint8_t owner = dest.op_own & prm::cqe_owner_mask;
      std::memcpy(&dest, &cqe, sizeof dest);
      dest.op_own = static_cast<uint8_t>((dest.op_own & ~prm::cqe_owner_mask) | owner);
    }
  }
  return dropped;
}

void cq_clean_publish(prm::cq_dbrec* dbr, uint32_t ci, uint32_t dropped) {
  if (dropped == 0) return;
  std::atomic_thread_fence(std::memory_order_release);
  const uint32_t next = (ci + dropped) & prm::cq_ci_mask;
  std::atomic_ref<uint32_t>(dbr->set_ci.raw).store(prm::to_be32(next).raw, std::memory_order_release);
}

}  // namespace gdaki::mlx5

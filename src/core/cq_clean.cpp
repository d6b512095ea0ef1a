// Discarding a QP's CQEs from a CQ ring (see cq_clean.hpp). The facts come from
// rdma-core's providers/mlx5 (its cq clean: walk from the newest software-owned CQE back
// to the consumer index, drop the QP's, copy the others forward by the number dropped,
// keep each destination's owner bit, advance the consumer index); the code is ours.
#include "core/cq_clean.hpp"

#include <atomic>
#include <cstring>

#include "gdaki/device/sq.hpp"

namespace gdaki::prm {

namespace {

constexpr size_t qpn_offset = 56;  // sop_drop_qpn / s_wqe_opcode_qpn (PRM 5.3)

// Written by the NIC and not yet consumed: the opcode is not INVALID and the owner bit
// is the lap's (PRM 5.4), the test cq.hpp's pollers make.
bool software_owned(const cqe64& cqe, uint32_t log_n, uint32_t pos) {
  const uint8_t op_own = cqe.op_own;
  return cqe_opcode_of(op_own) != cqe_opcode::invalid &&
         (op_own & cqe_owner_mask) == ((pos >> log_n) & 1u);
}

}  // namespace

uint32_t cqe_qpn(const cqe64& cqe) {
  uint32_t raw = 0;
  std::memcpy(&raw, reinterpret_cast<const uint8_t*>(&cqe) + qpn_offset, sizeof raw);
  return from_be(be32{raw}) & 0xffffff;
}

uint32_t cq_dbrec_ci(const cq_dbrec& dbr) { return from_be(dbr.set_ci) & cq_ci_mask; }

bool cqe_is_responder(const cqe64& cqe) {
  switch (cqe_opcode_of(cqe.op_own)) {
    case cqe_opcode::resp_wr_imm:
    case cqe_opcode::resp_send:
    case cqe_opcode::resp_send_imm:
    case cqe_opcode::resp_send_inv:
    case cqe_opcode::resp_err:
      return true;
    default:
      return false;
  }
}

uint32_t cq_discard_qp_cqes(cqe64* ring, uint32_t log_n, uint32_t ci, uint32_t qpn,
                            const std::function<void(const cqe64&)>& dropped_cqe) {
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
    cqe64& cqe = ring[pos & mask];
    if (cqe_qpn(cqe) == (qpn & 0xffffff)) {
      if (dropped_cqe) dropped_cqe(cqe);
      ++dropped;
    } else if (dropped != 0) {
      // The destination lies in [pos, producer), so it is software-owned too and its
      // owner bit is the one its slot needs on this lap; the source's may differ when the
      // move crosses the ring's end.
      cqe64& dest = ring[(pos + dropped) & mask];
      const uint8_t owner = dest.op_own & cqe_owner_mask;
      std::memcpy(&dest, &cqe, sizeof dest);
      dest.op_own = static_cast<uint8_t>((dest.op_own & ~cqe_owner_mask) | owner);
    }
  }
  return dropped;
}

void cq_clean_publish(cq_dbrec* dbr, uint32_t ci, uint32_t dropped) {
  if (dropped == 0) return;
  std::atomic_thread_fence(std::memory_order_release);
  const uint32_t next = (ci + dropped) & cq_ci_mask;
  std::atomic_ref<uint32_t>(dbr->set_ci.raw).store(to_be32(next).raw, std::memory_order_release);
}

std::function<void(const cqe64&)> srq_wqe_returner(dev::srq_handle* srq) {
  if (srq == nullptr) return {};
  return [srq](const cqe64& cqe) {
    if (cqe_is_responder(cqe)) dev::srq_free(*srq, from_be(cqe.wqe_counter));
  };
}

}  // namespace gdaki::prm

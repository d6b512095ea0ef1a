// internal: discarding a QP's completions from a CQ ring when the QP goes to RESET or is
// destroyed, the step rdma-core's mlx5 provider calls cq clean. Without it the next user
// of the CQ (the same QP after RESET->INIT->RTR->RTS, or another QP on a shared receive
// CQ) reads completions of WQEs that no longer exist: on the send CQ their wqe_counter
// names WQEBBs of a ring that restarted at 0. docs/mlx5.md, "RESET".
#pragma once

#include <cstdint>

#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/dbr.hpp"

namespace gdaki::mlx5 {

// The QP number a CQE names: bits 23..0 of byte 56, where both the normal CQE
// (sop_drop_qpn) and the error CQE (s_wqe_opcode_qpn) keep it.
uint32_t cqe_qpn(const prm::cqe64& cqe);

// Drops every software-owned CQE of `qpn` from the 2^log_n-entry ring whose consumer index
// is `ci` (the 24-bit value of the CQ doorbell record; the ring's position and owner lap
// follow from it because 2^log_n <= 2^22 divides 2^24). The CQEs the NIC has written and
// no poller consumed yet are [ci, producer); the ones kept move towards the producer end,
// in order, each keeping the owner bit its new slot needs, so that they end up as
// [ci + dropped, producer). Returns how many were dropped; the caller then advances the
// consumer index by that much (cq_clean_publish). The ring must be CPU-reachable and no
// poller may run on it meanwhile.
uint32_t cq_discard_qp_cqes(prm::cqe64* ring, uint32_t log_n, uint32_t ci, uint32_t qpn);

// The consumer index a CQ doorbell record holds (24 bits, host order).
uint32_t cq_dbrec_ci(const prm::cq_dbrec& dbr);

// Stores ci + dropped into the doorbell record, after the moved CQEs (release), so the NIC
// never sees the index pass CQEs still being rewritten.
void cq_clean_publish(prm::cq_dbrec* dbr, uint32_t ci, uint32_t dropped);

}  // namespace gdaki::mlx5

// internal: discarding a QP's completions from a CQ ring when the QP goes to RESET or is
// destroyed, the step rdma-core's mlx5 provider calls cq clean. Without it the next user
// of the CQ (the same QP after RESET->INIT->RTR->RTS, or another QP on a shared receive
// CQ) reads completions of WQEs that no longer exist: on the send CQ their wqe_counter
// names WQEBBs of a ring that restarted at 0. Both providers use it (their CQ rings have
// the same format): docs/mlx5.md "RESET", docs/soft-nic.md.
#pragma once

#include <cstdint>
#include <functional>

#include "gdaki/device/handles.hpp"
#include "gdaki/prm/cqe.hpp"
#include "gdaki/prm/dbr.hpp"

namespace gdaki::prm {

// The QP number a CQE names: bits 23..0 of byte 56, where both the normal CQE
// (sop_drop_qpn) and the error CQE (s_wqe_opcode_qpn) keep it.
uint32_t cqe_qpn(const cqe64& cqe);

// Whether a CQE reports a receive (the responder side): RESP_WR_IMM, RESP_SEND,
// RESP_SEND_IMM, RESP_SEND_INV or RESP_ERR. On a QP that receives from an SRQ such a CQE
// holds an SRQ WQE (wqe_counter) until it is polled.
bool cqe_is_responder(const cqe64& cqe);

// Drops every software-owned CQE of `qpn` from the 2^log_n-entry ring whose consumer index
// is `ci` (the 24-bit value of the CQ doorbell record; the ring's position and owner lap
// follow from it because 2^log_n <= 2^22 divides 2^24). The CQEs the NIC has written and
// no poller consumed yet are [ci, producer); the ones kept move towards the producer end,
// in order, each keeping the owner bit its new slot needs, so that they end up as
// [ci + dropped, producer). `dropped_cqe`, if set, sees each dropped CQE before it is
// overwritten (a QP on an SRQ returns the WQE a receive CQE holds). Returns how many were
// dropped; the caller then advances the consumer index by that much (cq_clean_publish).
// The ring must be CPU-reachable and no poller may run on it meanwhile.
uint32_t cq_discard_qp_cqes(cqe64* ring, uint32_t log_n, uint32_t ci, uint32_t qpn,
                            const std::function<void(const cqe64&)>& dropped_cqe = {});

// The consumer index a CQ doorbell record holds (24 bits, host order).
uint32_t cq_dbrec_ci(const cq_dbrec& dbr);

// Stores ci + dropped into the doorbell record, after the moved CQEs (release), so the NIC
// never sees the index pass CQEs still being rewritten.
void cq_clean_publish(cq_dbrec* dbr, uint32_t ci, uint32_t dropped);

// The clean-up of a QP that receives from an SRQ: returns the SRQ WQE a dropped receive
// CQE holds to the free list `srq` (dev::srq_free), as rdma-core's cq clean does, so a
// RESET or destroy does not cost the SRQ a WQE per unpolled receive. Null `srq` (the free
// list is not one the CPU tracks, e.g. an exported handle a kernel drives): nothing.
std::function<void(const cqe64&)> srq_wqe_returner(dev::srq_handle* srq);

}  // namespace gdaki::prm

// internal: the SQ executor. progress_qp() consumes the WQEs a QP's doorbell record
// covers, in order, each to completion (which satisfies every fence mode), and writes
// their CQEs; in ERR it flushes the SQ and RQ instead. The caller holds qp.exec_mu.
#pragma once

#include <cstdint>

namespace gdaki::soft {

struct soft_qp;

struct progress_result {
  bool worked = false;    // consumed WQEs or wrote CQEs
  bool pending = false;   // WQEs are left (budget spent or stalled)
  uint64_t deadline = 0;  // stalled until this steady-clock ns (0 = not stalled)
};

progress_result progress_qp(soft_qp& qp, uint32_t budget);

// Lock-free check: does the QP have anything for the executor? (new WQEBBs, new receive
// WQEs to flush in ERR, or a stall that has expired). *deadline gets a pending stall.
bool has_work(soft_qp& qp, uint64_t now_ns, uint64_t* deadline);

// Moves a QP to ERR from the NIC side and flushes its receive queue. The caller holds
// qp.resp_mu.
void enter_error_locked_resp(soft_qp& qp);

uint64_t now_ns();

}  // namespace gdaki::soft

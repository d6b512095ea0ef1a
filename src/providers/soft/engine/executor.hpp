// internal: the SQ executor. progress_qp() consumes the WQEs a QP's doorbell record
// covers, in order, and writes their CQEs; in ERR it flushes the SQ and RQ instead. Local
// peers: each WQE runs to completion before the next (which satisfies every fence mode).
// Remote peers: WQEs are pipelined on the wire and complete in order; a fenced WQE waits
// for every earlier one. The caller holds qp.exec_mu.
#pragma once

#include <cstdint>

namespace gdaki::soft {

struct soft_qp;

struct progress_result {
  bool worked = false;    // consumed WQEs or wrote CQEs
  bool pending = false;   // WQEs are left (budget spent or stalled)
  uint64_t deadline = 0;  // stalled until this steady-clock ns (0 = not stalled)
  int wait_fd = -1;       // waiting for responses on this wire socket (poll it, no lock held)
};

// Who may block in progress_qp, and on what. Only remote QPs (the wire) ever block.
enum class wire_wait : uint8_t {
  never,     // engine threads: a QP waiting for responses returns wait_fd instead
  window,    // a CPU thread that rang the doorbell: WQEs that do not fit in the window
             // wait for responses here, as a blocking send() would
  response,  // a CPU thread polling an empty CQ: wait once (briefly) for a response
};

// Remote QPs keep up to config::wire_window requests in flight and retire them as their
// responses come.
progress_result progress_qp(soft_qp& qp, uint32_t budget, wire_wait wait = wire_wait::never);

// A CPU thread's doorbell on a remote QP whose new WQEs the mapped short path takes
// whole (the shared-memory wire's small WRITEs, signals and flushes, nothing in flight):
// executes them under the QP's try-lock without the general loop's steps. Returns true
// when the doorbell record's WQEs were all executed and nothing was rung meanwhile; false
// when the general path (engine::on_doorbell) must run, which finds whatever is left.
bool short_doorbell(soft_qp& qp);

// Lock-free check: does the QP have anything for the executor? (new WQEBBs, new receive
// WQEs to flush in ERR, or a stall that has expired). *deadline gets a pending stall.
// now_ns = 0: the caller has no clock reading; timed conditions count as not expired.
bool has_work(soft_qp& qp, uint64_t now_ns, uint64_t* deadline);

// Moves a QP to ERR from the NIC side and flushes its receive queue. The caller holds
// qp.resp_mu.
void enter_error_locked_resp(soft_qp& qp);

// Takes back the mappings peers were granted through this QP: a peer's WRITE or READ into
// them must fail from now on, as a request to this QP would. The caller holds qp.resp_mu.
void revoke_grants_locked_resp(soft_qp& qp);

uint64_t now_ns();

}  // namespace gdaki::soft

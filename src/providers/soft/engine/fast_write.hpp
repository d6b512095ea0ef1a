// internal: the in-process executor's short path for the commonest WQE, an RDMA WRITE of
// one pointer or one inline data segment to a QP of this process. It makes exactly the
// checks the general path makes (wqe_index, DS, key, PD, bounds and access on both sides,
// the responder's state and connection) and, when every one passes, moves the bytes and
// writes the same requester CQE. When any check fails, or the WQE has another shape, it
// does nothing and the caller runs the general path, which then reports the error with
// its usual syndrome: the short path only ever takes the successful case.
//
// Why: a small WRITE spent ~800 instructions in the general path (a 30-entry gather list
// built per WQE, generic parse, copy loop, reference counting on the peer), against ~150
// for the same work done straight (docs/performance.md, "Where the time of one 8 B put
// goes").
#pragma once

#include <cstdint>

namespace gdaki::soft {

struct soft_qp;
class wqe_reader;
struct parsed_wqe;

// Tries to execute the WQE at qp.sq_ci, whose control segment `ctrl` holds (parse_ctrl;
// the caller has checked that its WQEBBs are published). The caller holds qp.exec_mu; qp
// is RTS and not stalled. Returns true when the WRITE was executed (the bytes are in
// place; *bytes is its length, for the CQE the caller writes if ctrl asks for one), false
// when nothing was done and the general path must run.
bool try_fast_write(soft_qp& qp, const wqe_reader& r, const parsed_wqe& ctrl, uint32_t* bytes);

}  // namespace gdaki::soft
